//! Two processes talking through rzmq: a REP server and REQ clients in child processes.
//!
//! `cargo run --release -p rzmq-core --example demo` starts the server on an ephemeral tcp port,
//! then runs itself as a client twice: once as a normal rzmq peer, whose connection moves to RDMA
//! after the ZMTP handshake (the software RC provider when the machine has no RDMA NIC), and once
//! with `RZMQ_RDMA=off`, as a peer without RDMA would be, whose connection stays on TCP. Each
//! client exchanges requests up to 4 MiB; the server reverses them and the client verifies every
//! reply. The server prints the transport each connection chose (monitor events) and rzmq logs
//! one line per connection (`RZMQ_RDMA_LOG=1`), with its counters when it ends.
use rzmq_core::monitor;
use rzmq_core::{Context, SocketType};
use std::process::{Command, ExitCode};

fn client(endpoint: &str) -> rzmq_core::Result<()> {
    rzmq_rdma::install();
    let ctx = Context::new();
    let mut req = ctx.socket(SocketType::Req)?;
    req.connect(endpoint)?;
    for (i, size) in [5usize, 1024, 64 * 1024, 1 << 20, 4 << 20]
        .into_iter()
        .enumerate()
    {
        let payload: Vec<u8> = (0..size).map(|b| (b as u8).wrapping_add(i as u8)).collect();
        req.send(payload.clone(), 0)?;
        let reply = req.recv_msg(0)?;
        let ok = reply
            .data()
            .iter()
            .rev()
            .copied()
            .eq(payload.iter().copied());
        println!(
            "[client pid {}] sent {size} B, reply reversed and verified: {ok}",
            std::process::id()
        );
        if !ok {
            return Err(rzmq_core::Error::Inval);
        }
    }
    req.send("bye", 0)?;
    req.recv_msg(0)?;
    Ok(())
}

fn transport_name(code: u32) -> &'static str {
    match code {
        monitor::TRANSPORT_RDMA => {
            "RDMA (ZMTP handshake on TCP, then messages over an RC queue pair)"
        }
        monitor::TRANSPORT_TCP => "TCP (ZMTP 3.1; the peer offered no RDMA)",
        monitor::TRANSPORT_REFUSED => "refused (RDMA required, not possible)",
        _ => "ended",
    }
}

fn server() -> rzmq_core::Result<bool> {
    // No RDMA NIC on most laptops and CI machines: the software RC provider stands in.
    if std::env::var_os("RZMQ_RDMA_PROVIDER").is_none() {
        std::env::set_var("RZMQ_RDMA_PROVIDER", "soft");
    }
    if std::env::var_os("RZMQ_RDMA_LOG").is_none() {
        std::env::set_var("RZMQ_RDMA_LOG", "1");
    }
    std::env::set_var("RZMQ_RDMA_EVENTS", "1");
    rzmq_rdma::install();
    let ctx = Context::new();
    let mut rep = ctx.socket(SocketType::Rep)?;
    rep.monitor(Some("inproc://demo-monitor"), monitor::EVENT_TRANSPORT)?;
    let mut mon = ctx.socket(SocketType::Pair)?;
    mon.connect("inproc://demo-monitor")?;
    rep.bind("tcp://127.0.0.1:*")?;
    let endpoint = rep.last_endpoint().to_string();
    println!(
        "[server pid {}] REP bound at {endpoint}",
        std::process::id()
    );
    let exe = std::env::current_exe().map_err(rzmq_core::Error::from)?;
    let mut all_ok = true;
    for (label, rdma) in [("rzmq peer", "auto"), ("peer with RZMQ_RDMA=off", "off")] {
        println!("[server] --- client: {label} ---");
        let mut child = Command::new(&exe)
            .arg("--client")
            .arg(&endpoint)
            .env("RZMQ_RDMA", rdma)
            .spawn()
            .map_err(rzmq_core::Error::from)?;
        let mut first = true;
        loop {
            let m = rep.recv_msg(0)?;
            if first {
                // This connection's choice (skipping the end of the previous one).
                let code = loop {
                    let ev = mon.recv_multipart(0)?;
                    let d = ev[0].data();
                    let code = u32::from_ne_bytes([d[2], d[3], d[4], d[5]]);
                    if code != monitor::TRANSPORT_ENDED {
                        break code;
                    }
                };
                let peer = m
                    .property("Peer-Address")
                    .map(|v| String::from_utf8_lossy(v).into_owned());
                println!(
                    "[server] transport: {}; peer {}",
                    transport_name(code),
                    peer.unwrap_or_default()
                );
                first = false;
            }
            if m.data() == b"bye" {
                rep.send("bye", 0)?;
                break;
            }
            let reversed: Vec<u8> = m.data().iter().rev().copied().collect();
            rep.send(reversed, 0)?;
        }
        let status = child.wait().map_err(rzmq_core::Error::from)?;
        all_ok &= status.success();
        // The connection's end (and, over RDMA, its counters in the log) before the next one.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--client" {
        return match client(&args[2]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("client failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match server() {
        Ok(true) => {
            println!("demo OK: two processes exchanged and verified messages through rzmq, over RDMA and over TCP");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("demo FAILED: a client reported an error");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("demo FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

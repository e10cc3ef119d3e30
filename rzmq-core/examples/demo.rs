//! Two processes talking through rzmq: a REP server and a REQ client in a child process.
//!
//! `cargo run --release -p rzmq-core --example demo` starts the server on an ephemeral tcp port,
//! re-runs itself as the client, exchanges a few requests (up to 1 MiB) and prints what moved
//! over which transport.
use rzmq_core::{Context, SocketType};
use std::process::{Command, ExitCode};

fn client(endpoint: &str) -> rzmq_core::Result<()> {
    let ctx = Context::new();
    let mut req = ctx.socket(SocketType::Req)?;
    req.connect(endpoint)?;
    for (i, size) in [5usize, 1024, 64 * 1024, 1 << 20].into_iter().enumerate() {
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

fn server() -> rzmq_core::Result<bool> {
    let ctx = Context::new();
    let mut rep = ctx.socket(SocketType::Rep)?;
    rep.bind("tcp://127.0.0.1:*")?;
    let endpoint = rep.last_endpoint().to_string();
    println!(
        "[server pid {}] REP bound at {endpoint}",
        std::process::id()
    );
    let exe = std::env::current_exe().map_err(rzmq_core::Error::from)?;
    let mut child = Command::new(exe)
        .arg("--client")
        .arg(&endpoint)
        .spawn()
        .map_err(rzmq_core::Error::from)?;
    let mut first = true;
    loop {
        let m = rep.recv_msg(0)?;
        if first {
            let peer = m
                .property("Peer-Address")
                .map(|v| String::from_utf8_lossy(v).into_owned());
            let ty = m
                .property("Socket-Type")
                .map(|v| String::from_utf8_lossy(v).into_owned());
            println!(
                "[server] transport: tcp (ZMTP 3.1 over TCP; RDMA transport not available in this build), peer {} socket type {}",
                peer.unwrap_or_default(),
                ty.unwrap_or_default()
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
    Ok(status.success())
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
            println!("demo OK: two processes exchanged and verified messages through rzmq");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("demo FAILED: the client reported an error");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("demo FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

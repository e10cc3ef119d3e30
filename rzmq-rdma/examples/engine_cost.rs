//! The RDMA engine's own cost per message, without an emulated wire: everything runs over the
//! loopback provider (`provider::loopback`), whose posts execute at once in the poster's thread.
//!
//! `engine_cost datapath <size> <roundtrips>`: two data paths driven against each other in one
//! thread, each turn doing what rzmq-core's I/O thread does when a path's fd is readable
//! (`process`, `recv` until empty, `send`, `flush`, `arm`, `process`). No threads, no sleeping:
//! ring, rendezvous, posting and completion handling only.
//!
//! `engine_cost sockets <size> <roundtrips> [rdma|tcp]`: REQ/REP in one process, two contexts
//! (two I/O threads), over `tcp://127.0.0.1`, upgraded to RDMA over the loopback provider (or
//! left on TCP): the whole engine, pipes and wake-ups included, with a wire that costs nothing.
//!
//! Both print the one-way latency (half a round trip) in ns. Instructions: run under
//! `valgrind --tool=callgrind --toggle-collect='*engine_cost*pingpong*'` and divide the count by
//! twice the round trips (docs/BENCHMARKS.md, "RDMA engine cost").

use std::sync::Arc;
use std::time::Instant;

use rzmq_core::msg::Msg;
use rzmq_core::{Context, SocketType};
use rzmq_rdma::datapath::{ConnectInfo, DataPath, DataPathConfig};
use rzmq_rdma::provider::loopback::LoopbackProvider;
use rzmq_rdma::provider::Provider;

const USAGE: &str = "engine_cost datapath|sockets <size> <roundtrips> [rdma|tcp]";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: {USAGE}");
        std::process::exit(1);
    }
    let size: usize = args[2].parse().expect(USAGE);
    let n: usize = args[3].parse().expect(USAGE);
    let ns = match args[1].as_str() {
        "datapath" => datapath(size, n),
        "sockets" => sockets(size, n, args.get(4).map_or("rdma", |s| s.as_str())),
        _ => {
            eprintln!("usage: {USAGE}");
            std::process::exit(1);
        }
    };
    println!("{} {size} B: {ns:.0} ns one way", args[1]);
}

/// One turn of an I/O thread on a readable path: completions, input, output, arm, look again.
fn turn(dp: &mut DataPath, out: &mut Option<Msg>) -> Option<Msg> {
    dp.process().expect("process");
    let got = dp.recv().expect("recv");
    if let Some(m) = out.take() {
        if let Some(back) = dp.send(m).expect("send") {
            *out = Some(back);
        }
        dp.flush().expect("flush");
    }
    dp.arm().expect("arm");
    dp.process().expect("process");
    got
}

#[inline(never)]
fn pingpong_datapath(a: &mut DataPath, b: &mut DataPath, size: usize, n: usize) {
    let mut out_a = Some(Msg::with_size(size));
    for _ in 0..n {
        // A sends; B's turns until the frame is there; B echoes; A's turns until it is back.
        turn(a, &mut out_a);
        let mut out_b = loop {
            if let Some(m) = turn(b, &mut None) {
                break Some(m);
            }
        };
        turn(b, &mut out_b);
        loop {
            if let Some(m) = turn(a, &mut None) {
                out_a = Some(m);
                break;
            }
        }
    }
}

fn datapath(size: usize, n: usize) -> f64 {
    let p = LoopbackProvider;
    let cfg = DataPathConfig::default();
    let (mut a, ia) = DataPath::new(p.open(None).unwrap(), cfg.clone()).unwrap();
    let (mut b, ib) = DataPath::new(p.open(None).unwrap(), cfg).unwrap();
    a.connect(&ConnectInfo::from_bytes(&ib.to_bytes()).unwrap())
        .unwrap();
    b.connect(&ConnectInfo::from_bytes(&ia.to_bytes()).unwrap())
        .unwrap();
    // Warm-up: rings, pool and registration cache in their steady state.
    pingpong_datapath(&mut a, &mut b, size, 1000);
    let t = Instant::now();
    pingpong_datapath(&mut a, &mut b, size, n);
    let ns = t.elapsed().as_nanos() as f64 / (2 * n) as f64;
    assert_eq!(a.stats().msgs_rx, (n + 1000) as u64);
    let (ra, rb) = (a.stats().ring, b.stats().ring);
    let msgs = (ra.msgs_tx + rb.msgs_tx) as f64;
    eprintln!(
        "per message: {:.2} data notifications, {:.2} standalone credit updates, {:.2} piggybacked",
        (ra.notifies + rb.notifies) as f64 / msgs,
        (ra.credit_msgs + rb.credit_msgs) as f64 / msgs,
        (ra.credit_piggybacked + rb.credit_piggybacked) as f64 / msgs,
    );
    ns
}

#[inline(never)]
fn pingpong_sockets(req: &mut rzmq_core::Socket, size: usize, n: usize) {
    let mut m = Msg::with_size(size);
    for _ in 0..n {
        req.send_msg(m, 0).map_err(|(_, e)| e).expect("send");
        m = req.recv_msg(0).expect("recv");
        assert_eq!(m.len(), size);
    }
}

fn sockets(size: usize, n: usize, transport: &str) -> f64 {
    std::env::set_var(
        "RZMQ_RDMA",
        if transport == "tcp" { "off" } else { "require" },
    );
    std::env::set_var("RZMQ_RDMA_PROVIDER", "loopback");
    rzmq_rdma::install();
    let rep_ctx = Arc::new(Context::new());
    let mut rep = rep_ctx.socket(SocketType::Rep).expect("socket");
    rep.bind("tcp://127.0.0.1:*").expect("bind");
    let ep = rep.last_endpoint().to_string();
    let total = n + 1000;
    let echo = std::thread::spawn(move || {
        for _ in 0..total {
            let m = rep.recv_msg(0).expect("recv");
            rep.send_msg(m, 0).map_err(|(_, e)| e).expect("send");
        }
    });
    let ctx = Context::new();
    let mut req = ctx.socket(SocketType::Req).expect("socket");
    req.connect(&ep).expect("connect");
    pingpong_sockets(&mut req, size, 1000);
    let t = Instant::now();
    pingpong_sockets(&mut req, size, n);
    let ns = t.elapsed().as_nanos() as f64 / (2 * n) as f64;
    echo.join().expect("echo");
    drop(req);
    ns
}

//! In-process latency with libzmq's `inproc_lat` command line and output, on rzmq-tokio: the
//! echo side on its own thread and runtime, as libzmq's tool uses a thread.
//!
//! `async_inproc_lat <message-size> <roundtrip-count>`
use std::time::Instant;

use rzmq_core::{Context, Msg, SocketType};
use rzmq_tokio::AsyncSocket;

#[path = "perf/mod.rs"]
mod perf;
use perf::*;

fn main() {
    let a = Args::inproc("inproc_lat");
    let ctx = Context::new();
    let mut req = check(ctx.socket(SocketType::Req), "zmq_socket");
    check(req.bind("inproc://lat_test"), "zmq_bind");
    let (c2, count) = (ctx.clone(), a.count);
    let worker = std::thread::spawn(move || {
        block_on(async {
            let mut r = check(
                AsyncSocket::new(check(c2.socket(SocketType::Rep), "zmq_socket")),
                "tokio",
            );
            check(r.connect("inproc://lat_test"), "zmq_connect");
            for _ in 0..count {
                let m = check(r.recv().await, "zmq_recvmsg");
                check(r.send(m).await, "zmq_sendmsg");
            }
        })
    });
    let elapsed = block_on(async {
        let mut s = check(AsyncSocket::new(req), "tokio");
        let mut m = Msg::with_size(a.size);
        let watch = Instant::now();
        for _ in 0..a.count {
            check(s.send(m).await, "zmq_sendmsg");
            m = check(s.recv().await, "zmq_recvmsg");
            check_size(m.len(), a.size);
        }
        watch.elapsed()
    });
    worker.join().ok();
    report_lat(a.size, a.count, elapsed);
    check(ctx.term(), "zmq_ctx_term");
}

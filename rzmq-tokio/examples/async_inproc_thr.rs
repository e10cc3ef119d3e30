//! In-process throughput with libzmq's `inproc_thr` command line and output, on rzmq-tokio:
//! the sender on its own thread and runtime, as libzmq's tool uses a thread.
//!
//! `async_inproc_thr <message-size> <message-count>`
use std::time::Instant;

use rzmq_core::{Context, Msg, SocketType};
use rzmq_tokio::AsyncSocket;

#[path = "perf/mod.rs"]
mod perf;
use perf::*;

fn main() {
    let a = Args::inproc("inproc_thr");
    let ctx = Context::new();
    let mut pull = check(ctx.socket(SocketType::Pull), "zmq_socket");
    check(pull.bind("inproc://thr_test"), "zmq_bind");
    let (c2, size, count) = (ctx.clone(), a.size, a.count);
    let worker = std::thread::spawn(move || {
        block_on(async {
            let mut s = check(
                AsyncSocket::new(check(c2.socket(SocketType::Push), "zmq_socket")),
                "tokio",
            );
            check(s.connect("inproc://thr_test"), "zmq_connect");
            for _ in 0..count {
                check(s.send(Msg::with_size_recycled(size)).await, "zmq_sendmsg");
            }
        })
    });
    let elapsed = block_on(async {
        let mut s = check(AsyncSocket::new(pull), "tokio");
        check_size(check(s.recv().await, "zmq_recvmsg").len(), a.size);
        let watch = Instant::now();
        for _ in 1..a.count {
            check_size(check(s.recv().await, "zmq_recvmsg").len(), a.size);
        }
        watch.elapsed()
    });
    worker.join().ok();
    report_thr(a.size, a.count, elapsed);
    check(ctx.term(), "zmq_ctx_term");
}

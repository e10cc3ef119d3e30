//! Throughput receiver with libzmq's `local_thr` command line and output, on rzmq-tokio.
//!
//! `async_local_thr <bind-to> <message-size> <message-count>`
use std::time::Instant;

use rzmq_core::{Context, SocketType};
use rzmq_tokio::AsyncSocket;

#[path = "perf/mod.rs"]
mod perf;
use perf::*;

fn main() {
    let a = Args::network("local_thr");
    let ctx = Context::new();
    block_on(async {
        let mut s = check(
            AsyncSocket::new(check(ctx.socket(SocketType::Pull), "zmq_socket")),
            "tokio",
        );
        check(s.bind(&a.endpoint), "zmq_bind");
        check_size(check(s.recv().await, "zmq_recvmsg").len(), a.size);
        let watch = Instant::now();
        for _ in 1..a.count {
            check_size(check(s.recv().await, "zmq_recvmsg").len(), a.size);
        }
        report_thr(a.size, a.count, watch.elapsed());
    });
    check(ctx.term(), "zmq_ctx_term");
}

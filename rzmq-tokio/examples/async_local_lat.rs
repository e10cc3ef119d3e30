//! Latency echo server with libzmq's `local_lat` command line, on rzmq-tokio.
//!
//! `async_local_lat <bind-to> <message-size> <roundtrip-count>`
use rzmq_core::{Context, SocketType};
use rzmq_tokio::AsyncSocket;

#[path = "perf/mod.rs"]
mod perf;
use perf::*;

fn main() {
    let a = Args::network("local_lat");
    let ctx = Context::new();
    block_on(async {
        let mut s = check(
            AsyncSocket::new(check(ctx.socket(SocketType::Rep), "zmq_socket")),
            "tokio",
        );
        check(s.bind(&a.endpoint), "zmq_bind");
        for _ in 0..a.count {
            let m = check(s.recv().await, "zmq_recvmsg");
            check_size(m.len(), a.size);
            check(s.send(m).await, "zmq_sendmsg");
        }
    });
    check(ctx.term(), "zmq_ctx_term");
}

//! Latency client with libzmq's `remote_lat` command line and output, on rzmq-tokio.
//!
//! `async_remote_lat <connect-to> <message-size> <roundtrip-count>`
use std::time::Instant;

use rzmq_core::{Context, Msg, SocketType};
use rzmq_tokio::AsyncSocket;

#[path = "perf/mod.rs"]
mod perf;
use perf::*;

fn main() {
    let a = Args::network("remote_lat");
    let ctx = Context::new();
    block_on(async {
        let mut s = check(
            AsyncSocket::new(check(ctx.socket(SocketType::Req), "zmq_socket")),
            "tokio",
        );
        check(s.connect(&a.endpoint), "zmq_connect");
        let mut m = Msg::with_size(a.size);
        let watch = Instant::now();
        for _ in 0..a.count {
            check(s.send(m).await, "zmq_sendmsg");
            m = check(s.recv().await, "zmq_recvmsg");
            check_size(m.len(), a.size);
        }
        report_lat(a.size, a.count, watch.elapsed());
    });
    check(ctx.term(), "zmq_ctx_term");
}

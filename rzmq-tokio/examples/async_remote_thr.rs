//! Throughput sender with libzmq's `remote_thr` command line, on rzmq-tokio: a fresh message
//! per send, as libzmq's tool does.
//!
//! `async_remote_thr <connect-to> <message-size> <message-count>`
use rzmq_core::{Context, Msg, SocketType};
use rzmq_tokio::AsyncSocket;

#[path = "perf/mod.rs"]
mod perf;
use perf::*;

fn main() {
    let a = Args::network("remote_thr");
    let ctx = Context::new();
    block_on(async {
        let mut s = check(
            AsyncSocket::new(check(ctx.socket(SocketType::Push), "zmq_socket")),
            "tokio",
        );
        check(s.connect(&a.endpoint), "zmq_connect");
        for _ in 0..a.count {
            check(s.send(Msg::with_size_recycled(a.size)).await, "zmq_sendmsg");
        }
    });
    // Closing lingers until every message is delivered, as libzmq's remote_thr does.
    check(ctx.term(), "zmq_ctx_term");
}

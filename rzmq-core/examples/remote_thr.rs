//! Throughput sender with libzmq's `remote_thr` command line: a fresh message per send.
//!
//! `remote_thr <connect-to> <message-size> <message-count>`
use rzmq_core::{Context, Msg, SocketType};

#[path = "common/perf.rs"]
mod perf_common;
use perf_common::*;

const USAGE: &str = "remote_thr <connect-to> <message-size> <message-count> [<enable_curve>]";

pub(crate) fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 && args.len() != 5 {
        println!("usage: {USAGE}");
        std::process::exit(1);
    }
    let connect_to = arg(&args, 1, USAGE);
    let size = num(&args, 2, USAGE);
    let count = num(&args, 3, USAGE);
    let ctx = Context::new();
    let mut s = check(ctx.socket(SocketType::Push), "zmq_socket");
    check(s.connect(connect_to), "zmq_connect");
    for _ in 0..count {
        // A fresh message per send, as libzmq's remote_thr does (zmq_msg_init_size: contents
        // unspecified, large sizes from recycled storage like malloc's).
        let m = Msg::with_size_recycled(size);
        check(s.send_msg(m, 0).map_err(|(_, e)| e), "zmq_sendmsg");
    }
    drop(s);
    check(ctx.term(), "zmq_ctx_term");
}

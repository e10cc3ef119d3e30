//! Latency echo side with libzmq's `local_lat` command line.
//!
//! `local_lat <bind-to> <message-size> <roundtrip-count>`
use rzmq_core::{Context, SocketType};

#[path = "common/perf.rs"]
mod perf_common;
use perf_common::*;

const USAGE: &str = "local_lat <bind-to> <message-size> <roundtrip-count>";

pub(crate) fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        println!("usage: {USAGE}");
        std::process::exit(1);
    }
    let bind_to = arg(&args, 1, USAGE);
    let size = num(&args, 2, USAGE);
    let count = num(&args, 3, USAGE);
    let ctx = Context::new();
    let mut s = check(ctx.socket(SocketType::Rep), "zmq_socket");
    check(s.bind(bind_to), "zmq_bind");
    for _ in 0..count {
        let m = check(s.recv_msg(0), "zmq_recvmsg");
        if m.len() != size {
            println!("message of incorrect size received");
            std::process::exit(255);
        }
        check(s.send_msg(m, 0).map_err(|(_, e)| e), "zmq_sendmsg");
    }
    drop(s);
    check(ctx.term(), "zmq_ctx_term");
}

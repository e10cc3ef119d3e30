//! Latency measuring side with libzmq's `remote_lat` command line and output.
//!
//! `remote_lat <connect-to> <message-size> <roundtrip-count>`
use rzmq_core::{Context, Msg, SocketType};
use std::time::Instant;

#[path = "common/perf.rs"]
mod perf_common;
use perf_common::*;

const USAGE: &str = "remote_lat <connect-to> <message-size> <roundtrip-count>";

pub(crate) fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        println!("usage: {USAGE}");
        std::process::exit(1);
    }
    let connect_to = arg(&args, 1, USAGE);
    let size = num(&args, 2, USAGE);
    let count = num(&args, 3, USAGE);
    let ctx = Context::new();
    let mut s = check(ctx.socket(SocketType::Req), "zmq_socket");
    check(s.connect(connect_to), "zmq_connect");
    let mut m = Msg::with_size(size);
    let watch = Instant::now();
    for _ in 0..count {
        check(s.send_msg(m, 0).map_err(|(_, e)| e), "zmq_sendmsg");
        m = check(s.recv_msg(0), "zmq_recvmsg");
        if m.len() != size {
            println!("message of incorrect size received");
            std::process::exit(255);
        }
    }
    let elapsed = watch.elapsed().as_micros() as f64;
    let latency = elapsed / (count as f64 * 2.0);
    println!("message size: {size} [B]");
    println!("roundtrip count: {count}");
    println!("average latency: {latency:.3} [us]");
    drop(s);
    check(ctx.term(), "zmq_ctx_term");
}

//! In-process latency with libzmq's `inproc_lat` command line and output.
//!
//! `inproc_lat <message-size> <roundtrip-count>`
use rzmq_core::{Context, Msg, SocketType};
use std::time::Instant;

#[path = "common/perf.rs"]
mod perf_common;
use perf_common::*;

const USAGE: &str = "inproc_lat <message-size> <roundtrip-count>";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        println!("usage: {USAGE}");
        std::process::exit(1);
    }
    let size = num(&args, 1, USAGE);
    let count = num(&args, 2, USAGE);
    let ctx = Context::new();
    let mut s = check(ctx.socket(SocketType::Req), "zmq_socket");
    check(s.bind("inproc://lat_test"), "zmq_bind");
    let c2 = ctx.clone();
    let worker = std::thread::spawn(move || {
        let mut r = check(c2.socket(SocketType::Rep), "zmq_socket");
        check(r.connect("inproc://lat_test"), "zmq_connect");
        for _ in 0..count {
            let m = check(r.recv_msg(0), "zmq_recvmsg");
            check(r.send_msg(m, 0).map_err(|(_, e)| e), "zmq_sendmsg");
        }
    });
    println!("message size: {size} [B]");
    println!("roundtrip count: {count}");
    let watch = Instant::now();
    let mut m = Msg::with_size(size);
    for _ in 0..count {
        check(s.send_msg(m, 0).map_err(|(_, e)| e), "zmq_sendmsg");
        m = check(s.recv_msg(0), "zmq_recvmsg");
        if m.len() != size {
            println!("message of incorrect size received");
            std::process::exit(255);
        }
    }
    let elapsed = watch.elapsed().as_micros() as f64;
    worker.join().ok();
    let latency = elapsed / (count as f64 * 2.0);
    println!("average latency: {latency:.3} [us]");
    drop(s);
    check(ctx.term(), "zmq_ctx_term");
}

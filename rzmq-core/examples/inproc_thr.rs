//! In-process throughput with libzmq's `inproc_thr` command line and output.
//!
//! `inproc_thr <message-size> <message-count>`
use rzmq_core::{Context, Msg, SocketType};
use std::time::Instant;

#[path = "common/perf.rs"]
mod perf_common;
use perf_common::*;

const USAGE: &str = "inproc_thr <message-size> <message-count>";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        println!("usage: {USAGE}");
        std::process::exit(1);
    }
    let size = num(&args, 1, USAGE);
    let count = num(&args, 2, USAGE);
    let ctx = Context::new();
    let mut s = check(ctx.socket(SocketType::Pull), "zmq_socket");
    check(s.bind("inproc://thr_test"), "zmq_bind");
    let c2 = ctx.clone();
    let worker = std::thread::spawn(move || {
        let mut p = check(c2.socket(SocketType::Push), "zmq_socket");
        check(p.connect("inproc://thr_test"), "zmq_connect");
        for _ in 0..count {
            check(
                p.send_msg(Msg::with_size_recycled(size), 0)
                    .map_err(|(_, e)| e),
                "zmq_sendmsg",
            );
        }
    });
    println!("message size: {size} [B]");
    println!("message count: {count}");
    let first = check(s.recv_msg(0), "zmq_recvmsg");
    if first.len() != size {
        println!("message of incorrect size received");
        std::process::exit(255);
    }
    let watch = Instant::now();
    for _ in 1..count {
        let m = check(s.recv_msg(0), "zmq_recvmsg");
        if m.len() != size {
            println!("message of incorrect size received");
            std::process::exit(255);
        }
    }
    let elapsed = (watch.elapsed().as_micros() as u64).max(1);
    worker.join().ok();
    let throughput = count as f64 / elapsed as f64 * 1_000_000.0;
    let megabits = throughput * size as f64 * 8.0 / 1_000_000.0;
    println!("mean throughput: {} [msg/s]", throughput as i64);
    println!("mean throughput: {megabits:.3} [Mb/s]");
    drop(s);
    check(ctx.term(), "zmq_ctx_term");
}

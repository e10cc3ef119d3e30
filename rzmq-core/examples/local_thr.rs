//! Throughput receiver with libzmq's `local_thr` command line and output.
//!
//! `local_thr <bind-to> <message-size> <message-count>`
//!
//! With `RZMQ_PERF_STATS` set, it also prints (to stderr) how many receives read the
//! connection directly, how many handed it back to the I/O thread, how many held it between
//! receives, and how often the I/O thread took held input back.
use rzmq_core::{Context, SocketType};
use std::time::Instant;

#[path = "common/perf.rs"]
mod perf_common;
use perf_common::*;

const USAGE: &str = "local_thr <bind-to> <message-size> <message-count> [<enable_curve>]";

pub(crate) fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 && args.len() != 5 {
        println!("usage: {USAGE}");
        std::process::exit(1);
    }
    let bind_to = arg(&args, 1, USAGE);
    let size = num(&args, 2, USAGE);
    let count = num(&args, 3, USAGE);
    let ctx = Context::new();
    let mut s = check(ctx.socket(SocketType::Pull), "zmq_socket");
    check(s.bind(bind_to), "zmq_bind");
    let m = check(s.recv_msg(0), "zmq_recvmsg");
    if m.len() != size {
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
    let throughput = count as f64 / elapsed as f64 * 1_000_000.0;
    let megabits = throughput * size as f64 * 8.0 / 1_000_000.0;
    println!("message size: {size} [B]");
    println!("message count: {count}");
    println!("mean throughput: {} [msg/s]", throughput as i64);
    println!("mean throughput: {megabits:.3} [Mb/s]");
    if std::env::var_os("RZMQ_PERF_STATS").is_some() {
        let (rx, back) = rzmq_core::testing::direct::rx_stats();
        let (held, taken) = rzmq_core::testing::direct::hold_stats();
        eprintln!(
            "direct receives {rx}, handed back {back}, held {held}, taken back by the I/O thread {taken}"
        );
    }
    drop(s);
    check(ctx.term(), "zmq_ctx_term");
}

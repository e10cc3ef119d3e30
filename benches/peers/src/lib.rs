//! libzmq's perf tools (`local_thr`, `remote_thr`, `local_lat`, `remote_lat`, `inproc_thr`,
//! `inproc_lat`) written against other Rust ZeroMQ implementations, for `benches/compare.py`.
//!
//! Each binary `<implementation>_<role>` takes the command line of libzmq's tool of that role and
//! prints the lines that compare.py reads: `mean throughput: N [msg/s]` (local_thr, inproc_thr)
//! and `average latency: X [us]` (remote_lat, inproc_lat). As in libzmq's tools, the throughput
//! receiver times from the first message to the last, senders allocate a fresh message per send,
//! and latency is half the mean round trip of one message sent back and forth.
//!
//! This crate is kept outside the workspace so that none of these dependencies reach rzmq's own.

use std::process::exit;
use std::time::Duration;

pub mod omq;
pub mod rzmq_crate;
pub mod zeromq_rs;

/// The arguments of a perf tool: the endpoint (absent for the inproc tools), the message size
/// and the message or round-trip count.
pub struct Args {
    pub endpoint: String,
    pub size: usize,
    pub count: usize,
}

impl Args {
    /// Parses `<endpoint> <size> <count>` (libzmq's `local_thr [<enable_curve>]` extra argument
    /// is accepted and ignored), printing libzmq's usage line on a mismatch.
    pub fn network(tool: &str) -> Args {
        let a: Vec<String> = std::env::args().skip(1).collect();
        let usage = format!("usage: {tool} <endpoint> <message-size> <message-count>");
        if a.len() != 3 && !(a.len() == 4 && tool.ends_with("_thr")) {
            println!("{usage}");
            exit(1);
        }
        Args {
            endpoint: a[0].clone(),
            size: parse(&a[1], &usage),
            count: parse(&a[2], &usage),
        }
    }

    /// Parses `<size> <count>` for the inproc tools.
    pub fn inproc(tool: &str) -> Args {
        let a: Vec<String> = std::env::args().skip(1).collect();
        let usage = format!("usage: {tool} <message-size> <message-count>");
        if a.len() != 2 {
            println!("{usage}");
            exit(1);
        }
        Args {
            endpoint: String::new(),
            size: parse(&a[0], &usage),
            count: parse(&a[1], &usage),
        }
    }
}

fn parse(s: &str, usage: &str) -> usize {
    s.parse().unwrap_or_else(|_| {
        println!("{usage}");
        exit(1)
    })
}

/// Exits with libzmq's perf-tool style message on an error.
pub fn check<T, E: std::fmt::Debug>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        println!("error in {what}: {e:?}");
        exit(255)
    })
}

/// Exits when a received message has the wrong size, as libzmq's tools do.
pub fn check_size(got: usize, want: usize) {
    if got != want {
        println!("message of incorrect size received");
        exit(255);
    }
}

/// Prints libzmq's throughput report for `count` messages received in `elapsed` (from the first
/// message to the last).
pub fn report_thr(size: usize, count: usize, elapsed: Duration) {
    let us = (elapsed.as_micros() as u64).max(1);
    let throughput = count as f64 / us as f64 * 1_000_000.0;
    let megabits = throughput * size as f64 * 8.0 / 1_000_000.0;
    println!("message size: {size} [B]");
    println!("message count: {count}");
    println!("mean throughput: {} [msg/s]", throughput as i64);
    println!("mean throughput: {megabits:.3} [Mb/s]");
}

/// Prints libzmq's latency report for `count` round trips taking `elapsed` in all.
pub fn report_lat(size: usize, count: usize, elapsed: Duration) {
    let latency = elapsed.as_micros() as f64 / (count as f64 * 2.0);
    println!("message size: {size} [B]");
    println!("roundtrip count: {count}");
    println!("average latency: {latency:.3} [us]");
}

/// A multi-threaded tokio runtime (one worker per core, tokio's default) for the async crates.
pub fn runtime() -> tokio::runtime::Runtime {
    check(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        "tokio runtime",
    )
}

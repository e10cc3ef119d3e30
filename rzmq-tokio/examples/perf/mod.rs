//! What the async perf examples share (included with `#[path]`): libzmq's perf-tool command
//! lines and report lines, and the runtime they run on.
//!
//! Each tool runs its socket on a current-thread tokio runtime on the tool's main thread (the
//! inproc tools: one such runtime per side, each on its own thread, as libzmq's tools use one
//! thread per side), so a wait parks the thread in the runtime's reactor on the socket's fd.
#![allow(dead_code, unreachable_pub)]

use std::process::exit;
use std::time::Duration;

/// A perf tool's arguments: the endpoint (empty for the inproc tools), size and count.
pub struct Args {
    pub endpoint: String,
    pub size: usize,
    pub count: usize,
}

fn parse(s: &str, usage: &str) -> usize {
    s.parse().unwrap_or_else(|_| {
        println!("usage: {usage}");
        exit(1)
    })
}

impl Args {
    /// `<endpoint> <message-size> <message-count>` (the `_thr` tools accept and ignore
    /// libzmq's `<enable_curve>`).
    pub fn network(tool: &str) -> Args {
        let a: Vec<String> = std::env::args().skip(1).collect();
        let usage = format!("{tool} <endpoint> <message-size> <message-count>");
        if a.len() != 3 && !(a.len() == 4 && tool.ends_with("_thr")) {
            println!("usage: {usage}");
            exit(1);
        }
        Args {
            endpoint: a[0].clone(),
            size: parse(&a[1], &usage),
            count: parse(&a[2], &usage),
        }
    }

    /// `<message-size> <message-count>` of the inproc tools.
    pub fn inproc(tool: &str) -> Args {
        let a: Vec<String> = std::env::args().skip(1).collect();
        let usage = format!("{tool} <message-size> <message-count>");
        if a.len() != 2 {
            println!("usage: {usage}");
            exit(1);
        }
        Args {
            endpoint: String::new(),
            size: parse(&a[0], &usage),
            count: parse(&a[1], &usage),
        }
    }
}

/// Exits with libzmq's perf-tool style message on an error.
pub fn check<T>(r: rzmq_core::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        println!("error in {what}: {e}");
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

/// libzmq's throughput report for `count` messages received in `elapsed`.
pub fn report_thr(size: usize, count: usize, elapsed: Duration) {
    let us = (elapsed.as_micros() as u64).max(1);
    let throughput = count as f64 / us as f64 * 1_000_000.0;
    let megabits = throughput * size as f64 * 8.0 / 1_000_000.0;
    println!("message size: {size} [B]");
    println!("message count: {count}");
    println!("mean throughput: {} [msg/s]", throughput as i64);
    println!("mean throughput: {megabits:.3} [Mb/s]");
}

/// libzmq's latency report for `count` round trips taking `elapsed` in all.
pub fn report_lat(size: usize, count: usize, elapsed: Duration) {
    let latency = elapsed.as_micros() as f64 / (count as f64 * 2.0);
    println!("message size: {size} [B]");
    println!("roundtrip count: {count}");
    println!("average latency: {latency:.3} [us]");
}

/// Runs `f` on a fresh current-thread runtime with I/O and timers.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            println!("error in tokio runtime: {e}");
            exit(255)
        });
    rt.block_on(f)
}

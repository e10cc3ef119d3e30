//! Memory measurement (a benchmark, not a test: it prints, it asserts nothing about memory or
//! time).
//!
//! 1. Queue: an inproc PUSH -> PULL pair with SNDHWM = RCVHWM = 0 (unbounded). One million
//!    64-byte messages (a fresh `Msg` per send, as libzmq's remote_thr) are sent while nobody
//!    reads; resident memory (`VmRSS`) before and after and the peak (`VmHWM`, reset first where
//!    the kernel allows) are printed, with bytes per queued message; then every message is read
//!    and memory is printed again (and once more after `malloc_trim`, glibc only).
//! 2. Soak: N messages through tcp PUSH -> PULL on loopback (default HWMs), RSS sampled at
//!    evenly spaced points; prints the series and the least-squares slope (KiB per million
//!    messages) over the steady state (the samples before any traffic and after the last message
//!    left out) and over its second half.
//!
//! Run: `cargo bench -p rzmq-benches --bench memory`. Environment: `RZMQ_MEM_MSGS` (queued
//! messages, default 1000000), `RZMQ_MEM_SIZE` (bytes, default 64), `RZMQ_SOAK_MSGS` (default
//! 5000000), `RZMQ_SOAK_SIZE` (default 64), `RZMQ_SOAK_SAMPLES` (default 20). Without `--bench`
//! (as under `cargo test`) it runs a small smoke version (20000 queued, 100000 soak messages).

use std::time::Instant;

use rzmq_benches::{peak_rss, reset_peak_rss, rss, slope};
use rzmq_core::msg::{Msg, MSG_SIZE};
use rzmq_core::options::{RCVHWM, SNDHWM};
use rzmq_core::{Context, SocketType};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn signed_mib(a: u64, b: u64) -> f64 {
    (a as f64 - b as f64) / (1024.0 * 1024.0)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: glibc's malloc_trim has no preconditions.
    unsafe { malloc_trim(0) };
    true
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

fn queue(n: u64, size: usize) {
    println!("== queue: {n} messages of {size} B on inproc PUSH->PULL, HWM 0, nobody reading ==");
    let ctx = Context::new();
    let mut pull = ctx.socket(SocketType::Pull).expect("socket");
    pull.set_option_i32(RCVHWM, 0).expect("rcvhwm");
    pull.bind("inproc://rzmq-bench-memory").expect("bind");
    let mut push = ctx.socket(SocketType::Push).expect("socket");
    push.set_option_i32(SNDHWM, 0).expect("sndhwm");
    push.connect("inproc://rzmq-bench-memory").expect("connect");
    // Warm up the path (allocator arenas, first queue chunk).
    push.send_msg(Msg::with_size(size), 0)
        .map_err(|(_, e)| e)
        .expect("send");
    pull.recv_msg(0).expect("recv");

    let base = rss();
    let peak_reset = reset_peak_rss();
    let t = Instant::now();
    for _ in 0..n {
        push.send_msg(Msg::with_size(size), 0)
            .map_err(|(_, e)| e)
            .expect("send");
    }
    let send_s = t.elapsed().as_secs_f64();
    let queued = rss();
    let peak = peak_rss();
    let grown = queued.saturating_sub(base);
    println!("Msg size: {MSG_SIZE} B; payload allocation: {size} B + Arc header");
    println!("rss before:            {:9.1} MiB", mib(base));
    println!(
        "rss with {n} queued:  {:9.1} MiB  (+{:.1} MiB, {:.0} B per message)",
        mib(queued),
        mib(grown),
        grown as f64 / n as f64
    );
    println!(
        "peak rss (VmHWM{}):   {:9.1} MiB",
        if peak_reset {
            ", reset before sending"
        } else {
            ", since process start"
        },
        mib(peak)
    );
    println!("send: {:.3} s ({:.0} msg/s)", send_s, n as f64 / send_s);

    let t = Instant::now();
    for _ in 0..n {
        let m = pull.recv_msg(0).expect("recv");
        debug_assert_eq!(m.len(), size);
    }
    let recv_s = t.elapsed().as_secs_f64();
    let drained = rss();
    println!(
        "rss after reading all: {:9.1} MiB  ({:+.1} MiB vs before); recv {:.3} s ({:.0} msg/s)",
        mib(drained),
        signed_mib(drained, base),
        recv_s,
        n as f64 / recv_s
    );
    if trim() {
        let trimmed = rss();
        println!(
            "rss after malloc_trim: {:9.1} MiB  ({:+.1} MiB vs before)",
            mib(trimmed),
            signed_mib(trimmed, base)
        );
    }
    drop(push);
    drop(pull);
    println!("peak rss overall:      {:9.1} MiB", mib(peak_rss()));
}

fn soak(n: u64, size: usize, samples: u64) {
    println!();
    println!(
        "== soak: {n} messages of {size} B through tcp PUSH->PULL (loopback, default HWMs) =="
    );
    let ctx = Context::new();
    let mut pull = ctx.socket(SocketType::Pull).expect("socket");
    pull.bind("tcp://127.0.0.1:*").expect("bind");
    let ep = pull.last_endpoint().to_string();
    let mut push = ctx.socket(SocketType::Push).expect("socket");
    push.connect(&ep).expect("connect");
    let sender = std::thread::spawn(move || {
        for _ in 0..n {
            push.send_msg(Msg::with_size(size), 0)
                .map_err(|(_, e)| e)
                .expect("send");
        }
        push
    });
    let every = (n / samples.max(1)).max(1);
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    let peak_reset = reset_peak_rss();
    let t = Instant::now();
    let start_rss = rss();
    xs.push(0.0);
    ys.push(start_rss as f64);
    for i in 1..=n {
        let m = pull.recv_msg(0).expect("recv");
        debug_assert_eq!(m.len(), size);
        if i % every == 0 || i == n {
            xs.push(i as f64 / 1e6);
            ys.push(rss() as f64);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let push = sender.join().expect("sender");
    drop(push);
    println!(
        "{n} messages in {secs:.2} s ({:.0} msg/s); peak rss {:.1} MiB{}",
        n as f64 / secs,
        mib(peak_rss()),
        if peak_reset {
            " (VmHWM reset at start)"
        } else {
            ""
        }
    );
    println!("messages (M)   rss (MiB)");
    for (x, y) in xs.iter().zip(&ys) {
        println!("{x:12.3}   {:9.2}", y / (1024.0 * 1024.0));
    }
    // Steady state: without the first sample (before any traffic) and the last (after the
    // queues drained), which only show the working set filling and emptying.
    let (sx, sy) = if xs.len() > 3 {
        (&xs[1..xs.len() - 1], &ys[1..ys.len() - 1])
    } else {
        (&xs[..], &ys[..])
    };
    let half = sx.len() / 2;
    let steady = slope(sx, sy);
    let late = slope(&sx[half..], &sy[half..]);
    let (min, max) = sy
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), &y| (a.min(y), b.max(y)));
    println!(
        "steady-state slope (first and last samples left out): {:+.1} KiB per million messages; \
         second half: {:+.1} KiB per million; steady-state range {:.2}..{:.2} MiB",
        steady / 1024.0,
        late / 1024.0,
        min / (1024.0 * 1024.0),
        max / (1024.0 * 1024.0)
    );
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (qn, sn) = if bench {
        (1_000_000, 5_000_000)
    } else {
        println!("(smoke run: pass --bench, as `cargo bench` does, for the full measurement)");
        (20_000, 100_000)
    };
    let qn = env_u64("RZMQ_MEM_MSGS", qn);
    let qsize = env_u64("RZMQ_MEM_SIZE", 64) as usize;
    let sn = env_u64("RZMQ_SOAK_MSGS", sn);
    let ssize = env_u64("RZMQ_SOAK_SIZE", 64) as usize;
    let samples = env_u64("RZMQ_SOAK_SAMPLES", 20);
    queue(qn, qsize);
    soak(sn, ssize, samples);
}

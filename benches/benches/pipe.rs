//! Pipes (`rzmq_core::testing::pipe::pipe`): the lock-free queue between a socket and a connection.
//!
//! Every pipe has notification targets (a counting stand-in for the socket mailbox), so the
//! wake-up protocol runs as in a socket. Frames are 8-byte inline messages unless noted.
//!
//! - `pipe/single_thread/spsc_push_pop`: the bare queue under every pipe (`rzmq_core::testing::spsc`),
//!   push then pop: the floor the pipe's HWM and wake-up protocol is added to.
//! - `pipe/single_thread/push_pop`: `try_write` (HWM 1000) then `read`, one message at a time.
//! - `pipe/single_thread/burst_256`: 256 `try_write`s, then 256 `read`s (one queue chunk).
//! - `pipe/single_thread/multipart_3`: a 3-frame message written and read (frames travel as
//!   one queue item holding a `Vec`).
//! - `pipe/two_threads/ping_pong`: a round trip over two pipes to an echo thread; both sides
//!   spin on `read` (and yield after a while), so each message also runs the idle/activate path.
//! - `pipe/two_threads/stream`: a producer thread writes (HWM 1000, spinning while full), the
//!   bench thread reads; throughput in messages. On a 2-core shared machine this is noisy.
// criterion_group! defines an undocumented `pub fn` per group.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use rzmq_benches::CountingNotify;
use rzmq_core::msg::Msg;
use rzmq_core::testing::pipe::{pipe, Reader, Target, Writer};
use rzmq_core::testing::spsc;

fn wired(hwm: u64, notify: &Arc<CountingNotify>) -> (Writer, Reader) {
    let (w, r) = pipe(hwm);
    let t = Target {
        notify: notify.clone(),
        token: 1,
    };
    w.set_target(t.clone());
    r.set_target(t);
    (w, r)
}

fn small() -> Msg {
    Msg::copy_from(b"01234567")
}

/// Spins, then yields: with two shared cores the peer thread may not be running.
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

fn single_thread(c: &mut Criterion) {
    let notify = Arc::new(CountingNotify::default());
    let mut g = c.benchmark_group("pipe/single_thread");
    let msg = small();

    let (mut p, mut c) = spsc::queue::<Msg>();
    g.throughput(Throughput::Elements(1));
    g.bench_function("spsc_push_pop", |b| {
        b.iter(|| {
            p.push(msg.clone());
            black_box(c.pop().expect("queued"))
        })
    });

    let (mut w, mut r) = wired(1000, &notify);
    g.bench_function("push_pop", |b| {
        b.iter(|| {
            w.try_write(msg.clone()).map_err(|(_, e)| e).expect("room");
            black_box(r.read().expect("queued"))
        })
    });

    g.throughput(Throughput::Elements(256));
    g.bench_function("burst_256", |b| {
        b.iter(|| {
            for _ in 0..256 {
                w.try_write(msg.clone()).map_err(|(_, e)| e).expect("room");
            }
            for _ in 0..256 {
                black_box(r.read().expect("queued"));
            }
        })
    });

    g.throughput(Throughput::Elements(1));
    g.bench_function("multipart_3", |b| {
        b.iter(|| {
            for i in 0..3 {
                let mut m = msg.clone();
                m.set_more(i < 2);
                w.try_write(m).map_err(|(_, e)| e).expect("room");
            }
            for _ in 0..3 {
                black_box(r.read().expect("queued"));
            }
        })
    });
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let notify = Arc::new(CountingNotify::default());
    let mut g = c.benchmark_group("pipe/two_threads");
    g.throughput(Throughput::Elements(1));

    let (mut to_w, mut to_r) = wired(0, &notify);
    let (mut back_w, mut back_r) = wired(0, &notify);
    let echo = thread::spawn(move || {
        let mut spins = 0;
        loop {
            match to_r.read() {
                Some(m) => {
                    back_w.write(m);
                    spins = 0;
                }
                None if to_r.is_finished() => return,
                None => backoff(&mut spins),
            }
        }
    });
    let msg = small();
    g.bench_function("ping_pong", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                to_w.write(msg.clone());
                let mut spins = 0;
                loop {
                    if let Some(m) = back_r.read() {
                        black_box(m);
                        break;
                    }
                    backoff(&mut spins);
                }
            }
            start.elapsed()
        })
    });
    drop(to_w);
    echo.join().expect("echo thread");

    g.bench_function("stream", |b| {
        b.iter_custom(|iters| {
            let notify = notify.clone();
            let (mut w, mut r) = wired(1000, &notify);
            let msg = msg.clone();
            let start = Instant::now();
            let producer = thread::spawn(move || {
                for _ in 0..iters {
                    let mut m = msg.clone();
                    let mut spins = 0;
                    loop {
                        match w.try_write(m) {
                            Ok(()) => break,
                            Err((back, _)) => {
                                m = back;
                                backoff(&mut spins);
                            }
                        }
                    }
                }
            });
            let mut got = 0;
            let mut spins = 0;
            while got < iters {
                match r.read() {
                    Some(m) => {
                        black_box(m);
                        got += 1;
                        spins = 0;
                    }
                    None => backoff(&mut spins),
                }
            }
            let t = start.elapsed();
            producer.join().expect("producer");
            t.max(Duration::from_nanos(1))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = single_thread, two_threads
}
fn main() {
    common::run(&[benches]);
}

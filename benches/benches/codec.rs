//! ZMTP codec: messages -> bytes (encode) and bytes -> messages (decode) through
//! `rzmq_core::testing::zmtp::Connection`, two sessions back to back after a real NULL handshake.
//!
//! - `codec/encode/<size>`: `Connection::send` of a batch of frames (clones of one frame: a
//!   refcount bump, so the allocator is not measured) and `write_to` into `io::sink()` (which
//!   takes every byte without copying, as if the socket buffer had room). Bodies over 8 KiB are
//!   queued by reference and written with `writev`, so 64 KiB frames cost bookkeeping only.
//! - `codec/decode/<size>`: the bytes of such a batch fed through `recv_buffer`/`received` in
//!   reads as large as the receive buffer offers (a busy connection), every event decoded with
//!   `poll_event` and dropped. The copy into `recv_buffer` stands for the kernel's `read`.
//! - `codec/decode_4k_reads/<size>`: the same with reads of at most 4 KiB (a trickle: frames
//!   are copied out of the batch buffer instead of sliced).
//!
//! Each iteration moves about 256 KiB of payload; throughput is payload bytes.
// criterion_group! defines an undocumented `pub fn` per group.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::io;
use std::time::Instant;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rzmq_benches::{connected_pair, payload};
use rzmq_core::testing::zmtp::{Connection, Event, SocketType};

const SIZES: [usize; 3] = [64, 1024, 64 * 1024];
const BATCH_BYTES: usize = 256 * 1024;

fn label(size: usize) -> String {
    if size >= 1024 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

fn batch(size: usize) -> usize {
    (BATCH_BYTES / size).max(1)
}

/// Feeds `wire` to `rx` in reads of at most `read_cap` bytes; returns the messages decoded.
fn feed(rx: &mut Connection, wire: &[u8], read_cap: usize, now: Instant) -> usize {
    let mut off = 0;
    let mut msgs = 0;
    while off < wire.len() {
        let buf = rx.recv_buffer();
        let n = buf.len().min(read_cap).min(wire.len() - off);
        buf[..n].copy_from_slice(&wire[off..off + n]);
        rx.received(n, now).expect("session alive");
        off += n;
        while let Some(ev) = rx.poll_event().expect("valid input") {
            if let Event::Message(m) = ev {
                black_box(&m);
                msgs += 1;
            }
        }
    }
    msgs
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec/encode");
    for size in SIZES {
        let n = batch(size);
        let (mut tx, _rx) = connected_pair(SocketType::Push, SocketType::Pull);
        let msg = payload(size);
        g.throughput(Throughput::Bytes((n * size) as u64));
        g.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter(|| {
                for _ in 0..n {
                    tx.send(msg.clone()).expect("ready");
                }
                let written = tx.write_to(&mut io::sink()).expect("sink");
                black_box(written)
            })
        });
    }
    g.finish();
}

fn decode_group(c: &mut Criterion, name: &str, read_cap: usize) {
    let mut g = c.benchmark_group(name);
    let now = Instant::now();
    for size in SIZES {
        let n = batch(size);
        let (mut tx, mut rx) = connected_pair(SocketType::Push, SocketType::Pull);
        let msg = payload(size);
        for _ in 0..n {
            tx.send(msg.clone()).expect("ready");
        }
        let mut wire = Vec::new();
        tx.write_to(&mut wire).expect("vec");
        assert_eq!(
            feed(&mut rx, &wire, read_cap, now),
            n,
            "decoded the whole batch"
        );
        g.throughput(Throughput::Bytes((n * size) as u64));
        g.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter(|| feed(&mut rx, black_box(&wire), read_cap, now))
        });
    }
    g.finish();
}

fn decode(c: &mut Criterion) {
    decode_group(c, "codec/decode", usize::MAX);
    decode_group(c, "codec/decode_4k_reads", 4096);
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = encode, decode
}
fn main() {
    common::run(&[benches]);
}

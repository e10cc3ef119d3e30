//! The credit ring of rzmq-rdma (`rzmq_rdma::ring::Ring`), sans-IO: two ends joined by an
//! in-memory stand-in for an RC NIC that executes each work request at once (copies the
//! sender's mirror into the receiver's ring, writes credits into the mailbox, delivers the
//! immediates as receive completions and signaled completions back to the sender).
//!
//! `ring/cycle/<size>`: one cycle is `send` of a batch of records (64 of 64 B or 1 KiB, 4 of
//! 16 KiB), `flush`, the WRs executed, every record `peek`ed and `advance`d at the receiver,
//! and the credit update carried back. The NIC copy (memcpy of the batch) is inside the timing.
//! Throughput: records.
// criterion_group! defines an undocumented `pub fn` per group.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rzmq_rdma::ring::{Kind, Op, Ring, RingConfig};

struct End {
    ring: Ring,
    /// Receives posted at this end's NIC and not yet consumed.
    rq: u64,
}

/// Posts `from`'s work requests and executes them against `to` as an RC NIC would.
fn post(from: &mut End, to: &mut End) {
    while let Some(op) = from.ring.poll_op() {
        let (imm, signal) = match op {
            Op::PostRecv(n) => {
                from.rq += u64::from(n);
                continue;
            }
            Op::Write {
                off,
                len,
                imm,
                signal,
            } => {
                let (off, len) = (off as usize, len as usize);
                assert!(off + len <= to.ring.ring_region().len());
                // SAFETY: both regions hold `off + len` bytes (asserted; the mirror has the size
                // of the peer's ring), they are distinct allocations, and the ring protocol
                // guarantees the receiver does not read this range until notified.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        from.ring.mirror_region().as_ptr().add(off),
                        to.ring.ring_region().as_ptr().add(off),
                        len,
                    )
                };
                (imm, signal)
            }
            Op::Credits {
                credits,
                imm,
                signal,
            } => {
                // SAFETY: the mailbox holds MAILBOX_LEN bytes and nothing reads it concurrently.
                unsafe { to.ring.mailbox_region().write(0, &credits.encode()) };
                (imm, signal)
            }
        };
        if let Some(imm) = imm {
            assert!(to.rq > 0, "RNR: notification without a posted receive");
            to.rq -= 1;
            to.ring.on_recv(imm).expect("valid notification");
        }
        if let Some(n) = signal {
            from.ring.on_send_complete(n);
        }
    }
}

fn pair() -> (End, End) {
    let cfg = RingConfig::default();
    let mk = || End {
        ring: Ring::new(cfg, cfg.size, cfg.recv_depth).expect("valid config"),
        rq: 0,
    };
    let (mut a, mut b) = (mk(), mk());
    post(&mut a, &mut b);
    post(&mut b, &mut a);
    (a, b)
}

/// One cycle: `n` records of `data` from `a` to `b`, consumed, credits back. Returns records
/// consumed.
fn cycle(a: &mut End, b: &mut End, data: &[u8], n: usize) -> usize {
    for _ in 0..n {
        let staged = a.ring.send(Kind::Data, 0, data).expect("fits the ring");
        assert!(staged, "ring stalled: credits did not come back");
    }
    a.ring.flush();
    post(a, b);
    let mut got = 0;
    while let Some(rec) = b.ring.peek().expect("valid records") {
        black_box(rec.data);
        b.ring.advance();
        got += 1;
    }
    post(b, a);
    got
}

fn ring(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring/cycle");
    for (size, n) in [(64usize, 64usize), (1024, 64), (16 * 1024, 4)] {
        let (mut a, mut b) = pair();
        let data = vec![0x5au8; size];
        assert_eq!(cycle(&mut a, &mut b, &data, n), n);
        g.throughput(Throughput::Elements(n as u64));
        let label = if size >= 1024 {
            format!("{}KiB", size / 1024)
        } else {
            format!("{size}B")
        };
        g.bench_function(BenchmarkId::from_parameter(label), |bch| {
            bch.iter(|| cycle(&mut a, &mut b, &data, n))
        });
        let s = a.ring.stats();
        assert_eq!(s.msgs_tx, b.ring.stats().msgs_rx, "nothing lost");
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = ring
}
fn main() {
    common::run(&[benches]);
}

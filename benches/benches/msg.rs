//! Messages (`rzmq_core::msg::Msg`): create and drop.
//!
//! - `msg/with_size/<size>`: `Msg::with_size` (zeroed; inline up to 32 B, else one allocation
//!   holding refcount and bytes) and drop.
//! - `msg/copy_from/<size>`: `Msg::copy_from` of a buffer of that size, and drop.
//! - `msg/external/<size>`: `Msg::from_external` over a caller's buffer with a boxed release
//!   callback, and drop (which runs the callback).
//! - `msg/share_drop/<size>`: `Msg::clone` of a shared frame and drop (PUB fan-out's cost).
//!
//! Sizes: 8 B (inline), 64 B, 1 KiB, 1 MiB.
// criterion_group! defines an undocumented `pub fn` per group.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rzmq_core::msg::Msg;

const SIZES: [usize; 4] = [8, 64, 1024, 1 << 20];

fn label(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{}MiB", s >> 20),
        s if s >= 1024 => format!("{}KiB", s >> 10),
        s => format!("{s}B"),
    }
}

fn create_drop(c: &mut Criterion) {
    let mut g = c.benchmark_group("msg/with_size");
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        g.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter(|| drop(black_box(Msg::with_size(black_box(size)))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("msg/copy_from");
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        let src = vec![7u8; size];
        g.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter(|| drop(black_box(Msg::copy_from(black_box(&src)))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("msg/external");
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        let mut buf = vec![7u8; size];
        let released = Arc::new(AtomicU64::new(0));
        g.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter(|| {
                let r = released.clone();
                // SAFETY: `buf` outlives every message made here (each is dropped in the
                // iteration) and nobody else touches it meanwhile.
                let m = unsafe {
                    Msg::from_external(
                        buf.as_mut_ptr(),
                        buf.len(),
                        Some(Box::new(move || {
                            r.fetch_add(1, Ordering::Relaxed);
                        })),
                    )
                };
                drop(black_box(m))
            })
        });
        assert!(
            released.load(Ordering::Relaxed) > 0,
            "release callbacks ran"
        );
    }
    g.finish();

    let mut g = c.benchmark_group("msg/share_drop");
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        let m = Msg::with_size(size);
        g.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter(|| drop(black_box(black_box(&m).clone())))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = create_drop
}
fn main() {
    common::run(&[benches]);
}

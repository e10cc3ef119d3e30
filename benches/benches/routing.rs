//! Routing decisions: the socket patterns of `rzmq_core::testing::pattern` driven over a `PipeTable`
//! with real pipes (HWM 1000 towards each peer, notification targets set), no socket, no I/O.
//!
//! - `routing/push_lb_send/4_pipes`: PUSH load-balancing 64 B frames over 4 peers.
//! - `routing/pull_fq_recv/4_pipes`: PULL fair-queueing 64 B frames from 4 peers.
//! - `routing/router_send_by_id/4_pipes`: ROUTER sending `[identity, 64 B body]` to 4 peers
//!   known by 9-byte identities (two `send` calls per message).
//! - `routing/pub_trie/fanout_10`: PUB with 10 subscribers (3 topics each, one shared) sending
//!   a 64 B message that matches all 10 (trie lookup, 9 clones, 10 pipe writes).
//! - `routing/pub_trie/match_1_of_10`: the same PUB, a message matching one subscriber.
//!
//! Only the pattern calls are timed, in batches of up to 1024 messages; the peers' side (filling
//! or draining the pipes) runs between batches, outside the timing. Throughput: messages.
// criterion_group! defines an undocumented `pub fn` per group.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use rzmq_benches::{attach_peer, handshake, payload, CountingNotify, Peer};
use rzmq_core::msg::Msg;
use rzmq_core::testing::pattern::Pull;
use rzmq_core::testing::pattern::Push;
use rzmq_core::testing::pattern::Router;
use rzmq_core::testing::pattern::XPub;
use rzmq_core::testing::pattern::{Pattern, PipeId, PipeTable};

const HWM: u64 = 1000;
const BATCH: u64 = 1024;

/// Times `work(k)` over batches of at most `batch`, running `between` untimed after each.
fn batched(
    iters: u64,
    batch: u64,
    mut work: impl FnMut(u64),
    mut between: impl FnMut(),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let k = left.min(batch);
        let start = Instant::now();
        work(k);
        total += start.elapsed();
        between();
        left -= k;
    }
    total
}

fn peers(p: &mut dyn Pattern, t: &mut PipeTable, n: usize) -> Vec<(PipeId, Peer)> {
    let notify = Arc::new(CountingNotify::default());
    (0..n).map(|_| attach_peer(p, t, &notify, HWM)).collect()
}

fn push_pull(c: &mut Criterion) {
    let mut g = c.benchmark_group("routing");
    g.throughput(Throughput::Elements(1));
    let body = payload(64);

    let mut push = Push::new();
    let mut t = PipeTable::new();
    let mut ps = peers(&mut push, &mut t, 4);
    g.bench_function("push_lb_send/4_pipes", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                BATCH,
                |k| {
                    for _ in 0..k {
                        push.send(body.clone(), &mut t)
                            .map_err(|(_, e)| e)
                            .expect("room");
                    }
                },
                || {
                    for (_, p) in ps.iter_mut() {
                        p.drain();
                    }
                },
            )
        })
    });

    let mut pull = Pull::new();
    let mut t = PipeTable::new();
    let mut ps = peers(&mut pull, &mut t, 4);
    let ids: Vec<PipeId> = ps.iter().map(|(id, _)| *id).collect();
    let fill = |ps: &mut Vec<(PipeId, Peer)>, k: u64| {
        for j in 0..k as usize {
            ps[j % 4].1.w.write(body.clone());
        }
    };
    g.bench_function("pull_fq_recv/4_pipes", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let k = left.min(BATCH);
                fill(&mut ps, k);
                for &id in &ids {
                    pull.read_activated(id, &mut t);
                }
                let start = Instant::now();
                for _ in 0..k {
                    black_box(pull.recv(&mut t).expect("queued"));
                }
                total += start.elapsed();
                left -= k;
            }
            total
        })
    });
    g.finish();
}

fn router(c: &mut Criterion) {
    let mut g = c.benchmark_group("routing");
    g.throughput(Throughput::Elements(1));
    let body = payload(64);

    let mut router = Router::new();
    let mut t = PipeTable::new();
    let mut ps = peers(&mut router, &mut t, 4);
    let mut id_frames = Vec::new();
    for (i, (id, peer)) in ps.iter().enumerate() {
        let ident = format!("worker-{i:02}");
        handshake(&mut router, &mut t, *id, peer, Some(ident.as_bytes()));
        let mut f = Msg::copy_from(ident.as_bytes());
        f.set_more(true);
        id_frames.push(f);
    }
    // Every peer is routable.
    for (i, f) in id_frames.iter().enumerate() {
        router.send(f.clone(), &mut t).map_err(|(_, e)| e).unwrap();
        router
            .send(body.clone(), &mut t)
            .map_err(|(_, e)| e)
            .unwrap();
        assert_eq!(ps[i].1.drain(), 1, "peer {i} got its message");
    }
    g.bench_function("router_send_by_id/4_pipes", |b| {
        b.iter_custom(|iters| {
            let mut next = 0usize;
            batched(
                iters,
                BATCH,
                |k| {
                    for _ in 0..k {
                        let id = id_frames[next & 3].clone();
                        next = next.wrapping_add(1);
                        router.send(id, &mut t).map_err(|(_, e)| e).expect("id");
                        router
                            .send(body.clone(), &mut t)
                            .map_err(|(_, e)| e)
                            .expect("body");
                    }
                },
                || {
                    for (_, p) in ps.iter_mut() {
                        p.drain();
                    }
                },
            )
        })
    });
    g.finish();
}

fn pub_trie(c: &mut Criterion) {
    let mut g = c.benchmark_group("routing/pub_trie");
    g.throughput(Throughput::Elements(1));

    let mut publ = XPub::new_pub();
    let mut t = PipeTable::new();
    let mut ps = peers(&mut publ, &mut t, 10);
    for (i, (id, peer)) in ps.iter_mut().enumerate() {
        for topic in [
            "weather.".to_string(),
            format!("news.{i}."),
            format!("stock.{i:02}"),
        ] {
            let mut sub = vec![1u8];
            sub.extend_from_slice(topic.as_bytes());
            peer.w.write(Msg::copy_from(&sub));
        }
        publ.read_activated(*id, &mut t);
    }
    let make = |prefix: &[u8]| {
        let mut m = payload(64);
        if let Some(d) = m.data_mut() {
            d[..prefix.len()].copy_from_slice(prefix);
        }
        m
    };
    let all = make(b"weather.today");
    let one = make(b"news.3.headline");
    publ.send(all.clone(), &mut t).map_err(|(_, e)| e).unwrap();
    publ.send(one.clone(), &mut t).map_err(|(_, e)| e).unwrap();
    let got: Vec<usize> = ps.iter_mut().map(|(_, p)| p.drain()).collect();
    assert_eq!(got, [1, 1, 1, 2, 1, 1, 1, 1, 1, 1], "subscriptions applied");

    for (name, msg) in [("fanout_10", &all), ("match_1_of_10", &one)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                batched(
                    iters,
                    256,
                    |k| {
                        for _ in 0..k {
                            publ.send(msg.clone(), &mut t)
                                .map_err(|(_, e)| e)
                                .expect("pub never blocks");
                        }
                    },
                    || {
                        for (_, p) in ps.iter_mut() {
                            p.drain();
                        }
                    },
                )
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = push_pull, router, pub_trie
}
fn main() {
    common::run(&[benches]);
}

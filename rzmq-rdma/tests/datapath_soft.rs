//! The data path end to end on the soft provider: eager and rendezvous frames from 256 B to
//! 64 MiB with checksums, copy counts, release-at-FIN, credit stalls under a small ring, faults.

mod common;
use common::external;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rzmq_core::msg::Msg;
use rzmq_rdma::datapath::{ConnectInfo, DataPath, DataPathConfig};
use rzmq_rdma::provider::soft::{self, Fault, SoftConfig, SoftDevice};
use rzmq_rdma::provider::{Device, RtsAttr};
use rzmq_rdma::ring::RingConfig;

/// A device open for fault tests (`inject`, `kill`).
fn faulty() -> SoftConfig {
    SoftConfig {
        faults: true,
        ..SoftConfig::default()
    }
}

fn pair(cfg: DataPathConfig) -> (DataPath, DataPath) {
    let da: Arc<dyn Device> = SoftDevice::open(faulty()).unwrap();
    let db: Arc<dyn Device> = SoftDevice::open(faulty()).unwrap();
    let (mut a, ia) = DataPath::new(da, cfg.clone()).unwrap();
    let (mut b, ib) = DataPath::new(db, cfg).unwrap();
    // What the control channel carries.
    let ia = ConnectInfo::from_bytes(&ia.to_bytes()).unwrap();
    let ib = ConnectInfo::from_bytes(&ib.to_bytes()).unwrap();
    a.connect(&ib).unwrap();
    b.connect(&ia).unwrap();
    (a, b)
}

fn fast() -> DataPathConfig {
    DataPathConfig {
        // 4.096 us * 2^13 = 34 ms per try, 4 tries: faults show within ~140 ms, while tests
        // running in parallel on two cores do not starve a NIC thread that long.
        rts: RtsAttr {
            timeout: 13,
            retry_cnt: 3,
            ..RtsAttr::new(0)
        },
        ..DataPathConfig::default()
    }
}

/// A checksum that is quick in debug builds (8 bytes a step).
fn sum(d: &[u8]) -> u64 {
    let mut h = d.len() as u64;
    let mut it = d.chunks_exact(8);
    for c in &mut it {
        h = h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().unwrap());
    }
    for &x in it.remainder() {
        h = h.rotate_left(5) ^ u64::from(x);
    }
    h
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut it = v.chunks_exact_mut(8);
    for c in &mut it {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes());
    }
    for b in it.into_remainder() {
        *b = x as u8;
    }
    v
}

fn recv_one(a: &mut DataPath, b: &mut DataPath) -> Msg {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(m) = b.recv().unwrap() {
            return m;
        }
        a.process().unwrap();
        b.process().unwrap();
        assert!(Instant::now() < end, "frame never arrived");
        b.arm().unwrap();
        b.process().unwrap();
        b.wait(Duration::from_millis(1));
    }
}

#[test]
fn frames_256b_to_64mib_checksummed_zero_copy_rendezvous_released_at_fin() {
    let (mut a, mut b) = pair(fast());
    assert_eq!(a.eager_max(), 64 * 1024);
    let released = Arc::new(AtomicUsize::new(0));
    let sizes = [
        256usize,
        4096,
        64 * 1024,
        64 * 1024 + 1,
        1 << 20,
        16 << 20,
        64 << 20,
    ];
    for (i, &len) in sizes.iter().enumerate() {
        let data = pattern(len, i as u64);
        let want = sum(&data);
        let src = data.as_ptr() as usize;
        let rndv = len > a.eager_max();
        let mut m = external(data, &released);
        m.set_more(i % 2 == 0);
        let before = (a.stats().copies, b.stats().copies);
        let rel_before = released.load(Ordering::SeqCst);
        assert!(a.send(m).unwrap().is_none());
        a.flush().unwrap();
        let got = recv_one(&mut a, &mut b);
        assert_eq!(got.len(), len);
        assert_eq!(got.more(), i % 2 == 0);
        assert_eq!(sum(got.data()), want, "payload of {len} bytes corrupted");
        let copies = (a.stats().copies - before.0) + (b.stats().copies - before.1);
        if rndv {
            assert_eq!(
                copies, 0,
                "rendezvous frames are never copied by the library"
            );
            assert_ne!(got.data().as_ptr() as usize, src);
            // The FIN comes back: the sender releases its buffer only now.
            let end = Instant::now() + Duration::from_secs(5);
            while released.load(Ordering::SeqCst) == rel_before {
                a.process().unwrap();
                b.process().unwrap();
                assert!(Instant::now() < end, "FIN never came");
            }
        } else {
            assert_eq!(copies, 2, "eager: one copy each side");
        }
    }
    assert_eq!(released.load(Ordering::SeqCst), sizes.len() - 3 + 3);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.rndv_tx, 4);
    assert_eq!(sb.rndv_reads, 4);
    assert_eq!(sb.msgs_rx, sizes.len() as u64);
}

#[test]
fn release_waits_for_the_read_not_for_send() {
    let (mut a, mut b) = pair(fast());
    let released = Arc::new(AtomicUsize::new(0));
    let m = external(pattern(1 << 20, 1), &released);
    assert!(a.send(m).unwrap().is_none());
    a.flush().unwrap();
    // The sender processes alone for a while: no FIN without the receiver's READ.
    for _ in 0..20 {
        a.process().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(released.load(Ordering::SeqCst), 0);
    let got = recv_one(&mut a, &mut b);
    let end = Instant::now() + Duration::from_secs(5);
    while released.load(Ordering::SeqCst) == 0 {
        a.process().unwrap();
        b.process().unwrap();
        assert!(Instant::now() < end);
    }
    // A reused buffer is registered once: send the same frame (shared handle) again.
    let shared = Msg::from_vec(pattern(1 << 20, 2));
    for _ in 0..3 {
        let mut s = shared.clone();
        assert!(a.send(s.share()).unwrap().is_none());
        a.flush().unwrap();
        recv_one(&mut a, &mut b);
    }
    // Three sends of one buffer: one registration. (The first frame's freed buffer may come
    // back from the allocator at the same address and hit too: the stale-registration hazard
    // mr_cache documents, harmless on the soft provider.)
    let c = a.stats().mr_cache;
    assert!(
        c.hits >= 2 && c.misses <= 2 && c.hits + c.misses == 4,
        "{c:?}"
    );
    drop(got);
}

#[test]
fn small_ring_both_directions_stall_and_recover_in_order() {
    let cfg = DataPathConfig {
        ring: RingConfig {
            size: 4096,
            recv_depth: 4,
            max_send_wr: 16,
            signal_every: 4,
            batch_bytes: 1024,
        },
        rndv_threshold: 1500,
        ..fast()
    };
    let (mut a, mut b) = pair(cfg);
    let n = 3000usize;
    let mut next = [0usize; 2];
    let mut got = [0usize; 2];
    let mut pending: [Option<Msg>; 2] = [None, None];
    let end = Instant::now() + Duration::from_secs(20);
    let frame = |i: usize| {
        let len = 8 + (i * 37) % 2500; // some above the threshold: rendezvous
        let mut v = pattern(len, i as u64);
        v[..8].copy_from_slice(&(i as u64).to_le_bytes());
        Msg::from_vec(v)
    };
    while got[0] < n || got[1] < n {
        assert!(
            Instant::now() < end,
            "stuck at {got:?} (sent {next:?}): a {:?}, b {:?}",
            a.stats(),
            b.stats()
        );
        for side in 0..2 {
            let (tx, rx) = if side == 0 {
                (&mut a, &mut b)
            } else {
                (&mut b, &mut a)
            };
            for _ in 0..50 {
                if next[side] >= n && pending[side].is_none() {
                    break;
                }
                let m = pending[side].take().unwrap_or_else(|| {
                    next[side] += 1;
                    frame(next[side] - 1)
                });
                if let Some(back) = tx.send(m).unwrap() {
                    pending[side] = Some(back);
                    break;
                }
            }
            tx.flush().unwrap();
            tx.process().unwrap();
            rx.process().unwrap();
            while let Some(m) = rx.recv().unwrap() {
                let i = u64::from_le_bytes(m.data()[..8].try_into().unwrap()) as usize;
                assert_eq!(i, got[side], "loss, duplication or reordering");
                let mut want = pattern(m.len(), i as u64);
                want[..8].copy_from_slice(&(i as u64).to_le_bytes());
                assert_eq!(m.data(), &want[..]);
                got[side] += 1;
            }
        }
    }
    let s = a.stats();
    assert!(
        s.ring.credit_stalls > 0,
        "the small ring must have stalled: {s:?}"
    );
    assert!(s.rndv_tx > 0);
}

#[test]
fn cut_wire_fails_both_ends_and_releases_every_held_buffer() {
    let (mut a, mut b) = pair(fast());
    let released = Arc::new(AtomicUsize::new(0));
    let m = external(pattern(1 << 20, 3), &released);
    assert!(a.send(m).unwrap().is_none());
    a.flush().unwrap();
    recv_one(&mut a, &mut b);
    soft::inject(a.qp().as_ref(), Fault::CutWire).unwrap();
    for i in 0..4 {
        let m = external(pattern(200_000, 10 + i), &released);
        assert!(a.send(m).unwrap().is_none());
    }
    let _ = a.flush();
    let end = Instant::now() + Duration::from_secs(5);
    let err = loop {
        if let Err(e) = a.process() {
            break e;
        }
        assert!(Instant::now() < end, "the cut was never noticed");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(err.to_string().contains("RetryExcErr"), "{err}");
    assert!(a.send(Msg::from_vec(vec![1; 100])).is_err());
    // Nothing after the cut was delivered.
    assert!(b.recv().unwrap().is_none());
    // Dropping the failed data path releases every held sender buffer exactly once.
    // (Only the first frame may have been released already: its FIN may have beaten the cut.)
    assert!(released.load(Ordering::SeqCst) <= 1);
    drop(a);
    assert_eq!(released.load(Ordering::SeqCst), 5);
}

#[test]
fn killed_peer_fails_the_data_path() {
    let da: Arc<dyn Device> = SoftDevice::open(faulty()).unwrap();
    let db: Arc<dyn Device> = SoftDevice::open(faulty()).unwrap();
    let (mut a, ia) = DataPath::new(da, fast()).unwrap();
    let (mut b, ib) = DataPath::new(db.clone(), fast()).unwrap();
    a.connect(&ib).unwrap();
    b.connect(&ia).unwrap();
    soft::kill(db.as_ref()).unwrap();
    assert!(a.send(Msg::from_vec(vec![7; 1000])).unwrap().is_none());
    a.flush().unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while a.process().is_ok() {
        assert!(Instant::now() < end);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Throughput between two threads (debug build numbers; run with `--ignored --nocapture`).
#[test]
#[ignore]
fn throughput_64k_and_16m() {
    let rndv_64k = DataPathConfig {
        rndv_threshold: 32 * 1024,
        ..DataPathConfig::default()
    };
    for (len, count, cfg) in [
        (64 * 1024usize, 4000usize, DataPathConfig::default()),
        (64 * 1024, 4000, rndv_64k),
        (16 << 20, 40, DataPathConfig::default()),
    ] {
        let (mut a, mut b) = pair(cfg);
        let t = Instant::now();
        let rx = std::thread::spawn(move || {
            let mut n = 0;
            while n < count {
                b.process().unwrap();
                while let Some(m) = b.recv().unwrap() {
                    assert_eq!(m.len(), len);
                    n += 1;
                }
                b.arm().unwrap();
                b.process().unwrap();
                if n < count {
                    b.wait(Duration::from_millis(5));
                }
            }
            b
        });
        let frame = Msg::from_vec(pattern(len, 1));
        let mut sent = 0;
        let mut back: Option<Msg> = None;
        while sent < count {
            let m = back.take().unwrap_or_else(|| frame.clone());
            match a.send(m).unwrap() {
                None => sent += 1,
                Some(m) => {
                    back = Some(m);
                    a.flush().unwrap();
                    a.arm().unwrap();
                    a.process().unwrap();
                    a.wait(Duration::from_millis(5));
                }
            }
            a.process().unwrap();
        }
        a.flush().unwrap();
        let b = rx.join().unwrap();
        let dt = t.elapsed();
        let mb = (len * count) as f64 / 1e6;
        println!(
            "{len} B x {count}: {:.0} MB/s, {:.0} msg/s (debug build); copies tx {} rx {}",
            mb / dt.as_secs_f64(),
            count as f64 / dt.as_secs_f64(),
            a.stats().copies,
            b.stats().copies
        );
    }
}

//! The data path over the loopback provider (posts execute in the poster's thread, so every
//! step is deterministic): frames of every path both ways, and when the data path's fd is
//! readable (the completion channel read once per arming, the pool's wake-up).

mod common;
use common::external;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rzmq_core::msg::Msg;
use rzmq_rdma::datapath::{ConnectInfo, DataPath, DataPathConfig};
use rzmq_rdma::provider::loopback::LoopbackProvider;
use rzmq_rdma::provider::{Provider, QpState, WcStatus};
use rzmq_rdma::ring::RingConfig;

fn pair(cfg: DataPathConfig) -> (DataPath, DataPath) {
    let p = LoopbackProvider;
    let (mut a, ia) = DataPath::new(p.open(None).unwrap(), cfg.clone()).unwrap();
    let (mut b, ib) = DataPath::new(p.open(None).unwrap(), cfg).unwrap();
    a.connect(&ConnectInfo::from_bytes(&ib.to_bytes()).unwrap())
        .unwrap();
    b.connect(&ConnectInfo::from_bytes(&ia.to_bytes()).unwrap())
        .unwrap();
    (a, b)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Readable now (a zero timeout: no waiting).
fn readable(d: &DataPath) -> bool {
    d.wait(Duration::ZERO)
}

/// Drives both ends until `b` has a frame; the loopback wire has delivered everything posted,
/// so a bounded number of turns always suffices.
fn recv_one(a: &mut DataPath, b: &mut DataPath) -> Msg {
    for _ in 0..64 {
        if let Some(m) = b.recv().unwrap() {
            return m;
        }
        a.process().unwrap();
        b.process().unwrap();
    }
    panic!("frame never arrived");
}

#[test]
fn eager_and_rendezvous_frames_both_ways_released_at_fin() {
    let (mut a, mut b) = pair(DataPathConfig::default());
    let released = Arc::new(AtomicUsize::new(0));
    let sizes = [
        0usize,
        1,
        64,
        4096,
        64 * 1024,
        64 * 1024 + 1,
        1 << 20,
        5 << 20,
    ];
    for round in 0..3u8 {
        for (i, &len) in sizes.iter().enumerate() {
            let (tx, rx) = if (i + round as usize).is_multiple_of(2) {
                (&mut a, &mut b)
            } else {
                (&mut b, &mut a)
            };
            let data = pattern(len, round ^ i as u8);
            let before = released.load(Ordering::SeqCst);
            assert!(tx
                .send(external(data.clone(), &released))
                .unwrap()
                .is_none());
            tx.flush().unwrap();
            let got = recv_one(tx, rx);
            assert_eq!(got.data(), &data[..], "{len} bytes");
            // The FIN (or, for eager frames, the copy) releases the sender's frame.
            for _ in 0..8 {
                tx.process().unwrap();
                rx.process().unwrap();
            }
            assert_eq!(released.load(Ordering::SeqCst), before + 1, "{len} bytes");
        }
    }
    assert_eq!(a.stats().rndv_tx + b.stats().rndv_tx, 9);
    assert!(a.is_idle() && b.is_idle());
}

#[test]
fn a_small_ring_wraps_and_stalls_in_order() {
    let cfg = DataPathConfig {
        ring: RingConfig {
            size: 4096,
            recv_depth: 4,
            max_send_wr: 16,
            signal_every: 4,
            batch_bytes: 1024,
        },
        rndv_threshold: 1500,
        ..DataPathConfig::default()
    };
    let (mut a, mut b) = pair(cfg);
    let n = 2000usize;
    let (mut sent, mut got) = (0usize, 0usize);
    let mut held: Option<Msg> = None;
    while got < n {
        while sent < n {
            let m = held
                .take()
                .unwrap_or_else(|| Msg::from_vec(pattern(8 + sent * 37 % 2500, sent as u8)));
            match a.send(m).unwrap() {
                None => sent += 1,
                Some(back) => {
                    held = Some(back);
                    break;
                }
            }
        }
        a.flush().unwrap();
        b.process().unwrap();
        while let Some(m) = b.recv().unwrap() {
            assert_eq!(m.data(), &pattern(8 + got * 37 % 2500, got as u8)[..]);
            got += 1;
        }
        a.process().unwrap();
    }
    assert!(a.stats().ring.credit_stalls > 0);
}

#[test]
fn the_channel_is_read_once_per_arming_and_process_leaves_it() {
    let (mut a, mut b) = pair(DataPathConfig::default());
    b.arm().unwrap();
    b.process().unwrap();
    assert!(!readable(&b), "armed, nothing arrived");
    assert!(a.send(Msg::copy_from(b"one")).unwrap().is_none());
    a.flush().unwrap();
    assert!(readable(&b), "a completion after arming raises the event");
    b.process().unwrap();
    assert_eq!(b.recv().unwrap().unwrap().data(), b"one");
    assert!(readable(&b), "process does not read the channel");
    b.arm().unwrap();
    b.process().unwrap();
    assert!(!readable(&b), "arming read the event");
    // Armed again with nothing polled since: arming is a no-op, and an event still fires.
    b.arm().unwrap();
    assert!(!readable(&b));
    assert!(a.send(Msg::copy_from(b"two")).unwrap().is_none());
    a.flush().unwrap();
    assert!(readable(&b));
    b.process().unwrap();
    assert_eq!(b.recv().unwrap().unwrap().data(), b"two");
    b.arm().unwrap();
    assert!(!readable(&b));
}

#[test]
fn a_returned_pool_buffer_wakes_the_path_once_until_armed() {
    let (mut a, mut b) = pair(DataPathConfig::default());
    let mut got = Vec::new();
    for i in 0..2u8 {
        assert!(a
            .send(Msg::from_vec(pattern(1 << 20, i)))
            .unwrap()
            .is_none());
        a.flush().unwrap();
        got.push(recv_one(&mut a, &mut b));
    }
    b.arm().unwrap();
    b.process().unwrap();
    b.arm().unwrap();
    assert!(!readable(&b));
    drop(got.pop());
    assert!(readable(&b), "a returned buffer wakes the path");
    drop(got.pop());
    b.arm().unwrap();
    b.process().unwrap();
    assert!(!readable(&b), "both returns drained by one arming");
}

#[test]
fn a_forged_rkey_fails_both_ends() {
    let (mut a, mut b) = pair(DataPathConfig::default());
    // B replays a rendezvous descriptor after its FIN: the window it names is invalidated.
    assert!(a
        .send(Msg::from_vec(pattern(1 << 20, 1)))
        .unwrap()
        .is_none());
    a.flush().unwrap();
    let m = recv_one(&mut a, &mut b);
    assert_eq!(m.len(), 1 << 20);
    let (addr, _, rkey) = b.last_descriptor().unwrap();
    let pd = b.pd().clone();
    let mut dst = vec![0u8; 64];
    // SAFETY: `dst` outlives the MR and the READ (completed before `post_send` returns here).
    let mr = unsafe {
        pd.reg_mr(
            dst.as_mut_ptr(),
            dst.len(),
            rzmq_rdma::provider::Access::LOCAL_WRITE,
        )
    }
    .unwrap();
    for _ in 0..8 {
        a.process().unwrap();
    }
    let sge = [rzmq_rdma::provider::Sge {
        addr: dst.as_ptr() as u64,
        length: 64,
        lkey: mr.lkey(),
    }];
    let wr = rzmq_rdma::provider::SendWr {
        wr_id: 7,
        sg_list: &sge,
        op: rzmq_rdma::provider::SendOp::RdmaRead(rzmq_rdma::provider::RemoteAddr { addr, rkey }),
        flags: rzmq_rdma::provider::SendFlags::SIGNALED,
    };
    // SAFETY: not inline; the SGE is registered above.
    unsafe { b.qp().post_send(&[wr]) }.unwrap();
    assert_eq!(a.qp().state(), QpState::Err);
    assert_eq!(b.qp().state(), QpState::Err);
    let err = b.process().unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("{:?}", WcStatus::RemAccessErr)),
        "{err}"
    );
    assert!(dst.iter().all(|&x| x == 0));
}

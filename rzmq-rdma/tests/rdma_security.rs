//! What a peer can reach through RDMA, on the soft provider: a rendezvous frame is readable
//! through a memory window that covers exactly its bytes, READ only, until its FIN. A peer that
//! reads past the frame, forges an rkey or replays a descriptor after the FIN gets a remote
//! access error, reads nothing, and the connection fails (both QPs in ERR).

mod common;
use common::external;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rzmq_rdma::datapath::{ConnectInfo, DataPath, DataPathConfig, DataPathError};
use rzmq_rdma::provider::soft::{SoftConfig, SoftDevice};
use rzmq_rdma::provider::{
    inc_rkey, Access, Device, QpState, RemoteAddr, RtsAttr, SendFlags, SendOp, SendWr, Sge,
    WcOpcode, WcStatus,
};

const FRAME: usize = 256 * 1024;

fn pair() -> (DataPath, DataPath) {
    let cfg = DataPathConfig {
        rndv_threshold: 64 * 1024,
        rts: RtsAttr {
            timeout: 13,
            retry_cnt: 3,
            ..RtsAttr::new(0)
        },
        ..DataPathConfig::default()
    };
    let da: Arc<dyn Device> = SoftDevice::open(SoftConfig::default()).unwrap();
    let db: Arc<dyn Device> = SoftDevice::open(SoftConfig::default()).unwrap();
    let (mut a, ia) = DataPath::new(da, cfg.clone()).unwrap();
    let (mut b, ib) = DataPath::new(db, cfg).unwrap();
    a.connect(&ConnectInfo::from_bytes(&ib.to_bytes()).unwrap())
        .unwrap();
    b.connect(&ConnectInfo::from_bytes(&ia.to_bytes()).unwrap())
        .unwrap();
    assert!(a.uses_memory_windows());
    (a, b)
}

fn until(mut f: impl FnMut() -> bool, what: &str) {
    let end = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `a` sends a FRAME-byte rendezvous frame; `b` receives it (its READ went through the window).
/// With `fin`, `a` then processes the FIN (window invalidated, buffer released).
fn send_frame(a: &mut DataPath, b: &mut DataPath, fin: bool) -> (Vec<u8>, Arc<AtomicUsize>) {
    let data: Vec<u8> = (0..FRAME).map(|i| (i * 7 + 3) as u8).collect();
    let released = Arc::new(AtomicUsize::new(0));
    assert!(a.send(external(data.clone(), &released)).unwrap().is_none());
    a.flush().unwrap();
    let mut got = None;
    until(
        || {
            b.process().unwrap();
            if got.is_none() {
                got = b.recv().unwrap();
            }
            got.is_some()
        },
        "frame never arrived",
    );
    assert!(got.unwrap().data() == data.as_slice());
    if fin {
        until(
            || {
                a.process().unwrap();
                b.process().unwrap();
                released.load(Ordering::SeqCst) == 1
            },
            "FIN never released the frame",
        );
    } else {
        assert_eq!(released.load(Ordering::SeqCst), 0);
    }
    (data, released)
}

/// `b` (the attacker) posts an RDMA READ of `len` bytes at `addr` with `rkey` into a fresh
/// buffer of its own, then returns the buffer and the error its data path reports.
fn attack(b: &mut DataPath, addr: u64, rkey: u32, len: usize) -> (Vec<u8>, DataPathError) {
    let mut buf = vec![0u8; len];
    // SAFETY: buf outlives the MR (dropped at the end of this function, after the READ failed).
    let mr = unsafe {
        b.pd()
            .reg_mr(buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE)
    }
    .unwrap();
    let sge = [Sge {
        addr: buf.as_ptr() as u64,
        length: len as u32,
        lkey: mr.lkey(),
    }];
    let wr = SendWr {
        wr_id: 0xbad,
        sg_list: &sge,
        op: SendOp::RdmaRead(RemoteAddr { addr, rkey }),
        flags: SendFlags::SIGNALED,
    };
    // SAFETY: not inline; the SGE is registered memory alive until the READ completes.
    unsafe { b.qp().post_send(&[wr]) }.unwrap();
    let mut err = None;
    until(
        || match b.process() {
            Ok(()) => false,
            Err(e) => {
                err = Some(e);
                true
            }
        },
        "the forged READ never completed",
    );
    drop(mr);
    (buf, err.unwrap())
}

fn assert_remote_access_error(e: &DataPathError) {
    match e {
        DataPathError::Completion { status, opcode } => {
            assert_eq!(*status, WcStatus::RemAccessErr, "{e}");
            assert_eq!(*opcode, WcOpcode::RdmaRead);
        }
        other => panic!("expected a remote access error, got {other}"),
    }
}

fn assert_victim_failed(a: &mut DataPath) {
    until(
        || a.qp().state() == QpState::Err,
        "the victim's QP stayed up",
    );
    until(
        || a.process().is_err(),
        "the victim's data path did not fail",
    );
}

#[test]
fn reading_past_the_frame_is_refused_and_reads_nothing() {
    let (mut a, mut b) = pair();
    let (_, released) = send_frame(&mut a, &mut b, false);
    let (addr, len, rkey) = b.last_descriptor().unwrap();
    assert_eq!(len as usize, FRAME);
    // The window is still valid (the FIN is unprocessed): one byte more is refused.
    let (buf, err) = attack(&mut b, addr, rkey, FRAME + 1);
    assert_remote_access_error(&err);
    assert!(buf.iter().all(|&x| x == 0), "bytes were read");
    assert_victim_failed(&mut a);
    drop(a);
    assert_eq!(
        released.load(Ordering::SeqCst),
        1,
        "held frame not released"
    );
}

#[test]
fn reading_before_the_frame_is_refused() {
    let (mut a, mut b) = pair();
    send_frame(&mut a, &mut b, false);
    let (addr, _, rkey) = b.last_descriptor().unwrap();
    let (buf, err) = attack(&mut b, addr - 64, rkey, 128);
    assert_remote_access_error(&err);
    assert!(buf.iter().all(|&x| x == 0));
    assert_victim_failed(&mut a);
}

#[test]
fn a_forged_rkey_is_refused() {
    // The window's next key, and a neighbouring window's: each on a fresh connection (a refused
    // READ fails the connection).
    for forge in [inc_rkey as fn(u32) -> u32, |k: u32| k.wrapping_add(0x100)] {
        let (mut a, mut b) = pair();
        send_frame(&mut a, &mut b, false);
        let (addr, _, rkey) = b.last_descriptor().unwrap();
        let (buf, err) = attack(&mut b, addr, forge(rkey), 64);
        assert_remote_access_error(&err);
        assert!(buf.iter().all(|&x| x == 0));
        assert_victim_failed(&mut a);
    }
}

#[test]
fn a_descriptor_replayed_after_its_fin_is_refused() {
    let (mut a, mut b) = pair();
    let (_, released) = send_frame(&mut a, &mut b, true);
    assert_eq!(released.load(Ordering::SeqCst), 1);
    let (addr, len, rkey) = b.last_descriptor().unwrap();
    let (buf, err) = attack(&mut b, addr, rkey, len as usize);
    assert_remote_access_error(&err);
    assert!(buf.iter().all(|&x| x == 0), "bytes were read after the FIN");
    assert_victim_failed(&mut a);
}

#[test]
fn a_reused_buffer_gets_a_new_window_key_each_time() {
    let (mut a, mut b) = pair();
    let mut keys = Vec::new();
    for _ in 0..3 {
        send_frame(&mut a, &mut b, true);
        keys.push(b.last_descriptor().unwrap().2);
    }
    keys.dedup();
    assert_eq!(keys.len(), 3, "window keys reused: {keys:x?}");
    assert!(a.stats().rndv_tx == 3);
}

#[test]
fn control_a_read_inside_a_valid_window_succeeds() {
    // The same forged-READ path, aimed exactly at the frame while its window is valid, reads
    // the frame: the refusals above come from the window, not from the test's plumbing.
    let (mut a, mut b) = pair();
    let (data, _) = send_frame(&mut a, &mut b, false);
    let (addr, len, rkey) = b.last_descriptor().unwrap();
    let (buf, err) = attack(&mut b, addr, rkey, len as usize);
    // The READ succeeded; the data path then refuses the completion it did not post.
    assert!(
        matches!(err, DataPathError::Setup("unknown completion")),
        "{err}"
    );
    assert!(buf == data);
}

//! Tests that cut across the engine, the wire and direct reads (QP state driven without a
//! device thread).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cma::pull_into;
use super::completion::{CqInner, CqShared};
use super::config::WireAddr;
use super::engine::{QpInner, QpShared};
use super::keys::{MrEntry, MrTable};
use super::link::{RxAction, RxDest, Wire};
use super::nic::Shared;
use super::os::lock;
use super::wire::PSN_MASK;
use super::wr::SqEntry;
use crate::fd::EventFd;
use crate::provider::*;

fn cq() -> Arc<CqShared> {
    Arc::new(CqShared {
        inner: Mutex::new(CqInner {
            q: VecDeque::new(),
            armed: None,
            overrun: false,
        }),
        efd: EventFd::new().expect("eventfd"),
        cap: 64,
    })
}

fn qp() -> QpShared {
    QpShared {
        qpn: 7,
        secret: 0,
        pdn: 1,
        caps: QpCaps::default(),
        sig_all: true,
        send_cq: cq(),
        recv_cq: cq(),
        cma_slot: AtomicU64::new(0),
        inner: Mutex::new(QpInner::new()),
        waiters: AtomicU32::new(0),
        waiting: Mutex::new(0),
        handoff: std::sync::Condvar::new(),
    }
}

/// A requester in RTS with a live wire, a 17 ms ACK timeout and `psn` as its next PSN.
fn rts(psn: u32) -> QpInner {
    let mut g = QpInner::new();
    g.state = QpState::Rts;
    g.timeout = Some(Duration::from_millis(17));
    g.wire = Some(Wire::new_opt(None));
    g.next_psn = psn;
    g.tx_psn = psn;
    g
}

const REMOTE: RemoteAddr = RemoteAddr {
    addr: 0x1000,
    rkey: 9,
};

/// Queues a request as `post_send` does (state checks aside).
fn post(g: &mut QpInner, wr_id: u64, op: SendOp) {
    let psn = g.next_psn;
    g.next_psn = (psn + 1) & PSN_MASK;
    g.sq.push_back(SqEntry {
        wr_id,
        op,
        sges: Vec::new(),
        inline: None,
        len: 0,
        signaled: true,
        solicited: false,
        fence: false,
        psn,
        done: false,
    });
}

#[test]
fn a_read_answered_after_its_retransmission_was_scheduled_leaves_the_queue_moving() {
    // The ACK timer fires for a READ whose response is already in the socket (the progress
    // thread was late): the timer rewinds transmission to that READ, then the same pass
    // receives the original response and completes it. The next request posted must still
    // go out: it used to wait forever behind a transmit position naming no entry.
    let qp = qp();
    let start = PSN_MASK; // the last PSN before the wrap
    let mut g = rts(start);
    g.retry_cnt = 1;
    g.retries_left = 1;
    post(&mut g, 1, SendOp::RdmaRead(REMOTE));
    assert_eq!(g.next_request(), Some(0));
    g.tx_psn = g.next_psn; // transmitted
    let now = Instant::now();
    g.last_progress = now - Duration::from_millis(20);
    g.on_timers(&qp, now);
    assert_eq!(g.tx_psn, start, "the timeout rewinds to the READ");
    g.on_payload_done(
        &qp,
        RxAction::ReadResp {
            psn: start,
            pull_failed: false,
        },
        false,
        now,
    );
    let wcs: Vec<WorkCompletion> = lock(&qp.send_cq.inner).q.drain(..).collect();
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::Success));
    assert!(g.sq.is_empty());
    post(&mut g, 2, SendOp::RdmaWrite(REMOTE));
    assert_eq!(g.next_request(), Some(0), "the new WRITE goes out next");
    assert_eq!(g.timed_psn(), None, "not on the wire yet: no timer");
}

/// A device's shared state without its thread or listener.
fn test_shared() -> Shared {
    Shared {
        id: 1,
        addr: WireAddr::parse("tcp:127.0.0.1:1").unwrap(),
        gid_mode: false,
        mrs: MrTable::default(),
        next_key: AtomicU32::new(1),
        next_qpn: AtomicU32::new(1),
        next_pdn: AtomicU32::new(1),
        next_mw: AtomicU32::new(1),
        qps: Mutex::new(HashMap::new()),
        doorbell: EventFd::new().unwrap(),
        asleep: AtomicBool::new(false),
        rung: AtomicBool::new(false),
        shutdown: AtomicBool::new(false),
        killed: AtomicBool::new(false),
        cma: false,
        pulled: AtomicU64::new(0),
        faults: false,
    }
}

#[test]
fn a_direct_read_copies_what_is_there_and_fails_on_unmapped_memory() {
    let sh = test_shared();
    let src: Vec<u8> = (0..100_000u32).map(|i| (i * 13 + 5) as u8).collect();
    let mut dst = vec![0u8; src.len()];
    let base = dst.as_mut_ptr() as u64;
    let key = 5;
    sh.mrs.write().insert(
        key,
        MrEntry {
            addr: base,
            len: src.len() as u64,
            access: Access::LOCAL_WRITE,
            pdn: 1,
        },
    );
    let pid = std::process::id();
    // Two segments, split unevenly: each gets its part.
    let cut = 12_345usize;
    let dest = |failed| RxDest::Mem {
        segs: vec![(base, cut, key), (base + cut as u64, src.len() - cut, key)],
        idx: 0,
        off: 0,
        pdn: 1,
        need: Access::LOCAL_WRITE,
        failed,
    };
    let mut d = dest(false);
    assert!(pull_into(
        &mut d,
        &sh.mrs,
        pid,
        src.as_ptr() as u64,
        src.len()
    ));
    assert!(!matches!(d, RxDest::Mem { failed: true, .. }));
    assert_eq!(dst, src);
    // Nothing mapped at the responder's address: the READ fails instead of completing.
    let mut d = dest(false);
    assert!(!pull_into(&mut d, &sh.mrs, pid, 8, 4096));
    // The requester's completion for it: a remote access error, and the QP goes to ERR.
    let qp = qp();
    let mut g = rts(100);
    post(&mut g, 1, SendOp::RdmaRead(REMOTE));
    g.tx_psn = 101;
    g.on_payload_done(
        &qp,
        RxAction::ReadResp {
            psn: 100,
            pull_failed: true,
        },
        false,
        Instant::now(),
    );
    let wcs: Vec<WorkCompletion> = lock(&qp.send_cq.inner).q.drain(..).collect();
    assert_eq!(wcs[0].wr_id, 1);
    assert_eq!(wcs[0].status, WcStatus::RemAccessErr);
    assert_eq!(g.state, QpState::Err);
}

#[test]
fn a_retransmission_resumes_at_the_oldest_request_still_pending() {
    // Two READs time out together; the first one's original response then arrives: the
    // retransmission goes on with the second, not with the one just completed.
    let qp = qp();
    let mut g = rts(100);
    post(&mut g, 1, SendOp::RdmaRead(REMOTE));
    post(&mut g, 2, SendOp::RdmaRead(REMOTE));
    g.tx_psn = 102;
    let now = Instant::now();
    g.last_progress = now - Duration::from_millis(20);
    g.on_timers(&qp, now);
    assert_eq!(g.tx_psn, 100);
    g.on_payload_done(
        &qp,
        RxAction::ReadResp {
            psn: 100,
            pull_failed: false,
        },
        false,
        now,
    );
    assert_eq!(g.sq.len(), 1);
    assert_eq!(g.tx_psn, 101);
    assert_eq!(g.next_request(), Some(0));
    assert_eq!(g.sq[0].wr_id, 2);
}

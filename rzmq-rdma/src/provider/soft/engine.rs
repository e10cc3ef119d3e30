//! A QP's NIC-side state: send and receive queues, PSNs, ACK and RNR timers, error and flush.
//! The two directions that drive it (`tx`, `rx`) and the pass that runs both (`progress`) sit
//! above.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::cma::CmaInfo;
use super::completion::{wc, CqShared};
use super::link::{Ctrl, TxChunk, Wire};
use super::os::lock;
use super::wire::{pdiff, Hdr, K_NAK, PSN_MASK};
use super::wr::{RqEntry, SqEntry};
use crate::provider::*;

/// The device's limit on RDMA READs outstanding per QP, as requester (`max_qp_rd_atom`) and as
/// responder (`max_qp_init_rd_atom`).
pub(super) const MAX_RD_ATOMIC: u8 = 16;

#[derive(Clone, Copy)]
pub(super) struct Remote {
    pub(super) dev: u64,
    pub(super) qpn: u32,
    /// Where the peer offers direct reads (both ends must, [`SoftConfig::cma`]).
    pub(super) cma: Option<CmaInfo>,
    /// The offer is proven ([`cma_proven`]): READs ask for direct responses.
    pub(super) pull: bool,
    /// Proofs tried so far (the peer stores its proof at its RTR, which may come after our
    /// first READ; we stop trying after a few).
    pub(super) proof_tries: u8,
}

/// A QP's state, shared by its handle and the progress thread.
pub(super) struct QpShared {
    pub(super) qpn: u32,
    /// Random per QP, published only in its endpoint: a wire that attaches to this QP must
    /// present it, so only the peer that received the endpoint over the (authenticated) control
    /// channel can, not a third party that guessed the device and QP numbers.
    pub(super) secret: u64,
    pub(super) pdn: u32,
    pub(super) caps: QpCaps,
    pub(super) sig_all: bool,
    pub(super) send_cq: Arc<CqShared>,
    pub(super) recv_cq: Arc<CqShared>,
    /// The secret of the QP this one was connected to (set at RTR), read by that QP's process
    /// as proof before it reads our memory directly ([`cma_proven`]).
    pub(super) cma_slot: AtomicU64,
    pub(super) inner: Mutex<QpInner>,
    /// Threads waiting for `inner` (posting, polling state) while the progress thread holds it.
    pub(super) waiters: AtomicU32,
    /// `waiters` under a lock, for the progress thread to sleep on until they are through.
    pub(super) waiting: Mutex<u32>,
    pub(super) handoff: std::sync::Condvar,
}

impl QpShared {
    /// The QP's state, for the consumer's calls (post, modify, query) and fault injection.
    pub(super) fn lock(&self) -> MutexGuard<'_, QpInner> {
        match self.inner.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        {
            let mut w = lock(&self.waiting);
            *w += 1;
            self.waiters.store(*w, Ordering::SeqCst);
        }
        let g = lock(&self.inner);
        let mut w = lock(&self.waiting);
        *w -= 1;
        self.waiters.store(*w, Ordering::SeqCst);
        if *w == 0 {
            self.handoff.notify_all();
        }
        g
    }

    /// A consumer waits for the QP: the progress thread cuts its pass short and lets it in.
    /// (A NIC never makes a doorbell wait for its DMA; a mutex would otherwise hand the lock
    /// back to the busy progress thread again and again while a poster sleeps.)
    pub(super) fn contended(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// The progress thread's lock: waiting consumers go first.
    pub(super) fn lock_for_service(&self) -> MutexGuard<'_, QpInner> {
        if self.contended() {
            let mut w = lock(&self.waiting);
            while *w > 0 {
                // (The timeout only bounds the damage of a lost wake-up; none is expected.)
                w = self
                    .handoff
                    .wait_timeout(w, Duration::from_millis(10))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        lock(&self.inner)
    }
}

/// A QP's mutable state, under [`QpShared::lock`]: queues, PSNs, timers, its wire.
pub(super) struct QpInner {
    pub(super) state: QpState,
    pub(super) access: Access,
    pub(super) remote: Option<Remote>,
    pub(super) min_rnr_timer: u8,
    // requester
    pub(super) sq: VecDeque<SqEntry>,
    pub(super) sq_retired_unsignaled: u32,
    pub(super) next_psn: u32,
    pub(super) tx_psn: u32,
    pub(super) timeout: Option<Duration>,
    pub(super) retry_cnt: u8,
    pub(super) retries_left: u8,
    pub(super) rnr_retry: u8,
    pub(super) rnr_left: u8,
    pub(super) rnr_until: Option<Instant>,
    /// Start of the current ACK-timeout interval: the transmission of the oldest
    /// unacknowledged request, or the last progress since (ACK, response or wire bytes).
    pub(super) last_progress: Instant,
    /// RDMA READs this QP may have outstanding as requester (RTS `max_rd_atomic`).
    pub(super) max_rd_atomic: u8,
    /// The next packet built goes to a request when one is ready (after a READ response).
    pub(super) req_turn: bool,
    // responder
    pub(super) rq: VecDeque<RqEntry>,
    pub(super) epsn: u32,
    pub(super) nak_sent: bool,
    pub(super) ack_pending: bool,
    /// Incoming RDMA READs this QP serves at once as responder (RTR `max_dest_rd_atomic`).
    pub(super) max_dest_rd_atomic: u8,
    // wire and faults
    pub(super) wire: Option<Wire>,
    pub(super) hold_until: Option<Instant>,
    pub(super) corrupt_next: u32,
}

impl QpInner {
    pub(super) fn new() -> QpInner {
        QpInner {
            state: QpState::Reset,
            access: Access::NONE,
            remote: None,
            min_rnr_timer: 12,
            sq: VecDeque::new(),
            sq_retired_unsignaled: 0,
            next_psn: 0,
            tx_psn: 0,
            timeout: None,
            retry_cnt: 7,
            retries_left: 7,
            rnr_retry: 7,
            rnr_left: 7,
            rnr_until: None,
            last_progress: Instant::now(),
            max_rd_atomic: MAX_RD_ATOMIC,
            req_turn: false,
            rq: VecDeque::new(),
            epsn: 0,
            nak_sent: false,
            ack_pending: false,
            max_dest_rd_atomic: MAX_RD_ATOMIC,
            wire: None,
            hold_until: None,
            corrupt_next: 0,
        }
    }

    /// Moves to ERR: every outstanding send and receive WR completes with WR_FLUSH_ERR, in order.
    pub(super) fn enter_err(&mut self, qp: &QpShared) {
        self.state = QpState::Err;
        for e in self.sq.drain(..) {
            qp.send_cq.push(
                wc(
                    e.wr_id,
                    WcStatus::WrFlushErr,
                    e.op.wc_opcode(),
                    0,
                    None,
                    qp.qpn,
                ),
                false,
            );
        }
        self.sq_retired_unsignaled = 0;
        for r in self.rq.drain(..) {
            qp.recv_cq.push(
                wc(
                    r.wr_id,
                    WcStatus::WrFlushErr,
                    WcOpcode::Recv,
                    0,
                    None,
                    qp.qpn,
                ),
                false,
            );
        }
        self.rnr_until = None;
    }

    /// Completes finished send WRs from the head, in order.
    pub(super) fn retire(&mut self, qp: &QpShared) {
        while self.sq.front().is_some_and(|e| e.done) {
            let e = self.sq.pop_front().expect("front checked");
            if e.signaled {
                qp.send_cq.push(
                    wc(
                        e.wr_id,
                        WcStatus::Success,
                        e.op.wc_opcode(),
                        e.len,
                        None,
                        qp.qpn,
                    ),
                    false,
                );
                self.sq_retired_unsignaled = 0;
            } else {
                self.sq_retired_unsignaled += 1;
            }
        }
        // A retransmission rewinds `tx_psn` to the oldest pending request; that request may
        // complete anyway (its original READ response or ACK was only late). Transmission then
        // resumes at the oldest request still pending: left behind the queue's head, `tx_psn`
        // would name no entry, and nothing posted later would ever go out.
        match self.sq.front() {
            Some(f) if pdiff(self.tx_psn, f.psn) < 0 => self.tx_psn = f.psn,
            None => self.tx_psn = self.next_psn,
            _ => {}
        }
    }

    /// The send WR with `psn` fails with `status`: earlier finished WRs complete, this one
    /// completes with the error, the QP goes to ERR and the rest is flushed.
    pub(super) fn fail_send(&mut self, qp: &QpShared, psn: u32, status: WcStatus) {
        self.retire(qp);
        while let Some(e) = self.sq.front() {
            let d = pdiff(e.psn, psn);
            if d > 0 {
                break;
            }
            let e = self.sq.pop_front().expect("front checked");
            let st = if d == 0 { status } else { WcStatus::WrFlushErr };
            qp.send_cq
                .push(wc(e.wr_id, st, e.op.wc_opcode(), 0, None, qp.qpn), false);
        }
        self.enter_err(qp);
    }

    pub(super) fn sq_index(&self, psn: u32) -> Option<usize> {
        let front = self.sq.front()?;
        let d = pdiff(psn, front.psn);
        if d < 0 || d as usize >= self.sq.len() {
            None
        } else {
            Some(d as usize)
        }
    }

    /// Marks non-READ WRs up to `psn` (inclusive when `incl`) acknowledged.
    pub(super) fn ack_upto(&mut self, psn: u32, incl: bool, now: Instant) {
        let mut moved = false;
        for e in self.sq.iter_mut() {
            let d = pdiff(e.psn, psn);
            if d > 0 || (d == 0 && !incl) {
                break;
            }
            if !e.done && !matches!(e.op, SendOp::RdmaRead(_)) {
                e.done = true;
                moved = true;
            }
        }
        if moved {
            self.progressed(now);
        }
        let next = if incl { (psn + 1) & PSN_MASK } else { psn };
        if pdiff(next, self.tx_psn) > 0 && pdiff(self.next_psn, next) >= 0 {
            self.tx_psn = next;
        }
    }

    pub(super) fn progressed(&mut self, now: Instant) {
        self.last_progress = now;
        self.retries_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    pub(super) fn first_pending_psn(&self) -> Option<u32> {
        self.sq.iter().find(|e| !e.done).map(|e| e.psn)
    }

    /// The oldest request that is on the wire and not yet acknowledged: the one the ACK timer
    /// runs for. Requests still waiting in the send queue (behind other traffic, a READ limit
    /// or a fence) have no timer, as on hardware, whose local ACK timeout counts from
    /// transmission. Without a working wire (cut, peer dead, never attached) every request
    /// counts as sent into the void, as a NIC's packets are when the link is gone.
    pub(super) fn timed_psn(&self) -> Option<u32> {
        let first = self.first_pending_psn()?;
        let linked = self.wire.as_ref().is_some_and(|w| !w.dead);
        (!linked || pdiff(self.tx_psn, first) > 0).then_some(first)
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let mut d: Option<Instant> = None;
        let mut add = |t: Instant| d = Some(d.map_or(t, |x| x.min(t)));
        if self.state == QpState::Rts && self.timed_psn().is_some() {
            if let Some(to) = self.timeout {
                add(self.last_progress + to);
            }
        }
        if let Some(t) = self.rnr_until {
            add(t);
        }
        if let Some(t) = self.hold_until {
            add(t);
        }
        d
    }

    pub(super) fn on_timers(&mut self, qp: &QpShared, now: Instant) {
        if self.hold_until.is_some_and(|t| now >= t) {
            self.hold_until = None;
        }
        if self.rnr_until.is_some_and(|t| now >= t) {
            self.rnr_until = None;
            self.last_progress = now;
        }
        if self.state != QpState::Rts {
            return;
        }
        let (Some(to), Some(psn)) = (self.timeout, self.timed_psn()) else {
            return;
        };
        if self.rnr_until.is_some() || now < self.last_progress + to {
            return;
        }
        if self.retries_left == 0 {
            self.fail_send(qp, psn, WcStatus::RetryExcErr);
        } else {
            self.retries_left -= 1;
            self.last_progress = now;
            self.tx_psn = psn;
        }
    }

    pub(super) fn queue_ctrl(&mut self, hdr: Hdr, payload: Option<TxChunk>) {
        if let Some(w) = self.wire.as_mut() {
            if !w.dead {
                w.ctrl.push_back(Ctrl {
                    hdr,
                    payload,
                    fresh_read: false,
                });
            }
        }
    }

    pub(super) fn nak(&mut self, psn: u32, code: u32, aux2: u32) {
        self.queue_ctrl(
            Hdr {
                kind: K_NAK,
                psn,
                aux: code,
                aux2,
                ..Hdr::default()
            },
            None,
        );
    }
}

//! The QP handle: state transitions (`modify`), posting of send and receive WRs, memory-window
//! binds.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cma::CmaInfo;
use super::completion::wc;
use super::endpoint::{decode_extra, encode_extra};
use super::engine::{QpInner, QpShared, Remote, MAX_RD_ATOMIC};
use super::keys::{window_fits, MrEntry, MW_KEY_BIT};
use super::link::{connect_wire, Wire};
use super::mr::{SoftMr, SoftMw};
use super::nic::DevHandle;
use super::os::lock;
use super::wire::PSN_MASK;
use super::wr::{RqEntry, SqEntry};
use crate::provider::*;

/// Whether an RC QP may move from `from` to `to` (`ibv_modify_qp`'s state table: RESET ->
/// INIT -> (INIT) -> RTR -> RTS, and any state to ERR or RESET).
pub(crate) fn transition_ok(from: QpState, to: QpState) -> bool {
    matches!(
        (from, to),
        (QpState::Reset, QpState::Init)
            | (QpState::Init, QpState::Init)
            | (QpState::Init, QpState::Rtr)
            | (QpState::Rtr, QpState::Rts)
            | (_, QpState::Err)
            | (_, QpState::Reset)
    )
}

/// What a work request posted to a QP meets, by the QP's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Queued and executed.
    Execute,
    /// Completed at once with `WR_FLUSH_ERR` (the QP is in ERR).
    Flush,
    /// Refused at the post (`EINVAL`): the QP cannot take it in this state.
    Refuse,
}

/// A send WR (or bind, invalidation): executed in RTS, flushed in ERR, refused before RTS.
#[inline]
pub(crate) fn send_admission(state: QpState) -> Admission {
    match state {
        QpState::Rts => Admission::Execute,
        QpState::Err => Admission::Flush,
        _ => Admission::Refuse,
    }
}

/// A receive WR: refused in RESET, flushed in ERR, queued otherwise (INIT, RTR, RTS).
#[inline]
pub(crate) fn recv_admission(state: QpState) -> Admission {
    match state {
        QpState::Reset => Admission::Refuse,
        QpState::Err => Admission::Flush,
        _ => Admission::Execute,
    }
}

/// A soft RC QP.
pub(super) struct SoftQp {
    pub(super) h: Arc<DevHandle>,
    pub(super) qp: Arc<QpShared>,
    pub(super) _cqs: (Arc<dyn Cq>, Arc<dyn Cq>),
}

impl Drop for SoftQp {
    fn drop(&mut self) {
        lock(&self.h.shared.qps).remove(&self.qp.qpn);
        let mut g = self.qp.lock();
        g.wire = None;
        g.state = QpState::Reset;
    }
}

impl Qp for SoftQp {
    fn qpn(&self) -> u32 {
        self.qp.qpn
    }

    fn state(&self) -> QpState {
        self.qp.lock().state
    }

    fn caps(&self) -> QpCaps {
        self.qp.caps
    }

    fn endpoint(&self, psn: u32) -> Result<Endpoint> {
        Ok(Endpoint {
            provider: ProviderKind::Soft,
            qpn: self.qp.qpn,
            psn: psn & PSN_MASK,
            lid: 0,
            gid: Gid::default(),
            mtu: Mtu::M4096,
            extra: encode_extra(
                self.h.shared.id,
                self.qp.secret,
                &self.h.shared.addr,
                self.h.shared.cma.then(|| CmaInfo {
                    pid: std::process::id(),
                    slot_addr: self.qp.cma_slot.as_ptr() as u64,
                }),
            ),
        })
    }

    fn modify(&self, attr: &ModifyQp) -> Result<()> {
        let s = &self.h.shared;
        let connect_to = {
            let mut g = self.qp.lock();
            let from = g.state;
            let to = attr.target();
            if !transition_ok(from, to) {
                return Err(Error::InvalidTransition { from, to });
            }
            match attr {
                ModifyQp::Init(a) => {
                    if a.port != 1 {
                        return Err(Error::InvalidArgument("soft devices have port 1 only"));
                    }
                    g.access = a.access;
                    g.state = QpState::Init;
                    None
                }
                ModifyQp::Rtr(a) => {
                    if a.max_dest_rd_atomic > MAX_RD_ATOMIC {
                        return Err(Error::InvalidArgument(
                            "max_dest_rd_atomic beyond the device limit",
                        ));
                    }
                    if a.remote.provider != ProviderKind::Soft {
                        return Err(Error::Descriptor("remote endpoint is not a soft QP"));
                    }
                    let (dev, secret, addr, cma) = decode_extra(&a.remote.extra)?;
                    // The proof our peer looks for before it reads our memory directly.
                    self.qp.cma_slot.store(secret, Ordering::SeqCst);
                    g.remote = Some(Remote {
                        dev,
                        qpn: a.remote.qpn,
                        cma: cma.filter(|_| s.cma),
                        pull: false,
                        proof_tries: 0,
                    });
                    g.epsn = a.remote.psn & PSN_MASK;
                    g.min_rnr_timer = a.min_rnr_timer.min(31);
                    g.max_dest_rd_atomic = a.max_dest_rd_atomic.max(1);
                    g.state = QpState::Rtr;
                    if (s.id, self.qp.qpn) < (dev, a.remote.qpn) {
                        Some((addr, dev, a.remote.qpn, secret))
                    } else {
                        None
                    }
                }
                ModifyQp::Rts(a) => {
                    if a.retry_cnt > 7 || a.rnr_retry > 7 || a.timeout > 31 {
                        return Err(Error::InvalidArgument("timeout/retry out of range"));
                    }
                    if a.max_rd_atomic > MAX_RD_ATOMIC {
                        return Err(Error::InvalidArgument(
                            "max_rd_atomic beyond the device limit",
                        ));
                    }
                    g.next_psn = a.sq_psn & PSN_MASK;
                    g.tx_psn = g.next_psn;
                    g.timeout = if a.timeout == 0 {
                        None
                    } else {
                        Some(Duration::from_nanos(4096u64 << a.timeout))
                    };
                    g.retry_cnt = a.retry_cnt;
                    g.retries_left = a.retry_cnt;
                    g.rnr_retry = a.rnr_retry;
                    g.rnr_left = a.rnr_retry;
                    g.max_rd_atomic = a.max_rd_atomic.max(1);
                    g.state = QpState::Rts;
                    None
                }
                ModifyQp::Err => {
                    g.enter_err(&self.qp);
                    None
                }
                ModifyQp::Reset => {
                    let caps_free = QpInner::new();
                    *g = caps_free;
                    None
                }
            }
        };
        if let Some((addr, dev, qpn, secret)) = connect_to {
            // Connect outside the QP lock: the progress thread keeps serving other QPs.
            let wire = match connect_wire(&addr, s.id, self.qp.qpn, dev, qpn, secret) {
                Ok(st) => Wire::new(st),
                Err(_) => Wire::dead(),
            };
            let mut g = self.qp.lock();
            if g.state >= QpState::Rtr && g.state != QpState::Err && g.wire.is_none() {
                g.wire = Some(wire);
            }
        }
        s.doorbell.signal();
        Ok(())
    }

    unsafe fn post_send(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        let caps = self.qp.caps;
        let mut g = self.qp.lock();
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |error| Err(PostError { index: i, error });
            if wr.sg_list.len() > caps.max_send_sge as usize {
                return fail(Error::TooManySge {
                    n: wr.sg_list.len(),
                    max: caps.max_send_sge,
                });
            }
            let len = wr.total_len();
            if len > (1usize << 31) {
                return fail(Error::InvalidArgument("message longer than 2 GiB"));
            }
            let inline = wr.flags.contains(SendFlags::INLINE);
            if inline {
                if matches!(wr.op, SendOp::RdmaRead(_)) {
                    return fail(Error::InvalidArgument("RDMA READ cannot be inline"));
                }
                if len > caps.max_inline_data as usize {
                    return fail(Error::InlineTooLarge {
                        len,
                        max: caps.max_inline_data,
                    });
                }
            }
            match send_admission(g.state) {
                Admission::Execute => {}
                Admission::Flush => {
                    self.qp.send_cq.push(
                        wc(
                            wr.wr_id,
                            WcStatus::WrFlushErr,
                            wr.op.wc_opcode(),
                            0,
                            None,
                            self.qp.qpn,
                        ),
                        false,
                    );
                    continue;
                }
                Admission::Refuse => {
                    return fail(Error::InvalidState {
                        op: "post_send",
                        state: g.state,
                    })
                }
            }
            if g.sq.len() + g.sq_retired_unsignaled as usize >= caps.max_send_wr as usize {
                return fail(Error::QueueFull {
                    queue: WorkQueue::Send,
                    depth: caps.max_send_wr,
                });
            }
            let inline_data = if inline {
                let mut v = Vec::with_capacity(len);
                for s in wr.sg_list {
                    if s.length > 0 {
                        // SAFETY: for INLINE WRs the caller guarantees (post_send's contract)
                        // that each SGE range is readable memory.
                        v.extend_from_slice(unsafe {
                            std::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
                        });
                    }
                }
                Some(v)
            } else {
                None
            };
            if g.sq.iter().all(|e| e.done) {
                // Nothing was outstanding: no ACK timeout was running. (A live wire restarts it
                // when the request is transmitted.)
                g.last_progress = Instant::now();
            }
            let psn = g.next_psn;
            g.next_psn = (psn + 1) & PSN_MASK;
            g.sq.push_back(SqEntry {
                wr_id: wr.wr_id,
                op: wr.op,
                sges: if inline {
                    Vec::new()
                } else {
                    wr.sg_list.to_vec()
                },
                inline: inline_data,
                len: len as u32,
                signaled: self.qp.sig_all || wr.flags.contains(SendFlags::SIGNALED),
                solicited: wr.flags.contains(SendFlags::SOLICITED),
                fence: wr.flags.contains(SendFlags::FENCE),
                psn,
                done: false,
            });
        }
        drop(g);
        self.h.shared.ring();
        Ok(())
    }

    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        let caps = self.qp.caps;
        let mut g = self.qp.lock();
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |error| Err(PostError { index: i, error });
            if wr.sg_list.len() > caps.max_recv_sge as usize {
                return fail(Error::TooManySge {
                    n: wr.sg_list.len(),
                    max: caps.max_recv_sge,
                });
            }
            match recv_admission(g.state) {
                Admission::Refuse => {
                    return fail(Error::InvalidState {
                        op: "post_recv",
                        state: g.state,
                    })
                }
                Admission::Flush => {
                    self.qp.recv_cq.push(
                        wc(
                            wr.wr_id,
                            WcStatus::WrFlushErr,
                            WcOpcode::Recv,
                            0,
                            None,
                            self.qp.qpn,
                        ),
                        false,
                    );
                    continue;
                }
                Admission::Execute => {}
            }
            if g.rq.len() >= caps.max_recv_wr as usize {
                return fail(Error::QueueFull {
                    queue: WorkQueue::Recv,
                    depth: caps.max_recv_wr,
                });
            }
            g.rq.push_back(RqEntry {
                wr_id: wr.wr_id,
                sges: wr.sg_list.to_vec(),
            });
        }
        Ok(())
    }

    fn bind_mw(
        &self,
        wr_id: u64,
        mw: &dyn Mw,
        mr: &dyn Mr,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32> {
        let mw = mw
            .as_any()
            .downcast_ref::<SoftMw>()
            .ok_or(Error::InvalidArgument(
                "memory window from another provider",
            ))?;
        let mr = mr
            .as_any()
            .downcast_ref::<SoftMr>()
            .ok_or(Error::InvalidArgument("MR from another provider"))?;
        let g = self.qp.lock();
        match send_admission(g.state) {
            Admission::Execute => {}
            Admission::Flush => {
                // Posted in ERR: flushed, as every WR is.
                self.qp.send_cq.push(
                    wc(
                        wr_id,
                        WcStatus::WrFlushErr,
                        WcOpcode::BindMw,
                        0,
                        None,
                        self.qp.qpn,
                    ),
                    false,
                );
                return Ok(mw.rkey());
            }
            Admission::Refuse => {
                return Err(Error::InvalidState {
                    op: "post_send(BIND_MW)",
                    state: g.state,
                })
            }
        }
        if !window_fits(mr.addr, mr.len as u64, mr.access, addr, len, access)
            || mw.pdn != self.qp.pdn
            || !Arc::ptr_eq(&mw.h.shared, &self.h.shared)
        {
            // A real NIC completes the bind with MW_BIND_ERR and moves the QP to ERR.
            drop(g);
            self.qp.send_cq.push(
                wc(
                    wr_id,
                    WcStatus::MwBindErr,
                    WcOpcode::BindMw,
                    0,
                    None,
                    self.qp.qpn,
                ),
                false,
            );
            self.qp.lock().enter_err(&self.qp);
            return Ok(mw.rkey());
        }
        // Executed at post time, in order with everything posted later (documented).
        let new = inc_rkey(mw.rkey());
        let mut mrs = self.h.shared.mrs.write();
        mrs.remove(&mw.rkey());
        mrs.insert(
            new,
            MrEntry {
                addr,
                len,
                access,
                pdn: mw.pdn,
            },
        );
        mw.rkey.store(new, Ordering::Release);
        Ok(new)
    }

    fn invalidate_mw(&self, wr_id: u64, rkey: u32) -> Result<()> {
        let g = self.qp.lock();
        match send_admission(g.state) {
            Admission::Execute => {}
            Admission::Flush => {
                self.qp.send_cq.push(
                    wc(
                        wr_id,
                        WcStatus::WrFlushErr,
                        WcOpcode::LocalInv,
                        0,
                        None,
                        self.qp.qpn,
                    ),
                    false,
                );
                return Ok(());
            }
            Admission::Refuse => {
                return Err(Error::InvalidState {
                    op: "post_send(LOCAL_INV)",
                    state: g.state,
                })
            }
        }
        drop(g);
        let mut mrs = self.h.shared.mrs.write();
        match mrs.get(&rkey) {
            Some(e) if rkey & MW_KEY_BIT != 0 && e.pdn == self.qp.pdn => {
                mrs.remove(&rkey);
                Ok(())
            }
            _ => {
                drop(mrs);
                self.qp.send_cq.push(
                    wc(
                        wr_id,
                        WcStatus::LocProtErr,
                        WcOpcode::LocalInv,
                        0,
                        None,
                        self.qp.qpn,
                    ),
                    false,
                );
                self.qp.lock().enter_err(&self.qp);
                Ok(())
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

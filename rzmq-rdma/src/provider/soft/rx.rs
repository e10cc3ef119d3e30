//! The receive side: reading packets off the wire and acting on them as requester (ACK, NAK,
//! READ response) and responder (SEND, WRITE, READ).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::cma::pull_into;
use super::completion::wc;
use super::engine::{QpInner, QpShared};
use super::keys::{mr_ok, sges_ok};
use super::link::{
    deliver, local_dest, sys_recv, Ctrl, Io, RxAction, RxDest, RxState, TxChunk, IO_CHUNK,
    PASS_BUDGET, RXBUF,
};
use super::nic::Shared;
use super::wire::{
    decode_header, pdiff, rnr_delay, FramingLost, Hdr, F_IMM, F_PULL, F_SOLICITED, HDR_LEN, K_ACK,
    K_NAK, K_READ_REQ, K_READ_RESP, K_SEND, K_WRITE, NAK_INV_REQ, NAK_REM_ACCESS, NAK_REM_OP,
    NAK_RNR, NAK_SEQ, PSN_MASK,
};
use super::wr::RqEntry;
use crate::provider::*;

impl QpInner {
    pub(super) fn pump_rx(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> usize {
        let mut moved = 0;
        loop {
            if moved >= PASS_BUDGET || qp.contended() {
                return moved;
            }
            let Some(w) = self.wire.as_mut() else {
                return moved;
            };
            let Some(fd) = w.fd() else {
                return moved;
            };
            match &mut w.rx {
                RxState::Header => {
                    if w.rx_end - w.rx_start < HDR_LEN {
                        if w.rx_start > 0 {
                            w.rxbuf.copy_within(w.rx_start..w.rx_end, 0);
                            w.rx_end -= w.rx_start;
                            w.rx_start = 0;
                        }
                        // After a large payload, large payloads likely follow (READ responses,
                        // big WRITEs): read just the header, so that the next payload goes
                        // straight to its destination instead of through this buffer.
                        let free = if w.rx_header_only {
                            HDR_LEN - w.rx_end
                        } else {
                            w.rxbuf.len() - w.rx_end
                        };
                        let ptr = w.rxbuf[w.rx_end..].as_mut_ptr();
                        match sys_recv(fd, ptr, free) {
                            Io::Progress(n) => {
                                w.rx_end += n;
                                w.rx_header_only = false;
                                moved += n;
                                self.last_progress = now;
                                continue;
                            }
                            Io::Blocked => return moved,
                            Io::Dead => {
                                w.cut();
                                return moved;
                            }
                        }
                    }
                    let mut hb = [0u8; HDR_LEN];
                    hb.copy_from_slice(&w.rxbuf[w.rx_start..w.rx_start + HDR_LEN]);
                    w.rx_start += HDR_LEN;
                    match decode_header(&hb) {
                        Err(FramingLost) => {
                            // Framing lost: the link is unusable.
                            w.cut();
                            return moved;
                        }
                        Ok((h, false)) => {
                            w.rx = RxState::Payload {
                                remaining: h.len as usize,
                                dest: RxDest::Discard,
                                action: RxAction::None,
                            };
                        }
                        Ok((h, true)) => {
                            let (dest, action) = self.on_header(qp, sh, h, now);
                            let w = self.wire.as_mut().expect("still attached");
                            w.rx = RxState::Payload {
                                remaining: h.len as usize,
                                dest,
                                action,
                            };
                        }
                    }
                }
                RxState::Payload {
                    remaining, dest, ..
                } => {
                    if *remaining == 0 {
                        let st = std::mem::replace(&mut w.rx, RxState::Header);
                        if let RxState::Payload { dest, action, .. } = st {
                            let failed = matches!(dest, RxDest::Mem { failed: true, .. });
                            self.on_payload_done(qp, action, failed, now);
                        }
                        continue;
                    }
                    let buffered = w.rx_end - w.rx_start;
                    let discard = matches!(dest, RxDest::Discard);
                    if buffered > 0 {
                        let n = buffered.min(*remaining);
                        if !discard {
                            let src = w.rxbuf[w.rx_start..w.rx_start + n].as_ptr();
                            let mut done = 0usize;
                            deliver(dest, &sh.mrs, n, |p, k| {
                                // SAFETY: `deliver` hands out p writable for k bytes (checked
                                // under the MR read lock); src + done .. + k stays inside the n
                                // buffered bytes because deliver never asks for more than n.
                                unsafe { std::ptr::copy_nonoverlapping(src.add(done), p, k) };
                                done += k;
                                Io::Progress(k)
                            });
                        }
                        w.rx_start += n;
                        *remaining -= n;
                        continue;
                    }
                    w.rx_start = 0;
                    w.rx_end = 0;
                    let r = if *remaining >= RXBUF && !discard {
                        // Large payload: read straight into its destination.
                        let n = (*remaining).min(IO_CHUNK);
                        match deliver(dest, &sh.mrs, n, |p, k| sys_recv(fd, p, k)) {
                            Io::Progress(k) => {
                                *remaining -= k;
                                w.rx_header_only = *remaining == 0;
                                Io::Progress(k)
                            }
                            other => other,
                        }
                    } else {
                        let ptr = w.rxbuf.as_mut_ptr();
                        let r = sys_recv(fd, ptr, RXBUF);
                        if let Io::Progress(n) = r {
                            w.rx_end = n;
                        }
                        r
                    };
                    match r {
                        Io::Progress(k) => {
                            moved += k;
                            self.last_progress = now;
                        }
                        Io::Blocked => return moved,
                        Io::Dead => {
                            w.cut();
                            return moved;
                        }
                    }
                }
            }
        }
    }

    /// A packet header arrived: decide where its payload goes and what happens after it.
    pub(super) fn on_header(
        &mut self,
        qp: &QpShared,
        sh: &Shared,
        h: Hdr,
        now: Instant,
    ) -> (RxDest, RxAction) {
        match h.kind {
            K_ACK => {
                if self.state == QpState::Rts {
                    self.ack_upto(h.psn, true, now);
                    self.retire(qp);
                }
                (RxDest::Discard, RxAction::None)
            }
            K_NAK => {
                if self.state == QpState::Rts {
                    self.on_nak(qp, h, now);
                }
                (RxDest::Discard, RxAction::None)
            }
            K_READ_RESP => {
                if self.state != QpState::Rts {
                    return (RxDest::Discard, RxAction::None);
                }
                let Some(i) = self.sq_index(h.psn) else {
                    return (RxDest::Discard, RxAction::None);
                };
                let e = &self.sq[i];
                let pulled = h.flags & F_PULL != 0;
                let len = if pulled { h.aux } else { h.len };
                let SendOp::RdmaRead(from) = e.op else {
                    return (RxDest::Discard, RxAction::None);
                };
                if e.done || len != e.len || (pulled && h.len != 0) {
                    return (RxDest::Discard, RxAction::None);
                }
                let mut dest = local_dest(&e.sges, qp.pdn);
                let mut pull_failed = false;
                if pulled {
                    // The responder validated the range; copy it from its process now, in
                    // order with everything else on the wire (this stands for the payload).
                    let pid = self
                        .remote
                        .as_ref()
                        .filter(|r| r.pull)
                        .and_then(|r| r.cma)
                        .map(|c| c.pid);
                    pull_failed = !pid.is_some_and(|pid| {
                        pull_into(&mut dest, &sh.mrs, pid, from.addr, len as usize)
                    });
                    if !pull_failed {
                        sh.pulled.fetch_add(u64::from(len), Ordering::Relaxed);
                    }
                }
                (
                    dest,
                    RxAction::ReadResp {
                        psn: h.psn,
                        pull_failed,
                    },
                )
            }
            K_SEND | K_WRITE | K_READ_REQ => self.on_request(qp, sh, h),
            _ => (RxDest::Discard, RxAction::None),
        }
    }

    pub(super) fn on_nak(&mut self, qp: &QpShared, h: Hdr, now: Instant) {
        if self.sq_index(h.psn).is_none() {
            return;
        }
        // Everything before the NAKed PSN was executed.
        self.ack_upto(h.psn, false, now);
        match h.aux {
            NAK_SEQ => {
                if self.retries_left == 0 {
                    self.fail_send(qp, h.psn, WcStatus::RetryExcErr);
                    return;
                }
                self.retries_left -= 1;
                self.tx_psn = h.psn;
                self.last_progress = now;
            }
            NAK_RNR => {
                if self.rnr_retry != 7 {
                    if self.rnr_left == 0 {
                        self.fail_send(qp, h.psn, WcStatus::RnrRetryExcErr);
                        return;
                    }
                    self.rnr_left -= 1;
                }
                self.rnr_until = Some(now + rnr_delay(h.aux2));
                self.tx_psn = h.psn;
                self.last_progress = now;
            }
            NAK_REM_ACCESS => self.fail_send(qp, h.psn, WcStatus::RemAccessErr),
            NAK_INV_REQ => self.fail_send(qp, h.psn, WcStatus::RemInvReqErr),
            _ => self.fail_send(qp, h.psn, WcStatus::RemOpErr),
        }
        self.retire(qp);
    }

    /// Responder side of SEND, WRITE and READ requests.
    pub(super) fn on_request(&mut self, qp: &QpShared, sh: &Shared, h: Hdr) -> (RxDest, RxAction) {
        let discard = (RxDest::Discard, RxAction::None);
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            return discard;
        }
        let d = pdiff(h.psn, self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.nak_sent = true;
                let e = self.epsn;
                self.nak(e, NAK_SEQ, 0);
            }
            return discard;
        }
        if d < 0 {
            // A duplicate (our ACK was late or lost): acknowledge, re-execute only READs.
            if h.kind == K_READ_REQ {
                self.serve_read(qp, sh, h, false);
            } else {
                self.ack_pending = true;
            }
            return discard;
        }
        self.nak_sent = false;
        let has_imm = h.flags & F_IMM != 0;
        match h.kind {
            K_SEND => {
                let Some(rq) = self.rq.pop_front() else {
                    self.rnr(h.psn);
                    return discard;
                };
                let mrs = sh.mrs.read();
                if !sges_ok(&mrs, &rq.sges, qp.pdn, Access::LOCAL_WRITE) {
                    drop(mrs);
                    self.responder_error(qp, rq, WcStatus::LocProtErr, h.psn, NAK_REM_OP);
                    return discard;
                }
                drop(mrs);
                let cap: u64 = rq.sges.iter().map(|s| u64::from(s.length)).sum();
                if u64::from(h.len) > cap {
                    self.responder_error(qp, rq, WcStatus::LocLenErr, h.psn, NAK_INV_REQ);
                    return discard;
                }
                (local_dest(&rq.sges, qp.pdn), RxAction::Send { rq, hdr: h })
            }
            K_WRITE => {
                if has_imm && self.rq.is_empty() {
                    self.rnr(h.psn);
                    return discard;
                }
                let ok = self.access.contains(Access::REMOTE_WRITE)
                    && (h.len == 0
                        || mr_ok(
                            &sh.mrs.read(),
                            h.rkey,
                            qp.pdn,
                            h.addr,
                            u64::from(h.len),
                            Access::REMOTE_WRITE,
                        ));
                if !ok {
                    self.nak(h.psn, NAK_REM_ACCESS, 0);
                    self.enter_err(qp);
                    return discard;
                }
                let rq = if has_imm { self.rq.pop_front() } else { None };
                let segs = if h.len > 0 {
                    vec![(h.addr, h.len as usize, h.rkey)]
                } else {
                    Vec::new()
                };
                (
                    RxDest::Mem {
                        segs,
                        idx: 0,
                        off: 0,
                        pdn: qp.pdn,
                        need: Access::REMOTE_WRITE,
                        failed: false,
                    },
                    RxAction::Write { rq, hdr: h },
                )
            }
            _ => {
                self.serve_read(qp, sh, h, true);
                discard
            }
        }
    }

    pub(super) fn serve_read(&mut self, qp: &QpShared, sh: &Shared, h: Hdr, fresh: bool) {
        let len = h.aux;
        let ok = self.access.contains(Access::REMOTE_READ)
            && (len == 0
                || mr_ok(
                    &sh.mrs.read(),
                    h.rkey,
                    qp.pdn,
                    h.addr,
                    u64::from(len),
                    Access::REMOTE_READ,
                ));
        if !ok {
            if fresh {
                self.nak(h.psn, NAK_REM_ACCESS, 0);
                self.enter_err(qp);
            }
            return;
        }
        if fresh {
            let serving = self.wire.as_ref().map_or(0, |w| w.reads_serving);
            if serving >= u32::from(self.max_dest_rd_atomic) {
                // More READs outstanding than the responder resources negotiated at RTR: the
                // requester broke its max_rd_atomic (Invalid Request NAK, class A error).
                self.nak(h.psn, NAK_INV_REQ, 0);
                self.enter_err(qp);
                return;
            }
            self.epsn = (self.epsn + 1) & PSN_MASK;
        }
        let Some(w) = self.wire.as_mut().filter(|w| !w.dead) else {
            return;
        };
        if fresh {
            w.reads_serving += 1;
        }
        // Validated above: the requester may read the range itself. The response then carries
        // no payload, and the range must stay registered until the READ completes there, which
        // verbs require anyway (deregistering memory under a READ is undefined).
        // (The header's length counts the bytes that follow it on the wire: none; `aux` says
        // how many the requester copies.)
        let pull = h.flags & F_PULL != 0 && len > 0;
        w.ctrl.push_back(Ctrl {
            hdr: Hdr {
                kind: K_READ_RESP,
                flags: if pull { F_PULL } else { 0 },
                psn: h.psn,
                len: if pull { 0 } else { len },
                aux: if pull { len } else { 0 },
                ..Hdr::default()
            },
            payload: (!pull).then_some(TxChunk::Mem {
                addr: h.addr,
                len: len as usize,
                key: h.rkey,
                pdn: qp.pdn,
            }),
            fresh_read: fresh,
        });
    }

    pub(super) fn rnr(&mut self, psn: u32) {
        self.nak_sent = true;
        let t = u32::from(self.min_rnr_timer);
        self.nak(psn, NAK_RNR, t);
    }

    pub(super) fn responder_error(
        &mut self,
        qp: &QpShared,
        rq: RqEntry,
        st: WcStatus,
        psn: u32,
        code: u32,
    ) {
        qp.recv_cq
            .push(wc(rq.wr_id, st, WcOpcode::Recv, 0, None, qp.qpn), false);
        self.nak(psn, code, 0);
        self.enter_err(qp);
    }

    pub(super) fn on_payload_done(
        &mut self,
        qp: &QpShared,
        action: RxAction,
        failed: bool,
        now: Instant,
    ) {
        match action {
            RxAction::None => {}
            RxAction::Send { rq, hdr } => {
                if failed {
                    self.responder_error(qp, rq, WcStatus::LocProtErr, hdr.psn, NAK_REM_OP);
                    return;
                }
                self.epsn = (self.epsn + 1) & PSN_MASK;
                self.ack_pending = true;
                let imm = (hdr.flags & F_IMM != 0).then_some(hdr.imm);
                qp.recv_cq.push(
                    wc(
                        rq.wr_id,
                        WcStatus::Success,
                        WcOpcode::Recv,
                        hdr.len,
                        imm,
                        qp.qpn,
                    ),
                    hdr.flags & F_SOLICITED != 0,
                );
            }
            RxAction::Write { rq, hdr } => {
                if failed {
                    if let Some(rq) = rq {
                        self.rq.push_front(rq);
                    }
                    self.nak(hdr.psn, NAK_REM_ACCESS, 0);
                    self.enter_err(qp);
                    return;
                }
                self.epsn = (self.epsn + 1) & PSN_MASK;
                self.ack_pending = true;
                if let Some(rq) = rq {
                    qp.recv_cq.push(
                        wc(
                            rq.wr_id,
                            WcStatus::Success,
                            WcOpcode::RecvRdmaWithImm,
                            hdr.len,
                            Some(hdr.imm),
                            qp.qpn,
                        ),
                        hdr.flags & F_SOLICITED != 0,
                    );
                }
            }
            RxAction::ReadResp { psn, pull_failed } => {
                if self.state != QpState::Rts {
                    return;
                }
                if pull_failed {
                    // The responder's memory could not be read (gone since it validated the
                    // READ): as a NIC whose DMA read faulted there.
                    self.fail_send(qp, psn, WcStatus::RemAccessErr);
                    return;
                }
                if failed {
                    self.fail_send(qp, psn, WcStatus::LocProtErr);
                    return;
                }
                self.ack_upto(psn, false, now);
                if let Some(i) = self.sq_index(psn) {
                    self.sq[i].done = true;
                    self.progressed(now);
                }
                self.retire(qp);
            }
        }
    }
}

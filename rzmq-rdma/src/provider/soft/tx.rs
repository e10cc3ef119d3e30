//! A QP's transmit side: which packet goes out next (ACKs and NAKs, READ responses and requests
//! in turn, within READ limits and fences) and the encoding of requests onto the wire.

use std::time::Instant;

use super::cma::{cma_proven, CMA_PROOF_TRIES};
use super::engine::{QpInner, QpShared};
use super::keys::{mr_ok, sges_ok};
use super::link::{write_tx, TxChunk, PASS_BUDGET, TX_COPY_MAX, TX_QUEUE_MAX};
use super::nic::Shared;
use super::wire::{pdiff, Hdr, F_IMM, F_PULL, F_SOLICITED, K_READ_REQ, K_SEND, K_WRITE, PSN_MASK};
use crate::provider::*;

impl QpInner {
    /// Builds packets and writes them until the wire blocks, the pass budget is spent or nothing
    /// is left to send: the progress thread must never sleep while a packet could go out (it
    /// polls for writability only while bytes are queued).
    pub(super) fn pump_tx(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> usize {
        let held = self.hold_until.is_some_and(|t| now < t);
        let mut moved = 0;
        loop {
            if self.wire.as_ref().is_none_or(|w| w.dead) {
                break;
            }
            let built = self.build_packets(qp, sh, now);
            if held {
                break;
            }
            let w = self.wire.as_mut().expect("checked");
            let (n, blocked) = write_tx(w, &sh.mrs, PASS_BUDGET - moved);
            moved += n;
            if blocked || moved >= PASS_BUDGET || qp.contended() || (!built && w.tx.is_empty()) {
                break;
            }
        }
        if moved > 0 {
            self.last_progress = now;
        }
        moved
    }

    /// The send-queue index of the next request to transmit, when the send queue may transmit
    /// it now: RTS, no RNR wait, and within `max_rd_atomic` and fences for READs.
    pub(super) fn next_request(&self) -> Option<usize> {
        if self.state != QpState::Rts || self.rnr_until.is_some() {
            return None;
        }
        if pdiff(self.tx_psn, self.next_psn) >= 0 {
            return None;
        }
        let i = self.sq_index(self.tx_psn)?;
        let e = &self.sq[i];
        let is_read = matches!(e.op, SendOp::RdmaRead(_));
        if is_read || e.fence {
            // READs before this one whose responses have not all arrived are outstanding.
            let reading = self
                .sq
                .iter()
                .take(i)
                .filter(|p| !p.done && matches!(p.op, SendOp::RdmaRead(_)))
                .count();
            if (e.fence && reading > 0) || (is_read && reading >= usize::from(self.max_rd_atomic)) {
                // Real send queues wait here (in order): the READ, and all behind it, goes out
                // when an earlier READ's response completes.
                return None;
            }
        }
        Some(i)
    }

    /// Moves packets into the wire's transmit queue (up to [`TX_QUEUE_MAX`] queued): ACKs and
    /// NAKs first, READ responses and requests alternately so that neither direction starves the
    /// other. Returns whether anything was added.
    pub(super) fn build_packets(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> bool {
        let mut built = false;
        loop {
            let w = self.wire.as_mut().expect("checked by caller");
            if w.dead || w.tx_queued >= TX_QUEUE_MAX {
                break;
            }
            let ctrl_first = w
                .ctrl
                .front()
                .map(|c| c.payload.is_none() || !self.req_turn);
            let req = if ctrl_first == Some(true) {
                None
            } else {
                self.next_request()
            };
            let w = self.wire.as_mut().expect("checked by caller");
            if req.is_none() {
                let Some(c) = w.ctrl.pop_front() else {
                    break;
                };
                w.push_bytes(&c.hdr.encode());
                let big = c.payload.is_some();
                match c.payload {
                    Some(TxChunk::Mem {
                        addr,
                        len,
                        key,
                        pdn,
                    }) => w.push_mem(addr, len, key, pdn),
                    Some(TxChunk::Bytes(b)) => w.push_bytes(&b),
                    Some(TxChunk::ReadEnd) | None => {}
                }
                if c.fresh_read {
                    w.tx.push_back(TxChunk::ReadEnd);
                }
                if big {
                    self.req_turn = true;
                }
                built = true;
                continue;
            }
            let i = req.expect("checked");
            self.req_turn = false;
            if !self.build_request(qp, sh, i, now) {
                break;
            }
            built = true;
        }
        built
    }

    /// Encodes the request at sq index `i` onto the wire. False when it failed locally (the QP
    /// went to ERR).
    pub(super) fn build_request(
        &mut self,
        qp: &QpShared,
        sh: &Shared,
        i: usize,
        now: Instant,
    ) -> bool {
        if self.first_pending_psn() == Some(self.sq[i].psn) {
            // The oldest unacknowledged request goes on the wire: its ACK timeout starts now,
            // not when it was posted (it may have waited behind other traffic).
            self.last_progress = now;
        }
        let corrupt = self.corrupt_next > 0;
        let e = &self.sq[i];
        let mut h = Hdr {
            psn: e.psn,
            flags: if e.solicited { F_SOLICITED } else { 0 },
            ..Hdr::default()
        };
        let mut payload = true;
        match e.op {
            SendOp::Send => {
                h.kind = K_SEND;
            }
            SendOp::SendWithImm(imm) => {
                h.kind = K_SEND;
                h.flags |= F_IMM;
                h.imm = imm;
            }
            SendOp::RdmaWrite(r) => {
                h.kind = K_WRITE;
                h.addr = r.addr;
                h.rkey = r.rkey;
            }
            SendOp::RdmaWriteWithImm(r, imm) => {
                h.kind = K_WRITE;
                h.flags |= F_IMM;
                h.addr = r.addr;
                h.rkey = r.rkey;
                h.imm = imm;
            }
            SendOp::RdmaRead(r) => {
                h.kind = K_READ_REQ;
                h.addr = r.addr;
                h.rkey = r.rkey;
                h.aux = e.len;
                if let Some(r) = self.remote.as_mut() {
                    if let (Some(c), false) = (r.cma, r.pull) {
                        if r.proof_tries < CMA_PROOF_TRIES {
                            r.proof_tries += 1;
                            r.pull = cma_proven(&c, qp.secret);
                        }
                    }
                    if r.pull {
                        h.flags |= F_PULL;
                    }
                }
                payload = false;
            }
        }
        h.len = if payload { e.len } else { 0 };
        // Local protection check (the NIC reads the WQE's SGEs).
        if e.inline.is_none() {
            let need = if payload {
                Access::NONE
            } else {
                Access::LOCAL_WRITE
            };
            let ok = sges_ok(&sh.mrs.read(), &e.sges, qp.pdn, need);
            if !ok {
                let psn = e.psn;
                self.fail_send(qp, psn, WcStatus::LocProtErr);
                return false;
            }
        }
        let mut hb = h.encode();
        if corrupt {
            hb[30] ^= 0x10;
            self.corrupt_next -= 1;
        }
        let e = &self.sq[i];
        let w = self.wire.as_mut().expect("wire checked by caller");
        w.push_bytes(&hb);
        if payload {
            if let Some(d) = &e.inline {
                w.push_bytes(d);
            } else if (e.len as usize) <= TX_COPY_MAX {
                let mrs = sh.mrs.read();
                let mut buf = Vec::with_capacity(e.len as usize);
                for s in &e.sges {
                    if s.length == 0 {
                        continue;
                    }
                    if mr_ok(
                        &mrs,
                        s.lkey,
                        qp.pdn,
                        s.addr,
                        u64::from(s.length),
                        Access::NONE,
                    ) {
                        // SAFETY: the range lies inside a registered MR (checked under the read
                        // lock we hold), which the registrant keeps valid until deregistration.
                        buf.extend_from_slice(unsafe {
                            std::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
                        });
                    } else {
                        buf.resize(buf.len() + s.length as usize, 0);
                    }
                }
                drop(mrs);
                w.push_bytes(&buf);
            } else {
                for s in &e.sges {
                    w.push_mem(s.addr, s.length as usize, s.lkey, qp.pdn);
                }
            }
        }
        self.tx_psn = (self.tx_psn + 1) & PSN_MASK;
        true
    }
}

//! The send path: eager frames into the ring, large ones by rendezvous, and the ring's work
//! requests posted in order.

use rzmq_core::msg::{Msg, MSG_COMMAND, MSG_MORE};

use super::{wr_id, DataPath, DataPathError, Hold, T_MW, T_RECV, T_WRITE};
use crate::provider::{Access, RecvWr, RemoteAddr, SendFlags, SendOp, SendWr, Sge};
use crate::ring::{Kind, Op, MAILBOX_LEN};
use crate::rndv::{Descriptor, DESC_LEN};

impl DataPath {
    /// Queues one frame. `Ok(Some(msg))` hands it back: no room now (ring credits, rendezvous
    /// slots); retry after [`DataPath::process`]. Call [`DataPath::flush`] after a burst.
    pub fn send(&mut self, msg: Msg) -> Result<Option<Msg>, DataPathError> {
        self.check()?;
        let flags = msg.flags() & (MSG_MORE | MSG_COMMAND);
        let len = msg.len();
        let ring = self.ring.as_mut().expect("checked");
        if len <= self.eager_max {
            match ring.send(Kind::Data, flags, msg.data()) {
                Ok(true) => {}
                Ok(false) => return Ok(Some(msg)),
                Err(e) => return self.fail(e.into()),
            }
            self.stats.copies += 1;
            self.stats.copied_bytes += len as u64;
        } else {
            if len > (1 << 31) {
                return Err(DataPathError::Setup("frames above 2 GiB are not supported"));
            }
            let held = self.rndv_tx.in_flight();
            if held >= self.cfg.max_rndv_in_flight
                || (held > 0
                    && self.rndv_tx.in_flight_bytes() + len as u64 > self.cfg.max_rndv_bytes as u64)
            {
                return Ok(Some(msg));
            }
            if !ring.has_room(DESC_LEN) {
                let _ = ring.send(Kind::Rndv, flags, &[0; DESC_LEN]); // counts the stall
                return Ok(Some(msg));
            }
            // Frames this large live in heap storage (owned or external) whose address does not
            // change while the Msg exists, and the Msg is held until the FIN.
            let addr = msg.data().as_ptr() as *mut u8;
            let (hold_mw, cached, own, rkey) = if self.use_mws {
                if !ring.sq_slot_unsignaled() {
                    // The ring may have queued a signaled WR that frees the queue: post it.
                    if let Err(e) = self.post_ops() {
                        return self.fail(e);
                    }
                    return Ok(Some(msg));
                }
                // SAFETY: the Msg keeps the memory alive until its FIN (held with the
                // registration); a cached registration that outlives it grants no remote
                // access (windows do, and they are invalidated at the FIN).
                let cached = match unsafe { self.cache.get(addr, len, Access::MW_BIND) } {
                    Ok(c) => c,
                    Err(e) => return self.fail(e.into()),
                };
                let mw = match self.free_mws.pop() {
                    Some(mw) => mw,
                    None => match self._pd.alloc_mw() {
                        Ok(mw) => mw,
                        Err(e) => return self.fail(e.into()),
                    },
                };
                let bound = self.qp.bind_mw(
                    wr_id(T_MW, None, 0),
                    &*mw,
                    &**cached.mr(),
                    addr as u64,
                    len as u64,
                    Access::REMOTE_READ,
                );
                match bound {
                    Ok(rkey) => (Some((mw, rkey)), Some(cached), None, rkey),
                    Err(e) => return self.fail(e.into()),
                }
            } else {
                // SAFETY: as above; this registration is the frame's own and is dropped
                // (deregistered) at the FIN.
                match unsafe { self._pd.reg_mr(addr, len, Access::REMOTE_READ) } {
                    Ok(mr) => {
                        let rkey = mr.rkey();
                        (None, None, Some(mr), rkey)
                    }
                    Err(e) => return self.fail(e.into()),
                }
            };
            let ring = self.ring.as_mut().expect("checked");
            let desc = Descriptor {
                token: self.rndv_tx.next_token(),
                addr: addr as u64,
                len: len as u64,
                rkey,
            };
            match ring.send(Kind::Rndv, flags, &desc.encode()) {
                Ok(true) => {}
                Ok(false) => return self.fail(DataPathError::Setup("ring room vanished")),
                Err(e) => return self.fail(e.into()),
            }
            let hold = Hold {
                mw: hold_mw,
                _cached: cached,
                _own: own,
                _msg: msg,
            };
            let d = self.rndv_tx.start(hold, desc.addr, desc.len, desc.rkey);
            debug_assert_eq!(d, desc);
            self.stats.rndv_tx += 1;
        }
        self.stats.msgs_tx += 1;
        self.stats.bytes_tx += len as u64;
        Ok(None)
    }

    /// Notifies the peer of everything queued (one doorbell per burst).
    pub fn flush(&mut self) -> Result<(), DataPathError> {
        self.check()?;
        self.ring.as_mut().expect("checked").flush();
        self.post_ops()
    }

    /// Posts what the ring asks for, in its order, without allocating: send WRs in chunks of
    /// [`POST_CHUNK`] (one doorbell each), receives in chunks of [`RECV_WRS`]' length.
    pub(super) fn post_ops(&mut self) -> Result<(), DataPathError> {
        loop {
            let mut ops = [Op::PostRecv(0); POST_CHUNK];
            let mut n = 0;
            let mut recvs = 0;
            let ring = self.ring.as_mut().expect("checked");
            while n < POST_CHUNK {
                match ring.poll_op() {
                    None => break,
                    // Receives go out after the WRs before them and before any after them (the
                    // ring asks for them first, before the credits that advertise them).
                    Some(Op::PostRecv(k)) => {
                        recvs = k;
                        break;
                    }
                    Some(op) => {
                        ops[n] = op;
                        n += 1;
                    }
                }
            }
            if n > 0 {
                self.post_sends(&ops[..n])?;
            }
            let mut left = recvs as usize;
            while left > 0 {
                let k = left.min(RECV_WRS.len());
                self.qp.post_recv(&RECV_WRS[..k])?;
                left -= k;
            }
            if n < POST_CHUNK && recvs == 0 {
                return Ok(());
            }
        }
    }

    /// Posts up to [`POST_CHUNK`] ring writes and credit updates with one `post_send`.
    fn post_sends(&self, ops: &[Op]) -> Result<(), DataPathError> {
        let peer = self.peer.as_ref().expect("connected");
        let mirror = self.ring.as_ref().expect("checked").mirror_region().addr();
        let mirror_lkey = self.mirror_mr.as_ref().expect("connected").lkey();
        let mut credit_bufs = [[0u8; MAILBOX_LEN]; POST_CHUNK];
        for (buf, op) in credit_bufs.iter_mut().zip(ops) {
            if let Op::Credits { credits, .. } = op {
                *buf = credits.encode();
            }
        }
        let mut sges = [Sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; POST_CHUNK];
        for ((sge, op), buf) in sges.iter_mut().zip(ops).zip(&credit_bufs) {
            *sge = match *op {
                Op::Write { off, len, .. } => Sge {
                    addr: mirror + u64::from(off),
                    length: len,
                    lkey: mirror_lkey,
                },
                Op::Credits { .. } => Sge {
                    addr: buf.as_ptr() as u64,
                    length: MAILBOX_LEN as u32,
                    lkey: 0,
                },
                Op::PostRecv(_) => unreachable!("receives are posted apart"),
            };
        }
        let mut wrs = [SendWr {
            wr_id: 0,
            sg_list: &[],
            op: SendOp::RdmaWrite(RemoteAddr { addr: 0, rkey: 0 }),
            flags: SendFlags::NONE,
        }; POST_CHUNK];
        for ((wr, op), sge) in wrs.iter_mut().zip(ops).zip(&sges) {
            let (remote, imm, signal, mut flags, sg_list) = match *op {
                Op::Write {
                    off,
                    len,
                    imm,
                    signal,
                } => (
                    RemoteAddr {
                        addr: peer.ring_addr + u64::from(off),
                        rkey: peer.ring_rkey,
                    },
                    imm,
                    signal,
                    if len <= self.max_inline {
                        SendFlags::INLINE
                    } else {
                        SendFlags::NONE
                    },
                    // A zero-length WRITE (posted for its completion) carries no SGE: nothing
                    // to gather, and zero-length SGEs are not treated alike by all NICs' drivers.
                    if len == 0 {
                        &[][..]
                    } else {
                        std::slice::from_ref(sge)
                    },
                ),
                Op::Credits { imm, signal, .. } => (
                    RemoteAddr {
                        addr: peer.mailbox_addr,
                        rkey: peer.mailbox_rkey,
                    },
                    imm,
                    signal,
                    SendFlags::INLINE,
                    std::slice::from_ref(sge),
                ),
                Op::PostRecv(_) => unreachable!("receives are posted apart"),
            };
            if signal.is_some() {
                flags = flags | SendFlags::SIGNALED;
            }
            *wr = SendWr {
                wr_id: wr_id(T_WRITE, signal, 0),
                sg_list,
                op: match imm {
                    Some(i) => SendOp::RdmaWriteWithImm(remote, i),
                    None => SendOp::RdmaWrite(remote),
                },
                flags,
            };
        }
        // SAFETY: inline SGEs point into `credit_bufs` or the mirror, both alive for the call;
        // non-inline ones are in the registered mirror, which outlives the QP.
        unsafe { self.qp.post_send(&wrs[..ops.len()]) }?;
        Ok(())
    }
}

/// Send WRs posted with one `post_send` (a flush takes at most three).
const POST_CHUNK: usize = 4;

/// Replacement receives (no buffer: only WRITE_WITH_IMM arrives), posted from this table.
const RECV_WRS: [RecvWr<'static>; 16] = [RecvWr {
    wr_id: wr_id(T_RECV, None, 0),
    sg_list: &[],
}; 16];

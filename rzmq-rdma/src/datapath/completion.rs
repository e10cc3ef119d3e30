//! The receive side and completions: readiness, the completion queue, records taken from the
//! ring, rendezvous READs, FINs.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rzmq_core::msg::{Msg, MSG_COMMAND, MSG_MORE};

use super::{wr_id, DataPath, DataPathError, T_MW, T_READ, T_RECV, T_WRITE};
use crate::provider::{RemoteAddr, SendFlags, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use crate::ring::Kind;
use crate::rndv::{Descriptor, RndvError};

impl DataPath {
    /// The next received frame, in order. After a failure, frames that had fully arrived before
    /// it are still returned; then the error.
    pub fn recv(&mut self) -> Result<Option<Msg>, DataPathError> {
        if self.failed && self.ring.is_some() {
            let pool = &self.pool;
            return match self
                .inbox
                .pop(|d, flags, buf| pool.msg_of(buf, d.len as usize, flags))
            {
                Some(m) => Ok(Some(m)),
                None => Err(DataPathError::Failed),
            };
        }
        self.check()?;
        if self.inbox.is_empty() {
            self.pull_records()?;
            self.issue_reads()?;
            self.post_ops()?;
        }
        let pool = &self.pool;
        let m = self
            .inbox
            .pop(|d, flags, buf| pool.msg_of(buf, d.len as usize, flags));
        if let Some(m) = &m {
            self.stats.msgs_rx += 1;
            self.stats.bytes_rx += m.len() as u64;
        }
        Ok(m)
    }

    /// Arms the completion channel; call [`DataPath::process`] once more before sleeping.
    ///
    /// The channel is read here, not in `process`: an arming raises at most one event, and the
    /// owner sleeps only after arming, so one read per arming (and none while nothing was
    /// armed) keeps the fd from staying readable; `process` makes no system call. The pool's
    /// wake-up is drained here too, and only when a buffer came back; the `process` that
    /// follows sees every buffer returned before the drain.
    pub fn arm(&mut self) -> Result<(), DataPathError> {
        if self.woken.load(Ordering::Acquire) {
            self.wake.drain();
            self.woken.store(false, Ordering::Release);
        }
        if self.armed && !self.polled {
            // Still armed: an event that fired since belongs to a completion not yet polled,
            // and leaves the fd readable for the owner's next wait.
            return Ok(());
        }
        if self.armed {
            self.cq.get_events()?;
        }
        self.cq.req_notify(false)?;
        self.armed = true;
        self.polled = false;
        Ok(())
    }

    /// Waits up to `timeout` for [`DataPath::fd`] to become readable.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) > 0 }
    }

    /// Handles completions, FINs, received records, READs and credit returns.
    pub fn process(&mut self) -> Result<(), DataPathError> {
        self.check()?;
        loop {
            self.wcs.clear();
            let n = self.cq.poll(64, &mut self.wcs)?;
            self.progress += n as u64;
            self.polled |= n > 0;
            for i in 0..n {
                let wc = self.wcs[i];
                if let Err(e) = self.on_completion(wc) {
                    // Completions are in order: what arrived before the error is whole. Take
                    // it into the inbox so that `recv` still delivers it.
                    let _ = self.pull_records();
                    return self.fail(e);
                }
            }
            if n < 64 {
                break;
            }
        }
        let done = self
            .ring
            .as_ref()
            .expect("checked")
            .peer_credits()
            .rndv_done;
        // Nothing held and the count in range: nothing to release or check (skips a Vec).
        let fin = if self.rndv_tx.in_flight() == 0 && done < self.rndv_tx.next_token() {
            Ok(Vec::new())
        } else {
            self.rndv_tx.on_fin(done)
        };
        match fin {
            // The peer has read these frames: their windows are invalidated (a replayed
            // descriptor now fails), then dropping the holds returns registrations to the cache
            // (or deregisters them) and releases the frames: an external buffer's release
            // callback runs here, after the peer's READ.
            Ok(released) => {
                for mut h in released {
                    if let Some((mw, rkey)) = h.mw.take() {
                        let ring = self.ring.as_mut().expect("checked");
                        if !ring.sq_slot_unsignaled() {
                            // The queue is full: give up the window rather than leave it valid.
                            drop(mw);
                            continue;
                        }
                        if let Err(e) = self.qp.invalidate_mw(wr_id(T_MW, None, 0), rkey) {
                            return self.fail(e.into());
                        }
                        self.free_mws.push(mw);
                    }
                }
            }
            Err(e) => return self.fail(e.into()),
        }
        if let Err(e) = self.pull_records().and_then(|_| self.issue_reads()) {
            return self.fail(e);
        }
        self.ring.as_mut().expect("checked").flush();
        self.post_ops()
    }

    fn on_completion(&mut self, wc: WorkCompletion) -> Result<(), DataPathError> {
        if wc.status != WcStatus::Success {
            return Err(DataPathError::Completion {
                status: wc.status,
                opcode: wc.opcode,
            });
        }
        let ring = self.ring.as_mut().expect("checked");
        let t = wc.wr_id >> 56;
        let covered = ((wc.wr_id >> 40) & 0xffff) as u32;
        match t {
            T_RECV => ring.on_recv(wc.imm_data.unwrap_or(0))?,
            T_WRITE => ring.on_send_complete(covered),
            T_READ => {
                ring.on_send_complete(covered);
                self.inbox.on_read_done(wc.wr_id & 0xff_ffff_ffff)?;
                ring.rndv_completed(1);
                self.stats.rndv_reads += 1;
            }
            _ => return Err(DataPathError::Setup("unknown completion")),
        }
        Ok(())
    }

    fn pull_records(&mut self) -> Result<(), DataPathError> {
        let ring = self.ring.as_mut().expect("checked");
        while self.inbox.len() < self.cfg.inbox_max {
            let Some(rec) = ring.peek()? else {
                break;
            };
            match rec.kind {
                Kind::Data => {
                    let mut m = Msg::copy_from(rec.data);
                    m.set_more(rec.flags & MSG_MORE != 0);
                    m.set_command(rec.flags & MSG_COMMAND != 0);
                    self.stats.copies += 1;
                    self.stats.copied_bytes += rec.data.len() as u64;
                    self.inbox.push_ready(m);
                }
                Kind::Rndv => {
                    let d = Descriptor::decode(rec.data)?;
                    self.last_desc = Some((d.addr, d.len, d.rkey));
                    if d.len > 1 << 31 {
                        return Err(RndvError::Protocol("rendezvous frame too large").into());
                    }
                    let flags = rec.flags;
                    self.inbox.push_rndv(d, flags)?;
                }
                Kind::Pad => {}
            }
            ring.advance();
            self.progress += 1;
        }
        Ok(())
    }

    fn issue_reads(&mut self) -> Result<(), DataPathError> {
        let ring = self.ring.as_mut().expect("checked");
        let mut err = None;
        while ring.sq_available() > 0 {
            let pool = &self.pool;
            let next = self.inbox.next_read(|d| match pool.alloc(d.len as usize) {
                Ok(b) => b,
                Err(e) => {
                    err = Some(e);
                    None
                }
            });
            let Some((d, buf)) = next else {
                break;
            };
            let signal = ring.sq_slot(true).expect("room checked");
            let sge = [Sge {
                addr: buf.addr(),
                length: d.len as u32,
                lkey: buf.lkey(),
            }];
            let wr = SendWr {
                wr_id: wr_id(T_READ, signal, d.token),
                sg_list: &sge,
                op: SendOp::RdmaRead(RemoteAddr {
                    addr: d.addr,
                    rkey: d.rkey,
                }),
                flags: SendFlags::SIGNALED,
            };
            // SAFETY: not inline; the SGE is a registered pool buffer held by the inbox until
            // the READ completes.
            unsafe { self.qp.post_send(&[wr]) }?;
        }
        match err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

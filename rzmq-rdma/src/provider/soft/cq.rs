//! Completion queues: the completion ring, overrun, and the armed eventfd.

use std::any::Any;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use super::device::DevHandle;
use super::lock;
use crate::fd::EventFd;
use crate::provider::*;

pub(super) struct CqInner {
    pub(super) q: VecDeque<WorkCompletion>,
    pub(super) armed: Option<bool>,
    pub(super) overrun: bool,
}

/// A CQ's state, shared by its handle and the QPs that complete into it.
pub(super) struct CqShared {
    pub(super) inner: Mutex<CqInner>,
    pub(super) efd: EventFd,
    pub(super) cap: u32,
}

impl CqShared {
    pub(super) fn push(&self, wc: WorkCompletion, solicited: bool) {
        let mut g = lock(&self.inner);
        if g.q.len() >= self.cap as usize {
            g.overrun = true;
            return;
        }
        g.q.push_back(wc);
        if let Some(sol_only) = g.armed {
            if !sol_only || solicited || !wc.status.is_ok() {
                g.armed = None;
                self.efd.signal();
            }
        }
    }
}

/// A soft CQ (the verbs handle).
pub(super) struct SoftCq {
    pub(super) _h: Arc<DevHandle>,
    pub(super) cq: Arc<CqShared>,
}

impl Cq for SoftCq {
    fn poll(&self, max: usize, out: &mut Vec<WorkCompletion>) -> Result<usize> {
        let mut g = lock(&self.cq.inner);
        if g.overrun {
            return Err(Error::CqOverrun);
        }
        let n = max.min(g.q.len());
        out.extend(g.q.drain(..n));
        Ok(n)
    }

    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        lock(&self.cq.inner).armed = Some(solicited_only);
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.cq.efd.fd()
    }

    fn get_events(&self) -> Result<u32> {
        Ok(self.cq.efd.drain().min(u64::from(u32::MAX)) as u32)
    }

    fn capacity(&self) -> u32 {
        self.cq.cap
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub(super) fn wc(
    wr_id: u64,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    imm_data: Option<u32>,
    qp_num: u32,
) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode,
        byte_len,
        imm_data,
        qp_num,
        vendor_err: 0,
    }
}

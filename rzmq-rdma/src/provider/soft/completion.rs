//! A CQ's NIC side: the completion ring, overrun, and the armed eventfd the QPs complete
//! into. The verbs handle (`SoftCq`) is in `cq`.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::os::lock;
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

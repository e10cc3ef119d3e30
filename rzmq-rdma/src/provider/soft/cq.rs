//! Completion queues, the verbs handle: polling, arming and the completion fd over the
//! NIC-side ring (`completion`).

use std::any::Any;
use std::os::fd::RawFd;
use std::sync::Arc;

use super::completion::CqShared;
use super::nic::DevHandle;
use super::os::lock;
use crate::provider::*;

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

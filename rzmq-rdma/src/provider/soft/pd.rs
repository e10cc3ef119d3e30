//! Protection domains: memory registration, memory-window allocation and QP creation.

use std::any::Any;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::cq::SoftCq;
use super::engine::{QpInner, QpShared};
use super::keys::{MrEntry, MW_KEY_BIT};
use super::mr::{SoftMr, SoftMw};
use super::nic::DevHandle;
use super::os::{lock, random_u64};
use super::qp::SoftQp;
use crate::provider::*;

/// A soft protection domain (the verbs handle).
pub(super) struct SoftPd {
    pub(super) h: Arc<DevHandle>,
    pub(super) pdn: u32,
}

impl Pd for SoftPd {
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(Error::InvalidArgument("REMOTE_WRITE requires LOCAL_WRITE"));
        }
        if addr.is_null() && len > 0 {
            return Err(Error::InvalidArgument("null address"));
        }
        let s = &self.h.shared;
        let mut mrs = s.mrs.write();
        let key = loop {
            let k = s.next_key.fetch_add(1, Ordering::Relaxed);
            if k != 0 && !mrs.contains_key(&k) {
                break k;
            }
        };
        mrs.insert(
            key,
            MrEntry {
                addr: addr as u64,
                len: len as u64,
                access,
                pdn: self.pdn,
            },
        );
        Ok(Arc::new(SoftMr {
            h: self.h.clone(),
            key,
            addr: addr as u64,
            len,
            access,
        }))
    }

    fn alloc_mw(&self) -> Result<Arc<dyn Mw>> {
        let idx = self.h.shared.next_mw.fetch_add(1, Ordering::Relaxed);
        if idx >= 1 << 23 {
            return Err(Error::InvalidArgument("memory windows exhausted"));
        }
        Ok(Arc::new(SoftMw {
            h: self.h.clone(),
            pdn: self.pdn,
            rkey: AtomicU32::new(MW_KEY_BIT | (idx << 8)),
        }))
    }

    fn create_qp(&self, init: &QpInit) -> Result<Arc<dyn Qp>> {
        let send_cq = init
            .send_cq
            .as_any()
            .downcast_ref::<SoftCq>()
            .ok_or(Error::InvalidArgument("send CQ from another provider"))?
            .cq
            .clone();
        let recv_cq = init
            .recv_cq
            .as_any()
            .downcast_ref::<SoftCq>()
            .ok_or(Error::InvalidArgument("recv CQ from another provider"))?
            .cq
            .clone();
        let c = init.caps;
        if c.max_send_wr == 0
            || c.max_send_wr > 16384
            || c.max_recv_wr > 16384
            || c.max_send_sge > 32
            || c.max_recv_sge > 32
            || c.max_inline_data > 1024
        {
            return Err(Error::InvalidArgument("QP capacities beyond device limits"));
        }
        let s = &self.h.shared;
        let qpn = s.next_qpn.fetch_add(1, Ordering::Relaxed) & 0xff_ffff;
        let qp = Arc::new(QpShared {
            qpn,
            pdn: self.pdn,
            caps: c,
            sig_all: init.sq_sig_all,
            send_cq,
            recv_cq,
            secret: if s.gid_mode { 0 } else { random_u64() },
            cma_slot: AtomicU64::new(0),
            inner: Mutex::new(QpInner::new()),
            waiters: AtomicU32::new(0),
            waiting: Mutex::new(0),
            handoff: std::sync::Condvar::new(),
        });
        lock(&s.qps).insert(qpn, qp.clone());
        Ok(Arc::new(SoftQp {
            h: self.h.clone(),
            qp,
            _cqs: (init.send_cq.clone(), init.recv_cq.clone()),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

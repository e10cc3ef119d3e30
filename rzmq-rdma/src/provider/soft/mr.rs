//! Memory regions and windows, the verbs handles: a registration's key and range, a window's
//! current rkey; dropping either removes its key from the device's table (`keys`).

use std::any::Any;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::nic::DevHandle;
use crate::provider::*;

pub(super) struct SoftMw {
    pub(super) h: Arc<DevHandle>,
    pub(super) pdn: u32,
    pub(super) rkey: AtomicU32,
}

impl Mw for SoftMw {
    fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for SoftMw {
    fn drop(&mut self) {
        // Deallocation invalidates the current binding (if any) at once.
        self.h.shared.mrs.write().remove(&self.rkey());
    }
}

pub(super) struct SoftMr {
    pub(super) h: Arc<DevHandle>,
    pub(super) key: u32,
    pub(super) addr: u64,
    pub(super) len: usize,
    pub(super) access: Access,
}

impl Mr for SoftMr {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn addr(&self) -> u64 {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn access(&self) -> Access {
        self.access
    }
}

impl Drop for SoftMr {
    fn drop(&mut self) {
        // Taking the write lock waits for any transfer chunk in progress: after this returns the
        // NIC never touches the memory again (ibv_dereg_mr is synchronous too).
        self.h.shared.mrs.write().remove(&self.key);
    }
}

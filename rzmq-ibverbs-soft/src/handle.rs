//! What every verb shares: the handle structures (each C structure is the first field of a Rust
//! box, so the pointer handed out is the box's), their lookup, and errno.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use libc::{c_char, c_int, c_uint};
use rzmq_rdma::provider::soft::SoftDevice;
use rzmq_rdma::provider::{Cq, Mr, Mw, Pd, Qp};

use crate::abi::*;

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn copy_name(dst: &mut [c_char], s: &str) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
}

#[repr(C)]
pub(crate) struct Context {
    pub(crate) ibv: ibv_context,
    pub(crate) dev: Arc<SoftDevice>,
    /// qpn -> QP handle, for asynchronous events.
    pub(crate) qps: Mutex<HashMap<u32, usize>>,
    /// Undelivered asynchronous events (type, QP handle).
    pub(crate) events: Mutex<VecDeque<(c_uint, usize)>>,
}

#[repr(C)]
pub(crate) struct PdBox {
    pub(crate) ibv: ibv_pd,
    pub(crate) pd: Arc<dyn Pd>,
    /// MRs, MWs and QPs using it (`ibv_dealloc_pd` is `EBUSY` while any exists).
    pub(crate) users: AtomicUsize,
}

#[repr(C)]
pub(crate) struct MrBox {
    pub(crate) ibv: ibv_mr,
    pub(crate) mr: Arc<dyn Mr>,
}

#[repr(C)]
pub(crate) struct MwBox {
    pub(crate) ibv: ibv_mw,
    pub(crate) mw: Arc<dyn Mw>,
}

#[repr(C)]
pub(crate) struct ChannelBox {
    pub(crate) ibv: ibv_comp_channel,
}

#[repr(C)]
pub(crate) struct CqBox {
    pub(crate) ibv: ibv_cq,
    pub(crate) cq: Arc<dyn Cq>,
    pub(crate) users: AtomicUsize,
}

#[repr(C)]
pub(crate) struct QpBox {
    pub(crate) ibv: ibv_qp,
    pub(crate) qp: Arc<dyn Qp>,
    pub(crate) sq_sig_all: bool,
    /// The attributes last set (for `ibv_query_qp`).
    pub(crate) attr: Mutex<ibv_qp_attr>,
    /// The consumer moved it to ERR (no asynchronous event for that).
    pub(crate) err_requested: AtomicBool,
    /// An asynchronous event was raised for its current ERR.
    pub(crate) err_reported: AtomicBool,
}

/// Reborrows a handle the caller got from this library.
///
/// # Safety
/// `p` must be a live handle of type `T` created here (the C caller's contract for every verb).
pub(crate) unsafe fn handle<'a, T>(p: *mut impl Sized) -> Option<&'a T> {
    // SAFETY: per the function's contract p is null or a live T.
    unsafe { (p as *const T).as_ref() }
}

/// # Safety
/// `ctx` must be a live context from [`ibv_open_device`] or NULL.
pub(crate) unsafe fn context<'a>(ctx: *mut ibv_context) -> Option<&'a Context> {
    // SAFETY: per the contract.
    unsafe { handle::<Context>(ctx) }
}

pub(crate) fn next_handle() -> u32 {
    static H: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    H.fetch_add(1, Ordering::Relaxed)
}

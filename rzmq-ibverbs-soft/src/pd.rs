//! Protection domains, memory regions and memory windows.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_uint, c_void};
use rzmq_rdma::provider::{Access, Device};

use crate::abi::*;
use crate::handle::*;

/// `ibv_alloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { context(ctx) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    match c.dev.alloc_pd() {
        Ok(pd) => Box::into_raw(Box::new(PdBox {
            ibv: ibv_pd {
                context: ctx,
                handle: next_handle(),
            },
            pd,
            users: AtomicUsize::new(0),
        })) as *mut ibv_pd,
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_pd`: `EBUSY` while MRs, MWs or QPs use it.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { handle::<PdBox>(pd) }) else {
        return libc::EINVAL;
    };
    if p.users.load(Ordering::Acquire) != 0 {
        return libc::EBUSY;
    }
    // SAFETY: pd came from ibv_alloc_pd and is freed once.
    drop(unsafe { Box::from_raw(pd as *mut PdBox) });
    0
}

/// Access bits soft implements (`LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ`, `MW_BIND`), and
/// `IBV_ACCESS_RELAXED_ORDERING` (a hint, ignored). Atomics, zero-based and on-demand paging
/// are not supported.
pub(crate) const MR_ACCESS_OK: c_int = 1 | 2 | 4 | 16 | (1 << 20);

/// `ibv_reg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { handle::<PdBox>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if access & !MR_ACCESS_OK != 0 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let acc = Access((access & 0x1f) as u32);
    // SAFETY: the C caller keeps addr..addr+length valid until ibv_dereg_mr (ibv_reg_mr's
    // contract, the same as Pd::reg_mr's).
    match unsafe { p.pd.reg_mr(addr as *mut u8, length, acc) } {
        Ok(mr) => {
            p.users.fetch_add(1, Ordering::AcqRel);
            Box::into_raw(Box::new(MrBox {
                ibv: ibv_mr {
                    context: p.ibv.context,
                    pd,
                    addr,
                    length,
                    handle: next_handle(),
                    lkey: mr.lkey(),
                    rkey: mr.rkey(),
                },
                mr,
            })) as *mut ibv_mr
        }
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

/// `ibv_reg_mr_iova`: only `iova == addr` (soft has no IOVA translation), else `EOPNOTSUPP`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    if iova != addr as u64 {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    // SAFETY: forwarded under the same contract.
    unsafe { ibv_reg_mr(pd, addr, length, access) }
}

/// `ibv_reg_mr_iova2`: as [`ibv_reg_mr_iova`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: forwarded under the same contract.
    unsafe { ibv_reg_mr_iova(pd, addr, length, iova, access as c_int) }
}

/// `ibv_dereg_mr`: the lkey and rkey stop working at once (later WRs using them fail with
/// `LOC_PROT_ERR` / `REM_ACCESS_ERR`).
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if mr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: mr came from ibv_reg_mr and is deregistered once.
    let m = unsafe { Box::from_raw(mr as *mut MrBox) };
    // SAFETY: the MR's PD outlives it (ibv_dealloc_pd is EBUSY until then).
    if let Some(p) = unsafe { handle::<PdBox>(m.ibv.pd) } {
        p.users.fetch_sub(1, Ordering::AcqRel);
    }
    0
}

pub(crate) unsafe extern "C" fn op_alloc_mw(pd: *mut ibv_pd, ty: c_uint) -> *mut ibv_mw {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { handle::<PdBox>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if ty != IBV_MW_TYPE_2 {
        // Soft has type-2 windows only.
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    match p.pd.alloc_mw() {
        Ok(mw) => {
            p.users.fetch_add(1, Ordering::AcqRel);
            Box::into_raw(Box::new(MwBox {
                ibv: ibv_mw {
                    context: p.ibv.context,
                    pd,
                    rkey: mw.rkey(),
                    handle: next_handle(),
                    type_: ty,
                },
                mw,
            })) as *mut ibv_mw
        }
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

pub(crate) unsafe extern "C" fn op_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    if mw.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: mw came from alloc_mw and is freed once.
    let m = unsafe { Box::from_raw(mw as *mut MwBox) };
    // SAFETY: the PD outlives its windows.
    if let Some(p) = unsafe { handle::<PdBox>(m.ibv.pd) } {
        p.users.fetch_sub(1, Ordering::AcqRel);
    }
    0
}

pub(crate) unsafe extern "C" fn op_bind_mw(
    _qp: *mut ibv_qp,
    _mw: *mut ibv_mw,
    _b: *mut ibv_mw_bind,
) -> c_int {
    // ibv_bind_mw is for type-1 windows, which this device does not allocate.
    libc::EINVAL
}

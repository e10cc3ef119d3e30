//! Contexts: `zmq_ctx_new`, `zmq_ctx_term`, `zmq_ctx_shutdown`, `zmq_ctx_set`, `zmq_ctx_get` and
//! the legacy `zmq_init`, `zmq_term`, `zmq_ctx_destroy`.
//!
//! A context handle is a tagged heap object holding an rzmq [`Context`]; an invalid handle gives
//! `EFAULT`, as libzmq.

use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicU32;

use rzmq_core::{Context, Error};

use crate::errno::{call, call_or};
use crate::handle::{self, CTX_TAG};

/// What a context `void*` points to.
#[repr(C)]
pub(crate) struct CtxHandle {
    tag: AtomicU32,
    ctx: Context,
}

/// The context behind a handle; `EFAULT` when it is not a live context.
///
/// # Safety
/// `p` is NULL or a pointer readable for 4 bytes (see [`handle::tag_of`]).
pub(crate) unsafe fn ctx_ref<'a>(p: *mut c_void) -> Result<&'a Context, Error> {
    // SAFETY: forwarded contract.
    if unsafe { handle::tag_of(p) } != Some(CTX_TAG) {
        return Err(Error::Fault);
    }
    // SAFETY: the tag says this is a live CtxHandle, which this library allocated; contexts are
    // thread-safe, so a shared reference is fine from any thread.
    Ok(unsafe { &(*(p as *const CtxHandle)).ctx })
}

/// Creates a new context.
#[no_mangle]
pub extern "C" fn zmq_ctx_new() -> *mut c_void {
    call_or(std::ptr::null_mut(), || {
        // RDMA upgrades with the environment's RdmaOptions (read once per process; programs
        // change the mode with ZMQ_RDMA_MODE).
        rzmq_rdma::install();
        let h = Box::new(CtxHandle {
            tag: AtomicU32::new(CTX_TAG),
            ctx: Context::new(),
        });
        Ok(Box::into_raw(h).cast())
    })
}

/// Terminates a context: blocked calls on its sockets fail with `ETERM`, then this waits until
/// every socket is closed (and lingering messages are sent or dropped) and frees the context.
///
/// # Safety
/// `ctx` is NULL or a pointer returned by [`zmq_ctx_new`] (see the crate's safety contract).
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_term(ctx: *mut c_void) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let c = unsafe { ctx_ref(ctx) }?;
        c.term()?;
        // SAFETY: ctx was checked live above; kill succeeds for exactly one caller.
        if unsafe { handle::kill(ctx, CTX_TAG) } {
            // SAFETY: ctx came from Box::into_raw in zmq_ctx_new and is now dead (killed here,
            // once): no other call will use it as a context, so it moves to the graveyard.
            unsafe { handle::bury(ctx as *mut CtxHandle) };
        }
        Ok(0)
    })
}

/// Shuts a context down without waiting: blocked calls fail with `ETERM`, new sockets are refused.
///
/// # Safety
/// As [`zmq_ctx_term`].
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_shutdown(ctx: *mut c_void) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        unsafe { ctx_ref(ctx) }?.shutdown();
        Ok(0)
    })
}

/// Sets a context option.
///
/// # Safety
/// As [`zmq_ctx_term`].
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_set(ctx: *mut c_void, option: c_int, optval: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let ctx = unsafe { ctx_ref(ctx) }?;
        if option == rzmq_core::options::RDMA_MODE {
            // Process-wide: the upgrader is (docs/SETTINGS.md).
            let mode = rzmq_rdma::upgrade::mode_of_number(optval).ok_or(Error::Inval)?;
            rzmq_rdma::set_mode(mode);
            return Ok(0);
        }
        ctx.set(option, optval)?;
        Ok(0)
    })
}

/// Reads a context option.
///
/// # Safety
/// As [`zmq_ctx_term`].
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_get(ctx: *mut c_void, option: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let ctx = unsafe { ctx_ref(ctx) }?;
        if option == rzmq_core::options::RDMA_MODE {
            return Ok(rzmq_rdma::upgrade::mode_number(rzmq_rdma::upgrade::mode()));
        }
        ctx.get(option)
    })
}

/// Legacy: a new context with `io_threads` I/O threads (`EINVAL` when negative).
#[no_mangle]
pub extern "C" fn zmq_init(io_threads: c_int) -> *mut c_void {
    if io_threads < 0 {
        crate::errno::set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    let ctx = zmq_ctx_new();
    // SAFETY: ctx is NULL or a live context just created.
    unsafe { zmq_ctx_set(ctx, rzmq_core::options::IO_THREADS, io_threads) };
    ctx
}

/// Legacy alias of [`zmq_ctx_term`].
///
/// # Safety
/// As [`zmq_ctx_term`].
#[no_mangle]
pub unsafe extern "C" fn zmq_term(ctx: *mut c_void) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { zmq_ctx_term(ctx) }
}

/// Legacy alias of [`zmq_ctx_term`].
///
/// # Safety
/// As [`zmq_ctx_term`].
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_destroy(ctx: *mut c_void) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { zmq_ctx_term(ctx) }
}

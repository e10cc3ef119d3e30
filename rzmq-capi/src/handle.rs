//! Opaque `void*` handles with a liveness tag, as libzmq's `check_tag`.
//!
//! A handle is a heap object whose first field is a 32-bit tag. A live handle has its kind's tag;
//! a closed one has [`DEAD_TAG`]. Closed handles are not freed at once but parked in a bounded
//! graveyard, so that a use after close (a second `zmq_close`, a `zmq_send` on a closed socket)
//! reads a dead tag and fails with `ENOTSOCK`/`EFAULT` as libzmq does, instead of touching
//! freed memory. Only the oldest of [`GRAVEYARD_CAP`] closed handles is really freed.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Tag of a live context (libzmq's `ctx_t` tag value).
pub(crate) const CTX_TAG: u32 = 0xabad_cafe;
/// Tag of a live socket (libzmq's `socket_base_t` tag value).
pub(crate) const SOCKET_TAG: u32 = 0xbadd_ecaf;
/// Tag of a live timer set (libzmq's `timers_t` tag value).
pub(crate) const TIMERS_TAG: u32 = 0xcafe_dada;
/// Tag of a live poller (libzmq's `socket_poller_t` tag value).
#[cfg(feature = "draft")]
pub(crate) const POLLER_TAG: u32 = 0xcafe_babe;
/// Tag of a closed handle.
pub(crate) const DEAD_TAG: u32 = 0xdead_beef;

/// How many closed handles are kept before the oldest is freed.
const GRAVEYARD_CAP: usize = 1024;

static GRAVEYARD: Mutex<VecDeque<Box<dyn Send>>> = Mutex::new(VecDeque::new());

/// Reads the tag of a handle, or None when the pointer cannot be one (NULL or misaligned).
///
/// # Safety
/// `p` must be NULL or point to readable memory of at least 4 bytes (any handle this library
/// returned, live or parked, qualifies).
pub(crate) unsafe fn tag_of(p: *const c_void) -> Option<u32> {
    if p.is_null() || !(p as *const AtomicU32).is_aligned() {
        return None;
    }
    // SAFETY: non-null, aligned, and readable per the caller's contract; every handle starts
    // with an AtomicU32 (repr(C)), so this reads it atomically.
    Some(unsafe { &*(p as *const AtomicU32) }.load(Ordering::Acquire))
}

/// Marks a handle dead if it has tag `live`; returns false when it was not live (already closed
/// or another kind), so a handle is closed exactly once even if two threads race.
///
/// # Safety
/// As [`tag_of`].
pub(crate) unsafe fn kill(p: *const c_void, live: u32) -> bool {
    // SAFETY: forwarded contract.
    if unsafe { tag_of(p) } != Some(live) {
        return false;
    }
    // SAFETY: checked non-null and aligned by tag_of; the tag is the first field.
    let tag = unsafe { &*(p as *const AtomicU32) };
    tag.compare_exchange(live, DEAD_TAG, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Parks a closed handle; frees the oldest parked one when the graveyard is full.
pub(crate) fn bury(b: Box<dyn Send>) {
    let evicted = {
        let mut g = GRAVEYARD.lock().unwrap_or_else(|e| e.into_inner());
        g.push_back(b);
        if g.len() > GRAVEYARD_CAP {
            g.pop_front()
        } else {
            None
        }
    };
    // Dropped outside the lock: a handle's drop may re-enter the library.
    drop(evicted);
}

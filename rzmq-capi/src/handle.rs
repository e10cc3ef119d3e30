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

/// A closed handle in the graveyard: the pointer the application still holds, and how to free
/// what it points to. Kept raw, never as a `Box`, while parked: a `Box` is a unique borrow, so
/// making one would invalidate the application's pointer, and a late `zmq_close` or `zmq_send`
/// reading the tag through it would be undefined behaviour (Miri's Stacked Borrows says so);
/// the `Box` is made only to free the handle, when nobody may read it any more.
struct Parked {
    ptr: *mut c_void,
    free: unsafe fn(*mut c_void),
}

// SAFETY: a parked handle is dead: no call reaches its contents (only its tag, atomically),
// and the handle types are `Send` (checked by `bury`), so it may be freed on any thread.
unsafe impl Send for Parked {}

impl Drop for Parked {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `Box::into_raw` of the type `free` was made for (`bury`),
        // and leaves the graveyard once, here.
        unsafe { (self.free)(self.ptr) }
    }
}

/// Frees a handle of type `T` made by `Box::into_raw`.
///
/// # Safety
/// `p` came from `Box::<T>::into_raw` and is freed once.
unsafe fn free<T>(p: *mut c_void) {
    // SAFETY: caller's contract.
    drop(unsafe { Box::from_raw(p.cast::<T>()) });
}

static GRAVEYARD: Mutex<VecDeque<Parked>> = Mutex::new(VecDeque::new());

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
///
/// # Safety
/// `p` came from `Box::<T>::into_raw` (a `repr(C)` handle starting with its tag), was killed
/// by the caller ([`kill`] returned true), and is parked once.
pub(crate) unsafe fn bury<T: Send + 'static>(p: *mut T) {
    let parked = Parked {
        ptr: p.cast(),
        free: free::<T>,
    };
    let evicted = {
        let mut g = GRAVEYARD.lock().unwrap_or_else(|e| e.into_inner());
        g.push_back(parked);
        if g.len() > GRAVEYARD_CAP {
            g.pop_front()
        } else {
            None
        }
    };
    // Dropped outside the lock: a handle's drop may re-enter the library.
    drop(evicted);
}

#[cfg(test)]
mod tests {
    //! The handle table's life cycle as the C functions run it (allocate, check, kill, park,
    //! evict), on a handle type of the tests' own; `scripts/miri.sh` runs these under Miri,
    //! whose Stacked Borrows checks that a closed handle's tag may still be read through the
    //! application's pointer and that eviction frees it soundly.
    use super::*;

    const LIVE: u32 = 0x7e57_7a65;

    /// One test at a time: a test that fills the graveyard frees the oldest parked handles,
    /// which another test may still read (as the library does after 1024 later closes).
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A handle as the real ones are laid out: the tag first, then what it owns.
    #[repr(C)]
    struct TestHandle {
        tag: AtomicU32,
        body: Vec<u8>,
    }

    fn new_handle(i: u8) -> *mut c_void {
        Box::into_raw(Box::new(TestHandle {
            tag: AtomicU32::new(LIVE),
            body: vec![i; 16],
        }))
        .cast()
    }

    /// Closes `p` as `zmq_close` does: kill, use the body through a shared reference, park.
    ///
    /// # Safety
    /// `p` from `new_handle`, closed once.
    unsafe fn close(p: *mut c_void) -> bool {
        // SAFETY: a handle of this test (caller's contract).
        if !unsafe { kill(p, LIVE) } {
            return false;
        }
        // SAFETY: allocated by new_handle and not freed (parked handles live on).
        let h = unsafe { &*(p as *const TestHandle) };
        assert!(h.body.len() == 16);
        // SAFETY: killed above, parked once.
        unsafe { bury(p.cast::<TestHandle>()) };
        true
    }

    #[test]
    fn null_and_misaligned_pointers_are_no_handles() {
        // SAFETY: NULL and a misaligned pointer are rejected before any read.
        unsafe {
            assert_eq!(tag_of(std::ptr::null()), None);
            let words = [0u32; 2];
            let odd = words.as_ptr().cast::<u8>().wrapping_add(1).cast::<c_void>();
            assert_eq!(tag_of(odd), None);
        }
    }

    #[test]
    fn a_closed_handle_reads_dead_until_evicted() {
        let _serial = serial();
        let p = new_handle(1);
        // SAFETY: p is a live handle of this test; after close it stays readable, parked.
        unsafe {
            assert_eq!(tag_of(p), Some(LIVE));
            assert!(close(p));
            // A use after close (a second close, a send): the dead tag, read through the
            // application's pointer, not a use after free.
            assert_eq!(tag_of(p), Some(DEAD_TAG));
            assert!(!close(p), "closed once");
            assert!(!kill(p, LIVE));
        }
        // Push it out of the graveyard: the oldest parked handles are freed (Miri's leak
        // check and Stacked Borrows watch the frees).
        for i in 0..GRAVEYARD_CAP as u32 + 1 {
            let q = new_handle(i as u8);
            // SAFETY: fresh handle, closed once.
            assert!(unsafe { close(q) });
        }
    }

    /// A handle's pointer handed to another thread with its provenance (an integer would lose
    /// it, and Miri could then neither check the accesses nor see the parked handle reachable).
    #[derive(Clone, Copy)]
    struct Shared(*mut c_void);

    // SAFETY: the tests' handles are shared the way the C ABI shares them: their tag is read
    // atomically and one `kill` wins.
    unsafe impl Send for Shared {}

    impl Shared {
        /// The pointer (a method, so a closure captures the whole `Send` wrapper).
        fn get(self) -> *mut c_void {
            self.0
        }
    }

    #[test]
    fn two_threads_closing_one_handle_close_it_once() {
        let _serial = serial();
        let rounds = if cfg!(miri) { 8 } else { 200 };
        for _ in 0..rounds {
            let p = Shared(new_handle(7));
            let closers: Vec<_> = (0..2)
                .map(|_| {
                    std::thread::spawn(move || {
                        let p = p.get();
                        // SAFETY: a live or parked handle of this test; `kill` lets one win.
                        unsafe {
                            let t = tag_of(p);
                            assert!(t == Some(LIVE) || t == Some(DEAD_TAG));
                            close(p)
                        }
                    })
                })
                .collect();
            let wins = closers
                .into_iter()
                .map(|t| t.join().unwrap())
                .filter(|&w| w)
                .count();
            assert_eq!(wins, 1, "exactly one close wins");
        }
    }
}

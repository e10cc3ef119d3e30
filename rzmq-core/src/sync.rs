//! The synchronisation primitives of the output hand-off (spsc, byteq, the mailbox, pipes,
//! direct/), from std in every normal build and from [loom](https://docs.rs/loom) under
//! `--cfg loom`, where the model checker explores their interleavings (`scripts/loom.sh`).
//!
//! Normal builds get plain re-exports: nothing here costs anything. `Arc` comes from here where
//! the last owner's drop reads what other threads wrote (a queue's `Drop`): loom then sees the
//! reference count's release and acquire. Only the code whose
//! interleavings matter takes its atomics from here; counters for statistics and the rest of the
//! crate keep std's (loom's atomics are not `const`, and work only inside `loom::model`).

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

/// A busy-wait hint; under loom a yield, so that a spinning thread lets the one it waits for run.
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// The value of an atomic pointer reached through `&mut` (a drop's exclusive access); loom's
/// atomics have no `get_mut`.
#[inline(always)]
pub(crate) fn ptr_get_mut<T>(a: &mut AtomicPtr<T>) -> *mut T {
    #[cfg(not(loom))]
    return *a.get_mut();
    #[cfg(loom)]
    return a.with_mut(|p| *p);
}

/// An `UnsafeCell` whose accesses go through closures, so that loom can check each one against
/// the happens-before order (a data race fails the model). std's cell in normal builds.
pub(crate) mod cell {
    #[cfg(loom)]
    pub(crate) use loom::cell::UnsafeCell;

    /// std's `UnsafeCell` with loom's access API.
    #[cfg(not(loom))]
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        /// A new cell holding `data` (normal builds keep cells of their own where loom's are
        /// not needed, so only loom builds call this).
        #[cfg_attr(not(loom), allow(dead_code))]
        #[inline(always)]
        pub(crate) const fn new(data: T) -> UnsafeCell<T> {
            UnsafeCell(std::cell::UnsafeCell::new(data))
        }

        /// Reads through the cell's pointer.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Writes through the cell's pointer.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

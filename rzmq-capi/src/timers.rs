//! `zmq_timers_*`: a set of periodic timers driven by the caller (`zmq_timers_timeout` says how
//! long to wait, `zmq_timers_execute` runs the handlers that are due).
//!
//! As libzmq's `timers_t`: ids count from 1, times are milliseconds, a handler re-arms at
//! "now + interval" after it ran, and handlers may call back into the same timer set (cancel
//! themselves, add timers). The set is not thread-safe, as libzmq's; an invalid handle gives
//! `EFAULT`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use rzmq_core::Error;

use crate::errno::{call, call_or};
use crate::handle::{self, DEAD_TAG, TIMERS_TAG};

/// The C handler type: called with the timer id and the argument given to `zmq_timers_add`.
pub type zmq_timer_fn = unsafe extern "C" fn(timer_id: c_int, arg: *mut c_void);

#[derive(Clone, Copy)]
struct Timer {
    id: c_int,
    interval: usize,
    handler: zmq_timer_fn,
    arg: *mut c_void,
}

struct State {
    epoch: Instant,
    next_id: c_int,
    seq: u64,
    /// Timers by (due time in ms since `epoch`, insertion order).
    by_due: BTreeMap<(u64, u64), Timer>,
}

impl State {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn insert(&mut self, due: u64, t: Timer) {
        self.seq += 1;
        self.by_due.insert((due, self.seq), t);
    }

    fn find(&self, id: c_int) -> Option<(u64, u64)> {
        self.by_due
            .iter()
            .find(|(_, t)| t.id == id)
            .map(|(k, _)| *k)
    }

    /// Moves timer `id` to "now + interval" (with a new interval if given).
    fn rearm(&mut self, id: c_int, interval: Option<usize>) -> Result<(), Error> {
        let key = self.find(id).ok_or(Error::Inval)?;
        let mut t = self.by_due.remove(&key).ok_or(Error::Inval)?;
        if let Some(i) = interval {
            t.interval = i;
        }
        let due = self.now_ms().saturating_add(t.interval as u64);
        self.insert(due, t);
        Ok(())
    }
}

/// What a timers `void*` points to.
#[repr(C)]
struct Timers {
    tag: AtomicU32,
    state: RefCell<State>,
    /// Nesting depth of `zmq_timers_execute` (the set cannot be destroyed from a handler).
    executing: Cell<u32>,
}

/// The timer set behind a handle; `EFAULT` when it is not a live one.
///
/// # Safety
/// `p` is NULL or readable for 4 bytes; the set is used by one thread at a time.
unsafe fn timers<'a>(p: *mut c_void) -> Result<&'a Timers, Error> {
    // SAFETY: forwarded contract.
    if unsafe { handle::tag_of(p) } != Some(TIMERS_TAG) {
        return Err(Error::Fault);
    }
    // SAFETY: the tag says this is a live Timers allocated by zmq_timers_new; it is only used
    // through shared references (state changes go through the RefCell).
    Ok(unsafe { &*(p as *const Timers) })
}

/// A new, empty timer set.
#[no_mangle]
pub extern "C" fn zmq_timers_new() -> *mut c_void {
    let t = Box::new(Timers {
        tag: AtomicU32::new(TIMERS_TAG),
        state: RefCell::new(State {
            epoch: Instant::now(),
            next_id: 0,
            seq: 0,
            by_due: BTreeMap::new(),
        }),
        executing: Cell::new(0),
    });
    Box::into_raw(t).cast()
}

/// Frees the timer set at `*timers_p` and sets `*timers_p` to NULL (`EFAULT` if not a live set).
///
/// # Safety
/// `timers_p` is NULL or valid; `*timers_p` is NULL or readable for 4 bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_destroy(timers_p: *mut *mut c_void) -> c_int {
    call(|| {
        if timers_p.is_null() {
            return Err(Error::Fault);
        }
        // SAFETY: timers_p is valid (caller's contract).
        let p = unsafe { *timers_p };
        // SAFETY: caller's contract.
        let t = unsafe { timers(p) }?;
        if t.executing.get() != 0 {
            // Destroying the set from one of its own handlers.
            return Err(Error::Fault);
        }
        t.tag.store(DEAD_TAG, Ordering::Release);
        // SAFETY: p came from Box::into_raw in zmq_timers_new and was live until now.
        drop(unsafe { Box::from_raw(p as *mut Timers) });
        // SAFETY: as above.
        unsafe { *timers_p = std::ptr::null_mut() };
        Ok(0)
    })
}

/// Adds a timer firing every `interval` ms; returns its id (`EFAULT` for a NULL handler).
///
/// # Safety
/// `timers_` is NULL or a timer set; `handler` is safe to call with `arg`.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_add(
    timers_: *mut c_void,
    interval: usize,
    handler: Option<zmq_timer_fn>,
    arg: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let t = unsafe { timers(timers_) }?;
        let handler = handler.ok_or(Error::Fault)?;
        let mut s = t.state.try_borrow_mut().map_err(|_| Error::Fault)?;
        s.next_id += 1;
        let id = s.next_id;
        let due = s.now_ms().saturating_add(interval as u64);
        s.insert(
            due,
            Timer {
                id,
                interval,
                handler,
                arg,
            },
        );
        Ok(id)
    })
}

/// Cancels a timer (`EINVAL` if there is no such timer, including one already cancelled).
///
/// # Safety
/// `timers_` is NULL or a timer set.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_cancel(timers_: *mut c_void, timer_id: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let t = unsafe { timers(timers_) }?;
        let mut s = t.state.try_borrow_mut().map_err(|_| Error::Fault)?;
        let key = s.find(timer_id).ok_or(Error::Inval)?;
        s.by_due.remove(&key);
        Ok(0)
    })
}

/// Changes a timer's interval and re-arms it at now + `interval`.
///
/// # Safety
/// `timers_` is NULL or a timer set.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_set_interval(
    timers_: *mut c_void,
    timer_id: c_int,
    interval: usize,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let t = unsafe { timers(timers_) }?;
        t.state
            .try_borrow_mut()
            .map_err(|_| Error::Fault)?
            .rearm(timer_id, Some(interval))?;
        Ok(0)
    })
}

/// Re-arms a timer at now + its interval.
///
/// # Safety
/// `timers_` is NULL or a timer set.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_reset(timers_: *mut c_void, timer_id: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let t = unsafe { timers(timers_) }?;
        t.state
            .try_borrow_mut()
            .map_err(|_| Error::Fault)?
            .rearm(timer_id, None)?;
        Ok(0)
    })
}

/// Milliseconds until the next timer is due (0 if one is overdue); -1 when there is none (with
/// errno `EINVAL`, which libzmq's own tests expect).
///
/// # Safety
/// `timers_` is NULL or a timer set.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_timeout(timers_: *mut c_void) -> c_long {
    call_or(-1, || {
        // SAFETY: caller's contract.
        let t = unsafe { timers(timers_) }?;
        let s = t.state.try_borrow().map_err(|_| Error::Fault)?;
        let now = s.now_ms();
        match s.by_due.keys().next() {
            Some(&(due, _)) => Ok(due.saturating_sub(now).min(c_long::MAX as u64) as c_long),
            None => Err(Error::Inval),
        }
    })
}

/// Runs the handlers of every timer that is due, in due order, and re-arms each at now + its
/// interval. Handlers may cancel, reset or add timers of this set.
///
/// # Safety
/// `timers_` is NULL or a timer set; the handlers are safe to call.
#[no_mangle]
pub unsafe extern "C" fn zmq_timers_execute(timers_: *mut c_void) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let t = unsafe { timers(timers_) }?;
        let (now, due): (u64, Vec<(u64, u64)>) = {
            let s = t.state.try_borrow().map_err(|_| Error::Fault)?;
            let now = s.now_ms();
            (
                now,
                s.by_due.range(..(now + 1, 0)).map(|(k, _)| *k).collect(),
            )
        };
        t.executing.set(t.executing.get() + 1);
        struct Done<'a>(&'a Cell<u32>);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        let _done = Done(&t.executing);
        for key in due {
            // Skip timers cancelled or re-armed by an earlier handler.
            let Some(timer) = t.state.borrow().by_due.get(&key).copied() else {
                continue;
            };
            // No borrow is held while the handler runs: it may use this timer set.
            // SAFETY: the caller registered handler for arg (zmq_timers_add's contract).
            unsafe { (timer.handler)(timer.id, timer.arg) };
            let mut s = t.state.borrow_mut();
            // Still where it was (not cancelled or re-armed by its own handler): re-arm.
            if let Some(timer) = s.by_due.remove(&key) {
                s.insert(now.saturating_add(timer.interval as u64), timer);
            }
        }
        Ok(0)
    })
}

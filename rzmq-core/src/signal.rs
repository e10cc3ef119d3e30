//! Wake-ups between threads: an eventfd-backed signaler and a command mailbox.
//!
//! A [`Mailbox`] is a lock-free queue plus a signaler that is written only when the reader has
//! declared itself asleep, so a busy reader costs its writers no system call. The signaler's fd is
//! what `ZMQ_FD` exposes: it becomes readable when commands arrive for a reader that was idle
//! (edge-like, as in libzmq; spurious readiness is allowed and callers re-check `ZMQ_EVENTS`).

#[cfg(not(loom))]
use crossbeam_queue::SegQueue;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sync::{fence, AtomicBool, Ordering};

#[cfg(loom)]
pub(crate) use model::{SegQueue, Signaler};

/// An eventfd used to wake a thread or to make a file descriptor readable.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct Signaler {
    fd: RawFd,
}

#[cfg(not(loom))]
impl Signaler {
    /// A new non-blocking eventfd.
    pub(crate) fn new() -> Result<Signaler> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(Signaler { fd })
    }

    /// Makes the fd readable (adds one to the counter).
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        let _ = unsafe { libc::write(self.fd, (&one as *const u64).cast(), 8) };
    }

    /// Resets the counter; returns true when it was non-zero.
    pub(crate) fn clear(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our own non-blocking eventfd.
        let n = unsafe { libc::read(self.fd, (&mut v as *mut u64).cast(), 8) };
        n == 8
    }

    /// Waits until the fd is readable or the timeout passes (None waits forever).
    /// Returns true when readable. EINTR is reported as [`Error::Intr`].
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = poll_ms(timeout);
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(e.into());
        }
        Ok(rc > 0)
    }
}

/// A `poll(2)` timeout for `timeout` (None: -1, forever), in milliseconds rounded up so a wait
/// never ends early, saturating at `i32::MAX`.
pub(crate) fn poll_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => (d.as_millis().min(i32::MAX as u128) as i32)
            .saturating_add(i32::from(d.subsec_nanos() % 1_000_000 != 0)),
    }
}

#[cfg(not(loom))]
impl AsRawFd for Signaler {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

#[cfg(not(loom))]
impl Drop for Signaler {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// A multi-producer command queue for one reader, signalling only a sleeping reader.
pub(crate) struct Mailbox<C> {
    queue: SegQueue<C>,
    /// True when no signal is outstanding: the next sender must signal.
    asleep: AtomicBool,
    signaler: Signaler,
}

impl<C> Mailbox<C> {
    /// A new mailbox.
    pub(crate) fn new() -> Result<Mailbox<C>> {
        Ok(Mailbox {
            queue: SegQueue::new(),
            asleep: AtomicBool::new(true),
            signaler: Signaler::new()?,
        })
    }

    /// Queues a command, waking the reader if it is idle.
    pub(crate) fn send(&self, cmd: C) {
        self.queue.push(cmd);
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) && self.asleep.swap(false, Ordering::SeqCst) {
            self.signaler.signal();
        }
    }

    /// Starts a drain: clears an outstanding signal so that any command sent after this call
    /// signals again. Call before popping with [`Mailbox::try_recv`] until it returns None.
    pub(crate) fn begin_drain(&self) {
        // Exactly one sender signals per idle period (the one whose swap saw `asleep`). Consume
        // that signal before declaring ourselves idle again; if it is still in flight, stay
        // "awake" and let it land (it makes the fd readable, and the next drain consumes it).
        // So the fd is readable only while a signal is really outstanding: no busy loops.
        if !self.asleep.load(Ordering::SeqCst) && self.signaler.clear() {
            self.asleep.store(true, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
    }

    /// Pops one command.
    pub(crate) fn try_recv(&self) -> Option<C> {
        self.queue.pop()
    }

    /// True when commands are queued.
    pub(crate) fn has_pending(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Blocks until a command may be queued or the deadline passes; returns false on timeout.
    /// Call after a drain found the queue empty.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        if self.has_pending() {
            return Ok(true);
        }
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if d <= now {
                    return Ok(false);
                }
                Some(d - now)
            }
        };
        match self.signaler.wait(timeout) {
            Ok(r) => Ok(r),
            Err(Error::Intr) => Err(Error::Intr),
            Err(e) => Err(e),
        }
    }

    /// The fd that becomes readable when commands arrive for an idle reader (`ZMQ_FD`).
    pub(crate) fn fd(&self) -> RawFd {
        self.signaler.as_raw_fd()
    }
}

/// Under loom: the eventfd modelled as a counter under a mutex with a condition variable (a
/// wait for ever that nobody signals is a deadlock loom reports), and the lock-free queue by a
/// lock-free model of it. The [`Mailbox`] code above is the same in both builds.
#[cfg(loom)]
mod model {
    use std::os::fd::{AsRawFd, RawFd};
    use std::time::Duration;

    use crate::error::Result;
    use crate::sync::cell::UnsafeCell;
    use crate::sync::{fence, AtomicBool, AtomicUsize, Mutex, Ordering};

    /// The eventfd's counter.
    #[derive(Debug)]
    pub(crate) struct Signaler {
        count: Mutex<u64>,
        cv: loom::sync::Condvar,
    }

    impl Signaler {
        pub(crate) fn new() -> Result<Signaler> {
            Ok(Signaler {
                count: Mutex::new(0),
                cv: loom::sync::Condvar::new(),
            })
        }

        pub(crate) fn signal(&self) {
            *self.count.lock().unwrap() += 1;
            self.cv.notify_all();
        }

        pub(crate) fn clear(&self) -> bool {
            std::mem::take(&mut *self.count.lock().unwrap()) != 0
        }

        /// A timeout (even a long one) only polls: loom has no time.
        pub(crate) fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
            let mut n = self.count.lock().unwrap();
            if timeout.is_some() {
                return Ok(*n != 0);
            }
            while *n == 0 {
                n = self.cv.wait(n).unwrap();
            }
            Ok(true)
        }
    }

    impl AsRawFd for Signaler {
        fn as_raw_fd(&self) -> RawFd {
            -1
        }
    }

    /// crossbeam's `SegQueue` as loom sees it: a lock-free multi-producer queue of a few slots
    /// (models are small). A push claims a slot with a SeqCst increment of the tail and marks
    /// it written with a release store; a pop reads the tail after a SeqCst fence, as
    /// crossbeam's does, and waits for a claimed slot's write. A lock would order the reader's
    /// `asleep` store before a later push and hide a missing fence in [`super::Mailbox`].
    pub(crate) struct SegQueue<C> {
        slots: Vec<(UnsafeCell<Option<C>>, AtomicBool)>,
        tail: AtomicUsize,
        /// The one reader's position (only the mailbox's reader pops).
        head: AtomicUsize,
    }

    // SAFETY: a slot's value is written by the one pusher that claimed it, then read by the one
    // reader after the release/acquire of its flag.
    unsafe impl<C: Send> Sync for SegQueue<C> {}

    const SLOTS: usize = 8;

    impl<C> SegQueue<C> {
        pub(crate) fn new() -> SegQueue<C> {
            SegQueue {
                slots: (0..SLOTS)
                    .map(|_| (UnsafeCell::new(None), AtomicBool::new(false)))
                    .collect(),
                tail: AtomicUsize::new(0),
                head: AtomicUsize::new(0),
            }
        }

        pub(crate) fn push(&self, c: C) {
            let i = self.tail.fetch_add(1, Ordering::SeqCst);
            assert!(i < SLOTS, "a loom model pushes at most {SLOTS} commands");
            let (cell, ready) = &self.slots[i];
            // SAFETY: slot i was claimed by this push alone.
            cell.with_mut(|p| unsafe { *p = Some(c) });
            ready.store(true, Ordering::Release);
        }

        pub(crate) fn pop(&self) -> Option<C> {
            let h = self.head.load(Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if h == self.tail.load(Ordering::Relaxed) {
                return None;
            }
            let (cell, ready) = &self.slots[h];
            while !ready.load(Ordering::Acquire) {
                loom::thread::yield_now();
            }
            self.head.store(h + 1, Ordering::Relaxed);
            // SAFETY: the slot's write happened before its flag's release, seen above.
            cell.with_mut(|p| unsafe { (*p).take() })
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.head.load(Ordering::SeqCst) == self.tail.load(Ordering::SeqCst)
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[cfg_attr(miri, ignore)] // waits in poll(2), which Miri does not emulate
    #[test]
    fn signal_only_when_asleep() {
        let mb: Mailbox<u32> = Mailbox::new().unwrap();
        mb.begin_drain();
        mb.send(1);
        assert!(mb.signaler.wait(Some(Duration::ZERO)).unwrap());
        mb.send(2); // no second signal needed; reader not drained yet
        mb.begin_drain();
        assert!(!mb.signaler.wait(Some(Duration::ZERO)).unwrap());
        assert_eq!(mb.try_recv(), Some(1));
        assert_eq!(mb.try_recv(), Some(2));
        assert_eq!(mb.try_recv(), None);
        mb.send(3);
        assert!(mb.signaler.wait(Some(Duration::ZERO)).unwrap());
    }

    #[cfg_attr(miri, ignore)] // waits in poll(2), which Miri does not emulate
    #[test]
    fn cross_thread_wakeup() {
        let mb: Arc<Mailbox<u32>> = Arc::new(Mailbox::new().unwrap());
        let m2 = mb.clone();
        let t = std::thread::spawn(move || {
            for i in 0..10_000 {
                m2.send(i);
            }
        });
        let mut got = 0;
        while got < 10_000 {
            mb.begin_drain();
            while let Some(v) = mb.try_recv() {
                assert_eq!(v, got);
                got += 1;
            }
            if got < 10_000 {
                mb.wait_until(Some(Instant::now() + Duration::from_secs(5)))
                    .unwrap();
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn poll_timeouts_round_up_and_saturate() {
        assert_eq!(poll_ms(None), -1);
        assert_eq!(poll_ms(Some(Duration::ZERO)), 0);
        assert_eq!(poll_ms(Some(Duration::from_micros(1))), 1);
        assert_eq!(poll_ms(Some(Duration::from_micros(1500))), 2);
        assert_eq!(poll_ms(Some(Duration::from_millis(7))), 7);
        assert_eq!(poll_ms(Some(Duration::from_secs(u64::MAX))), i32::MAX);
    }
}

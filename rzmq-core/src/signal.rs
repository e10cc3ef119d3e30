//! Wake-ups between threads: an eventfd-backed signaler, the wait set of a thread-safe
//! socket, and a command mailbox.
//!
//! A [`Mailbox`] is a lock-free queue plus a wake-up ([`Wake`]) that is signalled only when the
//! reader has declared itself asleep, so a busy reader costs its writers no system call. For a
//! socket used by one thread at a time the wake-up is an eventfd, what `ZMQ_FD` exposes: it
//! becomes readable when commands arrive for a reader that was idle (edge-like, as in libzmq;
//! spurious readiness is allowed and callers re-check `ZMQ_EVENTS`). A thread-safe socket's
//! is a [`WaitSet`] (libzmq's `mailbox_safe`): a condition variable for the threads blocked in
//! its calls and one eventfd per poller that watches it, every one of them woken by each
//! signal, so no thread can take another's wake-up.

#[cfg(not(loom))]
use crossbeam_queue::SegQueue;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sync::{fence, Arc, AtomicBool, Condvar, Mutex, MutexGuard, Ordering};

#[cfg(loom)]
pub(crate) use model::{SegQueue, Signaler};

/// How a [`Mailbox`] wakes its reader: a level that a signal raises and a drain lowers.
pub(crate) trait Wake {
    /// Raises the level (a sender whose command found the reader idle).
    fn signal(&self);
    /// Lowers the level; true when it was raised.
    fn clear(&self) -> bool;
    /// Waits until the level is raised or the timeout passes (None: for ever); true when raised.
    fn wait(&self, timeout: Option<Duration>) -> Result<bool>;
}

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

impl Wake for Signaler {
    fn signal(&self) {
        Signaler::signal(self);
    }
    fn clear(&self) -> bool {
        Signaler::clear(self)
    }
    fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        Signaler::wait(self, timeout)
    }
}

/// The wake-up of a thread-safe socket's mailbox (libzmq's `mailbox_safe`): each signal raises
/// the level its drains lower, moves the epoch on, wakes every thread blocked in one of the
/// socket's calls (a condition variable; they sleep with the socket's lock released) and every
/// poller that registered a signaler with the socket.
///
/// A blocked caller reads the epoch before its last try under the socket's lock and sleeps
/// until the epoch moves past it: a command that the try did not see signals after that read
/// (the mailbox's protocol: after a drain, any command not popped is covered by a signal still
/// to come, or by a raised level the drain did not lower), so no wake-up is lost, and none can
/// be taken by another thread, since every sleeper compares the epoch with its own value.
/// Sleepers wake together, as libzmq's broadcast; each tries again under the socket's lock.
pub(crate) struct WaitSet {
    state: Mutex<WaitState>,
    cv: Condvar,
}

/// What a [`WaitSet`]'s lock guards.
struct WaitState {
    /// A signal no drain has taken yet (the eventfd counter of a one-owner socket).
    raised: bool,
    /// Signals so far.
    epoch: u64,
    /// Threads asleep on the condition variable: no notify without one (it is a system call).
    sleepers: u32,
    /// The signalers of the pollers watching the socket.
    signalers: Vec<Arc<Signaler>>,
}

impl WaitSet {
    /// A wait set with nobody waiting.
    pub(crate) fn new() -> WaitSet {
        WaitSet {
            state: Mutex::new(WaitState {
                raised: false,
                epoch: 0,
                sleepers: 0,
                signalers: Vec::new(),
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, WaitState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of signals so far: read it under the socket's lock before the try after
    /// which [`WaitSet::wait_past`] sleeps.
    pub(crate) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Sleeps until the epoch moves past `seen` or `deadline` passes; false on timeout.
    pub(crate) fn wait_past(&self, seen: u64, deadline: Option<Instant>) -> bool {
        let mut st = self.lock();
        while st.epoch == seen {
            st.sleepers += 1;
            let woke = match deadline {
                None => self.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if d <= now {
                        st.sleepers -= 1;
                        return false;
                    }
                    self.cv
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
            st = woke;
            st.sleepers -= 1;
        }
        true
    }

    /// A blocking call on a thread-safe socket: `attempt` runs under the socket's lock (taken
    /// by `lock`) until it returns anything but [`Error::Again`]; between tries the caller
    /// sleeps with the lock released until a signal comes after its last try, or `deadline`
    /// passes ([`Error::Again`]). No timed recheck: only a signal, or the deadline, wakes it.
    pub(crate) fn block<L, T>(
        &self,
        mut lock: impl FnMut() -> Result<L>,
        mut attempt: impl FnMut(&mut L) -> Result<T>,
        deadline: Option<Instant>,
    ) -> Result<T> {
        let mut guard = lock()?;
        loop {
            // Read under the socket's lock, before the try: a command the try does not see
            // signals after this (see the type's doc).
            let seen = self.epoch();
            match attempt(&mut guard) {
                Err(Error::Again) => {}
                r => return r,
            }
            drop(guard);
            if !self.wait_past(seen, deadline) {
                return Err(Error::Again);
            }
            guard = lock()?;
        }
    }

    /// Wakes every sleeper and poller without raising the level: the socket's state changed
    /// outside its mailbox (it was closed).
    pub(crate) fn wake_all(&self) {
        let mut st = self.lock();
        self.bump(&mut st);
    }

    fn bump(&self, st: &mut WaitState) {
        st.epoch += 1;
        if st.sleepers > 0 {
            self.cv.notify_all();
        }
        for s in &st.signalers {
            s.signal();
        }
    }

    /// Registers a poller's signaler: every signal from now on wakes it too.
    pub(crate) fn add_signaler(&self, s: Arc<Signaler>) {
        self.lock().signalers.push(s);
    }

    /// Unregisters a poller's signaler (one registration of it).
    pub(crate) fn remove_signaler(&self, s: &Arc<Signaler>) {
        let mut st = self.lock();
        if let Some(i) = st.signalers.iter().position(|x| Arc::ptr_eq(x, s)) {
            st.signalers.swap_remove(i);
        }
    }

    /// Unregisters every poller (the socket closed).
    pub(crate) fn clear_signalers(&self) {
        self.lock().signalers.clear();
    }
}

impl Wake for WaitSet {
    fn signal(&self) {
        let mut st = self.lock();
        st.raised = true;
        self.bump(&mut st);
    }

    fn clear(&self) -> bool {
        std::mem::take(&mut self.lock().raised)
    }

    /// The level as a one-owner socket's blocking call waits for it.
    fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.lock();
        while !st.raised {
            let seen = st.epoch;
            drop(st);
            if !self.wait_past(seen, deadline) {
                return Ok(false);
            }
            st = self.lock();
        }
        Ok(true)
    }
}

/// A multi-producer command queue for one reader, signalling only a sleeping reader.
pub(crate) struct Mailbox<C, W: Wake = Signaler> {
    queue: SegQueue<C>,
    /// True when no signal is outstanding: the next sender must signal.
    asleep: AtomicBool,
    signaler: W,
}

impl<C> Mailbox<C> {
    /// A new mailbox woken through an eventfd.
    pub(crate) fn new() -> Result<Mailbox<C>> {
        Ok(Mailbox::with_wake(Signaler::new()?))
    }

    /// The fd that becomes readable when commands arrive for an idle reader (`ZMQ_FD`).
    pub(crate) fn fd(&self) -> RawFd {
        self.signaler.as_raw_fd()
    }
}

impl<C, W: Wake> Mailbox<C, W> {
    /// A new mailbox woken through `wake`.
    pub(crate) fn with_wake(wake: W) -> Mailbox<C, W> {
        Mailbox {
            queue: SegQueue::new(),
            asleep: AtomicBool::new(true),
            signaler: wake,
        }
    }

    /// Its wake-up.
    pub(crate) fn wake(&self) -> &W {
        &self.signaler
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

//! Readiness of one rzmq socket for tokio: its notification fd (`ZMQ_FD`) registered with the
//! runtime's reactor through [`AsyncFd`], and the discipline that fd needs.
//!
//! `ZMQ_FD` is edge-like: it turns readable when commands reach a socket whose mailbox was
//! drained and idle, and that says only "ask `events()`". A command taken off the mailbox by any
//! call on the socket (a send that succeeds, a receive) leaves no trace on the fd, and a send's
//! would-block does not drain the mailbox at all. So before a task sleeps it must drain with
//! `events()` itself: after that drain the next command signals the fd again (or a signal already
//! in flight lands), which the reactor turns into a fresh readiness event. Tokio's readiness
//! ticks close the remaining window: [`AsyncFdReadyGuard::clear_ready`] forgets only the event
//! this poll saw, never one that arrived while it was checking.
//!
//! One fd serves two directions (receive and send) that two tasks may wait on at once (a Stream
//! and a Sink split apart). Tokio keeps one waker per fd and direction, so both directions
//! register through one fan-out waker that wakes both waiting tasks, and a task whose `events()`
//! shows the other direction ready wakes that direction's task before it clears the readiness.
//!
//! This module owns the fd registration and the waiting; it knows nothing of messages.
//!
//! [`AsyncFdReadyGuard::clear_ready`]: tokio::io::unix::AsyncFdReadyGuard::clear_ready

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use rzmq_core::socket::{POLLIN, POLLOUT};
use rzmq_core::{Error, Result, Socket};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A direction a task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// A message to receive (`POLLIN`).
    Recv = 0,
    /// Room to send (`POLLOUT`).
    Send = 1,
}

impl Dir {
    fn bit(self) -> i16 {
        match self {
            Dir::Recv => POLLIN,
            Dir::Send => POLLOUT,
        }
    }

    fn other(self) -> Dir {
        match self {
            Dir::Recv => Dir::Send,
            Dir::Send => Dir::Recv,
        }
    }
}

/// The socket's notification fd, borrowed: the [`Socket`] owns and closes it, and
/// [`Readiness`] is dropped (deregistered) before the socket.
struct MailboxFd(RawFd);

impl AsRawFd for MailboxFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The tasks waiting, one slot per [`Dir`]; woken together by the reactor.
#[derive(Default)]
struct Waiters {
    slots: Mutex<[Option<Waker>; 2]>,
}

impl Waiters {
    fn slots(&self) -> std::sync::MutexGuard<'_, [Option<Waker>; 2]> {
        // A waker's wake cannot leave the slots half-written: recover from poisoning.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, dir: Dir, w: &Waker) {
        let mut s = self.slots();
        match &s[dir as usize] {
            Some(old) if old.will_wake(w) => {}
            _ => s[dir as usize] = Some(w.clone()),
        }
    }

    fn clear(&self, dir: Dir) {
        self.slots()[dir as usize] = None;
    }

    fn wake_dir(&self, dir: Dir) {
        let w = self.slots()[dir as usize].take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl Wake for Waiters {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let [a, b] = std::mem::take(&mut *self.slots());
        for w in [a, b].into_iter().flatten() {
            w.wake();
        }
    }
}

/// One socket's registration with the tokio reactor.
pub(crate) struct Readiness {
    fd: AsyncFd<MailboxFd>,
    waiters: Arc<Waiters>,
    /// The fan-out waker handed to the reactor (wakes every slot of `waiters`).
    fanout: Waker,
}

impl Readiness {
    /// Registers `sock`'s notification fd with the current runtime (which must have I/O
    /// enabled: panics outside a runtime, as [`AsyncFd::register_with_interest`] does).
    ///
    /// # Safety
    ///
    /// The returned value must be dropped before `sock` (which owns and closes the fd).
    pub(crate) unsafe fn new(sock: &Socket) -> io::Result<Readiness> {
        // SAFETY: the fd is `sock`'s mailbox eventfd, open for the socket's whole life and never
        // replaced; the caller drops this registration before the socket.
        let fd =
            unsafe { AsyncFd::register_with_interest(MailboxFd(sock.fd()), Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
        let waiters = Arc::new(Waiters::default());
        let fanout = Waker::from(waiters.clone());
        Ok(Readiness {
            fd,
            waiters,
            fanout,
        })
    }

    /// Drives `op`, a non-blocking attempt that returns `Ok(None)` when it would block, to
    /// completion: tries it at once, and when it would block, waits for the socket's fd as the
    /// module docs describe. `Pending` leaves `cx`'s waker registered for `dir`.
    pub(crate) fn poll_op<T>(
        &self,
        cx: &mut Context<'_>,
        sock: &mut Socket,
        dir: Dir,
        mut op: impl FnMut(&mut Socket) -> Result<Option<T>>,
    ) -> Poll<Result<T>> {
        if let Some(v) = op(sock)? {
            return Poll::Ready(Ok(v));
        }
        // Registered before the reactor is asked, so an event between the two wakes this task.
        self.waiters.set(dir, cx.waker());
        let mut fan = Context::from_waker(&self.fanout);
        loop {
            let mut guard = match self.fd.poll_read_ready(&mut fan) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => {
                    self.waiters.clear(dir);
                    return Poll::Ready(Err(Error::from(e)));
                }
            };
            // The drain that makes the next command signal the fd again (module docs).
            let ev = match sock.events() {
                Ok(ev) => ev,
                Err(e) => {
                    self.waiters.clear(dir);
                    return Poll::Ready(Err(e));
                }
            };
            if ev & dir.other().bit() != 0 {
                self.waiters.wake_dir(dir.other());
            }
            if ev & dir.bit() != 0 {
                let done = match op(sock) {
                    Ok(None) => None,
                    Ok(Some(v)) => Some(Ok(v)),
                    Err(e) => Some(Err(e)),
                };
                if let Some(r) = done {
                    self.waiters.clear(dir);
                    return Poll::Ready(r);
                }
            }
            // Forgets only the event this guard saw; a later one keeps the fd ready and the
            // loop checks again instead of sleeping.
            guard.clear_ready();
        }
    }
}

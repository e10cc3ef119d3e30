//! Readiness of one rzmq socket for tokio: the socket itself, owned by the [`AsyncFd`] that
//! registers its epoll set (see the epoll module) with the runtime's reactor, the waiter slots,
//! and the discipline the socket's fd needs.
//!
//! `ZMQ_FD` is edge-like: it turns readable when commands reach a socket whose mailbox was
//! drained and idle, and that says only "ask `events()`". A command taken off the mailbox by any
//! call on the socket (a send that succeeds, a receive) leaves no trace on the fd, and a send's
//! would-block does not drain the mailbox at all. So before a task sleeps it must drain with
//! `events()` itself: after that drain the next command signals the fd again (or a signal already
//! in flight lands), which the reactor turns into a fresh readiness event. Tokio's readiness
//! ticks close the remaining window: [`AsyncFdReadyMutGuard::clear_ready`] forgets only the event
//! this poll saw, never one that arrived while it was checking. A receive that would block also
//! leaves the connection's stream in the set while the socket reads it itself (rzmq-core's direct
//! receives): that stream turning readable is a wake-up too.
//!
//! Any call on the socket drains its mailbox, the fd's signal included, so an operation of one
//! direction can take the command the other direction's task sleeps on (one socket split into a
//! Stream task and a Sink task): the reactor may never see that edge. Every operation therefore
//! wakes the other direction's waiting task, if any, to look again.
//!
//! Every poll spends the task's cooperative budget ([`tokio::task::coop`]), the first try that
//! completes at once included: a task that drains a busy socket in a loop yields to the others
//! on its runtime as it would on a tokio socket.
//!
//! This module owns the registration and the waiting; it knows nothing of messages.
//!
//! [`AsyncFdReadyMutGuard::clear_ready`]: tokio::io::unix::AsyncFdReadyMutGuard::clear_ready

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};

use rzmq_core::socket::{WakeFd, POLLIN, POLLOUT};
use rzmq_core::{Error, Result, Socket};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::epoll::EpollSet;
use crate::waiters::{Dir, Waiters};

impl Dir {
    /// The direction's `ZMQ_EVENTS` bit.
    fn bit(self) -> i16 {
        match self {
            Dir::Recv => POLLIN,
            Dir::Send => POLLOUT,
        }
    }
}

/// The socket with the epoll set the reactor watches for it: what the [`AsyncFd`] owns, so the
/// registered fd lives exactly as long as its registration.
#[derive(Debug)]
pub(crate) struct Watched {
    sock: Socket,
    set: EpollSet,
    /// A thread-safe socket's wake-up, which stands in the set for `ZMQ_FD` (such a socket has
    /// none: [`Socket::fd`] is -1), registered with the socket's [`Socket::waiters`].
    wake: Option<WakeFd>,
}

impl AsRawFd for Watched {
    fn as_raw_fd(&self) -> RawFd {
        self.set.as_raw_fd()
    }
}

/// One socket's registration with the tokio reactor, owning the socket.
pub(crate) struct Readiness {
    fd: AsyncFd<Watched>,
    waiters: Arc<Waiters>,
    /// The fan-out waker handed to the reactor (wakes every slot of `waiters`).
    fanout: Waker,
}

impl Readiness {
    /// Takes `sock` and registers it with the current runtime (which must have I/O enabled:
    /// panics outside a runtime, as [`AsyncFd::register_with_interest`] does). On an error the
    /// socket is dropped (closed).
    pub(crate) fn new(sock: Socket) -> Result<Readiness> {
        let wake = match sock.waiters() {
            Some(w) => {
                let wake = WakeFd::new()?;
                w.add(&wake);
                Some(wake)
            }
            None => None,
        };
        let set = EpollSet::new(wake.as_ref().map_or(sock.fd(), WakeFd::fd))?;
        // SAFETY: the registered fd is the epoll set's, an `OwnedFd` inside `Watched`: open
        // until `Watched` is dropped, which the AsyncFd does only after deregistering it (in
        // its drop or `into_inner`), and never replaced (nothing here swaps `Watched::set`).
        let fd = unsafe {
            AsyncFd::register_with_interest(Watched { sock, set, wake }, Interest::READABLE)
        }
        .map_err(|e| Error::from(io::Error::from(e)))?;
        let waiters = Arc::new(Waiters::default());
        let fanout = Waker::from(waiters.clone());
        Ok(Readiness {
            fd,
            waiters,
            fanout,
        })
    }

    /// The socket.
    pub(crate) fn socket(&self) -> &Socket {
        &self.fd.get_ref().sock
    }

    /// The socket, mutably.
    pub(crate) fn socket_mut(&mut self) -> &mut Socket {
        &mut self.fd.get_mut().sock
    }

    /// Deregisters from the reactor and gives the socket back.
    pub(crate) fn into_socket(self) -> Socket {
        let w = self.fd.into_inner();
        if let (Some(wake), Some(waiters)) = (&w.wake, w.sock.waiters()) {
            waiters.remove(wake);
        }
        w.sock
    }

    /// Drives `op`, a non-blocking attempt that returns `Ok(None)` when it would block, to
    /// completion: spends a unit of the task's budget (`Pending` when it is spent, with the
    /// task woken once it has yielded), tries `op` at once, and when it would block, waits for
    /// the socket as the module docs describe. `Pending` leaves `cx`'s waker registered for
    /// `dir`.
    pub(crate) fn poll_op<T>(
        &mut self,
        cx: &mut Context<'_>,
        dir: Dir,
        mut op: impl FnMut(&mut Socket) -> Result<Option<T>>,
    ) -> Poll<Result<T>> {
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let first = op(&mut self.fd.get_mut().sock);
        // The op may have taken commands off the mailbox, and the fd's signal with them, that
        // the other direction's task sleeps on (a split socket): the reactor may never see that
        // edge, so that task is woken here to look again (a spurious wake costs it one try).
        self.waiters.wake_other(dir, cx.waker());
        if let Some(r) = first.transpose() {
            coop.made_progress();
            return Poll::Ready(r);
        }
        // Registered before the reactor is asked, so an event between the two wakes this task.
        self.waiters.set(dir, cx.waker());
        let mut fan = Context::from_waker(&self.fanout);
        loop {
            if dir == Dir::Recv {
                // The stream the socket reads itself (if any) wakes this task too.
                let w = self.fd.get_mut();
                let input = w.sock.input_fd();
                w.set.watch_input(input);
            }
            let mut guard = match self.fd.poll_read_ready_mut(&mut fan) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => {
                    self.waiters.clear(dir);
                    coop.made_progress();
                    return Poll::Ready(Err(Error::from(e)));
                }
            };
            let w = guard.get_inner_mut();
            if let Some(wake) = &w.wake {
                // Taken before the drain, never after: a signal in between stays (WakeFd::clear).
                wake.clear();
            }
            let sock = &mut w.sock;
            // The drain that makes the next command signal the fd again (module docs); it
            // keeps the connection input a receive took (rzmq-core's try_recv_msg).
            let r = match sock.events_keeping_input() {
                Ok(ev) => {
                    if ev & dir.other().bit() != 0 {
                        self.waiters.wake_dir(dir.other());
                    }
                    // Tried whatever the events say: input the socket reads itself is not
                    // in them.
                    op(sock)
                }
                Err(e) => Err(e),
            };
            if let Some(r) = r.transpose() {
                self.waiters.clear(dir);
                coop.made_progress();
                return Poll::Ready(r);
            }
            // Forgets only the event this guard saw; a later one keeps the fd ready and the
            // loop checks again instead of sleeping.
            guard.clear_ready();
        }
    }
}

//! What threads exchange: the commands a socket's mailbox carries, the pipes handed to a
//! socket (`Attach`), the socket's side other threads hold (`SocketShared`), and a connection's
//! ends of a socket pipe (`PeerPipe`). One place, as libzmq keeps its commands in one place.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::pattern::{PipeEntry, PipeId};
use crate::pipe::{Notify, Reader, Writer};
use crate::signal::{Mailbox, Signaler, WaitSet, Wake};

/// Commands delivered to a socket's mailbox.
pub(crate) enum Cmd {
    /// The pipe with this token has messages to read again.
    ActivateRead(u64),
    /// The pipe with this token has room to write again.
    ActivateWrite(u64),
    /// The pipe with this token was closed by its peer.
    PipeClosed(u64),
    /// The peer of the pipe with this token finished its handshake.
    PeerReady(u64),
    /// A new pipe from a connection or an inproc peer.
    Attach(Box<Attach>),
    /// The context is terminating.
    Stop,
}

/// A pipe handed to a socket by a connection or an inproc peer.
pub(crate) struct Attach {
    /// The socket's ends of the pipe and what it knows of the peer.
    pub entry: PipeEntry,
    /// The id reserved for it with [`SocketShared::reserve_pipe_id`].
    pub id: PipeId,
}

/// How a socket's mailbox wakes it: an eventfd (`ZMQ_FD`) for a socket one thread uses at a
/// time, the wait set of blocked callers and pollers for a thread-safe one (which has no
/// `ZMQ_FD`, as in libzmq).
pub(crate) enum SocketWake {
    /// One owner: the eventfd `ZMQ_FD` exposes.
    Fd(Signaler),
    /// Thread-safe: a condition variable and the pollers' signalers.
    Shared(WaitSet),
}

impl SocketWake {
    /// The eventfd of a socket one thread uses at a time.
    pub(crate) fn fd(&self) -> Option<RawFd> {
        match self {
            SocketWake::Fd(s) => Some(s.as_raw_fd()),
            SocketWake::Shared(_) => None,
        }
    }

    /// The wait set of a thread-safe socket.
    pub(crate) fn shared(&self) -> Option<&WaitSet> {
        match self {
            SocketWake::Fd(_) => None,
            SocketWake::Shared(w) => Some(w),
        }
    }
}

impl Wake for SocketWake {
    fn signal(&self) {
        match self {
            SocketWake::Fd(s) => s.signal(),
            SocketWake::Shared(w) => Wake::signal(w),
        }
    }
    fn clear(&self) -> bool {
        match self {
            SocketWake::Fd(s) => s.clear(),
            SocketWake::Shared(w) => Wake::clear(w),
        }
    }
    fn wait(&self, timeout: Option<Duration>) -> crate::error::Result<bool> {
        match self {
            SocketWake::Fd(s) => s.wait(timeout),
            SocketWake::Shared(w) => Wake::wait(w, timeout),
        }
    }
}

/// The part of a socket other threads may hold: its mailbox.
pub(crate) struct SocketShared {
    /// The socket's command mailbox.
    pub mailbox: Mailbox<Cmd, SocketWake>,
    /// The socket's id in its context.
    pub id: u64,
    next_pipe: AtomicU64,
    /// Set when the socket closes: nobody reads the mailbox any more.
    closed: AtomicBool,
}

impl SocketShared {
    /// The shared side of a new socket with this id; `thread_safe` for the types several
    /// threads may use at once (see [`SocketWake`]).
    pub(crate) fn new(id: u64, thread_safe: bool) -> crate::error::Result<SocketShared> {
        let wake = if thread_safe {
            SocketWake::Shared(WaitSet::new())
        } else {
            SocketWake::Fd(Signaler::new()?)
        };
        Ok(SocketShared {
            mailbox: Mailbox::with_wake(wake),
            id,
            next_pipe: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// Hands a new pipe to the socket; if the socket has closed meanwhile, the pipe is dropped
    /// (closed) instead, so the connection behind it ends rather than waiting forever.
    pub(crate) fn attach(&self, a: Attach) {
        self.mailbox.send(Cmd::Attach(Box::new(a)));
        if self.closed.load(Ordering::SeqCst) {
            self.drain_dead();
        }
    }

    /// Marks the socket closed and drops every queued command (pipes in Attach commands
    /// close); pipes attached from now on are closed by [`SocketShared::attach`].
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.drain_dead();
        if let Some(w) = self.mailbox.wake().shared() {
            // Threads blocked in its calls and pollers look once more (and find it closed);
            // then the pollers are let go, as libzmq's close clears its signalers.
            w.wake_all();
            w.clear_signalers();
        }
    }

    /// Drops every queued command of a closed socket (pipes in Attach commands close).
    fn drain_dead(&self) {
        while let Some(cmd) = self.mailbox.try_recv() {
            drop(cmd);
        }
    }

    /// Reserves a pipe id (used by other threads preparing an Attach).
    pub(crate) fn reserve_pipe_id(&self) -> PipeId {
        PipeId(self.next_pipe.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl Notify for SocketShared {
    fn activate_read(&self, token: u64) {
        self.mailbox.send(Cmd::ActivateRead(token));
    }
    fn activate_write(&self, token: u64) {
        self.mailbox.send(Cmd::ActivateWrite(token));
    }
    fn pipe_closed(&self, token: u64) {
        self.mailbox.send(Cmd::PipeClosed(token));
    }
    fn peer_ready(&self, token: u64) {
        self.mailbox.send(Cmd::PeerReady(token));
    }
}

/// The connection's ends of a socket pipe.
pub(crate) struct PeerPipe {
    /// Messages to the socket.
    pub to_socket: Writer,
    /// Messages from the socket.
    pub from_socket: Reader,
}

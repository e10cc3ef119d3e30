//! Thread-safe sockets (libzmq's `ZMQ_THREAD_SAFE` types: the DRAFT types but DGRAM), which
//! several threads use at once, and what pollers register with them.
//!
//! A [`ThreadSafeSocket`] holds its [`Socket`] under a lock taken for each call. A blocking
//! call tries without blocking under the lock and, between tries, sleeps with the lock
//! released on the socket's wait set (libzmq's `mailbox_safe`: a condition variable woken by
//! every command for the socket), so other threads use the socket meanwhile and each blocked
//! thread wakes for the signals that came after its own last try. Such a socket has no
//! `ZMQ_FD` (`EINVAL`, as libzmq 4.3.5); a poller registers a [`WakeFd`] of its own with it
//! instead ([`Waiters::add`]), so no thread can consume another's wake-up.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Socket, DONTWAIT};
use crate::command::SocketShared;
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::signal::{Signaler, WaitSet};
use crate::sockopt::{RecvFlags, SendFlags};

/// A socket several threads may use at once (`Sync`): each call locks it, and blocking sends
/// and receives wait with the lock released. Only the thread-safe types
/// ([`crate::SocketType::is_thread_safe`]) can be wrapped; their messages are single-part, so
/// interleaved calls of several threads never mix the frames of a message.
pub struct ThreadSafeSocket {
    /// `None` once closed.
    sock: Mutex<Option<Socket>>,
    /// The socket's shared side: its wait set, reached without the socket's lock.
    shared: Arc<SocketShared>,
}

impl std::fmt::Debug for ThreadSafeSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadSafeSocket")
            .field("id", &self.shared.id)
            .finish()
    }
}

/// A [`ThreadSafeSocket`] locked for one thread: the socket, for as long as it lives.
pub struct SocketGuard<'a>(MutexGuard<'a, Option<Socket>>);

impl std::ops::Deref for SocketGuard<'_> {
    type Target = Socket;
    fn deref(&self) -> &Socket {
        // Never None: ThreadSafeSocket::lock hands out guards of a live socket only.
        self.0.as_ref().expect("a guard of a live socket")
    }
}

impl std::ops::DerefMut for SocketGuard<'_> {
    fn deref_mut(&mut self) -> &mut Socket {
        self.0.as_mut().expect("a guard of a live socket")
    }
}

/// Which of a socket's timeouts bounds a blocking call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A send: `ZMQ_SNDTIMEO`.
    Send,
    /// A receive: `ZMQ_RCVTIMEO`.
    Recv,
}

impl ThreadSafeSocket {
    /// Wraps a socket of a thread-safe type ([`Error::Inval`] for the others, whose multipart
    /// messages threads would interleave).
    pub fn new(sock: Socket) -> Result<ThreadSafeSocket> {
        if !sock.socket_type().is_thread_safe() {
            return Err(Error::Inval);
        }
        Ok(ThreadSafeSocket {
            shared: sock.shared.clone(),
            sock: Mutex::new(Some(sock)),
        })
    }

    /// Locks the socket for the calling thread ([`Error::NotSock`] once closed).
    pub fn lock(&self) -> Result<SocketGuard<'_>> {
        let g = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            return Err(Error::NotSock);
        }
        Ok(SocketGuard(g))
    }

    fn wait_set(&self) -> &WaitSet {
        self.shared
            .mailbox
            .wake()
            .shared()
            .expect("a thread-safe socket has a wait set")
    }

    /// Runs `op` on the socket as a blocking call in `dir`: once, with `flags`, when they hold
    /// `DONTWAIT`; otherwise with `DONTWAIT` added, again after each signal for the socket
    /// (the lock released in between), until it returns anything but [`Error::Again`] or the
    /// socket's timeout for `dir` passes.
    pub fn blocking<T>(
        &self,
        flags: i32,
        dir: Direction,
        mut op: impl FnMut(&mut Socket, i32) -> Result<T>,
    ) -> Result<T> {
        let mut g = self.lock()?;
        if flags & DONTWAIT != 0 {
            return op(&mut g, flags);
        }
        match op(&mut g, flags | DONTWAIT) {
            Err(Error::Again) => {}
            r => return r,
        }
        let ms = match dir {
            Direction::Send => g.options().sndtimeo,
            Direction::Recv => g.options().rcvtimeo,
        };
        if ms == 0 {
            return Err(Error::Again);
        }
        let deadline = (ms > 0).then(|| Instant::now() + Duration::from_millis(ms as u64));
        let mut guard = Some(g);
        self.wait_set().block(
            || match guard.take() {
                Some(g) => Ok(g),
                None => self.lock(),
            },
            |g| op(g, flags | DONTWAIT),
            deadline,
        )
    }

    /// Sends one frame (blocking unless `flags` has `DONTWAIT`); on failure the frame comes
    /// back with the error.
    pub fn send_msg(&self, msg: Msg, flags: i32) -> std::result::Result<(), (Msg, Error)> {
        let mut m = Some(msg);
        let r = self.blocking(flags, Direction::Send, |s, f| {
            let msg = m.take().ok_or(Error::Fault)?;
            s.send_msg(msg, f).map_err(|(back, e)| {
                m = Some(back);
                e
            })
        });
        match (r, m) {
            (Ok(()), _) => Ok(()),
            (Err(e), Some(back)) => Err((back, e)),
            (Err(e), None) => Err((Msg::new(), e)),
        }
    }

    /// Sends one frame built from `data`.
    pub fn send(&self, data: impl Into<Msg>, flags: impl Into<SendFlags>) -> Result<()> {
        self.send_msg(data.into(), flags.into().bits())
            .map_err(|(_, e)| e)
    }

    /// Receives one frame (blocking unless `flags` has `DONTWAIT`).
    pub fn recv_msg(&self, flags: i32) -> Result<Msg> {
        self.blocking(flags, Direction::Recv, |s, f| s.recv_msg(f))
    }

    /// Receives one frame as bytes.
    pub fn recv_bytes(&self, flags: impl Into<RecvFlags>) -> Result<Vec<u8>> {
        self.recv_msg(flags.into().bits())
            .map(|m| m.data().to_vec())
    }

    /// What pollers register with (see [`Waiters`]); no lock taken.
    pub fn waiters(&self) -> Waiters {
        Waiters(self.shared.clone())
    }

    /// Closes the socket: calls in flight end first, threads blocked in one wake with
    /// [`Error::NotSock`], later calls fail so. Queued messages are still sent for up to
    /// LINGER. Returns false when it was closed already.
    pub fn close(&self) -> bool {
        let sock = self.sock.lock().unwrap_or_else(|e| e.into_inner()).take();
        match sock {
            // Socket::close wakes the waiters (SocketShared::close).
            Some(s) => {
                s.close();
                true
            }
            None => false,
        }
    }
}

/// The wake-up side of a thread-safe socket, which pollers hold (libzmq's `add_signaler` /
/// `remove_signaler`): every command for the socket signals each registered [`WakeFd`].
#[derive(Clone)]
pub struct Waiters(Arc<SocketShared>);

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Waiters").field(&self.0.id).finish()
    }
}

impl Waiters {
    fn wait_set(&self) -> &WaitSet {
        self.0
            .mailbox
            .wake()
            .shared()
            .expect("Waiters exist only for thread-safe sockets")
    }

    /// Registers `w`: from now on every signal for the socket makes it readable. A socket
    /// that closes lets go of every registration.
    pub fn add(&self, w: &WakeFd) {
        self.wait_set().add_signaler(w.0.clone());
    }

    /// Undoes one [`Waiters::add`] of `w`.
    pub fn remove(&self, w: &WakeFd) {
        self.wait_set().remove_signaler(&w.0);
    }

    /// True when both are the same socket's.
    pub fn same_socket(&self, other: &Waiters) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Socket {
    /// The wake-up side of a thread-safe socket, which pollers register with; `None` for the
    /// other types (they have `ZMQ_FD`, [`Socket::fd`]).
    pub fn waiters(&self) -> Option<Waiters> {
        self.shared
            .mailbox
            .wake()
            .shared()
            .map(|_| Waiters(self.shared.clone()))
    }
}

/// A poller's own wake-up (libzmq's poller signaler): an eventfd that becomes readable when a
/// thread-safe socket it is registered with ([`Waiters::add`]) may have changed state, and
/// stays readable until [`WakeFd::clear`].
#[derive(Debug, Clone)]
pub struct WakeFd(crate::sync::Arc<Signaler>);

impl WakeFd {
    /// A new, unsignalled wake-up.
    pub fn new() -> Result<WakeFd> {
        Ok(WakeFd(crate::sync::Arc::new(Signaler::new()?)))
    }

    /// The eventfd to poll (`zmq_poller_fd`).
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Takes the signal; true when there was one. Clear before looking at the sockets, never
    /// after: a signal in between would be lost.
    pub fn clear(&self) -> bool {
        self.0.clear()
    }
}

//! The epoll set an [`crate::AsyncSocket`] gives tokio's reactor in place of the socket's own fd:
//! it holds the socket's notification fd (`ZMQ_FD`) and, while the socket reads its connection
//! itself (rzmq-core's direct receives, [`Socket::input_fd`]), the connection's stream.
//!
//! Why a set of our own: the stream belongs to the connection's I/O thread, which may close it
//! at any moment, and its fd number may then be reused by anything in the process. Registered
//! with tokio's shared reactor, a stale number could later deregister someone else's fd. In an
//! epoll set nothing else uses, the kernel forgets a closed stream by itself, and the worst a
//! stale or reused number can do is one spurious wake-up of this socket's tasks. Both fds are
//! edge-triggered: readiness means "try again", as `ZMQ_FD`'s does.
//!
//! [`Socket::input_fd`]: rzmq_core::Socket::input_fd

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use rzmq_core::socket::InputFd;

/// A private epoll set: the socket's fd, and the connection stream it reads itself, if any.
#[derive(Debug)]
pub(crate) struct EpollSet {
    fd: OwnedFd,
    /// The stream registered now (as [`rzmq_core::Socket::input_fd`] reported it).
    input: Option<InputFd>,
}

/// Adds (`EPOLL_CTL_ADD`) or removes (`EPOLL_CTL_DEL`) `fd` in the set `ep`, edge-triggered.
fn ctl(ep: RawFd, op: libc::c_int, fd: RawFd) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLET) as u32,
        u64: fd as u64,
    };
    // SAFETY: `ev` is a valid epoll_event for the call's length; epoll_ctl reads it only.
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl EpollSet {
    /// A new set holding `socket_fd` (the socket's `ZMQ_FD`).
    pub(crate) fn new(socket_fd: RawFd) -> io::Result<EpollSet> {
        // SAFETY: no pointer arguments; the result is checked.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd this set now owns (closed on drop).
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        ctl(fd.as_raw_fd(), libc::EPOLL_CTL_ADD, socket_fd)?;
        Ok(EpollSet { fd, input: None })
    }

    /// Makes the set watch `input` (the stream the socket reads itself now, or none), adding
    /// and removing the stream only when it changes. A stream that is already readable when
    /// added is reported at once.
    pub(crate) fn watch_input(&mut self, input: Option<InputFd>) {
        if self.input.map(|i| i.id) == input.map(|i| i.id) {
            return;
        }
        if let Some(old) = self.input.take() {
            // ENOENT or EBADF when the I/O thread closed it (the kernel forgot it then), or
            // the reused number's file is not in this set: nothing to undo either way.
            let _ = ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, old.fd);
        }
        if let Some(new) = input {
            // EBADF: closed already (the socket's fd tells what follows); EEXIST cannot be, as
            // the previous stream was removed or is gone.
            if ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, new.fd).is_ok() {
                self.input = Some(new);
            }
        }
    }
}

impl AsRawFd for EpollSet {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

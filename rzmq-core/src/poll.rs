//! `zmq_poll`: waiting on sockets and plain file descriptors together.
//!
//! A socket is ready when its pattern can receive or send (checked through `ZMQ_EVENTS`); while
//! none is ready, the caller sleeps in poll(2) on each socket's `ZMQ_FD`, on the raw fds, and,
//! for thread-safe sockets (which have no `ZMQ_FD`), on a [`WakeFd`] of the poller's own
//! registered with each of them, as libzmq's `zmq_poll` goes through its poller for them: no
//! other thread can take that wake-up.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::socket::{Socket, ThreadSafeSocket, Waiters, WakeFd, POLLIN, POLLOUT};

/// Readiness for reading (`ZMQ_POLLIN`).
pub const ZMQ_POLLIN: i16 = POLLIN;
/// Readiness for writing (`ZMQ_POLLOUT`).
pub const ZMQ_POLLOUT: i16 = POLLOUT;
/// An error condition on a raw fd (`ZMQ_POLLERR`).
pub const ZMQ_POLLERR: i16 = 4;
/// Priority data on a raw fd (`ZMQ_POLLPRI`).
pub const ZMQ_POLLPRI: i16 = 8;

/// How a poller learns that a socket's events may have changed.
#[derive(Debug, Clone)]
pub enum PollWake {
    /// Its `ZMQ_FD` becomes readable.
    Fd(RawFd),
    /// A thread-safe socket: it signals the [`WakeFd`]s registered with it.
    Waiters(Waiters),
}

/// Something poll can wait on: an rzmq socket as seen through `ZMQ_EVENTS`, and `ZMQ_FD` or
/// its waiters.
pub trait Pollable {
    /// The socket's current events (POLLIN/POLLOUT), processing pending commands.
    fn poll_events(&mut self) -> Result<i16>;
    /// How the poller is woken when the events may have changed.
    fn poll_wake(&self) -> Result<PollWake>;
}

impl Pollable for Socket {
    fn poll_events(&mut self) -> Result<i16> {
        self.events()
    }
    fn poll_wake(&self) -> Result<PollWake> {
        Ok(match self.waiters() {
            Some(w) => PollWake::Waiters(w),
            None => PollWake::Fd(self.fd()),
        })
    }
}

/// A thread-safe socket polled from any thread (`let mut r = &*sock;` then
/// `PollItem::socket(&mut r, ZMQ_POLLIN)`): locked for each look at its events.
impl Pollable for &ThreadSafeSocket {
    fn poll_events(&mut self) -> Result<i16> {
        self.lock()?.events()
    }
    fn poll_wake(&self) -> Result<PollWake> {
        Ok(PollWake::Waiters(self.waiters()))
    }
}

/// One entry of a poll set.
pub struct PollItem<'a> {
    /// The socket, or None for a raw fd.
    pub socket: Option<&'a mut dyn Pollable>,
    /// The raw fd (ignored when `socket` is set).
    pub fd: RawFd,
    /// Events asked for.
    pub events: i16,
    /// Events found.
    pub revents: i16,
}

impl<'a> PollItem<'a> {
    /// An item for a socket.
    pub fn socket(s: &'a mut dyn Pollable, events: i16) -> PollItem<'a> {
        PollItem {
            socket: Some(s),
            fd: -1,
            events,
            revents: 0,
        }
    }
    /// An item for a raw file descriptor.
    pub fn fd(fd: RawFd, events: i16) -> PollItem<'static> {
        PollItem {
            socket: None,
            fd,
            events,
            revents: 0,
        }
    }
}

/// Waits until at least one item is ready or `timeout` passes (None: forever; zero: check once).
/// Returns the number of ready items; their `revents` are set.
pub fn poll(items: &mut [PollItem<'_>], timeout: Option<Duration>) -> Result<usize> {
    poll_masked(items, timeout, None)
}

/// [`poll`] with `sigmask` as the thread's signal mask while it sleeps, as ppoll(2)
/// (`zmq_ppoll`): a signal the mask unblocks ends the wait with [`Error::Intr`]. `None` leaves
/// the mask alone.
pub fn poll_masked(
    items: &mut [PollItem<'_>],
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
) -> Result<usize> {
    let mut wakes = Vec::new();
    let mut fds = Vec::with_capacity(items.len());
    for it in items.iter() {
        fds.push(
            match it.socket.as_ref().map(|s| s.poll_wake()).transpose()? {
                Some(PollWake::Waiters(w)) => {
                    if !wakes.iter().any(|x: &Waiters| x.same_socket(&w)) {
                        wakes.push(w);
                    }
                    -1
                }
                Some(PollWake::Fd(fd)) => fd,
                None => it.fd,
            },
        );
    }
    if wakes.is_empty() {
        return poll_inner(items, &fds, timeout, sigmask, None);
    }
    // This call's own wake-up, registered with each thread-safe socket for its length.
    let wake = WakeFd::new()?;
    let reg = Registered {
        wake: &wake,
        sockets: wakes,
    };
    for w in &reg.sockets {
        w.add(&wake);
    }
    poll_inner(items, &fds, timeout, sigmask, Some(&wake))
}

/// [`poll_masked`] for a caller that keeps its own [`WakeFd`] registered with the thread-safe
/// sockets among `items` (`zmq_poller_*`: libzmq's poller registers its signaler when a
/// socket is added). `wake` is needed only when there are such sockets.
pub fn poll_registered(
    items: &mut [PollItem<'_>],
    timeout: Option<Duration>,
    wake: Option<&WakeFd>,
) -> Result<usize> {
    let mut fds = Vec::with_capacity(items.len());
    for it in items.iter() {
        fds.push(
            match it.socket.as_ref().map(|s| s.poll_wake()).transpose()? {
                Some(PollWake::Waiters(_)) => {
                    if wake.is_none() {
                        return Err(Error::Inval);
                    }
                    -1
                }
                Some(PollWake::Fd(fd)) => fd,
                None => it.fd,
            },
        );
    }
    poll_inner(items, &fds, timeout, None, wake)
}

/// A [`WakeFd`] registered with sockets, unregistered on drop.
struct Registered<'a> {
    wake: &'a WakeFd,
    sockets: Vec<Waiters>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        for w in &self.sockets {
            w.remove(self.wake);
        }
    }
}

/// The poll loop: `fds[i]` is item i's fd (-1, which poll(2) skips, for a thread-safe socket,
/// whose wake-ups come through `wake`).
fn poll_inner(
    items: &mut [PollItem<'_>],
    fds: &[RawFd],
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
    wake: Option<&WakeFd>,
) -> Result<usize> {
    let deadline = timeout.map(|t| Instant::now() + t);
    if items.is_empty() {
        if let Some(t) = timeout {
            std::thread::sleep(t);
        } else {
            // libzmq sleeps forever here; never return.
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        return Ok(0);
    }
    let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(items.len() + 1);
    let mut first = true;
    loop {
        pfds.clear();
        // Taken before the sockets are looked at, never after: a signal from then on makes
        // the sleep below end at once.
        if let Some(w) = wake {
            w.clear();
        }
        let mut ready = 0;
        for (it, &fd) in items.iter_mut().zip(fds) {
            it.revents = 0;
            match it.socket.as_mut() {
                Some(s) => {
                    let ev = s.poll_events()?;
                    it.revents = ev & it.events & (POLLIN | POLLOUT);
                    pfds.push(libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
                None => {
                    let mut e = 0;
                    if it.events & POLLIN != 0 {
                        e |= libc::POLLIN;
                    }
                    if it.events & POLLOUT != 0 {
                        e |= libc::POLLOUT;
                    }
                    if it.events & ZMQ_POLLPRI != 0 {
                        e |= libc::POLLPRI;
                    }
                    pfds.push(libc::pollfd {
                        fd: it.fd,
                        events: e,
                        revents: 0,
                    });
                }
            }
            if it.revents != 0 {
                ready += 1;
            }
        }
        if let Some(w) = wake {
            pfds.push(libc::pollfd {
                fd: w.fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // Raw fds are checked with a zero-timeout poll first.
        let wait_ms: i32 = if ready > 0 || (!first && deadline.is_some_and(|d| Instant::now() >= d))
        {
            0
        } else {
            crate::signal::poll_ms(deadline.map(|d| d.saturating_duration_since(Instant::now())))
        };
        let rc = sys_poll(&mut pfds, wait_ms, sigmask);
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::from(e));
        }
        for (it, p) in items.iter_mut().zip(pfds.iter()) {
            if it.socket.is_none() {
                let mut r = 0;
                if p.revents & libc::POLLIN != 0 {
                    r |= POLLIN;
                }
                if p.revents & libc::POLLOUT != 0 {
                    r |= POLLOUT;
                }
                if p.revents & libc::POLLPRI != 0 {
                    r |= ZMQ_POLLPRI;
                }
                if p.revents & !(libc::POLLIN | libc::POLLOUT | libc::POLLPRI) != 0 {
                    r |= ZMQ_POLLERR;
                }
                it.revents = r & (it.events | ZMQ_POLLERR);
                if it.revents != 0 {
                    ready += 1;
                }
            }
        }
        if ready > 0 {
            // Re-count: a socket may have become ready too.
            return Ok(items.iter().filter(|i| i.revents != 0).count());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
        if rc == 0 && wait_ms == 0 && !first {
            return Ok(0);
        }
        first = false;
    }
}

/// poll(2), or ppoll(2) with `sigmask` when one is given.
fn sys_poll(pfds: &mut [libc::pollfd], wait_ms: i32, sigmask: Option<&libc::sigset_t>) -> i32 {
    match sigmask {
        // SAFETY: pfds is a valid array of pollfd of the given length.
        None => unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, wait_ms) },
        Some(mask) => {
            let ts = (wait_ms >= 0).then(|| libc::timespec {
                tv_sec: libc::time_t::from(wait_ms / 1000),
                tv_nsec: libc::c_long::from(wait_ms % 1000) * 1_000_000,
            });
            let tsp = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: pfds as above; tsp is NULL or points to a timespec alive for the call;
            // mask is a valid sigset_t.
            unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, tsp, mask) }
        }
    }
}

//! DRAFT `zmq_poller_*`: a reusable poll set of sockets and raw file descriptors (libzmq's
//! `socket_poller_t`), built with the `draft` feature only.
//!
//! A poller keeps its items (socket handle or fd, user data, events) in registration order and
//! waits with rzmq-core's [`poll`], the machinery of `zmq_poll`: ready sockets are found
//! through `ZMQ_EVENTS`, sleeping happens in poll(2) on each socket's `ZMQ_FD` and on the raw
//! fds. Errors are libzmq's: `EFAULT` for a bad poller (and for a wait that could never end),
//! `ENOTSOCK` for a bad socket, `EBADF` for fd -1, `EINVAL` for a double add, a modify or
//! remove of something not registered and unknown event bits, `EAGAIN` when the time runs out.
//!
//! A thread-safe socket (the DRAFT types but DGRAM) has no `ZMQ_FD`: as libzmq's poller, the
//! first one added gives the poller a signaler of its own (rzmq-core's [`WakeFd`]), registered
//! with every thread-safe socket added, so a command for one of them wakes this poller and no
//! other thread can take that wake-up. `zmq_poller_fd` is that signaler's eventfd (`EINVAL`
//! before a thread-safe socket was added, as libzmq).

use std::ffi::{c_int, c_long, c_short, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::AtomicU32;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rzmq_core::poll::{poll_registered, PollItem, Pollable};
use rzmq_core::socket::{Waiters, WakeFd};
use rzmq_core::Error;

use crate::errno::call;
use crate::handle::{self, POLLER_TAG};
use crate::poll::{ZMQ_POLLERR, ZMQ_POLLIN, ZMQ_POLLOUT, ZMQ_POLLPRI};
use crate::socket::{sock_mut, RawSocket};

/// One event of `zmq_poller_wait`/`zmq_poller_wait_all` (libzmq's `zmq_poller_event_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zmq_poller_event_t {
    /// The socket handle that is ready, or NULL for a raw fd.
    pub socket: *mut c_void,
    /// The raw fd that is ready (-1 for a socket).
    pub fd: c_int,
    /// The user data given when the item was added.
    pub user_data: *mut c_void,
    /// The events found.
    pub events: c_short,
}

/// What an item polls. Handles are kept as addresses: the poller only hands them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A socket handle (`void*` of `zmq_socket`).
    Socket(usize),
    /// A raw file descriptor.
    Fd(RawFd),
}

/// One registration.
#[derive(Debug, Clone, Copy)]
struct Item {
    target: Target,
    user_data: usize,
    events: i16,
}

/// The poll set behind a handle.
#[derive(Default)]
struct PollerState {
    items: Vec<Item>,
    /// The poller's own wake-up (`zmq_poller_fd`), made when the first thread-safe socket is
    /// added.
    signaler: Option<WakeFd>,
    /// The thread-safe sockets it is registered with, by handle address.
    registered: Vec<(usize, Waiters)>,
}

impl Drop for PollerState {
    fn drop(&mut self) {
        if let Some(w) = &self.signaler {
            for (_, ws) in &self.registered {
                ws.remove(w);
            }
        }
    }
}

/// What a poller `void*` points to.
#[repr(C)]
struct PollerHandle {
    tag: AtomicU32,
    state: Mutex<PollerState>,
}

/// The poller behind a handle; `EFAULT` when it is not a live poller.
///
/// # Safety
/// `p` is NULL or readable for 4 bytes (see [`handle::tag_of`]).
unsafe fn poller<'a>(p: *mut c_void) -> Result<MutexGuard<'a, PollerState>, Error> {
    // SAFETY: forwarded contract.
    if unsafe { handle::tag_of(p) } != Some(POLLER_TAG) {
        return Err(Error::Fault);
    }
    // SAFETY: the tag says p is a live PollerHandle allocated by zmq_poller_new; handles are
    // parked, not freed, when destroyed, so the reference stays valid.
    let h = unsafe { &*(p as *const PollerHandle) };
    Ok(h.state.lock().unwrap_or_else(|e| e.into_inner()))
}

/// `EINVAL` for event bits other than POLLIN, POLLOUT, POLLERR and POLLPRI.
fn check_events(events: c_short) -> Result<(), Error> {
    if events & !(ZMQ_POLLIN | ZMQ_POLLOUT | ZMQ_POLLERR | ZMQ_POLLPRI) != 0 {
        return Err(Error::Inval);
    }
    Ok(())
}

/// `ENOTSOCK` unless `s` is a live socket handle; its waiters when it is thread-safe.
///
/// # Safety
/// `s` is NULL or a pointer readable for 4 bytes; the socket is not in use by another call.
unsafe fn check_socket(s: *mut c_void) -> Result<Option<Waiters>, Error> {
    // SAFETY: caller's contract; the borrow ends within this function.
    Ok(unsafe { sock_mut(s) }?.waiters())
}

impl PollerState {
    fn find(&self, t: Target) -> Option<usize> {
        self.items.iter().position(|i| i.target == t)
    }

    fn add(
        &mut self,
        target: Target,
        user_data: *mut c_void,
        events: c_short,
    ) -> Result<(), Error> {
        if self.find(target).is_some() {
            return Err(Error::Inval);
        }
        self.items.push(Item {
            target,
            user_data: user_data as usize,
            events,
        });
        Ok(())
    }

    fn modify(&mut self, target: Target, events: c_short) -> Result<(), Error> {
        let i = self.find(target).ok_or(Error::Inval)?;
        self.items[i].events = events;
        Ok(())
    }

    fn remove(&mut self, target: Target) -> Result<(), Error> {
        let i = self.find(target).ok_or(Error::Inval)?;
        self.items.remove(i);
        Ok(())
    }

    /// Registers the poller's signaler (made on first use) with a thread-safe socket.
    fn register(&mut self, s: usize, ws: Waiters) -> Result<(), Error> {
        if self.signaler.is_none() {
            self.signaler = Some(WakeFd::new()?);
        }
        if let Some(w) = &self.signaler {
            ws.add(w);
        }
        self.registered.push((s, ws));
        Ok(())
    }

    /// Undoes [`PollerState::register`] for a socket.
    fn unregister(&mut self, s: usize) {
        if let Some(i) = self.registered.iter().position(|(a, _)| *a == s) {
            let (_, ws) = self.registered.swap_remove(i);
            if let Some(w) = &self.signaler {
                ws.remove(w);
            }
        }
    }
}

/// Creates an empty poller.
#[no_mangle]
pub extern "C" fn zmq_poller_new() -> *mut c_void {
    let h = Box::new(PollerHandle {
        tag: AtomicU32::new(POLLER_TAG),
        state: Mutex::new(PollerState::default()),
    });
    Box::into_raw(h).cast()
}

/// Destroys the poller at `*poller_p` and sets `*poller_p` to NULL (`EFAULT` when either
/// pointer is bad). The sockets stay open.
///
/// # Safety
/// `poller_p` is NULL or points to a readable and writable `void*` that is NULL or a pointer
/// returned by [`zmq_poller_new`].
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_destroy(poller_p: *mut *mut c_void) -> c_int {
    call(|| {
        if poller_p.is_null() {
            return Err(Error::Fault);
        }
        // SAFETY: non-null and readable (caller's contract).
        let p = unsafe { *poller_p };
        // SAFETY: p is NULL or a pointer readable for 4 bytes (caller's contract).
        if !unsafe { handle::kill(p, POLLER_TAG) } {
            return Err(Error::Fault);
        }
        // SAFETY: p came from Box::into_raw in zmq_poller_new and is now dead (killed here,
        // once): no other call will use it, so it moves to the graveyard (its epoll fd is
        // closed there).
        unsafe { handle::bury(p as *mut PollerHandle) };
        // SAFETY: writable (caller's contract).
        unsafe { *poller_p = std::ptr::null_mut() };
        Ok(0)
    })
}

/// The number of registered sockets and fds.
///
/// # Safety
/// `poller` is NULL or a pointer returned by [`zmq_poller_new`] (or readable for 4 bytes).
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_size(poller: *mut c_void) -> c_int {
    // SAFETY: caller's contract.
    call(|| Ok(unsafe { self::poller(poller) }?.items.len() as c_int))
}

/// Registers a socket for `events` with `user_data` (`EINVAL` when it is already registered).
///
/// # Safety
/// As [`zmq_poller_size`]; `socket` is NULL or a socket handle the calling thread may use.
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_add(
    poller: *mut c_void,
    socket: *mut c_void,
    user_data: *mut c_void,
    events: c_short,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut st = unsafe { self::poller(poller) }?;
        // SAFETY: caller's contract.
        let waiters = unsafe { check_socket(socket) }?;
        check_events(events)?;
        st.add(Target::Socket(socket as usize), user_data, events)?;
        if let Some(ws) = waiters {
            if let Err(e) = st.register(socket as usize, ws) {
                st.items.pop();
                return Err(e);
            }
        }
        Ok(0)
    })
}

/// Changes the events a registered socket is polled for (`EINVAL` when not registered).
///
/// # Safety
/// As [`zmq_poller_add`].
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_modify(
    poller: *mut c_void,
    socket: *mut c_void,
    events: c_short,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut st = unsafe { self::poller(poller) }?;
        // SAFETY: caller's contract.
        unsafe { check_socket(socket) }?;
        check_events(events)?;
        st.modify(Target::Socket(socket as usize), events)?;
        Ok(0)
    })
}

/// Unregisters a socket (`EINVAL` when not registered).
///
/// # Safety
/// As [`zmq_poller_add`].
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_remove(poller: *mut c_void, socket: *mut c_void) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut st = unsafe { self::poller(poller) }?;
        // SAFETY: caller's contract.
        unsafe { check_socket(socket) }?;
        st.remove(Target::Socket(socket as usize))?;
        st.unregister(socket as usize);
        Ok(0)
    })
}

/// Registers a raw fd (`EBADF` for -1, `EINVAL` when already registered).
///
/// # Safety
/// As [`zmq_poller_size`].
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_add_fd(
    poller: *mut c_void,
    fd: c_int,
    user_data: *mut c_void,
    events: c_short,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut st = unsafe { self::poller(poller) }?;
        if fd == -1 {
            return Err(Error::Os(libc::EBADF));
        }
        check_events(events)?;
        st.add(Target::Fd(fd), user_data, events)?;
        Ok(0)
    })
}

/// Changes the events a registered fd is polled for.
///
/// # Safety
/// As [`zmq_poller_size`].
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_modify_fd(
    poller: *mut c_void,
    fd: c_int,
    events: c_short,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut st = unsafe { self::poller(poller) }?;
        if fd == -1 {
            return Err(Error::Os(libc::EBADF));
        }
        check_events(events)?;
        st.modify(Target::Fd(fd), events)?;
        Ok(0)
    })
}

/// Unregisters a raw fd.
///
/// # Safety
/// As [`zmq_poller_size`].
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_remove_fd(poller: *mut c_void, fd: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut st = unsafe { self::poller(poller) }?;
        if fd == -1 {
            return Err(Error::Os(libc::EBADF));
        }
        st.remove(Target::Fd(fd))?;
        Ok(0)
    })
}

/// The descriptor that becomes readable when a thread-safe socket of the poller may be ready;
/// `EINVAL` when no thread-safe socket was ever added (as libzmq).
///
/// # Safety
/// As [`zmq_poller_size`]; `fd` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_fd(poller: *mut c_void, fd: *mut c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let st = unsafe { self::poller(poller) }?;
        let sig = st.signaler.as_ref().ok_or(Error::Inval)?;
        if fd.is_null() {
            return Err(Error::Fault);
        }
        // SAFETY: non-null and writable (caller's contract).
        unsafe { *fd = sig.fd() };
        Ok(0)
    })
}

/// Waits for one event; 0 and `*event` filled, or -1 (`EAGAIN` on timeout) with `*event`
/// cleared.
///
/// # Safety
/// As [`zmq_poller_wait_all`] with one event.
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_wait(
    poller: *mut c_void,
    event: *mut zmq_poller_event_t,
    timeout: c_long,
) -> c_int {
    // SAFETY: forwarded contract.
    let rc = unsafe { zmq_poller_wait_all(poller, event, 1, timeout) };
    if rc < 0 && !event.is_null() {
        // SAFETY: event is writable (caller's contract).
        unsafe { *event = EMPTY_EVENT };
    }
    rc.min(0)
}

const EMPTY_EVENT: zmq_poller_event_t = zmq_poller_event_t {
    socket: std::ptr::null_mut(),
    fd: -1,
    user_data: std::ptr::null_mut(),
    events: 0,
};

/// Waits until at least one item is ready or `timeout` ms pass (-1: forever, 0: check once);
/// fills up to `n_events` events in registration order, clears the rest of the array and
/// returns how many were filled. `EAGAIN` when the time runs out, `EFAULT` for a wait that
/// could never end (nothing to poll and no timeout).
///
/// # Safety
/// As [`zmq_poller_size`]; `events` is NULL or writable for `n_events` events; the registered
/// sockets are live handles the calling thread may use.
#[no_mangle]
pub unsafe extern "C" fn zmq_poller_wait_all(
    poller: *mut c_void,
    events: *mut zmq_poller_event_t,
    n_events: c_int,
    timeout: c_long,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let st = unsafe { self::poller(poller) }?;
        if events.is_null() {
            return Err(Error::Fault);
        }
        if n_events < 0 {
            return Err(Error::Inval);
        }
        // SAFETY: events is writable for n_events entries (caller's contract).
        let out = unsafe { std::slice::from_raw_parts_mut(events, n_events as usize) };
        let items: Vec<Item> = st.items.iter().copied().filter(|i| i.events != 0).collect();
        let wake = st.signaler.clone();
        // The lock is not held while waiting: the poller is one thread's, as in libzmq.
        drop(st);
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        if items.is_empty() {
            let Some(deadline) = deadline else {
                return Err(Error::Fault);
            };
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            return Err(Error::Again);
        }
        wait_items(&items, out, deadline, wake.as_ref())
    })
}

/// The wait loop of [`zmq_poller_wait_all`] over the items that ask for events.
fn wait_items(
    items: &[Item],
    out: &mut [zmq_poller_event_t],
    deadline: Option<Instant>,
    wake: Option<&WakeFd>,
) -> Result<c_int, Error> {
    let mut raws: Vec<RawSocket> = items
        .iter()
        .map(|i| match i.target {
            Target::Socket(s) => RawSocket(s as *mut c_void),
            Target::Fd(_) => RawSocket(std::ptr::null_mut()),
        })
        .collect();
    let mut set: Vec<PollItem<'_>> = items
        .iter()
        .zip(raws.iter_mut())
        .map(|(it, raw)| match it.target {
            Target::Socket(_) => PollItem::socket(raw as &mut dyn Pollable, it.events),
            Target::Fd(fd) => PollItem {
                socket: None,
                fd,
                events: it.events,
                revents: 0,
            },
        })
        .collect();
    let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let n = poll_registered(&mut set, remaining, wake)?;
    let mut found = 0;
    for (it, p) in items.iter().zip(set.iter()) {
        if found == out.len() {
            break;
        }
        if p.revents != 0 {
            out[found] = match it.target {
                Target::Socket(s) => zmq_poller_event_t {
                    socket: s as *mut c_void,
                    fd: -1,
                    user_data: it.user_data as *mut c_void,
                    events: p.revents,
                },
                Target::Fd(fd) => zmq_poller_event_t {
                    socket: std::ptr::null_mut(),
                    fd,
                    user_data: it.user_data as *mut c_void,
                    events: p.revents,
                },
            };
            found += 1;
        }
    }
    if found > 0 {
        out[found..].fill(EMPTY_EVENT);
        return Ok(found as c_int);
    }
    if n > 0 {
        // Ready items but no room for an event (n_events 0): libzmq's wait reports nothing
        // then and runs until its time is out.
        match deadline {
            Some(d) => std::thread::sleep(d.saturating_duration_since(Instant::now())),
            None => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
        }
    }
    Err(Error::Again)
}

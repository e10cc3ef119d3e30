//! `zmq_poll` over `zmq_pollitem_t` (sockets and raw file descriptors).
//!
//! Runs [`rzmq_core::poll::poll`]. A socket may appear in several items, so
//! each item holds only the raw handle and borrows the socket for the length of each readiness
//! check, never two at once.

use std::ffi::{c_int, c_long, c_short, c_void};
use std::time::Duration;

use rzmq_core::poll::{poll_masked, PollItem};
use rzmq_core::Error;

use crate::errno::call;
use crate::socket::{sock_mut, RawSocket};

// The poll bits are rzmq-core's (their one definition; C's `short` is `i16`).
pub use rzmq_core::poll::{ZMQ_POLLERR, ZMQ_POLLIN, ZMQ_POLLOUT, ZMQ_POLLPRI};

/// One entry of a `zmq_poll` set: a socket, or (when `socket` is NULL) a file descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zmq_pollitem_t {
    /// A socket handle, or NULL to poll `fd`.
    pub socket: *mut c_void,
    /// A file descriptor (used when `socket` is NULL).
    pub fd: c_int,
    /// Events asked for (`ZMQ_POLLIN`, `ZMQ_POLLOUT`, `ZMQ_POLLPRI`, `ZMQ_POLLERR`).
    pub events: c_short,
    /// Events found.
    pub revents: c_short,
}

/// Waits until at least one item is ready or `timeout` milliseconds pass (-1: forever, 0: check
/// once); returns the number of ready items, each with its `revents` set.
///
/// # Safety
/// `items` is NULL or points to `nitems` writable `zmq_pollitem_t`s whose socket fields are NULL
/// or socket handles owned by the calling thread.
#[no_mangle]
pub unsafe extern "C" fn zmq_poll(
    items: *mut zmq_pollitem_t,
    nitems: c_int,
    timeout: c_long,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { poll_items(items, nitems, timeout, None) }
}

/// `zmq_poll`, and `zmq_ppoll` (DRAFT) with a signal mask for the sleeps.
///
/// # Safety
/// As [`zmq_poll`].
pub(crate) unsafe fn poll_items(
    items: *mut zmq_pollitem_t,
    nitems: c_int,
    timeout: c_long,
    sigmask: Option<&libc::sigset_t>,
) -> c_int {
    call(|| {
        if nitems < 0 {
            return Err(Error::Inval);
        }
        let timeout = if timeout < 0 {
            None
        } else {
            Some(Duration::from_millis(timeout as u64))
        };
        if nitems == 0 {
            match timeout {
                Some(t) if t.is_zero() => {}
                Some(t) => std::thread::sleep(t),
                None => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
            }
            return Ok(0);
        }
        if items.is_null() {
            return Err(Error::Fault);
        }
        // SAFETY: items points to nitems entries (caller's contract).
        let items = unsafe { std::slice::from_raw_parts_mut(items, nitems as usize) };
        for it in items.iter() {
            if !it.socket.is_null() {
                // SAFETY: caller's contract; only checks the handle (the borrow ends here).
                unsafe { sock_mut(it.socket) }?;
            }
        }
        let mut raws: Vec<RawSocket> = items.iter().map(|it| RawSocket(it.socket)).collect();
        let mut set: Vec<PollItem<'_>> = items
            .iter()
            .zip(raws.iter_mut())
            .map(|(it, raw)| {
                if it.socket.is_null() {
                    PollItem {
                        socket: None,
                        fd: it.fd,
                        events: it.events,
                        revents: 0,
                    }
                } else {
                    PollItem::socket(raw, it.events)
                }
            })
            .collect();
        let n = poll_masked(&mut set, timeout, sigmask)?;
        for (it, p) in items.iter_mut().zip(set.iter()) {
            it.revents = p.revents;
        }
        Ok(n as c_int)
    })
}

//! libzmq 4.3.5's DRAFT functions other than the poller, built with the `draft` feature only:
//! `zmq_ctx_set_ext`/`zmq_ctx_get_ext`, `zmq_msg_init_buffer`, routing ids and groups of
//! messages, `zmq_join`/`zmq_leave`, `zmq_connect_peer`, `zmq_socket_get_peer_state`,
//! `zmq_socket_monitor_versioned`/`zmq_socket_monitor_pipes_stats` and `zmq_ppoll`.
//!
//! Requests libzmq itself refuses are refused the same way (`ENOTSUP`, `EINVAL`; each
//! function's doc says which cases).

use std::ffi::{c_char, c_int, c_long, c_void, CStr};

use rzmq_core::{Error, Msg, SocketType};

use crate::ctx::ctx_ref;
use crate::errno::{call, call_or};
use crate::msg::{msg_mut, msg_ref, msg_write, zmq_msg_t};
use crate::poll::{poll_items, zmq_pollitem_t};
use crate::socket::{c_str, sock_mut};

/// `ZMQ_PAIR`, `ZMQ_PUB` and `ZMQ_PUSH`: the monitor socket types libzmq accepts.
const ZMQ_PAIR: c_int = 0;
const ZMQ_PUB: c_int = 1;
const ZMQ_PUSH: c_int = 8;

/// Sets a context option from a buffer (`optvallen` bytes at `optval`): an `int` for the int
/// options, bytes for `ZMQ_THREAD_NAME_PREFIX`.
///
/// # Safety
/// `ctx` is NULL or a context handle; `optval` is NULL or readable for `optvallen` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_set_ext(
    ctx: *mut c_void,
    option: c_int,
    optval: *const c_void,
    optvallen: usize,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let c = unsafe { ctx_ref(ctx) }?;
        let value: &[u8] = if optvallen == 0 {
            &[]
        } else if optval.is_null() {
            return Err(Error::Inval);
        } else {
            // SAFETY: readable for optvallen bytes (caller's contract).
            unsafe { std::slice::from_raw_parts(optval.cast::<u8>(), optvallen) }
        };
        if option == rzmq_core::options::RDMA_MODE {
            let v: [u8; 4] = value.try_into().map_err(|_| Error::Inval)?;
            // SAFETY: forwarded contract (ctx checked live above).
            return match unsafe { crate::ctx::zmq_ctx_set(ctx, option, c_int::from_ne_bytes(v)) } {
                0 => Ok(0),
                _ => Err(Error::Os(crate::errno::get_errno())),
            };
        }
        c.set_ext(option, value)?;
        Ok(0)
    })
}

/// Reads a context option into `*optvallen` bytes at `optval` (the buffer rules of
/// `CtxOptions::get_ext`: 4 bytes for an int option, the prefix's bytes for
/// `ZMQ_THREAD_NAME_PREFIX`).
///
/// # Safety
/// `ctx` as [`zmq_ctx_set_ext`]; `optvallen` is NULL or valid; `optval` is NULL or writable for
/// `*optvallen` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_ctx_get_ext(
    ctx: *mut c_void,
    option: c_int,
    optval: *mut c_void,
    optvallen: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let c = unsafe { ctx_ref(ctx) }?;
        // SAFETY: caller's contract.
        let buf = unsafe { crate::sockopt::out_buf(optval, optvallen) }?;
        c.get_ext(option, buf)?;
        Ok(0)
    })
}

/// Initialises a message with a copy of `size` bytes at `buf` (NULL allowed when `size` is 0).
///
/// # Safety
/// `msg` is NULL or points to a `zmq_msg_t`; `buf` is readable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_init_buffer(
    msg: *mut zmq_msg_t,
    buf: *const c_void,
    size: usize,
) -> c_int {
    call(|| {
        if msg.is_null() || !msg.is_aligned() || (buf.is_null() && size != 0) {
            return Err(Error::Fault);
        }
        let data: &[u8] = if size == 0 {
            &[]
        } else {
            // SAFETY: readable for size bytes (caller's contract).
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) }
        };
        // SAFETY: msg is non-null and aligned, and points to a zmq_msg_t (caller's contract).
        unsafe { msg_write(msg, Msg::copy_from(data)) };
        Ok(0)
    })
}

/// Sets the routing id a SERVER or PEER socket sends the message to (`EINVAL` for 0).
///
/// # Safety
/// `msg` is NULL or points to a `zmq_msg_t`.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_set_routing_id(msg: *mut zmq_msg_t, routing_id: u32) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        unsafe { msg_mut(msg) }?.set_routing_id(routing_id)?;
        Ok(0)
    })
}

/// The routing id of a message received on a SERVER or PEER socket (0 when none).
///
/// # Safety
/// As [`zmq_msg_set_routing_id`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_routing_id(msg: *mut zmq_msg_t) -> u32 {
    // SAFETY: caller's contract.
    call_or(0, || Ok(unsafe { msg_ref(msg) }?.routing_id()))
}

/// Sets the group a RADIO socket publishes the message to (at most 255 bytes, else `EINVAL`).
///
/// # Safety
/// `msg` as [`zmq_msg_set_routing_id`]; `group` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_set_group(msg: *mut zmq_msg_t, group: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let m = unsafe { msg_mut(msg) }?;
        if group.is_null() {
            return Err(Error::Inval);
        }
        // SAFETY: non-null NUL-terminated string (caller's contract).
        let g = unsafe { CStr::from_ptr(group) };
        m.set_group(g.to_bytes())?;
        Ok(0)
    })
}

/// The group of a message (an empty string when none); NULL with `EFAULT` for a bad message.
///
/// # Safety
/// As [`zmq_msg_set_routing_id`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_group(msg: *mut zmq_msg_t) -> *const c_char {
    call_or(std::ptr::null(), || {
        // SAFETY: caller's contract.
        let m = unsafe { msg_ref(msg) }?;
        // NUL-terminated, owned by the message (or static when it has no group).
        Ok(m.group_with_nul().as_ptr().cast())
    })
}

/// Joins a group (DISH sockets; `ENOTSUP` on others, `EINVAL` for a NULL or too long group).
///
/// # Safety
/// `s` is NULL or a socket handle the calling thread may use; `group` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_join(s: *mut c_void, group: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let (mut sock, g) = unsafe { (sock_mut(s)?, group_arg(group)?) };
        sock.join(g)?;
        Ok(0)
    })
}

/// Leaves a group (DISH sockets; as [`zmq_join`]).
///
/// # Safety
/// As [`zmq_join`].
#[no_mangle]
pub unsafe extern "C" fn zmq_leave(s: *mut c_void, group: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let (mut sock, g) = unsafe { (sock_mut(s)?, group_arg(group)?) };
        sock.leave(g)?;
        Ok(0)
    })
}

/// A group argument: NULL is `EINVAL` (libzmq's check), any bytes otherwise.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for `'a`.
unsafe fn group_arg<'a>(p: *const c_char) -> Result<&'a [u8], Error> {
    if p.is_null() {
        return Err(Error::Inval);
    }
    // SAFETY: non-null NUL-terminated string (caller's contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// Connects a PEER socket and returns the new peer's routing id; 0 on failure (`ENOTSOCK`,
/// `ENOTSUP` for other socket types, the connect's error).
///
/// # Safety
/// As [`zmq_join`], `addr` for `group`.
#[no_mangle]
pub unsafe extern "C" fn zmq_connect_peer(s: *mut c_void, addr: *const c_char) -> u32 {
    call_or(0, || {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        if sock.socket_type() != SocketType::Peer {
            return Err(Error::NotSup);
        }
        // SAFETY: caller's contract.
        sock.connect_peer(unsafe { c_str(addr) }?)
    })
}

/// The state of the peer with this routing id: ROUTER sockets answer `ZMQ_POLLOUT` when the
/// peer takes a message now (0 when its pipe is full, `EHOSTUNREACH` for an unknown id); other
/// types `ENOTSUP`, as libzmq.
///
/// # Safety
/// `s` as [`zmq_join`]; `routing_id` is readable for `routing_id_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_socket_get_peer_state(
    s: *mut c_void,
    routing_id: *const c_void,
    routing_id_size: usize,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        let rid: &[u8] = if routing_id_size == 0 {
            &[]
        } else if routing_id.is_null() {
            return Err(Error::Fault);
        } else {
            // SAFETY: readable for routing_id_size bytes (caller's contract).
            unsafe { std::slice::from_raw_parts(routing_id.cast::<u8>(), routing_id_size) }
        };
        Ok(c_int::from(sock.peer_state(rid)?))
    })
}

/// `zmq_socket_monitor` with an event format version and a monitor socket type: version 1 is
/// `zmq_socket_monitor`'s format, version 2 has 64-bit events, a count of 64-bit values and the
/// local and remote endpoints; the monitor socket is a PAIR, PUB or PUSH (other types
/// `EINVAL`); a NULL `addr` stops monitoring. A version other than 1 and 2 is `EINVAL`, where
/// libzmq 4.3.5 accepts it and then never sends an event.
///
/// # Safety
/// `s` as [`zmq_join`]; `addr` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_socket_monitor_versioned(
    s: *mut c_void,
    addr: *const c_char,
    events: u64,
    event_version: c_int,
    type_: c_int,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        let version = u8::try_from(event_version).map_err(|_| Error::Inval)?;
        let addr = if addr.is_null() {
            None
        } else {
            // SAFETY: caller's contract.
            Some(unsafe { c_str(addr) }?)
        };
        let ty = match type_ {
            ZMQ_PAIR => SocketType::Pair,
            ZMQ_PUB => SocketType::Pub,
            ZMQ_PUSH => SocketType::Push,
            // Refused after the endpoint's checks, as libzmq.
            _ => SocketType::Dealer,
        };
        sock.monitor_versioned(addr, events, version, ty)?;
        Ok(0)
    })
}

/// Publishes a `ZMQ_EVENT_PIPES_STATS` event per pipe on the socket's version 2 monitor
/// (`EINVAL` without one asking for them, `EAGAIN` when the socket has no pipes).
///
/// # Safety
/// `s` as [`zmq_join`].
#[no_mangle]
pub unsafe extern "C" fn zmq_socket_monitor_pipes_stats(s: *mut c_void) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        sock.monitor_pipes_stats()?;
        Ok(0)
    })
}

/// `zmq_poll` with the signal mask `sigmask` in force while it sleeps (NULL: the thread's),
/// as ppoll(2): a signal it unblocks interrupts the wait with `EINTR`.
///
/// # Safety
/// As `zmq_poll`; `sigmask` is NULL or points to a `sigset_t`.
#[no_mangle]
pub unsafe extern "C" fn zmq_ppoll(
    items: *mut zmq_pollitem_t,
    nitems: c_int,
    timeout: c_long,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: sigmask is NULL or a valid sigset_t (caller's contract).
    let mask = unsafe { sigmask.as_ref() };
    // SAFETY: forwarded contract.
    unsafe { poll_items(items, nitems, timeout, mask) }
}

//! Sockets: `zmq_socket`, `zmq_close`, `zmq_bind`, `zmq_connect`, `zmq_unbind`,
//! `zmq_disconnect`, and sending and receiving (`zmq_send`, `zmq_send_const`, `zmq_recv`,
//! `zmq_msg_send`, `zmq_msg_recv`, `zmq_sendmsg`, `zmq_recvmsg`, `zmq_sendiov`, `zmq_recviov`).
//!
//! A socket handle is a tagged heap object holding an rzmq [`Socket`]. NULL, closed or foreign
//! pointers fail with `ENOTSOCK`, as libzmq's `check_tag`. Like libzmq's, a socket is used by
//! one thread at a time; the handle gives that thread a `&mut Socket` for the length of a call.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::AtomicU32;

use rzmq_core::poll::{PollWake, Pollable};
use rzmq_core::socket::{Direction, SocketGuard};
use rzmq_core::{Error, Msg, Socket, SocketType, ThreadSafeSocket, DONTWAIT, SNDMORE};

use crate::ctx::ctx_ref;
use crate::errno::{call, call_or};
use crate::handle::{self, SOCKET_TAG};
use crate::msg::{external, msg_mut, msg_write, zmq_msg_t};

/// What a socket `void*` points to.
#[repr(C)]
pub(crate) struct SocketHandle {
    tag: AtomicU32,
    sock: Inner,
}

/// A handle's socket.
enum Inner {
    /// Used by one thread at a time (the caller's contract), as libzmq's sockets: no lock.
    Plain(UnsafeCell<Option<Socket>>),
    /// A thread-safe socket (the DRAFT types but DGRAM), which several threads may use at
    /// once, as libzmq's sockets that report `ZMQ_THREAD_SAFE`: locked for each call, blocking
    /// calls wait with the lock released (rzmq-core's [`ThreadSafeSocket`]).
    Safe(ThreadSafeSocket),
}

/// A socket borrowed for one call: the socket, locked when it is thread-safe.
pub(crate) enum SockRef<'a> {
    Plain(&'a mut Socket),
    Safe(SocketGuard<'a>),
}

impl std::ops::Deref for SockRef<'_> {
    type Target = Socket;
    fn deref(&self) -> &Socket {
        match self {
            SockRef::Plain(s) => s,
            SockRef::Safe(g) => g,
        }
    }
}

impl std::ops::DerefMut for SockRef<'_> {
    fn deref_mut(&mut self) -> &mut Socket {
        match self {
            SockRef::Plain(s) => s,
            SockRef::Safe(g) => g,
        }
    }
}

/// The handle behind a socket `void*`; `ENOTSOCK` when it is not a live socket.
///
/// # Safety
/// `s` is NULL or a pointer readable for 4 bytes (see [`handle::tag_of`]).
unsafe fn handle<'a>(s: *mut c_void) -> Result<&'a SocketHandle, Error> {
    // SAFETY: forwarded contract.
    if unsafe { handle::tag_of(s) } != Some(SOCKET_TAG) {
        return Err(Error::NotSock);
    }
    // SAFETY: the tag says this is a live SocketHandle allocated by zmq_socket (handles are
    // parked, never freed while the tag may be read).
    Ok(unsafe { &*(s as *const SocketHandle) })
}

/// The socket behind a handle; `ENOTSOCK` when it is not a live socket. A thread-safe socket is
/// locked until the result is dropped.
///
/// # Safety
/// `s` is NULL or a pointer readable for 4 bytes (see [`handle::tag_of`]); unless the socket is
/// thread-safe, no other reference to it is alive for `'a` (one thread uses such a socket at a
/// time, and callers never hold two results of this function for one handle at once).
pub(crate) unsafe fn sock_mut<'a>(s: *mut c_void) -> Result<SockRef<'a>, Error> {
    // SAFETY: forwarded contract.
    match &unsafe { handle(s) }?.sock {
        Inner::Safe(ts) => ts.lock().map(SockRef::Safe),
        // SAFETY: exclusivity is the caller's contract.
        Inner::Plain(c) => unsafe { (*c.get()).as_mut() }
            .map(SockRef::Plain)
            .ok_or(Error::NotSock),
    }
}

/// A socket handle polled through a fresh borrow on every call.
pub(crate) struct RawSocket(pub(crate) *mut c_void);

impl Pollable for RawSocket {
    fn poll_events(&mut self) -> rzmq_core::Result<i16> {
        // SAFETY: the handle was a live socket when zmq_poll started, the calling thread owns it
        // for the call, and this borrow ends before any other item's borrow begins.
        unsafe { sock_mut(self.0) }?.events()
    }

    fn poll_wake(&self) -> rzmq_core::Result<PollWake> {
        // SAFETY: as in poll_events.
        match &unsafe { handle(self.0) }?.sock {
            // No lock: the wait set is shared apart from the socket.
            Inner::Safe(ts) => Ok(PollWake::Waiters(ts.waiters())),
            // SAFETY: as in poll_events.
            Inner::Plain(_) => unsafe { sock_mut(self.0) }?.poll_wake(),
        }
    }
}

/// Runs `op` on the socket: once, with the caller's flags, for a socket that is not
/// thread-safe (whose blocking calls block inside rzmq-core); a thread-safe socket's blocking
/// call waits between tries with its lock released, until a signal for the socket comes or
/// its `dir` timeout (RCVTIMEO or SNDTIMEO) passes ([`ThreadSafeSocket::blocking`]).
///
/// # Safety
/// As [`sock_mut`].
unsafe fn with_socket<T>(
    s: *mut c_void,
    flags: c_int,
    dir: Direction,
    op: impl FnMut(&mut Socket, i32) -> Result<T, Error>,
) -> Result<T, Error> {
    // SAFETY: caller's contract.
    match &unsafe { handle(s) }?.sock {
        Inner::Safe(ts) => ts.blocking(core_flags(flags), dir, op),
        Inner::Plain(_) => {
            let mut op = op;
            // SAFETY: caller's contract.
            let mut sock = unsafe { sock_mut(s) }?;
            op(&mut sock, core_flags(flags))
        }
    }
}

/// A C string argument as UTF-8; NULL (and invalid UTF-8) is `EINVAL`, as libzmq's endpoint
/// functions.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for `'a`.
pub(crate) unsafe fn c_str<'a>(p: *const c_char) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::Inval);
    }
    // SAFETY: non-null NUL-terminated string (caller's contract).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::Inval)
}

/// The first DRAFT socket type number (`ZMQ_SERVER`); 12 to 20 are the DRAFT types, which only
/// a `draft` build creates. (libzmq's stable build creates them but cannot handshake them over
/// ZMTP: it asserts on their type name; rzmq's default build refuses them with `EINVAL`.)
const FIRST_DRAFT_SOCKET_TYPE: c_int = 12;

/// Creates a socket of `type_` in context `ctx` (`EFAULT` for a bad context, `EINVAL` for an
/// unknown type, `ETERM` when the context is terminating, `EMFILE` past `ZMQ_MAX_SOCKETS`).
///
/// # Safety
/// `ctx` is NULL or a pointer returned by `zmq_ctx_new`.
#[no_mangle]
pub unsafe extern "C" fn zmq_socket(ctx: *mut c_void, type_: c_int) -> *mut c_void {
    call_or(std::ptr::null_mut(), || {
        // SAFETY: caller's contract.
        let c = unsafe { ctx_ref(ctx) }?;
        if !cfg!(feature = "draft") && type_ >= FIRST_DRAFT_SOCKET_TYPE {
            return Err(Error::Inval);
        }
        let ty = SocketType::from_raw(type_)?;
        let sock = c.socket(ty)?;
        let sock = if ty.is_thread_safe() {
            Inner::Safe(ThreadSafeSocket::new(sock)?)
        } else {
            Inner::Plain(UnsafeCell::new(Some(sock)))
        };
        let h = Box::new(SocketHandle {
            tag: AtomicU32::new(SOCKET_TAG),
            sock,
        });
        Ok(Box::into_raw(h).cast())
    })
}

/// Closes a socket. Pending outgoing messages are still sent for up to `ZMQ_LINGER`.
///
/// # Safety
/// `s` is NULL or a pointer returned by [`zmq_socket`]; no other thread is using the socket.
#[no_mangle]
pub unsafe extern "C" fn zmq_close(s: *mut c_void) -> c_int {
    call(|| {
        // SAFETY: caller's contract; kill succeeds for exactly one caller.
        if !unsafe { handle::kill(s, SOCKET_TAG) } {
            return Err(Error::NotSock);
        }
        // SAFETY: s is a SocketHandle we allocated, now dead, so no other call will reach its
        // socket; we take the socket out and then park the handle (through shared access: the
        // application's pointer stays valid for reading the dead tag, see handle::bury).
        let h = unsafe { &*(s as *const SocketHandle) };
        match &h.sock {
            // A call in flight ends first; threads blocked in one wake and find it closed.
            Inner::Safe(ts) => {
                ts.close();
            }
            Inner::Plain(c) => {
                // SAFETY: as above, the socket is ours now: no other call reaches it.
                if let Some(sock) = unsafe { (*c.get()).take() } {
                    sock.close();
                }
            }
        }
        // SAFETY: allocated by zmq_socket with Box::into_raw, killed above (once).
        unsafe { handle::bury(s as *mut SocketHandle) };
        Ok(0)
    })
}

/// Binds to an endpoint (`tcp://`, `ipc://`, `inproc://`).
///
/// # Safety
/// `s` as [`zmq_close`]; `addr` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_bind(s: *mut c_void, addr: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let (mut sock, addr) = unsafe { (sock_mut(s)?, c_str(addr)?) };
        sock.bind(addr)?;
        Ok(0)
    })
}

/// Connects to an endpoint (the connection is made in the background).
///
/// # Safety
/// As [`zmq_bind`].
#[no_mangle]
pub unsafe extern "C" fn zmq_connect(s: *mut c_void, addr: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let (mut sock, addr) = unsafe { (sock_mut(s)?, c_str(addr)?) };
        sock.connect(addr)?;
        Ok(0)
    })
}

/// Stops listening on a bound endpoint (`ENOENT` if not bound).
///
/// # Safety
/// As [`zmq_bind`].
#[no_mangle]
pub unsafe extern "C" fn zmq_unbind(s: *mut c_void, addr: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let (mut sock, addr) = unsafe { (sock_mut(s)?, c_str(addr)?) };
        sock.unbind(addr)?;
        Ok(0)
    })
}

/// Disconnects from a connected endpoint (`ENOENT` if not connected).
///
/// # Safety
/// As [`zmq_bind`].
#[no_mangle]
pub unsafe extern "C" fn zmq_disconnect(s: *mut c_void, addr: *const c_char) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let (mut sock, addr) = unsafe { (sock_mut(s)?, c_str(addr)?) };
        sock.disconnect(addr)?;
        Ok(0)
    })
}

/// A size as libzmq's send/recv return it: truncated to `INT_MAX`.
fn clamp_size(n: usize) -> c_int {
    n.min(c_int::MAX as usize) as c_int
}

/// The flags rzmq-core understands.
fn core_flags(flags: c_int) -> i32 {
    flags & (DONTWAIT | SNDMORE)
}

/// Sends `m`; the size on success, the message back on failure.
fn send(sock: &mut Socket, m: Msg, flags: c_int) -> Result<c_int, (Msg, Error)> {
    let n = clamp_size(m.len());
    sock.send_msg(m, core_flags(flags))?;
    Ok(n)
}

/// Sends the message in `m` (taken on success, left there on failure) through
/// [`with_socket`]; returns its size.
///
/// # Safety
/// As [`sock_mut`].
unsafe fn send_retrying(s: *mut c_void, m: &mut Option<Msg>, flags: c_int) -> Result<c_int, Error> {
    let n = clamp_size(m.as_ref().map_or(0, Msg::len));
    // SAFETY: forwarded contract.
    unsafe {
        with_socket(s, flags, Direction::Send, |sock, f| {
            let msg = m.take().ok_or(Error::Fault)?;
            sock.send_msg(msg, f).map_err(|(back, e)| {
                *m = Some(back);
                e
            })
        })
    }?;
    Ok(n)
}

/// Sends a frame copied from `buf`; returns its size.
///
/// # Safety
/// `s` as [`zmq_close`]; `buf` is valid for `len` bytes (NULL allowed when `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn zmq_send(
    s: *mut c_void,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> c_int {
    call(|| {
        let data: &[u8] = if len == 0 {
            &[]
        } else if buf.is_null() {
            // SAFETY: caller's contract (ENOTSOCK comes first, as libzmq).
            unsafe { sock_mut(s) }?;
            return Err(Error::Fault);
        } else {
            // SAFETY: buf is valid for len bytes (caller's contract).
            unsafe { std::slice::from_raw_parts(buf.cast(), len) }
        };
        let mut m = Some(Msg::copy_from(data));
        // SAFETY: caller's contract.
        unsafe { send_retrying(s, &mut m, flags) }
    })
}

/// Sends a frame over `buf` without copying it; the buffer must stay valid and unchanged for
/// as long as the library may use it (in practice: forever, as libzmq requires).
///
/// # Safety
/// As [`zmq_send`], and `buf` outlives the message.
#[no_mangle]
pub unsafe extern "C" fn zmq_send_const(
    s: *mut c_void,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        unsafe { sock_mut(s) }?;
        if buf.is_null() && len != 0 {
            return Err(Error::Fault);
        }
        // SAFETY: caller's contract: buf is valid for len bytes for the message's life.
        let mut m = Some(unsafe { external(buf as *mut c_void, len, None, std::ptr::null_mut()) });
        // SAFETY: caller's contract.
        unsafe { send_retrying(s, &mut m, flags) }
    })
}

/// Receives a frame into `buf`; a longer frame is truncated to `len` bytes and its full size is
/// returned.
///
/// # Safety
/// `s` as [`zmq_close`]; `buf` is valid for writes of `len` bytes (NULL allowed when `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn zmq_recv(
    s: *mut c_void,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        unsafe { sock_mut(s) }?;
        if buf.is_null() && len != 0 {
            return Err(Error::Fault);
        }
        // SAFETY: caller's contract.
        let m = unsafe { with_socket(s, flags, Direction::Recv, |sock, f| sock.recv_msg(f)) }?;
        let data = m.data();
        let n = data.len().min(len);
        if n > 0 {
            // SAFETY: buf is valid for len >= n bytes and cannot overlap the message's storage.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), n) };
        }
        Ok(clamp_size(data.len()))
    })
}

/// Sends a message; on success `msg` is left empty (initialised), on failure unchanged.
///
/// # Safety
/// `msg` is NULL or points to a `zmq_msg_t`; `s` as [`zmq_close`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_send(msg: *mut zmq_msg_t, s: *mut c_void, flags: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        unsafe { sock_mut(s) }?;
        // SAFETY: caller's contract.
        let slot = unsafe { msg_mut(msg) }?;
        // The caller's message is empty from here on (as after a successful send), and gets
        // the frame back if the send fails; it stays live throughout.
        let mut m = Some(std::mem::take(slot));
        // SAFETY: caller's contract.
        let r = unsafe { send_retrying(s, &mut m, flags) };
        if let Some(back) = m {
            *slot = back;
        }
        r
    })
}

/// Receives a message into `msg` (its previous content is released); returns its size.
///
/// # Safety
/// As [`zmq_msg_send`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_recv(msg: *mut zmq_msg_t, s: *mut c_void, flags: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        unsafe { sock_mut(s) }?;
        // SAFETY: caller's contract.
        let slot = unsafe { msg_mut(msg) }?;
        // As libzmq: the previous content is released first (its storage can serve the frame
        // received now), and a receive that fails leaves the message empty. The content is
        // dropped where it lies; until the slot is written again, `refill` stands ready to
        // leave it empty should the receive fail (or unwind).
        let refill = Refill(msg);
        if !slot.holds_nothing() {
            // SAFETY: msg_mut checked the slot holds a live Msg; it is dropped once, here, and
            // rewritten below (the frame) or by `refill` (empty) before anything reads it.
            unsafe { std::ptr::drop_in_place(slot as *mut Msg) };
        }
        // SAFETY: caller's contract.
        let m = unsafe { with_socket(s, flags, Direction::Recv, |sock, f| sock.recv_msg(f)) }?;
        std::mem::forget(refill);
        let n = clamp_size(m.len());
        // SAFETY: msg_mut checked msg live (aligned, writable); its old content was released
        // above (an inline frame owns nothing), so overwriting it loses nothing.
        unsafe { msg_write(msg, m) };
        Ok(n)
    })
}

/// Leaves a `zmq_msg_t` empty when dropped: the failure (and unwind) path of [`zmq_msg_recv`],
/// whose slot content has been released in place.
struct Refill(*mut zmq_msg_t);

impl Drop for Refill {
    fn drop(&mut self) {
        // SAFETY: built by zmq_msg_recv over a slot msg_mut checked live (aligned, writable)
        // whose content was released; writing an empty Msg makes it valid again.
        unsafe { msg_write(self.0, Msg::new()) };
    }
}

/// Deprecated alias of [`zmq_msg_send`] with the arguments swapped.
///
/// # Safety
/// As [`zmq_msg_send`].
#[no_mangle]
pub unsafe extern "C" fn zmq_sendmsg(s: *mut c_void, msg: *mut zmq_msg_t, flags: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { zmq_msg_send(msg, s, flags) }
}

/// Deprecated alias of [`zmq_msg_recv`] with the arguments swapped.
///
/// # Safety
/// As [`zmq_msg_send`].
#[no_mangle]
pub unsafe extern "C" fn zmq_recvmsg(s: *mut c_void, msg: *mut zmq_msg_t, flags: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { zmq_msg_recv(msg, s, flags) }
}

/// Sends `count` buffers as frames (copied). As libzmq: each frame is sent with the caller's
/// flags except the last, whose `ZMQ_SNDMORE` is cleared, so pass `ZMQ_SNDMORE` to send them as
/// one multipart message. Returns the last frame's size.
///
/// # Safety
/// `s` as [`zmq_close`]; `iov` is NULL or points to `count` iovecs whose buffers are readable.
#[no_mangle]
pub unsafe extern "C" fn zmq_sendiov(
    s: *mut c_void,
    iov: *mut libc::iovec,
    count: usize,
    flags: c_int,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        if count == 0 || iov.is_null() {
            return Err(Error::Inval);
        }
        // SAFETY: iov points to count iovecs (caller's contract).
        let parts = unsafe { std::slice::from_raw_parts(iov, count) };
        let mut rc = 0;
        for (i, v) in parts.iter().enumerate() {
            let data: &[u8] = if v.iov_len == 0 {
                &[]
            } else if v.iov_base.is_null() {
                return Err(Error::Fault);
            } else {
                // SAFETY: each iovec describes a readable buffer (caller's contract).
                unsafe { std::slice::from_raw_parts(v.iov_base.cast(), v.iov_len) }
            };
            let f = if i + 1 == count {
                flags & !SNDMORE
            } else {
                flags
            };
            rc = send(&mut sock, Msg::copy_from(data), f).map_err(|(_, e)| e)?;
        }
        Ok(rc)
    })
}

/// Receives up to `*count` frames of one message into freshly `malloc`ed buffers (the caller
/// frees them with `free`), sets `*count` to the number read and returns it.
///
/// # Safety
/// `s` as [`zmq_close`]; `count` is NULL or valid; `iov` is NULL or points to `*count` iovecs.
#[no_mangle]
pub unsafe extern "C" fn zmq_recviov(
    s: *mut c_void,
    iov: *mut libc::iovec,
    count: *mut usize,
    flags: c_int,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        // SAFETY: count is NULL or valid (caller's contract).
        if count.is_null() || unsafe { *count } == 0 || iov.is_null() {
            return Err(Error::Inval);
        }
        // SAFETY: as above.
        let max = unsafe { *count };
        // SAFETY: as above.
        unsafe { *count = 0 };
        // SAFETY: iov points to max iovecs (caller's contract).
        let out = unsafe { std::slice::from_raw_parts_mut(iov, max) };
        let mut nread = 0;
        for slot in out.iter_mut() {
            let m = sock.recv_msg(core_flags(flags))?;
            let len = m.len();
            // SAFETY: malloc of at least one byte, so a successful zero-length frame gets a
            // freeable non-NULL pointer too.
            let p = unsafe { libc::malloc(len.max(1)) };
            if p.is_null() {
                return Err(Error::NoMem);
            }
            // SAFETY: p holds len bytes; the frame's bytes do not overlap it.
            unsafe { std::ptr::copy_nonoverlapping(m.data().as_ptr(), p.cast::<u8>(), len) };
            slot.iov_base = p;
            slot.iov_len = len;
            // SAFETY: count is valid (checked above).
            unsafe { *count += 1 };
            nread += 1;
            if !m.more() {
                break;
            }
        }
        Ok(nread)
    })
}

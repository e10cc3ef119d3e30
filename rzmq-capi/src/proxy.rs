//! `zmq_proxy`, `zmq_proxy_steerable` and the deprecated `zmq_device`.
//!
//! Runs [`rzmq_core::proxy::proxy`]. libzmq also accepts the same socket as
//! frontend and backend (a socket that answers itself, as in its `test_proxy_single_socket`);
//! two `&mut` to one socket cannot exist in Rust, so that case runs a single-socket loop here.

use std::ffi::{c_int, c_void};

use rzmq_core::msg::Msg;
use rzmq_core::poll::{poll, PollItem, ZMQ_POLLIN};
use rzmq_core::proxy::proxy;
use rzmq_core::{Error, Socket, SNDMORE};

use crate::errno::call;
use crate::socket::{sock_mut, SockRef};

/// `ZMQ_STREAMER` (deprecated device type).
pub const ZMQ_STREAMER: c_int = 1;
/// `ZMQ_FORWARDER` (deprecated device type).
pub const ZMQ_FORWARDER: c_int = 2;
/// `ZMQ_QUEUE` (deprecated device type).
pub const ZMQ_QUEUE: c_int = 3;

/// Borrows an optional socket for the proxy's whole run (a thread-safe one stays locked: no
/// other thread may use a proxy's sockets meanwhile); NULL is None, a bad handle `ENOTSOCK`.
///
/// # Safety
/// As [`sock_mut`].
unsafe fn opt_sock<'a>(s: *mut c_void) -> Result<Option<SockRef<'a>>, Error> {
    if s.is_null() {
        Ok(None)
    } else {
        // SAFETY: forwarded contract.
        unsafe { sock_mut(s) }.map(Some)
    }
}

/// Forwards one whole message from `sock` back to itself, copying each frame to `capture`.
fn forward_self(sock: &mut Socket, capture: &mut Option<&mut Socket>) -> Result<(), Error> {
    loop {
        let m = sock.recv_msg(0)?;
        let more = m.more();
        let flags = if more { SNDMORE } else { 0 };
        if let Some(c) = capture.as_mut() {
            let mut copy: Msg = m.clone();
            copy.set_more(false);
            c.send_msg(copy, flags).map_err(|(_, e)| e)?;
        }
        sock.send_msg(m, flags).map_err(|(_, e)| e)?;
        if !more {
            return Ok(());
        }
    }
}

/// The proxy loop for frontend == backend, with libzmq's control commands.
fn proxy_single(
    sock: &mut Socket,
    mut capture: Option<&mut Socket>,
    mut control: Option<&mut Socket>,
) -> Result<(), Error> {
    let mut paused = false;
    loop {
        let (sin, cin) = {
            let mut items: Vec<PollItem<'_>> = vec![PollItem::socket(&mut *sock, ZMQ_POLLIN)];
            if let Some(c) = control.as_deref_mut() {
                items.push(PollItem::socket(c, ZMQ_POLLIN));
            }
            poll(&mut items, None)?;
            (
                items[0].revents & ZMQ_POLLIN != 0,
                items.len() > 1 && items[1].revents & ZMQ_POLLIN != 0,
            )
        };
        if cin {
            let c = control.as_deref_mut().ok_or(Error::Inval)?;
            let cmd = c.recv_msg(0)?;
            match cmd.data() {
                b"PAUSE" => paused = true,
                b"RESUME" => paused = false,
                b"TERMINATE" => return Ok(()),
                b"STATISTICS" => {
                    // Counters are not kept for the single-socket form; report zeros.
                    for i in 0..8 {
                        let flags = if i < 7 { SNDMORE } else { 0 };
                        c.send_msg(Msg::copy_from(&0u64.to_ne_bytes()), flags)
                            .map_err(|(_, e)| e)?;
                    }
                }
                _ => return Err(Error::Inval),
            }
        }
        if paused {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        if sin {
            forward_self(sock, &mut capture)?;
        }
    }
}

/// Runs the proxy on handles (shared by the three entry points).
///
/// # Safety
/// Each pointer is NULL or a socket handle owned by the calling thread.
unsafe fn run(
    frontend: *mut c_void,
    backend: *mut c_void,
    capture: *mut c_void,
    control: *mut c_void,
) -> Result<c_int, Error> {
    if frontend.is_null() || backend.is_null() {
        return Err(Error::Fault);
    }
    let others = [capture, control];
    if others
        .iter()
        .any(|p| !p.is_null() && (*p == frontend || *p == backend))
        || (!capture.is_null() && capture == control)
    {
        return Err(Error::Inval);
    }
    // SAFETY: the four handles are pairwise distinct (checked above, except frontend/backend,
    // handled separately), so the &mut borrows never alias; caller's contract for the rest.
    unsafe {
        let mut f = sock_mut(frontend)?;
        let mut cap = opt_sock(capture)?;
        let mut ctl = opt_sock(control)?;
        if frontend == backend {
            proxy_single(&mut f, cap.as_deref_mut(), ctl.as_deref_mut())?;
        } else {
            let mut b = sock_mut(backend)?;
            proxy(&mut f, &mut b, cap.as_deref_mut(), ctl.as_deref_mut())?;
        }
    }
    Ok(0)
}

/// Forwards messages between `frontend` and `backend` (copying them to `capture` if not NULL)
/// until the context is terminated; returns -1 with `ETERM` then, as libzmq.
///
/// # Safety
/// Each pointer is NULL (capture only) or a socket handle owned by the calling thread.
#[no_mangle]
pub unsafe extern "C" fn zmq_proxy(
    frontend: *mut c_void,
    backend: *mut c_void,
    capture: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { run(frontend, backend, capture, std::ptr::null_mut()) })
}

/// As [`zmq_proxy`], steered by messages on `control`: "PAUSE", "RESUME", "TERMINATE" (returns 0)
/// and "STATISTICS" (replies with eight 64-bit counters).
///
/// # Safety
/// As [`zmq_proxy`]; `control` is NULL or a socket handle.
#[no_mangle]
pub unsafe extern "C" fn zmq_proxy_steerable(
    frontend: *mut c_void,
    backend: *mut c_void,
    capture: *mut c_void,
    control: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { run(frontend, backend, capture, control) })
}

/// Deprecated: [`zmq_proxy`] without capture; the device type is ignored, as in libzmq.
///
/// # Safety
/// As [`zmq_proxy`].
#[no_mangle]
pub unsafe extern "C" fn zmq_device(
    _type: c_int,
    frontend: *mut c_void,
    backend: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe {
        run(
            frontend,
            backend,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    })
}

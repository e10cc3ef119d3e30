//! `zmq_socket_monitor`: a socket's events published on an inproc PAIR socket.
//!
//! Each event is a two-frame message, as libzmq 4.3's version 1 format: 6 bytes (a `uint16_t`
//! event number and a `uint32_t` value, host byte order), then the endpoint as text.

use std::ffi::{c_char, c_int, c_void};

use rzmq_core::Error;

use crate::errno::call;
use crate::socket::{c_str, sock_mut};

/// Starts publishing the events in the `events` mask on a PAIR socket bound at `addr` (which
/// must be `inproc://`, else `EPROTONOSUPPORT`); a NULL `addr` stops monitoring. Version 1
/// events fit in 16 bits: a mask with higher bits is `EINVAL`.
///
/// # Safety
/// `s` is NULL or a socket handle owned by the calling thread; `addr` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_socket_monitor(
    s: *mut c_void,
    addr: *const c_char,
    events: c_int,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        if (events as u32) >> 16 != 0 {
            return Err(Error::Inval);
        }
        let addr = if addr.is_null() {
            None
        } else {
            // SAFETY: caller's contract.
            Some(unsafe { c_str(addr) }?)
        };
        sock.monitor(addr, events as u16)?;
        Ok(0)
    })
}

//! `zmq_setsockopt` and `zmq_getsockopt`.
//!
//! Values travel as the raw bytes C passes; rzmq-core's options layer validates them as libzmq
//! does and [`OptValue::write_to`](rzmq_core::options::OptValue::write_to) applies libzmq's
//! buffer rules on the way out: `int` options need exactly `sizeof (int)` bytes (the socket-level
//! ones — `ZMQ_RCVMORE`, `ZMQ_FD`, `ZMQ_EVENTS`, `ZMQ_THREAD_SAFE` — at least that many), strings
//! are written with their NUL and `*optvallen` includes it, binary values (`ZMQ_ROUTING_ID`)
//! without; a buffer too small is `EINVAL`.

use std::ffi::{c_int, c_void};

use rzmq_core::options::{self, OptValue};
use rzmq_core::Error;

use crate::errno::call;
use crate::socket::sock_mut;

/// The options a stable libzmq 4.3.5 compiles only under `ZMQ_BUILD_DRAFT_API` in its
/// setsockopt (options.cpp, router.cpp, xsub.cpp): a default build refuses them with `EINVAL`.
/// The other DRAFT numbers (93-96, 98-100, 108, 109, 116) are handled by stable builds too.
const DRAFT_ONLY_SET: &[c_int] = &[
    options::ROUTER_NOTIFY,
    options::IN_BATCH_SIZE,
    options::OUT_BATCH_SIZE,
    options::WSS_KEY_PEM,
    options::WSS_CERT_PEM,
    options::WSS_TRUST_PEM,
    options::WSS_HOSTNAME,
    options::WSS_TRUST_SYSTEM,
    options::HELLO_MSG,
    options::DISCONNECT_MSG,
    options::PRIORITY,
    options::BUSY_POLL,
    options::HICCUP_MSG,
    options::XSUB_VERBOSE_UNSUBSCRIBE,
    options::NORM_MODE,
    options::NORM_UNICAST_NACK,
    options::NORM_BUFFER_SIZE,
    options::NORM_SEGMENT_SIZE,
    options::NORM_BLOCK_SIZE,
    options::NORM_NUM_PARITY,
    options::NORM_NUM_AUTOPARITY,
    options::NORM_PUSH,
];

/// As [`DRAFT_ONLY_SET`], for getsockopt.
const DRAFT_ONLY_GET: &[c_int] = &[
    options::ROUTER_NOTIFY,
    options::IN_BATCH_SIZE,
    options::OUT_BATCH_SIZE,
    options::PRIORITY,
    options::BUSY_POLL,
    options::NORM_MODE,
    options::NORM_UNICAST_NACK,
    options::NORM_BUFFER_SIZE,
    options::NORM_SEGMENT_SIZE,
    options::NORM_BLOCK_SIZE,
    options::NORM_NUM_PARITY,
    options::NORM_NUM_AUTOPARITY,
    options::NORM_PUSH,
];

/// Sets a socket option from `optvallen` bytes at `optval`. A NULL `optval` with length 0 is
/// allowed (it clears the options libzmq lets clear); NULL with a non-zero length is `EINVAL`.
///
/// # Safety
/// `s` is NULL or a socket handle; `optval` is NULL or readable for `optvallen` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_setsockopt(
    s: *mut c_void,
    option: c_int,
    optval: *const c_void,
    optvallen: usize,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        let value: Option<&[u8]> = if optval.is_null() {
            if optvallen != 0 {
                return Err(Error::Inval);
            }
            None
        } else if optvallen == 0 {
            Some(&[])
        } else {
            // SAFETY: optval is readable for optvallen bytes (caller's contract).
            Some(unsafe { std::slice::from_raw_parts(optval.cast::<u8>(), optvallen) })
        };
        if !cfg!(feature = "draft") && DRAFT_ONLY_SET.contains(&option) {
            return Err(Error::Inval);
        }
        sock.set_option_nullable(option, value)?;
        Ok(0)
    })
}

/// The caller's output buffer of a get-option call: `*optvallen` bytes at `optval` (EFAULT when
/// `optvallen` is NULL, or `optval` is NULL with room asked for).
///
/// # Safety
/// `optvallen` is NULL or valid; `optval` is NULL or writable for `*optvallen` bytes, and both
/// outlive the returned slice.
pub(crate) unsafe fn out_buf<'a>(
    optval: *mut c_void,
    optvallen: *mut usize,
) -> Result<&'a mut [u8], Error> {
    if optvallen.is_null() {
        return Err(Error::Fault);
    }
    // SAFETY: optvallen is valid (checked non-null; caller's contract).
    let cap = unsafe { *optvallen };
    if cap == 0 {
        return Ok(&mut []);
    }
    if optval.is_null() {
        return Err(Error::Fault);
    }
    // SAFETY: optval is writable for cap bytes (caller's contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(optval.cast::<u8>(), cap) })
}

/// Reads a socket option into the `*optvallen` bytes at `optval` and sets `*optvallen` to the
/// length written.
///
/// # Safety
/// `s` is NULL or a socket handle; `optvallen` is NULL or valid; `optval` is NULL or writable
/// for `*optvallen` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_getsockopt(
    s: *mut c_void,
    option: c_int,
    optval: *mut c_void,
    optvallen: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let mut sock = unsafe { sock_mut(s) }?;
        // SAFETY: caller's contract.
        let buf = unsafe { out_buf(optval, optvallen) }?;
        if !cfg!(feature = "draft") && DRAFT_ONLY_GET.contains(&option) {
            return Err(Error::Inval);
        }
        let value = match sock.get_option(option)? {
            // The socket answers these with do_getsockopt<int> in libzmq: any buffer of at
            // least sizeof (int) will do.
            OptValue::Int(v) if options::is_socket_level(option) => OptValue::IntRelaxed(v),
            v => v,
        };
        let n = value.write_to(buf)?;
        // SAFETY: as above.
        unsafe { *optvallen = n };
        Ok(0)
    })
}

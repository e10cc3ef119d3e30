//! Option values as the C API carries them: the raw bytes `setsockopt` passes read as libzmq
//! reads them (an `int` is exactly 4 native-endian bytes; strict and relaxed booleans), what
//! `getsockopt` gives back ([`OptValue`], with libzmq's buffer rules), and what a set changed
//! ([`Applied`]).

use crate::error::{Error, Result};
use crate::z85;

/// An option value as `getsockopt` returns it; [`OptValue::write_to`] applies libzmq's buffer rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptValue {
    /// An `int`: the caller's buffer must be exactly 4 bytes.
    Int(i32),
    /// An `int` answered by the socket layer (`do_getsockopt<int>`): a buffer of at least 4
    /// bytes; the rest is zeroed and the length set to 4.
    IntRelaxed(i32),
    /// An `int64_t` (`MAXMSGSIZE`): the buffer must be exactly 8 bytes.
    Int64(i64),
    /// A `uint64_t` (`AFFINITY`): the buffer must be exactly 8 bytes.
    UInt64(u64),
    /// Binary data (`ROUTING_ID`): the buffer must hold it; the rest is zeroed, the length set.
    Bytes(Vec<u8>),
    /// A character string: written with a terminating NUL, so the buffer needs one more byte;
    /// the rest is zeroed and the length set to the string length plus one. Bytes, not UTF-8.
    Str(Vec<u8>),
    /// A CURVE key: a 32-byte buffer gets the key, a 41-byte buffer its Z85 text and a NUL.
    CurveKey([u8; 32]),
}

impl OptValue {
    /// Writes the value into the caller's buffer (`optval`, whose length is `*optvallen`) as
    /// libzmq does and returns the new `*optvallen`; `EINVAL` when the buffer size does not fit.
    pub fn write_to(&self, buf: &mut [u8]) -> Result<usize> {
        fn exact(buf: &mut [u8], bytes: &[u8]) -> Result<usize> {
            if buf.len() != bytes.len() {
                return Err(Error::Inval);
            }
            buf.copy_from_slice(bytes);
            Ok(bytes.len())
        }
        fn at_least(buf: &mut [u8], bytes: &[u8], nul: bool) -> Result<usize> {
            let len = bytes.len() + usize::from(nul);
            if buf.len() < len {
                return Err(Error::Inval);
            }
            buf[..bytes.len()].copy_from_slice(bytes);
            buf[bytes.len()..].fill(0);
            Ok(len)
        }
        match self {
            OptValue::Int(v) => exact(buf, &v.to_ne_bytes()),
            OptValue::IntRelaxed(v) => at_least(buf, &v.to_ne_bytes(), false),
            OptValue::Int64(v) => exact(buf, &v.to_ne_bytes()),
            OptValue::UInt64(v) => exact(buf, &v.to_ne_bytes()),
            OptValue::Bytes(b) => at_least(buf, b, false),
            OptValue::Str(s) => at_least(buf, s, true),
            OptValue::CurveKey(k) => match buf.len() {
                z85::KEY_LEN => exact(buf, k),
                n if n == z85::KEY_TEXT_LEN + 1 => {
                    buf[..z85::KEY_TEXT_LEN].copy_from_slice(&z85::encode_key(k));
                    buf[z85::KEY_TEXT_LEN] = 0;
                    Ok(n)
                }
                _ => Err(Error::Inval),
            },
        }
    }
}

/// What a successful [`Options::set`](super::Options::set) changed, so the socket can react.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// A generic option was stored; it takes effect for later binds/connects (or at the next
    /// send/recv/close for timeouts and linger).
    Stored,
    /// `SNDHWM` or `RCVHWM` changed: libzmq immediately updates the HWMs of all existing pipes
    /// and sends them to the peers (`update_pipe_options`).
    Hwm,
    /// SUB: send this subscription upstream. XPUB/PUB with `XPUB_MANUAL`: add it for the pipe
    /// the last message was received from (nothing if none).
    Subscribe(Vec<u8>),
    /// SUB: send this unsubscription upstream. XPUB/PUB with `XPUB_MANUAL`: remove it for the
    /// last pipe (nothing if none).
    Unsubscribe(Vec<u8>),
    /// A socket-type option (`ROUTER_*`, `PROBE_ROUTER`, `REQ_*`, `XPUB_*`, `STREAM_NOTIFY`,
    /// `CONNECT_ROUTING_ID`, `ONLY_FIRST_SUBSCRIBE`) was stored in [`Options`](super::Options);
    /// the socket should re-read it. These take effect at once.
    PatternFlag(i32),
}

/// The value as an `int` if it is exactly 4 bytes.
pub(super) fn as_int(v: &[u8]) -> Option<i32> {
    v.try_into().ok().map(i32::from_ne_bytes)
}

/// `do_setsockopt_int_as_bool_strict`: an int that is 0 or 1.
pub(super) fn strict_bool(v: &[u8]) -> Option<bool> {
    match as_int(v)? {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// `do_setsockopt_int_as_bool_relaxed`: any int, non-zero is true.
pub(super) fn relaxed_bool(v: &[u8]) -> Option<bool> {
    as_int(v).map(|x| x != 0)
}

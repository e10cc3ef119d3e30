//! CURVE's command layout (RFC 26 as libzmq 4.3.5 sends it): command names, nonce prefixes,
//! body lengths, and the byte helpers the commands are parsed with. The bottom of `curve/`.

use crate::z85::KEY_LEN;
use crate::zmtp::error::CurveError;

/// `HELLO` command name.
pub(super) const HELLO: &[u8] = b"\x05HELLO";
/// `WELCOME` command name.
pub(super) const WELCOME: &[u8] = b"\x07WELCOME";
/// `INITIATE` command name.
pub(super) const INITIATE: &[u8] = b"\x08INITIATE";
/// `READY` command name.
pub(super) const READY: &[u8] = b"\x05READY";
/// `ERROR` command name.
pub(super) const ERROR: &[u8] = b"\x05ERROR";
/// `MESSAGE` command name.
pub(super) const MESSAGE: &[u8] = b"\x07MESSAGE";

/// Nonce prefix of the `HELLO` box.
pub(super) const HELLO_NONCE: &[u8; 16] = b"CurveZMQHELLO---";
/// Nonce prefix of the `WELCOME` box.
pub(super) const WELCOME_NONCE: &[u8; 8] = b"WELCOME-";
/// Nonce prefix of the cookie box.
pub(super) const COOKIE_NONCE: &[u8; 8] = b"COOKIE--";
/// Nonce prefix of the `INITIATE` box.
pub(super) const INITIATE_NONCE: &[u8; 16] = b"CurveZMQINITIATE";
/// Nonce prefix of the vouch box.
pub(super) const VOUCH_NONCE: &[u8; 8] = b"VOUCH---";
/// Nonce prefix of the `READY` box.
pub(super) const READY_NONCE: &[u8; 16] = b"CurveZMQREADY---";
/// Nonce prefix of `MESSAGE`s from the client.
pub(super) const MESSAGE_NONCE_C: &[u8; 16] = b"CurveZMQMESSAGEC";
/// Nonce prefix of `MESSAGE`s from the server.
pub(super) const MESSAGE_NONCE_S: &[u8; 16] = b"CurveZMQMESSAGES";

/// Length of a `HELLO` body.
pub(super) const HELLO_LEN: usize = 200;
/// Length of a `WELCOME` body.
pub(super) const WELCOME_LEN: usize = 168;
/// Shortest `INITIATE` body (no metadata).
pub(super) const INITIATE_MIN: usize = 257;
/// Shortest `READY` body (no metadata).
pub(super) const READY_MIN: usize = 30;
/// Poly1305 tag length (`crypto_box_MACBYTES`).
pub(super) const TAG_LEN: usize = 16;
/// `MESSAGE` body bytes before the boxed flags byte: name, short nonce, tag.
pub(super) const MESSAGE_HEADER: usize = MESSAGE.len() + 8 + TAG_LEN;

/// The 32-byte key at `at` of `b`.
pub(super) fn key_at(b: &[u8], at: usize) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k.copy_from_slice(&b[at..at + KEY_LEN]);
    k
}

/// The big-endian u64 at `at` of `b` (a short nonce).
pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut n = [0u8; 8];
    n.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(n)
}

/// Compares without an early exit (for secrets).
pub(super) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// libzmq's `check_basic_command_structure`: longer than one byte and than its name length.
pub(super) fn check_structure(b: &[u8]) -> Result<(), CurveError> {
    match b.first() {
        Some(&n) if b.len() > 1 && b.len() > usize::from(n) => Ok(()),
        _ => Err(CurveError::MalformedCommand),
    }
}

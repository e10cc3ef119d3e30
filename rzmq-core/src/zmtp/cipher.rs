//! The seam between the record layer ([`super::record`]) and a security mechanism that protects
//! every frame once its handshake is done (CURVE's `MESSAGE` boxes).
//!
//! The record layer is generic over these traits, so a connection's decoder and send queue call
//! their cipher directly (no dynamic dispatch per frame); the mechanism implements them (CURVE's
//! `Sealer` and `Opener`) and the connection picks the instantiation. A cipher sees whole frames:
//! it writes the wire form of what it seals, header included, and opens a frame body into the
//! flags and body of the frame it carried.

use super::error::ZmtpError;
use crate::msg::Msg;

/// Protects outgoing frames.
pub(crate) trait Seal {
    /// Appends to `out` the wire form of the frame with ZMTP `flags` (MORE, COMMAND) whose body
    /// is the concatenation of `parts`.
    fn seal_frame(&mut self, out: &mut Vec<u8>, flags: u8, parts: &[&[u8]]);
}

/// Opens incoming frames.
pub(crate) trait Open {
    /// Opens one received frame body (the frame's own flags are the cipher's business, usually
    /// ignored); returns the ZMTP flags (MORE, COMMAND) and the body of the frame it carried.
    fn open(&mut self, frame: Msg) -> Result<(u8, Msg), ZmtpError>;
}

/// No protection: a cipher that can never be installed, for record layers that only frame
/// (unit tests of the record layer).
#[cfg(test)]
pub(crate) enum Clear {}

#[cfg(test)]
impl Seal for Clear {
    fn seal_frame(&mut self, _: &mut Vec<u8>, _: u8, _: &[&[u8]]) {
        match *self {}
    }
}

#[cfg(test)]
impl Open for Clear {
    fn open(&mut self, _: Msg) -> Result<(u8, Msg), ZmtpError> {
        match *self {}
    }
}

//! The ZMTP frame on the wire (RFC 23/37): the flags byte, the size field, and the one mapping
//! between wire flags and a [`crate::msg::Msg`]'s flags.
//!
//! A frame is a flags byte (bit 0 MORE, bit 1 LONG, bit 2 COMMAND, bits 7..3 reserved), the body
//! size in 1 byte (short) or 8 bytes big-endian (LONG), then the body. Everything that writes or
//! reads frames outside the record layer (the framed lane of pipes, direct sends and receives,
//! CURVE's `MESSAGE` framing) takes the layout from here. This module imports nothing above
//! [`crate::msg`].

use crate::msg::{MSG_COMMAND, MSG_MORE};

/// MORE flag: more frames of the same message follow.
pub(crate) const FLAG_MORE: u8 = 0x01;
/// LONG flag: the size field is 8 bytes.
pub(crate) const FLAG_LONG: u8 = 0x02;
/// COMMAND flag: the frame is a command.
pub(crate) const FLAG_COMMAND: u8 = 0x04;
/// Every flag ZMTP defines; frames with other bits set are rejected.
pub(crate) const FLAGS_KNOWN: u8 = FLAG_MORE | FLAG_LONG | FLAG_COMMAND;
/// Longest frame header: the flags byte and an 8-byte size.
pub(crate) const MAX_HEADER_LEN: usize = 9;

/// Bodies larger than this are written from their `Msg`, not copied into the send buffer.
pub(crate) const LARGE_BODY: usize = 8 * 1024;
/// A body at least this large is written in two steps: its first [`LEAD_BYTES`] (with whatever
/// precedes it), then the rest. In one write, a message of more than about 16 loopback segments
/// (1 MiB) waited in the kernel's pacing on this project's hosts (BBR) and took 1.5-2x libzmq's
/// round trip; a short first write gets the receiver copying while the sender copies the rest.
/// libzmq's encoder writes large frames in two steps too (its 8 KiB batch, then the rest).
/// Same-host connections, which run reno (`transport::tune_same_host`), are not paced and
/// write large bodies whole (the split cost them 10% of their 1 MiB throughput).
pub(crate) const LEAD_SPLIT_MIN: usize = 256 * 1024;
/// The first step of a split write (see [`LEAD_SPLIT_MIN`]): one loopback segment.
pub(crate) const LEAD_BYTES: usize = 64 * 1024;

/// Writes the ZMTP frame header for a body of `len` bytes with `flags` (MORE, COMMAND) into
/// `out`; returns its length (2, or 9 for bodies over 255 bytes).
#[inline]
pub(crate) fn frame_header(flags: u8, len: usize, out: &mut [u8; MAX_HEADER_LEN]) -> usize {
    if len > 255 {
        out[0] = flags | FLAG_LONG;
        out[1..9].copy_from_slice(&(len as u64).to_be_bytes());
        9
    } else {
        out[0] = flags;
        out[1] = len as u8;
        2
    }
}

/// Reads the header at the start of `bytes`: `(header length, body size)`, or `None` while the
/// header is incomplete. The flags byte is not checked.
#[inline]
pub(crate) fn parse_header(bytes: &[u8]) -> Option<(usize, u64)> {
    let &flags = bytes.first()?;
    if flags & FLAG_LONG != 0 {
        let b = bytes.get(1..9)?;
        let mut s = [0u8; 8];
        s.copy_from_slice(b);
        Some((9, u64::from_be_bytes(s)))
    } else {
        Some((2, u64::from(*bytes.get(1)?)))
    }
}

/// The wire flags (MORE, COMMAND) of a frame carrying a message with `msg_flags`
/// ([`crate::msg::MSG_MORE`], [`crate::msg::MSG_COMMAND`]); other bits are dropped.
#[inline]
pub(crate) fn wire_flags(msg_flags: u8) -> u8 {
    let mut flags = 0;
    if msg_flags & MSG_MORE != 0 {
        flags |= FLAG_MORE;
    }
    if msg_flags & MSG_COMMAND != 0 {
        flags |= FLAG_COMMAND;
    }
    flags
}

/// The message flags ([`crate::msg::MSG_MORE`], [`crate::msg::MSG_COMMAND`]) of a frame with
/// wire `flags`; LONG and reserved bits are dropped.
#[inline]
pub(crate) fn msg_flags(flags: u8) -> u8 {
    let mut m = 0;
    if flags & FLAG_MORE != 0 {
        m |= MSG_MORE;
    }
    if flags & FLAG_COMMAND != 0 {
        m |= MSG_COMMAND;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let mut h = [0u8; MAX_HEADER_LEN];
        for (flags, len) in [(0, 0), (FLAG_MORE, 255), (FLAG_COMMAND, 256), (0, 1 << 40)] {
            let n = frame_header(flags, len, &mut h);
            assert_eq!(n, if len > 255 { 9 } else { 2 });
            assert_eq!(parse_header(&h[..n]), Some((n, len as u64)));
            assert_eq!(parse_header(&h[..n - 1]), None);
            assert_eq!(h[0] & !FLAG_LONG, flags);
        }
        assert_eq!(parse_header(&[]), None);
    }

    #[test]
    fn flags_map_both_ways() {
        for m in 0..4u8 {
            assert_eq!(msg_flags(wire_flags(m)), m);
        }
        assert_eq!(wire_flags(MSG_MORE | MSG_COMMAND), FLAG_MORE | FLAG_COMMAND);
        assert_eq!(msg_flags(FLAG_LONG | FLAG_MORE), MSG_MORE);
    }
}

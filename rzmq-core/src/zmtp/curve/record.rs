//! CURVE's record cipher: every frame after the handshake travels boxed in a `MESSAGE` command
//! ([`Sealer`], [`Opener`]), the [`crate::zmtp::cipher`] traits the record layer calls.

use super::keys::{nonce, Cipher};
use super::wire::{
    check_structure, u64_at, MESSAGE, MESSAGE_HEADER, MESSAGE_NONCE_C, MESSAGE_NONCE_S, TAG_LEN,
};
use crate::msg::Msg;
use crate::zmtp::cipher::{Open, Seal};
use crate::zmtp::error::{CurveError, ZmtpError};
use crate::zmtp::frame::{self, MAX_HEADER_LEN};

/// Boxes outgoing frames as `MESSAGE` commands with increasing short nonces.
pub(crate) struct Sealer {
    cipher: Cipher,
    prefix: &'static [u8; 16],
    nonce: u64,
}

impl Seal for Sealer {
    /// Appends the ZMTP frame carrying `parts` (ZMTP `flags`: MORE, COMMAND) as a `MESSAGE`;
    /// the box's flags byte is libzmq's message flags ([`frame::msg_flags`]).
    fn seal_frame(&mut self, out: &mut Vec<u8>, flags: u8, parts: &[&[u8]]) {
        let body_len: usize = parts.iter().map(|p| p.len()).sum();
        let len = MESSAGE_HEADER + 1 + body_len;
        out.reserve(MAX_HEADER_LEN + len);
        // The MESSAGE frame itself carries no flags, as libzmq sends it.
        let mut h = [0u8; MAX_HEADER_LEN];
        let hl = frame::frame_header(0, len, &mut h);
        out.extend_from_slice(&h[..hl]);
        let n = self.nonce;
        self.nonce = self.nonce.wrapping_add(1);
        out.extend_from_slice(MESSAGE);
        out.extend_from_slice(&n.to_be_bytes());
        let at = out.len();
        out.extend_from_slice(&[0u8; TAG_LEN]);
        let mflags = frame::msg_flags(flags);
        let n = nonce(self.prefix, &n.to_be_bytes());
        if let [body] = parts {
            // One part (every message frame): encrypted on its way into `out`, no plain copy.
            let tag = self.cipher.0.seal_append(&n, mflags, body, out);
            out[at..at + TAG_LEN].copy_from_slice(&tag);
            return;
        }
        out.push(mflags);
        for p in parts {
            out.extend_from_slice(p);
        }
        self.cipher.seal_in_place(&n, out, at);
    }
}

/// Opens incoming `MESSAGE` commands, enforcing increasing short nonces.
pub(crate) struct Opener {
    cipher: Cipher,
    prefix: &'static [u8; 16],
    peer_nonce: u64,
}

impl Open for Opener {
    /// Opens one received frame body; returns its ZMTP flags (MORE, COMMAND) and payload. The
    /// frame's own flags are ignored, as libzmq does. Decrypts in place when `msg` is not shared.
    fn open(&mut self, mut msg: Msg) -> Result<(u8, Msg), ZmtpError> {
        let d = msg.data();
        check_structure(d)?;
        if !d.starts_with(MESSAGE) {
            return Err(CurveError::UnexpectedCommand.into());
        }
        if d.len() < MESSAGE_HEADER + 1 {
            return Err(CurveError::MalformedMessage.into());
        }
        let short = u64_at(d, MESSAGE.len());
        if short <= self.peer_nonce {
            return Err(CurveError::InvalidSequence.into());
        }
        let n = nonce(self.prefix, &d[MESSAGE.len()..MESSAGE.len() + 8]);
        let tag: [u8; TAG_LEN] = d[MESSAGE_HEADER - TAG_LEN..MESSAGE_HEADER]
            .try_into()
            .expect("TAG_LEN bytes");
        let off = if msg.data_mut().is_some() {
            MESSAGE_HEADER
        } else {
            msg = Msg::copy_from(&msg.data()[MESSAGE_HEADER..]);
            0
        };
        let len = msg.len();
        let Some(buf) = msg.data_mut() else {
            return Err(CurveError::MalformedMessage.into());
        };
        self.cipher
            .0
            .open(&n, &mut buf[off..], &tag)
            .map_err(|_| CurveError::Cryptographic)?;
        self.peer_nonce = short;
        let flags = frame::wire_flags(buf[off]);
        let body = msg
            .slice(off + 1, len - off - 1)
            .ok_or(CurveError::MalformedMessage)?;
        Ok((flags, body))
    }
}

/// The message boxing of a completed handshake.
pub(crate) struct Codec {
    /// Boxes what we send.
    pub(crate) sealer: Sealer,
    /// Opens what the peer sends.
    pub(crate) opener: Opener,
}

impl Codec {
    /// The boxing of a handshake that agreed on `cipher` (C' to S'): we send with nonces from
    /// `nonce` on, the peer's must exceed `peer_nonce`; `as_server` picks the nonce prefixes.
    pub(super) fn new(cipher: Cipher, as_server: bool, nonce: u64, peer_nonce: u64) -> Codec {
        let (ours, theirs) = if as_server {
            (MESSAGE_NONCE_S, MESSAGE_NONCE_C)
        } else {
            (MESSAGE_NONCE_C, MESSAGE_NONCE_S)
        };
        Codec {
            sealer: Sealer {
                cipher: cipher.clone(),
                prefix: ours,
                nonce,
            },
            opener: Opener {
                cipher,
                prefix: theirs,
                peer_nonce,
            },
        }
    }
}

//! The CURVE security mechanism (ZMTP 3.1 with RFC 26 CurveZMQ), sans-IO, byte-compatible with
//! libzmq 4.3.5 built with libsodium (`curve_client.cpp`, `curve_server.cpp`,
//! `curve_mechanism_base.cpp`, `curve_client_tools.hpp`).
//!
//! # Wire layout (command bodies; `+` is concatenation, `Box[x](A->B)` is NaCl's `crypto_box` of
//! `x` from A's secret key to B's public key, sent as its 16-byte tag then the ciphertext)
//! ```text
//! HELLO    (200)  "\x05HELLO" 01 00, 72 zero bytes, C', short nonce,
//!                 Box[64 zero bytes](C'->S)                      nonce "CurveZMQHELLO---" + short
//! WELCOME  (168)  "\x07WELCOME", long nonce, Box[S' + cookie](S->C')   nonce "WELCOME-" + long
//!                 cookie = cookie nonce (16) + SecretBox[C' + s'](t)  nonce "COOKIE--" + 16
//! INITIATE (>=257) "\x08INITIATE", cookie, short nonce,
//!                 Box[C + vouch nonce + vouch + metadata](C'->S')  nonce "CurveZMQINITIATE" + short
//!                 vouch = Box[C' + S](C->S')                      nonce "VOUCH---" + 16
//! READY    (>=30) "\x05READY", short nonce, Box[metadata](S'->C')  nonce "CurveZMQREADY---" + short
//! ERROR           "\x05ERROR", reason length, reason (plain text, a ZAP status code)
//! MESSAGE         "\x07MESSAGE", short nonce, Box[flags + body](C'->S' or S'->C'), nonce prefix
//!                 "CurveZMQMESSAGEC" (client to server) or "CurveZMQMESSAGES"
//! ```
//! Short nonces are 8-byte big-endian counters. Each side counts from 1 (the client's `HELLO` is
//! 1, its `INITIATE` 2; the server's `READY` is 1) and every `MESSAGE` nonce must be larger than
//! the peer's previous one (libzmq's rule; we also require the `INITIATE` nonce to exceed the
//! `HELLO` nonce). After the handshake every frame, commands (`PING`, `SUBSCRIBE`, ...) included,
//! travels as a `MESSAGE` whose first plaintext byte carries libzmq's message flags (bit 0 MORE,
//! bit 1 COMMAND); like libzmq we send `MESSAGE` in a ZMTP frame with no flags and accept any.
//!
//! # Errors
//! As libzmq, each failure maps to a `ZMQ_PROTOCOL_ERROR_ZMTP_*` code reported with
//! `ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL` ([`CurveError::protocol_code`]). X25519 results that are
//! all zero (a zero or low-order public key) are rejected, as libsodium's `crypto_box_beforenm`
//! does. The server checks that the vouch names both the client's transient key and its own
//! long-term key (libzmq checks only the former; RFC 26 asks for both). Secrets are wiped on drop.
//! The boxes themselves (NaCl's XSalsa20-Poly1305) are [`super::secretbox`]'s.
//!
//! # Authentication (ZAP)
//! The server pauses after `INITIATE`: [`Handshake::on_command`] returns [`Step::Initiated`] with
//! the client's long-term public key (the ZAP credential, mechanism `"CURVE"`) and its metadata.
//! The caller then answers [`Handshake::accept`] (our `READY` and the message codec) or
//! [`Handshake::reject`] (an `ERROR` with the ZAP status code); a command arriving in between fails
//! with `ZMQ_PROTOCOL_ERROR_ZMTP_UNSPECIFIED`, as in libzmq. [`super::Connection`] asks ZAP
//! whenever a handler is bound (whatever `ZMQ_ZAP_DOMAIN` says, as libzmq 4.3.5); without one it
//! accepts every client that knows the server key (the "stonehouse" pattern) unless
//! `ZMQ_ZAP_ENFORCE_DOMAIN` is set.

// Bottom to top: the command layout; keys and boxes; the record cipher (MESSAGE); the handshake
// step; the two sides; the handshake (below).
mod wire;

mod keys;

mod record;

mod step;

mod client;
mod server;

#[cfg(test)]
mod tests;

use client::Client;
pub(crate) use keys::CurveKeys;
pub(crate) use record::{Codec, Opener, Sealer};
use server::Server;
pub(crate) use step::Step;

use super::command;
pub(super) use super::error::CurveError;
use super::error::ZmtpError;

/// One side of a CURVE handshake.
pub(crate) enum Handshake {
    /// We are the CURVE client.
    Client(Box<Client>),
    /// We are the CURVE server.
    Server(Box<Server>),
}

impl Handshake {
    /// Starts a handshake. `properties` is our metadata (`Socket-Type`, `Identity`, `X-...`) for
    /// `INITIATE` or `READY`. A client also returns its `HELLO`; it fails with
    /// [`CurveError::Cryptographic`] when the server key is zero or of low order (as libzmq).
    pub(crate) fn new(
        keys: &CurveKeys,
        as_server: bool,
        properties: Vec<u8>,
    ) -> Result<(Handshake, Option<Vec<u8>>), CurveError> {
        if as_server {
            Ok((
                Handshake::Server(Box::new(Server::new(keys, properties)?)),
                None,
            ))
        } else {
            let (c, hello) = Client::new(keys, properties)?;
            Ok((Handshake::Client(Box::new(c)), Some(hello)))
        }
    }

    /// Processes one handshake command body from the peer.
    pub(crate) fn on_command(&mut self, body: &[u8]) -> Result<Step, ZmtpError> {
        match self {
            Handshake::Client(c) => c.on_command(body),
            Handshake::Server(s) => s.on_command(body).map_err(ZmtpError::from),
        }
    }

    /// Server, after [`Step::Initiated`]: the client is accepted. Returns our `READY` body and
    /// the message codec.
    pub(crate) fn accept(&mut self) -> Result<(Vec<u8>, Codec), CurveError> {
        match self {
            Handshake::Server(s) => s.accept(),
            Handshake::Client(_) => Err(CurveError::UnexpectedCommand),
        }
    }

    /// Server, after [`Step::Initiated`]: the client is refused with a ZAP `status` (`"300"`,
    /// `"400"`, `"500"`). Returns the `ERROR` body to send before closing.
    pub(crate) fn reject(&mut self, status: &[u8]) -> Vec<u8> {
        if let Handshake::Server(s) = self {
            s.reject();
        }
        command::error_body(status)
    }
}

//! ZMTP 3.1 (RFC 23/37) as a sans-IO state machine, wire-compatible with libzmq 4.3.5.
//!
//! This module owns the protocol of one stream connection: the greeting, the NULL and PLAIN security
//! handshakes (`READY`, `ERROR`, peer metadata, socket-type compatibility), framing (MORE, LONG,
//! COMMAND; `ZMQ_MAXMSGSIZE`), heartbeats (`PING`/`PONG`, `ZMQ_HEARTBEAT_IVL/TTL/TIMEOUT`), the
//! handshake timeout and the two subscription forms. It owns no socket, thread, clock or pipe: the
//! engine moves bytes and time in and out, and decides what to do with messages and errors.
//!
//! # Driving a [`Connection`]
//! ```text
//! let mut c = Connection::new(cfg, Instant::now());          // our greeting is queued
//! loop {
//!     // readable:
//!     let n = stream.read(c.recv_buffer())?;                   // n == 0: peer closed
//!     c.received(n, now)?;
//!     while let Some(ev) = c.poll_event()? {                   // Err: close the connection
//!         match ev { Event::Ready(peer) => ..., Event::Message(msg) => push to the pipe }
//!     }                                                        // stop early on a full pipe;
//!                                                              // resume with poll_event later
//!     // authentication (NULL with ZAP_DOMAIN, PLAIN server): hand c.take_zap_request() to the
//!     // ZAP handler, later c.zap_reply(&frames)? (or c.zap_unavailable()? if none is bound)
//!     // to send (only after Event::Ready): c.send(msg)?, c.send_subscribe(topic, true)?
//!     if c.has_output() { c.write_to(&mut stream)?; }          // keep POLLOUT while has_output()
//!     // timers: sleep until c.poll_timeout(), then c.handle_timeout(now)? (may queue a PING)
//! }
//! ```
//! Decoding is lazy: [`Connection::received`] only accounts bytes; [`Connection::poll_event`]
//! decodes one event per call, so backpressure is simply not calling it (and not reading). Events
//! are never queued inside. After any error the session is failed for good; flush pending output
//! (it may hold an `ERROR` command) best-effort and close.
//!
//! # Decisions the engine relies on
//! - Received message frames are [`crate::msg::Msg`]s with MORE set and the peer metadata
//!   attached. Up to [`crate::msg::INLINE_CAP`] bytes they are inline; larger ones are copied out of
//!   the 64 KiB batch buffer when the read was small, and sliced out of it (no copy, the buffer is
//!   then given up) when at least 16 KiB arrived at once. Frames over 32 KiB that were not complete
//!   in the batch are read straight into their own buffer: storage for the whole body up to
//!   [`record::DIRECT_MAPPED_MAX`] (pooled up to [`crate::pool::POOL_MAX`]; untouched pages cost
//!   nothing until data arrives), above it allocated at most [`record::DIRECT_EAGER`] bytes ahead
//!   of the data (a peer lying about a 2^62-byte frame costs nothing).
//! - Subscriptions: libzmq 4.3.5's `ZMQ_SUBSCRIBE` (and XSUB's re-sent subscriptions) go to ZMTP 3.1
//!   peers as `SUBSCRIBE`/`CANCEL` commands (`v3_1_encoder`) and to ZMTP 3.0 peers as `0x01`/`0x00`
//!   messages; [`Connection::send_subscribe`] does the same. Messages an XSUB *user* sends
//!   (`0x01topic`) go out as ordinary messages via [`Connection::send`], as in libzmq. Both forms
//!   are accepted on input and surface as a message `0x01`/`0x00` + topic.
//! - Heartbeats as libzmq: `PING` (with our TTL, no context) every `heartbeat_ivl` after the
//!   handshake, whatever the peer's minor version; the timeout starts at a `PING` when not already
//!   running; a peer's `PING` is answered with a `PONG` echoing up to 16 bytes of context and, when
//!   its TTL is non-zero, arms a TTL timer. Unlike libzmq (which cancels those timers per decoded
//!   message) any received byte cancels them.
//! - Incompatible socket types: we queue an `ERROR` command ("Invalid socket type") before failing.
//!   libzmq 4.3.5 just closes; its peer fails on our `READY` before it reads the `ERROR`, so this
//!   is harmless to interop. Command and frame flags with reserved bits set and sizes with the top
//!   bit set are rejected (libzmq accepts the former).
//! - Security: NULL, PLAIN (RFC 24) and CURVE (RFC 26). A NULL socket with `ZMQ_ZAP_DOMAIN` and every PLAIN
//!   server ask ZAP (RFC 27) before going on: [`Connection::take_zap_request`] hands the request
//!   to the engine, which answers with [`Connection::zap_reply`] or
//!   [`Connection::zap_unavailable`]; meanwhile the handshake waits (our `READY`/`WELCOME` is
//!   held back). ZAP's `User-Id` and metadata join the peer metadata.
//! - Not supported: ZMTP 1.0/2.0 peers (libzmq falls back to them; we fail with
//!   [`ZmtpError::BadSignature`] or [`ZmtpError::UnsupportedVersion`]) and GSSAPI (not a
//!   [`Mechanism`]: a peer offering it fails the greeting with a mechanism mismatch).
//! - CURVE (RFC 26, `curve/`): the handshake runs in the handshake state and every frame after
//!   it is boxed by the send queue and opened by the decoder; a CURVE server asks the ZAP handler
//!   (mechanism "CURVE", the client's long-term public key as the one credential) whenever one is
//!   bound, as libzmq does.
//! - Monitor events: see [`ZmtpError::protocol_code`], [`ZmtpError::auth_status`] and
//!   [`ZmtpError::reason`] (libzmq reconnects a connecting session only after timeouts).

// Bottom to top: a module imports only modules of the levels before its own.
// 0: leaves, importing nothing of zmtp: the vocabulary, and CURVE's box (XSalsa20-Poly1305).
mod mechanism;
mod secretbox;
mod socket_type;

// 1: the errors.
pub(crate) mod error;

// 2: wire formats: the greeting, command bodies, the frame layout.
mod command;
pub(crate) mod frame;
pub(crate) mod greeting;

// 3: the cipher seam between the record layer and the mechanisms.
mod cipher;

// 4: the record layer (generic over the cipher).
mod record;

// 5: the mechanisms and the ZAP wire format.
mod curve;
pub(crate) mod plain;
pub(crate) mod zap;

// 6: the handshake (NULL and the READY metadata).
mod handshake;

// 7: one connection (instantiates the record layer with CURVE's cipher).
mod connection;

#[cfg(test)]
mod tests;

pub(crate) use command::{join_leave_body, parse_join_leave};
pub(crate) use connection::parse_command;
pub(crate) use connection::Decoder;
pub use connection::{Config, Connection, Event};
pub(crate) use curve::CurveKeys;
pub(crate) use error::ZmtpError;
pub(crate) use handshake::Peer;
pub(crate) use mechanism::Mechanism;
pub(crate) use plain::Credentials;
pub use socket_type::SocketType;
pub(crate) use zap::ZapRequest;

//! Why a ZMTP connection failed, and how libzmq would report it.
//!
//! [`ZmtpError`] is the error of the `zmtp` module; [`CurveError`] and [`ZapError`] detail its
//! CURVE and ZAP variants. This module is the bottom of `zmtp` (it imports only the
//! vocabulary: [`super::Mechanism`] and [`super::SocketType`]). Every variant is fatal for its
//! connection: the engine flushes what output is left (best effort, an `ERROR` command may be
//! queued) and closes the transport. [`ZmtpError::protocol_code`], [`ZmtpError::auth_status`] and
//! [`ZmtpError::reason`] tell the engine which monitor event libzmq 4.3.5 would emit and whether a
//! connecting session would reconnect.

use std::fmt;

use super::mechanism::{Mechanism, MECHANISM_LEN};
use super::socket_type::SocketType;

/// `ZMQ_PROTOCOL_ERROR_ZMTP_UNSPECIFIED`.
pub(crate) const PROTOCOL_ERROR_ZMTP_UNSPECIFIED: u32 = 0x1000_0000;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND`.
pub(crate) const PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND: u32 = 0x1000_0001;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE`.
pub(crate) const PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE: u32 = 0x1000_0002;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE`.
pub(crate) const PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE: u32 = 0x1000_0003;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED: u32 = 0x1000_0011;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE: u32 = 0x1000_0012;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO: u32 = 0x1000_0013;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE: u32 = 0x1000_0014;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_ERROR`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_ERROR: u32 = 0x1000_0015;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY: u32 = 0x1000_0016;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME: u32 = 0x1000_0017;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_INVALID_METADATA`.
pub(crate) const PROTOCOL_ERROR_ZMTP_INVALID_METADATA: u32 = 0x1000_0018;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC`.
pub(crate) const PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: u32 = 0x1100_0001;
/// `ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH`.
pub(crate) const PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH: u32 = 0x1100_0002;
/// `ZMQ_PROTOCOL_ERROR_ZAP_UNSPECIFIED`.
pub(crate) const PROTOCOL_ERROR_ZAP_UNSPECIFIED: u32 = 0x2000_0000;
/// `ZMQ_PROTOCOL_ERROR_ZAP_MALFORMED_REPLY`.
pub(crate) const PROTOCOL_ERROR_ZAP_MALFORMED_REPLY: u32 = 0x2000_0001;
/// `ZMQ_PROTOCOL_ERROR_ZAP_BAD_REQUEST_ID`.
pub(crate) const PROTOCOL_ERROR_ZAP_BAD_REQUEST_ID: u32 = 0x2000_0002;
/// `ZMQ_PROTOCOL_ERROR_ZAP_BAD_VERSION`.
pub(crate) const PROTOCOL_ERROR_ZAP_BAD_VERSION: u32 = 0x2000_0003;
/// `ZMQ_PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE`.
pub(crate) const PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE: u32 = 0x2000_0004;
/// `ZMQ_PROTOCOL_ERROR_ZAP_INVALID_METADATA`.
pub(crate) const PROTOCOL_ERROR_ZAP_INVALID_METADATA: u32 = 0x2000_0005;

/// libzmq's classification of an engine failure (`i_engine::error_reason_t`), which decides
/// whether a connecting session reconnects.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// `protocol_error`: libzmq does not reconnect a connecting session after it.
    Protocol,
    /// `timeout_error`: handshake or heartbeat timer expired; a connecting session reconnects.
    Timeout,
}

/// A fatal ZMTP failure of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZmtpError {
    /// The peer's greeting does not start with a ZMTP 2.0+ signature (`0xFF`, 8 bytes, `xxxxxxx1`):
    /// a ZMTP 1.0 peer or not ZMTP at all. rzmq does not support ZMTP 1.0.
    BadSignature,
    /// The peer speaks ZMTP older than 3.0 (major version byte `major`); unsupported in rzmq.
    UnsupportedVersion {
        /// The peer's major version byte.
        major: u8,
    },
    /// The peer's mechanism differs from ours (or is unknown).
    MechanismMismatch {
        /// Our mechanism.
        ours: Mechanism,
        /// The peer's 20-byte, NUL-padded mechanism field.
        peer: [u8; MECHANISM_LEN],
    },
    /// Our configured mechanism is not implemented yet (PLAIN, CURVE).
    MechanismNotSupported(Mechanism),
    /// A frame's flags byte has reserved bits (7..3) set.
    ReservedFlags(u8),
    /// A frame's 8-byte size has its top bit set (no valid frame is that large).
    InvalidFrameSize(u64),
    /// A frame is larger than `ZMQ_MAXMSGSIZE`.
    FrameTooLarge {
        /// The size the frame header claims.
        size: u64,
        /// The configured limit.
        max: i64,
    },
    /// During the handshake the peer sent something other than the commands the mechanism
    /// expects (including a message frame).
    UnexpectedCommand,
    /// The peer's `ERROR` command is malformed.
    MalformedError,
    /// The properties of the peer's `READY` command are malformed.
    MalformedReady,
    /// The peer's `Socket-Type` cannot talk to ours (an `ERROR` command has been queued).
    IncompatibleSocketType {
        /// Our socket type.
        ours: SocketType,
        /// The peer's `Socket-Type` value, verbatim.
        peer: Vec<u8>,
    },
    /// The peer sent an `ERROR` command during the handshake.
    PeerError {
        /// The reason text, verbatim (libzmq sends ZAP status codes such as `b"400"`).
        reason: Vec<u8>,
    },
    /// `ZMQ_HANDSHAKE_IVL` elapsed before the handshake completed.
    HandshakeTimeout,
    /// Nothing arrived within `ZMQ_HEARTBEAT_TIMEOUT` after we sent a `PING`.
    HeartbeatTimeout,
    /// Nothing arrived within the TTL the peer advertised in its last `PING`.
    HeartbeatTtlExpired,
    /// The engine tried to send before the handshake completed (an API misuse, not peer input).
    NotReady,
    /// A handshake command too short for its own name (libzmq's basic command structure check).
    MalformedCommand,
    /// The PLAIN client's `HELLO` is malformed (missing, truncated or trailing credentials).
    MalformedHello,
    /// The PLAIN server's `WELCOME` carries data.
    MalformedWelcome,
    /// The metadata of the PLAIN server's `READY` is malformed.
    InvalidMetadata,
    /// The peer sent a command while the handshake waited for the ZAP handler.
    OutOfSequence,
    /// The ZAP handler's reply is malformed.
    ZapReply(ZapError),
    /// Authentication is required but no ZAP handler is bound at `inproc://zeromq.zap.01`.
    ZapUnavailable,
    /// The CURVE handshake or a CURVE `MESSAGE` failed.
    Curve(CurveError),
}

impl ZmtpError {
    /// The `ZMQ_PROTOCOL_ERROR_*` value libzmq 4.3.5 reports with
    /// `ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL` for this failure, or `None` when it reports none
    /// (then see [`ZmtpError::auth_status`]; otherwise a failure during the handshake that is not a
    /// protocol error is `ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL`, and any other failure is only
    /// `ZMQ_EVENT_DISCONNECTED`).
    pub fn protocol_code(&self) -> Option<u32> {
        match self {
            ZmtpError::MechanismMismatch { .. } => Some(PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH),
            ZmtpError::UnexpectedCommand => Some(PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND),
            ZmtpError::MalformedError => Some(PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_ERROR),
            ZmtpError::MalformedCommand => Some(PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED),
            ZmtpError::MalformedHello => Some(PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO),
            ZmtpError::MalformedWelcome => Some(PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME),
            ZmtpError::InvalidMetadata => Some(PROTOCOL_ERROR_ZMTP_INVALID_METADATA),
            ZmtpError::OutOfSequence => Some(PROTOCOL_ERROR_ZMTP_UNSPECIFIED),
            ZmtpError::ZapReply(z) => Some(z.code()),
            ZmtpError::Curve(e) => e.protocol_code(),
            _ => None,
        }
    }

    /// The ZAP status code (300, 400 or 500) libzmq reports with `ZMQ_EVENT_HANDSHAKE_FAILED_AUTH`
    /// when the peer's `ERROR` reason is such a code.
    pub fn auth_status(&self) -> Option<u32> {
        match self {
            ZmtpError::PeerError { reason } => match reason.as_slice() {
                [d @ b'3'..=b'5', b'0', b'0'] => Some(u32::from(d - b'0') * 100),
                _ => None,
            },
            _ => None,
        }
    }

    /// The errno libzmq reports with `ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL` for a failure that has
    /// neither a protocol code nor an authentication status (`EFAULT` when no ZAP handler is
    /// bound, 0 otherwise).
    pub fn no_detail_errno(&self) -> i32 {
        match self {
            ZmtpError::ZapUnavailable => libc::EFAULT,
            _ => 0,
        }
    }

    /// How libzmq classifies the failure (decides reconnection of a connecting session).
    pub fn reason(&self) -> FailureReason {
        match self {
            ZmtpError::HandshakeTimeout
            | ZmtpError::HeartbeatTimeout
            | ZmtpError::HeartbeatTtlExpired => FailureReason::Timeout,
            _ => FailureReason::Protocol,
        }
    }

    /// A best-effort errno for the failure (what libzmq's engine leaves in `errno`).
    pub fn errno(&self) -> i32 {
        match self {
            ZmtpError::FrameTooLarge { .. } | ZmtpError::InvalidFrameSize(_) => libc::EMSGSIZE,
            ZmtpError::IncompatibleSocketType { .. } => libc::EINVAL,
            ZmtpError::MechanismNotSupported(_) => libc::ENOTSUP,
            ZmtpError::HandshakeTimeout
            | ZmtpError::HeartbeatTimeout
            | ZmtpError::HeartbeatTtlExpired => libc::ETIMEDOUT,
            ZmtpError::NotReady => libc::EAGAIN,
            _ => libc::EPROTO,
        }
    }
}

impl fmt::Display for ZmtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZmtpError::BadSignature => f.write_str("peer greeting has no ZMTP 3.x signature"),
            ZmtpError::UnsupportedVersion { major } => {
                write!(
                    f,
                    "peer speaks ZMTP major version {major}, only 3.x is supported"
                )
            }
            ZmtpError::MechanismMismatch { ours, peer } => {
                let end = peer.iter().position(|&b| b == 0).unwrap_or(peer.len());
                write!(
                    f,
                    "security mechanism mismatch: ours is {}, peer's is {:?}",
                    ours.name(),
                    String::from_utf8_lossy(&peer[..end])
                )
            }
            ZmtpError::MechanismNotSupported(m) => {
                write!(f, "security mechanism {} is not supported", m.name())
            }
            ZmtpError::ReservedFlags(b) => {
                write!(f, "frame flags 0x{b:02x} have reserved bits set")
            }
            ZmtpError::InvalidFrameSize(s) => write!(f, "invalid frame size {s}"),
            ZmtpError::FrameTooLarge { size, max } => {
                write!(
                    f,
                    "frame of {size} bytes exceeds the maximum message size {max}"
                )
            }
            ZmtpError::UnexpectedCommand => f.write_str("unexpected command during the handshake"),
            ZmtpError::MalformedError => f.write_str("malformed ERROR command"),
            ZmtpError::MalformedReady => f.write_str("malformed READY command metadata"),
            ZmtpError::IncompatibleSocketType { ours, peer } => write!(
                f,
                "peer socket type {:?} is incompatible with {}",
                String::from_utf8_lossy(peer),
                ours.name()
            ),
            ZmtpError::PeerError { reason } => {
                write!(f, "peer sent ERROR: {:?}", String::from_utf8_lossy(reason))
            }
            ZmtpError::HandshakeTimeout => f.write_str("handshake timed out"),
            ZmtpError::HeartbeatTimeout => f.write_str("heartbeat timed out"),
            ZmtpError::HeartbeatTtlExpired => f.write_str("peer heartbeat TTL expired"),
            ZmtpError::NotReady => f.write_str("the ZMTP handshake has not completed"),
            ZmtpError::MalformedCommand => f.write_str("malformed handshake command"),
            ZmtpError::MalformedHello => f.write_str("malformed PLAIN HELLO command"),
            ZmtpError::MalformedWelcome => f.write_str("malformed PLAIN WELCOME command"),
            ZmtpError::InvalidMetadata => f.write_str("invalid metadata in the peer's READY"),
            ZmtpError::OutOfSequence => {
                f.write_str("peer sent a command while authentication was pending")
            }
            ZmtpError::ZapReply(e) => write!(f, "malformed ZAP reply ({e:?})"),
            ZmtpError::ZapUnavailable => {
                f.write_str("authentication required but no ZAP handler is bound")
            }
            ZmtpError::Curve(e) => write!(f, "CURVE: {e}"),
        }
    }
}

impl std::error::Error for ZmtpError {}

/// Why a ZAP reply was refused; each maps to a `ZMQ_PROTOCOL_ERROR_ZAP_*` code.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ZapError {
    /// The delimiter frame is not empty.
    Unspecified,
    /// Not exactly seven frames.
    MalformedReply,
    /// The request id is not ours.
    BadRequestId,
    /// The version is not `1.0`.
    BadVersion,
    /// The status code is not 200, 300, 400 or 500.
    InvalidStatusCode,
    /// The metadata frame does not parse.
    InvalidMetadata,
}

impl ZapError {
    /// The `ZMQ_PROTOCOL_ERROR_ZAP_*` value libzmq reports for this failure.
    pub fn code(self) -> u32 {
        match self {
            ZapError::Unspecified => PROTOCOL_ERROR_ZAP_UNSPECIFIED,
            ZapError::MalformedReply => PROTOCOL_ERROR_ZAP_MALFORMED_REPLY,
            ZapError::BadRequestId => PROTOCOL_ERROR_ZAP_BAD_REQUEST_ID,
            ZapError::BadVersion => PROTOCOL_ERROR_ZAP_BAD_VERSION,
            ZapError::InvalidStatusCode => PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE,
            ZapError::InvalidMetadata => PROTOCOL_ERROR_ZAP_INVALID_METADATA,
        }
    }
}

impl From<ZapError> for ZmtpError {
    fn from(e: ZapError) -> ZmtpError {
        ZmtpError::ZapReply(e)
    }
}

/// Why a CURVE handshake or message failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CurveError {
    /// A command too short for its own name (libzmq's basic command structure check).
    MalformedCommand,
    /// Not the command this step expects.
    UnexpectedCommand,
    /// `HELLO` of the wrong size or CurveZMQ version.
    MalformedHello,
    /// `INITIATE` shorter than 257 bytes.
    MalformedInitiate,
    /// `READY` shorter than 30 bytes.
    MalformedReady,
    /// `MESSAGE` too short to hold a box.
    MalformedMessage,
    /// A short nonce not larger than the peer's previous one (replay or reordering).
    InvalidSequence,
    /// The vouch does not name the client's transient key and the server's key.
    KeyExchange,
    /// A box or the cookie does not open (wrong key, tampering), or a key is zero or of low order.
    Cryptographic,
    /// The metadata of the server's `READY` is malformed or names an incompatible socket type.
    InvalidMetadata,
    /// A command arrived while the server waited for the authentication decision.
    OutOfSequence,
    /// The operating system gave no random bytes.
    Random,
}

impl CurveError {
    /// The `ZMQ_PROTOCOL_ERROR_*` code libzmq 4.3.5 reports with
    /// `ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL` (None: no protocol event).
    pub fn protocol_code(self) -> Option<u32> {
        Some(match self {
            CurveError::MalformedCommand => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED,
            CurveError::UnexpectedCommand => PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND,
            CurveError::MalformedHello => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO,
            CurveError::MalformedInitiate => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE,
            CurveError::MalformedReady => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY,
            CurveError::MalformedMessage => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE,
            CurveError::InvalidSequence => PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE,
            CurveError::KeyExchange => PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE,
            CurveError::Cryptographic => PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC,
            CurveError::InvalidMetadata => PROTOCOL_ERROR_ZMTP_INVALID_METADATA,
            CurveError::OutOfSequence => PROTOCOL_ERROR_ZMTP_UNSPECIFIED,
            CurveError::Random => return None,
        })
    }
}

impl fmt::Display for CurveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CurveError::MalformedCommand => "malformed command",
            CurveError::UnexpectedCommand => "unexpected command",
            CurveError::MalformedHello => "malformed HELLO",
            CurveError::MalformedInitiate => "malformed INITIATE",
            CurveError::MalformedReady => "malformed READY",
            CurveError::MalformedMessage => "malformed MESSAGE",
            CurveError::InvalidSequence => "nonce not increasing (replayed or reordered)",
            CurveError::KeyExchange => "vouch does not match the key exchange",
            CurveError::Cryptographic => "box does not open (wrong key or tampered) or bad key",
            CurveError::InvalidMetadata => "invalid metadata in READY",
            CurveError::OutOfSequence => "command while authentication is pending",
            CurveError::Random => "no randomness from the operating system",
        })
    }
}

impl std::error::Error for CurveError {}

impl From<CurveError> for ZmtpError {
    fn from(e: CurveError) -> ZmtpError {
        ZmtpError::Curve(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_reasons() {
        let mm = ZmtpError::MechanismMismatch {
            ours: Mechanism::Null,
            peer: [0; MECHANISM_LEN],
        };
        assert_eq!(mm.protocol_code(), Some(0x1100_0002));
        assert_eq!(
            ZmtpError::UnexpectedCommand.protocol_code(),
            Some(0x1000_0001)
        );
        assert_eq!(ZmtpError::MalformedError.protocol_code(), Some(0x1000_0015));
        assert_eq!(ZmtpError::HeartbeatTimeout.protocol_code(), None);
        assert_eq!(ZmtpError::HeartbeatTimeout.reason(), FailureReason::Timeout);
        assert_eq!(ZmtpError::BadSignature.reason(), FailureReason::Protocol);
        assert_eq!(
            ZmtpError::PeerError {
                reason: b"400".to_vec()
            }
            .auth_status(),
            Some(400)
        );
        assert_eq!(
            ZmtpError::PeerError {
                reason: b"200".to_vec()
            }
            .auth_status(),
            None
        );
        assert_eq!(
            ZmtpError::PeerError {
                reason: b"oops".to_vec()
            }
            .auth_status(),
            None
        );
        assert!(mm.to_string().contains("NULL"));
        assert_eq!(
            ZmtpError::FrameTooLarge { size: 9, max: 8 }.errno(),
            libc::EMSGSIZE
        );
    }
}

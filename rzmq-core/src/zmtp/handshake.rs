//! The security handshake after the greeting: the NULL mechanism (RFC 37 `READY`/`ERROR`), peer
//! validation (socket-type compatibility) and the peer's metadata (also used by PLAIN for its
//! `INITIATE` and `READY`).
//!
//! Mirrors libzmq 4.3.5's `null_mechanism_t` and `mechanism_t::parse_metadata`: property names are
//! compared case-sensitively; of duplicate properties the first is kept in the metadata (libzmq's
//! `std::map::insert`) while the last `Identity` is the routing id; every `Socket-Type` must be
//! compatible; a missing `Socket-Type` is accepted (libzmq does not require it).

use std::sync::Arc;

use super::command::{self, PROP_IDENTITY, PROP_SOCKET_TYPE};
use super::error::ZmtpError;
use super::greeting::PeerGreeting;
use super::socket_type::SocketType;
use crate::msg::Metadata;

/// The metadata property libzmq adds with the peer's address (`ZMQ_MSG_PROPERTY_PEER_ADDRESS`).
pub(super) const PROP_PEER_ADDRESS: &str = "Peer-Address";

/// What the handshake learnt about the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The peer's `Socket-Type`; `None` when its `READY` had none (libzmq accepts that).
    pub socket_type: Option<SocketType>,
    /// The peer's `Identity` property, raw (empty when absent); the ROUTER logic validates it.
    pub routing_id: Vec<u8>,
    /// All `READY` properties (`Socket-Type`, `Identity`, `X-...`) plus `Peer-Address` when the
    /// configuration named one; attached to every received message.
    pub metadata: Arc<Metadata>,
    /// The peer's ZMTP major version (3, or more for newer peers treated as 3.1).
    pub major_version: u8,
    /// The peer's ZMTP minor version (0: a ZMTP 3.0 peer).
    pub minor_version: u8,
}

impl Peer {
    /// True when the peer speaks ZMTP 3.0: subscriptions go to it as `0x01`/`0x00` messages.
    pub fn is_zmtp_3_0(&self) -> bool {
        self.major_version == 3 && self.minor_version == 0
    }
}

/// Processes one frame of the NULL handshake (the peer's first command after the greeting):
/// `READY` completes it; `ERROR` or anything else fails it.
pub(crate) fn null_command(
    flags_command: bool,
    body: &[u8],
    ours: SocketType,
    greeting: PeerGreeting,
    peer_address: Option<&str>,
) -> Result<Peer, ZmtpError> {
    if !flags_command {
        return Err(ZmtpError::UnexpectedCommand);
    }
    match command::parse(body) {
        Some((command::READY, data)) => process_ready(data, ours, greeting, peer_address),
        Some((command::ERROR, data)) => match command::parse_error(data) {
            Some(reason) => Err(ZmtpError::PeerError {
                reason: reason.to_vec(),
            }),
            None => Err(ZmtpError::MalformedError),
        },
        _ => Err(ZmtpError::UnexpectedCommand),
    }
}

/// Processes `READY` (or `INITIATE`) metadata: socket-type compatibility, routing id, properties.
pub(crate) fn process_ready(
    data: &[u8],
    ours: SocketType,
    greeting: PeerGreeting,
    peer_address: Option<&str>,
) -> Result<Peer, ZmtpError> {
    let props = command::parse_properties(data).ok_or(ZmtpError::MalformedReady)?;
    let mut md = Metadata::new();
    if let Some(addr) = peer_address.filter(|a| !a.is_empty()) {
        md.insert(PROP_PEER_ADDRESS, addr.as_bytes());
    }
    let mut socket_type = None;
    let mut routing_id = Vec::new();
    for (name, value) in props {
        if name == PROP_SOCKET_TYPE.as_bytes() {
            match SocketType::from_name(value) {
                Some(t) if ours.compatible_with(t) => socket_type = socket_type.or(Some(t)),
                _ => {
                    return Err(ZmtpError::IncompatibleSocketType {
                        ours,
                        peer: value.to_vec(),
                    })
                }
            }
        } else if name == PROP_IDENTITY.as_bytes() {
            routing_id = value.to_vec();
        }
        let name = String::from_utf8_lossy(name);
        if md.get(&name).is_none() {
            md.insert(&name, value);
        }
    }
    Ok(Peer {
        socket_type,
        routing_id,
        metadata: Arc::new(md),
        major_version: greeting.major,
        minor_version: greeting.minor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const G31: PeerGreeting = PeerGreeting {
        major: 3,
        minor: 1,
        as_server: false,
    };

    fn ready(props: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = command::body(command::READY, &[]);
        for (n, v) in props {
            b.push(n.len() as u8);
            b.extend_from_slice(n.as_bytes());
            b.extend_from_slice(&(v.len() as u32).to_be_bytes());
            b.extend_from_slice(v);
        }
        b
    }

    #[test]
    fn ready_surfaces_properties() {
        let b = ready(&[
            ("Socket-Type", b"DEALER"),
            ("Identity", b"\x00abc"),
            ("X-Hello", b"world"),
            ("X-Hello", b"again"),
            ("Peer-Address", b"spoofed"),
        ]);
        let p = null_command(true, &b, SocketType::Router, G31, Some("127.0.0.1")).unwrap();
        assert_eq!(p.socket_type, Some(SocketType::Dealer));
        assert_eq!(p.routing_id, b"\x00abc");
        assert_eq!(p.metadata.get("x-hello"), Some(&b"world"[..]));
        assert_eq!(p.metadata.get("Socket-Type"), Some(&b"DEALER"[..]));
        assert_eq!(p.metadata.get("Peer-Address"), Some(&b"127.0.0.1"[..]));
        assert!(!p.is_zmtp_3_0());
    }

    #[test]
    fn rejects_bad_commands() {
        let b = ready(&[("Socket-Type", b"PUB")]);
        assert_eq!(
            null_command(true, &b, SocketType::Push, G31, None),
            Err(ZmtpError::IncompatibleSocketType {
                ours: SocketType::Push,
                peer: b"PUB".to_vec()
            })
        );
        let b = ready(&[("Socket-Type", b"pull")]);
        assert!(matches!(
            null_command(true, &b, SocketType::Push, G31, None),
            Err(ZmtpError::IncompatibleSocketType { .. })
        ));
        let b = ready(&[("Socket-Type", b"PULL")]);
        assert_eq!(
            null_command(false, &b, SocketType::Push, G31, None),
            Err(ZmtpError::UnexpectedCommand)
        );
        let mut t = b.clone();
        t.push(3);
        assert_eq!(
            null_command(true, &t, SocketType::Push, G31, None),
            Err(ZmtpError::MalformedReady)
        );
        assert_eq!(
            null_command(true, b"\x04PING\x00\x00", SocketType::Push, G31, None),
            Err(ZmtpError::UnexpectedCommand)
        );
        assert_eq!(
            null_command(true, b"", SocketType::Push, G31, None),
            Err(ZmtpError::UnexpectedCommand)
        );
        let e = command::error_body(b"400");
        let err = null_command(true, &e, SocketType::Push, G31, None).unwrap_err();
        assert_eq!(err.auth_status(), Some(400));
        assert_eq!(
            null_command(true, b"\x05ERROR\x09x", SocketType::Push, G31, None),
            Err(ZmtpError::MalformedError)
        );
        let p = null_command(true, &ready(&[]), SocketType::Push, G31, None).unwrap();
        assert_eq!(p.socket_type, None);
    }
}

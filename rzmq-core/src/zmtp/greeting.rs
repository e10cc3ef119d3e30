//! The 64-byte ZMTP 3.x greeting: building ours and checking the peer's as its bytes arrive.
//!
//! Layout (RFC 23/37): signature `FF 00*8 7F` (10 bytes), major version, minor version, mechanism
//! (20 bytes, NUL-padded), as-server (1 byte), filler (31 zero bytes).

use super::error::ZmtpError;
pub(crate) use super::mechanism::{Mechanism, MECHANISM_LEN};

/// Length of a ZMTP 3.x greeting.
pub(crate) const GREETING_LEN: usize = 64;
/// Length of the signature that starts it.
pub(crate) const SIGNATURE_LEN: usize = 10;
/// The major version we speak.
pub(crate) const VERSION_MAJOR: u8 = 3;
/// The minor version we speak.
pub(crate) const VERSION_MINOR: u8 = 1;

const MAJOR_POS: usize = 10;
const MINOR_POS: usize = 11;
const MECHANISM_POS: usize = 12;
const AS_SERVER_POS: usize = 32;

/// What we learnt from the peer's greeting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerGreeting {
    /// Major version byte (3 or more).
    pub major: u8,
    /// Minor version byte.
    pub minor: u8,
    /// The peer's as-server flag (libzmq always sends 0).
    #[allow(dead_code)]
    pub as_server: bool,
}

impl PeerGreeting {
    /// True when the peer speaks ZMTP 3.0 exactly (libzmq treats 3.1 and anything newer as 3.1).
    pub(crate) fn is_v3_0(&self) -> bool {
        self.major == 3 && self.minor == 0
    }
}

/// Our greeting. libzmq 4.3.5 always sends the as-server byte as 0 (even for PLAIN and CURVE
/// servers), and so do we, to stay byte-identical; the role is kept for the mechanisms.
#[cfg(test)]
pub(crate) fn encode(mechanism: Mechanism) -> [u8; GREETING_LEN] {
    encode_with_routing_id(mechanism, 0)
}

/// Our greeting as libzmq writes it: the signature carries `routing_id_len + 1` as a big-endian
/// u64 in bytes 1..9 (a ZMTP 1.0 compatibility field), then 0x7F.
pub(crate) fn encode_with_routing_id(
    mechanism: Mechanism,
    routing_id_len: usize,
) -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xFF;
    g[1..9].copy_from_slice(&(routing_id_len as u64 + 1).to_be_bytes());
    g[9] = 0x7F;
    g[MAJOR_POS] = VERSION_MAJOR;
    g[MINOR_POS] = VERSION_MINOR;
    g[MECHANISM_POS..MECHANISM_POS + MECHANISM_LEN].copy_from_slice(&mechanism.wire_name());
    g
}

/// Checks the first bytes of the peer's greeting (`bytes` holds at most [`GREETING_LEN`] of them):
/// an error as soon as the prefix is invalid, `Ok(None)` while more are needed, the result when all
/// 64 have arrived. Accepts any split of the greeting.
pub(crate) fn check(bytes: &[u8], ours: Mechanism) -> Result<Option<PeerGreeting>, ZmtpError> {
    // libzmq's test for a versioned (ZMTP 2.0+) peer: 0xFF first, bit 0 of the 10th byte set.
    if bytes.first().is_some_and(|&b| b != 0xFF) {
        return Err(ZmtpError::BadSignature);
    }
    if bytes.get(9).is_some_and(|&b| b & 1 == 0) {
        return Err(ZmtpError::BadSignature);
    }
    if let Some(&major) = bytes.get(MAJOR_POS) {
        if major < VERSION_MAJOR {
            return Err(ZmtpError::UnsupportedVersion { major });
        }
    }
    if let Some(field) = bytes.get(MECHANISM_POS..MECHANISM_POS + MECHANISM_LEN) {
        if field != ours.wire_name() {
            let mut peer = [0u8; MECHANISM_LEN];
            peer.copy_from_slice(field);
            return Err(ZmtpError::MechanismMismatch { ours, peer });
        }
    }
    if bytes.len() < GREETING_LEN {
        return Ok(None);
    }
    Ok(Some(PeerGreeting {
        major: bytes[MAJOR_POS],
        minor: bytes[MINOR_POS],
        as_server: bytes[AS_SERVER_POS] != 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_greeting_is_libzmq_s() {
        let g = encode(Mechanism::Null);
        let mut want = vec![0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1];
        want.extend_from_slice(b"NULL");
        want.resize(64, 0);
        assert_eq!(&g[..], &want[..]);
        assert_eq!(&encode(Mechanism::Curve)[12..17], b"CURVE");
    }

    #[test]
    fn every_prefix_of_a_good_greeting_needs_more() {
        let g = encode(Mechanism::Null);
        for n in 0..GREETING_LEN {
            assert_eq!(check(&g[..n], Mechanism::Null), Ok(None), "prefix {n}");
        }
        let p = check(&g, Mechanism::Null).unwrap().unwrap();
        assert_eq!((p.major, p.minor, p.as_server), (3, 1, false));
    }

    #[test]
    fn rejects_early() {
        assert_eq!(
            check(&[0x01], Mechanism::Null),
            Err(ZmtpError::BadSignature)
        );
        let mut g = encode(Mechanism::Null);
        g[9] = 0x7E;
        assert_eq!(
            check(&g[..10], Mechanism::Null),
            Err(ZmtpError::BadSignature)
        );
        let mut g = encode(Mechanism::Null);
        g[10] = 1;
        assert_eq!(
            check(&g[..11], Mechanism::Null),
            Err(ZmtpError::UnsupportedVersion { major: 1 })
        );
        let g = encode(Mechanism::Plain);
        assert!(matches!(
            check(&g[..32], Mechanism::Null),
            Err(ZmtpError::MechanismMismatch {
                ours: Mechanism::Null,
                ..
            })
        ));
    }

    #[test]
    fn newer_versions_and_3_0_accepted() {
        let mut g = encode(Mechanism::Null);
        g[11] = 0;
        assert!(check(&g, Mechanism::Null).unwrap().unwrap().is_v3_0());
        g[10] = 4;
        assert!(!check(&g, Mechanism::Null).unwrap().unwrap().is_v3_0());
    }
}

//! What one end sends the other to connect their data paths ([`ConnectInfo`], the upgrade blob)
//! and its wire layout ([`crate::wire`]).

use super::error::DataPathError;
use crate::provider::Endpoint;
use crate::wire::{self, Layout, Reader, WireError, Writer};

/// What one end sends the other (in the upgrade command on the control channel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectInfo {
    /// The QP.
    pub endpoint: Endpoint,
    /// Receive ring address.
    pub ring_addr: u64,
    /// Its rkey.
    pub ring_rkey: u32,
    /// Its size.
    pub ring_size: u32,
    /// Credit mailbox address.
    pub mailbox_addr: u64,
    /// Its rkey.
    pub mailbox_rkey: u32,
    /// Receives posted for notifications.
    pub recv_depth: u32,
}

/// Bytes of connect information before its endpoint.
const CI_FIXED: usize = 5 + 8 + 4 + 4 + 8 + 4 + 4;

impl Layout for ConnectInfo {
    const NAME: &'static str = "RDMA connect info";

    fn encoded_len(&self) -> usize {
        CI_FIXED + self.endpoint.encoded_len()
    }

    /// The blob header ([`wire::MAGIC`], [`wire::VERSION`]), ring address, rkey and size, mailbox
    /// address and rkey, receives posted, then the [`Endpoint`].
    fn encode(&self, w: &mut Writer<'_>) {
        w.header();
        w.u64(self.ring_addr);
        w.u32(self.ring_rkey);
        w.u32(self.ring_size);
        w.u64(self.mailbox_addr);
        w.u32(self.mailbox_rkey);
        w.u32(self.recv_depth);
        self.endpoint.encode(w);
    }

    fn decode(r: &mut Reader<'_>) -> Result<ConnectInfo, WireError> {
        r.header()?;
        Ok(ConnectInfo {
            ring_addr: r.u64()?,
            ring_rkey: r.u32()?,
            ring_size: r.u32()?,
            mailbox_addr: r.u64()?,
            mailbox_rkey: r.u32()?,
            recv_depth: r.u32()?,
            endpoint: Endpoint::decode(r)?,
        })
    }
}

impl ConnectInfo {
    /// The upgrade blob (`RZMQ-UP-EP`'s payload; [`crate::wire`], docs/RDMA.md).
    pub fn to_bytes(&self) -> Vec<u8> {
        wire::to_vec(self)
    }

    /// Parses [`ConnectInfo::to_bytes`]' output, all of it; never panics. A blob of another
    /// wire version is [`WireError::Version`].
    pub fn from_bytes(b: &[u8]) -> Result<ConnectInfo, DataPathError> {
        Ok(wire::from_bytes(b)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Gid, Mtu, ProviderKind};

    #[test]
    fn connect_info_round_trip() {
        let ci = ConnectInfo {
            endpoint: Endpoint {
                provider: ProviderKind::Soft,
                qpn: 5,
                psn: 6,
                lid: 0,
                gid: Gid::default(),
                mtu: Mtu::M4096,
                extra: vec![1, 2, 3],
            },
            ring_addr: 0x1000,
            ring_rkey: 7,
            ring_size: 1 << 20,
            mailbox_addr: 0x2000,
            mailbox_rkey: 8,
            recv_depth: 64,
        };
        assert_eq!(ConnectInfo::from_bytes(&ci.to_bytes()).unwrap(), ci);
        assert!(matches!(
            ConnectInfo::from_bytes(&ci.to_bytes()[..20]),
            Err(DataPathError::Wire(WireError::Truncated { .. }))
        ));
    }

    /// A blob as rzmq-rdma of wire version 1 wrote it: the fields little-endian, the endpoint
    /// behind its own magic `RQ` and version, big-endian.
    fn version_1_blob() -> Vec<u8> {
        let mut v = b"RZRD".to_vec();
        v.push(1);
        v.extend_from_slice(&0x1000u64.to_le_bytes());
        v.extend_from_slice(&7u32.to_le_bytes());
        v.extend_from_slice(&(1u32 << 20).to_le_bytes());
        v.extend_from_slice(&0x2000u64.to_le_bytes());
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&64u32.to_le_bytes());
        v.extend_from_slice(b"RQ");
        v.extend_from_slice(&[1, 1]); // endpoint version 1, provider soft
        v.extend_from_slice(&5u32.to_be_bytes());
        v.extend_from_slice(&6u32.to_be_bytes());
        v.extend_from_slice(&0u16.to_be_bytes());
        v.extend_from_slice(&[0; 16]);
        v.push(Mtu::M4096 as u32 as u8);
        v.extend_from_slice(&3u16.to_be_bytes());
        v.extend_from_slice(&[1, 2, 3]);
        v
    }

    #[test]
    fn a_peer_of_another_wire_version_is_refused_not_misparsed() {
        let e = ConnectInfo::from_bytes(&version_1_blob()).unwrap_err();
        assert!(
            matches!(
                e,
                DataPathError::Wire(WireError::Version {
                    peer: 1,
                    ours: wire::VERSION,
                    ..
                })
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("version 1") && text.contains(&format!("speaks {}", wire::VERSION)),
            "{text}"
        );
        // A later version is refused alike.
        let mut later = version_1_blob();
        later[4] = wire::VERSION + 1;
        assert!(matches!(
            ConnectInfo::from_bytes(&later),
            Err(DataPathError::Wire(WireError::Version { .. }))
        ));
    }

    proptest::proptest! {
        #[test]
        fn connect_info_round_trips(endpoint in crate::provider::tests::endpoint(),
                                    f in proptest::prelude::any::<(u64, u32, u32, u64, u32, u32)>()) {
            let ci = ConnectInfo {
                endpoint,
                ring_addr: f.0,
                ring_rkey: f.1,
                ring_size: f.2,
                mailbox_addr: f.3,
                mailbox_rkey: f.4,
                recv_depth: f.5,
            };
            proptest::prop_assert_eq!(ConnectInfo::from_bytes(&ci.to_bytes()).ok(), Some(ci));
        }

        #[test]
        fn damaged_blobs_never_panic(endpoint in crate::provider::tests::endpoint(),
                                     hits in proptest::collection::vec(proptest::prelude::any::<(usize, u8)>(), 1..4),
                                     cut in 0usize..8) {
            let ci = ConnectInfo {
                endpoint,
                ring_addr: 1,
                ring_rkey: 2,
                ring_size: 3,
                mailbox_addr: 4,
                mailbox_rkey: 5,
                recv_depth: 6,
            };
            let mut b = ci.to_bytes();
            for (at, byte) in hits {
                let i = at % b.len();
                b[i] = byte;
            }
            b.truncate(b.len().saturating_sub(cut));
            // Whatever parses is exactly the blob its bytes encode.
            if let Ok(got) = ConnectInfo::from_bytes(&b) {
                proptest::prop_assert_eq!(got.to_bytes(), b);
            }
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120)) {
            let _ = ConnectInfo::from_bytes(&b);
        }
    }
}

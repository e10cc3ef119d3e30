//! What one end of an RC connection tells the other about its QP ([`Endpoint`]), with what
//! it carries (the provider, the GID, the path MTU), and the endpoint's wire layout.

use std::fmt;

use crate::wire::{self, Layout, Reader, WireError, Writer};

/// Which implementation of the verbs surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// The userspace RC NIC ([`soft`](super::soft)).
    Soft,
    /// libibverbs through rdma-mummy-sys (`ibverbs` feature).
    Ibverbs,
    /// QPs of one process whose wire costs nothing ([`loopback`](super::loopback), for measuring the engine).
    Loopback,
}

impl ProviderKind {
    /// The name used in `RZMQ_RDMA_PROVIDER` and in logs.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Soft => "soft",
            ProviderKind::Ibverbs => "ibverbs",
            ProviderKind::Loopback => "loopback",
        }
    }

    fn wire_id(self) -> u8 {
        match self {
            ProviderKind::Soft => 1,
            ProviderKind::Ibverbs => 2,
            ProviderKind::Loopback => 3,
        }
    }

    fn from_wire_id(id: u8) -> Option<ProviderKind> {
        match id {
            1 => Some(ProviderKind::Soft),
            2 => Some(ProviderKind::Ibverbs),
            3 => Some(ProviderKind::Loopback),
            _ => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Path MTU (`enum ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes.
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// From the ibverbs number.
    pub fn from_raw(v: u32) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::M256,
            2 => Mtu::M512,
            3 => Mtu::M1024,
            4 => Mtu::M2048,
            5 => Mtu::M4096,
            _ => return None,
        })
    }

    /// Bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// A 128-bit GID (`union ibv_gid`), raw bytes in network order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// True for the all-zero GID (an unset table entry).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

/// What one end of an RC connection tells the other: QP number, first PSN, addressing, and the
/// provider's connect information (soft: device id and wire address). Serialised with
/// [`Endpoint::to_bytes`] for the ZMTP/TCP control channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Provider that created the QP (a soft QP cannot talk to a hardware one).
    pub provider: ProviderKind,
    /// QP number.
    pub qpn: u32,
    /// First PSN the QP will send (24 bits).
    pub psn: u32,
    /// LID (InfiniBand; 0 on RoCE and soft).
    pub lid: u16,
    /// GID (RoCE, global IB; zero on soft).
    pub gid: Gid,
    /// The port's active MTU.
    pub mtu: Mtu,
    /// Provider-specific connect information.
    pub extra: Vec<u8>,
}

/// Bytes of an endpoint before its provider part.
const EP_FIXED: usize = 1 + 4 + 4 + 2 + 16 + 1 + 2;

impl Layout for Endpoint {
    const NAME: &'static str = "endpoint";

    fn encoded_len(&self) -> usize {
        EP_FIXED + self.extra.len().min(usize::from(u16::MAX))
    }

    /// provider, qpn, psn, lid, gid, mtu, then the provider's part after its `u16` length.
    fn encode(&self, w: &mut Writer<'_>) {
        w.u8(self.provider.wire_id());
        w.u32(self.qpn);
        w.u32(self.psn);
        w.u16(self.lid);
        w.put(&self.gid.0);
        w.u8(self.mtu as u32 as u8);
        w.bytes16(&self.extra);
    }

    fn decode(r: &mut Reader<'_>) -> std::result::Result<Endpoint, WireError> {
        let provider = ProviderKind::from_wire_id(r.u8()?).ok_or(r.invalid("provider"))?;
        let qpn = r.u32()?;
        let psn = r.u32()?;
        if psn > 0xFF_FFFF || qpn > 0xFF_FFFF {
            return Err(r.invalid("qpn/psn wider than 24 bits"));
        }
        let lid = r.u16()?;
        let gid = Gid(r.array()?);
        let mtu = Mtu::from_raw(u32::from(r.u8()?)).ok_or(r.invalid("mtu"))?;
        let extra = r.bytes16()?.to_vec();
        Ok(Endpoint {
            provider,
            qpn,
            psn,
            lid,
            gid,
            mtu,
            extra,
        })
    }
}

impl Endpoint {
    /// The endpoint's bytes alone ([`crate::wire`]; inside the upgrade blob it follows the
    /// blob's header and fields).
    pub fn to_bytes(&self) -> Vec<u8> {
        wire::to_vec(self)
    }

    /// Parses [`Endpoint::to_bytes`]' output, all of it; never panics on hostile input.
    pub fn from_bytes(b: &[u8]) -> std::result::Result<Endpoint, WireError> {
        wire::from_bytes(b)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn endpoint_round_trip() {
        let ep = Endpoint {
            provider: ProviderKind::Soft,
            qpn: 0x12345,
            psn: 0xabcdef,
            lid: 7,
            gid: Gid([3; 16]),
            mtu: Mtu::M4096,
            extra: b"tcp:127.0.0.1:5555".to_vec(),
        };
        let b = ep.to_bytes();
        assert_eq!(Endpoint::from_bytes(&b).unwrap(), ep);
        assert!(matches!(
            Endpoint::from_bytes(&b[..b.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(matches!(
            Endpoint::from_bytes(&bad),
            Err(WireError::Invalid {
                field: "provider",
                ..
            })
        ));
        // Little-endian, as every layout of the wire: qpn 0x12345 after the provider byte.
        assert_eq!(&b[1..5], &[0x45, 0x23, 0x01, 0x00]);
    }

    /// Any endpoint the wire can carry (24-bit QPN and PSN, `extra` of up to 80 bytes).
    pub(crate) fn endpoint() -> impl Strategy<Value = Endpoint> {
        (
            prop_oneof![
                Just(ProviderKind::Soft),
                Just(ProviderKind::Ibverbs),
                Just(ProviderKind::Loopback)
            ],
            0u32..=0xff_ffff,
            0u32..=0xff_ffff,
            any::<u16>(),
            any::<[u8; 16]>(),
            1u32..=5,
            proptest::collection::vec(any::<u8>(), 0..80),
        )
            .prop_map(|(provider, qpn, psn, lid, gid, mtu, extra)| Endpoint {
                provider,
                qpn,
                psn,
                lid,
                gid: Gid(gid),
                mtu: Mtu::from_raw(mtu).unwrap(),
                extra,
            })
    }

    proptest! {
        #[test]
        fn endpoint_round_trips(ep in endpoint()) {
            prop_assert_eq!(Endpoint::from_bytes(&ep.to_bytes()), Ok(ep));
        }

        #[test]
        fn endpoint_parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            // Whatever parses is exactly the endpoint its bytes encode.
            if let Ok(ep) = Endpoint::from_bytes(&b) {
                prop_assert_eq!(ep.to_bytes(), b);
            }
        }

        #[test]
        fn damaged_endpoints_never_panic(ep in endpoint(), at in any::<usize>(), byte: u8,
                                         cut in any::<usize>()) {
            let mut b = ep.to_bytes();
            let i = at % b.len();
            b[i] = byte;
            b.truncate(b.len() - cut % 4);
            if let Ok(e) = Endpoint::from_bytes(&b) {
                prop_assert_eq!(e.to_bytes(), b);
            }
        }
    }
}

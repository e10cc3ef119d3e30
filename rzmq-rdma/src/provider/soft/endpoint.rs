//! The soft part of an endpoint descriptor and GID addressing (`ibv_modify_qp` without a
//! descriptor).

use std::net::SocketAddr;

use super::cma::{CmaInfo, CMA_INFO_LEN};
use super::config::WireAddr;
use super::wire::PSN_MASK;
use crate::provider::*;
use crate::wire::{Reader, Writer};

/// The GID prefix of GID-addressed soft devices: `fe80::` then `RZ`, port, IPv4 address.
pub(super) const GID_PREFIX: [u8; 10] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, b'R', b'Z'];

pub(super) fn gid_of(a: &SocketAddr) -> Result<Gid> {
    let SocketAddr::V4(v4) = a else {
        return Err(Error::InvalidArgument(
            "GID addressing needs an IPv4 address",
        ));
    };
    let mut g = [0u8; 16];
    g[..10].copy_from_slice(&GID_PREFIX);
    g[10..12].copy_from_slice(&v4.port().to_be_bytes());
    g[12..16].copy_from_slice(&v4.ip().octets());
    Ok(Gid(g))
}

pub(super) fn gid_device_id(g: &Gid) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&g.0[8..16]);
    u64::from_be_bytes(b)
}

/// The soft endpoint of remote QP `qpn` (first PSN `psn`) on the GID-addressed device `gid`:
/// what `ibv_modify_qp(RTR)`'s `dest_qp_num`, `rq_psn` and `ah_attr.grh.dgid` say.
pub fn endpoint_from_gid(gid: &Gid, qpn: u32, psn: u32) -> Result<Endpoint> {
    if gid.0[..10] != GID_PREFIX {
        return Err(Error::Descriptor(
            "not the GID of a GID-addressed soft device",
        ));
    }
    let port = u16::from_be_bytes([gid.0[10], gid.0[11]]);
    let ip = std::net::Ipv4Addr::new(gid.0[12], gid.0[13], gid.0[14], gid.0[15]);
    let addr = WireAddr::Tcp(SocketAddr::from((ip, port)));
    Ok(Endpoint {
        provider: ProviderKind::Soft,
        qpn: qpn & PSN_MASK,
        psn: psn & PSN_MASK,
        lid: 0,
        gid: *gid,
        mtu: Mtu::M4096,
        extra: encode_extra(gid_device_id(gid), 0, &addr, None),
    })
}

/// The soft part of an endpoint ([`crate::wire`], little-endian): device id, QP secret, wire
/// address (text), and, after a NUL, the process's [`CmaInfo`] (pid, proof slot address) when it
/// offers direct reads.
pub(crate) fn encode_extra(
    dev: u64,
    secret: u64,
    addr: &WireAddr,
    cma: Option<CmaInfo>,
) -> Vec<u8> {
    let addr = addr.to_string();
    let mut v = vec![0u8; 16 + addr.len() + cma.map_or(0, |_| 1 + CMA_INFO_LEN)];
    let mut w = Writer::new(&mut v);
    w.u64(dev);
    w.u64(secret);
    w.put(addr.as_bytes());
    if let Some(c) = cma {
        w.u8(0);
        w.u32(c.pid);
        w.u64(c.slot_addr);
    }
    v
}

pub(crate) fn decode_extra(b: &[u8]) -> Result<(u64, u64, WireAddr, Option<CmaInfo>)> {
    let mut r = Reader::new("soft connect info", b);
    let dev = r.u64()?;
    let secret = r.u64()?;
    let rest = r.rest();
    if rest.is_empty() {
        return Err(Error::Descriptor("soft connect info: no wire address"));
    }
    let (addr, cma) = match rest.iter().position(|&c| c == 0) {
        None => (rest, None),
        Some(i) => {
            let mut r = Reader::new("soft connect info: direct-read part", &rest[i + 1..]);
            let info = CmaInfo {
                pid: r.u32()?,
                slot_addr: r.u64()?,
            };
            r.finish()?;
            (&rest[..i], Some(info))
        }
    };
    let s = std::str::from_utf8(addr).map_err(|_| Error::Descriptor("soft address"))?;
    Ok((
        dev,
        secret,
        WireAddr::parse(s).map_err(Error::InvalidArgument)?,
        cma,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::cma::cma_proven;
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn connect_info_carries_the_direct_read_part_only_when_offered() {
        let addr = WireAddr::parse("tcp:127.0.0.1:4000").unwrap();
        let info = CmaInfo {
            pid: 4242,
            slot_addr: 0x7fff_0000_1000,
        };
        let (dev, secret, a, c) = decode_extra(&encode_extra(7, 9, &addr, Some(info))).unwrap();
        assert_eq!((dev, secret, a, c), (7, 9, addr.clone(), Some(info)));
        let (_, _, a, c) = decode_extra(&encode_extra(7, 9, &addr, None)).unwrap();
        assert_eq!((a, c), (addr.clone(), None));
        // A truncated direct-read part is refused, not half-read.
        let mut b = encode_extra(7, 9, &addr, Some(info));
        b.pop();
        assert!(decode_extra(&b).is_err());
        // The proof holds only where the named process stores our secret.
        let slot = AtomicU64::new(77);
        let here = CmaInfo {
            pid: std::process::id(),
            slot_addr: slot.as_ptr() as u64,
        };
        assert!(cma_proven(&here, 77));
        assert!(!cma_proven(&here, 78), "another QP's secret");
        assert!(!cma_proven(&here, 0), "no secret, no proof");
        assert!(
            !cma_proven(
                &CmaInfo {
                    slot_addr: 8,
                    ..here
                },
                77
            ),
            "unmapped"
        );
    }

    proptest::proptest! {
        #[test]
        fn extra_round_trips(dev: u64, secret: u64, ip: [u8; 4], port: u16,
                             cma in proptest::option::of((proptest::prelude::any::<u32>(), proptest::prelude::any::<u64>()))) {
            let addr = WireAddr::Tcp(SocketAddr::from((ip, port)));
            let cma = cma.map(|(pid, slot_addr)| CmaInfo { pid, slot_addr });
            let got = decode_extra(&encode_extra(dev, secret, &addr, cma)).unwrap();
            proptest::prop_assert_eq!(got, (dev, secret, addr, cma));
        }

        #[test]
        fn extra_decodes_any_bytes_without_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            // Values, not bytes, round-trip: an address may be spelled more than one way.
            if let Ok((dev, secret, addr, cma)) = decode_extra(&b) {
                let again = decode_extra(&encode_extra(dev, secret, &addr, cma)).unwrap();
                proptest::prop_assert_eq!(again, (dev, secret, addr, cma));
            }
        }
    }
}

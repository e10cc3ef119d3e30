//! The soft part of an endpoint descriptor and GID addressing (`ibv_modify_qp` without a
//! descriptor).

use std::net::SocketAddr;

use super::cma::{CmaInfo, CMA_INFO_LEN};
use super::config::WireAddr;
use super::wire::PSN_MASK;
use crate::provider::*;

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

/// The soft part of an endpoint: device id, QP secret, wire address, and, after a NUL, the
/// process's [`CmaInfo`] when it offers direct reads.
pub(crate) fn encode_extra(
    dev: u64,
    secret: u64,
    addr: &WireAddr,
    cma: Option<CmaInfo>,
) -> Vec<u8> {
    let mut v = dev.to_be_bytes().to_vec();
    v.extend_from_slice(&secret.to_be_bytes());
    v.extend_from_slice(addr.to_string().as_bytes());
    if let Some(c) = cma {
        v.push(0);
        v.extend_from_slice(&c.pid.to_be_bytes());
        v.extend_from_slice(&c.slot_addr.to_be_bytes());
    }
    v
}

pub(crate) fn decode_extra(b: &[u8]) -> Result<(u64, u64, WireAddr, Option<CmaInfo>)> {
    if b.len() < 17 {
        return Err(Error::Descriptor("soft connect info too short"));
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&b[..8]);
    let mut secret = [0u8; 8];
    secret.copy_from_slice(&b[8..16]);
    let rest = &b[16..];
    let (addr, cma) = match rest.iter().position(|&c| c == 0) {
        None => (rest, None),
        Some(i) => {
            let c = &rest[i + 1..];
            if c.len() != CMA_INFO_LEN {
                return Err(Error::Descriptor("soft connect info: bad direct-read part"));
            }
            let mut slot = [0u8; 8];
            slot.copy_from_slice(&c[4..12]);
            let info = CmaInfo {
                pid: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                slot_addr: u64::from_be_bytes(slot),
            };
            (&rest[..i], Some(info))
        }
    };
    let s = std::str::from_utf8(addr).map_err(|_| Error::Descriptor("soft address"))?;
    Ok((
        u64::from_be_bytes(id),
        u64::from_be_bytes(secret),
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
}

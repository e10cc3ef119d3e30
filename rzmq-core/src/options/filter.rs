//! `ZMQ_TCP_ACCEPT_FILTER` entries: an address and a prefix length, parsed and matched as
//! libzmq's `tcp_address_mask_t`.

use std::net::SocketAddr;

use crate::endpoint::{resolve_ip, ResolveOpts};
use crate::error::{Error, Result};

/// A `ZMQ_TCP_ACCEPT_FILTER` entry: a network address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpAcceptFilter {
    /// The network address, resolved with the socket's `ZMQ_IPV6` at set time (so IPv4 becomes
    /// a mapped IPv6 address when it was set).
    pub addr: std::net::IpAddr,
    /// The prefix length in bits (0 matches any address of the family).
    pub prefix: u8,
}

impl TcpAcceptFilter {
    /// Parses `"addr"` or `"addr/bits"` as libzmq's `tcp_address_mask_t::resolve` (numeric only).
    pub fn parse(text: &str, ipv6: bool) -> Result<TcpAcceptFilter> {
        let (addr_str, mask_str) = match text.rfind('/') {
            Some(p) => {
                let mask = &text[p + 1..];
                if mask.is_empty() {
                    return Err(Error::Inval);
                }
                (&text[..p], Some(mask))
            }
            None => (text, None),
        };
        let opts = ResolveOpts {
            bindable: false,
            allow_dns: false,
            allow_nic_name: false,
            ipv6,
            expect_port: false,
        };
        let addr = resolve_ip(addr_str, &opts)?.ip();
        let full: i64 = if addr.is_ipv6() { 128 } else { 32 };
        let prefix = match mask_str {
            None => full,
            Some("0") => 0,
            Some(m) => {
                let mask = crate::endpoint::c_strtol(m);
                if mask < 1 || mask > full {
                    return Err(Error::Inval);
                }
                mask
            }
        };
        Ok(TcpAcceptFilter {
            addr,
            prefix: prefix as u8,
        })
    }

    /// Whether a peer address passes this filter (`tcp_address_mask_t::match_address`).
    pub fn matches(&self, peer: &SocketAddr) -> bool {
        let (ours, theirs): (Vec<u8>, Vec<u8>) = match (self.addr, peer.ip()) {
            (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
                (a.octets().to_vec(), b.octets().to_vec())
            }
            (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => {
                (a.octets().to_vec(), b.octets().to_vec())
            }
            _ => return false,
        };
        let bits = usize::from(self.prefix).min(ours.len() * 8);
        let full = bits / 8;
        if ours[..full] != theirs[..full] {
            return false;
        }
        let rem = bits % 8;
        if rem != 0 {
            let m = 0xffu8 << (8 - rem);
            if ours[full] & m != theirs[full] & m {
                return false;
            }
        }
        true
    }
}

//! `udp://` endpoints as libzmq 4.3.5 reads them (`udp_address.cpp`) and the socket a UDP
//! endpoint opens (`udp_engine_t::plug`): unicast `udp://host:port`, a bind address
//! `udp://*:port`, multicast `udp://group:port` or `udp://iface;group:port`, with
//! `ZMQ_MULTICAST_LOOP` and `ZMQ_MULTICAST_HOPS` applied to a multicast sender.
//!
//! UDP has no handshake and no RDMA upgrade: its datagrams are the data path.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use socket2::{Domain, Protocol, Socket, Type};

use crate::error::{Error, Result};
use crate::options::Options;

/// Where the interface part of `iface;group:port` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Iface {
    /// `*`, or no interface part: the kernel's choice.
    Any,
    /// A local IPv4 address.
    Addr(Ipv4Addr),
    /// A network interface by name (its index).
    Index(u32),
}

/// A resolved `udp://` address (libzmq `udp_address_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UdpAddress {
    /// Where a sender sends (the multicast group, or the unicast peer).
    pub target: SocketAddr,
    /// What a receiver binds.
    pub bind: SocketAddr,
    /// The target is a multicast group.
    pub multicast: bool,
    /// The interface of a multicast group.
    pub iface: Iface,
}

/// Splits `host:port` (`[v6]:port` too); `*` as the port is 0.
fn split_host_port(s: &str) -> Result<(&str, u16)> {
    let (host, port) = s.rsplit_once(':').ok_or(Error::Inval)?;
    let port = match port {
        "*" | "0" => 0,
        p => p.parse().map_err(|_| Error::Inval)?,
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(Error::Inval);
    }
    Ok((host, port))
}

/// The interface part of `iface;group:port`: `*`, an IP literal (never multicast) or an
/// interface name (`ENODEV` when there is none of that name).
fn resolve_iface(name: &str, ipv6: bool) -> Result<(IpAddr, Iface)> {
    let any = if ipv6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    if name == "*" {
        return Ok((any, Iface::Any));
    }
    if let Ok(ip) = name.parse::<IpAddr>() {
        if ip.is_multicast() {
            return Err(Error::Inval);
        }
        return Ok(match ip {
            IpAddr::V4(v4) => (ip, Iface::Addr(v4)),
            IpAddr::V6(_) => (ip, Iface::Any),
        });
    }
    let cname = std::ffi::CString::new(name).map_err(|_| Error::Inval)?;
    // SAFETY: cname is a valid NUL-terminated string for the call's duration.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(Error::NoDev);
    }
    Ok((any, Iface::Index(index)))
}

/// Resolves a host (DNS allowed, as libzmq) to an address of the family `ipv6` allows.
fn resolve_host(host: &str, port: u16, bind: bool, ipv6: bool) -> Result<SocketAddr> {
    if bind && host == "*" {
        let ip = if ipv6 {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        return Ok(SocketAddr::new(ip, port));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        if ip.is_ipv6() && !ipv6 {
            return Err(Error::Inval);
        }
        return Ok(SocketAddr::new(ip, port));
    }
    let addrs = (host, port).to_socket_addrs().map_err(|_| Error::Inval)?;
    let mut fallback = None;
    for a in addrs {
        if a.is_ipv4() {
            return Ok(a);
        }
        if ipv6 && fallback.is_none() {
            fallback = Some(a);
        }
    }
    fallback.ok_or(Error::Inval)
}

/// libzmq `udp_address_t::resolve`: `addr` is what follows `udp://`; `bind` for a receiving
/// (bound) endpoint. An interface part needs a multicast group (`EINVAL`); a group without an
/// interface is joined on the kernel's default one.
pub(crate) fn resolve(addr: &str, bind: bool, ipv6: bool) -> Result<UdpAddress> {
    let (iface, rest) = match addr.rsplit_once(';') {
        Some((src, rest)) => (Some(resolve_iface(src, ipv6)?), rest),
        None => (None, addr),
    };
    let (host, port) = split_host_port(rest)?;
    let target = resolve_host(host, port, bind, ipv6)?;
    let multicast = target.ip().is_multicast();
    let any = |t: &SocketAddr| match t {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), t.port()),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), t.port()),
    };
    let (bind_addr, iface) = match iface {
        Some((ip, iface)) => {
            if !multicast {
                return Err(Error::Inval);
            }
            (SocketAddr::new(ip, port), iface)
        }
        None if multicast || !bind => (any(&target), Iface::Any),
        None => (target, Iface::Any),
    };
    if bind_addr.is_ipv4() != target.is_ipv4() {
        return Err(Error::Inval);
    }
    Ok(UdpAddress {
        target,
        bind: bind_addr,
        multicast,
        iface,
    })
}

/// Opens the non-blocking socket of a UDP endpoint as libzmq's `udp_engine_t::plug` does: a
/// sender to a group gets the loop and hop options and the group's interface; a receiver
/// reuses its address, and for a group binds the wildcard address on the port (reusing the
/// port too) and joins the group.
pub(crate) fn open(
    addr: &UdpAddress,
    send: bool,
    recv: bool,
    o: &Options,
) -> Result<std::net::UdpSocket> {
    let domain = if addr.target.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(domain, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    if !o.bindtodevice.is_empty() {
        s.bind_device(Some(&o.bindtodevice))?;
    }
    if o.sndbuf >= 0 {
        s.set_send_buffer_size(o.sndbuf as usize)?;
    }
    if o.rcvbuf >= 0 {
        s.set_recv_buffer_size(o.rcvbuf as usize)?;
    }
    if send && addr.multicast {
        if addr.target.is_ipv4() {
            s.set_multicast_loop_v4(o.multicast_loop)?;
            if o.multicast_hops > 0 {
                s.set_multicast_ttl_v4(o.multicast_hops as u32)?;
            }
            if let Iface::Addr(a) = addr.iface {
                s.set_multicast_if_v4(&a)?;
            }
        } else {
            s.set_multicast_loop_v6(o.multicast_loop)?;
            if o.multicast_hops > 0 {
                s.set_multicast_hops_v6(o.multicast_hops as u32)?;
            }
            if let Iface::Index(i) = addr.iface {
                s.set_multicast_if_v6(i)?;
            }
        }
    }
    if recv {
        s.set_reuse_address(true)?;
        let bind = if addr.multicast {
            s.set_reuse_port(true)?;
            let ip = match addr.target {
                SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            };
            SocketAddr::new(ip, addr.bind.port())
        } else {
            addr.bind
        };
        s.bind(&bind.into())?;
        if addr.multicast {
            join(&s, addr)?;
        }
    }
    Ok(s.into())
}

/// Joins the multicast group of `addr` on its interface.
fn join(s: &Socket, addr: &UdpAddress) -> Result<()> {
    match (addr.target.ip(), addr.iface) {
        (IpAddr::V4(g), Iface::Index(i)) => {
            s.join_multicast_v4_n(&g, &socket2::InterfaceIndexOrAddress::Index(i))?
        }
        (IpAddr::V4(g), Iface::Addr(a)) => s.join_multicast_v4(&g, &a)?,
        (IpAddr::V4(g), Iface::Any) => s.join_multicast_v4(&g, &Ipv4Addr::UNSPECIFIED)?,
        (IpAddr::V6(g), Iface::Index(i)) => s.join_multicast_v6(&g, i)?,
        // No interface named: index 0, the kernel's choice (libzmq's default too).
        (IpAddr::V6(g), _) => s.join_multicast_v6(&g, 0)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn unicast_bind_and_connect() {
        let b = resolve("127.0.0.1:5556", true, false).unwrap();
        assert_eq!((b.bind, b.multicast), (sa("127.0.0.1:5556"), false));
        let b = resolve("*:5556", true, false).unwrap();
        assert_eq!(b.bind, sa("0.0.0.0:5556"));
        let c = resolve("127.0.0.1:5556", false, false).unwrap();
        assert_eq!(
            (c.target, c.bind),
            (sa("127.0.0.1:5556"), sa("0.0.0.0:5556"))
        );
        let c = resolve("[::1]:7", false, true).unwrap();
        assert_eq!(c.target, sa("[::1]:7"));
    }

    #[test]
    fn multicast_forms() {
        let m = resolve("239.0.0.1:5555", true, false).unwrap();
        assert!(m.multicast);
        assert_eq!((m.bind, m.iface), (sa("0.0.0.0:5555"), Iface::Any));
        let m = resolve("127.0.0.1;239.0.0.1:5555", false, false).unwrap();
        assert_eq!(m.iface, Iface::Addr(Ipv4Addr::LOCALHOST));
        assert_eq!(m.bind, sa("127.0.0.1:5555"));
        let m = resolve("lo;239.0.0.1:5555", true, false).unwrap();
        assert!(matches!(m.iface, Iface::Index(i) if i > 0));
    }

    #[test]
    fn bad_addresses_are_refused_as_libzmq_does() {
        // An interface part needs a group; a group is no source.
        assert_eq!(
            resolve("127.0.0.1;127.0.0.2:5", true, false),
            Err(Error::Inval)
        );
        assert_eq!(
            resolve("239.0.0.2;239.0.0.1:5", true, false),
            Err(Error::Inval)
        );
        assert_eq!(
            resolve("no-such-nic0;239.0.0.1:5", true, false),
            Err(Error::NoDev)
        );
        assert_eq!(resolve("127.0.0.1", true, false), Err(Error::Inval));
        assert_eq!(resolve("127.0.0.1:x", true, false), Err(Error::Inval));
        assert_eq!(resolve(":5", false, false), Err(Error::Inval));
        // IPv6 needs ZMQ_IPV6; an IPv6 group without an interface takes the kernel's.
        assert_eq!(resolve("[::1]:7", false, false), Err(Error::Inval));
        let m = resolve("[ff02::1]:7", true, true).unwrap();
        assert!(m.multicast && m.iface == Iface::Any);
    }
}

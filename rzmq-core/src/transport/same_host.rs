//! Congestion control on same-host tcp connections (`tune_same_host`): reno where both ends
//! are on this host, so loopback traffic is not paced.

use std::io;
use std::net::SocketAddr;

/// The congestion control put on tcp connections whose two ends are on this host, read once
/// from `RZMQ_TCP_LOCAL_CC` (default `reno`; `off`, `default` or empty keeps the host's own).
///
/// Traffic between two addresses of one host goes over the loopback device, where there is no
/// congestion to control. A pacing algorithm such as BBR (a common host default) still paces
/// it: a write of more than 16 segments waits, and a stream of large messages moves 1.3-1.5x
/// slower than under reno (docs/BENCHMARKS.md). Reno is built into every Linux kernel and
/// always allowed to unprivileged processes; only connections that stay on this host change.
/// This is the process default (the soft provider's wires use it); a socket's connections use
/// its context's `ZMQ_RZMQ_TCP_LOCAL_CC` ([`crate::options::RzmqOptions::tcp_local_cc`]).
fn local_congestion_control() -> Option<&'static [u8]> {
    crate::env::core().tcp_local_cc.as_deref()
}

/// Whether the same-host congestion control `cc` paces its sends (BBR and its variants, when
/// `RZMQ_TCP_LOCAL_CC` names one): such connections keep writing large bodies in two steps.
pub(crate) fn local_congestion_control_paces(cc: Option<&[u8]>) -> bool {
    cc.is_some_and(|cc| cc.starts_with(b"bbr"))
}

/// Whether a tcp connection between `local` and `peer` stays on this host (loopback, or one of
/// the host's own addresses on both ends).
pub(crate) fn is_same_host(local: &SocketAddr, peer: &SocketAddr) -> bool {
    let (l, p) = (canonical_ip(local.ip()), canonical_ip(peer.ip()));
    p.is_loopback() || l == p
}

fn canonical_ip(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(std::net::IpAddr::V4)
            .unwrap_or(std::net::IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Puts the same-host congestion control (`RZMQ_TCP_LOCAL_CC`, default reno) on
/// a connected tcp socket whose two ends are on this host; returns whether it changed it. A
/// refusal (an algorithm the host does not allow) leaves the host's default in place.
pub fn tune_same_host<S: std::os::fd::AsFd>(sock: &S) -> bool {
    match local_congestion_control() {
        Some(cc) => tune_same_host_with(sock, cc),
        None => false,
    }
}

pub(crate) fn tune_same_host_with<S: std::os::fd::AsFd>(sock: &S, cc: &[u8]) -> bool {
    let s = socket2::SockRef::from(sock);
    match (s.local_addr(), s.peer_addr()) {
        (Ok(l), Ok(p)) => match (l.as_socket(), p.as_socket()) {
            (Some(l), Some(p)) if is_same_host(&l, &p) => s.set_tcp_congestion(cc).is_ok(),
            _ => false,
        },
        _ => false,
    }
}

/// The congestion control algorithm of the tcp socket `fd` (`TCP_CONGESTION`), for tests and
/// logs; `fd` must stay open for the call.
pub fn congestion_control(fd: std::os::fd::RawFd) -> io::Result<String> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: the caller keeps `fd` open for the call; the borrow ends with it.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let name = socket2::SockRef::from(&fd).tcp_congestion()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn same_host_is_loopback_or_one_address_on_both_ends() {
        assert!(is_same_host(&addr("127.0.0.1:1"), &addr("127.0.0.1:2")));
        assert!(is_same_host(&addr("127.0.0.5:1"), &addr("127.0.0.9:2")));
        assert!(is_same_host(&addr("[::1]:1"), &addr("[::1]:2")));
        assert!(is_same_host(&addr("10.0.0.1:1"), &addr("10.0.0.1:2")));
        // A dual-stack listener sees an IPv4 peer as v4-mapped.
        assert!(is_same_host(
            &addr("[::ffff:10.0.0.1]:1"),
            &addr("10.0.0.1:2")
        ));
        assert!(is_same_host(
            &addr("[::ffff:127.0.0.1]:1"),
            &addr("[::ffff:127.0.0.1]:2")
        ));
        assert!(!is_same_host(&addr("10.0.0.1:1"), &addr("10.0.0.2:2")));
        assert!(!is_same_host(&addr("[fe80::1]:1"), &addr("[fe80::2]:2")));
    }

    #[test]
    fn a_loopback_connection_gets_the_local_congestion_control() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        // reno is built into every kernel and always allowed.
        assert!(tune_same_host_with(&c, b"reno"));
        assert!(tune_same_host_with(&a, b"reno"));
        assert_eq!(congestion_control(c.as_raw_fd()).unwrap(), "reno");
        assert_eq!(congestion_control(a.as_raw_fd()).unwrap(), "reno");
        // An algorithm the kernel does not have is refused and changes nothing.
        assert!(!tune_same_host_with(&c, b"no-such-cc"));
        assert_eq!(congestion_control(c.as_raw_fd()).unwrap(), "reno");
    }

    #[test]
    fn an_unconnected_socket_is_left_alone() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let before = congestion_control(l.as_raw_fd()).unwrap();
        // A listener has no peer: not a same-host connection.
        assert!(!tune_same_host_with(&l, b"reno"));
        assert_eq!(congestion_control(l.as_raw_fd()).unwrap(), before);
        assert!(congestion_control(-1).is_err());
    }
}

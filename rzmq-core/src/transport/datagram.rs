//! The UDP datagram forms of libzmq 4.3.5 (`udp_engine.cpp`), sans I/O: what RADIO/DISH put in
//! one datagram (one byte of group length, the group, the body) and the `"ip:port"` address
//! frame DGRAM sockets exchange. Peer input never panics here: a datagram that does not parse is
//! reported as [`DatagramError`] and the caller drops it.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// The largest datagram libzmq reads or writes (`MAX_UDP_MSG`); larger ones are dropped.
pub(crate) const MAX_DATAGRAM: usize = 8192;

/// The longest group name (`ZMQ_GROUP_MAX_LENGTH`).
pub(crate) const GROUP_MAX: usize = 255;

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatagramError {
    /// Empty: not even the group length byte.
    Empty,
    /// The group length byte says more than the datagram holds.
    GroupOverrun,
    /// Over [`MAX_DATAGRAM`] bytes (either way).
    TooLarge,
    /// A group of more than [`GROUP_MAX`] bytes.
    GroupTooLong,
    /// A DGRAM address frame that is not `a.b.c.d:port` with a non-zero port.
    BadAddress,
}

/// Splits a RADIO datagram into (group, body).
pub(crate) fn decode_grouped(dgram: &[u8]) -> Result<(&[u8], &[u8]), DatagramError> {
    if dgram.len() > MAX_DATAGRAM {
        return Err(DatagramError::TooLarge);
    }
    let (&len, rest) = dgram.split_first().ok_or(DatagramError::Empty)?;
    let len = usize::from(len);
    if rest.len() < len {
        return Err(DatagramError::GroupOverrun);
    }
    Ok(rest.split_at(len))
}

/// Writes the datagram of `group` and `body` into `out` (cleared first).
pub(crate) fn encode_grouped(
    group: &[u8],
    body: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), DatagramError> {
    if group.len() > GROUP_MAX {
        return Err(DatagramError::GroupTooLong);
    }
    if 1 + group.len() + body.len() > MAX_DATAGRAM {
        return Err(DatagramError::TooLarge);
    }
    out.clear();
    out.push(group.len() as u8);
    out.extend_from_slice(group);
    out.extend_from_slice(body);
    Ok(())
}

/// The address frame a DGRAM socket receives before a datagram's body: `"a.b.c.d:port"` and a
/// terminating NUL, as libzmq's `sockaddr_to_msg` writes it (IPv4 only, as libzmq).
pub(crate) fn address_frame(from: SocketAddr) -> Option<Vec<u8>> {
    let SocketAddr::V4(v4) = from else {
        return None;
    };
    let mut s = format!("{}:{}", v4.ip(), v4.port()).into_bytes();
    s.push(0);
    Some(s)
}

/// Parses the address frame of an outgoing DGRAM message as libzmq's `resolve_raw_address`
/// does: the last `:` splits a numeric IPv4 address from a port that must not be 0; a
/// terminating NUL (as received) is allowed.
pub(crate) fn parse_address(frame: &[u8]) -> Result<SocketAddr, DatagramError> {
    let frame = frame.strip_suffix(&[0]).unwrap_or(frame);
    let text = std::str::from_utf8(frame).map_err(|_| DatagramError::BadAddress)?;
    let (host, port) = text.rsplit_once(':').ok_or(DatagramError::BadAddress)?;
    let port: u16 = port.parse().map_err(|_| DatagramError::BadAddress)?;
    let ip: Ipv4Addr = host.parse().map_err(|_| DatagramError::BadAddress)?;
    if port == 0 {
        return Err(DatagramError::BadAddress);
    }
    Ok(SocketAddr::V4(SocketAddrV4::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grouped_round_trip() {
        let mut out = Vec::new();
        encode_grouped(b"weather", b"sunny", &mut out).unwrap();
        assert_eq!(out, b"\x07weathersunny");
        assert_eq!(decode_grouped(&out), Ok((&b"weather"[..], &b"sunny"[..])));
        encode_grouped(b"", b"", &mut out).unwrap();
        assert_eq!(out, b"\x00");
        assert_eq!(decode_grouped(&out), Ok((&b""[..], &b""[..])));
    }

    #[test]
    fn malformed_datagrams_are_refused() {
        assert_eq!(decode_grouped(b""), Err(DatagramError::Empty));
        assert_eq!(decode_grouped(b"\x05abc"), Err(DatagramError::GroupOverrun));
        assert_eq!(decode_grouped(b"\xff"), Err(DatagramError::GroupOverrun));
        let big = vec![0u8; MAX_DATAGRAM + 1];
        assert_eq!(decode_grouped(&big), Err(DatagramError::TooLarge));
        // A group that fills the datagram exactly leaves an empty body.
        assert_eq!(decode_grouped(b"\x03abc"), Ok((&b"abc"[..], &b""[..])));
    }

    #[test]
    fn oversize_output_is_refused() {
        let mut out = Vec::new();
        let long = vec![b'g'; GROUP_MAX + 1];
        assert_eq!(
            encode_grouped(&long, b"", &mut out),
            Err(DatagramError::GroupTooLong)
        );
        let body = vec![0u8; MAX_DATAGRAM];
        assert_eq!(
            encode_grouped(b"g", &body, &mut out),
            Err(DatagramError::TooLarge)
        );
        assert!(encode_grouped(b"g", &body[..MAX_DATAGRAM - 2], &mut out).is_ok());
        assert_eq!(out.len(), MAX_DATAGRAM);
    }

    #[test]
    fn addresses_as_libzmq_writes_and_reads_them() {
        let a: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        assert_eq!(address_frame(a).unwrap(), b"127.0.0.1:5555\0");
        assert_eq!(address_frame("[::1]:5".parse().unwrap()), None);
        assert_eq!(parse_address(b"127.0.0.1:5555\0"), Ok(a));
        assert_eq!(parse_address(b"127.0.0.1:5555"), Ok(a));
        for bad in [
            &b"127.0.0.1"[..],
            b"127.0.0.1:0",
            b"127.0.0.1:x",
            b"localhost:5555",
            b":5555",
            b"127.0.0.1:70000",
            b"\xff:1",
        ] {
            assert_eq!(parse_address(bad), Err(DatagramError::BadAddress), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_refuse(d in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok((g, b)) = decode_grouped(&d) {
                prop_assert_eq!(g.len(), usize::from(d[0]));
                prop_assert_eq!(1 + g.len() + b.len(), d.len());
                let mut out = Vec::new();
                encode_grouped(g, b, &mut out).unwrap();
                prop_assert_eq!(&out, &d);
            }
            let _ = parse_address(&d);
        }
    }
}

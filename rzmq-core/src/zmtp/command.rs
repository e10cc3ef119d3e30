//! ZMTP command bodies: building and parsing `READY`, `ERROR`, `PING`, `PONG`, `SUBSCRIBE`,
//! `CANCEL` (RFC 37), and the draft RADIO/DISH `JOIN` and `LEAVE` (libzmq 4.3.5's form). A command frame's body is a 1-byte name length, the name, then data.
//!
//! Nothing here knows about frames or connection state; parsers never panic on peer input.

use super::socket_type::SocketType;

/// `READY` command name.
pub(crate) const READY: &[u8] = b"READY";
/// `ERROR` command name.
pub(crate) const ERROR: &[u8] = b"ERROR";
/// `PING` command name.
pub(crate) const PING: &[u8] = b"PING";
/// `SUBSCRIBE` command name.
pub(crate) const SUBSCRIBE: &[u8] = b"SUBSCRIBE";
/// `CANCEL` command name.
pub(crate) const CANCEL: &[u8] = b"CANCEL";
/// `JOIN` command name (a DISH joins a group).
pub(crate) const JOIN: &[u8] = b"JOIN";
/// `LEAVE` command name (a DISH leaves a group).
pub(crate) const LEAVE: &[u8] = b"LEAVE";

/// Start of a `PING` body (name length and name); the TTL and context follow.
pub(crate) const PING_PREFIX: &[u8] = b"\x04PING";
/// Start of a `PONG` body; the echoed context follows.
pub(crate) const PONG_PREFIX: &[u8] = b"\x04PONG";
/// Start of a `SUBSCRIBE` body; the topic follows.
pub(crate) const SUBSCRIBE_PREFIX: &[u8] = b"\x09SUBSCRIBE";
/// Start of a `CANCEL` body; the topic follows.
pub(crate) const CANCEL_PREFIX: &[u8] = b"\x06CANCEL";
/// Start of a DISH's `JOIN` body; the group follows (libzmq `dish_session_t`).
pub(crate) const JOIN_PREFIX: &[u8] = b"\x04JOIN";
/// Start of a DISH's `LEAVE` body; the group follows.
pub(crate) const LEAVE_PREFIX: &[u8] = b"\x05LEAVE";

/// The body of a `JOIN` (`join`) or `LEAVE` command for `group`.
pub(crate) fn join_leave_body(join: bool, group: &[u8]) -> Vec<u8> {
    let prefix = if join { JOIN_PREFIX } else { LEAVE_PREFIX };
    let mut v = Vec::with_capacity(prefix.len() + group.len());
    v.extend_from_slice(prefix);
    v.extend_from_slice(group);
    v
}

/// A `JOIN` (true) or `LEAVE` (false) command body's group, as libzmq's `radio_session_t`
/// recognises them; `None` for any other body.
pub(crate) fn parse_join_leave(body: &[u8]) -> Option<(bool, &[u8])> {
    if let Some(g) = body.strip_prefix(JOIN_PREFIX) {
        Some((true, g))
    } else {
        body.strip_prefix(LEAVE_PREFIX).map(|g| (false, g))
    }
}

/// The `Socket-Type` property name (compared case-sensitively, as libzmq does).
pub(crate) const PROP_SOCKET_TYPE: &str = "Socket-Type";
/// The `Identity` property name (compared case-sensitively, as libzmq does).
pub(crate) const PROP_IDENTITY: &str = "Identity";

/// Longest `PING` context a `PONG` echoes (RFC 37; libzmq truncates longer ones).
pub(crate) const PING_MAX_CONTEXT: usize = 16;

/// Splits a command body into its name and data; `None` when the name length overruns the body.
pub(crate) fn parse(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&n, rest) = body.split_first()?;
    let n = usize::from(n);
    if rest.len() < n {
        return None;
    }
    Some(rest.split_at(n))
}

/// A command body: name length, name, then the data parts in order.
pub(crate) fn body(name: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let len = 1 + name.len() + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut b = Vec::with_capacity(len);
    b.push(name.len() as u8);
    b.extend_from_slice(name);
    for p in parts {
        b.extend_from_slice(p);
    }
    b
}

fn push_property(b: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    // Unrepresentable properties (name over 255 bytes, value over 4 GiB) are skipped: the socket
    // options layer validates ZMQ_METADATA before it gets here.
    let (Ok(nl), Ok(vl)) = (u8::try_from(name.len()), u32::try_from(value.len())) else {
        return;
    };
    b.push(nl);
    b.extend_from_slice(name);
    b.extend_from_slice(&vl.to_be_bytes());
    b.extend_from_slice(value);
}

/// The `READY` body libzmq 4.3.5 would send: `Socket-Type`, then `Identity` for REQ, DEALER and
/// ROUTER (even when empty), then the user properties sorted by name (libzmq keeps them in a
/// `std::map`; the first of duplicate names wins, as `std::map::insert`).
#[cfg(test)]
pub(crate) fn ready_body(
    socket_type: SocketType,
    routing_id: &[u8],
    metadata: &[(String, Vec<u8>)],
) -> Vec<u8> {
    properties_body(READY, socket_type, routing_id, metadata)
}

/// A command named `name` carrying the `READY` properties (PLAIN's `INITIATE` does).
pub(crate) fn properties_body(
    name: &[u8],
    socket_type: SocketType,
    routing_id: &[u8],
    metadata: &[(String, Vec<u8>)],
) -> Vec<u8> {
    let mut b = body(name, &[]);
    push_property(
        &mut b,
        PROP_SOCKET_TYPE.as_bytes(),
        socket_type.name().as_bytes(),
    );
    if socket_type.sends_identity() {
        push_property(&mut b, PROP_IDENTITY.as_bytes(), routing_id);
    }
    let mut user: Vec<&(String, Vec<u8>)> = Vec::with_capacity(metadata.len());
    for p in metadata {
        if !user.iter().any(|q| q.0 == p.0) {
            user.push(p);
        }
    }
    user.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, value) in user {
        push_property(&mut b, name.as_bytes(), value);
    }
    b
}

/// Parses `READY` (or `INITIATE`) metadata as libzmq's `parse_metadata` does: name length (1),
/// name, value length (4, big-endian), value, repeated; `None` when it is truncated.
pub(crate) fn parse_properties(mut data: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut props = Vec::new();
    while !data.is_empty() {
        let (&nl, rest) = data.split_first()?;
        let (name, rest) = split(rest, usize::from(nl))?;
        let (vl, rest) = split(rest, 4)?;
        let vl = u32::from_be_bytes([vl[0], vl[1], vl[2], vl[3]]);
        let (value, rest) = split(rest, usize::try_from(vl).ok()?)?;
        props.push((name, value));
        data = rest;
    }
    Some(props)
}

fn split(b: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    (b.len() >= n).then(|| b.split_at(n))
}

/// The `ERROR` body: reason length (1 byte) and reason, truncated to 255 bytes.
pub(crate) fn error_body(reason: &[u8]) -> Vec<u8> {
    let r = &reason[..reason.len().min(255)];
    body(ERROR, &[&[r.len() as u8], r])
}

/// The reason of an `ERROR` command's data; `None` when malformed (trailing bytes are allowed, as
/// in libzmq).
pub(crate) fn parse_error(data: &[u8]) -> Option<&[u8]> {
    let (&n, rest) = data.split_first()?;
    rest.get(..usize::from(n))
}

/// A parsed `PING`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ping<'a> {
    /// The TTL the sender advertises, in deciseconds (0: none).
    pub ttl_deciseconds: u16,
    /// The context to echo, truncated to [`PING_MAX_CONTEXT`] bytes.
    pub context: &'a [u8],
}

/// Parses a `PING` command's data; `None` when shorter than the TTL field.
pub(crate) fn parse_ping(data: &[u8]) -> Option<Ping<'_>> {
    let (ttl, ctx) = split(data, 2)?;
    Some(Ping {
        ttl_deciseconds: u16::from_be_bytes([ttl[0], ttl[1]]),
        context: &ctx[..ctx.len().min(PING_MAX_CONTEXT)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_matches_libzmq_layout() {
        let b = ready_body(
            SocketType::Dealer,
            b"id",
            &[
                ("X-b".into(), b"2".to_vec()),
                ("X-a".into(), b"1".to_vec()),
                ("X-b".into(), b"3".to_vec()),
            ],
        );
        let mut want = b"\x05READY".to_vec();
        want.extend_from_slice(b"\x0bSocket-Type\x00\x00\x00\x06DEALER");
        want.extend_from_slice(b"\x08Identity\x00\x00\x00\x02id");
        want.extend_from_slice(b"\x03X-a\x00\x00\x00\x011");
        want.extend_from_slice(b"\x03X-b\x00\x00\x00\x012");
        assert_eq!(b, want);
        let pb = ready_body(SocketType::Pub, b"ignored", &[]);
        assert_eq!(pb, b"\x05READY\x0bSocket-Type\x00\x00\x00\x03PUB".to_vec());
        let rb = ready_body(SocketType::Req, b"", &[]);
        assert!(rb.ends_with(b"\x08Identity\x00\x00\x00\x00"));
    }

    #[test]
    fn properties_parse_and_reject_truncation() {
        let b = ready_body(SocketType::Router, b"abc", &[("X-k".into(), vec![0, 1, 2])]);
        let (name, data) = parse(&b).unwrap();
        assert_eq!(name, READY);
        let props = parse_properties(data).unwrap();
        assert_eq!(props.len(), 3);
        assert_eq!(props[1], (&b"Identity"[..], &b"abc"[..]));
        assert_eq!(props[2], (&b"X-k"[..], &[0u8, 1, 2][..]));
        // Only cuts at property boundaries parse.
        let ok: Vec<usize> = (1..data.len())
            .filter(|&c| parse_properties(&data[..c]).is_some())
            .collect();
        assert_eq!(ok, vec![22, 38]);
        assert_eq!(
            parse_properties(&[0, 0, 0, 0, 0]),
            Some(vec![(&b""[..], &b""[..])])
        );
        assert_eq!(parse_properties(&[5]), None);
        assert_eq!(parse_properties(&[0, 0xFF, 0xFF, 0xFF, 0xFF]), None);
    }

    #[test]
    fn error_ping_pong() {
        let e = error_body(b"Invalid socket type");
        let (n, d) = parse(&e).unwrap();
        assert_eq!(
            (n, parse_error(d)),
            (ERROR, Some(&b"Invalid socket type"[..]))
        );
        assert_eq!(parse_error(&[3, b'a']), None);
        assert_eq!(parse_error(&[]), None);
        assert_eq!(error_body(&[b'x'; 300]).len(), 6 + 1 + 255);
        let p = body(PING, &[&30u16.to_be_bytes(), b"ctx"]);
        assert_eq!(&p[..5], PING_PREFIX);
        let (n, d) = parse(&p).unwrap();
        assert_eq!(n, PING);
        assert_eq!(
            parse_ping(d),
            Some(Ping {
                ttl_deciseconds: 30,
                context: b"ctx"
            })
        );
        assert_eq!(parse_ping(&[0]), None);
        let long = [7u8; 40];
        assert_eq!(parse_ping(&long).unwrap().context.len(), PING_MAX_CONTEXT);
        assert_eq!(body(b"PONG", &[b"ctx"]), [PONG_PREFIX, b"ctx"].concat());
        assert_eq!(body(SUBSCRIBE, &[]), SUBSCRIBE_PREFIX);
        assert_eq!(body(CANCEL, &[]), CANCEL_PREFIX);
        assert_eq!(parse(&[5, b'a']), None);
        assert_eq!(parse(&[]), None);
    }
}

//! ZAP (RFC 27) messages as the handshake sees them: the request a server-side mechanism asks its
//! handler, and the checks on the handler's reply, following libzmq 4.3.5's `zap_client_t`.
//!
//! Transport of these messages (the inproc pipe to `inproc://zeromq.zap.01`) is the session's
//! business (`crate::zap`); this module only builds and checks frames.

use super::command;
pub(crate) use super::error::ZapError;
use crate::msg::Msg;

/// The ZAP version we speak.
pub(crate) const ZAP_VERSION: &[u8] = b"1.0";
/// The request id we use (one request per connection, as libzmq).
pub(crate) const ZAP_REQUEST_ID: &[u8] = b"1";
/// The number of frames of a ZAP reply, counting the empty delimiter first.
pub(crate) const ZAP_REPLY_FRAMES: usize = 7;
/// The property that carries the ZAP user id on received messages.
pub(crate) const PROP_USER_ID: &str = "User-Id";

/// A ZAP request a handshake needs answered before it can go on.
#[derive(Clone, PartialEq, Eq)]
pub struct ZapRequest {
    /// `ZMQ_ZAP_DOMAIN` of our socket.
    pub domain: Vec<u8>,
    /// The peer's address (its IP for TCP, empty otherwise).
    pub address: Vec<u8>,
    /// Our socket's `ZMQ_ROUTING_ID` (what libzmq sends as the "identity" frame).
    pub routing_id: Vec<u8>,
    /// The mechanism name (`NULL`, `PLAIN`, `CURVE`).
    pub mechanism: &'static str,
    /// Mechanism-specific credentials (PLAIN: user name, password; CURVE: the client's 32-byte
    /// long-term public key).
    pub credentials: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ZapRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZapRequest")
            .field("domain", &String::from_utf8_lossy(&self.domain))
            .field("address", &String::from_utf8_lossy(&self.address))
            .field("mechanism", &self.mechanism)
            .field("credentials", &self.credentials.len())
            .finish()
    }
}

impl ZapRequest {
    /// The request as frames, MORE set on all but the last: empty delimiter, version, request
    /// id, domain, address, identity, mechanism, credentials.
    pub fn frames(&self) -> Vec<Msg> {
        let mut parts: Vec<&[u8]> = vec![
            b"",
            ZAP_VERSION,
            ZAP_REQUEST_ID,
            &self.domain,
            &self.address,
            &self.routing_id,
            self.mechanism.as_bytes(),
        ];
        parts.extend(self.credentials.iter().map(|c| c.as_slice()));
        let last = parts.len() - 1;
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut m = Msg::copy_from(p);
                m.set_more(i < last);
                m
            })
            .collect()
    }
}

/// A well-formed ZAP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ZapReply {
    /// 200, 300, 400 or 500.
    pub status: u16,
    /// The status code's three digits, as sent in an `ERROR` command.
    pub status_text: [u8; 3],
    /// The properties to attach: `User-Id` first, then the metadata frame's.
    pub properties: Vec<(String, Vec<u8>)>,
}

/// Checks a reply's frames (delimiter included) in libzmq's order: frame count and MORE flags,
/// delimiter, version, request id, status code, metadata.
pub(crate) fn parse_reply(frames: &[Msg]) -> Result<ZapReply, ZapError> {
    if frames.len() != ZAP_REPLY_FRAMES
        || frames
            .iter()
            .enumerate()
            .any(|(i, f)| f.more() != (i < ZAP_REPLY_FRAMES - 1))
    {
        return Err(ZapError::MalformedReply);
    }
    if !frames[0].is_empty() {
        return Err(ZapError::Unspecified);
    }
    if frames[1].data() != ZAP_VERSION {
        return Err(ZapError::BadVersion);
    }
    if frames[2].data() != ZAP_REQUEST_ID {
        return Err(ZapError::BadRequestId);
    }
    let status_text: [u8; 3] = match frames[3].data() {
        &[d @ b'2'..=b'5', b'0', b'0'] => [d, b'0', b'0'],
        _ => return Err(ZapError::InvalidStatusCode),
    };
    let status = u16::from(status_text[0] - b'0') * 100;
    let mut properties = vec![(PROP_USER_ID.to_string(), frames[5].data().to_vec())];
    let props = command::parse_properties(frames[6].data()).ok_or(ZapError::InvalidMetadata)?;
    for (name, value) in props {
        let name = String::from_utf8_lossy(name).into_owned();
        if !properties.iter().any(|(n, _)| *n == name) {
            properties.push((name, value.to_vec()));
        }
    }
    Ok(ZapReply {
        status,
        status_text,
        properties,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(parts: &[&[u8]]) -> Vec<Msg> {
        let last = parts.len().saturating_sub(1);
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut m = Msg::copy_from(p);
                m.set_more(i < last);
                m
            })
            .collect()
    }

    const MD: &[u8] = b"\x05Hello\x00\x00\x00\x05World";

    #[test]
    fn request_frames() {
        let r = ZapRequest {
            domain: b"dom".to_vec(),
            address: b"127.0.0.1".to_vec(),
            routing_id: b"IDENT".to_vec(),
            mechanism: "PLAIN",
            credentials: vec![b"u".to_vec(), b"p".to_vec()],
        };
        let f = r.frames();
        let data: Vec<&[u8]> = f.iter().map(|m| m.data()).collect();
        assert_eq!(
            data,
            vec![
                &b""[..],
                b"1.0",
                b"1",
                b"dom",
                b"127.0.0.1",
                b"IDENT",
                b"PLAIN",
                b"u",
                b"p"
            ]
        );
        assert!(f[..8].iter().all(|m| m.more()) && !f[8].more());
        let n = ZapRequest {
            mechanism: "NULL",
            credentials: vec![],
            ..r
        };
        assert!(!n.frames().last().unwrap().more());
        assert!(!format!("{n:?}").contains("IDENT"));
    }

    #[test]
    fn good_replies() {
        let r = parse_reply(&reply(&[
            b"",
            b"1.0",
            b"1",
            b"200",
            b"OK",
            b"anonymous",
            MD,
        ]))
        .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(
            r.properties,
            vec![
                ("User-Id".to_string(), b"anonymous".to_vec()),
                ("Hello".to_string(), b"World".to_vec())
            ]
        );
        for (s, n) in [(&b"300"[..], 300), (b"400", 400), (b"500", 500)] {
            let r = parse_reply(&reply(&[b"", b"1.0", b"1", s, b"", b"", b""])).unwrap();
            assert_eq!((r.status, &r.status_text[..]), (n, s));
        }
        // The user id wins over a metadata property of the same name.
        let md = b"\x07User-Id\x00\x00\x00\x01x";
        let r = parse_reply(&reply(&[b"", b"1.0", b"1", b"200", b"", b"me", md])).unwrap();
        assert_eq!(r.properties, vec![("User-Id".to_string(), b"me".to_vec())]);
    }

    #[test]
    fn bad_replies() {
        let ok: [&[u8]; 7] = [b"", b"1.0", b"1", b"200", b"OK", b"", b""];
        let with = |i: usize, v: &'static [u8]| {
            let mut p = ok;
            p[i] = v;
            reply(&p)
        };
        assert_eq!(parse_reply(&reply(&ok[..6])), Err(ZapError::MalformedReply));
        let mut eight = ok.to_vec();
        eight.push(b"");
        assert_eq!(parse_reply(&reply(&eight)), Err(ZapError::MalformedReply));
        let mut no_more = reply(&ok);
        no_more[2].set_more(false);
        assert_eq!(parse_reply(&no_more), Err(ZapError::MalformedReply));
        assert_eq!(parse_reply(&[]), Err(ZapError::MalformedReply));
        assert_eq!(parse_reply(&with(0, b"x")), Err(ZapError::Unspecified));
        assert_eq!(parse_reply(&with(1, b"2.0")), Err(ZapError::BadVersion));
        assert_eq!(parse_reply(&with(2, b"2")), Err(ZapError::BadRequestId));
        for s in [&b"invalid_status"[..], b"100", b"201", b"600", b"20", b""] {
            assert_eq!(parse_reply(&with(3, s)), Err(ZapError::InvalidStatusCode));
        }
        assert_eq!(
            parse_reply(&with(6, b"\x05Hel")),
            Err(ZapError::InvalidMetadata)
        );
        assert_eq!(ZapError::BadVersion.code(), 0x2000_0003);
        assert_eq!(ZapError::MalformedReply.code(), 0x2000_0001);
    }
}

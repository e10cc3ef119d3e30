//! SOCKS5 client handshake (RFC 1928, with RFC 1929 username/password), sans-IO.
//!
//! Used by tcp connects when `ZMQ_SOCKS_PROXY` is set: the transport connects to the proxy,
//! then moves bytes between the socket and a [`Handshake`] until it [is done](Handshake::is_done),
//! and hands the stream to the ZMTP engine. The handshake never asks for more bytes than the
//! current proxy message still lacks ([`Handshake::wanted`]), so nothing the peer sends after the
//! CONNECT reply is read here: it stays in the socket for the engine.
//!
//! What goes on the wire matches libzmq 4.3.5's `socks_connecter_t`:
//!
//! - greeting `05 01 M`, one method: `00` (no authentication), or `02` (username/password)
//!   when `ZMQ_SOCKS_USERNAME` is not empty;
//! - the server may choose `00` or `02`; `02` is answered with `01 ULEN USER PLEN PASS`, and
//!   the server's `01 00` is success;
//! - `05 01 00 ATYP DST.ADDR DST.PORT` (CONNECT): ATYP `01`/`04` when the endpoint's host is a
//!   numeric IPv4/IPv6 address, otherwise `03` with the host name unresolved;
//! - reply `05 REP 00 ATYP BND.ADDR BND.PORT`, success when REP is `00`; a reply with a
//!   version other than 5, REP above 8, a non-zero reserved byte or an unknown ATYP is malformed.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// SOCKS protocol version 5.
pub(crate) const VERSION: u8 = 0x05;
/// Method `00`: no authentication required.
pub(crate) const METHOD_NO_AUTH: u8 = 0x00;
/// Method `02`: username/password (RFC 1929).
pub(crate) const METHOD_USER_PASS: u8 = 0x02;
/// Method `FF`: the server accepts none of the offered methods.
pub(crate) const METHOD_NONE_ACCEPTABLE: u8 = 0xff;
/// Version byte of the RFC 1929 sub-negotiation.
pub(crate) const AUTH_VERSION: u8 = 0x01;
/// Command `01`: CONNECT.
pub(crate) const CMD_CONNECT: u8 = 0x01;
/// Address type `01`: IPv4, 4 bytes.
pub(crate) const ATYP_IPV4: u8 = 0x01;
/// Address type `03`: domain name, a length byte and that many bytes.
pub(crate) const ATYP_DOMAIN: u8 = 0x03;
/// Address type `04`: IPv6, 16 bytes.
pub(crate) const ATYP_IPV6: u8 = 0x04;

/// The longest message the handshake reads: a reply with a 255-byte domain name.
pub(crate) const MAX_READ: usize = 4 + 1 + 255 + 2;

/// Why a SOCKS5 handshake failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SocksError {
    /// The endpoint is not `host:port` with a port in 1..=65535.
    BadTarget,
    /// The host name is longer than the 255 bytes a CONNECT request can carry.
    HostTooLong(usize),
    /// The username or password is longer than 255 bytes.
    CredentialTooLong,
    /// The server's message has a SOCKS version other than 5.
    BadVersion(u8),
    /// The server accepts none of the offered methods (`FF`).
    NoAcceptableMethod,
    /// The server chose a method that was not offered or is not supported.
    UnexpectedMethod(u8),
    /// The username/password reply has a version other than 1.
    BadAuthVersion(u8),
    /// The server refused the username and password (its status byte).
    AuthFailed(u8),
    /// The CONNECT reply code is not one RFC 1928 defines (above 8).
    BadReplyCode(u8),
    /// The server could not connect to the target (RFC 1928 reply code 1..=8).
    Rejected(u8),
    /// The CONNECT reply's reserved byte is not zero.
    BadReserved(u8),
    /// The CONNECT reply has an unknown address type.
    BadAddressType(u8),
}

impl fmt::Display for SocksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocksError::BadTarget => write!(f, "socks: endpoint is not host:port"),
            SocksError::HostTooLong(n) => write!(f, "socks: host name of {n} bytes is too long"),
            SocksError::CredentialTooLong => write!(f, "socks: username or password too long"),
            SocksError::BadVersion(v) => write!(f, "socks: server speaks version {v}, not 5"),
            SocksError::NoAcceptableMethod => write!(f, "socks: no acceptable method"),
            SocksError::UnexpectedMethod(m) => write!(f, "socks: unexpected method {m:#04x}"),
            SocksError::BadAuthVersion(v) => write!(f, "socks: bad auth reply version {v}"),
            SocksError::AuthFailed(s) => write!(f, "socks: authentication failed ({s:#04x})"),
            SocksError::BadReplyCode(c) => write!(f, "socks: unknown reply code {c:#04x}"),
            SocksError::Rejected(c) => write!(f, "socks: connect rejected: {}", reply_text(*c)),
            SocksError::BadReserved(b) => write!(f, "socks: reserved byte is {b:#04x}"),
            SocksError::BadAddressType(t) => write!(f, "socks: unknown address type {t:#04x}"),
        }
    }
}

impl std::error::Error for SocksError {}

/// RFC 1928's meaning of a failure reply code.
fn reply_text(code: u8) -> &'static str {
    match code {
        1 => "general SOCKS server failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        6 => "TTL expired",
        7 => "command not supported",
        8 => "address type not supported",
        _ => "unknown",
    }
}

/// A host as a SOCKS5 request or reply carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    /// ATYP `01`.
    V4(Ipv4Addr),
    /// ATYP `04`.
    V6(Ipv6Addr),
    /// ATYP `03`: a name the proxy resolves (at most 255 bytes).
    Domain(Vec<u8>),
}

/// Where the proxy is asked to connect, or where it says it bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The host.
    pub host: Host,
    /// The port.
    pub port: u16,
}

impl Target {
    /// Parses a tcp endpoint's `host:port` as libzmq's socks connecter does.
    ///
    /// The port follows the last `:` (C `atoi`, 0 refused); `[...]` around the host is removed;
    /// a host that parses as a numeric IPv4 or IPv6 address (an IPv6 `%zone` is dropped, the
    /// proxy cannot use it) is sent as such, anything else as a domain name, unresolved.
    pub(crate) fn parse(address: &str) -> Result<Target, SocksError> {
        let idx = address.rfind(':').ok_or(SocksError::BadTarget)?;
        let b = address.as_bytes();
        let host = if idx >= 2 && b[0] == b'[' && b[idx - 1] == b']' {
            &address[1..idx - 1]
        } else {
            &address[..idx]
        };
        let port = crate::endpoint::c_atoi(&address[idx + 1..]) as u16;
        if port == 0 {
            return Err(SocksError::BadTarget);
        }
        Ok(Target {
            host: Host::classify(host)?,
            port,
        })
    }
}

impl Host {
    /// A numeric IPv4 or IPv6 address, else a domain name (at most 255 bytes).
    pub(crate) fn classify(host: &str) -> Result<Host, SocksError> {
        if let Ok(a) = host.parse::<Ipv4Addr>() {
            return Ok(Host::V4(a));
        }
        let unzoned = match host.rfind('%') {
            Some(p) => &host[..p],
            None => host,
        };
        if let Ok(a) = unzoned.parse::<Ipv6Addr>() {
            return Ok(Host::V6(a));
        }
        if host.len() > 255 {
            return Err(SocksError::HostTooLong(host.len()));
        }
        Ok(Host::Domain(host.as_bytes().to_vec()))
    }
}

/// Where a [`Handshake`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sending the method greeting.
    Greeting,
    /// Reading the server's method choice (2 bytes).
    Choice,
    /// Sending the username/password request.
    Auth,
    /// Reading the username/password status (2 bytes).
    AuthReply,
    /// Sending the CONNECT request.
    Request,
    /// Reading the CONNECT reply (variable length).
    Reply,
    /// The tunnel is up.
    Done,
}

/// One SOCKS5 client handshake: CONNECT to a target through a proxy, sans-IO.
#[derive(Debug, Clone)]
pub(crate) struct Handshake {
    target: Target,
    credentials: Option<(Vec<u8>, Vec<u8>)>,
    phase: Phase,
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
    bound: Option<Target>,
}

impl Handshake {
    /// A handshake to `target`; a non-empty `username` selects username/password auth.
    pub(crate) fn new(
        target: Target,
        username: &[u8],
        password: &[u8],
    ) -> Result<Handshake, SocksError> {
        let credentials = if username.is_empty() {
            None
        } else {
            if username.len() > 255 || password.len() > 255 {
                return Err(SocksError::CredentialTooLong);
            }
            Some((username.to_vec(), password.to_vec()))
        };
        if let Host::Domain(d) = &target.host {
            if d.len() > 255 {
                return Err(SocksError::HostTooLong(d.len()));
            }
        }
        let method = if credentials.is_some() {
            METHOD_USER_PASS
        } else {
            METHOD_NO_AUTH
        };
        Ok(Handshake {
            target,
            credentials,
            phase: Phase::Greeting,
            out: vec![VERSION, 1, method],
            written: 0,
            input: Vec::with_capacity(MAX_READ),
            bound: None,
        })
    }

    /// Bytes to send to the proxy now (empty while waiting for its answer, and when done).
    pub(crate) fn output(&self) -> &[u8] {
        &self.out[self.written..]
    }

    /// Records that the first `n` bytes of [`Self::output`] were sent.
    pub(crate) fn consume_output(&mut self, n: usize) {
        self.written = (self.written + n).min(self.out.len());
        if self.written < self.out.len() {
            return;
        }
        self.out.clear();
        self.written = 0;
        self.input.clear();
        self.phase = match self.phase {
            Phase::Greeting => Phase::Choice,
            Phase::Auth => Phase::AuthReply,
            Phase::Request => Phase::Reply,
            p => p,
        };
    }

    /// How many bytes to read now: at most what the current proxy message still lacks, so that
    /// nothing after the CONNECT reply is taken from the stream (0 when not reading).
    pub(crate) fn wanted(&self) -> usize {
        let have = self.input.len();
        match self.phase {
            Phase::Choice | Phase::AuthReply => 2 - have,
            Phase::Reply => {
                if have < 5 {
                    return 5 - have;
                }
                let addr = match self.input[3] {
                    ATYP_IPV4 => 4,
                    ATYP_IPV6 => 16,
                    _ => 1 + self.input[4] as usize,
                };
                (4 + addr + 2).saturating_sub(have)
            }
            _ => 0,
        }
    }

    /// Takes bytes read from the proxy; returns how many were used (never more than
    /// [`Self::wanted`]). Errors end the handshake: the connection should be closed.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<usize, SocksError> {
        let mut used = 0;
        while used < data.len() {
            let n = self.wanted().min(data.len() - used);
            if n == 0 {
                break;
            }
            self.input.extend_from_slice(&data[used..used + n]);
            used += n;
            self.check()?;
            if self.wanted() == 0 {
                self.complete()?;
            }
        }
        Ok(used)
    }

    /// Whether the tunnel is up: the stream now carries the target's bytes.
    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The address the proxy reported binding for the tunnel (after a successful reply).
    pub(crate) fn bound(&self) -> Option<&Target> {
        self.bound.as_ref()
    }

    /// Validates the bytes of the current message received so far.
    fn check(&self) -> Result<(), SocksError> {
        let i = &self.input;
        match self.phase {
            Phase::Choice if i[0] != VERSION => Err(SocksError::BadVersion(i[0])),
            Phase::AuthReply if i[0] != AUTH_VERSION => Err(SocksError::BadAuthVersion(i[0])),
            Phase::Reply => {
                if i[0] != VERSION {
                    return Err(SocksError::BadVersion(i[0]));
                }
                if let Some(&rep) = i.get(1) {
                    if rep > 8 {
                        return Err(SocksError::BadReplyCode(rep));
                    }
                    if rep != 0 {
                        return Err(SocksError::Rejected(rep));
                    }
                }
                if let Some(&rsv) = i.get(2) {
                    if rsv != 0 {
                        return Err(SocksError::BadReserved(rsv));
                    }
                }
                if let Some(&atyp) = i.get(3) {
                    if !matches!(atyp, ATYP_IPV4 | ATYP_DOMAIN | ATYP_IPV6) {
                        return Err(SocksError::BadAddressType(atyp));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Acts on a complete message from the proxy.
    fn complete(&mut self) -> Result<(), SocksError> {
        match self.phase {
            Phase::Choice => match self.input[1] {
                METHOD_NO_AUTH => self.send_request(),
                METHOD_USER_PASS if self.credentials.is_some() => self.send_auth(),
                METHOD_NONE_ACCEPTABLE => return Err(SocksError::NoAcceptableMethod),
                m => return Err(SocksError::UnexpectedMethod(m)),
            },
            Phase::AuthReply => match self.input[1] {
                0 => self.send_request(),
                s => return Err(SocksError::AuthFailed(s)),
            },
            Phase::Reply => {
                let i = &self.input;
                let port_at = i.len() - 2;
                let host = match i[3] {
                    ATYP_IPV4 => {
                        let mut a = [0u8; 4];
                        a.copy_from_slice(&i[4..8]);
                        Host::V4(Ipv4Addr::from(a))
                    }
                    ATYP_IPV6 => {
                        let mut a = [0u8; 16];
                        a.copy_from_slice(&i[4..20]);
                        Host::V6(Ipv6Addr::from(a))
                    }
                    _ => Host::Domain(i[5..port_at].to_vec()),
                };
                let port = u16::from_be_bytes([i[port_at], i[port_at + 1]]);
                self.bound = Some(Target { host, port });
                self.input.clear();
                self.phase = Phase::Done;
            }
            _ => {}
        }
        Ok(())
    }

    fn send_auth(&mut self) {
        let (user, pass) = match &self.credentials {
            Some(c) => (c.0.as_slice(), c.1.as_slice()),
            None => (&[][..], &[][..]),
        };
        let mut out = Vec::with_capacity(3 + user.len() + pass.len());
        out.push(AUTH_VERSION);
        out.push(user.len() as u8);
        out.extend_from_slice(user);
        out.push(pass.len() as u8);
        out.extend_from_slice(pass);
        self.start_sending(Phase::Auth, out);
    }

    fn send_request(&mut self) {
        let mut out = vec![VERSION, CMD_CONNECT, 0x00];
        match &self.target.host {
            Host::V4(a) => {
                out.push(ATYP_IPV4);
                out.extend_from_slice(&a.octets());
            }
            Host::V6(a) => {
                out.push(ATYP_IPV6);
                out.extend_from_slice(&a.octets());
            }
            Host::Domain(d) => {
                out.push(ATYP_DOMAIN);
                out.push(d.len() as u8);
                out.extend_from_slice(d);
            }
        }
        out.extend_from_slice(&self.target.port.to_be_bytes());
        self.start_sending(Phase::Request, out);
    }

    fn start_sending(&mut self, phase: Phase, out: Vec<u8>) {
        self.phase = phase;
        self.out = out;
        self.written = 0;
        self.input.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    /// Sends everything the handshake has to send, returning it.
    fn drain(h: &mut Handshake) -> Vec<u8> {
        let out = h.output().to_vec();
        h.consume_output(out.len());
        out
    }

    /// Runs a handshake up to the CONNECT request with no auth; returns the request bytes.
    fn to_request(t: &str) -> (Handshake, Vec<u8>) {
        let mut h = Handshake::new(target(t), b"", b"").unwrap();
        assert_eq!(drain(&mut h), [5, 1, 0]);
        assert_eq!(h.feed(&[5, 0]), Ok(2));
        let req = drain(&mut h);
        (h, req)
    }

    #[test]
    fn parse_targets_like_libzmq() {
        assert_eq!(
            target("127.0.0.1:5555"),
            Target {
                host: Host::V4(Ipv4Addr::new(127, 0, 0, 1)),
                port: 5555
            }
        );
        assert_eq!(target("::1:80").host, Host::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(target("[::1]:80").host, Host::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(
            target("[fe80::1%2]:80").host,
            Host::V6("fe80::1".parse().unwrap())
        );
        assert_eq!(
            target("somedomainname.org:9").host,
            Host::Domain(b"somedomainname.org".to_vec())
        );
        assert_eq!(target("host:65535").port, 65535);
        assert_eq!(Target::parse("host"), Err(SocksError::BadTarget));
        assert_eq!(Target::parse("host:0"), Err(SocksError::BadTarget));
        assert_eq!(Target::parse("host:x"), Err(SocksError::BadTarget));
        let long = format!("{}:1", "a".repeat(256));
        assert_eq!(Target::parse(&long), Err(SocksError::HostTooLong(256)));
        let ok = format!("{}:1", "a".repeat(255));
        assert!(Target::parse(&ok).is_ok());
    }

    #[test]
    fn no_auth_ipv4_connect() {
        let (mut h, req) = to_request("10.1.2.3:4660");
        assert_eq!(req, [5, 1, 0, 1, 10, 1, 2, 3, 0x12, 0x34]);
        assert_eq!(h.wanted(), 5);
        assert_eq!(h.feed(&[5, 0, 0, 1, 127, 0, 0, 1, 0x30, 0x39]), Ok(10));
        assert!(h.is_done());
        assert_eq!(
            h.bound(),
            Some(&Target {
                host: Host::V4(Ipv4Addr::LOCALHOST),
                port: 12345
            })
        );
        assert_eq!(h.wanted(), 0);
        assert!(h.output().is_empty());
    }

    #[test]
    fn ipv6_and_domain_requests() {
        let (_, req) = to_request("[::1]:80");
        let mut want = vec![5, 1, 0, 4];
        want.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        want.extend_from_slice(&[0, 80]);
        assert_eq!(req, want);

        let (_, req) = to_request("example.org:443");
        let mut want = vec![5, 1, 0, 3, 11];
        want.extend_from_slice(b"example.org");
        want.extend_from_slice(&[1, 187]);
        assert_eq!(req, want);
    }

    #[test]
    fn every_reply_address_type() {
        // IPv6 BND.ADDR.
        let (mut h, _) = to_request("a:1");
        let mut rep = vec![5, 0, 0, 4];
        rep.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        rep.extend_from_slice(&[0, 7]);
        assert_eq!(h.feed(&rep), Ok(22));
        assert!(h.is_done());
        assert_eq!(h.bound().unwrap().host, Host::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(h.bound().unwrap().port, 7);

        // Domain BND.ADDR, including the empty name.
        for name in [&b"localhost"[..], b""] {
            let (mut h, _) = to_request("a:1");
            let mut rep = vec![5, 0, 0, 3, name.len() as u8];
            rep.extend_from_slice(name);
            rep.extend_from_slice(&[1, 0]);
            assert_eq!(h.feed(&rep), Ok(rep.len()));
            assert!(h.is_done());
            assert_eq!(h.bound().unwrap().host, Host::Domain(name.to_vec()));
            assert_eq!(h.bound().unwrap().port, 256);
        }
    }

    #[test]
    fn reads_never_pass_the_reply() {
        // Byte by byte, wanted() says exactly what is missing; trailing ZMTP bytes stay unread.
        let (mut h, _) = to_request("a:1");
        let mut rep = vec![5, 0, 0, 3, 4];
        rep.extend_from_slice(b"host");
        rep.extend_from_slice(&[0, 1]);
        let total = rep.len();
        rep.extend_from_slice(&[0xff, 0, 0, 0]); // the peer's ZMTP greeting begins
        let mut fed = 0;
        while !h.is_done() {
            let w = h.wanted();
            assert!(w > 0 && fed + w <= total, "wanted {w} at {fed}");
            assert_eq!(h.feed(&rep[fed..fed + 1]), Ok(1));
            fed += 1;
        }
        assert_eq!(fed, total);
        // Fed everything at once, it uses only the reply.
        let (mut h, _) = to_request("a:1");
        assert_eq!(h.feed(&rep), Ok(total));
        assert!(h.is_done());
    }

    #[test]
    fn partial_writes() {
        let mut h = Handshake::new(target("a:1"), b"", b"").unwrap();
        assert_eq!(h.output(), [5, 1, 0]);
        h.consume_output(1);
        assert_eq!(h.output(), [1, 0]);
        assert_eq!(h.wanted(), 0);
        h.consume_output(2);
        assert!(h.output().is_empty());
        assert_eq!(h.wanted(), 2);
    }

    #[test]
    fn user_pass_success() {
        let mut h = Handshake::new(target("1.2.3.4:5"), b"someuser", b"somepass").unwrap();
        assert_eq!(drain(&mut h), [5, 1, 2]);
        assert_eq!(h.feed(&[5, 2]), Ok(2));
        let mut want = vec![1, 8];
        want.extend_from_slice(b"someuser");
        want.push(8);
        want.extend_from_slice(b"somepass");
        assert_eq!(drain(&mut h), want);
        assert_eq!(h.wanted(), 2);
        assert_eq!(h.feed(&[1, 0]), Ok(2));
        assert_eq!(drain(&mut h), [5, 1, 0, 1, 1, 2, 3, 4, 0, 5]);
        assert_eq!(h.feed(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]), Ok(10));
        assert!(h.is_done());
    }

    #[test]
    fn user_with_empty_password() {
        let mut h = Handshake::new(target("a:1"), b"u", b"").unwrap();
        drain(&mut h);
        h.feed(&[5, 2]).unwrap();
        assert_eq!(drain(&mut h), [1, 1, b'u', 0]);
    }

    #[test]
    fn server_may_waive_auth() {
        // Offered user/pass, the server picks "no auth": straight to the request (as libzmq).
        let mut h = Handshake::new(target("a:1"), b"u", b"p").unwrap();
        drain(&mut h);
        assert_eq!(h.feed(&[5, 0]), Ok(2));
        assert_eq!(drain(&mut h)[..4], [5, 1, 0, 3]);
    }

    #[test]
    fn auth_failure() {
        let mut h = Handshake::new(target("a:1"), b"u", b"p").unwrap();
        drain(&mut h);
        h.feed(&[5, 2]).unwrap();
        drain(&mut h);
        assert_eq!(h.feed(&[1, 1]), Err(SocksError::AuthFailed(1)));
        let mut h = Handshake::new(target("a:1"), b"u", b"p").unwrap();
        drain(&mut h);
        h.feed(&[5, 2]).unwrap();
        drain(&mut h);
        assert_eq!(h.feed(&[5, 0]), Err(SocksError::BadAuthVersion(5)));
    }

    #[test]
    fn bad_choices() {
        let fresh = || {
            let mut h = Handshake::new(target("a:1"), b"", b"").unwrap();
            drain(&mut h);
            h
        };
        assert_eq!(fresh().feed(&[4, 0]), Err(SocksError::BadVersion(4)));
        assert_eq!(
            fresh().feed(&[5, 0xff]),
            Err(SocksError::NoAcceptableMethod)
        );
        // User/pass chosen though no credentials were offered.
        assert_eq!(fresh().feed(&[5, 2]), Err(SocksError::UnexpectedMethod(2)));
        assert_eq!(fresh().feed(&[5, 1]), Err(SocksError::UnexpectedMethod(1)));
        // The version byte is checked as soon as it arrives.
        assert_eq!(fresh().feed(&[0]), Err(SocksError::BadVersion(0)));
    }

    #[test]
    fn malformed_replies() {
        let reply = |bytes: &[u8]| {
            let (mut h, _) = to_request("a:1");
            h.feed(bytes)
        };
        assert_eq!(reply(&[4]), Err(SocksError::BadVersion(4)));
        assert_eq!(reply(&[5, 9]), Err(SocksError::BadReplyCode(9)));
        assert_eq!(reply(&[5, 0xff, 0, 1]), Err(SocksError::BadReplyCode(0xff)));
        for code in 1..=8 {
            assert_eq!(reply(&[5, code, 0, 1]), Err(SocksError::Rejected(code)));
        }
        assert_eq!(reply(&[5, 0, 1, 1]), Err(SocksError::BadReserved(1)));
        for atyp in [0, 2, 5, 0xff] {
            assert_eq!(
                reply(&[5, 0, 0, atyp, 0]),
                Err(SocksError::BadAddressType(atyp))
            );
        }
        // A short reply is just incomplete.
        let (mut h, _) = to_request("a:1");
        assert_eq!(h.feed(&[5, 0, 0, 1, 127, 0]), Ok(6));
        assert!(!h.is_done());
        assert_eq!(h.wanted(), 4);
    }

    #[test]
    fn bad_credentials_and_nothing_to_read_before_sending() {
        let long = vec![b'x'; 256];
        assert_eq!(
            Handshake::new(target("a:1"), &long, b"").err(),
            Some(SocksError::CredentialTooLong)
        );
        assert_eq!(
            Handshake::new(target("a:1"), b"u", &long).err(),
            Some(SocksError::CredentialTooLong)
        );
        // A long password without a username is unused (no auth), as in libzmq.
        assert!(Handshake::new(target("a:1"), b"", &long).is_ok());
        // Input before the greeting went out is not taken.
        let mut h = Handshake::new(target("a:1"), b"", b"").unwrap();
        assert_eq!(h.feed(&[5, 0]), Ok(0));
    }

    #[test]
    fn errors_display() {
        assert!(SocksError::Rejected(5).to_string().contains("refused"));
        assert!(SocksError::AuthFailed(1)
            .to_string()
            .contains("authentication"));
    }
}

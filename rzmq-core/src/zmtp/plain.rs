//! The PLAIN mechanism's commands (RFC 24 over ZMTP 3.1): `HELLO`, `WELCOME` and `INITIATE`.
//!
//! A PLAIN client sends `HELLO` with its user name and password; the server asks its ZAP handler
//! and answers `WELCOME` (or `ERROR`); the client sends `INITIATE` with its metadata and the server
//! answers `READY` with its own. The checks follow libzmq 4.3.5's `plain_server_t` and
//! `plain_client_t`: `HELLO` must hold exactly the two length-prefixed fields, `WELCOME` must have
//! no data. Parsers never panic on peer input.

use super::command;
use super::error::ZmtpError;

/// `HELLO` command name.
pub(crate) const HELLO: &[u8] = b"HELLO";
/// `WELCOME` command name.
pub(crate) const WELCOME: &[u8] = b"WELCOME";
/// `INITIATE` command name.
pub(crate) const INITIATE: &[u8] = b"INITIATE";

/// Longest user name or password PLAIN can carry (a 1-byte length).
pub(crate) const MAX_CREDENTIAL_LEN: usize = 255;

/// PLAIN credentials: what a client presents, what a server received (`Debug` hides the password).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The user name (0 to 255 bytes).
    pub username: Vec<u8>,
    /// The password (0 to 255 bytes).
    pub password: Vec<u8>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &String::from_utf8_lossy(&self.username))
            .field("password", &"<hidden>")
            .finish()
    }
}

/// The `HELLO` body for `username` and `password`, each cut to 255 bytes (the socket options
/// refuse longer ones before they get here).
pub(crate) fn hello_body(username: &[u8], password: &[u8]) -> Vec<u8> {
    let u = &username[..username.len().min(MAX_CREDENTIAL_LEN)];
    let p = &password[..password.len().min(MAX_CREDENTIAL_LEN)];
    command::body(HELLO, &[&[u.len() as u8], u, &[p.len() as u8], p])
}

/// The `WELCOME` body (no data).
pub(crate) fn welcome_body() -> Vec<u8> {
    command::body(WELCOME, &[])
}

/// Parses a `HELLO` command body (name included) as libzmq's PLAIN server does: a body too short
/// for its own name is `MalformedCommand`, another command is `UnexpectedCommand`, missing,
/// truncated or trailing credential bytes are `MalformedHello`.
pub(crate) fn parse_hello(body: &[u8]) -> Result<Credentials, ZmtpError> {
    // libzmq's check_basic_command_structure: more than one byte, longer than the name length.
    match body.first() {
        Some(&n) if body.len() > 1 && body.len() > usize::from(n) => {}
        _ => return Err(ZmtpError::MalformedCommand),
    }
    match command::parse(body) {
        Some((HELLO, data)) => {
            let (user, rest) = length_prefixed(data).ok_or(ZmtpError::MalformedHello)?;
            let (pass, rest) = length_prefixed(rest).ok_or(ZmtpError::MalformedHello)?;
            if !rest.is_empty() {
                return Err(ZmtpError::MalformedHello);
            }
            Ok(Credentials {
                username: user.to_vec(),
                password: pass.to_vec(),
            })
        }
        _ => Err(ZmtpError::UnexpectedCommand),
    }
}

fn length_prefixed(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&n, rest) = data.split_first()?;
    let n = usize::from(n);
    (rest.len() >= n).then(|| rest.split_at(n))
}

/// What a PLAIN client received from its server during the handshake.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ServerCommand<'a> {
    /// `WELCOME` (its data must be empty).
    Welcome,
    /// `READY` with its metadata.
    Ready(&'a [u8]),
    /// `ERROR` with its reason.
    Error(&'a [u8]),
}

/// Classifies a command a PLAIN client received: `WELCOME` with data is `MalformedWelcome`, a
/// malformed `ERROR` is `MalformedError`, anything else is `UnexpectedCommand`.
pub(crate) fn parse_server_command(body: &[u8]) -> Result<ServerCommand<'_>, ZmtpError> {
    match command::parse(body) {
        Some((WELCOME, [])) => Ok(ServerCommand::Welcome),
        Some((WELCOME, _)) => Err(ZmtpError::MalformedWelcome),
        Some((command::READY, data)) => Ok(ServerCommand::Ready(data)),
        Some((command::ERROR, data)) => command::parse_error(data)
            .map(ServerCommand::Error)
            .ok_or(ZmtpError::MalformedError),
        _ => Err(ZmtpError::UnexpectedCommand),
    }
}

/// The metadata of an `INITIATE` command body; another command is `UnexpectedCommand`.
pub(crate) fn parse_initiate(body: &[u8]) -> Result<&[u8], ZmtpError> {
    match command::parse(body) {
        Some((INITIATE, data)) => Ok(data),
        _ => Err(ZmtpError::UnexpectedCommand),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip_and_layout() {
        let b = hello_body(b"admin", b"secret");
        assert_eq!(b, b"\x05HELLO\x05admin\x06secret".to_vec());
        let c = parse_hello(&b).unwrap();
        assert_eq!(c.username, b"admin");
        assert_eq!(c.password, b"secret");
        assert!(!format!("{c:?}").contains("secret"));
        let empty = parse_hello(&hello_body(b"", b"")).unwrap();
        assert!(empty.username.is_empty() && empty.password.is_empty());
    }

    #[test]
    fn oversized_credentials_are_cut_to_255() {
        let b = hello_body(&[b'u'; 300], &[b'p'; 256]);
        let c = parse_hello(&b).unwrap();
        assert_eq!(c.username.len(), 255);
        assert_eq!(c.password.len(), 255);
    }

    #[test]
    fn malformed_hellos() {
        assert_eq!(parse_hello(b""), Err(ZmtpError::MalformedCommand));
        assert_eq!(parse_hello(b"\x05"), Err(ZmtpError::MalformedCommand));
        assert_eq!(parse_hello(b"\x05HELL"), Err(ZmtpError::MalformedCommand));
        assert_eq!(parse_hello(b"\x05HELLO"), Err(ZmtpError::MalformedHello));
        assert_eq!(
            parse_hello(b"\x05READY\x00\x00"),
            Err(ZmtpError::UnexpectedCommand)
        );
        // No user name, a truncated one, no password, a truncated one, trailing bytes.
        for bad in [
            &b"\x05HELLO\x04ab"[..],
            b"\x05HELLO\x01a",
            b"\x05HELLO\x01a\x03xy",
            b"\x05HELLO\x01a\x01xy",
            b"\x05HELLO\x00\x00\x00",
        ] {
            assert_eq!(parse_hello(bad), Err(ZmtpError::MalformedHello), "{bad:?}");
        }
        // A 255-byte length with 254 bytes behind it.
        let mut t = b"\x05HELLO\xff".to_vec();
        t.extend_from_slice(&[b'x'; 254]);
        assert_eq!(parse_hello(&t), Err(ZmtpError::MalformedHello));
    }

    #[test]
    fn server_commands() {
        assert_eq!(
            parse_server_command(&welcome_body()),
            Ok(ServerCommand::Welcome)
        );
        assert_eq!(
            parse_server_command(b"\x07WELCOMEx"),
            Err(ZmtpError::MalformedWelcome)
        );
        assert_eq!(
            parse_server_command(b"\x05READYabc"),
            Ok(ServerCommand::Ready(b"abc"))
        );
        assert_eq!(
            parse_server_command(&command::error_body(b"400")),
            Ok(ServerCommand::Error(b"400"))
        );
        assert_eq!(
            parse_server_command(b"\x05ERROR\x05ab"),
            Err(ZmtpError::MalformedError)
        );
        assert_eq!(
            parse_server_command(b"\x05HELLO\x00\x00"),
            Err(ZmtpError::UnexpectedCommand)
        );
        assert_eq!(parse_server_command(b""), Err(ZmtpError::UnexpectedCommand));
        assert_eq!(parse_initiate(b"\x08INITIATEzz"), Ok(&b"zz"[..]));
        assert_eq!(
            parse_initiate(b"\x05READY"),
            Err(ZmtpError::UnexpectedCommand)
        );
    }
}

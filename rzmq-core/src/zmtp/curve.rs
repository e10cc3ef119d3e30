//! The CURVE security mechanism (ZMTP 3.1 with RFC 26 CurveZMQ), sans-IO, byte-compatible with
//! libzmq 4.3.5 built with libsodium (`curve_client.cpp`, `curve_server.cpp`,
//! `curve_mechanism_base.cpp`, `curve_client_tools.hpp`).
//!
//! # Wire layout (command bodies; `+` is concatenation, `Box[x](A->B)` is NaCl's `crypto_box` of
//! `x` from A's secret key to B's public key, sent as its 16-byte tag then the ciphertext)
//! ```text
//! HELLO    (200)  "\x05HELLO" 01 00, 72 zero bytes, C', short nonce,
//!                 Box[64 zero bytes](C'->S)                      nonce "CurveZMQHELLO---" + short
//! WELCOME  (168)  "\x07WELCOME", long nonce, Box[S' + cookie](S->C')   nonce "WELCOME-" + long
//!                 cookie = cookie nonce (16) + SecretBox[C' + s'](t)  nonce "COOKIE--" + 16
//! INITIATE (>=257) "\x08INITIATE", cookie, short nonce,
//!                 Box[C + vouch nonce + vouch + metadata](C'->S')  nonce "CurveZMQINITIATE" + short
//!                 vouch = Box[C' + S](C->S')                      nonce "VOUCH---" + 16
//! READY    (>=30) "\x05READY", short nonce, Box[metadata](S'->C')  nonce "CurveZMQREADY---" + short
//! ERROR           "\x05ERROR", reason length, reason (plain text, a ZAP status code)
//! MESSAGE         "\x07MESSAGE", short nonce, Box[flags + body](C'->S' or S'->C'), nonce prefix
//!                 "CurveZMQMESSAGEC" (client to server) or "CurveZMQMESSAGES"
//! ```
//! Short nonces are 8-byte big-endian counters. Each side counts from 1 (the client's `HELLO` is
//! 1, its `INITIATE` 2; the server's `READY` is 1) and every `MESSAGE` nonce must be larger than
//! the peer's previous one (libzmq's rule; we also require the `INITIATE` nonce to exceed the
//! `HELLO` nonce). After the handshake every frame, commands (`PING`, `SUBSCRIBE`, ...) included,
//! travels as a `MESSAGE` whose first plaintext byte carries libzmq's message flags (bit 0 MORE,
//! bit 1 COMMAND); like libzmq we send `MESSAGE` in a ZMTP frame with no flags and accept any.
//!
//! # Errors
//! As libzmq, each failure maps to a `ZMQ_PROTOCOL_ERROR_ZMTP_*` code reported with
//! `ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL` ([`CurveError::protocol_code`]). X25519 results that are
//! all zero (a zero or low-order public key) are rejected, as libsodium's `crypto_box_beforenm`
//! does. The server checks that the vouch names both the client's transient key and its own
//! long-term key (libzmq checks only the former; RFC 26 asks for both). Secrets are wiped on drop.
//! The boxes themselves (NaCl's XSalsa20-Poly1305) are [`super::secretbox`]'s.
//!
//! # Authentication (ZAP)
//! The server pauses after `INITIATE`: [`Handshake::on_command`] returns [`Step::Initiated`] with
//! the client's long-term public key (the ZAP credential, mechanism `"CURVE"`) and its metadata.
//! The caller then answers [`Handshake::accept`] (our `READY` and the message codec) or
//! [`Handshake::reject`] (an `ERROR` with the ZAP status code); a command arriving in between fails
//! with `ZMQ_PROTOCOL_ERROR_ZMTP_UNSPECIFIED`, as in libzmq. [`super::Connection`] asks ZAP
//! whenever a handler is bound (whatever `ZMQ_ZAP_DOMAIN` says, as libzmq 4.3.5); without one it
//! accepts every client that knows the server key (the "stonehouse" pattern) unless
//! `ZMQ_ZAP_ENFORCE_DOMAIN` is set.

use std::fmt;

use curve25519_dalek::montgomery::MontgomeryPoint;
use salsa20::cipher::consts::U10;
use zeroize::{Zeroize, Zeroizing};

use super::codec::{FLAG_COMMAND, FLAG_LONG, FLAG_MORE};
use super::command;
use super::error::{
    ZmtpError, PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC, PROTOCOL_ERROR_ZMTP_INVALID_METADATA,
    PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE, PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE,
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO, PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE,
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE, PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY,
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED, PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND,
    PROTOCOL_ERROR_ZMTP_UNSPECIFIED,
};
use super::secretbox::{SecretBox, NONCE_LEN};
use crate::curve_keys::{self, KEY_LEN};
use crate::msg::Msg;

const HELLO: &[u8] = b"\x05HELLO";
const WELCOME: &[u8] = b"\x07WELCOME";
const INITIATE: &[u8] = b"\x08INITIATE";
const READY: &[u8] = b"\x05READY";
const ERROR: &[u8] = b"\x05ERROR";
const MESSAGE: &[u8] = b"\x07MESSAGE";

const HELLO_NONCE: &[u8; 16] = b"CurveZMQHELLO---";
const WELCOME_NONCE: &[u8; 8] = b"WELCOME-";
const COOKIE_NONCE: &[u8; 8] = b"COOKIE--";
const INITIATE_NONCE: &[u8; 16] = b"CurveZMQINITIATE";
const VOUCH_NONCE: &[u8; 8] = b"VOUCH---";
const READY_NONCE: &[u8; 16] = b"CurveZMQREADY---";
const MESSAGE_NONCE_C: &[u8; 16] = b"CurveZMQMESSAGEC";
const MESSAGE_NONCE_S: &[u8; 16] = b"CurveZMQMESSAGES";

/// Length of a `HELLO` body.
const HELLO_LEN: usize = 200;
/// Length of a `WELCOME` body.
const WELCOME_LEN: usize = 168;
/// Shortest `INITIATE` body (no metadata).
const INITIATE_MIN: usize = 257;
/// Shortest `READY` body (no metadata).
const READY_MIN: usize = 30;
/// Poly1305 tag length (`crypto_box_MACBYTES`).
const TAG_LEN: usize = 16;
/// `MESSAGE` body bytes before the boxed flags byte: name, short nonce, tag.
const MESSAGE_HEADER: usize = MESSAGE.len() + 8 + TAG_LEN;
/// libzmq's message flags inside a `MESSAGE` box.
const MSG_MORE: u8 = 0x01;
const MSG_COMMAND: u8 = 0x02;

/// A socket's CURVE keys (`ZMQ_CURVE_PUBLICKEY`, `ZMQ_CURVE_SECRETKEY`, `ZMQ_CURVE_SERVERKEY`);
/// a server uses only its secret key. The secret is wiped on drop and not shown by `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CurveKeys {
    /// Our long-term public key (C for a client).
    pub public_key: [u8; KEY_LEN],
    /// Our long-term secret key (c or s).
    pub secret_key: [u8; KEY_LEN],
    /// The server's long-term public key (S), for a client.
    pub server_key: [u8; KEY_LEN],
}

impl fmt::Debug for CurveKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurveKeys")
            .field("public_key", &self.public_key)
            .field("secret_key", &"<secret>")
            .field("server_key", &self.server_key)
            .finish()
    }
}

impl Drop for CurveKeys {
    fn drop(&mut self) {
        self.secret_key.zeroize();
    }
}

/// Why a CURVE handshake or message failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CurveError {
    /// A command too short for its own name (libzmq's basic command structure check).
    MalformedCommand,
    /// Not the command this step expects.
    UnexpectedCommand,
    /// `HELLO` of the wrong size or CurveZMQ version.
    MalformedHello,
    /// `INITIATE` shorter than 257 bytes.
    MalformedInitiate,
    /// `READY` shorter than 30 bytes.
    MalformedReady,
    /// `MESSAGE` too short to hold a box.
    MalformedMessage,
    /// A short nonce not larger than the peer's previous one (replay or reordering).
    InvalidSequence,
    /// The vouch does not name the client's transient key and the server's key.
    KeyExchange,
    /// A box or the cookie does not open (wrong key, tampering), or a key is zero or of low order.
    Cryptographic,
    /// The metadata of the server's `READY` is malformed or names an incompatible socket type.
    InvalidMetadata,
    /// A command arrived while the server waited for the authentication decision.
    OutOfSequence,
    /// The operating system gave no random bytes.
    Random,
}

impl CurveError {
    /// The `ZMQ_PROTOCOL_ERROR_*` code libzmq 4.3.5 reports with
    /// `ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL` (None: no protocol event).
    pub fn protocol_code(self) -> Option<u32> {
        Some(match self {
            CurveError::MalformedCommand => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED,
            CurveError::UnexpectedCommand => PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND,
            CurveError::MalformedHello => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO,
            CurveError::MalformedInitiate => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE,
            CurveError::MalformedReady => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY,
            CurveError::MalformedMessage => PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE,
            CurveError::InvalidSequence => PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE,
            CurveError::KeyExchange => PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE,
            CurveError::Cryptographic => PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC,
            CurveError::InvalidMetadata => PROTOCOL_ERROR_ZMTP_INVALID_METADATA,
            CurveError::OutOfSequence => PROTOCOL_ERROR_ZMTP_UNSPECIFIED,
            CurveError::Random => return None,
        })
    }
}

impl fmt::Display for CurveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CurveError::MalformedCommand => "malformed command",
            CurveError::UnexpectedCommand => "unexpected command",
            CurveError::MalformedHello => "malformed HELLO",
            CurveError::MalformedInitiate => "malformed INITIATE",
            CurveError::MalformedReady => "malformed READY",
            CurveError::MalformedMessage => "malformed MESSAGE",
            CurveError::InvalidSequence => "nonce not increasing (replayed or reordered)",
            CurveError::KeyExchange => "vouch does not match the key exchange",
            CurveError::Cryptographic => "box does not open (wrong key or tampered) or bad key",
            CurveError::InvalidMetadata => "invalid metadata in READY",
            CurveError::OutOfSequence => "command while authentication is pending",
            CurveError::Random => "no randomness from the operating system",
        })
    }
}

impl std::error::Error for CurveError {}

impl From<CurveError> for ZmtpError {
    fn from(e: CurveError) -> ZmtpError {
        ZmtpError::Curve(e)
    }
}

// ----- crypto_box primitives -----------------------------------------------------------------

/// `crypto_box_beforenm`: X25519(secret, public) through HSalsa20, as a secretbox cipher. An
/// all-zero shared point (zero or low-order public key) fails, as in libsodium.
fn precompute(public: &[u8; KEY_LEN], secret: &[u8; KEY_LEN]) -> Result<Cipher, CurveError> {
    let shared = Zeroizing::new(MontgomeryPoint(*public).mul_clamped(*secret).to_bytes());
    // No early exit: the check does not leak which byte is non-zero.
    if shared.iter().fold(0u8, |acc, &b| acc | b) == 0 {
        return Err(CurveError::Cryptographic);
    }
    let mut key = salsa20::hsalsa::<U10>((&*shared).into(), &Default::default());
    let cipher = Cipher(SecretBox::new(&key.into()));
    key.as_mut_slice().zeroize();
    Ok(cipher)
}

/// A precomputed `crypto_box` key (or a `crypto_secretbox` key): XSalsa20-Poly1305.
#[derive(Clone)]
struct Cipher(SecretBox);

impl Cipher {
    /// A cipher for a random key (the server's cookie key).
    fn random() -> Result<Cipher, CurveError> {
        let mut k = Zeroizing::new([0u8; KEY_LEN]);
        random(&mut k[..])?;
        Ok(Cipher(SecretBox::new(&k)))
    }

    /// Boxes `plaintext` into `out` as tag then ciphertext (libzmq's wire form of a box).
    fn seal_into(&self, nonce: &Nonce, plaintext: &[u8], out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0u8; TAG_LEN]);
        out.extend_from_slice(plaintext);
        self.seal_in_place(nonce, out, at);
    }

    /// Encrypts `buf[at + TAG_LEN..]` in place and writes its tag at `buf[at..at + TAG_LEN]`.
    fn seal_in_place(&self, nonce: &Nonce, buf: &mut [u8], at: usize) {
        let (head, body) = buf.split_at_mut(at + TAG_LEN);
        head[at..].copy_from_slice(&self.0.seal(nonce, body));
    }

    /// Opens a box (tag then ciphertext); the plaintext is wiped on drop.
    fn open(&self, nonce: &Nonce, boxed: &[u8]) -> Result<Zeroizing<Vec<u8>>, CurveError> {
        if boxed.len() < TAG_LEN {
            return Err(CurveError::Cryptographic);
        }
        let (tag, ct) = boxed.split_at(TAG_LEN);
        let mut pt = Zeroizing::new(ct.to_vec());
        self.0
            .open(nonce, &mut pt, tag.try_into().expect("TAG_LEN bytes"))
            .map_err(|_| CurveError::Cryptographic)?;
        Ok(pt)
    }
}

/// A box's 24-byte nonce.
type Nonce = [u8; NONCE_LEN];

/// A 24-byte nonce: `prefix` then `tail`.
fn nonce(prefix: &[u8], tail: &[u8]) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[..prefix.len()].copy_from_slice(prefix);
    n[prefix.len()..].copy_from_slice(tail);
    n
}

fn random(buf: &mut [u8]) -> Result<(), CurveError> {
    curve_keys::random_bytes(buf).map_err(|_| CurveError::Random)
}

fn key_at(b: &[u8], at: usize) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k.copy_from_slice(&b[at..at + KEY_LEN]);
    k
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut n = [0u8; 8];
    n.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(n)
}

/// Compares without an early exit (for secrets).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// libzmq's `check_basic_command_structure`: longer than one byte and than its name length.
fn check_structure(b: &[u8]) -> Result<(), CurveError> {
    match b.first() {
        Some(&n) if b.len() > 1 && b.len() > usize::from(n) => Ok(()),
        _ => Err(CurveError::MalformedCommand),
    }
}

/// A fresh transient key pair `(public, secret)`.
fn transient_keypair() -> Result<([u8; KEY_LEN], Zeroizing<[u8; KEY_LEN]>), CurveError> {
    curve_keys::generate_keypair().map_err(|_| CurveError::Random)
}

// ----- MESSAGE codec -------------------------------------------------------------------------

/// Boxes outgoing frames as `MESSAGE` commands with increasing short nonces.
pub(crate) struct Sealer {
    cipher: Cipher,
    prefix: &'static [u8; 16],
    nonce: u64,
}

impl Sealer {
    /// Appends the ZMTP frame carrying `parts` (ZMTP `flags`: MORE, COMMAND) as a `MESSAGE`.
    pub(crate) fn seal_frame(&mut self, out: &mut Vec<u8>, flags: u8, parts: &[&[u8]]) {
        let body_len: usize = parts.iter().map(|p| p.len()).sum();
        let len = MESSAGE_HEADER + 1 + body_len;
        out.reserve(9 + len);
        if len > 255 {
            out.push(FLAG_LONG);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        } else {
            out.extend_from_slice(&[0, len as u8]);
        }
        let n = self.nonce;
        self.nonce = self.nonce.wrapping_add(1);
        out.extend_from_slice(MESSAGE);
        out.extend_from_slice(&n.to_be_bytes());
        let at = out.len();
        out.extend_from_slice(&[0u8; TAG_LEN]);
        let mut mflags = 0;
        if flags & FLAG_MORE != 0 {
            mflags |= MSG_MORE;
        }
        if flags & FLAG_COMMAND != 0 {
            mflags |= MSG_COMMAND;
        }
        let n = nonce(self.prefix, &n.to_be_bytes());
        if let [body] = parts {
            // One part (every message frame): encrypted on its way into `out`, no plain copy.
            let tag = self.cipher.0.seal_append(&n, mflags, body, out);
            out[at..at + TAG_LEN].copy_from_slice(&tag);
            return;
        }
        out.push(mflags);
        for p in parts {
            out.extend_from_slice(p);
        }
        self.cipher.seal_in_place(&n, out, at);
    }
}

/// Opens incoming `MESSAGE` commands, enforcing increasing short nonces.
pub(crate) struct Opener {
    cipher: Cipher,
    prefix: &'static [u8; 16],
    peer_nonce: u64,
}

impl Opener {
    /// Opens one received frame body; returns its ZMTP flags (MORE, COMMAND) and payload. The
    /// frame's own flags are ignored, as libzmq does. Decrypts in place when `msg` is not shared.
    pub(crate) fn open(&mut self, mut msg: Msg) -> Result<(u8, Msg), ZmtpError> {
        let d = msg.data();
        check_structure(d)?;
        if !d.starts_with(MESSAGE) {
            return Err(CurveError::UnexpectedCommand.into());
        }
        if d.len() < MESSAGE_HEADER + 1 {
            return Err(CurveError::MalformedMessage.into());
        }
        let short = u64_at(d, MESSAGE.len());
        if short <= self.peer_nonce {
            return Err(CurveError::InvalidSequence.into());
        }
        let n = nonce(self.prefix, &d[MESSAGE.len()..MESSAGE.len() + 8]);
        let tag: [u8; TAG_LEN] = d[MESSAGE_HEADER - TAG_LEN..MESSAGE_HEADER]
            .try_into()
            .expect("TAG_LEN bytes");
        let off = if msg.data_mut().is_some() {
            MESSAGE_HEADER
        } else {
            msg = Msg::copy_from(&msg.data()[MESSAGE_HEADER..]);
            0
        };
        let len = msg.len();
        let Some(buf) = msg.data_mut() else {
            return Err(CurveError::MalformedMessage.into());
        };
        self.cipher
            .0
            .open(&n, &mut buf[off..], &tag)
            .map_err(|_| CurveError::Cryptographic)?;
        self.peer_nonce = short;
        let mflags = buf[off];
        let mut flags = 0;
        if mflags & MSG_MORE != 0 {
            flags |= FLAG_MORE;
        }
        if mflags & MSG_COMMAND != 0 {
            flags |= FLAG_COMMAND;
        }
        let body = msg
            .slice(off + 1, len - off - 1)
            .ok_or(CurveError::MalformedMessage)?;
        Ok((flags, body))
    }
}

/// The message boxing of a completed handshake.
pub(crate) struct Codec {
    /// Boxes what we send.
    pub(crate) sealer: Sealer,
    /// Opens what the peer sends.
    pub(crate) opener: Opener,
}

// ----- handshake -----------------------------------------------------------------------------

/// What the peer's handshake command asks of the caller.
pub(crate) enum Step {
    /// Send this command body (WELCOME, INITIATE); the handshake goes on.
    Send(Vec<u8>),
    /// Server: the client proved its key. Authenticate it (ZAP: mechanism `"CURVE"`, the key as
    /// the one credential), validate `properties`, then [`Handshake::accept`] or
    /// [`Handshake::reject`].
    Initiated {
        /// The client's long-term public key (C).
        client_key: [u8; KEY_LEN],
        /// The client's metadata (ZMTP properties).
        properties: Zeroizing<Vec<u8>>,
    },
    /// Client: the server's `READY` arrived; validate `properties`, then exchange messages
    /// through `codec`.
    Ready {
        /// The server's metadata (ZMTP properties).
        properties: Zeroizing<Vec<u8>>,
        /// The message codec.
        codec: Codec,
    },
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Send(b) => write!(f, "Send({} bytes)", b.len()),
            Step::Initiated { client_key, .. } => write!(f, "Initiated({client_key:?})"),
            Step::Ready { .. } => f.write_str("Ready"),
        }
    }
}

/// One side of a CURVE handshake.
pub(crate) enum Handshake {
    /// We are the CURVE client.
    Client(Box<Client>),
    /// We are the CURVE server.
    Server(Box<Server>),
}

impl Handshake {
    /// Starts a handshake. `properties` is our metadata (`Socket-Type`, `Identity`, `X-...`) for
    /// `INITIATE` or `READY`. A client also returns its `HELLO`; it fails with
    /// [`CurveError::Cryptographic`] when the server key is zero or of low order (as libzmq).
    pub(crate) fn new(
        keys: &CurveKeys,
        as_server: bool,
        properties: Vec<u8>,
    ) -> Result<(Handshake, Option<Vec<u8>>), CurveError> {
        if as_server {
            Ok((
                Handshake::Server(Box::new(Server::new(keys, properties)?)),
                None,
            ))
        } else {
            let (c, hello) = Client::new(keys, properties)?;
            Ok((Handshake::Client(Box::new(c)), Some(hello)))
        }
    }

    /// Processes one handshake command body from the peer.
    pub(crate) fn on_command(&mut self, body: &[u8]) -> Result<Step, ZmtpError> {
        match self {
            Handshake::Client(c) => c.on_command(body),
            Handshake::Server(s) => s.on_command(body).map_err(ZmtpError::from),
        }
    }

    /// Server, after [`Step::Initiated`]: the client is accepted. Returns our `READY` body and
    /// the message codec.
    pub(crate) fn accept(&mut self) -> Result<(Vec<u8>, Codec), CurveError> {
        match self {
            Handshake::Server(s) => s.accept(),
            Handshake::Client(_) => Err(CurveError::UnexpectedCommand),
        }
    }

    /// Server, after [`Step::Initiated`]: the client is refused with a ZAP `status` (`"300"`,
    /// `"400"`, `"500"`). Returns the `ERROR` body to send before closing.
    pub(crate) fn reject(&mut self, status: &[u8]) -> Vec<u8> {
        if let Handshake::Server(s) = self {
            s.state = ServerState::Done;
        }
        command::error_body(status)
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ClientState {
    ExpectWelcome,
    ExpectReady,
    Done,
}

/// The client side (`curve_client_t`).
pub(crate) struct Client {
    state: ClientState,
    keys: CurveKeys,
    cn_public: [u8; KEY_LEN],
    cn_secret: Zeroizing<[u8; KEY_LEN]>,
    /// Box key C' to S (`HELLO`, `WELCOME`).
    hello_key: Cipher,
    /// Box key C' to S' (`INITIATE`, `READY`, messages).
    precom: Option<Cipher>,
    nonce: u64,
    properties: Vec<u8>,
}

impl Client {
    fn new(keys: &CurveKeys, properties: Vec<u8>) -> Result<(Client, Vec<u8>), CurveError> {
        let (cn_public, cn_secret) = transient_keypair()?;
        let hello_key = precompute(&keys.server_key, &cn_secret)?;
        let mut c = Client {
            state: ClientState::ExpectWelcome,
            keys: keys.clone(),
            cn_public,
            cn_secret,
            hello_key,
            precom: None,
            nonce: 1,
            properties,
        };
        let n = c.next_nonce();
        let mut hello = Vec::with_capacity(HELLO_LEN);
        hello.extend_from_slice(HELLO);
        hello.extend_from_slice(&[1, 0]);
        hello.extend_from_slice(&[0u8; 72]);
        hello.extend_from_slice(&c.cn_public);
        hello.extend_from_slice(&n.to_be_bytes());
        c.hello_key.seal_into(
            &nonce(HELLO_NONCE, &n.to_be_bytes()),
            &[0u8; 64],
            &mut hello,
        );
        debug_assert_eq!(hello.len(), HELLO_LEN);
        Ok((c, hello))
    }

    fn next_nonce(&mut self) -> u64 {
        let n = self.nonce;
        self.nonce = self.nonce.wrapping_add(1);
        n
    }

    fn on_command(&mut self, b: &[u8]) -> Result<Step, ZmtpError> {
        if b.starts_with(WELCOME) && self.state == ClientState::ExpectWelcome {
            let initiate = self.process_welcome(b)?;
            self.state = ClientState::ExpectReady;
            Ok(Step::Send(initiate))
        } else if b.starts_with(READY) && self.state == ClientState::ExpectReady {
            let step = self.process_ready(b)?;
            self.state = ClientState::Done;
            Ok(step)
        } else if b.starts_with(ERROR) && self.state != ClientState::Done {
            // libzmq: at least a reason length, which must fit; trailing bytes are ignored.
            let reason = command::parse(b)
                .and_then(|(_, data)| command::parse_error(data))
                .ok_or(ZmtpError::MalformedError)?;
            Err(ZmtpError::PeerError {
                reason: reason.to_vec(),
            })
        } else {
            Err(CurveError::UnexpectedCommand.into())
        }
    }

    fn process_welcome(&mut self, b: &[u8]) -> Result<Vec<u8>, CurveError> {
        // libzmq reports a WELCOME of the wrong size as a cryptographic error.
        if b.len() != WELCOME_LEN {
            return Err(CurveError::Cryptographic);
        }
        let pt = self
            .hello_key
            .open(&nonce(WELCOME_NONCE, &b[8..24]), &b[24..])?;
        let cn_server = key_at(&pt, 0);
        let cookie = &pt[32..128];
        let precom = precompute(&cn_server, &self.cn_secret)?;

        // vouch = Box[C' + S](C->S')
        let mut vouch_tail = [0u8; 16];
        random(&mut vouch_tail)?;
        let mut vouch_pt = Zeroizing::new([0u8; 64]);
        vouch_pt[..32].copy_from_slice(&self.cn_public);
        vouch_pt[32..].copy_from_slice(&self.keys.server_key);
        let vouch_key = precompute(&cn_server, &self.keys.secret_key)?;
        let mut vouch = Vec::with_capacity(80);
        vouch_key.seal_into(&nonce(VOUCH_NONCE, &vouch_tail), &vouch_pt[..], &mut vouch);

        // Box[C + vouch nonce + vouch + metadata](C'->S')
        let mut pt = Zeroizing::new(Vec::with_capacity(128 + self.properties.len()));
        pt.extend_from_slice(&self.keys.public_key);
        pt.extend_from_slice(&vouch_tail);
        pt.extend_from_slice(&vouch);
        pt.extend_from_slice(&self.properties);
        let n = self.next_nonce();
        let mut initiate = Vec::with_capacity(INITIATE_MIN + self.properties.len());
        initiate.extend_from_slice(INITIATE);
        initiate.extend_from_slice(cookie);
        initiate.extend_from_slice(&n.to_be_bytes());
        precom.seal_into(&nonce(INITIATE_NONCE, &n.to_be_bytes()), &pt, &mut initiate);
        self.precom = Some(precom);
        Ok(initiate)
    }

    fn process_ready(&mut self, b: &[u8]) -> Result<Step, CurveError> {
        if b.len() < READY_MIN {
            return Err(CurveError::MalformedReady);
        }
        let precom = self.precom.take().ok_or(CurveError::UnexpectedCommand)?;
        let peer_nonce = u64_at(b, 6);
        let properties = precom.open(&nonce(READY_NONCE, &b[6..14]), &b[14..])?;
        let codec = Codec {
            sealer: Sealer {
                cipher: precom.clone(),
                prefix: MESSAGE_NONCE_C,
                nonce: self.nonce,
            },
            opener: Opener {
                cipher: precom,
                prefix: MESSAGE_NONCE_S,
                peer_nonce,
            },
        };
        Ok(Step::Ready { properties, codec })
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ServerState {
    ExpectHello,
    ExpectInitiate,
    /// `INITIATE` accepted; waiting for [`Handshake::accept`] or [`Handshake::reject`].
    Authenticating,
    Done,
}

/// The server side (`curve_server_t`).
pub(crate) struct Server {
    state: ServerState,
    secret_key: Zeroizing<[u8; KEY_LEN]>,
    public_key: [u8; KEY_LEN],
    cn_public: [u8; KEY_LEN],
    cn_secret: Zeroizing<[u8; KEY_LEN]>,
    cn_client: [u8; KEY_LEN],
    cookie_key: Option<Cipher>,
    precom: Option<Cipher>,
    nonce: u64,
    peer_nonce: u64,
    properties: Vec<u8>,
}

impl Server {
    fn new(keys: &CurveKeys, properties: Vec<u8>) -> Result<Server, CurveError> {
        let (cn_public, cn_secret) = transient_keypair()?;
        Ok(Server {
            state: ServerState::ExpectHello,
            secret_key: Zeroizing::new(keys.secret_key),
            public_key: curve_keys::public_key(&keys.secret_key),
            cn_public,
            cn_secret,
            cn_client: [0; KEY_LEN],
            cookie_key: None,
            precom: None,
            nonce: 1,
            peer_nonce: 0,
            properties,
        })
    }

    fn on_command(&mut self, b: &[u8]) -> Result<Step, CurveError> {
        match self.state {
            ServerState::ExpectHello => {
                let welcome = self.process_hello(b)?;
                self.state = ServerState::ExpectInitiate;
                Ok(Step::Send(welcome))
            }
            ServerState::ExpectInitiate => {
                let step = self.process_initiate(b)?;
                self.state = ServerState::Authenticating;
                Ok(step)
            }
            ServerState::Authenticating | ServerState::Done => Err(CurveError::OutOfSequence),
        }
    }

    fn process_hello(&mut self, b: &[u8]) -> Result<Vec<u8>, CurveError> {
        check_structure(b)?;
        if !b.starts_with(HELLO) {
            return Err(CurveError::UnexpectedCommand);
        }
        if b.len() != HELLO_LEN || b[6] != 1 || b[7] != 0 {
            return Err(CurveError::MalformedHello);
        }
        // The 72 padding bytes are not checked (libzmq does not either).
        self.cn_client = key_at(b, 80);
        self.peer_nonce = u64_at(b, 112);
        let key = precompute(&self.cn_client, &self.secret_key)?;
        key.open(&nonce(HELLO_NONCE, &b[112..120]), &b[120..])?;

        // cookie = cookie nonce + SecretBox[C' + s'](t), t fresh for this connection
        let cookie_key = Cipher::random()?;
        let mut cookie_tail = [0u8; 16];
        random(&mut cookie_tail)?;
        let mut cookie_pt = Zeroizing::new([0u8; 64]);
        cookie_pt[..32].copy_from_slice(&self.cn_client);
        cookie_pt[32..].copy_from_slice(&self.cn_secret[..]);
        // Box[S' + cookie](S->C')
        let mut pt = Zeroizing::new(Vec::with_capacity(128));
        pt.extend_from_slice(&self.cn_public);
        pt.extend_from_slice(&cookie_tail);
        cookie_key.seal_into(&nonce(COOKIE_NONCE, &cookie_tail), &cookie_pt[..], &mut pt);
        let mut welcome_tail = [0u8; 16];
        random(&mut welcome_tail)?;
        let mut welcome = Vec::with_capacity(WELCOME_LEN);
        welcome.extend_from_slice(WELCOME);
        welcome.extend_from_slice(&welcome_tail);
        key.seal_into(&nonce(WELCOME_NONCE, &welcome_tail), &pt, &mut welcome);
        debug_assert_eq!(welcome.len(), WELCOME_LEN);
        self.cookie_key = Some(cookie_key);
        Ok(welcome)
    }

    fn process_initiate(&mut self, b: &[u8]) -> Result<Step, CurveError> {
        check_structure(b)?;
        if !b.starts_with(INITIATE) {
            return Err(CurveError::UnexpectedCommand);
        }
        if b.len() < INITIATE_MIN {
            return Err(CurveError::MalformedInitiate);
        }
        // The cookie must be ours and name this client's transient key and our own.
        let cookie_key = self
            .cookie_key
            .take()
            .ok_or(CurveError::UnexpectedCommand)?;
        let cookie = cookie_key.open(&nonce(COOKIE_NONCE, &b[9..25]), &b[25..105])?;
        if !ct_eq(&cookie[..32], &self.cn_client) || !ct_eq(&cookie[32..], &self.cn_secret[..]) {
            return Err(CurveError::Cryptographic);
        }
        let short = u64_at(b, 105);
        if short <= self.peer_nonce {
            return Err(CurveError::InvalidSequence);
        }
        self.peer_nonce = short;
        let precom = precompute(&self.cn_client, &self.cn_secret)?;
        let mut pt = precom.open(&nonce(INITIATE_NONCE, &b[105..113]), &b[113..])?;
        let client_key = key_at(&pt, 0);
        let vouch_key = precompute(&client_key, &self.cn_secret)?;
        let vouch = vouch_key.open(&nonce(VOUCH_NONCE, &pt[32..48]), &pt[48..128])?;
        if vouch.len() != 64 || vouch[..32] != self.cn_client || vouch[32..] != self.public_key {
            return Err(CurveError::KeyExchange);
        }
        self.precom = Some(precom);
        let properties = Zeroizing::new(pt.split_off(128));
        Ok(Step::Initiated {
            client_key,
            properties,
        })
    }

    fn accept(&mut self) -> Result<(Vec<u8>, Codec), CurveError> {
        if self.state != ServerState::Authenticating {
            return Err(CurveError::OutOfSequence);
        }
        let precom = self.precom.take().ok_or(CurveError::OutOfSequence)?;
        self.state = ServerState::Done;
        let n = self.nonce;
        self.nonce += 1;
        let mut ready = Vec::with_capacity(READY_MIN + self.properties.len());
        ready.extend_from_slice(READY);
        ready.extend_from_slice(&n.to_be_bytes());
        precom.seal_into(
            &nonce(READY_NONCE, &n.to_be_bytes()),
            &self.properties,
            &mut ready,
        );
        let codec = Codec {
            sealer: Sealer {
                cipher: precom.clone(),
                prefix: MESSAGE_NONCE_S,
                nonce: self.nonce,
            },
            opener: Opener {
                cipher: precom,
                prefix: MESSAGE_NONCE_C,
                peer_nonce: self.peer_nonce,
            },
        };
        Ok((ready, codec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmtp::codec::Decoder;
    use crate::zmtp::{Config, Connection, Event, Mechanism, SocketType};
    use std::time::Instant;

    struct Pair {
        server_secret: [u8; 32],
        client: CurveKeys,
    }

    fn keys() -> Pair {
        let (sp, ss) = curve_keys::generate_keypair().unwrap();
        let (cp, cs) = curve_keys::generate_keypair().unwrap();
        Pair {
            server_secret: *ss,
            client: CurveKeys {
                public_key: cp,
                secret_key: *cs,
                server_key: sp,
            },
        }
    }

    fn server_keys(p: &Pair) -> CurveKeys {
        CurveKeys {
            secret_key: p.server_secret,
            ..CurveKeys::default()
        }
    }

    const CPROPS: &[u8] = b"\x0bSocket-Type\x00\x00\x00\x06DEALER";
    const SPROPS: &[u8] = b"\x0bSocket-Type\x00\x00\x00\x06ROUTER";

    /// Runs a handshake; returns (client codec, server codec) or the first error.
    fn handshake(p: &Pair) -> (Codec, Codec) {
        let (mut c, hello) = Handshake::new(&p.client, false, CPROPS.to_vec()).unwrap();
        let hello = hello.unwrap();
        assert_eq!(hello.len(), HELLO_LEN);
        assert_eq!(&hello[..8], b"\x05HELLO\x01\x00");
        assert_eq!(u64_at(&hello, 112), 1);
        let (mut s, none) = Handshake::new(&server_keys(p), true, SPROPS.to_vec()).unwrap();
        assert!(none.is_none());
        let Ok(Step::Send(welcome)) = s.on_command(&hello) else {
            panic!("no WELCOME")
        };
        assert_eq!(welcome.len(), WELCOME_LEN);
        let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
            panic!("no INITIATE")
        };
        assert_eq!(initiate.len(), INITIATE_MIN + CPROPS.len());
        assert_eq!(u64_at(&initiate, 105), 2);
        let Ok(Step::Initiated {
            client_key,
            properties,
        }) = s.on_command(&initiate)
        else {
            panic!("INITIATE refused")
        };
        assert_eq!(client_key, p.client.public_key);
        assert_eq!(&properties[..], CPROPS);
        assert!(matches!(
            s.on_command(&initiate),
            Err(ZmtpError::Curve(CurveError::OutOfSequence))
        ));
        let (ready, scodec) = s.accept().unwrap();
        assert_eq!(ready.len(), READY_MIN + SPROPS.len());
        let Ok(Step::Ready { properties, codec }) = c.on_command(&ready) else {
            panic!("READY refused")
        };
        assert_eq!(&properties[..], SPROPS);
        (codec, scodec)
    }

    /// The first frame in `wire`: its flags and body.
    fn first_frame(mut wire: &[u8]) -> (u8, Msg) {
        let mut d = Decoder::new(-1);
        while !wire.is_empty() {
            let b = d.recv_buffer();
            let n = b.len().min(wire.len());
            b[..n].copy_from_slice(&wire[..n]);
            d.received(n);
            wire = &wire[n..];
        }
        d.next_frame().unwrap().unwrap()
    }

    fn frame_body(wire: &[u8]) -> Msg {
        let (flags, m) = first_frame(wire);
        assert_eq!(flags, 0, "MESSAGE goes in a frame with no flags, as libzmq");
        m
    }

    fn seal(s: &mut Sealer, flags: u8, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        s.seal_frame(&mut out, flags, &[body]);
        out
    }

    #[test]
    fn round_trip() {
        let p = keys();
        let (mut c, mut s) = handshake(&p);
        for (flags, body) in [
            (FLAG_MORE, b"hello".to_vec()),
            (0, Vec::new()),
            (FLAG_COMMAND, b"\x04PING\x00\x00".to_vec()),
            (0, vec![7u8; 300]),
            (FLAG_MORE, (0..100_000u32).map(|i| i as u8).collect()),
        ] {
            let wire = seal(&mut c.sealer, flags, &body);
            assert_eq!(&frame_body(&wire).data()[..8], MESSAGE);
            let (f, m) = s.opener.open(frame_body(&wire)).unwrap();
            assert_eq!((f, m.data()), (flags, &body[..]));
            let wire = seal(&mut s.sealer, flags, &body);
            let (f, m) = c.opener.open(frame_body(&wire)).unwrap();
            assert_eq!((f, m.data()), (flags, &body[..]));
        }
        // Client messages count on from INITIATE (2), server messages from READY (1).
        let wire = seal(&mut c.sealer, 0, b"x");
        assert_eq!(u64_at(frame_body(&wire).data(), 8), 8);
        let wire = seal(&mut s.sealer, 0, b"x");
        assert_eq!(u64_at(frame_body(&wire).data(), 8), 7);
    }

    #[test]
    fn shared_frames_are_copied_not_modified() {
        let p = keys();
        let (mut c, mut s) = handshake(&p);
        let wire = seal(&mut c.sealer, 0, &[5u8; 1000]);
        let m = frame_body(&wire);
        let keep = m.clone();
        let (_, out) = s.opener.open(m).unwrap();
        assert_eq!(out.data(), &[5u8; 1000][..]);
        assert_eq!(&keep.data()[..8], MESSAGE, "the shared input stays intact");
    }

    #[test]
    fn tampering_rejected() {
        let p = keys();
        let (mut c, mut s) = handshake(&p);
        let wire = seal(&mut c.sealer, 0, b"secret");
        for i in [2 + 16, 2 + 20, wire.len() - 1] {
            let mut w = wire.clone();
            w[i] ^= 1;
            assert_eq!(
                s.opener.open(frame_body(&w)).unwrap_err(),
                ZmtpError::Curve(CurveError::Cryptographic)
            );
        }
        // Reflecting the client's own message back to it fails (other nonce prefix).
        let wire = seal(&mut c.sealer, 0, b"again");
        assert_eq!(
            c.opener.open(frame_body(&wire)).unwrap_err(),
            ZmtpError::Curve(CurveError::Cryptographic)
        );
    }

    #[test]
    fn nonce_replay_rejected() {
        let p = keys();
        let (mut c, mut s) = handshake(&p);
        let first = seal(&mut c.sealer, 0, b"one");
        let second = seal(&mut c.sealer, 0, b"two");
        s.opener.open(frame_body(&second)).unwrap();
        for w in [&second, &first] {
            assert_eq!(
                s.opener.open(frame_body(w)).unwrap_err(),
                ZmtpError::Curve(CurveError::InvalidSequence)
            );
        }
    }

    #[test]
    fn malformed_messages() {
        let p = keys();
        let (_, mut s) = handshake(&p);
        let cases: [(&[u8], CurveError); 4] = [
            (b"\x07MESS", CurveError::MalformedCommand),
            (b"\x04PING\x00\x00", CurveError::UnexpectedCommand),
            (
                b"\x07MESSAGE\x00\x00\x00\x00\x00\x00\x00\x09tag",
                CurveError::MalformedMessage,
            ),
            (&[0u8], CurveError::MalformedCommand),
        ];
        for (body, want) in cases {
            assert_eq!(
                s.opener.open(Msg::copy_from(body)).unwrap_err(),
                ZmtpError::Curve(want)
            );
        }
    }

    #[test]
    fn wrong_server_key_rejected() {
        let p = keys();
        let mut bad = p.client.clone();
        bad.server_key = curve_keys::generate_keypair().unwrap().0;
        let (_, hello) = Handshake::new(&bad, false, Vec::new()).unwrap();
        let (mut s, _) = Handshake::new(&server_keys(&p), true, Vec::new()).unwrap();
        assert!(matches!(
            s.on_command(&hello.unwrap()),
            Err(ZmtpError::Curve(CurveError::Cryptographic))
        ));
        // A zero server key fails on the client at once, as libsodium's crypto_box does.
        bad.server_key = [0; 32];
        assert_eq!(
            Handshake::new(&bad, false, Vec::new()).err(),
            Some(CurveError::Cryptographic)
        );
    }

    #[test]
    fn wrong_client_keys_rejected() {
        let p = keys();
        for tweak in 0..2 {
            let mut k = p.client.clone();
            if tweak == 0 {
                k.public_key = [0; 32]; // vouch opens with a zero key: refused
            } else {
                k.secret_key = [9; 32]; // vouch boxed with a key not matching C
            }
            let (mut c, hello) = Handshake::new(&k, false, Vec::new()).unwrap();
            let (mut s, _) = Handshake::new(&server_keys(&p), true, Vec::new()).unwrap();
            let Ok(Step::Send(welcome)) = s.on_command(&hello.unwrap()) else {
                panic!()
            };
            let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
                panic!()
            };
            assert!(matches!(
                s.on_command(&initiate),
                Err(ZmtpError::Curve(CurveError::Cryptographic))
            ));
        }
    }

    #[test]
    fn malformed_handshake_commands() {
        let p = keys();
        let (mut c, hello) = Handshake::new(&p.client, false, CPROPS.to_vec()).unwrap();
        let hello = hello.unwrap();
        let server = || {
            Handshake::new(&server_keys(&p), true, Vec::new())
                .unwrap()
                .0
        };
        let err = |s: &mut Handshake, b: &[u8]| match s.on_command(b) {
            Err(ZmtpError::Curve(e)) => e,
            other => panic!("{:?}", other.err()),
        };
        assert_eq!(err(&mut server(), b"\x05HELLO"), CurveError::MalformedHello);
        assert_eq!(
            err(&mut server(), b"\x05HELL"),
            CurveError::MalformedCommand
        );
        let mut h = hello.clone();
        h[5] = b'X';
        assert_eq!(err(&mut server(), &h), CurveError::UnexpectedCommand);
        let mut h = hello.clone();
        h[6] = 2;
        assert_eq!(err(&mut server(), &h), CurveError::MalformedHello);
        let mut h = hello.clone();
        h[150] ^= 1;
        assert_eq!(err(&mut server(), &h), CurveError::Cryptographic);

        let mut s = server();
        let Ok(Step::Send(welcome)) = s.on_command(&hello) else {
            panic!()
        };
        let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
            panic!()
        };
        // WELCOME twice, READY of the wrong size, tampered READY.
        assert!(matches!(
            c.on_command(&welcome),
            Err(ZmtpError::Curve(CurveError::UnexpectedCommand))
        ));
        // A fresh client and server up to INITIATE.
        let fresh = || {
            let (mut c, hello) = Handshake::new(&p.client, false, Vec::new()).unwrap();
            let mut s = server();
            let Ok(Step::Send(welcome)) = s.on_command(&hello.unwrap()) else {
                panic!()
            };
            let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
                panic!()
            };
            (s, initiate)
        };
        let (mut s2, _) = fresh();
        assert_eq!(err(&mut s2, b"\x08INITIATE"), CurveError::MalformedInitiate);
        for (i, want) in [
            (5, CurveError::UnexpectedCommand),
            (30, CurveError::Cryptographic),
            (150, CurveError::Cryptographic),
            (250, CurveError::Cryptographic),
        ] {
            let (mut s3, mut bad) = fresh();
            bad[i] ^= 1;
            assert_eq!(err(&mut s3, &bad), want, "byte {i}");
        }
        // INITIATE with a nonce not above HELLO's.
        let (mut s4, mut bad) = fresh();
        bad[105..113].copy_from_slice(&1u64.to_be_bytes());
        assert_eq!(err(&mut s4, &bad), CurveError::InvalidSequence);

        let Ok(Step::Initiated { .. }) = s.on_command(&initiate) else {
            panic!()
        };
        let (ready, _) = s.accept().unwrap();
        assert!(matches!(
            c.on_command(&ready[..29]),
            Err(ZmtpError::Curve(CurveError::MalformedReady))
        ));
        let mut bad = ready.clone();
        bad[20] ^= 1;
        assert!(matches!(
            c.on_command(&bad),
            Err(ZmtpError::Curve(CurveError::Cryptographic))
        ));
        // ERROR from the server: a ZAP status; malformed ones are a protocol error.
        assert_eq!(
            c.on_command(b"\x05ERROR\x03400").unwrap_err().auth_status(),
            Some(400)
        );
        assert_eq!(
            c.on_command(b"\x05ERROR\x05400").unwrap_err(),
            ZmtpError::MalformedError
        );
    }

    #[test]
    fn reject_sends_error() {
        let p = keys();
        let (mut s, _) = Handshake::new(&server_keys(&p), true, Vec::new()).unwrap();
        assert_eq!(s.reject(b"400"), b"\x05ERROR\x03400");
        assert_eq!(s.accept().err(), Some(CurveError::OutOfSequence));
    }

    #[test]
    fn precompute_matches_crypto_box() {
        use crypto_box::aead::Aead;
        let p = keys();
        let ours = precompute(&p.client.server_key, &p.client.secret_key).unwrap();
        let theirs = crypto_box::SalsaBox::new(
            &crypto_box::PublicKey::from(p.client.server_key),
            &crypto_box::SecretKey::from(p.client.secret_key),
        );
        let n = nonce(HELLO_NONCE, &7u64.to_be_bytes());
        let mut mine = Vec::new();
        ours.seal_into(&n, b"the same bytes", &mut mine);
        assert_eq!(
            mine,
            theirs.encrypt((&n).into(), &b"the same bytes"[..]).unwrap()
        );
        assert_eq!(&ours.open(&n, &mine).unwrap()[..], b"the same bytes");
        // Low-order points give an all-zero shared secret: refused.
        let mut one = [0u8; 32];
        one[0] = 1;
        for low in [[0u8; 32], one] {
            assert!(precompute(&low, &p.client.secret_key).is_err());
        }
    }

    // ----- through Connection ----------------------------------------------------------------

    fn config(t: SocketType, keys: CurveKeys, as_server: bool) -> Config {
        let mut c = Config::new(t);
        c.mechanism = Mechanism::Curve;
        c.as_server = as_server;
        c.curve = keys;
        c
    }

    /// Moves bytes both ways until quiet; the first error says which side failed (true: `b`).
    fn try_pump(
        a: &mut Connection,
        b: &mut Connection,
        now: Instant,
    ) -> Result<(Vec<Event>, Vec<Event>), (bool, ZmtpError)> {
        let (mut ea, mut eb) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            let mut ab = Vec::new();
            a.write_to(&mut ab).unwrap();
            let mut ba = Vec::new();
            b.write_to(&mut ba).unwrap();
            if ab.is_empty() && ba.is_empty() {
                break;
            }
            eb.extend(b.handle_input(&ab, now).map_err(|e| (true, e))?);
            ea.extend(a.handle_input(&ba, now).map_err(|e| (false, e))?);
            // No ZAP handler is bound.
            for (side, c) in [(false, &mut *a), (true, &mut *b)] {
                if c.take_zap_request().is_some() {
                    c.zap_unavailable().map_err(|e| (side, e))?;
                }
            }
        }
        Ok((ea, eb))
    }

    /// A ZAP reply's frames (delimiter first) with `status`, `user_id` and no metadata.
    fn zap_reply(status: &[u8], user_id: &[u8]) -> Vec<Msg> {
        let parts: [&[u8]; 7] = [b"", b"1.0", b"1", status, b"", user_id, b""];
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut m = Msg::copy_from(p);
                m.set_more(i < 6);
                m
            })
            .collect()
    }

    /// Runs the handshake up to the server's ZAP request, which is returned.
    fn until_zap(
        cl: &mut Connection,
        sv: &mut Connection,
        now: Instant,
    ) -> crate::zmtp::ZapRequest {
        for _ in 0..10 {
            let mut ab = Vec::new();
            cl.write_to(&mut ab).unwrap();
            let mut ba = Vec::new();
            sv.write_to(&mut ba).unwrap();
            assert!(sv.handle_input(&ab, now).unwrap().is_empty());
            assert!(cl.handle_input(&ba, now).unwrap().is_empty());
            if let Some(req) = sv.take_zap_request() {
                return req;
            }
        }
        panic!("no ZAP request");
    }

    #[test]
    fn connection_zap_approves_with_user_id() {
        let p = keys();
        let now = Instant::now();
        let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
        let mut sv = Connection::new(config(SocketType::Router, server_keys(&p), true), now);
        let req = until_zap(&mut cl, &mut sv, now);
        assert_eq!(req.mechanism, "CURVE");
        assert_eq!(req.credentials, vec![p.client.public_key.to_vec()]);
        assert!(sv.zap_pending());
        // Nothing goes out while ZAP decides.
        let mut ba = Vec::new();
        sv.write_to(&mut ba).unwrap();
        assert!(ba.is_empty(), "READY held back until ZAP answers");
        assert_eq!(sv.zap_reply(&zap_reply(b"200", b"alice")).unwrap(), 200);
        let (ec, es) = pump(&mut cl, &mut sv, now);
        assert!(matches!(&ec[..], [Event::Ready(_)]));
        let [Event::Ready(peer)] = &es[..] else {
            panic!("server not ready: {es:?}");
        };
        assert_eq!(peer.metadata.get("User-Id"), Some(&b"alice"[..]));
        cl.send(Msg::copy_from(b"hi")).unwrap();
        let (_, es) = pump(&mut cl, &mut sv, now);
        assert!(matches!(&es[..], [Event::Message(m)] if m.data() == b"hi"));
    }

    #[test]
    fn connection_zap_refusal_reaches_the_client() {
        let p = keys();
        let now = Instant::now();
        for (status, sent) in [(&b"400"[..], true), (b"500", true), (b"300", false)] {
            let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
            let mut sv = Connection::new(config(SocketType::Router, server_keys(&p), true), now);
            until_zap(&mut cl, &mut sv, now);
            assert_eq!(
                u32::from(sv.zap_reply(&zap_reply(status, b"")).unwrap()),
                u32::from(status[0] - b'0') * 100
            );
            assert!(sv.is_rejected());
            let mut ba = Vec::new();
            sv.write_to(&mut ba).unwrap();
            assert_eq!(!ba.is_empty(), sent, "ERROR only for 400 and 500");
            if sent {
                let e = cl.handle_input(&ba, now).unwrap_err();
                assert_eq!(e.auth_status(), Some(u32::from(status[0] - b'0') * 100));
                assert!(cl.is_rejected());
            }
        }
    }

    #[test]
    fn connection_zap_pending_commands_and_enforced_domain() {
        let p = keys();
        let now = Instant::now();
        // A command while ZAP decides fails the server.
        let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
        let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
        until_zap(&mut cl, &mut sv, now);
        let e = sv
            .handle_input(&[0x04, 0x06, 0x05, b'H', b'E', b'L', b'L', b'O'], now)
            .unwrap_err();
        assert_eq!(e.protocol_code(), Some(PROTOCOL_ERROR_ZMTP_UNSPECIFIED));
        // No handler with ZMQ_ZAP_ENFORCE_DOMAIN: the server fails (EFAULT, as libzmq).
        let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
        let mut c = config(SocketType::Dealer, server_keys(&p), true);
        c.zap_enforce_domain = true;
        let mut sv = Connection::new(c, now);
        until_zap(&mut cl, &mut sv, now);
        assert_eq!(sv.zap_unavailable().unwrap_err(), ZmtpError::ZapUnavailable);
    }

    fn pump(a: &mut Connection, b: &mut Connection, now: Instant) -> (Vec<Event>, Vec<Event>) {
        try_pump(a, b, now).unwrap()
    }

    #[test]
    fn connection_round_trip() {
        let p = keys();
        let now = Instant::now();
        let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
        let mut sv = Connection::new(config(SocketType::Router, server_keys(&p), true), now);
        let (ec, es) = pump(&mut cl, &mut sv, now);
        assert!(
            matches!(&ec[..], [Event::Ready(peer)] if peer.socket_type == Some(SocketType::Router))
        );
        assert!(
            matches!(&es[..], [Event::Ready(peer)] if peer.socket_type == Some(SocketType::Dealer))
        );
        let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7) as u8).collect();
        let mut m = Msg::copy_from(b"head");
        m.set_more(true);
        cl.send(m).unwrap();
        cl.send(Msg::from_vec(big.clone())).unwrap();
        sv.send(Msg::copy_from(b"back")).unwrap();
        let mut wire = Vec::new();
        cl.write_to(&mut wire).unwrap();
        assert!(
            !wire.windows(4).any(|w| w == b"head"),
            "plaintext on the wire"
        );
        let got = sv.handle_input(&wire, now).unwrap();
        let bodies: Vec<(bool, Vec<u8>)> = got
            .iter()
            .map(|e| match e {
                Event::Message(m) => (m.more(), m.data().to_vec()),
                _ => panic!("not a message"),
            })
            .collect();
        assert_eq!(bodies, vec![(true, b"head".to_vec()), (false, big)]);
        let (ec, _) = pump(&mut cl, &mut sv, now);
        assert!(matches!(&ec[..], [Event::Message(m)] if m.data() == b"back"));
        // Subscriptions and heartbeats travel boxed too.
        cl.send_subscribe(b"topic", true).unwrap();
        let (_, es) = pump(&mut cl, &mut sv, now);
        assert!(matches!(&es[..], [Event::Message(m)] if m.data() == b"\x01topic"));
    }

    #[test]
    fn connection_wrong_key_fails_with_protocol_code() {
        let p = keys();
        let now = Instant::now();
        let mut k = p.client.clone();
        k.server_key = curve_keys::generate_keypair().unwrap().0;
        let mut cl = Connection::new(config(SocketType::Dealer, k, false), now);
        let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
        let (side, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
        assert!(side, "the server fails on HELLO");
        assert_eq!(e.protocol_code(), Some(PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC));
        // A zero server key fails the client right after the greeting.
        let mut k = p.client.clone();
        k.server_key = [0; 32];
        let mut cl = Connection::new(config(SocketType::Dealer, k, false), now);
        let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
        let (side, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
        assert!(!side);
        assert_eq!(e.protocol_code(), Some(PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC));
        // A NULL peer: mechanism mismatch.
        let mut cl = Connection::new(Config::new(SocketType::Dealer), now);
        let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
        let (_, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
        assert!(matches!(e, ZmtpError::MechanismMismatch { .. }));
    }

    #[test]
    fn connection_incompatible_socket_type() {
        let p = keys();
        let now = Instant::now();
        let mut cl = Connection::new(config(SocketType::Push, p.client.clone(), false), now);
        let mut sv = Connection::new(config(SocketType::Push, server_keys(&p), true), now);
        // The server finds the client's Socket-Type in INITIATE incompatible.
        let (side, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
        assert!(side);
        assert!(matches!(e, ZmtpError::IncompatibleSocketType { .. }));
    }

    /// Frames `body` as a command, as the peer would send it.
    fn command_frame(body: &[u8]) -> Vec<u8> {
        let mut q = crate::zmtp::codec::OutQueue::new();
        q.push_frame(FLAG_COMMAND, body);
        let mut out = Vec::new();
        q.write_to(&mut out).unwrap();
        out
    }

    #[test]
    fn connection_client_reports_bad_ready_metadata() {
        // A scripted server whose READY metadata is malformed: INVALID_METADATA, as libzmq.
        let p = keys();
        let now = Instant::now();
        let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
        let (mut srv, _) = Handshake::new(&server_keys(&p), true, b"\x05junk".to_vec()).unwrap();
        let mut wire = Vec::new();
        cl.write_to(&mut wire).unwrap();
        cl.handle_input(&crate::zmtp::greeting::encode(Mechanism::Curve), now)
            .unwrap();
        cl.write_to(&mut wire).unwrap();
        let (flags, hello) = first_frame(&wire[64..]);
        assert_eq!(flags, FLAG_COMMAND);
        let Ok(Step::Send(welcome)) = srv.on_command(hello.data()) else {
            panic!("HELLO refused")
        };
        cl.handle_input(&command_frame(&welcome), now).unwrap();
        wire.clear();
        cl.write_to(&mut wire).unwrap();
        let (flags, initiate) = first_frame(&wire);
        assert_eq!(flags, FLAG_COMMAND);
        let Ok(Step::Initiated { .. }) = srv.on_command(initiate.data()) else {
            panic!("INITIATE refused")
        };
        let (ready, _) = srv.accept().unwrap();
        let e = cl.handle_input(&command_frame(&ready), now).unwrap_err();
        assert_eq!(e, ZmtpError::Curve(CurveError::InvalidMetadata));
        assert_eq!(
            e.protocol_code(),
            Some(PROTOCOL_ERROR_ZMTP_INVALID_METADATA)
        );
    }
}

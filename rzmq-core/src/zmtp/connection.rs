//! One ZMTP session as a sans-IO state machine: bytes and time in, events and bytes out.
//!
//! States: greeting (ours is queued at creation, the peer's is checked as it arrives), handshake
//! (NULL: `READY` exchange; PLAIN: `HELLO`/`WELCOME`/`INITIATE`/`READY`; CURVE: the same four
//! commands, boxed, in `curve/`; NULL and the PLAIN and CURVE servers may wait for a ZAP reply),
//! ready (message frames both ways, `PING`/`PONG`, subscriptions), rejected (ZAP said no: input is
//! discarded until the peer leaves or the handshake times out, as libzmq), failed (every
//! call returns the same [`ZmtpError`]).

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::command;
use super::curve::{self, CurveKeys};
use super::error::{CurveError, ZmtpError};
use super::frame::{self, FLAG_COMMAND, FLAG_MORE};
use super::greeting::{self, Mechanism, PeerGreeting, GREETING_LEN};
use super::handshake::{self, Peer};
use super::plain::{self, Credentials};
use super::record;
use super::socket_type::SocketType;
use super::zap::{self, ZapRequest};
use crate::msg::{MetaRefs, Metadata, Msg};

/// The frame decoder as connections use it: CURVE is the one record cipher.
pub(crate) type Decoder = record::Decoder<curve::Opener>;
/// The send queue as connections use it (see [`Decoder`]).
pub(crate) type OutQueue = record::OutQueue<curve::Sealer>;

/// libzmq's default `ZMQ_HANDSHAKE_IVL`.
pub(super) const DEFAULT_HANDSHAKE_IVL: Duration = Duration::from_secs(30);

/// The reason sent in the `ERROR` command when the peer's socket type is incompatible.
pub(super) const INCOMPATIBLE_SOCKET_TYPE_REASON: &str = "Invalid socket type";

/// What a connection needs from the socket's options.
#[derive(Clone, Debug)]
pub struct Config {
    /// Our socket type (sent as `Socket-Type`, checked against the peer's).
    pub socket_type: SocketType,
    /// Our routing id (`ZMQ_ROUTING_ID`), sent as `Identity` by REQ, DEALER and ROUTER.
    pub routing_id: Vec<u8>,
    /// The security mechanism: `Mechanism::Null`, `Mechanism::Plain` or `Mechanism::Curve`.
    pub mechanism: Mechanism,
    /// `ZMQ_PLAIN_SERVER`/`ZMQ_CURVE_SERVER` role (libzmq sends the greeting's as-server byte as 0
    /// regardless, and so do we).
    pub as_server: bool,
    /// `ZMQ_PLAIN_USERNAME`/`ZMQ_PLAIN_PASSWORD`: what a PLAIN client sends in `HELLO`.
    pub plain: Credentials,
    /// `ZMQ_ZAP_DOMAIN`: a NULL socket asks ZAP only when it is set; a PLAIN server always asks.
    pub zap_domain: Vec<u8>,
    /// `ZMQ_ZAP_ENFORCE_DOMAIN`: a NULL socket with a domain fails when no handler is bound.
    pub zap_enforce_domain: bool,
    /// `ZMQ_MAXMSGSIZE`: largest frame accepted, -1 for no limit.
    pub maxmsgsize: i64,
    /// `ZMQ_METADATA` properties to send in `READY` (names normally start with `X-`).
    pub metadata: Vec<(String, Vec<u8>)>,
    /// `ZMQ_HEARTBEAT_IVL`: send a `PING` this often once ready (`None` or zero: never).
    pub heartbeat_ivl: Option<Duration>,
    /// `ZMQ_HEARTBEAT_TTL`: the TTL advertised in our `PING`s (deciseconds on the wire).
    pub heartbeat_ttl: Option<Duration>,
    /// `ZMQ_HEARTBEAT_TIMEOUT`: fail when nothing arrives this long after a `PING` (`None`: the
    /// heartbeat interval, as libzmq's -1; zero: never).
    pub heartbeat_timeout: Option<Duration>,
    /// `ZMQ_HANDSHAKE_IVL`: fail when the handshake takes longer (`None` or zero: never).
    pub handshake_ivl: Option<Duration>,
    /// The peer's address, added to the peer metadata as `Peer-Address` when given (as libzmq).
    pub peer_address: Option<String>,
    /// Properties of the connection itself added to the peer metadata (libzmq's private
    /// `__fd`, the source fd that `zmq_msg_get(ZMQ_SRCFD)` reports).
    pub local_properties: Vec<(String, Vec<u8>)>,
    /// CURVE keys (`ZMQ_CURVE_*KEY`), used when `mechanism` is `Mechanism::Curve`.
    pub curve: CurveKeys,
}

impl Config {
    /// A configuration with libzmq's defaults for `socket_type`.
    pub fn new(socket_type: SocketType) -> Config {
        Config {
            socket_type,
            routing_id: Vec::new(),
            mechanism: Mechanism::Null,
            as_server: false,
            plain: Credentials::default(),
            zap_domain: Vec::new(),
            zap_enforce_domain: false,
            maxmsgsize: -1,
            metadata: Vec::new(),
            heartbeat_ivl: None,
            heartbeat_ttl: None,
            heartbeat_timeout: None,
            handshake_ivl: Some(DEFAULT_HANDSHAKE_IVL),
            peer_address: None,
            local_properties: Vec::new(),
            curve: CurveKeys::default(),
        }
    }
}

/// Something the peer's input produced.
#[derive(Debug)]
pub enum Event {
    /// The handshake completed; data may flow both ways.
    Ready(Peer),
    /// A message frame (MORE flag and peer metadata set). Subscriptions arrive here too, in the
    /// form XPUB users see: first byte `0x01` (subscribe) or `0x00` (cancel), then the topic,
    /// whether the peer sent a `SUBSCRIBE`/`CANCEL` command (ZMTP 3.1) or such a message.
    Message(Msg),
    /// A command whose name starts with `EXTENSION_PREFIX` (rzmq's own, sent only to peers
    /// that advertised support): the raw command body, name included. Other unknown commands are
    /// ignored, as libzmq does.
    Command(Msg),
}

/// Command names with this prefix surface as [`Event::Command`] instead of being ignored.
pub(super) const EXTENSION_PREFIX: &[u8] = b"RZMQ-";

/// Splits a command body into its name and data (`None` when malformed).
pub(crate) fn parse_command(body: &[u8]) -> Option<(&[u8], &[u8])> {
    command::parse(body)
}

enum State {
    Greeting,
    Handshake(Box<Handshake>),
    Ready,
    /// ZAP refused the peer (status 300, 400 or 500): any `ERROR` is queued, input is discarded.
    Rejected,
    Failed(ZmtpError),
}

/// Where the security handshake stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Step {
    /// NULL; our `READY` is sent at once, or after ZAP approves.
    Null { ready_sent: bool },
    /// PLAIN client: `HELLO` sent, waiting for `WELCOME`.
    ClientWelcome,
    /// PLAIN client: `INITIATE` sent, waiting for `READY`.
    ClientReady,
    /// PLAIN server: waiting for `HELLO`.
    ServerHello,
    /// PLAIN server: `HELLO` received, waiting for the ZAP reply.
    ServerZap,
    /// PLAIN server: `WELCOME` sent, waiting for `INITIATE`.
    ServerInitiate,
    /// CURVE, either side: the commands go to the `curve` handshake of the connection.
    Curve,
    /// CURVE server: `INITIATE` received (the peer is in [`Handshake::peer`]), waiting for the
    /// ZAP reply.
    CurveZap,
    /// CURVE server: ZAP approved, our `READY` is queued and the codec installed; the handshake
    /// completes with [`Handshake::peer`].
    CurveAccepted,
}

struct Handshake {
    greeting: PeerGreeting,
    step: Step,
    /// NULL: the peer's `READY`, accepted while our own waits for ZAP; CURVE server: the
    /// client's `INITIATE` metadata, while ZAP decides.
    peer: Option<Peer>,
    /// Properties from the ZAP reply (`User-Id` and the handler's metadata).
    zap_props: Vec<(String, Vec<u8>)>,
}

/// One ZMTP 3.1 session, without I/O. See the module documentation for the driving loop.
pub struct Connection {
    cfg: Config,
    state: State,
    dec: Decoder,
    out: OutQueue,
    peer: Option<Peer>,
    md: MetaRefs,
    peer_v3_0: bool,
    last_recv: Instant,
    handshake_deadline: Option<Instant>,
    next_ping: Option<Instant>,
    timeout_deadline: Option<Instant>,
    ttl_deadline: Option<Instant>,
    /// The greeting after its signature, sent once the peer's signature has arrived (as libzmq
    /// does); None once sent.
    greeting_rest: Option<Vec<u8>>,
    /// A ZAP request the session has not taken yet.
    zap_request: Option<ZapRequest>,
    /// A ZAP request is out and its reply awaited.
    zap_pending: bool,
    /// The handshake ended in an authentication refusal (ours or the peer's `ERROR`).
    rejected: bool,
    /// The CURVE handshake in progress (steps [`Step::Curve`] and [`Step::CurveZap`]).
    curve: Option<Box<curve::Handshake>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Greeting => "greeting".to_string(),
            State::Handshake(h) => format!("handshake ({:?})", h.step),
            State::Ready => "ready".to_string(),
            State::Rejected => "rejected".to_string(),
            State::Failed(e) => format!("failed: {e}"),
        };
        f.debug_struct("Connection")
            .field("socket_type", &self.cfg.socket_type)
            .field("state", &state)
            .field("peer", &self.peer)
            .field("pending_output", &self.out.pending())
            .finish()
    }
}

fn nonzero(d: Option<Duration>) -> Option<Duration> {
    d.filter(|d| !d.is_zero())
}

impl Connection {
    /// A new session; our greeting is queued for transmission.
    pub fn new(cfg: Config, now: Instant) -> Connection {
        let mut out = OutQueue::new();
        let g = greeting::encode_with_routing_id(cfg.mechanism, cfg.routing_id.len());
        out.push_raw(&g[..greeting::SIGNATURE_LEN]);
        Connection {
            greeting_rest: Some(g[greeting::SIGNATURE_LEN..].to_vec()),
            state: State::Greeting,
            dec: Decoder::new(cfg.maxmsgsize),
            out,
            peer: None,
            md: MetaRefs::default(),
            peer_v3_0: false,
            last_recv: now,
            handshake_deadline: nonzero(cfg.handshake_ivl).map(|d| now + d),
            next_ping: None,
            timeout_deadline: None,
            ttl_deadline: None,
            zap_request: None,
            zap_pending: false,
            rejected: false,
            curve: None,
            cfg,
        }
    }

    /// Where the engine should `read()` next; never empty. Call [`Connection::poll_event`] until
    /// it returns `Ok(None)` before reading again, or undecoded input accumulates.
    pub fn recv_buffer(&mut self) -> &mut [u8] {
        self.dec.recv_buffer()
    }

    /// `n` bytes were written at the start of the last [`Connection::recv_buffer`] at `now`. Any
    /// received byte counts as traffic for the heartbeat timers. Fails only when the session has
    /// already failed.
    pub fn received(&mut self, n: usize, now: Instant) -> Result<(), ZmtpError> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        self.dec.received(n);
        if n > 0 {
            self.last_recv = now;
            self.timeout_deadline = None;
            self.ttl_deadline = None;
        }
        Ok(())
    }

    /// Decodes the next event from received bytes; `Ok(None)` when more input is needed. Handles
    /// the handshake and `PING`s on the way, which may queue output: check
    /// [`Connection::has_output`] afterwards. An error is fatal and sticky.
    pub fn poll_event(&mut self) -> Result<Option<Event>, ZmtpError> {
        loop {
            match &self.state {
                State::Ready => {
                    let (flags, mut msg) = match self.dec.next_frame() {
                        Ok(Some(f)) => f,
                        Ok(None) => return Ok(None),
                        Err(e) => return Err(self.fail(e)),
                    };
                    if flags & FLAG_COMMAND == 0 {
                        msg.set_more(flags & FLAG_MORE != 0);
                        msg.set_metadata(self.md.take());
                        return Ok(Some(Event::Message(msg)));
                    }
                    if let Some(ev) = self.on_command(&msg) {
                        return Ok(Some(ev));
                    }
                }
                State::Greeting => {
                    let pending = self.dec.pending();
                    let head = &pending[..pending.len().min(GREETING_LEN)];
                    let check = greeting::check(head, self.cfg.mechanism);
                    if check.is_ok() && head.len() >= greeting::SIGNATURE_LEN {
                        // The peer's signature is valid: the rest of our greeting follows.
                        if let Some(rest) = self.greeting_rest.take() {
                            self.out.push_raw(&rest);
                        }
                    }
                    match check {
                        Ok(None) => return Ok(None),
                        Ok(Some(g)) => {
                            self.dec.consume(GREETING_LEN);
                            self.on_greeting(g)?;
                        }
                        Err(e) => return Err(self.fail(e)),
                    }
                }
                State::Handshake(hs) => {
                    if let (Step::Null { ready_sent: true } | Step::CurveAccepted, Some(_)) =
                        (hs.step, &hs.peer)
                    {
                        // NULL: the peer's READY came while ZAP was deciding; CURVE: the client's
                        // INITIATE did. ZAP said yes.
                        if let Some(peer) = self.take_handshake_peer() {
                            return Ok(Some(Event::Ready(self.on_ready(peer))));
                        }
                    }
                    let (flags, msg) = match self.dec.next_frame() {
                        Ok(Some(f)) => f,
                        Ok(None) => return Ok(None),
                        Err(e) => return Err(self.fail(e)),
                    };
                    match self.handshake_frame(flags & FLAG_COMMAND != 0, msg.data()) {
                        Ok(Some(peer)) => return Ok(Some(Event::Ready(self.on_ready(peer)))),
                        Ok(None) => {}
                        Err(e) => {
                            if let (ZmtpError::IncompatibleSocketType { .. }, false) =
                                (&e, self.cfg.mechanism == Mechanism::Curve)
                            {
                                self.send_error(INCOMPATIBLE_SOCKET_TYPE_REASON);
                            }
                            if let ZmtpError::PeerError { .. } = e {
                                self.rejected = true;
                            }
                            return Err(self.fail(e));
                        }
                    }
                }
                State::Rejected => {
                    // Nothing the peer says matters any more; keep reading only to see it leave.
                    let n = self.dec.buffered();
                    self.dec.consume(n);
                    return Ok(None);
                }
                State::Failed(e) => return Err(e.clone()),
            }
        }
    }

    fn fail(&mut self, e: ZmtpError) -> ZmtpError {
        self.state = State::Failed(e.clone());
        e
    }

    fn on_greeting(&mut self, g: PeerGreeting) -> Result<(), ZmtpError> {
        self.peer_v3_0 = g.is_v3_0();
        let step = match (self.cfg.mechanism, self.cfg.as_server) {
            (Mechanism::Null, _) => {
                let zap = !self.cfg.zap_domain.is_empty();
                if zap {
                    self.request_zap("NULL", Vec::new());
                } else {
                    self.push_ready_command(command::READY);
                }
                Step::Null { ready_sent: !zap }
            }
            (Mechanism::Plain, false) => {
                let hello = plain::hello_body(&self.cfg.plain.username, &self.cfg.plain.password);
                self.out.push_frame(FLAG_COMMAND, &hello);
                Step::ClientWelcome
            }
            (Mechanism::Plain, true) => Step::ServerHello,
            (Mechanism::Curve, as_server) => {
                // Our properties go in INITIATE (client) or READY (server); a client says HELLO.
                let ready = command::properties_body(
                    command::READY,
                    self.cfg.socket_type,
                    &self.cfg.routing_id,
                    &self.cfg.metadata,
                );
                let props = ready[1 + command::READY.len()..].to_vec();
                let (hs, hello) = curve::Handshake::new(&self.cfg.curve, as_server, props)
                    .map_err(|e| self.fail(e.into()))?;
                if let Some(hello) = hello {
                    self.out.push_frame(FLAG_COMMAND, &hello);
                }
                self.curve = Some(Box::new(hs));
                Step::Curve
            }
        };
        self.state = State::Handshake(Box::new(Handshake {
            greeting: g,
            step,
            peer: None,
            zap_props: Vec::new(),
        }));
        Ok(())
    }

    /// Queues `READY` (or `INITIATE`, which carries the same properties) with our metadata.
    fn push_ready_command(&mut self, name: &[u8]) {
        let body = command::properties_body(
            name,
            self.cfg.socket_type,
            &self.cfg.routing_id,
            &self.cfg.metadata,
        );
        self.out.push_frame(FLAG_COMMAND, &body);
    }

    fn request_zap(&mut self, mechanism: &'static str, credentials: Vec<Vec<u8>>) {
        self.zap_request = Some(ZapRequest {
            domain: self.cfg.zap_domain.clone(),
            address: self
                .cfg
                .peer_address
                .clone()
                .unwrap_or_default()
                .into_bytes(),
            routing_id: self.cfg.routing_id.clone(),
            mechanism,
            credentials,
        });
        self.zap_pending = true;
    }

    fn take_handshake_peer(&mut self) -> Option<Peer> {
        match &mut self.state {
            State::Handshake(hs) => hs.peer.take(),
            _ => None,
        }
    }

    /// One frame of the security handshake; `Some(peer)` when it completes the handshake.
    fn handshake_frame(
        &mut self,
        is_command: bool,
        body: &[u8],
    ) -> Result<Option<Peer>, ZmtpError> {
        let State::Handshake(hs) = &mut self.state else {
            return Err(ZmtpError::UnexpectedCommand);
        };
        let (g, step) = (hs.greeting, hs.step);
        let ours = self.cfg.socket_type;
        let address = self.cfg.peer_address.as_deref();
        if let Step::Curve | Step::CurveZap | Step::CurveAccepted = step {
            // As libzmq, the CURVE commands are checked by name whatever the frame's flags.
            return self.curve_command(body, g);
        }
        if !is_command {
            return Err(ZmtpError::UnexpectedCommand);
        }
        match step {
            Step::Null { ready_sent } => {
                if hs.peer.is_some() {
                    return Err(ZmtpError::UnexpectedCommand);
                }
                let peer = handshake::null_command(true, body, ours, g, address)?;
                if ready_sent {
                    return Ok(Some(peer));
                }
                hs.peer = Some(peer);
                Ok(None)
            }
            Step::ClientWelcome | Step::ClientReady => match plain::parse_server_command(body)? {
                plain::ServerCommand::Welcome if step == Step::ClientWelcome => {
                    hs.step = Step::ClientReady;
                    self.push_ready_command(plain::INITIATE);
                    Ok(None)
                }
                plain::ServerCommand::Ready(data) if step == Step::ClientReady => {
                    match handshake::process_ready(data, ours, g, address) {
                        Ok(peer) => Ok(Some(peer)),
                        Err(ZmtpError::MalformedReady) => Err(ZmtpError::InvalidMetadata),
                        Err(e) => Err(e),
                    }
                }
                plain::ServerCommand::Error(reason) => Err(ZmtpError::PeerError {
                    reason: reason.to_vec(),
                }),
                _ => Err(ZmtpError::UnexpectedCommand),
            },
            Step::ServerHello => {
                let creds = plain::parse_hello(body)?;
                hs.step = Step::ServerZap;
                self.request_zap("PLAIN", vec![creds.username, creds.password]);
                Ok(None)
            }
            Step::ServerZap => Err(ZmtpError::OutOfSequence),
            // Handled above.
            Step::Curve | Step::CurveZap | Step::CurveAccepted => Err(ZmtpError::UnexpectedCommand),
            Step::ServerInitiate => {
                let data = plain::parse_initiate(body)?;
                let peer = handshake::process_ready(data, ours, g, address)?;
                self.push_ready_command(command::READY);
                Ok(Some(peer))
            }
        }
    }

    /// The ZAP request the handshake waits on, handed out once. The session sends it to the
    /// handler bound at `inproc://zeromq.zap.01` and feeds the answer to
    /// [`Connection::zap_reply`], or calls [`Connection::zap_unavailable`] when none is bound.
    pub fn take_zap_request(&mut self) -> Option<ZapRequest> {
        self.zap_request.take()
    }

    /// True while a ZAP request is out and its reply awaited.
    pub fn zap_pending(&self) -> bool {
        self.zap_pending
    }

    /// No ZAP handler is bound. As libzmq 4.3.5: a NULL socket and a CURVE server go on
    /// unauthenticated unless `ZMQ_ZAP_ENFORCE_DOMAIN` is set; a PLAIN server fails
    /// ([`ZmtpError::ZapUnavailable`]).
    pub fn zap_unavailable(&mut self) -> Result<(), ZmtpError> {
        if !self.zap_pending {
            return Ok(());
        }
        self.zap_pending = false;
        self.zap_request = None;
        let lenient = matches!(&self.state,
            State::Handshake(h) if matches!(h.step, Step::Null { .. } | Step::CurveZap));
        if lenient && !self.cfg.zap_enforce_domain {
            return self.zap_approved(Vec::new());
        }
        Err(self.fail(ZmtpError::ZapUnavailable))
    }

    /// The ZAP handler's reply (all its frames, the empty delimiter first). Returns the status:
    /// 200 and the handshake goes on; 300, 400 or 500 and the peer is refused (an `ERROR` with
    /// the status is queued for 400 and 500, nothing for 300), after which input is discarded
    /// until the peer leaves. A malformed reply fails the session with [`ZmtpError::ZapReply`].
    pub fn zap_reply(&mut self, frames: &[Msg]) -> Result<u16, ZmtpError> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        if !self.zap_pending {
            return Err(ZmtpError::OutOfSequence);
        }
        self.zap_pending = false;
        let reply = match zap::parse_reply(frames) {
            Ok(r) => r,
            Err(e) => return Err(self.fail(e.into())),
        };
        if reply.status == 200 {
            self.zap_approved(reply.properties)?;
        } else {
            // A CURVE server's ERROR is the same plain-text command as PLAIN's.
            let error = match self.curve.take() {
                Some(mut hs) => hs.reject(&reply.status_text),
                None => command::error_body(&reply.status_text),
            };
            if reply.status != 300 {
                self.out.push_frame(FLAG_COMMAND, &error);
            }
            self.rejected = true;
            self.state = State::Rejected;
        }
        Ok(reply.status)
    }

    fn zap_approved(&mut self, props: Vec<(String, Vec<u8>)>) -> Result<(), ZmtpError> {
        let State::Handshake(hs) = &mut self.state else {
            return Ok(());
        };
        hs.zap_props = props;
        match hs.step {
            Step::Null { .. } => {
                hs.step = Step::Null { ready_sent: true };
                self.push_ready_command(command::READY);
            }
            Step::ServerZap => {
                hs.step = Step::ServerInitiate;
                self.out.push_frame(FLAG_COMMAND, &plain::welcome_body());
            }
            Step::CurveZap => {
                hs.step = Step::CurveAccepted;
                let accepted = match self.curve.take() {
                    Some(mut c) => c.accept(),
                    None => Err(CurveError::OutOfSequence),
                };
                let (ready, codec) = match accepted {
                    Ok(r) => r,
                    Err(e) => return Err(self.fail(e.into())),
                };
                self.out.push_frame(FLAG_COMMAND, &ready);
                self.dec.set_opener(codec.opener);
                self.out.set_sealer(codec.sealer);
            }
            _ => {}
        }
        Ok(())
    }

    /// True when the handshake ended in an authentication refusal: ZAP refused the peer, or the
    /// peer sent `ERROR`. libzmq reports no `HANDSHAKE_FAILED_NO_DETAIL` for such a connection
    /// when it closes later.
    pub fn is_rejected(&self) -> bool {
        self.rejected
    }

    /// One command of the CURVE handshake; `Some(peer)` when it completes. A server asks ZAP
    /// (mechanism `"CURVE"`, the client's long-term key as the one credential) after `INITIATE`,
    /// as libzmq does whenever a handler is bound; the client's `READY` installs the codec.
    fn curve_command(&mut self, body: &[u8], g: PeerGreeting) -> Result<Option<Peer>, ZmtpError> {
        let Some(hs) = self.curve.as_mut() else {
            return Err(ZmtpError::UnexpectedCommand);
        };
        match hs.on_command(body)? {
            curve::Step::Send(body) => {
                self.out.push_frame(FLAG_COMMAND, &body);
                Ok(None)
            }
            curve::Step::Initiated {
                client_key,
                properties,
            } => {
                // libzmq parses the client's metadata right after INITIATE (errors give no
                // protocol event).
                let peer = handshake::process_ready(
                    &properties,
                    self.cfg.socket_type,
                    g,
                    self.cfg.peer_address.as_deref(),
                )?;
                if let State::Handshake(h) = &mut self.state {
                    h.peer = Some(peer);
                    h.step = Step::CurveZap;
                }
                self.request_zap("CURVE", vec![client_key.to_vec()]);
                Ok(None)
            }
            curve::Step::Ready { properties, codec } => {
                // libzmq reports any error in the server's READY metadata as invalid metadata.
                let peer = handshake::process_ready(
                    &properties,
                    self.cfg.socket_type,
                    g,
                    self.cfg.peer_address.as_deref(),
                )
                .map_err(|_| CurveError::InvalidMetadata)?;
                self.curve = None;
                self.dec.set_opener(codec.opener);
                self.out.set_sealer(codec.sealer);
                Ok(Some(peer))
            }
        }
    }

    fn on_ready(&mut self, mut peer: Peer) -> Peer {
        let zap_props = match &mut self.state {
            State::Handshake(hs) => std::mem::take(&mut hs.zap_props),
            _ => Vec::new(),
        };
        if !zap_props.is_empty() {
            // libzmq's precedence: Peer-Address, then ZAP properties, then the peer's own.
            let mut md = Metadata::new();
            if let Some(a) = self.cfg.peer_address.as_deref().filter(|a| !a.is_empty()) {
                md.insert(handshake::PROP_PEER_ADDRESS, a.as_bytes());
            }
            for (k, v) in zap_props
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_slice()))
                .chain(peer.metadata.iter())
            {
                if md.get(k).is_none() {
                    md.insert(k, v);
                }
            }
            peer.metadata = Arc::new(md);
        }
        if !self.cfg.local_properties.is_empty() {
            let mut md = (*peer.metadata).clone();
            for (k, v) in &self.cfg.local_properties {
                md.insert(k, v);
            }
            peer.metadata = std::sync::Arc::new(md);
        }
        self.state = State::Ready;
        self.md = MetaRefs::new(Some(peer.metadata.clone()));
        self.handshake_deadline = None;
        self.next_ping = nonzero(self.cfg.heartbeat_ivl).map(|i| self.last_recv + i);
        self.peer = Some(peer.clone());
        peer
    }

    /// A command after the handshake: `PING` is answered, subscriptions surface as messages,
    /// anything else (`PONG`, unknown or malformed commands) is ignored, as libzmq does.
    fn on_command(&mut self, msg: &Msg) -> Option<Event> {
        let (name, data) = command::parse(msg.data())?;
        match name {
            command::PING => {
                let ping = command::parse_ping(data)?;
                self.out
                    .push_frame_parts(FLAG_COMMAND, &[command::PONG_PREFIX, ping.context]);
                if ping.ttl_deciseconds > 0
                    && self.ttl_deadline.is_none()
                    && self.dec.buffered() == 0
                {
                    let ttl = Duration::from_millis(u64::from(ping.ttl_deciseconds) * 100);
                    self.ttl_deadline = Some(self.last_recv + ttl);
                }
                None
            }
            command::SUBSCRIBE | command::CANCEL => {
                let mut m = Msg::with_size(1 + data.len());
                if let Some(d) = m.data_mut() {
                    d[0] = u8::from(name == command::SUBSCRIBE);
                    d[1..].copy_from_slice(data);
                }
                m.set_metadata(self.md.take());
                Some(Event::Message(m))
            }
            // A DISH's JOIN/LEAVE reach a RADIO's pattern as the command frame they came in
            // (libzmq's radio_session_t turns them into join/leave messages the same way).
            command::JOIN | command::LEAVE if self.cfg.socket_type == SocketType::Radio => {
                let mut m = msg.clone();
                m.set_more(false);
                m.set_command(true);
                Some(Event::Message(m))
            }
            _ if name.starts_with(EXTENSION_PREFIX) => Some(Event::Command(msg.clone())),
            _ => None,
        }
    }

    #[inline]
    fn check_ready(&self) -> Result<(), ZmtpError> {
        if matches!(self.state, State::Ready) {
            Ok(())
        } else {
            self.not_ready()
        }
    }

    #[cold]
    #[inline(never)]
    fn not_ready(&self) -> Result<(), ZmtpError> {
        match &self.state {
            State::Failed(e) => Err(e.clone()),
            _ => Err(ZmtpError::NotReady),
        }
    }

    /// Queues a message frame (MORE and COMMAND flags taken from `msg`). Only after
    /// [`Event::Ready`]; before that `msg` is dropped and `NotReady` returned. Bodies over
    /// [`super::frame::LARGE_BODY`] bytes are not copied: `msg` is kept until written.
    #[inline]
    pub fn send(&mut self, msg: Msg) -> Result<(), ZmtpError> {
        self.check_ready()?;
        self.out.push_msg(frame::wire_flags(msg.flags()), msg);
        Ok(())
    }

    /// Queues a subscription (`subscribe`) or its cancellation for `topic`, in the form libzmq
    /// 4.3.5 sends for `ZMQ_SUBSCRIBE`/`ZMQ_UNSUBSCRIBE`: a `SUBSCRIBE`/`CANCEL` command to ZMTP
    /// 3.1 peers, a message `0x01`/`0x00` + topic to ZMTP 3.0 peers.
    pub fn send_subscribe(&mut self, topic: &[u8], subscribe: bool) -> Result<(), ZmtpError> {
        self.check_ready()?;
        if self.peer_v3_0 {
            self.out
                .push_frame_parts(0, &[&[u8::from(subscribe)], topic]);
        } else if subscribe {
            self.out
                .push_frame_parts(FLAG_COMMAND, &[command::SUBSCRIBE_PREFIX, topic]);
        } else {
            self.out
                .push_frame_parts(FLAG_COMMAND, &[command::CANCEL_PREFIX, topic]);
        }
        Ok(())
    }

    /// Queues a command `name` with `data` (after [`Event::Ready`] only). Used for rzmq's
    /// extension commands, which go only to peers that advertised them.
    pub fn send_command(&mut self, name: &[u8], data: &[u8]) -> Result<(), ZmtpError> {
        self.check_ready()?;
        assert!(name.len() <= 255, "command names are at most 255 bytes");
        self.out
            .push_frame(FLAG_COMMAND, &command::body(name, &[data]));
        Ok(())
    }

    /// Queues an `ERROR` command with `reason` (truncated to 255 bytes). The engine should flush
    /// output and close the connection afterwards.
    pub fn send_error(&mut self, reason: &str) {
        self.out
            .push_frame(FLAG_COMMAND, &command::error_body(reason.as_bytes()));
    }

    /// True once messages are encrypted (CURVE): their bytes on the wire are not plain frames.
    pub fn encrypts(&self) -> bool {
        self.out.is_sealed()
    }

    /// Queues bytes already framed (the rest of a direct send, see [`crate::direct`]).
    pub fn push_framed(&mut self, bytes: &[u8]) {
        self.out.push_raw(bytes);
    }

    /// Queues the rest of a frame's body from byte `from` on, its header already written (the
    /// rest of a direct send); large bodies by reference.
    pub fn push_body_rest(&mut self, msg: Msg, from: usize) {
        self.out.push_body_rest(msg, from);
    }

    /// True when bytes are waiting for [`Connection::write_to`].
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Bytes waiting for [`Connection::write_to`].
    pub fn pending_output_bytes(&self) -> usize {
        self.out.pending()
    }

    /// Whether large bodies go out in two writes (default yes; see
    /// [`super::frame::LEAD_SPLIT_MIN`]).
    pub fn set_split_large(&mut self, split: bool) {
        self.out.set_split_large(split);
    }

    /// See [`Connection::set_split_large`].
    pub fn split_large(&self) -> bool {
        self.out.split_large()
    }

    /// Writes queued output to `w` (vectored: the byte buffer plus large bodies) until everything
    /// is written, a write is short, or `w` would block; returns the bytes written (possibly 0).
    /// Retries on `Interrupted`; a write of 0 bytes is `WriteZero`. Large messages are dropped as
    /// soon as they are fully written.
    pub fn write_to<W: Write + ?Sized>(&mut self, w: &mut W) -> io::Result<usize> {
        self.out.write_to(w)
    }

    /// The earliest instant [`Connection::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ready = match self.state {
            State::Ready => true,
            State::Failed(_) => return None,
            _ => false,
        };
        [
            if ready { None } else { self.handshake_deadline },
            if ready { self.next_ping } else { None },
            self.timeout_deadline,
            self.ttl_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the timers due at `now`: handshake timeout, heartbeat timeout and the peer's TTL
    /// (errors), and sending our `PING`.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ZmtpError> {
        let ready = match &self.state {
            State::Ready => true,
            State::Failed(e) => return Err(e.clone()),
            _ => false,
        };
        if !ready && self.handshake_deadline.is_some_and(|d| now >= d) {
            return Err(self.fail(ZmtpError::HandshakeTimeout));
        }
        if self.ttl_deadline.is_some_and(|d| now >= d) {
            return Err(self.fail(ZmtpError::HeartbeatTtlExpired));
        }
        if self.timeout_deadline.is_some_and(|d| now >= d) {
            return Err(self.fail(ZmtpError::HeartbeatTimeout));
        }
        if let (true, Some(at), Some(ivl)) = (ready, self.next_ping, self.cfg.heartbeat_ivl) {
            if now >= at {
                let ttl = self
                    .cfg
                    .heartbeat_ttl
                    .map_or(0, |t| (t.as_millis() / 100).min(65535));
                self.out.push_frame_parts(
                    FLAG_COMMAND,
                    &[command::PING_PREFIX, &(ttl as u16).to_be_bytes()],
                );
                let timeout = match self.cfg.heartbeat_timeout {
                    None => Some(ivl),
                    t => nonzero(t),
                };
                if let (None, Some(t)) = (self.timeout_deadline, timeout) {
                    self.timeout_deadline = Some(now + t);
                }
                self.next_ping = Some(now + ivl);
            }
        }
        Ok(())
    }

    /// True once the handshake has completed (and the session has not failed).
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready)
    }

    /// The peer, once the handshake has completed.
    pub fn peer(&self) -> Option<&Peer> {
        self.peer.as_ref()
    }

    /// The error the session failed with, if it has.
    pub fn error(&self) -> Option<&ZmtpError> {
        match &self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Feeds `bytes` through [`Connection::recv_buffer`]/[`Connection::received`] and collects
    /// every event (a convenience for tests and simple drivers).
    pub fn handle_input(
        &mut self,
        mut bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<Event>, ZmtpError> {
        let mut events = Vec::new();
        while let Some(ev) = self.poll_event()? {
            events.push(ev);
        }
        while !bytes.is_empty() {
            let buf = self.recv_buffer();
            let n = buf.len().min(bytes.len());
            buf[..n].copy_from_slice(&bytes[..n]);
            self.received(n, now)?;
            bytes = &bytes[n..];
            while let Some(ev) = self.poll_event()? {
                events.push(ev);
            }
        }
        Ok(events)
    }

    /// Bytes of memory held by the receive buffers (diagnostics and tests).
    pub fn recv_allocated(&self) -> usize {
        self.dec.allocated()
    }

    /// Whether another thread may read and decode this session's input for a while (see
    /// [`crate::direct`]): ready, no CURVE, nothing received left undecoded (with `cut_ok`,
    /// but a frame cut by the end of the last read, which the reader continues with this
    /// decoder), and no timer that input resets (heartbeat timeout, the peer's TTL).
    pub(crate) fn input_idle(&self, cut_ok: bool) -> bool {
        (self.dec.is_clean() || (cut_ok && self.dec.only_cut_frame())) && self.input_shareable()
    }

    /// Whether another thread may read this session's input at all: [`Connection::input_idle`]
    /// but for what the decoder holds now.
    pub(crate) fn input_shareable(&self) -> bool {
        self.is_ready()
            && !self.dec.has_opener()
            && self.timeout_deadline.is_none()
            && self.ttl_deadline.is_none()
            && self.cfg.heartbeat_ivl.is_none()
    }

    /// The properties attached to every message received (once ready).
    pub(crate) fn metadata(&self) -> Option<Arc<Metadata>> {
        self.md.get().cloned()
    }

    /// A fresh decoder with this session's limits.
    pub(crate) fn fresh_decoder(&self) -> Decoder {
        self.dec.fresh()
    }

    /// True when the decoder holds nothing received (no frame cut by the last read either).
    pub(crate) fn input_clean(&self) -> bool {
        self.dec.is_clean()
    }

    /// Puts `dec` in place of the session's decoder (input another thread decoded part of),
    /// returning the one it replaces.
    pub(crate) fn swap_decoder(&mut self, dec: Decoder) -> Decoder {
        std::mem::replace(&mut self.dec, dec)
    }
}

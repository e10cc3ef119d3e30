//! One ZMTP session as a sans-IO state machine: bytes and time in, events and bytes out.
//!
//! States: greeting (ours is queued at creation, the peer's is checked as it arrives), handshake
//! (NULL: `READY` exchange), ready (message frames both ways, `PING`/`PONG`, subscriptions), failed
//! (every call returns the same [`ZmtpError`]).

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::codec::{Decoder, OutQueue, FLAG_COMMAND, FLAG_MORE};
use super::command;
use super::error::ZmtpError;
use super::greeting::{self, Mechanism, PeerGreeting, GREETING_LEN};
use super::handshake::{self, Peer};
use super::socket_type::SocketType;
use crate::msg::{Metadata, Msg};

/// libzmq's default `ZMQ_HANDSHAKE_IVL`.
pub const DEFAULT_HANDSHAKE_IVL: Duration = Duration::from_secs(30);

/// The reason sent in the `ERROR` command when the peer's socket type is incompatible.
pub const INCOMPATIBLE_SOCKET_TYPE_REASON: &str = "Invalid socket type";

/// What a connection needs from the socket's options.
#[derive(Clone, Debug)]
pub struct Config {
    /// Our socket type (sent as `Socket-Type`, checked against the peer's).
    pub socket_type: SocketType,
    /// Our routing id (`ZMQ_ROUTING_ID`), sent as `Identity` by REQ, DEALER and ROUTER.
    pub routing_id: Vec<u8>,
    /// The security mechanism; only [`Mechanism::Null`] is implemented.
    pub mechanism: Mechanism,
    /// `ZMQ_PLAIN_SERVER`/`ZMQ_CURVE_SERVER` role (libzmq sends the greeting's as-server byte as 0
    /// regardless, and so do we).
    pub as_server: bool,
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
}

impl Config {
    /// A configuration with libzmq's defaults for `socket_type`.
    pub fn new(socket_type: SocketType) -> Config {
        Config {
            socket_type,
            routing_id: Vec::new(),
            mechanism: Mechanism::Null,
            as_server: false,
            maxmsgsize: -1,
            metadata: Vec::new(),
            heartbeat_ivl: None,
            heartbeat_ttl: None,
            heartbeat_timeout: None,
            handshake_ivl: Some(DEFAULT_HANDSHAKE_IVL),
            peer_address: None,
            local_properties: Vec::new(),
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
    /// A command whose name starts with [`EXTENSION_PREFIX`] (rzmq's own, sent only to peers
    /// that advertised support): the raw command body, name included. Other unknown commands are
    /// ignored, as libzmq does.
    Command(Msg),
}

/// Command names with this prefix surface as [`Event::Command`] instead of being ignored.
pub const EXTENSION_PREFIX: &[u8] = b"RZMQ-";

/// Splits a command body into its name and data (`None` when malformed).
pub fn parse_command(body: &[u8]) -> Option<(&[u8], &[u8])> {
    command::parse(body)
}

enum State {
    Greeting,
    Handshake(PeerGreeting),
    Ready,
    Failed(ZmtpError),
}

/// One ZMTP 3.1 session, without I/O. See the module documentation for the driving loop.
pub struct Connection {
    cfg: Config,
    state: State,
    dec: Decoder,
    out: OutQueue,
    peer: Option<Peer>,
    md: Option<Arc<Metadata>>,
    peer_v3_0: bool,
    last_recv: Instant,
    handshake_deadline: Option<Instant>,
    next_ping: Option<Instant>,
    timeout_deadline: Option<Instant>,
    ttl_deadline: Option<Instant>,
    /// The greeting after its signature, sent once the peer's signature has arrived (as libzmq
    /// does); None once sent.
    greeting_rest: Option<Vec<u8>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Greeting => "greeting".to_string(),
            State::Handshake(_) => "handshake".to_string(),
            State::Ready => "ready".to_string(),
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
            md: None,
            peer_v3_0: false,
            last_recv: now,
            handshake_deadline: nonzero(cfg.handshake_ivl).map(|d| now + d),
            next_ping: None,
            timeout_deadline: None,
            ttl_deadline: None,
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
                        msg.set_metadata(self.md.clone());
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
                State::Handshake(g) => {
                    let g = *g;
                    let (flags, msg) = match self.dec.next_frame() {
                        Ok(Some(f)) => f,
                        Ok(None) => return Ok(None),
                        Err(e) => return Err(self.fail(e)),
                    };
                    let res = handshake::null_command(
                        flags & FLAG_COMMAND != 0,
                        msg.data(),
                        self.cfg.socket_type,
                        g,
                        self.cfg.peer_address.as_deref(),
                    );
                    match res {
                        Ok(peer) => return Ok(Some(Event::Ready(self.on_ready(peer)))),
                        Err(e) => {
                            if let ZmtpError::IncompatibleSocketType { .. } = e {
                                self.send_error(INCOMPATIBLE_SOCKET_TYPE_REASON);
                            }
                            return Err(self.fail(e));
                        }
                    }
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
        if !self.cfg.mechanism.is_supported() {
            return Err(self.fail(ZmtpError::MechanismNotSupported(self.cfg.mechanism)));
        }
        self.peer_v3_0 = g.is_v3_0();
        let ready = command::ready_body(
            self.cfg.socket_type,
            &self.cfg.routing_id,
            &self.cfg.metadata,
        );
        self.out.push_frame(FLAG_COMMAND, &ready);
        self.state = State::Handshake(g);
        Ok(())
    }

    fn on_ready(&mut self, mut peer: Peer) -> Peer {
        if !self.cfg.local_properties.is_empty() {
            let mut md = (*peer.metadata).clone();
            for (k, v) in &self.cfg.local_properties {
                md.insert(k, v);
            }
            peer.metadata = std::sync::Arc::new(md);
        }
        self.state = State::Ready;
        self.md = Some(peer.metadata.clone());
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
                m.set_metadata(self.md.clone());
                Some(Event::Message(m))
            }
            _ if name.starts_with(EXTENSION_PREFIX) => Some(Event::Command(msg.clone())),
            _ => None,
        }
    }

    fn check_ready(&self) -> Result<(), ZmtpError> {
        match &self.state {
            State::Ready => Ok(()),
            State::Failed(e) => Err(e.clone()),
            _ => Err(ZmtpError::NotReady),
        }
    }

    /// Queues a message frame (MORE and COMMAND flags taken from `msg`). Only after
    /// [`Event::Ready`]; before that `msg` is dropped and `NotReady` returned. Bodies over
    /// [`super::codec::LARGE_BODY`] bytes are not copied: `msg` is kept until written.
    #[inline]
    pub fn send(&mut self, msg: Msg) -> Result<(), ZmtpError> {
        self.check_ready()?;
        let mut flags = 0;
        if msg.more() {
            flags |= FLAG_MORE;
        }
        if msg.is_command() {
            flags |= FLAG_COMMAND;
        }
        self.out.push_msg(flags, msg);
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

    /// True when bytes are waiting for [`Connection::write_to`].
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Bytes waiting for [`Connection::write_to`].
    pub fn pending_output_bytes(&self) -> usize {
        self.out.pending()
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
}

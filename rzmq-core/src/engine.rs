//! Engines: one connection's protocol driver, bytes in and out of a stream, messages in and out
//! of the socket's pipes.
//!
//! An engine owns a non-blocking byte stream and a protocol state machine (ZMTP, or raw bytes for
//! STREAM sockets). It is driven by an I/O thread: `on_readable`, `on_writable`, `on_pipe` (the
//! socket wrote or read), `on_timer`. It never blocks. Backpressure: when the socket's inbound pipe
//! is at its HWM the engine stops reading (the kernel buffers fill and the peer's TCP window
//! closes) until the pipe is activated again. The engine knows nothing of which transport carries
//! its bytes beyond the [`Stream`] seam.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use crate::alt::{self, AltError, AltPath, HalfPath, Mode, Upgrader};
use crate::monitor::{self, Monitor};
use crate::msg::{Metadata, Msg};
use crate::zmtp::{self, ZmtpError};

/// Bytes of encoded output above which the engine stops pulling messages from the pipe.
const OUT_BATCH: usize = 256 * 1024;

/// Writes what `w` takes of `b` now: 0 when it would block; errors other than an interrupt
/// end the connection.
fn write_some(w: &mut Stream, b: &[u8]) -> io::Result<usize> {
    loop {
        return match w.write(b) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// What [`Engine::on_writable_framed`] pulls with: `(budget, sink)` -> messages moved, or
/// `None` when the pipe's framed lane is not next.
pub type FramedPull<'a> =
    dyn FnMut(usize, &mut dyn FnMut(crate::pipe::Framed<'_>)) -> Option<usize> + 'a;
/// Bytes read per readiness event before yielding to other connections.
const READ_BUDGET: usize = 4 * 1024 * 1024;
/// Frames moved per call on an alternative path before yielding to other connections.
const ALT_BUDGET: usize = 8192;

/// A connected byte stream (TCP or Unix).
pub enum Stream {
    /// A TCP connection.
    Tcp(mio::net::TcpStream),
    /// A Unix-domain connection.
    Unix(mio::net::UnixStream),
}

impl Stream {
    /// The mio source to register.
    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Raw framing for STREAM sockets: every read is one message, every message is written as is.
pub struct RawCodec {
    inbuf: Vec<u8>,
    events: std::collections::VecDeque<zmtp::Event>,
    out: std::collections::VecDeque<Msg>,
    out_off: usize,
    close_requested: bool,
    /// Connection properties attached to every received chunk (Peer-Address, __fd).
    metadata: Option<std::sync::Arc<crate::msg::Metadata>>,
}

impl RawCodec {
    fn new() -> RawCodec {
        RawCodec {
            inbuf: vec![0; 64 * 1024],
            events: Default::default(),
            out: Default::default(),
            out_off: 0,
            close_requested: false,
            metadata: None,
        }
    }
}

/// The protocol spoken on a connection.
pub enum Proto {
    /// ZMTP 3.x.
    Zmtp(Box<zmtp::Connection>),
    /// Raw bytes (STREAM sockets).
    Raw(RawCodec),
}

/// What ended a connection.
#[derive(Debug)]
pub enum Closed {
    /// The peer closed the stream.
    Eof,
    /// An I/O error.
    Io(io::Error),
    /// A protocol violation or handshake failure.
    Protocol(ZmtpError),
    /// The local side asked to close (STREAM empty frame, shutdown).
    Local,
    /// The connection could not upgrade and the upgrade is required (`RZMQ_RDMA=require`,
    /// `rdma://`), or the peer broke the upgrade protocol.
    Upgrade(String),
    /// The alternative data path failed (QP error, wire cut, peer gone).
    Alt(AltError),
}

impl Proto {
    /// ZMTP for a socket, or raw framing for STREAM.
    pub fn new_zmtp(cfg: zmtp::Config, now: Instant) -> Proto {
        Proto::Zmtp(Box::new(zmtp::Connection::new(cfg, now)))
    }

    /// Raw framing.
    pub fn new_raw() -> Proto {
        Proto::Raw(RawCodec::new())
    }

    /// Sets the properties attached to received raw chunks (no effect on ZMTP, whose handshake
    /// supplies them).
    pub fn set_raw_metadata(&mut self, md: std::sync::Arc<crate::msg::Metadata>) {
        if let Proto::Raw(r) = self {
            r.metadata = Some(md);
        }
    }

    /// The properties attached to received raw chunks.
    pub fn raw_metadata(&self) -> Option<std::sync::Arc<crate::msg::Metadata>> {
        match self {
            Proto::Raw(r) => r.metadata.clone(),
            Proto::Zmtp(_) => None,
        }
    }

    /// True once the handshake is done (raw: always).
    pub fn is_ready(&self) -> bool {
        match self {
            Proto::Zmtp(z) => z.is_ready(),
            Proto::Raw(_) => true,
        }
    }

    fn recv_buffer(&mut self) -> &mut [u8] {
        match self {
            Proto::Zmtp(z) => z.recv_buffer(),
            Proto::Raw(r) => &mut r.inbuf,
        }
    }

    fn received(&mut self, n: usize, now: Instant) -> Result<(), ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.received(n, now),
            Proto::Raw(r) => {
                let mut m = Msg::copy_from(&r.inbuf[..n]);
                m.set_metadata(r.metadata.clone());
                r.events.push_back(zmtp::Event::Message(m));
                Ok(())
            }
        }
    }

    /// The next decoded event.
    pub fn poll_event(&mut self) -> Result<Option<zmtp::Event>, ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.poll_event(),
            Proto::Raw(r) => Ok(r.events.pop_front()),
        }
    }

    fn send(&mut self, msg: Msg) -> Result<(), ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.send(msg),
            Proto::Raw(r) => {
                if msg.is_empty() {
                    r.close_requested = true;
                } else {
                    r.out.push_back(msg);
                }
                Ok(())
            }
        }
    }

    fn pending_output(&self) -> usize {
        match self {
            Proto::Zmtp(z) => z.pending_output_bytes(),
            Proto::Raw(r) => r.out.iter().map(|m| m.len()).sum::<usize>() - r.out_off,
        }
    }

    fn has_output(&self) -> bool {
        match self {
            Proto::Zmtp(z) => z.has_output(),
            Proto::Raw(r) => !r.out.is_empty(),
        }
    }

    fn write_to(&mut self, w: &mut Stream) -> io::Result<usize> {
        match self {
            Proto::Zmtp(z) => z.write_to(w),
            Proto::Raw(r) => {
                let mut total = 0;
                while let Some(m) = r.out.front() {
                    let n = w.write(&m.data()[r.out_off..])?;
                    total += n;
                    r.out_off += n;
                    if r.out_off == m.len() {
                        r.out.pop_front();
                        r.out_off = 0;
                    }
                }
                Ok(total)
            }
        }
    }

    fn close_requested(&self) -> bool {
        matches!(self, Proto::Raw(r) if r.close_requested && r.out.is_empty())
    }

    /// The next protocol deadline (handshake, heartbeat).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Proto::Zmtp(z) => z.poll_timeout(),
            Proto::Raw(_) => None,
        }
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.handle_timeout(now),
            Proto::Raw(_) => Ok(()),
        }
    }
}

/// What the engine reports to its session after an event.
pub enum Progress {
    /// Keep going.
    Open,
    /// The connection is over.
    Closed(Closed),
}

/// One live connection: a stream and its protocol.
pub struct Engine {
    /// The byte stream.
    pub stream: Stream,
    /// The protocol state.
    pub proto: Proto,
    /// A received message the socket's pipe had no room for.
    pub stalled: Option<Msg>,
    /// Set when the last read stopped on budget, not on WouldBlock: read again soon.
    pub read_pending: bool,
    /// Set by the session before [`Engine::on_readable`]: if a message is stalled on the full
    /// pipe, deliver it and what was decoded with it, then stop without reading (the session
    /// hands input to a socket that receives with blocking calls). Cleared when it stops so.
    pub(crate) yield_unstalled: bool,
    /// Bytes of the current outgoing multipart message already taken from the pipe.
    pub out_in_multipart: bool,
    /// The peer hung up (or the stream errored): read until the end of the stream.
    pub hup: bool,
    /// This is a SUB/XSUB connection: 0x01/0x00 messages are subscriptions.
    pub subscriptions: bool,
    /// The upgrade to an alternative data path (tcp connections, when an upgrader is installed).
    pub upgrade: Option<Box<Upgrade>>,
    /// The connection's output when shared with the pipe's writer (see [`crate::direct`]):
    /// taken back before every write.
    pub direct: Option<std::sync::Arc<crate::direct::DirectTx>>,
}

enum UpState {
    /// Before the handshake.
    Waiting,
    /// The connecting end sent its blob and waits for the peer's.
    Offered(Box<dyn HalfPath>),
    /// Connected; switching or switched.
    Up,
    /// Staying on the stream.
    Declined,
}

/// One connection's upgrade: the protocol of [`crate::alt`] and the path once up.
pub struct Upgrade {
    up: &'static std::sync::Arc<dyn Upgrader>,
    connecting: bool,
    required: bool,
    local: Option<std::net::SocketAddr>,
    state: UpState,
    path: Option<Box<dyn AltPath>>,
    /// The path's fd, until the session registers it.
    new_fd: Option<RawFd>,
    /// Our `GO` is due at the next message boundary.
    go_due: bool,
    out_switched: bool,
    in_switched: bool,
    /// A frame the path had no room for.
    held: Option<Msg>,
    /// The path failed: deliver what arrived before, then close.
    failed: bool,
    /// Peer metadata attached to frames from the path.
    md: Option<std::sync::Arc<Metadata>>,
    monitor: Monitor,
    endpoint: String,
    /// The connection is encrypted (CURVE): its messages stay on the stream unless
    /// `RZMQ_RDMA_CURVE_PLAINTEXT=1` allows them onto RDMA unencrypted.
    encrypted: bool,
}

/// `RZMQ_RDMA_CURVE_PLAINTEXT=1`: CURVE connections may move their messages to RDMA, where they
/// travel unencrypted (a trusted fabric). Off by default.
pub fn curve_plaintext_allowed() -> bool {
    std::env::var("RZMQ_RDMA_CURVE_PLAINTEXT").is_ok_and(|v| v == "1")
}

impl Upgrade {
    /// An upgrade for a tcp connection, or `None` when none applies (no upgrader installed, or
    /// `RZMQ_RDMA=off` and not `required` by the endpoint).
    pub fn new(
        connecting: bool,
        required_by_endpoint: bool,
        encrypted: bool,
        local: Option<std::net::SocketAddr>,
        monitor: Monitor,
        endpoint: String,
    ) -> Option<Box<Upgrade>> {
        let up = alt::upgrader()?;
        let mode = up.mode();
        if mode == Mode::Off && !required_by_endpoint {
            return None;
        }
        Some(Box::new(Upgrade {
            up,
            connecting,
            required: required_by_endpoint || mode == Mode::Require,
            local,
            state: UpState::Waiting,
            path: None,
            new_fd: None,
            go_due: false,
            out_switched: false,
            in_switched: false,
            held: None,
            failed: false,
            md: None,
            monitor,
            endpoint,
            encrypted,
        }))
    }

    /// The `READY` property to advertise, when this process can upgrade.
    pub fn advertise(&self) -> Option<Vec<u8>> {
        self.up.advertise().ok()
    }

    /// True once the peer's GO was read: input comes from the alternative path.
    pub fn input_switched(&self) -> bool {
        self.in_switched
    }

    /// True once messages move on the alternative path (both directions switched).
    pub fn is_up(&self) -> bool {
        self.out_switched && self.in_switched
    }

    /// The path's fd once, for the session to register.
    pub fn take_new_fd(&mut self) -> Option<RawFd> {
        self.new_fd.take()
    }

    /// The path's fd (to deregister).
    pub fn fd(&self) -> Option<RawFd> {
        self.path.as_ref().map(|p| p.fd())
    }

    fn note(&self, value: u32, what: &str) {
        if self.up.log_enabled() {
            eprintln!(
                "rzmq[{}]: {} {}: {what}",
                std::process::id(),
                if self.connecting { "connect" } else { "accept" },
                self.endpoint
            );
        }
        if self.up.events_enabled() {
            self.monitor
                .event(monitor::EVENT_TRANSPORT, value, &self.endpoint);
        }
    }

    /// Stays on the stream, or refuses the connection when the upgrade is required.
    fn decline(&mut self, why: &str) -> Result<(), Closed> {
        self.state = UpState::Declined;
        self.path = None;
        self.go_due = false;
        if self.required {
            self.note(
                monitor::TRANSPORT_REFUSED,
                &format!("refused: RDMA required but {why}"),
            );
            return Err(Closed::Upgrade(format!("RDMA required but {why}")));
        }
        self.note(monitor::TRANSPORT_TCP, &format!("transport tcp ({why})"));
        Ok(())
    }

    fn set_path(&mut self, p: Box<dyn AltPath>) {
        self.new_fd = Some(p.fd());
        self.path = Some(p);
        self.state = UpState::Up;
    }

    /// The handshake completed with `peer`: offer our half (connecting end) or wait for the
    /// peer's offer. `Err`: close before anything is delivered.
    fn on_ready(&mut self, peer: &zmtp::Peer, z: &mut zmtp::Connection) -> Result<(), Closed> {
        self.md = Some(peer.metadata.clone());
        if self.encrypted && !curve_plaintext_allowed() {
            return self.decline(
                "the connection uses CURVE: its messages stay on the encrypted TCP path \
                 (RZMQ_RDMA_CURVE_PLAINTEXT=1 moves them to RDMA unencrypted)",
            );
        }
        let Some(value) = peer.metadata.get(alt::PROPERTY) else {
            return self.decline("the peer does not offer it (libzmq, or RZMQ_RDMA=off there)");
        };
        let value = value.to_vec();
        if let Err(e) = self.up.advertise() {
            return self.decline(&format!("it is unavailable here: {e}"));
        }
        if let Err(e) = self.up.compatible(&value) {
            return self.decline(&e.0);
        }
        if !self.connecting {
            return Ok(());
        }
        match self.up.start(self.local) {
            Ok((half, blob)) => {
                z.send_command(alt::CMD_EP, &blob)
                    .map_err(Closed::Protocol)?;
                self.state = UpState::Offered(half);
                Ok(())
            }
            Err(e) => {
                let _ = z.send_command(alt::CMD_NAK, e.0.as_bytes());
                self.decline(&format!("setup failed here: {e}"))
            }
        }
    }

    /// An upgrade command from the peer.
    fn on_command(&mut self, body: &[u8], z: &mut zmtp::Connection) -> Result<(), Closed> {
        let Some((name, data)) = zmtp::parse_command(body) else {
            return Ok(());
        };
        let state = std::mem::replace(&mut self.state, UpState::Declined);
        match (name, state) {
            (n, UpState::Waiting) if n == alt::CMD_EP && !self.connecting => {
                let res = self
                    .up
                    .start(self.local)
                    .and_then(|(half, blob)| Ok((half.complete(data)?, blob)));
                match res {
                    Ok((path, blob)) => {
                        z.send_command(alt::CMD_EP, &blob)
                            .map_err(Closed::Protocol)?;
                        self.set_path(path);
                        Ok(())
                    }
                    Err(e) => {
                        let _ = z.send_command(alt::CMD_NAK, e.0.as_bytes());
                        self.decline(&format!("setup failed here: {e}"))
                    }
                }
            }
            // We declined at the handshake (CURVE, no provider here) but the peer offers: say no.
            (n, UpState::Declined) if n == alt::CMD_EP => {
                let _ = z.send_command(alt::CMD_NAK, b"declined by the peer");
                Ok(())
            }
            (n, UpState::Offered(half)) if n == alt::CMD_EP => match half.complete(data) {
                Ok(path) => {
                    self.set_path(path);
                    self.go_due = true;
                    Ok(())
                }
                Err(e) => {
                    let _ = z.send_command(alt::CMD_NAK, e.0.as_bytes());
                    self.decline(&format!("connecting to the peer failed: {e}"))
                }
            },
            (n, UpState::Up) if n == alt::CMD_GO && !self.in_switched => {
                self.state = UpState::Up;
                self.in_switched = true;
                if !self.connecting {
                    self.go_due = true;
                }
                if self.is_up() {
                    self.report_up();
                }
                Ok(())
            }
            (n, _) if n == alt::CMD_NAK => {
                let why = String::from_utf8_lossy(&data[..data.len().min(200)]).into_owned();
                self.decline(&format!("the peer declined: {why}"))
            }
            (_, st) => {
                self.state = st;
                Err(Closed::Upgrade(format!(
                    "unexpected upgrade command {}",
                    String::from_utf8_lossy(name)
                )))
            }
        }
    }

    fn report_up(&self) {
        if let Some(p) = &self.path {
            self.note(
                monitor::TRANSPORT_RDMA,
                &format!("transport {}", p.describe()),
            );
        }
    }

    /// Logs the path's counters when the connection ends.
    pub fn report_end(&self, why: &str) {
        if let Some(p) = &self.path {
            let s = p.stats();
            self.note(
                monitor::TRANSPORT_ENDED,
                &format!(
                    "{} closed ({why}): tx {} msgs {} B ({} zero-copy), rx {} msgs {} B ({} zero-copy reads), {} copies, {} credit stalls",
                    p.describe(),
                    s.msgs_tx,
                    s.bytes_tx,
                    s.rndv_tx,
                    s.msgs_rx,
                    s.bytes_rx,
                    s.rndv_reads,
                    s.copies,
                    s.credit_stalls
                ),
            );
        }
    }

    /// Whether output must wait (a required upgrade not yet switched).
    fn output_held(&self) -> bool {
        self.required && !self.out_switched
    }

    /// True while something is owed to the peer on the path.
    fn busy(&self) -> bool {
        self.held.is_some()
            || self.go_due
            || (self.out_switched && self.path.as_ref().is_some_and(|p| !p.is_idle()))
    }
}

impl Engine {
    /// An engine over a connected stream.
    pub fn new(stream: Stream, proto: Proto) -> Engine {
        Engine {
            stream,
            proto,
            stalled: None,
            read_pending: false,
            yield_unstalled: false,
            out_in_multipart: false,
            hup: false,
            subscriptions: false,
            upgrade: None,
            direct: None,
        }
    }

    /// Whether large bodies go out in two writes, here and on direct sends (default yes; no on
    /// same-host connections, which are not paced: see `transport::tune_same_host`).
    pub fn set_split_large(&mut self, split: bool) {
        if let Proto::Zmtp(z) = &mut self.proto {
            z.set_split_large(split);
        }
    }

    /// See [`Engine::set_split_large`] (yes for protocols other than ZMTP, which have no
    /// direct sends).
    pub fn split_large(&self) -> bool {
        match &self.proto {
            Proto::Zmtp(z) => z.split_large(),
            _ => true,
        }
    }

    /// Whether the application thread may write this connection's next message itself (see
    /// [`crate::direct`]): plain ZMTP, ready, nothing queued, not mid-message, no CURVE, no
    /// subscription forwarding, no alternative path (declined upgrades qualify).
    pub fn direct_capable(&self) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        z.is_ready()
            && !z.encrypts()
            && !z.has_output()
            && !self.subscriptions
            && !self.hup
            && !self.out_in_multipart
            && self
                .upgrade
                .as_ref()
                .is_none_or(|u| matches!(u.state, UpState::Declined) && !u.required)
    }

    /// Whether output can take the pipe's framed lane (wire bytes the writer encoded, see
    /// [`crate::pipe::Reader::request_framed`]): plain ZMTP, ready, no CURVE, no subscription
    /// forwarding, not mid-message, no alternative path (declined upgrades qualify).
    pub fn takes_framed(&self) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        z.is_ready()
            && !z.encrypts()
            && !self.subscriptions
            && !self.out_in_multipart
            && self
                .upgrade
                .as_ref()
                .is_none_or(|u| matches!(u.state, UpState::Declined) && !u.required)
    }

    /// Whether the socket reading this connection's pipe may read its input itself for a while
    /// (see [`crate::direct::DirectRx`]): plain ZMTP, ready, everything read decoded and
    /// delivered, the last read drained the stream, no timers input resets, no alternative
    /// path (declined upgrades qualify).
    pub fn input_offerable(&self) -> bool {
        self.input_offerable_with(false)
    }

    /// As [`Engine::input_offerable`]; with `cut_ok`, also when the decoder holds a frame cut
    /// by the end of the last read (it goes to the reader with the input).
    pub(crate) fn input_offerable_with(&self, cut_ok: bool) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        self.stalled.is_none()
            && !self.read_pending
            && z.input_idle(cut_ok)
            && self.input_may_be_offered()
    }

    /// What [`Engine::input_offerable`] asks beyond the moment (a stall, a read pending, what
    /// the decoder holds): plain ZMTP, ready, no hang-up, no subscriptions to track, no timer
    /// that input resets, no alternative path (declined upgrades qualify).
    pub(crate) fn input_may_be_offered(&self) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        !self.hup
            && !self.subscriptions
            && z.input_shareable()
            && self
                .upgrade
                .as_ref()
                .is_none_or(|u| matches!(u.state, UpState::Declined) && !u.required)
    }

    /// True when the input decoder holds nothing received (plain ZMTP; false otherwise).
    pub(crate) fn input_clean(&self) -> bool {
        matches!(&self.proto, Proto::Zmtp(z) if z.input_clean())
    }

    /// A fresh decoder with the connection's limits (plain ZMTP only).
    pub(crate) fn fresh_decoder(&self) -> Option<crate::zmtp::codec::Decoder> {
        match &self.proto {
            Proto::Zmtp(z) => Some(z.fresh_decoder()),
            _ => None,
        }
    }

    /// The properties the connection attaches to received messages.
    pub(crate) fn input_metadata(&self) -> Option<std::sync::Arc<crate::msg::Metadata>> {
        match &self.proto {
            Proto::Zmtp(z) => z.metadata(),
            _ => None,
        }
    }

    /// Continues input with `dec`, a decoder the reader handed back mid-stream; returns the one
    /// it replaces.
    pub(crate) fn swap_input_decoder(
        &mut self,
        dec: crate::zmtp::codec::Decoder,
    ) -> Option<crate::zmtp::codec::Decoder> {
        match &mut self.proto {
            Proto::Zmtp(z) => Some(z.swap_decoder(dec)),
            _ => None,
        }
    }

    /// Takes output back from the pipe's writer (waiting out a direct write in progress) and
    /// queues what a partial direct write left, ahead of anything else.
    fn take_output(&mut self) {
        if let Some(d) = &self.direct {
            d.revoke();
            let rest = d.take_leftover();
            if let Proto::Zmtp(z) = &mut self.proto {
                for piece in rest {
                    match piece {
                        crate::direct::Piece::Bytes(b) => z.push_framed(&b),
                        crate::direct::Piece::Body { msg, from } => z.push_body_rest(msg, from),
                    }
                }
            }
        }
    }

    /// The stream's fd (monitor event values).
    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Reads what is available and decodes it, delivering events through `deliver`. Stops when
    /// `deliver` refuses a message (the pipe is full) or the read budget is spent. With
    /// `alt_only`, only the alternative path is read (the stream waits for its own readiness).
    pub fn on_readable(
        &mut self,
        now: Instant,
        alt_only: bool,
        deliver: &mut dyn FnMut(zmtp::Event) -> Option<Msg>,
        flush: &mut dyn FnMut(),
    ) -> Progress {
        let was_stalled = self.stalled.is_some();
        if let Some(m) = self.stalled.take() {
            if let Some(back) = deliver(zmtp::Event::Message(m)) {
                self.stalled = Some(back);
                return Progress::Open;
            }
        }
        // Events decoded earlier but not yet delivered.
        if let Some(p) = self.drain_events(deliver) {
            return p;
        }
        if self.stalled.is_some() {
            return Progress::Open;
        }
        self.read_pending = false;
        if was_stalled && std::mem::take(&mut self.yield_unstalled) {
            return Progress::Open;
        }
        if let Some(p) = self.alt_in(deliver) {
            return p;
        }
        if self.stalled.is_some() || alt_only {
            return Progress::Open;
        }
        let mut budget = READ_BUDGET;
        loop {
            let buf = self.proto.recv_buffer();
            let room = buf.len();
            match self.stream.read(buf) {
                Ok(0) => {
                    // The peer closed its stream after everything it sent on the alternative
                    // path was taken (its linger waits for that): deliver it before closing.
                    if self
                        .upgrade
                        .as_ref()
                        .is_some_and(|u| u.in_switched && u.path.is_some())
                    {
                        self.alt_process();
                        if let Some(p) = self.alt_in(deliver) {
                            return p;
                        }
                        if self.stalled.is_some() || self.read_pending {
                            return Progress::Open;
                        }
                    }
                    return Progress::Closed(Closed::Eof);
                }
                Ok(n) => {
                    // A short read drained the socket: the next arrival raises a new edge, so
                    // skip the read that would only return EAGAIN (unless the peer hung up, when
                    // we must read on to see the end of the stream).
                    let drained = n < room && !self.hup;
                    if let Err(e) = self.proto.received(n, now) {
                        return Progress::Closed(Closed::Protocol(e));
                    }
                    if let Some(p) = self.drain_events(deliver) {
                        return p;
                    }
                    // The peer's GO may just have been read: what waits on the alternative path
                    // comes next (its fd will not signal again for it).
                    if let Some(p) = self.alt_in(deliver) {
                        return p;
                    }
                    if self.stalled.is_some() {
                        return Progress::Open;
                    }
                    if drained {
                        return Progress::Open;
                    }
                    // More reads follow: let the application start on this one's messages.
                    flush();
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        self.read_pending = true;
                        return Progress::Open;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Progress::Closed(Closed::Io(e)),
            }
        }
    }

    fn drain_events(
        &mut self,
        deliver: &mut dyn FnMut(zmtp::Event) -> Option<Msg>,
    ) -> Option<Progress> {
        loop {
            let ev = match self.proto.poll_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => return None,
                Err(e) => return Some(Progress::Closed(Closed::Protocol(e))),
            };
            let ev = match ev {
                zmtp::Event::Command(body) => {
                    if let (Some(u), Proto::Zmtp(z)) =
                        (self.upgrade.as_deref_mut(), &mut self.proto)
                    {
                        if let Err(c) = u.on_command(body.data(), z) {
                            return Some(Progress::Closed(c));
                        }
                    }
                    continue;
                }
                zmtp::Event::Ready(peer) => {
                    if let (Some(u), Proto::Zmtp(z)) =
                        (self.upgrade.as_deref_mut(), &mut self.proto)
                    {
                        if let Err(c) = u.on_ready(&peer, z) {
                            return Some(Progress::Closed(c));
                        }
                    }
                    zmtp::Event::Ready(peer)
                }
                zmtp::Event::Message(m) => {
                    if self.upgrade.as_ref().is_some_and(|u| u.in_switched) {
                        return Some(Progress::Closed(Closed::Upgrade(
                            "the peer sent data on the stream after switching".into(),
                        )));
                    }
                    zmtp::Event::Message(m)
                }
            };
            if let Some(back) = deliver(ev) {
                self.stalled = Some(back);
                return None;
            }
        }
    }

    /// Pulls messages from `next` (the socket's pipe) into the protocol and writes what it can.
    pub fn on_writable(&mut self, next: &mut dyn FnMut() -> Option<Msg>) -> Progress {
        self.take_output();
        if let Some(p) = self.maybe_go() {
            return p;
        }
        if self.upgrade.as_ref().is_some_and(|u| u.out_switched) {
            // Our GO (and any control traffic) first: the peer holds what the path delivers
            // until it has read the GO.
            if let Some(p) = self.flush_stream() {
                return p;
            }
            if let Some(p) = self.alt_out(next) {
                return p;
            }
        }
        loop {
            let stream_owns_output = self
                .upgrade
                .as_ref()
                .is_none_or(|u| !u.out_switched && !u.output_held());
            if self.proto.is_ready() && stream_owns_output {
                while self.proto.pending_output() < OUT_BATCH {
                    if self.upgrade.as_ref().is_some_and(|u| u.go_due) && !self.out_in_multipart {
                        // The switch, at a message boundary.
                        if let Some(p) = self.maybe_go() {
                            return p;
                        }
                        if let Some(p) = self.flush_stream() {
                            return p;
                        }
                        if let Some(p) = self.alt_out(next) {
                            return p;
                        }
                        break;
                    }
                    match next() {
                        Some(m) => {
                            let starts_message = !self.out_in_multipart;
                            self.out_in_multipart = m.more();
                            // SUB/XSUB subscriptions travel on the pipe as 0x01/0x00
                            // messages; on the wire they take the peer's form (SUBSCRIBE /
                            // CANCEL commands for ZMTP 3.1), as libzmq 4.3.5 does. (Other
                            // sockets' frames are not looked at.)
                            let subscribe = self.subscriptions
                                && starts_message
                                && !m.more()
                                && m.data().first().is_some_and(|&f| f <= 1);
                            let r = match &mut self.proto {
                                Proto::Zmtp(z) if subscribe => {
                                    z.send_subscribe(&m.data()[1..], m.data()[0] == 1)
                                }
                                _ => self.proto.send(m),
                            };
                            if let Err(e) = r {
                                return Progress::Closed(Closed::Protocol(e));
                            }
                        }
                        None => break,
                    }
                }
            }
            if !self.proto.has_output() {
                if self.proto.close_requested() {
                    return Progress::Closed(Closed::Local);
                }
                return Progress::Open;
            }
            match self.proto.write_to(&mut self.stream) {
                // Nothing went out: the kernel buffer is full (the codec maps WouldBlock to 0).
                // Wait for the writable edge instead of spinning.
                Ok(0) => return Progress::Open,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Progress::Closed(Closed::Io(e)),
            }
        }
    }

    /// As [`Engine::on_writable`], for output that takes the pipe's framed lane (see
    /// [`Engine::takes_framed`]): `pull(budget, sink)` hands whole messages to `sink` as wire
    /// bytes or large frames. `None` (nothing written) when `pull` says the lane is not next:
    /// the caller uses [`Engine::on_writable`].
    pub fn on_writable_framed(&mut self, pull: &mut FramedPull<'_>) -> Option<Progress> {
        self.take_output();
        loop {
            let pending = self.proto.pending_output();
            if pending < OUT_BATCH {
                let Proto::Zmtp(z) = &mut self.proto else {
                    return None;
                };
                let mut err = None;
                let mut io_err = None;
                let mut direct = 0usize;
                let stream = &mut self.stream;
                let pulled = pull(OUT_BATCH - pending, &mut |f| match f {
                    crate::pipe::Framed::Bytes(b) => {
                        // Nothing is queued ahead of these bytes: the stream takes them
                        // straight from the lane, and only what it leaves is copied.
                        if io_err.is_none() && !z.has_output() {
                            match write_some(stream, b) {
                                Ok(n) => {
                                    direct += n;
                                    z.push_framed(&b[n..]);
                                }
                                Err(e) => io_err = Some(e),
                            }
                        } else if io_err.is_none() {
                            z.push_framed(b);
                        }
                    }
                    crate::pipe::Framed::Msg(m) => {
                        if let Err(e) = z.send(m) {
                            err = Some(e);
                        }
                    }
                });
                if let Some(e) = err {
                    return Some(Progress::Closed(Closed::Protocol(e)));
                }
                if let Some(e) = io_err {
                    return Some(Progress::Closed(Closed::Io(e)));
                }
                if pulled.is_none() && !self.proto.has_output() {
                    return None;
                }
                if direct > 0 && !self.proto.has_output() && pulled.is_some_and(|n| n > 0) {
                    // All of it went out: more may be waiting in the lane.
                    continue;
                }
            }
            if !self.proto.has_output() {
                return Some(Progress::Open);
            }
            match self.proto.write_to(&mut self.stream) {
                Ok(0) => return Some(Progress::Open),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(Progress::Open),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Progress::Closed(Closed::Io(e))),
            }
        }
    }

    /// True when encoded bytes wait for the stream to become writable, or frames for the
    /// alternative path (or its peer's acknowledgement).
    pub fn has_output(&self) -> bool {
        self.proto.has_output() || self.upgrade.as_ref().is_some_and(|u| u.busy())
    }

    /// Writes what the stream can take now of the queued output (control traffic once the
    /// messages have moved to the alternative path).
    fn flush_stream(&mut self) -> Option<Progress> {
        self.take_output();
        while self.proto.has_output() {
            match self.proto.write_to(&mut self.stream) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Progress::Closed(Closed::Io(e))),
            }
        }
        None
    }

    /// Sends our `GO` when it is due and we are at a message boundary; output then moves to the
    /// alternative path.
    fn maybe_go(&mut self) -> Option<Progress> {
        let (Some(u), Proto::Zmtp(z)) = (self.upgrade.as_deref_mut(), &mut self.proto) else {
            return None;
        };
        if !u.go_due || self.out_in_multipart {
            return None;
        }
        if let Err(e) = z.send_command(alt::CMD_GO, &[]) {
            return Some(Progress::Closed(Closed::Protocol(e)));
        }
        u.go_due = false;
        u.out_switched = true;
        if u.is_up() {
            u.report_up();
        }
        None
    }

    /// Moves frames from `next` to the alternative path until it pushes back or the budget is
    /// spent (then `read_pending` asks for another turn).
    fn alt_out(&mut self, next: &mut dyn FnMut() -> Option<Msg>) -> Option<Progress> {
        let u = self.upgrade.as_deref_mut()?;
        if !u.out_switched {
            return None;
        }
        let path = u.path.as_mut()?;
        let mut sent = 0usize;
        let mut pending = u.held.take();
        loop {
            let m = match pending.take() {
                Some(m) => m,
                None => {
                    if sent >= ALT_BUDGET {
                        self.read_pending = true;
                        break;
                    }
                    match next() {
                        Some(m) => {
                            self.out_in_multipart = m.more();
                            m
                        }
                        None => break,
                    }
                }
            };
            match path.send(m) {
                Ok(None) => sent += 1,
                Ok(Some(back)) => {
                    u.held = Some(back);
                    break;
                }
                Err(e) => return Some(Progress::Closed(Closed::Alt(e))),
            }
        }
        if sent > 0 {
            if let Err(e) = path.flush() {
                return Some(Progress::Closed(Closed::Alt(e)));
            }
        }
        None
    }

    /// Delivers frames from the alternative path once input has switched to it.
    fn alt_in(&mut self, deliver: &mut dyn FnMut(zmtp::Event) -> Option<Msg>) -> Option<Progress> {
        let u = self.upgrade.as_deref_mut()?;
        if !u.in_switched {
            if u.failed {
                return Some(Progress::Closed(Closed::Alt(AltError(
                    "the RDMA path failed during the switch".into(),
                ))));
            }
            return None;
        }
        let path = u.path.as_mut()?;
        for _ in 0..ALT_BUDGET {
            match path.recv() {
                Ok(Some(mut m)) => {
                    m.set_metadata(u.md.clone());
                    if let Some(back) = deliver(zmtp::Event::Message(m)) {
                        self.stalled = Some(back);
                        return None;
                    }
                }
                Ok(None) => return None,
                Err(e) => return Some(Progress::Closed(Closed::Alt(e))),
            }
        }
        self.read_pending = true;
        None
    }

    /// Runs the alternative path's completions; true when anything happened. A failure is
    /// recorded: frames that arrived before it are still delivered, then the connection closes.
    pub fn alt_process(&mut self) -> bool {
        let Some(u) = self.upgrade.as_deref_mut() else {
            return false;
        };
        let Some(p) = u.path.as_mut() else {
            return false;
        };
        match p.process() {
            Ok(b) => b,
            Err(_) => {
                u.failed = true;
                true
            }
        }
    }

    /// Arms the alternative path's notification and looks once more; true when that found work
    /// (then process again before sleeping).
    pub fn alt_arm(&mut self) -> bool {
        let Some(u) = self.upgrade.as_deref_mut() else {
            return false;
        };
        let Some(p) = u.path.as_mut() else {
            return false;
        };
        if p.arm().is_err() {
            u.failed = true;
            return true;
        }
        match p.process() {
            Ok(b) => b,
            Err(_) => {
                u.failed = true;
                true
            }
        }
    }

    /// Runs protocol timers.
    pub fn on_timer(&mut self, now: Instant) -> Progress {
        match self.proto.handle_timeout(now) {
            Ok(()) => Progress::Open,
            Err(e) => Progress::Closed(Closed::Protocol(e)),
        }
    }
}

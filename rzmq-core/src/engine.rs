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

use crate::msg::Msg;
use crate::zmtp::{self, ZmtpError};

/// Bytes of encoded output above which the engine stops pulling messages from the pipe.
const OUT_BATCH: usize = 256 * 1024;
/// Bytes read per readiness event before yielding to other connections.
const READ_BUDGET: usize = 4 * 1024 * 1024;

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
    /// Bytes of the current outgoing multipart message already taken from the pipe.
    pub out_in_multipart: bool,
    /// The peer hung up (or the stream errored): read until the end of the stream.
    pub hup: bool,
    /// This is a SUB/XSUB connection: 0x01/0x00 messages are subscriptions.
    pub subscriptions: bool,
}

impl Engine {
    /// An engine over a connected stream.
    pub fn new(stream: Stream, proto: Proto) -> Engine {
        Engine {
            stream,
            proto,
            stalled: None,
            read_pending: false,
            out_in_multipart: false,
            hup: false,
            subscriptions: false,
        }
    }

    /// The stream's fd (monitor event values).
    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Reads what is available and decodes it, delivering events through `deliver`. Stops when
    /// `deliver` refuses a message (the pipe is full) or the read budget is spent.
    pub fn on_readable(
        &mut self,
        now: Instant,
        deliver: &mut dyn FnMut(zmtp::Event) -> Option<Msg>,
    ) -> Progress {
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
        let mut budget = READ_BUDGET;
        self.read_pending = false;
        loop {
            let buf = self.proto.recv_buffer();
            let room = buf.len();
            match self.stream.read(buf) {
                Ok(0) => return Progress::Closed(Closed::Eof),
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
                    if self.stalled.is_some() {
                        return Progress::Open;
                    }
                    if drained {
                        return Progress::Open;
                    }
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
            if let Some(back) = deliver(ev) {
                self.stalled = Some(back);
                return None;
            }
        }
    }

    /// Pulls messages from `next` (the socket's pipe) into the protocol and writes what it can.
    pub fn on_writable(&mut self, next: &mut dyn FnMut() -> Option<Msg>) -> Progress {
        loop {
            if self.proto.is_ready() {
                while self.proto.pending_output() < OUT_BATCH {
                    match next() {
                        Some(m) => {
                            let starts_message = !self.out_in_multipart;
                            self.out_in_multipart = m.more();
                            let r = match (&mut self.proto, m.data().first()) {
                                // SUB/XSUB subscriptions travel on the pipe as 0x01/0x00
                                // messages; on the wire they take the peer's form (SUBSCRIBE /
                                // CANCEL commands for ZMTP 3.1), as libzmq 4.3.5 does.
                                (Proto::Zmtp(z), Some(&flag))
                                    if self.subscriptions
                                        && starts_message
                                        && !m.more()
                                        && flag <= 1 =>
                                {
                                    z.send_subscribe(&m.data()[1..], flag == 1)
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

    /// True when encoded bytes wait for the stream to become writable.
    pub fn has_output(&self) -> bool {
        self.proto.has_output()
    }

    /// Runs protocol timers.
    pub fn on_timer(&mut self, now: Instant) -> Progress {
        match self.proto.handle_timeout(now) {
            Ok(()) => Progress::Open,
            Err(e) => Progress::Closed(Closed::Protocol(e)),
        }
    }
}

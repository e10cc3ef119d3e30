//! Engines: one connection's protocol driver, bytes in and out of a stream, messages in and out
//! of the socket's pipes.
//!
//! An engine owns a non-blocking byte stream and a protocol state machine (ZMTP, or raw bytes for
//! STREAM sockets). It is driven by an I/O thread: `on_readable`, `on_writable`, `on_pipe` (the
//! socket wrote or read), `on_timer`. It never blocks. Backpressure: when the socket's inbound pipe
//! is at its HWM the engine stops reading (the kernel buffers fill and the peer's TCP window
//! closes) until the pipe is activated again. The engine knows nothing of which transport carries
//! its bytes beyond the [`Stream`] seam.
//!
//! Files: `stream` (the byte stream), `proto` (ZMTP or raw framing), `upgrade` (the switch
//! to an alternative path), `alt_io` (messages over that path), `sharing` (the engine's side of
//! direct sends and receives); this file is the engine itself: reading, writing, backpressure.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use crate::alt::AltError;
use crate::msg::Msg;
use crate::zmtp::{self, ZmtpError};

mod alt_io;
mod proto;
mod sharing;
mod stream;
mod upgrade;

pub(crate) use proto::Proto;
use stream::write_some;
pub(crate) use stream::Stream;
pub(crate) use upgrade::Upgrade;

/// Bytes of encoded output above which the engine stops pulling messages from the pipe.
const OUT_BATCH: usize = 256 * 1024;

/// What [`Engine::on_writable_framed`] pulls with: `(budget, sink)` -> messages moved, or
/// `None` when the pipe's framed lane is not next.
pub(crate) type FramedPull<'a> =
    dyn FnMut(usize, &mut dyn FnMut(crate::pipe::Framed<'_>)) -> Option<usize> + 'a;
/// Bytes read per readiness event before yielding to other connections.
const READ_BUDGET: usize = 4 * 1024 * 1024;

/// What ended a connection.
#[derive(Debug)]
pub(crate) enum Closed {
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

/// What the engine reports to its session after an event.
pub(crate) enum Progress {
    /// Keep going.
    Open,
    /// The connection is over.
    Closed(Closed),
}

/// One live connection: a stream and its protocol.
pub(crate) struct Engine {
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

impl Engine {
    /// An engine over a connected stream.
    pub(crate) fn new(stream: Stream, proto: Proto) -> Engine {
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
    pub(crate) fn set_split_large(&mut self, split: bool) {
        if let Proto::Zmtp(z) = &mut self.proto {
            z.set_split_large(split);
        }
    }

    /// See [`Engine::set_split_large`] (yes for protocols other than ZMTP, which have no
    /// direct sends).
    pub(crate) fn split_large(&self) -> bool {
        match &self.proto {
            Proto::Zmtp(z) => z.split_large(),
            _ => true,
        }
    }

    /// The stream's fd (monitor event values).
    pub(crate) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Reads what is available and decodes it, delivering events through `deliver`. Stops when
    /// `deliver` refuses a message (the pipe is full) or the read budget is spent. With
    /// `alt_only`, only the alternative path is read (the stream waits for its own readiness).
    pub(crate) fn on_readable(
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
    pub(crate) fn on_writable(&mut self, next: &mut dyn FnMut() -> Option<Msg>) -> Progress {
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
    pub(crate) fn on_writable_framed(&mut self, pull: &mut FramedPull<'_>) -> Option<Progress> {
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
    /// After the handshake: an RDMA upgrade is still being agreed with the peer (neither
    /// declined nor switched both ways), so more of its commands are on their way.
    pub(crate) fn upgrade_settling(&self) -> bool {
        self.upgrade.as_ref().is_some_and(|u| u.settling())
    }

    pub(crate) fn has_output(&self) -> bool {
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

    /// Runs protocol timers.
    pub(crate) fn on_timer(&mut self, now: Instant) -> Progress {
        match self.proto.handle_timeout(now) {
            Ok(()) => Progress::Open,
            Err(e) => Progress::Closed(Closed::Protocol(e)),
        }
    }
}

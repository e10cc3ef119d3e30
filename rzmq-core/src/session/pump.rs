//! Moving messages: the stream's input into the socket's pipe (handshake completion and ZAP on
//! the way), the pipe's output onto the stream, with the framed lane's naps between writes of
//! a stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{Fate, Io, Phase, Session, Timer};
use crate::command::{Attach, PeerPipe};
use crate::engine::{Closed, Progress, Proto};
use crate::monitor;
use crate::msg::Msg;
use crate::pattern::PipeEntry;
use crate::pipe::{self, WriteError};
use crate::zmtp;

/// A framed-lane pass that moved this many messages is a stream (see `RzmqOptions::framed_nap`).
const NAP_AFTER_MSGS: usize = 64;
/// Most time one pass naps.
const NAP_PER_PASS: std::time::Duration = std::time::Duration::from_micros(200);
/// A nap is taken only while less than this waits in the lane.
const NAP_BELOW_BYTES: usize = 32 * 1024;

impl Session {
    /// Reads from the stream into the socket's pipe.
    /// Moves what arrived to the socket's pipe; with `alt_only`, only from the alternative path
    /// (the stream is read on its own readiness once input has switched).
    pub(super) fn pump_in(&mut self, r: &mut impl Io, token: u64, alt_only: bool) -> Option<Fate> {
        // Output is granted when input arrives (a reply), before it is delivered: an
        // application woken by it sends its next request itself, without waiting for this turn
        // to end. Streams of sends with nothing coming back keep the I/O thread's batching.
        if !self.rx_reclaim() {
            // The socket is reading the stream itself; it looks again when it lets go, or,
            // holding input between receives, when it has taken what it read. A reader that
            // does not come back is checked on by a timer.
            if !self.timers.is_set(Timer::HeldStale) {
                if let Some(claims) = self.rx.as_ref().map(|rx| rx.claims()) {
                    self.held_seen = Some(claims);
                    let at = Instant::now() + crate::direct::hold_stale();
                    self.arm(r, Timer::HeldStale, at, token);
                }
            }
            // Held between receives (or offered to a socket that will take it): every arrival
            // of the stream would wake this thread for nothing; stop listening until the
            // reader lets go (or the timer takes it back).
            if !self.deaf
                && self
                    .rx
                    .as_ref()
                    .is_some_and(|x| x.is_held() || x.offered_wanted())
            {
                self.go_deaf(r, token);
            }
            return None;
        }
        self.direct_grant(r);
        let now = Instant::now();
        let mut newly_ready: Option<zmtp::Peer> = None;
        // Got ahead of a socket that receives with blocking calls (a message stalled on its
        // full pipe): deliver what was decoded, then hand input to the socket instead of
        // reading on, so the stream does not stay on this thread for good.
        let yield_input = !alt_only
            && self.zap.is_none()
            && r.streams().load(Ordering::SeqCst) == 1
            && self.rx.as_ref().is_some_and(|x| x.is_wanted())
            && self.engine.as_ref().is_some_and(|e| e.stalled.is_some());
        if let Some(e) = self.engine.as_mut() {
            e.yield_unstalled = yield_input;
        }
        let mut delivered = false;
        let notify_connect = self.router_notifies(crate::options::NOTIFY_CONNECT);
        let progress = {
            let engine = self.engine.as_mut()?;
            // Both callbacks below write to the pipe; the engine never runs them together.
            let pipe = std::cell::RefCell::new(&mut self.pipe);
            let mut deliver = |ev: zmtp::Event| -> Option<Msg> {
                match ev {
                    zmtp::Event::Ready(peer) => {
                        // A pipe from before (a reconnect): the notification goes ahead of
                        // what this read decodes after READY.
                        if notify_connect {
                            if let Some(p) = pipe.borrow_mut().as_mut() {
                                let _ = p.to_socket.try_write_deferred(Msg::new());
                                delivered = true;
                            }
                        }
                        newly_ready = Some(peer);
                        None
                    }
                    // Upgrade commands are the engine's; none reach here.
                    zmtp::Event::Command(_) => None,
                    zmtp::Event::Message(m) => match pipe.borrow_mut().as_mut() {
                        Some(p) => match p.to_socket.try_write_deferred(m) {
                            Ok(()) => {
                                delivered = true;
                                None
                            }
                            Err((_, WriteError::Closed)) => None,
                            Err((m, WriteError::Full)) => Some(m),
                        },
                        // Not attached yet (handshake event comes first): keep it.
                        None => Some(m),
                    },
                }
            };
            let mut flush = || {
                if let Some(p) = pipe.borrow_mut().as_mut() {
                    p.to_socket.flush();
                }
            };
            let p = engine.on_readable(now, alt_only, &mut deliver, &mut flush);
            flush();
            if let Some(peer) = newly_ready.take() {
                // Handshake finished mid-read: attach, then go on delivering.
                Some((p, Some(peer)))
            } else {
                Some((p, None))
            }
        };
        let (p, peer) = progress?;
        self.delivered_since_out |= delivered;
        let yielded = yield_input
            && self
                .engine
                .as_mut()
                .is_some_and(|e| !std::mem::replace(&mut e.yield_unstalled, false));
        if let Some(f) = self.register_alt(r, token) {
            return Some(f);
        }
        if let Some(peer) = peer {
            if let Some(f) = self.handshake_done(r, token, peer) {
                return Some(f);
            }
            // Deliver whatever was decoded after READY.
            return self.pump_in(r, token, false);
        }
        match p {
            Progress::Open => {
                if let Some(e) = self.engine.as_ref() {
                    if let Some(at) = e.proto.poll_timeout() {
                        self.timers.set(Timer::Protocol, at);
                        r.schedule(at, token);
                    }
                }
                if self.zap.is_none() && r.streams().load(Ordering::SeqCst) == 1 {
                    // The reply to what was just delivered may come straight back: output to
                    // the writer, input to the reader, each when idle (only a connection alone
                    // on its I/O thread is read by its socket, see crate::direct).
                    self.direct_grant(r);
                    self.rx_offer(r, token, yielded);
                    if !delivered && self.rx.as_ref().is_some_and(|x| x.offered_wanted()) {
                        // A socket that waits for this input may be asleep on its mailbox (its
                        // claim came while this thread was reading) and nothing delivered here
                        // wakes it: tell it input is its to take.
                        if let Some(p) = self.pipe.as_ref() {
                            p.to_socket.poke_reader();
                        }
                    }
                }
                if yielded {
                    if self.rx.as_ref().is_some_and(|x| x.offered_wanted()) {
                        // The socket takes the stream in its next receive; a timer checks
                        // that it comes.
                        if let Some(claims) = self.rx.as_ref().map(|rx| rx.claims()) {
                            self.held_seen = Some(claims);
                            let at = Instant::now() + crate::direct::hold_stale();
                            self.arm(r, Timer::HeldStale, at, token);
                        }
                        self.go_deaf(r, token);
                    } else if let Some(e) = self.engine.as_mut() {
                        // Not handed over: read on (nothing else would, the stream's data
                        // having arrived while this thread was stalled).
                        e.read_pending = true;
                    }
                }
                self.service_zap(r, token)
            }
            Progress::Closed(c) => Some(self.broken(r, token, c)),
        }
    }

    /// Runs the ZAP exchange of a handshake that waits on it ([`crate::zap`]).
    pub(super) fn service_zap(&mut self, r: &mut impl Io, token: u64) -> Option<Fate> {
        let target = self.target(r, token);
        let Some(Proto::Zmtp(conn)) = self.engine.as_mut().map(|e| &mut e.proto) else {
            return None;
        };
        let step = crate::zap::service(
            &mut self.zap,
            conn,
            &self.setup.inproc,
            || target,
            &self.setup.monitor,
            &self.endpoint,
        );
        match step {
            crate::zap::Step::Idle => None,
            crate::zap::Step::Progress => Some(self.on_ready(r, token, true, true)),
            crate::zap::Step::Failed(e) => Some(self.broken(r, token, Closed::Protocol(e))),
        }
    }

    /// The handshake completed: raise the event, publish the peer's properties on the pipe
    /// (attaching a new one to the socket when there is none yet).
    pub(super) fn handshake_done(
        &mut self,
        r: &mut impl Io,
        token: u64,
        peer: zmtp::Peer,
    ) -> Option<Fate> {
        self.phase = Phase::Up;
        self.setup
            .monitor
            .event_at(monitor::EVENT_HANDSHAKE_SUCCEEDED, 0, self.event_addrs());
        // libzmq's private "__fd" property carries the connection's fd (zmq_msg_get ZMQ_SRCFD).
        let md = match self.engine.as_mut() {
            Some(e) if matches!(e.proto, Proto::Raw(_)) => {
                let mut m = (*peer.metadata).clone();
                m.insert("__fd", e.fd().to_string().as_bytes());
                let m = Arc::new(m);
                e.proto.set_raw_metadata(m.clone());
                m
            }
            _ => peer.metadata,
        };
        match &self.pipe {
            Some(p) => {
                p.to_socket.set_peer(md);
            }
            None => {
                // Accepted connection, or IMMEDIATE connect: the pipe starts now.
                let o = &self.setup.options;
                let conflate = o.effective_conflate();
                let (to_peer_w, to_peer_r) = pipe::pipe_with(o.sndhwm.max(0) as u64, conflate);
                let (from_peer_w, from_peer_r) = pipe::pipe_with(o.rcvhwm.max(0) as u64, conflate);
                from_peer_w.set_peer(md.clone());
                let t = self.target(r, token);
                from_peer_w.set_target(t.clone());
                to_peer_r.set_target(t);
                let mut entry = PipeEntry::new(from_peer_r, to_peer_w);
                entry.peer = Some(md);
                entry.endpoint = Some(self.endpoint.clone());
                // Made by a connected session: its connection's endpoints, as libzmq's engine
                // gives them to the pipe it makes (a connect's pipe made earlier keeps none).
                entry.uris = Some((self.local_uri.clone(), self.peer_uri.clone()));
                if let Some(rid) = &self.setup.connect_routing_id {
                    entry.routing_id = rid.clone();
                    entry.connect_routing_id = Some(rid.clone());
                }
                let id = self.setup.socket.reserve_pipe_id();
                self.setup.socket.attach(Attach { entry, id });
                let mut to_socket = from_peer_w;
                if self.router_notifies(crate::options::NOTIFY_CONNECT) {
                    let _ = to_socket.try_write(Msg::new());
                }
                self.pipe = Some(PeerPipe {
                    to_socket,
                    from_socket: to_peer_r,
                });
            }
        }
        self.queue_hello()
            .map(|e| self.broken(r, token, Closed::Protocol(e)))
    }

    /// HELLO_MSG: the first message of every connection (a reconnect's too), ahead of whatever
    /// the pipe holds. It goes into the engine's output, which every later write follows: the
    /// pump's (framed lane included: its bytes go straight out only when nothing is queued
    /// ahead) and direct sends (output is granted only to an engine with nothing queued).
    fn queue_hello(&mut self) -> Option<zmtp::ZmtpError> {
        let o = &self.setup.options;
        if o.hello_msg.is_empty() || !self.setup.socket_type.sends_hello_msg() {
            return None;
        }
        let hello = Msg::copy_from(&o.hello_msg);
        match self.engine.as_mut().map(|e| &mut e.proto) {
            Some(Proto::Zmtp(z)) => z.send(hello).err(),
            _ => None,
        }
    }

    /// Moves messages from the socket's pipe to the stream.
    pub(super) fn pump_out(&mut self, r: &mut impl Io, token: u64) -> Option<Fate> {
        let engine = self.engine.as_mut()?;
        if let (Some(d), Some(p)) = (&self.direct, &self.pipe) {
            // Output granted, nothing queued anywhere: leave it to the writer (a readiness
            // event is no reason to take it back).
            if d.left_to_writer() && !engine.has_output() && p.from_socket.is_idle() {
                return None;
            }
        }
        let drop_partial = &mut self.drop_partial;
        let moved = &mut self.last_moved;
        *moved = 0;
        let o = &self.setup.options.rzmq;
        let (framed, nap, nap_empty) = (o.framed, o.framed_nap(), o.framed_nap_empty);
        if !*drop_partial && framed && engine.takes_framed() {
            if let Some(p) = self.pipe.as_mut() {
                // Small frames come encoded from now on (see crate::pipe::Reader::read_framed).
                p.from_socket.request_framed();
                r.work().fetch_add(1, Ordering::SeqCst);
                let pipe = &mut self.pipe;
                let mut napped = std::time::Duration::ZERO;
                // Replies to what this writer sent may be what it waits for: no empty-lane nap.
                let mut napped_empty = !nap_empty || std::mem::take(&mut self.delivered_since_out);
                let progress = engine.on_writable_framed(&mut |budget, sink| {
                    let reader = &mut pipe.as_mut()?.from_socket;
                    // A stream (this pass already wrote a batch) with little waiting: let the
                    // writer add to it before the next write, so writes and the peer's
                    // wake-ups stay few (bounded per pass). Nothing waiting: the writer may
                    // just be slower than this thread, or the stream ended; one nap tells
                    // (going idle and being woken for the next message costs more than it).
                    let backlog = reader.framed_backlog();
                    if !nap.is_zero()
                        && *moved >= NAP_AFTER_MSGS
                        && napped < NAP_PER_PASS
                        && backlog < NAP_BELOW_BYTES
                        && (backlog > 0 || !napped_empty)
                    {
                        napped_empty |= backlog == 0;
                        // A writer waiting on the high-water mark must not wait out the nap.
                        reader.publish_now();
                        let t = std::time::Instant::now();
                        std::thread::sleep(nap);
                        napped += t.elapsed();
                    }
                    let n = reader.read_framed(budget, sink)?;
                    *moved += n;
                    Some(n)
                });
                r.work().fetch_sub(1, Ordering::SeqCst);
                match progress {
                    Some(Progress::Open) => {
                        self.park_if_idle();
                        return None;
                    }
                    Some(Progress::Closed(c)) => return Some(self.broken(r, token, c)),
                    None => {}
                }
            }
        }
        let mut next = || -> Option<Msg> {
            let p = self.pipe.as_mut()?;
            loop {
                let m = p.from_socket.read()?;
                if *drop_partial {
                    *drop_partial = m.more();
                    continue;
                }
                *moved += usize::from(!m.more());
                return Some(m);
            }
        };
        // Messages this pass takes may have been sent before a direct send on another
        // connection of this thread: that one waits until they are written.
        r.work().fetch_add(1, Ordering::SeqCst);
        let progress = engine.on_writable(&mut next);
        r.work().fetch_sub(1, Ordering::SeqCst);
        match progress {
            Progress::Open => {
                self.park_if_idle();
                None
            }
            Progress::Closed(c) => Some(self.broken(r, token, c)),
        }
    }

    /// After a pass that wrote everything, found nothing queued and moved at most one message:
    /// output is idle, and a reply to input the socket reads itself may go out directly.
    pub(super) fn park_if_idle(&self) {
        if let (Some(d), Some(e), Some(p), Some(_)) = (
            &self.direct,
            self.engine.as_ref(),
            self.pipe.as_ref(),
            self.rx.as_ref(),
        ) {
            if self.last_moved <= 1 && e.direct_capable() && p.from_socket.is_idle() {
                d.park();
            }
        }
    }
}

//! A session's events: its start on the I/O thread, readiness of its stream and of its
//! alternative (RDMA) path, its timers, its pipes needing attention, and linger at the end.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use mio::{Interest, Token};

use super::{Fate, Io, Phase, Session, Timer, ALT_BIT};
use crate::engine::{Closed, Progress, Proto, Stream};
use crate::monitor;
use crate::msg::{Metadata, Msg};
use crate::zmtp;

impl Session {
    /// First run on the I/O thread: register the stream or start connecting.
    pub(crate) fn start(&mut self, r: &mut impl Io, token: u64) -> Fate {
        if let Some(p) = &self.pipe {
            let t = self.target(r, token);
            p.to_socket.set_target(t.clone());
            p.from_socket.set_target(t);
        }
        if self.engine.is_some() {
            return self.register_engine(r, token);
        }
        self.try_connect(r, token)
    }

    /// Registers the new engine's stream with the thread and sends the greeting.
    pub(super) fn register_engine(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let Some(e) = self.engine.as_mut() else {
            return Fate::Keep;
        };
        if r.registry()
            .register(
                e.stream.source(),
                Token(token as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            return self.broken(r, token, Closed::Local);
        }
        self.deaf = false;
        if !self.counted {
            self.counted = true;
            r.streams().fetch_add(1, Ordering::SeqCst);
        }
        if let Some(at) = e.proto.poll_timeout() {
            self.timers.set(Timer::Protocol, at);
            r.schedule(at, token);
        }
        if matches!(e.proto, Proto::Raw(_)) {
            // Raw (STREAM) connections have no handshake: the peer is ready at once.
            let mut md = Metadata::new();
            if let Stream::Tcp(t) = &e.stream {
                if let Ok(a) = t.peer_addr() {
                    md.insert("Peer-Address", a.ip().to_string().as_bytes());
                }
            }
            let peer = zmtp::Peer {
                socket_type: None,
                routing_id: Vec::new(),
                metadata: Arc::new(md),
                major_version: 0,
                minor_version: 0,
            };
            if let Some(f) = self.handshake_done(r, token, peer) {
                return f;
            }
            if self.setup.options.stream_notify {
                // The connect notification carries the connection's properties (Peer-Address).
                let mut note = Msg::new();
                note.set_metadata(self.engine.as_ref().and_then(|e| e.proto.raw_metadata()));
                if let Some(p) = self.pipe.as_mut() {
                    let _ = p.to_socket.try_write(note);
                }
            }
        }
        // Send the greeting.
        self.on_ready(r, token, true, true)
    }

    /// A wake-up: whatever of the session's deadlines is due.
    pub(crate) fn on_timer(&mut self, r: &mut impl Io, token: u64, now: Instant) -> Fate {
        // The held-input check runs at any wake-up while it is set, as it always has (a reader
        // that claimed nothing since is stale), not only at its own deadline.
        if self.timers.is_set(Timer::HeldStale) {
            self.timers.stop(Timer::HeldStale);
            if let Some(seen) = self.held_seen.take() {
                if let Some(f) = self.check_held(r, token, seen) {
                    return f;
                }
            }
        }
        // Linger first: a reconnect due at the same wake-up must not hide it (each later
        // wake-up would be a reconnect's again, and the session would outlive its linger).
        if let Some(p) = &self.pipe {
            if let Some(Some(deadline)) = p.from_socket.linger_deadline() {
                if deadline <= now {
                    return Fate::Remove;
                }
            }
        }
        if let Some(ci) = self.connect.as_mut() {
            if self.timers.is_expired(Timer::Reconnect, now)
                && self.engine.is_none()
                && ci.pending.is_none()
            {
                return self.try_connect(r, token);
            }
            if ci.pending.is_some() && self.timers.is_expired(Timer::ConnectTimeout, now) {
                // Connect timeout (through a proxy: connect and SOCKS handshake): give up on
                // this attempt.
                self.timers.stop(Timer::ConnectTimeout);
                ci.socks = None;
                if let Some(mut s) = ci.pending.take() {
                    let _ = r.registry().deregister(&mut s);
                }
                return self.retry_later(r, token);
            }
        }
        let Some(e) = self.engine.as_mut() else {
            return Fate::Keep;
        };
        match e.on_timer(now) {
            Progress::Open => {}
            Progress::Closed(c) => return self.broken(r, token, c),
        }
        if let Some(at) = e.proto.poll_timeout() {
            self.timers.set(Timer::Protocol, at);
            r.schedule(at, token);
        }
        // Heartbeats may have queued output.
        self.on_ready(r, token, false, true)
    }

    /// The stream (or a connect in progress) is readable or writable.
    pub(crate) fn on_ready(
        &mut self,
        r: &mut impl Io,
        token: u64,
        readable: bool,
        writable: bool,
    ) -> Fate {
        if let Some(ci) = self.connect.as_mut() {
            if ci.socks.as_ref().is_some_and(|c| c.up) {
                return self.socks_step(r, token);
            }
            if let Some(mut s) = ci.pending.take() {
                // Connect completion.
                match s.take_error() {
                    Ok(None) if s.peer_addr().is_ok() => {
                        if let Some(c) = ci.socks.as_mut() {
                            // Connected to the proxy: the SOCKS handshake comes first.
                            c.up = true;
                            ci.pending = Some(s);
                            return self.socks_step(r, token);
                        }
                        self.timers.stop(Timer::ConnectTimeout);
                        let _ = r.registry().deregister(&mut s);
                        return self.connected(r, token, Stream::Tcp(s));
                    }
                    Ok(None) if !writable => {
                        ci.pending = Some(s);
                        return Fate::Keep;
                    }
                    _ => {
                        ci.socks = None;
                        self.timers.stop(Timer::ConnectTimeout);
                        let _ = r.registry().deregister(&mut s);
                        self.setup.monitor.event_at(
                            monitor::EVENT_CLOSED,
                            s.as_raw_fd() as u32,
                            crate::monitor::EventAddrs {
                                local: "",
                                remote: &self.monitor_endpoint,
                                v1: &self.monitor_endpoint,
                            },
                        );
                        return self.retry_later(r, token);
                    }
                }
            }
        }
        if self.engine.is_none() {
            return Fate::Keep;
        }
        if readable {
            if let Some(f) = self.pump_in(r, token, false) {
                return f;
            }
        }
        // Output may be pending after reading too (the rest of the greeting, a PONG).
        if writable
            || self
                .engine
                .as_ref()
                .is_some_and(|e| e.proto.is_ready() || e.has_output())
        {
            if let Some(f) = self.pump_out(r, token) {
                return f;
            }
        }
        self.check_linger(r, token)
    }

    /// The alternative data path is readable: completions, then input, then output, until
    /// arming finds nothing new.
    pub(crate) fn on_alt(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let mut rounds = 0;
        loop {
            let Some(e) = self.engine.as_mut() else {
                return Fate::Keep;
            };
            e.alt_process();
            // Once input has switched the stream carries only control traffic, read on its own
            // readiness. Before that, data on the path means the peer's GO was sent on the
            // stream before it: read the stream too rather than wait for its readiness.
            let alt_only = e.upgrade.as_ref().is_some_and(|u| u.input_switched());
            if let Some(f) = self.pump_in(r, token, alt_only) {
                return f;
            }
            if let Some(f) = self.pump_out(r, token) {
                return f;
            }
            let Some(e) = self.engine.as_mut() else {
                return Fate::Keep;
            };
            if !e.alt_arm() {
                break;
            }
            rounds += 1;
            if rounds >= 8 {
                // Still busy: take another turn after the other connections. Through `on_alt`
                // again: the last look may have consumed the completion event, leaving the
                // channel unarmed, and only this loop arms it again.
                self.alt_again = true;
                break;
            }
        }
        self.check_linger(r, token)
    }

    /// Registers a newly created alternative path's fd with the reactor.
    pub(super) fn register_alt(&mut self, r: &mut impl Io, token: u64) -> Option<Fate> {
        let fd = self.engine.as_mut()?.upgrade.as_mut()?.take_new_fd()?;
        if r.registry()
            .register(
                &mut mio::unix::SourceFd(&fd),
                Token((token | ALT_BIT) as usize),
                Interest::READABLE,
            )
            .is_err()
        {
            return Some(self.broken(
                r,
                token,
                Closed::Upgrade("cannot poll the RDMA completion fd".into()),
            ));
        }
        None
    }

    /// A pipe of the session needs attention (messages to send, room, a reader's change).
    pub(crate) fn on_pipe(&mut self, r: &mut impl Io, token: u64) -> Fate {
        if self.zap.is_some() {
            if let Some(f) = self.service_zap(r, token) {
                return f;
            }
        }
        // The reader let input go (or handed it back, or no longer waits for it): listen to
        // the stream again. Otherwise stay deaf, asking again to be woken (a wake-up that
        // came for an earlier change of the reader's is spent).
        if self.deaf && self.rx.as_ref().is_none_or(|x| !x.set_deaf()) {
            self.hear(r, token);
        }
        if let Some(e) = self.engine.as_ref() {
            // Reading resumes only where it had stopped for the socket's pipe; otherwise the
            // stream's own readiness drives reads (no speculative read per outgoing message).
            if e.stalled.is_some()
                || e.read_pending
                || self.rx.as_ref().is_some_and(|x| x.handed_back())
            {
                if let Some(f) = self.pump_in(r, token, false) {
                    return f;
                }
            }
            if let Some(f) = self.pump_out(r, token) {
                return f;
            }
        }
        self.check_linger(r, token)
    }

    /// Ends the session when the socket is gone and its queued messages are delivered, or when
    /// the pipe was torn down without linger (disconnect, unbind, peer pipe reaped).
    pub(super) fn check_linger(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let Some(p) = &self.pipe else {
            return if self.socket_closed {
                Fate::Remove
            } else {
                Fate::Keep
            };
        };
        if !p.from_socket.writer_closed() && !self.socket_closed {
            return Fate::Keep;
        }
        match p.from_socket.linger_deadline() {
            None if p.from_socket.writer_closed() => Fate::Remove,
            Some(Some(d)) if d <= Instant::now() => Fate::Remove,
            linger => {
                if let Some(Some(d)) = linger {
                    self.timers.set(Timer::Linger, d);
                    r.schedule(d, token);
                }
                // Not while an RDMA upgrade is being agreed: the peer's answer would reach a
                // closed stream, whose reset can discard what the peer has not read yet.
                let drained = p.from_socket.is_finished()
                    && self.engine.as_ref().is_none_or(|e| {
                        let settling = self.phase == Phase::Up && e.upgrade_settling();
                        !e.has_output() && !settling
                    });
                if drained {
                    Fate::Remove
                } else {
                    Fate::Keep
                }
            }
        }
    }
}

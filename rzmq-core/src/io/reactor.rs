//! The reactor of an I/O thread: a mio poll over its listeners and sessions (a session's
//! alternative path registered beside its stream), its command mailbox and its timers; the
//! loop that dispatches readiness, commands and due timers to them.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::shared::{IoCmd, IoShared};
use super::timers::Timers;
use crate::monitor;
use crate::pipe::Notify;
use crate::session::udp::UdpSession;
use crate::session::{Fate, Io, Session, ALT_BIT};
use crate::transport::listener::Listener;

const MAILBOX: Token = Token(usize::MAX);

/// What a token names on the thread.
pub(super) enum Object {
    /// A listener.
    Listener(Box<Listener>),
    /// A session.
    Session(Box<Session>),
    /// A UDP endpoint.
    Udp(Box<UdpSession>),
}

/// An I/O thread's state, owned by its loop.
pub(super) struct Reactor {
    pub(super) shared: Arc<IoShared>,
    pub(super) poll: Poll,
    pub(super) objects: HashMap<u64, Object>,
    timers: Timers,
    shutting_down: bool,
    /// Sessions that stopped reading on their budget, not on WouldBlock: read them again.
    read_again: Vec<u64>,
}

impl Io for Reactor {
    #[inline]
    fn registry(&self) -> &mio::Registry {
        self.poll.registry()
    }
    #[inline]
    fn schedule(&mut self, at: Instant, token: u64) {
        self.timers.schedule(at, token);
    }
    #[inline]
    fn work(&self) -> &Arc<crate::sync::AtomicUsize> {
        &self.shared.work
    }
    #[inline]
    fn streams(&self) -> &Arc<AtomicUsize> {
        &self.shared.streams
    }
    #[inline]
    fn notify(&self) -> Arc<dyn Notify> {
        self.shared.clone() as Arc<dyn Notify>
    }
}

impl Reactor {
    /// The state of a new thread.
    pub(super) fn new(shared: Arc<IoShared>, poll: Poll) -> Reactor {
        Reactor {
            shared,
            poll,
            objects: HashMap::new(),
            timers: Timers::default(),
            shutting_down: false,
            read_again: Vec::new(),
        }
    }

    /// The thread's loop: commands, due timers, readiness, reads left over; until shut down
    /// with nothing left.
    pub(super) fn run(mut self) {
        let fd = self.shared.mailbox.fd();
        if self
            .poll
            .registry()
            .register(&mut mio::unix::SourceFd(&fd), MAILBOX, Interest::READABLE)
            .is_err()
        {
            return;
        }
        let mut events = Events::with_capacity(256);
        loop {
            // Commands first, so a wake-up is consumed before we sleep again.
            self.shared.mailbox.begin_drain();
            while let Some(cmd) = self.shared.mailbox.try_recv() {
                self.command(cmd);
                self.shared.work.fetch_sub(1, Ordering::SeqCst);
            }
            let now = Instant::now();
            self.run_timers(now);
            // After the timers: a linger deadline may just have ended the last session, and
            // with no timer left the poll below would sleep for ever (zmq_ctx_term hung).
            if self.shutting_down && self.objects.is_empty() {
                return;
            }
            let mut timeout = self.timers.next().map(|t| t.saturating_duration_since(now));
            let mut pending_reads = std::mem::take(&mut self.read_again);
            pending_reads.sort_unstable();
            pending_reads.dedup();
            if !pending_reads.is_empty() {
                timeout = Some(Duration::ZERO);
            }
            if self.shared.mailbox.has_pending() {
                timeout = Some(Duration::ZERO);
            }
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
            for ev in events.iter() {
                if ev.token() == MAILBOX {
                    continue;
                }
                let token = ev.token().0 as u64;
                if token & ALT_BIT != 0 {
                    self.with_session(token & !ALT_BIT, |s, r, tok| s.on_alt(r, tok));
                    continue;
                }
                if ev.is_read_closed() || ev.is_error() {
                    if let Some(Object::Session(s)) = self.objects.get_mut(&token) {
                        s.mark_hup();
                    }
                }
                self.ready(
                    token,
                    ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    ev.is_writable(),
                );
            }
            for t in pending_reads {
                if t & ALT_BIT != 0 {
                    self.with_session(t & !ALT_BIT, |s, r, tok| s.on_alt(r, tok));
                } else {
                    self.ready(t, true, false);
                }
            }
        }
    }

    fn run_timers(&mut self, now: Instant) {
        while let Some(token) = self.timers.pop_due(now) {
            self.with_session(token, |s, r, tok| s.on_timer(r, tok, now));
        }
    }

    fn command(&mut self, cmd: IoCmd) {
        match cmd {
            IoCmd::AddListener(mut l, token) => {
                let src = l.kind.source();
                if self
                    .poll
                    .registry()
                    .register(src, Token(token as usize), Interest::READABLE)
                    .is_ok()
                {
                    self.objects.insert(token, Object::Listener(l));
                }
            }
            IoCmd::AddSession(s, token) => {
                self.objects.insert(token, Object::Session(s));
                self.with_session(token, |s, r, tok| s.start(r, tok));
            }
            IoCmd::AddUdp(u, token) => {
                self.run_udp(token, u, |u, r, tok| (u.start(r, tok), false));
            }
            IoCmd::Close(token, emit) => self.close_object(token, emit),
            IoCmd::SocketClosed(token) => self.with_either(
                token,
                |s, r, tok| s.socket_gone(r, tok),
                |u, _, _| (u.socket_gone(), false),
            ),
            IoCmd::Pipe(token) => self.with_either(
                token,
                |s, r, tok| s.on_pipe(r, tok),
                |u, _, _| (u.on_pipe(), false),
            ),
            IoCmd::Shutdown => {
                self.shutting_down = true;
                let tokens: Vec<u64> = self.objects.keys().copied().collect();
                for t in tokens {
                    match self.objects.get(&t) {
                        Some(Object::Listener(_)) => self.close_object(t, true),
                        Some(Object::Session(_)) => {
                            self.with_session(t, |s, r, tok| s.socket_gone(r, tok));
                        }
                        Some(Object::Udp(_)) => self.with_either(
                            t,
                            |_, _, _| Fate::Keep,
                            |u, _, _| (u.socket_gone(), false),
                        ),
                        None => {}
                    }
                }
            }
        }
    }

    fn close_object(&mut self, token: u64, emit: bool) {
        match self.objects.remove(&token) {
            Some(Object::Listener(mut l)) => {
                let fd = l.kind.close(self.poll.registry());
                if emit {
                    l.setup
                        .monitor
                        .event(monitor::EVENT_CLOSED, fd as u32, &l.endpoint);
                }
                // Its connections end as their pipes say: at once when the socket dropped them
                // (unbind), or after delivering what is queued within LINGER (socket close).
                for s in std::mem::take(&mut l.sessions) {
                    self.with_session(s, |s, r, tok| s.socket_gone(r, tok));
                }
            }
            Some(Object::Session(s)) => self.remove_session(s, token),
            Some(Object::Udp(mut u)) => u.teardown(self),
            None => {}
        }
    }

    /// Runs `f` on the UDP endpoint `u` of `token` (out of the table), then puts it back or
    /// tears it down as `f` says (the flag: read it again after the other connections).
    fn run_udp(
        &mut self,
        token: u64,
        mut u: Box<UdpSession>,
        f: impl FnOnce(&mut UdpSession, &mut Reactor, u64) -> (Fate, bool),
    ) {
        match f(&mut u, self, token) {
            (Fate::Keep, again) => {
                if again {
                    self.read_again.push(token);
                }
                self.objects.insert(token, Object::Udp(u));
            }
            (Fate::Remove, _) => u.teardown(self),
        }
    }

    /// Runs `f` on the session `token` (taken out of the table meanwhile), then keeps or
    /// removes it as `f` says. Any other object of that token stays as it is.
    pub(super) fn with_session(
        &mut self,
        token: u64,
        f: impl FnOnce(&mut Session, &mut Reactor, u64) -> Fate,
    ) {
        self.with_either(token, f, |_, _, _| (Fate::Keep, false));
    }

    /// Runs `fs` on the session `token`, or `fu` on the UDP endpoint `token` (taken out of the
    /// table meanwhile: one lookup whichever it is), then keeps or removes it as they say.
    fn with_either(
        &mut self,
        token: u64,
        fs: impl FnOnce(&mut Session, &mut Reactor, u64) -> Fate,
        fu: impl FnOnce(&mut UdpSession, &mut Reactor, u64) -> (Fate, bool),
    ) {
        let mut s = match self.objects.remove(&token) {
            Some(Object::Session(s)) => s,
            Some(Object::Udp(u)) => return self.run_udp(token, u, fu),
            Some(other) => {
                self.objects.insert(token, other);
                return;
            }
            None => return,
        };
        match fs(&mut s, self, token) {
            Fate::Keep => {
                let (read, alt) = s.take_again();
                if read {
                    self.read_again.push(token);
                }
                if alt {
                    self.read_again.push(token | ALT_BIT);
                }
                self.objects.insert(token, Object::Session(s));
            }
            Fate::Remove => self.remove_session(s, token),
        }
    }

    /// Tears a session down and forgets it in its listener.
    fn remove_session(&mut self, mut s: Box<Session>, token: u64) {
        s.teardown(self);
        if let Some(l) = s.listener() {
            if let Some(Object::Listener(li)) = self.objects.get_mut(&l) {
                li.sessions.retain(|&t| t != token);
            }
        }
    }

    fn ready(&mut self, token: u64, readable: bool, writable: bool) {
        match self.objects.get(&token) {
            Some(Object::Listener(_)) => self.accept(token),
            Some(Object::Session(_)) | Some(Object::Udp(_)) => self.with_either(
                token,
                |s, r, tok| s.on_ready(r, tok, readable, writable),
                |u, _, _| u.on_ready(readable, writable),
            ),
            None => {}
        }
    }
}

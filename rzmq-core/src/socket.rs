//! Sockets: options, the socket type's pattern and its pipes behind the public API.
//!
//! A [`Socket`] belongs to one thread at a time (it is `Send`, not `Sync`), as in libzmq. Its
//! pattern routes messages over pipes; connections live on I/O threads and reach the socket only
//! through pipes and the socket's mailbox (commands: a pipe became readable or writable, a pipe
//! closed, a new pipe to attach, the context is terminating). The mailbox's eventfd is `ZMQ_FD`.
//!
//! Blocking calls wait on that mailbox, never on a lock, so `Context::term` can wake them with
//! ETERM.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::endpoint::Endpoint;
use crate::error::{Error, Result};
use crate::monitor::{self, EventSink, Monitor};
use crate::msg::{Metadata, Msg};
use crate::options::{OptValue, Options};
use crate::pattern::{self, Pattern, PipeEntry, PipeId, PipeTable};
use crate::pipe::{self, Notify, Target};
use crate::signal::Mailbox;
use crate::sockopt::{RecvFlags, SendFlags};
use crate::transport;

/// Don't block (`ZMQ_DONTWAIT`).
pub const DONTWAIT: i32 = 1;
/// More frames follow (`ZMQ_SNDMORE`).
pub const SNDMORE: i32 = 2;
/// `ZMQ_EVENTS` bit: a message can be received.
pub const POLLIN: i16 = 1;
/// `ZMQ_EVENTS` bit: a message can be sent.
pub const POLLOUT: i16 = 2;

/// The socket types of libzmq, with its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum SocketType {
    /// Exclusive pair.
    Pair = 0,
    /// Publisher.
    Pub = 1,
    /// Subscriber.
    Sub = 2,
    /// Request (client of REP/ROUTER).
    Req = 3,
    /// Reply (server of REQ/DEALER).
    Rep = 4,
    /// Asynchronous request.
    Dealer = 5,
    /// Addressed routing.
    Router = 6,
    /// Pipeline sink.
    Pull = 7,
    /// Pipeline source.
    Push = 8,
    /// Publisher that sees subscriptions.
    XPub = 9,
    /// Subscriber that sends subscriptions as messages.
    XSub = 10,
    /// Raw TCP streams.
    Stream = 11,
}

impl SocketType {
    /// The type for a libzmq socket-type number.
    pub fn from_raw(t: i32) -> Result<SocketType> {
        use SocketType::*;
        Ok(match t {
            0 => Pair,
            1 => Pub,
            2 => Sub,
            3 => Req,
            4 => Rep,
            5 => Dealer,
            6 => Router,
            7 => Pull,
            8 => Push,
            9 => XPub,
            10 => XSub,
            11 => Stream,
            _ => return Err(Error::Inval),
        })
    }

    /// The ZMTP name ("PAIR", "DEALER", ...).
    pub fn name(self) -> &'static str {
        use SocketType::*;
        match self {
            Pair => "PAIR",
            Pub => "PUB",
            Sub => "SUB",
            Req => "REQ",
            Rep => "REP",
            Dealer => "DEALER",
            Router => "ROUTER",
            Pull => "PULL",
            Push => "PUSH",
            XPub => "XPUB",
            XSub => "XSUB",
            Stream => "STREAM",
        }
    }
}

/// Commands delivered to a socket's mailbox.
pub(crate) enum Cmd {
    ActivateRead(u64),
    ActivateWrite(u64),
    PipeClosed(u64),
    PeerReady(u64),
    /// A new pipe from a connection or an inproc peer.
    Attach(Box<Attach>),
    /// The context is terminating.
    Stop,
}

/// A pipe handed to a socket by a connection or an inproc peer.
pub(crate) struct Attach {
    pub entry: PipeEntry,
    pub id: PipeId,
}

/// The part of a socket other threads may hold: its mailbox.
pub(crate) struct SocketShared {
    pub mailbox: Mailbox<Cmd>,
    pub id: u64,
    next_pipe: std::sync::atomic::AtomicU64,
    /// Set when the socket closes: nobody reads the mailbox any more.
    closed: std::sync::atomic::AtomicBool,
}

impl SocketShared {
    /// Hands a new pipe to the socket; if the socket has closed meanwhile, the pipe is dropped
    /// (closed) instead, so the connection behind it ends rather than waiting forever.
    pub fn attach(&self, a: Attach) {
        use std::sync::atomic::Ordering;
        self.mailbox.send(Cmd::Attach(Box::new(a)));
        if self.closed.load(Ordering::SeqCst) {
            self.drain_dead();
        }
    }

    /// Drops every queued command of a closed socket (pipes in Attach commands close).
    fn drain_dead(&self) {
        while let Some(cmd) = self.mailbox.try_recv() {
            drop(cmd);
        }
    }

    /// Reserves a pipe id (used by other threads preparing an Attach).
    pub fn reserve_pipe_id(&self) -> PipeId {
        PipeId(
            self.next_pipe
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1,
        )
    }
}

impl Notify for SocketShared {
    fn activate_read(&self, token: u64) {
        self.mailbox.send(Cmd::ActivateRead(token));
    }
    fn activate_write(&self, token: u64) {
        self.mailbox.send(Cmd::ActivateWrite(token));
    }
    fn pipe_closed(&self, token: u64) {
        self.mailbox.send(Cmd::PipeClosed(token));
    }
    fn peer_ready(&self, token: u64) {
        self.mailbox.send(Cmd::PeerReady(token));
    }
}

/// What a bound or connected endpoint holds so it can be undone.
enum EndpointHandle {
    /// A listener or connecting session on an I/O thread.
    Io(transport::IoHandle),
    /// An inproc binding (name registered in the context).
    InprocBind,
    /// An inproc connection: its pipe.
    InprocConnect,
}

struct EndpointRec {
    /// The address as given by the user.
    given: String,
    /// The resolved address (LAST_ENDPOINT form).
    resolved: String,
    bind: bool,
    handle: EndpointHandle,
}

/// How many blocking receives a socket whose pipe has no connection input to ask for (see
/// [`Socket::want_input`]) makes before it looks again.
const WANT_PROBE_EVERY: u32 = 1024;

/// Frames from this size on (the pool's large bodies) make a socket stop asking for its
/// connection's input (see [`Socket::want_input`]): on a stream of large frames the I/O
/// thread's read-ahead overlaps the kernel's copy of the next frame with the application's
/// work on this one, which a socket reading the stream itself would do one after the other.
const LARGE_RX: usize = crate::pool::POOL_MIN;

/// Small frames in a row after which a socket that received a large frame asks for its input
/// again: messages that mix a small header with a large body keep the I/O thread reading ahead.
const RX_SMALL_RUN: u32 = 64;

/// Whether a socket's recent frames were large (see [`LARGE_RX`] and [`RX_SMALL_RUN`]).
#[derive(Debug, Default)]
struct RxSize {
    /// A frame received lately was large: the socket does not ask for its input.
    large: bool,
    /// Small frames received in a row since the last large one.
    small_run: u32,
}

impl RxSize {
    /// Notes a frame of `len` bytes; true when the frames just turned large.
    #[inline]
    fn seen(&mut self, len: usize) -> bool {
        let large = len >= LARGE_RX;
        (large || self.large) && self.seen_after_large(large)
    }

    #[inline(never)]
    fn seen_after_large(&mut self, large: bool) -> bool {
        if large {
            self.small_run = 0;
            return !std::mem::replace(&mut self.large, true);
        }
        self.small_run += 1;
        if self.small_run >= RX_SMALL_RUN {
            self.large = false;
        }
        false
    }
}

/// A ZeroMQ socket.
pub struct Socket {
    shared: Arc<SocketShared>,
    ctx: Context,
    ty: SocketType,
    pattern: Box<dyn Pattern>,
    pipes: PipeTable,
    options: Options,
    rcvmore: bool,
    last_endpoint: String,
    endpoints: Vec<EndpointRec>,
    monitor: Monitor,
    closed: bool,
    /// Busy-polling before a direct receive sleeps (see [`crate::direct::spin_budget`]).
    spin: crate::direct::Spin,
    /// The pipe whose connection input this socket last took for a direct receive: its reader
    /// may hold that input between receives of a stream, read on when the application has
    /// emptied its inbox (see [`crate::direct::DirectRx::hold`]).
    held_rx: Option<PipeId>,
    /// The pipe whose input this socket last asked for in a blocking receive (see
    /// [`crate::direct::DirectRx::want`]); given up with held input.
    wanted_rx: Option<PipeId>,
    /// Blocking receives left before [`Socket::want_input`] looks again.
    want_probe: u32,
    /// Whether its recent frames were large: then it does not ask for its input.
    rx_size: RxSize,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("type", &self.ty)
            .field("pipes", &self.pipes.len())
            .finish()
    }
}

fn deadline_for(timeout_ms: i32) -> Option<Instant> {
    if timeout_ms < 0 {
        None
    } else {
        Some(Instant::now() + Duration::from_millis(timeout_ms as u64))
    }
}

impl Socket {
    pub(crate) fn new(ctx: Context, ty: SocketType, id: u64) -> Result<Socket> {
        let shared = Arc::new(SocketShared {
            mailbox: Mailbox::new()?,
            id,
            next_pipe: std::sync::atomic::AtomicU64::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        let options = Options::with_ctx(ty as i32, &ctx.inner().ctx_options());
        Ok(Socket {
            shared,
            ctx,
            ty,
            pattern: pattern::new_pattern(ty as i32),
            pipes: PipeTable::new(),
            options,
            rcvmore: false,
            last_endpoint: String::new(),
            endpoints: Vec::new(),
            monitor: Monitor::new(),
            closed: false,
            spin: crate::direct::Spin::default(),
            held_rx: None,
            wanted_rx: None,
            want_probe: 0,
            rx_size: RxSize::default(),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<SocketShared> {
        &self.shared
    }

    /// The socket's type.
    pub fn socket_type(&self) -> SocketType {
        self.ty
    }

    /// The socket's options (read-only view).
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The socket's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    fn check_alive(&self) -> Result<()> {
        if self.closed {
            return Err(Error::NotSock);
        }
        if self.ctx.inner().is_terminating() {
            return Err(Error::Term);
        }
        Ok(())
    }

    // ----- commands -------------------------------------------------------------------------

    /// Processes every queued command without blocking.
    fn process_commands(&mut self) -> Result<()> {
        self.shared.mailbox.begin_drain();
        while let Some(cmd) = self.shared.mailbox.try_recv() {
            self.handle(cmd);
        }
        if self.ctx.inner().is_terminating() {
            return Err(Error::Term);
        }
        Ok(())
    }

    #[inline]
    fn process_if_pending(&mut self) -> Result<()> {
        if self.shared.mailbox.has_pending() {
            self.process_commands()?;
        }
        Ok(())
    }

    fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::ActivateRead(t) => {
                let id = PipeId(t);
                if self.pipes.get(id).is_some() {
                    self.pattern.read_activated(id, &mut self.pipes);
                    self.reap(id);
                }
            }
            Cmd::ActivateWrite(t) => {
                let id = PipeId(t);
                if self.pipes.get(id).is_some() {
                    self.pattern.write_activated(id, &mut self.pipes);
                }
            }
            Cmd::PipeClosed(t) => self.reap(PipeId(t)),
            Cmd::PeerReady(t) => {
                let id = PipeId(t);
                if let Some(e) = self.pipes.get_mut(id) {
                    e.peer = e.reader.peer();
                    self.pattern.peer_ready(id, &mut self.pipes);
                }
            }
            Cmd::Attach(a) => {
                let Attach { entry, id } = *a;
                self.attach_pipe(id, entry);
            }
            Cmd::Stop => {}
        }
        self.drain_kills();
    }

    /// Detaches a pipe whose peer is gone once everything it delivered has been read.
    fn reap(&mut self, id: PipeId) {
        let Some(e) = self.pipes.get(id) else { return };
        let gone = e.writer.reader_closed() || e.reader.is_finished();
        if gone && !e.reader.has_msg() {
            self.terminate_pipe(id);
        }
    }

    fn terminate_pipe(&mut self, id: PipeId) {
        if self.wanted_rx == Some(id) {
            // A later pipe's input is asked for at the next blocking receive.
            self.wanted_rx = None;
        }
        if self.pipes.get(id).is_some() {
            self.pattern.terminated(id, &mut self.pipes);
            self.pipes.remove(id);
        }
    }

    #[inline]
    fn drain_kills(&mut self) {
        if !self.pipes.has_kills() {
            return;
        }
        for id in self.pipes.take_kills() {
            self.terminate_pipe(id);
        }
    }

    /// Attaches a pipe end: registers this socket as its notification target.
    pub(crate) fn attach_pipe(&mut self, id: PipeId, mut entry: PipeEntry) {
        let target = Target {
            notify: self.shared.clone() as Arc<dyn Notify>,
            token: id.0,
        };
        entry.reader.set_target(target.clone());
        entry.writer.set_target(target);
        if entry.peer.is_none() {
            entry.peer = entry.reader.peer();
        }
        let has_peer = entry.peer.is_some();
        self.pipes.insert(id, entry);
        self.pattern.attach(id, &mut self.pipes);
        if self.ty == SocketType::Stream {
            // libzmq's STREAM records each peer's generated id as its own ROUTING_ID option.
            if let Some(e) = self.pipes.get(id) {
                self.options.routing_id = e.routing_id.clone();
            }
        }
        if has_peer {
            self.pattern.peer_ready(id, &mut self.pipes);
        }
        self.drain_kills();
    }

    // ----- send and receive -------------------------------------------------------------------

    /// Sends one frame; on failure the frame is handed back with the error (as `zmq_msg_send`
    /// leaves the message with the caller).
    pub fn send_msg(&mut self, mut msg: Msg, flags: i32) -> std::result::Result<(), (Msg, Error)> {
        if let Err(e) = self.check_alive() {
            return Err((msg, e));
        }
        if let Err(e) = self.process_if_pending() {
            return Err((msg, e));
        }
        msg.set_more(flags & SNDMORE != 0);
        let mut m = match self.pattern.send(msg, &mut self.pipes) {
            Ok(()) => {
                self.drain_kills();
                return Ok(());
            }
            Err((m, Error::Again)) => m,
            Err((m, e)) => {
                self.drain_kills();
                return Err((m, e));
            }
        };
        if flags & DONTWAIT != 0 || self.options.sndtimeo == 0 {
            return Err((m, Error::Again));
        }
        let deadline = deadline_for(self.options.sndtimeo);
        loop {
            match self.wait(deadline) {
                Ok(()) => {}
                Err(e) => return Err((m, e)),
            }
            match self.pattern.send(m, &mut self.pipes) {
                Ok(()) => {
                    self.drain_kills();
                    return Ok(());
                }
                Err((back, Error::Again)) => m = back,
                Err((back, e)) => return Err((back, e)),
            }
        }
    }

    /// Sends one frame built from `data`; SNDMORE and DONTWAIT in `flags`.
    pub fn send(&mut self, data: impl Into<Msg>, flags: impl Into<SendFlags>) -> Result<()> {
        self.send_msg(data.into(), flags.into().bits())
            .map_err(|(_, e)| e)
    }

    /// Sends a whole multipart message.
    pub fn send_multipart<I, T>(&mut self, parts: I, flags: impl Into<SendFlags>) -> Result<()>
    where
        I: IntoIterator<Item = T>,
        T: Into<Msg>,
    {
        let flags = flags.into().bits();
        let mut it = parts.into_iter().peekable();
        while let Some(p) = it.next() {
            let more = if it.peek().is_some() { SNDMORE } else { 0 };
            self.send(p, flags | more)?;
        }
        Ok(())
    }

    /// Waits for commands until `deadline`, then processes them. The caller has processed the
    /// mailbox since its last attempt, so anything arriving now signals the mailbox fd.
    fn wait(&mut self, deadline: Option<Instant>) -> Result<()> {
        if !self.shared.mailbox.has_pending() && !self.shared.mailbox.wait_until(deadline)? {
            return Err(Error::Again);
        }
        self.process_commands()
    }

    /// Receives one frame.
    pub fn recv_msg(&mut self, flags: i32) -> Result<Msg> {
        self.check_alive()?;
        self.process_if_pending()?;
        if self.wanted_rx.is_none()
            && !self.rx_size.large
            && flags & DONTWAIT == 0
            && self.options.rcvtimeo != 0
        {
            if self.want_probe == 0 {
                self.want_input();
            } else {
                self.want_probe -= 1;
            }
        }
        match self.pattern.recv(&mut self.pipes) {
            Ok(m) => return Ok(self.received(m)),
            Err(Error::Again) => {}
            Err(e) => return Err(e),
        }
        // Nothing was readable: process commands (activations, new pipes) and retry before waiting.
        self.process_commands()?;
        match self.pattern.recv(&mut self.pipes) {
            Ok(m) => return Ok(self.received(m)),
            Err(Error::Again) => {}
            Err(e) => return Err(e),
        }
        self.reap_finished();
        if flags & DONTWAIT != 0 || self.options.rcvtimeo == 0 {
            self.let_go_held();
            return Err(Error::Again);
        }
        let deadline = deadline_for(self.options.rcvtimeo);
        loop {
            self.wait_recv(deadline)?;
            match self.pattern.recv(&mut self.pipes) {
                Ok(m) => return Ok(self.received(m)),
                Err(Error::Again) => self.reap_finished(),
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits for input until `deadline`: as [`Socket::wait`], or, when the socket's only pipe
    /// comes from a connection whose input is offered (see [`crate::direct::DirectRx`]), on the
    /// connection's stream as well, reading and decoding what arrives on this thread.
    fn wait_recv(&mut self, deadline: Option<Instant>) -> Result<()> {
        match self.direct_recv(deadline) {
            Some(r) => r,
            None => self.wait(deadline),
        }
    }

    /// A blocking receive on a socket with one pipe: tells the pipe's connection input that
    /// this socket receives with blocking calls (see [`crate::direct::DirectRx::want`]), so an
    /// I/O thread that got ahead of it hands the stream over.
    /// A socket whose pipe has no connection input to ask for (inproc, or not yet) looks
    /// again only every [`WANT_PROBE_EVERY`] blocking receives.
    #[cold]
    fn want_input(&mut self) {
        let rx = self.pipes.only().and_then(|id| {
            let rx = self.pipes.get_mut(id)?.reader.direct_rx()?.clone();
            Some((id, rx))
        });
        match rx {
            Some((id, rx)) => {
                rx.want();
                self.wanted_rx = Some(id);
            }
            None => self.want_probe = WANT_PROBE_EVERY,
        }
    }

    /// A direct receive; `None` when input is not the socket's to take now.
    fn direct_recv(&mut self, deadline: Option<Instant>) -> Option<Result<()>> {
        use crate::direct::Received;
        if self.shared.mailbox.has_pending() {
            return None;
        }
        let id = self.pipes.only()?;
        let reader = &mut self.pipes.get_mut(id)?.reader;
        let rx = reader.direct_rx()?.clone();
        // This socket receives with blocking calls: input offered to it may wait for it
        // (unless its frames are large).
        if !self.rx_size.large {
            rx.want();
            self.wanted_rx = Some(id);
        }
        if !rx.claim() {
            return None;
        }
        // Held input (if any) is this receive's now; the pipe's reader may hold it again.
        reader.set_input_held(false);
        self.held_rx = Some(id);
        if reader.has_msg() {
            // Delivered before the offer: the pipe's activation is on its way.
            rx.release();
            return None;
        }
        // Poll without sleeping for up to the budget first (only while that pays, see
        // crate::direct::Spin), then sleep.
        let budget = crate::direct::spin_budget();
        let mut spin_until =
            (!budget.is_zero() && self.spin.active()).then(|| Instant::now() + budget);
        let mut slept_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if let Some(until) = spin_until {
                if now >= until || deadline.is_some_and(|d| now >= d) {
                    spin_until = None;
                    self.spin.miss();
                }
            }
            let ms = if spin_until.is_some() {
                0
            } else {
                if slept_at.is_none() {
                    slept_at = Some(now);
                }
                crate::signal::poll_ms(deadline.map(|d| d.saturating_duration_since(now)))
            };
            let mut fds = [
                libc::pollfd {
                    fd: self.shared.mailbox.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: rx.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds in a live array.
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                rx.release();
                return Some(Err(e.into()));
            }
            if rc == 0 {
                if spin_until.is_some() {
                    std::hint::spin_loop();
                    continue;
                }
                rx.release();
                return Some(Err(Error::Again));
            }
            // Something is ready: polling paid, or a sleep it could have covered ended.
            match slept_at {
                None => self.spin.hit(),
                Some(at) => self.spin.slept(at.elapsed(), budget),
            }
            if fds[1].revents != 0 {
                // Whole messages go straight to the pipe reader's inbox (the pipe stays while
                // this thread holds the socket).
                let Some(e) = self.pipes.get_mut(id) else {
                    rx.release();
                    return Some(Ok(()));
                };
                let inbox = e.reader.direct_inbox();
                let before = inbox.len();
                let step = rx.receive(inbox);
                let got = inbox.len() > before;
                if step == Received::Messages {
                    if inbox.len() > 1 {
                        // A stream: its next turn is read here too (see the pipe reader's read_on).
                        rx.hold(true);
                        e.reader.set_input_held(true);
                    } else {
                        rx.release();
                    }
                }
                if step != Received::Nothing {
                    if got {
                        self.pattern.read_activated(id, &mut self.pipes);
                    }
                    return Some(Ok(()));
                }
            }
            if fds[0].revents != 0 {
                rx.release();
                return Some(self.process_commands());
            }
        }
    }

    fn reap_finished(&mut self) {
        let ids = self.pipes.ids();
        for id in ids {
            self.reap(id);
        }
        self.drain_kills();
    }

    #[inline]
    fn received(&mut self, m: Msg) -> Msg {
        self.rcvmore = m.more();
        if self.rx_size.seen(m.len()) {
            // Large frames now: the I/O thread reads ahead again (see LARGE_RX).
            self.unwant_input();
        }
        m
    }

    /// Whether this socket has told its connection's input that it receives with blocking
    /// calls (see [`crate::direct::DirectRx::want`]); for tests and diagnostics.
    #[doc(hidden)]
    pub fn asks_for_input(&self) -> bool {
        self.wanted_rx.is_some()
    }

    /// Takes back what [`Socket::want_input`] told the pipe's connection input.
    fn unwant_input(&mut self) {
        if let Some(id) = self.wanted_rx.take() {
            if let Some(rx) = self
                .pipes
                .get_mut(id)
                .and_then(|e| e.reader.direct_rx().cloned())
            {
                rx.unwant();
            }
        }
    }

    /// Gives held input back (see [`crate::direct::DirectRx::release`]) before the socket
    /// reports readiness or returns `EAGAIN`: only a blocking receive reads the stream itself.
    fn let_go_held(&mut self) {
        if let Some(id) = self.held_rx {
            match self.pipes.get_mut(id) {
                Some(e) => e.reader.let_go_input(),
                None => self.held_rx = None,
            }
        }
        self.unwant_input();
    }

    /// Receives one frame as bytes.
    pub fn recv_bytes(&mut self, flags: impl Into<RecvFlags>) -> Result<Vec<u8>> {
        self.recv_msg(flags.into().bits())
            .map(|m| m.data().to_vec())
    }

    /// Receives all frames of one message.
    pub fn recv_multipart(&mut self, flags: impl Into<RecvFlags>) -> Result<Vec<Msg>> {
        let mut parts = vec![self.recv_msg(flags.into().bits())?];
        while self.rcvmore {
            parts.push(self.recv_msg(0)?);
        }
        Ok(parts)
    }

    /// True when the last frame received has more frames following (`ZMQ_RCVMORE`).
    pub fn rcvmore(&self) -> bool {
        self.rcvmore
    }

    /// `ZMQ_EVENTS`: POLLIN and/or POLLOUT, after processing pending commands.
    pub fn events(&mut self) -> Result<i16> {
        self.check_alive()?;
        self.let_go_held();
        self.process_commands()?;
        let mut ev = 0;
        if self.pattern.has_in(&mut self.pipes) {
            ev |= POLLIN;
        }
        if self.pattern.has_out(&mut self.pipes) {
            ev |= POLLOUT;
        }
        self.drain_kills();
        Ok(ev)
    }

    /// `ZMQ_FD`: readable when the socket's state may have changed (check [`Socket::events`]).
    pub fn fd(&self) -> RawFd {
        self.shared.mailbox.fd()
    }

    // ----- endpoints ------------------------------------------------------------------------

    /// Binds to an endpoint (`tcp://`, `ipc://`, `inproc://`).
    pub fn bind(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        match Endpoint::parse(addr)? {
            Endpoint::Inproc(name) => {
                let inner = self.ctx.inner().clone();
                inner.inproc_bind(self, &name)?;
                self.last_endpoint = addr.to_string();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved: addr.to_string(),
                    bind: true,
                    handle: EndpointHandle::InprocBind,
                });
                Ok(())
            }
            ep => {
                let setup = self.conn_setup();
                let (handle, resolved) = match transport::bind(self.ctx.inner(), &ep, setup) {
                    Ok(r) => r,
                    Err(e) => {
                        self.monitor
                            .event(monitor::EVENT_BIND_FAILED, e.errno() as u32, addr);
                        return Err(e);
                    }
                };
                self.last_endpoint = resolved.clone();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved,
                    bind: true,
                    handle: EndpointHandle::Io(handle),
                });
                Ok(())
            }
        }
    }

    /// Connects to an endpoint; the connection is made (and remade) in the background.
    pub fn connect(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        let ep = Endpoint::parse(addr)?;
        let connect_rid = self.options.take_connect_routing_id();
        if let Some(rid) = &connect_rid {
            if self.ty == SocketType::Router || self.ty == SocketType::Stream {
                let used = self
                    .pipes
                    .ids()
                    .into_iter()
                    .any(|id| self.pipes.get(id).is_some_and(|e| &e.routing_id == rid));
                if used {
                    return Err(Error::Inval);
                }
            }
        }
        match ep {
            Endpoint::Inproc(name) => {
                let inner = self.ctx.inner().clone();
                inner.inproc_connect(self, &name, addr, connect_rid)?;
                self.last_endpoint = addr.to_string();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved: addr.to_string(),
                    bind: false,
                    handle: EndpointHandle::InprocConnect,
                });
                Ok(())
            }
            ep => {
                // Without IMMEDIATE the pipe exists from now on, so messages queue before the
                // connection is up and survive reconnects (libzmq's behaviour).
                let pipe = if !self.options.immediate {
                    let (entry, peer_side) = self.new_pipe_pair();
                    let id = self.shared.reserve_pipe_id();
                    let mut entry = entry;
                    entry.endpoint = Some(addr.to_string());
                    entry.connect_routing_id = connect_rid.clone();
                    if let Some(rid) = &connect_rid {
                        entry.routing_id = rid.clone();
                    }
                    self.attach_pipe(id, entry);
                    Some(peer_side)
                } else {
                    None
                };
                let mut setup = self.conn_setup();
                setup.connect_routing_id = connect_rid;
                let handle = transport::connect(self.ctx.inner(), &ep, addr, setup, pipe)?;
                self.last_endpoint = addr.to_string();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved: addr.to_string(),
                    bind: false,
                    handle: EndpointHandle::Io(handle),
                });
                Ok(())
            }
        }
    }

    /// Creates both ends of a peer pipe: the socket's entry and the connection's ends.
    pub(crate) fn new_pipe_pair(&self) -> (PipeEntry, transport::PeerPipe) {
        let (out_hwm, in_hwm) = (
            self.options.sndhwm.max(0) as u64,
            self.options.rcvhwm.max(0) as u64,
        );
        let conflate = self.options.effective_conflate();
        let (to_peer_w, to_peer_r) = pipe::pipe_with(out_hwm, conflate);
        let (from_peer_w, from_peer_r) = pipe::pipe_with(in_hwm, conflate);
        let entry = PipeEntry::new(from_peer_r, to_peer_w);
        (
            entry,
            transport::PeerPipe {
                to_socket: from_peer_w,
                from_socket: to_peer_r,
            },
        )
    }

    /// Everything a connection needs to know about this socket, snapshotted now.
    fn conn_setup(&self) -> transport::ConnSetup {
        transport::ConnSetup {
            socket: self.shared.clone(),
            socket_type: self.ty,
            options: Arc::new(self.options.clone()),
            monitor: self.monitor.clone(),
            connect_routing_id: None,
            ctx: Arc::downgrade(self.ctx.inner()),
        }
    }

    /// A bound endpoint is found by its resolved address only (as libzmq: unbinding
    /// "tcp://*:*" or "ipc://*" is ENOENT, the LAST_ENDPOINT form works); a connection by the
    /// address given to connect.
    fn find_endpoint(&self, addr: &str, bind: bool) -> Option<usize> {
        self.endpoints.iter().position(|e| {
            e.bind == bind
                && if bind {
                    e.resolved == addr
                } else {
                    e.given == addr
                }
        })
    }

    /// Stops listening on a bound endpoint and closes its connections.
    pub fn unbind(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        let Some(i) = self.find_endpoint(addr, true) else {
            return Err(Error::NoEnt);
        };
        let rec = self.endpoints.remove(i);
        self.undo_endpoint(rec);
        Ok(())
    }

    /// Closes a connection made with [`Socket::connect`].
    pub fn disconnect(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        let Some(i) = self.find_endpoint(addr, false) else {
            return Err(Error::NoEnt);
        };
        let rec = self.endpoints.remove(i);
        self.undo_endpoint(rec);
        Ok(())
    }

    fn undo_endpoint(&mut self, rec: EndpointRec) {
        match rec.handle {
            EndpointHandle::Io(h) => h.close(),
            EndpointHandle::InprocBind => {
                self.ctx.inner().inproc_unbind(&rec.given, self.shared.id)
            }
            EndpointHandle::InprocConnect => {}
        }
        let ids: Vec<PipeId> = self
            .pipes
            .ids()
            .into_iter()
            .filter(|id| {
                self.pipes
                    .get(*id)
                    .and_then(|e| e.endpoint.as_deref())
                    .is_some_and(|ep| ep == rec.given || ep == rec.resolved)
            })
            .collect();
        for id in ids {
            self.terminate_pipe(id);
        }
    }

    // ----- options --------------------------------------------------------------------------

    /// Sets an option from its raw C representation (`zmq_setsockopt`).
    pub fn set_option_raw(&mut self, opt: i32, value: &[u8]) -> Result<()> {
        self.set_option_nullable(opt, Some(value))
    }

    /// Sets an option where `None` is C's `(NULL, 0)`, which libzmq treats differently from an
    /// empty value for some options (it clears SOCKS_PROXY, BINDTODEVICE, filters, PLAIN names).
    pub fn set_option_nullable(&mut self, opt: i32, value: Option<&[u8]>) -> Result<()> {
        if self.closed {
            return Err(Error::NotSock);
        }
        if self.ctx.inner().is_terminating() {
            return Err(Error::Term);
        }
        self.options.set_raw(opt, value)?;
        self.pattern
            .set_option(opt, value.unwrap_or(&[]), &mut self.pipes)?;
        if opt == crate::options::SNDHWM || opt == crate::options::RCVHWM {
            self.update_pipe_hwms();
        }
        self.drain_kills();
        Ok(())
    }

    /// Applies changed HWMs to the pipes that exist (libzmq re-sizes live pipes too), waking
    /// the pattern for pipes that may have room now.
    fn update_pipe_hwms(&mut self) {
        if self.options.effective_conflate() {
            return;
        }
        let (snd, rcv) = (self.options.sndhwm, self.options.rcvhwm);
        for id in self.pipes.ids() {
            if let Some(e) = self.pipes.get_mut(id) {
                let (peer_rcv, peer_snd) = match e.hwm_boost {
                    Some((r, s)) => (Some(r), Some(s)),
                    None => (None, None),
                };
                e.writer.set_hwm(pattern::combined_hwm(snd, peer_rcv));
                e.reader.set_hwm(pattern::combined_hwm(rcv, peer_snd));
            }
            self.pattern.write_activated(id, &mut self.pipes);
        }
    }

    /// Sets a typed option: `socket.set(SndHwm(0))?` (see [`crate::sockopt`]).
    pub fn set<O: crate::sockopt::SettableOption>(&mut self, option: O) -> Result<()> {
        self.set_option_raw(O::ID, &option.to_raw())
    }

    /// Reads a typed option: `let RcvHwm(n) = socket.get()?;` (see [`crate::sockopt`]).
    pub fn get<O: crate::sockopt::SocketOption>(&mut self) -> Result<O> {
        O::from_value(self.get_option(O::ID)?)
    }

    /// Sets an integer option.
    pub fn set_option_i32(&mut self, opt: i32, value: i32) -> Result<()> {
        self.set_option_raw(opt, &value.to_ne_bytes())
    }

    /// Reads an option (`zmq_getsockopt`), including the ones computed from the socket's state.
    pub fn get_option(&mut self, opt: i32) -> Result<OptValue> {
        use crate::options as o;
        if self.closed {
            return Err(Error::NotSock);
        }
        if self.ctx.inner().is_terminating() {
            return Err(Error::Term);
        }
        match opt {
            o::RCVMORE => Ok(OptValue::IntRelaxed(i32::from(self.rcvmore))),
            o::FD => Ok(OptValue::IntRelaxed(self.fd())),
            o::EVENTS => Ok(OptValue::IntRelaxed(i32::from(self.events()?))),
            o::TYPE => Ok(OptValue::Int(self.ty as i32)),
            o::LAST_ENDPOINT => Ok(OptValue::Str(self.last_endpoint.clone().into_bytes())),
            o::THREAD_SAFE => Ok(OptValue::IntRelaxed(0)),
            _ => self.options.get(opt),
        }
    }

    /// Subscribes to a topic prefix (SUB/XSUB).
    pub fn subscribe(&mut self, topic: &[u8]) -> Result<()> {
        self.set_option_raw(crate::options::SUBSCRIBE, topic)
    }

    /// Removes a subscription (SUB/XSUB).
    pub fn unsubscribe(&mut self, topic: &[u8]) -> Result<()> {
        self.set_option_raw(crate::options::UNSUBSCRIBE, topic)
    }

    /// The endpoint last bound or connected, resolved (`ZMQ_LAST_ENDPOINT`).
    pub fn last_endpoint(&self) -> &str {
        &self.last_endpoint
    }

    // ----- monitoring -----------------------------------------------------------------------

    /// Publishes this socket's events on a new inproc PAIR bound at `addr` (`zmq_socket_monitor`);
    /// `None` stops monitoring.
    pub fn monitor(&mut self, addr: Option<&str>, events: u16) -> Result<()> {
        self.check_alive()?;
        let Some(addr) = addr else {
            self.monitor.stop();
            return Ok(());
        };
        if !addr.starts_with("inproc://") {
            return Err(Error::ProtoNoSupport);
        }
        let mut pair = self.ctx.socket(SocketType::Pair)?;
        pair.set_option_i32(crate::options::LINGER, 0)?;
        pair.bind(addr)?;
        self.monitor.start(events, Box::new(MonitorSocket(pair)));
        Ok(())
    }

    // ----- closing ----------------------------------------------------------------------------

    /// Closes the socket. Queued outgoing messages are still delivered for up to LINGER.
    pub fn close(mut self) {
        self.close_inner();
    }

    fn close_inner(&mut self) {
        if self.closed {
            return;
        }
        let _ = self.process_commands_ignoring_term();
        let linger = self.options.linger;
        let deadline = if linger < 0 {
            None
        } else {
            Some(Instant::now() + Duration::from_millis(linger as u64))
        };
        for rec in std::mem::take(&mut self.endpoints) {
            match rec.handle {
                EndpointHandle::Io(h) if rec.bind => {
                    self.monitor
                        .event(monitor::EVENT_CLOSED, h.fd() as u32, &rec.resolved);
                    h.close_quiet()
                }
                EndpointHandle::Io(h) => h.socket_closed(),
                EndpointHandle::InprocBind => {
                    self.ctx.inner().inproc_unbind(&rec.given, self.shared.id)
                }
                EndpointHandle::InprocConnect => {}
            }
        }
        for id in self.pipes.ids() {
            if let Some(e) = self.pipes.remove(id) {
                let PipeEntry { reader, writer, .. } = e;
                drop(reader);
                if linger == 0 {
                    writer.close_with_linger(Some(Instant::now()));
                } else {
                    writer.close_with_linger(deadline);
                }
            }
        }
        self.monitor.stop();
        self.closed = true;
        // Pipes handed to us from now on (a handshake finishing concurrently) are closed by
        // their sender; those already queued are closed here.
        self.shared
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.drain_dead();
        self.ctx.inner().socket_closed(self.shared.id);
    }

    fn process_commands_ignoring_term(&mut self) -> Result<()> {
        self.shared.mailbox.begin_drain();
        while let Some(cmd) = self.shared.mailbox.try_recv() {
            self.handle(cmd);
        }
        Ok(())
    }

    /// Metadata of a peer pipe (for tests and diagnostics).
    pub fn peer_metadata(&self) -> Vec<Arc<Metadata>> {
        self.pipes
            .ids()
            .into_iter()
            .filter_map(|id| self.pipes.get(id).and_then(|e| e.peer.clone()))
            .collect()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.close_inner();
    }
}

/// Delivers monitor events into the monitor's PAIR socket without blocking.
struct MonitorSocket(Socket);

impl EventSink for MonitorSocket {
    fn deliver(&mut self, frame: Msg) -> bool {
        let more = frame.more();
        self.0
            .send_msg(frame, DONTWAIT | if more { SNDMORE } else { 0 })
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_turn_large_at_once_and_small_after_a_run() {
        let mut rx = RxSize::default();
        for _ in 0..1000 {
            assert!(!rx.seen(64));
        }
        assert!(!rx.large);
        assert!(rx.seen(LARGE_RX), "the first large frame turns it");
        assert!(!rx.seen(LARGE_RX) && rx.large, "turned once");
        // A small header before each large body keeps it large.
        for _ in 0..200 {
            assert!(!rx.seen(100));
            assert!(!rx.seen(1 << 20));
            assert!(rx.large);
        }
        for i in 1..RX_SMALL_RUN {
            assert!(!rx.seen(LARGE_RX - 1));
            assert!(rx.large, "still large after {i} small frames");
        }
        assert!(!rx.seen(0));
        assert!(!rx.large, "small after a run of {RX_SMALL_RUN}");
        assert!(rx.seen(LARGE_RX), "and large again");
    }
}

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

use crate::command::{Attach, Cmd, SocketShared};
use crate::error::{Error, Result};
use crate::io::ctx::CtxShared;
use crate::monitor::{self, EventSink, Monitor};
use crate::msg::{Metadata, Msg};
use crate::options::{OptValue, Options};
use crate::pattern::{self, Pattern, PipeEntry, PipeId, PipeTable};
use crate::pipe::{Notify, Target};
use crate::sockopt::SendFlags;

mod endpoints;
mod recv;
mod safe;

use endpoints::{EndpointHandle, EndpointRec};
pub use recv::InputFd;
use recv::RxSize;
pub use safe::{Direction, SocketGuard, ThreadSafeSocket, Waiters, WakeFd};

pub use crate::options::{DONTWAIT, SNDMORE};

/// `ZMQ_EVENTS` bit: a message can be received.
pub const POLLIN: i16 = 1;
/// `ZMQ_EVENTS` bit: a message can be sent.
pub const POLLOUT: i16 = 2;

/// The socket types of libzmq, with its numbers (one enum, defined with the ZMTP vocabulary).
pub use crate::zmtp::SocketType;

/// A ZeroMQ socket.
pub struct Socket {
    shared: Arc<SocketShared>,
    ctx: Arc<CtxShared>,
    ty: SocketType,
    pattern: Box<dyn Pattern>,
    pipes: PipeTable,
    options: Options,
    rcvmore: bool,
    last_endpoint: String,
    endpoints: Vec<EndpointRec>,
    monitor: Monitor,
    closed: bool,
    /// Busy-polling before a direct receive sleeps (its budget: `ZMQ_RZMQ_BUSY_POLL_US`, `sockopt::BusyPoll`).
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
    /// Opens a socket of type `ty` in the context `ctx` (ETERM once it terminates, EMFILE
    /// past `ZMQ_MAX_SOCKETS`).
    pub(crate) fn open(ctx: &Arc<CtxShared>, ty: SocketType) -> Result<Socket> {
        let (id, max) = ctx.new_socket_id()?;
        let sock = Socket::new(ctx.clone(), ty, id)?;
        ctx.add_socket(&sock.shared, max)?;
        Ok(sock)
    }

    fn new(ctx: Arc<CtxShared>, ty: SocketType, id: u64) -> Result<Socket> {
        let shared = Arc::new(SocketShared::new(id, ty.is_thread_safe())?);
        let options = Options::with_ctx(ty, &ctx.ctx_options());
        Ok(Socket {
            shared,
            ctx,
            ty,
            pattern: pattern::new_pattern(ty)?,
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

    /// What the socket shares with its context.
    pub(crate) fn ctx_shared(&self) -> &Arc<CtxShared> {
        &self.ctx
    }

    /// The socket's type.
    pub fn socket_type(&self) -> SocketType {
        self.ty
    }

    /// The socket's options (read-only view).
    pub fn options(&self) -> &Options {
        &self.options
    }

    fn check_alive(&self) -> Result<()> {
        if self.closed {
            return Err(Error::NotSock);
        }
        if self.ctx.is_terminating() {
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
        if self.ctx.is_terminating() {
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

    /// True when the last frame received has more frames following (`ZMQ_RCVMORE`).
    pub fn rcvmore(&self) -> bool {
        self.rcvmore
    }

    /// `ZMQ_EVENTS`: POLLIN and/or POLLOUT, after processing pending commands.
    pub fn events(&mut self) -> Result<i16> {
        self.check_alive()?;
        self.let_go_held();
        self.events_now()
    }

    /// Processes commands and reports POLLIN and POLLOUT.
    fn events_now(&mut self) -> Result<i16> {
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
    /// -1 for a thread-safe socket, which has no such fd (its `ZMQ_FD` option is `EINVAL`, as
    /// in libzmq 4.3.5): pollers register a [`WakeFd`] with its [`Socket::waiters`] instead.
    pub fn fd(&self) -> RawFd {
        self.shared.mailbox.wake().fd().unwrap_or(-1)
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
        if self.ctx.is_terminating() {
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
        if self.ctx.is_terminating() {
            return Err(Error::Term);
        }
        match opt {
            o::RCVMORE => Ok(OptValue::IntRelaxed(i32::from(self.rcvmore))),
            o::FD => match self.shared.mailbox.wake().fd() {
                Some(fd) => Ok(OptValue::IntRelaxed(fd)),
                None => Err(Error::Inval),
            },
            o::EVENTS => Ok(OptValue::IntRelaxed(i32::from(self.events()?))),
            o::TYPE => Ok(OptValue::Int(self.ty as i32)),
            o::LAST_ENDPOINT => Ok(OptValue::Str(self.last_endpoint.clone().into_bytes())),
            // libzmq's answer for the type (the DRAFT types but DGRAM): a ThreadSafeSocket (the
            // C ABI's handle of such a socket) locks it for each call.
            o::THREAD_SAFE => Ok(OptValue::IntRelaxed(i32::from(self.ty.is_thread_safe()))),
            o::TOPICS_COUNT => match self.pattern.topics_count() {
                Some(n) => Ok(OptValue::IntRelaxed(i32::try_from(n).unwrap_or(i32::MAX))),
                None => Err(Error::Inval),
            },
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

    /// Joins a group (`zmq_join`): DISH only, [`Error::NotSup`] for other types; a name longer
    /// than [`crate::msg::GROUP_MAX_LENGTH`] bytes is [`Error::Inval`].
    pub fn join(&mut self, group: impl AsRef<[u8]>) -> Result<()> {
        self.group_call(group.as_ref(), true)
    }

    /// Leaves a group (`zmq_leave`): DISH only, [`Error::NotSup`] for other types.
    pub fn leave(&mut self, group: impl AsRef<[u8]>) -> Result<()> {
        self.group_call(group.as_ref(), false)
    }

    fn group_call(&mut self, group: &[u8], join: bool) -> Result<()> {
        self.check_alive()?;
        if group.len() > crate::msg::GROUP_MAX_LENGTH {
            return Err(Error::Inval);
        }
        self.process_if_pending()?;
        let r = if join {
            self.pattern.join(group, &mut self.pipes)
        } else {
            self.pattern.leave(group, &mut self.pipes)
        };
        self.drain_kills();
        r
    }

    /// The endpoint last bound or connected, resolved (`ZMQ_LAST_ENDPOINT`).
    pub fn last_endpoint(&self) -> &str {
        &self.last_endpoint
    }

    // ----- monitoring -----------------------------------------------------------------------

    /// Publishes this socket's events on a new inproc PAIR bound at `addr` (`zmq_socket_monitor`);
    /// `None` stops monitoring.
    pub fn monitor(&mut self, addr: Option<&str>, events: u16) -> Result<()> {
        self.monitor_versioned(addr, u64::from(events), 1, SocketType::Pair)
    }

    /// `zmq_socket_monitor_versioned`: the events in `events` in wire form `version` (1, or 2:
    /// 64-bit events, several values, local and remote endpoints; see [`crate::monitor`]) on a
    /// new inproc socket of type `ty` (PAIR, PUB or PUSH) bound at `addr`; `None` stops
    /// monitoring. Version 1 takes only the first 16 event bits (`EINVAL`), as libzmq. Other
    /// versions are `EINVAL` too: libzmq 4.3.5 accepts them and then sends no event at all.
    pub fn monitor_versioned(
        &mut self,
        addr: Option<&str>,
        events: u64,
        version: u8,
        ty: SocketType,
    ) -> Result<()> {
        self.check_alive()?;
        if !(1..=2).contains(&version) || (version == 1 && events >> 16 != 0) {
            return Err(Error::Inval);
        }
        let Some(addr) = addr else {
            self.monitor.stop();
            return Ok(());
        };
        if !addr.starts_with("inproc://") {
            return Err(Error::ProtoNoSupport);
        }
        self.monitor.stop();
        if !matches!(ty, SocketType::Pair | SocketType::Pub | SocketType::Push) {
            return Err(Error::Inval);
        }
        let mut sink = Socket::open(&self.ctx, ty)?;
        sink.set_option_i32(crate::options::LINGER, 0)?;
        sink.bind(addr)?;
        self.monitor
            .start_versioned(events, version, Box::new(MonitorSocket(sink)));
        Ok(())
    }

    /// `zmq_socket_monitor_pipes_stats`: one `EVENT_PIPES_STATS` event per pipe (values: the
    /// messages queued towards the peer as its writer knows them, which learns of reads at
    /// multiples of the low-water mark as libzmq's, and the frames queued from it), in the
    /// order the pipes came. `EINVAL` unless a version 2 monitor asks for those events,
    /// `EAGAIN` without pipes.
    pub fn monitor_pipes_stats(&mut self) -> Result<()> {
        self.check_alive()?;
        if !self.monitor.wants_v2(monitor::EVENT_PIPES_STATS) {
            return Err(Error::Inval);
        }
        self.process_commands()?;
        let mut ids = self.pipes.ids();
        if ids.is_empty() {
            return Err(Error::Again);
        }
        ids.sort_unstable_by_key(|id| id.0);
        for id in ids {
            let Some(e) = self.pipes.get(id) else {
                continue;
            };
            let endpoint = e.endpoint.as_deref().unwrap_or("");
            // A pipe its connection made knows both ends; one a connect made before its
            // connection has only the address it connects to (libzmq's pair for it, too).
            let (local, remote) = match &e.uris {
                Some((local, remote)) => (local.as_str(), remote.as_str()),
                None => ("", endpoint),
            };
            let values = [e.writer.queued(), e.reader.queued_frames()];
            self.monitor.event_v2(
                monitor::EVENT_PIPES_STATS,
                &values,
                monitor::EventAddrs {
                    local,
                    remote,
                    v1: endpoint,
                },
            );
        }
        Ok(())
    }

    /// `zmq_socket_get_peer_state`: ROUTER's `POLLOUT` when the peer with routing id `rid`
    /// takes a message now (`EHOSTUNREACH` for an unknown peer); `ENOTSUP` for other types.
    pub fn peer_state(&mut self, rid: &[u8]) -> Result<i16> {
        self.check_alive()?;
        self.process_if_pending()?;
        let r = self.pattern.peer_state(rid, &mut self.pipes);
        self.drain_kills();
        r
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
                EndpointHandle::InprocBind => self.ctx.inproc().unbind(&rec.given, self.shared.id),
                EndpointHandle::InprocConnect => {}
            }
        }
        for id in self.pipes.ids() {
            if let Some(mut e) = self.pipes.remove(id) {
                e.send_disconnect_msg();
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
        self.shared.close();
        self.ctx.socket_closed(self.shared.id);
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

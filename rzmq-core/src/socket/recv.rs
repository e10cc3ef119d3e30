//! Receiving: blocking receives with timeouts, direct receives of a connection's input (see
//! [`crate::direct::DirectRx`]), and when a socket asks for that input.

use std::time::Instant;

use std::os::fd::RawFd;
use std::sync::Arc;

use super::{deadline_for, Socket, DONTWAIT};
use crate::direct::{DirectRx, Received};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::pattern::PipeId;
use crate::sockopt::RecvFlags;

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
pub(super) struct RxSize {
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

/// A connection stream read by its socket itself, as [`Socket::input_fd`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputFd {
    /// The stream's fd (the connection's I/O thread owns and closes it).
    pub fd: RawFd,
    /// Unique in the process to this connection input: a new value means a new stream, even
    /// under a reused fd number.
    pub id: u64,
}

impl Socket {
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

    /// Claims the only pipe's connection input for a direct receive (asking for it first unless
    /// frames are large): the pipe and its input, or `None` when it is not the socket's to
    /// take now (not offered, commands pending, or messages delivered before the offer, whose
    /// activation is on its way).
    fn direct_claim(&mut self) -> Option<(PipeId, Arc<DirectRx>)> {
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
        Some((id, rx))
    }

    /// Reads claimed input once, without waiting: `Some` when messages went to the pipe
    /// reader's inbox or input went back to the I/O thread (input released or held as the
    /// read left it), `None` when nothing complete came (input still claimed).
    fn direct_read(&mut self, id: PipeId, rx: &DirectRx) -> Option<Result<()>> {
        // Whole messages go straight to the pipe reader's inbox (the pipe stays while this
        // thread holds the socket).
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
        if step == Received::Nothing {
            return None;
        }
        if got {
            self.pattern.read_activated(id, &mut self.pipes);
        }
        Some(Ok(()))
    }

    /// A direct receive; `None` when input is not the socket's to take now.
    fn direct_recv(&mut self, deadline: Option<Instant>) -> Option<Result<()>> {
        // A thread-safe socket has no mailbox fd to poll beside the stream (and its blocking
        // calls wait with its lock released, never here).
        let mailbox_fd = self.shared.mailbox.wake().fd()?;
        let (id, rx) = self.direct_claim()?;
        // Poll without sleeping for up to the budget first (only while that pays, see
        // crate::direct::Spin), then sleep.
        let budget = self.options.rzmq.busy_poll();
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
                    fd: mailbox_fd,
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
                if let Some(r) = self.direct_read(id, &rx) {
                    return Some(r);
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
    pub(super) fn let_go_held(&mut self) {
        if let Some(id) = self.held_rx {
            match self.pipes.get_mut(id) {
                Some(e) => e.reader.let_go_input(),
                None => self.held_rx = None,
            }
        }
        self.unwant_input();
    }

    /// Receives one frame without waiting, for a caller that waits itself (an async runtime's
    /// reactor) on the socket's fd and on [`Socket::input_fd`]: EAGAIN when no frame can be
    /// had now, as `recv_msg(DONTWAIT)`. Unlike that call, it keeps direct receives
    /// (docs/ARCHITECTURE.md): the socket asks for its connection's input, reads the
    /// connection itself when the input is its to read, and keeps the input when it returns
    /// EAGAIN, so the next message costs the caller one wake-up and the I/O thread none. Input
    /// kept by a caller that stops receiving goes back to the I/O thread by itself (after
    /// `RX_HOLD_STALE`, 2 ms), or at [`Socket::events`] or a `DONTWAIT` receive.
    pub fn try_recv_msg(&mut self) -> Result<Msg> {
        // recv_msg's opening, written out again: a helper shared by both cost recv_msg 15% of
        // its inproc 64 B throughput (compare.py before/after, 5 rounds, 2026-12-07).
        self.check_alive()?;
        self.process_if_pending()?;
        if self.wanted_rx.is_none() && !self.rx_size.large {
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
        self.process_commands()?;
        match self.pattern.recv(&mut self.pipes) {
            Ok(m) => return Ok(self.received(m)),
            Err(Error::Again) => {}
            Err(e) => return Err(e),
        }
        self.reap_finished();
        if let Some((id, rx)) = self.direct_claim() {
            match self.direct_read(id, &rx) {
                Some(Ok(())) => match self.pattern.recv(&mut self.pipes) {
                    Ok(m) => return Ok(self.received(m)),
                    Err(Error::Again) => self.reap_finished(),
                    Err(e) => return Err(e),
                },
                Some(Err(e)) => return Err(e),
                // Nothing yet: the input stays this socket's between calls, with any frame cut
                // by this read (the I/O thread takes it back from a caller that does not come).
                None => {
                    rx.hold(false);
                    if let Some(e) = self.pipes.get_mut(id) {
                        e.reader.set_input_held(true);
                    }
                }
            }
        }
        Err(Error::Again)
    }

    /// The connection stream a socket reads itself (see [`Socket::try_recv_msg`]) while its
    /// input is its to read: a caller that got EAGAIN waits for this fd to turn readable as
    /// well as for the socket's own fd, then calls `try_recv_msg` again. `None` while the
    /// I/O thread reads the connection (the socket's fd tells of what it delivers).
    ///
    /// The fd belongs to the connection's I/O thread, which may close it at any time: watch
    /// it only through something that forgets a closed fd by itself (an epoll set of the
    /// caller's own), never register it with a shared reactor, and register it again when
    /// [`InputFd::id`] changes.
    pub fn input_fd(&mut self) -> Option<InputFd> {
        let id = self.pipes.only()?;
        let rx = self.pipes.get_mut(id)?.reader.direct_rx()?;
        rx.readers_turn().then(|| InputFd {
            fd: rx.fd(),
            id: rx.id(),
        })
    }

    /// [`Socket::events`] for a caller of [`Socket::try_recv_msg`]: processes commands and
    /// reports POLLIN and POLLOUT, but keeps the connection input the socket took (`events`
    /// gives it back to the I/O thread, as a socket polled by `zmq_poll` must).
    pub fn events_keeping_input(&mut self) -> Result<i16> {
        self.check_alive()?;
        self.events_now()
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

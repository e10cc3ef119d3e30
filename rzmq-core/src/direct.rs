//! Direct sends and receives: the application thread writes a message to an idle connection,
//! or reads one from it, itself.
//!
//! A message normally goes socket thread -> pipe -> I/O thread -> kernel: two thread hand-offs,
//! which dominate the one-way latency of a request/reply exchange. When input arrives on a
//! connection whose output is idle (its I/O thread has flushed everything, found the pipe empty,
//! and its last turn moved at most one message), the I/O thread *grants* the connection's output
//! to the writer before delivering that input: the next message the application sends on that
//! pipe is framed and written to the stream's fd by the application thread, and the grant is
//! used up. The I/O thread takes output back (*revokes*) before it writes to the connection, and
//! grants again only on the next input under the same conditions; a stream of sends with nothing
//! coming back therefore goes through the pipe and the I/O thread's batching as before. Only
//! plain ZMTP connections qualify: no CURVE, no alternative (RDMA) path, no subscription
//! forwarding, no raw STREAM framing.
//!
//! Order with the thread's other sends: a direct send goes only while its I/O thread has no
//! unfinished work (no command queued or running, no pipe being drained onto a connection). A
//! message this thread sent just before on another socket of the same I/O thread, which went
//! through that thread, is therefore on the wire first, as it would be in libzmq, where both go
//! through the one I/O thread in order. (pyzmq's monitored-queue test depends on it: a SUB's
//! subscription, queued by its first call after connecting, must reach the PUB before the message
//! the same thread sends next on another socket.) Connections on different I/O threads are not
//! ordered, in libzmq or here.
//!
//! On by default; `RZMQ_DIRECT=0` or [`set_enabled`] turns it off.
//!
//! **Direct receives** ([`DirectRx`]) are the other half. When the I/O thread has delivered
//! everything it read from a connection and the connection is idle (plain ZMTP, no CURVE, no
//! heartbeat timers, no alternative path, not a SUB/XSUB, not conflating, no multipart message
//! half delivered), it *offers* the input.
//! A socket blocked in a receive whose only pipe is that connection's, with nothing queued,
//! *claims* it and waits on the stream's fd together with its own mailbox; when bytes arrive it
//! reads and decodes them on its own thread (a decoder of its own, with the connection's
//! limits) and returns the first message without any hand-off: one thread wake-up per
//! message, as a blocking socket in plain TCP has. Whole data messages are kept in the pipe's
//! reader (they follow everything queued before the claim and precede everything queued
//! after); anything else (a command such as PING, a protocol error, the end of the stream) goes
//! back to the I/O thread together with the decoder, so a frame cut between reads continues
//! exactly where it stopped.
//!
//! A receive that read more than one message (a stream, not a reply) *holds* the input when it
//! returns: the socket reads the next turn (at most 64 KiB) itself as soon as the application
//! has taken what the last one brought, so a stream costs no hand-off per batch and no I/O
//! thread work at all. The I/O thread leaves readiness it sees meanwhile to the reader, and
//! takes input back only when the reader has not come back within [`RX_HOLD_STALE`] (an
//! application that stopped receiving), so the end of the stream or an error is still seen.
//! After a direct receive, output idle since its last direct send is granted again, so the reply
//! goes out directly too. Only a connection that is alone on its I/O thread is claimed: with
//! others, input that arrived on them first could still be on its way through that thread, and
//! libzmq never lets the later one overtake. `RZMQ_DIRECT_RX=0` turns direct receives off alone.
//!
//! A socket that claimed the input polls it (and its mailbox) without sleeping for up to
//! [`spin_budget`] before it sleeps, while polling pays ([`Spin`]): on a virtual machine a
//! wake-up costs more than the exchange itself.
//!
//! Receive states: `IO`, `OFFERED`, `READING` (the reader holds input), `HELD` (between the
//! receives of a stream), `HELD_MISSED`, `MISSED` (as `READING`,
//! and the I/O thread saw a readiness event it left alone; the reader looks at the stream once
//! more when it lets go), `DEAD`. A connection ending while the reader holds its input wakes the
//! reader through its mailbox and waits for it to let go before the fd is closed.
//!
//! States: `IO` (the I/O thread owns output), `GRANTED` (the writer may take it), `WRITING` (the
//! writer is in its write), `DEAD` (the connection ended; never granted again). A write the
//! kernel took only part of leaves the rest for the I/O thread ([`DirectTx::take_leftover`]),
//! which writes it before anything else.

use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::msg::Msg;

const IO: u8 = 0;
const GRANTED: u8 = 1;
const WRITING: u8 = 2;
const DEAD: u8 = 3;
/// A direct send wrote a whole message and nothing has been queued since: output is idle and
/// the writer's side may grant it again on the next input it reads itself ([`DirectRx`]).
const SPENT: u8 = 4;

/// Bodies up to this size that a partial direct write cut are copied into the leftover; larger
/// ones stay by reference (the I/O thread writes the rest from the message itself).
const LEFTOVER_COPY_MAX: usize = crate::zmtp::codec::LARGE_BODY;
/// Most frames of one message written directly.
const DIRECT_MAX_FRAMES: usize = 16;

/// 0: not decided yet, 1: on, 2: off.
static ENABLED: AtomicU8 = AtomicU8::new(0);

/// An on/off switch read once from the environment variable `name` (`0`: off, else on),
/// unless set before; `cell` holds 0 (not decided yet), 1 (on) or 2 (off).
fn switch(cell: &AtomicU8, name: &str) -> bool {
    match cell.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = std::env::var(name).map_or(true, |v| v != "0");
            let _ = cell.compare_exchange(
                0,
                if on { 1 } else { 2 },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            cell.load(Ordering::Relaxed) == 1
        }
    }
}

/// Whether direct sends are on (first call reads `RZMQ_DIRECT`; `0` turns them off).
pub fn enabled() -> bool {
    switch(&ENABLED, "RZMQ_DIRECT")
}

/// 0: not decided yet, 1: on, 2: off.
static RX_ENABLED: AtomicU8 = AtomicU8::new(0);

/// Whether direct receives are on, besides [`enabled`]: by default; `RZMQ_DIRECT_RX=0` turns
/// them off alone (first call reads it).
pub fn rx_enabled() -> bool {
    switch(&RX_ENABLED, "RZMQ_DIRECT_RX") && enabled()
}

/// Turns direct sends on or off for connections that go idle from now on.
pub fn set_enabled(on: bool) {
    ENABLED.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// Default busy-poll budget of a direct receive, in microseconds (see [`spin_budget`]).
pub const DEFAULT_SPIN_US: u64 = 30;
/// The budget in microseconds; `u64::MAX`: not decided yet.
static SPIN_US: AtomicU64 = AtomicU64::new(u64::MAX);

/// How long a blocking direct receive polls the stream before it sleeps (zero: never).
///
/// Waking a sleeping thread costs tens of microseconds on a virtual machine (the idle CPU must
/// be woken too), several times the kernel's own loopback latency: a request/reply exchange is
/// mostly wake-ups. A receive that polls a little before it sleeps catches a reply that follows
/// quickly without them. The budget is spent only by a socket blocked in a receive on a
/// connection it reads itself, and only while polling pays: see [`Spin`]. The first call reads
/// `RZMQ_SPIN_US` (microseconds, `0`: off; default [`DEFAULT_SPIN_US`]) unless
/// [`set_spin_us`] was called.
pub fn spin_budget() -> std::time::Duration {
    let mut us = SPIN_US.load(Ordering::Relaxed);
    if us == u64::MAX {
        let from_env = std::env::var("RZMQ_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_SPIN_US, |v| v.min(1_000_000));
        let _ = SPIN_US.compare_exchange(u64::MAX, from_env, Ordering::Relaxed, Ordering::Relaxed);
        us = SPIN_US.load(Ordering::Relaxed);
    }
    std::time::Duration::from_micros(us)
}

/// Sets the busy-poll budget of direct receives, in microseconds (0: off), for this process.
pub fn set_spin_us(us: u64) {
    SPIN_US.store(us.min(1_000_000), Ordering::Relaxed);
}

static SPIN_HITS: AtomicU64 = AtomicU64::new(0);

/// Times in this process a blocking direct receive found input (or a command) while polling,
/// before it slept (for tests and diagnostics).
pub fn spin_stats() -> u64 {
    SPIN_HITS.load(Ordering::Relaxed)
}

/// Polls in a row that found nothing before a socket stops polling.
const SPIN_MISSES: u8 = 4;

/// One socket's adaptive busy-polling: it polls before sleeping while polling finds input, stops
/// after `SPIN_MISSES` (4) polls in a row that found none (sparse traffic: the budget would only
/// burn CPU), and starts again when a receive that slept was answered within the budget (a
/// poll would have caught it).
#[derive(Debug, Clone)]
pub struct Spin {
    credit: u8,
}

impl Default for Spin {
    fn default() -> Spin {
        Spin {
            credit: SPIN_MISSES,
        }
    }
}

impl Spin {
    /// Whether the next blocking receive should poll first.
    pub fn active(&self) -> bool {
        self.credit > 0
    }

    /// Polling found input (or a command).
    pub fn hit(&mut self) {
        SPIN_HITS.fetch_add(1, Ordering::Relaxed);
        self.credit = SPIN_MISSES;
    }

    /// Polling ended (its budget or the receive's deadline ran out) and found nothing.
    pub fn miss(&mut self) {
        self.credit = self.credit.saturating_sub(1);
    }

    /// A receive slept `waited` before input came; `budget` is the polling budget.
    pub fn slept(&mut self, waited: std::time::Duration, budget: std::time::Duration) {
        if waited <= budget {
            self.credit = SPIN_MISSES;
        }
    }
}

static SENT: AtomicU64 = AtomicU64::new(0);
static PARTIAL: AtomicU64 = AtomicU64::new(0);
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static HANDED_BACK: AtomicU64 = AtomicU64::new(0);
static HELD: AtomicU64 = AtomicU64::new(0);
static TAKEN_BACK: AtomicU64 = AtomicU64::new(0);

/// Receives that delivered messages after which the socket held a stream's input, and how
/// many times the I/O thread took held input back from a socket that had stopped receiving
/// (for tests and diagnostics).
pub fn hold_stats() -> (u64, u64) {
    (
        HELD.load(Ordering::Relaxed),
        TAKEN_BACK.load(Ordering::Relaxed),
    )
}

/// Direct receives in this process that delivered messages, and how many times input went
/// back to the I/O thread mid-receive (for tests and diagnostics).
pub fn rx_stats() -> (u64, u64) {
    (
        RECEIVED.load(Ordering::Relaxed),
        HANDED_BACK.load(Ordering::Relaxed),
    )
}

/// Messages sent directly in this process, and how many of them the kernel took only in part
/// (for tests and diagnostics).
pub fn stats() -> (u64, u64) {
    (
        SENT.load(Ordering::Relaxed),
        PARTIAL.load(Ordering::Relaxed),
    )
}

/// What a direct send attempt did.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// Not possible now: queue the message on the pipe as usual.
    NotNow,
    /// The whole message is in the kernel.
    Done,
    /// Part of it is; the rest waits in the leftover, and the I/O thread must be woken.
    HandedOver,
}

/// One piece of what a partial direct write left, already framed.
pub enum Piece {
    /// Header bytes and small bodies, copied.
    Bytes(Vec<u8>),
    /// The rest of a large body from byte `from` on, by reference.
    Body {
        /// The frame whose body continues.
        msg: Msg,
        /// Bytes of the body already written.
        from: usize,
    },
}

/// One connection's output, shared between its I/O thread and the pipe's writer.
pub struct DirectTx {
    fd: RawFd,
    state: AtomicU8,
    leftover: Mutex<Vec<Piece>>,
    /// The I/O thread's unfinished work (commands queued or running, a pipe being drained onto
    /// a connection); a direct send goes only when it is zero.
    io_work: Arc<AtomicUsize>,
    /// Whether a large body goes out in two writes (see `codec::LEAD_SPLIT_MIN`).
    split_large: bool,
}

impl DirectTx {
    /// Output of the stream `fd`, owned by the I/O thread whose unfinished work `io_work`
    /// counts.
    pub fn new(fd: RawFd, io_work: Arc<AtomicUsize>) -> DirectTx {
        DirectTx {
            fd,
            state: AtomicU8::new(IO),
            leftover: Mutex::new(Vec::new()),
            io_work,
            split_large: true,
        }
    }

    /// Whether a large body goes out in two writes (default yes; the connection's choice, see
    /// `Engine::set_split_large`).
    pub fn with_split_large(mut self, split: bool) -> DirectTx {
        self.split_large = split;
        self
    }

    /// The stream's fd.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// I/O thread: takes output back, waiting out a write the writer is in.
    pub fn revoke(&self) {
        loop {
            match self.state.load(Ordering::Acquire) {
                s @ (GRANTED | SPENT) => {
                    if self
                        .state
                        .compare_exchange(s, IO, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return;
                    }
                }
                WRITING => std::hint::spin_loop(),
                _ => return,
            }
        }
    }

    /// I/O thread: lets the writer send the next message itself (not after [`DirectTx::kill`]).
    pub fn grant(&self) {
        for from in [IO, SPENT] {
            if self
                .state
                .compare_exchange(from, GRANTED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// I/O thread, having written everything with nothing queued: leaves output idle for the
    /// writer's side to grant on its next direct receive (see [`DirectTx::regrant`]).
    pub fn park(&self) {
        let _ = self
            .state
            .compare_exchange(IO, SPENT, Ordering::Release, Ordering::Relaxed);
    }

    /// Writer's side, after it read a message from the connection itself: grants output again
    /// if the last direct send left it idle (nothing was queued since). A reply to input the
    /// I/O thread never saw goes out directly, as one to input it delivered would.
    pub fn regrant(&self) {
        let _ = self
            .state
            .compare_exchange(SPENT, GRANTED, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// I/O thread: the connection is ending; output is never granted again.
    pub fn kill(&self) {
        self.revoke();
        self.state.store(DEAD, Ordering::Release);
    }

    /// True while output is granted to the writer.
    pub fn granted(&self) -> bool {
        self.state.load(Ordering::Relaxed) == GRANTED
    }

    /// True while output is granted, being written by the writer, or idle after a whole direct
    /// send (the writer's side may grant it again): the I/O thread need not take it back when
    /// it has nothing to write. In particular it must not wait out a write in progress (a
    /// direct send of a large message keeps the writer in `sendmsg` for hundreds of
    /// microseconds): the writer leaves nothing behind, or wakes the I/O thread for the rest it
    /// handed over, or queues the message on the pipe, which wakes it too.
    pub fn left_to_writer(&self) -> bool {
        matches!(
            self.state.load(Ordering::Relaxed),
            GRANTED | WRITING | SPENT
        )
    }

    /// True while a partial direct write's rest waits for the I/O thread.
    pub fn has_leftover(&self) -> bool {
        !self
            .leftover
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// I/O thread, after [`DirectTx::revoke`]: the rest of a message the kernel took only part
    /// of, in order, to be written before anything else.
    pub fn take_leftover(&self) -> Vec<Piece> {
        std::mem::take(&mut *self.leftover.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Writer: sends the message `frames` + `last` now if output is granted and `idle()` (the
    /// pipe is empty) holds once the grant is taken. An attempt that reaches the kernel uses the
    /// grant up, whatever the kernel took.
    pub fn try_send(&self, frames: &[Msg], last: &Msg, idle: impl FnOnce() -> bool) -> Sent {
        let count = frames.len() + 1;
        if count > DIRECT_MAX_FRAMES || last.is_command() || frames.iter().any(Msg::is_command) {
            return Sent::NotNow;
        }
        if self
            .state
            .compare_exchange(GRANTED, WRITING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return Sent::NotNow;
        }
        if !idle() {
            // Messages wait in the pipe: they go first, through the I/O thread.
            self.state.store(GRANTED, Ordering::Release);
            return Sent::NotNow;
        }
        if self.io_work.load(Ordering::SeqCst) != 0 {
            // The I/O thread has work in hand, maybe this thread's earlier sends on other
            // sockets: they reach the wire first, as they would through the I/O thread.
            self.state.store(GRANTED, Ordering::Release);
            return Sent::NotNow;
        }
        let mut headers = [[0u8; 9]; DIRECT_MAX_FRAMES];
        let mut iov: [libc::iovec; 2 * DIRECT_MAX_FRAMES] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2 * DIRECT_MAX_FRAMES];
        // The frame whose body each iovec is (None: a header).
        let mut body_of: [Option<&Msg>; 2 * DIRECT_MAX_FRAMES] = [None; 2 * DIRECT_MAX_FRAMES];
        let mut n_iov = 0;
        let mut wire = 0usize;
        // Where the first write ends when a large body goes in two (see
        // codec::LEAD_SPLIT_MIN): its lead, with everything before it.
        let mut lead = None;
        for (i, (m, h)) in frames
            .iter()
            .chain(std::iter::once(last))
            .zip(headers.iter_mut())
            .enumerate()
        {
            let more = i + 1 < count;
            let hl = crate::zmtp::codec::frame_header(u8::from(more), m.len(), h);
            iov[n_iov] = libc::iovec {
                iov_base: h.as_mut_ptr() as *mut libc::c_void,
                iov_len: hl,
            };
            n_iov += 1;
            wire += hl;
            if !m.is_empty() {
                iov[n_iov] = libc::iovec {
                    iov_base: m.data().as_ptr() as *mut libc::c_void,
                    iov_len: m.len(),
                };
                body_of[n_iov] = Some(m);
                n_iov += 1;
                if self.split_large
                    && lead.is_none()
                    && m.len() >= crate::zmtp::codec::LEAD_SPLIT_MIN
                {
                    lead = Some(wire + crate::zmtp::codec::LEAD_BYTES);
                }
                wire += m.len();
            }
        }
        let mut written = 0usize;
        for cap in [lead, None] {
            let cap = cap.unwrap_or(wire);
            if written >= cap {
                continue;
            }
            // The iovecs of bytes written..cap, in a copy (the originals serve the leftover).
            let mut part = iov;
            let (mut first, mut k, mut skip, mut left) = (None, 0, written, cap - written);
            for (i, v) in iov[..n_iov].iter().enumerate() {
                if left == 0 {
                    break;
                }
                if skip >= v.iov_len {
                    skip -= v.iov_len;
                    continue;
                }
                let len = (v.iov_len - skip).min(left);
                first.get_or_insert(i);
                part[i] = libc::iovec {
                    // SAFETY: skip < iov_len, so the pointer stays inside the same buffer.
                    iov_base: unsafe { (v.iov_base as *mut u8).add(skip) } as *mut libc::c_void,
                    iov_len: len,
                };
                k = i + 1;
                left -= len;
                skip = 0;
            }
            let first = first.unwrap_or(0);
            // SAFETY: msghdr is plain data; all-zero is a valid empty header.
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_iov = part[first..].as_mut_ptr();
            hdr.msg_iovlen = (k - first) as _;
            let r = loop {
                // SAFETY: the iovecs point into `headers` and the messages' bytes, all alive
                // and unchanged for the call; the fd is the connection's stream, which the I/O
                // thread does not close while the state is WRITING (it revokes first).
                let r = unsafe {
                    libc::sendmsg(self.fd, &hdr, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
                };
                if r >= 0 {
                    break Some(r as usize);
                }
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                    break None;
                }
            };
            match r {
                Some(n) => {
                    written += n;
                    if written < cap {
                        break;
                    }
                }
                None if written == 0 => {
                    // Full, or broken: the pipe and the I/O thread handle it as any message.
                    self.state.store(IO, Ordering::Release);
                    return Sent::NotNow;
                }
                // The lead went: the rest is the I/O thread's, as after a partial write.
                None => break,
            }
        }
        if written == wire {
            self.state.store(SPENT, Ordering::Release);
            SENT.fetch_add(1, Ordering::Relaxed);
            return Sent::Done;
        }
        if written == 0 {
            self.state.store(IO, Ordering::Release);
            return Sent::NotNow;
        }
        // The kernel took part of it: the rest, in order, for the I/O thread; large bodies by
        // reference, so a message of any size costs no copy in the library.
        let mut rest = Vec::new();
        let mut bytes_piece = Vec::new();
        let mut skip = written;
        for (v, body) in iov[..n_iov].iter().zip(body_of.iter()) {
            if skip >= v.iov_len {
                skip -= v.iov_len;
                continue;
            }
            match body {
                Some(m) if m.len() > LEFTOVER_COPY_MAX => {
                    if !bytes_piece.is_empty() {
                        rest.push(Piece::Bytes(std::mem::take(&mut bytes_piece)));
                    }
                    rest.push(Piece::Body {
                        msg: (*m).clone(),
                        from: skip,
                    });
                }
                _ => {
                    // SAFETY: as for the sendmsg call above.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
                    bytes_piece.extend_from_slice(&bytes[skip..]);
                }
            }
            skip = 0;
        }
        if !bytes_piece.is_empty() {
            rest.push(Piece::Bytes(bytes_piece));
        }
        *self.leftover.lock().unwrap_or_else(|e| e.into_inner()) = rest;
        self.state.store(IO, Ordering::Release);
        SENT.fetch_add(1, Ordering::Relaxed);
        PARTIAL.fetch_add(1, Ordering::Relaxed);
        Sent::HandedOver
    }
}

// ----- Direct receives ---------------------------------------------------------------------

/// The I/O thread reads the connection.
const RX_IO: u8 = 0;
/// The I/O thread left the connection idle (everything read was decoded and delivered): the
/// reader may take its input.
const RX_OFFERED: u8 = 1;
/// The reader, blocked in a receive, waits on the stream and reads it itself.
const RX_READING: u8 = 2;
/// As `RX_READING`, and the I/O thread saw a readiness event it left alone.
const RX_MISSED: u8 = 3;
/// The connection ended.
const RX_DEAD: u8 = 4;
/// A stream: the reader returned from its receive with messages it read still in its inbox,
/// and reads on itself when they are gone ([`DirectRx::hold`]).
const RX_HELD: u8 = 5;
/// As `RX_HELD`, and the I/O thread saw a readiness event it left alone.
const RX_HELD_MISSED: u8 = 6;

/// How long input stays held, with readiness waiting, by a reader that does not come back to
/// read it (an application that stopped receiving) before the I/O thread takes it back.
pub const RX_HOLD_STALE: std::time::Duration = std::time::Duration::from_millis(2);

/// The current [`RX_HOLD_STALE`], in microseconds (changed by tests).
static HOLD_STALE_US: AtomicU64 = AtomicU64::new(RX_HOLD_STALE.as_micros() as u64);

/// How long held input may wait on a reader that does not come back (see [`RX_HOLD_STALE`]).
pub fn hold_stale() -> std::time::Duration {
    std::time::Duration::from_micros(HOLD_STALE_US.load(Ordering::Relaxed))
}

/// Changes [`hold_stale`] for this process (tests: a long one leaves held input to the
/// reader and shows what it does when it lets go).
pub fn set_hold_stale(d: std::time::Duration) {
    HOLD_STALE_US.store(d.as_micros() as u64, Ordering::Relaxed);
}

/// Most bytes one direct receive reads: a turn of a stream (the rest is read when the reader
/// has taken these messages).
const RX_MAX_BYTES: usize = 64 * 1024;

/// What a direct read did.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// Nothing complete yet: wait on the stream again.
    Nothing,
    /// Whole messages were decoded and input is still the reader's until [`DirectRx::release`].
    Messages,
    /// Input went back to the I/O thread (a command, an error, or the end of the stream); the
    /// messages decoded before that point are still delivered.
    HandedBack,
}

/// What the I/O thread found when it looked at input held by a reader that may have stopped
/// receiving ([`DirectRx::steal_if_stale`]).
pub(crate) enum Stale {
    /// The input is the I/O thread's again: read it, continuing with the decoder if one is
    /// given (a frame was cut between the reader's reads).
    Taken(Option<crate::zmtp::codec::Decoder>),
    /// Readiness waits, and the reader came back since (the count of its claims now) or is
    /// still in its receive: look again later.
    Held(u64),
    /// Input is not held any more.
    Gone,
}

/// The decoders a direct receive uses and hands over.
struct RxDecoders {
    /// The reader's own decoder while input is the reader's, or kept for its next turn.
    spare: Option<crate::zmtp::codec::Decoder>,
    /// A decoder the reader gave back mid-stream: the I/O thread continues with it.
    handed: Option<crate::zmtp::codec::Decoder>,
}

/// One connection's input, shared between its I/O thread and the socket that reads its pipe.
///
/// Direct receives mirror direct sends: when the I/O thread has delivered everything it read
/// and the connection is idle, it *offers* the input; a socket blocked in a receive with nothing
/// queued *claims* it, waits on the stream's fd together with its mailbox, and reads and decodes
/// the next message itself, so a request or reply costs one thread wake-up, not two. The I/O
/// thread's own readiness events while the reader holds input only mark it `MISSED`; the reader
/// checks the stream once more when it lets go, and hands input back (its decoder included, so
/// a message cut by the end of a read continues exactly where it stopped) whenever anything but
/// complete data messages arrived.
pub struct DirectRx {
    fd: RawFd,
    state: AtomicU8,
    decoders: Mutex<RxDecoders>,
    /// A decoder waits in `handed`, or input came back for the I/O thread to read on.
    handed: std::sync::atomic::AtomicBool,
    metadata: Option<Arc<crate::msg::Metadata>>,
    /// The same connection's output, granted again after a direct receive.
    tx: Option<Arc<DirectTx>>,
    /// The I/O thread's session, woken when input comes back to it.
    io: crate::pipe::Target,
    /// Connections (streams) registered with the connection's I/O thread. Input is taken by a
    /// reader only while its connection is the thread's only one: with others, input that
    /// arrived on them first could still be on its way through the thread when the reader
    /// returns what it read itself, while libzmq, whose one thread reads both in turn, never
    /// lets the later one overtake (pyzmq's monitored-queue test depends on it: a subscription
    /// must take effect before the message that follows it on another connection is forwarded).
    io_streams: Arc<AtomicUsize>,
    /// Times the reader took input (the I/O thread's measure of a reader still at work).
    claims: AtomicU64,
    /// The I/O thread stopped listening for the stream's readiness while the reader holds
    /// input ([`DirectRx::set_deaf`]): a reader that lets input go wakes it.
    io_deaf: std::sync::atomic::AtomicBool,
    /// The socket reading the pipe receives with blocking calls ([`DirectRx::want`]): input
    /// offered to it stays offered until it takes it (or the stale timer takes it back).
    wanted: std::sync::atomic::AtomicBool,
}

impl DirectRx {
    /// Input of the stream `fd`, whose messages carry `metadata`; `decoder` is a fresh decoder
    /// with the connection's limits, `tx` its output (if shared), `io` the session to wake and
    /// `io_streams` the count of its I/O thread's connections.
    pub(crate) fn new(
        fd: RawFd,
        metadata: Option<Arc<crate::msg::Metadata>>,
        decoder: crate::zmtp::codec::Decoder,
        tx: Option<Arc<DirectTx>>,
        io: crate::pipe::Target,
        io_streams: Arc<AtomicUsize>,
    ) -> DirectRx {
        DirectRx {
            fd,
            state: AtomicU8::new(RX_IO),
            decoders: Mutex::new(RxDecoders {
                spare: Some(decoder),
                handed: None,
            }),
            handed: std::sync::atomic::AtomicBool::new(false),
            metadata,
            tx,
            io,
            io_streams,
            claims: AtomicU64::new(0),
            io_deaf: std::sync::atomic::AtomicBool::new(false),
            wanted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The stream's fd.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    fn decoders(&self) -> std::sync::MutexGuard<'_, RxDecoders> {
        self.decoders.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// I/O thread, after a read left the connection idle: offers input to the reader.
    pub(crate) fn offer(&self) {
        let _ = self
            .state
            .compare_exchange(RX_IO, RX_OFFERED, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// I/O thread, before it reads: takes input back. `None` while the reader holds it (the
    /// readiness is noted; the reader looks again when it lets go); otherwise the decoder the
    /// reader handed back, if any, to continue with.
    pub(crate) fn reclaim(&self) -> Option<Option<crate::zmtp::codec::Decoder>> {
        loop {
            match self.state.load(Ordering::Acquire) {
                RX_OFFERED => {
                    if self.offered_wanted() {
                        // The reader takes it in its next receive (see DirectRx::want).
                        return None;
                    }
                    if self
                        .state
                        .compare_exchange(RX_OFFERED, RX_IO, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        // Offered with a frame cut by the I/O thread's last read: it continues
                        // with the decoder holding it.
                        return Some(self.take_cut_spare());
                    }
                }
                RX_READING => {
                    if self
                        .state
                        .compare_exchange(
                            RX_READING,
                            RX_MISSED,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        return None;
                    }
                }
                RX_HELD => {
                    if self
                        .state
                        .compare_exchange(
                            RX_HELD,
                            RX_HELD_MISSED,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        return None;
                    }
                }
                RX_MISSED | RX_HELD_MISSED => return None,
                _ => {
                    if self.handed.swap(false, Ordering::AcqRel) {
                        return Some(self.decoders().handed.take());
                    }
                    return Some(None);
                }
            }
        }
    }

    /// Reader: its socket receives with blocking calls, so input offered to it waits for it
    /// (the I/O thread neither takes it back on readiness nor listens meanwhile; its stale
    /// timer takes it back from a reader that does not come). Lets the I/O thread hand over
    /// a stream it got ahead of: see [`Engine::yield_unstalled`](crate::engine::Engine).
    pub fn want(&self) {
        if !self.wanted.load(Ordering::Relaxed) {
            self.wanted.store(true, Ordering::SeqCst);
        }
    }

    /// Reader: its socket is about to report readiness or return `EAGAIN` (a poll, a
    /// non-blocking receive): input offered to it goes back to the I/O thread, which is woken
    /// if it stopped listening.
    pub fn unwant(&self) {
        if self.wanted.load(Ordering::Relaxed) && self.wanted.swap(false, Ordering::SeqCst) {
            self.wake_if_deaf();
        }
    }

    /// True while the reader's socket receives with blocking calls (see [`DirectRx::want`]).
    pub(crate) fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::SeqCst)
    }

    /// Input is offered and the reader's socket will take it (see [`DirectRx::want`]), while
    /// its connection is the I/O thread's only one (as [`DirectRx::claim`] requires).
    pub(crate) fn offered_wanted(&self) -> bool {
        self.state.load(Ordering::SeqCst) == RX_OFFERED
            && self.wanted.load(Ordering::SeqCst)
            && self.io_streams.load(Ordering::SeqCst) == 1
    }

    /// I/O thread: true while a reader holds input between receives.
    pub(crate) fn is_held(&self) -> bool {
        matches!(self.state.load(Ordering::SeqCst), RX_HELD | RX_HELD_MISSED)
    }

    /// I/O thread: true while input is the reader's (in a receive or between receives).
    pub(crate) fn holds_input(&self) -> bool {
        matches!(
            self.state.load(Ordering::SeqCst),
            RX_HELD | RX_HELD_MISSED | RX_READING | RX_MISSED
        )
    }

    /// I/O thread, having stopped listening for the stream's readiness while the reader holds
    /// input (a stream's every arrival would wake it for nothing): true when the reader still
    /// holds it, so it will wake the I/O thread when it lets go; false when it already let go
    /// (listen again now).
    pub(crate) fn set_deaf(&self) -> bool {
        self.io_deaf.store(true, Ordering::SeqCst);
        if self.holds_input() || self.offered_wanted() {
            return true;
        }
        self.io_deaf.store(false, Ordering::SeqCst);
        false
    }

    /// I/O thread: listening again.
    pub(crate) fn set_hearing(&self) {
        self.io_deaf.store(false, Ordering::SeqCst);
    }

    /// Reader, having let input go: wakes an I/O thread that stopped listening meanwhile.
    fn wake_if_deaf(&self) {
        if self.io_deaf.load(Ordering::SeqCst) && self.io_deaf.swap(false, Ordering::SeqCst) {
            self.io.notify.activate_write(self.io.token);
        }
    }

    /// I/O thread: the count of the reader's claims, to compare in
    /// [`DirectRx::steal_if_stale`].
    pub(crate) fn claims(&self) -> u64 {
        self.claims.load(Ordering::Acquire)
    }

    /// I/O thread, a while after it left readiness to a reader holding input: takes input back
    /// when readiness still waits and the reader has not read since `seen` (its claim count
    /// then), so an application that stopped receiving does not leave the connection's end,
    /// commands or errors unseen.
    ///
    /// A deaf I/O thread (see [`DirectRx::set_deaf`]) sees no readiness, so it takes held
    /// input back whenever the reader has not read since.
    pub(crate) fn steal_if_stale(&self, seen: u64, deaf: bool) -> Stale {
        let now = self.claims.load(Ordering::Acquire);
        let state = self.state.load(Ordering::Acquire);
        match state {
            RX_HELD_MISSED | RX_HELD if now == seen && (deaf || state == RX_HELD_MISSED) => {
                self.take_back(state)
            }
            // Offered to a reader that receives with blocking calls and has not come for it.
            RX_OFFERED if now == seen && self.offered_wanted() => self.take_back(RX_OFFERED),
            RX_OFFERED if self.offered_wanted() => Stale::Held(now),
            // Readiness left to the reader, which is still at work: look again later (a
            // reader in its receive turns MISSED into HELD_MISSED when it returns holding).
            RX_HELD_MISSED | RX_MISSED => Stale::Held(now),
            RX_HELD if deaf => Stale::Held(now),
            // Nothing waits (the next readiness sets the timer again), or input is not held.
            _ => Stale::Gone,
        }
    }

    /// I/O thread: takes input back from a reader found in `state` that did not come back
    /// (see [`DirectRx::steal_if_stale`]).
    fn take_back(&self, state: u8) -> Stale {
        if self
            .state
            .compare_exchange(state, RX_IO, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // The reader came back just now.
            return Stale::Held(self.claims.load(Ordering::Acquire));
        }
        TAKEN_BACK.fetch_add(1, Ordering::Relaxed);
        Stale::Taken(self.take_cut_spare())
    }

    /// The reader's decoder when it holds a frame cut between reads (the I/O thread continues
    /// with it); None when it is clean or absent.
    fn take_cut_spare(&self) -> Option<crate::zmtp::codec::Decoder> {
        let mut d = self.decoders();
        if d.spare.as_ref().is_some_and(|dec| !dec.is_clean()) {
            return d.spare.take();
        }
        None
    }

    /// I/O thread, which owns input: takes the reader's decoder (to offer input with its own,
    /// which holds a frame cut by its last read, see [`DirectRx::keep_spare`]).
    pub(crate) fn take_spare(&self) -> Option<crate::zmtp::codec::Decoder> {
        self.decoders().spare.take()
    }

    /// I/O thread: keeps `dec` for the reader's next turn (a clean decoder it replaced, or
    /// its own holding a cut frame, just before it offers input).
    pub(crate) fn keep_spare(&self, dec: crate::zmtp::codec::Decoder) {
        let mut d = self.decoders();
        if d.spare.is_none() {
            d.spare = Some(dec);
        }
    }

    /// I/O thread: the connection is ending. Waits for a reader that holds input to let go,
    /// waking it with `wake` (its mailbox); input is never offered again.
    pub(crate) fn kill(&self, wake: impl Fn()) {
        let mut woken = false;
        loop {
            match self.state.load(Ordering::Acquire) {
                RX_READING | RX_MISSED => {
                    if !woken {
                        wake();
                        woken = true;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
                s => {
                    if self
                        .state
                        .compare_exchange(s, RX_DEAD, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        let mut d = self.decoders();
                        d.spare = None;
                        d.handed = None;
                        return;
                    }
                }
            }
        }
    }

    /// True while input the reader handed back waits for the I/O thread.
    pub(crate) fn handed_back(&self) -> bool {
        self.handed.load(Ordering::Acquire)
    }

    /// Reader, blocked in a receive with nothing queued: takes input if it is offered (or held
    /// by this reader between receives, see [`DirectRx::hold`]). The
    /// caller must then check its pipe once more (messages delivered before the offer), and
    /// call [`DirectRx::release`] before it returns.
    pub fn claim(&self) -> bool {
        if self.io_streams.load(Ordering::SeqCst) != 1 {
            return false;
        }
        if self
            .state
            .compare_exchange(RX_OFFERED, RX_READING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            || self.resume_held()
        {
            self.claims.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        false
    }

    /// Reader: takes back input it holds between receives; false when it holds none.
    fn resume_held(&self) -> bool {
        self.state
            .compare_exchange(RX_HELD, RX_READING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            || self
                .state
                .compare_exchange(
                    RX_HELD_MISSED,
                    RX_MISSED,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Reader, whose inbox the application has emptied after a receive that held input
    /// ([`DirectRx::hold`]): takes input back to read on (true), or lets it go when its
    /// connection is no longer alone on its I/O thread (false; see [`DirectRx::release`]).
    pub fn resume(&self) -> bool {
        if !self.resume_held() {
            return false;
        }
        self.claims.fetch_add(1, Ordering::AcqRel);
        if self.io_streams.load(Ordering::SeqCst) != 1 {
            self.release();
            return false;
        }
        true
    }

    /// Reader, after a receive that left messages in its inbox (a stream, not one reply):
    /// keeps input between receives, so the next read after the inbox is empty is its own
    /// too and the stream does not bounce to the I/O thread; readiness the I/O thread sees
    /// meanwhile is left to it (the I/O thread takes input back only when the reader does not
    /// return within [`RX_HOLD_STALE`]). A frame cut between reads stays in the reader's
    /// decoder. `read_messages`: the receive that precedes the hold delivered messages
    /// (counted in [`hold_stats`]).
    pub fn hold(&self, read_messages: bool) {
        if read_messages {
            HELD.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self
            .state
            .compare_exchange(RX_READING, RX_HELD, Ordering::AcqRel, Ordering::Acquire)
            .or_else(|_| {
                self.state.compare_exchange(
                    RX_MISSED,
                    RX_HELD_MISSED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
            });
    }

    /// Reader, holding input, when the stream's fd is readable: reads and decodes, appending
    /// whole messages' frames to `out`. After messages, the connection's output is granted
    /// again if a direct send left it idle (see [`DirectTx::regrant`]), so the reply to them
    /// goes out directly too.
    pub fn receive(&self, out: &mut std::collections::VecDeque<Msg>) -> Received {
        use crate::zmtp::codec::{FLAG_COMMAND, FLAG_MORE};
        let mut decs = self.decoders();
        let Some(dec) = decs.spare.as_mut() else {
            drop(decs);
            self.hand_back(None);
            return Received::HandedBack;
        };
        let before = out.len();
        // Frames of a multipart message not complete yet (allocated only for multipart).
        let mut partial: Vec<(u8, Msg)> = Vec::new();
        let mut total = 0usize;
        let back = loop {
            let into_body = dec.in_body();
            let buf = dec.recv_buffer();
            let room = buf.len();
            // SAFETY: `buf` is writable memory of `room` bytes owned by the decoder; the fd is
            // the connection's stream, which the I/O thread does not close while input is the
            // reader's (`kill` waits for it to let go).
            let r =
                unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), room, libc::MSG_DONTWAIT) };
            if r < 0 {
                match std::io::Error::last_os_error().kind() {
                    std::io::ErrorKind::Interrupted => continue,
                    std::io::ErrorKind::WouldBlock => break false,
                    // Broken: the I/O thread reads the error itself and closes.
                    _ => break true,
                }
            }
            let n = r as usize;
            if n == 0 {
                // The end of the stream is the I/O thread's to handle.
                break true;
            }
            dec.received(n);
            total += n;
            let mut refused = false;
            loop {
                match dec.next_frame() {
                    Ok(Some((flags, mut m))) => {
                        if flags & FLAG_COMMAND != 0 {
                            partial.push((flags, m));
                            refused = true;
                            break;
                        }
                        let more = flags & FLAG_MORE != 0;
                        m.set_more(more);
                        m.set_metadata(self.metadata.clone());
                        if more {
                            partial.push((flags, m));
                        } else {
                            // A whole message: its earlier frames (if any), then this one.
                            if !partial.is_empty() {
                                out.extend(partial.drain(..).map(|(_, m)| m));
                            }
                            out.push_back(m);
                        }
                    }
                    Ok(None) => break,
                    // The I/O thread meets the same error and closes the connection.
                    Err(_) => {
                        refused = true;
                        break;
                    }
                }
            }
            if refused {
                break true;
            }
            if n < room {
                break false;
            }
            if into_body && !dec.in_body() {
                // The read ended exactly with a large body: one more read finds whether more
                // follows (a reply is whole now and stays the reader's; a stream is seen at its
                // next batch read).
                continue;
            }
            if total >= RX_MAX_BYTES {
                // A stream, not a reply: a turn's worth; the reader holds input and reads on
                // when it has taken these.
                break false;
            }
        };
        // Frames of a message not complete yet are decoded again later.
        dec.unread(&mut partial);
        if out.len() > before {
            RECEIVED.fetch_add(1, Ordering::Relaxed);
            if let Some(tx) = &self.tx {
                tx.regrant();
            }
        }
        if back {
            let dec = decs.spare.take();
            drop(decs);
            self.hand_back(dec);
            return Received::HandedBack;
        }
        if out.len() > before {
            Received::Messages
        } else {
            Received::Nothing
        }
    }

    /// Reader: gives input back to the I/O thread, with `dec` when it holds undecoded input,
    /// and wakes it.
    fn hand_back(&self, dec: Option<crate::zmtp::codec::Decoder>) {
        HANDED_BACK.fetch_add(1, Ordering::Relaxed);
        {
            let mut d = self.decoders();
            match dec {
                Some(dec) if !dec.is_clean() => d.handed = Some(dec),
                Some(dec) => d.spare = Some(dec),
                None => {}
            }
        }
        self.handed.store(true, Ordering::Release);
        self.state.store(RX_IO, Ordering::SeqCst);
        self.io_deaf.store(false, Ordering::SeqCst);
        self.io.notify.activate_write(self.io.token);
    }

    /// Reader, before it returns from the receive: lets go of input (handing it back when
    /// half a message or more input is waiting).
    pub fn release(&self) {
        if let Some(dec) = self.take_cut_spare() {
            // Half a message arrived: the I/O thread continues with it.
            self.hand_back(Some(dec));
            return;
        }
        loop {
            match self.state.load(Ordering::Acquire) {
                RX_READING => {
                    if self
                        .state
                        .compare_exchange(
                            RX_READING,
                            RX_OFFERED,
                            Ordering::SeqCst,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        self.wake_if_deaf();
                        return;
                    }
                }
                RX_MISSED => {
                    // The I/O thread saw readiness: either for what this reader already took,
                    // or for more. Look before offering input again.
                    if self
                        .state
                        .compare_exchange(
                            RX_MISSED,
                            RX_READING,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_err()
                    {
                        continue;
                    }
                    if self.readable_now() {
                        self.hand_back(None);
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// True when the stream has bytes (or an end, or an error) to read now.
    fn readable_now(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; zero timeout.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::io::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn spinning_stops_on_misses_and_resumes_after_a_quick_wake() {
        let budget = std::time::Duration::from_micros(30);
        let mut s = Spin::default();
        assert!(s.active());
        for _ in 0..SPIN_MISSES - 1 {
            s.miss();
            assert!(s.active());
        }
        s.miss();
        assert!(!s.active(), "sparse traffic: polling stops");
        // A long sleep does not bring it back; a wait the budget would have covered does.
        s.slept(std::time::Duration::from_millis(5), budget);
        assert!(!s.active());
        s.slept(std::time::Duration::from_micros(12), budget);
        assert!(s.active());
        // A hit restores the whole credit.
        s.miss();
        s.miss();
        s.hit();
        for _ in 0..SPIN_MISSES - 1 {
            s.miss();
        }
        assert!(s.active());
    }

    fn msg(bytes: &[u8], more: bool) -> Msg {
        let mut m = Msg::copy_from(bytes);
        m.set_more(more);
        m
    }

    #[test]
    fn writes_framed_messages_only_when_granted_and_idle() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        assert_eq!(d.try_send(&[], &msg(b"x", false), || true), Sent::NotNow);
        d.grant();
        assert_eq!(d.try_send(&[], &msg(b"x", false), || false), Sent::NotNow);
        assert!(d.granted(), "a refused attempt keeps the grant");
        let long = vec![7u8; 300];
        let sent = d.try_send(&[msg(b"head", true)], &msg(&long, false), || true);
        assert_eq!(sent, Sent::Done);
        assert!(!d.granted(), "the grant is used up");
        let mut got = vec![0u8; 2 + 4 + 9 + 300];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..6], b"\x01\x04head");
        assert_eq!(got[6], 0x02);
        assert_eq!(&got[7..15], &300u64.to_be_bytes());
        assert_eq!(&got[15..], &long[..]);
        // Killed: never granted again.
        d.kill();
        d.grant();
        assert!(!d.granted());
    }

    /// The bytes a leftover stands for, in order.
    fn leftover_bytes(pieces: &[Piece]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in pieces {
            match p {
                Piece::Bytes(b) => out.extend_from_slice(b),
                Piece::Body { msg, from } => out.extend_from_slice(&msg.data()[*from..]),
            }
        }
        out
    }

    #[test]
    fn a_partial_write_leaves_the_rest_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        // Small frames (copied into the leftover): fill the socket buffer until a message goes
        // only partly (or not at all).
        let body: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        let mut wire = vec![0x02];
        wire.extend_from_slice(&(body.len() as u64).to_be_bytes());
        wire.extend_from_slice(&body);
        let mut sent_whole = 0usize;
        let outcome = loop {
            d.grant();
            match d.try_send(&[], &msg(&body, false), || true) {
                Sent::Done => sent_whole += 1,
                other => break other,
            }
            assert!(sent_whole < 100_000, "the socket buffer never filled");
        };
        let left = d.take_leftover();
        if outcome == Sent::HandedOver {
            assert!(
                left.iter().all(|p| matches!(p, Piece::Bytes(_))),
                "small bodies are copied"
            );
            let rest = leftover_bytes(&left);
            assert!(!rest.is_empty() && rest.len() < wire.len());
            assert_eq!(rest[..], wire[wire.len() - rest.len()..]);
        } else {
            assert_eq!(outcome, Sent::NotNow);
            assert!(left.is_empty());
        }
        assert!(!d.granted());
        // What arrived is whole frames followed by the start of the partial one.
        let mut first = vec![0u8; wire.len()];
        b.read_exact(&mut first).unwrap();
        assert_eq!(first, wire);
    }

    #[test]
    fn a_large_body_written_in_two_steps_arrives_whole() {
        large_body_arrives_whole(true);
    }

    #[test]
    fn a_large_body_written_whole_arrives_whole() {
        large_body_arrives_whole(false);
    }

    fn large_body_arrives_whole(split: bool) {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0))).with_split_large(split);
        // Large enough to be split (lead first, then the rest), read concurrently.
        let body: Vec<u8> = (0..crate::zmtp::codec::LEAD_SPLIT_MIN * 3)
            .map(|i| (i % 249) as u8)
            .collect();
        let mut wire = b"\x01\x04head\x02".to_vec();
        wire.extend_from_slice(&(body.len() as u64).to_be_bytes());
        wire.extend_from_slice(&body);
        let n = wire.len();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; n];
            b.read_exact(&mut got).unwrap();
            got
        });
        d.grant();
        let out = d.try_send(&[msg(b"head", true)], &msg(&body, false), || true);
        let left = d.take_leftover();
        match out {
            Sent::Done => assert!(left.is_empty()),
            Sent::HandedOver => {
                // Split, the lead went in the first write, so the leftover is at most the rest.
                let rest = leftover_bytes(&left);
                if split {
                    assert!(rest.len() <= body.len() - crate::zmtp::codec::LEAD_BYTES);
                }
                let mut w = a.try_clone().unwrap();
                w.set_nonblocking(false).unwrap();
                w.write_all(&rest).unwrap();
            }
            Sent::NotNow => panic!("an empty socket refused the write"),
        }
        assert_eq!(reader.join().unwrap(), wire);
    }

    #[test]
    fn a_large_body_cut_by_a_partial_write_stays_by_reference() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        // More than any socket buffer takes at once: the kernel takes the head frame and part
        // of the body.
        let body: Vec<u8> = (0..(4usize << 20)).map(|i| (i % 251) as u8).collect();
        let last = msg(&body, false);
        d.grant();
        assert_eq!(
            d.try_send(&[msg(b"head", true)], &last, || true),
            Sent::HandedOver
        );
        let left = d.take_leftover();
        let from = match left.as_slice() {
            [Piece::Body { msg, from }] => {
                assert_eq!(msg.data().as_ptr(), last.data().as_ptr(), "not copied");
                *from
            }
            other => panic!("expected one body piece, got {}", other.len()),
        };
        assert!(from > 0 && from < body.len());
        // The stream holds the head frame, the body's header and its first `from` bytes; the
        // leftover holds the rest.
        let mut got = vec![0u8; 6 + 9 + from];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..6], b"\x01\x04head");
        assert_eq!(got[6], 0x02);
        assert_eq!(&got[7..15], &(body.len() as u64).to_be_bytes());
        assert_eq!(&got[15..], &body[..from]);
        assert_eq!(leftover_bytes(&left), body[from..]);
        b.set_nonblocking(true).unwrap();
        let mut extra = [0u8; 1];
        assert!(
            b.read(&mut extra).is_err(),
            "nothing past the partial write"
        );
    }
}

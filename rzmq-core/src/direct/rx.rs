//! Direct receives: a connection's input ([`DirectRx`]) offered by its I/O thread to the
//! socket reading the pipe, which claims it, reads and decodes on its own thread, holds it
//! between the receives of a stream, and hands it back (decoder included) for anything but
//! whole data messages.
//!
//! States: `IO`, `OFFERED`, `READING` (the reader holds input), `HELD` (between the receives of
//! a stream), `HELD_MISSED`, `MISSED` (as `READING`, and the I/O thread saw a readiness event it
//! left alone), `DEAD`.

use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{DirectTx, Target};
use crate::msg::Msg;

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
pub(crate) fn hold_stale() -> std::time::Duration {
    std::time::Duration::from_micros(HOLD_STALE_US.load(Ordering::Relaxed))
}

/// Changes `hold_stale` for this process (tests: a long one leaves held input to the
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
    Taken(Option<crate::zmtp::Decoder>),
    /// Readiness waits, and the reader came back since (the count of its claims now) or is
    /// still in its receive: look again later.
    Held(u64),
    /// Input is not held any more.
    Gone,
}

/// The decoders a direct receive uses and hands over.
struct RxDecoders {
    /// The reader's own decoder while input is the reader's, or kept for its next turn.
    spare: Option<crate::zmtp::Decoder>,
    /// A decoder the reader gave back mid-stream: the I/O thread continues with it.
    handed: Option<crate::zmtp::Decoder>,
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
    /// Unique in the process (see [`DirectRx::id`]).
    id: u64,
    state: AtomicU8,
    decoders: Mutex<RxDecoders>,
    /// A decoder waits in `handed`, or input came back for the I/O thread to read on.
    handed: std::sync::atomic::AtomicBool,
    metadata: Option<Arc<crate::msg::Metadata>>,
    /// The same connection's output, granted again after a direct receive.
    tx: Option<Arc<DirectTx>>,
    /// The I/O thread's session, woken when input comes back to it.
    io: Target,
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
        decoder: crate::zmtp::Decoder,
        tx: Option<Arc<DirectTx>>,
        io: Target,
        io_streams: Arc<AtomicUsize>,
    ) -> DirectRx {
        DirectRx {
            fd,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
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

    /// This input's number, unique in the process: tells a new stream from an old one whose
    /// fd number was reused.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Reader: true while input is the reader's to read when the stream turns readable (held
    /// between receives, or offered to a socket that asked for it), so the I/O thread leaves
    /// the stream's readiness to it; false while the I/O thread reads.
    pub fn readers_turn(&self) -> bool {
        self.is_held() || self.offered_wanted()
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
    pub(crate) fn reclaim(&self) -> Option<Option<crate::zmtp::Decoder>> {
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
    /// a stream it got ahead of (the engine's `yield_unstalled`).
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
    fn take_cut_spare(&self) -> Option<crate::zmtp::Decoder> {
        let mut d = self.decoders();
        if d.spare.as_ref().is_some_and(|dec| !dec.is_clean()) {
            return d.spare.take();
        }
        None
    }

    /// I/O thread, which owns input: takes the reader's decoder (to offer input with its own,
    /// which holds a frame cut by its last read, see [`DirectRx::keep_spare`]).
    pub(crate) fn take_spare(&self) -> Option<crate::zmtp::Decoder> {
        self.decoders().spare.take()
    }

    /// I/O thread: keeps `dec` for the reader's next turn (a clean decoder it replaced, or
    /// its own holding a cut frame, just before it offers input).
    pub(crate) fn keep_spare(&self, dec: crate::zmtp::Decoder) {
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
        use crate::zmtp::frame::{FLAG_COMMAND, FLAG_MORE};
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
    fn hand_back(&self, dec: Option<crate::zmtp::Decoder>) {
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

/// The next [`DirectRx::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
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

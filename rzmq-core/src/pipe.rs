//! Pipes: the bounded, lock-free message queues between a socket and its peers.
//!
//! A pipe is one direction of a connection: a [`Writer`] and a [`Reader`] on either side of a
//! lock-free queue. Each message crosses by move, never by copy. High-water marks count whole
//! messages (a multipart message is written atomically: its frames become visible together when the
//! last frame is written). Neither side signals the other on the fast path: the writer wakes the
//! reader only when the reader found the queue empty and went idle, and the reader wakes the
//! writer only when the writer hit its HWM. Wake-ups go through [`Notify`], implemented by whoever
//! owns the other end (a socket's mailbox, an I/O thread).
//!
//! A pipe whose reader writes to a plain ZMTP stream (a session's output) has a second lane,
//! the *framed lane* ([`Reader::request_framed`], [`crate::byteq`]): once the reader asks, the
//! writer encodes short frames (up to [`FRAMED_INLINE_MAX`] bytes) as they go on the wire and
//! the I/O thread copies whole runs of them into its output, without a message per frame on
//! either side; larger frames stay messages, marked in the lane where they belong. HWMs still
//! count messages. `RZMQ_FRAMED=0` turns it off.
//!
//! A pipe also carries the peer's properties (set by the engine when a handshake completes) and the
//! close state of each end. This module knows nothing of sockets, engines or transports.

use crate::byteq;
use crate::direct::{DirectRx, DirectTx, Sent};
use crate::spsc;
use crate::zmtp::codec::{FLAG_COMMAND, FLAG_LONG, FLAG_MORE};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::msg::{Metadata, Msg};

/// Callbacks an end's owner receives from the other end.
pub trait Notify: Send + Sync {
    /// Messages became available on the pipe `token` after the reader found it empty.
    fn activate_read(&self, token: u64);
    /// The pipe `token` has room again after the writer hit its HWM.
    fn activate_write(&self, token: u64);
    /// The other end of pipe `token` was closed.
    fn pipe_closed(&self, token: u64);
    /// The peer behind pipe `token` completed a (re)handshake; see [`Reader::peer`].
    fn peer_ready(&self, token: u64) {
        let _ = token;
    }
}

/// Where one end's notifications go: the owner and the token it knows the pipe by.
#[derive(Clone)]
pub struct Target {
    /// The owner to notify.
    pub notify: Arc<dyn Notify>,
    /// The owner's identifier for this pipe.
    pub token: u64,
}

/// What a conflating pipe holds: the newest message, a single frame or all its frames. (The
/// queue of other pipes holds frames; those of a multipart message are published together.)
enum Item {
    One(Msg),
    Many(Vec<Msg>),
}

struct Shared {
    /// High-water mark in whole messages (0: unbounded); either end may change it.
    hwm: AtomicU64,
    /// The newest message of a conflating pipe (`ZMQ_CONFLATE`), which has no queue.
    latest: Mutex<Option<Item>>,
    /// The reader found the queue empty and wants an activation.
    reader_idle: AtomicBool,
    /// The writer hit its HWM and wants an activation.
    writer_waiting: AtomicBool,
    /// Whole messages consumed by the reader.
    msgs_read: AtomicU64,
    reader_closed: AtomicBool,
    writer_closed: AtomicBool,
    reader_target: Mutex<Option<Target>>,
    writer_target: Mutex<Option<Target>>,
    /// Properties of the peer on the writing side, set at handshake.
    peer: Mutex<Option<Arc<Metadata>>>,
    /// When the writer closed, how long its queued messages may still be delivered.
    linger_deadline: Mutex<Option<Option<Instant>>>,
    /// The reader's connection output, for direct sends (see [`crate::direct`]).
    direct: Mutex<Option<Arc<DirectTx>>>,
    /// Bumped whenever `direct` changes (0: never set), so the writer rereads it only then.
    direct_gen: AtomicU64,
    /// The writer's connection input, for direct receives (see [`crate::direct::DirectRx`]).
    rx: Mutex<Option<Arc<DirectRx>>>,
    /// Bumped whenever `rx` changes, so the reader rereads it only then.
    rx_gen: AtomicU64,
    /// The reader's owner takes wire-framed bytes: the writer should encode (see
    /// [`Reader::request_framed`]).
    framed_req: AtomicBool,
    /// Queue items the writer had pushed when it switched to the framed lane (`u64::MAX`:
    /// not switched).
    framed_from: AtomicU64,
}

impl Shared {
    fn notify_reader(&self, f: impl FnOnce(&Target)) {
        if let Some(t) = self
            .reader_target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            f(t)
        }
    }
    fn notify_writer(&self, f: impl FnOnce(&Target)) {
        if let Some(t) = self
            .writer_target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            f(t)
        }
    }
}

/// Bytes of read messages after which the reader publishes its count even below the low-water
/// mark.
const PUBLISH_BYTES: usize = 4 * 1024 * 1024;

/// libzmq's low-water mark for a high-water mark: how many reads are batched before the writer
/// is told (and woken if it waits).
fn low_water_mark(hwm: u64) -> u64 {
    const MAX_WM_DELTA: u64 = 1024;
    if hwm > MAX_WM_DELTA * 2 {
        hwm - MAX_WM_DELTA
    } else {
        hwm.div_ceil(2).max(1)
    }
}

/// Creates a pipe with a high-water mark of `hwm` whole messages (0 means unbounded).
pub fn pipe(hwm: u64) -> (Writer, Reader) {
    pipe_with(hwm, false)
}

/// Creates a pipe; with `conflate` it keeps only the newest message (`ZMQ_CONFLATE`) and never
/// reports itself full.
pub fn pipe_with(hwm: u64, conflate: bool) -> (Writer, Reader) {
    let hwm = if conflate { 0 } else { hwm };
    let (producer, consumer) = spsc::queue();
    let shared = Arc::new(Shared {
        hwm: AtomicU64::new(hwm),
        latest: Mutex::new(None),
        reader_idle: AtomicBool::new(true),
        writer_waiting: AtomicBool::new(false),
        msgs_read: AtomicU64::new(0),
        reader_closed: AtomicBool::new(false),
        writer_closed: AtomicBool::new(false),
        reader_target: Mutex::new(None),
        writer_target: Mutex::new(None),
        peer: Mutex::new(None),
        linger_deadline: Mutex::new(None),
        direct: Mutex::new(None),
        direct_gen: AtomicU64::new(0),
        rx: Mutex::new(None),
        rx_gen: AtomicU64::new(0),
        framed_req: AtomicBool::new(false),
        framed_from: AtomicU64::new(u64::MAX),
    });
    let (bytes_w, bytes_r) = byteq::byte_queue();
    (
        Writer {
            shared: shared.clone(),
            q: producer,
            written: 0,
            read_seen: 0,
            pending: Vec::new(),
            closed: false,
            conflate,
            direct: None,
            direct_gen: 0,
            unwoken: false,
            bq: bytes_w,
            framed: false,
        },
        Reader {
            shared,
            q: consumer,
            conflate,
            read: 0,
            unpublished_bytes: 0,
            until_publish: if hwm == 0 {
                u64::MAX
            } else {
                low_water_mark(hwm)
            },
            in_multipart: false,
            queue_multipart: false,
            closed: false,
            batch: Vec::new().into_iter(),
            inbox: std::collections::VecDeque::new(),
            rx: None,
            rx_gen: 0,
            rx_held: false,
            bq: bytes_r,
            framed_req: false,
            framed_active: false,
            q_popped: 0,
            held: None,
        },
    )
}

/// Frames up to this size (ZMTP's short frames) travel the framed lane encoded; larger ones
/// stay messages, with a [`FRAMED_MARKER`] in the lane where they belong, and the engine
/// encodes them as before (copied up to 8 KiB, by reference above). Encoded bodies are copied
/// twice in user space (into the lane, then into the engine's output), which pays only while
/// the per-message work it saves costs more than the second copy: measured, 1 KiB frames
/// inline ran at 0.8x of the message path.
pub const FRAMED_INLINE_MAX: usize = 255;
/// A framed-lane record of one byte (this bit plus the frame's MORE and COMMAND flags): the
/// frame is the next message of the queue.
pub const FRAMED_MARKER: u8 = 0x80;

/// 0: not decided yet, 1: on, 2: off.
static FRAMED_ENABLED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether pipes to plain ZMTP connections use the framed lane: on by default; the first
/// call reads `RZMQ_FRAMED` (`0`: off) unless [`set_framed_enabled`] was called.
pub fn framed_enabled() -> bool {
    match FRAMED_ENABLED.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = std::env::var("RZMQ_FRAMED").map_or(true, |v| v != "0");
            let _ = FRAMED_ENABLED.compare_exchange(
                0,
                if on { 1 } else { 2 },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            FRAMED_ENABLED.load(Ordering::Relaxed) == 1
        }
    }
}

/// Messages moved through [`Reader::read_framed`] in this process.
static FRAMED_MOVED: AtomicU64 = AtomicU64::new(0);

/// Messages the framed lane moved as wire bytes or large frames in this process (tests and
/// benchmarks use it to see the lane at work).
pub fn framed_moved() -> u64 {
    FRAMED_MOVED.load(Ordering::Relaxed)
}

/// Turns the framed lane on or off for connections whose output is pumped from now on (a pipe
/// that switched keeps its lane).
pub fn set_framed_enabled(on: bool) {
    FRAMED_ENABLED.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// What [`Reader::read_framed`] hands on: wire bytes of whole frames, or a large frame as a
/// message.
pub enum Framed<'a> {
    /// Frames encoded as ZMTP 3 puts them on the wire.
    Bytes(&'a [u8]),
    /// A frame too large to encode inline (its MORE flag set as on the wire).
    Msg(Msg),
}

/// Why a walk of the framed lane stopped.
enum Stop {
    /// The published bytes of the chunk were all walked.
    End,
    /// A marker record (with these flags).
    Marker(u8),
    /// The budget was reached at a message boundary.
    Budget,
}

/// Header length and body length of the framed-lane frame record starting `rec` (published
/// records are whole, so the header is there).
#[inline]
fn frame_extent(rec: &[u8]) -> (usize, usize) {
    if rec[0] & FLAG_LONG != 0 {
        let mut n = [0u8; 8];
        n.copy_from_slice(&rec[1..9]);
        (9, u64::from_be_bytes(n) as usize)
    } else {
        (2, rec[1] as usize)
    }
}

/// The writing end of a pipe.
pub struct Writer {
    shared: Arc<Shared>,
    q: spsc::Producer<Msg>,
    written: u64,
    read_seen: u64,
    pending: Vec<Msg>,
    closed: bool,
    conflate: bool,
    /// The connection output last read from `Shared::direct`, as of `direct_gen`.
    direct: Option<Arc<DirectTx>>,
    direct_gen: u64,
    /// Messages were written with [`Writer::write_deferred`] and the reader not woken yet.
    unwoken: bool,
    /// The framed lane: small frames encoded for the wire (see [`Reader::request_framed`]).
    bq: byteq::ByteProducer,
    /// Whether this writer switched to the framed lane.
    framed: bool,
}

/// Why a write was refused.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum WriteError {
    /// The HWM is reached; an activation follows when room appears.
    Full,
    /// The reader has gone; the pipe should be dropped.
    Closed,
}

impl Writer {
    /// Sets who is told when the pipe has room again or the reader closes.
    pub fn set_target(&self, target: Target) {
        *self
            .shared
            .writer_target
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(target);
    }

    /// Changes the high-water mark (0 means unbounded); takes effect on the next write.
    pub fn set_hwm(&mut self, hwm: u64) {
        self.shared.hwm.store(hwm, Ordering::Relaxed);
    }

    /// True while a multipart message is partly written.
    pub fn in_multipart(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether one more message can be written now. When not, the writer registers for an
    /// activation. Frames after the first of a multipart message always fit.
    pub fn check_write(&mut self) -> Result<(), WriteError> {
        if self.shared.reader_closed.load(Ordering::Acquire) {
            return Err(WriteError::Closed);
        }
        let hwm = self.shared.hwm.load(Ordering::Relaxed);
        if hwm == 0 || self.in_multipart() || self.written - self.read_seen < hwm {
            return Ok(());
        }
        self.read_seen = self.shared.msgs_read.load(Ordering::Acquire);
        if self.written - self.read_seen < hwm {
            return Ok(());
        }
        self.shared.writer_waiting.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.read_seen = self.shared.msgs_read.load(Ordering::SeqCst);
        let hwm = self.shared.hwm.load(Ordering::SeqCst);
        if hwm == 0 || self.written - self.read_seen < hwm {
            self.shared.writer_waiting.store(false, Ordering::Relaxed);
            return Ok(());
        }
        Err(WriteError::Full)
    }

    /// Writes one frame after a successful [`Writer::check_write`]. Frames with MORE are held
    /// until the message's last frame, so the reader sees whole messages only.
    pub fn write(&mut self, msg: Msg) {
        if self.write_inner(msg) {
            self.wake_reader();
        }
    }

    /// As [`Writer::write`], but an idle reader is woken only by the next [`Writer::flush`] (or
    /// the next plain write): an I/O thread delivering a whole read's worth of messages wakes
    /// the application once per read, not once per message the application catches up with.
    #[inline]
    pub fn write_deferred(&mut self, msg: Msg) {
        if self.write_inner(msg) {
            self.unwoken = true;
        }
    }

    /// As [`Writer::try_write`], with the wake-up deferred as in [`Writer::write_deferred`].
    #[inline]
    pub fn try_write_deferred(&mut self, msg: Msg) -> Result<(), (Msg, WriteError)> {
        self.try_with(msg, Writer::write_deferred)
    }

    /// Wakes the reader for messages written by [`Writer::write_deferred`], if it is idle.
    #[inline]
    pub fn flush(&mut self) {
        if self.unwoken {
            self.unwoken = false;
            self.wake_reader();
        }
    }

    /// Queues the frame; true when a whole message became visible and the reader may need
    /// waking.
    #[inline]
    fn write_inner(&mut self, msg: Msg) -> bool {
        if msg.more() {
            self.pending.push(msg);
            return false;
        }
        if !self.conflate && self.shared.direct_gen.load(Ordering::Relaxed) != 0 {
            match self.try_direct(&msg) {
                Sent::NotNow => {}
                Sent::Done => {
                    self.pending.clear();
                    return false;
                }
                Sent::HandedOver => {
                    self.pending.clear();
                    self.shared
                        .notify_reader(|t| t.notify.activate_read(t.token));
                    return false;
                }
            }
        }
        if self.framed || (!self.conflate && self.shared.framed_req.load(Ordering::Relaxed)) {
            self.write_framed(msg);
            self.written += 1;
            return true;
        }
        if self.conflate {
            let item = if self.pending.is_empty() {
                Item::One(msg)
            } else {
                let mut frames = std::mem::take(&mut self.pending);
                frames.push(msg);
                Item::Many(frames)
            };
            // Only the newest message is kept, replacing one the reader has not taken yet.
            *self.shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(item);
        } else {
            // All frames become visible together: the reader never sees half a message.
            if !self.pending.is_empty() {
                self.push_pending();
            }
            self.q.push(msg);
        }
        self.written += 1;
        true
    }

    /// Encodes the held frames and `last` into the framed lane (switching to it first if the
    /// reader asked) and publishes them together.
    #[inline(always)]
    fn write_framed(&mut self, last: Msg) {
        if !self.framed {
            // Everything queued so far precedes the lane; the reader reads that first.
            self.shared
                .framed_from
                .store(self.q.pushed() as u64, Ordering::Release);
            self.framed = true;
        }
        if !self.pending.is_empty() {
            let frames = std::mem::take(&mut self.pending);
            let mut frames = frames;
            for f in frames.drain(..) {
                self.put_frame(f);
            }
            self.pending = frames;
        }
        self.put_frame(last);
        self.bq.publish();
    }

    /// Encodes one frame into the framed lane, or queues it with a marker when large.
    #[inline(always)]
    fn put_frame(&mut self, m: Msg) {
        let mut flags = 0;
        if m.more() {
            flags |= FLAG_MORE;
        }
        if m.is_command() {
            flags |= FLAG_COMMAND;
        }
        let len = m.len();
        if len > FRAMED_INLINE_MAX {
            self.bq.reserve(1)[0] = FRAMED_MARKER | flags;
            self.q.push(m);
            return;
        }
        // A short frame: flags, one length byte, the body.
        let rec = self.bq.reserve(2 + len);
        rec[0] = flags;
        rec[1] = len as u8;
        rec[2..].copy_from_slice(m.data());
    }

    /// Queues the held frames of a multipart message, unpublished (its last frame publishes
    /// them); the buffer keeps its capacity for the next message.
    #[cold]
    fn push_pending(&mut self) {
        for f in self.pending.drain(..) {
            self.q.push_unpublished(f);
        }
    }

    /// Writes a frame if there is room, handing it back otherwise.
    pub fn try_write(&mut self, msg: Msg) -> Result<(), (Msg, WriteError)> {
        self.try_with(msg, Writer::write)
    }

    /// Writes `msg` with `write` after a successful [`Writer::check_write`].
    #[inline]
    fn try_with(&mut self, msg: Msg, write: fn(&mut Writer, Msg)) -> Result<(), (Msg, WriteError)> {
        match self.check_write() {
            Ok(()) => {
                write(self, msg);
                Ok(())
            }
            Err(e) => Err((msg, e)),
        }
    }

    /// Discards the frames of a partly written multipart message.
    pub fn rollback(&mut self) {
        self.pending.clear();
    }

    /// Sends the message (pending frames + `last`) on the connection directly when its I/O
    /// thread granted output and the pipe is empty.
    #[inline(always)]
    fn try_direct(&mut self, last: &Msg) -> Sent {
        let gen = self.shared.direct_gen.load(Ordering::Acquire);
        if gen != self.direct_gen {
            self.refresh_direct(gen);
        }
        match self.direct.as_ref() {
            Some(d) if d.granted() => self.send_direct(last),
            _ => Sent::NotNow,
        }
    }

    /// Takes the connection output the I/O thread installed under generation `gen`.
    #[cold]
    fn refresh_direct(&mut self, gen: u64) {
        self.direct = self
            .shared
            .direct
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.direct_gen = gen;
    }

    /// The direct send of [`Writer::try_direct`], once output is seen granted.
    #[inline(never)]
    fn send_direct(&mut self, last: &Msg) -> Sent {
        let Some(d) = self.direct.as_ref() else {
            return Sent::NotNow;
        };
        let shared = &self.shared;
        d.try_send(&self.pending, last, || {
            shared.reader_idle.load(Ordering::SeqCst)
        })
    }

    fn wake_reader(&self) {
        fence(Ordering::SeqCst);
        if self.shared.reader_idle.load(Ordering::Relaxed)
            && self.shared.reader_idle.swap(false, Ordering::SeqCst)
        {
            self.shared
                .notify_reader(|t| t.notify.activate_read(t.token));
        }
    }

    /// True for a conflating pipe (`ZMQ_CONFLATE`: only the newest message is kept).
    pub fn conflates(&self) -> bool {
        self.conflate
    }

    /// Installs (or with None removes) the connection input the reader may read directly.
    pub fn set_direct_rx(&self, rx: Option<Arc<DirectRx>>) {
        *self.shared.rx.lock().unwrap_or_else(|e| e.into_inner()) = rx;
        self.shared.rx_gen.fetch_add(1, Ordering::AcqRel);
    }

    /// Notifies the reader's owner as if messages had arrived (a reader blocked on the
    /// connection's input wakes and lets go of it).
    pub fn poke_reader(&self) {
        self.shared
            .notify_reader(|t| t.notify.activate_read(t.token));
    }

    /// Publishes the properties of the peer that writes into this pipe (at handshake).
    pub fn set_peer(&self, md: Arc<Metadata>) {
        *self.shared.peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(md);
        self.shared.notify_reader(|t| t.notify.peer_ready(t.token));
    }

    /// True once the reader has closed its end.
    pub fn reader_closed(&self) -> bool {
        self.shared.reader_closed.load(Ordering::Acquire)
    }

    /// Messages written and not yet read (approximate across threads).
    pub fn queued(&self) -> u64 {
        self.written - self.shared.msgs_read.load(Ordering::Acquire)
    }

    /// Closes this end: the reader may drain what is queued, until `linger` (None: no limit).
    pub fn close_with_linger(mut self, linger: Option<Instant>) {
        *self
            .shared
            .linger_deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(linger);
        self.close_inner();
    }

    fn close_inner(&mut self) {
        if self.closed {
            return;
        }
        self.flush();
        self.closed = true;
        self.pending.clear();
        self.shared.writer_closed.store(true, Ordering::SeqCst);
        self.shared.notify_reader(|t| t.notify.pipe_closed(t.token));
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.close_inner();
    }
}

/// The reading end of a pipe.
pub struct Reader {
    shared: Arc<Shared>,
    q: spsc::Consumer<Msg>,
    conflate: bool,
    read: u64,
    /// Messages left to read before the count is published to the writer.
    until_publish: u64,
    /// Bytes read since the count was last published.
    unpublished_bytes: usize,
    in_multipart: bool,
    /// The last frame came from the queue and had MORE: the rest of its message follows there.
    queue_multipart: bool,
    closed: bool,
    /// The remaining frames of a multipart message a conflating pipe held.
    batch: std::vec::IntoIter<Msg>,
    /// Frames the reader's owner read from the connection itself (a direct receive): they
    /// follow everything queued before and precede everything queued after.
    inbox: std::collections::VecDeque<Msg>,
    /// The connection input last read from `Shared::rx`, as of `rx_gen`.
    rx: Option<Arc<DirectRx>>,
    rx_gen: u64,
    /// The owner holds `rx` between receives of a stream: a read that finds the inbox empty
    /// reads the connection's next turn itself (see [`crate::direct::DirectRx::hold`]).
    rx_held: bool,
    /// The framed lane's reading end.
    bq: byteq::ByteConsumer,
    /// This reader asked for the framed lane ([`Reader::request_framed`]).
    framed_req: bool,
    /// Everything queued before the writer switched has been read: the lane is next.
    framed_active: bool,
    /// Items taken from the queue so far (counted once the lane is asked for).
    q_popped: u64,
    /// A queue item taken before this reader learnt it belongs to a marker of the lane.
    held: Option<Msg>,
}

impl Reader {
    /// Changes the pipe's high-water mark from the reading side (HWM options set on the reading
    /// socket, inproc binds); a writer blocked on the old mark is woken.
    pub fn set_hwm(&mut self, hwm: u64) {
        self.shared.hwm.store(hwm, Ordering::SeqCst);
        self.until_publish = if hwm == 0 {
            u64::MAX
        } else {
            low_water_mark(hwm)
        };
        self.shared.msgs_read.store(self.read, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.shared.writer_waiting.load(Ordering::Relaxed)
            && self.shared.writer_waiting.swap(false, Ordering::SeqCst)
        {
            self.shared
                .notify_writer(|t| t.notify.activate_write(t.token));
        }
    }

    /// The next frame of the queue (or of a conflating pipe's newest message).
    #[inline(always)]
    fn pop_frame(&mut self) -> Option<Msg> {
        if self.conflate {
            return self.pop_conflated();
        }
        self.q.pop()
    }

    #[cold]
    fn pop_conflated(&mut self) -> Option<Msg> {
        if let Some(m) = self.batch.next() {
            return Some(m);
        }
        let item = self
            .shared
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        match item {
            Item::One(m) => Some(m),
            Item::Many(v) => {
                self.batch = v.into_iter();
                self.batch.next()
            }
        }
    }

    #[inline]
    fn queue_empty(&self) -> bool {
        if self.framed_req {
            return self.held.is_none() && self.q.is_empty() && self.bq.is_empty();
        }
        if self.conflate {
            self.shared
                .latest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
        } else {
            self.q.is_empty()
        }
    }

    /// Sets who is told when messages arrive or the writer closes. If messages are already
    /// queued, the new target is activated at once.
    pub fn set_target(&self, target: Target) {
        let mut g = self
            .shared
            .reader_target
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *g = Some(target);
        drop(g);
        if !self.queue_empty() && self.shared.reader_idle.swap(false, Ordering::SeqCst) {
            self.shared
                .notify_reader(|t| t.notify.activate_read(t.token));
        }
    }

    /// Reads one frame. On `None` the reader is registered for an activation.
    #[inline]
    pub fn read(&mut self) -> Option<Msg> {
        if self.framed_req {
            return self.read_framed_msg();
        }
        // Frames read from the connection directly (never counted by the writer) do not cut
        // into a message half read from the queue.
        if !self.queue_multipart {
            if let Some(m) = self.inbox.pop_front() {
                self.in_multipart = m.more();
                return Some(m);
            }
            if self.rx_held {
                if let Some(m) = self.read_on() {
                    return Some(m);
                }
            }
        }
        let m = match self.pop_frame() {
            Some(m) => m,
            None => {
                if self.shared.msgs_read.load(Ordering::Relaxed) != self.read {
                    // Drained: tell the writer everything read so far (a writer that waits on
                    // a mark the batching has not reached yet is woken).
                    self.publish_reads();
                }
                self.shared.reader_idle.store(true, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                let m = self.pop_frame()?;
                self.shared.reader_idle.store(false, Ordering::SeqCst);
                m
            }
        };
        self.took(&m);
        Some(m)
    }

    /// Counts a frame read from the queue or the framed lane.
    #[inline]
    fn took(&mut self, m: &Msg) {
        self.queue_multipart = m.more();
        self.in_multipart = m.more();
        self.unpublished_bytes += m.len();
        if !self.in_multipart {
            self.read += 1;
            // As libzmq, the writer learns of consumed messages in batches of the low-water
            // mark (hwm+1)/2 (hwm-1024 for large marks), not one by one: fewer cross-core
            // stores, and the same send counts as libzmq under backpressure. Unbounded pipes
            // never need it. Large messages are published every PUBLISH_BYTES as well, so a
            // writer blocked on the mark resumes while the storage of what was sent is still in
            // the pool (see crate::pool), not after hundreds of megabytes were freed.
            if self.until_publish > 1 && self.unpublished_bytes < PUBLISH_BYTES {
                self.until_publish -= 1;
            } else {
                self.publish_reads();
            }
        }
    }

    /// Asks the writer to encode small frames for the wire from its next message on (the
    /// framed lane; only for an owner that writes them to a plain ZMTP stream, see
    /// [`Reader::read_framed`]). Everything already queued is read first; [`Reader::read`]
    /// still works afterwards, decoding the lane back into frames.
    pub fn request_framed(&mut self) {
        if self.framed_req || self.conflate {
            return;
        }
        self.framed_req = true;
        self.shared.framed_req.store(true, Ordering::Release);
    }

    /// True once [`Reader::request_framed`] was called.
    pub fn framed_requested(&self) -> bool {
        self.framed_req
    }

    /// Tells the writer now of everything read so far (waking it if it waits on the
    /// high-water mark), as an idle reader does: for an owner about to wait a little.
    pub fn publish_now(&mut self) {
        if self.shared.msgs_read.load(Ordering::Relaxed) != self.read {
            self.publish_reads();
        }
    }

    /// Bytes waiting in the framed lane.
    pub fn framed_backlog(&self) -> usize {
        self.bq.backlog()
    }

    /// The next queue item written before the writer switched to the lane; `None` when there
    /// is none now or the lane is next (then `framed_active` is set).
    fn pop_before_lane(&mut self) -> Option<Msg> {
        let from = self.shared.framed_from.load(Ordering::Acquire);
        if self.q_popped >= from {
            self.framed_active = true;
            return None;
        }
        let m = self.q.pop()?;
        let idx = self.q_popped;
        self.q_popped += 1;
        if from == u64::MAX && idx >= self.shared.framed_from.load(Ordering::Acquire) {
            // The writer switched meanwhile and this item is a lane marker's frame.
            self.held = Some(m);
            self.framed_active = true;
            return None;
        }
        Some(m)
    }

    /// The frame behind a lane marker.
    fn marker_frame(&mut self) -> Msg {
        if let Some(m) = self.held.take() {
            return m;
        }
        self.q_popped += 1;
        // The writer queued the frame before publishing its marker.
        self.q
            .pop()
            .expect("a framed-lane marker without its frame")
    }

    /// Registers for an activation; true when something arrived meanwhile (read again).
    fn go_idle(&mut self) -> bool {
        if self.shared.msgs_read.load(Ordering::Relaxed) != self.read {
            self.publish_reads();
        }
        self.shared.reader_idle.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // Inline frames reach the lane without a queue item: an active lane is idle only when
        // nothing published waits in it either (the writer publishes, then looks for an idle
        // reader; this side marks itself idle, then looks at what was published).
        let lane_idle = if self.framed_active {
            self.bq.is_empty()
        } else {
            self.shared.framed_from.load(Ordering::SeqCst) == u64::MAX
        };
        if self.queue_empty() && lane_idle {
            return false;
        }
        self.shared.reader_idle.store(false, Ordering::SeqCst);
        true
    }

    /// [`Reader::read`] for a reader that asked for the framed lane: frames queued before the
    /// switch, then the lane's frames decoded back into messages.
    #[cold]
    fn read_framed_msg(&mut self) -> Option<Msg> {
        loop {
            if !self.framed_active {
                if let Some(m) = self.pop_before_lane() {
                    self.took(&m);
                    return Some(m);
                }
                if self.framed_active {
                    continue;
                }
                if self.go_idle() {
                    continue;
                }
                return None;
            }
            let rec = self.bq.peek();
            if rec.is_empty() {
                if self.go_idle() {
                    continue;
                }
                return None;
            }
            let flags = rec[0];
            let m = if flags & FRAMED_MARKER != 0 {
                self.bq.consume(1);
                self.marker_frame()
            } else {
                let (h, len) = frame_extent(rec);
                let mut m = Msg::copy_from(&rec[h..h + len]);
                m.set_more(flags & FLAG_MORE != 0);
                m.set_command(flags & FLAG_COMMAND != 0);
                self.bq.consume(h + len);
                m
            };
            self.took(&m);
            return Some(m);
        }
    }

    /// The fast read for an owner that writes plain ZMTP: hands whole messages of the framed
    /// lane to `out`, as wire bytes (small frames) or messages (large ones), until about
    /// `budget` bytes went. Returns the messages moved, or `None` when the lane is not next
    /// yet (frames queued before the switch: read them with [`Reader::read`]). `Some(0)`: the
    /// reader registered for an activation.
    pub fn read_framed(&mut self, budget: usize, out: &mut dyn FnMut(Framed<'_>)) -> Option<usize> {
        if !self.framed_req || self.in_multipart {
            return None;
        }
        if !self.framed_active {
            if self.held.is_none()
                && self.q_popped >= self.shared.framed_from.load(Ordering::Acquire)
            {
                self.framed_active = true;
            } else {
                return None;
            }
        }
        let mut msgs = 0u64;
        let mut bytes = 0usize;
        'outer: loop {
            let rec = self.bq.peek();
            if rec.is_empty() {
                if msgs > 0 {
                    break;
                }
                if self.go_idle() {
                    continue;
                }
                return Some(0);
            }
            // Walk whole records: runs of inline frames go on as bytes, marker frames singly.
            // Published records end with whole messages, so an empty lane is a boundary; a
            // message cut by the end of a chunk continues in the next one.
            let mut i = 0;
            let mut stop = Stop::End;
            while i < rec.len() {
                let flags = rec[i];
                if flags & FRAMED_MARKER != 0 {
                    stop = Stop::Marker(flags);
                    break;
                }
                let (h, len) = frame_extent(&rec[i..]);
                i += h + len;
                if flags & FLAG_MORE == 0 {
                    msgs += 1;
                    if bytes + i >= budget {
                        stop = Stop::Budget;
                        break;
                    }
                }
            }
            if i > 0 {
                out(Framed::Bytes(&rec[..i]));
                self.bq.consume(i);
                bytes += i;
            }
            match stop {
                Stop::Budget => break,
                Stop::End => {}
                Stop::Marker(flags) => {
                    self.bq.consume(1);
                    let m = self.marker_frame();
                    bytes += m.len();
                    out(Framed::Msg(m));
                    if flags & FLAG_MORE == 0 {
                        msgs += 1;
                        if bytes >= budget {
                            break 'outer;
                        }
                    }
                }
            }
        }
        FRAMED_MOVED.fetch_add(msgs, Ordering::Relaxed);
        self.read += msgs;
        self.unpublished_bytes += bytes;
        if self.until_publish > msgs && self.unpublished_bytes < PUBLISH_BYTES {
            self.until_publish -= msgs;
        } else {
            self.publish_reads();
        }
        Some(msgs as usize)
    }

    #[cold]
    fn publish_reads(&mut self) {
        self.unpublished_bytes = 0;
        let hwm = self.shared.hwm.load(Ordering::Relaxed);
        self.until_publish = if hwm == 0 {
            u64::MAX
        } else {
            low_water_mark(hwm)
        };
        self.shared.msgs_read.store(self.read, Ordering::Release);
        fence(Ordering::SeqCst);
        if self.shared.writer_waiting.load(Ordering::Relaxed)
            && self.shared.writer_waiting.swap(false, Ordering::SeqCst)
        {
            self.shared
                .notify_writer(|t| t.notify.activate_write(t.token));
        }
    }

    /// Installs (or with None removes) the connection output the writer may send on directly.
    pub fn set_direct(&self, direct: Option<Arc<DirectTx>>) {
        *self.shared.direct.lock().unwrap_or_else(|e| e.into_inner()) = direct;
        self.shared.direct_gen.fetch_add(1, Ordering::AcqRel);
    }

    /// The connection input this reader may read directly, if its writer's I/O thread shares
    /// it (see [`crate::direct::DirectRx`]).
    pub fn direct_rx(&mut self) -> Option<&Arc<DirectRx>> {
        let gen = self.shared.rx_gen.load(Ordering::Acquire);
        if gen != self.rx_gen {
            self.rx = self
                .shared
                .rx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            self.rx_gen = gen;
        }
        self.rx.as_ref()
    }

    /// The owner holds the connection's input between receives of a stream (it called
    /// [`crate::direct::DirectRx::hold`]): reads that empty the inbox read on from the
    /// connection. `false`: the owner took held input into a receive of its own.
    pub fn set_input_held(&mut self, held: bool) {
        self.rx_held = held && self.rx.is_some();
    }

    /// Gives held input back to the I/O thread (see [`crate::direct::DirectRx::release`]).
    pub fn let_go_input(&mut self) {
        if std::mem::take(&mut self.rx_held) {
            if let Some(rx) = &self.rx {
                if rx.resume() {
                    rx.release();
                }
            }
        }
    }

    /// The inbox is empty and the owner holds the connection's input: reads and decodes what
    /// arrived since, keeping input held (even when nothing came: the owner's blocking receive
    /// waits on the stream itself; anything else lets it go first).
    fn read_on(&mut self) -> Option<Msg> {
        use crate::direct::Received;
        self.rx_held = false;
        let rx = self.rx.clone()?;
        if !rx.resume() {
            return None;
        }
        match rx.receive(&mut self.inbox) {
            step @ (Received::Messages | Received::Nothing) => {
                rx.hold(step == Received::Messages);
                self.rx_held = true;
            }
            Received::HandedBack => {}
        }
        let m = self.inbox.pop_front()?;
        self.in_multipart = m.more();
        Some(m)
    }

    /// Where the owner puts frames of whole messages it read from the connection itself, while
    /// the pipe was empty and the connection's input was the owner's (see
    /// [`crate::direct::DirectRx::receive`]).
    pub fn direct_inbox(&mut self) -> &mut std::collections::VecDeque<Msg> {
        &mut self.inbox
    }

    /// True when the last read found the queue empty and nothing was written since.
    pub fn is_idle(&self) -> bool {
        self.batch.len() == 0
            && self.inbox.is_empty()
            && self.shared.reader_idle.load(Ordering::SeqCst)
    }

    /// True when a frame can be read now. When not, the reader is registered for an activation
    /// (exactly as a `read` returning `None`), so a later write wakes its owner.
    pub fn has_msg(&self) -> bool {
        if self.batch.len() > 0 || !self.inbox.is_empty() || !self.queue_empty() {
            return true;
        }
        self.shared.reader_idle.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.queue_empty() {
            return false;
        }
        self.shared.reader_idle.store(false, Ordering::SeqCst);
        true
    }

    /// True while the last frame read had MORE set.
    pub fn in_multipart(&self) -> bool {
        self.in_multipart
    }

    /// True once the writer closed and everything it wrote has been read.
    pub fn is_finished(&self) -> bool {
        self.shared.writer_closed.load(Ordering::Acquire)
            && self.batch.len() == 0
            && self.inbox.is_empty()
            && self.queue_empty()
    }

    /// True once the writer closed its end.
    pub fn writer_closed(&self) -> bool {
        self.shared.writer_closed.load(Ordering::Acquire)
    }

    /// The linger deadline the writer set when closing: `None` while open, `Some(None)` for no limit.
    pub fn linger_deadline(&self) -> Option<Option<Instant>> {
        *self
            .shared
            .linger_deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The writing peer's properties, once its handshake completed.
    pub fn peer(&self) -> Option<Arc<Metadata>> {
        self.shared
            .peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Drops everything queued (e.g. LINGER 0), returning how many frames were dropped.
    pub fn discard_all(&mut self) -> usize {
        let mut n = 0;
        while self.read().is_some() {
            n += 1;
        }
        n
    }

    fn close_inner(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.shared.reader_closed.store(true, Ordering::SeqCst);
        self.shared.notify_writer(|t| t.notify.pipe_closed(t.token));
        // Release queued frames (and their external buffers) now rather than when the writer goes.
        self.batch = Vec::new().into_iter();
        self.inbox = std::collections::VecDeque::new();
        // Input held between receives, or offered and waiting for this reader, goes back to
        // the I/O thread, which listens again.
        self.let_go_input();
        if let Some(rx) = self.direct_rx().cloned() {
            rx.unwant();
        }
        self.rx = None;
        while self.pop_frame().is_some() {}
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.close_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Counts {
        read: AtomicUsize,
        write: AtomicUsize,
        closed: AtomicUsize,
    }
    impl Notify for Counts {
        fn activate_read(&self, _: u64) {
            self.read.fetch_add(1, Ordering::SeqCst);
        }
        fn activate_write(&self, _: u64) {
            self.write.fetch_add(1, Ordering::SeqCst);
        }
        fn pipe_closed(&self, _: u64) {
            self.closed.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn hwm_counts_whole_messages_and_activates() {
        let (mut w, mut r) = pipe(2);
        let c = Arc::new(Counts::default());
        w.set_target(Target {
            notify: c.clone(),
            token: 1,
        });
        r.set_target(Target {
            notify: c.clone(),
            token: 2,
        });
        let mut a = Msg::from("a");
        a.set_more(true);
        w.try_write(a).unwrap();
        w.try_write(Msg::from("b")).unwrap();
        w.try_write(Msg::from("c")).unwrap();
        assert_eq!(w.try_write(Msg::from("d")).unwrap_err().1, WriteError::Full);
        assert_eq!(
            c.read.load(Ordering::SeqCst),
            1,
            "one activation for an idle reader"
        );
        assert_eq!(r.read().unwrap().data(), b"a");
        assert_eq!(
            c.write.load(Ordering::SeqCst),
            0,
            "half a message frees nothing"
        );
        assert_eq!(r.read().unwrap().data(), b"b");
        assert_eq!(c.write.load(Ordering::SeqCst), 1);
        w.try_write(Msg::from("d")).unwrap();
        assert_eq!(r.read().unwrap().data(), b"c");
        assert_eq!(r.read().unwrap().data(), b"d");
        assert!(r.read().is_none());
        w.try_write(Msg::from("e")).unwrap();
        assert_eq!(c.read.load(Ordering::SeqCst), 2);
    }

    /// A frame as the tests compare them: body, MORE.
    type Frame = (Vec<u8>, bool);

    /// Frames of `wire` (ZMTP 3 data frames) appended to `out`.
    fn decode_wire(mut wire: &[u8], out: &mut Vec<Frame>) {
        while !wire.is_empty() {
            let (h, len) = frame_extent(wire);
            out.push((wire[h..h + len].to_vec(), wire[0] & FLAG_MORE != 0));
            wire = &wire[h + len..];
        }
    }

    /// The messages the tests write: sizes across the inline limit and multipart ones.
    fn lane_messages() -> Vec<Vec<Frame>> {
        let mut msgs = Vec::new();
        for i in 0..3000usize {
            let size = match i % 7 {
                0 => 0,
                1 => 255,
                2 => 256,
                3 => FRAMED_INLINE_MAX,
                4 => FRAMED_INLINE_MAX + 1,
                5 => 40_000,
                _ => i % 300,
            };
            let body: Vec<u8> = (0..size).map(|k| (k + i) as u8).collect();
            if i % 5 == 0 {
                msgs.push(vec![(b"head".to_vec(), true), (body, false)]);
            } else {
                msgs.push(vec![(body, false)]);
            }
        }
        msgs
    }

    fn write_message(w: &mut Writer, m: &[Frame]) {
        for (body, more) in m {
            let mut f = Msg::copy_from(body);
            f.set_more(*more);
            w.try_write(f).unwrap();
        }
    }

    #[test]
    fn the_framed_lane_carries_frames_in_order_after_what_was_queued_before() {
        let (mut w, mut r) = pipe(0);
        let msgs = lane_messages();
        // Queued before the reader asks for the lane: read as messages first.
        for m in &msgs[..10] {
            write_message(&mut w, m);
        }
        r.request_framed();
        assert_eq!(
            r.read_framed(1 << 20, &mut |_| panic!("queued first")),
            None
        );
        let mut got: Vec<Frame> = Vec::new();
        for _ in 0..12 {
            let m = r.read().unwrap();
            got.push((m.data().to_vec(), m.more()));
        }
        for m in &msgs[10..] {
            write_message(&mut w, m);
        }
        let mut moved = 0;
        let mut large = 0;
        loop {
            let n = r
                .read_framed(64 * 1024, &mut |f| match f {
                    Framed::Bytes(b) => decode_wire(b, &mut got),
                    Framed::Msg(m) => {
                        assert!(m.len() > FRAMED_INLINE_MAX);
                        large += 1;
                        got.push((m.data().to_vec(), m.more()));
                    }
                })
                .unwrap();
            if n == 0 {
                break;
            }
            moved += n;
        }
        assert_eq!(moved, msgs.len() - 10);
        assert!(large > 0, "large frames stay messages");
        let want: Vec<Frame> = msgs.iter().flatten().cloned().collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "frames differ");
        assert_eq!(w.queued(), 0, "every message counted as read");
    }

    #[test]
    fn a_framed_lane_reads_back_as_messages() {
        let (mut w, mut r) = pipe(0);
        r.request_framed();
        let msgs = lane_messages();
        for m in &msgs {
            write_message(&mut w, m);
        }
        let mut got: Vec<Frame> = Vec::new();
        while let Some(m) = r.read() {
            got.push((m.data().to_vec(), m.more()));
        }
        let want: Vec<Frame> = msgs.iter().flatten().cloned().collect();
        assert!(got == want, "frames differ");
        assert!(r.is_idle());
        assert_eq!(w.queued(), 0);
    }

    #[test]
    fn the_framed_lane_keeps_the_high_water_mark_and_wakes_an_idle_reader() {
        let (mut w, mut r) = pipe(4);
        let c = Arc::new(Counts::default());
        w.set_target(Target {
            notify: c.clone(),
            token: 1,
        });
        r.set_target(Target {
            notify: c.clone(),
            token: 2,
        });
        r.request_framed();
        assert!(r.read().is_none(), "empty: goes idle");
        for i in 0..4u8 {
            w.try_write(Msg::copy_from(&[i; 10])).unwrap();
        }
        assert_eq!(
            c.read.load(Ordering::SeqCst),
            1,
            "one wake-up for the idle reader"
        );
        assert_eq!(w.try_write(Msg::from("x")).unwrap_err().1, WriteError::Full);
        let mut bytes = 0;
        assert_eq!(
            r.read_framed(1024, &mut |f| {
                if let Framed::Bytes(b) = f {
                    bytes += b.len();
                }
            }),
            Some(4)
        );
        assert_eq!(bytes, 4 * 12);
        assert_eq!(
            c.write.load(Ordering::SeqCst),
            1,
            "the blocked writer is woken"
        );
        w.try_write(Msg::from("x")).unwrap();
    }

    #[test]
    fn a_framed_lane_between_threads_loses_nothing() {
        let (mut w, mut r) = pipe(100);
        let c = Arc::new(Counts::default());
        r.set_target(Target {
            notify: c.clone(),
            token: 2,
        });
        r.request_framed();
        let n = 100_000u32;
        let t = std::thread::spawn(move || {
            let mut i = 0u32;
            while i < n {
                let size = 4 + (i as usize % 13) * if i.is_multiple_of(1000) { 1000 } else { 1 };
                let mut body = vec![(i % 251) as u8; size];
                body[..4].copy_from_slice(&i.to_le_bytes());
                match w.try_write(Msg::copy_from(&body)) {
                    Ok(()) => i += 1,
                    Err((_, WriteError::Full)) => std::thread::yield_now(),
                    Err((_, e)) => panic!("{e:?}"),
                }
            }
        });
        let mut next = 0u32;
        while next < n {
            let mut frames = Vec::new();
            // None until the writer's first write switched it to the lane.
            let k = r
                .read_framed(16 * 1024, &mut |f| match f {
                    Framed::Bytes(b) => decode_wire(b, &mut frames),
                    Framed::Msg(m) => frames.push((m.data().to_vec(), false)),
                })
                .unwrap_or(0);
            assert_eq!(k, frames.len());
            for (body, _) in &frames {
                assert_eq!(u32::from_le_bytes(body[..4].try_into().unwrap()), next);
                next += 1;
            }
            if k == 0 {
                std::thread::yield_now();
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn multipart_invisible_until_complete_and_rollback() {
        let (mut w, mut r) = pipe(0);
        let mut a = Msg::from("a");
        a.set_more(true);
        w.write(a);
        assert!(r.read().is_none());
        w.rollback();
        w.write(Msg::from("z"));
        assert_eq!(r.read().unwrap().data(), b"z");
    }

    #[test]
    fn close_notifies_and_finishes() {
        let (mut w, mut r) = pipe(0);
        let c = Arc::new(Counts::default());
        r.set_target(Target {
            notify: c.clone(),
            token: 2,
        });
        w.write(Msg::from("x"));
        w.close_with_linger(None);
        assert_eq!(c.closed.load(Ordering::SeqCst), 1);
        assert!(!r.is_finished());
        assert!(r.read().is_some());
        assert!(r.is_finished());
        assert_eq!(r.linger_deadline(), Some(None));
    }

    #[test]
    fn threads_lose_nothing() {
        let (mut w, mut r) = pipe(100);
        struct Park(std::thread::Thread);
        impl Notify for Park {
            fn activate_read(&self, _: u64) {
                self.0.unpark()
            }
            fn activate_write(&self, _: u64) {
                self.0.unpark()
            }
            fn pipe_closed(&self, _: u64) {
                self.0.unpark()
            }
        }
        r.set_target(Target {
            notify: Arc::new(Park(std::thread::current())),
            token: 0,
        });
        let t = std::thread::spawn(move || {
            w.set_target(Target {
                notify: Arc::new(Park(std::thread::current())),
                token: 0,
            });
            for i in 0u32..200_000 {
                let mut m = Msg::copy_from(&i.to_le_bytes());
                loop {
                    match w.try_write(m) {
                        Ok(()) => break,
                        Err((back, WriteError::Full)) => {
                            m = back;
                            std::thread::park_timeout(std::time::Duration::from_millis(100));
                        }
                        Err((_, WriteError::Closed)) => panic!("closed"),
                    }
                }
            }
        });
        let mut next = 0u32;
        while next < 200_000 {
            match r.read() {
                Some(m) => {
                    assert_eq!(m.data(), next.to_le_bytes());
                    next += 1;
                }
                None => std::thread::park_timeout(std::time::Duration::from_millis(100)),
            }
        }
        t.join().unwrap();
    }
}

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
//!
//! Files: `writer` ([`Writer`]), `reader` ([`Reader`]), `framed` (the framed lane, both ends);
//! this file holds what the two ends share and creates pipes.

use std::sync::Arc;
use std::time::Instant;

pub use crate::direct::{Notify, Target};

use crate::byteq;
use crate::direct::{DirectRx, DirectTx};
use crate::msg::{Metadata, Msg};
use crate::spsc;
use crate::sync::{fence, AtomicBool, AtomicU64, Mutex, Ordering};

mod framed;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub(crate) use framed::Framed;
pub use framed::{framed_moved, FRAMED_INLINE_MAX};
pub use reader::Reader;
pub(crate) use writer::WriteError;
pub use writer::Writer;

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
    /// Whole messages consumed: read by the reader, plus sent directly by the writer (see
    /// `direct_sent`), as the writer learns them.
    msgs_read: AtomicU64,
    /// Whole messages the writer sent directly on the connection (never queued): they count as
    /// written and read at once, so the counts are those of a pipe every message passes, as
    /// libzmq's (the low-water-mark batches, `ZMQ_EVENT_PIPES_STATS`).
    direct_sent: AtomicU64,
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
    /// The reader's half of the idle/wake hand-off: marks the reader idle, then a SeqCst fence;
    /// the caller looks at what was published next (the writer publishes, fences, then looks
    /// at the mark). The mark is a swap, not a store: the same `xchg` on x86-64, and an RMW
    /// that loom orders after the writer's last swap of the mark. With a plain store loom's
    /// modification order leaves the two unordered and lets the writer read its own older
    /// swap, an outcome C11 forbids (the `loom_litmus_*` test in loom_tests.rs shows it).
    #[inline(always)]
    fn mark_reader_idle(&self) {
        self.reader_idle.swap(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

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

/// libzmq 4.3's low-water mark for a high-water mark, (hwm+1)/2 at every size: how many reads
/// are batched before the writer is told (and woken if it waits).
fn low_water_mark(hwm: u64) -> u64 {
    hwm.div_ceil(2).max(1)
}

/// Creates a pipe with a high-water mark of `hwm` whole messages (0 means unbounded).
pub fn pipe(hwm: u64) -> (Writer, Reader) {
    pipe_with(hwm, false)
}

/// Creates a pipe; with `conflate` it keeps only the newest message (`ZMQ_CONFLATE`) and never
/// reports itself full.
pub(crate) fn pipe_with(hwm: u64, conflate: bool) -> (Writer, Reader) {
    let hwm = if conflate { 0 } else { hwm };
    let (producer, consumer) = spsc::queue();
    let shared = Arc::new(Shared {
        hwm: AtomicU64::new(hwm),
        latest: Mutex::new(None),
        reader_idle: AtomicBool::new(true),
        writer_waiting: AtomicBool::new(false),
        msgs_read: AtomicU64::new(0),
        direct_sent: AtomicU64::new(0),
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

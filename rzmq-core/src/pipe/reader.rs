//! The reading end of a pipe: frames in order (those of a conflating pipe's newest message,
//! those the owner read from the connection itself first), the read count published to the
//! writer in batches of the low-water mark, and the connection input shared for direct
//! receives (see [`crate::direct::DirectRx`]).

use std::sync::Arc;
use std::time::Instant;

use super::{low_water_mark, Item, Shared, Target, PUBLISH_BYTES};
use crate::byteq;
use crate::direct::{DirectRx, DirectTx};
use crate::msg::{Metadata, Msg};
use crate::spsc;
use crate::sync::{fence, Ordering};

/// The reading end of a pipe.
pub struct Reader {
    pub(super) shared: Arc<Shared>,
    pub(super) q: spsc::Consumer<Msg>,
    pub(super) conflate: bool,
    pub(super) read: u64,
    /// Messages left to read before the count is published to the writer.
    pub(super) until_publish: u64,
    /// Bytes read since the count was last published.
    pub(super) unpublished_bytes: usize,
    pub(super) in_multipart: bool,
    /// The last frame came from the queue and had MORE: the rest of its message follows there.
    pub(super) queue_multipart: bool,
    pub(super) closed: bool,
    /// The remaining frames of a multipart message a conflating pipe held.
    pub(super) batch: std::vec::IntoIter<Msg>,
    /// Frames the reader's owner read from the connection itself (a direct receive): they
    /// follow everything queued before and precede everything queued after.
    pub(super) inbox: std::collections::VecDeque<Msg>,
    /// The connection input last read from `Shared::rx`, as of `rx_gen`.
    pub(super) rx: Option<Arc<DirectRx>>,
    pub(super) rx_gen: u64,
    /// The owner holds `rx` between receives of a stream: a read that finds the inbox empty
    /// reads the connection's next turn itself (see [`crate::direct::DirectRx::hold`]).
    pub(super) rx_held: bool,
    /// The framed lane's reading end.
    pub(super) bq: byteq::ByteConsumer,
    /// This reader asked for the framed lane ([`Reader::request_framed`]).
    pub(super) framed_req: bool,
    /// Everything queued before the writer switched has been read: the lane is next.
    pub(super) framed_active: bool,
    /// Items taken from the queue so far (counted once the lane is asked for).
    pub(super) q_popped: u64,
    /// A queue item taken before this reader learnt it belongs to a marker of the lane.
    pub(super) held: Option<Msg>,
}

impl Reader {
    /// Changes the pipe's high-water mark from the reading side (HWM options set on the reading
    /// socket, inproc binds); a writer blocked on the old mark is woken.
    pub fn set_hwm(&mut self, hwm: u64) {
        self.shared.hwm.store(hwm, Ordering::SeqCst);
        self.until_publish = if hwm == 0 {
            u64::MAX
        } else {
            let lwm = low_water_mark(hwm);
            lwm - self.consumed() % lwm
        };
        self.shared
            .msgs_read
            .store(self.consumed(), Ordering::SeqCst);
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
    pub(super) fn queue_empty(&self) -> bool {
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

    /// Frames queued for this reader now (from the queue and direct receives; the framed lane
    /// is not counted: it carries messages towards a connection, never to a socket).
    pub fn queued_frames(&self) -> u64 {
        (self.q.available() + self.inbox.len()) as u64
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
                if self.shared.msgs_read.load(Ordering::Relaxed) != self.consumed() {
                    // Drained: tell the writer what was read (a writer that waits on a mark
                    // the batching has not reached yet is woken).
                    self.publish_at_mark();
                }
                self.shared.mark_reader_idle();
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
    pub(super) fn took(&mut self, m: &Msg) {
        self.queue_multipart = m.more();
        self.in_multipart = m.more();
        self.unpublished_bytes += m.len();
        if !self.in_multipart {
            self.read += 1;
            // As libzmq, the writer learns of consumed messages in batches of the low-water
            // mark (hwm+1)/2, not one by one: fewer cross-core
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

    /// Messages consumed: read here, and sent directly by the writer (see
    /// `Shared::direct_sent`).
    #[inline]
    pub(super) fn consumed(&self) -> u64 {
        self.read + self.shared.direct_sent.load(Ordering::Acquire)
    }

    /// Tells the writer now of everything read so far (waking it if it waits on the
    /// high-water mark), as an idle reader does: for an owner about to wait a little.
    pub fn publish_now(&mut self) {
        if self.shared.msgs_read.load(Ordering::Relaxed) != self.consumed() {
            self.publish_reads();
        }
    }

    #[cold]
    pub(super) fn publish_reads(&mut self) {
        self.publish_count(self.consumed());
    }

    /// Tells the writer of what was read at the last multiple of the low-water mark, as
    /// libzmq's reader does (`msgs_read % lwm`): a drained reader, a batch of the framed lane
    /// that crossed a multiple. So the writer's view (what it may still write before its
    /// high-water mark, `ZMQ_EVENT_PIPES_STATS`) is libzmq's. A writer stopped at its mark is
    /// still woken by a drained reader: with everything read, it sees less than a mark
    /// (<= the high-water mark) queued. (The 4 MiB rule and `publish_now` tell the exact count.)
    #[cold]
    pub(super) fn publish_at_mark(&mut self) {
        let hwm = self.shared.hwm.load(Ordering::Relaxed);
        let all = self.consumed();
        let n = if hwm == 0 {
            all
        } else {
            all - all % low_water_mark(hwm)
        };
        if n > self.shared.msgs_read.load(Ordering::Relaxed) {
            self.publish_count(n);
        }
    }

    /// Publishes `n` consumed messages; the next batch ends at the next multiple of the mark.
    #[cold]
    fn publish_count(&mut self, n: u64) {
        self.unpublished_bytes = 0;
        let hwm = self.shared.hwm.load(Ordering::Relaxed);
        self.until_publish = if hwm == 0 {
            u64::MAX
        } else {
            let lwm = low_water_mark(hwm);
            lwm - self.consumed() % lwm
        };
        self.shared.msgs_read.store(n, Ordering::Release);
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
        self.shared.mark_reader_idle();
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

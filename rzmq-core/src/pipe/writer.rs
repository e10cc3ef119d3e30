//! The writing end of a pipe: whole-message writes under the high-water mark, multipart
//! messages held until their last frame, the direct send of a message on a granted connection
//! (see [`crate::direct`]), and waking an idle reader.

use std::sync::Arc;
use std::time::Instant;

use super::{Item, Shared, Target};
use crate::byteq;
use crate::direct::{DirectRx, DirectTx, Sent};
use crate::msg::{Metadata, Msg};
use crate::spsc;
use crate::sync::{fence, Ordering};

/// The writing end of a pipe.
pub struct Writer {
    pub(super) shared: Arc<Shared>,
    pub(super) q: spsc::Producer<Msg>,
    pub(super) written: u64,
    pub(super) read_seen: u64,
    pub(super) pending: Vec<Msg>,
    pub(super) closed: bool,
    pub(super) conflate: bool,
    /// The connection output last read from `Shared::direct`, as of `direct_gen`.
    pub(super) direct: Option<Arc<DirectTx>>,
    pub(super) direct_gen: u64,
    /// Messages were written with [`Writer::write_deferred`] and the reader not woken yet.
    pub(super) unwoken: bool,
    /// The framed lane: small frames encoded for the wire (see [`Reader::request_framed`]).
    pub(super) bq: byteq::ByteProducer,
    /// Whether this writer switched to the framed lane.
    pub(super) framed: bool,
}

/// Where a whole message goes ([`Writer::lane`] chooses).
enum Lane {
    /// Sent on the connection by this thread (`Done` or `HandedOver`, never `NotNow`).
    Direct(Sent),
    /// Encoded into the framed lane.
    Framed,
    /// Replaces the newest message of a conflating pipe.
    Conflate,
    /// Queued as a message.
    Queued,
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
        self.read_seen = self
            .read_seen
            .max(self.shared.msgs_read.load(Ordering::Acquire));
        if self.written - self.read_seen < hwm {
            return Ok(());
        }
        self.shared.writer_waiting.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.read_seen = self
            .read_seen
            .max(self.shared.msgs_read.load(Ordering::SeqCst));
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
        match self.lane(&msg) {
            Lane::Direct(Sent::HandedOver) => {
                self.pending.clear();
                self.count_direct();
                self.shared
                    .notify_reader(|t| t.notify.activate_read(t.token));
                false
            }
            // Done: the whole message is in the kernel.
            Lane::Direct(_) => {
                self.pending.clear();
                self.count_direct();
                false
            }
            Lane::Framed => {
                self.write_framed(msg);
                self.written += 1;
                true
            }
            Lane::Conflate => {
                let item = if self.pending.is_empty() {
                    Item::One(msg)
                } else {
                    let mut frames = std::mem::take(&mut self.pending);
                    frames.push(msg);
                    Item::Many(frames)
                };
                // Only the newest message is kept, replacing one the reader has not taken yet.
                *self.shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(item);
                self.written += 1;
                true
            }
            Lane::Queued => {
                // All frames become visible together: the reader never sees half a message.
                if !self.pending.is_empty() {
                    self.push_pending();
                }
                self.q.push(msg);
                self.written += 1;
                true
            }
        }
    }

    /// Counts a message sent directly as written and read (see `Shared::direct_sent`): the
    /// pipe was empty, so the reader has read everything before it.
    #[inline]
    fn count_direct(&mut self) {
        self.written += 1;
        // Known consumed here and now: the reader had read everything (it was idle).
        self.read_seen = self.written;
        // This writer is the counter's only writer: a load and a store, no locked RMW on the
        // direct path.
        let sent = self.shared.direct_sent.load(Ordering::Relaxed);
        self.shared.direct_sent.store(sent + 1, Ordering::Release);
    }

    /// The lane of the whole message held frames + `last`, the one place that chooses it. The
    /// first that applies:
    ///
    /// 1. **direct**: not conflating, the reader's I/O thread installed the connection's output
    ///    (`direct_gen != 0`), it is granted and the pipe is empty (see [`DirectTx::try_send`]):
    ///    this thread writes the message on the socket now, and the choice *is* the send
    ///    (`Done`, or `HandedOver` when the kernel took part and the I/O thread must finish).
    ///    A `NotNow` falls through to the next rule.
    /// 2. **framed**: this writer switched to the framed lane already, or (not conflating) the
    ///    reader asked for it: the message is encoded for the wire into the byte queue.
    /// 3. **conflate**: `ZMQ_CONFLATE`: the message replaces the one the reader has not taken.
    /// 4. **queued**: otherwise, the message queue.
    #[inline(always)]
    fn lane(&mut self, last: &Msg) -> Lane {
        if !self.conflate && self.shared.direct_gen.load(Ordering::Relaxed) != 0 {
            match self.try_direct(last) {
                Sent::NotNow => {}
                sent => return Lane::Direct(sent),
            }
        }
        if self.framed || (!self.conflate && self.shared.framed_req.load(Ordering::Relaxed)) {
            Lane::Framed
        } else if self.conflate {
            Lane::Conflate
        } else {
            Lane::Queued
        }
    }

    /// Queues the held frames of a multipart message, unpublished (its last frame publishes
    /// them); the buffer keeps its capacity for the next message.
    #[cold]
    fn push_pending(&mut self) {
        for f in self.pending.drain(..) {
            self.q.push_unpublished(f);
        }
    }

    /// Writes a one-frame message even at the high-water mark, as libzmq's pipe writes its
    /// hiccup and disconnect messages (`ZMQ_HICCUP_MSG`, `ZMQ_DISCONNECT_MSG`); nothing once
    /// the reader has gone.
    pub fn write_past_hwm(&mut self, msg: Msg) {
        if !self.shared.reader_closed.load(Ordering::Acquire) {
            self.write(msg);
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
        self.written
            - self
                .read_seen
                .max(self.shared.msgs_read.load(Ordering::Acquire))
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

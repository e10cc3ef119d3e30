//! The framed lane of a pipe whose reader writes plain ZMTP: the writer encodes short frames
//! as they go on the wire into a byte queue ([`crate::byteq`]), large ones stay messages behind
//! a one-byte marker, and the reader hands whole runs on as bytes ([`Reader::read_framed`]) or
//! decodes them back into messages.

// A statistics counter: std's atomic, not loom's (which is not `const`).
use std::sync::atomic::AtomicU64;

use super::{Reader, Writer, PUBLISH_BYTES};
use crate::msg::Msg;
use crate::sync::Ordering;
use crate::zmtp::frame::{FLAG_COMMAND, FLAG_LONG, FLAG_MORE};

/// Frames up to this size (ZMTP's short frames) travel the framed lane encoded; larger ones
/// stay messages, with a `FRAMED_MARKER` in the lane where they belong, and the engine
/// encodes them as before (copied up to 8 KiB, by reference above). Encoded bodies are copied
/// twice in user space (into the lane, then into the engine's output), which pays only while
/// the per-message work it saves costs more than the second copy: measured, 1 KiB frames
/// inline ran at 0.8x of the message path.
pub const FRAMED_INLINE_MAX: usize = 255;
/// A framed-lane record of one byte (this bit plus the frame's MORE and COMMAND flags): the
/// frame is the next message of the queue.
pub(super) const FRAMED_MARKER: u8 = 0x80;

/// Messages moved through [`Reader::read_framed`] in this process.
static FRAMED_MOVED: AtomicU64 = AtomicU64::new(0);

/// Messages the framed lane moved as wire bytes or large frames in this process (tests and
/// benchmarks use it to see the lane at work).
pub fn framed_moved() -> u64 {
    FRAMED_MOVED.load(Ordering::Relaxed)
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
pub(super) fn frame_extent(rec: &[u8]) -> (usize, usize) {
    if rec[0] & FLAG_LONG != 0 {
        let mut n = [0u8; 8];
        n.copy_from_slice(&rec[1..9]);
        (9, u64::from_be_bytes(n) as usize)
    } else {
        (2, rec[1] as usize)
    }
}

impl Writer {
    /// Encodes the held frames and `last` into the framed lane (switching to it first if the
    /// reader asked) and publishes them together.
    #[inline(always)]
    pub(super) fn write_framed(&mut self, last: Msg) {
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
}

impl Reader {
    /// Asks the writer to encode small frames for the wire from its next message on (the
    /// framed lane; only for an owner that writes them to a plain ZMTP stream, see
    /// [`Reader::read_framed`]). Everything already queued is read first; [`Reader::read`]
    /// still works afterwards, decoding the lane back into frames.
    pub fn request_framed(&mut self) {
        if self.framed_req || self.conflate {
            return;
        }
        self.framed_req = true;
        // The lane starts at the writer's queue count when it switches (`framed_from`): count
        // the items this end already read through `read`, or the lane would wait for ever for
        // items it took before asking (found by loom, `loom_pipe_framed_lane_switch`).
        self.q_popped = self.q.popped() as u64;
        self.shared.framed_req.store(true, Ordering::Release);
    }

    /// True once [`Reader::request_framed`] was called.
    pub fn framed_requested(&self) -> bool {
        self.framed_req
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
        if self.shared.msgs_read.load(Ordering::Relaxed) != self.consumed() {
            self.publish_at_mark();
        }
        self.shared.mark_reader_idle();
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
    pub(super) fn read_framed_msg(&mut self) -> Option<Msg> {
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
        if self.unpublished_bytes >= PUBLISH_BYTES {
            self.publish_reads();
        } else if self.until_publish > msgs {
            self.until_publish -= msgs;
        } else {
            self.publish_at_mark();
        }
        Some(msgs as usize)
    }
}

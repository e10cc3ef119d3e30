//! The credit ring, sans-IO: one connection's message framing and flow control over RC.
//!
//! Each end owns a registered receive ring that the peer writes into, a 32-byte credit mailbox
//! the peer writes its credits into, and a local mirror of the peer's ring (same size, same
//! offsets) that frames are staged in before an RDMA WRITE copies them across. Nothing here does
//! I/O: the owner feeds events in ([`Ring::on_recv`] for a receive completion, with its
//! immediate; [`Ring::on_send_complete`] for a signaled send completion) and takes work requests
//! out ([`Ring::poll_op`]), which it maps 1:1 onto verbs.
//!
//! Framing. A record is an 8-byte [`RecordHeader`] (`len: u32`, kind, flags, `seq: u16`, in
//! [`crate::wire`]'s byte order) and `len` payload bytes, padded to 8. A record never straddles
//! the end of the ring: when it does not fit, a PAD record fills the rest and the record starts
//! at offset 0. The sequence number (low 16 bits of the record count) lets the receiver detect
//! loss, duplication or reordering.
//!
//! Notification. [`Ring::flush`] covers every record staged since the last flush with one or two
//! RDMA WRITEs (two at the wrap), the last one WRITE_WITH_IMM whose immediate is the byte count:
//! one receive completion per batch. RC ordering guarantees every byte of the batch is in the
//! ring when the completion arrives.
//!
//! Credits. The receiver's credits are three monotonic counters ([`Credits`]): ring bytes
//! consumed, receives posted, rendezvous reads completed (the cumulative FIN of `rndv`).
//! They travel as an RDMA WRITE into the peer's mailbox: piggybacked before a data batch's
//! WRITE_WITH_IMM when there is reverse traffic, otherwise as a standalone inline
//! WRITE_WITH_IMM tagged [`CREDIT_IMM`]. Standalone updates go out in batches: when a quarter of
//! the ring has been consumed, when the ring is drained (so a stalled sender always resumes),
//! when the peer's receive budget is half spent, or when rendezvous reads completed. A sender
//! never writes beyond the consumed count it has seen (it stalls and counts the stall) and never
//! sends more WRITE_WITH_IMMs than the peer has posted receives, keeping the last one for a
//! credit update so that two ends out of receive credit can always unblock each other.
//!
//! Send-queue slots are accounted here too: a WR is signaled every `signal_every` WRs, and the
//! completion of a signaled WR frees the slots of the unsignaled ones before it.

use std::collections::VecDeque;
use std::fmt;

use crate::region::Region;
use crate::wire::{Layout, Reader, WireError, Writer};

/// Bytes of a record header.
pub const REC_HDR: usize = 8;
/// The most send WRs one [`Ring::flush`] posts: the part before the wrap, piggybacked credits,
/// the notifying WRITE_WITH_IMM.
const FLUSH_MAX_WRS: u32 = 3;
/// Immediate-data tag of a credit-only notification (data notifications carry a byte count,
/// always below 2^31).
pub const CREDIT_IMM: u32 = 1 << 31;
/// Bytes of the credit mailbox.
pub const MAILBOX_LEN: usize = 32;
const MAILBOX_MAGIC: u64 = 0x5a4d_5143_5245_4454;

/// What a record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A frame's bytes, inline.
    Data = 1,
    /// A rendezvous descriptor (`rndv::Descriptor`).
    Rndv = 2,
    /// Filler up to the end of the ring.
    Pad = 3,
}

impl Kind {
    /// From its wire byte.
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Data),
            2 => Some(Kind::Rndv),
            3 => Some(Kind::Pad),
            _ => None,
        }
    }
}

/// A record's header ([`REC_HDR`] bytes): payload length, kind, the frame's flags, and the low
/// 16 bits of the record count (the receiver checks them for loss, duplication or reordering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Payload bytes that follow (the record is padded to 8).
    pub len: u32,
    /// What the record carries.
    pub kind: Kind,
    /// The frame's flags (MORE, COMMAND).
    pub flags: u8,
    /// The record's sequence number.
    pub seq: u16,
}

impl Layout for RecordHeader {
    const NAME: &'static str = "ring record header";

    fn encoded_len(&self) -> usize {
        REC_HDR
    }

    /// `len: u32`, kind, flags, `seq: u16`.
    #[inline]
    fn encode(&self, w: &mut Writer<'_>) {
        w.u32(self.len);
        w.u8(self.kind as u8);
        w.u8(self.flags);
        w.u16(self.seq);
    }

    #[inline]
    fn decode(r: &mut Reader<'_>) -> Result<RecordHeader, WireError> {
        let len = r.u32()?;
        let kind = Kind::from_u8(r.u8()?).ok_or(r.invalid("kind"))?;
        Ok(RecordHeader {
            len,
            kind,
            flags: r.u8()?,
            seq: r.u16()?,
        })
    }
}

/// The receiver's flow-control state as the sender sees it; all counters are monotonic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credits {
    /// Ring bytes consumed (including padding).
    pub consumed: u64,
    /// Receives posted in total.
    pub recvs_posted: u64,
    /// Rendezvous reads completed in total (cumulative FIN).
    pub rndv_done: u64,
}

impl Credits {
    fn check(&self) -> u64 {
        self.consumed
            ^ self.recvs_posted.rotate_left(21)
            ^ self.rndv_done.rotate_left(42)
            ^ MAILBOX_MAGIC
    }

    /// The mailbox form ([`Layout`]).
    pub fn encode(&self) -> [u8; MAILBOX_LEN] {
        let mut b = [0u8; MAILBOX_LEN];
        Layout::encode(self, &mut Writer::new(&mut b));
        b
    }

    /// Parses a mailbox; `None` for a torn or never-written one (the check word disagrees).
    pub fn decode(b: &[u8; MAILBOX_LEN]) -> Option<Credits> {
        <Credits as Layout>::decode(&mut Reader::new(<Credits as Layout>::NAME, b)).ok()
    }

    fn max(self, o: Credits) -> Credits {
        Credits {
            consumed: self.consumed.max(o.consumed),
            recvs_posted: self.recvs_posted.max(o.recvs_posted),
            rndv_done: self.rndv_done.max(o.rndv_done),
        }
    }
}

impl Layout for Credits {
    const NAME: &'static str = "credit mailbox";

    fn encoded_len(&self) -> usize {
        MAILBOX_LEN
    }

    /// The three counters and a check word, each a `u64`.
    fn encode(&self, w: &mut Writer<'_>) {
        w.u64(self.consumed);
        w.u64(self.recvs_posted);
        w.u64(self.rndv_done);
        w.u64(self.check());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Credits, WireError> {
        let c = Credits {
            consumed: r.u64()?,
            recvs_posted: r.u64()?,
            rndv_done: r.u64()?,
        };
        if r.u64()? != c.check() {
            return Err(r.invalid("check word"));
        }
        Ok(c)
    }
}

/// Sizes and batching of a ring.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    /// Bytes of our receive ring (a multiple of 8, at least 256, below 2^31).
    pub size: u32,
    /// Receives kept posted for the peer's notifications (at least 4).
    pub recv_depth: u32,
    /// Send-queue slots this connection may use (the QP's `max_send_wr`).
    pub max_send_wr: u32,
    /// Signal one WR in this many (capped at `max_send_wr / 4`).
    pub signal_every: u32,
    /// Flush automatically once this many bytes are staged.
    pub batch_bytes: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            size: 1 << 20,
            recv_depth: 64,
            max_send_wr: 512,
            signal_every: 16,
            batch_bytes: 64 * 1024,
        }
    }
}

/// A work request the ring asks its owner to post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Post this many receives (any buffer; only the immediate matters).
    PostRecv(u32),
    /// RDMA WRITE `len` bytes of the mirror at `off` to the peer's ring at the same offset,
    /// WRITE_WITH_IMM when `imm` is set. A zero-length one without `imm` changes nothing at
    /// the peer: it is posted only for its completion (see [`Ring::sq_slot_unsignaled`]).
    Write {
        /// Offset in the mirror and in the peer's ring.
        off: u32,
        /// Bytes.
        len: u32,
        /// Immediate data (byte count of the batch) for the notifying write.
        imm: Option<u32>,
        /// `Some(n)`: post signaled; its completion frees `n` send-queue slots.
        signal: Option<u32>,
    },
    /// RDMA WRITE these credits (inline, [`Credits::encode`]) into the peer's mailbox,
    /// WRITE_WITH_IMM [`CREDIT_IMM`] when standalone.
    Credits {
        /// The counters.
        credits: Credits,
        /// Immediate data for a standalone update.
        imm: Option<u32>,
        /// As for [`Op::Write`].
        signal: Option<u32>,
    },
}

/// Ring errors: a frame too large for the ring, or a peer breaking the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// The payload exceeds [`Ring::max_payload`] (send it by rendezvous).
    TooLarge {
        /// Payload length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The peer violated the protocol (overran the ring, bad record); the connection must close.
    Protocol(&'static str),
    /// A record header that does not decode; the connection must close.
    Wire(WireError),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the ring's {max}")
            }
            RingError::Protocol(why) => write!(f, "ring protocol violation: {why}"),
            RingError::Wire(e) => write!(f, "ring protocol violation: {e}"),
        }
    }
}

impl std::error::Error for RingError {}

impl From<WireError> for RingError {
    fn from(e: WireError) -> RingError {
        RingError::Wire(e)
    }
}

/// A received record, borrowed from the ring until [`Ring::advance`].
#[derive(Debug)]
pub struct Record<'a> {
    /// Data or rendezvous descriptor.
    pub kind: Kind,
    /// The frame's flags (MORE, COMMAND).
    pub flags: u8,
    /// Payload.
    pub data: &'a [u8],
}

/// Counters (per connection).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Records sent (excluding padding).
    pub msgs_tx: u64,
    /// Payload bytes sent.
    pub bytes_tx: u64,
    /// Records received.
    pub msgs_rx: u64,
    /// Payload bytes received.
    pub bytes_rx: u64,
    /// Times a send found no ring space (one per stall episode).
    pub credit_stalls: u64,
    /// Times a flush found no receive credit at the peer.
    pub notify_stalls: u64,
    /// Times work waited for send-queue slots.
    pub sq_stalls: u64,
    /// Data notifications (WRITE_WITH_IMM) sent.
    pub notifies: u64,
    /// Standalone credit updates sent.
    pub credit_msgs: u64,
    /// Credit updates piggybacked on data.
    pub credit_piggybacked: u64,
}

fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

/// One connection's ring state, both directions.
pub struct Ring {
    cfg: RingConfig,
    signal_every: u32,
    // transmit side
    mirror: Region,
    peer_size: u64,
    head: u64,
    flushed: u64,
    seq_tx: u16,
    peer: Credits,
    notifies_used: u64,
    stalled: bool,
    notify_stalled: bool,
    // receive side
    ring: Region,
    mailbox: Region,
    tail: u64,
    avail: u64,
    cur: Option<u64>,
    seq_rx: u16,
    recvs_posted: u64,
    recvs_done: u64,
    rndv_done: u64,
    advertised: Credits,
    reposts: u32,
    // send queue
    sq_outstanding: u32,
    unsignaled: u32,
    out: VecDeque<Op>,
    stats: RingStats,
}

impl Ring {
    /// A ring whose own receive ring has `cfg.size` bytes; the peer's ring size and initial
    /// receive count come from the connection setup.
    pub fn new(cfg: RingConfig, peer_size: u32, peer_recv_depth: u32) -> Result<Ring, RingError> {
        let ring = Region::new(cfg.size as usize);
        let mailbox = Region::new(MAILBOX_LEN);
        Ring::with_regions(cfg, ring, mailbox, peer_size, peer_recv_depth)
    }

    /// As [`Ring::new`] over an already allocated (and registered, and advertised) receive ring
    /// of `cfg.size` bytes and mailbox of [`MAILBOX_LEN`] bytes.
    pub fn with_regions(
        cfg: RingConfig,
        ring: Region,
        mailbox: Region,
        peer_size: u32,
        peer_recv_depth: u32,
    ) -> Result<Ring, RingError> {
        if ring.len() != cfg.size as usize || mailbox.len() < MAILBOX_LEN {
            return Err(RingError::Protocol(
                "region sizes do not match the configuration",
            ));
        }
        for s in [cfg.size, peer_size] {
            if s < 256 || s % 8 != 0 || s >= 1 << 31 {
                return Err(RingError::Protocol(
                    "ring size must be 256..2^31, multiple of 8",
                ));
            }
        }
        if cfg.recv_depth < 4 || peer_recv_depth < 4 || cfg.max_send_wr < 8 {
            return Err(RingError::Protocol(
                "need 4 receives and 8 send slots at least",
            ));
        }
        let mut out = VecDeque::new();
        out.push_back(Op::PostRecv(cfg.recv_depth));
        let posted = u64::from(cfg.recv_depth);
        Ok(Ring {
            signal_every: cfg.signal_every.clamp(1, cfg.max_send_wr / 4),
            cfg,
            mirror: Region::new(peer_size as usize),
            peer_size: u64::from(peer_size),
            head: 0,
            flushed: 0,
            seq_tx: 0,
            peer: Credits {
                consumed: 0,
                recvs_posted: u64::from(peer_recv_depth),
                rndv_done: 0,
            },
            notifies_used: 0,
            stalled: false,
            notify_stalled: false,
            ring,
            mailbox,
            tail: 0,
            avail: 0,
            cur: None,
            seq_rx: 0,
            recvs_posted: posted,
            recvs_done: 0,
            rndv_done: 0,
            advertised: Credits {
                consumed: 0,
                recvs_posted: posted,
                rndv_done: 0,
            },
            reposts: 0,
            sq_outstanding: 0,
            unsignaled: 0,
            out,
            stats: RingStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }

    /// Our receive ring (register with LOCAL_WRITE | REMOTE_WRITE; the peer writes it).
    pub fn ring_region(&self) -> &Region {
        &self.ring
    }

    /// Our credit mailbox (register with LOCAL_WRITE | REMOTE_WRITE; the peer writes it).
    pub fn mailbox_region(&self) -> &Region {
        &self.mailbox
    }

    /// The mirror of the peer's ring (register for local reads; the NIC reads it).
    pub fn mirror_region(&self) -> &Region {
        &self.mirror
    }

    /// Largest payload a record can carry: half the peer's ring minus the header, so that a
    /// record plus the padding before it always fits an empty ring.
    pub fn max_payload(&self) -> usize {
        (self.peer_size / 2) as usize - REC_HDR
    }

    /// Counters.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// True when the last [`Ring::send`] found no room (cleared by the next success).
    pub fn is_stalled(&self) -> bool {
        self.stalled
    }

    /// The peer's credits as last seen (its `rndv_done` is the FIN count of our rendezvous).
    pub fn peer_credits(&self) -> Credits {
        self.peer
    }

    /// Bytes sent (or staged) that the peer has not yet reported consumed.
    pub fn unconsumed(&self) -> u64 {
        self.head - self.peer.consumed
    }

    /// Bytes staged but not yet covered by a notification.
    pub fn unflushed(&self) -> u64 {
        self.head - self.flushed
    }

    // ----- transmit -----------------------------------------------------------------------

    /// Whether [`Ring::send`] of a `len`-byte payload would find room now.
    pub fn has_room(&self, len: usize) -> bool {
        if len > self.max_payload() {
            return false;
        }
        let rec = align8((REC_HDR + len) as u64);
        let pos = self.head % self.peer_size;
        let to_end = self.peer_size - pos;
        let need = if rec > to_end { to_end + rec } else { rec };
        self.head - self.peer.consumed + need <= self.peer_size
    }

    /// Takes a send-queue slot for an unsignaled WR the owner posts itself (memory-window binds
    /// and invalidations): a later signaled WR covers it. False when that would leave fewer
    /// slots than the largest flush takes (`FLUSH_MAX_WRS`): those stay for the next flush,
    /// whose signaled WR frees the unsignaled slots. (Leaving one slot was not enough: a flush
    /// that wraps or carries credits needs two or three, and with nothing signaled in flight
    /// the queue stayed full for good.)
    ///
    /// When it refuses and no signaled WR is in flight to free the unsignaled slots (nothing
    /// else may be queued: an owner with only rendezvous frames to send would wait for good),
    /// it queues a signaled zero-length RDMA WRITE for the owner to post ([`Ring::poll_op`]):
    /// its completion frees them.
    pub fn sq_slot_unsignaled(&mut self) -> bool {
        if self.sq_outstanding + 1 + FLUSH_MAX_WRS > self.cfg.max_send_wr {
            self.stats.sq_stalls += 1;
            if self.unsignaled > 0 && self.sq_outstanding == self.unsignaled {
                // Every outstanding slot is unsignaled and uncovered (a signaled WR in flight
                // would hold slots beyond `unsignaled`); FLUSH_MAX_WRS >= 1 slots are free.
                let signal = self.slot(true);
                self.out.push_back(Op::Write {
                    off: 0,
                    len: 0,
                    imm: None,
                    signal,
                });
            }
            return false;
        }
        self.sq_outstanding += 1;
        self.unsignaled += 1;
        true
    }

    /// Stages one record in the mirror. `Ok(false)`: no ring space until the peer returns
    /// credits (the stall is counted); nothing was written and the caller keeps its frame.
    pub fn send(&mut self, kind: Kind, flags: u8, data: &[u8]) -> Result<bool, RingError> {
        let max = self.max_payload();
        if data.len() > max {
            return Err(RingError::TooLarge {
                len: data.len(),
                max,
            });
        }
        debug_assert!(kind != Kind::Pad);
        let rec = align8((REC_HDR + data.len()) as u64);
        let pos = self.head % self.peer_size;
        let to_end = self.peer_size - pos;
        let need = if rec > to_end { to_end + rec } else { rec };
        let used = self.head - self.peer.consumed;
        if used + need > self.peer_size {
            if !self.stalled {
                self.stalled = true;
                self.stats.credit_stalls += 1;
            }
            return Ok(false);
        }
        self.stalled = false;
        if rec > to_end {
            self.put_header(pos, (to_end as usize - REC_HDR) as u32, Kind::Pad, 0);
            self.head += to_end;
        }
        let pos = self.head % self.peer_size;
        self.put_header(pos, data.len() as u32, kind, flags);
        // SAFETY: this range of the mirror was last sent by a WRITE the peer has executed and
        // consumed (the credit check above), so the NIC no longer reads it.
        unsafe { self.mirror.write(pos as usize + REC_HDR, data) };
        self.head += rec;
        self.stats.msgs_tx += 1;
        self.stats.bytes_tx += data.len() as u64;
        if self.unflushed() >= u64::from(self.cfg.batch_bytes) {
            self.flush();
        }
        Ok(true)
    }

    fn put_header(&mut self, pos: u64, len: u32, kind: Kind, flags: u8) {
        let mut h = [0u8; REC_HDR];
        let hdr = RecordHeader {
            len,
            kind,
            flags,
            seq: self.seq_tx,
        };
        hdr.encode(&mut Writer::new(&mut h));
        self.seq_tx = self.seq_tx.wrapping_add(1);
        // SAFETY: as in `send`: the range is free (credited) and not read by the NIC.
        unsafe { self.mirror.write(pos as usize, &h) };
    }

    /// Covers the staged records with WRITEs and one WRITE_WITH_IMM (doorbell batching: call it
    /// once per burst). Does nothing while the peer has no receive credit or the send queue is
    /// full; call again after [`Ring::on_recv`] / [`Ring::on_send_complete`].
    pub fn flush(&mut self) {
        let total = self.head - self.flushed;
        if total == 0 {
            return;
        }
        if self.peer.recvs_posted - self.notifies_used < 2 {
            if !self.notify_stalled {
                self.notify_stalled = true;
                self.stats.notify_stalls += 1;
            }
            return;
        }
        self.notify_stalled = false;
        let start = self.flushed % self.peer_size;
        let wrap = start + total > self.peer_size;
        let piggy = self.credits_changed();
        let wrs = 1 + u32::from(wrap) + u32::from(piggy);
        debug_assert!(wrs <= FLUSH_MAX_WRS);
        if self.sq_outstanding + wrs > self.cfg.max_send_wr {
            self.stats.sq_stalls += 1;
            return;
        }
        let mut off = start;
        let mut left = total;
        if wrap {
            let first = self.peer_size - start;
            let signal = self.slot(false);
            self.out.push_back(Op::Write {
                off: off as u32,
                len: first as u32,
                imm: None,
                signal,
            });
            off = 0;
            left -= first;
        }
        if piggy {
            let credits = self.current_credits();
            let signal = self.slot(false);
            self.out.push_back(Op::Credits {
                credits,
                imm: None,
                signal,
            });
            self.advertised = credits;
            self.stats.credit_piggybacked += 1;
        }
        let signal = self.slot(false);
        self.out.push_back(Op::Write {
            off: off as u32,
            len: left as u32,
            imm: Some(total as u32),
            signal,
        });
        self.notifies_used += 1;
        self.stats.notifies += 1;
        self.flushed = self.head;
    }

    /// Takes a send-queue slot for a WR the owner posts itself (rendezvous READs): `None` when
    /// the queue is full, else whether to signal it (`Some(n)`: signaled, frees `n` slots).
    /// `force_signal` for WRs whose completion the owner needs.
    pub fn sq_slot(&mut self, force_signal: bool) -> Option<Option<u32>> {
        if self.sq_outstanding + 1 > self.cfg.max_send_wr {
            self.stats.sq_stalls += 1;
            return None;
        }
        Some(self.slot(force_signal))
    }

    /// Send-queue slots free now.
    pub fn sq_available(&self) -> u32 {
        self.cfg.max_send_wr.saturating_sub(self.sq_outstanding)
    }

    fn slot(&mut self, force: bool) -> Option<u32> {
        self.sq_outstanding += 1;
        self.unsignaled += 1;
        if force || self.unsignaled >= self.signal_every {
            let n = self.unsignaled;
            self.unsignaled = 0;
            Some(n)
        } else {
            None
        }
    }

    /// A signaled send WR completed successfully; it covered `n` slots.
    pub fn on_send_complete(&mut self, n: u32) {
        self.sq_outstanding = self.sq_outstanding.saturating_sub(n);
    }

    // ----- receive ------------------------------------------------------------------------

    /// A receive completed with immediate `imm` (a data batch's byte count or [`CREDIT_IMM`]).
    /// Reads the mailbox for piggybacked credits and schedules the receive's replacement.
    pub fn on_recv(&mut self, imm: u32) -> Result<(), RingError> {
        self.recvs_done += 1;
        if self.recvs_done > self.recvs_posted {
            return Err(RingError::Protocol("more notifications than receives"));
        }
        self.reposts += 1;
        if imm & CREDIT_IMM == 0 {
            self.avail += u64::from(imm);
            if self.avail - self.tail > u64::from(self.cfg.size) {
                return Err(RingError::Protocol("peer overran the ring"));
            }
        }
        self.read_mailbox();
        Ok(())
    }

    /// Re-reads the credit mailbox (also done by [`Ring::on_recv`]).
    pub fn read_mailbox(&mut self) {
        let mut b = [0u8; MAILBOX_LEN];
        // SAFETY: the mailbox is MAILBOX_LEN bytes, page-aligned (a Region); volatile reads of
        // possibly concurrently DMA-written words are what we want (a torn read fails the check
        // and is ignored: the writer's notification follows, and we read again then).
        unsafe {
            let p = self.mailbox.as_ptr() as *const u64;
            for (i, w) in b.chunks_exact_mut(8).enumerate() {
                w.copy_from_slice(&std::ptr::read_volatile(p.add(i)).to_ne_bytes());
            }
        }
        if let Some(c) = Credits::decode(&b) {
            if c.consumed > self.head {
                // A peer claiming to have consumed more than we sent is broken; ignore it.
                return;
            }
            self.peer = self.peer.max(c);
        }
    }

    /// The next received record, skipping padding. Call [`Ring::advance`] when done with it.
    pub fn peek(&mut self) -> Result<Option<Record<'_>>, RingError> {
        loop {
            if self.tail == self.avail {
                return Ok(None);
            }
            let size = u64::from(self.cfg.size);
            let pos = self.tail % size;
            let left = self.avail - self.tail;
            if left < REC_HDR as u64 || size - pos < REC_HDR as u64 {
                return Err(RingError::Protocol("truncated record header"));
            }
            // SAFETY: bytes tail..avail were notified and are not rewritten before we return
            // their credit (the peer's contract, checked by on_recv's overrun test).
            let h = unsafe { self.ring.slice(pos as usize, REC_HDR) };
            let RecordHeader {
                len,
                kind,
                flags,
                seq,
            } = RecordHeader::decode(&mut Reader::new(RecordHeader::NAME, h))?;
            let len = u64::from(len);
            if seq != self.seq_rx {
                return Err(RingError::Protocol("record sequence gap"));
            }
            let rec = align8(REC_HDR as u64 + len);
            if rec > left || rec > size - pos {
                return Err(RingError::Protocol("record beyond notified bytes"));
            }
            if kind == Kind::Pad {
                if pos + rec != size {
                    return Err(RingError::Protocol("padding not at the end"));
                }
                self.tail += rec;
                self.seq_rx = self.seq_rx.wrapping_add(1);
                continue;
            }
            self.cur = Some(rec);
            // SAFETY: as above, within tail..avail.
            let data = unsafe { self.ring.slice(pos as usize + REC_HDR, len as usize) };
            return Ok(Some(Record { kind, flags, data }));
        }
    }

    /// Consumes the record returned by the last [`Ring::peek`]; its bytes become credit.
    pub fn advance(&mut self) {
        if let Some(rec) = self.cur.take() {
            self.stats.msgs_rx += 1;
            self.stats.bytes_rx += rec - REC_HDR as u64;
            self.tail += rec;
            self.seq_rx = self.seq_rx.wrapping_add(1);
        }
    }

    /// One more rendezvous read completed (cumulative FIN to the peer).
    pub fn rndv_completed(&mut self, n: u64) {
        self.rndv_done += n;
    }

    fn current_credits(&self) -> Credits {
        Credits {
            consumed: self.tail,
            recvs_posted: self.recvs_posted,
            rndv_done: self.rndv_done,
        }
    }

    fn credits_changed(&self) -> bool {
        self.current_credits() != self.advertised
    }

    fn standalone_credits_due(&self) -> bool {
        let cur = self.current_credits();
        let unadvertised = cur.consumed - self.advertised.consumed;
        // Saturating: a peer that sent more notifications than we advertised (it may not, but
        // on_recv only bounds them by what we posted) has no budget left, and must not wrap it
        // (found by fuzz/fuzz_targets/rdma_ring.rs).
        let peer_budget = self.advertised.recvs_posted.saturating_sub(self.recvs_done);
        let new_recvs = cur.recvs_posted - self.advertised.recvs_posted;
        unadvertised >= u64::from(self.cfg.size / 4)
            || (self.tail == self.avail && unadvertised > 0)
            // Half the peer's receive budget spent. With recv_depth >= 4 one incoming update
            // cannot bring a freshly restored budget (recv_depth) down to this threshold, so
            // updates never ping-pong.
            || (peer_budget <= u64::from(self.cfg.recv_depth / 2) && new_recvs > 0)
            || cur.rndv_done > self.advertised.rndv_done
    }

    /// The next work request to post, or `None`. Receives are replenished first; a standalone
    /// credit update is generated here when one is due and the peer can take it.
    pub fn poll_op(&mut self) -> Option<Op> {
        if self.reposts > 0 {
            let n = self.reposts;
            self.reposts = 0;
            self.recvs_posted += u64::from(n);
            return Some(Op::PostRecv(n));
        }
        if self.out.is_empty()
            && self.standalone_credits_due()
            && self.peer.recvs_posted > self.notifies_used
            && self.sq_outstanding < self.cfg.max_send_wr
        {
            let credits = self.current_credits();
            let signal = self.slot(false);
            self.out.push_back(Op::Credits {
                credits,
                imm: Some(CREDIT_IMM),
                signal,
            });
            self.notifies_used += 1;
            self.advertised = credits;
            self.stats.credit_msgs += 1;
        }
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn credits_round_trip_and_torn_reads() {
        let c = Credits {
            consumed: 12345,
            recvs_posted: 99,
            rndv_done: 7,
        };
        let mut b = c.encode();
        assert_eq!(Credits::decode(&b), Some(c));
        b[3] ^= 1;
        assert_eq!(Credits::decode(&b), None);
        assert_eq!(Credits::decode(&[0; MAILBOX_LEN]), None);
    }

    #[test]
    fn too_large_and_pad_at_wrap() {
        let cfg = RingConfig {
            size: 256,
            ..RingConfig::default()
        };
        let mut r = Ring::new(cfg, 256, 4).unwrap();
        assert_eq!(r.max_payload(), 120);
        assert!(matches!(
            r.send(Kind::Data, 0, &[0; 121]),
            Err(RingError::TooLarge { len: 121, max: 120 })
        ));
        assert_eq!(r.poll_op(), Some(Op::PostRecv(64)));
        assert!(r.send(Kind::Data, 0, &[1; 100]).unwrap()); // 112 bytes
        assert!(r.send(Kind::Data, 0, &[2; 100]).unwrap()); // 224
        assert!(!r.send(Kind::Data, 0, &[3; 100]).unwrap()); // needs pad 32 + 112
        assert_eq!(r.stats().credit_stalls, 1);
        r.flush();
        assert_eq!(
            r.poll_op(),
            Some(Op::Write {
                off: 0,
                len: 224,
                imm: Some(224),
                signal: None
            })
        );
    }

    // ----- the two-ended model ---------------------------------------------------------

    /// One direction of the simulated wire: WRs in posting order, executed in order (RC).
    #[derive(Default)]
    struct Wire {
        q: VecDeque<Op>,
        /// Bytes of ring stream written so far (to check for overwrites).
        written: u64,
    }

    struct End {
        ring: Ring,
        /// Receives posted and not yet consumed (the NIC's receive queue).
        rq: u64,
        /// Receive completions not yet handed to the ring (immediates).
        rcq: VecDeque<u32>,
        /// Signaled send completions not yet handed to the ring.
        scq: VecDeque<u32>,
        next_tx: u64,
        next_rx: u64,
        pending: Option<Vec<u8>>,
        /// Unsignaled WRs of the owner's own (memory-window binds) waiting for a slot, as a
        /// rendezvous frame waits in the data path.
        owned_pending: u32,
    }

    fn payload(seq: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len.max(8)];
        v[..8].copy_from_slice(&seq.to_le_bytes());
        for (i, x) in v.iter_mut().enumerate().skip(8) {
            *x = (seq as usize * 31 + i) as u8;
        }
        v.truncate(len.max(8));
        v
    }

    impl End {
        fn new(cfg: RingConfig, peer: RingConfig) -> End {
            End {
                ring: Ring::new(cfg, peer.size, peer.recv_depth).unwrap(),
                rq: 0,
                rcq: VecDeque::new(),
                scq: VecDeque::new(),
                next_tx: 0,
                next_rx: 0,
                pending: None,
                owned_pending: 0,
            }
        }

        /// Takes slots for the owner's waiting unsignaled WRs; true when none is left waiting.
        fn try_owned(&mut self) -> bool {
            while self.owned_pending > 0 && self.ring.sq_slot_unsignaled() {
                self.owned_pending -= 1;
            }
            self.owned_pending == 0
        }

        /// Moves the ring's ops onto the wire (posting).
        fn post(&mut self, wire: &mut Wire) {
            while let Some(op) = self.ring.poll_op() {
                match op {
                    Op::PostRecv(n) => self.rq += u64::from(n),
                    op => wire.q.push_back(op),
                }
            }
        }

        fn try_send(&mut self, len: usize) -> bool {
            let len = len.clamp(8, self.ring.max_payload());
            let m = self
                .pending
                .take()
                .unwrap_or_else(|| payload(self.next_tx, len));
            if self.ring.send(Kind::Data, 0, &m).unwrap() {
                self.next_tx += 1;
                true
            } else {
                self.pending = Some(m);
                false
            }
        }

        fn consume(&mut self, max: usize) {
            for _ in 0..max {
                let Some(r) = self.ring.peek().unwrap() else {
                    return;
                };
                let seq = u64::from_le_bytes(r.data[..8].try_into().unwrap());
                assert_eq!(seq, self.next_rx, "loss, duplication or reordering");
                assert_eq!(r.data, &payload(seq, r.data.len())[..], "corrupted");
                self.next_rx += 1;
                self.ring.advance();
            }
        }

        fn completions(&mut self, max: usize) {
            for _ in 0..max {
                if let Some(imm) = self.rcq.pop_front() {
                    self.ring.on_recv(imm).unwrap();
                }
                if let Some(n) = self.scq.pop_front() {
                    self.ring.on_send_complete(n);
                }
            }
        }
    }

    /// Executes the next WR of `from`'s wire at `to`, as an RC NIC would.
    fn execute(from: &mut End, wire: &mut Wire, to: &mut End) -> bool {
        let Some(op) = wire.q.pop_front() else {
            return false;
        };
        let (imm, signal) = match op {
            Op::Write {
                off,
                len,
                imm,
                signal,
            } => {
                // No overwrite: everything the write covers must be free at the receiver.
                let end_stream = wire.written + u64::from(len);
                assert!(
                    end_stream - to.ring.tail <= u64::from(to.ring.cfg.size),
                    "sender overwrote unconsumed ring bytes"
                );
                wire.written = end_stream;
                // SAFETY: both regions are `len` bytes long at `off` (the ring sizes match).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        from.ring.mirror.as_ptr().add(off as usize),
                        to.ring.ring.as_ptr().add(off as usize),
                        len as usize,
                    )
                };
                (imm, signal)
            }
            Op::Credits {
                credits,
                imm,
                signal,
            } => {
                // SAFETY: the mailbox holds MAILBOX_LEN bytes.
                unsafe { to.ring.mailbox.write(0, &credits.encode()) };
                (imm, signal)
            }
            Op::PostRecv(_) => unreachable!(),
        };
        if let Some(imm) = imm {
            assert!(to.rq > 0, "RNR: notification without a posted receive");
            to.rq -= 1;
            to.rcq.push_back(imm);
        }
        if let Some(n) = signal {
            from.scq.push_back(n);
        }
        true
    }

    #[derive(Debug, Clone)]
    enum Ev {
        Send(bool, usize),
        Flush(bool),
        Exec(bool),
        Complete(bool, usize),
        Consume(bool, usize),
        /// The owner posts an unsignaled WR of its own (a memory-window bind or invalidation):
        /// it takes a slot that only a later signaled WR's completion frees.
        Unsignaled(bool),
    }

    fn ev() -> impl Strategy<Value = Ev> {
        let size = prop_oneof![1usize..64, 8usize..600, Just(200usize)];
        prop_oneof![
            3 => (any::<bool>(), size).prop_map(|(s, n)| Ev::Send(s, n)),
            1 => any::<bool>().prop_map(Ev::Flush),
            4 => any::<bool>().prop_map(Ev::Exec),
            2 => (any::<bool>(), 1usize..8).prop_map(|(s, n)| Ev::Complete(s, n)),
            2 => (any::<bool>(), 1usize..8).prop_map(|(s, n)| Ev::Consume(s, n)),
            1 => any::<bool>().prop_map(Ev::Unsignaled),
        ]
    }

    fn run(evs: Vec<Ev>, cfg: RingConfig) {
        let mut ends = [End::new(cfg, cfg), End::new(cfg, cfg)];
        let mut wires = [Wire::default(), Wire::default()];
        let mut sizes = [200usize, 200];
        let step = |ends: &mut [End; 2], wires: &mut [Wire; 2], i: usize, e: &Ev| {
            let (a, b) = ends.split_at_mut(1);
            let (me, other) = if i == 0 {
                (&mut a[0], &mut b[0])
            } else {
                (&mut b[0], &mut a[0])
            };
            match *e {
                Ev::Send(_, n) => {
                    me.try_send(n);
                }
                Ev::Flush(_) => me.ring.flush(),
                Ev::Exec(_) => {
                    execute(me, &mut wires[i], other);
                }
                Ev::Complete(_, n) => me.completions(n),
                Ev::Consume(_, n) => me.consume(n),
                Ev::Unsignaled(_) => {
                    me.owned_pending += 1;
                    me.try_owned();
                }
            }
            me.post(&mut wires[i]);
            other.post(&mut wires[1 - i]);
        };
        for e in &evs {
            let side = match *e {
                Ev::Send(s, n) => {
                    sizes[usize::from(s)] = n;
                    s
                }
                Ev::Flush(s)
                | Ev::Exec(s)
                | Ev::Complete(s, _)
                | Ev::Consume(s, _)
                | Ev::Unsignaled(s) => s,
            };
            step(&mut ends, &mut wires, usize::from(side), e);
        }
        // Liveness: with everything delivered and consumed, all sends complete.
        for _ in 0..10_000 {
            let mut idle = true;
            for i in 0..2 {
                if ends[i].pending.is_some() {
                    let n = sizes[i];
                    idle &= !ends[i].try_send(n);
                }
                if ends[i].owned_pending > 0 {
                    idle &= !ends[i].try_owned();
                }
                step(&mut ends, &mut wires, i, &Ev::Flush(false));
                while !wires[i].q.is_empty() {
                    idle = false;
                    step(&mut ends, &mut wires, i, &Ev::Exec(false));
                }
                if !ends[i].rcq.is_empty() || !ends[i].scq.is_empty() {
                    idle = false;
                }
                step(&mut ends, &mut wires, i, &Ev::Complete(false, 64));
                step(&mut ends, &mut wires, i, &Ev::Consume(false, 1000));
            }
            if idle
                && ends
                    .iter()
                    .all(|e| e.pending.is_none() && e.owned_pending == 0 && e.ring.unflushed() == 0)
                && wires.iter().all(|w| w.q.is_empty())
            {
                break;
            }
        }
        for i in 0..2 {
            if ends[i].pending.is_some() {
                for (j, e) in ends.iter().enumerate() {
                    let r = &e.ring;
                    eprintln!(
                        "end {j}: head {} flushed {} peer {:?} used {} | tail {} avail {} posted {} done {} adv {:?} sq {} rq {} rcq {:?}",
                        r.head, r.flushed, r.peer, r.notifies_used, r.tail, r.avail,
                        r.recvs_posted, r.recvs_done, r.advertised, r.sq_outstanding, e.rq, e.rcq
                    );
                }
            }
            assert!(ends[i].pending.is_none(), "sender {i} still stalled");
            assert_eq!(
                ends[i].owned_pending, 0,
                "sender {i}: unsignaled WRs of its own never got a slot"
            );
            assert_eq!(ends[i].ring.unflushed(), 0, "sender {i} never flushed");
            assert_eq!(
                ends[1 - i].next_rx,
                ends[i].next_tx,
                "receiver {} lost messages",
                1 - i
            );
        }
    }

    #[test]
    fn unsignaled_owner_wrs_never_hold_the_send_queue() {
        // b holds send-queue slots for unsignaled WRs of its own (memory-window binds and
        // invalidations) until it refuses more; nothing signaled is in flight. Its next flush
        // carries piggybacked credits (a receive was reposted) and wraps around the peer's ring:
        // three WRs. It must still go out, or the unsignaled slots, which only a later signaled
        // WR frees, would hold the queue forever.
        let cfg = RingConfig {
            size: 256,
            recv_depth: 8,
            max_send_wr: 8,
            signal_every: 2,
            batch_bytes: 100_000,
        };
        let mut ends = [End::new(cfg, cfg), End::new(cfg, cfg)];
        let mut wires = [Wire::default(), Wire::default()];
        let (a, b) = ends.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut b[0]);
        a.post(&mut wires[0]);
        b.post(&mut wires[1]);
        // b moves its head near the end of a's ring; a consumes and credits it back.
        for _ in 0..2 {
            assert!(b.try_send(88)); // 96-byte records
            b.ring.flush();
            b.post(&mut wires[1]);
            while execute(b, &mut wires[1], a) {}
            a.completions(64);
            b.completions(64);
            a.consume(100);
            a.post(&mut wires[0]);
            while execute(a, &mut wires[0], b) {}
            b.completions(64);
            b.post(&mut wires[1]);
            while execute(b, &mut wires[1], a) {}
            b.completions(64);
            a.completions(64);
            a.post(&mut wires[0]);
        }
        // a notifies b once; b reposts the receive (its credits change) but keeps the record.
        assert!(a.try_send(8));
        a.ring.flush();
        a.post(&mut wires[0]);
        while execute(a, &mut wires[0], b) {}
        b.completions(64);
        a.completions(64);
        b.post(&mut wires[1]);
        assert!(b.ring.credits_changed());
        assert!(!b.ring.standalone_credits_due());
        while b.ring.sq_slot_unsignaled() {}
        // Refused with nothing signaled in flight: a signaled zero-length WRITE goes out to
        // free the unsignaled slots.
        b.post(&mut wires[1]);
        assert_eq!(wires[1].q.len(), 1);
        assert!(matches!(
            wires[1].q[0],
            Op::Write {
                len: 0,
                imm: None,
                signal: Some(_),
                ..
            }
        ));
        assert!(
            b.try_send(88),
            "the record wraps (64 bytes left before the end)"
        );
        b.ring.flush();
        b.post(&mut wires[1]);
        while execute(b, &mut wires[1], a) {}
        b.completions(64);
        b.ring.flush();
        b.post(&mut wires[1]);
        assert_eq!(b.ring.unflushed(), 0, "the flush went out");
        assert_eq!(
            wires[1].q.len(),
            3,
            "pad-and-record split in two WRITEs, plus credits"
        );
        assert!(matches!(wires[1].q[1], Op::Credits { imm: None, .. }));
        while execute(b, &mut wires[1], a) {}
        a.completions(64);
        a.consume(100);
        assert_eq!(a.next_rx, b.next_tx, "the record arrived");
        // The owner's slots are free again.
        b.completions(64);
        assert!(b.ring.sq_slot_unsignaled());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        #[test]
        fn no_overwrite_loss_duplication_or_reordering(
            evs in proptest::collection::vec(ev(), 1..400),
            size in prop_oneof![Just(256u32), Just(512), Just(1024), Just(4096)],
            depth in 4u32..9,
            sq in 8u32..20,
            sig in 1u32..6,
            batch in prop_oneof![Just(1u32), Just(64), Just(100_000)],
        ) {
            let cfg = RingConfig {
                size,
                recv_depth: depth,
                max_send_wr: sq,
                signal_every: sig,
                batch_bytes: batch,
            };
            run(evs, cfg);
        }

        #[test]
        fn record_header_round_trips(len in any::<u32>(), kind in 1u8..4, flags in any::<u8>(),
                                     seq in any::<u16>()) {
            let h = RecordHeader { len, kind: Kind::from_u8(kind).unwrap(), flags, seq };
            let b = crate::wire::to_vec(&h);
            prop_assert_eq!(b.len(), REC_HDR);
            prop_assert_eq!(crate::wire::from_bytes::<RecordHeader>(&b), Ok(h));
        }

        #[test]
        fn record_header_decodes_any_bytes_without_panic(b in proptest::collection::vec(any::<u8>(), 0..16)) {
            match crate::wire::from_bytes::<RecordHeader>(&b) {
                // Whatever decodes is exactly the header its bytes encode.
                Ok(h) => prop_assert_eq!(crate::wire::to_vec(&h), b),
                Err(e) => prop_assert!(b.len() != REC_HDR || !(1..4).contains(&b[4]), "{e}"),
            }
        }

        #[test]
        fn credits_round_trip(consumed in any::<u64>(), recvs_posted in any::<u64>(),
                              rndv_done in any::<u64>()) {
            let c = Credits { consumed, recvs_posted, rndv_done };
            prop_assert_eq!(Credits::decode(&c.encode()), Some(c));
        }

        #[test]
        fn mailbox_decodes_any_bytes_without_panic(b in any::<[u8; MAILBOX_LEN]>(), flip in 0usize..MAILBOX_LEN * 8) {
            // A mailbox that decodes re-encodes to its bytes; a torn one (a bit flipped) fails.
            if let Some(c) = Credits::decode(&b) {
                prop_assert_eq!(c.encode(), b);
            }
            let c = Credits { consumed: 1, recvs_posted: 2, rndv_done: 3 };
            let mut torn = c.encode();
            torn[flip / 8] ^= 1 << (flip % 8);
            prop_assert_eq!(Credits::decode(&torn), None);
        }
    }
}

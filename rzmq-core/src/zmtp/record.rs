//! The record layer: ZMTP frames in and out, sans-IO: the receive buffer and frame decoder, the
//! send queue and frame encoder.
//!
//! Wire format: [`super::frame`] (reserved flag bits are rejected). Once a security handshake
//! installs a cipher ([`super::cipher`]), every frame goes through it: [`Decoder`] and
//! [`OutQueue`] are generic over the cipher (`O: Open`, `S: Seal`), so the call per frame is a
//! direct one; the connection picks the instantiation (CURVE's).
//!
//! Receiving: the engine reads into `Decoder::recv_buffer` and reports the count with
//! `Decoder::received`. Small frames land in a reused batch buffer (a [`crate::msg::RecvBuf`]
//! of [`BATCH_SIZE`], growing to [`MAX_BATCH`] while reads fill it); frames up to [`crate::msg::INLINE_CAP`] bytes become inline messages,
//! larger ones are copied out, or, when the batch is big, sliced out of the batch buffer without a
//! copy and without an atomic operation (the buffer takes its references in bulk; the batch buffer
//! is then left to its slices and a fresh one is used). A frame larger than
//! [`MAX_BATCH_FRAME`] that is not yet complete is read straight into its own body buffer: storage
//! for the whole body up to [`DIRECT_MAPPED_MAX`] (pooled up to [`crate::pool::POOL_MAX`], else a
//! fresh mapping; untouched pages cost nothing until bytes arrive), above that a buffer that
//! grows as bytes arrive (at most [`DIRECT_EAGER`] ahead of them), so a peer claiming 2^62 bytes
//! costs nothing.
//!
//! Sending: headers and bodies up to [`LARGE_BODY`] bytes are appended to one byte buffer; larger
//! bodies are kept as their [`Msg`] and written with `write_vectored`, then dropped as soon as they
//! have been fully written.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

use super::cipher::{Open, Seal};
use super::error::ZmtpError;
use super::frame::{
    frame_header, parse_header, FLAGS_KNOWN, FLAG_COMMAND, FLAG_MORE, LARGE_BODY, LEAD_BYTES,
    LEAD_SPLIT_MIN, MAX_HEADER_LEN,
};
use crate::msg::{Buffer, Msg, RecvBuf};
use std::sync::Arc;

/// Size of the reused receive batch buffer (of a fresh one while reads do not fill it).
pub(super) const BATCH_SIZE: usize = 64 * 1024;
/// Largest fresh batch buffer: a connection whose reads keep filling the buffer (a stream of
/// messages waiting in the socket) doubles its next fresh buffer up to this, so it reads, wakes
/// the application and allocates a buffer a quarter as often; one short read brings it back to
/// [`BATCH_SIZE`], and an idle connection gives a large buffer back.
pub(super) const MAX_BATCH: usize = 256 * 1024;
/// Largest body decoded from the batch buffer when it is not complete yet; larger bodies are read
/// straight into their own buffer.
pub(super) const MAX_BATCH_FRAME: usize = 32 * 1024;
/// The batch buffer is compacted when less than this is free at its end.
const MIN_READ_ROOM: usize = 8 * 1024;
/// Frames are sliced out of the batch buffer (instead of copied) when at least this many bytes
/// arrived together; below it, a fresh batch buffer per read would cost more than the copies.
const SLICE_MIN_BATCH: usize = 16 * 1024;
/// Most bytes a direct body buffer is allocated ahead of what has arrived, for bodies larger
/// than the pool's largest class ([`crate::pool::POOL_MAX`]); smaller ones take pooled storage
/// for the whole body (see `DirectBuf::Pooled`).
pub(super) const DIRECT_EAGER: usize = 4 * 1024 * 1024;
/// Largest body read into a mapping of its whole size (see `DirectBuf::Pooled`); larger ones
/// grow with their bytes, so a peer's claim costs at most this much address space, never memory.
pub(super) const DIRECT_MAPPED_MAX: usize = 1 << 30;
const MAX_IOV: usize = 64;
/// The send buffer gives memory back when it is empty and larger than this.
const OUT_SHRINK_ABOVE: usize = 4 * 1024 * 1024;
/// The send buffer drops written bytes once this many sit before the unwritten ones.
const OUT_COMPACT_AFTER: usize = 64 * 1024;

/// The reused receive buffer holding bytes not decoded yet in `start..end`.
struct Batch {
    chunk: RecvBuf,
    start: usize,
    end: usize,
    slice: bool,
    /// Size of the next fresh buffer (BATCH_SIZE..=MAX_BATCH), following how full reads are.
    next_size: usize,
    /// Room the last `writable` offered.
    room: usize,
}

/// A large frame body being read in place.
struct Direct {
    flags: u8,
    /// The body's storage; its first `filled` bytes have arrived.
    buf: DirectBuf,
    filled: usize,
    size: usize,
}

/// Storage of a body read in place.
enum DirectBuf {
    /// Storage for the whole body: from the pool for bodies up to [`crate::pool::POOL_MAX`],
    /// going back to it; a fresh mapping up to [`DIRECT_MAPPED_MAX`], unmapped after use. It
    /// commits no memory ahead of the data beyond what the pool already holds: fresh storage is
    /// an untouched mapping whose pages the kernel's copy faults in as bytes arrive (one huge
    /// page at a time from 2 MiB), and recycled storage is memory the pool kept anyway.
    Pooled(crate::pool::Storage),
    /// Larger bodies: grown as bytes arrive (zeroed, and copied where `realloc` cannot remap).
    Grown(Vec<u8>),
}

impl DirectBuf {
    fn bytes(&mut self) -> &mut [u8] {
        match self {
            DirectBuf::Pooled(s) => s,
            DirectBuf::Grown(v) => v,
        }
    }

    fn len(&self) -> usize {
        match self {
            DirectBuf::Pooled(s) => s.len(),
            DirectBuf::Grown(v) => v.len(),
        }
    }
}

impl Direct {
    fn incomplete(&self) -> bool {
        self.filled < self.size
    }
}

/// The frame decoder and its receive buffers; `O` opens frames once a cipher is installed.
pub(crate) struct Decoder<O> {
    batch: Batch,
    direct: Option<Direct>,
    maxmsgsize: i64,
    /// Cipher hook (CURVE): opens every frame once the handshake is done.
    opener: Option<Box<O>>,
    /// Frames decoded and given back ([`Decoder::unread`]): returned again, in order, first.
    unread: VecDeque<(u8, Msg)>,
}

impl Batch {
    fn new(size: usize) -> Batch {
        Batch {
            chunk: RecvBuf::new(size),
            start: 0,
            end: 0,
            slice: false,
            next_size: size,
            room: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        self.chunk.bytes().get(self.start..self.end).unwrap_or(&[])
    }

    /// Makes room at the end of the batch buffer and returns it.
    fn writable(&mut self) -> &mut [u8] {
        let cap = self.chunk.len();
        let pending = self.end - self.start;
        let unique = self.chunk.bytes_mut().is_some();
        if !unique || (self.start == 0 && self.end == cap) {
            // Shared with messages sliced from it (it is immutable now), or full of undecoded
            // bytes (the engine has not drained events): continue in a fresh buffer.
            let size = if unique {
                cap.saturating_mul(2)
            } else {
                self.next_size.max(pending + MIN_READ_ROOM)
            };
            // Recycled storage: only bytes read into it are ever exposed.
            let mut fresh = RecvBuf::new(size);
            if let (Some(dst), Some(src)) = (
                fresh.bytes_mut(),
                self.chunk.bytes().get(self.start..self.end),
            ) {
                dst[..pending].copy_from_slice(src);
            }
            self.chunk = fresh;
            self.start = 0;
            self.end = pending;
        } else if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if cap > self.next_size {
                // Reads stopped filling it: a smaller buffer will do (this one goes to the pool).
                self.chunk = RecvBuf::new(self.next_size);
            }
        } else if cap - self.end < MIN_READ_ROOM && self.start > 0 {
            if let Some(d) = self.chunk.bytes_mut() {
                d.copy_within(self.start..self.end, 0);
            }
            self.start = 0;
            self.end = pending;
        }
        let end = self.end;
        let room = match self.chunk.bytes_mut() {
            Some(d) => &mut d[end..],
            None => &mut [],
        };
        self.room = room.len();
        room
    }

    fn received(&mut self, n: usize) {
        debug_assert!(
            self.end + n <= self.chunk.len(),
            "received more than recv_buffer"
        );
        self.end = (self.end + n).min(self.chunk.len());
        self.slice = self.end - self.start >= SLICE_MIN_BATCH;
        if n == self.room {
            // More may be waiting in the socket: read more at a time.
            self.next_size = (self.next_size * 2).min(MAX_BATCH);
        } else if n < self.room / 2 {
            self.next_size = BATCH_SIZE;
        }
    }

    /// A message holding `len` bytes at `off` of the batch buffer.
    fn body(&mut self, off: usize, len: usize) -> Msg {
        if self.slice {
            return self.chunk.slice(off, len);
        }
        Msg::copy_from(self.chunk.bytes().get(off..off + len).unwrap_or(&[]))
    }
}

impl<O: Open> Decoder<O> {
    /// A decoder enforcing `maxmsgsize` (negative: unlimited).
    pub(crate) fn new(maxmsgsize: i64) -> Decoder<O> {
        Decoder {
            batch: Batch::new(BATCH_SIZE),
            direct: None,
            maxmsgsize,
            opener: None,
            unread: VecDeque::new(),
        }
    }

    /// A fresh decoder with the same limits (no cipher).
    pub(crate) fn fresh(&self) -> Decoder<O> {
        Decoder::new(self.maxmsgsize)
    }

    /// Gives decoded frames back: the next [`Decoder::next_frame`] calls return them again, in
    /// order, before anything still undecoded.
    /// `frames` is left empty.
    pub(crate) fn unread(&mut self, frames: &mut Vec<(u8, Msg)>) {
        while let Some(f) = frames.pop() {
            self.unread.push_front(f);
        }
    }

    /// True when nothing received is left undecoded or given back: the next byte read starts a
    /// frame.
    pub(crate) fn is_clean(&self) -> bool {
        self.unread.is_empty() && self.direct.is_none() && self.buffered() == 0
    }

    /// True when the decoder holds no whole frame: nothing given back, and what it holds, if
    /// anything, is one frame cut by the end of a read (its header or body incomplete).
    pub(crate) fn only_cut_frame(&self) -> bool {
        if !self.unread.is_empty() {
            return false;
        }
        if let Some(d) = &self.direct {
            return d.incomplete();
        }
        let p = self.batch.pending();
        let Some((hdr, size)) = parse_header(p) else {
            return true;
        };
        ((p.len() - hdr) as u64) < size
    }

    /// True while a large body is being read in place (the next read goes straight into it).
    pub(crate) fn in_body(&self) -> bool {
        self.direct.as_ref().is_some_and(|d| d.incomplete())
    }

    /// True once a cipher is installed.
    pub(crate) fn has_opener(&self) -> bool {
        self.opener.is_some()
    }

    /// Installs the cipher: from now on every frame is opened (CURVE: a `MESSAGE`).
    pub(crate) fn set_opener(&mut self, opener: O) {
        self.opener = Some(Box::new(opener));
    }

    /// Where the engine should read next; never empty.
    pub(crate) fn recv_buffer(&mut self) -> &mut [u8] {
        if let Some(d) = self.direct.as_mut() {
            if d.incomplete() {
                if let DirectBuf::Grown(v) = &mut d.buf {
                    if d.filled == v.len() {
                        // Bodies over DIRECT_EAGER grow by doubling, in place: realloc moves large
                        // (mmapped) buffers by remapping pages, so what arrived is not copied.
                        let new_len = v.len().saturating_mul(2).clamp(d.filled + 1, d.size);
                        v.reserve_exact(new_len - v.len());
                        v.resize(new_len, 0);
                    }
                }
                // Pooled storage may be longer than the body: never read past the body.
                let (filled, size) = (d.filled, d.size);
                let b = d.buf.bytes();
                let end = size.min(b.len());
                return &mut b[filled..end];
            }
        }
        self.batch.writable()
    }

    /// `n` bytes were written at the start of the last [`Decoder::recv_buffer`].
    pub(crate) fn received(&mut self, n: usize) {
        if let Some(d) = self.direct.as_mut() {
            if d.incomplete() {
                debug_assert!(
                    d.filled + n <= d.buf.len(),
                    "received more than recv_buffer"
                );
                d.filled = (d.filled + n).min(d.size);
                return;
            }
        }
        self.batch.received(n);
    }

    /// Undecoded bytes in the batch buffer (the greeting is read from here).
    pub(crate) fn pending(&self) -> &[u8] {
        self.batch.pending()
    }

    /// Marks `n` pending bytes as decoded.
    pub(crate) fn consume(&mut self, n: usize) {
        self.batch.start = (self.batch.start + n).min(self.batch.end);
    }

    /// Bytes received but not decoded yet.
    pub(crate) fn buffered(&self) -> usize {
        self.batch.end - self.batch.start
    }

    /// Bytes of memory the receive buffers hold (for tests and diagnostics).
    pub(crate) fn allocated(&self) -> usize {
        self.batch.chunk.len() + self.direct.as_ref().map_or(0, |d| d.buf.len())
    }

    /// The next complete frame: its flags (MORE, COMMAND) and body; `Ok(None)` until one is complete.
    /// After [`Decoder::set_opener`], the frame opened from its CURVE `MESSAGE`.
    #[inline]
    pub(crate) fn next_frame(&mut self) -> Result<Option<(u8, Msg)>, ZmtpError> {
        // The common case first: a short frame whole in the batch, nothing given back, no
        // frame being read into its own buffer, no CURVE.
        if self.unread.is_empty() && self.direct.is_none() && self.opener.is_none() {
            if let [flags, size, rest @ ..] = self.batch.pending() {
                let (flags, size) = (*flags, usize::from(*size));
                if flags & !(FLAG_MORE | FLAG_COMMAND) == 0
                    && rest.len() >= size
                    && (self.maxmsgsize < 0 || size as u64 <= self.maxmsgsize as u64)
                {
                    let off = self.batch.start + 2;
                    let body = self.batch.body(off, size);
                    self.batch.start = off + size;
                    return Ok(Some((flags, body)));
                }
            }
        }
        self.next_frame_slow()
    }

    /// [`Decoder::next_frame`] for everything else.
    #[inline(never)]
    fn next_frame_slow(&mut self) -> Result<Option<(u8, Msg)>, ZmtpError> {
        if !self.unread.is_empty() {
            return Ok(self.unread.pop_front());
        }
        let frame = self.next_wire_frame()?;
        match (self.opener.as_mut(), frame) {
            (Some(o), Some((_, m))) => o.open(m).map(Some),
            (_, frame) => Ok(frame),
        }
    }

    fn next_wire_frame(&mut self) -> Result<Option<(u8, Msg)>, ZmtpError> {
        if let Some(d) = &self.direct {
            if d.incomplete() {
                return Ok(None);
            }
            if let Some(d) = self.direct.take() {
                let body = match d.buf {
                    DirectBuf::Pooled(s) => {
                        Msg::from_buffer(Arc::new(Buffer::from_pooled(s, d.size)), 0, d.size)
                    }
                    DirectBuf::Grown(mut v) => {
                        v.truncate(d.size);
                        Msg::from_vec(v)
                    }
                };
                return Ok(Some((d.flags, body)));
            }
        }
        let avail = self.batch.pending();
        let Some(&flags) = avail.first() else {
            return Ok(None);
        };
        if flags & !FLAGS_KNOWN != 0 {
            return Err(ZmtpError::ReservedFlags(flags));
        }
        let Some((hdr, size)) = parse_header(avail) else {
            return Ok(None);
        };
        if size > i64::MAX as u64 {
            return Err(ZmtpError::InvalidFrameSize(size));
        }
        if self.maxmsgsize >= 0 && size > self.maxmsgsize as u64 {
            return Err(ZmtpError::FrameTooLarge {
                size,
                max: self.maxmsgsize,
            });
        }
        let Ok(size) = usize::try_from(size) else {
            return Err(ZmtpError::FrameTooLarge {
                size,
                max: self.maxmsgsize,
            });
        };
        let flags = flags & (FLAG_MORE | FLAG_COMMAND);
        let have = avail.len() - hdr;
        if have >= size {
            let off = self.batch.start + hdr;
            let body = self.batch.body(off, size);
            self.batch.start = off + size;
            return Ok(Some((flags, body)));
        }
        if size <= MAX_BATCH_FRAME {
            return Ok(None);
        }
        // Read the rest straight into the body's own buffer, allocated only a bounded amount
        // ahead of the bytes that have arrived.
        // Up to the pool's largest class, pooled storage for the whole body: recycled bytes are
        // never exposed (the body is handed out only once all `size` bytes were read over them).
        // A Vec grown by doubling instead cleared every byte before the read overwrote it (12 of
        // a 16 MiB body's bytes), and, once glibc's mmap threshold had risen past it, copied the
        // body at each doubling: a fifth of the receiving I/O thread's time at 16 MiB.
        // Larger bodies up to DIRECT_MAPPED_MAX get a fresh mapping of their whole size, which
        // holds address space only until the bytes arrive; a peer claiming more (or a system
        // refusing the mapping) gets the buffer that grows with the bytes.
        let mapped = || (size <= DIRECT_MAPPED_MAX).then(|| crate::pool::try_take_fresh(size));
        let mut buf = if size <= crate::pool::POOL_MAX {
            DirectBuf::Pooled(crate::pool::take(size).0)
        } else if let Some(Some(s)) = mapped() {
            DirectBuf::Pooled(s)
        } else {
            DirectBuf::Grown(vec![0u8; size.min(DIRECT_EAGER.max(have))])
        };
        buf.bytes()[..have].copy_from_slice(&avail[hdr..]);
        self.batch.start = self.batch.end;
        self.direct = Some(Direct {
            flags,
            buf,
            filled: have,
            size,
        });
        Ok(None)
    }
}

/// A body kept by reference in the send queue, logically at `at` in the byte buffer.
struct Large {
    at: usize,
    msg: Msg,
    sent: usize,
}

/// Encoded output waiting for the transport; `S` seals frames once a cipher is installed.
pub(crate) struct OutQueue<S> {
    buf: Vec<u8>,
    pos: usize,
    large: VecDeque<Large>,
    large_bytes: usize,
    /// Cipher hook (CURVE): seals every frame once the handshake is done.
    sealer: Option<Box<S>>,
    /// Whether large bodies go out in two writes (see [`LEAD_SPLIT_MIN`]).
    split_large: bool,
}

impl<S: Seal> OutQueue<S> {
    /// An empty queue.
    pub(crate) fn new() -> OutQueue<S> {
        OutQueue {
            buf: Vec::with_capacity(4096),
            pos: 0,
            large: VecDeque::new(),
            large_bytes: 0,
            sealer: None,
            split_large: true,
        }
    }

    /// Whether large bodies go out in two writes (see [`LEAD_SPLIT_MIN`]; default yes).
    pub(crate) fn set_split_large(&mut self, split: bool) {
        self.split_large = split;
    }

    /// See [`OutQueue::set_split_large`].
    pub(crate) fn split_large(&self) -> bool {
        self.split_large
    }

    /// Installs the cipher: from now on every frame goes out sealed (CURVE: in a `MESSAGE`).
    pub(crate) fn set_sealer(&mut self, sealer: S) {
        self.sealer = Some(Box::new(sealer));
    }

    #[inline]
    fn header(&mut self, flags: u8, len: usize) {
        let mut h = [0u8; MAX_HEADER_LEN];
        let n = frame_header(flags, len, &mut h);
        self.buf.extend_from_slice(&h[..n]);
    }

    /// True once frames are sealed (a cipher is installed).
    pub(crate) fn is_sealed(&self) -> bool {
        self.sealer.is_some()
    }

    /// Appends raw bytes (the greeting).
    pub(crate) fn push_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends a frame whose body is copied.
    pub(crate) fn push_frame(&mut self, flags: u8, body: &[u8]) {
        if let Some(s) = self.sealer.as_mut() {
            return s.seal_frame(&mut self.buf, flags, &[body]);
        }
        self.buf.reserve(MAX_HEADER_LEN + body.len());
        self.header(flags, body.len());
        self.buf.extend_from_slice(body);
    }

    /// Appends a frame whose body is the concatenation of `parts`, copied.
    pub(crate) fn push_frame_parts(&mut self, flags: u8, parts: &[&[u8]]) {
        if let Some(s) = self.sealer.as_mut() {
            return s.seal_frame(&mut self.buf, flags, parts);
        }
        let len = parts.iter().map(|p| p.len()).sum();
        self.buf.reserve(MAX_HEADER_LEN + len);
        self.header(flags, len);
        for p in parts {
            self.buf.extend_from_slice(p);
        }
    }

    /// Appends a frame holding `msg`, by reference when it is large.
    #[inline]
    pub(crate) fn push_msg(&mut self, flags: u8, msg: Msg) {
        let len = msg.len();
        if len > LARGE_BODY && self.sealer.is_none() {
            self.header(flags, len);
            self.large_bytes += len;
            self.large.push_back(Large {
                at: self.buf.len(),
                msg,
                sent: 0,
            });
        } else {
            self.push_frame(flags, msg.data());
        }
    }

    /// Appends the rest of `msg`'s body from byte `from` on, without a header (one was written
    /// before); by reference when it is large.
    pub(crate) fn push_body_rest(&mut self, msg: Msg, from: usize) {
        let rest = msg.len().saturating_sub(from);
        if rest > LARGE_BODY && self.sealer.is_none() {
            self.large_bytes += rest;
            self.large.push_back(Large {
                at: self.buf.len(),
                msg,
                sent: from,
            });
        } else {
            self.buf
                .extend_from_slice(msg.data().get(from..).unwrap_or(&[]));
        }
    }

    /// True when nothing is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len() && self.large.is_empty()
    }

    /// Bytes waiting.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.pos + self.large_bytes
    }

    /// Writes as much as `w` takes; see [`super::Connection::write_to`].
    pub(crate) fn write_to<W: Write + ?Sized>(&mut self, w: &mut W) -> io::Result<usize> {
        let mut total = 0;
        while !self.is_empty() {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let mut cnt = 0;
            let mut want = 0;
            let mut cur = self.pos;
            let mut all = true;
            for l in &self.large {
                if cnt + 2 > MAX_IOV {
                    all = false;
                    break;
                }
                if l.at > cur {
                    iov[cnt] = IoSlice::new(&self.buf[cur..l.at]);
                    cnt += 1;
                    want += l.at - cur;
                }
                let rest = l.msg.data().get(l.sent..).unwrap_or(&[]);
                if self.split_large && l.sent == 0 && rest.len() >= LEAD_SPLIT_MIN {
                    // A large body starts: its lead ends this write (see LEAD_SPLIT_MIN).
                    iov[cnt] = IoSlice::new(&rest[..LEAD_BYTES]);
                    cnt += 1;
                    want += LEAD_BYTES;
                    all = false;
                    break;
                }
                iov[cnt] = IoSlice::new(rest);
                cnt += 1;
                want += rest.len();
                cur = l.at;
            }
            if all && cur < self.buf.len() {
                iov[cnt] = IoSlice::new(&self.buf[cur..]);
                cnt += 1;
                want += self.buf.len() - cur;
            }
            let res = if cnt == 1 {
                w.write(&iov[0])
            } else {
                w.write_vectored(&iov[..cnt])
            };
            match res {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.advance(n);
                    total += n;
                    if n < want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        self.tidy();
        Ok(total)
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let seg_end = self.large.front().map_or(self.buf.len(), |l| l.at);
            if self.pos < seg_end {
                let k = n.min(seg_end - self.pos);
                self.pos += k;
                n -= k;
                continue;
            }
            let Some(l) = self.large.front_mut() else {
                break;
            };
            let k = n.min(l.msg.len() - l.sent);
            l.sent += k;
            n -= k;
            self.large_bytes -= k;
            if l.sent == l.msg.len() {
                // Fully written: release the message now.
                self.large.pop_front();
            }
        }
    }

    fn tidy(&mut self) {
        if self.is_empty() {
            self.buf.clear();
            self.pos = 0;
            if self.buf.capacity() > OUT_SHRINK_ABOVE {
                self.buf.shrink_to(BATCH_SIZE);
            }
        } else if self.pos >= OUT_COMPACT_AFTER && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            for l in &mut self.large {
                l.at -= self.pos;
            }
            self.pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmtp::cipher::Clear;
    use crate::zmtp::frame::FLAG_LONG;

    /// The record layer without a cipher: framing alone.
    type Decoder = super::Decoder<Clear>;
    /// See [`Decoder`].
    type OutQueue = super::OutQueue<Clear>;

    fn feed(d: &mut Decoder, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let b = d.recv_buffer();
            assert!(!b.is_empty());
            let n = b.len().min(bytes.len());
            b[..n].copy_from_slice(&bytes[..n]);
            d.received(n);
            bytes = &bytes[n..];
        }
    }

    fn encode(frames: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut q = OutQueue::new();
        for (f, b) in frames {
            q.push_msg(*f, Msg::from_vec(b.clone()));
        }
        let mut out = Vec::new();
        q.write_to(&mut out).unwrap();
        assert!(q.is_empty());
        out
    }

    #[test]
    fn short_and_long_headers() {
        assert_eq!(encode(&[(0, b"ab".to_vec())]), b"\x00\x02ab");
        assert_eq!(encode(&[(FLAG_MORE, vec![])]), b"\x01\x00");
        let w = encode(&[(FLAG_COMMAND, vec![9; 256])]);
        assert_eq!(&w[..9], &[6, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(w.len(), 9 + 256);
        let w = encode(&[(0, vec![9; 255])]);
        assert_eq!(&w[..2], &[0, 255]);
    }

    #[test]
    fn decodes_frames_across_compactions() {
        let frames: Vec<(u8, Vec<u8>)> = (0..3000)
            .map(|i| ((i % 2) as u8, vec![i as u8; (i * 37) % 700]))
            .collect();
        let wire = encode(&frames);
        let mut d = Decoder::new(-1);
        let mut got = Vec::new();
        for piece in wire.chunks(10_000) {
            feed(&mut d, piece);
            while let Some((f, m)) = d.next_frame().unwrap() {
                got.push((f, m.data().to_vec()));
            }
        }
        assert_eq!(got, frames);
        assert!(d.allocated() <= 2 * BATCH_SIZE);
    }

    #[test]
    fn slices_big_batches_and_moves_on() {
        let frames: Vec<(u8, Vec<u8>)> = (0..200).map(|i| (0, vec![i as u8; 100])).collect();
        let wire = encode(&frames);
        let mut d = Decoder::new(-1);
        feed(&mut d, &wire);
        let mut held = Vec::new();
        while let Some((_, m)) = d.next_frame().unwrap() {
            assert!(m.storage_info().is_some());
            held.push(m);
        }
        let b0 = held[0].storage_info().unwrap();
        let b1 = held[199].storage_info().unwrap();
        assert_eq!(b0.base, b1.base, "slices of one batch buffer");
        // The batch buffer is shared now: more input goes to a fresh one, and old slices stay intact.
        feed(&mut d, &encode(&[(0, vec![0xEE; 100])]));
        let (_, m) = d.next_frame().unwrap().unwrap();
        assert_eq!(m.data(), &[0xEE; 100][..]);
        for (i, m) in held.iter().enumerate() {
            assert_eq!(m.data(), &[i as u8; 100][..]);
        }
    }

    #[test]
    fn batch_grows_while_reads_fill_it_and_shrinks_when_they_stop() {
        // 100-byte frames (102 bytes on the wire) in a stream longer than any buffer.
        let wire = encode(
            &(0..20_000)
                .map(|i| (0, vec![i as u8; 100]))
                .collect::<Vec<_>>(),
        );
        let mut d = Decoder::new(-1);
        let mut held = Vec::new();
        let mut sizes = Vec::new();
        let mut off = 0;
        let mut got = 0;
        while off < wire.len() {
            // Each read fills what the decoder offers, as a socket with more waiting would.
            let b = d.recv_buffer();
            let n = b.len().min(wire.len() - off);
            b[..n].copy_from_slice(&wire[off..off + n]);
            d.received(n);
            off += n;
            sizes.push(d.allocated());
            while let Some((_, m)) = d.next_frame().unwrap() {
                assert_eq!(m.data(), &[got as u8; 100][..]);
                got += 1;
                // The application still holds the frames: every read needs a fresh buffer.
                held.push(m);
            }
        }
        assert_eq!(got, 20_000);
        assert_eq!(sizes[0], BATCH_SIZE);
        assert!(sizes.contains(&MAX_BATCH), "grew to MAX_BATCH: {sizes:?}");
        assert!(sizes.iter().all(|&s| s <= MAX_BATCH + MIN_READ_ROOM));
        // A short read: the next fresh buffer is small again, and once the frames are released an
        // idle decoder gives its large buffer back.
        feed(&mut d, &encode(&[(0, vec![7; 100])]));
        let (_, m) = d.next_frame().unwrap().unwrap();
        assert_eq!(m.data(), &[7; 100][..]);
        drop((held, m));
        let _ = d.recv_buffer();
        assert_eq!(d.allocated(), BATCH_SIZE);
    }

    #[test]
    fn small_batches_copy() {
        let mut d = Decoder::new(-1);
        feed(&mut d, &encode(&[(0, vec![1; 100])]));
        let (_, m) = d.next_frame().unwrap().unwrap();
        let b = m.storage_info().unwrap();
        assert_eq!(
            b.capacity,
            crate::small::capacity_for(100),
            "a copy in storage of its size class, not a slice of the batch buffer"
        );
    }

    #[test]
    fn rejects_bad_headers() {
        for bad in [0x08u8, 0x10, 0x80, 0xFF] {
            let mut d = Decoder::new(-1);
            feed(&mut d, &[bad]);
            assert_eq!(d.next_frame(), Err(ZmtpError::ReservedFlags(bad)));
        }
        let mut d = Decoder::new(-1);
        feed(&mut d, &[FLAG_LONG, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(d.next_frame(), Err(ZmtpError::InvalidFrameSize(1 << 63)));
        let mut d = Decoder::new(10);
        feed(&mut d, &[0, 11]);
        assert_eq!(
            d.next_frame(),
            Err(ZmtpError::FrameTooLarge { size: 11, max: 10 })
        );
        let mut d = Decoder::new(10);
        feed(&mut d, &[0, 10]);
        assert_eq!(d.next_frame(), Ok(None));
        // Whole short frames take the fast path, which refuses the same.
        for bad in [0x08u8, 0x10, 0x80, 0xFF] {
            let mut d = Decoder::new(-1);
            feed(&mut d, &[bad, 1, 7]);
            assert_eq!(d.next_frame(), Err(ZmtpError::ReservedFlags(bad)));
        }
        let mut d = Decoder::new(10);
        feed(&mut d, &[0, 11]);
        feed(&mut d, &[0; 11]);
        assert_eq!(
            d.next_frame(),
            Err(ZmtpError::FrameTooLarge { size: 11, max: 10 })
        );
        let mut d = Decoder::new(10);
        feed(
            &mut d,
            &[FLAG_MORE, 10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, FLAG_COMMAND, 0],
        );
        assert_eq!(
            d.next_frame(),
            Ok(Some((
                FLAG_MORE,
                Msg::from(&[0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9][..])
            )))
        );
        assert_eq!(d.next_frame(), Ok(Some((FLAG_COMMAND, Msg::new()))));
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn lying_size_allocates_nothing_big() {
        for claim in [(1u64 << 63) - 1, 1 << 62, 1 << 40] {
            let mut d = Decoder::new(-1);
            let mut hdr = vec![FLAG_LONG];
            hdr.extend_from_slice(&claim.to_be_bytes());
            feed(&mut d, &hdr);
            assert_eq!(d.next_frame(), Ok(None));
            assert!(d.allocated() <= DIRECT_EAGER + BATCH_SIZE);
            let mut total = 0usize;
            for _ in 0..3 {
                let b = d.recv_buffer();
                assert!(b.len() <= DIRECT_EAGER.max(total));
                assert!(d.allocated() <= (2 * total).max(DIRECT_EAGER) + BATCH_SIZE);
                let n = d.recv_buffer().len();
                total += n;
                d.received(n);
                assert_eq!(d.next_frame(), Ok(None));
            }
        }
    }

    #[test]
    fn direct_large_frame() {
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let wire = encode(&[(FLAG_MORE, body.clone()), (0, b"tail".to_vec())]);
        let mut d = Decoder::new(-1);
        let mut got = Vec::new();
        for piece in wire.chunks(70_001) {
            feed(&mut d, piece);
            while let Some((f, m)) = d.next_frame().unwrap() {
                got.push((f, m));
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, FLAG_MORE);
        assert_eq!(got[0].1.data(), &body[..]);
        assert_eq!(got[1].1.data(), b"tail");
    }

    #[test]
    fn bodies_are_read_into_storage_of_their_whole_size_up_to_a_bound() {
        // Recycled storage of the class a 6 MiB body takes, full of bytes a previous frame
        // left: none of them may show through.
        let (mut old, _) = crate::pool::take(6 << 20);
        old.fill(0xAA);
        crate::pool::give(old);
        for size in [
            DIRECT_EAGER + 1,
            6 << 20,
            crate::pool::POOL_MAX,
            crate::pool::POOL_MAX + 1,
        ] {
            let body: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
            let wire = encode(&[(0, body.clone())]);
            let mut d = Decoder::new(-1);
            let mut got = Vec::new();
            for (i, piece) in wire.chunks(60_007).enumerate() {
                feed(&mut d, piece);
                while let Some((_, m)) = d.next_frame().unwrap() {
                    got.push(m);
                }
                if i == 0 {
                    // The body is being read in place now.
                    let pooled = match d.direct.as_ref().map(|x| &x.buf) {
                        Some(DirectBuf::Pooled(_)) => true,
                        Some(DirectBuf::Grown(_)) => false,
                        None => panic!("{size}: not read in place"),
                    };
                    assert!(pooled, "{size}");
                }
            }
            assert_eq!(got.len(), 1);
            assert!(got[0].data() == &body[..], "{size}");
        }
        // A claim past DIRECT_MAPPED_MAX (here 2^62 bytes) commits nothing ahead of the bytes.
        for claim in [DIRECT_MAPPED_MAX as u64 + 1, 1 << 62] {
            let mut d = Decoder::new(-1);
            let mut head = vec![FLAG_LONG];
            head.extend_from_slice(&claim.to_be_bytes());
            head.extend(std::iter::repeat_n(7u8, 100_000));
            feed(&mut d, &head);
            assert_eq!(d.next_frame(), Ok(None));
            match d.direct.as_ref().map(|x| &x.buf) {
                Some(DirectBuf::Grown(v)) => assert!(v.len() <= DIRECT_EAGER + 100_000, "{claim}"),
                _ => panic!("{claim}: not read into a growing buffer"),
            }
        }
    }

    /// A writer taking at most `max` bytes per call, refusing every other call.
    struct Trickle {
        out: Vec<u8>,
        max: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls & 1 == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.max);
            self.out.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_keep_order_and_release_large_bodies() {
        let big = Msg::from_vec(vec![7u8; 20_000]);
        let probe = big.clone();
        let mut q = OutQueue::new();
        q.push_msg(0, Msg::from_vec(b"head".to_vec()));
        q.push_msg(FLAG_MORE, big);
        q.push_msg(0, Msg::from_vec(vec![8u8; 9000]));
        q.push_msg(0, Msg::from_vec(b"tail".to_vec()));
        let expect_len = q.pending();
        let mut w = Trickle {
            out: Vec::new(),
            max: 777,
            calls: 0,
        };
        while !q.is_empty() {
            q.write_to(&mut w).unwrap();
            if w.out.len() > 6 + 9 + 20_000 {
                let b = probe.storage_info().unwrap();
                assert_eq!(b.owners, 1, "sent body released");
            }
        }
        assert_eq!(w.out.len(), expect_len);
        let mut d = Decoder::new(-1);
        feed(&mut d, &w.out);
        let mut got = Vec::new();
        while let Some((f, m)) = d.next_frame().unwrap() {
            got.push((f, m.len()));
        }
        assert_eq!(got, vec![(0, 4), (FLAG_MORE, 20_000), (0, 9000), (0, 4)]);
    }

    /// Every frame of a byte stream, with its flags.
    fn decode_all(wire: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut d = Decoder::new(-1);
        feed(&mut d, wire);
        let mut got = Vec::new();
        while let Some((f, m)) = d.next_frame().unwrap() {
            got.push((f, m.data().to_vec()));
        }
        got
    }

    /// Takes everything, recording the bytes of each call.
    struct Calls(Vec<u8>, Vec<usize>);
    impl Write for Calls {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(b)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let n: usize = bufs.iter().map(|b| b.len()).sum();
            bufs.iter().for_each(|b| self.0.extend_from_slice(b));
            self.1.push(n);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn unsplit_queues_write_large_bodies_whole() {
        let body: Vec<u8> = (0..LEAD_SPLIT_MIN * 4).map(|i| (i % 251) as u8).collect();
        let mut q = OutQueue::new();
        q.set_split_large(false);
        q.push_msg(FLAG_MORE, Msg::from_vec(b"head".to_vec()));
        q.push_msg(0, Msg::from_vec(body.clone()));
        q.push_msg(0, Msg::from_vec(b"tail".to_vec()));
        let mut w = Calls(Vec::new(), Vec::new());
        q.write_to(&mut w).unwrap();
        assert!(q.is_empty());
        assert_eq!(w.1, vec![6 + 9 + body.len() + 6]);
        assert_eq!(
            decode_all(&w.0),
            vec![
                (FLAG_MORE, b"head".to_vec()),
                (0, body),
                (0, b"tail".to_vec())
            ]
        );
    }

    #[test]
    fn large_bodies_go_out_lead_first() {
        let body: Vec<u8> = (0..LEAD_SPLIT_MIN * 4).map(|i| (i % 253) as u8).collect();
        let mut q = OutQueue::new();
        q.push_msg(FLAG_MORE, Msg::from_vec(b"head".to_vec()));
        q.push_msg(0, Msg::from_vec(body.clone()));
        // Just under the split size: one write with what follows it.
        let under = vec![5u8; LEAD_SPLIT_MIN - 1];
        q.push_msg(0, Msg::from_vec(under.clone()));
        q.push_msg(0, Msg::from_vec(b"tail".to_vec()));
        let mut w = Calls(Vec::new(), Vec::new());
        q.write_to(&mut w).unwrap();
        assert!(q.is_empty());
        assert_eq!(
            w.1,
            vec![
                6 + 9 + LEAD_BYTES,
                body.len() - LEAD_BYTES + 9 + under.len() + 6
            ]
        );
        assert_eq!(
            decode_all(&w.0),
            vec![
                (FLAG_MORE, b"head".to_vec()),
                (0, body),
                (0, under),
                (0, b"tail".to_vec())
            ]
        );
    }

    #[test]
    fn write_errors() {
        struct Zero;
        impl Write for Zero {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut q = OutQueue::new();
        q.push_raw(b"x");
        assert_eq!(
            q.write_to(&mut Zero).unwrap_err().kind(),
            io::ErrorKind::WriteZero
        );
        assert_eq!(q.pending(), 1);
    }
}

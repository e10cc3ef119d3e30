//! A single-producer single-consumer queue of bytes: the framed lane of a pipe.
//!
//! A socket writing small frames to a plain ZMTP connection encodes them itself into this
//! queue (see [`crate::pipe`], *framed lane*); the connection's I/O thread then copies whole
//! runs of wire bytes to the stream without touching a message per frame. The bytes live in
//! chunks of [`CHUNK`] bytes; a record never straddles two chunks (the producer starts a new
//! chunk when the next record does not fit, noting how much of the old one it used).
//! The producer publishes a running byte count with a release store; the consumer reads up to
//! it. An emptied chunk goes back to the producer through a one-slot spare, so a steady stream
//! allocates nothing.
//!
//! As in [`crate::spsc`], safety rests on the split of ownership: producer-side fields are
//! touched only through [`ByteProducer`], consumer-side fields only through [`ByteConsumer`],
//! and there is exactly one of each per queue.

use std::cell::UnsafeCell;
use std::ptr;

use crate::sync::{Arc, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Bytes per chunk.
#[cfg(not(loom))]
pub(crate) const CHUNK: usize = 64 * 1024;
/// Bytes per chunk under loom: a model of a few records crosses chunk boundaries.
#[cfg(loom)]
pub(crate) const CHUNK: usize = 16;
struct Chunk {
    data: Box<[UnsafeCell<u8>]>,
    /// Under loom, one tracked cell per byte of `data`: the producer's writes and the
    /// consumer's reads touch them, so loom checks every byte read was published to it.
    #[cfg(loom)]
    shadow: Box<[crate::sync::cell::UnsafeCell<()>]>,
    next: AtomicPtr<Chunk>,
    /// Bytes of the chunk holding records: [`CHUNK`] until the producer moves on.
    used: AtomicUsize,
}

impl Chunk {
    fn alloc() -> *mut Chunk {
        let data: Box<[UnsafeCell<u8>]> = (0..CHUNK).map(|_| UnsafeCell::new(0)).collect();
        Box::into_raw(Box::new(Chunk {
            data,
            #[cfg(loom)]
            shadow: (0..CHUNK)
                .map(|_| crate::sync::cell::UnsafeCell::new(()))
                .collect(),
            next: AtomicPtr::new(ptr::null_mut()),
            used: AtomicUsize::new(CHUNK),
        }))
    }

    /// The chunk's first byte.
    fn base(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.data.as_ptr())
    }

    /// Under loom: bytes `at..at + len` are written (by the producer) or read (`write` false).
    #[cfg(loom)]
    fn touch(&self, at: usize, len: usize, write: bool) {
        for c in &self.shadow[at..at + len] {
            if write {
                c.with_mut(|_| ());
            } else {
                c.with(|_| ());
            }
        }
    }
}

struct ProducerSide {
    /// The chunk being filled (null before the first write).
    chunk: *mut Chunk,
    /// Write offset in `chunk`.
    off: usize,
    /// Bytes written so far (published or not), counting skipped chunk tails.
    total: u64,
    /// `total` as last published.
    published: u64,
}

struct ConsumerSide {
    /// The chunk being read (null until the first published byte).
    chunk: *mut Chunk,
    off: usize,
    /// Bytes consumed so far, counting skipped chunk tails.
    total: u64,
    /// The producer's published count as last seen.
    seen: u64,
}

#[repr(C)]
struct Inner {
    /// Bytes published by the producer.
    published: CachePadded<AtomicU64>,
    prod: CachePadded<UnsafeCell<ProducerSide>>,
    cons: CachePadded<UnsafeCell<ConsumerSide>>,
    /// The first chunk, linked by the producer before its first publish.
    first: AtomicPtr<Chunk>,
    /// An emptied chunk the consumer returns to the producer.
    spare: AtomicPtr<Chunk>,
}

// SAFETY: bytes are plain data; each side's fields are used by exactly one thread at a time
// (see the module docs), shared fields are atomics.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // Exclusive access: free every chunk from the oldest one still linked.
        let cons = self.cons.get_mut();
        let mut c = if cons.chunk.is_null() {
            crate::sync::ptr_get_mut(&mut self.first)
        } else {
            cons.chunk
        };
        while !c.is_null() {
            // SAFETY: chunks come from Chunk::alloc and are linked once each.
            let next = unsafe { (*c).next.load(Ordering::Acquire) };
            // SAFETY: as above; nothing references the chunk any more.
            drop(unsafe { Box::from_raw(c) });
            c = next;
        }
        let spare = crate::sync::ptr_get_mut(&mut self.spare);
        if !spare.is_null() {
            // SAFETY: the spare came from Chunk::alloc and is linked nowhere.
            drop(unsafe { Box::from_raw(spare) });
        }
    }
}

/// The writing end.
pub(crate) struct ByteProducer {
    inner: Arc<Inner>,
}

/// The reading end.
pub(crate) struct ByteConsumer {
    inner: Arc<Inner>,
}

/// Creates an empty byte queue (it allocates its first chunk on the first write).
pub(crate) fn byte_queue() -> (ByteProducer, ByteConsumer) {
    let inner = Arc::new(Inner {
        published: CachePadded::new(AtomicU64::new(0)),
        prod: CachePadded::new(UnsafeCell::new(ProducerSide {
            chunk: ptr::null_mut(),
            off: 0,
            total: 0,
            published: 0,
        })),
        cons: CachePadded::new(UnsafeCell::new(ConsumerSide {
            chunk: ptr::null_mut(),
            off: 0,
            total: 0,
            seen: 0,
        })),
        first: AtomicPtr::new(ptr::null_mut()),
        spare: AtomicPtr::new(ptr::null_mut()),
    });
    (
        ByteProducer {
            inner: inner.clone(),
        },
        ByteConsumer { inner },
    )
}

impl ByteProducer {
    #[allow(clippy::mut_from_ref)]
    fn side(&self) -> &mut ProducerSide {
        // SAFETY: only the one producer touches the producer side.
        unsafe { &mut *self.inner.prod.get() }
    }

    /// Room for a record of `len` bytes (at most [`CHUNK`]), unpublished: returns where to
    /// write it. The record becomes visible with the next [`ByteProducer::publish`].
    #[inline]
    pub(crate) fn reserve(&mut self, len: usize) -> &mut [u8] {
        debug_assert!(len <= CHUNK);
        let inner = self.inner.clone();
        let p = self.side();
        if p.chunk.is_null() || CHUNK - p.off < len {
            Self::next_chunk(&inner, p);
        }
        let at = p.off;
        p.off += len;
        p.total += len as u64;
        // SAFETY: the producer's current chunk is live.
        #[cfg(loom)]
        unsafe {
            (*p.chunk).touch(at, len, true)
        };
        // SAFETY: `at..at+len` lies inside the producer's current chunk, which the consumer
        // reads only below the published count (not yet covering these bytes).
        unsafe { std::slice::from_raw_parts_mut((*p.chunk).base().add(at), len) }
    }

    #[cold]
    fn next_chunk(inner: &Inner, p: &mut ProducerSide) {
        let spare = inner.spare.swap(ptr::null_mut(), Ordering::Acquire);
        let fresh = if spare.is_null() {
            Chunk::alloc()
        } else {
            // SAFETY: the consumer handed the chunk back; nothing else references it.
            unsafe {
                (*spare).next.store(ptr::null_mut(), Ordering::Relaxed);
                (*spare).used.store(CHUNK, Ordering::Relaxed);
            }
            spare
        };
        if p.chunk.is_null() {
            inner.first.store(fresh, Ordering::Release);
        } else {
            p.total += (CHUNK - p.off) as u64;
            // SAFETY: the current chunk is live; the consumer reads `used` and follows `next`
            // only for bytes published after these stores.
            unsafe {
                (*p.chunk).used.store(p.off, Ordering::Release);
                (*p.chunk).next.store(fresh, Ordering::Release);
            }
        }
        p.chunk = fresh;
        p.off = 0;
    }

    /// True when nothing is unpublished.
    #[cfg(test)]
    pub(crate) fn all_published(&self) -> bool {
        let p = self.side();
        p.total == p.published
    }

    /// Makes everything written so far visible to the consumer.
    #[inline]
    pub(crate) fn publish(&mut self) {
        let p = self.side();
        p.published = p.total;
        self.inner.published.store(p.total, Ordering::Release);
    }
}

impl ByteConsumer {
    #[allow(clippy::mut_from_ref)]
    fn side(&self) -> &mut ConsumerSide {
        // SAFETY: only the one consumer touches the consumer side.
        unsafe { &mut *self.inner.cons.get() }
    }

    /// The published bytes of the current chunk not consumed yet (records never straddle
    /// chunks, so this holds whole records); empty when nothing is published. Moves to the
    /// next chunk when the current one is used up.
    #[inline]
    pub(crate) fn peek(&mut self) -> &[u8] {
        let inner = self.inner.clone();
        let c = self.side();
        if c.seen == c.total {
            c.seen = inner.published.load(Ordering::Acquire);
            if c.seen == c.total {
                return &[];
            }
        }
        loop {
            if c.chunk.is_null() {
                c.chunk = inner.first.load(Ordering::Acquire);
                c.off = 0;
            }
            // SAFETY: the chunk is live (the consumer frees it only after moving on).
            let (base, used) =
                unsafe { ((*c.chunk).base(), (*c.chunk).used.load(Ordering::Acquire)) };
            if c.off >= used {
                c.total += (CHUNK - c.off) as u64;
                // SAFETY: the producer linked `next` before publishing bytes beyond this
                // chunk, and bytes beyond it are published (the skip was counted in them).
                let next = unsafe { (*c.chunk).next.load(Ordering::Acquire) };
                let old = std::mem::replace(&mut c.chunk, next);
                c.off = 0;
                Self::recycle(&inner, old);
                if c.total == c.seen {
                    return &[];
                }
                continue;
            }
            let avail = ((c.seen - c.total) as usize).min(used - c.off);
            // SAFETY: the chunk is live, as above.
            #[cfg(loom)]
            unsafe {
                (*c.chunk).touch(c.off, avail, false)
            };
            // SAFETY: these bytes are published by the producer and not yet consumed.
            return unsafe { std::slice::from_raw_parts(base.add(c.off), avail) };
        }
    }

    /// Consumes `n` bytes of what [`ByteConsumer::peek`] returned.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        let c = self.side();
        c.off += n;
        c.total += n as u64;
    }

    /// Published bytes not read yet.
    pub(crate) fn backlog(&self) -> usize {
        let c = self.side();
        (self.inner.published.load(Ordering::Acquire) - c.total) as usize
    }

    /// True when nothing published is left to read.
    pub(crate) fn is_empty(&self) -> bool {
        let c = self.side();
        c.total == self.inner.published.load(Ordering::Acquire)
    }

    fn recycle(inner: &Inner, old: *mut Chunk) {
        let prev = inner.spare.swap(old, Ordering::AcqRel);
        if !prev.is_null() {
            // SAFETY: a chunk in the spare slot is referenced by nobody else.
            drop(unsafe { Box::from_raw(prev) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(p: &mut ByteProducer, rec: &[u8]) {
        p.reserve(rec.len()).copy_from_slice(rec);
    }

    fn drain(c: &mut ByteConsumer) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = c.peek();
            if b.is_empty() {
                return out;
            }
            let n = b.len();
            out.extend_from_slice(b);
            c.consume(n);
        }
    }

    #[cfg_attr(miri, ignore)] // 5000 records built byte by byte: minutes in Miri
    #[test]
    fn records_cross_chunks_whole_and_in_order() {
        let (mut p, mut c) = byte_queue();
        assert!(c.peek().is_empty());
        let mut expect = Vec::new();
        for i in 0..5000u32 {
            let len = 1 + (i as usize * 37) % 300;
            let rec: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
            put(&mut p, &rec);
            expect.extend_from_slice(&rec);
            if i % 7 == 0 {
                p.publish();
            }
        }
        assert!(!p.all_published());
        p.publish();
        let got = drain(&mut c);
        assert_eq!(got.len(), expect.len());
        assert!(got == expect);
        assert!(c.is_empty());
    }

    #[test]
    fn unpublished_records_stay_invisible() {
        let (mut p, mut c) = byte_queue();
        put(&mut p, &[1, 2, 3]);
        p.publish();
        put(&mut p, &[4, 5]);
        assert_eq!(c.peek(), &[1, 2, 3]);
        c.consume(3);
        assert!(c.peek().is_empty());
        assert!(c.is_empty());
        p.publish();
        assert_eq!(c.peek(), &[4, 5]);
    }

    #[cfg_attr(miri, ignore)] // 2x10^5 records, 2 threads: minutes in Miri; see testing
    #[test]
    fn a_producer_and_a_consumer_thread_lose_nothing() {
        let (mut p, mut c) = byte_queue();
        let n = 200_000u32;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                let len = 5 + (i as usize % 61);
                let rec = p.reserve(len);
                rec[0] = 0;
                rec[1..5].copy_from_slice(&i.to_le_bytes());
                for b in &mut rec[5..] {
                    *b = (i % 63) as u8;
                }
                p.publish();
            }
        });
        let mut next = 0u32;
        let mut pending: Vec<u8> = Vec::new();
        while next < n {
            let b = c.peek();
            if b.is_empty() {
                std::hint::spin_loop();
                continue;
            }
            let k = b.len();
            pending.extend_from_slice(b);
            c.consume(k);
            while pending.len() >= 5 {
                let len = 5 + (next as usize % 61);
                if pending.len() < len {
                    break;
                }
                let got = u32::from_le_bytes(pending[1..5].try_into().unwrap());
                assert_eq!(got, next);
                assert!(pending[5..len].iter().all(|&b| b == (next % 63) as u8));
                pending.drain(..len);
                next += 1;
            }
        }
        t.join().unwrap();
        assert!(c.is_empty());
    }
}

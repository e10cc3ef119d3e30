//! A single-producer single-consumer queue of chunks, the storage under every pipe.
//!
//! The producer fills slots of the tail chunk and publishes a running count with a release store;
//! the consumer reads slots up to that count. No compare-and-swap on either side: a push is a
//! slot write plus one store, a pop one load (amortised) plus a slot read. Chunks hold `CHUNK`
//! items; the consumer hands an emptied chunk back to the producer through a one-slot spare, so a
//! steady stream allocates nothing.
//!
//! Safety rests on the split of ownership: the producer-side fields are touched only through
//! [`Producer`], the consumer-side fields only through [`Consumer`], and there is exactly one of
//! each per queue (they are not `Clone`).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;

use crate::sync::cell;
use crate::sync::{Arc, AtomicPtr, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

#[cfg(not(loom))]
const CHUNK: usize = 256;
/// Two slots a chunk under loom: a model of a few items crosses chunk boundaries.
#[cfg(loom)]
const CHUNK: usize = 2;

struct Chunk<T> {
    slots: [cell::UnsafeCell<MaybeUninit<T>>; CHUNK],
    next: AtomicPtr<Chunk<T>>,
}

impl<T> Chunk<T> {
    fn alloc() -> *mut Chunk<T> {
        let c: Box<Chunk<T>> = Box::new(Chunk {
            // SAFETY: an array of UnsafeCell<MaybeUninit<T>> needs no initialisation.
            #[cfg(not(loom))]
            slots: unsafe { MaybeUninit::uninit().assume_init() },
            // loom's cells carry their own state.
            #[cfg(loom)]
            slots: std::array::from_fn(|_| cell::UnsafeCell::new(MaybeUninit::uninit())),
            next: AtomicPtr::new(ptr::null_mut()),
        });
        Box::into_raw(c)
    }
}

struct ProducerSide<T> {
    chunk: *mut Chunk<T>,
    pos: usize,
    count: usize,
}

struct ConsumerSide<T> {
    chunk: *mut Chunk<T>,
    pos: usize,
    count: usize,
    /// The producer's count as last seen.
    seen: usize,
}

/// The fields each side writes for every item sit on cache lines of their own (the published
/// count, the producer's position, the consumer's position), in this order (`repr(C)`).
/// Sharing one line would move it between the two cores on every push and every pop.
#[repr(C)]
struct Inner<T> {
    /// Items pushed so far (published by the producer).
    produced: CachePadded<AtomicUsize>,
    prod: UnsafeCell<ProducerSide<T>>,
    /// The consumer's side, and an emptied chunk it returns to the producer for reuse (touched
    /// once per chunk).
    cons: CachePadded<UnsafeCell<ConsumerSide<T>>>,
    spare: AtomicPtr<Chunk<T>>,
}

// SAFETY: items move from the producer thread to the consumer thread (T: Send); the producer and
// consumer sides are each used by exactly one thread at a time (see the module docs).
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as above; shared access goes through atomics or the side owned by the caller.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Exclusive access: drop the items still queued (published or not), then free every
        // chunk.
        let produced = self.prod.get_mut().count;
        let cons = self.cons.get_mut();
        let mut chunk = cons.chunk;
        let mut pos = cons.pos;
        let mut count = cons.count;
        while count < produced {
            if pos == CHUNK {
                // SAFETY: the producer linked `next` before writing into it.
                let next = unsafe { (*chunk).next.load(Ordering::Acquire) };
                // SAFETY: chunk was allocated by Chunk::alloc and is no longer referenced.
                drop(unsafe { Box::from_raw(chunk) });
                chunk = next;
                pos = 0;
            }
            // SAFETY: slots below `produced` and at or above the consumer's count are initialised.
            unsafe { (*chunk).slots[pos].with_mut(|s| (*s).assume_init_drop()) };
            pos += 1;
            count += 1;
        }
        while !chunk.is_null() {
            // SAFETY: chunk came from Chunk::alloc; `next` is null past the tail.
            let next = unsafe { (*chunk).next.load(Ordering::Acquire) };
            // SAFETY: as above; no slot of it holds a live item any more.
            drop(unsafe { Box::from_raw(chunk) });
            chunk = next;
        }
        let spare = crate::sync::ptr_get_mut(&mut self.spare);
        if !spare.is_null() {
            // SAFETY: the spare came from Chunk::alloc and is referenced nowhere else.
            drop(unsafe { Box::from_raw(spare) });
        }
    }
}

/// The pushing end.
pub struct Producer<T> {
    inner: Arc<Inner<T>>,
}

/// The popping end.
pub struct Consumer<T> {
    inner: Arc<Inner<T>>,
}

/// A new queue.
pub fn queue<T: Send>() -> (Producer<T>, Consumer<T>) {
    let first = Chunk::<T>::alloc();
    let inner = Arc::new(Inner {
        produced: CachePadded::new(AtomicUsize::new(0)),
        spare: AtomicPtr::new(ptr::null_mut()),
        prod: UnsafeCell::new(ProducerSide {
            chunk: first,
            pos: 0,
            count: 0,
        }),
        cons: CachePadded::new(UnsafeCell::new(ConsumerSide {
            chunk: first,
            pos: 0,
            count: 0,
            seen: 0,
        })),
    });
    (
        Producer {
            inner: inner.clone(),
        },
        Consumer { inner },
    )
}

impl<T> Producer<T> {
    /// Appends an item and publishes it (with any item pushed unpublished before it).
    #[inline]
    pub fn push(&mut self, item: T) {
        self.push_unpublished(item);
        self.publish();
    }

    /// Items pushed so far (published or not).
    pub fn pushed(&self) -> usize {
        // SAFETY: only the single Producer touches the producer side.
        unsafe { (*self.inner.prod.get()).count }
    }

    /// Makes every item pushed so far visible to the consumer.
    #[inline]
    pub fn publish(&mut self) {
        // SAFETY: only the single Producer touches the producer side.
        let count = unsafe { (*self.inner.prod.get()).count };
        self.inner.produced.store(count, Ordering::Release);
    }

    /// Appends an item the consumer does not see until the next [`Producer::publish`] (or
    /// [`Producer::push`]): the frames of a multipart message become visible together.
    #[inline]
    pub fn push_unpublished(&mut self, item: T) {
        // SAFETY: only the single Producer touches the producer side.
        let p = unsafe { &mut *self.inner.prod.get() };
        if p.pos == CHUNK {
            let mut next = self.inner.spare.swap(ptr::null_mut(), Ordering::Acquire);
            if next.is_null() {
                next = Chunk::alloc();
            } else {
                // SAFETY: the spare is exclusively ours now; reset its link.
                unsafe { (*next).next.store(ptr::null_mut(), Ordering::Relaxed) };
            }
            // SAFETY: p.chunk is the live tail chunk; linking happens before any item in `next`
            // is published (the Release store of `produced` below orders it).
            unsafe { (*p.chunk).next.store(next, Ordering::Release) };
            p.chunk = next;
            p.pos = 0;
        }
        // SAFETY: the slot at p.pos has not been published, so the consumer does not read it.
        unsafe { (*p.chunk).slots[p.pos].with_mut(|s| (*s).write(item)) };
        p.pos += 1;
        p.count += 1;
    }
}

impl<T> Consumer<T> {
    /// Removes the oldest item, if any.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        // SAFETY: only the single Consumer touches the consumer side.
        let c = unsafe { &mut *self.inner.cons.get() };
        if c.count == c.seen {
            c.seen = self.inner.produced.load(Ordering::Acquire);
            if c.count == c.seen {
                return None;
            }
        }
        if c.pos == CHUNK {
            // SAFETY: the producer linked `next` before publishing items in it (Acquire above).
            let next = unsafe { (*c.chunk).next.load(Ordering::Acquire) };
            let old = c.chunk;
            c.chunk = next;
            c.pos = 0;
            // Hand the emptied chunk back for reuse; free it if a spare is already waiting.
            let prev = self.inner.spare.swap(old, Ordering::AcqRel);
            if !prev.is_null() {
                // SAFETY: prev came from Chunk::alloc and nobody else references it.
                drop(unsafe { Box::from_raw(prev) });
            }
        }
        // SAFETY: the slot is below the published count, so it was written and not yet read.
        let item = unsafe { (*c.chunk).slots[c.pos].with(|s| (*s).assume_init_read()) };
        c.pos += 1;
        c.count += 1;
        Some(item)
    }

    /// Items popped so far.
    pub fn popped(&self) -> usize {
        // SAFETY: only the single Consumer touches the consumer side; this is a read.
        unsafe { (*self.inner.cons.get()).count }
    }

    /// Items published and not yet popped.
    pub fn available(&self) -> usize {
        // SAFETY: only the single Consumer touches the consumer side; this is a read.
        let c = unsafe { &*self.inner.cons.get() };
        self.inner.produced.load(Ordering::Acquire) - c.count
    }

    /// True when no item is available now.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // SAFETY: only the single Consumer touches the consumer side; this is a read.
        let c = unsafe { &*self.inner.cons.get() };
        c.count == self.inner.produced.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[cfg_attr(miri, ignore)] // 10^5 items, 2 threads: minutes in Miri; see testing
    #[test]
    fn order_across_chunks_and_threads() {
        let (mut p, mut c) = queue::<u64>();
        let n = 100_000u64;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                p.push(i);
            }
        });
        let mut next = 0;
        while next < n {
            if let Some(v) = c.pop() {
                assert_eq!(v, next);
                next += 1;
            } else {
                std::hint::spin_loop();
            }
        }
        t.join().unwrap();
        assert!(c.pop().is_none());
        assert!(c.is_empty());
    }

    #[test]
    fn unpublished_items_appear_together() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct D(usize);
        impl Drop for D {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        let (mut p, mut c) = queue::<D>();
        // Across a chunk boundary: nothing is visible until the publish.
        for i in 0..CHUNK + 5 {
            p.push_unpublished(D(i));
            assert!(c.is_empty());
            assert!(c.pop().is_none());
        }
        p.publish();
        for i in 0..CHUNK + 5 {
            assert_eq!(c.pop().map(|d| d.0), Some(i));
        }
        assert!(c.pop().is_none());
        // Unpublished items left behind are still dropped, once.
        let before = DROPS.load(Ordering::SeqCst);
        p.push(D(0));
        p.push_unpublished(D(1));
        p.push_unpublished(D(2));
        drop((p, c));
        assert_eq!(DROPS.load(Ordering::SeqCst) - before, 3);
    }

    #[test]
    fn leftovers_are_dropped_once() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct D;
        impl Drop for D {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        let (mut p, mut c) = queue::<D>();
        for _ in 0..(CHUNK * 2 + 7) {
            p.push(D);
        }
        for _ in 0..(CHUNK + 3) {
            drop(c.pop().unwrap());
        }
        assert_eq!(DROPS.load(Ordering::SeqCst), CHUNK + 3);
        drop(p);
        drop(c);
        assert_eq!(DROPS.load(Ordering::SeqCst), CHUNK * 2 + 7);
    }
}

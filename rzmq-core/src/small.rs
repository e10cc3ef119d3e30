//! Per-thread caches of small frame storage: the bodies of frames too big to be inline and too
//! small for [`crate::pool`] (up to [`SMALL_MAX`] bytes).
//!
//! A frame is usually allocated on one thread (the application's `send`) and dropped on another
//! (the I/O thread, once the frame is encoded), and the reverse on the receiving side. With the
//! system allocator every such free takes the allocating thread's arena lock, which the
//! allocating thread takes for its next frame at the same time: a contended lock per message.
//! Here a dropped body whose storage nobody else shares goes to the dropping thread's cache of its
//! size class: first to refill the thread's own free list, then into an outgoing batch that,
//! once full, is handed to a global list per class under one lock. A thread whose free list is
//! empty takes a whole batch from there. So storage crosses threads a batch at a time, with one
//! lock per batch instead of one per frame.
//!
//! Sizes come in classes of a quarter octave from 64 bytes to [`SMALL_MAX`], so a body wastes
//! less than a quarter of its storage. Everything is bounded: per thread and class one free list
//! and one outgoing batch of `BATCH_BYTES` (64 KiB), and globally `GLOBAL_MAX_BYTES` (4 MiB) per
//! class and `GLOBAL_TOTAL_BYTES` (16 MiB) in all; storage beyond that goes back to the system
//! allocator. Storage taken from a cache holds stale bytes of an earlier frame: callers that
//! expose bytes not yet written clear them.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The largest body cached here.
pub(crate) const SMALL_MAX: usize = 16 * 1024;
/// The smallest class.
const MIN_CLASS: usize = 64;
/// Classes: 64, then four per octave up to SMALL_MAX.
const CLASSES: usize = 1 + 4 * (SMALL_MAX.trailing_zeros() - MIN_CLASS.trailing_zeros()) as usize;
/// Bytes of storage per batch (and per thread-local free list) of a class.
const BATCH_BYTES: usize = 64 * 1024;
/// Bytes of storage the global list of a class may hold.
const GLOBAL_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of storage the global lists may hold in all.
const GLOBAL_TOTAL_BYTES: usize = 16 * 1024 * 1024;
/// What a cached body costs besides its bytes: the `Arc` counts and the allocator's header.
const OVERHEAD: usize = 32;

/// The class whose size is the smallest one holding `len` bytes; None above [`SMALL_MAX`].
#[inline]
fn class_of(len: usize) -> Option<usize> {
    if len > SMALL_MAX {
        return None;
    }
    if len <= MIN_CLASS {
        return Some(0);
    }
    // 2^k < len <= 2^(k+1); the octave above 2^k has four steps of 2^(k-2).
    let k = (usize::BITS - 1 - (len - 1).leading_zeros()) as usize;
    let step = 1usize << (k - 2);
    let sub = (len - (1 << k)).div_ceil(step);
    Some((k - MIN_CLASS.trailing_zeros() as usize) * 4 + sub)
}

/// The size of class `c`, computed (see [`CLASS_SIZES`]).
const fn class_size_of(c: usize) -> usize {
    if c == 0 {
        return MIN_CLASS;
    }
    let k = MIN_CLASS.trailing_zeros() as usize + (c - 1) / 4;
    let sub = (c - 1) % 4 + 1;
    (1 << k) + sub * (1 << (k - 2))
}

/// Class sizes and batch lengths, computed once at compile time: a drop on the I/O thread
/// looks them up instead of dividing for every frame.
const CLASS_SIZES: [usize; CLASSES] = {
    let mut a = [0; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        a[c] = class_size_of(c);
        c += 1;
    }
    a
};

/// How many bodies of each class make a batch: `BATCH_BYTES` worth, between 4 and 256.
const BATCH_LENS: [usize; CLASSES] = {
    let mut a = [0; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        let n = BATCH_BYTES / class_size_of(c);
        a[c] = if n < 4 {
            4
        } else if n > 256 {
            256
        } else {
            n
        };
        c += 1;
    }
    a
};

/// The size of class `c`.
#[inline]
fn class_size(c: usize) -> usize {
    CLASS_SIZES[c]
}

/// How many bodies of class `c` make a batch.
#[inline]
fn batch_len(c: usize) -> usize {
    BATCH_LENS[c]
}

/// The storage size a body of `len` bytes gets (`len` itself above [`SMALL_MAX`]).
pub(crate) fn capacity_for(len: usize) -> usize {
    class_of(len).map_or(len, class_size)
}

type Batch = Vec<Arc<[u8]>>;

struct Local {
    /// Storage this thread allocates from.
    free: Vec<Batch>,
    /// Storage this thread dropped beyond its free list, on its way to the global list.
    out: Vec<Batch>,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The thread is exiting: free what the hot slot holds and keep it from holding more
        // (a later `give` on this thread finds LOCAL gone and lets the storage go).
        let held = HOT.with(|h| h.replace(HOT_GONE));
        if !held.is_null() {
            // SAFETY: a slot value with a non-null pointer came from `Arc::into_raw` in
            // `hot_give` and was not taken back since (see `Hot`).
            drop(unsafe { Arc::from_raw(held) });
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local {
        free: (0..CLASSES).map(|_| Vec::new()).collect(),
        out: (0..CLASSES).map(|_| Vec::new()).collect(),
    });
}

/// The hot slot: one body this thread dropped last, for its next `take` of the same class. A
/// sender whose frames are copied into the framed lane (or inline onto the wire) drops each
/// body on its own thread right after allocating it; the slot serves that round trip with one
/// thread-local access and no `RefCell` or `Vec` work. It has no destructor of its own (so
/// reaching it never fails): `Local`'s destructor frees what it holds, and the slot only takes
/// storage once `LOCAL` exists on the thread.
///
/// Its value is an `Arc::into_raw` pointer holding a body, or one of the null markers below,
/// told apart by their length.
type Hot = Cell<*const [u8]>;

/// `LOCAL` may not exist on this thread yet: the slot takes nothing until it does.
const HOT_FRESH: *const [u8] = std::ptr::slice_from_raw_parts(std::ptr::null(), 0);
/// Empty, and `LOCAL` exists.
const HOT_EMPTY: *const [u8] = std::ptr::slice_from_raw_parts(std::ptr::null(), 1);
/// `LOCAL` was destroyed (the thread is exiting): the slot takes nothing.
const HOT_GONE: *const [u8] = std::ptr::slice_from_raw_parts(std::ptr::null(), 2);

/// Whether slot value `p` is the marker `m`.
#[inline]
fn is_marker(p: *const [u8], m: *const [u8]) -> bool {
    p.is_null() && p.len() == m.len()
}

thread_local! {
    static HOT: Hot = const { Cell::new(HOT_FRESH) };
}

/// The body in the hot slot if it is `size` bytes long.
#[inline]
fn hot_take(size: usize) -> Option<Arc<[u8]>> {
    HOT.with(|h| {
        let p = h.get();
        if p.is_null() || p.len() != size {
            return None;
        }
        h.set(HOT_EMPTY);
        // SAFETY: a non-null slot value came from `Arc::into_raw` in `hot_give`; the slot is
        // empty now, so this is the only handle made from it.
        Some(unsafe { Arc::from_raw(p) })
    })
}

/// Puts a unique body of a class size into an empty hot slot (None), or hands it back.
#[inline]
fn hot_give(buf: Arc<[u8]>) -> Option<Arc<[u8]>> {
    HOT.with(|h| {
        if !is_marker(h.get(), HOT_EMPTY) {
            return Some(buf);
        }
        h.set(Arc::into_raw(buf));
        None
    })
}

static GLOBAL: [Mutex<Vec<Batch>>; CLASSES] = [const { Mutex::new(Vec::new()) }; CLASSES];
/// Bytes held by all global lists (OVERHEAD included).
static GLOBAL_HELD: AtomicUsize = AtomicUsize::new(0);

/// Bytes a full batch of class `c` holds.
fn batch_bytes(c: usize) -> usize {
    batch_len(c) * (class_size(c) + OVERHEAD)
}

/// Cached storage for a body of `len` bytes: unique, `capacity_for(len)` bytes long, holding
/// stale bytes. None when the caches of its class are empty (or `len` is not cached).
#[inline]
pub(crate) fn take(len: usize) -> Option<Arc<[u8]>> {
    let c = class_of(len)?;
    if let Some(b) = hot_take(class_size(c)) {
        return Some(b);
    }
    take_cached(c)
}

/// [`take`] past the hot slot: the thread's free list of class `c`, refilled from the global
/// list.
#[inline(never)]
fn take_cached(c: usize) -> Option<Arc<[u8]>> {
    // try_with: during thread teardown the cache may be gone; then the allocator serves.
    LOCAL
        .try_with(|l| {
            let mut l = l.borrow_mut();
            if let Some(b) = l.free[c].pop() {
                return Some(b);
            }
            let batch = GLOBAL[c].lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            GLOBAL_HELD.fetch_sub(batch_bytes(c), Ordering::Relaxed);
            l.free[c] = batch;
            l.free[c].pop()
        })
        .ok()
        .flatten()
}

/// True when `buf` has no other handle. Frame storage never has weak handles (nothing in rzmq
/// downgrades it), so one strong count means unique: a load and a fence, where `Arc::get_mut`
/// takes a compare-and-swap and a store, on every message.
#[inline]
pub(crate) fn is_unique(buf: &Arc<[u8]>) -> bool {
    if Arc::strong_count(buf) != 1 {
        return false;
    }
    // Acquire: the other handles' last uses (before their Release decrements) happen before
    // whatever the caller does with the storage now.
    fence(Ordering::Acquire);
    true
}

/// `buf`'s bytes, writable, when no other handle shares it (see [`is_unique`]).
#[inline]
pub(crate) fn unique_mut(buf: &mut Arc<[u8]>) -> Option<&mut [u8]> {
    if !is_unique(buf) {
        return None;
    }
    // SAFETY: ours is the only handle and no weak one exists, so nothing else reaches the bytes
    // while `&mut buf` is held; the pointer comes from the Arc's own (writable) allocation, as
    // `Arc::get_mut` would return it.
    Some(unsafe { &mut *(Arc::as_ptr(buf) as *mut [u8]) })
}

/// Takes back the storage of a dropped body (storage never given a weak handle, see
/// [`is_unique`]). Storage shared with another handle, or not of a
/// class size, is simply dropped.
#[inline]
pub(crate) fn give(buf: Arc<[u8]>) {
    let Some(c) = class_of(buf.len()) else {
        return;
    };
    // Only storage exactly of its class size is reused, and only when no other handle exists
    // (is_unique also orders the other handles' last uses before our reuse).
    if class_size(c) != buf.len() || !is_unique(&buf) {
        return;
    }
    if let Some(buf) = hot_give(buf) {
        give_cached(c, buf);
    }
}

/// [`give`] past the hot slot: into the thread's free list of class `c`, or its outgoing batch.
#[inline(never)]
fn give_cached(c: usize, buf: Arc<[u8]>) {
    let _ = LOCAL.try_with(|l| {
        let mut l = l.borrow_mut();
        HOT.with(|h| {
            if is_marker(h.get(), HOT_FRESH) {
                // LOCAL exists now, so its destructor will free what the slot holds.
                h.set(HOT_EMPTY);
            }
        });
        let n = batch_len(c);
        if l.free[c].len() < n {
            l.free[c].push(buf);
            return;
        }
        l.out[c].push(buf);
        if l.out[c].len() >= n {
            let batch = std::mem::take(&mut l.out[c]);
            let bytes = batch_bytes(c);
            let mut g = GLOBAL[c].lock().unwrap_or_else(|e| e.into_inner());
            let fits_class = (g.len() + 1) * bytes <= GLOBAL_MAX_BYTES.max(bytes);
            // Reserve room in the total, only if there is some.
            if fits_class
                && GLOBAL_HELD
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                        (h + bytes <= GLOBAL_TOTAL_BYTES).then_some(h + bytes)
                    })
                    .is_ok()
            {
                g.push(batch);
            } else {
                // Enough cached: this batch goes back to the allocator (after the lock).
                drop(g);
                drop(batch);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_tightly() {
        assert_eq!(class_size(0), 64);
        assert_eq!(class_size(CLASSES - 1), SMALL_MAX);
        let mut last = 0;
        for c in 0..CLASSES {
            assert!(class_size(c) > last, "classes increase");
            last = class_size(c);
            assert_eq!(class_of(class_size(c)), Some(c));
        }
        for len in 1..=SMALL_MAX {
            let c = class_of(len).unwrap();
            let size = class_size(c);
            assert!(size >= len, "{len} fits its class");
            assert!(c == 0 || class_size(c - 1) < len, "{len}: smallest class");
            assert!(len <= 64 || size * 4 <= len * 5, "{len}: within a quarter");
        }
        for c in 0..CLASSES {
            assert_eq!(batch_len(c), (BATCH_BYTES / class_size(c)).clamp(4, 256));
        }
        assert_eq!(class_of(SMALL_MAX + 1), None);
        assert_eq!(capacity_for(SMALL_MAX + 1), SMALL_MAX + 1);
    }

    #[test]
    fn storage_returns_to_its_class_and_crosses_threads_in_batches() {
        // A size class no other test uses.
        let len = 5000;
        let cap = capacity_for(len);
        let fresh = || -> Arc<[u8]> { vec![0u8; cap].into() };
        // Dropped on this thread: reused by this thread.
        let a = fresh();
        let p = a.as_ptr();
        give(a);
        let b = take(len).expect("cached");
        assert_eq!(b.as_ptr(), p);
        // Shared storage is not cached.
        let c = fresh();
        let keep = c.clone();
        give(c);
        assert!(take(len).is_none());
        drop((b, keep));
        // Another thread drops more than its free list (n) and hot slot (1) hold: full
        // batches reach this one.
        let n = batch_len(class_of(len).unwrap());
        let sent: Vec<Arc<[u8]>> = (0..3 * n + 1).map(|_| fresh()).collect();
        let ptrs: std::collections::HashSet<usize> =
            sent.iter().map(|b| b.as_ptr() as usize).collect();
        std::thread::spawn(move || sent.into_iter().for_each(give))
            .join()
            .unwrap();
        let mut got = 0;
        while let Some(b) = take(len) {
            assert!(ptrs.contains(&(b.as_ptr() as usize)));
            assert_eq!(b.len(), cap);
            got += 1;
            drop(b);
        }
        // The other thread kept its free list (n) and hot slot (1) and handed over two full
        // batches; it has exited, so its own list is gone.
        assert_eq!(got, 2 * n);
    }

    #[test]
    fn the_hot_slot_serves_the_next_take_and_is_freed_with_its_thread() {
        // A size class no other test uses.
        let len = 3000;
        let cap = capacity_for(len);
        let fresh = move || -> Arc<[u8]> { vec![0u8; cap].into() };
        let watched = std::thread::spawn(move || {
            // The thread's first drop sets up its cache; the slot takes storage from then on.
            give(fresh());
            let a = fresh();
            let p = a.as_ptr();
            give(a);
            let b = take(len).expect("cached");
            assert_eq!(b.as_ptr(), p, "the last body dropped comes back first");
            assert_eq!(b.len(), cap);
            // Left in the slot at thread exit: a weak handle (which the cache never makes
            // itself) tells whether the storage is freed then.
            let w = Arc::downgrade(&b);
            give(b);
            assert!(w.upgrade().is_some(), "held by the slot");
            w
        })
        .join()
        .unwrap();
        assert!(watched.upgrade().is_none(), "freed when its thread exited");
    }
}

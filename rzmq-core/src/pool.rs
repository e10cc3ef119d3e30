//! Recycled storage for large frames.
//!
//! Frames of [`POOL_MIN`] bytes and more (and the decoder's receive batches) take their storage
//! from here and give it back when their last handle drops, on whichever thread that is. Without
//! it every large frame is a fresh `mmap` (page faults on first touch, zeroing, and a TLB
//! shoot-down at `munmap`), or a `calloc` that clears memory the reader overwrites anyway: at
//! 1 MiB per message those cost more than the kernel's copy.
//!
//! Storage comes in power-of-two classes from `POOL_MIN` to [`POOL_MAX`]; each class keeps at most
//! [`CLASS_KEEP`] bytes (but at least two buffers) and all classes together at most
//! [`TOTAL_KEEP`] bytes. Larger requests are plain allocations. Recycled storage holds the bytes
//! of the frame that used it last: callers either clear it ([`take_zeroed`]) or overwrite every
//! byte they expose ([`take`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Smallest request served from the pool.
pub const POOL_MIN: usize = 32 * 1024;
/// Largest class kept in the pool.
pub const POOL_MAX: usize = 16 * 1024 * 1024;
/// Most bytes one class keeps (at least two buffers are kept).
pub const CLASS_KEEP: usize = 16 * 1024 * 1024;
/// Most bytes the pool keeps in all.
pub const TOTAL_KEEP: usize = 64 * 1024 * 1024;

const CLASSES: usize = (POOL_MAX.trailing_zeros() - POOL_MIN.trailing_zeros() + 1) as usize;

/// Free buffers by class and the bytes they hold.
struct Pool {
    free: [Mutex<Vec<Box<[u8]>>>; CLASSES],
    kept: AtomicUsize,
}

static POOL: Pool = Pool::new();

/// The class index and capacity serving `len`, or None when the pool does not serve it.
fn class_of(len: usize) -> Option<(usize, usize)> {
    if !(POOL_MIN..=POOL_MAX).contains(&len) {
        return None;
    }
    let cap = len.next_power_of_two();
    Some((
        (cap.trailing_zeros() - POOL_MIN.trailing_zeros()) as usize,
        cap,
    ))
}

impl Pool {
    const fn new() -> Pool {
        Pool {
            free: [const { Mutex::new(Vec::new()) }; CLASSES],
            kept: AtomicUsize::new(0),
        }
    }

    fn take(&self, len: usize) -> (Box<[u8]>, bool) {
        let Some((class, cap)) = class_of(len) else {
            return (vec![0u8; len].into_boxed_slice(), true);
        };
        let recycled = self.free[class]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        match recycled {
            Some(b) => {
                self.kept.fetch_sub(b.len(), Ordering::Relaxed);
                (b, false)
            }
            // calloc: large sizes come as fresh zero pages, touched only where written.
            None => (vec![0u8; cap].into_boxed_slice(), true),
        }
    }

    fn give(&self, b: Box<[u8]>) {
        let cap = b.len();
        let Some((class, exact)) = class_of(cap) else {
            return;
        };
        if exact != cap {
            return;
        }
        let mut free = self.free[class].lock().unwrap_or_else(|e| e.into_inner());
        let fits_class = free.len() < 2 || (free.len() + 1) * cap <= CLASS_KEEP;
        if fits_class && self.kept.load(Ordering::Relaxed) + cap <= TOTAL_KEEP {
            self.kept.fetch_add(cap, Ordering::Relaxed);
            free.push(b);
        }
    }
}

/// Storage of at least `len` bytes; the second value is true when it is fresh (all zero).
/// Contents of recycled storage are the bytes a previous frame left.
pub fn take(len: usize) -> (Box<[u8]>, bool) {
    POOL.take(len)
}

/// Storage of at least `len` bytes, the first `len` of them zero.
pub fn take_zeroed(len: usize) -> Box<[u8]> {
    let (mut b, fresh) = take(len);
    if !fresh {
        b[..len].fill(0);
    }
    b
}

/// Gives storage back; kept for reuse when its class has room, freed otherwise.
pub fn give(b: Box<[u8]>) {
    POOL.give(b)
}

/// Bytes the pool keeps for reuse now (for the memory benchmark).
pub fn kept_bytes() -> usize {
    POOL.kept.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_within_bounds() {
        assert_eq!(class_of(POOL_MIN - 1), None);
        assert_eq!(class_of(POOL_MIN), Some((0, POOL_MIN)));
        assert_eq!(class_of(POOL_MIN + 1), Some((1, 2 * POOL_MIN)));
        assert_eq!(class_of(POOL_MAX), Some((CLASSES - 1, POOL_MAX)));
        assert_eq!(class_of(POOL_MAX + 1), None);
    }

    #[test]
    fn recycles_and_bounds_what_it_keeps() {
        let pool = Pool::new();
        let len = 3 * 1024 * 1024 + 5;
        let (mut b, fresh) = pool.take(len);
        assert!(fresh);
        assert_eq!(b.len(), 4 * 1024 * 1024);
        b[..len].fill(0xAB);
        let addr = b.as_ptr();
        pool.give(b);
        assert_eq!(pool.kept.load(Ordering::Relaxed), 4 * 1024 * 1024);
        let (b2, fresh) = pool.take(len);
        assert!(!fresh);
        assert_eq!(b2.as_ptr(), addr, "the buffer given back is reused");
        assert_eq!(b2[0], 0xAB, "take leaves recycled bytes as they were");
        assert_eq!(pool.kept.load(Ordering::Relaxed), 0);
        pool.give(b2);
        // A class keeps CLASS_KEEP bytes: 4 buffers of 4 MiB; the fifth is freed.
        for _ in 0..5 {
            pool.give(vec![0u8; 4 * 1024 * 1024].into_boxed_slice());
        }
        assert_eq!(pool.kept.load(Ordering::Relaxed), CLASS_KEEP);
        // Odd sizes and sizes outside the classes are not kept.
        pool.give(vec![0u8; POOL_MIN + 3].into_boxed_slice());
        pool.give(vec![0u8; 100].into_boxed_slice());
        assert_eq!(pool.kept.load(Ordering::Relaxed), CLASS_KEEP);
        // All classes together keep at most TOTAL_KEEP.
        for _ in 0..8 {
            pool.give(vec![0u8; POOL_MAX].into_boxed_slice());
        }
        for _ in 0..16 {
            pool.give(vec![0u8; 8 * 1024 * 1024].into_boxed_slice());
        }
        assert!(pool.kept.load(Ordering::Relaxed) <= TOTAL_KEEP);
    }

    #[test]
    fn zeroed_storage_is_zero() {
        let z = take_zeroed(POOL_MIN + 7);
        assert!(z[..POOL_MIN + 7].iter().all(|&x| x == 0));
        give(z);
        let (b, fresh) = take(100);
        assert!(fresh);
        assert_eq!(b.len(), 100);
    }
}

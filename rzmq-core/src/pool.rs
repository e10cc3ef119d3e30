//! Recycled storage for large frames.
//!
//! Frames of [`POOL_MIN`] bytes and more (and the decoder's receive batches) take their storage
//! from here and give it back when their last handle drops, on whichever thread that is. Without
//! it every large frame is a fresh `mmap` (page faults on first touch, zeroing, and a TLB
//! shoot-down at `munmap`), or a `calloc` that clears memory the reader overwrites anyway: at
//! 1 MiB per message those cost more than the kernel's copy.
//!
//! Storage is anonymous memory mapped for it ([`Storage`]): fresh storage is zero without anyone
//! clearing it, and pages are only touched where written (a `calloc` of a size `malloc` serves from
//! its heap clears every byte). It comes in power-of-two classes from `POOL_MIN` to [`POOL_MAX`];
//! each class keeps at most [`CLASS_KEEP`] bytes (but at least two buffers) and all classes
//! together at most [`TOTAL_KEEP`] bytes. Larger requests are mapped and unmapped, never kept.
//! Recycled storage holds the bytes of the frame that used it last: callers either clear it
//! ([`take_zeroed`]) or overwrite every byte they expose ([`take`]).
//!
//! Storage for frames of 2 MiB and more starts on a 2 MiB boundary, and the whole 2 MiB regions
//! its first frame covers are advised for transparent huge pages (`map_huge`). A fresh 16 MiB
//! frame used to cost 4,096 page faults when the kernel first copied it; it now costs 8.
//! `RZMQ_HUGE_PAGES=0` keeps small pages.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where a storage's bytes start in its mapping: half a page in. The kernel copies frames to
/// and from sockets with `rep movsb`, which runs several times slower when the destination sits
/// a few bytes after the source modulo 4 KiB (store/load 4K aliasing, measured on this AMD EPYC
/// VM: a 1 MiB body sent from page-aligned storage took 570-1140 us in `writev`, 140-200 us from
/// storage 16+ bytes in). A socket's page fragments hold a frame's body a ZMTP header (9 bytes)
/// after a page boundary; half a page keeps both directions of copy far from that window.
const DATA_OFFSET: usize = 2048;
/// Page size assumed for mapping sizes (mmap rounds up to the real one anyway).
const PAGE: usize = 4096;

/// Anonymous memory, unmapped on drop; its bytes start `DATA_OFFSET` (half a page) into the
/// mapping.
pub struct Storage {
    /// The first usable byte (mapping start + DATA_OFFSET).
    ptr: NonNull<u8>,
    cap: usize,
}

/// Bytes mapped for a storage of `cap` usable bytes.
fn mapped_len(cap: usize) -> usize {
    (cap + DATA_OFFSET).next_multiple_of(PAGE)
}

/// The transparent huge page size (x86-64 and aarch64 with 4 KiB pages).
const HUGE: usize = 2 * 1024 * 1024;

/// Huge pages: 0 not decided yet (the environment's default on first use), 1 on, 2 off.
static HUGE_PAGES: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether large storage asks for huge pages: yes unless turned off by `set_huge_pages`
/// (the context option `ZMQ_RZMQ_HUGE_PAGES`) or, as its default, `RZMQ_HUGE_PAGES=0` (for
/// hosts where a huge page fault may stall on memory compaction longer than a service
/// tolerates). One relaxed load once decided.
pub fn huge_pages() -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match HUGE_PAGES.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = crate::env::core().huge_pages;
            let _ = HUGE_PAGES.compare_exchange(0, if on { 1 } else { 2 }, Relaxed, Relaxed);
            HUGE_PAGES.load(Relaxed) == 1
        }
    }
}

/// Turns huge pages on or off for large storage mapped from now on, in this process (the
/// pools are process-wide).
pub(crate) fn set_huge_pages(on: bool) {
    HUGE_PAGES.store(if on { 1 } else { 2 }, std::sync::atomic::Ordering::Relaxed);
}

/// `len` bytes of anonymous zeroed memory, page-aligned, or None when the system has none. The
/// caller owns the mapping and unmaps it (`munmap` of the same `len`).
pub fn map_anon(len: usize) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping with no address hint touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(p as *mut u8)
}

/// As [`map_anon`], starting on a [`HUGE`] boundary, its first `huge` bytes (a multiple of
/// `HUGE`, at most `len`) advised for transparent huge pages (`MADV_HUGEPAGE`, which kernels in
/// THP's default `madvise` mode wait for). A large frame then costs one page fault per 2 MiB
/// instead of 512: reading storage nobody wrote maps the kernel's shared huge zero page (the
/// kernel copying a fresh frame to a socket), a first write gets a whole huge page (a frame
/// read into fresh storage), and the copies in and out walk fewer page-table entries. Where the
/// kernel has no huge pages (or they are set to `never`) the advice is refused or ignored and
/// the mapping keeps small pages.
fn map_huge(len: usize, huge: usize) -> Option<NonNull<u8>> {
    debug_assert!(huge.is_multiple_of(HUGE) && huge <= len);
    // Over-map by HUGE, keep the aligned `len` bytes inside, unmap the rest.
    let p = map_anon(len + HUGE)?.as_ptr() as usize;
    let base = p.next_multiple_of(HUGE);
    let end = p + len + HUGE;
    // SAFETY: the two unmapped ranges lie inside the mapping just made, outside
    // [base, base + len), which stays mapped; all bounds are page-aligned (p and base are, len
    // is a multiple of PAGE), and empty ranges are skipped. madvise only advises.
    unsafe {
        if base > p {
            libc::munmap(p as *mut libc::c_void, base - p);
        }
        if end > base + len {
            libc::munmap((base + len) as *mut libc::c_void, end - base - len);
        }
        libc::madvise(base as *mut libc::c_void, huge, libc::MADV_HUGEPAGE);
    }
    NonNull::new(base as *mut u8)
}

// SAFETY: `Storage` exclusively owns its mapping, like a `Box<[u8]>`.
unsafe impl Send for Storage {}
// SAFETY: shared references only read through `Deref`; mutation needs `&mut`.
unsafe impl Sync for Storage {}

impl Storage {
    /// [`Storage::map_for`] a frame filling its storage.
    #[cfg(test)]
    fn map(cap: usize) -> Storage {
        Storage::map_for(cap, cap)
    }

    /// Maps `cap` bytes of zeroed memory (aborting as on allocation failure when none is left)
    /// for a first frame of `used` bytes: the whole [`HUGE`] regions that frame covers get
    /// transparent huge pages (see [`map_huge`]). Only those: a frame shorter than its class
    /// (a 3 MiB frame in 4 MiB storage) keeps small pages past its end, so huge pages hold no
    /// more memory than small ones would, but for the half page before the frame's first byte.
    fn map_for(cap: usize, used: usize) -> Storage {
        match Storage::try_map_for(cap, used) {
            Some(s) => s,
            None => std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(mapped_len(cap), PAGE)
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            ),
        }
    }

    /// As [`Storage::map_for`], None when the system refuses the mapping.
    fn try_map_for(cap: usize, used: usize) -> Option<Storage> {
        let len = mapped_len(cap);
        let huge = if huge_pages() {
            (DATA_OFFSET + used.min(cap)) / HUGE * HUGE
        } else {
            0
        };
        let p = if huge > 0 {
            map_huge(len, huge)
        } else {
            map_anon(len)
        };
        let p = p?;
        // SAFETY: the mapping is mapped_len(cap) > DATA_OFFSET bytes long.
        let data = unsafe { p.as_ptr().add(DATA_OFFSET) };
        // Never None (the mapping does not wrap around).
        NonNull::new(data).map(|ptr| Storage { ptr, cap })
    }

    /// Usable bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }
}

impl Deref for Storage {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the mapping is `cap` readable bytes, initialised (zero pages or written bytes),
        // alive until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }
}

impl DerefMut for Storage {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` created (it starts DATA_OFFSET before ptr and
        // is mapped_len(cap) long); nothing refers to it any more.
        unsafe {
            libc::munmap(
                self.ptr.as_ptr().sub(DATA_OFFSET) as *mut libc::c_void,
                mapped_len(self.cap),
            );
        }
    }
}

/// Smallest request served from the pool.
pub(crate) const POOL_MIN: usize = 32 * 1024;
/// Largest class kept in the pool.
pub(crate) const POOL_MAX: usize = 16 * 1024 * 1024;
/// Most bytes one class keeps (at least two buffers are kept).
pub(crate) const CLASS_KEEP: usize = 16 * 1024 * 1024;
/// Most bytes the pool keeps in all.
pub(crate) const TOTAL_KEEP: usize = 64 * 1024 * 1024;

const CLASSES: usize = (POOL_MAX.trailing_zeros() - POOL_MIN.trailing_zeros() + 1) as usize;

/// Free buffers by class and the bytes they hold.
struct Pool {
    free: [Mutex<Vec<Storage>>; CLASSES],
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

    fn take(&self, len: usize) -> (Storage, bool) {
        let Some((class, cap)) = class_of(len) else {
            return (Storage::map_for(len, len), true);
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
            None => (Storage::map_for(cap, len), true),
        }
    }

    fn give(&self, b: Storage) {
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
/// Contents of recycled storage are the bytes a previous frame left. Meant for `len` of
/// [`POOL_MIN`] and more (smaller requests still get a whole mapping).
pub(crate) fn take(len: usize) -> (Storage, bool) {
    POOL.take(len)
}

/// Fresh storage of exactly `len` bytes (any size, not served from the pool's classes), or None
/// when the system refuses the mapping. Untouched, it holds address space only: pages are
/// committed as they are first written.
pub(crate) fn try_take_fresh(len: usize) -> Option<Storage> {
    Storage::try_map_for(len, len)
}

/// Storage of at least `len` bytes, the first `len` of them zero.
pub(crate) fn take_zeroed(len: usize) -> Storage {
    let (mut b, fresh) = take(len);
    if !fresh {
        b[..len].fill(0);
    }
    b
}

/// Gives storage back; kept for reuse when its class has room, freed otherwise.
pub(crate) fn give(b: Storage) {
    POOL.give(b)
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
            pool.give(Storage::map(4 * 1024 * 1024));
        }
        assert_eq!(pool.kept.load(Ordering::Relaxed), CLASS_KEEP);
        // Odd sizes and sizes outside the classes are not kept.
        pool.give(Storage::map(POOL_MIN + 3));
        pool.give(Storage::map(100));
        assert_eq!(pool.kept.load(Ordering::Relaxed), CLASS_KEEP);
        // All classes together keep at most TOTAL_KEEP.
        for _ in 0..8 {
            pool.give(Storage::map(POOL_MAX));
        }
        for _ in 0..16 {
            pool.give(Storage::map(8 * 1024 * 1024));
        }
        assert!(pool.kept.load(Ordering::Relaxed) <= TOTAL_KEEP);
    }

    #[cfg_attr(miri, ignore)] // reads 16 MiB byte by byte: far too slow in Miri
    #[test]
    fn zeroed_storage_is_zero() {
        let z = take_zeroed(POOL_MIN + 7);
        assert!(z[..POOL_MIN + 7].iter().all(|&x| x == 0));
        give(z);
        let (b, fresh) = take(POOL_MAX + 1);
        assert!(fresh);
        assert_eq!(b.len(), POOL_MAX + 1);
        assert!(b.iter().all(|&x| x == 0));
    }

    /// The mapping of this process holding `addr`: its start, end and `VmFlags`.
    fn vma_of(addr: usize) -> (usize, usize, String) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut cur: Option<(usize, usize)> = None;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = head.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    cur = Some((a, b));
                    continue;
                }
            }
            if let (Some((a, b)), Some(flags)) = (cur, line.strip_prefix("VmFlags:")) {
                if (a..b).contains(&addr) {
                    return (a, b, flags.to_string());
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[cfg_attr(miri, ignore)] // reads /proc/self/smaps for the mapping Miri only emulates
    #[test]
    fn large_storage_is_aligned_and_advised_for_huge_pages_where_its_frame_covers_them() {
        // madvise(MADV_HUGEPAGE) needs a kernel with transparent huge pages; without them the
        // storage must still work, with small pages.
        let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
            && huge_pages();
        let mib = 1024 * 1024;
        // A 3 MiB frame in 4 MiB storage: its first 2 MiB region is huge, the rest stays small.
        let mut b = Storage::map_for(4 * mib, 3 * mib);
        let base = b.as_ptr() as usize - DATA_OFFSET;
        assert_eq!(
            base % HUGE,
            0,
            "large storage starts on a huge page boundary"
        );
        let (start, end, flags) = vma_of(b.as_ptr() as usize);
        assert_eq!(start, base);
        if thp {
            assert_eq!(
                end,
                base + HUGE,
                "only the region the frame covers is advised"
            );
            assert!(
                flags.split_whitespace().any(|f| f == "hg"),
                "flags: {flags}"
            );
            let (_, _, tail) = vma_of(base + HUGE);
            assert!(!tail.split_whitespace().any(|f| f == "hg"), "flags: {tail}");
        }
        // Fresh, zero and writable end to end, across the advised boundary.
        assert!(b.iter().all(|&x| x == 0));
        b.fill(0x5A);
        assert!(b.iter().all(|&x| x == 0x5A));
        drop(b);
        // Storage whose frame covers no whole huge page keeps an ordinary mapping.
        let small = Storage::map_for(2 * mib, mib);
        let (_, _, flags) = vma_of(small.as_ptr() as usize);
        assert!(
            !flags.split_whitespace().any(|f| f == "hg"),
            "flags: {flags}"
        );
        // The pool maps the class for the frame asked for.
        let (big, _) = take(POOL_MAX);
        assert_eq!((big.as_ptr() as usize - DATA_OFFSET) % HUGE, 0);
    }
}

//! Page-aligned memory owned by rzmq-rdma and written by the NIC (rings, mailboxes, staging and
//! pool buffers).
//!
//! A [`Region`] is a raw allocation, not a `Box<[u8]>`: a NIC (or the soft provider's progress
//! thread) writes registered memory behind the compiler's back, so Rust references to it are
//! only formed for byte ranges the protocol says are stable (a ring record already notified and
//! not yet returned as credit, a pool buffer whose READ completed).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

const ALIGN: usize = 4096;
/// Regions this large are mapped from the kernel: their pages are zeroed when first touched
/// (typically by the NIC's write into them), not by a user-space `memset` over the whole range
/// first (which an aligned `alloc_zeroed` does).
const MMAP_MIN: usize = 64 * 1024;

/// A zeroed, page-aligned allocation of `len` bytes.
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is a plain allocation; all access goes through raw pointers or the unsafe
// accessors below, whose callers guarantee the absence of concurrent writers to the range.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Allocates `len` zeroed bytes (at least one page is reserved for `len == 0`).
    pub fn new(len: usize) -> Region {
        if len >= MMAP_MIN {
            if let Some(ptr) = rzmq_core::alt::map_anon(len) {
                return Region { ptr, len };
            }
            let layout = Layout::from_size_align(len, ALIGN).expect("region layout");
            std::alloc::handle_alloc_error(layout);
        }
        let layout = Layout::from_size_align(len.max(1), ALIGN).expect("region layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Region { ptr, len }
    }

    /// Start address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Start address as the u64 the verbs use.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes `off..off+len`.
    ///
    /// # Safety
    /// Nobody (NIC included) may write the range while the slice lives.
    pub unsafe fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds (asserted); no concurrent writer per the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    /// Copies `data` to `off`.
    ///
    /// # Safety
    /// Nobody else (NIC included) may read or write the range during the copy.
    pub unsafe fn write(&self, off: usize, data: &[u8]) {
        assert!(off.checked_add(data.len()).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds (asserted); exclusive per the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len())
        };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.len >= MMAP_MIN {
            // SAFETY: mapped in `new` with this length; nothing refers to it any more.
            unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
            return;
        }
        let layout = Layout::from_size_align(self.len.max(1), ALIGN).expect("region layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

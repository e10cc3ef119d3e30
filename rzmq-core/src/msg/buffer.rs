//! Shared and external storage: a [`Buffer`] owns a boxed slice or pooled storage, or holds a
//! caller's memory until its release callback runs (exactly once, on whichever thread drops the
//! last handle).

/// A release callback for an external buffer; runs exactly once.
pub type ReleaseFn = Box<dyn FnOnce() + Send + 'static>;

/// The storage of a shared or external frame. Immutable once shared.
pub struct Buffer {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    owner: Owner,
}

enum Owner {
    /// A boxed slice turned into `ptr`/`len` (`Box::into_raw`), rebuilt and freed on drop. Not
    /// kept as a `Box`: moving a `Box` asserts uniqueness, which would invalidate `ptr` (Miri's
    /// Stacked and Tree Borrows both report it).
    Boxed,
    /// Storage from [`crate::pool`], given back on drop.
    Pooled(Option<crate::pool::Storage>),
    External(Option<ReleaseFn>),
}

// SAFETY: `Buffer` exclusively owns its storage (a boxed slice) or holds a caller's buffer that the
// caller handed over until the release callback runs (which is `Send`); the raw pointer is only
// ever dereferenced through shared slices, or mutably by the sole owner.
unsafe impl Send for Buffer {}
// SAFETY: shared access only hands out `&[u8]`; mutation requires unique ownership of the `Arc`.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A buffer owning `data`.
    pub fn from_boxed(data: Box<[u8]>) -> Buffer {
        let len = data.len();
        let ptr = Box::into_raw(data).cast::<u8>();
        Buffer {
            ptr,
            len,
            owner: Owner::Boxed,
        }
    }

    /// A buffer exposing the first `len` bytes of pooled storage, which goes back to the pool
    /// when the buffer drops. Panics when `len` exceeds the storage.
    pub fn from_pooled(mut data: crate::pool::Storage, len: usize) -> Buffer {
        assert!(len <= data.len(), "pooled storage too small");
        Buffer {
            ptr: data.as_mut_ptr(),
            len,
            owner: Owner::Pooled(Some(data)),
        }
    }

    /// A buffer over memory the caller owns until `release` runs.
    ///
    /// # Safety
    /// `ptr` must be valid for reads (and writes, if the message is written through) of `len` bytes
    /// from now until `release` is called, and nobody else may free it before then.
    pub unsafe fn from_external(ptr: *mut u8, len: usize, release: Option<ReleaseFn>) -> Buffer {
        Buffer {
            ptr,
            len,
            owner: Owner::External(release),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr is valid for len bytes for the buffer's life (see constructors).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start address (used by zero-copy transports to register memory).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// True when the bytes belong to a caller (released by callback).
    pub fn is_external(&self) -> bool {
        matches!(self.owner, Owner::External(_))
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match &mut self.owner {
            Owner::External(release) => {
                if let Some(f) = release.take() {
                    f();
                }
            }
            Owner::Pooled(data) => {
                if let Some(d) = data.take() {
                    crate::pool::give(d);
                }
            }
            Owner::Boxed => {
                let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
                // SAFETY: ptr/len came from Box::into_raw of a Box<[u8]> of this length
                // (from_boxed), and this is its only owner, dropping once.
                drop(unsafe { Box::from_raw(slice) });
            }
        }
    }
}

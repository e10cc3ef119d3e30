//! A decoder's receive buffer: frames are sliced from it as messages that share its storage, with
//! references taken from the shared count in batches.

use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

use super::buffer::Buffer;

/// The shared part of a receive buffer: its count of handles and its storage.
pub(super) struct RecvInner {
    pub(super) refs: AtomicUsize,
    pub(super) buf: Buffer,
}

/// One counted handle on a receive buffer (held by frames sliced from it).
pub(super) struct RecvRef(NonNull<RecvInner>);

// SAFETY: the bytes behind a RecvRef are written only by a RecvBuf that holds the sole reference
// (checked on its count); otherwise they are only read. The count is atomic and the storage is
// freed by whichever thread drops the last reference (Buffer is Send + Sync).
unsafe impl Send for RecvRef {}
// SAFETY: as above: shared handles only read.
unsafe impl Sync for RecvRef {}

/// Counts above this abort, as `Arc` does: a leak of references, never reached in practice.
const MAX_REFS: usize = isize::MAX as usize;

impl RecvRef {
    pub(super) fn inner(&self) -> &RecvInner {
        // SAFETY: the pointer stays valid while any reference (this one) is counted.
        unsafe { self.0.as_ref() }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        self.inner().buf.as_slice()
    }
}

impl Clone for RecvRef {
    fn clone(&self) -> RecvRef {
        // Relaxed as in Arc::clone: a new reference is made from an existing one.
        if self.inner().refs.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
            std::process::abort();
        }
        RecvRef(self.0)
    }
}

impl Drop for RecvRef {
    fn drop(&mut self) {
        if self.inner().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Every other reference's use happens before the storage goes (as in Arc::drop).
        fence(Ordering::Acquire);
        // SAFETY: this was the last reference; the pointer came from Box::into_raw in RecvBuf::new.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// How many references a [`RecvBuf`] takes from the count at once.
pub(super) const RECV_REF_BATCH: usize = 1024;

/// A decoder's receive buffer. Frames are sliced from it as [`Msg`](super::Msg)s sharing its storage; the
/// buffer takes references from the shared count in batches of `RECV_REF_BATCH` (1024), so a slice
/// costs no atomic operation and the application thread's drops (one atomic decrement each) do
/// not contend with the I/O thread for the count's cache line on every frame.
pub struct RecvBuf {
    own: RecvRef,
    /// References counted in `refs` but not handed out yet (besides `own`).
    credit: usize,
}

impl RecvBuf {
    /// A receive buffer of `len` bytes; from the pool at `crate::pool::POOL_MIN` and above, where
    /// its bytes are stale (only bytes read into it may ever be exposed).
    pub fn new(len: usize) -> RecvBuf {
        let buf = if len >= crate::pool::POOL_MIN {
            let (data, _) = crate::pool::take(len);
            Buffer::from_pooled(data, len)
        } else {
            Buffer::from_boxed(vec![0u8; len].into_boxed_slice())
        };
        let inner = Box::new(RecvInner {
            refs: AtomicUsize::new(1),
            buf,
        });
        RecvBuf {
            own: RecvRef(NonNull::from(Box::leak(inner))),
            credit: 0,
        }
    }

    /// The whole buffer.
    pub fn bytes(&self) -> &[u8] {
        self.own.bytes()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.own.inner().buf.len()
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole buffer, writable, when no frame sliced from it is alive.
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        // Acquire: the frames' drops (Release) happen before we write over their bytes.
        if self.own.inner().refs.load(Ordering::Acquire) != 1 + self.credit {
            return None;
        }
        let b = &self.own.inner().buf;
        if b.len == 0 {
            return Some(&mut []);
        }
        // SAFETY: no other reference exists (the count is ours alone) and `&mut self` excludes
        // our own readers; ptr is valid for len bytes while the buffer lives.
        Some(unsafe { std::slice::from_raw_parts_mut(b.ptr, b.len) })
    }

    /// One counted reference to the storage, taken from the credit (refilled in batches).
    #[inline]
    pub(super) fn share(&mut self) -> RecvRef {
        if self.credit == 0 {
            self.take_credit();
        }
        self.credit -= 1;
        // A reference taken from the credit counted above.
        RecvRef(self.own.0)
    }
}

impl RecvBuf {
    /// Takes the next batch of references to the storage (see [`RecvBuf::slice`]).
    #[cold]
    fn take_credit(&mut self) {
        if self
            .own
            .inner()
            .refs
            .fetch_add(RECV_REF_BATCH, Ordering::Relaxed)
            > MAX_REFS
        {
            std::process::abort();
        }
        self.credit = RECV_REF_BATCH;
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        // Give back the credit (`own` is still counted, so this never reaches zero); `own` then
        // drops the buffer's own reference.
        if self.credit > 0 {
            self.own
                .inner()
                .refs
                .fetch_sub(self.credit, Ordering::Release);
        }
    }
}

//! Messages (one ZMTP frame each) and their ownership.
//!
//! A [`Msg`] is one frame: its bytes, the MORE/COMMAND flags, the `u32` routing id a SERVER or
//! PEER attaches, the group of a RADIO/DISH message, and the metadata of the connection it
//! arrived on. The group costs a plain frame nothing: it lives in a small allocation made only
//! when a group is set, in the slot that otherwise holds the connection's metadata (see
//! [`Msg::set_group`]). The bytes are held one of three ways:
//! - inline, for frames of up to [`INLINE_CAP`] bytes (no allocation);
//! - shared, a reference-counted [`Buffer`] (slices of it are cheap; PUB fan-out clones the handle);
//! - a slice of a decoder's receive buffer ([`RecvBuf`]), whose references the decoder takes in
//!   bulk, so slicing a frame off it costs the I/O thread no atomic operation;
//! - external, a caller's buffer plus a release callback (`zmq_msg_init_data`), which is a shared
//!   buffer whose owner runs the callback exactly once, when the last handle is dropped, on whichever
//!   thread drops it. The callback may re-enter rzmq.
//!
//! This module owns no I/O and knows nothing of sockets. `Msg` is at most 64 bytes and holds no
//! self-reference, so the C ABI may keep it inside a `zmq_msg_t` and move it with memcpy.

use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Longest group name a message may carry (libzmq 4.3.5's `ZMQ_GROUP_MAX_LENGTH`).
pub const GROUP_MAX_LENGTH: usize = 255;

/// Largest frame kept inline in the message itself.
pub const INLINE_CAP: usize = 32;

/// Message flag: more frames follow in the same message (libzmq's `msg_t::more`). A message's
/// flags are not the wire's: `zmtp::frame::{wire_flags, msg_flags}` map between the two.
pub const MSG_MORE: u8 = 1;
/// Message flag: the frame is a ZMTP command rather than a message frame (`msg_t::command`).
pub const MSG_COMMAND: u8 = 2;
/// Message flag: marked shared by a `copy` (the C ABI's `zmq_msg_get(ZMQ_SHARED)`); internal.
const MSG_SHARED: u8 = 4;
/// Largest message `zmq_msg_init_size` and friends serve from recycled storage (small-frame
/// caches and the pool), whose bytes are not cleared; larger ones are fresh mappings.
pub const RECYCLED_MAX: usize = crate::pool::POOL_MAX;

/// A release callback for an external buffer; runs exactly once.
pub type ReleaseFn = Box<dyn FnOnce() + Send + 'static>;

/// The storage of a shared or external frame. Immutable once shared.
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
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

/// The shared part of a receive buffer: its count of handles and its storage.
struct RecvInner {
    refs: AtomicUsize,
    buf: Buffer,
}

/// One counted handle on a receive buffer (held by frames sliced from it).
struct RecvRef(NonNull<RecvInner>);

// SAFETY: the bytes behind a RecvRef are written only by a RecvBuf that holds the sole reference
// (checked on its count); otherwise they are only read. The count is atomic and the storage is
// freed by whichever thread drops the last reference (Buffer is Send + Sync).
unsafe impl Send for RecvRef {}
// SAFETY: as above: shared handles only read.
unsafe impl Sync for RecvRef {}

/// Counts above this abort, as `Arc` does: a leak of references, never reached in practice.
const MAX_REFS: usize = isize::MAX as usize;

impl RecvRef {
    fn inner(&self) -> &RecvInner {
        // SAFETY: the pointer stays valid while any reference (this one) is counted.
        unsafe { self.0.as_ref() }
    }

    fn bytes(&self) -> &[u8] {
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
const RECV_REF_BATCH: usize = 1024;

/// A decoder's receive buffer. Frames are sliced from it as [`Msg`]s sharing its storage; the
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

    /// A frame of `len` bytes at `off`, sharing the storage (inline when it fits).
    #[inline]
    pub fn slice(&mut self, off: usize, len: usize) -> Msg {
        let end = off.checked_add(len).expect("slice end overflows");
        assert!(end <= self.len(), "slice outside receive buffer");
        if len <= INLINE_CAP {
            return Msg::copy_from(&self.bytes()[off..end]);
        }
        if self.credit == 0 {
            self.take_credit();
        }
        self.credit -= 1;
        // A reference taken from the credit counted above.
        Msg::of_body(Body::Recv {
            buf: RecvRef(self.own.0),
            off,
            len,
        })
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

#[derive(Clone)]
enum Body {
    Inline {
        len: u8,
        data: [u8; INLINE_CAP],
    },
    /// Bytes rzmq allocated: refcount and data in one allocation (dropped by `Body::drop`, which
    /// hands storage of a small class back to [`crate::small`]).
    Owned {
        buf: ManuallyDrop<Arc<[u8]>>,
        off: usize,
        len: usize,
    },
    /// A [`Buffer`]: a caller's memory with a release callback, or a taken-over `Vec`.
    Shared {
        buf: Arc<Buffer>,
        off: usize,
        len: usize,
    },
    /// A slice of a [`RecvBuf`].
    Recv {
        buf: RecvRef,
        off: usize,
        len: usize,
    },
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Body::Owned { buf, .. } = self {
            // SAFETY: the body is being dropped; `buf` is taken out exactly once and never used
            // again.
            let buf = unsafe { ManuallyDrop::take(buf) };
            crate::small::give(buf);
        }
    }
}

/// Where a frame's bytes live (for zero-copy transports and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageInfo {
    /// Start of the whole allocation the frame's bytes are part of.
    pub base: *const u8,
    /// Size of that allocation.
    pub capacity: usize,
    /// Number of message handles sharing it.
    pub owners: usize,
}

/// How many references to a connection's [`Metadata`] a [`MetaRefs`] takes at once.
const META_REF_BATCH: usize = 256;

/// A connection's properties as its I/O thread attaches them to every frame it receives, from
/// references taken in batches (as [`RecvBuf`] does for its storage). A plain `Arc` clone per
/// frame on the I/O thread, with the application dropping each frame on its own core, moves the
/// count's cache line between the two cores twice per message; with a batch, the I/O thread
/// touches it once per [`META_REF_BATCH`] frames.
#[derive(Default)]
pub(crate) struct MetaRefs {
    md: Option<Arc<Metadata>>,
    /// References counted in the `Arc` but not handed out yet (besides `md` itself).
    credit: usize,
}

impl MetaRefs {
    /// Hands out references to `md` (None: frames carry no properties).
    pub(crate) fn new(md: Option<Arc<Metadata>>) -> MetaRefs {
        MetaRefs { md, credit: 0 }
    }

    /// The properties, without taking a reference for a frame.
    pub(crate) fn get(&self) -> Option<&Arc<Metadata>> {
        self.md.as_ref()
    }

    /// A reference for one frame.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<Arc<Metadata>> {
        let md = self.md.as_ref()?;
        if self.credit == 0 {
            Self::refill(md);
            self.credit = META_REF_BATCH;
        }
        self.credit -= 1;
        // SAFETY: the pointer comes from a live Arc (`md`), and this reference was counted by
        // `refill` and not handed out before.
        Some(unsafe { Arc::from_raw(Arc::as_ptr(md)) })
    }

    #[cold]
    fn refill(md: &Arc<Metadata>) {
        for _ in 0..META_REF_BATCH {
            // SAFETY: the pointer comes from a live Arc; each increment stands for one
            // reference `take` hands out (or `drop` gives back).
            unsafe { Arc::increment_strong_count(Arc::as_ptr(md)) };
        }
    }
}

impl Drop for MetaRefs {
    fn drop(&mut self) {
        if let Some(md) = &self.md {
            for _ in 0..self.credit {
                // SAFETY: each of these references was counted by `refill` and never handed
                // out; `md` itself keeps the count above zero.
                unsafe { Arc::decrement_strong_count(Arc::as_ptr(md)) };
            }
        }
    }
}

/// Connection properties attached to received messages (`zmq_msg_gets`).
///
/// A message with a group holds, in the same slot, a *group layer*: a `Metadata` with no
/// properties of its own, the group, and the connection's properties beneath it (`conn`). Only
/// `msg.rs` ever builds or sees a layer: [`Msg::metadata`] returns what lies beneath.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    props: Vec<(String, Vec<u8>)>,
    /// A layer's group, NUL-terminated for C callers (`None`: connection properties).
    group: Option<Box<[u8]>>,
    /// A layer's connection properties.
    conn: Option<Arc<Metadata>>,
}

impl Metadata {
    /// Empty metadata.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a property (names compare case-insensitively, as ZMTP says).
    pub fn insert(&mut self, name: &str, value: &[u8]) {
        // Values are kept with a trailing NUL so the C ABI can hand out C strings.
        let mut v = Vec::with_capacity(value.len() + 1);
        v.extend_from_slice(value);
        v.push(0);
        if let Some(p) = self
            .props
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            p.1 = v;
        } else {
            self.props.push((name.to_string(), v));
        }
    }

    /// A property's value, by case-insensitive name.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.get_with_nul(name).map(|v| &v[..v.len() - 1])
    }

    /// A property's value followed by a NUL byte (for C callers).
    pub fn get_with_nul(&self, name: &str) -> Option<&[u8]> {
        self.props
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// All properties in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.props
            .iter()
            .map(|(n, v)| (n.as_str(), &v[..v.len() - 1]))
    }

    /// Number of properties.
    pub fn len(&self) -> usize {
        self.props.len()
    }

    /// True when there are no properties.
    pub fn is_empty(&self) -> bool {
        self.props.is_empty()
    }
}

/// One frame of a ZeroMQ message.
#[derive(Clone)]
pub struct Msg {
    body: Body,
    flags: u8,
    routing_id: u32,
    metadata: Option<Arc<Metadata>>,
}

/// Bytes of a `Msg`; the C ABI keeps a `Msg` inside a 64-byte `zmq_msg_t`, using the rest as a tag.
pub const MSG_SIZE: usize = std::mem::size_of::<Msg>();
const _: () = assert!(MSG_SIZE <= 56);
const _: () = assert!(std::mem::align_of::<Msg>() <= 8);

impl Default for Msg {
    fn default() -> Self {
        Msg::new()
    }
}

impl Msg {
    /// An empty frame.
    pub const fn new() -> Msg {
        Msg::of_body(Body::Inline {
            len: 0,
            data: [0; INLINE_CAP],
        })
    }

    /// A plain frame (no flags, routing id or metadata) over `body`. Not `..Msg::new()`: struct
    /// update from a temporary would drop the temporary's `Body` (a call per frame).
    #[inline(always)]
    const fn of_body(body: Body) -> Msg {
        Msg {
            body,
            flags: 0,
            routing_id: 0,
            metadata: None,
        }
    }

    /// A frame of `len` zero bytes, to be filled through [`Msg::data_mut`].
    pub fn with_size(len: usize) -> Msg {
        if len <= INLINE_CAP {
            Msg::of_body(Body::Inline {
                len: len as u8,
                data: [0; INLINE_CAP],
            })
        } else if (crate::pool::POOL_MIN..=crate::pool::POOL_MAX).contains(&len) {
            Msg::from_buffer(
                Arc::new(Buffer::from_pooled(crate::pool::take_zeroed(len), len)),
                0,
                len,
            )
        } else {
            // One allocation for refcount and bytes, cached storage cleared.
            let (mut buf, stale) = small_storage(len);
            if stale {
                if let Some(b) = crate::small::unique_mut(&mut buf) {
                    b[..len].fill(0);
                }
            }
            Msg::owned(buf, len)
        }
    }

    /// A frame of `len` bytes whose contents are unspecified, for callers that overwrite all of
    /// them (as `zmq_msg_init_size`): frames too big to be inline reuse storage of frames this
    /// process dropped (`crate::small` below `crate::pool::POOL_MIN`, `crate::pool` above)
    /// without clearing it; inline ones are zeroed as in [`Msg::with_size`].
    #[inline]
    pub fn with_size_recycled(len: usize) -> Msg {
        if len >= crate::pool::POOL_MIN {
            // Above POOL_MAX: a fresh mapping, zero without clearing.
            let (data, _) = crate::pool::take(len);
            Msg::from_buffer(Arc::new(Buffer::from_pooled(data, len)), 0, len)
        } else if len > INLINE_CAP {
            Msg::owned(small_storage(len).0, len)
        } else {
            Msg::with_size(len)
        }
    }

    /// [`Msg::with_size_recycled`] written into `dst`: a small frame (the common case) is built
    /// in place, every other size by an out-of-line call that returns into `dst` (the C ABI
    /// keeps its messages in the caller's `zmq_msg_t`; a temporary would be copied there).
    #[inline(always)]
    pub fn write_with_size_recycled(dst: &mut std::mem::MaybeUninit<Msg>, len: usize) {
        if len > INLINE_CAP && len < crate::pool::POOL_MIN {
            dst.write(Msg::owned(small_storage(len).0, len));
        } else {
            dst.write(Msg::with_size_recycled_outlined(len));
        }
    }

    #[inline(never)]
    fn with_size_recycled_outlined(len: usize) -> Msg {
        Msg::with_size_recycled(len)
    }

    /// A frame of the first `len` bytes of `buf`.
    fn owned(buf: Arc<[u8]>, len: usize) -> Msg {
        debug_assert!(len <= buf.len());
        Msg::of_body(Body::Owned {
            buf: ManuallyDrop::new(buf),
            off: 0,
            len,
        })
    }

    /// A frame holding a copy of `data`.
    pub fn copy_from(data: &[u8]) -> Msg {
        if data.len() <= INLINE_CAP {
            let mut buf = [0u8; INLINE_CAP];
            buf[..data.len()].copy_from_slice(data);
            Msg::of_body(Body::Inline {
                len: data.len() as u8,
                data: buf,
            })
        } else {
            let len = data.len();
            if len > crate::small::SMALL_MAX {
                return Msg::owned(Arc::from(data), len);
            }
            let (mut buf, _) = small_storage(len);
            match crate::small::unique_mut(&mut buf) {
                Some(b) => b[..len].copy_from_slice(data),
                // Unreachable: cached and fresh storage are unique.
                None => return Msg::owned(Arc::from(data), len),
            }
            Msg::owned(buf, len)
        }
    }

    /// A frame that takes ownership of `data` without copying.
    pub fn from_vec(data: Vec<u8>) -> Msg {
        if data.len() <= INLINE_CAP {
            Msg::copy_from(&data)
        } else {
            Msg::from_boxed(data.into_boxed_slice())
        }
    }

    fn from_boxed(data: Box<[u8]>) -> Msg {
        let len = data.len();
        Msg::from_buffer(Arc::new(Buffer::from_boxed(data)), 0, len)
    }

    /// A frame viewing `len` bytes at `off` of a shared buffer.
    ///
    /// Panics when the range lies outside the buffer (a programming error, never peer input).
    pub fn from_buffer(buf: Arc<Buffer>, off: usize, len: usize) -> Msg {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= buf.len()),
            "slice outside buffer"
        );
        Msg::of_body(Body::Shared { buf, off, len })
    }

    /// A frame over a caller's buffer, released by `release` once no owner is left.
    ///
    /// # Safety
    /// As [`Buffer::from_external`].
    pub unsafe fn from_external(ptr: *mut u8, len: usize, release: Option<ReleaseFn>) -> Msg {
        // SAFETY: forwarded contract.
        let buf = unsafe { Buffer::from_external(ptr, len, release) };
        Msg::from_buffer(Arc::new(buf), 0, len)
    }

    /// The frame's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        match &self.body {
            Body::Inline { len, data } => &data[..*len as usize],
            Body::Owned { buf, off, len } => &buf[*off..*off + *len],
            Body::Shared { buf, off, len } => &buf.as_slice()[*off..*off + *len],
            Body::Recv { buf, off, len } => &buf.bytes()[*off..*off + *len],
        }
    }

    /// A frame viewing `len` bytes at `off` of this one, sharing its storage (copying only when
    /// small enough to be inline). None when the range is outside the frame.
    pub fn slice(&self, off: usize, len: usize) -> Option<Msg> {
        let end = off.checked_add(len)?;
        if end > self.len() {
            return None;
        }
        if len <= INLINE_CAP {
            return Some(Msg::copy_from(&self.data()[off..end]));
        }
        // Another handle on the same storage, narrowed to the slice.
        let mut body = self.body.clone();
        match &mut body {
            Body::Inline { .. } => return Some(Msg::copy_from(&self.data()[off..end])),
            Body::Owned { off: o, len: l, .. }
            | Body::Shared { off: o, len: l, .. }
            | Body::Recv { off: o, len: l, .. } => {
                *o += off;
                *l = len;
            }
        }
        Some(Msg::of_body(body))
    }

    /// Where the bytes live: the allocation, its size and how many handles share it.
    pub fn storage_info(&self) -> Option<StorageInfo> {
        match &self.body {
            Body::Inline { .. } => None,
            Body::Owned { buf, .. } => Some(StorageInfo {
                base: buf.as_ptr(),
                capacity: buf.len(),
                owners: Arc::strong_count(buf),
            }),
            Body::Shared { buf, .. } => Some(StorageInfo {
                base: buf.as_ptr(),
                capacity: buf.len(),
                owners: Arc::strong_count(buf),
            }),
            // The count includes references its decoder holds in reserve.
            Body::Recv { buf, .. } => Some(StorageInfo {
                base: buf.bytes().as_ptr(),
                capacity: buf.bytes().len(),
                owners: buf.inner().refs.load(Ordering::Relaxed),
            }),
        }
    }

    /// Mutable bytes, when this handle is the only owner (always true for inline frames).
    pub fn data_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.body {
            Body::Inline { len, data } => Some(&mut data[..*len as usize]),
            Body::Owned { buf, off, len } => {
                let (o, l) = (*off, *len);
                crate::small::unique_mut(buf).map(|b| &mut b[o..o + l])
            }
            Body::Shared { buf, off, len } => {
                let b = Arc::get_mut(buf)?;
                let (o, l) = (*off, *len);
                if l == 0 {
                    return Some(&mut []);
                }
                // SAFETY: we are the unique owner of the buffer; ptr is valid for its len bytes.
                let all = unsafe { std::slice::from_raw_parts_mut(b.ptr, b.len) };
                Some(&mut all[o..o + l])
            }
            Body::Recv { buf, off, len } => {
                // Acquire: other handles' drops happen before we write.
                if buf.inner().refs.load(Ordering::Acquire) != 1 {
                    return None;
                }
                let b = &buf.inner().buf;
                let (o, l) = (*off, *len);
                if l == 0 {
                    return Some(&mut []);
                }
                // SAFETY: ours is the only reference to the buffer; ptr is valid for its len bytes.
                let all = unsafe { std::slice::from_raw_parts_mut(b.ptr, b.len) };
                Some(&mut all[o..o + l])
            }
        }
    }

    /// A raw pointer to the bytes, writable as in libzmq (`zmq_msg_data`). Writing through it while
    /// the frame is shared with another owner is the caller's responsibility, as in libzmq.
    pub fn data_ptr(&mut self) -> *mut u8 {
        match &mut self.body {
            Body::Inline { data, .. } => data.as_mut_ptr(),
            Body::Owned { buf, off, .. } => {
                let o = *off;
                match crate::small::unique_mut(buf) {
                    // SAFETY: o is within the allocation (checked at construction).
                    Some(b) => unsafe { b.as_mut_ptr().add(o) },
                    // Shared storage: as in libzmq, writing through it is the caller's business.
                    // SAFETY: o is within the allocation.
                    None => unsafe { buf.as_ptr().add(o) as *mut u8 },
                }
            }
            // SAFETY: off is within the buffer (checked at construction).
            Body::Shared { buf, off, .. } => unsafe { buf.ptr.add(*off) },
            // SAFETY: off is within the buffer (checked at slicing).
            Body::Recv { buf, off, .. } => unsafe { buf.inner().buf.ptr.add(*off) },
        }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Inline { len, .. } => *len as usize,
            Body::Owned { len, .. } | Body::Shared { len, .. } | Body::Recv { len, .. } => *len,
        }
    }

    /// True for a zero-length frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when dropping this frame releases nothing (inline bytes, no metadata), so a holder
    /// such as the C ABI may forget it instead of running its drop.
    #[inline]
    pub fn holds_nothing(&self) -> bool {
        matches!(self.body, Body::Inline { .. }) && self.metadata.is_none()
    }

    /// The shared buffer behind this frame, if it is not inline (for zero-copy transports).
    pub fn buffer(&self) -> Option<(&Arc<Buffer>, usize)> {
        match &self.body {
            Body::Inline { .. } | Body::Owned { .. } | Body::Recv { .. } => None,
            Body::Shared { buf, off, .. } => Some((buf, *off)),
        }
    }

    /// True when more frames of the same message follow.
    #[inline]
    pub fn more(&self) -> bool {
        self.flags & MSG_MORE != 0
    }

    /// Sets or clears the MORE flag.
    #[inline]
    pub fn set_more(&mut self, more: bool) {
        if more {
            self.flags |= MSG_MORE
        } else {
            self.flags &= !MSG_MORE
        }
    }

    /// True for a ZMTP command frame.
    #[inline]
    pub fn is_command(&self) -> bool {
        self.flags & MSG_COMMAND != 0
    }

    /// Marks the frame as a command.
    pub fn set_command(&mut self, cmd: bool) {
        if cmd {
            self.flags |= MSG_COMMAND
        } else {
            self.flags &= !MSG_COMMAND
        }
    }

    /// The message flags ([`MSG_MORE`], [`MSG_COMMAND`]).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.flags & (MSG_MORE | MSG_COMMAND)
    }

    /// True when the bytes are shared with another message (`ZMQ_SHARED`).
    pub fn is_shared(&self) -> bool {
        match &self.body {
            Body::Inline { .. } => false,
            Body::Owned { buf, .. } => self.flags & MSG_SHARED != 0 || Arc::strong_count(buf) > 1,
            Body::Shared { buf, .. } => self.flags & MSG_SHARED != 0 || Arc::strong_count(buf) > 1,
            Body::Recv { buf, .. } => {
                self.flags & MSG_SHARED != 0 || buf.inner().refs.load(Ordering::Relaxed) > 1
            }
        }
    }

    /// A second handle on the same bytes (no copy for shared frames), as `zmq_msg_copy`.
    pub fn share(&mut self) -> Msg {
        if !matches!(self.body, Body::Inline { .. }) {
            self.flags |= MSG_SHARED;
        }
        self.clone()
    }

    /// The routing id (`zmq_msg_routing_id`), 0 when none.
    pub fn routing_id(&self) -> u32 {
        self.routing_id
    }

    /// Sets the routing id a SERVER or PEER sends to (`zmq_msg_set_routing_id`); 0 is no id
    /// and refused with [`Error::Inval`], as libzmq does.
    pub fn set_routing_id(&mut self, id: u32) -> Result<()> {
        if id == 0 {
            return Err(Error::Inval);
        }
        self.routing_id = id;
        Ok(())
    }

    /// Clears the routing id (back to 0).
    pub fn reset_routing_id(&mut self) {
        self.routing_id = 0;
    }

    /// The group of a RADIO/DISH message (`zmq_msg_group`), empty when none.
    pub fn group(&self) -> &[u8] {
        let g = self.group_with_nul();
        &g[..g.len() - 1]
    }

    /// [`Msg::group`] followed by a NUL byte (for C callers; just the NUL when none).
    pub fn group_with_nul(&self) -> &[u8] {
        match self.metadata.as_deref() {
            Some(Metadata { group: Some(g), .. }) => g,
            _ => b"\0",
        }
    }

    /// Sets the group (`zmq_msg_set_group`); empty clears it. Longer than [`GROUP_MAX_LENGTH`]
    /// bytes, or holding a NUL byte (no C string could carry it): [`Error::Inval`]. Allocates
    /// the group layer (see [`Metadata`]), which a message without a group never has.
    pub fn set_group(&mut self, group: impl AsRef<[u8]>) -> Result<()> {
        let g = group.as_ref();
        if g.len() > GROUP_MAX_LENGTH || g.contains(&0) {
            return Err(Error::Inval);
        }
        let conn = self.metadata().cloned();
        if g.is_empty() {
            self.metadata = conn;
            return Ok(());
        }
        let mut v = Vec::with_capacity(g.len() + 1);
        v.extend_from_slice(g);
        v.push(0);
        self.metadata = Some(Arc::new(Metadata {
            props: Vec::new(),
            group: Some(v.into_boxed_slice()),
            conn,
        }));
        Ok(())
    }

    /// The metadata of the connection this frame arrived on.
    pub fn metadata(&self) -> Option<&Arc<Metadata>> {
        match &self.metadata {
            Some(layer) if layer.group.is_some() => layer.conn.as_ref(),
            md => md.as_ref(),
        }
    }

    /// Attaches connection metadata (a group stays).
    pub fn set_metadata(&mut self, md: Option<Arc<Metadata>>) {
        match &mut self.metadata {
            Some(layer) if layer.group.is_some() => Arc::make_mut(layer).conn = md,
            slot => *slot = md,
        }
    }

    /// A metadata property (`zmq_msg_gets`).
    pub fn property(&self, name: &str) -> Option<&[u8]> {
        self.metadata()?.get(name)
    }

    /// Keeps the bytes, drops flags, routing id, group and metadata (used when a frame changes
    /// hands).
    pub fn reset_meta(&mut self) {
        self.flags &= MSG_SHARED;
        self.routing_id = 0;
        self.metadata = None;
    }
}

/// A zero-filled shared allocation of `len` bytes, refcount included.
/// Unique storage for a body of `len` bytes, `small::capacity_for(len)` long: cached by
/// [`crate::small`] (true: stale bytes) or freshly allocated and zeroed (false).
#[inline]
fn small_storage(len: usize) -> (Arc<[u8]>, bool) {
    match crate::small::take(len) {
        Some(buf) => (buf, true),
        None => (zeroed_arc(crate::small::capacity_for(len)), false),
    }
}

fn zeroed_arc(len: usize) -> Arc<[u8]> {
    let uninit = Arc::<[u8]>::new_zeroed_slice(len);
    // SAFETY: new_zeroed_slice filled every byte with zero, a valid u8.
    unsafe { uninit.assume_init() }
}

impl fmt::Debug for Msg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.data();
        let shown = &d[..d.len().min(32)];
        f.debug_struct("Msg")
            .field("len", &d.len())
            .field("more", &self.more())
            .field("command", &self.is_command())
            .field(
                "data",
                &format_args!("{:02x?}{}", shown, if d.len() > 32 { "…" } else { "" }),
            )
            .finish()
    }
}

impl PartialEq for Msg {
    fn eq(&self, other: &Self) -> bool {
        self.data() == other.data() && self.flags() == other.flags()
    }
}

impl From<&[u8]> for Msg {
    fn from(d: &[u8]) -> Msg {
        Msg::copy_from(d)
    }
}

impl From<Vec<u8>> for Msg {
    fn from(d: Vec<u8>) -> Msg {
        Msg::from_vec(d)
    }
}

impl From<&str> for Msg {
    fn from(s: &str) -> Msg {
        Msg::copy_from(s.as_bytes())
    }
}

impl<const N: usize> From<&[u8; N]> for Msg {
    fn from(d: &[u8; N]) -> Msg {
        Msg::copy_from(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_refs_hand_out_counted_references_and_give_back_the_rest() {
        let md = Arc::new(Metadata::new());
        let mut refs = MetaRefs::new(Some(md.clone()));
        assert_eq!(Arc::strong_count(&md), 2);
        let frames: Vec<_> = (0..META_REF_BATCH + 3)
            .map(|_| refs.take().unwrap())
            .collect();
        assert!(frames.iter().all(|f| Arc::ptr_eq(f, &md)));
        // Two batches taken, all but three of the second still held as credit.
        assert_eq!(
            Arc::strong_count(&md),
            2 + frames.len() + (META_REF_BATCH - 3)
        );
        drop(frames);
        drop(refs);
        assert_eq!(Arc::strong_count(&md), 1);
        assert!(MetaRefs::new(None).take().is_none());
    }

    #[cfg_attr(miri, ignore)] // a 1 MiB frame filled and checked byte by byte: 150 s in Miri
    #[test]
    fn frames_written_in_place_have_their_size_and_writable_unique_bytes() {
        use std::mem::MaybeUninit;
        let sizes = [
            0,
            1,
            INLINE_CAP,
            INLINE_CAP + 1,
            64,
            1000,
            crate::pool::POOL_MIN - 1,
            crate::pool::POOL_MIN,
            1 << 20,
        ];
        for len in sizes {
            let mut slot = MaybeUninit::<Msg>::uninit();
            Msg::write_with_size_recycled(&mut slot, len);
            // SAFETY: write_with_size_recycled initialised the slot.
            let mut m = unsafe { slot.assume_init() };
            assert_eq!(m.len(), len);
            assert!(!m.more() && m.holds_nothing() == (len <= INLINE_CAP));
            let bytes = m.data_mut().expect("a fresh frame is unique");
            bytes.fill(0xa5);
            assert!(m.data().iter().all(|&b| b == 0xa5), "{len}");
        }
    }

    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn inline_and_shared() {
        let m = Msg::copy_from(b"hello");
        assert!(m.storage_info().is_none());
        assert_eq!(m.data(), b"hello");
        let big = vec![7u8; 1000];
        let mut m = Msg::from_vec(big.clone());
        assert_eq!(m.data(), &big[..]);
        assert!(!m.is_shared());
        let c = m.share();
        assert!(m.is_shared() && c.is_shared());
        assert_eq!(m.storage_info().unwrap().owners, 2);
        let s = m.slice(100, 200).unwrap();
        assert_eq!(s.data(), &big[100..300]);
        assert_eq!(
            s.storage_info().unwrap().base,
            m.storage_info().unwrap().base
        );
        assert!(m.slice(900, 200).is_none());
        assert_eq!(c.data().as_ptr(), m.data().as_ptr());
    }

    #[test]
    fn external_release_runs_once_after_last_owner() {
        static RELEASED: AtomicUsize = AtomicUsize::new(0);
        let mut storage = vec![1u8; 100].into_boxed_slice();
        let ptr = storage.as_mut_ptr();
        // SAFETY: storage outlives every handle; we check the count before dropping it.
        let mut m = unsafe {
            Msg::from_external(
                ptr,
                100,
                Some(Box::new(|| {
                    RELEASED.fetch_add(1, Ordering::SeqCst);
                })),
            )
        };
        let c = m.share();
        let t = std::thread::spawn(move || drop(c));
        t.join().unwrap();
        assert_eq!(RELEASED.load(Ordering::SeqCst), 0);
        drop(m);
        assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
        drop(storage);
    }

    #[test]
    fn data_mut_only_when_unique() {
        let mut m = Msg::with_size(100);
        m.data_mut().unwrap()[0] = 9;
        let c = m.share();
        assert!(m.data_mut().is_none());
        drop(c);
        assert_eq!(m.data_mut().unwrap()[0], 9);
    }

    #[test]
    fn metadata_case_insensitive() {
        let mut md = Metadata::new();
        md.insert("Socket-Type", b"DEALER");
        let mut m = Msg::new();
        m.set_metadata(Some(Arc::new(md)));
        assert_eq!(m.property("socket-type"), Some(&b"DEALER"[..]));
    }

    #[test]
    fn routing_id_zero_is_refused_and_reset_clears() {
        let mut m = Msg::copy_from(b"x");
        assert_eq!(m.routing_id(), 0);
        assert_eq!(m.set_routing_id(0), Err(Error::Inval));
        assert_eq!(m.set_routing_id(0xdead_beef), Ok(()));
        assert_eq!(m.routing_id(), 0xdead_beef);
        assert_eq!(m.clone().routing_id(), 0xdead_beef);
        m.reset_routing_id();
        assert_eq!(m.routing_id(), 0);
    }

    #[test]
    fn group_layer_keeps_the_connection_properties_beneath_it() {
        let mut md = Metadata::new();
        md.insert("Socket-Type", b"RADIO");
        let md = Arc::new(md);
        let mut m = Msg::copy_from(b"body");
        assert_eq!(m.group(), b"");
        assert_eq!(m.group_with_nul(), b"\0");
        assert!(m.holds_nothing());
        m.set_metadata(Some(md.clone()));
        m.set_group("weather").unwrap();
        assert_eq!(m.group(), b"weather");
        assert_eq!(m.group_with_nul(), b"weather\0");
        assert!(Arc::ptr_eq(m.metadata().unwrap(), &md));
        assert_eq!(m.property("socket-type"), Some(&b"RADIO"[..]));
        // Replacing the connection keeps the group; replacing the group keeps the connection.
        m.set_metadata(None);
        assert_eq!(m.group(), b"weather");
        assert!(m.metadata().is_none());
        m.set_metadata(Some(md.clone()));
        m.set_group(b"news").unwrap();
        assert_eq!(m.group(), b"news");
        assert!(Arc::ptr_eq(m.metadata().unwrap(), &md));
        let copy = m.share();
        m.set_group("").unwrap();
        assert_eq!(m.group(), b"");
        assert!(Arc::ptr_eq(m.metadata().unwrap(), &md));
        assert_eq!(copy.group(), b"news");
        assert_eq!(m.data(), b"body");
        m.set_group("g").unwrap();
        m.reset_meta();
        assert_eq!(m.group(), b"");
    }

    #[test]
    fn group_length_and_nul_are_checked() {
        let mut m = Msg::new();
        let longest = vec![b'a'; GROUP_MAX_LENGTH];
        assert_eq!(m.set_group(&longest), Ok(()));
        assert_eq!(m.group(), &longest[..]);
        assert_eq!(
            m.set_group(vec![b'a'; GROUP_MAX_LENGTH + 1]),
            Err(Error::Inval)
        );
        assert_eq!(m.set_group(b"a\0b"), Err(Error::Inval));
        assert_eq!(
            m.group(),
            &longest[..],
            "a refused group leaves the old one"
        );
        assert!(!m.holds_nothing());
    }

    #[test]
    fn recv_buf_slices_share_and_count_in_bulk() {
        let mut b = RecvBuf::new(64 * 1024);
        b.bytes_mut().unwrap()[..8].copy_from_slice(b"abcdefgh");
        for (i, x) in b.bytes_mut().unwrap()[100..3000].iter_mut().enumerate() {
            *x = i as u8;
        }
        // Inline frames copy; larger ones share the storage.
        let small = b.slice(0, 8);
        assert_eq!(small.data(), b"abcdefgh");
        assert!(small.storage_info().is_none());
        // More slices than one batch of references, so the credit is refilled.
        let slices: Vec<Msg> = (0..RECV_REF_BATCH + 10).map(|_| b.slice(100, 64)).collect();
        let base = b.bytes().as_ptr();
        for m in &slices {
            assert_eq!(m.data(), &b.bytes()[100..164]);
            assert_eq!(m.storage_info().unwrap().base, base);
            assert!(m.is_shared());
        }
        // Not writable while any slice lives, nor through a slice.
        assert!(b.bytes_mut().is_none());
        let mut one = slices[0].clone();
        assert!(one.data_mut().is_none());
        drop(slices);
        assert!(b.bytes_mut().is_none(), "the clone still holds it");
        drop(one);
        assert!(
            b.bytes_mut().is_some(),
            "writable again once every slice is gone"
        );
    }

    #[test]
    fn recv_buf_outlived_by_its_slices_across_threads() {
        let mut b = RecvBuf::new(1000);
        for (i, x) in b.bytes_mut().unwrap().iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        let slices: Vec<Msg> = (0..500).map(|i| b.slice(i, 100)).collect();
        drop(b);
        let t = std::thread::spawn(move || {
            let mut last = None;
            for (i, m) in slices.into_iter().enumerate() {
                let want: Vec<u8> = (i..i + 100).map(|j| (j % 251) as u8).collect();
                assert_eq!(m.data(), &want[..]);
                last = Some(m);
            }
            // The last handle is the only owner now: its bytes are writable.
            let mut m = last.unwrap();
            assert_eq!(m.storage_info().unwrap().owners, 1);
            m.data_mut().unwrap()[0] = 7;
            assert_eq!(m.data()[0], 7);
        });
        t.join().unwrap();
    }
}

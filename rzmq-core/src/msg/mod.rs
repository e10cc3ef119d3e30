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
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::{Error, Result};

mod buffer;
mod meta;
mod recv;

pub use buffer::{Buffer, ReleaseFn};
pub(crate) use meta::MetaRefs;
pub use meta::Metadata;
pub use recv::RecvBuf;
use recv::RecvRef;

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
    #[inline]
    pub fn metadata(&self) -> Option<&Arc<Metadata>> {
        match &self.metadata {
            Some(layer) if layer.group.is_some() => layer.conn.as_ref(),
            md => md.as_ref(),
        }
    }

    /// Attaches connection metadata (a group stays).
    #[inline]
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

impl RecvBuf {
    /// A frame of `len` bytes at `off`, sharing the storage (inline when it fits).
    #[inline]
    pub fn slice(&mut self, off: usize, len: usize) -> Msg {
        let end = off.checked_add(len).expect("slice end overflows");
        assert!(end <= self.len(), "slice outside receive buffer");
        if len <= INLINE_CAP {
            return Msg::copy_from(&self.bytes()[off..end]);
        }
        Msg::of_body(Body::Recv {
            buf: self.share(),
            off,
            len,
        })
    }
}

#[cfg(test)]
mod tests;

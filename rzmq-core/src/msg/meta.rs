//! Connection properties attached to received messages ([`Metadata`]), and the references a
//! connection's I/O thread hands out to them in batches ([`MetaRefs`]).

use std::sync::Arc;

/// How many references to a connection's [`Metadata`] a [`MetaRefs`] takes at once.
pub(super) const META_REF_BATCH: usize = 256;

/// A connection's properties as its I/O thread attaches them to every frame it receives, from
/// references taken in batches (as [`RecvBuf`](super::RecvBuf) does for its storage). A plain `Arc` clone per
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
/// `msg/` ever builds or sees a layer: [`Msg::metadata`](super::Msg::metadata) returns what lies
/// beneath.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub(super) props: Vec<(String, Vec<u8>)>,
    /// A layer's group, NUL-terminated for C callers (`None`: connection properties).
    pub(super) group: Option<Box<[u8]>>,
    /// A layer's connection properties.
    pub(super) conn: Option<Arc<Metadata>>,
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

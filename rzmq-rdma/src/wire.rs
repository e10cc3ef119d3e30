//! The wire: every byte layout one RDMA peer reads from the other goes through this module's
//! [`Writer`] and [`Reader`], in one byte order (little-endian), and every decoder fails with one
//! typed error, [`WireError`], whatever the bytes (no panic, no read past the end).
//!
//! The layouts live beside their types as [`Layout`] implementations: the upgrade blob
//! (`datapath::ConnectInfo`) with its QP `provider::Endpoint` and that endpoint's soft part, the
//! ring's record header and credit mailbox (`ring`), the rendezvous descriptor (`rndv`).
//! docs/RDMA.md draws each one.
//!
//! One version covers them all: the upgrade blob opens with [`MAGIC`] and [`VERSION`], and so
//! does the `RZMQ-RDMA` property both ends advertise in the ZMTP handshake. A peer of another
//! version is refused there ([`check_property`]) and, should it get that far, when its blob is
//! read ([`Reader::header`]): [`WireError::Version`], never a misparse. The ring, mailbox and
//! descriptor carry no version of their own; the blob's names them.
//!
//! This module knows no other module of the crate.

use std::fmt;

/// The version of rzmq's RDMA wire (the upgrade blob, the property, and the layouts they name).
///
/// 1: the endpoint big-endian inside a little-endian blob. 2: one byte order, little-endian.
pub const VERSION: u8 = 2;

/// The first bytes of the upgrade blob.
pub const MAGIC: [u8; 4] = *b"RZRD";

/// Why bytes from a peer do not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the layout needs.
    Truncated {
        /// The layout.
        layout: &'static str,
        /// Bytes needed from where reading stopped.
        need: usize,
        /// Bytes there were.
        have: usize,
    },
    /// Bytes left after the layout's last field.
    Trailing {
        /// The layout.
        layout: &'static str,
        /// How many.
        extra: usize,
    },
    /// Not rzmq's RDMA wire at all.
    Magic {
        /// The layout.
        layout: &'static str,
    },
    /// rzmq's RDMA wire, another version of it: the two ends must run the same wire version.
    Version {
        /// The layout.
        layout: &'static str,
        /// The peer's version.
        peer: u8,
        /// Ours ([`VERSION`]).
        ours: u8,
    },
    /// A field out of its range.
    Invalid {
        /// The layout.
        layout: &'static str,
        /// The field.
        field: &'static str,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { layout, need, have } => {
                write!(f, "{layout}: truncated ({need} bytes needed, {have} left)")
            }
            WireError::Trailing { layout, extra } => {
                write!(f, "{layout}: {extra} bytes after the last field")
            }
            WireError::Magic { layout } => write!(f, "{layout}: not rzmq's RDMA wire"),
            WireError::Version { layout, peer, ours } => write!(
                f,
                "{layout}: the peer speaks RDMA wire version {peer}, this rzmq speaks {ours} \
                 (both ends need the same rzmq-rdma wire version)"
            ),
            WireError::Invalid { layout, field } => write!(f, "{layout}: bad {field}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Reads one layout from a peer's bytes: every read is bounds-checked and fails with
/// [`WireError::Truncated`] rather than reading past the end.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    layout: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `buf` as the layout named `layout` (the name goes into errors).
    #[inline]
    pub fn new(layout: &'static str, buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            layout,
        }
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let left = self.left();
        if n > left {
            return Err(WireError::Truncated {
                layout: self.layout,
                need: n,
                have: left,
            });
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    /// The next `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian `u16`.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, WireError> {
        self.array().map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, WireError> {
        self.array().map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, WireError> {
        self.array().map(u64::from_le_bytes)
    }

    /// Bytes after a `u16` length.
    pub fn bytes16(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }

    /// The blob header: [`MAGIC`], then [`VERSION`] (anything else: [`WireError::Version`]).
    pub fn header(&mut self) -> Result<(), WireError> {
        if self.array::<4>()? != MAGIC {
            return Err(WireError::Magic {
                layout: self.layout,
            });
        }
        let peer = self.u8()?;
        if peer != VERSION {
            return Err(WireError::Version {
                layout: self.layout,
                peer,
                ours: VERSION,
            });
        }
        Ok(())
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.pos..];
        self.pos = self.buf.len();
        r
    }

    /// Bytes not read yet.
    #[inline]
    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// [`WireError::Invalid`] for `field` of this layout.
    pub fn invalid(&self, field: &'static str) -> WireError {
        WireError::Invalid {
            layout: self.layout,
            field,
        }
    }

    /// Ends the layout: every byte must have been read ([`WireError::Trailing`] otherwise).
    pub fn finish(self) -> Result<(), WireError> {
        match self.left() {
            0 => Ok(()),
            extra => Err(WireError::Trailing {
                layout: self.layout,
                extra,
            }),
        }
    }
}

/// Writes one layout into a buffer sized for it ([`Layout::encoded_len`]).
///
/// # Panics
/// Writing past the end of the buffer: a layout whose `len` disagrees with its `encode`, a bug
/// that every layout's round-trip property test would show.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// Writes from the start of `buf`.
    #[inline]
    pub fn new(buf: &'a mut [u8]) -> Writer<'a> {
        Writer { buf, pos: 0 }
    }

    /// Bytes as they are.
    #[inline]
    pub fn put(&mut self, b: &[u8]) {
        let end = self.pos + b.len();
        assert!(end <= self.buf.len(), "a layout wrote past its length");
        self.buf[self.pos..end].copy_from_slice(b);
        self.pos = end;
    }

    /// A byte.
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }

    /// A `u16`, little-endian.
    #[inline]
    pub fn u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }

    /// A `u32`, little-endian.
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    /// A `u64`, little-endian.
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// Bytes after a `u16` length (at most `u16::MAX` of them: the layout's
    /// [`Layout::encoded_len`] counts `b.len().min(u16::MAX)`).
    pub fn bytes16(&mut self, b: &[u8]) {
        let b = &b[..b.len().min(usize::from(u16::MAX))];
        self.u16(b.len() as u16);
        self.put(b);
    }

    /// The blob header: [`MAGIC`] and [`VERSION`].
    pub fn header(&mut self) {
        self.put(&MAGIC);
        self.u8(VERSION);
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        self.pos
    }
}

/// One wire layout: how a type is written and read.
pub trait Layout: Sized {
    /// The layout's name in errors.
    const NAME: &'static str;
    /// Bytes [`Layout::encode`] writes.
    fn encoded_len(&self) -> usize;
    /// Writes the layout.
    fn encode(&self, w: &mut Writer<'_>);
    /// Reads the layout (possibly followed by more bytes: [`from_bytes`] checks there are none).
    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError>;
}

/// `l`'s bytes.
pub fn to_vec<L: Layout>(l: &L) -> Vec<u8> {
    let mut v = vec![0u8; l.encoded_len()];
    let mut w = Writer::new(&mut v);
    l.encode(&mut w);
    debug_assert_eq!(
        w.written(),
        v.len(),
        "{} wrote less than its length",
        L::NAME
    );
    v
}

/// Reads a whole `L` from `b`: no byte may be missing or left over.
pub fn from_bytes<L: Layout>(b: &[u8]) -> Result<L, WireError> {
    let mut r = Reader::new(L::NAME, b);
    let l = L::decode(&mut r)?;
    r.finish()?;
    Ok(l)
}

/// The `RZMQ-RDMA` property's value: `"<version> <provider>"`.
pub fn property(provider: &str) -> Vec<u8> {
    format!("{VERSION} {provider}").into_bytes()
}

/// Checks a peer's `RZMQ-RDMA` property: its version must be ours ([`WireError::Version`]
/// otherwise); returns the provider it names.
pub fn check_property(value: &[u8]) -> Result<&[u8], WireError> {
    const LAYOUT: &str = "RZMQ-RDMA property";
    let sp = value.iter().position(|&c| c == b' ');
    let (v, provider) = match sp {
        Some(i) => (&value[..i], &value[i + 1..]),
        None => (value, &[][..]),
    };
    let peer = std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse::<u8>().ok())
        .ok_or(WireError::Invalid {
            layout: LAYOUT,
            field: "version",
        })?;
    if peer != VERSION {
        return Err(WireError::Version {
            layout: LAYOUT,
            peer,
            ours: VERSION,
        });
    }
    Ok(provider)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers_are_little_endian_and_bounds_checked() {
        let mut b = [0u8; 15];
        let mut w = Writer::new(&mut b);
        w.u8(1);
        w.u16(0x0302);
        w.u32(0x0706_0504);
        w.u64(0x0f0e_0d0c_0b0a_0908);
        assert_eq!(w.written(), 15);
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        let mut r = Reader::new("t", &b);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(0x0302));
        assert_eq!(r.u32(), Ok(0x0706_0504));
        assert_eq!(r.u32(), Ok(0x0b0a_0908));
        assert_eq!(
            r.u64(),
            Err(WireError::Truncated {
                layout: "t",
                need: 8,
                have: 4
            })
        );
        assert_eq!(r.left(), 4, "a failed read consumes nothing");
        assert_eq!(
            r.finish(),
            Err(WireError::Trailing {
                layout: "t",
                extra: 4
            })
        );
    }

    #[test]
    fn header_refuses_other_versions_and_other_protocols() {
        let mut b = [0u8; 5];
        Writer::new(&mut b).header();
        assert_eq!(Reader::new("blob", &b).header(), Ok(()));
        let mut old = b;
        old[4] = 1;
        let e = Reader::new("blob", &old).header().unwrap_err();
        assert_eq!(
            e,
            WireError::Version {
                layout: "blob",
                peer: 1,
                ours: VERSION
            }
        );
        assert!(e.to_string().contains("version 1"), "{e}");
        let mut alien = b;
        alien[0] = b'X';
        assert_eq!(
            Reader::new("blob", &alien).header(),
            Err(WireError::Magic { layout: "blob" })
        );
    }

    #[test]
    fn property_names_the_version() {
        assert_eq!(property("soft"), format!("{VERSION} soft").into_bytes());
        assert_eq!(check_property(&property("soft")), Ok(&b"soft"[..]));
        let e = check_property(b"1 soft").unwrap_err();
        assert!(matches!(e, WireError::Version { peer: 1, .. }), "{e:?}");
        assert!(matches!(
            check_property(b"soft"),
            Err(WireError::Invalid { .. })
        ));
    }

    proptest! {
        #[test]
        fn reader_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64),
                               ops in proptest::collection::vec(0u8..8, 0..32)) {
            let mut r = Reader::new("any", &b);
            for op in ops {
                let _ = match op {
                    0 => r.u8().map(|_| ()),
                    1 => r.u16().map(|_| ()),
                    2 => r.u32().map(|_| ()),
                    3 => r.u64().map(|_| ()),
                    4 => r.bytes16().map(|_| ()),
                    5 => r.header(),
                    6 => r.take(usize::from(op) * 3).map(|_| ()),
                    _ => Ok(r.rest()).map(|_| ()),
                };
            }
            let _ = r.finish();
        }

        #[test]
        fn property_check_never_panics(b in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = check_property(&b);
        }
    }
}

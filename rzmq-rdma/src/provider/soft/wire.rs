//! The wire format: packet header (encode, decode, CRC), the connect hello, PSN arithmetic and
//! NAK codes.

use std::time::Duration;

pub(super) const PSN_MASK: u32 = 0xff_ffff;
/// Bytes of a packet header on the wire.
pub(crate) const HDR_LEN: usize = 48;
pub(super) const HDR_MAGIC: u16 = 0x5253;
/// Bytes of a wire's hello.
pub(crate) const HELLO_LEN: usize = 40;
pub(super) const HELLO_MAGIC: &[u8; 4] = b"RZSW";

pub(super) const K_SEND: u8 = 1;
pub(super) const K_WRITE: u8 = 2;
pub(super) const K_READ_REQ: u8 = 3;
pub(super) const K_READ_RESP: u8 = 4;
pub(super) const K_ACK: u8 = 5;
pub(super) const K_NAK: u8 = 6;

pub(super) const F_IMM: u8 = 1;
pub(super) const F_SOLICITED: u8 = 2;
/// READ_REQ: the requester can read the responder's memory itself. READ_RESP: no payload
/// follows; the requester copies it from the responder's process.
pub(super) const F_PULL: u8 = 4;

pub(super) const NAK_SEQ: u32 = 1;
pub(super) const NAK_RNR: u32 = 2;
pub(super) const NAK_REM_ACCESS: u32 = 3;
pub(super) const NAK_INV_REQ: u32 = 4;
pub(super) const NAK_REM_OP: u32 = 5;

/// A packet header: every packet on a wire starts with one ([`HDR_LEN`] bytes, CRC-checked).
///
/// Layout, little-endian: magic (0..2), kind, flags, psn (4..8), len (8..12), !len (12..16),
/// addr (16..24), rkey, imm, aux, aux2 (24..40), reserved (40..44), CRC-32 of bytes 0..44
/// (44..48). The reserved bytes are sent as zero and ignored on receipt (as IBA's reserved
/// fields are), so a header with other reserved bytes and a CRC that holds decodes to the same
/// [`Hdr`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hdr {
    /// Packet kind (`K_*`).
    pub(crate) kind: u8,
    /// `F_*` flags.
    pub(crate) flags: u8,
    /// The request's PSN (a response's: the request it answers).
    pub(crate) psn: u32,
    /// Bytes of payload that follow the header.
    pub(crate) len: u32,
    /// Remote address (WRITE, READ request).
    pub(crate) addr: u64,
    /// Remote key (WRITE, READ request).
    pub(crate) rkey: u32,
    /// Immediate data (with `F_IMM`).
    pub(crate) imm: u32,
    /// READ length (request; pulled response), NAK code.
    pub(crate) aux: u32,
    /// RNR NAK: the responder's timer code.
    pub(crate) aux2: u32,
}

pub(super) const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

pub(super) static CRC: [u32; 256] = crc_table();

pub(super) fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c = CRC[((c ^ u32::from(x)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

impl Hdr {
    /// The header's bytes on the wire (magic, length check and CRC filled in).
    pub(crate) fn encode(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0..2].copy_from_slice(&HDR_MAGIC.to_le_bytes());
        b[2] = self.kind;
        b[3] = self.flags;
        b[4..8].copy_from_slice(&self.psn.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..16].copy_from_slice(&(!self.len).to_le_bytes());
        b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        b[24..28].copy_from_slice(&self.rkey.to_le_bytes());
        b[28..32].copy_from_slice(&self.imm.to_le_bytes());
        b[32..36].copy_from_slice(&self.aux.to_le_bytes());
        b[36..40].copy_from_slice(&self.aux2.to_le_bytes());
        let c = crc32(&b[..44]);
        b[44..48].copy_from_slice(&c.to_le_bytes());
        b
    }
}

/// A header whose magic or length check failed: packet boundaries on the stream are lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FramingLost;

/// Decodes a packet header: `Ok((hdr, crc_ok))`, or [`FramingLost`] when the magic or the
/// length check fails (the stream can no longer be split into packets).
pub(crate) fn decode_header(b: &[u8; HDR_LEN]) -> std::result::Result<(Hdr, bool), FramingLost> {
    let u32at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    if u16::from_le_bytes([b[0], b[1]]) != HDR_MAGIC {
        return Err(FramingLost);
    }
    let len = u32at(8);
    if u32at(12) != !len {
        return Err(FramingLost);
    }
    let crc_ok = crc32(&b[..44]) == u32at(44);
    let mut addr = [0u8; 8];
    addr.copy_from_slice(&b[16..24]);
    Ok((
        Hdr {
            kind: b[2],
            flags: b[3],
            psn: u32at(4),
            len,
            addr: u64::from_le_bytes(addr),
            rkey: u32at(24),
            imm: u32at(28),
            aux: u32at(32),
            aux2: u32at(36),
        },
        crc_ok,
    ))
}

/// Signed distance a - b in 24-bit PSN space.
pub(super) fn pdiff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The RNR NAK timer codes of the IB spec, in microseconds.
pub(super) fn rnr_delay(code: u32) -> Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122_880, 163_840, 245_760,
        327_680, 491_520,
    ];
    Duration::from_micros(u64::from(US[(code & 31) as usize]))
}

/// The first bytes a wire carries ([`HELLO_LEN`], big-endian): which QP dials which, and the
/// secret of the QP it dials, learnt from that QP's endpoint descriptor. Layout: magic (0..4),
/// source device (4..12), source QPN (12..16), destination device (16..24), destination QPN
/// (24..28), destination secret (28..36), reserved (36..40: sent zero, ignored on receipt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    /// The dialing device.
    pub(crate) src_dev: u64,
    /// The dialing QP.
    pub(crate) src_qpn: u32,
    /// The device dialed.
    pub(crate) dst_dev: u64,
    /// The QP dialed.
    pub(crate) dst_qpn: u32,
    /// The dialed QP's secret.
    pub(crate) dst_secret: u64,
}

impl Hello {
    /// The hello's bytes on the wire.
    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(HELLO_MAGIC);
        b[4..12].copy_from_slice(&self.src_dev.to_be_bytes());
        b[12..16].copy_from_slice(&self.src_qpn.to_be_bytes());
        b[16..24].copy_from_slice(&self.dst_dev.to_be_bytes());
        b[24..28].copy_from_slice(&self.dst_qpn.to_be_bytes());
        b[28..36].copy_from_slice(&self.dst_secret.to_be_bytes());
        b
    }

    /// Decodes a hello; `None` when the magic is wrong (not a soft wire).
    pub(crate) fn decode(b: &[u8; HELLO_LEN]) -> Option<Hello> {
        if &b[0..4] != HELLO_MAGIC {
            return None;
        }
        let u64at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_be_bytes(x)
        };
        let u32at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        Some(Hello {
            src_dev: u64at(4),
            src_qpn: u32at(12),
            dst_dev: u64at(16),
            dst_qpn: u32at(24),
            dst_secret: u64at(28),
        })
    }
}

/// What the dialed QP looks like when a hello names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HelloTarget {
    /// The peer QP it was connected to (`modify_qp` to RTR), as (device, QPN).
    pub(crate) remote: Option<(u64, u32)>,
    /// Its secret.
    pub(crate) secret: u64,
    /// It is in RTR or RTS.
    pub(crate) ready: bool,
    /// It has its wire already.
    pub(crate) wired: bool,
    /// It is in the error state.
    pub(crate) errored: bool,
}

/// What a device does with an incoming wire once its hello is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HelloVerdict {
    /// The wire becomes the QP's.
    Attach,
    /// Not yet decidable (no such QP yet, or the QP is not yet RTR): keep the stream until
    /// the accept deadline.
    Wait,
    /// Close the stream: not a soft wire, another device, a QP that has its wire or failed, or
    /// a ready QP whose configured peer or secret the hello does not match (a wrong guess is
    /// not kept open for another).
    Drop,
}

/// Judges a hello read by device `dev`, given the QP it names (`None`: no such QP).
pub(crate) fn judge_hello(
    hello: Option<&Hello>,
    dev: u64,
    qp: Option<HelloTarget>,
) -> HelloVerdict {
    let Some(h) = hello else {
        return HelloVerdict::Drop;
    };
    if h.dst_dev != dev {
        return HelloVerdict::Drop;
    }
    let Some(qp) = qp else {
        return HelloVerdict::Wait;
    };
    if qp.wired || qp.errored {
        return HelloVerdict::Drop;
    }
    if !qp.ready {
        return HelloVerdict::Wait;
    }
    // One 64-bit compare per attempt, and a wrong guess closes the stream.
    if qp.remote == Some((h.src_dev, h.src_qpn)) && h.dst_secret == qp.secret {
        HelloVerdict::Attach
    } else {
        HelloVerdict::Drop
    }
}

#[cfg(test)]
mod tests {
    use super::FramingLost;
    use super::{judge_hello, Hello, HelloTarget, HelloVerdict};
    use crate::provider::soft::{decode_header, Hdr};

    /// A wire is attached only to a ready, unwired QP of this device whose configured peer and
    /// secret its hello names; a wrong guess at a ready QP closes the stream, and a hello that
    /// comes before the QP is ready waits for it.
    #[test]
    fn a_hello_attaches_only_with_the_right_peer_and_secret() {
        let h = Hello {
            src_dev: 1,
            src_qpn: 10,
            dst_dev: 2,
            dst_qpn: 20,
            dst_secret: 0xabc,
        };
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[0] ^= 1;
        assert_eq!(Hello::decode(&bad), None);
        assert_eq!(judge_hello(None, 2, None), HelloVerdict::Drop);
        let qp = HelloTarget {
            remote: Some((1, 10)),
            secret: 0xabc,
            ready: true,
            wired: false,
            errored: false,
        };
        use HelloVerdict::*;
        let cases = [
            (h, 2, Some(qp), Attach),
            (h, 3, Some(qp), Drop),
            (h, 2, None, Wait),
            (
                Hello {
                    dst_secret: 0xabd,
                    ..h
                },
                2,
                Some(qp),
                Drop,
            ),
            (Hello { src_qpn: 11, ..h }, 2, Some(qp), Drop),
            (
                h,
                2,
                Some(HelloTarget {
                    ready: false,
                    remote: None,
                    ..qp
                }),
                Wait,
            ),
            (h, 2, Some(HelloTarget { wired: true, ..qp }), Drop),
            (
                h,
                2,
                Some(HelloTarget {
                    errored: true,
                    ready: false,
                    ..qp
                }),
                Drop,
            ),
        ];
        for (i, (hello, dev, target, want)) in cases.into_iter().enumerate() {
            assert_eq!(judge_hello(Some(&hello), dev, target), want, "case {i}");
        }
    }

    #[test]
    fn a_header_decodes_as_encoded_and_a_broken_one_says_why() {
        let h = Hdr {
            kind: super::K_WRITE,
            flags: super::F_IMM,
            psn: 0x12_3456,
            len: 4096,
            addr: 0x7f00_0000_1000,
            rkey: 0x42,
            imm: 7,
            aux: 0,
            aux2: 0,
        };
        let b = h.encode();
        let (d, crc_ok) = decode_header(&b).unwrap();
        assert!(crc_ok);
        assert_eq!(
            (d.kind, d.psn, d.len, d.addr, d.imm),
            (h.kind, h.psn, h.len, h.addr, h.imm)
        );
        let mut c = b;
        c[30] ^= 0x10; // as Fault::CorruptNext does: framing holds, the CRC does not
        assert!(!decode_header(&c).unwrap().1);
        let mut m = b;
        m[0] ^= 1;
        assert_eq!(decode_header(&m).unwrap_err(), FramingLost);
        let mut l = b;
        l[8] ^= 1;
        assert_eq!(decode_header(&l).unwrap_err(), FramingLost);
    }
}

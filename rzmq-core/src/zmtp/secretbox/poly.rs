//! Poly1305 one-time authentication of a box's ciphertext, by length and CPU:
//! - eight blocks at a time with AVX-512 IFMA (52-bit multiply-adds) where the CPU has it and
//!   the compiler builds it (Rust 1.89 on): [`super::poly_ifma`];
//! - otherwise from [`LONG`] bytes on the `poly1305` crate (AVX2 when the CPU has it, about
//!   5 GB/s here);
//! - and below that, and for what the IFMA loop leaves, a 64-bit scalar implementation
//!   (poly1305-donna's 44/44/42-bit limbs): the crate's AVX2 state costs about a microsecond to
//!   set up, more than hashing a whole 1 KiB box with 64-bit limbs.

use poly1305::universal_hash::{KeyInit, UniversalHash};
use poly1305::Poly1305;
use zeroize::Zeroize;

/// From this input length on the `poly1305` crate is faster than [`Scalar`] (measured, see
/// docs/BENCHMARKS.md).
const LONG: usize = 4096;

pub(super) const MASK44: u64 = 0xfff_ffff_ffff;
pub(super) const MASK42: u64 = 0x3ff_ffff_ffff;

/// The Poly1305 tag of `data` under the one-time `key` (r, then s).
pub(super) fn tag(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= super::poly_ifma::MIN {
        if let Some(blocks) = super::poly_ifma::available() {
            let mut st = Scalar::new(key);
            let done = blocks(&mut st, data);
            return st.finish(key, &data[done..]);
        }
    }
    if data.len() >= LONG {
        return long(key, data);
    }
    Scalar::new(key).finish(key, data)
}

/// The `poly1305` crate's tag (its AVX2 state where the CPU has AVX2).
fn long(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    let mut mac = Poly1305::new(key.into());
    let (blocks, rest) = data.split_at(data.len() / 16 * 16);
    // Whole blocks, so `update_padded` pads nothing; the last partial block is padded as
    // Poly1305 pads a message's end (a 1, then zeros).
    mac.update_padded(blocks);
    mac.compute_unpadded(rest).into()
}

fn le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Poly1305 state in poly1305-donna-64's limbs: `h = h0 + h1 2^44 + h2 2^88` (mod 2^130 - 5),
/// and the clamped `r` likewise.
pub(super) struct Scalar {
    pub(super) h: [u64; 3],
    pub(super) r: [u64; 3],
}

impl Scalar {
    fn new(key: &[u8; 32]) -> Scalar {
        let (t0, t1) = (le(&key[..8]), le(&key[8..16]));
        let r = [
            t0 & 0xffc_0fff_ffff,
            ((t0 >> 44) | (t1 << 20)) & 0xfff_ffc0_ffff,
            (t1 >> 24) & 0x00f_ffff_fc0f,
        ];
        Scalar { h: [0; 3], r }
    }

    /// `a * b mod 2^130 - 5`, partly reduced (limbs of 44, 44 + a few, 42 bits).
    pub(super) fn mul(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
        let (s1, s2) = (b[1] * 20, b[2] * 20);
        let m = |x: u64, y: u64| u128::from(x) * u128::from(y);
        let d0 = m(a[0], b[0]) + m(a[1], s2) + m(a[2], s1);
        let mut d1 = m(a[0], b[1]) + m(a[1], b[0]) + m(a[2], s2);
        let mut d2 = m(a[0], b[2]) + m(a[1], b[1]) + m(a[2], b[0]);
        let mut c = (d0 >> 44) as u64;
        let mut h0 = d0 as u64 & MASK44;
        d1 += u128::from(c);
        c = (d1 >> 44) as u64;
        let mut h1 = d1 as u64 & MASK44;
        d2 += u128::from(c);
        c = (d2 >> 42) as u64;
        let h2 = d2 as u64 & MASK42;
        h0 += c * 5;
        c = h0 >> 44;
        h0 &= MASK44;
        h1 += c;
        [h0, h1, h2]
    }

    /// Absorbs one 16-byte block; `hibit` is 2^128 in limb 2 (1 << 40) for whole blocks, 0 for
    /// the padded last one.
    fn block(&mut self, m: &[u8], hibit: u64) {
        let (t0, t1) = (le(&m[..8]), le(&m[8..16]));
        let a = [
            self.h[0] + (t0 & MASK44),
            self.h[1] + (((t0 >> 44) | (t1 << 20)) & MASK44),
            self.h[2] + (((t1 >> 24) & MASK42) | hibit),
        ];
        self.h = Scalar::mul(a, self.r);
    }

    /// Absorbs the rest of the input (`data`) and returns the tag `h + s mod 2^128`.
    fn finish(mut self, key: &[u8; 32], data: &[u8]) -> [u8; 16] {
        let mut chunks = data.chunks_exact(16);
        for m in &mut chunks {
            self.block(m, 1 << 40);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 16];
            last[..rest.len()].copy_from_slice(rest);
            last[rest.len()] = 1;
            self.block(&last, 0);
            last.zeroize();
        }
        let [mut h0, mut h1, mut h2] = self.h;

        // Carry fully, then h mod p: subtract p if h >= p, without a branch.
        let mut c = h1 >> 44;
        h1 &= MASK44;
        h2 += c;
        c = h2 >> 42;
        h2 &= MASK42;
        h0 += c * 5;
        c = h0 >> 44;
        h0 &= MASK44;
        h1 += c;
        c = h1 >> 44;
        h1 &= MASK44;
        h2 += c;
        c = h2 >> 42;
        h2 &= MASK42;
        h0 += c * 5;
        c = h0 >> 44;
        h0 &= MASK44;
        h1 += c;

        let mut g0 = h0 + 5;
        c = g0 >> 44;
        g0 &= MASK44;
        let mut g1 = h1 + c;
        c = g1 >> 44;
        g1 &= MASK44;
        let mut g2 = (h2 + c).wrapping_sub(1 << 42);
        let keep_g = (g2 >> 63).wrapping_sub(1); // all ones when h + 5 - 2^130 did not go negative
        g0 &= keep_g;
        g1 &= keep_g;
        g2 &= keep_g;
        h0 = (h0 & !keep_g) | g0;
        h1 = (h1 & !keep_g) | g1;
        h2 = (h2 & !keep_g) | g2;

        // h + s mod 2^128
        let (t0, t1) = (le(&key[16..24]), le(&key[24..32]));
        h0 += t0 & MASK44;
        c = h0 >> 44;
        h0 &= MASK44;
        h1 += (((t0 >> 44) | (t1 << 20)) & MASK44) + c;
        c = h1 >> 44;
        h1 &= MASK44;
        h2 += ((t1 >> 24) & MASK42) + c;
        h2 &= MASK42;
        let lo = h0 | (h1 << 44);
        let hi = (h1 >> 20) | (h2 << 24);
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&lo.to_le_bytes());
        out[8..].copy_from_slice(&hi.to_le_bytes());
        out
    }
}

/// The scalar path alone (tests).
#[cfg(test)]
fn short(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    Scalar::new(key).finish(key, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
        Poly1305::new(key.into()).compute_unpadded(data).into()
    }

    #[test]
    fn rfc_8439_vector() {
        let key: [u8; 32] = [
            0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33, 0x7f, 0x44, 0x52, 0xfe, 0x42, 0xd5,
            0x06, 0xa8, 0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d, 0xb2, 0xfd, 0x4a, 0xbf, 0xf6, 0xaf,
            0x41, 0x49, 0xf5, 0x1b,
        ];
        let tag = [
            0xa8, 0x06, 0x1d, 0xc1, 0x30, 0x51, 0x36, 0xc6, 0xc2, 0x2b, 0x8b, 0xaf, 0x0c, 0x01,
            0x27, 0xa9,
        ];
        assert_eq!(short(&key, b"Cryptographic Forum Research Group"), tag);
    }

    /// Each path by itself, whichever `tag` picks on this CPU.
    #[test]
    fn every_path_matches_the_crate() {
        let key: [u8; 32] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        for len in [
            0,
            15,
            16,
            127,
            128,
            129,
            255,
            256,
            1057,
            LONG,
            LONG + 9,
            70_001,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let want = reference(&key, &data);
            assert_eq!(short(&key, &data), want, "scalar at {len}");
            assert_eq!(long(&key, &data), want, "crate at {len}");
            #[cfg(target_arch = "x86_64")]
            if let Some(blocks) = super::super::poly_ifma::available() {
                let mut st = Scalar::new(&key);
                let done = blocks(&mut st, &data);
                assert_eq!(done, len / 128 * 128);
                assert_eq!(st.finish(&key, &data[done..]), want, "IFMA at {len}");
            }
        }
    }

    #[test]
    fn limbs_at_their_maximum() {
        // All-ones keys and messages drive every carry; every path against the crate.
        let key = [0xffu8; 32];
        for len in [
            0,
            1,
            15,
            16,
            17,
            255,
            256,
            1000,
            LONG - 1,
            LONG,
            LONG + 1,
            3 * LONG + 7,
        ] {
            let data = vec![0xffu8; len];
            assert_eq!(short(&key, &data), reference(&key, &data), "short at {len}");
            assert_eq!(tag(&key, &data), reference(&key, &data), "tag at {len}");
            assert_eq!(long(&key, &data), reference(&key, &data), "crate at {len}");
        }
    }

    proptest! {
        #[test]
        fn matches_the_crate(
            key in any::<[u8; 32]>(),
            data in proptest::collection::vec(any::<u8>(), 0..3 * LONG),
        ) {
            prop_assert_eq!(short(&key, &data), reference(&key, &data));
            prop_assert_eq!(tag(&key, &data), reference(&key, &data));
        }
    }
}

//! Poly1305 one-time authentication of a box's ciphertext. Long inputs go to the `poly1305`
//! crate (AVX2 when the CPU has it, about 5 GB/s here), short ones to a 64-bit scalar
//! implementation (poly1305-donna's 44/44/42-bit limbs): the crate's AVX2 state costs about a
//! microsecond to set up, more than hashing a whole 1 KiB box with 64-bit limbs.

use poly1305::universal_hash::{KeyInit, UniversalHash};
use poly1305::Poly1305;
use zeroize::Zeroize;

/// From this input length on the `poly1305` crate is faster (measured, see docs/BENCHMARKS.md).
const LONG: usize = 4096;

const MASK44: u64 = 0xfff_ffff_ffff;
const MASK42: u64 = 0x3ff_ffff_ffff;

/// The Poly1305 tag of `data` under the one-time `key` (r, then s).
pub(super) fn tag(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    if data.len() >= LONG {
        let mut mac = Poly1305::new(key.into());
        let (blocks, rest) = data.split_at(data.len() / 16 * 16);
        // Whole blocks, so `update_padded` pads nothing; the last partial block is padded as
        // Poly1305 pads a message's end (a 1, then zeros).
        mac.update_padded(blocks);
        return mac.compute_unpadded(rest).into();
    }
    short(key, data)
}

/// poly1305-donna-64.
fn short(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    let le = |b: &[u8]| u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let (t0, t1) = (le(&key[..8]), le(&key[8..16]));
    let r0 = t0 & 0xffc_0fff_ffff;
    let r1 = ((t0 >> 44) | (t1 << 20)) & 0xfff_ffc0_ffff;
    let r2 = (t1 >> 24) & 0x00f_ffff_fc0f;
    let (s1, s2) = (r1 * 20, r2 * 20);
    let (mut h0, mut h1, mut h2) = (0u64, 0u64, 0u64);

    let mut block = |m: &[u8], hibit: u64| {
        let (t0, t1) = (le(&m[..8]), le(&m[8..16]));
        h0 += t0 & MASK44;
        h1 += ((t0 >> 44) | (t1 << 20)) & MASK44;
        h2 += ((t1 >> 24) & MASK42) | hibit;
        let m = |a: u64, b: u64| u128::from(a) * u128::from(b);
        let d0 = m(h0, r0) + m(h1, s2) + m(h2, s1);
        let mut d1 = m(h0, r1) + m(h1, r0) + m(h2, s2);
        let mut d2 = m(h0, r2) + m(h1, r1) + m(h2, r0);
        let mut c = (d0 >> 44) as u64;
        h0 = d0 as u64 & MASK44;
        d1 += u128::from(c);
        c = (d1 >> 44) as u64;
        h1 = d1 as u64 & MASK44;
        d2 += u128::from(c);
        c = (d2 >> 42) as u64;
        h2 = d2 as u64 & MASK42;
        h0 += c * 5;
        c = h0 >> 44;
        h0 &= MASK44;
        h1 += c;
    };
    let mut chunks = data.chunks_exact(16);
    for m in &mut chunks {
        block(m, 1 << 40);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 16];
        last[..rest.len()].copy_from_slice(rest);
        last[rest.len()] = 1;
        block(&last, 0);
        last.zeroize();
    }

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

    #[test]
    fn limbs_at_their_maximum() {
        // All-ones keys and messages drive every carry; both paths against the crate.
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

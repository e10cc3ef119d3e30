//! Poly1305 in 64-bit limbs (poly1305-donna's 44/44/42 bits): the state the scalar path and the
//! IFMA loop's tail share, below both.

use zeroize::Zeroize;

/// Low 44 bits.
pub(super) const MASK44: u64 = 0xfff_ffff_ffff;
/// Low 42 bits.
pub(super) const MASK42: u64 = 0x3ff_ffff_ffff;

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
    pub(super) fn new(key: &[u8; 32]) -> Scalar {
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
    pub(super) fn finish(mut self, key: &[u8; 32], data: &[u8]) -> [u8; 16] {
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

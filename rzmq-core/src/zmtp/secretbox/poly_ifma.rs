//! Poly1305 eight blocks at a time with AVX-512 IFMA: lane `j` of three 512-bit registers holds
//! an accumulator in the scalar code's 44/44/42-bit limbs for blocks `j, j + 8, ...`; each step
//! adds eight blocks and multiplies every lane by `r^8` with 52-bit multiply-adds, the last
//! multiplies lane `j` by `r^(8 - j)`, and the lanes' sum continues in [`Scalar`] (OpenSSL's
//! `poly1305_blocks_vpmadd52` works the same way). Needs Rust 1.89 for the intrinsics.

#![allow(clippy::needless_range_loop)]

use super::poly_scalar::Scalar;

/// Shortest input worth the setup (seven scalar multiplications for the powers of `r`).
pub(super) const MIN: usize = 256;

/// Absorbs the whole 128-byte groups at the start of `data` into the state, returns how many
/// bytes that was.
pub(super) type Blocks = fn(&mut Scalar, &[u8]) -> usize;

/// The IFMA loop, if this CPU runs it.
#[rustversion::since(1.89)]
pub(super) fn available() -> Option<Blocks> {
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512ifma") {
        return Some(|st, data| {
            // SAFETY: the CPU has AVX-512F and IFMA, checked above.
            unsafe { imp::blocks(st, data) }
        });
    }
    None
}

/// AVX-512 intrinsics need Rust 1.89.
#[rustversion::before(1.89)]
pub(super) fn available() -> Option<Blocks> {
    None
}

#[rustversion::since(1.89)]
mod imp {
    use std::arch::x86_64::*;

    use super::super::poly_scalar::{Scalar, MASK42, MASK44};

    /// See [`super::Blocks`].
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512 IFMA.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(super) unsafe fn blocks(st: &mut Scalar, data: &[u8]) -> usize {
        let groups = data.len() / 128;
        if groups == 0 {
            return 0;
        }
        // pw[i] = r^(i + 1)
        let mut pw = [[0u64; 3]; 8];
        pw[0] = st.r;
        for i in 1..8 {
            pw[i] = Scalar::mul(pw[i - 1], st.r);
        }
        // (Macros, not closures: a closure would not inherit the target features, and the
        // intrinsics would not be inlined into it.)
        macro_rules! splat {
            ($x:expr) => {
                _mm512_set1_epi64($x as i64)
            };
        }
        // Lane j of the last step: r^(8 - j).
        macro_rules! last {
            ($k:expr, $times:expr) => {
                _mm512_setr_epi64(
                    (pw[7][$k] * $times) as i64,
                    (pw[6][$k] * $times) as i64,
                    (pw[5][$k] * $times) as i64,
                    (pw[4][$k] * $times) as i64,
                    (pw[3][$k] * $times) as i64,
                    (pw[2][$k] * $times) as i64,
                    (pw[1][$k] * $times) as i64,
                    (pw[0][$k] * $times) as i64,
                )
            };
        }
        let r8 = [splat!(pw[7][0]), splat!(pw[7][1]), splat!(pw[7][2])];
        let s8 = [splat!(pw[7][1] * 20), splat!(pw[7][2] * 20)];
        let rl = [last!(0, 1), last!(1, 1), last!(2, 1)];
        let sl = [last!(1, 20), last!(2, 20)];

        let mask44 = splat!(MASK44);
        let hibit = splat!(1u64 << 40);
        let even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
        let odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
        let mut h = [
            _mm512_setr_epi64(st.h[0] as i64, 0, 0, 0, 0, 0, 0, 0),
            _mm512_setr_epi64(st.h[1] as i64, 0, 0, 0, 0, 0, 0, 0),
            _mm512_setr_epi64(st.h[2] as i64, 0, 0, 0, 0, 0, 0, 0),
        ];
        for g in 0..groups {
            // SAFETY: group g is data[128 g..128 g + 128], inside `data` as g < len / 128;
            // unaligned loads.
            let (lo, hi) = unsafe {
                let p = data.as_ptr().add(128 * g);
                (
                    _mm512_loadu_si512(p.cast()),
                    _mm512_loadu_si512(p.add(64).cast()),
                )
            };
            // Little-endian halves of the eight blocks, then their limbs plus 2^128.
            let t0 = _mm512_permutex2var_epi64(lo, even, hi);
            let t1 = _mm512_permutex2var_epi64(lo, odd, hi);
            let m0 = _mm512_and_si512(t0, mask44);
            let m1 = _mm512_and_si512(
                _mm512_or_si512(_mm512_srli_epi64::<44>(t0), _mm512_slli_epi64::<20>(t1)),
                mask44,
            );
            let m2 = _mm512_or_si512(_mm512_srli_epi64::<24>(t1), hibit);
            let a = [
                _mm512_add_epi64(h[0], m0),
                _mm512_add_epi64(h[1], m1),
                _mm512_add_epi64(h[2], m2),
            ];
            // SAFETY: `mul` needs this function's own target features.
            h = unsafe {
                if g + 1 < groups {
                    mul(a, &r8, &s8)
                } else {
                    mul(a, &rl, &sl)
                }
            };
        }
        // Sum the lanes (each under 2^47 after the sum), then carry into the scalar limbs.
        let mut h0 = _mm512_reduce_add_epi64(h[0]) as u64;
        let mut h1 = _mm512_reduce_add_epi64(h[1]) as u64;
        let mut h2 = _mm512_reduce_add_epi64(h[2]) as u64;
        let mut c = h0 >> 44;
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
        st.h = [h0, h1, h2];
        groups * 128
    }

    /// `a * r mod 2^130 - 5` in every lane, partly reduced; `s` is `20 r1, 20 r2`. Inputs stay
    /// under 2^52 (IFMA's operand width): limbs under 2^45 times `r`/`s` under 2^49.
    #[target_feature(enable = "avx512f,avx512ifma")]
    #[inline]
    unsafe fn mul(a: [__m512i; 3], r: &[__m512i; 3], s: &[__m512i; 2]) -> [__m512i; 3] {
        let z = _mm512_setzero_si512();
        // Each product's bits 0-51 (lo) and 52-103 (hi), summed per output limb.
        macro_rules! sum3 {
            ($madd:ident, $x0:expr, $y0:expr, $x1:expr, $y1:expr, $x2:expr, $y2:expr) => {
                $madd($madd($madd(z, $x0, $y0), $x1, $y1), $x2, $y2)
            };
        }
        let d0l = sum3!(_mm512_madd52lo_epu64, a[0], r[0], a[1], s[1], a[2], s[0]);
        let d0h = sum3!(_mm512_madd52hi_epu64, a[0], r[0], a[1], s[1], a[2], s[0]);
        let d1l = sum3!(_mm512_madd52lo_epu64, a[0], r[1], a[1], r[0], a[2], s[1]);
        let d1h = sum3!(_mm512_madd52hi_epu64, a[0], r[1], a[1], r[0], a[2], s[1]);
        let d2l = sum3!(_mm512_madd52lo_epu64, a[0], r[2], a[1], r[1], a[2], r[0]);
        let d2h = sum3!(_mm512_madd52hi_epu64, a[0], r[2], a[1], r[1], a[2], r[0]);
        let mask44 = _mm512_set1_epi64(MASK44 as i64);
        let mask42 = _mm512_set1_epi64(MASK42 as i64);
        // A hi part weighs 2^52 = 2^8 * 2^44 in the next limb up (2^10 * 2^130 from limb 2,
        // which wraps to 5 * 2^10 at limb 0).
        let mut h0 = _mm512_and_si512(d0l, mask44);
        let c = _mm512_add_epi64(_mm512_srli_epi64::<44>(d0l), _mm512_slli_epi64::<8>(d0h));
        let d1 = _mm512_add_epi64(d1l, c);
        let mut h1 = _mm512_and_si512(d1, mask44);
        let c = _mm512_add_epi64(_mm512_srli_epi64::<44>(d1), _mm512_slli_epi64::<8>(d1h));
        let d2 = _mm512_add_epi64(d2l, c);
        let h2 = _mm512_and_si512(d2, mask42);
        let c = _mm512_add_epi64(_mm512_srli_epi64::<42>(d2), _mm512_slli_epi64::<10>(d2h));
        h0 = _mm512_add_epi64(h0, _mm512_add_epi64(c, _mm512_slli_epi64::<2>(c)));
        let c = _mm512_srli_epi64::<44>(h0);
        h0 = _mm512_and_si512(h0, mask44);
        h1 = _mm512_add_epi64(h1, c);
        [h0, h1, h2]
    }
}

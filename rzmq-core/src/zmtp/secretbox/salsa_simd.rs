//! Salsa20/20 eight blocks at a time: each of the 16 state words is one 256-bit register holding
//! that word of eight consecutive blocks, the rounds run on all eight at once, and two 8x8
//! transposes turn the registers back into blocks (libsodium's `xmm6int-avx2` does the same).
//! Two builds of the same code: AVX2 ([`avx2`]), and AVX-512VL ([`avx512`], Rust 1.89 on), whose
//! rotate instruction replaces AVX2's shift-shift-or and whose 32 registers hold the whole state.

/// Bytes of keystream per batch.
pub(super) const BATCH: usize = 512;

/// Salsa20's quarter round on the words `a b c d` of all eight blocks.
macro_rules! quarter {
    ($rotl:ident, $x:ident, $a:literal, $b:literal, $c:literal, $d:literal) => {
        $x[$b] = _mm256_xor_si256($x[$b], $rotl!(_mm256_add_epi32($x[$a], $x[$d]), 7));
        $x[$c] = _mm256_xor_si256($x[$c], $rotl!(_mm256_add_epi32($x[$b], $x[$a]), 9));
        $x[$d] = _mm256_xor_si256($x[$d], $rotl!(_mm256_add_epi32($x[$c], $x[$b]), 13));
        $x[$a] = _mm256_xor_si256($x[$a], $rotl!(_mm256_add_epi32($x[$d], $x[$c]), 18));
    };
}

/// The keystream functions for one set of target features and one 32-bit rotate.
macro_rules! keystream {
    ($features:literal, $rotl:ident) => {
        /// Writes `src[i] ^ keystream[i]` to `dst[i]` for `i < len`, the keystream of `state`
        /// from block `counter` on; a tail short of a batch takes a whole batch of keystream.
        ///
        /// # Safety
        /// The CPU must support the module's target features; `src` must be readable and `dst`
        /// writable for `len` bytes, and the two are the same bytes or do not overlap.
        #[target_feature(enable = $features)]
        pub(in super::super) unsafe fn xor_keystream(
            state: &[u32; 16],
            mut counter: u64,
            src: *const u8,
            dst: *mut u8,
            len: usize,
        ) {
            let mut at = 0;
            while len - at >= super::BATCH {
                // SAFETY: `batch` needs this function's own target features.
                let ks = unsafe { batch(state, counter) };
                for (i, k) in ks.iter().enumerate() {
                    // SAFETY: at + 32 i + 32 <= at + BATCH <= len, inside both buffers (the
                    // caller's promise); unaligned loads and stores.
                    unsafe {
                        let d = _mm256_loadu_si256(src.add(at + 32 * i).cast());
                        _mm256_storeu_si256(dst.add(at + 32 * i).cast(), _mm256_xor_si256(d, *k));
                    }
                }
                counter = counter.wrapping_add(8);
                at += super::BATCH;
            }
            if at < len {
                // SAFETY: as above.
                let ks = unsafe { batch(state, counter) };
                let mut bytes = [0u8; super::BATCH];
                let p = bytes.as_mut_ptr().cast::<__m256i>();
                for (i, k) in ks.iter().enumerate() {
                    // SAFETY: `bytes` is 16 * 32 bytes; unaligned store.
                    unsafe { _mm256_storeu_si256(p.add(i), *k) };
                }
                for (i, k) in bytes[..len - at].iter().enumerate() {
                    // SAFETY: at + i < len, inside both buffers.
                    unsafe { dst.add(at + i).write(src.add(at + i).read() ^ k) };
                }
                bytes.zeroize();
            }
        }

        /// Eight keystream blocks from block `counter` on, in memory order: register `2b` holds words
        /// 0-7 of block `b`, register `2b + 1` words 8-15.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn batch(state: &[u32; 16], counter: u64) -> [__m256i; 16] {
            let mut s = [_mm256_setzero_si256(); 16];
            for (r, &w) in s.iter_mut().zip(state) {
                *r = _mm256_set1_epi32(w as i32);
            }
            let c: [u64; 8] = std::array::from_fn(|i| counter.wrapping_add(i as u64));
            s[8] = _mm256_setr_epi32(
                c[0] as i32,
                c[1] as i32,
                c[2] as i32,
                c[3] as i32,
                c[4] as i32,
                c[5] as i32,
                c[6] as i32,
                c[7] as i32,
            );
            s[9] = _mm256_setr_epi32(
                (c[0] >> 32) as i32,
                (c[1] >> 32) as i32,
                (c[2] >> 32) as i32,
                (c[3] >> 32) as i32,
                (c[4] >> 32) as i32,
                (c[5] >> 32) as i32,
                (c[6] >> 32) as i32,
                (c[7] >> 32) as i32,
            );
            let mut x = s;
            for _ in 0..10 {
                // columns
                quarter!($rotl, x, 0, 4, 8, 12);
                quarter!($rotl, x, 5, 9, 13, 1);
                quarter!($rotl, x, 10, 14, 2, 6);
                quarter!($rotl, x, 15, 3, 7, 11);
                // rows
                quarter!($rotl, x, 0, 1, 2, 3);
                quarter!($rotl, x, 5, 6, 7, 4);
                quarter!($rotl, x, 10, 11, 8, 9);
                quarter!($rotl, x, 15, 12, 13, 14);
            }
            for (r, i) in x.iter_mut().zip(&s) {
                *r = _mm256_add_epi32(*r, *i);
            }
            // SAFETY: `transpose` needs this function's own target features.
            let (lo, hi) = unsafe { (transpose(&x[..8]), transpose(&x[8..])) };
            std::array::from_fn(|i| if i % 2 == 0 { lo[i / 2] } else { hi[i / 2] })
        }

        /// 8x8 transpose of 32-bit lanes: row `i` of the result is lane `i` of each of the eight inputs.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn transpose(r: &[__m256i]) -> [__m256i; 8] {
            let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
            let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
            let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
            let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
            let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
            let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
            let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
            let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
            // lanes 0 and 4 / 1 and 5 / 2 and 6 / 3 and 7 of r0..r3 and of r4..r7
            let a0 = _mm256_unpacklo_epi64(t0, t2);
            let a1 = _mm256_unpackhi_epi64(t0, t2);
            let a2 = _mm256_unpacklo_epi64(t1, t3);
            let a3 = _mm256_unpackhi_epi64(t1, t3);
            let b0 = _mm256_unpacklo_epi64(t4, t6);
            let b1 = _mm256_unpackhi_epi64(t4, t6);
            let b2 = _mm256_unpacklo_epi64(t5, t7);
            let b3 = _mm256_unpackhi_epi64(t5, t7);
            [
                _mm256_permute2x128_si256::<0x20>(a0, b0),
                _mm256_permute2x128_si256::<0x20>(a1, b1),
                _mm256_permute2x128_si256::<0x20>(a2, b2),
                _mm256_permute2x128_si256::<0x20>(a3, b3),
                _mm256_permute2x128_si256::<0x31>(a0, b0),
                _mm256_permute2x128_si256::<0x31>(a1, b1),
                _mm256_permute2x128_si256::<0x31>(a2, b2),
                _mm256_permute2x128_si256::<0x31>(a3, b3),
            ]
        }
    };
}

/// AVX2: rotates as two shifts and an OR.
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    use zeroize::Zeroize;

    macro_rules! rotl {
        ($v:expr, $n:literal) => {{
            let v = $v;
            _mm256_or_si256(
                _mm256_slli_epi32::<$n>(v),
                _mm256_srli_epi32::<{ 32 - $n }>(v),
            )
        }};
    }

    keystream!("avx2", rotl);
}

/// AVX-512F with VL on 256-bit registers: one rotate instruction, 32 registers.
#[rustversion::since(1.89)]
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    use zeroize::Zeroize;

    macro_rules! rotl {
        ($v:expr, $n:literal) => {
            _mm256_rol_epi32::<$n>($v)
        };
    }

    keystream!("avx2,avx512f,avx512vl", rotl);
}

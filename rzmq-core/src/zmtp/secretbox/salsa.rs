//! The Salsa20/20 keystream from a raw state: one block at a time through the `salsa20` crate's
//! core, or eight at a time in AVX2 or AVX-512VL registers ([`super::salsa_simd`]) when the CPU
//! has them.

use salsa20::cipher::consts::U10;
use salsa20::cipher::StreamCipherCore;
use salsa20::SalsaCore;
use zeroize::Zeroize;

/// "expand 32-byte k", the words at state positions 0, 5, 10 and 15.
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The Salsa20 input state for a 32-byte key and an 8-byte nonce, block counter 0 (words 8, 9).
pub(super) fn state(key: &[u8], nonce: &[u8]) -> [u32; 16] {
    let mut s = [0u32; 16];
    s[0] = SIGMA[0];
    for i in 0..4 {
        s[1 + i] = le32(&key[4 * i..]);
        s[11 + i] = le32(&key[16 + 4 * i..]);
    }
    s[5] = SIGMA[1];
    s[6] = le32(&nonce[..4]);
    s[7] = le32(&nonce[4..8]);
    s[10] = SIGMA[2];
    s[15] = SIGMA[3];
    s
}

fn with_counter(state: &[u32; 16], counter: u64) -> SalsaCore<U10> {
    let mut s = *state;
    s[8] = counter as u32;
    s[9] = (counter >> 32) as u32;
    let core = SalsaCore::<U10>::from_raw_state(s);
    s.zeroize();
    core
}

/// Keystream block number `counter`.
pub(super) fn block(state: &[u32; 16], counter: u64) -> [u8; 64] {
    let mut core = with_counter(state, counter);
    let mut b = [0u8; 64];
    core.write_keystream_block((&mut b).into());
    b
}

/// XORs `data` with the keystream from block `counter` on.
pub(super) fn xor_keystream(state: &[u32; 16], counter: u64, data: &mut [u8]) {
    let p = data.as_mut_ptr();
    // SAFETY: in place over `data`, valid for its length.
    unsafe { xor_raw(state, counter, p, p, data.len()) }
}

/// Writes `src` XORed with the keystream from block `counter` on to `dst`.
///
/// # Safety
/// `dst` must be writable for `src.len()` bytes and not overlap `src`.
pub(super) unsafe fn xor_keystream_to(state: &[u32; 16], counter: u64, src: &[u8], dst: *mut u8) {
    // SAFETY: `src` is readable for its length, the rest is the caller's promise.
    unsafe { xor_raw(state, counter, src.as_ptr(), dst, src.len()) }
}

/// `dst[i] = src[i] ^ keystream[i]` for `i < len`.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, the same bytes or not overlapping.
unsafe fn xor_raw(state: &[u32; 16], counter: u64, src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if len > SCALAR_TAIL {
        if let Some(simd) = simd() {
            use super::salsa_simd::BATCH;
            // A tail of up to three blocks is cheaper one block at a time than as a batch.
            let mut wide = len / BATCH * BATCH;
            if len - wide > SCALAR_TAIL {
                wide = len;
            }
            // SAFETY: the CPU runs `simd` (its features were detected); the ranges are the
            // caller's, split at `wide <= len`.
            unsafe {
                simd(state, counter, src, dst, wide);
                let blocks = (wide / 64) as u64;
                scalar_raw(
                    state,
                    counter.wrapping_add(blocks),
                    src.add(wide),
                    dst.add(wide),
                    len - wide,
                );
            }
            return;
        }
    }
    // SAFETY: the caller's promise.
    unsafe { scalar_raw(state, counter, src, dst, len) }
}

/// Longest tail left to the scalar core (measured: a scalar block costs about a quarter of an
/// AVX2 batch of eight).
#[cfg(target_arch = "x86_64")]
const SCALAR_TAIL: usize = 192;

/// A keystream function of [`super::salsa_simd`]: `(state, counter, src, dst, len)`.
#[cfg(target_arch = "x86_64")]
type SimdKeystream = unsafe fn(&[u32; 16], u64, *const u8, *mut u8, usize);

/// The widest keystream code this CPU runs (and this compiler builds), if any.
#[cfg(target_arch = "x86_64")]
fn simd() -> Option<SimdKeystream> {
    if let Some(f) = avx512() {
        return Some(f);
    }
    if std::is_x86_feature_detected!("avx2") {
        return Some(super::salsa_simd::avx2::xor_keystream);
    }
    None
}

#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
fn avx512() -> Option<SimdKeystream> {
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
        return Some(super::salsa_simd::avx512::xor_keystream);
    }
    None
}

/// AVX-512 intrinsics need Rust 1.89.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
fn avx512() -> Option<SimdKeystream> {
    None
}

/// [`xor_keystream`] one block at a time (CPUs without AVX2, short tails; tests compare the two).
#[cfg(test)]
fn xor_keystream_scalar(state: &[u32; 16], counter: u64, data: &mut [u8]) {
    let p = data.as_mut_ptr();
    // SAFETY: in place over `data`.
    unsafe { scalar_raw(state, counter, p, p, data.len()) }
}

/// [`xor_raw`] one block at a time.
///
/// # Safety
/// As [`xor_raw`].
unsafe fn scalar_raw(state: &[u32; 16], counter: u64, src: *const u8, dst: *mut u8, len: usize) {
    let mut core = with_counter(state, counter);
    let mut ks = [0u8; 64];
    let mut at = 0;
    while at < len {
        core.write_keystream_block((&mut ks).into());
        for (i, k) in ks[..(len - at).min(64)].iter().enumerate() {
            // SAFETY: at + i < len, inside both ranges (the caller's promise).
            unsafe { dst.add(at + i).write(src.add(at + i).read() ^ k) };
        }
        at += 64;
    }
    ks.zeroize();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whichever SIMD build this CPU takes (both on AVX-512 machines: see `avx2_matches_scalar`).
    #[test]
    fn simd_and_scalar_keystreams_agree() {
        let key: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
        let s = state(&key, b"8 bytes!");
        // Counters across the 2^32 carry into word 9, lengths across batches and tails.
        for counter in [0u64, 1, 0xffff_fffd] {
            for len in [
                0, 1, 63, 64, 65, 192, 193, 511, 512, 513, 704, 705, 1000, 1537, 4096,
            ] {
                let mut a: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let mut b = a.clone();
                xor_keystream(&s, counter, &mut a);
                xor_keystream_scalar(&s, counter, &mut b);
                assert!(a == b, "counter {counter} len {len}");
            }
        }
    }

    #[test]
    fn block_is_the_keystream() {
        let s = state(&[9u8; 32], &[3u8; 8]);
        let mut z = [0u8; 128];
        xor_keystream_scalar(&s, 5, &mut z);
        assert_eq!(z[..64], block(&s, 5));
        assert_eq!(z[64..], block(&s, 6));
    }

    #[test]
    fn out_of_place_matches_in_place() {
        let s = state(&[4u8; 32], &[8u8; 8]);
        for len in [0, 5, 192, 193, 512, 700, 1025, 5000] {
            let src: Vec<u8> = (0..len).map(|i| (i * 3) as u8).collect();
            let mut dst = vec![0u8; len];
            // SAFETY: `dst` is writable for `len` bytes, a buffer of its own.
            unsafe { xor_keystream_to(&s, 3, &src, dst.as_mut_ptr()) };
            let mut inplace = src.clone();
            xor_keystream(&s, 3, &mut inplace);
            assert!(dst == inplace, "len {len}");
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod avx2_tests {
    use super::*;

    /// The AVX2 build, also where [`simd`] picks AVX-512.
    #[test]
    fn avx2_matches_scalar() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let s = state(&[0x5au8; 32], b"nonce 8b");
        for counter in [0u64, 0xffff_fffa] {
            for len in [512, 1000, 4096] {
                let mut a = vec![0u8; len];
                let mut b = a.clone();
                let p = a.as_mut_ptr();
                // SAFETY: the CPU has AVX2, checked above; in place over `a`.
                unsafe {
                    crate::zmtp::secretbox::salsa_simd::avx2::xor_keystream(&s, counter, p, p, len)
                };
                xor_keystream_scalar(&s, counter, &mut b);
                assert!(a == b, "counter {counter} len {len}");
            }
        }
    }
}

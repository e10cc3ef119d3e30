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
    #[cfg(target_arch = "x86_64")]
    if data.len() > SCALAR_TAIL {
        if let Some(simd) = simd() {
            use super::salsa_simd::BATCH;
            // A tail of up to three blocks is cheaper one block at a time than as a batch.
            let mut wide = data.len() / BATCH * BATCH;
            if data.len() - wide > SCALAR_TAIL {
                wide = data.len();
            }
            let (head, tail) = data.split_at_mut(wide);
            simd(state, counter, head);
            xor_keystream_scalar(state, counter.wrapping_add((wide / 64) as u64), tail);
            return;
        }
    }
    xor_keystream_scalar(state, counter, data);
}

/// A keystream function of [`super::salsa_simd`].
#[cfg(target_arch = "x86_64")]
type SimdKeystream = fn(&[u32; 16], u64, &mut [u8]);

/// The widest keystream code this CPU runs (and this compiler builds), if any.
#[cfg(target_arch = "x86_64")]
fn simd() -> Option<SimdKeystream> {
    if let Some(f) = avx512() {
        return Some(f);
    }
    if std::is_x86_feature_detected!("avx2") {
        return Some(|state, counter, data| {
            // SAFETY: the CPU has AVX2, checked above.
            unsafe { super::salsa_simd::avx2::xor_keystream(state, counter, data) }
        });
    }
    None
}

#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
fn avx512() -> Option<SimdKeystream> {
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
        return Some(|state, counter, data| {
            // SAFETY: the CPU has AVX-512F and VL, checked above (and so AVX2).
            unsafe { super::salsa_simd::avx512::xor_keystream(state, counter, data) }
        });
    }
    None
}

/// AVX-512 intrinsics need Rust 1.89.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
fn avx512() -> Option<SimdKeystream> {
    None
}

/// Longest tail left to the scalar core (measured: a scalar block costs about a quarter of an
/// AVX2 batch of eight).
const SCALAR_TAIL: usize = 192;

/// [`xor_keystream`] one block at a time (CPUs without AVX2, short tails; tests compare the two).
pub(super) fn xor_keystream_scalar(state: &[u32; 16], counter: u64, data: &mut [u8]) {
    let mut core = with_counter(state, counter);
    let mut ks = [0u8; 64];
    for chunk in data.chunks_mut(64) {
        core.write_keystream_block((&mut ks).into());
        for (d, k) in chunk.iter_mut().zip(&ks) {
            *d ^= k;
        }
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
                // SAFETY: the CPU has AVX2, checked above.
                unsafe {
                    crate::zmtp::secretbox::salsa_simd::avx2::xor_keystream(&s, counter, &mut a)
                };
                xor_keystream_scalar(&s, counter, &mut b);
                assert!(a == b, "counter {counter} len {len}");
            }
        }
    }
}

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

use super::poly_scalar::Scalar;

/// From this input length on the `poly1305` crate is faster than [`Scalar`] (measured, see
/// docs/BENCHMARKS.md).
const LONG: usize = 4096;

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

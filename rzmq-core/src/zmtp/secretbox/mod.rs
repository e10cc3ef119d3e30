//! NaCl's `crypto_secretbox` (XSalsa20-Poly1305) with detached tags, in place: the box of every
//! CURVE command and message, byte-compatible with libsodium's `crypto_secretbox_detached` and
//! `crypto_box_detached_afternm`.
//!
//! Ours rather than `crypto_secretbox`'s because CURVE throughput is this cipher's throughput: the
//! `salsa20` crate computes one 64-byte block at a time in scalar code (about 0.6 GB/s here,
//! libsodium 1.0.18 about 1.4 GB/s for the whole box), and `poly1305`'s AVX2 backend costs about a
//! microsecond of setup per box, more than the rest of a 1 KiB box. So the keystream runs eight
//! blocks at once in AVX2 or AVX-512VL registers when the CPU has them ([`salsa`]), long boxes are
//! authenticated by the `poly1305` crate (AVX2) and short ones by a 64-bit scalar Poly1305
//! ([`poly`]). HSalsa20 (the nonce's key derivation) and the CPUs without AVX2 keep the `salsa20`
//! crate. docs/BENCHMARKS.md ("CURVE") has the measurements.
//!
//! The module owns no key material beyond a box's key, and wipes the per-box subkey and
//! keystream blocks it derives.

mod poly;
#[cfg(target_arch = "x86_64")]
mod poly_ifma;
mod poly_scalar;
mod salsa;
#[cfg(target_arch = "x86_64")]
mod salsa_simd;

use salsa20::cipher::consts::U10;
use zeroize::Zeroize;

/// Key length (`crypto_secretbox_KEYBYTES`).
pub(crate) const KEY_LEN: usize = 32;
/// Nonce length (`crypto_secretbox_NONCEBYTES`).
pub(crate) const NONCE_LEN: usize = 24;
/// Tag length (`crypto_secretbox_MACBYTES`).
pub(crate) const TAG_LEN: usize = 16;

/// A box's tag did not verify (wrong key or nonce, or the bytes were changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unauthentic;

/// An XSalsa20-Poly1305 key; wiped on drop.
#[derive(Clone)]
pub(crate) struct SecretBox {
    key: [u8; KEY_LEN],
}

impl Drop for SecretBox {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl SecretBox {
    /// A box for `key` (a `crypto_box_beforenm` result or a `crypto_secretbox` key).
    pub(crate) fn new(key: &[u8; KEY_LEN]) -> SecretBox {
        SecretBox { key: *key }
    }

    /// Encrypts `buf` in place and returns its tag (`crypto_secretbox_detached`).
    pub(crate) fn seal(&self, nonce: &[u8; NONCE_LEN], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let ks = Keystream::new(&self.key, nonce);
        ks.xor(buf);
        poly::tag(ks.mac_key(), buf)
    }

    /// Appends the box of `first` followed by `body` to `out` and returns its tag: the
    /// plaintext is read once, from where it lies, instead of being copied into `out` and then
    /// encrypted there.
    pub(crate) fn seal_append(
        &self,
        nonce: &[u8; NONCE_LEN],
        first: u8,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> [u8; TAG_LEN] {
        let ks = Keystream::new(&self.key, nonce);
        let start = out.len();
        let len = 1 + body.len();
        out.reserve(len);
        // Box bytes 0-31 meet the second half of block 0, the rest the stream from block 1.
        let head = body.len().min(31);
        out.push(first ^ ks.block0[32]);
        out.extend(
            body[..head]
                .iter()
                .zip(&ks.block0[33..])
                .map(|(b, k)| b ^ k),
        );
        let rest = &body[head..];
        let dst = out.spare_capacity_mut()[..rest.len()]
            .as_mut_ptr()
            .cast::<u8>();
        // SAFETY: `dst` is the reserved capacity after `out`'s bytes, writable for `rest.len()`
        // bytes and no part of `body`, which `out` cannot borrow.
        unsafe { salsa::xor_keystream_to(&ks.state, 1, rest, dst) };
        // SAFETY: the `rest.len()` bytes after the old length were written just above.
        unsafe { out.set_len(start + len) };
        poly::tag(ks.mac_key(), &out[start..])
    }

    /// Checks `tag` against `buf` and, if it verifies, decrypts `buf` in place
    /// (`crypto_secretbox_open_detached`); on failure `buf` is left as it was.
    ///
    /// Two whole passes (authenticate, then decrypt) measured faster than one pass over pieces
    /// of 16-256 KiB, even on cold 1 MiB buffers.
    pub(crate) fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), Unauthentic> {
        let ks = Keystream::new(&self.key, nonce);
        let expected = poly::tag(ks.mac_key(), buf);
        // No early exit: the comparison does not leak where the tags differ.
        if expected
            .iter()
            .zip(tag)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            != 0
        {
            return Err(Unauthentic);
        }
        ks.xor(buf);
        Ok(())
    }
}

/// The XSalsa20 keystream of one box: block 0's first half is the Poly1305 key, the message is
/// XORed with the rest of the stream from byte 32 on.
struct Keystream {
    state: [u32; 16],
    block0: [u8; 64],
}

impl Keystream {
    fn new(key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN]) -> Keystream {
        let mut subkey = salsa20::hsalsa::<U10>(key.into(), nonce[..16].into());
        let state = salsa::state(subkey.as_ref(), &nonce[16..]);
        subkey.as_mut_slice().zeroize();
        let block0 = salsa::block(&state, 0);
        Keystream { state, block0 }
    }

    fn mac_key(&self) -> &[u8; 32] {
        self.block0[..32].try_into().expect("32 of 64 bytes")
    }

    /// XORs `buf` with the keystream from byte 32 on.
    fn xor(&self, buf: &mut [u8]) {
        let head = buf.len().min(32);
        let (head, rest) = buf.split_at_mut(head);
        for (b, k) in head.iter_mut().zip(&self.block0[32..]) {
            *b ^= k;
        }
        salsa::xor_keystream(&self.state, 1, rest);
    }
}

impl Drop for Keystream {
    fn drop(&mut self) {
        self.state.zeroize();
        self.block0.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto_secretbox::aead::{AeadInPlace, KeyInit};
    use proptest::prelude::*;

    fn reference(key: &[u8; 32], nonce: &[u8; 24], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
        let mut ct = pt.to_vec();
        let tag = crypto_secretbox::XSalsa20Poly1305::new(key.into())
            .encrypt_in_place_detached(nonce.into(), b"", &mut ct)
            .unwrap();
        (ct, tag.into())
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Every length around the block, batch and Poly1305 boundaries, on whichever keystream
    /// and Poly1305 paths this CPU takes.
    #[test]
    fn matches_crypto_secretbox_at_every_short_length() {
        let key = [0x42u8; 32];
        let nonce: [u8; 24] = std::array::from_fn(|i| i as u8);
        for len in 0..2200 {
            let pt = pattern(len, len as u8);
            let (ct, tag) = reference(&key, &nonce, &pt);
            let b = SecretBox::new(&key);
            let mut buf = pt.clone();
            assert_eq!(b.seal(&nonce, &mut buf), tag, "tag at {len}");
            assert_eq!(buf, ct, "ciphertext at {len}");
            b.open(&nonce, &mut buf, &tag).unwrap();
            assert_eq!(buf, pt, "plaintext at {len}");
        }
    }

    #[test]
    fn seal_append_matches_seal() {
        let key = [9u8; 32];
        let nonce = [3u8; 24];
        let b = SecretBox::new(&key);
        for len in [0, 1, 30, 31, 32, 33, 200, 543, 544, 545, 1024, 70_000] {
            let body = pattern(len, 5);
            let mut whole = vec![0x02];
            whole.extend_from_slice(&body);
            let tag = b.seal(&nonce, &mut whole);
            let mut out = b"prefix".to_vec();
            assert_eq!(
                b.seal_append(&nonce, 0x02, &body, &mut out),
                tag,
                "tag at {len}"
            );
            assert_eq!(&out[..6], b"prefix");
            assert!(out[6..] == whole[..], "box at {len}");
        }
    }

    #[test]
    fn matches_crypto_secretbox_long() {
        let key: [u8; 32] = std::array::from_fn(|i| 200 - i as u8);
        let nonce = [7u8; 24];
        for len in [
            4095,
            4096,
            4097,
            16415,
            16416,
            16417,
            65536 + 13,
            (1 << 20) + 1,
        ] {
            let pt = pattern(len, 3);
            let (ct, tag) = reference(&key, &nonce, &pt);
            let mut buf = pt.clone();
            let b = SecretBox::new(&key);
            assert_eq!(b.seal(&nonce, &mut buf), tag);
            assert!(buf == ct, "ciphertext at {len}");
            b.open(&nonce, &mut buf, &tag).unwrap();
            assert!(buf == pt, "plaintext at {len}");
        }
    }

    #[test]
    fn open_rejects_any_changed_byte_and_leaves_the_buffer() {
        let key = [1u8; 32];
        let nonce = [2u8; 24];
        let b = SecretBox::new(&key);
        let mut ct = pattern(100, 9);
        let tag = b.seal(&nonce, &mut ct);
        // A long box (the other Poly1305) too.
        let mut long = pattern(3 * 16384 + 5, 1);
        let long_tag = b.seal(&nonce, &mut long);
        let last = long.len() - 1;
        for i in [0, 40, 16384 + 32, last] {
            let mut bad = long.clone();
            bad[i] ^= 1;
            let before = bad.clone();
            assert_eq!(b.open(&nonce, &mut bad, &long_tag), Err(Unauthentic));
            assert!(bad == before, "changed after a failure at {i}");
        }
        for i in 0..ct.len() {
            let mut bad = ct.clone();
            bad[i] ^= 0x80;
            let before = bad.clone();
            assert_eq!(b.open(&nonce, &mut bad, &tag), Err(Unauthentic));
            assert_eq!(bad, before);
        }
        for i in 0..TAG_LEN {
            let mut t = tag;
            t[i] ^= 1;
            assert_eq!(b.open(&nonce, &mut ct.clone(), &t), Err(Unauthentic));
        }
        let mut other = nonce;
        other[23] ^= 1;
        assert_eq!(b.open(&other, &mut ct.clone(), &tag), Err(Unauthentic));
    }

    proptest! {
        #[test]
        fn matches_crypto_secretbox(
            key in any::<[u8; 32]>(),
            nonce in any::<[u8; 24]>(),
            pt in proptest::collection::vec(any::<u8>(), 0..40_000),
        ) {
            let (ct, tag) = reference(&key, &nonce, &pt);
            let b = SecretBox::new(&key);
            let mut buf = pt.clone();
            prop_assert_eq!(b.seal(&nonce, &mut buf), tag);
            prop_assert_eq!(&buf, &ct);
            prop_assert!(b.open(&nonce, &mut buf, &tag).is_ok());
            prop_assert_eq!(buf, pt);
        }
    }
}

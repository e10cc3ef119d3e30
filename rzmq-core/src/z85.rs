//! CURVE keys and their text form: Z85 (ZeroMQ RFC 32, what `zmq_z85_encode`/`zmq_z85_decode`
//! and the key options use), random bytes from the OS, key pairs and public keys, as libsodium's
//! `randombytes_buf`, `crypto_box_keypair` and `crypto_scalarmult_base` (what libzmq's
//! `zmq_curve_keypair` and `zmq_curve_public` use).
//!
//! Keys are raw 32-byte Curve25519 values; the C API encodes them as Z85. A leaf: imports
//! nothing of the crate.

use curve25519_dalek::montgomery::MontgomeryPoint;
use zeroize::Zeroizing;

/// Length of a CURVE public or secret key in bytes.
pub const KEY_LEN: usize = 32;
/// Length of a CURVE key in Z85 characters.
pub const KEY_TEXT_LEN: usize = KEY_LEN / 4 * 5;

/// The Z85 alphabet.
const ENCODER: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Character (minus 32) to value; 0xFF for characters outside the alphabet.
const DECODER: [u8; 96] = {
    let mut t = [0xFFu8; 96];
    let mut i = 0;
    while i < 85 {
        t[(ENCODER[i] - 32) as usize] = i as u8;
        i += 1;
    }
    t
};

/// Writes the five Z85 characters of one 4-byte group.
fn encode_group(chunk: &[u8], out: &mut [u8]) {
    let mut value = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    for d in out.iter_mut().rev() {
        *d = ENCODER[(value % 85) as usize];
        value /= 85;
    }
}

/// Encodes `data` (a multiple of 4 bytes) as Z85 text, or `None`.
pub fn encode(data: &[u8]) -> Option<Vec<u8>> {
    let chunks = data.chunks_exact(4);
    if !chunks.remainder().is_empty() {
        return None;
    }
    let mut out = vec![0u8; data.len() / 4 * 5];
    for (chunk, text) in chunks.zip(out.chunks_exact_mut(5)) {
        encode_group(chunk, text);
    }
    Some(out)
}

/// Encodes a CURVE key as its 40 Z85 characters.
pub fn encode_key(key: &[u8; KEY_LEN]) -> [u8; KEY_TEXT_LEN] {
    let mut out = [0u8; KEY_TEXT_LEN];
    for (chunk, text) in key.chunks_exact(4).zip(out.chunks_exact_mut(5)) {
        encode_group(chunk, text);
    }
    out
}

/// Decodes Z85 text (a non-zero multiple of 5 characters), or `None` when it is malformed
/// (another length, a character outside the alphabet, a group above `u32::MAX`).
pub fn decode(text: &[u8]) -> Option<Vec<u8>> {
    let chunks = text.chunks_exact(5);
    if text.is_empty() || !chunks.remainder().is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 5 * 4);
    for chunk in chunks {
        let mut value: u32 = 0;
        for &c in chunk {
            let idx = c.checked_sub(32)? as usize;
            let digit = *DECODER.get(idx)?;
            if digit == 0xFF {
                return None;
            }
            value = value.checked_mul(85)?.checked_add(u32::from(digit))?;
        }
        out.extend_from_slice(&value.to_be_bytes());
    }
    Some(out)
}

/// Fills `buf` with random bytes from the operating system (`getrandom(2)`).
pub fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    getrandom::getrandom(buf)
        .map_err(|e| std::io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// The public key of `secret` (X25519 base-point multiplication of the clamped secret).
pub fn public_key(secret: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    MontgomeryPoint::mul_base_clamped(*secret).to_bytes()
}

/// A new random key pair, `(public, secret)`; fails only when the OS has no randomness.
pub fn generate_keypair() -> std::io::Result<([u8; KEY_LEN], Zeroizing<[u8; KEY_LEN]>)> {
    let mut secret = Zeroizing::new([0u8; KEY_LEN]);
    random_bytes(&mut secret[..])?;
    Ok((public_key(&secret), secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z85_rfc32_example() {
        let data = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
        assert_eq!(encode(&data).unwrap(), b"HelloWorld");
        assert_eq!(decode(b"HelloWorld").unwrap(), data);
        assert!(decode(b"Hello").is_some());
        assert!(decode(b"Hell").is_none());
        assert!(decode(b"").is_none());
        assert!(decode(b"Hell\"").is_none());
        // "%%%%%" is 84 * (85^4 + ... + 1) = 85^5 - 1 > u32::MAX.
        assert!(decode(b"%%%%%").is_none());
        assert!(encode(&[1, 2, 3]).is_none());
        let key: [u8; KEY_LEN] = std::array::from_fn(|i| (i * 37) as u8);
        let text = encode_key(&key);
        assert_eq!(text.to_vec(), encode(&key).unwrap());
        assert_eq!(decode(&text).unwrap(), key);
    }

    #[test]
    fn rfc7748_public_keys() {
        // RFC 7748 section 6.1 (Alice's and Bob's X25519 key pairs).
        let hex = |s: &str| -> [u8; 32] {
            let mut k = [0u8; 32];
            for (i, b) in k.iter_mut().enumerate() {
                *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
            }
            k
        };
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let alice_pub = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        let bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
        let bob_pub = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
        assert_eq!(public_key(&alice), alice_pub);
        assert_eq!(public_key(&bob), bob_pub);
    }

    #[test]
    fn keypairs_are_fresh_and_consistent() {
        let (p1, s1) = generate_keypair().unwrap();
        let (p2, s2) = generate_keypair().unwrap();
        assert_ne!(*s1, *s2);
        assert_ne!(p1, p2);
        assert_eq!(public_key(&s1), p1);
    }
}

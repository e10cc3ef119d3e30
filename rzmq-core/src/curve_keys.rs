//! CURVE key helpers: random bytes from the OS, key pairs and public keys, as libsodium's
//! `randombytes_buf`, `crypto_box_keypair` and `crypto_scalarmult_base` (what libzmq's
//! `zmq_curve_keypair` and `zmq_curve_public` use).
//!
//! Keys are raw 32-byte Curve25519 values; the C API encodes them as Z85.

use curve25519_dalek::montgomery::MontgomeryPoint;
use zeroize::Zeroizing;

/// Length of a CURVE public or secret key in bytes.
pub const KEY_LEN: usize = 32;

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

//! CURVE's keys: a socket's long-term keys ([`CurveKeys`]), transient key pairs, and the
//! `crypto_box` precomputation (X25519 then HSalsa20) into a [`Cipher`], NaCl's box as libzmq
//! lays it on the wire (tag, then ciphertext); the server's cookie key is one too.

use std::fmt;

use curve25519_dalek::montgomery::MontgomeryPoint;
use salsa20::cipher::consts::U10;
use zeroize::{Zeroize, Zeroizing};

use super::wire::TAG_LEN;
use crate::z85::{self, KEY_LEN};
use crate::zmtp::error::CurveError;
use crate::zmtp::secretbox::{SecretBox, NONCE_LEN};

/// A socket's CURVE keys (`ZMQ_CURVE_PUBLICKEY`, `ZMQ_CURVE_SECRETKEY`, `ZMQ_CURVE_SERVERKEY`);
/// a server uses only its secret key. The secret is wiped on drop and not shown by `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CurveKeys {
    /// Our long-term public key (C for a client).
    pub public_key: [u8; KEY_LEN],
    /// Our long-term secret key (c or s).
    pub secret_key: [u8; KEY_LEN],
    /// The server's long-term public key (S), for a client.
    pub server_key: [u8; KEY_LEN],
}

impl fmt::Debug for CurveKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurveKeys")
            .field("public_key", &self.public_key)
            .field("secret_key", &"<secret>")
            .field("server_key", &self.server_key)
            .finish()
    }
}

impl Drop for CurveKeys {
    fn drop(&mut self) {
        self.secret_key.zeroize();
    }
}

/// `crypto_box_beforenm`: X25519(secret, public) through HSalsa20, as a secretbox cipher. An
/// all-zero shared point (zero or low-order public key) fails, as in libsodium.
pub(super) fn precompute(
    public: &[u8; KEY_LEN],
    secret: &[u8; KEY_LEN],
) -> Result<Cipher, CurveError> {
    let shared = Zeroizing::new(MontgomeryPoint(*public).mul_clamped(*secret).to_bytes());
    // No early exit: the check does not leak which byte is non-zero.
    if shared.iter().fold(0u8, |acc, &b| acc | b) == 0 {
        return Err(CurveError::Cryptographic);
    }
    let mut key = salsa20::hsalsa::<U10>((&*shared).into(), &Default::default());
    let cipher = Cipher(SecretBox::new(&key.into()));
    key.as_mut_slice().zeroize();
    Ok(cipher)
}

/// A precomputed `crypto_box` key (or a `crypto_secretbox` key): XSalsa20-Poly1305.
#[derive(Clone)]
pub(super) struct Cipher(pub(super) SecretBox);

impl Cipher {
    /// A cipher for a random key (the server's cookie key).
    pub(super) fn random() -> Result<Cipher, CurveError> {
        let mut k = Zeroizing::new([0u8; KEY_LEN]);
        random(&mut k[..])?;
        Ok(Cipher(SecretBox::new(&k)))
    }

    /// Boxes `plaintext` into `out` as tag then ciphertext (libzmq's wire form of a box).
    pub(super) fn seal_into(&self, nonce: &Nonce, plaintext: &[u8], out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0u8; TAG_LEN]);
        out.extend_from_slice(plaintext);
        self.seal_in_place(nonce, out, at);
    }

    /// Encrypts `buf[at + TAG_LEN..]` in place and writes its tag at `buf[at..at + TAG_LEN]`.
    pub(super) fn seal_in_place(&self, nonce: &Nonce, buf: &mut [u8], at: usize) {
        let (head, body) = buf.split_at_mut(at + TAG_LEN);
        head[at..].copy_from_slice(&self.0.seal(nonce, body));
    }

    /// Opens a box (tag then ciphertext); the plaintext is wiped on drop.
    pub(super) fn open(
        &self,
        nonce: &Nonce,
        boxed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, CurveError> {
        if boxed.len() < TAG_LEN {
            return Err(CurveError::Cryptographic);
        }
        let (tag, ct) = boxed.split_at(TAG_LEN);
        let mut pt = Zeroizing::new(ct.to_vec());
        self.0
            .open(nonce, &mut pt, tag.try_into().expect("TAG_LEN bytes"))
            .map_err(|_| CurveError::Cryptographic)?;
        Ok(pt)
    }
}

/// A box's 24-byte nonce.
pub(super) type Nonce = [u8; NONCE_LEN];

/// A 24-byte nonce: `prefix` then `tail`.
pub(super) fn nonce(prefix: &[u8], tail: &[u8]) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[..prefix.len()].copy_from_slice(prefix);
    n[prefix.len()..].copy_from_slice(tail);
    n
}

/// Fills `buf` with random bytes from the operating system.
pub(super) fn random(buf: &mut [u8]) -> Result<(), CurveError> {
    z85::random_bytes(buf).map_err(|_| CurveError::Random)
}

/// A fresh transient key pair `(public, secret)`.
pub(super) fn transient_keypair() -> Result<([u8; KEY_LEN], Zeroizing<[u8; KEY_LEN]>), CurveError> {
    z85::generate_keypair().map_err(|_| CurveError::Random)
}

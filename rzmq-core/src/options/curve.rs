//! CURVE keys as options take them: whether CURVE is built, and the key forms `setsockopt`
//! accepts (32 raw bytes, or Z85 text through [`crate::z85`], the one Z85 implementation).

use crate::z85;

/// Whether the CURVE mechanism is built (it is: pure-Rust crypto, see `zmtp/curve.rs`); were it
/// false, CURVE options would fail with `EINVAL` as in a libzmq 4.3.5 built without libsodium.
pub const HAVE_CURVE: bool = true;

/// `options_t::set_curve_key`: 32 raw bytes, 40 Z85 characters, or 41 (Z85 and a terminator).
pub(super) fn parse_curve_key(v: &[u8]) -> Option<[u8; 32]> {
    match v.len() {
        z85::KEY_LEN => v.try_into().ok(),
        n if n == z85::KEY_TEXT_LEN || n == z85::KEY_TEXT_LEN + 1 => {
            // libzmq decodes the C string, which must be exactly 40 characters long.
            let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
            if text.len() != z85::KEY_TEXT_LEN {
                return None;
            }
            z85::decode(text)?.try_into().ok()
        }
        _ => None,
    }
}

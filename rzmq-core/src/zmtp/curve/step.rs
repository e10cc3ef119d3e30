//! What one handshake command of the peer asks of the caller ([`Step`]), shared by the client
//! and server sides.

use std::fmt;

use zeroize::Zeroizing;

use super::record::Codec;
use crate::z85::KEY_LEN;

/// What the peer's handshake command asks of the caller.
pub(crate) enum Step {
    /// Send this command body (WELCOME, INITIATE); the handshake goes on.
    Send(Vec<u8>),
    /// Server: the client proved its key. Authenticate it (ZAP: mechanism `"CURVE"`, the key as
    /// the one credential), validate `properties`, then [`super::Handshake::accept`] or
    /// [`super::Handshake::reject`].
    Initiated {
        /// The client's long-term public key (C).
        client_key: [u8; KEY_LEN],
        /// The client's metadata (ZMTP properties).
        properties: Zeroizing<Vec<u8>>,
    },
    /// Client: the server's `READY` arrived; validate `properties`, then exchange messages
    /// through `codec`.
    Ready {
        /// The server's metadata (ZMTP properties).
        properties: Zeroizing<Vec<u8>>,
        /// The message codec.
        codec: Codec,
    },
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Send(b) => write!(f, "Send({} bytes)", b.len()),
            Step::Initiated { client_key, .. } => write!(f, "Initiated({client_key:?})"),
            Step::Ready { .. } => f.write_str("Ready"),
        }
    }
}

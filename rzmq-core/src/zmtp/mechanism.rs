//! ZMTP security mechanisms as the greeting names them (RFC 23/37): the vocabulary that the
//! greeting, the errors and the configuration share. Imports nothing.

/// Length of the greeting's mechanism field.
pub(crate) const MECHANISM_LEN: usize = 20;

/// A ZMTP security mechanism.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// NULL: no security.
    Null,
    /// PLAIN: user name and password (RFC 24).
    Plain,
    /// CURVE: CurveZMQ (RFC 26).
    Curve,
}

impl Mechanism {
    /// The mechanism's name as it appears in the greeting.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Null => "NULL",
            Mechanism::Plain => "PLAIN",
            Mechanism::Curve => "CURVE",
        }
    }

    /// True when rzmq implements this mechanism.
    pub fn is_supported(self) -> bool {
        matches!(self, Mechanism::Null | Mechanism::Plain | Mechanism::Curve)
    }

    /// The 20-byte NUL-padded greeting field.
    pub fn wire_name(self) -> [u8; MECHANISM_LEN] {
        let mut f = [0u8; MECHANISM_LEN];
        let n = self.name().as_bytes();
        f[..n.len()].copy_from_slice(n);
        f
    }
}

//! Why a data path failed ([`DataPathError`]).

use std::fmt;

use crate::provider::{self, PostError, WcOpcode, WcStatus};
use crate::ring::RingError;
use crate::rndv::RndvError;
use crate::wire::WireError;

/// Why a data path failed.
#[derive(Debug)]
pub enum DataPathError {
    /// A verbs call failed.
    Verbs(provider::Error),
    /// A post failed.
    Post(PostError),
    /// A work request completed with an error (the QP is in ERR: wire cut, peer gone, ...).
    Completion {
        /// The status.
        status: WcStatus,
        /// The completion's opcode.
        opcode: WcOpcode,
    },
    /// The peer broke the ring protocol.
    Ring(RingError),
    /// The peer broke the rendezvous protocol.
    Rndv(RndvError),
    /// Setup could not proceed (unsuitable device, calls out of order).
    Setup(&'static str),
    /// The peer's connect information does not decode, or is of another wire version.
    Wire(WireError),
    /// The data path failed earlier; it is unusable.
    Failed,
}

impl fmt::Display for DataPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataPathError::Verbs(e) => write!(f, "verbs: {e}"),
            DataPathError::Post(e) => write!(f, "{e}"),
            DataPathError::Completion { status, opcode } => {
                write!(f, "work request failed: {status:?} ({opcode:?})")
            }
            DataPathError::Ring(e) => write!(f, "{e}"),
            DataPathError::Rndv(e) => write!(f, "{e}"),
            DataPathError::Setup(w) => write!(f, "RDMA setup: {w}"),
            DataPathError::Wire(e) => write!(f, "RDMA setup: {e}"),
            DataPathError::Failed => f.write_str("RDMA data path failed earlier"),
        }
    }
}

impl std::error::Error for DataPathError {}

impl From<provider::Error> for DataPathError {
    fn from(e: provider::Error) -> Self {
        DataPathError::Verbs(e)
    }
}

impl From<PostError> for DataPathError {
    fn from(e: PostError) -> Self {
        DataPathError::Post(e)
    }
}

impl From<RingError> for DataPathError {
    fn from(e: RingError) -> Self {
        DataPathError::Ring(e)
    }
}

impl From<RndvError> for DataPathError {
    fn from(e: RndvError) -> Self {
        DataPathError::Rndv(e)
    }
}

impl From<WireError> for DataPathError {
    fn from(e: WireError) -> Self {
        DataPathError::Wire(e)
    }
}

//! Errors of the verbs surface, each with the errno libibverbs would report, and posts that
//! failed part-way.

use std::fmt;
use std::io;

use super::state::QpState;
use crate::wire::WireError;

/// A provider-level result.
pub type Result<T> = std::result::Result<T, Error>;

/// Errors of the verbs surface. Each maps to the errno libibverbs would report ([`Error::errno`]).
#[derive(Debug)]
pub enum Error {
    /// No usable RDMA device (libibverbs missing, no device, or none matching the selection).
    NoDevice(String),
    /// A named device, port or GID index does not exist (ENODEV / EINVAL).
    NotFound(String),
    /// The provider does not support the operation (EOPNOTSUPP).
    Unsupported(&'static str),
    /// An argument was out of range or inconsistent (EINVAL).
    InvalidArgument(&'static str),
    /// A work queue is full: posting beyond `max_send_wr`/`max_recv_wr` (ENOMEM, as ibverbs).
    QueueFull {
        /// The queue that is full.
        queue: WorkQueue,
        /// Its depth.
        depth: u32,
    },
    /// Inline data larger than the QP's `max_inline_data` (EINVAL).
    InlineTooLarge {
        /// The WR's total length.
        len: usize,
        /// The QP's inline limit.
        max: u32,
    },
    /// More scatter/gather entries than the QP was created for (EINVAL).
    TooManySge {
        /// The WR's entry count.
        n: usize,
        /// The QP's limit.
        max: u32,
    },
    /// The QP's state does not allow the operation (EINVAL), e.g. post_send before RTS.
    InvalidState {
        /// What was attempted.
        op: &'static str,
        /// The QP's state.
        state: QpState,
    },
    /// A QP state transition the verbs state machine does not allow (EINVAL).
    InvalidTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// The CQ overflowed; completions were lost (ibverbs reports IBV_EVENT_CQ_ERR).
    CqOverrun,
    /// A serialised endpoint descriptor was malformed or from another provider.
    Descriptor(&'static str),
    /// Connect information from a peer that does not decode ([`crate::wire`]).
    Wire(WireError),
    /// A verbs call failed with an errno.
    Verbs {
        /// The libibverbs function.
        call: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// An operating-system error (sockets, eventfd, threads).
    Io(io::Error),
}

/// Which work queue of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkQueue {
    /// The send queue.
    Send,
    /// The receive queue.
    Recv,
}

impl Error {
    /// The errno libibverbs reports for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NoDevice(_) => libc::ENODEV,
            Error::NotFound(_) => libc::ENODEV,
            Error::Unsupported(_) => libc::EOPNOTSUPP,
            Error::InvalidArgument(_)
            | Error::InlineTooLarge { .. }
            | Error::TooManySge { .. }
            | Error::InvalidState { .. }
            | Error::InvalidTransition { .. }
            | Error::Descriptor(_)
            | Error::Wire(_) => libc::EINVAL,
            Error::QueueFull { .. } => libc::ENOMEM,
            Error::CqOverrun => libc::EOVERFLOW,
            Error::Verbs { errno, .. } => *errno,
            Error::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDevice(why) => write!(f, "no RDMA device: {why}"),
            Error::NotFound(what) => write!(f, "not found: {what}"),
            Error::Unsupported(what) => write!(f, "not supported: {what}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::QueueFull { queue, depth } => {
                write!(f, "{queue:?} queue full (depth {depth})")
            }
            Error::InlineTooLarge { len, max } => {
                write!(
                    f,
                    "inline data of {len} bytes exceeds max_inline_data {max}"
                )
            }
            Error::TooManySge { n, max } => write!(f, "{n} SGEs exceed max_sge {max}"),
            Error::InvalidState { op, state } => {
                write!(f, "{op} not allowed in QP state {state:?}")
            }
            Error::InvalidTransition { from, to } => {
                write!(f, "QP transition {from:?} -> {to:?} not allowed")
            }
            Error::CqOverrun => f.write_str("completion queue overrun"),
            Error::Descriptor(why) => write!(f, "bad endpoint descriptor: {why}"),
            Error::Wire(e) => write!(f, "bad endpoint descriptor: {e}"),
            Error::Verbs { call, errno } => {
                write!(f, "{call} failed: {}", io::Error::from_raw_os_error(*errno))
            }
            Error::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Error {
        Error::Wire(e)
    }
}

/// A post that failed part-way: WRs before `index` were posted, the rest were not (ibverbs'
/// `bad_wr`).
#[derive(Debug)]
pub struct PostError {
    /// Index of the first WR not posted.
    pub index: usize,
    /// Why.
    pub error: Error,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "post failed at WR {}: {}", self.index, self.error)
    }
}

impl std::error::Error for PostError {}

#[cfg(test)]
mod tests {
    use super::super::endpoint::Mtu;
    use super::super::wr::{WcOpcode, WcStatus};
    use super::*;

    #[test]
    fn errnos_match_ibverbs() {
        let full = Error::QueueFull {
            queue: WorkQueue::Send,
            depth: 4,
        };
        assert_eq!(full.errno(), libc::ENOMEM);
        assert_eq!(
            Error::InlineTooLarge { len: 1, max: 0 }.errno(),
            libc::EINVAL
        );
        assert_eq!(WcStatus::from_raw(10), WcStatus::RemAccessErr);
        assert_eq!(WcStatus::from_raw(13), WcStatus::RnrRetryExcErr);
        assert_eq!(WcStatus::WrFlushErr as u32, 5);
        assert_eq!(WcOpcode::from_raw(129), Some(WcOpcode::RecvRdmaWithImm));
        assert_eq!(Mtu::M1024.bytes(), 1024);
    }
}

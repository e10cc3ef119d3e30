//! Typed errors with libzmq's errno values.
//!
//! Every fallible call in rzmq returns [`Error`]; [`Error::errno`] gives the value libzmq would put in
//! `errno`, so the C ABI maps errors one to one.

use std::fmt;

/// Base of the errno values that libzmq defines for itself (`ZMQ_HAUSNUMERO`).
pub const HAUSNUMERO: i32 = 156_384_712;
/// libzmq's `EFSM`: the operation is not valid in the socket's current state.
pub const EFSM: i32 = HAUSNUMERO + 51;
/// libzmq's `ENOCOMPATPROTO`: the transport does not suit the socket type.
pub const ENOCOMPATPROTO: i32 = HAUSNUMERO + 52;
/// libzmq's `ETERM`: the context was terminated.
pub const ETERM: i32 = HAUSNUMERO + 53;
/// libzmq's `EMTHREAD`: no I/O thread is available.
pub const EMTHREAD: i32 = HAUSNUMERO + 54;

/// An rzmq error; each variant corresponds to one errno value of libzmq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// EAGAIN: would block (non-blocking call, timeout, or a full/empty queue).
    Again,
    /// EINVAL: an invalid argument.
    Inval,
    /// ENOTSUP: the operation is not supported by this socket type or build.
    NotSup,
    /// EHOSTUNREACH: a ROUTER could not route the message.
    HostUnreach,
    /// ETERM: the context is being terminated.
    Term,
    /// EFSM: the call is not valid in the socket's state (REQ/REP order).
    Fsm,
    /// EMTHREAD: no I/O thread.
    MThread,
    /// ENOTSOCK: not a socket (closed or invalid handle).
    NotSock,
    /// EINTR: interrupted by a signal.
    Intr,
    /// EADDRINUSE: the address is in use.
    AddrInUse,
    /// EADDRNOTAVAIL: the address is not available locally.
    AddrNotAvail,
    /// ECONNREFUSED: inproc connect to an endpoint nobody bound, with no lazy binding.
    ConnRefused,
    /// EPROTONOSUPPORT: unknown transport.
    ProtoNoSupport,
    /// ENOCOMPATPROTO: the transport does not suit this socket type.
    NoCompatProto,
    /// ENODEV: no such network interface.
    NoDev,
    /// ENOENT: the endpoint is not bound or connected.
    NoEnt,
    /// EMSGSIZE: the message is too large.
    MsgSize,
    /// ENOMEM: out of memory.
    NoMem,
    /// EFAULT: an invalid pointer or message.
    Fault,
    /// EMFILE: too many open files or sockets.
    MFile,
    /// ENOBUFS: no buffer space.
    NoBufs,
    /// EHOSTUNREACH-like failures from the OS and every other errno, kept verbatim.
    Os(i32),
}

/// Result alias used throughout rzmq.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The errno value libzmq reports for this error.
    pub fn errno(self) -> i32 {
        match self {
            Error::Again => libc::EAGAIN,
            Error::Inval => libc::EINVAL,
            Error::NotSup => libc::ENOTSUP,
            Error::HostUnreach => libc::EHOSTUNREACH,
            Error::Term => ETERM,
            Error::Fsm => EFSM,
            Error::MThread => EMTHREAD,
            Error::NotSock => libc::ENOTSOCK,
            Error::Intr => libc::EINTR,
            Error::AddrInUse => libc::EADDRINUSE,
            Error::AddrNotAvail => libc::EADDRNOTAVAIL,
            Error::ConnRefused => libc::ECONNREFUSED,
            Error::ProtoNoSupport => libc::EPROTONOSUPPORT,
            Error::NoCompatProto => ENOCOMPATPROTO,
            Error::NoDev => libc::ENODEV,
            Error::NoEnt => libc::ENOENT,
            Error::MsgSize => libc::EMSGSIZE,
            Error::NoMem => libc::ENOMEM,
            Error::Fault => libc::EFAULT,
            Error::MFile => libc::EMFILE,
            Error::NoBufs => libc::ENOBUFS,
            Error::Os(e) => e,
        }
    }

    /// The error for an errno value (the inverse of [`Error::errno`]).
    pub fn from_errno(e: i32) -> Error {
        match e {
            libc::EAGAIN => Error::Again,
            libc::EINVAL => Error::Inval,
            libc::ENOTSUP => Error::NotSup,
            libc::EHOSTUNREACH => Error::HostUnreach,
            ETERM => Error::Term,
            EFSM => Error::Fsm,
            EMTHREAD => Error::MThread,
            libc::ENOTSOCK => Error::NotSock,
            libc::EINTR => Error::Intr,
            libc::EADDRINUSE => Error::AddrInUse,
            libc::EADDRNOTAVAIL => Error::AddrNotAvail,
            libc::ECONNREFUSED => Error::ConnRefused,
            libc::EPROTONOSUPPORT => Error::ProtoNoSupport,
            ENOCOMPATPROTO => Error::NoCompatProto,
            libc::ENODEV => Error::NoDev,
            libc::ENOENT => Error::NoEnt,
            libc::EMSGSIZE => Error::MsgSize,
            libc::ENOMEM => Error::NoMem,
            libc::EFAULT => Error::Fault,
            libc::EMFILE => Error::MFile,
            libc::ENOBUFS => Error::NoBufs,
            other => Error::Os(other),
        }
    }

    /// libzmq's `zmq_strerror` text for this error.
    pub fn message(self) -> String {
        strerror(self.errno())
    }
}

/// The text libzmq's `zmq_strerror` gives for an errno value.
pub fn strerror(errnum: i32) -> String {
    match errnum {
        libc::ENOTSUP => "Not supported".into(),
        libc::EPROTONOSUPPORT => "Protocol not supported".into(),
        libc::ENOBUFS => "No buffer space available".into(),
        libc::ENETDOWN => "Network is down".into(),
        libc::EADDRINUSE => "Address in use".into(),
        libc::EADDRNOTAVAIL => "Address not available".into(),
        libc::ECONNREFUSED => "Connection refused".into(),
        libc::EINPROGRESS => "Operation in progress".into(),
        EFSM => "Operation cannot be accomplished in current state".into(),
        ENOCOMPATPROTO => "The protocol is not compatible with the socket type".into(),
        ETERM => "Context was terminated".into(),
        EMTHREAD => "No thread available".into(),
        _ => {
            // SAFETY: strerror returns a pointer to a static or thread-local NUL-terminated string.
            let p = unsafe { libc::strerror(errnum) };
            if p.is_null() {
                return format!("Unknown error {errnum}");
            }
            // SAFETY: p is a valid NUL-terminated C string (checked non-null above).
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(n) => Error::from_errno(n),
            None => match e.kind() {
                std::io::ErrorKind::WouldBlock => Error::Again,
                std::io::ErrorKind::InvalidInput => Error::Inval,
                std::io::ErrorKind::AddrInUse => Error::AddrInUse,
                std::io::ErrorKind::AddrNotAvailable => Error::AddrNotAvail,
                std::io::ErrorKind::ConnectionRefused => Error::ConnRefused,
                std::io::ErrorKind::Interrupted => Error::Intr,
                std::io::ErrorKind::NotFound => Error::NoEnt,
                std::io::ErrorKind::Unsupported => Error::NotSup,
                _ => Error::Inval,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_round_trips() {
        for e in [
            Error::Again,
            Error::Term,
            Error::Fsm,
            Error::HostUnreach,
            Error::NoCompatProto,
            Error::Os(1234),
        ] {
            assert_eq!(Error::from_errno(e.errno()), e);
        }
        assert_eq!(ETERM, 156_384_765);
        assert_eq!(Error::Term.message(), "Context was terminated");
    }
}

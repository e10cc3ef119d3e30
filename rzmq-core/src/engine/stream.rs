//! The byte stream under an engine: a connected TCP or Unix-domain socket, and the one helper
//! that writes to it without blocking.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};

/// Writes what `w` takes of `b` now: 0 when it would block; errors other than an interrupt
/// end the connection.
pub(super) fn write_some(w: &mut Stream, b: &[u8]) -> io::Result<usize> {
    loop {
        return match w.write(b) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// A connected byte stream (TCP or Unix).
pub(crate) enum Stream {
    /// A TCP connection.
    Tcp(mio::net::TcpStream),
    /// A Unix-domain connection.
    Unix(mio::net::UnixStream),
}

impl Stream {
    /// The connection's local and remote endpoints as libzmq names them in version 2 monitor
    /// events (`tcp://127.0.0.1:5555`, `tcp://[::1]:5555`, `ipc://path`; `ipc://` for an
    /// unnamed Unix socket); empty when unknown.
    pub(crate) fn uris(&self) -> (String, String) {
        fn tcp(a: std::io::Result<std::net::SocketAddr>) -> String {
            a.map(|a| format!("tcp://{a}")).unwrap_or_default()
        }
        fn ipc(a: std::io::Result<std::os::unix::net::SocketAddr>) -> String {
            let Ok(a) = a else {
                return String::new();
            };
            match a.as_pathname() {
                Some(p) => format!("ipc://{}", p.display()),
                None => match std::os::linux::net::SocketAddrExt::as_abstract_name(&a) {
                    Some(n) => format!("ipc://@{}", String::from_utf8_lossy(n)),
                    None => "ipc://".to_string(),
                },
            }
        }
        match self {
            Stream::Tcp(s) => (tcp(s.local_addr()), tcp(s.peer_addr())),
            Stream::Unix(s) => (ipc(s.local_addr()), ipc(s.peer_addr())),
        }
    }

    /// The mio source to register.
    pub(crate) fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

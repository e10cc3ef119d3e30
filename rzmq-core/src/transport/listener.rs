//! Listeners: the listening tcp or ipc socket of a bound endpoint (`ZMQ_USE_FD` included), its
//! accepts, and the ipc socket file it removes when it closes.

use std::io;
use std::os::fd::AsRawFd;

use crate::endpoint::Endpoint;
use crate::engine::Stream;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::transport::ConnSetup;

/// The listening socket.
pub(crate) enum ListenerKind {
    /// A tcp listener.
    Tcp(mio::net::TcpListener),
    /// An ipc listener and what it removes when it closes.
    Unix(mio::net::UnixListener, IpcCleanup),
}
/// What an ipc listener removes when it closes: its socket file and a wildcard's temp dir.
pub(crate) struct IpcCleanup {
    file: Option<std::path::PathBuf>,
    dir: Option<std::path::PathBuf>,
    /// (device, inode) of the socket file we created: another socket may have re-bound the
    /// path since (rebind after close), and its file must not be removed.
    id: Option<(u64, u64)>,
}

fn file_id(p: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// A bound endpoint on its I/O thread.
pub(crate) struct Listener {
    /// The listening socket.
    pub kind: ListenerKind,
    /// The endpoint as resolved (LAST_ENDPOINT form).
    pub endpoint: String,
    /// What its connections need to know about the socket.
    pub setup: ConnSetup,
    /// The tokens of its connections' sessions.
    pub sessions: Vec<u64>,
    /// An `rdma://` listener: its connections must upgrade.
    pub rdma_required: bool,
}

/// A listening tcp socket made non-blocking and registrable, with its LAST_ENDPOINT and fd.
fn tcp_listener(std: std::net::TcpListener) -> Result<(ListenerKind, String, i32)> {
    std.set_nonblocking(true)?;
    let local = std.local_addr()?;
    let fd = std.as_raw_fd();
    let resolved = crate::endpoint::tcp_last_endpoint(&local);
    Ok((
        ListenerKind::Tcp(mio::net::TcpListener::from_std(std)),
        resolved,
        fd,
    ))
}

/// Opens the listening socket of a tcp or ipc endpoint: returns it with the endpoint as
/// resolved (LAST_ENDPOINT form) and its fd.
pub(crate) fn listen(ep: &Endpoint, o: &Options) -> Result<(ListenerKind, String, i32)> {
    Ok(match ep {
        Endpoint::Tcp(_) if o.use_fd >= 0 => {
            // ZMQ_USE_FD: the application bound (and listens on) this fd itself.
            // SAFETY: the caller hands us ownership of a listening socket fd, as libzmq assumes.
            let std =
                unsafe { <std::net::TcpListener as std::os::fd::FromRawFd>::from_raw_fd(o.use_fd) };
            tcp_listener(std)?
        }
        Endpoint::Ipc(ipc) if o.use_fd >= 0 => {
            // SAFETY: as above, a listening unix socket fd handed over by the application.
            let std = unsafe {
                <std::os::unix::net::UnixListener as std::os::fd::FromRawFd>::from_raw_fd(o.use_fd)
            };
            std.set_nonblocking(true)?;
            let fd = std.as_raw_fd();
            let cleanup = IpcCleanup {
                file: None,
                dir: None,
                id: None,
            };
            (
                ListenerKind::Unix(mio::net::UnixListener::from_std(std), cleanup),
                ipc.last_endpoint(),
                fd,
            )
        }
        Endpoint::Tcp(tcp) => {
            let addr = tcp.resolve_bind(o.ipv6)?;
            let domain = socket2::Domain::for_address(addr);
            let s = socket2::Socket::new(domain, socket2::Type::STREAM.cloexec(), None)?;
            s.set_reuse_address(true)?;
            if addr.is_ipv6() {
                let _ = s.set_only_v6(false);
            }
            crate::transport::tcp::apply_tcp_options(&s, o, false);
            s.bind(&addr.into())?;
            s.listen(o.backlog.max(1))?;
            tcp_listener(s.into())?
        }
        Endpoint::Ipc(ipc) => {
            let b = ipc.resolve_bind(o.use_fd)?;
            let addr = b.endpoint.to_unix_addr()?;
            if let Some(p) = addr.as_pathname() {
                let _ = std::fs::remove_file(p);
            }
            let std = std::os::unix::net::UnixListener::bind_addr(&addr).map_err(Error::from)?;
            std.set_nonblocking(true)?;
            let fd = std.as_raw_fd();
            let file = addr.as_pathname().map(|p| p.to_path_buf());
            let id = file.as_deref().and_then(file_id);
            let cleanup = IpcCleanup {
                file,
                dir: b.tmp_dir,
                id,
            };
            (
                ListenerKind::Unix(mio::net::UnixListener::from_std(std), cleanup),
                b.endpoint.last_endpoint(),
                fd,
            )
        }
        Endpoint::Inproc(_) | Endpoint::Udp(_) => return Err(Error::Inval),
    })
}

impl ListenerKind {
    /// The listening socket as a mio source.
    pub(crate) fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            ListenerKind::Tcp(t) => t,
            ListenerKind::Unix(u, _) => u,
        }
    }

    /// Accepts one connection: its stream and the peer's ip (empty for ipc).
    pub(crate) fn accept(&mut self) -> io::Result<(Stream, String)> {
        match self {
            ListenerKind::Tcp(t) => t
                .accept()
                .map(|(s, a)| (Stream::Tcp(s), a.ip().to_string())),
            ListenerKind::Unix(u, _) => u.accept().map(|(s, _)| (Stream::Unix(s), String::new())),
        }
    }

    /// Stops listening: deregisters the socket and removes an ipc socket file we created;
    /// returns the fd (for the CLOSED event).
    pub(crate) fn close(&mut self, registry: &mio::Registry) -> i32 {
        match self {
            ListenerKind::Tcp(t) => {
                let _ = registry.deregister(t);
                t.as_raw_fd()
            }
            ListenerKind::Unix(u, cleanup) => {
                let _ = registry.deregister(u);
                if let Some(p) = &cleanup.file {
                    if cleanup.id.is_some() && file_id(p) == cleanup.id {
                        let _ = std::fs::remove_file(p);
                    }
                }
                if let Some(d) = &cleanup.dir {
                    let _ = std::fs::remove_dir(d);
                }
                u.as_raw_fd()
            }
        }
    }
}

//! Bind and connect on a socket's behalf (called on the socket's thread): the endpoint is
//! checked, then the listener, connecting session or UDP endpoint goes to the I/O thread the
//! caller picks.

use crate::command::PeerPipe;
use crate::endpoint::Endpoint;
use crate::error::Result;
use crate::io::thread::{IoHandle, IoThread};
use crate::monitor;
use crate::options::Options;
use crate::session::udp::{UdpRole, UdpSession};
use crate::session::Session;
use crate::transport::endpoint::{check_connect, rdma_endpoint};
use crate::transport::listener::{listen, Listener};
use crate::transport::udp;
use crate::transport::ConnSetup;

/// Binds a tcp or ipc endpoint and hands the listener to the I/O thread `io` picks (asked only
/// once the endpoint passed its checks); returns the socket's handle and the resolved address.
pub(crate) fn bind<'a>(
    ep: &Endpoint,
    setup: ConnSetup,
    io: impl FnOnce() -> Result<&'a IoThread>,
) -> Result<(IoHandle, String)> {
    let rdma_required = rdma_endpoint(ep)?;
    let io = io()?;
    let (kind, resolved, fd) = listen(ep, &setup.options)?;
    let resolved = match resolved.strip_prefix("tcp://") {
        Some(rest) if rdma_required => format!("rdma://{rest}"),
        _ => resolved,
    };
    setup
        .monitor
        .event(monitor::EVENT_LISTENING, fd as u32, &resolved);
    let listener = Listener {
        kind,
        endpoint: resolved.clone(),
        setup,
        sessions: Vec::new(),
        rdma_required,
    };
    Ok((io.add_listener(listener, fd), resolved))
}

/// Starts a connecting session for `addr` on the I/O thread `io` picks (asked only once the
/// address passed its checks).
pub(crate) fn connect<'a>(
    ep: &Endpoint,
    addr: &str,
    setup: ConnSetup,
    pipe: Option<PeerPipe>,
    io: impl FnOnce() -> Result<&'a IoThread>,
) -> Result<IoHandle> {
    let rdma_required = rdma_endpoint(ep)?;
    check_connect(ep)?;
    let io = io()?;
    let session = Session::connecting(setup, ep, addr, rdma_required, pipe);
    Ok(io.add_session(session))
}

/// Opens a UDP endpoint (`addr` is the text after `udp://`; `bind` for DISH and DGRAM, a
/// connect for RADIO) and hands it to the I/O thread `io` picks, with `pipe`, the connection's
/// ends of the socket's pipe. Returns the handle and the endpoint as LAST_ENDPOINT shows it (a
/// bound port 0 becomes the port the kernel chose).
pub(crate) fn udp<'a>(
    addr: &str,
    bind: bool,
    role: UdpRole,
    options: &Options,
    pipe: PeerPipe,
    io: impl FnOnce() -> Result<&'a IoThread>,
) -> Result<(IoHandle, String)> {
    let resolved = udp::resolve(addr, bind, options.ipv6)?;
    let io = io()?;
    let sock = udp::open(&resolved, role.sends(), role.receives(), options)?;
    let endpoint = match sock.local_addr() {
        Ok(local) if bind && resolved.bind.port() == 0 => format!("udp://{local}"),
        _ => format!("udp://{addr}"),
    };
    let session = UdpSession::new(sock, &resolved, role, endpoint.clone(), pipe);
    Ok((io.add_udp(session), endpoint))
}

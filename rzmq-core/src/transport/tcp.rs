//! tcp sockets: the socket options a socket's settings put on them, and a non-blocking
//! connect.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::options::Options;

/// Puts the socket's tcp options on a new (listening or connecting) socket, or, with
/// `accepted`, on a connection a listener accepted (as libzmq does: the same buffers,
/// keepalive and retransmission timeout; the device binding was the listener's).
pub(crate) fn apply_tcp_options(sock: &socket2::Socket, o: &Options, accepted: bool) {
    let _ = sock.set_nodelay(true);
    if o.sndbuf >= 0 {
        let _ = sock.set_send_buffer_size(o.sndbuf as usize);
    }
    if o.rcvbuf >= 0 {
        let _ = sock.set_recv_buffer_size(o.rcvbuf as usize);
    }
    if o.tcp_keepalive == 1 {
        let mut ka = socket2::TcpKeepalive::new();
        if o.tcp_keepalive_idle > 0 {
            ka = ka.with_time(Duration::from_secs(o.tcp_keepalive_idle as u64));
        }
        if o.tcp_keepalive_intvl > 0 {
            ka = ka.with_interval(Duration::from_secs(o.tcp_keepalive_intvl as u64));
        }
        if o.tcp_keepalive_cnt > 0 {
            ka = ka.with_retries(o.tcp_keepalive_cnt as u32);
        }
        let _ = sock.set_tcp_keepalive(&ka);
    } else if o.tcp_keepalive == 0 {
        let _ = sock.set_keepalive(false);
    }
    if o.tos != 0 {
        let _ = sock.set_tos(o.tos as u32);
    }
    if o.tcp_maxrt > 0 {
        let _ = sock.set_tcp_user_timeout(Some(Duration::from_millis(o.tcp_maxrt as u64)));
    }
    if !accepted && !o.bindtodevice.is_empty() {
        let _ = sock.bind_device(Some(&o.bindtodevice));
    }
}

/// Starts a non-blocking tcp connect from `src` (when bound) to `dst`.
pub(crate) fn tcp_connect(
    src: Option<SocketAddr>,
    dst: SocketAddr,
    o: &Options,
) -> io::Result<mio::net::TcpStream> {
    let domain = socket2::Domain::for_address(dst);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM.cloexec(), None)?;
    apply_tcp_options(&s, o, false);
    if let Some(src) = src {
        s.set_reuse_address(true)?;
        s.bind(&src.into())?;
    }
    s.set_nonblocking(true)?;
    match s.connect(&dst.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let std: std::net::TcpStream = s.into();
    Ok(mio::net::TcpStream::from_std(std))
}

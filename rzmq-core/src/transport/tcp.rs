//! tcp sockets: the socket options a socket's settings put on them, and a non-blocking
//! connect.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::options::Options;

/// Puts the socket's tcp options on a new (listening or connecting) socket, or, with
/// `accepted`, on a connection a listener accepted (as libzmq does: the same buffers,
/// keepalive and retransmission timeout; the device binding was the listener's).
/// `ZMQ_PRIORITY` (`SO_PRIORITY`) goes on every one of them: libzmq 4.3.5 sets it on accepted
/// connections only, which leaves connecting sockets without it. `ZMQ_BUSY_POLL`
/// (`SO_BUSY_POLL`, when > 0) too: libzmq sets it on listening and connecting sockets.
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
    if o.priority != 0 {
        set_int_sockopt(sock, libc::SOL_SOCKET, SO_PRIORITY, o.priority);
    }
    if o.busy_poll > 0 {
        set_int_sockopt(sock, libc::SOL_SOCKET, SO_BUSY_POLL, o.busy_poll);
    }
    if o.tcp_maxrt > 0 {
        let _ = sock.set_tcp_user_timeout(Some(Duration::from_millis(o.tcp_maxrt as u64)));
    }
    if !accepted && !o.bindtodevice.is_empty() {
        let _ = sock.bind_device(Some(&o.bindtodevice));
    }
}

/// `SO_PRIORITY` where the platform has it (`ZMQ_HAVE_SO_PRIORITY`); elsewhere nothing is set.
#[cfg(any(target_os = "linux", target_os = "android"))]
const SO_PRIORITY: Option<libc::c_int> = Some(libc::SO_PRIORITY);
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const SO_PRIORITY: Option<libc::c_int> = None;
/// `SO_BUSY_POLL` where the platform has it (Linux); elsewhere nothing is set.
#[cfg(any(target_os = "linux", target_os = "android"))]
const SO_BUSY_POLL: Option<libc::c_int> = Some(libc::SO_BUSY_POLL);
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const SO_BUSY_POLL: Option<libc::c_int> = None;

/// Sets an int socket option, best effort as libzmq (a refused value, such as a priority above
/// 6 without `CAP_NET_ADMIN`, leaves the OS default).
fn set_int_sockopt(sock: &socket2::Socket, level: libc::c_int, name: Option<libc::c_int>, v: i32) {
    use std::os::fd::AsRawFd;
    let Some(name) = name else { return };
    // SAFETY: the fd is the live socket `sock` owns; the value pointer and length describe a
    // local `c_int`.
    let _ = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
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

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use crate::zmtp::SocketType;
    use std::os::fd::AsRawFd;

    fn get_int_sockopt(sock: &socket2::Socket, name: libc::c_int) -> i32 {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: the fd is live; v and len are local and sized for an int option.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        v
    }

    #[test]
    fn priority_is_put_on_tcp_sockets_as_so_priority() {
        let mut o = Options::new(SocketType::Push);
        for accepted in [false, true] {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            apply_tcp_options(&s, &o, accepted);
            assert_eq!(get_int_sockopt(&s, libc::SO_PRIORITY), 0);
        }
        o.set(crate::options::PRIORITY, &3i32.to_ne_bytes())
            .unwrap();
        for accepted in [false, true] {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            apply_tcp_options(&s, &o, accepted);
            assert_eq!(get_int_sockopt(&s, libc::SO_PRIORITY), 3);
        }
    }
}

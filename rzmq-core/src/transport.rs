//! Transports and I/O threads: listeners and sessions for tcp and ipc, driven by a mio reactor.
//!
//! Each I/O thread runs one `Reactor`: a mio poll over its listeners and connections, a command
//! mailbox (new listener or session, close, a pipe needs attention) and a timer heap. A
//! `Session` is one connection's lifetime as the socket sees it: for a connect it survives
//! reconnects and keeps the socket's pipe (so messages queue while the peer is away); for an
//! accepted connection it ends with the connection. Its [`Engine`] speaks the wire protocol.
//!
//! The seam other transports plug into is the engine's [`Stream`] plus `Session`'s lifecycle; a
//! session does not care which transport produced its stream.

use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::context::CtxInner;
use crate::direct::{DirectRx, DirectTx};
use crate::endpoint::Endpoint;
use crate::engine::{Closed, Engine, Progress, Proto, Stream, Upgrade};
use crate::error::{Error, Result};
use crate::monitor::{self, Monitor};
use crate::msg::{Metadata, Msg};
use crate::options::Options;
use crate::pattern::PipeEntry;
use crate::pipe::{self, Notify, Reader, Target, WriteError, Writer};
use crate::socket::{Attach, SocketShared, SocketType};
use crate::socks;
use crate::zmtp;

/// The connection's ends of a socket pipe.
pub(crate) struct PeerPipe {
    /// Messages to the socket.
    pub to_socket: Writer,
    /// Messages from the socket.
    pub from_socket: Reader,
}

/// What a listener or session needs to know about its socket.
#[derive(Clone)]
pub(crate) struct ConnSetup {
    pub socket: Arc<SocketShared>,
    pub socket_type: SocketType,
    pub options: Arc<Options>,
    pub monitor: Monitor,
    pub connect_routing_id: Option<Vec<u8>>,
    /// The context, for the ZAP handler's inproc endpoint.
    pub ctx: std::sync::Weak<CtxInner>,
}

enum IoCmd {
    AddListener(Box<Listener>, u64),
    AddSession(Box<Session>, u64),
    /// Close a listener or session; the flag says whether to raise EVENT_CLOSED here.
    Close(u64, bool),
    SocketClosed(u64),
    Pipe(u64),
    Shutdown,
}

struct IoShared {
    mailbox: crate::signal::Mailbox<IoCmd>,
    next_token: std::sync::atomic::AtomicU64,
    /// Commands sent and not yet carried out, plus one while a session moves messages from a
    /// pipe to its connection: while non-zero, direct sends wait their turn (see
    /// [`crate::direct`]).
    work: Arc<AtomicUsize>,
    /// Connections (streams) registered with the thread: direct receives take input only from
    /// a connection alone on its thread (see [`crate::direct::DirectRx`]).
    streams: Arc<AtomicUsize>,
}

impl IoShared {
    /// Queues a command; it counts as unfinished work until the I/O thread has carried it out.
    fn send(&self, cmd: IoCmd) {
        self.work.fetch_add(1, Ordering::SeqCst);
        self.mailbox.send(cmd);
    }
}

impl Notify for IoShared {
    fn activate_read(&self, token: u64) {
        self.send(IoCmd::Pipe(token));
    }
    fn activate_write(&self, token: u64) {
        self.send(IoCmd::Pipe(token));
    }
    fn pipe_closed(&self, token: u64) {
        self.send(IoCmd::Pipe(token));
    }
}

/// An I/O thread of a context.
pub(crate) struct IoThread {
    shared: Arc<IoShared>,
    join: Mutex<Option<JoinHandle<()>>>,
}

impl IoThread {
    pub fn start(index: usize, prefix: &str) -> Result<IoThread> {
        let shared = Arc::new(IoShared {
            mailbox: crate::signal::Mailbox::new()?,
            next_token: std::sync::atomic::AtomicU64::new(1),
            work: Arc::new(AtomicUsize::new(0)),
            streams: Arc::new(AtomicUsize::new(0)),
        });
        let poll = Poll::new().map_err(Error::from)?;
        let s2 = shared.clone();
        let name = if prefix.is_empty() {
            format!("rzmq-io/{index}")
        } else {
            format!("{prefix}/rzmq-io/{index}")
        };
        let join = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                block_signals();
                Reactor::new(s2, poll).run()
            })
            .map_err(Error::from)?;
        Ok(IoThread {
            shared,
            join: Mutex::new(Some(join)),
        })
    }

    fn token(&self) -> u64 {
        self.shared
            .next_token
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    pub fn shutdown(&self) {
        self.shared.send(IoCmd::Shutdown);
    }

    pub fn join(&self) {
        if let Some(j) = self.join.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = j.join();
        }
    }

    fn handle(&self, token: u64, fd: i32) -> IoHandle {
        IoHandle {
            shared: self.shared.clone(),
            token,
            fd,
        }
    }
}

/// Blocks the usual asynchronous signals on the calling (I/O) thread, as libzmq does, so that
/// SIGINT and friends reach the application's threads and interrupt their blocking calls.
fn block_signals() {
    // SAFETY: sigset_t is plain data initialised by sigemptyset; the calls only touch it and the
    // calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
            libc::SIGALRM,
            libc::SIGCHLD,
        ] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// A socket's handle on its listener or connecting session.
pub(crate) struct IoHandle {
    shared: Arc<IoShared>,
    token: u64,
    fd: i32,
}

impl IoHandle {
    /// Closes the listener or session now.
    pub fn close(self) {
        self.shared.send(IoCmd::Close(self.token, true));
    }

    /// Closes a listener whose CLOSED event the socket already raised (socket close: the
    /// monitor stops before the I/O thread gets here).
    pub fn close_quiet(self) {
        self.shared.send(IoCmd::Close(self.token, false));
    }

    /// The listener's fd, for monitor events (-1 for sessions).
    pub fn fd(&self) -> i32 {
        self.fd
    }
    /// The socket closed: the session delivers what is queued (LINGER) and then ends.
    pub fn socket_closed(self) {
        self.shared.send(IoCmd::SocketClosed(self.token));
    }
}

// ----- congestion control on same-host connections --------------------------------------------

/// The congestion control put on tcp connections whose two ends are on this host, read once
/// from `RZMQ_TCP_LOCAL_CC` (default `reno`; `off`, `default` or empty keeps the host's own).
///
/// Traffic between two addresses of one host goes over the loopback device, where there is no
/// congestion to control. A pacing algorithm such as BBR (a common host default) still paces
/// it: a write of more than 16 segments waits, and a stream of large messages moves 1.3-1.5x
/// slower than under reno (docs/BENCHMARKS.md). Reno is built into every Linux kernel and
/// always allowed to unprivileged processes; only connections that stay on this host change.
fn local_congestion_control() -> Option<&'static [u8]> {
    static CC: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    CC.get_or_init(|| match std::env::var("RZMQ_TCP_LOCAL_CC") {
        Ok(v) if v.is_empty() || v == "off" || v == "default" => None,
        Ok(v) => Some(v.into_bytes()),
        Err(_) => Some(b"reno".to_vec()),
    })
    .as_deref()
}

/// Whether the same-host congestion control paces its sends (BBR and its variants, when
/// `RZMQ_TCP_LOCAL_CC` names one): such connections keep writing large bodies in two steps.
fn local_congestion_control_paces() -> bool {
    local_congestion_control().is_some_and(|cc| cc.starts_with(b"bbr"))
}

/// Whether a tcp connection between `local` and `peer` stays on this host (loopback, or one of
/// the host's own addresses on both ends).
pub fn is_same_host(local: &SocketAddr, peer: &SocketAddr) -> bool {
    let (l, p) = (canonical_ip(local.ip()), canonical_ip(peer.ip()));
    p.is_loopback() || l == p
}

fn canonical_ip(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(std::net::IpAddr::V4)
            .unwrap_or(std::net::IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Puts the same-host congestion control (`RZMQ_TCP_LOCAL_CC`, default reno) on
/// a connected tcp socket whose two ends are on this host; returns whether it changed it. A
/// refusal (an algorithm the host does not allow) leaves the host's default in place.
pub fn tune_same_host<S: std::os::fd::AsFd>(sock: &S) -> bool {
    match local_congestion_control() {
        Some(cc) => tune_same_host_with(sock, cc),
        None => false,
    }
}

fn tune_same_host_with<S: std::os::fd::AsFd>(sock: &S, cc: &[u8]) -> bool {
    let s = socket2::SockRef::from(sock);
    match (s.local_addr(), s.peer_addr()) {
        (Ok(l), Ok(p)) => match (l.as_socket(), p.as_socket()) {
            (Some(l), Some(p)) if is_same_host(&l, &p) => s.set_tcp_congestion(cc).is_ok(),
            _ => false,
        },
        _ => false,
    }
}

/// The congestion control algorithm of the tcp socket `fd` (`TCP_CONGESTION`), for tests and
/// logs; `fd` must stay open for the call.
pub fn congestion_control(fd: std::os::fd::RawFd) -> io::Result<String> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: the caller keeps `fd` open for the call; the borrow ends with it.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let name = socket2::SockRef::from(&fd).tcp_congestion()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

// ----- bind and connect (called on the socket's thread) -------------------------------------

fn apply_tcp_options(sock: &socket2::Socket, o: &Options) {
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
    if !o.bindtodevice.is_empty() {
        let _ = sock.bind_device(Some(&o.bindtodevice));
    }
}

/// Binds a tcp or ipc endpoint and hands the listener to an I/O thread.
pub(crate) fn bind(ctx: &CtxInner, ep: &Endpoint, setup: ConnSetup) -> Result<(IoHandle, String)> {
    let rdma_required = rdma_endpoint(ep)?;
    let io = ctx.io_thread()?;
    let o = setup.options.clone();
    let (kind, resolved, fd) = match ep {
        Endpoint::Tcp(_) if o.use_fd >= 0 => {
            // ZMQ_USE_FD: the application bound (and listens on) this fd itself.
            // SAFETY: the caller hands us ownership of a listening socket fd, as libzmq assumes.
            let std =
                unsafe { <std::net::TcpListener as std::os::fd::FromRawFd>::from_raw_fd(o.use_fd) };
            std.set_nonblocking(true)?;
            let local = std.local_addr()?;
            let fd = std.as_raw_fd();
            let resolved = crate::endpoint::tcp_last_endpoint(&local);
            (
                ListenerKind::Tcp(mio::net::TcpListener::from_std(std)),
                resolved,
                fd,
            )
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
            apply_tcp_options(&s, &o);
            s.bind(&addr.into())?;
            s.listen(o.backlog.max(1))?;
            s.set_nonblocking(true)?;
            let std: std::net::TcpListener = s.into();
            let local = std.local_addr()?;
            let fd = std.as_raw_fd();
            let resolved = crate::endpoint::tcp_last_endpoint(&local);
            (
                ListenerKind::Tcp(mio::net::TcpListener::from_std(std)),
                resolved,
                fd,
            )
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
        Endpoint::Inproc(_) => return Err(Error::Inval),
    };
    let resolved = match resolved.strip_prefix("tcp://") {
        Some(rest) if rdma_required => format!("rdma://{rest}"),
        _ => resolved,
    };
    setup
        .monitor
        .event(monitor::EVENT_LISTENING, fd as u32, &resolved);
    let token = io.token();
    let listener = Listener {
        kind,
        endpoint: resolved.clone(),
        setup,
        sessions: Vec::new(),
        rdma_required,
    };
    io.shared
        .send(IoCmd::AddListener(Box::new(listener), token));
    Ok((io.handle(token, fd), resolved))
}

/// Starts a connecting session on an I/O thread.
pub(crate) fn connect(
    ctx: &CtxInner,
    ep: &Endpoint,
    addr: &str,
    setup: ConnSetup,
    pipe: Option<PeerPipe>,
) -> Result<IoHandle> {
    let rdma_required = rdma_endpoint(ep)?;
    // Validate the address now (EINVAL for a malformed one), resolve names at each attempt.
    match ep {
        Endpoint::Tcp(t) => t.check_connect_syntax()?,
        Endpoint::Ipc(i) => i.validate()?,
        Endpoint::Inproc(_) => return Err(Error::Inval),
    }
    let io = ctx.io_thread()?;
    let token = io.token();
    let reconnect_ivl = setup.options.reconnect_ivl;
    let proxy = match ep {
        Endpoint::Tcp(_) if !setup.options.socks_proxy.is_empty() => {
            Some(String::from_utf8_lossy(&setup.options.socks_proxy).into_owned())
        }
        _ => None,
    };
    let monitor_endpoint = match &proxy {
        Some(p) => format!("tcp://{p}"),
        None => addr.to_string(),
    };
    let session = Session {
        setup,
        endpoint: addr.to_string(),
        monitor_endpoint,
        connect: Some(ConnectInfo {
            ep: ep.clone(),
            ivl: Duration::from_millis(reconnect_ivl.max(0) as u64),
            retry_at: None,
            pending: None,
            proxy,
            socks: None,
            deadline: None,
        }),
        pipe,
        engine: None,
        socket_closed: false,
        registered: false,
        handshaken: false,
        listener: None,
        drop_partial: false,
        rdma_required,
        zap: None,
        direct: None,
        rx: None,
        held_seen: None,
        deaf: false,
        counted: false,
        last_moved: 0,
        alt_again: false,
        delivered_since_out: false,
    };
    io.shared.send(IoCmd::AddSession(Box::new(session), token));
    Ok(io.handle(token, -1))
}

/// Whether `ep` is an `rdma://` endpoint; `EPROTONOSUPPORT` when this process cannot do RDMA.
fn rdma_endpoint(ep: &Endpoint) -> Result<bool> {
    match ep {
        Endpoint::Tcp(t) if t.is_rdma() => match crate::alt::require_available() {
            Ok(()) => Ok(true),
            Err(e) => {
                if crate::alt::upgrader().is_some_and(|u| u.log_enabled()) {
                    eprintln!("rzmq[{}]: rdma://{}: {e}", std::process::id(), t.address());
                }
                Err(Error::ProtoNoSupport)
            }
        },
        _ => Ok(false),
    }
}

// ----- the reactor ----------------------------------------------------------------------------

const MAILBOX: Token = Token(usize::MAX);
/// Token bit of a session's alternative data path (its fd is registered beside the stream's).
const ALT_BIT: u64 = 1 << 62;

enum ListenerKind {
    Tcp(mio::net::TcpListener),
    Unix(mio::net::UnixListener, IpcCleanup),
}

/// What an ipc listener removes when it closes: its socket file and a wildcard's temp dir.
struct IpcCleanup {
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

struct Listener {
    kind: ListenerKind,
    endpoint: String,
    setup: ConnSetup,
    sessions: Vec<u64>,
    /// An `rdma://` listener: its connections must upgrade.
    rdma_required: bool,
}

struct ConnectInfo {
    ep: Endpoint,
    ivl: Duration,
    retry_at: Option<Instant>,
    /// A TCP connect in progress (to the SOCKS proxy while `socks` is set).
    pending: Option<mio::net::TcpStream>,
    /// `ZMQ_SOCKS_PROXY` when this tcp connect goes through a SOCKS5 proxy.
    proxy: Option<String>,
    /// The SOCKS5 handshake of the attempt in `pending`.
    socks: Option<SocksConn>,
    /// When the attempt in `pending` gives up (`ZMQ_CONNECT_TIMEOUT`).
    deadline: Option<Instant>,
}

/// A connect attempt through a SOCKS5 proxy.
struct SocksConn {
    /// The TCP connect to the proxy completed; the handshake is under way.
    up: bool,
    handshake: socks::Handshake,
}

struct Session {
    setup: ConnSetup,
    endpoint: String,
    /// The endpoint monitor events name: `endpoint`, or `tcp://<proxy>` through SOCKS (libzmq).
    monitor_endpoint: String,
    connect: Option<ConnectInfo>,
    pipe: Option<PeerPipe>,
    engine: Option<Engine>,
    socket_closed: bool,
    registered: bool,
    handshaken: bool,
    listener: Option<u64>,
    /// Skip the rest of a multipart message that a broken connection cut (reconnect).
    drop_partial: bool,
    /// An `rdma://` endpoint: connections must upgrade.
    rdma_required: bool,
    /// The pipe pair to the ZAP handler while the handshake waits on it.
    zap: Option<crate::zap::ZapClient>,
    /// The connection's output as shared with the pipe's writer (see [`crate::direct`]).
    direct: Option<Arc<DirectTx>>,
    /// Messages the last `pump_out` moved (output is granted to the writer only after <= 1).
    last_moved: usize,
    /// The connection's input as shared with the pipe's reader (see [`crate::direct`]).
    rx: Option<Arc<DirectRx>>,
    /// Readiness was left to a reader holding input between receives: the reader's claim
    /// count then, checked by a timer (see [`DirectRx::steal_if_stale`]).
    held_seen: Option<u64>,
    /// The stream is registered without read interest while the reader holds its input (see
    /// [`DirectRx::set_deaf`]).
    deaf: bool,
    /// The engine's stream is counted in its I/O thread's `IoShared::streams`.
    counted: bool,
    /// `on_alt` stopped at its budget with the path's completion channel possibly unarmed: the
    /// next loop runs `on_alt` again (which arms it before the path sleeps), not just a read.
    alt_again: bool,
    /// Messages from the peer were delivered since the last output pass: the writer may be
    /// waiting on them (request/reply), so that pass takes no nap on an empty lane.
    delivered_since_out: bool,
}

/// A framed-lane pass that moved this many messages is a stream (see [`framed_nap`]).
const NAP_AFTER_MSGS: usize = 64;
/// Most time one pass naps.
const NAP_PER_PASS: std::time::Duration = std::time::Duration::from_micros(200);
/// A nap is taken only while less than this waits in the lane.
const NAP_BELOW_BYTES: usize = 32 * 1024;

/// How long the I/O thread waits between writes of a stream on the framed lane
/// (`RZMQ_FRAMED_NAP_US`, default 20 us; 0: never).
fn framed_nap() -> std::time::Duration {
    static NAP: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *NAP.get_or_init(|| {
        let us = std::env::var("RZMQ_FRAMED_NAP_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(20)
            .min(1000);
        std::time::Duration::from_micros(us)
    })
}

/// Whether a stream's pass naps once when the lane is empty (see `Session::pump_out`): by
/// default; `RZMQ_FRAMED_NAP_EMPTY=0` turns it off.
fn framed_nap_empty() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("RZMQ_FRAMED_NAP_EMPTY").map_or(true, |v| v.trim() != "0"))
}

/// Whether direct sends are on: by default; `RZMQ_DIRECT=0` or [`crate::direct::set_enabled`]
/// turns them off.
fn direct_enabled() -> bool {
    crate::direct::enabled()
}

impl Session {
    /// Grants the connection's output to the pipe's writer when the connection is idle.
    fn direct_grant(&mut self, r: &Reactor) {
        let (Some(e), Some(p)) = (self.engine.as_ref(), self.pipe.as_ref()) else {
            return;
        };
        if !direct_enabled()
            || self.last_moved > 1
            || !e.direct_capable()
            || !p.from_socket.is_idle()
            || self.direct.as_ref().is_some_and(|d| d.has_leftover())
        {
            return;
        }
        if let Some(d) = self.direct_tx(r) {
            d.grant();
        }
    }

    /// The connection's output as shared with the pipe's writer, created on first use.
    fn direct_tx(&mut self, r: &Reactor) -> Option<Arc<DirectTx>> {
        let fd = self.engine.as_ref()?.fd();
        if self.direct.as_ref().is_some_and(|d| d.fd() != fd) {
            self.direct_kill();
        }
        if let Some(d) = &self.direct {
            return Some(d.clone());
        }
        let p = self.pipe.as_ref()?;
        let split = self.engine.as_ref().is_none_or(Engine::split_large);
        let d = Arc::new(DirectTx::new(fd, r.shared.work.clone()).with_split_large(split));
        p.from_socket.set_direct(Some(d.clone()));
        if let Some(e) = self.engine.as_mut() {
            e.direct = Some(d.clone());
        }
        self.direct = Some(d.clone());
        Some(d)
    }

    /// Offers the connection's input to the pipe's reader when everything read was delivered
    /// and the connection is idle (see [`crate::direct::DirectRx`]).
    fn rx_offer(&mut self, r: &Reactor, token: u64, cut_ok: bool) {
        let Some(fd) = self.engine.as_ref().map(Engine::fd) else {
            return;
        };
        if self.rx.as_ref().is_some_and(|x| x.fd() != fd) {
            self.rx_kill();
        }
        let Some(e) = self.engine.as_ref() else {
            return;
        };
        if !crate::direct::rx_enabled()
            || !self.handshaken
            || self.pipe.as_ref().is_none_or(|p| p.to_socket.conflates())
            || !e.input_may_be_offered()
        {
            return;
        }
        // The input's handle exists from here on, offered or not, so the socket can say it
        // receives with blocking calls (see DirectRx::want) even while this thread is ahead.
        let rx = match &self.rx {
            Some(x) => x.clone(),
            None => {
                let Some(dec) = e.fresh_decoder() else {
                    return;
                };
                let md = e.input_metadata();
                // The output too, so replies to what the socket reads itself can go directly.
                let tx = self.direct_tx(r);
                let Some(p) = self.pipe.as_ref() else {
                    return;
                };
                let x = Arc::new(DirectRx::new(
                    fd,
                    md,
                    dec,
                    tx,
                    self.target(r, token),
                    r.shared.streams.clone(),
                ));
                p.to_socket.set_direct_rx(Some(x.clone()));
                self.rx = Some(x.clone());
                x
            }
        };
        if !self.engine.as_ref().is_some_and(|e| e.input_offerable_with(cut_ok))
            // Not in the middle of a multipart message: its first frames wait in the pipe's
            // writer for the last, which the socket must not read past them.
            || self.pipe.as_ref().is_none_or(|p| p.to_socket.in_multipart())
        {
            return;
        }
        if !self.engine.as_ref().is_some_and(Engine::input_clean) {
            // The last read cut a frame: the reader continues it with the decoder holding it,
            // and the I/O thread keeps the reader's clean one until input comes back.
            let Some(clean) = rx.take_spare() else {
                return;
            };
            match self
                .engine
                .as_mut()
                .and_then(|e| e.swap_input_decoder(clean))
            {
                Some(cut) => rx.keep_spare(cut),
                None => return,
            }
        }
        rx.offer();
    }

    /// Stops listening for the stream's readiness (writes are still heard) while the reader
    /// holds its input.
    fn go_deaf(&mut self, r: &mut Reactor, token: u64) {
        let (Some(e), Some(rx)) = (self.engine.as_mut(), self.rx.as_ref()) else {
            return;
        };
        if r.poll
            .registry()
            .reregister(e.stream.source(), Token(token as usize), Interest::WRITABLE)
            .is_err()
        {
            return;
        }
        self.deaf = true;
        if !rx.set_deaf() {
            // The reader let go meanwhile.
            self.hear(r, token);
        }
    }

    /// Listens for the stream's readiness again; a stream readable now reports it at once.
    fn hear(&mut self, r: &mut Reactor, token: u64) {
        if !self.deaf {
            return;
        }
        self.deaf = false;
        if let Some(rx) = self.rx.as_ref() {
            rx.set_hearing();
        }
        if let Some(e) = self.engine.as_mut() {
            let _ = r.poll.registry().reregister(
                e.stream.source(),
                Token(token as usize),
                Interest::READABLE | Interest::WRITABLE,
            );
        }
    }

    /// The timer set when readiness was left to a reader holding input: takes the input back
    /// and reads it when the reader has not read since (`seen` claims), looks again later while
    /// it is still at work.
    fn check_held(&mut self, r: &mut Reactor, token: u64, seen: u64) -> Option<Fate> {
        use crate::direct::Stale;
        let rx = self.rx.clone()?;
        match rx.steal_if_stale(seen, self.deaf) {
            Stale::Taken(dec) => {
                self.hear(r, token);
                if let Some(dec) = dec {
                    if let Some(old) = self.engine.as_mut().and_then(|e| e.swap_input_decoder(dec))
                    {
                        rx.keep_spare(old);
                    }
                }
                self.pump_in(r, token, false)
            }
            Stale::Held(now) => {
                self.held_seen = Some(now);
                r.schedule(Instant::now() + crate::direct::hold_stale(), token);
                None
            }
            // Not held (a reader in its receive meets readiness itself, and marks what the I/O
            // thread hears for when it holds input again).
            Stale::Gone => {
                self.hear(r, token);
                None
            }
        }
    }

    /// Takes the connection's input back from the pipe's reader before reading; false while
    /// the reader holds it.
    fn rx_reclaim(&mut self) -> bool {
        let Some(rx) = self.rx.as_ref() else {
            return true;
        };
        match rx.reclaim() {
            None => false,
            Some(None) => true,
            Some(Some(dec)) => {
                if let Some(old) = self.engine.as_mut().and_then(|e| e.swap_input_decoder(dec)) {
                    rx.keep_spare(old);
                }
                true
            }
        }
    }

    /// The connection is ending: its input is never offered again (a reader holding it is
    /// woken and waited for).
    fn rx_kill(&mut self) {
        if let Some(rx) = self.rx.take() {
            let pipe = self.pipe.as_ref();
            rx.kill(|| {
                if let Some(p) = pipe {
                    p.to_socket.poke_reader();
                }
            });
            if let Some(p) = self.pipe.as_ref() {
                p.to_socket.set_direct_rx(None);
            }
        }
    }

    /// The engine's stream is gone from the I/O thread's count of connections.
    fn uncount(&mut self, r: &Reactor) {
        if self.counted {
            self.counted = false;
            r.shared.streams.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The connection is ending: its output is never granted again.
    fn direct_kill(&mut self) {
        self.rx_kill();
        if let Some(d) = self.direct.take() {
            d.kill();
            if let Some(e) = self.engine.as_mut() {
                e.direct = None;
            }
            if let Some(p) = self.pipe.as_ref() {
                p.from_socket.set_direct(None);
            }
        }
    }
}

enum Object {
    Listener(Box<Listener>),
    Session(Box<Session>),
}

struct Reactor {
    shared: Arc<IoShared>,
    poll: Poll,
    objects: HashMap<u64, Object>,
    timers: BinaryHeap<std::cmp::Reverse<(Instant, u64)>>,
    shutting_down: bool,
    /// Sessions that stopped reading on their budget, not on WouldBlock: read them again.
    read_again: Vec<u64>,
}

enum Fate {
    Keep,
    Remove,
}

impl Reactor {
    fn new(shared: Arc<IoShared>, poll: Poll) -> Reactor {
        Reactor {
            shared,
            poll,
            objects: HashMap::new(),
            timers: BinaryHeap::new(),
            shutting_down: false,
            read_again: Vec::new(),
        }
    }

    fn run(mut self) {
        let fd = self.shared.mailbox.fd();
        if self
            .poll
            .registry()
            .register(&mut mio::unix::SourceFd(&fd), MAILBOX, Interest::READABLE)
            .is_err()
        {
            return;
        }
        let mut events = Events::with_capacity(256);
        loop {
            // Commands first, so a wake-up is consumed before we sleep again.
            self.shared.mailbox.begin_drain();
            while let Some(cmd) = self.shared.mailbox.try_recv() {
                self.command(cmd);
                self.shared.work.fetch_sub(1, Ordering::SeqCst);
            }
            if self.shutting_down && self.objects.is_empty() {
                return;
            }
            let now = Instant::now();
            self.run_timers(now);
            let mut timeout = self
                .timers
                .peek()
                .map(|std::cmp::Reverse((t, _))| t.saturating_duration_since(now));
            let mut pending_reads = std::mem::take(&mut self.read_again);
            pending_reads.sort_unstable();
            pending_reads.dedup();
            if !pending_reads.is_empty() {
                timeout = Some(Duration::ZERO);
            }
            if self.shared.mailbox.has_pending() {
                timeout = Some(Duration::ZERO);
            }
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
            for ev in events.iter() {
                if ev.token() == MAILBOX {
                    continue;
                }
                let token = ev.token().0 as u64;
                if token & ALT_BIT != 0 {
                    self.with_session(token & !ALT_BIT, |s, r, tok| s.on_alt(r, tok));
                    continue;
                }
                if ev.is_read_closed() || ev.is_error() {
                    if let Some(Object::Session(s)) = self.objects.get_mut(&token) {
                        if let Some(e) = s.engine.as_mut() {
                            e.hup = true;
                        }
                    }
                }
                self.ready(
                    token,
                    ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    ev.is_writable(),
                );
            }
            for t in pending_reads {
                if t & ALT_BIT != 0 {
                    self.with_session(t & !ALT_BIT, |s, r, tok| s.on_alt(r, tok));
                } else {
                    self.ready(t, true, false);
                }
            }
        }
    }

    fn schedule(&mut self, at: Instant, token: u64) {
        self.timers.push(std::cmp::Reverse((at, token)));
    }

    fn run_timers(&mut self, now: Instant) {
        while let Some(std::cmp::Reverse((t, token))) = self.timers.peek().copied() {
            if t > now {
                break;
            }
            self.timers.pop();
            self.with_session(token, |s, r, tok| s.on_timer(r, tok, now));
        }
    }

    fn command(&mut self, cmd: IoCmd) {
        match cmd {
            IoCmd::AddListener(mut l, token) => {
                let src: &mut dyn mio::event::Source = match &mut l.kind {
                    ListenerKind::Tcp(t) => t,
                    ListenerKind::Unix(u, _) => u,
                };
                if self
                    .poll
                    .registry()
                    .register(src, Token(token as usize), Interest::READABLE)
                    .is_ok()
                {
                    self.objects.insert(token, Object::Listener(l));
                }
            }
            IoCmd::AddSession(s, token) => {
                self.objects.insert(token, Object::Session(s));
                self.with_session(token, |s, r, tok| s.start(r, tok));
            }
            IoCmd::Close(token, emit) => self.close_object(token, emit),
            IoCmd::SocketClosed(token) => {
                self.with_session(token, |s, r, tok| {
                    s.socket_closed = true;
                    s.check_linger(r, tok)
                });
            }
            IoCmd::Pipe(token) => {
                self.with_session(token, |s, r, tok| s.on_pipe(r, tok));
            }
            IoCmd::Shutdown => {
                self.shutting_down = true;
                let tokens: Vec<u64> = self.objects.keys().copied().collect();
                for t in tokens {
                    match self.objects.get(&t) {
                        Some(Object::Listener(_)) => self.close_object(t, true),
                        Some(Object::Session(_)) => {
                            self.with_session(t, |s, r, tok| {
                                s.socket_closed = true;
                                s.check_linger(r, tok)
                            });
                        }
                        None => {}
                    }
                }
            }
        }
    }

    fn close_object(&mut self, token: u64, emit: bool) {
        match self.objects.remove(&token) {
            Some(Object::Listener(mut l)) => {
                let fd = match &mut l.kind {
                    ListenerKind::Tcp(t) => {
                        let _ = self.poll.registry().deregister(t);
                        t.as_raw_fd()
                    }
                    ListenerKind::Unix(u, cleanup) => {
                        let _ = self.poll.registry().deregister(u);
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
                };
                if emit {
                    l.setup
                        .monitor
                        .event(monitor::EVENT_CLOSED, fd as u32, &l.endpoint);
                }
                // Its connections end as their pipes say: at once when the socket dropped them
                // (unbind), or after delivering what is queued within LINGER (socket close).
                for s in std::mem::take(&mut l.sessions) {
                    self.with_session(s, |s, r, tok| {
                        s.socket_closed = true;
                        s.check_linger(r, tok)
                    });
                }
            }
            Some(Object::Session(mut s)) => {
                s.teardown(self, token);
            }
            None => {}
        }
    }

    fn with_session(
        &mut self,
        token: u64,
        f: impl FnOnce(&mut Session, &mut Reactor, u64) -> Fate,
    ) {
        let Some(Object::Session(mut s)) = self.objects.remove(&token) else {
            return;
        };
        match f(&mut s, self, token) {
            Fate::Keep => {
                if s.engine.as_ref().is_some_and(|e| e.read_pending) {
                    self.read_again.push(token);
                }
                if std::mem::take(&mut s.alt_again) {
                    self.read_again.push(token | ALT_BIT);
                }
                self.objects.insert(token, Object::Session(s));
            }
            Fate::Remove => {
                s.teardown(self, token);
            }
        }
    }

    fn ready(&mut self, token: u64, readable: bool, writable: bool) {
        match self.objects.get(&token) {
            Some(Object::Listener(_)) => self.accept(token),
            Some(Object::Session(_)) => {
                self.with_session(token, |s, r, tok| s.on_ready(r, tok, readable, writable))
            }
            None => {}
        }
    }

    fn accept(&mut self, token: u64) {
        loop {
            let Some(Object::Listener(l)) = self.objects.get_mut(&token) else {
                return;
            };
            let res: io::Result<(Stream, String)> = match &mut l.kind {
                ListenerKind::Tcp(t) => t
                    .accept()
                    .map(|(s, a)| (Stream::Tcp(s), a.ip().to_string())),
                ListenerKind::Unix(u, _) => {
                    u.accept().map(|(s, _)| (Stream::Unix(s), String::new()))
                }
            };
            match res {
                Ok((stream, peer_ip)) => {
                    if !peer_allowed(&stream, &l.setup.options) {
                        // TCP_ACCEPT_FILTER / IPC_FILTER_*: refused peers are closed at once.
                        drop(stream);
                        continue;
                    }
                    let setup = l.setup.clone();
                    let endpoint = l.endpoint.clone();
                    if let Stream::Tcp(t) = &stream {
                        let s2 = socket2::SockRef::from(t);
                        apply_tcp_options_ref(&s2, &setup.options);
                    }
                    let fd = stream.as_raw_fd();
                    setup
                        .monitor
                        .event(monitor::EVENT_ACCEPTED, fd as u32, &endpoint);
                    let stoken = self
                        .shared
                        .next_token
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    l.sessions.push(stoken);
                    let rdma_required = l.rdma_required;
                    let upgrade = make_upgrade(&setup, false, rdma_required, &stream, &endpoint);
                    let adv = upgrade.as_ref().and_then(|u| u.advertise());
                    let proto = make_proto(
                        &setup,
                        (!peer_ip.is_empty()).then(|| peer_ip.clone()),
                        fd,
                        adv,
                    );
                    let mut engine = new_engine(&setup, stream, proto);
                    engine.upgrade = upgrade;
                    let session = Session {
                        setup,
                        monitor_endpoint: endpoint.clone(),
                        endpoint,
                        connect: None,
                        pipe: None,
                        engine: Some(engine),
                        socket_closed: false,
                        registered: false,
                        handshaken: false,
                        listener: Some(token),
                        drop_partial: false,
                        rdma_required,
                        zap: None,
                        direct: None,
                        rx: None,
                        held_seen: None,
                        deaf: false,
                        counted: false,
                        last_moved: 0,
                        alt_again: false,
                        delivered_since_out: false,
                    };
                    let _ = peer_ip;
                    self.objects
                        .insert(stoken, Object::Session(Box::new(session)));
                    self.with_session(stoken, |s, r, tok| s.start(r, tok));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(libc::EIO);
                    l.setup
                        .monitor
                        .event(monitor::EVENT_ACCEPT_FAILED, errno as u32, &l.endpoint);
                    return;
                }
            }
        }
    }
}

/// Whether an accepted peer passes the socket's accept filters (TCP_ACCEPT_FILTER for tcp,
/// IPC_FILTER_PID/UID/GID for ipc, checked with the peer's credentials).
fn peer_allowed(stream: &Stream, o: &Options) -> bool {
    match stream {
        Stream::Tcp(t) => match t.peer_addr() {
            Ok(a) => o.tcp_peer_allowed(&a),
            Err(_) => false,
        },
        Stream::Unix(u) => {
            let mut cred = libc::ucred {
                pid: 0,
                uid: 0,
                gid: 0,
            };
            let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
            // SAFETY: cred and len are live and sized for SO_PEERCRED.
            let rc = unsafe {
                libc::getsockopt(
                    u.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_PEERCRED,
                    (&mut cred as *mut libc::ucred).cast(),
                    &mut len,
                )
            };
            if rc != 0 {
                return false;
            }
            o.ipc_peer_allowed(cred.pid, cred.uid, cred.gid, &user_groups(cred.uid))
        }
    }
}

/// The supplementary groups of a user (for IPC_FILTER_GID), empty when unknown.
fn user_groups(uid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut pwd: libc::passwd = unsafe_zeroed_passwd();
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are to live, correctly sized buffers.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut res) };
    if rc != 0 || res.is_null() {
        return out;
    }
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut n = groups.len() as libc::c_int;
    // SAFETY: pw_name is a valid C string inside buf; groups has room for n entries.
    let rc = unsafe { libc::getgrouplist(pwd.pw_name, pwd.pw_gid, groups.as_mut_ptr(), &mut n) };
    if rc >= 0 {
        out.extend(groups[..n.max(0) as usize].iter().copied());
    }
    out
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: passwd is a plain C struct for which all-zero bytes (null pointers) are valid.
    unsafe { std::mem::zeroed() }
}

fn apply_tcp_options_ref(s: &socket2::SockRef<'_>, o: &Options) {
    let _ = s.set_nodelay(true);
    if o.sndbuf >= 0 {
        let _ = s.set_send_buffer_size(o.sndbuf as usize);
    }
    if o.rcvbuf >= 0 {
        let _ = s.set_recv_buffer_size(o.rcvbuf as usize);
    }
    if o.tcp_keepalive == 1 {
        let _ = s.set_keepalive(true);
    }
    if o.tos != 0 {
        let _ = s.set_tos(o.tos as u32);
    }
}

/// An engine for a new connection of this socket.
fn new_engine(setup: &ConnSetup, stream: Stream, proto: Proto) -> Engine {
    // Same-host tcp runs reno, which does not pace: large bodies go out whole.
    let unpaced =
        matches!(&stream, Stream::Tcp(t) if tune_same_host(t)) && !local_congestion_control_paces();
    let mut e = Engine::new(stream, proto);
    e.set_split_large(!unpaced);
    e.subscriptions = matches!(setup.socket_type, SocketType::Sub | SocketType::XSub);
    e
}

/// The upgrade of a new tcp ZMTP connection, when an upgrader is installed and enabled.
fn make_upgrade(
    setup: &ConnSetup,
    connecting: bool,
    required: bool,
    stream: &Stream,
    endpoint: &str,
) -> Option<Box<Upgrade>> {
    if setup.socket_type == SocketType::Stream || setup.options.raw_socket {
        return None;
    }
    let Stream::Tcp(t) = stream else {
        return None;
    };
    // CURVE: the RDMA path would carry messages unencrypted; the upgrade declines it (and says
    // so) unless RZMQ_RDMA_CURVE_PLAINTEXT=1.
    Upgrade::new(
        connecting,
        required,
        setup.options.mechanism == crate::options::CURVE,
        t.local_addr().ok(),
        setup.monitor.clone(),
        endpoint.to_string(),
    )
}

fn make_proto(
    setup: &ConnSetup,
    peer_address: Option<String>,
    fd: i32,
    advertise: Option<Vec<u8>>,
) -> Proto {
    if setup.socket_type == SocketType::Stream || setup.options.raw_socket {
        return Proto::new_raw();
    }
    let o = &setup.options;
    let ms = |v: i32| {
        if v > 0 {
            Some(Duration::from_millis(v as u64))
        } else {
            None
        }
    };
    let cfg = zmtp::Config {
        socket_type: zmtp::SocketType::from_i32(setup.socket_type as i32)
            .unwrap_or(zmtp::SocketType::Pair),
        routing_id: o.routing_id.clone(),
        mechanism: match o.mechanism {
            crate::options::PLAIN => zmtp::Mechanism::Plain,
            crate::options::CURVE => zmtp::Mechanism::Curve,
            _ => zmtp::Mechanism::Null,
        },
        as_server: o.as_server,
        plain: zmtp::Credentials {
            username: o.plain_username.clone(),
            password: o.plain_password.clone(),
        },
        zap_domain: o.zap_domain.clone(),
        zap_enforce_domain: o.zap_enforce_domain,
        maxmsgsize: o.maxmsgsize,
        metadata: o
            .metadata
            .iter()
            .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.clone()))
            .chain(advertise.map(|v| (crate::alt::PROPERTY.to_string(), v)))
            .collect(),
        heartbeat_ivl: ms(o.heartbeat_ivl),
        heartbeat_ttl: if o.heartbeat_ttl > 0 {
            Some(Duration::from_millis(u64::from(o.heartbeat_ttl) * 100))
        } else {
            None
        },
        heartbeat_timeout: Some(Duration::from_millis(
            o.effective_heartbeat_timeout().max(0) as u64,
        )),
        handshake_ivl: ms(o.handshake_ivl),
        peer_address,
        local_properties: vec![("__fd".to_string(), fd.to_string().into_bytes())],
        curve: zmtp::CurveKeys {
            public_key: o.curve_publickey,
            secret_key: o.curve_secretkey,
            server_key: o.curve_serverkey,
        },
    };
    Proto::new_zmtp(cfg, Instant::now())
}

impl Session {
    fn target(&self, r: &Reactor, token: u64) -> Target {
        Target {
            notify: r.shared.clone() as Arc<dyn Notify>,
            token,
        }
    }

    /// First run on the I/O thread: register the stream or start connecting.
    fn start(&mut self, r: &mut Reactor, token: u64) -> Fate {
        if let Some(p) = &self.pipe {
            let t = self.target(r, token);
            p.to_socket.set_target(t.clone());
            p.from_socket.set_target(t);
        }
        if self.engine.is_some() {
            return self.register_engine(r, token);
        }
        self.try_connect(r, token)
    }

    fn register_engine(&mut self, r: &mut Reactor, token: u64) -> Fate {
        let Some(e) = self.engine.as_mut() else {
            return Fate::Keep;
        };
        if r.poll
            .registry()
            .register(
                e.stream.source(),
                Token(token as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            return self.broken(r, token, Closed::Local);
        }
        self.registered = true;
        self.deaf = false;
        if !self.counted {
            self.counted = true;
            r.shared.streams.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(at) = e.proto.poll_timeout() {
            r.schedule(at, token);
        }
        if matches!(e.proto, Proto::Raw(_)) {
            // Raw (STREAM) connections have no handshake: the peer is ready at once.
            let mut md = Metadata::new();
            if let Stream::Tcp(t) = &e.stream {
                if let Ok(a) = t.peer_addr() {
                    md.insert("Peer-Address", a.ip().to_string().as_bytes());
                }
            }
            let peer = zmtp::Peer {
                socket_type: None,
                routing_id: Vec::new(),
                metadata: Arc::new(md),
                major_version: 0,
                minor_version: 0,
            };
            if let Some(f) = self.handshake_done(r, token, peer) {
                return f;
            }
            if self.setup.options.stream_notify {
                // The connect notification carries the connection's properties (Peer-Address).
                let mut note = Msg::new();
                note.set_metadata(self.engine.as_ref().and_then(|e| e.proto.raw_metadata()));
                if let Some(p) = self.pipe.as_mut() {
                    let _ = p.to_socket.try_write(note);
                }
            }
        }
        // Send the greeting.
        self.on_ready(r, token, true, true)
    }

    fn try_connect(&mut self, r: &mut Reactor, token: u64) -> Fate {
        let Some(ci) = self.connect.as_mut() else {
            return Fate::Remove;
        };
        ci.retry_at = None;
        let o = self.setup.options.clone();
        match &ci.ep {
            Endpoint::Tcp(tcp) => {
                // Through a SOCKS5 proxy: connect to the proxy (resolved like a tcp endpoint),
                // and ask it for the target, which is not resolved here.
                ci.socks = None;
                let resolved = match &ci.proxy {
                    Some(p) => {
                        let target = socks::Target::parse(tcp.target()).and_then(|t| {
                            socks::Handshake::new(t, &o.socks_username, &o.socks_password)
                        });
                        match target {
                            Ok(handshake) => {
                                ci.socks = Some(SocksConn {
                                    up: false,
                                    handshake,
                                });
                            }
                            Err(_) => return self.retry_later(r, token),
                        }
                        crate::endpoint::TcpEndpoint::new(p).resolve_connect(o.ipv6)
                    }
                    None => tcp.resolve_connect(o.ipv6),
                };
                let (src, dst) = match resolved {
                    Ok(v) => v,
                    Err(_) => return self.retry_later(r, token),
                };
                match tcp_connect(src, dst, &o) {
                    Ok(mut s) => {
                        let fd = s.as_raw_fd();
                        if r.poll
                            .registry()
                            .register(
                                &mut s,
                                Token(token as usize),
                                Interest::WRITABLE | Interest::READABLE,
                            )
                            .is_err()
                        {
                            return self.retry_later(r, token);
                        }
                        self.setup.monitor.event(
                            monitor::EVENT_CONNECT_DELAYED,
                            libc::EINPROGRESS as u32,
                            &self.monitor_endpoint,
                        );
                        let _ = fd;
                        ci.pending = Some(s);
                        if o.connect_timeout > 0 {
                            let at =
                                Instant::now() + Duration::from_millis(o.connect_timeout as u64);
                            ci.deadline = Some(at);
                            r.schedule(at, token);
                        }
                        Fate::Keep
                    }
                    Err(_) => self.retry_later(r, token),
                }
            }
            Endpoint::Ipc(ipc) => {
                let addr = match ipc.to_unix_addr() {
                    Ok(a) => a,
                    Err(_) => return self.retry_later(r, token),
                };
                match std::os::unix::net::UnixStream::connect_addr(&addr) {
                    Ok(s) => {
                        if s.set_nonblocking(true).is_err() {
                            return self.retry_later(r, token);
                        }
                        let stream = Stream::Unix(mio::net::UnixStream::from_std(s));
                        self.connected(r, token, stream)
                    }
                    Err(_) => self.retry_later(r, token),
                }
            }
            Endpoint::Inproc(_) => Fate::Remove,
        }
    }

    fn connected(&mut self, r: &mut Reactor, token: u64, stream: Stream) -> Fate {
        self.setup.monitor.event(
            monitor::EVENT_CONNECTED,
            stream.as_raw_fd() as u32,
            &self.monitor_endpoint,
        );
        let peer_ip = match &stream {
            Stream::Tcp(t) => t.peer_addr().ok().map(|a| a.ip().to_string()),
            Stream::Unix(_) => None,
        };
        let upgrade = make_upgrade(
            &self.setup,
            true,
            self.rdma_required,
            &stream,
            &self.endpoint,
        );
        let adv = upgrade.as_ref().and_then(|u| u.advertise());
        let proto = make_proto(&self.setup, peer_ip, stream.as_raw_fd(), adv);
        let mut engine = new_engine(&self.setup, stream, proto);
        engine.upgrade = upgrade;
        self.direct_kill();
        self.engine = Some(engine);
        self.handshaken = false;
        if let Some(ci) = self.connect.as_mut() {
            // A successful connection resets the back-off.
            ci.ivl = Duration::from_millis(self.setup.options.reconnect_ivl.max(0) as u64);
        }
        self.register_engine(r, token)
    }

    fn retry_later(&mut self, r: &mut Reactor, token: u64) -> Fate {
        if self.socket_closed && self.pipe.as_ref().is_none_or(|p| !p.from_socket.has_msg()) {
            return Fate::Remove;
        }
        let o = &self.setup.options;
        let Some(ci) = self.connect.as_mut() else {
            return Fate::Remove;
        };
        if o.reconnect_ivl < 0 {
            // Reconnection disabled: the endpoint ends here, and its pipe with it.
            return Fate::Remove;
        }
        let ivl = ci.ivl;
        let mut next = ivl * 2;
        if o.reconnect_ivl_max > 0 {
            next = next
                .min(Duration::from_millis(o.reconnect_ivl_max as u64))
                .max(Duration::from_millis(o.reconnect_ivl as u64));
        } else {
            next = ivl;
        }
        ci.ivl = next;
        let at = Instant::now() + ivl;
        ci.retry_at = Some(at);
        self.setup.monitor.event(
            monitor::EVENT_CONNECT_RETRIED,
            ivl.as_millis() as u32,
            &self.monitor_endpoint,
        );
        r.schedule(at, token);
        Fate::Keep
    }

    fn on_timer(&mut self, r: &mut Reactor, token: u64, now: Instant) -> Fate {
        if let Some(seen) = self.held_seen.take() {
            if let Some(f) = self.check_held(r, token, seen) {
                return f;
            }
        }
        if let Some(ci) = self.connect.as_mut() {
            if ci.retry_at.is_some_and(|t| t <= now)
                && self.engine.is_none()
                && ci.pending.is_none()
            {
                return self.try_connect(r, token);
            }
            if ci.pending.is_some() && ci.deadline.is_some_and(|d| d <= now) {
                // Connect timeout (through a proxy: connect and SOCKS handshake): give up on
                // this attempt.
                ci.deadline = None;
                ci.socks = None;
                if let Some(mut s) = ci.pending.take() {
                    let _ = r.poll.registry().deregister(&mut s);
                }
                return self.retry_later(r, token);
            }
        }
        if let Some(p) = &self.pipe {
            if let Some(Some(deadline)) = p.from_socket.linger_deadline() {
                if deadline <= now {
                    return Fate::Remove;
                }
            }
        }
        let Some(e) = self.engine.as_mut() else {
            return Fate::Keep;
        };
        match e.on_timer(now) {
            Progress::Open => {}
            Progress::Closed(c) => return self.broken(r, token, c),
        }
        if let Some(at) = e.proto.poll_timeout() {
            r.schedule(at, token);
        }
        // Heartbeats may have queued output.
        self.on_ready(r, token, false, true)
    }

    fn on_ready(&mut self, r: &mut Reactor, token: u64, readable: bool, writable: bool) -> Fate {
        if let Some(ci) = self.connect.as_mut() {
            if ci.socks.as_ref().is_some_and(|c| c.up) {
                return self.socks_step(r, token);
            }
            if let Some(mut s) = ci.pending.take() {
                // Connect completion.
                match s.take_error() {
                    Ok(None) if s.peer_addr().is_ok() => {
                        if let Some(c) = ci.socks.as_mut() {
                            // Connected to the proxy: the SOCKS handshake comes first.
                            c.up = true;
                            ci.pending = Some(s);
                            return self.socks_step(r, token);
                        }
                        ci.deadline = None;
                        let _ = r.poll.registry().deregister(&mut s);
                        return self.connected(r, token, Stream::Tcp(s));
                    }
                    Ok(None) if !writable => {
                        ci.pending = Some(s);
                        return Fate::Keep;
                    }
                    _ => {
                        ci.socks = None;
                        ci.deadline = None;
                        let _ = r.poll.registry().deregister(&mut s);
                        self.setup.monitor.event(
                            monitor::EVENT_CLOSED,
                            s.as_raw_fd() as u32,
                            &self.monitor_endpoint,
                        );
                        return self.retry_later(r, token);
                    }
                }
            }
        }
        if self.engine.is_none() {
            return Fate::Keep;
        }
        if readable {
            if let Some(f) = self.pump_in(r, token, false) {
                return f;
            }
        }
        // Output may be pending after reading too (the rest of the greeting, a PONG).
        if writable
            || self
                .engine
                .as_ref()
                .is_some_and(|e| e.proto.is_ready() || e.has_output())
        {
            if let Some(f) = self.pump_out(r, token) {
                return f;
            }
        }
        self.check_linger(r, token)
    }

    /// The alternative data path is readable: completions, then input, then output, until
    /// arming finds nothing new.
    fn on_alt(&mut self, r: &mut Reactor, token: u64) -> Fate {
        let mut rounds = 0;
        loop {
            let Some(e) = self.engine.as_mut() else {
                return Fate::Keep;
            };
            e.alt_process();
            // Once input has switched the stream carries only control traffic, read on its own
            // readiness. Before that, data on the path means the peer's GO was sent on the
            // stream before it: read the stream too rather than wait for its readiness.
            let alt_only = e.upgrade.as_ref().is_some_and(|u| u.input_switched());
            if let Some(f) = self.pump_in(r, token, alt_only) {
                return f;
            }
            if let Some(f) = self.pump_out(r, token) {
                return f;
            }
            let Some(e) = self.engine.as_mut() else {
                return Fate::Keep;
            };
            if !e.alt_arm() {
                break;
            }
            rounds += 1;
            if rounds >= 8 {
                // Still busy: take another turn after the other connections. Through `on_alt`
                // again: the last look may have consumed the completion event, leaving the
                // channel unarmed, and only this loop arms it again.
                self.alt_again = true;
                break;
            }
        }
        self.check_linger(r, token)
    }

    /// Registers a newly created alternative path's fd with the reactor.
    fn register_alt(&mut self, r: &mut Reactor, token: u64) -> Option<Fate> {
        let fd = self.engine.as_mut()?.upgrade.as_mut()?.take_new_fd()?;
        if r.poll
            .registry()
            .register(
                &mut mio::unix::SourceFd(&fd),
                Token((token | ALT_BIT) as usize),
                Interest::READABLE,
            )
            .is_err()
        {
            return Some(self.broken(
                r,
                token,
                Closed::Upgrade("cannot poll the RDMA completion fd".into()),
            ));
        }
        None
    }

    /// Moves the SOCKS5 handshake of the pending proxy connection on; when the tunnel is up
    /// the stream goes to the engine as a direct connection would, on failure the attempt is
    /// closed and retried later.
    fn socks_step(&mut self, r: &mut Reactor, token: u64) -> Fate {
        let Some(ci) = self.connect.as_mut() else {
            return Fate::Remove;
        };
        let (Some(s), Some(c)) = (ci.pending.as_mut(), ci.socks.as_mut()) else {
            return Fate::Keep;
        };
        let res = socks_io(s, &mut c.handshake);
        if matches!(res, Ok(false)) {
            return Fate::Keep;
        }
        ci.socks = None;
        ci.deadline = None;
        let Some(mut s) = ci.pending.take() else {
            return Fate::Keep;
        };
        let _ = r.poll.registry().deregister(&mut s);
        if res.is_ok() {
            return self.connected(r, token, Stream::Tcp(s));
        }
        self.setup.monitor.event(
            monitor::EVENT_CLOSED,
            s.as_raw_fd() as u32,
            &self.monitor_endpoint,
        );
        drop(s);
        self.retry_later(r, token)
    }

    fn on_pipe(&mut self, r: &mut Reactor, token: u64) -> Fate {
        if self.zap.is_some() {
            if let Some(f) = self.service_zap(r, token) {
                return f;
            }
        }
        // The reader let input go (or handed it back, or no longer waits for it): listen to
        // the stream again. Otherwise stay deaf, asking again to be woken (a wake-up that
        // came for an earlier change of the reader's is spent).
        if self.deaf && self.rx.as_ref().is_none_or(|x| !x.set_deaf()) {
            self.hear(r, token);
        }
        if let Some(e) = self.engine.as_ref() {
            // Reading resumes only where it had stopped for the socket's pipe; otherwise the
            // stream's own readiness drives reads (no speculative read per outgoing message).
            if e.stalled.is_some()
                || e.read_pending
                || self.rx.as_ref().is_some_and(|x| x.handed_back())
            {
                if let Some(f) = self.pump_in(r, token, false) {
                    return f;
                }
            }
            if let Some(f) = self.pump_out(r, token) {
                return f;
            }
        }
        self.check_linger(r, token)
    }

    /// Ends the session when the socket is gone and its queued messages are delivered, or when
    /// the pipe was torn down without linger (disconnect, unbind, peer pipe reaped).
    fn check_linger(&mut self, r: &mut Reactor, token: u64) -> Fate {
        let Some(p) = &self.pipe else {
            return if self.socket_closed {
                Fate::Remove
            } else {
                Fate::Keep
            };
        };
        if !p.from_socket.writer_closed() && !self.socket_closed {
            return Fate::Keep;
        }
        match p.from_socket.linger_deadline() {
            None if p.from_socket.writer_closed() => Fate::Remove,
            Some(Some(d)) if d <= Instant::now() => Fate::Remove,
            linger => {
                if let Some(Some(d)) = linger {
                    r.schedule(d, token);
                }
                let drained = p.from_socket.is_finished()
                    && self.engine.as_ref().is_none_or(|e| !e.has_output());
                if drained {
                    Fate::Remove
                } else {
                    Fate::Keep
                }
            }
        }
    }

    /// Reads from the stream into the socket's pipe.
    /// Moves what arrived to the socket's pipe; with `alt_only`, only from the alternative path
    /// (the stream is read on its own readiness once input has switched).
    fn pump_in(&mut self, r: &mut Reactor, token: u64, alt_only: bool) -> Option<Fate> {
        // Output is granted when input arrives (a reply), before it is delivered: an
        // application woken by it sends its next request itself, without waiting for this turn
        // to end. Streams of sends with nothing coming back keep the I/O thread's batching.
        if !self.rx_reclaim() {
            // The socket is reading the stream itself; it looks again when it lets go, or,
            // holding input between receives, when it has taken what it read. A reader that
            // does not come back is checked on by a timer.
            if self.held_seen.is_none() {
                if let Some(rx) = self.rx.as_ref() {
                    self.held_seen = Some(rx.claims());
                    r.schedule(Instant::now() + crate::direct::hold_stale(), token);
                }
            }
            // Held between receives (or offered to a socket that will take it): every arrival
            // of the stream would wake this thread for nothing; stop listening until the
            // reader lets go (or the timer takes it back).
            if !self.deaf
                && self
                    .rx
                    .as_ref()
                    .is_some_and(|x| x.is_held() || x.offered_wanted())
            {
                self.go_deaf(r, token);
            }
            return None;
        }
        self.direct_grant(r);
        let now = Instant::now();
        let mut newly_ready: Option<zmtp::Peer> = None;
        // Got ahead of a socket that receives with blocking calls (a message stalled on its
        // full pipe): deliver what was decoded, then hand input to the socket instead of
        // reading on, so the stream does not stay on this thread for good.
        let yield_input = !alt_only
            && self.zap.is_none()
            && r.shared.streams.load(Ordering::SeqCst) == 1
            && self.rx.as_ref().is_some_and(|x| x.is_wanted())
            && self.engine.as_ref().is_some_and(|e| e.stalled.is_some());
        if let Some(e) = self.engine.as_mut() {
            e.yield_unstalled = yield_input;
        }
        let mut delivered = false;
        let progress = {
            let engine = self.engine.as_mut()?;
            // Both callbacks below write to the pipe; the engine never runs them together.
            let pipe = std::cell::RefCell::new(&mut self.pipe);
            let mut deliver = |ev: zmtp::Event| -> Option<Msg> {
                match ev {
                    zmtp::Event::Ready(peer) => {
                        newly_ready = Some(peer);
                        None
                    }
                    // Upgrade commands are the engine's; none reach here.
                    zmtp::Event::Command(_) => None,
                    zmtp::Event::Message(m) => match pipe.borrow_mut().as_mut() {
                        Some(p) => match p.to_socket.try_write_deferred(m) {
                            Ok(()) => {
                                delivered = true;
                                None
                            }
                            Err((_, WriteError::Closed)) => None,
                            Err((m, WriteError::Full)) => Some(m),
                        },
                        // Not attached yet (handshake event comes first): keep it.
                        None => Some(m),
                    },
                }
            };
            let mut flush = || {
                if let Some(p) = pipe.borrow_mut().as_mut() {
                    p.to_socket.flush();
                }
            };
            let p = engine.on_readable(now, alt_only, &mut deliver, &mut flush);
            flush();
            if let Some(peer) = newly_ready.take() {
                // Handshake finished mid-read: attach, then go on delivering.
                Some((p, Some(peer)))
            } else {
                Some((p, None))
            }
        };
        let (p, peer) = progress?;
        self.delivered_since_out |= delivered;
        let yielded = yield_input
            && self
                .engine
                .as_mut()
                .is_some_and(|e| !std::mem::replace(&mut e.yield_unstalled, false));
        if let Some(f) = self.register_alt(r, token) {
            return Some(f);
        }
        if let Some(peer) = peer {
            if let Some(f) = self.handshake_done(r, token, peer) {
                return Some(f);
            }
            // Deliver whatever was decoded after READY.
            return self.pump_in(r, token, false);
        }
        match p {
            Progress::Open => {
                if let Some(e) = self.engine.as_ref() {
                    if let Some(at) = e.proto.poll_timeout() {
                        r.schedule(at, token);
                    }
                }
                if self.zap.is_none() && r.shared.streams.load(Ordering::SeqCst) == 1 {
                    // The reply to what was just delivered may come straight back: output to
                    // the writer, input to the reader, each when idle (only a connection alone
                    // on its I/O thread is read by its socket, see crate::direct).
                    self.direct_grant(r);
                    self.rx_offer(r, token, yielded);
                    if !delivered && self.rx.as_ref().is_some_and(|x| x.offered_wanted()) {
                        // A socket that waits for this input may be asleep on its mailbox (its
                        // claim came while this thread was reading) and nothing delivered here
                        // wakes it: tell it input is its to take.
                        if let Some(p) = self.pipe.as_ref() {
                            p.to_socket.poke_reader();
                        }
                    }
                }
                if yielded {
                    if self.rx.as_ref().is_some_and(|x| x.offered_wanted()) {
                        // The socket takes the stream in its next receive; a timer checks
                        // that it comes.
                        if let Some(rx) = self.rx.as_ref() {
                            self.held_seen = Some(rx.claims());
                            r.schedule(Instant::now() + crate::direct::hold_stale(), token);
                        }
                        self.go_deaf(r, token);
                    } else if let Some(e) = self.engine.as_mut() {
                        // Not handed over: read on (nothing else would, the stream's data
                        // having arrived while this thread was stalled).
                        e.read_pending = true;
                    }
                }
                self.service_zap(r, token)
            }
            Progress::Closed(c) => Some(self.broken(r, token, c)),
        }
    }

    /// Runs the ZAP exchange of a handshake that waits on it ([`crate::zap`]).
    fn service_zap(&mut self, r: &mut Reactor, token: u64) -> Option<Fate> {
        let target = self.target(r, token);
        let Some(Proto::Zmtp(conn)) = self.engine.as_mut().map(|e| &mut e.proto) else {
            return None;
        };
        let step = crate::zap::service(
            &mut self.zap,
            conn,
            &self.setup.ctx,
            || target,
            &self.setup.monitor,
            &self.endpoint,
        );
        match step {
            crate::zap::Step::Idle => None,
            crate::zap::Step::Progress => Some(self.on_ready(r, token, true, true)),
            crate::zap::Step::Failed(e) => Some(self.broken(r, token, Closed::Protocol(e))),
        }
    }

    fn handshake_done(&mut self, r: &mut Reactor, token: u64, peer: zmtp::Peer) -> Option<Fate> {
        self.handshaken = true;
        self.setup.monitor.event(
            monitor::EVENT_HANDSHAKE_SUCCEEDED,
            0,
            &self.monitor_endpoint,
        );
        // libzmq's private "__fd" property carries the connection's fd (zmq_msg_get ZMQ_SRCFD).
        let md = match self.engine.as_mut() {
            Some(e) if matches!(e.proto, Proto::Raw(_)) => {
                let mut m = (*peer.metadata).clone();
                m.insert("__fd", e.fd().to_string().as_bytes());
                let m = Arc::new(m);
                e.proto.set_raw_metadata(m.clone());
                m
            }
            _ => peer.metadata,
        };
        match &self.pipe {
            Some(p) => {
                p.to_socket.set_peer(md);
            }
            None => {
                // Accepted connection, or IMMEDIATE connect: the pipe starts now.
                let o = &self.setup.options;
                let conflate = o.effective_conflate();
                let (to_peer_w, to_peer_r) = pipe::pipe_with(o.sndhwm.max(0) as u64, conflate);
                let (from_peer_w, from_peer_r) = pipe::pipe_with(o.rcvhwm.max(0) as u64, conflate);
                from_peer_w.set_peer(md.clone());
                let t = self.target(r, token);
                from_peer_w.set_target(t.clone());
                to_peer_r.set_target(t);
                let mut entry = PipeEntry::new(from_peer_r, to_peer_w);
                entry.peer = Some(md);
                entry.endpoint = Some(self.endpoint.clone());
                if let Some(rid) = &self.setup.connect_routing_id {
                    entry.routing_id = rid.clone();
                    entry.connect_routing_id = Some(rid.clone());
                }
                let id = self.setup.socket.reserve_pipe_id();
                self.setup.socket.attach(Attach { entry, id });
                self.pipe = Some(PeerPipe {
                    to_socket: from_peer_w,
                    from_socket: to_peer_r,
                });
            }
        }
        let _ = r;
        None
    }

    /// Moves messages from the socket's pipe to the stream.
    fn pump_out(&mut self, r: &mut Reactor, token: u64) -> Option<Fate> {
        let engine = self.engine.as_mut()?;
        if let (Some(d), Some(p)) = (&self.direct, &self.pipe) {
            // Output granted, nothing queued anywhere: leave it to the writer (a readiness
            // event is no reason to take it back).
            if d.left_to_writer() && !engine.has_output() && p.from_socket.is_idle() {
                return None;
            }
        }
        let drop_partial = &mut self.drop_partial;
        let moved = &mut self.last_moved;
        *moved = 0;
        if !*drop_partial && crate::pipe::framed_enabled() && engine.takes_framed() {
            if let Some(p) = self.pipe.as_mut() {
                // Small frames come encoded from now on (see crate::pipe::Reader::read_framed).
                p.from_socket.request_framed();
                r.shared.work.fetch_add(1, Ordering::SeqCst);
                let pipe = &mut self.pipe;
                let nap = framed_nap();
                let mut napped = std::time::Duration::ZERO;
                // Replies to what this writer sent may be what it waits for: no empty-lane nap.
                let mut napped_empty =
                    !framed_nap_empty() || std::mem::take(&mut self.delivered_since_out);
                let progress = engine.on_writable_framed(&mut |budget, sink| {
                    let reader = &mut pipe.as_mut()?.from_socket;
                    // A stream (this pass already wrote a batch) with little waiting: let the
                    // writer add to it before the next write, so writes and the peer's
                    // wake-ups stay few (bounded per pass). Nothing waiting: the writer may
                    // just be slower than this thread, or the stream ended; one nap tells
                    // (going idle and being woken for the next message costs more than it).
                    let backlog = reader.framed_backlog();
                    if !nap.is_zero()
                        && *moved >= NAP_AFTER_MSGS
                        && napped < NAP_PER_PASS
                        && backlog < NAP_BELOW_BYTES
                        && (backlog > 0 || !napped_empty)
                    {
                        napped_empty |= backlog == 0;
                        // A writer waiting on the high-water mark must not wait out the nap.
                        reader.publish_now();
                        let t = std::time::Instant::now();
                        std::thread::sleep(nap);
                        napped += t.elapsed();
                    }
                    let n = reader.read_framed(budget, sink)?;
                    *moved += n;
                    Some(n)
                });
                r.shared.work.fetch_sub(1, Ordering::SeqCst);
                match progress {
                    Some(Progress::Open) => {
                        self.park_if_idle();
                        return None;
                    }
                    Some(Progress::Closed(c)) => return Some(self.broken(r, token, c)),
                    None => {}
                }
            }
        }
        let mut next = || -> Option<Msg> {
            let p = self.pipe.as_mut()?;
            loop {
                let m = p.from_socket.read()?;
                if *drop_partial {
                    *drop_partial = m.more();
                    continue;
                }
                *moved += usize::from(!m.more());
                return Some(m);
            }
        };
        // Messages this pass takes may have been sent before a direct send on another
        // connection of this thread: that one waits until they are written.
        r.shared.work.fetch_add(1, Ordering::SeqCst);
        let progress = engine.on_writable(&mut next);
        r.shared.work.fetch_sub(1, Ordering::SeqCst);
        match progress {
            Progress::Open => {
                self.park_if_idle();
                None
            }
            Progress::Closed(c) => Some(self.broken(r, token, c)),
        }
    }

    /// After a pass that wrote everything, found nothing queued and moved at most one message:
    /// output is idle, and a reply to input the socket reads itself may go out directly.
    fn park_if_idle(&self) {
        if let (Some(d), Some(e), Some(p), Some(_)) = (
            &self.direct,
            self.engine.as_ref(),
            self.pipe.as_ref(),
            self.rx.as_ref(),
        ) {
            if self.last_moved <= 1 && e.direct_capable() && p.from_socket.is_idle() {
                d.park();
            }
        }
    }

    /// The connection ended: report it, then reconnect (connect side) or end (accepted side).
    fn broken(&mut self, r: &mut Reactor, token: u64, why: Closed) -> Fate {
        self.direct_kill();
        let Some(mut e) = self.engine.take() else {
            return Fate::Keep;
        };
        self.uncount(r);
        let fd = e.fd();
        let _ = r.poll.registry().deregister(e.stream.source());
        end_alt(r, &mut e, &why);
        self.zap = None;
        // Refused by authentication (ZAP said no, or the peer sent ERROR): as libzmq, whose
        // session terminates on a protocol error, a connecting session does not try again.
        let mut refused = false;
        if !self.handshaken {
            let rejected = matches!(&e.proto, Proto::Zmtp(z) if z.is_rejected());
            refused =
                rejected || matches!(&why, Closed::Protocol(zmtp::ZmtpError::PeerError { .. }));
            // (RDMA required and not possible: NO_DETAIL with EPROTONOSUPPORT, before any
            // message moved.)
            if let Some((ev, val)) = crate::zap::handshake_failure_event(&why, rejected) {
                self.setup.monitor.event(ev, val, &self.monitor_endpoint);
            }
        }
        self.setup.monitor.event(
            monitor::EVENT_DISCONNECTED,
            fd as u32,
            &self.monitor_endpoint,
        );
        let stream_notify =
            self.setup.socket_type == SocketType::Stream && self.setup.options.stream_notify;
        drop(e);
        if self.connect.is_none()
            || refused
            || self.setup.options.immediate
            || self.setup.socket_type == SocketType::Stream
        {
            // The pipe dies with the connection.
            if let Some(p) = self.pipe.take() {
                let PeerPipe {
                    mut to_socket,
                    from_socket,
                } = p;
                if stream_notify && self.handshaken {
                    let _ = to_socket.try_write(Msg::new());
                }
                drop(from_socket);
                drop(to_socket);
            }
            if self.connect.is_none() || refused {
                return Fate::Remove;
            }
        } else if let Some(p) = &mut self.pipe {
            // A multipart message cut in half is not resent: skip what remains of it.
            self.drop_partial = p.from_socket.in_multipart();
            p.to_socket.rollback();
        }
        self.handshaken = false;
        if self.socket_closed {
            if let Some(p) = &self.pipe {
                if p.from_socket.is_finished() {
                    return Fate::Remove;
                }
            } else {
                return Fate::Remove;
            }
        }
        self.retry_later(r, token)
    }

    /// Final cleanup when the session is removed.
    fn teardown(&mut self, r: &mut Reactor, token: u64) {
        self.direct_kill();
        if let Some(mut e) = self.engine.take() {
            self.uncount(r);
            let _ = r.poll.registry().deregister(e.stream.source());
            end_alt(r, &mut e, &Closed::Local);
            if self.handshaken || self.connect.is_none() {
                self.setup.monitor.event(
                    monitor::EVENT_DISCONNECTED,
                    e.fd() as u32,
                    &self.monitor_endpoint,
                );
            }
        }
        if let Some(ci) = self.connect.as_mut() {
            if let Some(mut s) = ci.pending.take() {
                let _ = r.poll.registry().deregister(&mut s);
            }
        }
        self.pipe = None;
        if let Some(l) = self.listener {
            if let Some(Object::Listener(li)) = r.objects.get_mut(&l) {
                li.sessions.retain(|&t| t != token);
            }
        }
    }
}

/// Deregisters a connection's alternative path (before it is dropped) and logs its counters.
fn end_alt(r: &mut Reactor, e: &mut Engine, why: &Closed) {
    if let Some(u) = e.upgrade.as_ref() {
        if let Some(fd) = u.fd() {
            let _ = r.poll.registry().deregister(&mut mio::unix::SourceFd(&fd));
            let why = match why {
                Closed::Eof => "peer closed".to_string(),
                Closed::Io(e) => format!("I/O error: {e}"),
                Closed::Protocol(e) => format!("protocol error: {e}"),
                Closed::Local => "closed here".to_string(),
                Closed::Upgrade(w) => w.clone(),
                Closed::Alt(e) => format!("RDMA failure: {e}"),
            };
            u.report_end(&why);
        }
    }
}

fn tcp_connect(
    src: Option<SocketAddr>,
    dst: SocketAddr,
    o: &Options,
) -> io::Result<mio::net::TcpStream> {
    let domain = socket2::Domain::for_address(dst);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM.cloexec(), None)?;
    apply_tcp_options(&s, o);
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

/// Runs a SOCKS5 handshake on a non-blocking stream as far as it goes: `Ok(true)` when the
/// tunnel is up, `Ok(false)` when the stream would block, an error when the attempt failed (the
/// proxy closed, an I/O error, or a [`socks::SocksError`] as `InvalidData`).
fn socks_io(s: &mut mio::net::TcpStream, h: &mut socks::Handshake) -> io::Result<bool> {
    use std::io::{Read, Write};
    let mut buf = [0u8; socks::MAX_READ];
    loop {
        if h.is_done() {
            return Ok(true);
        }
        let out = h.output();
        if !out.is_empty() {
            match s.write(out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => h.consume_output(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        let want = h.wanted().min(buf.len());
        if want == 0 {
            return Err(io::ErrorKind::InvalidData.into());
        }
        match s.read(&mut buf[..want]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                h.feed(&buf[..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn same_host_is_loopback_or_one_address_on_both_ends() {
        assert!(is_same_host(&addr("127.0.0.1:1"), &addr("127.0.0.1:2")));
        assert!(is_same_host(&addr("127.0.0.5:1"), &addr("127.0.0.9:2")));
        assert!(is_same_host(&addr("[::1]:1"), &addr("[::1]:2")));
        assert!(is_same_host(&addr("10.0.0.1:1"), &addr("10.0.0.1:2")));
        // A dual-stack listener sees an IPv4 peer as v4-mapped.
        assert!(is_same_host(
            &addr("[::ffff:10.0.0.1]:1"),
            &addr("10.0.0.1:2")
        ));
        assert!(is_same_host(
            &addr("[::ffff:127.0.0.1]:1"),
            &addr("[::ffff:127.0.0.1]:2")
        ));
        assert!(!is_same_host(&addr("10.0.0.1:1"), &addr("10.0.0.2:2")));
        assert!(!is_same_host(&addr("[fe80::1]:1"), &addr("[fe80::2]:2")));
    }

    #[test]
    fn a_loopback_connection_gets_the_local_congestion_control() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        // reno is built into every kernel and always allowed.
        assert!(tune_same_host_with(&c, b"reno"));
        assert!(tune_same_host_with(&a, b"reno"));
        assert_eq!(congestion_control(c.as_raw_fd()).unwrap(), "reno");
        assert_eq!(congestion_control(a.as_raw_fd()).unwrap(), "reno");
        // An algorithm the kernel does not have is refused and changes nothing.
        assert!(!tune_same_host_with(&c, b"no-such-cc"));
        assert_eq!(congestion_control(c.as_raw_fd()).unwrap(), "reno");
    }

    #[test]
    fn an_unconnected_socket_is_left_alone() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let before = congestion_control(l.as_raw_fd()).unwrap();
        // A listener has no peer: not a same-host connection.
        assert!(!tune_same_host_with(&l, b"reno"));
        assert_eq!(congestion_control(l.as_raw_fd()).unwrap(), before);
        assert!(congestion_control(-1).is_err());
    }
}

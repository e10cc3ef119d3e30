//! Endpoint parsing and address resolution, as libzmq 4.3.5 does it.
//!
//! [`parse`] splits `"<transport>://<address>"` the way `socket_base_t::parse_uri` and
//! `check_protocol` do; nothing is resolved at that point. Resolution follows libzmq's
//! `tcp_address_t::resolve` / `ip_resolver_t` (port rules, `[ipv6]` brackets, `%zone` ids,
//! `*` wildcard, interface names through `getifaddrs`, `getaddrinfo` with libzmq's hints) and
//! `ipc_address_t::resolve` (path length, abstract `@name`). No I/O is done here except name
//! resolution and, for `ipc://*`, creating the temporary directory libzmq creates.
//!
//! Behaviours of libzmq 4.3.5 reproduced here (and which the socket layer must follow):
//!
//! | case | libzmq 4.3.5 |
//! |---|---|
//! | no `"://"`, empty transport or empty address | `EINVAL` |
//! | transport not `tcp`/`ipc`/`inproc` (and not `udp`), e.g. `pgm`, `epgm`, `norm`, `vmci`, `ws`, `wss`, `tipc`, or any case variant such as `TCP` | `EPROTONOSUPPORT` (libzmq built without those transports) |
//! | `udp://` on a socket type other than RADIO/DISH/DGRAM (checked at bind/connect, `socket/endpoints.rs`) | `ENOCOMPATPROTO`: `udp` is always a known transport in 4.3.5 |
//! | tcp bind: `host:port`, `*:port`, `*:*`, `host:0`, `host:*` | port `*` and `0` mean an ephemeral port |
//! | tcp port text | parsed with C `atoi` then cast to `uint16_t`; a result of 0 (`"abc"`, `"65536"`) is `EINVAL`; missing `:` is `EINVAL` |
//! | tcp bind resolution failure (unknown host or interface) | `ENODEV` |
//! | tcp connect | `zmq_connect` only runs a syntax check (`EINVAL`, see [`TcpEndpoint::check_connect_syntax`]); name resolution happens later, asynchronously, in the connecter, and failures there just trigger reconnects |
//! | tcp connect port `*` | `EINVAL` |
//! | `src;dst` on connect | the source is resolved like a bind address but numerically only (no DNS), interface names allowed; it needs a port too (`eth0:0;host:port`, while `eth0;host:port` is `EINVAL`) |
//! | interface names | only for bind addresses and connect source addresses; the interface's first address of the wanted family (IPv6 when the socket's `ZMQ_IPV6` is set, IPv4 otherwise) |
//! | `ZMQ_IPV6=0` | only IPv4 addresses resolve (`getaddrinfo` with `AF_INET`); `[::1]` then fails |
//! | `ZMQ_IPV6=1` | `getaddrinfo` with `AF_INET6 \| AI_V4MAPPED`: IPv4 literals become `::ffff:a.b.c.d`; `*` is `[::]`, which the socket layer must make dual-stack (`IPV6_V6ONLY=0`) |
//! | `%zone` suffix | interface name (if it starts with a letter) or number; unknown or 0 is `EINVAL`; it always overwrites the IPv6 scope id |
//! | tcp `LAST_ENDPOINT` after bind | from `getsockname`: `tcp://127.0.0.1:41234`, `tcp://[::1]:5555`, `tcp://[::ffff:127.0.0.1]:5555` ([`tcp_last_endpoint`]) |
//! | tcp `LAST_ENDPOINT` after connect | `tcp://` + the address text verbatim ([`TcpEndpoint::connect_last_endpoint`]) |
//! | ipc path of 108 bytes or more (`sizeof sun_path`) | `ENAMETOOLONG` |
//! | `ipc://@` (abstract with empty name) | `EINVAL` |
//! | `ipc://@name` | Linux abstract namespace; `LAST_ENDPOINT` keeps the `@` |
//! | `ipc://*` (any path starting with `*`, unless `ZMQ_USE_FD` is set) | `mkdtemp("$TMPDIR/tmpXXXXXX")` (else `$TEMPDIR`, `$TMP`; with none of them set, relative to the current directory), socket file `<dir>/socket` |
//! | ipc `LAST_ENDPOINT` | `ipc://` + the path as given (not made absolute) |
//! | inproc `LAST_ENDPOINT` | the endpoint string verbatim |

use std::ffi::{CStr, CString};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::path::PathBuf;

use crate::error::{Error, Result};

/// The size of `sockaddr_un::sun_path` on Linux; ipc paths must be shorter.
pub(crate) const IPC_PATH_MAX: usize = 108;

/// A parsed endpoint: the transport and its (not yet resolved) address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Endpoint {
    /// `tcp://<address>`.
    Tcp(TcpEndpoint),
    /// `ipc://<path>`.
    Ipc(IpcEndpoint),
    /// `inproc://<name>`; holds the name after `inproc://`.
    Inproc(String),
    /// `udp://<address>`; holds the text after `udp://` (resolved by `transport::udp`).
    Udp(String),
}

/// Parses `"<transport>://<address>"` with libzmq's `parse_uri` and `check_protocol` rules.
///
/// Errors: `EINVAL` when `"://"` is missing or either side of it is empty, `EPROTONOSUPPORT` for a
/// transport libzmq (as we build it) does not know. (`udp` parses; only the draft RADIO, DISH
/// and DGRAM socket types may use it, which bind and connect check.) As with a C string, the text ends at the first NUL.
pub(crate) fn parse(addr: &str) -> Result<Endpoint> {
    let addr = addr.split('\0').next().unwrap_or("");
    let pos = addr.find("://").ok_or(Error::Inval)?;
    let (protocol, rest) = (&addr[..pos], &addr[pos + 3..]);
    if protocol.is_empty() || rest.is_empty() {
        return Err(Error::Inval);
    }
    match protocol {
        "tcp" => Ok(Endpoint::Tcp(TcpEndpoint::new(rest))),
        // rzmq's own: a tcp connection that must move its messages to RDMA (or fail).
        "rdma" => Ok(Endpoint::Tcp(TcpEndpoint {
            rdma: true,
            ..TcpEndpoint::new(rest)
        })),
        "ipc" => Ok(Endpoint::Ipc(IpcEndpoint::new(rest))),
        "inproc" => Ok(Endpoint::Inproc(rest.to_owned())),
        "udp" => Ok(Endpoint::Udp(rest.to_owned())),
        _ => Err(Error::ProtoNoSupport),
    }
}

impl Endpoint {
    /// Same as [`parse`].
    pub(crate) fn parse(addr: &str) -> Result<Endpoint> {
        parse(addr)
    }

    /// The transport name: `"tcp"`, `"ipc"`, `"inproc"` or `"udp"`.
    pub(crate) fn protocol(&self) -> &'static str {
        match self {
            Endpoint::Tcp(_) => "tcp",
            Endpoint::Ipc(_) => "ipc",
            Endpoint::Inproc(_) => "inproc",
            Endpoint::Udp(_) => "udp",
        }
    }

    /// The endpoint string as given (`"<transport>://<address>"`).
    pub(crate) fn uri(&self) -> String {
        match self {
            Endpoint::Tcp(t) if t.is_rdma() => format!("rdma://{}", t.address()),
            Endpoint::Tcp(t) => format!("tcp://{}", t.address()),
            Endpoint::Ipc(i) => format!("ipc://{}", i.path()),
            Endpoint::Inproc(n) => format!("inproc://{n}"),
            Endpoint::Udp(a) => format!("udp://{a}"),
        }
    }
}

/// A `tcp://` address, kept as text until it is resolved for a bind or a connect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TcpEndpoint {
    address: String,
    rdma: bool,
}

impl TcpEndpoint {
    /// Wraps the text after `tcp://` (`"host:port"`, `"src;host:port"`, `"[::1]:5555"`...).
    pub(crate) fn new(address: &str) -> TcpEndpoint {
        TcpEndpoint {
            address: address.to_owned(),
            rdma: false,
        }
    }

    /// True for an `rdma://` endpoint: tcp whose connections must upgrade to RDMA.
    pub(crate) fn is_rdma(&self) -> bool {
        self.rdma
    }

    /// The address text after `tcp://`, verbatim.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// The source part of a `"src;dst"` address (before the last `;`), if any.
    pub(crate) fn source(&self) -> Option<&str> {
        self.address.rfind(';').map(|p| &self.address[..p])
    }

    /// The destination part of the address (after the last `;`, or all of it).
    pub(crate) fn target(&self) -> &str {
        match self.address.rfind(';') {
            Some(p) => &self.address[p + 1..],
            None => &self.address,
        }
    }

    /// The quick syntax check `zmq_connect` runs on tcp addresses before deferring resolution.
    ///
    /// The first character must be alphanumeric, `[` or `:`; the others alphanumeric or one of
    /// `.-:%;[]_*`; and the text after the last `:` must start with a digit (so `*` ports and
    /// `*` hosts are refused). Anything else is `EINVAL`.
    pub(crate) fn check_connect_syntax(&self) -> Result<()> {
        let b = self.address.as_bytes();
        let mut i = 0;
        if let Some(&c) = b.first() {
            if c.is_ascii_alphanumeric() || c == b'[' || c == b':' {
                i = 1;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || matches!(
                            b[i],
                            b'.' | b'-' | b':' | b'%' | b';' | b'[' | b']' | b'_' | b'*'
                        ))
                {
                    i += 1;
                }
            }
        }
        if i != b.len() {
            return Err(Error::Inval);
        }
        match self.address.rfind(':') {
            Some(p) if b.get(p + 1).is_some_and(u8::is_ascii_digit) => Ok(()),
            _ => Err(Error::Inval),
        }
    }

    /// Resolves the address for a bind (`tcp_address_t::resolve` with `local = true`).
    ///
    /// `*` is the any address (`0.0.0.0`, or `[::]` when `ipv6`), interface names are looked up
    /// with `getifaddrs`, host names with `getaddrinfo`; port `*` or `0` is ephemeral. A source part
    /// (`src;dst`) is resolved and checked but ignored, as libzmq does. Unknown hosts and
    /// interfaces are `ENODEV`; port errors `EINVAL`.
    pub(crate) fn resolve_bind(&self, ipv6: bool) -> Result<SocketAddr> {
        resolve_tcp(&self.address, true, ipv6).map(|(_, addr)| addr)
    }

    /// Resolves the address for a connect (`tcp_address_t::resolve` with `local = false`).
    ///
    /// Returns the optional source address (`"src;dst"` form: numeric host or interface name, port
    /// `*`/`0` ephemeral) and the destination (host names resolved, port `*` refused). Failures
    /// are `EINVAL` for the destination and `ENODEV` for the source. libzmq calls this in the
    /// connecter, not in `zmq_connect` (which only runs [`Self::check_connect_syntax`]).
    pub(crate) fn resolve_connect(&self, ipv6: bool) -> Result<(Option<SocketAddr>, SocketAddr)> {
        resolve_tcp(&self.address, false, ipv6)
    }

    /// `ZMQ_LAST_ENDPOINT` after a tcp connect: `"tcp://"` plus the address text verbatim.
    pub(crate) fn connect_last_endpoint(&self) -> String {
        format!("tcp://{}", self.address)
    }
}

/// Formats a resolved address as libzmq's `ZMQ_LAST_ENDPOINT` for tcp (`tcp_address_t::to_string`).
///
/// `tcp://a.b.c.d:port` for IPv4, `tcp://[v6]:port` for IPv6 (numeric host as `getnameinfo`
/// with `NI_NUMERICHOST` writes it, so `::ffff:127.0.0.1` for a mapped address and a `%scope`
/// suffix, an interface name for link-local addresses, when the scope id is set).
pub(crate) fn tcp_last_endpoint(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("tcp://{}:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => {
            let mut host = a.ip().to_string();
            if a.scope_id() != 0 {
                host.push('%');
                host.push_str(&scope_to_string(a.ip(), a.scope_id()));
            }
            format!("tcp://[{}]:{}", host, a.port())
        }
    }
}

/// How [`resolve_ip`] resolves a name: the options of libzmq's `ip_resolver_options_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ResolveOpts {
    /// A local (bind) address: `*` is the any address, `getaddrinfo` gets `AI_PASSIVE`, failures are `ENODEV`.
    pub bindable: bool,
    /// Try the name as a network interface name first (`getifaddrs`).
    pub allow_nic_name: bool,
    /// Resolve to IPv6 (IPv4 as mapped addresses) rather than IPv4 only.
    pub ipv6: bool,
    /// The name ends in `:port` (port `*` only when `bindable`, `0` always allowed).
    pub expect_port: bool,
    /// Allow DNS names; otherwise only numeric hosts (`AI_NUMERICHOST`).
    pub allow_dns: bool,
}

/// Resolves `name` to a socket address exactly as libzmq's `ip_resolver_t::resolve` does.
///
/// Errors: `EINVAL` for a missing or bad port, an empty or unknown `%zone`, and failed
/// non-bindable lookups; `ENODEV` for failed bindable lookups; `ENOMEM` if `getaddrinfo` ran out
/// of memory.
pub(crate) fn resolve_ip(name: &str, opts: &ResolveOpts) -> Result<SocketAddr> {
    let (mut addr, port) = if opts.expect_port {
        let delim = name.rfind(':').ok_or(Error::Inval)?;
        let port_str = &name[delim + 1..];
        let port = if port_str == "*" {
            if !opts.bindable {
                return Err(Error::Inval);
            }
            0
        } else if port_str == "0" {
            0
        } else {
            // C: static_cast<uint16_t> (atoi (port_str)); 0 is not a valid port.
            let port = c_atoi(port_str) as u16;
            if port == 0 {
                return Err(Error::Inval);
            }
            port
        };
        (&name[..delim], port)
    } else {
        (name, 0)
    };

    if addr.len() >= 2 && addr.starts_with('[') && addr.ends_with(']') {
        addr = &addr[1..addr.len() - 1];
    }

    let mut zone_id: u32 = 0;
    if let Some(pos) = addr.rfind('%') {
        let if_str = &addr[pos + 1..];
        if if_str.is_empty() {
            return Err(Error::Inval);
        }
        addr = &addr[..pos];
        zone_id = if if_str.as_bytes()[0].is_ascii_alphabetic() {
            if_nametoindex(if_str)
        } else {
            c_atoi(if_str) as u32
        };
        if zone_id == 0 {
            return Err(Error::Inval);
        }
    }

    let mut resolved = if opts.bindable && addr == "*" {
        if opts.ipv6 {
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0))
        } else {
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        }
    } else {
        let nic = if opts.allow_nic_name {
            nic_address(addr, opts.ipv6)
        } else {
            None
        };
        match nic {
            Some(a) => a,
            None => getaddrinfo_first(addr, opts)?,
        }
    };

    resolved.set_port(port);
    if let SocketAddr::V6(a) = &mut resolved {
        a.set_scope_id(zone_id);
    }
    Ok(resolved)
}

/// `tcp_address_t::resolve`: an optional `src;` part, then the destination.
fn resolve_tcp(name: &str, local: bool, ipv6: bool) -> Result<(Option<SocketAddr>, SocketAddr)> {
    let (source, name) = match name.rfind(';') {
        Some(p) => {
            let src_opts = ResolveOpts {
                bindable: true,
                allow_dns: false,
                allow_nic_name: true,
                ipv6,
                expect_port: true,
            };
            (Some(resolve_ip(&name[..p], &src_opts)?), &name[p + 1..])
        }
        None => (None, name),
    };
    let opts = ResolveOpts {
        bindable: local,
        allow_dns: true,
        allow_nic_name: local,
        ipv6,
        expect_port: true,
    };
    Ok((source, resolve_ip(name, &opts)?))
}

/// C's `atoi` as glibc implements it: `(int) strtol (s, NULL, 10)`.
pub(crate) fn c_atoi(s: &str) -> i32 {
    c_strtol(s) as i32
}

/// C's `strtol (s, NULL, 10)` on an LP64 target: leading white space, a sign, decimal digits,
/// saturating at the `long` range; 0 when there are no digits.
pub(crate) fn c_strtol(s: &str) -> i64 {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let mut v: i128 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = (v * 10 + i128::from(b[i] - b'0')).min(i128::from(i64::MAX) + 1);
        i += 1;
    }
    let v = if neg { -v } else { v };
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// `if_nametoindex`, 0 when there is no such interface.
fn if_nametoindex(name: &str) -> u32 {
    let Ok(c) = CString::new(name) else { return 0 };
    // SAFETY: c is a valid NUL-terminated string for the duration of the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// The scope of an IPv6 address as `getnameinfo` prints it: the interface name for link-local
/// scopes (when the index names an interface), else the number.
fn scope_to_string(ip: &Ipv6Addr, scope_id: u32) -> String {
    let seg0 = ip.segments()[0];
    let link_local = (seg0 & 0xffc0) == 0xfe80 || (seg0 & 0xff0f) == 0xff02;
    if link_local {
        let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: buf has IF_NAMESIZE bytes, the size if_indextoname requires.
        let p = unsafe { libc::if_indextoname(scope_id, buf.as_mut_ptr()) };
        if !p.is_null() {
            // SAFETY: on success if_indextoname wrote a NUL-terminated name into buf.
            return unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned();
        }
    }
    scope_id.to_string()
}

/// Converts a `sockaddr` of family `AF_INET` or `AF_INET6` to a std address.
///
/// # Safety
/// `sa` must be null or point to a valid socket address whose storage is at least as large as
/// the structure its `sa_family` announces.
unsafe fn sockaddr_to_std(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: sa is non-null and valid per the function contract.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in; read unaligned to be safe.
            let sin = unsafe { std::ptr::read_unaligned(sa as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6; read unaligned to be safe.
            let sin6 = unsafe { std::ptr::read_unaligned(sa as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The first address of the wanted family (IPv6 if `ipv6`, else IPv4) of the interface `name`,
/// as libzmq's `resolve_nic_name` finds it with `getifaddrs`; `None` (libzmq's `ENODEV`) if
/// there is no such interface or address.
fn nic_address(name: &str, ipv6: bool) -> Option<SocketAddr> {
    let want = if ipv6 { libc::AF_INET6 } else { libc::AF_INET };
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into ifa on success; we free it below.
    let rc = unsafe { libc::getifaddrs(&mut ifa) };
    if rc != 0 {
        return None;
    }
    let mut found = None;
    let mut p = ifa;
    while !p.is_null() {
        // SAFETY: p is a node of the list getifaddrs returned, valid until freeifaddrs.
        let node = unsafe { &*p };
        p = node.ifa_next;
        if node.ifa_addr.is_null() || node.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr owned by the list.
        let family = i32::from(unsafe { (*node.ifa_addr).sa_family });
        // SAFETY: ifa_name is a non-null NUL-terminated string owned by the list.
        let ifname = unsafe { CStr::from_ptr(node.ifa_name) };
        if family == want && ifname.to_bytes() == name.as_bytes() {
            // SAFETY: ifa_addr is valid and its family (checked) gives its layout.
            found = unsafe { sockaddr_to_std(node.ifa_addr) };
            break;
        }
    }
    // SAFETY: ifa came from a successful getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(ifa) };
    found
}

/// `ip_resolver_t::resolve_getaddrinfo`: the first result of `getaddrinfo` with libzmq's hints.
fn getaddrinfo_first(addr: &str, opts: &ResolveOpts) -> Result<SocketAddr> {
    let fail = if opts.bindable {
        Error::NoDev
    } else {
        Error::Inval
    };
    let c_addr = CString::new(addr).map_err(|_| fail)?;
    // SAFETY: addrinfo is a plain C struct for which all-zero is a valid (empty) value.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = if opts.ipv6 {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    hints.ai_socktype = libc::SOCK_STREAM;
    if opts.bindable {
        hints.ai_flags |= libc::AI_PASSIVE;
    }
    if !opts.allow_dns {
        hints.ai_flags |= libc::AI_NUMERICHOST;
    }
    if opts.ipv6 {
        hints.ai_flags |= libc::AI_V4MAPPED;
    }
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: c_addr and hints are valid for the call; res receives a list we free below.
    let mut rc = unsafe { libc::getaddrinfo(c_addr.as_ptr(), std::ptr::null(), &hints, &mut res) };
    if rc == libc::EAI_BADFLAGS && hints.ai_flags & libc::AI_V4MAPPED != 0 {
        hints.ai_flags &= !libc::AI_V4MAPPED;
        // SAFETY: as above.
        rc = unsafe { libc::getaddrinfo(c_addr.as_ptr(), std::ptr::null(), &hints, &mut res) };
    }
    if rc != 0 {
        return Err(if rc == libc::EAI_MEMORY {
            Error::NoMem
        } else {
            fail
        });
    }
    // SAFETY: on success res is a non-null list; its first ai_addr has ai_addrlen valid bytes.
    let first = unsafe { sockaddr_to_std((*res).ai_addr) };
    // SAFETY: res came from a successful getaddrinfo and is freed exactly once.
    unsafe { libc::freeaddrinfo(res) };
    first.ok_or(fail)
}

/// An `ipc://` path (a file system path, or `@name` for the Linux abstract namespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct IpcEndpoint {
    path: String,
}

/// The result of [`IpcEndpoint::resolve_bind`]: the path to bind and, for `ipc://*`, the
/// temporary directory that was created for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IpcBind {
    /// The path to bind (for a wildcard, `<tmp dir>/socket`).
    pub endpoint: IpcEndpoint,
    /// The directory `mkdtemp` created for a wildcard; the listener removes it (after unlinking
    /// the socket file) when it closes.
    pub tmp_dir: Option<PathBuf>,
}

impl IpcEndpoint {
    /// Wraps the text after `ipc://`.
    pub(crate) fn new(path: &str) -> IpcEndpoint {
        IpcEndpoint {
            path: path.to_owned(),
        }
    }

    /// The path after `ipc://`, verbatim.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// True for `ipc://*...`: libzmq binds a generated path instead (unless `ZMQ_USE_FD` is set).
    pub(crate) fn is_wildcard(&self) -> bool {
        self.path.starts_with('*')
    }

    /// True for `ipc://@name`: a Linux abstract-namespace address.
    pub(crate) fn is_abstract(&self) -> bool {
        self.path.starts_with('@')
    }

    /// `ipc_address_t::resolve`'s checks: `ENAMETOOLONG` for 108 bytes or more, `EINVAL` for `@` alone.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.path.len() >= IPC_PATH_MAX {
            return Err(Error::Os(libc::ENAMETOOLONG));
        }
        if self.path == "@" {
            return Err(Error::Inval);
        }
        Ok(())
    }

    /// The `AF_UNIX` address to bind or connect to (abstract for `@name`), after [`Self::validate`].
    pub(crate) fn to_unix_addr(&self) -> Result<std::os::unix::net::SocketAddr> {
        self.validate()?;
        if let Some(name) = self.path.strip_prefix('@') {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                #[cfg(target_os = "android")]
                use std::os::android::net::SocketAddrExt;
                #[cfg(target_os = "linux")]
                use std::os::linux::net::SocketAddrExt;
                return Ok(std::os::unix::net::SocketAddr::from_abstract_name(
                    name.as_bytes(),
                )?);
            }
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            {
                let _ = name;
                return Err(Error::NotSup);
            }
        }
        Ok(std::os::unix::net::SocketAddr::from_pathname(&self.path)?)
    }

    /// `ZMQ_LAST_ENDPOINT` for this path: `"ipc://"` plus the path as given (`@` kept).
    pub(crate) fn last_endpoint(&self) -> String {
        format!("ipc://{}", self.path)
    }

    /// What `ipc_listener_t::set_local_address` binds: for a wildcard (when `use_fd` is -1) a new
    /// `<tmp>/tmpXXXXXX/socket` path, otherwise this path; then validated.
    ///
    /// The temporary directory is removed again if validation fails (`ENAMETOOLONG` for a long
    /// `$TMPDIR`). The caller then unlinks a stale file at the path (not when `use_fd` is set),
    /// binds and listens.
    pub(crate) fn resolve_bind(&self, use_fd: i32) -> Result<IpcBind> {
        if use_fd == -1 && self.is_wildcard() {
            let dir = create_tmp_dir()?;
            let endpoint = IpcEndpoint::new(&format!("{}/socket", dir.to_string_lossy()));
            if let Err(e) = endpoint.validate() {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
            return Ok(IpcBind {
                endpoint,
                tmp_dir: Some(dir),
            });
        }
        self.validate()?;
        Ok(IpcBind {
            endpoint: self.clone(),
            tmp_dir: None,
        })
    }
}

/// `create_ipc_wildcard_address`: `mkdtemp` under `$TMPDIR`, `$TEMPDIR` or `$TMP` (the first
/// that names a directory), or under the current directory when none does.
fn create_tmp_dir() -> Result<PathBuf> {
    let mut base = String::new();
    for var in ["TMPDIR", "TEMPDIR", "TMP"] {
        if let Some(dir) = crate::env::system_var(var) {
            if std::fs::metadata(&dir).map(|m| m.is_dir()).unwrap_or(false) {
                base = dir;
                if !base.ends_with('/') {
                    base.push('/');
                }
                break;
            }
        }
    }
    base.push_str("tmpXXXXXX");
    let mut template = CString::new(base)
        .map_err(|_| Error::Inval)?
        .into_bytes_with_nul();
    // SAFETY: template is a writable NUL-terminated buffer ending in "XXXXXX" as mkdtemp requires.
    let p = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(std::io::Error::last_os_error().into());
    }
    template.pop();
    let s = String::from_utf8(template).map_err(|_| Error::Inval)?;
    Ok(PathBuf::from(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(s: &str) -> TcpEndpoint {
        match parse(s).unwrap() {
            Endpoint::Tcp(t) => t,
            other => panic!("not tcp: {other:?}"),
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parse_schemes() {
        assert_eq!(
            parse("tcp://127.0.0.1:5555").unwrap(),
            Endpoint::Tcp(TcpEndpoint::new("127.0.0.1:5555"))
        );
        assert_eq!(
            parse("ipc:///tmp/x").unwrap(),
            Endpoint::Ipc(IpcEndpoint::new("/tmp/x"))
        );
        assert_eq!(
            parse("inproc://a://b").unwrap(),
            Endpoint::Inproc("a://b".into())
        );
        assert_eq!(parse("inproc://name").unwrap().uri(), "inproc://name");
        assert_eq!(parse("tcp://h:1").unwrap().protocol(), "tcp");
        for bad in [
            "tcp:/x",
            "127.0.0.1:5555",
            "://x",
            "tcp://",
            "",
            "inproc://\0x",
        ] {
            assert_eq!(parse(bad), Err(Error::Inval), "{bad}");
        }
        for s in [
            "pgm", "epgm", "norm", "vmci", "ws", "wss", "tipc", "TCP", "foo",
        ] {
            assert_eq!(
                parse(&format!("{s}://x:1")),
                Err(Error::ProtoNoSupport),
                "{s}"
            );
        }
        assert_eq!(
            parse("udp://127.0.0.1:5555"),
            Ok(Endpoint::Udp("127.0.0.1:5555".into()))
        );
    }

    #[test]
    fn tcp_bind_forms() {
        assert_eq!(
            tcp("tcp://127.0.0.1:5555").resolve_bind(false).unwrap(),
            sa("127.0.0.1:5555")
        );
        assert_eq!(
            tcp("tcp://*:5555").resolve_bind(false).unwrap(),
            sa("0.0.0.0:5555")
        );
        assert_eq!(
            tcp("tcp://*:*").resolve_bind(false).unwrap(),
            sa("0.0.0.0:0")
        );
        assert_eq!(
            tcp("tcp://*:0").resolve_bind(false).unwrap(),
            sa("0.0.0.0:0")
        );
        assert_eq!(
            tcp("tcp://127.0.0.1:*").resolve_bind(false).unwrap(),
            sa("127.0.0.1:0")
        );
        assert_eq!(
            tcp("tcp://*:5555").resolve_bind(true).unwrap(),
            sa("[::]:5555")
        );
        assert_eq!(
            tcp("tcp://[::1]:5555").resolve_bind(true).unwrap(),
            sa("[::1]:5555")
        );
        assert_eq!(
            tcp("tcp://::1:5555").resolve_bind(true).unwrap(),
            sa("[::1]:5555")
        );
        // IPv4 literals become mapped addresses on an IPv6 socket.
        assert_eq!(
            tcp("tcp://127.0.0.1:5555").resolve_bind(true).unwrap(),
            sa("[::ffff:127.0.0.1]:5555")
        );
        // IPv6 only with ZMQ_IPV6.
        assert_eq!(
            tcp("tcp://[::1]:5555").resolve_bind(false),
            Err(Error::NoDev)
        );
        // Source part is parsed and ignored on bind.
        assert_eq!(
            tcp("tcp://127.0.0.1:0;127.0.0.1:5555")
                .resolve_bind(false)
                .unwrap(),
            sa("127.0.0.1:5555")
        );
        assert_eq!(
            tcp("tcp://nosuchhost.invalid:5555").resolve_bind(false),
            Err(Error::NoDev)
        );
        assert_eq!(tcp("tcp://:5555").resolve_bind(false), Err(Error::NoDev));
    }

    #[test]
    fn tcp_ports() {
        let t = |s: &str| tcp(s).resolve_bind(false);
        assert_eq!(t("tcp://127.0.0.1"), Err(Error::Inval));
        assert_eq!(t("tcp://127.0.0.1:"), Err(Error::Inval));
        assert_eq!(t("tcp://127.0.0.1:abc"), Err(Error::Inval));
        assert_eq!(t("tcp://127.0.0.1:65536"), Err(Error::Inval));
        // atoi then uint16_t, like libzmq.
        assert_eq!(t("tcp://127.0.0.1:65537").unwrap().port(), 1);
        assert_eq!(t("tcp://127.0.0.1:80x").unwrap().port(), 80);
        assert_eq!(t("tcp://127.0.0.1:-1").unwrap().port(), 65535);
        assert_eq!(
            tcp("tcp://127.0.0.1:*").resolve_connect(false),
            Err(Error::Inval)
        );
        assert_eq!(
            tcp("tcp://127.0.0.1:0").resolve_connect(false).unwrap(),
            (None, sa("127.0.0.1:0"))
        );
    }

    #[test]
    fn tcp_connect_forms() {
        assert_eq!(
            tcp("tcp://127.0.0.1:5555").resolve_connect(false).unwrap(),
            (None, sa("127.0.0.1:5555"))
        );
        assert_eq!(
            tcp("tcp://localhost:5555").resolve_connect(false).unwrap(),
            (None, sa("127.0.0.1:5555"))
        );
        assert_eq!(
            tcp("tcp://[::1]:5555").resolve_connect(true).unwrap(),
            (None, sa("[::1]:5555"))
        );
        assert_eq!(
            tcp("tcp://[::1]:5555").resolve_connect(false),
            Err(Error::Inval)
        );
        assert_eq!(
            tcp("tcp://127.0.0.1:0;127.0.0.1:5555")
                .resolve_connect(false)
                .unwrap(),
            (Some(sa("127.0.0.1:0")), sa("127.0.0.1:5555"))
        );
        assert_eq!(
            tcp("tcp://127.0.0.1:*;127.0.0.1:5555")
                .resolve_connect(false)
                .unwrap(),
            (Some(sa("127.0.0.1:0")), sa("127.0.0.1:5555"))
        );
        // Source addresses are numeric only.
        assert_eq!(
            tcp("tcp://nosuchhost.invalid:0;127.0.0.1:5555").resolve_connect(false),
            Err(Error::NoDev)
        );
        assert_eq!(
            tcp("tcp://nosuchhost.invalid:5555").resolve_connect(false),
            Err(Error::Inval)
        );
        // Interface names are not looked up for connect destinations.
        assert_eq!(
            tcp("tcp://*:5555").resolve_connect(false),
            Err(Error::Inval)
        );
        let t = tcp("tcp://127.0.0.1:1;10.0.0.1:2");
        assert_eq!(t.source(), Some("127.0.0.1:1"));
        assert_eq!(t.target(), "10.0.0.1:2");
        assert_eq!(t.connect_last_endpoint(), "tcp://127.0.0.1:1;10.0.0.1:2");
    }

    #[test]
    fn tcp_interface_names() {
        // The loopback interface exists on every Linux machine.
        assert_eq!(
            tcp("tcp://lo:5555").resolve_bind(false).unwrap(),
            sa("127.0.0.1:5555")
        );
        assert_eq!(
            tcp("tcp://lo:0;127.0.0.1:5555")
                .resolve_connect(false)
                .unwrap(),
            (Some(sa("127.0.0.1:0")), sa("127.0.0.1:5555"))
        );
        assert_eq!(
            tcp("tcp://nosuchif0:5555").resolve_bind(false),
            Err(Error::NoDev)
        );
        assert_eq!(
            tcp("tcp://nosuchif0:0;127.0.0.1:1").resolve_connect(false),
            Err(Error::NoDev)
        );
        // The source needs a port too: "lo;host:port" is EINVAL in libzmq 4.3.5.
        assert_eq!(
            tcp("tcp://lo;127.0.0.1:5555").resolve_connect(false),
            Err(Error::Inval)
        );
    }

    #[test]
    fn tcp_zone_ids() {
        let a = tcp("tcp://[fe80::1%lo]:5555").resolve_bind(true).unwrap();
        match a {
            SocketAddr::V6(v6) => assert_eq!(v6.scope_id(), if_nametoindex("lo")),
            _ => panic!(),
        }
        let a = tcp("tcp://[fe80::1%7]:5555")
            .resolve_connect(true)
            .unwrap()
            .1;
        assert_eq!(
            a,
            SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 5555, 0, 7))
        );
        assert_eq!(
            tcp("tcp://[fe80::1%]:5555").resolve_bind(true),
            Err(Error::Inval)
        );
        assert_eq!(
            tcp("tcp://[fe80::1%nosuchif0]:5555").resolve_bind(true),
            Err(Error::Inval)
        );
        assert_eq!(
            tcp("tcp://[fe80::1%0]:5555").resolve_bind(true),
            Err(Error::Inval)
        );
    }

    #[test]
    fn connect_syntax() {
        for ok in [
            "127.0.0.1:5555",
            "localhost:5555",
            "[::1]:5555",
            "::1:5555",
            "my_host-1.example:1",
            "127.0.0.1:0;127.0.0.1:5555",
            "eth0;192.168.1.1:5555",
            "[fe80::1%eth0]:5555",
            ":5555",
            "h:0",
        ] {
            assert_eq!(TcpEndpoint::new(ok).check_connect_syntax(), Ok(()), "{ok}");
        }
        for bad in [
            "*:5555",
            "localhost:*",
            "localhost",
            "local host:1",
            "host:x1",
            "h!:1",
            ".h:1",
            "h:",
            "-h:1",
        ] {
            assert_eq!(
                TcpEndpoint::new(bad).check_connect_syntax(),
                Err(Error::Inval),
                "{bad}"
            );
        }
    }

    #[test]
    fn last_endpoint_format() {
        assert_eq!(
            tcp_last_endpoint(&sa("127.0.0.1:41234")),
            "tcp://127.0.0.1:41234"
        );
        assert_eq!(tcp_last_endpoint(&sa("[::1]:5555")), "tcp://[::1]:5555");
        assert_eq!(tcp_last_endpoint(&sa("[::]:5555")), "tcp://[::]:5555");
        assert_eq!(
            tcp_last_endpoint(&sa("[::ffff:127.0.0.1]:5555")),
            "tcp://[::ffff:127.0.0.1]:5555"
        );
        let lo = if_nametoindex("lo");
        let a = SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 1, 0, lo));
        assert_eq!(tcp_last_endpoint(&a), "tcp://[fe80::1%lo]:1");
        let a = SocketAddr::V6(SocketAddrV6::new("2001:db8::1".parse().unwrap(), 1, 0, 3));
        assert_eq!(tcp_last_endpoint(&a), "tcp://[2001:db8::1%3]:1");
    }

    #[test]
    fn ipc_paths() {
        let Endpoint::Ipc(i) = parse("ipc:///tmp/rzmq-test.sock").unwrap() else {
            panic!()
        };
        assert_eq!(i.last_endpoint(), "ipc:///tmp/rzmq-test.sock");
        assert!(!i.is_abstract() && !i.is_wildcard());
        assert_eq!(
            i.to_unix_addr().unwrap().as_pathname(),
            Some(std::path::Path::new("/tmp/rzmq-test.sock"))
        );
        let rel = IpcEndpoint::new("relative.sock");
        assert_eq!(rel.last_endpoint(), "ipc://relative.sock");

        let long = IpcEndpoint::new(&format!("/{}", "a".repeat(106)));
        assert_eq!(long.path().len(), 107);
        assert!(long.validate().is_ok());
        assert!(long.to_unix_addr().is_ok());
        let too_long = IpcEndpoint::new(&format!("/{}", "a".repeat(107)));
        assert_eq!(too_long.validate(), Err(Error::Os(libc::ENAMETOOLONG)));
        assert_eq!(too_long.validate().unwrap_err().errno(), libc::ENAMETOOLONG);
        assert_eq!(
            too_long.resolve_bind(-1),
            Err(Error::Os(libc::ENAMETOOLONG))
        );
    }

    #[test]
    fn ipc_abstract() {
        let a = IpcEndpoint::new("@rzmq-abstract");
        assert!(a.is_abstract());
        assert_eq!(a.last_endpoint(), "ipc://@rzmq-abstract");
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let u = a.to_unix_addr().unwrap();
            assert_eq!(u.as_abstract_name(), Some(&b"rzmq-abstract"[..]));
        }
        assert_eq!(IpcEndpoint::new("@").validate(), Err(Error::Inval));
        assert_eq!(
            IpcEndpoint::new("@").to_unix_addr().unwrap_err(),
            Error::Inval
        );
    }

    #[test]
    fn ipc_wildcard() {
        let w = IpcEndpoint::new("*");
        assert!(w.is_wildcard());
        let b = w.resolve_bind(-1).unwrap();
        let dir = b.tmp_dir.clone().unwrap();
        assert!(dir.is_dir());
        assert!(dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("tmp"));
        assert_eq!(b.endpoint.path(), format!("{}/socket", dir.display()));
        assert!(b.endpoint.last_endpoint().starts_with("ipc://"));
        std::fs::remove_dir(&dir).unwrap();
        // With ZMQ_USE_FD the path is used as given.
        let b = w.resolve_bind(3).unwrap();
        assert_eq!(
            b,
            IpcBind {
                endpoint: w.clone(),
                tmp_dir: None
            }
        );
    }

    #[test]
    fn atoi_like_c() {
        assert_eq!(c_atoi("42"), 42);
        assert_eq!(c_atoi("  -7x"), -7);
        assert_eq!(c_atoi("+5"), 5);
        assert_eq!(c_atoi("x5"), 0);
        assert_eq!(c_atoi(""), 0);
        assert_eq!(c_atoi("99999999999999999999"), -1);
        assert_eq!(c_strtol("-99999999999999999999"), i64::MIN);
    }
}

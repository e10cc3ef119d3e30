//! libzmq 4.3.5's socket types and socket options: numbers, defaults, validation, errors
//! ([`Options`]); see the parent module for what is and is not built.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use super::{CtxOptions, RzmqOptions};
use crate::endpoint::{resolve_ip, ResolveOpts};
use crate::error::{Error, Result};
use crate::z85;
use crate::zmtp::SocketType;

/// Whether the CURVE mechanism is built (it is: pure-Rust crypto, see `zmtp/curve.rs`); were it
/// false, CURVE options would fail with `EINVAL` as in a libzmq 4.3.5 built without libsodium.
pub const HAVE_CURVE: bool = true;

// ---------------------------------------------------------------------------------------------
// Socket options (zmq.h 4.3.5).

/// `ZMQ_AFFINITY`: I/O thread affinity bitmap (`u64`).
pub const AFFINITY: i32 = 4;
/// `ZMQ_ROUTING_ID`: the socket's routing id (1 to 255 bytes).
pub const ROUTING_ID: i32 = 5;
/// `ZMQ_IDENTITY`, deprecated alias of `ZMQ_ROUTING_ID`.
pub const IDENTITY: i32 = ROUTING_ID;
/// `ZMQ_SUBSCRIBE`: add a subscription (SUB; XPUB/PUB with `XPUB_MANUAL`), write-only.
pub const SUBSCRIBE: i32 = 6;
/// `ZMQ_UNSUBSCRIBE`: remove a subscription (SUB; XPUB/PUB with `XPUB_MANUAL`), write-only.
pub const UNSUBSCRIBE: i32 = 7;
/// `ZMQ_RATE`: multicast data rate in kbit/s (> 0).
pub const RATE: i32 = 8;
/// `ZMQ_RECOVERY_IVL`: multicast recovery interval in ms (>= 0).
pub const RECOVERY_IVL: i32 = 9;
/// `ZMQ_SNDBUF`: kernel send buffer size (`SO_SNDBUF`), -1 for the OS default.
pub const SNDBUF: i32 = 11;
/// `ZMQ_RCVBUF`: kernel receive buffer size (`SO_RCVBUF`), -1 for the OS default.
pub const RCVBUF: i32 = 12;
/// `ZMQ_RCVMORE`: more frames follow (read-only, socket-level).
pub const RCVMORE: i32 = 13;
/// `ZMQ_FD`: the socket's signalling file descriptor (read-only, socket-level).
pub const FD: i32 = 14;
/// `ZMQ_EVENTS`: `POLLIN`/`POLLOUT` state (read-only, socket-level).
pub const EVENTS: i32 = 15;
/// `ZMQ_TYPE`: the socket type (read-only).
pub const TYPE: i32 = 16;
/// `ZMQ_LINGER`: linger period at close in ms, -1 infinite.
pub const LINGER: i32 = 17;
/// `ZMQ_RECONNECT_IVL`: reconnect interval in ms, -1 no reconnection.
pub const RECONNECT_IVL: i32 = 18;
/// `ZMQ_BACKLOG`: `listen` backlog.
pub const BACKLOG: i32 = 19;
/// `ZMQ_RECONNECT_IVL_MAX`: maximum reconnect interval in ms (exponential backoff), 0 none.
pub const RECONNECT_IVL_MAX: i32 = 21;
/// `ZMQ_MAXMSGSIZE`: maximum inbound message size (`i64`), -1 unlimited.
pub const MAXMSGSIZE: i32 = 22;
/// `ZMQ_SNDHWM`: send high-water mark in messages, 0 unlimited.
pub const SNDHWM: i32 = 23;
/// `ZMQ_RCVHWM`: receive high-water mark in messages, 0 unlimited.
pub const RCVHWM: i32 = 24;
/// `ZMQ_MULTICAST_HOPS`: multicast TTL (> 0).
pub const MULTICAST_HOPS: i32 = 25;
/// `ZMQ_RCVTIMEO`: receive timeout in ms, -1 infinite.
pub const RCVTIMEO: i32 = 27;
/// `ZMQ_SNDTIMEO`: send timeout in ms, -1 infinite.
pub const SNDTIMEO: i32 = 28;
/// `ZMQ_IPV4ONLY` (deprecated): 1 IPv4 only, 0 IPv6 too; the inverse of `ZMQ_IPV6`.
pub const IPV4ONLY: i32 = 31;
/// `ZMQ_LAST_ENDPOINT`: last bound or connected endpoint (read-only, socket-level).
pub const LAST_ENDPOINT: i32 = 32;
/// `ZMQ_ROUTER_MANDATORY`: ROUTER reports unroutable messages (`EHOSTUNREACH`), write-only.
pub const ROUTER_MANDATORY: i32 = 33;
/// `ZMQ_FAIL_UNROUTABLE`, deprecated alias of `ZMQ_ROUTER_MANDATORY`.
pub const FAIL_UNROUTABLE: i32 = ROUTER_MANDATORY;
/// `ZMQ_ROUTER_BEHAVIOR`, deprecated alias of `ZMQ_ROUTER_MANDATORY`.
pub const ROUTER_BEHAVIOR: i32 = ROUTER_MANDATORY;
/// `ZMQ_TCP_KEEPALIVE`: `SO_KEEPALIVE`, -1 OS default, 0 off, 1 on.
pub const TCP_KEEPALIVE: i32 = 34;
/// `ZMQ_TCP_KEEPALIVE_CNT`: `TCP_KEEPCNT`, -1 OS default.
pub const TCP_KEEPALIVE_CNT: i32 = 35;
/// `ZMQ_TCP_KEEPALIVE_IDLE`: `TCP_KEEPIDLE`, -1 OS default.
pub const TCP_KEEPALIVE_IDLE: i32 = 36;
/// `ZMQ_TCP_KEEPALIVE_INTVL`: `TCP_KEEPINTVL`, -1 OS default.
pub const TCP_KEEPALIVE_INTVL: i32 = 37;
/// `ZMQ_TCP_ACCEPT_FILTER` (deprecated): add an accepted peer address/CIDR, write-only.
pub const TCP_ACCEPT_FILTER: i32 = 38;
/// `ZMQ_IMMEDIATE`: queue messages only to completed connections.
pub const IMMEDIATE: i32 = 39;
/// `ZMQ_DELAY_ATTACH_ON_CONNECT`, deprecated alias of `ZMQ_IMMEDIATE`.
pub const DELAY_ATTACH_ON_CONNECT: i32 = IMMEDIATE;
/// `ZMQ_XPUB_VERBOSE`: pass on duplicate subscriptions (XPUB/PUB), write-only.
pub const XPUB_VERBOSE: i32 = 40;
/// `ZMQ_ROUTER_RAW`: ROUTER in raw mode (like STREAM), write-only.
pub const ROUTER_RAW: i32 = 41;
/// `ZMQ_IPV6`: enable IPv6 on the socket.
pub const IPV6: i32 = 42;
/// `ZMQ_MECHANISM`: the security mechanism (read-only).
pub const MECHANISM: i32 = 43;
/// `ZMQ_PLAIN_SERVER`: act as PLAIN server.
pub const PLAIN_SERVER: i32 = 44;
/// `ZMQ_PLAIN_USERNAME`: PLAIN user name (1 to 255 bytes).
pub const PLAIN_USERNAME: i32 = 45;
/// `ZMQ_PLAIN_PASSWORD`: PLAIN password (1 to 255 bytes).
pub const PLAIN_PASSWORD: i32 = 46;
/// `ZMQ_CURVE_SERVER`: act as CURVE server (needs CURVE).
pub const CURVE_SERVER: i32 = 47;
/// `ZMQ_CURVE_PUBLICKEY`: the CURVE long-term public key (needs CURVE).
pub const CURVE_PUBLICKEY: i32 = 48;
/// `ZMQ_CURVE_SECRETKEY`: the CURVE long-term secret key (needs CURVE).
pub const CURVE_SECRETKEY: i32 = 49;
/// `ZMQ_CURVE_SERVERKEY`: the server's CURVE public key (needs CURVE).
pub const CURVE_SERVERKEY: i32 = 50;
/// `ZMQ_PROBE_ROUTER`: send an empty message on connect (ROUTER, DEALER, REQ), write-only.
pub const PROBE_ROUTER: i32 = 51;
/// `ZMQ_REQ_CORRELATE`: match replies with requests (REQ), write-only.
pub const REQ_CORRELATE: i32 = 52;
/// `ZMQ_REQ_RELAXED`: relax REQ's strict alternation (REQ), write-only.
pub const REQ_RELAXED: i32 = 53;
/// `ZMQ_CONFLATE`: keep only the last message.
pub const CONFLATE: i32 = 54;
/// `ZMQ_ZAP_DOMAIN`: ZAP authentication domain (1 to 255 bytes).
pub const ZAP_DOMAIN: i32 = 55;
/// `ZMQ_ROUTER_HANDOVER`: a new peer with a known routing id takes it over (ROUTER), write-only.
pub const ROUTER_HANDOVER: i32 = 56;
/// `ZMQ_TOS`: `IP_TOS` of the socket's connections.
pub const TOS: i32 = 57;
/// `ZMQ_IPC_FILTER_PID` (deprecated): add an accepted ipc peer pid, write-only.
pub const IPC_FILTER_PID: i32 = 58;
/// `ZMQ_IPC_FILTER_UID` (deprecated): add an accepted ipc peer uid, write-only.
pub const IPC_FILTER_UID: i32 = 59;
/// `ZMQ_IPC_FILTER_GID` (deprecated): add an accepted ipc peer gid, write-only.
pub const IPC_FILTER_GID: i32 = 60;
/// `ZMQ_CONNECT_ROUTING_ID`: routing id for the next connect's peer (ROUTER, STREAM), write-only.
pub const CONNECT_ROUTING_ID: i32 = 61;
/// `ZMQ_CONNECT_RID`, deprecated alias of `ZMQ_CONNECT_ROUTING_ID`.
pub const CONNECT_RID: i32 = CONNECT_ROUTING_ID;
/// `ZMQ_GSSAPI_SERVER` (needs GSSAPI).
pub const GSSAPI_SERVER: i32 = 62;
/// `ZMQ_GSSAPI_PRINCIPAL` (needs GSSAPI).
pub const GSSAPI_PRINCIPAL: i32 = 63;
/// `ZMQ_GSSAPI_SERVICE_PRINCIPAL` (needs GSSAPI).
pub const GSSAPI_SERVICE_PRINCIPAL: i32 = 64;
/// `ZMQ_GSSAPI_PLAINTEXT` (needs GSSAPI).
pub const GSSAPI_PLAINTEXT: i32 = 65;
/// `ZMQ_HANDSHAKE_IVL`: maximum handshake time in ms, 0 none.
pub const HANDSHAKE_IVL: i32 = 66;
/// `ZMQ_SOCKS_PROXY`: SOCKS5 proxy address for tcp connects.
pub const SOCKS_PROXY: i32 = 68;
/// `ZMQ_XPUB_NODROP`: XPUB/PUB block (`EAGAIN`) instead of dropping at the HWM, write-only.
pub const XPUB_NODROP: i32 = 69;
/// `ZMQ_BLOCKY`: context option, default linger of new sockets (also context number 70).
pub const BLOCKY: i32 = 70;
/// `ZMQ_XPUB_MANUAL`: XPUB/PUB subscriptions managed by the application, write-only.
pub const XPUB_MANUAL: i32 = 71;
/// `ZMQ_XPUB_WELCOME_MSG`: message sent to each new subscriber (XPUB/PUB), write-only.
pub const XPUB_WELCOME_MSG: i32 = 72;
/// `ZMQ_STREAM_NOTIFY`: STREAM delivers connect/disconnect notifications, write-only.
pub const STREAM_NOTIFY: i32 = 73;
/// `ZMQ_INVERT_MATCHING`: invert subscription matching (PUB/SUB/XPUB/XSUB).
pub const INVERT_MATCHING: i32 = 74;
/// `ZMQ_HEARTBEAT_IVL`: ZMTP heartbeat interval in ms, 0 off.
pub const HEARTBEAT_IVL: i32 = 75;
/// `ZMQ_HEARTBEAT_TTL`: TTL announced in PINGs, in ms (kept in deciseconds).
pub const HEARTBEAT_TTL: i32 = 76;
/// `ZMQ_HEARTBEAT_TIMEOUT`: heartbeat timeout in ms, -1 means `HEARTBEAT_IVL`.
pub const HEARTBEAT_TIMEOUT: i32 = 77;
/// `ZMQ_XPUB_VERBOSER`: pass on duplicate subscriptions and unsubscriptions, write-only.
pub const XPUB_VERBOSER: i32 = 78;
/// `ZMQ_CONNECT_TIMEOUT`: tcp connect timeout in ms, 0 OS default.
pub const CONNECT_TIMEOUT: i32 = 79;
/// `ZMQ_TCP_MAXRT`: `TCP_USER_TIMEOUT` in ms, 0 OS default.
pub const TCP_MAXRT: i32 = 80;
/// `ZMQ_THREAD_SAFE`: whether the socket is thread safe (read-only, socket-level).
pub const THREAD_SAFE: i32 = 81;
/// `ZMQ_MULTICAST_MAXTPDU`: maximum multicast transport data unit (> 0).
pub const MULTICAST_MAXTPDU: i32 = 84;
/// `ZMQ_VMCI_BUFFER_SIZE` (needs VMCI).
pub const VMCI_BUFFER_SIZE: i32 = 85;
/// `ZMQ_VMCI_BUFFER_MIN_SIZE` (needs VMCI).
pub const VMCI_BUFFER_MIN_SIZE: i32 = 86;
/// `ZMQ_VMCI_BUFFER_MAX_SIZE` (needs VMCI).
pub const VMCI_BUFFER_MAX_SIZE: i32 = 87;
/// `ZMQ_VMCI_CONNECT_TIMEOUT` (needs VMCI).
pub const VMCI_CONNECT_TIMEOUT: i32 = 88;
/// `ZMQ_USE_FD`: use this pre-made listening socket for the next bind, -1 none.
pub const USE_FD: i32 = 89;
/// `ZMQ_GSSAPI_PRINCIPAL_NAMETYPE` (needs GSSAPI).
pub const GSSAPI_PRINCIPAL_NAMETYPE: i32 = 90;
/// `ZMQ_GSSAPI_SERVICE_PRINCIPAL_NAMETYPE` (needs GSSAPI).
pub const GSSAPI_SERVICE_PRINCIPAL_NAMETYPE: i32 = 91;
/// `ZMQ_BINDTODEVICE`: `SO_BINDTODEVICE` interface name (up to 16 bytes).
pub const BINDTODEVICE: i32 = 92;

/// `ZMQ_ZAP_ENFORCE_DOMAIN` (DRAFT; handled by stable builds).
pub const ZAP_ENFORCE_DOMAIN: i32 = 93;
/// `ZMQ_LOOPBACK_FASTPATH` (DRAFT; handled by stable builds; Windows only in effect).
pub const LOOPBACK_FASTPATH: i32 = 94;
/// `ZMQ_METADATA` (DRAFT; handled by stable builds): add `"X-key:value"` application metadata, write-only.
pub const METADATA: i32 = 95;
/// `ZMQ_MULTICAST_LOOP` (DRAFT; handled by stable builds).
pub const MULTICAST_LOOP: i32 = 96;
/// `ZMQ_ROUTER_NOTIFY` (DRAFT; `EINVAL` in stable builds).
pub const ROUTER_NOTIFY: i32 = 97;
/// `ZMQ_XPUB_MANUAL_LAST_VALUE` (DRAFT; handled by stable builds on XPUB/PUB), write-only.
pub const XPUB_MANUAL_LAST_VALUE: i32 = 98;
/// `ZMQ_SOCKS_USERNAME` (DRAFT; handled by stable builds).
pub const SOCKS_USERNAME: i32 = 99;
/// `ZMQ_SOCKS_PASSWORD` (DRAFT; handled by stable builds).
pub const SOCKS_PASSWORD: i32 = 100;
/// `ZMQ_IN_BATCH_SIZE` (DRAFT; `EINVAL` in stable builds).
pub const IN_BATCH_SIZE: i32 = 101;
/// `ZMQ_OUT_BATCH_SIZE` (DRAFT; `EINVAL` in stable builds).
pub const OUT_BATCH_SIZE: i32 = 102;
/// `ZMQ_WSS_KEY_PEM` (DRAFT; `EINVAL` in stable builds).
pub const WSS_KEY_PEM: i32 = 103;
/// `ZMQ_WSS_CERT_PEM` (DRAFT; `EINVAL` in stable builds).
pub const WSS_CERT_PEM: i32 = 104;
/// `ZMQ_WSS_TRUST_PEM` (DRAFT; `EINVAL` in stable builds).
pub const WSS_TRUST_PEM: i32 = 105;
/// `ZMQ_WSS_HOSTNAME` (DRAFT; `EINVAL` in stable builds).
pub const WSS_HOSTNAME: i32 = 106;
/// `ZMQ_WSS_TRUST_SYSTEM` (DRAFT; `EINVAL` in stable builds).
pub const WSS_TRUST_SYSTEM: i32 = 107;
/// `ZMQ_ONLY_FIRST_SUBSCRIBE` (DRAFT; handled by stable builds on XPUB/PUB/XSUB), write-only.
pub const ONLY_FIRST_SUBSCRIBE: i32 = 108;
/// `ZMQ_RECONNECT_STOP` (DRAFT; handled by stable builds): bit set of `RECONNECT_STOP_*`.
pub const RECONNECT_STOP: i32 = 109;
/// `ZMQ_HELLO_MSG` (DRAFT; `EINVAL` in stable builds).
pub const HELLO_MSG: i32 = 110;
/// `ZMQ_DISCONNECT_MSG` (DRAFT; `EINVAL` in stable builds).
pub const DISCONNECT_MSG: i32 = 111;
/// `ZMQ_PRIORITY` (DRAFT; `EINVAL` in stable builds).
pub const PRIORITY: i32 = 112;
/// `ZMQ_BUSY_POLL` (DRAFT; `EINVAL` in stable builds).
pub const BUSY_POLL: i32 = 113;
/// `ZMQ_HICCUP_MSG` (DRAFT; `EINVAL` in stable builds).
pub const HICCUP_MSG: i32 = 114;
/// `ZMQ_XSUB_VERBOSE_UNSUBSCRIBE` (DRAFT; `EINVAL` in stable builds).
pub const XSUB_VERBOSE_UNSUBSCRIBE: i32 = 115;
/// `ZMQ_TOPICS_COUNT` (DRAFT; read by stable builds on PUB/SUB/XPUB/XSUB; socket-level).
pub const TOPICS_COUNT: i32 = 116;
/// `ZMQ_NORM_MODE` (DRAFT; `EINVAL` without NORM).
pub const NORM_MODE: i32 = 117;
/// `ZMQ_NORM_UNICAST_NACK` (DRAFT; `EINVAL` without NORM).
pub const NORM_UNICAST_NACK: i32 = 118;
/// `ZMQ_NORM_BUFFER_SIZE` (DRAFT; `EINVAL` without NORM).
pub const NORM_BUFFER_SIZE: i32 = 119;
/// `ZMQ_NORM_SEGMENT_SIZE` (DRAFT; `EINVAL` without NORM).
pub const NORM_SEGMENT_SIZE: i32 = 120;
/// `ZMQ_NORM_BLOCK_SIZE` (DRAFT; `EINVAL` without NORM).
pub const NORM_BLOCK_SIZE: i32 = 121;
/// `ZMQ_NORM_NUM_PARITY` (DRAFT; `EINVAL` without NORM).
pub const NORM_NUM_PARITY: i32 = 122;
/// `ZMQ_NORM_NUM_AUTOPARITY` (DRAFT; `EINVAL` without NORM).
pub const NORM_NUM_AUTOPARITY: i32 = 123;
/// `ZMQ_NORM_PUSH` (DRAFT; `EINVAL` without NORM).
pub const NORM_PUSH: i32 = 124;

/// `ZMQ_RECONNECT_STOP_CONN_REFUSED` (DRAFT): stop reconnecting after `ECONNREFUSED`.
pub const RECONNECT_STOP_CONN_REFUSED: i32 = 0x1;
/// `ZMQ_RECONNECT_STOP_HANDSHAKE_FAILED` (DRAFT): stop reconnecting after a failed handshake.
pub const RECONNECT_STOP_HANDSHAKE_FAILED: i32 = 0x2;
/// `ZMQ_RECONNECT_STOP_AFTER_DISCONNECT` (DRAFT): stop reconnecting after `zmq_disconnect`.
pub const RECONNECT_STOP_AFTER_DISCONNECT: i32 = 0x4;

/// `ZMQ_NULL` security mechanism.
pub const NULL: i32 = 0;
/// `ZMQ_PLAIN` security mechanism.
pub const PLAIN: i32 = 1;
/// `ZMQ_CURVE` security mechanism.
pub const CURVE: i32 = 2;
/// `ZMQ_GSSAPI` security mechanism.
pub const GSSAPI: i32 = 3;

/// `ZMQ_GSSAPI_NT_HOSTBASED` name type.
pub const GSSAPI_NT_HOSTBASED: i32 = 0;
/// `ZMQ_GSSAPI_NT_USER_NAME` name type.
pub const GSSAPI_NT_USER_NAME: i32 = 1;
/// `ZMQ_GSSAPI_NT_KRB5_PRINCIPAL` name type.
pub const GSSAPI_NT_KRB5_PRINCIPAL: i32 = 2;

/// `IFNAMSIZ`: the longest `ZMQ_BINDTODEVICE` value libzmq accepts.
const BINDDEVSIZ: usize = 16;

/// True for options the socket answers itself rather than [`Options::get`]: `RCVMORE`, `FD`,
/// `EVENTS`, `LAST_ENDPOINT`, `THREAD_SAFE`, and `TOPICS_COUNT` (PUB/SUB/XPUB/XSUB only).
///
/// libzmq's order is: the socket type's options, then these, then the generic options; these
/// values are written with [`OptValue::IntRelaxed`] (ints: any buffer of at least 4 bytes) or
/// [`OptValue::Str`] (`LAST_ENDPOINT`). `FD` fails with `EINVAL` on thread-safe sockets.
pub fn is_socket_level(opt: i32) -> bool {
    matches!(
        opt,
        RCVMORE | FD | EVENTS | LAST_ENDPOINT | THREAD_SAFE | TOPICS_COUNT
    )
}

/// An option value as `getsockopt` returns it; [`OptValue::write_to`] applies libzmq's buffer rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptValue {
    /// An `int`: the caller's buffer must be exactly 4 bytes.
    Int(i32),
    /// An `int` answered by the socket layer (`do_getsockopt<int>`): a buffer of at least 4
    /// bytes; the rest is zeroed and the length set to 4.
    IntRelaxed(i32),
    /// An `int64_t` (`MAXMSGSIZE`): the buffer must be exactly 8 bytes.
    Int64(i64),
    /// A `uint64_t` (`AFFINITY`): the buffer must be exactly 8 bytes.
    UInt64(u64),
    /// Binary data (`ROUTING_ID`): the buffer must hold it; the rest is zeroed, the length set.
    Bytes(Vec<u8>),
    /// A character string: written with a terminating NUL, so the buffer needs one more byte;
    /// the rest is zeroed and the length set to the string length plus one. Bytes, not UTF-8.
    Str(Vec<u8>),
    /// A CURVE key: a 32-byte buffer gets the key, a 41-byte buffer its Z85 text and a NUL.
    CurveKey([u8; 32]),
}

impl OptValue {
    /// Writes the value into the caller's buffer (`optval`, whose length is `*optvallen`) as
    /// libzmq does and returns the new `*optvallen`; `EINVAL` when the buffer size does not fit.
    pub fn write_to(&self, buf: &mut [u8]) -> Result<usize> {
        fn exact(buf: &mut [u8], bytes: &[u8]) -> Result<usize> {
            if buf.len() != bytes.len() {
                return Err(Error::Inval);
            }
            buf.copy_from_slice(bytes);
            Ok(bytes.len())
        }
        fn at_least(buf: &mut [u8], bytes: &[u8], nul: bool) -> Result<usize> {
            let len = bytes.len() + usize::from(nul);
            if buf.len() < len {
                return Err(Error::Inval);
            }
            buf[..bytes.len()].copy_from_slice(bytes);
            buf[bytes.len()..].fill(0);
            Ok(len)
        }
        match self {
            OptValue::Int(v) => exact(buf, &v.to_ne_bytes()),
            OptValue::IntRelaxed(v) => at_least(buf, &v.to_ne_bytes(), false),
            OptValue::Int64(v) => exact(buf, &v.to_ne_bytes()),
            OptValue::UInt64(v) => exact(buf, &v.to_ne_bytes()),
            OptValue::Bytes(b) => at_least(buf, b, false),
            OptValue::Str(s) => at_least(buf, s, true),
            OptValue::CurveKey(k) => match buf.len() {
                z85::KEY_LEN => exact(buf, k),
                n if n == z85::KEY_TEXT_LEN + 1 => {
                    buf[..z85::KEY_TEXT_LEN].copy_from_slice(&z85::encode_key(k));
                    buf[z85::KEY_TEXT_LEN] = 0;
                    Ok(n)
                }
                _ => Err(Error::Inval),
            },
        }
    }
}

/// What a successful [`Options::set`] changed, so the socket can react.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// A generic option was stored; it takes effect for later binds/connects (or at the next
    /// send/recv/close for timeouts and linger).
    Stored,
    /// `SNDHWM` or `RCVHWM` changed: libzmq immediately updates the HWMs of all existing pipes
    /// and sends them to the peers (`update_pipe_options`).
    Hwm,
    /// SUB: send this subscription upstream. XPUB/PUB with `XPUB_MANUAL`: add it for the pipe
    /// the last message was received from (nothing if none).
    Subscribe(Vec<u8>),
    /// SUB: send this unsubscription upstream. XPUB/PUB with `XPUB_MANUAL`: remove it for the
    /// last pipe (nothing if none).
    Unsubscribe(Vec<u8>),
    /// A socket-type option (`ROUTER_*`, `PROBE_ROUTER`, `REQ_*`, `XPUB_*`, `STREAM_NOTIFY`,
    /// `CONNECT_ROUTING_ID`, `ONLY_FIRST_SUBSCRIBE`) was stored in [`Options`]; the socket should
    /// re-read it. These take effect at once.
    PatternFlag(i32),
}

/// A `ZMQ_TCP_ACCEPT_FILTER` entry: a network address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpAcceptFilter {
    /// The network address, resolved with the socket's `ZMQ_IPV6` at set time (so IPv4 becomes
    /// a mapped IPv6 address when it was set).
    pub addr: std::net::IpAddr,
    /// The prefix length in bits (0 matches any address of the family).
    pub prefix: u8,
}

impl TcpAcceptFilter {
    /// Parses `"addr"` or `"addr/bits"` as libzmq's `tcp_address_mask_t::resolve` (numeric only).
    pub fn parse(text: &str, ipv6: bool) -> Result<TcpAcceptFilter> {
        let (addr_str, mask_str) = match text.rfind('/') {
            Some(p) => {
                let mask = &text[p + 1..];
                if mask.is_empty() {
                    return Err(Error::Inval);
                }
                (&text[..p], Some(mask))
            }
            None => (text, None),
        };
        let opts = ResolveOpts {
            bindable: false,
            allow_dns: false,
            allow_nic_name: false,
            ipv6,
            expect_port: false,
        };
        let addr = resolve_ip(addr_str, &opts)?.ip();
        let full: i64 = if addr.is_ipv6() { 128 } else { 32 };
        let prefix = match mask_str {
            None => full,
            Some("0") => 0,
            Some(m) => {
                let mask = crate::endpoint::c_strtol(m);
                if mask < 1 || mask > full {
                    return Err(Error::Inval);
                }
                mask
            }
        };
        Ok(TcpAcceptFilter {
            addr,
            prefix: prefix as u8,
        })
    }

    /// Whether a peer address passes this filter (`tcp_address_mask_t::match_address`).
    pub fn matches(&self, peer: &SocketAddr) -> bool {
        let (ours, theirs): (Vec<u8>, Vec<u8>) = match (self.addr, peer.ip()) {
            (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
                (a.octets().to_vec(), b.octets().to_vec())
            }
            (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => {
                (a.octets().to_vec(), b.octets().to_vec())
            }
            _ => return false,
        };
        let bits = usize::from(self.prefix).min(ours.len() * 8);
        let full = bits / 8;
        if ours[..full] != theirs[..full] {
            return false;
        }
        let rem = bits % 8;
        if rem != 0 {
            let m = 0xffu8 << (8 - rem);
            if ours[full] & m != theirs[full] & m {
                return false;
            }
        }
        true
    }
}

/// A socket's options, with libzmq 4.3.5's defaults.
///
/// Fields are public so the socket layer can read them; change them through [`Options::set`] to
/// keep libzmq's validation. Sessions and listeners should take a copy at bind/connect time, as
/// libzmq does (most options only affect later binds and connects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The socket type (`ZMQ_TYPE`).
    pub socket_type: SocketType,
    /// `ZMQ_SNDHWM` (1000; 0 unlimited).
    pub sndhwm: i32,
    /// `ZMQ_RCVHWM` (1000; 0 unlimited).
    pub rcvhwm: i32,
    /// `ZMQ_AFFINITY` (0).
    pub affinity: u64,
    /// `ZMQ_ROUTING_ID` (empty). STREAM sockets overwrite it with the id they generate for each
    /// accepted peer, as libzmq does.
    pub routing_id: Vec<u8>,
    /// `ZMQ_RATE` in kbit/s (100).
    pub rate: i32,
    /// `ZMQ_RECOVERY_IVL` in ms (10000).
    pub recovery_ivl: i32,
    /// `ZMQ_MULTICAST_HOPS` (1).
    pub multicast_hops: i32,
    /// `ZMQ_MULTICAST_MAXTPDU` (1500).
    pub multicast_maxtpdu: i32,
    /// `ZMQ_SNDBUF` (-1: leave the OS default).
    pub sndbuf: i32,
    /// `ZMQ_RCVBUF` (-1: leave the OS default).
    pub rcvbuf: i32,
    /// `ZMQ_TOS` (0: not set).
    pub tos: i32,
    /// `ZMQ_LINGER` in ms (-1 infinite; 0 when the context's `BLOCKY` is off).
    pub linger: i32,
    /// `ZMQ_CONNECT_TIMEOUT` in ms (0).
    pub connect_timeout: i32,
    /// `ZMQ_TCP_MAXRT` in ms (0).
    pub tcp_maxrt: i32,
    /// `ZMQ_RECONNECT_STOP` bit set (0).
    pub reconnect_stop: i32,
    /// `ZMQ_RECONNECT_IVL` in ms (100; -1 no reconnection).
    pub reconnect_ivl: i32,
    /// `ZMQ_RECONNECT_IVL_MAX` in ms (0: no backoff).
    pub reconnect_ivl_max: i32,
    /// `ZMQ_BACKLOG` (100).
    pub backlog: i32,
    /// `ZMQ_MAXMSGSIZE` (-1: unlimited; any value is accepted).
    pub maxmsgsize: i64,
    /// `ZMQ_RCVTIMEO` in ms (-1 infinite).
    pub rcvtimeo: i32,
    /// `ZMQ_SNDTIMEO` in ms (-1 infinite).
    pub sndtimeo: i32,
    /// `ZMQ_IPV6` (false; inherited from the context's `ZMQ_IPV6`).
    pub ipv6: bool,
    /// `ZMQ_IMMEDIATE` (false).
    pub immediate: bool,
    /// `ZMQ_INVERT_MATCHING` (false).
    pub invert_matching: bool,
    /// `ZMQ_TCP_KEEPALIVE` (-1).
    pub tcp_keepalive: i32,
    /// `ZMQ_TCP_KEEPALIVE_CNT` (-1).
    pub tcp_keepalive_cnt: i32,
    /// `ZMQ_TCP_KEEPALIVE_IDLE` (-1).
    pub tcp_keepalive_idle: i32,
    /// `ZMQ_TCP_KEEPALIVE_INTVL` (-1).
    pub tcp_keepalive_intvl: i32,
    /// `ZMQ_TCP_ACCEPT_FILTER` entries; a peer is accepted if the list is empty or any matches.
    pub tcp_accept_filters: Vec<TcpAcceptFilter>,
    /// `ZMQ_IPC_FILTER_PID` set; see the ipc listener rules in [`Options::ipc_peer_allowed`].
    pub ipc_filter_pids: BTreeSet<i32>,
    /// `ZMQ_IPC_FILTER_UID` set.
    pub ipc_filter_uids: BTreeSet<u32>,
    /// `ZMQ_IPC_FILTER_GID` set.
    pub ipc_filter_gids: BTreeSet<u32>,
    /// The mechanism `ZMQ_MECHANISM` reports: [`NULL`], [`PLAIN`] or [`CURVE`].
    pub mechanism: i32,
    /// Whether the socket is the security server (`as_server`, shared by PLAIN and CURVE).
    pub as_server: bool,
    /// `ZMQ_PLAIN_USERNAME` (empty).
    pub plain_username: Vec<u8>,
    /// `ZMQ_PLAIN_PASSWORD` (empty).
    pub plain_password: Vec<u8>,
    /// `ZMQ_ZAP_DOMAIN` (empty).
    pub zap_domain: Vec<u8>,
    /// `ZMQ_ZAP_ENFORCE_DOMAIN` (false).
    pub zap_enforce_domain: bool,
    /// `ZMQ_CURVE_PUBLICKEY` (zeros).
    pub curve_publickey: [u8; 32],
    /// `ZMQ_CURVE_SECRETKEY` (zeros).
    pub curve_secretkey: [u8; 32],
    /// `ZMQ_CURVE_SERVERKEY` (zeros).
    pub curve_serverkey: [u8; 32],
    /// `ZMQ_CONFLATE` (false); libzmq applies it only to DEALER, PULL, PUSH, PUB and SUB pipes.
    pub conflate: bool,
    /// `ZMQ_HANDSHAKE_IVL` in ms (30000; 0 none).
    pub handshake_ivl: i32,
    /// `ZMQ_HEARTBEAT_IVL` in ms (0: off).
    pub heartbeat_ivl: i32,
    /// `ZMQ_HEARTBEAT_TTL` in deciseconds, as sent in PING (0); set and read in ms.
    pub heartbeat_ttl: u16,
    /// `ZMQ_HEARTBEAT_TIMEOUT` in ms (-1: use `heartbeat_ivl`).
    pub heartbeat_timeout: i32,
    /// `ZMQ_USE_FD` (-1).
    pub use_fd: i32,
    /// `ZMQ_BINDTODEVICE` (empty).
    pub bindtodevice: Vec<u8>,
    /// `ZMQ_SOCKS_PROXY` (empty).
    pub socks_proxy: Vec<u8>,
    /// `ZMQ_SOCKS_USERNAME` (empty).
    pub socks_username: Vec<u8>,
    /// `ZMQ_SOCKS_PASSWORD` (empty).
    pub socks_password: Vec<u8>,
    /// `ZMQ_LOOPBACK_FASTPATH` (false).
    pub loopback_fastpath: bool,
    /// `ZMQ_MULTICAST_LOOP` (true).
    pub multicast_loop: bool,
    /// `ZMQ_METADATA` properties (`X-` names), sorted by name; the first value set for a name wins.
    pub metadata: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Zero-copy receive, inherited from the context's `ZMQ_ZERO_COPY_RECV` (true).
    pub zero_copy: bool,
    /// `ZMQ_ROUTER_MANDATORY` (false).
    pub router_mandatory: bool,
    /// `ZMQ_ROUTER_HANDOVER` (false).
    pub router_handover: bool,
    /// `ZMQ_ROUTER_RAW`, the last value set (false).
    pub router_raw: bool,
    /// Raw (ZMTP-less) engine: true for STREAM, and for ROUTER once `ROUTER_RAW` was set to
    /// non-zero (setting it back to 0 does not clear this, as in libzmq).
    pub raw_socket: bool,
    /// Peers send their routing id (ROUTER until `ROUTER_RAW` is set).
    pub recv_routing_id: bool,
    /// `ZMQ_PROBE_ROUTER` (false).
    pub probe_router: bool,
    /// `ZMQ_REQ_CORRELATE` (false).
    pub req_correlate: bool,
    /// `ZMQ_REQ_RELAXED` (false).
    pub req_relaxed: bool,
    /// Pass on duplicate subscriptions: `XPUB_VERBOSE` or `XPUB_VERBOSER` (false).
    pub xpub_verbose: bool,
    /// Pass on unsubscriptions too: set by `XPUB_VERBOSER`, cleared by `XPUB_VERBOSE` (false).
    pub xpub_verboser: bool,
    /// `ZMQ_XPUB_NODROP` (false).
    pub xpub_nodrop: bool,
    /// Manual subscriptions: `XPUB_MANUAL` or `XPUB_MANUAL_LAST_VALUE` (false).
    pub xpub_manual: bool,
    /// Send only to the pipe that last subscribed: `XPUB_MANUAL_LAST_VALUE` (false).
    pub xpub_manual_last_value: bool,
    /// `ZMQ_ONLY_FIRST_SUBSCRIBE` (false).
    pub only_first_subscribe: bool,
    /// `ZMQ_XPUB_WELCOME_MSG` (none; an empty value clears it).
    pub xpub_welcome_msg: Option<Vec<u8>>,
    /// `ZMQ_STREAM_NOTIFY` (true): raw engines deliver connect/disconnect notifications.
    pub stream_notify: bool,
    /// `ZMQ_CONNECT_ROUTING_ID` (none); the socket takes it (clearing it) when it attaches the
    /// pipe of the next locally initiated connection.
    pub connect_routing_id: Option<Vec<u8>>,
    /// rzmq's own options ([`super::rzmq`]): defaults from the environment or the process.
    pub rzmq: RzmqOptions,
}

impl Options {
    /// Options with libzmq's defaults for a socket of the given type. Context-dependent
    /// defaults: see [`Options::with_ctx`].
    pub fn new(socket_type: SocketType) -> Self {
        Options {
            socket_type,
            sndhwm: 1000,
            rcvhwm: 1000,
            affinity: 0,
            routing_id: Vec::new(),
            rate: 100,
            recovery_ivl: 10000,
            multicast_hops: 1,
            multicast_maxtpdu: 1500,
            sndbuf: -1,
            rcvbuf: -1,
            tos: 0,
            linger: -1,
            connect_timeout: 0,
            tcp_maxrt: 0,
            reconnect_stop: 0,
            reconnect_ivl: 100,
            reconnect_ivl_max: 0,
            backlog: 100,
            maxmsgsize: -1,
            rcvtimeo: -1,
            sndtimeo: -1,
            ipv6: false,
            immediate: false,
            invert_matching: false,
            tcp_keepalive: -1,
            tcp_keepalive_cnt: -1,
            tcp_keepalive_idle: -1,
            tcp_keepalive_intvl: -1,
            tcp_accept_filters: Vec::new(),
            ipc_filter_pids: BTreeSet::new(),
            ipc_filter_uids: BTreeSet::new(),
            ipc_filter_gids: BTreeSet::new(),
            mechanism: NULL,
            as_server: false,
            plain_username: Vec::new(),
            plain_password: Vec::new(),
            zap_domain: Vec::new(),
            zap_enforce_domain: false,
            curve_publickey: [0; 32],
            curve_secretkey: [0; 32],
            curve_serverkey: [0; 32],
            conflate: false,
            handshake_ivl: 30000,
            heartbeat_ivl: 0,
            heartbeat_ttl: 0,
            heartbeat_timeout: -1,
            use_fd: -1,
            bindtodevice: Vec::new(),
            socks_proxy: Vec::new(),
            socks_username: Vec::new(),
            socks_password: Vec::new(),
            loopback_fastpath: false,
            multicast_loop: true,
            metadata: BTreeMap::new(),
            zero_copy: true,
            router_mandatory: false,
            router_handover: false,
            router_raw: false,
            raw_socket: socket_type == SocketType::Stream,
            recv_routing_id: socket_type == SocketType::Router,
            probe_router: false,
            req_correlate: false,
            req_relaxed: false,
            xpub_verbose: false,
            xpub_verboser: false,
            xpub_nodrop: false,
            xpub_manual: false,
            xpub_manual_last_value: false,
            only_first_subscribe: false,
            xpub_welcome_msg: None,
            stream_notify: true,
            connect_routing_id: None,
            rzmq: RzmqOptions::defaults(),
        }
    }

    /// Options for a new socket of a context, as `socket_base_t`'s constructor sets them:
    /// `ipv6` from the context's `ZMQ_IPV6`, `linger` -1 if the context is `BLOCKY` else 0,
    /// `zero_copy` from `ZMQ_ZERO_COPY_RECV`.
    pub fn with_ctx(socket_type: SocketType, ctx: &CtxOptions) -> Self {
        let mut o = Options::new(socket_type);
        o.ipv6 = ctx.ipv6;
        o.linger = if ctx.blocky { -1 } else { 0 };
        o.zero_copy = ctx.zero_copy_recv;
        o.rzmq.tcp_local_cc = ctx.tcp_local_cc.clone();
        o
    }

    /// `zmq_setsockopt` with a non-NULL value pointer (see [`Options::set_raw`]).
    pub fn set(&mut self, opt: i32, value: &[u8]) -> Result<Applied> {
        self.set_raw(opt, Some(value))
    }

    /// `zmq_setsockopt (s, opt, NULL, 0)`: clears the string and filter options that allow it
    /// (`SOCKS_PROXY`, `SOCKS_USERNAME`, `SOCKS_PASSWORD`, `BINDTODEVICE`, `TCP_ACCEPT_FILTER`,
    /// `IPC_FILTER_*`; `PLAIN_USERNAME`/`PLAIN_PASSWORD` reset the mechanism to NULL).
    pub fn set_null(&mut self, opt: i32) -> Result<Applied> {
        self.set_raw(opt, None)
    }

    /// `zmq_setsockopt` with the value as the C API passes it: `None` for a NULL pointer with
    /// length 0, else the bytes. libzmq tells these apart for some options: a NULL value clears
    /// them, while a non-NULL empty value is `EINVAL`. (A NULL pointer with a non-zero length
    /// is the C layer's to refuse.)
    pub fn set_raw(&mut self, opt: i32, value: Option<&[u8]>) -> Result<Applied> {
        if let Some(done) = self.rzmq.set(opt, value.unwrap_or(&[])) {
            return done.map(|()| Applied::Stored);
        }
        if let Some(applied) = self.set_pattern(opt, value.unwrap_or(&[]))? {
            return Ok(applied);
        }
        self.set_generic(opt, value)
    }

    /// The socket types' own options (`xsetsockopt`). `Ok(None)` means "not handled": libzmq
    /// then tries the generic options (which fail with `EINVAL` for all of these numbers).
    fn set_pattern(&mut self, opt: i32, v: &[u8]) -> Result<Option<Applied>> {
        use SocketType as T;
        let int = as_int(v);
        // The flag options of ROUTER, DEALER, REQ, XPUB: exactly an int, and >= 0.
        let flag = int.filter(|&x| x >= 0).map(|x| x != 0);
        let t = self.socket_type;
        let is_xpub = t == T::XPub || t == T::Pub;
        let done = Ok(Some(Applied::PatternFlag(opt)));
        match opt {
            SUBSCRIBE | UNSUBSCRIBE if t == T::Sub || (is_xpub && self.xpub_manual) => {
                let topic = v.to_vec();
                Ok(Some(if opt == SUBSCRIBE {
                    Applied::Subscribe(topic)
                } else {
                    Applied::Unsubscribe(topic)
                }))
            }
            ROUTER_RAW if t == T::Router => match flag {
                Some(b) => {
                    self.router_raw = b;
                    if b {
                        self.recv_routing_id = false;
                        self.raw_socket = true;
                    }
                    done
                }
                None => Ok(None),
            },
            ROUTER_MANDATORY if t == T::Router => set_flag(&mut self.router_mandatory, flag, opt),
            ROUTER_HANDOVER if t == T::Router => set_flag(&mut self.router_handover, flag, opt),
            PROBE_ROUTER if t == T::Router || t == T::Dealer || t == T::Req => {
                set_flag(&mut self.probe_router, flag, opt)
            }
            REQ_CORRELATE if t == T::Req => set_flag(&mut self.req_correlate, flag, opt),
            REQ_RELAXED if t == T::Req => set_flag(&mut self.req_relaxed, flag, opt),
            CONNECT_ROUTING_ID if t == T::Router || t == T::Stream => {
                if v.is_empty() {
                    return Ok(None);
                }
                self.connect_routing_id = Some(v.to_vec());
                done
            }
            STREAM_NOTIFY if t == T::Stream => match strict_bool(v) {
                Some(b) => {
                    self.stream_notify = b;
                    done
                }
                None => Ok(None),
            },
            XPUB_VERBOSE | XPUB_VERBOSER | XPUB_MANUAL_LAST_VALUE | XPUB_NODROP | XPUB_MANUAL
                if is_xpub =>
            {
                let Some(b) = flag else { return Ok(None) };
                match opt {
                    XPUB_VERBOSE => {
                        self.xpub_verbose = b;
                        self.xpub_verboser = false;
                    }
                    XPUB_VERBOSER => {
                        self.xpub_verbose = b;
                        self.xpub_verboser = b;
                    }
                    XPUB_MANUAL_LAST_VALUE => {
                        self.xpub_manual = b;
                        self.xpub_manual_last_value = b;
                    }
                    XPUB_NODROP => self.xpub_nodrop = b,
                    _ => self.xpub_manual = b,
                }
                done
            }
            ONLY_FIRST_SUBSCRIBE if is_xpub || t == T::XSub => {
                set_flag(&mut self.only_first_subscribe, flag, opt)
            }
            XPUB_WELCOME_MSG if is_xpub => {
                self.xpub_welcome_msg = if v.is_empty() { None } else { Some(v.to_vec()) };
                done
            }
            _ => Ok(None),
        }
    }

    /// The generic options (`options_t::setsockopt`).
    fn set_generic(&mut self, opt: i32, value: Option<&[u8]>) -> Result<Applied> {
        let is_null = value.is_none();
        let v = value.unwrap_or(&[]);
        let int = as_int(v);
        let stored = Ok(Applied::Stored);
        // An int satisfying a predicate, else EINVAL.
        let int_if = |pred: fn(i32) -> bool| int.filter(|&x| pred(x)).ok_or(Error::Inval);
        match opt {
            SNDHWM => {
                self.sndhwm = int_if(|x| x >= 0)?;
                Ok(Applied::Hwm)
            }
            RCVHWM => {
                self.rcvhwm = int_if(|x| x >= 0)?;
                Ok(Applied::Hwm)
            }
            AFFINITY => {
                self.affinity = u64::from_ne_bytes(v.try_into().map_err(|_| Error::Inval)?);
                stored
            }
            ROUTING_ID => {
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                self.routing_id = v.to_vec();
                stored
            }
            RATE => set_int(&mut self.rate, int_if(|x| x > 0)),
            RECOVERY_IVL => set_int(&mut self.recovery_ivl, int_if(|x| x >= 0)),
            SNDBUF => set_int(&mut self.sndbuf, int_if(|x| x >= -1)),
            RCVBUF => set_int(&mut self.rcvbuf, int_if(|x| x >= -1)),
            TOS => set_int(&mut self.tos, int_if(|x| x >= 0)),
            LINGER => set_int(&mut self.linger, int_if(|x| x >= -1)),
            CONNECT_TIMEOUT => set_int(&mut self.connect_timeout, int_if(|x| x >= 0)),
            TCP_MAXRT => set_int(&mut self.tcp_maxrt, int_if(|x| x >= 0)),
            RECONNECT_STOP => set_int(&mut self.reconnect_stop, int_if(|_| true)),
            RECONNECT_IVL => set_int(&mut self.reconnect_ivl, int_if(|x| x >= -1)),
            RECONNECT_IVL_MAX => set_int(&mut self.reconnect_ivl_max, int_if(|x| x >= 0)),
            BACKLOG => set_int(&mut self.backlog, int_if(|x| x >= 0)),
            MAXMSGSIZE => {
                self.maxmsgsize = i64::from_ne_bytes(v.try_into().map_err(|_| Error::Inval)?);
                stored
            }
            MULTICAST_HOPS => set_int(&mut self.multicast_hops, int_if(|x| x > 0)),
            MULTICAST_MAXTPDU => set_int(&mut self.multicast_maxtpdu, int_if(|x| x > 0)),
            RCVTIMEO => set_int(&mut self.rcvtimeo, int_if(|x| x >= -1)),
            SNDTIMEO => set_int(&mut self.sndtimeo, int_if(|x| x >= -1)),
            IPV4ONLY => {
                self.ipv6 = !strict_bool(v).ok_or(Error::Inval)?;
                stored
            }
            IPV6 => set_bool(&mut self.ipv6, strict_bool(v)),
            SOCKS_PROXY => set_string_strict(&mut self.socks_proxy, value, usize::MAX),
            SOCKS_USERNAME | SOCKS_PASSWORD => {
                let field = if opt == SOCKS_USERNAME {
                    &mut self.socks_username
                } else {
                    &mut self.socks_password
                };
                if v.is_empty() {
                    field.clear();
                    return stored;
                }
                set_string_strict(field, value, 255)
            }
            TCP_KEEPALIVE => set_int(&mut self.tcp_keepalive, int_if(|x| (-1..=1).contains(&x))),
            TCP_KEEPALIVE_CNT => set_int(&mut self.tcp_keepalive_cnt, int_if(|x| x >= -1)),
            TCP_KEEPALIVE_IDLE => set_int(&mut self.tcp_keepalive_idle, int_if(|x| x >= -1)),
            TCP_KEEPALIVE_INTVL => set_int(&mut self.tcp_keepalive_intvl, int_if(|x| x >= -1)),
            IMMEDIATE => set_bool(&mut self.immediate, strict_bool(v)),
            TCP_ACCEPT_FILTER => {
                if is_null {
                    self.tcp_accept_filters.clear();
                    return stored;
                }
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                // libzmq parses the C string, which ends at the first NUL.
                let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
                if text.is_empty() {
                    self.tcp_accept_filters.clear();
                    return stored;
                }
                let text = std::str::from_utf8(text).map_err(|_| Error::Inval)?;
                self.tcp_accept_filters
                    .push(TcpAcceptFilter::parse(text, self.ipv6)?);
                stored
            }
            IPC_FILTER_PID => set_filter(&mut self.ipc_filter_pids, value, i32::from_ne_bytes),
            IPC_FILTER_UID => set_filter(&mut self.ipc_filter_uids, value, u32::from_ne_bytes),
            IPC_FILTER_GID => set_filter(&mut self.ipc_filter_gids, value, u32::from_ne_bytes),
            PLAIN_SERVER => {
                let b = strict_bool(v).ok_or(Error::Inval)?;
                self.as_server = b;
                self.mechanism = if b { PLAIN } else { NULL };
                stored
            }
            PLAIN_USERNAME | PLAIN_PASSWORD => {
                if is_null {
                    self.mechanism = NULL;
                    return stored;
                }
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                if opt == PLAIN_USERNAME {
                    self.plain_username = v.to_vec();
                } else {
                    self.plain_password = v.to_vec();
                }
                self.as_server = false;
                self.mechanism = PLAIN;
                stored
            }
            ZAP_DOMAIN => {
                // do_setsockopt_string_allow_empty_relaxed: despite its name, empty is EINVAL.
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                self.zap_domain = v.to_vec();
                stored
            }
            CURVE_SERVER if HAVE_CURVE => {
                let b = strict_bool(v).ok_or(Error::Inval)?;
                self.as_server = b;
                self.mechanism = if b { CURVE } else { NULL };
                stored
            }
            CURVE_PUBLICKEY | CURVE_SECRETKEY | CURVE_SERVERKEY if HAVE_CURVE => {
                let key = parse_curve_key(v).ok_or(Error::Inval)?;
                match opt {
                    CURVE_PUBLICKEY => self.curve_publickey = key,
                    CURVE_SECRETKEY => self.curve_secretkey = key,
                    _ => {
                        self.curve_serverkey = key;
                        self.as_server = false;
                    }
                }
                self.mechanism = CURVE;
                stored
            }
            CONFLATE => set_bool(&mut self.conflate, strict_bool(v)),
            HANDSHAKE_IVL => set_int(&mut self.handshake_ivl, int_if(|x| x >= 0)),
            INVERT_MATCHING => set_bool(&mut self.invert_matching, relaxed_bool(v)),
            HEARTBEAT_IVL => set_int(&mut self.heartbeat_ivl, int_if(|x| x >= 0)),
            HEARTBEAT_TTL => {
                // libzmq converts to deciseconds (truncating toward zero) before the range check,
                // so -99..=6553599 ms are accepted.
                let ds = int
                    .map(|x| x / 100)
                    .filter(|&x| (0..=i32::from(u16::MAX)).contains(&x));
                self.heartbeat_ttl = ds.ok_or(Error::Inval)? as u16;
                stored
            }
            HEARTBEAT_TIMEOUT => set_int(&mut self.heartbeat_timeout, int_if(|x| x >= 0)),
            USE_FD => set_int(&mut self.use_fd, int_if(|x| x >= -1)),
            BINDTODEVICE => set_string_strict(&mut self.bindtodevice, value, BINDDEVSIZ),
            ZAP_ENFORCE_DOMAIN => set_bool(&mut self.zap_enforce_domain, relaxed_bool(v)),
            LOOPBACK_FASTPATH => set_bool(&mut self.loopback_fastpath, relaxed_bool(v)),
            METADATA => {
                // Not 4 bytes long (libzmq's is_int check), "X-name:value" with a non-empty value.
                if v.is_empty() || v.len() == 4 {
                    return Err(Error::Inval);
                }
                let pos = v.iter().position(|&b| b == b':').ok_or(Error::Inval)?;
                if pos == 0 || pos == v.len() - 1 {
                    return Err(Error::Inval);
                }
                let key = &v[..pos];
                if !key.starts_with(b"X-") || key.len() > 255 {
                    return Err(Error::Inval);
                }
                self.metadata
                    .entry(key.to_vec())
                    .or_insert_with(|| v[pos + 1..].to_vec());
                stored
            }
            MULTICAST_LOOP => set_bool(&mut self.multicast_loop, relaxed_bool(v)),
            _ => Err(Error::Inval),
        }
    }

    /// `zmq_getsockopt` for the options kept here (`options_t::getsockopt`).
    ///
    /// `EINVAL` for unknown and write-only options, for features not built (CURVE, GSSAPI, VMCI)
    /// and for the socket-level options ([`is_socket_level`]), which the socket answers before
    /// calling this. The buffer-size rules are applied by [`OptValue::write_to`].
    pub fn get(&self, opt: i32) -> Result<OptValue> {
        use OptValue::{Bytes, Int, Int64, Str, UInt64};
        let b = |x: bool| Int(i32::from(x));
        Ok(match opt {
            SNDHWM => Int(self.sndhwm),
            RCVHWM => Int(self.rcvhwm),
            AFFINITY => UInt64(self.affinity),
            ROUTING_ID => Bytes(self.routing_id.clone()),
            RATE => Int(self.rate),
            RECOVERY_IVL => Int(self.recovery_ivl),
            SNDBUF => Int(self.sndbuf),
            RCVBUF => Int(self.rcvbuf),
            TOS => Int(self.tos),
            TYPE => Int(self.socket_type.as_i32()),
            LINGER => Int(self.linger),
            CONNECT_TIMEOUT => Int(self.connect_timeout),
            TCP_MAXRT => Int(self.tcp_maxrt),
            RECONNECT_STOP => Int(self.reconnect_stop),
            RECONNECT_IVL => Int(self.reconnect_ivl),
            RECONNECT_IVL_MAX => Int(self.reconnect_ivl_max),
            BACKLOG => Int(self.backlog),
            MAXMSGSIZE => Int64(self.maxmsgsize),
            MULTICAST_HOPS => Int(self.multicast_hops),
            MULTICAST_MAXTPDU => Int(self.multicast_maxtpdu),
            RCVTIMEO => Int(self.rcvtimeo),
            SNDTIMEO => Int(self.sndtimeo),
            IPV4ONLY => b(!self.ipv6),
            IPV6 => b(self.ipv6),
            IMMEDIATE => b(self.immediate),
            SOCKS_PROXY => Str(self.socks_proxy.clone()),
            SOCKS_USERNAME => Str(self.socks_username.clone()),
            SOCKS_PASSWORD => Str(self.socks_password.clone()),
            TCP_KEEPALIVE => Int(self.tcp_keepalive),
            TCP_KEEPALIVE_CNT => Int(self.tcp_keepalive_cnt),
            TCP_KEEPALIVE_IDLE => Int(self.tcp_keepalive_idle),
            TCP_KEEPALIVE_INTVL => Int(self.tcp_keepalive_intvl),
            MECHANISM => Int(self.mechanism),
            PLAIN_SERVER => b(self.as_server && self.mechanism == PLAIN),
            PLAIN_USERNAME => Str(self.plain_username.clone()),
            PLAIN_PASSWORD => Str(self.plain_password.clone()),
            ZAP_DOMAIN => Str(self.zap_domain.clone()),
            CURVE_SERVER if HAVE_CURVE => b(self.as_server && self.mechanism == CURVE),
            CURVE_PUBLICKEY if HAVE_CURVE => OptValue::CurveKey(self.curve_publickey),
            CURVE_SECRETKEY if HAVE_CURVE => OptValue::CurveKey(self.curve_secretkey),
            CURVE_SERVERKEY if HAVE_CURVE => OptValue::CurveKey(self.curve_serverkey),
            CONFLATE => b(self.conflate),
            HANDSHAKE_IVL => Int(self.handshake_ivl),
            INVERT_MATCHING => b(self.invert_matching),
            HEARTBEAT_IVL => Int(self.heartbeat_ivl),
            HEARTBEAT_TTL => Int(i32::from(self.heartbeat_ttl) * 100),
            HEARTBEAT_TIMEOUT => Int(self.heartbeat_timeout),
            USE_FD => Int(self.use_fd),
            BINDTODEVICE => Str(self.bindtodevice.clone()),
            ZAP_ENFORCE_DOMAIN => b(self.zap_enforce_domain),
            LOOPBACK_FASTPATH => b(self.loopback_fastpath),
            MULTICAST_LOOP => b(self.multicast_loop),
            _ => Int(self.rzmq.get(opt).ok_or(Error::Inval)?),
        })
    }

    /// Whether an ipc peer with these credentials passes the `IPC_FILTER_*` sets, as libzmq's
    /// ipc listener checks them: with no filters every peer passes; otherwise the uid or gid
    /// must be listed, or the pid, or one of the groups the uid's user belongs to (the caller
    /// resolves those, libzmq uses `getpwuid`/`getgrgid`).
    pub fn ipc_peer_allowed(&self, pid: i32, uid: u32, gid: u32, user_groups: &[u32]) -> bool {
        if self.ipc_filter_uids.is_empty()
            && self.ipc_filter_gids.is_empty()
            && self.ipc_filter_pids.is_empty()
        {
            return true;
        }
        self.ipc_filter_uids.contains(&uid)
            || self.ipc_filter_gids.contains(&gid)
            || self.ipc_filter_pids.contains(&pid)
            || user_groups.iter().any(|g| self.ipc_filter_gids.contains(g))
    }

    /// Whether a tcp peer passes `TCP_ACCEPT_FILTER`: yes if there are no filters or one matches.
    pub fn tcp_peer_allowed(&self, peer: &SocketAddr) -> bool {
        self.tcp_accept_filters.is_empty()
            || self.tcp_accept_filters.iter().any(|f| f.matches(peer))
    }

    /// Whether `CONFLATE` applies to this socket type (DEALER, PULL, PUSH, PUB, SUB), as
    /// libzmq's `get_effective_conflate_option`.
    pub fn effective_conflate(&self) -> bool {
        self.conflate
            && matches!(
                self.socket_type,
                SocketType::Dealer
                    | SocketType::Pull
                    | SocketType::Push
                    | SocketType::Pub
                    | SocketType::Sub
            )
    }

    /// The heartbeat timeout in ms: `HEARTBEAT_TIMEOUT`, or `HEARTBEAT_IVL` when that is -1.
    pub fn effective_heartbeat_timeout(&self) -> i32 {
        if self.heartbeat_timeout == -1 {
            self.heartbeat_ivl
        } else {
            self.heartbeat_timeout
        }
    }

    /// Takes `CONNECT_ROUTING_ID` for a locally initiated pipe (ROUTER/STREAM), clearing it.
    pub fn take_connect_routing_id(&mut self) -> Option<Vec<u8>> {
        self.connect_routing_id.take()
    }
}

/// The value as an `int` if it is exactly 4 bytes.
pub(super) fn as_int(v: &[u8]) -> Option<i32> {
    v.try_into().ok().map(i32::from_ne_bytes)
}

/// `do_setsockopt_int_as_bool_strict`: an int that is 0 or 1.
fn strict_bool(v: &[u8]) -> Option<bool> {
    match as_int(v)? {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// `do_setsockopt_int_as_bool_relaxed`: any int, non-zero is true.
fn relaxed_bool(v: &[u8]) -> Option<bool> {
    as_int(v).map(|x| x != 0)
}

/// Stores a validated int.
fn set_int(field: &mut i32, value: Result<i32>) -> Result<Applied> {
    *field = value?;
    Ok(Applied::Stored)
}

/// Stores a validated bool.
fn set_bool(field: &mut bool, value: Option<bool>) -> Result<Applied> {
    *field = value.ok_or(Error::Inval)?;
    Ok(Applied::Stored)
}

/// Stores a socket-type flag; `Ok(None)` (fall through to `EINVAL`) when the value is invalid.
fn set_flag(field: &mut bool, value: Option<bool>, opt: i32) -> Result<Option<Applied>> {
    Ok(value.map(|b| {
        *field = b;
        Applied::PatternFlag(opt)
    }))
}

/// `do_setsockopt_string_allow_empty_strict`: NULL clears, 1 to `max` bytes set, else `EINVAL`.
fn set_string_strict(field: &mut Vec<u8>, value: Option<&[u8]>, max: usize) -> Result<Applied> {
    match value {
        None => field.clear(),
        Some(v) if !v.is_empty() && v.len() <= max => *field = v.to_vec(),
        Some(_) => return Err(Error::Inval),
    }
    Ok(Applied::Stored)
}

/// `do_setsockopt_set`: NULL clears the set, exactly 4 bytes add a member, else `EINVAL`.
fn set_filter<T: Ord>(
    set: &mut BTreeSet<T>,
    value: Option<&[u8]>,
    conv: fn([u8; 4]) -> T,
) -> Result<Applied> {
    match value {
        None => set.clear(),
        Some(v) => {
            let bytes: [u8; 4] = v.try_into().map_err(|_| Error::Inval)?;
            set.insert(conv(bytes));
        }
    }
    Ok(Applied::Stored)
}

/// `options_t::set_curve_key`: 32 raw bytes, 40 Z85 characters, or 41 (Z85 and a terminator).
fn parse_curve_key(v: &[u8]) -> Option<[u8; 32]> {
    match v.len() {
        z85::KEY_LEN => v.try_into().ok(),
        n if n == z85::KEY_TEXT_LEN || n == z85::KEY_TEXT_LEN + 1 => {
            // libzmq decodes the C string, which must be exactly 40 characters long.
            let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
            if text.len() != z85::KEY_TEXT_LEN {
                return None;
            }
            z85::decode(text)?.try_into().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::context::*;
    use crate::zmtp::SocketType as T;

    fn i(v: i32) -> [u8; 4] {
        v.to_ne_bytes()
    }

    fn get_int(o: &Options, opt: i32) -> i32 {
        match o.get(opt).unwrap() {
            OptValue::Int(v) => v,
            other => panic!("option {opt}: {other:?}"),
        }
    }

    /// Every int option with a valid and (if any) invalid value.
    const INT_OPTS: &[(i32, i32, i32, Option<i32>)] = &[
        // (option, default, valid value, invalid value)
        (SNDHWM, 1000, 0, Some(-1)),
        (RCVHWM, 1000, 5, Some(-1)),
        (RATE, 100, 1, Some(0)),
        (RECOVERY_IVL, 10000, 0, Some(-1)),
        (SNDBUF, -1, 16384, Some(-2)),
        (RCVBUF, -1, 16384, Some(-2)),
        (TOS, 0, 0x28, Some(-1)),
        (LINGER, -1, 0, Some(-2)),
        (CONNECT_TIMEOUT, 0, 500, Some(-1)),
        (TCP_MAXRT, 0, 500, Some(-1)),
        (RECONNECT_STOP, 0, 7, None),
        (RECONNECT_IVL, 100, -1, Some(-2)),
        (RECONNECT_IVL_MAX, 0, 1000, Some(-1)),
        (BACKLOG, 100, 0, Some(-1)),
        (MULTICAST_HOPS, 1, 5, Some(0)),
        (MULTICAST_MAXTPDU, 1500, 9000, Some(0)),
        (RCVTIMEO, -1, 0, Some(-2)),
        (SNDTIMEO, -1, 250, Some(-2)),
        (TCP_KEEPALIVE, -1, 1, Some(2)),
        (TCP_KEEPALIVE_CNT, -1, 3, Some(-2)),
        (TCP_KEEPALIVE_IDLE, -1, 60, Some(-2)),
        (TCP_KEEPALIVE_INTVL, -1, 10, Some(-2)),
        (HANDSHAKE_IVL, 30000, 0, Some(-1)),
        (HEARTBEAT_IVL, 0, 100, Some(-1)),
        (HEARTBEAT_TIMEOUT, -1, 300, Some(-1)),
        (USE_FD, -1, 3, Some(-2)),
        (IPV6, 0, 1, Some(2)),
        (IPV4ONLY, 1, 0, Some(2)),
        (IMMEDIATE, 0, 1, Some(2)),
        (CONFLATE, 0, 1, Some(2)),
        (INVERT_MATCHING, 0, 1, None),
        (ZAP_ENFORCE_DOMAIN, 0, 1, None),
        (LOOPBACK_FASTPATH, 0, 1, None),
        (MULTICAST_LOOP, 1, 0, None),
    ];

    #[test]
    fn defaults() {
        let o = Options::new(T::Dealer);
        for &(opt, dflt, _, _) in INT_OPTS {
            assert_eq!(get_int(&o, opt), dflt, "option {opt}");
        }
        assert_eq!(get_int(&o, TYPE), T::Dealer as i32);
        assert_eq!(get_int(&o, MECHANISM), NULL);
        assert_eq!(get_int(&o, PLAIN_SERVER), 0);
        assert_eq!(get_int(&o, HEARTBEAT_TTL), 0);
        assert_eq!(o.get(AFFINITY).unwrap(), OptValue::UInt64(0));
        assert_eq!(o.get(MAXMSGSIZE).unwrap(), OptValue::Int64(-1));
        assert_eq!(o.get(ROUTING_ID).unwrap(), OptValue::Bytes(vec![]));
        for opt in [
            SOCKS_PROXY,
            SOCKS_USERNAME,
            SOCKS_PASSWORD,
            PLAIN_USERNAME,
            PLAIN_PASSWORD,
            ZAP_DOMAIN,
            BINDTODEVICE,
        ] {
            assert_eq!(o.get(opt).unwrap(), OptValue::Str(vec![]), "option {opt}");
        }
        assert!(o.stream_notify && !o.raw_socket && !o.recv_routing_id && o.zero_copy);
        assert!(Options::new(T::Stream).raw_socket);
        assert!(Options::new(T::Router).recv_routing_id);
    }

    #[test]
    fn int_round_trips_and_range() {
        for &(opt, _, good, bad) in INT_OPTS {
            let mut o = Options::new(T::Pair);
            assert_eq!(
                o.set(opt, &i(good)),
                Ok(Applied::Stored).map(|a| if opt == SNDHWM || opt == RCVHWM {
                    Applied::Hwm
                } else {
                    a
                })
            );
            assert_eq!(get_int(&o, opt), good, "option {opt}");
            if let Some(bad) = bad {
                assert_eq!(
                    o.set(opt, &i(bad)),
                    Err(Error::Inval),
                    "option {opt} value {bad}"
                );
                assert_eq!(get_int(&o, opt), good, "option {opt} unchanged");
            }
            // Wrong sizes.
            assert_eq!(o.set(opt, &[1, 0]), Err(Error::Inval), "option {opt}");
            assert_eq!(
                o.set(opt, &1i64.to_ne_bytes()),
                Err(Error::Inval),
                "option {opt}"
            );
            assert_eq!(o.set(opt, &[]), Err(Error::Inval), "option {opt}");
            assert_eq!(o.set_null(opt), Err(Error::Inval), "option {opt}");
        }
    }

    #[test]
    fn relaxed_bools() {
        let mut o = Options::new(T::Sub);
        o.set(INVERT_MATCHING, &i(7)).unwrap();
        assert_eq!(get_int(&o, INVERT_MATCHING), 1);
        o.set(MULTICAST_LOOP, &i(-3)).unwrap();
        assert_eq!(get_int(&o, MULTICAST_LOOP), 1);
        o.set(IPV4ONLY, &i(0)).unwrap();
        assert!(o.ipv6);
        assert_eq!(get_int(&o, IPV6), 1);
    }

    #[test]
    fn sixty_four_bit_options() {
        let mut o = Options::new(T::Push);
        o.set(AFFINITY, &3u64.to_ne_bytes()).unwrap();
        assert_eq!(o.get(AFFINITY).unwrap(), OptValue::UInt64(3));
        o.set(MAXMSGSIZE, &(-5i64).to_ne_bytes()).unwrap();
        assert_eq!(o.get(MAXMSGSIZE).unwrap(), OptValue::Int64(-5));
        assert_eq!(o.set(AFFINITY, &i(1)), Err(Error::Inval));
        assert_eq!(o.set(MAXMSGSIZE, &i(1)), Err(Error::Inval));
        let mut buf = [0u8; 4];
        assert_eq!(
            o.get(MAXMSGSIZE).unwrap().write_to(&mut buf),
            Err(Error::Inval)
        );
        let mut buf = [0u8; 8];
        assert_eq!(o.get(MAXMSGSIZE).unwrap().write_to(&mut buf), Ok(8));
        assert_eq!(i64::from_ne_bytes(buf), -5);
    }

    #[test]
    fn heartbeat_ttl_in_deciseconds() {
        let mut o = Options::new(T::Dealer);
        o.set(HEARTBEAT_TTL, &i(1234)).unwrap();
        assert_eq!(o.heartbeat_ttl, 12);
        assert_eq!(get_int(&o, HEARTBEAT_TTL), 1200);
        o.set(HEARTBEAT_TTL, &i(6_553_599)).unwrap();
        assert_eq!(o.heartbeat_ttl, u16::MAX);
        assert_eq!(o.set(HEARTBEAT_TTL, &i(6_553_600)), Err(Error::Inval));
        o.set(HEARTBEAT_TTL, &i(-99)).unwrap();
        assert_eq!(o.heartbeat_ttl, 0);
        assert_eq!(o.set(HEARTBEAT_TTL, &i(-100)), Err(Error::Inval));
        assert_eq!(o.effective_heartbeat_timeout(), 0);
        o.set(HEARTBEAT_IVL, &i(50)).unwrap();
        assert_eq!(o.effective_heartbeat_timeout(), 50);
    }

    #[test]
    fn routing_id() {
        let mut o = Options::new(T::Dealer);
        assert_eq!(o.set(ROUTING_ID, b""), Err(Error::Inval));
        assert_eq!(o.set(ROUTING_ID, &[1u8; 256]), Err(Error::Inval));
        o.set(ROUTING_ID, &[7u8; 255]).unwrap();
        o.set(IDENTITY, b"\0abc").unwrap();
        assert_eq!(
            o.get(ROUTING_ID).unwrap(),
            OptValue::Bytes(b"\0abc".to_vec())
        );
        let mut buf = [9u8; 8];
        assert_eq!(o.get(ROUTING_ID).unwrap().write_to(&mut buf), Ok(4));
        assert_eq!(buf, *b"\0abc\0\0\0\0");
        let mut small = [0u8; 3];
        assert_eq!(
            o.get(ROUTING_ID).unwrap().write_to(&mut small),
            Err(Error::Inval)
        );
    }

    #[test]
    fn strings() {
        let mut o = Options::new(T::Push);
        // SOCKS_PROXY: NULL clears, non-NULL empty is EINVAL, any length otherwise.
        o.set(SOCKS_PROXY, b"127.0.0.1:1080").unwrap();
        assert_eq!(
            o.get(SOCKS_PROXY).unwrap(),
            OptValue::Str(b"127.0.0.1:1080".to_vec())
        );
        assert_eq!(o.set(SOCKS_PROXY, b""), Err(Error::Inval));
        o.set_null(SOCKS_PROXY).unwrap();
        assert!(o.socks_proxy.is_empty());
        // SOCKS_USERNAME/PASSWORD: empty or NULL clears, up to 255 bytes.
        o.set(SOCKS_USERNAME, b"me").unwrap();
        o.set(SOCKS_PASSWORD, b"pw").unwrap();
        assert_eq!(
            o.get(SOCKS_USERNAME).unwrap(),
            OptValue::Str(b"me".to_vec())
        );
        assert_eq!(o.set(SOCKS_USERNAME, &[b'a'; 256]), Err(Error::Inval));
        o.set(SOCKS_USERNAME, b"").unwrap();
        o.set_null(SOCKS_PASSWORD).unwrap();
        assert!(o.socks_username.is_empty() && o.socks_password.is_empty());
        // BINDTODEVICE: up to IFNAMSIZ bytes.
        o.set(BINDTODEVICE, b"testdev").unwrap();
        let mut buf = [0xffu8; 16];
        assert_eq!(o.get(BINDTODEVICE).unwrap().write_to(&mut buf), Ok(8));
        assert_eq!(&buf[..8], b"testdev\0");
        assert!(buf[8..].iter().all(|&b| b == 0));
        assert_eq!(o.set(BINDTODEVICE, &[b'a'; 17]), Err(Error::Inval));
        o.set(BINDTODEVICE, &[b'a'; 16]).unwrap();
        o.set_null(BINDTODEVICE).unwrap();
        let mut buf = [0xffu8; 16];
        assert_eq!(o.get(BINDTODEVICE).unwrap().write_to(&mut buf), Ok(1));
        assert_eq!(buf[0], 0);
        // Strings need room for the NUL.
        o.set(ZAP_DOMAIN, b"global").unwrap();
        assert_eq!(
            o.get(ZAP_DOMAIN).unwrap().write_to(&mut [0u8; 6]),
            Err(Error::Inval)
        );
        assert_eq!(o.get(ZAP_DOMAIN).unwrap().write_to(&mut [0u8; 7]), Ok(7));
        // ZAP_DOMAIN: 1 to 255 bytes; empty is EINVAL even as NULL.
        assert_eq!(o.set(ZAP_DOMAIN, b""), Err(Error::Inval));
        assert_eq!(o.set_null(ZAP_DOMAIN), Err(Error::Inval));
        assert_eq!(o.set(ZAP_DOMAIN, &[b'd'; 256]), Err(Error::Inval));
    }

    #[test]
    fn int_buffers_must_be_exact() {
        let o = Options::new(T::Pair);
        let v = o.get(SNDHWM).unwrap();
        assert_eq!(v.write_to(&mut [0u8; 8]), Err(Error::Inval));
        assert_eq!(v.write_to(&mut [0u8; 2]), Err(Error::Inval));
        let mut buf = [0u8; 4];
        assert_eq!(v.write_to(&mut buf), Ok(4));
        assert_eq!(i32::from_ne_bytes(buf), 1000);
        // Socket-level ints take any buffer of 4 bytes or more.
        let mut big = [0xffu8; 8];
        assert_eq!(OptValue::IntRelaxed(1).write_to(&mut big), Ok(4));
        assert_eq!(big, [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            OptValue::IntRelaxed(1).write_to(&mut [0u8; 3]),
            Err(Error::Inval)
        );
        assert_eq!(
            o.get(AFFINITY).unwrap().write_to(&mut [0u8; 4]),
            Err(Error::Inval)
        );
    }

    #[test]
    fn plain_mechanism() {
        let mut o = Options::new(T::Rep);
        o.set(PLAIN_SERVER, &i(1)).unwrap();
        assert_eq!(get_int(&o, MECHANISM), PLAIN);
        assert_eq!(get_int(&o, PLAIN_SERVER), 1);
        assert_eq!(o.set(PLAIN_SERVER, &i(2)), Err(Error::Inval));
        o.set(PLAIN_SERVER, &i(0)).unwrap();
        assert_eq!(get_int(&o, MECHANISM), NULL);

        let mut c = Options::new(T::Req);
        c.set(PLAIN_USERNAME, b"admin").unwrap();
        assert_eq!(get_int(&c, MECHANISM), PLAIN);
        assert_eq!(get_int(&c, PLAIN_SERVER), 0);
        c.set(PLAIN_PASSWORD, b"secret").unwrap();
        assert_eq!(
            c.get(PLAIN_USERNAME).unwrap(),
            OptValue::Str(b"admin".to_vec())
        );
        assert_eq!(
            c.get(PLAIN_PASSWORD).unwrap(),
            OptValue::Str(b"secret".to_vec())
        );
        assert_eq!(c.set(PLAIN_USERNAME, b""), Err(Error::Inval));
        assert_eq!(c.set(PLAIN_USERNAME, &[b'u'; 256]), Err(Error::Inval));
        // NULL resets the mechanism but keeps the stored name.
        c.set_null(PLAIN_USERNAME).unwrap();
        assert_eq!(get_int(&c, MECHANISM), NULL);
        assert_eq!(c.plain_username, b"admin");
        // A username after PLAIN_SERVER makes the socket a client.
        let mut s = Options::new(T::Rep);
        s.set(PLAIN_SERVER, &i(1)).unwrap();
        s.set(PLAIN_USERNAME, b"x").unwrap();
        assert_eq!(get_int(&s, PLAIN_SERVER), 0);
    }

    #[test]
    fn features_not_built() {
        let mut o = Options::new(T::Dealer);
        for opt in [
            GSSAPI_SERVER,
            GSSAPI_PRINCIPAL,
            GSSAPI_SERVICE_PRINCIPAL,
            GSSAPI_PLAINTEXT,
            GSSAPI_PRINCIPAL_NAMETYPE,
            GSSAPI_SERVICE_PRINCIPAL_NAMETYPE,
            VMCI_BUFFER_SIZE,
            VMCI_BUFFER_MIN_SIZE,
            VMCI_BUFFER_MAX_SIZE,
            VMCI_CONNECT_TIMEOUT,
        ] {
            assert_eq!(o.set(opt, &i(0)), Err(Error::Inval), "option {opt}");
            assert_eq!(o.set(opt, b"name"), Err(Error::Inval), "option {opt}");
            assert_eq!(
                o.set(opt, &0u64.to_ne_bytes()),
                Err(Error::Inval),
                "option {opt}"
            );
            assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
        }
        // DRAFT-only options of a stable build.
        for opt in [
            ROUTER_NOTIFY,
            IN_BATCH_SIZE,
            OUT_BATCH_SIZE,
            HELLO_MSG,
            DISCONNECT_MSG,
            PRIORITY,
            BUSY_POLL,
        ] {
            assert_eq!(o.set(opt, &i(1)), Err(Error::Inval), "option {opt}");
            assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
        }
        let mut r = Options::new(T::Router);
        assert_eq!(r.set(ROUTER_NOTIFY, &i(1)), Err(Error::Inval));
        let mut x = Options::new(T::XSub);
        assert_eq!(x.set(XSUB_VERBOSE_UNSUBSCRIBE, &i(1)), Err(Error::Inval));
        assert_eq!(get_int(&o, MECHANISM), NULL);
    }

    #[test]
    fn curve_keys_when_built() {
        // Z85 test vector of ZeroMQ RFC 32.
        let raw = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
        assert_eq!(z85::decode(b"HelloWorld").unwrap(), raw);
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&raw);
        let text = z85::encode_key(&key);
        assert_eq!(&text[..10], b"HelloWorld");
        assert_eq!(parse_curve_key(&key), Some(key));
        assert_eq!(parse_curve_key(&text), Some(key));
        let mut with_nul = text.to_vec();
        with_nul.push(0);
        assert_eq!(parse_curve_key(&with_nul), Some(key));
        assert_eq!(parse_curve_key(&text[..39]), None);
        assert_eq!(
            parse_curve_key(b"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~"),
            None
        );
        let v = OptValue::CurveKey(key);
        let mut b32 = [0u8; 32];
        assert_eq!(v.write_to(&mut b32), Ok(32));
        assert_eq!(b32, key);
        let mut b41 = [0u8; 41];
        assert_eq!(v.write_to(&mut b41), Ok(41));
        assert_eq!(&b41[..40], &text[..]);
        assert_eq!(b41[40], 0);
        assert_eq!(v.write_to(&mut [0u8; 40]), Err(Error::Inval));

        // Through set/get, as libzmq built with libsodium.
        const { assert!(HAVE_CURVE) };
        let mut o = Options::new(T::Dealer);
        assert_eq!(get_int(&o, CURVE_SERVER), 0);
        o.set(CURVE_SERVER, &i(1)).unwrap();
        assert_eq!(get_int(&o, MECHANISM), CURVE);
        assert_eq!(get_int(&o, CURVE_SERVER), 1);
        o.set(CURVE_SECRETKEY, &with_nul).unwrap();
        assert_eq!(o.curve_secretkey, key);
        assert_eq!(
            get_int(&o, CURVE_SERVER),
            1,
            "a secret key keeps the server role"
        );
        o.set(CURVE_SERVERKEY, &key).unwrap();
        assert_eq!(get_int(&o, CURVE_SERVER), 0, "a server key makes a client");
        assert_eq!(get_int(&o, MECHANISM), CURVE);
        o.set(CURVE_PUBLICKEY, &text).unwrap();
        assert_eq!(o.get(CURVE_PUBLICKEY), Ok(OptValue::CurveKey(key)));
        for opt in [CURVE_PUBLICKEY, CURVE_SECRETKEY, CURVE_SERVERKEY] {
            assert_eq!(o.set(opt, &[1u8; 123]), Err(Error::Inval));
            assert_eq!(o.set(opt, &[1u8; 31]), Err(Error::Inval));
        }
        o.set(CURVE_SERVER, &i(0)).unwrap();
        assert_eq!(get_int(&o, MECHANISM), NULL);
        assert_eq!(o.set(CURVE_SERVER, &i(2)), Err(Error::Inval));
    }

    #[test]
    fn unknown_and_read_only_options() {
        let mut o = Options::new(T::Pair);
        for opt in [0, 1, 2, 3, 10, 20, 26, 29, 30, 67, 82, 83, 125, 1000, -1] {
            assert_eq!(o.set(opt, &i(1)), Err(Error::Inval), "option {opt}");
            assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
        }
        for opt in [
            RCVMORE,
            FD,
            EVENTS,
            TYPE,
            LAST_ENDPOINT,
            THREAD_SAFE,
            MECHANISM,
            TOPICS_COUNT,
        ] {
            assert_eq!(o.set(opt, &i(1)), Err(Error::Inval), "option {opt}");
        }
        for opt in [
            RCVMORE,
            FD,
            EVENTS,
            LAST_ENDPOINT,
            THREAD_SAFE,
            TOPICS_COUNT,
        ] {
            assert!(is_socket_level(opt));
            assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
        }
        assert!(!is_socket_level(TYPE));
    }

    #[test]
    fn write_only_options() {
        let mut sub = Options::new(T::Sub);
        sub.set(SUBSCRIBE, b"a").unwrap();
        let mut router = Options::new(T::Router);
        router.set(ROUTER_MANDATORY, &i(1)).unwrap();
        let mut xpub = Options::new(T::XPub);
        xpub.set(XPUB_VERBOSE, &i(1)).unwrap();
        for (o, opts) in [
            (
                &sub,
                &[
                    SUBSCRIBE,
                    UNSUBSCRIBE,
                    TCP_ACCEPT_FILTER,
                    IPC_FILTER_PID,
                    IPC_FILTER_UID,
                    IPC_FILTER_GID,
                    METADATA,
                ][..],
            ),
            (
                &router,
                &[
                    ROUTER_MANDATORY,
                    ROUTER_RAW,
                    ROUTER_HANDOVER,
                    PROBE_ROUTER,
                    CONNECT_ROUTING_ID,
                    STREAM_NOTIFY,
                ][..],
            ),
            (
                &xpub,
                &[
                    XPUB_VERBOSE,
                    XPUB_VERBOSER,
                    XPUB_NODROP,
                    XPUB_MANUAL,
                    XPUB_WELCOME_MSG,
                    XPUB_MANUAL_LAST_VALUE,
                    ONLY_FIRST_SUBSCRIBE,
                    REQ_CORRELATE,
                    REQ_RELAXED,
                ][..],
            ),
        ] {
            for &opt in opts {
                assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
            }
        }
    }

    #[test]
    fn subscriptions() {
        let mut sub = Options::new(T::Sub);
        assert_eq!(sub.set(SUBSCRIBE, b""), Ok(Applied::Subscribe(vec![])));
        assert_eq!(sub.set_null(SUBSCRIBE), Ok(Applied::Subscribe(vec![])));
        assert_eq!(
            sub.set(UNSUBSCRIBE, b"topic"),
            Ok(Applied::Unsubscribe(b"topic".to_vec()))
        );
        for t in [
            T::Pair,
            T::Pub,
            T::Req,
            T::Rep,
            T::Dealer,
            T::Router,
            T::Pull,
            T::Push,
            T::XPub,
            T::XSub,
            T::Stream,
        ] {
            let mut o = Options::new(t);
            assert_eq!(o.set(SUBSCRIBE, b"a"), Err(Error::Inval), "type {t:?}");
            assert_eq!(o.set(UNSUBSCRIBE, b"a"), Err(Error::Inval), "type {t:?}");
        }
        // XPUB and PUB accept them in manual mode.
        for t in [T::XPub, T::Pub] {
            let mut o = Options::new(t);
            o.set(XPUB_MANUAL, &i(1)).unwrap();
            assert_eq!(
                o.set(SUBSCRIBE, b"a"),
                Ok(Applied::Subscribe(b"a".to_vec()))
            );
            assert_eq!(
                o.set(UNSUBSCRIBE, b"a"),
                Ok(Applied::Unsubscribe(b"a".to_vec()))
            );
            o.set(XPUB_MANUAL, &i(0)).unwrap();
            assert_eq!(o.set(SUBSCRIBE, b"a"), Err(Error::Inval));
        }
    }

    #[test]
    fn router_options() {
        let mut o = Options::new(T::Router);
        for opt in [ROUTER_MANDATORY, ROUTER_HANDOVER, PROBE_ROUTER] {
            assert_eq!(o.set(opt, &i(5)), Ok(Applied::PatternFlag(opt)));
            assert_eq!(o.set(opt, &i(-1)), Err(Error::Inval));
            assert_eq!(o.set(opt, &[1]), Err(Error::Inval));
        }
        assert!(o.router_mandatory && o.router_handover && o.probe_router);
        o.set(ROUTER_RAW, &i(1)).unwrap();
        assert!(o.router_raw && o.raw_socket && !o.recv_routing_id);
        o.set(ROUTER_RAW, &i(0)).unwrap();
        assert!(!o.router_raw && o.raw_socket && !o.recv_routing_id);
        assert_eq!(
            o.set(CONNECT_ROUTING_ID, b"peer1"),
            Ok(Applied::PatternFlag(CONNECT_ROUTING_ID))
        );
        assert_eq!(o.set(CONNECT_RID, b""), Err(Error::Inval));
        assert_eq!(o.set_null(CONNECT_ROUTING_ID), Err(Error::Inval));
        assert_eq!(o.take_connect_routing_id(), Some(b"peer1".to_vec()));
        assert_eq!(o.take_connect_routing_id(), None);
        assert_eq!(o.set(STREAM_NOTIFY, &i(0)), Err(Error::Inval));
        // Not on other socket types.
        for t in [
            T::Pair,
            T::Pub,
            T::Sub,
            T::Req,
            T::Rep,
            T::Dealer,
            T::Pull,
            T::Push,
            T::XPub,
            T::XSub,
            T::Stream,
        ] {
            let mut x = Options::new(t);
            for opt in [ROUTER_MANDATORY, ROUTER_RAW, ROUTER_HANDOVER] {
                assert_eq!(
                    x.set(opt, &i(1)),
                    Err(Error::Inval),
                    "type {t:?} option {opt}"
                );
            }
        }
    }

    #[test]
    fn stream_options() {
        let mut o = Options::new(T::Stream);
        assert_eq!(
            o.set(STREAM_NOTIFY, &i(0)),
            Ok(Applied::PatternFlag(STREAM_NOTIFY))
        );
        assert!(!o.stream_notify);
        assert_eq!(o.set(STREAM_NOTIFY, &i(2)), Err(Error::Inval));
        o.set(CONNECT_ROUTING_ID, b"x").unwrap();
        assert_eq!(o.connect_routing_id.as_deref(), Some(&b"x"[..]));
        assert_eq!(o.set(PROBE_ROUTER, &i(1)), Err(Error::Inval));
        for t in [
            T::Pair,
            T::Pub,
            T::Sub,
            T::Req,
            T::Rep,
            T::Dealer,
            T::Pull,
            T::Push,
            T::XPub,
            T::XSub,
        ] {
            let mut x = Options::new(t);
            assert_eq!(
                x.set(CONNECT_ROUTING_ID, b"x"),
                Err(Error::Inval),
                "type {t:?}"
            );
            assert_eq!(x.set(STREAM_NOTIFY, &i(1)), Err(Error::Inval), "type {t:?}");
        }
    }

    #[test]
    fn req_dealer_options() {
        let mut req = Options::new(T::Req);
        req.set(REQ_CORRELATE, &i(1)).unwrap();
        req.set(REQ_RELAXED, &i(1)).unwrap();
        req.set(PROBE_ROUTER, &i(1)).unwrap();
        assert!(req.req_correlate && req.req_relaxed && req.probe_router);
        assert_eq!(req.set(REQ_RELAXED, &i(-1)), Err(Error::Inval));
        let mut dealer = Options::new(T::Dealer);
        dealer.set(PROBE_ROUTER, &i(1)).unwrap();
        assert_eq!(dealer.set(REQ_CORRELATE, &i(1)), Err(Error::Inval));
        assert_eq!(dealer.set(REQ_RELAXED, &i(1)), Err(Error::Inval));
        for t in [
            T::Pair,
            T::Pub,
            T::Sub,
            T::Rep,
            T::Pull,
            T::Push,
            T::XPub,
            T::XSub,
            T::Stream,
        ] {
            let mut x = Options::new(t);
            assert_eq!(x.set(PROBE_ROUTER, &i(1)), Err(Error::Inval), "type {t:?}");
            assert_eq!(x.set(REQ_CORRELATE, &i(1)), Err(Error::Inval), "type {t:?}");
        }
    }

    #[test]
    fn xpub_options() {
        for t in [T::XPub, T::Pub] {
            let mut o = Options::new(t);
            o.set(XPUB_VERBOSER, &i(1)).unwrap();
            assert!(o.xpub_verbose && o.xpub_verboser);
            o.set(XPUB_VERBOSE, &i(1)).unwrap();
            assert!(o.xpub_verbose && !o.xpub_verboser);
            o.set(XPUB_NODROP, &i(3)).unwrap();
            assert!(o.xpub_nodrop);
            o.set(XPUB_MANUAL_LAST_VALUE, &i(1)).unwrap();
            assert!(o.xpub_manual && o.xpub_manual_last_value);
            o.set(ONLY_FIRST_SUBSCRIBE, &i(1)).unwrap();
            assert!(o.only_first_subscribe);
            assert_eq!(o.set(XPUB_VERBOSE, &i(-1)), Err(Error::Inval));
            assert_eq!(o.set(XPUB_NODROP, &[0; 8]), Err(Error::Inval));
            assert_eq!(
                o.set(XPUB_WELCOME_MSG, b"hi"),
                Ok(Applied::PatternFlag(XPUB_WELCOME_MSG))
            );
            assert_eq!(o.xpub_welcome_msg.as_deref(), Some(&b"hi"[..]));
            o.set(XPUB_WELCOME_MSG, b"").unwrap();
            assert_eq!(o.xpub_welcome_msg, None);
        }
        let mut xsub = Options::new(T::XSub);
        xsub.set(ONLY_FIRST_SUBSCRIBE, &i(1)).unwrap();
        for t in [
            T::Pair,
            T::Sub,
            T::Req,
            T::Rep,
            T::Dealer,
            T::Router,
            T::Pull,
            T::Push,
            T::XSub,
            T::Stream,
        ] {
            let mut x = Options::new(t);
            for opt in [
                XPUB_VERBOSE,
                XPUB_VERBOSER,
                XPUB_NODROP,
                XPUB_MANUAL,
                XPUB_MANUAL_LAST_VALUE,
            ] {
                assert_eq!(
                    x.set(opt, &i(1)),
                    Err(Error::Inval),
                    "type {t:?} option {opt}"
                );
            }
            assert_eq!(
                x.set(XPUB_WELCOME_MSG, b"w"),
                Err(Error::Inval),
                "type {t:?}"
            );
        }
        let mut sub = Options::new(T::Sub);
        assert_eq!(sub.set(ONLY_FIRST_SUBSCRIBE, &i(1)), Err(Error::Inval));
    }

    #[test]
    fn hwm_reports_pipe_update() {
        let mut o = Options::new(T::Push);
        assert_eq!(o.set(SNDHWM, &i(10)), Ok(Applied::Hwm));
        assert_eq!(o.set(RCVHWM, &i(0)), Ok(Applied::Hwm));
        assert_eq!((o.sndhwm, o.rcvhwm), (10, 0));
    }

    #[test]
    fn tcp_accept_filters() {
        let mut o = Options::new(T::Router);
        o.set(TCP_ACCEPT_FILTER, b"127.0.0.1").unwrap();
        o.set(TCP_ACCEPT_FILTER, b"192.168.0.0/16").unwrap();
        assert_eq!(o.tcp_accept_filters.len(), 2);
        assert_eq!(o.tcp_accept_filters[1].prefix, 16);
        assert!(o.tcp_peer_allowed(&"127.0.0.1:1".parse().unwrap()));
        assert!(o.tcp_peer_allowed(&"192.168.44.5:1".parse().unwrap()));
        assert!(!o.tcp_peer_allowed(&"10.0.0.1:1".parse().unwrap()));
        assert!(!o.tcp_peer_allowed(&"[::1]:1".parse().unwrap()));
        for bad in [
            &b"192.168.0.0/"[..],
            b"192.168.0.0/33",
            b"192.168.0.0/x",
            b"localhost",
            b"::1",
            b"",
        ] {
            assert_eq!(
                o.set(TCP_ACCEPT_FILTER, bad),
                Err(Error::Inval),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(o.set(TCP_ACCEPT_FILTER, &[b'1'; 256]), Err(Error::Inval));
        o.set_null(TCP_ACCEPT_FILTER).unwrap();
        assert!(o.tcp_accept_filters.is_empty());
        assert!(o.tcp_peer_allowed(&"10.0.0.1:1".parse().unwrap()));
        // With ZMQ_IPV6 the filter is resolved as IPv6 (IPv4 mapped).
        o.set(IPV6, &i(1)).unwrap();
        o.set(TCP_ACCEPT_FILTER, b"10.1.0.0/112").unwrap();
        assert!(o.tcp_peer_allowed(&"[::ffff:10.1.2.3]:1".parse().unwrap()));
        assert!(!o.tcp_peer_allowed(&"[::ffff:10.2.2.3]:1".parse().unwrap()));
        o.set(TCP_ACCEPT_FILTER, b"::/0").unwrap();
        assert!(o.tcp_peer_allowed(&"[2001:db8::1]:1".parse().unwrap()));
        let f = TcpAcceptFilter::parse("10.0.0.0/0", false).unwrap();
        assert!(f.matches(&"1.2.3.4:5".parse().unwrap()));
        assert!(!f.matches(&"[::1]:5".parse().unwrap()));
    }

    #[test]
    fn ipc_filters() {
        let mut o = Options::new(T::Pull);
        assert!(o.ipc_peer_allowed(1, 2, 3, &[]));
        o.set(IPC_FILTER_UID, &1000u32.to_ne_bytes()).unwrap();
        o.set(IPC_FILTER_GID, &50u32.to_ne_bytes()).unwrap();
        o.set(IPC_FILTER_PID, &i(4242)).unwrap();
        assert!(o.ipc_peer_allowed(1, 1000, 3, &[]));
        assert!(o.ipc_peer_allowed(1, 2, 50, &[]));
        assert!(o.ipc_peer_allowed(4242, 2, 3, &[]));
        assert!(o.ipc_peer_allowed(1, 2, 3, &[7, 50]));
        assert!(!o.ipc_peer_allowed(1, 2, 3, &[7]));
        assert_eq!(o.set(IPC_FILTER_PID, &[0; 8]), Err(Error::Inval));
        assert_eq!(o.set(IPC_FILTER_UID, b""), Err(Error::Inval));
        o.set_null(IPC_FILTER_UID).unwrap();
        o.set_null(IPC_FILTER_GID).unwrap();
        o.set_null(IPC_FILTER_PID).unwrap();
        assert!(o.ipc_peer_allowed(1, 2, 3, &[]));
    }

    #[test]
    fn metadata() {
        let mut o = Options::new(T::Dealer);
        o.set(METADATA, b"X-color:red").unwrap();
        o.set(METADATA, b"X-color:blue").unwrap();
        o.set(METADATA, b"X-a:b:c").unwrap();
        assert_eq!(o.metadata.get(&b"X-color"[..]), Some(&b"red".to_vec()));
        assert_eq!(o.metadata.get(&b"X-a"[..]), Some(&b"b:c".to_vec()));
        for bad in [
            &b"color:red"[..],
            b"X-color:",
            b":red",
            b"X-color",
            b"X-:b",
            b"",
        ] {
            assert_eq!(
                o.set(METADATA, bad),
                Err(Error::Inval),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut long_key = b"X-".to_vec();
        long_key.extend_from_slice(&[b'k'; 254]);
        long_key.extend_from_slice(b":v");
        assert_eq!(o.set(METADATA, &long_key), Err(Error::Inval));
        assert_eq!(o.get(METADATA), Err(Error::Inval));
    }

    #[test]
    fn conflate_and_ctx_inheritance() {
        let mut o = Options::new(T::Router);
        o.set(CONFLATE, &i(1)).unwrap();
        assert!(!o.effective_conflate());
        let mut d = Options::new(T::Dealer);
        d.set(CONFLATE, &i(1)).unwrap();
        assert!(d.effective_conflate());
        let mut ctx = CtxOptions::new();
        ctx.set_int(IPV6, 1).unwrap();
        ctx.set_int(BLOCKY, 0).unwrap();
        ctx.set_int(ZERO_COPY_RECV, 0).unwrap();
        let s = Options::with_ctx(T::Push, &ctx);
        assert!(s.ipv6 && !s.zero_copy);
        assert_eq!(s.linger, 0);
        assert_eq!(Options::with_ctx(T::Push, &CtxOptions::new()).linger, -1);
    }

    #[test]
    fn ctx_defaults_and_round_trips() {
        let mut c = CtxOptions::default();
        assert_eq!(c.get(IO_THREADS), Ok(1));
        assert_eq!(c.get(MAX_SOCKETS), Ok(1023));
        assert_eq!(c.get(SOCKET_LIMIT), Ok(65535));
        assert_eq!(c.get(THREAD_PRIORITY), Ok(65535));
        assert_eq!(c.get(THREAD_SCHED_POLICY), Ok(-1));
        assert_eq!(c.get(MAX_MSGSZ), Ok(i32::MAX));
        assert_eq!(c.get(MSG_T_SIZE), Ok(64));
        assert_eq!(c.get(IPV6), Ok(0));
        assert_eq!(c.get(BLOCKY), Ok(1));
        assert_eq!(c.get(ZERO_COPY_RECV), Ok(1));
        assert_eq!(c.get(THREAD_NAME_PREFIX), Ok(0));
        for (opt, good, bad) in [
            (IO_THREADS, 0, -1),
            (MAX_SOCKETS, 100_000, 0),
            (MAX_MSGSZ, 1024, -1),
            (IPV6, 5, -1),
            (BLOCKY, 0, -1),
            (ZERO_COPY_RECV, 0, -1),
            (THREAD_SCHED_POLICY, 1, -1),
        ] {
            c.set_int(opt, good).unwrap();
            let expect = if matches!(opt, IPV6 | BLOCKY | ZERO_COPY_RECV) {
                i32::from(good != 0)
            } else {
                good
            };
            assert_eq!(c.get(opt), Ok(expect), "option {opt}");
            assert_eq!(c.set_int(opt, bad), Err(Error::Inval), "option {opt}");
            assert_eq!(c.set(opt, &[0; 8]), Err(Error::Inval), "option {opt}");
        }
        c.set_int(THREAD_PRIORITY, 10).unwrap();
        assert_eq!(c.thread_priority, 10);
        assert_eq!(c.set_int(THREAD_PRIORITY, -1), Err(Error::Inval));
        assert_eq!(c.set_int(SOCKET_LIMIT, 10), Ok(()));
        assert_eq!(c.set_int(MSG_T_SIZE, 64), Err(Error::Inval));
        assert_eq!(c.set_int(99, 1), Err(Error::Inval));
        assert_eq!(c.get(THREAD_AFFINITY_CPU_ADD), Err(Error::Inval));
        assert_eq!(c.get(99), Err(Error::Inval));
    }

    #[test]
    fn ctx_affinity_and_names() {
        let mut c = CtxOptions::new();
        c.set_int(THREAD_AFFINITY_CPU_ADD, 2).unwrap();
        c.set_int(THREAD_AFFINITY_CPU_ADD, 3).unwrap();
        assert_eq!(c.set_int(THREAD_AFFINITY_CPU_ADD, -1), Err(Error::Inval));
        c.set_int(THREAD_AFFINITY_CPU_REMOVE, 2).unwrap();
        assert_eq!(c.set_int(THREAD_AFFINITY_CPU_REMOVE, 2), Err(Error::Inval));
        assert_eq!(
            c.thread_affinity_cpus.iter().copied().collect::<Vec<_>>(),
            vec![3]
        );

        c.set_int(THREAD_NAME_PREFIX, 42).unwrap();
        assert_eq!(c.thread_name_prefix, b"42");
        assert_eq!(c.get(THREAD_NAME_PREFIX), Ok(42));
        c.set(THREAD_NAME_PREFIX, b"worker").unwrap();
        assert_eq!(c.get(THREAD_NAME_PREFIX), Ok(0));
        let mut buf = [b'#'; 8];
        c.get_ext(THREAD_NAME_PREFIX, &mut buf).unwrap();
        assert_eq!(&buf, b"worker##");
        assert_eq!(
            c.get_ext(THREAD_NAME_PREFIX, &mut [0u8; 5]),
            Err(Error::Inval)
        );
        assert_eq!(c.set(THREAD_NAME_PREFIX, &[b'n'; 17]), Err(Error::Inval));
        assert_eq!(c.set(THREAD_NAME_PREFIX, b""), Err(Error::Inval));
        // Four bytes are an int.
        c.set(THREAD_NAME_PREFIX, &i(-7)).unwrap();
        assert_eq!(c.thread_name_prefix, b"-7");
        let mut four = [0u8; 4];
        c.get_ext(IO_THREADS, &mut four).unwrap();
        assert_eq!(i32::from_ne_bytes(four), 1);
        assert_eq!(c.get_ext(IO_THREADS, &mut [0u8; 8]), Err(Error::Inval));
    }
}

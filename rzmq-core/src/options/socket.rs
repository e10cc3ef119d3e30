//! A socket's options ([`Options`]): the fields, libzmq 4.3.5's defaults for each socket type
//! and a context, and what the socket layer derives from them (peer filters, effective
//! `CONFLATE` and heartbeat timeout). Setting is set.rs, getting get.rs; see the parent module
//! for what is and is not built.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use super::context::CtxOptions;
use super::filter::TcpAcceptFilter;
use super::ids::NULL;
use super::rzmq::RzmqOptions;
use crate::zmtp::SocketType;

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
    /// `ZMQ_HICCUP_MSG` (DRAFT; write-only): what CLIENT, DEALER and PEER receive when a
    /// connection they made breaks after its handshake (empty: none).
    pub hiccup_msg: Vec<u8>,
    /// `ZMQ_HELLO_MSG` (DRAFT; write-only): what ROUTER, SERVER, CLIENT, DEALER and PEER send
    /// first on every connection, ahead of anything queued (empty: none).
    pub hello_msg: Vec<u8>,
    /// `ZMQ_DISCONNECT_MSG` (DRAFT; write-only): what ROUTER, SERVER and PEER receive from a
    /// peer whose accepted connection broke after its handshake, or whose inproc connection
    /// ended (empty: none).
    pub disconnect_msg: Vec<u8>,
    /// `ZMQ_ROUTER_NOTIFY` (DRAFT; ROUTER): `NOTIFY_CONNECT | NOTIFY_DISCONNECT` bits (0).
    pub router_notify: i32,
    /// `ZMQ_PRIORITY` (DRAFT): `SO_PRIORITY` of tcp connections (0: not set; >= 0).
    pub priority: i32,
    /// `ZMQ_BUSY_POLL` (DRAFT): `SO_BUSY_POLL` of tcp sockets in microseconds (<= 0: not set).
    pub busy_poll: i32,
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
    /// The mechanism `ZMQ_MECHANISM` reports: [`NULL`], [`PLAIN`](super::ids::PLAIN) or
    /// [`CURVE`](super::ids::CURVE).
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
    /// `ZMQ_XSUB_VERBOSE_UNSUBSCRIBE` (DRAFT; XSUB, write-only): pass on every unsubscription.
    pub xsub_verbose_unsubscribe: bool,
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
            router_notify: 0,
            hiccup_msg: Vec::new(),
            hello_msg: Vec::new(),
            disconnect_msg: Vec::new(),
            priority: 0,
            busy_poll: 0,
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
            xsub_verbose_unsubscribe: false,
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

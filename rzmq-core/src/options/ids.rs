//! The socket option numbers of libzmq 4.3.5's `zmq.h` (and the DRAFT ones a stable build
//! compiles), the values some of them take (mechanisms, GSSAPI name types, `RECONNECT_STOP`
//! flags), the send/receive flags, and which options the socket answers itself. The one
//! definition of these numbers: the rest of the crate, the C ABI and the tests name them from
//! here (`include/zmq.h` is checked against them by rzmq-capi's tests/settings.rs). Imports
//! nothing of the crate.

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
/// `ZMQ_ROUTER_NOTIFY` (DRAFT; `EINVAL` in stable builds): ROUTER delivers `[routing id][empty]`
/// when a tcp/ipc peer completes its handshake and/or disconnects ([`NOTIFY_CONNECT`],
/// [`NOTIFY_DISCONNECT`]).
pub const ROUTER_NOTIFY: i32 = 97;
/// `ZMQ_NOTIFY_CONNECT` (DRAFT): a `ROUTER_NOTIFY` bit.
pub const NOTIFY_CONNECT: i32 = 1;
/// `ZMQ_NOTIFY_DISCONNECT` (DRAFT): a `ROUTER_NOTIFY` bit.
pub const NOTIFY_DISCONNECT: i32 = 2;
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
/// `ZMQ_PRIORITY` (DRAFT; `EINVAL` in stable builds): `SO_PRIORITY` of tcp connections (>= 0).
pub const PRIORITY: i32 = 112;
/// `ZMQ_BUSY_POLL` (DRAFT; `EINVAL` in stable builds): `SO_BUSY_POLL` of tcp sockets, in µs.
/// Not rzmq's own busy-polling ([`super::rzmq::BUSY_POLL_US`], `sockopt::BusyPoll`).
pub const BUSY_POLL: i32 = 113;
/// `ZMQ_HICCUP_MSG` (DRAFT; `EINVAL` in stable builds).
pub const HICCUP_MSG: i32 = 114;
/// `ZMQ_XSUB_VERBOSE_UNSUBSCRIBE` (DRAFT; `EINVAL` in stable builds): XSUB passes on every
/// unsubscription, write-only.
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

/// Send and receive flag: don't block (`ZMQ_DONTWAIT`).
pub const DONTWAIT: i32 = 1;
/// Send flag: more frames follow (`ZMQ_SNDMORE`).
pub const SNDMORE: i32 = 2;

/// True for options the socket answers itself rather than
/// [`Options::get`](super::Options::get): `RCVMORE`, `FD`, `EVENTS`, `LAST_ENDPOINT`,
/// `THREAD_SAFE`, and `TOPICS_COUNT` (PUB/SUB/XPUB/XSUB only).
///
/// libzmq's order is: the socket type's options, then these, then the generic options; these
/// values are written with [`OptValue::IntRelaxed`](super::OptValue::IntRelaxed) (ints: any
/// buffer of at least 4 bytes) or [`OptValue::Str`](super::OptValue::Str) (`LAST_ENDPOINT`).
/// `FD` fails with `EINVAL` on thread-safe sockets.
pub fn is_socket_level(opt: i32) -> bool {
    matches!(
        opt,
        RCVMORE | FD | EVENTS | LAST_ENDPOINT | THREAD_SAFE | TOPICS_COUNT
    )
}

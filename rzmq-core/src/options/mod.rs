//! Socket and context options with libzmq 4.3.5's numbers, types, defaults, validation and errors.
//!
//! [`Options::set`] / [`Options::get`] reproduce `socket_base_t::setsockopt` / `getsockopt` of a
//! stable (non-DRAFT) libzmq 4.3.5 build on Linux: first the socket type's own options
//! (`xsetsockopt` of ROUTER, STREAM, DEALER, REQ, SUB, XSUB, XPUB/PUB), then the generic ones
//! (`options_t`). Values are the raw bytes the C API passes: `int` options take exactly 4 bytes
//! (native-endian `i32`), `AFFINITY` 8 bytes (`u64`), `MAXMSGSIZE` 8 bytes (`i64`), strings and
//! binary values any length. Every failure is `EINVAL`, as in libzmq.
//!
//! # Features we do not build, and what libzmq 4.3.5 without them does
//!
//! | options | libzmq 4.3.5 built without the feature | here |
//! |---|---|---|
//! | `GSSAPI_SERVER`, `GSSAPI_PRINCIPAL`, `GSSAPI_SERVICE_PRINCIPAL`, `GSSAPI_PLAINTEXT`, `GSSAPI_PRINCIPAL_NAMETYPE`, `GSSAPI_SERVICE_PRINCIPAL_NAMETYPE` (62-65, 90, 91) | no `HAVE_LIBGSSAPI_KRB5`: set and get `EINVAL` | `EINVAL` |
//! | `VMCI_BUFFER_SIZE`, `VMCI_BUFFER_MIN_SIZE`, `VMCI_BUFFER_MAX_SIZE`, `VMCI_CONNECT_TIMEOUT` (85-88) | no `ZMQ_HAVE_VMCI`: set and get `EINVAL` | `EINVAL` |
//! | `RATE`, `RECOVERY_IVL`, `MULTICAST_HOPS`, `MULTICAST_MAXTPDU` (PGM/NORM) | generic options, stored and readable even without OpenPGM | stored (validated), unused |
//! | PLAIN (44-46) | always built | implemented |
//! | `CURVE_SERVER`, `CURVE_PUBLICKEY`, `CURVE_SECRETKEY`, `CURVE_SERVERKEY` (47-50) | built with libsodium (`ZMQ_HAVE_CURVE`): keys are 32 raw bytes, 40 Z85 characters or 41 with a NUL; getsockopt gives 32 bytes or 41 (Z85 + NUL) by buffer size | implemented ([`HAVE_CURVE`]) |
//! | `IPC_FILTER_PID/UID/GID` (58-60) | Linux has `SO_PEERCRED`, so all three are available (write-only) | implemented |
//! | `TCP_ACCEPT_FILTER` (38) | always available (write-only) | implemented |
//!
//! # DRAFT options (numbers 93-124) in a stable build
//!
//! `zmq.h` 4.3.5 lists them only under `ZMQ_BUILD_DRAFT_API`, but a stable build compiles some of
//! them anyway (the library's `zmq_draft.h` defines the numbers), so these work with a stable
//! libzmq 4.3.5 and work here: `ZAP_ENFORCE_DOMAIN` (93), `LOOPBACK_FASTPATH` (94),
//! `METADATA` (95, write-only), `MULTICAST_LOOP` (96), `XPUB_MANUAL_LAST_VALUE` (98, PUB/XPUB,
//! write-only), `SOCKS_USERNAME` (99), `SOCKS_PASSWORD` (100), `ONLY_FIRST_SUBSCRIBE` (108,
//! PUB/XPUB/XSUB, write-only), `RECONNECT_STOP` (109), and the socket-level read `TOPICS_COUNT`
//! (116, PUB/SUB/XPUB/XSUB). The rest are inside `#ifdef ZMQ_BUILD_DRAFT_API`. Of those, the
//! native options here implement as a DRAFT build of libzmq 4.3.5 does: `ROUTER_NOTIFY` (97,
//! ROUTER, 0 to 3; `[routing id][empty]` on a tcp/ipc peer's handshake and disconnection),
//! `PRIORITY` (112, `SO_PRIORITY` on tcp), `BUSY_POLL` (113, `SO_BUSY_POLL` on tcp; readable
//! here, where 4.3.5's getter fails with `EINVAL`), `HELLO_MSG` (110, write-only; sent first
//! on every tcp/ipc/inproc connection of ROUTER/SERVER/CLIENT/DEALER/PEER), `DISCONNECT_MSG`
//! (111, write-only; delivered to ROUTER/SERVER/PEER for a peer whose accepted connection
//! broke after its handshake or whose inproc connection ended), `HICCUP_MSG` (114, write-only;
//! delivered to CLIENT/DEALER/PEER when a tcp/ipc connection they made breaks after its
//! handshake) and `XSUB_VERBOSE_UNSUBSCRIBE` (115, XSUB, write-only); the C ABI decides whether
//! its stable build refuses them. Still `EINVAL` (not implemented): `IN_BATCH_SIZE`,
//! `OUT_BATCH_SIZE`, `WSS_*`, `NORM_*`. The context option `ZERO_COPY_RECV` (10,
//! DRAFT) is handled by a stable build.
//!
//! # Write-only and socket-level options
//!
//! libzmq has no getter for `SUBSCRIBE`, `UNSUBSCRIBE`, `CONNECT_ROUTING_ID`, `ROUTER_MANDATORY`,
//! `ROUTER_RAW`, `ROUTER_HANDOVER`, `PROBE_ROUTER`, `REQ_CORRELATE`, `REQ_RELAXED`, `XPUB_*`,
//! `STREAM_NOTIFY`, `TCP_ACCEPT_FILTER`, `IPC_FILTER_*`, `METADATA`, `ONLY_FIRST_SUBSCRIBE`:
//! [`Options::get`] fails with `EINVAL` for them. `RCVMORE`, `FD`, `EVENTS`, `LAST_ENDPOINT`,
//! `THREAD_SAFE` and `TOPICS_COUNT` are answered by the socket itself (see
//! [`is_socket_level`]); [`Options::get`] returns `EINVAL` for them, and setting any of them (or
//! `TYPE`, `MECHANISM`) is `EINVAL`.
//!
//! # rzmq's own options
//!
//! [`rzmq`] holds the options libzmq does not have (direct sends and receives, busy-polling,
//! the framed lane, CURVE over RDMA, huge pages, same-host congestion control), numbered from
//! `0x525A0000`; their defaults come from `RZMQ_*` variables read by [`crate::env`], the one reader
//! of the environment (docs/SETTINGS.md).

// Bottom up (docs/ARCHITECTURE.md states the order): the numbers, values and parsers; rzmq's and
// the context's options; a socket's options and their defaults; setting and getting them.
mod curve;
mod filter;
mod ids;
mod value;

pub mod context;
pub mod rzmq;

pub mod socket;

mod get;
mod set;

#[cfg(test)]
mod tests;

pub use self::context::*;
pub use self::curve::HAVE_CURVE;
pub use self::filter::TcpAcceptFilter;
pub use self::ids::*;
pub use self::socket::Options;
pub use self::value::{Applied, OptValue};

pub use self::rzmq::{
    RzmqOptions, BUSY_POLL_US, DIRECT, DIRECT_RX, FRAMED, FRAMED_NAP_EMPTY, FRAMED_NAP_US,
    HUGE_PAGES, RDMA_CURVE_PLAINTEXT, RDMA_MODE, TCP_LOCAL_CC,
};

//! Transports: how a socket's connections come to be, below the sessions that run them. tcp and
//! ipc listeners and connects, SOCKS5 glue, peer credentials, same-host congestion control, the
//! engine a new connection gets, the inproc registry (no I/O thread), and `udp://` addresses,
//! sockets and datagram forms.
//!
//! Nothing here knows sessions or I/O threads: `session/` runs a connection's lifetime over
//! these pieces, `io/` hands listeners and sessions to I/O threads.

use std::sync::{Arc, Weak};

use crate::command::SocketShared;
use crate::monitor::Monitor;
use crate::options::Options;
use crate::zmtp::SocketType;

/// The UDP datagram forms (RADIO/DISH groups, DGRAM addresses).
pub(crate) mod datagram;
/// Checks of an endpoint before bind and connect.
pub(crate) mod endpoint;
/// A new connection's engine.
pub(crate) mod engine;
/// The inproc registry.
pub(crate) mod inproc;
/// Listening sockets and accepts.
pub(crate) mod listener;
/// Accept filters and peer credentials.
pub(crate) mod peer;
/// Congestion control on same-host tcp connections.
pub(crate) mod same_host;
/// SOCKS5 glue.
pub(crate) mod socks;
/// tcp socket options and connects.
pub(crate) mod tcp;
/// `udp://` addresses and the sockets they open.
pub(crate) mod udp;

/// What a listener or session needs to know about its socket.
#[derive(Clone)]
pub(crate) struct ConnSetup {
    /// The socket's shared side (new pipes go to its mailbox).
    pub socket: Arc<SocketShared>,
    /// The socket's type.
    pub socket_type: SocketType,
    /// The socket's options when it bound or connected.
    pub options: Arc<Options>,
    /// The socket's monitor.
    pub monitor: Monitor,
    /// `ZMQ_CONNECT_ROUTING_ID` of a connect.
    pub connect_routing_id: Option<Vec<u8>>,
    /// The context's inproc registry, for the ZAP handler's endpoint.
    pub inproc: Weak<inproc::Inproc>,
}

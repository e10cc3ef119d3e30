//! Sessions: one connection's lifetime as the socket sees it, on its I/O thread. For a connect
//! it survives reconnects and keeps the socket's pipe (so messages queue while the peer is
//! away); for an accepted connection it ends with the connection. Its [`Engine`] speaks the
//! wire protocol; a session does not care which transport produced its stream.
//!
//! The session reaches its I/O thread only through [`Io`] (registration, timers, the thread's
//! counters), implemented by `io/`'s reactor: static dispatch, no knowledge of the thread loop.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::command::PeerPipe;
use crate::direct::{DirectRx, DirectTx};
use crate::endpoint::Endpoint;
use crate::engine::Engine;
use crate::pipe::{Notify, Target};
use crate::transport::ConnSetup;

mod connect;
mod direct;
mod end;
mod events;
mod pump;
mod timer;
pub(crate) mod udp;

use connect::ConnectInfo;
use timer::{Timer, TimerTable};

/// Token bit of a session's alternative data path (its fd is registered beside the stream's).
pub(crate) const ALT_BIT: u64 = 1 << 62;

/// What a session asks of its I/O thread.
pub(crate) trait Io {
    /// The thread's mio registry (the session's stream and path register there).
    fn registry(&self) -> &mio::Registry;
    /// Wakes the session (`on_timer`) at `at`.
    fn schedule(&mut self, at: Instant, token: u64);
    /// The thread's unfinished work (see [`crate::direct`]).
    fn work(&self) -> &Arc<crate::sync::AtomicUsize>;
    /// The thread's count of connections (see [`crate::direct::DirectRx`]).
    fn streams(&self) -> &Arc<AtomicUsize>;
    /// The thread, as told when a pipe needs attention.
    fn notify(&self) -> Arc<dyn Notify>;
}

/// Whether the session lives on after an event.
pub(crate) enum Fate {
    /// It goes on.
    Keep,
    /// It ends: the thread tears it down.
    Remove,
}

/// A connection's phase, as its session sees it. The other flags of a session are not phases:
/// `socket_closed` (the socket's life, not the connection's), `deaf` and `counted` (how the
/// stream is registered and counted), `drop_partial` (the pipe's state), `alt_again` and
/// `delivered_since_out` (one pass's notes for the next), `rdma_required` (the endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No connection: connecting, waiting to reconnect, or gone.
    Down,
    /// Connected; the handshake is under way.
    Handshaking,
    /// The handshake is done: messages flow.
    Up,
}

/// One connection's lifetime on its I/O thread.
pub(crate) struct Session {
    setup: ConnSetup,
    endpoint: String,
    /// The endpoint monitor events name: `endpoint`, or `tcp://<proxy>` through SOCKS (libzmq).
    monitor_endpoint: String,
    connect: Option<ConnectInfo>,
    pipe: Option<PeerPipe>,
    engine: Option<Engine>,
    socket_closed: bool,
    /// The connection's phase.
    phase: Phase,
    /// The session's deadlines; the thread's heap only wakes it (see [`TimerTable`]).
    timers: TimerTable,
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
    /// The last connection's local endpoint, and its peer's (version 2 monitor events).
    local_uri: String,
    peer_uri: String,
}

impl Session {
    /// A connecting session for `addr` (its connection is made, and remade, on the I/O thread);
    /// `pipe` is the socket's pipe when it exists before the connection (no IMMEDIATE).
    pub(crate) fn connecting(
        setup: ConnSetup,
        ep: &Endpoint,
        addr: &str,
        rdma_required: bool,
        pipe: Option<PeerPipe>,
    ) -> Session {
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
        Session {
            connect: Some(ConnectInfo {
                ep: ep.clone(),
                ivl: Duration::from_millis(reconnect_ivl.max(0) as u64),
                pending: None,
                proxy,
                socks: None,
            }),
            pipe,
            ..Session::new(setup, addr.to_string(), monitor_endpoint, rdma_required)
        }
    }

    /// The session of a connection accepted by the listener `listener` at `endpoint`.
    pub(crate) fn accepted(
        setup: ConnSetup,
        endpoint: String,
        engine: Engine,
        listener: u64,
        rdma_required: bool,
    ) -> Session {
        let (local_uri, peer_uri) = engine.stream.uris();
        Session {
            engine: Some(engine),
            phase: Phase::Handshaking,
            listener: Some(listener),
            local_uri,
            peer_uri,
            ..Session::new(setup, endpoint.clone(), endpoint, rdma_required)
        }
    }

    /// What every session starts from: no connection, pipe or engine yet, phase down, no
    /// timers, and every flag clear.
    fn new(
        setup: ConnSetup,
        endpoint: String,
        monitor_endpoint: String,
        rdma_required: bool,
    ) -> Session {
        Session {
            setup,
            endpoint,
            monitor_endpoint,
            connect: None,
            pipe: None,
            engine: None,
            socket_closed: false,
            phase: Phase::Down,
            timers: TimerTable::default(),
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
            local_uri: String::new(),
            peer_uri: String::new(),
        }
    }

    /// Where this session's connection events happen (version 2 monitor events): a connect's
    /// remote endpoint is the address it connects to, as libzmq reports it; version 1 names
    /// `monitor_endpoint`.
    fn event_addrs(&self) -> crate::monitor::EventAddrs<'_> {
        crate::monitor::EventAddrs {
            local: &self.local_uri,
            remote: if self.connect.is_some() {
                &self.monitor_endpoint
            } else {
                &self.peer_uri
            },
            v1: &self.monitor_endpoint,
        }
    }

    /// As [`Session::event_addrs`] for a connect not (or no longer) connected: no local side.
    fn unconnected_addrs(&self) -> crate::monitor::EventAddrs<'_> {
        crate::monitor::EventAddrs {
            local: "",
            remote: &self.monitor_endpoint,
            v1: &self.monitor_endpoint,
        }
    }

    /// The listener that accepted this session's connection, if any.
    pub(crate) fn listener(&self) -> Option<u64> {
        self.listener
    }

    /// The stream reported hang-up or an error: the next read finds out which.
    pub(crate) fn mark_hup(&mut self) {
        if let Some(e) = self.engine.as_mut() {
            e.hup = true;
        }
    }

    /// What the thread runs again after the other connections: (a read stopped on its budget,
    /// the path's loop stopped on its budget).
    pub(crate) fn take_again(&mut self) -> (bool, bool) {
        (
            self.engine.as_ref().is_some_and(|e| e.read_pending),
            std::mem::take(&mut self.alt_again),
        )
    }

    /// The socket closed (or the context ends): deliver what is queued within LINGER, then end.
    pub(crate) fn socket_gone(&mut self, r: &mut impl Io, token: u64) -> Fate {
        self.socket_closed = true;
        self.check_linger(r, token)
    }

    /// Sets `timer` to `at` and asks the thread for a wake-up then.
    fn arm(&mut self, r: &mut impl Io, timer: Timer, at: Instant, token: u64) {
        self.timers.set(timer, at);
        r.schedule(at, token);
    }

    /// A pipe target that wakes this session on its I/O thread.
    fn target(&self, r: &impl Io, token: u64) -> Target {
        Target {
            notify: r.notify(),
            token,
        }
    }
}

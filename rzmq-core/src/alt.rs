//! Alternative data paths: the seam through which a tcp connection's messages move off the stream
//! (to RDMA, in rzmq-rdma) after the ZMTP handshake, while the stream stays as the control
//! channel (heartbeats, the upgrade commands, the end of the connection).
//!
//! rzmq-core knows only these traits and the upgrade protocol (in `crate::engine`); a provider
//! crate installs an [`Upgrader`] with [`install`]. Without one every connection stays on its
//! stream, exactly as before.
//!
//! The upgrade protocol, on a ZMTP connection whose both ends advertised the same
//! [`PROPERTY`] value in `READY` (libzmq peers advertise nothing and are never asked):
//! 1. the connecting end creates its half ([`Upgrader::start`]) and sends `RZMQ-UP-EP` with its
//!    blob;
//! 2. the accepting end creates its half, completes it with that blob and answers `RZMQ-UP-EP`
//!    with its own (or `RZMQ-UP-NAK` with a reason: both stay on the stream);
//! 3. the connecting end completes its half (or sends `RZMQ-UP-NAK`), then, at the next message
//!    boundary, sends `RZMQ-UP-GO` on the stream and moves its output to the new path;
//! 4. the accepting end, on reading that `GO`, takes its input from the new path from then on,
//!    sends its own `GO` at its next message boundary and moves its output;
//! 5. the connecting end takes its input from the new path after reading that `GO`.
//!
//! Everything sent on the stream before a `GO` is read before anything sent on the new path after
//! it, so order holds across the switch. Messages that arrive on the new path early wait there.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};

use crate::msg::Msg;

/// Anonymous memory for a provider's registered regions: page-aligned and zeroed, on huge pages
/// from 2 MiB when the process allows them (as the message pool's).
pub use crate::pool::map_anon;

/// The `READY` property an end sets when it can upgrade (value: [`Upgrader::advertise`]).
pub const PROPERTY: &str = "RZMQ-RDMA";
/// Upgrade command: an endpoint blob.
pub const CMD_EP: &[u8] = b"RZMQ-UP-EP";
/// Upgrade command: the sender moves its output to the new path after this command.
pub const CMD_GO: &[u8] = b"RZMQ-UP-GO";
/// Upgrade command: the upgrade is declined (data: the reason, text); both stay on the stream.
pub const CMD_NAK: &[u8] = b"RZMQ-UP-NAK";

/// Whether connections upgrade (the context option `ZMQ_RDMA_MODE`, whose default
/// `RZMQ_RDMA` gives; rzmq-rdma parses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Never upgrade (`off`).
    Off,
    /// Upgrade when both ends can; otherwise stay on the stream (`auto`, the default).
    Auto,
    /// Every tcp connection must upgrade; one that cannot is refused (`require`).
    Require,
}

impl Mode {
    /// The mode's name, as `RZMQ_RDMA` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Auto => "auto",
            Mode::Require => "require",
        }
    }
}

/// Why an alternative path failed or could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AltError(pub String);

impl std::fmt::Display for AltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AltError {}

/// Counters of one alternative path (what `RZMQ_RDMA_LOG` prints).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AltStats {
    /// Frames sent.
    pub msgs_tx: u64,
    /// Payload bytes sent.
    pub bytes_tx: u64,
    /// Frames received.
    pub msgs_rx: u64,
    /// Payload bytes received.
    pub bytes_rx: u64,
    /// Frames sent by rendezvous (zero-copy).
    pub rndv_tx: u64,
    /// Rendezvous reads completed (frames received zero-copy).
    pub rndv_reads: u64,
    /// Payload copies made (eager frames).
    pub copies: u64,
    /// Times the sender ran out of credits.
    pub credit_stalls: u64,
}

/// A connected alternative data path, driven by the connection's I/O thread.
pub trait AltPath: Send {
    /// A pollable fd: readable when [`AltPath::process`] has work.
    fn fd(&self) -> RawFd;
    /// Queues one frame; `Ok(Some(msg))` hands it back when there is no room now (retry after
    /// the next [`AltPath::process`]).
    fn send(&mut self, msg: Msg) -> Result<Option<Msg>, AltError>;
    /// Pushes what was queued (one notification per burst).
    fn flush(&mut self) -> Result<(), AltError>;
    /// The next received frame, in order. After a failure, frames that arrived before it are
    /// still returned; the error comes once they are gone.
    fn recv(&mut self) -> Result<Option<Msg>, AltError>;
    /// Handles completions and peer updates; returns true when anything happened.
    fn process(&mut self) -> Result<bool, AltError>;
    /// Arms the readiness notification; call [`AltPath::process`] after it before sleeping.
    fn arm(&mut self) -> Result<(), AltError>;
    /// True when nothing is owed to the peer: every frame sent was taken by it and every
    /// zero-copy frame read and released.
    fn is_idle(&self) -> bool;
    /// Counters.
    fn stats(&self) -> AltStats;
    /// What carries the data, for logs (`"rdma/soft"`, `"rdma/ibverbs mlx5_0"`).
    fn describe(&self) -> String;
}

/// One end's half-built path: created before the peer's blob is known.
pub trait HalfPath: Send {
    /// Connects to the peer described by `peer_blob`.
    fn complete(self: Box<Self>, peer_blob: &[u8]) -> Result<Box<dyn AltPath>, AltError>;
}

/// Decides and builds upgrades; installed once per process by a provider crate.
pub trait Upgrader: Send + Sync {
    /// `RZMQ_RDMA`.
    fn mode(&self) -> Mode;
    /// The [`PROPERTY`] value to advertise, or why this process cannot upgrade.
    fn advertise(&self) -> Result<Vec<u8>, AltError>;
    /// Whether a peer advertising `peer_value` can upgrade with us (`Err`: why not).
    fn compatible(&self, peer_value: &[u8]) -> Result<(), AltError>;
    /// Creates our half for a connection whose stream has `local` as its local address; returns
    /// it with the blob to send to the peer.
    fn start(&self, local: Option<SocketAddr>) -> Result<(Box<dyn HalfPath>, Vec<u8>), AltError>;
    /// Whether `RZMQ_RDMA_LOG` asks for per-connection log lines.
    fn log_enabled(&self) -> bool {
        false
    }
    /// Whether `RZMQ_RDMA_EVENTS` asks for [`crate::monitor::EVENT_TRANSPORT`] monitor events.
    fn events_enabled(&self) -> bool {
        false
    }
}

static UPGRADER: OnceLock<Arc<dyn Upgrader>> = OnceLock::new();

/// Installs the process's upgrader (first call wins; later calls return false).
pub fn install(u: Arc<dyn Upgrader>) -> bool {
    UPGRADER.set(u).is_ok()
}

/// The installed upgrader, if any.
pub fn upgrader() -> Option<&'static Arc<dyn Upgrader>> {
    UPGRADER.get()
}

/// Checks that this process can upgrade connections (for `rdma://` endpoints): an upgrader is
/// installed and has a usable provider.
pub fn require_available() -> Result<(), AltError> {
    match upgrader() {
        None => Err(AltError(
            "no RDMA support in this program (rzmq_rdma::install was not called)".into(),
        )),
        Some(u) => u.advertise().map(|_| ()),
    }
}

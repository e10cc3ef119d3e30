//! One connection's RDMA data path: a QP, its CQ, the credit [`Ring`] and rendezvous, driven
//! from outside by readiness (the seam rzmq-core's engine plugs into after the ZMTP handshake).
//!
//! Lifecycle: [`DataPath::new`] opens a PD, CQ and QP (at INIT), registers the receive ring and
//! credit mailbox and returns the [`ConnectInfo`] to send to the peer over the control channel;
//! [`DataPath::connect`] takes the peer's, posts the receives and moves the QP to RTS. Then the
//! owner loops: when [`DataPath::fd`] is readable (or after sending), [`DataPath::process`];
//! [`DataPath::recv`] until `None`; [`DataPath::send`] until it hands the message back
//! (backpressure: ring credits, rendezvous slots); [`DataPath::flush`] once per burst; before
//! sleeping [`DataPath::arm`] and one more `process` (the verbs arming race).
//!
//! Frames up to the eager limit (the rendezvous threshold, capped by half the peer's ring) are
//! copied once into the ring mirror and once out of the receive ring into a [`Msg`]. Larger ones
//! are not copied at all: the sender's buffer is registered (cached) and READ by the receiver
//! into a pool buffer that becomes the received [`Msg`]; the sender's `Msg` (and with it an
//! external buffer's release callback) is dropped only when the FIN arrives.
//!
//! Any completion error (wire cut, peer dead, access error) fails the data path: every call then
//! returns the error, and dropping it releases every held sender buffer.
//!
//! Files: `setup.rs` ([`DataPath::new`], [`DataPath::connect`]), `send.rs` (the send path),
//! `completion.rs` (receives, completions, READs, arming), `connect_info.rs` (the upgrade blob),
//! `config.rs`, `error.rs`; this one holds the [`DataPath`], its counters and accessors, and
//! names none of the files that implement it.

mod completion;
mod config;
mod connect_info;
mod error;
mod send;
mod setup;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rzmq_core::msg::Msg;

use crate::fd::EventFd;
use crate::mr_cache::{CachedMr, MrCache};
use crate::provider::{Cq, Device, ModifyQp, Mr, Mw, Pd, Qp, WorkCompletion};
use crate::region::Region;
use crate::ring::{Ring, RingStats};
use crate::rndv::{Inbox, Pool, PoolBuf, RndvSender};

/// The registration cache's counters ([`Stats::mr_cache`]).
pub use crate::mr_cache::CacheStats;
pub use config::DataPathConfig;
pub use connect_info::ConnectInfo;
pub use error::DataPathError;

/// What went wrong in a rendezvous ([`DataPathError::Rndv`]).
pub use crate::rndv::RndvError;

/// Per-connection counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames sent.
    pub msgs_tx: u64,
    /// Payload bytes sent.
    pub bytes_tx: u64,
    /// Frames received.
    pub msgs_rx: u64,
    /// Payload bytes received.
    pub bytes_rx: u64,
    /// Frames sent by rendezvous.
    pub rndv_tx: u64,
    /// Rendezvous READs completed.
    pub rndv_reads: u64,
    /// Payload copies made by the library (eager frames: one on each side).
    pub copies: u64,
    /// Bytes copied by those copies.
    pub copied_bytes: u64,
    /// Ring counters (credit stalls among them).
    pub ring: RingStats,
    /// Registration cache counters.
    pub mr_cache: CacheStats,
}

const T_RECV: u64 = 1;

const T_WRITE: u64 = 2;

const T_READ: u64 = 3;

const T_MW: u64 = 4;

const fn wr_id(t: u64, covered: Option<u32>, token: u64) -> u64 {
    let covered = match covered {
        Some(n) => n as u64,
        None => 0,
    };
    (t << 56) | (covered & 0xffff) << 40 | (token & 0xff_ffff_ffff)
}

/// What a rendezvous frame holds until its FIN: the frame itself (so its buffer, and an
/// external buffer's release callback, lives on) and what grants the peer its READ.
struct Hold {
    /// The window bound exactly over the frame, READ only, and its rkey; invalidated at FIN.
    mw: Option<(Arc<dyn Mw>, u32)>,
    /// With windows: the cached registration the window is bound on (no remote rights itself).
    _cached: Option<CachedMr>,
    /// Without windows: this frame's own REMOTE_READ registration, deregistered at FIN.
    _own: Option<Arc<dyn Mr>>,
    _msg: Msg,
}

/// The data path of one connection. Fields drop in order: the QP first (the NIC stops), then
/// registrations, then memory, then held sender frames.
pub struct DataPath {
    qp: Arc<dyn Qp>,
    cq: Arc<dyn Cq>,
    mirror_mr: Option<Arc<dyn Mr>>,
    _ring_mr: Arc<dyn Mr>,
    _mailbox_mr: Arc<dyn Mr>,
    ring: Option<Ring>,
    regions: Option<(Region, Region)>,
    peer: Option<ConnectInfo>,
    inbox: Inbox<Msg, PoolBuf>,
    rndv_tx: RndvSender<Hold>,
    /// Unbound memory windows ready for the next rendezvous frame.
    free_mws: Vec<Arc<dyn Mw>>,
    /// The device has memory windows (else each frame is registered on its own).
    use_mws: bool,
    /// Receive side: the last rendezvous descriptor seen (addr, len, rkey), for diagnostics.
    last_desc: Option<(u64, u64, u32)>,
    pool: Pool,
    cache: MrCache,
    _pd: Arc<dyn Pd>,
    _dev: Arc<dyn Device>,
    epoll: OwnedFd,
    wake: Arc<EventFd>,
    /// Set (with one eventfd write) when a pool buffer returns; cleared when [`DataPath::arm`]
    /// drains `wake`, so that later returns cost an atomic each until then.
    woken: Arc<AtomicBool>,
    /// The CQ was armed since its channel was last read: its event may be pending.
    armed: bool,
    /// Completions were polled since the last arming (else the CQ is still armed: no event
    /// can have fired without a completion `process` has not seen yet).
    polled: bool,
    cfg: DataPathConfig,
    psn: u32,
    max_inline: u32,
    eager_max: usize,
    wcs: Vec<WorkCompletion>,
    stats: Stats,
    failed: bool,
    /// Why it failed (the first error).
    failure: Option<String>,
    /// Completions handled and records taken: grows whenever `process` finds work.
    progress: u64,
}

impl DataPath {
    /// A pollable fd (an epoll set of the CQ's completion channel and the pool's wake-up):
    /// readable when [`DataPath::process`] has work.
    pub fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        if let Some(r) = &self.ring {
            s.ring = r.stats();
        }
        s.mr_cache = self.cache.stats();
        s
    }

    /// The protection domain (tests of what a peer can reach register their buffers in it).
    pub fn pd(&self) -> &Arc<dyn Pd> {
        &self._pd
    }

    /// The queue pair (state queries, soft fault injection).
    pub fn qp(&self) -> &Arc<dyn Qp> {
        &self.qp
    }

    /// Frames above this size go by rendezvous.
    pub fn eager_max(&self) -> usize {
        self.eager_max
    }

    fn check(&self) -> Result<(), DataPathError> {
        if self.failed {
            Err(DataPathError::Failed)
        } else if self.ring.is_none() {
            Err(DataPathError::Setup("not connected"))
        } else {
            Ok(())
        }
    }

    fn fail<T>(&mut self, e: DataPathError) -> Result<T, DataPathError> {
        self.failed = true;
        if self.failure.is_none() {
            self.failure = Some(e.to_string());
        }
        let _ = self.qp.modify(&ModifyQp::Err);
        Err(e)
    }

    /// Why the data path failed, once it has.
    pub(crate) fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Whether rendezvous frames are exposed through memory windows (else through a
    /// registration of their own each).
    pub fn uses_memory_windows(&self) -> bool {
        self.use_mws
    }

    /// Receive side: the last rendezvous descriptor seen (address, length, rkey), for
    /// diagnostics and the tests of what a peer can reach.
    pub fn last_descriptor(&self) -> Option<(u64, u64, u32)> {
        self.last_desc
    }

    /// Grows whenever [`DataPath::process`] handles a completion or takes a record (compare
    /// before and after to know whether it found work).
    pub(crate) fn progress(&self) -> u64 {
        self.progress
    }

    /// True when nothing is owed to the peer: every record sent was consumed by it, every
    /// rendezvous frame read and FIN'd (so every sender buffer is released).
    pub fn is_idle(&self) -> bool {
        self.rndv_tx.in_flight() == 0
            && self
                .ring
                .as_ref()
                .is_none_or(|r| r.unflushed() == 0 && r.unconsumed() == 0)
    }
}

impl Drop for DataPath {
    fn drop(&mut self) {
        // Stop the NIC before any registration or memory goes away; held sender frames are then
        // released by the field drops.
        let _ = self.qp.modify(&ModifyQp::Err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_id_packs() {
        let w = wr_id(T_READ, Some(17), 0x12_3456_789a);
        assert_eq!(w >> 56, T_READ);
        assert_eq!((w >> 40) & 0xffff, 17);
        assert_eq!(w & 0xff_ffff_ffff, 0x12_3456_789a);
    }
}

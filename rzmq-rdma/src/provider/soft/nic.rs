//! What the NIC shares: one open device's state (its key table, QP map, doorbell, flags and
//! counters), which the verbs handles, the two directions and the progress thread all touch,
//! and the handle whose drop stops the thread. The state every part stacks on; the per-QP and
//! per-CQ state it holds (`engine`, `completion`) and the key table (`keys`) sit below.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::config::WireAddr;
use super::engine::QpShared;
use super::keys::MrTable;
use super::os::lock;
use crate::fd::EventFd;

/// One open device's state, shared by its handles and its progress thread.
pub(super) struct Shared {
    pub(super) id: u64,
    pub(super) addr: WireAddr,
    /// GID addressing (`SoftDevice::open_gid_addressed`): the device id and wire address are
    /// the GID, QPs carry no secret.
    pub(super) gid_mode: bool,
    pub(super) mrs: MrTable,
    pub(super) next_key: AtomicU32,
    pub(super) next_qpn: AtomicU32,
    pub(super) next_pdn: AtomicU32,
    pub(super) next_mw: AtomicU32,
    pub(super) qps: Mutex<HashMap<u32, Arc<QpShared>>>,
    pub(super) doorbell: EventFd,
    /// The progress thread is (about to be) asleep in `poll`: a post must signal the doorbell.
    pub(super) asleep: AtomicBool,
    /// Work was posted since the progress thread last looked (see [`Shared::ring`]).
    pub(super) rung: AtomicBool,
    pub(super) shutdown: AtomicBool,
    pub(super) killed: AtomicBool,
    /// `SoftConfig::cma` (never with GID addressing, whose QPs carry no secret).
    pub(super) cma: bool,
    /// Bytes this device's READs copied straight from peer processes.
    pub(super) pulled: AtomicU64,
    /// Opened for fault tests (`SoftConfig::faults`): reachable by `fault`'s `inject`, `kill`
    /// and wire cutters. Production devices are not.
    pub(super) faults: bool,
}

impl Shared {
    /// Rings the doorbell after a post: a system call only when the progress thread sleeps (a
    /// running one looks at every QP again before it sleeps). With `asleep` and `rung` both
    /// sequentially consistent, either the poster sees the thread asleep and signals, or the
    /// thread sees `rung` before sleeping and does not sleep.
    pub(super) fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) {
            self.doorbell.signal();
        }
    }
}

/// The device's state and progress thread; dropping the last handle stops the thread.
pub(super) struct DevHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for DevHandle {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.doorbell.signal();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

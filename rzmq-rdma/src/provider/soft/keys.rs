//! The device's key table: what each lkey and rkey grants (registrations and bound memory
//! windows), the rules for binding a window, and the checks every access passes. The NIC side
//! of memory regions; the verbs handles (`SoftMr`, `SoftMw`) are in `mr`.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::provider::*;

/// What a key grants: a registration (lkey and rkey alike) or a bound memory window (rkey).
/// The loopback provider keeps the same entries (one table per PD there, `pdn` 0).
#[derive(Clone, Copy)]
pub(crate) struct MrEntry {
    /// First byte granted.
    pub(crate) addr: u64,
    /// Bytes granted.
    pub(crate) len: u64,
    /// Rights granted.
    pub(crate) access: Access,
    /// The protection domain of the registration (or of the window).
    pub(crate) pdn: u32,
}

impl MrEntry {
    /// Whether the entry grants `need` over `addr..addr+len` (its PD aside).
    #[inline]
    pub(crate) fn covers(&self, addr: u64, len: u64, need: Access) -> bool {
        self.access.contains(need)
            && addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }
}

/// Whether a memory window may be bound over `addr..addr+len` of the MR at
/// `mr_addr..mr_addr+mr_len` (rights `mr_access`) with rights `access`: the MR allows binding
/// (`MW_BIND`), the range lies inside it, the window grants no local write, and remote write
/// only on an MR with local write (the verbs rules; the PD and device checks are the caller's).
pub(crate) fn window_fits(
    mr_addr: u64,
    mr_len: u64,
    mr_access: Access,
    addr: u64,
    len: u64,
    access: Access,
) -> bool {
    let in_range = addr >= mr_addr
        && addr
            .checked_add(len)
            .is_some_and(|end| end <= mr_addr + mr_len);
    let rights_ok = !access.contains(Access::LOCAL_WRITE)
        && (!access.contains(Access::REMOTE_WRITE) || mr_access.contains(Access::LOCAL_WRITE));
    mr_access.contains(Access::MW_BIND) && in_range && rights_ok
}

/// rkeys of memory windows: top bit set (MR keys stay below it), then a 23-bit window index and
/// the 8-bit key byte that each binding increments.
pub(super) const MW_KEY_BIT: u32 = 0x8000_0000;

/// The key table of one device: key -> what it grants. Registration and deregistration take
/// the write lock; the NIC checks (and holds the read lock) around each transfer chunk, so a
/// deregistration waits for the chunk in progress and then the memory is never touched again.
#[derive(Default)]
pub(super) struct MrTable(RwLock<HashMap<u32, MrEntry>>);

impl MrTable {
    /// The table for checks (a poisoned lock is taken as it is).
    pub(super) fn read(&self) -> RwLockReadGuard<'_, HashMap<u32, MrEntry>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The table for (de)registration and window binds.
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, HashMap<u32, MrEntry>> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

pub(super) fn mr_ok(
    mrs: &HashMap<u32, MrEntry>,
    key: u32,
    pdn: u32,
    addr: u64,
    len: u64,
    need: Access,
) -> bool {
    match mrs.get(&key) {
        Some(e) => e.pdn == pdn && e.covers(addr, len, need),
        None => false,
    }
}

pub(super) fn sges_ok(mrs: &HashMap<u32, MrEntry>, sges: &[Sge], pdn: u32, need: Access) -> bool {
    sges.iter()
        .all(|s| s.length == 0 || mr_ok(mrs, s.lkey, pdn, s.addr, u64::from(s.length), need))
}

//! Registration cache: a buffer sent again and again (a tensor reused across steps) is
//! registered once.
//!
//! Entries are keyed by `(addr, len)`; a lookup with access rights the cached registration lacks
//! registers again (and replaces the entry once unused). Entries in use are never evicted;
//! unused ones are kept in LRU order, bounded by count and bytes. `MrCache::invalidate` drops
//! entries overlapping a range, for callers that learn a range was unmapped (none does yet: it
//! is compiled for the unit tests only).
//!
//! Hazard on real hardware: a registration pins the pages it saw. If the application frees a
//! cached buffer and a later allocation reuses the same virtual range, the cached MR still maps
//! the old pages (a peer would read stale bytes). The data path therefore caches by default only
//! on the soft provider, which reads through the page tables and is immune; on ibverbs the cache
//! is opt-in (`RZMQ_RDMA_MR_CACHE=1`, for applications that keep their tensor buffers alive, as
//! pools do), and `RZMQ_RDMA_MR_CACHE=0` turns it off everywhere. Exposure is not a hazard: the
//! data path registers cached buffers without remote rights and grants each frame through a
//! memory window bound to exactly its bytes (see `datapath`).
//!
//! This module knows nothing of rings or messages.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::provider::{Access, Mr, Pd, Result};

/// Something that registers memory (a PD, or a test double).
pub(crate) trait Registrar: Send + Sync {
    /// Registers `len` bytes at `addr`.
    ///
    /// # Safety
    /// As [`Pd::reg_mr`]: the range must stay valid until the returned MR is dropped.
    unsafe fn register(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>>;
}

impl Registrar for Arc<dyn Pd> {
    unsafe fn register(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>> {
        // SAFETY: forwarded contract.
        unsafe { self.reg_mr(addr, len, access) }
    }
}

/// Cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that registered.
    pub misses: u64,
    /// Unused entries dropped for the bounds.
    pub evictions: u64,
    /// Entries dropped by invalidation.
    pub invalidations: u64,
    /// Entries held now.
    pub entries: u64,
    /// Bytes registered through the cache now.
    pub bytes: u64,
}

struct Entry {
    mr: Arc<dyn Mr>,
    refs: usize,
    tick: u64,
}

struct Inner {
    map: HashMap<(usize, usize), Entry>,
    lru: BTreeMap<u64, (usize, usize)>,
    tick: u64,
    stats: CacheStats,
}

struct Shared {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The cache.
pub(crate) struct MrCache {
    reg: Box<dyn Registrar>,
    shared: Arc<Shared>,
    enabled: bool,
}

/// A registration lent by the cache; returned to its LRU when dropped.
pub(crate) struct CachedMr {
    mr: Arc<dyn Mr>,
    key: (usize, usize),
    shared: Option<Arc<Shared>>,
}

impl CachedMr {
    /// The registration.
    pub(crate) fn mr(&self) -> &Arc<dyn Mr> {
        &self.mr
    }
}

impl Drop for CachedMr {
    fn drop(&mut self) {
        let Some(sh) = self.shared.take() else {
            return;
        };
        let mut g = sh.lock();
        let g = &mut *g;
        let tick = g.tick;
        let mut idle = false;
        if let Some(e) = g.map.get_mut(&self.key) {
            if Arc::ptr_eq(&e.mr, &self.mr) {
                e.refs -= 1;
                if e.refs == 0 {
                    e.tick = tick;
                    idle = true;
                }
            }
        }
        if idle {
            g.lru.insert(tick, self.key);
            g.tick += 1;
            evict(g, sh.max_entries, sh.max_bytes);
        }
    }
}

fn evict(g: &mut Inner, max_entries: usize, max_bytes: usize) {
    while g.map.len() > max_entries || g.stats.bytes as usize > max_bytes {
        let Some((_, key)) = g.lru.pop_first() else {
            return;
        };
        if let Some(e) = g.map.remove(&key) {
            g.stats.bytes -= key.1 as u64;
            g.stats.evictions += 1;
            drop(e);
        }
    }
    g.stats.entries = g.map.len() as u64;
}

impl MrCache {
    /// A cache over `reg` holding at most `max_entries` registrations and `max_bytes` bytes of
    /// unused ones; `enabled = false` registers on every lookup and deregisters on release.
    pub(crate) fn new(
        reg: Box<dyn Registrar>,
        max_entries: usize,
        max_bytes: usize,
        enabled: bool,
    ) -> MrCache {
        MrCache {
            reg,
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    map: HashMap::new(),
                    lru: BTreeMap::new(),
                    tick: 0,
                    stats: CacheStats::default(),
                }),
                max_entries,
                max_bytes,
            }),
            enabled,
        }
    }

    /// A registration covering exactly `addr..addr+len` with at least `access`.
    ///
    /// # Safety
    /// The range must stay valid while the returned handle lives, and (cache enabled) until it
    /// is invalidated or evicted, or be covered by the hazard rules in the module docs.
    pub(crate) unsafe fn get(&self, addr: *mut u8, len: usize, access: Access) -> Result<CachedMr> {
        let key = (addr as usize, len);
        if !self.enabled {
            self.shared.lock().stats.misses += 1;
            // SAFETY: forwarded contract.
            let mr = unsafe { self.reg.register(addr, len, access) }?;
            return Ok(CachedMr {
                mr,
                key,
                shared: None,
            });
        }
        {
            let mut g = self.shared.lock();
            let g = &mut *g;
            if let Some(e) = g.map.get_mut(&key) {
                if e.mr.access().contains(access) {
                    if e.refs == 0 {
                        g.lru.remove(&e.tick);
                    }
                    e.refs += 1;
                    g.stats.hits += 1;
                    return Ok(CachedMr {
                        mr: e.mr.clone(),
                        key,
                        shared: Some(self.shared.clone()),
                    });
                }
            }
        }
        // SAFETY: forwarded contract.
        let mr = unsafe { self.reg.register(addr, len, access) }?;
        let mut g = self.shared.lock();
        let g = &mut *g;
        g.stats.misses += 1;
        match g.map.get(&key) {
            Some(e) if e.refs > 0 => {
                // Held with weaker rights by someone else: lend this one uncached.
                return Ok(CachedMr {
                    mr,
                    key,
                    shared: None,
                });
            }
            Some(e) => {
                let t = e.tick;
                g.lru.remove(&t);
                g.map.remove(&key);
                g.stats.bytes -= len as u64;
            }
            None => {}
        }
        g.map.insert(
            key,
            Entry {
                mr: mr.clone(),
                refs: 1,
                tick: 0,
            },
        );
        g.stats.bytes += len as u64;
        evict(g, self.shared.max_entries, self.shared.max_bytes);
        Ok(CachedMr {
            mr,
            key,
            shared: Some(self.shared.clone()),
        })
    }

    /// Drops every entry overlapping `addr..addr+len` (entries in use are deregistered when
    /// their last handle goes).
    #[cfg(test)] // Only the unit tests call it; the data path never does.
    pub(crate) fn invalidate(&self, addr: usize, len: usize) {
        let mut g = self.shared.lock();
        let g = &mut *g;
        let end = addr.saturating_add(len);
        let keys: Vec<_> = g
            .map
            .keys()
            .filter(|(a, l)| *a < end && addr < a.saturating_add(*l))
            .copied()
            .collect();
        for k in keys {
            if let Some(e) = g.map.remove(&k) {
                if e.refs == 0 {
                    g.lru.remove(&e.tick);
                }
                g.stats.bytes -= k.1 as u64;
                g.stats.invalidations += 1;
            }
        }
        g.stats.entries = g.map.len() as u64;
    }

    /// Counters.
    pub(crate) fn stats(&self) -> CacheStats {
        let mut s = self.shared.lock().stats;
        s.entries = self.shared.lock().map.len() as u64;
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

    /// A registrar that hands out fake MRs and counts live registrations.
    pub(crate) struct FakeReg {
        pub live: Arc<AtomicUsize>,
        pub next: AtomicU32,
    }

    struct FakeMr {
        addr: u64,
        len: usize,
        key: u32,
        access: Access,
        live: Arc<AtomicUsize>,
    }

    impl Mr for FakeMr {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn addr(&self) -> u64 {
            self.addr
        }
        fn len(&self) -> usize {
            self.len
        }
        fn lkey(&self) -> u32 {
            self.key
        }
        fn rkey(&self) -> u32 {
            self.key
        }
        fn access(&self) -> Access {
            self.access
        }
    }

    impl Drop for FakeMr {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl FakeReg {
        pub(crate) fn new() -> (FakeReg, Arc<AtomicUsize>) {
            let live = Arc::new(AtomicUsize::new(0));
            (
                FakeReg {
                    live: live.clone(),
                    next: AtomicU32::new(1),
                },
                live,
            )
        }
    }

    impl Registrar for FakeReg {
        unsafe fn register(
            &self,
            addr: *mut u8,
            len: usize,
            access: Access,
        ) -> Result<Arc<dyn Mr>> {
            self.live.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(FakeMr {
                addr: addr as u64,
                len,
                key: self.next.fetch_add(1, Ordering::SeqCst),
                access,
                live: self.live.clone(),
            }))
        }
    }

    fn get(c: &MrCache, addr: usize, len: usize, a: Access) -> CachedMr {
        // SAFETY: FakeReg never touches the memory.
        unsafe { c.get(addr as *mut u8, len, a) }.unwrap()
    }

    #[test]
    fn reused_buffer_registers_once() {
        let (reg, live) = FakeReg::new();
        let c = MrCache::new(Box::new(reg), 4, 1 << 30, true);
        let a = get(&c, 0x1000, 100, Access::REMOTE_READ);
        let k = a.mr().rkey();
        drop(a);
        for _ in 0..10 {
            let b = get(&c, 0x1000, 100, Access::REMOTE_READ);
            assert_eq!(b.mr().rkey(), k);
        }
        let s = c.stats();
        assert_eq!((s.hits, s.misses, live.load(Ordering::SeqCst)), (10, 1, 1));
        // Stronger rights register again and replace the idle entry.
        let w = get(&c, 0x1000, 100, Access::REMOTE_READ | Access::LOCAL_WRITE);
        assert_ne!(w.mr().rkey(), k);
        drop(w);
        assert_eq!(live.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn lru_bound_never_evicts_entries_in_use() {
        let (reg, live) = FakeReg::new();
        let c = MrCache::new(Box::new(reg), 2, 1 << 30, true);
        let held: Vec<_> = (0..4)
            .map(|i| get(&c, 0x1000 * (i + 1), 10, Access::REMOTE_READ))
            .collect();
        assert_eq!(live.load(Ordering::SeqCst), 4);
        drop(held);
        // Two idle entries survive, the oldest two went.
        assert_eq!(live.load(Ordering::SeqCst), 2);
        assert_eq!(c.stats().evictions, 2);
        assert_eq!(c.stats().hits, 0);
        get(&c, 0x4000, 10, Access::REMOTE_READ);
        assert_eq!(c.stats().hits, 1);
        // Byte bound.
        let (reg, live) = FakeReg::new();
        let c = MrCache::new(Box::new(reg), 100, 1000, true);
        drop(get(&c, 0x1000, 600, Access::REMOTE_READ));
        drop(get(&c, 0x9000, 600, Access::REMOTE_READ));
        assert_eq!(live.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn invalidate_and_disabled() {
        let (reg, live) = FakeReg::new();
        let c = MrCache::new(Box::new(reg), 10, 1 << 30, true);
        let a = get(&c, 0x1000, 0x100, Access::REMOTE_READ);
        drop(get(&c, 0x2000, 0x100, Access::REMOTE_READ));
        c.invalidate(0x1080, 0x1000);
        assert_eq!(
            live.load(Ordering::SeqCst),
            1,
            "idle entry gone, used one kept"
        );
        drop(a);
        assert_eq!(live.load(Ordering::SeqCst), 0);
        let (reg, live) = FakeReg::new();
        let c = MrCache::new(Box::new(reg), 10, 1 << 30, false);
        drop(get(&c, 0x1000, 1, Access::REMOTE_READ));
        drop(get(&c, 0x1000, 1, Access::REMOTE_READ));
        assert_eq!((c.stats().misses, live.load(Ordering::SeqCst)), (2, 0));
    }
}

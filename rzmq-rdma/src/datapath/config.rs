//! A data path's tunables ([`DataPathConfig`]): ring sizes and batching, rendezvous limits, the
//! registration cache, memory windows, the QP's timers.

use crate::provider::RtsAttr;
use crate::ring::RingConfig;

/// Tunables of a data path.
#[derive(Debug, Clone)]
pub struct DataPathConfig {
    /// Ring sizes and batching.
    pub ring: RingConfig,
    /// Frames above this many bytes go by rendezvous (`RZMQ_RDMA_RNDV_THRESHOLD`).
    pub rndv_threshold: usize,
    /// Rendezvous frames awaiting their FIN before `send` pushes back.
    pub max_rndv_in_flight: usize,
    /// Bytes of rendezvous frames awaiting their FIN before `send` pushes back (one frame is
    /// always allowed). The receiver reads `max_read_bytes` at once; frames held beyond a
    /// queue of descriptors for it only wait, outside the socket's high-water mark, while the
    /// application allocates new ones.
    pub max_rndv_bytes: usize,
    /// RDMA READs in flight at once (also bounded by `rts.max_rd_atomic`).
    pub max_reads: usize,
    /// Bytes being READ at once (at least one READ whatever its size). Enough to keep a link
    /// busy over its round trip; more only spreads the writes over more pool buffers (colder
    /// caches, less recycling while the application holds received frames).
    pub max_read_bytes: usize,
    /// Bytes of registered receive pool.
    pub pool_bytes: usize,
    /// Received frames buffered before the ring stops being drained (backpressure).
    pub inbox_max: usize,
    /// Registrations kept by the cache.
    pub mr_cache_entries: usize,
    /// Bytes of idle registrations kept by the cache.
    pub mr_cache_bytes: usize,
    /// Cache registrations (`RZMQ_RDMA_MR_CACHE`; `None`: on for the soft and loopback
    /// providers, off for ibverbs, see `mr_cache`'s hazard note).
    pub mr_cache: Option<bool>,
    /// Expose rendezvous frames through memory windows when the device has them
    /// (`RZMQ_RDMA_MW`, default on); off: one registration per frame.
    pub use_mws: bool,
    /// RTS attributes (timeout, retries; the PSN is chosen here).
    pub rts: RtsAttr,
    /// RNR timer code advertised to the peer.
    pub min_rnr_timer: u8,
}

impl Default for DataPathConfig {
    fn default() -> Self {
        DataPathConfig {
            ring: RingConfig::default(),
            rndv_threshold: crate::rndv::DEFAULT_THRESHOLD,
            max_rndv_in_flight: 256,
            max_rndv_bytes: 16 << 20,
            max_reads: 16,
            max_read_bytes: 4 << 20,
            pool_bytes: 256 << 20,
            inbox_max: 1024,
            mr_cache_entries: 1024,
            mr_cache_bytes: 1 << 30,
            mr_cache: None,
            use_mws: true,
            rts: RtsAttr::new(0),
            min_rnr_timer: 12,
        }
    }
}

impl DataPathConfig {
    /// Defaults with the options' rendezvous threshold, registration cache and memory windows.
    pub fn from_options(o: &crate::RdmaOptions) -> DataPathConfig {
        DataPathConfig {
            rndv_threshold: o.rndv_threshold,
            mr_cache: o.mr_cache,
            use_mws: o.mw,
            ..DataPathConfig::default()
        }
    }
}

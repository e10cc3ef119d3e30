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

use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rzmq_core::msg::{Msg, MSG_COMMAND, MSG_MORE};

use crate::fd::EventFd;
use crate::mr_cache::{CachedMr, MrCache};
use crate::provider::{
    self, Access, Cq, Device, Endpoint, InitAttr, ModifyQp, Mr, Mw, Pd, PostError, Qp, QpCaps,
    QpInit, RecvWr, RemoteAddr, RtrAttr, RtsAttr, SendFlags, SendOp, SendWr, Sge, WcOpcode,
    WcStatus, WorkCompletion,
};
use crate::region::Region;
use crate::ring::{Kind, Op, Ring, RingConfig, RingError, RingStats, MAILBOX_LEN};
use crate::rndv::{Descriptor, Inbox, Pool, PoolBuf, RndvSender, DESC_LEN};
use crate::wire::{self, Layout, Reader, WireError, Writer};

/// The registration cache's counters ([`Stats::mr_cache`]).
pub use crate::mr_cache::CacheStats;
/// What went wrong in a rendezvous ([`DataPathError::Rndv`]).
pub use crate::rndv::RndvError;

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

/// What one end sends the other (in the upgrade command on the control channel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectInfo {
    /// The QP.
    pub endpoint: Endpoint,
    /// Receive ring address.
    pub ring_addr: u64,
    /// Its rkey.
    pub ring_rkey: u32,
    /// Its size.
    pub ring_size: u32,
    /// Credit mailbox address.
    pub mailbox_addr: u64,
    /// Its rkey.
    pub mailbox_rkey: u32,
    /// Receives posted for notifications.
    pub recv_depth: u32,
}

/// Bytes of connect information before its endpoint.
const CI_FIXED: usize = 5 + 8 + 4 + 4 + 8 + 4 + 4;

impl Layout for ConnectInfo {
    const NAME: &'static str = "RDMA connect info";

    fn encoded_len(&self) -> usize {
        CI_FIXED + self.endpoint.encoded_len()
    }

    /// The blob header ([`wire::MAGIC`], [`wire::VERSION`]), ring address, rkey and size, mailbox
    /// address and rkey, receives posted, then the [`Endpoint`].
    fn encode(&self, w: &mut Writer<'_>) {
        w.header();
        w.u64(self.ring_addr);
        w.u32(self.ring_rkey);
        w.u32(self.ring_size);
        w.u64(self.mailbox_addr);
        w.u32(self.mailbox_rkey);
        w.u32(self.recv_depth);
        self.endpoint.encode(w);
    }

    fn decode(r: &mut Reader<'_>) -> Result<ConnectInfo, WireError> {
        r.header()?;
        Ok(ConnectInfo {
            ring_addr: r.u64()?,
            ring_rkey: r.u32()?,
            ring_size: r.u32()?,
            mailbox_addr: r.u64()?,
            mailbox_rkey: r.u32()?,
            recv_depth: r.u32()?,
            endpoint: Endpoint::decode(r)?,
        })
    }
}

impl ConnectInfo {
    /// The upgrade blob (`RZMQ-UP-EP`'s payload; [`crate::wire`], docs/RDMA.md).
    pub fn to_bytes(&self) -> Vec<u8> {
        wire::to_vec(self)
    }

    /// Parses [`ConnectInfo::to_bytes`]' output, all of it; never panics. A blob of another
    /// wire version is [`WireError::Version`].
    pub fn from_bytes(b: &[u8]) -> Result<ConnectInfo, DataPathError> {
        Ok(wire::from_bytes(b)?)
    }
}

/// Why a data path failed.
#[derive(Debug)]
pub enum DataPathError {
    /// A verbs call failed.
    Verbs(provider::Error),
    /// A post failed.
    Post(PostError),
    /// A work request completed with an error (the QP is in ERR: wire cut, peer gone, ...).
    Completion {
        /// The status.
        status: WcStatus,
        /// The completion's opcode.
        opcode: WcOpcode,
    },
    /// The peer broke the ring protocol.
    Ring(RingError),
    /// The peer broke the rendezvous protocol.
    Rndv(RndvError),
    /// Setup could not proceed (unsuitable device, calls out of order).
    Setup(&'static str),
    /// The peer's connect information does not decode, or is of another wire version.
    Wire(WireError),
    /// The data path failed earlier; it is unusable.
    Failed,
}

impl fmt::Display for DataPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataPathError::Verbs(e) => write!(f, "verbs: {e}"),
            DataPathError::Post(e) => write!(f, "{e}"),
            DataPathError::Completion { status, opcode } => {
                write!(f, "work request failed: {status:?} ({opcode:?})")
            }
            DataPathError::Ring(e) => write!(f, "{e}"),
            DataPathError::Rndv(e) => write!(f, "{e}"),
            DataPathError::Setup(w) => write!(f, "RDMA setup: {w}"),
            DataPathError::Wire(e) => write!(f, "RDMA setup: {e}"),
            DataPathError::Failed => f.write_str("RDMA data path failed earlier"),
        }
    }
}

impl std::error::Error for DataPathError {}

impl From<provider::Error> for DataPathError {
    fn from(e: provider::Error) -> Self {
        DataPathError::Verbs(e)
    }
}
impl From<PostError> for DataPathError {
    fn from(e: PostError) -> Self {
        DataPathError::Post(e)
    }
}
impl From<RingError> for DataPathError {
    fn from(e: RingError) -> Self {
        DataPathError::Ring(e)
    }
}
impl From<RndvError> for DataPathError {
    fn from(e: RndvError) -> Self {
        DataPathError::Rndv(e)
    }
}
impl From<WireError> for DataPathError {
    fn from(e: WireError) -> Self {
        DataPathError::Wire(e)
    }
}

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

fn epoll_add(ep: RawFd, fd: RawFd) -> std::io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: fd as u64,
    };
    // SAFETY: valid epoll fd, valid fd, valid event struct.
    if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl DataPath {
    /// Creates the QP (INIT) and the receive side on `dev`; returns the info for the peer.
    pub fn new(
        dev: Arc<dyn Device>,
        cfg: DataPathConfig,
    ) -> Result<(DataPath, ConnectInfo), DataPathError> {
        let dev_kind = dev.info().provider;
        let pd = dev.alloc_pd()?;
        let rc = &cfg.ring;
        // Binds and invalidations (two per rendezvous frame in flight) take send-queue slots
        // beside the ring's own.
        let mw_wrs = 2 * cfg.max_rndv_in_flight as u32;
        let cq =
            dev.create_cq(rc.max_send_wr + mw_wrs + 2 * rc.recv_depth + cfg.max_reads as u32 + 64)?;
        // Memory windows when the device has them: the registration cache then grants nothing
        // remotely by itself, and each frame's window covers exactly its bytes until its FIN.
        let first_mw = if cfg.use_mws {
            pd.alloc_mw().ok()
        } else {
            None
        };
        let qp = pd.create_qp(&QpInit {
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
            caps: QpCaps {
                max_send_wr: rc.max_send_wr + mw_wrs,
                max_recv_wr: rc.recv_depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            sq_sig_all: false,
        })?;
        let max_inline = qp.caps().max_inline_data;
        if (max_inline as usize) < MAILBOX_LEN {
            return Err(DataPathError::Setup("device inline limit below 32 bytes"));
        }
        let ring_region = Region::new(rc.size as usize);
        let mailbox = Region::new(MAILBOX_LEN);
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        // SAFETY: both regions are owned by this DataPath and dropped after the MRs (field
        // order); they are only accessed through the ring's protocol rules.
        let ring_mr = unsafe { pd.reg_mr(ring_region.as_ptr(), ring_region.len(), rw) }?;
        // SAFETY: as above.
        let mailbox_mr = unsafe { pd.reg_mr(mailbox.as_ptr(), mailbox.len(), rw) }?;
        qp.modify(&ModifyQp::Init(InitAttr {
            port: dev.port(),
            pkey_index: 0,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        }))?;
        let psn = (random_u32() & 0xff_ffff).max(1);
        let endpoint = qp.endpoint(psn)?;
        let info = ConnectInfo {
            endpoint,
            ring_addr: ring_region.addr(),
            ring_rkey: ring_mr.rkey(),
            ring_size: rc.size,
            mailbox_addr: mailbox.addr(),
            mailbox_rkey: mailbox_mr.rkey(),
            recv_depth: rc.recv_depth,
        };
        let wake = Arc::new(EventFd::new().map_err(provider::Error::Io)?);
        // SAFETY: plain syscall; checked below and owned.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(provider::Error::Io(std::io::Error::last_os_error()).into());
        }
        // SAFETY: ep is a fresh fd we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        epoll_add(ep, cq.fd()).map_err(provider::Error::Io)?;
        epoll_add(ep, wake.fd()).map_err(provider::Error::Io)?;
        let w2 = wake.clone();
        let woken = Arc::new(AtomicBool::new(false));
        let woken2 = woken.clone();
        let pool = Pool::new(
            Box::new(pd.clone()),
            cfg.pool_bytes,
            Some(Box::new(move || {
                if !woken2.swap(true, Ordering::AcqRel) {
                    w2.signal();
                }
            })),
        );
        // The QP may not have more READs outstanding than its max_rd_atomic (a NIC would hold
        // the excess in the send queue): never post more.
        let mut inbox = Inbox::new(cfg.max_reads.min(usize::from(cfg.rts.max_rd_atomic.max(1))));
        inbox.set_max_read_bytes(cfg.max_read_bytes as u64);
        let cache = MrCache::new(
            Box::new(pd.clone()),
            cfg.mr_cache_entries,
            cfg.mr_cache_bytes,
            cfg.mr_cache
                .unwrap_or(dev_kind != crate::provider::ProviderKind::Ibverbs),
        );
        Ok((
            DataPath {
                qp,
                cq,
                mirror_mr: None,
                _ring_mr: ring_mr,
                _mailbox_mr: mailbox_mr,
                ring: None,
                regions: Some((ring_region, mailbox)),
                peer: None,
                inbox,
                rndv_tx: RndvSender::new(),
                use_mws: first_mw.is_some(),
                free_mws: first_mw.into_iter().collect(),
                last_desc: None,
                pool,
                cache,
                _pd: pd,
                _dev: dev,
                epoll,
                wake,
                woken,
                armed: false,
                polled: false,
                psn,
                max_inline,
                eager_max: 0,
                wcs: Vec::with_capacity(64),
                stats: Stats::default(),
                failed: false,
                failure: None,
                progress: 0,
                cfg,
            },
            info,
        ))
    }

    /// Connects to the peer described by `peer`: receives posted, QP to RTR and RTS. The peer
    /// must not send before it has our info and we have called this (the upgrade handshake
    /// orders that).
    pub fn connect(&mut self, peer: &ConnectInfo) -> Result<(), DataPathError> {
        let (ring_region, mailbox) = self
            .regions
            .take()
            .ok_or(DataPathError::Setup("connect called twice"))?;
        let ring = Ring::with_regions(
            self.cfg.ring,
            ring_region,
            mailbox,
            peer.ring_size,
            peer.recv_depth,
        )?;
        let m = ring.mirror_region();
        // SAFETY: the mirror lives in the ring, dropped after this MR (field order).
        let mirror_mr = unsafe { self._pd.reg_mr(m.as_ptr(), m.len(), Access::NONE) }?;
        self.eager_max = self.cfg.rndv_threshold.min(ring.max_payload());
        self.mirror_mr = Some(mirror_mr);
        self.ring = Some(ring);
        self.peer = Some(peer.clone());
        self.post_ops()?;
        let mut rtr = RtrAttr::new(peer.endpoint.clone());
        rtr.min_rnr_timer = self.cfg.min_rnr_timer;
        rtr.port = self._dev.port();
        rtr.sgid_index = self._dev.gid_index() as u8;
        self.qp.modify(&ModifyQp::Rtr(rtr))?;
        self.qp.modify(&ModifyQp::Rts(RtsAttr {
            sq_psn: self.psn,
            ..self.cfg.rts
        }))?;
        self.cq.req_notify(false)?;
        self.armed = true;
        Ok(())
    }

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

    /// Queues one frame. `Ok(Some(msg))` hands it back: no room now (ring credits, rendezvous
    /// slots); retry after [`DataPath::process`]. Call [`DataPath::flush`] after a burst.
    pub fn send(&mut self, msg: Msg) -> Result<Option<Msg>, DataPathError> {
        self.check()?;
        let flags = msg.flags() & (MSG_MORE | MSG_COMMAND);
        let len = msg.len();
        let ring = self.ring.as_mut().expect("checked");
        if len <= self.eager_max {
            match ring.send(Kind::Data, flags, msg.data()) {
                Ok(true) => {}
                Ok(false) => return Ok(Some(msg)),
                Err(e) => return self.fail(e.into()),
            }
            self.stats.copies += 1;
            self.stats.copied_bytes += len as u64;
        } else {
            if len > (1 << 31) {
                return Err(DataPathError::Setup("frames above 2 GiB are not supported"));
            }
            let held = self.rndv_tx.in_flight();
            if held >= self.cfg.max_rndv_in_flight
                || (held > 0
                    && self.rndv_tx.in_flight_bytes() + len as u64 > self.cfg.max_rndv_bytes as u64)
            {
                return Ok(Some(msg));
            }
            if !ring.has_room(DESC_LEN) {
                let _ = ring.send(Kind::Rndv, flags, &[0; DESC_LEN]); // counts the stall
                return Ok(Some(msg));
            }
            // Frames this large live in heap storage (owned or external) whose address does not
            // change while the Msg exists, and the Msg is held until the FIN.
            let addr = msg.data().as_ptr() as *mut u8;
            let (hold_mw, cached, own, rkey) = if self.use_mws {
                if !ring.sq_slot_unsignaled() {
                    // The ring may have queued a signaled WR that frees the queue: post it.
                    if let Err(e) = self.post_ops() {
                        return self.fail(e);
                    }
                    return Ok(Some(msg));
                }
                // SAFETY: the Msg keeps the memory alive until its FIN (held with the
                // registration); a cached registration that outlives it grants no remote
                // access (windows do, and they are invalidated at the FIN).
                let cached = match unsafe { self.cache.get(addr, len, Access::MW_BIND) } {
                    Ok(c) => c,
                    Err(e) => return self.fail(e.into()),
                };
                let mw = match self.free_mws.pop() {
                    Some(mw) => mw,
                    None => match self._pd.alloc_mw() {
                        Ok(mw) => mw,
                        Err(e) => return self.fail(e.into()),
                    },
                };
                let bound = self.qp.bind_mw(
                    wr_id(T_MW, None, 0),
                    &*mw,
                    &**cached.mr(),
                    addr as u64,
                    len as u64,
                    Access::REMOTE_READ,
                );
                match bound {
                    Ok(rkey) => (Some((mw, rkey)), Some(cached), None, rkey),
                    Err(e) => return self.fail(e.into()),
                }
            } else {
                // SAFETY: as above; this registration is the frame's own and is dropped
                // (deregistered) at the FIN.
                match unsafe { self._pd.reg_mr(addr, len, Access::REMOTE_READ) } {
                    Ok(mr) => {
                        let rkey = mr.rkey();
                        (None, None, Some(mr), rkey)
                    }
                    Err(e) => return self.fail(e.into()),
                }
            };
            let ring = self.ring.as_mut().expect("checked");
            let desc = Descriptor {
                token: self.rndv_tx.next_token(),
                addr: addr as u64,
                len: len as u64,
                rkey,
            };
            match ring.send(Kind::Rndv, flags, &desc.encode()) {
                Ok(true) => {}
                Ok(false) => return self.fail(DataPathError::Setup("ring room vanished")),
                Err(e) => return self.fail(e.into()),
            }
            let hold = Hold {
                mw: hold_mw,
                _cached: cached,
                _own: own,
                _msg: msg,
            };
            let d = self.rndv_tx.start(hold, desc.addr, desc.len, desc.rkey);
            debug_assert_eq!(d, desc);
            self.stats.rndv_tx += 1;
        }
        self.stats.msgs_tx += 1;
        self.stats.bytes_tx += len as u64;
        Ok(None)
    }

    /// Notifies the peer of everything queued (one doorbell per burst).
    pub fn flush(&mut self) -> Result<(), DataPathError> {
        self.check()?;
        self.ring.as_mut().expect("checked").flush();
        self.post_ops()
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

    /// The next received frame, in order. After a failure, frames that had fully arrived before
    /// it are still returned; then the error.
    pub fn recv(&mut self) -> Result<Option<Msg>, DataPathError> {
        if self.failed && self.ring.is_some() {
            let pool = &self.pool;
            return match self
                .inbox
                .pop(|d, flags, buf| pool.msg_of(buf, d.len as usize, flags))
            {
                Some(m) => Ok(Some(m)),
                None => Err(DataPathError::Failed),
            };
        }
        self.check()?;
        if self.inbox.is_empty() {
            self.pull_records()?;
            self.issue_reads()?;
            self.post_ops()?;
        }
        let pool = &self.pool;
        let m = self
            .inbox
            .pop(|d, flags, buf| pool.msg_of(buf, d.len as usize, flags));
        if let Some(m) = &m {
            self.stats.msgs_rx += 1;
            self.stats.bytes_rx += m.len() as u64;
        }
        Ok(m)
    }

    /// Arms the completion channel; call [`DataPath::process`] once more before sleeping.
    ///
    /// The channel is read here, not in `process`: an arming raises at most one event, and the
    /// owner sleeps only after arming, so one read per arming (and none while nothing was
    /// armed) keeps the fd from staying readable; `process` makes no system call. The pool's
    /// wake-up is drained here too, and only when a buffer came back; the `process` that
    /// follows sees every buffer returned before the drain.
    pub fn arm(&mut self) -> Result<(), DataPathError> {
        if self.woken.load(Ordering::Acquire) {
            self.wake.drain();
            self.woken.store(false, Ordering::Release);
        }
        if self.armed && !self.polled {
            // Still armed: an event that fired since belongs to a completion not yet polled,
            // and leaves the fd readable for the owner's next wait.
            return Ok(());
        }
        if self.armed {
            self.cq.get_events()?;
        }
        self.cq.req_notify(false)?;
        self.armed = true;
        self.polled = false;
        Ok(())
    }

    /// Waits up to `timeout` for [`DataPath::fd`] to become readable.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) > 0 }
    }

    /// Handles completions, FINs, received records, READs and credit returns.
    pub fn process(&mut self) -> Result<(), DataPathError> {
        self.check()?;
        loop {
            self.wcs.clear();
            let n = self.cq.poll(64, &mut self.wcs)?;
            self.progress += n as u64;
            self.polled |= n > 0;
            for i in 0..n {
                let wc = self.wcs[i];
                if let Err(e) = self.on_completion(wc) {
                    // Completions are in order: what arrived before the error is whole. Take
                    // it into the inbox so that `recv` still delivers it.
                    let _ = self.pull_records();
                    return self.fail(e);
                }
            }
            if n < 64 {
                break;
            }
        }
        let done = self
            .ring
            .as_ref()
            .expect("checked")
            .peer_credits()
            .rndv_done;
        // Nothing held and the count in range: nothing to release or check (skips a Vec).
        let fin = if self.rndv_tx.in_flight() == 0 && done < self.rndv_tx.next_token() {
            Ok(Vec::new())
        } else {
            self.rndv_tx.on_fin(done)
        };
        match fin {
            // The peer has read these frames: their windows are invalidated (a replayed
            // descriptor now fails), then dropping the holds returns registrations to the cache
            // (or deregisters them) and releases the frames: an external buffer's release
            // callback runs here, after the peer's READ.
            Ok(released) => {
                for mut h in released {
                    if let Some((mw, rkey)) = h.mw.take() {
                        let ring = self.ring.as_mut().expect("checked");
                        if !ring.sq_slot_unsignaled() {
                            // The queue is full: give up the window rather than leave it valid.
                            drop(mw);
                            continue;
                        }
                        if let Err(e) = self.qp.invalidate_mw(wr_id(T_MW, None, 0), rkey) {
                            return self.fail(e.into());
                        }
                        self.free_mws.push(mw);
                    }
                }
            }
            Err(e) => return self.fail(e.into()),
        }
        if let Err(e) = self.pull_records().and_then(|_| self.issue_reads()) {
            return self.fail(e);
        }
        self.ring.as_mut().expect("checked").flush();
        self.post_ops()
    }

    fn on_completion(&mut self, wc: WorkCompletion) -> Result<(), DataPathError> {
        if wc.status != WcStatus::Success {
            return Err(DataPathError::Completion {
                status: wc.status,
                opcode: wc.opcode,
            });
        }
        let ring = self.ring.as_mut().expect("checked");
        let t = wc.wr_id >> 56;
        let covered = ((wc.wr_id >> 40) & 0xffff) as u32;
        match t {
            T_RECV => ring.on_recv(wc.imm_data.unwrap_or(0))?,
            T_WRITE => ring.on_send_complete(covered),
            T_READ => {
                ring.on_send_complete(covered);
                self.inbox.on_read_done(wc.wr_id & 0xff_ffff_ffff)?;
                ring.rndv_completed(1);
                self.stats.rndv_reads += 1;
            }
            _ => return Err(DataPathError::Setup("unknown completion")),
        }
        Ok(())
    }

    fn pull_records(&mut self) -> Result<(), DataPathError> {
        let ring = self.ring.as_mut().expect("checked");
        while self.inbox.len() < self.cfg.inbox_max {
            let Some(rec) = ring.peek()? else {
                break;
            };
            match rec.kind {
                Kind::Data => {
                    let mut m = Msg::copy_from(rec.data);
                    m.set_more(rec.flags & MSG_MORE != 0);
                    m.set_command(rec.flags & MSG_COMMAND != 0);
                    self.stats.copies += 1;
                    self.stats.copied_bytes += rec.data.len() as u64;
                    self.inbox.push_ready(m);
                }
                Kind::Rndv => {
                    let d = Descriptor::decode(rec.data)?;
                    self.last_desc = Some((d.addr, d.len, d.rkey));
                    if d.len > 1 << 31 {
                        return Err(RndvError::Protocol("rendezvous frame too large").into());
                    }
                    let flags = rec.flags;
                    self.inbox.push_rndv(d, flags)?;
                }
                Kind::Pad => {}
            }
            ring.advance();
            self.progress += 1;
        }
        Ok(())
    }

    fn issue_reads(&mut self) -> Result<(), DataPathError> {
        let ring = self.ring.as_mut().expect("checked");
        let mut err = None;
        while ring.sq_available() > 0 {
            let pool = &self.pool;
            let next = self.inbox.next_read(|d| match pool.alloc(d.len as usize) {
                Ok(b) => b,
                Err(e) => {
                    err = Some(e);
                    None
                }
            });
            let Some((d, buf)) = next else {
                break;
            };
            let signal = ring.sq_slot(true).expect("room checked");
            let sge = [Sge {
                addr: buf.addr(),
                length: d.len as u32,
                lkey: buf.lkey(),
            }];
            let wr = SendWr {
                wr_id: wr_id(T_READ, signal, d.token),
                sg_list: &sge,
                op: SendOp::RdmaRead(RemoteAddr {
                    addr: d.addr,
                    rkey: d.rkey,
                }),
                flags: SendFlags::SIGNALED,
            };
            // SAFETY: not inline; the SGE is a registered pool buffer held by the inbox until
            // the READ completes.
            unsafe { self.qp.post_send(&[wr]) }?;
        }
        match err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Posts what the ring asks for, in its order, without allocating: send WRs in chunks of
    /// [`POST_CHUNK`] (one doorbell each), receives in chunks of [`RECV_WRS`]' length.
    fn post_ops(&mut self) -> Result<(), DataPathError> {
        loop {
            let mut ops = [Op::PostRecv(0); POST_CHUNK];
            let mut n = 0;
            let mut recvs = 0;
            let ring = self.ring.as_mut().expect("checked");
            while n < POST_CHUNK {
                match ring.poll_op() {
                    None => break,
                    // Receives go out after the WRs before them and before any after them (the
                    // ring asks for them first, before the credits that advertise them).
                    Some(Op::PostRecv(k)) => {
                        recvs = k;
                        break;
                    }
                    Some(op) => {
                        ops[n] = op;
                        n += 1;
                    }
                }
            }
            if n > 0 {
                self.post_sends(&ops[..n])?;
            }
            let mut left = recvs as usize;
            while left > 0 {
                let k = left.min(RECV_WRS.len());
                self.qp.post_recv(&RECV_WRS[..k])?;
                left -= k;
            }
            if n < POST_CHUNK && recvs == 0 {
                return Ok(());
            }
        }
    }

    /// Posts up to [`POST_CHUNK`] ring writes and credit updates with one `post_send`.
    fn post_sends(&self, ops: &[Op]) -> Result<(), DataPathError> {
        let peer = self.peer.as_ref().expect("connected");
        let mirror = self.ring.as_ref().expect("checked").mirror_region().addr();
        let mirror_lkey = self.mirror_mr.as_ref().expect("connected").lkey();
        let mut credit_bufs = [[0u8; MAILBOX_LEN]; POST_CHUNK];
        for (buf, op) in credit_bufs.iter_mut().zip(ops) {
            if let Op::Credits { credits, .. } = op {
                *buf = credits.encode();
            }
        }
        let mut sges = [Sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; POST_CHUNK];
        for ((sge, op), buf) in sges.iter_mut().zip(ops).zip(&credit_bufs) {
            *sge = match *op {
                Op::Write { off, len, .. } => Sge {
                    addr: mirror + u64::from(off),
                    length: len,
                    lkey: mirror_lkey,
                },
                Op::Credits { .. } => Sge {
                    addr: buf.as_ptr() as u64,
                    length: MAILBOX_LEN as u32,
                    lkey: 0,
                },
                Op::PostRecv(_) => unreachable!("receives are posted apart"),
            };
        }
        let mut wrs = [SendWr {
            wr_id: 0,
            sg_list: &[],
            op: SendOp::RdmaWrite(RemoteAddr { addr: 0, rkey: 0 }),
            flags: SendFlags::NONE,
        }; POST_CHUNK];
        for ((wr, op), sge) in wrs.iter_mut().zip(ops).zip(&sges) {
            let (remote, imm, signal, mut flags, sg_list) = match *op {
                Op::Write {
                    off,
                    len,
                    imm,
                    signal,
                } => (
                    RemoteAddr {
                        addr: peer.ring_addr + u64::from(off),
                        rkey: peer.ring_rkey,
                    },
                    imm,
                    signal,
                    if len <= self.max_inline {
                        SendFlags::INLINE
                    } else {
                        SendFlags::NONE
                    },
                    // A zero-length WRITE (posted for its completion) carries no SGE: nothing
                    // to gather, and zero-length SGEs are not treated alike by all NICs' drivers.
                    if len == 0 {
                        &[][..]
                    } else {
                        std::slice::from_ref(sge)
                    },
                ),
                Op::Credits { imm, signal, .. } => (
                    RemoteAddr {
                        addr: peer.mailbox_addr,
                        rkey: peer.mailbox_rkey,
                    },
                    imm,
                    signal,
                    SendFlags::INLINE,
                    std::slice::from_ref(sge),
                ),
                Op::PostRecv(_) => unreachable!("receives are posted apart"),
            };
            if signal.is_some() {
                flags = flags | SendFlags::SIGNALED;
            }
            *wr = SendWr {
                wr_id: wr_id(T_WRITE, signal, 0),
                sg_list,
                op: match imm {
                    Some(i) => SendOp::RdmaWriteWithImm(remote, i),
                    None => SendOp::RdmaWrite(remote),
                },
                flags,
            };
        }
        // SAFETY: inline SGEs point into `credit_bufs` or the mirror, both alive for the call;
        // non-inline ones are in the registered mirror, which outlives the QP.
        unsafe { self.qp.post_send(&wrs[..ops.len()]) }?;
        Ok(())
    }
}

/// Send WRs posted with one `post_send` (a flush takes at most three).
const POST_CHUNK: usize = 4;

/// Replacement receives (no buffer: only WRITE_WITH_IMM arrives), posted from this table.
const RECV_WRS: [RecvWr<'static>; 16] = [RecvWr {
    wr_id: wr_id(T_RECV, None, 0),
    sg_list: &[],
}; 16];

impl Drop for DataPath {
    fn drop(&mut self) {
        // Stop the NIC before any registration or memory goes away; held sender frames are then
        // released by the field drops.
        let _ = self.qp.modify(&ModifyQp::Err);
    }
}

fn random_u32() -> u32 {
    let mut v: u32 = 0;
    // SAFETY: getrandom writes at most 4 bytes into the valid u32.
    let n = unsafe { libc::getrandom(&mut v as *mut u32 as *mut libc::c_void, 4, 0) };
    if n != 4 {
        v = std::process::id().wrapping_mul(2_654_435_761);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Gid, Mtu, ProviderKind};

    #[test]
    fn connect_info_round_trip() {
        let ci = ConnectInfo {
            endpoint: Endpoint {
                provider: ProviderKind::Soft,
                qpn: 5,
                psn: 6,
                lid: 0,
                gid: Gid::default(),
                mtu: Mtu::M4096,
                extra: vec![1, 2, 3],
            },
            ring_addr: 0x1000,
            ring_rkey: 7,
            ring_size: 1 << 20,
            mailbox_addr: 0x2000,
            mailbox_rkey: 8,
            recv_depth: 64,
        };
        assert_eq!(ConnectInfo::from_bytes(&ci.to_bytes()).unwrap(), ci);
        assert!(matches!(
            ConnectInfo::from_bytes(&ci.to_bytes()[..20]),
            Err(DataPathError::Wire(WireError::Truncated { .. }))
        ));
    }

    /// A blob as rzmq-rdma of wire version 1 wrote it: the fields little-endian, the endpoint
    /// behind its own magic `RQ` and version, big-endian.
    fn version_1_blob() -> Vec<u8> {
        let mut v = b"RZRD".to_vec();
        v.push(1);
        v.extend_from_slice(&0x1000u64.to_le_bytes());
        v.extend_from_slice(&7u32.to_le_bytes());
        v.extend_from_slice(&(1u32 << 20).to_le_bytes());
        v.extend_from_slice(&0x2000u64.to_le_bytes());
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&64u32.to_le_bytes());
        v.extend_from_slice(b"RQ");
        v.extend_from_slice(&[1, 1]); // endpoint version 1, provider soft
        v.extend_from_slice(&5u32.to_be_bytes());
        v.extend_from_slice(&6u32.to_be_bytes());
        v.extend_from_slice(&0u16.to_be_bytes());
        v.extend_from_slice(&[0; 16]);
        v.push(Mtu::M4096 as u32 as u8);
        v.extend_from_slice(&3u16.to_be_bytes());
        v.extend_from_slice(&[1, 2, 3]);
        v
    }

    #[test]
    fn a_peer_of_another_wire_version_is_refused_not_misparsed() {
        let e = ConnectInfo::from_bytes(&version_1_blob()).unwrap_err();
        assert!(
            matches!(
                e,
                DataPathError::Wire(WireError::Version {
                    peer: 1,
                    ours: wire::VERSION,
                    ..
                })
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("version 1") && text.contains(&format!("speaks {}", wire::VERSION)),
            "{text}"
        );
        // A later version is refused alike.
        let mut later = version_1_blob();
        later[4] = wire::VERSION + 1;
        assert!(matches!(
            ConnectInfo::from_bytes(&later),
            Err(DataPathError::Wire(WireError::Version { .. }))
        ));
    }

    #[test]
    fn wr_id_packs() {
        let w = wr_id(T_READ, Some(17), 0x12_3456_789a);
        assert_eq!(w >> 56, T_READ);
        assert_eq!((w >> 40) & 0xffff, 17);
        assert_eq!(w & 0xff_ffff_ffff, 0x12_3456_789a);
    }

    proptest::proptest! {
        #[test]
        fn connect_info_round_trips(endpoint in crate::provider::tests::endpoint(),
                                    f in proptest::prelude::any::<(u64, u32, u32, u64, u32, u32)>()) {
            let ci = ConnectInfo {
                endpoint,
                ring_addr: f.0,
                ring_rkey: f.1,
                ring_size: f.2,
                mailbox_addr: f.3,
                mailbox_rkey: f.4,
                recv_depth: f.5,
            };
            proptest::prop_assert_eq!(ConnectInfo::from_bytes(&ci.to_bytes()).ok(), Some(ci));
        }

        #[test]
        fn damaged_blobs_never_panic(endpoint in crate::provider::tests::endpoint(),
                                     hits in proptest::collection::vec(proptest::prelude::any::<(usize, u8)>(), 1..4),
                                     cut in 0usize..8) {
            let ci = ConnectInfo {
                endpoint,
                ring_addr: 1,
                ring_rkey: 2,
                ring_size: 3,
                mailbox_addr: 4,
                mailbox_rkey: 5,
                recv_depth: 6,
            };
            let mut b = ci.to_bytes();
            for (at, byte) in hits {
                let i = at % b.len();
                b[i] = byte;
            }
            b.truncate(b.len().saturating_sub(cut));
            // Whatever parses is exactly the blob its bytes encode.
            if let Ok(got) = ConnectInfo::from_bytes(&b) {
                proptest::prop_assert_eq!(got.to_bytes(), b);
            }
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120)) {
            let _ = ConnectInfo::from_bytes(&b);
        }
    }
}

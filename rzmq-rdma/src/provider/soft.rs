//! `soft`: a userspace RC NIC behind the verbs trait, for CI, laptops and fault tests.
//!
//! Each open device runs one progress thread (the "NIC") and listens on a stream socket (TCP, or
//! a Unix socket path). Each connected QP pair gets its own stream, the "wire": when a QP reaches
//! RTR, the end with the smaller (device id, qpn) connects to the other's listener and says which
//! QP it wants; the other end attaches the stream once its QP is at RTR too. Endpoint
//! descriptors carry the device id and listener address, so QPs connect across threads,
//! processes and network namespaces (with a TCP address reachable from the peer).
//!
//! What it reproduces of an RC NIC:
//! - WRITE and READ land in (or are served from) registered memory after the rkey, PD, bounds and
//!   access checks (`REMOTE_WRITE`/`REMOTE_READ` on both the MR and the QP); a failed check NAKs
//!   the requester (`REM_ACCESS_ERR`) and moves the responder QP to ERR as well.
//! - SEND and WRITE_WITH_IMM consume a posted receive; with none posted the responder sends an
//!   RNR NAK and the requester retries after the responder's `min_rnr_timer`, `rnr_retry` times
//!   (7 = forever), then completes with `RNR_RETRY_EXC_ERR`. A receive too small gives
//!   `LOC_LEN_ERR` there and `REM_INV_REQ_ERR` here; a bad receive lkey `LOC_PROT_ERR` /
//!   `REM_OP_ERR`.
//! - Every packet has a PSN; the responder executes in PSN order, NAKs gaps (sequence error),
//!   acknowledges duplicates without re-executing them (READs are re-executed); the requester
//!   goes back N on a NAK or when nothing moved for the ACK timeout (4.096 us * 2^timeout), and
//!   after `retry_cnt` retries completes with `RETRY_EXC_ERR` (cut wire, dead peer). The ACK
//!   timeout runs for requests on the wire only, from their transmission: a request waiting in
//!   the send queue (behind READ responses, a READ limit or a fence) is not timed (with no
//!   working wire every request counts as sent into the void).
//! - READ limits: at most `max_rd_atomic` (RTS) READs outstanding; a READ beyond it, and every WR
//!   behind it, waits in the send queue; `IBV_SEND_FENCE` waits for every earlier READ. A
//!   responder serves at most `max_dest_rd_atomic` (RTR) READs at once and answers one more with
//!   an Invalid Request NAK (`REM_INV_REQ_ERR` at the requester, both QPs to ERR). Both limits
//!   are at most 16 (`EINVAL` above; 0 is taken as 1).
//! - The wire carries requests and responses interleaved (ACKs and NAKs first, then READ
//!   responses and requests in turn), so neither direction starves the other.
//! - Completions in order; successful send WRs complete only when signaled (or `sq_sig_all`);
//!   errors always complete; a QP in ERR flushes every outstanding send and receive WR with
//!   `WR_FLUSH_ERR`, in order, and WRs posted in ERR are flushed at once.
//! - Limits: `max_send_wr` (unsignaled WRs hold their slot until a later signaled completion),
//!   `max_recv_wr`, SGE counts, `max_inline_data` (inline data is copied at post time, lkeys
//!   ignored); bad local keys give `LOC_PROT_ERR`; posting before RTS (send) or in RESET (recv)
//!   is `EINVAL`; illegal state transitions are `EINVAL`.
//! - A CQ's completion fd is an eventfd written when an armed CQ ([`Cq::req_notify`]) gets a new
//!   completion.
//!
//! Simplifications (documented, not hidden): one packet per WR (no MTU segmentation; PSNs count
//! WRs); the header carries a CRC, the payload does not; a memory region deregistered in the
//! middle of a transfer is never touched again (zeros are sent, incoming bytes are dropped);
//! SQ slots of unsignaled WRs are released when the covering signaled completion is generated
//! rather than when it is polled; a READ response's payload counts as progress for the ACK
//! timer while it streams in (a single packet may be far longer than the timeout).
//!
//! Cost model: the progress thread makes one `sendmsg` per batch of packets (headers and
//! payloads gathered from registered memory, no copy above 16 KiB) and receives payloads above
//! 64 KiB straight into their destination. A post rings the doorbell (an eventfd write) only
//! while the thread sleeps, and a consumer that waits for a QP while the thread works on it
//! gets it before the thread's next pass. A TCP wire between two addresses of one host runs the
//! congestion control rzmq's same-host tcp runs (reno: `rzmq_core::transport::tune_same_host`).
//!
//! Fault injection ([`inject`], [`kill`]): cut a QP's wire, stall it for a while, corrupt the
//! next packet header (dropped by the responder, recovered by retransmission), or kill a whole
//! device as a crashed host would die (no more packets, no completions).
//!
//! This module owns the soft NIC; it knows nothing about rings, rendezvous or ZMTP.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;
use crate::fd::EventFd;

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Where a soft device listens for (and peers reach) its wires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireAddr {
    /// A TCP address (port 0 = any when listening).
    Tcp(SocketAddr),
    /// A Unix stream socket path.
    Unix(PathBuf),
}

impl WireAddr {
    /// Parses `tcp:IP:PORT` or `unix:PATH`.
    pub fn parse(s: &str) -> Result<WireAddr> {
        if let Some(rest) = s.strip_prefix("tcp:") {
            rest.parse()
                .map(WireAddr::Tcp)
                .map_err(|_| Error::InvalidArgument("soft wire address: bad tcp address"))
        } else if let Some(rest) = s.strip_prefix("unix:") {
            if rest.is_empty() {
                return Err(Error::InvalidArgument("soft wire address: empty unix path"));
            }
            Ok(WireAddr::Unix(PathBuf::from(rest)))
        } else {
            Err(Error::InvalidArgument(
                "soft wire address must start with tcp: or unix:",
            ))
        }
    }
}

impl std::fmt::Display for WireAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireAddr::Tcp(a) => write!(f, "tcp:{a}"),
            WireAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Settings of a soft device.
#[derive(Debug, Clone)]
pub struct SoftConfig {
    /// Device name.
    pub name: String,
    /// Listener address (`tcp:127.0.0.1:0` by default).
    pub listen: WireAddr,
    /// Address peers should connect to, when it differs from the bound one (a wildcard bind).
    pub advertise: Option<WireAddr>,
    /// READs from a peer in another process of this host that we may read (same user, no
    /// ptrace restriction) copy its memory straight into the destination with
    /// `process_vm_readv`, one copy as a NIC's DMA, instead of through the wire
    /// (`RZMQ_SOFT_CMA`, default on; `0` streams every READ over the wire).
    pub cma: bool,
}

impl Default for SoftConfig {
    fn default() -> Self {
        SoftConfig {
            name: "soft0".into(),
            listen: WireAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], 0))),
            advertise: None,
            cma: true,
        }
    }
}

impl SoftConfig {
    /// From `RZMQ_SOFT_LISTEN` (`tcp:IP:PORT` or `unix:PATH`) and `RZMQ_SOFT_ADVERTISE`.
    pub fn from_env() -> Result<SoftConfig> {
        let mut c = SoftConfig::default();
        if let Ok(v) = std::env::var("RZMQ_SOFT_LISTEN") {
            c.listen = WireAddr::parse(&v)?;
        }
        if let Ok(v) = std::env::var("RZMQ_SOFT_ADVERTISE") {
            c.advertise = Some(WireAddr::parse(&v)?);
        }
        if let Ok(v) = std::env::var("RZMQ_SOFT_CMA") {
            c.cma = match v.as_str() {
                "0" | "off" | "false" => false,
                "1" | "on" | "true" | "" => true,
                _ => return Err(Error::InvalidArgument("RZMQ_SOFT_CMA: 0 or 1")),
            };
        }
        Ok(c)
    }
}

/// The soft provider: one always-present device per open.
#[derive(Debug, Clone, Default)]
pub struct SoftProvider {
    cfg: SoftConfig,
}

impl SoftProvider {
    /// A provider whose devices use `cfg`.
    pub fn new(cfg: SoftConfig) -> SoftProvider {
        SoftProvider { cfg }
    }

    /// A provider configured from the environment ([`SoftConfig::from_env`]).
    pub fn from_env() -> Result<SoftProvider> {
        Ok(SoftProvider::new(SoftConfig::from_env()?))
    }

    /// Opens a device with this provider's configuration, returning the concrete type.
    pub fn open_soft(&self) -> Result<Arc<SoftDevice>> {
        SoftDevice::open(self.cfg.clone())
    }
}

impl Provider for SoftProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Soft
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(vec![DeviceInfo {
            name: self.cfg.name.clone(),
            provider: ProviderKind::Soft,
        }])
    }

    fn open(&self, name: Option<&str>) -> Result<Arc<dyn Device>> {
        if let Some(n) = name {
            if n != self.cfg.name {
                return Err(Error::NotFound(format!("soft device {n}")));
            }
        }
        Ok(self.open_soft()?)
    }
}

// ---------------------------------------------------------------------------------------------
// Fault injection
// ---------------------------------------------------------------------------------------------

/// A fault to inject into a soft QP's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Close the QP's wire in both directions (both ends see it dead; requesters time out).
    CutWire,
    /// Stop transmitting on the QP's wire for this long (packets wait, timers run).
    Delay(Duration),
    /// Flip a bit in the header of the next request packet: the responder drops it (bad CRC) and
    /// the requester recovers by retransmission (or fails after `retry_cnt`).
    CorruptNext,
}

/// Injects `fault` into `qp`, which must be a soft QP.
pub fn inject(qp: &dyn Qp, fault: Fault) -> Result<()> {
    let sq = qp
        .as_any()
        .downcast_ref::<SoftQp>()
        .ok_or(Error::Unsupported("fault injection needs a soft QP"))?;
    {
        let mut g = sq.qp.lock();
        match fault {
            Fault::CutWire => {
                if let Some(w) = g.wire.as_mut() {
                    w.cut();
                } else {
                    g.wire = Some(Wire::dead());
                }
            }
            Fault::Delay(d) => g.hold_until = Some(Instant::now() + d),
            Fault::CorruptNext => g.corrupt_next += 1,
        }
    }
    sq.h.shared.doorbell.signal();
    Ok(())
}

/// Kills a soft device as a crashed host dies: its progress thread stops at once, every wire is
/// closed, nothing more is sent or completed.
pub fn kill(dev: &dyn Device) -> Result<()> {
    let d = dev
        .as_any()
        .downcast_ref::<SoftDevice>()
        .ok_or(Error::Unsupported("kill needs a soft device"))?;
    d.h.shared.killed.store(true, Ordering::SeqCst);
    d.h.shared.doorbell.signal();
    Ok(())
}

/// Every soft device open in this process (for [`cut_all_wires`]).
static LIVE_DEVICES: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

/// Cuts the wire of every connected QP of every soft device in this process, as if each cable
/// were pulled ([`Fault::CutWire`] on each); returns how many were cut. For tests of the layers
/// above, which do not hold the QPs themselves.
pub fn cut_all_wires() -> usize {
    cut_wires_where(|_| true)
}

/// [`cut_all_wires`] for the devices whose wire address has IP `ip` only (the upgrader opens a
/// device per local address, so this cuts the connections made from one address).
pub fn cut_wires_at(ip: std::net::IpAddr) -> usize {
    cut_wires_where(|a| matches!(a, WireAddr::Tcp(s) if s.ip() == ip))
}

fn cut_wires_where(pick: impl Fn(&WireAddr) -> bool) -> usize {
    let devices: Vec<Arc<Shared>> = lock(&LIVE_DEVICES)
        .iter()
        .filter_map(|w| w.upgrade())
        .filter(|d| pick(&d.addr))
        .collect();
    let mut n = 0;
    for d in devices {
        let qps: Vec<Arc<QpShared>> = lock(&d.qps).values().cloned().collect();
        for q in qps {
            let mut g = q.lock();
            if let Some(w) = g.wire.as_mut() {
                w.cut();
                n += 1;
            }
        }
        d.doorbell.signal();
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct MrEntry {
    addr: u64,
    len: u64,
    access: Access,
    pdn: u32,
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    fn fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        }
    }

    fn accept(&self) -> io::Result<WireStream> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                let _ = s.set_nodelay(true);
                // A wire between two devices of this host: no pacing (as rzmq's tcp).
                rzmq_core::transport::tune_same_host(&s);
                Ok(WireStream::Tcp(s))
            }
            Listener::Unix(l, _) => Ok(WireStream::Unix(l.accept()?.0)),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

struct Shared {
    id: u64,
    addr: WireAddr,
    /// GID addressing ([`SoftDevice::open_gid_addressed`]): the device id and wire address are
    /// the GID, QPs carry no secret.
    gid_mode: bool,
    mrs: RwLock<HashMap<u32, MrEntry>>,
    next_key: AtomicU32,
    next_qpn: AtomicU32,
    next_pdn: AtomicU32,
    next_mw: AtomicU32,
    qps: Mutex<HashMap<u32, Arc<QpShared>>>,
    doorbell: EventFd,
    /// The progress thread is (about to be) asleep in `poll`: a post must signal the doorbell.
    asleep: AtomicBool,
    /// Work was posted since the progress thread last looked (see [`Shared::ring`]).
    rung: AtomicBool,
    shutdown: AtomicBool,
    killed: AtomicBool,
    /// [`SoftConfig::cma`] (never with GID addressing, whose QPs carry no secret).
    cma: bool,
    /// Bytes this device's READs copied straight from peer processes.
    pulled: AtomicU64,
}

impl Shared {
    /// Rings the doorbell after a post: a system call only when the progress thread sleeps (a
    /// running one looks at every QP again before it sleeps). With `asleep` and `rung` both
    /// sequentially consistent, either the poster sees the thread asleep and signals, or the
    /// thread sees `rung` before sleeping and does not sleep.
    fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) {
            self.doorbell.signal();
        }
    }

    fn mrs(&self) -> std::sync::RwLockReadGuard<'_, HashMap<u32, MrEntry>> {
        self.mrs.read().unwrap_or_else(|e| e.into_inner())
    }
}

struct DevHandle {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn random_u64() -> u64 {
    let mut v: u64 = 0;
    // SAFETY: getrandom writes at most 8 bytes into the valid u64.
    let n = unsafe { libc::getrandom(&mut v as *mut u64 as *mut libc::c_void, 8, 0) };
    if n != 8 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        v = t ^ (u64::from(std::process::id()) << 32);
    }
    v
}

/// An open soft device: a listener and a progress thread.
pub struct SoftDevice {
    h: Arc<DevHandle>,
    info: DeviceInfo,
}

impl SoftDevice {
    /// Opens a device: binds the listener and starts the progress thread.
    pub fn open(cfg: SoftConfig) -> Result<Arc<SoftDevice>> {
        SoftDevice::open_with(cfg, false)
    }

    /// Opens a device addressed as a RoCE port is: by its GID alone ([`SoftDevice::gid`],
    /// which encodes the listener's IPv4 address and port), with no per-QP secret, so that a
    /// peer connects knowing only the QP number, PSN and GID that `ibv_modify_qp` carries. A wire
    /// is still accepted only from the remote QP the QP was connected to (as an RC QP accepts
    /// packets only from its remote QP and GID). IPv4 TCP listeners only.
    pub fn open_gid_addressed(cfg: SoftConfig) -> Result<Arc<SoftDevice>> {
        SoftDevice::open_with(cfg, true)
    }

    fn open_with(cfg: SoftConfig, gid_mode: bool) -> Result<Arc<SoftDevice>> {
        if gid_mode && !matches!(&cfg.listen, WireAddr::Tcp(a) if a.is_ipv4()) {
            return Err(Error::InvalidArgument(
                "GID addressing needs an IPv4 tcp listener",
            ));
        }
        let (listener, bound) = match &cfg.listen {
            WireAddr::Tcp(a) => {
                let l = TcpListener::bind(a)?;
                l.set_nonblocking(true)?;
                let local = l.local_addr()?;
                (Listener::Tcp(l), WireAddr::Tcp(local))
            }
            WireAddr::Unix(p) => {
                let _ = std::fs::remove_file(p);
                let l = UnixListener::bind(p)?;
                l.set_nonblocking(true)?;
                (Listener::Unix(l, p.clone()), WireAddr::Unix(p.clone()))
            }
        };
        let addr = match (&cfg.advertise, bound) {
            (Some(a), _) => a.clone(),
            (None, WireAddr::Tcp(a)) if a.ip().is_unspecified() => {
                WireAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], a.port())))
            }
            (None, b) => b,
        };
        let seed = random_u64();
        let id = match (&addr, gid_mode) {
            (WireAddr::Tcp(a), true) => gid_device_id(&gid_of(a)?),
            _ => seed,
        };
        let shared = Arc::new(Shared {
            id,
            addr,
            gid_mode,
            mrs: RwLock::new(HashMap::new()),
            next_key: AtomicU32::new(((seed >> 32) as u32 & 0x00ff_ffff) | 1),
            next_qpn: AtomicU32::new(((seed >> 8) as u32 & 0x7fff) | 0x100),
            next_pdn: AtomicU32::new(1),
            next_mw: AtomicU32::new(1),
            qps: Mutex::new(HashMap::new()),
            doorbell: EventFd::new()?,
            asleep: AtomicBool::new(false),
            rung: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            cma: cfg.cma && !gid_mode,
            pulled: AtomicU64::new(0),
        });
        {
            let mut live = lock(&LIVE_DEVICES);
            live.retain(|w| w.strong_count() > 0);
            live.push(Arc::downgrade(&shared));
        }
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rzmq-soft-{}", cfg.name))
            .spawn(move || progress_thread(s2, listener))?;
        Ok(Arc::new(SoftDevice {
            h: Arc::new(DevHandle {
                shared,
                thread: Mutex::new(Some(thread)),
            }),
            info: DeviceInfo {
                name: cfg.name,
                provider: ProviderKind::Soft,
            },
        }))
    }

    /// The address peers connect to.
    pub fn wire_addr(&self) -> WireAddr {
        self.h.shared.addr.clone()
    }

    /// Bytes this device's READs copied straight from the responder's process
    /// ([`SoftConfig::cma`]) rather than received over the wire.
    pub fn pulled_bytes(&self) -> u64 {
        self.h.shared.pulled.load(Ordering::Relaxed)
    }

    /// The device's GID: for a GID-addressed device its wire address
    /// ([`endpoint_from_gid`]), else zero.
    pub fn gid(&self) -> Gid {
        match &self.h.shared.addr {
            WireAddr::Tcp(a) if self.h.shared.gid_mode => gid_of(a).unwrap_or_default(),
            _ => Gid::default(),
        }
    }
}

/// The GID prefix of GID-addressed soft devices: `fe80::` then `RZ`, port, IPv4 address.
const GID_PREFIX: [u8; 10] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, b'R', b'Z'];

fn gid_of(a: &SocketAddr) -> Result<Gid> {
    let SocketAddr::V4(v4) = a else {
        return Err(Error::InvalidArgument(
            "GID addressing needs an IPv4 address",
        ));
    };
    let mut g = [0u8; 16];
    g[..10].copy_from_slice(&GID_PREFIX);
    g[10..12].copy_from_slice(&v4.port().to_be_bytes());
    g[12..16].copy_from_slice(&v4.ip().octets());
    Ok(Gid(g))
}

fn gid_device_id(g: &Gid) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&g.0[8..16]);
    u64::from_be_bytes(b)
}

/// The soft endpoint of remote QP `qpn` (first PSN `psn`) on the GID-addressed device `gid`:
/// what `ibv_modify_qp(RTR)`'s `dest_qp_num`, `rq_psn` and `ah_attr.grh.dgid` say.
pub fn endpoint_from_gid(gid: &Gid, qpn: u32, psn: u32) -> Result<Endpoint> {
    if gid.0[..10] != GID_PREFIX {
        return Err(Error::Descriptor(
            "not the GID of a GID-addressed soft device",
        ));
    }
    let port = u16::from_be_bytes([gid.0[10], gid.0[11]]);
    let ip = std::net::Ipv4Addr::new(gid.0[12], gid.0[13], gid.0[14], gid.0[15]);
    let addr = WireAddr::Tcp(SocketAddr::from((ip, port)));
    Ok(Endpoint {
        provider: ProviderKind::Soft,
        qpn: qpn & PSN_MASK,
        psn: psn & PSN_MASK,
        lid: 0,
        gid: *gid,
        mtu: Mtu::M4096,
        extra: encode_extra(gid_device_id(gid), 0, &addr, None),
    })
}

impl Device for SoftDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn port(&self) -> u8 {
        1
    }

    fn gid_index(&self) -> u32 {
        0
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(Error::NotFound(format!("port {port}")));
        }
        Ok(PortAttr {
            active: !self.h.shared.killed.load(Ordering::SeqCst),
            lid: 0,
            active_mtu: Mtu::M4096,
            link_layer: LinkLayer::Soft,
            gid_tbl_len: 1,
        })
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        if port != 1 || index != 0 {
            return Err(Error::NotFound(format!("gid {port}/{index}")));
        }
        Ok(self.gid())
    }

    fn alloc_pd(&self) -> Result<Arc<dyn Pd>> {
        Ok(Arc::new(SoftPd {
            h: self.h.clone(),
            pdn: self.h.shared.next_pdn.fetch_add(1, Ordering::Relaxed),
        }))
    }

    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn Cq>> {
        if cqe == 0 || cqe > (1 << 22) {
            return Err(Error::InvalidArgument("cqe out of range"));
        }
        Ok(Arc::new(SoftCq {
            _h: self.h.clone(),
            cq: Arc::new(CqShared {
                inner: Mutex::new(CqInner {
                    q: VecDeque::new(),
                    armed: None,
                    overrun: false,
                }),
                efd: EventFd::new()?,
                cap: cqe,
            }),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct SoftPd {
    h: Arc<DevHandle>,
    pdn: u32,
}

impl Pd for SoftPd {
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(Error::InvalidArgument("REMOTE_WRITE requires LOCAL_WRITE"));
        }
        if addr.is_null() && len > 0 {
            return Err(Error::InvalidArgument("null address"));
        }
        let s = &self.h.shared;
        let mut mrs = s.mrs.write().unwrap_or_else(|e| e.into_inner());
        let key = loop {
            let k = s.next_key.fetch_add(1, Ordering::Relaxed);
            if k != 0 && !mrs.contains_key(&k) {
                break k;
            }
        };
        mrs.insert(
            key,
            MrEntry {
                addr: addr as u64,
                len: len as u64,
                access,
                pdn: self.pdn,
            },
        );
        Ok(Arc::new(SoftMr {
            h: self.h.clone(),
            key,
            addr: addr as u64,
            len,
            access,
        }))
    }

    fn alloc_mw(&self) -> Result<Arc<dyn Mw>> {
        let idx = self.h.shared.next_mw.fetch_add(1, Ordering::Relaxed);
        if idx >= 1 << 23 {
            return Err(Error::InvalidArgument("memory windows exhausted"));
        }
        Ok(Arc::new(SoftMw {
            h: self.h.clone(),
            pdn: self.pdn,
            rkey: AtomicU32::new(MW_KEY_BIT | (idx << 8)),
        }))
    }

    fn create_qp(&self, init: &QpInit) -> Result<Arc<dyn Qp>> {
        let send_cq = init
            .send_cq
            .as_any()
            .downcast_ref::<SoftCq>()
            .ok_or(Error::InvalidArgument("send CQ from another provider"))?
            .cq
            .clone();
        let recv_cq = init
            .recv_cq
            .as_any()
            .downcast_ref::<SoftCq>()
            .ok_or(Error::InvalidArgument("recv CQ from another provider"))?
            .cq
            .clone();
        let c = init.caps;
        if c.max_send_wr == 0
            || c.max_send_wr > 16384
            || c.max_recv_wr > 16384
            || c.max_send_sge > 32
            || c.max_recv_sge > 32
            || c.max_inline_data > 1024
        {
            return Err(Error::InvalidArgument("QP capacities beyond device limits"));
        }
        let s = &self.h.shared;
        let qpn = s.next_qpn.fetch_add(1, Ordering::Relaxed) & 0xff_ffff;
        let qp = Arc::new(QpShared {
            qpn,
            pdn: self.pdn,
            caps: c,
            sig_all: init.sq_sig_all,
            send_cq,
            recv_cq,
            secret: if s.gid_mode { 0 } else { random_u64() },
            cma_slot: AtomicU64::new(0),
            inner: Mutex::new(QpInner::new()),
            waiters: AtomicU32::new(0),
            waiting: Mutex::new(0),
            handoff: std::sync::Condvar::new(),
        });
        lock(&s.qps).insert(qpn, qp.clone());
        Ok(Arc::new(SoftQp {
            h: self.h.clone(),
            qp,
            _cqs: (init.send_cq.clone(), init.recv_cq.clone()),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// rkeys of memory windows: top bit set (MR keys stay below it), then a 23-bit window index and
/// the 8-bit key byte that each binding increments.
const MW_KEY_BIT: u32 = 0x8000_0000;

struct SoftMw {
    h: Arc<DevHandle>,
    pdn: u32,
    rkey: AtomicU32,
}

impl Mw for SoftMw {
    fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for SoftMw {
    fn drop(&mut self) {
        // Deallocation invalidates the current binding (if any) at once.
        self.h
            .shared
            .mrs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.rkey());
    }
}

struct SoftMr {
    h: Arc<DevHandle>,
    key: u32,
    addr: u64,
    len: usize,
    access: Access,
}

impl Mr for SoftMr {
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

impl Drop for SoftMr {
    fn drop(&mut self) {
        // Taking the write lock waits for any transfer chunk in progress: after this returns the
        // NIC never touches the memory again (ibv_dereg_mr is synchronous too).
        self.h
            .shared
            .mrs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

// ---------------------------------------------------------------------------------------------
// Completion queues
// ---------------------------------------------------------------------------------------------

struct CqInner {
    q: VecDeque<WorkCompletion>,
    armed: Option<bool>,
    overrun: bool,
}

struct CqShared {
    inner: Mutex<CqInner>,
    efd: EventFd,
    cap: u32,
}

impl CqShared {
    fn push(&self, wc: WorkCompletion, solicited: bool) {
        let mut g = lock(&self.inner);
        if g.q.len() >= self.cap as usize {
            g.overrun = true;
            return;
        }
        g.q.push_back(wc);
        if let Some(sol_only) = g.armed {
            if !sol_only || solicited || !wc.status.is_ok() {
                g.armed = None;
                self.efd.signal();
            }
        }
    }
}

struct SoftCq {
    _h: Arc<DevHandle>,
    cq: Arc<CqShared>,
}

impl Cq for SoftCq {
    fn poll(&self, max: usize, out: &mut Vec<WorkCompletion>) -> Result<usize> {
        let mut g = lock(&self.cq.inner);
        if g.overrun {
            return Err(Error::CqOverrun);
        }
        let n = max.min(g.q.len());
        out.extend(g.q.drain(..n));
        Ok(n)
    }

    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        lock(&self.cq.inner).armed = Some(solicited_only);
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.cq.efd.fd()
    }

    fn get_events(&self) -> Result<u32> {
        Ok(self.cq.efd.drain().min(u64::from(u32::MAX)) as u32)
    }

    fn capacity(&self) -> u32 {
        self.cq.cap
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Queue pairs: the public handle
// ---------------------------------------------------------------------------------------------

/// A soft RC QP.
pub struct SoftQp {
    h: Arc<DevHandle>,
    qp: Arc<QpShared>,
    _cqs: (Arc<dyn Cq>, Arc<dyn Cq>),
}

impl Drop for SoftQp {
    fn drop(&mut self) {
        lock(&self.h.shared.qps).remove(&self.qp.qpn);
        let mut g = self.qp.lock();
        g.wire = None;
        g.state = QpState::Reset;
    }
}

/// Where a peer's process can be read directly ([`SoftConfig::cma`]): its pid and the address
/// of its QP's proof slot, where it stores the secret of the QP it was connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CmaInfo {
    pid: u32,
    slot_addr: u64,
}

const CMA_INFO_LEN: usize = 12;
/// READs that try the peer's proof before giving up on direct reads for the connection.
const CMA_PROOF_TRIES: u8 = 16;

/// The soft part of an endpoint: device id, QP secret, wire address, and, after a NUL, the
/// process's [`CmaInfo`] when it offers direct reads.
fn encode_extra(dev: u64, secret: u64, addr: &WireAddr, cma: Option<CmaInfo>) -> Vec<u8> {
    let mut v = dev.to_be_bytes().to_vec();
    v.extend_from_slice(&secret.to_be_bytes());
    v.extend_from_slice(addr.to_string().as_bytes());
    if let Some(c) = cma {
        v.push(0);
        v.extend_from_slice(&c.pid.to_be_bytes());
        v.extend_from_slice(&c.slot_addr.to_be_bytes());
    }
    v
}

fn decode_extra(b: &[u8]) -> Result<(u64, u64, WireAddr, Option<CmaInfo>)> {
    if b.len() < 17 {
        return Err(Error::Descriptor("soft connect info too short"));
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&b[..8]);
    let mut secret = [0u8; 8];
    secret.copy_from_slice(&b[8..16]);
    let rest = &b[16..];
    let (addr, cma) = match rest.iter().position(|&c| c == 0) {
        None => (rest, None),
        Some(i) => {
            let c = &rest[i + 1..];
            if c.len() != CMA_INFO_LEN {
                return Err(Error::Descriptor("soft connect info: bad direct-read part"));
            }
            let mut slot = [0u8; 8];
            slot.copy_from_slice(&c[4..12]);
            let info = CmaInfo {
                pid: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                slot_addr: u64::from_be_bytes(slot),
            };
            (&rest[..i], Some(info))
        }
    };
    let s = std::str::from_utf8(addr).map_err(|_| Error::Descriptor("soft address"))?;
    Ok((
        u64::from_be_bytes(id),
        u64::from_be_bytes(secret),
        WireAddr::parse(s)?,
        cma,
    ))
}

/// Whether `c` is our peer's process and we can read it: its proof slot holds `secret`, our
/// QP's random secret, which only the QP it was given to stores there. A peer naming another
/// process (or a process of the same number in another pid namespace) fails this, so direct
/// reads only ever copy from the process that validated the READ.
fn cma_proven(c: &CmaInfo, secret: u64) -> bool {
    let mut got: u64 = 0;
    secret != 0
        && matches!(
            sys_pull(c.pid, c.slot_addr, (&mut got as *mut u64).cast(), 8),
            Io::Progress(8)
        )
        && got == secret
}

/// Copies `len` bytes at `remote` in process `pid` to `dst` (one `process_vm_readv`).
fn sys_pull(pid: u32, remote: u64, dst: *mut u8, len: usize) -> Io {
    let local = libc::iovec {
        iov_base: dst.cast(),
        iov_len: len,
    };
    let from = libc::iovec {
        iov_base: remote as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the kernel writes at most `len` bytes to `dst`, which the caller hands out as
    // writable for `len` bytes; the remote side is only read, and a bad remote range fails with
    // EFAULT instead of touching anything here.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &from, 1, 0) };
    if n > 0 {
        Io::Progress(n as usize)
    } else {
        Io::Dead
    }
}

impl Qp for SoftQp {
    fn qpn(&self) -> u32 {
        self.qp.qpn
    }

    fn state(&self) -> QpState {
        self.qp.lock().state
    }

    fn caps(&self) -> QpCaps {
        self.qp.caps
    }

    fn endpoint(&self, psn: u32) -> Result<Endpoint> {
        Ok(Endpoint {
            provider: ProviderKind::Soft,
            qpn: self.qp.qpn,
            psn: psn & PSN_MASK,
            lid: 0,
            gid: Gid::default(),
            mtu: Mtu::M4096,
            extra: encode_extra(
                self.h.shared.id,
                self.qp.secret,
                &self.h.shared.addr,
                self.h.shared.cma.then(|| CmaInfo {
                    pid: std::process::id(),
                    slot_addr: self.qp.cma_slot.as_ptr() as u64,
                }),
            ),
        })
    }

    fn modify(&self, attr: &ModifyQp) -> Result<()> {
        let s = &self.h.shared;
        let connect_to = {
            let mut g = self.qp.lock();
            let from = g.state;
            let to = attr.target();
            let ok = matches!(
                (from, to),
                (QpState::Reset, QpState::Init)
                    | (QpState::Init, QpState::Init)
                    | (QpState::Init, QpState::Rtr)
                    | (QpState::Rtr, QpState::Rts)
                    | (_, QpState::Err)
                    | (_, QpState::Reset)
            );
            if !ok {
                return Err(Error::InvalidTransition { from, to });
            }
            match attr {
                ModifyQp::Init(a) => {
                    if a.port != 1 {
                        return Err(Error::InvalidArgument("soft devices have port 1 only"));
                    }
                    g.access = a.access;
                    g.state = QpState::Init;
                    None
                }
                ModifyQp::Rtr(a) => {
                    if a.max_dest_rd_atomic > MAX_RD_ATOMIC {
                        return Err(Error::InvalidArgument(
                            "max_dest_rd_atomic beyond the device limit",
                        ));
                    }
                    if a.remote.provider != ProviderKind::Soft {
                        return Err(Error::Descriptor("remote endpoint is not a soft QP"));
                    }
                    let (dev, secret, addr, cma) = decode_extra(&a.remote.extra)?;
                    // The proof our peer looks for before it reads our memory directly.
                    self.qp.cma_slot.store(secret, Ordering::SeqCst);
                    g.remote = Some(Remote {
                        dev,
                        qpn: a.remote.qpn,
                        cma: cma.filter(|_| s.cma),
                        pull: false,
                        proof_tries: 0,
                    });
                    g.epsn = a.remote.psn & PSN_MASK;
                    g.min_rnr_timer = a.min_rnr_timer.min(31);
                    g.max_dest_rd_atomic = a.max_dest_rd_atomic.max(1);
                    g.state = QpState::Rtr;
                    if (s.id, self.qp.qpn) < (dev, a.remote.qpn) {
                        Some((addr, dev, a.remote.qpn, secret))
                    } else {
                        None
                    }
                }
                ModifyQp::Rts(a) => {
                    if a.retry_cnt > 7 || a.rnr_retry > 7 || a.timeout > 31 {
                        return Err(Error::InvalidArgument("timeout/retry out of range"));
                    }
                    if a.max_rd_atomic > MAX_RD_ATOMIC {
                        return Err(Error::InvalidArgument(
                            "max_rd_atomic beyond the device limit",
                        ));
                    }
                    g.next_psn = a.sq_psn & PSN_MASK;
                    g.tx_psn = g.next_psn;
                    g.timeout = if a.timeout == 0 {
                        None
                    } else {
                        Some(Duration::from_nanos(4096u64 << a.timeout))
                    };
                    g.retry_cnt = a.retry_cnt;
                    g.retries_left = a.retry_cnt;
                    g.rnr_retry = a.rnr_retry;
                    g.rnr_left = a.rnr_retry;
                    g.max_rd_atomic = a.max_rd_atomic.max(1);
                    g.state = QpState::Rts;
                    None
                }
                ModifyQp::Err => {
                    g.enter_err(&self.qp);
                    None
                }
                ModifyQp::Reset => {
                    let caps_free = QpInner::new();
                    *g = caps_free;
                    None
                }
            }
        };
        if let Some((addr, dev, qpn, secret)) = connect_to {
            // Connect outside the QP lock: the progress thread keeps serving other QPs.
            let wire = match connect_wire(&addr, s.id, self.qp.qpn, dev, qpn, secret) {
                Ok(st) => Wire::new(st),
                Err(_) => Wire::dead(),
            };
            let mut g = self.qp.lock();
            if g.state >= QpState::Rtr && g.state != QpState::Err && g.wire.is_none() {
                g.wire = Some(wire);
            }
        }
        s.doorbell.signal();
        Ok(())
    }

    unsafe fn post_send(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        let caps = self.qp.caps;
        let mut g = self.qp.lock();
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |error| Err(PostError { index: i, error });
            if wr.sg_list.len() > caps.max_send_sge as usize {
                return fail(Error::TooManySge {
                    n: wr.sg_list.len(),
                    max: caps.max_send_sge,
                });
            }
            let len = wr.total_len();
            if len > (1usize << 31) {
                return fail(Error::InvalidArgument("message longer than 2 GiB"));
            }
            let inline = wr.flags.contains(SendFlags::INLINE);
            if inline {
                if matches!(wr.op, SendOp::RdmaRead(_)) {
                    return fail(Error::InvalidArgument("RDMA READ cannot be inline"));
                }
                if len > caps.max_inline_data as usize {
                    return fail(Error::InlineTooLarge {
                        len,
                        max: caps.max_inline_data,
                    });
                }
            }
            match g.state {
                QpState::Rts => {}
                QpState::Err => {
                    self.qp.send_cq.push(
                        wc(
                            wr.wr_id,
                            WcStatus::WrFlushErr,
                            wr.op.wc_opcode(),
                            0,
                            None,
                            self.qp.qpn,
                        ),
                        false,
                    );
                    continue;
                }
                state => {
                    return fail(Error::InvalidState {
                        op: "post_send",
                        state,
                    })
                }
            }
            if g.sq.len() + g.sq_retired_unsignaled as usize >= caps.max_send_wr as usize {
                return fail(Error::QueueFull {
                    queue: WorkQueue::Send,
                    depth: caps.max_send_wr,
                });
            }
            let inline_data = if inline {
                let mut v = Vec::with_capacity(len);
                for s in wr.sg_list {
                    if s.length > 0 {
                        // SAFETY: for INLINE WRs the caller guarantees (post_send's contract)
                        // that each SGE range is readable memory.
                        v.extend_from_slice(unsafe {
                            std::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
                        });
                    }
                }
                Some(v)
            } else {
                None
            };
            if g.sq.iter().all(|e| e.done) {
                // Nothing was outstanding: no ACK timeout was running. (A live wire restarts it
                // when the request is transmitted.)
                g.last_progress = Instant::now();
            }
            let psn = g.next_psn;
            g.next_psn = (psn + 1) & PSN_MASK;
            g.sq.push_back(SqEntry {
                wr_id: wr.wr_id,
                op: wr.op,
                sges: if inline {
                    Vec::new()
                } else {
                    wr.sg_list.to_vec()
                },
                inline: inline_data,
                len: len as u32,
                signaled: self.qp.sig_all || wr.flags.contains(SendFlags::SIGNALED),
                solicited: wr.flags.contains(SendFlags::SOLICITED),
                fence: wr.flags.contains(SendFlags::FENCE),
                psn,
                done: false,
            });
        }
        drop(g);
        self.h.shared.ring();
        Ok(())
    }

    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        let caps = self.qp.caps;
        let mut g = self.qp.lock();
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |error| Err(PostError { index: i, error });
            if wr.sg_list.len() > caps.max_recv_sge as usize {
                return fail(Error::TooManySge {
                    n: wr.sg_list.len(),
                    max: caps.max_recv_sge,
                });
            }
            match g.state {
                QpState::Reset => {
                    return fail(Error::InvalidState {
                        op: "post_recv",
                        state: QpState::Reset,
                    })
                }
                QpState::Err => {
                    self.qp.recv_cq.push(
                        wc(
                            wr.wr_id,
                            WcStatus::WrFlushErr,
                            WcOpcode::Recv,
                            0,
                            None,
                            self.qp.qpn,
                        ),
                        false,
                    );
                    continue;
                }
                _ => {}
            }
            if g.rq.len() >= caps.max_recv_wr as usize {
                return fail(Error::QueueFull {
                    queue: WorkQueue::Recv,
                    depth: caps.max_recv_wr,
                });
            }
            g.rq.push_back(RqEntry {
                wr_id: wr.wr_id,
                sges: wr.sg_list.to_vec(),
            });
        }
        Ok(())
    }

    fn bind_mw(
        &self,
        wr_id: u64,
        mw: &dyn Mw,
        mr: &dyn Mr,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32> {
        let mw = mw
            .as_any()
            .downcast_ref::<SoftMw>()
            .ok_or(Error::InvalidArgument(
                "memory window from another provider",
            ))?;
        let mr = mr
            .as_any()
            .downcast_ref::<SoftMr>()
            .ok_or(Error::InvalidArgument("MR from another provider"))?;
        let g = self.qp.lock();
        match g.state {
            QpState::Rts => {}
            QpState::Err => {
                // Posted in ERR: flushed, as every WR is.
                self.qp.send_cq.push(
                    wc(
                        wr_id,
                        WcStatus::WrFlushErr,
                        WcOpcode::BindMw,
                        0,
                        None,
                        self.qp.qpn,
                    ),
                    false,
                );
                return Ok(mw.rkey());
            }
            state => {
                return Err(Error::InvalidState {
                    op: "post_send(BIND_MW)",
                    state,
                })
            }
        }
        let in_range = addr >= mr.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= mr.addr + mr.len as u64);
        let rights_ok = !access.contains(Access::LOCAL_WRITE)
            && (!access.contains(Access::REMOTE_WRITE) || mr.access.contains(Access::LOCAL_WRITE));
        if !mr.access.contains(Access::MW_BIND)
            || mw.pdn != self.qp.pdn
            || !in_range
            || !rights_ok
            || !Arc::ptr_eq(&mw.h.shared, &self.h.shared)
        {
            // A real NIC completes the bind with MW_BIND_ERR and moves the QP to ERR.
            drop(g);
            self.qp.send_cq.push(
                wc(
                    wr_id,
                    WcStatus::MwBindErr,
                    WcOpcode::BindMw,
                    0,
                    None,
                    self.qp.qpn,
                ),
                false,
            );
            self.qp.lock().enter_err(&self.qp);
            return Ok(mw.rkey());
        }
        // Executed at post time, in order with everything posted later (documented).
        let new = inc_rkey(mw.rkey());
        let mut mrs = self.h.shared.mrs.write().unwrap_or_else(|e| e.into_inner());
        mrs.remove(&mw.rkey());
        mrs.insert(
            new,
            MrEntry {
                addr,
                len,
                access,
                pdn: mw.pdn,
            },
        );
        mw.rkey.store(new, Ordering::Release);
        Ok(new)
    }

    fn invalidate_mw(&self, wr_id: u64, rkey: u32) -> Result<()> {
        let g = self.qp.lock();
        match g.state {
            QpState::Rts => {}
            QpState::Err => {
                self.qp.send_cq.push(
                    wc(
                        wr_id,
                        WcStatus::WrFlushErr,
                        WcOpcode::LocalInv,
                        0,
                        None,
                        self.qp.qpn,
                    ),
                    false,
                );
                return Ok(());
            }
            state => {
                return Err(Error::InvalidState {
                    op: "post_send(LOCAL_INV)",
                    state,
                })
            }
        }
        drop(g);
        let mut mrs = self.h.shared.mrs.write().unwrap_or_else(|e| e.into_inner());
        match mrs.get(&rkey) {
            Some(e) if rkey & MW_KEY_BIT != 0 && e.pdn == self.qp.pdn => {
                mrs.remove(&rkey);
                Ok(())
            }
            _ => {
                drop(mrs);
                self.qp.send_cq.push(
                    wc(
                        wr_id,
                        WcStatus::LocProtErr,
                        WcOpcode::LocalInv,
                        0,
                        None,
                        self.qp.qpn,
                    ),
                    false,
                );
                self.qp.lock().enter_err(&self.qp);
                Ok(())
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn wc(
    wr_id: u64,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    imm_data: Option<u32>,
    qp_num: u32,
) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode,
        byte_len,
        imm_data,
        qp_num,
        vendor_err: 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------------

const PSN_MASK: u32 = 0xff_ffff;
/// The device's limit on RDMA READs outstanding per QP, as requester (`max_qp_rd_atom`) and as
/// responder (`max_qp_init_rd_atom`).
const MAX_RD_ATOMIC: u8 = 16;
const HDR_LEN: usize = 48;
const HDR_MAGIC: u16 = 0x5253;
const HELLO_LEN: usize = 40;
const HELLO_MAGIC: &[u8; 4] = b"RZSW";

const K_SEND: u8 = 1;
const K_WRITE: u8 = 2;
const K_READ_REQ: u8 = 3;
const K_READ_RESP: u8 = 4;
const K_ACK: u8 = 5;
const K_NAK: u8 = 6;

const F_IMM: u8 = 1;
const F_SOLICITED: u8 = 2;
/// READ_REQ: the requester can read the responder's memory itself. READ_RESP: no payload
/// follows; the requester copies it from the responder's process.
const F_PULL: u8 = 4;

const NAK_SEQ: u32 = 1;
const NAK_RNR: u32 = 2;
const NAK_REM_ACCESS: u32 = 3;
const NAK_INV_REQ: u32 = 4;
const NAK_REM_OP: u32 = 5;

/// Payloads up to this size are copied into the transmit buffer (one write for many packets);
/// larger ones are written straight from registered memory.
const TX_COPY_MAX: usize = 16 * 1024;
/// Stop building packets while this much is queued on a wire.
const TX_QUEUE_MAX: usize = 1 << 20;
/// Largest single write/read syscall on a wire.
const IO_CHUNK: usize = 1 << 20;
/// Bytes moved per QP per progress pass (fairness).
const PASS_BUDGET: usize = 16 << 20;
const RXBUF: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Hdr {
    kind: u8,
    flags: u8,
    psn: u32,
    len: u32,
    addr: u64,
    rkey: u32,
    imm: u32,
    aux: u32,
    aux2: u32,
}

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC: [u32; 256] = crc_table();

fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c = CRC[((c ^ u32::from(x)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

impl Hdr {
    fn encode(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0..2].copy_from_slice(&HDR_MAGIC.to_le_bytes());
        b[2] = self.kind;
        b[3] = self.flags;
        b[4..8].copy_from_slice(&self.psn.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..16].copy_from_slice(&(!self.len).to_le_bytes());
        b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        b[24..28].copy_from_slice(&self.rkey.to_le_bytes());
        b[28..32].copy_from_slice(&self.imm.to_le_bytes());
        b[32..36].copy_from_slice(&self.aux.to_le_bytes());
        b[36..40].copy_from_slice(&self.aux2.to_le_bytes());
        let c = crc32(&b[..44]);
        b[44..48].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// `Err(())` when framing is lost (magic or length check); `Ok((hdr, crc_ok))` otherwise.
    fn decode(b: &[u8; HDR_LEN]) -> std::result::Result<(Hdr, bool), ()> {
        let u32at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if u16::from_le_bytes([b[0], b[1]]) != HDR_MAGIC {
            return Err(());
        }
        let len = u32at(8);
        if u32at(12) != !len {
            return Err(());
        }
        let crc_ok = crc32(&b[..44]) == u32at(44);
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&b[16..24]);
        Ok((
            Hdr {
                kind: b[2],
                flags: b[3],
                psn: u32at(4),
                len,
                addr: u64::from_le_bytes(addr),
                rkey: u32at(24),
                imm: u32at(28),
                aux: u32at(32),
                aux2: u32at(36),
            },
            crc_ok,
        ))
    }
}

/// Signed distance a - b in 24-bit PSN space.
fn pdiff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The RNR NAK timer codes of the IB spec, in microseconds.
fn rnr_delay(code: u32) -> Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122_880, 163_840, 245_760,
        327_680, 491_520,
    ];
    Duration::from_micros(u64::from(US[(code & 31) as usize]))
}

// ---------------------------------------------------------------------------------------------
// Wire streams
// ---------------------------------------------------------------------------------------------

enum WireStream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl WireStream {
    fn fd(&self) -> RawFd {
        match self {
            WireStream::Tcp(s) => s.as_raw_fd(),
            WireStream::Unix(s) => s.as_raw_fd(),
        }
    }

    fn set_nonblocking(&self, nb: bool) -> io::Result<()> {
        match self {
            WireStream::Tcp(s) => s.set_nonblocking(nb),
            WireStream::Unix(s) => s.set_nonblocking(nb),
        }
    }

    fn shutdown(&self) {
        match self {
            WireStream::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            WireStream::Unix(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Read for WireStream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            WireStream::Tcp(s) => s.read(b),
            WireStream::Unix(s) => s.read(b),
        }
    }
}

impl Write for WireStream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            WireStream::Tcp(s) => s.write(b),
            WireStream::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn hello(
    src_dev: u64,
    src_qpn: u32,
    dst_dev: u64,
    dst_qpn: u32,
    dst_secret: u64,
) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[0..4].copy_from_slice(HELLO_MAGIC);
    b[4..12].copy_from_slice(&src_dev.to_be_bytes());
    b[12..16].copy_from_slice(&src_qpn.to_be_bytes());
    b[16..24].copy_from_slice(&dst_dev.to_be_bytes());
    b[24..28].copy_from_slice(&dst_qpn.to_be_bytes());
    b[28..36].copy_from_slice(&dst_secret.to_be_bytes());
    b
}

fn connect_wire(
    addr: &WireAddr,
    src_dev: u64,
    src_qpn: u32,
    dst_dev: u64,
    dst_qpn: u32,
    dst_secret: u64,
) -> io::Result<WireStream> {
    let mut s = match addr {
        WireAddr::Tcp(a) => {
            let s = TcpStream::connect_timeout(a, Duration::from_secs(2))?;
            let _ = s.set_nodelay(true);
            rzmq_core::transport::tune_same_host(&s);
            WireStream::Tcp(s)
        }
        WireAddr::Unix(p) => WireStream::Unix(UnixStream::connect(p)?),
    };
    s.write_all(&hello(src_dev, src_qpn, dst_dev, dst_qpn, dst_secret))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// What a transmit chunk reads from.
enum TxChunk {
    /// Encoded headers and copied payloads.
    Bytes(Vec<u8>),
    /// Registered memory, re-validated against the MR table at each write.
    Mem {
        addr: u64,
        len: usize,
        key: u32,
        pdn: u32,
    },
    /// No bytes: the response of a READ counted against `max_dest_rd_atomic` is on the wire,
    /// its responder resource is free again.
    ReadEnd,
}

impl TxChunk {
    fn len(&self) -> usize {
        match self {
            TxChunk::Bytes(v) => v.len(),
            TxChunk::Mem { len, .. } => *len,
            TxChunk::ReadEnd => 0,
        }
    }
}

/// A response-side packet waiting for the wire: ACK, NAK or READ response.
struct Ctrl {
    hdr: Hdr,
    payload: Option<TxChunk>,
    /// A READ response that holds a responder resource (not a duplicate's re-execution).
    fresh_read: bool,
}

enum RxDest {
    Discard,
    /// Scatter into registered memory: (addr, len, key) segments checked at each write.
    Mem {
        segs: Vec<(u64, usize, u32)>,
        idx: usize,
        off: usize,
        pdn: u32,
        need: Access,
        failed: bool,
    },
}

enum RxAction {
    None,
    Send { rq: RqEntry, hdr: Hdr },
    Write { rq: Option<RqEntry>, hdr: Hdr },
    ReadResp { psn: u32, pull_failed: bool },
}

enum RxState {
    Header,
    Payload {
        remaining: usize,
        dest: RxDest,
        action: RxAction,
    },
}

struct Wire {
    stream: Option<WireStream>,
    dead: bool,
    rx: RxState,
    rxbuf: Vec<u8>,
    rx_start: usize,
    rx_end: usize,
    /// The next receive into `rxbuf` reads one header only.
    rx_header_only: bool,
    tx: VecDeque<TxChunk>,
    tx_off: usize,
    tx_queued: usize,
    ctrl: VecDeque<Ctrl>,
    /// Fresh READ responses not yet fully written (responder resources in use).
    reads_serving: u32,
}

impl Wire {
    fn new(s: WireStream) -> Wire {
        Wire::new_opt(Some(s))
    }

    fn new_opt(stream: Option<WireStream>) -> Wire {
        Wire {
            stream,
            dead: false,
            rx: RxState::Header,
            rxbuf: vec![0; RXBUF],
            rx_start: 0,
            rx_end: 0,
            rx_header_only: false,
            tx: VecDeque::new(),
            tx_off: 0,
            tx_queued: 0,
            ctrl: VecDeque::new(),
            reads_serving: 0,
        }
    }

    fn dead() -> Wire {
        let mut w = Wire::new_opt(None);
        w.dead = true;
        w
    }

    fn cut(&mut self) {
        if let Some(s) = self.stream.take() {
            s.shutdown();
        }
        self.dead = true;
        self.tx.clear();
        self.ctrl.clear();
        self.tx_queued = 0;
        self.tx_off = 0;
        self.reads_serving = 0;
    }

    fn fd(&self) -> Option<RawFd> {
        if self.dead {
            None
        } else {
            self.stream.as_ref().map(|s| s.fd())
        }
    }

    fn push_bytes(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        self.tx_queued += b.len();
        if let Some(TxChunk::Bytes(v)) = self.tx.back_mut() {
            if v.len() < 256 * 1024 {
                v.extend_from_slice(b);
                return;
            }
        }
        self.tx.push_back(TxChunk::Bytes(b.to_vec()));
    }

    fn push_mem(&mut self, addr: u64, len: usize, key: u32, pdn: u32) {
        if len == 0 {
            return;
        }
        self.tx_queued += len;
        self.tx.push_back(TxChunk::Mem {
            addr,
            len,
            key,
            pdn,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Queue pair engine
// ---------------------------------------------------------------------------------------------

struct SqEntry {
    wr_id: u64,
    op: SendOp,
    sges: Vec<Sge>,
    inline: Option<Vec<u8>>,
    len: u32,
    signaled: bool,
    solicited: bool,
    /// `IBV_SEND_FENCE`: not transmitted before every earlier READ has completed.
    fence: bool,
    psn: u32,
    done: bool,
}

struct RqEntry {
    wr_id: u64,
    sges: Vec<Sge>,
}

#[derive(Clone, Copy)]
struct Remote {
    dev: u64,
    qpn: u32,
    /// Where the peer offers direct reads (both ends must, [`SoftConfig::cma`]).
    cma: Option<CmaInfo>,
    /// The offer is proven ([`cma_proven`]): READs ask for direct responses.
    pull: bool,
    /// Proofs tried so far (the peer stores its proof at its RTR, which may come after our
    /// first READ; we stop trying after a few).
    proof_tries: u8,
}

struct QpShared {
    qpn: u32,
    /// Random per QP, published only in its endpoint: a wire that attaches to this QP must
    /// present it, so only the peer that received the endpoint over the (authenticated) control
    /// channel can, not a third party that guessed the device and QP numbers.
    secret: u64,
    pdn: u32,
    caps: QpCaps,
    sig_all: bool,
    send_cq: Arc<CqShared>,
    recv_cq: Arc<CqShared>,
    /// The secret of the QP this one was connected to (set at RTR), read by that QP's process
    /// as proof before it reads our memory directly ([`cma_proven`]).
    cma_slot: AtomicU64,
    inner: Mutex<QpInner>,
    /// Threads waiting for `inner` (posting, polling state) while the progress thread holds it.
    waiters: AtomicU32,
    /// `waiters` under a lock, for the progress thread to sleep on until they are through.
    waiting: Mutex<u32>,
    handoff: std::sync::Condvar,
}

impl QpShared {
    /// The QP's state, for the consumer's calls (post, modify, query) and fault injection.
    fn lock(&self) -> MutexGuard<'_, QpInner> {
        match self.inner.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        {
            let mut w = lock(&self.waiting);
            *w += 1;
            self.waiters.store(*w, Ordering::SeqCst);
        }
        let g = lock(&self.inner);
        let mut w = lock(&self.waiting);
        *w -= 1;
        self.waiters.store(*w, Ordering::SeqCst);
        if *w == 0 {
            self.handoff.notify_all();
        }
        g
    }

    /// A consumer waits for the QP: the progress thread cuts its pass short and lets it in.
    /// (A NIC never makes a doorbell wait for its DMA; a mutex would otherwise hand the lock
    /// back to the busy progress thread again and again while a poster sleeps.)
    fn contended(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// The progress thread's lock: waiting consumers go first.
    fn lock_for_service(&self) -> MutexGuard<'_, QpInner> {
        if self.contended() {
            let mut w = lock(&self.waiting);
            while *w > 0 {
                // (The timeout only bounds the damage of a lost wake-up; none is expected.)
                w = self
                    .handoff
                    .wait_timeout(w, Duration::from_millis(10))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        lock(&self.inner)
    }
}

struct QpInner {
    state: QpState,
    access: Access,
    remote: Option<Remote>,
    min_rnr_timer: u8,
    // requester
    sq: VecDeque<SqEntry>,
    sq_retired_unsignaled: u32,
    next_psn: u32,
    tx_psn: u32,
    timeout: Option<Duration>,
    retry_cnt: u8,
    retries_left: u8,
    rnr_retry: u8,
    rnr_left: u8,
    rnr_until: Option<Instant>,
    /// Start of the current ACK-timeout interval: the transmission of the oldest
    /// unacknowledged request, or the last progress since (ACK, response or wire bytes).
    last_progress: Instant,
    /// RDMA READs this QP may have outstanding as requester (RTS `max_rd_atomic`).
    max_rd_atomic: u8,
    /// The next packet built goes to a request when one is ready (after a READ response).
    req_turn: bool,
    // responder
    rq: VecDeque<RqEntry>,
    epsn: u32,
    nak_sent: bool,
    ack_pending: bool,
    /// Incoming RDMA READs this QP serves at once as responder (RTR `max_dest_rd_atomic`).
    max_dest_rd_atomic: u8,
    // wire and faults
    wire: Option<Wire>,
    hold_until: Option<Instant>,
    corrupt_next: u32,
}

fn mr_ok(
    mrs: &HashMap<u32, MrEntry>,
    key: u32,
    pdn: u32,
    addr: u64,
    len: u64,
    need: Access,
) -> bool {
    match mrs.get(&key) {
        Some(e) => {
            e.pdn == pdn
                && e.access.contains(need)
                && addr >= e.addr
                && addr
                    .checked_add(len)
                    .is_some_and(|end| end <= e.addr + e.len)
        }
        None => false,
    }
}

fn sges_ok(mrs: &HashMap<u32, MrEntry>, sges: &[Sge], pdn: u32, need: Access) -> bool {
    sges.iter()
        .all(|s| s.length == 0 || mr_ok(mrs, s.lkey, pdn, s.addr, u64::from(s.length), need))
}

enum Io {
    Progress(usize),
    Blocked,
    Dead,
}

/// Most iovecs gathered into one `sendmsg` on a wire.
const IOV_MAX: usize = 64;
/// What replaces the bytes of a region deregistered in the middle of a transfer.
static ZEROS: [u8; RXBUF] = [0; RXBUF];

fn sys_sendmsg(fd: RawFd, iov: &[libc::iovec]) -> Io {
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: the caller guarantees every iovec is readable for the call (Vecs we own, a static,
    // or registered memory checked under the MR read lock that the caller holds).
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n > 0 {
        Io::Progress(n as usize)
    } else if n < 0 {
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Io::Blocked,
            _ => Io::Dead,
        }
    } else {
        Io::Blocked
    }
}

fn sys_recv(fd: RawFd, ptr: *mut u8, len: usize) -> Io {
    // SAFETY: the caller guarantees ptr..ptr+len is writable for the call (a Vec we own, or
    // registered memory checked under the MR read lock that the caller holds).
    let n = unsafe { libc::recv(fd, ptr as *mut libc::c_void, len, libc::MSG_DONTWAIT) };
    if n > 0 {
        Io::Progress(n as usize)
    } else if n == 0 {
        Io::Dead
    } else {
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Io::Blocked,
            _ => Io::Dead,
        }
    }
}

impl QpInner {
    fn new() -> QpInner {
        QpInner {
            state: QpState::Reset,
            access: Access::NONE,
            remote: None,
            min_rnr_timer: 12,
            sq: VecDeque::new(),
            sq_retired_unsignaled: 0,
            next_psn: 0,
            tx_psn: 0,
            timeout: None,
            retry_cnt: 7,
            retries_left: 7,
            rnr_retry: 7,
            rnr_left: 7,
            rnr_until: None,
            last_progress: Instant::now(),
            max_rd_atomic: MAX_RD_ATOMIC,
            req_turn: false,
            rq: VecDeque::new(),
            epsn: 0,
            nak_sent: false,
            ack_pending: false,
            max_dest_rd_atomic: MAX_RD_ATOMIC,
            wire: None,
            hold_until: None,
            corrupt_next: 0,
        }
    }

    /// Moves to ERR: every outstanding send and receive WR completes with WR_FLUSH_ERR, in order.
    fn enter_err(&mut self, qp: &QpShared) {
        self.state = QpState::Err;
        for e in self.sq.drain(..) {
            qp.send_cq.push(
                wc(
                    e.wr_id,
                    WcStatus::WrFlushErr,
                    e.op.wc_opcode(),
                    0,
                    None,
                    qp.qpn,
                ),
                false,
            );
        }
        self.sq_retired_unsignaled = 0;
        for r in self.rq.drain(..) {
            qp.recv_cq.push(
                wc(
                    r.wr_id,
                    WcStatus::WrFlushErr,
                    WcOpcode::Recv,
                    0,
                    None,
                    qp.qpn,
                ),
                false,
            );
        }
        self.rnr_until = None;
    }

    /// Completes finished send WRs from the head, in order.
    fn retire(&mut self, qp: &QpShared) {
        while self.sq.front().is_some_and(|e| e.done) {
            let e = self.sq.pop_front().expect("front checked");
            if e.signaled {
                qp.send_cq.push(
                    wc(
                        e.wr_id,
                        WcStatus::Success,
                        e.op.wc_opcode(),
                        e.len,
                        None,
                        qp.qpn,
                    ),
                    false,
                );
                self.sq_retired_unsignaled = 0;
            } else {
                self.sq_retired_unsignaled += 1;
            }
        }
        // A retransmission rewinds `tx_psn` to the oldest pending request; that request may
        // complete anyway (its original READ response or ACK was only late). Transmission then
        // resumes at the oldest request still pending: left behind the queue's head, `tx_psn`
        // would name no entry, and nothing posted later would ever go out.
        match self.sq.front() {
            Some(f) if pdiff(self.tx_psn, f.psn) < 0 => self.tx_psn = f.psn,
            None => self.tx_psn = self.next_psn,
            _ => {}
        }
    }

    /// The send WR with `psn` fails with `status`: earlier finished WRs complete, this one
    /// completes with the error, the QP goes to ERR and the rest is flushed.
    fn fail_send(&mut self, qp: &QpShared, psn: u32, status: WcStatus) {
        self.retire(qp);
        while let Some(e) = self.sq.front() {
            let d = pdiff(e.psn, psn);
            if d > 0 {
                break;
            }
            let e = self.sq.pop_front().expect("front checked");
            let st = if d == 0 { status } else { WcStatus::WrFlushErr };
            qp.send_cq
                .push(wc(e.wr_id, st, e.op.wc_opcode(), 0, None, qp.qpn), false);
        }
        self.enter_err(qp);
    }

    fn sq_index(&self, psn: u32) -> Option<usize> {
        let front = self.sq.front()?;
        let d = pdiff(psn, front.psn);
        if d < 0 || d as usize >= self.sq.len() {
            None
        } else {
            Some(d as usize)
        }
    }

    /// Marks non-READ WRs up to `psn` (inclusive when `incl`) acknowledged.
    fn ack_upto(&mut self, psn: u32, incl: bool, now: Instant) {
        let mut moved = false;
        for e in self.sq.iter_mut() {
            let d = pdiff(e.psn, psn);
            if d > 0 || (d == 0 && !incl) {
                break;
            }
            if !e.done && !matches!(e.op, SendOp::RdmaRead(_)) {
                e.done = true;
                moved = true;
            }
        }
        if moved {
            self.progressed(now);
        }
        let next = if incl { (psn + 1) & PSN_MASK } else { psn };
        if pdiff(next, self.tx_psn) > 0 && pdiff(self.next_psn, next) >= 0 {
            self.tx_psn = next;
        }
    }

    fn progressed(&mut self, now: Instant) {
        self.last_progress = now;
        self.retries_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    fn first_pending_psn(&self) -> Option<u32> {
        self.sq.iter().find(|e| !e.done).map(|e| e.psn)
    }

    /// The oldest request that is on the wire and not yet acknowledged: the one the ACK timer
    /// runs for. Requests still waiting in the send queue (behind other traffic, a READ limit
    /// or a fence) have no timer, as on hardware, whose local ACK timeout counts from
    /// transmission. Without a working wire (cut, peer dead, never attached) every request
    /// counts as sent into the void, as a NIC's packets are when the link is gone.
    fn timed_psn(&self) -> Option<u32> {
        let first = self.first_pending_psn()?;
        let linked = self.wire.as_ref().is_some_and(|w| !w.dead);
        (!linked || pdiff(self.tx_psn, first) > 0).then_some(first)
    }

    fn next_deadline(&self) -> Option<Instant> {
        let mut d: Option<Instant> = None;
        let mut add = |t: Instant| d = Some(d.map_or(t, |x| x.min(t)));
        if self.state == QpState::Rts && self.timed_psn().is_some() {
            if let Some(to) = self.timeout {
                add(self.last_progress + to);
            }
        }
        if let Some(t) = self.rnr_until {
            add(t);
        }
        if let Some(t) = self.hold_until {
            add(t);
        }
        d
    }

    fn on_timers(&mut self, qp: &QpShared, now: Instant) {
        if self.hold_until.is_some_and(|t| now >= t) {
            self.hold_until = None;
        }
        if self.rnr_until.is_some_and(|t| now >= t) {
            self.rnr_until = None;
            self.last_progress = now;
        }
        if self.state != QpState::Rts {
            return;
        }
        let (Some(to), Some(psn)) = (self.timeout, self.timed_psn()) else {
            return;
        };
        if self.rnr_until.is_some() || now < self.last_progress + to {
            return;
        }
        if self.retries_left == 0 {
            self.fail_send(qp, psn, WcStatus::RetryExcErr);
        } else {
            self.retries_left -= 1;
            self.last_progress = now;
            self.tx_psn = psn;
        }
    }

    /// One progress pass: timers, receive, transmit. Returns true when the budget ran out (call
    /// again without sleeping).
    fn service(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> bool {
        self.on_timers(qp, now);
        let mut busy = false;
        for _ in 0..4 {
            let rx = self.pump_rx(qp, sh, now);
            if self.ack_pending {
                self.ack_pending = false;
                let psn = self.epsn.wrapping_sub(1) & PSN_MASK;
                self.queue_ctrl(
                    Hdr {
                        kind: K_ACK,
                        psn,
                        ..Hdr::default()
                    },
                    None,
                );
            }
            let tx = self.pump_tx(qp, sh, now);
            busy = rx >= PASS_BUDGET || tx >= PASS_BUDGET || qp.contended();
            if rx == 0 && tx == 0 {
                break;
            }
            if busy {
                break;
            }
        }
        busy
    }

    fn queue_ctrl(&mut self, hdr: Hdr, payload: Option<TxChunk>) {
        if let Some(w) = self.wire.as_mut() {
            if !w.dead {
                w.ctrl.push_back(Ctrl {
                    hdr,
                    payload,
                    fresh_read: false,
                });
            }
        }
    }

    fn nak(&mut self, psn: u32, code: u32, aux2: u32) {
        self.queue_ctrl(
            Hdr {
                kind: K_NAK,
                psn,
                aux: code,
                aux2,
                ..Hdr::default()
            },
            None,
        );
    }

    // ----- transmit -----------------------------------------------------------------------

    /// Builds packets and writes them until the wire blocks, the pass budget is spent or nothing
    /// is left to send: the progress thread must never sleep while a packet could go out (it
    /// polls for writability only while bytes are queued).
    fn pump_tx(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> usize {
        let held = self.hold_until.is_some_and(|t| now < t);
        let mut moved = 0;
        loop {
            if self.wire.as_ref().is_none_or(|w| w.dead) {
                break;
            }
            let built = self.build_packets(qp, sh, now);
            if held {
                break;
            }
            let w = self.wire.as_mut().expect("checked");
            let (n, blocked) = write_tx(w, sh, PASS_BUDGET - moved);
            moved += n;
            if blocked || moved >= PASS_BUDGET || qp.contended() || (!built && w.tx.is_empty()) {
                break;
            }
        }
        if moved > 0 {
            self.last_progress = now;
        }
        moved
    }

    /// The send-queue index of the next request to transmit, when the send queue may transmit
    /// it now: RTS, no RNR wait, and within `max_rd_atomic` and fences for READs.
    fn next_request(&self) -> Option<usize> {
        if self.state != QpState::Rts || self.rnr_until.is_some() {
            return None;
        }
        if pdiff(self.tx_psn, self.next_psn) >= 0 {
            return None;
        }
        let i = self.sq_index(self.tx_psn)?;
        let e = &self.sq[i];
        let is_read = matches!(e.op, SendOp::RdmaRead(_));
        if is_read || e.fence {
            // READs before this one whose responses have not all arrived are outstanding.
            let reading = self
                .sq
                .iter()
                .take(i)
                .filter(|p| !p.done && matches!(p.op, SendOp::RdmaRead(_)))
                .count();
            if (e.fence && reading > 0) || (is_read && reading >= usize::from(self.max_rd_atomic)) {
                // Real send queues wait here (in order): the READ, and all behind it, goes out
                // when an earlier READ's response completes.
                return None;
            }
        }
        Some(i)
    }

    /// Moves packets into the wire's transmit queue (up to [`TX_QUEUE_MAX`] queued): ACKs and
    /// NAKs first, READ responses and requests alternately so that neither direction starves the
    /// other. Returns whether anything was added.
    fn build_packets(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> bool {
        let mut built = false;
        loop {
            let w = self.wire.as_mut().expect("checked by caller");
            if w.dead || w.tx_queued >= TX_QUEUE_MAX {
                break;
            }
            let ctrl_first = w
                .ctrl
                .front()
                .map(|c| c.payload.is_none() || !self.req_turn);
            let req = if ctrl_first == Some(true) {
                None
            } else {
                self.next_request()
            };
            let w = self.wire.as_mut().expect("checked by caller");
            if req.is_none() {
                let Some(c) = w.ctrl.pop_front() else {
                    break;
                };
                w.push_bytes(&c.hdr.encode());
                let big = c.payload.is_some();
                match c.payload {
                    Some(TxChunk::Mem {
                        addr,
                        len,
                        key,
                        pdn,
                    }) => w.push_mem(addr, len, key, pdn),
                    Some(TxChunk::Bytes(b)) => w.push_bytes(&b),
                    Some(TxChunk::ReadEnd) | None => {}
                }
                if c.fresh_read {
                    w.tx.push_back(TxChunk::ReadEnd);
                }
                if big {
                    self.req_turn = true;
                }
                built = true;
                continue;
            }
            let i = req.expect("checked");
            self.req_turn = false;
            if !self.build_request(qp, sh, i, now) {
                break;
            }
            built = true;
        }
        built
    }

    /// Encodes the request at sq index `i` onto the wire. False when it failed locally (the QP
    /// went to ERR).
    fn build_request(&mut self, qp: &QpShared, sh: &Shared, i: usize, now: Instant) -> bool {
        if self.first_pending_psn() == Some(self.sq[i].psn) {
            // The oldest unacknowledged request goes on the wire: its ACK timeout starts now,
            // not when it was posted (it may have waited behind other traffic).
            self.last_progress = now;
        }
        let corrupt = self.corrupt_next > 0;
        let e = &self.sq[i];
        let mut h = Hdr {
            psn: e.psn,
            flags: if e.solicited { F_SOLICITED } else { 0 },
            ..Hdr::default()
        };
        let mut payload = true;
        match e.op {
            SendOp::Send => {
                h.kind = K_SEND;
            }
            SendOp::SendWithImm(imm) => {
                h.kind = K_SEND;
                h.flags |= F_IMM;
                h.imm = imm;
            }
            SendOp::RdmaWrite(r) => {
                h.kind = K_WRITE;
                h.addr = r.addr;
                h.rkey = r.rkey;
            }
            SendOp::RdmaWriteWithImm(r, imm) => {
                h.kind = K_WRITE;
                h.flags |= F_IMM;
                h.addr = r.addr;
                h.rkey = r.rkey;
                h.imm = imm;
            }
            SendOp::RdmaRead(r) => {
                h.kind = K_READ_REQ;
                h.addr = r.addr;
                h.rkey = r.rkey;
                h.aux = e.len;
                if let Some(r) = self.remote.as_mut() {
                    if let (Some(c), false) = (r.cma, r.pull) {
                        if r.proof_tries < CMA_PROOF_TRIES {
                            r.proof_tries += 1;
                            r.pull = cma_proven(&c, qp.secret);
                        }
                    }
                    if r.pull {
                        h.flags |= F_PULL;
                    }
                }
                payload = false;
            }
        }
        h.len = if payload { e.len } else { 0 };
        // Local protection check (the NIC reads the WQE's SGEs).
        if e.inline.is_none() {
            let need = if payload {
                Access::NONE
            } else {
                Access::LOCAL_WRITE
            };
            let ok = sges_ok(&sh.mrs(), &e.sges, qp.pdn, need);
            if !ok {
                let psn = e.psn;
                self.fail_send(qp, psn, WcStatus::LocProtErr);
                return false;
            }
        }
        let mut hb = h.encode();
        if corrupt {
            hb[30] ^= 0x10;
            self.corrupt_next -= 1;
        }
        let e = &self.sq[i];
        let w = self.wire.as_mut().expect("wire checked by caller");
        w.push_bytes(&hb);
        if payload {
            if let Some(d) = &e.inline {
                w.push_bytes(d);
            } else if (e.len as usize) <= TX_COPY_MAX {
                let mrs = sh.mrs();
                let mut buf = Vec::with_capacity(e.len as usize);
                for s in &e.sges {
                    if s.length == 0 {
                        continue;
                    }
                    if mr_ok(
                        &mrs,
                        s.lkey,
                        qp.pdn,
                        s.addr,
                        u64::from(s.length),
                        Access::NONE,
                    ) {
                        // SAFETY: the range lies inside a registered MR (checked under the read
                        // lock we hold), which the registrant keeps valid until deregistration.
                        buf.extend_from_slice(unsafe {
                            std::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
                        });
                    } else {
                        buf.resize(buf.len() + s.length as usize, 0);
                    }
                }
                drop(mrs);
                w.push_bytes(&buf);
            } else {
                for s in &e.sges {
                    w.push_mem(s.addr, s.length as usize, s.lkey, qp.pdn);
                }
            }
        }
        self.tx_psn = (self.tx_psn + 1) & PSN_MASK;
        true
    }

    // ----- receive ------------------------------------------------------------------------

    fn pump_rx(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> usize {
        let mut moved = 0;
        loop {
            if moved >= PASS_BUDGET || qp.contended() {
                return moved;
            }
            let Some(w) = self.wire.as_mut() else {
                return moved;
            };
            let Some(fd) = w.fd() else {
                return moved;
            };
            match &mut w.rx {
                RxState::Header => {
                    if w.rx_end - w.rx_start < HDR_LEN {
                        if w.rx_start > 0 {
                            w.rxbuf.copy_within(w.rx_start..w.rx_end, 0);
                            w.rx_end -= w.rx_start;
                            w.rx_start = 0;
                        }
                        // After a large payload, large payloads likely follow (READ responses,
                        // big WRITEs): read just the header, so that the next payload goes
                        // straight to its destination instead of through this buffer.
                        let free = if w.rx_header_only {
                            HDR_LEN - w.rx_end
                        } else {
                            w.rxbuf.len() - w.rx_end
                        };
                        let ptr = w.rxbuf[w.rx_end..].as_mut_ptr();
                        match sys_recv(fd, ptr, free) {
                            Io::Progress(n) => {
                                w.rx_end += n;
                                w.rx_header_only = false;
                                moved += n;
                                self.last_progress = now;
                                continue;
                            }
                            Io::Blocked => return moved,
                            Io::Dead => {
                                w.cut();
                                return moved;
                            }
                        }
                    }
                    let mut hb = [0u8; HDR_LEN];
                    hb.copy_from_slice(&w.rxbuf[w.rx_start..w.rx_start + HDR_LEN]);
                    w.rx_start += HDR_LEN;
                    match Hdr::decode(&hb) {
                        Err(()) => {
                            // Framing lost: the link is unusable.
                            w.cut();
                            return moved;
                        }
                        Ok((h, false)) => {
                            w.rx = RxState::Payload {
                                remaining: h.len as usize,
                                dest: RxDest::Discard,
                                action: RxAction::None,
                            };
                        }
                        Ok((h, true)) => {
                            let (dest, action) = self.on_header(qp, sh, h, now);
                            let w = self.wire.as_mut().expect("still attached");
                            w.rx = RxState::Payload {
                                remaining: h.len as usize,
                                dest,
                                action,
                            };
                        }
                    }
                }
                RxState::Payload {
                    remaining, dest, ..
                } => {
                    if *remaining == 0 {
                        let st = std::mem::replace(&mut w.rx, RxState::Header);
                        if let RxState::Payload { dest, action, .. } = st {
                            let failed = matches!(dest, RxDest::Mem { failed: true, .. });
                            self.on_payload_done(qp, action, failed, now);
                        }
                        continue;
                    }
                    let buffered = w.rx_end - w.rx_start;
                    let discard = matches!(dest, RxDest::Discard);
                    if buffered > 0 {
                        let n = buffered.min(*remaining);
                        if !discard {
                            let src = w.rxbuf[w.rx_start..w.rx_start + n].as_ptr();
                            let mut done = 0usize;
                            deliver(dest, sh, n, |p, k| {
                                // SAFETY: `deliver` hands out p writable for k bytes (checked
                                // under the MR read lock); src + done .. + k stays inside the n
                                // buffered bytes because deliver never asks for more than n.
                                unsafe { std::ptr::copy_nonoverlapping(src.add(done), p, k) };
                                done += k;
                                Io::Progress(k)
                            });
                        }
                        w.rx_start += n;
                        *remaining -= n;
                        continue;
                    }
                    w.rx_start = 0;
                    w.rx_end = 0;
                    let r = if *remaining >= RXBUF && !discard {
                        // Large payload: read straight into its destination.
                        let n = (*remaining).min(IO_CHUNK);
                        match deliver(dest, sh, n, |p, k| sys_recv(fd, p, k)) {
                            Io::Progress(k) => {
                                *remaining -= k;
                                w.rx_header_only = *remaining == 0;
                                Io::Progress(k)
                            }
                            other => other,
                        }
                    } else {
                        let ptr = w.rxbuf.as_mut_ptr();
                        let r = sys_recv(fd, ptr, RXBUF);
                        if let Io::Progress(n) = r {
                            w.rx_end = n;
                        }
                        r
                    };
                    match r {
                        Io::Progress(k) => {
                            moved += k;
                            self.last_progress = now;
                        }
                        Io::Blocked => return moved,
                        Io::Dead => {
                            w.cut();
                            return moved;
                        }
                    }
                }
            }
        }
    }

    /// A packet header arrived: decide where its payload goes and what happens after it.
    fn on_header(
        &mut self,
        qp: &QpShared,
        sh: &Shared,
        h: Hdr,
        now: Instant,
    ) -> (RxDest, RxAction) {
        match h.kind {
            K_ACK => {
                if self.state == QpState::Rts {
                    self.ack_upto(h.psn, true, now);
                    self.retire(qp);
                }
                (RxDest::Discard, RxAction::None)
            }
            K_NAK => {
                if self.state == QpState::Rts {
                    self.on_nak(qp, h, now);
                }
                (RxDest::Discard, RxAction::None)
            }
            K_READ_RESP => {
                if self.state != QpState::Rts {
                    return (RxDest::Discard, RxAction::None);
                }
                let Some(i) = self.sq_index(h.psn) else {
                    return (RxDest::Discard, RxAction::None);
                };
                let e = &self.sq[i];
                let pulled = h.flags & F_PULL != 0;
                let len = if pulled { h.aux } else { h.len };
                let SendOp::RdmaRead(from) = e.op else {
                    return (RxDest::Discard, RxAction::None);
                };
                if e.done || len != e.len || (pulled && h.len != 0) {
                    return (RxDest::Discard, RxAction::None);
                }
                let mut dest = local_dest(&e.sges, qp.pdn);
                let mut pull_failed = false;
                if pulled {
                    // The responder validated the range; copy it from its process now, in
                    // order with everything else on the wire (this stands for the payload).
                    let pid = self
                        .remote
                        .as_ref()
                        .filter(|r| r.pull)
                        .and_then(|r| r.cma)
                        .map(|c| c.pid);
                    pull_failed = !pid
                        .is_some_and(|pid| pull_into(&mut dest, sh, pid, from.addr, len as usize));
                    if !pull_failed {
                        sh.pulled.fetch_add(u64::from(len), Ordering::Relaxed);
                    }
                }
                (
                    dest,
                    RxAction::ReadResp {
                        psn: h.psn,
                        pull_failed,
                    },
                )
            }
            K_SEND | K_WRITE | K_READ_REQ => self.on_request(qp, sh, h),
            _ => (RxDest::Discard, RxAction::None),
        }
    }

    fn on_nak(&mut self, qp: &QpShared, h: Hdr, now: Instant) {
        if self.sq_index(h.psn).is_none() {
            return;
        }
        // Everything before the NAKed PSN was executed.
        self.ack_upto(h.psn, false, now);
        match h.aux {
            NAK_SEQ => {
                if self.retries_left == 0 {
                    self.fail_send(qp, h.psn, WcStatus::RetryExcErr);
                    return;
                }
                self.retries_left -= 1;
                self.tx_psn = h.psn;
                self.last_progress = now;
            }
            NAK_RNR => {
                if self.rnr_retry != 7 {
                    if self.rnr_left == 0 {
                        self.fail_send(qp, h.psn, WcStatus::RnrRetryExcErr);
                        return;
                    }
                    self.rnr_left -= 1;
                }
                self.rnr_until = Some(now + rnr_delay(h.aux2));
                self.tx_psn = h.psn;
                self.last_progress = now;
            }
            NAK_REM_ACCESS => self.fail_send(qp, h.psn, WcStatus::RemAccessErr),
            NAK_INV_REQ => self.fail_send(qp, h.psn, WcStatus::RemInvReqErr),
            _ => self.fail_send(qp, h.psn, WcStatus::RemOpErr),
        }
        self.retire(qp);
    }

    /// Responder side of SEND, WRITE and READ requests.
    fn on_request(&mut self, qp: &QpShared, sh: &Shared, h: Hdr) -> (RxDest, RxAction) {
        let discard = (RxDest::Discard, RxAction::None);
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            return discard;
        }
        let d = pdiff(h.psn, self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.nak_sent = true;
                let e = self.epsn;
                self.nak(e, NAK_SEQ, 0);
            }
            return discard;
        }
        if d < 0 {
            // A duplicate (our ACK was late or lost): acknowledge, re-execute only READs.
            if h.kind == K_READ_REQ {
                self.serve_read(qp, sh, h, false);
            } else {
                self.ack_pending = true;
            }
            return discard;
        }
        self.nak_sent = false;
        let has_imm = h.flags & F_IMM != 0;
        match h.kind {
            K_SEND => {
                let Some(rq) = self.rq.pop_front() else {
                    self.rnr(h.psn);
                    return discard;
                };
                let mrs = sh.mrs();
                if !sges_ok(&mrs, &rq.sges, qp.pdn, Access::LOCAL_WRITE) {
                    drop(mrs);
                    self.responder_error(qp, rq, WcStatus::LocProtErr, h.psn, NAK_REM_OP);
                    return discard;
                }
                drop(mrs);
                let cap: u64 = rq.sges.iter().map(|s| u64::from(s.length)).sum();
                if u64::from(h.len) > cap {
                    self.responder_error(qp, rq, WcStatus::LocLenErr, h.psn, NAK_INV_REQ);
                    return discard;
                }
                (local_dest(&rq.sges, qp.pdn), RxAction::Send { rq, hdr: h })
            }
            K_WRITE => {
                if has_imm && self.rq.is_empty() {
                    self.rnr(h.psn);
                    return discard;
                }
                let ok = self.access.contains(Access::REMOTE_WRITE)
                    && (h.len == 0
                        || mr_ok(
                            &sh.mrs(),
                            h.rkey,
                            qp.pdn,
                            h.addr,
                            u64::from(h.len),
                            Access::REMOTE_WRITE,
                        ));
                if !ok {
                    self.nak(h.psn, NAK_REM_ACCESS, 0);
                    self.enter_err(qp);
                    return discard;
                }
                let rq = if has_imm { self.rq.pop_front() } else { None };
                let segs = if h.len > 0 {
                    vec![(h.addr, h.len as usize, h.rkey)]
                } else {
                    Vec::new()
                };
                (
                    RxDest::Mem {
                        segs,
                        idx: 0,
                        off: 0,
                        pdn: qp.pdn,
                        need: Access::REMOTE_WRITE,
                        failed: false,
                    },
                    RxAction::Write { rq, hdr: h },
                )
            }
            _ => {
                self.serve_read(qp, sh, h, true);
                discard
            }
        }
    }

    fn serve_read(&mut self, qp: &QpShared, sh: &Shared, h: Hdr, fresh: bool) {
        let len = h.aux;
        let ok = self.access.contains(Access::REMOTE_READ)
            && (len == 0
                || mr_ok(
                    &sh.mrs(),
                    h.rkey,
                    qp.pdn,
                    h.addr,
                    u64::from(len),
                    Access::REMOTE_READ,
                ));
        if !ok {
            if fresh {
                self.nak(h.psn, NAK_REM_ACCESS, 0);
                self.enter_err(qp);
            }
            return;
        }
        if fresh {
            let serving = self.wire.as_ref().map_or(0, |w| w.reads_serving);
            if serving >= u32::from(self.max_dest_rd_atomic) {
                // More READs outstanding than the responder resources negotiated at RTR: the
                // requester broke its max_rd_atomic (Invalid Request NAK, class A error).
                self.nak(h.psn, NAK_INV_REQ, 0);
                self.enter_err(qp);
                return;
            }
            self.epsn = (self.epsn + 1) & PSN_MASK;
        }
        let Some(w) = self.wire.as_mut().filter(|w| !w.dead) else {
            return;
        };
        if fresh {
            w.reads_serving += 1;
        }
        // Validated above: the requester may read the range itself. The response then carries
        // no payload, and the range must stay registered until the READ completes there, which
        // verbs require anyway (deregistering memory under a READ is undefined).
        // (The header's length counts the bytes that follow it on the wire: none; `aux` says
        // how many the requester copies.)
        let pull = h.flags & F_PULL != 0 && len > 0;
        w.ctrl.push_back(Ctrl {
            hdr: Hdr {
                kind: K_READ_RESP,
                flags: if pull { F_PULL } else { 0 },
                psn: h.psn,
                len: if pull { 0 } else { len },
                aux: if pull { len } else { 0 },
                ..Hdr::default()
            },
            payload: (!pull).then_some(TxChunk::Mem {
                addr: h.addr,
                len: len as usize,
                key: h.rkey,
                pdn: qp.pdn,
            }),
            fresh_read: fresh,
        });
    }

    fn rnr(&mut self, psn: u32) {
        self.nak_sent = true;
        let t = u32::from(self.min_rnr_timer);
        self.nak(psn, NAK_RNR, t);
    }

    fn responder_error(&mut self, qp: &QpShared, rq: RqEntry, st: WcStatus, psn: u32, code: u32) {
        qp.recv_cq
            .push(wc(rq.wr_id, st, WcOpcode::Recv, 0, None, qp.qpn), false);
        self.nak(psn, code, 0);
        self.enter_err(qp);
    }

    fn on_payload_done(&mut self, qp: &QpShared, action: RxAction, failed: bool, now: Instant) {
        match action {
            RxAction::None => {}
            RxAction::Send { rq, hdr } => {
                if failed {
                    self.responder_error(qp, rq, WcStatus::LocProtErr, hdr.psn, NAK_REM_OP);
                    return;
                }
                self.epsn = (self.epsn + 1) & PSN_MASK;
                self.ack_pending = true;
                let imm = (hdr.flags & F_IMM != 0).then_some(hdr.imm);
                qp.recv_cq.push(
                    wc(
                        rq.wr_id,
                        WcStatus::Success,
                        WcOpcode::Recv,
                        hdr.len,
                        imm,
                        qp.qpn,
                    ),
                    hdr.flags & F_SOLICITED != 0,
                );
            }
            RxAction::Write { rq, hdr } => {
                if failed {
                    if let Some(rq) = rq {
                        self.rq.push_front(rq);
                    }
                    self.nak(hdr.psn, NAK_REM_ACCESS, 0);
                    self.enter_err(qp);
                    return;
                }
                self.epsn = (self.epsn + 1) & PSN_MASK;
                self.ack_pending = true;
                if let Some(rq) = rq {
                    qp.recv_cq.push(
                        wc(
                            rq.wr_id,
                            WcStatus::Success,
                            WcOpcode::RecvRdmaWithImm,
                            hdr.len,
                            Some(hdr.imm),
                            qp.qpn,
                        ),
                        hdr.flags & F_SOLICITED != 0,
                    );
                }
            }
            RxAction::ReadResp { psn, pull_failed } => {
                if self.state != QpState::Rts {
                    return;
                }
                if pull_failed {
                    // The responder's memory could not be read (gone since it validated the
                    // READ): as a NIC whose DMA read faulted there.
                    self.fail_send(qp, psn, WcStatus::RemAccessErr);
                    return;
                }
                if failed {
                    self.fail_send(qp, psn, WcStatus::LocProtErr);
                    return;
                }
                self.ack_upto(psn, false, now);
                if let Some(i) = self.sq_index(psn) {
                    self.sq[i].done = true;
                    self.progressed(now);
                }
                self.retire(qp);
            }
        }
    }
}

/// Writes the wire's transmit queue until it is empty, the socket blocks or `budget` bytes
/// went out. Returns the bytes written and whether the socket blocked (or the wire died).
///
/// Each system call gathers consecutive chunks (headers, copied payloads and registered memory)
/// into one `sendmsg`, so that a header and its payload travel in one segment and small packets
/// share system calls. Registered memory is checked against the MR table under its read lock,
/// held across the call: a deregistration waits for it, and then the NIC never touches the
/// memory again.
fn write_tx(w: &mut Wire, sh: &Shared, budget: usize) -> (usize, bool) {
    let Some(fd) = w.fd() else {
        return (0, true);
    };
    let mut moved = 0;
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(IOV_MAX);
    loop {
        // A READ response whose last byte went out frees its responder resource before
        // anything else happens: its requester may already send the next READ.
        while let Some(TxChunk::ReadEnd) = w.tx.front() {
            w.reads_serving = w.reads_serving.saturating_sub(1);
            w.tx.pop_front();
        }
        if w.tx.is_empty() {
            break;
        }
        if moved >= budget {
            return (moved, false);
        }
        iov.clear();
        let mut want = 0usize;
        let mrs = sh.mrs();
        let mut off = w.tx_off;
        for c in w.tx.iter() {
            if iov.len() == IOV_MAX || want >= IO_CHUNK {
                break;
            }
            let room = IO_CHUNK - want;
            let (ptr, n) = match c {
                // Stop here: the resource is freed once the bytes before it are out (a marker
                // at the front was drained above).
                TxChunk::ReadEnd => break,
                TxChunk::Bytes(v) => {
                    let n = (v.len() - off).min(room);
                    (v[off..].as_ptr(), n)
                }
                TxChunk::Mem {
                    addr,
                    len,
                    key,
                    pdn,
                } => {
                    let n = (len - off).min(room);
                    let a = addr + off as u64;
                    if mr_ok(&mrs, *key, *pdn, a, n as u64, Access::NONE) {
                        (a as *const u8, n)
                    } else {
                        // The MR went away mid-transfer: keep the framing, never touch it.
                        (ZEROS.as_ptr(), n.min(ZEROS.len()))
                    }
                }
            };
            let partial = off + n < c.len();
            off = 0;
            iov.push(libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: n,
            });
            want += n;
            if partial {
                // The rest of this chunk comes first in the next call.
                break;
            }
        }
        let r = sys_sendmsg(fd, &iov);
        drop(mrs);
        match r {
            Io::Progress(n) => {
                moved += n;
                w.tx_queued -= n;
                let mut left = n;
                while left > 0 {
                    let front = w.tx.front().expect("bytes were queued");
                    let rest = front.len() - w.tx_off;
                    if left < rest {
                        w.tx_off += left;
                        break;
                    }
                    left -= rest;
                    w.tx.pop_front();
                    w.tx_off = 0;
                    while let Some(TxChunk::ReadEnd) = w.tx.front() {
                        w.reads_serving = w.reads_serving.saturating_sub(1);
                        w.tx.pop_front();
                    }
                }
                if n < want {
                    // The socket buffer is full.
                    return (moved, true);
                }
            }
            Io::Blocked => return (moved, true),
            Io::Dead => {
                w.cut();
                return (moved, true);
            }
        }
    }
    (moved, false)
}

/// Moves up to `n` bytes into `dest` through `io(ptr, len)`, segment by segment. A segment whose
/// MR fails the check (deregistered mid-transfer, bad key) marks the destination failed and the
/// rest goes to a sink: the NIC never touches memory that is not registered.
fn deliver(
    dest: &mut RxDest,
    sh: &Shared,
    n: usize,
    mut io: impl FnMut(*mut u8, usize) -> Io,
) -> Io {
    let RxDest::Mem {
        segs,
        idx,
        off,
        pdn,
        need,
        failed,
    } = dest
    else {
        let mut sink = vec![0u8; n.min(RXBUF)];
        let k = sink.len();
        return io(sink.as_mut_ptr(), k);
    };
    let mut total = 0;
    while total < n {
        let seg = match segs.get(*idx) {
            Some(&(addr, len, key)) if !*failed => {
                Some((addr + *off as u64, (len - *off).min(n - total), key, len))
            }
            _ => None,
        };
        let (r, want, seg_len) = match seg {
            Some((a, k, key, len)) => {
                let mrs = sh.mrs();
                if !mr_ok(&mrs, key, *pdn, a, k as u64, *need) {
                    *failed = true;
                    continue;
                }
                (io(a as *mut u8, k), k, Some(len))
            }
            None => {
                *failed = true;
                let mut sink = vec![0u8; (n - total).min(RXBUF)];
                let k = sink.len();
                (io(sink.as_mut_ptr(), k), k, None)
            }
        };
        match r {
            Io::Progress(got) => {
                total += got;
                if let Some(len) = seg_len {
                    *off += got;
                    if *off == len {
                        *idx += 1;
                        *off = 0;
                    }
                }
                if got < want {
                    break;
                }
            }
            other => {
                return if total > 0 {
                    Io::Progress(total)
                } else {
                    other
                }
            }
        }
    }
    Io::Progress(total)
}

/// Where a payload lands in local memory: the non-empty SGEs of a receive or a READ, written
/// under `LOCAL_WRITE`.
fn local_dest(sges: &[Sge], pdn: u32) -> RxDest {
    RxDest::Mem {
        segs: sges
            .iter()
            .filter(|s| s.length > 0)
            .map(|s| (s.addr, s.length as usize, s.lkey))
            .collect(),
        idx: 0,
        off: 0,
        pdn,
        need: Access::LOCAL_WRITE,
        failed: false,
    }
}

/// Copies `len` bytes at `remote` in process `pid` into `dest`'s segments (checked against the
/// MR table as received bytes are); false when the remote memory cannot be read.
fn pull_into(dest: &mut RxDest, sh: &Shared, pid: u32, remote: u64, len: usize) -> bool {
    let mut done = 0usize;
    while done < len {
        let mut at = remote + done as u64;
        let r = deliver(dest, sh, len - done, |p, k| {
            let r = sys_pull(pid, at, p, k);
            if let Io::Progress(got) = r {
                at += got as u64;
            }
            r
        });
        match r {
            Io::Progress(n) if n > 0 => done += n,
            _ => return false,
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Progress thread
// ---------------------------------------------------------------------------------------------

struct Pending {
    stream: WireStream,
    buf: [u8; HELLO_LEN],
    got: usize,
    since: Instant,
}

fn progress_thread(sh: Arc<Shared>, listener: Listener) {
    let mut pending: Vec<Pending> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        if sh.killed.load(Ordering::SeqCst) {
            // A crashed host: close every wire, never touch anything again.
            for qp in lock(&sh.qps).values() {
                if let Some(w) = qp.lock().wire.as_mut() {
                    w.cut();
                }
            }
            drop(listener);
            while !sh.shutdown.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            return;
        }
        if sh.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let qps: Vec<Arc<QpShared>> = lock(&sh.qps).values().cloned().collect();
        fds.clear();
        fds.push(libc::pollfd {
            fd: sh.doorbell.fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.push(libc::pollfd {
            fd: listener.fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        let mut deadline: Option<Instant> = None;
        let mut busy = false;
        for qp in &qps {
            let mut g = qp.lock_for_service();
            let now = Instant::now();
            busy |= g.service(qp, &sh, now);
            if let Some(t) = g.next_deadline() {
                deadline = Some(deadline.map_or(t, |d| d.min(t)));
            }
            let held = g.hold_until.is_some_and(|t| now < t);
            if let Some(w) = g.wire.as_ref() {
                if let Some(fd) = w.fd() {
                    let mut ev = libc::POLLIN;
                    if !w.tx.is_empty() && !held {
                        ev |= libc::POLLOUT;
                    }
                    fds.push(libc::pollfd {
                        fd,
                        events: ev,
                        revents: 0,
                    });
                }
            }
        }
        for p in &pending {
            fds.push(libc::pollfd {
                fd: p.stream.fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if !busy {
            sh.asleep.store(true, Ordering::SeqCst);
            busy = sh.rung.swap(false, Ordering::SeqCst);
        }
        let timeout_ms: i32 = if busy {
            0
        } else {
            let cap = if pending.is_empty() { 1000 } else { 50 };
            match deadline {
                Some(d) => {
                    let us = d.saturating_duration_since(now).as_micros();
                    (us.div_ceil(1000) as i32).min(cap)
                }
                None => cap,
            }
        };
        // SAFETY: fds is a valid array of pollfd of the given length.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms);
        }
        sh.asleep.store(false, Ordering::SeqCst);
        if fds[0].revents != 0 {
            sh.doorbell.drain();
        }
        if fds[1].revents != 0 {
            while let Ok(s) = listener.accept() {
                if s.set_nonblocking(true).is_ok() {
                    pending.push(Pending {
                        stream: s,
                        buf: [0; HELLO_LEN],
                        got: 0,
                        since: Instant::now(),
                    });
                }
            }
        }
        serve_pending(&sh, &mut pending);
    }
}

fn serve_pending(sh: &Shared, pending: &mut Vec<Pending>) {
    let now = Instant::now();
    let mut i = 0;
    while i < pending.len() {
        let p = &mut pending[i];
        let mut drop_it = now.duration_since(p.since) > Duration::from_secs(10);
        if p.got < HELLO_LEN {
            match p.stream.read(&mut p.buf[p.got..]) {
                Ok(0) => drop_it = true,
                Ok(n) => p.got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => drop_it = true,
            }
        }
        if !drop_it && p.got == HELLO_LEN {
            let b = &p.buf;
            let u64at = |o: usize| {
                let mut x = [0u8; 8];
                x.copy_from_slice(&b[o..o + 8]);
                u64::from_be_bytes(x)
            };
            let u32at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
            if &b[0..4] != HELLO_MAGIC || u64at(16) != sh.id {
                drop_it = true;
            } else {
                let (src_dev, src_qpn, dst_qpn) = (u64at(4), u32at(12), u32at(24));
                let qp = lock(&sh.qps).get(&dst_qpn).cloned();
                match qp {
                    None => {}
                    Some(qp) => {
                        let mut g = qp.lock();
                        // The wire must come from the configured peer QP and know this QP's
                        // secret (constant-time enough: one 64-bit compare per attempt, and a
                        // wrong guess closes the stream).
                        let matches = g
                            .remote
                            .is_some_and(|r| r.dev == src_dev && r.qpn == src_qpn)
                            && u64at(28) == qp.secret;
                        let ready = matches!(g.state, QpState::Rtr | QpState::Rts);
                        if matches && ready && g.wire.is_none() {
                            let p = pending.swap_remove(i);
                            g.wire = Some(Wire::new(p.stream));
                            sh.doorbell.signal();
                            continue;
                        }
                        if g.wire.is_some() || g.state == QpState::Err {
                            drop_it = true;
                        }
                    }
                }
            }
        }
        if drop_it {
            pending.swap_remove(i);
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cq() -> Arc<CqShared> {
        Arc::new(CqShared {
            inner: Mutex::new(CqInner {
                q: VecDeque::new(),
                armed: None,
                overrun: false,
            }),
            efd: EventFd::new().expect("eventfd"),
            cap: 64,
        })
    }

    fn qp() -> QpShared {
        QpShared {
            qpn: 7,
            secret: 0,
            pdn: 1,
            caps: QpCaps::default(),
            sig_all: true,
            send_cq: cq(),
            recv_cq: cq(),
            cma_slot: AtomicU64::new(0),
            inner: Mutex::new(QpInner::new()),
            waiters: AtomicU32::new(0),
            waiting: Mutex::new(0),
            handoff: std::sync::Condvar::new(),
        }
    }

    /// A requester in RTS with a live wire, a 17 ms ACK timeout and `psn` as its next PSN.
    fn rts(psn: u32) -> QpInner {
        let mut g = QpInner::new();
        g.state = QpState::Rts;
        g.timeout = Some(Duration::from_millis(17));
        g.wire = Some(Wire::new_opt(None));
        g.next_psn = psn;
        g.tx_psn = psn;
        g
    }

    const REMOTE: RemoteAddr = RemoteAddr {
        addr: 0x1000,
        rkey: 9,
    };

    /// Queues a request as `post_send` does (state checks aside).
    fn post(g: &mut QpInner, wr_id: u64, op: SendOp) {
        let psn = g.next_psn;
        g.next_psn = (psn + 1) & PSN_MASK;
        g.sq.push_back(SqEntry {
            wr_id,
            op,
            sges: Vec::new(),
            inline: None,
            len: 0,
            signaled: true,
            solicited: false,
            fence: false,
            psn,
            done: false,
        });
    }

    #[test]
    fn a_read_answered_after_its_retransmission_was_scheduled_leaves_the_queue_moving() {
        // The ACK timer fires for a READ whose response is already in the socket (the progress
        // thread was late): the timer rewinds transmission to that READ, then the same pass
        // receives the original response and completes it. The next request posted must still
        // go out: it used to wait forever behind a transmit position naming no entry.
        let qp = qp();
        let start = PSN_MASK; // the last PSN before the wrap
        let mut g = rts(start);
        g.retry_cnt = 1;
        g.retries_left = 1;
        post(&mut g, 1, SendOp::RdmaRead(REMOTE));
        assert_eq!(g.next_request(), Some(0));
        g.tx_psn = g.next_psn; // transmitted
        let now = Instant::now();
        g.last_progress = now - Duration::from_millis(20);
        g.on_timers(&qp, now);
        assert_eq!(g.tx_psn, start, "the timeout rewinds to the READ");
        g.on_payload_done(
            &qp,
            RxAction::ReadResp {
                psn: start,
                pull_failed: false,
            },
            false,
            now,
        );
        let wcs: Vec<WorkCompletion> = lock(&qp.send_cq.inner).q.drain(..).collect();
        assert_eq!(wcs.len(), 1);
        assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::Success));
        assert!(g.sq.is_empty());
        post(&mut g, 2, SendOp::RdmaWrite(REMOTE));
        assert_eq!(g.next_request(), Some(0), "the new WRITE goes out next");
        assert_eq!(g.timed_psn(), None, "not on the wire yet: no timer");
    }

    /// A device's shared state without its thread or listener.
    fn test_shared() -> Shared {
        Shared {
            id: 1,
            addr: WireAddr::parse("tcp:127.0.0.1:1").unwrap(),
            gid_mode: false,
            mrs: RwLock::new(HashMap::new()),
            next_key: AtomicU32::new(1),
            next_qpn: AtomicU32::new(1),
            next_pdn: AtomicU32::new(1),
            next_mw: AtomicU32::new(1),
            qps: Mutex::new(HashMap::new()),
            doorbell: EventFd::new().unwrap(),
            asleep: AtomicBool::new(false),
            rung: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            cma: false,
            pulled: AtomicU64::new(0),
        }
    }

    #[test]
    fn a_direct_read_copies_what_is_there_and_fails_on_unmapped_memory() {
        let sh = test_shared();
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 13 + 5) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let base = dst.as_mut_ptr() as u64;
        let key = 5;
        sh.mrs.write().unwrap().insert(
            key,
            MrEntry {
                addr: base,
                len: src.len() as u64,
                access: Access::LOCAL_WRITE,
                pdn: 1,
            },
        );
        let pid = std::process::id();
        // Two segments, split unevenly: each gets its part.
        let cut = 12_345usize;
        let dest = |failed| RxDest::Mem {
            segs: vec![(base, cut, key), (base + cut as u64, src.len() - cut, key)],
            idx: 0,
            off: 0,
            pdn: 1,
            need: Access::LOCAL_WRITE,
            failed,
        };
        let mut d = dest(false);
        assert!(pull_into(&mut d, &sh, pid, src.as_ptr() as u64, src.len()));
        assert!(!matches!(d, RxDest::Mem { failed: true, .. }));
        assert_eq!(dst, src);
        // Nothing mapped at the responder's address: the READ fails instead of completing.
        let mut d = dest(false);
        assert!(!pull_into(&mut d, &sh, pid, 8, 4096));
        // The requester's completion for it: a remote access error, and the QP goes to ERR.
        let qp = qp();
        let mut g = rts(100);
        post(&mut g, 1, SendOp::RdmaRead(REMOTE));
        g.tx_psn = 101;
        g.on_payload_done(
            &qp,
            RxAction::ReadResp {
                psn: 100,
                pull_failed: true,
            },
            false,
            Instant::now(),
        );
        let wcs: Vec<WorkCompletion> = lock(&qp.send_cq.inner).q.drain(..).collect();
        assert_eq!(wcs[0].wr_id, 1);
        assert_eq!(wcs[0].status, WcStatus::RemAccessErr);
        assert_eq!(g.state, QpState::Err);
    }

    #[test]
    fn connect_info_carries_the_direct_read_part_only_when_offered() {
        let addr = WireAddr::parse("tcp:127.0.0.1:4000").unwrap();
        let info = CmaInfo {
            pid: 4242,
            slot_addr: 0x7fff_0000_1000,
        };
        let (dev, secret, a, c) = decode_extra(&encode_extra(7, 9, &addr, Some(info))).unwrap();
        assert_eq!((dev, secret, a, c), (7, 9, addr.clone(), Some(info)));
        let (_, _, a, c) = decode_extra(&encode_extra(7, 9, &addr, None)).unwrap();
        assert_eq!((a, c), (addr.clone(), None));
        // A truncated direct-read part is refused, not half-read.
        let mut b = encode_extra(7, 9, &addr, Some(info));
        b.pop();
        assert!(decode_extra(&b).is_err());
        // The proof holds only where the named process stores our secret.
        let slot = AtomicU64::new(77);
        let here = CmaInfo {
            pid: std::process::id(),
            slot_addr: slot.as_ptr() as u64,
        };
        assert!(cma_proven(&here, 77));
        assert!(!cma_proven(&here, 78), "another QP's secret");
        assert!(!cma_proven(&here, 0), "no secret, no proof");
        assert!(
            !cma_proven(
                &CmaInfo {
                    slot_addr: 8,
                    ..here
                },
                77
            ),
            "unmapped"
        );
    }

    #[test]
    fn a_retransmission_resumes_at_the_oldest_request_still_pending() {
        // Two READs time out together; the first one's original response then arrives: the
        // retransmission goes on with the second, not with the one just completed.
        let qp = qp();
        let mut g = rts(100);
        post(&mut g, 1, SendOp::RdmaRead(REMOTE));
        post(&mut g, 2, SendOp::RdmaRead(REMOTE));
        g.tx_psn = 102;
        let now = Instant::now();
        g.last_progress = now - Duration::from_millis(20);
        g.on_timers(&qp, now);
        assert_eq!(g.tx_psn, 100);
        g.on_payload_done(
            &qp,
            RxAction::ReadResp {
                psn: 100,
                pull_failed: false,
            },
            false,
            now,
        );
        assert_eq!(g.sq.len(), 1);
        assert_eq!(g.tx_psn, 101);
        assert_eq!(g.next_request(), Some(0));
        assert_eq!(g.sq[0].wr_id, 2);
    }
}

//! The soft device and provider: the shared state of one open device (MR table, QPs, doorbell)
//! and its `Device` verbs.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use super::config::{SoftConfig, WireAddr};
use super::cq::{CqInner, CqShared, SoftCq};
use super::endpoint::{gid_device_id, gid_of};
use super::engine::QpShared;
use super::fault::register;
use super::link::Listener;
use super::mr::MrEntry;
use super::pd::SoftPd;
use super::progress::progress_thread;
use super::{lock, random_u64};
use crate::fd::EventFd;
use crate::provider::*;

/// The soft provider: one always-present device per open.
#[derive(Debug, Clone, Default)]
pub struct SoftProvider {
    pub(super) cfg: SoftConfig,
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

/// One open device's state, shared by its handles and its progress thread.
pub(super) struct Shared {
    pub(super) id: u64,
    pub(super) addr: WireAddr,
    /// GID addressing ([`SoftDevice::open_gid_addressed`]): the device id and wire address are
    /// the GID, QPs carry no secret.
    pub(super) gid_mode: bool,
    pub(super) mrs: RwLock<HashMap<u32, MrEntry>>,
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
    /// [`SoftConfig::cma`] (never with GID addressing, whose QPs carry no secret).
    pub(super) cma: bool,
    /// Bytes this device's READs copied straight from peer processes.
    pub(super) pulled: AtomicU64,
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

    pub(super) fn mrs(&self) -> std::sync::RwLockReadGuard<'_, HashMap<u32, MrEntry>> {
        self.mrs.read().unwrap_or_else(|e| e.into_inner())
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

/// An open soft device: a listener and a progress thread.
pub struct SoftDevice {
    pub(super) h: Arc<DevHandle>,
    pub(super) info: DeviceInfo,
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

    pub(super) fn open_with(cfg: SoftConfig, gid_mode: bool) -> Result<Arc<SoftDevice>> {
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
        register(&shared);
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
    /// ([`endpoint_from_gid`](super::endpoint_from_gid)), else zero.
    pub fn gid(&self) -> Gid {
        match &self.h.shared.addr {
            WireAddr::Tcp(a) if self.h.shared.gid_mode => gid_of(a).unwrap_or_default(),
            _ => Gid::default(),
        }
    }
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

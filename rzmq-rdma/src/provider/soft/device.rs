//! The soft device and provider: opening a device (its listener, state and progress thread),
//! its `Device` verbs, and the list of devices opened for fault tests.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::completion::{CqInner, CqShared};
use super::config::{SoftConfig, WireAddr};
use super::cq::SoftCq;
use super::endpoint::{gid_device_id, gid_of};
use super::keys::MrTable;
use super::link::Listener;
use super::nic::{DevHandle, Shared};
use super::os::{lock, random_u64};
use super::pd::SoftPd;
use super::progress::progress_thread;
use crate::fd::EventFd;
use crate::provider::*;

/// The soft provider: one always-present device per open.
#[derive(Debug, Clone, Default)]
pub(crate) struct SoftProvider {
    pub(super) cfg: SoftConfig,
}

impl SoftProvider {
    /// A provider whose devices use `cfg`.
    pub(crate) fn new(cfg: SoftConfig) -> SoftProvider {
        SoftProvider { cfg }
    }

    /// Opens a device with this provider's configuration, returning the concrete type.
    pub(crate) fn open_soft(&self) -> Result<Arc<SoftDevice>> {
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
            mrs: MrTable::default(),
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
            faults: cfg.faults,
        });
        if cfg.faults {
            register_for_faults(&shared);
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

/// The devices opened for fault tests ([`SoftConfig::faults`]), for the wire cutters
/// ([`cut_wires_at`](super::cut_wires_at)). Production devices never enter it: opening one
/// costs nothing here and leaves nothing behind.
static FAULT_TARGETS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Adds a device just opened to [`FAULT_TARGETS`] (forgetting those dropped since).
fn register_for_faults(shared: &Arc<Shared>) {
    let mut live = lock(&FAULT_TARGETS);
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(shared));
}

/// The devices opened for fault tests that are still open.
pub(super) fn fault_targets() -> Vec<Arc<Shared>> {
    lock(&FAULT_TARGETS)
        .iter()
        .filter_map(|w| w.upgrade())
        .collect()
}

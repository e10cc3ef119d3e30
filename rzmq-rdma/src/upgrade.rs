//! The upgrader rzmq-core's engine calls: decides whether a tcp connection moves to RDMA, and
//! builds its [`DataPath`] (rzmq-core's [`rzmq_core::alt`] protocol carries the blobs).
//!
//! Settings: [`RdmaOptions`] ([`install_with`]), whose defaults the environment gives
//! ([`install`]; docs/SETTINGS.md): the mode (`auto`: upgrade when both ends can, `off`,
//! `require`: a tcp connection that cannot upgrade is refused and reported; changeable later
//! with [`set_mode`]), the provider, per-connection log lines and transport monitor events
//! ([`rzmq_core::monitor::EVENT_TRANSPORT`]), the data path's tunables and the providers' own.
//!
//! The soft provider, unless `soft_listen` (`RZMQ_SOFT_LISTEN`) says otherwise, opens one device per local IP
//! address that tcp connections use, listening on that address: the wire then follows the
//! control connection's route, so two network namespaces joined by veth need no setting.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Once};

use rzmq_core::alt::{self, AltError, AltPath, AltStats, HalfPath, Mode, Upgrader};
use rzmq_core::msg::Msg;

use crate::datapath::{ConnectInfo, DataPath, DataPathConfig, DataPathError};
use crate::provider::soft::{SoftConfig, SoftProvider, WireAddr};
use crate::provider::{self, Device, Provider, ProviderKind};
use crate::settings::RdmaOptions;
use crate::wire;

/// The process's RDMA upgrader (see the module documentation).
pub(crate) struct RdmaUpgrader {
    mode: Mode,
    provider: Result<Box<dyn Provider>, String>,
    soft_per_address: bool,
    /// [`RdmaOptions::soft_faults`]: the per-address soft devices are opened for fault tests.
    soft_faults: bool,
    devices: Mutex<HashMap<Option<IpAddr>, Arc<dyn Device>>>,
    cfg: DataPathConfig,
    log: bool,
    events: bool,
}

impl RdmaUpgrader {
    /// From the environment ([`RdmaOptions::from_env`]). A bad `RZMQ_RDMA` value is an error; a
    /// provider that cannot be used is not (connections then stay on TCP, or are refused under
    /// `require`, with the reason).
    pub(crate) fn from_env() -> Result<RdmaUpgrader, AltError> {
        let o = RdmaOptions::from_env().map_err(|e| AltError(e.to_string()))?;
        Ok(RdmaUpgrader::from_options(&o))
    }

    /// From typed options; a provider that cannot be used is not an error (see
    /// [`RdmaUpgrader::from_env`]).
    pub(crate) fn from_options(o: &RdmaOptions) -> RdmaUpgrader {
        let provider = match provider::open::from_options(o) {
            Ok(Some(p)) => Ok(p),
            Ok(None) => Err(
                "no RDMA device (RZMQ_RDMA_PROVIDER=soft selects the software provider)"
                    .to_string(),
            ),
            Err(e) => Err(format!("RDMA provider unavailable: {e}")),
        };
        RdmaUpgrader {
            mode: o.mode,
            provider,
            soft_per_address: o.soft_listen.is_none(),
            soft_faults: o.soft_faults,
            devices: Mutex::new(HashMap::new()),
            cfg: DataPathConfig::from_options(o),
            log: o.log,
            events: o.events,
        }
    }

    fn kind(&self) -> Result<ProviderKind, AltError> {
        self.provider
            .as_ref()
            .map(|p| p.kind())
            .map_err(|e| AltError(e.clone()))
    }

    fn device_for(&self, local: Option<SocketAddr>) -> Result<Arc<dyn Device>, AltError> {
        let kind = self.kind()?;
        let key = if kind == ProviderKind::Soft && self.soft_per_address {
            local.map(|a| a.ip())
        } else {
            None
        };
        let mut devs = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = devs.get(&key) {
            return Ok(d.clone());
        }
        let dev = match key {
            Some(ip) => {
                let cfg = SoftConfig {
                    listen: WireAddr::Tcp(SocketAddr::new(ip, 0)),
                    faults: self.soft_faults,
                    ..SoftConfig::default()
                };
                SoftProvider::new(cfg).open(None)
            }
            None => match &self.provider {
                Ok(p) => p.open(None),
                Err(e) => return Err(AltError(e.clone())),
            },
        }
        .map_err(|e| AltError(format!("opening the RDMA device: {e}")))?;
        devs.insert(key, dev.clone());
        Ok(dev)
    }
}

impl Upgrader for RdmaUpgrader {
    fn mode(&self) -> Mode {
        mode_override().unwrap_or(self.mode)
    }

    fn advertise(&self) -> Result<Vec<u8>, AltError> {
        Ok(wire::property(self.kind()?.name()))
    }

    /// The peer's wire version must be ours ([`wire::WireError::Version`]'s text otherwise),
    /// then its provider.
    fn compatible(&self, peer_value: &[u8]) -> Result<(), AltError> {
        let ours = self.advertise()?;
        wire::check_property(peer_value).map_err(|e| AltError(e.to_string()))?;
        if peer_value == ours.as_slice() {
            Ok(())
        } else {
            Err(AltError(format!(
                "the peer offers \"{}\", we offer \"{}\"",
                String::from_utf8_lossy(&peer_value[..peer_value.len().min(64)]),
                String::from_utf8_lossy(&ours)
            )))
        }
    }

    fn start(&self, local: Option<SocketAddr>) -> Result<(Box<dyn HalfPath>, Vec<u8>), AltError> {
        let dev = self.device_for(local)?;
        let describe = format!("rdma/{} {}", dev.info().provider.name(), dev.info().name);
        let mut cfg = self.cfg.clone();
        if dev.info().provider == ProviderKind::Soft {
            // The soft NIC's ACKs come from a thread that a loaded machine may not schedule for
            // a while: ~270 ms per try (7 tries) instead of hardware's ~67 ms, so that a busy
            // CI machine is not mistaken for a cut wire.
            cfg.rts.timeout = cfg.rts.timeout.max(16);
        }
        let (dp, info) = DataPath::new(dev, cfg).map_err(err)?;
        Ok((Box::new(Half { dp, describe }), info.to_bytes()))
    }

    fn log_enabled(&self) -> bool {
        self.log
    }

    fn events_enabled(&self) -> bool {
        self.events
    }
}

fn err(e: DataPathError) -> AltError {
    AltError(e.to_string())
}

struct Half {
    dp: DataPath,
    describe: String,
}

impl HalfPath for Half {
    fn complete(self: Box<Self>, peer_blob: &[u8]) -> Result<Box<dyn AltPath>, AltError> {
        let Half { mut dp, describe } = *self;
        let info = ConnectInfo::from_bytes(peer_blob).map_err(err)?;
        dp.connect(&info).map_err(err)?;
        Ok(Box::new(RdmaPath { dp, describe }))
    }
}

/// A connected RDMA data path as rzmq-core's engine drives it.
struct RdmaPath {
    dp: DataPath,
    describe: String,
}

impl RdmaPath {
    fn err(&self, e: DataPathError) -> AltError {
        match (&e, self.dp.failure()) {
            (DataPathError::Failed, Some(why)) => AltError(why.to_string()),
            _ => err(e),
        }
    }
}

impl AltPath for RdmaPath {
    fn fd(&self) -> RawFd {
        self.dp.fd()
    }

    fn send(&mut self, msg: Msg) -> Result<Option<Msg>, AltError> {
        self.dp.send(msg).map_err(|e| self.err(e))
    }

    fn flush(&mut self) -> Result<(), AltError> {
        self.dp.flush().map_err(|e| self.err(e))
    }

    fn recv(&mut self) -> Result<Option<Msg>, AltError> {
        self.dp.recv().map_err(|e| self.err(e))
    }

    fn process(&mut self) -> Result<bool, AltError> {
        let before = self.dp.progress();
        self.dp.process().map_err(|e| self.err(e))?;
        Ok(self.dp.progress() != before)
    }

    fn arm(&mut self) -> Result<(), AltError> {
        self.dp.arm().map_err(|e| self.err(e))
    }

    fn is_idle(&self) -> bool {
        self.dp.is_idle()
    }

    fn stats(&self) -> AltStats {
        let s = self.dp.stats();
        AltStats {
            msgs_tx: s.msgs_tx,
            bytes_tx: s.bytes_tx,
            msgs_rx: s.msgs_rx,
            bytes_rx: s.bytes_rx,
            rndv_tx: s.rndv_tx,
            rndv_reads: s.rndv_reads,
            copies: s.copies,
            credit_stalls: s.ring.credit_stalls,
        }
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

static INSTALL: Once = Once::new();

/// Installs the RDMA upgrader for this process from the environment (idempotent). Call it
/// before creating sockets; the C ABI calls it when a context is created. A bad `RZMQ_RDMA`
/// value is reported on stderr and leaves RDMA off, rather than failing every socket.
pub fn install() {
    INSTALL.call_once(|| match RdmaUpgrader::from_env() {
        Ok(u) => {
            alt::install(Arc::new(u));
        }
        Err(e) => eprintln!("rzmq: {e}; RDMA disabled"),
    });
}

/// Installs the RDMA upgrader for this process with these options instead of the
/// environment's; returns false when one was installed already (the first install wins: the
/// upgrader is process-wide, see [`crate::settings`]). Call it before creating sockets.
pub fn install_with(o: &RdmaOptions) -> bool {
    let mut done = false;
    INSTALL.call_once(|| done = alt::install(Arc::new(RdmaUpgrader::from_options(o))));
    done
}

/// [`set_mode`]'s value: 0 none (the installed options' mode), else the mode's number + 1.
static MODE: AtomicU8 = AtomicU8::new(0);

/// A mode's number in the C ABI's `ZMQ_RDMA_MODE` (0 off, 1 auto, 2 require).
pub fn mode_number(m: Mode) -> i32 {
    match m {
        Mode::Off => 0,
        Mode::Auto => 1,
        Mode::Require => 2,
    }
}

/// The mode of `ZMQ_RDMA_MODE`'s number (0 off, 1 auto, 2 require).
pub fn mode_of_number(n: i32) -> Option<Mode> {
    [Mode::Off, Mode::Auto, Mode::Require]
        .get(usize::try_from(n).ok()?)
        .copied()
}

/// Changes the installed upgrader's mode for connections made from now on, in this process
/// (`zmq_ctx_set(ctx, ZMQ_RDMA_MODE, ..)`).
pub fn set_mode(m: Mode) {
    MODE.store(mode_number(m) as u8 + 1, Ordering::Relaxed);
}

fn mode_override() -> Option<Mode> {
    mode_of_number(i32::from(MODE.load(Ordering::Relaxed)) - 1)
}

/// The mode connections get now: [`set_mode`]'s, else the installed upgrader's; `Off` when
/// none is installed.
pub fn mode() -> Mode {
    alt::upgrader().map_or(Mode::Off, |u| u.mode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ProviderChoice;

    #[test]
    fn mode_numbers_round_trip() {
        for m in [Mode::Off, Mode::Auto, Mode::Require] {
            assert_eq!(mode_of_number(mode_number(m)), Some(m));
        }
        assert_eq!(mode_of_number(3), None);
        assert_eq!(mode_of_number(-1), None);
    }

    #[test]
    fn a_peer_of_another_wire_version_is_refused_with_the_reason() {
        let u = RdmaUpgrader::from_options(&RdmaOptions {
            provider: ProviderChoice::Soft,
            ..RdmaOptions::default()
        });
        assert_eq!(u.compatible(&wire::property("soft")), Ok(()));
        // In the handshake: the property names the version.
        let e = u.compatible(b"1 soft").unwrap_err();
        assert!(
            e.0.contains("version 1") && e.0.contains(&format!("speaks {}", wire::VERSION)),
            "{e}"
        );
        assert!(
            u.compatible(&wire::property("ibverbs")).is_err(),
            "another provider"
        );
        // Should a peer get that far: its blob names the version too.
        let (half, blob) = u.start(None).unwrap();
        let mut old = blob.clone();
        old[4] = 1;
        let e = half.complete(&old).err().expect("refused");
        assert!(e.0.contains("version 1"), "{e}");
    }

    #[test]
    fn an_upgrader_from_typed_options() {
        let u = RdmaUpgrader::from_options(&RdmaOptions {
            provider: ProviderChoice::Soft,
            log: true,
            ..RdmaOptions::default()
        });
        assert_eq!(
            u.advertise().unwrap(),
            format!("{} soft", wire::VERSION).as_bytes()
        );
        assert!(u.log_enabled() && !u.events_enabled());
        let broken = RdmaUpgrader::from_options(&RdmaOptions {
            provider_error: Some("RZMQ_SOFT_CMA=\"2\": expected on/off".into()),
            ..RdmaOptions::default()
        });
        let e = broken.advertise().unwrap_err();
        assert!(e.0.contains("RZMQ_SOFT_CMA"), "{e}");
    }
}

//! Settings of a soft device: its wire address and the environment it is read from.

use crate::provider::*;
pub use crate::settings::WireAddr;
use std::net::SocketAddr;

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
    /// Open the device for fault tests: only such devices accept [`inject`](super::inject) and
    /// [`kill`](super::kill) and are cut by [`cut_wires_at`](super::cut_wires_at) (off by
    /// default: a production device keeps no entry in the process-wide list that one walks).
    pub faults: bool,
}

impl Default for SoftConfig {
    fn default() -> Self {
        SoftConfig {
            name: "soft0".into(),
            listen: WireAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], 0))),
            advertise: None,
            cma: true,
            faults: false,
        }
    }
}

impl SoftConfig {
    /// The device settings typed RDMA options give (`soft_listen`, `soft_advertise`,
    /// `soft_cma`, `soft_faults`; the rest default).
    pub fn from_options(o: &crate::RdmaOptions) -> SoftConfig {
        let mut c = SoftConfig::default();
        if let Some(l) = &o.soft_listen {
            c.listen = l.clone();
        }
        c.advertise = o.soft_advertise.clone();
        c.cma = o.soft_cma;
        c.faults = o.soft_faults;
        c
    }

    /// From `RZMQ_SOFT_LISTEN` (`tcp:IP:PORT` or `unix:PATH`), `RZMQ_SOFT_ADVERTISE` and
    /// `RZMQ_SOFT_CMA` ([`crate::RdmaOptions::from_env`]; a bad value is an error).
    pub fn from_env() -> Result<SoftConfig> {
        match crate::RdmaOptions::from_env() {
            Ok(o) if o.provider_error.is_none() => Ok(SoftConfig::from_options(&o)),
            Ok(o) => Err(Error::NoDevice(o.provider_error.unwrap_or_default())),
            Err(e) => Err(Error::NoDevice(e.to_string())),
        }
    }
}

//! The provider factory: the provider the typed options name, built from the implementations
//! (soft, loopback, ibverbs). Above them, so that the trait module (`provider/mod.rs`) knows
//! none of its implementations.

#[cfg(feature = "ibverbs")]
use super::ibverbs;
use super::loopback;
use super::soft;
use super::{Error, Provider, Result};
use crate::settings::{ProviderChoice, RdmaOptions};

/// The provider the options name (`soft`, `ibverbs`, `loopback`, or `auto`: ibverbs when it
/// lists a device, else `None`, so that `auto` leaves connections on TCP).
pub(crate) fn from_options(o: &RdmaOptions) -> Result<Option<Box<dyn Provider>>> {
    if let Some(e) = &o.provider_error {
        return Err(Error::NoDevice(e.clone()));
    }
    match o.provider {
        ProviderChoice::Soft => Ok(Some(Box::new(soft::SoftProvider::new(
            soft::SoftConfig::from_options(o),
        )))),
        ProviderChoice::Loopback => Ok(Some(Box::new(loopback::LoopbackProvider))),
        #[cfg(feature = "ibverbs")]
        ProviderChoice::Ibverbs => Ok(Some(Box::new(ibverbs::IbvProvider::with_options(o)))),
        #[cfg(not(feature = "ibverbs"))]
        ProviderChoice::Ibverbs => Err(Error::Unsupported(
            "rzmq-rdma built without the ibverbs feature",
        )),
        ProviderChoice::Auto => {
            #[cfg(feature = "ibverbs")]
            {
                let p = ibverbs::IbvProvider::with_options(o);
                if p.devices().map(|d| !d.is_empty()).unwrap_or(false) {
                    return Ok(Some(Box::new(p)));
                }
            }
            Ok(None)
        }
    }
}

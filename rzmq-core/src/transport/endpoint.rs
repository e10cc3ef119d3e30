//! What bind and connect check of a tcp or ipc endpoint on the socket's thread, before an I/O
//! thread gets it: an `rdma://` endpoint needs RDMA here, a connect address must be well formed.

use crate::endpoint::Endpoint;
use crate::error::{Error, Result};

/// Whether `ep` is an `rdma://` endpoint; `EPROTONOSUPPORT` when this process cannot do RDMA.
pub(crate) fn rdma_endpoint(ep: &Endpoint) -> Result<bool> {
    match ep {
        Endpoint::Tcp(t) if t.is_rdma() => match crate::alt::require_available() {
            Ok(()) => Ok(true),
            Err(e) => {
                if crate::alt::upgrader().is_some_and(|u| u.log_enabled()) {
                    eprintln!("rzmq[{}]: rdma://{}: {e}", std::process::id(), t.address());
                }
                Err(Error::ProtoNoSupport)
            }
        },
        _ => Ok(false),
    }
}

/// Validates a connect address now (EINVAL for a malformed one); names are resolved at each
/// attempt.
pub(crate) fn check_connect(ep: &Endpoint) -> Result<()> {
    match ep {
        Endpoint::Tcp(t) => t.check_connect_syntax(),
        Endpoint::Ipc(i) => i.validate(),
        Endpoint::Inproc(_) | Endpoint::Udp(_) => Err(Error::Inval),
    }
}

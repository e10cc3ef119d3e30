//! The verbs surface rzmq uses, as a trait family, and the types that cross it.
//!
//! A provider opens [`Device`]s; a device allocates protection domains ([`Pd`]) and completion
//! queues ([`Cq`]); a PD registers memory ([`Mr`]) and creates RC queue pairs ([`Qp`]). The names,
//! numbers and rules are those of libibverbs (`ibv_*`), so [`ibverbs`] is a 1:1 mapping and
//! [`soft`] a userspace NIC that behaves like one:
//! - MR access flags `LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ` (values as `IBV_ACCESS_*`);
//! - a CQ has a completion fd (poll/epoll-able, readable after [`Cq::req_notify`] armed it and a
//!   new completion arrived; [`Cq::get_events`] consumes and acknowledges the events);
//! - an RC QP goes RESET -> INIT -> RTR -> RTS through [`Qp::modify`]; any state -> ERR or RESET;
//! - [`Qp::post_send`] takes SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM and RDMA_READ,
//!   signaled or not, inline or not; [`Qp::post_recv`] posts receives; [`Cq::poll`] returns work
//!   completions whose [`WcStatus`] and [`WcOpcode`] carry libibverbs' numbers.
//!
//! Immediate data is a host-order `u32` here; the ibverbs mapping converts to network order.
//!
//! Handles are reference counted (`Arc<dyn ...>`); each child keeps its parent alive, so the
//! destruction order verbs demand (QP before CQ, MR before PD, all before the device) holds by
//! construction. This module owns no I/O; it may not know about ZMTP, sockets or rings, nor
//! about the providers below it (choosing and building one from the options is `open`'s job).

mod endpoint;
mod error;
mod state;
mod verbs;
mod wr;

pub mod loopback;
pub(crate) mod open;
pub mod soft;

#[cfg(feature = "ibverbs")]
pub mod ibverbs;

pub use endpoint::{Endpoint, Gid, Mtu, ProviderKind};
pub use error::{Error, PostError, Result, WorkQueue};
pub use state::{InitAttr, ModifyQp, QpCaps, QpState, RtrAttr, RtsAttr};
pub use verbs::{
    inc_rkey, Cq, Device, DeviceInfo, LinkLayer, Mr, Mw, Pd, PortAttr, Provider, Qp, QpInit,
};
pub use wr::{
    Access, RecvWr, RemoteAddr, SendFlags, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};

/// The strategies other modules' tests draw endpoints from.
#[cfg(test)]
pub(crate) mod tests {
    pub(crate) use super::endpoint::tests::endpoint;
}

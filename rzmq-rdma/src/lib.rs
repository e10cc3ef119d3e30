//! rzmq-rdma: the RDMA transport for rzmq (providers, credit ring, rendezvous).
//!
//! Floors, bottom to top, each importing only those below it:
//! - [`provider`]: the verbs surface as a trait family; [`provider::soft`] (a userspace RC NIC
//!   for CI and laptops), `provider::ibverbs` (libibverbs via rdma-mummy-sys, feature
//!   `ibverbs`, on by default) and [`provider::loopback`] (QPs of one process, a wire that
//!   costs nothing: the engine's own cost, `examples/engine_cost.rs`);
//! - [`region`]: NIC-written memory; `mr_cache`: registration cache (crate-private);
//! - [`ring`]: the credit ring, sans-IO; `rndv`: rendezvous for large frames, sans-IO
//!   (crate-private; its error and the cache's counters are re-exported by [`datapath`]);
//! - [`datapath`]: drives ring and rendezvous over one QP;
//! - [`upgrade`]: the upgrader rzmq-core's engine calls after the ZMTP handshake to move a tcp
//!   connection's messages onto a [`datapath::DataPath`] ([`install`] puts it in place).
//!
//! Nothing here knows socket semantics; messages are rzmq-core [`rzmq_core::msg::Msg`] frames.

pub mod datapath;
mod fd;
pub(crate) mod mr_cache;
pub mod provider;
pub mod region;
pub mod ring;
pub(crate) mod rndv;
pub mod settings;
/// Not part of the API: entry points for fuzz targets and tests; may change without notice.
#[doc(hidden)]
pub mod testing;
pub mod upgrade;

pub use settings::RdmaOptions;
pub use upgrade::{install, install_with, set_mode};

//! rzmq-rdma: the RDMA transport for rzmq (providers, credit ring, rendezvous).
//!
//! Floors, bottom to top, each importing only those below it:
//! - [`provider`]: the verbs surface as a trait family; [`provider::soft`] (a userspace RC NIC
//!   for CI and laptops) and `provider::ibverbs` (libibverbs via rdma-mummy-sys, feature
//!   `ibverbs`, on by default);
//! - [`region`]: NIC-written memory; [`mr_cache`]: registration cache;
//! - [`ring`]: the credit ring, sans-IO; [`rndv`]: rendezvous for large frames, sans-IO;
//! - [`datapath`]: drives ring and rendezvous over one QP; the seam rzmq-core's engine uses to
//!   move a connection's data path onto RDMA after the ZMTP handshake.
//!
//! Nothing here knows socket semantics; messages are rzmq-core [`rzmq_core::msg::Msg`] frames.

pub mod datapath;
mod fd;
pub mod mr_cache;
pub mod provider;
pub mod region;
pub mod ring;
pub mod rndv;

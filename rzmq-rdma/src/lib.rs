//! rzmq-rdma: the RDMA transport for rzmq (providers, credit ring, rendezvous).
//!
//! Floors, bottom to top, each importing only those below it:
//! - [`wire`]: the one byte order, bounds-checked reader and writer, and version of every layout
//!   a peer reads (docs/RDMA.md draws them);
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
//!
//! # Example
//!
//! Install the upgrader before creating sockets (here with the soft provider, a userspace RC
//! NIC, so it runs anywhere); a tcp connection between two rzmq sockets then moves to RDMA
//! after the ZMTP handshake, and a monitor reports the transport it chose:
//!
//! ```
//! use rzmq_core::{monitor, Context, SocketType};
//! use rzmq_rdma::settings::ProviderChoice;
//! use rzmq_rdma::RdmaOptions;
//!
//! assert!(rzmq_rdma::install_with(&RdmaOptions {
//!     provider: ProviderChoice::Soft,
//!     events: true, // EVENT_TRANSPORT monitor events
//!     ..RdmaOptions::default()
//! }));
//! let ctx = Context::new();
//! let mut pull = ctx.socket(SocketType::Pull)?;
//! pull.bind("tcp://127.0.0.1:*")?;
//! let mut push = ctx.socket(SocketType::Push)?;
//! push.monitor(Some("inproc://push-events"), monitor::EVENT_TRANSPORT)?;
//! let mut events = ctx.socket(SocketType::Pair)?;
//! events.connect("inproc://push-events")?;
//! push.connect(pull.last_endpoint())?;
//!
//! let event = events.recv_multipart(0)?;
//! assert_eq!(
//!     monitor::parse_event(event[0].data()),
//!     Some((monitor::EVENT_TRANSPORT, monitor::TRANSPORT_RDMA))
//! );
//! let big = vec![7u8; 1 << 20]; // above the rendezvous threshold: read by the peer's NIC
//! push.send(big.as_slice(), 0)?;
//! push.send("small", 0)?; // through the credit ring
//! assert_eq!(pull.recv_bytes(0)?, big);
//! assert_eq!(pull.recv_bytes(0)?, b"small");
//! # Ok::<(), rzmq_core::Error>(())
//! ```
//!
//! Programs that cannot call it (LD_PRELOAD, pyzmq) set `RZMQ_RDMA` and `RZMQ_RDMA_PROVIDER`
//! instead; [`install`] reads them (docs/SETTINGS.md).

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
pub mod wire;

pub use settings::RdmaOptions;

/// README.md's examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use upgrade::{install, install_with, set_mode};

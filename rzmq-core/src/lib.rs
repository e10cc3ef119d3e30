//! rzmq-core: ZeroMQ sockets in Rust, byte-compatible with libzmq 4.3 on the wire.
//!
//! The API: a [`Context`] makes [`Socket`]s of a [`SocketType`], which bind and connect to
//! `tcp://`, `ipc://` and `inproc://` endpoints and send and receive [`Msg`]s; options are typed
//! ([`sockopt`]) or libzmq's numbers ([`options`]); [`poll`], [`proxy`] and [`monitor`] are
//! libzmq's. [`alt`] is the seam through which a provider crate (rzmq-rdma) moves a connection's
//! messages off its stream; [`env`](mod@env) reads the `RZMQ_*` variables that give options their
//! defaults. Everything else (pipes, the ZMTP codec, I/O threads, sessions) is internal:
//! docs/ARCHITECTURE.md draws it.
//!
//! ```
//! use rzmq_core::{Context, SocketType};
//! let ctx = Context::new();
//! let mut pull = ctx.socket(SocketType::Pull).unwrap();
//! pull.bind("inproc://doc").unwrap();
//! let mut push = ctx.socket(SocketType::Push).unwrap();
//! push.connect("inproc://doc").unwrap();
//! push.send("hello", 0).unwrap();
//! assert_eq!(pull.recv_bytes(0).unwrap(), b"hello");
//! ```
//!
//! Request and reply over tcp, with typed options and flags:
//!
//! ```
//! use std::time::Duration;
//! use rzmq_core::sockopt::{Linger, RcvTimeo};
//! use rzmq_core::{Context, RecvFlags, SendFlags, SocketType};
//!
//! let ctx = Context::new();
//! let mut rep = ctx.socket(SocketType::Rep)?;
//! rep.set(RcvTimeo(Some(Duration::from_secs(10))))?; // a lost message fails, never hangs
//! rep.bind("tcp://127.0.0.1:*")?; // an ephemeral port, read back below
//! let mut req = ctx.socket(SocketType::Req)?;
//! req.set(RcvTimeo(Some(Duration::from_secs(10))))?;
//! req.set(Linger(Some(Duration::ZERO)))?;
//! req.connect(rep.last_endpoint())?;
//! for i in 0..3 {
//!     let request = format!("request {i}");
//!     req.send(request.as_str(), SendFlags::NONE)?;
//!     let got = rep.recv_bytes(RecvFlags::NONE)?;
//!     assert_eq!(got, request.as_bytes());
//!     rep.send(got, SendFlags::NONE)?; // echo it
//!     assert_eq!(req.recv_bytes(RecvFlags::NONE)?, request.as_bytes());
//! }
//! # Ok::<(), rzmq_core::Error>(())
//! ```
//!
//! This crate is part of [rzmq](https://github.com/rzmq-rdma/rzmq) (rzmq-rdma moves its tcp
//! connections onto RDMA, rzmq-capi is the libzmq C ABI over it); the `rzmq` crate on
//! crates.io is an unrelated project.

// The public API: what programs and the sibling crates (the C ABI, the RDMA provider) use.
pub mod alt;
pub mod context;
pub mod env;
pub mod error;
pub mod monitor;
pub mod msg;
pub mod options;
pub mod poll;
pub mod proxy;
pub mod socket;
pub mod sockopt;
pub mod z85;

// The machinery, bottom to top (docs/ARCHITECTURE.md): not part of the API. Tests and benches
// reach what they need through the hidden `testing` module.
mod byteq;
mod command;
mod direct;
mod endpoint;
mod engine;
mod io;
#[cfg(all(test, loom))]
mod loom_tests;
mod pattern;
mod pipe;
mod pool;
mod session;
mod signal;
mod small;
mod socks;
mod spsc;
mod sync;
mod transport;
mod zap;
mod zmtp;

#[doc(hidden)]
pub mod testing;

/// README.md's examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use context::Context;
pub use error::{Error, Result};
pub use msg::Msg;
pub use socket::{Socket, SocketType, ThreadSafeSocket, DONTWAIT, SNDMORE};
pub use sockopt::{RecvFlags, SendFlags, SettableOption, SocketOption};
pub use transport::same_host::tune_same_host;

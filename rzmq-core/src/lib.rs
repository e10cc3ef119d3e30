//! rzmq-core: ZeroMQ sockets in Rust, byte-compatible with libzmq 4.3 on the wire.
//!
//! The floors, bottom to top: [`msg`] (frames and their ownership), [`pipe`] and [`signal`]
//! (queues and wake-ups), [`zmtp`] (the wire protocol, sans-IO), [`pattern`] (routing logic of
//! each socket type), [`engine`] and [`transport`] (connections on I/O threads), [`socket`] and
//! [`context`] (the public API), with [`poll`], [`proxy`] and [`monitor`] beside them.
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

pub mod alt;
pub mod byteq;
pub mod context;
pub mod curve_keys;
pub mod direct;
pub mod endpoint;

pub mod engine;
pub mod error;
pub mod monitor;
pub mod msg;
pub mod pattern;
pub mod pipe;

pub mod poll;
pub mod pool;

pub mod proxy;
pub mod signal;
pub mod small;

pub mod socket;
pub mod sockopt;
pub mod socks;
pub mod spsc;

pub mod transport;
pub(crate) mod zap;
pub mod zmtp;

pub use context::Context;
pub use error::{Error, Result};
pub use msg::Msg;

pub use socket::{Socket, SocketType, DONTWAIT, SNDMORE};
pub use sockopt::{RecvFlags, SendFlags, SettableOption, SocketOption};
pub mod options;

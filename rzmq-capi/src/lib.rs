//! rzmq-capi: the libzmq 4.3.5 C ABI (`libzmq.so.5`) over rzmq-core.
//!
//! Every function a default (non-DRAFT) libzmq 4.3.5 build exports is here (and, with the
//! `draft` feature, every function of a DRAFT build), with libzmq's
//! signatures, return values and `errno` values; `include/zmq.h` declares them for C callers.
//! One file per face of the API:
//!
//! - `errno`: `zmq_errno`, `zmq_strerror` and the helpers that turn `Result`s into `-1` + errno;
//! - `ctx`: contexts (`zmq_ctx_*`, `zmq_init`, `zmq_term`);
//! - `socket`: socket handles, bind/connect, send/recv (`zmq_send`, `zmq_recv`, iov variants);
//! - `sockopt`: `zmq_setsockopt`/`zmq_getsockopt` with libzmq's buffer rules;
//! - `msg`: `zmq_msg_t` (an rzmq [`Msg`](rzmq_core::Msg) kept in place plus a liveness tag);
//! - `poll`: `zmq_poll` over sockets and raw file descriptors;
//! - `proxy`: `zmq_proxy`, `zmq_proxy_steerable`, `zmq_device`;
//! - `monitor`: `zmq_socket_monitor`;
//! - `utils`: version, capabilities, Z85, CURVE key helpers, atomic counters, stopwatch,
//!   sleep and threads;
//! - `timers`: `zmq_timers_*`;
//! - with the `draft` feature only (libzmq's `--enable-drafts`): `poller` (`zmq_poller_*`) and
//!   `draft` (the other DRAFT functions: routing ids, groups, join/leave, peers, the versioned
//!   monitor, `zmq_ppoll`, `zmq_ctx_set_ext`/`get_ext`, `zmq_msg_init_buffer`).
//!
//! # Safety contract shared by every function
//!
//! Pointers are what libzmq's documentation says they are. NULL pointers, and handles that are
//! not (or no longer) live sockets, contexts, messages or timers, are detected by a tag check
//! and reported the way libzmq reports them (`ENOTSOCK`, `EFAULT`), never by a crash, as long as
//! the memory behind the pointer is readable. A socket is used by one thread at a time, as in
//! libzmq. Panics never cross the C boundary: they become `-1` with `errno = ENOTRECOVERABLE`.

#![allow(non_camel_case_types)]

mod ctx;
#[cfg(feature = "draft")]
mod draft;
mod errno;
mod handle;
mod monitor;
mod msg;
mod poll;
#[cfg(feature = "draft")]
mod poller;
mod proxy;
mod socket;
mod sockopt;
mod timers;
mod utils;

pub use ctx::*;
#[cfg(feature = "draft")]
pub use draft::*;
pub use errno::{zmq_errno, zmq_strerror};
pub use monitor::*;
pub use msg::*;
pub use poll::*;
#[cfg(feature = "draft")]
pub use poller::*;
pub use proxy::*;
pub use socket::*;
pub use sockopt::*;
pub use timers::*;
pub use utils::*;

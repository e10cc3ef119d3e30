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
//! # Building and using it
//!
//! `cargo build --release -p rzmq-capi` writes `target/release/libzmq.so` (soname
//! `libzmq.so.5`) and `libzmq.a`; the header is this crate's `include/zmq.h` (with
//! `zmq_utils.h`). C programs compile and link as against libzmq
//! (`cc app.c -I rzmq-capi/include -L target/release -lzmq`), and existing binaries, pyzmq's
//! wheel included, run on it with `LD_PRELOAD` or `LD_LIBRARY_PATH`. tcp connections between
//! rzmq peers move to RDMA as `RZMQ_RDMA` says (rzmq-rdma's upgrader is installed when the
//! first context is created).
//!
//! The crate is also an rlib named `zmq`: Rust can call the same functions.
//!
//! ```
//! use std::ffi::CString;
//! use std::os::raw::{c_int, c_void};
//!
//! const ZMQ_PUSH: c_int = 8; // zmq.h
//! const ZMQ_PULL: c_int = 7;
//! let mut major = 0;
//! // SAFETY (here and below): valid out pointers, live handles, buffers of the stated length.
//! unsafe { zmq::zmq_version(&mut major, &mut 0, &mut 0) };
//! assert_eq!(major, 4);
//! let addr = CString::new("tcp://127.0.0.1:*").unwrap();
//! unsafe {
//!     let ctx = zmq::zmq_ctx_new();
//!     let pull = zmq::zmq_socket(ctx, ZMQ_PULL);
//!     assert_eq!(zmq::zmq_bind(pull, addr.as_ptr()), 0);
//!     let mut endpoint = [0u8; 256];
//!     let mut len = endpoint.len();
//!     const ZMQ_LAST_ENDPOINT: c_int = 32;
//!     let got = endpoint.as_mut_ptr() as *mut c_void;
//!     assert_eq!(zmq::zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, got, &mut len), 0);
//!     let push = zmq::zmq_socket(ctx, ZMQ_PUSH);
//!     assert_eq!(zmq::zmq_connect(push, endpoint.as_ptr() as *const _), 0);
//!     assert_eq!(zmq::zmq_send(push, b"hello".as_ptr() as *const c_void, 5, 0), 5);
//!     let mut buf = [0u8; 16];
//!     let n = zmq::zmq_recv(pull, buf.as_mut_ptr() as *mut c_void, buf.len(), 0);
//!     assert_eq!(&buf[..n as usize], b"hello");
//!     zmq::zmq_close(push);
//!     zmq::zmq_close(pull);
//!     assert_eq!(zmq::zmq_ctx_term(ctx), 0);
//! }
//! ```
//!
//! This crate is part of [rzmq](https://github.com/rzmq-rdma/rzmq); the `rzmq` crate on
//! crates.io is an unrelated project.
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

/// README.md's examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

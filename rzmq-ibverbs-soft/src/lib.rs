//! `libibverbs.so.1` over the soft RC NIC: the libibverbs C ABI (the functions rdma-mummy-sys
//! loads by name, and the `ibv_context` ops table its inline verbs call) implemented on
//! `rzmq_rdma::provider::soft`, so that the unmodified ibverbs provider runs where there is no
//! RDMA hardware (CI, laptops). Tests place the built `libibverbs_soft.so` as `libibverbs.so.1`
//! in a directory named by `LD_LIBRARY_PATH`; it is never installed system-wide.
//!
//! Every verb is a translation onto the soft provider's traits: the checks, errors and
//! completions (rkeys, bounds, access, RNR, flushes, ordering, limits, memory windows) are the
//! soft NIC's. This layer adds only what the C ABI itself defines: attribute masks (a missing
//! required attribute is `EINVAL`, as on real NICs), the handle structures, completion channels
//! (an epoll fd over the CQs' event fds) and asynchronous QP events.
//!
//! The device is `rzmq_soft0`: one port, RoCE-like (link layer Ethernet, one RoCE v2 GID that
//! encodes the soft wire listener's IPv4 address and port, see
//! `soft::SoftDevice::open_gid_addressed`). The listener is `RZMQ_SOFT_LISTEN` (default
//! `tcp:127.0.0.1:0`). Features soft does not have (SRQs, UD/UC QPs, atomics, type-1 memory
//! windows, address handles, IOVA registrations, extended verbs) fail with `EOPNOTSUPP`, or are
//! absent so that callers see `EOPNOTSUPP` from rdma-mummy-sys, as on a device without them.
//!
//! # Example
//!
//! Programs load it as `libibverbs.so.1` (README.md); Rust can also call its functions directly
//! (the crate is an rlib named `ibverbs_soft` too):
//!
//! ```
//! use std::ffi::CStr;
//! use ibverbs_soft::*;
//!
//! // SAFETY: libibverbs' contract: handles come from these calls and are used before release.
//! unsafe {
//!     let mut n = 0;
//!     let list = ibv_get_device_list(&mut n);
//!     assert_eq!(n, 1);
//!     let name = CStr::from_ptr(ibv_get_device_name(*list));
//!     assert_eq!(name.to_str().unwrap(), "rzmq_soft0");
//!     let ctx = ibv_open_device(*list);
//!     assert!(!ctx.is_null());
//!     let pd = ibv_alloc_pd(ctx);
//!     assert!(!pd.is_null());
//!     assert_eq!(ibv_dealloc_pd(pd), 0);
//!     assert_eq!(ibv_close_device(ctx), 0);
//!     ibv_free_device_list(list);
//! }
//! ```
//!
//! # Safety
//! Every exported function has libibverbs' contract: handles are ones this library returned and
//! not yet destroyed, out pointers are valid, WR chains are NULL-terminated with `num_sge` valid
//! SGEs, and registered memory stays mapped until `ibv_dereg_mr`. (Hence the crate-wide
//! `missing_safety_doc` allowance: the contract is the C API's, stated once here.)
#![allow(clippy::missing_safety_doc)]

/// The `verbs.h` structures and constants, as the exported functions take and return them.
pub mod abi;

mod cq;
mod device;
mod handle;
mod pd;
mod qp;

pub use cq::*;
pub use device::*;
pub use pd::*;
pub use qp::*;

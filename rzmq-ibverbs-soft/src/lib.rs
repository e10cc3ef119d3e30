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

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use libc::{c_char, c_int, c_uint, c_void};
use rzmq_rdma::provider::soft::{self, SoftConfig, SoftDevice};
use rzmq_rdma::provider::{
    Access, Cq, Device, Error, Gid, InitAttr, ModifyQp, Mr, Mtu, Mw, Pd, Qp, QpCaps, QpInit,
    QpState, RecvWr, RemoteAddr, RtrAttr, RtsAttr, SendFlags, SendOp, SendWr, Sge, WcStatus,
};

use abi::*;

/// The device name `ibv_get_device_name` reports.
const DEVICE_NAME: &str = "rzmq_soft0";

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn copy_name(dst: &mut [c_char], s: &str) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
}

// ---------------------------------------------------------------------------------------------
// Handles: each C structure is the first field of a Rust box, so the pointer handed out is the
// box's.
// ---------------------------------------------------------------------------------------------

/// An open device: `ibv_context` plus the soft device and the QPs for asynchronous events.
#[repr(C)]
struct Context {
    ibv: ibv_context,
    dev: Arc<SoftDevice>,
    /// qpn -> QP handle, for asynchronous events.
    qps: Mutex<HashMap<u32, usize>>,
    /// Undelivered asynchronous events (type, QP handle).
    events: Mutex<VecDeque<(c_uint, usize)>>,
}

#[repr(C)]
struct PdBox {
    ibv: ibv_pd,
    pd: Arc<dyn Pd>,
    /// MRs, MWs and QPs using it (`ibv_dealloc_pd` is `EBUSY` while any exists).
    users: AtomicUsize,
}

#[repr(C)]
struct MrBox {
    ibv: ibv_mr,
    mr: Arc<dyn Mr>,
}

#[repr(C)]
struct MwBox {
    ibv: ibv_mw,
    mw: Arc<dyn Mw>,
}

#[repr(C)]
struct ChannelBox {
    ibv: ibv_comp_channel,
}

#[repr(C)]
struct CqBox {
    ibv: ibv_cq,
    cq: Arc<dyn Cq>,
    users: AtomicUsize,
}

#[repr(C)]
struct QpBox {
    ibv: ibv_qp,
    qp: Arc<dyn Qp>,
    sq_sig_all: bool,
    /// The attributes last set (for `ibv_query_qp`).
    attr: Mutex<ibv_qp_attr>,
    /// The consumer moved it to ERR (no asynchronous event for that).
    err_requested: AtomicBool,
    /// An asynchronous event was raised for its current ERR.
    err_reported: AtomicBool,
}

/// Reborrows a handle the caller got from this library.
///
/// # Safety
/// `p` must be a live handle of type `T` created here (the C caller's contract for every verb).
unsafe fn handle<'a, T>(p: *mut impl Sized) -> Option<&'a T> {
    // SAFETY: per the function's contract p is null or a live T.
    unsafe { (p as *const T).as_ref() }
}

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

struct StaticDevice(ibv_device);
// SAFETY: the device record is immutable after creation (names and null function pointers).
unsafe impl Sync for StaticDevice {}
// SAFETY: as above.
unsafe impl Send for StaticDevice {}

fn device() -> *mut ibv_device {
    static DEV: OnceLock<StaticDevice> = OnceLock::new();
    let d = DEV.get_or_init(|| {
        let mut d = ibv_device {
            _ops: _ibv_device_ops {
                _dummy1: None,
                _dummy2: None,
            },
            node_type: IBV_NODE_CA,
            transport_type: IBV_TRANSPORT_IB,
            name: [0; 64],
            dev_name: [0; 64],
            dev_path: [0; 256],
            ibdev_path: [0; 256],
        };
        copy_name(&mut d.name, DEVICE_NAME);
        copy_name(&mut d.dev_name, "uverbs0");
        copy_name(&mut d.dev_path, "/sys/class/infiniband_verbs/uverbs0");
        copy_name(
            &mut d.ibdev_path,
            &format!("/sys/class/infiniband/{DEVICE_NAME}"),
        );
        StaticDevice(d)
    });
    &d.0 as *const ibv_device as *mut ibv_device
}

/// `ibv_get_device_list`: one device, `rzmq_soft0`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    // SAFETY: calloc of two pointers; checked for NULL below.
    let list =
        unsafe { libc::calloc(2, std::mem::size_of::<*mut ibv_device>()) } as *mut *mut ibv_device;
    if list.is_null() {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    // SAFETY: list has room for two pointers (the second stays NULL, the terminator).
    unsafe { *list = device() };
    if !num_devices.is_null() {
        // SAFETY: the caller passes a valid out pointer or NULL.
        unsafe { *num_devices = 1 };
    }
    list
}

/// `ibv_free_device_list`.
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: list came from ibv_get_device_list's calloc (or is NULL).
    unsafe { libc::free(list as *mut c_void) };
}

/// `ibv_get_device_name`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    // SAFETY: dev is our static device or NULL.
    match unsafe { dev.as_ref() } {
        Some(d) => d.name.as_ptr(),
        None => ptr::null(),
    }
}

/// `ibv_get_device_guid` (network order).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(_dev: *mut ibv_device) -> u64 {
    0x525a_4d51_0000_0001u64.to_be()
}

/// `ibv_open_device`: opens a soft device (listener from `RZMQ_SOFT_LISTEN`).
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    if dev != device() {
        set_errno(libc::ENODEV);
        return ptr::null_mut();
    }
    let opened = SoftConfig::from_env().and_then(|mut cfg| {
        cfg.name = DEVICE_NAME.into();
        SoftDevice::open_gid_addressed(cfg)
    });
    let sd = match opened {
        Ok(d) => d,
        Err(e) => {
            set_errno(e.errno());
            return ptr::null_mut();
        }
    };
    // SAFETY: eventfd with valid flags; checked below.
    let async_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if async_fd < 0 {
        return ptr::null_mut();
    }
    let ctx = Box::new(Context {
        ibv: ibv_context {
            device: dev,
            ops: ops(),
            cmd_fd: -1,
            async_fd,
            num_comp_vectors: 1,
            mutex: pthread_mutex_t([0; 5]),
            // Not a verbs_context: rdma-mummy-sys' inline verbs take the compat paths.
            abi_compat: ptr::null_mut(),
        },
        dev: sd,
        qps: Mutex::new(HashMap::new()),
        events: Mutex::new(VecDeque::new()),
    });
    Box::into_raw(ctx) as *mut ibv_context
}

fn ops() -> ibv_context_ops {
    ibv_context_ops {
        _compat_query_device: None,
        _compat_query_port: None,
        _compat_alloc_pd: None,
        _compat_dealloc_pd: None,
        _compat_reg_mr: None,
        _compat_rereg_mr: None,
        _compat_dereg_mr: None,
        alloc_mw: Some(op_alloc_mw),
        bind_mw: Some(op_bind_mw),
        dealloc_mw: Some(op_dealloc_mw),
        _compat_create_cq: None,
        poll_cq: Some(op_poll_cq),
        req_notify_cq: Some(op_req_notify_cq),
        _compat_cq_event: None,
        _compat_resize_cq: None,
        _compat_destroy_cq: None,
        _compat_create_srq: None,
        _compat_modify_srq: None,
        _compat_query_srq: None,
        _compat_destroy_srq: None,
        post_srq_recv: Some(op_post_srq_recv),
        _compat_create_qp: None,
        _compat_query_qp: None,
        _compat_modify_qp: None,
        _compat_destroy_qp: None,
        post_send: Some(op_post_send),
        post_recv: Some(op_post_recv),
        _compat_create_ah: None,
        _compat_destroy_ah: None,
        _compat_attach_mcast: None,
        _compat_detach_mcast: None,
        _compat_async_event: None,
    }
}

/// `ibv_close_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    if ctx.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: ctx came from ibv_open_device and is closed once.
    let c = unsafe { Box::from_raw(ctx as *mut Context) };
    // SAFETY: the eventfd is owned by the context.
    unsafe { libc::close(c.ibv.async_fd) };
    0
}

/// `ibv_query_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    if ctx.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: ibv_device_attr is plain data; zero is valid.
    let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
    copy_name(&mut a.fw_ver, "rzmq-soft 1");
    a.node_guid = ibv_get_device_guid_value();
    a.sys_image_guid = a.node_guid;
    a.max_mr_size = u64::MAX;
    a.page_size_cap = 0x1000;
    a.vendor_id = 0x525a;
    a.max_qp = 1 << 20;
    a.max_qp_wr = 16384;
    a.device_cap_flags =
        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_RC_RNR_NAK_GEN;
    a.max_sge = 32;
    a.max_sge_rd = 32;
    a.max_cq = 1 << 20;
    a.max_cqe = 1 << 22;
    a.max_mr = 1 << 24;
    a.max_pd = 1 << 20;
    a.max_qp_rd_atom = 16;
    a.max_res_rd_atom = 1 << 20;
    a.max_qp_init_rd_atom = 16;
    a.max_mw = 1 << 23;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 16;
    a.phys_port_cnt = 1;
    // SAFETY: attr is a valid out pointer (caller's contract).
    unsafe { attr.write(a) };
    0
}

fn ibv_get_device_guid_value() -> u64 {
    0x525a_4d51_0000_0001u64.to_be()
}

/// # Safety
/// `ctx` must be a live context from [`ibv_open_device`] or NULL.
unsafe fn context<'a>(ctx: *mut ibv_context) -> Option<&'a Context> {
    // SAFETY: per the contract.
    unsafe { handle::<Context>(ctx) }
}

/// `ibv_query_port` (the symbol rdma-mummy-sys' compat path loads; fills `ibv_port_attr`).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: ctx is a context from ibv_open_device (caller's contract).
    let Some(c) = (unsafe { context(ctx) }) else {
        return libc::EINVAL;
    };
    if attr.is_null() {
        return libc::EINVAL;
    }
    let pa = match c.dev.query_port(port) {
        Ok(p) => p,
        Err(_) => return libc::EINVAL,
    };
    // SAFETY: plain data; zero is valid.
    let mut a: ibv_port_attr = unsafe { std::mem::zeroed() };
    a.state = if pa.active {
        IBV_PORT_ACTIVE
    } else {
        IBV_PORT_DOWN
    };
    a.max_mtu = Mtu::M4096 as c_uint;
    a.active_mtu = pa.active_mtu as c_uint;
    a.gid_tbl_len = pa.gid_tbl_len as c_int;
    a.max_msg_sz = 1 << 31;
    a.pkey_tbl_len = 1;
    a.lid = pa.lid;
    a.active_width = 1;
    a.active_speed = 1;
    a.phys_state = if pa.active { 5 } else { 3 };
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    // SAFETY: attr is a valid out pointer to a full ibv_port_attr (caller's contract).
    unsafe { attr.write(a) };
    0
}

/// `ibv_query_gid`: index 0 is the device's GID.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { context(ctx) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if gid.is_null() || index < 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    match c.dev.query_gid(port, index as u32) {
        Ok(g) => {
            // SAFETY: gid is a valid out pointer.
            unsafe { gid.write(ibv_gid { raw: g.0 }) };
            0
        }
        Err(_) => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

/// `ibv_query_gid_type`: the one GID is RoCE v2.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_uint,
) -> c_int {
    // SAFETY: caller's contract.
    if unsafe { context(ctx) }.is_none() || ty.is_null() || port != 1 || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: ty is a valid out pointer.
    unsafe { ty.write(IBV_GID_TYPE_SYSFS_ROCE_V2) };
    0
}

/// `ibv_query_pkey`: index 0 is the default P_Key.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    // SAFETY: caller's contract.
    if unsafe { context(ctx) }.is_none() || pkey.is_null() || port != 1 || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: pkey is a valid out pointer.
    unsafe { pkey.write(0xffffu16.to_be()) };
    0
}

/// `ibv_get_async_event`: QPs that went to ERR without the consumer asking
/// (`IBV_EVENT_QP_FATAL`). Blocks unless the async fd is non-blocking (then `EAGAIN`).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { context(ctx) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    loop {
        scan_async(c);
        if let Some((ty, qp)) = lock(&c.events).pop_front() {
            let mut b = 0u64;
            // SAFETY: reading 8 bytes from our eventfd into a u64 (consumes one count).
            unsafe { libc::read(c.ibv.async_fd, &mut b as *mut u64 as *mut c_void, 8) };
            // SAFETY: event is a valid out pointer.
            unsafe {
                event.write(ibv_async_event {
                    element: async_element {
                        qp: qp as *mut ibv_qp,
                    },
                    event_type: ty,
                })
            };
            return 0;
        }
        // SAFETY: fcntl on our eventfd.
        let fl = unsafe { libc::fcntl(c.ibv.async_fd, libc::F_GETFL) };
        if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
            set_errno(libc::EAGAIN);
            return -1;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Queues `IBV_EVENT_QP_FATAL` for each QP found in ERR that the consumer did not move there.
fn scan_async(c: &Context) {
    let qps: Vec<usize> = lock(&c.qps).values().copied().collect();
    for p in qps {
        // SAFETY: registered QPs are live until ibv_destroy_qp unregisters them; the consumer
        // does not destroy a QP while it reads async events for it (verbs rule).
        let q = unsafe { &*(p as *const QpBox) };
        let err = q.qp.state() == QpState::Err;
        if err
            && !q.err_requested.load(Ordering::Acquire)
            && !q.err_reported.swap(true, Ordering::AcqRel)
        {
            lock(&c.events).push_back((IBV_EVENT_QP_FATAL, p));
            let one = 1u64;
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe { libc::write(c.ibv.async_fd, &one as *const u64 as *const c_void, 8) };
        }
    }
}

/// `ibv_ack_async_event` (nothing to release).
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

/// `ibv_wc_status_str`: rdma-core's strings.
#[no_mangle]
pub unsafe extern "C" fn ibv_wc_status_str(status: c_uint) -> *const c_char {
    const S: [&CStr; 23] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
    ];
    S.get(status as usize)
        .copied()
        .unwrap_or(c"unknown")
        .as_ptr()
}

// ---------------------------------------------------------------------------------------------
// Protection domains, memory regions, memory windows
// ---------------------------------------------------------------------------------------------

/// `ibv_alloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { context(ctx) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    match c.dev.alloc_pd() {
        Ok(pd) => Box::into_raw(Box::new(PdBox {
            ibv: ibv_pd {
                context: ctx,
                handle: next_handle(),
            },
            pd,
            users: AtomicUsize::new(0),
        })) as *mut ibv_pd,
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

fn next_handle() -> u32 {
    static H: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    H.fetch_add(1, Ordering::Relaxed)
}

/// `ibv_dealloc_pd`: `EBUSY` while MRs, MWs or QPs use it.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { handle::<PdBox>(pd) }) else {
        return libc::EINVAL;
    };
    if p.users.load(Ordering::Acquire) != 0 {
        return libc::EBUSY;
    }
    // SAFETY: pd came from ibv_alloc_pd and is freed once.
    drop(unsafe { Box::from_raw(pd as *mut PdBox) });
    0
}

/// Access bits soft implements (`LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ`, `MW_BIND`), and
/// `IBV_ACCESS_RELAXED_ORDERING` (a hint, ignored). Atomics, zero-based and on-demand paging
/// are not supported.
const MR_ACCESS_OK: c_int = 1 | 2 | 4 | 16 | (1 << 20);

/// `ibv_reg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { handle::<PdBox>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if access & !MR_ACCESS_OK != 0 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let acc = Access((access & 0x1f) as u32);
    // SAFETY: the C caller keeps addr..addr+length valid until ibv_dereg_mr (ibv_reg_mr's
    // contract, the same as Pd::reg_mr's).
    match unsafe { p.pd.reg_mr(addr as *mut u8, length, acc) } {
        Ok(mr) => {
            p.users.fetch_add(1, Ordering::AcqRel);
            Box::into_raw(Box::new(MrBox {
                ibv: ibv_mr {
                    context: p.ibv.context,
                    pd,
                    addr,
                    length,
                    handle: next_handle(),
                    lkey: mr.lkey(),
                    rkey: mr.rkey(),
                },
                mr,
            })) as *mut ibv_mr
        }
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

/// `ibv_reg_mr_iova`: only `iova == addr` (soft has no IOVA translation), else `EOPNOTSUPP`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    if iova != addr as u64 {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    // SAFETY: forwarded under the same contract.
    unsafe { ibv_reg_mr(pd, addr, length, access) }
}

/// `ibv_reg_mr_iova2`: as [`ibv_reg_mr_iova`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: forwarded under the same contract.
    unsafe { ibv_reg_mr_iova(pd, addr, length, iova, access as c_int) }
}

/// `ibv_dereg_mr`: the lkey and rkey stop working at once (later WRs using them fail with
/// `LOC_PROT_ERR` / `REM_ACCESS_ERR`).
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if mr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: mr came from ibv_reg_mr and is deregistered once.
    let m = unsafe { Box::from_raw(mr as *mut MrBox) };
    // SAFETY: the MR's PD outlives it (ibv_dealloc_pd is EBUSY until then).
    if let Some(p) = unsafe { handle::<PdBox>(m.ibv.pd) } {
        p.users.fetch_sub(1, Ordering::AcqRel);
    }
    0
}

unsafe extern "C" fn op_alloc_mw(pd: *mut ibv_pd, ty: c_uint) -> *mut ibv_mw {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { handle::<PdBox>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if ty != IBV_MW_TYPE_2 {
        // Soft has type-2 windows only.
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    match p.pd.alloc_mw() {
        Ok(mw) => {
            p.users.fetch_add(1, Ordering::AcqRel);
            Box::into_raw(Box::new(MwBox {
                ibv: ibv_mw {
                    context: p.ibv.context,
                    pd,
                    rkey: mw.rkey(),
                    handle: next_handle(),
                    type_: ty,
                },
                mw,
            })) as *mut ibv_mw
        }
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

unsafe extern "C" fn op_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    if mw.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: mw came from alloc_mw and is freed once.
    let m = unsafe { Box::from_raw(mw as *mut MwBox) };
    // SAFETY: the PD outlives its windows.
    if let Some(p) = unsafe { handle::<PdBox>(m.ibv.pd) } {
        p.users.fetch_sub(1, Ordering::AcqRel);
    }
    0
}

unsafe extern "C" fn op_bind_mw(_qp: *mut ibv_qp, _mw: *mut ibv_mw, _b: *mut ibv_mw_bind) -> c_int {
    // ibv_bind_mw is for type-1 windows, which this device does not allocate.
    libc::EINVAL
}

// ---------------------------------------------------------------------------------------------
// Completion channels and CQs
// ---------------------------------------------------------------------------------------------

/// `ibv_create_comp_channel`: its fd is an epoll fd watching its CQs' event fds.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    if ctx.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: plain syscall.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return ptr::null_mut();
    }
    Box::into_raw(Box::new(ChannelBox {
        ibv: ibv_comp_channel {
            context: ctx,
            fd,
            refcnt: 0,
        },
    })) as *mut ibv_comp_channel
}

/// The channel's CQ count, updated atomically (CQs may be created from several threads).
fn refcnt<'a>(ch: *mut ibv_comp_channel) -> &'a AtomicI32 {
    // SAFETY: a live channel handle; the aligned c_int is accessed atomically only.
    unsafe { AtomicI32::from_ptr(ptr::addr_of_mut!((*ch).refcnt)) }
}

/// `ibv_destroy_comp_channel`: `EBUSY` while CQs use it.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    if ch.is_null() {
        return libc::EINVAL;
    }
    if refcnt(ch).load(Ordering::Acquire) > 0 {
        return libc::EBUSY;
    }
    // SAFETY: freed once; the epoll fd is ours.
    let c = unsafe { Box::from_raw(ch as *mut ChannelBox) };
    // SAFETY: closing our own fd.
    unsafe { libc::close(c.ibv.fd) };
    0
}

/// `ibv_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { context(ctx) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if cqe < 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let cq = match c.dev.create_cq(cqe as u32) {
        Ok(cq) => cq,
        Err(e) => {
            set_errno(e.errno());
            return ptr::null_mut();
        }
    };
    let b = Box::into_raw(Box::new(CqBox {
        ibv: ibv_cq {
            context: ctx,
            channel,
            cq_context,
            handle: next_handle(),
            cqe: cq.capacity() as c_int,
            mutex: pthread_mutex_t([0; 5]),
            cond: pthread_cond_t([0; 6]),
            comp_events_completed: 0,
            async_events_completed: 0,
        },
        cq,
        users: AtomicUsize::new(0),
    }));
    if !channel.is_null() {
        // SAFETY: b was just created; channel is a live channel (caller's contract).
        let (fd, ch) = unsafe { ((*b).cq.fd(), &mut *(channel as *mut ChannelBox)) };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: b as u64,
        };
        // SAFETY: valid epoll fd, CQ event fd and event.
        if unsafe { libc::epoll_ctl(ch.ibv.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            // SAFETY: b is ours and not handed out yet.
            drop(unsafe { Box::from_raw(b) });
            return ptr::null_mut();
        }
        refcnt(channel).fetch_add(1, Ordering::AcqRel);
    }
    b as *mut ibv_cq
}

/// `ibv_destroy_cq`: `EBUSY` while QPs use it.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { handle::<CqBox>(cq) }) else {
        return libc::EINVAL;
    };
    if c.users.load(Ordering::Acquire) != 0 {
        return libc::EBUSY;
    }
    if !c.ibv.channel.is_null() {
        // SAFETY: the channel outlives its CQs (EBUSY until then).
        let ch = unsafe { &mut *(c.ibv.channel as *mut ChannelBox) };
        // SAFETY: removing the CQ's fd from the channel's epoll set.
        unsafe { libc::epoll_ctl(ch.ibv.fd, libc::EPOLL_CTL_DEL, c.cq.fd(), ptr::null_mut()) };
        refcnt(c.ibv.channel).fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: cq came from ibv_create_cq and is destroyed once.
    drop(unsafe { Box::from_raw(cq as *mut CqBox) });
    0
}

/// `ibv_get_cq_event`: the next CQ of the channel whose armed notification fired.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    ctx_out: *mut *mut c_void,
) -> c_int {
    if ch.is_null() || cq_out.is_null() || ctx_out.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: ch is a live channel.
    let fd = unsafe { (*ch).fd };
    // SAFETY: fcntl on the channel's fd.
    let nonblock = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0;
    loop {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll fd and one-entry buffer.
        let n = unsafe { libc::epoll_wait(fd, &mut ev, 1, if nonblock { 0 } else { -1 }) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return -1;
        }
        if n == 0 {
            set_errno(libc::EAGAIN);
            return -1;
        }
        let b = ev.u64 as *mut CqBox;
        // SAFETY: registered CQs stay live until ibv_destroy_cq removes them from the set.
        let c = unsafe { &*b };
        if c.cq.get_events().unwrap_or(0) == 0 {
            continue;
        }
        // SAFETY: valid out pointers.
        unsafe {
            *cq_out = b as *mut ibv_cq;
            *ctx_out = c.ibv.cq_context;
        }
        return 0;
    }
}

/// `ibv_ack_cq_events`.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    if !cq.is_null() {
        // SAFETY: a live CQ; the u32 counter is aligned and only ever accessed atomically here.
        let n = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*cq).comp_events_completed)) };
        n.fetch_add(nevents, Ordering::Relaxed);
    }
}

unsafe extern "C" fn op_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: caller's contract.
    let Some(c) = (unsafe { handle::<CqBox>(cq) }) else {
        return -libc::EINVAL;
    };
    if n < 0 || (n > 0 && wc.is_null()) {
        return -libc::EINVAL;
    }
    let mut out = Vec::with_capacity((n as usize).min(1024));
    if let Err(e) = c.cq.poll(n as usize, &mut out) {
        return -e.errno();
    }
    for (i, w) in out.iter().enumerate() {
        let x = ibv_wc {
            wr_id: w.wr_id,
            status: w.status as c_uint,
            opcode: w.opcode as c_uint,
            vendor_err: w.vendor_err,
            byte_len: w.byte_len,
            imm: imm_or_rkey {
                imm_data: w.imm_data.unwrap_or(0).to_be(),
            },
            qp_num: w.qp_num,
            src_qp: 0,
            wc_flags: if w.imm_data.is_some() {
                IBV_WC_WITH_IMM
            } else {
                0
            },
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        };
        // SAFETY: wc has room for n >= out.len() entries (caller's contract).
        unsafe { wc.add(i).write(x) };
    }
    out.len() as c_int
}

unsafe extern "C" fn op_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: caller's contract.
    match unsafe { handle::<CqBox>(cq) } {
        Some(c) => match c.cq.req_notify(solicited_only != 0) {
            Ok(()) => 0,
            Err(e) => e.errno(),
        },
        None => libc::EINVAL,
    }
}

unsafe extern "C" fn op_post_srq_recv(
    _srq: *mut c_void,
    _wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if !bad.is_null() {
        // SAFETY: valid out pointer.
        unsafe { *bad = _wr };
    }
    libc::EOPNOTSUPP
}

// ---------------------------------------------------------------------------------------------
// Queue pairs
// ---------------------------------------------------------------------------------------------

/// `ibv_create_qp`: RC only, no SRQ; the granted capacities are written back into `init.cap`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: caller's contract.
    let (Some(p), Some(ia)) = (unsafe { handle::<PdBox>(pd) }, unsafe { init.as_mut() }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if ia.qp_type != IBV_QPT_RC || !ia.srq.is_null() {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    // SAFETY: caller's contract (CQs from ibv_create_cq or NULL).
    let (Some(scq), Some(rcq)) = (unsafe { handle::<CqBox>(ia.send_cq) }, unsafe {
        handle::<CqBox>(ia.recv_cq)
    }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    let caps = QpCaps {
        max_send_wr: ia.cap.max_send_wr,
        max_recv_wr: ia.cap.max_recv_wr,
        max_send_sge: ia.cap.max_send_sge,
        max_recv_sge: ia.cap.max_recv_sge,
        max_inline_data: ia.cap.max_inline_data,
    };
    let qi = QpInit {
        send_cq: scq.cq.clone(),
        recv_cq: rcq.cq.clone(),
        caps,
        sq_sig_all: ia.sq_sig_all != 0,
    };
    let qp = match p.pd.create_qp(&qi) {
        Ok(q) => q,
        Err(e) => {
            set_errno(e.errno());
            return ptr::null_mut();
        }
    };
    let g = qp.caps();
    ia.cap = ibv_qp_cap {
        max_send_wr: g.max_send_wr,
        max_recv_wr: g.max_recv_wr,
        max_send_sge: g.max_send_sge,
        max_recv_sge: g.max_recv_sge,
        max_inline_data: g.max_inline_data,
    };
    // SAFETY: plain data; zero is valid.
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.cap = ia.cap;
    p.users.fetch_add(1, Ordering::AcqRel);
    scq.users.fetch_add(1, Ordering::AcqRel);
    rcq.users.fetch_add(1, Ordering::AcqRel);
    let qpn = qp.qpn();
    let b = Box::into_raw(Box::new(QpBox {
        ibv: ibv_qp {
            context: p.ibv.context,
            qp_context: ia.qp_context,
            pd,
            send_cq: ia.send_cq,
            recv_cq: ia.recv_cq,
            srq: ptr::null_mut(),
            handle: next_handle(),
            qp_num: qpn,
            state: QpState::Reset as c_uint,
            qp_type: IBV_QPT_RC,
            mutex: pthread_mutex_t([0; 5]),
            cond: pthread_cond_t([0; 6]),
            events_completed: 0,
        },
        qp,
        sq_sig_all: ia.sq_sig_all != 0,
        attr: Mutex::new(attr),
        err_requested: AtomicBool::new(false),
        err_reported: AtomicBool::new(false),
    }));
    // SAFETY: the PD's context is live (caller's contract).
    if let Some(c) = unsafe { context(p.ibv.context) } {
        lock(&c.qps).insert(qpn, b as usize);
    }
    b as *mut ibv_qp
}

/// `ibv_destroy_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: qp came from ibv_create_qp and is destroyed once.
    let q = unsafe { Box::from_raw(qp as *mut QpBox) };
    // SAFETY: the context, PD and CQs outlive the QP (EBUSY until then).
    unsafe {
        if let Some(c) = context(q.ibv.context) {
            lock(&c.qps).remove(&q.ibv.qp_num);
            lock(&c.events).retain(|&(_, p)| p != qp as usize);
        }
        for p in [q.ibv.send_cq, q.ibv.recv_cq] {
            if let Some(c) = handle::<CqBox>(p) {
                c.users.fetch_sub(1, Ordering::AcqRel);
            }
        }
        if let Some(p) = handle::<PdBox>(q.ibv.pd) {
            p.users.fetch_sub(1, Ordering::AcqRel);
        }
    }
    0
}

/// Required and optional attribute masks of an RC transition (IB spec 11.2.4.2, as
/// `ib_modify_qp_is_ok`); `None` when the transition does not exist.
fn masks(from: QpState, to: QpState) -> Option<(c_int, c_int)> {
    use QpState::*;
    Some(match (from, to) {
        (_, Reset) | (_, Err) => (IBV_QP_STATE, 0),
        (Reset, Init) => (
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
            0,
        ),
        (Init, Init) => (
            IBV_QP_STATE,
            IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
        ),
        (Init, Rtr) => (
            IBV_QP_STATE
                | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER,
            IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
        ),
        (Rtr, Rts) => (
            IBV_QP_STATE
                | IBV_QP_SQ_PSN
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_MAX_QP_RD_ATOMIC,
            IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE,
        ),
        _ => return None,
    })
}

/// Why a modify is refused, as the errno `ibv_modify_qp` returns.
fn modify(q: &QpBox, a: &ibv_qp_attr, mask: c_int) -> Result<(), c_int> {
    let cur = q.qp.state();
    if mask & IBV_QP_CUR_STATE != 0 && a.cur_qp_state != cur as c_uint {
        return Err(libc::EINVAL);
    }
    let mask = mask & !IBV_QP_CUR_STATE;
    if mask & IBV_QP_STATE == 0 {
        // Attribute changes without a transition (e.g. RTS -> RTS) are not supported by soft.
        return Err(libc::EINVAL);
    }
    let to = QpState::from_raw(a.qp_state).ok_or(libc::EINVAL)?;
    let (req, opt) = masks(cur, to).ok_or(libc::EINVAL)?;
    if mask & req != req || mask & !(req | opt) != 0 {
        return Err(libc::EINVAL);
    }
    let prev = *lock(&q.attr);
    let m = match to {
        QpState::Init => {
            let pick = |bit: c_int| mask & bit != 0;
            ModifyQp::Init(InitAttr {
                port: if pick(IBV_QP_PORT) {
                    a.port_num
                } else {
                    prev.port_num
                },
                pkey_index: if pick(IBV_QP_PKEY_INDEX) {
                    a.pkey_index
                } else {
                    prev.pkey_index
                },
                access: Access(if pick(IBV_QP_ACCESS_FLAGS) {
                    a.qp_access_flags
                } else {
                    prev.qp_access_flags
                }),
            })
        }
        QpState::Rtr => {
            let ah = &a.ah_attr;
            // A RoCE port needs a GRH; its one GID is index 0; the port is 1.
            if ah.is_global == 0 || ah.grh.sgid_index != 0 || ah.port_num != 1 {
                return Err(libc::EINVAL);
            }
            if a.max_dest_rd_atomic > 16 || a.min_rnr_timer > 31 {
                return Err(libc::EINVAL);
            }
            let path_mtu = Mtu::from_raw(a.path_mtu).ok_or(libc::EINVAL)?;
            // SAFETY: every bit pattern of the GID union is valid raw bytes.
            let dgid = Gid(unsafe { ah.grh.dgid.raw });
            let remote = soft::endpoint_from_gid(&dgid, a.dest_qp_num, a.rq_psn)
                .map_err(|_| libc::EINVAL)?;
            ModifyQp::Rtr(RtrAttr {
                remote,
                path_mtu,
                max_dest_rd_atomic: a.max_dest_rd_atomic,
                min_rnr_timer: a.min_rnr_timer,
                sgid_index: 0,
                is_global: true,
                hop_limit: ah.grh.hop_limit,
                traffic_class: ah.grh.traffic_class,
                sl: ah.sl,
                port: ah.port_num,
            })
        }
        QpState::Rts => {
            if a.max_rd_atomic > 16 {
                return Err(libc::EINVAL);
            }
            ModifyQp::Rts(RtsAttr {
                sq_psn: a.sq_psn,
                timeout: a.timeout,
                retry_cnt: a.retry_cnt,
                rnr_retry: a.rnr_retry,
                max_rd_atomic: a.max_rd_atomic,
            })
        }
        QpState::Err => ModifyQp::Err,
        QpState::Reset => ModifyQp::Reset,
        QpState::Sqd | QpState::Sqe => return Err(libc::EINVAL),
    };
    if to == QpState::Err {
        q.err_requested.store(true, Ordering::Release);
    }
    q.qp.modify(&m).map_err(|e| e.errno())?;
    if to == QpState::Reset {
        q.err_requested.store(false, Ordering::Release);
        q.err_reported.store(false, Ordering::Release);
    }
    let mut s = lock(&q.attr);
    let set = |bit: c_int| mask & bit != 0;
    if set(IBV_QP_PKEY_INDEX) {
        s.pkey_index = a.pkey_index;
    }
    if set(IBV_QP_PORT) {
        s.port_num = a.port_num;
    }
    if set(IBV_QP_ACCESS_FLAGS) {
        s.qp_access_flags = a.qp_access_flags;
    }
    if set(IBV_QP_AV) {
        s.ah_attr = a.ah_attr;
    }
    if set(IBV_QP_PATH_MTU) {
        s.path_mtu = a.path_mtu;
    }
    if set(IBV_QP_DEST_QPN) {
        s.dest_qp_num = a.dest_qp_num;
    }
    if set(IBV_QP_RQ_PSN) {
        s.rq_psn = a.rq_psn;
    }
    if set(IBV_QP_MAX_DEST_RD_ATOMIC) {
        s.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if set(IBV_QP_MIN_RNR_TIMER) {
        s.min_rnr_timer = a.min_rnr_timer;
    }
    if set(IBV_QP_SQ_PSN) {
        s.sq_psn = a.sq_psn;
    }
    if set(IBV_QP_TIMEOUT) {
        s.timeout = a.timeout;
    }
    if set(IBV_QP_RETRY_CNT) {
        s.retry_cnt = a.retry_cnt;
    }
    if set(IBV_QP_RNR_RETRY) {
        s.rnr_retry = a.rnr_retry;
    }
    if set(IBV_QP_MAX_QP_RD_ATOMIC) {
        s.max_rd_atomic = a.max_rd_atomic;
    }
    Ok(())
}

/// `ibv_modify_qp`: one RC transition with exactly the attribute mask verbs require (missing
/// or foreign bits, or a transition that does not exist: `EINVAL`).
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: caller's contract.
    let (Some(q), Some(a)) = (unsafe { handle::<QpBox>(qp) }, unsafe { attr.as_ref() }) else {
        return libc::EINVAL;
    };
    match modify(q, a, mask) {
        Ok(()) => {
            set_state(qp, q.qp.state());
            0
        }
        Err(e) => e,
    }
}

/// `ibv_query_qp`: the current state (errors the NIC detected show here), the attributes last
/// set and the creation attributes.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: caller's contract.
    let Some(q) = (unsafe { handle::<QpBox>(qp) }) else {
        return libc::EINVAL;
    };
    if attr.is_null() || init.is_null() {
        return libc::EINVAL;
    }
    let st = q.qp.state() as c_uint;
    let mut a = *lock(&q.attr);
    a.qp_state = st;
    a.cur_qp_state = st;
    let c = q.qp.caps();
    a.cap = ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    };
    // SAFETY: valid out pointers (caller's contract).
    unsafe {
        attr.write(a);
        init.write(ibv_qp_init_attr {
            qp_context: q.ibv.qp_context,
            send_cq: q.ibv.send_cq,
            recv_cq: q.ibv.recv_cq,
            srq: ptr::null_mut(),
            cap: a.cap,
            qp_type: IBV_QPT_RC,
            sq_sig_all: c_int::from(q.sq_sig_all),
        });
    }
    set_state(qp, q.qp.state());
    0
}

/// Mirrors the QP's state into `ibv_qp.state` (informative for the consumer).
fn set_state(qp: *mut ibv_qp, st: QpState) {
    // SAFETY: a live QP handle; the aligned u32 is written atomically only by this library.
    let s = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*qp).state)) };
    s.store(st as u32, Ordering::Relaxed);
}

/// # Safety
/// `w` must point to a valid `ibv_sge` array of `n` entries (or `n == 0`).
unsafe fn sges(list: *const ibv_sge, n: c_int) -> Result<Vec<Sge>, c_int> {
    if n < 0 || (n > 0 && list.is_null()) {
        return Err(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let s = unsafe {
        std::slice::from_raw_parts(
            if n == 0 {
                ptr::NonNull::dangling().as_ptr()
            } else {
                list
            },
            n as usize,
        )
    };
    Ok(s.iter()
        .map(|x| Sge {
            addr: x.addr,
            length: x.length,
            lkey: x.lkey,
        })
        .collect())
}

fn send_op(w: &ibv_send_wr) -> Result<SendOp, c_int> {
    // SAFETY: reading plain-data union members; every bit pattern is valid.
    let (rdma, imm) = unsafe { (w.wr.rdma, u32::from_be(w.imm.imm_data)) };
    let ra = RemoteAddr {
        addr: rdma.remote_addr,
        rkey: rdma.rkey,
    };
    Ok(match w.opcode {
        IBV_WR_RDMA_WRITE => SendOp::RdmaWrite(ra),
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::RdmaWriteWithImm(ra, imm),
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm(imm),
        IBV_WR_RDMA_READ => SendOp::RdmaRead(ra),
        // Atomics, SEND_WITH_INV, TSO, driver opcodes: not on this device.
        _ => return Err(libc::EINVAL),
    })
}

/// Posts a `BIND_MW` or `LOCAL_INV` WR (soft executes both at post time, unsignaled).
///
/// # Safety
/// `w` is a valid WR whose MW/MR handles came from this library.
unsafe fn post_mw_op(q: &QpBox, w: &ibv_send_wr) -> Result<(), c_int> {
    if w.send_flags & IBV_SEND_SIGNALED != 0 || q.sq_sig_all {
        // Soft binds and invalidations generate no success completion.
        return Err(libc::EINVAL);
    }
    if w.opcode == IBV_WR_LOCAL_INV {
        // SAFETY: plain-data union member.
        let rkey = unsafe { w.imm.invalidated_rkey };
        return q.qp.invalidate_mw(w.wr_id, rkey).map_err(|e| e.errno());
    }
    // SAFETY: plain-data union member.
    let b = unsafe { w.bind.bind_mw };
    // SAFETY: the handles came from this library (contract).
    let (Some(mw), Some(mr)) = (unsafe { handle::<MwBox>(b.mw) }, unsafe {
        handle::<MrBox>(b.bind_info.mr)
    }) else {
        return Err(libc::EINVAL);
    };
    if b.rkey != rzmq_rdma::provider::inc_rkey(mw.mw.rkey()) {
        // Soft's windows take the next key (ibv_inc_rkey of the current one) only.
        return Err(libc::EINVAL);
    }
    let new =
        q.qp.bind_mw(
            w.wr_id,
            &*mw.mw,
            &*mr.mr,
            b.bind_info.addr,
            b.bind_info.length,
            Access(b.bind_info.mw_access_flags),
        )
        .map_err(|e| e.errno())?;
    // SAFETY: the MW handle is live; its aligned rkey field mirrors the binding's and is
    // written atomically only by this library.
    let k = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*b.mw).rkey)) };
    k.store(new, Ordering::Relaxed);
    Ok(())
}

unsafe extern "C" fn op_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: caller's contract.
    let Some(q) = (unsafe { handle::<QpBox>(qp) }) else {
        return libc::EINVAL;
    };
    let mut chain = Vec::new();
    let mut w = wr;
    while !w.is_null() {
        chain.push(w);
        // SAFETY: a valid NULL-terminated WR chain (caller's contract).
        w = unsafe { (*w).next };
    }
    let fail = |at: *mut ibv_send_wr, e: c_int| {
        if !bad.is_null() {
            // SAFETY: valid out pointer.
            unsafe { *bad = at };
        }
        e
    };
    let special = |p: *mut ibv_send_wr| {
        // SAFETY: p is in the chain.
        let op = unsafe { (*p).opcode };
        op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV
    };
    let mut i = 0;
    while i < chain.len() {
        if special(chain[i]) {
            // SAFETY: a valid WR of the chain.
            if let Err(e) = unsafe { post_mw_op(q, &*chain[i]) } {
                return fail(chain[i], e);
            }
            i += 1;
            continue;
        }
        let start = i;
        while i < chain.len() && !special(chain[i]) {
            i += 1;
        }
        let run = &chain[start..i];
        let mut lists = Vec::with_capacity(run.len());
        let mut ops = Vec::with_capacity(run.len());
        let mut stop = None;
        for (k, &p) in run.iter().enumerate() {
            // SAFETY: a valid WR of the chain.
            let r = unsafe { &*p };
            // SAFETY: its SGE list has num_sge entries (caller's contract).
            match unsafe { sges(r.sg_list, r.num_sge) }.and_then(|s| Ok((s, send_op(r)?))) {
                Ok((s, op)) => {
                    lists.push(s);
                    ops.push((r.wr_id, op, SendFlags(r.send_flags)));
                }
                Err(e) => {
                    stop = Some((k, e));
                    break;
                }
            }
        }
        let wrs: Vec<SendWr<'_>> = ops
            .iter()
            .zip(&lists)
            .map(|(&(wr_id, op, flags), s)| SendWr {
                wr_id,
                sg_list: s,
                op,
                flags,
            })
            .collect();
        // SAFETY: inline SGEs are readable memory and other SGEs stay registered/unused until
        // completion: the ibv_post_send contract the C caller accepted.
        if let Err(pe) = unsafe { q.qp.post_send(&wrs) } {
            return fail(run[pe.index], pe.error.errno());
        }
        if let Some((k, e)) = stop {
            return fail(run[k], e);
        }
    }
    0
}

unsafe extern "C" fn op_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: caller's contract.
    let Some(q) = (unsafe { handle::<QpBox>(qp) }) else {
        return libc::EINVAL;
    };
    let mut chain = Vec::new();
    let mut lists = Vec::new();
    let mut stop = None;
    let mut w = wr;
    while !w.is_null() {
        // SAFETY: a valid NULL-terminated WR chain (caller's contract).
        let r = unsafe { &*w };
        // SAFETY: its SGE list has num_sge entries.
        match unsafe { sges(r.sg_list, r.num_sge) } {
            Ok(s) => {
                chain.push(w);
                lists.push((r.wr_id, s));
            }
            Err(e) => {
                stop = Some((w, e));
                break;
            }
        }
        w = r.next;
    }
    let wrs: Vec<RecvWr<'_>> = lists
        .iter()
        .map(|(wr_id, s)| RecvWr {
            wr_id: *wr_id,
            sg_list: s,
        })
        .collect();
    let fail = |at: *mut ibv_recv_wr, e: c_int| {
        if !bad.is_null() {
            // SAFETY: valid out pointer.
            unsafe { *bad = at };
        }
        e
    };
    if let Err(pe) = q.qp.post_recv(&wrs) {
        return fail(chain[pe.index], pe.error.errno());
    }
    if let Some((at, e)) = stop {
        return fail(at, e);
    }
    0
}

#[allow(dead_code)]
fn _assert_status_numbers() {
    // The completion statuses soft reports are libibverbs' numbers.
    const _: () = assert!(WcStatus::RemAccessErr as u32 == 10);
    let _: fn(&Error) -> i32 = Error::errno;
}

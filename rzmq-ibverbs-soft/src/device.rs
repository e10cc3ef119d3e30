//! Devices: the device list, opening and closing a context (with its ops table), device, port and
//! GID queries, and asynchronous events.

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use libc::{c_char, c_int, c_uint, c_void};
use rzmq_rdma::provider::soft::{SoftConfig, SoftDevice};
use rzmq_rdma::provider::{Device, Mtu, QpState};

use crate::abi::*;
use crate::cq::*;
use crate::handle::*;
use crate::pd::*;
use crate::qp::*;

/// The device name `ibv_get_device_name` reports.
const DEVICE_NAME: &str = "rzmq_soft0";

pub(crate) struct StaticDevice(ibv_device);
// SAFETY: the device record is immutable after creation (names and null function pointers).
unsafe impl Sync for StaticDevice {}
// SAFETY: as above.
unsafe impl Send for StaticDevice {}

pub(crate) fn device() -> *mut ibv_device {
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

pub(crate) fn ops() -> ibv_context_ops {
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

pub(crate) fn ibv_get_device_guid_value() -> u64 {
    0x525a_4d51_0000_0001u64.to_be()
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
pub(crate) fn scan_async(c: &Context) {
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

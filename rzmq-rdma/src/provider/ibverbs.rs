//! `ibverbs`: the verbs trait mapped 1:1 onto libibverbs through rdma-mummy-sys.
//!
//! rdma-mummy-sys links a small static shim whose constructor `dlopen`s `libibverbs.so.1` at
//! process start (the library is therefore a run-time, not a build-time, dependency). When the
//! library is absent every entry point returns NULL or an error with `errno = EOPNOTSUPP`, which
//! this provider reports as [`Error::NoDevice`] ("libibverbs.so.1 could not be loaded"); with
//! the library but no device the list is empty and [`Provider::open`] reports
//! [`Error::NoDevice`] too. Note the `dlopen` happens once, before `main`: `LD_LIBRARY_PATH`
//! must be set when the process starts.
//!
//! Selection: device `RZMQ_RDMA_DEVICE` (default: the first listed), port `RZMQ_RDMA_PORT`
//! (default 1), GID index `RZMQ_RDMA_GID_INDEX` (default: on Ethernet ports the first RoCE v2
//! GID, preferring IPv4-mapped ones; on InfiniBand 0). InfiniBand ports are addressed by LID
//! (and GID when global); RoCE ports always by GID with a GRH.
//!
//! Each function here is one verbs call plus the translation of its arguments and result; the
//! post/poll calls go through the context's ops table (`ibv_post_send`, `ibv_post_recv`,
//! `ibv_poll_cq`, `ibv_req_notify_cq` are inline functions in rdma-core and in the crate).

use std::any::Any;
use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::Arc;

use rdma_mummy_sys as sys;

use super::*;

// `IBV_LINK_LAYER_*` (rdma-core #defines, not in the bindings): 0 unspecified (= InfiniBand),
// 1 InfiniBand, 2 Ethernet.
const LINK_LAYER_ETHERNET: u8 = 2;

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn verbs(call: &'static str, rc: i32) -> Result<()> {
    match rc {
        0 => Ok(()),
        // Most verbs return the errno; some return -1 and set errno.
        r if r < 0 => Err(Error::Verbs {
            call,
            errno: errno(),
        }),
        r => Err(Error::Verbs { call, errno: r }),
    }
}

/// The ibverbs provider.
#[derive(Debug, Default, Clone)]
pub struct IbvProvider {
    /// Device to open when none is named (`RZMQ_RDMA_DEVICE`; `None`: the first).
    device: Option<String>,
    /// Port (`RZMQ_RDMA_PORT`; `None`: 1).
    port: Option<u8>,
    /// GID index (`RZMQ_RDMA_GID_INDEX`; `None`: the first RoCE v2 GID on Ethernet, else 0).
    gid_index: Option<u32>,
}

impl IbvProvider {
    /// The provider with the environment's device, port and GID index (nothing is loaded or
    /// opened until it is used).
    pub fn new() -> IbvProvider {
        IbvProvider::with_options(&crate::RdmaOptions::from_env().unwrap_or_default())
    }

    /// The provider with the options' device, port and GID index.
    pub fn with_options(o: &crate::RdmaOptions) -> IbvProvider {
        IbvProvider {
            device: o.device.clone(),
            port: o.port,
            gid_index: o.gid_index,
        }
    }
}

/// `ibv_get_device_list` result, freed on drop.
struct DevList {
    list: *mut *mut sys::ibv_device,
    n: usize,
}

impl DevList {
    fn get() -> Result<DevList> {
        let mut n: libc::c_int = 0;
        // SAFETY: plain call with a valid out pointer.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = errno();
            return Err(Error::NoDevice(if e == libc::EOPNOTSUPP {
                "libibverbs.so.1 could not be loaded".into()
            } else {
                format!(
                    "ibv_get_device_list failed: {}",
                    io::Error::from_raw_os_error(e)
                )
            }));
        }
        Ok(DevList {
            list,
            n: n.max(0) as usize,
        })
    }

    fn devices(&self) -> impl Iterator<Item = (*mut sys::ibv_device, String)> + '_ {
        (0..self.n).map(move |i| {
            // SAFETY: the list holds n valid device pointers while it is not freed.
            let d = unsafe { *self.list.add(i) };
            // SAFETY: d is a valid device; the name is a NUL-terminated string it owns.
            let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(d)) }
                .to_string_lossy()
                .into_owned();
            (d, name)
        })
    }
}

impl Drop for DevList {
    fn drop(&mut self) {
        // SAFETY: list came from ibv_get_device_list and is freed once.
        unsafe { sys::ibv_free_device_list(self.list) };
    }
}

impl Provider for IbvProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Ibverbs
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let l = DevList::get()?;
        Ok(l.devices()
            .map(|(_, name)| DeviceInfo {
                name,
                provider: ProviderKind::Ibverbs,
            })
            .collect())
    }

    fn open(&self, name: Option<&str>) -> Result<Arc<dyn Device>> {
        let l = DevList::get()?;
        let want = name.map(str::to_owned).or_else(|| self.device.clone());
        let found = l
            .devices()
            .find(|(_, n)| want.as_deref().is_none_or(|w| w == n));
        let Some((dev, dname)) = found else {
            return Err(match want {
                Some(w) if l.n > 0 => Error::NotFound(format!("RDMA device {w}")),
                _ => Error::NoDevice("no RDMA device present".into()),
            });
        };
        // SAFETY: dev is valid while the list lives; the context keeps what it needs.
        let ctx = unsafe { sys::ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(Error::Verbs {
                call: "ibv_open_device",
                errno: errno(),
            });
        }
        let ctx = Arc::new(Ctx(ctx));
        drop(l);
        let port = self.port.unwrap_or(1);
        let pa = query_port_raw(&ctx, port)?;
        if pa.state != sys::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(Error::NoDevice(format!(
                "{dname} port {port} is not active"
            )));
        }
        let gid_index = match self.gid_index {
            Some(i) => i,
            None if pa.link_layer == LINK_LAYER_ETHERNET => {
                pick_roce_v2_gid(&ctx, port, pa.gid_tbl_len.max(0) as u32)
            }
            None => 0,
        };
        Ok(Arc::new(IbvDevice {
            ctx,
            info: DeviceInfo {
                name: dname,
                provider: ProviderKind::Ibverbs,
            },
            port,
            gid_index,
        }))
    }
}

/// The first RoCE v2 GID of the port, an IPv4-mapped one (`::ffff:a.b.c.d`) if any, else 0.
fn pick_roce_v2_gid(ctx: &Ctx, port: u8, n: u32) -> u32 {
    let mut any_v2 = None;
    for i in 0..n.min(256) {
        let Ok(g) = query_gid_raw(ctx, port, i) else {
            continue;
        };
        if g.is_zero() {
            continue;
        }
        let mut ty: sys::ibv_gid_type_sysfs = 0;
        // SAFETY: valid context and out pointer.
        let rc = unsafe { sys::ibv_query_gid_type(ctx.0, port, i, &mut ty) };
        if rc != 0 || ty != sys::IBV_GID_TYPE_SYSFS_ROCE_V2 {
            continue;
        }
        let v4 = g.0[..10] == [0; 10] && g.0[10] == 0xff && g.0[11] == 0xff;
        if v4 {
            return i;
        }
        any_v2.get_or_insert(i);
    }
    any_v2.unwrap_or(0)
}

/// An open `ibv_context`, closed on drop.
struct Ctx(*mut sys::ibv_context);

// SAFETY: libibverbs contexts are thread-safe (rdma-core locks internally where needed).
unsafe impl Send for Ctx {}
// SAFETY: as above.
unsafe impl Sync for Ctx {}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device; every child holds an Arc and is gone by now.
        unsafe { sys::ibv_close_device(self.0) };
    }
}

fn query_port_raw(ctx: &Ctx, port: u8) -> Result<sys::ibv_port_attr> {
    // SAFETY: ibv_port_attr is plain data; zero is a valid bit pattern.
    let mut a: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
    // SAFETY: valid context and out pointer.
    verbs("ibv_query_port", unsafe {
        sys::ibv_query_port(ctx.0, port, &mut a)
    })?;
    Ok(a)
}

fn query_gid_raw(ctx: &Ctx, port: u8, index: u32) -> Result<Gid> {
    let mut g = sys::ibv_gid { raw: [0; 16] };
    // SAFETY: valid context and out pointer.
    verbs("ibv_query_gid", unsafe {
        sys::ibv_query_gid(ctx.0, port, index as libc::c_int, &mut g)
    })?;
    // SAFETY: every bit pattern of the union is a valid [u8; 16].
    Ok(Gid(unsafe { g.raw }))
}

fn mtu_from(v: u32) -> Mtu {
    Mtu::from_raw(v).unwrap_or(Mtu::M1024)
}

/// An open device with its port and GID index.
pub struct IbvDevice {
    ctx: Arc<Ctx>,
    info: DeviceInfo,
    port: u8,
    gid_index: u32,
}

impl Device for IbvDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn port(&self) -> u8 {
        self.port
    }

    fn gid_index(&self) -> u32 {
        self.gid_index
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        let a = query_port_raw(&self.ctx, port)?;
        Ok(PortAttr {
            active: a.state == sys::ibv_port_state::IBV_PORT_ACTIVE,
            lid: a.lid,
            active_mtu: mtu_from(a.active_mtu),
            link_layer: if a.link_layer == LINK_LAYER_ETHERNET {
                LinkLayer::Ethernet
            } else {
                LinkLayer::Infiniband
            },
            gid_tbl_len: a.gid_tbl_len.max(0) as u32,
        })
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        query_gid_raw(&self.ctx, port, index)
    }

    fn alloc_pd(&self) -> Result<Arc<dyn Pd>> {
        // SAFETY: valid context.
        let pd = unsafe { sys::ibv_alloc_pd(self.ctx.0) };
        if pd.is_null() {
            return Err(Error::Verbs {
                call: "ibv_alloc_pd",
                errno: errno(),
            });
        }
        let pa = query_port_raw(&self.ctx, self.port)?;
        Ok(Arc::new(IbvPd {
            h: Arc::new(PdHandle {
                _ctx: self.ctx.clone(),
                pd,
            }),
            ctx: self.ctx.clone(),
            port: self.port,
            gid_index: self.gid_index,
            link_layer: pa.link_layer,
        }))
    }

    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn Cq>> {
        // SAFETY: valid context.
        let ch = unsafe { sys::ibv_create_comp_channel(self.ctx.0) };
        if ch.is_null() {
            return Err(Error::Verbs {
                call: "ibv_create_comp_channel",
                errno: errno(),
            });
        }
        // SAFETY: ch is a valid channel; its fd is owned by it.
        let fd = unsafe { (*ch).fd };
        // SAFETY: fcntl on a valid fd.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let n = libc::c_int::try_from(cqe).map_err(|_| Error::InvalidArgument("cqe"))?;
        // SAFETY: valid context and channel; no cq_context; completion vector 0.
        let cq = unsafe { sys::ibv_create_cq(self.ctx.0, n, ptr::null_mut(), ch, 0) };
        if cq.is_null() {
            let e = errno();
            // SAFETY: the channel has no CQ attached.
            unsafe { sys::ibv_destroy_comp_channel(ch) };
            return Err(Error::Verbs {
                call: "ibv_create_cq",
                errno: e,
            });
        }
        // SAFETY: cq is valid; cqe holds the granted size.
        let cap = unsafe { (*cq).cqe }.max(0) as u32;
        Ok(Arc::new(IbvCq {
            _ctx: self.ctx.clone(),
            ch,
            cq,
            fd,
            cap,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct PdHandle {
    _ctx: Arc<Ctx>,
    pd: *mut sys::ibv_pd,
}

// SAFETY: a PD is a handle usable from any thread.
unsafe impl Send for PdHandle {}
// SAFETY: as above.
unsafe impl Sync for PdHandle {}

impl Drop for PdHandle {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; MRs and QPs hold an Arc and are gone.
        unsafe { sys::ibv_dealloc_pd(self.pd) };
    }
}

struct IbvPd {
    h: Arc<PdHandle>,
    ctx: Arc<Ctx>,
    port: u8,
    gid_index: u32,
    link_layer: u8,
}

impl Pd for IbvPd {
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>> {
        // SAFETY: the caller guarantees the range stays valid until the MR is dropped.
        let mr = unsafe {
            sys::ibv_reg_mr(
                self.h.pd,
                addr as *mut libc::c_void,
                len,
                access.0 as libc::c_int,
            )
        };
        if mr.is_null() {
            return Err(Error::Verbs {
                call: "ibv_reg_mr",
                errno: errno(),
            });
        }
        Ok(Arc::new(IbvMr {
            _pd: self.h.clone(),
            mr,
            access,
        }))
    }

    fn alloc_mw(&self) -> Result<Arc<dyn Mw>> {
        // SAFETY: valid PD; ibv_alloc_mw sets errno (EOPNOTSUPP without memory windows).
        let mw = unsafe { sys::ibv_alloc_mw(self.h.pd, sys::ibv_mw_type::IBV_MW_TYPE_2) };
        if mw.is_null() {
            return Err(Error::Verbs {
                call: "ibv_alloc_mw",
                errno: errno(),
            });
        }
        // SAFETY: mw was just allocated and is valid.
        let rkey = unsafe { (*mw).rkey };
        Ok(Arc::new(IbvMw {
            _pd: self.h.clone(),
            mw,
            rkey: std::sync::atomic::AtomicU32::new(rkey),
        }))
    }

    fn create_qp(&self, init: &QpInit) -> Result<Arc<dyn Qp>> {
        let cq_of = |c: &Arc<dyn Cq>| {
            c.as_any()
                .downcast_ref::<IbvCq>()
                .map(|c| c.cq)
                .ok_or(Error::InvalidArgument("CQ from another provider"))
        };
        // SAFETY: plain data; zero is valid (null pointers, zero caps).
        let mut a: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        a.send_cq = cq_of(&init.send_cq)?;
        a.recv_cq = cq_of(&init.recv_cq)?;
        a.cap = sys::ibv_qp_cap {
            max_send_wr: init.caps.max_send_wr,
            max_recv_wr: init.caps.max_recv_wr,
            max_send_sge: init.caps.max_send_sge,
            max_recv_sge: init.caps.max_recv_sge,
            max_inline_data: init.caps.max_inline_data,
        };
        a.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        a.sq_sig_all = libc::c_int::from(init.sq_sig_all);
        // SAFETY: valid PD and init attributes; the CQs outlive the QP (held below).
        let qp = unsafe { sys::ibv_create_qp(self.h.pd, &mut a) };
        if qp.is_null() {
            return Err(Error::Verbs {
                call: "ibv_create_qp",
                errno: errno(),
            });
        }
        Ok(Arc::new(IbvQp {
            qp,
            caps: QpCaps {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
                max_recv_sge: a.cap.max_recv_sge,
                max_inline_data: a.cap.max_inline_data,
            },
            ctx: self.ctx.clone(),
            port: self.port,
            gid_index: self.gid_index,
            link_layer: self.link_layer,
            _pd: self.h.clone(),
            _cqs: (init.send_cq.clone(), init.recv_cq.clone()),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct IbvMw {
    _pd: Arc<PdHandle>,
    mw: *mut sys::ibv_mw,
    /// The rkey of the current binding (type-2 windows: tracked by the consumer).
    rkey: std::sync::atomic::AtomicU32,
}

// SAFETY: a memory window is a handle usable from any thread; its rkey is atomic.
unsafe impl Send for IbvMw {}
// SAFETY: as above.
unsafe impl Sync for IbvMw {}

impl Mw for IbvMw {
    fn rkey(&self) -> u32 {
        self.rkey.load(std::sync::atomic::Ordering::Acquire)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for IbvMw {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_mw, deallocated once.
        unsafe { sys::ibv_dealloc_mw(self.mw) };
    }
}

struct IbvMr {
    _pd: Arc<PdHandle>,
    mr: *mut sys::ibv_mr,
    access: Access,
}

// SAFETY: an MR is an immutable handle after registration.
unsafe impl Send for IbvMr {}
// SAFETY: as above.
unsafe impl Sync for IbvMr {}

impl Mr for IbvMr {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn addr(&self) -> u64 {
        // SAFETY: valid MR for our lifetime.
        unsafe { (*self.mr).addr as u64 }
    }
    fn len(&self) -> usize {
        // SAFETY: as above.
        unsafe { (*self.mr).length }
    }
    fn lkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).lkey }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }
    fn access(&self) -> Access {
        self.access
    }
}

impl Drop for IbvMr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once.
        unsafe { sys::ibv_dereg_mr(self.mr) };
    }
}

struct IbvCq {
    _ctx: Arc<Ctx>,
    ch: *mut sys::ibv_comp_channel,
    cq: *mut sys::ibv_cq,
    fd: RawFd,
    cap: u32,
}

// SAFETY: CQ operations are thread-safe in libibverbs providers.
unsafe impl Send for IbvCq {}
// SAFETY: as above.
unsafe impl Sync for IbvCq {}

impl Drop for IbvCq {
    fn drop(&mut self) {
        // Every event was acknowledged in get_events, so destroy_cq does not block.
        // SAFETY: created in create_cq; QPs using it hold an Arc and are gone.
        unsafe {
            sys::ibv_destroy_cq(self.cq);
            sys::ibv_destroy_comp_channel(self.ch);
        }
    }
}

impl Cq for IbvCq {
    fn poll(&self, max: usize, out: &mut Vec<WorkCompletion>) -> Result<usize> {
        // SAFETY: ibv_wc is plain data; zero is valid.
        let mut wc: [sys::ibv_wc; 32] = unsafe { std::mem::zeroed() };
        let mut total = 0;
        while total < max {
            let want = (max - total).min(wc.len()) as i32;
            // SAFETY: valid CQ; wc has room for `want` entries.
            let n = unsafe { sys::ibv_poll_cq(self.cq, want, wc.as_mut_ptr()) };
            if n < 0 {
                return Err(Error::Verbs {
                    call: "ibv_poll_cq",
                    errno: -n,
                });
            }
            for w in &wc[..n as usize] {
                let with_imm = w.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
                let status = WcStatus::from_raw(w.status);
                out.push(WorkCompletion {
                    wr_id: w.wr_id,
                    status,
                    // The opcode is undefined on errors; report Send then.
                    opcode: WcOpcode::from_raw(w.opcode).unwrap_or(WcOpcode::Send),
                    byte_len: w.byte_len,
                    imm_data: with_imm.then(|| {
                        // SAFETY: with IBV_WC_WITH_IMM the union holds the immediate
                        // (big-endian).
                        u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })
                    }),
                    qp_num: w.qp_num,
                    vendor_err: w.vendor_err,
                });
            }
            total += n as usize;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        // SAFETY: valid CQ.
        verbs("ibv_req_notify_cq", unsafe {
            sys::ibv_req_notify_cq(self.cq, i32::from(solicited_only))
        })
    }

    fn fd(&self) -> RawFd {
        self.fd
    }

    fn get_events(&self) -> Result<u32> {
        let mut n = 0u32;
        loop {
            let mut cq: *mut sys::ibv_cq = ptr::null_mut();
            let mut ctx: *mut libc::c_void = ptr::null_mut();
            // SAFETY: valid channel (non-blocking fd) and out pointers.
            let rc = unsafe { sys::ibv_get_cq_event(self.ch, &mut cq, &mut ctx) };
            if rc != 0 {
                break;
            }
            n += 1;
        }
        if n > 0 {
            // SAFETY: acknowledges exactly the events taken above.
            unsafe { sys::ibv_ack_cq_events(self.cq, n) };
        }
        Ok(n)
    }

    fn capacity(&self) -> u32 {
        self.cap
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct IbvQp {
    qp: *mut sys::ibv_qp,
    caps: QpCaps,
    ctx: Arc<Ctx>,
    port: u8,
    gid_index: u32,
    link_layer: u8,
    _pd: Arc<PdHandle>,
    _cqs: (Arc<dyn Cq>, Arc<dyn Cq>),
}

// SAFETY: posting and modifying QPs is thread-safe in libibverbs providers.
unsafe impl Send for IbvQp {}
// SAFETY: as above.
unsafe impl Sync for IbvQp {}

impl Drop for IbvQp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp, destroyed once, before its CQs and PD (held).
        unsafe { sys::ibv_destroy_qp(self.qp) };
    }
}

fn post_error(call: &'static str, rc: i32, index: usize, caps: &QpCaps) -> PostError {
    let error = match rc {
        libc::ENOMEM => Error::QueueFull {
            queue: if call == "ibv_post_recv" {
                WorkQueue::Recv
            } else {
                WorkQueue::Send
            },
            depth: if call == "ibv_post_recv" {
                caps.max_recv_wr
            } else {
                caps.max_send_wr
            },
        },
        e => Error::Verbs { call, errno: e },
    };
    PostError { index, error }
}

impl Qp for IbvQp {
    fn qpn(&self) -> u32 {
        // SAFETY: valid QP.
        unsafe { (*self.qp).qp_num }
    }

    fn state(&self) -> QpState {
        // SAFETY: plain data, zero valid.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: valid QP and out pointers.
        let rc = unsafe {
            sys::ibv_query_qp(
                self.qp,
                &mut attr,
                sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as libc::c_int,
                &mut init,
            )
        };
        if rc != 0 {
            return QpState::Err;
        }
        QpState::from_raw(attr.qp_state).unwrap_or(QpState::Err)
    }

    fn caps(&self) -> QpCaps {
        self.caps
    }

    fn endpoint(&self, psn: u32) -> Result<Endpoint> {
        let pa = query_port_raw(&self.ctx, self.port)?;
        let gid = query_gid_raw(&self.ctx, self.port, self.gid_index)?;
        if pa.link_layer == LINK_LAYER_ETHERNET && gid.is_zero() {
            return Err(Error::NotFound(format!(
                "RoCE GID index {} is empty (set RZMQ_RDMA_GID_INDEX)",
                self.gid_index
            )));
        }
        Ok(Endpoint {
            provider: ProviderKind::Ibverbs,
            qpn: self.qpn(),
            psn: psn & 0xff_ffff,
            lid: pa.lid,
            gid,
            mtu: mtu_from(pa.active_mtu),
            extra: vec![pa.link_layer],
        })
    }

    fn modify(&self, m: &ModifyQp) -> Result<()> {
        use sys::ibv_qp_attr_mask as M;
        use sys::ibv_qp_state as S;
        // SAFETY: plain data, zero valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        let mask = match m {
            ModifyQp::Init(i) => {
                a.qp_state = S::IBV_QPS_INIT;
                a.pkey_index = i.pkey_index;
                a.port_num = i.port;
                a.qp_access_flags = i.access.0;
                M::IBV_QP_STATE.0
                    | M::IBV_QP_PKEY_INDEX.0
                    | M::IBV_QP_PORT.0
                    | M::IBV_QP_ACCESS_FLAGS.0
            }
            ModifyQp::Rtr(r) => {
                if r.remote.provider != ProviderKind::Ibverbs {
                    return Err(Error::Descriptor("remote endpoint is not an ibverbs QP"));
                }
                if r.remote
                    .extra
                    .first()
                    .is_some_and(|&l| l != self.link_layer)
                {
                    return Err(Error::Descriptor("remote port has another link layer"));
                }
                let local_mtu = mtu_from(query_port_raw(&self.ctx, self.port)?.active_mtu);
                a.qp_state = S::IBV_QPS_RTR;
                a.path_mtu = r.path_mtu.min(local_mtu) as u32;
                a.dest_qp_num = r.remote.qpn;
                a.rq_psn = r.remote.psn;
                a.max_dest_rd_atomic = r.max_dest_rd_atomic;
                a.min_rnr_timer = r.min_rnr_timer;
                a.ah_attr.dlid = r.remote.lid;
                a.ah_attr.sl = r.sl;
                a.ah_attr.src_path_bits = 0;
                a.ah_attr.port_num = r.port;
                // RoCE needs a GRH; InfiniBand uses one when asked (other subnet).
                if r.is_global || self.link_layer == LINK_LAYER_ETHERNET {
                    a.ah_attr.is_global = 1;
                    a.ah_attr.grh.dgid = sys::ibv_gid {
                        raw: r.remote.gid.0,
                    };
                    a.ah_attr.grh.sgid_index = r.sgid_index;
                    a.ah_attr.grh.hop_limit = r.hop_limit;
                    a.ah_attr.grh.traffic_class = r.traffic_class;
                    a.ah_attr.grh.flow_label = 0;
                }
                M::IBV_QP_STATE.0
                    | M::IBV_QP_AV.0
                    | M::IBV_QP_PATH_MTU.0
                    | M::IBV_QP_DEST_QPN.0
                    | M::IBV_QP_RQ_PSN.0
                    | M::IBV_QP_MAX_DEST_RD_ATOMIC.0
                    | M::IBV_QP_MIN_RNR_TIMER.0
            }
            ModifyQp::Rts(r) => {
                a.qp_state = S::IBV_QPS_RTS;
                a.sq_psn = r.sq_psn & 0xff_ffff;
                a.timeout = r.timeout;
                a.retry_cnt = r.retry_cnt;
                a.rnr_retry = r.rnr_retry;
                a.max_rd_atomic = r.max_rd_atomic;
                M::IBV_QP_STATE.0
                    | M::IBV_QP_SQ_PSN.0
                    | M::IBV_QP_TIMEOUT.0
                    | M::IBV_QP_RETRY_CNT.0
                    | M::IBV_QP_RNR_RETRY.0
                    | M::IBV_QP_MAX_QP_RD_ATOMIC.0
            }
            ModifyQp::Err => {
                a.qp_state = S::IBV_QPS_ERR;
                M::IBV_QP_STATE.0
            }
            ModifyQp::Reset => {
                a.qp_state = S::IBV_QPS_RESET;
                M::IBV_QP_STATE.0
            }
        };
        // SAFETY: valid QP; attributes initialised for every bit in the mask.
        verbs("ibv_modify_qp", unsafe {
            sys::ibv_modify_qp(self.qp, &mut a, mask as libc::c_int)
        })
    }

    unsafe fn post_send(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let mut sges: Vec<Vec<sys::ibv_sge>> = wrs
            .iter()
            .map(|w| {
                w.sg_list
                    .iter()
                    .map(|s| sys::ibv_sge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey,
                    })
                    .collect()
            })
            .collect();
        // SAFETY: ibv_send_wr is plain data with unions; zero is a valid bit pattern.
        let mut raw: Vec<sys::ibv_send_wr> = (0..wrs.len())
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        let base = raw.as_mut_ptr();
        for (i, (w, r)) in wrs.iter().zip(raw.iter_mut()).enumerate() {
            r.wr_id = w.wr_id;
            r.sg_list = sges[i].as_mut_ptr();
            r.num_sge = sges[i].len() as libc::c_int;
            r.opcode = w.op.raw();
            r.send_flags = w.flags.0;
            r.next = if i + 1 < wrs.len() {
                // SAFETY: i + 1 is in bounds of `raw`, which is not reallocated.
                unsafe { base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
            match w.op {
                SendOp::Send => {}
                SendOp::SendWithImm(imm) => {
                    r.imm_data_invalidated_rkey_union.imm_data = imm.to_be()
                }
                SendOp::RdmaWrite(ra) | SendOp::RdmaRead(ra) => {
                    r.wr.rdma = sys::rdma_t {
                        remote_addr: ra.addr,
                        rkey: ra.rkey,
                    }
                }
                SendOp::RdmaWriteWithImm(ra, imm) => {
                    r.wr.rdma = sys::rdma_t {
                        remote_addr: ra.addr,
                        rkey: ra.rkey,
                    };
                    r.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                }
            }
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: a valid chain of WRs whose SGE arrays live until the call returns; inline
        // data readability is the caller's contract.
        let rc = unsafe { sys::ibv_post_send(self.qp, base, &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let index = if bad.is_null() {
            0
        } else {
            // SAFETY: bad points into `raw`.
            unsafe { bad.offset_from(base) }.max(0) as usize
        };
        Err(post_error("ibv_post_send", rc, index, &self.caps))
    }

    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let mut sges: Vec<Vec<sys::ibv_sge>> = wrs
            .iter()
            .map(|w| {
                w.sg_list
                    .iter()
                    .map(|s| sys::ibv_sge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey,
                    })
                    .collect()
            })
            .collect();
        let mut raw: Vec<sys::ibv_recv_wr> = wrs
            .iter()
            .enumerate()
            .map(|(i, w)| sys::ibv_recv_wr {
                wr_id: w.wr_id,
                next: ptr::null_mut(),
                sg_list: sges[i].as_mut_ptr(),
                num_sge: sges[i].len() as libc::c_int,
            })
            .collect();
        let base = raw.as_mut_ptr();
        for i in 0..raw.len().saturating_sub(1) {
            // SAFETY: i + 1 is in bounds; `raw` is not reallocated.
            raw[i].next = unsafe { base.add(i + 1) };
        }
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: a valid chain of receive WRs whose SGE arrays outlive the call.
        let rc = unsafe { sys::ibv_post_recv(self.qp, base, &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let index = if bad.is_null() {
            0
        } else {
            // SAFETY: bad points into `raw`.
            unsafe { bad.offset_from(base) }.max(0) as usize
        };
        Err(post_error("ibv_post_recv", rc, index, &self.caps))
    }

    fn bind_mw(
        &self,
        wr_id: u64,
        mw: &dyn Mw,
        mr: &dyn Mr,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32> {
        let mw = mw
            .as_any()
            .downcast_ref::<IbvMw>()
            .ok_or(Error::InvalidArgument(
                "memory window from another provider",
            ))?;
        let mr = mr
            .as_any()
            .downcast_ref::<IbvMr>()
            .ok_or(Error::InvalidArgument("MR from another provider"))?;
        let new = inc_rkey(mw.rkey());
        // SAFETY: ibv_send_wr is plain data with unions; zero is a valid bit pattern.
        let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_BIND_MW;
        wr.bind_mw_tso_union.bind_mw = sys::bind_mw_t {
            mw: mw.mw,
            rkey: new,
            bind_info: sys::ibv_mw_bind_info {
                mr: mr.mr,
                addr,
                length: len,
                mw_access_flags: access.0,
            },
        };
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: one valid WR (no SGEs) whose MW and MR outlive the call.
        let rc = unsafe { sys::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(post_error("ibv_post_send", rc, 0, &self.caps).error);
        }
        mw.rkey.store(new, std::sync::atomic::Ordering::Release);
        Ok(new)
    }

    fn invalidate_mw(&self, wr_id: u64, rkey: u32) -> Result<()> {
        // SAFETY: ibv_send_wr is plain data with unions; zero is a valid bit pattern.
        let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_LOCAL_INV;
        wr.imm_data_invalidated_rkey_union.invalidated_rkey = rkey;
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: one valid WR without SGEs.
        let rc = unsafe { sys::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(post_error("ibv_post_send", rc, 0, &self.caps).error);
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine has neither libibverbs nor an RDMA device: the provider must say so cleanly.
    #[test]
    fn reports_no_rdma_device_cleanly() {
        let p = IbvProvider::new();
        let devices = p.devices();
        let present = matches!(&devices, Ok(d) if !d.is_empty());
        if present || crate::settings::expect_device() {
            // Real hardware (or an emulated libibverbs): opening must work instead.
            assert!(p.open(None).is_ok());
            return;
        }
        match p.open(None) {
            Err(e @ Error::NoDevice(_)) => {
                eprintln!("ibverbs here: {e}");
                assert!(e.to_string().starts_with("no RDMA device"), "{e}");
                assert_eq!(e.errno(), libc::ENODEV);
            }
            Err(e) => panic!("expected NoDevice, got {e}"),
            Ok(_) => panic!("opened a device that was not listed"),
        }
        // auto selection falls back to none (connections stay on TCP).
        assert!(matches!(devices, Ok(_) | Err(Error::NoDevice(_))));
    }
}

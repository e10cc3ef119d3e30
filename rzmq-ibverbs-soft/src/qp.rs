//! Queue pairs: creation, state transitions (with the attribute masks each one requires), queries
//! and posts.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use libc::{c_int, c_uint};
use rzmq_rdma::provider::soft::{self};
use rzmq_rdma::provider::{
    Access, Gid, InitAttr, ModifyQp, Mtu, QpCaps, QpInit, QpState, RecvWr, RemoteAddr, RtrAttr,
    RtsAttr, SendFlags, SendOp, SendWr, Sge,
};

use crate::abi::*;
use crate::handle::*;

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
pub(crate) fn masks(from: QpState, to: QpState) -> Option<(c_int, c_int)> {
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
pub(crate) fn modify(q: &QpBox, a: &ibv_qp_attr, mask: c_int) -> Result<(), c_int> {
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
pub(crate) fn set_state(qp: *mut ibv_qp, st: QpState) {
    // SAFETY: a live QP handle; the aligned u32 is written atomically only by this library.
    let s = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*qp).state)) };
    s.store(st as u32, Ordering::Relaxed);
}

/// # Safety
/// `w` must point to a valid `ibv_sge` array of `n` entries (or `n == 0`).
pub(crate) unsafe fn sges(list: *const ibv_sge, n: c_int) -> Result<Vec<Sge>, c_int> {
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

pub(crate) fn send_op(w: &ibv_send_wr) -> Result<SendOp, c_int> {
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
pub(crate) unsafe fn post_mw_op(q: &QpBox, w: &ibv_send_wr) -> Result<(), c_int> {
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

pub(crate) unsafe extern "C" fn op_post_send(
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

pub(crate) unsafe extern "C" fn op_post_recv(
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

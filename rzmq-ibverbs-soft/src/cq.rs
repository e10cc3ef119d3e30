//! Completion channels and CQs.

use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};

use libc::{c_int, c_uint, c_void};
use rzmq_rdma::provider::{Device, Error, WcStatus};

use crate::abi::*;
use crate::handle::*;

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
pub(crate) fn refcnt<'a>(ch: *mut ibv_comp_channel) -> &'a AtomicI32 {
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

pub(crate) unsafe extern "C" fn op_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
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

pub(crate) unsafe extern "C" fn op_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: caller's contract.
    match unsafe { handle::<CqBox>(cq) } {
        Some(c) => match c.cq.req_notify(solicited_only != 0) {
            Ok(()) => 0,
            Err(e) => e.errno(),
        },
        None => libc::EINVAL,
    }
}

pub(crate) unsafe extern "C" fn op_post_srq_recv(
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

#[allow(dead_code)]
fn _assert_status_numbers() {
    // The completion statuses soft reports are libibverbs' numbers.
    const _: () = assert!(WcStatus::RemAccessErr as u32 == 10);
    let _: fn(&Error) -> i32 = Error::errno;
}

//! `loopback`: a provider whose wire costs nothing, for measuring the engine's own cost.
//!
//! QPs of one process only. A post executes at once, in the poster's thread: a WRITE copies the
//! local SGEs into the peer's registered memory, a WRITE_WITH_IMM then consumes one of the
//! peer's posted receives and queues its completion on the peer's CQ, a READ copies the peer's
//! memory into the local SGEs, and a signaled WR queues its completion on the poster's CQ. What
//! is left is what a NIC does for free (its DMA) plus a lock and a queue per completion, so a
//! data path driven over it spends its time in the engine (ring, rendezvous, posting,
//! completion handling, notification), which on a NIC with 1-2 us RC latency is the whole cost.
//!
//! Checks kept: rkeys, bounds and access rights of remote accesses (`REM_ACCESS_ERR`, both QPs
//! to ERR), a receive for every WRITE_WITH_IMM (`RNR_RETRY_EXC_ERR` otherwise: there is no
//! retry), QP states, memory-window binds and invalidations. Not modelled: queue-depth and
//! inline limits, PSNs, timeouts, fault injection (use [`super::soft`] for those). A CQ's
//! completion fd is an eventfd written when an armed CQ gets a completion, as in `soft`.
//!
//! The verbs rules are soft's, not a copy: key entries and their range and rights check
//! (`MrEntry::covers`), the state table of `modify` (`transition_ok`), what a post meets in
//! each QP state (`send_admission`, `recv_admission`) and the memory-window bind rules
//! (`window_fits`).
//!
//! Selected with `RZMQ_RDMA_PROVIDER=loopback` (both ends in one process, e.g. two contexts).

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use super::soft::{
    lock, recv_admission, send_admission, transition_ok, window_fits, Admission, MrEntry,
};
use super::{
    Access, Cq, Device, DeviceInfo, Endpoint, Error, Gid, LinkLayer, ModifyQp, Mr, Mtu, Mw, Pd,
    PortAttr, PostError, Provider, ProviderKind, Qp, QpCaps, QpInit, QpState, RecvWr, Result,
    SendFlags, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion,
};
use crate::fd::EventFd;

/// QPs of the process by number (an RTR looks its peer up here).
fn qps() -> &'static Mutex<HashMap<u32, Weak<QpShared>>> {
    static QPS: OnceLock<Mutex<HashMap<u32, Weak<QpShared>>>> = OnceLock::new();
    QPS.get_or_init(|| Mutex::new(HashMap::new()))
}

static NEXT_QPN: AtomicU32 = AtomicU32::new(1);
static NEXT_KEY: AtomicU32 = AtomicU32::new(0x100);

/// The loopback provider: one device, `loopback0`.
#[derive(Debug, Default)]
pub struct LoopbackProvider;

impl Provider for LoopbackProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Loopback
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(vec![info()])
    }

    fn open(&self, _name: Option<&str>) -> Result<Arc<dyn Device>> {
        Ok(Arc::new(LoopbackDevice { info: info() }))
    }
}

fn info() -> DeviceInfo {
    DeviceInfo {
        name: "loopback0".into(),
        provider: ProviderKind::Loopback,
    }
}

/// An open loopback device.
pub struct LoopbackDevice {
    info: DeviceInfo,
}

impl Device for LoopbackDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn port(&self) -> u8 {
        1
    }

    fn gid_index(&self) -> u32 {
        0
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(Error::NotFound(format!("port {port}")));
        }
        Ok(PortAttr {
            active: true,
            lid: 0,
            active_mtu: Mtu::M4096,
            link_layer: LinkLayer::Soft,
            gid_tbl_len: 1,
        })
    }

    fn query_gid(&self, _port: u8, _index: u32) -> Result<Gid> {
        Ok(Gid::default())
    }

    fn alloc_pd(&self) -> Result<Arc<dyn Pd>> {
        Ok(Arc::new(LoopbackPd {
            keys: Arc::new(RwLock::new(HashMap::new())),
        }))
    }

    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn Cq>> {
        Ok(Arc::new(LoopbackCq {
            inner: Mutex::new(CqInner {
                q: VecDeque::with_capacity(cqe as usize),
                armed: false,
                overrun: false,
            }),
            efd: EventFd::new()?,
            cap: cqe,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A PD's keys: registrations (lkey and rkey alike) and bound memory windows (rkey only), as
/// soft's entries; one table per PD, so their `pdn` is 0 and never compared.
type Keys = Arc<RwLock<HashMap<u32, MrEntry>>>;

fn read_keys(k: &Keys) -> std::sync::RwLockReadGuard<'_, HashMap<u32, MrEntry>> {
    k.read().unwrap_or_else(|e| e.into_inner())
}

fn write_keys(k: &Keys) -> std::sync::RwLockWriteGuard<'_, HashMap<u32, MrEntry>> {
    k.write().unwrap_or_else(|e| e.into_inner())
}

/// Whether `key` grants `need` over `addr..addr+len` in `keys`.
fn granted(keys: &HashMap<u32, MrEntry>, key: u32, addr: u64, len: u64, need: Access) -> bool {
    keys.get(&key).is_some_and(|g| g.covers(addr, len, need))
}

/// The entry of a registration or window binding (`pdn` 0: see [`Keys`]).
fn grant(addr: u64, len: u64, access: Access) -> MrEntry {
    MrEntry {
        addr,
        len,
        access,
        pdn: 0,
    }
}

struct LoopbackPd {
    keys: Keys,
}

impl Pd for LoopbackPd {
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>> {
        let key = NEXT_KEY.fetch_add(0x100, Ordering::Relaxed);
        // Local reads are always allowed (send sources).
        let grant = grant(addr as u64, len as u64, access);
        write_keys(&self.keys).insert(key, grant);
        Ok(Arc::new(LoopbackMr {
            keys: self.keys.clone(),
            key,
            grant,
        }))
    }

    fn create_qp(&self, init: &QpInit) -> Result<Arc<dyn Qp>> {
        let cq = |c: &Arc<dyn Cq>| -> Result<Arc<dyn Cq>> {
            if c.as_any().downcast_ref::<LoopbackCq>().is_none() {
                return Err(Error::InvalidArgument("CQ of another provider"));
            }
            Ok(c.clone())
        };
        let qpn = NEXT_QPN.fetch_add(1, Ordering::Relaxed) & 0xff_ffff;
        let shared = Arc::new(QpShared {
            qpn,
            keys: self.keys.clone(),
            send_cq: cq(&init.send_cq)?,
            recv_cq: cq(&init.recv_cq)?,
            state: Mutex::new(QpState::Reset),
            rq: Mutex::new(VecDeque::new()),
            peer: OnceLock::new(),
            sig_all: init.sq_sig_all,
        });
        lock(qps()).insert(qpn, Arc::downgrade(&shared));
        Ok(Arc::new(LoopbackQp {
            caps: init.caps,
            qp: shared,
        }))
    }

    fn alloc_mw(&self) -> Result<Arc<dyn Mw>> {
        Ok(Arc::new(LoopbackMw {
            keys: self.keys.clone(),
            rkey: AtomicU32::new(NEXT_KEY.fetch_add(0x100, Ordering::Relaxed)),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct LoopbackMr {
    keys: Keys,
    key: u32,
    grant: MrEntry,
}

impl Mr for LoopbackMr {
    fn addr(&self) -> u64 {
        self.grant.addr
    }
    fn len(&self) -> usize {
        self.grant.len as usize
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn access(&self) -> Access {
        self.grant.access
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for LoopbackMr {
    fn drop(&mut self) {
        write_keys(&self.keys).remove(&self.key);
    }
}

struct LoopbackMw {
    keys: Keys,
    rkey: AtomicU32,
}

impl Mw for LoopbackMw {
    fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Relaxed)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for LoopbackMw {
    fn drop(&mut self) {
        write_keys(&self.keys).remove(&self.rkey.load(Ordering::Relaxed));
    }
}

struct CqInner {
    q: VecDeque<WorkCompletion>,
    armed: bool,
    overrun: bool,
}

struct LoopbackCq {
    inner: Mutex<CqInner>,
    efd: EventFd,
    cap: u32,
}

impl LoopbackCq {
    fn push(&self, wc: WorkCompletion) {
        let mut g = lock(&self.inner);
        if g.q.len() >= self.cap as usize {
            g.overrun = true;
            return;
        }
        g.q.push_back(wc);
        if std::mem::take(&mut g.armed) {
            self.efd.signal();
        }
    }
}

impl Cq for LoopbackCq {
    fn poll(&self, max: usize, out: &mut Vec<WorkCompletion>) -> Result<usize> {
        let mut g = lock(&self.inner);
        if g.overrun {
            return Err(Error::CqOverrun);
        }
        let n = max.min(g.q.len());
        out.extend(g.q.drain(..n));
        Ok(n)
    }

    fn req_notify(&self, _solicited_only: bool) -> Result<()> {
        lock(&self.inner).armed = true;
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.efd.fd()
    }

    fn get_events(&self) -> Result<u32> {
        Ok(self.efd.drain().min(u64::from(u32::MAX)) as u32)
    }

    fn capacity(&self) -> u32 {
        self.cap
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn cq_of(c: &Arc<dyn Cq>) -> &LoopbackCq {
    c.as_any()
        .downcast_ref::<LoopbackCq>()
        .expect("checked at create_qp")
}

struct QpShared {
    qpn: u32,
    keys: Keys,
    send_cq: Arc<dyn Cq>,
    recv_cq: Arc<dyn Cq>,
    state: Mutex<QpState>,
    /// Posted receives (their wr_ids; rzmq's receives carry no buffer).
    rq: Mutex<VecDeque<u64>>,
    peer: OnceLock<Weak<QpShared>>,
    sig_all: bool,
}

impl QpShared {
    fn state(&self) -> QpState {
        *lock(&self.state)
    }

    /// To ERR: every posted receive is flushed.
    fn enter_err(&self) {
        *lock(&self.state) = QpState::Err;
        let flushed: Vec<u64> = lock(&self.rq).drain(..).collect();
        for wr_id in flushed {
            cq_of(&self.recv_cq).push(self.wc(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0));
        }
    }

    fn wc(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode, len: u32) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len: len,
            imm_data: None,
            qp_num: self.qpn,
            vendor_err: 0,
        }
    }

    /// Executes one send WR; `Err(status)` fails it (and the connection).
    ///
    /// # Safety
    /// As [`Qp::post_send`]: the SGEs' memory is readable (inline) or registered.
    #[inline(never)] // the wire's share, apart in profiles
    unsafe fn execute(&self, wr: &SendWr<'_>) -> std::result::Result<(), WcStatus> {
        let peer = self
            .peer
            .get()
            .and_then(Weak::upgrade)
            .filter(|p| matches!(p.state(), QpState::Rtr | QpState::Rts))
            .ok_or(WcStatus::RetryExcErr)?;
        let inline = wr.flags.contains(SendFlags::INLINE);
        if !inline {
            let keys = read_keys(&self.keys);
            let need = match wr.op {
                SendOp::RdmaRead(_) => Access::LOCAL_WRITE,
                _ => Access::NONE,
            };
            for s in wr.sg_list {
                if !granted(&keys, s.lkey, s.addr, u64::from(s.length), need) {
                    return Err(WcStatus::LocProtErr);
                }
            }
        }
        let total = wr.total_len() as u64;
        let (remote, imm) = match wr.op {
            SendOp::RdmaWrite(r) => (r, None),
            SendOp::RdmaWriteWithImm(r, i) => (r, Some(i)),
            SendOp::RdmaRead(r) => {
                let keys = read_keys(&peer.keys);
                if !granted(&keys, r.rkey, r.addr, total, Access::REMOTE_READ) {
                    drop(keys);
                    peer.enter_err();
                    return Err(WcStatus::RemAccessErr);
                }
                let mut at = r.addr;
                for s in wr.sg_list {
                    // SAFETY: the peer's range is registered for REMOTE_READ (checked above,
                    // under its key table, so not deregistered meanwhile); the SGE is
                    // registered for LOCAL_WRITE.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            at as *const u8,
                            s.addr as *mut u8,
                            s.length as usize,
                        )
                    };
                    at += u64::from(s.length);
                }
                return Ok(());
            }
            SendOp::Send | SendOp::SendWithImm(_) => return Err(WcStatus::LocQpOpErr),
        };
        {
            let keys = read_keys(&peer.keys);
            if total > 0 && !granted(&keys, remote.rkey, remote.addr, total, Access::REMOTE_WRITE) {
                drop(keys);
                peer.enter_err();
                return Err(WcStatus::RemAccessErr);
            }
            let mut at = remote.addr;
            for s in wr.sg_list {
                // SAFETY: the destination is registered for REMOTE_WRITE (checked above, under
                // the peer's key table); the source is readable (the caller's contract).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        s.addr as *const u8,
                        at as *mut u8,
                        s.length as usize,
                    )
                };
                at += u64::from(s.length);
            }
        }
        if let Some(imm) = imm {
            let Some(rwr) = lock(&peer.rq).pop_front() else {
                return Err(WcStatus::RnrRetryExcErr);
            };
            let mut wc = peer.wc(
                rwr,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                total as u32,
            );
            wc.imm_data = Some(imm);
            cq_of(&peer.recv_cq).push(wc);
        }
        Ok(())
    }
}

struct LoopbackQp {
    caps: QpCaps,
    qp: Arc<QpShared>,
}

impl Drop for LoopbackQp {
    fn drop(&mut self) {
        lock(qps()).remove(&self.qp.qpn);
    }
}

impl Qp for LoopbackQp {
    fn qpn(&self) -> u32 {
        self.qp.qpn
    }

    fn state(&self) -> QpState {
        self.qp.state()
    }

    fn caps(&self) -> QpCaps {
        self.caps
    }

    fn endpoint(&self, psn: u32) -> Result<Endpoint> {
        Ok(Endpoint {
            provider: ProviderKind::Loopback,
            qpn: self.qp.qpn,
            psn: psn & 0xff_ffff,
            lid: 0,
            gid: Gid::default(),
            mtu: Mtu::M4096,
            extra: Vec::new(),
        })
    }

    fn modify(&self, attr: &ModifyQp) -> Result<()> {
        let from = self.qp.state();
        let to = attr.target();
        if !transition_ok(from, to) {
            return Err(Error::InvalidTransition { from, to });
        }
        match attr {
            ModifyQp::Rtr(r) => {
                if r.remote.provider != ProviderKind::Loopback {
                    return Err(Error::Descriptor("endpoint of another provider"));
                }
                let peer = lock(qps())
                    .get(&r.remote.qpn)
                    .cloned()
                    .ok_or(Error::NotFound(format!("loopback QP {}", r.remote.qpn)))?;
                let _ = self.qp.peer.set(peer);
            }
            ModifyQp::Err => {
                self.qp.enter_err();
                return Ok(());
            }
            ModifyQp::Reset => lock(&self.qp.rq).clear(),
            _ => {}
        }
        *lock(&self.qp.state) = to;
        Ok(())
    }

    unsafe fn post_send(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        let state = self.qp.state();
        if send_admission(state) == Admission::Refuse {
            return Err(PostError {
                index: 0,
                error: Error::InvalidState {
                    op: "post_send",
                    state,
                },
            });
        }
        let cq = cq_of(&self.qp.send_cq);
        for wr in wrs {
            let status = if self.qp.state() == QpState::Err {
                WcStatus::WrFlushErr
            } else {
                // SAFETY: the caller's contract (Qp::post_send) covers the SGEs.
                match unsafe { self.qp.execute(wr) } {
                    Ok(()) => WcStatus::Success,
                    Err(st) => st,
                }
            };
            if !status.is_ok() || self.qp.sig_all || wr.flags.contains(SendFlags::SIGNALED) {
                cq.push(
                    self.qp
                        .wc(wr.wr_id, status, wr.op.wc_opcode(), wr.total_len() as u32),
                );
            }
            if !status.is_ok() && status != WcStatus::WrFlushErr {
                // The failed WR's completion first, then the flushed receives.
                self.qp.enter_err();
            }
        }
        Ok(())
    }

    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        let state = self.qp.state();
        match recv_admission(state) {
            Admission::Refuse => Err(PostError {
                index: 0,
                error: Error::InvalidState {
                    op: "post_recv",
                    state,
                },
            }),
            Admission::Flush => {
                let cq = cq_of(&self.qp.recv_cq);
                for wr in wrs {
                    cq.push(
                        self.qp
                            .wc(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0),
                    );
                }
                Ok(())
            }
            Admission::Execute => {
                lock(&self.qp.rq).extend(wrs.iter().map(|w| w.wr_id));
                Ok(())
            }
        }
    }

    fn bind_mw(
        &self,
        _wr_id: u64,
        mw: &dyn Mw,
        mr: &dyn Mr,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32> {
        let mw = mw
            .as_any()
            .downcast_ref::<LoopbackMw>()
            .ok_or(Error::InvalidArgument("window of another provider"))?;
        if !window_fits(mr.addr(), mr.len() as u64, mr.access(), addr, len, access) {
            return Err(Error::InvalidArgument(
                "bind outside the MR or without MW_BIND",
            ));
        }
        let mut keys = write_keys(&self.qp.keys);
        let old = mw.rkey.load(Ordering::Relaxed);
        keys.remove(&old);
        let rkey = super::inc_rkey(old);
        mw.rkey.store(rkey, Ordering::Relaxed);
        keys.insert(rkey, grant(addr, len, access));
        Ok(rkey)
    }

    fn invalidate_mw(&self, _wr_id: u64, rkey: u32) -> Result<()> {
        write_keys(&self.qp.keys).remove(&rkey);
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

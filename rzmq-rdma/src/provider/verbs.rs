//! The verbs themselves: the traits a provider implements (provider, device, PD, MR, MW, CQ,
//! QP) and the attributes they take and return.

use std::any::Any;
use std::os::fd::RawFd;
use std::sync::Arc;

use super::endpoint::{Endpoint, Gid, Mtu, ProviderKind};
use super::error::{Error, PostError, Result};
use super::state::{ModifyQp, QpCaps, QpState};
use super::wr::{Access, RecvWr, SendWr, WorkCompletion};

/// What [`Pd::create_qp`] needs (`struct ibv_qp_init_attr` for an RC QP).
#[derive(Clone)]
pub struct QpInit {
    /// CQ for send completions.
    pub send_cq: Arc<dyn Cq>,
    /// CQ for receive completions.
    pub recv_cq: Arc<dyn Cq>,
    /// Requested capacities (the QP reports the granted ones in [`Qp::caps`]).
    pub caps: QpCaps,
    /// Every send WR generates a completion, whatever its flags (`sq_sig_all`).
    pub sq_sig_all: bool,
}

/// Link layer of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: addressed by LID (GID optional).
    Infiniband,
    /// Ethernet (RoCE): addressed by GID only.
    Ethernet,
    /// The soft provider's stream sockets.
    Soft,
}

/// Port attributes (`struct ibv_port_attr`, the fields rzmq uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttr {
    /// True when the port is ACTIVE.
    pub active: bool,
    /// The port's LID (InfiniBand).
    pub lid: u16,
    /// Active MTU.
    pub active_mtu: Mtu,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// Entries in the GID table.
    pub gid_tbl_len: u32,
}

/// A device in a provider's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (`mlx5_0`, `rxe0`, `soft0`).
    pub name: String,
    /// Provider.
    pub provider: ProviderKind,
}

/// A verbs provider: lists and opens devices.
pub trait Provider: Send + Sync {
    /// Which provider.
    fn kind(&self) -> ProviderKind;
    /// Devices present (an empty list is not an error; [`Provider::open`] then fails with
    /// [`Error::NoDevice`]).
    fn devices(&self) -> Result<Vec<DeviceInfo>>;
    /// Opens `name`, or the provider's configured/default device when `None`.
    fn open(&self, name: Option<&str>) -> Result<Arc<dyn Device>>;
}

/// An open device (`struct ibv_context`) with its selected port and GID index.
pub trait Device: Send + Sync {
    /// Name and provider.
    fn info(&self) -> &DeviceInfo;
    /// The port QPs use by default.
    fn port(&self) -> u8;
    /// The GID index endpoints advertise.
    fn gid_index(&self) -> u32;
    /// `ibv_query_port`.
    fn query_port(&self, port: u8) -> Result<PortAttr>;
    /// `ibv_query_gid`.
    fn query_gid(&self, port: u8, index: u32) -> Result<Gid>;
    /// `ibv_alloc_pd`.
    fn alloc_pd(&self) -> Result<Arc<dyn Pd>>;
    /// `ibv_create_comp_channel` + `ibv_create_cq` with at least `cqe` entries.
    fn create_cq(&self, cqe: u32) -> Result<Arc<dyn Cq>>;
    /// Downcasting for provider-specific calls (soft fault injection).
    fn as_any(&self) -> &dyn Any;
}

/// A protection domain (`struct ibv_pd`).
pub trait Pd: Send + Sync {
    /// `ibv_reg_mr`: registers `len` bytes at `addr` with `access`; deregistered when the last
    /// handle is dropped.
    ///
    /// # Safety
    /// `addr..addr+len` must stay valid (mapped, and not freed) until the returned MR is dropped;
    /// with `LOCAL_WRITE`/`REMOTE_WRITE` the NIC writes it at any time while WRs or peers
    /// reference it, so the caller must not hold Rust references to those bytes across such
    /// writes.
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: Access) -> Result<Arc<dyn Mr>>;
    /// `ibv_create_qp` for an RC QP.
    fn create_qp(&self, init: &QpInit) -> Result<Arc<dyn Qp>>;
    /// `ibv_alloc_mw(pd, IBV_MW_TYPE_2)`: a memory window, unbound (its rkey grants nothing
    /// until [`Qp::bind_mw`]). Devices without memory windows: [`Error::Unsupported`] or the
    /// verbs error (`EOPNOTSUPP`).
    fn alloc_mw(&self) -> Result<Arc<dyn Mw>> {
        Err(Error::Unsupported("memory windows"))
    }
    /// Downcasting for provider-specific calls.
    fn as_any(&self) -> &dyn Any;
}

/// A registered memory region (`struct ibv_mr`).
pub trait Mr: Send + Sync {
    /// Start address.
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True for a zero-length region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Local key (SGEs).
    fn lkey(&self) -> u32;
    /// Remote key (peers' WRITE/READ).
    fn rkey(&self) -> u32;
    /// The access rights it was registered with.
    fn access(&self) -> Access;
    /// Downcasting for provider-specific calls (memory-window binds).
    fn as_any(&self) -> &dyn Any;
}

/// A type-2 memory window (`struct ibv_mw`): remote access to exactly the range it is bound to,
/// through the QP that bound it, until invalidated. Deallocated when dropped.
pub trait Mw: Send + Sync {
    /// The rkey of the current (or last) binding.
    fn rkey(&self) -> u32;
    /// Downcasting for provider-specific calls.
    fn as_any(&self) -> &dyn Any;
}

/// The next rkey of a type-2 memory window (`ibv_inc_rkey`): the low 8 bits (the key the
/// consumer owns) incremented, so that a stale rkey never matches a new binding.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

/// A completion queue with its completion channel (`struct ibv_cq` + `ibv_comp_channel`).
pub trait Cq: Send + Sync {
    /// `ibv_poll_cq`: appends up to `max` completions to `out`, oldest first; returns how many.
    fn poll(&self, max: usize, out: &mut Vec<WorkCompletion>) -> Result<usize>;
    /// `ibv_req_notify_cq`: the completion fd becomes readable at the next new completion (or
    /// the next solicited/error one when `solicited_only`). Completions already queued do not
    /// fire it: poll again after arming.
    fn req_notify(&self, solicited_only: bool) -> Result<()>;
    /// The completion channel's fd (non-blocking; poll/epoll it for readability).
    fn fd(&self) -> RawFd;
    /// `ibv_get_cq_event` + `ibv_ack_cq_events` until none is pending; returns the count (0 when
    /// the fd was not readable).
    fn get_events(&self) -> Result<u32>;
    /// Entries the CQ holds.
    fn capacity(&self) -> u32;
    /// Downcasting for provider-specific calls.
    fn as_any(&self) -> &dyn Any;
}

/// An RC queue pair (`struct ibv_qp`).
pub trait Qp: Send + Sync {
    /// QP number.
    fn qpn(&self) -> u32;
    /// Current state (`ibv_query_qp(IBV_QP_STATE)`; errors the NIC detects show here).
    fn state(&self) -> QpState;
    /// Granted capacities.
    fn caps(&self) -> QpCaps;
    /// This QP's descriptor for the peer, with `psn` (24 bits) as its first send PSN.
    fn endpoint(&self, psn: u32) -> Result<Endpoint>;
    /// `ibv_modify_qp` for one transition.
    fn modify(&self, attr: &ModifyQp) -> Result<()>;
    /// `ibv_post_send`. Beyond `max_send_wr` outstanding: [`Error::QueueFull`]; inline beyond
    /// `max_inline_data`: [`Error::InlineTooLarge`]; before RTS: [`Error::InvalidState`]. In ERR
    /// the WRs are accepted and complete with `WR_FLUSH_ERR`.
    ///
    /// # Safety
    /// For WRs with [`SendFlags::INLINE`](super::SendFlags::INLINE) every SGE range must be readable memory for the
    /// duration of the call (it is copied, lkeys are not checked, as in ibverbs). Other SGEs are
    /// checked against registered MRs by the NIC (a bad one completes with `LOC_PROT_ERR`); their
    /// memory must not be reused until the WR completes.
    unsafe fn post_send(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError>;
    /// `ibv_post_recv`. Allowed from INIT on; in ERR the WRs complete with `WR_FLUSH_ERR`.
    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError>;
    /// Posts an unsignaled `IBV_WR_BIND_MW`: `mw` grants `access` (remote rights only) to
    /// `len` bytes at `addr` of `mr`, which must carry [`Access::MW_BIND`], through this QP;
    /// returns the new rkey ([`inc_rkey`] of the old one; the old one stops working). Only in
    /// RTS. WRs posted after it see the binding.
    fn bind_mw(
        &self,
        wr_id: u64,
        mw: &dyn Mw,
        mr: &dyn Mr,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32> {
        let _ = (wr_id, mw, mr, addr, len, access);
        Err(Error::Unsupported("memory windows"))
    }
    /// Posts an unsignaled `IBV_WR_LOCAL_INV` of a memory window's `rkey`: from then on the
    /// peer's accesses with it fail (`REM_ACCESS_ERR`).
    fn invalidate_mw(&self, wr_id: u64, rkey: u32) -> Result<()> {
        let _ = (wr_id, rkey);
        Err(Error::Unsupported("memory windows"))
    }
    /// Downcasting for provider-specific calls (soft fault injection).
    fn as_any(&self) -> &dyn Any;
}

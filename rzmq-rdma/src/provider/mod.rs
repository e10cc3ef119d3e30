//! The verbs surface rzmq uses, as a trait family, and the types that cross it.
//!
//! A provider opens [`Device`]s; a device allocates protection domains ([`Pd`]) and completion
//! queues ([`Cq`]); a PD registers memory ([`Mr`]) and creates RC queue pairs ([`Qp`]). The names,
//! numbers and rules are those of libibverbs (`ibv_*`), so [`ibverbs`] is a 1:1 mapping and
//! [`soft`] a userspace NIC that behaves like one:
//! - MR access flags `LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ` (values as `IBV_ACCESS_*`);
//! - a CQ has a completion fd (poll/epoll-able, readable after [`Cq::req_notify`] armed it and a
//!   new completion arrived; [`Cq::get_events`] consumes and acknowledges the events);
//! - an RC QP goes RESET -> INIT -> RTR -> RTS through [`Qp::modify`]; any state -> ERR or RESET;
//! - [`Qp::post_send`] takes SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM and RDMA_READ,
//!   signaled or not, inline or not; [`Qp::post_recv`] posts receives; [`Cq::poll`] returns work
//!   completions whose [`WcStatus`] and [`WcOpcode`] carry libibverbs' numbers.
//!
//! Immediate data is a host-order `u32` here; the ibverbs mapping converts to network order.
//!
//! Handles are reference counted (`Arc<dyn ...>`); each child keeps its parent alive, so the
//! destruction order verbs demand (QP before CQ, MR before PD, all before the device) holds by
//! construction. This module owns no I/O; it may not know about ZMTP, sockets or rings, nor
//! about the providers below it (choosing and building one from the options is `open`'s job).

pub mod loopback;
pub(crate) mod open;
pub mod soft;

#[cfg(feature = "ibverbs")]
pub mod ibverbs;

use std::any::Any;
use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::wire::{self, Layout, Reader, WireError, Writer};

/// A provider-level result.
pub type Result<T> = std::result::Result<T, Error>;

/// Which implementation of the verbs surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// The userspace RC NIC ([`soft`]).
    Soft,
    /// libibverbs through rdma-mummy-sys (`ibverbs` feature).
    Ibverbs,
    /// QPs of one process whose wire costs nothing ([`loopback`], for measuring the engine).
    Loopback,
}

impl ProviderKind {
    /// The name used in `RZMQ_RDMA_PROVIDER` and in logs.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Soft => "soft",
            ProviderKind::Ibverbs => "ibverbs",
            ProviderKind::Loopback => "loopback",
        }
    }

    fn wire_id(self) -> u8 {
        match self {
            ProviderKind::Soft => 1,
            ProviderKind::Ibverbs => 2,
            ProviderKind::Loopback => 3,
        }
    }

    fn from_wire_id(id: u8) -> Option<ProviderKind> {
        match id {
            1 => Some(ProviderKind::Soft),
            2 => Some(ProviderKind::Ibverbs),
            3 => Some(ProviderKind::Loopback),
            _ => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the verbs surface. Each maps to the errno libibverbs would report ([`Error::errno`]).
#[derive(Debug)]
pub enum Error {
    /// No usable RDMA device (libibverbs missing, no device, or none matching the selection).
    NoDevice(String),
    /// A named device, port or GID index does not exist (ENODEV / EINVAL).
    NotFound(String),
    /// The provider does not support the operation (EOPNOTSUPP).
    Unsupported(&'static str),
    /// An argument was out of range or inconsistent (EINVAL).
    InvalidArgument(&'static str),
    /// A work queue is full: posting beyond `max_send_wr`/`max_recv_wr` (ENOMEM, as ibverbs).
    QueueFull {
        /// The queue that is full.
        queue: WorkQueue,
        /// Its depth.
        depth: u32,
    },
    /// Inline data larger than the QP's `max_inline_data` (EINVAL).
    InlineTooLarge {
        /// The WR's total length.
        len: usize,
        /// The QP's inline limit.
        max: u32,
    },
    /// More scatter/gather entries than the QP was created for (EINVAL).
    TooManySge {
        /// The WR's entry count.
        n: usize,
        /// The QP's limit.
        max: u32,
    },
    /// The QP's state does not allow the operation (EINVAL), e.g. post_send before RTS.
    InvalidState {
        /// What was attempted.
        op: &'static str,
        /// The QP's state.
        state: QpState,
    },
    /// A QP state transition the verbs state machine does not allow (EINVAL).
    InvalidTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// The CQ overflowed; completions were lost (ibverbs reports IBV_EVENT_CQ_ERR).
    CqOverrun,
    /// A serialised endpoint descriptor was malformed or from another provider.
    Descriptor(&'static str),
    /// Connect information from a peer that does not decode ([`crate::wire`]).
    Wire(WireError),
    /// A verbs call failed with an errno.
    Verbs {
        /// The libibverbs function.
        call: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// An operating-system error (sockets, eventfd, threads).
    Io(io::Error),
}

/// Which work queue of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkQueue {
    /// The send queue.
    Send,
    /// The receive queue.
    Recv,
}

impl Error {
    /// The errno libibverbs reports for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NoDevice(_) => libc::ENODEV,
            Error::NotFound(_) => libc::ENODEV,
            Error::Unsupported(_) => libc::EOPNOTSUPP,
            Error::InvalidArgument(_)
            | Error::InlineTooLarge { .. }
            | Error::TooManySge { .. }
            | Error::InvalidState { .. }
            | Error::InvalidTransition { .. }
            | Error::Descriptor(_)
            | Error::Wire(_) => libc::EINVAL,
            Error::QueueFull { .. } => libc::ENOMEM,
            Error::CqOverrun => libc::EOVERFLOW,
            Error::Verbs { errno, .. } => *errno,
            Error::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDevice(why) => write!(f, "no RDMA device: {why}"),
            Error::NotFound(what) => write!(f, "not found: {what}"),
            Error::Unsupported(what) => write!(f, "not supported: {what}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::QueueFull { queue, depth } => {
                write!(f, "{queue:?} queue full (depth {depth})")
            }
            Error::InlineTooLarge { len, max } => {
                write!(
                    f,
                    "inline data of {len} bytes exceeds max_inline_data {max}"
                )
            }
            Error::TooManySge { n, max } => write!(f, "{n} SGEs exceed max_sge {max}"),
            Error::InvalidState { op, state } => {
                write!(f, "{op} not allowed in QP state {state:?}")
            }
            Error::InvalidTransition { from, to } => {
                write!(f, "QP transition {from:?} -> {to:?} not allowed")
            }
            Error::CqOverrun => f.write_str("completion queue overrun"),
            Error::Descriptor(why) => write!(f, "bad endpoint descriptor: {why}"),
            Error::Wire(e) => write!(f, "bad endpoint descriptor: {e}"),
            Error::Verbs { call, errno } => {
                write!(f, "{call} failed: {}", io::Error::from_raw_os_error(*errno))
            }
            Error::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Error {
        Error::Wire(e)
    }
}

/// A post that failed part-way: WRs before `index` were posted, the rest were not (ibverbs'
/// `bad_wr`).
#[derive(Debug)]
pub struct PostError {
    /// Index of the first WR not posted.
    pub index: usize,
    /// Why.
    pub error: Error,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "post failed at WR {}: {}", self.index, self.error)
    }
}

impl std::error::Error for PostError {}

/// Memory-region access rights (`IBV_ACCESS_*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

impl Access {
    /// No remote access, no local write (send-only buffers).
    pub const NONE: Access = Access(0);
    /// The local NIC may write (receives, READ destinations). Required with `REMOTE_WRITE`.
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE into the region.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ the region.
    pub const REMOTE_READ: Access = Access(4);
    /// Memory windows may be bound to the region (`IBV_ACCESS_MW_BIND`).
    pub const MW_BIND: Access = Access(16);
    /// On-demand paging (no pinning; the NIC follows page-table changes). Not all devices.
    pub const ON_DEMAND: Access = Access(64);

    /// True when every bit of `other` is set.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// QP states (`enum ibv_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum QpState {
    /// Just created or reset.
    Reset = 0,
    /// Initialised: receives may be posted.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained (unused by rzmq).
    Sqd = 4,
    /// Send queue error (UC/UD only).
    Sqe = 5,
    /// Error: every outstanding WR is flushed.
    Err = 6,
}

impl QpState {
    /// From the ibverbs number.
    pub fn from_raw(v: u32) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }
}

/// Work-completion status (`enum ibv_wc_status`, same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcStatus {
    /// The WR completed.
    Success = 0,
    /// Local length error (a receive buffer too small for the incoming SEND).
    LocLenErr = 1,
    /// Local QP operation error.
    LocQpOpErr = 2,
    /// Local EE context operation error.
    LocEecOpErr = 3,
    /// Local protection error (bad lkey, missing LOCAL_WRITE, out of bounds).
    LocProtErr = 4,
    /// Flushed: the QP went to ERR before this WR was processed.
    WrFlushErr = 5,
    /// Memory-window bind error.
    MwBindErr = 6,
    /// Bad response.
    BadRespErr = 7,
    /// Local access error.
    LocAccessErr = 8,
    /// Remote invalid request (e.g. SEND longer than the posted receive).
    RemInvReqErr = 9,
    /// Remote access error (bad rkey, bounds, or access rights at the responder).
    RemAccessErr = 10,
    /// Remote operation error (the responder failed to complete the operation).
    RemOpErr = 11,
    /// Transport retry counter exceeded (no ACK: wire cut, peer gone).
    RetryExcErr = 12,
    /// RNR retry counter exceeded (no receive posted at the responder).
    RnrRetryExcErr = 13,
    /// Local RDD violation.
    LocRddViolErr = 14,
    /// Remote invalid RD request.
    RemInvRdReqErr = 15,
    /// Remote aborted.
    RemAbortErr = 16,
    /// Invalid EE context number.
    InvEecnErr = 17,
    /// Invalid EE context state.
    InvEecStateErr = 18,
    /// Fatal error.
    FatalErr = 19,
    /// Response timeout.
    RespTimeoutErr = 20,
    /// General error.
    GeneralErr = 21,
}

impl WcStatus {
    /// From the ibverbs number (unknown values become [`WcStatus::GeneralErr`]).
    pub fn from_raw(v: u32) -> WcStatus {
        use WcStatus::*;
        match v {
            0 => Success,
            1 => LocLenErr,
            2 => LocQpOpErr,
            3 => LocEecOpErr,
            4 => LocProtErr,
            5 => WrFlushErr,
            6 => MwBindErr,
            7 => BadRespErr,
            8 => LocAccessErr,
            9 => RemInvReqErr,
            10 => RemAccessErr,
            11 => RemOpErr,
            12 => RetryExcErr,
            13 => RnrRetryExcErr,
            14 => LocRddViolErr,
            15 => RemInvRdReqErr,
            16 => RemAbortErr,
            17 => InvEecnErr,
            18 => InvEecStateErr,
            19 => FatalErr,
            20 => RespTimeoutErr,
            _ => GeneralErr,
        }
    }

    /// True for [`WcStatus::Success`].
    pub fn is_ok(self) -> bool {
        self == WcStatus::Success
    }
}

/// Work-completion opcode (`enum ibv_wc_opcode`, same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// A SEND or SEND_WITH_IMM completed at the requester.
    Send = 0,
    /// An RDMA WRITE (with or without immediate) completed at the requester.
    RdmaWrite = 1,
    /// An RDMA READ completed at the requester.
    RdmaRead = 2,
    /// Atomic compare-and-swap.
    CompSwap = 3,
    /// Atomic fetch-and-add.
    FetchAdd = 4,
    /// Memory-window bind.
    BindMw = 5,
    /// Local invalidate.
    LocalInv = 6,
    /// A receive consumed by a SEND.
    Recv = 128,
    /// A receive consumed by an RDMA WRITE_WITH_IMM.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// From the ibverbs number.
    pub fn from_raw(v: u32) -> Option<WcOpcode> {
        use WcOpcode::*;
        Some(match v {
            0 => Send,
            1 => RdmaWrite,
            2 => RdmaRead,
            3 => CompSwap,
            4 => FetchAdd,
            5 => BindMw,
            6 => LocalInv,
            128 => Recv,
            129 => RecvRdmaWithImm,
            _ => return None,
        })
    }
}

/// One work completion (`struct ibv_wc`, the fields rzmq uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The WR's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed (set on errors too by `soft`; undefined on errors for real hardware).
    pub opcode: WcOpcode,
    /// Bytes received (receives), read (READ) or sent.
    pub byte_len: u32,
    /// Immediate data (host order) for SEND_WITH_IMM / WRITE_WITH_IMM receives.
    pub imm_data: Option<u32>,
    /// The local QP number.
    pub qp_num: u32,
    /// Vendor error syndrome (0 when none).
    pub vendor_err: u32,
}

/// A scatter/gather element (`struct ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Start address (in this process).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The local key of the MR covering the range (ignored for inline sends).
    pub lkey: u32,
}

/// A remote memory location: an address in the peer and the rkey of its MR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Address in the peer's address space.
    pub addr: u64,
    /// The peer MR's remote key.
    pub rkey: u32,
}

/// The operation of a send WR (`enum ibv_wr_opcode`, the RC subset rzmq uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: consumes a receive at the peer.
    Send,
    /// SEND_WITH_IMM: SEND plus 32 bits of immediate data in the peer's completion.
    SendWithImm(u32),
    /// RDMA WRITE into the peer's memory; invisible to the peer's CQ.
    RdmaWrite(RemoteAddr),
    /// RDMA WRITE that also consumes a peer receive carrying the immediate.
    RdmaWriteWithImm(RemoteAddr, u32),
    /// RDMA READ from the peer's memory into the local SGEs.
    RdmaRead(RemoteAddr),
}

impl SendOp {
    /// The ibverbs opcode number (`IBV_WR_*`).
    pub fn raw(&self) -> u32 {
        match self {
            SendOp::RdmaWrite(_) => 0,
            SendOp::RdmaWriteWithImm(..) => 1,
            SendOp::Send => 2,
            SendOp::SendWithImm(_) => 3,
            SendOp::RdmaRead(_) => 4,
        }
    }

    /// The completion opcode at the requester.
    pub fn wc_opcode(&self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
            SendOp::RdmaWrite(_) | SendOp::RdmaWriteWithImm(..) => WcOpcode::RdmaWrite,
            SendOp::RdmaRead(_) => WcOpcode::RdmaRead,
        }
    }
}

/// Send flags (`IBV_SEND_*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendFlags(pub u32);

impl SendFlags {
    /// No flags: unsignaled, not inline.
    pub const NONE: SendFlags = SendFlags(0);
    /// Wait for prior RDMA READs to complete before this WR (`IBV_SEND_FENCE`).
    pub const FENCE: SendFlags = SendFlags(1);
    /// Generate a completion on success (`IBV_SEND_SIGNALED`). Errors always complete.
    pub const SIGNALED: SendFlags = SendFlags(2);
    /// Wake a peer CQ armed with `solicited_only` (`IBV_SEND_SOLICITED`).
    pub const SOLICITED: SendFlags = SendFlags(4);
    /// Copy the data into the WR at post time; lkeys are ignored (`IBV_SEND_INLINE`).
    pub const INLINE: SendFlags = SendFlags(8);

    /// True when every bit of `other` is set.
    pub fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, rhs: SendFlags) -> SendFlags {
        SendFlags(self.0 | rhs.0)
    }
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Local data (source for SEND/WRITE, destination for READ).
    pub sg_list: &'a [Sge],
    /// The operation.
    pub op: SendOp,
    /// Signaled, inline, solicited, fence.
    pub flags: SendFlags,
}

impl SendWr<'_> {
    /// Total bytes of the SGE list.
    pub fn total_len(&self) -> usize {
        self.sg_list.iter().map(|s| s.length as usize).sum()
    }
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where an incoming SEND lands (may be empty for WRITE_WITH_IMM-only traffic).
    pub sg_list: &'a [Sge],
}

/// QP capacities (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Outstanding send WRs.
    pub max_send_wr: u32,
    /// Outstanding receive WRs.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send WR.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: 256,
            max_recv_wr: 256,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
        }
    }
}

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

/// Path MTU (`enum ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes.
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// From the ibverbs number.
    pub fn from_raw(v: u32) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::M256,
            2 => Mtu::M512,
            3 => Mtu::M1024,
            4 => Mtu::M2048,
            5 => Mtu::M4096,
            _ => return None,
        })
    }

    /// Bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
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

/// A 128-bit GID (`union ibv_gid`), raw bytes in network order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// True for the all-zero GID (an unset table entry).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

/// A device in a provider's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (`mlx5_0`, `rxe0`, `soft0`).
    pub name: String,
    /// Provider.
    pub provider: ProviderKind,
}

/// Attributes for [`Qp::modify`]; each variant is one legal transition with the attributes (and,
/// for ibverbs, the attribute mask) it requires.
#[derive(Debug, Clone)]
pub enum ModifyQp {
    /// RESET -> INIT.
    Init(InitAttr),
    /// INIT -> RTR: the remote QP becomes known.
    Rtr(RtrAttr),
    /// RTR -> RTS: the send side's timers and retry counts.
    Rts(RtsAttr),
    /// Any state -> ERR: every outstanding WR is flushed.
    Err,
    /// Any state -> RESET: queues are emptied without completions.
    Reset,
}

impl ModifyQp {
    /// The target state.
    pub fn target(&self) -> QpState {
        match self {
            ModifyQp::Init(_) => QpState::Init,
            ModifyQp::Rtr(_) => QpState::Rtr,
            ModifyQp::Rts(_) => QpState::Rts,
            ModifyQp::Err => QpState::Err,
            ModifyQp::Reset => QpState::Reset,
        }
    }
}

/// RESET -> INIT attributes (`IBV_QP_STATE | PKEY_INDEX | PORT | ACCESS_FLAGS`).
#[derive(Debug, Clone, Copy)]
pub struct InitAttr {
    /// Physical port (1-based).
    pub port: u8,
    /// P_Key index.
    pub pkey_index: u16,
    /// Remote operations the QP accepts (REMOTE_WRITE, REMOTE_READ).
    pub access: Access,
}

impl InitAttr {
    /// Port `port`, pkey 0, accepting remote WRITE and READ.
    pub fn new(port: u8) -> InitAttr {
        InitAttr {
            port,
            pkey_index: 0,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        }
    }
}

/// INIT -> RTR attributes (`IBV_QP_STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN |
/// MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER`).
#[derive(Debug, Clone)]
pub struct RtrAttr {
    /// The peer QP (its qpn, psn, gid/lid and provider connect info).
    pub remote: Endpoint,
    /// Path MTU (the smaller of both ports' active MTUs).
    pub path_mtu: Mtu,
    /// Incoming RDMA READs outstanding at once.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code sent to the peer (IB encoding 0..31; 12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Local GID index for the GRH (RoCE, or IB across subnets).
    pub sgid_index: u8,
    /// Use a GRH (always for RoCE).
    pub is_global: bool,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Local port.
    pub port: u8,
}

impl RtrAttr {
    /// Defaults for `remote`: MTU 1024, 16 reads, RNR timer 12, GRH when the remote GID is set.
    pub fn new(remote: Endpoint) -> RtrAttr {
        let is_global = !remote.gid.is_zero();
        RtrAttr {
            path_mtu: remote.mtu,
            remote,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
            sgid_index: 0,
            is_global,
            hop_limit: 64,
            traffic_class: 0,
            sl: 0,
            port: 1,
        }
    }
}

/// RTR -> RTS attributes (`IBV_QP_STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY |
/// MAX_QP_RD_ATOMIC`).
#[derive(Debug, Clone, Copy)]
pub struct RtsAttr {
    /// Our first PSN (the one advertised in our endpoint).
    pub sq_psn: u32,
    /// Local ACK timeout code: 4.096 us * 2^timeout (0 = infinite).
    pub timeout: u8,
    /// Transport retries before RETRY_EXC_ERR (0..7).
    pub retry_cnt: u8,
    /// RNR retries before RNR_RETRY_EXC_ERR (0..6; 7 = infinite).
    pub rnr_retry: u8,
    /// Outgoing RDMA READs outstanding at once.
    pub max_rd_atomic: u8,
}

impl RtsAttr {
    /// Defaults: timeout 14 (~67 ms), 7 retries, infinite RNR retries, 16 reads.
    pub fn new(sq_psn: u32) -> RtsAttr {
        RtsAttr {
            sq_psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16,
        }
    }
}

/// What one end of an RC connection tells the other: QP number, first PSN, addressing, and the
/// provider's connect information (soft: device id and wire address). Serialised with
/// [`Endpoint::to_bytes`] for the ZMTP/TCP control channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Provider that created the QP (a soft QP cannot talk to a hardware one).
    pub provider: ProviderKind,
    /// QP number.
    pub qpn: u32,
    /// First PSN the QP will send (24 bits).
    pub psn: u32,
    /// LID (InfiniBand; 0 on RoCE and soft).
    pub lid: u16,
    /// GID (RoCE, global IB; zero on soft).
    pub gid: Gid,
    /// The port's active MTU.
    pub mtu: Mtu,
    /// Provider-specific connect information.
    pub extra: Vec<u8>,
}

/// Bytes of an endpoint before its provider part.
const EP_FIXED: usize = 1 + 4 + 4 + 2 + 16 + 1 + 2;

impl Layout for Endpoint {
    const NAME: &'static str = "endpoint";

    fn encoded_len(&self) -> usize {
        EP_FIXED + self.extra.len().min(usize::from(u16::MAX))
    }

    /// provider, qpn, psn, lid, gid, mtu, then the provider's part after its `u16` length.
    fn encode(&self, w: &mut Writer<'_>) {
        w.u8(self.provider.wire_id());
        w.u32(self.qpn);
        w.u32(self.psn);
        w.u16(self.lid);
        w.put(&self.gid.0);
        w.u8(self.mtu as u32 as u8);
        w.bytes16(&self.extra);
    }

    fn decode(r: &mut Reader<'_>) -> std::result::Result<Endpoint, WireError> {
        let provider = ProviderKind::from_wire_id(r.u8()?).ok_or(r.invalid("provider"))?;
        let qpn = r.u32()?;
        let psn = r.u32()?;
        if psn > 0xFF_FFFF || qpn > 0xFF_FFFF {
            return Err(r.invalid("qpn/psn wider than 24 bits"));
        }
        let lid = r.u16()?;
        let gid = Gid(r.array()?);
        let mtu = Mtu::from_raw(u32::from(r.u8()?)).ok_or(r.invalid("mtu"))?;
        let extra = r.bytes16()?.to_vec();
        Ok(Endpoint {
            provider,
            qpn,
            psn,
            lid,
            gid,
            mtu,
            extra,
        })
    }
}

impl Endpoint {
    /// The endpoint's bytes alone ([`crate::wire`]; inside the upgrade blob it follows the
    /// blob's header and fields).
    pub fn to_bytes(&self) -> Vec<u8> {
        wire::to_vec(self)
    }

    /// Parses [`Endpoint::to_bytes`]' output, all of it; never panics on hostile input.
    pub fn from_bytes(b: &[u8]) -> std::result::Result<Endpoint, WireError> {
        wire::from_bytes(b)
    }
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
    /// For WRs with [`SendFlags::INLINE`] every SGE range must be readable memory for the
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn endpoint_round_trip() {
        let ep = Endpoint {
            provider: ProviderKind::Soft,
            qpn: 0x12345,
            psn: 0xabcdef,
            lid: 7,
            gid: Gid([3; 16]),
            mtu: Mtu::M4096,
            extra: b"tcp:127.0.0.1:5555".to_vec(),
        };
        let b = ep.to_bytes();
        assert_eq!(Endpoint::from_bytes(&b).unwrap(), ep);
        assert!(matches!(
            Endpoint::from_bytes(&b[..b.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(matches!(
            Endpoint::from_bytes(&bad),
            Err(WireError::Invalid {
                field: "provider",
                ..
            })
        ));
        // Little-endian, as every layout of the wire: qpn 0x12345 after the provider byte.
        assert_eq!(&b[1..5], &[0x45, 0x23, 0x01, 0x00]);
    }

    #[test]
    fn errnos_match_ibverbs() {
        let full = Error::QueueFull {
            queue: WorkQueue::Send,
            depth: 4,
        };
        assert_eq!(full.errno(), libc::ENOMEM);
        assert_eq!(
            Error::InlineTooLarge { len: 1, max: 0 }.errno(),
            libc::EINVAL
        );
        assert_eq!(WcStatus::from_raw(10), WcStatus::RemAccessErr);
        assert_eq!(WcStatus::from_raw(13), WcStatus::RnrRetryExcErr);
        assert_eq!(WcStatus::WrFlushErr as u32, 5);
        assert_eq!(WcOpcode::from_raw(129), Some(WcOpcode::RecvRdmaWithImm));
        assert_eq!(Mtu::M1024.bytes(), 1024);
    }

    /// Any endpoint the wire can carry (24-bit QPN and PSN, `extra` of up to 80 bytes).
    pub(crate) fn endpoint() -> impl Strategy<Value = Endpoint> {
        (
            prop_oneof![
                Just(ProviderKind::Soft),
                Just(ProviderKind::Ibverbs),
                Just(ProviderKind::Loopback)
            ],
            0u32..=0xff_ffff,
            0u32..=0xff_ffff,
            any::<u16>(),
            any::<[u8; 16]>(),
            1u32..=5,
            proptest::collection::vec(any::<u8>(), 0..80),
        )
            .prop_map(|(provider, qpn, psn, lid, gid, mtu, extra)| Endpoint {
                provider,
                qpn,
                psn,
                lid,
                gid: Gid(gid),
                mtu: Mtu::from_raw(mtu).unwrap(),
                extra,
            })
    }

    proptest! {
        #[test]
        fn endpoint_round_trips(ep in endpoint()) {
            prop_assert_eq!(Endpoint::from_bytes(&ep.to_bytes()), Ok(ep));
        }

        #[test]
        fn endpoint_parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            // Whatever parses is exactly the endpoint its bytes encode.
            if let Ok(ep) = Endpoint::from_bytes(&b) {
                prop_assert_eq!(ep.to_bytes(), b);
            }
        }

        #[test]
        fn damaged_endpoints_never_panic(ep in endpoint(), at in any::<usize>(), byte: u8,
                                         cut in any::<usize>()) {
            let mut b = ep.to_bytes();
            let i = at % b.len();
            b[i] = byte;
            b.truncate(b.len() - cut % 4);
            if let Ok(e) = Endpoint::from_bytes(&b) {
                prop_assert_eq!(e.to_bytes(), b);
            }
        }
    }
}

//! Work requests and their completions (`struct ibv_send_wr`, `ibv_recv_wr`, `ibv_wc`), with the
//! flags they carry: send flags and memory access rights.

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

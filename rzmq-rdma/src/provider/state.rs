//! The QP state machine: states, capacities, and each legal transition with the attributes it
//! requires ([`ModifyQp`]).

use super::endpoint::{Endpoint, Mtu};
use super::wr::Access;

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

/// Attributes for [`Qp::modify`](super::Qp::modify); each variant is one legal transition with the attributes (and,
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

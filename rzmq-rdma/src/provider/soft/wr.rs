//! Work requests as the NIC holds them in a QP's queues: a send WR with its PSN, a posted
//! receive.

use crate::provider::*;

pub(super) struct SqEntry {
    pub(super) wr_id: u64,
    pub(super) op: SendOp,
    pub(super) sges: Vec<Sge>,
    pub(super) inline: Option<Vec<u8>>,
    pub(super) len: u32,
    pub(super) signaled: bool,
    pub(super) solicited: bool,
    /// `IBV_SEND_FENCE`: not transmitted before every earlier READ has completed.
    pub(super) fence: bool,
    pub(super) psn: u32,
    pub(super) done: bool,
}

pub(super) struct RqEntry {
    pub(super) wr_id: u64,
    pub(super) sges: Vec<Sge>,
}

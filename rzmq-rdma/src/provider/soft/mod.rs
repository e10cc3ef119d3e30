//! `soft`: a userspace RC NIC behind the verbs trait, for CI, laptops and fault tests.
//!
//! Each open device runs one progress thread (the "NIC") and listens on a stream socket (TCP, or
//! a Unix socket path). Each connected QP pair gets its own stream, the "wire": when a QP reaches
//! RTR, the end with the smaller (device id, qpn) connects to the other's listener and says which
//! QP it wants; the other end attaches the stream once its QP is at RTR too. Endpoint
//! descriptors carry the device id and listener address, so QPs connect across threads,
//! processes and network namespaces (with a TCP address reachable from the peer).
//!
//! What it reproduces of an RC NIC:
//! - WRITE and READ land in (or are served from) registered memory after the rkey, PD, bounds and
//!   access checks (`REMOTE_WRITE`/`REMOTE_READ` on both the MR and the QP); a failed check NAKs
//!   the requester (`REM_ACCESS_ERR`) and moves the responder QP to ERR as well.
//! - SEND and WRITE_WITH_IMM consume a posted receive; with none posted the responder sends an
//!   RNR NAK and the requester retries after the responder's `min_rnr_timer`, `rnr_retry` times
//!   (7 = forever), then completes with `RNR_RETRY_EXC_ERR`. A receive too small gives
//!   `LOC_LEN_ERR` there and `REM_INV_REQ_ERR` here; a bad receive lkey `LOC_PROT_ERR` /
//!   `REM_OP_ERR`.
//! - Every packet has a PSN; the responder executes in PSN order, NAKs gaps (sequence error),
//!   acknowledges duplicates without re-executing them (READs are re-executed); the requester
//!   goes back N on a NAK or when nothing moved for the ACK timeout (4.096 us * 2^timeout), and
//!   after `retry_cnt` retries completes with `RETRY_EXC_ERR` (cut wire, dead peer). The ACK
//!   timeout runs for requests on the wire only, from their transmission: a request waiting in
//!   the send queue (behind READ responses, a READ limit or a fence) is not timed (with no
//!   working wire every request counts as sent into the void).
//! - READ limits: at most `max_rd_atomic` (RTS) READs outstanding; a READ beyond it, and every WR
//!   behind it, waits in the send queue; `IBV_SEND_FENCE` waits for every earlier READ. A
//!   responder serves at most `max_dest_rd_atomic` (RTR) READs at once and answers one more with
//!   an Invalid Request NAK (`REM_INV_REQ_ERR` at the requester, both QPs to ERR). Both limits
//!   are at most 16 (`EINVAL` above; 0 is taken as 1).
//! - The wire carries requests and responses interleaved (ACKs and NAKs first, then READ
//!   responses and requests in turn), so neither direction starves the other.
//! - Completions in order; successful send WRs complete only when signaled (or `sq_sig_all`);
//!   errors always complete; a QP in ERR flushes every outstanding send and receive WR with
//!   `WR_FLUSH_ERR`, in order, and WRs posted in ERR are flushed at once.
//! - Limits: `max_send_wr` (unsignaled WRs hold their slot until a later signaled completion),
//!   `max_recv_wr`, SGE counts, `max_inline_data` (inline data is copied at post time, lkeys
//!   ignored); bad local keys give `LOC_PROT_ERR`; posting before RTS (send) or in RESET (recv)
//!   is `EINVAL`; illegal state transitions are `EINVAL`.
//! - A CQ's completion fd is an eventfd written when an armed CQ
//!   ([`Cq::req_notify`](crate::provider::Cq::req_notify)) gets a new completion.
//!
//! Simplifications (documented, not hidden): one packet per WR (no MTU segmentation; PSNs count
//! WRs); the header carries a CRC, the payload does not; a memory region deregistered in the
//! middle of a transfer is never touched again (zeros are sent, incoming bytes are dropped);
//! SQ slots of unsignaled WRs are released when the covering signaled completion is generated
//! rather than when it is polled; a READ response's payload counts as progress for the ACK
//! timer while it streams in (a single packet may be far longer than the timeout).
//!
//! Cost model: the progress thread makes one `sendmsg` per batch of packets (headers and
//! payloads gathered from registered memory, no copy above 16 KiB) and receives payloads above
//! 64 KiB straight into their destination. A post rings the doorbell (an eventfd write) only
//! while the thread sleeps, and a consumer that waits for a QP while the thread works on it
//! gets it before the thread's next pass. A TCP wire between two addresses of one host runs the
//! congestion control rzmq's same-host tcp runs (reno: `rzmq_core::tune_same_host`).
//!
//! Fault injection ([`inject`], [`kill`]): cut a QP's wire, stall it for a while, corrupt the
//! next packet header (dropped by the responder, recovered by retransmission), or kill a whole
//! device as a crashed host would die (no more packets, no completions); [`cut_wires_at`] cuts
//! every wire of the devices at one address. Only devices opened with [`SoftConfig::faults`]
//! are reachable (production devices refuse and are listed nowhere).
//!
//! This module owns the soft NIC; it knows nothing about rings, rendezvous or ZMTP.
//!
//! Files, bottom up (each uses only files below it; docs/ARCHITECTURE.md states the order and
//! tests/tests/layers.rs checks it): `os` (lock, random bits), `wire` (packet format), `config`
//! (settings), `keys` (the key table and its checks), `wr` (queued work requests); `link`
//! (sockets, gather/scatter I/O), `completion` (a CQ's ring); `cma` (same-host direct READs);
//! `engine` (a QP's NIC-side queues, PSNs and timers), `endpoint` (descriptors, GID
//! addressing); `nic` (what the NIC shares: key table, QP map, doorbell, counters); `tx` and
//! `rx` (a QP's two directions), the verbs handles `cq` and `mr`; `progress` (the NIC thread),
//! `qp`; `pd`; `device` (provider, device, the devices opened for fault tests); `fault` (fault
//! injection).

mod cma;
mod completion;
mod config;
mod cq;
mod device;
mod endpoint;
mod engine;
mod fault;
mod keys;
mod link;
mod mr;
mod nic;
mod os;
mod pd;
mod progress;
mod qp;
mod rx;
#[cfg(test)]
mod tests;
mod tx;
mod wire;
mod wr;

pub use config::{SoftConfig, WireAddr};
pub use device::SoftDevice;
pub(crate) use device::SoftProvider;
pub use endpoint::endpoint_from_gid;
pub use fault::{cut_wires_at, inject, kill, Fault};

// The verbs rules the loopback provider shares instead of repeating them.
/// The wire's packet header and its decoder, and the endpoint descriptor's soft part, for the
/// fuzz entry points (crate::testing) that feed these parsers directly.
pub(crate) use endpoint::{decode_extra, encode_extra};
pub(crate) use keys::{window_fits, MrEntry};
pub(crate) use os::lock;
pub(crate) use qp::{recv_admission, send_admission, transition_ok, Admission};
pub(crate) use wire::{
    decode_header, judge_hello, Hdr, Hello, HelloTarget, HelloVerdict, HDR_LEN, HELLO_LEN,
};

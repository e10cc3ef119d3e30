//! rzmq's own socket and context options: their numbers (a private range libzmq does not use,
//! `0x525A0000` "RZ" and up), and the process-wide defaults new sockets take.
//!
//! A new socket's rzmq options start from the environment ([`crate::env::core`]), unless the
//! program changed the process default first ([`set_default`]); `zmq_setsockopt` / `socket.set(..)` then
//! change them per socket. Sessions copy the options at bind/connect time, so the per-connection
//! ones (direct sends and receives, the framed lane and its naps, CURVE over RDMA) are plain
//! fields there; the busy-poll budget is read from the socket's own options at each receive.

use std::sync::atomic::{AtomicU64, Ordering};

/// First number of rzmq's socket options.
pub const SOCKOPT_BASE: i32 = 0x525A_0000;
/// `ZMQ_RZMQ_DIRECT` (int 0/1): direct sends on idle connections (default on, `RZMQ_DIRECT`).
pub const DIRECT: i32 = SOCKOPT_BASE + 1;
/// `ZMQ_RZMQ_DIRECT_RX` (int 0/1): direct receives (default on, `RZMQ_DIRECT_RX`); needs
/// [`DIRECT`] on as well.
pub const DIRECT_RX: i32 = SOCKOPT_BASE + 2;
/// `ZMQ_RZMQ_BUSY_POLL_US` (int, 0 to 1000000): microseconds a blocking direct receive polls
/// before it sleeps (default 30, `RZMQ_SPIN_US`; 0: never).
pub const BUSY_POLL_US: i32 = SOCKOPT_BASE + 3;
/// `ZMQ_RZMQ_FRAMED` (int 0/1): the framed lane for short frames (default on, `RZMQ_FRAMED`).
pub const FRAMED: i32 = SOCKOPT_BASE + 4;
/// `ZMQ_RZMQ_FRAMED_NAP_US` (int, 0 to 1000): the I/O thread's wait between writes of a stream
/// (default 20, `RZMQ_FRAMED_NAP_US`; 0: never).
pub const FRAMED_NAP_US: i32 = SOCKOPT_BASE + 5;
/// `ZMQ_RZMQ_FRAMED_NAP_EMPTY` (int 0/1): one more nap when the lane is empty (default on,
/// `RZMQ_FRAMED_NAP_EMPTY`).
pub const FRAMED_NAP_EMPTY: i32 = SOCKOPT_BASE + 6;
/// `ZMQ_RDMA_CURVE_PLAINTEXT` (int 0/1): a CURVE connection may move to RDMA, where its
/// messages travel unencrypted (default off, `RZMQ_RDMA_CURVE_PLAINTEXT`).
pub const RDMA_CURVE_PLAINTEXT: i32 = SOCKOPT_BASE + 7;

/// First number of rzmq's context options.
pub const CTXOPT_BASE: i32 = 0x525A_0100;
/// `ZMQ_RZMQ_HUGE_PAGES` (int 0/1): large frame storage asks for huge pages. Process-wide (the
/// storage pools are); default on, `RZMQ_HUGE_PAGES`.
pub const HUGE_PAGES: i32 = CTXOPT_BASE + 1;
/// `ZMQ_RZMQ_TCP_LOCAL_CC` (`zmq_ctx_set_ext`, text up to 15 bytes; empty, `off` or `default`:
/// the host's): congestion control of same-host tcp connections of sockets created afterwards
/// (default `reno`, `RZMQ_TCP_LOCAL_CC`).
pub const TCP_LOCAL_CC: i32 = CTXOPT_BASE + 2;
/// `ZMQ_RDMA_MODE` (int: 0 off, 1 auto, 2 require): read and set by the C ABI on rzmq-rdma's
/// process-wide upgrader (rzmq-core keeps no RDMA setting).
pub const RDMA_MODE: i32 = CTXOPT_BASE + 3;

/// The largest busy-poll budget, microseconds.
pub const BUSY_POLL_MAX_US: u32 = 1_000_000;
/// The largest framed-lane nap, microseconds.
pub const FRAMED_NAP_MAX_US: u32 = 1000;

/// Not overridden: new sockets take the environment's default.
const UNSET: u64 = u64::MAX;

static OVERRIDES: [AtomicU64; 7] = [const { AtomicU64::new(UNSET) }; 7];

/// Changes the process default of one of rzmq's socket options ([`DIRECT`] ...
/// [`RDMA_CURVE_PLAINTEXT`]) for sockets created from now on; `None` goes back to the
/// environment's. Values are clamped as [`super::Options::set`] would refuse them.
pub fn set_default(opt: i32, value: Option<u32>) {
    if let Some(i) = slot(opt) {
        let v = value.map_or(UNSET, |v| u64::from(clamp(opt, v)));
        OVERRIDES[i].store(v, Ordering::Relaxed);
    }
}

fn slot(opt: i32) -> Option<usize> {
    (DIRECT..=RDMA_CURVE_PLAINTEXT)
        .contains(&opt)
        .then(|| (opt - DIRECT) as usize)
}

fn clamp(opt: i32, v: u32) -> u32 {
    match opt {
        BUSY_POLL_US => v.min(BUSY_POLL_MAX_US),
        FRAMED_NAP_US => v.min(FRAMED_NAP_MAX_US),
        _ => u32::from(v != 0),
    }
}

/// The value a new socket starts with for one of rzmq's socket options.
pub fn default_of(opt: i32) -> u32 {
    let d = crate::env::core();
    let from_env = match opt {
        DIRECT => u32::from(d.direct),
        DIRECT_RX => u32::from(d.direct_rx),
        BUSY_POLL_US => d.busy_poll_us,
        FRAMED => u32::from(d.framed),
        FRAMED_NAP_US => d.framed_nap_us,
        FRAMED_NAP_EMPTY => u32::from(d.framed_nap_empty),
        RDMA_CURVE_PLAINTEXT => u32::from(d.rdma_curve_plaintext),
        _ => 0,
    };
    match slot(opt).map(|i| OVERRIDES[i].load(Ordering::Relaxed)) {
        Some(v) if v != UNSET => v as u32,
        _ => from_env,
    }
}

/// rzmq's per-socket options (fields of [`super::Options`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RzmqOptions {
    /// [`DIRECT`].
    pub direct: bool,
    /// [`DIRECT_RX`].
    pub direct_rx: bool,
    /// [`BUSY_POLL_US`], microseconds.
    pub busy_poll_us: u32,
    /// [`FRAMED`].
    pub framed: bool,
    /// [`FRAMED_NAP_US`], microseconds.
    pub framed_nap_us: u32,
    /// [`FRAMED_NAP_EMPTY`].
    pub framed_nap_empty: bool,
    /// [`RDMA_CURVE_PLAINTEXT`].
    pub rdma_curve_plaintext: bool,
    /// [`TCP_LOCAL_CC`], from the context (`None`: the host's).
    pub tcp_local_cc: Option<Vec<u8>>,
}

impl RzmqOptions {
    /// The process defaults (environment, or what the program set with [`set_default`]).
    pub fn defaults() -> RzmqOptions {
        RzmqOptions {
            direct: default_of(DIRECT) != 0,
            direct_rx: default_of(DIRECT_RX) != 0,
            busy_poll_us: default_of(BUSY_POLL_US),
            framed: default_of(FRAMED) != 0,
            framed_nap_us: default_of(FRAMED_NAP_US),
            framed_nap_empty: default_of(FRAMED_NAP_EMPTY) != 0,
            rdma_curve_plaintext: default_of(RDMA_CURVE_PLAINTEXT) != 0,
            tcp_local_cc: crate::env::core().tcp_local_cc.clone(),
        }
    }

    /// The busy-poll budget.
    pub fn busy_poll(&self) -> std::time::Duration {
        std::time::Duration::from_micros(u64::from(self.busy_poll_us))
    }

    /// The framed lane's nap between writes.
    pub fn framed_nap(&self) -> std::time::Duration {
        std::time::Duration::from_micros(u64::from(self.framed_nap_us))
    }

    /// `zmq_setsockopt` of one of rzmq's options: `None` when `opt` is not one; a value out of
    /// range or not a 4-byte int is `EINVAL`.
    pub fn set(&mut self, opt: i32, value: &[u8]) -> Option<crate::error::Result<()>> {
        slot(opt)?;
        let Ok(bytes) = <[u8; 4]>::try_from(value) else {
            return Some(Err(crate::error::Error::Inval));
        };
        let v = i32::from_ne_bytes(bytes);
        let flag = match v {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        let ok = match opt {
            BUSY_POLL_US => u32::try_from(v)
                .ok()
                .filter(|&v| v <= BUSY_POLL_MAX_US)
                .map(|v| self.busy_poll_us = v),
            FRAMED_NAP_US => u32::try_from(v)
                .ok()
                .filter(|&v| v <= FRAMED_NAP_MAX_US)
                .map(|v| self.framed_nap_us = v),
            _ => flag.map(|b| *self.flag_mut(opt) = b),
        };
        Some(ok.ok_or(crate::error::Error::Inval))
    }

    fn flag_mut(&mut self, opt: i32) -> &mut bool {
        match opt {
            DIRECT => &mut self.direct,
            DIRECT_RX => &mut self.direct_rx,
            FRAMED => &mut self.framed,
            FRAMED_NAP_EMPTY => &mut self.framed_nap_empty,
            _ => &mut self.rdma_curve_plaintext,
        }
    }

    /// `zmq_getsockopt` of one of rzmq's options (`None` when `opt` is not one).
    pub fn get(&self, opt: i32) -> Option<i32> {
        Some(match opt {
            DIRECT => i32::from(self.direct),
            DIRECT_RX => i32::from(self.direct_rx),
            BUSY_POLL_US => self.busy_poll_us as i32,
            FRAMED => i32::from(self.framed),
            FRAMED_NAP_US => self.framed_nap_us as i32,
            FRAMED_NAP_EMPTY => i32::from(self.framed_nap_empty),
            RDMA_CURVE_PLAINTEXT => i32::from(self.rdma_curve_plaintext),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i32) -> [u8; 4] {
        v.to_ne_bytes()
    }

    #[test]
    fn set_and_get_validate_like_libzmq_ints() {
        let mut o = RzmqOptions::defaults();
        assert_eq!(o.set(BUSY_POLL_US, &int(0)), Some(Ok(())));
        assert_eq!(o.get(BUSY_POLL_US), Some(0));
        assert!(o.set(BUSY_POLL_US, &int(1_000_001)).unwrap().is_err());
        assert!(o.set(BUSY_POLL_US, &int(-1)).unwrap().is_err());
        assert!(o.set(FRAMED_NAP_US, &int(1001)).unwrap().is_err());
        assert_eq!(o.set(RDMA_CURVE_PLAINTEXT, &int(1)), Some(Ok(())));
        assert!(o.rdma_curve_plaintext);
        assert!(o.set(DIRECT, &int(2)).unwrap().is_err());
        assert!(o.set(DIRECT, &[1, 0]).unwrap().is_err());
        assert_eq!(o.set(DIRECT, &int(0)), Some(Ok(())));
        assert_eq!(o.get(DIRECT), Some(0));
        assert_eq!(o.set(crate::options::SNDHWM, &int(0)), None);
        assert_eq!(o.get(TCP_LOCAL_CC), None);
    }

    #[test]
    fn numbers_are_outside_libzmq_and_distinct() {
        let all = [
            DIRECT,
            DIRECT_RX,
            BUSY_POLL_US,
            FRAMED,
            FRAMED_NAP_US,
            FRAMED_NAP_EMPTY,
            RDMA_CURVE_PLAINTEXT,
            HUGE_PAGES,
            TCP_LOCAL_CC,
            RDMA_MODE,
        ];
        for (i, a) in all.iter().enumerate() {
            assert!(*a > 0x1000, "{a:#x}");
            assert!(!all[i + 1..].contains(a), "{a:#x}");
        }
    }
}

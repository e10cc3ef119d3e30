//! Fault injection for tests: cut, stall or corrupt a QP's wire, kill a device, cut every wire
//! of the process.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::config::WireAddr;
use super::device::{Shared, SoftDevice};
use super::engine::QpShared;
use super::link::Wire;
use super::lock;
use super::qp::SoftQp;
use crate::provider::*;

/// A fault to inject into a soft QP's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Close the QP's wire in both directions (both ends see it dead; requesters time out).
    CutWire,
    /// Stop transmitting on the QP's wire for this long (packets wait, timers run).
    Delay(Duration),
    /// Flip a bit in the header of the next request packet: the responder drops it (bad CRC) and
    /// the requester recovers by retransmission (or fails after `retry_cnt`).
    CorruptNext,
}

/// Injects `fault` into `qp`, which must be a soft QP.
pub fn inject(qp: &dyn Qp, fault: Fault) -> Result<()> {
    let sq = qp
        .as_any()
        .downcast_ref::<SoftQp>()
        .ok_or(Error::Unsupported("fault injection needs a soft QP"))?;
    {
        let mut g = sq.qp.lock();
        match fault {
            Fault::CutWire => {
                if let Some(w) = g.wire.as_mut() {
                    w.cut();
                } else {
                    g.wire = Some(Wire::dead());
                }
            }
            Fault::Delay(d) => g.hold_until = Some(Instant::now() + d),
            Fault::CorruptNext => g.corrupt_next += 1,
        }
    }
    sq.h.shared.doorbell.signal();
    Ok(())
}

/// Kills a soft device as a crashed host dies: its progress thread stops at once, every wire is
/// closed, nothing more is sent or completed.
pub fn kill(dev: &dyn Device) -> Result<()> {
    let d = dev
        .as_any()
        .downcast_ref::<SoftDevice>()
        .ok_or(Error::Unsupported("kill needs a soft device"))?;
    d.h.shared.killed.store(true, Ordering::SeqCst);
    d.h.shared.doorbell.signal();
    Ok(())
}

/// Every soft device open in this process (for [`cut_all_wires`]).
static LIVE_DEVICES: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

/// Adds a device just opened to [`LIVE_DEVICES`] (forgetting those dropped since).
pub(super) fn register(shared: &Arc<Shared>) {
    let mut live = lock(&LIVE_DEVICES);
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(shared));
}

/// Cuts the wire of every connected QP of every soft device in this process, as if each cable
/// were pulled ([`Fault::CutWire`] on each); returns how many were cut. For tests of the layers
/// above, which do not hold the QPs themselves.
pub fn cut_all_wires() -> usize {
    cut_wires_where(|_| true)
}

/// [`cut_all_wires`] for the devices whose wire address has IP `ip` only (the upgrader opens a
/// device per local address, so this cuts the connections made from one address).
pub fn cut_wires_at(ip: std::net::IpAddr) -> usize {
    cut_wires_where(|a| matches!(a, WireAddr::Tcp(s) if s.ip() == ip))
}

pub(super) fn cut_wires_where(pick: impl Fn(&WireAddr) -> bool) -> usize {
    let devices: Vec<Arc<Shared>> = lock(&LIVE_DEVICES)
        .iter()
        .filter_map(|w| w.upgrade())
        .filter(|d| pick(&d.addr))
        .collect();
    let mut n = 0;
    for d in devices {
        let qps: Vec<Arc<QpShared>> = lock(&d.qps).values().cloned().collect();
        for q in qps {
            let mut g = q.lock();
            if let Some(w) = g.wire.as_mut() {
                w.cut();
                n += 1;
            }
        }
        d.doorbell.signal();
    }
    n
}

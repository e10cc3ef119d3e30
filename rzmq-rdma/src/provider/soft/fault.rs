//! Fault injection for tests: cut, stall or corrupt a QP's wire, kill a device, cut every wire
//! of the devices at one address. Only devices opened for it (`SoftConfig::faults`) are
//! reachable; the others refuse.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::WireAddr;
use super::device::{fault_targets, SoftDevice};
use super::engine::QpShared;
use super::link::Wire;
use super::os::lock;
use super::qp::SoftQp;
use crate::provider::*;

/// What [`inject`] and [`kill`] answer for a device not opened for fault tests.
const NOT_OPTED_IN: Error =
    Error::Unsupported("fault injection needs a device opened with SoftConfig::faults");

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

/// Injects `fault` into `qp`, which must be a soft QP of a device opened with
/// [`SoftConfig::faults`](super::SoftConfig::faults).
pub fn inject(qp: &dyn Qp, fault: Fault) -> Result<()> {
    let sq = qp
        .as_any()
        .downcast_ref::<SoftQp>()
        .ok_or(Error::Unsupported("fault injection needs a soft QP"))?;
    if !sq.h.shared.faults {
        return Err(NOT_OPTED_IN);
    }
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
/// closed, nothing more is sent or completed. The device must have been opened with
/// [`SoftConfig::faults`](super::SoftConfig::faults).
pub fn kill(dev: &dyn Device) -> Result<()> {
    let d = dev
        .as_any()
        .downcast_ref::<SoftDevice>()
        .ok_or(Error::Unsupported("kill needs a soft device"))?;
    if !d.h.shared.faults {
        return Err(NOT_OPTED_IN);
    }
    d.h.shared.killed.store(true, Ordering::SeqCst);
    d.h.shared.doorbell.signal();
    Ok(())
}

/// Cuts the wire of every connected QP of every soft device in this process opened with
/// [`SoftConfig::faults`](super::SoftConfig::faults) whose wire address has IP `ip`, as if each
/// cable were pulled ([`Fault::CutWire`] on each); returns how many were cut. For tests of the
/// layers above, which do not hold the QPs themselves (the upgrader opens a device per local
/// address, so this cuts the connections made from one address).
pub fn cut_wires_at(ip: std::net::IpAddr) -> usize {
    cut_wires_where(|a| matches!(a, WireAddr::Tcp(s) if s.ip() == ip))
}

fn cut_wires_where(pick: impl Fn(&WireAddr) -> bool) -> usize {
    let mut n = 0;
    for d in fault_targets().into_iter().filter(|d| pick(&d.addr)) {
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

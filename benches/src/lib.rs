//! Benchmark support code shared by the criterion benches (`benches/*.rs`) and the memory
//! measurement: a ZMTP session pair made ready in memory, pipes wired as a socket wires them,
//! and the process's resident-set figures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rzmq_core::msg::{Metadata, Msg};
use rzmq_core::testing::pattern::{Pattern, PipeEntry, PipeId, PipeTable};
use rzmq_core::testing::pipe::{pipe, Notify, Reader, Target, Writer};
use rzmq_core::testing::zmtp::{Config, Connection, Event, SocketType};

// ----- ZMTP ---------------------------------------------------------------------------------

/// Moves every queued byte from `src` to `dst` and returns the events `dst` decoded.
pub fn transfer(src: &mut Connection, dst: &mut Connection, now: Instant) -> Vec<Event> {
    let mut bytes = Vec::new();
    src.write_to(&mut bytes).expect("write to a Vec");
    dst.handle_input(&bytes, now).expect("valid ZMTP")
}

/// Two sessions (`a` of type `ta`, `b` of type `tb`) back to back after a completed handshake.
pub fn connected_pair(ta: SocketType, tb: SocketType) -> (Connection, Connection) {
    let now = Instant::now();
    let mut a = Connection::new(Config::new(ta), now);
    let mut b = Connection::new(Config::new(tb), now);
    while a.has_output() || b.has_output() {
        transfer(&mut a, &mut b, now);
        transfer(&mut b, &mut a, now);
    }
    assert!(a.is_ready() && b.is_ready(), "handshake did not complete");
    (a, b)
}

/// A frame of `size` bytes with a recognisable pattern.
pub fn payload(size: usize) -> Msg {
    let mut m = Msg::with_size(size);
    if let Some(d) = m.data_mut() {
        for (i, x) in d.iter_mut().enumerate() {
            *x = i as u8;
        }
    }
    m
}

// ----- pipes and patterns ---------------------------------------------------------------------

/// A [`Notify`] that only counts, standing in for a socket's mailbox or an I/O thread.
#[derive(Default)]
pub struct CountingNotify {
    /// `activate_read` calls.
    pub reads: AtomicU64,
    /// `activate_write` calls.
    pub writes: AtomicU64,
}

impl Notify for CountingNotify {
    fn activate_read(&self, _token: u64) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
    fn activate_write(&self, _token: u64) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
    fn pipe_closed(&self, _token: u64) {}
}

/// The far side of one pipe attached to a pattern: what an engine or a peer socket holds.
pub struct Peer {
    /// Messages towards the pattern.
    pub w: Writer,
    /// Messages the pattern sent.
    pub r: Reader,
}

impl Peer {
    /// Reads and drops everything queued; returns how many frames there were.
    pub fn drain(&mut self) -> usize {
        let mut n = 0;
        while self.r.read().is_some() {
            n += 1;
        }
        n
    }
}

/// Creates both directions of a pipe (HWM `out_hwm` towards the peer, unbounded from it) with
/// notification targets, as the socket does, inserts them into `t` and attaches them to `p`.
pub fn attach_peer(
    p: &mut dyn Pattern,
    t: &mut PipeTable,
    notify: &Arc<CountingNotify>,
    out_hwm: u64,
) -> (PipeId, Peer) {
    let (to_peer_w, to_peer_r) = pipe(out_hwm);
    let (from_peer_w, from_peer_r) = pipe(0);
    let id = t.next_id();
    let target = Target {
        notify: notify.clone(),
        token: id.0,
    };
    from_peer_r.set_target(target.clone());
    to_peer_w.set_target(target);
    t.insert(id, PipeEntry::new(from_peer_r, to_peer_w));
    p.attach(id, t);
    (
        id,
        Peer {
            w: from_peer_w,
            r: to_peer_r,
        },
    )
}

/// Completes `id`'s handshake as the engine and socket do: properties (with an `Identity`
/// when given) on the pipe and in the entry, then `peer_ready`.
pub fn handshake(
    p: &mut dyn Pattern,
    t: &mut PipeTable,
    id: PipeId,
    peer: &Peer,
    identity: Option<&[u8]>,
) {
    let mut md = Metadata::new();
    md.insert("Socket-Type", b"DEALER");
    if let Some(i) = identity {
        md.insert("Identity", i);
    }
    let md = Arc::new(md);
    peer.w.set_peer(md.clone());
    if let Some(e) = t.get_mut(id) {
        e.peer = Some(md);
    }
    p.peer_ready(id, t);
}

// ----- memory -----------------------------------------------------------------------------------

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`, ...) in bytes; 0 where unavailable.
pub fn proc_status_bytes(field: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// Current resident set size in bytes.
pub fn rss() -> u64 {
    proc_status_bytes("VmRSS")
}

/// Peak resident set size in bytes (since start or the last [`reset_peak_rss`]).
pub fn peak_rss() -> u64 {
    proc_status_bytes("VmHWM")
}

/// Resets `VmHWM` to the current RSS (Linux >= 4.0: writing 5 to `/proc/self/clear_refs`);
/// false when the kernel refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Least-squares slope of `ys` over `xs` (units of y per unit of x); 0 for fewer than 2 points.
pub fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len().min(ys.len());
    if n < 2 {
        return 0.0;
    }
    let mx = xs[..n].iter().sum::<f64>() / n as f64;
    let my = ys[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for i in 0..n {
        sxy += (xs[i] - mx) * (ys[i] - my);
        sxx += (xs[i] - mx) * (xs[i] - mx);
    }
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line() {
        let xs = [0.0, 1.0, 2.0, 3.0];
        let ys = [1.0, 3.0, 5.0, 7.0];
        assert!((slope(&xs, &ys) - 2.0).abs() < 1e-9);
        assert_eq!(slope(&xs[..1], &ys[..1]), 0.0);
    }

    #[test]
    fn rss_is_readable() {
        assert!(rss() > 0);
        assert!(peak_rss() >= rss() / 2);
    }

    #[test]
    fn pair_is_ready_and_carries_a_message() {
        let (mut a, mut b) = connected_pair(SocketType::Push, SocketType::Pull);
        a.send(payload(100)).unwrap();
        let ev = transfer(&mut a, &mut b, Instant::now());
        match ev.as_slice() {
            [Event::Message(m)] => assert_eq!(m.data(), payload(100).data()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

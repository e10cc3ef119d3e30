//! The progress thread (the NIC): polls wires, serves QPs (one pass runs the receive side,
//! `rx`, then the transmit side, `tx`), accepts and authenticates incoming wires.

use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::engine::{QpInner, QpShared};
use super::link::{Listener, Wire, WireStream, PASS_BUDGET};
use super::nic::Shared;
use super::os::lock;
use super::wire::{judge_hello, Hdr, Hello, HelloTarget, HelloVerdict, HELLO_LEN, K_ACK, PSN_MASK};
use crate::provider::*;

impl QpInner {
    /// One progress pass: timers, receive, transmit. Returns true when the budget ran out (call
    /// again without sleeping).
    pub(super) fn service(&mut self, qp: &QpShared, sh: &Shared, now: Instant) -> bool {
        self.on_timers(qp, now);
        let mut busy = false;
        for _ in 0..4 {
            let rx = self.pump_rx(qp, sh, now);
            if self.ack_pending {
                self.ack_pending = false;
                let psn = self.epsn.wrapping_sub(1) & PSN_MASK;
                self.queue_ctrl(
                    Hdr {
                        kind: K_ACK,
                        psn,
                        ..Hdr::default()
                    },
                    None,
                );
            }
            let tx = self.pump_tx(qp, sh, now);
            busy = rx >= PASS_BUDGET || tx >= PASS_BUDGET || qp.contended();
            if rx == 0 && tx == 0 {
                break;
            }
            if busy {
                break;
            }
        }
        busy
    }
}

pub(super) struct Pending {
    pub(super) stream: WireStream,
    pub(super) buf: [u8; HELLO_LEN],
    pub(super) got: usize,
    pub(super) since: Instant,
}

pub(super) fn progress_thread(sh: Arc<Shared>, listener: Listener) {
    let mut pending: Vec<Pending> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        if sh.killed.load(Ordering::SeqCst) {
            // A crashed host: close every wire, never touch anything again.
            for qp in lock(&sh.qps).values() {
                if let Some(w) = qp.lock().wire.as_mut() {
                    w.cut();
                }
            }
            drop(listener);
            while !sh.shutdown.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            return;
        }
        if sh.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let qps: Vec<Arc<QpShared>> = lock(&sh.qps).values().cloned().collect();
        fds.clear();
        fds.push(libc::pollfd {
            fd: sh.doorbell.fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.push(libc::pollfd {
            fd: listener.fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        let mut deadline: Option<Instant> = None;
        let mut busy = false;
        for qp in &qps {
            let mut g = qp.lock_for_service();
            let now = Instant::now();
            busy |= g.service(qp, &sh, now);
            if let Some(t) = g.next_deadline() {
                deadline = Some(deadline.map_or(t, |d| d.min(t)));
            }
            let held = g.hold_until.is_some_and(|t| now < t);
            if let Some(w) = g.wire.as_ref() {
                if let Some(fd) = w.fd() {
                    let mut ev = libc::POLLIN;
                    if !w.tx.is_empty() && !held {
                        ev |= libc::POLLOUT;
                    }
                    fds.push(libc::pollfd {
                        fd,
                        events: ev,
                        revents: 0,
                    });
                }
            }
        }
        for p in &pending {
            fds.push(libc::pollfd {
                fd: p.stream.fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if !busy {
            sh.asleep.store(true, Ordering::SeqCst);
            busy = sh.rung.swap(false, Ordering::SeqCst);
        }
        let timeout_ms: i32 = if busy {
            0
        } else {
            let cap = if pending.is_empty() { 1000 } else { 50 };
            match deadline {
                Some(d) => {
                    let us = d.saturating_duration_since(now).as_micros();
                    (us.div_ceil(1000) as i32).min(cap)
                }
                None => cap,
            }
        };
        // SAFETY: fds is a valid array of pollfd of the given length.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms);
        }
        sh.asleep.store(false, Ordering::SeqCst);
        if fds[0].revents != 0 {
            sh.doorbell.drain();
        }
        if fds[1].revents != 0 {
            while let Ok(s) = listener.accept() {
                if s.set_nonblocking(true).is_ok() {
                    pending.push(Pending {
                        stream: s,
                        buf: [0; HELLO_LEN],
                        got: 0,
                        since: Instant::now(),
                    });
                }
            }
        }
        serve_pending(&sh, &mut pending);
    }
}

pub(super) fn serve_pending(sh: &Shared, pending: &mut Vec<Pending>) {
    let now = Instant::now();
    let mut i = 0;
    while i < pending.len() {
        let p = &mut pending[i];
        let mut drop_it = now.duration_since(p.since) > Duration::from_secs(10);
        if p.got < HELLO_LEN {
            match p.stream.read(&mut p.buf[p.got..]) {
                Ok(0) => drop_it = true,
                Ok(n) => p.got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => drop_it = true,
            }
        }
        if !drop_it && p.got == HELLO_LEN {
            let hello = Hello::decode(&p.buf);
            let qp = hello.and_then(|h| lock(&sh.qps).get(&h.dst_qpn).cloned());
            match qp {
                None => drop_it = judge_hello(hello.as_ref(), sh.id, None) == HelloVerdict::Drop,
                Some(qp) => {
                    // Judged and attached under one hold of the QP's lock.
                    let mut g = qp.lock();
                    let target = HelloTarget {
                        remote: g.remote.map(|r| (r.dev, r.qpn)),
                        secret: qp.secret,
                        ready: matches!(g.state, QpState::Rtr | QpState::Rts),
                        wired: g.wire.is_some(),
                        errored: g.state == QpState::Err,
                    };
                    match judge_hello(hello.as_ref(), sh.id, Some(target)) {
                        HelloVerdict::Wait => {}
                        HelloVerdict::Drop => drop_it = true,
                        HelloVerdict::Attach => {
                            let p = pending.swap_remove(i);
                            g.wire = Some(Wire::new(p.stream));
                            sh.doorbell.signal();
                            continue;
                        }
                    }
                }
            }
        }
        if drop_it {
            pending.swap_remove(i);
        } else {
            i += 1;
        }
    }
}

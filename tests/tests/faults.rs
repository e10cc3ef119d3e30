//! Faults between hosts over tcp: every socket pattern runs through a user-space fault proxy
//! (`faults/proxy.rs`) that delays, stalls, cuts mid-frame or resets the connection, between two
//! rzmq peers and between rzmq and libzmq, both ways. Each message carries a sequence number;
//! each cell counts sent, delivered, duplicated and reordered messages, reconnections, whether
//! it hung and whether it leaked fds or threads, and asserts libzmq's invariants: the
//! connection comes back, messages in flight may be lost, but never a duplicate, never out of
//! order, never a hang, never a leak.
//!
//! `cargo test -p rzmq-tests --test faults -- --nocapture` prints the matrix;
//! `FAULT_MATRIX_OUT=dir` also writes it to `dir/tcp.md`. docs/FAULTS.md explains it.

#[path = "faults/matrix.rs"]
#[allow(dead_code, unreachable_pub, missing_docs)]
mod matrix;
#[path = "faults/proxy.rs"]
#[allow(dead_code, unreachable_pub, missing_docs)]
mod proxy;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use matrix::{
    body, leaked, leaked_by, report, resources, resources_without_test_threads, run_stream, seq_of,
    Ctxs, Lib, Row, Seqs, PHASE,
};
use proxy::{Dir, Framing, Proxy};
use rzmq_core::SocketType as T;

/// Filler bytes per message (frames of ~1 KB: a cut lands inside one).
const PAD: usize = 1000;
/// Messages delivered before the fault, and after it (past the messages in flight).
const BEFORE: usize = 200;
const AFTER: u32 = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// 2 ms more latency per chunk, both ways, from the fault on.
    Delay,
    /// Nothing forwarded for 300 ms.
    Stall,
    /// The connection closed (FIN both sides) 2017 bytes into the data direction: mid-frame.
    Cut,
    /// The connection reset (RST both sides).
    Reset,
}

const FAULTS: [Fault; 5] = [
    Fault::None,
    Fault::Delay,
    Fault::Stall,
    Fault::Cut,
    Fault::Reset,
];

struct Pattern {
    name: &'static str,
    sender: T,
    receiver: T,
    /// The sender binds (data flows from the proxy's target to the connecting peer).
    sender_binds: bool,
}

const PATTERNS: [Pattern; 7] = [
    Pattern {
        name: "PAIR",
        sender: T::Pair,
        receiver: T::Pair,
        sender_binds: false,
    },
    Pattern {
        name: "PUB/SUB",
        sender: T::Pub,
        receiver: T::Sub,
        sender_binds: true,
    },
    Pattern {
        name: "XPUB/XSUB",
        sender: T::XPub,
        receiver: T::XSub,
        sender_binds: true,
    },
    Pattern {
        name: "PUSH/PULL",
        sender: T::Push,
        receiver: T::Pull,
        sender_binds: false,
    },
    Pattern {
        name: "DEALER/ROUTER",
        sender: T::Dealer,
        receiver: T::Router,
        sender_binds: false,
    },
    Pattern {
        name: "ROUTER/DEALER",
        sender: T::Router,
        receiver: T::Dealer,
        sender_binds: true,
    },
    Pattern {
        name: "DEALER/DEALER",
        sender: T::Dealer,
        receiver: T::Dealer,
        sender_binds: false,
    },
];

fn apply(proxy: &Proxy, fault: Fault, data: Dir) {
    match fault {
        Fault::None => {}
        Fault::Delay => proxy.delay(2),
        Fault::Stall => proxy.stall(Duration::from_millis(300)),
        Fault::Cut => proxy.cut_after(data, 2017),
        Fault::Reset => {
            proxy.reset_all();
        }
    }
}

/// One streaming cell: `p.sender` sends numbered messages without pause, `p.receiver` counts.
fn stream_cell(p: &Pattern, s_lib: Lib, r_lib: Lib, fault: Fault) -> Row {
    let before = resources();
    let t0 = Instant::now();
    let ctxs = Ctxs::new();
    let mut snd = ctxs.socket(s_lib, p.sender);
    let mut rcv = ctxs.socket(r_lib, p.receiver);
    let (proxy, data) = if p.sender_binds {
        let proxy = Proxy::start(snd.bind(), Framing::Raw);
        rcv.connect(proxy.addr());
        (proxy, Dir::Down)
    } else {
        let proxy = Proxy::start(rcv.bind(), Framing::Raw);
        snd.connect(proxy.addr());
        (proxy, Dir::Up)
    };
    if p.receiver == T::XSub {
        assert!(rcv.send(&[&[1u8][..]]));
    }
    let router = p.sender == T::Router;
    let run = run_stream(
        snd,
        rcv,
        router,
        |_| PAD,
        BEFORE,
        AFTER,
        || apply(&proxy, fault, data),
    );
    let (snd, rcv, seqs, hung, sent) = (run.snd, run.rcv, run.seqs, run.hung, run.sent);
    let reconnects = proxy.accepted().saturating_sub(1);
    drop((snd, rcv, proxy, ctxs));
    let (fds, threads) = leaked(before, Duration::from_secs(2));
    Row {
        transport: "tcp".into(),
        pattern: p.name.into(),
        peers: format!("{}→{}", s_lib.name(), r_lib.name()),
        fault: format!("{fault:?}").to_lowercase(),
        sent,
        delivered: seqs.delivered,
        duplicated: seqs.duplicated,
        reordered: seqs.reordered,
        reconnects,
        hung,
        leaked_fds: fds,
        leaked_threads: threads,
        ms: t0.elapsed().as_millis(),
    }
}

/// REQ (relaxed, correlated: a request unanswered in 200 ms is replaced by the next one, as
/// libzmq documents for a lost peer) against an echoing REP.
fn req_rep_cell(c_lib: Lib, s_lib: Lib, fault: Fault) -> Row {
    let before = resources();
    let t0 = Instant::now();
    let ctxs = Ctxs::new();
    let mut req = ctxs.socket(c_lib, T::Req);
    let mut rep = ctxs.socket(s_lib, T::Rep);
    let proxy = Proxy::start(rep.bind(), Framing::Raw);
    req.connect(proxy.addr());
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut seqs = Seqs::default();
            while !stop.load(Ordering::SeqCst) {
                if let Some(m) = rep.recv() {
                    seqs.push(seq_of(&m));
                    let parts: Vec<&[u8]> = m.iter().map(|p| &p[..]).collect();
                    rep.send(&parts);
                }
            }
            (rep, seqs)
        })
    };
    let mut replies = Seqs::default();
    let mut seq = 0u32;
    let mut sent = 0usize;
    let mut hung = false;
    let mut mark = None;
    let mut deadline = Instant::now() + PHASE;
    loop {
        if mark.is_none() && replies.delivered >= BEFORE {
            apply(&proxy, fault, Dir::Up);
            mark = Some(seq);
            deadline = Instant::now() + PHASE;
        }
        if mark.is_some_and(|m| seq >= m + AFTER && replies.delivered > 0) {
            break;
        }
        if Instant::now() > deadline {
            hung = true;
            break;
        }
        if !req.send(&[&body(seq, PAD)]) {
            continue;
        }
        sent += 1;
        for _ in 0..4 {
            if let Some(m) = req.recv() {
                let r = seq_of(&m);
                assert_eq!(r, seq, "REQ_CORRELATE let a stale reply through");
                replies.push(r);
                break;
            }
        }
        seq += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let (rep, served) = server.join().expect("server thread");
    let reconnects = proxy.accepted().saturating_sub(1);
    drop((req, rep, proxy, ctxs));
    let (fds, threads) = leaked(before, Duration::from_secs(2));
    Row {
        transport: "tcp".into(),
        pattern: "REQ/REP".into(),
        peers: format!("{}→{}", c_lib.name(), s_lib.name()),
        fault: format!("{fault:?}").to_lowercase(),
        sent,
        delivered: replies.delivered,
        duplicated: replies.duplicated + served.duplicated,
        reordered: replies.reordered + served.reordered,
        reconnects,
        hung,
        leaked_fds: fds,
        leaked_threads: threads,
        ms: t0.elapsed().as_millis(),
    }
}

/// The tests of this binary count the process's fds and threads: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Regression (found by the matrix): an rzmq context dropped without `term`, its sockets
/// dropped too, left its I/O thread running with its epoll and eventfd: 2 fds and a thread
/// leaked per context, in every cell.
#[test]
fn a_context_dropped_without_term_ends_its_io_thread() {
    let _serial = serial();
    // The first socket of the process may set up process-wide state: not counted. Nor is the
    // thread libtest runs the other test on (it may start after the first count).
    drop(rzmq_core::Context::new().socket(T::Pull).unwrap());
    let count = || resources_without_test_threads(&["tcp_fault_matrix"]);
    let before = count();
    for i in 0..3u32 {
        let ctx = rzmq_core::Context::new();
        let mut pull = ctx.socket(T::Pull).unwrap();
        pull.bind("tcp://127.0.0.1:*").unwrap();
        let mut push = ctx.socket(T::Push).unwrap();
        push.connect(pull.last_endpoint()).unwrap();
        push.send(body(i, 10), 0).unwrap();
        assert_eq!(pull.recv_bytes(0).unwrap(), body(i, 10));
        drop((push, pull, ctx));
    }
    assert_eq!(leaked_by(count, before, Duration::from_secs(5)), (0, 0));
}

#[test]
fn tcp_fault_matrix() {
    let _serial = serial();
    let t0 = Instant::now();
    let libs = [(Lib::Rz, Lib::Rz), (Lib::Rz, Lib::Lz), (Lib::Lz, Lib::Rz)];
    let mut rows = Vec::new();
    // Warm up both libraries (their first sockets open lazily-created fds and threads).
    drop(stream_cell(&PATTERNS[3], Lib::Rz, Lib::Lz, Fault::None));
    for p in &PATTERNS {
        for &(s, r) in &libs {
            for &f in &FAULTS {
                rows.push(stream_cell(p, s, r, f));
            }
        }
    }
    for &(s, r) in &libs {
        for &f in &FAULTS {
            rows.push(req_rep_cell(s, r, f));
        }
    }
    report(
        "tcp",
        &format!(
            "tcp matrix ({} cells, {:.1} s)",
            rows.len(),
            t0.elapsed().as_secs_f64()
        ),
        &rows,
    );
    let bad: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let v = r.violations();
            (!v.is_empty())
                .then(|| format!("{} {} {}: {}", r.pattern, r.peers, r.fault, v.join(", ")))
        })
        .collect();
    assert!(bad.is_empty(), "invariants broken:\n{}", bad.join("\n"));
}

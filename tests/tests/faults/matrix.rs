//! The fault matrix's bookkeeping: peers of either library behind one interface, sequence
//! numbers, per-cell counts (sent, delivered, duplicated, reordered, hung, leaked) and the
//! markdown table.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rzmq_core::options as opt;
use rzmq_core::SocketType;

/// Which library a peer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    /// rzmq (`rzmq_core`).
    Rz,
    /// The reference libzmq (`zmq` crate).
    Lz,
}

impl Lib {
    pub fn name(self) -> &'static str {
        match self {
            Lib::Rz => "rzmq",
            Lib::Lz => "libzmq",
        }
    }
}

/// Receive/send timeout of matrix sockets (ms): short, the drivers loop.
pub const IO_MS: i32 = 50;

/// A socket of either library.
pub enum Peer {
    Rz(Box<rzmq_core::Socket>),
    Lz(zmq::Socket),
}

fn lz_type(t: SocketType) -> zmq::SocketType {
    match t {
        SocketType::Pair => zmq::PAIR,
        SocketType::Pub => zmq::PUB,
        SocketType::Sub => zmq::SUB,
        SocketType::Req => zmq::REQ,
        SocketType::Rep => zmq::REP,
        SocketType::Dealer => zmq::DEALER,
        SocketType::Router => zmq::ROUTER,
        SocketType::Pull => zmq::PULL,
        SocketType::Push => zmq::PUSH,
        SocketType::XPub => zmq::XPUB,
        SocketType::XSub => zmq::XSUB,
        SocketType::Stream => zmq::STREAM,
        // The zmq crate binds libzmq's stable API only; the matrix has no draft-type cells.
        draft => panic!("{draft:?}: the zmq crate has no draft socket types"),
    }
}

/// Contexts of both libraries for one cell.
pub struct Ctxs {
    pub rz: rzmq_core::Context,
    pub lz: zmq::Context,
}

impl Ctxs {
    pub fn new() -> Ctxs {
        Ctxs {
            rz: rzmq_core::Context::new(),
            lz: zmq::Context::new(),
        }
    }

    /// A socket with short timeouts, no linger, a fast reconnect, REQ relaxed and correlated,
    /// SUB subscribed to everything, ROUTER handing a known routing id over to a new connection
    /// (without it libzmq's ROUTER keeps routing to the dead one: see docs/FAULTS.md).
    pub fn socket(&self, lib: Lib, ty: SocketType) -> Peer {
        match lib {
            Lib::Rz => {
                let mut s = self.rz.socket(ty).unwrap();
                s.set_option_i32(opt::RCVTIMEO, IO_MS).unwrap();
                s.set_option_i32(opt::SNDTIMEO, IO_MS).unwrap();
                s.set_option_i32(opt::LINGER, 0).unwrap();
                s.set_option_i32(opt::RECONNECT_IVL, 10).unwrap();
                if ty == SocketType::Req {
                    s.set_option_i32(opt::REQ_RELAXED, 1).unwrap();
                    s.set_option_i32(opt::REQ_CORRELATE, 1).unwrap();
                }
                if ty == SocketType::Sub {
                    s.subscribe(b"").unwrap();
                }
                if ty == SocketType::Dealer {
                    s.set_option_raw(opt::ROUTING_ID, b"dealer").unwrap();
                }
                if ty == SocketType::Router {
                    s.set_option_i32(opt::ROUTER_HANDOVER, 1).unwrap();
                }
                Peer::Rz(Box::new(s))
            }
            Lib::Lz => {
                let s = self.lz.socket(lz_type(ty)).unwrap();
                s.set_rcvtimeo(IO_MS).unwrap();
                s.set_sndtimeo(IO_MS).unwrap();
                s.set_linger(0).unwrap();
                s.set_reconnect_ivl(10).unwrap();
                if ty == SocketType::Req {
                    s.set_req_relaxed(true).unwrap();
                    s.set_req_correlate(true).unwrap();
                }
                if ty == SocketType::Sub {
                    s.set_subscribe(b"").unwrap();
                }
                if ty == SocketType::Dealer {
                    s.set_identity(b"dealer").unwrap();
                }
                if ty == SocketType::Router {
                    s.set_router_handover(true).unwrap();
                }
                Peer::Lz(s)
            }
        }
    }
}

impl Peer {
    /// Binds to a fresh tcp port on 127.0.0.1; returns the port's address.
    pub fn bind(&mut self) -> std::net::SocketAddr {
        let ep = match self {
            Peer::Rz(s) => {
                s.bind("tcp://127.0.0.1:*").unwrap();
                s.last_endpoint().to_string()
            }
            Peer::Lz(s) => {
                s.bind("tcp://127.0.0.1:*").unwrap();
                s.get_last_endpoint().unwrap().unwrap()
            }
        };
        ep.trim_start_matches("tcp://").parse().unwrap()
    }

    pub fn connect(&mut self, addr: std::net::SocketAddr) {
        let ep = format!("tcp://{addr}");
        match self {
            Peer::Rz(s) => s.connect(&ep).unwrap(),
            Peer::Lz(s) => s.connect(&ep).unwrap(),
        }
    }

    /// Sends a multipart message; `false` when it timed out (not sent).
    pub fn send(&mut self, parts: &[&[u8]]) -> bool {
        match self {
            Peer::Rz(s) => s.send_multipart(parts.iter().copied(), 0).is_ok(),
            Peer::Lz(s) => s.send_multipart(parts.iter().copied(), 0).is_ok(),
        }
    }

    /// Receives a multipart message; `None` when it timed out.
    pub fn recv(&mut self) -> Option<Vec<Vec<u8>>> {
        match self {
            Peer::Rz(s) => s
                .recv_multipart(0)
                .ok()
                .map(|v| v.into_iter().map(|m| m.data().to_vec()).collect()),
            Peer::Lz(s) => s.recv_multipart(0).ok(),
        }
    }
}

/// A message: `seq` (little-endian u32) then `pad` filler bytes.
pub fn body(seq: u32, pad: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + pad);
    b.extend_from_slice(&seq.to_le_bytes());
    b.resize(4 + pad, (seq % 251) as u8);
    b
}

/// The sequence number of a message's last part, checking its filler.
pub fn seq_of(parts: &[Vec<u8>]) -> u32 {
    let b = parts.last().expect("a part");
    let seq = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    assert!(
        b[4..].iter().all(|&x| x == (seq % 251) as u8),
        "message {seq} corrupted"
    );
    seq
}

/// Sequence numbers received on one pipe, in arrival order.
#[derive(Default)]
pub struct Seqs {
    seen: HashSet<u32>,
    max: Option<u32>,
    pub delivered: usize,
    pub duplicated: usize,
    pub reordered: usize,
}

impl Seqs {
    pub fn push(&mut self, seq: u32) {
        if !self.seen.insert(seq) {
            self.duplicated += 1;
            return;
        }
        self.delivered += 1;
        if self.max.is_some_and(|m| seq < m) {
            self.reordered += 1;
        }
        self.max = Some(self.max.map_or(seq, |m| m.max(seq)));
    }
}

/// One cell's outcome.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub transport: String,
    pub pattern: String,
    pub peers: String,
    pub fault: String,
    pub sent: usize,
    pub delivered: usize,
    pub duplicated: usize,
    pub reordered: usize,
    pub reconnects: usize,
    pub hung: bool,
    pub leaked_fds: i64,
    pub leaked_threads: i64,
    pub ms: u128,
}

impl Row {
    /// The invariants: never a duplicate, never out of order, never hung, nothing leaked, never
    /// more delivered than sent.
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.duplicated > 0 {
            v.push(format!("{} duplicated", self.duplicated));
        }
        if self.reordered > 0 {
            v.push(format!("{} reordered", self.reordered));
        }
        if self.hung {
            v.push("hung".into());
        }
        if self.leaked_fds > 0 || self.leaked_threads > 0 {
            v.push(format!(
                "leaked {} fds, {} threads",
                self.leaked_fds, self.leaked_threads
            ));
        }
        if self.delivered > self.sent {
            v.push("delivered more than sent".into());
        }
        v
    }
}

/// The markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(
        "| transport | pattern | peers (sender→receiver) | fault | sent | delivered | lost | dup | reord | reconn | hung | leak fd/thr | ms |\n",
    );
    s.push_str("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} |",
            r.transport,
            r.pattern,
            r.peers,
            r.fault,
            r.sent,
            r.delivered,
            r.sent.saturating_sub(r.delivered),
            r.duplicated,
            r.reordered,
            r.reconnects,
            if r.hung { "**yes**" } else { "no" },
            r.leaked_fds,
            r.leaked_threads,
            r.ms
        );
    }
    s
}

/// Prints the table and, with `FAULT_MATRIX_OUT=dir`, writes it to `dir/<name>.md`.
pub fn report(name: &str, title: &str, rows: &[Row]) {
    let t = format!("### {title}\n\n{}", table(rows));
    println!("{t}");
    if let Ok(dir) = std::env::var("FAULT_MATRIX_OUT") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(std::path::Path::new(&dir).join(format!("{name}.md")), &t).unwrap();
    }
}

fn count_dir(p: &str) -> i64 {
    std::fs::read_dir(p).map(|d| d.count() as i64).unwrap_or(0)
}

/// Open fds and threads of this process.
pub fn resources() -> (i64, i64) {
    (count_dir("/proc/self/fd"), count_dir("/proc/self/task"))
}

/// Open fds and threads of this process, not counting threads named after `tests`: libtest runs
/// each test on a thread named after it, and starts those threads when it likes, so another
/// test's thread (blocked on the binary's lock) may appear between two counts.
pub fn resources_without_test_threads(tests: &[&str]) -> (i64, i64) {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    // The kernel keeps the first 15 bytes of a thread's name.
                    let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                    let comm = comm.trim_end();
                    comm.is_empty() || !tests.iter().any(|t| t.starts_with(comm))
                })
                .count() as i64
        })
        .unwrap_or(0);
    (count_dir("/proc/self/fd"), threads)
}

/// How many fds and threads above `before` remain, waiting up to `settle` for them to go.
pub fn leaked(before: (i64, i64), settle: Duration) -> (i64, i64) {
    leaked_by(resources, before, settle)
}

/// As [`leaked`], with `count` counting the fds and threads.
pub fn leaked_by(
    count: impl Fn() -> (i64, i64),
    before: (i64, i64),
    settle: Duration,
) -> (i64, i64) {
    let deadline = Instant::now() + settle;
    loop {
        let now = count();
        let d = (now.0 - before.0, now.1 - before.1);
        if (d.0 <= 0 && d.1 <= 0) || Instant::now() > deadline {
            return (d.0.max(0), d.1.max(0));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A phase of a cell that does not finish in this long is a hang.
pub const PHASE: Duration = Duration::from_secs(5);

/// Receives until `done` says so or [`PHASE`] passes; `false` on timeout (a hang).
pub fn phase(rcv: &mut Peer, seqs: &mut Seqs, done: impl Fn(&Seqs, u32) -> bool) -> bool {
    let deadline = Instant::now() + PHASE;
    let mut last = 0;
    while !done(seqs, last) {
        if Instant::now() > deadline {
            return false;
        }
        if let Some(m) = rcv.recv() {
            last = seq_of(&m);
            seqs.push(last);
        }
    }
    true
}

/// What [`run_stream`] saw; the sockets come back for the caller to close.
pub struct Stream {
    pub snd: Peer,
    pub rcv: Peer,
    pub sent: usize,
    pub seqs: Seqs,
    pub hung: bool,
}

/// A streaming cell: a thread sends numbered messages (`pad(seq)` filler bytes each, to routing
/// id `dealer` when `router`) as fast as the sender takes them; this thread receives `before`
/// of them, calls `fault`, then receives until a message sent `after` messages past the fault
/// arrives (the connection recovered), stops the sender and drains what was in flight.
pub fn run_stream(
    mut snd: Peer,
    mut rcv: Peer,
    router: bool,
    pad: fn(u32) -> usize,
    before: usize,
    after: u32,
    fault: impl FnOnce(),
) -> Stream {
    let sent = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (sent, stop) = (sent.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seq = 0u32;
            while !stop.load(Ordering::SeqCst) {
                let b = body(seq, pad(seq));
                let ok = if router {
                    snd.send(&[b"dealer", &b])
                } else {
                    snd.send(&[&b])
                };
                if ok {
                    seq += 1;
                    sent.store(seq, Ordering::SeqCst);
                    if seq & 7 == 0 {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            }
            snd
        })
    };
    let mut seqs = Seqs::default();
    let mut hung = !phase(&mut rcv, &mut seqs, |s, _| s.delivered >= before);
    if !hung {
        fault();
        let mark = sent.load(Ordering::SeqCst);
        hung = !phase(&mut rcv, &mut seqs, |_, last| last >= mark + after);
    }
    stop.store(true, Ordering::SeqCst);
    let snd = sender.join().expect("sender thread");
    // What was still in flight.
    let mut idle = 0;
    while idle < 2 {
        match rcv.recv() {
            Some(m) => seqs.push(seq_of(&m)),
            None => idle += 1,
        }
    }
    Stream {
        snd,
        rcv,
        sent: sent.load(Ordering::SeqCst) as usize,
        seqs,
        hung,
    }
}

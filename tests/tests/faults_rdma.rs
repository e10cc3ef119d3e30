//! Faults over RDMA (the soft provider): rzmq peers connect over tcp and move to RDMA; their
//! soft wires run through the fault proxy (`faults/proxy.rs` in its soft-wire mode: the
//! provider advertises the proxy as its wire address), which loses, duplicates or reorders
//! data packets, or cuts a wire in the middle of an RDMA READ (a rendezvous); the provider's
//! own `cut_wires_at` breaks every QP in the middle of rendezvous traffic. Same counts and
//! invariants as the tcp matrix (`faults.rs`): lost packets are retransmitted, duplicates
//! ignored, a broken QP closes the connection, which reconnects and upgrades again; never a
//! duplicated or reordered message, never a hang, never a leak.
//!
//! The binary runs with `RZMQ_RDMA=auto RZMQ_RDMA_PROVIDER=soft RZMQ_SOFT_CMA=0` (READs
//! stream over the wire) and one soft device listening behind the proxy; every test of the
//! binary shares them, one at a time.
//!
//! `cargo test -p rzmq-tests --test faults_rdma -- --nocapture` prints the matrix;
//! `FAULT_MATRIX_OUT=dir` also writes it to `dir/rdma.md`. docs/FAULTS.md explains it.

#[path = "faults/matrix.rs"]
#[allow(dead_code, unreachable_pub, missing_docs)]
mod matrix;
#[path = "faults/proxy.rs"]
#[allow(dead_code, unreachable_pub, missing_docs)]
mod proxy;

use std::net::TcpListener;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use matrix::{leaked, report, resources, run_stream, Ctxs, Lib, Peer, Row};
use proxy::{Framing, PacketFault, Proxy};
use rzmq_core::monitor;
use rzmq_core::options as opt;
use rzmq_core::SocketType as T;

/// Messages delivered before the fault, and after it.
const BEFORE: usize = 100;
const AFTER: u32 = 100;

/// Eager messages of ~1 KB; every 16th is 300 KB, above the rendezvous threshold (64 KiB
/// here): the receiver READs it from the sender's memory.
fn pad(seq: u32) -> usize {
    if seq & 15 == 0 {
        300_000
    } else {
        1000
    }
}

static SERIAL: Mutex<()> = Mutex::new(());
static PROXY: OnceLock<Proxy> = OnceLock::new();

/// The wire proxy, set up once (with the environment, before the first socket), and this
/// binary's lock.
fn setup() -> (&'static Proxy, MutexGuard<'static, ()>) {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let proxy = PROXY.get_or_init(|| {
        // The device's own listener (a free port, released for it), and the proxy in front.
        let real = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let proxy = Proxy::start(real, Framing::SoftWire);
        std::env::set_var("RZMQ_RDMA", "auto");
        std::env::set_var("RZMQ_RDMA_PROVIDER", "soft");
        std::env::set_var("RZMQ_RDMA_EVENTS", "1");
        std::env::set_var("RZMQ_RDMA_RNDV_THRESHOLD", "65536");
        std::env::set_var("RZMQ_SOFT_CMA", "0");
        std::env::set_var("RZMQ_SOFT_LISTEN", format!("tcp:{real}"));
        std::env::set_var("RZMQ_SOFT_ADVERTISE", format!("tcp:{}", proxy.addr()));
        // Fault injection on for the upgrader's soft devices (`cut_wires_at` below).
        rzmq_tests::install_rdma_with_soft_faults();
        proxy
    });
    (proxy, guard)
}

/// Breaks every QP of the process through the soft provider's fault injection (a QP error
/// on both ends): every device here has a loopback wire address and was opened with fault
/// injection on (`RdmaOptions::soft_faults`).
fn break_every_qp() -> usize {
    rzmq_rdma::provider::soft::cut_wires_at(std::net::Ipv4Addr::LOCALHOST.into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Three data packets lost.
    Lost,
    /// Three data packets delivered twice.
    Duplicated,
    /// Three data packets each swapped with the one behind it.
    Reordered,
    /// The wire cut half-way through a READ response (rendezvous), by the proxy.
    CutMidRead,
    /// Every QP broken by the provider (`cut_wires_at`) while rendezvous READs are going.
    QpError,
}

const FAULTS: [Fault; 6] = [
    Fault::None,
    Fault::Lost,
    Fault::Duplicated,
    Fault::Reordered,
    Fault::CutMidRead,
    Fault::QpError,
];

fn apply(proxy: &Proxy, fault: Fault) {
    match fault {
        Fault::None => {}
        Fault::Lost => proxy.packet_faults(&[PacketFault::Drop; 3]),
        Fault::Duplicated => proxy.packet_faults(&[PacketFault::Duplicate; 3]),
        Fault::Reordered => proxy.packet_faults(&[PacketFault::Swap; 3]),
        Fault::CutMidRead => proxy.packet_faults(&[PacketFault::CutRead]),
        Fault::QpError => {
            break_every_qp();
        }
    }
}

/// Monitors `s` for transport events on a fresh inproc endpoint; returns the reading end.
fn watch(ctx: &rzmq_core::Context, s: &mut Peer) -> rzmq_core::Socket {
    let Peer::Rz(s) = s else { unreachable!() };
    let ep = rzmq_tests::inproc_endpoint("faults-rdma");
    s.monitor(Some(&ep), monitor::EVENT_TRANSPORT).unwrap();
    let mut m = ctx.socket(T::Pair).unwrap();
    m.set_option_i32(opt::RCVTIMEO, 5000).unwrap();
    m.connect(&ep).unwrap();
    m
}

/// The transport events (values) `m` has now, waiting up to `first` for the first.
fn transports(m: &mut rzmq_core::Socket, first: Duration) -> Vec<u32> {
    let mut v = Vec::new();
    let deadline = Instant::now() + first;
    loop {
        let flags = if v.is_empty() && Instant::now() < deadline {
            0
        } else {
            rzmq_core::DONTWAIT
        };
        match m.recv_multipart(flags) {
            Ok(parts) => {
                let d = parts[0].data();
                v.push(u32::from_ne_bytes([d[2], d[3], d[4], d[5]]));
            }
            Err(_) if v.is_empty() && Instant::now() < deadline => {}
            Err(_) => return v,
        }
    }
}

struct Pattern {
    name: &'static str,
    sender: T,
    receiver: T,
    sender_binds: bool,
}

const PATTERNS: [Pattern; 5] = [
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
];

fn rdma_cell(proxy: &Proxy, p: &Pattern, fault: Fault) -> Row {
    let before = resources();
    let t0 = Instant::now();
    let ctxs = Ctxs::new();
    let mut snd = ctxs.socket(Lib::Rz, p.sender);
    let mut rcv = ctxs.socket(Lib::Rz, p.receiver);
    let mut mon = watch(&ctxs.rz, &mut snd);
    if p.sender_binds {
        let a = snd.bind();
        rcv.connect(a);
    } else {
        let a = rcv.bind();
        snd.connect(a);
    }
    let first = transports(&mut mon, Duration::from_secs(5));
    assert_eq!(
        first.first(),
        Some(&monitor::TRANSPORT_RDMA),
        "{}: the connection did not move to RDMA",
        p.name
    );
    let faulted = proxy.packets_faulted();
    let run = run_stream(snd, rcv, p.sender == T::Router, pad, BEFORE, AFTER, || {
        apply(proxy, fault)
    });
    let later = transports(&mut mon, Duration::ZERO);
    let reconnects = later
        .iter()
        .filter(|&&v| v == monitor::TRANSPORT_RDMA)
        .count();
    // Faults armed and not reached (a cell whose traffic never met them) are disarmed.
    let applied = proxy.packets_faulted() - faulted;
    proxy.clear_packet_faults();
    drop((run.snd, run.rcv, mon, ctxs));
    let (fds, threads) = leaked(before, Duration::from_secs(3));
    let fault_name = match fault {
        Fault::Lost | Fault::Duplicated | Fault::Reordered | Fault::CutMidRead => {
            format!("{fault:?} ({applied} pkts)").to_lowercase()
        }
        _ => format!("{fault:?}").to_lowercase(),
    };
    Row {
        transport: "rdma/soft".into(),
        pattern: p.name.into(),
        peers: "rzmq→rzmq".into(),
        fault: fault_name,
        sent: run.sent,
        delivered: run.seqs.delivered,
        duplicated: run.seqs.duplicated,
        reordered: run.seqs.reordered,
        reconnects,
        hung: run.hung,
        leaked_fds: fds,
        leaked_threads: threads,
        ms: t0.elapsed().as_millis(),
    }
}

#[test]
fn rdma_fault_matrix() {
    let (proxy, _serial) = setup();
    let t0 = Instant::now();
    // The first connection opens the soft device (its progress thread and listener stay).
    drop(rdma_cell(proxy, &PATTERNS[2], Fault::None));
    let mut rows = Vec::new();
    for p in &PATTERNS {
        for &f in &FAULTS {
            rows.push(rdma_cell(proxy, p, f));
        }
    }
    report(
        "rdma",
        &format!(
            "rdma/soft matrix ({} cells, {:.1} s)",
            rows.len(),
            t0.elapsed().as_secs_f64()
        ),
        &rows,
    );
    let bad: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let v = r.violations();
            (!v.is_empty()).then(|| format!("{} {}: {}", r.pattern, r.fault, v.join(", ")))
        })
        .collect();
    assert!(bad.is_empty(), "invariants broken:\n{}", bad.join("\n"));
}

//! Shared helpers for the integration tests: unique endpoints and timeouts.

use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A unique ipc endpoint in a fresh temp path.
pub fn ipc_endpoint(tag: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir();
    format!(
        "ipc://{}/rzmq-test-{}-{}-{}.sock",
        dir.display(),
        std::process::id(),
        tag,
        n
    )
}

/// A unique inproc endpoint.
pub fn inproc_endpoint(tag: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("inproc://{tag}-{n}")
}

/// A payload of `len` bytes whose content depends on `seed`, for verification.
pub fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A ZMTP 3.1 greeting for `mechanism` (as-server 0), as a hand-written peer sends it.
pub fn zmtp_greeting(mechanism: &[u8]) -> Vec<u8> {
    let mut g = vec![0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 1];
    let mut mech = [0u8; 20];
    mech[..mechanism.len()].copy_from_slice(mechanism);
    g.extend_from_slice(&mech);
    g.push(0);
    g.extend_from_slice(&[0u8; 31]);
    g
}

/// A NULL-mechanism READY command frame with only the `Socket-Type` property.
pub fn zmtp_ready(socket_type: &[u8]) -> Vec<u8> {
    let mut body = vec![5];
    body.extend_from_slice(b"READY");
    body.push(11);
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    body.extend_from_slice(socket_type);
    let mut f = vec![0x04, body.len() as u8];
    f.extend_from_slice(&body);
    f
}

/// Receive timeout used by tests so a bug fails instead of hanging (ms).
pub const TIMEOUT_MS: i32 = 10_000;

/// A socket whose sends and receives give up after [`TIMEOUT_MS`] (a hung test fails instead of
/// hanging) and that lingers `linger_ms` at close.
pub fn timed_socket(
    ctx: &rzmq_core::Context,
    ty: rzmq_core::SocketType,
    linger_ms: i32,
) -> rzmq_core::Socket {
    use rzmq_core::options as opt;
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, linger_ms).unwrap();
    s
}

/// The source directory of the `zeromq-src` crate (libzmq 4.3.5's sources, tests and perf tools),
/// found through `cargo metadata`.
pub fn zeromq_src_dir() -> std::path::PathBuf {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // Find "manifest_path":".../zeromq-src-<ver>/Cargo.toml" without a JSON dependency.
    let key = "\"manifest_path\":\"";
    for (i, _) in text.match_indices(key) {
        let rest = &text[i + key.len()..];
        let end = rest.find('"').unwrap_or(0);
        let path = &rest[..end];
        if path.contains("/zeromq-src-0.3") && path.ends_with("/Cargo.toml") {
            return std::path::Path::new(path).parent().unwrap().join("vendor");
        }
    }
    panic!("zeromq-src not found in cargo metadata");
}

/// The directory holding this build's examples (`target/<profile>/examples`).
pub fn examples_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test binary>
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
}

/// Installs the RDMA upgrader with the environment's settings (`RZMQ_RDMA_*`, `RZMQ_SOFT_*`,
/// set by the caller beforehand) and one setting no variable gives: the soft devices it opens
/// accept fault injection (`RdmaOptions::soft_faults`), for tests that cut their wires.
pub fn install_rdma_with_soft_faults() {
    let o = rzmq_rdma::RdmaOptions {
        soft_faults: true,
        ..rzmq_rdma::RdmaOptions::from_env().expect("RDMA settings")
    };
    assert!(
        rzmq_rdma::install_with(&o),
        "an upgrader was installed already"
    );
}

static SOFT_RDMA: std::sync::Once = std::sync::Once::new();

/// Once per test binary, before its first socket: RDMA upgrades on the soft provider
/// (`RZMQ_RDMA=auto RZMQ_RDMA_PROVIDER=soft`), transport events on, frames above 64 KiB by
/// rendezvous, and soft devices that accept fault injection ([`install_rdma_with_soft_faults`]).
/// The upgrader reads the environment once, so the variables are set here, not by the tests.
pub fn setup_soft_rdma() {
    SOFT_RDMA.call_once(|| {
        std::env::set_var("RZMQ_RDMA", "auto");
        std::env::set_var("RZMQ_RDMA_PROVIDER", "soft");
        std::env::set_var("RZMQ_RDMA_EVENTS", "1");
        std::env::set_var("RZMQ_RDMA_RNDV_THRESHOLD", "65536");
        install_rdma_with_soft_faults();
    });
}

/// Monitors `s` for transport events and `more_events` on a fresh inproc endpoint; returns
/// the reading end (a PAIR with the tests' receive timeout).
pub fn watch_transport(
    ctx: &rzmq_core::Context,
    s: &mut rzmq_core::Socket,
    tag: &str,
    more_events: u16,
) -> rzmq_core::Socket {
    let ep = inproc_endpoint(tag);
    s.monitor(Some(&ep), rzmq_core::monitor::EVENT_TRANSPORT | more_events)
        .unwrap();
    let mut m = ctx.socket(rzmq_core::SocketType::Pair).unwrap();
    m.set_option_i32(rzmq_core::options::RCVTIMEO, TIMEOUT_MS)
        .unwrap();
    m.connect(&ep).unwrap();
    m
}

/// The next event of a monitor: its id and value.
pub fn next_monitor_event(m: &mut rzmq_core::Socket) -> (u16, u32) {
    let parts = m.recv_multipart(0).expect("monitor event");
    let d = parts[0].data();
    (
        u16::from_ne_bytes([d[0], d[1]]),
        u32::from_ne_bytes([d[2], d[3], d[4], d[5]]),
    )
}

/// The transport the next transport event of a monitor reports (other events are skipped).
pub fn next_transport(m: &mut rzmq_core::Socket) -> u32 {
    loop {
        let (ev, v) = next_monitor_event(m);
        if ev == rzmq_core::monitor::EVENT_TRANSPORT {
            return v;
        }
    }
}

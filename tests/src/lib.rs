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

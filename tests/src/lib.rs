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

/// Receive timeout used by tests so a bug fails instead of hanging (ms).
pub const TIMEOUT_MS: i32 = 10_000;

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

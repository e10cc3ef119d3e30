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

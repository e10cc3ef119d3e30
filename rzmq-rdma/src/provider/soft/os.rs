//! What every part of the soft NIC takes from the standard library and the OS: a lock that
//! survives poisoning and random bits. The bottom of the folder: it uses no other file here.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`; a poisoned lock is taken as it is (a panic elsewhere does not stop the NIC).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// 64 random bits (`getrandom`, else the time and pid): device seeds and QP secrets.
pub(super) fn random_u64() -> u64 {
    let mut v: u64 = 0;
    // SAFETY: getrandom writes at most 8 bytes into the valid u64.
    let n = unsafe { libc::getrandom(&mut v as *mut u64 as *mut libc::c_void, 8, 0) };
    if n != 8 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        v = t ^ (u64::from(std::process::id()) << 32);
    }
    v
}

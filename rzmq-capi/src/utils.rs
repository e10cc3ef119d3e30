//! Small utilities of the C API: `zmq_version`, `zmq_has`, Z85 (`zmq_z85_encode`/`decode`),
//! CURVE key helpers, atomic counters, the stopwatch, `zmq_sleep` and threads.

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use rzmq_core::z85;

use crate::errno::set_errno;

/// Version reported by `zmq_version` and the `ZMQ_VERSION_*` macros of `include/zmq.h`.
pub const ZMQ_VERSION_MAJOR: i32 = 4;
/// Minor version (see [`ZMQ_VERSION_MAJOR`]).
pub const ZMQ_VERSION_MINOR: i32 = 3;
/// Patch version (see [`ZMQ_VERSION_MAJOR`]).
pub const ZMQ_VERSION_PATCH: i32 = 5;

/// Reports the library version (4.3.5); NULL pointers are skipped.
///
/// # Safety
/// Each pointer is NULL or valid for writing an int.
#[no_mangle]
pub unsafe extern "C" fn zmq_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) {
    for (p, v) in [
        (major, ZMQ_VERSION_MAJOR),
        (minor, ZMQ_VERSION_MINOR),
        (patch, ZMQ_VERSION_PATCH),
    ] {
        if !p.is_null() {
            // SAFETY: non-null and writable (caller's contract).
            unsafe { *p = v };
        }
    }
}

/// Whether a capability is built: "ipc" and "curve" yes; "pgm", "tipc", "norm", "vmci", "gssapi",
/// "ws", "wss" and "draft" no. Returns 1 or 0.
///
/// # Safety
/// `capability` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_has(capability: *const c_char) -> c_int {
    if capability.is_null() {
        return 0;
    }
    // SAFETY: non-null NUL-terminated string (caller's contract).
    let cap = unsafe { CStr::from_ptr(capability) }.to_bytes();
    c_int::from(match cap {
        b"ipc" => true,
        b"curve" => rzmq_core::options::HAVE_CURVE,
        b"draft" => cfg!(feature = "draft"),
        _ => false,
    })
}

// ----- Z85 (ZeroMQ RFC 32, rzmq_core::z85) ------------------------------------------------

/// Encodes `size` bytes (a multiple of 4, else NULL with `EINVAL`) into `dest`, which receives
/// `size * 5 / 4` characters and a NUL; returns `dest`.
///
/// # Safety
/// `data` is readable for `size` bytes; `dest` is writable for `size * 5 / 4 + 1` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_z85_encode(
    dest: *mut c_char,
    data: *const u8,
    size: usize,
) -> *mut c_char {
    if dest.is_null() || (data.is_null() && size != 0) {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    let input: &[u8] = if size == 0 {
        &[]
    } else {
        // SAFETY: data is readable for size bytes (caller's contract).
        unsafe { std::slice::from_raw_parts(data, size) }
    };
    let Some(text) = z85::encode(input) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    // SAFETY: dest holds size * 5 / 4 + 1 bytes (caller's contract) and does not overlap data.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), dest.cast::<u8>(), text.len());
        *dest.add(text.len()) = 0;
    }
    dest
}

/// Decodes the NUL-terminated Z85 `string` (a non-zero multiple of 5 characters) into `dest`,
/// which receives `strlen * 4 / 5` bytes; returns `dest`, or NULL with `EINVAL` when the text is
/// malformed.
///
/// # Safety
/// `string` is a NUL-terminated string; `dest` is writable for `strlen (string) * 4 / 5` bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_z85_decode(dest: *mut u8, string: *const c_char) -> *mut u8 {
    if dest.is_null() || string.is_null() {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    // SAFETY: NUL-terminated (caller's contract).
    let text = unsafe { CStr::from_ptr(string) }.to_bytes();
    let Some(bytes) = z85::decode(text) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    // SAFETY: dest holds strlen * 4 / 5 bytes (caller's contract).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dest, bytes.len()) };
    dest
}

/// Writes a 40-character Z85 key and a NUL to `dest` (41 bytes).
///
/// # Safety
/// `dest` is writable for 41 bytes.
unsafe fn write_z85_key(dest: *mut c_char, key: &[u8; 32]) {
    let text = z85::encode_key(key);
    // SAFETY: dest holds 41 bytes (caller's contract); text is 40 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), dest.cast::<u8>(), text.len());
        *dest.add(text.len()) = 0;
    }
}

/// Generates a CURVE key pair (OS randomness, as libsodium's `crypto_box_keypair`) and writes
/// both keys as 40 Z85 characters and a NUL. Returns 0, or -1 with `EINVAL` for a NULL buffer.
///
/// # Safety
/// Each pointer is NULL or writable for 41 bytes.
#[no_mangle]
pub unsafe extern "C" fn zmq_curve_keypair(
    z85_public_key: *mut c_char,
    z85_secret_key: *mut c_char,
) -> c_int {
    if z85_public_key.is_null() || z85_secret_key.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let (public, secret) = match z85::generate_keypair() {
        Ok(k) => k,
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            return -1;
        }
    };
    // SAFETY: both are writable for 41 bytes (caller's contract).
    unsafe {
        write_z85_key(z85_public_key, &public);
        write_z85_key(z85_secret_key, &secret);
    }
    0
}

/// Derives the CURVE public key of a Z85 secret key (40 characters, NUL-terminated) and writes it
/// as 40 Z85 characters and a NUL. Returns 0, or -1 with `EINVAL` when the secret is not 40 valid
/// Z85 characters (libzmq would overrun its buffer on longer text).
///
/// # Safety
/// `z85_public_key` is NULL or writable for 41 bytes; `z85_secret_key` is NULL or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn zmq_curve_public(
    z85_public_key: *mut c_char,
    z85_secret_key: *const c_char,
) -> c_int {
    if z85_public_key.is_null() || z85_secret_key.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: NUL-terminated (caller's contract).
    let text = unsafe { CStr::from_ptr(z85_secret_key) }.to_bytes();
    let decoded = if text.len() == 40 {
        z85::decode(text).map(zeroize::Zeroizing::new)
    } else {
        None
    };
    let Some(bytes) = decoded else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let mut secret = zeroize::Zeroizing::new([0u8; 32]);
    secret.copy_from_slice(&bytes);
    let public = z85::public_key(&secret);
    // SAFETY: writable for 41 bytes (caller's contract).
    unsafe { write_z85_key(z85_public_key, &public) };
    0
}

// ----- atomic counters -----------------------------------------------------------------------

/// The counter behind a handle, or None for NULL.
///
/// # Safety
/// `p` is NULL or a live counter from [`zmq_atomic_counter_new`].
unsafe fn counter<'a>(p: *mut c_void) -> Option<&'a AtomicI32> {
    // SAFETY: caller's contract; AtomicI32 is only used through shared references.
    unsafe { (p as *const AtomicI32).as_ref() }
}

/// A new atomic counter, starting at 0.
#[no_mangle]
pub extern "C" fn zmq_atomic_counter_new() -> *mut c_void {
    Box::into_raw(Box::new(AtomicI32::new(0))).cast()
}

/// Sets the counter.
///
/// # Safety
/// `counter_` is NULL or a live counter.
#[no_mangle]
pub unsafe extern "C" fn zmq_atomic_counter_set(counter_: *mut c_void, value: c_int) {
    // SAFETY: caller's contract.
    if let Some(c) = unsafe { counter(counter_) } {
        c.store(value, Ordering::SeqCst);
    }
}

/// Adds one; returns the value before.
///
/// # Safety
/// As [`zmq_atomic_counter_set`].
#[no_mangle]
pub unsafe extern "C" fn zmq_atomic_counter_inc(counter_: *mut c_void) -> c_int {
    // SAFETY: caller's contract.
    unsafe { counter(counter_) }.map_or(0, |c| c.fetch_add(1, Ordering::SeqCst))
}

/// Subtracts one; returns 1 if the counter is still non-zero, 0 if it reached zero.
///
/// # Safety
/// As [`zmq_atomic_counter_set`].
#[no_mangle]
pub unsafe extern "C" fn zmq_atomic_counter_dec(counter_: *mut c_void) -> c_int {
    // SAFETY: caller's contract.
    unsafe { counter(counter_) }.map_or(0, |c| {
        c_int::from(c.fetch_sub(1, Ordering::SeqCst) - 1 != 0)
    })
}

/// The counter's value.
///
/// # Safety
/// As [`zmq_atomic_counter_set`].
#[no_mangle]
pub unsafe extern "C" fn zmq_atomic_counter_value(counter_: *mut c_void) -> c_int {
    // SAFETY: caller's contract.
    unsafe { counter(counter_) }.map_or(0, |c| c.load(Ordering::SeqCst))
}

/// Frees the counter at `*counter_p` and sets `*counter_p` to NULL.
///
/// # Safety
/// `counter_p` is NULL or points to NULL or a live counter.
#[no_mangle]
pub unsafe extern "C" fn zmq_atomic_counter_destroy(counter_p: *mut *mut c_void) {
    if counter_p.is_null() {
        return;
    }
    // SAFETY: counter_p is valid (caller's contract).
    let p = unsafe { *counter_p };
    if !p.is_null() {
        // SAFETY: p came from Box::into_raw in zmq_atomic_counter_new (caller's contract).
        drop(unsafe { Box::from_raw(p as *mut AtomicI32) });
    }
    // SAFETY: as above.
    unsafe { *counter_p = std::ptr::null_mut() };
}

// ----- stopwatch, sleep, threads -------------------------------------------------------------

/// Starts a stopwatch; returns its handle.
#[no_mangle]
pub extern "C" fn zmq_stopwatch_start() -> *mut c_void {
    Box::into_raw(Box::new(Instant::now())).cast()
}

fn micros(start: &Instant) -> c_ulong {
    start.elapsed().as_micros().min(c_ulong::MAX as u128) as c_ulong
}

/// Microseconds since the stopwatch started (0 for NULL).
///
/// # Safety
/// `watch` is NULL or a live stopwatch.
#[no_mangle]
pub unsafe extern "C" fn zmq_stopwatch_intermediate(watch: *mut c_void) -> c_ulong {
    // SAFETY: caller's contract.
    unsafe { (watch as *const Instant).as_ref() }.map_or(0, micros)
}

/// Microseconds since the stopwatch started; frees it.
///
/// # Safety
/// `watch` is NULL or a live stopwatch, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn zmq_stopwatch_stop(watch: *mut c_void) -> c_ulong {
    if watch.is_null() {
        return 0;
    }
    // SAFETY: watch came from Box::into_raw in zmq_stopwatch_start (caller's contract).
    let w = unsafe { Box::from_raw(watch as *mut Instant) };
    micros(&w)
}

/// Sleeps for `seconds` seconds.
#[no_mangle]
pub extern "C" fn zmq_sleep(seconds: c_int) {
    if seconds > 0 {
        std::thread::sleep(Duration::from_secs(seconds as u64));
    }
}

/// The C thread function of `zmq_threadstart`.
pub type zmq_thread_fn = unsafe extern "C" fn(arg: *mut c_void);

struct ThreadArg(*mut c_void);
// SAFETY: the caller of zmq_threadstart hands arg to the new thread, as with pthread_create.
unsafe impl Send for ThreadArg {}

/// Blocks every signal in the calling thread, as libzmq does in the threads it starts, so that
/// signals go to the application's own threads.
fn block_signals() {
    // SAFETY: set is a local sigset_t initialised by sigfillset before use; pthread_sigmask
    // only changes the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Starts a thread running `func(arg)`; returns a handle for [`zmq_threadclose`], or NULL (with
/// `EINVAL` for a NULL function, or the OS error).
///
/// # Safety
/// `func` is safe to run on another thread with `arg`.
#[no_mangle]
pub unsafe extern "C" fn zmq_threadstart(
    func: Option<zmq_thread_fn>,
    arg: *mut c_void,
) -> *mut c_void {
    let Some(func) = func else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let arg = ThreadArg(arg);
    let spawned = std::thread::Builder::new().spawn(move || {
        block_signals();
        let a = arg;
        // SAFETY: the caller's function with the caller's argument (contract above).
        unsafe { func(a.0) }
    });
    match spawned {
        Ok(h) => Box::into_raw(Box::new(h)).cast(),
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EAGAIN));
            std::ptr::null_mut()
        }
    }
}

/// Waits for a thread started by [`zmq_threadstart`] to finish and frees its handle.
///
/// # Safety
/// `thread` is NULL or a handle from [`zmq_threadstart`], closed once.
#[no_mangle]
pub unsafe extern "C" fn zmq_threadclose(thread: *mut c_void) {
    if thread.is_null() {
        return;
    }
    // SAFETY: thread came from Box::into_raw in zmq_threadstart (caller's contract).
    let h = unsafe { Box::from_raw(thread as *mut std::thread::JoinHandle<()>) };
    let _ = h.join();
}

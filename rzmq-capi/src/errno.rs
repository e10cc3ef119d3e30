//! `errno` as libzmq uses it, `zmq_errno`, `zmq_strerror`, and the glue that turns a Rust
//! `Result` into a C return value.
//!
//! libzmq reports failures through the C library's thread-local `errno` (and `zmq_errno` simply
//! returns it), so C callers may read either; we do the same. Every exported function runs its
//! body through `call` (or one of its siblings), which catches panics so that none unwinds
//! into C, and sets `errno` last, after every local (and any release callback it triggers) is
//! dropped.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use rzmq_core::error::{strerror, Error};

/// The errno a panic inside the library is reported with (an internal error).
pub(crate) const EPANIC: c_int = libc::ENOTRECOVERABLE;

/// Sets the calling thread's `errno`.
#[inline]
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// Reads the calling thread's `errno`.
#[inline]
pub(crate) fn get_errno() -> c_int {
    // SAFETY: as in set_errno.
    unsafe { *libc::__errno_location() }
}

/// Runs `f`; `Ok(v)` returns `v`, an error sets errno and returns `-1`, a panic returns `-1` with
/// [`EPANIC`].
#[inline]
pub(crate) fn call(f: impl FnOnce() -> Result<c_int, Error>) -> c_int {
    call_or(-1, f)
}

/// As [`call`] with `fail` as the failure value (NULL pointers, 0 sizes, ...).
#[inline]
pub(crate) fn call_or<T>(fail: T, f: impl FnOnce() -> Result<T, Error>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            report(e);
            fail
        }
        Err(_) => {
            report_panic();
            fail
        }
    }
}

/// Sets errno for `e` (out of line: the success path of every call stays a compare and a move,
/// not a jump over every error kind).
#[cold]
#[inline(never)]
fn report(e: Error) {
    set_errno(e.errno());
}

/// Sets errno for a panic caught at the ABI boundary.
#[cold]
#[inline(never)]
fn report_panic() {
    set_errno(EPANIC);
}

/// Retrieves the errno as libzmq knows it (the calling thread's `errno`).
#[no_mangle]
pub extern "C" fn zmq_errno() -> c_int {
    get_errno()
}

/// Most distinct error numbers whose text is cached; further ones share a per-thread buffer.
const STRERROR_CACHE_MAX: usize = 4096;

static STRERROR_CACHE: Mutex<Option<HashMap<c_int, &'static CStr>>> = Mutex::new(None);

thread_local! {
    static STRERROR_OVERFLOW: std::cell::RefCell<CString> = std::cell::RefCell::new(CString::default());
}

fn to_cstring(text: String) -> CString {
    CString::new(text.replace('\0', " ")).unwrap_or_default()
}

/// Resolves system and ZeroMQ error numbers to text, as libzmq: the pointer stays valid for the
/// life of the process (texts are cached per error number).
#[no_mangle]
pub extern "C" fn zmq_strerror(errnum: c_int) -> *const c_char {
    let cached = catch_unwind(|| {
        let mut g = STRERROR_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let map = g.get_or_insert_with(HashMap::new);
        if let Some(s) = map.get(&errnum) {
            return Some(s.as_ptr());
        }
        if map.len() >= STRERROR_CACHE_MAX {
            return None;
        }
        let leaked: &'static CStr = Box::leak(to_cstring(strerror(errnum)).into_boxed_c_str());
        map.insert(errnum, leaked);
        Some(leaked.as_ptr())
    });
    match cached {
        Ok(Some(p)) => p,
        // The cache is full (a caller probing millions of numbers): the text lives until this
        // thread's next such call, as glibc's strerror for unknown numbers.
        Ok(None) => STRERROR_OVERFLOW.with(|b| {
            *b.borrow_mut() = to_cstring(strerror(errnum));
            b.borrow().as_ptr()
        }),
        Err(_) => c"Internal error".as_ptr(),
    }
}

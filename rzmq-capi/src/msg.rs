//! `zmq_msg_t` and the `zmq_msg_*` functions.
//!
//! A `zmq_msg_t` is 64 bytes aligned to a pointer. It holds an rzmq [`Msg`] in place at offset 0
//! ([`MSG_SIZE`] <= 56 bytes) and an 8-byte tag in its last bytes saying whether the message is
//! initialised (a LIVE tag) or closed. An uninitialised or closed message therefore fails with
//! `EFAULT` (libzmq's `check()`), and closing twice is an error, not a double free. A `Msg` holds
//! no pointer into itself, so C code may move a `zmq_msg_t` with memcpy, as libzmq allows.
//!
//! `zmq_msg_init_data` wraps the caller's buffer without copying; its free function runs exactly
//! once, when the last owner drops it (possibly on an I/O thread after transmission), and may
//! re-enter this library.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::MaybeUninit;

use rzmq_core::msg::{Msg, MSG_SIZE};
use rzmq_core::Error;

use crate::errno::{call, call_or, set_errno};

/// The C message type: 64 opaque bytes aligned to a pointer, as libzmq's.
#[repr(C, align(8))]
pub struct zmq_msg_t {
    /// Opaque storage.
    pub _d: [u8; 64],
}

/// `ZMQ_MORE` message property.
pub const ZMQ_MORE: c_int = 1;
/// `ZMQ_SRCFD` message property (deprecated).
pub const ZMQ_SRCFD: c_int = 2;
/// `ZMQ_SHARED` message property.
pub const ZMQ_SHARED: c_int = 3;

/// The C free function of `zmq_msg_init_data`.
pub type zmq_free_fn = unsafe extern "C" fn(data: *mut c_void, hint: *mut c_void);

const TAG_OFFSET: usize = 56;
/// Tag of an initialised message.
const LIVE: u64 = 0x4c49_5645_5f4d_5347; // "LIVE_MSG"
/// Tag of a closed message.
const CLOSED: u64 = 0x4445_4144_5f4d_5347; // "DEAD_MSG"

const _: () = assert!(std::mem::size_of::<zmq_msg_t>() == 64);
const _: () = assert!(MSG_SIZE <= TAG_OFFSET);
const _: () = assert!(std::mem::align_of::<Msg>() <= std::mem::align_of::<zmq_msg_t>());

fn aligned(m: *const zmq_msg_t) -> bool {
    !m.is_null() && m.is_aligned()
}

/// The message's tag, or None for NULL/misaligned pointers.
///
/// # Safety
/// `m` is NULL or points to 64 readable bytes.
unsafe fn tag(m: *const zmq_msg_t) -> Option<u64> {
    if !aligned(m) {
        return None;
    }
    // SAFETY: m is aligned to 8 and points to 64 readable bytes; the tag is the last 8.
    Some(unsafe { std::ptr::read((m as *const u8).add(TAG_OFFSET) as *const u64) })
}

/// # Safety
/// `m` is aligned and points to 64 writable bytes.
unsafe fn set_tag(m: *mut zmq_msg_t, t: u64) {
    // SAFETY: caller's contract; the tag is the last 8 bytes.
    unsafe { std::ptr::write((m as *mut u8).add(TAG_OFFSET) as *mut u64, t) };
}

/// The `Msg` inside an initialised `zmq_msg_t`; `EFAULT` otherwise.
///
/// # Safety
/// `m` is NULL or points to 64 readable bytes, not aliased mutably for `'a`.
pub(crate) unsafe fn msg_ref<'a>(m: *const zmq_msg_t) -> Result<&'a Msg, Error> {
    // SAFETY: forwarded contract.
    if unsafe { tag(m) } != Some(LIVE) {
        return Err(Error::Fault);
    }
    // SAFETY: the LIVE tag means a Msg was written at offset 0 by msg_write and not taken out.
    Ok(unsafe { &*(m as *const Msg) })
}

/// As [`msg_ref`], mutably.
///
/// # Safety
/// `m` is NULL or points to 64 writable bytes, not aliased for `'a`.
pub(crate) unsafe fn msg_mut<'a>(m: *mut zmq_msg_t) -> Result<&'a mut Msg, Error> {
    // SAFETY: forwarded contract.
    if unsafe { tag(m) } != Some(LIVE) {
        return Err(Error::Fault);
    }
    // SAFETY: as in msg_ref, and the caller guarantees exclusive access.
    Ok(unsafe { &mut *(m as *mut Msg) })
}

/// Stores `msg` into `m` (whatever `m` held is overwritten, not dropped) and marks it live.
///
/// # Safety
/// `m` is aligned and points to 64 writable bytes.
pub(crate) unsafe fn msg_write(m: *mut zmq_msg_t, msg: Msg) {
    // SAFETY: caller's contract; offset 0 is aligned for Msg (checked at compile time).
    unsafe {
        std::ptr::write(m as *mut Msg, msg);
        set_tag(m, LIVE);
    }
}

/// Moves the `Msg` out of an initialised `m`, leaving it closed; `EFAULT` if not initialised.
///
/// # Safety
/// `m` is NULL or points to 64 writable bytes.
pub(crate) unsafe fn msg_take(m: *mut zmq_msg_t) -> Result<Msg, Error> {
    // SAFETY: forwarded contract.
    if unsafe { tag(m) } != Some(LIVE) {
        return Err(Error::Fault);
    }
    // SAFETY: a live Msg is at offset 0; marking the slot closed makes this the only owner.
    unsafe {
        let msg = std::ptr::read(m as *const Msg);
        set_tag(m, CLOSED);
        Ok(msg)
    }
}

/// Initialises `m` with `msg`, refusing NULL and misaligned pointers with `EFAULT`.
///
/// # Safety
/// `m` is NULL or points to 64 writable bytes.
unsafe fn init_with(m: *mut zmq_msg_t, msg: Msg) -> Result<c_int, Error> {
    if !aligned(m) {
        return Err(Error::Fault);
    }
    // SAFETY: checked aligned and non-null; caller's contract for the rest.
    unsafe { msg_write(m, msg) };
    Ok(0)
}

/// Allocates `size` zeroed bytes, or `ENOMEM` (libzmq's `init_size` never aborts).
fn alloc_zeroed(size: usize) -> Result<Vec<u8>, Error> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(size).map_err(|_| Error::NoMem)?;
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(Error::NoMem);
    }
    // SAFETY: p was allocated by the global allocator with exactly this layout (size bytes,
    // align 1), all initialised to zero; the Vec takes ownership.
    Ok(unsafe { Vec::from_raw_parts(p, size, size) })
}

/// Initialises an empty message.
///
/// # Safety
/// `msg` is NULL or points to a `zmq_msg_t`.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_init(msg: *mut zmq_msg_t) -> c_int {
    // SAFETY: caller's contract.
    call(|| unsafe { init_with(msg, Msg::new()) })
}

/// Initialises a message of `size` bytes for the caller to fill. Its bytes are unspecified, as
/// with libzmq's `malloc`: inline frames are zeroed, larger ones may reuse storage of dropped
/// messages without clearing it (up to `rzmq_core::msg::RECYCLED_MAX`); sizes above the pool are allocated fallibly (ENOMEM).
///
/// # Safety
/// As [`zmq_msg_init`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_init_size(msg: *mut zmq_msg_t, size: usize) -> c_int {
    call(|| {
        if !aligned(msg) {
            return Err(Error::Fault);
        }
        if size <= rzmq_core::msg::RECYCLED_MAX {
            // SAFETY: checked aligned and non-null, so msg points to a zmq_msg_t (caller's
            // contract) whose first bytes hold a Msg (size and alignment checked at compile
            // time); the message is built there and then marked live.
            unsafe {
                Msg::write_with_size_recycled(&mut *(msg as *mut MaybeUninit<Msg>), size);
                set_tag(msg, LIVE);
            }
            return Ok(0);
        }
        let m = Msg::from_vec(alloc_zeroed(size)?);
        // SAFETY: caller's contract.
        unsafe { init_with(msg, m) }
    })
}

/// The data and hint of a free callback, carried to whichever thread drops the last owner.
struct Release {
    ffn: zmq_free_fn,
    data: *mut c_void,
    hint: *mut c_void,
}

// SAFETY: libzmq's contract for zmq_msg_init_data is that the free function may be called from
// any thread (libzmq calls it from its I/O threads); the pointers are only handed back to it.
unsafe impl Send for Release {}

impl Release {
    fn run(self) {
        // SAFETY: the caller of zmq_msg_init_data supplied ffn for exactly this (data, hint)
        // and it is called exactly once (the FnOnce holding self is consumed).
        unsafe { (self.ffn)(self.data, self.hint) }
    }
}

/// A message over the caller's buffer (no copy). `ffn(data, hint)` runs exactly once when the
/// last owner is done with it; with `ffn` NULL the caller keeps ownership and must keep the
/// buffer alive as long as the message (a "constant" message, `ZMQ_SHARED` reads 1).
///
/// # Safety
/// `msg` as [`zmq_msg_init`]; `data` is valid for `size` bytes until `ffn` runs (or forever when
/// `ffn` is NULL); `ffn` is NULL or a function safe to call from any thread.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_init_data(
    msg: *mut zmq_msg_t,
    data: *mut c_void,
    size: usize,
    ffn: Option<zmq_free_fn>,
    hint: *mut c_void,
) -> c_int {
    call(|| {
        if !aligned(msg) || (data.is_null() && size != 0) {
            return Err(Error::Fault);
        }
        // SAFETY: caller's contract on data/size/ffn, see the function's Safety section.
        let m = unsafe { external(data, size, ffn, hint) };
        // SAFETY: caller's contract.
        unsafe { init_with(msg, m) }
    })
}

/// A `Msg` over an external buffer.
///
/// # Safety
/// As [`zmq_msg_init_data`].
pub(crate) unsafe fn external(
    data: *mut c_void,
    size: usize,
    ffn: Option<zmq_free_fn>,
    hint: *mut c_void,
) -> Msg {
    match ffn {
        Some(ffn) => {
            let rel = Release { ffn, data, hint };
            // SAFETY: forwarded contract: data is valid for size bytes until the release runs.
            unsafe { Msg::from_external(data.cast(), size, Some(Box::new(move || rel.run()))) }
        }
        None => {
            // SAFETY: forwarded contract: data outlives every owner.
            let mut m = unsafe { Msg::from_external(data.cast(), size, None) };
            // libzmq reports constant messages as shared; share() marks the frame so.
            drop(m.share());
            m
        }
    }
}

/// Closes a message (drops its reference to the data); `EFAULT` if it is not initialised.
///
/// # Safety
/// As [`zmq_msg_init`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_close(msg: *mut zmq_msg_t) -> c_int {
    // The common case after a send (the message was reset to empty): nothing to release, so
    // only the tag changes.
    // SAFETY: caller's contract; msg_ref checks the pointer and the LIVE tag.
    if let Ok(m) = unsafe { msg_ref(msg) } {
        if m.holds_nothing() {
            // SAFETY: msg_ref succeeded, so msg is aligned and points to a live zmq_msg_t; a
            // Msg holding nothing needs no drop, and the CLOSED tag makes it unreadable.
            unsafe { set_tag(msg, CLOSED) };
            return 0;
        }
    }
    call(|| {
        // SAFETY: caller's contract.
        drop(unsafe { msg_take(msg) }?);
        Ok(0)
    })
}

/// Moves `src` into `dest` (whose previous content is released); `src` becomes empty.
///
/// # Safety
/// Both are NULL or point to `zmq_msg_t`s.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_move(dest: *mut zmq_msg_t, src: *mut zmq_msg_t) -> c_int {
    call(|| {
        // SAFETY: caller's contract (each checked before use).
        unsafe {
            msg_ref(src)?;
            msg_ref(dest)?;
            if dest == src {
                return Ok(0);
            }
            let moved = msg_take(src)?;
            msg_write(src, Msg::new());
            let old = msg_take(dest)?;
            msg_write(dest, moved);
            drop(old);
        }
        Ok(0)
    })
}

/// Makes `dest` a copy of `src` sharing its data (no byte copy for large messages); the previous
/// content of `dest` is released. Both then report `ZMQ_SHARED`.
///
/// # Safety
/// As [`zmq_msg_move`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_copy(dest: *mut zmq_msg_t, src: *mut zmq_msg_t) -> c_int {
    call(|| {
        // SAFETY: caller's contract (each checked before use); src and dest are distinct when
        // two references are alive at once.
        unsafe {
            msg_ref(src)?;
            msg_ref(dest)?;
            if dest == src {
                return Ok(0);
            }
            let copy = msg_mut(src)?.share();
            let old = msg_take(dest)?;
            msg_write(dest, copy);
            drop(old);
        }
        Ok(0)
    })
}

/// The message's bytes (writable, as in libzmq), or NULL with `EFAULT`.
///
/// # Safety
/// As [`zmq_msg_init`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_data(msg: *mut zmq_msg_t) -> *mut c_void {
    call_or(std::ptr::null_mut(), || {
        // SAFETY: caller's contract.
        Ok(unsafe { msg_mut(msg) }?.data_ptr().cast())
    })
}

/// The message's size in bytes (0 with `EFAULT` when not initialised).
///
/// # Safety
/// As [`zmq_msg_init`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_size(msg: *const zmq_msg_t) -> usize {
    // SAFETY: caller's contract.
    call_or(0, || Ok(unsafe { msg_ref(msg) }?.len()))
}

/// 1 when more frames of the same message follow (0 with `EFAULT` when not initialised).
///
/// # Safety
/// As [`zmq_msg_init`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_more(msg: *const zmq_msg_t) -> c_int {
    // SAFETY: caller's contract.
    call_or(0, || Ok(c_int::from(unsafe { msg_ref(msg) }?.more())))
}

/// Reads a message property: `ZMQ_MORE`, `ZMQ_SRCFD` (the source fd from the "__fd" metadata
/// property, else -1 with `EINVAL`), `ZMQ_SHARED`; other numbers fail with `EINVAL`.
///
/// # Safety
/// As [`zmq_msg_init`].
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_get(msg: *const zmq_msg_t, property: c_int) -> c_int {
    call(|| {
        // SAFETY: caller's contract.
        let m = unsafe { msg_ref(msg) }?;
        match property {
            ZMQ_MORE => Ok(c_int::from(m.more())),
            ZMQ_SRCFD => {
                let v = m.property("__fd").ok_or(Error::Inval)?;
                Ok(atoi(v))
            }
            ZMQ_SHARED => Ok(c_int::from(m.is_shared())),
            _ => Err(Error::Inval),
        }
    })
}

/// C's `atoi`: leading spaces, a sign, digits; anything else ends the number.
fn atoi(s: &[u8]) -> c_int {
    let mut it = s
        .iter()
        .copied()
        .skip_while(|c| c.is_ascii_whitespace())
        .peekable();
    let neg = match it.peek() {
        Some(b'-') => {
            it.next();
            true
        }
        Some(b'+') => {
            it.next();
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    for c in it.take_while(|c| c.is_ascii_digit()) {
        v = (v * 10 + i64::from(c - b'0')).min(i64::from(i32::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as c_int
}

/// Sets a message property: libzmq 4.3 supports none, so this always fails with `EINVAL`.
///
/// # Safety
/// Never dereferences its arguments.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_set(
    _msg: *mut zmq_msg_t,
    _property: c_int,
    _optval: c_int,
) -> c_int {
    set_errno(libc::EINVAL);
    -1
}

/// A metadata property of a received message ("Socket-Type", "Routing-Id" (alias "Identity"),
/// "Peer-Address", "User-Id", application properties), as a NUL-terminated string that lives as
/// long as the message; NULL with `EINVAL` when absent.
///
/// # Safety
/// `msg` as [`zmq_msg_init`]; `property` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zmq_msg_gets(
    msg: *const zmq_msg_t,
    property: *const c_char,
) -> *const c_char {
    call_or(std::ptr::null(), || {
        // SAFETY: caller's contract.
        let m = unsafe { msg_ref(msg) }?;
        if property.is_null() {
            return Err(Error::Inval);
        }
        // SAFETY: property is a non-null NUL-terminated string (caller's contract).
        let name = unsafe { CStr::from_ptr(property) }
            .to_str()
            .map_err(|_| Error::Inval)?;
        let md = m.metadata().ok_or(Error::Inval)?;
        let v = md
            .get_with_nul(name)
            .or_else(|| match name {
                "Identity" => md.get_with_nul("Routing-Id"),
                "Routing-Id" => md.get_with_nul("Identity"),
                _ => None,
            })
            .ok_or(Error::Inval)?;
        // The value is owned by the message's Arc<Metadata> and ends with a NUL.
        Ok(v.as_ptr().cast())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_like_c() {
        assert_eq!(atoi(b"42"), 42);
        assert_eq!(atoi(b"  -7x"), -7);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b"99999999999"), i32::MAX);
    }
}

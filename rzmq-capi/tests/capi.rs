//! Drives the C ABI functions directly (through the rlib): message lifecycle and free
//! callbacks, socket option buffer rules, errno values, Z85, timers and the small utilities,
//! poll, proxy and context termination.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zmq::*;

// The numbers come from rzmq-core, their one definition (include/zmq.h is checked against it
// in tests/settings.rs).
use rzmq_core::error::{EFSM, ETERM};
use rzmq_core::options::{
    EVENTS as ZMQ_EVENTS, FD as ZMQ_FD, LAST_ENDPOINT as ZMQ_LAST_ENDPOINT, LINGER as ZMQ_LINGER,
    MAXMSGSIZE as ZMQ_MAXMSGSIZE, RCVMORE as ZMQ_RCVMORE, RCVTIMEO as ZMQ_RCVTIMEO,
    ROUTING_ID as ZMQ_ROUTING_ID, SOCKS_PROXY as ZMQ_SOCKS_PROXY, SUBSCRIBE as ZMQ_SUBSCRIBE,
    TYPE as ZMQ_TYPE,
};
use rzmq_core::{SocketType, DONTWAIT as ZMQ_DONTWAIT, SNDMORE as ZMQ_SNDMORE};

const ZMQ_PAIR: c_int = SocketType::Pair as c_int;
const ZMQ_PUB: c_int = SocketType::Pub as c_int;
const ZMQ_REQ: c_int = SocketType::Req as c_int;
const ZMQ_REP: c_int = SocketType::Rep as c_int;
const ZMQ_DEALER: c_int = SocketType::Dealer as c_int;
const ZMQ_PULL: c_int = SocketType::Pull as c_int;
const ZMQ_PUSH: c_int = SocketType::Push as c_int;

fn errno() -> c_int {
    zmq_errno()
}

/// Asserts `rc == -1` with `errno == e`.
#[track_caller]
fn fails(rc: c_int, e: c_int) {
    assert_eq!(
        (rc, errno()),
        (-1, e),
        "expected errno {e} ({:?})",
        strerror(e)
    );
}

fn strerror(e: c_int) -> String {
    // SAFETY: zmq_strerror returns a valid, process-lifetime C string.
    unsafe { CStr::from_ptr(zmq_strerror(e)) }
        .to_string_lossy()
        .into_owned()
}

fn c(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).unwrap()
}

/// A context and helpers to make sockets on it; terminated on drop.
struct Ctx(*mut c_void);

impl Ctx {
    fn new() -> Ctx {
        let ctx = zmq_ctx_new();
        assert!(!ctx.is_null());
        Ctx(ctx)
    }

    fn socket(&self, ty: c_int) -> *mut c_void {
        // SAFETY: live context.
        let s = unsafe { zmq_socket(self.0, ty) };
        assert!(!s.is_null(), "zmq_socket: {}", strerror(errno()));
        s
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // A failed test leaves sockets open, and terminating would wait for them forever.
        if !std::thread::panicking() {
            // SAFETY: live context; every test closes its sockets first.
            unsafe { zmq_ctx_term(self.0) };
        }
    }
}

fn set_int(s: *mut c_void, opt: c_int, v: c_int) {
    // SAFETY: v is a live int.
    let rc = unsafe { zmq_setsockopt(s, opt, (&v as *const c_int).cast(), 4) };
    assert_eq!(rc, 0, "setsockopt {opt}: {}", strerror(errno()));
}

fn get_int(s: *mut c_void, opt: c_int) -> c_int {
    let mut v: c_int = 0;
    let mut len = 4usize;
    // SAFETY: v and len are live.
    let rc = unsafe { zmq_getsockopt(s, opt, (&mut v as *mut c_int).cast(), &mut len) };
    assert_eq!(rc, 0, "getsockopt {opt}");
    v
}

fn bind(s: *mut c_void, ep: &str) {
    let a = c(ep);
    // SAFETY: live socket and string.
    let rc = unsafe { zmq_bind(s, a.as_ptr()) };
    assert_eq!(rc, 0, "bind {ep}: {}", strerror(errno()));
}

fn connect(s: *mut c_void, ep: &str) {
    let a = c(ep);
    // SAFETY: live socket and string.
    let rc = unsafe { zmq_connect(s, a.as_ptr()) };
    assert_eq!(rc, 0, "connect {ep}: {}", strerror(errno()));
}

fn last_endpoint(s: *mut c_void) -> String {
    let mut buf = [0u8; 256];
    let mut len = buf.len();
    // SAFETY: buf holds len bytes.
    let rc = unsafe { zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf.as_mut_ptr().cast(), &mut len) };
    assert_eq!(rc, 0);
    assert_eq!(buf[len - 1], 0, "NUL-terminated");
    String::from_utf8(buf[..len - 1].to_vec()).unwrap()
}

fn send(s: *mut c_void, data: &[u8], flags: c_int) -> c_int {
    // SAFETY: data is a live slice.
    unsafe { zmq_send(s, data.as_ptr().cast(), data.len(), flags) }
}

fn recv(s: *mut c_void) -> Vec<u8> {
    let mut m = new_msg();
    // SAFETY: m is a live zmq_msg_t; its data is valid for its size until closed.
    unsafe {
        assert_eq!(zmq_msg_init(&mut m), 0);
        let n = zmq_msg_recv(&mut m, s, 0);
        assert!(n >= 0, "recv: {}", strerror(errno()));
        let v = std::slice::from_raw_parts(zmq_msg_data(&mut m) as *const u8, zmq_msg_size(&m))
            .to_vec();
        assert_eq!(v.len(), n as usize);
        assert_eq!(zmq_msg_close(&mut m), 0);
        v
    }
}

fn close(s: *mut c_void) {
    // SAFETY: live socket.
    assert_eq!(unsafe { zmq_close(s) }, 0);
}

fn new_msg() -> zmq_msg_t {
    zmq_msg_t { _d: [0xAA; 64] }
}

// ----- messages ------------------------------------------------------------------------------

#[test]
fn msg_lifecycle_and_errors() {
    let mut m = new_msg();
    let mut other = new_msg();
    // SAFETY: all pointers are to live zmq_msg_t values on this stack.
    unsafe {
        // Not initialised: EFAULT, never a crash.
        fails(zmq_msg_close(&mut m), libc::EFAULT);
        assert!(zmq_msg_data(&mut m).is_null());
        assert_eq!(errno(), libc::EFAULT);
        fails(zmq_msg_init(null_mut()), libc::EFAULT);

        assert_eq!(zmq_msg_init_size(&mut m, 1000), 0);
        assert_eq!(zmq_msg_size(&m), 1000);
        let d = zmq_msg_data(&mut m) as *mut u8;
        assert!(!d.is_null());
        assert_eq!(*d, 0);
        d.write_bytes(7, 1000);
        assert_eq!(zmq_msg_more(&m), 0);
        assert_eq!(zmq_msg_get(&m, ZMQ_MORE), 0);
        assert_eq!(zmq_msg_get(&m, ZMQ_SHARED), 0);
        fails(zmq_msg_get(&m, ZMQ_SRCFD), libc::EINVAL);
        fails(zmq_msg_get(&m, 99), libc::EINVAL);
        fails(zmq_msg_set(&mut m, ZMQ_MORE, 1), libc::EINVAL);
        assert!(zmq_msg_gets(&m, c"Socket-Type".as_ptr()).is_null());
        assert_eq!(errno(), libc::EINVAL);

        // Copy shares the bytes and marks both shared; dest must be initialised.
        fails(zmq_msg_copy(&mut other, &mut m), libc::EFAULT);
        assert_eq!(zmq_msg_init(&mut other), 0);
        assert_eq!(zmq_msg_copy(&mut other, &mut m), 0);
        assert_eq!(zmq_msg_data(&mut other), d.cast());
        assert_eq!(zmq_msg_get(&m, ZMQ_SHARED), 1);
        assert_eq!(zmq_msg_get(&other, ZMQ_SHARED), 1);

        // Move empties the source.
        let mut third = new_msg();
        assert_eq!(zmq_msg_init_size(&mut third, 3), 0);
        assert_eq!(zmq_msg_move(&mut third, &mut other), 0);
        assert_eq!(zmq_msg_size(&third), 1000);
        assert_eq!(zmq_msg_size(&other), 0);
        assert_eq!(*(zmq_msg_data(&mut third) as *const u8).add(999), 7);

        // A zmq_msg_t moved with memcpy stays usable.
        let moved: zmq_msg_t = std::ptr::read(&third);
        let mut moved = moved;
        assert_eq!(zmq_msg_size(&moved), 1000);
        assert_eq!(zmq_msg_close(&mut moved), 0);

        assert_eq!(zmq_msg_close(&mut m), 0);
        fails(zmq_msg_close(&mut m), libc::EFAULT);
        assert_eq!(zmq_msg_size(&m), 0);
        assert_eq!(zmq_msg_close(&mut other), 0);

        // Small messages are inline; zero-size ones too.
        assert_eq!(zmq_msg_init_size(&mut m, 0), 0);
        assert_eq!(zmq_msg_size(&m), 0);
        assert_eq!(zmq_msg_close(&mut m), 0);
    }
}

#[test]
fn a_receive_releases_the_previous_content_first() {
    // As libzmq: zmq_msg_recv releases what the message held before it receives, so a receive
    // that fails (EAGAIN) leaves it empty, whether it held an inline frame or a larger one.
    let ctx = Ctx::new();
    let a = ctx.socket(ZMQ_PAIR);
    let b = ctx.socket(ZMQ_PAIR);
    bind(a, "inproc://release-first");
    connect(b, "inproc://release-first");
    let mut m = new_msg();
    // SAFETY: m is a live zmq_msg_t on this stack.
    unsafe {
        assert_eq!(zmq_msg_init(&mut m), 0);
        for body in [&b"hello"[..], &[7u8; 4000][..]] {
            assert_eq!(send(b, body, 0), body.len() as c_int);
            assert_eq!(zmq_msg_recv(&mut m, a, 0), body.len() as c_int);
            assert_eq!(zmq_msg_size(&m), body.len());
            fails(zmq_msg_recv(&mut m, a, ZMQ_DONTWAIT), libc::EAGAIN);
            assert_eq!(zmq_msg_size(&m), 0, "after {} bytes", body.len());
        }
        assert_eq!(zmq_msg_close(&mut m), 0);
    }
    close(a);
    close(b);
}

static FREED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_free(data: *mut c_void, hint: *mut c_void) {
    assert_eq!(hint as usize, 0x5eed);
    // SAFETY: data was produced by Box::into_raw of a Box<[u8; 4096]> in the test.
    drop(unsafe { Box::from_raw(data as *mut [u8; 4096]) });
    FREED.fetch_add(1, Ordering::SeqCst);
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn init_data_free_runs_once_after_tcp_send() {
    let ctx = Ctx::new();
    let pull = ctx.socket(ZMQ_PULL);
    bind(pull, "tcp://127.0.0.1:*");
    let ep = last_endpoint(pull);
    assert!(ep.starts_with("tcp://127.0.0.1:"), "{ep}");
    let push = ctx.socket(ZMQ_PUSH);
    connect(push, &ep);

    let base = FREED.load(Ordering::SeqCst);
    let data = Box::into_raw(Box::new([0x42u8; 4096]));
    let mut m = new_msg();
    let mut copy = new_msg();
    // SAFETY: data stays valid until count_free runs; the messages are live stack values.
    unsafe {
        assert_eq!(
            zmq_msg_init_data(
                &mut m,
                data.cast(),
                4096,
                Some(count_free),
                0x5eed as *mut c_void
            ),
            0
        );
        assert_eq!(zmq_msg_init(&mut copy), 0);
        assert_eq!(zmq_msg_copy(&mut copy, &mut m), 0);
        assert_eq!(zmq_msg_send(&mut m, push, 0), 4096);
        // After a successful send the message is empty and still initialised.
        assert_eq!(zmq_msg_size(&m), 0);
        assert_eq!(zmq_msg_close(&mut m), 0);
    }
    assert_eq!(recv(pull), vec![0x42u8; 4096]);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        FREED.load(Ordering::SeqCst),
        base,
        "the copy still owns the buffer"
    );
    // SAFETY: live message.
    unsafe {
        assert_eq!(zmq_msg_send(&mut copy, push, 0), 4096);
        assert_eq!(zmq_msg_close(&mut copy), 0);
    }
    assert_eq!(recv(pull), vec![0x42u8; 4096]);
    wait_until("the free callback", || FREED.load(Ordering::SeqCst) > base);
    close(push);
    close(pull);
    drop(ctx);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(FREED.load(Ordering::SeqCst), base + 1, "exactly once");
}

/// The free callback re-enters the library and sends on an inproc socket (pyzmq's pattern).
struct Reentrant {
    notify: *mut c_void,
}

unsafe extern "C" fn notify_free(data: *mut c_void, hint: *mut c_void) {
    // SAFETY: hint points to the test's Reentrant, alive until the notification is received.
    let r = unsafe { &*(hint as *const Reentrant) };
    let id = (data as usize).to_ne_bytes();
    // SAFETY: the notify socket is used only by this callback until the test reads the result.
    let rc = unsafe { zmq_send(r.notify, id.as_ptr().cast(), id.len(), 0) };
    assert_eq!(rc, id.len() as c_int);
}

#[test]
fn init_data_free_may_reenter() {
    let ctx = Ctx::new();
    let sink = ctx.socket(ZMQ_PULL);
    bind(sink, "inproc://freed");
    let notify = ctx.socket(ZMQ_PUSH);
    connect(notify, "inproc://freed");
    let pull = ctx.socket(ZMQ_PULL);
    bind(pull, "tcp://127.0.0.1:*");
    let push = ctx.socket(ZMQ_PUSH);
    connect(push, &last_endpoint(pull));

    static BUF: [u8; 100_000] = [9; 100_000];
    let r = Box::new(Reentrant { notify });
    let mut m = new_msg();
    // SAFETY: BUF is static; r outlives the callback (we wait for its notification below).
    unsafe {
        let rp: *const Reentrant = &*r;
        assert_eq!(
            zmq_msg_init_data(
                &mut m,
                BUF.as_ptr() as *mut c_void,
                BUF.len(),
                Some(notify_free),
                rp as *mut c_void
            ),
            0
        );
        assert_eq!(zmq_msg_send(&mut m, push, 0), BUF.len() as c_int);
    }
    assert_eq!(recv(pull).len(), BUF.len());
    set_int(sink, ZMQ_RCVTIMEO, 5000);
    assert_eq!(recv(sink), (BUF.as_ptr() as usize).to_ne_bytes());
    // SAFETY: live message (empty after send).
    unsafe { assert_eq!(zmq_msg_close(&mut m), 0) };
    for s in [push, pull, notify, sink] {
        close(s);
    }
    drop(r);
}

// ----- socket options ------------------------------------------------------------------------

#[test]
fn sockopt_buffer_rules() {
    let ctx = Ctx::new();
    let s = ctx.socket(ZMQ_DEALER);
    // SAFETY: every buffer passed below is live and at least as long as said.
    unsafe {
        // int options need exactly sizeof(int).
        assert_eq!(get_int(s, ZMQ_TYPE), ZMQ_DEALER);
        let mut big = [0xFFu8; 8];
        let mut len = 8usize;
        fails(
            zmq_getsockopt(s, ZMQ_TYPE, big.as_mut_ptr().cast(), &mut len),
            libc::EINVAL,
        );
        let mut len = 2usize;
        fails(
            zmq_getsockopt(s, ZMQ_LINGER, big.as_mut_ptr().cast(), &mut len),
            libc::EINVAL,
        );
        fails(
            zmq_setsockopt(s, ZMQ_LINGER, big.as_ptr().cast(), 8),
            libc::EINVAL,
        );
        set_int(s, ZMQ_LINGER, 250);
        assert_eq!(get_int(s, ZMQ_LINGER), 250);

        // Socket-level ints accept larger buffers and report sizeof(int).
        let mut len = 8usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_RCVMORE, big.as_mut_ptr().cast(), &mut len),
            0
        );
        assert_eq!((len, big), (4, [0u8; 8]));
        let mut fd: c_int = -1;
        let mut len = 4usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_FD, (&mut fd as *mut c_int).cast(), &mut len),
            0
        );
        assert!(fd >= 0);
        assert_eq!(get_int(s, ZMQ_EVENTS) & 1, 0);

        // int64 option.
        let max: i64 = 1 << 40;
        assert_eq!(
            zmq_setsockopt(s, ZMQ_MAXMSGSIZE, (&max as *const i64).cast(), 8),
            0
        );
        let mut got: i64 = 0;
        let mut len = 8usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_MAXMSGSIZE, (&mut got as *mut i64).cast(), &mut len),
            0
        );
        assert_eq!(got, max);
        let mut len = 4usize;
        fails(
            zmq_getsockopt(s, ZMQ_MAXMSGSIZE, (&mut got as *mut i64).cast(), &mut len),
            libc::EINVAL,
        );

        // Binary routing id: no NUL, length reported.
        let rid = [0u8, 1, 2, 255];
        assert_eq!(zmq_setsockopt(s, ZMQ_ROUTING_ID, rid.as_ptr().cast(), 4), 0);
        let mut buf = [0xEEu8; 16];
        let mut len = 16usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_ROUTING_ID, buf.as_mut_ptr().cast(), &mut len),
            0
        );
        assert_eq!(&buf[..len], &rid);
        let mut len = 3usize;
        fails(
            zmq_getsockopt(s, ZMQ_ROUTING_ID, buf.as_mut_ptr().cast(), &mut len),
            libc::EINVAL,
        );

        // Strings are NUL-terminated and the length includes the NUL; too small is EINVAL.
        let proxy = b"127.0.0.1:1080";
        assert_eq!(
            zmq_setsockopt(s, ZMQ_SOCKS_PROXY, proxy.as_ptr().cast(), proxy.len()),
            0
        );
        let mut len = 16usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_SOCKS_PROXY, buf.as_mut_ptr().cast(), &mut len),
            0
        );
        assert_eq!(len, proxy.len() + 1);
        assert_eq!(&buf[..len], b"127.0.0.1:1080\0");
        let mut len = proxy.len();
        fails(
            zmq_getsockopt(s, ZMQ_SOCKS_PROXY, buf.as_mut_ptr().cast(), &mut len),
            libc::EINVAL,
        );

        // LAST_ENDPOINT: empty before any bind, then the resolved address.
        let mut len = 16usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf.as_mut_ptr().cast(), &mut len),
            0
        );
        assert_eq!((len, buf[0]), (1, 0));
        bind(s, "tcp://127.0.0.1:*");
        let ep = last_endpoint(s);
        let port: u16 = ep.rsplit(':').next().unwrap().parse().unwrap();
        assert!(port > 0);
        let mut len = 5usize;
        fails(
            zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf.as_mut_ptr().cast(), &mut len),
            libc::EINVAL,
        );

        // Bad arguments.
        fails(
            zmq_setsockopt(s, 9999, big.as_ptr().cast(), 4),
            libc::EINVAL,
        );
        fails(
            zmq_getsockopt(s, 9999, big.as_mut_ptr().cast(), &mut 4usize),
            libc::EINVAL,
        );
        fails(zmq_setsockopt(s, ZMQ_LINGER, null(), 4), libc::EINVAL);
        fails(
            zmq_getsockopt(s, ZMQ_LINGER, big.as_mut_ptr().cast(), null_mut()),
            libc::EFAULT,
        );
        fails(
            zmq_setsockopt(s, ZMQ_SUBSCRIBE, b"x".as_ptr().cast(), 1),
            libc::EINVAL,
        );
        fails(
            zmq_setsockopt(null_mut(), ZMQ_LINGER, big.as_ptr().cast(), 4),
            libc::ENOTSOCK,
        );
    }
    close(s);
}

/// libzmq tells `zmq_setsockopt (s, opt, NULL, 0)` (clear) from a non-NULL empty value
/// (`EINVAL` for the string options). rzmq-core's `Options::set_raw` does, but `Socket` only
/// takes a slice so far.
#[test]
fn sockopt_null_clears_string_options() {
    let ctx = Ctx::new();
    let s = ctx.socket(ZMQ_DEALER);
    let proxy = b"127.0.0.1:1080";
    let mut buf = [0xEEu8; 16];
    // SAFETY: buffers are live and sized as passed.
    unsafe {
        assert_eq!(
            zmq_setsockopt(s, ZMQ_SOCKS_PROXY, proxy.as_ptr().cast(), proxy.len()),
            0
        );
        fails(
            zmq_setsockopt(s, ZMQ_SOCKS_PROXY, buf.as_ptr().cast(), 0),
            libc::EINVAL,
        );
        assert_eq!(zmq_setsockopt(s, ZMQ_SOCKS_PROXY, null(), 0), 0);
        let mut len = 16usize;
        assert_eq!(
            zmq_getsockopt(s, ZMQ_SOCKS_PROXY, buf.as_mut_ptr().cast(), &mut len),
            0
        );
        assert_eq!((len, buf[0]), (1, 0));
    }
    close(s);
}

// ----- errno values ----------------------------------------------------------------------------

#[test]
fn errno_values() {
    assert_eq!(strerror(ETERM), "Context was terminated");
    assert_eq!(
        strerror(EFSM),
        "Operation cannot be accomplished in current state"
    );
    assert_eq!(strerror(libc::EAGAIN), "Resource temporarily unavailable");
    assert_eq!(
        zmq_strerror(libc::EINVAL),
        zmq_strerror(libc::EINVAL),
        "cached, stable pointer"
    );

    let ctx = Ctx::new();
    // SAFETY: pointers are live handles, NULL, or deliberately wrong handles of this library.
    unsafe {
        assert!(zmq_socket(null_mut(), ZMQ_PAIR).is_null());
        assert_eq!(errno(), libc::EFAULT);
        assert!(zmq_socket(ctx.0, 99).is_null());
        assert_eq!(errno(), libc::EINVAL);
        fails(zmq_close(null_mut()), libc::ENOTSOCK);
        // A context is not a socket, nor a socket a context.
        fails(zmq_close(ctx.0), libc::ENOTSOCK);
        let s = ctx.socket(ZMQ_PAIR);
        fails(zmq_ctx_shutdown(s), libc::EFAULT);
        fails(zmq_ctx_term(null_mut()), libc::EFAULT);
        fails(zmq_ctx_set(ctx.0, 12345, 1), libc::EINVAL);
        assert_eq!(zmq_ctx_get(ctx.0, 6), 64, "ZMQ_MSG_T_SIZE");
        assert_eq!(zmq_ctx_set(ctx.0, 2, 100), 0);
        assert_eq!(zmq_ctx_get(ctx.0, 2), 100);

        // Endpoints.
        fails(zmq_bind(s, c"foo://bar".as_ptr()), libc::EPROTONOSUPPORT);
        fails(zmq_bind(s, c"tcp://".as_ptr()), libc::EINVAL);
        fails(zmq_bind(s, null()), libc::EINVAL);
        fails(
            zmq_unbind(s, c"inproc://never-bound".as_ptr()),
            libc::ENOENT,
        );
        fails(
            zmq_disconnect(s, c"tcp://127.0.0.1:1".as_ptr()),
            libc::ENOENT,
        );
        bind(s, "inproc://errno");
        let s2 = ctx.socket(ZMQ_PAIR);
        fails(zmq_bind(s2, c"inproc://errno".as_ptr()), libc::EADDRINUSE);

        // Send/recv.
        fails(zmq_recv(s, null_mut(), 0, ZMQ_DONTWAIT), libc::EAGAIN);
        fails(zmq_send(s, null(), 5, 0), libc::EFAULT);
        fails(zmq_sendiov(s, null_mut(), 0, 0), libc::EINVAL);

        // REQ's state machine.
        let req = ctx.socket(ZMQ_REQ);
        let rep = ctx.socket(ZMQ_REP);
        bind(rep, "inproc://fsm");
        connect(req, "inproc://fsm");
        fails(zmq_recv(req, null_mut(), 0, ZMQ_DONTWAIT), EFSM);
        assert_eq!(send(req, b"q", 0), 1);
        fails(send(req, b"q", 0), EFSM);

        // A closed socket is not a socket any more.
        close(s);
        fails(zmq_close(s), libc::ENOTSOCK);
        fails(send(s, b"x", 0), libc::ENOTSOCK);
        fails(zmq_bind(s, c"inproc://x".as_ptr()), libc::ENOTSOCK);
        for x in [s2, req, rep] {
            close(x);
        }
    }
}

#[test]
fn shutdown_gives_eterm_and_term_waits_for_close() {
    let ctx = zmq_ctx_new();
    // SAFETY: ctx is live until zmq_ctx_term below, which waits for the thread's socket.
    unsafe {
        let s = zmq_socket(ctx, ZMQ_PULL);
        bind(s, "inproc://term");
        let sp = s as usize;
        let waiter = std::thread::spawn(move || {
            let s = sp as *mut c_void;
            let mut b = [0u8; 8];
            let rc = zmq_recv(s, b.as_mut_ptr().cast(), 8, 0);
            let e = zmq_errno();
            // Every later call gets ETERM too, until the socket is closed.
            let rc2 = zmq_send(s, b.as_ptr().cast(), 1, 0);
            let e2 = zmq_errno();
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(zmq_close(s), 0);
            (rc, e, rc2, e2, t)
        });
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        assert_eq!(zmq_ctx_term(ctx), 0);
        let (rc, e, rc2, e2, closed_at) = waiter.join().unwrap();
        assert_eq!((rc, e), (-1, ETERM));
        assert_eq!((rc2, e2), (-1, ETERM));
        assert!(
            t0.elapsed() >= Duration::from_millis(90),
            "term waited for the close"
        );
        assert!(closed_at.elapsed() < Duration::from_secs(5));
        // The context handle is gone.
        fails(zmq_ctx_term(ctx), libc::EFAULT);
        assert!(zmq_socket(ctx, ZMQ_PAIR).is_null());
    }

    // Shutdown: new sockets are refused with ETERM, existing ones fail with ETERM.
    let ctx = zmq_ctx_new();
    // SAFETY: ctx is live until the zmq_ctx_term below.
    unsafe {
        let s = zmq_socket(ctx, ZMQ_PAIR);
        assert_eq!(zmq_ctx_shutdown(ctx), 0);
        assert!(zmq_socket(ctx, ZMQ_PAIR).is_null());
        assert_eq!(errno(), ETERM);
        fails(send(s, b"x", ZMQ_DONTWAIT), ETERM);
        // As libzmq: once the socket has seen the termination, every option call is ETERM.
        let zero: c_int = 0;
        fails(
            zmq_setsockopt(s, ZMQ_LINGER, (&zero as *const c_int).cast(), 4),
            ETERM,
        );
        assert_eq!(zmq_close(s), 0);
        assert_eq!(zmq_ctx_term(ctx), 0);
    }
}

// ----- multipart, iov, poll, proxy -------------------------------------------------------------

#[test]
fn iov_round_trip() {
    let ctx = Ctx::new();
    let a = ctx.socket(ZMQ_PAIR);
    let b = ctx.socket(ZMQ_PAIR);
    bind(a, "inproc://iov");
    connect(b, "inproc://iov");
    let parts: [&[u8]; 3] = [b"one", b"", b"three"];
    let mut iov: Vec<libc::iovec> = parts
        .iter()
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut c_void,
            iov_len: p.len(),
        })
        .collect();
    // SAFETY: iov describes live buffers; received buffers are malloc'ed and freed here.
    unsafe {
        assert_eq!(zmq_sendiov(a, iov.as_mut_ptr(), 3, ZMQ_SNDMORE), 5);
        let mut out = vec![
            libc::iovec {
                iov_base: null_mut(),
                iov_len: 0
            };
            8
        ];
        let mut count = 8usize;
        assert_eq!(zmq_recviov(b, out.as_mut_ptr(), &mut count, 0), 3);
        assert_eq!(count, 3);
        for (o, p) in out.iter().zip(parts) {
            assert_eq!(
                std::slice::from_raw_parts(o.iov_base as *const u8, o.iov_len),
                p
            );
            libc::free(o.iov_base);
        }
        assert_eq!(get_int(b, ZMQ_RCVMORE), 0);
    }
    close(a);
    close(b);
}

#[test]
fn poll_sockets_and_duplicates() {
    let ctx = Ctx::new();
    let a = ctx.socket(ZMQ_PAIR);
    let b = ctx.socket(ZMQ_PAIR);
    bind(a, "inproc://poll");
    connect(b, "inproc://poll");
    let mut items = [
        zmq_pollitem_t {
            socket: a,
            fd: 0,
            events: ZMQ_POLLIN,
            revents: -1,
        },
        zmq_pollitem_t {
            socket: a,
            fd: 0,
            events: ZMQ_POLLIN | ZMQ_POLLOUT,
            revents: -1,
        },
    ];
    // SAFETY: items is a live array of two entries with live sockets.
    unsafe {
        assert_eq!(zmq_poll(items.as_mut_ptr(), 1, 0), 0);
        assert_eq!(items[0].revents, 0);
        let t = Instant::now();
        assert_eq!(zmq_poll(items.as_mut_ptr(), 1, 50), 0);
        assert!(t.elapsed() >= Duration::from_millis(45));
        assert_eq!(send(b, b"x", 0), 1);
        assert_eq!(zmq_poll(items.as_mut_ptr(), 2, -1), 2);
        assert_eq!(items[0].revents, ZMQ_POLLIN);
        assert_eq!(items[1].revents, ZMQ_POLLIN | ZMQ_POLLOUT);
        fails(zmq_poll(null_mut(), 1, 0), libc::EFAULT);
    }
    assert_eq!(recv(a), b"x");
    close(a);
    close(b);
}

#[test]
fn proxy_steerable_terminate() {
    let ctx = Ctx::new();
    let front = ctx.socket(ZMQ_PULL);
    let back = ctx.socket(ZMQ_PUSH);
    let ctl_in = ctx.socket(ZMQ_PAIR);
    bind(front, "inproc://front");
    bind(back, "inproc://back");
    bind(ctl_in, "inproc://ctl");
    let src = ctx.socket(ZMQ_PUSH);
    let dst = ctx.socket(ZMQ_PULL);
    let ctl = ctx.socket(ZMQ_PAIR);
    connect(src, "inproc://front");
    connect(dst, "inproc://back");
    connect(ctl, "inproc://ctl");
    let (f, b, c2) = (front as usize, back as usize, ctl_in as usize);
    // SAFETY: the proxy thread is the only user of front/back/ctl_in until it returns.
    let t = std::thread::spawn(move || unsafe {
        zmq_proxy_steerable(
            f as *mut c_void,
            b as *mut c_void,
            null_mut(),
            c2 as *mut c_void,
        )
    });
    assert_eq!(send(src, b"through", 0), 7);
    assert_eq!(recv(dst), b"through");
    assert_eq!(send(ctl, b"TERMINATE", 0), 9);
    assert_eq!(t.join().unwrap(), 0);
    // SAFETY: NULL frontend/backend are refused without touching anything.
    unsafe { fails(zmq_proxy(null_mut(), back, null_mut()), libc::EFAULT) };
    for s in [front, back, ctl_in, src, dst, ctl] {
        close(s);
    }
}

#[test]
fn monitor_rejects_bad_arguments() {
    let ctx = Ctx::new();
    let s = ctx.socket(ZMQ_PUB);
    // SAFETY: live socket; strings are valid.
    unsafe {
        fails(
            zmq_socket_monitor(s, c"tcp://127.0.0.1:9".as_ptr(), 0xFFFF),
            libc::EPROTONOSUPPORT,
        );
        fails(
            zmq_socket_monitor(s, c"inproc://m".as_ptr(), 0x1_0000),
            libc::EINVAL,
        );
        fails(
            zmq_socket_monitor(null_mut(), c"inproc://m".as_ptr(), 0xFFFF),
            libc::ENOTSOCK,
        );
        assert_eq!(zmq_socket_monitor(s, c"inproc://m".as_ptr(), 0xFFFF), 0);
        assert_eq!(zmq_socket_monitor(s, null(), 0), 0);
    }
    close(s);
}

// ----- utilities -------------------------------------------------------------------------------

#[test]
fn z85_vectors() {
    let data: [u8; 8] = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
    let mut text = [0x55 as c_char; 11];
    let mut back = [0u8; 8];
    // SAFETY: buffers are sized per the functions' contracts.
    unsafe {
        assert_eq!(
            zmq_z85_encode(text.as_mut_ptr(), data.as_ptr(), 8),
            text.as_mut_ptr()
        );
        assert_eq!(CStr::from_ptr(text.as_ptr()).to_bytes(), b"HelloWorld");
        assert_eq!(
            zmq_z85_decode(back.as_mut_ptr(), c"HelloWorld".as_ptr()),
            back.as_mut_ptr()
        );
        assert_eq!(back, data);

        assert!(zmq_z85_encode(text.as_mut_ptr(), data.as_ptr(), 7).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(zmq_z85_decode(back.as_mut_ptr(), c"Hello1".as_ptr()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(zmq_z85_decode(back.as_mut_ptr(), c"Hell\"".as_ptr()).is_null());
        assert!(zmq_z85_decode(back.as_mut_ptr(), c"".as_ptr()).is_null());
        assert!(zmq_z85_decode(back.as_mut_ptr(), c"%%%%%".as_ptr()).is_null());

        // Round trip of a 32-byte key, as CURVE uses.
        let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37)).collect();
        let mut z = [0 as c_char; 41];
        assert!(!zmq_z85_encode(z.as_mut_ptr(), key.as_ptr(), 32).is_null());
        assert_eq!(CStr::from_ptr(z.as_ptr()).to_bytes().len(), 40);
        let mut k2 = [0u8; 32];
        assert!(!zmq_z85_decode(k2.as_mut_ptr(), z.as_ptr()).is_null());
        assert_eq!(&k2[..], &key[..]);

        // CURVE key pairs: Z85 text, and the public key derives from the secret.
        let mut pubk = [0 as c_char; 41];
        let mut seck = [0 as c_char; 41];
        assert_eq!(zmq_curve_keypair(pubk.as_mut_ptr(), seck.as_mut_ptr()), 0);
        assert_eq!(CStr::from_ptr(pubk.as_ptr()).to_bytes().len(), 40);
        assert_eq!(CStr::from_ptr(seck.as_ptr()).to_bytes().len(), 40);
        let mut derived = [0 as c_char; 41];
        assert_eq!(zmq_curve_public(derived.as_mut_ptr(), seck.as_ptr()), 0);
        assert_eq!(derived, pubk);
        let mut pub2 = [0 as c_char; 41];
        let mut sec2 = [0 as c_char; 41];
        assert_eq!(zmq_curve_keypair(pub2.as_mut_ptr(), sec2.as_mut_ptr()), 0);
        assert_ne!(sec2, seck);
        // RFC 7748's Alice: secret 77076d0a..., public 8520f009...
        let alice_sec: [u8; 32] = [
            0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1, 0x72, 0x51, 0xb2,
            0x66, 0x45, 0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0, 0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5,
            0x1d, 0xb9, 0x2c, 0x2a,
        ];
        let mut zs = [0 as c_char; 41];
        assert!(!zmq_z85_encode(zs.as_mut_ptr(), alice_sec.as_ptr(), 32).is_null());
        assert_eq!(zmq_curve_public(derived.as_mut_ptr(), zs.as_ptr()), 0);
        let mut alice_pub = [0u8; 32];
        assert!(!zmq_z85_decode(alice_pub.as_mut_ptr(), derived.as_ptr()).is_null());
        assert_eq!(&alice_pub[..4], &[0x85, 0x20, 0xf0, 0x09]);
        // A secret that is not 40 Z85 characters.
        fails(
            zmq_curve_public(derived.as_mut_ptr(), c"HelloWorld".as_ptr()),
            libc::EINVAL,
        );
        fails(zmq_curve_public(derived.as_mut_ptr(), null()), libc::EINVAL);
        fails(
            zmq_curve_keypair(null_mut(), seck.as_mut_ptr()),
            libc::EINVAL,
        );
    }
}

#[test]
fn version_has_counters_stopwatch() {
    let (mut a, mut b, mut p) = (0, 0, 0);
    // SAFETY: live ints; NULL is allowed.
    unsafe {
        zmq_version(&mut a, &mut b, &mut p);
        zmq_version(null_mut(), null_mut(), null_mut());
        assert_eq!((a, b, p), (4, 3, 5));
        assert_eq!(zmq_has(c"ipc".as_ptr()), 1);
        assert_eq!(zmq_has(c"curve".as_ptr()), 1);
        for cap in [c"pgm", c"tipc", c"norm", c"gssapi", c"draft", c"nonsense"] {
            assert_eq!(zmq_has(cap.as_ptr()), 0, "{cap:?}");
        }
        assert_eq!(zmq_has(null()), 0);

        let mut cnt = zmq_atomic_counter_new();
        assert_eq!(zmq_atomic_counter_value(cnt), 0);
        assert_eq!(zmq_atomic_counter_inc(cnt), 0);
        assert_eq!(zmq_atomic_counter_inc(cnt), 1);
        assert_eq!(zmq_atomic_counter_dec(cnt), 1);
        assert_eq!(zmq_atomic_counter_dec(cnt), 0);
        zmq_atomic_counter_set(cnt, 42);
        assert_eq!(zmq_atomic_counter_value(cnt), 42);
        zmq_atomic_counter_destroy(&mut cnt);
        assert!(cnt.is_null());

        let w = zmq_stopwatch_start();
        std::thread::sleep(Duration::from_millis(20));
        let mid = zmq_stopwatch_intermediate(w);
        assert!(mid >= 19_000, "{mid}");
        assert!(zmq_stopwatch_stop(w) >= mid);
    }
}

static THREAD_RAN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn thread_body(arg: *mut c_void) {
    THREAD_RAN.fetch_add(arg as usize, Ordering::SeqCst);
}

#[test]
fn threads() {
    // SAFETY: thread_body is safe on any thread; the handle is closed once.
    unsafe {
        let t = zmq_threadstart(Some(thread_body), 5 as *mut c_void);
        assert!(!t.is_null());
        zmq_threadclose(t);
        assert!(zmq_threadstart(None, null_mut()).is_null());
    }
    assert_eq!(THREAD_RAN.load(Ordering::SeqCst), 5);
}

struct TimerLog {
    timers: *mut c_void,
    fired: Vec<c_int>,
    cancel_self: bool,
}

unsafe extern "C" fn on_timer(id: c_int, arg: *mut c_void) {
    // SAFETY: arg is the test's TimerLog, alive for the whole test, used on this thread only.
    let log = unsafe { &mut *(arg as *mut TimerLog) };
    log.fired.push(id);
    if log.cancel_self {
        // Re-entering the timer set from its own handler.
        // SAFETY: live timer set.
        assert_eq!(unsafe { zmq_timers_cancel(log.timers, id) }, 0);
    }
}

#[test]
fn timers() {
    // SAFETY: the timer set and the logs live until destroyed at the end.
    unsafe {
        let mut nothing: *mut c_void = null_mut();
        fails(zmq_timers_destroy(&mut nothing), libc::EFAULT);
        fails(
            zmq_timers_add(null_mut(), 10, Some(on_timer), null_mut()),
            libc::EFAULT,
        );
        fails(
            zmq_timers_execute((&mut nothing as *mut *mut c_void).cast()),
            libc::EFAULT,
        );

        let mut t = zmq_timers_new();
        assert!(!t.is_null());
        fails(zmq_timers_cancel(t, 1), libc::EINVAL);
        fails(zmq_timers_reset(t, 1), libc::EINVAL);
        fails(zmq_timers_set_interval(t, 1, 5), libc::EINVAL);
        fails(zmq_timers_add(t, 10, None, null_mut()), libc::EFAULT);
        assert_eq!(zmq_timers_timeout(t), -1);

        let mut periodic = TimerLog {
            timers: t,
            fired: vec![],
            cancel_self: false,
        };
        let mut once = TimerLog {
            timers: t,
            fired: vec![],
            cancel_self: true,
        };
        let p = zmq_timers_add(
            t,
            30,
            Some(on_timer),
            (&mut periodic as *mut TimerLog).cast(),
        );
        let o = zmq_timers_add(t, 10, Some(on_timer), (&mut once as *mut TimerLog).cast());
        assert_eq!((p, o), (1, 2));
        let far = zmq_timers_add(
            t,
            usize::MAX,
            Some(on_timer),
            (&mut periodic as *mut TimerLog).cast(),
        );
        assert_eq!(far, 3);
        let timeout = zmq_timers_timeout(t);
        assert!((0..=10).contains(&timeout), "{timeout}");
        assert_eq!(zmq_timers_execute(t), 0);

        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(200) {
            let to = zmq_timers_timeout(t);
            assert!(to >= 0);
            std::thread::sleep(Duration::from_millis(to.min(20) as u64));
            assert_eq!(zmq_timers_execute(t), 0);
        }
        assert_eq!(once.fired, vec![o], "fired once, then cancelled itself");
        assert!(periodic.fired.len() >= 3, "{:?}", periodic.fired);
        assert!(periodic.fired.iter().all(|&id| id == p));
        fails(zmq_timers_cancel(t, o), libc::EINVAL);
        assert_eq!(zmq_timers_cancel(t, p), 0);
        fails(zmq_timers_cancel(t, p), libc::EINVAL);
        assert_eq!(zmq_timers_set_interval(t, far, 1), 0);
        assert_eq!(zmq_timers_reset(t, far), 0);
        assert_eq!(zmq_timers_cancel(t, far), 0);

        assert_eq!(zmq_timers_destroy(&mut t), 0);
        assert!(t.is_null());
    }
}

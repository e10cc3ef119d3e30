//! Thread-safe sockets through the DRAFT C ABI (`cargo test -p rzmq-capi --features draft
//! --test thread_safe`): no `ZMQ_FD` (EINVAL, as libzmq 4.3.5), several threads blocked in
//! `zmq_recv` on one SERVER, `zmq_poll` and `zmq_poller_*` woken through a signaler of their
//! own, `zmq_poller_fd` readable until the poller's wait takes the signal.
#![cfg(feature = "draft")]

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::time::Duration;

use zmq::*;

use rzmq_core::options::{FD as ZMQ_FD, LAST_ENDPOINT, RCVTIMEO, THREAD_SAFE};
use rzmq_core::SocketType;

const ZMQ_SERVER: c_int = SocketType::Server as c_int;
const ZMQ_CLIENT: c_int = SocketType::Client as c_int;
const ZMQ_POLLIN: i16 = 1;

/// A socket handle that may cross threads (a thread-safe socket, or one handed over whole).
#[derive(Clone, Copy)]
struct H(*mut c_void);
// SAFETY: only thread-safe socket handles (and the context) are shared between threads here.
unsafe impl Send for H {}
// SAFETY: as above.
unsafe impl Sync for H {}

impl H {
    /// The handle (a method, so that closures capture the whole `H`, which is `Send`).
    fn get(self) -> *mut c_void {
        self.0
    }
}

fn errno() -> c_int {
    zmq_errno()
}

fn socket(ctx: *mut c_void, ty: c_int) -> *mut c_void {
    // SAFETY: live context.
    let s = unsafe { zmq_socket(ctx, ty) };
    assert!(!s.is_null());
    s
}

fn set_int(s: *mut c_void, opt: c_int, v: c_int) {
    // SAFETY: v is a live int.
    let rc = unsafe { zmq_setsockopt(s, opt, (&v as *const c_int).cast(), 4) };
    assert_eq!(rc, 0);
}

/// A SERVER bound on a tcp port and a CLIENT connected to it, both with LINGER 0.
fn pair(ctx: *mut c_void) -> (*mut c_void, *mut c_void) {
    let server = socket(ctx, ZMQ_SERVER);
    let client = socket(ctx, ZMQ_CLIENT);
    for s in [server, client] {
        set_int(s, rzmq_core::options::LINGER, 0);
        set_int(s, RCVTIMEO, 10_000);
    }
    // SAFETY: live socket and string.
    let rc = unsafe { zmq_bind(server, c"tcp://127.0.0.1:*".as_ptr()) };
    assert_eq!(rc, 0);
    let mut ep = [0u8; 64];
    let mut len = ep.len();
    // SAFETY: ep holds len bytes.
    let rc = unsafe { zmq_getsockopt(server, LAST_ENDPOINT, ep.as_mut_ptr().cast(), &mut len) };
    assert_eq!(rc, 0);
    // SAFETY: live socket; the endpoint is NUL-terminated within len.
    assert_eq!(unsafe { zmq_connect(client, ep.as_ptr().cast()) }, 0);
    (server, client)
}

fn send(s: *mut c_void, data: &[u8]) {
    // SAFETY: data is live for the call.
    let rc = unsafe { zmq_send(s, data.as_ptr().cast(), data.len(), 0) };
    assert_eq!(rc, data.len() as c_int, "send: errno {}", errno());
}

/// Receives a frame (at most 64 bytes) and its routing id.
fn recv(s: *mut c_void) -> (Vec<u8>, u32) {
    let mut m = zmq_msg_t { _d: [0; 64] };
    // SAFETY: m is a live zmq_msg_t, initialised before use and closed after.
    unsafe {
        zmq_msg_init(&mut m);
        let n = zmq_msg_recv(&mut m, s, 0);
        assert!(n >= 0, "recv: errno {}", errno());
        let data =
            std::slice::from_raw_parts(zmq_msg_data(&mut m).cast::<u8>(), n as usize).to_vec();
        let rid = zmq_msg_routing_id(&mut m);
        zmq_msg_close(&mut m);
        (data, rid)
    }
}

fn reply(s: *mut c_void, rid: u32, data: &[u8]) {
    let mut m = zmq_msg_t { _d: [0; 64] };
    // SAFETY: as in recv.
    unsafe {
        assert_eq!(zmq_msg_init_size(&mut m, data.len()), 0);
        std::ptr::copy_nonoverlapping(data.as_ptr(), zmq_msg_data(&mut m).cast(), data.len());
        assert_eq!(zmq_msg_set_routing_id(&mut m, rid), 0);
        assert_eq!(zmq_msg_send(&mut m, s, 0), data.len() as c_int);
    }
}

#[test]
fn thread_safe_socket_has_no_fd() {
    let ctx = zmq_ctx_new();
    let s = socket(ctx, ZMQ_SERVER);
    let mut v: c_int = 0;
    let mut len = 4usize;
    // SAFETY: v and len are live.
    let rc = unsafe { zmq_getsockopt(s, THREAD_SAFE, (&mut v as *mut c_int).cast(), &mut len) };
    assert_eq!((rc, v), (0, 1));
    // SAFETY: as above.
    let rc = unsafe { zmq_getsockopt(s, ZMQ_FD, (&mut v as *mut c_int).cast(), &mut len) };
    assert_eq!((rc, errno()), (-1, libc::EINVAL));
    // SAFETY: live handles, closed once.
    unsafe {
        zmq_close(s);
        zmq_ctx_term(ctx);
    }
}

#[test]
fn four_threads_blocked_in_recv_on_one_server() {
    let ctx = zmq_ctx_new();
    let (server, client) = pair(ctx);
    let srv = H(server);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut n = 0;
                loop {
                    let (data, rid) = recv(srv.get());
                    if data == b"stop" {
                        return n;
                    }
                    reply(srv.get(), rid, &data);
                    n += 1;
                }
            })
        })
        .collect();
    for i in 0..100u32 {
        send(client, &i.to_le_bytes());
        assert_eq!(recv(client).0, i.to_le_bytes());
    }
    for _ in 0..4 {
        send(client, b"stop");
    }
    let served: u32 = workers.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(served, 100);
    // SAFETY: live handles, closed once; the workers are done.
    unsafe {
        zmq_close(client);
        zmq_close(server);
        zmq_ctx_term(ctx);
    }
}

/// Two threads in `zmq_poll` on one SERVER: one message wakes both (each call registers a
/// signaler of its own with the socket).
#[test]
fn zmq_poll_on_a_thread_safe_socket_wakes_every_poller() {
    let ctx = zmq_ctx_new();
    let (server, client) = pair(ctx);
    let srv = H(server);
    let pollers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let mut item = zmq_pollitem_t {
                    socket: srv.get(),
                    fd: 0,
                    events: ZMQ_POLLIN,
                    revents: 0,
                };
                // SAFETY: one live item.
                let n = unsafe { zmq_poll(&mut item, 1, 10_000) };
                (n, item.revents)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    send(client, b"x");
    for p in pollers {
        assert_eq!(p.join().unwrap(), (1, ZMQ_POLLIN));
    }
    assert_eq!(recv(server).0, b"x");
    // SAFETY: live handles, closed once.
    unsafe {
        zmq_close(client);
        zmq_close(server);
        zmq_ctx_term(ctx);
    }
}

/// `zmq_poller_fd` is the poller's own eventfd: readable after a message for a registered
/// thread-safe socket (even while another thread takes the message), until the poller waits.
#[test]
fn poller_fd_is_the_pollers_own_signal() {
    let ctx = zmq_ctx_new();
    let (server, client) = pair(ctx);
    let poller = zmq_poller_new();
    let mut fd: c_int = -1;
    // SAFETY: live poller and socket; fd is live.
    unsafe {
        assert_eq!(zmq_poller_fd(poller, &mut fd), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(zmq_poller_add(poller, server, null_mut(), ZMQ_POLLIN), 0);
        assert_eq!(zmq_poller_fd(poller, &mut fd), 0);
    }
    let readable = |ms: c_int| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    };
    let mut ev = zmq_poller_event_t {
        socket: null_mut(),
        fd: 0,
        user_data: null_mut(),
        events: 0,
    };
    // A wait with nothing to report takes any stale signal.
    // SAFETY: live poller and event.
    assert_eq!(unsafe { zmq_poller_wait(poller, &mut ev, 0) }, -1);
    assert!(!readable(0));
    send(client, b"a");
    // Another thread (here: this one, not through the poller) takes the message; the poller's
    // signal stays.
    assert_eq!(recv(server).0, b"a");
    assert!(readable(10_000));
    // SAFETY: live poller and event.
    assert_eq!(unsafe { zmq_poller_wait(poller, &mut ev, 0) }, -1);
    assert!(!readable(0), "the wait took the signal");
    send(client, b"b");
    // SAFETY: live poller and event.
    assert_eq!(unsafe { zmq_poller_wait(poller, &mut ev, 10_000) }, 0);
    assert_eq!((ev.socket, ev.events), (server, ZMQ_POLLIN));
    // SAFETY: live handles, each destroyed or closed once.
    unsafe {
        let mut p = poller;
        assert_eq!(zmq_poller_destroy(&mut p), 0);
        zmq_close(client);
        zmq_close(server);
        zmq_ctx_term(ctx);
    }
}

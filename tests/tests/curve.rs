//! CURVE (RFC 26) between rzmq and a reference libzmq built with libsodium: handshakes both
//! ways, messages both ways (multipart, 1 MiB frames, subscriptions, heartbeats), keys from
//! either library, and refused wrong keys.
//!
//! The `zmq` crate's vendored libzmq is built without CURVE, so the reference here is the
//! system's `libzmq.so.5` (Debian builds it with libsodium; `scripts/setup.sh` installs it),
//! loaded with `dlopen` by absolute path so our own `libzmq.so` can never stand in. Without it,
//! or when it lacks CURVE, the interop tests print a note and pass.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use rzmq_core::options as opt;
use rzmq_core::{monitor, z85, Context, Msg, SocketType};
use rzmq_tests::{payload, TIMEOUT_MS};

/// The reference libzmq, called through `dlopen`ed function pointers.
mod lz {
    use super::*;

    /// Where Debian and others put the system libzmq.
    const CANDIDATES: &[&str] = &[
        "/usr/lib/x86_64-linux-gnu/libzmq.so.5",
        "/usr/lib/aarch64-linux-gnu/libzmq.so.5",
        "/usr/lib64/libzmq.so.5",
        "/usr/lib/libzmq.so.5",
        "/usr/local/lib/libzmq.so.5",
    ];

    // The reference library's numbers are libzmq's, so rzmq-core's (their one definition).
    use rzmq_core::options::LAST_ENDPOINT;
    pub(crate) use rzmq_core::options::{
        CURVE_PUBLICKEY, CURVE_SECRETKEY, CURVE_SERVER, CURVE_SERVERKEY, HEARTBEAT_IVL,
        HEARTBEAT_TIMEOUT, LINGER, RCVTIMEO, SNDTIMEO, SUBSCRIBE,
    };
    use rzmq_core::SNDMORE;
    pub(crate) const PAIR: c_int = SocketType::Pair as c_int;
    pub(crate) const PUB: c_int = SocketType::Pub as c_int;
    pub(crate) const SUB: c_int = SocketType::Sub as c_int;
    pub(crate) const DEALER: c_int = SocketType::Dealer as c_int;
    pub(crate) const ROUTER: c_int = SocketType::Router as c_int;
    pub(crate) const PULL: c_int = SocketType::Pull as c_int;
    pub(crate) const PUSH: c_int = SocketType::Push as c_int;

    /// `zmq_msg_t`: 64 opaque bytes, pointer-aligned.
    #[repr(C, align(8))]
    struct ZmqMsg([u8; 64]);

    #[allow(clippy::type_complexity)]
    pub(crate) struct Lib {
        ctx_new: unsafe extern "C" fn() -> *mut c_void,
        ctx_term: unsafe extern "C" fn(*mut c_void) -> c_int,
        socket: unsafe extern "C" fn(*mut c_void, c_int) -> *mut c_void,
        close: unsafe extern "C" fn(*mut c_void) -> c_int,
        setsockopt: unsafe extern "C" fn(*mut c_void, c_int, *const c_void, usize) -> c_int,
        getsockopt: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut usize) -> c_int,
        bind: unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
        connect: unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
        send: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
        msg_init: unsafe extern "C" fn(*mut ZmqMsg) -> c_int,
        msg_recv: unsafe extern "C" fn(*mut ZmqMsg, *mut c_void, c_int) -> c_int,
        msg_data: unsafe extern "C" fn(*mut ZmqMsg) -> *mut c_void,
        msg_size: unsafe extern "C" fn(*const ZmqMsg) -> usize,
        msg_more: unsafe extern "C" fn(*const ZmqMsg) -> c_int,
        msg_close: unsafe extern "C" fn(*mut ZmqMsg) -> c_int,
        socket_monitor: unsafe extern "C" fn(*mut c_void, *const c_char, c_int) -> c_int,
        curve_keypair: unsafe extern "C" fn(*mut c_char, *mut c_char) -> c_int,
        z85_decode: unsafe extern "C" fn(*mut u8, *const c_char) -> *mut u8,
        errno: unsafe extern "C" fn() -> c_int,
    }

    /// The system libzmq when it is there and has CURVE.
    pub(crate) fn lib() -> Option<&'static Lib> {
        static LIB: OnceLock<Option<Lib>> = OnceLock::new();
        LIB.get_or_init(load).as_ref()
    }

    /// The symbol `name` of the library `h` as a function pointer of type `F`.
    ///
    /// # Safety
    /// `h` is a live `dlopen` handle and `F` is the function pointer type of `name`'s C signature.
    unsafe fn sym<F: Copy>(h: *mut c_void, name: &str) -> F {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        let n = CString::new(name).unwrap();
        // SAFETY: h is a live handle, n NUL-terminated.
        let p = unsafe { libc::dlsym(h, n.as_ptr()) };
        assert!(!p.is_null(), "libzmq lacks {name}");
        // SAFETY: F is a function pointer type of p's signature (caller's contract), the same
        // size as a data pointer on the platforms libzmq runs on.
        unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
    }

    fn load() -> Option<Lib> {
        for path in CANDIDATES {
            let c = CString::new(*path).unwrap();
            // SAFETY: a NUL-terminated path; the library stays loaded for the process.
            let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if h.is_null() {
                continue;
            }
            // SAFETY: each symbol is the libzmq 4.x function of that name, whose C signature
            // the field's type spells out.
            let lib = unsafe {
                Lib {
                    ctx_new: sym(h, "zmq_ctx_new"),
                    ctx_term: sym(h, "zmq_ctx_term"),
                    socket: sym(h, "zmq_socket"),
                    close: sym(h, "zmq_close"),
                    setsockopt: sym(h, "zmq_setsockopt"),
                    getsockopt: sym(h, "zmq_getsockopt"),
                    bind: sym(h, "zmq_bind"),
                    connect: sym(h, "zmq_connect"),
                    send: sym(h, "zmq_send"),
                    msg_init: sym(h, "zmq_msg_init"),
                    msg_recv: sym(h, "zmq_msg_recv"),
                    msg_data: sym(h, "zmq_msg_data"),
                    msg_size: sym(h, "zmq_msg_size"),
                    msg_more: sym(h, "zmq_msg_more"),
                    msg_close: sym(h, "zmq_msg_close"),
                    socket_monitor: sym(h, "zmq_socket_monitor"),
                    curve_keypair: sym(h, "zmq_curve_keypair"),
                    z85_decode: sym(h, "zmq_z85_decode"),
                    errno: sym(h, "zmq_errno"),
                }
            };
            // SAFETY: as above.
            let has: unsafe extern "C" fn(*const c_char) -> c_int = unsafe { sym(h, "zmq_has") };
            // SAFETY: a NUL-terminated string.
            if unsafe { has(c"curve".as_ptr()) } == 1 {
                return Some(lib);
            }
            eprintln!("{path} has no CURVE");
        }
        None
    }

    /// A context of the reference libzmq (terminated on drop).
    pub(crate) struct Ctx(*mut c_void);

    impl Ctx {
        /// A new context.
        pub(crate) fn new() -> Ctx {
            let l = lib().unwrap();
            // SAFETY: plain libzmq call.
            Ctx(unsafe { (l.ctx_new)() })
        }

        /// A socket of `ty` with test timeouts and linger.
        pub(crate) fn socket(&self, ty: c_int) -> Socket {
            let l = lib().unwrap();
            // SAFETY: live context.
            let s = Socket(unsafe { (l.socket)(self.0, ty) });
            assert!(!s.0.is_null());
            s.set_i32(RCVTIMEO, TIMEOUT_MS);
            s.set_i32(SNDTIMEO, TIMEOUT_MS);
            s.set_i32(LINGER, 0);
            s
        }
    }

    impl Drop for Ctx {
        fn drop(&mut self) {
            // SAFETY: every socket of this context was closed before (fields drop first).
            unsafe { (lib().unwrap().ctx_term)(self.0) };
        }
    }

    /// A socket of the reference libzmq (closed on drop).
    pub(crate) struct Socket(*mut c_void);

    impl Drop for Socket {
        fn drop(&mut self) {
            // SAFETY: live socket, closed once.
            unsafe { (lib().unwrap().close)(self.0) };
        }
    }

    fn check(rc: c_int, what: &str) {
        if rc == -1 {
            // SAFETY: plain libzmq call.
            panic!("libzmq {what}: errno {}", unsafe {
                (lib().unwrap().errno)()
            });
        }
    }

    impl Socket {
        /// `zmq_setsockopt` with raw bytes.
        pub(crate) fn set(&self, opt: c_int, v: &[u8]) {
            // SAFETY: v is readable for its length.
            let rc =
                unsafe { (lib().unwrap().setsockopt)(self.0, opt, v.as_ptr().cast(), v.len()) };
            check(rc, "setsockopt");
        }

        /// `zmq_setsockopt` with an int.
        pub(crate) fn set_i32(&self, opt: c_int, v: i32) {
            self.set(opt, &v.to_ne_bytes());
        }

        /// Binds to a fresh loopback tcp port; returns the endpoint.
        pub(crate) fn bind_tcp(&self) -> String {
            let l = lib().unwrap();
            // SAFETY: NUL-terminated endpoint; buf is writable for len bytes.
            unsafe {
                check((l.bind)(self.0, c"tcp://127.0.0.1:*".as_ptr()), "bind");
                let mut buf = [0u8; 256];
                let mut len = buf.len();
                check(
                    (l.getsockopt)(self.0, LAST_ENDPOINT, buf.as_mut_ptr().cast(), &mut len),
                    "getsockopt",
                );
                CStr::from_bytes_until_nul(&buf)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string()
            }
        }

        /// Connects to `ep`.
        pub(crate) fn connect(&self, ep: &str) {
            let c = CString::new(ep).unwrap();
            // SAFETY: NUL-terminated endpoint.
            check(
                unsafe { (lib().unwrap().connect)(self.0, c.as_ptr()) },
                "connect",
            );
        }

        /// Sends a multipart message; Err(errno) on failure.
        pub(crate) fn send_multipart(&self, parts: &[Vec<u8>]) -> Result<(), c_int> {
            let l = lib().unwrap();
            for (i, p) in parts.iter().enumerate() {
                let flags = if i + 1 < parts.len() { SNDMORE } else { 0 };
                // SAFETY: p is readable for its length.
                if unsafe { (l.send)(self.0, p.as_ptr().cast(), p.len(), flags) } == -1 {
                    // SAFETY: plain libzmq call.
                    return Err(unsafe { (l.errno)() });
                }
            }
            Ok(())
        }

        /// Receives a multipart message; Err(errno) on failure (EAGAIN on timeout).
        pub(crate) fn recv_multipart(&self) -> Result<Vec<Vec<u8>>, c_int> {
            let l = lib().unwrap();
            let mut parts = Vec::new();
            loop {
                let mut m = ZmqMsg([0; 64]);
                // SAFETY: m is a zmq_msg_t, initialised before use and closed after.
                unsafe {
                    (l.msg_init)(&mut m);
                    if (l.msg_recv)(&mut m, self.0, 0) == -1 {
                        let e = (l.errno)();
                        (l.msg_close)(&mut m);
                        return Err(e);
                    }
                    let d = (l.msg_data)(&mut m) as *const u8;
                    let n = (l.msg_size)(&m);
                    parts.push(if n == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(d, n).to_vec()
                    });
                    let more = (l.msg_more)(&m) != 0;
                    (l.msg_close)(&mut m);
                    if !more {
                        return Ok(parts);
                    }
                }
            }
        }

        /// Starts a monitor of every event on `ep`.
        pub(crate) fn monitor(&self, ep: &str) {
            let c = CString::new(ep).unwrap();
            // SAFETY: NUL-terminated endpoint.
            let rc = unsafe { (lib().unwrap().socket_monitor)(self.0, c.as_ptr(), 0xFFFF) };
            check(rc, "socket_monitor");
        }
    }

    /// A key pair from the reference libzmq (libsodium), raw bytes: (public, secret).
    pub(crate) fn keypair() -> ([u8; 32], [u8; 32]) {
        let l = lib().unwrap();
        let (mut p, mut s) = ([0 as c_char; 41], [0 as c_char; 41]);
        let (mut pk, mut sk) = ([0u8; 32], [0u8; 32]);
        // SAFETY: 41-byte buffers for the Z85 keys, 32-byte ones for the decoded keys.
        unsafe {
            check(
                (l.curve_keypair)(p.as_mut_ptr(), s.as_mut_ptr()),
                "curve_keypair",
            );
            assert!(!(l.z85_decode)(pk.as_mut_ptr(), p.as_ptr()).is_null());
            assert!(!(l.z85_decode)(sk.as_mut_ptr(), s.as_ptr()).is_null());
        }
        (pk, sk)
    }
}

/// A key pair: (public, secret).
type Keys = ([u8; 32], [u8; 32]);

fn rz_keys() -> Keys {
    let (p, s) = z85::generate_keypair().unwrap();
    (p, *s)
}

fn lz_keys() -> Keys {
    lz::keypair()
}

/// Asserts that the reference libzmq (the system's, which setup installs) is there with CURVE:
/// the interop tests need it, and a machine without it must fail them, not pass them empty.
fn require_lz_curve() {
    assert!(
        lz::lib().is_some(),
        "no system libzmq with CURVE (scripts/setup.sh installs libzmq3-dev): the CURVE \
         interop tests need it"
    );
}

fn rz(ctx: &Context, ty: SocketType) -> rzmq_core::Socket {
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, 1000).unwrap();
    s
}

fn rz_server(s: &mut rzmq_core::Socket, server: &Keys) {
    s.set_option_i32(opt::CURVE_SERVER, 1).unwrap();
    s.set_option_raw(opt::CURVE_SECRETKEY, &server.1).unwrap();
}

fn rz_client(s: &mut rzmq_core::Socket, server_public: &[u8; 32], client: &Keys) {
    // Z85 text for one key, raw bytes for the others: both forms are accepted.
    let z = z85::encode_key(server_public);
    s.set_option_raw(opt::CURVE_SERVERKEY, &z).unwrap();
    s.set_option_raw(opt::CURVE_PUBLICKEY, &client.0).unwrap();
    s.set_option_raw(opt::CURVE_SECRETKEY, &client.1).unwrap();
}

fn lz_server(s: &lz::Socket, server: &Keys) {
    s.set_i32(lz::CURVE_SERVER, 1);
    s.set(lz::CURVE_SECRETKEY, &server.1);
}

fn lz_client(s: &lz::Socket, server_public: &[u8; 32], client: &Keys) {
    // Z85 with its NUL for one key, raw bytes for the others (the reference library decodes
    // what rzmq's z85 encoded).
    let mut z = z85::encode_key(server_public).to_vec();
    z.push(0);
    s.set(lz::CURVE_SERVERKEY, &z);
    s.set(lz::CURVE_PUBLICKEY, &client.0);
    s.set(lz::CURVE_SECRETKEY, &client.1);
}

fn frames() -> Vec<Vec<u8>> {
    vec![
        b"head".to_vec(),
        Vec::new(),
        payload(300, 1),
        payload(1 << 20, 2),
        b"tail".to_vec(),
    ]
}

fn rz_send_multi(s: &mut rzmq_core::Socket, parts: &[Vec<u8>]) {
    s.send_multipart(parts.iter().map(|p| Msg::copy_from(p)), 0)
        .unwrap();
}

fn rz_recv_multi(s: &mut rzmq_core::Socket) -> Vec<Vec<u8>> {
    s.recv_multipart(0)
        .unwrap()
        .into_iter()
        .map(|m| m.data().to_vec())
        .collect()
}

/// A monitor on `s` (all events) and the PAIR reading it.
fn rz_monitor(ctx: &Context, s: &mut rzmq_core::Socket, tag: &str) -> rzmq_core::Socket {
    let ep = format!("inproc://curve-mon-{tag}-{}", std::process::id());
    s.monitor(Some(&ep), monitor::EVENT_ALL).unwrap();
    let mut mon = rz(ctx, SocketType::Pair);
    mon.connect(&ep).unwrap();
    mon
}

/// Waits for one of `wanted` among the monitor events; returns it with its value.
fn rz_expect_event(mon: &mut rzmq_core::Socket, wanted: &[u16]) -> (u16, u32) {
    loop {
        let parts = mon.recv_multipart(0).expect("monitor event");
        let (ev, val) = monitor::parse_event(parts[0].data()).unwrap();
        if wanted.contains(&ev) {
            return (ev, val);
        }
    }
}

/// Waits for one of `wanted` among a libzmq monitor's events.
fn lz_expect_event(mon: &lz::Socket, wanted: &[u16]) -> (u16, u32) {
    loop {
        let parts = mon.recv_multipart().expect("monitor event");
        let f = &parts[0];
        let ev = u16::from_ne_bytes([f[0], f[1]]);
        let val = u32::from_ne_bytes([f[2], f[3], f[4], f[5]]);
        if wanted.contains(&ev) {
            return (ev, val);
        }
    }
}

const PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: u32 = 0x1100_0001;

#[test]
fn rzmq_client_libzmq_server() {
    require_lz_curve();
    let (server, client) = (lz_keys(), rz_keys());
    let lctx = lz::Ctx::new();
    let rctx = Context::new();
    let srv = lctx.socket(lz::ROUTER);
    lz_server(&srv, &server);
    let ep = srv.bind_tcp();
    let mut cl = rz(&rctx, SocketType::Dealer);
    rz_client(&mut cl, &server.0, &client);
    assert!(matches!(
        cl.get_option(opt::MECHANISM),
        Ok(opt::OptValue::Int(opt::CURVE))
    ));
    cl.connect(&ep).unwrap();
    rz_send_multi(&mut cl, &frames());
    let got = srv.recv_multipart().unwrap();
    assert_eq!(&got[1..], &frames()[..], "rzmq -> libzmq");
    let mut reply = vec![got[0].clone()];
    reply.extend(frames().into_iter().rev());
    srv.send_multipart(&reply).unwrap();
    let mut want = frames();
    want.reverse();
    assert_eq!(rz_recv_multi(&mut cl), want, "libzmq -> rzmq");
    for i in 0..100u32 {
        cl.send(i.to_be_bytes().to_vec(), 0).unwrap();
    }
    for i in 0..100u32 {
        let m = srv.recv_multipart().unwrap();
        assert_eq!(m[1], i.to_be_bytes());
    }
}

#[test]
fn libzmq_client_rzmq_server() {
    require_lz_curve();
    let (server, client) = (rz_keys(), lz_keys());
    let lctx = lz::Ctx::new();
    let rctx = Context::new();
    let mut srv = rz(&rctx, SocketType::Router);
    rz_server(&mut srv, &server);
    assert!(matches!(
        srv.get_option(opt::CURVE_SERVER),
        Ok(opt::OptValue::Int(1))
    ));
    let mut mon = rz_monitor(&rctx, &mut srv, "srv");
    srv.bind("tcp://127.0.0.1:*").unwrap();
    let ep = srv.last_endpoint().to_string();
    let cl = lctx.socket(lz::DEALER);
    lz_client(&cl, &server.0, &client);
    cl.connect(&ep);
    cl.send_multipart(&frames()).unwrap();
    let got = rz_recv_multi(&mut srv);
    assert_eq!(&got[1..], &frames()[..], "libzmq -> rzmq");
    assert_eq!(
        rz_expect_event(&mut mon, &[monitor::EVENT_HANDSHAKE_SUCCEEDED]).0,
        monitor::EVENT_HANDSHAKE_SUCCEEDED
    );
    let mut reply = vec![got[0].clone()];
    reply.extend(frames());
    rz_send_multi(&mut srv, &reply);
    assert_eq!(cl.recv_multipart().unwrap(), frames(), "rzmq -> libzmq");
}

#[test]
fn rzmq_to_rzmq_with_keys_from_either_library() {
    // A server key pair made by libzmq (libsodium) when there is one: rzmq derives the same
    // public key from its secret.
    let server = if lz::lib().is_some() {
        lz_keys()
    } else {
        rz_keys()
    };
    assert_eq!(z85::public_key(&server.1), server.0);
    let client = rz_keys();
    let ctx = Context::new();
    let mut srv = rz(&ctx, SocketType::Pair);
    rz_server(&mut srv, &server);
    srv.bind("tcp://127.0.0.1:*").unwrap();
    let ep = srv.last_endpoint().to_string();
    let mut cl = rz(&ctx, SocketType::Pair);
    rz_client(&mut cl, &server.0, &client);
    cl.connect(&ep).unwrap();
    rz_send_multi(&mut cl, &frames());
    assert_eq!(rz_recv_multi(&mut srv), frames());
    rz_send_multi(&mut srv, &frames());
    assert_eq!(rz_recv_multi(&mut cl), frames());
}

#[test]
fn pub_sub_subscriptions_travel_boxed() {
    require_lz_curve();
    let lctx = lz::Ctx::new();
    let rctx = Context::new();
    // rzmq PUB (CURVE server), libzmq SUB (client).
    let (server, client) = (rz_keys(), lz_keys());
    let mut publ = rz(&rctx, SocketType::Pub);
    rz_server(&mut publ, &server);
    publ.bind("tcp://127.0.0.1:*").unwrap();
    let ep = publ.last_endpoint().to_string();
    let sub = lctx.socket(lz::SUB);
    lz_client(&sub, &server.0, &client);
    sub.set(lz::SUBSCRIBE, b"yes");
    sub.set_i32(lz::RCVTIMEO, 50);
    sub.connect(&ep);
    // The subscription arrives asynchronously: publish until one gets through.
    let mut got = None;
    for _ in 0..200 {
        publ.send(&b"no: dropped"[..], 0).unwrap();
        publ.send(&b"yes: kept"[..], 0).unwrap();
        if let Ok(m) = sub.recv_multipart() {
            got = Some(m);
            break;
        }
    }
    assert_eq!(got, Some(vec![b"yes: kept".to_vec()]));

    // libzmq PUB (server), rzmq SUB (client).
    let (server, client) = (lz_keys(), rz_keys());
    let lpub = lctx.socket(lz::PUB);
    lz_server(&lpub, &server);
    let ep = lpub.bind_tcp();
    let mut rsub = rz(&rctx, SocketType::Sub);
    rz_client(&mut rsub, &server.0, &client);
    rsub.set_option_raw(opt::SUBSCRIBE, b"yes").unwrap();
    rsub.set_option_i32(opt::RCVTIMEO, 50).unwrap();
    rsub.connect(&ep).unwrap();
    let mut got = None;
    for _ in 0..200 {
        lpub.send_multipart(&[b"no: dropped".to_vec()]).unwrap();
        lpub.send_multipart(&[b"yes: kept".to_vec()]).unwrap();
        if let Ok(m) = rsub.recv_bytes(0) {
            got = Some(m);
            break;
        }
    }
    assert_eq!(got.as_deref(), Some(&b"yes: kept"[..]));
}

#[test]
fn heartbeats_travel_boxed() {
    require_lz_curve();
    let (server, client) = (lz_keys(), rz_keys());
    let lctx = lz::Ctx::new();
    let rctx = Context::new();
    let srv = lctx.socket(lz::PAIR);
    lz_server(&srv, &server);
    srv.set_i32(lz::HEARTBEAT_IVL, 20);
    srv.set_i32(lz::HEARTBEAT_TIMEOUT, 500);
    let ep = srv.bind_tcp();
    let mut cl = rz(&rctx, SocketType::Pair);
    rz_client(&mut cl, &server.0, &client);
    cl.set_option_i32(opt::HEARTBEAT_IVL, 20).unwrap();
    cl.set_option_i32(opt::HEARTBEAT_TIMEOUT, 500).unwrap();
    let mut mon = rz_monitor(&rctx, &mut cl, "hb");
    cl.connect(&ep).unwrap();
    cl.send(&b"one"[..], 0).unwrap();
    assert_eq!(srv.recv_multipart().unwrap(), vec![b"one".to_vec()]);
    // Many PING/PONG rounds both ways; the connection must survive them.
    std::thread::sleep(std::time::Duration::from_millis(600));
    srv.send_multipart(&[b"two".to_vec()]).unwrap();
    assert_eq!(cl.recv_bytes(0).unwrap(), b"two");
    cl.send(&b"three"[..], 0).unwrap();
    assert_eq!(srv.recv_multipart().unwrap(), vec![b"three".to_vec()]);
    // No disconnect happened.
    mon.set_option_i32(opt::RCVTIMEO, 0).unwrap();
    while let Ok(parts) = mon.recv_multipart(0) {
        let (ev, _) = monitor::parse_event(parts[0].data()).unwrap();
        assert_ne!(
            ev,
            monitor::EVENT_DISCONNECTED,
            "heartbeat broke the session"
        );
    }
}

#[test]
fn wrong_server_key_refused() {
    require_lz_curve();
    let lctx = lz::Ctx::new();
    let rctx = Context::new();

    // rzmq client with the wrong server key against a libzmq server: libzmq cannot open HELLO.
    let server = lz_keys();
    let srv = lctx.socket(lz::PULL);
    lz_server(&srv, &server);
    srv.monitor("inproc://curve-lz-mon");
    let lmon = lctx.socket(lz::PAIR);
    lmon.connect("inproc://curve-lz-mon");
    let ep = srv.bind_tcp();
    let mut cl = rz(&rctx, SocketType::Push);
    rz_client(&mut cl, &rz_keys().0, &rz_keys());
    cl.connect(&ep).unwrap();
    cl.set_option_i32(opt::SNDTIMEO, 0).unwrap();
    let _ = cl.send(&b"must not arrive"[..], 0);
    assert_eq!(
        lz_expect_event(&lmon, &[0x2000]),
        (0x2000, PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC),
        "libzmq: HANDSHAKE_FAILED_PROTOCOL / CRYPTOGRAPHIC"
    );
    srv.set_i32(lz::RCVTIMEO, 300);
    assert!(srv.recv_multipart().is_err());

    // libzmq client with the wrong server key against an rzmq server.
    let server = rz_keys();
    let mut rsrv = rz(&rctx, SocketType::Pull);
    rz_server(&mut rsrv, &server);
    let mut mon = rz_monitor(&rctx, &mut rsrv, "wrong");
    rsrv.bind("tcp://127.0.0.1:*").unwrap();
    let ep = rsrv.last_endpoint().to_string();
    let lcl = lctx.socket(lz::PUSH);
    lz_client(&lcl, &lz_keys().0, &lz_keys());
    lcl.set_i32(lz::SNDTIMEO, 0);
    lcl.connect(&ep);
    let _ = lcl.send_multipart(&[b"must not arrive".to_vec()]);
    assert_eq!(
        rz_expect_event(&mut mon, &[monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL]),
        (
            monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL,
            PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC
        )
    );
    rsrv.set_option_i32(opt::RCVTIMEO, 300).unwrap();
    assert!(rsrv.recv_bytes(0).is_err());

    // The right key still works against the same rzmq server (it survived the failures).
    let lcl2 = lctx.socket(lz::PUSH);
    lz_client(&lcl2, &server.0, &lz_keys());
    lcl2.connect(&ep);
    lcl2.send_multipart(&[b"welcome".to_vec()]).unwrap();
    rsrv.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    assert_eq!(rsrv.recv_bytes(0).unwrap(), b"welcome");
}

#[test]
fn null_client_against_curve_server_is_a_mechanism_mismatch() {
    let rctx = Context::new();
    let server = rz_keys();
    let mut srv = rz(&rctx, SocketType::Pull);
    rz_server(&mut srv, &server);
    let mut mon = rz_monitor(&rctx, &mut srv, "null");
    srv.bind("tcp://127.0.0.1:*").unwrap();
    let ep = srv.last_endpoint().to_string();
    let mut cl = rz(&rctx, SocketType::Push);
    cl.connect(&ep).unwrap();
    cl.set_option_i32(opt::SNDTIMEO, 0).unwrap();
    let _ = cl.send(&b"plain text"[..], 0);
    assert_eq!(
        rz_expect_event(&mut mon, &[monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL]),
        (monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x1100_0002)
    );
}

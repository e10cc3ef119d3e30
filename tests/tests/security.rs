//! PLAIN (RFC 24) and ZAP (RFC 27): rzmq against itself and against the reference libzmq (the
//! `zmq` crate), both directions; wrong credentials are refused on both sides.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rzmq_core::monitor;
use rzmq_core::options as opt;
use rzmq_core::{Context, Socket, SocketType};
use rzmq_tests::TIMEOUT_MS;

const ZAP: &str = "inproc://zeromq.zap.01";
/// How long a refused connection is given to (wrongly) deliver a message.
const REFUSED_MS: i32 = 300;

fn rz(ctx: &Context, ty: SocketType) -> Socket {
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, 0).unwrap();
    s
}

fn lz(ctx: &zmq::Context, ty: zmq::SocketType) -> zmq::Socket {
    let s = ctx.socket(ty).unwrap();
    s.set_rcvtimeo(TIMEOUT_MS).unwrap();
    s.set_sndtimeo(TIMEOUT_MS).unwrap();
    s.set_linger(0).unwrap();
    s
}

/// What a ZAP handler answers for (mechanism, credentials).
fn verdict(mechanism: &[u8], creds: &[Vec<u8>]) -> (&'static str, &'static str) {
    match (mechanism, creds) {
        (b"PLAIN", [u, p]) if u == b"admin" && p == b"password" => ("200", "alice"),
        (b"NULL", []) => ("500", ""),
        _ => ("400", ""),
    }
}

/// Splits a ZAP request (delimiter already stripped by REP) into its parts.
fn check_request(req: &[Vec<u8>]) -> (Vec<u8>, Vec<Vec<u8>>) {
    assert!(req.len() >= 6, "{req:?}");
    assert_eq!(req[0], b"1.0");
    assert_eq!(req[1], b"1");
    assert_eq!(req[2], b"test-domain");
    assert_eq!(req[4], b"SRV");
    (req[5].clone(), req[6..].to_vec())
}

/// An rzmq ZAP handler on its own thread; answers `n` requests.
fn rz_zap_handler(ctx: &Context, n: usize) -> JoinHandle<()> {
    let mut rep = rz(ctx, SocketType::Rep);
    rep.bind(ZAP).unwrap();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok(req) = rep.recv_multipart(0) else {
                return;
            };
            let req: Vec<Vec<u8>> = req.iter().map(|m| m.data().to_vec()).collect();
            let (mech, creds) = check_request(&req);
            let (status, user) = verdict(&mech, &creds);
            let reply: [&[u8]; 6] = [
                b"1.0",
                b"1",
                status.as_bytes(),
                b"text",
                user.as_bytes(),
                b"\x04Role\x00\x00\x00\x05admin",
            ];
            rep.send_multipart(reply, 0).unwrap();
        }
    })
}

/// A libzmq ZAP handler on its own thread; answers `n` requests.
fn lz_zap_handler(ctx: &zmq::Context, n: usize) -> JoinHandle<()> {
    let rep = lz(ctx, zmq::REP);
    rep.bind(ZAP).unwrap();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok(req) = rep.recv_multipart(0) else {
                return;
            };
            let (mech, creds) = check_request(&req);
            let (status, user) = verdict(&mech, &creds);
            let reply: [&[u8]; 6] = [
                b"1.0",
                b"1",
                status.as_bytes(),
                b"text",
                user.as_bytes(),
                b"",
            ];
            rep.send_multipart(reply, 0).unwrap();
        }
    })
}

fn rz_plain_server(ctx: &Context) -> (Socket, String) {
    let mut s = rz(ctx, SocketType::Dealer);
    s.set_option_raw(opt::ROUTING_ID, b"SRV").unwrap();
    s.set_option_raw(opt::ZAP_DOMAIN, b"test-domain").unwrap();
    s.set_option_i32(opt::PLAIN_SERVER, 1).unwrap();
    s.bind("tcp://127.0.0.1:*").unwrap();
    let ep = s.last_endpoint().to_string();
    (s, ep)
}

fn rz_plain_client(ctx: &Context, user: &[u8], pass: &[u8], ep: &str) -> Socket {
    let mut c = rz_plain_socket(ctx, user, pass);
    c.connect(ep).unwrap();
    c
}

fn rz_plain_socket(ctx: &Context, user: &[u8], pass: &[u8]) -> Socket {
    let mut c = rz(ctx, SocketType::Dealer);
    c.set_option_raw(opt::PLAIN_USERNAME, user).unwrap();
    c.set_option_raw(opt::PLAIN_PASSWORD, pass).unwrap();
    c
}

fn lz_plain_server(ctx: &zmq::Context) -> (zmq::Socket, String) {
    let s = lz(ctx, zmq::DEALER);
    s.set_identity(b"SRV").unwrap();
    s.set_zap_domain("test-domain").unwrap();
    s.set_plain_server(true).unwrap();
    s.bind("tcp://127.0.0.1:*").unwrap();
    let ep = s.get_last_endpoint().unwrap().unwrap();
    (s, ep)
}

fn lz_plain_client(ctx: &zmq::Context, user: &str, pass: &str, ep: &str) -> zmq::Socket {
    let c = lz(ctx, zmq::DEALER);
    c.set_plain_username(Some(user)).unwrap();
    c.set_plain_password(Some(pass)).unwrap();
    c.connect(ep).unwrap();
    c
}

/// Sends on a client the server is about to refuse. Under load its handshake may already have
/// failed by now, and then (as in libzmq) the connection and its pipe are gone, so a blocking
/// send would wait out SNDTIMEO: the frame is offered without waiting, and either outcome is
/// fine, since what the tests check is that a refused peer delivers nothing.
fn rz_send_to_refuser(s: &mut Socket, data: &str) {
    match s.send(data, rzmq_core::DONTWAIT) {
        Ok(()) | Err(rzmq_core::Error::Again) => {}
        Err(e) => panic!("send: {e}"),
    }
}

/// [`rz_send_to_refuser`] for a libzmq client.
fn lz_send_to_refuser(s: &zmq::Socket, data: &str) {
    match s.send(data.as_bytes(), zmq::DONTWAIT) {
        Ok(()) | Err(zmq::Error::EAGAIN) => {}
        Err(e) => panic!("send: {e}"),
    }
}

/// A monitor of `s` for the handshake events, as a PAIR socket.
fn rz_monitor(ctx: &Context, s: &mut Socket, name: &str) -> Socket {
    let ep = format!("inproc://sec-mon-{name}");
    s.monitor(
        Some(&ep),
        monitor::EVENT_HANDSHAKE_SUCCEEDED
            | monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL
            | monitor::EVENT_HANDSHAKE_FAILED_AUTH,
    )
    .unwrap();
    let mut m = rz(ctx, SocketType::Pair);
    m.connect(&ep).unwrap();
    m
}

fn next_event(mon: &mut Socket) -> (u16, u32) {
    let frames = mon.recv_multipart(0).expect("a monitor event");
    monitor::parse_event(frames[0].data()).unwrap()
}

#[test]
fn rzmq_plain_with_rzmq_zap() {
    let ctx = Context::new();
    let zap = rz_zap_handler(&ctx, 2);
    let (mut server, ep) = rz_plain_server(&ctx);
    let mut smon = rz_monitor(&ctx, &mut server, "rr-server");
    let mut good = rz_plain_client(&ctx, b"admin", b"password", &ep);
    good.send("hello", 0).unwrap();
    let m = server.recv_msg(0).unwrap();
    assert_eq!(m.data(), b"hello");
    assert_eq!(m.property("User-Id"), Some(&b"alice"[..]));
    assert_eq!(m.property("Role"), Some(&b"admin"[..]));
    assert_eq!(m.property("Socket-Type"), Some(&b"DEALER"[..]));
    assert_eq!(m.property("Peer-Address"), Some(&b"127.0.0.1"[..]));
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_SUCCEEDED, 0)
    );
    server.send("back", 0).unwrap();
    assert_eq!(good.recv_bytes(0).unwrap(), b"back");

    let mut bad = rz_plain_socket(&ctx, b"admin", b"wrong");
    let mut cmon = rz_monitor(&ctx, &mut bad, "rr-client");
    bad.connect(&ep).unwrap();
    rz_send_to_refuser(&mut bad, "sneaky");
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 400)
    );
    assert_eq!(
        next_event(&mut cmon),
        (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 400)
    );
    server.set_option_i32(opt::RCVTIMEO, REFUSED_MS).unwrap();
    assert!(
        server.recv_msg(0).is_err(),
        "refused peer delivered a message"
    );
    zap.join().unwrap();
}

#[test]
fn rzmq_null_with_zap_domain_status_500() {
    let ctx = Context::new();
    let zap = rz_zap_handler(&ctx, 1);
    let mut server = rz(&ctx, SocketType::Dealer);
    server.set_option_raw(opt::ROUTING_ID, b"SRV").unwrap();
    server
        .set_option_raw(opt::ZAP_DOMAIN, b"test-domain")
        .unwrap();
    server.bind("tcp://127.0.0.1:*").unwrap();
    let ep = server.last_endpoint().to_string();
    let mut smon = rz_monitor(&ctx, &mut server, "n5-server");
    let mut client = rz(&ctx, SocketType::Dealer);
    let mut cmon = rz_monitor(&ctx, &mut client, "n5-client");
    client.connect(&ep).unwrap();
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 500)
    );
    assert_eq!(
        next_event(&mut cmon),
        (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 500)
    );
    zap.join().unwrap();
}

#[test]
fn plain_server_without_zap_handler_refuses() {
    let ctx = Context::new();
    let (mut server, ep) = rz_plain_server(&ctx);
    let mut smon = rz_monitor(&ctx, &mut server, "nozap-server");
    let mut c = rz_plain_client(&ctx, b"admin", b"password", &ep);
    rz_send_to_refuser(&mut c, "x");
    assert_eq!(
        next_event(&mut smon),
        (
            monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
            libc::EFAULT as u32
        )
    );
    server.set_option_i32(opt::RCVTIMEO, REFUSED_MS).unwrap();
    assert!(server.recv_msg(0).is_err());
}

#[test]
fn rzmq_plain_client_to_libzmq_plain_server() {
    let lctx = zmq::Context::new();
    let zap = lz_zap_handler(&lctx, 2);
    let (server, ep) = lz_plain_server(&lctx);
    let ctx = Context::new();
    let mut good = rz_plain_client(&ctx, b"admin", b"password", &ep);
    good.send("hello", 0).unwrap();
    let mut m = zmq::Message::new();
    server.recv(&mut m, 0).unwrap();
    assert_eq!(&m[..], b"hello");
    assert_eq!(m.gets("User-Id"), Some("alice"));
    server.send(&b"back"[..], 0).unwrap();
    assert_eq!(good.recv_bytes(0).unwrap(), b"back");

    let mut bad = rz_plain_socket(&ctx, b"wrong", b"password");
    let mut cmon = rz_monitor(&ctx, &mut bad, "rl-client");
    bad.connect(&ep).unwrap();
    rz_send_to_refuser(&mut bad, "sneaky");
    // libzmq 4.3.4 (the reference here) garbles the name of the ERROR its PLAIN server sends
    // ("\x09^RROR..."): its own clients then fail with UNEXPECTED_COMMAND too; 4.3.5 sends
    // "\x05ERROR\x03400", which reports the status.
    let ev = next_event(&mut cmon);
    assert!(
        ev == (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 400)
            || ev == (monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x1000_0001),
        "{ev:?}"
    );
    server.set_rcvtimeo(REFUSED_MS).unwrap();
    assert!(
        server.recv_bytes(0).is_err(),
        "refused peer delivered a message"
    );
    zap.join().unwrap();
}

#[test]
fn libzmq_plain_client_to_rzmq_plain_server() {
    let ctx = Context::new();
    let zap = rz_zap_handler(&ctx, 2);
    let (mut server, ep) = rz_plain_server(&ctx);
    let mut smon = rz_monitor(&ctx, &mut server, "lr-server");
    let lctx = zmq::Context::new();
    let good = lz_plain_client(&lctx, "admin", "password", &ep);
    good.send(&b"hello"[..], 0).unwrap();
    let m = server.recv_msg(0).unwrap();
    assert_eq!(m.data(), b"hello");
    assert_eq!(m.property("User-Id"), Some(&b"alice"[..]));
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_SUCCEEDED, 0)
    );
    server.send("back", 0).unwrap();
    assert_eq!(good.recv_bytes(0).unwrap(), b"back");

    let bad = lz_plain_client(&lctx, "admin", "nope", &ep);
    lz_send_to_refuser(&bad, "sneaky");
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 400)
    );
    server.set_option_i32(opt::RCVTIMEO, REFUSED_MS).unwrap();
    assert!(
        server.recv_msg(0).is_err(),
        "refused peer delivered a message"
    );
    // The refused libzmq client saw the ERROR and did not get through either.
    bad.set_rcvtimeo(REFUSED_MS).unwrap();
    assert!(bad.recv_bytes(0).is_err());
    zap.join().unwrap();
}

#[test]
fn plain_and_null_do_not_mix() {
    let ctx = Context::new();
    let (mut server, ep) = rz_plain_server(&ctx);
    let mut smon = rz_monitor(&ctx, &mut server, "mix-server");
    let mut null = rz(&ctx, SocketType::Dealer);
    null.connect(&ep).unwrap();
    rz_send_to_refuser(&mut null, "x");
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x1100_0002)
    );
    // A libzmq NULL peer likewise.
    let lctx = zmq::Context::new();
    let lnull = lz(&lctx, zmq::DEALER);
    lnull.connect(&ep).unwrap();
    let deadline = Instant::now() + Duration::from_millis(REFUSED_MS as u64);
    server.set_option_i32(opt::RCVTIMEO, REFUSED_MS).unwrap();
    assert!(server.recv_msg(0).is_err());
    assert!(Instant::now() >= deadline);
}

#[test]
fn libzmq_null_client_to_rzmq_null_server_with_zap_domain() {
    let ctx = Context::new();
    let zap = rz_zap_handler(&ctx, 1);
    let mut server = rz(&ctx, SocketType::Dealer);
    server.set_option_raw(opt::ROUTING_ID, b"SRV").unwrap();
    server
        .set_option_raw(opt::ZAP_DOMAIN, b"test-domain")
        .unwrap();
    server.bind("tcp://127.0.0.1:*").unwrap();
    let ep = server.last_endpoint().to_string();
    let mut smon = rz_monitor(&ctx, &mut server, "ln-server");
    let lctx = zmq::Context::new();
    let client = lz(&lctx, zmq::DEALER);
    client
        .monitor(
            "inproc://ln-client",
            zmq::SocketEvent::HANDSHAKE_FAILED_AUTH as i32,
        )
        .unwrap();
    let cmon = lz(&lctx, zmq::PAIR);
    cmon.connect("inproc://ln-client").unwrap();
    client.connect(&ep).unwrap();
    lz_send_to_refuser(&client, "sneaky");
    // The handler answers NULL requests with 500: both sides report it.
    assert_eq!(
        next_event(&mut smon),
        (monitor::EVENT_HANDSHAKE_FAILED_AUTH, 500)
    );
    let ev = cmon.recv_multipart(0).unwrap();
    assert_eq!(
        monitor::parse_event(&ev[0]),
        Some((monitor::EVENT_HANDSHAKE_FAILED_AUTH, 500))
    );
    server.set_option_i32(opt::RCVTIMEO, REFUSED_MS).unwrap();
    assert!(
        server.recv_msg(0).is_err(),
        "refused peer delivered a message"
    );
    zap.join().unwrap();
}

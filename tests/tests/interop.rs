//! rzmq against the reference libzmq (the `zmq` crate) on the wire, both directions, tcp and ipc.

use rzmq_core::options as opt;
use rzmq_core::{Context, Msg, SocketType};
use rzmq_tests::{ipc_endpoint, payload, TIMEOUT_MS};

fn lz_ctx() -> zmq::Context {
    zmq::Context::new()
}

fn rz(ctx: &Context, ty: SocketType) -> rzmq_core::Socket {
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, 1000).unwrap();
    s
}

fn lz(ctx: &zmq::Context, ty: zmq::SocketType) -> zmq::Socket {
    let s = ctx.socket(ty).unwrap();
    s.set_rcvtimeo(TIMEOUT_MS).unwrap();
    s.set_sndtimeo(TIMEOUT_MS).unwrap();
    s.set_linger(1000).unwrap();
    s
}

/// Binds an rzmq socket on a fresh endpoint of the given transport and returns its address.
fn rz_bind(s: &mut rzmq_core::Socket, transport: &str) -> String {
    match transport {
        "tcp" => {
            s.bind("tcp://127.0.0.1:*").unwrap();
            s.last_endpoint().to_string()
        }
        _ => {
            let ep = ipc_endpoint("rz");
            s.bind(&ep).unwrap();
            ep
        }
    }
}

fn lz_bind(s: &zmq::Socket, transport: &str) -> String {
    match transport {
        "tcp" => {
            s.bind("tcp://127.0.0.1:*").unwrap();
            s.get_last_endpoint().unwrap().unwrap()
        }
        _ => {
            let ep = ipc_endpoint("lz");
            s.bind(&ep).unwrap();
            ep
        }
    }
}

fn frames() -> Vec<Vec<u8>> {
    vec![
        b"head".to_vec(),
        Vec::new(),
        payload(300, 1),
        payload(70_000, 2),
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

#[test]
fn push_pull_both_directions_tcp_ipc() {
    for transport in ["tcp", "ipc"] {
        // rzmq PUSH binds, libzmq PULL connects.
        let rctx = Context::new();
        let lctx = lz_ctx();
        let mut push = rz(&rctx, SocketType::Push);
        let ep = rz_bind(&mut push, transport);
        let pull = lz(&lctx, zmq::PULL);
        pull.connect(&ep).unwrap();
        rz_send_multi(&mut push, &frames());
        assert_eq!(
            pull.recv_multipart(0).unwrap(),
            frames(),
            "{transport}: rzmq -> libzmq"
        );

        // libzmq PUSH binds, rzmq PULL connects.
        let lpush = lz(&lctx, zmq::PUSH);
        let ep2 = lz_bind(&lpush, transport);
        let mut rpull = rz(&rctx, SocketType::Pull);
        rpull.connect(&ep2).unwrap();
        lpush.send_multipart(frames(), 0).unwrap();
        assert_eq!(
            rz_recv_multi(&mut rpull),
            frames(),
            "{transport}: libzmq -> rzmq"
        );
    }
}

#[test]
fn large_frames_16mib_both_ways() {
    let rctx = Context::new();
    let lctx = lz_ctx();
    let big = payload(16 << 20, 7);
    let mut rpair = rz(&rctx, SocketType::Pair);
    let ep = rz_bind(&mut rpair, "tcp");
    let lpair = lz(&lctx, zmq::PAIR);
    lpair.connect(&ep).unwrap();
    rpair.send(big.clone(), 0).unwrap();
    assert_eq!(lpair.recv_bytes(0).unwrap(), big);
    lpair.send(&big[..], 0).unwrap();
    assert_eq!(rpair.recv_bytes(0).unwrap(), big);
    lpair.send(&b""[..], 0).unwrap();
    assert_eq!(rpair.recv_bytes(0).unwrap(), b"");
}

#[test]
fn req_rep_both_directions() {
    for transport in ["tcp", "ipc"] {
        let rctx = Context::new();
        let lctx = lz_ctx();
        let mut rep = rz(&rctx, SocketType::Rep);
        let ep = rz_bind(&mut rep, transport);
        let req = lz(&lctx, zmq::REQ);
        req.connect(&ep).unwrap();
        for i in 0..10u8 {
            req.send(vec![i; 10], 0).unwrap();
            let m = rep.recv_bytes(0).unwrap();
            assert_eq!(m, vec![i; 10]);
            assert!(!rep.rcvmore());
            rep.send(vec![i + 1; 3], 0).unwrap();
            assert_eq!(req.recv_bytes(0).unwrap(), vec![i + 1; 3]);
        }
        // Reverse: libzmq REP, rzmq REQ.
        let lrep = lz(&lctx, zmq::REP);
        let ep2 = lz_bind(&lrep, transport);
        let mut rreq = rz(&rctx, SocketType::Req);
        rreq.connect(&ep2).unwrap();
        rreq.send_multipart([&b"a"[..], b"b"], 0).unwrap();
        assert_eq!(
            lrep.recv_multipart(0).unwrap(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        lrep.send(&b"ok"[..], 0).unwrap();
        assert_eq!(rreq.recv_bytes(0).unwrap(), b"ok");
    }
}

#[test]
fn dealer_router_identities_both_directions() {
    for transport in ["tcp", "ipc"] {
        let rctx = Context::new();
        let lctx = lz_ctx();
        // libzmq DEALER with an identity -> rzmq ROUTER.
        let mut router = rz(&rctx, SocketType::Router);
        let ep = rz_bind(&mut router, transport);
        let dealer = lz(&lctx, zmq::DEALER);
        dealer.set_identity(b"lz-dealer").unwrap();
        dealer.connect(&ep).unwrap();
        dealer.send_multipart([&b""[..], b"hello"], 0).unwrap();
        let got = rz_recv_multi(&mut router);
        assert_eq!(
            got,
            vec![b"lz-dealer".to_vec(), Vec::new(), b"hello".to_vec()]
        );
        rz_send_multi(
            &mut router,
            &[b"lz-dealer".to_vec(), Vec::new(), b"world".to_vec()],
        );
        assert_eq!(
            dealer.recv_multipart(0).unwrap(),
            vec![Vec::new(), b"world".to_vec()]
        );

        // rzmq DEALER with a routing id -> libzmq ROUTER.
        let lrouter = lz(&lctx, zmq::ROUTER);
        let ep2 = lz_bind(&lrouter, transport);
        let mut rdealer = rz(&rctx, SocketType::Dealer);
        rdealer
            .set_option_raw(opt::ROUTING_ID, b"rz-dealer")
            .unwrap();
        rdealer.connect(&ep2).unwrap();
        rdealer.send_multipart([&b""[..], b"ping"], 0).unwrap();
        assert_eq!(
            lrouter.recv_multipart(0).unwrap(),
            vec![b"rz-dealer".to_vec(), Vec::new(), b"ping".to_vec()]
        );
        lrouter
            .send_multipart([&b"rz-dealer"[..], b"", b"pong"], 0)
            .unwrap();
        assert_eq!(
            rz_recv_multi(&mut rdealer),
            vec![Vec::new(), b"pong".to_vec()]
        );

        // Automatic identities from libzmq's ROUTER side reach rzmq routers too.
        let anon = lz(&lctx, zmq::DEALER);
        anon.connect(&ep).unwrap();
        anon.send(&b"anon"[..], 0).unwrap();
        let got = rz_recv_multi(&mut router);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], b"anon");
        let id = got[0].clone();
        assert!(!id.is_empty());
        rz_send_multi(&mut router, &[id, b"back".to_vec()]);
        assert_eq!(anon.recv_bytes(0).unwrap(), b"back");
    }
}

fn wait_until(mut f: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !f() {
        assert!(t0.elapsed().as_secs() < 10, "condition not reached in time");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn pub_sub_subscriptions_from_either_side() {
    for transport in ["tcp", "ipc"] {
        let rctx = Context::new();
        let lctx = lz_ctx();
        // rzmq PUB, libzmq SUB filtering on "a".
        let mut publ = rz(&rctx, SocketType::Pub);
        let ep = rz_bind(&mut publ, transport);
        let sub = lz(&lctx, zmq::SUB);
        sub.set_subscribe(b"a").unwrap();
        sub.connect(&ep).unwrap();
        // Publish until the subscription has arrived (slow joiner), then check filtering.
        wait_until(|| {
            publ.send("a-probe", 0).unwrap();
            sub.poll(zmq::POLLIN, 20).unwrap() > 0
        });
        while sub.poll(zmq::POLLIN, 50).unwrap() > 0 {
            sub.recv_bytes(0).unwrap();
        }
        publ.send("b-hidden", 0).unwrap();
        publ.send("a-shown", 0).unwrap();
        assert_eq!(sub.recv_bytes(0).unwrap(), b"a-shown");

        // libzmq PUB, rzmq SUB.
        let lpub = lz(&lctx, zmq::PUB);
        let ep2 = lz_bind(&lpub, transport);
        let mut rsub = rz(&rctx, SocketType::Sub);
        rsub.subscribe(b"x").unwrap();
        rsub.connect(&ep2).unwrap();
        rsub.set_option_i32(opt::RCVTIMEO, 20).unwrap();
        wait_until(|| {
            lpub.send(&b"x-probe"[..], 0).unwrap();
            rsub.recv_bytes(0).is_ok()
        });
        while rsub.recv_bytes(0).is_ok() {}
        rsub.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
        lpub.send(&b"y-hidden"[..], 0).unwrap();
        lpub.send(&b"x-shown"[..], 0).unwrap();
        assert_eq!(rsub.recv_bytes(0).unwrap(), b"x-shown");
    }
}

#[test]
fn xpub_xsub_see_each_others_subscriptions() {
    let rctx = Context::new();
    let lctx = lz_ctx();
    // rzmq XPUB sees a libzmq SUB's subscription.
    let mut xpub = rz(&rctx, SocketType::XPub);
    let ep = rz_bind(&mut xpub, "tcp");
    let sub = lz(&lctx, zmq::SUB);
    sub.connect(&ep).unwrap();
    sub.set_subscribe(b"topic").unwrap();
    assert_eq!(xpub.recv_bytes(0).unwrap(), b"\x01topic");
    sub.set_unsubscribe(b"topic").unwrap();
    assert_eq!(xpub.recv_bytes(0).unwrap(), b"\x00topic");

    // libzmq XPUB sees an rzmq XSUB's subscription sent as a message.
    let lxpub = lz(&lctx, zmq::XPUB);
    let ep2 = lz_bind(&lxpub, "tcp");
    let mut xsub = rz(&rctx, SocketType::XSub);
    xsub.connect(&ep2).unwrap();
    xsub.send(&b"\x01news"[..], 0).unwrap();
    assert_eq!(lxpub.recv_bytes(0).unwrap(), b"\x01news");
    lxpub.send(&b"news: hi"[..], 0).unwrap();
    assert_eq!(xsub.recv_bytes(0).unwrap(), b"news: hi");
}

#[test]
fn heartbeats_keep_connections_alive_both_ways() {
    let rctx = Context::new();
    let lctx = lz_ctx();
    let mut rpair = rz(&rctx, SocketType::Pair);
    rpair.set_option_i32(opt::HEARTBEAT_IVL, 50).unwrap();
    rpair.set_option_i32(opt::HEARTBEAT_TIMEOUT, 500).unwrap();
    let ep = rz_bind(&mut rpair, "tcp");
    let lpair = lz(&lctx, zmq::PAIR);
    lpair.set_heartbeat_ivl(50).unwrap();
    lpair.set_heartbeat_timeout(500).unwrap();
    lpair.connect(&ep).unwrap();
    lpair.send(&b"first"[..], 0).unwrap();
    assert_eq!(rpair.recv_bytes(0).unwrap(), b"first");
    // Several heartbeat intervals and timeouts pass with no data: both sides must PING/PONG.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    rpair.send("still here", 0).unwrap();
    assert_eq!(lpair.recv_bytes(0).unwrap(), b"still here");
    lpair.send(&b"and here"[..], 0).unwrap();
    assert_eq!(rpair.recv_bytes(0).unwrap(), b"and here");
}

#[test]
fn reconnect_after_libzmq_peer_restarts() {
    let rctx = Context::new();
    let lctx = lz_ctx();
    let pull = lz(&lctx, zmq::PULL);
    let ep = lz_bind(&pull, "tcp");
    let mut push = rz(&rctx, SocketType::Push);
    push.set_option_i32(opt::RECONNECT_IVL, 20).unwrap();
    push.connect(&ep).unwrap();
    push.send("before", 0).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap(), b"before");
    drop(pull);
    std::thread::sleep(std::time::Duration::from_millis(100));
    // Queued while the peer is away (no IMMEDIATE): delivered after it comes back.
    push.send("during", 0).unwrap();
    let pull2 = lz(&lctx, zmq::PULL);
    pull2.bind(&ep).unwrap();
    assert_eq!(pull2.recv_bytes(0).unwrap(), b"during");
    push.send("after", 0).unwrap();
    assert_eq!(pull2.recv_bytes(0).unwrap(), b"after");
}

#[test]
fn linger_delivers_queued_messages_after_close() {
    let lctx = lz_ctx();
    let pull = lz(&lctx, zmq::PULL);
    let ep = lz_bind(&pull, "tcp");
    let rctx = Context::new();
    let mut push = rctx.socket(SocketType::Push).unwrap();
    push.set_option_i32(opt::LINGER, 5000).unwrap();
    push.connect(&ep).unwrap();
    for i in 0..1000u32 {
        push.send(i.to_le_bytes().to_vec(), 0).unwrap();
    }
    push.close();
    rctx.term().unwrap();
    for i in 0..1000u32 {
        assert_eq!(pull.recv_bytes(0).unwrap(), i.to_le_bytes());
    }
}

#[test]
fn pair_both_directions_ipc() {
    let rctx = Context::new();
    let lctx = lz_ctx();
    let lpair = lz(&lctx, zmq::PAIR);
    let ep = lz_bind(&lpair, "ipc");
    let mut rpair = rz(&rctx, SocketType::Pair);
    rpair.connect(&ep).unwrap();
    rpair.send("to libzmq", 0).unwrap();
    assert_eq!(lpair.recv_bytes(0).unwrap(), b"to libzmq");
    lpair.send(&b"to rzmq"[..], 0).unwrap();
    assert_eq!(rpair.recv_bytes(0).unwrap(), b"to rzmq");
}

#[test]
fn metadata_from_libzmq_ready() {
    let rctx = Context::new();
    let lctx = lz_ctx();
    let mut pull = rz(&rctx, SocketType::Pull);
    let ep = rz_bind(&mut pull, "tcp");
    let push = lz(&lctx, zmq::PUSH);
    push.connect(&ep).unwrap();
    push.send(&b"x"[..], 0).unwrap();
    let m = pull.recv_msg(0).unwrap();
    assert_eq!(m.property("Socket-Type"), Some(&b"PUSH"[..]));
    assert_eq!(m.property("Peer-Address"), Some(&b"127.0.0.1"[..]));
}

#[test]
fn stream_socket_with_raw_tcp_and_libzmq_stream() {
    use std::io::{Read, Write};
    let rctx = Context::new();
    let mut stream = rz(&rctx, SocketType::Stream);
    let ep = rz_bind(&mut stream, "tcp");
    let port: u16 = ep.rsplit(':').next().unwrap().parse().unwrap();
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let hello = rz_recv_multi(&mut stream);
    assert_eq!(hello.len(), 2);
    assert!(hello[1].is_empty(), "connect notification");
    let id = hello[0].clone();
    raw.write_all(b"GET /").unwrap();
    let got = rz_recv_multi(&mut stream);
    assert_eq!(got, vec![id.clone(), b"GET /".to_vec()]);
    rz_send_multi(&mut stream, &[id.clone(), b"200 OK".to_vec()]);
    let mut buf = [0u8; 6];
    raw.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"200 OK");
    // An empty frame closes the connection.
    rz_send_multi(&mut stream, &[id, Vec::new()]);
    let mut rest = Vec::new();
    assert_eq!(raw.read_to_end(&mut rest).unwrap(), 0);

    // libzmq STREAM connecting to ours: raw bytes both ways.
    let lctx = lz_ctx();
    let lstream = lz(&lctx, zmq::STREAM);
    lstream.connect(&ep).unwrap();
    let lhello = lstream.recv_multipart(0).unwrap();
    assert!(lhello[1].is_empty());
    let ours = rz_recv_multi(&mut stream);
    assert!(ours[1].is_empty());
    lstream
        .send_multipart([lhello[0].clone(), b"from libzmq".to_vec()], 0)
        .unwrap();
    let got = rz_recv_multi(&mut stream);
    assert_eq!(got[1], b"from libzmq");
    rz_send_multi(&mut stream, &[ours[0].clone(), b"from rzmq".to_vec()]);
    let back = lstream.recv_multipart(0).unwrap();
    assert_eq!(back[1], b"from rzmq");
}

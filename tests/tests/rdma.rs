//! The RDMA upgrade end to end, on the soft provider: tcp connections between two rzmq sockets
//! move to RDMA (reported by monitor events), large frames go zero-copy and their buffers are
//! released only after the peer read them, libzmq peers stay on TCP (auto) or are refused
//! (`rdma://`), a broken RDMA path closes the connection and reconnects, and RADIO/DISH upgrade
//! like the others (their JOIN commands and group frames cross the RDMA path).
//!
//! The whole binary runs with `RZMQ_RDMA=auto RZMQ_RDMA_PROVIDER=soft RZMQ_RDMA_EVENTS=1`
//! (set before the first socket; the upgrader reads the environment once) and soft devices
//! opened for fault tests (`RdmaOptions::soft_faults`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rzmq_core::monitor;
use rzmq_core::options as opt;
use rzmq_core::{Context, Msg, Socket, SocketType};
use rzmq_tests::{next_monitor_event as next_event, next_transport, payload, TIMEOUT_MS};

fn setup() {
    rzmq_tests::setup_soft_rdma();
}

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    rzmq_tests::timed_socket(ctx, ty, 2000)
}

/// Monitor `s` for transport and disconnection events; returns the reading end.
fn watch(ctx: &Context, s: &mut Socket, tag: &str) -> Socket {
    rzmq_tests::watch_transport(ctx, s, tag, monitor::EVENT_DISCONNECTED)
}

fn external(data: Vec<u8>, released: &Arc<AtomicUsize>) -> Msg {
    let mut b = data.into_boxed_slice();
    let (ptr, len) = (b.as_mut_ptr(), b.len());
    let keep = Box::into_raw(b) as *mut u8 as usize;
    let r = released.clone();
    let release: rzmq_core::msg::ReleaseFn = Box::new(move || {
        // SAFETY: the box leaked above, reconstructed once, when the library is done with it.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(keep as *mut u8, len)) });
        r.fetch_add(1, Ordering::SeqCst);
    });
    // SAFETY: the bytes stay valid until `release` runs.
    unsafe { Msg::from_external(ptr, len, Some(release)) }
}

#[test]
fn tcp_between_rzmq_sockets_moves_to_rdma_with_zero_copy_frames() {
    setup();
    let ctx = Context::new();
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let mut push = sock(&ctx, SocketType::Push);
    let mut mon_push = watch(&ctx, &mut push, "rdma-push");
    let mut mon_pull = watch(&ctx, &mut pull, "rdma-pull");
    push.connect(&ep).unwrap();
    assert_eq!(next_transport(&mut mon_push), monitor::TRANSPORT_RDMA);
    assert_eq!(next_transport(&mut mon_pull), monitor::TRANSPORT_RDMA);

    let released = Arc::new(AtomicUsize::new(0));
    let sizes = [0usize, 1, 256, 4096, 65_536, 65_537, 1 << 20, 24 << 20];
    for (i, &n) in sizes.iter().enumerate() {
        let head = format!("frame {i}").into_bytes();
        push.send(Msg::from_vec(head.clone()), rzmq_core::SNDMORE)
            .unwrap();
        push.send(external(payload(n, i as u8), &released), 0)
            .unwrap();
    }
    for (i, &n) in sizes.iter().enumerate() {
        let parts = pull.recv_multipart(0).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].data(), format!("frame {i}").as_bytes());
        assert_eq!(parts[1].len(), n, "frame {i}");
        assert!(
            parts[1].data() == payload(n, i as u8).as_slice(),
            "frame {i}"
        );
    }
    // Every external buffer is released, the rendezvous ones after the peer's READ + FIN.
    let deadline = Instant::now() + Duration::from_secs(10);
    while released.load(Ordering::SeqCst) < sizes.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(released.load(Ordering::SeqCst), sizes.len());
}

#[test]
fn request_reply_and_pubsub_over_rdma_in_both_directions() {
    setup();
    let ctx = Context::new();
    let mut router = sock(&ctx, SocketType::Router);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let ep = router.last_endpoint().to_string();
    let mut dealer = sock(&ctx, SocketType::Dealer);
    dealer.set_option_raw(opt::ROUTING_ID, b"engine-0").unwrap();
    let mut mon = watch(&ctx, &mut dealer, "rdma-dealer");
    dealer.connect(&ep).unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);
    for i in 0..200u32 {
        let body = payload(100 + (i as usize * 997) % 300_000, i as u8);
        dealer.send_multipart([&b""[..], &body], 0).unwrap();
        let parts = router.recv_multipart(0).unwrap();
        assert_eq!(parts[0].data(), b"engine-0");
        assert!(parts[2].data() == body.as_slice());
        router
            .send_multipart([&b"engine-0"[..], b"", &i.to_le_bytes()], 0)
            .unwrap();
        let back = dealer.recv_multipart(0).unwrap();
        assert_eq!(back[1].data(), i.to_le_bytes());
    }

    let mut xpub = sock(&ctx, SocketType::XPub);
    xpub.bind("tcp://127.0.0.1:*").unwrap();
    let ep = xpub.last_endpoint().to_string();
    let mut sub = sock(&ctx, SocketType::Sub);
    sub.connect(&ep).unwrap();
    sub.set_option_raw(opt::SUBSCRIBE, b"kv").unwrap();
    // The subscription travels over RDMA once the connection has switched.
    assert_eq!(xpub.recv_bytes(0).unwrap(), b"\x01kv");
    xpub.send("skip", 0).unwrap();
    let mut big = b"kv".to_vec();
    big.extend_from_slice(&payload(3 << 20, 9));
    xpub.send(big.clone(), 0).unwrap();
    xpub.send("kv-last", 0).unwrap();
    assert!(sub.recv_bytes(0).unwrap() == big);
    assert_eq!(sub.recv_bytes(0).unwrap(), b"kv-last");
}

#[test]
fn a_libzmq_peer_stays_on_tcp_under_auto() {
    setup();
    let ctx = Context::new();
    let mut pull = sock(&ctx, SocketType::Pull);
    let mut mon = watch(&ctx, &mut pull, "rdma-libzmq");
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let zctx = zmq::Context::new();
    let push = zctx.socket(zmq::PUSH).unwrap();
    push.connect(&ep).unwrap();
    push.send(&payload(1 << 20, 1)[..], 0).unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_TCP);
    assert_eq!(pull.recv_bytes(0).unwrap(), payload(1 << 20, 1));
}

#[test]
fn rdma_endpoints_refuse_a_libzmq_peer_and_deliver_nothing() {
    setup();
    let ctx = Context::new();
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.set_option_i32(opt::RCVTIMEO, 500).unwrap();
    let mut mon = watch(&ctx, &mut pull, "rdma-refuse");
    pull.bind("rdma://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    assert!(ep.starts_with("rdma://"), "{ep}");
    let tcp_ep = ep.replacen("rdma://", "tcp://", 1);
    let zctx = zmq::Context::new();
    let push = zctx.socket(zmq::PUSH).unwrap();
    push.set_linger(0).unwrap();
    push.connect(&tcp_ep).unwrap();
    push.send("must not arrive", 0).unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_REFUSED);
    assert_eq!(pull.recv_bytes(0).unwrap_err(), rzmq_core::Error::Again);

    // An rzmq peer on the same rdma:// endpoint upgrades and is served.
    let mut push2 = sock(&ctx, SocketType::Push);
    push2.connect(&ep).unwrap();
    push2.send("over rdma", 0).unwrap();
    pull.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap(), b"over rdma");
}

#[test]
fn a_cut_wire_closes_the_connection_releases_every_buffer_and_spares_the_others() {
    setup();
    let ctx = Context::new();
    // Victim pair on 127.0.0.5, bystander pair on 127.0.0.6: different soft devices, so cutting
    // the wires of the first address leaves the second connection alone. No other test of this
    // binary uses these addresses: cutting a device's wires cuts every connection on it, and the
    // tests run concurrently (on 127.0.0.1, a request in flight of another test would be lost).
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.bind("tcp://127.0.0.5:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let mut push = sock(&ctx, SocketType::Push);
    push.set_option_i32(opt::RECONNECT_IVL, 20).unwrap();
    let mut mon = watch(&ctx, &mut push, "rdma-fault");
    // From 127.0.0.5 too (the kernel would pick 127.0.0.1 as the source otherwise).
    push.connect(&ep.replacen("tcp://", "tcp://127.0.0.5:0;", 1))
        .unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);

    let mut other_pull = sock(&ctx, SocketType::Pull);
    other_pull.bind("tcp://127.0.0.6:*").unwrap();
    let other_ep = other_pull.last_endpoint().to_string();
    let mut other_push = sock(&ctx, SocketType::Push);
    let mut other_mon = watch(&ctx, &mut other_push, "rdma-bystander");
    let other_src = other_ep.replacen("tcp://", "tcp://127.0.0.6:0;", 1);
    other_push.connect(&other_src).unwrap();
    assert_eq!(next_transport(&mut other_mon), monitor::TRANSPORT_RDMA);

    push.send("before", 0).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap(), b"before");
    let cut = rzmq_rdma::provider::soft::cut_wires_at("127.0.0.5".parse().unwrap());
    assert!(cut >= 2, "cut {cut} wires");
    // Frames sent now find the wire dead (their WRITEs are retried, then fail): they may be lost,
    // as messages in flight on a broken tcp connection may be, but every buffer is released.
    let released = Arc::new(AtomicUsize::new(0));
    for i in 0..4u8 {
        push.send(external(payload(1 << 20, i), &released), 0)
            .unwrap();
    }
    let mut ended = false;
    loop {
        let (ev, v) = next_event(&mut mon);
        if ev == monitor::EVENT_TRANSPORT && v == monitor::TRANSPORT_ENDED {
            ended = true;
        }
        if ev == monitor::EVENT_TRANSPORT && v == monitor::TRANSPORT_RDMA {
            break;
        }
    }
    assert!(ended, "the broken RDMA connection was not reported");
    // Reconnected and upgraded again: new traffic arrives whole and in order, after whatever of
    // the four survived (each either whole or absent, never twice).
    for i in 0..50u8 {
        push.send(payload(200_000, 100 + i), 0).unwrap();
    }
    let mut seen_old = Vec::new();
    let mut got = pull.recv_bytes(0).unwrap();
    while got.len() == 1 << 20 {
        let i = (0..4u8)
            .find(|&i| got == payload(1 << 20, i))
            .expect("a corrupted frame");
        assert!(!seen_old.contains(&i), "frame {i} delivered twice");
        seen_old.push(i);
        got = pull.recv_bytes(0).unwrap();
    }
    assert!(got == payload(200_000, 100));
    for i in 1..50u8 {
        assert!(
            pull.recv_bytes(0).unwrap() == payload(200_000, 100 + i),
            "{i}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while released.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        released.load(Ordering::SeqCst),
        4,
        "sender buffers not released"
    );
    // The bystander never noticed.
    for i in 0..20u8 {
        other_push.send(payload(100_000, i), 0).unwrap();
        assert!(other_pull.recv_bytes(0).unwrap() == payload(100_000, i));
    }
    other_mon.set_option_i32(opt::RCVTIMEO, 200).unwrap();
    while let Ok(parts) = other_mon.recv_multipart(0) {
        let ev = u16::from_ne_bytes([parts[0].data()[0], parts[0].data()[1]]);
        assert_ne!(
            ev,
            monitor::EVENT_DISCONNECTED,
            "the other connection was disturbed"
        );
    }
}

#[test]
fn rdma_starts_only_after_plain_authentication() {
    setup();
    let ctx = Context::new();
    // A ZAP handler that knows one user.
    let mut zap = ctx.socket(SocketType::Rep).unwrap();
    zap.set_option_i32(opt::RCVTIMEO, 50).unwrap();
    zap.set_option_i32(opt::LINGER, 0).unwrap();
    zap.bind("inproc://zeromq.zap.01").unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let handler = std::thread::spawn(move || {
        let mut refused = 0;
        while !stop2.load(Ordering::SeqCst) {
            // version, request id, domain, address, identity, mechanism, user, password
            let Ok(req) = zap.recv_multipart(0) else {
                continue;
            };
            let ok = req.len() == 8 && req[6].data() == b"admin" && req[7].data() == b"secret";
            refused += usize::from(!ok);
            let (status, user): (&[u8], &[u8]) = if ok {
                (b"200", b"admin")
            } else {
                (b"400", b"")
            };
            zap.send_multipart([&b"1.0"[..], req[1].data(), status, b"", user, b""], 0)
                .unwrap();
        }
        refused
    });
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.set_option_i32(opt::PLAIN_SERVER, 1).unwrap();
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();

    // Wrong password: refused by ZAP before any upgrade; what it sends is never delivered.
    let mut bad = sock(&ctx, SocketType::Push);
    bad.set_option_i32(opt::LINGER, 0).unwrap();
    bad.set_option_raw(opt::PLAIN_USERNAME, b"admin").unwrap();
    bad.set_option_raw(opt::PLAIN_PASSWORD, b"guess").unwrap();
    bad.connect(&ep).unwrap();
    bad.send("forged", 0).unwrap();

    let mut good = sock(&ctx, SocketType::Push);
    good.set_option_raw(opt::PLAIN_USERNAME, b"admin").unwrap();
    good.set_option_raw(opt::PLAIN_PASSWORD, b"secret").unwrap();
    let mut mon = watch(&ctx, &mut good, "rdma-plain");
    good.connect(&ep).unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);
    good.send(payload(1 << 20, 7), 0).unwrap();
    let m = pull.recv_msg(0).unwrap();
    assert!(m.data() == payload(1 << 20, 7).as_slice());
    assert_eq!(m.property("User-Id"), Some(&b"admin"[..]));
    pull.set_option_i32(opt::RCVTIMEO, 300).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap_err(), rzmq_core::Error::Again);
    stop.store(true, Ordering::SeqCst);
    assert!(
        handler.join().unwrap() >= 1,
        "the wrong password never reached ZAP"
    );
}

#[test]
fn curve_connections_keep_the_encrypted_tcp_path() {
    setup();
    let ctx = Context::new();
    let (server_pub, server_sec) = rzmq_core::z85::generate_keypair().unwrap();
    let (client_pub, client_sec) = rzmq_core::z85::generate_keypair().unwrap();
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.set_option_i32(opt::CURVE_SERVER, 1).unwrap();
    pull.set_option_raw(opt::CURVE_SECRETKEY, &server_sec[..])
        .unwrap();
    let mut mon = watch(&ctx, &mut pull, "rdma-curve");
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let mut push = sock(&ctx, SocketType::Push);
    push.set_option_raw(opt::CURVE_SERVERKEY, &server_pub)
        .unwrap();
    push.set_option_raw(opt::CURVE_PUBLICKEY, &client_pub)
        .unwrap();
    push.set_option_raw(opt::CURVE_SECRETKEY, &client_sec[..])
        .unwrap();
    push.connect(&ep).unwrap();
    push.send(payload(1 << 20, 3), 0).unwrap();
    // Both ends could do RDMA, but the messages would travel unencrypted there: TCP it is.
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_TCP);
    assert!(pull.recv_bytes(0).unwrap() == payload(1 << 20, 3));
}

#[test]
fn a_sender_with_many_large_frames_queued_keeps_one_rdma_connection() {
    // remote_thr's pattern: PUSH queues up to its high-water mark (1000) of fresh 1 MiB frames
    // while PULL drains them. The sender's QP then serves a stream of READs while its own ring
    // WRITEs wait behind the responses: no request may time out for waiting in its send queue,
    // and the READs never exceed the QP's limit. One RDMA connection carries every frame.
    setup();
    let ctx = Context::new();
    // Away from the wires the cut-wire test cuts on 127.0.0.5, and from two addresses: one soft
    // device (NIC thread) per end, as between two hosts.
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.bind("tcp://127.0.0.3:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let mut push = sock(&ctx, SocketType::Push);
    let mut mon = watch(&ctx, &mut push, "rdma-queued");
    push.connect(&ep.replacen("tcp://", "tcp://127.0.0.4:0;", 1))
        .unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);
    let n = 1000u64;
    let sender = std::thread::spawn(move || {
        for i in 0..n {
            let mut v = vec![0u8; 1 << 20];
            v[..8].copy_from_slice(&i.to_le_bytes());
            v[(1 << 20) - 8..].copy_from_slice(&i.to_le_bytes());
            push.send(Msg::from_vec(v), 0).unwrap();
        }
        push
    });
    for i in 0..n {
        let m = pull.recv_msg(0).unwrap();
        let d = m.data();
        assert_eq!(d.len(), 1 << 20);
        assert_eq!(u64::from_le_bytes(d[..8].try_into().unwrap()), i, "lost");
        assert_eq!(
            u64::from_le_bytes(d[(1 << 20) - 8..].try_into().unwrap()),
            i
        );
    }
    let _push = sender.join().unwrap();
    // The connection never broke: no disconnect, no end of the RDMA path, no second upgrade.
    mon.set_option_i32(opt::RCVTIMEO, 200).unwrap();
    while let Ok(parts) = mon.recv_multipart(0) {
        let ev = u16::from_ne_bytes([parts[0].data()[0], parts[0].data()[1]]);
        assert_ne!(ev, monitor::EVENT_DISCONNECTED, "the connection broke");
        assert_ne!(
            ev,
            monitor::EVENT_TRANSPORT,
            "the RDMA path ended or restarted"
        );
    }
}

#[test]
fn radio_dish_over_tcp_moves_to_rdma_and_keeps_its_groups() {
    setup();
    let ctx = Context::new();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.bind("tcp://127.0.0.1:*").unwrap();
    let ep = dish.last_endpoint().to_string();
    dish.join("big").unwrap();
    let mut radio = sock(&ctx, SocketType::Radio);
    let mut mon = watch(&ctx, &mut radio, "rdma-radio");
    radio.connect(&ep).unwrap();
    assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);
    let grouped = |g: &str, body: Vec<u8>| {
        let mut m = Msg::from_vec(body);
        m.set_group(g).unwrap();
        m
    };
    // The JOIN travelled before the switch; probe until the RADIO has it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        radio
            .send_msg(grouped("big", b"probe".to_vec()), 0)
            .unwrap();
        if dish.recv_msg(rzmq_core::DONTWAIT).is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "no delivery");
        std::thread::sleep(Duration::from_millis(10));
    }
    while dish.recv_msg(rzmq_core::DONTWAIT).is_ok() {}
    // A JOIN sent after the switch travels as an RDMA command frame.
    dish.join("late").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        radio
            .send_msg(grouped("late", b"probe".to_vec()), 0)
            .unwrap();
        // (Probes of "big" still in flight arrive first.)
        if let Ok(m) = dish.recv_msg(rzmq_core::DONTWAIT) {
            if m.group() == b"late" {
                break;
            }
            assert_eq!(m.group(), b"big");
        }
        assert!(Instant::now() < deadline, "no delivery after a late JOIN");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A marker ends the late probes still in flight.
    radio
        .send_msg(grouped("big", b"marker".to_vec()), 0)
        .unwrap();
    while dish.recv_msg(0).unwrap().data() != b"marker" {}
    for (i, n) in [0usize, 300, 70_000, 2 << 20].into_iter().enumerate() {
        radio
            .send_msg(grouped("other", payload(10, i as u8)), 0)
            .unwrap();
        radio
            .send_msg(grouped("big", payload(n, i as u8)), 0)
            .unwrap();
        let m = dish.recv_msg(0).unwrap();
        assert_eq!(m.group(), b"big");
        assert!(m.data() == payload(n, i as u8).as_slice(), "body {i}");
    }
}

#[test]
fn client_server_over_tcp_moves_to_rdma_and_still_routes() {
    setup();
    let ctx = Context::new();
    let mut server = sock(&ctx, SocketType::Server);
    server.bind("tcp://127.0.0.1:*").unwrap();
    let ep = server.last_endpoint().to_string();
    let mut mon_server = watch(&ctx, &mut server, "rdma-server");
    let mut clients = Vec::new();
    for i in 0..2 {
        let mut c = sock(&ctx, SocketType::Client);
        let mut mon = watch(&ctx, &mut c, &format!("rdma-client{i}"));
        c.connect(&ep).unwrap();
        assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);
        assert_eq!(next_transport(&mut mon_server), monitor::TRANSPORT_RDMA);
        clients.push(c);
    }
    // Small and rendezvous-sized frames, each answered to the routing id it arrived with.
    for round in 0..20usize {
        for (i, c) in clients.iter_mut().enumerate() {
            let n = [16, 4096, 200_000][round % 3] + i;
            c.send(payload(n, (round + i) as u8), 0).unwrap();
        }
        let mut rids = Vec::new();
        for _ in 0..clients.len() {
            let m = server.recv_msg(0).unwrap();
            assert_ne!(m.routing_id(), 0);
            rids.push((m.routing_id(), m.len()));
        }
        for &(rid, n) in &rids {
            let mut reply = Msg::from_vec(payload(n, 7));
            reply.set_routing_id(rid).unwrap();
            server.send_msg(reply, 0).unwrap();
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let n = [16, 4096, 200_000][round % 3] + i;
            let back = c.recv_bytes(0).unwrap();
            assert!(back == payload(n, 7), "round {round} client {i}");
        }
    }
}

/// `zmq_ctx_term` with messages queued for an RDMA peer that went away (an eager frame and a
/// rendezvous one), or for an `rdma://` peer that never came: LINGER 200 returns after it,
/// LINGER -1 waits until a peer comes back, moves to RDMA again and takes them (the tcp, ipc
/// and inproc cases, beside libzmq's, are in linger_term.rs).
#[test]
fn term_with_messages_for_an_absent_rdma_peer_lingers_then_returns() {
    use std::sync::mpsc;
    setup();
    for linger in [200, -1] {
        let ctx = Context::new();
        let mut dealer = rzmq_tests::timed_socket(&ctx, SocketType::Dealer, linger);
        let mut mon = watch(&ctx, &mut dealer, &format!("rdma-linger{linger}"));
        // The peer, in a context of its own: it takes one message over RDMA, then goes.
        let pctx = Context::new();
        let mut peer = sock(&pctx, SocketType::Dealer);
        peer.bind("tcp://127.0.0.1:*").unwrap();
        let ep = peer.last_endpoint().to_string();
        dealer.connect(&ep).unwrap();
        assert_eq!(next_transport(&mut mon), monitor::TRANSPORT_RDMA);
        dealer.send("hello", 0).unwrap();
        assert_eq!(peer.recv_bytes(0).unwrap(), b"hello");
        peer.close();
        pctx.term().unwrap();
        while next_event(&mut mon).0 != monitor::EVENT_DISCONNECTED {}
        mon.close();
        dealer.send("late", 0).unwrap();
        dealer.send(&payload(1 << 20, 7)[..], 0).unwrap();
        let (tx, rx) = mpsc::channel();
        let closer = std::thread::spawn(move || {
            dealer.close();
            ctx.term().unwrap();
            let _ = tx.send(());
        });
        if linger < 0 {
            assert!(
                rx.recv_timeout(Duration::from_millis(400)).is_err(),
                "LINGER -1: term waits for the queued messages"
            );
            let pctx = Context::new();
            let mut peer = sock(&pctx, SocketType::Dealer);
            let mut pmon = watch(&pctx, &mut peer, "rdma-linger-back");
            peer.bind(&ep).unwrap();
            assert_eq!(peer.recv_bytes(0).unwrap(), b"late");
            assert_eq!(peer.recv_bytes(0).unwrap(), payload(1 << 20, 7));
            assert_eq!(next_transport(&mut pmon), monitor::TRANSPORT_RDMA);
        }
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("term hung with LINGER {linger}"));
        closer.join().unwrap();
    }
    // An rdma:// peer that never came.
    let ctx = Context::new();
    let mut dealer = rzmq_tests::timed_socket(&ctx, SocketType::Dealer, 200);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    dealer.connect(&format!("rdma://127.0.0.1:{port}")).unwrap();
    dealer.send("nobody", 0).unwrap();
    let (tx, rx) = mpsc::channel();
    let closer = std::thread::spawn(move || {
        dealer.close();
        ctx.term().unwrap();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("term returns after LINGER");
    closer.join().unwrap();
}

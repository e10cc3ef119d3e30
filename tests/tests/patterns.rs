//! The socket-pattern matrix, rzmq to rzmq, over tcp, ipc and inproc.
//!
//! The RDMA upgrader is installed from the environment, so the same matrix runs with
//! `RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft` (scripts/test.sh does), where every tcp
//! connection must move to RDMA or be refused.

use rzmq_core::monitor;
use rzmq_core::options as opt;
use rzmq_core::{Context, Error, Msg, Socket, SocketType};
use rzmq_tests::{inproc_endpoint, ipc_endpoint, payload};

const TRANSPORTS: [&str; 3] = ["tcp", "ipc", "inproc"];

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    rzmq_rdma::install();
    rzmq_tests::timed_socket(ctx, ty, 0)
}

fn bind(s: &mut Socket, transport: &str) -> String {
    let ep = match transport {
        "tcp" => "tcp://127.0.0.1:*".to_string(),
        "ipc" => ipc_endpoint("pat"),
        _ => inproc_endpoint("pat"),
    };
    s.bind(&ep).unwrap();
    s.last_endpoint().to_string()
}

fn pair_up(ctx: &Context, a: SocketType, b: SocketType, transport: &str) -> (Socket, Socket) {
    let mut x = sock(ctx, a);
    let ep = bind(&mut x, transport);
    let mut y = sock(ctx, b);
    y.connect(&ep).unwrap();
    (x, y)
}

fn recv_all(s: &mut Socket) -> Vec<Vec<u8>> {
    s.recv_multipart(0)
        .unwrap()
        .into_iter()
        .map(|m| m.data().to_vec())
        .collect()
}

#[test]
fn pair_exchanges_multipart() {
    for t in TRANSPORTS {
        let ctx = Context::new();
        let (mut a, mut b) = pair_up(&ctx, SocketType::Pair, SocketType::Pair, t);
        a.send_multipart([&b"1"[..], b"", b"333"], 0).unwrap();
        assert_eq!(
            recv_all(&mut b),
            vec![b"1".to_vec(), vec![], b"333".to_vec()],
            "{t}"
        );
        b.send(payload(200_000, 3), 0).unwrap();
        assert_eq!(a.recv_bytes(0).unwrap(), payload(200_000, 3), "{t}");
        // Larger than the kernel's socket buffers: both ends share one I/O thread here, so the
        // writer must yield on a full buffer instead of spinning.
        a.send(payload(16 << 20, 4), 0).unwrap();
        assert_eq!(b.recv_bytes(0).unwrap(), payload(16 << 20, 4), "{t}");
    }
}

#[test]
fn push_load_balances_and_pull_fair_queues() {
    for t in TRANSPORTS {
        let ctx = Context::new();
        let mut push = sock(&ctx, SocketType::Push);
        let ep = bind(&mut push, t);
        let mut pulls: Vec<Socket> = (0..3).map(|_| sock(&ctx, SocketType::Pull)).collect();
        for p in pulls.iter_mut() {
            p.connect(&ep).unwrap();
        }
        // Wait until all three are attached: one message each must arrive at distinct peers.
        std::thread::sleep(std::time::Duration::from_millis(200));
        for i in 0..30u8 {
            push.send(vec![i], 0).unwrap();
        }
        let mut counts = [0; 3];
        let mut seen = Vec::new();
        for (k, p) in pulls.iter_mut().enumerate() {
            p.set_option_i32(opt::RCVTIMEO, 500).unwrap();
            while let Ok(m) = p.recv_bytes(0) {
                counts[k] += 1;
                seen.push(m[0]);
            }
        }
        seen.sort();
        assert_eq!(
            seen,
            (0..30).collect::<Vec<u8>>(),
            "{t}: every message exactly once"
        );
        assert_eq!(counts, [10, 10, 10], "{t}: round robin");
    }
}

#[test]
fn req_rep_and_envelopes_through_router_dealer() {
    for t in TRANSPORTS {
        let ctx = Context::new();
        let (mut rep, mut req) = pair_up(&ctx, SocketType::Rep, SocketType::Req, t);
        req.send("q", 0).unwrap();
        assert_eq!(rep.recv_bytes(0).unwrap(), b"q");
        assert_eq!(rep.recv_bytes(DONT).unwrap_err(), Error::Fsm);
        rep.send("a", 0).unwrap();
        assert_eq!(req.recv_bytes(0).unwrap(), b"a");
        assert_eq!(req.recv_bytes(0).unwrap_err(), Error::Fsm);

        // REQ -> ROUTER: the router sees [id, "", body] and routes the reply back.
        let (mut router, mut req2) = pair_up(&ctx, SocketType::Router, SocketType::Req, t);
        req2.send("hello", 0).unwrap();
        let env = recv_all(&mut router);
        assert_eq!(env.len(), 3, "{t}");
        assert!(env[1].is_empty());
        router
            .send_multipart([env[0].clone(), vec![], b"world".to_vec()], 0)
            .unwrap();
        assert_eq!(req2.recv_bytes(0).unwrap(), b"world", "{t}");
    }
}
const DONT: i32 = rzmq_core::DONTWAIT;

#[test]
fn router_mandatory_and_connect_routing_id() {
    for t in TRANSPORTS {
        let ctx = Context::new();
        let mut router = sock(&ctx, SocketType::Router);
        router.set_option_i32(opt::ROUTER_MANDATORY, 1).unwrap();
        let ep = bind(&mut router, t);
        let err = router
            .send_multipart([&b"nobody"[..], b"x"], 0)
            .unwrap_err();
        assert_eq!(err, Error::HostUnreach, "{t}");
        let mut dealer = sock(&ctx, SocketType::Dealer);
        dealer.set_option_raw(opt::ROUTING_ID, b"D1").unwrap();
        dealer.connect(&ep).unwrap();
        // Once the handshake is done the router can address the dealer without hearing from it.
        let t0 = std::time::Instant::now();
        loop {
            match router.send_multipart([&b"D1"[..], b"hi"], 0) {
                Ok(()) => break,
                Err(Error::HostUnreach) if t0.elapsed().as_secs() < 10 => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{t}: {e}"),
            }
        }
        assert_eq!(dealer.recv_bytes(0).unwrap(), b"hi");

        // A ROUTER connecting can name its peer with CONNECT_ROUTING_ID.
        let mut front = sock(&ctx, SocketType::Router);
        front
            .set_option_raw(opt::CONNECT_ROUTING_ID, b"backend")
            .unwrap();
        let mut back = sock(&ctx, SocketType::Router);
        let ep2 = bind(&mut back, t);
        back.set_option_i32(opt::ROUTER_MANDATORY, 1).unwrap();
        front.set_option_i32(opt::ROUTER_MANDATORY, 1).unwrap();
        front.connect(&ep2).unwrap();
        let t0 = std::time::Instant::now();
        loop {
            match front.send_multipart([&b"backend"[..], b"req"], 0) {
                Ok(()) => break,
                Err(Error::HostUnreach) | Err(Error::Again) if t0.elapsed().as_secs() < 10 => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{t}: {e}"),
            }
        }
        let got = recv_all(&mut back);
        assert_eq!(got[1], b"req", "{t}");
    }
}

#[test]
fn pub_sub_prefix_filtering_and_xpub_verbose() {
    for t in TRANSPORTS {
        let ctx = Context::new();
        let mut xpub = sock(&ctx, SocketType::XPub);
        xpub.set_option_i32(opt::XPUB_VERBOSE, 1).unwrap();
        let ep = bind(&mut xpub, t);
        let mut s1 = sock(&ctx, SocketType::Sub);
        let mut s2 = sock(&ctx, SocketType::Sub);
        s1.subscribe(b"ab").unwrap();
        s2.subscribe(b"ab").unwrap();
        s2.subscribe(b"").unwrap();
        s1.connect(&ep).unwrap();
        s2.connect(&ep).unwrap();
        let mut subs = Vec::new();
        for _ in 0..3 {
            subs.push(xpub.recv_bytes(0).unwrap());
        }
        subs.sort();
        assert_eq!(
            subs,
            vec![b"\x01".to_vec(), b"\x01ab".to_vec(), b"\x01ab".to_vec()],
            "{t}: verbose passes duplicates"
        );
        xpub.send("abc", 0).unwrap();
        xpub.send("zzz", 0).unwrap();
        assert_eq!(s1.recv_bytes(0).unwrap(), b"abc");
        assert_eq!(s2.recv_bytes(0).unwrap(), b"abc");
        assert_eq!(s2.recv_bytes(0).unwrap(), b"zzz");
        s1.set_option_i32(opt::RCVTIMEO, 100).unwrap();
        assert_eq!(
            s1.recv_bytes(0).unwrap_err(),
            Error::Again,
            "{t}: filtered out"
        );
    }
}

#[test]
fn hwm_blocks_push_and_drops_pub() {
    let ctx = Context::new();
    let ep = inproc_endpoint("hwm");
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.set_option_i32(opt::RCVHWM, 5).unwrap();
    pull.bind(&ep).unwrap();
    let mut push = sock(&ctx, SocketType::Push);
    push.set_option_i32(opt::SNDHWM, 5).unwrap();
    push.connect(&ep).unwrap();
    let mut sent = 0;
    while push.send("x", DONT).is_ok() {
        sent += 1;
        assert!(sent < 100);
    }
    assert_eq!(sent, 10, "inproc HWM is SNDHWM + peer RCVHWM");
    // As libzmq, the writer hears of consumed messages in batches of the low-water mark
    // ((hwm + 1) / 2 = 5 here): one read frees nothing yet, five do.
    pull.recv_bytes(0).unwrap();
    assert_eq!(push.send("y", DONT).unwrap_err(), Error::Again);
    for _ in 0..4 {
        pull.recv_bytes(0).unwrap();
    }
    push.send("y", DONT).unwrap();
}

#[test]
fn connect_before_bind_inproc_and_tcp_reconnect() {
    let ctx = Context::new();
    let ep = inproc_endpoint("late");
    let mut push = sock(&ctx, SocketType::Push);
    push.connect(&ep).unwrap();
    push.send("early", 0).unwrap();
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.bind(&ep).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap(), b"early");

    // tcp: connect to a port nobody listens on yet, then bind it.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let addr = format!("tcp://127.0.0.1:{port}");
    let mut push = sock(&ctx, SocketType::Push);
    push.set_option_i32(opt::RECONNECT_IVL, 10).unwrap();
    push.connect(&addr).unwrap();
    push.send("queued", 0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.bind(&addr).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap(), b"queued");
}

#[test]
fn monitor_reports_lifecycle_events() {
    let ctx = Context::new();
    let mut server = sock(&ctx, SocketType::Rep);
    server
        .monitor(Some("inproc://mon-server"), monitor::EVENT_ALL)
        .unwrap();
    let mut mon = sock(&ctx, SocketType::Pair);
    mon.connect("inproc://mon-server").unwrap();
    let ep = bind(&mut server, "tcp");
    let mut client = sock(&ctx, SocketType::Req);
    client.connect(&ep).unwrap();
    client.send("x", 0).unwrap();
    server.recv_bytes(0).unwrap();
    server.send("y", 0).unwrap();
    client.recv_bytes(0).unwrap();
    drop(client);
    let mut events = Vec::new();
    while !events.contains(&monitor::EVENT_DISCONNECTED) {
        let parts = mon.recv_multipart(0).unwrap();
        assert_eq!(parts.len(), 2);
        let (ev, _) = monitor::parse_event(parts[0].data()).unwrap();
        events.push(ev);
    }
    for want in [
        monitor::EVENT_LISTENING,
        monitor::EVENT_ACCEPTED,
        monitor::EVENT_HANDSHAKE_SUCCEEDED,
    ] {
        assert!(
            events.contains(&want),
            "missing event {want:#x} in {events:x?}"
        );
    }
}

#[test]
fn same_host_tcp_connections_leave_pacing_congestion_control() {
    // Both ends of a loopback connection run RZMQ_TCP_LOCAL_CC (default reno), whatever the
    // host's default congestion control is.
    let want = match std::env::var("RZMQ_TCP_LOCAL_CC") {
        Err(_) => "reno".to_string(),
        Ok(v) if v.is_empty() || v == "off" || v == "default" => return,
        Ok(v) => v,
    };
    let ctx = Context::new();
    let mut server = sock(&ctx, SocketType::Pull);
    server
        .monitor(Some("inproc://cc-server"), monitor::EVENT_ACCEPTED)
        .unwrap();
    let mut client = sock(&ctx, SocketType::Push);
    client
        .monitor(Some("inproc://cc-client"), monitor::EVENT_CONNECTED)
        .unwrap();
    let mut smon = sock(&ctx, SocketType::Pair);
    smon.connect("inproc://cc-server").unwrap();
    let mut cmon = sock(&ctx, SocketType::Pair);
    cmon.connect("inproc://cc-client").unwrap();
    server.bind("tcp://127.0.0.1:*").unwrap();
    client.connect(server.last_endpoint()).unwrap();
    client.send("x", 0).unwrap();
    assert_eq!(server.recv_bytes(0).unwrap(), b"x");
    for (mon, ev) in [
        (&mut smon, monitor::EVENT_ACCEPTED),
        (&mut cmon, monitor::EVENT_CONNECTED),
    ] {
        let parts = mon.recv_multipart(0).unwrap();
        let (got, fd) = monitor::parse_event(parts[0].data()).unwrap();
        assert_eq!(got, ev);
        // The connection is up (a message went through), so the fd is still its socket.
        let cc = rzmq_core::testing::transport::congestion_control(fd as i32).unwrap();
        assert_eq!(cc, want, "event {ev:#x}");
    }
}

/// An `int` socket option of the kernel socket `fd` (`getsockopt`).
fn kernel_opt(fd: i32, level: i32, name: i32) -> i32 {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live locals of the sizes getsockopt is told.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(
        rc,
        0,
        "getsockopt({level}, {name}): {}",
        std::io::Error::last_os_error()
    );
    v
}

#[test]
fn accepted_tcp_connections_take_the_keepalive_and_maxrt_options() {
    // As libzmq: a listener's accepted connections get ZMQ_TCP_KEEPALIVE with its idle,
    // interval and count, and ZMQ_TCP_MAXRT, not only the connecting side.
    let ctx = Context::new();
    let mut server = sock(&ctx, SocketType::Pull);
    for (o, v) in [
        (opt::TCP_KEEPALIVE, 1),
        (opt::TCP_KEEPALIVE_IDLE, 77),
        (opt::TCP_KEEPALIVE_INTVL, 9),
        (opt::TCP_KEEPALIVE_CNT, 4),
        (opt::TCP_MAXRT, 12_345),
    ] {
        server.set_option_i32(o, v).unwrap();
    }
    server
        .monitor(Some("inproc://ka-server"), monitor::EVENT_ACCEPTED)
        .unwrap();
    let mut smon = sock(&ctx, SocketType::Pair);
    smon.connect("inproc://ka-server").unwrap();
    server.bind("tcp://127.0.0.1:*").unwrap();
    let mut client = sock(&ctx, SocketType::Push);
    client.connect(server.last_endpoint()).unwrap();
    client.send("x", 0).unwrap();
    assert_eq!(server.recv_bytes(0).unwrap(), b"x");
    let parts = smon.recv_multipart(0).unwrap();
    let (ev, fd) = monitor::parse_event(parts[0].data()).unwrap();
    assert_eq!(ev, monitor::EVENT_ACCEPTED);
    // The connection is up (a message went through), so the fd is still its socket.
    let fd = fd as i32;
    assert_eq!(kernel_opt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
    assert_eq!(kernel_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 77);
    assert_eq!(kernel_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 9);
    assert_eq!(kernel_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 4);
    assert_eq!(
        kernel_opt(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
        12_345
    );
}

#[test]
fn term_wakes_blocked_recv_with_eterm() {
    let ctx = Context::new();
    let c2 = ctx.clone();
    let t = std::thread::spawn(move || {
        let mut s = c2.socket(SocketType::Pull).unwrap();
        s.bind("inproc://term").unwrap();
        let r = s.recv_bytes(0);
        drop(s);
        r
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    ctx.term().unwrap();
    assert_eq!(t.join().unwrap().unwrap_err(), Error::Term);
    assert_eq!(ctx.socket(SocketType::Pair).unwrap_err(), Error::Term);
}

#[test]
fn external_buffer_released_once_after_transmission() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let ctx = Context::new();
    let (mut a, mut b) = pair_up(&ctx, SocketType::Pair, SocketType::Pair, "tcp");
    let released = Arc::new(AtomicUsize::new(0));
    let mut data = payload(1 << 20, 9).into_boxed_slice();
    let ptr = data.as_mut_ptr();
    let r2 = released.clone();
    // SAFETY: `data` outlives the message: we wait for the release before dropping it.
    let msg = unsafe {
        Msg::from_external(
            ptr,
            1 << 20,
            Some(Box::new(move || {
                r2.fetch_add(1, Ordering::SeqCst);
            })),
        )
    };
    a.send_msg(msg, 0).unwrap();
    assert_eq!(b.recv_bytes(0).unwrap(), payload(1 << 20, 9));
    let t0 = std::time::Instant::now();
    while released.load(Ordering::SeqCst) == 0 && t0.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(released.load(Ordering::SeqCst), 1);
    drop(data);
}

#[test]
fn closing_a_bound_socket_disconnects_its_peers() {
    for linger in [0, 100] {
        let ctx = Context::new();
        let mut publ = sock(&ctx, SocketType::Pub);
        publ.set_option_i32(opt::LINGER, linger).unwrap();
        let ep = bind(&mut publ, "tcp");
        let mut sub = sock(&ctx, SocketType::Sub);
        sub.set_option_i32(opt::RECONNECT_IVL, 60_000).unwrap();
        let mon_ep = inproc_endpoint("close-mon");
        sub.monitor(Some(&mon_ep), monitor::EVENT_ALL).unwrap();
        let mut mon = sock(&ctx, SocketType::Pair);
        mon.connect(&mon_ep).unwrap();
        sub.connect(&ep).unwrap();
        let mut seen = Vec::new();
        while !seen.contains(&monitor::EVENT_HANDSHAKE_SUCCEEDED) {
            let parts = mon.recv_multipart(0).unwrap();
            seen.push(monitor::parse_event(parts[0].data()).unwrap().0);
        }
        drop(publ);
        assert_eq!(
            seen,
            vec![
                monitor::EVENT_CONNECT_DELAYED,
                monitor::EVENT_CONNECTED,
                monitor::EVENT_HANDSHAKE_SUCCEEDED
            ]
        );
        // The peer sees the connection go away and schedules a reconnect, as libzmq reports it.
        let mut after = Vec::new();
        while after.len() < 2 {
            let parts = mon
                .recv_multipart(0)
                .expect("events after the binder closed");
            after.push(monitor::parse_event(parts[0].data()).unwrap().0);
        }
        assert_eq!(
            after,
            vec![monitor::EVENT_DISCONNECTED, monitor::EVENT_CONNECT_RETRIED]
        );
    }
}

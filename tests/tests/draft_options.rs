//! libzmq 4.3.5's DRAFT socket options through the native API, each checked as libzmq's own test
//! checks it: `ZMQ_TOPICS_COUNT` (test_pubsub_topics_count), `ZMQ_XSUB_VERBOSE_UNSUBSCRIBE`
//! (test_xsub_verbose), `ZMQ_PRIORITY` (test_setsockopt), `ZMQ_BUSY_POLL` (test_busy_poll),
//! `ZMQ_ROUTER_NOTIFY`, `ZMQ_HICCUP_MSG`, `ZMQ_HELLO_MSG` (test_hello_msg; and ahead of a
//! reconnected pipe's queue), `ZMQ_DISCONNECT_MSG` (test_disconnect_msg); and the DRAFT calls
//! beside them: version 2 monitor events with pipes stats (test_monitor) and
//! `zmq_socket_get_peer_state` (test_router_mandatory).

use rzmq_core::options as opt;
use rzmq_core::options::OptValue;
use rzmq_core::{Context, Error, Socket, SocketType, DONTWAIT};
use rzmq_tests::{inproc_endpoint, timed_socket};

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    timed_socket(ctx, ty, 0)
}

/// An int option's value.
fn get_int(s: &mut Socket, option: i32) -> i32 {
    match s.get_option(option).unwrap() {
        OptValue::Int(v) | OptValue::IntRelaxed(v) => v,
        other => panic!("option {option}: not an int: {other:?}"),
    }
}

/// `ZMQ_TOPICS_COUNT` once the subscriptions sent so far have reached `s`: subscriptions travel
/// asynchronously, so this polls (as libzmq's test kicks the socket with `ZMQ_EVENTS`) until the
/// count is `want`, and returns the last count read when it never gets there.
fn topics_count(s: &mut Socket, want: i32) -> i32 {
    let mut n = -1;
    for _ in 0..2000 {
        s.events().unwrap();
        n = get_int(s, opt::TOPICS_COUNT);
        if n == want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    n
}

#[test]
fn topics_count_counts_independent_and_nested_prefixes() {
    let ctx = Context::new();
    let mut publisher = sock(&ctx, SocketType::Pub);
    let ep = inproc_endpoint("topics-count");
    publisher.bind(&ep).unwrap();
    let mut subscriber = sock(&ctx, SocketType::Sub);
    subscriber.connect(&ep).unwrap();
    assert_eq!(topics_count(&mut subscriber, 0), 0);
    for t in ["topicprefix1", "topicprefix2", "topicprefix3"] {
        subscriber.subscribe(t.as_bytes()).unwrap();
    }
    assert_eq!(topics_count(&mut subscriber, 3), 3);
    assert_eq!(topics_count(&mut publisher, 3), 3);
    subscriber.unsubscribe(b"topicprefix3").unwrap();
    assert_eq!(topics_count(&mut subscriber, 2), 2);
    assert_eq!(topics_count(&mut publisher, 2), 2);
    subscriber.unsubscribe(b"topicprefix1").unwrap();
    subscriber.unsubscribe(b"topicprefix2").unwrap();
    assert_eq!(topics_count(&mut subscriber, 0), 0);
    assert_eq!(topics_count(&mut publisher, 0), 0);
    // Nested prefixes are distinct subscriptions.
    for t in ["a", "ab", "abc"] {
        subscriber.subscribe(t.as_bytes()).unwrap();
    }
    assert_eq!(topics_count(&mut subscriber, 3), 3);
    assert_eq!(topics_count(&mut publisher, 3), 3);
    for t in ["xyz", "xy", "x"] {
        subscriber.subscribe(t.as_bytes()).unwrap();
    }
    assert_eq!(topics_count(&mut subscriber, 6), 6);
    assert_eq!(topics_count(&mut publisher, 6), 6);
}

#[test]
fn topics_count_on_xpub_and_xsub_and_einval_elsewhere() {
    let ctx = Context::new();
    let mut xpub = sock(&ctx, SocketType::XPub);
    let ep = inproc_endpoint("topics-count-x");
    xpub.bind(&ep).unwrap();
    let mut xsub = sock(&ctx, SocketType::XSub);
    xsub.connect(&ep).unwrap();
    xsub.send(&b"\x01news"[..], 0).unwrap();
    xsub.send(&b"\x01sport"[..], 0).unwrap();
    assert_eq!(topics_count(&mut xsub, 2), 2);
    assert_eq!(topics_count(&mut xpub, 2), 2);
    // libzmq answers it only for PUB, SUB, XPUB and XSUB.
    for ty in [SocketType::Push, SocketType::Router, SocketType::Pair] {
        let mut s = sock(&ctx, ty);
        assert_eq!(s.get_option(opt::TOPICS_COUNT), Err(Error::Inval), "{ty:?}");
    }
}

#[test]
fn xsub_verbose_unsubscribe_passes_on_every_unsubscription() {
    const SUB_A: &[u8] = b"\x01A";
    const UNSUB_A: &[u8] = b"\x00A";
    let ctx = Context::new();
    let mut xpub = sock(&ctx, SocketType::XPub);
    let ep = inproc_endpoint("xsub-verbose");
    xpub.bind(&ep).unwrap();
    let mut xsub = sock(&ctx, SocketType::XSub);
    xsub.connect(&ep).unwrap();
    xpub.set_option_i32(opt::XPUB_VERBOSER, 1).unwrap();
    let mut expect = |xsub: &mut Socket, send: &[u8], passed: Option<&[u8]>| {
        xsub.send(send, 0).unwrap();
        match passed {
            Some(m) => assert_eq!(xpub.recv_bytes(0).unwrap(), m),
            None => assert_eq!(xpub.recv_bytes(DONTWAIT), Err(Error::Again)),
        }
    };
    // Without the option: an unsubscription that removes nothing, or leaves a reference, is
    // filtered out by XSUB (the next receive would otherwise see it first).
    expect(&mut xsub, UNSUB_A, None);
    expect(&mut xsub, SUB_A, Some(SUB_A));
    expect(&mut xsub, SUB_A, Some(SUB_A));
    expect(&mut xsub, UNSUB_A, None);
    expect(&mut xsub, UNSUB_A, Some(UNSUB_A));
    // With it, every one goes upstream.
    xsub.set_option_i32(opt::XSUB_VERBOSE_UNSUBSCRIBE, 1)
        .unwrap();
    expect(&mut xsub, UNSUB_A, Some(UNSUB_A));
    expect(&mut xsub, SUB_A, Some(SUB_A));
    expect(&mut xsub, SUB_A, Some(SUB_A));
    expect(&mut xsub, UNSUB_A, Some(UNSUB_A));
    expect(&mut xsub, UNSUB_A, Some(UNSUB_A));
}

#[test]
fn xsub_verbose_unsubscribe_is_xsub_only_and_write_only() {
    let ctx = Context::new();
    let mut xsub = sock(&ctx, SocketType::XSub);
    assert_eq!(
        xsub.get_option(opt::XSUB_VERBOSE_UNSUBSCRIBE),
        Err(Error::Inval)
    );
    for ty in [SocketType::Sub, SocketType::XPub, SocketType::Dealer] {
        let mut s = sock(&ctx, ty);
        assert_eq!(
            s.set_option_i32(opt::XSUB_VERBOSE_UNSUBSCRIBE, 1),
            Err(Error::Inval),
            "{ty:?}"
        );
    }
}

#[test]
fn priority_set_and_get_as_libzmq() {
    let ctx = Context::new();
    let mut s = sock(&ctx, SocketType::Push);
    assert_eq!(get_int(&mut s, opt::PRIORITY), 0);
    s.set_option_i32(opt::PRIORITY, 3).unwrap();
    assert_eq!(get_int(&mut s, opt::PRIORITY), 3);
    assert_eq!(s.set_option_i32(opt::PRIORITY, -1), Err(Error::Inval));
    // A tcp connection carrying SO_PRIORITY works as any other.
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.set_option_i32(opt::PRIORITY, 3).unwrap();
    pull.bind("tcp://127.0.0.1:*").unwrap();
    s.connect(pull.last_endpoint()).unwrap();
    s.send(&b"prio"[..], 0).unwrap();
    assert_eq!(pull.recv_bytes(0).unwrap(), b"prio");
}

#[test]
fn busy_poll_set_then_bind_and_exchange() {
    let ctx = Context::new();
    let mut dealer = sock(&ctx, SocketType::Dealer);
    dealer.set_option_i32(opt::BUSY_POLL, 1).unwrap();
    assert_eq!(get_int(&mut dealer, opt::BUSY_POLL), 1);
    dealer.bind("tcp://127.0.0.1:*").unwrap();
    let mut peer = sock(&ctx, SocketType::Dealer);
    peer.set_option_i32(opt::BUSY_POLL, 1).unwrap();
    peer.connect(dealer.last_endpoint()).unwrap();
    peer.send(&b"busy"[..], 0).unwrap();
    assert_eq!(dealer.recv_bytes(0).unwrap(), b"busy");
}

fn recv_parts(s: &mut Socket) -> Vec<Vec<u8>> {
    s.recv_multipart(0)
        .unwrap()
        .iter()
        .map(|m| m.data().to_vec())
        .collect()
}

#[test]
fn router_notify_reports_connects_and_disconnects() {
    for (transport, tag) in [("tcp", "tcp://127.0.0.1:*"), ("ipc", "")] {
        for notify in [
            opt::NOTIFY_CONNECT,
            opt::NOTIFY_DISCONNECT,
            opt::NOTIFY_CONNECT | opt::NOTIFY_DISCONNECT,
        ] {
            let ctx = Context::new();
            let mut router = sock(&ctx, SocketType::Router);
            router.set_option_i32(opt::ROUTER_NOTIFY, notify).unwrap();
            assert_eq!(get_int(&mut router, opt::ROUTER_NOTIFY), notify);
            let ep = if transport == "ipc" {
                rzmq_tests::ipc_endpoint(&format!("router-notify-{notify}"))
            } else {
                tag.to_string()
            };
            router.bind(&ep).unwrap();
            let ep = router.last_endpoint().to_string();
            let mut dealer = sock(&ctx, SocketType::Dealer);
            dealer.set_option_raw(opt::ROUTING_ID, b"X").unwrap();
            dealer.connect(&ep).unwrap();
            if notify & opt::NOTIFY_CONNECT != 0 {
                assert_eq!(recv_parts(&mut router), vec![b"X".to_vec(), Vec::new()]);
            }
            dealer.send(&b"hi"[..], 0).unwrap();
            assert_eq!(recv_parts(&mut router), vec![b"X".to_vec(), b"hi".to_vec()]);
            dealer.close();
            if notify & opt::NOTIFY_DISCONNECT != 0 {
                assert_eq!(recv_parts(&mut router), vec![b"X".to_vec(), Vec::new()]);
            }
            router.close();
        }
    }
}

#[test]
fn router_notify_on_a_connecting_router() {
    let ctx = Context::new();
    let mut dealer = sock(&ctx, SocketType::Dealer);
    dealer.set_option_raw(opt::ROUTING_ID, b"D").unwrap();
    dealer.bind("tcp://127.0.0.1:*").unwrap();
    let mut router = sock(&ctx, SocketType::Router);
    router
        .set_option_i32(
            opt::ROUTER_NOTIFY,
            opt::NOTIFY_CONNECT | opt::NOTIFY_DISCONNECT,
        )
        .unwrap();
    router.connect(dealer.last_endpoint()).unwrap();
    assert_eq!(recv_parts(&mut router), vec![b"D".to_vec(), Vec::new()]);
    dealer.send(&b"hello"[..], 0).unwrap();
    assert_eq!(
        recv_parts(&mut router),
        vec![b"D".to_vec(), b"hello".to_vec()]
    );
    dealer.close();
    assert_eq!(recv_parts(&mut router), vec![b"D".to_vec(), Vec::new()]);
}

#[test]
fn router_notify_is_router_only_and_bounded() {
    let ctx = Context::new();
    let mut router = sock(&ctx, SocketType::Router);
    assert_eq!(get_int(&mut router, opt::ROUTER_NOTIFY), 0);
    assert_eq!(
        router.set_option_i32(opt::ROUTER_NOTIFY, 4),
        Err(Error::Inval)
    );
    assert_eq!(
        router.set_option_i32(opt::ROUTER_NOTIFY, -1),
        Err(Error::Inval)
    );
    let mut dealer = sock(&ctx, SocketType::Dealer);
    assert_eq!(
        dealer.set_option_i32(opt::ROUTER_NOTIFY, 1),
        Err(Error::Inval)
    );
}

#[test]
fn hiccup_msg_arrives_when_a_made_connection_breaks() {
    for ty in [SocketType::Client, SocketType::Dealer] {
        let ctx = Context::new();
        let peer_ty = if ty == SocketType::Client {
            SocketType::Server
        } else {
            SocketType::Router
        };
        let mut server = sock(&ctx, peer_ty);
        server.bind("tcp://127.0.0.1:*").unwrap();
        let mut client = sock(&ctx, ty);
        client.set_option_raw(opt::HICCUP_MSG, b"HICCUP").unwrap();
        assert_eq!(client.get_option(opt::HICCUP_MSG), Err(Error::Inval));
        client.connect(server.last_endpoint()).unwrap();
        // The handshake is done once the server has a message from it.
        client.send(&b"up"[..], 0).unwrap();
        let got = server.recv_multipart(0).unwrap();
        assert_eq!(got.last().unwrap().data(), b"up");
        server.close();
        assert_eq!(client.recv_bytes(0).unwrap(), b"HICCUP", "{ty:?}");
    }
}

/// Binds `s` on a fresh endpoint of `transport`; the address to connect to.
fn bind_on(s: &mut Socket, transport: &str, tag: &str) -> String {
    let ep = match transport {
        "inproc" => inproc_endpoint(tag),
        "tcp" => "tcp://127.0.0.1:*".to_string(),
        "ipc" => rzmq_tests::ipc_endpoint(tag),
        t => panic!("unknown transport {t}"),
    };
    s.bind(&ep).unwrap();
    s.last_endpoint().to_string()
}

#[test]
fn hello_msg_is_the_first_message_of_each_connection() {
    for tr in ["inproc", "tcp", "ipc"] {
        // libzmq's test_hello_msg: a ROUTER's hello reaches the DEALER that connects.
        let ctx = Context::new();
        let mut router = sock(&ctx, SocketType::Router);
        router.set_option_raw(opt::HELLO_MSG, b"H").unwrap();
        assert_eq!(router.get_option(opt::HELLO_MSG), Err(Error::Inval));
        let ep = bind_on(&mut router, tr, "hello");
        let mut dealer = sock(&ctx, SocketType::Dealer);
        dealer.connect(&ep).unwrap();
        assert_eq!(dealer.recv_bytes(0).unwrap(), b"H", "{tr}");
        // Both sides send theirs: the DEALER's hello reaches the ROUTER from that peer.
        let mut d2 = sock(&ctx, SocketType::Dealer);
        d2.set_option_raw(opt::HELLO_MSG, b"D2").unwrap();
        d2.connect(&ep).unwrap();
        assert_eq!(d2.recv_bytes(0).unwrap(), b"H", "{tr}");
        let m = router.recv_multipart(0).unwrap();
        assert_eq!(m[1].data(), b"D2", "{tr}");
    }
    // A connect before the bind (inproc): each side's hello still comes first.
    let ctx = Context::new();
    let ep = inproc_endpoint("late-hello");
    let mut client = sock(&ctx, SocketType::Client);
    client.set_option_raw(opt::HELLO_MSG, b"H").unwrap();
    client.connect(&ep).unwrap();
    let mut server = sock(&ctx, SocketType::Server);
    server.set_option_raw(opt::HELLO_MSG, b"W").unwrap();
    server.bind(&ep).unwrap();
    assert_eq!(client.recv_bytes(0).unwrap(), b"W");
    assert_eq!(server.recv_bytes(0).unwrap(), b"H");
    // Types that do not send one (libzmq's can_send_hello_msg) take the option and ignore it.
    let mut publisher = sock(&ctx, SocketType::Pub);
    publisher.set_option_raw(opt::HELLO_MSG, b"P").unwrap();
    let ep = inproc_endpoint("no-hello");
    publisher.bind(&ep).unwrap();
    let mut sub = sock(&ctx, SocketType::Sub);
    sub.subscribe(b"").unwrap();
    sub.connect(&ep).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(sub.recv_msg(DONTWAIT).unwrap_err(), Error::Again);
}

/// After a reconnect the hello goes out ahead of what queued while the peer was away: short
/// frames (the framed lane), a large one, and a message sent after the reconnect (a direct
/// send, the connection's output having been granted by the reply before the break).
#[test]
fn hello_msg_goes_ahead_of_what_a_reconnected_pipe_holds() {
    let ctx = Context::new();
    let mut router = sock(&ctx, SocketType::Router);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let ep = router.last_endpoint().to_string();
    let mut dealer = sock(&ctx, SocketType::Dealer);
    dealer.set_option_raw(opt::HELLO_MSG, b"hello").unwrap();
    dealer.set_option_i32(opt::RECONNECT_IVL, 20).unwrap();
    dealer.connect(&ep).unwrap();
    let first = router.recv_multipart(0).unwrap();
    assert_eq!(first[1].data(), b"hello");
    let id = first[0].data().to_vec();
    // A request and its reply: the DEALER's output is now granted for direct sends, and its
    // pipe is on the framed lane.
    for i in 0..3u8 {
        dealer.send(vec![b'q', i], 0).unwrap();
        let m = router.recv_multipart(0).unwrap();
        assert_eq!(m[1].data(), [b'q', i]);
        router
            .send_multipart([id.clone(), vec![b'r', i]], 0)
            .unwrap();
        assert_eq!(dealer.recv_bytes(0).unwrap(), [b'r', i]);
    }
    router.close();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let big = vec![7u8; 100_000];
    dealer.send(&b"queued 1"[..], 0).unwrap();
    dealer.send(big.clone(), 0).unwrap();
    dealer.send(&b"queued 2"[..], 0).unwrap();
    let mut router = sock(&ctx, SocketType::Router);
    router.bind(&ep).unwrap();
    let want: [&[u8]; 4] = [b"hello", b"queued 1", &big, b"queued 2"];
    for w in want {
        let m = router.recv_multipart(0).unwrap();
        assert_eq!(m[1].data(), w);
    }
    let id = router
        .recv_multipart(DONTWAIT)
        .map(|m| m[0].data().to_vec());
    assert_eq!(id.unwrap_err(), Error::Again);
}

#[test]
fn disconnect_msg_arrives_from_the_peer_that_went() {
    for tr in ["inproc", "tcp", "ipc"] {
        // libzmq's test_disconnect_msg: the SERVER receives it when the CLIENT closes.
        let ctx = Context::new();
        let mut server = sock(&ctx, SocketType::Server);
        server.set_option_raw(opt::DISCONNECT_MSG, b"D").unwrap();
        assert_eq!(server.get_option(opt::DISCONNECT_MSG), Err(Error::Inval));
        let ep = bind_on(&mut server, tr, "disconnect");
        let mut client = sock(&ctx, SocketType::Client);
        client.set_option_raw(opt::HELLO_MSG, b"H").unwrap();
        client.connect(&ep).unwrap();
        let hello = server.recv_msg(0).unwrap();
        assert_eq!(hello.data(), b"H", "{tr}");
        client.close();
        let bye = server.recv_msg(0).unwrap();
        assert_eq!(bye.data(), b"D", "{tr}");
        assert_eq!(bye.routing_id(), hello.routing_id(), "{tr}");
    }
    // inproc: zmq_disconnect sends it too; so does a connect made before the bind.
    let ctx = Context::new();
    let ep = inproc_endpoint("disconnect-late");
    let mut client = sock(&ctx, SocketType::Client);
    client.set_option_raw(opt::HELLO_MSG, b"H").unwrap();
    client.connect(&ep).unwrap();
    let mut server = sock(&ctx, SocketType::Server);
    server.set_option_raw(opt::DISCONNECT_MSG, b"D").unwrap();
    server.bind(&ep).unwrap();
    assert_eq!(server.recv_bytes(0).unwrap(), b"H");
    client.disconnect(&ep).unwrap();
    assert_eq!(server.recv_bytes(0).unwrap(), b"D");
    // A ROUTER gets it with the peer's routing id.
    let mut router = sock(&ctx, SocketType::Router);
    router.set_option_raw(opt::DISCONNECT_MSG, b"gone").unwrap();
    router.bind("tcp://127.0.0.1:*").unwrap();
    let mut dealer = sock(&ctx, SocketType::Dealer);
    dealer.set_option_raw(opt::ROUTING_ID, b"me").unwrap();
    dealer.connect(router.last_endpoint()).unwrap();
    dealer.send(&b"hi"[..], 0).unwrap();
    assert_eq!(router.recv_multipart(0).unwrap()[1].data(), b"hi");
    dealer.close();
    let m = router.recv_multipart(0).unwrap();
    assert_eq!((m[0].data(), m[1].data()), (&b"me"[..], &b"gone"[..]));
}

/// The disconnect message goes past a full pipe's high-water mark, as libzmq's pipe writes it
/// (inproc: the connecting end writes it into the binder's pipe).
#[test]
fn disconnect_msg_passes_a_full_pipe() {
    let ctx = Context::new();
    let ep = inproc_endpoint("disconnect-full");
    let mut server = sock(&ctx, SocketType::Server);
    server.set_option_raw(opt::DISCONNECT_MSG, b"D").unwrap();
    server.set_option_i32(opt::RCVHWM, 1).unwrap();
    server.bind(&ep).unwrap();
    let mut client = sock(&ctx, SocketType::Client);
    client.set_option_i32(opt::SNDHWM, 1).unwrap();
    client.connect(&ep).unwrap();
    let mut sent = 0;
    while client.send(&b"m"[..], DONTWAIT).is_ok() {
        sent += 1;
        assert!(sent < 1000, "the pipe never filled");
    }
    assert!(sent >= 1);
    client.close();
    for _ in 0..sent {
        assert_eq!(server.recv_bytes(0).unwrap(), b"m");
    }
    assert_eq!(server.recv_bytes(0).unwrap(), b"D");
    assert_eq!(server.recv_msg(DONTWAIT).unwrap_err(), Error::Again);
}

/// All frames of one monitor message.
fn monitor_frames(m: &mut Socket) -> Vec<rzmq_core::Msg> {
    m.recv_multipart(0).unwrap()
}

#[test]
fn version_2_monitor_events_carry_values_and_both_endpoints() {
    use rzmq_core::monitor::{parse_event_v2, EVENT_ALL_V2, EVENT_CONNECTED};
    let ctx = Context::new();
    let mut server = sock(&ctx, SocketType::Dealer);
    server.bind("tcp://127.0.0.1:*").unwrap();
    let ep = server.last_endpoint().to_string();
    let mut client = sock(&ctx, SocketType::Dealer);
    // Version 1 takes 16 event bits; PAIR, PUB and PUSH monitor sockets only; inproc only.
    let mon = inproc_endpoint("mon-v2");
    assert_eq!(
        client.monitor_versioned(Some(&mon), EVENT_ALL_V2, 1, SocketType::Pair),
        Err(Error::Inval)
    );
    assert_eq!(
        client.monitor_versioned(Some(&mon), EVENT_ALL_V2, 2, SocketType::Client),
        Err(Error::Inval)
    );
    assert_eq!(
        client.monitor_versioned(Some("tcp://127.0.0.1:*"), EVENT_ALL_V2, 2, SocketType::Pair),
        Err(Error::ProtoNoSupport)
    );
    client
        .monitor_versioned(Some(&mon), EVENT_ALL_V2, 2, SocketType::Push)
        .unwrap();
    let mut events = sock(&ctx, SocketType::Pull);
    events.connect(&mon).unwrap();
    client.connect(&ep).unwrap();
    let (ev, values, local, remote) = loop {
        let e = parse_event_v2(&monitor_frames(&mut events)).expect("a version 2 event");
        if e.0 != u64::from(rzmq_core::monitor::EVENT_CONNECT_DELAYED) {
            break e;
        }
    };
    assert_eq!(ev, u64::from(EVENT_CONNECTED));
    assert_eq!(values.len(), 1, "the fd");
    assert_eq!(remote, ep);
    assert!(
        local.starts_with("tcp://127.0.0.1:") && local != remote,
        "{local}"
    );
    client
        .monitor_versioned(None, 0, 2, SocketType::Push)
        .unwrap();
    let (ev, values, local, remote) = loop {
        let e = parse_event_v2(&monitor_frames(&mut events)).unwrap();
        if e.0 == u64::from(rzmq_core::monitor::EVENT_MONITOR_STOPPED) {
            break e;
        }
    };
    assert_eq!(
        (ev, values, &local[..], &remote[..]),
        (0x400, vec![0], "", "")
    );
}

#[test]
fn pipes_stats_report_each_pipe_on_a_version_2_monitor() {
    use rzmq_core::monitor::{parse_event_v2, EVENT_PIPES_STATS};
    let ctx = Context::new();
    let mut push = sock(&ctx, SocketType::Push);
    assert_eq!(push.monitor_pipes_stats(), Err(Error::Inval), "no monitor");
    let mon = inproc_endpoint("mon-stats");
    push.monitor_versioned(Some(&mon), EVENT_PIPES_STATS, 2, SocketType::Pair)
        .unwrap();
    assert_eq!(push.monitor_pipes_stats(), Err(Error::Again), "no pipes");
    let mut events = sock(&ctx, SocketType::Pair);
    events.connect(&mon).unwrap();
    // A mark of 2 (low-water mark 1): the writer learns of every read, so a drained pipe
    // reports 0 queued.
    push.set_option_i32(opt::SNDHWM, 2).unwrap();
    push.bind("tcp://127.0.0.1:*").unwrap();
    let ep = push.last_endpoint().to_string();
    let mut pulls: Vec<Socket> = (0..2)
        .map(|_| {
            let mut p = sock(&ctx, SocketType::Pull);
            p.connect(&ep).unwrap();
            p
        })
        .collect();
    // Messages until each connection has carried one: both pipes exist, all is read.
    let mut got = [false; 2];
    let start = std::time::Instant::now();
    while !got.iter().all(|g| *g) {
        assert!(start.elapsed().as_secs() < 10, "both pulls connected");
        push.send(&b"x"[..], 0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        for (p, g) in pulls.iter_mut().zip(got.iter_mut()) {
            while p.recv_msg(DONTWAIT).is_ok() {
                *g = true;
            }
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    push.monitor_pipes_stats().unwrap();
    for _ in 0..2 {
        let (ev, values, local, remote) = parse_event_v2(&monitor_frames(&mut events)).unwrap();
        assert_eq!(ev, EVENT_PIPES_STATS);
        assert_eq!(values, [0, 0], "nothing queued either way");
        assert_eq!(local, ep);
        assert!(
            remote.starts_with("tcp://127.0.0.1:") && remote != ep,
            "{remote}"
        );
    }
    assert_eq!(events.recv_msg(DONTWAIT).unwrap_err(), Error::Again);
}

/// A connect's pipe made at the connect names only the address it connects to; one made by
/// its connection (`ZMQ_IMMEDIATE`) names both ends, as libzmq's pipes take them from the
/// engine that made them.
#[test]
fn pipes_stats_name_a_connects_local_end_once_its_connection_made_the_pipe() {
    use rzmq_core::monitor::{parse_event_v2, EVENT_PIPES_STATS};
    let ctx = Context::new();
    let mut servers: Vec<Socket> = (0..2).map(|_| sock(&ctx, SocketType::Dealer)).collect();
    let eps: Vec<String> = servers
        .iter_mut()
        .map(|s| {
            s.bind("tcp://127.0.0.1:*").unwrap();
            s.last_endpoint().to_string()
        })
        .collect();
    let mut client = sock(&ctx, SocketType::Dealer);
    let mon = inproc_endpoint("mon-stats-connect");
    client
        .monitor_versioned(Some(&mon), EVENT_PIPES_STATS, 2, SocketType::Pair)
        .unwrap();
    let mut events = sock(&ctx, SocketType::Pair);
    events.connect(&mon).unwrap();
    client.connect(&eps[0]).unwrap();
    client.set_option_i32(opt::IMMEDIATE, 1).unwrap();
    client.connect(&eps[1]).unwrap();
    // A message from each server: both connections are up, both pipes exist.
    client.set_option_i32(opt::RCVTIMEO, 10_000).unwrap();
    for s in servers.iter_mut() {
        s.send(&b"up"[..], 0).unwrap();
        assert_eq!(client.recv_msg(0).unwrap().data(), b"up");
    }
    client.monitor_pipes_stats().unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (ev, _, local, remote) = parse_event_v2(&monitor_frames(&mut events)).unwrap();
        assert_eq!(ev, EVENT_PIPES_STATS);
        seen.push((local, remote));
    }
    assert_eq!(
        seen[0],
        (String::new(), eps[0].clone()),
        "made at the connect"
    );
    assert_eq!(seen[1].1, eps[1], "made by the connection");
    assert!(
        seen[1].0.starts_with("tcp://127.0.0.1:") && seen[1].0 != eps[1],
        "the connection's own address: {}",
        seen[1].0
    );
}

#[test]
fn peer_state_answers_for_router_peers_only() {
    let ctx = Context::new();
    let mut router = sock(&ctx, SocketType::Router);
    router.set_option_i32(opt::ROUTER_MANDATORY, 1).unwrap();
    router.set_option_i32(opt::SNDHWM, 5).unwrap();
    let ep = inproc_endpoint("peer-state");
    router.bind(&ep).unwrap();
    let mut dealer = sock(&ctx, SocketType::Dealer);
    dealer.set_option_i32(opt::RCVHWM, 5).unwrap();
    dealer.set_option_raw(opt::ROUTING_ID, b"X").unwrap();
    dealer.connect(&ep).unwrap();
    dealer.send(&b"hi"[..], 0).unwrap();
    assert_eq!(router.recv_multipart(0).unwrap()[0].data(), b"X");
    assert_eq!(router.peer_state(b"X"), Ok(rzmq_core::poll::ZMQ_POLLOUT));
    assert_eq!(router.peer_state(b"nobody"), Err(Error::HostUnreach));
    assert_eq!(dealer.peer_state(b"X"), Err(Error::NotSup));
    // The DEALER reads nothing: the pipe fills, and the state says so.
    let mut sent = 0;
    while router
        .send_multipart([&b"X"[..], &b"m"[..]], DONTWAIT)
        .is_ok()
    {
        sent += 1;
    }
    assert!(sent >= 5, "{sent}");
    assert_eq!(router.peer_state(b"X"), Ok(0));
}

//! libzmq 4.3.5's DRAFT socket options through the native API, each checked as libzmq's own test
//! checks it: `ZMQ_TOPICS_COUNT` (test_pubsub_topics_count), `ZMQ_XSUB_VERBOSE_UNSUBSCRIBE`
//! (test_xsub_verbose), `ZMQ_PRIORITY` (test_setsockopt) and `ZMQ_BUSY_POLL` (test_busy_poll).

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

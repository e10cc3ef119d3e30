//! libzmq's draft socket types through the native API, over inproc, tcp and ipc: CLIENT/SERVER
//! routing by `u32` routing id, SCATTER/GATHER fan-out and fan-in, PEER/PEER through
//! `connect_peer`, CHANNEL, and the errors libzmq gives (EHOSTUNREACH, EINVAL for multipart,
//! ENOTSUP for what a type does not do); thread-safe sockets (`ThreadSafeSocket`: several
//! threads blocked in one socket's calls, pollers with wake-ups of their own, no `ZMQ_FD`).
//! The RDMA case is in rdma.rs (that binary turns the upgrade on).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rzmq_core::options as opt;
use rzmq_core::poll::{poll, PollItem, ZMQ_POLLIN};
use rzmq_core::{Context, Error, Msg, Socket, SocketType, ThreadSafeSocket, DONTWAIT, SNDMORE};
use rzmq_tests::{inproc_endpoint, ipc_endpoint, timed_socket};

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    timed_socket(ctx, ty, 0)
}

/// Binds `s` on a fresh endpoint of each transport in turn; returns the address to connect to.
fn bind(s: &mut Socket, transport: &str, tag: &str) -> String {
    let ep = match transport {
        "inproc" => inproc_endpoint(tag),
        "tcp" => "tcp://127.0.0.1:*".to_string(),
        "ipc" => ipc_endpoint(tag),
        t => panic!("unknown transport {t}"),
    };
    s.bind(&ep).unwrap();
    s.last_endpoint().to_string()
}

const TRANSPORTS: [&str; 3] = ["inproc", "tcp", "ipc"];

fn to(rid: u32, data: &[u8]) -> Msg {
    let mut m = Msg::copy_from(data);
    m.set_routing_id(rid).unwrap();
    m
}

#[test]
fn client_server_round_trips_route_by_routing_id() {
    for tr in TRANSPORTS {
        let ctx = Context::new();
        let mut server = sock(&ctx, SocketType::Server);
        let ep = bind(&mut server, tr, "server");
        let mut clients: Vec<Socket> = (0..3)
            .map(|_| {
                let mut c = sock(&ctx, SocketType::Client);
                c.connect(&ep).unwrap();
                c
            })
            .collect();
        // Each client introduces itself; the server learns its routing id from the message.
        let mut rid_of = HashMap::new();
        for (i, c) in clients.iter_mut().enumerate() {
            c.send(format!("client {i}").into_bytes(), 0).unwrap();
            let m = server.recv_msg(0).unwrap();
            assert!(!m.more(), "{tr}");
            assert_ne!(m.routing_id(), 0, "{tr}");
            rid_of.insert(
                String::from_utf8(m.data().to_vec()).unwrap(),
                m.routing_id(),
            );
        }
        assert_eq!(rid_of.len(), 3, "{tr}");
        let mut rids: Vec<u32> = rid_of.values().copied().collect();
        rids.sort();
        rids.dedup();
        assert_eq!(rids.len(), 3, "distinct routing ids over {tr}");
        // Replies reach exactly the client they are addressed to, in reverse order.
        for i in (0..3).rev() {
            let rid = rid_of[&format!("client {i}")];
            server
                .send_msg(to(rid, format!("reply {i}").as_bytes()), 0)
                .unwrap();
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let m = c.recv_msg(0).unwrap();
            assert_eq!(m.data(), format!("reply {i}").as_bytes(), "{tr}");
            assert_eq!(c.recv_msg(DONTWAIT).unwrap_err(), Error::Again, "{tr}");
        }
        // A second round keeps the same ids.
        clients[1].send("again", 0).unwrap();
        let m = server.recv_msg(0).unwrap();
        assert_eq!(m.routing_id(), rid_of["client 1"], "{tr}");
    }
}

#[test]
fn server_refuses_unknown_ids_and_draft_types_refuse_multipart() {
    for tr in TRANSPORTS {
        let ctx = Context::new();
        let mut server = sock(&ctx, SocketType::Server);
        let ep = bind(&mut server, tr, "unreach");
        let mut client = sock(&ctx, SocketType::Client);
        client.connect(&ep).unwrap();
        client.send("hi", 0).unwrap();
        let rid = server.recv_msg(0).unwrap().routing_id();
        let (_, e) = server
            .send_msg(to(rid.wrapping_add(1).max(1), b"x"), 0)
            .unwrap_err();
        assert_eq!(e, Error::HostUnreach, "{tr}");
        let (back, e) = server.send_msg(Msg::copy_from(b"no id"), 0).unwrap_err();
        assert_eq!(
            (e, back.data()),
            (Error::HostUnreach, &b"no id"[..]),
            "{tr}"
        );
        // MORE is refused on every single-part type, and the socket goes on working.
        assert_eq!(
            server.send_msg(to(rid, b"a"), SNDMORE).unwrap_err().1,
            Error::Inval
        );
        assert_eq!(client.send("a", SNDMORE), Err(Error::Inval), "{tr}");
        server.send_msg(to(rid, b"after"), 0).unwrap();
        assert_eq!(client.recv_bytes(0).unwrap(), b"after", "{tr}");
        for ty in [SocketType::Scatter, SocketType::Peer, SocketType::Channel] {
            let mut s = sock(&ctx, ty);
            assert_eq!(
                s.send_msg(to(1, b"a"), SNDMORE).unwrap_err().1,
                Error::Inval
            );
        }
        // The client's server goes away: its routing id is unreachable afterwards.
        client.close();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match server.send_msg(to(rid, b"gone?"), DONTWAIT) {
                Err((_, Error::HostUnreach)) => break,
                Ok(()) | Err((_, Error::Again)) => {}
                Err((_, e)) => panic!("{tr}: {e:?}"),
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{tr}: peer never left"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

#[test]
fn scatter_fans_out_and_gather_fans_in() {
    for tr in TRANSPORTS {
        let ctx = Context::new();
        // Fan-out: one SCATTER connected to two GATHERs deals messages round-robin.
        let mut gathers = [
            sock(&ctx, SocketType::Gather),
            sock(&ctx, SocketType::Gather),
        ];
        let eps: Vec<String> = gathers
            .iter_mut()
            .enumerate()
            .map(|(i, g)| bind(g, tr, &format!("gather{i}")))
            .collect();
        let mut scatter = sock(&ctx, SocketType::Scatter);
        for ep in &eps {
            scatter.connect(ep).unwrap();
        }
        for i in 0..20u32 {
            scatter.send(i.to_le_bytes().to_vec(), 0).unwrap();
        }
        let mut seen = Vec::new();
        for g in gathers.iter_mut() {
            for _ in 0..10 {
                let d = g.recv_bytes(0).unwrap();
                seen.push(u32::from_le_bytes(d.try_into().unwrap()));
            }
            assert_eq!(
                g.recv_bytes(DONTWAIT),
                Err(Error::Again),
                "{tr}: even split"
            );
        }
        seen.sort();
        assert_eq!(seen, (0..20).collect::<Vec<_>>(), "{tr}");
        assert_eq!(scatter.recv_bytes(DONTWAIT), Err(Error::NotSup));
        assert_eq!(gathers[0].send("x", DONTWAIT), Err(Error::NotSup));

        // Fan-in: two SCATTERs into one GATHER.
        let mut scatters = [
            sock(&ctx, SocketType::Scatter),
            sock(&ctx, SocketType::Scatter),
        ];
        for (i, s) in scatters.iter_mut().enumerate() {
            s.connect(&eps[0]).unwrap();
            for j in 0..5u8 {
                s.send(vec![i as u8, j], 0).unwrap();
            }
        }
        let mut got: Vec<Vec<u8>> = (0..10).map(|_| gathers[0].recv_bytes(0).unwrap()).collect();
        got.sort();
        let want: Vec<Vec<u8>> = (0..2u8)
            .flat_map(|i| (0..5u8).map(move |j| vec![i, j]))
            .collect();
        assert_eq!(got, want, "{tr}");
    }
}

#[test]
fn peers_talk_through_connect_peer() {
    for tr in TRANSPORTS {
        let ctx = Context::new();
        let mut a = sock(&ctx, SocketType::Peer);
        let ep = bind(&mut a, tr, "peer");
        let mut b = sock(&ctx, SocketType::Peer);
        let rid_a = b.connect_peer(&ep).unwrap();
        assert_ne!(rid_a, 0);
        // b may address a at once, before the connection is up.
        b.send_msg(to(rid_a, b"hello a"), 0).unwrap();
        let m = a.recv_msg(0).unwrap();
        assert_eq!(m.data(), b"hello a", "{tr}");
        let rid_b = m.routing_id();
        a.send_msg(to(rid_b, b"hello b"), 0).unwrap();
        let m = b.recv_msg(0).unwrap();
        assert_eq!((m.data(), m.routing_id()), (&b"hello b"[..], rid_a), "{tr}");
        // A second connect_peer gets another id.
        let mut c = sock(&ctx, SocketType::Peer);
        let ep_c = bind(&mut c, tr, "peer-c");
        let rid_c = b.connect_peer(&ep_c).unwrap();
        assert_ne!(rid_c, rid_a);
        b.send_msg(to(rid_c, b"hello c"), 0).unwrap();
        assert_eq!(c.recv_msg(0).unwrap().data(), b"hello c", "{tr}");
    }
}

#[test]
fn connect_peer_errors_as_libzmq() {
    let ctx = Context::new();
    let ep = inproc_endpoint("peer-err");
    let mut p = sock(&ctx, SocketType::Peer);
    p.bind(&ep).unwrap();
    let mut server = sock(&ctx, SocketType::Server);
    assert_eq!(server.connect_peer(&ep), Err(Error::NotSup));
    let mut q = sock(&ctx, SocketType::Peer);
    q.set_option_i32(opt::IMMEDIATE, 1).unwrap();
    assert_eq!(q.connect_peer(&ep), Err(Error::Fault));
    q.set_option_i32(opt::IMMEDIATE, 0).unwrap();
    assert!(q.connect_peer(&ep).is_ok());
    assert_eq!(q.connect_peer("bogus://x"), Err(Error::ProtoNoSupport));
}

#[test]
fn channel_is_a_single_part_pair() {
    for tr in TRANSPORTS {
        let ctx = Context::new();
        let mut a = sock(&ctx, SocketType::Channel);
        let ep = bind(&mut a, tr, "channel");
        let mut b = sock(&ctx, SocketType::Channel);
        b.connect(&ep).unwrap();
        for i in 0..3u8 {
            b.send(vec![i], 0).unwrap();
            assert_eq!(a.recv_bytes(0).unwrap(), vec![i], "{tr}");
            a.send(vec![i, i], 0).unwrap();
            assert_eq!(b.recv_bytes(0).unwrap(), vec![i, i], "{tr}");
        }
        assert_eq!(b.send("x", SNDMORE), Err(Error::Inval), "{tr}");
    }
}

#[test]
fn group_calls_are_refused_outside_dish() {
    let ctx = Context::new();
    let mut s = sock(&ctx, SocketType::Server);
    assert_eq!(s.join("g"), Err(Error::NotSup));
    assert_eq!(s.leave("g"), Err(Error::NotSup));
    assert_eq!(s.join(vec![b'g'; 256]), Err(Error::Inval));
}

// ---- thread-safe sockets ----------------------------------------------------------------------

/// A SERVER bound on `tr`, shared by threads, and a CLIENT connected to it.
fn shared_server(ctx: &Context, tr: &str, tag: &str) -> (Arc<ThreadSafeSocket>, Socket) {
    let mut server = sock(ctx, SocketType::Server);
    let ep = bind(&mut server, tr, tag);
    let mut client = sock(ctx, SocketType::Client);
    client.connect(&ep).unwrap();
    (Arc::new(ThreadSafeSocket::new(server).unwrap()), client)
}

#[test]
fn thread_safe_sockets_have_no_fd_and_wrap_only_their_types() {
    let ctx = Context::new();
    for ty in [
        SocketType::Server,
        SocketType::Client,
        SocketType::Radio,
        SocketType::Dish,
        SocketType::Scatter,
        SocketType::Gather,
        SocketType::Peer,
        SocketType::Channel,
    ] {
        let mut s = sock(&ctx, ty);
        assert_eq!(s.get_option(opt::FD).unwrap_err(), Error::Inval, "{ty:?}");
        assert_eq!(s.fd(), -1, "{ty:?}");
        assert!(s.waiters().is_some(), "{ty:?}");
        ThreadSafeSocket::new(s).unwrap();
    }
    for ty in [SocketType::Dealer, SocketType::Dgram, SocketType::Pair] {
        let mut s = sock(&ctx, ty);
        assert!(s.get_option(opt::FD).is_ok(), "{ty:?}");
        assert!(s.waiters().is_none(), "{ty:?}");
        assert_eq!(
            ThreadSafeSocket::new(s).unwrap_err(),
            Error::Inval,
            "{ty:?}"
        );
    }
}

/// Four threads blocked in `recv` on one SERVER: each message wakes a receiver (every blocked
/// thread wakes for the signals after its own last try, so none sleeps through a message
/// another thread's look consumed the wake-up of).
#[test]
fn thread_safe_server_serves_four_blocked_receivers() {
    for tr in TRANSPORTS {
        let ctx = Context::new();
        let (server, mut client) = shared_server(&ctx, tr, "ts4");
        let rounds: u32 = 50;
        let receivers: Vec<_> = (0..4)
            .map(|_| {
                let s = server.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        let m = s.recv_msg(0).unwrap();
                        if m.data() == b"stop" {
                            return got;
                        }
                        got.push(u32::from_le_bytes(m.data().try_into().unwrap()));
                        // Answer it: the client waits for each reply, so the receivers are
                        // all blocked again (but the one answering) when the next one comes.
                        s.send_msg(to(m.routing_id(), m.data()), 0).unwrap();
                    }
                })
            })
            .collect();
        for i in 0..rounds {
            client.send(Msg::copy_from(&i.to_le_bytes()), 0).unwrap();
            let back = client.recv_msg(0).unwrap();
            assert_eq!(back.data(), i.to_le_bytes(), "{tr}");
        }
        for _ in 0..4 {
            client.send("stop", 0).unwrap();
        }
        let mut all: Vec<u32> = receivers
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..rounds).collect::<Vec<u32>>(), "{tr}");
    }
}

/// Two threads polling one SERVER and a third blocked in `recv`: a message wakes all of them
/// (each poller has its own wake-up), the pollers see POLLIN until the receiver takes it.
#[test]
fn thread_safe_pollers_each_get_their_wake_up() {
    let ctx = Context::new();
    let (server, mut client) = shared_server(&ctx, "tcp", "tspoll");
    let barrier = Arc::new(std::sync::Barrier::new(3));
    let pollers: Vec<_> = (0..2)
        .map(|_| {
            let (s, b) = (server.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut r = &*s;
                let mut items = [PollItem::socket(&mut r, ZMQ_POLLIN)];
                // Nothing yet.
                assert_eq!(poll(&mut items, Some(Duration::ZERO)).unwrap(), 0);
                b.wait();
                let n = poll(&mut items, Some(Duration::from_secs(10))).unwrap();
                (n, items[0].revents)
            })
        })
        .collect();
    barrier.wait();
    std::thread::sleep(Duration::from_millis(50));
    client.send("one", 0).unwrap();
    for p in pollers {
        assert_eq!(p.join().unwrap(), (1, ZMQ_POLLIN));
    }
    assert_eq!(server.recv_bytes(0).unwrap(), b"one");
    assert_eq!(server.recv_msg(DONTWAIT).unwrap_err(), Error::Again);
}

/// A blocked call ends on its timeout, on the context's termination (ETERM) and on close
/// (ENOTSOCK); calls after close fail with ENOTSOCK.
#[test]
fn thread_safe_blocked_calls_end_on_timeout_term_and_close() {
    let ctx = Context::new();
    let (server, _client) = shared_server(&ctx, "inproc", "tsend");
    server
        .lock()
        .unwrap()
        .set_option_i32(opt::RCVTIMEO, 50)
        .unwrap();
    let t0 = Instant::now();
    assert_eq!(server.recv_msg(0).unwrap_err(), Error::Again);
    assert!(t0.elapsed() >= Duration::from_millis(50));
    server
        .lock()
        .unwrap()
        .set_option_i32(opt::RCVTIMEO, -1)
        .unwrap();

    let s = server.clone();
    let blocked = std::thread::spawn(move || s.recv_msg(0).unwrap_err());
    std::thread::sleep(Duration::from_millis(50));
    assert!(server.close());
    assert_eq!(blocked.join().unwrap(), Error::NotSock);
    assert_eq!(server.recv_msg(DONTWAIT).unwrap_err(), Error::NotSock);
    assert!(!server.close());

    let ctx2 = Context::new();
    let (server, client) = shared_server(&ctx2, "inproc", "tsterm");
    server
        .lock()
        .unwrap()
        .set_option_i32(opt::RCVTIMEO, -1)
        .unwrap();
    let s = server.clone();
    let blocked = std::thread::spawn(move || {
        let e = s.recv_msg(0).unwrap_err();
        s.close();
        e
    });
    std::thread::sleep(Duration::from_millis(50));
    drop(client);
    ctx2.term().unwrap();
    assert_eq!(blocked.join().unwrap(), Error::Term);
}

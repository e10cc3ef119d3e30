//! libzmq's draft socket types through the native API, over inproc, tcp and ipc: CLIENT/SERVER
//! routing by `u32` routing id, SCATTER/GATHER fan-out and fan-in, PEER/PEER through
//! `connect_peer`, CHANNEL, and the errors libzmq gives (EHOSTUNREACH, EINVAL for multipart,
//! ENOTSUP for what a type does not do). The RDMA case is in rdma.rs (that binary turns the
//! upgrade on).

use std::collections::HashMap;

use rzmq_core::options as opt;
use rzmq_core::{Context, Error, Msg, Socket, SocketType, DONTWAIT, SNDMORE};
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

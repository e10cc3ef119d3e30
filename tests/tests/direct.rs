//! Direct sends (rzmq_core::testing::direct): the application thread writing a message to an idle
//! connection itself must keep every message whole and in order with those that went through
//! the I/O thread, over tcp and ipc, to rzmq and to libzmq.

use rzmq_core::options as opt;
use rzmq_core::{Context, Msg, Socket, SocketType};
use rzmq_tests::{ipc_endpoint, payload, TIMEOUT_MS};
use std::time::Duration;

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    // On by default unless RZMQ_DIRECT=0; these tests are about the path itself.
    rzmq_core::options::rzmq::set_default(rzmq_core::options::DIRECT, Some(1));
    rzmq_tests::timed_socket(ctx, ty, 1000)
}

/// Message `i`: its number, then a body whose size cycles through small, long-header and
/// over-the-direct-limit sizes; every third one is multipart.
fn message(i: u32) -> Vec<Vec<u8>> {
    let size = [0usize, 10, 64, 255, 256, 1000, 70_000][i as usize % 7];
    let mut body = payload(size, i as u8);
    body.truncate(size);
    let mut frames = vec![i.to_be_bytes().to_vec(), body];
    if i.is_multiple_of(3) {
        frames.push(b"tail".to_vec());
    }
    frames
}

fn send(s: &mut Socket, frames: &[Vec<u8>]) {
    s.send_multipart(frames.iter().map(|f| &f[..]), 0).unwrap();
}

fn recv(s: &mut Socket) -> Vec<Vec<u8>> {
    s.recv_multipart(0)
        .unwrap()
        .into_iter()
        .map(|m: Msg| m.data().to_vec())
        .collect()
}

/// Sparse sends (direct), bursts (the I/O thread) and large ones interleaved, both ways.
fn ping_pong_and_bursts(ep: &str) {
    let ctx = Context::new();
    let mut a = sock(&ctx, SocketType::Dealer);
    a.bind(ep).unwrap();
    let ep = a.last_endpoint().to_string();
    let mut b = sock(&ctx, SocketType::Dealer);
    b.connect(&ep).unwrap();
    let before = rzmq_core::testing::direct::stats().0;
    let mut i = 0u32;
    for round in 0..60u32 {
        // Ping-pong: each side's connection is idle when it sends.
        for _ in 0..5 {
            send(&mut b, &message(i));
            assert_eq!(recv(&mut a), message(i), "message {i} a<-b");
            send(&mut a, &message(i + 1));
            assert_eq!(recv(&mut b), message(i + 1), "message {} b<-a", i + 1);
            i += 2;
        }
        // A burst, with a pause in the middle so a grant can be taken while it drains.
        let first = i;
        for k in 0..40 {
            send(&mut b, &message(i));
            i += 1;
            if k == 20 && round % 2 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for j in first..i {
            assert_eq!(recv(&mut a), message(j), "burst message {j}");
        }
    }
    let sent = rzmq_core::testing::direct::stats().0 - before;
    assert!(sent >= 100, "only {sent} messages went directly");
}

#[test]
fn tcp_keeps_order_across_direct_and_queued_sends() {
    ping_pong_and_bursts("tcp://127.0.0.1:*");
}

#[test]
fn ipc_keeps_order_across_direct_and_queued_sends() {
    ping_pong_and_bursts(&ipc_endpoint("direct"));
}

/// Messages far larger than the socket buffers: each direct write goes only in part and the I/O
/// thread writes the rest, ahead of whatever the application queues next.
#[test]
fn partial_direct_writes_complete_in_order() {
    let ctx = Context::new();
    let mut rx = sock(&ctx, SocketType::Dealer);
    rx.set_option_i32(opt::RCVBUF, 4096).unwrap();
    rx.bind("tcp://127.0.0.1:*").unwrap();
    let ep = rx.last_endpoint().to_string();
    let mut tx = sock(&ctx, SocketType::Dealer);
    tx.set_option_i32(opt::SNDBUF, 4096).unwrap();
    tx.connect(&ep).unwrap();
    let count = 200u32;
    let before = rzmq_core::testing::direct::stats().1;
    let body = |i: u32| {
        let mut b = payload(60_000, i as u8);
        b[..4].copy_from_slice(&i.to_be_bytes());
        b
    };
    let receiver = std::thread::spawn(move || {
        for i in 0..count {
            let m = rx.recv_msg(0).unwrap();
            assert_eq!(m.data(), &body(i)[..], "message {i}");
            if i % 4 != 3 {
                rx.send(&b"ack"[..], 0).unwrap();
            }
        }
    });
    for i in 0..count {
        // Every fourth message follows the previous one without waiting for an ack.
        tx.send(&body(i)[..], 0).unwrap();
        if i % 4 != 3 {
            assert_eq!(tx.recv_msg(0).unwrap().data(), b"ack");
        }
    }
    receiver.join().unwrap();
    // 60 kB into a few kB of socket buffer: a direct send goes only in part.
    let partial = rzmq_core::testing::direct::stats().1 - before;
    assert!(partial >= 1, "no direct write went only in part");
}

/// libzmq reads what rzmq writes directly (byte-compatible framing, long and short headers).
#[test]
fn libzmq_peer_reads_direct_sends() {
    let zctx = zmq::Context::new();
    let rep = zctx.socket(zmq::REP).unwrap();
    rep.set_rcvtimeo(TIMEOUT_MS).unwrap();
    rep.bind("tcp://127.0.0.1:*").unwrap();
    let ep = rep.get_last_endpoint().unwrap().unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..200 {
            let parts = rep.recv_multipart(0).unwrap();
            rep.send_multipart(parts.iter().rev(), 0).unwrap();
        }
    });
    rzmq_core::options::rzmq::set_default(rzmq_core::options::DIRECT, Some(1));
    let ctx = Context::new();
    let mut req = sock(&ctx, SocketType::Req);
    req.connect(&ep).unwrap();
    let before = rzmq_core::testing::direct::stats().0;
    for i in 0..200u32 {
        let frames = message(i);
        send(&mut req, &frames);
        let mut expect = frames.clone();
        expect.reverse();
        assert_eq!(recv(&mut req), expect, "reply {i}");
    }
    server.join().unwrap();
    let sent = rzmq_core::testing::direct::stats().0 - before;
    assert!(sent >= 100, "only {sent} messages went directly");
}

/// A direct send must not overtake what the same thread queued just before on another socket
/// of the same context. pyzmq's monitored-queue test relies on this: the SUB side's
/// subscription (queued by its first call after the connection came up) must reach the PUB
/// before the message the same thread sends next, by way of a relay thread, to that PUB. In
/// libzmq both go through the one I/O thread in order; a direct send that went while that
/// thread still had the subscription in hand lost the race about 4 rounds in 10.
#[test]
fn direct_send_does_not_overtake_earlier_sends_on_other_sockets() {
    for round in 0..10u8 {
        let ctx = Context::new();
        let relay_ctx = Context::new();
        let mut alice = sock(&ctx, SocketType::Pair);
        alice.bind("tcp://127.0.0.1:*").unwrap();
        let mut bob = sock(&ctx, SocketType::Pair);
        bob.bind("tcp://127.0.0.1:*").unwrap();
        let mut mon = sock(&ctx, SocketType::Sub);
        mon.bind("tcp://127.0.0.1:*").unwrap();
        mon.subscribe(b"").unwrap();
        let eps = [
            alice.last_endpoint().to_string(),
            bob.last_endpoint().to_string(),
            mon.last_endpoint().to_string(),
        ];
        let relay = {
            let mut input = sock(&relay_ctx, SocketType::Pair);
            let mut out = sock(&relay_ctx, SocketType::Pair);
            let mut copy = sock(&relay_ctx, SocketType::Pub);
            input.connect(&eps[0]).unwrap();
            out.connect(&eps[1]).unwrap();
            copy.connect(&eps[2]).unwrap();
            std::thread::spawn(move || {
                for _ in 0..2 {
                    let m: Vec<Vec<u8>> = input
                        .recv_multipart(0)
                        .unwrap()
                        .into_iter()
                        .map(|m| m.data().to_vec())
                        .collect();
                    send(&mut out, &m);
                    let mut tagged = vec![b"in".to_vec()];
                    tagged.extend(m);
                    send(&mut copy, &tagged);
                }
                (input, out, copy)
            })
        };
        // Every connection comes up while the test's sockets are left alone, so `mon` attaches
        // its pipe, and sends its subscription, only on its next call.
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            mon.recv_msg(rzmq_core::DONTWAIT).is_err(),
            "nothing was sent yet"
        );
        let first = vec![b"hello".to_vec(), vec![round]];
        let second = vec![b"again".to_vec(), vec![round]];
        send(&mut alice, &first);
        send(&mut alice, &second);
        assert_eq!(recv(&mut bob), first);
        assert_eq!(recv(&mut bob), second);
        let mut tagged = vec![b"in".to_vec()];
        tagged.extend(first);
        assert_eq!(
            recv(&mut mon),
            tagged,
            "round {round}: the first copy was lost"
        );
        drop(relay.join().unwrap());
    }
}

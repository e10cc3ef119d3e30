//! The pipe's framed lane (on by default, `RZMQ_FRAMED=0` turns it off) end to end: with it, the
//! sending socket encodes small frames for the wire itself and the I/O thread copies the bytes
//! out. What arrives must be exactly what was sent, in order, to an rzmq peer and to the
//! reference libzmq alike (the lane's bytes are the wire's), for every frame size around the
//! inline limit, multipart messages, and replies through a ROUTER.
//!
//! The switch is per process, so this binary runs alone.

use rzmq_core::testing::pipe::{framed_moved, FRAMED_INLINE_MAX};
use rzmq_core::{Context, Msg, SocketType};
use rzmq_tests::{payload, timed_socket, TIMEOUT_MS};

/// The messages sent: single frames of sizes around the header and inline limits, and
/// multipart messages mixing them.
fn messages() -> Vec<Vec<Vec<u8>>> {
    let sizes = [
        0,
        1,
        64,
        255,
        256,
        1000,
        FRAMED_INLINE_MAX,
        FRAMED_INLINE_MAX + 1,
        100_000,
    ];
    let mut out = Vec::new();
    for i in 0..2000usize {
        let size = sizes[i % sizes.len()];
        let body = payload(size, i as u8);
        if i % 4 == 3 {
            out.push(vec![
                b"part".to_vec(),
                payload(sizes[(i / 4) % sizes.len()], 7),
                body,
            ]);
        } else {
            out.push(vec![body]);
        }
    }
    out
}

fn send_all(s: &mut rzmq_core::Socket, msgs: &[Vec<Vec<u8>>]) {
    for m in msgs {
        for (k, f) in m.iter().enumerate() {
            let flags = if k + 1 < m.len() {
                rzmq_core::SNDMORE
            } else {
                0
            };
            s.send(Msg::copy_from(f), flags).unwrap();
        }
    }
}

fn recv_message(s: &mut rzmq_core::Socket) -> Vec<Vec<u8>> {
    let mut parts = Vec::new();
    loop {
        let m = s.recv_msg(0).unwrap();
        let more = m.more();
        parts.push(m.data().to_vec());
        if !more {
            return parts;
        }
    }
}

/// One test function: the lane's counter is per process, so the parts run in turn.
#[test]
fn the_framed_lane_carries_what_was_sent() {
    rzmq_core::options::rzmq::set_default(
        rzmq_core::options::FRAMED,
        Some(u32::from(std::env::var_os("FL_OFF").is_none())),
    );
    every_size_arrives_in_order();
    replies_through_a_router_take_the_lane_too();
}

fn every_size_arrives_in_order() {
    let msgs = messages();

    // rzmq to rzmq.
    let ctx = Context::new();
    // Everything is sent before anything is read: unbounded queues, so what is tested is the
    // lane, not how many messages the high-water marks and the kernel's buffers hold together.
    let mut pull = timed_socket(&ctx, SocketType::Pull, 1000);
    pull.set_option_i32(rzmq_core::options::RCVHWM, 0).unwrap();
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let mut push = timed_socket(&ctx, SocketType::Push, 1000);
    push.set_option_i32(rzmq_core::options::SNDHWM, 0).unwrap();
    push.connect(&ep).unwrap();
    // Sent twice: before the connection is up (queued as messages) and after (the lane).
    send_all(&mut push, &msgs);
    for (i, want) in msgs.iter().enumerate() {
        assert!(&recv_message(&mut pull) == want, "message {i} differs");
    }
    let before = framed_moved();
    send_all(&mut push, &msgs);
    for (i, want) in msgs.iter().enumerate() {
        assert!(
            &recv_message(&mut pull) == want,
            "message {i} differs (lane)"
        );
    }
    assert!(
        framed_moved() > before,
        "the connection's output took the lane"
    );

    // rzmq to libzmq: the lane's bytes are ZMTP frames as libzmq reads them.
    let lctx = zmq::Context::new();
    let lpull = lctx.socket(zmq::PULL).unwrap();
    lpull.set_rcvtimeo(TIMEOUT_MS).unwrap();
    lpull.set_linger(0).unwrap();
    lpull.set_rcvhwm(0).unwrap();
    lpull.bind("tcp://127.0.0.1:*").unwrap();
    let lep = lpull.get_last_endpoint().unwrap().unwrap();
    let mut push2 = timed_socket(&ctx, SocketType::Push, 1000);
    push2.set_option_i32(rzmq_core::options::SNDHWM, 0).unwrap();
    push2.connect(&lep).unwrap();
    for round in 0..2 {
        send_all(&mut push2, &msgs);
        for (i, want) in msgs.iter().enumerate() {
            let got = lpull.recv_multipart(0).unwrap();
            assert!(&got == want, "round {round}: message {i} differs at libzmq");
        }
    }
}

fn replies_through_a_router_take_the_lane_too() {
    let ctx = Context::new();
    let mut router = timed_socket(&ctx, SocketType::Router, 0);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let ep = router.last_endpoint().to_string();
    let mut dealer = timed_socket(&ctx, SocketType::Dealer, 0);
    dealer.connect(&ep).unwrap();
    let before = framed_moved();
    // Streams of requests, then streams of replies, both directions queueing up; each round
    // stays below the high-water mark (a ROUTER drops what would pass it, as libzmq's does).
    for round in 0..6usize {
        let bodies: Vec<Vec<u8>> = (0..500usize)
            .map(|i| payload((i * 7 + round) % 700, i as u8))
            .collect();
        for b in &bodies {
            dealer.send(Msg::copy_from(b), 0).unwrap();
        }
        let mut reqs = Vec::new();
        for b in &bodies {
            let req = recv_message(&mut router);
            assert_eq!(req.len(), 2, "identity and body");
            assert!(&req[1] == b);
            reqs.push(req);
        }
        for req in &reqs {
            router
                .send(Msg::copy_from(&req[0]), rzmq_core::SNDMORE)
                .unwrap();
            router.send(Msg::copy_from(&req[1]), 0).unwrap();
        }
        for (i, b) in bodies.iter().enumerate() {
            assert!(
                recv_message(&mut dealer) == vec![b.clone()],
                "round {round}: reply {i} differs"
            );
        }
    }
    assert!(
        framed_moved() > before,
        "the ROUTER's replies took the lane"
    );
}

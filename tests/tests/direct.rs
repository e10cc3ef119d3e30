//! Direct sends (rzmq_core::direct): the application thread writing a message to an idle
//! connection itself must keep every message whole and in order with those that went through
//! the I/O thread, over tcp and ipc, to rzmq and to libzmq.

use rzmq_core::options as opt;
use rzmq_core::{Context, Msg, Socket, SocketType};
use rzmq_tests::{ipc_endpoint, payload, TIMEOUT_MS};
use std::time::Duration;

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    // Off by default (see rzmq_core::direct); these tests are about the path itself.
    rzmq_core::direct::set_enabled(true);
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, 1000).unwrap();
    s
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
    let before = rzmq_core::direct::stats().0;
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
    let sent = rzmq_core::direct::stats().0 - before;
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
    let before = rzmq_core::direct::stats().1;
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
    let partial = rzmq_core::direct::stats().1 - before;
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
    rzmq_core::direct::set_enabled(true);
    let ctx = Context::new();
    let mut req = sock(&ctx, SocketType::Req);
    req.connect(&ep).unwrap();
    let before = rzmq_core::direct::stats().0;
    for i in 0..200u32 {
        let frames = message(i);
        send(&mut req, &frames);
        let mut expect = frames.clone();
        expect.reverse();
        assert_eq!(recv(&mut req), expect, "reply {i}");
    }
    server.join().unwrap();
    let sent = rzmq_core::direct::stats().0 - before;
    assert!(sent >= 100, "only {sent} messages went directly");
}

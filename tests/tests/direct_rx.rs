//! Direct receives (rzmq_core::testing::direct::DirectRx): a socket blocked in a receive reads and
//! decodes its only connection's input itself. What arrives must come out whole and in order
//! whether the socket or the I/O thread read it: frames cut across reads, multipart messages,
//! commands the I/O thread must answer (PING), a peer that dies mid-frame or sends garbage,
//! messages larger than the socket buffers (direct sends the kernel takes only in part), and a
//! context shut down under a blocked receive; with and without polling before sleeping.
//!
//! One test function, run scenario by scenario: the counters it checks are per process.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rzmq_core::options as opt;
use rzmq_core::{Context, Error, Msg, Socket, SocketType};
use rzmq_tests::{payload, zmtp_greeting, zmtp_ready as ready, TIMEOUT_MS};

fn short_frame(more: bool, body: &[u8]) -> Vec<u8> {
    assert!(body.len() < 256);
    let mut f = vec![u8::from(more), body.len() as u8];
    f.extend_from_slice(body);
    f
}

fn sock(ctx: &Context, ty: SocketType, rcvtimeo: i32) -> Socket {
    rzmq_core::options::rzmq::set_default(rzmq_core::options::DIRECT, Some(1));
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, rcvtimeo).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, 1000).unwrap();
    s
}

fn recv_all(s: &mut Socket) -> Vec<Vec<u8>> {
    s.recv_multipart(0)
        .unwrap()
        .into_iter()
        .map(|m: Msg| m.data().to_vec())
        .collect()
}

/// A PULL socket of `ctx` bound on loopback with a receive high-water mark of `rcvhwm`, and a
/// plain TCP stream connected to it (the test writes the peer's ZMTP by hand).
fn pull_and_raw_peer(ctx: &Context, rcvhwm: i32) -> (Socket, TcpStream) {
    let mut pull = sock(ctx, SocketType::Pull, 3000);
    pull.set_option_i32(opt::RCVHWM, rcvhwm).unwrap();
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let port: u16 = pull
        .last_endpoint()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let peer = TcpStream::connect(("127.0.0.1", port)).unwrap();
    peer.set_nodelay(true).unwrap();
    (pull, peer)
}

/// A hand-written ZMTP peer: frames cut anywhere, a PING among them, then garbage or a cut.
fn raw_peer_scenario(end_with_garbage: bool) {
    let ctx = Context::new();
    let (mut pull, mut peer) = pull_and_raw_peer(&ctx, 1000);
    let mut hello = zmtp_greeting(b"NULL");
    hello.extend_from_slice(&ready(b"PUSH"));
    peer.write_all(&hello).unwrap();
    // Everything the server writes to the peer, collected.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let mut r = peer.try_clone().unwrap();
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let long = payload(300, 7);
    let writer = {
        let mut w = peer.try_clone().unwrap();
        let long = long.clone();
        std::thread::spawn(move || {
            let pause = || std::thread::sleep(Duration::from_millis(60));
            // The first frame of a multipart message while the socket is not receiving (the
            // I/O thread reads it and holds it for the rest), the last one once it is: the
            // socket must not read the rest past the frame the I/O thread holds.
            w.write_all(&short_frame(true, b"p")).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            w.write_all(&short_frame(false, b"q")).unwrap();
            pause();
            w.write_all(&short_frame(false, b"one")).unwrap();
            pause();
            // A long frame cut after its header and part of its body.
            let mut f = vec![0x02];
            f.extend_from_slice(&(long.len() as u64).to_be_bytes());
            f.extend_from_slice(&long[..100]);
            w.write_all(&f).unwrap();
            pause();
            let mut rest = long[100..].to_vec();
            // Then a multipart message whose first frame arrives with the body's rest.
            rest.extend_from_slice(&short_frame(true, b"a"));
            w.write_all(&rest).unwrap();
            pause();
            w.write_all(&short_frame(false, b"b")).unwrap();
            pause();
            // A PING: the I/O thread must answer it with a PONG carrying the context.
            let mut ping = vec![0x04, 10, 4];
            ping.extend_from_slice(b"PING");
            ping.extend_from_slice(&[0, 0]);
            ping.extend_from_slice(b"ctx");
            ping.extend_from_slice(&short_frame(false, b"after-ping"));
            w.write_all(&ping).unwrap();
            pause();
            if end_with_garbage {
                // Reserved flag bits: a protocol error, the connection is closed.
                w.write_all(&[0xF0, 1, b'x']).unwrap();
            } else {
                // Half a frame, then the peer is gone.
                w.write_all(&[0x00, 50, b'c', b'u', b't']).unwrap();
                pause();
                w.shutdown(std::net::Shutdown::Both).unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(recv_all(&mut pull), vec![b"p".to_vec(), b"q".to_vec()]);
    assert_eq!(recv_all(&mut pull), vec![b"one".to_vec()]);
    assert_eq!(recv_all(&mut pull), vec![long]);
    assert_eq!(recv_all(&mut pull), vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(recv_all(&mut pull), vec![b"after-ping".to_vec()]);
    // Nothing else is delivered: the cut frame or the garbage ends the connection.
    assert_eq!(pull.recv_msg(0).unwrap_err(), Error::Again);
    writer.join().unwrap();
    reader.join().unwrap();
    let pong = {
        let mut f = vec![0x04, 8, 4];
        f.extend_from_slice(b"PONGctx");
        f
    };
    let seen = seen.lock().unwrap();
    assert!(
        seen.windows(pong.len()).any(|w| w == &pong[..]),
        "the PING was not answered"
    );
    // The socket still serves: a new peer's messages arrive.
    let ctx2 = Context::new();
    let mut push = sock(&ctx2, SocketType::Push, TIMEOUT_MS);
    push.connect(pull.last_endpoint()).unwrap();
    push.send(&b"later"[..], 0).unwrap();
    assert_eq!(recv_all(&mut pull), vec![b"later".to_vec()]);
}

/// `rounds` request/reply exchanges between two contexts (each connection alone on its I/O
/// thread): the server sends every request back with its frames reversed, and each reply must
/// come back whole and in order. `frames(i)` makes the i-th request.
fn echo_rounds(rounds: u32, frames: impl Fn(u32) -> Vec<Vec<u8>>) {
    let ctx_a = Context::new();
    let ctx_b = Context::new();
    let mut rep = sock(&ctx_a, SocketType::Rep, TIMEOUT_MS);
    rep.bind("tcp://127.0.0.1:*").unwrap();
    let ep = rep.last_endpoint().to_string();
    let server = std::thread::spawn(move || {
        for _ in 0..rounds {
            let mut parts = recv_all(&mut rep);
            parts.reverse();
            rep.send_multipart(parts.iter().map(|p| &p[..]), 0).unwrap();
        }
        rep
    });
    let mut req = sock(&ctx_b, SocketType::Req, TIMEOUT_MS);
    req.connect(&ep).unwrap();
    for i in 0..rounds {
        let mut request = frames(i);
        req.send_multipart(request.iter().map(|f| &f[..]), 0)
            .unwrap();
        request.reverse();
        // Not assert_eq: a failure would print megabytes.
        assert!(recv_all(&mut req) == request, "reply {i} differs");
    }
    drop(server.join().unwrap());
}

/// Replies and requests of every size, multipart ones among them.
fn req_rep_scenario() {
    echo_rounds(300, |i| {
        let size = [0usize, 5, 200, 256, 3000, 40_000, 300_000][i as usize % 7];
        let mut frames = vec![i.to_be_bytes().to_vec(), payload(size, i as u8)];
        if i % 3 == 0 {
            frames.push(b"tail".to_vec());
        }
        frames
    });
}

/// Messages larger than the socket buffers take at once, both ways: each direct send is only
/// partly taken by the kernel, and the I/O thread writes the rest from the message itself.
fn large_req_rep_scenario() {
    echo_rounds(12, |i| {
        vec![
            payload(9 << 20, i as u8),
            i.to_be_bytes().to_vec(),
            payload(20_000, !(i as u8)),
        ]
    });
}

/// A receive blocked on the connection's input wakes with ETERM when the context shuts down.
fn shutdown_scenario() {
    let ctx_a = Context::new();
    let ctx_b = Context::new();
    let mut pull = sock(&ctx_a, SocketType::Pull, -1);
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let mut push = sock(&ctx_b, SocketType::Push, TIMEOUT_MS);
    push.connect(pull.last_endpoint()).unwrap();
    push.send(&b"first"[..], 0).unwrap();
    assert_eq!(recv_all(&mut pull), vec![b"first".to_vec()]);
    shutdown_wakes(pull, &ctx_a, 200);
}

/// `pull`, blocked in a receive with no timeout, wakes with ETERM when `ctx` (its context) shuts
/// down `after_ms` later.
fn shutdown_wakes(mut pull: Socket, ctx: &Context, after_ms: u64) {
    pull.set_option_i32(opt::RCVTIMEO, -1).unwrap();
    let blocked = std::thread::spawn(move || {
        let r = pull.recv_msg(0).map(|m| m.data().to_vec());
        drop(pull);
        r
    });
    std::thread::sleep(Duration::from_millis(after_ms));
    ctx.shutdown();
    assert_eq!(blocked.join().unwrap().unwrap_err(), Error::Term);
}

/// A receive polling the connection (a budget far longer than the timeout) still returns
/// `Again` at its RCVTIMEO, and `ETERM` when the context shuts down.
fn spin_deadline_scenario() {
    rzmq_core::options::rzmq::set_default(rzmq_core::options::BUSY_POLL_US, Some(1_000_000));
    let ctx_a = Context::new();
    let ctx_b = Context::new();
    let mut pull = sock(&ctx_a, SocketType::Pull, 20);
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let mut push = sock(&ctx_b, SocketType::Push, TIMEOUT_MS);
    push.connect(pull.last_endpoint()).unwrap();
    push.send(&b"first"[..], 0).unwrap();
    pull.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    assert_eq!(recv_all(&mut pull), vec![b"first".to_vec()]);
    pull.set_option_i32(opt::RCVTIMEO, 20).unwrap();
    for _ in 0..3 {
        let t = std::time::Instant::now();
        assert_eq!(pull.recv_msg(0).unwrap_err(), Error::Again);
        // The deadline, not the 1 s budget, ended the wait.
        assert!(
            t.elapsed() < Duration::from_millis(900),
            "{:?}",
            t.elapsed()
        );
    }
    // Still delivers after the timeouts.
    push.send(&b"second"[..], 0).unwrap();
    pull.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    assert_eq!(recv_all(&mut pull), vec![b"second".to_vec()]);
    // The receive blocked next polls (a 1 s budget, at most three misses so far): the shutdown
    // is found while polling.
    let spun = rzmq_core::testing::direct::spin_stats();
    shutdown_wakes(pull, &ctx_a, 50);
    assert!(
        rzmq_core::testing::direct::spin_stats() > spun,
        "the shutdown was not seen while polling"
    );
    rzmq_core::options::rzmq::set_default(rzmq_core::options::BUSY_POLL_US, None);
}

/// Writes bursts of `n` short frames (bodies `body(i)`, numbered on from `*next`) 50 ms after
/// the socket starts waiting in a receive and takes the first ten of each, until a burst was
/// read by the socket itself and held (whether the socket or its I/O thread reads a burst
/// depends on which gets there first: input is offered only once the I/O thread is idle; a
/// burst that was not held is received whole and the next one tried). Returns with the held
/// burst's frames after its first ten still to receive, `*next` numbering the first of them;
/// the result is the number after its last.
fn held_burst(
    pull: &mut Socket,
    peer: &TcpStream,
    next: &mut u32,
    n: u32,
    body: &dyn Fn(u32) -> Vec<u8>,
) -> u32 {
    for _ in 0..50 {
        let (held0, _) = rzmq_core::testing::direct::hold_stats();
        let bytes: Vec<u8> = (*next..*next + n)
            .flat_map(|i| short_frame(false, &body(i)))
            .collect();
        let writer = {
            let mut w = peer.try_clone().unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                w.write_all(&bytes).unwrap();
            })
        };
        for i in *next..*next + 10 {
            assert_eq!(recv_all(pull), vec![body(i)]);
        }
        writer.join().unwrap();
        let end = *next + n;
        *next += 10;
        if rzmq_core::testing::direct::hold_stats().0 > held0 {
            return end;
        }
        for i in *next..end {
            assert_eq!(recv_all(pull), vec![body(i)]);
        }
        *next = end;
    }
    panic!("no burst was read by the socket itself");
}

/// A PULL socket of `ctx` (receive high-water mark `rcvhwm`) and a hand-written ZMTP PUSH peer
/// connected to it, whose first message ("first") was received; what the socket writes to the
/// peer is read and dropped by the returned thread, which ends when the peer's stream does.
fn raw_push_peer(ctx: &Context, rcvhwm: i32) -> (Socket, TcpStream, std::thread::JoinHandle<()>) {
    let (mut pull, mut peer) = pull_and_raw_peer(ctx, rcvhwm);
    let drain = {
        let mut r = peer.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
        })
    };
    let mut hello = zmtp_greeting(b"NULL");
    hello.extend_from_slice(&ready(b"PUSH"));
    hello.extend_from_slice(&short_frame(false, b"first"));
    peer.write_all(&hello).unwrap();
    assert_eq!(recv_all(&mut pull), vec![b"first".to_vec()]);
    (pull, peer, drain)
}

/// A stream read by the socket itself: a burst the blocked socket reads directly leaves it
/// holding the connection's input between receives; an application that then stops receiving
/// does not keep what arrives after from the I/O thread, and everything comes out in order,
/// what the socket read first before what the I/O thread read later.
fn held_stream_scenario() {
    let ctx = Context::new();
    let (mut pull, mut peer, drain) = raw_push_peer(&ctx, 1000);
    let body = |i: u32| format!("m{i}").into_bytes();
    // A burst written while the socket waits in its next receive: read there, in turns.
    let mut next = 0;
    let end = held_burst(&mut pull, &peer, &mut next, 3000, &body);
    let (_, taken0) = rzmq_core::testing::direct::hold_stats();
    // The application stops receiving; more arrives; the I/O thread takes the input back.
    let more: Vec<u8> = (end..end + 100)
        .flat_map(|i| short_frame(false, &body(i)))
        .collect();
    peer.write_all(&more).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_millis(u64::from(TIMEOUT_MS as u32));
    while rzmq_core::testing::direct::hold_stats().1 == taken0 {
        assert!(
            std::time::Instant::now() < deadline,
            "held input was never taken back"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_ne!(pull.events().unwrap() & rzmq_core::socket::POLLIN, 0);
    for i in next..end + 100 {
        assert_eq!(
            recv_all(&mut pull),
            vec![body(i)],
            "message {i} out of order"
        );
    }
    peer.shutdown(std::net::Shutdown::Both).unwrap();
    drain.join().unwrap();
}

/// Polls `events()` until it reports input, failing after `TIMEOUT_MS`.
fn wait_pollin(s: &mut Socket, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_millis(3000);
    while s.events().unwrap() & rzmq_core::socket::POLLIN == 0 {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// While a socket holds a stream's input, its I/O thread stops listening to the stream; when
/// the socket lets go (here: it polls instead of receiving), the I/O thread must read again,
/// whether bytes already wait or arrive only later. The stale timer is set far beyond the
/// test's patience, so only letting go can bring input back.
fn deaf_io_thread_scenario() {
    rzmq_core::testing::direct::set_hold_stale(Duration::from_secs(30));
    let ctx = Context::new();
    let (mut pull, mut peer, drain) = raw_push_peer(&ctx, 1000);
    let body = |i: u32| format!("d{i}").into_bytes();
    let burst = |from: u32, to: u32| -> Vec<u8> {
        (from..to)
            .flat_map(|i| short_frame(false, &body(i)))
            .collect()
    };
    let mut next = 0u32;
    // Leaves the socket holding input with its I/O thread deaf: a burst the blocked socket
    // reads itself, ten messages taken, then a second burst arriving while the application is
    // away (the I/O thread sees it arrive while input is held, and stops listening), and both
    // bursts received to the end.
    let mut feed = peer.try_clone().unwrap();
    let spare = peer.try_clone().unwrap();
    let mut make_deaf = |pull: &mut Socket, next: &mut u32| {
        let end = held_burst(pull, &spare, next, 2000, &body);
        feed.write_all(&burst(end, end + 2000)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        for i in *next..end + 2000 {
            assert_eq!(recv_all(pull), vec![body(i)]);
        }
        *next = end + 2000;
    };
    // Bytes already waiting when the socket lets go (here: it polls).
    make_deaf(&mut pull, &mut next);
    peer.write_all(&burst(next, next + 100)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // Polled input, then every message of it taken without waiting, in order.
    let poll_and_take = |pull: &mut Socket, from: u32, to: u32, what: &str| {
        wait_pollin(pull, what);
        for i in from..to {
            assert_eq!(
                pull.recv_multipart(rzmq_core::DONTWAIT).unwrap()[0].data(),
                &body(i)[..]
            );
        }
    };
    poll_and_take(
        &mut pull,
        next,
        next + 100,
        "input waiting when the socket let go was never read",
    );
    next += 100;
    // Bytes arriving only after the socket let go.
    make_deaf(&mut pull, &mut next);
    assert_eq!(pull.events().unwrap() & rzmq_core::socket::POLLIN, 0);
    peer.write_all(&burst(next, next + 10)).unwrap();
    poll_and_take(
        &mut pull,
        next,
        next + 10,
        "input arriving after the socket let go was never read",
    );
    rzmq_core::testing::direct::set_hold_stale(rzmq_core::testing::direct::RX_HOLD_STALE);
    peer.shutdown(std::net::Shutdown::Both).unwrap();
    drain.join().unwrap();
}

/// A stream the I/O thread got ahead of: `n` short messages written at once (by a thread,
/// since the kernel takes them only as they are read) while the application is away, so the
/// I/O thread fills the socket's small pipe and stalls on it. Returns the writer and the body
/// of message `i`.
fn stalled_stream(
    ctx: &Context,
    tag: &'static str,
    n: u32,
) -> (
    Socket,
    TcpStream,
    std::thread::JoinHandle<()>,
    std::thread::JoinHandle<()>,
) {
    let (mut pull, peer, drain) = raw_push_peer(ctx, 50);
    // A second message received with a blocking call: the socket says it receives so (the
    // first may have come before the connection's input had its handle).
    let mut w = peer.try_clone().unwrap();
    w.write_all(&short_frame(false, b"second")).unwrap();
    assert_eq!(recv_all(&mut pull), vec![b"second".to_vec()]);
    let writer = std::thread::spawn(move || {
        let bytes: Vec<u8> = (0..n)
            .flat_map(|i| short_frame(false, format!("{tag}{i}").as_bytes()))
            .collect();
        w.write_all(&bytes).unwrap();
    });
    std::thread::sleep(Duration::from_millis(200));
    (pull, peer, drain, writer)
}

/// A socket receiving with blocking calls takes over a stream its I/O thread got ahead of
/// (the I/O thread delivers what it decoded and hands the input over instead of reading on);
/// everything comes out in order. Without the hand-over the I/O thread keeps the pipe
/// between its marks for the whole stream and the socket never reads the stream itself.
fn stalled_stream_scenario() {
    let ctx = Context::new();
    let n = 200_000;
    let (mut pull, peer, drain, writer) = stalled_stream(&ctx, "s", n);
    let (got0, _) = rzmq_core::testing::direct::rx_stats();
    for i in 0..n {
        assert_eq!(
            recv_all(&mut pull),
            vec![format!("s{i}").into_bytes()],
            "message {i}"
        );
    }
    writer.join().unwrap();
    let (got1, _) = rzmq_core::testing::direct::rx_stats();
    assert!(
        got1 > got0,
        "the socket never read the stream its I/O thread got ahead of"
    );
    peer.shutdown(std::net::Shutdown::Both).unwrap();
    drain.join().unwrap();
}

/// A socket that received with blocking calls and then only polls: a stream its I/O thread
/// got ahead of must not wait for it (the stale timer is set far beyond the test's patience,
/// so only polling can give the input back).
fn stalled_stream_polled_scenario() {
    rzmq_core::testing::direct::set_hold_stale(Duration::from_secs(30));
    let ctx = Context::new();
    let n = 100_000;
    let (mut pull, peer, drain, writer) = stalled_stream(&ctx, "p", n);
    let mut i = 0;
    while i < n {
        wait_pollin(
            &mut pull,
            "a polling socket was left waiting for a stalled stream",
        );
        while let Ok(m) = pull.recv_multipart(rzmq_core::DONTWAIT) {
            assert_eq!(m[0].data(), format!("p{i}").as_bytes(), "message {i}");
            i += 1;
        }
    }
    writer.join().unwrap();
    rzmq_core::testing::direct::set_hold_stale(rzmq_core::testing::direct::RX_HOLD_STALE);
    peer.shutdown(std::net::Shutdown::Both).unwrap();
    drain.join().unwrap();
}

/// A socket receiving large frames stops asking for its connection's input (the I/O thread
/// reading ahead overlaps the kernel's copy with the application's work), also while large
/// frames alternate with small ones (a header and its body), and asks again after a run of
/// small frames. The sender pauses before each of the first frames and the last three, so
/// those receives wait.
fn large_frames_scenario() {
    let ctx = Context::new();
    let mut pull = sock(&ctx, SocketType::Pull, 3000);
    pull.bind("tcp://127.0.0.1:*").unwrap();
    // The sender in a context of its own, as in another process: its connection does not
    // share the receiver's I/O thread.
    let push_ctx = Context::new();
    let mut push = sock(&push_ctx, SocketType::Push, 3000);
    push.connect(pull.last_endpoint()).unwrap();
    // 0-4 small, 5-9 large, 10-19 small and large in turn, then 100 small ones.
    const PACED: usize = 20;
    const ALL: usize = PACED + 100;
    let frame = |i: usize| -> Vec<u8> {
        if (5..=9).contains(&i) || ((10..PACED).contains(&i) && i % 2 == 1) {
            payload(64 * 1024, i as u8)
        } else {
            format!("small {i}").into_bytes()
        }
    };
    let sender = std::thread::spawn(move || {
        for i in 0..ALL {
            if !(PACED..ALL - 3).contains(&i) {
                std::thread::sleep(Duration::from_millis(30));
            }
            push.send(Msg::from_vec(frame(i)), 0).unwrap();
        }
        push
    });
    for i in 0..ALL {
        assert_eq!(pull.recv_bytes(0).unwrap(), frame(i), "frame {i}");
        match i {
            4 => assert!(
                pull.asks_for_input(),
                "a socket waiting for small frames did not ask for its input"
            ),
            5..PACED => assert!(
                !pull.asks_for_input(),
                "a socket receiving large frames asks for its input (after frame {i})"
            ),
            _ => {}
        }
    }
    // The last receives waited after a long run of small frames: they asked.
    assert!(
        pull.asks_for_input(),
        "small frames again, and the socket did not ask for its input"
    );
    drop(sender.join().unwrap());
}

#[test]
fn direct_receives_deliver_whole_messages_in_order() {
    // Polling before sleeping off: every reply is read after a sleep.
    rzmq_core::options::rzmq::set_default(rzmq_core::options::BUSY_POLL_US, Some(0));
    let spun0 = rzmq_core::testing::direct::spin_stats();
    req_rep_scenario();
    assert_eq!(
        rzmq_core::testing::direct::spin_stats(),
        spun0,
        "polled with a zero budget"
    );
    // A budget longer than any reply takes here: replies are read while polling.
    rzmq_core::options::rzmq::set_default(rzmq_core::options::BUSY_POLL_US, Some(200_000));
    req_rep_scenario();
    assert!(
        rzmq_core::testing::direct::spin_stats() > spun0,
        "no reply was found while polling"
    );
    spin_deadline_scenario();
    let (got0, back0) = rzmq_core::testing::direct::rx_stats();
    req_rep_scenario();
    let (got1, _) = rzmq_core::testing::direct::rx_stats();
    assert!(
        got1 - got0 >= 300,
        "only {} receives went directly",
        got1 - got0
    );
    raw_peer_scenario(false);
    raw_peer_scenario(true);
    let (got2, back2) = rzmq_core::testing::direct::rx_stats();
    assert!(
        got2 > got1,
        "the raw peer's messages were all read by the I/O thread"
    );
    assert!(back2 > back0, "input never went back to the I/O thread");
    let (_, partial0) = rzmq_core::testing::direct::stats();
    large_req_rep_scenario();
    let (_, partial1) = rzmq_core::testing::direct::stats();
    assert!(
        partial1 > partial0,
        "no direct send of a 9 MiB message was cut by the kernel"
    );
    shutdown_scenario();
    held_stream_scenario();
    deaf_io_thread_scenario();
    stalled_stream_scenario();
    stalled_stream_polled_scenario();
    large_frames_scenario();
}

//! AsyncSocket end to end on both tokio runtime flavors: every transport, long HWM-bound
//! streams with slow consumers and producers (a missed wake-up hangs them, and the hang guard
//! fails the test), both directions on one socket (Stream and Sink polled together), and
//! cancellation: receives dropped at random points lose nothing, sends dropped at random points
//! are taken back and resent, and every message arrives exactly once and in order.

mod common;

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::*;
use futures_core::Stream;
use futures_sink::Sink;
use rzmq_core::{Context, Error, Msg, SocketType};
use rzmq_tokio::AsyncSocket;

/// Each test body once on the current-thread runtime and once on the multi-thread one.
macro_rules! both_flavors {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "current_thread")]
            async fn current_thread() {
                super::$name().await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn multi_thread() {
                super::$name().await
            }
        }
    };
}

const TRANSPORTS: [&str; 3] = ["tcp", "ipc", "inproc"];

/// Sends `msg` through the socket's Sink (ready, start, flush).
async fn sink_send(s: &mut AsyncSocket, msg: Vec<Msg>) -> Result<(), Error> {
    poll_fn(|cx| Pin::new(&mut *s).poll_ready(cx)).await?;
    Pin::new(&mut *s).start_send(msg)?;
    poll_fn(|cx| Pin::new(&mut *s).poll_flush(cx)).await
}

/// The next message of the socket's Stream.
async fn stream_next(s: &mut AsyncSocket) -> Option<Result<Vec<Msg>, Error>> {
    poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

async fn every_transport_carries_frames_and_whole_messages() {
    let ctx = Context::new();
    for t in TRANSPORTS {
        let mut pull = socket(&ctx, SocketType::Pull, 1000);
        let ep = bind(&mut pull, t, "every");
        let mut push = socket(&ctx, SocketType::Push, 1000);
        push.connect(&ep).unwrap();
        guarded(t, async {
            push.send("one").await.unwrap();
            push.send_multipart(["a", "b", "c"]).await.unwrap();
            sink_send(&mut push, numbered(7)).await.unwrap();
            assert_eq!(pull.recv().await.unwrap().data(), b"one");
            let a = pull.recv().await.unwrap();
            assert!(a.more() && a.data() == b"a", "{t}");
            // The rest of a message started with recv() comes whole from recv_multipart().
            let rest = pull.recv_multipart().await.unwrap();
            assert_eq!(rest.len(), 2);
            assert_eq!(rest[1].data(), b"c");
            let m = stream_next(&mut pull).await.unwrap().unwrap();
            assert_eq!(number_of(&m), 7);
        })
        .await;

        // Request and reply, both directions through one socket each.
        let mut rep = socket(&ctx, SocketType::Rep, 1000);
        let ep = bind(&mut rep, t, "every-rep");
        let mut req = socket(&ctx, SocketType::Req, 1000);
        req.connect(&ep).unwrap();
        let server = tokio::spawn(async move {
            for _ in 0..100 {
                let m = rep.recv_multipart().await.unwrap();
                rep.send_multipart(m).await.unwrap();
            }
        });
        guarded(t, async {
            for i in 0..100 {
                req.send_multipart(numbered(i)).await.unwrap();
                assert_eq!(number_of(&req.recv_multipart().await.unwrap()), i);
            }
            server.await.unwrap();
        })
        .await;
    }
}
both_flavors!(every_transport_carries_frames_and_whole_messages);

/// Messages through a PUSH/PULL pair with tiny HWMs, in phases where the consumer is slow (the
/// producer waits for room: POLLOUT wake-ups) and phases where the producer is slow (the
/// consumer waits for input: POLLIN wake-ups).
async fn slow_consumers_and_slow_producers_miss_no_wakeup() {
    const N: u64 = 20_000;
    const PHASE: u64 = 2_000;
    let ctx = Context::new();
    for t in TRANSPORTS {
        let mut pull = socket(&ctx, SocketType::Pull, 2);
        let ep = bind(&mut pull, t, "slow");
        let mut push = socket(&ctx, SocketType::Push, 2);
        push.connect(&ep).unwrap();
        let producer = tokio::spawn(async move {
            let mut rng = Rng(0x5eed);
            for i in 0..N {
                push.send_multipart(numbered(i)).await.unwrap();
                // Odd phases: a slow producer.
                if (i / PHASE) & 1 == 1 {
                    if rng.below(64) == 0 {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
            }
            push
        });
        guarded(t, async {
            let mut rng = Rng(0xc0ffee);
            for i in 0..N {
                let m = pull.recv_multipart().await.unwrap();
                assert_eq!(number_of(&m), i, "{t}: in order, exactly once");
                // Even phases: a slow consumer.
                if (i / PHASE) & 1 == 0 {
                    if rng.below(64) == 0 {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
            }
            drop(producer.await.unwrap());
        })
        .await;
    }
}
both_flavors!(slow_consumers_and_slow_producers_miss_no_wakeup);

/// One side of a DEALER pair sending and receiving `n` messages at once through its Sink and
/// Stream, polled together in one task (so both directions wait on the one fd), yielding now
/// and then.
async fn duplex(mut s: AsyncSocket, n: u64, seed: u64) -> AsyncSocket {
    let (mut sent, mut got, mut flushed) = (0u64, 0u64, false);
    let mut rng = Rng(seed);
    poll_fn(|cx| loop {
        let mut progress = false;
        if sent < n {
            if let Poll::Ready(r) = Pin::new(&mut s).poll_ready(cx) {
                r.unwrap();
                Pin::new(&mut s).start_send(numbered(sent)).unwrap();
                sent += 1;
                progress = true;
            }
        } else if !flushed {
            if let Poll::Ready(r) = Pin::new(&mut s).poll_flush(cx) {
                r.unwrap();
                flushed = true;
            }
        }
        if got < n {
            if let Poll::Ready(m) = Pin::new(&mut s).poll_next(cx) {
                assert_eq!(number_of(&m.unwrap().unwrap()), got, "in order");
                got += 1;
                progress = true;
            }
        }
        if flushed && got == n {
            return Poll::Ready(());
        }
        if !progress {
            return Poll::Pending;
        }
        if rng.below(16) == 0 {
            // Let the peer run (and the pipes fill or drain) before going on.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
    })
    .await;
    s
}

async fn both_directions_on_one_socket_miss_no_wakeup() {
    const N: u64 = 10_000;
    let ctx = Context::new();
    for t in TRANSPORTS {
        let mut a = socket(&ctx, SocketType::Dealer, 3);
        let ep = bind(&mut a, t, "duplex");
        let mut b = socket(&ctx, SocketType::Dealer, 3);
        b.connect(&ep).unwrap();
        let other = tokio::spawn(duplex(b, N, 7));
        guarded(t, async {
            let a = duplex(a, N, 11).await;
            let b = other.await.unwrap();
            drop((a, b));
        })
        .await;
    }
}
both_flavors!(both_directions_on_one_socket_miss_no_wakeup);

/// Receives cancelled at random points (a select! against a partner that completes after a
/// few polls or a short sleep) lose nothing: every message arrives once, in order.
async fn cancelled_receives_lose_nothing() {
    const N: u64 = 5_000;
    let ctx = Context::new();
    for t in ["tcp", "inproc"] {
        let mut pull = socket(&ctx, SocketType::Pull, 8);
        let ep = bind(&mut pull, t, "cancel-rx");
        let mut push = socket(&ctx, SocketType::Push, 8);
        push.connect(&ep).unwrap();
        let producer = tokio::spawn(async move {
            let mut rng = Rng(99);
            for i in 0..N {
                push.send_multipart(numbered(i)).await.unwrap();
                if rng.below(8) == 0 {
                    tokio::task::yield_now().await;
                }
            }
            push.send("end").await.unwrap();
            push
        });
        let (mut rng, mut cancelled) = (Rng(1234), 0u64);
        guarded(t, async {
            let mut next = 0;
            while next < N {
                if rng.below(3) == 0 {
                    tokio::select! {
                        m = pull.recv() => {
                            // One frame taken: the rest of its message follows whole.
                            let first = m.unwrap();
                            assert!(first.more());
                            let mut parts = vec![first];
                            parts.extend(pull.recv_multipart().await.unwrap());
                            assert_eq!(number_of(&parts), next, "{t}: in order, exactly once");
                            next += 1;
                        }
                        _ = cancel_point(&mut rng, 32) => cancelled += 1,
                    }
                } else {
                    tokio::select! {
                        m = pull.recv_multipart() => {
                            assert_eq!(number_of(&m.unwrap()), next, "{t}: in order, exactly once");
                            next += 1;
                        }
                        _ = cancel_point(&mut rng, 32) => cancelled += 1,
                    }
                }
            }
            assert_eq!(
                pull.recv().await.unwrap().data(),
                b"end",
                "{t}: nothing twice"
            );
            drop(producer.await.unwrap());
        })
        .await;
        assert!(cancelled > 0, "{t}: the test cancelled no receive");
    }
}
both_flavors!(cancelled_receives_lose_nothing);

/// Sends cancelled at random points: a cancelled send either went (no message to take back)
/// or hands its message back, which is sent again; the consumer sees each message once, in
/// order.
async fn cancelled_sends_are_taken_back_and_sent_once() {
    const N: u64 = 5_000;
    let ctx = Context::new();
    for t in ["tcp", "inproc"] {
        let mut pull = socket(&ctx, SocketType::Pull, 4);
        let ep = bind(&mut pull, t, "cancel-tx");
        let mut push = socket(&ctx, SocketType::Push, 4);
        push.connect(&ep).unwrap();
        let consumer = tokio::spawn(async move {
            let mut rng = Rng(4321);
            for i in 0..N {
                let m = pull.recv_multipart().await.unwrap();
                assert_eq!(number_of(&m), i, "in order, exactly once");
                if rng.below(4) == 0 {
                    tokio::task::yield_now().await;
                }
            }
            assert_eq!(pull.recv().await.unwrap().data(), b"end", "nothing twice");
            pull
        });
        let (mut rng, mut taken_back) = (Rng(8765), 0u64);
        guarded(t, async {
            for i in 0..N {
                let mut msg = numbered(i);
                loop {
                    let mut send = push.send_multipart(msg);
                    tokio::select! {
                        r = &mut send => {
                            r.unwrap();
                            break;
                        }
                        _ = cancel_point(&mut rng, 32) => match send.take_message() {
                            Some(back) => {
                                assert_eq!(number_of(&back), i, "the message handed back whole");
                                taken_back += 1;
                                msg = back;
                            }
                            None => break,
                        },
                    }
                }
            }
            push.send("end").await.unwrap();
            drop(consumer.await.unwrap());
        })
        .await;
        assert!(taken_back > 0, "{t}: no send was cancelled before it went");
    }
}
both_flavors!(cancelled_sends_are_taken_back_and_sent_once);

/// A send that cannot go (no peer, then a full HWM) hands its message back when cancelled;
/// resent later, it arrives.
async fn a_send_that_cannot_go_hands_its_message_back() {
    let ctx = Context::new();
    let mut push = socket(&ctx, SocketType::Push, 1);
    // No peer: PUSH has nowhere to send.
    let mut send = push.send("lonely");
    assert!(tokio::time::timeout(Duration::from_millis(20), &mut send)
        .await
        .is_err());
    let back = send.take_message().expect("not sent without a peer");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data(), b"lonely");

    let mut pull = socket(&ctx, SocketType::Pull, 1);
    let ep = bind(&mut pull, "tcp", "full");
    push.connect(&ep).unwrap();
    push.send_multipart(back).await.unwrap();
    // Fill the pipes: a send waits once the peer's HWM and ours are full, and hands back.
    let mut sent = 1u64;
    let held = loop {
        let mut send = push.send_multipart(numbered(sent));
        match tokio::time::timeout(Duration::from_millis(200), &mut send).await {
            Ok(r) => {
                r.unwrap();
                sent += 1;
            }
            Err(_) => break send.take_message().expect("a blocked send hands back"),
        }
    };
    assert_eq!(number_of(&held), sent);
    guarded("drain", async {
        assert_eq!(pull.recv().await.unwrap().data(), b"lonely");
        for i in 1..sent {
            assert_eq!(number_of(&pull.recv_multipart().await.unwrap()), i);
        }
        push.send_multipart(held).await.unwrap();
        assert_eq!(number_of(&pull.recv_multipart().await.unwrap()), sent);
    })
    .await;
}
both_flavors!(a_send_that_cannot_go_hands_its_message_back);

/// The Stream ends when the context terminates.
async fn the_stream_ends_at_context_termination() {
    let ctx = Context::new();
    let mut pull = socket(&ctx, SocketType::Pull, 10);
    pull.bind("inproc://stream-end").unwrap();
    let ctx2 = ctx.clone();
    let term = std::thread::spawn(move || {
        // Before or after the stream starts waiting: either way it must end.
        std::thread::sleep(Duration::from_millis(20));
        ctx2.shutdown();
    });
    guarded("term", async {
        assert!(stream_next(&mut pull).await.is_none());
    })
    .await;
    term.join().unwrap();
}
both_flavors!(the_stream_ends_at_context_termination);

#[test]
fn an_empty_multipart_message_is_invalid() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ctx = Context::new();
        let mut push = socket(&ctx, SocketType::Push, 10);
        let r = push.send_multipart(Vec::<Msg>::new()).await;
        assert!(matches!(r, Err(Error::Inval)), "{r:?}");
    });
}

/// A thread-safe socket type (SCATTER to GATHER), which has no `ZMQ_FD`: the async socket
/// waits on a wake-up registered with the socket's waiters instead. Every message arrives, in
/// order, over tcp and inproc, with the receiver waiting first.
#[tokio::test(flavor = "current_thread")]
async fn thread_safe_socket_types_send_and_receive() {
    let ctx = Context::new();
    for t in ["tcp", "inproc"] {
        let mut gather = socket(&ctx, SocketType::Gather, 0);
        let ep = bind(&mut gather, t, "scatter-gather");
        let mut scatter = socket(&ctx, SocketType::Scatter, 0);
        scatter.connect(&ep).unwrap();
        let receiver = tokio::spawn(async move {
            for i in 0..200u64 {
                let m = gather.recv().await.unwrap();
                assert_eq!(m.data(), i.to_le_bytes(), "{i}");
            }
        });
        guarded(t, async {
            for i in 0..200u64 {
                scatter.send(i.to_le_bytes().to_vec()).await.unwrap();
            }
            receiver.await.unwrap();
        })
        .await;
    }
}

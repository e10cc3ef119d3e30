//! AsyncSocket among other tasks: a busy socket drained (or filled) in a loop on a
//! current-thread runtime yields to the runtime's other tasks (every operation spends tokio's
//! cooperative budget, the ones that complete at once included), and a socket split into a
//! Stream task and a Sink task (`futures::StreamExt::split`) on the multi-thread runtime moves
//! both directions at once, each task woken for its own direction.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use futures_util::{SinkExt, StreamExt};
use rzmq_core::{Context, SocketType};

/// Messages queued before the drain: far more than tokio's budget per turn (128).
const BUSY: u64 = 5_000;

/// Runs `busy` (which counts its completed operations in `done`) beside a task that records
/// how many were done when it first ran; returns that count. Without budget spent on the
/// operations that complete at once, `busy` never yields and the other task runs only after
/// it: the count is then `BUSY`.
async fn first_turn_of_other_task(
    done: Arc<AtomicU64>,
    busy: impl std::future::Future<Output = ()>,
) -> u64 {
    let seen = Arc::new(AtomicU64::new(u64::MAX));
    let other = {
        let (done, seen) = (done.clone(), seen.clone());
        tokio::spawn(async move { seen.store(done.load(Ordering::SeqCst), Ordering::SeqCst) })
    };
    busy.await;
    other.await.unwrap();
    seen.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "current_thread")]
async fn draining_a_busy_socket_lets_other_tasks_run() {
    let ctx = Context::new();
    let mut pull = socket(&ctx, SocketType::Pull, 0);
    let ep = bind(&mut pull, "inproc", "coop-recv");
    let mut push = socket(&ctx, SocketType::Push, 0);
    push.connect(&ep).unwrap();
    // Everything queued first: every receive of the drain completes at once.
    for i in 0..BUSY {
        push.get_mut()
            .send(i.to_le_bytes().to_vec(), rzmq_core::DONTWAIT)
            .unwrap();
    }
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let at = guarded(
        "drain",
        first_turn_of_other_task(done, async move {
            for i in 0..BUSY {
                let m = pull.recv().await.unwrap();
                assert_eq!(m.data(), i.to_le_bytes());
                d.store(i + 1, Ordering::SeqCst);
            }
        }),
    )
    .await;
    assert!(
        at < BUSY,
        "the other task first ran after {at} of {BUSY} receives: the drain never yielded"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_stream_of_a_busy_socket_lets_other_tasks_run() {
    let ctx = Context::new();
    let mut pull = socket(&ctx, SocketType::Pull, 0);
    let ep = bind(&mut pull, "inproc", "coop-stream");
    let mut push = socket(&ctx, SocketType::Push, 0);
    push.connect(&ep).unwrap();
    for i in 0..BUSY {
        push.get_mut()
            .send_multipart(numbered(i), rzmq_core::DONTWAIT)
            .unwrap();
    }
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let at = guarded(
        "stream",
        first_turn_of_other_task(done, async move {
            for i in 0..BUSY {
                let m = pull.next().await.unwrap().unwrap();
                assert_eq!(number_of(&m), i);
                d.store(i + 1, Ordering::SeqCst);
            }
        }),
    )
    .await;
    assert!(
        at < BUSY,
        "the other task first ran after {at} of {BUSY} messages"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn filling_a_socket_with_room_lets_other_tasks_run() {
    let ctx = Context::new();
    let mut pull = socket(&ctx, SocketType::Pull, 0);
    let ep = bind(&mut pull, "inproc", "coop-send");
    let mut push = socket(&ctx, SocketType::Push, 0);
    push.connect(&ep).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let at = guarded(
        "fill",
        first_turn_of_other_task(done, async move {
            // No HWM: every send completes at once.
            for i in 0..BUSY {
                push.send(i.to_le_bytes().to_vec()).await.unwrap();
                d.store(i + 1, Ordering::SeqCst);
            }
        }),
    )
    .await;
    assert!(
        at < BUSY,
        "the other task first ran after {at} of {BUSY} sends"
    );
    for i in 0..BUSY {
        assert_eq!(pull.get_mut().recv_bytes(0).unwrap(), i.to_le_bytes());
    }
}

/// Two DEALERs, each split into a Sink task and a Stream task: four tasks on two worker
/// threads, every direction bound by a tiny HWM, so each task waits for its own direction
/// while the other half of its socket waits for the other one. Every message arrives once, in
/// order, both ways.
///
/// It hung in most runs until an operation of one half woke the other half's waiting task: the
/// first try of an operation drains the socket's mailbox and the fd's signal with it, so the
/// command the other half slept on could be taken without the reactor ever seeing the edge
/// (readiness.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_split_into_two_tasks_moves_both_directions() {
    const N: u64 = 10_000;
    let ctx = Context::new();
    for t in ["tcp", "ipc", "inproc"] {
        let mut a = socket(&ctx, SocketType::Dealer, 2);
        let ep = bind(&mut a, t, "split");
        let mut b = socket(&ctx, SocketType::Dealer, 2);
        b.connect(&ep).unwrap();
        let mut tasks = Vec::new();
        for (s, seed) in [(a, 3u64), (b, 5u64)] {
            let (mut sink, mut stream) = s.split();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(seed);
                for i in 0..N {
                    sink.send(numbered(i)).await.unwrap();
                    if rng.below(32) == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(seed + 1);
                for i in 0..N {
                    let m = stream.next().await.expect("open").unwrap();
                    assert_eq!(number_of(&m), i, "{t}: in order, exactly once");
                    if rng.below(32) == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        guarded(t, async {
            for task in tasks {
                task.await.unwrap();
            }
        })
        .await;
    }
}

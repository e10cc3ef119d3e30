//! AsyncSocket over RDMA on the soft provider: a tcp connection between two rzmq sockets moves
//! to RDMA (both sides' monitors report the RDMA transport), then messages small and large
//! (rendezvous-sized) go both ways through the async API, on both runtime flavors.
//!
//! The binary runs with `RZMQ_RDMA=auto RZMQ_RDMA_PROVIDER=soft RZMQ_RDMA_EVENTS=1`, set before
//! the first socket (the upgrader reads the environment once).

mod common;

use common::*;
use rzmq_core::monitor;
use rzmq_core::{Context, Socket, SocketType};
use rzmq_tests::{next_transport, setup_soft_rdma as setup};

/// Monitors `s` for transport events; returns the reading end.
fn watch(ctx: &Context, s: &mut Socket, tag: &str) -> Socket {
    rzmq_tests::watch_transport(ctx, s, tag, 0)
}

async fn dealers_exchange_over_rdma() {
    setup();
    let ctx = Context::new();
    let mut a = socket(&ctx, SocketType::Dealer, 16);
    let mut b = socket(&ctx, SocketType::Dealer, 16);
    let ep = bind(&mut a, "tcp", "rdma");
    let mut mon_a = watch(&ctx, a.get_mut(), "rdma-async-a");
    let mut mon_b = watch(&ctx, b.get_mut(), "rdma-async-b");
    b.connect(&ep).unwrap();
    assert_eq!(next_transport(&mut mon_a), monitor::TRANSPORT_RDMA);
    assert_eq!(next_transport(&mut mon_b), monitor::TRANSPORT_RDMA);

    const N: u64 = 2_000;
    let sizes = [0usize, 100, 4096, 65_537, 1 << 20];
    let peer = tokio::spawn(async move {
        // Echo every message back.
        for _ in 0..N + sizes.len() as u64 {
            let m = b.recv_multipart().await.unwrap();
            b.send_multipart(m).await.unwrap();
        }
        b
    });
    guarded("rdma", async {
        // Pipelined: 16 in flight against HWMs of 16, so both sides wait for room and input.
        let mut got = 0;
        for i in 0..N {
            a.send_multipart(numbered(i)).await.unwrap();
            if i >= 16 {
                assert_eq!(number_of(&a.recv_multipart().await.unwrap()), got);
                got += 1;
            }
        }
        while got < N {
            assert_eq!(number_of(&a.recv_multipart().await.unwrap()), got);
            got += 1;
        }
        for (i, &n) in sizes.iter().enumerate() {
            let body = rzmq_tests::payload(n, i as u8);
            a.send(body.clone()).await.unwrap();
            let back = a.recv_multipart().await.unwrap();
            assert!(back[0].data() == body.as_slice(), "{n} bytes over RDMA");
        }
        drop(peer.await.unwrap());
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn dealers_exchange_over_rdma_current_thread() {
    dealers_exchange_over_rdma().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dealers_exchange_over_rdma_multi_thread() {
    dealers_exchange_over_rdma().await
}

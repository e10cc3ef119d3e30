//! The crate `rzmq` from crates.io (github.com/excsn/rzmq, an unrelated project of the same
//! name), with its default features (tcp, ipc, inproc; no io_uring) on a tokio runtime. Its
//! linger defaults to forever, as libzmq's; `Context::term` waits for it.

use std::time::Instant;

use rzmq::{Context, Msg, SocketType};

use crate::{check, check_size, report_lat, report_thr, runtime, Args};

pub fn local_thr() {
    let a = Args::network("local_thr");
    runtime().block_on(async {
        let ctx = check(Context::new(), "zmq_ctx_new");
        let s = check(ctx.socket(SocketType::Pull), "zmq_socket");
        check(s.bind(&a.endpoint).await, "zmq_bind");
        check_size(check(s.recv().await, "zmq_recvmsg").size(), a.size);
        let watch = Instant::now();
        for _ in 1..a.count {
            check_size(check(s.recv().await, "zmq_recvmsg").size(), a.size);
        }
        report_thr(a.size, a.count, watch.elapsed());
        check(s.close().await, "zmq_close");
        check(ctx.term().await, "zmq_ctx_term");
    });
}

pub fn remote_thr() {
    let a = Args::network("remote_thr");
    runtime().block_on(async {
        let ctx = check(Context::new(), "zmq_ctx_new");
        let s = check(ctx.socket(SocketType::Push), "zmq_socket");
        check(s.connect(&a.endpoint).await, "zmq_connect");
        for _ in 0..a.count {
            check(
                s.send(Msg::from_vec(vec![0u8; a.size])).await,
                "zmq_sendmsg",
            );
        }
        check(s.close().await, "zmq_close");
        check(ctx.term().await, "zmq_ctx_term");
    });
}

pub fn local_lat() {
    let a = Args::network("local_lat");
    runtime().block_on(async {
        let ctx = check(Context::new(), "zmq_ctx_new");
        let s = check(ctx.socket(SocketType::Rep), "zmq_socket");
        check(s.bind(&a.endpoint).await, "zmq_bind");
        for _ in 0..a.count {
            let m = check(s.recv().await, "zmq_recvmsg");
            check_size(m.size(), a.size);
            check(s.send(m).await, "zmq_sendmsg");
        }
        check(s.close().await, "zmq_close");
        check(ctx.term().await, "zmq_ctx_term");
    });
}

pub fn remote_lat() {
    let a = Args::network("remote_lat");
    runtime().block_on(async {
        let ctx = check(Context::new(), "zmq_ctx_new");
        let s = check(ctx.socket(SocketType::Req), "zmq_socket");
        check(s.connect(&a.endpoint).await, "zmq_connect");
        let mut m = Msg::from_vec(vec![0u8; a.size]);
        let watch = Instant::now();
        for _ in 0..a.count {
            check(s.send(m).await, "zmq_sendmsg");
            m = check(s.recv().await, "zmq_recvmsg");
            check_size(m.size(), a.size);
        }
        report_lat(a.size, a.count, watch.elapsed());
        check(s.close().await, "zmq_close");
        check(ctx.term().await, "zmq_ctx_term");
    });
}

pub fn inproc_thr() {
    let a = Args::inproc("inproc_thr");
    runtime().block_on(async {
        let ctx = check(Context::new(), "zmq_ctx_new");
        let s = check(ctx.socket(SocketType::Pull), "zmq_socket");
        check(s.bind("inproc://thr_test").await, "zmq_bind");
        let (c2, size, count) = (ctx.clone(), a.size, a.count);
        let worker = tokio::spawn(async move {
            let p = check(c2.socket(SocketType::Push), "zmq_socket");
            check(p.connect("inproc://thr_test").await, "zmq_connect");
            for _ in 0..count {
                check(p.send(Msg::from_vec(vec![0u8; size])).await, "zmq_sendmsg");
            }
            check(p.close().await, "zmq_close");
        });
        check_size(check(s.recv().await, "zmq_recvmsg").size(), a.size);
        let watch = Instant::now();
        for _ in 1..a.count {
            check_size(check(s.recv().await, "zmq_recvmsg").size(), a.size);
        }
        let elapsed = watch.elapsed();
        check(worker.await, "worker");
        report_thr(a.size, a.count, elapsed);
        check(s.close().await, "zmq_close");
        check(ctx.term().await, "zmq_ctx_term");
    });
}

pub fn inproc_lat() {
    let a = Args::inproc("inproc_lat");
    runtime().block_on(async {
        let ctx = check(Context::new(), "zmq_ctx_new");
        let s = check(ctx.socket(SocketType::Req), "zmq_socket");
        check(s.bind("inproc://lat_test").await, "zmq_bind");
        let (c2, count) = (ctx.clone(), a.count);
        let worker = tokio::spawn(async move {
            let r = check(c2.socket(SocketType::Rep), "zmq_socket");
            check(r.connect("inproc://lat_test").await, "zmq_connect");
            for _ in 0..count {
                let m = check(r.recv().await, "zmq_recvmsg");
                check(r.send(m).await, "zmq_sendmsg");
            }
            check(r.close().await, "zmq_close");
        });
        let mut m = Msg::from_vec(vec![0u8; a.size]);
        let watch = Instant::now();
        for _ in 0..a.count {
            check(s.send(m).await, "zmq_sendmsg");
            m = check(s.recv().await, "zmq_recvmsg");
            check_size(m.size(), a.size);
        }
        let elapsed = watch.elapsed();
        check(worker.await, "worker");
        report_lat(a.size, a.count, elapsed);
        check(s.close().await, "zmq_close");
        check(ctx.term().await, "zmq_ctx_term");
    });
}

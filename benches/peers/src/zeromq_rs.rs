//! zmq.rs (crate `zeromq`) on a tokio runtime. It has tcp and ipc but no inproc transport, so
//! there are no inproc tools here.
//!
//! zmq.rs has no linger: a socket's messages are written by a task per peer, and dropping the
//! socket lets that task finish writing what is queued. `remote_thr` therefore drops the socket
//! and waits until the runtime has no task left (at most a minute) before it exits, which is what
//! libzmq's linger does at `zmq_ctx_term`.

use std::time::{Duration, Instant};

use zeromq::prelude::*;
use zeromq::{PullSocket, PushSocket, RepSocket, ReqSocket, ZmqMessage};

use crate::{check, check_size, report_lat, report_thr, runtime, Args};

fn bytes(m: &ZmqMessage) -> usize {
    m.iter().map(|f| f.len()).sum()
}

pub fn local_thr() {
    let a = Args::network("local_thr");
    runtime().block_on(async {
        let mut s = PullSocket::new();
        check(s.bind(&a.endpoint).await, "zmq_bind");
        check_size(bytes(&check(s.recv().await, "zmq_recvmsg")), a.size);
        let watch = Instant::now();
        for _ in 1..a.count {
            check_size(bytes(&check(s.recv().await, "zmq_recvmsg")), a.size);
        }
        report_thr(a.size, a.count, watch.elapsed());
    });
}

pub fn remote_thr() {
    let a = Args::network("remote_thr");
    let rt = runtime();
    rt.block_on(async {
        let mut s = PushSocket::new();
        check(s.connect(&a.endpoint).await, "zmq_connect");
        for _ in 0..a.count {
            let m = ZmqMessage::from(vec![0u8; a.size]);
            check(s.send(m).await, "zmq_sendmsg");
        }
        drop(s);
        // Linger: wait for the writer tasks to drain the queues.
        let deadline = Instant::now() + Duration::from_secs(60);
        let metrics = tokio::runtime::Handle::current().metrics();
        while metrics.num_alive_tasks() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

pub fn local_lat() {
    let a = Args::network("local_lat");
    runtime().block_on(async {
        let mut s = RepSocket::new();
        check(s.bind(&a.endpoint).await, "zmq_bind");
        for _ in 0..a.count {
            let m = check(s.recv().await, "zmq_recvmsg");
            check_size(bytes(&m), a.size);
            check(s.send(m).await, "zmq_sendmsg");
        }
    });
}

pub fn remote_lat() {
    let a = Args::network("remote_lat");
    runtime().block_on(async {
        let mut s = ReqSocket::new();
        check(s.connect(&a.endpoint).await, "zmq_connect");
        let mut m = ZmqMessage::from(vec![0u8; a.size]);
        let watch = Instant::now();
        for _ in 0..a.count {
            check(s.send(m).await, "zmq_sendmsg");
            m = check(s.recv().await, "zmq_recvmsg");
            check_size(bytes(&m), a.size);
        }
        report_lat(a.size, a.count, watch.elapsed());
    });
}

//! omq.rs (crate `omq-tokio`) through its blocking API: the context owns the I/O runtime and the
//! application thread sends and receives, as with libzmq.
//!
//! omq's linger defaults to zero (libzmq's to forever); the senders set it to forever so that
//! closing waits for the queued messages, as libzmq's `remote_thr` does.

use std::time::Instant;

use omq_tokio::{Context, Message, Options, SocketType};

use crate::{check, check_size, report_lat, report_thr, Args};

fn options() -> Options {
    Options::default().linger_forever()
}

pub fn local_thr() {
    let a = Args::network("local_thr");
    let ctx = Context::new();
    let s = ctx.blocking_socket(SocketType::Pull, options());
    check(s.bind(a.endpoint.as_str()), "zmq_bind");
    check_size(check(s.recv(), "zmq_recvmsg").byte_len(), a.size);
    let watch = Instant::now();
    for _ in 1..a.count {
        check_size(check(s.recv(), "zmq_recvmsg").byte_len(), a.size);
    }
    report_thr(a.size, a.count, watch.elapsed());
    check(s.close(), "zmq_close");
}

pub fn remote_thr() {
    let a = Args::network("remote_thr");
    let ctx = Context::new();
    let s = ctx.blocking_socket(SocketType::Push, options());
    check(s.connect(a.endpoint.as_str()), "zmq_connect");
    for _ in 0..a.count {
        check(s.send(Message::from(vec![0u8; a.size])), "zmq_sendmsg");
    }
    check(s.close(), "zmq_close");
}

pub fn local_lat() {
    let a = Args::network("local_lat");
    let ctx = Context::new();
    let s = ctx.blocking_socket(SocketType::Rep, options());
    check(s.bind(a.endpoint.as_str()), "zmq_bind");
    for _ in 0..a.count {
        let m = check(s.recv(), "zmq_recvmsg");
        check_size(m.byte_len(), a.size);
        check(s.send(m), "zmq_sendmsg");
    }
    check(s.close(), "zmq_close");
}

pub fn remote_lat() {
    let a = Args::network("remote_lat");
    let ctx = Context::new();
    let s = ctx.blocking_socket(SocketType::Req, options());
    check(s.connect(a.endpoint.as_str()), "zmq_connect");
    let mut m = Message::from(vec![0u8; a.size]);
    let watch = Instant::now();
    for _ in 0..a.count {
        check(s.send(m), "zmq_sendmsg");
        m = check(s.recv(), "zmq_recvmsg");
        check_size(m.byte_len(), a.size);
    }
    report_lat(a.size, a.count, watch.elapsed());
    check(s.close(), "zmq_close");
}

pub fn inproc_thr() {
    let a = Args::inproc("inproc_thr");
    let ctx = Context::new();
    let s = ctx.blocking_socket(SocketType::Pull, options());
    check(s.bind("inproc://thr_test"), "zmq_bind");
    let (c2, size, count) = (ctx.clone(), a.size, a.count);
    let worker = std::thread::spawn(move || {
        let p = c2.blocking_socket(SocketType::Push, options());
        check(p.connect("inproc://thr_test"), "zmq_connect");
        for _ in 0..count {
            check(p.send(Message::from(vec![0u8; size])), "zmq_sendmsg");
        }
        check(p.close(), "zmq_close");
    });
    check_size(check(s.recv(), "zmq_recvmsg").byte_len(), a.size);
    let watch = Instant::now();
    for _ in 1..a.count {
        check_size(check(s.recv(), "zmq_recvmsg").byte_len(), a.size);
    }
    let elapsed = watch.elapsed();
    worker.join().ok();
    report_thr(a.size, a.count, elapsed);
    check(s.close(), "zmq_close");
}

pub fn inproc_lat() {
    let a = Args::inproc("inproc_lat");
    let ctx = Context::new();
    let s = ctx.blocking_socket(SocketType::Req, options());
    check(s.bind("inproc://lat_test"), "zmq_bind");
    let (c2, count) = (ctx.clone(), a.count);
    let worker = std::thread::spawn(move || {
        let r = c2.blocking_socket(SocketType::Rep, options());
        check(r.connect("inproc://lat_test"), "zmq_connect");
        for _ in 0..count {
            let m = check(r.recv(), "zmq_recvmsg");
            check(r.send(m), "zmq_sendmsg");
        }
        check(r.close(), "zmq_close");
    });
    let mut m = Message::from(vec![0u8; a.size]);
    let watch = Instant::now();
    for _ in 0..a.count {
        check(s.send(m), "zmq_sendmsg");
        m = check(s.recv(), "zmq_recvmsg");
        check_size(m.byte_len(), a.size);
    }
    let elapsed = watch.elapsed();
    worker.join().ok();
    report_lat(a.size, a.count, elapsed);
    check(s.close(), "zmq_close");
}

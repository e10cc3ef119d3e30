//! Feeds arbitrary bytes to a ZMTP connection: it must never panic, only fail or wait for more.
//!
//! Input layout: byte 0 picks the prelude (nothing, a valid greeting, or greeting and READY) and
//! the socket type; byte 1 the read size; the rest is the peer's byte stream.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rzmq_core::zmtp::{Config, Connection, Event, SocketType};

fn greeting() -> Vec<u8> {
    let mut g = vec![0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 1];
    g.extend_from_slice(b"NULL");
    g.resize(64, 0);
    g
}

fn ready(peer: SocketType) -> Vec<u8> {
    let name = peer.name().as_bytes();
    let mut body = b"\x05READY\x0bSocket-Type".to_vec();
    body.extend_from_slice(&(name.len() as u32).to_be_bytes());
    body.extend_from_slice(name);
    let mut f = vec![0x04, body.len() as u8];
    f.extend_from_slice(&body);
    f
}

fuzz_target!(|data: &[u8]| {
    let (Some(&mode), Some(&chunk)) = (data.first(), data.get(1)) else {
        return;
    };
    let (ours, peer) = [
        (SocketType::Pull, SocketType::Push),
        (SocketType::Router, SocketType::Dealer),
        (SocketType::XPub, SocketType::Sub),
        (SocketType::Sub, SocketType::Pub),
    ][usize::from(mode >> 2) % 4];
    let mut input = match mode & 3 {
        0 => Vec::new(),
        1 => greeting(),
        _ => [greeting(), ready(peer)].concat(),
    };
    input.extend_from_slice(&data[2..]);
    let now = Instant::now();
    let mut cfg = Config::new(ours);
    cfg.maxmsgsize = if mode & 0x80 != 0 { 1000 } else { -1 };
    cfg.heartbeat_ivl = Some(Duration::from_millis(100));
    let mut c = Connection::new(cfg, now);
    let chunk = usize::from(chunk).max(1);
    let mut rest = &input[..];
    while !rest.is_empty() {
        let buf = c.recv_buffer();
        assert!(!buf.is_empty());
        let n = buf.len().min(chunk).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        if c.received(n, now).is_err() {
            break;
        }
        loop {
            match c.poll_event() {
                Ok(Some(Event::Message(m))) => {
                    let _ = c.send(m);
                }
                Ok(Some(Event::Ready(_))) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert!(
            c.recv_allocated() < 64 << 20,
            "receive buffers grew unboundedly"
        );
    }
    let _ = c.handle_timeout(now + Duration::from_secs(1));
    let mut sink = Vec::new();
    let _ = c.write_to(&mut sink);
});

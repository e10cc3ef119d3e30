//! Encodes arbitrary frames on one connection and decodes them on another with arbitrary read
//! sizes: what arrives must be exactly what was sent.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use rzmq_core::msg::Msg;
use rzmq_core::zmtp::{Config, Connection, Event, SocketType};

fn pump(src: &mut Connection, dst: &mut Connection, read: usize, now: Instant) -> Vec<Msg> {
    let mut wire = Vec::new();
    src.write_to(&mut wire).expect("Vec never fails");
    let mut got = Vec::new();
    let mut rest = &wire[..];
    loop {
        while let Some(ev) = dst.poll_event().expect("valid stream") {
            if let Event::Message(m) = ev {
                got.push(m);
            }
        }
        if rest.is_empty() {
            return got;
        }
        let buf = dst.recv_buffer();
        let n = buf.len().min(read).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        dst.received(n, now).expect("not failed");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&read, mut data)) = data.split_first() else {
        return;
    };
    let read = usize::from(read).max(1) * 97;
    let now = Instant::now();
    let mut a = Connection::new(Config::new(SocketType::Dealer), now);
    let mut b = Connection::new(Config::new(SocketType::Router), now);
    for _ in 0..2 {
        pump(&mut a, &mut b, read, now);
        pump(&mut b, &mut a, read, now);
    }
    assert!(a.is_ready() && b.is_ready());
    // Frames: a length byte (scaled for some large frames), a flags byte, then the body.
    let mut sent = Vec::new();
    while let [len, flags, rest @ ..] = data {
        let raw = usize::from(*len);
        let size = raw * if flags & 0x80 != 0 { 301 } else { 1 };
        let body: Vec<u8> = rest.iter().copied().cycle().take(size).collect();
        data = rest.get(raw.min(rest.len())..).unwrap_or(&[]);
        let mut m = Msg::from_vec(body);
        if flags & 2 != 0 {
            a.send_subscribe(m.data(), flags & 1 != 0).expect("ready");
            let mut s = vec![flags & 1];
            s.extend_from_slice(m.data());
            m = Msg::from_vec(s);
        } else {
            m.set_more(flags & 1 != 0);
            a.send(m.clone()).expect("ready");
        }
        sent.push(m);
    }
    let got = pump(&mut a, &mut b, read, now);
    assert_eq!(got, sent);
});

//! Connection-level tests: two sessions back to back, scripted peers, adversarial input.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::connection::DEFAULT_HANDSHAKE_IVL;
use super::error::FailureReason;
use super::frame::{FLAG_COMMAND, FLAG_LONG, FLAG_MORE};
use super::*;
use crate::msg::Msg;

fn cfg(t: SocketType) -> Config {
    Config::new(t)
}

fn out(c: &mut Connection) -> Vec<u8> {
    let mut v = Vec::new();
    c.write_to(&mut v).unwrap();
    assert!(!c.has_output());
    v
}

fn frame(flags: u8, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    if body.len() > 255 {
        f.push(flags | FLAG_LONG);
        f.extend_from_slice(&(body.len() as u64).to_be_bytes());
    } else {
        f.extend_from_slice(&[flags, body.len() as u8]);
    }
    f.extend_from_slice(body);
    f
}

fn greeting_bytes(mechanism: &[u8], major: u8, minor: u8) -> Vec<u8> {
    // Bytes 1..9: routing-id length + 1, big-endian (libzmq; 1 for an empty id).
    let mut g = vec![0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, major, minor];
    g.extend_from_slice(mechanism);
    g.resize(64, 0);
    g
}

fn ready_frame(props: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = b"\x05READY".to_vec();
    for (n, v) in props {
        b.push(n.len() as u8);
        b.extend_from_slice(n.as_bytes());
        b.extend_from_slice(&(v.len() as u32).to_be_bytes());
        b.extend_from_slice(v);
    }
    frame(FLAG_COMMAND, &b)
}

/// What a libzmq peer of type `t` speaking ZMTP 3.`minor` sends first: greeting and READY.
fn scripted_peer(t: SocketType, minor: u8) -> Vec<u8> {
    let mut s = greeting_bytes(b"NULL", 3, minor);
    s.extend(ready_frame(&[("Socket-Type", t.name().as_bytes())]));
    s
}

/// A connection of type `ours` made ready by a scripted peer of type `peer`; its output drained.
fn ready_with_script(c: Config, peer: SocketType, minor: u8, now: Instant) -> Connection {
    let mut conn = Connection::new(c, now);
    let ev = conn.handle_input(&scripted_peer(peer, minor), now).unwrap();
    assert!(matches!(ev.as_slice(), [Event::Ready(_)]), "{ev:?}");
    out(&mut conn);
    conn
}

/// Moves bytes both ways until neither side has output, feeding at most `chunk` bytes at a time.
fn pump(
    a: &mut Connection,
    b: &mut Connection,
    chunk: usize,
    now: Instant,
) -> Result<(Vec<Event>, Vec<Event>), ZmtpError> {
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    while a.has_output() || b.has_output() {
        transfer(a, b, chunk, now, &mut eb)?;
        transfer(b, a, chunk, now, &mut ea)?;
    }
    Ok((ea, eb))
}

fn transfer(
    src: &mut Connection,
    dst: &mut Connection,
    chunk: usize,
    now: Instant,
    evs: &mut Vec<Event>,
) -> Result<(), ZmtpError> {
    let bytes = out(src);
    for piece in bytes.chunks(chunk) {
        evs.extend(dst.handle_input(piece, now)?);
    }
    Ok(())
}

fn connected(ca: Config, cb: Config, now: Instant) -> (Connection, Connection) {
    let mut a = Connection::new(ca, now);
    let mut b = Connection::new(cb, now);
    let (ea, eb) = pump(&mut a, &mut b, usize::MAX, now).unwrap();
    assert!(matches!(ea.as_slice(), [Event::Ready(_)]));
    assert!(matches!(eb.as_slice(), [Event::Ready(_)]));
    (a, b)
}

fn messages(evs: Vec<Event>) -> Vec<Msg> {
    evs.into_iter()
        .map(|e| match e {
            Event::Message(m) => m,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

fn msg(body: &[u8], more: bool) -> Msg {
    let mut m = Msg::copy_from(body);
    m.set_more(more);
    m
}

#[test]
fn connection_is_send_and_debug() {
    fn is_send<T: Send>() {}
    is_send::<Connection>();
    is_send::<Event>();
    let c = Connection::new(cfg(SocketType::Pair), Instant::now());
    assert!(format!("{c:?}").contains("greeting"));
}

#[test]
fn handshake_back_to_back_surfaces_peers() {
    let now = Instant::now();
    let mut ca = cfg(SocketType::Dealer);
    ca.routing_id = b"dealer-1".to_vec();
    ca.metadata = vec![("X-Hello".into(), b"world".to_vec())];
    let mut cb = cfg(SocketType::Router);
    cb.peer_address = Some("10.0.0.1:5555".into());
    let mut a = Connection::new(ca, now);
    let mut b = Connection::new(cb, now);
    assert!(!a.is_ready());
    let (ea, eb) = pump(&mut a, &mut b, usize::MAX, now).unwrap();
    let Event::Ready(pa) = &ea[0] else { panic!() };
    let Event::Ready(pb) = &eb[0] else { panic!() };
    assert_eq!(pa.socket_type, Some(SocketType::Router));
    assert_eq!(pa.routing_id, b"");
    assert_eq!(pb.socket_type, Some(SocketType::Dealer));
    assert_eq!(pb.routing_id, b"dealer-1");
    assert_eq!(pb.metadata.get("X-Hello"), Some(&b"world"[..]));
    assert_eq!(pb.metadata.get("Identity"), Some(&b"dealer-1"[..]));
    assert_eq!(pb.metadata.get("Peer-Address"), Some(&b"10.0.0.1:5555"[..]));
    assert_eq!((pb.major_version, pb.minor_version), (3, 1));
    assert!(a.is_ready() && b.is_ready());
    assert_eq!(b.peer(), Some(pb));
    assert_eq!(
        a.poll_timeout(),
        None,
        "no handshake timer once ready, no heartbeats"
    );
}

#[test]
fn our_handshake_bytes_are_libzmq_s() {
    let now = Instant::now();
    let mut c = Connection::new(cfg(SocketType::Req), now);
    // As libzmq: the 10-byte signature first, the rest once the peer's signature arrived.
    let g = greeting_bytes(b"NULL", 3, 1);
    assert_eq!(out(&mut c), &g[..10]);
    c.handle_input(&g[..10], now).unwrap();
    assert_eq!(out(&mut c), &g[10..]);
    c.handle_input(&g[10..], now).unwrap();
    let want = ready_frame(&[("Socket-Type", b"REQ"), ("Identity", b"")]);
    assert_eq!(out(&mut c), want);
}

#[test]
fn handshake_any_split() {
    let now = Instant::now();
    let mut script = scripted_peer(SocketType::Pull, 1);
    script.extend(frame(0, b"first"));
    script.extend(frame(FLAG_COMMAND, b"\x04PING\x00\x00ab"));
    script.extend(frame(FLAG_MORE, &[5u8; 300]));
    script.extend(frame(0, b""));
    let check = |pieces: &[&[u8]]| {
        let mut c = Connection::new(cfg(SocketType::Push), now);
        let mut evs = Vec::new();
        for p in pieces {
            evs.extend(c.handle_input(p, now).unwrap());
        }
        assert_eq!(evs.len(), 4, "{evs:?}");
        assert!(matches!(evs[0], Event::Ready(_)));
        let ms = messages(evs.into_iter().skip(1).collect());
        assert_eq!(
            ms,
            vec![
                msg(b"first", false),
                msg(&[5u8; 300], true),
                msg(b"", false)
            ]
        );
        let mut want = greeting_bytes(b"NULL", 3, 1);
        want.extend(ready_frame(&[("Socket-Type", b"PUSH")]));
        want.extend(frame(FLAG_COMMAND, b"\x04PONGab"));
        assert_eq!(out(&mut c), want);
    };
    for k in 0..=script.len() {
        check(&[&script[..k], &script[k..]]);
    }
    let bytes: Vec<&[u8]> = script.chunks(1).collect();
    check(&bytes);
}

#[test]
fn back_to_back_one_byte_at_a_time() {
    let now = Instant::now();
    let mut a = Connection::new(cfg(SocketType::Pair), now);
    let mut b = Connection::new(cfg(SocketType::Pair), now);
    let (ea, eb) = pump(&mut a, &mut b, 1, now).unwrap();
    assert_eq!((ea.len(), eb.len()), (1, 1));
    a.send(msg(b"x", true)).unwrap();
    a.send(msg(&[1; 1000], false)).unwrap();
    let (_, eb) = pump(&mut a, &mut b, 1, now).unwrap();
    assert_eq!(messages(eb), vec![msg(b"x", true), msg(&[1; 1000], false)]);
}

#[test]
fn exchanges_frames_with_flags_and_metadata() {
    let now = Instant::now();
    let mut ca = cfg(SocketType::Dealer);
    ca.metadata = vec![("X-App".into(), b"a".to_vec())];
    let (mut a, mut b) = connected(ca, cfg(SocketType::Dealer), now);
    let sent = vec![
        msg(b"", false),
        msg(b"short", true),
        msg(&[7; 255], true),
        msg(&[8; 256], true),
        msg(&[9; 70_000], false),
        msg(&[1; 41], false),
    ];
    for m in &sent {
        a.send(m.clone()).unwrap();
    }
    let mut cmd = Msg::copy_from(b"\x07UNKNOWN");
    cmd.set_command(true);
    a.send(cmd).unwrap();
    let (_, eb) = pump(&mut a, &mut b, 4096, now).unwrap();
    let got = messages(eb);
    assert_eq!(got, sent);
    for m in &got {
        assert_eq!(m.property("X-App"), Some(&b"a"[..]));
        assert_eq!(m.property("Socket-Type"), Some(&b"DEALER"[..]));
    }
}

#[test]
fn sixteen_mib_frames_both_ways() {
    let now = Instant::now();
    let (mut a, mut b) = connected(cfg(SocketType::Pair), cfg(SocketType::Pair), now);
    let big: Vec<u8> = (0..16 * 1024 * 1024u32).map(|i| (i >> 3) as u8).collect();
    a.send(Msg::from_vec(big.clone())).unwrap();
    a.send(msg(b"after", false)).unwrap();
    b.send(Msg::from_vec(big.clone())).unwrap();
    assert!(a.pending_output_bytes() > 16 * 1024 * 1024);
    // Read the way an engine does: straight into recv_buffer, as much as it offers.
    for a_to_b in [true, false] {
        let (src, dst) = if a_to_b {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let wire = out(src);
        let mut pos = 0;
        let mut got = Vec::new();
        while pos < wire.len() {
            let buf = dst.recv_buffer();
            let n = buf.len().min(wire.len() - pos).min(3 << 20);
            buf[..n].copy_from_slice(&wire[pos..pos + n]);
            pos += n;
            dst.received(n, now).unwrap();
            while let Some(Event::Message(m)) = dst.poll_event().unwrap() {
                got.push(m);
            }
        }
        assert!(got[0].data() == &big[..]);
        assert!(got.len() == 1 || got[1].data() == b"after");
    }
}

#[test]
fn bad_greetings() {
    let now = Instant::now();
    let c = || Connection::new(cfg(SocketType::Pair), now);
    assert_eq!(
        c().handle_input(b"\x01\x00", now).unwrap_err(),
        ZmtpError::BadSignature
    );
    // ZMTP 1.0 identity frame with a long length: 0xFF then a flags byte without bit 0.
    let mut v1 = vec![0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x00];
    assert_eq!(
        c().handle_input(&v1, now).unwrap_err(),
        ZmtpError::BadSignature
    );
    v1[9] = 0x7F;
    v1.push(1); // ZMTP 2.0 revision
    assert_eq!(
        c().handle_input(&v1, now).unwrap_err(),
        ZmtpError::UnsupportedVersion { major: 1 }
    );
    let unknown = c()
        .handle_input(&greeting_bytes(b"FOO", 3, 1), now)
        .unwrap_err();
    assert!(
        matches!(unknown, ZmtpError::MechanismMismatch { ours: Mechanism::Null, peer } if &peer[..4] == b"FOO\0")
    );
    assert_eq!(unknown.protocol_code(), Some(0x1100_0002));
    let plain = c()
        .handle_input(&greeting_bytes(b"PLAIN", 3, 1), now)
        .unwrap_err();
    assert!(matches!(plain, ZmtpError::MechanismMismatch { .. }));
    // Mechanism padding must be NULs, as libzmq compares all 20 bytes.
    let mut g = greeting_bytes(b"NULL", 3, 1);
    g[31] = b'x';
    assert!(matches!(
        c().handle_input(&g, now),
        Err(ZmtpError::MechanismMismatch { .. })
    ));
}

#[test]
fn failure_is_sticky() {
    let now = Instant::now();
    let mut c = Connection::new(cfg(SocketType::Pair), now);
    assert!(c.handle_input(b"\x00", now).is_err());
    assert_eq!(c.poll_event().unwrap_err(), ZmtpError::BadSignature);
    assert_eq!(c.received(0, now).unwrap_err(), ZmtpError::BadSignature);
    assert_eq!(c.handle_timeout(now).unwrap_err(), ZmtpError::BadSignature);
    assert_eq!(c.send(Msg::new()).unwrap_err(), ZmtpError::BadSignature);
    assert_eq!(c.error(), Some(&ZmtpError::BadSignature));
    assert!(!c.is_ready());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn incompatible_socket_types_send_error() {
    let now = Instant::now();
    let mut a = Connection::new(cfg(SocketType::Push), now);
    let mut b = Connection::new(cfg(SocketType::Push), now);
    let err = pump(&mut a, &mut b, usize::MAX, now).unwrap_err();
    assert_eq!(
        err,
        ZmtpError::IncompatibleSocketType {
            ours: SocketType::Push,
            peer: b"PUSH".to_vec()
        }
    );
    assert_eq!(err.protocol_code(), None);
    let failed = if a.error().is_some() { &mut a } else { &mut b };
    let bytes = out(failed);
    assert!(
        bytes.ends_with(&frame(FLAG_COMMAND, b"\x05ERROR\x13Invalid socket type")),
        "{bytes:?}"
    );
    // A scripted peer's ERROR fails us with its reason.
    let mut c = Connection::new(cfg(SocketType::Pull), now);
    let mut s = greeting_bytes(b"NULL", 3, 1);
    s.extend(frame(FLAG_COMMAND, b"\x05ERROR\x03400"));
    let e = c.handle_input(&s, now).unwrap_err();
    assert_eq!(
        e,
        ZmtpError::PeerError {
            reason: b"400".to_vec()
        }
    );
    assert_eq!(e.auth_status(), Some(400));
}

#[test]
fn handshake_rejects_unexpected_frames() {
    let now = Instant::now();
    for bad in [
        frame(0, b"\x05READY"),
        frame(FLAG_COMMAND, b"\x04PING\x00\x00"),
        frame(FLAG_COMMAND, b""),
    ] {
        let mut c = Connection::new(cfg(SocketType::Pull), now);
        let mut s = greeting_bytes(b"NULL", 3, 1);
        s.extend(bad);
        let e = c.handle_input(&s, now).unwrap_err();
        assert_eq!(e, ZmtpError::UnexpectedCommand);
        assert_eq!(e.protocol_code(), Some(0x1000_0001));
    }
    let mut c = Connection::new(cfg(SocketType::Pull), now);
    let mut s = greeting_bytes(b"NULL", 3, 1);
    s.extend(frame(FLAG_COMMAND, b"\x05READY\x01"));
    assert_eq!(
        c.handle_input(&s, now).unwrap_err(),
        ZmtpError::MalformedReady
    );
}

#[test]
fn send_before_ready_is_refused() {
    let now = Instant::now();
    let mut c = Connection::new(cfg(SocketType::Pair), now);
    assert_eq!(c.send(msg(b"x", false)), Err(ZmtpError::NotReady));
    assert_eq!(c.send_subscribe(b"x", true), Err(ZmtpError::NotReady));
    assert_eq!(
        c.pending_output_bytes(),
        10,
        "only the signature before the peer's"
    );
}

#[test]
fn reserved_flags_and_sizes_after_handshake() {
    let now = Instant::now();
    for (bytes, want) in [
        (vec![0x08u8, 0], ZmtpError::ReservedFlags(0x08)),
        (vec![0x81, 0], ZmtpError::ReservedFlags(0x81)),
        (
            vec![FLAG_LONG, 0x80, 0, 0, 0, 0, 0, 0, 1],
            ZmtpError::InvalidFrameSize((1 << 63) + 1),
        ),
    ] {
        let mut c = ready_with_script(cfg(SocketType::Push), SocketType::Pull, 1, now);
        assert_eq!(c.handle_input(&bytes, now).unwrap_err(), want);
        assert_eq!(want.protocol_code(), None);
    }
}

#[test]
fn maxmsgsize_enforced() {
    let now = Instant::now();
    let mut c = cfg(SocketType::Pull);
    c.maxmsgsize = 100;
    let mut conn = ready_with_script(c.clone(), SocketType::Push, 1, now);
    let ev = conn.handle_input(&frame(0, &[0; 100]), now).unwrap();
    assert_eq!(messages(ev)[0].len(), 100);
    let e = conn.handle_input(&frame(0, &[0; 101]), now).unwrap_err();
    assert_eq!(
        e,
        ZmtpError::FrameTooLarge {
            size: 101,
            max: 100
        }
    );
    assert_eq!(e.errno(), libc::EMSGSIZE);
    // Applies during the handshake too (a huge READY).
    let mut conn = Connection::new(c, now);
    let mut s = greeting_bytes(b"NULL", 3, 1);
    s.extend(ready_frame(&[
        ("Socket-Type", b"PUSH"),
        ("X-Big", &[0; 200]),
    ]));
    assert!(matches!(
        conn.handle_input(&s, now),
        Err(ZmtpError::FrameTooLarge { .. })
    ));
}

#[test]
fn lying_long_frames_allocate_nothing_big() {
    let now = Instant::now();
    for claim in [(1u64 << 63) - 1, 1 << 62] {
        let mut c = ready_with_script(cfg(SocketType::Pull), SocketType::Push, 1, now);
        let mut hdr = vec![FLAG_LONG];
        hdr.extend_from_slice(&claim.to_be_bytes());
        hdr.extend_from_slice(&[1; 1000]);
        assert!(c.handle_input(&hdr, now).unwrap().is_empty());
        let limit = record::DIRECT_EAGER + record::BATCH_SIZE;
        assert!(c.recv_allocated() <= limit, "{}", c.recv_allocated());
        assert!(c.recv_buffer().len() <= record::DIRECT_EAGER);
        // Feeding more grows the buffer only along with the data.
        let mut fed = 1000;
        for _ in 0..3 {
            let n = c.recv_buffer().len();
            fed += n;
            c.received(n, now).unwrap();
            assert!(c.poll_event().unwrap().is_none());
            assert!(c.recv_allocated() <= 2 * fed + limit);
        }
    }
}

#[test]
fn ready_with_arbitrary_properties() {
    let now = Instant::now();
    let mut c = Connection::new(cfg(SocketType::Sub), now);
    let mut s = greeting_bytes(b"NULL", 3, 1);
    let long_name = "N".repeat(255);
    s.extend(ready_frame(&[
        ("Socket-Type", b"XPUB"),
        ("", b"empty name"),
        ("X-Binary", &[0, 255, 1, 0]),
        (&long_name, b""),
        ("Resource", b"/a/b"),
        ("Identity", b"\x00\x01"),
    ]));
    s.extend(frame(0, b"m"));
    let ev = c.handle_input(&s, now).unwrap();
    let Event::Ready(p) = &ev[0] else { panic!() };
    assert_eq!(p.socket_type, Some(SocketType::XPub));
    assert_eq!(p.routing_id, b"\x00\x01");
    let md = &p.metadata;
    assert_eq!(md.len(), 6);
    assert_eq!(md.get(""), Some(&b"empty name"[..]));
    assert_eq!(md.get("X-Binary"), Some(&[0u8, 255, 1, 0][..]));
    assert_eq!(md.get(&long_name), Some(&b""[..]));
    assert_eq!(md.get("resource"), Some(&b"/a/b"[..]));
    let Event::Message(m) = &ev[1] else { panic!() };
    assert_eq!(m.property("X-Binary"), Some(&[0u8, 255, 1, 0][..]));
}

#[test]
fn ping_gets_pong_with_context() {
    let now = Instant::now();
    let mut c = ready_with_script(cfg(SocketType::Pull), SocketType::Push, 1, now);
    assert!(c
        .handle_input(&frame(FLAG_COMMAND, b"\x04PING\x00\x00hello"), now)
        .unwrap()
        .is_empty());
    assert_eq!(out(&mut c), frame(FLAG_COMMAND, b"\x04PONGhello"));
    let mut ping = b"\x04PING\x00\x00".to_vec();
    ping.extend_from_slice(b"0123456789abcdefXYZ");
    c.handle_input(&frame(FLAG_COMMAND, &ping), now).unwrap();
    assert_eq!(
        out(&mut c),
        frame(FLAG_COMMAND, b"\x04PONG0123456789abcdef")
    );
    // PONG, unknown, malformed and post-handshake READY/ERROR commands are ignored.
    for cmd in [
        &b"\x04PONG"[..],
        b"\x03FOO",
        b"\x09XX",
        b"",
        b"\x04PING\x00",
        b"\x05ERROR\x01x",
    ] {
        assert!(c
            .handle_input(&frame(FLAG_COMMAND, cmd), now)
            .unwrap()
            .is_empty());
    }
    assert!(!c.has_output());
}

#[test]
fn heartbeats_ping_and_time_out() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let mut hc = cfg(SocketType::Pull);
    hc.heartbeat_ivl = Some(s);
    hc.heartbeat_ttl = Some(Duration::from_millis(2500));
    let mut c = ready_with_script(hc.clone(), SocketType::Push, 1, t0);
    assert_eq!(c.poll_timeout(), Some(t0 + s));
    c.handle_timeout(t0 + s / 2).unwrap();
    assert!(!c.has_output());
    c.handle_timeout(t0 + s).unwrap();
    assert_eq!(out(&mut c), frame(FLAG_COMMAND, b"\x04PING\x00\x19"));
    assert_eq!(c.poll_timeout(), Some(t0 + 2 * s));
    // Traffic (a PONG) cancels the timeout; the next PING re-arms it.
    c.handle_input(&frame(FLAG_COMMAND, b"\x04PONG"), t0 + s + s / 2)
        .unwrap();
    c.handle_timeout(t0 + 2 * s).unwrap();
    assert_eq!(out(&mut c).len(), 9);
    // No traffic now: the timeout (default: the interval) fires at the next PING time.
    c.handle_timeout(t0 + 3 * s).unwrap_err();
    assert_eq!(c.error(), Some(&ZmtpError::HeartbeatTimeout));
    assert_eq!(ZmtpError::HeartbeatTimeout.reason(), FailureReason::Timeout);

    // An explicit timeout shorter than the interval.
    hc.heartbeat_timeout = Some(Duration::from_millis(300));
    let mut c = ready_with_script(hc.clone(), SocketType::Push, 1, t0);
    c.handle_timeout(t0 + s).unwrap();
    assert_eq!(c.poll_timeout(), Some(t0 + s + Duration::from_millis(300)));
    assert_eq!(
        c.handle_timeout(t0 + s + Duration::from_millis(300)),
        Err(ZmtpError::HeartbeatTimeout)
    );

    // Zero timeout: never.
    hc.heartbeat_timeout = Some(Duration::ZERO);
    let mut c = ready_with_script(hc, SocketType::Push, 1, t0);
    for i in 1..5 {
        c.handle_timeout(t0 + i * s).unwrap();
    }
}

#[test]
fn peer_ttl_expires() {
    let t0 = Instant::now();
    let mut c = ready_with_script(cfg(SocketType::Pull), SocketType::Push, 1, t0);
    c.handle_input(&frame(FLAG_COMMAND, b"\x04PING\x00\x0a"), t0)
        .unwrap();
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(1)));
    c.handle_timeout(t0 + Duration::from_millis(999)).unwrap();
    // Any byte cancels it, even half a frame.
    c.handle_input(&[0], t0 + Duration::from_millis(999))
        .unwrap();
    assert_eq!(c.poll_timeout(), None);
    c.handle_input(&[1, b'x'], t0 + Duration::from_millis(1500))
        .unwrap();
    c.handle_input(
        &frame(FLAG_COMMAND, b"\x04PING\x00\x0a"),
        t0 + Duration::from_secs(2),
    )
    .unwrap();
    assert_eq!(
        c.handle_timeout(t0 + Duration::from_secs(3)),
        Err(ZmtpError::HeartbeatTtlExpired)
    );
    // A PING followed by more bytes in the same read does not arm it.
    let mut c = ready_with_script(cfg(SocketType::Pull), SocketType::Push, 1, t0);
    let mut s = frame(FLAG_COMMAND, b"\x04PING\x00\x0a");
    s.extend(frame(0, b"m"));
    c.handle_input(&s, t0).unwrap();
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn handshake_times_out() {
    let t0 = Instant::now();
    let mut hc = cfg(SocketType::Pair);
    hc.handshake_ivl = Some(Duration::from_millis(100));
    let mut c = Connection::new(hc.clone(), t0);
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_millis(100)));
    c.handle_input(&greeting_bytes(b"NULL", 3, 1), t0).unwrap();
    c.handle_timeout(t0 + Duration::from_millis(99)).unwrap();
    let e = c
        .handle_timeout(t0 + Duration::from_millis(100))
        .unwrap_err();
    assert_eq!(e, ZmtpError::HandshakeTimeout);
    assert_eq!(
        (e.protocol_code(), e.reason()),
        (None, FailureReason::Timeout)
    );
    // Default: libzmq's 30 s. None: no timer.
    assert_eq!(
        Connection::new(cfg(SocketType::Pair), t0).poll_timeout(),
        Some(t0 + DEFAULT_HANDSHAKE_IVL)
    );
    hc.handshake_ivl = None;
    assert_eq!(Connection::new(hc, t0).poll_timeout(), None);
}

#[test]
fn subscriptions_by_peer_version() {
    let now = Instant::now();
    let mut v31 = ready_with_script(cfg(SocketType::Sub), SocketType::Pub, 1, now);
    v31.send_subscribe(b"topic", true).unwrap();
    v31.send_subscribe(b"", false).unwrap();
    let mut want = frame(FLAG_COMMAND, b"\x09SUBSCRIBEtopic");
    want.extend(frame(FLAG_COMMAND, b"\x06CANCEL"));
    assert_eq!(out(&mut v31), want);

    let mut v30 = ready_with_script(cfg(SocketType::XSub), SocketType::XPub, 0, now);
    assert!(v30.peer().unwrap().is_zmtp_3_0());
    v30.send_subscribe(b"topic", true).unwrap();
    v30.send_subscribe(b"t", false).unwrap();
    let mut want = frame(0, b"\x01topic");
    want.extend(frame(0, b"\x00t"));
    assert_eq!(out(&mut v30), want);

    // Newer versions are treated as 3.1.
    let mut v40 = Connection::new(cfg(SocketType::Sub), now);
    let mut s = greeting_bytes(b"NULL", 4, 0);
    s.extend(ready_frame(&[("Socket-Type", b"PUB")]));
    v40.handle_input(&s, now).unwrap();
    out(&mut v40);
    v40.send_subscribe(b"a", true).unwrap();
    assert_eq!(out(&mut v40), frame(FLAG_COMMAND, b"\x09SUBSCRIBEa"));
}

#[test]
fn subscriptions_surface_uniformly() {
    let now = Instant::now();
    let mut c = ready_with_script(cfg(SocketType::XPub), SocketType::Sub, 1, now);
    let mut s = frame(FLAG_COMMAND, b"\x09SUBSCRIBEnews");
    s.extend(frame(FLAG_COMMAND, b"\x06CANCELnews"));
    s.extend(frame(0, b"\x01old-form"));
    s.extend(frame(FLAG_COMMAND, b"\x09SUBSCRIBE"));
    let got = messages(c.handle_input(&s, now).unwrap());
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.data()).collect();
    assert_eq!(
        bodies,
        vec![&b"\x01news"[..], b"\x00news", b"\x01old-form", b"\x01"]
    );
    assert!(got
        .iter()
        .all(|m| !m.more() && m.property("Socket-Type") == Some(&b"SUB"[..])));
    // Back to back: a SUB's subscription reaches an XPUB as 0x01 + topic.
    let (mut sub, mut xpub) = connected(cfg(SocketType::Sub), cfg(SocketType::XPub), now);
    sub.send_subscribe(b"abc", true).unwrap();
    let (_, ev) = pump(&mut sub, &mut xpub, usize::MAX, now).unwrap();
    assert_eq!(messages(ev)[0].data(), b"\x01abc");
}

/// A writer taking a scripted number of bytes per call (0 in the script: would block).
struct Scripted<'a> {
    out: Vec<u8>,
    script: &'a [usize],
    i: usize,
}

impl Write for Scripted<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(b)])
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let take = self.script[self.i % self.script.len()];
        self.i += 1;
        if take == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut left = take;
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(left);
            self.out.extend_from_slice(&b[..k]);
            left -= k;
            n += k;
            if left == 0 {
                break;
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..64),
        3 => proptest::collection::vec(any::<u8>(), 64..600),
        1 => (8_000usize..80_000).prop_map(|n| (0..n).map(|i| (i * 7 + n) as u8).collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_random_frames_and_chunking(
        frames in proptest::collection::vec((any::<bool>(), any::<bool>(), body_strategy()), 0..40),
        write_script in proptest::collection::vec(0usize..5000, 1..8),
        read_sizes in proptest::collection::vec(1usize..70_000, 1..8),
    ) {
        let now = Instant::now();
        let write_script: Vec<usize> =
            if write_script.iter().all(|&w| w == 0) { vec![1] } else { write_script };
        let (mut a, mut b) = connected(cfg(SocketType::Dealer), cfg(SocketType::Router), now);
        let mut sent = Vec::new();
        for (more, sub, body) in &frames {
            if *sub {
                a.send_subscribe(body, *more).unwrap();
                let mut m = vec![u8::from(*more)];
                m.extend_from_slice(body);
                sent.push(msg(&m, false));
            } else {
                a.send(msg(body, *more)).unwrap();
                sent.push(msg(body, *more));
            }
        }
        let total = a.pending_output_bytes();
        let mut w = Scripted { out: Vec::new(), script: &write_script, i: 0 };
        let mut written = 0;
        while a.has_output() {
            written += a.write_to(&mut w).unwrap();
        }
        prop_assert_eq!(written, total);
        prop_assert_eq!(w.out.len(), total);
        let mut got = Vec::new();
        let mut pos = 0;
        let mut k = 0;
        while pos < w.out.len() {
            let buf = b.recv_buffer();
            prop_assert!(!buf.is_empty());
            let n = buf.len().min(read_sizes[k % read_sizes.len()]).min(w.out.len() - pos);
            k += 1;
            buf[..n].copy_from_slice(&w.out[pos..pos + n]);
            pos += n;
            b.received(n, now).unwrap();
            while let Some(ev) = b.poll_event().unwrap() {
                match ev {
                    Event::Message(m) => got.push(m),
                    Event::Ready(_) => prop_assert!(false, "second Ready"),
                    Event::Command(_) => prop_assert!(false, "no extension commands were sent"),
                }
            }
        }
        prop_assert_eq!(got, sent);
    }

    #[test]
    fn adversarial_bytes_never_panic(
        prefix in 0usize..3,
        junk in proptest::collection::vec(any::<u8>(), 0..2000),
        chunk in 1usize..300,
    ) {
        let now = Instant::now();
        let mut input = match prefix {
            0 => Vec::new(),
            1 => greeting_bytes(b"NULL", 3, 1),
            _ => scripted_peer(SocketType::Push, 1),
        };
        input.extend_from_slice(&junk);
        let mut c = Connection::new(cfg(SocketType::Pull), now);
        for piece in input.chunks(chunk) {
            if c.handle_input(piece, now).is_err() {
                break;
            }
        }
        let _ = c.handle_timeout(now + Duration::from_secs(60));
        let mut sink = Vec::new();
        let _ = c.write_to(&mut sink);
    }

    #[test]
    fn adversarial_frames_never_panic(
        frames in proptest::collection::vec(
            (0u8..16, proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()), 0..30),
        chunk in 1usize..500,
    ) {
        let now = Instant::now();
        let mut input = greeting_bytes(b"NULL", 3, 1);
        for (flags, body, long) in &frames {
            // Mostly valid-looking frames with random flags, bodies and header forms.
            if *long {
                input.push(*flags | FLAG_LONG);
                input.extend_from_slice(&(body.len() as u64).to_be_bytes());
            } else {
                input.push(*flags & !FLAG_LONG);
                input.push(body.len().min(255) as u8);
            }
            input.extend_from_slice(&body[..body.len().min(if *long { usize::MAX } else { 255 })]);
        }
        let mut c = Connection::new(cfg(SocketType::Router), now);
        for piece in input.chunks(chunk) {
            if c.handle_input(piece, now).is_err() {
                break;
            }
        }
    }
}

#[test]
fn extension_commands_surface_and_other_unknown_commands_are_ignored() {
    let now = Instant::now();
    let (mut a, mut b) = connected(cfg(SocketType::Pair), cfg(SocketType::Pair), now);
    a.send_command(b"RZMQ-UP-EP", b"blob").unwrap();
    a.send_command(b"FOO", b"ignored").unwrap();
    a.send(Msg::copy_from(b"after")).unwrap();
    let mut evs = Vec::new();
    transfer(&mut a, &mut b, 7, now, &mut evs).unwrap();
    assert_eq!(evs.len(), 2, "{evs:?}");
    match &evs[0] {
        Event::Command(m) => {
            let (name, data) = crate::zmtp::parse_command(m.data()).unwrap();
            assert_eq!((name, data), (&b"RZMQ-UP-EP"[..], &b"blob"[..]));
        }
        other => panic!("expected the extension command, got {other:?}"),
    }
    match &evs[1] {
        Event::Message(m) => assert_eq!(m.data(), b"after"),
        other => panic!("expected the message, got {other:?}"),
    }
}

// ----- PLAIN and ZAP --------------------------------------------------------------------------

fn plain_client(user: &[u8], pass: &[u8]) -> Config {
    let mut c = cfg(SocketType::Dealer);
    c.mechanism = Mechanism::Plain;
    c.plain = Credentials {
        username: user.to_vec(),
        password: pass.to_vec(),
    };
    c
}

fn plain_server() -> Config {
    let mut c = cfg(SocketType::Dealer);
    c.mechanism = Mechanism::Plain;
    c.as_server = true;
    c.zap_domain = b"dom".to_vec();
    c.routing_id = b"IDENT".to_vec();
    c.peer_address = Some("10.0.0.1".into());
    c
}

fn zap_reply(status: &[u8], user: &[u8], md: &[u8]) -> Vec<Msg> {
    let parts: [&[u8]; 7] = [b"", b"1.0", b"1", status, b"text", user, md];
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| msg(p, i < 6))
        .collect()
}

/// Client and server up to the server's ZAP request; returns it.
fn plain_until_zap(client: &mut Connection, server: &mut Connection, now: Instant) -> ZapRequest {
    let (ec, es) = pump(client, server, usize::MAX, now).unwrap();
    assert!(ec.is_empty() && es.is_empty());
    assert!(server.zap_pending());
    server.take_zap_request().expect("a ZAP request")
}

#[test]
fn plain_handshake_with_zap_approval() {
    let now = Instant::now();
    let mut c = Connection::new(plain_client(b"admin", b"secret"), now);
    let mut s = Connection::new(plain_server(), now);
    let req = plain_until_zap(&mut c, &mut s, now);
    assert!(s.take_zap_request().is_none(), "handed out once");
    assert_eq!(req.mechanism, "PLAIN");
    assert_eq!(req.domain, b"dom");
    assert_eq!(req.address, b"10.0.0.1");
    assert_eq!(req.routing_id, b"IDENT");
    assert_eq!(req.credentials, vec![b"admin".to_vec(), b"secret".to_vec()]);
    let md = b"\x05Hello\x00\x00\x00\x05World\x0cPeer-Address\x00\x00\x00\x01x";
    assert_eq!(s.zap_reply(&zap_reply(b"200", b"anonymous", md)), Ok(200));
    let (ec, es) = pump(&mut c, &mut s, 7, now).unwrap();
    let Some(Event::Ready(cp)) = ec.into_iter().next() else {
        panic!("client not ready")
    };
    let Some(Event::Ready(sp)) = es.into_iter().next() else {
        panic!("server not ready")
    };
    assert_eq!(cp.socket_type, Some(SocketType::Dealer));
    assert_eq!(sp.metadata.get("User-Id"), Some(&b"anonymous"[..]));
    assert_eq!(sp.metadata.get("Hello"), Some(&b"World"[..]));
    assert_eq!(sp.metadata.get("Socket-Type"), Some(&b"DEALER"[..]));
    // The connection's own address wins over the handler's.
    assert_eq!(sp.metadata.get("Peer-Address"), Some(&b"10.0.0.1"[..]));
    assert!(cp.metadata.get("User-Id").is_none());
    c.send(msg(b"hi", false)).unwrap();
    let (_, es) = pump(&mut c, &mut s, usize::MAX, now).unwrap();
    let m = messages(es);
    assert_eq!(m[0].data(), b"hi");
    assert_eq!(m[0].property("User-Id"), Some(&b"anonymous"[..]));
}

#[test]
fn plain_wire_bytes() {
    let now = Instant::now();
    let mut c = Connection::new(plain_client(b"u", b"pw"), now);
    let mut bytes = out(&mut c);
    let ev = c
        .handle_input(&greeting_bytes(b"PLAIN", 3, 1), now)
        .unwrap();
    assert!(ev.is_empty());
    bytes.extend(out(&mut c));
    assert_eq!(&bytes[12..17], b"PLAIN");
    assert_eq!(bytes[32], 0, "as-server byte stays 0, as libzmq");
    assert_eq!(
        &bytes[64..],
        &frame(FLAG_COMMAND, b"\x05HELLO\x01u\x02pw")[..]
    );
    let ev = c
        .handle_input(&frame(FLAG_COMMAND, b"\x07WELCOME"), now)
        .unwrap();
    assert!(ev.is_empty());
    let initiate = out(&mut c);
    assert_eq!(
        initiate,
        frame(
            FLAG_COMMAND,
            b"\x08INITIATE\x0bSocket-Type\x00\x00\x00\x06DEALER\x08Identity\x00\x00\x00\x00"
        )
    );
    let ev = c
        .handle_input(&ready_frame(&[("Socket-Type", b"ROUTER")]), now)
        .unwrap();
    assert!(matches!(ev.as_slice(), [Event::Ready(_)]));
}

#[test]
fn plain_refusals() {
    let now = Instant::now();
    for (status, error_sent) in [(&b"400"[..], true), (b"500", true), (b"300", false)] {
        let mut c = Connection::new(plain_client(b"bad", b"creds"), now);
        let mut s = Connection::new(plain_server(), now);
        plain_until_zap(&mut c, &mut s, now);
        let n = u16::from(status[0] - b'0') * 100;
        assert_eq!(s.zap_reply(&zap_reply(status, b"", b"")), Ok(n));
        assert!(s.is_rejected());
        assert_eq!(s.has_output(), error_sent);
        if error_sent {
            let err = c.handle_input(&out(&mut s), now).unwrap_err();
            assert_eq!(err.auth_status(), Some(u32::from(n)));
            assert!(c.is_rejected());
        }
        // Whatever the client says now is discarded; nothing comes out.
        assert!(s.handle_input(&[0xFF; 1000], now).unwrap().is_empty());
        assert!(!s.has_output() && !s.is_ready());
        // The handshake timer still ends the connection.
        assert_eq!(
            s.handle_timeout(now + DEFAULT_HANDSHAKE_IVL),
            Err(ZmtpError::HandshakeTimeout)
        );
    }
}

#[test]
fn plain_malformed_hello_and_initiate() {
    let now = Instant::now();
    let server = || {
        let mut s = Connection::new(plain_server(), now);
        s.handle_input(&greeting_bytes(b"PLAIN", 3, 1), now)
            .unwrap();
        out(&mut s);
        s
    };
    let hello_errors: [(&[u8], ZmtpError); 5] = [
        (b"\x05HELLO\x03ab", ZmtpError::MalformedHello),
        (b"\x05HELLO\x01a\x01bc", ZmtpError::MalformedHello),
        (b"\x05HELL", ZmtpError::MalformedCommand),
        (b"\x08INITIATE", ZmtpError::UnexpectedCommand),
        (b"\x05READY", ZmtpError::UnexpectedCommand),
    ];
    for (body, want) in hello_errors {
        let mut s = server();
        let err = s.handle_input(&frame(FLAG_COMMAND, body), now).unwrap_err();
        assert_eq!(err, want, "{body:?}");
        assert!(!s.zap_pending());
    }
    // A message frame instead of HELLO.
    let mut s = server();
    assert_eq!(
        s.handle_input(&frame(0, b"\x05HELLO\x00\x00"), now)
            .unwrap_err(),
        ZmtpError::UnexpectedCommand
    );
    // Oversized credentials cannot be expressed: a 255-byte user name with 300 bytes of data.
    let mut body = b"\x05HELLO\xff".to_vec();
    body.extend_from_slice(&[b'x'; 300]);
    let mut s = server();
    assert_eq!(
        s.handle_input(&frame(FLAG_COMMAND, &body), now)
            .unwrap_err(),
        ZmtpError::MalformedHello
    );
    // A command while ZAP decides.
    let mut s = server();
    s.handle_input(&frame(FLAG_COMMAND, b"\x05HELLO\x00\x00"), now)
        .unwrap();
    assert!(s.take_zap_request().is_some());
    let err = s
        .handle_input(&frame(FLAG_COMMAND, b"\x05HELLO\x00\x00"), now)
        .unwrap_err();
    assert_eq!(err, ZmtpError::OutOfSequence);
    assert_eq!(err.protocol_code(), Some(0x1000_0000));
    // INITIATE with bad metadata or of the wrong type, after approval.
    for (body, want) in [
        (&b"\x08INITIATE\x05ab"[..], ZmtpError::MalformedReady),
        (b"\x05HELLO\x00\x00", ZmtpError::UnexpectedCommand),
    ] {
        let mut s = server();
        s.handle_input(&frame(FLAG_COMMAND, b"\x05HELLO\x00\x00"), now)
            .unwrap();
        s.zap_reply(&zap_reply(b"200", b"", b"")).unwrap();
        assert_eq!(out(&mut s), frame(FLAG_COMMAND, b"\x07WELCOME"));
        let err = s.handle_input(&frame(FLAG_COMMAND, body), now).unwrap_err();
        assert_eq!(err, want);
    }
}

#[test]
fn plain_client_checks_server_commands() {
    let now = Instant::now();
    let client = || {
        let mut c = Connection::new(plain_client(b"u", b"p"), now);
        c.handle_input(&greeting_bytes(b"PLAIN", 3, 1), now)
            .unwrap();
        out(&mut c);
        c
    };
    let cases: [(&[u8], ZmtpError); 4] = [
        (b"\x07WELCOMEx", ZmtpError::MalformedWelcome),
        (b"\x05READY", ZmtpError::UnexpectedCommand),
        (b"\x05HELLO\x00\x00", ZmtpError::UnexpectedCommand),
        (b"\x05ERROR\x09abc", ZmtpError::MalformedError),
    ];
    for (body, want) in cases {
        let mut c = client();
        let err = c.handle_input(&frame(FLAG_COMMAND, body), now).unwrap_err();
        assert_eq!(err, want, "{body:?}");
        assert!(err.protocol_code().is_some());
    }
    let mut c = client();
    c.handle_input(&frame(FLAG_COMMAND, b"\x07WELCOME"), now)
        .unwrap();
    out(&mut c);
    let err = c
        .handle_input(&frame(FLAG_COMMAND, b"\x07WELCOME"), now)
        .unwrap_err();
    assert_eq!(err, ZmtpError::UnexpectedCommand);
    let mut c = client();
    c.handle_input(&frame(FLAG_COMMAND, b"\x07WELCOME"), now)
        .unwrap();
    let err = c
        .handle_input(&frame(FLAG_COMMAND, b"\x05READY\x05ab"), now)
        .unwrap_err();
    assert_eq!(err, ZmtpError::InvalidMetadata);
    assert_eq!(err.protocol_code(), Some(0x1000_0018));
}

#[test]
fn mechanism_mismatch_and_two_servers() {
    let now = Instant::now();
    let mut p = Connection::new(plain_client(b"u", b"p"), now);
    let mut n = Connection::new(cfg(SocketType::Dealer), now);
    let err = pump(&mut p, &mut n, usize::MAX, now).unwrap_err();
    assert!(matches!(err, ZmtpError::MechanismMismatch { .. }));
    // Two PLAIN clients: each gets the other's HELLO.
    let mut a = Connection::new(plain_client(b"u", b"p"), now);
    let mut b = Connection::new(plain_client(b"u", b"p"), now);
    let err = pump(&mut a, &mut b, usize::MAX, now).unwrap_err();
    assert_eq!(err, ZmtpError::UnexpectedCommand);
    // Two PLAIN servers wait for each other (libzmq: until the handshake times out).
    let mut a = Connection::new(plain_server(), now);
    let mut b = Connection::new(plain_server(), now);
    let (ea, eb) = pump(&mut a, &mut b, usize::MAX, now).unwrap();
    assert!(ea.is_empty() && eb.is_empty() && !a.is_ready() && !b.is_ready());
}

#[test]
fn null_with_zap_domain() {
    let now = Instant::now();
    let mut sc = cfg(SocketType::Dealer);
    sc.zap_domain = b"TEST".to_vec();
    // Approved: the server's READY waits for ZAP even though the client's arrived.
    let mut c = Connection::new(cfg(SocketType::Dealer), now);
    let mut s = Connection::new(sc.clone(), now);
    let (ec, es) = pump(&mut c, &mut s, usize::MAX, now).unwrap();
    assert!(ec.is_empty() && es.is_empty());
    let req = s.take_zap_request().unwrap();
    assert_eq!((req.mechanism, req.credentials.len()), ("NULL", 0));
    let md = b"\x05Hello\x00\x00\x00\x05World";
    assert_eq!(s.zap_reply(&zap_reply(b"200", b"anonymous", md)), Ok(200));
    let (ec, es) = pump(&mut c, &mut s, usize::MAX, now).unwrap();
    assert!(matches!(ec.as_slice(), [Event::Ready(_)]));
    let es: Vec<Event> = es
        .into_iter()
        .chain(s.handle_input(&[], now).unwrap())
        .collect();
    let [Event::Ready(p)] = es.as_slice() else {
        panic!("{es:?}")
    };
    assert_eq!(p.metadata.get("Hello"), Some(&b"World"[..]));
    assert_eq!(p.metadata.get("User-Id"), Some(&b"anonymous"[..]));
    // Refused with 400: ERROR reaches the client.
    let mut c = Connection::new(cfg(SocketType::Dealer), now);
    let mut s = Connection::new(sc.clone(), now);
    pump(&mut c, &mut s, usize::MAX, now).unwrap();
    s.take_zap_request().unwrap();
    assert_eq!(s.zap_reply(&zap_reply(b"400", b"", b"")), Ok(400));
    let err = pump(&mut c, &mut s, usize::MAX, now).unwrap_err();
    assert_eq!(err.auth_status(), Some(400));
    // Malformed reply: the server fails with the ZAP code.
    let mut c = Connection::new(cfg(SocketType::Dealer), now);
    let mut s = Connection::new(sc.clone(), now);
    pump(&mut c, &mut s, usize::MAX, now).unwrap();
    s.take_zap_request().unwrap();
    let mut bad = zap_reply(b"200", b"", b"");
    bad[1] = msg(b"9.9", true);
    let err = s.zap_reply(&bad).unwrap_err();
    assert_eq!(err.protocol_code(), Some(0x2000_0003));
    assert_eq!(s.poll_event().unwrap_err(), err);
    // No handler: NULL goes on, unless enforced.
    let mut c = Connection::new(cfg(SocketType::Dealer), now);
    let mut s = Connection::new(sc.clone(), now);
    pump(&mut c, &mut s, usize::MAX, now).unwrap();
    s.take_zap_request().unwrap();
    s.zap_unavailable().unwrap();
    let (ec, es) = pump(&mut c, &mut s, usize::MAX, now).unwrap();
    assert!(matches!(ec.as_slice(), [Event::Ready(_)]));
    let es: Vec<Event> = es
        .into_iter()
        .chain(s.handle_input(&[], now).unwrap())
        .collect();
    let [Event::Ready(p)] = es.as_slice() else {
        panic!("{es:?}")
    };
    assert!(p.metadata.get("User-Id").is_none());
    sc.zap_enforce_domain = true;
    let mut c = Connection::new(cfg(SocketType::Dealer), now);
    let mut s = Connection::new(sc, now);
    pump(&mut c, &mut s, usize::MAX, now).unwrap();
    s.take_zap_request().unwrap();
    assert_eq!(s.zap_unavailable(), Err(ZmtpError::ZapUnavailable));
    assert_eq!(ZmtpError::ZapUnavailable.no_detail_errno(), libc::EFAULT);
    // PLAIN servers never go on without a handler.
    let mut c = Connection::new(plain_client(b"u", b"p"), now);
    let mut s = Connection::new(plain_server(), now);
    plain_until_zap(&mut c, &mut s, now);
    assert_eq!(s.zap_unavailable(), Err(ZmtpError::ZapUnavailable));
}

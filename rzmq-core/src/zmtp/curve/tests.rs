//! Tests of the CURVE mechanism: the handshake, the message boxing, and connections over it.

use super::keys::{nonce, precompute};
use super::wire::*;
use super::*;
use crate::msg::Msg;
use crate::z85;
use crate::zmtp::cipher::{Open, Seal};
use crate::zmtp::error::{
    PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC, PROTOCOL_ERROR_ZMTP_INVALID_METADATA,
    PROTOCOL_ERROR_ZMTP_UNSPECIFIED,
};
use crate::zmtp::frame::{FLAG_COMMAND, FLAG_MORE};
use crate::zmtp::{Config, Connection, Event, Mechanism, SocketType};

/// The record layer with CURVE, as connections use it.
type Decoder = crate::zmtp::record::Decoder<Opener>;
use std::time::Instant;

struct Pair {
    server_secret: [u8; 32],
    client: CurveKeys,
}

fn keys() -> Pair {
    let (sp, ss) = z85::generate_keypair().unwrap();
    let (cp, cs) = z85::generate_keypair().unwrap();
    Pair {
        server_secret: *ss,
        client: CurveKeys {
            public_key: cp,
            secret_key: *cs,
            server_key: sp,
        },
    }
}

fn server_keys(p: &Pair) -> CurveKeys {
    CurveKeys {
        secret_key: p.server_secret,
        ..CurveKeys::default()
    }
}

const CPROPS: &[u8] = b"\x0bSocket-Type\x00\x00\x00\x06DEALER";
const SPROPS: &[u8] = b"\x0bSocket-Type\x00\x00\x00\x06ROUTER";

/// Runs a handshake; returns (client codec, server codec) or the first error.
fn handshake(p: &Pair) -> (Codec, Codec) {
    let (mut c, hello) = Handshake::new(&p.client, false, CPROPS.to_vec()).unwrap();
    let hello = hello.unwrap();
    assert_eq!(hello.len(), HELLO_LEN);
    assert_eq!(&hello[..8], b"\x05HELLO\x01\x00");
    assert_eq!(u64_at(&hello, 112), 1);
    let (mut s, none) = Handshake::new(&server_keys(p), true, SPROPS.to_vec()).unwrap();
    assert!(none.is_none());
    let Ok(Step::Send(welcome)) = s.on_command(&hello) else {
        panic!("no WELCOME")
    };
    assert_eq!(welcome.len(), WELCOME_LEN);
    let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
        panic!("no INITIATE")
    };
    assert_eq!(initiate.len(), INITIATE_MIN + CPROPS.len());
    assert_eq!(u64_at(&initiate, 105), 2);
    let Ok(Step::Initiated {
        client_key,
        properties,
    }) = s.on_command(&initiate)
    else {
        panic!("INITIATE refused")
    };
    assert_eq!(client_key, p.client.public_key);
    assert_eq!(&properties[..], CPROPS);
    assert!(matches!(
        s.on_command(&initiate),
        Err(ZmtpError::Curve(CurveError::OutOfSequence))
    ));
    let (ready, scodec) = s.accept().unwrap();
    assert_eq!(ready.len(), READY_MIN + SPROPS.len());
    let Ok(Step::Ready { properties, codec }) = c.on_command(&ready) else {
        panic!("READY refused")
    };
    assert_eq!(&properties[..], SPROPS);
    (codec, scodec)
}

/// The first frame in `wire`: its flags and body.
fn first_frame(mut wire: &[u8]) -> (u8, Msg) {
    let mut d = Decoder::new(-1);
    while !wire.is_empty() {
        let b = d.recv_buffer();
        let n = b.len().min(wire.len());
        b[..n].copy_from_slice(&wire[..n]);
        d.received(n);
        wire = &wire[n..];
    }
    d.next_frame().unwrap().unwrap()
}

fn frame_body(wire: &[u8]) -> Msg {
    let (flags, m) = first_frame(wire);
    assert_eq!(flags, 0, "MESSAGE goes in a frame with no flags, as libzmq");
    m
}

fn seal(s: &mut Sealer, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    s.seal_frame(&mut out, flags, &[body]);
    out
}

#[test]
fn round_trip() {
    let p = keys();
    let (mut c, mut s) = handshake(&p);
    for (flags, body) in [
        (FLAG_MORE, b"hello".to_vec()),
        (0, Vec::new()),
        (FLAG_COMMAND, b"\x04PING\x00\x00".to_vec()),
        (0, vec![7u8; 300]),
        (FLAG_MORE, (0..100_000u32).map(|i| i as u8).collect()),
    ] {
        let wire = seal(&mut c.sealer, flags, &body);
        assert_eq!(&frame_body(&wire).data()[..8], MESSAGE);
        let (f, m) = s.opener.open(frame_body(&wire)).unwrap();
        assert_eq!((f, m.data()), (flags, &body[..]));
        let wire = seal(&mut s.sealer, flags, &body);
        let (f, m) = c.opener.open(frame_body(&wire)).unwrap();
        assert_eq!((f, m.data()), (flags, &body[..]));
    }
    // Client messages count on from INITIATE (2), server messages from READY (1).
    let wire = seal(&mut c.sealer, 0, b"x");
    assert_eq!(u64_at(frame_body(&wire).data(), 8), 8);
    let wire = seal(&mut s.sealer, 0, b"x");
    assert_eq!(u64_at(frame_body(&wire).data(), 8), 7);
}

#[test]
fn shared_frames_are_copied_not_modified() {
    let p = keys();
    let (mut c, mut s) = handshake(&p);
    let wire = seal(&mut c.sealer, 0, &[5u8; 1000]);
    let m = frame_body(&wire);
    let keep = m.clone();
    let (_, out) = s.opener.open(m).unwrap();
    assert_eq!(out.data(), &[5u8; 1000][..]);
    assert_eq!(&keep.data()[..8], MESSAGE, "the shared input stays intact");
}

#[test]
fn tampering_rejected() {
    let p = keys();
    let (mut c, mut s) = handshake(&p);
    let wire = seal(&mut c.sealer, 0, b"secret");
    for i in [2 + 16, 2 + 20, wire.len() - 1] {
        let mut w = wire.clone();
        w[i] ^= 1;
        assert_eq!(
            s.opener.open(frame_body(&w)).unwrap_err(),
            ZmtpError::Curve(CurveError::Cryptographic)
        );
    }
    // Reflecting the client's own message back to it fails (other nonce prefix).
    let wire = seal(&mut c.sealer, 0, b"again");
    assert_eq!(
        c.opener.open(frame_body(&wire)).unwrap_err(),
        ZmtpError::Curve(CurveError::Cryptographic)
    );
}

#[test]
fn nonce_replay_rejected() {
    let p = keys();
    let (mut c, mut s) = handshake(&p);
    let first = seal(&mut c.sealer, 0, b"one");
    let second = seal(&mut c.sealer, 0, b"two");
    s.opener.open(frame_body(&second)).unwrap();
    for w in [&second, &first] {
        assert_eq!(
            s.opener.open(frame_body(w)).unwrap_err(),
            ZmtpError::Curve(CurveError::InvalidSequence)
        );
    }
}

#[test]
fn malformed_messages() {
    let p = keys();
    let (_, mut s) = handshake(&p);
    let cases: [(&[u8], CurveError); 4] = [
        (b"\x07MESS", CurveError::MalformedCommand),
        (b"\x04PING\x00\x00", CurveError::UnexpectedCommand),
        (
            b"\x07MESSAGE\x00\x00\x00\x00\x00\x00\x00\x09tag",
            CurveError::MalformedMessage,
        ),
        (&[0u8], CurveError::MalformedCommand),
    ];
    for (body, want) in cases {
        assert_eq!(
            s.opener.open(Msg::copy_from(body)).unwrap_err(),
            ZmtpError::Curve(want)
        );
    }
}

#[test]
fn wrong_server_key_rejected() {
    let p = keys();
    let mut bad = p.client.clone();
    bad.server_key = z85::generate_keypair().unwrap().0;
    let (_, hello) = Handshake::new(&bad, false, Vec::new()).unwrap();
    let (mut s, _) = Handshake::new(&server_keys(&p), true, Vec::new()).unwrap();
    assert!(matches!(
        s.on_command(&hello.unwrap()),
        Err(ZmtpError::Curve(CurveError::Cryptographic))
    ));
    // A zero server key fails on the client at once, as libsodium's crypto_box does.
    bad.server_key = [0; 32];
    assert_eq!(
        Handshake::new(&bad, false, Vec::new()).err(),
        Some(CurveError::Cryptographic)
    );
}

#[test]
fn wrong_client_keys_rejected() {
    let p = keys();
    for tweak in 0..2 {
        let mut k = p.client.clone();
        if tweak == 0 {
            k.public_key = [0; 32]; // vouch opens with a zero key: refused
        } else {
            k.secret_key = [9; 32]; // vouch boxed with a key not matching C
        }
        let (mut c, hello) = Handshake::new(&k, false, Vec::new()).unwrap();
        let (mut s, _) = Handshake::new(&server_keys(&p), true, Vec::new()).unwrap();
        let Ok(Step::Send(welcome)) = s.on_command(&hello.unwrap()) else {
            panic!()
        };
        let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
            panic!()
        };
        assert!(matches!(
            s.on_command(&initiate),
            Err(ZmtpError::Curve(CurveError::Cryptographic))
        ));
    }
}

#[test]
fn malformed_handshake_commands() {
    let p = keys();
    let (mut c, hello) = Handshake::new(&p.client, false, CPROPS.to_vec()).unwrap();
    let hello = hello.unwrap();
    let server = || {
        Handshake::new(&server_keys(&p), true, Vec::new())
            .unwrap()
            .0
    };
    let err = |s: &mut Handshake, b: &[u8]| match s.on_command(b) {
        Err(ZmtpError::Curve(e)) => e,
        other => panic!("{:?}", other.err()),
    };
    assert_eq!(err(&mut server(), b"\x05HELLO"), CurveError::MalformedHello);
    assert_eq!(
        err(&mut server(), b"\x05HELL"),
        CurveError::MalformedCommand
    );
    let mut h = hello.clone();
    h[5] = b'X';
    assert_eq!(err(&mut server(), &h), CurveError::UnexpectedCommand);
    let mut h = hello.clone();
    h[6] = 2;
    assert_eq!(err(&mut server(), &h), CurveError::MalformedHello);
    let mut h = hello.clone();
    h[150] ^= 1;
    assert_eq!(err(&mut server(), &h), CurveError::Cryptographic);

    let mut s = server();
    let Ok(Step::Send(welcome)) = s.on_command(&hello) else {
        panic!()
    };
    let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
        panic!()
    };
    // WELCOME twice, READY of the wrong size, tampered READY.
    assert!(matches!(
        c.on_command(&welcome),
        Err(ZmtpError::Curve(CurveError::UnexpectedCommand))
    ));
    // A fresh client and server up to INITIATE.
    let fresh = || {
        let (mut c, hello) = Handshake::new(&p.client, false, Vec::new()).unwrap();
        let mut s = server();
        let Ok(Step::Send(welcome)) = s.on_command(&hello.unwrap()) else {
            panic!()
        };
        let Ok(Step::Send(initiate)) = c.on_command(&welcome) else {
            panic!()
        };
        (s, initiate)
    };
    let (mut s2, _) = fresh();
    assert_eq!(err(&mut s2, b"\x08INITIATE"), CurveError::MalformedInitiate);
    for (i, want) in [
        (5, CurveError::UnexpectedCommand),
        (30, CurveError::Cryptographic),
        (150, CurveError::Cryptographic),
        (250, CurveError::Cryptographic),
    ] {
        let (mut s3, mut bad) = fresh();
        bad[i] ^= 1;
        assert_eq!(err(&mut s3, &bad), want, "byte {i}");
    }
    // INITIATE with a nonce not above HELLO's.
    let (mut s4, mut bad) = fresh();
    bad[105..113].copy_from_slice(&1u64.to_be_bytes());
    assert_eq!(err(&mut s4, &bad), CurveError::InvalidSequence);

    let Ok(Step::Initiated { .. }) = s.on_command(&initiate) else {
        panic!()
    };
    let (ready, _) = s.accept().unwrap();
    assert!(matches!(
        c.on_command(&ready[..29]),
        Err(ZmtpError::Curve(CurveError::MalformedReady))
    ));
    let mut bad = ready.clone();
    bad[20] ^= 1;
    assert!(matches!(
        c.on_command(&bad),
        Err(ZmtpError::Curve(CurveError::Cryptographic))
    ));
    // ERROR from the server: a ZAP status; malformed ones are a protocol error.
    assert_eq!(
        c.on_command(b"\x05ERROR\x03400").unwrap_err().auth_status(),
        Some(400)
    );
    assert_eq!(
        c.on_command(b"\x05ERROR\x05400").unwrap_err(),
        ZmtpError::MalformedError
    );
}

#[test]
fn reject_sends_error() {
    let p = keys();
    let (mut s, _) = Handshake::new(&server_keys(&p), true, Vec::new()).unwrap();
    assert_eq!(s.reject(b"400"), b"\x05ERROR\x03400");
    assert_eq!(s.accept().err(), Some(CurveError::OutOfSequence));
}

#[test]
fn precompute_matches_crypto_box() {
    use crypto_box::aead::Aead;
    let p = keys();
    let ours = precompute(&p.client.server_key, &p.client.secret_key).unwrap();
    let theirs = crypto_box::SalsaBox::new(
        &crypto_box::PublicKey::from(p.client.server_key),
        &crypto_box::SecretKey::from(p.client.secret_key),
    );
    let n = nonce(HELLO_NONCE, &7u64.to_be_bytes());
    let mut mine = Vec::new();
    ours.seal_into(&n, b"the same bytes", &mut mine);
    assert_eq!(
        mine,
        theirs.encrypt((&n).into(), &b"the same bytes"[..]).unwrap()
    );
    assert_eq!(&ours.open(&n, &mine).unwrap()[..], b"the same bytes");
    // Low-order points give an all-zero shared secret: refused.
    let mut one = [0u8; 32];
    one[0] = 1;
    for low in [[0u8; 32], one] {
        assert!(precompute(&low, &p.client.secret_key).is_err());
    }
}

// ----- through Connection ----------------------------------------------------------------

fn config(t: SocketType, keys: CurveKeys, as_server: bool) -> Config {
    let mut c = Config::new(t);
    c.mechanism = Mechanism::Curve;
    c.as_server = as_server;
    c.curve = keys;
    c
}

/// Moves bytes both ways until quiet; the first error says which side failed (true: `b`).
fn try_pump(
    a: &mut Connection,
    b: &mut Connection,
    now: Instant,
) -> Result<(Vec<Event>, Vec<Event>), (bool, ZmtpError)> {
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let mut ab = Vec::new();
        a.write_to(&mut ab).unwrap();
        let mut ba = Vec::new();
        b.write_to(&mut ba).unwrap();
        if ab.is_empty() && ba.is_empty() {
            break;
        }
        eb.extend(b.handle_input(&ab, now).map_err(|e| (true, e))?);
        ea.extend(a.handle_input(&ba, now).map_err(|e| (false, e))?);
        // No ZAP handler is bound.
        for (side, c) in [(false, &mut *a), (true, &mut *b)] {
            if c.take_zap_request().is_some() {
                c.zap_unavailable().map_err(|e| (side, e))?;
            }
        }
    }
    Ok((ea, eb))
}

/// A ZAP reply's frames (delimiter first) with `status`, `user_id` and no metadata.
fn zap_reply(status: &[u8], user_id: &[u8]) -> Vec<Msg> {
    let parts: [&[u8]; 7] = [b"", b"1.0", b"1", status, b"", user_id, b""];
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut m = Msg::copy_from(p);
            m.set_more(i < 6);
            m
        })
        .collect()
}

/// Runs the handshake up to the server's ZAP request, which is returned.
fn until_zap(cl: &mut Connection, sv: &mut Connection, now: Instant) -> crate::zmtp::ZapRequest {
    for _ in 0..10 {
        let mut ab = Vec::new();
        cl.write_to(&mut ab).unwrap();
        let mut ba = Vec::new();
        sv.write_to(&mut ba).unwrap();
        assert!(sv.handle_input(&ab, now).unwrap().is_empty());
        assert!(cl.handle_input(&ba, now).unwrap().is_empty());
        if let Some(req) = sv.take_zap_request() {
            return req;
        }
    }
    panic!("no ZAP request");
}

#[test]
fn connection_zap_approves_with_user_id() {
    let p = keys();
    let now = Instant::now();
    let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
    let mut sv = Connection::new(config(SocketType::Router, server_keys(&p), true), now);
    let req = until_zap(&mut cl, &mut sv, now);
    assert_eq!(req.mechanism, "CURVE");
    assert_eq!(req.credentials, vec![p.client.public_key.to_vec()]);
    assert!(sv.zap_pending());
    // Nothing goes out while ZAP decides.
    let mut ba = Vec::new();
    sv.write_to(&mut ba).unwrap();
    assert!(ba.is_empty(), "READY held back until ZAP answers");
    assert_eq!(sv.zap_reply(&zap_reply(b"200", b"alice")).unwrap(), 200);
    let (ec, es) = pump(&mut cl, &mut sv, now);
    assert!(matches!(&ec[..], [Event::Ready(_)]));
    let [Event::Ready(peer)] = &es[..] else {
        panic!("server not ready: {es:?}");
    };
    assert_eq!(peer.metadata.get("User-Id"), Some(&b"alice"[..]));
    cl.send(Msg::copy_from(b"hi")).unwrap();
    let (_, es) = pump(&mut cl, &mut sv, now);
    assert!(matches!(&es[..], [Event::Message(m)] if m.data() == b"hi"));
}

#[test]
fn connection_zap_refusal_reaches_the_client() {
    let p = keys();
    let now = Instant::now();
    for (status, sent) in [(&b"400"[..], true), (b"500", true), (b"300", false)] {
        let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
        let mut sv = Connection::new(config(SocketType::Router, server_keys(&p), true), now);
        until_zap(&mut cl, &mut sv, now);
        assert_eq!(
            u32::from(sv.zap_reply(&zap_reply(status, b"")).unwrap()),
            u32::from(status[0] - b'0') * 100
        );
        assert!(sv.is_rejected());
        let mut ba = Vec::new();
        sv.write_to(&mut ba).unwrap();
        assert_eq!(!ba.is_empty(), sent, "ERROR only for 400 and 500");
        if sent {
            let e = cl.handle_input(&ba, now).unwrap_err();
            assert_eq!(e.auth_status(), Some(u32::from(status[0] - b'0') * 100));
            assert!(cl.is_rejected());
        }
    }
}

#[test]
fn connection_zap_pending_commands_and_enforced_domain() {
    let p = keys();
    let now = Instant::now();
    // A command while ZAP decides fails the server.
    let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
    let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
    until_zap(&mut cl, &mut sv, now);
    let e = sv
        .handle_input(&[0x04, 0x06, 0x05, b'H', b'E', b'L', b'L', b'O'], now)
        .unwrap_err();
    assert_eq!(e.protocol_code(), Some(PROTOCOL_ERROR_ZMTP_UNSPECIFIED));
    // No handler with ZMQ_ZAP_ENFORCE_DOMAIN: the server fails (EFAULT, as libzmq).
    let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
    let mut c = config(SocketType::Dealer, server_keys(&p), true);
    c.zap_enforce_domain = true;
    let mut sv = Connection::new(c, now);
    until_zap(&mut cl, &mut sv, now);
    assert_eq!(sv.zap_unavailable().unwrap_err(), ZmtpError::ZapUnavailable);
}

fn pump(a: &mut Connection, b: &mut Connection, now: Instant) -> (Vec<Event>, Vec<Event>) {
    try_pump(a, b, now).unwrap()
}

#[test]
fn connection_round_trip() {
    let p = keys();
    let now = Instant::now();
    let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
    let mut sv = Connection::new(config(SocketType::Router, server_keys(&p), true), now);
    let (ec, es) = pump(&mut cl, &mut sv, now);
    assert!(
        matches!(&ec[..], [Event::Ready(peer)] if peer.socket_type == Some(SocketType::Router))
    );
    assert!(
        matches!(&es[..], [Event::Ready(peer)] if peer.socket_type == Some(SocketType::Dealer))
    );
    let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7) as u8).collect();
    let mut m = Msg::copy_from(b"head");
    m.set_more(true);
    cl.send(m).unwrap();
    cl.send(Msg::from_vec(big.clone())).unwrap();
    sv.send(Msg::copy_from(b"back")).unwrap();
    let mut wire = Vec::new();
    cl.write_to(&mut wire).unwrap();
    assert!(
        !wire.windows(4).any(|w| w == b"head"),
        "plaintext on the wire"
    );
    let got = sv.handle_input(&wire, now).unwrap();
    let bodies: Vec<(bool, Vec<u8>)> = got
        .iter()
        .map(|e| match e {
            Event::Message(m) => (m.more(), m.data().to_vec()),
            _ => panic!("not a message"),
        })
        .collect();
    assert_eq!(bodies, vec![(true, b"head".to_vec()), (false, big)]);
    let (ec, _) = pump(&mut cl, &mut sv, now);
    assert!(matches!(&ec[..], [Event::Message(m)] if m.data() == b"back"));
    // Subscriptions and heartbeats travel boxed too.
    cl.send_subscribe(b"topic", true).unwrap();
    let (_, es) = pump(&mut cl, &mut sv, now);
    assert!(matches!(&es[..], [Event::Message(m)] if m.data() == b"\x01topic"));
}

#[test]
fn connection_wrong_key_fails_with_protocol_code() {
    let p = keys();
    let now = Instant::now();
    let mut k = p.client.clone();
    k.server_key = z85::generate_keypair().unwrap().0;
    let mut cl = Connection::new(config(SocketType::Dealer, k, false), now);
    let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
    let (side, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
    assert!(side, "the server fails on HELLO");
    assert_eq!(e.protocol_code(), Some(PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC));
    // A zero server key fails the client right after the greeting.
    let mut k = p.client.clone();
    k.server_key = [0; 32];
    let mut cl = Connection::new(config(SocketType::Dealer, k, false), now);
    let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
    let (side, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
    assert!(!side);
    assert_eq!(e.protocol_code(), Some(PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC));
    // A NULL peer: mechanism mismatch.
    let mut cl = Connection::new(Config::new(SocketType::Dealer), now);
    let mut sv = Connection::new(config(SocketType::Dealer, server_keys(&p), true), now);
    let (_, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
    assert!(matches!(e, ZmtpError::MechanismMismatch { .. }));
}

#[test]
fn connection_incompatible_socket_type() {
    let p = keys();
    let now = Instant::now();
    let mut cl = Connection::new(config(SocketType::Push, p.client.clone(), false), now);
    let mut sv = Connection::new(config(SocketType::Push, server_keys(&p), true), now);
    // The server finds the client's Socket-Type in INITIATE incompatible.
    let (side, e) = try_pump(&mut cl, &mut sv, now).unwrap_err();
    assert!(side);
    assert!(matches!(e, ZmtpError::IncompatibleSocketType { .. }));
}

/// Frames `body` as a command, as the peer would send it.
fn command_frame(body: &[u8]) -> Vec<u8> {
    let mut q = crate::zmtp::record::OutQueue::<Sealer>::new();
    q.push_frame(FLAG_COMMAND, body);
    let mut out = Vec::new();
    q.write_to(&mut out).unwrap();
    out
}

#[test]
fn connection_client_reports_bad_ready_metadata() {
    // A scripted server whose READY metadata is malformed: INVALID_METADATA, as libzmq.
    let p = keys();
    let now = Instant::now();
    let mut cl = Connection::new(config(SocketType::Dealer, p.client.clone(), false), now);
    let (mut srv, _) = Handshake::new(&server_keys(&p), true, b"\x05junk".to_vec()).unwrap();
    let mut wire = Vec::new();
    cl.write_to(&mut wire).unwrap();
    cl.handle_input(&crate::zmtp::greeting::encode(Mechanism::Curve), now)
        .unwrap();
    cl.write_to(&mut wire).unwrap();
    let (flags, hello) = first_frame(&wire[64..]);
    assert_eq!(flags, FLAG_COMMAND);
    let Ok(Step::Send(welcome)) = srv.on_command(hello.data()) else {
        panic!("HELLO refused")
    };
    cl.handle_input(&command_frame(&welcome), now).unwrap();
    wire.clear();
    cl.write_to(&mut wire).unwrap();
    let (flags, initiate) = first_frame(&wire);
    assert_eq!(flags, FLAG_COMMAND);
    let Ok(Step::Initiated { .. }) = srv.on_command(initiate.data()) else {
        panic!("INITIATE refused")
    };
    let (ready, _) = srv.accept().unwrap();
    let e = cl.handle_input(&command_frame(&ready), now).unwrap_err();
    assert_eq!(e, ZmtpError::Curve(CurveError::InvalidMetadata));
    assert_eq!(
        e.protocol_code(),
        Some(PROTOCOL_ERROR_ZMTP_INVALID_METADATA)
    );
}

//! Unit tests of socket and context options against libzmq 4.3.5's behaviour.

use super::curve::parse_curve_key;
use super::*;
use crate::error::Error;
use crate::options::context::*;
use crate::z85;
use crate::zmtp::SocketType as T;

fn i(v: i32) -> [u8; 4] {
    v.to_ne_bytes()
}

fn get_int(o: &Options, opt: i32) -> i32 {
    match o.get(opt).unwrap() {
        OptValue::Int(v) => v,
        other => panic!("option {opt}: {other:?}"),
    }
}

/// Every int option with a valid and (if any) invalid value.
const INT_OPTS: &[(i32, i32, i32, Option<i32>)] = &[
    // (option, default, valid value, invalid value)
    (SNDHWM, 1000, 0, Some(-1)),
    (RCVHWM, 1000, 5, Some(-1)),
    (RATE, 100, 1, Some(0)),
    (RECOVERY_IVL, 10000, 0, Some(-1)),
    (SNDBUF, -1, 16384, Some(-2)),
    (RCVBUF, -1, 16384, Some(-2)),
    (TOS, 0, 0x28, Some(-1)),
    (LINGER, -1, 0, Some(-2)),
    (CONNECT_TIMEOUT, 0, 500, Some(-1)),
    (TCP_MAXRT, 0, 500, Some(-1)),
    (RECONNECT_STOP, 0, 7, None),
    (RECONNECT_IVL, 100, -1, Some(-2)),
    (RECONNECT_IVL_MAX, 0, 1000, Some(-1)),
    (BACKLOG, 100, 0, Some(-1)),
    (MULTICAST_HOPS, 1, 5, Some(0)),
    (MULTICAST_MAXTPDU, 1500, 9000, Some(0)),
    (RCVTIMEO, -1, 0, Some(-2)),
    (SNDTIMEO, -1, 250, Some(-2)),
    (TCP_KEEPALIVE, -1, 1, Some(2)),
    (TCP_KEEPALIVE_CNT, -1, 3, Some(-2)),
    (TCP_KEEPALIVE_IDLE, -1, 60, Some(-2)),
    (TCP_KEEPALIVE_INTVL, -1, 10, Some(-2)),
    (HANDSHAKE_IVL, 30000, 0, Some(-1)),
    (HEARTBEAT_IVL, 0, 100, Some(-1)),
    (HEARTBEAT_TIMEOUT, -1, 300, Some(-1)),
    (USE_FD, -1, 3, Some(-2)),
    (IPV6, 0, 1, Some(2)),
    (IPV4ONLY, 1, 0, Some(2)),
    (IMMEDIATE, 0, 1, Some(2)),
    (CONFLATE, 0, 1, Some(2)),
    (INVERT_MATCHING, 0, 1, None),
    (ZAP_ENFORCE_DOMAIN, 0, 1, None),
    (LOOPBACK_FASTPATH, 0, 1, None),
    (MULTICAST_LOOP, 1, 0, None),
];

#[test]
fn defaults() {
    let o = Options::new(T::Dealer);
    for &(opt, dflt, _, _) in INT_OPTS {
        assert_eq!(get_int(&o, opt), dflt, "option {opt}");
    }
    assert_eq!(get_int(&o, TYPE), T::Dealer as i32);
    assert_eq!(get_int(&o, MECHANISM), NULL);
    assert_eq!(get_int(&o, PLAIN_SERVER), 0);
    assert_eq!(get_int(&o, HEARTBEAT_TTL), 0);
    assert_eq!(o.get(AFFINITY).unwrap(), OptValue::UInt64(0));
    assert_eq!(o.get(MAXMSGSIZE).unwrap(), OptValue::Int64(-1));
    assert_eq!(o.get(ROUTING_ID).unwrap(), OptValue::Bytes(vec![]));
    for opt in [
        SOCKS_PROXY,
        SOCKS_USERNAME,
        SOCKS_PASSWORD,
        PLAIN_USERNAME,
        PLAIN_PASSWORD,
        ZAP_DOMAIN,
        BINDTODEVICE,
    ] {
        assert_eq!(o.get(opt).unwrap(), OptValue::Str(vec![]), "option {opt}");
    }
    assert!(o.stream_notify && !o.raw_socket && !o.recv_routing_id && o.zero_copy);
    assert!(Options::new(T::Stream).raw_socket);
    assert!(Options::new(T::Router).recv_routing_id);
}

#[test]
fn int_round_trips_and_range() {
    for &(opt, _, good, bad) in INT_OPTS {
        let mut o = Options::new(T::Pair);
        assert_eq!(
            o.set(opt, &i(good)),
            Ok(Applied::Stored).map(|a| if opt == SNDHWM || opt == RCVHWM {
                Applied::Hwm
            } else {
                a
            })
        );
        assert_eq!(get_int(&o, opt), good, "option {opt}");
        if let Some(bad) = bad {
            assert_eq!(
                o.set(opt, &i(bad)),
                Err(Error::Inval),
                "option {opt} value {bad}"
            );
            assert_eq!(get_int(&o, opt), good, "option {opt} unchanged");
        }
        // Wrong sizes.
        assert_eq!(o.set(opt, &[1, 0]), Err(Error::Inval), "option {opt}");
        assert_eq!(
            o.set(opt, &1i64.to_ne_bytes()),
            Err(Error::Inval),
            "option {opt}"
        );
        assert_eq!(o.set(opt, &[]), Err(Error::Inval), "option {opt}");
        assert_eq!(o.set_null(opt), Err(Error::Inval), "option {opt}");
    }
}

#[test]
fn relaxed_bools() {
    let mut o = Options::new(T::Sub);
    o.set(INVERT_MATCHING, &i(7)).unwrap();
    assert_eq!(get_int(&o, INVERT_MATCHING), 1);
    o.set(MULTICAST_LOOP, &i(-3)).unwrap();
    assert_eq!(get_int(&o, MULTICAST_LOOP), 1);
    o.set(IPV4ONLY, &i(0)).unwrap();
    assert!(o.ipv6);
    assert_eq!(get_int(&o, IPV6), 1);
}

#[test]
fn sixty_four_bit_options() {
    let mut o = Options::new(T::Push);
    o.set(AFFINITY, &3u64.to_ne_bytes()).unwrap();
    assert_eq!(o.get(AFFINITY).unwrap(), OptValue::UInt64(3));
    o.set(MAXMSGSIZE, &(-5i64).to_ne_bytes()).unwrap();
    assert_eq!(o.get(MAXMSGSIZE).unwrap(), OptValue::Int64(-5));
    assert_eq!(o.set(AFFINITY, &i(1)), Err(Error::Inval));
    assert_eq!(o.set(MAXMSGSIZE, &i(1)), Err(Error::Inval));
    let mut buf = [0u8; 4];
    assert_eq!(
        o.get(MAXMSGSIZE).unwrap().write_to(&mut buf),
        Err(Error::Inval)
    );
    let mut buf = [0u8; 8];
    assert_eq!(o.get(MAXMSGSIZE).unwrap().write_to(&mut buf), Ok(8));
    assert_eq!(i64::from_ne_bytes(buf), -5);
}

#[test]
fn heartbeat_ttl_in_deciseconds() {
    let mut o = Options::new(T::Dealer);
    o.set(HEARTBEAT_TTL, &i(1234)).unwrap();
    assert_eq!(o.heartbeat_ttl, 12);
    assert_eq!(get_int(&o, HEARTBEAT_TTL), 1200);
    o.set(HEARTBEAT_TTL, &i(6_553_599)).unwrap();
    assert_eq!(o.heartbeat_ttl, u16::MAX);
    assert_eq!(o.set(HEARTBEAT_TTL, &i(6_553_600)), Err(Error::Inval));
    o.set(HEARTBEAT_TTL, &i(-99)).unwrap();
    assert_eq!(o.heartbeat_ttl, 0);
    assert_eq!(o.set(HEARTBEAT_TTL, &i(-100)), Err(Error::Inval));
    assert_eq!(o.effective_heartbeat_timeout(), 0);
    o.set(HEARTBEAT_IVL, &i(50)).unwrap();
    assert_eq!(o.effective_heartbeat_timeout(), 50);
}

#[test]
fn routing_id() {
    let mut o = Options::new(T::Dealer);
    assert_eq!(o.set(ROUTING_ID, b""), Err(Error::Inval));
    assert_eq!(o.set(ROUTING_ID, &[1u8; 256]), Err(Error::Inval));
    o.set(ROUTING_ID, &[7u8; 255]).unwrap();
    o.set(IDENTITY, b"\0abc").unwrap();
    assert_eq!(
        o.get(ROUTING_ID).unwrap(),
        OptValue::Bytes(b"\0abc".to_vec())
    );
    let mut buf = [9u8; 8];
    assert_eq!(o.get(ROUTING_ID).unwrap().write_to(&mut buf), Ok(4));
    assert_eq!(buf, *b"\0abc\0\0\0\0");
    let mut small = [0u8; 3];
    assert_eq!(
        o.get(ROUTING_ID).unwrap().write_to(&mut small),
        Err(Error::Inval)
    );
}

#[test]
fn strings() {
    let mut o = Options::new(T::Push);
    // SOCKS_PROXY: NULL clears, non-NULL empty is EINVAL, any length otherwise.
    o.set(SOCKS_PROXY, b"127.0.0.1:1080").unwrap();
    assert_eq!(
        o.get(SOCKS_PROXY).unwrap(),
        OptValue::Str(b"127.0.0.1:1080".to_vec())
    );
    assert_eq!(o.set(SOCKS_PROXY, b""), Err(Error::Inval));
    o.set_null(SOCKS_PROXY).unwrap();
    assert!(o.socks_proxy.is_empty());
    // SOCKS_USERNAME/PASSWORD: empty or NULL clears, up to 255 bytes.
    o.set(SOCKS_USERNAME, b"me").unwrap();
    o.set(SOCKS_PASSWORD, b"pw").unwrap();
    assert_eq!(
        o.get(SOCKS_USERNAME).unwrap(),
        OptValue::Str(b"me".to_vec())
    );
    assert_eq!(o.set(SOCKS_USERNAME, &[b'a'; 256]), Err(Error::Inval));
    o.set(SOCKS_USERNAME, b"").unwrap();
    o.set_null(SOCKS_PASSWORD).unwrap();
    assert!(o.socks_username.is_empty() && o.socks_password.is_empty());
    // BINDTODEVICE: up to IFNAMSIZ bytes.
    o.set(BINDTODEVICE, b"testdev").unwrap();
    let mut buf = [0xffu8; 16];
    assert_eq!(o.get(BINDTODEVICE).unwrap().write_to(&mut buf), Ok(8));
    assert_eq!(&buf[..8], b"testdev\0");
    assert!(buf[8..].iter().all(|&b| b == 0));
    assert_eq!(o.set(BINDTODEVICE, &[b'a'; 17]), Err(Error::Inval));
    o.set(BINDTODEVICE, &[b'a'; 16]).unwrap();
    o.set_null(BINDTODEVICE).unwrap();
    let mut buf = [0xffu8; 16];
    assert_eq!(o.get(BINDTODEVICE).unwrap().write_to(&mut buf), Ok(1));
    assert_eq!(buf[0], 0);
    // Strings need room for the NUL.
    o.set(ZAP_DOMAIN, b"global").unwrap();
    assert_eq!(
        o.get(ZAP_DOMAIN).unwrap().write_to(&mut [0u8; 6]),
        Err(Error::Inval)
    );
    assert_eq!(o.get(ZAP_DOMAIN).unwrap().write_to(&mut [0u8; 7]), Ok(7));
    // ZAP_DOMAIN: 1 to 255 bytes; empty is EINVAL even as NULL.
    assert_eq!(o.set(ZAP_DOMAIN, b""), Err(Error::Inval));
    assert_eq!(o.set_null(ZAP_DOMAIN), Err(Error::Inval));
    assert_eq!(o.set(ZAP_DOMAIN, &[b'd'; 256]), Err(Error::Inval));
}

#[test]
fn int_buffers_must_be_exact() {
    let o = Options::new(T::Pair);
    let v = o.get(SNDHWM).unwrap();
    assert_eq!(v.write_to(&mut [0u8; 8]), Err(Error::Inval));
    assert_eq!(v.write_to(&mut [0u8; 2]), Err(Error::Inval));
    let mut buf = [0u8; 4];
    assert_eq!(v.write_to(&mut buf), Ok(4));
    assert_eq!(i32::from_ne_bytes(buf), 1000);
    // Socket-level ints take any buffer of 4 bytes or more.
    let mut big = [0xffu8; 8];
    assert_eq!(OptValue::IntRelaxed(1).write_to(&mut big), Ok(4));
    assert_eq!(big, [1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        OptValue::IntRelaxed(1).write_to(&mut [0u8; 3]),
        Err(Error::Inval)
    );
    assert_eq!(
        o.get(AFFINITY).unwrap().write_to(&mut [0u8; 4]),
        Err(Error::Inval)
    );
}

#[test]
fn plain_mechanism() {
    let mut o = Options::new(T::Rep);
    o.set(PLAIN_SERVER, &i(1)).unwrap();
    assert_eq!(get_int(&o, MECHANISM), PLAIN);
    assert_eq!(get_int(&o, PLAIN_SERVER), 1);
    assert_eq!(o.set(PLAIN_SERVER, &i(2)), Err(Error::Inval));
    o.set(PLAIN_SERVER, &i(0)).unwrap();
    assert_eq!(get_int(&o, MECHANISM), NULL);

    let mut c = Options::new(T::Req);
    c.set(PLAIN_USERNAME, b"admin").unwrap();
    assert_eq!(get_int(&c, MECHANISM), PLAIN);
    assert_eq!(get_int(&c, PLAIN_SERVER), 0);
    c.set(PLAIN_PASSWORD, b"secret").unwrap();
    assert_eq!(
        c.get(PLAIN_USERNAME).unwrap(),
        OptValue::Str(b"admin".to_vec())
    );
    assert_eq!(
        c.get(PLAIN_PASSWORD).unwrap(),
        OptValue::Str(b"secret".to_vec())
    );
    assert_eq!(c.set(PLAIN_USERNAME, b""), Err(Error::Inval));
    assert_eq!(c.set(PLAIN_USERNAME, &[b'u'; 256]), Err(Error::Inval));
    // NULL resets the mechanism but keeps the stored name.
    c.set_null(PLAIN_USERNAME).unwrap();
    assert_eq!(get_int(&c, MECHANISM), NULL);
    assert_eq!(c.plain_username, b"admin");
    // A username after PLAIN_SERVER makes the socket a client.
    let mut s = Options::new(T::Rep);
    s.set(PLAIN_SERVER, &i(1)).unwrap();
    s.set(PLAIN_USERNAME, b"x").unwrap();
    assert_eq!(get_int(&s, PLAIN_SERVER), 0);
}

#[test]
fn features_not_built() {
    let mut o = Options::new(T::Dealer);
    for opt in [
        GSSAPI_SERVER,
        GSSAPI_PRINCIPAL,
        GSSAPI_SERVICE_PRINCIPAL,
        GSSAPI_PLAINTEXT,
        GSSAPI_PRINCIPAL_NAMETYPE,
        GSSAPI_SERVICE_PRINCIPAL_NAMETYPE,
        VMCI_BUFFER_SIZE,
        VMCI_BUFFER_MIN_SIZE,
        VMCI_BUFFER_MAX_SIZE,
        VMCI_CONNECT_TIMEOUT,
    ] {
        assert_eq!(o.set(opt, &i(0)), Err(Error::Inval), "option {opt}");
        assert_eq!(o.set(opt, b"name"), Err(Error::Inval), "option {opt}");
        assert_eq!(
            o.set(opt, &0u64.to_ne_bytes()),
            Err(Error::Inval),
            "option {opt}"
        );
        assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
    }
    // DRAFT-only options of a stable build.
    for opt in [IN_BATCH_SIZE, OUT_BATCH_SIZE] {
        assert_eq!(o.set(opt, &i(1)), Err(Error::Inval), "option {opt}");
        assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
    }
    assert_eq!(o.set(ROUTER_NOTIFY, &i(1)), Err(Error::Inval));
    o.set(HICCUP_MSG, b"HICCUP").unwrap();
    assert_eq!(o.hiccup_msg, b"HICCUP");
    assert_eq!(o.get(HICCUP_MSG), Err(Error::Inval));
    o.set_null(HICCUP_MSG).unwrap();
    assert!(o.hiccup_msg.is_empty());
    o.set(HELLO_MSG, b"H").unwrap();
    o.set(DISCONNECT_MSG, b"D").unwrap();
    assert_eq!(
        (&o.hello_msg[..], &o.disconnect_msg[..]),
        (&b"H"[..], &b"D"[..])
    );
    assert_eq!(o.get(HELLO_MSG), Err(Error::Inval));
    assert_eq!(o.get(DISCONNECT_MSG), Err(Error::Inval));
    o.set_null(HELLO_MSG).unwrap();
    o.set(DISCONNECT_MSG, b"").unwrap();
    assert!(o.hello_msg.is_empty() && o.disconnect_msg.is_empty());
    let mut r = Options::new(T::Router);
    assert_eq!(get_int(&r, ROUTER_NOTIFY), 0);
    r.set(ROUTER_NOTIFY, &i(3)).unwrap();
    assert_eq!(get_int(&r, ROUTER_NOTIFY), 3);
    assert_eq!(r.set(ROUTER_NOTIFY, &i(4)), Err(Error::Inval));
    assert_eq!(r.set(ROUTER_NOTIFY, &i(-1)), Err(Error::Inval));
    let mut x = Options::new(T::XSub);
    assert_eq!(
        x.set(XSUB_VERBOSE_UNSUBSCRIBE, &i(-1)),
        Ok(Applied::PatternFlag(XSUB_VERBOSE_UNSUBSCRIBE))
    );
    assert!(x.xsub_verbose_unsubscribe);
    assert_eq!(x.set(XSUB_VERBOSE_UNSUBSCRIBE, &[0u8]), Err(Error::Inval));
    assert_eq!(x.get(XSUB_VERBOSE_UNSUBSCRIBE), Err(Error::Inval));
    let mut s = Options::new(T::Sub);
    assert_eq!(s.set(XSUB_VERBOSE_UNSUBSCRIBE, &i(1)), Err(Error::Inval));
    assert_eq!(get_int(&o, MECHANISM), NULL);
}

#[test]
fn curve_keys_when_built() {
    // Z85 test vector of ZeroMQ RFC 32.
    let raw = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
    assert_eq!(z85::decode(b"HelloWorld").unwrap(), raw);
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&raw);
    let text = z85::encode_key(&key);
    assert_eq!(&text[..10], b"HelloWorld");
    assert_eq!(parse_curve_key(&key), Some(key));
    assert_eq!(parse_curve_key(&text), Some(key));
    let mut with_nul = text.to_vec();
    with_nul.push(0);
    assert_eq!(parse_curve_key(&with_nul), Some(key));
    assert_eq!(parse_curve_key(&text[..39]), None);
    assert_eq!(
        parse_curve_key(b"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~"),
        None
    );
    let v = OptValue::CurveKey(key);
    let mut b32 = [0u8; 32];
    assert_eq!(v.write_to(&mut b32), Ok(32));
    assert_eq!(b32, key);
    let mut b41 = [0u8; 41];
    assert_eq!(v.write_to(&mut b41), Ok(41));
    assert_eq!(&b41[..40], &text[..]);
    assert_eq!(b41[40], 0);
    assert_eq!(v.write_to(&mut [0u8; 40]), Err(Error::Inval));

    // Through set/get, as libzmq built with libsodium.
    const { assert!(HAVE_CURVE) };
    let mut o = Options::new(T::Dealer);
    assert_eq!(get_int(&o, CURVE_SERVER), 0);
    o.set(CURVE_SERVER, &i(1)).unwrap();
    assert_eq!(get_int(&o, MECHANISM), CURVE);
    assert_eq!(get_int(&o, CURVE_SERVER), 1);
    o.set(CURVE_SECRETKEY, &with_nul).unwrap();
    assert_eq!(o.curve_secretkey, key);
    assert_eq!(
        get_int(&o, CURVE_SERVER),
        1,
        "a secret key keeps the server role"
    );
    o.set(CURVE_SERVERKEY, &key).unwrap();
    assert_eq!(get_int(&o, CURVE_SERVER), 0, "a server key makes a client");
    assert_eq!(get_int(&o, MECHANISM), CURVE);
    o.set(CURVE_PUBLICKEY, &text).unwrap();
    assert_eq!(o.get(CURVE_PUBLICKEY), Ok(OptValue::CurveKey(key)));
    for opt in [CURVE_PUBLICKEY, CURVE_SECRETKEY, CURVE_SERVERKEY] {
        assert_eq!(o.set(opt, &[1u8; 123]), Err(Error::Inval));
        assert_eq!(o.set(opt, &[1u8; 31]), Err(Error::Inval));
    }
    o.set(CURVE_SERVER, &i(0)).unwrap();
    assert_eq!(get_int(&o, MECHANISM), NULL);
    assert_eq!(o.set(CURVE_SERVER, &i(2)), Err(Error::Inval));
}

#[test]
fn unknown_and_read_only_options() {
    let mut o = Options::new(T::Pair);
    for opt in [0, 1, 2, 3, 10, 20, 26, 29, 30, 67, 82, 83, 125, 1000, -1] {
        assert_eq!(o.set(opt, &i(1)), Err(Error::Inval), "option {opt}");
        assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
    }
    for opt in [
        RCVMORE,
        FD,
        EVENTS,
        TYPE,
        LAST_ENDPOINT,
        THREAD_SAFE,
        MECHANISM,
        TOPICS_COUNT,
    ] {
        assert_eq!(o.set(opt, &i(1)), Err(Error::Inval), "option {opt}");
    }
    for opt in [
        RCVMORE,
        FD,
        EVENTS,
        LAST_ENDPOINT,
        THREAD_SAFE,
        TOPICS_COUNT,
    ] {
        assert!(is_socket_level(opt));
        assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
    }
    assert!(!is_socket_level(TYPE));
}

#[test]
fn write_only_options() {
    let mut sub = Options::new(T::Sub);
    sub.set(SUBSCRIBE, b"a").unwrap();
    let mut router = Options::new(T::Router);
    router.set(ROUTER_MANDATORY, &i(1)).unwrap();
    let mut xpub = Options::new(T::XPub);
    xpub.set(XPUB_VERBOSE, &i(1)).unwrap();
    for (o, opts) in [
        (
            &sub,
            &[
                SUBSCRIBE,
                UNSUBSCRIBE,
                TCP_ACCEPT_FILTER,
                IPC_FILTER_PID,
                IPC_FILTER_UID,
                IPC_FILTER_GID,
                METADATA,
            ][..],
        ),
        (
            &router,
            &[
                ROUTER_MANDATORY,
                ROUTER_RAW,
                ROUTER_HANDOVER,
                PROBE_ROUTER,
                CONNECT_ROUTING_ID,
                STREAM_NOTIFY,
            ][..],
        ),
        (
            &xpub,
            &[
                XPUB_VERBOSE,
                XPUB_VERBOSER,
                XPUB_NODROP,
                XPUB_MANUAL,
                XPUB_WELCOME_MSG,
                XPUB_MANUAL_LAST_VALUE,
                ONLY_FIRST_SUBSCRIBE,
                REQ_CORRELATE,
                REQ_RELAXED,
            ][..],
        ),
    ] {
        for &opt in opts {
            assert_eq!(o.get(opt), Err(Error::Inval), "option {opt}");
        }
    }
}

#[test]
fn subscriptions() {
    let mut sub = Options::new(T::Sub);
    assert_eq!(sub.set(SUBSCRIBE, b""), Ok(Applied::Subscribe(vec![])));
    assert_eq!(sub.set_null(SUBSCRIBE), Ok(Applied::Subscribe(vec![])));
    assert_eq!(
        sub.set(UNSUBSCRIBE, b"topic"),
        Ok(Applied::Unsubscribe(b"topic".to_vec()))
    );
    for t in [
        T::Pair,
        T::Pub,
        T::Req,
        T::Rep,
        T::Dealer,
        T::Router,
        T::Pull,
        T::Push,
        T::XPub,
        T::XSub,
        T::Stream,
    ] {
        let mut o = Options::new(t);
        assert_eq!(o.set(SUBSCRIBE, b"a"), Err(Error::Inval), "type {t:?}");
        assert_eq!(o.set(UNSUBSCRIBE, b"a"), Err(Error::Inval), "type {t:?}");
    }
    // XPUB and PUB accept them in manual mode.
    for t in [T::XPub, T::Pub] {
        let mut o = Options::new(t);
        o.set(XPUB_MANUAL, &i(1)).unwrap();
        assert_eq!(
            o.set(SUBSCRIBE, b"a"),
            Ok(Applied::Subscribe(b"a".to_vec()))
        );
        assert_eq!(
            o.set(UNSUBSCRIBE, b"a"),
            Ok(Applied::Unsubscribe(b"a".to_vec()))
        );
        o.set(XPUB_MANUAL, &i(0)).unwrap();
        assert_eq!(o.set(SUBSCRIBE, b"a"), Err(Error::Inval));
    }
}

#[test]
fn router_options() {
    let mut o = Options::new(T::Router);
    for opt in [ROUTER_MANDATORY, ROUTER_HANDOVER, PROBE_ROUTER] {
        assert_eq!(o.set(opt, &i(5)), Ok(Applied::PatternFlag(opt)));
        assert_eq!(o.set(opt, &i(-1)), Err(Error::Inval));
        assert_eq!(o.set(opt, &[1]), Err(Error::Inval));
    }
    assert!(o.router_mandatory && o.router_handover && o.probe_router);
    o.set(ROUTER_RAW, &i(1)).unwrap();
    assert!(o.router_raw && o.raw_socket && !o.recv_routing_id);
    o.set(ROUTER_RAW, &i(0)).unwrap();
    assert!(!o.router_raw && o.raw_socket && !o.recv_routing_id);
    assert_eq!(
        o.set(CONNECT_ROUTING_ID, b"peer1"),
        Ok(Applied::PatternFlag(CONNECT_ROUTING_ID))
    );
    assert_eq!(o.set(CONNECT_RID, b""), Err(Error::Inval));
    assert_eq!(o.set_null(CONNECT_ROUTING_ID), Err(Error::Inval));
    assert_eq!(o.take_connect_routing_id(), Some(b"peer1".to_vec()));
    assert_eq!(o.take_connect_routing_id(), None);
    assert_eq!(o.set(STREAM_NOTIFY, &i(0)), Err(Error::Inval));
    // Not on other socket types.
    for t in [
        T::Pair,
        T::Pub,
        T::Sub,
        T::Req,
        T::Rep,
        T::Dealer,
        T::Pull,
        T::Push,
        T::XPub,
        T::XSub,
        T::Stream,
    ] {
        let mut x = Options::new(t);
        for opt in [ROUTER_MANDATORY, ROUTER_RAW, ROUTER_HANDOVER] {
            assert_eq!(
                x.set(opt, &i(1)),
                Err(Error::Inval),
                "type {t:?} option {opt}"
            );
        }
    }
}

#[test]
fn stream_options() {
    let mut o = Options::new(T::Stream);
    assert_eq!(
        o.set(STREAM_NOTIFY, &i(0)),
        Ok(Applied::PatternFlag(STREAM_NOTIFY))
    );
    assert!(!o.stream_notify);
    assert_eq!(o.set(STREAM_NOTIFY, &i(2)), Err(Error::Inval));
    o.set(CONNECT_ROUTING_ID, b"x").unwrap();
    assert_eq!(o.connect_routing_id.as_deref(), Some(&b"x"[..]));
    assert_eq!(o.set(PROBE_ROUTER, &i(1)), Err(Error::Inval));
    for t in [
        T::Pair,
        T::Pub,
        T::Sub,
        T::Req,
        T::Rep,
        T::Dealer,
        T::Pull,
        T::Push,
        T::XPub,
        T::XSub,
    ] {
        let mut x = Options::new(t);
        assert_eq!(
            x.set(CONNECT_ROUTING_ID, b"x"),
            Err(Error::Inval),
            "type {t:?}"
        );
        assert_eq!(x.set(STREAM_NOTIFY, &i(1)), Err(Error::Inval), "type {t:?}");
    }
}

#[test]
fn req_dealer_options() {
    let mut req = Options::new(T::Req);
    req.set(REQ_CORRELATE, &i(1)).unwrap();
    req.set(REQ_RELAXED, &i(1)).unwrap();
    req.set(PROBE_ROUTER, &i(1)).unwrap();
    assert!(req.req_correlate && req.req_relaxed && req.probe_router);
    assert_eq!(req.set(REQ_RELAXED, &i(-1)), Err(Error::Inval));
    let mut dealer = Options::new(T::Dealer);
    dealer.set(PROBE_ROUTER, &i(1)).unwrap();
    assert_eq!(dealer.set(REQ_CORRELATE, &i(1)), Err(Error::Inval));
    assert_eq!(dealer.set(REQ_RELAXED, &i(1)), Err(Error::Inval));
    for t in [
        T::Pair,
        T::Pub,
        T::Sub,
        T::Rep,
        T::Pull,
        T::Push,
        T::XPub,
        T::XSub,
        T::Stream,
    ] {
        let mut x = Options::new(t);
        assert_eq!(x.set(PROBE_ROUTER, &i(1)), Err(Error::Inval), "type {t:?}");
        assert_eq!(x.set(REQ_CORRELATE, &i(1)), Err(Error::Inval), "type {t:?}");
    }
}

#[test]
fn xpub_options() {
    for t in [T::XPub, T::Pub] {
        let mut o = Options::new(t);
        o.set(XPUB_VERBOSER, &i(1)).unwrap();
        assert!(o.xpub_verbose && o.xpub_verboser);
        o.set(XPUB_VERBOSE, &i(1)).unwrap();
        assert!(o.xpub_verbose && !o.xpub_verboser);
        o.set(XPUB_NODROP, &i(3)).unwrap();
        assert!(o.xpub_nodrop);
        o.set(XPUB_MANUAL_LAST_VALUE, &i(1)).unwrap();
        assert!(o.xpub_manual && o.xpub_manual_last_value);
        o.set(ONLY_FIRST_SUBSCRIBE, &i(1)).unwrap();
        assert!(o.only_first_subscribe);
        assert_eq!(o.set(XPUB_VERBOSE, &i(-1)), Err(Error::Inval));
        assert_eq!(o.set(XPUB_NODROP, &[0; 8]), Err(Error::Inval));
        assert_eq!(
            o.set(XPUB_WELCOME_MSG, b"hi"),
            Ok(Applied::PatternFlag(XPUB_WELCOME_MSG))
        );
        assert_eq!(o.xpub_welcome_msg.as_deref(), Some(&b"hi"[..]));
        o.set(XPUB_WELCOME_MSG, b"").unwrap();
        assert_eq!(o.xpub_welcome_msg, None);
    }
    let mut xsub = Options::new(T::XSub);
    xsub.set(ONLY_FIRST_SUBSCRIBE, &i(1)).unwrap();
    for t in [
        T::Pair,
        T::Sub,
        T::Req,
        T::Rep,
        T::Dealer,
        T::Router,
        T::Pull,
        T::Push,
        T::XSub,
        T::Stream,
    ] {
        let mut x = Options::new(t);
        for opt in [
            XPUB_VERBOSE,
            XPUB_VERBOSER,
            XPUB_NODROP,
            XPUB_MANUAL,
            XPUB_MANUAL_LAST_VALUE,
        ] {
            assert_eq!(
                x.set(opt, &i(1)),
                Err(Error::Inval),
                "type {t:?} option {opt}"
            );
        }
        assert_eq!(
            x.set(XPUB_WELCOME_MSG, b"w"),
            Err(Error::Inval),
            "type {t:?}"
        );
    }
    let mut sub = Options::new(T::Sub);
    assert_eq!(sub.set(ONLY_FIRST_SUBSCRIBE, &i(1)), Err(Error::Inval));
}

#[test]
fn hwm_reports_pipe_update() {
    let mut o = Options::new(T::Push);
    assert_eq!(o.set(SNDHWM, &i(10)), Ok(Applied::Hwm));
    assert_eq!(o.set(RCVHWM, &i(0)), Ok(Applied::Hwm));
    assert_eq!((o.sndhwm, o.rcvhwm), (10, 0));
}

#[test]
fn tcp_accept_filters() {
    let mut o = Options::new(T::Router);
    o.set(TCP_ACCEPT_FILTER, b"127.0.0.1").unwrap();
    o.set(TCP_ACCEPT_FILTER, b"192.168.0.0/16").unwrap();
    assert_eq!(o.tcp_accept_filters.len(), 2);
    assert_eq!(o.tcp_accept_filters[1].prefix, 16);
    assert!(o.tcp_peer_allowed(&"127.0.0.1:1".parse().unwrap()));
    assert!(o.tcp_peer_allowed(&"192.168.44.5:1".parse().unwrap()));
    assert!(!o.tcp_peer_allowed(&"10.0.0.1:1".parse().unwrap()));
    assert!(!o.tcp_peer_allowed(&"[::1]:1".parse().unwrap()));
    for bad in [
        &b"192.168.0.0/"[..],
        b"192.168.0.0/33",
        b"192.168.0.0/x",
        b"localhost",
        b"::1",
        b"",
    ] {
        assert_eq!(
            o.set(TCP_ACCEPT_FILTER, bad),
            Err(Error::Inval),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(o.set(TCP_ACCEPT_FILTER, &[b'1'; 256]), Err(Error::Inval));
    o.set_null(TCP_ACCEPT_FILTER).unwrap();
    assert!(o.tcp_accept_filters.is_empty());
    assert!(o.tcp_peer_allowed(&"10.0.0.1:1".parse().unwrap()));
    // With ZMQ_IPV6 the filter is resolved as IPv6 (IPv4 mapped).
    o.set(IPV6, &i(1)).unwrap();
    o.set(TCP_ACCEPT_FILTER, b"10.1.0.0/112").unwrap();
    assert!(o.tcp_peer_allowed(&"[::ffff:10.1.2.3]:1".parse().unwrap()));
    assert!(!o.tcp_peer_allowed(&"[::ffff:10.2.2.3]:1".parse().unwrap()));
    o.set(TCP_ACCEPT_FILTER, b"::/0").unwrap();
    assert!(o.tcp_peer_allowed(&"[2001:db8::1]:1".parse().unwrap()));
    let f = TcpAcceptFilter::parse("10.0.0.0/0", false).unwrap();
    assert!(f.matches(&"1.2.3.4:5".parse().unwrap()));
    assert!(!f.matches(&"[::1]:5".parse().unwrap()));
}

#[test]
fn ipc_filters() {
    let mut o = Options::new(T::Pull);
    assert!(o.ipc_peer_allowed(1, 2, 3, &[]));
    o.set(IPC_FILTER_UID, &1000u32.to_ne_bytes()).unwrap();
    o.set(IPC_FILTER_GID, &50u32.to_ne_bytes()).unwrap();
    o.set(IPC_FILTER_PID, &i(4242)).unwrap();
    assert!(o.ipc_peer_allowed(1, 1000, 3, &[]));
    assert!(o.ipc_peer_allowed(1, 2, 50, &[]));
    assert!(o.ipc_peer_allowed(4242, 2, 3, &[]));
    assert!(o.ipc_peer_allowed(1, 2, 3, &[7, 50]));
    assert!(!o.ipc_peer_allowed(1, 2, 3, &[7]));
    assert_eq!(o.set(IPC_FILTER_PID, &[0; 8]), Err(Error::Inval));
    assert_eq!(o.set(IPC_FILTER_UID, b""), Err(Error::Inval));
    o.set_null(IPC_FILTER_UID).unwrap();
    o.set_null(IPC_FILTER_GID).unwrap();
    o.set_null(IPC_FILTER_PID).unwrap();
    assert!(o.ipc_peer_allowed(1, 2, 3, &[]));
}

#[test]
fn metadata() {
    let mut o = Options::new(T::Dealer);
    o.set(METADATA, b"X-color:red").unwrap();
    o.set(METADATA, b"X-color:blue").unwrap();
    o.set(METADATA, b"X-a:b:c").unwrap();
    assert_eq!(o.metadata.get(&b"X-color"[..]), Some(&b"red".to_vec()));
    assert_eq!(o.metadata.get(&b"X-a"[..]), Some(&b"b:c".to_vec()));
    for bad in [
        &b"color:red"[..],
        b"X-color:",
        b":red",
        b"X-color",
        b"X-:b",
        b"",
    ] {
        assert_eq!(
            o.set(METADATA, bad),
            Err(Error::Inval),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let mut long_key = b"X-".to_vec();
    long_key.extend_from_slice(&[b'k'; 254]);
    long_key.extend_from_slice(b":v");
    assert_eq!(o.set(METADATA, &long_key), Err(Error::Inval));
    assert_eq!(o.get(METADATA), Err(Error::Inval));
}

#[test]
fn conflate_and_ctx_inheritance() {
    let mut o = Options::new(T::Router);
    o.set(CONFLATE, &i(1)).unwrap();
    assert!(!o.effective_conflate());
    let mut d = Options::new(T::Dealer);
    d.set(CONFLATE, &i(1)).unwrap();
    assert!(d.effective_conflate());
    let mut ctx = CtxOptions::new();
    ctx.set_int(IPV6, 1).unwrap();
    ctx.set_int(BLOCKY, 0).unwrap();
    ctx.set_int(ZERO_COPY_RECV, 0).unwrap();
    let s = Options::with_ctx(T::Push, &ctx);
    assert!(s.ipv6 && !s.zero_copy);
    assert_eq!(s.linger, 0);
    assert_eq!(Options::with_ctx(T::Push, &CtxOptions::new()).linger, -1);
}

#[test]
fn ctx_defaults_and_round_trips() {
    let mut c = CtxOptions::default();
    assert_eq!(c.get(IO_THREADS), Ok(1));
    assert_eq!(c.get(MAX_SOCKETS), Ok(1023));
    assert_eq!(c.get(SOCKET_LIMIT), Ok(65535));
    assert_eq!(c.get(THREAD_PRIORITY), Ok(65535));
    assert_eq!(c.get(THREAD_SCHED_POLICY), Ok(-1));
    assert_eq!(c.get(MAX_MSGSZ), Ok(i32::MAX));
    assert_eq!(c.get(MSG_T_SIZE), Ok(64));
    assert_eq!(c.get(IPV6), Ok(0));
    assert_eq!(c.get(BLOCKY), Ok(1));
    assert_eq!(c.get(ZERO_COPY_RECV), Ok(1));
    assert_eq!(c.get(THREAD_NAME_PREFIX), Ok(0));
    for (opt, good, bad) in [
        (IO_THREADS, 0, -1),
        (MAX_SOCKETS, 100_000, 0),
        (MAX_MSGSZ, 1024, -1),
        (IPV6, 5, -1),
        (BLOCKY, 0, -1),
        (ZERO_COPY_RECV, 0, -1),
        (THREAD_SCHED_POLICY, 1, -1),
    ] {
        c.set_int(opt, good).unwrap();
        let expect = if matches!(opt, IPV6 | BLOCKY | ZERO_COPY_RECV) {
            i32::from(good != 0)
        } else {
            good
        };
        assert_eq!(c.get(opt), Ok(expect), "option {opt}");
        assert_eq!(c.set_int(opt, bad), Err(Error::Inval), "option {opt}");
        assert_eq!(c.set(opt, &[0; 8]), Err(Error::Inval), "option {opt}");
    }
    c.set_int(THREAD_PRIORITY, 10).unwrap();
    assert_eq!(c.thread_priority, 10);
    assert_eq!(c.set_int(THREAD_PRIORITY, -1), Err(Error::Inval));
    assert_eq!(c.set_int(SOCKET_LIMIT, 10), Ok(()));
    assert_eq!(c.set_int(MSG_T_SIZE, 64), Err(Error::Inval));
    assert_eq!(c.set_int(99, 1), Err(Error::Inval));
    assert_eq!(c.get(THREAD_AFFINITY_CPU_ADD), Err(Error::Inval));
    assert_eq!(c.get(99), Err(Error::Inval));
}

#[test]
fn ctx_affinity_and_names() {
    let mut c = CtxOptions::new();
    c.set_int(THREAD_AFFINITY_CPU_ADD, 2).unwrap();
    c.set_int(THREAD_AFFINITY_CPU_ADD, 3).unwrap();
    assert_eq!(c.set_int(THREAD_AFFINITY_CPU_ADD, -1), Err(Error::Inval));
    c.set_int(THREAD_AFFINITY_CPU_REMOVE, 2).unwrap();
    assert_eq!(c.set_int(THREAD_AFFINITY_CPU_REMOVE, 2), Err(Error::Inval));
    assert_eq!(
        c.thread_affinity_cpus.iter().copied().collect::<Vec<_>>(),
        vec![3]
    );

    c.set_int(THREAD_NAME_PREFIX, 42).unwrap();
    assert_eq!(c.thread_name_prefix, b"42");
    assert_eq!(c.get(THREAD_NAME_PREFIX), Ok(42));
    c.set(THREAD_NAME_PREFIX, b"worker").unwrap();
    assert_eq!(c.get(THREAD_NAME_PREFIX), Ok(0));
    let mut buf = [b'#'; 8];
    c.get_ext(THREAD_NAME_PREFIX, &mut buf).unwrap();
    assert_eq!(&buf, b"worker##");
    assert_eq!(
        c.get_ext(THREAD_NAME_PREFIX, &mut [0u8; 5]),
        Err(Error::Inval)
    );
    assert_eq!(c.set(THREAD_NAME_PREFIX, &[b'n'; 17]), Err(Error::Inval));
    assert_eq!(c.set(THREAD_NAME_PREFIX, b""), Err(Error::Inval));
    // Four bytes are an int.
    c.set(THREAD_NAME_PREFIX, &i(-7)).unwrap();
    assert_eq!(c.thread_name_prefix, b"-7");
    let mut four = [0u8; 4];
    c.get_ext(IO_THREADS, &mut four).unwrap();
    assert_eq!(i32::from_ne_bytes(four), 1);
    assert_eq!(c.get_ext(IO_THREADS, &mut [0u8; 8]), Err(Error::Inval));
}

#[test]
fn priority_and_busy_poll() {
    let mut o = Options::new(T::Push);
    assert_eq!(get_int(&o, PRIORITY), 0);
    assert_eq!(get_int(&o, BUSY_POLL), 0);
    o.set(PRIORITY, &i(3)).unwrap();
    assert_eq!(get_int(&o, PRIORITY), 3);
    assert_eq!(o.set(PRIORITY, &i(-1)), Err(Error::Inval));
    assert_eq!(o.set(PRIORITY, &[3u8]), Err(Error::Inval));
    assert_eq!(get_int(&o, PRIORITY), 3);
    // libzmq takes any int for BUSY_POLL; <= 0 leaves SO_BUSY_POLL unset.
    o.set(BUSY_POLL, &i(50)).unwrap();
    assert_eq!(get_int(&o, BUSY_POLL), 50);
    o.set(BUSY_POLL, &i(-1)).unwrap();
    assert_eq!(get_int(&o, BUSY_POLL), -1);
    assert_eq!(o.set(BUSY_POLL, &0u64.to_ne_bytes()), Err(Error::Inval));
}

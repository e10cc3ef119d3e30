//! The draft RADIO/DISH and DGRAM socket types through the native API: groups filtered over
//! inproc, tcp, ipc and udp (unicast and multicast on loopback), join/leave errors, joins
//! resent after a reconnect, DGRAM echo over udp, the transports each type may use, and a
//! malformed datagram dropped without harm.

use std::time::{Duration, Instant};

use rzmq_core::options as opt;
use rzmq_core::{Context, Error, Msg, Socket, SocketType};
use rzmq_tests::{inproc_endpoint, ipc_endpoint, timed_socket};

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    timed_socket(ctx, ty, 0)
}

fn grouped(group: &str, body: &str) -> Msg {
    let mut m = Msg::from(body);
    m.set_group(group).unwrap();
    m
}

/// Sends `probe` to `group` until the DISH gets a message (the JOIN travels to the RADIO after
/// the connection is up; UDP may not have the DISH bound in time), then returns it.
fn first_delivery(radio: &mut Socket, dish: &mut Socket, group: &str) -> Msg {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        radio.send_msg(grouped(group, "probe"), 0).unwrap();
        match dish.recv_msg(rzmq_core::DONTWAIT) {
            Ok(m) => return m,
            Err(Error::Again) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("nothing delivered: {e:?}"),
        }
    }
}

/// Drains what the DISH already has (probes), without waiting.
fn drain(dish: &mut Socket) {
    while dish.recv_msg(rzmq_core::DONTWAIT).is_ok() {}
}

/// RADIO -> DISH over `bind_ep` (the DISH binds, the RADIO connects): only joined groups arrive,
/// each with its group, and a leave stops a group.
fn groups_are_filtered(dish_ep: &str, radio_ep: Option<&str>) {
    let ctx = Context::new();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.bind(dish_ep).unwrap();
    let ep = radio_ep.map_or_else(|| dish.last_endpoint().to_string(), str::to_string);
    dish.join("weather").unwrap();
    dish.join("news").unwrap();
    let mut radio = sock(&ctx, SocketType::Radio);
    radio.connect(&ep).unwrap();

    let m = first_delivery(&mut radio, &mut dish, "weather");
    assert_eq!((m.data(), m.group()), (&b"probe"[..], &b"weather"[..]));
    // Later probes may still be in flight: a marker message ends them.
    radio.send_msg(grouped("news", "marker"), 0).unwrap();
    loop {
        let m = dish.recv_msg(0).unwrap();
        if m.data() == b"marker" {
            assert_eq!(m.group(), b"news");
            break;
        }
        assert_eq!(m.group(), b"weather");
    }
    radio.send_msg(grouped("sports", "no"), 0).unwrap();
    radio.send_msg(Msg::from("no group"), 0).unwrap();
    radio.send_msg(grouped("weather", "sunny"), 0).unwrap();
    let m = dish.recv_msg(0).unwrap();
    assert_eq!((m.data(), m.group()), (&b"sunny"[..], &b"weather"[..]));

    dish.leave("weather").unwrap();
    // Whether or not the LEAVE reached the RADIO yet, the DISH filters: only news arrives.
    radio.send_msg(grouped("weather", "dropped"), 0).unwrap();
    radio.send_msg(grouped("news", "after"), 0).unwrap();
    let m = dish.recv_msg(0).unwrap();
    assert_eq!((m.data(), m.group()), (&b"after"[..], &b"news"[..]));
    drain(&mut dish);
}

#[test]
fn radio_dish_over_inproc() {
    groups_are_filtered(&inproc_endpoint("radio-dish"), None);
}

#[test]
fn radio_dish_over_tcp() {
    groups_are_filtered("tcp://127.0.0.1:*", None);
}

#[test]
fn radio_dish_over_ipc() {
    groups_are_filtered(&ipc_endpoint("radio-dish"), None);
}

#[test]
fn radio_dish_over_udp() {
    groups_are_filtered("udp://127.0.0.1:*", None);
}

#[test]
fn radio_dish_over_udp_any_address() {
    // `udp://*:port` binds every address; the RADIO sends to loopback.
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    groups_are_filtered(
        &format!("udp://*:{port}"),
        Some(&format!("udp://127.0.0.1:{port}")),
    );
}

#[test]
fn join_and_leave_errors() {
    let ctx = Context::new();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.join("g").unwrap();
    assert_eq!(dish.join("g"), Err(Error::Inval));
    assert_eq!(dish.leave("never"), Err(Error::Inval));
    assert_eq!(dish.join(vec![b'x'; 256]), Err(Error::Inval));
    dish.join(vec![b'x'; 255]).unwrap();
    dish.leave("g").unwrap();
    assert_eq!(dish.leave("g"), Err(Error::Inval));
    assert_eq!(dish.send("x", 0), Err(Error::NotSup));

    let mut radio = sock(&ctx, SocketType::Radio);
    assert_eq!(radio.join("g"), Err(Error::NotSup));
    assert_eq!(radio.recv_bytes(0), Err(Error::NotSup));
    assert_eq!(radio.send("part", rzmq_core::SNDMORE), Err(Error::Inval));
    let mut m = Msg::new();
    assert_eq!(m.set_group(vec![b'x'; 256]), Err(Error::Inval));
    let mut sub = sock(&ctx, SocketType::Sub);
    assert_eq!(sub.join("g"), Err(Error::NotSup));
}

#[test]
fn udp_is_for_radio_dish_and_dgram_in_libzmqs_directions() {
    let ctx = Context::new();
    let mut push = sock(&ctx, SocketType::Push);
    assert_eq!(
        push.connect("udp://127.0.0.1:5555"),
        Err(Error::NoCompatProto)
    );
    assert_eq!(push.bind("udp://127.0.0.1:*"), Err(Error::NoCompatProto));
    // RADIO connects, DISH and DGRAM bind (libzmq 4.3.5).
    let mut radio = sock(&ctx, SocketType::Radio);
    assert_eq!(radio.bind("udp://127.0.0.1:*"), Err(Error::NoCompatProto));
    let mut dish = sock(&ctx, SocketType::Dish);
    assert_eq!(
        dish.connect("udp://127.0.0.1:5555"),
        Err(Error::NoCompatProto)
    );
    let mut dgram = sock(&ctx, SocketType::Dgram);
    assert_eq!(
        dgram.connect("udp://127.0.0.1:5555"),
        Err(Error::NoCompatProto)
    );
    // Malformed addresses.
    assert_eq!(dish.bind("udp://127.0.0.1"), Err(Error::Inval));
    assert_eq!(dish.bind("udp://127.0.0.1;127.0.0.2:5"), Err(Error::Inval));
    assert_eq!(dish.bind("udp://nonic0;239.0.0.1:5"), Err(Error::NoDev));
    // An address of no local interface (TEST-NET-1).
    assert_eq!(dish.bind("udp://192.0.2.1:5555"), Err(Error::AddrNotAvail));
    // A bound udp endpoint unbinds by its LAST_ENDPOINT, and its port is free again.
    dish.bind("udp://127.0.0.1:*").unwrap();
    let ep = dish.last_endpoint().to_string();
    assert!(ep.starts_with("udp://127.0.0.1:") && !ep.ends_with(":*") && !ep.ends_with(":0"));
    dish.unbind(&ep).unwrap();
    assert_eq!(dish.unbind(&ep), Err(Error::NoEnt));
}

#[test]
fn dish_resends_its_joins_after_a_reconnect() {
    let ctx = Context::new();
    let mut radio = sock(&ctx, SocketType::Radio);
    radio.bind("tcp://127.0.0.1:*").unwrap();
    let ep = radio.last_endpoint().to_string();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.set_option_i32(opt::RECONNECT_IVL, 20).unwrap();
    dish.join("g").unwrap();
    dish.connect(&ep).unwrap();
    let m = first_delivery(&mut radio, &mut dish, "g");
    assert_eq!(m.group(), b"g");
    drain(&mut dish);

    // The RADIO goes away and a new one binds the same port: the DISH reconnects and joins
    // again, without the application asking.
    radio.close();
    let mut radio = sock(&ctx, SocketType::Radio);
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = radio.bind(&ep) {
        assert!(Instant::now() < deadline, "rebind: {e:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = first_delivery(&mut radio, &mut dish, "g");
    assert_eq!((m.data(), m.group()), (&b"probe"[..], &b"g"[..]));
}

#[test]
fn radio_nodrop_option_is_accepted() {
    let ctx = Context::new();
    let mut radio = sock(&ctx, SocketType::Radio);
    radio.set_option_i32(opt::XPUB_NODROP, 1).unwrap();
    assert_eq!(
        radio.set_option_i32(opt::XPUB_NODROP, -1),
        Err(Error::Inval)
    );
    // No DISH joined: nothing to wait for.
    radio.send_msg(grouped("g", "x"), 0).unwrap();
}

#[test]
fn dgram_echo_over_udp() {
    let ctx = Context::new();
    let mut server = sock(&ctx, SocketType::Dgram);
    server.bind("udp://127.0.0.1:*").unwrap();
    let server_addr = server
        .last_endpoint()
        .strip_prefix("udp://")
        .unwrap()
        .to_string();
    let mut client = sock(&ctx, SocketType::Dgram);
    client.bind("udp://127.0.0.1:*").unwrap();
    let client_addr = client
        .last_endpoint()
        .strip_prefix("udp://")
        .unwrap()
        .to_string();

    // A lone body or a third frame is refused.
    assert_eq!(client.send("body", 0), Err(Error::Inval));

    for i in 0..5u8 {
        let body = vec![i; 100 * usize::from(i) + 1];
        client
            .send_multipart([server_addr.as_bytes(), &body], 0)
            .unwrap();
        let parts = server.recv_multipart(0).unwrap();
        assert_eq!(parts.len(), 2);
        // libzmq's address frame: "ip:port" and a NUL.
        assert_eq!(parts[0].data(), format!("{client_addr}\0").as_bytes());
        assert_eq!(parts[1].data(), &body[..]);
        // Echo to the address as received.
        server.send_multipart([parts[0].data(), &body], 0).unwrap();
        let back = client.recv_multipart(0).unwrap();
        assert_eq!(back[0].data(), format!("{server_addr}\0").as_bytes());
        assert_eq!(back[1].data(), &body[..]);
    }
    // An address that does not parse is dropped by the endpoint; the socket goes on.
    client
        .send_multipart([&b"not-an-address"[..], b"x"], 0)
        .unwrap();
    client
        .send_multipart([server_addr.as_bytes(), b"after"], 0)
        .unwrap();
    assert_eq!(server.recv_multipart(0).unwrap()[1].data(), b"after");
}

#[test]
fn malformed_datagrams_do_not_reach_the_dish() {
    let ctx = Context::new();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.bind("udp://127.0.0.1:*").unwrap();
    dish.join("g").unwrap();
    let to = dish
        .last_endpoint()
        .strip_prefix("udp://")
        .unwrap()
        .to_string();
    let raw = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    raw.send_to(b"", &to).unwrap();
    raw.send_to(b"\x40too short", &to).unwrap();
    raw.send_to(&vec![1u8; 9000], &to).unwrap();
    raw.send_to(b"\x01hnot joined", &to).unwrap();
    raw.send_to(b"\x01gok", &to).unwrap();
    let m = dish.recv_msg(0).unwrap();
    assert_eq!((m.data(), m.group()), (&b"ok"[..], &b"g"[..]));
    assert_eq!(
        dish.recv_msg(rzmq_core::DONTWAIT).unwrap_err(),
        Error::Again
    );
}

/// Whether this host delivers multicast on loopback to a plain socket (some containers have no
/// multicast route); the reason when not.
fn multicast_on_loopback(group: &str) -> Result<(), String> {
    use std::net::{Ipv4Addr, UdpSocket};
    let g: Ipv4Addr = group.parse().unwrap();
    let rx = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    rx.join_multicast_v4(&g, &Ipv4Addr::LOCALHOST)
        .map_err(|e| format!("join: {e}"))?;
    let port = rx.local_addr().unwrap().port();
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    tx.set_multicast_loop_v4(true).map_err(|e| e.to_string())?;
    tx.send_to(b"x", (g, port))
        .map_err(|e| format!("send: {e}"))?;
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 4];
    rx.recv_from(&mut b)
        .map(|_| ())
        .map_err(|e| format!("receive: {e}"))
}

#[test]
fn radio_dish_over_udp_multicast_on_loopback() {
    let group = "239.255.42.99";
    if let Err(why) = multicast_on_loopback(group) {
        println!("SKIPPED: this kernel does not deliver multicast on lo ({why})");
        return;
    }
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let ctx = Context::new();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.bind(&format!("udp://127.0.0.1;{group}:{port}"))
        .unwrap();
    dish.join("mc").unwrap();
    let mut radio = sock(&ctx, SocketType::Radio);
    radio.set_option_i32(opt::MULTICAST_HOPS, 1).unwrap();
    radio
        .connect(&format!("udp://127.0.0.1;{group}:{port}"))
        .unwrap();
    let m = first_delivery(&mut radio, &mut dish, "mc");
    assert_eq!((m.data(), m.group()), (&b"probe"[..], &b"mc"[..]));
}

/// One ZMTP frame from a raw stream: (flags, body).
fn read_frame(s: &mut std::net::TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    use std::io::Read;
    let mut h = [0u8; 1];
    s.read_exact(&mut h)?;
    let len = if h[0] & 0x02 != 0 {
        let mut l = [0u8; 8];
        s.read_exact(&mut l)?;
        u64::from_be_bytes(l) as usize
    } else {
        let mut l = [0u8; 1];
        s.read_exact(&mut l)?;
        usize::from(l[0])
    };
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok((h[0], body))
}

/// A raw ZMTP 3.1 peer of socket type `ty` connected to `ep` (`tcp://host:port`), past the
/// peer's greeting and READY.
fn raw_peer(ep: &str, ty: &[u8]) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(ep.strip_prefix("tcp://").unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = rzmq_tests::zmtp_greeting(b"NULL");
    hello.extend_from_slice(&rzmq_tests::zmtp_ready(ty));
    s.write_all(&hello).unwrap();
    let mut g = [0u8; 64];
    s.read_exact(&mut g).unwrap();
    let (flags, ready) = read_frame(&mut s).unwrap();
    assert_eq!((flags, &ready[..6]), (0x04, &b"\x05READY"[..]));
    s
}

#[test]
fn wire_form_towards_a_raw_dish_is_libzmqs() {
    use std::io::Write;
    let ctx = Context::new();
    let mut radio = sock(&ctx, SocketType::Radio);
    radio.bind("tcp://127.0.0.1:*").unwrap();
    let mut dish = raw_peer(radio.last_endpoint(), b"DISH");
    // libzmq's dish_session_t: JOIN as a command frame, "\x04JOIN" + group.
    dish.write_all(b"\x04\x06\x04JOINg").unwrap();
    dish.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        radio.send_msg(grouped("other", "no"), 0).unwrap();
        radio.send_msg(grouped("g", "hello"), 0).unwrap();
        match read_frame(&mut dish) {
            Ok(f) => break f,
            Err(_) => assert!(Instant::now() < deadline, "nothing sent to the raw DISH"),
        }
    };
    dish.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // radio_session_t: the group as a frame with MORE, then the body.
    assert_eq!(first, (0x01, b"g".to_vec()));
    assert_eq!(read_frame(&mut dish).unwrap(), (0x00, b"hello".to_vec()));
    // LEAVE: the RADIO stops sending the group. Probes of "z" until its JOIN took effect.
    dish.write_all(b"\x04\x07\x05LEAVEg").unwrap();
    dish.write_all(b"\x04\x06\x04JOINz").unwrap();
    dish.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        radio.send_msg(grouped("z", "zz"), 0).unwrap();
        let Ok((flags, body)) = read_frame(&mut dish) else {
            assert!(Instant::now() < deadline, "the JOIN of z took no effect");
            continue;
        };
        assert_eq!(flags, 0x01);
        let (_, rest) = read_frame(&mut dish).unwrap();
        if body == b"z" {
            assert_eq!(rest, b"zz");
            break;
        }
        assert_eq!((body, rest), (b"g".to_vec(), b"hello".to_vec()));
    }
    dish.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    radio.send_msg(grouped("g", "late"), 0).unwrap();
    radio.send_msg(grouped("z", "end"), 0).unwrap();
    loop {
        let (_, g) = read_frame(&mut dish).unwrap();
        let (_, b) = read_frame(&mut dish).unwrap();
        assert_eq!(g, b"z", "a left group was sent");
        if b == b"end" {
            break;
        }
    }
}

#[test]
fn wire_form_from_a_raw_radio_is_libzmqs() {
    use std::io::{Read, Write};
    let ctx = Context::new();
    let mut dish = sock(&ctx, SocketType::Dish);
    dish.bind("tcp://127.0.0.1:*").unwrap();
    dish.join("g").unwrap();
    let mut radio = raw_peer(dish.last_endpoint(), b"RADIO");
    // The DISH attaches the connection's pipe (and sends its joins) when its application
    // calls in, as libzmq's socket does.
    radio
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let join = loop {
        let _ = dish.events();
        if let Ok(f) = read_frame(&mut radio) {
            break f;
        }
        assert!(Instant::now() < deadline, "no JOIN from the DISH");
    };
    radio
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(join, (0x04, b"\x04JOINg".to_vec()));
    radio.write_all(b"\x01\x01h\x00\x02no").unwrap();
    radio.write_all(b"\x01\x01g\x00\x02hi").unwrap();
    let m = dish.recv_msg(0).unwrap();
    assert_eq!((m.data(), m.group()), (&b"hi"[..], &b"g"[..]));
    // A group frame without MORE breaks the form: the DISH delivers nothing and closes the
    // connection. It reads the frame when its application calls in (a thread-safe socket has
    // no direct path from the stream), so it is called until the RADIO sees the close.
    radio.write_all(b"\x00\x01g").unwrap();
    radio
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut byte = [0u8; 1];
    loop {
        assert_eq!(
            dish.recv_msg(rzmq_core::DONTWAIT).unwrap_err(),
            Error::Again
        );
        match radio.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => panic!("the DISH sent after a malformed message"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{e}"
            ),
        }
        assert!(Instant::now() < deadline, "the DISH kept the connection");
    }
}

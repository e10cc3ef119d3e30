//! Hostile peers: malformed ZMTP closes that connection with a monitor event; the socket keeps
//! serving its other peers and the process survives.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rzmq_core::monitor;
use rzmq_core::options as opt;
use rzmq_core::{Context, Socket, SocketType};
use rzmq_tests::{zmtp_greeting as greeting, zmtp_ready as ready, TIMEOUT_MS};

struct Server {
    _ctx: Context,
    pull: Socket,
    mon: Socket,
    port: u16,
    endpoint: String,
    good: Socket,
}

fn server(maxmsgsize: i64) -> Server {
    let ctx = Context::new();
    let mut pull = ctx.socket(SocketType::Pull).unwrap();
    pull.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    pull.set_option_raw(opt::MAXMSGSIZE, &maxmsgsize.to_ne_bytes())
        .unwrap();
    let mon_ep = format!(
        "inproc://hostile-mon-{}",
        std::process::id() as u64 * 1000 + rand_small()
    );
    pull.monitor(Some(&mon_ep), monitor::EVENT_ALL).unwrap();
    let mut mon = ctx.socket(SocketType::Pair).unwrap();
    mon.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    mon.connect(&mon_ep).unwrap();
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let endpoint = pull.last_endpoint().to_string();
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    // A well-behaved peer that must keep working throughout.
    let mut good = ctx.socket(SocketType::Push).unwrap();
    good.connect(&endpoint).unwrap();
    Server {
        _ctx: ctx,
        pull,
        mon,
        port,
        endpoint,
        good,
    }
}

fn rand_small() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Server {
    fn still_serves(&mut self, tag: &str) {
        self.good.send(tag, 0).unwrap();
        assert_eq!(self.pull.recv_bytes(0).unwrap(), tag.as_bytes());
    }

    /// Waits for one of `wanted` among the monitor events.
    fn expect_event(&mut self, wanted: &[u16]) -> (u16, u32) {
        loop {
            let parts = self.mon.recv_multipart(0).expect("monitor event");
            let (ev, val) = monitor::parse_event(parts[0].data()).unwrap();
            if wanted.contains(&ev) {
                return (ev, val);
            }
        }
    }
}

/// Sends `bytes` and checks the server closes the connection.
fn assert_closed(port: u16, bytes: &[u8]) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("connection not closed by the server: {e}"),
        }
    }
}

#[test]
fn bad_greeting_closes_with_event() {
    let mut srv = server(-1);
    srv.still_serves("before");
    assert_closed(srv.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n................................................................");
    srv.expect_event(&[
        monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL,
        monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    ]);
    srv.still_serves("after bad greeting");
}

#[test]
fn unknown_mechanism_closes() {
    let mut srv = server(-1);
    assert_closed(srv.port, &greeting(b"BOGUS"));
    srv.expect_event(&[
        monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL,
        monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    ]);
    srv.still_serves("after unknown mechanism");
}

#[test]
fn incompatible_socket_type_closes() {
    let mut srv = server(-1);
    let mut bytes = greeting(b"NULL");
    bytes.extend_from_slice(&ready(b"PUB"));
    assert_closed(srv.port, &bytes);
    srv.expect_event(&[
        monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL,
        monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    ]);
    srv.still_serves("after incompatible type");
}

#[test]
fn frame_over_maxmsgsize_closes() {
    let mut srv = server(1000);
    srv.still_serves("small ok");
    let mut bytes = greeting(b"NULL");
    bytes.extend_from_slice(&ready(b"PUSH"));
    bytes.push(0x02); // long frame
    bytes.extend_from_slice(&5000u64.to_be_bytes());
    bytes.extend_from_slice(&[7u8; 5000]);
    assert_closed(srv.port, &bytes);
    srv.expect_event(&[monitor::EVENT_DISCONNECTED]);
    srv.still_serves("after oversize");
}

#[test]
fn huge_length_claims_allocate_nothing_and_close() {
    let mut srv = server(-1);
    for claim in [u64::MAX, 1u64 << 63, (1u64 << 62) + 5] {
        let mut bytes = greeting(b"NULL");
        bytes.extend_from_slice(&ready(b"PUSH"));
        bytes.push(0x02);
        bytes.extend_from_slice(&claim.to_be_bytes());
        bytes.extend_from_slice(&[1u8; 100]);
        // Either rejected at once (invalid size) or the peer vanishes mid-frame: both close.
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(&bytes).unwrap();
        drop(s);
        srv.expect_event(&[monitor::EVENT_DISCONNECTED]);
        srv.still_serves("after huge claim");
    }
}

#[test]
fn peer_vanishing_mid_frame_loses_nothing_else() {
    let mut srv = server(-1);
    let mut bytes = greeting(b"NULL");
    bytes.extend_from_slice(&ready(b"PUSH"));
    bytes.extend_from_slice(&[
        0x00, 10, b'h', b'e', b'l', b'l', b'o', b'!', b'!', b'!', b'!', b'!',
    ]);
    bytes.extend_from_slice(&[0x00, 200, b'p', b'a', b'r', b't']);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(&bytes).unwrap();
    // The complete frame is delivered, the cut one never is.
    let got = vec![srv.pull.recv_bytes(0).unwrap()];
    drop(s);
    srv.expect_event(&[monitor::EVENT_DISCONNECTED]);
    srv.still_serves("after vanish");
    assert_eq!(got, vec![b"hello!!!!!".to_vec()]);
    let _ = &srv.endpoint;
}

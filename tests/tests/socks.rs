//! ZMQ_SOCKS_PROXY: tcp connects through a SOCKS5 proxy (a small one written here with
//! std::net and threads), to rzmq and libzmq peers, with and without username/password, and
//! the failures that send the connecter back to its reconnect loop.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rzmq_core::monitor;
use rzmq_core::options as opt;
use rzmq_core::{Context, SocketType};
use rzmq_tests::{inproc_endpoint, payload, TIMEOUT_MS};

/// What the proxy does with one client connection.
#[derive(Clone, Debug)]
enum Script {
    /// Serve it: authenticate when credentials are configured, connect, relay.
    Serve,
    /// Accept and say nothing (the client's connect timeout must end it).
    Silent,
    /// Refuse the credentials (RFC 1929 status 1).
    RejectAuth,
    /// Answer the CONNECT with this failure code.
    RejectConnect(u8),
    /// Answer the CONNECT with these bytes (a malformed reply).
    Reply(Vec<u8>),
}

/// What the proxy saw on one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    methods: Vec<u8>,
    auth: Option<(Vec<u8>, Vec<u8>)>,
    atyp: u8,
    host: Vec<u8>,
    port: u16,
}

struct Proxy {
    addr: SocketAddr,
    seen: mpsc::Receiver<Seen>,
    accepted: Arc<Mutex<usize>>,
}

impl Proxy {
    /// Starts a proxy; connection `i` follows `scripts[i]` (the last one repeats).
    fn start(credentials: Option<(&str, &str)>, scripts: Vec<Script>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = mpsc::channel();
        let accepted = Arc::new(Mutex::new(0usize));
        let count = accepted.clone();
        let creds = credentials.map(|(u, p)| (u.as_bytes().to_vec(), p.as_bytes().to_vec()));
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let n = {
                    let mut c = count.lock().unwrap();
                    *c += 1;
                    *c - 1
                };
                let script = scripts[n.min(scripts.len() - 1)].clone();
                let tx = tx.clone();
                let creds = creds.clone();
                thread::spawn(move || {
                    let _ = serve(conn, script, creds, tx);
                });
            }
        });
        Proxy {
            addr,
            seen,
            accepted,
        }
    }

    /// The `ZMQ_SOCKS_PROXY` value for this proxy.
    fn option(&self) -> String {
        self.addr.to_string()
    }

    /// The next CONNECT request the proxy saw.
    fn next_seen(&self) -> Seen {
        self.seen
            .recv_timeout(Duration::from_millis(TIMEOUT_MS as u64))
            .expect("the proxy saw no CONNECT request")
    }

    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

fn read_n(s: &mut TcpStream, n: usize) -> std::io::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(b)
}

/// One proxy connection, RFC 1928/1929 server side.
fn serve(
    mut c: TcpStream,
    script: Script,
    creds: Option<(Vec<u8>, Vec<u8>)>,
    tx: mpsc::Sender<Seen>,
) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(20)))?;
    if matches!(script, Script::Silent) {
        // Hold the connection until the client gives up on it.
        let mut buf = [0u8; 64];
        while c.read(&mut buf)? > 0 {}
        return Ok(());
    }
    let head = read_n(&mut c, 2)?;
    assert_eq!(head[0], 5, "greeting version");
    let methods = read_n(&mut c, head[1] as usize)?;
    let want = if creds.is_some() { 2 } else { 0 };
    let method = if methods.contains(&want) { want } else { 0xff };
    c.write_all(&[5, method])?;
    if method == 0xff {
        return Ok(());
    }
    let mut auth = None;
    if method == 2 {
        let v = read_n(&mut c, 2)?;
        assert_eq!(v[0], 1, "auth version");
        let user = read_n(&mut c, v[1] as usize)?;
        let plen = read_n(&mut c, 1)?[0] as usize;
        let pass = read_n(&mut c, plen)?;
        let ok = creds.as_ref() == Some(&(user.clone(), pass.clone()))
            && !matches!(script, Script::RejectAuth);
        c.write_all(&[1, if ok { 0 } else { 1 }])?;
        auth = Some((user, pass));
        if !ok {
            return Ok(());
        }
    }
    let req = read_n(&mut c, 4)?;
    assert_eq!(&req[..3], &[5, 1, 0], "CONNECT request header");
    let atyp = req[3];
    let host = match atyp {
        1 => read_n(&mut c, 4)?,
        4 => read_n(&mut c, 16)?,
        3 => {
            let n = read_n(&mut c, 1)?[0] as usize;
            read_n(&mut c, n)?
        }
        other => panic!("bad ATYP {other}"),
    };
    let p = read_n(&mut c, 2)?;
    let port = u16::from_be_bytes([p[0], p[1]]);
    let _ = tx.send(Seen {
        methods,
        auth,
        atyp,
        host: host.clone(),
        port,
    });
    // Everything the tests name lives on 127.0.0.1 (IPv6 and names included: the sandbox may
    // have no IPv6).
    let ip = match atyp {
        1 => Ipv4Addr::new(host[0], host[1], host[2], host[3]),
        _ => Ipv4Addr::LOCALHOST,
    };
    match script {
        Script::RejectConnect(code) => {
            c.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0])?;
            return Ok(());
        }
        Script::Reply(bytes) => {
            c.write_all(&bytes)?;
            thread::sleep(Duration::from_millis(200));
            return Ok(());
        }
        _ => {}
    }
    let remote = match TcpStream::connect((ip, port)) {
        Ok(r) => r,
        Err(_) => {
            c.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0])?;
            return Ok(());
        }
    };
    // Reply with a domain BND.ADDR on names, IPv6 on IPv6 (as libzmq's test proxy does), so
    // the client parses every address type.
    let bound = remote.local_addr()?;
    let mut reply = vec![5, 0, 0, atyp];
    match atyp {
        1 => reply.extend_from_slice(&[127, 0, 0, 1]),
        4 => reply.extend_from_slice(&Ipv6Addr::LOCALHOST.octets()),
        _ => {
            reply.push(9);
            reply.extend_from_slice(b"localhost");
        }
    }
    reply.extend_from_slice(&bound.port().to_be_bytes());
    c.write_all(&reply)?;
    relay(c, remote)
}

/// Copies bytes both ways until either side closes.
fn relay(c: TcpStream, r: TcpStream) -> std::io::Result<()> {
    c.set_read_timeout(None)?;
    let (mut c2, mut r2) = (c.try_clone()?, r.try_clone()?);
    let up = thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut r2);
        let _ = r2.shutdown(Shutdown::Both);
        let _ = c2.shutdown(Shutdown::Both);
    });
    let (mut c, mut r) = (c, r);
    let _ = std::io::copy(&mut r, &mut c);
    let _ = c.shutdown(Shutdown::Both);
    let _ = r.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

fn rz(ctx: &Context, ty: SocketType) -> rzmq_core::Socket {
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::SNDTIMEO, TIMEOUT_MS).unwrap();
    s.set_option_i32(opt::LINGER, 0).unwrap();
    s
}

/// An rzmq socket that connects through `proxy`.
fn via_proxy(
    ctx: &Context,
    ty: SocketType,
    proxy: &Proxy,
    creds: Option<(&str, &str)>,
) -> rzmq_core::Socket {
    let mut s = rz(ctx, ty);
    s.set_option_raw(opt::SOCKS_PROXY, proxy.option().as_bytes())
        .unwrap();
    if let Some((u, p)) = creds {
        s.set_option_raw(opt::SOCKS_USERNAME, u.as_bytes()).unwrap();
        s.set_option_raw(opt::SOCKS_PASSWORD, p.as_bytes()).unwrap();
    }
    s
}

fn port_of(endpoint: &str) -> u16 {
    endpoint.rsplit(':').next().unwrap().parse().unwrap()
}

/// Request/reply round trips both ways between an rzmq DEALER (through the proxy) and a ROUTER.
fn dealer_router_roundtrips(dealer: &mut rzmq_core::Socket, router: &mut rzmq_core::Socket) {
    for i in 0..5u8 {
        let body = payload(100 + i as usize * 1000, i);
        dealer.send(body.clone(), 0).unwrap();
        let parts = router.recv_multipart(0).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].data(), &body[..]);
        let back = payload(50 + i as usize, i + 100);
        router
            .send(parts[0].data().to_vec(), rzmq_core::SNDMORE)
            .unwrap();
        router.send(back.clone(), 0).unwrap();
        assert_eq!(dealer.recv_bytes(0).unwrap(), back);
    }
}

#[test]
fn through_proxy_to_libzmq_peer_ipv4() {
    let proxy = Proxy::start(None, vec![Script::Serve]);
    let lctx = zmq::Context::new();
    let rep = lctx.socket(zmq::REP).unwrap();
    rep.set_rcvtimeo(TIMEOUT_MS).unwrap();
    rep.set_linger(0).unwrap();
    rep.bind("tcp://127.0.0.1:*").unwrap();
    let ep = rep.get_last_endpoint().unwrap().unwrap();

    let ctx = Context::new();
    let mut req = via_proxy(&ctx, SocketType::Req, &proxy, None);
    req.connect(&ep).unwrap();
    for i in 0..5u8 {
        let body = payload(10 + i as usize * 3000, i);
        req.send(body.clone(), 0).unwrap();
        assert_eq!(rep.recv_bytes(0).unwrap(), body);
        rep.send(&body[..body.len() / 2], 0).unwrap();
        assert_eq!(req.recv_bytes(0).unwrap(), &body[..body.len() / 2]);
    }
    let seen = proxy.next_seen();
    assert_eq!(
        seen,
        Seen {
            methods: vec![0],
            auth: None,
            atyp: 1,
            host: vec![127, 0, 0, 1],
            port: port_of(&ep),
        }
    );
    assert_eq!(proxy.accepted(), 1);
}

#[test]
fn domain_name_with_username_password_to_rzmq_peer() {
    let creds = Some(("someuser", "somepass"));
    let proxy = Proxy::start(creds, vec![Script::Serve]);
    let ctx = Context::new();
    let mut router = rz(&ctx, SocketType::Router);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let port = port_of(router.last_endpoint());

    let mut dealer = via_proxy(&ctx, SocketType::Dealer, &proxy, creds);
    // The name is not resolved here: only the proxy knows it.
    dealer
        .connect(&format!("tcp://rzmq-socks.invalid:{port}"))
        .unwrap();
    dealer_router_roundtrips(&mut dealer, &mut router);
    let seen = proxy.next_seen();
    assert_eq!(seen.methods, vec![2], "only username/password is offered");
    assert_eq!(
        seen.auth,
        Some((b"someuser".to_vec(), b"somepass".to_vec()))
    );
    assert_eq!(seen.atyp, 3);
    assert_eq!(seen.host, b"rzmq-socks.invalid");
    assert_eq!(seen.port, port);
}

#[test]
fn ipv6_target_is_sent_as_ipv6() {
    let proxy = Proxy::start(None, vec![Script::Serve]);
    let ctx = Context::new();
    let mut router = rz(&ctx, SocketType::Router);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let port = port_of(router.last_endpoint());
    let mut dealer = via_proxy(&ctx, SocketType::Dealer, &proxy, None);
    dealer.connect(&format!("tcp://[::1]:{port}")).unwrap();
    dealer_router_roundtrips(&mut dealer, &mut router);
    let seen = proxy.next_seen();
    assert_eq!(seen.atyp, 4);
    assert_eq!(seen.host, Ipv6Addr::LOCALHOST.octets());
    assert_eq!(seen.port, port);
}

/// Monitor events of `s` on a PAIR socket.
fn monitor_of(ctx: &Context, s: &mut rzmq_core::Socket) -> rzmq_core::Socket {
    let ep = inproc_endpoint("socks-mon");
    s.monitor(Some(&ep), monitor::EVENT_ALL).unwrap();
    let mut m = rz(ctx, SocketType::Pair);
    m.connect(&ep).unwrap();
    m
}

/// Reads monitor events until `wanted`; returns the endpoints of all events seen on the way.
fn wait_event(mon: &mut rzmq_core::Socket, wanted: u16) -> Vec<(u16, String)> {
    let mut seen = Vec::new();
    loop {
        let parts = mon.recv_multipart(0).expect("monitor event");
        let (ev, _) = monitor::parse_event(parts[0].data()).unwrap();
        seen.push((ev, String::from_utf8_lossy(parts[1].data()).into_owned()));
        if ev == wanted {
            return seen;
        }
    }
}

/// A first attempt that fails as `first` says, then a served one: the connecter closes the
/// attempt, reports CLOSED and CONNECT_RETRIED (naming the proxy, as libzmq does) and gets
/// through on the retry.
fn fails_then_recovers(first: Script, creds: Option<(&str, &str)>, connect_timeout: i32) {
    let proxy = Proxy::start(creds, vec![first, Script::Serve]);
    let ctx = Context::new();
    let mut router = rz(&ctx, SocketType::Router);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let port = port_of(router.last_endpoint());
    let mut dealer = via_proxy(&ctx, SocketType::Dealer, &proxy, creds);
    dealer.set_option_i32(opt::RECONNECT_IVL, 50).unwrap();
    if connect_timeout > 0 {
        dealer
            .set_option_i32(opt::CONNECT_TIMEOUT, connect_timeout)
            .unwrap();
    }
    let mut mon = monitor_of(&ctx, &mut dealer);
    dealer.connect(&format!("tcp://127.0.0.1:{port}")).unwrap();
    let events = wait_event(&mut mon, monitor::EVENT_CONNECT_RETRIED);
    let proxy_ep = format!("tcp://{}", proxy.option());
    assert!(
        events.iter().all(|(_, e)| *e == proxy_ep),
        "events name the proxy: {events:?}"
    );
    if connect_timeout == 0 {
        assert!(
            events.iter().any(|(ev, _)| *ev == monitor::EVENT_CLOSED),
            "the failed attempt is closed: {events:?}"
        );
    }
    let events = wait_event(&mut mon, monitor::EVENT_CONNECTED);
    assert!(events.iter().all(|(_, e)| *e == proxy_ep), "{events:?}");
    dealer_router_roundtrips(&mut dealer, &mut router);
    assert_eq!(proxy.accepted(), 2);
}

#[test]
fn auth_failure_is_retried() {
    fails_then_recovers(Script::RejectAuth, Some(("u", "p")), 0);
}

#[test]
fn connect_refused_by_proxy_is_retried() {
    fails_then_recovers(Script::RejectConnect(5), None, 0);
}

#[test]
fn malformed_reply_is_retried() {
    // Version 4, then a non-zero reserved byte, then an unknown address type.
    fails_then_recovers(Script::Reply(vec![4, 0, 0, 1, 0, 0, 0, 0, 0, 0]), None, 0);
    fails_then_recovers(Script::Reply(vec![5, 0, 7, 1, 0, 0, 0, 0, 0, 0]), None, 0);
    fails_then_recovers(Script::Reply(vec![5, 0, 0, 9, 0, 0, 0, 0, 0, 0]), None, 0);
    // A truncated reply, then the proxy closes.
    fails_then_recovers(Script::Reply(vec![5, 0, 0, 3, 20, b'x']), None, 0);
}

#[test]
fn silent_proxy_hits_connect_timeout() {
    fails_then_recovers(Script::Silent, None, 300);
}

#[test]
fn unreachable_proxy_is_retried_until_it_listens() {
    // Reserve a port, close it, start connecting, then listen there.
    let spare = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = spare.local_addr().unwrap();
    drop(spare);
    let ctx = Context::new();
    let mut router = rz(&ctx, SocketType::Router);
    router.bind("tcp://127.0.0.1:*").unwrap();
    let port = port_of(router.last_endpoint());
    let mut dealer = rz(&ctx, SocketType::Dealer);
    dealer
        .set_option_raw(opt::SOCKS_PROXY, addr.to_string().as_bytes())
        .unwrap();
    dealer.set_option_i32(opt::RECONNECT_IVL, 50).unwrap();
    let mut mon = monitor_of(&ctx, &mut dealer);
    dealer.connect(&format!("tcp://127.0.0.1:{port}")).unwrap();
    wait_event(&mut mon, monitor::EVENT_CONNECT_RETRIED);
    // Now the proxy comes up on that port.
    let listener = TcpListener::bind(addr).unwrap();
    let (tx, seen) = mpsc::channel();
    thread::spawn(move || {
        if let Ok((c, _)) = listener.accept() {
            let _ = serve(c, Script::Serve, None, tx);
        }
    });
    dealer_router_roundtrips(&mut dealer, &mut router);
    let seen = seen
        .recv_timeout(Duration::from_millis(TIMEOUT_MS as u64))
        .unwrap();
    assert_eq!((seen.atyp, seen.port), (1, port));
}

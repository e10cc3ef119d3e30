//! Not part of the API: entry points for fuzz targets and tests; may change without notice.
//!
//! Each `fuzz_*` function takes arbitrary bytes and drives one parser of untrusted input through
//! its most stable public surface (a [`Connection`](crate::zmtp::Connection) fed as from a
//! socket, a SOCKS `Handshake` fed as from a proxy, ...). None may
//! panic, whatever the bytes; errors are expected and dropped. The matching `seed_*` functions produce well-formed inputs (recorded from genuine
//! peers where there is one) from which a fuzzer starts (`fuzz/examples/gen_corpus.rs`).
//!
//! Input layouts are documented per function; they are what `fuzz/fuzz_targets/*.rs` pass on
//! unchanged.

use std::time::{Duration, Instant};

use crate::endpoint::{self, Endpoint, ResolveOpts};
use crate::msg::Msg;
use crate::options::Options;
use crate::socks::{Handshake, Target};
use crate::z85::{public_key, KEY_LEN};
use crate::zmtp::{Config, Connection, CurveKeys, Event, Mechanism, SocketType, ZmtpError};

/// The fixed CURVE server secret key of the scenarios (a test key, never a real one).
const SERVER_SECRET: [u8; KEY_LEN] = [0x11; KEY_LEN];
/// The fixed CURVE client secret key of the scenarios.
const CLIENT_SECRET: [u8; KEY_LEN] = [0x22; KEY_LEN];

/// One ZMTP scenario: the connection under test and the genuine peer that the seeds record.
#[derive(Clone, Copy)]
struct Scenario {
    mechanism: Mechanism,
    /// The connection under test is the PLAIN/CURVE server.
    server: bool,
    ours: SocketType,
    peer: SocketType,
    /// The connection under test sets `ZMQ_ZAP_DOMAIN` (NULL asks ZAP then).
    zap: bool,
    maxmsgsize: i64,
    heartbeat: bool,
}

const fn sc(mechanism: Mechanism, server: bool, ours: SocketType, peer: SocketType) -> Scenario {
    Scenario {
        mechanism,
        server,
        ours,
        peer,
        zap: false,
        maxmsgsize: -1,
        heartbeat: false,
    }
}

const SCENARIOS: [Scenario; 8] = [
    Scenario {
        heartbeat: true,
        ..sc(
            Mechanism::Null,
            false,
            SocketType::Dealer,
            SocketType::Router,
        )
    },
    Scenario {
        zap: true,
        ..sc(
            Mechanism::Null,
            false,
            SocketType::Router,
            SocketType::Dealer,
        )
    },
    sc(Mechanism::Null, false, SocketType::XPub, SocketType::Sub),
    Scenario {
        maxmsgsize: 1000,
        ..sc(Mechanism::Null, false, SocketType::Pull, SocketType::Push)
    },
    sc(Mechanism::Plain, true, SocketType::Rep, SocketType::Req),
    sc(Mechanism::Plain, false, SocketType::Req, SocketType::Rep),
    sc(
        Mechanism::Curve,
        true,
        SocketType::Router,
        SocketType::Dealer,
    ),
    sc(
        Mechanism::Curve,
        false,
        SocketType::Dealer,
        SocketType::Router,
    ),
];

/// The scenario of [`fuzz_zmtp`] whose connection is a CURVE server (the next one: client).
pub const ZMTP_CURVE_SERVER: u8 = 6;

/// How many ZMTP scenarios [`fuzz_zmtp`] knows (its first input byte is taken modulo this).
pub const ZMTP_SCENARIOS: u8 = SCENARIOS.len() as u8;

fn curve_keys(server: bool) -> CurveKeys {
    let server_public = public_key(&SERVER_SECRET);
    if server {
        CurveKeys {
            public_key: server_public,
            secret_key: SERVER_SECRET,
            server_key: [0; KEY_LEN],
        }
    } else {
        CurveKeys {
            public_key: public_key(&CLIENT_SECRET),
            secret_key: CLIENT_SECRET,
            server_key: server_public,
        }
    }
}

fn config(mechanism: Mechanism, server: bool, t: SocketType, zap: bool, maxmsgsize: i64) -> Config {
    let mut c = Config::new(t);
    c.mechanism = mechanism;
    c.as_server = server;
    c.maxmsgsize = maxmsgsize;
    c.routing_id = b"fuzz-id".to_vec();
    c.metadata = vec![("X-Fuzz".into(), b"1".to_vec())];
    if zap {
        c.zap_domain = b"global".to_vec();
    }
    match mechanism {
        Mechanism::Plain if !server => {
            c.plain.username = b"admin".to_vec();
            c.plain.password = b"secret".to_vec();
        }
        Mechanism::Curve => c.curve = curve_keys(server),
        _ => {}
    }
    c
}

impl Scenario {
    fn ours(&self) -> Config {
        let mut c = config(
            self.mechanism,
            self.server,
            self.ours,
            self.zap,
            self.maxmsgsize,
        );
        if self.heartbeat {
            c.heartbeat_ivl = Some(Duration::from_millis(100));
            c.heartbeat_ttl = Some(Duration::from_secs(1));
        }
        c
    }

    fn peer(&self) -> Config {
        let server = self.mechanism != Mechanism::Null && !self.server;
        config(self.mechanism, server, self.peer, false, -1)
    }
}

/// A ZAP reply of `status` as a handler sends it (`User-Id` and one metadata property).
fn zap_frames(status: &[u8]) -> Vec<Msg> {
    let md = [&[6u8][..], b"X-Role", &[0, 0, 0, 5], b"admin"].concat();
    let parts: [&[u8]; 7] = [b"", b"1.0", b"1", status, b"OK", b"user", &md];
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut m = Msg::copy_from(p);
            m.set_more(i < parts.len() - 1);
            m
        })
        .collect()
}

/// Decodes every event now available: approves ZAP requests, answers the handshake with one
/// message and, when `echo`, sends messages back (so the encoder, boxes included, runs too).
fn service(c: &mut Connection, echo: bool) -> Result<(), ZmtpError> {
    loop {
        match c.poll_event()? {
            Some(Event::Ready(_)) => c.send(Msg::copy_from(b"ready"))?,
            Some(Event::Message(m)) => {
                if echo && m.len() < 4096 {
                    c.send(Msg::copy_from(m.data()))?;
                }
            }
            Some(Event::Command(_)) => {}
            None => {
                if c.take_zap_request().is_none() {
                    return Ok(());
                }
                c.zap_reply(&zap_frames(b"200"))?;
            }
        }
    }
}

/// Feeds `bytes` to `c` (at most `chunk` at a time), servicing it after each read.
fn feed(
    c: &mut Connection,
    bytes: &[u8],
    chunk: usize,
    echo: bool,
    now: Instant,
) -> Result<(), ZmtpError> {
    for piece in bytes.chunks(chunk.max(1)) {
        let mut rest = piece;
        while !rest.is_empty() {
            let buf = c.recv_buffer();
            let n = buf.len().min(rest.len());
            buf[..n].copy_from_slice(&rest[..n]);
            c.received(n, now)?;
            rest = &rest[n..];
            service(c, echo)?;
        }
    }
    Ok(())
}

fn drain(c: &mut Connection) -> Vec<u8> {
    let mut v = Vec::new();
    while c.has_output() {
        if c.write_to(&mut v).is_err() {
            break;
        }
    }
    v
}

/// A ZMTP connection fed bytes as from its socket. Layout: `[scenario, chunk, bytes...]`:
/// `scenario` (mod [`ZMTP_SCENARIOS`]) picks the mechanism, role and socket types (NULL with and
/// without ZAP, XPUB receiving subscriptions, a `ZMQ_MAXMSGSIZE`, PLAIN and CURVE server and
/// client); `chunk` the read size (0: one read). Covers the greeting, the security handshakes
/// (PLAIN `HELLO`/`WELCOME`/`INITIATE`, CURVE `HELLO`/`WELCOME`/`INITIATE`/`READY` and
/// `MESSAGE` boxes), `READY` metadata, frame and command decoding, `PING`/`PONG`, `SUBSCRIBE`/
/// `CANCEL` and heartbeat timers.
pub fn fuzz_zmtp(data: &[u8]) {
    let [s, chunk, bytes @ ..] = data else {
        return;
    };
    let sc = SCENARIOS[usize::from(*s % ZMTP_SCENARIOS)];
    let chunk = if *chunk == 0 {
        usize::MAX
    } else {
        usize::from(*chunk)
    };
    let mut now = Instant::now();
    let mut c = Connection::new(sc.ours(), now);
    drain(&mut c);
    let _ = feed(&mut c, bytes, chunk, true, now);
    for _ in 0..3 {
        now += Duration::from_millis(150);
        if c.poll_timeout().is_some_and(|t| t <= now) && c.handle_timeout(now).is_err() {
            break;
        }
    }
    drain(&mut c);
}

/// A CURVE connection fed bytes as from its socket. Layout: `[role, chunk, bytes...]`: `role`
/// (even: the connection under test is the CURVE server, odd: the client), then as
/// [`fuzz_zmtp`] from `chunk` on. The `curve` target's own layout, so the fuzzer spends all its
/// time in the CURVE handshake and boxes.
pub fn fuzz_curve(data: &[u8]) {
    if let [role, rest @ ..] = data {
        let mut input = Vec::with_capacity(data.len());
        input.push(ZMTP_CURVE_SERVER + (role & 1));
        input.extend_from_slice(rest);
        fuzz_zmtp(&input);
    }
}

/// A fuzz target: its name (`fuzz/fuzz_targets/<name>.rs`, `fuzz/corpus/<name>/`) and entry point.
pub type FuzzTarget = (&'static str, fn(&[u8]));

/// The fuzz targets whose entry points live here.
pub const FUZZ_TARGETS: [FuzzTarget; 6] = [
    ("zmtp", fuzz_zmtp),
    ("curve", fuzz_curve),
    ("zap_reply", fuzz_zap_reply),
    ("socks", fuzz_socks),
    ("endpoint", fuzz_endpoint),
    ("sockopt", fuzz_sockopt),
];

/// Runs `f` on every committed input of fuzz target `target` (the files under
/// `corpus/<target>/`, seeds and `regress-*` crash inputs alike) and returns how many there
/// were. What once crashed a fuzzer stays a `cargo test` failure, not only a fuzz-run one.
pub fn replay_corpus(corpus: &std::path::Path, target: &str, f: fn(&[u8])) -> usize {
    let dir = corpus.join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    files.sort();
    for file in &files {
        let input = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        f(&input);
    }
    files.len()
}

/// Runs the connection under test of scenario `s` against its genuine peer and returns what the
/// peer sent (greeting, handshake, then a few messages, a `PING` and, to XPUB, subscriptions),
/// as a [`fuzz_zmtp`] input read in one piece.
pub fn seed_zmtp(s: u8) -> Vec<u8> {
    let sc = SCENARIOS[usize::from(s % ZMTP_SCENARIOS)];
    let now = Instant::now();
    let mut ours = Connection::new(sc.ours(), now);
    let mut peer = Connection::new(sc.peer(), now);
    let mut record = Vec::new();
    let mut exchange = |ours: &mut Connection, peer: &mut Connection| -> Result<(), ZmtpError> {
        for _ in 0..16 {
            let up = drain(ours);
            feed(peer, &up, usize::MAX, false, now)?;
            let down = drain(peer);
            record.extend_from_slice(&down);
            feed(ours, &down, usize::MAX, true, now)?;
            if !ours.has_output() && !peer.has_output() {
                break;
            }
        }
        Ok(())
    };
    let mut run = || -> Result<(), ZmtpError> {
        exchange(&mut ours, &mut peer)?;
        if peer.is_ready() {
            let mut first = Msg::copy_from(b"part one");
            first.set_more(true);
            peer.send(first)?;
            peer.send(Msg::copy_from(&[0x5a; 300]))?;
            peer.send_command(b"PING", &[0, 10, b'c', b't', b'x'])?;
            if sc.peer == SocketType::Sub {
                peer.send_subscribe(b"topic", true)?;
                peer.send_subscribe(b"topic", false)?;
            }
            exchange(&mut ours, &mut peer)?;
        }
        Ok(())
    };
    let _ = run();
    let mut seed = vec![s, 0];
    seed.extend_from_slice(&record);
    seed
}

/// Splits `[len, bytes * len]*` into ZAP reply frames (MORE on all but the last).
fn frames_of(mut data: &[u8]) -> Vec<Msg> {
    let mut frames = Vec::new();
    while let [n, rest @ ..] = data {
        let n = usize::from(*n).min(rest.len());
        frames.push(Msg::copy_from(&rest[..n]));
        data = &rest[n..];
    }
    let k = frames.len();
    for (i, f) in frames.iter_mut().enumerate() {
        f.set_more(i + 1 < k);
    }
    frames
}

/// A ZAP reply (from the handler bound at `inproc://zeromq.zap.01`) decoded by a connection
/// waiting for it. Layout: `[which, frames...]`: `which` (mod 3) picks the connection (NULL
/// with a ZAP domain, PLAIN server, CURVE server, each brought to its ZAP request by a genuine
/// peer), the rest is frames as `[len, bytes * len]*`. Covers the reply's envelope, version,
/// request id, status code, `User-Id` and metadata (ZMTP property list) parsing.
pub fn fuzz_zap_reply(data: &[u8]) {
    zap_reply_status(data);
}

/// [`fuzz_zap_reply`]; the status the connection took from the reply, if it took one.
fn zap_reply_status(data: &[u8]) -> Option<u16> {
    let [which, rest @ ..] = data else {
        return None;
    };
    let sc = match which % 3 {
        0 => SCENARIOS[1],
        1 => SCENARIOS[4],
        _ => SCENARIOS[6],
    };
    let now = Instant::now();
    let mut ours = Connection::new(sc.ours(), now);
    let mut peer = Connection::new(sc.peer(), now);
    for _ in 0..8 {
        if ours.zap_pending() {
            break;
        }
        let up = drain(&mut ours);
        if feed(&mut peer, &up, usize::MAX, false, now).is_err() {
            return None;
        }
        let down = drain(&mut peer);
        // Not `feed`: `service` would approve the request itself.
        let mut input = &down[..];
        while !input.is_empty() {
            let buf = ours.recv_buffer();
            let n = buf.len().min(input.len());
            buf[..n].copy_from_slice(&input[..n]);
            if ours.received(n, now).is_err() {
                return None;
            }
            input = &input[n..];
            while let Ok(Some(_)) = ours.poll_event() {}
        }
    }
    ours.take_zap_request()?;
    let status = ours.zap_reply(&frames_of(rest)).ok();
    if status.is_some() {
        let up = drain(&mut ours);
        let _ = feed(&mut peer, &up, usize::MAX, false, now);
        let down = drain(&mut peer);
        let _ = feed(&mut ours, &down, usize::MAX, false, now);
    }
    drain(&mut ours);
    status
}

/// Well-formed [`fuzz_zap_reply`] inputs: each connection with status 200, 300, 400 and 500.
pub fn seed_zap_reply() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for which in 0..3u8 {
        for status in [&b"200"[..], b"300", b"400", b"500"] {
            let mut s = vec![which];
            for f in zap_frames(status) {
                s.push(f.len() as u8);
                s.extend_from_slice(f.data());
            }
            seeds.push(s);
        }
    }
    seeds
}

/// A SOCKS5 handshake fed the proxy's answers. Layout: `[mode, bytes...]`: `mode` bit 0 asks
/// for username/password authentication, bits 1-2 pick the target (IPv4, IPv6, domain). Covers
/// the method choice, the authentication status and the CONNECT reply (`BND.ADDR` of each type).
pub fn fuzz_socks(data: &[u8]) {
    let [mode, bytes @ ..] = data else {
        return;
    };
    let mut bytes: &[u8] = bytes;
    let target = match (mode >> 1) % 3 {
        0 => "10.0.0.1:5555",
        1 => "[::1]:5555",
        _ => "example.org:5555",
    };
    let Ok(target) = Target::parse(target) else {
        return;
    };
    let (user, pass): (&[u8], &[u8]) = if mode & 1 == 1 {
        (b"user", b"pass")
    } else {
        (b"", b"")
    };
    let Ok(mut hs) = Handshake::new(target, user, pass) else {
        return;
    };
    while !hs.is_done() {
        let n = hs.output().len();
        hs.consume_output(n);
        let want = hs.wanted();
        if want == 0 || bytes.is_empty() {
            break;
        }
        let take = want.min(bytes.len());
        match hs.feed(&bytes[..take]) {
            Ok(0) => break,
            Ok(used) => {
                assert!(used <= take, "feed used more than it was given");
                bytes = &bytes[used..];
            }
            Err(_) => break,
        }
    }
    let _ = hs.bound();
}

/// Well-formed [`fuzz_socks`] inputs (no authentication and username/password; replies binding
/// an IPv4, an IPv6 and a domain address).
pub fn seed_socks() -> Vec<Vec<u8>> {
    let replies: [&[u8]; 3] = [
        &[5, 0, 0, 1, 127, 0, 0, 1, 0x15, 0xb3],
        &[
            5, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x15, 0xb3,
        ],
        &[
            5, 0, 0, 3, 9, b'l', b'o', b'c', b'a', b'l', b'h', b'o', b's', b't', 0x15, 0xb3,
        ],
    ];
    let mut seeds = Vec::new();
    for (i, r) in replies.iter().enumerate() {
        let i = i as u8;
        seeds.push([&[i << 1, 5, 0][..], r].concat());
        seeds.push([&[(i << 1) | 1, 5, 2, 1, 0][..], r].concat());
    }
    seeds
}

/// Endpoint strings as `zmq_bind`/`zmq_connect` take them. Layout: UTF-8 text (invalid
/// sequences replaced). Covers `parse`, tcp connect syntax, numeric-only address resolution (no
/// DNS, no interface lookup), ipc path checks and the SOCKS target parser.
pub fn fuzz_endpoint(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(ep) = endpoint::parse(&text) {
        let _ = (ep.protocol(), ep.uri());
        match &ep {
            Endpoint::Tcp(t) => {
                let _ = (
                    t.is_rdma(),
                    t.source(),
                    t.target(),
                    t.connect_last_endpoint(),
                );
                let _ = t.check_connect_syntax();
            }
            Endpoint::Ipc(i) => {
                let _ = (i.is_wildcard(), i.is_abstract(), i.validate());
                let _ = i.last_endpoint();
            }
            Endpoint::Inproc(_) | Endpoint::Udp(_) => {}
        }
    }
    for (bindable, ipv6) in [(false, false), (true, true)] {
        let opts = ResolveOpts {
            bindable,
            allow_nic_name: false,
            ipv6,
            expect_port: true,
            allow_dns: false,
        };
        if let Ok(a) = endpoint::resolve_ip(&text, &opts) {
            let _ = endpoint::tcp_last_endpoint(&a);
        }
    }
    let _ = Target::parse(&text);
}

/// Socket option values as `zmq_setsockopt` takes them. Layout: `[option, type, value...]`
/// (`type` mod 12 picks the socket type from [`SocketType::ALL`](crate::SocketType::ALL), so
/// numbers 0-11 are libzmq's). Covers every option's validation: CURVE keys (Z85),
/// `ZMQ_TCP_ACCEPT_FILTER`, routing ids, subscriptions, integers of the wrong size.
pub fn fuzz_sockopt(data: &[u8]) {
    let [opt, t, value @ ..] = data else {
        return;
    };
    let mut o =
        Options::new(crate::SocketType::ALL[usize::from(*t) % crate::SocketType::ALL.len()]);
    let opt = i32::from(*opt);
    let _ = o.set(opt, value);
    let _ = o.get(opt);
}

/// Well-formed [`fuzz_sockopt`] inputs: a Z85 CURVE key (48), a TCP accept filter (38), a
/// routing id (5), a subscription (6) and an integer (23, SNDHWM).
pub fn seed_sockopt() -> Vec<Vec<u8>> {
    vec![
        [&[48u8, 5][..], b"rq:rC]h3iy3B4zz4Tz@!9gL0^m(2tQ5Rt=:<r-1r"].concat(),
        [&[38u8, 5][..], b"127.0.0.1"].concat(),
        [&[5u8, 6][..], b"id"].concat(),
        [&[6u8, 2][..], b"topic"].concat(),
        vec![23, 8, 0xe8, 0x03, 0, 0],
    ]
}

/// Endpoint seeds for [`fuzz_endpoint`].
pub fn seed_endpoint() -> Vec<Vec<u8>> {
    [
        "tcp://127.0.0.1:5555",
        "tcp://192.168.1.1;10.0.0.1:5555",
        "tcp://[::1%1]:*",
        "rdma://10.0.0.2:7000",
        "ipc:///tmp/x.sock",
        "ipc://@abstract",
        "inproc://name",
        "[fe80::1]:80",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scenario's genuine peer completes the handshake (so the seeds reach the data phase)
    /// and its recording replays without a failure.
    #[test]
    fn seeds_reach_ready_and_replay() {
        for s in 0..ZMTP_SCENARIOS {
            let sc = SCENARIOS[usize::from(s)];
            let now = Instant::now();
            let mut ours = Connection::new(sc.ours(), now);
            let mut peer = Connection::new(sc.peer(), now);
            for _ in 0..8 {
                let up = drain(&mut ours);
                feed(&mut peer, &up, usize::MAX, false, now).unwrap();
                let down = drain(&mut peer);
                feed(&mut ours, &down, 7, true, now).unwrap();
            }
            assert!(
                ours.is_ready() && peer.is_ready(),
                "scenario {s}: {ours:?} {peer:?}"
            );
            fuzz_zmtp(&seed_zmtp(s));
        }
    }

    /// Every committed input of this crate's fuzz targets (seeds and `regress-*` crash inputs)
    /// replays through its entry point without a panic.
    #[cfg_attr(miri, ignore)] // reads files, and thousands of handshakes
    #[test]
    fn committed_corpus_replays() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
        for (target, f) in FUZZ_TARGETS {
            assert!(
                replay_corpus(&corpus, target, f) > 0,
                "{target}: empty corpus"
            );
        }
    }

    /// Each ZAP seed reaches its connection's request and is taken with its status.
    #[test]
    fn zap_seeds_reach_the_request() {
        let seeds = seed_zap_reply();
        assert_eq!(seeds.len(), 12);
        for (i, seed) in seeds.iter().enumerate() {
            let want = [200, 300, 400, 500][i % 4];
            assert_eq!(zap_reply_status(seed), Some(want), "seed {i}");
        }
    }

    /// The entry points take their seeds, truncations and byte flips of them without a panic.
    #[cfg_attr(miri, ignore)] // thousands of handshakes: far too slow interpreted
    #[test]
    fn entry_points_take_mangled_seeds() {
        type Target = (fn(&[u8]), Vec<Vec<u8>>);
        let targets: [Target; 5] = [
            (fuzz_zmtp, (0..ZMTP_SCENARIOS).map(seed_zmtp).collect()),
            (fuzz_zap_reply, seed_zap_reply()),
            (fuzz_socks, seed_socks()),
            (fuzz_endpoint, seed_endpoint()),
            (fuzz_sockopt, seed_sockopt()),
        ];
        for (f, seeds) in targets {
            for seed in seeds {
                for cut in [0, 1, 2, seed.len() / 2, seed.len()] {
                    f(&seed[..cut.min(seed.len())]);
                }
                for i in (0..seed.len()).step_by(7) {
                    let mut m = seed.clone();
                    m[i] ^= 0xa5;
                    f(&m);
                }
            }
        }
    }
}

/// The lock-free queues across threads at sizes Miri can interpret (their own thread tests
/// move 10^5 items or wait in `poll`: ignored under Miri, these run instead).
#[cfg(test)]
mod miri_queues {
    use crate::{byteq, signal, spsc};
    use std::sync::Arc;

    /// Two senders and a reader that drains without sleeping: every command arrives once, each
    /// sender's in order, and the signal bookkeeping (eventfd) stays consistent.
    #[test]
    fn mailbox_two_senders_one_reader() {
        let mb: Arc<signal::Mailbox<(u32, u32)>> = Arc::new(signal::Mailbox::new().unwrap());
        let n = 150;
        let senders: Vec<_> = (0..2)
            .map(|s| {
                let mb = mb.clone();
                std::thread::spawn(move || (0..n).for_each(|i| mb.send((s, i))))
            })
            .collect();
        let mut next = [0u32; 2];
        while next != [n; 2] {
            mb.begin_drain();
            while let Some((s, i)) = mb.try_recv() {
                assert_eq!(i, next[s as usize]);
                next[s as usize] += 1;
            }
            std::thread::yield_now();
        }
        senders.into_iter().for_each(|t| t.join().unwrap());
        mb.begin_drain();
        assert!(!mb.has_pending());
    }

    /// Items cross three chunk boundaries from a producer thread, in order, each exactly once,
    /// some published in batches.
    #[test]
    fn spsc_across_threads_and_chunks() {
        let (mut p, mut c) = spsc::queue::<Box<u64>>();
        let n = 3 * 256 + 7;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                if i % 5 == 0 {
                    p.push_unpublished(Box::new(i));
                } else {
                    p.push(Box::new(i));
                }
            }
            p.publish();
        });
        let mut next = 0;
        while next < n {
            match c.pop() {
                Some(v) => {
                    assert_eq!(*v, next);
                    next += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert!(c.pop().is_none());
    }

    /// Records of 4-6 KiB cross a 64 KiB chunk boundary from a producer thread, whole and in
    /// order (each checked by its header and its last byte: byte-by-byte checks cost minutes).
    #[test]
    fn byteq_across_threads_and_chunks() {
        let (mut p, mut c) = byteq::byte_queue();
        let n = 16u32;
        let len = |i: u32| 4000 + (i as usize * 337) % 2048;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                let rec = p.reserve(len(i));
                rec[..4].copy_from_slice(&i.to_le_bytes());
                rec[4..].fill(i as u8);
                p.publish();
            }
        });
        let (mut next, mut at, mut got) = (0u32, 0, Vec::new());
        while next < n {
            let b = c.peek();
            if b.is_empty() {
                std::thread::yield_now();
                continue;
            }
            let k = b.len();
            got.extend_from_slice(b);
            c.consume(k);
            while got.len() - at >= len(next) {
                let l = len(next);
                assert_eq!(got[at..at + 4], next.to_le_bytes());
                assert_eq!(got[at + l - 1], next as u8);
                at += l;
                next += 1;
            }
        }
        t.join().unwrap();
        assert!(c.is_empty() && at == got.len());
    }
}

// Internals that integration tests and benches use.

/// Direct sends and receives: their counters and the knobs tests turn.
pub mod direct {
    pub use crate::direct::{
        hold_stats, rx_stats, set_hold_stale, spin_stats, stats, RX_HOLD_STALE,
    };
}

/// Pipes between a socket and its connections.
pub mod pipe {
    pub use crate::pipe::{framed_moved, pipe, Notify, Reader, Target, Writer, FRAMED_INLINE_MAX};
}

/// The lock-free single-producer single-consumer queue under the pipes.
pub mod spsc {
    pub use crate::spsc::queue;
}

/// Routing logic of the socket types, without I/O.
pub mod pattern {
    pub use crate::pattern::pubsub::XPub;
    pub use crate::pattern::pull::Pull;
    pub use crate::pattern::push::Push;
    pub use crate::pattern::router::Router;
    pub use crate::pattern::{Pattern, PipeEntry, PipeId, PipeTable};
}

/// The sans-IO ZMTP connection.
pub mod zmtp {
    pub use crate::zmtp::{Config, Connection, Event, SocketType};
}

/// Storage pools.
pub mod pool {
    pub use crate::pool::huge_pages;
}

/// tcp connections between two ends of this host.
pub mod transport {
    pub use crate::transport::same_host::congestion_control;
}

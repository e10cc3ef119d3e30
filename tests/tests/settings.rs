//! Settings end to end: `RZMQ_*` variables give the defaults of typed options (a child process
//! with its own environment; a bad value is reported once, naming the variable, and the default
//! applies), and CURVE over RDMA follows the socket option `ZMQ_RDMA_CURVE_PLAINTEXT`, with the
//! upgrader installed from typed options (`rzmq_rdma::install_with`) rather than the
//! environment.

use std::process::Command;
use std::time::Duration;

use rzmq_core::options as opt;
use rzmq_core::sockopt::{BusyPoll, Direct, Framed, FramedNap, RdmaCurvePlaintext};
use rzmq_core::{monitor, z85, Context, Socket, SocketType};
use rzmq_tests::TIMEOUT_MS;

const CHILD: &str = "RZMQ_SETTINGS_TEST_CHILD";

/// Runs in the child (and passes trivially elsewhere): the environment's values are the new
/// sockets' defaults.
#[test]
fn child_takes_defaults_from_the_environment() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let ctx = Context::new();
    for _ in 0..2 {
        let mut s = ctx.socket(SocketType::Req).unwrap();
        // RZMQ_SPIN_US=abc: reported, the default applies.
        assert_eq!(
            s.get::<BusyPoll>().unwrap(),
            BusyPoll(Duration::from_micros(30))
        );
        assert_eq!(s.get::<Framed>().unwrap(), Framed(false));
        assert_eq!(s.get::<Direct>().unwrap(), Direct(true));
        assert_eq!(
            s.get::<FramedNap>().unwrap(),
            FramedNap(Duration::from_micros(5))
        );
        assert_eq!(
            s.get::<RdmaCurvePlaintext>().unwrap(),
            RdmaCurvePlaintext(true)
        );
        // RZMQ_TCP_LOCAL_CC=off: the host's algorithm.
        assert_eq!(s.options().rzmq.tcp_local_cc, None);
    }
    assert!(!rzmq_core::testing::pool::huge_pages());
    assert_eq!(ctx.get(opt::HUGE_PAGES), Ok(0));
}

#[test]
fn environment_variables_give_defaults_and_bad_values_are_reported_once() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_takes_defaults_from_the_environment",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("RZMQ_SPIN_US", "abc")
        .env("RZMQ_FRAMED", "off")
        .env("RZMQ_FRAMED_NAP_US", "5")
        .env("RZMQ_RDMA_CURVE_PLAINTEXT", "yes")
        .env("RZMQ_TCP_LOCAL_CC", "off")
        .env("RZMQ_HUGE_PAGES", "0")
        .env_remove("RZMQ_DIRECT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rzmq: RZMQ_"))
        .collect();
    assert_eq!(
        reports,
        vec![
            "rzmq: RZMQ_SPIN_US=\"abc\": expected an integer from 0 to 1000000; \
             using the default (30)"
        ],
        "{stderr}"
    );
}

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    rzmq_tests::timed_socket(ctx, ty, 2000)
}

/// The transport a connection of `s` reports (monitor event `EVENT_TRANSPORT`).
fn transport(ctx: &Context, s: &mut Socket, tag: &str) -> Socket {
    let ep = rzmq_tests::inproc_endpoint(tag);
    s.monitor(Some(&ep), monitor::EVENT_TRANSPORT).unwrap();
    let mut m = ctx.socket(SocketType::Pair).unwrap();
    m.set_option_i32(opt::RCVTIMEO, TIMEOUT_MS).unwrap();
    m.connect(&ep).unwrap();
    m
}

fn next_transport(m: &mut Socket) -> u32 {
    loop {
        let parts = m.recv_multipart(0).expect("monitor event");
        let d = parts[0].data();
        if u16::from_ne_bytes([d[0], d[1]]) == monitor::EVENT_TRANSPORT {
            return u32::from_ne_bytes([d[2], d[3], d[4], d[5]]);
        }
    }
}

/// A CURVE pair over tcp; `plaintext` sets `ZMQ_RDMA_CURVE_PLAINTEXT` on both ends. Returns the
/// transport the client's connection got.
fn curve_pair(ctx: &Context, plaintext: bool, tag: &str) -> u32 {
    let (spub, ssec) = z85::generate_keypair().unwrap();
    let (cpub, csec) = z85::generate_keypair().unwrap();
    let mut server = sock(ctx, SocketType::Rep);
    server.set_option_i32(opt::CURVE_SERVER, 1).unwrap();
    server
        .set_option_raw(opt::CURVE_SECRETKEY, &ssec[..])
        .unwrap();
    server.set(RdmaCurvePlaintext(plaintext)).unwrap();
    server.bind("tcp://127.0.0.1:*").unwrap();
    let mut client = sock(ctx, SocketType::Req);
    client.set_option_raw(opt::CURVE_SERVERKEY, &spub).unwrap();
    client.set_option_raw(opt::CURVE_PUBLICKEY, &cpub).unwrap();
    client
        .set_option_raw(opt::CURVE_SECRETKEY, &csec[..])
        .unwrap();
    client.set(RdmaCurvePlaintext(plaintext)).unwrap();
    let mut mon = transport(ctx, &mut client, tag);
    client.connect(server.last_endpoint()).unwrap();
    client.send(&b"ping"[..], 0).unwrap();
    assert_eq!(server.recv_msg(0).unwrap().data(), b"ping");
    server.send(&b"pong"[..], 0).unwrap();
    assert_eq!(client.recv_msg(0).unwrap().data(), b"pong");
    next_transport(&mut mon)
}

#[test]
fn curve_moves_to_rdma_only_with_the_socket_option() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    assert!(rzmq_rdma::install_with(&rzmq_rdma::RdmaOptions {
        provider: rzmq_rdma::settings::ProviderChoice::Soft,
        events: true,
        ..rzmq_rdma::RdmaOptions::default()
    }));
    let ctx = Context::new();
    assert_eq!(curve_pair(&ctx, false, "curve-tcp"), monitor::TRANSPORT_TCP);
    assert_eq!(
        curve_pair(&ctx, true, "curve-rdma"),
        monitor::TRANSPORT_RDMA
    );
}

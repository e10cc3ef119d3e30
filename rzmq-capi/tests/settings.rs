//! rzmq's own options through the C ABI: the numbers `include/zmq.h` defines are the library's,
//! `zmq_setsockopt`/`zmq_getsockopt` reach the typed socket options, and `zmq_ctx_set` /
//! `zmq_ctx_get` the process-wide RDMA mode and huge pages.

use std::ffi::{c_int, c_void};

mod common;

use rzmq_core::options as o;
use rzmq_core::{monitor, SocketType};
use zmq::*;

/// The `#define NAME VALUE` lines of include/zmq.h outside its DRAFT section whose name starts
/// with `prefix`.
fn header_defines(prefix: &str) -> Vec<(String, i64)> {
    let all = include_str!("../include/zmq.h");
    let h = all.replace(common::draft_section(all), "");
    let mut out: Vec<(String, i64)> = Vec::new();
    for l in h.lines() {
        let mut w = l.split_whitespace();
        if w.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(value)) = (w.next(), w.next()) else {
            continue;
        };
        let v = match value.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16).ok(),
            // An alias of an earlier define (`#define ZMQ_XREQ ZMQ_DEALER`).
            None => value.parse().ok().or_else(|| {
                out.iter()
                    .find(|(n, _)| n.as_str() == value)
                    .map(|&(_, v)| v)
            }),
        };
        if let Some(v) = v {
            out.push((name.to_string(), v));
        }
    }
    out.retain(|(n, _)| n.starts_with(prefix));
    out
}

/// `("ZMQ_NAME", value)` for constants of one module, named as in zmq.h without `ZMQ_`.
macro_rules! numbers {
    ($m:path: $($n:ident),* $(,)?) => {{
        use $m as m;
        vec![$((concat!("ZMQ_", stringify!($n)).to_string(), i64::from(m::$n))),*]
    }};
}

/// Every number include/zmq.h defines is the one the library uses: socket types
/// ([`SocketType`]), socket and context option ids and values (rzmq-core's `options`, their one
/// definition), send flags, monitor events, errno base, and the C ABI's own constants. A define
/// the header gains must be added here (or to the short list of what is not a number).
#[test]
fn the_header_matches_the_library() {
    // The draft types (ZMQ_SERVER and up) are not in the stable header.
    let mut want: Vec<(String, i64)> = SocketType::ALL
        .iter()
        .filter(|t| !t.is_draft())
        .map(|t| (format!("ZMQ_{}", t.name()), i64::from(t.as_i32())))
        .collect();
    want.extend([
        (
            "ZMQ_XREQ".to_string(),
            i64::from(SocketType::Dealer.as_i32()),
        ),
        (
            "ZMQ_XREP".to_string(),
            i64::from(SocketType::Router.as_i32()),
        ),
    ]);
    want.extend(numbers!(rzmq_core::options:
        AFFINITY, ROUTING_ID, IDENTITY, SUBSCRIBE, UNSUBSCRIBE, RATE, RECOVERY_IVL, SNDBUF,
        RCVBUF, RCVMORE, FD, EVENTS, TYPE, LINGER, RECONNECT_IVL, BACKLOG, RECONNECT_IVL_MAX,
        MAXMSGSIZE, SNDHWM, RCVHWM, MULTICAST_HOPS, RCVTIMEO, SNDTIMEO, IPV4ONLY, LAST_ENDPOINT,
        ROUTER_MANDATORY, FAIL_UNROUTABLE, ROUTER_BEHAVIOR, TCP_KEEPALIVE, TCP_KEEPALIVE_CNT,
        TCP_KEEPALIVE_IDLE, TCP_KEEPALIVE_INTVL, TCP_ACCEPT_FILTER, IMMEDIATE,
        DELAY_ATTACH_ON_CONNECT, XPUB_VERBOSE, ROUTER_RAW, IPV6, MECHANISM, PLAIN_SERVER,
        PLAIN_USERNAME, PLAIN_PASSWORD, CURVE_SERVER, CURVE_PUBLICKEY, CURVE_SECRETKEY,
        CURVE_SERVERKEY, PROBE_ROUTER, REQ_CORRELATE, REQ_RELAXED, CONFLATE, ZAP_DOMAIN,
        ROUTER_HANDOVER, TOS, IPC_FILTER_PID, IPC_FILTER_UID, IPC_FILTER_GID, CONNECT_ROUTING_ID,
        CONNECT_RID, GSSAPI_SERVER, GSSAPI_PRINCIPAL, GSSAPI_SERVICE_PRINCIPAL, GSSAPI_PLAINTEXT,
        HANDSHAKE_IVL, SOCKS_PROXY, XPUB_NODROP, BLOCKY, XPUB_MANUAL, XPUB_WELCOME_MSG,
        STREAM_NOTIFY, INVERT_MATCHING, HEARTBEAT_IVL, HEARTBEAT_TTL, HEARTBEAT_TIMEOUT,
        XPUB_VERBOSER, CONNECT_TIMEOUT, TCP_MAXRT, THREAD_SAFE, MULTICAST_MAXTPDU,
        VMCI_BUFFER_SIZE, VMCI_BUFFER_MIN_SIZE, VMCI_BUFFER_MAX_SIZE, VMCI_CONNECT_TIMEOUT,
        USE_FD, GSSAPI_PRINCIPAL_NAMETYPE, GSSAPI_SERVICE_PRINCIPAL_NAMETYPE, BINDTODEVICE,
        NULL, PLAIN, CURVE, GSSAPI, GSSAPI_NT_HOSTBASED, GSSAPI_NT_USER_NAME,
        GSSAPI_NT_KRB5_PRINCIPAL,
        IO_THREADS, MAX_SOCKETS, SOCKET_LIMIT, THREAD_PRIORITY, THREAD_SCHED_POLICY, MAX_MSGSZ,
        MSG_T_SIZE, THREAD_AFFINITY_CPU_ADD, THREAD_AFFINITY_CPU_REMOVE, THREAD_NAME_PREFIX,
        IO_THREADS_DFLT, MAX_SOCKETS_DFLT, THREAD_PRIORITY_DFLT, THREAD_SCHED_POLICY_DFLT,
    ));
    want.extend(numbers!(rzmq_core: DONTWAIT, SNDMORE));
    want.push(("ZMQ_NOBLOCK".to_string(), i64::from(rzmq_core::DONTWAIT)));
    want.extend(numbers!(monitor:
        EVENT_CONNECTED, EVENT_CONNECT_DELAYED, EVENT_CONNECT_RETRIED, EVENT_LISTENING,
        EVENT_BIND_FAILED, EVENT_ACCEPTED, EVENT_ACCEPT_FAILED, EVENT_CLOSED, EVENT_CLOSE_FAILED,
        EVENT_DISCONNECTED, EVENT_MONITOR_STOPPED, EVENT_ALL, EVENT_HANDSHAKE_FAILED_NO_DETAIL,
        EVENT_HANDSHAKE_SUCCEEDED, EVENT_HANDSHAKE_FAILED_PROTOCOL, EVENT_HANDSHAKE_FAILED_AUTH,
    ));
    want.extend(numbers!(rzmq_core::error: HAUSNUMERO));
    // The C ABI's own (rzmq-capi, named as in the header).
    macro_rules! c_abi {
        ($($n:ident),* $(,)?) => {
            vec![$((stringify!($n).to_string(), i64::from(zmq::$n))),*]
        };
    }
    want.extend(c_abi!(
        ZMQ_VERSION_MAJOR,
        ZMQ_VERSION_MINOR,
        ZMQ_VERSION_PATCH,
        ZMQ_MORE,
        ZMQ_SRCFD,
        ZMQ_SHARED,
        ZMQ_POLLIN,
        ZMQ_POLLOUT,
        ZMQ_POLLERR,
        ZMQ_POLLPRI,
        ZMQ_STREAMER,
        ZMQ_FORWARDER,
        ZMQ_QUEUE,
    ));
    // Not numbers the library defines: build macros, the ZMTP/ZAP protocol error codes (the
    // handshake's, checked by the monitor tests), rzmq's own (the_header_has_the_library_numbers)
    // and values only C uses.
    let not_ours = |n: &str| {
        [
            "ZMQ_PROTOCOL_ERROR_",
            "ZMQ_RZMQ_",
            "ZMQ_RDMA_",
            "ZMQ_DEFINED_STDINT",
            "ZMQ_GROUP_MAX_LENGTH",
            "ZMQ_HAS_CAPABILITIES",
            "ZMQ_HAVE_TIMERS",
            "ZMQ_POLLITEMS_DFLT",
        ]
        .iter()
        .any(|p| n.starts_with(p))
    };
    let mut got = header_defines("ZMQ_");
    got.retain(|(n, _)| !not_ours(n));
    got.sort();
    got.dedup();
    want.sort();
    assert_eq!(got, want);
}

/// `(name, value text)` of every `#define` in `text` (values with their spaces squeezed).
fn defines(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define")).then_some(())?;
            let name = w.next()?.to_string();
            Some((name, w.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    out.sort();
    out
}

/// The DRAFT section of include/zmq.h defines what libzmq 4.3.5's does, with the same values
/// (its functions are checked by tests/exports.rs).
#[test]
fn the_draft_section_matches_libzmq() {
    let ours = defines(common::draft_section(include_str!("../include/zmq.h")));
    assert!(ours.iter().any(|(n, _)| n == "ZMQ_HAVE_POLLER"), "{ours:?}");
    let Some(vendor) = common::zeromq_vendor() else {
        common::missing_tool("zeromq-src 0.3 is not in the cargo registry");
        return;
    };
    let h = std::fs::read_to_string(vendor.join("include/zmq.h")).unwrap();
    assert_eq!(ours, defines(common::draft_section(&h)));
}

#[test]
fn the_header_has_the_library_numbers() {
    let mut want = vec![
        ("ZMQ_RZMQ_DIRECT", o::DIRECT),
        ("ZMQ_RZMQ_DIRECT_RX", o::DIRECT_RX),
        ("ZMQ_RZMQ_BUSY_POLL_US", o::BUSY_POLL_US),
        ("ZMQ_RZMQ_FRAMED", o::FRAMED),
        ("ZMQ_RZMQ_FRAMED_NAP_US", o::FRAMED_NAP_US),
        ("ZMQ_RZMQ_FRAMED_NAP_EMPTY", o::FRAMED_NAP_EMPTY),
        ("ZMQ_RDMA_CURVE_PLAINTEXT", o::RDMA_CURVE_PLAINTEXT),
        ("ZMQ_RZMQ_HUGE_PAGES", o::HUGE_PAGES),
        ("ZMQ_RDMA_MODE", o::RDMA_MODE),
        ("ZMQ_RDMA_MODE_OFF", 0),
        ("ZMQ_RDMA_MODE_AUTO", 1),
        ("ZMQ_RDMA_MODE_REQUIRE", 2),
    ];
    want.sort();
    let mut got = header_defines("ZMQ_RZMQ_");
    got.extend(header_defines("ZMQ_RDMA_"));
    got.sort();
    let want: Vec<(String, i64)> = want
        .into_iter()
        .map(|(n, v)| (n.to_string(), i64::from(v)))
        .collect();
    assert_eq!(got, want);
}

fn set_int(s: *mut c_void, opt: c_int, v: c_int) -> c_int {
    // SAFETY: v is a live int.
    unsafe { zmq_setsockopt(s, opt, (&v as *const c_int).cast(), 4) }
}

fn get_int(s: *mut c_void, opt: c_int) -> c_int {
    let mut v: c_int = -7;
    let mut len = 4usize;
    // SAFETY: v and len are live.
    let rc = unsafe { zmq_getsockopt(s, opt, (&mut v as *mut c_int).cast(), &mut len) };
    assert_eq!(rc, 0, "getsockopt {opt:#x}");
    v
}

#[test]
fn socket_and_context_options_through_the_c_abi() {
    let ctx = zmq_ctx_new();
    assert!(!ctx.is_null());
    // SAFETY: a live context.
    let s = unsafe { zmq_socket(ctx, SocketType::Req as c_int) };
    assert!(!s.is_null());
    // Defaults: the environment's, else the built-in ones (the tests run without RZMQ_*).
    if std::env::var_os("RZMQ_RDMA_CURVE_PLAINTEXT").is_none() {
        assert_eq!(get_int(s, o::RDMA_CURVE_PLAINTEXT), 0);
    }
    assert_eq!(set_int(s, o::RDMA_CURVE_PLAINTEXT, 1), 0);
    assert_eq!(get_int(s, o::RDMA_CURVE_PLAINTEXT), 1);
    assert_eq!(set_int(s, o::BUSY_POLL_US, 75), 0);
    assert_eq!(get_int(s, o::BUSY_POLL_US), 75);
    assert_eq!(set_int(s, o::BUSY_POLL_US, -1), -1);
    assert_eq!(zmq_errno(), libc::EINVAL);
    assert_eq!(set_int(s, o::DIRECT, 3), -1);
    // SAFETY: live socket and context.
    unsafe {
        assert_eq!(zmq_close(s), 0);
        // The RDMA mode is process-wide (see docs/SETTINGS.md).
        let before = zmq_ctx_get(ctx, o::RDMA_MODE);
        assert!((0..=2).contains(&before), "{before}");
        assert_eq!(zmq_ctx_set(ctx, o::RDMA_MODE, 7), -1);
        assert_eq!(zmq_errno(), libc::EINVAL);
        if before != 0 {
            // An upgrader is installed: its mode follows.
            assert_eq!(zmq_ctx_set(ctx, o::RDMA_MODE, before), 0);
            assert_eq!(zmq_ctx_get(ctx, o::RDMA_MODE), before);
        }
        let huge = zmq_ctx_get(ctx, o::HUGE_PAGES);
        assert!(huge == 0 || huge == 1);
        assert_eq!(zmq_ctx_set(ctx, o::HUGE_PAGES, huge), 0);
        assert_eq!(zmq_ctx_term(ctx), 0);
    }
}

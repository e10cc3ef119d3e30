//! rzmq's own options through the C ABI: the numbers `include/zmq.h` defines are the library's,
//! `zmq_setsockopt`/`zmq_getsockopt` reach the typed socket options, and `zmq_ctx_set` /
//! `zmq_ctx_get` the process-wide RDMA mode and huge pages.

use std::ffi::{c_int, c_void};

use rzmq_core::options as o;
use zmq::*;

/// The `#define NAME VALUE` lines of include/zmq.h whose name starts with `prefix`.
fn header_defines(prefix: &str) -> Vec<(String, i64)> {
    let h = include_str!("../../include/zmq.h");
    h.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define").then_some(())?;
            let name = w.next()?;
            let value = w.next()?;
            let v = match value.strip_prefix("0x") {
                Some(hex) => i64::from_str_radix(hex, 16).ok()?,
                None => value.parse().ok()?,
            };
            name.starts_with(prefix).then(|| (name.to_string(), v))
        })
        .collect()
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
    let s = unsafe { zmq_socket(ctx, 3) }; // REQ
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

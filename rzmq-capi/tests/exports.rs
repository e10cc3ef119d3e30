//! The exported symbols of our `libzmq.so` against libzmq 4.3.5's stable API: the list below
//! (what a default, non-DRAFT 4.3.5 build exports) and, when present, the `zmq_*` symbols of the
//! system's `libzmq.so.5` (Debian ships 4.3.4, whose list is the same). A missing symbol fails.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every `zmq_*` function a default libzmq 4.3.5 build exports.
const LIBZMQ_435_EXPORTS: &[&str] = &[
    "zmq_atomic_counter_dec",
    "zmq_atomic_counter_destroy",
    "zmq_atomic_counter_inc",
    "zmq_atomic_counter_new",
    "zmq_atomic_counter_set",
    "zmq_atomic_counter_value",
    "zmq_bind",
    "zmq_close",
    "zmq_connect",
    "zmq_ctx_destroy",
    "zmq_ctx_get",
    "zmq_ctx_new",
    "zmq_ctx_set",
    "zmq_ctx_shutdown",
    "zmq_ctx_term",
    "zmq_curve_keypair",
    "zmq_curve_public",
    "zmq_device",
    "zmq_disconnect",
    "zmq_errno",
    "zmq_getsockopt",
    "zmq_has",
    "zmq_init",
    "zmq_msg_close",
    "zmq_msg_copy",
    "zmq_msg_data",
    "zmq_msg_get",
    "zmq_msg_gets",
    "zmq_msg_init",
    "zmq_msg_init_data",
    "zmq_msg_init_size",
    "zmq_msg_more",
    "zmq_msg_move",
    "zmq_msg_recv",
    "zmq_msg_send",
    "zmq_msg_set",
    "zmq_msg_size",
    "zmq_poll",
    "zmq_proxy",
    "zmq_proxy_steerable",
    "zmq_recv",
    "zmq_recviov",
    "zmq_recvmsg",
    "zmq_send",
    "zmq_send_const",
    "zmq_sendiov",
    "zmq_sendmsg",
    "zmq_setsockopt",
    "zmq_sleep",
    "zmq_socket",
    "zmq_socket_monitor",
    "zmq_stopwatch_intermediate",
    "zmq_stopwatch_start",
    "zmq_stopwatch_stop",
    "zmq_strerror",
    "zmq_term",
    "zmq_threadclose",
    "zmq_threadstart",
    "zmq_timers_add",
    "zmq_timers_cancel",
    "zmq_timers_destroy",
    "zmq_timers_execute",
    "zmq_timers_new",
    "zmq_timers_reset",
    "zmq_timers_set_interval",
    "zmq_timers_timeout",
    "zmq_unbind",
    "zmq_version",
    "zmq_z85_decode",
    "zmq_z85_encode",
];

fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.parent().unwrap(), deps]
        .iter()
        .map(|d| d.join("libzmq.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libzmq.so not found next to {}", exe.display()))
}

/// Defined dynamic `zmq_*` function symbols of a shared library, via `nm -D --defined-only`.
fn exported(lib: &Path) -> Option<BTreeSet<String>> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "nm failed on {}: {}",
        lib.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace().rev();
                let name = f.next()?;
                let kind = f.next()?;
                (kind == "T" && name.starts_with("zmq_")).then(|| name.to_string())
            })
            .collect(),
    )
}

#[test]
fn exports_match_libzmq() {
    let ours_path = cdylib();
    let Some(ours) = exported(&ours_path) else {
        common::missing_tool("`nm` is not available; exported symbols not checked");
        return;
    };
    let missing: Vec<&str> = LIBZMQ_435_EXPORTS
        .iter()
        .copied()
        .filter(|s| !ours.contains(*s))
        .collect();
    assert!(
        missing.is_empty(),
        "{} lacks libzmq 4.3.5 symbols: {missing:?}",
        ours_path.display()
    );

    let system = [
        "/usr/lib/x86_64-linux-gnu/libzmq.so.5",
        "/usr/lib/aarch64-linux-gnu/libzmq.so.5",
        "/usr/lib64/libzmq.so.5",
        "/usr/lib/libzmq.so.5",
    ]
    .iter()
    .map(Path::new)
    .find(|p| p.exists());
    match system {
        Some(sys) => {
            let theirs = exported(sys).unwrap();
            let missing: Vec<&String> = theirs.difference(&ours).collect();
            assert!(
                missing.is_empty(),
                "symbols of {} missing from ours: {missing:?}",
                sys.display()
            );
            let extra: Vec<&String> = ours.difference(&theirs).collect();
            eprintln!(
                "compared with {}: {} symbols, ours adds {extra:?}",
                sys.display(),
                theirs.len()
            );
        }
        None => common::missing_tool(
            "no system libzmq.so.5 to compare with; checked against the built-in 4.3.5 list only",
        ),
    }
}

#[test]
fn soname_is_libzmq_so_5() {
    let Ok(out) = Command::new("readelf").arg("-d").arg(cdylib()).output() else {
        common::missing_tool("`readelf` is not available");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libzmq.so.5]"), "{text}");
}

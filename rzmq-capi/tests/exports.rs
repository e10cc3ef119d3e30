//! The exported symbols of our `libzmq.so` against libzmq 4.3.5's: the default build exports
//! exactly the list below (what a default, non-DRAFT 4.3.5 build exports) and at least the
//! `zmq_*` symbols of the system's `libzmq.so.5` when present (Debian ships 4.3.4, whose list
//! is the same); the `draft` build (built here into `<target>/draft`) exports exactly that list
//! and libzmq 4.3.5's DRAFT functions, the list below, checked in turn against the
//! `ZMQ_BUILD_DRAFT_API` section of zeromq-src's `zmq.h` when the crate is in the registry.

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

/// The functions a DRAFT build of libzmq 4.3.5 (`--enable-drafts`) exports besides the stable
/// ones: those `zmq.h` declares under `ZMQ_BUILD_DRAFT_API`.
const LIBZMQ_435_DRAFT_EXPORTS: &[&str] = &[
    "zmq_connect_peer",
    "zmq_ctx_get_ext",
    "zmq_ctx_set_ext",
    "zmq_join",
    "zmq_leave",
    "zmq_msg_group",
    "zmq_msg_init_buffer",
    "zmq_msg_routing_id",
    "zmq_msg_set_group",
    "zmq_msg_set_routing_id",
    "zmq_poller_add",
    "zmq_poller_add_fd",
    "zmq_poller_destroy",
    "zmq_poller_fd",
    "zmq_poller_modify",
    "zmq_poller_modify_fd",
    "zmq_poller_new",
    "zmq_poller_remove",
    "zmq_poller_remove_fd",
    "zmq_poller_size",
    "zmq_poller_wait",
    "zmq_poller_wait_all",
    "zmq_ppoll",
    "zmq_socket_get_peer_state",
    "zmq_socket_monitor_pipes_stats",
    "zmq_socket_monitor_versioned",
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
    assert_same(&ours, LIBZMQ_435_EXPORTS, &ours_path);

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

/// `ours` is exactly `want`: the names missing and the names extra are both reported.
fn assert_same(ours: &BTreeSet<String>, want: &[&str], lib: &Path) {
    let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
    let missing: Vec<&String> = want.difference(ours).collect();
    let extra: Vec<&String> = ours.difference(&want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{}: missing {missing:?}, extra {extra:?}",
        lib.display()
    );
}

/// Builds the `draft` variant of libzmq.so into `<target>/draft` (its own target directory, so
/// that the default `libzmq.so` of this build is left alone) and returns its path. Optimised
/// test builds (release, test-release) make the release one, the very build that
/// compat/run-libzmq-tests.sh --draft runs libzmq's DRAFT tests against (built once for both).
fn build_draft() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let profile = if profile_dir.ends_with("debug") {
        "debug"
    } else {
        "release"
    };
    let target = profile_dir.parent().unwrap().join("draft");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "rzmq-capi",
        "--features",
        "draft",
        "--target-dir",
    ])
    .arg(&target)
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile == "release" {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("cargo runs");
    assert!(st.success(), "building the draft libzmq.so failed: {st}");
    let lib = target.join(profile).join("libzmq.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// The functions `zmq.h` text declares with `ZMQ_EXPORT`.
fn declared_functions(h: &str) -> BTreeSet<String> {
    h.split("ZMQ_EXPORT")
        .skip(1)
        .filter_map(|decl| {
            let i = decl.find("zmq_")?;
            let name: String = decl[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            Some(name)
        })
        .collect()
}

/// Our include/zmq.h declares the DRAFT list under `ZMQ_BUILD_DRAFT_API`, and only there.
#[test]
fn header_declares_draft_functions_in_its_draft_section() {
    let h = include_str!("../include/zmq.h");
    let draft = common::draft_section(h);
    let listed: BTreeSet<String> = LIBZMQ_435_DRAFT_EXPORTS
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(declared_functions(draft), listed);
    let all = declared_functions(h);
    let stable: BTreeSet<String> = LIBZMQ_435_EXPORTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        all.difference(&listed).cloned().collect::<BTreeSet<_>>(),
        stable
    );
}

#[test]
fn draft_build_exports_libzmq_draft_api() {
    let vendor = common::zeromq_vendor()
        .and_then(|v| std::fs::read_to_string(v.join("include/zmq.h")).ok())
        .map(|h| declared_functions(common::draft_section(&h)));
    match vendor {
        Some(vendor) => {
            let listed: BTreeSet<String> = LIBZMQ_435_DRAFT_EXPORTS
                .iter()
                .map(|s| s.to_string())
                .collect();
            assert_eq!(listed, vendor, "the DRAFT list differs from zeromq-src's zmq.h");
        }
        None => common::missing_tool(
            "zeromq-src 0.3 is not in the cargo registry; the DRAFT list is not checked against its zmq.h",
        ),
    }
    let lib = build_draft();
    let Some(ours) = exported(&lib) else {
        common::missing_tool("`nm` is not available; exported symbols not checked");
        return;
    };
    let want: Vec<&str> = LIBZMQ_435_EXPORTS
        .iter()
        .chain(LIBZMQ_435_DRAFT_EXPORTS)
        .copied()
        .collect();
    assert_same(&ours, &want, &lib);
}

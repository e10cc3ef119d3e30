//! What every criterion bench shares: short runs, so that the whole suite
//! (`cargo bench -p rzmq-benches`) takes a few minutes on a small shared machine, and a `main`
//! that also works under `cargo test`, which runs each bench once (criterion's test mode).

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use criterion::Criterion;

/// 20 samples, 0.5 s warm-up, 2 s of measurement per bench; `RZMQ_BENCH_QUICK=1` shortens it
/// further (10 samples, 0.2 s + 0.5 s) for a smoke run.
pub(crate) fn config() -> Criterion {
    let quick = std::env::var_os("RZMQ_BENCH_QUICK").is_some_and(|v| v != "0");
    let (samples, warm, measure) = if quick {
        (10, Duration::from_millis(200), Duration::from_millis(500))
    } else {
        (20, Duration::from_millis(500), Duration::from_secs(2))
    };
    Criterion::default()
        .sample_size(samples)
        .warm_up_time(warm)
        .measurement_time(measure)
        .configure_from_args()
}

/// libtest options criterion's argument parser rejects, with whether they take a value.
const LIBTEST_ONLY: [(&str, bool); 10] = [
    ("--test-threads", true),
    ("--skip", true),
    ("--logfile", true),
    ("--shuffle-seed", true),
    ("-Z", true),
    ("--include-ignored", false),
    ("--report-time", false),
    ("--ensure-time", false),
    ("--shuffle", false),
    ("--force-run-in-process", false),
];

const REEXEC: &str = "RZMQ_BENCH_REEXEC";

/// `cargo test --workspace -- --test-threads=2` (as scripts/test.sh runs) hands libtest options
/// to every test target, these benches included; criterion exits with "unexpected argument" on
/// them. Runs this executable again without them (once) and exits with its status.
fn reexec_without_libtest_options() {
    if std::env::var_os(REEXEC).is_some() {
        return;
    }
    let mut keep: Vec<OsString> = Vec::new();
    let mut dropped = false;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        let s = a.to_string_lossy();
        match LIBTEST_ONLY.iter().find(|(name, with_value)| {
            s == *name || (*with_value && s.starts_with(&format!("{name}=")))
        }) {
            Some((name, with_value)) => {
                dropped = true;
                if *with_value && s == *name {
                    args.next();
                }
            }
            None => keep.push(a),
        }
    }
    if !dropped {
        return;
    }
    let exe = std::env::current_exe().expect("path of the running bench");
    let status = Command::new(exe)
        .args(keep)
        .env(REEXEC, "1")
        .status()
        .expect("re-run the bench");
    std::process::exit(status.code().unwrap_or(1));
}

/// The bench's `main`: `criterion_main!`'s work, after dropping libtest-only options.
pub(crate) fn run(groups: &[fn()]) {
    reexec_without_libtest_options();
    for g in groups {
        g();
    }
    Criterion::default().configure_from_args().final_summary();
}

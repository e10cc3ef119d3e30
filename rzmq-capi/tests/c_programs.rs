//! Builds the C smoke tests in `tests/c/` against `include/zmq.h` and the `libzmq.so` cargo just
//! built, runs each, and fails on a compile error, a non-zero exit or a hang.
//!
//! The programs link `-lzmq` from a private directory holding `libzmq.so` and `libzmq.so.5`
//! (the soname) pointing at our cdylib, with that directory as their RPATH, so a system libzmq
//! can never stand in; each program also checks that `zmq_version` says 4.3.5. Set `CC` to pick
//! the compiler; without any C compiler the test is skipped with a message.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root (this crate's parent).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The cdylib cargo built next to this test binary (`target/<profile>/libzmq.so`).
fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps.parent().unwrap(), deps] {
        let p = dir.join("libzmq.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libzmq.so not found next to {}", exe.display());
}

fn compiler() -> Option<String> {
    let candidates = std::env::var("CC")
        .ok()
        .into_iter()
        .chain(["cc", "gcc", "clang"].map(String::from));
    candidates.into_iter().find(|cc| {
        Command::new(cc)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A directory with libzmq.so and libzmq.so.5 linking to our cdylib.
fn lib_dir(scratch: &Path) -> PathBuf {
    let dir = scratch.join("lib");
    std::fs::create_dir_all(&dir).unwrap();
    let so = cdylib();
    for name in ["libzmq.so", "libzmq.so.5"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so, &link).unwrap();
    }
    dir
}

fn run_with_timeout(mut cmd: Command, limit: Duration) -> (bool, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn test program");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (status.success(), format!("{status}\n{text}"));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (false, format!("timed out after {limit:?}\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn c_smoke_tests() {
    let Some(cc) = compiler() else {
        common::missing_tool(
            "no C compiler found (set CC); the C smoke tests in tests/c did not run",
        );
        return;
    };
    let root = workspace();
    let src_dir = root.join("tests/c");
    let scratch = std::env::temp_dir().join(format!("rzmq-capi-c-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let libdir = lib_dir(&scratch);

    let mut programs: Vec<PathBuf> = std::fs::read_dir(&src_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    programs.sort();
    assert!(
        programs.len() >= 6,
        "expected the C programs in {}",
        src_dir.display()
    );

    let mut failures = Vec::new();
    for src in &programs {
        let name = src.file_stem().unwrap().to_string_lossy().into_owned();
        let bin = scratch.join(&name);
        let out = Command::new(&cc)
            .args(["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror"])
            .arg("-I")
            .arg(root.join("include"))
            .arg("-o")
            .arg(&bin)
            .arg(src)
            .arg("-L")
            .arg(&libdir)
            .arg(format!("-Wl,-rpath,{}", libdir.display()))
            .args(["-lzmq", "-lpthread"])
            .output()
            .unwrap();
        if !out.status.success() {
            failures.push(format!(
                "{name}: compile failed\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let mut cmd = Command::new(&bin);
        cmd.env("LD_LIBRARY_PATH", &libdir);
        let (ok, text) = run_with_timeout(cmd, Duration::from_secs(60));
        eprintln!("== {name}: {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failures.push(format!("{name}: {text}"));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        failures.is_empty(),
        "C smoke tests failed:\n{}",
        failures.join("\n")
    );
}

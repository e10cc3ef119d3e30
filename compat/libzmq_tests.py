#!/usr/bin/env python3
"""Build and run libzmq 4.3.5's own tests against rzmq's libzmq.so (and the reference libzmq).

Called by compat/run-libzmq-tests.sh; see `compat/run-libzmq-tests.sh --help`.

The tests come from the cargo registry copy of zeromq-src 0.3.x (libzmq 4.3.5, a dev-dependency
of rzmq-tests): vendor/tests/test_*.cpp, testutil*.cpp and vendor/external/unity. They are copied
into compat/build/<lib>/tree/tests so that their `#include "../include/zmq.h"` finds the header
of the library under test (rzmq: include/; reference: the 4.3.5 header of zeromq-src, whose stable
API is the same as 4.3.4's). Everything built lives under compat/build/ (gitignored).

Results per test: PASS, FAIL, TIMEOUT, BUILD-FAIL (does not compile or link against the library's
header and exports), SKIP (the test skipped itself: exit 77 or every case TEST_IGNOREd) and N/A
(not built, see compat/libzmq-test-notes.tsv). Only python3's standard library is used.
"""

import argparse
import concurrent.futures
import datetime
import filecmp
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "compat"
BUILD = COMPAT / "build"
NOTES = COMPAT / "libzmq-test-notes.tsv"
# --draft: the DRAFT build (cargo feature `draft`, target/draft) and the tests built with
# -DZMQ_BUILD_DRAFT_API; expected non-passes of that run.
DRAFT_NOTES = COMPAT / "libzmq-draft-test-notes.tsv"
DRAFT_TARGET_DIR = ROOT / "target" / "draft"
REPORT = ROOT / "docs" / "COMPAT.md"

# What rzmq's zmq_has() is meant to answer true for. It decides which ZMQ_HAVE_* the tests see
# (test_capabilities then checks zmq_has() against it) and which na-unless-CAP tests are built.
RZMQ_CAPS = ["ipc", "curve"]

ALL_CAPS = ["ipc", "pgm", "tipc", "vmci", "norm", "curve", "gssapi", "draft", "ws", "wss"]
CAP_DEFINES = {
    "ipc": ["ZMQ_HAVE_IPC"],
    "pgm": ["ZMQ_HAVE_OPENPGM"],
    "tipc": ["ZMQ_HAVE_TIPC"],
    "vmci": ["ZMQ_HAVE_VMCI"],
    "norm": ["ZMQ_HAVE_NORM"],
    "curve": ["ZMQ_HAVE_CURVE", "ZMQ_USE_LIBSODIUM"],
    "gssapi": ["HAVE_LIBGSSAPI_KRB5"],
    "ws": ["ZMQ_HAVE_WS"],
    "wss": ["ZMQ_HAVE_WSS"],
    "draft": [],  # ZMQ_BUILD_DRAFT_API is never defined: both headers are the stable API
}

# Tests that bind fixed TCP ports (testutil.hpp ENDPOINT_*, literal ports): never two at once.
FIXED_PORT_TESTS = {
    "test_bind_after_connect_tcp",  # 5558
    "test_bind_src_address",  # 5555, 1234, 1235
    "test_immediate",  # 5556, 5561
    "test_last_endpoint",  # 5556, 5557
    "test_reconnect_options",  # 5555
    "test_req_relaxed",  # 5555
}

# Per-test time limits where the default is too short; the tests arm their own alarm() too
# (60 s by default in setup_test_environment).
TIMEOUTS = {}

TESTUTIL = ["testutil", "testutil_monitoring", "testutil_security", "testutil_unity"]
CURVE_EXTRA = ["err", "random", "clock"]  # libzmq internals test_security_curve links (Makefile.am)

REFERENCE_LIB_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libzmq.so.5",
    "/usr/lib/aarch64-linux-gnu/libzmq.so.5",
    "/usr/lib64/libzmq.so.5",
    "/usr/lib/libzmq.so.5",
    "/usr/local/lib/libzmq.so.5",
]

FAILING = ("FAIL", "TIMEOUT", "BUILD-FAIL")

PRINT_LOCK = threading.Lock()
STDBUF = shutil.which("stdbuf")


def log(msg):
    with PRINT_LOCK:
        print(msg, flush=True)


def die(msg):
    print(f"run-libzmq-tests: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


# ----- inputs --------------------------------------------------------------------------------


def cargo_metadata(no_deps):
    cargo = os.environ.get("CARGO", "cargo")
    args = [cargo, "metadata", "--format-version", "1"] + (["--no-deps"] if no_deps else [])
    try:
        out = subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"`{' '.join(args)}` failed: {e}")
    return json.loads(out.stdout)


def zeromq_src_dir(explicit):
    """vendor/ of zeromq-src 0.3.x (libzmq 4.3.5), as tests/src/lib.rs zeromq_src_dir() finds it."""
    if explicit:
        d = Path(explicit).resolve()
    else:
        d = None
        for pkg in cargo_metadata(no_deps=False)["packages"]:
            if pkg["name"] == "zeromq-src" and pkg["version"].startswith("0.3."):
                d = Path(pkg["manifest_path"]).parent / "vendor"
                break
        if d is None:
            die("zeromq-src 0.3.x not found in `cargo metadata` (run `cargo fetch`)")
    for need in ("tests/testutil.hpp", "external/unity/unity.c", "include/zmq.h", "src/err.cpp"):
        if not (d / need).exists():
            die(f"{d / need} missing: is {d} zeromq-src's vendor/ directory? (run `cargo fetch`)")
    return d


class Notes:
    """compat/libzmq-test-notes.tsv: per test, expect kind -> reason (a test may have several
    lines, e.g. `fail` for rzmq and `ref-fail` for the reference)."""

    OURS_OK = ("env", "fail", "flaky")
    REF_OK = ("env", "ref-fail", "flaky")

    def __init__(self, path):
        self.by_test = {}
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 3 or not parts[2].strip():
                die(f"{path}:{n}: want name<TAB>expect<TAB>reason")
            name, expect, reason = (p.strip() for p in parts)
            ok = expect in ("na", "env", "ref-fail", "fail", "flaky") or (
                expect.startswith("na-unless-") and expect[len("na-unless-"):] in ALL_CAPS)
            if not ok:
                die(f"{path}:{n}: unknown expect '{expect}'")
            kinds = self.by_test.setdefault(name, {})
            if expect in kinds:
                die(f"{path}:{n}: {name} {expect} listed twice")
            kinds[expect] = reason

    def names(self):
        return self.by_test.keys()

    def not_applicable(self, name, caps):
        """The reason a test is not built against a library with `caps`, or None."""
        for expect, reason in self.by_test.get(name, {}).items():
            if expect == "na":
                return reason
            if expect.startswith("na-unless-") and expect[len("na-unless-"):] not in caps:
                return reason
        return None

    def expected(self, name, is_ref):
        """(kind, reason) when a failure of this test is expected on that library, else None."""
        kinds = self.by_test.get(name, {})
        for kind in (self.REF_OK if is_ref else self.OURS_OK):
            if kind in kinds:
                return kind, kinds[kind]
        return None

    def has(self, name, kind):
        return kind in self.by_test.get(name, {})


def git_describe():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL).stdout.strip()
        return rev + ("-dirty" if dirty else "") if rev else "unknown"
    except OSError:
        return "unknown"


def build_rzmq(profile, draft=False):
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "build", "-p", "rzmq-capi"] + (["--release"] if profile == "release" else [])
    if draft:
        cmd += ["--features", "draft", "--target-dir", str(DRAFT_TARGET_DIR)]
    log(f"== building rzmq's libzmq.so: {' '.join(cmd)}")
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode != 0:
        die(f"`{' '.join(cmd)}` failed (exit {r.returncode})")
    target = (DRAFT_TARGET_DIR if draft
              else Path(cargo_metadata(no_deps=True)["target_directory"]))
    lib = target / profile / "libzmq.so"
    if not lib.exists():
        die(f"{lib} was not built")
    return lib


def find_lib_in(dirpath):
    d = Path(dirpath)
    for name in ("libzmq.so", "libzmq.so.5"):
        if (d / name).exists():
            return (d / name).resolve()
    die(f"no libzmq.so or libzmq.so.5 in {d}")


def find_reference_lib(explicit):
    if explicit:
        return find_lib_in(explicit)
    for c in REFERENCE_LIB_CANDIDATES:
        if Path(c).exists():
            return Path(c).resolve()
    die("no system libzmq.so.5 found for --reference (Debian: apt-get install libzmq3-dev)")


# ----- a library under test --------------------------------------------------------------------


class Target:
    def __init__(self, key, label, lib, header_dir, vendor, args, draft=False):
        self.key = key  # "rzmq" / "reference" / "rzmq-draft"
        self.draft = draft  # tests compiled with -DZMQ_BUILD_DRAFT_API
        self.label = label
        self.lib = lib  # the real shared object
        self.header_dir = header_dir
        self.vendor = vendor
        self.args = args
        self.dir = BUILD / key
        self.tree = self.dir / "tree"
        self.libdir = self.dir / "lib"
        self.obj = self.dir / "obj"
        self.bin = self.dir / "bin"
        self.logs = self.dir / "logs"
        self.run = self.dir / "run"
        self.caps = []
        self.version = "?"
        self.results = {}

    # -- tree, library directory, probe

    def prepare(self):
        for d in (self.tree / "tests", self.tree / "src", self.libdir, self.obj, self.bin,
                  self.logs, self.run):
            d.mkdir(parents=True, exist_ok=True)
        src = self.vendor / "tests"
        for f in sorted(src.iterdir()):
            if f.suffix in (".cpp", ".hpp", ".h"):
                sync_file(f, self.tree / "tests" / f.name)
        for f in sorted((self.vendor / "src").iterdir()):
            if f.suffix in (".hpp", ".h") or f.stem in CURVE_EXTRA and f.suffix == ".cpp":
                sync_file(f, self.tree / "src" / f.name)
        link = self.tree / "include"
        if link.is_symlink() or link.exists():
            if not link.is_symlink() or Path(os.readlink(link)) != self.header_dir:
                if link.is_dir() and not link.is_symlink():
                    shutil.rmtree(link)
                else:
                    link.unlink()
        if not link.is_symlink():
            link.symlink_to(self.header_dir)
        # A private directory holding libzmq.so (link time) and libzmq.so.5 (the soname, run
        # time) so that neither the linker nor the loader can pick up another libzmq.
        for name in ("libzmq.so", "libzmq.so.5"):
            p = self.libdir / name
            if p.is_symlink() or p.exists():
                p.unlink()
            p.symlink_to(self.lib)

    def env(self):
        e = dict(os.environ)
        e["LD_LIBRARY_PATH"] = str(self.libdir)
        for k in ("LD_PRELOAD", "ZMQ_DISABLE_TEST_TIMEOUT"):
            e.pop(k, None)
        return e

    def probe(self):
        """Compile a probe against the header and library: which library loads, its zmq_has()."""
        c = self.dir / "probe.c"
        c.write_text(PROBE_C)
        exe = self.dir / "probe"
        cmd = ["gcc", "-o", str(exe), str(c), "-I", str(self.header_dir), "-L", str(self.libdir),
               "-lzmq", "-ldl", f"-Wl,-rpath,{self.libdir}"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            die(f"probe build failed for {self.label}:\n{r.stdout}")
        r = subprocess.run([str(exe)] + ALL_CAPS, stdout=subprocess.PIPE, text=True,
                           env=self.env(), timeout=30)
        if r.returncode != 0:
            die(f"probe failed against {self.label} (exit {r.returncode})")
        info = json.loads(r.stdout)
        loaded = Path(info["path"]).resolve()
        if loaded != self.lib.resolve():
            die(f"the tests would load {loaded}, not {self.lib}: check LD_LIBRARY_PATH/rpath")
        self.version = info["version"]
        return [c for c in ALL_CAPS if info["has"].get(c)]

    def write_platform(self):
        lines = ["/* Generated by compat/libzmq_tests.py: the build configuration of",
                 f"   {self.label}. */",
                 "#ifndef __ZMQ_PLATFORM_HPP_INCLUDED__",
                 "#define __ZMQ_PLATFORM_HPP_INCLUDED__",
                 f"/* capabilities (zmq_has): {' '.join(self.caps) or 'none'} */"]
        for cap in self.caps:
            lines += [f"#define {d}" for d in CAP_DEFINES[cap]]
        lines += [f'#include "{COMPAT / "platform.hpp"}"', "#endif", ""]
        write_if_changed(self.tree / "src" / "platform.hpp", "\n".join(lines))

    # -- compile, link

    def cxxflags(self):
        draft = ["-DZMQ_BUILD_DRAFT_API"] if self.draft else []
        return (["-std=gnu++11", "-O1", "-w", "-pthread", "-D_REENTRANT", "-D_THREAD_SAFE",
                 "-DUNITY_USE_COMMAND_LINE_ARGS", "-DUNITY_EXCLUDE_FLOAT"] + draft
                + ["-I", str(self.tree / "include"), "-I", str(self.vendor / "external" / "unity")])

    def configure_stamp(self):
        """Objects are rebuilt when the flags, header, platform or sources' origin change."""
        h = hashlib.sha256()
        h.update(" ".join(self.cxxflags()).encode())
        h.update(str(self.vendor).encode())
        for f in sorted(self.header_dir.glob("*.h")) + [self.tree / "src" / "platform.hpp",
                                                       COMPAT / "platform.hpp"]:
            h.update(f.name.encode())
            h.update(f.read_bytes())
        stamp = self.obj / "stamp"
        digest = h.hexdigest()
        if not stamp.exists() or stamp.read_text() != digest:
            shutil.rmtree(self.obj)
            shutil.rmtree(self.bin)
            self.obj.mkdir(parents=True)
            self.bin.mkdir(parents=True)
            stamp.write_text(digest)

    def compile(self, src, obj, c=False):
        deps = [src] + sorted((self.tree / "tests").glob("*.hpp"))
        if obj.exists() and obj.stat().st_mtime >= max(d.stat().st_mtime for d in deps):
            return None
        if c:
            cmd = ["gcc", "-O1", "-w", "-DUNITY_USE_COMMAND_LINE_ARGS", "-DUNITY_EXCLUDE_FLOAT",
                   "-I", str(self.vendor / "external" / "unity"), "-c", str(src), "-o", str(obj)]
        else:
            cmd = ["g++"] + self.cxxflags() + ["-c", str(src), "-o", str(obj)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            if obj.exists():
                obj.unlink()
            return r.stdout or f"exit {r.returncode}"
        return None

    def common_objects(self):
        objs = [(self.vendor / "external" / "unity" / "unity.c", self.obj / "unity.o", True)]
        objs += [(self.tree / "tests" / f"{n}.cpp", self.obj / f"{n}.o", False) for n in TESTUTIL]
        if "curve" in self.caps:
            objs += [(self.tree / "src" / f"{n}.cpp", self.obj / f"zmq_{n}.o", False)
                     for n in CURVE_EXTRA]
        return objs

    def build_test(self, name):
        """Returns None on success, else the compiler/linker output."""
        src = self.tree / "tests" / f"{name}.cpp"
        obj = self.obj / f"{name}.o"
        err = self.compile(src, obj)
        if err:
            return err
        exe = self.bin / name
        inputs = [obj, self.lib] + [o for _, o, _ in self.common_objects()]
        extra = []
        if name == "test_security_curve":
            extra = [str(self.obj / f"zmq_{n}.o") for n in CURVE_EXTRA] + ["-lsodium"]
        if exe.exists() and exe.stat().st_mtime >= max(i.stat().st_mtime for i in inputs):
            return None
        common = [str(self.obj / "unity.o")] + [str(self.obj / f"{n}.o") for n in TESTUTIL]
        cmd = (["g++", "-pthread", "-o", str(exe), str(obj)] + common[1:] + [common[0]] + extra
               + ["-L", str(self.libdir), "-lzmq", f"-Wl,-rpath,{self.libdir}", "-lrt"])
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            if exe.exists():
                exe.unlink()
            return r.stdout or f"exit {r.returncode}"
        return None


PROBE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <zmq.h>
int main (int argc, char **argv)
{
    Dl_info info;
    int major, minor, patch, i;
    if (!dladdr ((void *) zmq_version, &info) || !info.dli_fname)
        return 1;
    zmq_version (&major, &minor, &patch);
    printf ("{\"path\": \"%s\", \"version\": \"%d.%d.%d\", \"has\": {", info.dli_fname, major,
            minor, patch);
    for (i = 1; i < argc; i++)
        printf ("%s\"%s\": %d", i > 1 ? ", " : "", argv[i], zmq_has (argv[i]));
    printf ("}}\n");
    return 0;
}
"""


def sync_file(src, dst):
    if dst.exists() and filecmp.cmp(src, dst, shallow=False):
        return
    shutil.copy2(src, dst)
    os.chmod(dst, 0o644)


def write_if_changed(path, text):
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)


# ----- running ---------------------------------------------------------------------------------

UNITY_SUMMARY = re.compile(r"^(\d+) Tests (\d+) Failures (\d+) Ignored", re.M)
UNITY_FAIL = re.compile(r"^(?:.*/)?([^/\n]+?:\d+:[^:\n]*:FAIL.*)$", re.M)
UNITY_IGNORE = re.compile(r"^(?:.*/)?[^/\n]+?:\d+:([^:\n]*):IGNORE(?::\s*(.*))?$", re.M)


def first_build_error(out):
    for line in out.splitlines():
        if "error:" in line or "undefined reference" in line:
            line = re.sub(r"^.*/(tests|src|include)/", r"\1/", line.strip())
            return line[:300]
    lines = [l for l in out.splitlines() if l.strip()]
    return lines[-1][:300] if lines else "build failed"


def classify(rc, out, timed_out, limit, cases=()):
    """(status, detail) from a test's exit status and output."""
    m = UNITY_SUMMARY.search(out)
    fails = [f.strip() for f in UNITY_FAIL.findall(out)]
    if timed_out:
        return "TIMEOUT", f"killed after {limit} s" + (
            f"; first failure: {fails[0]}" if fails else "") + progress(out, cases)
    if rc is not None and rc < 0:
        sig = -rc
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGALRM:
            return "TIMEOUT", "the test's own alarm() fired (SIGALRM)" + (
                f"; first failure: {fails[0]}" if fails else "") + progress(out, cases)
        tail = last_line(out)
        return "FAIL", f"killed by {name}" + (f"; first failure: {fails[0]}" if fails
                                               else (f" after: {tail}" if tail else ""))
    if rc == 77:
        return "SKIP", "the test skipped itself (exit 77)"
    if rc == 0:
        if m and int(m.group(1)) > 0 and int(m.group(3)) == int(m.group(1)):
            msgs = sorted({(g[1] or g[0]).strip() for g in UNITY_IGNORE.findall(out)})
            return "SKIP", "every case ignored: " + "; ".join(msgs)
        if m and int(m.group(3)):
            return "PASS", f"{m.group(3)} of {m.group(1)} cases ignored"
        return "PASS", ""
    if fails:
        return "FAIL", fails[0]
    tail = last_line(out)
    return "FAIL", f"exit {rc}" + (f" after: {tail}" if tail else "")


def progress(out, cases):
    """Where a killed test was: the first of its RUN_TEST cases that Unity did not report."""
    done = re.findall(r"^(?:.*/)?[^/\n]+?:\d+:([^:\n]+):(?:PASS|FAIL|IGNORE)", out, re.M)
    left = [c for c in cases if c not in done]
    if left:
        return f"; stuck in case {left[0]}"
    return f"; stuck after case {done[-1]}" if done else ""


def run_cases(src):
    """The RUN_TEST cases of a test source, in order (commented-out ones left out)."""
    try:
        text = src.read_text(errors="replace")
    except OSError:
        return []
    return re.findall(r"^\s*RUN_TEST\s*\(\s*(\w+)", text, re.M)


def last_line(out):
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def run_one(target, name, port_lock):
    exe = target.bin / name
    cwd = target.run / name
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir(parents=True)
    limit = TIMEOUTS.get(name, target.args.timeout)
    logf = target.logs / f"{name}.log"
    held = name in FIXED_PORT_TESTS
    if held:
        port_lock.acquire()
    t0 = time.monotonic()
    timed_out = False
    try:
        with open(logf, "wb") as out:
            # Line-buffered stdout (stdbuf): a test killed at the time limit still shows how
            # far it got.
            argv = ([STDBUF, "-oL", "-eL"] if STDBUF else []) + [str(exe)]
            p = subprocess.Popen(argv, cwd=cwd, env=target.env(), stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
            try:
                rc = p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                rc = p.wait()
            # Forked children of the test (test_fork, ...) must not outlive it.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    finally:
        if held:
            port_lock.release()
    secs = time.monotonic() - t0
    text = logf.read_bytes().decode("utf-8", "replace")
    status, detail = classify(rc, text, timed_out, limit,
                              run_cases(target.tree / "tests" / f"{name}.cpp"))
    shutil.rmtree(cwd, ignore_errors=True)
    return {"status": status, "detail": detail, "seconds": round(secs, 1), "rc": rc}


def run_target(target, notes, tests, jobs):
    log(f"== {target.label}: {target.lib}")
    target.prepare()
    probed = target.probe()
    if target.key.startswith("rzmq"):
        target.caps = [c for c in ALL_CAPS
                       if c in RZMQ_CAPS or (c == "draft" and target.draft)]
        if probed != target.caps:
            log(f"   warning: zmq_has() answers {probed}, RZMQ_CAPS says {target.caps}")
    else:
        target.caps = probed
    log(f"   version {target.version}, capabilities: {' '.join(target.caps) or 'none'}")
    target.write_platform()
    target.configure_stamp()

    results = {}
    to_build = []
    for name in tests:
        reason = getattr(target, "skip", {}).get(name) or notes.not_applicable(name, target.caps)
        if reason is not None:
            results[name] = {"status": "N/A", "detail": reason}
        else:
            to_build.append(name)

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        common = target.common_objects()
        errs = list(pool.map(lambda a: target.compile(*a), common))
        for (src, _, _), err in zip(common, errs):
            if err:
                die(f"{src.name} does not build against {target.label}:\n{err}")
        built = dict(zip(to_build, pool.map(target.build_test, to_build)))
    runnable = []
    for name in to_build:
        if built[name]:
            (target.logs / f"{name}.log").write_text(built[name])
            results[name] = {"status": "BUILD-FAIL", "detail": first_build_error(built[name])}
        else:
            runnable.append(name)
    log(f"   built {len(runnable)} of {len(to_build)} tests in {time.monotonic() - t0:.0f} s; "
        f"running {min(jobs, len(runnable))} at a time")

    # Longest first (from the previous run) so that two lanes finish together.
    prev = {}
    saved = target.dir / ("results.json" if not target.args.tests else "results-partial.json")
    if (target.dir / "results.json").exists():
        try:
            prev = {k: v.get("seconds", 0) for k, v in
                    json.loads((target.dir / "results.json").read_text())["results"].items()}
        except (ValueError, KeyError):
            prev = {}
    runnable.sort(key=lambda n: -prev.get(n, 5))
    port_lock = threading.Lock()
    t0 = time.monotonic()

    def one(name):
        r = run_one(target, name, port_lock)
        mark = r["status"] + (f" ({r['detail']})" if r["status"] != "PASS" and r["detail"] else "")
        log(f"   {name:34} {r['seconds']:6.1f}s  {mark}")
        return name, r

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for name, r in pool.map(one, runnable):
            results[name] = r
    log(f"   ran {len(runnable)} tests in {time.monotonic() - t0:.0f} s")
    target.results = {n: results[n] for n in tests}
    target.meta = {
        "argv": sys.argv[1:],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "rzmq": git_describe(),
        "timeout": target.args.timeout,
        "jobs": jobs,
        "lib_given": bool(target.args.lib),
        "with_reference": bool(target.args.reference or target.args.reference_only),
        "draft": target.draft,
    }
    saved.write_text(json.dumps({"label": target.label, "version": target.version,
                                 "lib": str(target.lib), "caps": target.caps,
                                 "meta": target.meta, "results": target.results}, indent=1))
    return target.results


# ----- report ----------------------------------------------------------------------------------


def counts(results):
    c = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for r in results.values():
        s = r["status"]
        c["PASS" if s == "PASS" else "FAIL" if s in FAILING else "SKIP"] += 1
    return c


def summary_line(results):
    c = counts(results)
    return f"{c['PASS']} passed, {c['FAIL']} failed, {c['SKIP']} skipped"


def unexpected(results, notes, reference=False):
    return [n for n, r in results.items()
            if r["status"] in FAILING and not notes.expected(n, reference)]


def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def explain(name, r, other, notes, is_ref):
    """The notes column for one library's result."""
    st, detail = r["status"], r.get("detail", "")
    if st in ("N/A", "SKIP"):
        return detail
    if st == "PASS":
        if not is_ref and notes.has(name, "fail"):
            return "passes now: remove its `fail` line from compat/libzmq-test-notes.tsv"
        if notes.has(name, "flaky"):
            return "; ".join(x for x in (detail, "passed this run; flaky: "
                                         + notes.by_test[name]["flaky"]) if x)
        return detail
    exp = notes.expected(name, is_ref)
    if exp:
        text = f"{exp[1]} (expected: `{exp[0]}`)"
    else:
        text = "**undocumented**"
        if other is not None and other["status"] in FAILING:
            text += "; fails on the other library too (environmental?)"
    return text + (f"; `{detail}`" if detail else "")


def write_report(ours, ref, notes, tests, path):
    if ours.meta.get("draft"):
        return write_draft_report(ours, notes, tests, path)
    meta = ours.meta
    argv = meta["argv"]
    date = meta["date"]
    cmd = "compat/run-libzmq-tests.sh" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv))
    gxx = subprocess.run(["g++", "--version"], stdout=subprocess.PIPE, text=True).stdout.splitlines()[0]
    out = []
    w = out.append
    w("# Compatibility")
    w("")
    w("## libzmq 4.3.5's own test suite")
    w("")
    w(f"> Generated by `{cmd}` on {date} (rzmq {meta['rzmq']}).")
    w("> Do not edit: change compat/libzmq-test-notes.tsv or the code, and run the command again.")
    w("")
    lib = ("built by `cargo build --release -p rzmq-capi`" if not meta["lib_given"]
           else f"`{ours.lib}`")
    w("libzmq 4.3.5's own tests (`vendor/tests/test_*.cpp` of the zeromq-src 0.3 crate), compiled")
    w("with g++ against rzmq's `include/zmq.h` and linked with `-lzmq` against rzmq's libzmq.so")
    w(f"({lib}). Each test runs for at most {meta['timeout']} s, {meta['jobs']} at a time "
      f"({gxx}).")
    if ref:
        w("")
        w(f"The reference column: the same tests against the system's libzmq {ref.version} "
          f"(`{ref.lib}`),")
        w("compiled with libzmq 4.3.5's `zmq.h`. A test that fails there too fails because of the test")
        w("environment, or because it checks 4.3.5 behaviour that 4.3.4 lacks (`ref-fail` in the notes).")
    else:
        w("")
        w("The reference libzmq was not run (`--reference` adds it).")
    w("")
    w("The tests' platform.hpp (`ZMQ_HAVE_*`) declares these capabilities: rzmq: "
      f"{', '.join(ours.caps) or 'none'}" + (f"; reference: {', '.join(ref.caps)}" if ref else "")
      + ".")
    w("")
    w("Results: PASS; FAIL; TIMEOUT; BUILD-FAIL (does not compile or link against the header and")
    w("exports); SKIP (the test skipped itself: exit 77, or every case ignored); N/A (not built, for")
    w("the reason given). A failure is quoted as Unity prints it, `test file:line:case:FAIL: message`,")
    w("where the line is the failing assertion's and may be in testutil*.cpp. Skipped counts SKIP and")
    w("N/A. Expected failures (`fail`, `flaky`, `env`, `ref-fail`) and their reasons come from")
    w("compat/libzmq-test-notes.tsv; any other failure makes the command exit 1.")
    w("")
    w(f"**rzmq: {summary_line(ours.results)}**" + (f"; reference libzmq {ref.version}: "
                                                   f"{summary_line(ref.results)}" if ref else "")
      + f" ({len(tests)} upstream tests).")
    bad = unexpected(ours.results, notes)
    if bad:
        w(f"Failing on rzmq for a reason not in the notes (regressions or open bugs): "
          f"{', '.join('`%s`' % b for b in bad)}.")
    w("")
    if ref:
        w("| test | rzmq | reference | notes |")
        w("| --- | --- | --- | --- |")
    else:
        w("| test | rzmq | notes |")
        w("| --- | --- | --- |")
    for name in tests:
        r = ours.results[name]
        rr = ref.results[name] if ref else None
        note = explain(name, r, rr, notes, False)
        if ref:
            if rr["status"] != "PASS":
                rnote = explain(name, rr, r, notes, True)
                if rnote and rnote != note:
                    note = (note + "; " if note else "") + f"reference: {rnote}"
            w(f"| {name} | {r['status']} | {rr['status']} | {cell(note)} |")
        else:
            w(f"| {name} | {r['status']} | {cell(note)} |")
    w("")
    w("Logs of the last run: `compat/build/<rzmq|reference>/logs/<test>.log`.")
    w("")
    write_section(path, "\n".join(out))


def write_draft_report(ours, notes, tests, path):
    """The --draft run's section of docs/COMPAT.md."""
    meta = ours.meta
    argv = meta["argv"]
    cmd = "compat/run-libzmq-tests.sh" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv))
    out = []
    w = out.append
    w("## libzmq 4.3.5's tests against the DRAFT build")
    w("")
    w(f"> Generated by `{cmd}` on {meta['date']} (rzmq {meta['rzmq']}).")
    w("> Do not edit: change compat/libzmq-draft-test-notes.tsv or the code, and run the command again.")
    w("")
    lib = ("built by `cargo build --release -p rzmq-capi --features draft --target-dir target/draft`"
           if not meta["lib_given"] else f"`{ours.lib}`")
    w("The same harness with `--draft`: the tests are compiled with `-DZMQ_BUILD_DRAFT_API` against")
    w(f"rzmq's `include/zmq.h` and linked with the DRAFT build of libzmq.so ({lib}), as libzmq's")
    w("`--enable-drafts` build runs them. Only the tests whose build the define changes are built:")
    w("libzmq's DRAFT-only tests (Makefile.am), and the stable tests that use a DRAFT name (`#ifdef")
    w("ZMQ_BUILD_DRAFT_API`, a DRAFT constant or function); the others compile to the same program as")
    w("in the stable run above and are N/A here. Expected non-passes and their reasons come from")
    w(f"compat/libzmq-draft-test-notes.tsv. Each test runs for at most {meta['timeout']} s, "
      f"{meta['jobs']} at a time.")
    w("")
    built = {n: r for n, r in ours.results.items() if r.get("detail") != NO_DRAFT_CODE}
    w(f"**rzmq (draft): {summary_line(built)}** ({len(built)} tests with DRAFT code; "
      f"{len(tests) - len(built)} others as in the stable run).")
    bad = unexpected(ours.results, notes)
    if bad:
        w(f"Failing for a reason not in the notes: {', '.join('`%s`' % b for b in bad)}.")
    w("")
    w("| test | rzmq (draft) | notes |")
    w("| --- | --- | --- |")
    for name in tests:
        r = ours.results[name]
        if r.get("detail") == NO_DRAFT_CODE:
            continue
        w(f"| {name} | {r['status']} | {cell(explain(name, r, None, notes, False))} |")
    w("")
    w("Logs of the last run: `compat/build/rzmq-draft/logs/<test>.log`.")
    w("")
    write_section(path, "\n".join(out), DRAFT_SECTION)


# Why a test is not built by --draft.
NO_DRAFT_CODE = "no DRAFT code: compiles as in the stable run"


def draft_names(header):
    """The names the ZMQ_BUILD_DRAFT_API section of a zmq.h defines or declares."""
    text = Path(header).read_text()
    start = text.find("#ifdef ZMQ_BUILD_DRAFT_API")
    if start < 0:
        die(f"{header} has no ZMQ_BUILD_DRAFT_API section")
    section = text[start:]
    ends = [m.start() for m in re.finditer(r"#endif\s*(//|/\*)\s*ZMQ_BUILD_DRAFT_API", section)]
    section = section[:ends[0]] if ends else section
    names = set(re.findall(r"#define\s+(\w+)", section))
    names |= set(re.findall(r"\b(zmq_\w+)\s*\(", section))
    return names | {"ZMQ_BUILD_DRAFT_API"}


def draft_only_tests(vendor):
    """The tests libzmq's Makefile.am builds only with --enable-drafts."""
    text = (vendor / "Makefile.am").read_text()
    m = re.search(r"if ENABLE_DRAFTS\s*\ntest_apps \+=((?:[^\n]*\\\n)*[^\n]*)", text)
    return set(re.findall(r"tests/(test_\w+)", m.group(1))) if m else set()


def uses_draft(src, names):
    """True when a test's source mentions a DRAFT name (so -DZMQ_BUILD_DRAFT_API changes it)."""
    return bool(set(re.findall(r"\b\w+\b", src.read_text(errors="replace"))) & names)


SECTION = ("<!-- libzmq-tests:begin -->", "<!-- libzmq-tests:end -->")
DRAFT_SECTION = ("<!-- libzmq-draft-tests:begin -->", "<!-- libzmq-draft-tests:end -->")


def write_section(path, body, markers=SECTION):
    """Writes this report between its markers in `path`, keeping whatever else the file holds (the
    pyzmq harness keeps its own section there); a file without the markers gets it at the top
    (the DRAFT section: after the stable one)."""
    begin, end = markers
    section = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    elif markers == DRAFT_SECTION and SECTION[1] in text:
        head, tail = text.split(SECTION[1], 1)
        text = head + SECTION[1] + "\n\n" + section + tail
    else:
        # A previous version of this report without markers: drop it, keep other sections.
        if text.startswith("# Compatibility: libzmq's own test suite"):
            cut = [i for i in (text.find("\n<!-- "), text.find("\n## ")) if i >= 0]
            text = text[min(cut) + 1:] if cut else ""
        text = section + ("\n" + text if text.strip() else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# ----- main ------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(
        prog="compat/run-libzmq-tests.sh",
        description="Compile libzmq 4.3.5's own tests against rzmq's zmq.h and libzmq.so, run "
                    "them and write docs/COMPAT.md. Exit status 1 if a test fails that "
                    "compat/libzmq-test-notes.tsv does not list as expected.")
    ap.add_argument("--lib", metavar="DIR",
                    help="test the libzmq.so in DIR instead of building target/release/libzmq.so")
    ap.add_argument("--reference", action="store_true",
                    help="also run the tests against the system libzmq (the reference column)")
    ap.add_argument("--reference-only", action="store_true",
                    help="run only against the system libzmq (checks the harness; no COMPAT.md)")
    ap.add_argument("--reference-lib", metavar="DIR",
                    help="the reference libzmq.so.5's directory (default: the system's)")
    ap.add_argument("--profile", default="release", choices=["release", "debug"],
                    help="cargo profile to build when --lib is not given (default release)")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="parallel compiles and tests (2)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per test (60)")
    ap.add_argument("--tests", metavar="NAMES",
                    help="comma-separated tests to run (others are left out; no COMPAT.md)")
    ap.add_argument("--report", metavar="FILE", default=str(REPORT),
                    help="where to write the report (default docs/COMPAT.md)")
    ap.add_argument("--no-report", action="store_true", help="do not write the report")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from the last run's results (after editing the notes)")
    ap.add_argument("--zeromq-src", metavar="DIR", help="zeromq-src's vendor/ directory")
    ap.add_argument("--draft", action="store_true",
                    help="the DRAFT API: build libzmq.so with --features draft (target/draft), "
                         "compile the tests that have DRAFT code with -DZMQ_BUILD_DRAFT_API; "
                         "notes: compat/libzmq-draft-test-notes.tsv")
    args = ap.parse_args()
    if args.draft and (args.reference or args.reference_only):
        die("--draft has no reference column: the system libzmq is a stable build")

    for tool in ("g++", "gcc"):
        if not shutil.which(tool):
            die(f"{tool} not found")
    vendor = zeromq_src_dir(args.zeromq_src)
    notes_path = DRAFT_NOTES if args.draft else NOTES
    notes = Notes(notes_path)
    if args.draft:
        # The stable notes' N/A lines hold in the DRAFT build too (fuzzers, transports not
        # built, privileges), except those that only say the test needs the DRAFT API.
        for name, kinds in Notes(NOTES).by_test.items():
            for kind, reason in kinds.items():
                if kind.startswith("na") and not reason.startswith("draft API"):
                    notes.by_test.setdefault(name, {}).setdefault(kind, reason)
    tests = sorted(p.stem for p in (vendor / "tests").glob("test_*.cpp"))
    for n in notes.names():
        if n not in tests:
            die(f"{notes_path}: {n} is not a test of {vendor}")
    no_draft = set()
    if args.draft:
        names = draft_names(ROOT / "include" / "zmq.h")
        only = draft_only_tests(vendor)
        no_draft = {t for t in tests
                    if t not in only and not uses_draft(vendor / "tests" / f"{t}.cpp", names)}
    if args.tests:
        want = [t.strip() for t in args.tests.split(",") if t.strip()]
        for t in want:
            if t not in tests:
                die(f"unknown test {t}")
        tests = [t for t in tests if t in want]
    t_start = time.monotonic()
    BUILD.mkdir(parents=True, exist_ok=True)

    if args.report_only:
        return report_only(args, notes, tests)

    ref = None
    if args.reference or args.reference_only:
        ref = Target("reference", "reference libzmq", find_reference_lib(args.reference_lib),
                     vendor / "include", vendor, args)
    ours = None
    if not args.reference_only:
        lib = find_lib_in(args.lib) if args.lib else build_rzmq(args.profile, args.draft)
        if args.draft:
            ours = Target("rzmq-draft", "rzmq (draft)", lib, ROOT / "include", vendor, args,
                          draft=True)
        else:
            ours = Target("rzmq", "rzmq", lib, ROOT / "include", vendor, args)
        ours.skip = {t: NO_DRAFT_CODE for t in no_draft}

    if ref:
        run_target(ref, notes, tests, args.jobs)
        ref.label = f"reference libzmq {ref.version}"
    if ours:
        run_target(ours, notes, tests, args.jobs)

    if ours and not args.no_report and not args.tests:
        write_report(ours, ref, notes, tests, Path(args.report))
        log(f"== wrote {args.report}")

    return summarize(ours, ref, notes, t_start)


def summarize(ours, ref, notes, t_start):
    rc = 0
    if ref:
        bad = unexpected(ref.results, notes, reference=True)
        for n in bad:
            log(f"   reference: {n}: {ref.results[n]['status']}: {ref.results[n]['detail']}")
        log(f"reference libzmq {ref.version}: {summary_line(ref.results)}"
            + (f" ({len(bad)} not in the notes)" if bad else ""))
        if not ours and bad:
            rc = 1
    if ours:
        bad = unexpected(ours.results, notes)
        fixed = [n for n, r in ours.results.items()
                 if r["status"] == "PASS" and notes.has(n, "fail")]
        for n in fixed:
            log(f"   {n} passes now: remove its `fail` line from compat/libzmq-test-notes.tsv")
        for n in bad:
            log(f"   UNEXPECTED {n}: {ours.results[n]['status']}: {ours.results[n]['detail']}")
        log(f"rzmq: {len(bad)} unexpected failure(s); {time.monotonic() - t_start:.0f} s in all")
        rc = 1 if bad else 0
        log(summary_line(ours.results))
    return rc


def report_only(args, notes, tests):
    """Rebuilds the report from compat/build/*/results.json (the last full run)."""
    def load(key):
        f = BUILD / key / "results.json"
        if not f.exists():
            return None
        d = json.loads(f.read_text())
        if "meta" not in d:
            return None
        return argparse.Namespace(lib=d["lib"], caps=d["caps"], version=d["version"],
                                  results=d["results"], meta=d["meta"])
    t_start = time.monotonic()
    ours = load("rzmq-draft" if args.draft else "rzmq")
    if ours is None or set(ours.results) != set(tests):
        die("no complete rzmq run in compat/build/rzmq*/results.json to report on")
    ref = load("reference") if ours.meta.get("with_reference") else None
    if ref is not None and set(ref.results) != set(tests):
        ref = None
    for t in (ours, ref):
        # N/A lines follow the current notes; other results stay as run.
        if t is None:
            continue
        for name in tests:
            reason = notes.not_applicable(name, t.caps)
            if reason is not None and t.results[name].get("detail") != NO_DRAFT_CODE:
                t.results[name] = {"status": "N/A", "detail": reason}
    write_report(ours, ref, notes, tests, Path(args.report))
    log(f"== wrote {args.report} from the run of {ours.meta['date']}")
    return summarize(ours, ref, notes, t_start)


if __name__ == "__main__":
    sys.exit(main())

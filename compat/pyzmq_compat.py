#!/usr/bin/env python3
"""Runs pyzmq's test suite per mode, survives crashes and hangs, and writes the pyzmq section of
docs/COMPAT.md. Called by compat/run-pyzmq-tests.sh, which prepares the virtual environments;
standard library only. scripts/test-wheel.sh calls it too, with the modes wheel-run (`rzmq run --
python -m pytest`) and wheel-activate (RZMQ_ACTIVATE=1) in a venv holding the rzmq wheel, and
--no-report (those runs are not part of docs/COMPAT.md).

Per mode the run is repeated after a crash (a test that kills the interpreter or outlives the
mode's deadline) with every test already reported deselected, so one crash costs one test, and
the crashing test is reported as 'crashed' with the tail of the log.

Classification (the final line 'N passed, M failed, K skipped' counts all modes run now):
  passed   passed, xpassed (a test the notes expect to fail that passed: reported, not failed)
  failed   failed, error, crashed, not run (deadline), wrong library, traffic check failures
  skipped  pytest skips (with pytest's reason), notes xfail (failed as the notes expect),
           notes flaky (a timing-dependent test that failed this time; when it passes it is a
           pass), notes deselect (never run; reason from the notes)
"""

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time

COMPAT = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(COMPAT)
MODES = ("reference", "preload", "source")
MODE_TEXT = {
    "reference": "stock pyzmq wheel, its bundled libzmq (no rzmq)",
    "preload": "stock pyzmq wheel + LD_PRELOAD=target/release/libzmq.so (rzmq)",
    "source": "pyzmq built from source against scripts/install.sh PREFIX (rzmq), LD_LIBRARY_PATH=PREFIX/lib",
    # scripts/test-wheel.sh (not in docs/COMPAT.md): the stock wheel next to the rzmq wheel
    "wheel-run": "stock pyzmq wheel + rzmq wheel, `rzmq run -- python -m pytest`",
    "wheel-activate": "stock pyzmq wheel + rzmq wheel, RZMQ_ACTIVATE=1",
}
# The wheel modes take the preload mode's rows of the notes (the same library serving the same
# wheel) and the rows for 'wheel' (differences of their environment: no build tools on PATH).
NOTES_MODE = {"wheel-run": "preload,wheel", "wheel-activate": "preload,wheel"}
PASS = {"passed", "xpassed"}
SKIP = {"skipped", "xfailed", "deselected", "flaky"}
BEGIN, END = "<!-- pyzmq:begin -->", "<!-- pyzmq:end -->"

sys.path.insert(0, COMPAT)
from pyzmq_compat_plugin import read_notes  # noqa: E402


def log(msg):
    print(f"[pyzmq-compat] {msg}", flush=True)


def classify(outcome):
    if outcome in PASS:
        return "passed"
    if outcome in SKIP:
        return "skipped"
    return "failed"


def read_events(path):
    events = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a crash
    return events


def log_tail(path, start, limit=6):
    """Last meaningful lines of the log written since offset `start` (why a run died)."""
    with open(path, errors="replace") as f:
        f.seek(start)
        lines = [line.rstrip() for line in f if line.strip()]
    keep = [l for l in lines if "Fatal Python error" in l or "Segmentation" in l or "Abort" in l
            or "panicked" in l or "Killed" in l or "Timeout" in l]
    return " | ".join((keep or lines)[-limit:])[:400]


def current_test_age(path):
    """Seconds since the test now running (last 'start' without 'done') started; 0 if none."""
    last = None
    for ev in read_events(path):
        if ev.get("event") == "start":
            last = ev
        elif ev.get("event") == "done" and last and ev["nodeid"] == last["nodeid"]:
            last = None
    return time.time() - last["t"] if last else 0


def run_mode(args, mode, env, python, notes):
    """Runs the suite for `mode`; returns {nodeid: result} plus run facts."""
    build = args.build
    results_path = os.path.join(build, f"pyzmq-{mode}-events.jsonl")
    skip_path = os.path.join(build, f"pyzmq-{mode}-skip.txt")
    log_path = os.path.join(build, f"pyzmq-{mode}.log")
    for p in (results_path, skip_path, log_path):
        if os.path.exists(p):
            os.remove(p)
    for old in os.listdir(build):
        if old.startswith(f"pyzmq-{mode}") and old.endswith(".xml"):
            os.remove(os.path.join(build, old))
    deselect = [(tid, reason) for tid, action, reason in notes if action == "deselect"]
    env = dict(env)
    env.update({
        "RZMQ_COMPAT_MODE": NOTES_MODE.get(mode, mode),
        "RZMQ_COMPAT_NOTES": args.notes,
        "RZMQ_COMPAT_RESULTS": results_path,
        "RZMQ_COMPAT_SKIPFILE": skip_path,
        "PYTHONPATH": COMPAT,
    })
    results, collected, libcheck, crashes = {}, [], None, 0
    deadline = time.monotonic() + args.mode_deadline
    attempt = 0
    while True:
        attempt += 1
        xml = os.path.join(build, f"pyzmq-{mode}.xml" if attempt == 1 else f"pyzmq-{mode}-{attempt}.xml")
        cmd = [*launcher(args, mode), python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pyzmq_compat_plugin",
               f"--timeout={args.timeout}", "--timeout-method=signal", "-v", "-rfEsx",
               f"--junitxml={xml}", "-o", f"junit_suite_name=pyzmq-{mode}"]
        for tid, _ in deselect:
            cmd.append(f"--deselect={tid}")
        cmd.append("tests")
        with open(log_path, "a") as logf:
            start = logf.tell()
            logf.write(f"\n=== attempt {attempt}: {' '.join(cmd)}\n")
            logf.flush()
            proc = subprocess.Popen(cmd, cwd=args.tests, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            timed_out = hung = False
            # Watchdog: pytest-timeout's signal may never be handled (a thread stuck in C with the
            # signal blocked); kill a test running well past --timeout, and stop at the deadline.
            while True:
                try:
                    proc.wait(timeout=2)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() > deadline:
                    timed_out = True
                elif current_test_age(results_path) > args.timeout * 1.5 + 30:
                    hung = True
                if timed_out or hung:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
        events = read_events(results_path)
        finished = False
        started = set()
        for ev in events:
            kind = ev.get("event")
            if kind == "collected" and not collected:
                collected = ev["nodeids"]
            elif kind == "libcheck":
                libcheck = ev
            elif kind == "start":
                started.add(ev["nodeid"])
            elif kind == "done":
                results[ev["nodeid"]] = ev
            elif kind == "finish":
                finished = True
        os.remove(results_path)
        if libcheck and libcheck["problems"]:
            log(f"{mode}: wrong library: {libcheck['problems']}")
            break
        dead = [n for n in started if n not in results]
        if timed_out:
            why = "killed at the mode deadline"
        elif hung:
            why = f"hung: still running {args.timeout * 1.5 + 30:.0f} s after it started (pytest-timeout did not fire), killed"
        else:
            why = f"interpreter died (exit {proc.returncode})"
        for nodeid in dead:
            crashes += 1
            results[nodeid] = {"nodeid": nodeid, "outcome": "crashed", "duration": 0, "reruns": 0,
                               "message": f"{why}: {log_tail(log_path, start)}"}
        if finished or not collected:
            break
        if not dead or timed_out or attempt >= args.max_attempts or time.monotonic() > deadline - 10:
            break
        log(f"{mode}: {why} in {', '.join(dead)}; resuming without the {len(results)} tests run so far")
        with open(skip_path, "w") as f:
            f.write("".join(n + "\n" for n in results))
    if os.path.exists(skip_path):
        os.remove(skip_path)
    # Tests never reported: deselected by the notes, or not run (crash loop / deadline).
    for nodeid in collected:
        if nodeid in results:
            continue
        reason = next((r for tid, r in deselect if nodeid.startswith(tid)), None)
        if reason is not None:
            results[nodeid] = {"nodeid": nodeid, "outcome": "deselected", "message": f"notes: {reason}",
                               "duration": 0, "reruns": 0}
        elif not (libcheck and libcheck["problems"]):
            results[nodeid] = {"nodeid": nodeid, "outcome": "not run", "duration": 0, "reruns": 0,
                               "message": "not run: the mode's run ended early (crash or deadline)"}
    # 'flaky' rows: a pass is a plain pass, a failure is reported as a known flaky failure.
    for nodeid, r in results.items():
        if any(action == "flaky" and nodeid.startswith(tid) for tid, action, _ in notes):
            if r["outcome"] == "xpassed":
                r["outcome"], r["message"] = "passed", ""
            elif r["outcome"] == "xfailed":
                r["outcome"] = "flaky"
    # A test the notes expect to fail that skipped itself (pyzmq checks the feature first):
    # show the notes' reason next to pytest's.
    for nodeid, r in results.items():
        if r["outcome"] == "skipped":
            reason = next((why for tid, _, why in notes if nodeid.startswith(tid)), None)
            if reason:
                r["message"] = f"{r['message']} (notes: {reason})"
    facts = {
        "mode": mode,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "libcheck": libcheck["summary"] if libcheck else "library check did not run (pytest did not start)",
        "libcheck_problems": (libcheck or {}).get("problems", ["pytest did not start" if not collected else ""]),
        "attempts": attempt,
        "crashes": crashes,
        "log": os.path.relpath(log_path, ROOT),
    }
    facts["libcheck_problems"] = [p for p in facts["libcheck_problems"] if p]
    return results, facts


def count(results):
    c = {"passed": 0, "failed": 0, "skipped": 0}
    for r in results.values():
        c[classify(r["outcome"])] += 1
    return c


def launcher(args, mode):
    """Command prefix of the mode's Python processes (`rzmq run --` in wheel-run)."""
    return [args.rzmq, "run", "--"] if mode == "wheel-run" else []


def mode_env(args, mode):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "RZMQ_ACTIVATE")}
    if mode in ("wheel-run", "wheel-activate"):
        # args.lib is the rzmq wheel's installed rzmq/_lib/libzmq.so.5
        if mode == "wheel-activate":
            env["RZMQ_ACTIVATE"] = "1"
        env["RZMQ_COMPAT_EXPECT"] = "rzmq"
        env["RZMQ_COMPAT_LIB"] = args.lib
        return env, args.wheel_python
    if mode == "preload":
        env["LD_PRELOAD"] = args.lib
        env["RZMQ_COMPAT_EXPECT"] = "rzmq"
        env["RZMQ_COMPAT_LIB"] = args.lib
        return env, args.wheel_python
    if mode == "source":
        env["LD_LIBRARY_PATH"] = os.path.join(args.prefix, "lib")
        env["RZMQ_COMPAT_EXPECT"] = "rzmq"
        env["RZMQ_COMPAT_LIB"] = os.path.join(args.prefix, "lib", "libzmq.so.5")
        return env, args.source_python
    env["RZMQ_COMPAT_EXPECT"] = "stock"
    return env, args.wheel_python


def preload_check(args, mode, env, python):
    out = os.path.join(args.build, f"pyzmq-{mode}-libcheck.json")
    cmd = [*launcher(args, mode), python, os.path.join(COMPAT, "pyzmq_preload_check.py"), "--expect", env["RZMQ_COMPAT_EXPECT"],
           "--json", out]
    if env.get("RZMQ_COMPAT_LIB"):
        cmd += ["--lib", env["RZMQ_COMPAT_LIB"]]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    text = (proc.stdout + proc.stderr).strip()
    for line in text.splitlines():
        log(f"{mode}: {line}")
    return proc.returncode == 0, text


def run_traffic(args, env):
    out = os.path.join(args.build, "pyzmq-traffic.json")
    if os.path.exists(out):
        os.remove(out)
    cmd = [args.wheel_python, os.path.join(COMPAT, "pyzmq_vllm_traffic.py"), "--ours", args.lib, "--json", out]
    base = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    log("traffic: " + " ".join(cmd))
    with open(os.path.join(args.build, "pyzmq-traffic.log"), "w") as logf:
        try:
            proc = subprocess.run(cmd, env=base, stdout=logf, stderr=subprocess.STDOUT, timeout=600)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = -1
    runs = []
    if os.path.exists(out):
        with open(out) as f:
            runs = json.load(f)["runs"]
    if not runs:
        runs = [{"name": "traffic check", "ok": False, "detail": f"no result (exit {rc}); see compat/build/pyzmq-traffic.log"}]
    for r in runs:
        log(f"traffic: {'ok  ' if r['ok'] else 'FAIL'} {r['name']}: {r['detail']}")
    return runs


def md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def write_report(args, notes_rows):
    summaries = {}
    for mode in MODES:
        p = os.path.join(args.build, f"pyzmq-{mode}-summary.json")
        if os.path.exists(p):
            with open(p) as f:
                summaries[mode] = json.load(f)
    lines = [BEGIN, "## pyzmq", ""]
    lines.append(
        f"Generated by `compat/run-pyzmq-tests.sh` (do not edit by hand): pyzmq {args.pyzmq_version}'s own "
        f"test suite (`tests/` of its sdist) under pytest, per-test timeout {args.timeout} s, one process, "
        "plus the vLLM-style traffic check `compat/pyzmq_vllm_traffic.py`. Modes:")
    lines.append("")
    for mode in MODES:
        lines.append(f"- **{mode}**: {MODE_TEXT[mode]}.")
    lines += ["", "| mode | run | passed | failed | skipped (of which notes) | which libzmq served pyzmq |",
              "| --- | --- | --- | --- | --- | --- |"]
    for mode in MODES:
        s = summaries.get(mode)
        if not s:
            lines.append(f"| {mode} | not run | | | | |")
            continue
        c = count(s["results"])
        noted = sum(1 for r in s["results"].values()
                    if r["outcome"] in ("xfailed", "deselected", "flaky") or "(notes: " in r.get("message", ""))
        extra = "" if not s.get("setup_error") else f" (setup failed: {md_escape(s['setup_error'])})"
        check = md_escape(s["facts"]["libcheck"]) + (
            "; **problems: " + md_escape("; ".join(s["facts"]["libcheck_problems"])) + "**"
            if s["facts"]["libcheck_problems"] else "")
        lines.append(f"| {mode} | {s['facts']['date']}{extra} | {c['passed']} | {c['failed']} | "
                     f"{c['skipped']} ({noted}) | {check} |")
    pre = summaries.get("preload", {})
    if pre.get("preload_proof"):
        lines += ["", "How the preload takeover is proved (preload mode, `compat/pyzmq_preload_check.py`):", "",
                  "```", *pre["preload_proof"].splitlines(), "```"]
    if pre.get("traffic"):
        lines += ["", "### vLLM-style traffic between stock libzmq and rzmq", "",
                  "vLLM's make_zmq_socket options (HWM 0, SNDBUF/RCVBUF 0.5 GiB, ROUTER_HANDOVER). "
                  "Frontend: asyncio ROUTER (input, bind tcp://127.0.0.1:0, LAST_ENDPOINT) + PULL (output, bind, drained by a Poller thread "
                  "stopped through an inproc PAIR) + XPUB (coordinator, waits for the b'\\x01' "
                  "subscription), monitor on the ROUTER. Engine: DEALER with identity "
                  "`rank.to_bytes(2, 'little')` sending b'' first, PUSH with LINGER 4000, XSUB behind a "
                  "`zmq.proxy` thread. msgpack main frame + tensor frames 256 B .. 24 MiB sent "
                  "`copy=False, track=True`, buffers reused only after the MessageTracker is done, "
                  "every frame checked by BLAKE2b.", "",
                  "| run | result | detail |", "| --- | --- | --- |"]
        for r in pre["traffic"]:
            lines.append(f"| {md_escape(r['name'])} | {'pass' if r['ok'] else '**FAIL**'} | {md_escape(r['detail'])} |")
    lines += ["", "### Notes (`compat/pyzmq-test-notes.tsv`)", ""]
    if notes_rows:
        lines += ["| test | modes | action | reason |", "| --- | --- | --- | --- |"]
        for tid, modes, action, reason in notes_rows:
            lines.append(f"| `{tid}` | {modes} | {action} | {md_escape(reason)} |")
    else:
        lines.append("(none)")
    lines += ["", "### Failures", ""]
    any_fail = False
    for mode in MODES:
        s = summaries.get(mode)
        if not s:
            continue
        for nodeid, r in sorted(s["results"].items()):
            if classify(r["outcome"]) == "failed":
                any_fail = True
                lines.append(f"- {mode}: `{nodeid}` ({r['outcome']}): {md_escape(r['message'])}")
            elif r["outcome"] == "flaky":
                lines.append(f"- {mode}: `{nodeid}` failed; the notes list it as flaky: {md_escape(r['message'])}")
            elif r["outcome"] == "xpassed":
                lines.append(f"- {mode}: `{nodeid}` passed although the notes expect a failure: "
                             f"{md_escape(r['message'])}")
    if not any_fail:
        lines.append("(none)")
    nodeids = sorted({n for s in summaries.values() for n in s["results"]})
    lines += ["", "### Per test", "",
              "Results: pass, FAIL, ERROR (setup/teardown), CRASH, skip, xfail (notes), flaky failure (notes), deselected (notes), "
              "not run; `(rerun N)` = passed after N reruns of a test pyzmq marks flaky.", "",
              "<details><summary>" + f"{len(nodeids)} tests" + "</summary>", "",
              "| test | " + " | ".join(MODES) + " |", "| --- |" + " --- |" * len(MODES)]
    short = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "crashed": "CRASH", "skipped": "skip",
             "xfailed": "xfail", "xpassed": "XPASS", "xpassed-strict": "XPASS(strict)",
             "deselected": "deselected", "not run": "not run", "flaky": "flaky failure"}
    for nodeid in nodeids:
        cells = []
        for mode in MODES:
            r = summaries.get(mode, {}).get("results", {}).get(nodeid)
            if r is None:
                cells.append("")
                continue
            cell = short.get(r["outcome"], r["outcome"])
            if r.get("reruns"):
                cell += f" (rerun {r['reruns']})"
            message = r.get("message", "")
            if r["outcome"] in ("deselected", "xfailed", "xpassed", "flaky") or "(notes: " in message:
                # the reason is in the notes table above
                message = message.split(" (notes: ")[0] if r["outcome"] == "skipped" else ""
                cell += " (notes)"
            if r["outcome"] != "passed" and message:
                cell += ": " + md_escape(message)[:160]
            cells.append(cell)
        lines.append(f"| `{nodeid}` | " + " | ".join(cells) + " |")
    lines += ["", "</details>", END]
    section = ("\n".join(lines) + "\n").replace(ROOT + "/", "")  # paths relative to the repository

    path = args.compat_md
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + section.rstrip("\n") + tail
    else:
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text else "") + section
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    log(f"wrote the pyzmq section of {os.path.relpath(path, ROOT)}")


def notes_table(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line.strip() and not line.startswith("#"):
                    parts = line.split("\t")
                    rows.append((parts[0], parts[1], parts[2], "\t".join(parts[3:])))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="reference,preload,source")
    ap.add_argument("--build", required=True)
    ap.add_argument("--tests", required=True, help="folder with pytest.ini and tests/ from the sdist")
    ap.add_argument("--wheel-python", required=True)
    ap.add_argument("--source-python")
    ap.add_argument("--lib", help="absolute path of target/release/libzmq.so")
    ap.add_argument("--prefix", help="scripts/install.sh PREFIX")
    ap.add_argument("--notes", default=os.path.join(COMPAT, "pyzmq-test-notes.tsv"))
    ap.add_argument("--compat-md", default=os.path.join(ROOT, "docs", "COMPAT.md"))
    ap.add_argument("--pyzmq-version", required=True)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--mode-deadline", type=int, default=420, help="seconds for one mode's test run")
    ap.add_argument("--max-attempts", type=int, default=12)
    ap.add_argument("--no-traffic", action="store_true")
    ap.add_argument("--report-only", action="store_true", help="rewrite docs/COMPAT.md from the last results")
    ap.add_argument("--no-report", action="store_true", help="leave docs/COMPAT.md alone (scripts/test-wheel.sh)")
    ap.add_argument("--rzmq", help="the rzmq console script (mode wheel-run)")
    ap.add_argument("--setup-failed", action="append", default=[], metavar="MODE=REASON",
                    help="a mode whose environment could not be prepared (reported as failed)")
    args = ap.parse_args()
    for name in ("build", "tests", "wheel_python", "source_python", "lib", "prefix", "notes", "compat_md", "rzmq"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))  # pytest runs in --tests

    modes = [m for m in args.modes.split(",") if m] if not args.report_only else []
    setup_failed = dict(s.split("=", 1) for s in args.setup_failed)
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for mode in modes:
        t0 = time.monotonic()
        summary = {"mode": mode, "results": {}, "facts": {}}
        if mode in setup_failed:
            log(f"{mode}: not run: {setup_failed[mode]}")
            summary["setup_error"] = setup_failed[mode]
            summary["facts"] = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                "libcheck": "not run", "libcheck_problems": [setup_failed[mode]]}
            summary["results"]["(setup)"] = {"outcome": "error", "message": setup_failed[mode], "reruns": 0}
        else:
            env, python = mode_env(args, mode)
            ok, proof = preload_check(args, mode, env, python)
            notes = read_notes(args.notes, NOTES_MODE.get(mode, mode))
            results, facts = run_mode(args, mode, env, python, notes)
            if not ok:
                facts["libcheck_problems"].append("pyzmq_preload_check.py failed")
                results["(library check)"] = {"outcome": "failed", "reruns": 0,
                                              "message": proof.splitlines()[-2] if proof else "no output"}
            summary.update(results=results, facts=facts)
            if mode != "preload":
                summary["proof"] = proof
            if mode == "preload":
                summary["preload_proof"] = proof
                if not args.no_traffic:
                    summary["traffic"] = run_traffic(args, env)
        with open(os.path.join(args.build, f"pyzmq-{mode}-summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        c = count(summary["results"])
        for r in summary.get("traffic", []):
            c["passed" if r["ok"] else "failed"] += 1
        for k in totals:
            totals[k] += c[k]
        log(f"{mode}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped "
            f"({time.monotonic() - t0:.0f} s)")
        for nodeid, r in sorted(summary["results"].items()):
            if classify(r["outcome"]) == "failed" or r["outcome"] == "flaky":
                log(f"  {mode} {r['outcome'].upper()} {nodeid}: {r['message'][:200]}")
    if not args.no_report:
        write_report(args, notes_table(args.notes))
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped", flush=True)
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

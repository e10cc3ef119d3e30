"""pytest plugin for running pyzmq's own test suite against rzmq (loaded with -p).

Environment (set by compat/pyzmq_compat.py):
  RZMQ_COMPAT_MODE      reference | preload | source
  RZMQ_COMPAT_EXPECT    rzmq | stock: the library that must serve pyzmq (session aborts if not)
  RZMQ_COMPAT_LIB       our library's path (for the check above)
  RZMQ_COMPAT_NOTES     compat/pyzmq-test-notes.tsv: 'xfail' and 'flaky' rows for this mode
                        become non-strict xfail markers with the reason (rows 'deselect' are
                        turned into --deselect by the runner)
  RZMQ_COMPAT_SKIPFILE  node ids already run in an earlier attempt (after a crash): deselected
  RZMQ_COMPAT_RESULTS   JSON lines written as the run goes: collected ids, start/done per test
                        (outcome, first error line, duration, reruns), the library check, finish
"""

import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyzmq_libcheck  # noqa: E402

_out = None
_reports = {}


def _emit(obj):
    if _out is not None:
        _out.write(json.dumps(obj) + "\n")
        _out.flush()


def read_notes(path, mode):
    """[(test id, action, reason)] of the notes rows that apply to `mode` (or to any mode of a
    comma list: the wheel modes of scripts/test-wheel.sh take the rows of 'preload,wheel')."""
    wanted = set(mode.split(","))
    rows = []
    if not path or not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) < 4:
                raise ValueError(f"{path}: expected 4 tab-separated columns: {line!r}")
            test_id, modes, action, reason = parts[0], parts[1], parts[2], "\t".join(parts[3:])
            if modes == "all" or wanted & set(modes.split(",")):
                rows.append((test_id, action, reason))
    return rows


def pytest_configure(config):
    global _out
    path = os.environ.get("RZMQ_COMPAT_RESULTS")
    if path:
        _out = open(path, "a")


def pytest_report_header(config):
    try:
        info = pyzmq_libcheck.identify(os.environ.get("RZMQ_COMPAT_LIB"))
    except Exception as e:  # noqa: BLE001
        return [f"rzmq compat: library check failed: {e!r}"]
    return ["rzmq compat: " + pyzmq_libcheck.summary(info)]


def pytest_sessionstart(session):
    info = pyzmq_libcheck.identify(os.environ.get("RZMQ_COMPAT_LIB"))
    problems = pyzmq_libcheck.check(info, os.environ.get("RZMQ_COMPAT_EXPECT"))
    _emit({"event": "libcheck", "summary": pyzmq_libcheck.summary(info), "problems": problems})
    if problems:
        pytest.exit("rzmq compat: wrong libzmq serves pyzmq: " + "; ".join(problems), returncode=3)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    _emit({"event": "collected", "nodeids": [item.nodeid for item in items]})
    mode = os.environ.get("RZMQ_COMPAT_MODE", "")
    for test_id, action, reason in read_notes(os.environ.get("RZMQ_COMPAT_NOTES"), mode):
        if action not in ("xfail", "flaky"):
            continue
        for item in items:
            if item.nodeid.startswith(test_id):
                item.add_marker(pytest.mark.xfail(reason=f"notes: {reason}", strict=False))
    skipfile = os.environ.get("RZMQ_COMPAT_SKIPFILE")
    if skipfile and os.path.exists(skipfile):
        with open(skipfile) as f:
            skip = {line.rstrip("\n") for line in f if line.strip()}
        keep = [item for item in items if item.nodeid not in skip]
        gone = [item for item in items if item.nodeid in skip]
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    _reports[nodeid] = []
    _emit({"event": "start", "nodeid": nodeid, "t": time.time()})


def pytest_runtest_logreport(report):
    _reports.setdefault(report.nodeid, []).append(report)


def _first_error_line(report):
    text = getattr(report, "longreprtext", "") or ""
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return _first_error_line(report)


def pytest_runtest_logfinish(nodeid, location):
    reports = _reports.pop(nodeid, [])
    reruns = sum(1 for r in reports if r.outcome == "rerun")
    final = [r for r in reports if r.outcome != "rerun"]
    outcome, message, duration = "passed", "", sum(r.duration for r in final)
    for r in final:
        if r.failed:
            if r.when == "call":
                outcome = "xpassed-strict" if hasattr(r, "wasxfail") else "failed"
            else:
                outcome = "error"
            message = f"{r.when}: {_first_error_line(r)}" if r.when != "call" else _first_error_line(r)
            break
        if r.skipped:
            if hasattr(r, "wasxfail"):
                outcome, message = "xfailed", f"{_first_error_line(r)} [{r.wasxfail}]"
            else:
                outcome, message = "skipped", _skip_reason(r)
            break
        if r.when == "call" and hasattr(r, "wasxfail"):
            outcome, message = "xpassed", r.wasxfail
    _emit({
        "event": "done", "nodeid": nodeid, "outcome": outcome, "message": message[:400],
        "duration": round(duration, 3), "reruns": reruns,
    })


def pytest_collectreport(report):
    """A module skipped at collection (e.g. importorskip) has no test items: report it as one."""
    if report.skipped:
        _emit({"event": "start", "nodeid": report.nodeid, "t": time.time()})
        _emit({"event": "done", "nodeid": report.nodeid, "outcome": "skipped",
               "message": "collection: " + _skip_reason(report), "duration": 0, "reruns": 0})
    elif report.failed:
        _emit({"event": "start", "nodeid": report.nodeid, "t": time.time()})
        _emit({"event": "done", "nodeid": report.nodeid, "outcome": "error",
               "message": "collection: " + _first_error_line(report), "duration": 0, "reruns": 0})


def pytest_sessionfinish(session, exitstatus):
    _emit({"event": "finish", "exitstatus": int(exitstatus)})

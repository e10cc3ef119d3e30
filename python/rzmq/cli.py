"""The `rzmq` command: `rzmq run -- CMD...` and `rzmq doctor` (also `python -m rzmq`)."""

import argparse
import ctypes
import json
import multiprocessing
import os
import re
import subprocess
import sys

from . import __version__, _activate, _libcheck

USAGE = """rzmq run [--preload] [--] COMMAND [ARG...]
       rzmq doctor [--json] [--no-self-test] [--timeout S]"""

# rzmq's settings with their defaults, in report order: RZMQ_ACTIVATE (Python only), then the rows of
# docs/SETTINGS.md's table in its order (python/tests/test_settings.py keeps the two equal).
PYTHON_ONLY_SETTINGS = [("RZMQ_ACTIVATE", "off: pyzmq keeps its own libzmq")]
SETTINGS = PYTHON_ONLY_SETTINGS + [
    ("RZMQ_DIRECT", "on"),
    ("RZMQ_DIRECT_RX", "on"),
    ("RZMQ_SPIN_US", "30"),
    ("RZMQ_FRAMED", "on"),
    ("RZMQ_FRAMED_NAP_US", "20"),
    ("RZMQ_FRAMED_NAP_EMPTY", "on"),
    ("RZMQ_RDMA_CURVE_PLAINTEXT", "off"),
    ("RZMQ_HUGE_PAGES", "on"),
    ("RZMQ_TCP_LOCAL_CC", "reno on same-host connections"),
    ("RZMQ_RDMA", "auto"),
    ("RZMQ_RDMA_PROVIDER", "auto: ibverbs when libibverbs lists a device, else no RDMA"),
    ("RZMQ_RDMA_DEVICE", "the first ibverbs device"),
    ("RZMQ_RDMA_PORT", "1"),
    ("RZMQ_RDMA_GID_INDEX", "the first RoCE v2 GID"),
    ("RZMQ_RDMA_LOG", "off"),
    ("RZMQ_RDMA_EVENTS", "off"),
    ("RZMQ_RDMA_RNDV_THRESHOLD", "65536"),
    ("RZMQ_RDMA_MR_CACHE", "on for soft and loopback, off for ibverbs"),
    ("RZMQ_RDMA_MW", "on"),
    ("RZMQ_SOFT_LISTEN", "one soft device per local address of the tcp connections"),
    ("RZMQ_SOFT_ADVERTISE", "the listener's address"),
    ("RZMQ_SOFT_CMA", "on"),
    ("RZMQ_RDMA_EXPECT_DEVICE", "off (tests only)"),
]

SELF_TEST = r"""
import json, os, sys
import zmq, rzmq
wait_ms = int(sys.argv[1])
ctx = zmq.Context()
rep = ctx.socket(zmq.REP)
req = ctx.socket(zmq.REQ)
for s in (rep, req):
    s.setsockopt(zmq.RCVTIMEO, wait_ms)
    s.setsockopt(zmq.SNDTIMEO, wait_ms)
    s.setsockopt(zmq.LINGER, 0)
rep.bind("tcp://127.0.0.1:*")
endpoint = rep.last_endpoint.decode()
req.connect(endpoint)
payload = os.urandom(1 << 20)
for _ in range(3):
    req.send(payload)
    assert rep.recv() == payload, "request corrupted"
    rep.send(payload[::-1])
    assert req.recv() == payload[::-1], "reply corrupted"
served = rzmq.served_by()
ours = rzmq._libcheck.socket_is_ours(rzmq.library_path(), req.underlying, zmq.REQ)
req.close(); rep.close(); ctx.term()
print(json.dumps({"endpoint": endpoint, "served": served["kind"], "file": served["file"], "socket_is_ours": ours}))
"""


def _run(argv):
    preload = False
    while argv and argv[0].startswith("-"):
        opt, argv = argv[0], argv[1:]
        if opt == "--":
            break
        if opt == "--preload":
            preload = True
        elif opt in ("-h", "--help"):
            print("usage: rzmq run [--preload] [--] COMMAND [ARG...]\n\n"
                  "Runs COMMAND with RZMQ_ACTIVATE=1: every Python process of an environment where rzmq\n"
                  "is installed (children included) loads rzmq before pyzmq. --preload also puts rzmq's\n"
                  "libzmq.so.5 in LD_PRELOAD, for programs that are not Python or not of this environment.")
            return 0
        else:
            sys.stderr.write(f"rzmq run: unknown option {opt!r}\n")
            return 2
    command = argv
    if not command:
        sys.stderr.write("rzmq run: no command given (rzmq run -- COMMAND [ARG...])\n")
        return 2
    env = dict(os.environ)
    env[_activate.ACTIVATE_ENV] = "1"
    if preload:
        lib = _activate.library_path()
        env["LD_PRELOAD"] = lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        sys.stderr.write(f"rzmq run: cannot run {command[0]!r}: {e.strerror}\n")
        return 127


def _process_report(queue=None):
    """Which libzmq serves pyzmq in this process, plus a socket check (run here and in the child)."""
    report = {"pid": os.getpid(), "activated": _activate._handle is not None}
    try:
        import zmq
    except ImportError as e:
        report["error"] = f"import zmq failed: {e}"
    else:
        info = _activate.served_by()
        report.update(kind=info["kind"], file=info["file"], scope=info["scope"],
                      pyzmq=zmq.pyzmq_version(), zmq_version=zmq.zmq_version())
        try:
            ctx = zmq.Context()
            sock = ctx.socket(zmq.PAIR)
            report["socket_is_ours"] = _libcheck.socket_is_ours(_activate.library_path(), sock.underlying, zmq.PAIR)
            sock.close(0)
            ctx.term()
        except Exception as e:  # noqa: BLE001
            report["socket_error"] = repr(e)
    if queue is not None:
        queue.put(report)
    return report


def _spawned_report(timeout):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_process_report, args=(queue,))
    proc.start()
    try:
        return queue.get(timeout=timeout)
    except Exception as e:  # noqa: BLE001
        return {"error": f"the spawned child reported nothing ({e!r}; exit code {proc.exitcode})"}
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()


def _rdma_report():
    out = {"sysfs": [], "libibverbs": None, "ibverbs_devices": []}
    base = "/sys/class/infiniband"
    if os.path.isdir(base):
        for name in sorted(os.listdir(base)):
            ports = []
            for port in sorted(os.listdir(os.path.join(base, name, "ports")) if os.path.isdir(os.path.join(base, name, "ports")) else []):
                state = _read(os.path.join(base, name, "ports", port, "state"))
                link = _read(os.path.join(base, name, "ports", port, "link_layer"))
                ports.append(f"port {port} {state or '?'} {link or ''}".strip())
            out["sysfs"].append(f"{name} ({', '.join(ports) or 'no ports'})")
    try:
        verbs = ctypes.CDLL("libibverbs.so.1")
    except OSError as e:
        out["libibverbs"] = f"not loadable ({e})"
        return out
    out["libibverbs"] = "loaded"
    verbs.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    verbs.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
    verbs.ibv_get_device_name.argtypes = [ctypes.c_void_p]
    verbs.ibv_get_device_name.restype = ctypes.c_char_p
    verbs.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    count = ctypes.c_int(0)
    devices = verbs.ibv_get_device_list(ctypes.byref(count))
    if devices:
        out["ibverbs_devices"] = [verbs.ibv_get_device_name(devices[i]).decode() for i in range(count.value)]
        verbs.ibv_free_device_list(devices)
    return out


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _settings():
    known = dict(SETTINGS)
    rows = [(name, os.environ.get(name), default) for name, default in SETTINGS]
    rows += [(name, value, None) for name, value in sorted(os.environ.items())
             if name.startswith("RZMQ_") and name not in known]
    return rows


def _self_test(timeout):
    env = dict(os.environ)
    env[_activate.ACTIVATE_ENV] = "1"
    env["RZMQ_RDMA_LOG"] = "1"
    provider_note = "as set"
    if "RZMQ_RDMA_PROVIDER" not in env:
        env["RZMQ_RDMA_PROVIDER"] = "soft"
        provider_note = "soft, set by doctor (RZMQ_RDMA_PROVIDER was unset)"
    result = {"provider": f"{env['RZMQ_RDMA_PROVIDER']} ({provider_note})", "ok": False}
    try:
        proc = subprocess.run([sys.executable, "-c", SELF_TEST, str(int(timeout * 500))], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        result["error"] = f"no answer within {timeout} s"
        return result
    lines = [line for line in proc.stderr.splitlines() if re.match(r"rzmq\[\d+\]: ", line)]
    result["log"] = lines
    transports = []  # distinct lines, in order (a refused connection is retried and logged again)
    for line in lines:
        text = re.sub(r"^rzmq\[\d+\]: ", "", line)
        if ("transport" in text or "refused" in text) and text not in transports:
            transports.append(text)
    result["transport"] = transports
    if proc.returncode != 0:
        tail = [line.strip() for line in proc.stderr.splitlines() if line.strip()][-1:]
        result["error"] = f"the self-test exited with {proc.returncode}: {' '.join(tail)}"
        return result
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(data)
    if data["served"] != "rzmq" or not data["socket_is_ours"]:
        result["error"] = f"pyzmq was served by {data['served']} ({data['file']}) in the self-test, not by rzmq"
        return result
    result["ok"] = True
    return result


def _transport_kind(lines):
    """'RDMA (rdma/soft soft0)', 'tcp (why)', 'refused (...)' from the RZMQ_RDMA_LOG lines."""
    for line in lines:
        if "refused" in line:
            return "refused: " + line.split("refused", 1)[1].lstrip(": ")
    for line in lines:
        m = re.search(r"transport (rdma\S*.*)$", line)
        if m:
            return f"RDMA ({m.group(1)})"
    for line in lines:
        m = re.search(r"transport tcp(.*)$", line)
        if m:
            return "tcp" + m.group(1)
    return "tcp (no upgrade was attempted: no RZMQ_RDMA_LOG transport line)"


def _describe_process(report):
    if "error" in report:
        return report["error"]
    text = (f"pyzmq {report['pyzmq']}, zmq_version {report['zmq_version']}; served by {report['kind']} "
            f"({report['file']}, {report['scope']})")
    if "socket_is_ours" in report:
        text += "; a pyzmq socket is " + ("rzmq's" if report["socket_is_ours"] else "not rzmq's")
    return text + f" [pid {report['pid']}]"


def _doctor(argv):
    ap = argparse.ArgumentParser(prog="rzmq doctor", description="Report which libzmq serves pyzmq and test rzmq.")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--no-self-test", action="store_true", help="skip the loopback self-test")
    ap.add_argument("--timeout", type=float, default=60, help="seconds for the child and the self-test")
    args = ap.parse_args(argv)

    problems = []
    report = {"rzmq": __version__}
    try:
        lib = _activate.library_path()
        report["library"] = lib
        report["library_zmq_version"] = _libcheck.library_version(lib)
    except (FileNotFoundError, OSError) as e:
        report["library_error"] = str(e)
        problems.append(str(e))
    raw = os.environ.get(_activate.ACTIVATE_ENV)
    flag = _activate.env_flag(raw)
    report["activation"] = {"RZMQ_ACTIVATE": raw, "on": flag, "loaded": _activate._handle is not None}
    report["here"] = _process_report()
    report["spawned_child"] = _spawned_report(args.timeout)
    for where in ("here", "spawned_child"):
        r = report[where]
        if "error" in r:
            problems.append(f"{where}: {r['error']}")
        elif flag and (r.get("kind") != "rzmq" or not r.get("socket_is_ours")):
            problems.append(f"{where}: RZMQ_ACTIVATE is on but pyzmq is served by {r.get('kind')} ({r.get('file')})")
    report["rdma"] = _rdma_report()
    report["settings"] = {name: value for name, value, _ in _settings() if value is not None}
    if not args.no_self_test:
        st = _self_test(args.timeout)
        st["transport_kind"] = _transport_kind(st.get("transport", []))
        report["self_test"] = st
        if not st["ok"]:
            problems.append(f"self-test: {st.get('error')}")
    report["problems"] = problems

    if args.json:
        print(json.dumps(report, indent=1))
        return 1 if problems else 0
    p = print
    p(f"rzmq {__version__}")
    p(f"  library: {report.get('library') or report.get('library_error')}"
      + (f" (zmq_version {report['library_zmq_version']})" if "library_zmq_version" in report else ""))
    state = {True: "on", False: "off", None: "not understood (rzmq stays off)"}[flag]
    p(f"activation: RZMQ_ACTIVATE={raw if raw is not None else '(unset)'}: {state}; "
      f"rzmq loaded in this process: {'yes' if report['activation']['loaded'] else 'no'}")
    if not flag:
        p("  (pyzmq keeps its own libzmq; turn rzmq on with `rzmq run -- CMD` or RZMQ_ACTIVATE=1)")
    p(f"pyzmq in this process: {_describe_process(report['here'])}")
    p(f"pyzmq in a spawned child: {_describe_process(report['spawned_child'])}")
    rdma = report["rdma"]
    p("RDMA:")
    p(f"  /sys/class/infiniband: {', '.join(rdma['sysfs']) or 'no devices (no RDMA NIC, or its driver is not loaded)'}")
    p(f"  libibverbs.so.1: {rdma['libibverbs']}"
      + (f"; devices: {', '.join(rdma['ibverbs_devices']) or 'none'}" if rdma["libibverbs"] == "loaded" else ""))
    if rdma["ibverbs_devices"]:
        p("  RZMQ_RDMA_PROVIDER=auto picks ibverbs")
    else:
        p("  RZMQ_RDMA_PROVIDER=auto finds no ibverbs device: rzmq peers stay on tcp "
          "(RZMQ_RDMA_PROVIDER=soft runs RDMA on the software provider)")
    p("settings (RZMQ_*; docs/SETTINGS.md):")
    defaults = []
    for name, value, default in _settings():
        if value is not None:
            p(f"  {name}={value}" + ("" if default is not None else "  (not a documented setting)"))
        else:
            defaults.append(f"{name} ({default})")
    p("  unset, so at their defaults: " + "; ".join(defaults))
    if "self_test" in report:
        st = report["self_test"]
        p(f"self-test: REQ/REP, 3 round trips of 1 MiB over tcp://127.0.0.1, provider {st['provider']}:")
        if st["ok"]:
            p(f"  ok on {st['endpoint']}; transport: {st['transport_kind']}")
        else:
            p(f"  FAILED: {st.get('error')}")
        for line in st.get("transport", []):
            p(f"  log: {line}")
    if problems:
        p("problems:")
        for problem in problems:
            p(f"  - {problem}")
    else:
        p("doctor: OK")
    return 1 if problems else 0


def main(argv=None):
    """Entry point of the `rzmq` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {USAGE}\n\n  run     run a command with rzmq serving its pyzmq (children included)\n"
              "  doctor  which libzmq serves pyzmq, RDMA devices, settings, loopback self-test")
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(f"rzmq {__version__}")
        return 0
    if argv[0] == "run":
        return _run(argv[1:])
    if argv[0] == "doctor":
        return _doctor(argv[1:])
    sys.stderr.write(f"rzmq: unknown command {argv[0]!r}\nusage: {USAGE}\n")
    return 2

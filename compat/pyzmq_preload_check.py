#!/usr/bin/env python3
"""Prove which libzmq serves pyzmq in this environment (run with the mode's environment).

usage: pyzmq_preload_check.py --expect rzmq|stock [--lib PATH] [--json OUT]

1. In this process: pyzmq_libcheck.identify() (dlsym/dladdr resolution, /proc/self/maps, direct
   zmq_has("curve")/zmq_version() calls into every mapped libzmq vs pyzmq's zmq.has("curve")).
2. In a child process with the same environment plus LD_DEBUG=bindings: a PAIR round trip over
   inproc and tcp; the dynamic linker logs every binding of the pyzmq backend's zmq_* references
   to the file that satisfies it. All of them must go to the expected library.
Exits 1 when either says another library serves the calls.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyzmq_libcheck  # noqa: E402

ROUND_TRIP = """
import zmq
ctx = zmq.Context()
for ep in ("inproc://preload-check", "tcp://127.0.0.1:*"):
    a = ctx.socket(zmq.PAIR); b = ctx.socket(zmq.PAIR)
    a.bind(ep); b.connect(a.last_endpoint.decode())
    b.send(b"ping", copy=False); assert a.recv() == b"ping"
    zmq.Poller().register(a, zmq.POLLIN)
    a.close(0); b.close(0)
ctx.term()
print(zmq.zmq_version(), zmq.has("curve"))
"""

BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `(zmq_\w+)'")


def ld_debug_bindings(backend):
    """{symbol: file} for the backend's zmq_* bindings, as logged by the dynamic linker."""
    with tempfile.TemporaryDirectory(prefix="rzmq-lddebug-") as tmp:
        env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=os.path.join(tmp, "ld"))
        child = subprocess.run(
            [sys.executable, "-c", ROUND_TRIP], env=env, capture_output=True, text=True, timeout=60
        )
        if child.returncode != 0:
            raise RuntimeError(f"round trip failed: {child.stderr.strip()[-500:]}")
        bindings = {}
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), errors="replace") as log:
                for line in log:
                    m = BINDING.search(line)
                    if m and os.path.realpath(m.group(1)) == backend:
                        bindings[m.group(3)] = os.path.realpath(m.group(2))
        return bindings, child.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", choices=["rzmq", "stock"], required=True)
    ap.add_argument("--lib", help="our library (the file that must serve when --expect rzmq)")
    ap.add_argument("--json", help="write the evidence here")
    args = ap.parse_args()

    info = pyzmq_libcheck.identify(args.lib)
    problems = pyzmq_libcheck.check(info, args.expect)
    print(pyzmq_libcheck.summary(info))

    expected_file = info["expected"] if args.expect == "rzmq" else pyzmq_libcheck.bundled_libzmq()
    backend = pyzmq_libcheck.backend_path()
    bindings, child_out = ld_debug_bindings(backend)
    targets = {}
    for sym, path in bindings.items():
        targets.setdefault(path, []).append(sym)
    for path, syms in targets.items():
        print(f"LD_DEBUG=bindings: {len(syms)} zmq_* references of {os.path.basename(backend)} "
              f"bound to {path} (e.g. {', '.join(sorted(syms)[:4])})")
    print(f"round trip in the LD_DEBUG child: zmq_version, has(curve) = {child_out}")
    if not bindings:
        problems.append("LD_DEBUG logged no zmq_* binding of the pyzmq backend")
    elif set(targets) != {expected_file}:
        problems.append(f"LD_DEBUG: backend bound to {sorted(targets)}, expected only {expected_file}")

    info["ld_debug_bindings"] = {p: sorted(s) for p, s in targets.items()}
    info["problems"] = problems
    if args.json:
        with open(args.json, "w") as out:
            json.dump(info, out, indent=1)
    for p in problems:
        print(f"PROBLEM: {p}")
    print("preload check:", "OK" if not problems else "FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

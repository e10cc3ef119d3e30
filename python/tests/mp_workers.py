#!/usr/bin/env python3
"""Workers started with multiprocessing spawn and fork report which libzmq serves their sockets.

usage: mp_workers.py --expect rzmq|stock [--activate-in-code] [--json OUT]

The parent imports zmq (so fork children inherit its loaded state), binds a PULL socket on
tcp://127.0.0.1, and starts one worker per start method. Each worker makes its own context and a
PUSH socket, sends a 256 KiB payload and a report: who serves pyzmq there according to the
dynamic linker's lookup (rzmq.served_by()) and whether rzmq's library recognises the worker's
socket handle as one of its own sockets (rzmq._libcheck.socket_is_ours). Exits 1 unless the parent
and every worker are served by the expected library. --activate-in-code calls rzmq.activate()
before `import zmq` instead of relying on RZMQ_ACTIVATE/`rzmq run`.
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import sys

PAYLOAD = 256 * 1024


def report(zmq, sock):
    import rzmq
    from rzmq import _libcheck

    info = rzmq.served_by()
    return {
        "pid": os.getpid(),
        "kind": info["kind"],
        "file": info["file"],
        "socket_is_ours": _libcheck.socket_is_ours(rzmq.library_path(), sock.underlying, sock.type),
        "is_active": rzmq.is_active(),
        "RZMQ_ACTIVATE": os.environ.get("RZMQ_ACTIVATE"),
        "zmq_version": zmq.zmq_version(),
    }


def worker(method, endpoint):
    import zmq

    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(endpoint)
    payload = os.urandom(PAYLOAD)
    rep = dict(report(zmq, push), method=method, sha=hashlib.sha256(payload).hexdigest())
    push.send_multipart([json.dumps(rep).encode(), payload])
    push.close()
    ctx.term()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", choices=["rzmq", "stock"], required=True)
    ap.add_argument("--activate-in-code", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.activate_in_code:
        import rzmq

        rzmq.activate()
    import zmq

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVTIMEO, 60000)
    pull.bind("tcp://127.0.0.1:*")
    endpoint = pull.last_endpoint.decode()
    reports = [dict(report(zmq, pull), method="parent")]
    procs = []
    for method in ("spawn", "fork"):
        p = multiprocessing.get_context(method).Process(target=worker, args=(method, endpoint))
        p.start()
        procs.append(p)
    problems = []
    for _ in procs:
        try:
            meta, payload = pull.recv_multipart()
        except zmq.Again:
            problems.append("a worker sent nothing within 60 s")
            break
        rep = json.loads(meta)
        if hashlib.sha256(payload).hexdigest() != rep.pop("sha"):
            problems.append(f"{rep['method']} worker: payload corrupted")
        reports.append(rep)
    for p in procs:
        p.join(30)
        if p.exitcode != 0:
            problems.append(f"worker pid {p.pid} exited with {p.exitcode}")
    pull.close()
    ctx.term()
    for rep in reports:
        ok = rep["kind"] == args.expect and rep["socket_is_ours"] == (args.expect == "rzmq")
        print(f"{rep['method']:6} pid {rep['pid']}: served by {rep['kind']} ({rep['file']}); "
              f"socket is rzmq's: {rep['socket_is_ours']}; {'ok' if ok else 'WRONG'}")
        if not ok:
            problems.append(f"{rep['method']}: expected {args.expect}, got {rep['kind']} "
                            f"(socket_is_ours={rep['socket_is_ours']})")
    if {r["method"] for r in reports} != {"parent", "spawn", "fork"}:
        problems.append(f"reports from {sorted(r['method'] for r in reports)} only")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reports": reports, "problems": problems}, f, indent=1)
    for problem in problems:
        print("PROBLEM:", problem)
    print("mp_workers:", "OK" if not problems else "FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

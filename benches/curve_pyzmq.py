#!/usr/bin/env python3
"""PUSH/PULL throughput with CURVE through pyzmq: libzmq (the wheel's own) against rzmq's
libzmq.so (LD_PRELOAD), alternating run by run, medians and ratios from the same run.

    python3 -m venv /tmp/cvenv && /tmp/cvenv/bin/pip install pyzmq==27.3.0
    cargo build --release -p rzmq-capi
    /tmp/cvenv/bin/python benches/curve_pyzmq.py --rounds 5
    # other builds side by side: --impl NAME=PATH/libzmq.so (repeatable)

Each run starts two processes: a PULL socket that binds tcp://127.0.0.1 as the CURVE server and
a PUSH socket that connects as a CURVE client and sends `count` messages of `size` bytes (one
bytes object, pyzmq's default `send`); the receiver times from its first message to its last
(pyzmq's default `recv`) and reports MB/s (10^6 bytes per second) over the messages after the
first. `--plain` drops CURVE (the same runs without security, for reference).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_COUNTS = {1024: 200_000, 1048576: 2_000}


def role_recv(args):
    import zmq

    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.rcvhwm = 1000
    if args.curve:
        s.curve_server = True
        s.curve_secretkey = os.environb[b"CURVE_SERVER_SECRET"]
    port = s.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    s.recv()
    t0 = time.perf_counter()
    for _ in range(args.count - 1):
        s.recv()
    dt = time.perf_counter() - t0
    print(f"{(args.count - 1) * args.size / dt / 1e6:.1f}", flush=True)
    s.close(linger=0)
    ctx.term()


def role_send(args):
    import zmq

    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.sndhwm = 1000
    if args.curve:
        s.curve_serverkey = os.environb[b"CURVE_SERVER_PUBLIC"]
        s.curve_publickey = os.environb[b"CURVE_CLIENT_PUBLIC"]
        s.curve_secretkey = os.environb[b"CURVE_CLIENT_SECRET"]
    s.connect(f"tcp://127.0.0.1:{args.port}")
    buf = b"\x01" * args.size
    for _ in range(args.count):
        s.send(buf)
    s.close(linger=-1)
    ctx.term()


def one_run(impl, size, count, curve, libs, keys, timeout):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if impl != "libzmq":
        env["LD_PRELOAD"] = libs[impl]
        env["RZMQ_RDMA"] = "off"
    env.update(keys)
    me = [sys.executable, os.path.abspath(__file__), "--size", str(size), "--count", str(count)]
    if curve:
        me.append("--curve-role")
    recv = subprocess.Popen(me + ["--role", "recv"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        port = recv.stdout.readline().strip()
        send = subprocess.Popen(me + ["--role", "send", "--port", port], env=env)
        out, _ = recv.communicate(timeout=timeout)
        send.wait(timeout=timeout)
        if recv.returncode != 0 or send.returncode != 0:
            raise RuntimeError(f"{impl}: exit {recv.returncode}/{send.returncode}")
        return float(out.strip().splitlines()[-1])
    finally:
        for p in (recv,):
            if p.poll() is None:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1024,1048576", help="message sizes in bytes, comma-separated")
    ap.add_argument("--count", type=int, help="messages per run (default: 200000 at 1 KiB, 2000 at 1 MiB)")
    ap.add_argument("--impl", action="append", default=[], metavar="NAME=PATH",
                    help="an rzmq build to preload (default: rzmq=target/release/libzmq.so)")
    ap.add_argument("--plain", action="store_true", help="no CURVE")
    ap.add_argument("--timeout", type=float, default=120)
    # internal: one side of one run
    ap.add_argument("--role", choices=["send", "recv"])
    ap.add_argument("--size", type=int)
    ap.add_argument("--port")
    ap.add_argument("--curve-role", dest="curve", action="store_true")
    args = ap.parse_args()
    if args.role == "recv":
        return role_recv(args)
    if args.role == "send":
        return role_send(args)

    import zmq

    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    keys = {
        "CURVE_SERVER_PUBLIC": server_public.decode(),
        "CURVE_SERVER_SECRET": server_secret.decode(),
        "CURVE_CLIENT_PUBLIC": client_public.decode(),
        "CURVE_CLIENT_SECRET": client_secret.decode(),
    }
    libs = dict(i.split("=", 1) for i in args.impl) or {
        "rzmq": os.path.join(ROOT, "target/release/libzmq.so")}
    libs = {name: os.path.abspath(path) for name, path in libs.items()}
    impls = ["libzmq"] + list(libs)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"pyzmq {zmq.__version__} (wheel's libzmq {zmq.zmq_version()}), preloaded: {libs}, "
          f"{'no security' if args.plain else 'CURVE'}, {args.rounds} rounds, order {impls}")
    results = {}
    for size in sizes:
        count = args.count or DEFAULT_COUNTS.get(size, max(1000, 200_000_000 // size))
        for r in range(args.rounds):
            for impl in impls:
                mbs = one_run(impl, size, count, not args.plain, libs, keys, args.timeout)
                results.setdefault((size, impl), []).append(mbs)
                print(f"  {size} B x {count} round {r + 1} {impl}: {mbs:.1f} MB/s", flush=True)
    print()
    print("Cells: median MB/s over the rounds (the runs in order), and its ratio to libzmq's median.")
    print()
    print("| size | " + " | ".join(impls) + " |")
    print("| --- | " + " | ".join("---" for _ in impls) + " |")
    for size in sizes:
        med = {i: statistics.median(results[(size, i)]) for i in impls}
        cells = [
            f"{med[i]:.0f} ({med[i] / med['libzmq']:.2f}x; {', '.join(f'{x:.0f}' for x in results[(size, i)])})"
            for i in impls
        ]
        label = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB" if size >= 1024 else f"{size} B"
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

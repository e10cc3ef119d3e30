"""Put-to-get latency and throughput of vllm-omni connectors, producer and consumer in two processes.

Rows (one run, same machine, same payloads: numpy uint8 arrays, the shape of a tensor payload):
    rzmq-tcp      RzmqConnector, both processes on rzmq (LD_PRELOAD), RZMQ_RDMA=off
    rzmq-rdma     RzmqConnector, RDMA required on the soft provider (RZMQ_RDMA=require)
    libzmq        RzmqConnector on the pyzmq wheel's own libzmq (reference, no rzmq)
    shm           vllm-omni's SharedMemoryConnector (one host only)
    mooncake-tcp  Mooncake's transfer engine over TCP, driven as MooncakeTransferEngineConnector
                  drives it (benches/omni/mooncake_te.py; the connector class itself needs torch)
Latency: from the start of put() in the producer to the return of get() in the consumer (one
payload at a time; the metadata travels over a pipe, as the orchestrator forwards it), p50.
Throughput: payloads put back to back while the consumer gets them; bytes / (last get done -
first put start). The consumer checks the digest of the first and last payload of every size.

usage: python benches/omni/connector_bench.py [--quick] [--rows rzmq-tcp,rzmq-rdma,libzmq,shm,mooncake-tcp]
                                               [--sizes 65536,1048576,...] [--json OUT] [--markdown OUT]
Needs a venv with vllm-omni (python/tests/real/env.sh makes the real one, as the connector tests
use; the figures in docs/BENCHMARKS.md were made with the older light python/build/omni-venv) and
target/release/libzmq.so; run it with that venv's python.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Client, Listener

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LIB = os.environ.get("RZMQ_LIB") or os.path.join(ROOT, "target", "release", "libzmq.so")
SIZES = [64 << 10, 1 << 20, 16 << 20, 64 << 20]
ROWS = ["rzmq-tcp", "rzmq-rdma", "libzmq", "shm", "mooncake-tcp"]
AUTH = b"rzmq-omni-bench"


def iterations(size: int, quick: bool) -> tuple[int, int]:
    """(latency iterations, throughput payloads) for a payload size."""
    lat = {64 << 10: 300, 1 << 20: 200, 16 << 20: 40, 64 << 20: 15}.get(size, 50)
    thr = max(8, min(400, (1 << 30) // size))
    if quick:
        lat, thr = max(10, lat // 3), max(6, thr // 3)
    return lat, thr


def row_env(row: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RZMQ_") and k != "LD_PRELOAD"}
    # SharedMemoryConnector's consumer unlinks segments the producer's resource tracker also knows
    env["PYTHONWARNINGS"] = "ignore::UserWarning:multiprocessing.resource_tracker"
    if row in ("rzmq-tcp", "rzmq-rdma"):
        env["LD_PRELOAD"] = LIB
        env["RZMQ_RDMA"] = "off" if row == "rzmq-tcp" else "require"
        if row == "rzmq-rdma":
            env["RZMQ_RDMA_PROVIDER"] = "soft"
    return env


# ------------------------------------------------------------------------------------- workers

def _setup_imports():
    sys.path.insert(0, os.path.join(ROOT, "python", "tests", "omni"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import vllm_omni_shim

    vllm_omni_shim.install()


def _connector(row: str, role: str):
    from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory
    from vllm_omni.distributed.omni_connectors.utils.config import ConnectorSpec

    if row == "shm":
        return OmniConnectorFactory.create_connector(ConnectorSpec("SharedMemoryConnector", {"stage_id": role}))
    import rzmq.omni

    rzmq.omni.register()
    extra = {"host": "127.0.0.1", "role": "sender" if role == "producer" else "receiver",
             "memory_pool_size": 2 << 30, "host_cache": False}
    return OmniConnectorFactory.create_connector(ConnectorSpec("RzmqConnector", extra))


def _digest(buf) -> str:
    return hashlib.blake2b(memoryview(buf).cast("B"), digest_size=16).hexdigest()


def _payload_bytes(obj):
    if hasattr(obj, "buffer"):
        return obj.buffer
    return obj  # numpy array (SharedMemoryConnector deserializes it)


def producer(row: str, ctl: str, sizes: list[int], quick: bool) -> None:
    _setup_imports()
    import numpy as np

    conn = _connector(row, "producer")
    results = []
    with Listener(ctl, authkey=AUTH) as lis:
        print("READY", flush=True)
        with lis.accept() as pipe:
            for size in sizes:
                n_lat, n_thr = iterations(size, quick)
                arrs = [np.random.default_rng(s).integers(0, 256, size, dtype=np.uint8) for s in (1, 2)]
                digests = [_digest(a) for a in arrs]
                lats = []
                for i in range(n_lat):
                    key = f"lat-{size}-{i}"
                    check = i in (0, n_lat - 1)
                    t0 = time.monotonic()
                    ok, _, meta = conn.put("0", "1", key, arrs[i % 2])
                    assert ok, f"put {key} failed"
                    pipe.send(("get", key, meta, digests[i % 2] if check else None))
                    t1 = pipe.recv()
                    lats.append(t1 - t0)
                # throughput: puts run ahead of the gets
                t0 = time.monotonic()
                for i in range(n_thr):
                    key = f"thr-{size}-{i}"
                    ok, _, meta = conn.put("0", "1", key, arrs[i % 2])
                    assert ok, f"put {key} failed"
                    pipe.send(("get", key, meta, digests[i % 2] if i in (0, n_thr - 1) else None, "nowait"))
                pipe.send(("sync",))
                t_end = pipe.recv()
                lats.sort()
                results.append({
                    "size": size, "n_lat": n_lat, "n_thr": n_thr,
                    "lat_p50_ms": statistics.median(lats) * 1e3,
                    "lat_p99_ms": lats[min(len(lats) - 1, int(len(lats) * 0.99))] * 1e3,
                    "mbps": size * n_thr / (t_end - t0) / 1e6,
                })
                if hasattr(conn, "reap_consumed"):
                    conn.reap_consumed()
            pipe.send(("done",))
    health = conn.health()
    conn.close()
    print(json.dumps({"row": row, "rows": results, "health": {k: v for k, v in health.items()
                                                                if isinstance(v, (int, float, str, bool))}}))


def consumer(row: str, ctl: str) -> None:
    _setup_imports()
    conn = _connector(row, "consumer")
    with Client(ctl, authkey=AUTH) as pipe:
        while True:
            msg = pipe.recv()
            if msg[0] == "done":
                break
            if msg[0] == "sync":
                pipe.send(time.monotonic())
                continue
            _, key, meta, want = msg[:4]
            got = conn.get("0", "1", key, meta)
            if got is None:
                raise SystemExit(f"get {key} returned None")
            obj = got[0]
            if want is not None and _digest(_payload_bytes(obj)) != want:
                raise SystemExit(f"get {key}: wrong bytes")
            if hasattr(obj, "release"):
                obj.release()
            if len(msg) == 4:
                pipe.send(time.monotonic())
    conn.close()


# ------------------------------------------------------------------------------------- driver

def run_row(row: str, sizes: list[int], quick: bool) -> dict:
    if row == "mooncake-tcp":
        return run_mooncake(sizes, quick)
    env = row_env(row)
    with tempfile.TemporaryDirectory() as d:
        ctl = os.path.join(d, "ctl")
        base = [sys.executable, os.path.abspath(__file__)]
        prod = subprocess.Popen(base + ["producer", row, ctl, ",".join(map(str, sizes))] + (["--quick"] if quick else []),
                                stdout=subprocess.PIPE, text=True, env=env)
        assert prod.stdout.readline().strip() == "READY"
        cons = subprocess.Popen(base + ["consumer", row, ctl], env=env)
        out, _ = prod.communicate(timeout=1800)
        cons.wait(timeout=60)
        if prod.returncode or cons.returncode:
            raise RuntimeError(f"{row}: producer exit {prod.returncode}, consumer exit {cons.returncode}")
        return json.loads(out.strip().splitlines()[-1])


def run_mooncake(sizes: list[int], quick: bool) -> dict:
    script = os.path.join(HERE, "mooncake_te.py")
    py = os.environ.get("MOONCAKE_PYTHON") or os.path.join(ROOT, "benches", "build", "mooncake-venv", "bin", "python")
    if not (os.path.exists(script) and os.path.exists(py)):
        return {"row": "mooncake-tcp", "rows": [], "skipped": f"needs {script} and its venv ({py})"}
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [py, script, "--json", f.name, "--sizes", ",".join(map(str, sizes))] + (["--quick"] if quick else [])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            return {"row": "mooncake-tcp", "rows": [], "skipped": f"exit {r.returncode}: {r.stderr.strip()[-300:]}"}
        data = json.load(open(f.name))
    return {"row": "mooncake-tcp", "rows": data["rows"], "version": data.get("version")}


def fmt_size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def markdown(results: list[dict], sizes: list[int], cmd: str) -> str:
    by = {r["row"]: {x["size"]: x for x in r["rows"]} for r in results}
    lines = [f"Command: `{cmd}`, {time.strftime('%Y-%m-%d')}, one run.", ""]
    peers = [r for r in ("shm", "mooncake-tcp") if r in by]  # the libzmq row is our connector too
    ours_rows = [r for r in ("rzmq-tcp", "rzmq-rdma") if r in by]
    head = ("| payload | " + " | ".join(f"{r} p50 ms / MB/s" for r in by) + " | "
            + " | ".join(f"{r} / best peer (p50 latency, throughput)" for r in ours_rows) + " |")
    lines += [head, "|" + "---|" * (len(by) + len(ours_rows) + 1)]
    for s in sizes:
        cells = []
        for r in by:
            x = by[r].get(s)
            cells.append(f"{x['lat_p50_ms']:.2f} / {x['mbps']:.0f}" if x else "-")
        theirs = [by[r][s] for r in peers if s in by[r]]
        for r in ours_rows:
            o = by[r].get(s)
            if o and theirs:
                lat = o["lat_p50_ms"] / min(t["lat_p50_ms"] for t in theirs)
                thr = o["mbps"] / max(t["mbps"] for t in theirs)
                cells.append(f"{lat:.2f}x, {thr:.2f}x")
            else:
                cells.append("-")
        lines.append(f"| {fmt_size(s)} | " + " | ".join(cells) + " |")
    for r in results:
        if r.get("skipped"):
            lines.append(f"\n{r['row']} did not run: {r['skipped']}")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "producer":
        producer(sys.argv[2], sys.argv[3], [int(s) for s in sys.argv[4].split(",")], "--quick" in sys.argv)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "consumer":
        consumer(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    for row in args.rows.split(","):
        t = time.monotonic()
        r = run_row(row, sizes, args.quick)
        results.append(r)
        for x in r["rows"]:
            print(f"{row:13s} {fmt_size(x['size']):>7s}  p50 {x['lat_p50_ms']:8.2f} ms  p99 {x['lat_p99_ms']:8.2f} ms"
                  f"  {x['mbps']:8.0f} MB/s", flush=True)
        if r.get("skipped"):
            print(f"{row}: did not run: {r['skipped']}", flush=True)
        print(f"{row}: {time.monotonic() - t:.0f} s", flush=True)
    cmd = "python benches/omni/connector_bench.py " + " ".join(sys.argv[1:])
    md = markdown(results, sizes, cmd.strip())
    print(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()

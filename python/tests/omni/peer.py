"""A producer or consumer process for the connector tests and benchmark.

    peer.py produce CONFIG_JSON SIZES_CSV [--shared CONTENT]
        builds an RzmqConnector from CONFIG_JSON through vllm-omni's factory, puts one payload per
        size (numpy uint8, seeded by its index, key "req{i}", stages "0" -> "1"), prints one JSON
        line {"key", "size", "digest", "metadata"} per payload, then "READY" and serves until its
        standard input closes (or says "health", answered with the health dict as JSON)
    peer.py consume CONFIG_JSON METAS_JSON [--deadline S]
        builds a connector the same way, gets every payload listed (a JSON list of the lines the
        producer printed) and prints one JSON line per get: {"key", "ok", "size", "digest",
        "seconds"}, then {"health": ...}

Payload bytes: a seeded random block so that digests catch any corruption.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:  # the installed rzmq (the wheel) when there is one, else this source tree's python/
    import rzmq.omni  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

import vllm_omni_shim  # noqa: E402

vllm_omni_shim.install()

import numpy as np  # noqa: E402

import rzmq.omni  # noqa: E402
from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory  # noqa: E402
from vllm_omni.distributed.omni_connectors.utils.config import ConnectorSpec  # noqa: E402


def data_for(i: int, size: int) -> np.ndarray:
    """The payload with index `i`: `size` seeded random bytes."""
    return np.random.default_rng(1000 + i).integers(0, 256, size, dtype=np.uint8)


def digest(buf) -> str:
    """Short BLAKE2b of a buffer."""
    return hashlib.blake2b(memoryview(buf).cast("B"), digest_size=16).hexdigest()


def connector(config: dict):
    """An RzmqConnector built the way vllm-omni builds one: by name, through its factory."""
    rzmq.omni.register()
    return OmniConnectorFactory.create_connector(ConnectorSpec(name="RzmqConnector", extra=config))


def produce(config: dict, sizes: list[int], shared: str | None) -> None:
    conn = connector(config)
    for i, size in enumerate(sizes):
        arr = data_for(i, size)
        data = rzmq.omni.Shared(arr, f"{shared}-{i}") if shared else arr
        ok, n, meta = conn.put("0", "1", f"req{i}", data)
        assert ok and n == size, (ok, n, size)
        print(json.dumps({"key": f"req{i}", "size": size, "digest": digest(arr), "metadata": meta}), flush=True)
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() == "health":
            print(json.dumps(conn.health()), flush=True)
    conn.close()


def consume(config: dict, metas: list[dict], deadline_s: float) -> None:
    conn = connector(config)
    for m in metas:
        t0 = time.monotonic()
        got = conn.get_with_deadline("0", "1", m["key"], m["metadata"], deadline=t0 + deadline_s)
        out = {"key": m["key"], "ok": got is not None, "seconds": time.monotonic() - t0}
        if got is not None:
            buf, size = got
            out.update(size=size, digest=digest(buf.buffer), type=type(buf).__name__)
            buf.release()
        print(json.dumps(out), flush=True)
    print(json.dumps({"health": conn.health()}), flush=True)
    conn.close()


def main(argv: list[str]) -> None:
    mode, config = argv[0], json.loads(argv[1])
    if mode == "produce":
        shared = argv[argv.index("--shared") + 1] if "--shared" in argv else None
        produce(config, [int(s) for s in argv[2].split(",")], shared)
    elif mode == "consume":
        deadline = float(argv[argv.index("--deadline") + 1]) if "--deadline" in argv else 60.0
        consume(config, json.loads(argv[2]), deadline)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])

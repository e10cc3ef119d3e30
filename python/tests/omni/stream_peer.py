"""A streaming producer or consumer process for test_push.py (push delivery under back-pressure).

    stream_peer.py produce CONFIG_JSON N SIZE
        puts N payloads of SIZE seeded bytes under vllm-omni's chunk keys `s_0_<i>` (stage 0 -> 1)
        as fast as put() returns; prints "READY <port>" first, then, once every payload was
        delivered, one JSON line {"max_held", "put_s", "rss_kib" (sampled every 10 ms), "health"}
    stream_peer.py consume CONFIG_JSON PORT N DELAY
        gets `s_0_0` .. `s_0_<N-1>` in order from the producer on PORT, polling get() as
        vllm-omni's receive loop does and sleeping DELAY seconds after each (a slow consumer);
        prints one JSON line {"received", "bad", "order_ok", "via", "rss_kib", "health"}
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
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

import rzmq.omni as ro  # noqa: E402


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sampler:
    """This process's resident memory, sampled every 10 ms while streaming."""

    def __init__(self):
        self.rss: list[int] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.rss.append(rss_kib())
            time.sleep(0.01)

    def stop(self) -> list[int]:
        self._stop.set()
        self._t.join()
        return self.rss


def data_for(i: int, size: int) -> np.ndarray:
    return np.random.default_rng(7000 + i).integers(0, 256, size, dtype=np.uint8)


def digest(buf) -> str:
    return hashlib.blake2b(memoryview(buf).cast("B"), digest_size=16).hexdigest()


def produce(config: dict, n: int, size: int) -> None:
    conn = ro.RzmqConnector(config)
    print(f"READY {conn.port}", flush=True)
    max_held = 0
    stop = threading.Event()

    def watch():  # what the store holds, sampled while puts run and wait
        nonlocal max_held
        while not stop.is_set():
            max_held = max(max_held, conn.store.held)
            time.sleep(0.001)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    sampler = Sampler()
    t0 = time.monotonic()
    for i in range(n):
        ok, nbytes, _ = conn.put("0", "1", f"s_0_{i}", data_for(i, size))
        assert ok and nbytes == size, (i, ok, nbytes)
    put_s = time.monotonic() - t0
    end = time.monotonic() + 120
    while conn.health()["pushes"] < n and time.monotonic() < end:
        time.sleep(0.01)
    stop.set()
    w.join()
    print(json.dumps({"max_held": max_held, "put_s": put_s, "rss_kib": sampler.stop(), "health": conn.health()}),
          flush=True)
    time.sleep(0.5)  # the last pushes are read by the consumer before this side closes
    conn.close()


def consume(config: dict, port: int, n: int, delay: float) -> None:
    conn = ro.RzmqConnector(config)
    meta = {"source_host": "127.0.0.1", "source_port": port}
    bad, via = [], {}
    order_ok = True
    sampler = Sampler()
    end = time.monotonic() + 240
    for i in range(n):
        while True:
            got = conn.get("0", "1", f"s_0_{i}", meta)
            if got is not None:
                break
            if time.monotonic() > end:
                raise SystemExit(f"chunk {i} never came")
            time.sleep(0.001)
        buf, size = got
        if digest(buf.buffer) != digest(data_for(i, size)):
            bad.append(i)
        buf.release()
        how = conn.last_get_info()["via"]
        via[how] = via.get(how, 0) + 1
        # a later chunk must not be here before this one was (put order per request)
        order_ok &= all(not conn.inbox.has(f"s_0_{j}@0_1") for j in range(i))
        time.sleep(delay)
    print(json.dumps({"received": n - len(bad), "bad": bad, "order_ok": order_ok, "via": via,
                      "rss_kib": sampler.stop(), "health": conn.health()}), flush=True)
    conn.close()


def main(argv: list[str]) -> None:
    mode, config = argv[0], json.loads(argv[1])
    if mode == "produce":
        produce(config, int(argv[2]), int(argv[3]))
    elif mode == "consume":
        consume(config, int(argv[2]), int(argv[3]), float(argv[4]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])

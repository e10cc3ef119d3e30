"""Per-edge measurements of whatever connector a real vllm-omni pipeline uses (tests only).

Loaded in every vllm-omni process through the `vllm_omni.general_plugins` entry point; does
nothing unless RZMQ_REAL_TRACE_DIR is set. Then it wraps OmniConnectorFactory.create_connector
so every connector instance's put/get/get_with_deadline appends one JSON line per call to
`$RZMQ_REAL_TRACE_DIR/trace-<pid>.jsonl`: wall-clock start and end (time.time(), one clock for
every process of a host and its network namespaces), the key, bytes, ok, and a digest of every
tensor in the payload (path, dtype, shape, sha256 of its bytes), computed after the timed call
so it does not count in the latency. The first line of each file says which libzmq serves
pyzmq in that process (rzmq._libcheck) and the process's role.

The same wrapper measures SharedMemoryConnector, Mooncake's connectors and RzmqConnector, so
their figures compare like with like.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time

_lock = threading.Lock()
_file = None
_installed = False
_local = threading.local()  # get() may call get_with_deadline(): one record per outer call


def _out():
    global _file
    if _file is None:
        d = os.environ["RZMQ_REAL_TRACE_DIR"]
        os.makedirs(d, exist_ok=True)
        _file = open(os.path.join(d, f"trace-{os.getpid()}.jsonl"), "a", buffering=1)
    return _file


def _emit(rec: dict) -> None:
    with _lock:
        _out().write(json.dumps(rec) + "\n")


def _tensor_digests(obj, path="", out=None, depth=0):
    """(path, dtype, shape, sha256) of every torch tensor / numpy array in a nested payload."""
    import numpy as np
    import torch

    if out is None:
        out = []
    if depth > 8:
        return out
    if hasattr(obj, "__struct_fields__"):  # vllm-omni's OmniPayloadStruct: what a consumer gets is its dict
        obj = {f: getattr(obj, f) for f in obj.__struct_fields__ if getattr(obj, f) is not None}
    if isinstance(obj, torch.Tensor):
        t = obj.detach().contiguous().cpu()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""  # 0-d too
        out.append([path, str(t.dtype), list(t.shape), hashlib.sha256(raw).hexdigest()])
    elif isinstance(obj, np.ndarray):
        out.append([path, str(obj.dtype), list(obj.shape), hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()])
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            _tensor_digests(obj[k], f"{path}/{k}", out, depth + 1)
    elif isinstance(obj, (list, tuple)) and obj and not isinstance(obj[0], (int, float, str, bytes)):
        for i, v in enumerate(obj):
            _tensor_digests(v, f"{path}[{i}]", out, depth + 1)
    elif isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], int):
        out.append([path, "ints", [len(obj)], hashlib.sha256(json.dumps(list(obj)).encode()).hexdigest()])
    return out


_misses: dict = {}  # edge -> [polls that found nothing, seconds in them, CPU seconds]
_misses_flushed = [0.0]


def _count_miss(edge: str, name: str, seconds: float, cpu: float) -> None:
    """Streaming consumers poll get() for every waiting request every few milliseconds: the
    empty polls are summed per edge and written once a second (and at exit), not one line each."""
    with _lock:
        m = _misses.setdefault((edge, name), [0, 0.0, 0.0])
        m[0] += 1
        m[1] += seconds
        m[2] += cpu
        now = time.time()
        flush = now - _misses_flushed[0] >= 1.0
        if flush:
            _misses_flushed[0] = now
    if flush:
        _flush_misses()


def _flush_misses() -> None:
    with _lock:
        items = [(k, list(v)) for k, v in _misses.items()]
    for (edge, name), (n, secs, cpu) in items:
        _emit({"op": "misses", "connector": name, "pid": os.getpid(), "edge": edge, "t": time.time(),
               "polls": n, "seconds": secs, "cpu": cpu})


def _wrap(conn, name: str) -> None:
    put, get = conn.put, conn.get
    get_dl = getattr(conn, "get_with_deadline", None)

    def traced_put(from_stage, to_stage, put_key, data):
        t0 = time.time()
        c0 = time.process_time()
        res = put(from_stage, to_stage, put_key, data)
        t1 = time.time()
        c1 = time.process_time()
        ok, size = (bool(res[0]), int(res[1] or 0)) if isinstance(res, tuple) else (False, 0)
        _emit({"op": "put", "connector": name, "pid": os.getpid(), "edge": f"{from_stage}->{to_stage}",
               "key": str(put_key), "t0": t0, "t1": t1, "cpu": c1 - c0, "ok": ok, "bytes": size,
               "tensors": _tensor_digests(data)})
        return res

    info = getattr(conn, "last_get_info", None)  # rzmq: how a get was served, when it arrived

    def _record(kind, from_stage, to_stage, key, t0, t1, c, res):
        obj = res[0] if isinstance(res, tuple) and res else None
        size = int(res[1] or 0) if isinstance(res, tuple) and len(res) > 1 else 0
        if obj is None:  # a poll that found nothing: counted per edge, not one line each
            _count_miss(f"{from_stage}->{to_stage}", name, t1 - t0, c)
            return
        rec = {"op": kind, "connector": name, "pid": os.getpid(), "edge": f"{from_stage}->{to_stage}",
               "key": str(key), "t0": t0, "t1": t1, "cpu": c, "ok": True, "bytes": size,
               "tensors": _tensor_digests(obj)}
        how = info() if info is not None else None
        if how:
            rec["via"], rec["arrived"], rec["sent"] = how.get("via"), how.get("arrived"), how.get("sent")
        _emit(rec)

    def _timed(call, from_stage, to_stage, key):
        if getattr(_local, "inside", False):
            return call()
        _local.inside = True
        try:
            t0, c0 = time.time(), time.process_time()
            res = call()
            t1, c = time.time(), time.process_time() - c0
        finally:
            _local.inside = False
        _record("get", from_stage, to_stage, key, t0, t1, c, res)
        return res

    def traced_get(from_stage, to_stage, get_key, metadata=None):
        return _timed(lambda: get(from_stage, to_stage, get_key, metadata), from_stage, to_stage, get_key)

    conn.put, conn.get = traced_put, traced_get
    if get_dl is not None:
        def traced_get_dl(from_stage, to_stage, get_key, metadata=None, *, deadline):
            return _timed(lambda: get_dl(from_stage, to_stage, get_key, metadata, deadline=deadline), from_stage,
                          to_stage, get_key)

        conn.get_with_deadline = traced_get_dl


def watch_noise(model) -> None:
    """Records each Qwen2.5-Omni code2wav call (when tracing): its codes, its audio, and the
    state of the process-global torch RNG it starts from.

    code2wav's starting noise is `torch.randn` with no generator (vllm-omni's qwen2_5_omni.py,
    `_codec_to_audio`), so a request's audio depends on how many draws the requests code2wav
    took before it made: the order they reached it, which is timing. compare.py holds a
    request's audio to stock's whenever its codes and this state equal stock's, and reports the
    rest as the noise's doing, with both orders."""
    gen = getattr(model, "generate_audio", None)
    if gen is None or not os.environ.get("RZMQ_REAL_TRACE_DIR"):
        return
    import torch

    def traced(code, voice_type, *args, **kwargs):
        state = hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()
        t0 = time.time()
        audio = gen(code, voice_type, *args, **kwargs)
        codes = torch.as_tensor(code).reshape(-1).tolist()
        digests = _tensor_digests(audio) if isinstance(audio, torch.Tensor) else []
        _emit({"op": "noise", "pid": os.getpid(), "t0": t0, "rng": state,
               "codes": hashlib.sha256(json.dumps(codes).encode()).hexdigest(),
               "audio": digests[0][3] if digests else None})
        return audio

    model.generate_audio = traced


def _library() -> str | None:
    try:
        from rzmq import _libcheck

        import zmq  # noqa: F401  (loads pyzmq's backend so the lookup has something to find)

        return _libcheck.bound_file()[0]
    except Exception as e:  # noqa: BLE001
        return f"unknown ({e})"


def process_record() -> dict:
    """This process: its title (vLLM's), which libzmq serves pyzmq in it, LD_PRELOAD."""
    try:
        import setproctitle

        title = setproctitle.getproctitle()
    except Exception:  # noqa: BLE001
        title = " ".join(sys.argv[:2])
    return {"op": "process", "pid": os.getpid(), "title": title, "library": _library(),
            "preload": os.environ.get("LD_PRELOAD", ""), "t0": time.time()}


def install() -> None:
    """vllm-omni general plugin: wraps connector creation when RZMQ_REAL_TRACE_DIR is set."""
    global _installed
    if _installed or not os.environ.get("RZMQ_REAL_TRACE_DIR"):
        return
    _installed = True
    _emit(process_record())
    import atexit

    atexit.register(_flush_misses)

    try:
        from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory
    except ImportError:
        return
    create = OmniConnectorFactory.create_connector.__func__

    def traced_create(cls, spec):
        conn = create(cls, spec)
        _wrap(conn, spec.name)
        _emit({"op": "connector", "pid": os.getpid(), "name": spec.name, "t0": time.time(),
               "extra": {k: v for k, v in (spec.extra or {}).items() if isinstance(v, (str, int, float, bool))}})
        return conn

    OmniConnectorFactory.create_connector = classmethod(traced_create)

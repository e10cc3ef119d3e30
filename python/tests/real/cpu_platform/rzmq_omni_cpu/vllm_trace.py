"""What vLLM's scheduler and EC/KV connectors did, per process (tests only).

Loaded in every vLLM process through the `vllm.general_plugins` entry point (name
`rzmq_vllm_trace`); does nothing unless RZMQ_VLLM_TRACE_DIR is set. Then it appends JSON lines
to `$RZMQ_VLLM_TRACE_DIR/vllm-<pid>.jsonl`:
- `process`: the process title, which libzmq serves pyzmq in it;
- `step`: each scheduler step that scheduled something: for each request first scheduled in it,
  its prompt length, the tokens already computed (local prefix hits plus what a KV connector
  loaded) and the tokens computed now; and which encoder inputs the step runs locally;
- `ec`/`kv`: each timed connector call (EC: ensure_cache_available, save_caches,
  start_load_caches with the bytes it put into vLLM's encoder cache; KV: start_load_kv,
  wait_for_layer_load, save_kv_layer, wait_for_save, register_kv_caches with the KV bytes per
  token), with the connector's own `stats` where it keeps them;
- `serve`: each data request an rzmq producer answered (arrival, answer time, CPU);
- `fault`: the moment an armed fault killed this process (below).

The same wrappers measure rzmq's connectors and vLLM's own, so the figures compare like with like.

Faults (with RZMQ_VLLM_TEST_FAULTS=1): a producer of rzmq's connectors (the encoder's EC worker,
the prefill's KV worker) dies mid-transfer on demand. Once the harness writes N into
`$RZMQ_VLLM_TRACE_DIR/die-after`, the producer answers N more data requests and then, when the
next one arrives, kills its own process (SIGKILL: no reply, no cleanup), with that consumer's
request in flight. For the KV connector, N = 1 means: layer 0 delivered, dead at layer 1.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

_lock = threading.Lock()
_file = None
_installed = False


def _emit(rec: dict) -> None:
    global _file
    with _lock:
        if _file is None:
            d = os.environ["RZMQ_VLLM_TRACE_DIR"]
            os.makedirs(d, exist_ok=True)
            _file = open(os.path.join(d, f"vllm-{os.getpid()}.jsonl"), "a", buffering=1)
        _file.write(json.dumps(rec) + "\n")


def _stats(conn):
    s = getattr(conn, "stats", None)
    return dict(s) if isinstance(s, dict) else None


def _timed(conn, kind: str, name: str, extra=None):
    fn = getattr(conn, name)

    def wrapper(*args, **kwargs):
        t0, c0 = time.time(), time.thread_time()
        before = extra[0](*args, **kwargs) if extra else None
        res = fn(*args, **kwargs)
        t1, c1 = time.time(), time.thread_time()
        rec = {"op": kind, "call": name, "pid": os.getpid(), "t0": t0, "t1": t1, "cpu": c1 - c0}
        if extra:
            rec.update(extra[1](before, res, *args, **kwargs))
        if name in ("start_load_caches", "save_caches", "wait_for_save", "start_load_kv"):
            rec["stats"] = _stats(conn)
        _emit(rec)
        return res

    setattr(conn, name, wrapper)


def _wrap_producer(conn) -> None:
    """Wraps the request handler of an rzmq producer (a worker's `_peer` that serves): each data
    request answered is traced (`serve`: when it arrived, how long the answer took), and with
    RZMQ_VLLM_TEST_FAULTS=1 the producer dies mid-transfer once armed (see above)."""
    peer = getattr(conn, "_peer", None)
    if peer is None or not hasattr(peer, "_answer") or not peer.can_put:
        return
    from rzmq.omni import wire

    answer, served = peer._answer, [0]
    armed = os.path.join(os.environ["RZMQ_VLLM_TRACE_DIR"], "die-after")
    faults = os.environ.get("RZMQ_VLLM_TEST_FAULTS") == "1"

    def traced(router, frames):
        t0, c0 = time.time(), time.thread_time()
        res = answer(router, frames)
        _emit({"op": "serve", "pid": os.getpid(), "t0": t0, "t1": time.time(), "cpu": time.thread_time() - c0,
               "kind": type(conn).__name__})
        return res

    def answer_or_die(router, frames):
        try:
            op = wire.parse_request(frames[1:]).op
        except wire.ProtocolError:
            return answer(router, frames)
        if op in (wire.OP_PING, wire.OP_DONE, wire.OP_QUERY):
            return answer(router, frames)
        limit = None
        if faults:
            try:
                with open(armed) as f:
                    limit = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
        if limit is None:
            return traced(router, frames)
        if served[0] >= limit:
            _emit({"op": "fault", "pid": os.getpid(), "t": time.time(), "served_after_arming": served[0],
                   "kind": type(conn).__name__})
            os.kill(os.getpid(), signal.SIGKILL)
        served[0] += 1
        return traced(router, frames)

    peer._answer = answer_or_die


def _ec_wrap(conn) -> None:
    def load_before(encoder_cache, **kw):
        return set(encoder_cache)

    def load_after(before, res, encoder_cache, **kw):
        new = [k for k in encoder_cache if k not in before]
        return {"items": new, "bytes": sum(encoder_cache[k].numel() * encoder_cache[k].element_size() for k in new)}

    def ensure_after(before, res, request, num_computed_tokens):
        return {"req": request.request_id, "ready": bool(res), "mm": [f.identifier for f in request.mm_features],
                "stats": _stats(conn)}

    def save_after(before, res, encoder_cache, mm_hash, **kw):
        t = encoder_cache.get(mm_hash)
        return {"item": mm_hash, "bytes": int(t.numel() * t.element_size()) if t is not None else 0}

    _timed(conn, "ec", "start_load_caches", (load_before, load_after))
    _timed(conn, "ec", "ensure_cache_available", (lambda *a, **k: None, ensure_after))
    _timed(conn, "ec", "save_caches", (lambda *a, **k: None, save_after))
    _wrap_producer(conn)


def _kv_wrap(conn) -> None:
    def reg_after(before, res, kv_caches, *a, **kw):
        total = 0
        for t in kv_caches.values():
            total += t.numel() * t.element_size()
        return {"layers": len(kv_caches), "bytes": total}

    def layer_after(before, res, layer_name, *a, **kw):
        return {"layer": layer_name}

    _timed(conn, "kv", "register_kv_caches", (lambda *a, **k: None, reg_after))
    for name in ("start_load_kv", "wait_for_save"):
        _timed(conn, "kv", name)
    _timed(conn, "kv", "wait_for_layer_load", (lambda *a, **k: None, layer_after))
    _timed(conn, "kv", "save_kv_layer", (lambda *a, **k: None, layer_after))
    _wrap_producer(conn)


def _wrap_schedule() -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    schedule = Scheduler.schedule
    if getattr(schedule, "_rzmq_traced", False):
        return

    def traced(self, *args, **kwargs):
        out = schedule(self, *args, **kwargs)
        if not out.total_num_scheduled_tokens:
            return out
        new = []
        for r in out.scheduled_new_reqs:
            new.append({"req": r.req_id, "prompt": len(r.prompt_token_ids or []), "computed": r.num_computed_tokens,
                        "scheduled": out.num_scheduled_tokens.get(r.req_id, 0), "mm": len(r.mm_features or [])})
        _emit({"op": "step", "pid": os.getpid(), "t": time.time(), "new": new,
               "encoder": {k: list(v) for k, v in (out.scheduled_encoder_inputs or {}).items()},
               "tokens": out.total_num_scheduled_tokens})
        return out

    traced._rzmq_traced = True
    Scheduler.schedule = traced


def install() -> None:
    """vLLM general plugin: wraps the scheduler and connector creation when RZMQ_VLLM_TRACE_DIR is set."""
    global _installed
    if _installed or not os.environ.get("RZMQ_VLLM_TRACE_DIR"):
        return
    _installed = True
    from .trace import process_record

    _emit(process_record())
    _wrap_schedule()
    from vllm.distributed.ec_transfer.ec_connector.factory import ECConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    ec_create = ECConnectorFactory.create_connector.__func__

    def ec_traced(cls, config, role):
        conn = ec_create(cls, config, role)
        _ec_wrap(conn)
        _emit({"op": "connector", "kind": "ec", "pid": os.getpid(), "class": type(conn).__name__,
               "role": role.name, "ec_role": config.ec_transfer_config.ec_role})
        return conn

    ECConnectorFactory.create_connector = classmethod(ec_traced)
    kv_create = KVConnectorFactory.create_connector.__func__

    def kv_traced(cls, config, role, *args, **kwargs):
        conn = kv_create(cls, config, role, *args, **kwargs)
        _kv_wrap(conn)
        _emit({"op": "connector", "kind": "kv", "pid": os.getpid(), "class": type(conn).__name__,
               "role": role.name, "kv_role": config.kv_transfer_config.kv_role})
        return conn

    KVConnectorFactory.create_connector = classmethod(kv_traced)

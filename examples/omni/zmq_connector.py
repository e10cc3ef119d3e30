"""An OmniConnector (vllm-omni's stage-to-stage payload interface) backed by pyzmq.

Interface: vllm_omni/distributed/omni_connectors/connectors/base.py (OmniConnectorBase):
    put(from_stage, to_stage, put_key, data) -> (ok, serialized_size, metadata)
    get(from_stage, to_stage, get_key, metadata=None) -> (obj, size) or None
    cleanup(request_id), health() -> dict, close()
When vllm_omni is importable the class derives from its base; otherwise from a local copy of the
same abstract interface. Because it is plain pyzmq, LD_PRELOAD of rzmq's libzmq.so moves its bytes.

Transport (push): every connector binds one ROUTER "inbox" and keeps one DEALER "outbox" per peer
(IDENTITY = its stage name), connected to that peer's inbox. put() serializes the payload the vLLM
way (msgpack main frame, every array of 256 bytes or more as its own frame) and sends it at once
with copy=False, track=True; the metadata it returns (key, endpoint, sizes) travels on the control
path (the orchestrator) to the receiving stage, whose get() waits until the payload has arrived in
its inbox. A service thread owns the inbox; sends on an outbox are serialized by a lock.

Embedding sharing (config "sharing", default on): a payload may hold omni_wire.Shared(key, tensor)
values, whose key names the content (a content hash).
  sender:   a registry of content key -> tensor (byte bound, LRU) and, per peer, the keys the peer
            acknowledged. A Shared whose key the peer holds is sent as a reference (no bytes).
  receiver: a cache of content key -> bytes (byte bound "cache_bytes", LRU eviction). It acks each
            key it caches (b"A"). A reference it cannot resolve (evicted meanwhile) makes it ask the
            sender for the bytes (b"F"); the reply (b"R") completes the payload and is cached (and
            acked) again. With "evict_notify" (default off) it also tells the sender which keys it
            evicts (b"V"), so that they travel as bytes again instead of costing a fetch round trip.
Wire messages on an inbox: [identity, type, msgpack main, *frames] with type b"D" (payload),
b"A" (cached keys), b"V" (evicted keys), b"F" (fetch request), b"R" (fetch reply).
"""

from __future__ import annotations

import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any

import zmq

import omni_wire as w

try:  # the real base class when vllm-omni is installed
    from vllm_omni.distributed.omni_connectors.connectors.base import OmniConnectorBase
except Exception:  # noqa: BLE001

    class OmniConnectorBase(ABC):
        """Local copy of vllm-omni's OmniConnectorBase interface."""

        supports_raw_data: bool = False

        @abstractmethod
        def put(self, from_stage: str, to_stage: str, put_key: str, data: Any) -> tuple[bool, int, dict[str, Any] | None]:
            ...

        @abstractmethod
        def get(self, from_stage: str, to_stage: str, get_key: str,
                metadata: dict[str, Any] | None = None) -> tuple[Any, int] | None:
            ...

        @abstractmethod
        def cleanup(self, request_id: str) -> bool | None:
            ...

        def get_with_deadline(self, from_stage, to_stage, get_key, metadata=None, *, deadline):
            raise NotImplementedError

        @abstractmethod
        def health(self) -> dict[str, Any]:
            ...

        @abstractmethod
        def close(self) -> None:
            ...

        def __del__(self):
            try:
                self.close()
            except Exception:  # noqa: BLE001
                pass

        def __enter__(self):
            return self

        def __exit__(self, exc_type, exc_val, exc_tb):
            self.close()


D, ACK, EVICT, FETCH, REPLY = b"D", b"A", b"V", b"F", b"R"


class ZmqConnector(OmniConnectorBase):
    supports_raw_data = True

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.stage = str(config["stage_id"])
        self.sharing = bool(config.get("sharing", True))
        self.cache_bytes = int(config.get("cache_bytes", 256 << 20))
        self.registry_bytes = int(config.get("registry_bytes", 1 << 30))
        self.evict_notify = bool(config.get("evict_notify", False))
        self.get_timeout = float(config.get("get_timeout", 60.0))
        self.linger_ms = int(config.get("linger_ms", 4000))
        self._own_ctx = config.get("context") is None
        self.ctx = zmq.Context(io_threads=int(config.get("io_threads", 1))) if self._own_ctx else config["context"]
        self._closed = False
        self._lock = threading.Lock()  # outboxes, known, registry, metrics
        self._cond = threading.Condition()  # ready / pending payloads
        self._peers = dict(config.get("peers", {}))  # name -> inbox endpoint
        self._outbox = {}
        self._known = {}  # peer -> set of content keys the peer acked
        self._registry = OrderedDict()  # content key -> (array, nbytes)
        self._registry_total = 0
        self._cache = OrderedDict()  # content key -> (buffer, nbytes, origin)
        self._cache_total = 0
        self._ready = {}  # put key -> (main, frames, resolved, arrival)
        self._pending = {}  # put key -> [main, frames, resolved, missing set]
        self._errors = []
        self.latencies = {}  # "from->to" -> [seconds from put() to arrival at the receiver]
        self.edge_bytes = {}  # "from->to" -> bytes this connector sent (payload frames)
        self.m = {k: 0 for k in (
            "puts", "gets", "get_timeouts", "bytes_put", "frames_bytes_sent", "shared_bytes_sent",
            "shared_bytes_saved", "refs_sent", "acks_received", "evictions_notified",
            "fetches_sent", "fetch_bytes_received", "fetches_served", "fetch_bytes_sent",
            "cache_inserts", "cache_hits", "cache_misses", "cache_evictions", "registry_evictions",
            "payloads_received", "bytes_received")}

        self._inbox = self.ctx.socket(zmq.ROUTER)
        w.vllm_options(self._inbox, zmq.ROUTER)
        self._inbox.setsockopt(zmq.LINGER, 0)
        self._inbox.bind(config.get("bind", "tcp://127.0.0.1:0"))
        self.endpoint = self._inbox.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop_ep = f"inproc://omni-connector-stop-{uuid.uuid4().hex}"
        self._stop_rx = self.ctx.socket(zmq.PAIR)
        self._stop_rx.bind(self._stop_ep)
        self._thread = threading.Thread(target=self._serve, name=f"connector-{self.stage}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ peers and sending

    def add_peers(self, peers: dict[str, str]) -> None:
        with self._lock:
            self._peers.update(peers)

    def _outbox_for(self, peer):
        """The DEALER to `peer`'s inbox (caller holds self._lock)."""
        sock = self._outbox.get(peer)
        if sock is None:
            ep = self._peers.get(peer)
            if ep is None:
                raise KeyError(f"connector {self.stage}: no endpoint for peer {peer!r}")
            sock = self.ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.IDENTITY, self.stage.encode())
            w.vllm_options(sock, zmq.DEALER)
            sock.setsockopt(zmq.LINGER, self.linger_ms)
            sock.connect(ep)
            self._outbox[peer] = sock
        return sock

    def _send(self, peer, frames, track=False):
        with self._lock:
            return self._outbox_for(peer).send_multipart(frames, copy=False, track=track)

    # ------------------------------------------------------------------ OmniConnectorBase

    def put(self, from_stage, to_stage, put_key, data):
        ok, size, meta, _ = self.put_tracked(from_stage, to_stage, put_key, data)
        return ok, size, meta

    def put_tracked(self, from_stage, to_stage, put_key, data):
        """put() plus the MessageTracker of the message that carries the payload's frames: a
        caller reusing its buffers waits for it (tracker.done) first."""
        try:
            frames, shared = [], []
            with self._lock:  # snapshots: encoding (digests) runs without holding the lock
                if self.sharing:
                    self._register(data)
                known = set(self._known.get(to_stage, ())) & set(self._registry) if self.sharing else set()
            tree = w.encode(data, frames, shared, known.__contains__)
            # t0: the transfer starts here (after serialization), arrival is stamped by the receiver
            main = {"k": put_key, "from": from_stage, "to": to_stage, "ep": self.endpoint, "t0": time.monotonic(),
                    "tree": tree}
            head = w.pack(main)
            tracker = self._send(to_stage, [D, head, *frames], track=True)
            size = len(head) + sum(f.nbytes for f in frames)
            with self._lock:
                self.m["puts"] += 1
                self.m["bytes_put"] += size
                self.m["frames_bytes_sent"] += size
                edge = f"{from_stage}->{to_stage}"
                self.edge_bytes[edge] = self.edge_bytes.get(edge, 0) + size
                for _key, sent, nbytes in shared:
                    self.m["shared_bytes_sent"] += sent
                    if not sent:
                        self.m["refs_sent"] += 1
                        self.m["shared_bytes_saved"] += nbytes
            meta = {"key": put_key, "from": from_stage, "to": to_stage, "ep": self.endpoint, "size": size,
                    "refs": sum(1 for s in shared if not s[1])}
            return True, size, meta, tracker
        except Exception as e:  # noqa: BLE001
            self._errors.append(f"put {put_key}: {e!r}")
            return False, 0, None, None

    def get(self, from_stage, to_stage, get_key, metadata=None):
        timeout = self.get_timeout
        if isinstance(metadata, dict) and "timeout" in metadata:
            timeout = float(metadata["timeout"])
        return self.get_with_deadline(from_stage, to_stage, get_key, metadata, deadline=time.monotonic() + timeout)

    def get_with_deadline(self, from_stage, to_stage, get_key, metadata=None, *, deadline):
        with self._cond:
            while get_key not in self._ready:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    with self._lock:
                        self.m["get_timeouts"] += 1
                    return None
                self._cond.wait(min(left, 1.0))
            main, frames, resolved, _arrival = self._ready.pop(get_key)
        if main["from"] != from_stage or main["to"] != to_stage:
            raise ValueError(f"payload {get_key} is {main['from']}->{main['to']}, expected {from_stage}->{to_stage}")
        obj = w.decode(main["tree"], frames, resolved.__getitem__, verify=True)
        size = sum(len(f) for f in frames)
        with self._lock:
            self.m["gets"] += 1
        return obj, size

    def cleanup(self, request_id):
        """Drops an unconsumed payload put under exactly this key (never a prefix)."""
        with self._cond:
            a = self._ready.pop(request_id, None)
            b = self._pending.pop(request_id, None)
        return a is not None or b is not None

    def health(self):
        with self._lock:
            alive = self._thread.is_alive() and not self._closed
            return {"status": "healthy" if alive and not self._errors else "unhealthy", "stage": self.stage,
                    "endpoint": self.endpoint, "sharing": self.sharing, "cache_bytes_used": self._cache_total,
                    "cache_entries": len(self._cache), "registry_bytes_used": self._registry_total,
                    "pending": len(self._pending), "ready": len(self._ready), "errors": list(self._errors[:20]),
                    **self.m}

    def close(self):
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            stop = self.ctx.socket(zmq.PAIR)
            stop.connect(self._stop_ep)
            stop.send(b"")
            self._thread.join(10)
            stop.close(linger=0)
        except zmq.ZMQError:
            pass
        with self._cond:
            self._cond.notify_all()
        with self._lock:
            for sock in self._outbox.values():
                sock.close()  # linger: payloads already handed to zmq still go out
            self._outbox.clear()
        if self._own_ctx:
            self.ctx.term()

    # ------------------------------------------------------------------ sender registry

    def _register(self, data):
        """Refreshes the registry with the Shared values of a payload (caller holds the lock)."""
        stack = [data]
        while stack:
            obj = stack.pop()
            if isinstance(obj, w.Shared):
                old = self._registry.pop(obj.key, None)
                if old is not None:
                    self._registry_total -= old[1]
                self._registry[obj.key] = (obj.tensor.array, obj.nbytes)
                self._registry_total += obj.nbytes
            elif isinstance(obj, dict):
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple)):
                stack.extend(obj)
        while self._registry_total > self.registry_bytes and len(self._registry) > 1:
            key, (_a, n) = self._registry.popitem(last=False)
            self._registry_total -= n
            self.m["registry_evictions"] += 1
            for known in self._known.values():
                known.discard(key)  # never send a reference we could not serve

    # ------------------------------------------------------------------ receiver cache

    def _cache_put(self, key, buf, origin):
        """Caches `buf` under `key`; returns False when it does not fit at all."""
        n = len(buf)
        evicted = []
        with self._lock:
            if n > self.cache_bytes:
                return False, evicted
            old = self._cache.pop(key, None)
            if old is not None:
                self._cache_total -= old[1]
            self._cache[key] = (buf, n, origin)
            self._cache_total += n
            self.m["cache_inserts"] += 1
            while self._cache_total > self.cache_bytes:
                k, (_b, m, org) = self._cache.popitem(last=False)
                self._cache_total -= m
                self.m["cache_evictions"] += 1
                evicted.append((k, org))
        return True, evicted

    def _cache_get(self, key):
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                self.m["cache_misses"] += 1
                return None
            self._cache.move_to_end(key)
            self.m["cache_hits"] += 1
            return entry[0]

    def _notify_evicted(self, evicted):
        if not self.evict_notify:
            return
        by_origin = {}
        for key, origin in evicted:
            by_origin.setdefault(origin, []).append(key)
        for origin, keys in by_origin.items():
            self._send(origin, [EVICT, w.pack({"keys": keys})])
            with self._lock:
                self.m["evictions_notified"] += len(keys)

    # ------------------------------------------------------------------ service thread

    def _serve(self):
        poller = zmq.Poller()
        poller.register(self._inbox, zmq.POLLIN)
        poller.register(self._stop_rx, zmq.POLLIN)
        try:
            while True:
                socks = dict(poller.poll())
                if self._stop_rx in socks:
                    self._stop_rx.recv()
                    break
                if self._inbox in socks:
                    while True:
                        try:
                            msg = self._inbox.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        try:
                            self._handle(msg)
                        except Exception as e:  # noqa: BLE001
                            self._errors.append(f"inbox: {e!r}")
        except zmq.ContextTerminated:
            pass
        finally:
            self._inbox.close(linger=0)
            self._stop_rx.close(linger=0)

    def _handle(self, msg):
        peer = msg[0].bytes.decode()
        kind = msg[1].bytes
        main = w.unpack(w.buffer_of(msg[2]))
        frames = [w.buffer_of(f) for f in msg[3:]]
        if kind == D:
            self._on_payload(peer, main, frames)
        elif kind == ACK:
            with self._lock:
                self._known.setdefault(peer, set()).update(main["keys"])
                self.m["acks_received"] += len(main["keys"])
        elif kind == EVICT:
            with self._lock:
                self._known.setdefault(peer, set()).difference_update(main["keys"])
        elif kind == FETCH:
            self._on_fetch(peer, main)
        elif kind == REPLY:
            self._on_reply(peer, main, frames)
        else:
            self._errors.append(f"unknown message type {kind!r} from {peer}")

    def _on_payload(self, peer, main, frames):
        with self._lock:
            if peer not in self._peers and main.get("ep"):
                self._peers[peer] = main["ep"]
            self.m["payloads_received"] += 1
            self.m["bytes_received"] += sum(len(f) for f in frames)
        resolved, missing, acks, evicted = {}, set(), [], []
        for node in w.shared_nodes(main["tree"], []):
            key = node["__s"]
            if node.get("ref"):
                buf = self._cache_get(key)
                if buf is None:
                    missing.add(key)
                else:
                    resolved[key] = buf
            else:
                buf = frames[node["f"]]
                resolved[key] = buf
                if self.sharing:
                    ok, ev = self._cache_put(key, buf, peer)
                    evicted += ev
                    if ok:
                        acks.append(key)
        # an item evicted while this very payload was being cached is still resolved above
        if acks:
            self._send(peer, [ACK, w.pack({"keys": acks})])
        if evicted:
            self._notify_evicted(evicted)
        if missing:
            with self._cond:
                self._pending[main["k"]] = [main, frames, resolved, missing]
            self._send(peer, [FETCH, w.pack({"req": main["k"], "keys": sorted(missing)})])
            with self._lock:
                self.m["fetches_sent"] += 1
            return
        self._complete(main, frames, resolved)

    def _complete(self, main, frames, resolved):
        now = time.monotonic()
        edge = f"{main['from']}->{main['to']}"
        with self._cond:
            self.latencies.setdefault(edge, []).append(now - main["t0"])
            self._ready[main["k"]] = (main, frames, resolved, now)
            self._cond.notify_all()

    def _on_fetch(self, peer, main):
        keys, frames, found, missing = main["keys"], [], [], []
        with self._lock:
            for key in keys:
                entry = self._registry.get(key)
                if entry is None:
                    missing.append(key)
                else:
                    found.append({"key": key, "d": w.digest(entry[0])})
                    frames.append(entry[0])
                    self._known.setdefault(peer, set()).discard(key)
            self.m["fetches_served"] += 1
            nbytes = sum(f.nbytes for f in frames)
            self.m["fetch_bytes_sent"] += nbytes
            edge = f"{self.stage}->{peer}"
            self.edge_bytes[edge] = self.edge_bytes.get(edge, 0) + nbytes
        self._send(peer, [REPLY, w.pack({"req": main["req"], "found": found, "missing": missing}), *frames])

    def _on_reply(self, peer, main, frames):
        with self._cond:
            entry = self._pending.get(main["req"])
        if entry is None:
            return  # cleaned up meanwhile
        pmain, pframes, resolved, missing = entry
        acks, evicted = [], []
        for item, buf in zip(main["found"], frames):
            if w.digest(buf) != item["d"]:
                self._errors.append(f"fetch reply for {item['key']}: digest mismatch")
                continue
            resolved[item["key"]] = buf
            missing.discard(item["key"])
            with self._lock:
                self.m["fetch_bytes_received"] += len(buf)
            if self.sharing:
                ok, ev = self._cache_put(item["key"], buf, peer)
                evicted += ev
                if ok:
                    acks.append(item["key"])
        if acks:
            self._send(peer, [ACK, w.pack({"keys": acks})])
        if evicted:
            self._notify_evicted(evicted)
        if main["missing"]:
            self._errors.append(f"payload {main['req']}: sender no longer holds {main['missing']}")
        with self._cond:
            self._pending.pop(main["req"], None)
        if not missing:
            self._complete(pmain, pframes, resolved)

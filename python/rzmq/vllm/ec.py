"""RzmqECConnector: vLLM's encoder-cache connector over rzmq.

An encoder instance (ec_producer) computes multimodal embeddings; prefill or prefill/decode
instances (ec_consumer) use them instead of running their own encoder. Embeddings are named by
vLLM's mm_hash (a hash of the media and the model), so the same picture is encoded once and
fetched once per host, whichever request or instance asks for it.

Producer, in the worker (`save_caches`): the embedding tensor stays where vLLM computed it; the
RzmqConnector store keeps a reference (no copy) under its mm_hash, bounded by `memory_pool_size`
and released after `buffer_ttl_seconds` unused, and an XPUB socket announces each one
(`+ mm_hash {shape, dtype, bytes}`) and each release (`- mm_hash`). A subscriber that joins gets
every live embedding announced again, so a consumer started later knows them too.

Consumer, in the scheduler: a SUB socket per producer keeps an index of announced embeddings,
so `has_cache_item` is a dictionary lookup, never a round trip. `ensure_cache_available` starts
the fetch of what a request needs and holds the request back until it is in the host cache (a
file in /dev/shm per embedding, shared by every vLLM process of the host): one transfer per
host, by RDMA READ from the producer's tensor into rzmq's registered receive buffer, one write
into the host cache. A fetch that fails (producer gone, embedding released) fails its requests
with a clear error through `take_unavailable_requests`; nothing waits forever.

Consumer, in the worker (`start_load_caches`): maps the host cache entry and hands vLLM a tensor
over it (no copy), moved to the accelerator where vLLM runs on one.

Config (`--ec-transfer-config`): `ec_ip`/`ec_port` are the producer's advertised address and
data port (announcements on ec_port + 1); `ec_connector_extra_config` takes
    producers           consumers: producer addresses, "host:port" (default [ec_ip:ec_port])
    bind_host           producers: address to listen on (default every interface)
    memory_pool_size    producers: bytes of embeddings held (default 4 GiB)
    buffer_ttl_seconds  producers: an embedding unused this long is released (default 600)
    fetch_timeout       consumers: seconds a fetch may take before its requests fail (default 30)
    announce_wait       consumers: seconds a request waits for its picture's announcement before
                        this instance encodes the picture itself (default 1; 0: at once)
    rdma                "auto" or "require", as RzmqConnector
    host_cache_dir, host_cache_bytes   the host cache (default /dev/shm/rzmq-ec-<uid>, 4 GiB)
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zmq

from vllm.distributed.ec_transfer.ec_connector.base import ECConnectorBase, ECConnectorMetadata, ECConnectorRole

from ..omni import payload
from ..omni.connector import RzmqConnector

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

logger = logging.getLogger("rzmq.vllm.ec")

STAGE = "ec"  # the RzmqConnector key suffix of every embedding (`mm_hash@ec_ec`)
ADD, DROP = b"+", b"-"


def _endpoint_parts(addr: str) -> tuple[str, int]:
    host, _, port = str(addr).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"producer address must be host:port, not {addr!r}")
    return host, int(port)


@dataclass
class RzmqECMetadata(ECConnectorMetadata):
    """The embeddings a consumer worker takes from the host cache this step."""

    loads: list[str] = field(default_factory=list)


class RzmqECConnector(ECConnectorBase):
    """vLLM EC connector moving encoder embeddings over rzmq (RDMA between rzmq hosts, else TCP)."""

    def __init__(self, vllm_config: VllmConfig, role: ECConnectorRole):
        super().__init__(vllm_config=vllm_config, role=role)
        cfg = vllm_config.ec_transfer_config
        extra = dict(cfg.ec_connector_extra_config or {})
        self._host = str(cfg.ec_ip)
        self._port = int(extra.get("port", cfg.ec_port))
        producers = extra.get("producers") or [f"{self._host}:{self._port}"]
        self._producers = [_endpoint_parts(p) for p in producers]
        self._fetch_timeout = float(extra.get("fetch_timeout", 30.0))
        self._peer_config = {
            "host": self._host,
            "bind_host": extra.get("bind_host", "0.0.0.0"),
            "rdma": extra.get("rdma", "auto"),
            "memory_pool_size": int(extra.get("memory_pool_size", 4 << 30)),
            "buffer_ttl_seconds": float(extra.get("buffer_ttl_seconds", 600.0)),
            "consumers": 0,  # any number of consumers: held until its TTL or the budget
            "get_timeout": self._fetch_timeout,
            "host_cache": True,
            "host_cache_dir": extra.get("host_cache_dir") or f"/dev/shm/rzmq-ec-{os.getuid()}",
            "host_cache_bytes": int(extra.get("host_cache_bytes", 4 << 30)),
        }
        self._peer: RzmqConnector | None = None
        self._announcer: _Announcer | None = None
        self._index: _Index | None = None
        self._loads: list[str] = []
        # saved/loaded: the workers' embeddings kept and put into vLLM's cache; fetched and
        # fetch_failures: the scheduler's transfers into the host cache (an embedding already on
        # this host, brought by another instance, is loaded without one)
        self.stats = {"saved": 0, "bytes_saved": 0, "loaded": 0, "bytes_loaded": 0, "fetched": 0,
                      "fetch_failures": 0}
        if role == ECConnectorRole.SCHEDULER:
            if self.is_consumer:
                self._peer = RzmqConnector({**self._peer_config, "role": "receiver"})
                self._index = _Index(self._peer, self._producers, self._fetch_timeout,
                                     float(extra.get("announce_wait", 1.0)), self.stats)
        elif self.is_producer and _first_tp_rank():
            self._peer = RzmqConnector({**self._peer_config, "role": "sender", "zmq_port": self._port})
            self._announcer = _Announcer(self._peer, self._peer_config["bind_host"], self._port + 1)
        elif self.is_consumer:
            self._peer = RzmqConnector({**self._peer_config, "role": "receiver"})
        logger.info("RzmqECConnector: %s %s producer=%s consumer=%s producers=%s", role.name,
                    self._peer.endpoint if self._peer else None, self.is_producer, self.is_consumer,
                    producers if self.is_consumer else None)

    # ------------------------------------------------------------------ worker

    def save_caches(self, encoder_cache: dict[str, Any], mm_hash: str, **kwargs) -> None:
        """Producer: keeps the embedding (a reference, no copy) and announces it."""
        if self._announcer is None or mm_hash in self._announcer.live:
            return
        t = encoder_cache[mm_hash].detach()
        if t.device.type != "cpu":
            t = t.cpu()  # a device tensor leaves through host memory (counted as a copy)
        t = t.contiguous()
        ok, size, _ = self._peer.put(STAGE, STAGE, mm_hash, payload.Shared(t, mm_hash))
        if not ok:
            logger.error("RzmqECConnector: embedding %s (%d bytes) not kept: the store is full (%s)", mm_hash,
                         t.numel() * t.element_size(), self._peer.store.stats())
            return
        self.stats["saved"] += 1
        self.stats["bytes_saved"] += size
        self._announcer.announce(mm_hash, {"shape": list(t.shape), "dtype": str(t.dtype), "bytes": size,
                                           "source": [self._host, self._port]})

    def start_load_caches(self, encoder_cache: dict[str, Any], **kwargs) -> None:
        """Consumer: puts this step's embeddings, mapped from the host cache, into vLLM's cache."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, RzmqECMetadata)
        for mm_hash in meta.loads:
            if mm_hash in encoder_cache:
                continue
            t = self._load(mm_hash)
            encoder_cache[mm_hash] = t
            self.stats["loaded"] += 1
            self.stats["bytes_loaded"] += t.numel() * t.element_size()

    def _load(self, mm_hash: str):
        got = None
        hit = self._peer.host_cache.open(mm_hash)
        if hit is not None:
            meta, views, mapping = hit
            got = payload.decode(meta, views, mapping, self._peer.deserialize_obj).to_tensor()
        else:  # released from the host cache since the scheduler fetched it: fetch again
            for host, port in self._producers:
                res = self._peer.get(STAGE, STAGE, mm_hash, {"source_host": host, "source_port": port,
                                                            "shared": True, "content": mm_hash})
                if res is not None:
                    got = res[0].to_tensor()
                    break
        if got is None:
            raise RuntimeError(f"RzmqECConnector: embedding {mm_hash} is neither in the host cache "
                               f"({self._peer.host_cache.dir}) nor at any producer")
        from vllm.platforms import current_platform

        device = current_platform.device_type
        return got if device == "cpu" else got.to(device)

    # ------------------------------------------------------------------ scheduler

    def has_cache_item(self, identifier: str) -> bool:
        """Whether a producer announced `identifier` (or this host holds it): no round trip."""
        if self._index is None:
            return False
        return self._index.knows(identifier)

    def ensure_cache_available(self, request: Request, num_computed_tokens: int) -> bool:
        """Holds `request` back until every announced embedding it still needs is on this host."""
        if self._index is None:
            return True
        ready = True
        hints = getattr(request, "ec_transfer_params", None) or {}
        for feature in request.mm_features:
            pos = feature.mm_position
            if pos.offset + pos.length <= num_computed_tokens:
                continue
            self._index.hint(feature.identifier, hints.get(feature.identifier))
            ready &= self._index.ensure(feature.identifier, request.request_id)
        return ready

    def take_unavailable_requests(self) -> set[str]:
        """Requests whose embeddings could not be fetched: vLLM fails them."""
        return self._index.take_failed() if self._index is not None else set()

    def update_state_after_alloc(self, request: Request, index: int) -> None:
        """Loads the item from the host cache in the next step when a producer made it."""
        mm_hash = request.mm_features[index].identifier
        if self._index is not None and self._index.local(mm_hash):
            self._loads.append(mm_hash)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> ECConnectorMetadata:
        """This step's loads (and resets them)."""
        meta = RzmqECMetadata(loads=self._loads)
        self._loads = []
        return meta

    def request_finished(self, request: Request) -> tuple[bool, dict[str, Any] | None]:
        """Producer: names where each of the request's embeddings can be fetched."""
        if not self.is_producer or not request.mm_features:
            return False, None
        where = f"{self._host}:{self._port}"
        return False, {f.identifier: {"metadata": {}, "rzmq": where} for f in request.mm_features}

    def health(self) -> dict[str, Any]:
        """This side's accounting: the connector's counts, the transport's counters and store."""
        out: dict[str, Any] = {"connector": dict(self.stats)}
        if self._index is not None:
            held = sum(map(len, self._index._waiting.values()))
            out["index"] = {"known": len(self._index.known), "held_requests": held}
        if self._announcer is not None:
            out["announced"] = len(self._announcer.live)
        if self._peer is not None:
            out["transport"] = self._peer.health()
        return out

    def shutdown(self) -> None:
        """Closes sockets and the store."""
        for part in (self._announcer, self._index, self._peer):
            if part is not None:
                part.close()
        self._announcer = self._index = self._peer = None


def _first_tp_rank() -> bool:
    """Whether this worker is tensor-parallel rank 0 (every rank encodes; one rank publishes)."""
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return get_tensor_model_parallel_rank() == 0
    except (AssertionError, ImportError, RuntimeError):  # no parallel state: a single worker
        return True


class _Announcer:
    """Producer: publishes `+`/`-` for each embedding and re-announces all to a new subscriber.

    An announcement leaves from the thread that saved the embedding, before save_caches()
    returns, so it is on the wire before the encoder instance answers its request (a consumer
    asked next must know it). The socket is shared with a thread that welcomes subscribers and
    sweeps released embeddings; a lock serialises every use of it."""

    POLL = 0.02  # seconds between the thread's looks at subscriptions

    def __init__(self, peer: RzmqConnector, bind_host: str, port: int):
        self.peer = peer
        self.live: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._pub = peer.ctx.socket(zmq.XPUB)
        for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.XPUB_VERBOSE, 1)):
            self._pub.setsockopt(opt, val)
        try:
            self._pub.bind(f"tcp://{bind_host}:{port}")
        except zmq.ZMQError as e:
            self._pub.close(0)
            raise RuntimeError(f"RzmqECConnector: cannot listen for subscribers on {bind_host}:{port}: {e}") from e
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rzmq-ec-announce", daemon=True)
        self._thread.start()

    @staticmethod
    def _frames(op: bytes, mm_hash: str, info: dict[str, Any]) -> list[bytes]:
        return [op, mm_hash.encode(), json.dumps(info).encode()]

    def announce(self, mm_hash: str, info: dict[str, Any]) -> None:
        with self._lock:
            self.live[mm_hash] = info
            self._pub.send_multipart(self._frames(ADD, mm_hash, info))

    def _run(self) -> None:
        next_sweep = time.monotonic() + 1.0
        while not self._stop.wait(self.POLL):
            with self._lock:
                joined = False
                while True:
                    try:
                        joined |= self._pub.recv(zmq.NOBLOCK)[:1] == b"\x01"
                    except zmq.Again:
                        break
                if joined:  # a new subscriber: everything live, again
                    for mm_hash, info in self.live.items():
                        self._pub.send_multipart(self._frames(ADD, mm_hash, info))
            if time.monotonic() >= next_sweep:  # released by TTL or budget: say so
                next_sweep = time.monotonic() + 1.0
                self.peer.reap_consumed()
                with self._lock:
                    gone = [h for h in self.live if self.peer.store.content_of(f"{h}@{STAGE}_{STAGE}") is None]
                    for h in gone:
                        del self.live[h]
                        self._pub.send_multipart(self._frames(DROP, h, {}))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        with self._lock:
            self._pub.close(0)


class _Index:
    """Consumer scheduler: what producers announced, and the fetches into the host cache."""

    HOLD_WAIT = 0.002  # seconds ensure() waits for a fetch in flight before saying "not yet"

    def __init__(self, peer: RzmqConnector, producers: list[tuple[str, int]], timeout: float,
                 announce_wait: float = 1.0, stats: dict[str, int] | None = None):
        self.peer = peer
        self.stats = stats if stats is not None else {"fetched": 0, "fetch_failures": 0}
        self.timeout = timeout
        self.announce_wait = announce_wait
        self._unknown: dict[str, float] = {}  # mm_hash -> when first asked for, not yet announced
        self.known: dict[str, tuple[str, int]] = {}
        self._sub = peer.ctx.socket(zmq.SUB)
        for opt, val in ((zmq.LINGER, 0), (zmq.RCVHWM, 0), (zmq.RECONNECT_IVL, 100)):
            self._sub.setsockopt(opt, val)
        self._sub.setsockopt(zmq.SUBSCRIBE, b"")
        self._producers = list(producers)
        for host, port in producers:
            self._sub.connect(f"tcp://{host}:{port + 1}")
        # One fetch thread: connections are per thread, so with one thread every fetch reuses
        # one connection per producer, opened here ahead of the first fetch rather than by it
        # (a second pool thread's first fetch used to open a second one, RDMA upgrade included).
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rzmq-ec-fetch")
        self._connected: set[tuple[str, int]] = set()
        for producer in producers:
            self._connect(producer)
        self._fetching: dict[str, Any] = {}  # mm_hash -> Future
        self._here: set[str] = set()  # fetched into the host cache by this process
        self._waiting: dict[str, set[str]] = {}  # mm_hash -> request ids held back for it
        self._failed: set[str] = set()

    def _connect(self, producer: tuple[str, int] | None) -> None:
        """Opens the fetch thread's connection to `producer` ahead of its first fetch (once)."""
        if producer is not None and producer not in self._connected:
            self._connected.add(producer)
            self._pool.submit(self.peer.connect_to, *producer)

    def _drain(self) -> None:
        while True:
            try:
                op, h, info = self._sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            except ValueError:
                continue  # not our message shape: ignored
            name = h.decode(errors="replace")
            if op == ADD:
                try:
                    host, port = json.loads(info)["source"]
                    self.known[name] = (str(host), int(port))
                    self._connect(self.known[name])
                except (ValueError, KeyError, TypeError):
                    self.known[name] = None  # fetched from the configured producers in turn
            elif op == DROP:
                self.known.pop(name, None)

    def hint(self, mm_hash: str, params: Any) -> None:
        """A producer named in the request's ec_transfer_params (a producer's request_finished)."""
        where = params.get("rzmq") if isinstance(params, dict) else None
        if where and mm_hash not in self.known:
            try:
                self.known[mm_hash] = _endpoint_parts(where)
                self._connect(self.known[mm_hash])
            except ValueError:
                logger.warning("RzmqECConnector: ignoring ec_transfer_params address %r", where)

    def knows(self, mm_hash: str) -> bool:
        self._drain()
        return mm_hash in self.known or self.local(mm_hash)

    def local(self, mm_hash: str) -> bool:
        return mm_hash in self._here or os.path.exists(self.peer.host_cache._path(mm_hash))

    def ensure(self, mm_hash: str, req_id: str) -> bool:
        """True when `mm_hash` needs nothing more: on this host, or not announced within
        `announce_wait` of first being asked for (then vLLM encodes it here)."""
        if self.local(mm_hash):
            return True
        if not self.knows(mm_hash):
            # The proxy sends a request here once the encoder has answered, and the encoder
            # announced before answering; but the announcement travels on its own connection
            # and may land a little after the request (seen: 107 ms on two busy cores). Hold
            # the request that long before computing the picture here.
            first = self._unknown.setdefault(mm_hash, time.monotonic())
            if time.monotonic() - first < self.announce_wait:
                return False
            self._unknown.pop(mm_hash, None)
            return True
        self._unknown.pop(mm_hash, None)
        fut = self._fetching.get(mm_hash)
        if fut is None:
            fut = self._fetching[mm_hash] = self._pool.submit(self._fetch, mm_hash)
        self._waiting.setdefault(mm_hash, set()).add(req_id)
        if not fut.done():
            # vLLM's engine loop calls this again at once while the request is held back; each
            # call spent waiting here (GIL released) lets the fetch thread run instead of queueing
            # for the GIL behind that loop.
            wait([fut], timeout=self.HOLD_WAIT)
            if not fut.done():
                return False
        del self._fetching[mm_hash]
        waiting = self._waiting.pop(mm_hash, set())
        if fut.result():
            self._here.add(mm_hash)
            return True
        self.stats["fetch_failures"] += 1
        self.known.pop(mm_hash, None)
        self._failed |= waiting
        return False

    def _fetch(self, mm_hash: str) -> bool:
        """Into the host cache from the first producer that has it."""
        for host, port in self._producer_order(mm_hash):
            got = self.peer.get(STAGE, STAGE, mm_hash, {"source_host": host, "source_port": port,
                                                        "shared": True, "content": mm_hash})
            if got is not None:
                self.stats["fetched"] += 1  # on the fetch thread; read by the scheduler's thread
                return True
        logger.error("RzmqECConnector: embedding %s could not be fetched from %s within %.0f s: the requests "
                     "that need it fail", mm_hash, self._producer_order(mm_hash), self.timeout)
        return False

    def _producer_order(self, mm_hash: str) -> list[tuple[str, int]]:
        """The producer that announced `mm_hash` first, then the others."""
        first = self.known.get(mm_hash)
        return ([first] if first else []) + [p for p in self._producers if p != first]

    def take_failed(self) -> set[str]:
        failed, self._failed = self._failed, set()
        return failed

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._sub.close(0)

"""RzmqConnector: vllm-omni's stage-data connector over rzmq sockets.

vllm-omni moves stage data (embeddings, hidden states, KV caches, codec codes) through an
`OmniConnectorBase`; this one moves it over ZeroMQ sockets served by rzmq (pyzmq on our
libzmq.so: `rzmq run`, `RZMQ_ACTIVATE=1` or LD_PRELOAD), so between two rzmq hosts a large
payload travels by RDMA rendezvous (the consumer's NIC reads the producer's buffer into a
registered receive-pool buffer, no copy in the library) and over TCP everywhere else.

The shape is Mooncake's transfer-engine connector's, without its one-receiver limit:
- put() keeps the payload in the producer's store (no copy for raw buffers) and returns
  metadata naming the producer (`source_host`, `source_port`, `data_size`, ...), which the
  orchestrator hands to the consumer stage;
- get() asks the producer for the key over a DEALER; the producer's service thread answers on
  its ROUTER with the payload frames, sent without copying;
- a key stays until its `consumers` deliveries are done, cleanup(), its TTL, or close(); keys
  naming the same content share one copy; shared payloads reach each host once (HostCache).

Finding the producer. Inside vllm-omni the stage runners locate a producer by port, not by
put()'s metadata: the orchestrator tells a consumer `source_host` and `source_port` computed by
vllm-omni's own rule (`compute_connector_zmq_port`: base `zmq_port`, default 50051, plus the
producing stage, plus 16 per local rank and 1024 per replica), and a consumer without that
(talker -> code2wav) has only the key. So a producer that knows its stage (vllm-omni puts
`stage_id` in every connector's config) listens on exactly that port, on every interface, and
a get() without metadata asks the same port of `sender_host` (default: this host). Outside
vllm-omni (no `stage_id`), `zmq_port` is the port itself and 0 picks a free one.

Config (a stage config's connector `extra`, see docs/OMNI_CONNECTOR.md):
    host                 address to advertise ("auto": this host's address)
    bind_host            address to listen on (default: every interface, "0.0.0.0")
    zmq_port             base port (vllm-omni's rule above; default 50051 inside vllm-omni, else 0)
    role                 "sender"/"auto" (listen at start), "receiver" (listen at the first put:
                         a middle stage's one connector both receives and sends)
    sender_host, sender_zmq_port   the producer asked when get() has no metadata
    memory_pool_size     producer byte budget (default 1 GiB)
    buffer_ttl_seconds   a key unused this long is released (default 300; 0: never)
    consumers            deliveries after which a key is released (default 1; 0: until cleanup/TTL)
    get_timeout          seconds a get() without deadline waits (default 30)
    rdma                 "auto" (move to RDMA where both ends can) or "require" (rdma:// endpoints)
    host_cache, host_cache_dir, host_cache_bytes   the host cache for shared payloads
    require_rzmq         refuse to start when pyzmq is not served by rzmq (default false: logged)
"""

from __future__ import annotations

import logging
import os
import socket as _socket
import threading
import time
import uuid
from typing import Any

import zmq

try:
    from vllm_omni.distributed.omni_connectors.connectors.base import OmniConnectorBase
    from vllm_omni.distributed.omni_connectors.utils.env import AUTO_HOST_VALUES, expand_env_int, expand_env_value
except ImportError:  # vLLM alone: its EC and KV connectors (rzmq.vllm) use this transport too
    from ._standalone import AUTO_HOST_VALUES, OmniConnectorBase, expand_env_int, expand_env_value

from .._activate import env_flag
from . import payload, wire
from .fetch import FetchError, FetchTimeout, FetchWorker, next_request_id
from .store import HostCache, Store

logger = logging.getLogger("rzmq.omni")

_STOP = b"stop"
_SEPARATORS = "@_-:/."
DEFAULT_BASE_PORT = 50051  # vllm-omni's default connector base port
# How long a get() that failed at once (no producer address, a refused endpoint) waits before it
# returns: vllm-omni's runners call get() again as soon as it returns, and a failure that repeats
# at once must not turn that into a busy loop (nor one log line per try).
FAILED_GET_PAUSE = 0.05


def _flag(value, default: bool, name: str) -> bool:
    """A connector setting's on/off value by rzmq's one rule (rzmq.env_flag); a bad value is refused."""
    flag = env_flag(value, default)
    if flag is None:
        raise ValueError(f"{name}: expected an on/off value (1/on/true/yes, 0/off/false/no), got {value!r}")
    return flag


def _local_address() -> str:
    try:
        return _socket.gethostbyname(_socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _serving_library() -> str | None:
    """The file pyzmq's zmq_* calls bind to here (None when pyzmq's backend is not loaded)."""
    from .. import _libcheck

    return _libcheck.bound_file()[0]


def served_by_rzmq() -> bool:
    """Whether pyzmq's zmq_* calls in this process go to rzmq rather than the wheel's bundled libzmq."""
    from .. import _libcheck

    path = _serving_library()
    return bool(path) and path != _libcheck.bundled_libzmq() and "pyzmq.libs" not in path


class PutTracker:
    """Done once a put's buffers are no longer referenced by the producer (see put_tracked)."""

    def __init__(self, store: Store, content):
        self._store = store
        self._content = content

    @property
    def done(self) -> bool:
        """True when the key is released and every send of its bytes has finished."""
        c = self._content
        if c is None:
            return True
        if self._store.holds(c) or c.sending:
            return False
        return all(t.done for t in c.trackers)

    def wait(self, timeout: float | None = None) -> None:
        """Waits until done; zmq.NotDone after `timeout` seconds."""
        end = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while not self.done:
            if end is not None and time.monotonic() >= end:
                raise zmq.NotDone
            time.sleep(0.001)


class RzmqConnector(OmniConnectorBase):
    """vllm-omni connector moving stage data over rzmq (RDMA between rzmq hosts, else TCP)."""

    supports_raw_data = True

    def __init__(self, config: dict[str, Any]):
        self._closed = True  # until built: close() (and __del__) must be safe on a half-built one
        self.config = dict(config or {})
        c = self.config
        host = str(expand_env_value(c.get("host") or "auto", strict=True, field_name="host"))
        self.host = _local_address() if host.lower() in AUTO_HOST_VALUES else host
        role = str(c.get("role", "auto")).lower()
        if role not in ("sender", "receiver", "auto"):
            raise ValueError(f"role must be sender, receiver or auto, not {role!r}")
        self.can_put = role != "receiver"
        self.rdma = str(c.get("rdma", "auto")).lower()
        if self.rdma not in ("auto", "require"):
            raise ValueError(f"rdma must be auto or require, not {self.rdma!r}")
        self.sender_host = c.get("sender_host")
        self.sender_zmq_port = c.get("sender_zmq_port")
        self.bind_host = str(c.get("bind_host") or "0.0.0.0")
        # The stage this connector produces for: its own (vllm-omni puts `stage_id` in every
        # connector's config); `from_stage` names the upstream stage of a receiver's edge.
        stage = c.get("stage_id", c.get("from_stage") if role == "sender" else None)
        self.stage_id = int(stage) if stage is not None and str(stage).lstrip("-").isdigit() else None
        default_base = DEFAULT_BASE_PORT if self.stage_id is not None else 0
        self.base_port = expand_env_int(c.get("zmq_port", default_base) or 0, "zmq_port")
        if not 0 <= self.base_port <= 65535:
            raise ValueError(f"zmq_port must be a port number, not {self.base_port}")
        if self.stage_id is not None and self.base_port == 0:
            logger.warning("RzmqConnector: zmq_port 0 inside vllm-omni: its runners find a producer by "
                           "port (base + stage), so a consumer without put()'s metadata cannot find this one")
        self._bind_lock = threading.Lock()
        self._warned: set[str] = set()
        self._sender_ranks: dict[int, tuple[str, int]] = {}
        # Inside vllm-omni its runners poll get() in a loop, one request after another on one
        # thread: a get waiting 30 s on a producer that is gone would hold up every other request.
        self.get_timeout = float(c.get("get_timeout", 30.0 if c.get("stage_id") is None else 5.0))
        self.library = _serving_library()
        self.on_rzmq = served_by_rzmq()
        if not self.on_rzmq:
            if _flag(c.get("require_rzmq"), False, "require_rzmq"):
                raise RuntimeError(
                    f"RzmqConnector: pyzmq is served by {self.library or 'an unknown libzmq'}, not rzmq; "
                    "start the process with `rzmq run`, RZMQ_ACTIVATE=1 or LD_PRELOAD of rzmq's libzmq.so")
            logger.warning("RzmqConnector: pyzmq is served by %s, not rzmq: stage data moves over plain "
                           "libzmq TCP", self.library)
        if self.rdma == "require":
            self._check_rdma_possible()
        self.store = Store(int(c.get("memory_pool_size", 1 << 30)), float(c.get("buffer_ttl_seconds", 300.0)),
                           int(c.get("consumers", 1)))
        self.host_cache = None
        if _flag(c.get("host_cache"), True, "host_cache"):
            directory = c.get("host_cache_dir") or f"/dev/shm/rzmq-omni-{os.getuid()}"
            self.host_cache = HostCache(directory, int(c.get("host_cache_bytes", 1 << 30)))
        self.producer_id = uuid.uuid4().hex
        self._lock = threading.Lock()  # metrics
        # The consumer's sockets live in one fetch worker thread (made at the first get), which
        # closes them itself: a socket is one thread's object.
        self._fetcher: FetchWorker | None = None
        self.m = {k: 0 for k in (
            "puts", "put_failures", "bytes_put", "gets", "get_hits", "get_misses", "get_timeouts",
            "get_errors", "bytes_received", "host_cache_hits", "host_cache_fills", "requests_served",
            "bytes_served", "requests_not_found", "bad_requests", "send_failures", "deliveries_from_host_cache")}
        self._in_flight: list[tuple[zmq.MessageTracker, int]] = []
        self.bytes_in_flight = 0
        self.ctx = zmq.Context()
        self._thread = None
        self.port = None
        self.endpoint = None
        self._closed = False
        if self.can_put:
            try:
                self._start_producer()
            except Exception:
                self.close()
                raise
        logger.info("RzmqConnector: role=%s stage=%s endpoint=%s rdma=%s library=%s", role, self.stage_id,
                    self.endpoint, self.rdma, self.library)

    def _producer_port(self, from_stage: int | None) -> int:
        """Where the producer of `from_stage` listens: vllm-omni's port rule, or zmq_port itself."""
        if self.base_port == 0 or from_stage is None:
            return self.base_port
        from vllm_omni.distributed.omni_connectors.utils.initialization import compute_connector_zmq_port
        from vllm_omni.distributed.omni_connectors.utils.local_rank import get_connector_local_rank

        return compute_connector_zmq_port(self.base_port, purpose="request_forwarding", from_stage=int(from_stage),
                                          local_rank=get_connector_local_rank(),
                                          replica_id=max(int(os.environ.get("VLLM_OMNI_REPLICA_ID", "0")), 0))

    def _start_producer(self) -> None:
        """Binds the producer's ROUTER and starts its service thread (once; all or nothing)."""
        with self._bind_lock:
            if self._thread is not None:
                return
            if self._closed:
                raise RuntimeError("RzmqConnector is closed")
            port = self._producer_port(self.stage_id)
            router = wake = None
            try:
                router = self.ctx.socket(zmq.ROUTER)
                for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.ROUTER_MANDATORY, 1)):
                    router.setsockopt(opt, val)
                try:
                    router.bind(f"tcp://{self.bind_host}:{port or '*'}")
                except zmq.ZMQError as e:
                    hint = (" (another producer of this stage on this host? vllm-omni gives each stage, rank "
                            "and replica its own port from the base zmq_port)" if e.errno == zmq.EADDRINUSE else "")
                    raise RuntimeError(f"RzmqConnector: cannot listen on tcp://{self.bind_host}:{port}: {e}{hint}") from e
                bound = router.getsockopt_string(zmq.LAST_ENDPOINT)
                wake_ep = f"inproc://rzmq-omni-{self.producer_id}"
                wake = self.ctx.socket(zmq.PULL)
                wake.bind(wake_ep)
                self._router, self._wake_rx, self._wake_ep = router, wake, wake_ep
                thread = threading.Thread(target=self._serve, name="rzmq-omni-producer", daemon=True)
                thread.start()
            except BaseException:
                for sock in (router, wake):
                    if sock is not None:
                        sock.close(0)
                raise
            self._thread = thread
            self.port = int(bound.rsplit(":", 1)[1])
            self.endpoint = f"tcp://{self.host}:{self.port}"
            logger.info("RzmqConnector: stage %s producer listening on %s (advertised %s)", self.stage_id, bound,
                        self.endpoint)

    def _check_rdma_possible(self) -> None:
        """`rdma: require` fails here, at construction, when this process cannot do RDMA: an
        rdma:// endpoint is refused at once then (EPROTONOSUPPORT), and every get() would fail."""
        if not self.on_rzmq:
            raise RuntimeError(
                "RzmqConnector: rdma: require, but pyzmq is served by "
                f"{self.library or 'an unknown libzmq'}, not rzmq: start the process with `rzmq run`, "
                "RZMQ_ACTIVATE=1 or LD_PRELOAD of rzmq's libzmq.so, or set rdma: auto")
        with zmq.Context() as ctx, ctx.socket(zmq.DEALER) as s:
            s.setsockopt(zmq.LINGER, 0)
            try:
                s.connect("rdma://127.0.0.1:9")
            except zmq.ZMQError as e:
                if e.errno != zmq.EPROTONOSUPPORT:
                    raise
                raise RuntimeError(
                    f"RzmqConnector: rdma: require, but this process cannot do RDMA ({e}): no RDMA device "
                    "was found and no provider was chosen. Set RZMQ_RDMA_PROVIDER=soft for rzmq's software "
                    "RDMA provider (tests, hosts without a NIC), RZMQ_RDMA_DEVICE to pick a device, or "
                    "rdma: auto to move the data over TCP where RDMA is not possible "
                    "(RZMQ_RDMA_LOG=1 says why RDMA is unavailable)") from e

    # ------------------------------------------------------------------ producer

    def put(self, from_stage: str, to_stage: str, put_key: str, data: Any) -> tuple[bool, int, dict[str, Any] | None]:
        """Leaves `data` for consumers; returns (ok, bytes, metadata for get())."""
        if self._closed:
            raise RuntimeError("RzmqConnector is closed")
        if self._thread is None:
            # A receiver that puts is a middle stage sending on (vllm-omni gives a stage one connector)
            try:
                self._start_producer()
            except (RuntimeError, zmq.ZMQError) as e:
                self._count("put_failures")
                self._warn_once("listen", "RzmqConnector: put(%s) cannot start the producer: %s", put_key, e)
                return False, 0, None
        key = self._make_key(put_key, from_stage, to_stage)
        try:
            parts, meta, content = payload.encode(data, self.serialize_obj)
        except Exception as e:  # noqa: BLE001
            self._count("put_failures")
            logger.error("RzmqConnector: put(%s): cannot encode %s: %s", key, type(data).__name__, e)
            return False, 0, None
        if meta["size"] == 0 and meta["kind"] != "parts":
            self._count("put_failures")
            logger.warning("RzmqConnector: put(%s): empty payload", key)
            return False, 0, None
        if not self.store.put(key, parts, meta, content):
            self._count("put_failures")
            logger.error("RzmqConnector: put(%s): %d bytes exceed the memory budget (%d held of %d)", key,
                         meta["size"], self.store.held, self.store.budget)
            return False, 0, None
        with self._lock:
            self.m["puts"] += 1
            self.m["bytes_put"] += meta["size"]
        shared = content is not None or self.store.consumers != 1
        out = {
            "source_host": self.host,
            "source_port": self.port,
            "data_size": meta["size"],
            "is_fast_path": meta["kind"] != "obj",
            "kind": meta["kind"],
            "producer": self.producer_id,
            "shared": shared,
        }
        if content is not None:
            out["content"] = content
        if meta.get("copies"):
            out["copies"] = meta["copies"]  # tensors whose bytes had to be copied (see payload.py)
        return True, meta["size"], out

    def put_tracked(self, from_stage: str, to_stage: str, put_key: str, data: Any):
        """put(), plus a `PutTracker` that is done once the producer no longer needs `data`: the
        key was released (consumed, cleaned up, expired) and every send of its bytes finished, so
        a caller may reuse the buffers it put (as pyzmq's MessageTracker for copy=False sends)."""
        ok, size, meta = self.put(from_stage, to_stage, put_key, data)
        content = self.store.content_of(self._make_key(put_key, from_stage, to_stage)) if ok else None
        return ok, size, meta, PutTracker(self.store, content)

    def cleanup(self, request_id: str, from_stage: str | None = None, to_stage: str | None = None) -> None:
        """Releases the producer's keys of `request_id`: the exact key, or every key that starts
        with it followed by a separator (`@_-:/.`)."""
        if (from_stage is None) != (to_stage is None):
            raise ValueError("cleanup() takes both from_stage and to_stage, or neither")
        if from_stage is not None:
            exact = self._make_key(request_id, from_stage, to_stage)
            self.store.cleanup(lambda k: k == exact)
            return
        self.store.cleanup(lambda k: k == request_id or (k.startswith(request_id) and len(k) > len(request_id)
                                                          and k[len(request_id)] in _SEPARATORS))

    def reap_consumed(self) -> None:
        """Releases keys past their TTL and forgets sends the library has finished with."""
        self.store.expire()
        self._reap_trackers()

    def _reap_trackers(self) -> None:
        with self._lock:
            keep = []
            for tracker, n in self._in_flight:
                if tracker.done:
                    self.bytes_in_flight -= n
                else:
                    keep.append((tracker, n))
            self._in_flight = keep

    def _serve(self) -> None:
        """The producer's service thread: answers requests on the ROUTER until close()."""
        router, wake = self._router, self._wake_rx
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(wake, zmq.POLLIN)
        last_sweep = time.monotonic()
        try:
            while True:
                events = dict(poller.poll(500))
                if wake in events and wake.recv() == _STOP:
                    break
                if router in events:
                    for _ in range(64):
                        try:
                            frames = router.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._answer(router, frames)
                now = time.monotonic()
                if now - last_sweep >= 1.0:
                    last_sweep = now
                    self.reap_consumed()
        except zmq.ContextTerminated:
            pass
        except Exception:  # noqa: BLE001
            logger.exception("RzmqConnector: producer thread failed")
        finally:
            router.close(0)
            wake.close(0)

    def _answer(self, router: zmq.Socket, frames: list[bytes]) -> None:
        identity, body = frames[0], frames[1:]
        try:
            req = wire.parse_request(body)
        except wire.ProtocolError as e:
            self._count("bad_requests")
            logger.warning("RzmqConnector: bad request: %s", e)
            self._reply(router, identity, wire.encode_reply(wire.BAD_REQUEST, wire.request_id_of(body),
                                                             {"error": str(e)}))
            return
        if req.op == wire.OP_PING:
            self._reply(router, identity, wire.encode_reply(wire.OK, req.req_id, {}))
            return
        if req.op == wire.OP_DONE:
            self._count("deliveries_from_host_cache")
            self.store.served(req.key)
            return
        content = self.store.lookup(req.key, req.content)
        if content is None:
            self._count("requests_not_found")
            self._reply(router, identity, wire.encode_reply(wire.NOT_FOUND, req.req_id, {"error": "unknown key"}))
            return
        meta = content.meta
        if req.op == wire.OP_QUERY:
            self._reply(router, identity, wire.encode_reply(wire.OK, req.req_id, {**meta, "query": True}))
            return
        head = wire.encode_reply(wire.OK, req.req_id, meta)
        # Counted (and the key released when this was its last expected delivery) before the reply
        # leaves, so a consumer that has the reply never sees stale counts; `content` keeps the
        # bytes alive until the library has sent them.
        with self._lock:
            self.m["requests_served"] += 1
            self.m["bytes_served"] += meta["size"]
        content.sending += 1
        self.store.served(req.key)
        tracker = self._reply(router, identity, head + list(content.parts), track=True)
        if tracker is not None:
            content.trackers = [t for t in content.trackers if not t.done] + [tracker]
        content.sending -= 1
        if tracker is not None:
            with self._lock:
                self.bytes_in_flight += meta["size"]
                self._in_flight.append((tracker, meta["size"]))

    def _reply(self, router, identity, frames, track=False):
        try:
            return router.send_multipart([identity, *frames], copy=False, track=track)
        except zmq.ZMQError as e:  # the consumer went away (ROUTER_MANDATORY)
            self._count("send_failures")
            logger.warning("RzmqConnector: reply not sent: %s", e)
            return None

    # ------------------------------------------------------------------ consumer

    def get(self, from_stage: str, to_stage: str, get_key: str,
            metadata: dict[str, Any] | None = None) -> tuple[Any, int] | None:
        """The payload of `get_key` and its size, or None when it is not there in `get_timeout`."""
        return self.get_with_deadline(from_stage, to_stage, get_key, metadata,
                                      deadline=time.monotonic() + self.get_timeout)

    def get_with_deadline(self, from_stage: str, to_stage: str, get_key: str,
                          metadata: dict[str, Any] | None = None, *, deadline: float) -> tuple[Any, int] | None:
        """As get(), waiting no later than `deadline` (time.monotonic()); None on timeout."""
        if self._closed:
            raise RuntimeError("RzmqConnector is closed")
        key = self._make_key(get_key, from_stage, to_stage)
        self._count("gets")
        source = self._source(metadata, from_stage)
        if source is None:
            self._count("get_errors")
            self._warn_once("no-source", "RzmqConnector: get(%s) has no producer address: no metadata, no "
                            "sender_host/sender_zmq_port and no stage to derive the port from", key)
            self._pause_failed_get(deadline)
            return None
        meta = metadata or {}
        content = meta.get("content")
        shared = bool(meta.get("shared")) and self.host_cache is not None
        if shared:
            cid = content or f"{meta.get('producer') or source}/{key}"
            return self._get_shared(source, key, content, cid, deadline)
        got = self._fetch(source, key, content, deadline)
        if got is None:
            return None
        pmeta, parts, frames = got
        return self._deliver(pmeta, [p.buffer for p in parts], frames)

    def _get_shared(self, source, key, content, cid, deadline):
        cache = self.host_cache
        try:
            hit = cache.open(cid)
            lock = cache.lock(cid, deadline) if hit is None else None
        except OSError as e:  # the cache directory is not usable here: fetch for this process alone
            self._warn_once("host-cache", "RzmqConnector: host cache %s unusable (%s); fetching directly",
                            cache.dir, e)
            got = self._fetch(source, key, content, deadline)
            return None if got is None else self._deliver(got[0], [p.buffer for p in got[1]], got[2])
        if hit is None:
            if lock is None:
                self._count("get_timeouts")
                return None
            try:
                hit = cache.open(cid)  # another process of this host may have fetched it meanwhile
                if hit is None:
                    got = self._fetch(source, key, content, deadline)
                    if got is None:
                        return None
                    pmeta, parts, _frames = got
                    try:
                        cache.store(cid, pmeta, [p.buffer for p in parts])
                        self._count("host_cache_fills")
                        hit = cache.open(cid)
                    except OSError as e:
                        logger.warning("RzmqConnector: host cache write failed (%s); delivering directly", e)
                    if hit is None:
                        return self._deliver(pmeta, [p.buffer for p in parts], _frames)
                else:
                    self._count("host_cache_hits")
                    self._tell_done(source, key)
            finally:
                cache.unlock(lock)
        else:
            self._count("host_cache_hits")
            self._tell_done(source, key)
        meta, views, mapping = hit
        return self._deliver(meta, views, mapping)

    def _tell_done(self, endpoint: str, key: str) -> None:
        """Lets the producer count a delivery this host served from its cache (no reply)."""
        try:
            self.fetcher.send(endpoint, wire.encode_request(wire.OP_DONE, next_request_id(), key))
        except RuntimeError as e:
            logger.debug("RzmqConnector: done(%s) not sent: %s", key, e)

    def _deliver(self, meta, views, keep):
        try:
            obj = payload.decode(meta, views, keep, self.deserialize_obj)
        except Exception as e:  # noqa: BLE001
            self._count("get_errors")
            logger.error("RzmqConnector: cannot decode a %s payload: %s", meta.get("kind"), e)
            return None
        return obj, meta["size"]

    def _source(self, metadata, from_stage=None) -> str | None:
        """The producer's endpoint: put()'s metadata (or vllm-omni's sender info), a sender rank, the
        configured sender, or else the port vllm-omni's rule gives the producing stage, on
        `sender_host` (default: this host)."""
        rank = metadata.get("sender_rank") if metadata else None
        sender_host = self.sender_host if self.sender_host and str(self.sender_host).lower() != "auto" else None
        if metadata and metadata.get("source_host") and metadata.get("source_port"):
            host, port = metadata["source_host"], metadata["source_port"]
        elif rank is not None and int(rank) in self._sender_ranks:
            host, port = self._sender_ranks[int(rank)]
        elif sender_host and self.sender_zmq_port:
            host, port = sender_host, self.sender_zmq_port
        elif self.base_port and from_stage is not None and str(from_stage).isdigit():
            host, port = sender_host or "127.0.0.1", self._producer_port(int(from_stage))
        else:
            return None
        scheme = "rdma" if self.rdma == "require" else "tcp"
        return f"{scheme}://{host}:{int(port)}"

    def _warn_once(self, what: str, msg: str, *args) -> None:
        """Logs a failure the first time it happens (a get() retried in a loop must not flood the log)."""
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(msg + " (logged once)", *args)

    @staticmethod
    def _pause_failed_get(deadline: float) -> None:
        """A get() that failed at once returns only after a short pause (FAILED_GET_PAUSE)."""
        time.sleep(max(0.0, min(FAILED_GET_PAUSE, deadline - time.monotonic())))

    @property
    def fetcher(self) -> FetchWorker:
        """The fetch worker that owns this consumer's connections (started at first use)."""
        f = self._fetcher
        if f is None:
            with self._bind_lock:
                if self._closed:
                    raise RuntimeError("RzmqConnector is closed")
                if self._fetcher is None:
                    self._fetcher = FetchWorker(self.ctx, name="rzmq-omni-fetch")
                f = self._fetcher
        return f

    def connect_to(self, source_host: str, source_port: int) -> None:
        """Opens the connection to a producer now, so that the first get() does not wait for the
        TCP connection and its RDMA upgrade (both go on in the background, with reconnection
        until the producer listens)."""
        endpoint = self._source({"source_host": source_host, "source_port": source_port})
        if endpoint is not None and not self._closed:
            self.fetcher.connect(endpoint)

    def fetch_async(self, endpoint: str, key: str, content: str | None, deadline: float, op: int = wire.OP_GET):
        """Starts the request for `key` at the producer `endpoint` (a `_source()` endpoint); returns
        the fetch worker's `Fetch` (a Future of its `Reply`). A caller that stops waiting calls
        `abandon()`: a reply that comes later is released on arrival."""
        req_id = next_request_id()
        return self.fetcher.fetch(endpoint, wire.encode_request(op, req_id, key, content), req_id, deadline)

    @staticmethod
    def wait_fetch(fut, deadline: float):
        """The Reply of `fut`, or the exception it failed with, never waiting long past `deadline`."""
        try:
            # the worker fails the fetch at its deadline; the grace only covers a worker gone
            return fut.result(timeout=max(0.0, deadline - time.monotonic()) + 2.0)
        except BaseException as e:  # noqa: BLE001
            fut.abandon()
            return e

    def _fetch(self, endpoint, key, content, deadline):
        """(meta, parts, frames) from the producer at `endpoint`, or None (counted)."""
        try:
            fut = self.fetch_async(endpoint, key, content, deadline)
        except RuntimeError as e:  # closed meanwhile
            self._count("get_errors")
            logger.debug("RzmqConnector: get(%s): %s", key, e)
            return None
        return self.take_reply(self.wait_fetch(fut, deadline), endpoint, key, deadline)

    def take_reply(self, rep, endpoint: str, key: str, deadline: float | None = None):
        """Counts a fetch's outcome (a Reply, or the exception it failed with); (meta, parts,
        frames) when it brought the payload, else None."""
        if isinstance(rep, BaseException):
            if isinstance(rep, (FetchTimeout, TimeoutError)):
                self._count("get_timeouts")
            else:
                self._count("get_errors")
                self._warn_once(f"fetch-{endpoint}", "RzmqConnector: get(%s) from %s failed: %s", key, endpoint, rep)
                if isinstance(rep, FetchError) and deadline is not None:
                    self._pause_failed_get(deadline)
            return None
        if rep.status == wire.NOT_FOUND:
            self._count("get_misses")
            return None
        if rep.status != wire.OK or "kind" not in rep.meta:
            self._count("get_errors")
            logger.error("RzmqConnector: %s answered %s: %s", endpoint, rep.status, rep.meta.get("error"))
            return None
        with self._lock:
            self.m["get_hits"] += 1
            self.m["bytes_received"] += rep.meta["size"]
        return rep.meta, rep.parts, rep.frames

    def decode(self, meta, parts, frames):
        """The object a get() returns for a payload reply's (meta, parts, frames), or None (counted)."""
        got = self._deliver(meta, [p.buffer for p in parts], frames)
        return None if got is None else got[0]

    def query(self, metadata: dict[str, Any], key: str, timeout: float = 5.0) -> dict[str, Any] | None:
        """The producer's description of `key` (size, kind) without the payload, or None."""
        endpoint = self._source(metadata)
        if endpoint is None:
            return None
        deadline = time.monotonic() + timeout
        rep = self.wait_fetch(self.fetch_async(endpoint, key, None, deadline, wire.OP_QUERY), deadline)
        if isinstance(rep, BaseException):
            return None
        return rep.meta if rep.status == wire.OK else None

    def update_sender_info(self, sender_host: str, sender_zmq_port: int, sender_rank: int | None = None) -> None:
        """The producer a get() without metadata asks (vllm-omni's KV transfer manager calls this);
        per-rank endpoints go by `sender_rank`."""
        if sender_rank is None:
            self.sender_host, self.sender_zmq_port = sender_host, sender_zmq_port
        else:
            self._sender_ranks[int(sender_rank)] = (sender_host, sender_zmq_port)

    def get_connection_info(self) -> dict[str, Any]:
        """Where consumers reach this producer."""
        return {"host": self.host, "zmq_port": self.port, "can_put": self.can_put, "endpoint": self.endpoint}

    def abandon_get(self, get_key: str) -> None:
        """Nothing to retire: a get holds no claim at the producer, and a reply that arrives for an
        abandoned request is dropped by its request id."""

    # ------------------------------------------------------------------ both

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.m[name] += n

    def health(self) -> dict[str, Any]:
        """Status, counters, bytes held and in flight."""
        if self._closed:
            return {"status": "unhealthy", "error": "connector is closed"}
        self._reap_trackers()
        with self._lock:
            counters = dict(self.m)
            in_flight = self.bytes_in_flight
            sends = len(self._in_flight)
        return {
            "status": "healthy",
            "endpoint": self.endpoint,
            "host": self.host,
            "rdma": self.rdma,
            "library": self.library,
            "on_rzmq": self.on_rzmq,
            "bytes_in_flight": in_flight,
            "sends_in_flight": sends,
            **counters,
            **self.store.stats(),
        }

    def close(self) -> None:
        """Stops the producer thread and the fetch worker (each closes its own sockets), releases
        every key and ends the context (safe twice). Never blocks forever: a thread still busy
        after CLOSE_WAIT seconds is logged and left to end with the process, and so is the context."""
        if getattr(self, "_closed", True):
            return
        with self._bind_lock:  # a first put() may be starting the producer right now
            self._closed = True
        ended = True
        if self._thread is not None:
            try:
                with self.ctx.socket(zmq.PUSH) as s:
                    s.setsockopt(zmq.LINGER, 1000)
                    s.connect(self._wake_ep)
                    s.send(_STOP)
            except zmq.ZMQError:
                pass
            self._thread.join(self.CLOSE_WAIT)
            if self._thread.is_alive():
                ended = False
                logger.warning("RzmqConnector: the producer thread is still busy %.0f s after close()", self.CLOSE_WAIT)
        if self._fetcher is not None:
            ended &= self._fetcher.close(self.CLOSE_WAIT)
        self.store.close()
        if not ended:
            return  # its sockets are still open: term() would wait for them
        # term() waits for every socket of the context: one made by a caller on it and never
        # closed would hold it, so it runs beside, for CLOSE_WAIT seconds at most.
        t = threading.Thread(target=self._term, name="rzmq-omni-term", daemon=True)
        t.start()
        t.join(self.CLOSE_WAIT)
        if t.is_alive():
            logger.warning("RzmqConnector: the context still has open sockets %.0f s after close()", self.CLOSE_WAIT)

    CLOSE_WAIT = 5.0  # seconds close() waits for each thread it stops

    def _term(self) -> None:
        try:
            self.ctx.term()
        except zmq.ZMQError:
            pass

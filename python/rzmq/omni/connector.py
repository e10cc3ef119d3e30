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
- a consumer subscribes to the edge it reads; from then on the producer pushes each payload of
  that edge to it the moment put() stores it (push.py: a bounded inbox, credits as in rzmq's
  RDMA ring), and get() is a lookup in the consumer's inbox. Where push cannot serve (shared
  payloads, an edge with several consumers, a producer that does not push), get() asks the
  producer for the key over a DEALER and the producer's service thread answers on its ROUTER;
  either way the payload frames are sent without copying (over RDMA, the consumer's READ starts
  when the push arrives);
- a key stays until its `consumers` deliveries are done, cleanup(), its TTL, or close(); keys
  naming the same content share one copy; shared payloads reach each host once (HostCache).

Finding the producer. Inside vllm-omni the stage runners locate a producer by port, not by
put()'s metadata: the orchestrator tells a consumer `source_host` and `source_port` computed by
vllm-omni's own rule (`compute_connector_zmq_port`: base `zmq_port`, default 50051, plus the
producing stage, plus 16 per local rank and 1024 per replica), and a consumer without that
(talker -> code2wav) has only the key. So a producer that knows its stage (vllm-omni puts
`stage_id` in every connector's config) listens on exactly that port, on every interface, and
a get() without metadata asks the same port of `sender_host` (default: this host). Outside
vllm-omni (no `stage_id`), `zmq_port` is the port itself and 0 picks a free one; inside
vllm-omni 0 cannot work (no consumer could find the producer) and is refused at construction.

Config (a stage config's connector `extra`, see docs/OMNI_CONNECTOR.md):
    host                 address to advertise ("auto": this host's address)
    bind_host            address to listen on (default: every interface, "0.0.0.0")
    zmq_port             base port (vllm-omni's rule above; default 50051 inside vllm-omni, else 0)
    role                 "sender"/"auto" (listen at start; inside vllm-omni at the first put),
                         "receiver" (listen at the first put: a middle stage's one connector both
                         receives and sends)
    sender_host, sender_zmq_port   the producer asked when get() has no metadata
    memory_pool_size     producer byte budget (default 1 GiB)
    buffer_ttl_seconds   a key unused this long is released (default 300; 0: never)
    consumers            deliveries after which a key is released (default 1; 0: until cleanup/TTL)
    get_timeout          seconds a get() without deadline waits (default 30; 5 inside vllm-omni,
                         where it bounds a pull or a first subscription, and a pushed payload that
                         is not there yet gives None at once: vllm-omni's receive loops poll get())
    push                 producers push to a subscribed consumer (default true); false: pull only
    inbox_bytes          credit a consumer grants each producer: its inbox bound (default 256 MiB)
    put_timeout          seconds a put() waits for room in memory_pool_size (default 30; 0: refuse)
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
from . import payload, push, wire
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
# A consumer re-sends its subscriptions this often (a producer that restarted learns them again),
# and stops trusting push from a producer it has not heard from for SUBSCRIPTION_SILENCE.
RESUBSCRIBE_INTERVAL = 1.0
SUBSCRIPTION_SILENCE = 3.5
DEFAULT_INBOX_BYTES = 256 << 20


def _drain(recv, handle, limit: int) -> bool:
    """Takes up to `limit` messages that wait (`recv` raises zmq.Again when none does) and hands
    each to `handle`; True when `handle` asked to stop (the rest stay queued)."""
    for _ in range(limit):
        try:
            msg = recv()
        except zmq.Again:
            return False
        if handle(msg):
            return True
    return False


def _drain_ready(sock, recv, handle, limit: int) -> bool:
    """Takes up to `limit` messages while `sock` reports input (ZMQ_EVENTS, which also re-arms
    its fd) and hands each to `handle`; True when more may wait (the limit was reached)."""
    for _ in range(limit):
        if not sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            return False
        try:
            msg = recv()
        except zmq.Again:
            return False
        handle(msg)
    return True


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


class _Subscription:
    """A consumer's subscription to one producer endpoint: the edges it reads from it, whether
    each is pushed, and when the producer was last heard (a silent producer is pulled from)."""

    __slots__ = ("endpoint", "edges", "push", "producer", "heard")

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.edges: set[str] = set()
        self.push: dict[str, bool] = {}
        self.producer = None
        self.heard = 0.0

    def pushing(self, edge: str) -> bool:
        """Whether payloads of `edge` arrive unasked (subscribed, answered, heard from lately)."""
        return bool(self.push.get(edge)) and time.monotonic() - self.heard < SUBSCRIPTION_SILENCE


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
            # vllm-omni's runners find a producer by its port rule (base + stage, rank, replica) and
            # code2wav's get() has no metadata at all: with a free port nobody could find this one
            # (the real pipeline waited for ever, 0 of 6 requests done).
            raise ValueError(
                f"RzmqConnector: zmq_port 0 cannot work inside vllm-omni (stage {self.stage_id}): its "
                "stages find a producer by vllm-omni's port rule (zmq_port + stage id, + 16 per local rank, "
                "+ 1024 per replica), not by an ephemeral port. Set zmq_port to a base port whose range is "
                f"free on every host, e.g. zmq_port: {DEFAULT_BASE_PORT} (vllm-omni's default), or leave it out")
        self._bind_lock = threading.Lock()
        self._warned: set[str] = set()
        self._sender_ranks: dict[int, tuple[str, int]] = {}
        # Inside vllm-omni its runners poll get() in a loop, one request after another on one
        # thread: a get waiting 30 s on a producer that is gone would hold up every other request.
        self.get_timeout = float(c.get("get_timeout", 30.0 if c.get("stage_id") is None else 5.0))
        self.push = _flag(c.get("push"), True, "push")
        inbox_bytes = int(c.get("inbox_bytes", DEFAULT_INBOX_BYTES))
        if inbox_bytes <= 0:
            raise ValueError(f"inbox_bytes must be positive, not {inbox_bytes}")
        self.put_timeout = float(c.get("put_timeout", 30.0))
        if self.put_timeout < 0:
            raise ValueError(f"put_timeout must be 0 or more seconds, not {self.put_timeout}")
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
        self.m.update({k: 0 for k in (
            "pushes", "bytes_pushed", "push_stalls", "push_send_failures", "subscribers", "gets_from_inbox",
            "pulls", "subscriptions", "subscriptions_refused")})
        self._in_flight: list[tuple[zmq.MessageTracker, int]] = []
        self.bytes_in_flight = 0
        # Consumer side: what producers pushed here, and the thread that receives it (started by
        # the first subscription). Producer side: the consumers that subscribed (service thread).
        self.inbox = push.Inbox(inbox_bytes, float(c.get("buffer_ttl_seconds", 300.0)))
        self._subs: dict[str, _Subscription] = {}
        self._sub_cond = threading.Condition()  # a first get waits here for its subscription's answer
        self._inbox_thread = None
        self._inbox_ep = None
        self._routes = push.Routes()
        # The producer's ROUTER and its routes are used under this lock by the service thread
        # and by put(), which pushes on the putting thread (no hop to the service thread, which
        # in a busy stage process may wait long for the GIL and the CPU); the receiving
        # thread's subscription sockets likewise under _socks_lock, which get() takes to bring
        # in what arrived (_pump).
        self._router_lock = threading.Lock()
        self._socks_lock = threading.Lock()
        self._pump = None
        self._last_get = threading.local()
        self._cmd_lock = threading.Lock()
        self._cmd_socks: dict[str, zmq.Socket] = {}
        self.ctx = zmq.Context()
        self._thread = None
        self.port = None
        self.endpoint = None
        self._closed = False
        # Inside vllm-omni a stage may hold two connectors of its edge in two processes (with
        # async_chunk the scheduler's chunk adapter puts and gets, and the model runner makes one
        # too): the one that puts listens, at its first put, on the stage's port.
        if self.can_put and self.stage_id is None:
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
                # ROUTER_HANDOVER: a subscribed consumer that reconnects (same routing id) takes its
                # subscription along instead of being refused as a duplicate
                for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.ROUTER_MANDATORY, 1),
                                 (zmq.ROUTER_HANDOVER, 1)):
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
        return self._put(from_stage, to_stage, put_key, data)[:3]

    def _put(self, from_stage: str, to_stage: str, put_key: str, data: Any):
        """put(), plus the stored `Content` (None when the put failed). It is taken before the
        producer's thread is woken: a push can be sent, taken and released before put() returns."""
        if self._closed:
            raise RuntimeError("RzmqConnector is closed")
        if self._thread is None:
            # A receiver that puts is a middle stage sending on (vllm-omni gives a stage one connector)
            try:
                self._start_producer()
            except (RuntimeError, zmq.ZMQError) as e:
                self._count("put_failures")
                self._warn_once("listen", "RzmqConnector: put(%s) cannot start the producer: %s", put_key, e)
                return False, 0, None, None
        key = self._make_key(put_key, from_stage, to_stage)
        try:
            parts, meta, content = payload.encode(data, self.serialize_obj)
        except Exception as e:  # noqa: BLE001
            self._count("put_failures")
            logger.error("RzmqConnector: put(%s): cannot encode %s: %s", key, type(data).__name__, e)
            return False, 0, None, None
        # Over the budget a put waits (put_timeout) for consumers to take what they were sent or
        # pushed: that is the back-pressure a slow consumer puts on its producer.
        stored = self.store.put(key, parts, meta, content, wait=self.put_timeout)
        if stored is None:
            self._count("put_failures")
            logger.error("RzmqConnector: put(%s): %d bytes do not fit the memory budget within put_timeout "
                         "(%d held of %d): the consumers are not taking what was put", key,
                         meta["size"], self.store.held, self.store.budget)
            return False, 0, None, None
        with self._lock:
            self.m["puts"] += 1
            self.m["bytes_put"] += meta["size"]
        if self._routes.subs and content is None and self.store.consumers == 1:
            self._push_now(key)
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
        return True, meta["size"], out, stored

    def put_tracked(self, from_stage: str, to_stage: str, put_key: str, data: Any):
        """put(), plus a `PutTracker` that is done once the producer no longer needs `data`: the
        key was released (consumed, cleaned up, expired) and every send of its bytes finished, so
        a caller may reuse the buffers it put (as pyzmq's MessageTracker for copy=False sends)."""
        ok, size, meta, content = self._put(from_stage, to_stage, put_key, data)
        return ok, size, meta, PutTracker(self.store, content)

    def cleanup(self, request_id: str, from_stage: str | None = None, to_stage: str | None = None) -> None:
        """Releases the producer's keys of `request_id`: the exact key, or every key that starts
        with it followed by a separator (`@_-:/.`)."""
        if (from_stage is None) != (to_stage is None):
            raise ValueError("cleanup() takes both from_stage and to_stage, or neither")
        if from_stage is not None:
            exact = self._make_key(request_id, from_stage, to_stage)
            match = lambda k: k == exact  # noqa: E731
        else:
            match = lambda k: k == request_id or (  # noqa: E731
                k.startswith(request_id) and len(k) > len(request_id) and k[len(request_id)] in _SEPARATORS)
        self.store.cleanup(match)
        if self.inbox.drop(match):  # pushed here for a request that ended: its credit goes back
            for source, n in self.inbox.owed().items():
                self._inbox_command(b"c" + f"{self.inbox.flush_credit(source)} {source}".encode())

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

    def _push_now(self, key: str) -> None:
        """Pushes a fresh put to its edge's subscriber from the putting thread. Using the ROUTER
        may take the wake-up of a request that arrived meanwhile from its fd (ZMQ_FD tells of
        new events only): then the service thread is told to look again."""
        with self._router_lock:
            router = getattr(self, "_router", None)
            if router is None or router.closed:
                return
            try:
                self._route_put(router, key)
                again = router.getsockopt(zmq.EVENTS) & zmq.POLLIN
            except zmq.ZMQError as e:
                logger.debug("RzmqConnector: push of %s from put(): %s", key, e)
                return
        if again:
            self._wake_producer(b"r")

    def _wake_producer(self, msg: bytes) -> None:
        """Hands `msg` to the producer's service thread (b"r": look at the ROUTER again; _STOP)."""
        self._command(self._wake_ep, msg)

    def _command(self, endpoint: str | None, msg: bytes) -> None:
        """Sends `msg` to one of this connector's own threads on its inproc `endpoint`. One PUSH
        per endpoint, used under a lock: put() and get() may run on any thread, and a socket must
        never be used by two at once."""
        if endpoint is None:
            return
        with self._cmd_lock:
            if self._closed:
                return
            sock = self._cmd_socks.get(endpoint)
            try:
                if sock is None:
                    sock = self.ctx.socket(zmq.PUSH)
                    sock.setsockopt(zmq.LINGER, 0)
                    sock.connect(endpoint)
                    self._cmd_socks[endpoint] = sock
                sock.send(msg)
            except zmq.ZMQError as e:
                logger.debug("RzmqConnector: command to %s not sent: %s", endpoint, e)

    def _serve(self) -> None:
        """The producer's service thread: answers requests on the ROUTER and pushes to subscribed
        consumers until close()."""
        router, wake = self._router, self._wake_rx
        # The ROUTER is waited on through its fd, never polled as a socket: put() uses it too
        # (under _router_lock), and a socket is polled by one thread at a time.
        router_fd = router.getsockopt(zmq.FD)
        poller = zmq.Poller()
        poller.register(router_fd, zmq.POLLIN)
        poller.register(wake, zmq.POLLIN)
        last_sweep = time.monotonic()

        def on_command(msg: bytes) -> bool:
            return msg == _STOP  # else b"r": look at the ROUTER again

        try:
            while True:
                with self._router_lock:
                    more = _drain_ready(router, lambda: router.recv_multipart(zmq.NOBLOCK),
                                        lambda f: self._answer(router, f), 64)
                events = dict(poller.poll(0 if more else 500))
                if wake in events and _drain(lambda: wake.recv(zmq.NOBLOCK), on_command, 256):
                    break
                now = time.monotonic()
                if now - last_sweep >= 1.0:
                    last_sweep = now
                    self.reap_consumed()
        except zmq.ContextTerminated:
            pass
        except Exception:  # noqa: BLE001
            logger.exception("RzmqConnector: producer thread failed")
        finally:
            with self._router_lock:
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
        if req.op == wire.OP_SUBSCRIBE:
            self._subscribe(router, identity, req)
            return
        if req.op == wire.OP_CREDIT:
            sub = self._routes.credit(identity, wire.credit_bytes(req.content))
            if sub is not None:
                self._flush(router, sub)
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

    # -- push (push.py): payloads go to the consumer that subscribed to their edge

    def _subscribe(self, router, identity: bytes, req: wire.Request) -> None:
        """A consumer asks for the payloads of an edge (again, as a heartbeat, once subscribed)."""
        edge = req.key
        if not self.push or self.store.consumers != 1:  # several deliveries per key: pulled
            self._reply(router, identity, wire.encode_reply(wire.OK, req.req_id, {
                "push": False, "known": False, "producer": self.producer_id}))
            return
        known, pushes, told = self._routes.subscribe(identity, edge, wire.credit_bytes(req.content))
        with self._lock:
            self.m["subscribers"] = len(self._routes.subs)
        for other in told:  # a second consumer of this edge: nobody can be pushed to any more
            self._reply(router, other, wire.encode_reply(wire.PUSH_OFF, 0, {"edge": edge}))
        sub = self._routes.target(edge)
        if sub is not None and sub.identity == identity and not known:
            # What was put before the consumer subscribed goes first, in put order, and ahead of
            # the answer on the same connection: a consumer that has the answer has them too
            # (or they are queued for credit), so its get() never needs to ask.
            for key in self.store.pushable("@" + edge):
                self._routes.enqueue(sub, key)
            self._flush(router, sub)
        self._reply(router, identity, wire.encode_reply(wire.OK, req.req_id, {
            "push": pushes, "known": known, "producer": self.producer_id}))

    def _route_put(self, router, key: str) -> None:
        """A put on an edge that may have a subscriber: queue the key for it and send what fits."""
        sub = self._routes.target(push.edge_of(key))
        if sub is not None and self._routes.enqueue(sub, key):
            self._flush(router, sub)

    def _flush(self, router, sub: push.Subscriber) -> None:
        """Pushes `sub`'s queued keys while its credit lasts (put order: a payload waiting for
        credit holds back the ones after it)."""
        while sub.queue:
            key = sub.queue[0]
            content = self.store.content_of(key)
            if content is None:  # pulled, cleaned up or expired meanwhile
                sub.queue.popleft()
                self._routes.skip(sub, key)
                continue
            size = content.meta["size"]
            if not self._routes.may_send(sub, size):
                sub.stalls += 1
                self._count("push_stalls")
                return
            sub.queue.popleft()
            self._routes.sent(sub, key, size)
            head = wire.encode_reply(wire.PUSHED, 0, {**content.meta, "key": key, "sent": time.time()})
            content.sending += 1
            try:
                tracker = router.send_multipart([sub.identity, *head, *content.parts], copy=False, track=True)
            except zmq.ZMQError as e:  # the consumer went away (ROUTER_MANDATORY): the key stays for a pull
                content.sending -= 1
                self._count("push_send_failures")
                logger.warning("RzmqConnector: push of %s not sent (%s); the consumer is dropped", key, e)
                self._routes.drop(sub.identity)
                with self._lock:
                    self.m["subscribers"] = len(self._routes.subs)
                return
            content.trackers = [t for t in content.trackers if not t.done] + [tracker]
            content.sending -= 1
            self.store.served(key)
            with self._lock:
                self.m["pushes"] += 1
                self.m["bytes_pushed"] += size
                self.bytes_in_flight += size
                self._in_flight.append((tracker, size))

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
        """The payload of `get_key` and its size, or None when it is not there in `get_timeout`.

        From a producer that pushes to this consumer it is a lookup in the inbox; inside
        vllm-omni, whose receive loops poll get() for every waiting request in turn, that lookup
        never waits. Pulled from a producer that does not push, it asks and waits for the answer
        (a producer that has no such key answers at once)."""
        return self._get(from_stage, to_stage, get_key, metadata, None)

    def get_with_deadline(self, from_stage: str, to_stage: str, get_key: str,
                          metadata: dict[str, Any] | None = None, *, deadline: float) -> tuple[Any, int] | None:
        """As get(), waiting no later than `deadline` (time.monotonic()) for the payload, on the
        inbox when it is pushed here; None on timeout."""
        return self._get(from_stage, to_stage, get_key, metadata, deadline)

    def _get(self, from_stage, to_stage, get_key, metadata, deadline):
        if self._closed:
            raise RuntimeError("RzmqConnector is closed")
        key = self._make_key(get_key, from_stage, to_stage)
        self._count("gets")
        item = self.inbox.take(key)
        if item is not None:
            return self._deliver_pushed(item)
        pull_deadline = deadline if deadline is not None else time.monotonic() + self.get_timeout
        source = self._source(metadata, from_stage)
        if source is None:
            self._count("get_errors")
            self._warn_once("no-source", "RzmqConnector: get(%s) has no producer address: no metadata, no "
                            "sender_host/sender_zmq_port and no stage to derive the port from", key)
            self._pause_failed_get(pull_deadline)
            return None
        meta = metadata or {}
        content = meta.get("content")
        shared = bool(meta.get("shared")) and self.host_cache is not None
        if shared:
            cid = content or f"{meta.get('producer') or source}/{key}"
            return self._get_shared(source, key, content, cid, pull_deadline)
        if self.push and not content and not meta.get("shared"):
            edge = push.edge_of(key)
            sub = self._subscription(source, edge)
            # What arrived and the receiving thread has not taken (it may wait long for the GIL
            # and the CPU in a busy stage process) is taken here, answers to subscriptions too.
            item = self._take_arrived(key)
            if item is not None:
                return self._deliver_pushed(item)
            if edge not in sub.push:
                if deadline is None and self.stage_id is not None:
                    # vllm-omni's receive loops poll: never wait here (its producer may not
                    # listen before its first put); what was put before the subscription is
                    # pushed ahead of the answer, so the inbox will have it.
                    self._count("get_misses")
                    return None
                # The first get from a producer waits for the answer to its subscription (one
                # round trip, at most until the deadline): what was put before it comes first on
                # that connection, so from then on the inbox alone says what has arrived.
                with self._sub_cond:
                    self._sub_cond.wait_for(lambda: edge in sub.push or self._closed,
                                            max(0.0, pull_deadline - time.monotonic()))
                item = self.inbox.take(key)
                if item is not None:
                    return self._deliver_pushed(item)
            if sub.pushing(edge):
                if deadline is None and self.stage_id is not None:
                    # vllm-omni's receive loops poll get() for every waiting request in turn: not
                    # here yet means None at once (it is pushed the moment it is put, so asking
                    # would not bring it sooner). Outside vllm-omni a get waits for it, as a pull
                    # waits for its answer.
                    self._count("get_misses")
                    return None
                item = self.inbox.wait_take(key, pull_deadline)
                if item is None:
                    self._count("get_timeouts")
                    return None
                return self._deliver_pushed(item)
        got = self._fetch(source, key, content, pull_deadline)
        if got is None:
            return None
        pmeta, parts, frames = got
        self._count("pulls")
        self._last_get.info = {"via": "pull", "arrived": time.time()}
        return self._deliver(pmeta, [p.buffer for p in parts], frames)

    def _take_arrived(self, key: str) -> push.Pushed | None:
        """The inbox's `key` after taking in, on this thread, what the subscriptions brought
        and the receiving thread has not (yet) taken."""
        pump = self._pump
        if pump is None:
            return None
        pump()
        return self.inbox.take(key)

    def _deliver_pushed(self, item: push.Pushed):
        """Decodes a payload taken from the inbox and returns its credit when due."""
        self._count("gets_from_inbox")
        with self._lock:
            self.m["get_hits"] += 1
            self.m["bytes_received"] += item.nbytes
        owed = self.inbox.credit_due(item.source)
        if owed:
            self._inbox_command(b"c" + f"{owed} {item.source}".encode())
        sent = item.meta.get("sent")
        self._last_get.info = {"via": "push", "arrived": item.arrived,
                               "sent": sent if isinstance(sent, (int, float)) else None}
        return self._deliver(item.meta, [p.buffer for p in item.parts], item.frames)

    def last_get_info(self) -> dict[str, Any] | None:
        """How the calling thread's last successful get() was served: `via` push or pull, and
        `arrived` (time.time() when the payload reached this process) and, pushed, `sent` (the
        producer's time.time() as it sent it). For traces."""
        return getattr(self._last_get, "info", None)

    def get_wakeup_generation(self) -> int | None:
        """A snapshot to pass to wait_for_change() (newer vllm-omni receive loops wait on it
        instead of sleeping between polls); None when this consumer does not take pushes."""
        return self.inbox.generation if self.push and not self._closed else None

    def wait_for_change(self, generation: int, *, timeout: float) -> bool:
        """Blocks until a payload was pushed here since `generation`, or `timeout` seconds."""
        return self.inbox.wait_for_change(generation, timeout)

    # -- the consumer's subscriptions and its receiving thread

    def _subscription(self, endpoint: str, edge: str) -> _Subscription:
        """The subscription to `endpoint` (asked for on first use: the receiving thread sends
        SUBSCRIBE; until the producer answers, gets pull)."""
        sub = self._subs.get(endpoint)
        if sub is None or edge not in sub.edges:
            with self._lock:
                sub = self._subs.get(endpoint)
                if sub is None:
                    sub = self._subs[endpoint] = _Subscription(endpoint)
                new = edge not in sub.edges
                sub.edges.add(edge)
            if new:
                self._start_inbox()
                self._inbox_command(b"s" + f"{edge} {endpoint}".encode())
        return sub

    def _start_inbox(self) -> None:
        with self._bind_lock:
            if self._inbox_thread is not None or self._closed:
                return
            ep = f"inproc://rzmq-omni-inbox-{self.producer_id}"
            rx = self.ctx.socket(zmq.PULL)
            rx.bind(ep)
            self._inbox_rx, self._inbox_ep = rx, ep
            thread = threading.Thread(target=self._receive, name="rzmq-omni-inbox", daemon=True)
            thread.start()
            self._inbox_thread = thread

    def _inbox_command(self, msg: bytes) -> None:
        """Hands `msg` to the receiving thread (subscribe, return credit, stop)."""
        self._command(self._inbox_ep, msg)

    def _answer_subscription(self, sub: _Subscription, endpoint: str, edge: str, status: int, meta: dict) -> None:
        """Records a producer's answer to SUBSCRIBE (the receiving thread, under _sub_cond)."""
        sub.heard = time.monotonic()
        if status == wire.OK and meta.get("push"):
            if not meta.get("known") or meta.get("producer") != sub.producer:
                # a fresh grant (first subscription, or a producer that restarted): credit owed
                # for what an earlier connection delivered is void
                self.inbox.reset_source(endpoint)
                sub.producer = meta.get("producer")
            if not sub.push.get(edge):
                self._count("subscriptions")
            sub.push[edge] = True
        else:  # the producer does not push (push: false, or an older one: BAD_REQUEST)
            if edge not in sub.push:
                self._count("subscriptions_refused")
            sub.push[edge] = False

    def _receive(self) -> None:
        """The consumer's receiving thread: subscribes, takes pushed payloads into the inbox,
        returns credit, re-subscribes every RESUBSCRIBE_INTERVAL until close()."""
        rx = self._inbox_rx
        poller = zmq.Poller()
        poller.register(rx, zmq.POLLIN)
        socks: dict[str, zmq.Socket] = {}
        by_sock: dict[zmq.Socket, str] = {}
        pending: dict[int, tuple[str, str]] = {}  # SUBSCRIBE request id -> (endpoint, edge)
        last_beat = time.monotonic()

        def send_subscribe(endpoint: str, edge: str) -> None:
            sock = socks.get(endpoint)
            if sock is None:
                sock = self.ctx.socket(zmq.DEALER)
                # A routing id of its own: after a reconnection the producer knows this consumer
                # (and its credit); a producer that restarted sees a new one and grants afresh.
                rid = f"rzo-sub-{self.producer_id}-{len(socks)}".encode()
                for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.RECONNECT_IVL, 10),
                                 (zmq.ROUTING_ID, rid)):
                    sock.setsockopt(opt, val)
                sock.connect(endpoint)
                socks[endpoint] = sock
                by_sock[sock] = endpoint
                # waited on through its fd: get() takes what arrived on it too (pump)
                poller.register(sock.getsockopt(zmq.FD), zmq.POLLIN)
            rid = next_request_id()
            pending[rid] = (endpoint, edge)
            if len(pending) > 4096:  # answers that never came (a producer gone for long)
                for old in sorted(pending)[:1024]:
                    del pending[old]
            credit = self.inbox.available(endpoint)
            try:
                sock.send_multipart(wire.encode_request(wire.OP_SUBSCRIBE, rid, edge, str(credit)), zmq.NOBLOCK)
            except zmq.ZMQError as e:
                logger.debug("RzmqConnector: subscribe to %s not sent: %s", endpoint, e)

        def send_credit(endpoint: str, n: int) -> None:
            sock = socks.get(endpoint)
            if sock is not None and n > 0:
                try:
                    sock.send_multipart(wire.encode_request(wire.OP_CREDIT, 0, "*", str(n)), zmq.NOBLOCK)
                except zmq.ZMQError as e:
                    logger.debug("RzmqConnector: credit to %s not sent: %s", endpoint, e)

        def on_message(endpoint: str, frames: list) -> None:
            sub = self._subs.get(endpoint)
            try:
                status, rid, meta, parts = wire.parse_reply(frames)
            except wire.ProtocolError as e:
                self._count("get_errors")
                logger.error("RzmqConnector: bad message from %s: %s", endpoint, e)
                return
            if sub is not None:
                sub.heard = time.monotonic()
            if status == wire.PUSHED:
                nbytes = meta["size"]
                self.inbox.add(meta["key"], push.Pushed(meta, parts, frames, endpoint, nbytes, time.time()))
                return
            if status == wire.PUSH_OFF:
                if sub is not None:
                    sub.push[str(meta.get("edge"))] = False
                return
            asked = pending.pop(rid, None)
            if asked is None or sub is None:
                return
            _, edge = asked
            with self._sub_cond:
                self._answer_subscription(sub, endpoint, edge, status, meta)
                self._sub_cond.notify_all()

        def on_command(msg: bytes) -> bool:
            if msg == _STOP:
                return True
            what, arg = msg[:1], msg[1:].decode()
            with self._socks_lock:
                if what == b"s":
                    edge, endpoint = arg.split(" ", 1)
                    send_subscribe(endpoint, edge)
                elif what == b"c":
                    n, endpoint = arg.split(" ", 1)
                    send_credit(endpoint, int(n))
            return False

        def take_arrived() -> bool:
            """Moves what arrived on the subscriptions into the inbox (under _socks_lock); True
            when more may wait."""
            more = False
            for sock, endpoint in list(by_sock.items()):
                more |= _drain_ready(sock, lambda: sock.recv_multipart(zmq.NOBLOCK, copy=False),
                                     lambda frames: on_message(endpoint, frames), 256)
            return more

        def pump() -> None:
            """get(): takes what arrived on the calling thread, without waiting for this one
            (a receiving thread that holds the lock is taking it already)."""
            if self._socks_lock.acquire(blocking=False):
                try:
                    if not closing:
                        take_arrived()
                finally:
                    self._socks_lock.release()

        closing = False
        self._pump = pump
        try:
            while True:
                with self._socks_lock:
                    more = take_arrived()
                events = dict(poller.poll(0 if more else 200))
                if rx in events and _drain(lambda: rx.recv(zmq.NOBLOCK), on_command, 256):
                    break
                now = time.monotonic()
                if now - last_beat >= RESUBSCRIBE_INTERVAL:
                    last_beat = now
                    self.inbox.expire()
                    with self._socks_lock:
                        for endpoint, n in self.inbox.owed().items():  # below the batch size: flushed
                            send_credit(endpoint, self.inbox.flush_credit(endpoint))
                        for endpoint, sub in list(self._subs.items()):
                            for edge in list(sub.edges):
                                send_subscribe(endpoint, edge)
        except zmq.ContextTerminated:
            pass
        except Exception:  # noqa: BLE001
            logger.exception("RzmqConnector: receiving thread failed")
        finally:
            self._pump = None
            with self._socks_lock:
                closing = True
                for sock in socks.values():
                    sock.close(0)
            rx.close(0)

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
        port = self.port
        if port is None and self.can_put and self.stage_id is not None:
            port = self._producer_port(self.stage_id)  # where its first put will listen
        return {"host": self.host, "zmq_port": port, "can_put": self.can_put, "endpoint": self.endpoint}

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
            "push": self.push,
            **counters,
            **self.store.stats(),
            **self.inbox.snapshot(),
        }

    def _stop_thread(self, thread, endpoint, what: str) -> bool:
        """Sends STOP to one of this connector's threads over its command endpoint and waits up to
        CLOSE_WAIT for it; False (logged) when it is still busy."""
        if thread is None:
            return True
        try:
            with self.ctx.socket(zmq.PUSH) as s:
                s.setsockopt(zmq.LINGER, 1000)
                s.connect(endpoint)
                s.send(_STOP)
        except zmq.ZMQError:
            pass
        thread.join(self.CLOSE_WAIT)
        if thread.is_alive():
            logger.warning("RzmqConnector: the %s thread is still busy %.0f s after close()", what, self.CLOSE_WAIT)
            return False
        return True

    def close(self) -> None:
        """Stops the producer thread and the fetch worker (each closes its own sockets), releases
        every key and ends the context (safe twice). Never blocks forever: a thread still busy
        after CLOSE_WAIT seconds is logged and left to end with the process, and so is the context."""
        if getattr(self, "_closed", True):
            return
        with self._bind_lock:  # a first put() may be starting the producer right now
            self._closed = True
        ended = self._stop_thread(self._thread, getattr(self, "_wake_ep", None), "producer")
        ended &= self._stop_thread(self._inbox_thread, getattr(self, "_inbox_ep", None), "receiving")
        with self._sub_cond:
            self._sub_cond.notify_all()
        self.inbox.close()  # what was pushed and never taken: its frames go with it
        if self._fetcher is not None:
            ended &= self._fetcher.close(self.CLOSE_WAIT)
        with self._cmd_lock:  # the command sockets of put() and get(), closed once nobody sends
            cmds, self._cmd_socks = self._cmd_socks, {}
        for sock in cmds.values():
            sock.close(0)
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

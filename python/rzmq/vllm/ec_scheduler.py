"""RzmqECConnector's scheduler half: which embeddings exist, and their fetch into the host cache.

It runs in the consumer's engine core. The RzmqConnector's fetch worker owns every socket: a
SUB per producer keeps `known` current (announcements, checked for protocol version and
compatibility), so `has_cache_item` is a dictionary lookup, never a round trip; and a fetch is
a request the worker sends, whose reply this half writes into the host cache (a file in
/dev/shm per embedding, shared by every vLLM process of the host) the next time vLLM asks
about the request. Nothing here blocks for longer than HOLD_WAIT; a fetch that fails (producer
gone, embedding released, `fetch_timeout` passed) fails its requests with a clear error through
`take_unavailable_requests`, and an embedding that comes after that is released as it arrives.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any

from ..omni.connector import RzmqConnector
from .metadata import EC_PROTOCOL_VERSION, incompatibility
from .stats import Recorder, zero_copy_frames

logger = logging.getLogger("rzmq.vllm.ec")

STAGE = "ec"  # the RzmqConnector key suffix of every embedding (`mm_hash@ec_ec`)
ADD, DROP, PUSHED = b"+", b"-", b"="


def endpoint_parts(addr: str) -> tuple[str, int]:
    """("host", port) of a "host:port" producer address."""
    host, _, port = str(addr).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"producer address must be host:port, not {addr!r}")
    return host, int(port)


@dataclass
class _Fetching:
    """One embedding on its way into the host cache."""

    deadline: float
    order: list[tuple[str, int]]  # producers still to ask, first the one that announced it
    lock: Any = None  # this process's host-cache lock on it (None: another process holds it)
    fut: Any = None
    endpoint: str = ""
    waiting: set[str] = field(default_factory=set)


class RzmqECScheduler:
    """Consumer scheduler: what producers announced, and the fetches into the host cache."""

    HOLD_WAIT = 0.002  # seconds ensure() waits for a fetch in flight before saying "not yet"

    def __init__(self, peer: RzmqConnector, producers: list[tuple[str, int]], timeout: float,
                 announce_wait: float, compat: str):
        self.peer = peer
        self.timeout = timeout
        self.announce_wait = announce_wait
        self.compat = compat
        self.recorder = Recorder()
        self.stats = {"fetched": 0, "fetch_failures": 0, "announcements_refused": 0, "pushed_in": 0,
                      "bytes_pushed_in": 0, "pushes_refused": 0}
        self._lock = threading.Lock()  # `known`: written by the fetch worker's thread
        self.known: dict[str, tuple[str, int] | None] = {}
        self._refused: set[str] = set()
        self._unknown: dict[str, float] = {}  # mm_hash -> when first asked for, not yet announced
        self._producers = list(producers)
        self._fetching: dict[str, _Fetching] = {}
        self._here: set[str] = set()  # in the host cache (by this process or another of the host)
        self._failed: set[str] = set()
        self._late_seen = 0
        self._held_at = (0.0, 0)
        for host, port in producers:
            peer.fetcher.subscribe(f"tcp://{host}:{port + 1}", self._on_announce)
            peer.connect_to(host, port)  # the first fetch does not wait for the connection

    # ------------------------------------------------------------------ the fetch worker's thread

    def _on_announce(self, msg: list[bytes]) -> None:
        if len(msg) >= 4 and msg[0] == PUSHED:
            self._on_pushed(msg)
            return
        if len(msg) != 3:
            return  # not our message shape: ignored
        op, h, info = msg
        name = h.decode(errors="replace")
        if op == DROP:
            with self._lock:
                self.known.pop(name, None)
            return
        if op != ADD:
            return
        try:
            info = json.loads(info)
            host, port = info["source"]
            where = (str(host), int(port))
        except (ValueError, KeyError, TypeError):
            info, where = {}, None  # fetched from the configured producers in turn
        why = incompatibility(f"the encoder at {where}", info.get("v"), info.get("compat"), EC_PROTOCOL_VERSION,
                              self.compat) if isinstance(info, dict) else "bad announcement"
        if why is not None:
            self.stats["announcements_refused"] += 1
            if str(where) not in self._refused:
                self._refused.add(str(where))
                logger.error("RzmqECConnector: %s: its embeddings are not used, this instance encodes them "
                             "(logged once per producer)", why)
            return
        with self._lock:
            self.known[name] = where
        if where is not None:
            self.peer.connect_to(*where)

    def _on_pushed(self, msg: list[bytes]) -> None:
        """An embedding pushed with its announcement: into this host's cache now, unless it is
        there or another process of the host is writing it. Checked as a fetched one would be
        (version, compatibility, sizes); a bad one is dropped and fetched later as usual."""
        name = msg[1].decode(errors="replace")
        try:
            info = json.loads(msg[2])
            meta = info["meta"]
            ok = (isinstance(meta, dict) and int(meta["size"]) == sum(len(p) for p in msg[3:])
                  and incompatibility("pushed embedding", info.get("v"), info.get("compat"), EC_PROTOCOL_VERSION,
                                      self.compat) is None)
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            self.stats["pushes_refused"] += 1
            return
        if self.local(name):
            return
        cache = self.peer.host_cache
        try:
            lock = cache.lock(name, deadline=0.0)  # one try: a process holding it is writing it
            if lock is None:
                return
            try:
                if cache.open(name) is None:
                    cache.store(name, meta, msg[3:])
                    self.stats["pushed_in"] += 1
                    self.stats["bytes_pushed_in"] += int(meta["size"])
                    # a transfer like a fetch's, timed from the producer's send (one clock on one
                    # host; across hosts as good as their clocks agree)
                    sent = float(info.get("t_sent", 0.0))
                    self.recorder.transfer(max(0.0, time.time() - sent) if sent else 0.0, int(meta["size"]))
            finally:
                cache.unlock(lock)
        except OSError as e:
            logger.error("RzmqECConnector: host cache %s: cannot write pushed embedding %s: %s", cache.dir, name, e)

    # ------------------------------------------------------------------ the scheduler's thread

    def hint(self, mm_hash: str, params: Any) -> None:
        """A producer named in the request's ec_transfer_params (a producer's request_finished)."""
        where = params.get("rzmq") if isinstance(params, dict) else None
        if where and not self.knows(mm_hash):
            try:
                addr = endpoint_parts(where)
            except ValueError:
                logger.warning("RzmqECConnector: ignoring ec_transfer_params address %r", where)
                return
            with self._lock:
                self.known[mm_hash] = addr
            self.peer.connect_to(*addr)

    def knows(self, mm_hash: str) -> bool:
        with self._lock:
            if mm_hash in self.known:
                return True
        return self.local(mm_hash)

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
        f = self._fetching.get(mm_hash)
        if f is None:
            with self._lock:
                first = self.known.get(mm_hash)
            order = ([first] if first else []) + [p for p in self._producers if p != first]
            f = self._fetching[mm_hash] = _Fetching(deadline=time.monotonic() + self.timeout, order=order)
        f.waiting.add(req_id)
        if f.fut is not None and not f.fut.done():
            # vLLM's engine loop calls this again at once while the request is held back; each
            # call spent waiting here (GIL released) lets the fetch worker run instead of queueing
            # for the GIL behind that loop.
            wait([f.fut], timeout=self.HOLD_WAIT)
        return self._advance(mm_hash, f)

    def _advance(self, mm_hash: str, f: _Fetching) -> bool:
        """Moves the fetch of `mm_hash` on as far as it goes now; True once it is on this host."""
        cache = self.peer.host_cache
        if f.fut is not None:
            if not f.fut.done():
                return False
            fut, f.fut = f.fut, None
            got = self.peer.take_reply(self.peer.wait_fetch(fut, f.deadline), f.endpoint,
                                       self.peer._make_key(mm_hash, STAGE, STAGE))
            seconds = (fut.t_done or time.monotonic()) - fut.t_submit
            rep = fut.result() if got is not None else None
            if got is not None:
                meta, parts, _frames = got
                try:
                    cache.store(mm_hash, meta, [p.buffer for p in parts])
                except OSError as e:
                    logger.error("RzmqECConnector: host cache %s: cannot write embedding %s: %s", cache.dir, mm_hash, e)
                    return self._fail(mm_hash, f)
                finally:
                    rep.release()
                self.recorder.transfer(seconds, meta["size"], zero_copy_frames(parts, f.endpoint))
                self.stats["fetched"] += 1
                return self._done(mm_hash, f)
            if not f.order or time.monotonic() >= f.deadline:
                return self._fail(mm_hash, f)
        elif f.lock is None:  # another process of this host may be fetching it
            if cache.open(mm_hash) is not None:
                return self._done(mm_hash, f)
            if time.monotonic() >= f.deadline:
                return self._fail(mm_hash, f)
            try:
                f.lock = cache.lock(mm_hash, deadline=0.0)  # one try, no wait
            except OSError as e:
                logger.error("RzmqECConnector: host cache %s unusable: %s", cache.dir, e)
                return self._fail(mm_hash, f)
            if f.lock is None:
                return False
            if cache.open(mm_hash) is not None:  # filled while we took the lock
                return self._done(mm_hash, f)
        # this process fetches it: from the next producer in order
        if not f.order:
            return self._fail(mm_hash, f)
        host, port = f.order.pop(0)
        f.endpoint = self.peer._source({"source_host": host, "source_port": port})
        f.fut = self.peer.fetch_async(f.endpoint, self.peer._make_key(mm_hash, STAGE, STAGE), mm_hash, f.deadline)
        return False

    def _done(self, mm_hash: str, f: _Fetching) -> bool:
        self._unlock(f)
        del self._fetching[mm_hash]
        self._here.add(mm_hash)
        return True

    def _fail(self, mm_hash: str, f: _Fetching) -> bool:
        self._unlock(f)
        if f.fut is not None:
            f.fut.abandon()
        del self._fetching[mm_hash]
        self.stats["fetch_failures"] += 1
        self.recorder.failure()
        with self._lock:
            self.known.pop(mm_hash, None)
        self._failed |= f.waiting
        logger.error("RzmqECConnector: embedding %s could not be fetched within %g s (producer gone, slow, or "
                     "the embedding released): the requests that need it fail", mm_hash, self.timeout)
        return False

    def _unlock(self, f: _Fetching) -> None:
        if f.lock is not None:
            self.peer.host_cache.unlock(f.lock)
            f.lock = None

    def take_failed(self) -> set[str]:
        failed, self._failed = self._failed, set()
        return failed

    # ------------------------------------------------------------------ accounting

    def held_bytes(self) -> int:
        """Bytes of embeddings in this host's cache (measured at most once a second)."""
        t, n = self._held_at
        if time.monotonic() - t < 1.0:
            return n
        n = 0
        try:
            with os.scandir(self.peer.host_cache.dir) as it:
                for e in it:
                    if len(e.name) == 40:
                        try:
                            n += e.stat().st_size
                        except OSError:
                            pass
        except OSError:
            pass
        self._held_at = (time.monotonic(), n)
        return n

    def take_stats(self) -> dict | None:
        fetcher = self.peer._fetcher
        late = fetcher.stats["late_bytes_released"] if fetcher is not None else 0
        if late > self._late_seen:
            self.recorder.late(late - self._late_seen)
            self._late_seen = late
        held = self.held_bytes()
        if held != self.recorder.totals["held_bytes"]:
            self.recorder.held(held)
        return self.recorder.take()

    def close(self) -> None:
        for mm_hash, f in list(self._fetching.items()):
            if f.fut is not None:
                f.fut.abandon()
            self._unlock(f)
        self._fetching.clear()

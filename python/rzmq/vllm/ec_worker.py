"""RzmqECConnector's worker half: embeddings kept and announced (producer), mapped from the
host cache into vLLM's encoder cache (consumer).

Producer (`save_caches`): the embedding tensor stays where vLLM computed it; the RzmqConnector
store keeps a reference (no copy) under its mm_hash, bounded by `memory_pool_size` and released
after `buffer_ttl_seconds` unused. The announcer thread owns an XPUB socket: it announces each
embedding (`+ mm_hash {shape, dtype, bytes, source, v, compat}`) before save_caches returns,
each release (`- mm_hash`), and every live embedding again to a subscriber that joins. An
embedding of at most `push_bytes` is pushed with its announcement (`= mm_hash {..., meta}
parts...`): each subscribed consumer host writes it into its host cache as it arrives, so the
consumer instance the proxy sends the request to next finds it there and never asks.

Consumer (`start_load_caches`): maps the host cache entry the scheduler filled and hands vLLM
a tensor over it (no copy), moved to the accelerator where vLLM runs on one.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from typing import Any

import zmq

from ..omni import payload
from ..omni.connector import RzmqConnector
from .metadata import EC_PROTOCOL_VERSION, RzmqECMetadata
from .stats import Recorder

logger = logging.getLogger("rzmq.vllm.ec")

STAGE = "ec"
ADD, DROP, PUSHED = b"+", b"-", b"="


def first_tp_rank() -> bool:
    """Whether this worker is tensor-parallel rank 0 (every rank encodes; one rank publishes)."""
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return get_tensor_model_parallel_rank() == 0
    except (AssertionError, ImportError, RuntimeError):  # no parallel state: a single worker
        return True


class Announcer:
    """Producer: a thread that owns the XPUB socket, publishes `+`/`-` for each embedding and
    announces every live one again to a new subscriber.

    `announce()` returns once its announcement is on the socket (the encoder instance answers
    its request after save_caches, and a consumer asked next must know the embedding). Given the
    payload's `(meta, parts)`, the bytes follow in a `=` message (sent without a copy)."""

    SWEEP = 1.0  # seconds between looks for embeddings released by TTL or budget
    ANNOUNCE_WAIT = 2.0  # seconds announce() waits for the thread (a stopped one: not at all)

    def __init__(self, peer: RzmqConnector, bind_host: str, port: int):
        self.peer = peer
        self.live: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # `live`
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        self._stopped = threading.Event()
        started = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, args=(bind_host, port, started), name="rzmq-ec-announce",
                                        daemon=True)
        self._thread.start()
        started.wait(10.0)
        if self._error is not None:
            raise self._error

    @staticmethod
    def _frames(op: bytes, mm_hash: str, info: dict[str, Any]) -> list[bytes]:
        return [op, mm_hash.encode(), json.dumps(info).encode()]

    def announce(self, mm_hash: str, info: dict[str, Any], payload_parts: tuple | None = None) -> None:
        with self._lock:
            self.live[mm_hash] = info
        if self._stopped.is_set():
            return
        sent = threading.Event()
        self._q.put((mm_hash, info, sent, payload_parts))
        try:
            os.write(self._wfd, b"x")
        except OSError:
            return
        sent.wait(self.ANNOUNCE_WAIT)

    def _run(self, bind_host: str, port: int, started: threading.Event) -> None:
        pub = self.peer.ctx.socket(zmq.XPUB)
        try:
            for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.XPUB_VERBOSE, 1)):
                pub.setsockopt(opt, val)
            try:
                pub.bind(f"tcp://{bind_host}:{port}")
            except zmq.ZMQError as e:
                self._error = RuntimeError(f"RzmqECConnector: cannot listen for subscribers on {bind_host}:{port}: {e}")
                return
            started.set()
            poller = zmq.Poller()
            poller.register(pub, zmq.POLLIN)
            poller.register(self._rfd, zmq.POLLIN)
            next_sweep = time.monotonic() + self.SWEEP
            while True:
                events = dict(poller.poll(int(self.SWEEP * 1000)))
                if self._rfd in events:
                    try:
                        while os.read(self._rfd, 4096):
                            pass
                    except BlockingIOError:
                        pass
                stop = False
                while True:
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stop = True
                        continue
                    mm_hash, info, sent, pushed = item
                    pub.send_multipart(self._frames(ADD, mm_hash, info))
                    if pushed is not None:
                        meta, parts = pushed
                        head = self._frames(PUSHED, mm_hash, {**info, "meta": meta, "t_sent": time.time()})
                        pub.send_multipart([*head, *parts], copy=False)
                    sent.set()
                if stop:
                    return
                if pub in events:
                    joined = False
                    while True:
                        try:
                            joined |= pub.recv(zmq.NOBLOCK)[:1] == b"\x01"
                        except zmq.Again:
                            break
                    if joined:  # a new subscriber: everything live, again
                        with self._lock:
                            live = list(self.live.items())
                        for mm_hash, info in live:
                            pub.send_multipart(self._frames(ADD, mm_hash, info))
                if time.monotonic() >= next_sweep:  # released by TTL or budget: say so
                    next_sweep = time.monotonic() + self.SWEEP
                    self.peer.reap_consumed()
                    with self._lock:
                        gone = [h for h in self.live if self.peer.store.content_of(f"{h}@{STAGE}_{STAGE}") is None]
                        for h in gone:
                            del self.live[h]
                    for h in gone:
                        pub.send_multipart(self._frames(DROP, h, {}))
        except zmq.ZMQError as e:
            if e.errno != zmq.ETERM:
                logger.exception("RzmqECConnector: announcer failed")
        finally:
            self._stopped.set()
            started.set()
            pub.close(0)  # this thread made it; it closes it
            while True:  # announcements that raced with the stop
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[2].set()

    def close(self, timeout: float = 5.0) -> bool:
        """Stops the thread (it closes its socket); True when it ended within `timeout`."""
        if not self._stopped.is_set():
            self._q.put(None)
            try:
                os.write(self._wfd, b"x")
            except OSError:
                pass
        self._thread.join(timeout)
        ended = not self._thread.is_alive()
        if ended:
            for fd in (self._rfd, self._wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._rfd = self._wfd = -1
        else:
            logger.warning("RzmqECConnector: the announcer is still busy %.0f s after close()", timeout)
        return ended


class RzmqECWorker:
    """The worker side of one instance: producer (saves and announces) and/or consumer (loads)."""

    def __init__(self, peer_config: dict[str, Any], host: str, port: int, producers: list[tuple[str, int]],
                 is_producer: bool, is_consumer: bool, compat: str, push_bytes: int = 1 << 20):
        self.host, self.port, self.producers = host, port, producers
        self.push_bytes = push_bytes
        self.compat = compat
        self.peer: RzmqConnector | None = None
        self.announcer: Announcer | None = None
        self.is_consumer = is_consumer
        self.recorder = Recorder()
        self.stats = {"saved": 0, "bytes_saved": 0, "pushed": 0, "loaded": 0, "bytes_loaded": 0}
        if is_producer and first_tp_rank():
            self.peer = RzmqConnector({**peer_config, "role": "sender", "zmq_port": port})
            try:
                self.announcer = Announcer(self.peer, peer_config["bind_host"], port + 1)
            except Exception:
                self.peer.close()
                raise
        elif is_consumer:
            self.peer = RzmqConnector({**peer_config, "role": "receiver"})

    def save(self, encoder_cache: dict[str, Any], mm_hash: str) -> None:
        """Producer: keeps the embedding (a reference, no copy) and announces it."""
        if self.announcer is None or mm_hash in self.announcer.live:
            return
        t = encoder_cache[mm_hash].detach()
        if t.device.type != "cpu":
            t = t.cpu()  # a device tensor leaves through host memory (counted as a copy)
        t = t.contiguous()
        ok, size, _ = self.peer.put(STAGE, STAGE, mm_hash, payload.Shared(t, mm_hash))
        if not ok:
            logger.error("RzmqECConnector: embedding %s (%d bytes) not kept: the store is full (%s)", mm_hash,
                         t.numel() * t.element_size(), self.peer.store.stats())
            return
        self.stats["saved"] += 1
        self.stats["bytes_saved"] += size
        pushed = None
        if size <= self.push_bytes:
            content = self.peer.store.content_of(self.peer._make_key(mm_hash, STAGE, STAGE))
            if content is not None:
                pushed = (content.meta, content.parts)
                self.stats["pushed"] += 1
        self.announcer.announce(mm_hash, {"shape": list(t.shape), "dtype": str(t.dtype), "bytes": size,
                                          "source": [self.host, self.port], "v": EC_PROTOCOL_VERSION,
                                          "compat": self.compat}, pushed)

    def load(self, meta: RzmqECMetadata, encoder_cache: dict[str, Any]) -> None:
        """Consumer: puts this step's embeddings, mapped from the host cache, into vLLM's cache."""
        for mm_hash in meta.loads:
            if mm_hash in encoder_cache:
                continue
            t = self._load(mm_hash)
            encoder_cache[mm_hash] = t
            self.stats["loaded"] += 1
            self.stats["bytes_loaded"] += t.numel() * t.element_size()

    def _load(self, mm_hash: str):
        got = None
        hit = self.peer.host_cache.open(mm_hash)
        if hit is not None:
            meta, views, mapping = hit
            got = payload.decode(meta, views, mapping, self.peer.deserialize_obj).to_tensor()
        else:  # released from the host cache since the scheduler fetched it: fetch again
            for host, port in self.producers:
                t0 = time.monotonic()
                res = self.peer.get(STAGE, STAGE, mm_hash, {"source_host": host, "source_port": port,
                                                           "shared": True, "content": mm_hash})
                if res is not None:
                    self.recorder.transfer(time.monotonic() - t0, res[1])
                    got = res[0].to_tensor()
                    break
                self.recorder.failure()
        if got is None:
            raise RuntimeError(f"RzmqECConnector: embedding {mm_hash} is neither in the host cache "
                               f"({self.peer.host_cache.dir}) nor at any producer")
        from vllm.platforms import current_platform

        device = current_platform.device_type
        return got if device == "cpu" else got.to(device)

    def held_bytes(self) -> int:
        return self.peer.store.held if self.announcer is not None else 0

    def close(self) -> None:
        if self.announcer is not None:
            self.announcer.close()
        if self.peer is not None:
            self.peer.close()
        self.announcer = self.peer = None

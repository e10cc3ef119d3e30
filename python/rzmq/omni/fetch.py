"""FetchWorker: the one thread that owns a consumer's sockets and runs its fetches.

A ZeroMQ socket belongs to one thread. The consumers of rzmq's connectors (RzmqConnector.get,
the vLLM EC connector's scheduler, the vLLM KV connector's worker) therefore hand every request
to this worker instead of opening sockets on their own threads:

- `fetch(endpoint, frames, req_id, deadline)` queues a request and returns a `Fetch` (a
  concurrent.futures.Future) at once; the worker sends it on its DEALER to that endpoint and
  completes the future with the `Reply`, or with `FetchTimeout` at the deadline, or
  `FetchError`. Any number of fetches are in flight at once, on one connection per producer;
  replies are matched to requests by request id.
- `abandon()` (or `cancel()`) on a Fetch says the caller gave up. A reply that arrives for a
  request nobody waits for any more (abandoned, or past its deadline) is dropped as it arrives,
  so its frames go straight back to rzmq's receive pool: a slow producer cannot make a
  consumer hold memory.
- `subscribe(endpoint, on_message)` keeps a SUB socket in the worker (announcements).
- `close()` asks the worker to close its own sockets and end; it waits a bounded time and
  never blocks forever. Fetches still in flight fail with FetchError("closed").

The worker wakes on a pipe (an fd, not a socket) so any thread may submit.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import threading
import time
from concurrent.futures import CancelledError, Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Callable

import zmq

from . import wire

logger = logging.getLogger("rzmq.omni.fetch")

_request_ids = itertools.count(1)  # one sequence per process: ids never repeat between workers


def next_request_id() -> int:
    """A request id no other fetch of this process uses."""
    return next(_request_ids)


class FetchTimeout(TimeoutError):
    """No reply before the fetch's deadline."""


class FetchError(RuntimeError):
    """The fetch could not be made (bad endpoint, bad reply, worker closed)."""


@dataclass
class Reply:
    """A producer's answer: wire status, request id, meta, payload parts and the frames holding them."""

    status: int
    req_id: int
    meta: dict[str, Any]
    parts: list
    frames: list = field(repr=False)

    @property
    def size(self) -> int:
        """Payload bytes (0 for an error reply)."""
        return int(self.meta.get("size", 0) or 0) if self.status == wire.OK else 0

    def release(self) -> None:
        """Drops the frames (their memory returns to the receive pool once no view holds it)."""
        self.parts = []
        self.frames = []


class Fetch(Future):
    """One request in flight: a Future of its `Reply`."""

    def __init__(self, endpoint: str, req_id: int, deadline: float):
        super().__init__()
        self.endpoint, self.req_id, self.deadline = endpoint, req_id, deadline
        self.t_submit = time.monotonic()
        self.t_done: float | None = None

    def abandon(self) -> None:
        """The caller gave up: a reply still to come is dropped on arrival, one already here now."""
        if not self.cancel() and not self.cancelled():
            try:
                rep = self.result(timeout=0)
            except BaseException:  # noqa: BLE001 (failed: nothing held)
                return
            rep.release()


class FetchWorker:
    """One thread owning a consumer's sockets; fetches come in through a queue and leave as futures."""

    POLL_MAX = 1.0  # seconds the worker sleeps at most (deadlines wake it earlier)

    def __init__(self, ctx: zmq.Context, name: str = "rzmq-fetch", reconnect_ivl_ms: int = 10):
        self.ctx = ctx
        self.name = name
        self.reconnect_ivl_ms = reconnect_ivl_ms
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._lock = threading.Lock()
        self._closed = False
        # counters (written by the worker, read by anyone)
        self.stats = {"fetches": 0, "replies": 0, "bytes": 0, "timeouts": 0, "errors": 0, "late_replies": 0,
                      "late_bytes_released": 0, "in_flight": 0, "sockets": 0}
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ any thread

    def _wake(self) -> None:
        """Wakes the worker (under `_lock`: the worker closes the pipe under it too)."""
        try:
            os.write(self._wfd, b"x")
        except OSError:  # full of wake-ups already
            pass

    def _submit(self, cmd: tuple) -> None:
        with self._lock:
            if self._closed:
                raise FetchError("fetch worker is closed")
            self._q.put(cmd)
            self._wake()

    def fetch(self, endpoint: str, frames: list, req_id: int, deadline: float) -> Fetch:
        """Sends `frames` (a wire request with id `req_id`) to `endpoint`; the Reply comes in the future."""
        fut = Fetch(endpoint, req_id, deadline)
        try:
            self._submit(("fetch", fut, frames))
        except FetchError as e:
            fut.set_exception(e)
        return fut

    def send(self, endpoint: str, frames: list) -> None:
        """Sends `frames` to `endpoint`; no reply expected (best effort)."""
        try:
            self._submit(("send", endpoint, frames))
        except FetchError:
            pass

    def connect(self, endpoint: str) -> None:
        """Opens the worker's connection to `endpoint` now, ahead of its first fetch."""
        try:
            self._submit(("connect", endpoint))
        except FetchError:
            pass

    def subscribe(self, endpoint: str, on_message: Callable[[list[bytes]], None]) -> None:
        """Receives every message `endpoint` publishes; `on_message` runs on the worker's thread."""
        self._submit(("subscribe", endpoint, on_message))

    @property
    def alive(self) -> bool:
        """Whether the worker thread still runs."""
        return self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> bool:
        """Stops the worker: it closes its own sockets and fails what is in flight. Waits at most
        `timeout` seconds; True when the thread ended (safe twice)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._q.put(("stop",))
                self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        ended = not self._thread.is_alive()
        if not ended:
            logger.warning("%s: still busy %.0f s after close(); left to end with the process", self.name, timeout)
        return ended

    # ------------------------------------------------------------------ the worker's thread

    def _run(self) -> None:
        dealers: dict[str, zmq.Socket] = {}
        subs: dict[zmq.Socket, Callable] = {}
        by_socket: dict[zmq.Socket, str] = {}
        pending: dict[int, Fetch] = {}
        deadlines: list[tuple[float, int]] = []
        poller = zmq.Poller()
        poller.register(self._rfd, zmq.POLLIN)

        def dealer(endpoint: str) -> zmq.Socket:
            sock = dealers.get(endpoint)
            if sock is None:
                sock = self.ctx.socket(zmq.DEALER)
                # RECONNECT_IVL: a consumer may ask before a middle stage's producer listens;
                # libzmq's default 100 ms would be added to that first transfer. The connection
                # stays for the worker's life (a slow producer's late replies come back on it and
                # are released); to a producer that died it backs off to one try a second.
                for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0),
                                 (zmq.RECONNECT_IVL, self.reconnect_ivl_ms), (zmq.RECONNECT_IVL_MAX, 1000)):
                    sock.setsockopt(opt, val)
                try:
                    sock.connect(endpoint)
                except zmq.ZMQError:
                    sock.close(0)
                    raise
                dealers[endpoint] = sock
                by_socket[sock] = endpoint
                poller.register(sock, zmq.POLLIN)
                self.stats["sockets"] += 1
            return sock

        def finish(fut: Fetch, result=None, exc: BaseException | None = None) -> bool:
            """Completes `fut`; False when nobody waits for it any more (abandoned)."""
            fut.t_done = time.monotonic()
            try:
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
                return True
            except (InvalidStateError, CancelledError):
                return False

        def late(rep: Reply) -> None:
            self.stats["late_replies"] += 1
            self.stats["late_bytes_released"] += rep.size
            rep.release()

        stopping = False
        try:
            while not stopping:
                now = time.monotonic()
                wait = self.POLL_MAX
                if deadlines:
                    wait = max(0.0, min(wait, deadlines[0][0] - now))
                events = dict(poller.poll(max(0, int(wait * 1000 + 0.999))))
                if self._rfd in events:
                    try:
                        while os.read(self._rfd, 4096):
                            pass
                    except BlockingIOError:
                        pass
                while True:
                    try:
                        cmd = self._q.get_nowait()
                    except queue.Empty:
                        break
                    op = cmd[0]
                    if op == "stop":
                        stopping = True
                        break
                    try:
                        if op == "fetch":
                            fut, frames = cmd[1], cmd[2]
                            if fut.cancelled():
                                continue
                            self.stats["fetches"] += 1
                            dealer(fut.endpoint).send_multipart(frames, zmq.NOBLOCK)
                            pending[fut.req_id] = fut
                            heapq.heappush(deadlines, (fut.deadline, fut.req_id))
                        elif op == "send":
                            dealer(cmd[1]).send_multipart(cmd[2], zmq.NOBLOCK)
                        elif op == "connect":
                            dealer(cmd[1])
                        elif op == "subscribe":
                            sub = self.ctx.socket(zmq.SUB)
                            for opt, val in ((zmq.LINGER, 0), (zmq.RCVHWM, 0), (zmq.RECONNECT_IVL, 100)):
                                sub.setsockopt(opt, val)
                            sub.setsockopt(zmq.SUBSCRIBE, b"")
                            sub.connect(cmd[1])
                            subs[sub] = cmd[2]
                            poller.register(sub, zmq.POLLIN)
                            self.stats["sockets"] += 1
                    except zmq.ZMQError as e:
                        self.stats["errors"] += 1
                        if op == "fetch":
                            pending.pop(cmd[1].req_id, None)
                            finish(cmd[1], exc=FetchError(f"{cmd[1].endpoint}: {e}"))
                        else:
                            logger.warning("%s: %s %s failed: %s", self.name, op, cmd[1], e)
                if stopping:
                    break
                for sock in [s for s in events if s is not self._rfd]:
                    if sock in subs:
                        self._drain_sub(sock, subs[sock])
                        continue
                    for _ in range(256):
                        try:
                            frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        try:
                            status, rid, meta, parts = wire.parse_reply(frames)
                        except wire.ProtocolError as e:
                            self.stats["errors"] += 1
                            logger.error("%s: bad reply from %s: %s", self.name, by_socket.get(sock), e)
                            frames = None
                            continue
                        rep = Reply(status, rid, meta, parts, frames)
                        del frames, parts  # the Reply holds them, or nothing does (below)
                        fut = pending.pop(rid, None)
                        if fut is None or not finish(fut, rep):
                            late(rep)  # its consumer gave up: the frames go back now
                        else:
                            self.stats["replies"] += 1
                            self.stats["bytes"] += rep.size
                        del rep
                now = time.monotonic()
                while deadlines and deadlines[0][0] <= now:
                    _, rid = heapq.heappop(deadlines)
                    fut = pending.pop(rid, None)
                    if fut is not None:
                        self.stats["timeouts"] += 1
                        finish(fut, exc=FetchTimeout(f"no reply from {fut.endpoint} within "
                                                     f"{fut.deadline - fut.t_submit:.1f} s"))
                if len(deadlines) > 4 * len(pending) + 64:  # entries of answered fetches
                    deadlines = [d for d in deadlines if d[1] in pending]
                    heapq.heapify(deadlines)
                self.stats["in_flight"] = len(pending)
        except Exception:  # noqa: BLE001
            logger.exception("%s: fetch worker failed", self.name)
        finally:
            # This thread made these sockets; it closes them.
            for fut in pending.values():
                finish(fut, exc=FetchError("fetch worker closed"))
            pending.clear()
            self.stats["in_flight"] = 0
            for sock in [*dealers.values(), *subs]:
                try:
                    sock.close(0)
                except zmq.ZMQError:
                    pass
            self.stats["sockets"] = 0
            with self._lock:
                self._closed = True
                for fd in (self._rfd, self._wfd):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            while True:  # commands that raced with the stop: their futures fail
                try:
                    cmd = self._q.get_nowait()
                except queue.Empty:
                    break
                if cmd[0] == "fetch":
                    finish(cmd[1], exc=FetchError("fetch worker closed"))

    def _drain_sub(self, sock: zmq.Socket, on_message: Callable) -> None:
        for _ in range(1024):
            try:
                msg = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                on_message(msg)
            except Exception:  # noqa: BLE001 (a bad announcement must not stop the worker)
                logger.exception("%s: subscriber callback failed", self.name)

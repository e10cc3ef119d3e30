"""The producer's payload store and the consumers' host cache.

Store: what put() left for consumers, by internal key. Keys that name the same content share
one entry (`Content`), so a payload put under several keys is held once. Memory is bounded by
a byte budget (a put that does not fit is refused, never an older payload evicted under a
consumer that has not fetched it yet), by a TTL since last use, by a count of consumers per
key, and by cleanup(). Every byte that enters is accounted for when it leaves, by cause
(`released`), so `bytes_put == held + sum(released)` always holds.

HostCache: shared payloads (several consumers) fetched by one process of a host are written to
a file in shared memory (/dev/shm) that every other consumer process of that host maps instead
of fetching again. A file appears under its final name only once complete (rename), and one
fetcher per content is elected with an advisory lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import wire

RELEASE_CAUSES = ("consumed", "cleanup", "ttl", "replaced", "close")


@dataclass
class Content:
    """Payload bytes held for one or more keys."""

    parts: list
    meta: dict[str, Any]
    nbytes: int
    keys: set = field(default_factory=set)
    trackers: list = field(default_factory=list)  # zmq.MessageTracker of every send of these bytes
    sending: int = 0  # replies being handed to the library (their trackers not yet in `trackers`)


@dataclass
class Entry:
    """One put key: its content, when it was last used, how many consumers it still waits for."""

    content_id: str
    created: float
    last_used: float
    remaining: int  # consumers still to serve; 0 = until cleanup or TTL
    served: int = 0


class Store:
    """Thread-safe producer store (see the module doc)."""

    def __init__(self, budget_bytes: int, ttl_seconds: float, consumers: int):
        self.budget = int(budget_bytes)
        self.ttl = float(ttl_seconds)
        self.consumers = int(consumers)
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # a put waiting for bytes to be released
        self._entries: dict[str, Entry] = {}
        self._contents: dict[str, Content] = {}
        self.held = 0
        self.bytes_put = 0
        self.released = {c: 0 for c in RELEASE_CAUSES}
        self.rejected = 0
        self.waits = 0  # puts that waited for room
        self.wait_s = 0.0
        self.closed = False

    def put(self, key: str, parts: list, meta: dict[str, Any], content_id: str | None,
            wait: float = 0.0) -> Content | None:
        """Stores `parts` under `key` (replacing what it held); returns the `Content` that holds
        them. Over the byte budget it waits up to `wait` seconds for bytes to be released
        (consumers served, keys cleaned up), then returns None; an older payload is never
        evicted for it."""
        now = time.monotonic()
        cid = content_id or "key:" + key
        nbytes = meta["size"]
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._unlink(key, old, "replaced")
            existing = self._contents.get(cid)
            if existing is None:
                if self.held + nbytes > self.budget:
                    self._expire(now)
                if self.held + nbytes > self.budget and wait > 0 and nbytes <= self.budget:
                    self.waits += 1
                    end = now + wait
                    while self.held + nbytes > self.budget:
                        left = end - time.monotonic()
                        if left <= 0 or self.closed:
                            break
                        self._room.wait(left)
                        self._expire(time.monotonic())
                    self.wait_s += time.monotonic() - now
                    existing = self._contents.get(cid)  # put meanwhile under another key
                if existing is None and self.held + nbytes > self.budget:
                    self.rejected += 1
                    return None
            if existing is None:
                existing = self._contents[cid] = Content(parts, dict(meta), nbytes)
                self.held += nbytes
                self.bytes_put += nbytes
            existing.keys.add(key)
            self._entries[key] = Entry(cid, now, now, self.consumers)
        return existing

    def holds(self, content: Content) -> bool:
        """Whether `content` is still held for some key."""
        with self._lock:
            return bool(content.keys)

    def content_of(self, key: str) -> Content | None:
        """The content `key` names, without touching its TTL."""
        with self._lock:
            entry = self._entries.get(key)
            return self._contents[entry.content_id] if entry is not None else None

    def lookup(self, key: str, content_id: str | None = None) -> Content | None:
        """The content for `key` (or, failing that, for `content_id`), touching its TTL."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None and content_id:
                content = self._contents.get(content_id)
                if content is not None:
                    for k in content.keys:
                        self._entries[k].last_used = time.monotonic()
                return content
            if entry is None:
                return None
            entry.last_used = time.monotonic()
            return self._contents[entry.content_id]

    def served(self, key: str) -> None:
        """Counts one delivery of `key`; releases it when its last expected consumer is served."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.served += 1
            if entry.remaining > 0:
                entry.remaining -= 1
                if entry.remaining == 0:
                    del self._entries[key]
                    self._unlink(key, entry, "consumed")

    def cleanup(self, match) -> int:
        """Releases every key for which `match(key)` is true; returns how many."""
        with self._lock:
            keys = [k for k in self._entries if match(k)]
            for k in keys:
                self._unlink(k, self._entries.pop(k), "cleanup")
        return len(keys)

    def expire(self) -> int:
        """Releases keys unused for longer than the TTL; returns how many."""
        with self._lock:
            return self._expire(time.monotonic())

    def pushable(self, edge_suffix: str) -> list[str]:
        """Keys ending in `edge_suffix` (`@from_to`) held for one consumer under their own content
        (what may be pushed), in put order."""
        with self._lock:
            return [k for k, e in self._entries.items()
                    if k.endswith(edge_suffix) and e.remaining == 1 and e.served == 0
                    and e.content_id == "key:" + k]

    def close(self) -> None:
        """Releases everything; a put waiting for room gives up."""
        with self._lock:
            self.closed = True
            for k in list(self._entries):
                self._unlink(k, self._entries.pop(k), "close")
            self._room.notify_all()

    def stats(self) -> dict[str, Any]:
        """Counts and bytes, for health()."""
        with self._lock:
            return {
                "keys_held": len(self._entries),
                "contents_held": len(self._contents),
                "bytes_held": self.held,
                "bytes_put": self.bytes_put,
                "bytes_released": dict(self.released),
                "puts_rejected_budget": self.rejected,
                "puts_waited_budget": self.waits,
                "put_wait_s": round(self.wait_s, 6),
                "budget_bytes": self.budget,
            }

    def _expire(self, now: float) -> int:
        if self.ttl <= 0:
            return 0
        stale = [k for k, e in self._entries.items() if now - e.last_used > self.ttl]
        for k in stale:
            self._unlink(k, self._entries.pop(k), "ttl")
        return len(stale)

    def _unlink(self, key: str, entry: Entry, cause: str) -> None:
        content = self._contents.get(entry.content_id)
        if content is None:
            return
        content.keys.discard(key)
        if not content.keys:
            del self._contents[entry.content_id]
            self.held -= content.nbytes
            self.released[cause] += content.nbytes
            self._room.notify_all()


# --------------------------------------------------------------------------------------------
# Host cache

_FILE_MAGIC = b"RZOHC001"
_PREFIX = struct.Struct("!8sI")  # magic, meta length
_ALIGN = 4096


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class HostCache:
    """Shared payloads of this host in files under `directory` (normally in /dev/shm)."""

    def __init__(self, directory: str, budget_bytes: int):
        self.dir = directory
        self.budget = int(budget_bytes)  # the directory is made by the first fetch that fills it

    def _path(self, content_id: str) -> str:
        return os.path.join(self.dir, hashlib.sha256(content_id.encode()).hexdigest()[:40])

    def open(self, content_id: str) -> tuple[dict[str, Any], list[memoryview], mmap.mmap] | None:
        """(meta, part views, mapping) of a cached payload, or None."""
        path = self._path(content_id)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size < _PREFIX.size:
                return None
            # Private and writable: a consumer that writes into a tensor rebuilt over the file
            # gets its own copy of that page (copy-on-write) instead of a fault, and never
            # changes what the other consumers of this host read.
            m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        try:
            magic, meta_len = _PREFIX.unpack_from(m, 0)
            if magic != _FILE_MAGIC or _PREFIX.size + meta_len > size:
                raise wire.ProtocolError("not a cache file")
            meta = json.loads(m[_PREFIX.size:_PREFIX.size + meta_len])
            wire.check_meta(meta)
            if meta.get("content") != content_id:
                raise wire.ProtocolError("cache file of another content")
            view = memoryview(m)
            views, off = [], meta["offset"]
            for n in meta["parts"]:
                if off + n > size:
                    raise wire.ProtocolError("cache file truncated")
                views.append(view[off:off + n])
                off = _align(off + n, 64)
        except (wire.ProtocolError, ValueError, struct.error):
            view = views = None
            try:
                m.close()
            except BufferError:
                pass
            self._unlink(path)  # damaged: fetch again
            return None
        try:
            os.utime(path)  # recency for eviction
        except OSError:  # evicted meanwhile by another process: the mapping stays valid
            pass
        return meta, views, m

    def lock(self, content_id: str, deadline: float):
        """An exclusive lock on fetching `content_id` (a file object to pass to `unlock`), or None
        when the deadline passes first."""
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        f = open(self._path(content_id) + ".lock", "wb")
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return f
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    f.close()
                    return None
                time.sleep(0.002)

    @staticmethod
    def unlock(f) -> None:
        """Lets the next fetcher of that content go."""
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()

    def store(self, content_id: str, meta: dict[str, Any], parts: list[memoryview]) -> None:
        """Writes a fetched payload for the other consumers of this host (complete, or not at all)."""
        meta = dict(meta, content=content_id)
        head = json.dumps(dict(meta, offset=0)).encode()
        offset = _align(_PREFIX.size + len(head) + 32, _ALIGN)
        head = json.dumps(dict(meta, offset=offset)).encode()
        path = self._path(content_id)
        tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
        try:
            with open(tmp, "wb") as f:
                f.write(_PREFIX.pack(_FILE_MAGIC, len(head)) + head)
                off = offset
                for p in parts:
                    f.seek(off)
                    f.write(p)
                    off = _align(off + memoryview(p).nbytes, 64)
                f.truncate(max(off, offset))
            os.rename(tmp, path)
        except OSError:
            self._unlink(tmp)
            raise
        self._evict(keep=path)

    def _evict(self, keep: str) -> None:
        try:
            names = [n for n in os.listdir(self.dir) if len(n) == 40]
        except OSError:
            return
        files = []
        for n in names:
            p = os.path.join(self.dir, n)
            try:
                st = os.stat(p)
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(s for _, s, _ in files)
        for _, size, p in sorted(files):
            if total <= self.budget:
                break
            if p != keep:
                self._unlink(p)  # mapped readers keep their pages until they let go
                total -= size

    @staticmethod
    def _unlink(path: str) -> None:
        try:
            os.unlink(path)
        except OSError:
            pass

"""Push delivery: a producer sends each payload to its consumer as soon as put() is called.

Pulling costs a round trip per key and makes consumers poll. When a producer knows its consumer
(the consumer subscribed to an edge, `key@from_to`, and is that edge's only subscriber), it
sends each payload of the edge to the consumer's inbox the moment put() stores it; the
consumer's get() is then a lookup in local memory. Memory stays bounded on both sides by
credits, as in rzmq's RDMA ring: the consumer grants each producer connection `budget` bytes;
the producer sends only what fits in the credit it holds (one payload larger than the whole
budget goes alone, when nothing is outstanding); the consumer returns credit as get() takes
payloads out. A producer without credit keeps the payload in its store (bounded by its own
byte budget, where put() waits: the producer is told) and sends it when credit comes back, in
put order. Nothing is dropped.

Pull stays for what push cannot serve: shared payloads (one payload, many consumers; the host
cache), an edge with several subscribers (the producer cannot tell which one a key is for), and
producers that do not push (older ones answer SUBSCRIBE with BAD_REQUEST).

This module is bookkeeping only (no sockets, no threads), so its rules are testable alone:
`Inbox` is the consumer's half, `Routes` the producer's; connector.py moves the frames. vLLM's
EC connector (rzmq.vllm) can reuse both: an encoder pushing announced embeddings to the prefill
instances that subscribed is the same shape.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable


def edge_of(key: str) -> str:
    """The edge (`from_to`) of an internal key `put_key@from_to` ("" when it has none)."""
    head, sep, edge = key.rpartition("@")
    return edge if sep and head else ""


# ------------------------------------------------------------------------------------------
# Consumer side


@dataclass
class Pushed:
    """One payload in the inbox: what get() decodes, and where its credit goes back."""

    meta: dict[str, Any]
    parts: list  # zmq.Frame objects (the received memory, no copy)
    frames: list  # the whole message, kept alive while a decoded object uses it
    source: str  # the producer's endpoint
    nbytes: int
    arrived: float  # time.time() when the inbox got it (for traces)
    arrived_mono: float = field(default_factory=time.monotonic)


class Inbox:
    """Payloads pushed to this consumer, by internal key; thread-safe.

    `budget` bytes per producer endpoint (the credit each producer is granted). Credit comes
    back in batches (a quarter of the budget) or as soon as nothing from that producer is held,
    so a producer never waits on credit the consumer has already freed.
    """

    def __init__(self, budget: int, ttl: float = 0.0):
        if budget <= 0:
            raise ValueError(f"inbox budget must be positive, not {budget}")
        self.budget = int(budget)
        self.ttl = float(ttl)
        self._cond = threading.Condition()
        self._items: OrderedDict[str, Pushed] = OrderedDict()
        self._held: dict[str, int] = {}  # bytes held per source
        self._owed: dict[str, int] = {}  # bytes taken out, credit not yet returned, per source
        self.generation = 0
        self.closed = False
        self.stats = {"pushed": 0, "pushed_bytes": 0, "taken": 0, "expired": 0, "expired_bytes": 0,
                      "dropped": 0, "replaced": 0, "credit_returned": 0, "max_held": 0}

    # -- the receiving thread

    def add(self, key: str, item: Pushed) -> None:
        """Stores a pushed payload (a later push of the same key replaces it) and wakes waiters."""
        with self._cond:
            old = self._items.pop(key, None)
            if old is not None:
                self._forget(old)
                self.stats["replaced"] += 1
            self._items[key] = item
            self._held[item.source] = self._held.get(item.source, 0) + item.nbytes
            self.stats["pushed"] += 1
            self.stats["pushed_bytes"] += item.nbytes
            self.stats["max_held"] = max(self.stats["max_held"], self.held())
            self.generation += 1
            self._cond.notify_all()

    def available(self, source: str) -> int:
        """Credit this consumer can grant `source` now: its budget less what it holds of it."""
        with self._cond:
            return max(0, self.budget - self._held.get(source, 0))

    def reset_source(self, source: str) -> None:
        """A producer (re)granted fresh credit: what it was owed is void (its new grant counts it)."""
        with self._cond:
            self._owed.pop(source, None)

    # -- callers of get()

    def take(self, key: str) -> Pushed | None:
        """Removes and returns the payload of `key`, or None when it has not arrived."""
        with self._cond:
            item = self._items.pop(key, None)
            if item is not None:
                self._forget(item)
                self._owed[item.source] = self._owed.get(item.source, 0) + item.nbytes
                self.stats["taken"] += 1
            return item

    def wait_take(self, key: str, deadline: float) -> Pushed | None:
        """take(), waiting until `deadline` (time.monotonic()) for the payload to arrive."""
        with self._cond:
            while True:
                item = self._items.get(key)
                if item is not None:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return None
                self._cond.wait(left)
        return self.take(key)

    def credit_due(self, source: str) -> int:
        """Bytes of credit to return to `source` now (0: not yet), and forgets them."""
        with self._cond:
            owed = self._owed.get(source, 0)
            if owed and (owed >= self.budget // 4 or not self._held.get(source)):
                self._owed[source] = 0
                self.stats["credit_returned"] += owed
                return owed
            return 0

    def flush_credit(self, source: str) -> int:
        """All credit owed to `source` (the periodic flush), and forgets it."""
        with self._cond:
            owed = self._owed.pop(source, 0)
            self.stats["credit_returned"] += owed
            return owed

    def owed(self) -> dict[str, int]:
        """Credit owed per source (for a periodic flush)."""
        with self._cond:
            return {s: n for s, n in self._owed.items() if n}

    def has(self, key: str) -> bool:
        """Whether the payload of `key` is here."""
        with self._cond:
            return key in self._items

    def drop(self, match: Callable[[str], bool], cause: str = "dropped") -> int:
        """Removes every payload whose key matches (cleanup); their credit goes back."""
        with self._cond:
            keys = [k for k in self._items if match(k)]
            for k in keys:
                item = self._items.pop(k)
                self._forget(item)
                self._owed[item.source] = self._owed.get(item.source, 0) + item.nbytes
                self.stats[cause] += 1
                if cause == "expired":
                    self.stats["expired_bytes"] += item.nbytes
            return len(keys)

    def expire(self) -> int:
        """Drops payloads older than the TTL (a consumer that will never ask: an aborted request)."""
        if self.ttl <= 0:
            return 0
        limit = time.monotonic() - self.ttl
        with self._cond:
            old = [k for k, v in self._items.items() if v.arrived_mono < limit]
        return self.drop(lambda k: k in old, "expired") if old else 0

    # -- wake-ups (vllm-omni's newer receive loops wait on these instead of polling)

    def wait_for_change(self, generation: int, timeout: float) -> bool:
        """Blocks until a payload arrived since `generation`, or `timeout` seconds; True if one did."""
        end = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self.generation == generation and not self.closed:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return self.generation != generation

    def close(self) -> list[Pushed]:
        """Wakes every waiter for good; returns what was held (the caller releases it)."""
        with self._cond:
            self.closed = True
            items = list(self._items.values())
            self._items.clear()
            self._held.clear()
            self._cond.notify_all()
            return items

    def held(self, source: str | None = None) -> int:
        """Bytes held (for one source, or all)."""
        with self._cond:
            return self._held.get(source, 0) if source is not None else sum(self._held.values())

    def snapshot(self) -> dict[str, Any]:
        """Counters for health()."""
        with self._cond:
            return {"inbox_keys": len(self._items), "inbox_bytes": sum(self._held.values()),
                    "inbox_budget": self.budget, **{f"inbox_{k}": v for k, v in self.stats.items()}}

    def _forget(self, item: Pushed) -> None:
        left = self._held.get(item.source, 0) - item.nbytes
        if left > 0:
            self._held[item.source] = left
        else:
            self._held.pop(item.source, None)


# ------------------------------------------------------------------------------------------
# Producer side


@dataclass
class Subscriber:
    """One consumer connection (a ROUTER identity) and what it may be sent."""

    identity: bytes
    grant: int  # the credit granted at subscription: all of it held means nothing is outstanding
    credit: int
    edges: set = field(default_factory=set)
    queue: deque = field(default_factory=deque)  # keys to push, in put order
    queued: set = field(default_factory=set)
    stalls: int = 0  # times the head of the queue waited for credit


class Routes:
    """Which consumer each pushed key goes to, and when it may go (the credit rule).

    An edge pushes while it has exactly one subscriber; a second subscriber turns push off for
    that edge (every subscriber is told, and they pull), since a key does not say which of them
    it is for.
    """

    def __init__(self):
        self.subs: dict[bytes, Subscriber] = {}
        self.by_edge: dict[str, list[bytes]] = {}
        self.no_push: set[str] = set()  # edges with several subscribers (pull only)

    def subscribe(self, identity: bytes, edge: str, credit: int) -> tuple[bool, bool, list[bytes]]:
        """Registers `identity` for `edge`. Returns (known: it was already subscribed, push: the
        edge pushes to it, told: subscribers to tell that push is off for the edge)."""
        sub = self.subs.get(identity)
        known = sub is not None
        if sub is None:
            sub = self.subs[identity] = Subscriber(identity, max(0, int(credit)), max(0, int(credit)))
        told = []
        if edge not in sub.edges:
            sub.edges.add(edge)
            members = self.by_edge.setdefault(edge, [])
            members.append(identity)
            if len(members) > 1 and edge not in self.no_push:
                self.no_push.add(edge)
                told = [m for m in members if m != identity]
        return known, edge not in self.no_push, told

    def drop(self, identity: bytes) -> Subscriber | None:
        """Forgets a consumer that went away (its queued keys stay in the store, for a pull)."""
        sub = self.subs.pop(identity, None)
        if sub is not None:
            for edge in sub.edges:
                members = self.by_edge.get(edge, [])
                if identity in members:
                    members.remove(identity)
                if not members:
                    self.by_edge.pop(edge, None)
        return sub

    def target(self, edge: str) -> Subscriber | None:
        """The consumer a key of `edge` is pushed to, or None (no subscriber, or several)."""
        if edge in self.no_push:
            return None
        members = self.by_edge.get(edge)
        if not members or len(members) != 1:
            return None
        return self.subs.get(members[0])

    def pushes(self, edge: str) -> bool:
        """Whether a put on `edge` is pushed now."""
        return self.target(edge) is not None

    @staticmethod
    def enqueue(sub: Subscriber, key: str) -> bool:
        """Queues `key` for `sub` (once); False when it is already queued."""
        if key in sub.queued:
            return False
        sub.queued.add(key)
        sub.queue.append(key)
        return True

    @staticmethod
    def may_send(sub: Subscriber, nbytes: int) -> bool:
        """Whether the head of `sub`'s queue (`nbytes`) fits its credit. A payload larger than the
        whole grant goes when nothing is outstanding (credit back at the full grant)."""
        return nbytes <= sub.credit or sub.credit >= sub.grant

    @staticmethod
    def sent(sub: Subscriber, key: str, nbytes: int) -> None:
        """Accounts one push."""
        sub.credit -= nbytes
        sub.queued.discard(key)

    @staticmethod
    def skip(sub: Subscriber, key: str) -> None:
        """Removes a queued key whose payload is gone (cleaned up, expired, pulled)."""
        sub.queued.discard(key)

    def credit(self, identity: bytes, nbytes: int) -> Subscriber | None:
        """Credit returned by a consumer."""
        sub = self.subs.get(identity)
        if sub is not None:
            sub.credit = min(sub.grant, sub.credit + max(0, int(nbytes)))
        return sub

"""RzmqECConnector: vLLM's encoder-cache connector over rzmq.

An encoder instance (ec_producer) computes multimodal embeddings; prefill or prefill/decode
instances (ec_consumer) use them instead of running their own encoder. Embeddings are named by
vLLM's mm_hash (a hash of the media and the model), so the same picture is encoded once and
fetched once per host, whichever request or instance asks for it.

The shape is vLLM's own connectors': this class is a thin facade over
- a worker half (ec_worker.RzmqECWorker): the producer keeps each embedding where vLLM computed
  it (a reference in the RzmqConnector store, no copy) and announces it on an XPUB socket owned
  by its announcer thread; the consumer maps the host cache entry into vLLM's encoder cache;
- a scheduler half (ec_scheduler.RzmqECScheduler): the consumer's index of announced embeddings
  (`has_cache_item` is a lookup) and the fetches into the host cache, through the RzmqConnector's
  fetch worker, the one thread that owns the consumer's sockets;
and they exchange typed metadata (metadata.RzmqECMetadata). Announcements carry the protocol
version and a compatibility hash, which the consumer checks. Fetch figures reach vLLM's stats
where vLLM has EC stats (0.32 on: its log lines and /metrics), and `health()` everywhere.

Config (`--ec-transfer-config`): `ec_ip`/`ec_port` are the producer's advertised address and
data port (announcements on ec_port + 1); `ec_connector_extra_config` takes
    producers           consumers: producer addresses, "host:port" (default [ec_ip:ec_port])
    bind_host           producers: address to listen on (default every interface)
    memory_pool_size    producers: bytes of embeddings held (default 4 GiB)
    buffer_ttl_seconds  producers: an embedding unused this long is released (default 600)
    fetch_timeout       consumers: seconds a fetch may take before its requests fail (default 30)
    announce_wait       consumers: seconds a request waits for its picture's announcement before
                        this instance encodes the picture itself (default 1; 0: at once)
    push_bytes          producers: an embedding of at most this many bytes is pushed with its
                        announcement into every subscribed consumer host's cache, so the consumer
                        never waits for a fetch (default 1 MiB; 0: announce only, consumers fetch)
    rdma                "auto" or "require", as RzmqConnector
    host_cache_dir, host_cache_bytes   the host cache (default /dev/shm/rzmq-ec-<uid>, 4 GiB)
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from vllm.distributed.ec_transfer.ec_connector.base import ECConnectorBase, ECConnectorMetadata, ECConnectorRole

from ..omni.connector import RzmqConnector
from .ec_scheduler import RzmqECScheduler, endpoint_parts
from .ec_worker import RzmqECWorker
from .metadata import RzmqECMetadata, advertised_host, ec_compat_hash
from .stats import RzmqECConnectorStats, RzmqECPromMetrics

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

__all__ = ["RzmqECConnector", "RzmqECMetadata"]

logger = logging.getLogger("rzmq.vllm.ec")


class RzmqECConnector(ECConnectorBase):
    """vLLM EC connector moving encoder embeddings over rzmq (RDMA between rzmq hosts, else TCP)."""

    def __init__(self, vllm_config: VllmConfig, role: ECConnectorRole):
        super().__init__(vllm_config=vllm_config, role=role)
        cfg = vllm_config.ec_transfer_config
        extra = dict(cfg.ec_connector_extra_config or {})
        self._host = advertised_host(extra.get("host") or cfg.ec_ip)
        self._port = int(extra.get("port", cfg.ec_port))
        producers = extra.get("producers") or [f"{self._host}:{self._port}"]
        self._producers = [endpoint_parts(p) for p in producers]
        fetch_timeout = float(extra.get("fetch_timeout", 30.0))
        compat = ec_compat_hash(vllm_config)
        peer_config = {
            "host": self._host,
            "bind_host": extra.get("bind_host", "0.0.0.0"),
            "rdma": extra.get("rdma", "auto"),
            "memory_pool_size": int(extra.get("memory_pool_size", 4 << 30)),
            "buffer_ttl_seconds": float(extra.get("buffer_ttl_seconds", 600.0)),
            "consumers": 0,  # any number of consumers: held until its TTL or the budget
            "get_timeout": fetch_timeout,
            "host_cache": True,
            "host_cache_dir": extra.get("host_cache_dir") or f"/dev/shm/rzmq-ec-{os.getuid()}",
            "host_cache_bytes": int(extra.get("host_cache_bytes", 4 << 30)),
        }
        self.scheduler: RzmqECScheduler | None = None
        self.worker: RzmqECWorker | None = None
        self._sched_peer: RzmqConnector | None = None
        self._loads: list[str] = []
        if role == ECConnectorRole.SCHEDULER:
            if self.is_consumer:
                self._sched_peer = RzmqConnector({**peer_config, "role": "receiver"})
                self.scheduler = RzmqECScheduler(self._sched_peer, self._producers, fetch_timeout,
                                                 float(extra.get("announce_wait", 1.0)), compat)
        else:
            self.worker = RzmqECWorker(peer_config, self._host, self._port, self._producers, self.is_producer,
                                       self.is_consumer, compat, int(extra.get("push_bytes", 1 << 20)))
        logger.info("RzmqECConnector: %s %s producer=%s consumer=%s producers=%s", role.name,
                    self._peer.endpoint if self._peer else None, self.is_producer, self.is_consumer,
                    producers if self.is_consumer else None)

    @property
    def _peer(self) -> RzmqConnector | None:
        """This half's transport."""
        return self.worker.peer if self.worker is not None else self._sched_peer

    @property
    def _index(self) -> RzmqECScheduler | None:
        return self.scheduler

    @property
    def stats(self) -> dict[str, int]:
        """This half's counts: saved/loaded (worker), fetched/fetch_failures (scheduler)."""
        if self.worker is not None:
            return self.worker.stats
        return self.scheduler.stats if self.scheduler is not None else {}

    # ------------------------------------------------------------------ worker side

    def save_caches(self, encoder_cache: dict[str, Any], mm_hash: str, **kwargs) -> None:
        """Producer: keeps the embedding (a reference, no copy) and announces it."""
        if self.worker is not None:
            self.worker.save(encoder_cache, mm_hash)

    def start_load_caches(self, encoder_cache: dict[str, Any], **kwargs) -> None:
        """Consumer: puts this step's embeddings, mapped from the host cache, into vLLM's cache."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, RzmqECMetadata)
        if self.worker is not None:
            self.worker.load(meta, encoder_cache)

    # ------------------------------------------------------------------ scheduler side

    def has_cache_item(self, identifier: str) -> bool:
        """Whether a producer announced `identifier` (or this host holds it): no round trip."""
        return self.scheduler is not None and self.scheduler.knows(identifier)

    def ensure_cache_available(self, request: Request, num_computed_tokens: int) -> bool:
        """Holds `request` back until every announced embedding it still needs is on this host."""
        if self.scheduler is None:
            return True
        ready = True
        hints = getattr(request, "ec_transfer_params", None) or {}
        for feature in request.mm_features:
            pos = feature.mm_position
            if pos.offset + pos.length <= num_computed_tokens:
                continue
            self.scheduler.hint(feature.identifier, hints.get(feature.identifier))
            ready &= self.scheduler.ensure(feature.identifier, request.request_id)
        return ready

    def take_unavailable_requests(self) -> set[str]:
        """Requests whose embeddings could not be fetched: vLLM fails them."""
        return self.scheduler.take_failed() if self.scheduler is not None else set()

    def update_state_after_alloc(self, request: Request, index: int) -> None:
        """Loads the item from the host cache in the next step when a producer made it."""
        mm_hash = request.mm_features[index].identifier
        if self.scheduler is not None and self.scheduler.local(mm_hash):
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

    # ------------------------------------------------------------------ stats

    def get_ec_connector_stats(self):
        """vLLM 0.32 on: the scheduler's fetches since vLLM last asked."""
        if RzmqECConnectorStats is None:
            return None
        data = self.scheduler.take_stats() if self.scheduler is not None else self.worker.recorder.take() \
            if self.worker is not None else None
        return RzmqECConnectorStats(data=data) if data else None

    @classmethod
    def build_ec_connector_stats(cls, data: dict[str, Any] | None = None):
        if RzmqECConnectorStats is None:
            return None
        return RzmqECConnectorStats(data=data) if data is not None else RzmqECConnectorStats()

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        if RzmqECPromMetrics is None:
            return None
        return RzmqECPromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    def health(self) -> dict[str, Any]:
        """This side's accounting: the connector's counts, transfers, the transport's counters and store."""
        out: dict[str, Any] = {"connector": dict(self.stats)}
        if self.scheduler is not None:
            with self.scheduler._lock:
                known = len(self.scheduler.known)
            out["index"] = {"known": known, "held_requests": sum(len(f.waiting) for f in
                                                                  self.scheduler._fetching.values())}
            out["transfers"] = dict(self.scheduler.recorder.totals)
            out["held_bytes"] = self.scheduler.held_bytes()
        if self.worker is not None:
            if self.worker.announcer is not None:
                out["announced"] = len(self.worker.announcer.live)
            out["transfers"] = dict(self.worker.recorder.totals)
            out["held_bytes"] = self.worker.held_bytes()
        if self._peer is not None:
            out["transport"] = self._peer.health()
            if self._peer._fetcher is not None:
                out["fetch"] = dict(self._peer._fetcher.stats)
        return out

    def shutdown(self) -> None:
        """Stops the threads (each closes its own sockets; bounded waits) and the store."""
        if self.scheduler is not None:
            self.scheduler.close()
        for part in (self.worker, self._sched_peer):
            if part is not None:
                part.close()
        self.scheduler = self.worker = self._sched_peer = None

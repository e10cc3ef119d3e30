"""RzmqKVConnector: vLLM's KV connector over rzmq, prefill instance -> decode instance.

The flow is vLLM's P/D one (its toy proxy, or any proxy that does the same):
1. the proxy sends the request to the prefill instance (kv_producer) with max_tokens=1 and
   `kv_transfer_params: {"do_remote_decode": true}`;
2. as each attention layer of the request's last prefill step finishes, `save_kv_layer` leaves
   the request's blocks of that layer in the producer's store: views of vLLM's registered KV
   cache, one frame per block, no copy. The transfer of a layer can begin while the next layers
   are still being computed;
3. the prefill's `request_finished` keeps the blocks (vLLM frees them once `get_finished` says
   so) and returns `kv_transfer_params` naming the producer and its protocol version, which the
   proxy passes on;
4. the decode instance (kv_consumer) checks the version and compatibility, and admits the
   request with every prompt token but the last already computed (`get_num_new_matched_tokens`).
   Its worker asks for the layers in order (`start_load_kv`), and each attention layer waits for
   its own layer only (`wait_for_layer_load`) and copies the received blocks into its KV cache.
   Over RDMA the producer's blocks are read straight out of its KV cache by the consumer's NIC
   (rendezvous READ into rzmq's registered receive buffer), then copied once into the consumer's
   blocks;
5. each layer is released at the producer when delivered, after `buffer_ttl_seconds` if no
   consumer comes, or at once when the request is aborted; `get_finished` then hands the blocks
   back to vLLM.

A layer that does not arrive within `load_timeout` (producer killed, slow, released,
unreachable) marks the request's blocks as failed (`get_block_ids_with_load_errors`): vLLM fails
the request with an error (its default kv_load_failure_policy "fail") or recomputes it
("recompute"). What comes later is released as it arrives. Nothing waits longer than
`load_timeout`.

The shape is vLLM's own connectors': this class is a thin facade over a scheduler half
(kv_scheduler.RzmqKVScheduler, in the engine core: no socket) and a worker half
(kv_worker.RzmqKVWorker, in each worker: the transport), which exchange typed metadata
(metadata.RzmqKVMetadata). Transfer figures go to vLLM's stats (stats.RzmqKVConnectorStats:
its log lines and /metrics) and to `health()`.

Config (`--kv-transfer-config`): `kv_port` is the producer's port (tensor-parallel rank r
listens on kv_port + r); `kv_connector_extra_config` takes
    host                the producer's advertised address (vLLM 0.30's `kv_ip` also works;
                        default this host's address)
    bind_host           producers: address to listen on (default every interface)
    buffer_ttl_seconds  producers: a layer no consumer fetched is released after this (default 120)
    memory_pool_size    producers: bytes of KV referenced at once (default 64 GiB: the KV cache
                        itself; nothing is copied)
    load_timeout        consumers: seconds a layer may take (default 30)
    layers_in_flight    consumers: layers asked for ahead of the forward (default 4)
    rdma                "auto" or "require", as RzmqConnector
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole

from .kv_scheduler import RzmqKVScheduler
from .kv_worker import RzmqKVWorker
from .metadata import LoadReq, RzmqKVMetadata, SaveReq
from .stats import RzmqKVConnectorStats, RzmqKVPromMetrics

try:  # vLLM 0.32 on: where a connector's prefix hits come from (this one: another instance)
    from vllm.v1.metrics.cache_hit_source import CacheHitSource
except ImportError:  # vLLM 0.30
    CacheHitSource = None

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

__all__ = ["LoadReq", "RzmqKVConnector", "RzmqKVMetadata", "SaveReq"]

logger = logging.getLogger("rzmq.vllm.kv")


class RzmqKVConnector(KVConnectorBase_V1):
    """vLLM KV connector moving KV blocks layer by layer over rzmq (RDMA between rzmq hosts, else TCP)."""

    if CacheHitSource is not None:
        _cache_hit_source = CacheHitSource.P2P

    def __init__(self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig | None = None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        cfg = self._kv_transfer_config
        extra = dict(cfg.kv_connector_extra_config or {})
        self.scheduler: RzmqKVScheduler | None = None
        self.worker: RzmqKVWorker | None = None
        if role == KVConnectorRole.SCHEDULER:
            self.scheduler = RzmqKVScheduler(vllm_config, cfg, extra)
        else:
            self.worker = RzmqKVWorker(vllm_config, cfg, extra, kv_cache_config)
        logger.info("RzmqKVConnector: %s producer=%s consumer=%s endpoint=%s", role.name, cfg.is_kv_producer,
                    cfg.is_kv_consumer, self.worker.peer.endpoint if self.worker else None)

    @property
    def stats(self) -> dict[str, int]:
        """This half's counts (the scheduler's requests, or the worker's layers and bytes)."""
        return self.worker.stats if self.worker is not None else self.scheduler.stats

    @property
    def _peer(self):
        """The worker's transport (None on the scheduler side)."""
        return self.worker.peer if self.worker is not None else None

    # ------------------------------------------------------------------ scheduler side

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        return self.scheduler.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int):
        self.scheduler.update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        return self.scheduler.build_connector_meta(scheduler_output)

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        return self.scheduler.request_finished(request, block_ids)

    # ------------------------------------------------------------------ worker side

    def register_kv_caches(self, kv_caches: dict[str, Any]):
        self.worker.register_kv_caches(kv_caches)

    def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs: Any) -> None:
        """Producer: leaves this layer's blocks of each request completing its prefill (no copy)."""
        if self.worker.producer:
            meta = self._get_connector_metadata()
            assert isinstance(meta, RzmqKVMetadata)
            self.worker.save_kv_layer(meta, layer_name, kv_layer)

    def wait_for_save(self):
        """Nothing to wait for: saved layers are references to the KV cache, which vLLM keeps
        (delay_free) until get_finished says every layer was delivered."""

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        assert isinstance(meta, RzmqKVMetadata)
        self.worker.start_load(meta)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self.worker.wait_for_layer(layer_name)

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose layers did not come (reported once)."""
        return self.worker.take_failed_blocks()

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """Producer: finished requests whose layers were all delivered, expired or released."""
        self.worker.end_forward()
        if not self.worker.producer:
            return None, None
        return self.worker.finished_sending(finished_req_ids), None

    # ------------------------------------------------------------------ stats

    def get_kv_connector_stats(self) -> RzmqKVConnectorStats | None:
        """The worker's transfers since vLLM last asked (None on the scheduler side)."""
        if self.worker is None:
            return None
        data = self.worker.take_stats()
        return RzmqKVConnectorStats(data=data) if data else None

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None) -> RzmqKVConnectorStats:
        return RzmqKVConnectorStats(data=data) if data is not None else RzmqKVConnectorStats()

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues) -> RzmqKVPromMetrics:
        return RzmqKVPromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    def health(self) -> dict[str, Any]:
        """This side's accounting: the connector's counts, transfers, held bytes, the transport."""
        if self.worker is not None:
            return self.worker.health()
        return {"connector": dict(self.scheduler.stats)}

    def shutdown(self):
        """Closes the transport (its threads close their own sockets; bounded wait)."""
        if self.worker is not None:
            self.worker.close()

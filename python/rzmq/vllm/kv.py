"""RzmqKVConnector: vLLM's KV connector over rzmq, prefill instance -> decode instance.

The flow is vLLM's P/D one (its toy proxy, or any proxy that does the same):
1. the proxy sends the request to the prefill instance (kv_producer) with max_tokens=1 and
   `kv_transfer_params: {"do_remote_decode": true}`;
2. as each attention layer of the request's last prefill step finishes, `save_kv_layer` leaves
   the request's blocks of that layer in the producer's store: views of vLLM's registered KV
   cache, one frame per block, no copy. The transfer of a layer can begin while the next layers
   are still being computed;
3. the prefill's `request_finished` keeps the blocks (vLLM frees them once `get_finished` says
   so) and returns `kv_transfer_params` naming the producer, which the proxy passes on;
4. the decode instance (kv_consumer) admits the request with every prompt token but the last
   already computed (`get_num_new_matched_tokens`). Its worker starts fetching the layers in
   order (`start_load_kv`), and each attention layer waits for its own layer only
   (`wait_for_layer_load`) and copies the received blocks into its KV cache (whole blocks: a
   backend's block interior need not be token-major). Over RDMA the
   producer's blocks are read straight out of its KV cache by the consumer's NIC (rendezvous READ
   into rzmq's registered receive buffer), then copied once into the consumer's blocks;
5. each layer is released at the producer when delivered, after `buffer_ttl_seconds` if no
   consumer comes, or at once when the request is aborted; `get_finished` then hands the blocks
   back to vLLM.

A layer that does not arrive within `load_timeout` (producer killed, released, unreachable)
marks the request's blocks as failed (`get_block_ids_with_load_errors`): vLLM fails the request
with an error (its default kv_load_failure_policy "fail") or recomputes it ("recompute"). Nothing
waits longer than `load_timeout`.

Config (`--kv-transfer-config`): `kv_ip`/`kv_port` are the producer's advertised address and
port (tensor-parallel rank r listens on kv_port + r); `kv_connector_extra_config` takes
    bind_host           producers: address to listen on (default every interface)
    buffer_ttl_seconds  producers: a layer no consumer fetched is released after this (default 120)
    memory_pool_size    producers: bytes of KV referenced at once (default 64 GiB: the KV cache
                        itself; nothing is copied)
    load_timeout        consumers: seconds a layer may take (default 30)
    rdma                "auto" or "require", as RzmqConnector
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from ..omni import payload
from ..omni.connector import RzmqConnector

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

logger = logging.getLogger("rzmq.vllm.kv")

STAGE = "kv"  # the RzmqConnector key suffix (`<request>/<layer>@kv_kv`)


@dataclass
class SaveReq:
    """Producer: a request whose prefill completes this step, and its blocks in token order."""

    req_id: str
    block_ids: list[int]
    num_tokens: int


@dataclass
class LoadReq:
    """Consumer: tokens [start, end) of a request come from the producer into `block_ids`."""

    req_id: str
    remote_req_id: str
    host: str
    port: int
    block_ids: list[int]
    start: int
    end: int


@dataclass
class RzmqKVMetadata(KVConnectorMetadata):
    """One step's saves, loads and releases (aborted requests whose saved layers go)."""

    saves: list[SaveReq] = field(default_factory=list)
    loads: list[LoadReq] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)


class RzmqKVConnector(KVConnectorBase_V1):
    """vLLM KV connector moving KV blocks layer by layer over rzmq (RDMA between rzmq hosts, else TCP)."""

    def __init__(self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig | None = None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        cfg = self._kv_transfer_config
        extra = dict(cfg.kv_connector_extra_config or {})
        self._producer = bool(cfg.is_kv_producer)
        self._consumer = bool(cfg.is_kv_consumer)
        self._host = str(cfg.kv_ip)
        self._port = int(cfg.kv_port)
        self._block_size = int(vllm_config.cache_config.block_size)
        self._load_timeout = float(extra.get("load_timeout", 30.0))
        peer_config = {
            "host": self._host,
            "bind_host": extra.get("bind_host", "0.0.0.0"),
            "rdma": extra.get("rdma", "auto"),
            "memory_pool_size": int(extra.get("memory_pool_size", 64 << 30)),
            "buffer_ttl_seconds": float(extra.get("buffer_ttl_seconds", 120.0)),
            "consumers": 1,
            "get_timeout": self._load_timeout,
            "host_cache": False,
        }
        # scheduler state
        self._saving: dict[str, tuple[list[int], int]] = {}  # producer: req -> (blocks, prompt tokens)
        self._saved: set[str] = set()
        self._releases: list[str] = []
        self._local_computed: dict[str, int] = {}  # consumer: req -> tokens it had before the load
        self._loads: list[LoadReq] = []
        # worker state
        self._peer: RzmqConnector | None = None
        self._kv: dict[str, Any] = {}
        self._layers: list[str] = []
        self._sends: dict[str, list] = {}  # producer: req -> trackers of its layers
        self._finishing: set[str] = set()
        self._loading: dict[str, LoadReq] = {}  # consumer: this forward's loads
        self._failed_loads: set[str] = set()
        self._loader: _Loader | None = None
        self._failed_blocks: set[int] = set()
        self.stats = {"layers_saved": 0, "blocks_saved": 0, "bytes_saved": 0, "layers_loaded": 0,
                      "blocks_loaded": 0, "bytes_loaded": 0, "copies": 0, "load_failures": 0}
        if role == KVConnectorRole.WORKER:
            rank = _tp_rank()
            if self._producer:
                self._peer = RzmqConnector({**peer_config, "role": "sender", "zmq_port": self._port + rank})
            else:
                self._peer = RzmqConnector({**peer_config, "role": "receiver"})
            self._rank = rank
        logger.info("RzmqKVConnector: %s producer=%s consumer=%s endpoint=%s", role.name, self._producer,
                    self._consumer, self._peer.endpoint if self._peer else None)

    # ------------------------------------------------------------------ scheduler

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        """Consumer: every prompt token but the last comes from the producer (loaded layer by
        layer inside the first forward, so not asynchronously)."""
        params = request.kv_transfer_params
        if not self._consumer or not params or not params.get("do_remote_prefill"):
            return 0, False
        prompt = len(request.prompt_token_ids or [])
        if int(params.get("num_tokens", -1)) != prompt:
            logger.warning("RzmqKVConnector: request %s: the producer prefilled %s tokens, this prompt has %d; "
                           "computing it here", request.request_id, params.get("num_tokens"), prompt)
            return 0, False
        count = prompt - 1 - num_computed_tokens
        if count <= 0:
            return 0, False
        self._local_computed[request.request_id] = num_computed_tokens
        return count, False

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int):
        """Consumer: the blocks the producer's KV goes into, loaded in the next forward."""
        params = request.kv_transfer_params
        start = self._local_computed.pop(request.request_id, None)
        if num_external_tokens <= 0 or start is None or not params:
            return
        params["do_remote_prefill"] = False  # once: a preempted request recomputes
        self._loads.append(LoadReq(req_id=request.request_id, remote_req_id=str(params["remote_request_id"]),
                                   host=str(params["remote_host"]), port=int(params["remote_port"]),
                                   block_ids=list(blocks.get_block_ids()[0]), start=start,
                                   end=start + num_external_tokens))

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        """This step's saves (requests whose prefill completes in it), loads and releases."""
        meta = RzmqKVMetadata(loads=self._loads, releases=self._releases)
        self._loads, self._releases = [], []
        if not self._producer:
            return meta
        scheduled = scheduler_output.num_scheduled_tokens
        for new in scheduler_output.scheduled_new_reqs:
            params = new.sampling_params.extra_args.get("kv_transfer_params") if (
                new.sampling_params is not None and new.sampling_params.extra_args) else None
            if not params or not params.get("do_remote_decode"):
                continue
            prompt = len(new.prompt_token_ids or [])
            self._saving[new.req_id] = (list(new.block_ids[0]), prompt)
            self._maybe_save(meta, new.req_id, new.num_computed_tokens + scheduled.get(new.req_id, 0))
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            if req_id not in self._saving or req_id in self._saved:
                continue
            blocks, prompt = self._saving[req_id]
            new_blocks = cached.new_block_ids[i]
            if new_blocks is not None:
                if req_id in cached.resumed_req_ids:
                    blocks[:] = list(new_blocks[0])
                else:
                    blocks.extend(new_blocks[0])
            self._maybe_save(meta, req_id, cached.num_computed_tokens[i] + scheduled.get(req_id, 0))
        return meta

    def _maybe_save(self, meta: RzmqKVMetadata, req_id: str, computed_after: int) -> None:
        blocks, prompt = self._saving[req_id]
        if computed_after >= prompt:
            need = -(-prompt // self._block_size)
            meta.saves.append(SaveReq(req_id, blocks[:need], prompt))
            self._saved.add(req_id)

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        """Producer: a saved request keeps its blocks until its layers are delivered, expire, or
        (aborted) are released; its kv_transfer_params name this producer."""
        req_id = request.request_id
        self._local_computed.pop(req_id, None)
        if req_id not in self._saving:
            return False, None
        _, prompt = self._saving.pop(req_id)
        if req_id not in self._saved:
            return False, None  # finished before its prefill completed: nothing was sent from it
        self._saved.discard(req_id)
        if request.status.name == "FINISHED_ABORTED":
            self._releases.append(req_id)
            return True, None
        return True, {"do_remote_prefill": True, "do_remote_decode": False, "remote_request_id": req_id,
                      "remote_host": self._host, "remote_port": self._port, "num_tokens": prompt,
                      "remote_engine_id": self._kv_transfer_config.engine_id}

    # ------------------------------------------------------------------ worker

    def register_kv_caches(self, kv_caches: dict[str, Any]):
        """Remembers each layer's KV tensor: blocks are sent from, and loaded into, these views."""
        self._kv = dict(kv_caches)
        self._layers = list(kv_caches)

    def _blocks_of(self, kv_layer, block_ids: list[int]) -> list:
        """The contiguous views of `block_ids` in one layer: one per block for a [B, ...] layer
        (vLLM's standardized [B, H, N, C]), two (K, V) for a [2, B, ...] one."""
        n = self._kv_cache_config.num_blocks if self._kv_cache_config is not None else None
        if n is not None and kv_layer.shape[0] != n and kv_layer.dim() >= 2 and kv_layer.shape[0] == 2:
            return [kv_layer[kv][b] for b in block_ids for kv in (0, 1)]
        return [kv_layer[b] for b in block_ids]

    def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs: Any) -> None:
        """Producer: leaves this layer's blocks of each request completing its prefill (no copy)."""
        if not self._producer:
            return
        meta = self._get_connector_metadata()
        assert isinstance(meta, RzmqKVMetadata)
        for s in meta.saves:
            views = self._blocks_of(kv_layer, s.block_ids)
            ok, size, _, tracker = self._peer.put_tracked(STAGE, STAGE, f"{s.req_id}/{layer_name}",
                                                          payload.Parts(views))
            if not ok:
                logger.error("RzmqKVConnector: layer %s of request %s not kept (%s)", layer_name, s.req_id,
                             self._peer.store.stats())
                continue
            self._sends.setdefault(s.req_id, []).append(tracker)
            self.stats["layers_saved"] += 1
            self.stats["blocks_saved"] += len(s.block_ids)
            self.stats["bytes_saved"] += size

    def wait_for_save(self):
        """Nothing to wait for: saved layers are references, sent when the consumer asks."""

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        """Consumer: starts fetching every layer of this step's loads, in layer order."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, RzmqKVMetadata)
        for rel in meta.releases:
            self._release(rel)
        if meta.loads and self._loader is None:
            self._loader = _Loader(self._peer, self._layers, self._rank, self._load_timeout)
        for load in meta.loads:
            self._loading[load.req_id] = load
        if meta.loads:
            self._loader.submit(meta.loads)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Consumer: waits for this layer of each load (only this one) and copies it into place."""
        for req_id, load in self._loading.items():
            if req_id in self._failed_loads:
                continue
            got = self._loader.layer(req_id, layer_name)
            if got is None:
                self._failed_loads.add(req_id)
                self.stats["load_failures"] += 1
                self._failed_blocks.update(load.block_ids[load.start // self._block_size:-(-load.end // self._block_size)])
                logger.error("RzmqKVConnector: request %s: layer %s did not come from %s:%d within %.0f s "
                             "(producer gone, released or unreachable): the request fails", req_id, layer_name,
                             load.host, load.port, self._load_timeout)
                continue
            try:
                self._copy_in(layer_name, load, got)
            finally:
                got.release()

    def _copy_in(self, layer_name: str, load: LoadReq, parts) -> None:
        kv_layer = self._kv[layer_name]
        bs = self._block_size
        first, last = load.start // bs, -(-load.end // bs)
        dst_blocks = self._blocks_of(kv_layer, load.block_ids[first:last])
        per_block = len(dst_blocks) // max(1, last - first)
        src = list(parts)[first * per_block:last * per_block]
        if len(src) != len(dst_blocks):
            raise RuntimeError(f"RzmqKVConnector: layer {layer_name}: {len(src)} blocks came, {len(dst_blocks)} expected")
        for dst, part in zip(dst_blocks, src):
            # Whole blocks, the last one too: a backend's block interior need not be token-major
            # (the CPU backend's is not), so a token slice of it is not a token range. The slots
            # past the loaded tokens hold the producer's last prompt token, which this forward
            # computes again, and positions not yet reached, which are written before any read.
            dst.copy_(part.tensor.view(dst.dtype).view(dst.shape))
            self.stats["bytes_loaded"] += part.size
        self.stats["layers_loaded"] += 1
        self.stats["blocks_loaded"] += last - first
        self.stats["copies"] += len(dst_blocks)

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose layers did not come (reported once)."""
        failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """Producer: finished requests whose layers were all delivered, expired or released."""
        for req_id in self._loading:  # the forward that needed them is over
            self._loader.forget(req_id)
        self._loading.clear()
        self._failed_loads.clear()
        if not self._producer or self._peer is None:
            return None, None
        self._finishing |= finished_req_ids & set(self._sends)
        if not self._finishing:
            return None, None
        self._peer.reap_consumed()
        done = {r for r in self._finishing if all(t.done for t in self._sends[r])}
        for r in done:
            del self._sends[r]
        self._finishing -= done
        return done or None, None

    def _release(self, req_id: str) -> None:
        """Producer: an aborted request's layers go now."""
        for layer in self._layers:
            self._peer.cleanup(f"{req_id}/{layer}", STAGE, STAGE)

    def health(self) -> dict[str, Any]:
        """This side's accounting: the connector's counts, the transport's counters and store."""
        out: dict[str, Any] = {"connector": dict(self.stats), "requests_holding_blocks": len(self._sends)}
        if self._peer is not None:
            out["transport"] = self._peer.health()
        return out

    def shutdown(self):
        """Closes the transport."""
        if self._loader is not None:
            self._loader.stop()
        if self._peer is not None:
            self._peer.close()
            self._peer = None


def _tp_rank() -> int:
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return get_tensor_model_parallel_rank()
    except (AssertionError, ImportError, RuntimeError):
        return 0


class _Loader:
    """Consumer: fetches the layers of each load, in order, on one long-lived thread (its sockets,
    one per producer, are reused from request to request); `layer()` waits for one of them."""

    def __init__(self, peer: RzmqConnector, layers: list[str], rank: int, timeout: float):
        self.peer, self.layers, self.rank, self.timeout = peer, layers, rank, timeout
        self._cv = threading.Condition()
        self._queue: list[list[LoadReq]] = []
        self._got: dict[tuple[str, str], Any] = {}  # (request, layer) -> RecvParts, or None: failed
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="rzmq-kv-load", daemon=True)
        self._thread.start()

    def submit(self, loads: list[LoadReq]) -> None:
        """One forward's loads: fetched layer by layer, each layer for every load before the next
        layer, so that the first attention layer waits for the first layer of each request only."""
        with self._cv:
            self._queue.append(list(loads))
            self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopped:
                    self._cv.wait()
                if self._stopped:
                    return
                batch = self._queue.pop(0)
            failed: set[str] = set()
            for layer in self.layers:
                for load in batch:
                    got = None
                    if load.req_id not in failed:  # after a failure the producer is gone or lost it
                        meta = {"source_host": load.host, "source_port": load.port + self.rank}
                        got = self.peer.get_with_deadline(STAGE, STAGE, f"{load.remote_req_id}/{layer}", meta,
                                                          deadline=time.monotonic() + self.timeout)
                        if got is None:
                            failed.add(load.req_id)
                    with self._cv:
                        self._got[(load.req_id, layer)] = got[0] if got is not None else None
                        self._cv.notify_all()

    def layer(self, req_id: str, layer: str):
        """The received blocks of `layer` (RecvParts), or None if they did not come in time."""
        end = time.monotonic() + self.timeout
        with self._cv:
            while (req_id, layer) not in self._got:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)
            return self._got.pop((req_id, layer))

    def forget(self, req_id: str) -> None:
        """Drops what came for `req_id` and was not used (a forward that ended early)."""
        with self._cv:
            self._queue = [[q for q in batch if q.req_id != req_id] for batch in self._queue]
            for k in [k for k in self._got if k[0] == req_id]:
                got = self._got.pop(k)
                if got is not None:
                    got.release()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        self._thread.join(5.0)

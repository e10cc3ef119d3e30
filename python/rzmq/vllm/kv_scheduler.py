"""RzmqKVConnector's scheduler half: which requests save and load their KV, in which blocks.

It runs in vLLM's engine core, holds no socket and moves no byte: each step it tells the
workers (RzmqKVMetadata) which requests' prefill completes (saved layer by layer), which
requests load from a producer (into which blocks, which tokens) and which aborted requests'
layers go.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .metadata import KV_PROTOCOL_VERSION, LoadReq, RzmqKVMetadata, SaveReq, incompatibility, kv_compat_hash, kv_host

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

logger = logging.getLogger("rzmq.vllm.kv")


class RzmqKVScheduler:
    """Producer: saves of completing prefills, delayed frees, kv_transfer_params naming this
    producer. Consumer: every prompt token but the last loaded from the producer."""

    def __init__(self, vllm_config, kv_config, extra: dict[str, Any]):
        self.producer = bool(kv_config.is_kv_producer)
        self.consumer = bool(kv_config.is_kv_consumer)
        self.host = kv_host(kv_config, extra)
        self.port = int(kv_config.kv_port)
        self.engine_id = kv_config.engine_id
        self.block_size = int(vllm_config.cache_config.block_size)
        self.compat = kv_compat_hash(vllm_config)
        self._saving: dict[str, tuple[list[int], int]] = {}  # producer: req -> (blocks, prompt tokens)
        self._saved: set[str] = set()
        self._releases: list[str] = []
        self._local_computed: dict[str, int] = {}  # consumer: req -> tokens it had before the load
        self._loads: list[LoadReq] = []
        self._refused: set[str] = set()  # producers whose protocol does not match (said once each)
        self.stats = {"requests_saved": 0, "requests_loaded": 0, "requests_refused": 0}

    # ------------------------------------------------------------------ consumer

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        """Every prompt token but the last comes from the producer (loaded layer by layer inside the
        first forward, so not asynchronously), when the producer speaks this protocol."""
        params = request.kv_transfer_params
        if not self.consumer or not params or not params.get("do_remote_prefill"):
            return 0, False
        prompt = len(request.prompt_token_ids or [])
        if int(params.get("num_tokens", -1)) != prompt:
            logger.warning("RzmqKVConnector: request %s: the producer prefilled %s tokens, this prompt has %d; "
                           "computing it here", request.request_id, params.get("num_tokens"), prompt)
            return 0, False
        where = f"{params.get('remote_host')}:{params.get('remote_port')}"
        why = incompatibility(f"the producer at {where}", params.get("rzmq_kv_version"), params.get("rzmq_compat"),
                              KV_PROTOCOL_VERSION, self.compat)
        if why is not None:
            self.stats["requests_refused"] += 1
            if where not in self._refused:
                self._refused.add(where)
                logger.error("RzmqKVConnector: %s: its KV is not used, requests from it are computed here "
                             "(logged once per producer)", why)
            return 0, False
        count = prompt - 1 - num_computed_tokens
        if count <= 0:
            return 0, False
        self._local_computed[request.request_id] = num_computed_tokens
        return count, False

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int) -> None:
        """The blocks the producer's KV goes into, loaded in the next forward."""
        params = request.kv_transfer_params
        start = self._local_computed.pop(request.request_id, None)
        if num_external_tokens <= 0 or start is None or not params:
            return
        params["do_remote_prefill"] = False  # once: a preempted request recomputes
        self._loads.append(LoadReq(req_id=request.request_id, remote_req_id=str(params["remote_request_id"]),
                                   host=str(params["remote_host"]), port=int(params["remote_port"]),
                                   block_ids=list(blocks.get_block_ids()[0]), start=start,
                                   end=start + num_external_tokens))
        self.stats["requests_loaded"] += 1

    # ------------------------------------------------------------------ both

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> RzmqKVMetadata:
        """This step's saves (requests whose prefill completes in it), loads and releases."""
        meta = RzmqKVMetadata(loads=self._loads, releases=self._releases)
        self._loads, self._releases = [], []
        if not self.producer:
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
            need = -(-prompt // self.block_size)
            meta.saves.append(SaveReq(req_id, blocks[:need], prompt))
            self._saved.add(req_id)
            self.stats["requests_saved"] += 1

    # ------------------------------------------------------------------ producer

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        """A saved request keeps its blocks until its layers are delivered, expire, or (aborted)
        are released; its kv_transfer_params name this producer and its protocol."""
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
                      "remote_host": self.host, "remote_port": self.port, "num_tokens": prompt,
                      "remote_engine_id": self.engine_id, "rzmq_kv_version": KV_PROTOCOL_VERSION,
                      "rzmq_compat": self.compat}

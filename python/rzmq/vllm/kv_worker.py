"""RzmqKVConnector's worker half: KV blocks out of the producer's cache, into the consumer's.

Producer: `save_kv_layer` leaves the layer's blocks of each request completing its prefill in
the RzmqConnector store (views of vLLM's KV cache, one frame per block, no copy); its service
thread answers the consumers; `get_finished` hands a request's blocks back to vLLM once every
layer was delivered (or expired, or was released for an aborted request).

Consumer: `start_load_kv` asks for the first `layers_in_flight` layers of each load through
the RzmqConnector's fetch worker (the thread that owns the connections; one per producer,
reused from request to request); each `wait_for_layer_load` waits for its own layer, asks for
the next one, and copies the received blocks into the request's blocks (whole blocks: a
backend's block interior need not be token-major). A layer that does not come in
`load_timeout`, or comes wrong, fails the load: its blocks are reported
(`get_block_ids_with_load_errors`), what is still in flight is abandoned, and whatever reply
comes later is released by the fetch worker as it arrives. Nothing received outlives the
forward that asked for it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..omni import payload, wire
from ..omni.connector import RzmqConnector
from .metadata import LoadReq, RzmqKVMetadata, kv_host
from .stats import Recorder, zero_copy_frames

logger = logging.getLogger("rzmq.vllm.kv")

STAGE = "kv"  # the RzmqConnector key suffix (`<request>/<layer>@kv_kv`)


def tp_rank() -> int:
    """This worker's tensor-parallel rank (0 without parallel state)."""
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return get_tensor_model_parallel_rank()
    except (AssertionError, ImportError, RuntimeError):
        return 0


class _Load:
    """One request's load in this forward: its layers' fetches, asked `window` layers ahead."""

    def __init__(self, req: LoadReq, endpoint: str):
        self.req, self.endpoint = req, endpoint
        self.fetches: dict[str, Any] = {}  # layer -> Fetch
        self.next = 0  # index of the next layer to ask for
        self.failed: str | None = None

    def abandon(self) -> None:
        """Gives up every fetch not used yet (replies still to come are released on arrival)."""
        for fut in self.fetches.values():
            fut.abandon()
        self.fetches.clear()


class RzmqKVWorker:
    """The worker side of one instance: producer (kv_producer) or consumer (kv_consumer)."""

    def __init__(self, vllm_config, kv_config, extra: dict[str, Any], kv_cache_config=None):
        self.producer = bool(kv_config.is_kv_producer)
        self.consumer = bool(kv_config.is_kv_consumer)
        self.block_size = int(vllm_config.cache_config.block_size)
        self.load_timeout = float(extra.get("load_timeout", 30.0))
        self.window = max(1, int(extra.get("layers_in_flight", 4)))
        self.num_blocks = getattr(kv_cache_config, "num_blocks", None)
        self.rank = tp_rank()
        host = kv_host(kv_config, extra)
        peer_config = {
            "host": host,
            "bind_host": extra.get("bind_host", "0.0.0.0"),
            "rdma": extra.get("rdma", "auto"),
            "memory_pool_size": int(extra.get("memory_pool_size", 64 << 30)),
            "buffer_ttl_seconds": float(extra.get("buffer_ttl_seconds", 120.0)),
            "consumers": 1,
            "get_timeout": self.load_timeout,
            "host_cache": False,
        }
        if self.producer:
            self.peer = RzmqConnector({**peer_config, "role": "sender", "zmq_port": int(kv_config.kv_port) + self.rank})
        else:
            self.peer = RzmqConnector({**peer_config, "role": "receiver"})
        self.kv: dict[str, Any] = {}
        self.layers: list[str] = []
        self._sends: dict[str, list] = {}  # producer: req -> trackers of its layers
        self._finishing: set[str] = set()
        self._loads: dict[str, _Load] = {}  # consumer: this forward's loads
        self._failed_blocks: set[int] = set()
        self.recorder = Recorder()
        self._late_seen = 0
        self.stats = {"layers_saved": 0, "blocks_saved": 0, "bytes_saved": 0, "layers_loaded": 0,
                      "blocks_loaded": 0, "bytes_loaded": 0, "copies": 0, "load_failures": 0}

    # ------------------------------------------------------------------ both

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Remembers each layer's KV tensor: blocks are sent from, and loaded into, these views."""
        self.kv = dict(kv_caches)
        self.layers = list(kv_caches)

    def _blocks_of(self, kv_layer, block_ids: list[int]) -> list:
        """The contiguous views of `block_ids` in one layer: one per block for a [B, ...] layer
        (vLLM's standardized [B, H, N, C]), two (K, V) for a [2, B, ...] one."""
        n = self.num_blocks
        if n is not None and kv_layer.shape[0] != n and kv_layer.dim() >= 2 and kv_layer.shape[0] == 2:
            return [kv_layer[kv][b] for b in block_ids for kv in (0, 1)]
        return [kv_layer[b] for b in block_ids]

    # ------------------------------------------------------------------ producer

    def save_kv_layer(self, meta: RzmqKVMetadata, layer_name: str, kv_layer) -> None:
        """Leaves this layer's blocks of each request completing its prefill (no copy)."""
        for s in meta.saves:
            views = self._blocks_of(kv_layer, s.block_ids)
            ok, size, _, tracker = self.peer.put_tracked(STAGE, STAGE, f"{s.req_id}/{layer_name}", payload.Parts(views))
            if not ok:
                logger.error("RzmqKVConnector: layer %s of request %s not kept (%s)", layer_name, s.req_id,
                             self.peer.store.stats())
                continue
            self._sends.setdefault(s.req_id, []).append(tracker)
            self.stats["layers_saved"] += 1
            self.stats["blocks_saved"] += len(s.block_ids)
            self.stats["bytes_saved"] += size

    def release(self, req_id: str) -> None:
        """An aborted request's layers go now."""
        for layer in self.layers:
            self.peer.cleanup(f"{req_id}/{layer}", STAGE, STAGE)

    def finished_sending(self, finished_req_ids: set[str]) -> set[str] | None:
        """Finished requests whose layers were all delivered, expired or released."""
        self._finishing |= finished_req_ids & set(self._sends)
        if not self._finishing:
            return None
        self.peer.reap_consumed()
        done = {r for r in self._finishing if all(t.done for t in self._sends[r])}
        for r in done:
            del self._sends[r]
        self._finishing -= done
        return done or None

    # ------------------------------------------------------------------ consumer

    def start_load(self, meta: RzmqKVMetadata) -> None:
        """Asks for the first layers of every load of this forward (released requests go first)."""
        for rel in meta.releases:
            self.release(rel)
        for req in meta.loads:
            endpoint = self.peer._source({"source_host": req.host, "source_port": req.port + self.rank})
            load = self._loads[req.req_id] = _Load(req, endpoint)
            self._ask(load, self.window)

    def _ask(self, load: _Load, upto: int) -> None:
        while load.failed is None and load.next < min(upto, len(self.layers)):
            layer = self.layers[load.next]
            load.next += 1
            key = self.peer._make_key(f"{load.req.remote_req_id}/{layer}", STAGE, STAGE)
            try:
                load.fetches[layer] = self.peer.fetch_async(load.endpoint, key, None,
                                                            time.monotonic() + self.load_timeout)
            except RuntimeError as e:  # the connector is closed: shutting down
                self._fail(load, layer, str(e))

    def wait_for_layer(self, layer_name: str) -> None:
        """Waits for this layer of each load (only this one), asks for the next, copies it in."""
        if not self._loads:
            return
        idx = self.layers.index(layer_name) if layer_name in self.kv else -1
        for load in self._loads.values():
            if load.failed is not None:
                continue
            self._ask(load, idx + 1 + self.window)
            fut = load.fetches.pop(layer_name, None)
            if fut is None:
                self._fail(load, layer_name, "it was never asked for")
                continue
            rep = self.peer.wait_fetch(fut, fut.deadline)
            seconds = (fut.t_done or time.monotonic()) - fut.t_submit
            got = self.peer.take_reply(rep, load.endpoint, self.peer._make_key(
                f"{load.req.remote_req_id}/{layer_name}", STAGE, STAGE))
            if got is None:
                why = (f"no reply within {self.load_timeout:.0f} s (producer gone, slow or unreachable)"
                       if isinstance(rep, TimeoutError) else
                       "the producer does not have it (released or expired)" if not isinstance(rep, BaseException)
                       and rep.status == wire.NOT_FOUND else str(rep) if isinstance(rep, BaseException)
                       else f"the producer answered {rep.status}: {rep.meta.get('error')}")
                self._fail(load, layer_name, why)
                continue
            meta, parts, frames = got
            try:
                received = self.peer.decode(meta, parts, frames)
                if received is None:
                    raise ValueError("the reply could not be decoded")
                try:
                    self._copy_in(layer_name, load.req, received)
                finally:
                    received.release()
            except (ValueError, RuntimeError, TypeError) as e:
                self._fail(load, layer_name, f"its blocks do not fit here: {e}")
                continue
            finally:
                rep.release()
            self.recorder.transfer(seconds, meta["size"], zero_copy_frames(parts, load.endpoint))

    def _fail(self, load: _Load, layer_name: str, why: str) -> None:
        req = load.req
        load.failed = why
        load.abandon()
        self.stats["load_failures"] += 1
        self.recorder.failure()
        self._failed_blocks.update(req.block_ids[req.start // self.block_size:-(-req.end // self.block_size)])
        logger.error("RzmqKVConnector: request %s: layer %s from %s:%d: %s; the request fails", req.req_id,
                     layer_name, req.host, req.port, why)

    def _copy_in(self, layer_name: str, load: LoadReq, parts) -> None:
        kv_layer = self.kv[layer_name]
        bs = self.block_size
        first, last = load.start // bs, -(-load.end // bs)
        dst_blocks = self._blocks_of(kv_layer, load.block_ids[first:last])
        per_block = len(dst_blocks) // max(1, last - first)
        src = list(parts)[first * per_block:last * per_block]
        if len(src) != len(dst_blocks):
            raise ValueError(f"layer {layer_name}: {len(src)} blocks came, {len(dst_blocks)} expected")
        for dst, part in zip(dst_blocks, src):
            want = dst.numel() * dst.element_size()
            if part.size != want:
                raise ValueError(f"layer {layer_name}: a block of {part.size} bytes came, this KV cache's "
                                 f"blocks hold {want}")
            # Whole blocks, the last one too: a backend's block interior need not be token-major
            # (the CPU backend's is not), so a token slice of it is not a token range. The slots
            # past the loaded tokens hold the producer's last prompt token, which this forward
            # computes again, and positions not yet reached, which are written before any read.
            dst.copy_(part.tensor.view(dst.dtype).view(dst.shape))
            self.stats["bytes_loaded"] += part.size
        self.stats["layers_loaded"] += 1
        self.stats["blocks_loaded"] += last - first
        self.stats["copies"] += len(dst_blocks)

    def end_forward(self) -> None:
        """The forward that needed this step's loads is over: whatever of them was not used goes."""
        for load in self._loads.values():
            load.abandon()
        self._loads.clear()

    def take_failed_blocks(self) -> set[int]:
        failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    # ------------------------------------------------------------------ accounting

    def held_bytes(self) -> int:
        """Bytes this side holds: received layers not yet copied in (consumer), KV referenced for
        consumers (producer)."""
        held = 0
        for load in self._loads.values():
            for fut in load.fetches.values():
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    held += fut.result().size
        return held + (self.peer.store.held if self.producer else 0)

    def take_stats(self) -> dict | None:
        """This worker's transfer record since the last call (vLLM asks every step)."""
        late = self.peer._fetcher.stats["late_bytes_released"] if self.peer._fetcher is not None else 0
        if late > self._late_seen:
            self.recorder.late(late - self._late_seen)
            self._late_seen = late
        held = self.held_bytes()
        if held != self.recorder.totals["held_bytes"]:
            self.recorder.held(held)
        return self.recorder.take()

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connector": dict(self.stats), "requests_holding_blocks": len(self._sends),
                               "transfers": dict(self.recorder.totals), "held_bytes": self.held_bytes()}
        out["transport"] = self.peer.health()
        if self.peer._fetcher is not None:
            out["fetch"] = dict(self.peer._fetcher.stats)
        return out

    def close(self) -> None:
        self.end_forward()
        self.peer.close()

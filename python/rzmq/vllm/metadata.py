"""What rzmq's vLLM connectors exchange: typed step metadata, the protocol version, the
compatibility check between instances, and the few vLLM API differences they adapt to.

Scheduler -> worker, each step (vLLM passes it through `bind_connector_metadata`):
- `RzmqKVMetadata`: the requests whose prefill completes this step (`SaveReq`), the loads of
  this step (`LoadReq`), the aborted requests whose saved layers go now (`releases`);
- `RzmqECMetadata`: the embeddings the worker maps from the host cache this step.

Instance -> instance (the wire): a producer names itself and its protocol in what the
consumer receives first: the KV producer's `kv_transfer_params` (`rzmq_kv_version`,
`rzmq_compat`), the EC producer's announcements (`v`, `compat`). A consumer checks both before
it uses the producer's data; on a mismatch it says why, once per producer, and computes the
data itself (vLLM's own path when a connector has nothing), so two instances of different
versions serve correct answers or none, never wrong ones.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from vllm.distributed.ec_transfer.ec_connector.base import ECConnectorMetadata
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

# Raise when anything a peer relies on changes: the keys (`<request>/<layer>@kv_kv`,
# `<mm_hash>@ec_ec`), kv_transfer_params' fields, a layer's framing (one frame per block, K then
# V for [2, B, ...] layouts), an announcement's fields.
#   1: the versioned protocol (kv_transfer_params and announcements carry version and compat)
KV_PROTOCOL_VERSION = 1
EC_PROTOCOL_VERSION = 1


def _digest(factors: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(factors, sort_keys=True, default=str).encode()).hexdigest()[:16]


def kv_compat_hash(vllm_config) -> str:
    """What must match for a decode instance to use a prefill instance's KV blocks: the model,
    its KV geometry and dtype, the block size (not vLLM's version: a layout that matches is
    used whatever vLLM made it; the worker also checks each block's size on arrival)."""
    mc, cc = getattr(vllm_config, "model_config", None), vllm_config.cache_config
    factors = {"v": KV_PROTOCOL_VERSION, "block_size": int(cc.block_size),
               "cache_dtype": str(getattr(cc, "cache_dtype", None))}
    if mc is not None:
        try:
            factors.update(model=str(mc.model), dtype=str(mc.dtype), layers=mc.get_total_num_hidden_layers(),
                           kv_heads=mc.get_total_num_kv_heads(), head_size=mc.get_head_size())
        except Exception:  # noqa: BLE001 (a model config without these: what is known is enough)
            factors.update(model=str(getattr(mc, "model", None)), dtype=str(getattr(mc, "dtype", None)))
    return _digest(factors)


def ec_compat_hash(vllm_config) -> str:
    """What must match for an embedding to be used: the model (mm_hash already names it) and its dtype."""
    mc = getattr(vllm_config, "model_config", None)
    return _digest({"v": EC_PROTOCOL_VERSION, "model": str(getattr(mc, "model", None)),
                    "dtype": str(getattr(mc, "dtype", None))})


def incompatibility(what: str, version: Any, compat: Any, my_version: int, my_compat: str) -> str | None:
    """Why a peer's data cannot be used here, or None when it can."""
    if version is None:
        return f"{what} speaks an unversioned rzmq protocol (an older rzmq wheel), this instance v{my_version}"
    if version != my_version:
        return f"{what} speaks rzmq protocol v{version}, this instance v{my_version}"
    if compat != my_compat:
        return (f"{what} serves another model configuration (compatibility {compat}, here {my_compat}: model, "
                "dtype, KV geometry or block size differ)")
    return None


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


@dataclass
class RzmqECMetadata(ECConnectorMetadata):
    """The embeddings a consumer worker takes from the host cache this step."""

    loads: list[str] = field(default_factory=list)


def advertised_host(value: Any) -> str:
    """The address an instance advertises: `value`, or this host's address for none/"auto"."""
    if value and str(value).lower() not in ("auto", "none"):
        return str(value)
    from ..omni.connector import _local_address

    return _local_address()


def kv_host(cfg, extra: dict[str, Any]) -> str:
    """The KV producer's advertised address: `kv_connector_extra_config.host`, else `kv_ip`
    (vLLM 0.30; 0.32 has no kv_ip), else this host's address."""
    return advertised_host(extra.get("host") or getattr(cfg, "kv_ip", None))

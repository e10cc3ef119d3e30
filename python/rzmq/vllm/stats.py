"""rzmq's transfer figures where vLLM's operators look: KVConnectorStats (and ECConnectorStats
where vLLM has it, 0.32 on), so they reach vLLM's periodic log lines and its `/metrics`, as
NIXL's do.

Each side records what happened since vLLM last asked (`Recorder.take()`): one observation
per transfer (its duration, bytes, and how many of its frames the library read by zero-copy
RDMA READ), failures, bytes of replies that came after their consumer gave up (released on
arrival), and the bytes the connector holds (a gauge). vLLM sums the workers' and the
scheduler's records and hands them to:
- `reduce()`: the log line "KV Transfer metrics: ..." (EC: "EC Transfer metrics");
- the Prometheus metrics of `build_prom_metrics()`:
    vllm:rzmq_kv_xfer_time_seconds (histogram), vllm:rzmq_kv_transfers_total,
    vllm:rzmq_kv_bytes_transferred_total, vllm:rzmq_kv_zero_copy_reads_total,
    vllm:rzmq_kv_failed_transfers_total, vllm:rzmq_kv_late_bytes_released_total,
    vllm:rzmq_kv_held_bytes (gauge); the same under vllm:rzmq_ec_* for embeddings.

Zero-copy reads are counted from what the library does with a frame: over an rdma://
connection every frame above the rendezvous threshold (RZMQ_RDMA_RNDV_THRESHOLD, 64 KiB by
default) is read by RDMA READ straight into the receive pool, without a copy.
"""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)

try:  # vLLM 0.32 on: EC connectors report stats too
    from vllm.distributed.ec_transfer.ec_connector.metrics import ECConnectorPromMetrics, ECConnectorStats
except ImportError:  # vLLM 0.30
    ECConnectorPromMetrics = ECConnectorStats = None

LISTS = ("transfer_duration", "bytes_transferred", "zero_copy_reads", "num_failed_transfers",
         "late_bytes_released", "held_bytes")


def _empty() -> dict[str, list]:
    return {k: [] for k in LISTS}


def rndv_threshold() -> int:
    """Frames above this many bytes go by rendezvous (rzmq's RZMQ_RDMA_RNDV_THRESHOLD)."""
    try:
        return int(os.environ.get("RZMQ_RDMA_RNDV_THRESHOLD", "65536"))
    except ValueError:
        return 65536


def zero_copy_frames(parts, endpoint: str) -> int:
    """How many of a reply's payload frames the library read by zero-copy RDMA READ."""
    if not endpoint.startswith("rdma://"):
        return 0
    limit = rndv_threshold()
    return sum(1 for p in parts if memoryview(p).nbytes > limit)


class Recorder:
    """One side's observations since the last `take()` (thread-safe), plus running totals for health()."""

    def __init__(self):
        self._lock = threading.Lock()
        self._data = _empty()
        self.totals = {"transfers": 0, "bytes_transferred": 0, "transfer_seconds": 0.0, "zero_copy_reads": 0,
                       "failed_transfers": 0, "late_bytes_released": 0, "held_bytes": 0}

    def transfer(self, seconds: float, nbytes: int, zero_copy: int = 0) -> None:
        with self._lock:
            self._data["transfer_duration"].append(float(seconds))
            self._data["bytes_transferred"].append(int(nbytes))
            self._data["zero_copy_reads"].append(int(zero_copy))
            t = self.totals
            t["transfers"] += 1
            t["bytes_transferred"] += int(nbytes)
            t["transfer_seconds"] += float(seconds)
            t["zero_copy_reads"] += int(zero_copy)

    def failure(self) -> None:
        with self._lock:
            self._data["num_failed_transfers"].append(1)
            self.totals["failed_transfers"] += 1

    def late(self, nbytes: int) -> None:
        """Bytes of a reply that came after its consumer gave up, released as they came."""
        if nbytes:
            with self._lock:
                self._data["late_bytes_released"].append(int(nbytes))
                self.totals["late_bytes_released"] += int(nbytes)

    def held(self, nbytes: int) -> None:
        """The bytes this side holds now (a gauge: the last value wins)."""
        with self._lock:
            self._data["held_bytes"].append(int(nbytes))
            self.totals["held_bytes"] = int(nbytes)

    def take(self) -> dict[str, list] | None:
        """What happened since the last take (None when nothing did)."""
        with self._lock:
            if not any(self._data.values()):
                return None
            data, self._data = self._data, _empty()
            return data


class _StatsMixin:
    """KVConnectorStats / ECConnectorStats over Recorder's lists (NixlKVConnectorStats' shape)."""

    def __post_init__(self):
        if not self.data:
            self.reset()
        for k in LISTS:
            self.data.setdefault(k, [])

    def reset(self):
        self.data = _empty()

    def is_empty(self) -> bool:
        return not any(self.data.get(k) for k in LISTS)

    def aggregate(self, other):
        if other is not None and not other.is_empty():
            for k in LISTS:
                if k == "held_bytes" and other.data.get(k):
                    # held memory is a gauge per process; the sum of the reporters' last values
                    self.data[k] = [(self.data[k][-1] if self.data[k] else 0) + other.data[k][-1]]
                else:
                    self.data[k].extend(other.data.get(k, []))
        return self

    def clone_and_reset(self):
        old = copy.copy(self)
        self.reset()
        return old

    def reduce(self) -> dict[str, int | float]:
        d = self.data
        n = len(d["transfer_duration"])
        total_s = sum(d["transfer_duration"])
        mb = sum(d["bytes_transferred"]) / 2**20
        times = sorted(d["transfer_duration"])
        return {
            "Num successful transfers": n,
            "Avg xfer time (ms)": round(total_s / n * 1e3, 3) if n else 0,
            "P90 xfer time (ms)": round(times[min(n - 1, int(0.9 * n))] * 1e3, 3) if n else 0,
            "MB transferred": round(mb, 3),
            "Throughput (MB/s)": round(mb / total_s, 3) if total_s > 0 else 0,
            "Zero-copy reads": sum(d["zero_copy_reads"]),
            "Num failed transfers": len(d["num_failed_transfers"]),
            "Late MB released": round(sum(d["late_bytes_released"]) / 2**20, 3),
            "Held MB": round(d["held_bytes"][-1] / 2**20, 3) if d["held_bytes"] else 0,
        }


@dataclass
class RzmqKVConnectorStats(_StatsMixin, KVConnectorStats):
    """RzmqKVConnector's transfers since the last report (see the module docstring)."""


class _Prom:
    """The Prometheus metrics of one connector kind (`kv` or `ec`)."""

    BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0, 30.0]

    def _make(self, kind: str):
        from vllm.v1.metrics.utils import create_metric_per_engine

        def per_engine(metric):
            return create_metric_per_engine(metric, self.per_engine_labelvalues)

        p, labels = f"vllm:rzmq_{kind}_", self._labelnames
        what = "KV cache" if kind == "kv" else "encoder embedding"
        self.xfer_time = per_engine(self._histogram_cls(
            name=p + "xfer_time_seconds", documentation=f"Duration of rzmq {what} transfers (request to reply).",
            buckets=self.BUCKETS, labelnames=labels))
        self.counters = {
            key: per_engine(self._counter_cls(name=p + name, documentation=doc, labelnames=labels))
            for key, name, doc in (
                ("transfers", "transfers", f"rzmq {what} transfers completed."),
                ("bytes_transferred", "bytes_transferred", f"Bytes of rzmq {what} transfers."),
                ("zero_copy_reads", "zero_copy_reads", "Frames the library read by zero-copy RDMA READ."),
                ("num_failed_transfers", "failed_transfers", f"rzmq {what} transfers that failed (timeout, "
                                                               "producer gone, released, incompatible)."),
                ("late_bytes_released", "late_bytes_released", "Bytes of replies that came after their consumer "
                                                                 "gave up, released on arrival."))}
        self.held = per_engine(self._gauge_cls(
            name=p + "held_bytes", documentation=f"Bytes of {what}s the rzmq connector holds (received and not "
            "yet used, or kept for consumers).", labelnames=labels, multiprocess_mode="mostrecent"))

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0):
        d = transfer_stats_data
        for s in d.get("transfer_duration", []):
            self.xfer_time[engine_idx].observe(s)
        self.counters["transfers"][engine_idx].inc(len(d.get("transfer_duration", [])))
        for key in ("bytes_transferred", "zero_copy_reads", "late_bytes_released"):
            total = sum(d.get(key, []))
            if total:
                self.counters[key][engine_idx].inc(total)
        if d.get("num_failed_transfers"):
            self.counters["num_failed_transfers"][engine_idx].inc(len(d["num_failed_transfers"]))
        if d.get("held_bytes"):
            self.held[engine_idx].set(d["held_bytes"][-1])


class RzmqKVPromMetrics(_Prom, KVConnectorPromMetrics):
    """vllm:rzmq_kv_* in vLLM's /metrics."""

    def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._make("kv")


if ECConnectorStats is not None:

    @dataclass
    class RzmqECConnectorStats(_StatsMixin, ECConnectorStats):
        """RzmqECConnector's fetches since the last report (vLLM 0.32 on)."""

    class RzmqECPromMetrics(_Prom, ECConnectorPromMetrics):
        """vllm:rzmq_ec_* in vLLM's /metrics (vLLM 0.32 on)."""

        def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
            super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
            self._make("ec")

else:
    RzmqECConnectorStats = RzmqECPromMetrics = None

"""The replica's stage-to-stage link: vllm-omni's connector interface served by rzmq's RzmqConnector.

Each stage owns one RzmqConnector (python/rzmq/omni), built through vllm-omni's own factory
(`OmniConnectorFactory.create_connector(ConnectorSpec("RzmqConnector", extra))`), as a stage
config selects it. A payload tree (dicts, lists, omni_wire.Tensor, omni_wire.Shared) travels the
vLLM way: a msgpack main frame plus one frame per tensor of at least INLINE_MAX bytes, put as
`rzmq.omni.Parts` (no copy); each Shared tensor is put on its own key as `rzmq.omni.Shared(array,
content_key)`, so a host fetches its bytes once (the connector's host cache) however many
requests and stages name that content. The receiving stage gets the main payload with the
metadata the front-end forwarded, then each shared tensor it references.

vllm-omni cannot be imported whole here (torch); python/tests/omni/vllm_omni_shim.py loads its
connector layer as the connector tests do.
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python", "tests", "omni"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import vllm_omni_shim  # noqa: E402

vllm_omni_shim.install()

import rzmq.omni as ro  # noqa: E402
from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory  # noqa: E402
from vllm_omni.distributed.omni_connectors.utils.config import ConnectorSpec  # noqa: E402

import omni_wire as w  # noqa: E402

ro.register()


class _AllDone:
    """Done when every tracker is (a put's main payload and its shared tensors)."""

    def __init__(self, trackers):
        self.trackers = trackers

    @property
    def done(self):
        return all(t.done for t in self.trackers)

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        for t in self.trackers:
            t.wait(None if end is None else max(0.0, end - time.monotonic()))


def _shared_objects(obj, out):
    if isinstance(obj, w.Shared):
        out.setdefault(obj.key, obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _shared_objects(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _shared_objects(v, out)
    return out


class Link:
    """One stage's connector: what the stage engines call (put_tracked, get, health, close)."""

    def __init__(self, stage, host, sharing, cache_bytes, budget_bytes, timeout, cache_dir):
        self.stage = stage
        self.sharing = sharing
        self.conn = OmniConnectorFactory.create_connector(ConnectorSpec("RzmqConnector", {
            "host": host, "zmq_port": 0, "role": "sender", "memory_pool_size": budget_bytes,
            "get_timeout": timeout, "host_cache": sharing, "host_cache_dir": cache_dir,
            "host_cache_bytes": cache_bytes, "buffer_ttl_seconds": max(60.0, 2 * timeout)}))
        self.endpoint = self.conn.endpoint
        self.errors = []
        self.latencies = {}  # "from->to" -> [seconds from put() to the whole payload at the receiver]
        self.edge_bytes = {}  # "from->to" -> payload bytes this stage put
        self.m = {"shared_puts": 0, "shared_bytes_put": 0}

    def add_peers(self, peers):
        """Nothing to do: metadata names the producer of every payload."""

    def put_tracked(self, frm, to, key, data):
        """(ok, size, metadata, tracker) of a payload tree put for stage `to`."""
        trackers, refs, size = [], {}, 0
        if self.sharing:
            for ck, s in _shared_objects(data, {}).items():
                sub = f"{key}#{ck}"
                ok, n, meta, tr = self.conn.put_tracked(frm, to, sub, ro.Shared(s.tensor.array, ck))
                if not ok:
                    self.errors.append(f"{self.stage}: put {sub} failed")
                    return False, 0, None, None
                refs[ck] = {"k": sub, "m": meta}
                trackers.append(tr)
                size += n
                self.m["shared_puts"] += 1
                self.m["shared_bytes_put"] += n
        frames = []
        tree = w.encode(data, frames, send_ref=(lambda ck: True) if self.sharing else None)
        for node in w.shared_nodes(tree, []) if self.sharing else ():
            node.update(refs[node["__s"]])
        head = w.pack({"tree": tree, "t0": time.monotonic()})
        ok, n, meta, tr = self.conn.put_tracked(frm, to, key, ro.Parts([head, *frames]))
        if not ok:
            self.errors.append(f"{self.stage}: put {key} failed")
            return False, 0, None, None
        trackers.append(tr)
        size += n
        edge = f"{frm}->{to}"
        self.edge_bytes[edge] = self.edge_bytes.get(edge, 0) + size
        return True, size, dict(meta, key=key, **{"from": frm, "to": to}), _AllDone(trackers)

    def get(self, frm, to, key, meta):
        """(payload tree, size) of a payload whose metadata the front-end forwarded, or None."""
        got = self.conn.get(frm, to, key, meta)
        if got is None:
            return None
        parts, size = got
        head = w.unpack(parts[0].buffer)
        tree = head["tree"]
        nodes = {n["__s"]: n for n in w.shared_nodes(tree, [])}
        held = [parts]

        def resolve(ck):
            node = nodes[ck]
            sub = self.conn.get(frm, to, node["k"], node["m"])
            if sub is None:
                raise ValueError(f"shared tensor {ck} of {key}: not delivered")
            held.append(sub[0])
            return sub[0].buffer

        obj = w.decode(tree, [p.buffer for p in parts[1:]], resolve)
        edge = f"{frm}->{to}"
        self.latencies.setdefault(edge, []).append(time.monotonic() - head["t0"])
        return obj, size

    def health(self):
        """The connector's health plus this link's counters and errors."""
        h = self.conn.health()
        return {**{k: v for k, v in h.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
                **self.m, "errors": list(self.errors)}

    def close(self):
        """Closes the connector."""
        self.conn.close()

"""RzmqConnector against the real vllm-omni 0.30.0 connector layer.

vllm-omni's base class, factory, config loader and serializer are the wheel's own files; what
this machine cannot install (torch, vLLM) is stood in for as vllm_omni_shim.py says. Payloads
move between separate processes (peer.py) on stock libzmq, on rzmq over TCP, on rzmq with RDMA
required (soft provider) and across two network namespaces.

Environment: RZMQ_LIB (default <repo>/target/release/libzmq.so), the library preloaded into the
rzmq peers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
try:  # the installed rzmq (the wheel) when there is one, else this source tree's python/
    import rzmq.omni  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))

import vllm_omni_shim  # noqa: E402

STOOD_IN = vllm_omni_shim.install()

import numpy as np  # noqa: E402
import zmq  # noqa: E402

import rzmq.omni as ro  # noqa: E402
from rzmq.omni import wire  # noqa: E402
from rzmq.omni.store import HostCache, Store  # noqa: E402
from vllm_omni.distributed.omni_connectors.connectors.base import OmniConnectorBase  # noqa: E402
from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory  # noqa: E402
from vllm_omni.distributed.omni_connectors.utils.config import ConnectorSpec  # noqa: E402
from vllm_omni.distributed.omni_connectors.utils.initialization import (  # noqa: E402
    create_connectors_from_config,
    get_connectors_config_for_stage,
    load_omni_transfer_config,
)

LIB = os.environ.get("RZMQ_LIB") or os.path.join(ROOT, "target", "release", "libzmq.so")
PEER = os.path.join(HERE, "peer.py")
SIZES = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
RNDV_THRESHOLD = 65536  # rzmq's default: frames above it move by RDMA READ
NETNS = ("rzo-ns-a", "rzo-ns-b")
NETNS_IP = ("10.78.0.1", "10.78.0.2")
NETNS_VETH = ("rzo-veth-a", "rzo-veth-b")

ro.register()


# Run activated (RZMQ_ACTIVATE=1, the installed wheel: scripts/test-wheel.sh), the peers are
# turned on the same way; otherwise rzmq is preloaded (python/tests/omni/run.sh).
ACTIVATED = os.environ.get("RZMQ_ACTIVATE", "").strip().lower() in ("1", "true", "yes", "on")


def peer_env(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RZMQ_") and k != "LD_PRELOAD"}
    env["PYTHONUNBUFFERED"] = "1"
    if mode == "stock":
        return env
    if ACTIVATED:
        env["RZMQ_ACTIVATE"] = "1"
    else:
        env["LD_PRELOAD"] = LIB
    if mode == "rzmq-tcp":
        env["RZMQ_RDMA"] = "off"
    elif mode == "rzmq-rdma":
        env.update(RZMQ_RDMA="require", RZMQ_RDMA_PROVIDER="soft", RZMQ_RDMA_LOG="1")
    else:
        raise ValueError(mode)
    return env


class Producer:
    """A producer process (peer.py produce) and the metadata of what it put."""

    def __init__(self, config, sizes, mode, netns=None, shared=None):
        cmd = [sys.executable, PEER, "produce", json.dumps(config), ",".join(map(str, sizes))]
        if shared:
            cmd += ["--shared", shared]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True, env=peer_env(mode))
        self.items = []
        deadline = time.monotonic() + 120
        for line in self.proc.stdout:
            if line.strip() == "READY":
                break
            self.items.append(json.loads(line))
            assert time.monotonic() < deadline
        assert len(self.items) == len(sizes), self.stderr()

    def health(self) -> dict:
        self.proc.stdin.write("health\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read()

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.stderr()


def consume(config, items, mode, netns=None, deadline=60.0, background=False):
    cmd = [sys.executable, PEER, "consume", json.dumps(config), json.dumps(items), "--deadline", str(deadline)]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=peer_env(mode))
    r = subprocess.run(cmd, capture_output=True, text=True, env=peer_env(mode), timeout=deadline * len(items) + 120)
    return parse_consumer(r.returncode, r.stdout, r.stderr)


def parse_consumer(rc, out, err):
    assert rc == 0, err
    lines = [json.loads(ln) for ln in out.splitlines() if ln.strip()]
    return lines[:-1], lines[-1]["health"], err


def producer_config(**kw):
    return {"host": "127.0.0.1", "zmq_port": 0, "role": "sender", **kw}


def consumer_config(**kw):
    return {"host": "127.0.0.1", "role": "receiver", **kw}


def settled(conn, timeout=10.0) -> dict:
    """The producer's health once its service thread has counted the deliveries it sent (it
    releases a key just after the reply leaves, so a consumer can see the reply first)."""
    end = time.monotonic() + timeout
    while True:
        h = conn.health()
        if h["keys_held"] == 0 or time.monotonic() >= end:
            return h
        time.sleep(0.01)


def rdma_counters(stderr: str, side: str) -> list[tuple[int, int]]:
    """(zero-copy frames or reads, copies) of every RDMA connection `side` ('rx' or 'tx') logged."""
    pat = (r"rx \d+ msgs \d+ B \((\d+) zero-copy reads\), (\d+) copies" if side == "rx"
           else r"tx \d+ msgs \d+ B \((\d+) zero-copy\).*?, (\d+) copies")
    return [(int(a), int(b)) for a, b in re.findall(pat, stderr)]


# ----------------------------------------------------------------------------------------------
# vllm-omni's own registration and configuration paths


def test_an_installed_wheel_registers_through_vllm_omnis_plugin_entry_point():
    from importlib import metadata

    eps = [e for e in metadata.entry_points(group="vllm_omni.general_plugins") if e.name == "rzmq"]
    if not eps:
        pytest.skip("the rzmq wheel is not installed here (scripts/test-wheel.sh runs this)")
    register = eps[0].load()  # what vllm_omni.plugins.load_omni_general_plugins() does, then calls
    assert register is ro.register
    register()
    assert ro.CONNECTOR_NAME in OmniConnectorFactory.list_registered_connectors()
    assert "site-packages" in ro.__file__  # the wheel's package, not this checkout's


def test_registered_with_the_real_factory_and_base_class():
    assert ro.CONNECTOR_NAME in OmniConnectorFactory.list_registered_connectors()
    assert ro.register() is False  # a second load (plugins load once per process, maybe more) is harmless
    assert issubclass(ro.RzmqConnector, OmniConnectorBase)
    assert ro.RzmqConnector.supports_raw_data is True
    assert "torch" in STOOD_IN or "torch" in sys.modules  # the shim says what it stood in for


def test_stage_config_selects_it(tmp_path):
    yaml_text = """
runtime:
  connectors:
    rzmq_edge:
      name: RzmqConnector
      extra: {host: "${RZO_TEST_HOST}", zmq_port: 0, memory_pool_size: 67108864, buffer_ttl_seconds: 60}
stage_args:
  - stage_id: 0
    output_connectors: {to_stage_1: rzmq_edge}
  - stage_id: 1
    input_connectors: {from_stage_0: rzmq_edge}
"""
    os.environ["RZO_TEST_HOST"] = "127.0.0.1"  # vllm-omni's configs may name variables
    path = tmp_path / "stages.yaml"
    path.write_text(yaml_text)
    cfg = load_omni_transfer_config(str(path))
    spec = cfg.get_connector_for_edge("0", "1")
    assert spec.name == "RzmqConnector"
    # The receiving stage's view (role injected by vllm-omni).
    stage1 = get_connectors_config_for_stage(cfg, 1)
    assert stage1["from_stage_0"]["spec"]["extra"]["role"] == "receiver"
    receiver = OmniConnectorFactory.create_connector(ConnectorSpec(**stage1["from_stage_0"]["spec"]))
    conns = create_connectors_from_config(cfg.connectors, caller_stage_id="0")
    sender = conns[("0", "1")]
    try:
        assert isinstance(sender, ro.RzmqConnector) and sender.can_put and sender.port
        # A receiver listens only once it puts (a middle stage sends on through its one connector).
        assert isinstance(receiver, ro.RzmqConnector) and not receiver.can_put and receiver.port is None
        assert sender.store.budget == 64 << 20 and sender.store.ttl == 60
        arr = np.arange(100_000, dtype=np.float32)
        ok, n, meta = sender.put("0", "1", "r1", arr)
        assert ok and n == arr.nbytes
        got, size = receiver.get("0", "1", "r1", meta)
        assert size == arr.nbytes and np.array_equal(got.numpy(), arr)
        got.release()
        ok, n, meta2 = receiver.put("1", "2", "x", b"abc")
        assert ok and n == 3 and receiver.port and meta2["source_port"] == receiver.port
        got, size = sender.get("1", "2", "x", meta2)
        assert size == 3 and got.to_bytes() == b"abc"
        got.release()
    finally:
        sender.close()
        receiver.close()


# ----------------------------------------------------------------------------------------------
# In-process behaviour


@pytest.fixture
def pair():
    p = ro.RzmqConnector(producer_config())
    c = ro.RzmqConnector(consumer_config(get_timeout=5))
    yield p, c
    c.close()
    p.close()


def test_payload_kinds_round_trip(pair):
    p, c = pair
    arr = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    cases = [
        (b"x" * 3000, lambda g: g.to_bytes() == b"x" * 3000),
        (bytearray(b"y" * 70000), lambda g: g.to_bytes() == b"y" * 70000),
        (memoryview(b"z" * 10), lambda g: g.to_bytes() == b"z" * 10),
        (arr, lambda g: g.numpy().shape == arr.shape and np.array_equal(g.numpy(), arr)),
        (arr[:, ::2], lambda g: np.array_equal(g.numpy(), arr[:, ::2])),  # non-contiguous: made contiguous
        (ro.Parts([b"head", arr]), lambda g: len(g) == 2 and g[0].to_bytes() == b"head"
         and g[1].to_bytes() == arr.tobytes()),
        ({"ids": [1, 2, 3], "emb": np.ones(4, np.float32), "s": "text"},  # vllm-omni's serializer
         lambda g: g["ids"] == [1, 2, 3] and np.array_equal(g["emb"], np.ones(4, np.float32))),
    ]
    for i, (data, check) in enumerate(cases):
        ok, n, meta = p.put("0", "1", f"k{i}", data)
        assert ok, i
        got = c.get("0", "1", f"k{i}", meta)
        assert got is not None and got[1] == n == meta["data_size"], i
        assert check(got[0]), i
        assert meta["is_fast_path"] == (meta["kind"] != "obj")
        if hasattr(got[0], "release"):
            got[0].release()
    # an empty payload is one too (a stream's terminal chunk may carry nothing)
    ok, n, meta = p.put("0", "1", "empty", b"")
    assert ok and n == 0
    got = c.get("0", "1", "empty", meta)
    assert got is not None and got[1] == 0 and got[0].to_bytes() == b""
    h = settled(p)
    assert h["keys_held"] == 0 and h["bytes_held"] == 0  # consumers=1: each released after its get
    assert h["bytes_released"]["consumed"] == h["bytes_put"]


def test_recv_buffer_is_a_view_released_once(pair):
    p, c = pair
    ok, _, meta = p.put("0", "1", "v", np.arange(1 << 18, dtype=np.uint32))
    buf, _ = c.get("0", "1", "v", meta)
    assert buf.buffer.readonly and buf.size == 1 << 20
    buf.release()
    buf.release()  # twice is fine
    with pytest.raises(ValueError):
        buf.buffer


def test_unknown_and_never_put_keys_are_none_within_the_deadline(pair):
    p, c = pair
    meta = {"source_host": "127.0.0.1", "source_port": p.port}
    t0 = time.monotonic()
    assert c.get_with_deadline("0", "1", "never", meta, deadline=t0 + 2.0) is None
    assert time.monotonic() - t0 < 5.0
    # pushed to this consumer: it waited for the payload on its inbox until the deadline
    assert c.health()["get_timeouts"] == 1 and c.health()["get_misses"] == 0
    # A producer that never answers (nothing listens there): None at the deadline.
    with zmq.Context() as ctx, ctx.socket(zmq.ROUTER) as silent:
        port = silent.bind_to_random_port("tcp://127.0.0.1")
        t0 = time.monotonic()
        assert c.get_with_deadline("0", "1", "k", {"source_host": "127.0.0.1", "source_port": port},
                                   deadline=t0 + 0.5) is None
        assert time.monotonic() - t0 < 5.0
    assert c.health()["get_timeouts"] == 2
    assert c.get("0", "1", "k", None) is None  # no metadata, no configured sender
    c.abandon_get("k")


def test_metadata_less_get_uses_the_configured_sender(pair):
    p, _ = pair
    c = ro.RzmqConnector(consumer_config(sender_host="127.0.0.1", sender_zmq_port=p.port))
    try:
        assert p.put("0", "1", "m", b"q" * 5000)[0]
        got, n = c.get("0", "1", "m")
        assert n == 5000 and got.to_bytes() == b"q" * 5000
        q = c.query({"source_host": "127.0.0.1", "source_port": p.port}, "absent@0_1")
        assert q is None
        # (edge 0 -> 2: this consumer subscribed to 0 -> 1, whose puts go to it at once)
        assert p.put("0", "2", "m2", b"w" * 300)[0]
        assert c.query({"source_host": "127.0.0.1", "source_port": p.port}, "m2@0_2")["size"] == 300
    finally:
        c.close()
    # The KV transfer manager's path: sender info set after construction.
    c = ro.RzmqConnector(consumer_config())
    try:
        assert c.get("0", "2", "m2") is None  # no sender known yet
        info = p.get_connection_info()
        c.update_sender_info(info["host"], info["zmq_port"])
        got, n = c.get("0", "2", "m2")
        assert got.to_bytes() == b"w" * 300
    finally:
        c.close()


def test_several_consumers_and_release_accounting():
    p = ro.RzmqConnector(producer_config(consumers=3, host_cache=False))
    cs = [ro.RzmqConnector(consumer_config(host_cache=False)) for _ in range(4)]
    try:
        ok, n, meta = p.put("0", "1", "emb", np.ones(1 << 20, np.uint8))
        assert ok and meta["shared"]
        for c in cs[:3]:
            got, size = c.get("0", "1", "emb", meta)
            assert size == n and got.numpy().sum() == n
        # The third delivery released it: a fourth consumer finds nothing.
        h = settled(p)
        assert cs[3].get_with_deadline("0", "1", "emb", meta, deadline=time.monotonic() + 2) is None
        assert h["requests_served"] == 3 and h["bytes_held"] == 0
        assert h["bytes_released"]["consumed"] == n
    finally:
        for c in cs:
            c.close()
        p.close()


def test_store_budget_ttl_cleanup_and_content_dedup():
    s = Store(budget_bytes=1000, ttl_seconds=0.2, consumers=0)
    meta = lambda n: {"kind": "raw", "size": n, "parts": [n]}  # noqa: E731
    assert s.put("a@0_1", [b"x" * 600], meta(600), None)
    assert not s.put("b@0_1", [b"x" * 600], meta(600), None)  # over budget: refused, "a" kept
    assert s.put("c@0_1", [b"y" * 300], meta(300), "content-1")
    assert s.put("d@0_1", [b"y" * 300], meta(300), "content-1")  # same content: held once
    assert s.stats()["bytes_held"] == 900 and s.stats()["contents_held"] == 2
    assert s.lookup("zzz", "content-1") is not None  # found by content id
    assert s.cleanup(lambda k: k.startswith("c")) == 1
    assert s.stats()["bytes_held"] == 900  # "d" still names content-1
    time.sleep(0.3)
    assert s.expire() == 2
    st = s.stats()
    assert st["bytes_held"] == 0 and st["puts_rejected_budget"] == 1
    assert sum(st["bytes_released"].values()) == st["bytes_put"] == 900
    assert st["bytes_released"]["ttl"] == 900


def test_cleanup_by_request_id(pair):
    p, c = pair
    for key in ("req-1_a", "req-1_b", "req-10_a"):
        assert p.put("0", "1", key, b"d" * 100)[0]
    p.cleanup("req-1")
    assert p.health()["keys_held"] == 1  # req-10_a is another request
    p.cleanup("req-10_a", "0", "1")
    h = p.health()
    assert h["keys_held"] == 0 and h["bytes_released"]["cleanup"] == 300
    with pytest.raises(ValueError):
        p.cleanup("x", "0")


def test_producer_budget_refuses_instead_of_evicting():
    p = ro.RzmqConnector(producer_config(memory_pool_size=1 << 20))
    try:
        assert p.put("0", "1", "a", np.zeros(800_000, np.uint8))[0]
        assert p.put("0", "1", "b", np.zeros(800_000, np.uint8)) == (False, 0, None)
        assert p.health()["puts_rejected_budget"] == 1 and p.health()["keys_held"] == 1
    finally:
        p.close()


def test_close_is_idempotent_and_blocks_use():
    p = ro.RzmqConnector(producer_config())
    p.close()
    p.close()
    assert p.health()["status"] == "unhealthy"
    with pytest.raises(RuntimeError):
        p.put("0", "1", "k", b"x")


def test_bad_config_is_refused():
    with pytest.raises(ValueError):
        ro.RzmqConnector(producer_config(role="both-ways"))
    with pytest.raises(ValueError):
        ro.RzmqConnector(producer_config(rdma="maybe"))
    with pytest.raises(ValueError):
        ro.RzmqConnector(producer_config(host_cache="perhaps"))
    taken = ro.RzmqConnector(producer_config())
    try:
        with pytest.raises(RuntimeError, match="cannot listen"):
            ro.RzmqConnector(producer_config(zmq_port=taken.port))
    finally:
        taken.close()


def free_base_port(span=4) -> int:
    """A base port with `span` free ports above it (vllm-omni's rule adds the stage)."""
    import socket as _s

    for _ in range(50):
        base = random.randint(20000, 60000)
        socks = []
        try:
            for i in range(span):
                s = _s.socket()
                s.bind(("0.0.0.0", base + i))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def poll_get(conn, from_stage, to_stage, key, metadata=None, timeout=30.0):
    """get() called again until it returns the payload, as vllm-omni's receive loops do (inside
    vllm-omni a get never waits: a pushed payload not there yet, or a subscription not answered
    yet, is None at once)."""
    end = time.monotonic() + timeout
    while True:
        got = conn.get(from_stage, to_stage, key, metadata)
        if got is not None:
            return got
        assert time.monotonic() < end, f"{key} did not arrive in {timeout} s"
        time.sleep(0.005)


def test_inside_vllm_omni_producers_listen_where_its_runners_look():
    """vllm-omni's runners locate a producer by vllm-omni's port rule (base zmq_port + stage), and
    the talker -> code2wav consumer has no metadata at all: the real pipeline hung on this (the
    producer bound a free port, the talker asked port 50051 ten times a second)."""
    from vllm_omni.distributed.omni_connectors.utils.initialization import compute_connector_zmq_port

    base = free_base_port()
    # what get_stage_connector_spec + resolve_connector_spec hand each stage's runner
    thinker = ro.RzmqConnector({"host": "127.0.0.1", "zmq_port": base, "role": "sender", "stage_id": 0})
    talker = ro.RzmqConnector({"host": "127.0.0.1", "zmq_port": base, "role": "receiver", "stage_id": 1})
    code2wav = ro.RzmqConnector({"host": "127.0.0.1", "zmq_port": base, "role": "receiver", "stage_id": 2,
                                 "get_timeout": 5})
    try:
        # it listens at its first put (with async_chunk a stage holds two connectors of its edge,
        # in two processes: the one that puts listens), where vllm-omni's rule says
        rule = compute_connector_zmq_port(base, purpose="request_forwarding", from_stage=0)
        assert thinker.port is None and thinker.get_connection_info()["zmq_port"] == rule
        ok, _, _ = thinker.put("0", "1", "req_0_0", np.arange(1000, dtype=np.float32))
        assert ok and thinker.port == rule
        # the orchestrator's sender info for stage 0: vllm-omni's rule, not put()'s metadata
        sender_info = {"source_host": "127.0.0.1",
                       "source_port": compute_connector_zmq_port(base, purpose="request_forwarding", from_stage=0)}
        got, size = poll_get(talker, "0", "1", "req_0_0", sender_info)
        assert size == 4000 and np.array_equal(got.numpy(), np.arange(1000, dtype=np.float32))
        got.release()
        # the middle stage sends on with the same connector; its consumer has only the key
        ok, _, _ = talker.put("1", "2", "req_1_0", {"codes": [1, 2, 3], "finished": True})
        assert ok and talker.port == base + 1
        got, _ = poll_get(code2wav, "1", "2", "req_1_0")
        assert got == {"codes": [1, 2, 3], "finished": True}
        assert code2wav.port is None  # the last stage never listens
    finally:
        for c in (code2wav, talker, thinker):
            c.close()


def readme_connector_block() -> dict:
    """The `connectors:` entry of README.md's vllm-omni example, as a user copies it."""
    import yaml

    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    found = [yaml.safe_load(b) for b in blocks if "RzmqConnector" in b]
    assert len(found) == 1, "README.md has one RzmqConnector example"
    return found[0]["runtime"]["connectors"]["rzmq_edge"]


def test_readme_connector_example_runs_inside_vllm_omni():
    """README's block, resolved for each stage by vllm-omni's own resolve_connector_spec (what its
    runners do), moves thinker -> talker (by the port rule) and talker -> code2wav (key only)."""
    from vllm_omni.distributed.omni_connectors.utils.initialization import (
        compute_connector_zmq_port,
        resolve_connector_spec,
    )

    spec = ConnectorSpec(**readme_connector_block())
    make = lambda sid, role: OmniConnectorFactory.create_connector(  # noqa: E731
        resolve_connector_spec(spec, stage_id=sid, role=role))
    thinker, talker, code2wav = make(0, "sender"), make(1, "receiver"), make(2, "receiver")
    try:
        base = spec.extra["zmq_port"]
        ok, _, _ = thinker.put("0", "1", "rq_0_0", np.arange(64, dtype=np.float32))
        assert ok and thinker.port == compute_connector_zmq_port(base, purpose="request_forwarding", from_stage=0)
        got, n = poll_get(talker, "0", "1", "rq_0_0", {"source_host": thinker.host, "source_port": thinker.port})
        assert n == 256 and np.array_equal(got.numpy(), np.arange(64, dtype=np.float32))
        got.release()
        assert talker.put("1", "2", "rq_1_0", {"codes": [7, 8]})[0]
        got, _ = poll_get(code2wav, "1", "2", "rq_1_0")
        assert got == {"codes": [7, 8]}
    finally:
        for c in (code2wav, talker, thinker):
            c.close()


def test_zmq_port_0_is_refused_inside_vllm_omni_with_what_to_change():
    """No consumer could find a producer on a free port inside vllm-omni (the real pipeline did 0
    of 6 requests in 600 s): the stage must not start."""
    from vllm_omni.distributed.omni_connectors.utils.initialization import resolve_connector_spec

    spec = ConnectorSpec(name="RzmqConnector", extra={"host": "auto", "zmq_port": 0})
    for sid, role in ((0, "sender"), (2, "receiver")):
        with pytest.raises(ValueError, match=r"zmq_port 0 cannot work inside vllm-omni.*zmq_port: 50051"):
            OmniConnectorFactory.create_connector(resolve_connector_spec(spec, stage_id=sid, role=role))
    ro.RzmqConnector({"host": "127.0.0.1", "zmq_port": 0}).close()  # outside vllm-omni: a free port


def test_a_get_that_cannot_succeed_pauses_and_logs_once(monkeypatch, caplog):
    """vllm-omni's runners call get() again as soon as it returns: a get that fails at once (here:
    no producer address at all) must pause, and say so once, not 936,000 times."""
    import logging

    import rzmq.omni.connector as rc

    pauses = []
    monkeypatch.setattr(rc.time, "sleep", lambda s: pauses.append(s))
    c = ro.RzmqConnector(consumer_config())  # outside vllm-omni: no stage, no sender
    try:
        with caplog.at_level(logging.WARNING, logger="rzmq.omni"):
            for _ in range(20):
                assert c.get("0", "1", "never") is None
        assert len(pauses) == 20 and all(0 < p <= rc.FAILED_GET_PAUSE for p in pauses)
        assert sum("has no producer address" in r.getMessage() for r in caplog.records) == 1
    finally:
        c.close()


RDMA_PROBE = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
import vllm_omni_shim; vllm_omni_shim.install()
import rzmq.omni as ro
try:
    c = ro.RzmqConnector({"host": "127.0.0.1", "zmq_port": 0, "rdma": "require"})
except RuntimeError as e:
    print("REFUSED", e)
else:
    print("BUILT", c.endpoint)
    c.close()
"""


@pytest.mark.parametrize("provider", ["none", "soft"])
def test_rdma_require_that_cannot_be_met_fails_at_construction(provider):
    """`rdma: require` on a host with no RDMA device and no provider chosen: the connector refuses
    to start, naming what to change (the real run instead advertised rdma:// endpoints and every
    get failed at once, 936,000 times)."""
    has_device = os.path.isdir("/sys/class/infiniband") and bool(os.listdir("/sys/class/infiniband"))
    if provider == "none" and has_device:
        pytest.skip("this host has an RDMA device: rdma: require can be met without a provider chosen")
    env = peer_env("rzmq-tcp")
    env.pop("RZMQ_RDMA", None)
    if provider == "soft":
        env["RZMQ_RDMA_PROVIDER"] = "soft"
    paths = json.dumps([HERE, *[p for p in sys.path if p]])
    r = subprocess.run([sys.executable, "-c", RDMA_PROBE, paths], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    if provider == "none":
        assert r.stdout.startswith("REFUSED"), r.stdout + r.stderr
        assert "RZMQ_RDMA_PROVIDER=soft" in r.stdout and "rdma: auto" in r.stdout
    else:
        assert r.stdout.startswith("BUILT"), r.stdout + r.stderr


# ----------------------------------------------------------------------------------------------
# Hostile peers


def test_wire_parser_rejects_garbage():
    good = wire.encode_request(wire.OP_GET, 7, "k@0_1")
    assert wire.parse_request(good).req_id == 7
    bad = [
        [], [b"x"], good + [b"c", b"extra"], [b"\0" * wire.HEADER.size, b"k"],
        [good[0][:-1], b"k"], [good[0], b"\xff\xfe"], [good[0], b"k" * (wire.MAX_KEY + 1)],
        [wire.HEADER.pack(wire.MAGIC, 9, wire.OP_GET, 0, 1), b"k"],
        [wire.HEADER.pack(wire.MAGIC, 1, 77, 0, 1), b"k"], [good[0], b""],
    ]
    for frames in bad:
        with pytest.raises(wire.ProtocolError):
            wire.parse_request(frames)
    rng = random.Random(5)
    for _ in range(3000):  # random frames never raise anything but ProtocolError
        frames = [bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 3, 16, 17, 40])))
                  for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.5 and frames:
            frames[0] = good[0][:rng.randint(0, 16)] + frames[0][:16 - min(16, len(frames[0]))]
        try:
            wire.parse_request(frames)
        except wire.ProtocolError:
            pass
    ok_meta = {"kind": "raw", "size": 3, "parts": [3]}
    head = wire.encode_reply(wire.OK, 1, ok_meta)
    assert wire.parse_reply(head + [b"abc"])[2] == ok_meta
    for frames in (head + [b"ab"], head, head + [b"a", b"b"], [head[0], b"not json"], [head[0], b"[1]"],
                   wire.encode_reply(wire.OK, 1, {"kind": "raw", "size": 9, "parts": [3]}) + [b"abc"],
                   wire.encode_reply(wire.OK, 1, {"kind": "zip", "size": 3, "parts": [3]}) + [b"abc"]):
        with pytest.raises(wire.ProtocolError):
            wire.parse_reply(frames)


def test_hostile_requests_get_errors_and_the_producer_survives(pair):
    p, c = pair
    with zmq.Context() as ctx:
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.connect(p.endpoint)
        hdr = wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.OP_GET, 0, 42)
        for frames in ([b"garbage"], [hdr], [hdr, b"\xff"], [hdr, b"k" * 10_000], [b"x" * 1_000_000, b"y"]):
            d.send_multipart(frames)
            assert d.poll(5000)
            status, rid, meta, parts = wire.parse_reply(d.recv_multipart())
            assert status == wire.BAD_REQUEST and "error" in meta and not parts
        d.send_multipart(wire.encode_request(wire.OP_GET, 43, "nobody@0_1"))
        assert d.poll(5000)
        assert wire.parse_reply(d.recv_multipart())[0] == wire.NOT_FOUND
        d.close()
    # Raw bytes that are not ZMTP at all: the library closes that connection.
    import socket

    for blob in (b"\xff" * 64, b"GET / HTTP/1.1\r\n\r\n", os.urandom(4096)):
        s = socket.create_connection(("127.0.0.1", p.port))
        s.sendall(blob)
        s.close()
    ok, n, meta = p.put("0", "1", "after", b"still-serving" * 100)
    got, size = c.get("0", "1", "after", meta)
    assert got.to_bytes() == b"still-serving" * 100
    h = p.health()
    assert h["status"] == "healthy" and h["bad_requests"] == 5 and h["requests_not_found"] == 1


def test_host_cache_survives_damaged_files(tmp_path):
    hc = HostCache(str(tmp_path), 1 << 20)
    meta = {"kind": "raw", "size": 5, "parts": [5]}
    hc.store("cid", meta, [memoryview(b"hello")])
    got = hc.open("cid")
    assert got is not None and bytes(got[1][0]) == b"hello"
    path = hc._path("cid")
    with open(path, "r+b") as f:
        f.write(b"garbage!")
    assert hc.open("cid") is None and not os.path.exists(path)  # damaged: dropped, fetched again


# ----------------------------------------------------------------------------------------------
# Between processes


@pytest.mark.parametrize("mode", ["stock", "rzmq-tcp", "rzmq-rdma"])
def test_payloads_1k_to_64m_between_processes(mode):
    prod = Producer(producer_config(), SIZES, mode)
    try:
        results, health, err = consume(consumer_config(), prod.items, mode)
    finally:
        perr = prod.stop()
    for item, res in zip(prod.items, results):
        assert res["ok"] and res["size"] == item["size"] and res["digest"] == item["digest"], res
        assert res["type"] == "RecvBuffer"
    assert health["on_rzmq"] == (mode != "stock")
    if mode == "rzmq-rdma":
        big = sum(1 for s in SIZES if s > RNDV_THRESHOLD)
        assert "transport rdma/soft" in err, err
        rx = rdma_counters(err, "rx")
        assert rx and sum(z for z, _ in rx) == big, err  # every large payload read zero-copy
        tx = rdma_counters(perr, "tx")
        assert tx and sum(z for z, _ in tx) == big, perr
        assert "transport tcp" not in err + perr


def test_one_key_many_consumers_each_host_receives_once(tmp_path):
    mode = "rzmq-rdma"
    prod = Producer(producer_config(consumers=0), [16 << 20, 1 << 20], mode)
    try:
        host_a = consumer_config(host_cache_dir=str(tmp_path / "host-a"))
        host_b = consumer_config(host_cache_dir=str(tmp_path / "host-b"))
        procs = [consume(host_a, prod.items, mode, background=True) for _ in range(3)]
        procs.append(consume(host_b, prod.items, mode, background=True))
        outs = []
        for pr in procs:
            out, err = pr.communicate(timeout=180)
            outs.append(parse_consumer(pr.returncode, out, err))
        h = prod.health()
    finally:
        prod.stop()
    for results, _, _ in outs:
        for item, res in zip(prod.items, results):
            assert res["ok"] and res["digest"] == item["digest"], res
    total = sum(i["size"] for i in prod.items)
    # Two hosts: each payload served twice (once per host), whatever the consumers per host.
    assert h["requests_served"] == 2 * len(prod.items) and h["bytes_served"] == 2 * total, h
    fills = sum(o[1]["host_cache_fills"] for o in outs[:3])
    hits = sum(o[1]["host_cache_hits"] for o in outs[:3])
    assert fills == len(prod.items) and hits == 2 * len(prod.items)
    assert h["keys_held"] == 2  # consumers=0: held until cleanup or TTL


def test_same_content_under_two_keys_is_held_and_sent_once(tmp_path):
    p = ro.RzmqConnector(producer_config(consumers=0))
    c = ro.RzmqConnector(consumer_config(host_cache_dir=str(tmp_path)))
    try:
        arr = np.full(1 << 20, 7, np.uint8)
        _, _, m1 = p.put("0", "1", "r1/emb", ro.Shared(arr, "media-abc"))
        _, _, m2 = p.put("0", "2", "r2/emb", ro.Shared(arr.copy(), "media-abc"))
        assert p.health()["bytes_held"] == arr.nbytes
        g1, _ = c.get("0", "1", "r1/emb", m1)
        g2, _ = c.get("0", "2", "r2/emb", m2)
        assert np.array_equal(g1.numpy(), arr) and np.array_equal(g2.numpy(), arr)
        assert p.health()["requests_served"] == 1 and c.health()["host_cache_hits"] == 1
    finally:
        c.close()
        p.close()


def test_producer_dying_mid_transfer_fails_the_get_cleanly():
    mode = "rzmq-rdma"
    prod = Producer(producer_config(), [64 << 20] * 3, mode)
    cons = consume(consumer_config(), prod.items, mode, deadline=5.0, background=True)
    deadline = time.monotonic() + 60
    while (lambda h: h["requests_served"] + h["pushes"])(prod.health()) < 1:  # the first transfer is under way
        assert time.monotonic() < deadline and cons.poll() is None
        time.sleep(0.005)
    prod.proc.send_signal(signal.SIGKILL)
    prod.proc.wait()
    out, err = cons.communicate(timeout=120)
    results, health, _ = parse_consumer(cons.returncode, out, err)
    assert len(results) == 3
    failed = [r for r in results if not r["ok"]]
    assert failed, "the producer died, yet every get succeeded"
    for r in failed:
        assert r["seconds"] < 5.0 + 5.0  # within its deadline (plus scheduling slack)
    for item, r in zip(prod.items, results):
        if r["ok"]:
            assert r["digest"] == item["digest"]
    assert health["get_timeouts"] + health["get_errors"] == len(failed)


def _load_netns_helper():
    """compat/rzmq_netns.py (the two-namespace setup shared with compat/pyzmq_vllm_traffic.py), by path."""
    spec = importlib.util.spec_from_file_location("rzmq_netns", os.path.join(ROOT, "compat", "rzmq_netns.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def netns():
    helper = _load_netns_helper()
    # Under CI=true (root, iproute2 installed by setup) a namespace that cannot be made fails.
    miss = pytest.fail if os.environ.get("CI") == "true" else pytest.skip
    if not helper.available():
        miss("network namespaces need root and iproute2")
    why = helper.up(NETNS, NETNS_IP, NETNS_VETH)
    if why:
        miss(f"cannot make network namespaces here: {why}")
    yield
    helper.down(NETNS)


@pytest.mark.parametrize("mode", ["rzmq-tcp", "rzmq-rdma"])
def test_across_two_network_namespaces(netns, mode, tmp_path):
    prod = Producer({"host": NETNS_IP[0], "role": "sender"}, SIZES, mode, netns=NETNS[0])
    try:
        assert all(i["metadata"]["source_host"] == NETNS_IP[0] for i in prod.items)
        results, health, err = consume({"host": NETNS_IP[1], "role": "receiver",
                                        "host_cache_dir": str(tmp_path / "b")}, prod.items, mode, netns=NETNS[1])
    finally:
        perr = prod.stop()
    for item, res in zip(prod.items, results):
        assert res["ok"] and res["digest"] == item["digest"], res
    if mode == "rzmq-rdma":
        assert "transport rdma/soft" in err
        assert sum(z for z, _ in rdma_counters(err, "rx")) == sum(1 for s in SIZES if s > RNDV_THRESHOLD), err
        assert "transport tcp" not in err + perr


def test_a_host_cache_hit_still_counts_as_a_delivery(tmp_path):
    p = ro.RzmqConnector(producer_config())  # consumers=1: each key released after one delivery
    c = ro.RzmqConnector(consumer_config(host_cache_dir=str(tmp_path)))
    try:
        arr = np.full(1 << 20, 3, np.uint8)
        metas = [p.put("0", str(i), "r/emb", ro.Shared(arr, "media-xyz"))[2] for i in (1, 2)]
        for i, m in zip((1, 2), metas):
            got, n = c.get("0", str(i), "r/emb", m)
            assert n == arr.nbytes and np.array_equal(got.numpy(), arr)
        h = settled(p)
        assert h["keys_held"] == 0 and h["requests_served"] == 1 and h["deliveries_from_host_cache"] == 1
        assert h["bytes_released"]["consumed"] == arr.nbytes == h["bytes_put"]
    finally:
        c.close()
        p.close()

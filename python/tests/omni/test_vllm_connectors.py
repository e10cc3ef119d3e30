"""RzmqECConnector and RzmqKVConnector (rzmq.vllm) in one process, on real vLLM 0.30 classes.

vLLM's configs, requests and scheduler outputs are the few attributes the connectors read; the
connectors themselves, their sockets (pyzmq on rzmq's libzmq.so, preloaded by run.sh) and the
tensors are real. The real runs (python/tests/vllm) exercise the same code inside vLLM.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import threading
import time
from types import SimpleNamespace as NS

import pytest
import torch

pytest.importorskip("vllm")

from vllm.distributed.ec_transfer.ec_connector.base import ECConnectorRole  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402

import rzmq.omni as ro  # noqa: E402
from rzmq.vllm import register  # noqa: E402
from rzmq.vllm.ec import RzmqECConnector  # noqa: E402
from rzmq.vllm.kv import LoadReq, RzmqKVConnector, RzmqKVMetadata, SaveReq  # noqa: E402
from rzmq.vllm.metadata import EC_PROTOCOL_VERSION  # noqa: E402


def free_port(pairs: int = 1) -> int:
    """A port p with p .. p + 2*pairs - 1 free (announcements use port + 1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + 2 * pairs > 65535:
            continue
        try:
            held = []
            for q in range(p, p + 2 * pairs):
                t = socket.socket()
                t.bind(("127.0.0.1", q))
                held.append(t)
            for t in held:
                t.close()
            return p
        except OSError:
            for t in held:
                t.close()
    raise RuntimeError("no free port range")


def ec_config(role: str, port: int, tmp_path, **extra):
    """An EC instance's config. Producers push nothing here unless a test sets push_bytes: the
    tests below exercise the fetch path (embeddings over push_bytes, late consumers, failures)."""
    cfg = NS(is_ec_producer=role in ("ec_producer", "ec_both"), is_ec_consumer=role in ("ec_consumer", "ec_both"),
             ec_ip="127.0.0.1", ec_port=port,
             ec_connector_extra_config={"host_cache_dir": str(tmp_path / "hc"), "fetch_timeout": 3,
                                        "push_bytes": 0, **extra})
    return NS(ec_transfer_config=cfg)


def feature(mm_hash: str, offset: int = 0, length: int = 16):
    return NS(identifier=mm_hash, mm_position=NS(offset=offset, length=length))


def wait_until(fn, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.01)
    return fn()


def test_register_names_both_connectors_once():
    from vllm.distributed.ec_transfer.ec_connector.factory import ECConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    register()
    assert register() == []  # a second call adds nothing and does not raise
    assert "RzmqECConnector" in ECConnectorFactory._registry
    assert "RzmqKVConnector" in KVConnectorFactory._registry
    assert ECConnectorFactory._registry["RzmqECConnector"]() is RzmqECConnector
    assert KVConnectorFactory._registry["RzmqKVConnector"]() is RzmqKVConnector


def test_vllm_plugin_registers_the_omni_connector_in_vllm_omni_processes_only():
    """vllm-omni's engine-core processes load vLLM's plugins only, and with async_chunk their
    scheduler creates the stage's connector: the real Qwen3-Omni pipeline failed there with
    'Unknown connector: RzmqConnector'. vLLM's plugin registers it where vllm-omni is loaded, and
    plain vLLM does not import vllm-omni because of it."""
    import subprocess
    import sys

    code = """
import sys
import rzmq.vllm
plain = rzmq.vllm.register()
assert "vllm_omni" not in sys.modules, "plain vLLM imported vllm-omni"
assert "RzmqConnector" not in plain, plain
from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory
import vllm_omni.engine  # a stage's engine-core process has vllm-omni loaded before vLLM's plugins
assert "RzmqConnector" not in OmniConnectorFactory.list_registered_connectors()
assert rzmq.vllm.register() == ["RzmqConnector"]
assert "RzmqConnector" in OmniConnectorFactory.list_registered_connectors()
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_ec_embedding_announced_fetched_once_and_loaded_without_copy(tmp_path):
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.SCHEDULER)
    work = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.WORKER)
    try:
        emb = torch.randn(16, 64)
        assert not sched.has_cache_item("h1")
        prod.save_caches({"h1": emb}, "h1")
        # the announcement reaches the consumer's scheduler: has_cache_item is a lookup
        assert wait_until(lambda: sched.has_cache_item("h1"))
        req = NS(request_id="r1", mm_features=[feature("h1")], ec_transfer_params=None)
        # the first call starts the fetch (and says ready at once only if it ended within the
        # short hold wait); the request is admitted once the embedding is on this host
        sched.ensure_cache_available(req, 0)
        assert wait_until(lambda: sched.ensure_cache_available(req, 0))
        assert sched._index.local("h1")
        sched.update_state_after_alloc(req, 0)
        meta = sched.build_connector_meta(None)
        assert meta.loads == ["h1"]
        assert sched.build_connector_meta(None).loads == []  # built once
        cache = {}
        work.bind_connector_metadata(meta)
        work.start_load_caches(cache)
        assert torch.equal(cache["h1"], emb)
        assert work.stats["loaded"] == 1
        # a second request for the same picture: on this host already, no second fetch
        req2 = NS(request_id="r2", mm_features=[feature("h1")], ec_transfer_params=None)
        assert sched.ensure_cache_available(req2, 0)
        assert sched.stats["fetched"] == 1
        # a request whose picture is already computed (prefix) needs nothing
        assert sched.ensure_cache_available(NS(request_id="r3", mm_features=[feature("zz", 0, 4)],
                                               ec_transfer_params=None), 8)
        # a picture nobody announced: held for announce_wait, then encoded here
        req4 = NS(request_id="r4", mm_features=[feature("nobody")], ec_transfer_params=None)
        assert not sched.ensure_cache_available(req4, 0)
        assert wait_until(lambda: sched.ensure_cache_available(req4, 0), timeout=5.0)
        assert not sched.has_cache_item("nobody")
    finally:
        for c in (work, sched, prod):
            c.shutdown()


def test_ec_small_embedding_is_pushed_with_its_announcement_and_never_fetched(tmp_path):
    """Issue 44, item 4: an embedding of at most push_bytes travels with its announcement into
    every subscribed consumer host's cache, so the consumer asked next admits its request on
    the first call, and nobody asks the producer. A larger one is announced and fetched."""
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path, push_bytes=4096), ECConnectorRole.WORKER)
    a = RzmqECConnector(ec_config("ec_consumer", port, tmp_path / "a"), ECConnectorRole.SCHEDULER)
    b = RzmqECConnector(ec_config("ec_consumer", port, tmp_path / "b"), ECConnectorRole.SCHEDULER)
    work = RzmqECConnector(ec_config("ec_consumer", port, tmp_path / "a"), ECConnectorRole.WORKER)
    try:
        assert wait_until(lambda: a._peer.fetcher.stats["sockets"] == 2 and b._peer.fetcher.stats["sockets"] == 2)
        time.sleep(0.3)  # the subscriptions reach the producer's XPUB
        small, big = torch.randn(16, 64), torch.randn(64, 64)  # 4096 B (pushed), 16 KiB (fetched)
        prod.save_caches({"s": small}, "s")
        prod.save_caches({"big": big}, "big")
        assert prod.stats["pushed"] == 1 and prod.stats["saved"] == 2
        for sched in (a, b):  # both hosts have it without asking
            assert wait_until(lambda: sched._index.local("s"))
            req = NS(request_id="r", mm_features=[feature("s")], ec_transfer_params=None)
            assert sched.ensure_cache_available(req, 0)  # the first call: nothing to wait for
            assert sched.stats["pushed_in"] == 1 and sched.stats["fetched"] == 0
        assert prod.health()["transport"]["requests_served"] == 0
        a.update_state_after_alloc(NS(request_id="r", mm_features=[feature("s")], ec_transfer_params=None), 0)
        cache = {}
        work.bind_connector_metadata(a.build_connector_meta(None))
        work.start_load_caches(cache)
        assert torch.equal(cache["s"], small)
        req = NS(request_id="rb", mm_features=[feature("big")], ec_transfer_params=None)
        assert wait_until(lambda: a.ensure_cache_available(req, 0))
        assert a.stats["fetched"] == 1 and a.stats["pushed_in"] == 1
        assert prod.health()["transport"]["requests_served"] == 1
    finally:
        for c in (work, b, a, prod):
            c.shutdown()


def test_ec_pushed_embedding_that_does_not_check_out_is_dropped_and_fetched(tmp_path):
    """A pushed message whose sizes disagree with its meta, or of another protocol version, is
    not written into the host cache; the embedding is fetched as an announced one."""
    port = free_port()
    sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.SCHEDULER)
    prod = None
    try:
        idx = sched._index
        good = {"v": EC_PROTOCOL_VERSION, "compat": idx.compat, "meta": {"size": 8}}
        idx._on_announce([b"=", b"x1", json.dumps(good).encode(), b"1234"])  # 4 bytes, meta says 8
        idx._on_announce([b"=", b"x2", json.dumps({**good, "v": 999}).encode(), b"12345678"])
        idx._on_announce([b"=", b"x3", b"not json", b"12345678"])
        assert sched.stats["pushes_refused"] == 3 and sched.stats["pushed_in"] == 0
        assert not any(idx.local(h) for h in ("x1", "x2", "x3"))
        prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path / "p"), ECConnectorRole.WORKER)
        prod.save_caches({"x1": torch.ones(2)}, "x1")
        req = NS(request_id="r", mm_features=[feature("x1")], ec_transfer_params=None)
        assert wait_until(lambda: sched.ensure_cache_available(req, 0))
        assert sched.stats["fetched"] == 1
    finally:
        for c in (sched, prod):
            if c is not None:
                c.shutdown()


def test_ec_consumer_opens_its_producer_connection_before_the_first_fetch_and_reuses_it(tmp_path):
    """The scheduler's fetch thread connects to each configured producer at construction (the
    connection and its RDMA upgrade are not part of the first fetch), and every fetch goes over
    that one connection."""
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.SCHEDULER)
    try:
        assert wait_until(lambda: sched._peer.fetcher.stats["sockets"] == 2)  # SUB + DEALER, before any fetch
        assert sched.stats["fetched"] == 0
        for h in ("a", "b", "c"):
            prod.save_caches({h: torch.full((2, 4), float(ord(h)))}, h)
        for h in ("a", "b", "c"):
            req = NS(request_id=f"r{h}", mm_features=[feature(h)], ec_transfer_params=None)
            assert wait_until(lambda: sched.ensure_cache_available(req, 0))
        assert sched.stats["fetched"] == 3
        assert sched._peer.fetcher.stats["sockets"] == 2  # the same connection carried every fetch
        assert prod.health()["transport"]["requests_served"] == 3
    finally:
        for c in (sched, prod):
            c.shutdown()


def test_ec_two_hosts_each_fetch_once(tmp_path):
    """Two consumer instances with separate host caches (two hosts) both learn of the embedding
    and each fetches it once; the producer keeps it for both (any number of consumers)."""
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    a = RzmqECConnector(ec_config("ec_consumer", port, tmp_path / "a"), ECConnectorRole.SCHEDULER)
    b = RzmqECConnector(ec_config("ec_consumer", port, tmp_path / "b"), ECConnectorRole.SCHEDULER)
    try:
        prod.save_caches({"h": torch.arange(32.0).reshape(4, 8)}, "h")
        for sched in (a, b):
            assert wait_until(lambda: sched.has_cache_item("h"))
            req = NS(request_id="r", mm_features=[feature("h")], ec_transfer_params=None)
            assert wait_until(lambda: sched.ensure_cache_available(req, 0))
            assert sched.stats["fetched"] == 1
        assert prod.health()["transport"]["requests_served"] == 2
    finally:
        for c in (b, a, prod):
            c.shutdown()


def test_ec_late_consumer_learns_what_is_live_and_releases_are_announced(tmp_path):
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path, buffer_ttl_seconds=1.0), ECConnectorRole.WORKER)
    try:
        prod.save_caches({"old": torch.ones(4, 8)}, "old")
        sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.SCHEDULER)
        try:
            assert wait_until(lambda: sched.has_cache_item("old"))  # announced again to the newcomer
            # unused past its TTL: released at the producer, and the consumer is told
            assert wait_until(lambda: not sched.has_cache_item("old"), timeout=8.0)
        finally:
            sched.shutdown()
    finally:
        prod.shutdown()


def test_ec_fetch_from_a_dead_producer_fails_the_request(tmp_path):
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path, fetch_timeout=1), ECConnectorRole.SCHEDULER)
    try:
        prod.save_caches({"h2": torch.ones(4, 8)}, "h2")
        assert wait_until(lambda: sched.has_cache_item("h2"))
        prod.shutdown()  # the producer goes before anyone fetched
        req = NS(request_id="dead", mm_features=[feature("h2")], ec_transfer_params=None)
        t0 = time.monotonic()
        failed = set()
        while time.monotonic() - t0 < 10 and not failed:
            sched.ensure_cache_available(req, 0)
            failed = sched.take_unavailable_requests()
            time.sleep(0.02)
        assert failed == {"dead"}
    finally:
        sched.shutdown()
        prod.shutdown()


def kv_setup(role: str, port: int, num_blocks: int = 8, block_size: int = 4, **extra):
    cfg = NS(is_kv_producer=role == "kv_producer", is_kv_consumer=role == "kv_consumer", kv_ip="127.0.0.1",
             kv_port=port, kv_connector_extra_config={"load_timeout": 2, **extra}, engine_id="e1")
    vc = NS(kv_transfer_config=cfg, cache_config=NS(block_size=block_size))
    return vc, NS(num_blocks=num_blocks)


def kv_pair(layers: list[str]):
    """A producer worker and a consumer worker, each with its own KV cache ([B, H, N, C] per layer)."""
    port = free_port()
    vc_p, kc_p = kv_setup("kv_producer", port)
    vc_c, kc_c = kv_setup("kv_consumer", port)
    prod = RzmqKVConnector(vc_p, KVConnectorRole.WORKER, kc_p)
    cons = RzmqKVConnector(vc_c, KVConnectorRole.WORKER, kc_c)
    src = {n: torch.randn(8, 2, 4, 6) for n in layers}
    dst = {n: torch.zeros(8, 2, 4, 6) for n in layers}
    prod.register_kv_caches(src)
    cons.register_kv_caches(dst)
    return port, prod, cons, src, dst


def test_kv_layers_travel_block_by_block_and_free_after_delivery():
    layers = ["l0", "l1"]
    port, prod, cons, src, dst = kv_pair(layers)
    try:
        # the producer's request holds blocks 5, 2, 7 (10 tokens); it finishes prefill this step
        prod.bind_connector_metadata(RzmqKVMetadata(saves=[SaveReq("p1", [5, 2, 7], 10)]))
        for n in layers:
            prod.save_kv_layer(n, src[n], None)
        prod.clear_connector_metadata()
        assert prod.get_finished({"p1"}) == (None, None)  # nothing delivered yet: blocks stay
        # the consumer loads tokens 0..8 into its blocks 1, 3, 0
        cons.bind_connector_metadata(RzmqKVMetadata(loads=[LoadReq("d1", "p1", "127.0.0.1", port, [1, 3, 0], 0, 9)]))
        cons.start_load_kv(None)
        for n in layers:
            cons.wait_for_layer_load(n)
        assert cons.get_block_ids_with_load_errors() == set()
        cons.get_finished(set())
        for n in layers:
            for s, d in ((5, 1), (2, 3), (7, 0)):
                assert torch.equal(dst[n][d], src[n][s]), (n, s, d)
            assert not dst[n][2].any()  # untouched
        assert cons.stats["copies"] == 6 and cons.stats["layers_loaded"] == 2
        # every layer delivered: the producer hands the blocks back to vLLM
        assert wait_until(lambda: prod.get_finished(set()) == ({"p1"}, None), timeout=5.0)
    finally:
        cons.shutdown()
        prod.shutdown()


def test_kv_two_requests_in_one_forward_each_into_its_own_blocks():
    layers = ["l0", "l1", "l2"]
    port, prod, cons, src, dst = kv_pair(layers)
    try:
        prod.bind_connector_metadata(RzmqKVMetadata(saves=[SaveReq("a", [0, 1], 6), SaveReq("b", [2], 3)]))
        for n in layers:
            prod.save_kv_layer(n, src[n], None)
        cons.bind_connector_metadata(RzmqKVMetadata(loads=[
            LoadReq("da", "a", "127.0.0.1", port, [4, 5], 0, 5), LoadReq("db", "b", "127.0.0.1", port, [7], 0, 2)]))
        cons.start_load_kv(None)
        for n in layers:
            cons.wait_for_layer_load(n)
        cons.get_finished(set())
        assert cons.get_block_ids_with_load_errors() == set()
        for n in layers:
            for s, d in ((0, 4), (1, 5), (2, 7)):
                assert torch.equal(dst[n][d], src[n][s])
        assert wait_until(lambda: (prod.get_finished({"a", "b"})[0] or set()) >= {"a", "b"} or
                          not prod.worker._sends, timeout=5.0)
        assert not prod.worker._sends  # both requests' blocks handed back
    finally:
        cons.shutdown()
        prod.shutdown()


def test_kv_consumer_of_a_dead_producer_reports_failed_blocks_in_time():
    port = free_port()
    vc_c, kc_c = kv_setup("kv_consumer", port, load_timeout=1)
    cons = RzmqKVConnector(vc_c, KVConnectorRole.WORKER, kc_c)
    try:
        dst = {"l0": torch.zeros(8, 2, 4, 6), "l1": torch.zeros(8, 2, 4, 6)}
        cons.register_kv_caches(dst)
        cons.bind_connector_metadata(RzmqKVMetadata(loads=[LoadReq("d1", "gone", "127.0.0.1", port, [4, 6], 0, 7)]))
        t0 = time.monotonic()
        cons.start_load_kv(None)
        cons.wait_for_layer_load("l0")
        cons.wait_for_layer_load("l1")  # the first failure fails the rest at once
        assert time.monotonic() - t0 < 8
        assert cons.get_block_ids_with_load_errors() == {4, 6}
        assert cons.get_block_ids_with_load_errors() == set()  # reported once
        assert cons.stats["load_failures"] == 1
    finally:
        cons.shutdown()


def test_kv_scheduler_side_admits_all_but_the_last_token_and_names_the_producer():
    port = free_port()
    vc_p, kc = kv_setup("kv_producer", port)
    vc_c, _ = kv_setup("kv_consumer", port)
    sp = RzmqKVConnector(vc_p, KVConnectorRole.SCHEDULER, kc)
    sc = RzmqKVConnector(vc_c, KVConnectorRole.SCHEDULER, kc)
    # producer: a 10-token prompt prefilled in two chunks (6, then 4) over blocks 3, 1 then 2
    params = {"do_remote_decode": True}
    new = NS(req_id="p1", prompt_token_ids=list(range(10)), block_ids=([3, 1],), num_computed_tokens=0,
             sampling_params=NS(extra_args={"kv_transfer_params": params}))
    empty = NS(req_ids=[], new_block_ids=[], num_computed_tokens=[], resumed_req_ids=set())
    m1 = sp.build_connector_meta(NS(scheduled_new_reqs=[new], scheduled_cached_reqs=empty,
                                    num_scheduled_tokens={"p1": 6}))
    assert m1.saves == []  # prefill not complete yet
    cached = NS(req_ids=["p1"], new_block_ids=[([2],)], num_computed_tokens=[6], resumed_req_ids=set())
    m2 = sp.build_connector_meta(NS(scheduled_new_reqs=[], scheduled_cached_reqs=cached,
                                    num_scheduled_tokens={"p1": 4}))
    assert [(s.req_id, s.block_ids, s.num_tokens) for s in m2.saves] == [("p1", [3, 1, 2], 10)]
    delay, kvp = sp.request_finished(NS(request_id="p1", status=NS(name="FINISHED_LENGTH_CAPPED")), [3, 1, 2])
    assert delay and kvp["do_remote_prefill"] and kvp["num_tokens"] == 10 and kvp["remote_port"] == port
    # an aborted request's layers are released, its blocks still held until they are
    sp.scheduler._saving["p2"] = ([4], 3)
    sp.scheduler._saved.add("p2")
    assert sp.request_finished(NS(request_id="p2", status=NS(name="FINISHED_ABORTED")), [4]) == (True, None)
    assert sp.build_connector_meta(NS(scheduled_new_reqs=[], scheduled_cached_reqs=empty,
                                      num_scheduled_tokens={})).releases == ["p2"]
    # consumer: all tokens but the last come from the producer, loaded inside the forward
    req = NS(request_id="d1", prompt_token_ids=list(range(10)), kv_transfer_params=dict(kvp))
    assert sc.get_num_new_matched_tokens(req, 0) == (9, False)
    sc.update_state_after_alloc(req, NS(get_block_ids=lambda: ([7, 0, 5],)), 9)
    meta = sc.build_connector_meta(NS(scheduled_new_reqs=[], scheduled_cached_reqs=empty, num_scheduled_tokens={}))
    (load,) = meta.loads
    assert (load.remote_req_id, load.block_ids, load.start, load.end) == ("p1", [7, 0, 5], 0, 9)
    assert sc.get_num_new_matched_tokens(req, 0) == (0, False)  # once: a preempted request recomputes
    # a prompt that is not the one the producer prefilled is computed here
    other = NS(request_id="d2", prompt_token_ids=list(range(12)), kv_transfer_params=dict(kvp))
    assert sc.get_num_new_matched_tokens(other, 0) == (0, False)


# ----------------------------------------------------------------------------------------------
# A slow producer, closing with fetches in flight, the versioned protocol, the stats


def rss_mib() -> float:
    """This process's resident memory."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def settle_rss(baseline: float, slack: float, timeout: float = 10.0) -> float:
    """RSS once it is back within `slack` MiB of `baseline` (or as it is after `timeout`)."""
    end = time.monotonic() + timeout
    while True:
        gc.collect()
        now = rss_mib()
        if now <= baseline + slack or time.monotonic() > end:
            return now
        time.sleep(0.1)


def slow_down(peer, seconds: float):
    """Makes an RzmqConnector producer answer every data request `seconds` late (its service
    thread sleeps first); returns the undo."""
    answer = peer._answer

    def slow(router, frames):
        time.sleep(seconds)
        return answer(router, frames)

    peer._answer = slow
    return lambda: setattr(peer, "_answer", answer)


BIG = (16, 64, 16, 256)  # 16 blocks of 1 MiB (float32) per layer


def big_kv_pair(layers: list[str], load_timeout: float):
    port = free_port()
    vc_p, kc_p = kv_setup("kv_producer", port, num_blocks=BIG[0])
    vc_c, kc_c = kv_setup("kv_consumer", port, num_blocks=BIG[0], load_timeout=load_timeout)
    prod = RzmqKVConnector(vc_p, KVConnectorRole.WORKER, kc_p)
    cons = RzmqKVConnector(vc_c, KVConnectorRole.WORKER, kc_c)
    src = {n: torch.randn(*BIG) for n in layers}
    dst = {n: torch.zeros(*BIG) for n in layers}
    prod.register_kv_caches(src)
    cons.register_kv_caches(dst)
    return port, prod, cons, src, dst


def kv_round(prod, cons, port, layers, src, name: str, blocks: list[int]):
    """One request: the producer saves `blocks` of every layer, the consumer loads them into the
    same block ids; returns the consumer's failed blocks."""
    prod.bind_connector_metadata(RzmqKVMetadata(saves=[SaveReq(name, blocks, 4 * len(blocks))]))
    for n in layers:
        prod.save_kv_layer(n, src[n], None)
    prod.clear_connector_metadata()
    cons.bind_connector_metadata(RzmqKVMetadata(loads=[LoadReq(f"d-{name}", name, "127.0.0.1", port, blocks, 0,
                                                               4 * len(blocks) - 1)]))
    cons.start_load_kv(None)
    for n in layers:
        cons.wait_for_layer_load(n)
    cons.get_finished(set())
    cons.clear_connector_metadata()
    return cons.get_block_ids_with_load_errors()


def test_kv_slow_producer_layers_are_released_on_arrival_and_memory_returns():
    """The producer answers each layer after the consumer's timeout: the consumer fails the
    request in time, and every layer that arrives afterwards (the one it waited for and the
    ones already asked for ahead) is released as it arrives: the fetch worker holds nothing,
    the consumer holds nothing, the process's memory returns to its baseline, and the next
    request is served."""
    layers = ["l0", "l1", "l2", "l3"]
    port, prod, cons, src, dst = big_kv_pair(layers, load_timeout=0.5)
    blocks = list(range(8))  # 8 MiB per layer, 32 MiB per request
    try:
        assert kv_round(prod, cons, port, layers, src, "warm", blocks) == set()  # allocator pools warm
        baseline = settle_rss(rss_mib(), 0, timeout=0.5)
        undo = slow_down(prod._peer, 0.8)
        fetch = cons._peer.fetcher
        for i in range(3):
            t0 = time.monotonic()
            failed = kv_round(prod, cons, port, layers, src, f"slow{i}", blocks)
            assert failed == set(blocks) and time.monotonic() - t0 < 5  # failed within its timeout
        during = rss_mib()
        # the producer still answers every request asked for (4 layers each): all arrive late
        assert wait_until(lambda: fetch.stats["late_replies"] >= 12, timeout=30.0), fetch.stats
        assert fetch.stats["late_bytes_released"] == 12 * 8 << 20
        assert fetch.stats["in_flight"] == 0
        assert cons.worker.held_bytes() == 0
        after = settle_rss(baseline, 24)
        print(f"RSS MiB: baseline {baseline:.0f}, after the timeouts {during:.0f}, after the late layers {after:.0f}"
              f" ({12 * 8} MiB came late and were released)")
        assert after <= baseline + 24, (baseline, after)  # 96 MiB came late: none of it kept
        undo()
        assert kv_round(prod, cons, port, layers, src, "next", blocks) == set()
        for n in layers:
            assert torch.equal(dst[n][:8], src[n][:8])
        stats = cons.get_kv_connector_stats()
        red = stats.reduce()
        assert red["Num failed transfers"] == 3 and red["Late MB released"] == 96.0
        assert red["Num successful transfers"] == 8  # warm and next, 4 layers each
        assert cons.health()["transfers"]["late_bytes_released"] == 96 << 20
    finally:
        cons.shutdown()
        prod.shutdown()


def test_ec_abandoned_fetch_is_released_on_arrival(tmp_path):
    """The encoder answers after the consumer's fetch_timeout: the request fails, the embedding
    that arrives afterwards is released (not kept, not written to the host cache), memory
    returns to its baseline, and the next picture is fetched."""
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path, fetch_timeout=0.5), ECConnectorRole.SCHEDULER)
    try:
        emb = {h: torch.randn(4096, 1024) for h in ("warm", "slow1", "slow2", "next")}  # 16 MiB each
        for h, t in emb.items():
            prod.save_caches({h: t}, h)
        assert wait_until(lambda: all(sched.has_cache_item(h) for h in emb))

        def fetch(h: str):
            req = NS(request_id=f"r-{h}", mm_features=[feature(h)], ec_transfer_params=None)
            end = time.monotonic() + 10
            while time.monotonic() < end:
                if sched.ensure_cache_available(req, 0):
                    return "ready"
                if sched.take_unavailable_requests():
                    return "failed"
                time.sleep(0.01)
            return "hung"

        assert fetch("warm") == "ready"
        baseline = settle_rss(rss_mib(), 0, timeout=0.5)
        undo = slow_down(prod._peer, 0.8)
        assert fetch("slow1") == "failed" and fetch("slow2") == "failed"
        f = sched._peer.fetcher
        assert wait_until(lambda: f.stats["late_replies"] == 2, timeout=10.0), f.stats
        assert f.stats["late_bytes_released"] == 2 * (16 << 20)
        assert not sched._index.local("slow1") and not sched._index.local("slow2")  # released, not cached
        after = settle_rss(baseline, 12)
        print(f"RSS MiB: baseline {baseline:.0f}, after the late embeddings {after:.0f} (32 MiB came late)")
        assert after <= baseline + 12, (baseline, after)
        undo()
        assert fetch("next") == "ready"
        assert sched.stats["fetched"] == 2 and sched.stats["fetch_failures"] == 2
    finally:
        sched.shutdown()
        prod.shutdown()


def our_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("rzmq-")}


def test_close_with_fetches_in_flight_on_every_connector(tmp_path):
    """Every connector closes while fetches are in flight to a producer that does not answer
    in time: close() returns within its bound, the waiting callers return, each thread closed
    its own sockets and ended, and the memory of what was in flight is given back."""
    before_threads = our_threads()
    baseline = rss_mib()
    # RzmqConnector: a get() blocked on a slow producer, closed from another thread (pulled: a
    # pushed payload has no fetch in flight; test_push.py closes a get waiting on the inbox)
    p = ro.RzmqConnector({"host": "127.0.0.1", "zmq_port": 0, "role": "sender", "host_cache": False})
    c = ro.RzmqConnector({"host": "127.0.0.1", "role": "receiver", "host_cache": False, "push": False})
    _, _, meta = p.put("0", "1", "k", torch.zeros(4 << 20, dtype=torch.uint8))
    slow_down(p, 3.0)
    got = []
    t = threading.Thread(target=lambda: got.append(c.get_with_deadline("0", "1", "k", meta,
                                                                       deadline=time.monotonic() + 30)))
    t.start()
    assert wait_until(lambda: c._fetcher is not None and c._fetcher.stats["in_flight"] == 1)
    t0 = time.monotonic()
    c.close()
    t.join(5)
    assert not t.is_alive() and got == [None] and time.monotonic() - t0 < 5
    assert not c._fetcher.alive and c._fetcher.stats["sockets"] == 0
    # the producer's service thread is busy answering (3 s): close() waits a bounded time
    t0 = time.monotonic()
    p.close()
    assert time.monotonic() - t0 < p.CLOSE_WAIT + 2

    # KV: a consumer worker loading from a slow producer
    layers = ["l0", "l1"]
    port, prod, cons, src, _ = kv_pair(layers)
    prod.bind_connector_metadata(RzmqKVMetadata(saves=[SaveReq("p", [1, 2], 8)]))
    for n in layers:
        prod.save_kv_layer(n, src[n], None)
    slow_down(prod._peer, 2.0)
    cons.bind_connector_metadata(RzmqKVMetadata(loads=[LoadReq("d", "p", "127.0.0.1", port, [3, 4], 0, 7)]))
    cons.start_load_kv(None)
    kv_fetcher = cons._peer.fetcher
    assert wait_until(lambda: kv_fetcher.stats["in_flight"] == 2)
    t0 = time.monotonic()
    cons.shutdown()
    assert time.monotonic() - t0 < 2 and not kv_fetcher.alive and kv_fetcher.stats["sockets"] == 0
    prod.shutdown()

    # EC: a scheduler whose fetch is in flight, and the producer's announcer
    port = free_port()
    eprod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    esched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.SCHEDULER)
    eprod.save_caches({"h": torch.ones(256, 1024)}, "h")
    assert wait_until(lambda: esched.has_cache_item("h"))
    slow_down(eprod._peer, 2.0)
    fetcher = esched._peer.fetcher
    assert not esched.ensure_cache_available(NS(request_id="r", mm_features=[feature("h")],
                                                ec_transfer_params=None), 0)
    assert wait_until(lambda: fetcher.stats["in_flight"] == 1)
    t0 = time.monotonic()
    esched.shutdown()
    assert time.monotonic() - t0 < 2 and not fetcher.alive and fetcher.stats["sockets"] == 0
    eprod.shutdown()
    assert wait_until(lambda: our_threads() <= before_threads, timeout=5.0), our_threads() - before_threads
    after = settle_rss(baseline, 16)
    print(f"RSS MiB: before {baseline:.0f}, after closing every connector {after:.0f}")
    assert after <= baseline + 16


def test_a_producer_of_another_protocol_version_is_refused_with_a_reason(caplog):
    import logging

    port = free_port()
    vc_c, kc = kv_setup("kv_consumer", port)
    sc = RzmqKVConnector(vc_c, KVConnectorRole.SCHEDULER, kc)
    base = {"do_remote_prefill": True, "remote_request_id": "p", "remote_host": "127.0.0.1", "remote_port": port,
            "num_tokens": 10, "rzmq_kv_version": 1, "rzmq_compat": sc.scheduler.compat}
    ok = NS(request_id="a", prompt_token_ids=list(range(10)), kv_transfer_params=dict(base))
    assert sc.get_num_new_matched_tokens(ok, 0) == (9, False)
    with caplog.at_level(logging.ERROR, logger="rzmq.vllm.kv"):
        for params in ({**base, "rzmq_kv_version": 2}, {k: v for k, v in base.items() if k != "rzmq_kv_version"},
                       {**base, "rzmq_compat": "another-model"}):
            req = NS(request_id="b", prompt_token_ids=list(range(10)), kv_transfer_params=params)
            assert sc.get_num_new_matched_tokens(req, 0) == (0, False)  # computed here instead
    assert sc.stats["requests_refused"] == 3
    assert "speaks rzmq protocol v2, this instance v1" in caplog.text
    assert sum("logged once per producer" in r.getMessage() for r in caplog.records) == 1


def test_ec_announcement_of_another_version_is_not_used(tmp_path):
    port = free_port()
    prod = RzmqECConnector(ec_config("ec_producer", port, tmp_path), ECConnectorRole.WORKER)
    sched = RzmqECConnector(ec_config("ec_consumer", port, tmp_path), ECConnectorRole.SCHEDULER)
    try:
        prod.worker.compat = "another-model"
        prod.save_caches({"x": torch.ones(2, 2)}, "x")
        # Refused at least once: the producer announces it again to a subscriber it sees join
        # after the first announcement went out, and each one is refused.
        assert wait_until(lambda: sched.stats["announcements_refused"] >= 1)
        assert not sched.has_cache_item("x")  # this instance encodes it itself
    finally:
        sched.shutdown()
        prod.shutdown()


def test_kv_stats_reach_vllms_stats_interface_and_prometheus():
    """get_kv_connector_stats() is what vLLM collects each step; its reduce() is vLLM's log line,
    and the Prometheus metrics count what it carries."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    layers = ["l0", "l1"]
    port, prod, cons, src, _ = kv_pair(layers)
    try:
        prod.bind_connector_metadata(RzmqKVMetadata(saves=[SaveReq("p", [1, 2], 8)]))
        for n in layers:
            prod.save_kv_layer(n, src[n], None)
        cons.bind_connector_metadata(RzmqKVMetadata(loads=[LoadReq("d", "p", "127.0.0.1", port, [3, 4], 0, 7)]))
        cons.start_load_kv(None)
        for n in layers:
            cons.wait_for_layer_load(n)
        cons.get_finished(set())
        s = cons.get_kv_connector_stats()
        assert isinstance(s, RzmqKVConnector.build_kv_connector_stats().__class__)
        assert cons.get_kv_connector_stats() is None  # reported once
        agg = RzmqKVConnector.build_kv_connector_stats(data=s.data).aggregate(prod.get_kv_connector_stats())
        red = agg.reduce()
        per_layer = 2 * 2 * 4 * 6 * 4
        assert red["Num successful transfers"] == 2 and red["MB transferred"] == round(2 * per_layer / 2**20, 3)
        reg = CollectorRegistry()
        types = {cls: (lambda cls: lambda *a, **k: cls(*a, registry=reg, **{x: v for x, v in k.items()
                                                                              if x != "multiprocess_mode"}))(cls)
                 for cls in (Counter, Gauge, Histogram)}
        prom = RzmqKVConnector.build_prom_metrics(NS(kv_transfer_config=None), types, ["engine"], {0: ["0"]})
        prom.observe(agg.data, 0)
        assert reg.get_sample_value("vllm:rzmq_kv_transfers_total", {"engine": "0"}) == 2
        assert reg.get_sample_value("vllm:rzmq_kv_bytes_transferred_total", {"engine": "0"}) == 2 * per_layer
        assert reg.get_sample_value("vllm:rzmq_kv_xfer_time_seconds_count", {"engine": "0"}) == 2
    finally:
        cons.shutdown()
        prod.shutdown()

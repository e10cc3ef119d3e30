"""Tests of zmq_connector.ZmqConnector (vllm-omni's connector interface over pyzmq).

Run on the stock pyzmq wheel and under rzmq's library:
    examples/omni/.venv/bin/python -m pytest -q examples/omni/test_connector.py
    LD_PRELOAD=$PWD/target/release/libzmq.so OMNI_EXPECT_LIB=rzmq \
        examples/omni/.venv/bin/python -m pytest -q examples/omni/test_connector.py
(OMNI_EXPECT_LIB=rzmq|stock makes test_library fail unless that libzmq serves pyzmq.)
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import omni_wire as w  # noqa: E402
from zmq_connector import OmniConnectorBase, ZmqConnector  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def pair(**kw):
    a = ZmqConnector({"stage_id": "thinker", "get_timeout": 10, **kw})
    b = ZmqConnector({"stage_id": "talker", "get_timeout": 10, **kw})
    a.add_peers({"talker": b.endpoint})
    b.add_peers({"thinker": a.endpoint})
    return a, b


def wait_until(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


def emb(key, tokens=64, hidden=256):
    return w.Shared(key, w.Tensor(w.synth((tokens, hidden), "bf16", w.tag_of("emb", key)), "bf16"))


@pytest.fixture
def conns():
    a, b = pair()
    yield a, b
    a.close()
    b.close()


def test_interface():
    assert issubclass(ZmqConnector, OmniConnectorBase)
    for name in ("put", "get", "cleanup", "health", "close"):
        assert callable(getattr(ZmqConnector, name))


def test_library():
    """Which libzmq serves pyzmq here (compat/pyzmq_libcheck.py); checked when OMNI_EXPECT_LIB is set."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "compat"))
    import pyzmq_libcheck

    info = pyzmq_libcheck.identify(os.path.join(HERE, "..", "..", "target", "release", "libzmq.so"))
    print(pyzmq_libcheck.summary(info))
    expect = os.environ.get("OMNI_EXPECT_LIB")
    if expect:
        assert pyzmq_libcheck.check(info, expect) == []


def test_put_get_roundtrip(conns):
    a, b = conns
    hidden = w.synth((300, 3584), "bf16", 7)
    data = {"rid": "r1", "hidden": w.Tensor(hidden, "bf16"), "ids": np.arange(10, dtype=np.int64),
            "small": np.arange(3, dtype=np.float32), "finished": True, "nested": [{"x": 1}, "y"]}
    ok, size, meta = a.put("thinker", "talker", "r1/out", data)
    assert ok and size >= hidden.nbytes
    assert meta["key"] == "r1/out" and meta["size"] == size
    obj, got_size = b.get("thinker", "talker", "r1/out", meta)
    assert got_size >= hidden.nbytes
    assert np.array_equal(obj["hidden"], hidden) and obj["hidden"].dtype == np.uint16
    assert np.array_equal(obj["ids"], np.arange(10)) and np.array_equal(obj["small"], np.arange(3, dtype=np.float32))
    assert obj["finished"] is True and obj["nested"] == [{"x": 1}, "y"] and obj["rid"] == "r1"
    w.check_stamp(obj["hidden"], 7, "hidden")
    h = b.health()
    assert h["status"] == "healthy" and h["gets"] == 1 and h["payloads_received"] == 1
    assert a.health()["puts"] == 1
    assert "thinker->talker" in b.latencies


def test_many_in_order_and_large(conns):
    a, b = conns
    big = w.synth((24 << 20,), "u8", 99)  # 24 MiB: a minute of audio embeddings
    metas = [a.put("thinker", "talker", f"k{i}", {"i": i, "t": np.full(1000 + i, i, np.int32)})[2] for i in range(50)]
    metas.append(a.put("thinker", "talker", "big", {"big": big})[2])
    for i in reversed(range(50)):  # any order
        obj, _ = b.get("thinker", "talker", f"k{i}", metas[i])
        assert obj["i"] == i and obj["t"].shape == (1000 + i,) and int(obj["t"][0]) == i
    obj, _ = b.get("thinker", "talker", "big", metas[-1])
    assert np.array_equal(obj["big"], big)


def test_get_timeout_and_cleanup(conns):
    a, b = conns
    assert b.get("thinker", "talker", "missing", {"timeout": 0.2}) is None
    assert b.health()["get_timeouts"] == 1
    ok, _, meta = a.put("thinker", "talker", "dropme", {"x": np.zeros(1000, np.uint8)})
    assert ok
    wait_until(lambda: b.health()["ready"] == 1)
    assert b.cleanup("dropme") is True
    assert b.cleanup("dropme") is False
    assert b.get("thinker", "talker", "dropme", {"timeout": 0.2}) is None


def test_wrong_edge_is_refused(conns):
    a, b = conns
    _, _, meta = a.put("thinker", "talker", "k", {"x": 1})
    with pytest.raises(ValueError):
        b.get("encoder", "talker", "k", meta)


def test_unknown_peer_put_fails():
    a = ZmqConnector({"stage_id": "a"})
    try:
        ok, size, meta = a.put("a", "nobody", "k", {"x": 1})
        assert (ok, size, meta) == (False, 0, None)
        assert a.health()["status"] == "unhealthy"
    finally:
        a.close()


def test_tracker_and_close_idempotent():
    a, b = pair()
    buf = w.synth((1 << 20,), "u8", 5)
    ok, _, meta, tracker = a.put_tracked("thinker", "talker", "t", {"buf": buf})
    assert ok
    tracker.wait(10)  # libzmq released the buffer: it may be reused now
    assert tracker.done
    assert b.get("thinker", "talker", "t", meta) is not None
    a.close()
    a.close()
    b.close()
    assert b.health()["status"] == "unhealthy"


def test_context_manager():
    with ZmqConnector({"stage_id": "x"}) as c:
        assert c.health()["status"] == "healthy"
    assert c.health()["status"] == "unhealthy"


def test_sharing_sends_reference_after_ack(conns):
    a, b = conns
    e = emb("img-1")
    _, size1, m1 = a.put("thinker", "talker", "r1", {"mm": [e]})
    o1, _ = b.get("thinker", "talker", "r1", m1)
    wait_until(lambda: a.health()["acks_received"] >= 1)
    _, size2, m2 = a.put("thinker", "talker", "r2", {"mm": [e], "text": np.ones(100, np.uint16)})
    assert m2["refs"] == 1 and size2 < size1 // 10  # a key instead of the bytes
    o2, _ = b.get("thinker", "talker", "r2", m2)
    assert np.array_equal(o2["mm"][0], e.tensor.array) and np.array_equal(o1["mm"][0], o2["mm"][0])
    ha, hb = a.health(), b.health()
    assert ha["refs_sent"] == 1 and ha["shared_bytes_saved"] == e.nbytes
    assert hb["cache_hits"] == 1 and hb["cache_misses"] == 0


def test_no_sharing_always_moves_bytes():
    a, b = pair(sharing=False)
    try:
        e = emb("img-1")
        for i in range(3):
            _, size, meta = a.put("thinker", "talker", f"r{i}", {"mm": [e]})
            assert meta["refs"] == 0 and size >= e.nbytes
            obj, _ = b.get("thinker", "talker", f"r{i}", meta)
            assert np.array_equal(obj["mm"][0], e.tensor.array)
            time.sleep(0.05)
        assert a.health()["refs_sent"] == 0 and b.health()["cache_entries"] == 0
    finally:
        a.close()
        b.close()


def test_miss_fetches_bytes_from_sender():
    """The receiver evicted a key the sender believes it holds: it fetches the bytes."""
    e1, e2 = emb("img-1"), emb("img-2")
    a, b = pair(cache_bytes=e1.nbytes + 100)  # room for one embedding
    try:
        _, _, m1 = a.put("thinker", "talker", "r1", {"mm": [e1]})
        b.get("thinker", "talker", "r1", m1)
        wait_until(lambda: a.health()["acks_received"] >= 1)
        _, _, m2 = a.put("thinker", "talker", "r2", {"mm": [e2]})  # evicts img-1 at the receiver
        b.get("thinker", "talker", "r2", m2)
        wait_until(lambda: a.health()["acks_received"] >= 2)
        _, _, m3 = a.put("thinker", "talker", "r3", {"mm": [e1, e2]})
        assert m3["refs"] == 2
        obj, _ = b.get("thinker", "talker", "r3", m3)
        assert np.array_equal(obj["mm"][0], e1.tensor.array) and np.array_equal(obj["mm"][1], e2.tensor.array)
        ha, hb = a.health(), b.health()
        assert hb["cache_misses"] >= 1 and hb["fetches_sent"] == 1 and hb["fetch_bytes_received"] == e1.nbytes
        assert ha["fetches_served"] == 1 and ha["fetch_bytes_sent"] == e1.nbytes
        assert hb["cache_evictions"] >= 1
    finally:
        a.close()
        b.close()


def test_evict_notify_avoids_fetch():
    e1, e2 = emb("img-1"), emb("img-2")
    a, b = pair(cache_bytes=e1.nbytes + 100, evict_notify=True)
    try:
        for i, e in enumerate((e1, e2)):
            _, _, m = a.put("thinker", "talker", f"r{i}", {"mm": [e]})
            b.get("thinker", "talker", f"r{i}", m)
        wait_until(lambda: b.health()["evictions_notified"] >= 1)
        time.sleep(0.1)
        _, _, m = a.put("thinker", "talker", "r3", {"mm": [e1]})
        assert m["refs"] == 0  # the sender knows img-1 is gone: bytes again, no fetch
        obj, _ = b.get("thinker", "talker", "r3", m)
        assert np.array_equal(obj["mm"][0], e1.tensor.array)
        assert b.health()["fetches_sent"] == 0
    finally:
        a.close()
        b.close()


def test_shared_by_several_receivers():
    """One encoder output consumed by several thinker replicas: each gets the bytes once."""
    enc = ZmqConnector({"stage_id": "encoder"})
    reps = [ZmqConnector({"stage_id": f"prefill.{i}"}) for i in range(3)]
    try:
        enc.add_peers({f"prefill.{i}": r.endpoint for i, r in enumerate(reps)})
        for r in reps:
            r.add_peers({"encoder": enc.endpoint})
        e = emb("video-1", tokens=512)
        for rnd in range(3):
            for i, r in enumerate(reps):
                _, _, m = enc.put("encoder", f"prefill.{i}", f"q{rnd}-{i}", {"mm": [e]})
                obj, _ = r.get("encoder", f"prefill.{i}", f"q{rnd}-{i}", m)
                assert np.array_equal(obj["mm"][0], e.tensor.array)
            wait_until(lambda: enc.health()["acks_received"] >= 3)
        h = enc.health()
        assert h["shared_bytes_sent"] == 3 * e.nbytes  # once per replica
        assert h["refs_sent"] == 6 and h["shared_bytes_saved"] == 6 * e.nbytes
    finally:
        enc.close()
        for r in reps:
            r.close()


def test_corruption_is_detected():
    frames = []
    tree = w.encode({"t": np.arange(1000, dtype=np.int32)}, frames)
    bad = bytearray(frames[0].tobytes())
    bad[100] ^= 0xFF
    with pytest.raises(ValueError):
        w.decode(tree, [memoryview(bytes(bad))])
    assert np.array_equal(w.decode(tree, [memoryview(frames[0].tobytes())])["t"], np.arange(1000))


def test_across_processes(tmp_path):
    """A receiver in another process (same preload, if any)."""
    a = ZmqConnector({"stage_id": "thinker"})
    try:
        code = f"""
import sys, numpy as np
sys.path.insert(0, {HERE!r})
import omni_wire as w
from zmq_connector import ZmqConnector
b = ZmqConnector({{"stage_id": "talker", "get_timeout": 20}})
print(b.endpoint, flush=True)
for i in range(5):
    obj, size = b.get("thinker", "talker", f"k{{i}}", None)
    w.check_stamp(obj["h"], 1000 + i, "h")
    assert obj["i"] == i
print("ok", b.health()["cache_hits"], flush=True)
b.close()
"""
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            ep = p.stdout.readline().strip()
            a.add_peers({"talker": ep})
            e = emb("audio-1")
            for i in range(5):
                if i:
                    wait_until(lambda: a.health()["acks_received"] >= 1)
                assert a.put("thinker", "talker", f"k{i}", {"i": i, "mm": [e],
                                                            "h": w.synth((2000,), "u8", 1000 + i)})[0]
            out, _ = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0 and out.startswith("ok 4"), out
    finally:
        a.close()

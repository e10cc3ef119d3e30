"""Push delivery (rzmq.omni.push and RzmqConnector's push path): a producer sends each payload
to the consumer that subscribed to its edge the moment put() is called; the consumer's get() is
a lookup in its bounded inbox; credits bound memory on both sides and push back on the producer.

The bookkeeping (Inbox, Routes) is tested alone; the connector in one process (real sockets,
served by rzmq when run.sh preloads it) and between processes with a slow consumer, on rzmq over
TCP and over RDMA (soft provider).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:  # the installed rzmq (the wheel) when there is one, else this source tree's python/
    import rzmq.omni  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", ".."))

import vllm_omni_shim  # noqa: E402

vllm_omni_shim.install()

import numpy as np  # noqa: E402
import zmq  # noqa: E402

import rzmq.omni as ro  # noqa: E402
from rzmq.omni import push, wire  # noqa: E402
from test_connector import peer_env, rdma_counters  # noqa: E402

STREAM_PEER = os.path.join(HERE, "stream_peer.py")


def item(source="tcp://p:1", n=100):
    return push.Pushed({"size": n}, [], [], source, n, time.time())


# ----------------------------------------------------------------------------------------------
# The bookkeeping alone


def test_edge_of_a_key():
    assert push.edge_of("req_0_3@0_1") == "0_1"
    assert push.edge_of("a@b@1_2") == "1_2"
    assert push.edge_of("nokey") == "" and push.edge_of("@0_1") == ""


def test_inbox_take_credit_in_batches_and_when_drained():
    box = push.Inbox(1000)
    for i in range(3):
        box.add(f"k{i}", item(n=100))
    assert box.held() == 300 and box.available("tcp://p:1") == 700
    assert box.take("nope") is None
    assert box.take("k0").nbytes == 100
    assert box.credit_due("tcp://p:1") == 0  # 100 owed: below a quarter of the budget, still held
    assert box.take("k1") is not None
    assert box.credit_due("tcp://p:1") == 0
    assert box.take("k2") is not None
    assert box.credit_due("tcp://p:1") == 300  # nothing held from it: everything goes back
    assert box.credit_due("tcp://p:1") == 0
    box.add("big", item(n=400))
    box.add("x", item(n=10))
    assert box.take("big") and box.credit_due("tcp://p:1") == 400  # a quarter or more: at once
    assert box.snapshot()["inbox_max_held"] == 410


def test_inbox_credit_is_per_producer_and_flushed():
    box = push.Inbox(1000)
    box.add("a", item("tcp://a:1", 10))
    box.add("a2", item("tcp://a:1", 10))
    box.add("b", item("tcp://b:1", 20))
    box.take("a")
    assert box.owed() == {"tcp://a:1": 10} and box.available("tcp://b:1") == 980
    assert box.flush_credit("tcp://a:1") == 10 and box.owed() == {}


def test_inbox_wait_take_and_wakeups():
    box = push.Inbox(1000)
    gen = box.generation
    t0 = time.monotonic()
    assert box.wait_take("k", time.monotonic() + 0.05) is None
    assert time.monotonic() - t0 >= 0.04
    assert box.wait_for_change(gen, 0.02) is False
    threading.Timer(0.05, lambda: box.add("k", item())).start()
    got = box.wait_take("k", time.monotonic() + 5)
    assert got is not None and time.monotonic() - t0 < 2
    assert box.wait_for_change(gen, 0) is True  # an arrival since the snapshot
    gen = box.generation
    threading.Timer(0.05, lambda: box.add("j", item())).start()
    assert box.wait_for_change(gen, 5) is True


def test_inbox_expires_drops_and_closes():
    box = push.Inbox(1000, ttl=0.05)
    box.add("r1_0@0_1", item())
    box.add("r2_0@0_1", item())
    assert box.drop(lambda k: k.startswith("r1")) == 1
    time.sleep(0.08)
    assert box.expire() == 1 and box.held() == 0
    assert box.owed() == {"tcp://p:1": 200}  # dropped and expired payloads give their credit back
    box.add("z", item())
    waiter = threading.Thread(target=lambda: box.wait_take("never", time.monotonic() + 30))
    waiter.start()
    assert len(box.close()) == 1
    waiter.join(5)
    assert not waiter.is_alive()


def test_routes_push_to_the_one_subscriber_of_an_edge():
    r = push.Routes()
    assert r.target("0_1") is None
    known, pushes, told = r.subscribe(b"A", "0_1", 1000)
    assert (known, pushes, told) == (False, True, [])
    assert r.subscribe(b"A", "0_1", 5) == (True, True, [])  # a heartbeat: the grant is kept
    sub = r.target("0_1")
    assert sub.identity == b"A" and sub.credit == 1000
    assert r.enqueue(sub, "k") and not r.enqueue(sub, "k")
    assert r.may_send(sub, 1000) and r.may_send(sub, 5000)  # nothing outstanding: even oversize
    r.sent(sub, "k", 600)
    assert not r.may_send(sub, 500) and r.may_send(sub, 400)
    r.credit(b"A", 600)
    assert sub.credit == 1000
    r.credit(b"A", 10**9)
    assert sub.credit == 1000  # never above the grant


def test_routes_a_second_subscriber_turns_push_off_for_the_edge():
    r = push.Routes()
    r.subscribe(b"A", "0_1", 100)
    r.subscribe(b"A", "1_2", 100)
    known, pushes, told = r.subscribe(b"B", "0_1", 100)
    assert (known, pushes, told) == (False, False, [b"A"])
    assert r.target("0_1") is None and r.target("1_2").identity == b"A"
    r.drop(b"A")
    assert r.target("1_2") is None and r.credit(b"A", 10) is None


def test_wire_subscribe_and_credit_are_checked():
    f = wire.encode_request(wire.OP_SUBSCRIBE, 7, "0_1", "4096")
    req = wire.parse_request(f)
    assert req.op == wire.OP_SUBSCRIBE and req.key == "0_1" and wire.credit_bytes(req.content) == 4096
    for bad in ("-1", "1e9", "x", "", "9" * 20):
        with pytest.raises(wire.ProtocolError):
            wire.parse_request(wire.encode_request(wire.OP_CREDIT, 0, "*", bad))
    with pytest.raises(wire.ProtocolError):
        wire.parse_request(wire.encode_request(wire.OP_SUBSCRIBE, 1, "0_1"))
    head = wire.encode_reply(wire.PUSHED, 0, {"kind": "raw", "size": 3, "parts": [3]})
    with pytest.raises(wire.ProtocolError):  # a push must name its key
        wire.parse_reply(head + [b"abc"])
    head = wire.encode_reply(wire.PUSHED, 0, {"kind": "raw", "size": 3, "parts": [3], "key": "k@0_1"})
    with pytest.raises(wire.ProtocolError):
        wire.parse_reply(head + [b"abcd"])
    assert wire.parse_reply(head + [b"abc"])[2]["key"] == "k@0_1"


# ----------------------------------------------------------------------------------------------
# The connector in one process


def prod_cfg(**kw):
    return {"host": "127.0.0.1", "zmq_port": 0, "role": "sender", **kw}


def cons_cfg(**kw):
    return {"host": "127.0.0.1", "role": "receiver", "get_timeout": 5, **kw}


def until(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.002)


@pytest.fixture
def pair():
    p = ro.RzmqConnector(prod_cfg())
    c = ro.RzmqConnector(cons_cfg())
    yield p, c
    c.close()
    p.close()


def subscribe(p, c, edge=("0", "1")):
    """Makes `c` subscribe to `p` for `edge` (its first get does) and waits until it is answered."""
    meta = {"source_host": "127.0.0.1", "source_port": p.port}
    assert c.get(*edge, "warm-up", meta) is None
    until(lambda: c._subs[f"tcp://127.0.0.1:{p.port}"].pushing("_".join(edge)))
    return meta


def test_puts_are_pushed_and_gets_are_local(pair):
    p, c = pair
    meta = subscribe(p, c)
    asked, timeouts = p.health()["requests_not_found"], c.health()["get_timeouts"]
    # not here: waited for on the inbox until the deadline, the producer never asked
    assert c.get_with_deadline("0", "1", "absent", meta, deadline=time.monotonic() + 0.2) is None
    assert c.health()["get_timeouts"] == timeouts + 1 and p.health()["requests_not_found"] == asked
    served = p.health()["requests_served"]
    arrays = [np.full(1000 + i, i, np.int32) for i in range(20)]
    for i, a in enumerate(arrays):
        assert p.put("0", "1", f"r_0_{i}", a)[0]
    until(lambda: c.inbox.snapshot()["inbox_keys"] == 20)
    for i, a in enumerate(arrays):
        got, n = c.get("0", "1", f"r_0_{i}", meta)
        assert n == a.nbytes and np.array_equal(got.numpy(), a)
        info = c.last_get_info()  # for traces: when the producer sent it, when it arrived here
        assert info["via"] == "push" and info["sent"] <= info["arrived"] <= time.time(), info
        got.release()
    h = p.health()
    assert h["pushes"] == 20 and h["requests_served"] == served  # nothing was asked for
    assert h["keys_held"] == 0 and h["bytes_released"]["consumed"] == sum(a.nbytes for a in arrays)
    assert c.health()["gets_from_inbox"] == 20


def test_a_tracked_put_that_is_pushed_at_once_keeps_its_buffer_until_sent(pair):
    """put_tracked() whose payload the producer's thread pushes (and releases) before put()
    returns: the tracker still follows that send, so a caller that reuses its buffer once the
    tracker is done never changes bytes still on their way (found by the omni replica on stock
    libzmq, whose zero-copy sends finish after the call returns)."""
    p, c = pair
    meta = subscribe(p, c)
    buf = np.zeros(1 << 20, np.uint8)  # one buffer, reused for every put as a stage's pool does
    for i in range(30):
        buf[:] = i
        ok, _n, _meta, tracker = p.put_tracked("0", "1", f"reuse_0_{i}", buf)
        assert ok and tracker._content is not None  # bound to what was stored, pushed or not
        tracker.wait(10)
        got, n = c.get_with_deadline("0", "1", f"reuse_0_{i}", meta, deadline=time.monotonic() + 10)
        a = got.numpy()
        assert n == buf.nbytes and a.min() == i and a.max() == i, f"put {i}: bytes changed in flight"
        got.release()


def test_inside_vllm_omni_a_get_of_what_is_not_here_yet_returns_at_once(pair):
    """vllm-omni's receive loops poll get() for every waiting request in turn: a stage's get of a
    pushed payload that has not arrived is a miss at once (no wait, no request to the producer)."""
    p, _ = pair
    c = ro.RzmqConnector(cons_cfg(stage_id=1, zmq_port=p.port))  # a receiver: never listens here
    try:
        meta = subscribe(p, c)
        before, asked = c.health(), p.health()["requests_not_found"]
        for _ in range(50):
            assert c.get("0", "1", "later", meta) is None
        after = c.health()
        assert after["get_misses"] == before["get_misses"] + 50
        assert after["get_timeouts"] == before["get_timeouts"] and p.health()["requests_not_found"] == asked
        assert p.put("0", "1", "later", b"now")[0]
        until(lambda: c.inbox.snapshot()["inbox_keys"] == 1)
        assert c.get("0", "1", "later", meta)[0].to_bytes() == b"now" and c.last_get_info()["via"] == "push"
    finally:
        c.close()


def test_a_put_is_pushed_by_the_putting_thread(pair):
    """The push leaves from put() itself: in a busy stage process the service thread may wait
    long for the GIL and the CPU, so a put never waits for it to be sent."""
    p, c = pair
    meta = subscribe(p, c)
    for i in range(10):
        assert p.put("0", "1", f"own_0_{i}", np.full(100, i, np.int32))[0]
        returned = time.time()
        got, _ = c.get_with_deadline("0", "1", f"own_0_{i}", meta, deadline=time.monotonic() + 10)
        info = c.last_get_info()
        assert info["via"] == "push" and info["sent"] <= returned, (info, returned)
        got.release()
    assert p.health()["pushes"] == 10


def test_a_get_takes_what_arrived_when_the_receiving_thread_does_not(pair, monkeypatch):
    """The consumer's get() takes in what its subscriptions brought on the calling thread: a
    receiving thread that never runs (starved of the GIL or the CPU in a busy stage process)
    delays nothing, subscription answers included."""
    p, _ = pair
    real = ro.connector._drain_ready

    def starved(sock, *a, **kw):  # the receiving thread takes nothing from its subscriptions
        if threading.current_thread().name == "rzmq-omni-inbox" and sock.type == zmq.DEALER:
            return False
        return real(sock, *a, **kw)

    monkeypatch.setattr(ro.connector, "_drain_ready", starved)
    c = ro.RzmqConnector(cons_cfg(stage_id=1, zmq_port=p.port))  # polls as vllm-omni's loops do
    try:
        meta = {"source_host": "127.0.0.1", "source_port": p.port}
        until(lambda: c.get("0", "1", "warm-up", meta) is None
              and c._subs[f"tcp://127.0.0.1:{p.port}"].pushing("0_1"))
        for i in range(10):
            assert p.put("0", "1", f"starved_0_{i}", np.full(64, i, np.int32))[0]
            got = None
            end = time.monotonic() + 10
            while got is None:
                assert time.monotonic() < end, f"put {i} never taken"
                got = c.get("0", "1", f"starved_0_{i}", meta)
            assert c.last_get_info()["via"] == "push" and got[0].numpy()[0] == i
            got[0].release()
        assert p.health()["requests_served"] == 0  # nothing was asked for: all pushed
    finally:
        c.close()


def test_what_was_put_before_the_subscription_is_pushed_in_put_order(pair):
    p, c = pair
    for i in range(5):
        p.put("0", "1", f"early_0_{i}", np.full(10, i, np.int64))
    meta = {"source_host": "127.0.0.1", "source_port": p.port}
    # the first get waits for the subscription's answer, which comes after what was put before
    got = c.get("0", "1", "early_0_0", meta)
    assert got is not None and got[0].numpy()[0] == 0 and c.last_get_info()["via"] == "push"
    assert list(c.inbox._items) == [f"early_0_{i}@0_1" for i in range(1, 5)]
    assert p.health()["requests_served"] == 0


def test_several_requests_stream_at_once_in_order_with_an_empty_terminal_chunk(pair):
    """vllm-omni's async_chunk keys: `<request>_<stage>_<chunk>`; chunks of one request must
    arrive in order, the terminal one even when empty, with several requests streaming at once."""
    p, c = pair
    meta = subscribe(p, c)
    n_req, n_chunks = 4, 30

    def stream(r):
        for k in range(n_chunks):
            data = {"codes": np.arange(k, k + 16, dtype=np.int64) + 1000 * r, "meta": {"finished": False}}
            assert p.put("0", "1", f"req{r}_0_{k}", data)[0]
        assert p.put("0", "1", f"req{r}_0_{n_chunks}", b"")[0]  # the end of the stream, empty

    threads = [threading.Thread(target=stream, args=(r,)) for r in range(n_req)]
    for t in threads:
        t.start()
    got = {r: [] for r in range(n_req)}
    end = time.monotonic() + 60
    while any(len(v) < n_chunks + 1 for v in got.values()):
        assert time.monotonic() < end
        progressed = False
        for r in range(n_req):
            k = len(got[r])
            if k > n_chunks:
                continue
            res = c.get("0", "1", f"req{r}_0_{k}", meta)
            if res is not None:
                got[r].append(res[0])
                progressed = True
        if not progressed:
            time.sleep(0.001)
    for t in threads:
        t.join()
    for r in range(n_req):
        for k in range(n_chunks):
            assert np.array_equal(got[r][k]["codes"], np.arange(k, k + 16) + 1000 * r)
        assert got[r][n_chunks].to_bytes() == b""
    assert p.health()["pushes"] == n_req * (n_chunks + 1)


def test_get_with_deadline_waits_on_the_inbox_and_wakeup_hooks(pair):
    p, c = pair
    meta = subscribe(p, c)
    gen = c.get_wakeup_generation()
    assert gen is not None and c.wait_for_change(gen, timeout=0.02) is False
    threading.Timer(0.1, lambda: p.put("0", "1", "late", np.arange(5))).start()
    t0 = time.monotonic()
    got = c.get_with_deadline("0", "1", "late", meta, deadline=time.monotonic() + 10)
    waited = time.monotonic() - t0
    assert got is not None and list(got[0].numpy()) == list(range(5))
    assert 0.05 < waited < 5
    assert c.wait_for_change(gen, timeout=0) is True
    t0 = time.monotonic()
    assert c.get_with_deadline("0", "1", "never", meta, deadline=time.monotonic() + 0.2) is None
    assert 0.15 < time.monotonic() - t0 < 2


def test_close_while_a_get_waits_on_the_inbox(pair):
    """close() from another thread ends a get waiting for a push: the caller gets None at once,
    the receiving thread ends and closes its sockets."""
    p, c = pair
    meta = subscribe(p, c)
    got = []
    t = threading.Thread(target=lambda: got.append(
        c.get_with_deadline("0", "1", "never", meta, deadline=time.monotonic() + 60)))
    t.start()
    time.sleep(0.2)
    assert t.is_alive()  # waiting on the inbox
    c.close()
    t.join(10)
    assert not t.is_alive() and got == [None]
    assert not c._inbox_thread.is_alive()


def test_cleanup_drops_what_was_pushed_for_a_request_and_returns_credit(pair):
    p, c = pair
    meta = subscribe(p, c)
    for k in range(3):
        p.put("0", "1", f"aborted_0_{k}", np.zeros(100, np.uint8))
    until(lambda: c.inbox.held() == 300)
    c.cleanup("aborted")
    assert c.inbox.held() == 0 and c.get("0", "1", "aborted_0_0", meta) is None


def test_a_second_consumer_of_an_edge_turns_push_off_and_both_pull(pair):
    p, c = pair
    meta = subscribe(p, c)
    c2 = ro.RzmqConnector(cons_cfg())
    try:
        assert c2.get("0", "1", "x", meta) is None
        until(lambda: c._subs[f"tcp://127.0.0.1:{p.port}"].push.get("0_1") is False)
        until(lambda: c2._subs[f"tcp://127.0.0.1:{p.port}"].push.get("0_1") is False)
        p.put("0", "1", "for-c2", b"two")
        p.put("0", "1", "for-c", b"one")
        assert c2.get("0", "1", "for-c2", meta)[0].to_bytes() == b"two"
        assert c.get("0", "1", "for-c", meta)[0].to_bytes() == b"one"
        assert c.last_get_info()["via"] == "pull"
    finally:
        c2.close()


def test_push_off_by_config_pulls(pair):
    p, _ = pair
    c = ro.RzmqConnector(cons_cfg(push=False))
    try:
        meta = {"source_host": "127.0.0.1", "source_port": p.port}
        p.put("0", "1", "k", b"abc")
        assert c.get("0", "1", "k", meta)[0].to_bytes() == b"abc"
        assert c.get_wakeup_generation() is None and not c._subs
    finally:
        c.close()


def test_a_producer_that_does_not_push_is_pulled_from():
    p = ro.RzmqConnector(prod_cfg(push=False))
    c = ro.RzmqConnector(cons_cfg())
    try:
        meta = {"source_host": "127.0.0.1", "source_port": p.port}
        assert c.get("0", "1", "warm", meta) is None
        until(lambda: c.health()["subscriptions_refused"] == 1)
        p.put("0", "1", "k", b"abc")
        assert c.get("0", "1", "k", meta)[0].to_bytes() == b"abc"
        assert c.last_get_info()["via"] == "pull" and p.health()["pushes"] == 0
    finally:
        c.close()
        p.close()


# ----------------------------------------------------------------------------------------------
# A slow consumer in another process: memory stays flat, nothing is lost, the producer is told


@pytest.mark.parametrize("mode", ["rzmq-tcp", "rzmq-rdma"])
def test_a_slow_consumer_bounds_memory_and_pushes_back_on_the_producer(mode):
    chunk, n, inbox_bytes, pool = 1 << 20, 200, 8 << 20, 16 << 20
    env = peer_env(mode)
    prod = subprocess.Popen([sys.executable, STREAM_PEER, "produce", json.dumps(
        {"host": "127.0.0.1", "zmq_port": 0, "role": "sender", "memory_pool_size": pool, "put_timeout": 120}),
        str(n), str(chunk)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = prod.stdout.readline()
    assert line.startswith("READY"), prod.stderr.read()
    cons = subprocess.Popen([sys.executable, STREAM_PEER, "consume", json.dumps(
        {"host": "127.0.0.1", "role": "receiver", "inbox_bytes": inbox_bytes}), line.split()[1], str(n), "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        pout, perr = prod.communicate(timeout=300)
        cout, cerr = cons.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        prod.kill()
        cons.kill()
        pytest.fail("no progress in 300 s")
    assert prod.returncode == 0, perr
    assert cons.returncode == 0, cerr
    ph = json.loads(pout.splitlines()[-1])
    cres = json.loads(cout.splitlines()[-1])
    # nothing lost, nothing damaged, in put order, every chunk pushed (none asked for)
    assert cres["received"] == n and cres["bad"] == [] and cres["order_ok"], cres
    assert cres["via"].get("push", 0) >= n - 1, cres["via"]  # the first get may pull
    ch = cres["health"]
    # the consumer held at most its inbox budget; the producer at most its pool
    assert 0 < ch["inbox_max_held"] <= inbox_bytes, ch
    assert 0 < ph["max_held"] <= pool, ph
    # the producer was told: its puts waited for room, its pushes for credit; none was refused
    h = ph["health"]
    assert h["puts_waited_budget"] > 0 and h["push_stalls"] > 0, h
    assert h["puts_rejected_budget"] == 0 and h["pushes"] + h["requests_served"] == n, h
    # memory stays flat: 200 MiB went through; while it streams, neither side grows with it
    # (each process samples its own resident memory every 10 ms)
    for side, rss in (("producer", ph["rss_kib"]), ("consumer", cres["rss_kib"])):
        steady = rss[len(rss) // 5:]
        print(side, "RSS MiB by tenth of the run:", [rss[len(rss) * i // 10] // 1024 for i in range(10)])
        assert len(steady) > 20 and max(steady) - min(steady) < 48 * 1024, (side, min(steady), max(steady))
    if mode == "rzmq-rdma":
        assert "transport rdma/soft" in cerr, cerr[-2000:]
        rx = rdma_counters(cerr, "rx")
        assert rx and sum(z for z, _ in rx) >= n - 1, cerr[-2000:]  # each chunk READ zero-copy by the push

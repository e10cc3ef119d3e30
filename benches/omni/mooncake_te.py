#!/usr/bin/env python3
"""Mooncake transfer-engine peer for the vllm-omni connector benchmark.

Reproduces the data path of vllm-omni 0.30.0's MooncakeTransferEngineConnector
(vllm_omni/distributed/omni_connectors/connectors/
mooncake_transfer_engine_connector.py) without torch, which that class needs
for its pools (pinned torch tensors, ManagedBuffer) and so cannot run here:

  * two processes, sender and receiver, each with a mooncake TransferEngine
    initialized as engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    and one registered pool (page-aligned anonymous mmap viewed as a numpy
    uint8 array, pages touched up front like a pinned pool), carved into
    4 KiB-aligned slots;
  * put(): allocate a slot in the sender pool, copy the payload into it
    (the connector copies tensors/bytes into its pool too), remember
    (src_addrs, lengths) under the key, hand metadata (source host/port,
    data_size) to the "orchestrator";
  * the metadata travels to the receiver over a multiprocessing Pipe (as an
    orchestrator would forward it), with the put start time;
  * get(): the receiver allocates a slot in its own pool and sends
    msgpack({remote_hostname, remote_port(rpc), request_id, dst_addrs,
    lengths}) over a pyzmq REQ to the sender's ROUTER; the sender's listener
    thread hands it to a 4-thread executor, which calls
    engine.batch_transfer_sync_write(f"{rhost}:{rport}", [src], [dst], [len]),
    frees the sender slot and queues b"trans_done"; the worker wakes the
    listener over an inproc PUSH/PULL pair and the listener sends the reply
    (same structure as the connector's _zmq_listener_loop /
    _handle_pull_request).  REQ timeouts are the connector's: 30 s + 5 s per
    100 MB.

Measured per payload size:
  latency     one payload at a time: from time.monotonic() in the sender just
              before its copy into the pool, to the receiver holding the reply
              (data in its pool) = copy + metadata forward + request + write +
              reply.  p50/p99 over N iterations (after a few warm-up rounds).
  throughput  M payloads back to back: puts run ahead as far as free sender
              slots allow, gets are sequential (the protocol is one REQ/REP per
              key); MB/s (1e6 B) = M*size / (last get done - first put start).
  verify      every iteration: 8-byte stamps at both ends of the receiver's
              slice; first and last iteration of every phase: blake2b digest
              of the whole receiver slice vs the sender's data.

Exit status: 0 ok; 3 mooncake (or the benchmark around it) did not run, with
one line "mooncake-te did not run: <why>" on stderr (and {"error": ...} in
--json); 2 bad arguments.

Install (Debian, Python 3.11):
  apt-get update -qq && apt-get install -y libibverbs1
  python3 -m venv benches/build/mooncake-venv
  benches/build/mooncake-venv/bin/pip install mooncake-transfer-engine-non-cuda \
      pyzmq==27.3.0 numpy msgpack
Run:
  benches/build/mooncake-venv/bin/python benches/omni/mooncake_te.py [--quick]
      [--sizes 65536,1048576] [--json out.json]
"""

import argparse
import atexit
import ctypes
import hashlib
import json
import mmap
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

PEER = "mooncake-te-tcp"
HOST = "127.0.0.1"
PAGE = 4096
DEFAULT_SIZES = [64 << 10, 1 << 20, 16 << 20, 64 << 20]
TRANS_DONE = b"trans_done"
TRANS_ERROR = b"trans_error"
# connector: _BASE_TRANSFER_TIMEOUT_MS + 5 s per 100 MB
_BASE_TIMEOUT_MS = 30_000
_STEP_BYTES = 100 * 1024 * 1024
_PER_STEP_MS = 5_000

EXIT_DID_NOT_RUN = 3


# ---------------------------------------------------------------- helpers


def default_iters(size):
    if size <= 64 << 10:
        return 200
    if size <= 1 << 20:
        return 100
    if size <= 16 << 20:
        return 30
    return 15


def warmup_iters(size):
    return 5 if size <= 1 << 20 else 2


def align_up(n, a=PAGE):
    return (n + a - 1) // a * a


def human_size(n):
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return f"{n >> sh} {unit}"
    return f"{n} B"


def stamp_value(phase, i):
    return ((phase + 1) << 32) | (i & 0xFFFFFFFF)


def stamp(arr, value):
    b = value.to_bytes(8, "little")
    arr[:8] = memoryview(b)
    arr[-8:] = memoryview(b)


def check_stamp(view, value):
    b = value.to_bytes(8, "little")
    return bytes(view[:8]) == b and bytes(view[-8:]) == b


def digest(view):
    return hashlib.blake2b(memoryview(view), digest_size=16).hexdigest()


def mooncake_version():
    try:
        from importlib.metadata import version, PackageNotFoundError
    except ImportError:  # pragma: no cover
        return "unknown"
    for dist in ("mooncake-transfer-engine-non-cuda", "mooncake-transfer-engine",
                 "mooncake_transfer_engine"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return "unknown"


class SlotPool:
    """Registered pool: page-aligned anonymous mmap seen as numpy uint8,
    touched up front (a pinned torch pool is resident too), cut into equal
    4 KiB-aligned slots for the current payload size."""

    def __init__(self, np, size):
        self.size = size
        self.mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.arr = np.frombuffer(self.mm, dtype=np.uint8)
        self.arr.fill(0)
        self.base = self.arr.ctypes.data
        assert self.base % PAGE == 0
        self.cv = threading.Condition()
        self.free = []
        self.slot_size = 0

    def configure(self, payload):
        with self.cv:
            self.slot_size = align_up(payload)
            n = self.size // self.slot_size
            if n < 1:
                raise MemoryError(f"pool of {self.size} B cannot hold {payload} B")
            self.free = list(range(n - 1, -1, -1))
            self.nslots = n

    def alloc(self, timeout):
        with self.cv:
            if not self.cv.wait_for(lambda: self.free, timeout):
                raise TimeoutError("no free pool slot (transfers not completing)")
            return self.free.pop() * self.slot_size

    def release(self, off):
        with self.cv:
            self.free.append(off // self.slot_size)
            self.cv.notify()

    def view(self, off, n):
        return self.arr[off:off + n]


# ---------------------------------------------------------------- children


def _child_setup(name, logdir, verbose):
    # die with the parent
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    ppid = os.getppid()

    def watchdog():
        while True:
            time.sleep(1.0)
            if os.getppid() != ppid:
                os._exit(1)

    threading.Thread(target=watchdog, daemon=True).start()
    if not verbose:
        # mooncake logs (glog) go to fd 2: keep them in a file the parent
        # can quote on failure
        fd = os.open(os.path.join(logdir, f"{name}.log"),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)


def _start_engine(pool_bytes):
    """Engine + registered pool, exactly as the connector's _init_engine /
    _init_pool (numpy/mmap instead of a pinned torch tensor)."""
    import numpy as np
    from mooncake.engine import TransferEngine

    engine = TransferEngine()
    ret = engine.initialize(HOST, "P2PHANDSHAKE", "tcp", "")
    if ret != 0:
        raise RuntimeError(f"TransferEngine.initialize({HOST!r}, 'P2PHANDSHAKE', "
                           f"'tcp', '') returned {ret}")
    rpc_port = engine.get_rpc_port()
    pool = SlotPool(np, pool_bytes)
    ret = engine.register_memory(pool.base, pool.size)
    if ret != 0:
        raise RuntimeError(f"TransferEngine.register_memory({pool.size} B) returned {ret}")
    return np, engine, rpc_port, pool


class _Ctrl:
    """Thread-safe sends to the parent."""

    def __init__(self, conn):
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, msg):
        with self.lock:
            self.conn.send(msg)


def sender_main(ctrl_conn, meta_conn, plan, pool_bytes, logdir, verbose):
    _child_setup("sender", logdir, verbose)
    ctrl = _Ctrl(ctrl_conn)
    stage = "start"
    try:
        import msgpack
        import zmq

        stage = "mooncake engine"
        np, engine, rpc_port, pool = _start_engine(pool_bytes)

        stage = "zmq listener"
        zctx = zmq.Context()
        router = zctx.socket(zmq.ROUTER)
        zmq_port = router.bind_to_random_port(f"tcp://{HOST}")

        local_buffers = {}   # key -> ([src], [len], slot_off, created)
        lb_lock = threading.Lock()
        put_lock = threading.Lock()
        write_ms = []        # per transfer, filled by workers
        stop = threading.Event()
        executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mooncake-sender")
        responses = queue.Queue()
        notify_addr = f"inproc://notify-{os.getpid()}"
        notify_recv = zctx.socket(zmq.PULL)
        notify_recv.bind(notify_addr)
        wlocal = threading.local()

        def notify():
            s = getattr(wlocal, "sock", None)
            if s is None:
                s = zctx.socket(zmq.PUSH)
                s.connect(notify_addr)
                wlocal.sock = s
            s.send(b"", zmq.NOBLOCK)

        def handle(identity, payload):
            try:
                meta = msgpack.unpackb(payload)
                key = meta["request_id"]
                with lb_lock:
                    item = local_buffers.get(key)
                if item is None:
                    responses.put((identity, TRANS_ERROR))
                    ctrl.send(("error", "sender", f"pull request for unknown key {key!r}"))
                else:
                    src_addrs, lengths, off, _ = item
                    session = f"{meta['remote_hostname']}:{meta['remote_port']}"
                    t = time.monotonic()
                    ret = engine.batch_transfer_sync_write(session, src_addrs,
                                                           meta["dst_addrs"], lengths)
                    write_ms.append((time.monotonic() - t) * 1e3)
                    if ret == 0:
                        with lb_lock:
                            local_buffers.pop(key, None)
                        pool.release(off)  # cleanup(): free the sender slot
                        responses.put((identity, TRANS_DONE))
                    else:
                        responses.put((identity, TRANS_ERROR))
                        ctrl.send(("error", "sender",
                                   f"batch_transfer_sync_write({session!r}, {lengths} B) "
                                   f"returned {ret}"))
            except Exception as e:  # noqa: BLE001
                responses.put((identity, TRANS_ERROR))
                ctrl.send(("error", "sender", f"pull handler: {e!r}"))
            try:
                notify()
            except Exception:
                pass

        def listener():
            poller = zmq.Poller()
            poller.register(router, zmq.POLLIN)
            poller.register(notify_recv, zmq.POLLIN)
            while not stop.is_set():
                try:
                    events = dict(poller.poll(1000))
                    if notify_recv in events:
                        while True:
                            try:
                                notify_recv.recv(zmq.NOBLOCK)
                            except zmq.Again:
                                break
                    while True:
                        try:
                            ident, resp = responses.get_nowait()
                        except queue.Empty:
                            break
                        router.send_multipart([ident, b"", resp])
                    if router in events:
                        frames = router.recv_multipart()
                        if len(frames) >= 2:
                            executor.submit(handle, frames[0], frames[-1])
                except zmq.ContextTerminated:
                    break
                except Exception as e:  # noqa: BLE001
                    ctrl.send(("error", "sender", f"listener: {e!r}"))

        lt = threading.Thread(target=listener, daemon=True)
        lt.start()

        def put(key, data):
            """Copy path of MooncakeTransferEngineConnector._put_impl."""
            with put_lock:
                off = pool.alloc(timeout=120.0)
                pool.view(off, data.nbytes)[:] = data
                with lb_lock:
                    local_buffers[key] = ([pool.base + off], [data.nbytes], off,
                                          time.monotonic())
                return {"source_host": HOST, "source_port": zmq_port,
                        "data_size": data.nbytes, "is_fast_path": True}

        ctrl.send(("ready", "sender", {"zmq_port": zmq_port, "rpc_port": rpc_port,
                                        "pool": pool.size}))

        src = None
        src_size = 0
        for pi, ph in enumerate(plan):
            stage = f"phase {pi} ({ph['mode']} {ph['size']} B)"
            size = ph["size"]
            if size != src_size:
                rng = np.random.default_rng(size)
                src = np.frombuffer(bytearray(rng.bytes(size)), dtype=np.uint8)
                src_size = size
            pool.configure(size)
            write_ms.clear()
            copy_ms = []
            n = ph["n"]
            total = ph["warmup"] + n
            check = {0, n - 1}  # measured indices with a full digest check

            def meta_for(i, measured_i):
                st = stamp_value(pi, i)
                stamp(src, st)
                d = digest(src) if measured_i in check or i == 0 else None
                return st, d

            if ph["mode"] == "lat":
                for i in range(total):
                    mi = i - ph["warmup"]
                    st, d = meta_for(i, mi)
                    key = f"p{pi}-{i}"
                    t0 = time.monotonic()
                    md = put(key, src)
                    copy_ms.append((time.monotonic() - t0) * 1e3)
                    md.update(key=key, t0=t0, i=i, stamp=st, digest=d)
                    meta_conn.send(md)
                    ack = meta_conn.recv()  # one payload at a time
                    if ack != ("ack", key):
                        raise RuntimeError(f"receiver aborted: {ack!r}")
            else:
                # digests for first and last, computed before the clock starts
                pre = {}
                for i in (0, n - 1):
                    stamp(src, stamp_value(pi, i))
                    pre[i] = digest(src)
                for i in range(n):
                    st = stamp_value(pi, i)
                    key = f"p{pi}-{i}"
                    t0 = time.monotonic()
                    stamp(src, st)
                    md = put(key, src)
                    copy_ms.append((time.monotonic() - t0) * 1e3)
                    md.update(key=key, t0=t0, i=i, stamp=st, digest=pre.get(i))
                    meta_conn.send(md)
                ack = meta_conn.recv()
                if ack != ("ack", f"batch{pi}"):
                    raise RuntimeError(f"receiver aborted: {ack!r}")
            ctrl.send(("phase", "sender", pi, {"copy_ms": copy_ms, "write_ms": list(write_ms),
                                               "slots": pool.nslots}))
        ctrl.send(("done", "sender"))
        stop.set()
        lt.join(timeout=3)
        executor.shutdown(wait=False)
    except Exception as e:  # noqa: BLE001
        try:
            ctrl.send(("error", "sender", f"{stage}: {e!r}", traceback.format_exc()))
        except Exception:
            pass
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    # skip engine / zmq destructors (mooncake teardown can block)
    os._exit(0)


def receiver_main(ctrl_conn, meta_conn, plan, pool_bytes, logdir, verbose):
    _child_setup("receiver", logdir, verbose)
    ctrl = _Ctrl(ctrl_conn)
    stage = "start"
    try:
        import msgpack
        import zmq

        stage = "mooncake engine"
        np, engine, rpc_port, pool = _start_engine(pool_bytes)
        zctx = zmq.Context()
        reqs = {}

        def req_socket(addr, timeout_ms):
            s = reqs.get(addr)
            if s is None:
                s = zctx.socket(zmq.REQ)
                s.connect(addr)
                reqs[addr] = s
            s.setsockopt(zmq.SNDTIMEO, timeout_ms)
            s.setsockopt(zmq.RCVTIMEO, timeout_ms)
            return s

        def get(md):
            """MooncakeTransferEngineConnector.get(), metadata path 1."""
            size = md["data_size"]
            off = pool.alloc(timeout=120.0)
            req = {"remote_hostname": HOST, "remote_port": rpc_port,
                   "request_id": md["key"], "dst_addrs": [pool.base + off],
                   "lengths": [size]}
            tmo = _BASE_TIMEOUT_MS + (size // _STEP_BYTES) * _PER_STEP_MS
            addr = f"tcp://{md['source_host']}:{md['source_port']}"
            s = req_socket(addr, tmo)
            try:
                s.send(msgpack.packb(req))
                resp = s.recv()
            except zmq.Again:
                s.close(linger=0)
                reqs.pop(addr, None)
                raise TimeoutError(f"no reply from sender within {tmo} ms for "
                                   f"{md['key']} ({size} B)")
            t1 = time.monotonic()
            if resp != TRANS_DONE:
                raise RuntimeError(f"sender answered {resp!r} for {md['key']} "
                                   f"({size} B) instead of {TRANS_DONE!r}")
            return off, t1

        def verify(off, md):
            v = pool.view(off, md["data_size"])
            if not check_stamp(v, md["stamp"]):
                raise RuntimeError(f"data mismatch (stamp) for {md['key']}")
            if md.get("digest") is not None:
                got = digest(v)
                if got != md["digest"]:
                    raise RuntimeError(f"data mismatch (digest {got} != "
                                       f"{md['digest']}) for {md['key']}")
                return 1
            return 0

        ctrl.send(("ready", "receiver", {"rpc_port": rpc_port, "pool": pool.size}))

        for pi, ph in enumerate(plan):
            stage = f"phase {pi} ({ph['mode']} {ph['size']} B)"
            pool.configure(ph["size"])
            n = ph["n"]
            res = {"digests_ok": 0}
            if ph["mode"] == "lat":
                lat = []
                for i in range(ph["warmup"] + n):
                    md = meta_conn.recv()
                    off, t1 = get(md)
                    if i >= ph["warmup"]:
                        lat.append((t1 - md["t0"]) * 1e3)
                    res["digests_ok"] += verify(off, md)
                    pool.release(off)  # caller releases the ManagedBuffer
                    meta_conn.send(("ack", md["key"]))
                res["lat_ms"] = lat
            else:
                held = []
                t_first = t_last = None
                for i in range(n):
                    md = meta_conn.recv()
                    if t_first is None:
                        t_first = md["t0"]
                    off, t_last = get(md)
                    v = pool.view(off, md["data_size"])
                    if not check_stamp(v, md["stamp"]):
                        raise RuntimeError(f"data mismatch (stamp) for {md['key']}")
                    if md.get("digest") is not None:
                        held.append((off, md))  # digest after the clock stops
                    else:
                        pool.release(off)
                for off, md in held:
                    res["digests_ok"] += verify(off, md)
                    pool.release(off)
                meta_conn.send(("ack", f"batch{pi}"))
                res["elapsed_s"] = t_last - t_first
                res["bytes"] = n * ph["size"]
            ctrl.send(("phase", "receiver", pi, res))
        ctrl.send(("done", "receiver"))
    except Exception as e:  # noqa: BLE001
        try:
            ctrl.send(("error", "receiver", f"{stage}: {e!r}", traceback.format_exc()))
            meta_conn.send(("abort", repr(e)))
        except Exception:
            pass
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------- parent


class DidNotRun(Exception):
    pass


def log_tail(logdir, name, lines=25):
    p = os.path.join(logdir, f"{name}.log")
    try:
        with open(p, "r", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def percentile(np, xs, q):
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", help="comma list of payload sizes in bytes "
                    "(default 65536,1048576,16777216,67108864)")
    ap.add_argument("--quick", action="store_true", help="a third of the iterations")
    ap.add_argument("--iters", type=int, help="latency iterations per size (override)")
    ap.add_argument("--tput-iters", type=int,
                    help="payloads per throughput batch (default: same as latency N)")
    ap.add_argument("--pool-mb", type=int, default=0,
                    help="registered pool per process, MiB (default max(256, 4x largest))")
    ap.add_argument("--json", metavar="OUT", help="write results as JSON to OUT")
    ap.add_argument("--timeout", type=float, default=0,
                    help="overall limit in seconds (default: estimated from sizes)")
    ap.add_argument("--verbose", action="store_true",
                    help="let mooncake's logs through instead of keeping them in a temp dir")
    args = ap.parse_args()

    try:
        sizes = ([int(s) for s in args.sizes.split(",") if s.strip()]
                 if args.sizes else list(DEFAULT_SIZES))
    except ValueError:
        ap.error("--sizes wants a comma list of integers (bytes)")
    if not sizes or any(s < 64 for s in sizes):
        ap.error("sizes must be >= 64 bytes")

    result = {"peer": PEER, "version": None, "rows": []}

    def fail(why, detail=""):
        print(f"mooncake-te did not run: {why}", file=sys.stderr)
        if detail:
            print(detail.rstrip(), file=sys.stderr)
        if args.json:
            result["error"] = why
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        sys.exit(EXIT_DID_NOT_RUN)

    missing = []
    for mod in ("numpy", "zmq", "msgpack"):
        try:
            __import__(mod)
        except Exception as e:  # noqa: BLE001
            missing.append(f"{mod} ({e})")
    try:
        import mooncake.engine  # noqa: F401  (import only; engines live in children)
    except Exception as e:  # noqa: BLE001
        missing.append(f"mooncake.engine ({e!r}; needs `pip install "
                       f"mooncake-transfer-engine-non-cuda` and `apt-get install -y libibverbs1`)")
    if missing:
        fail("cannot import " + "; ".join(missing))
    import numpy as np

    result["version"] = mooncake_version()

    plan = []
    for s in sizes:
        n = args.iters or default_iters(s)
        if args.quick:
            n = max(5, round(n / 3))
        m = args.tput_iters or n
        plan.append({"size": s, "mode": "lat", "n": n, "warmup": warmup_iters(s)})
        plan.append({"size": s, "mode": "tput", "n": m, "warmup": 0})
    pool_bytes = align_up(max(256 << 20, 4 * align_up(max(sizes)))
                          if not args.pool_mb else args.pool_mb << 20)
    if pool_bytes < align_up(max(sizes)):
        ap.error("--pool-mb smaller than the largest payload")
    # generous budget: start-up + 10 MB/s worst case
    budget = args.timeout or (60 + sum((p["n"] + p["warmup"]) * p["size"] / 10e6 + 5
                                       for p in plan))

    logdir = tempfile.mkdtemp(prefix="mooncake_te.")
    ctx = mp.get_context("spawn")
    m_s, m_r = ctx.Pipe(duplex=True)
    c_s_parent, c_s_child = ctx.Pipe(duplex=False)
    c_r_parent, c_r_child = ctx.Pipe(duplex=False)
    procs = {
        "sender": ctx.Process(target=sender_main, name="mooncake-sender", daemon=True,
                              args=(c_s_child, m_s, plan, pool_bytes, logdir, args.verbose)),
        "receiver": ctx.Process(target=receiver_main, name="mooncake-receiver", daemon=True,
                                args=(c_r_child, m_r, plan, pool_bytes, logdir, args.verbose)),
    }

    def kill_children():
        for p in procs.values():
            if p.pid is not None and p.is_alive():
                p.kill()
        for p in procs.values():
            if p.pid is not None:
                p.join(timeout=5)

    atexit.register(kill_children)

    def on_signal(signum, _frame):
        kill_children()
        shutil.rmtree(logdir, ignore_errors=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t_start = time.monotonic()
    for p in procs.values():
        p.start()
    c_s_child.close()
    c_r_child.close()

    conns = {c_s_parent: "sender", c_r_parent: "receiver"}
    sentinels = {p.sentinel: name for name, p in procs.items()}
    phase_res = {}
    ready = {}
    done = set()
    errors = []
    deadline = t_start + budget

    def where():
        ran = sorted({pi for (pi, _who) in phase_res})
        return f"after {len(ran)} of {len(plan)} phases" if ran else "before any measurement"

    try:
        while len(done) < 2:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DidNotRun(f"timed out after {budget:.0f} s ({where()})")
            for obj in mpc.wait(list(conns) + list(sentinels), timeout=min(left, 5)):
                if obj in conns:
                    try:
                        msg = obj.recv()
                    except EOFError:
                        del conns[obj]
                        continue
                    kind, who = msg[0], msg[1]
                    if kind == "ready":
                        ready[who] = msg[2]
                    elif kind == "phase":
                        phase_res[(msg[2], who)] = msg[3]
                        if who == "receiver":
                            ph = plan[msg[2]]
                            print(f"  {ph['mode']:4s} {human_size(ph['size']):>8s} x{ph['n']} "
                                  f"done ({time.monotonic() - t_start:.1f} s)",
                                  file=sys.stderr, flush=True)
                    elif kind == "done":
                        done.add(who)
                    elif kind == "error":
                        errors.append(f"{who}: {msg[2]}")
                        raise DidNotRun(f"{who}: {msg[2]} ({where()})")
                else:
                    name = sentinels.pop(obj)
                    if name not in done:
                        # drain any last message explaining the exit
                        for c, w in list(conns.items()):
                            while w == name and c.poll(0.2):
                                try:
                                    msg = c.recv()
                                except EOFError:
                                    break
                                if msg[0] == "error":
                                    raise DidNotRun(f"{name}: {msg[2]} ({where()})")
                                if msg[0] == "done":
                                    done.add(name)
                        if name not in done:
                            raise DidNotRun(f"{name} process exited with code "
                                            f"{procs[name].exitcode} ({where()})")
    except DidNotRun as e:
        detail = ""
        # give the other side a moment to report its own error (e.g. the
        # sender's batch_transfer_sync_write code behind a receiver's trans_error)
        time.sleep(0.3)
        for c, w in list(conns.items()):
            while c.poll(0):
                try:
                    msg = c.recv()
                except EOFError:
                    break
                if msg[0] == "error" and f"{w}: {msg[2]}" not in errors:
                    errors.append(f"{w}: {msg[2]}")
        kill_children()
        extra = [x for x in errors if x not in str(e)]
        for x in extra:
            detail += f"also: {x}\n"
        if not args.verbose:
            for name in procs:
                t = log_tail(logdir, name)
                if t:
                    detail += f"--- {name} log tail ({logdir}/{name}.log) ---\n{t}"
        fail(str(e), detail)

    kill_children()
    wall = time.monotonic() - t_start
    shutil.rmtree(logdir, ignore_errors=True)

    for pi in range(0, len(plan), 2):
        lat_ph, tp_ph = plan[pi], plan[pi + 1]
        rl = phase_res[(pi, "receiver")]
        rt = phase_res[(pi + 1, "receiver")]
        sl = phase_res[(pi, "sender")]
        st = phase_res[(pi + 1, "sender")]
        lat = rl["lat_ms"]
        row = {
            "size": lat_ph["size"],
            "lat_p50_ms": round(percentile(np, lat, 50), 4),
            "lat_p99_ms": round(percentile(np, lat, 99), 4),
            "mbps": round(rt["bytes"] / rt["elapsed_s"] / 1e6, 1),
            "n": len(lat),
            "m": tp_ph["n"],
            "lat_min_ms": round(min(lat), 4),
            "lat_mean_ms": round(float(np.mean(lat)), 4),
            "tput_s": round(rt["elapsed_s"], 4),
            "put_copy_p50_ms": round(percentile(np, sl["copy_ms"][lat_ph["warmup"]:], 50), 4),
            "te_write_p50_ms": round(percentile(np, sl["write_ms"][lat_ph["warmup"]:], 50), 4),
            "tput_sender_slots": st["slots"],
            "verified": rl["digests_ok"] + rt["digests_ok"],
        }
        result["rows"].append(row)
    result["wall_s"] = round(wall, 1)
    result["transport"] = "tcp, P2PHANDSHAKE, 127.0.0.1, numpy/mmap pools"
    result["pool_bytes"] = pool_bytes

    print(f"{PEER} ({result['version']}), wall {wall:.1f} s")
    hdr = (f"{'size':>9s} {'n':>4s} {'p50 ms':>9s} {'p99 ms':>9s} {'mean ms':>9s}"
           f" {'MB/s':>8s} {'m':>4s}"
           f" {'copy p50':>9s} {'write p50':>9s} {'digests':>7s}")
    print(hdr)
    print("-" * len(hdr))
    for r in result["rows"]:
        print(f"{human_size(r['size']):>9s} {r['n']:4d} {r['lat_p50_ms']:9.3f} "
              f"{r['lat_p99_ms']:9.3f} {r['lat_mean_ms']:9.3f} {r['mbps']:8.1f} {r['m']:4d} "
              f"{r['put_copy_p50_ms']:9.3f} {r['te_write_p50_ms']:9.3f} {r['verified']:7d}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

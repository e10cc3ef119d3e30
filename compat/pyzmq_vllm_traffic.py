#!/usr/bin/env python3
"""vLLM-style pyzmq traffic between a process on one libzmq and a process on another.

usage: pyzmq_vllm_traffic.py --ours /abs/target/release/libzmq.so [--json OUT] [--transports tcp,ipc]
       pyzmq_vllm_traffic.py --ours ... --rdma [--netns]
       (RDMA: both processes on rzmq with RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft over tcp on
       loopback, and with --netns also between two network namespaces joined by veth (root);
       each side must log that its connections moved to rdma/soft; then a stock-libzmq PUSH
       against an rzmq PULL with RDMA required must deliver nothing)
       (runs the matrix: each (frontend lib, engine lib) in (rzmq, stock), (stock, rzmq),
       (rzmq, rzmq), (stock, stock) over tcp and ipc; 'rzmq' = the stock wheel with LD_PRELOAD of
       our library, 'stock' = the wheel's bundled libzmq; each child proves which one serves it)
       pyzmq_vllm_traffic.py --role frontend|engine ...   (one side; used by the matrix)

The traffic is what vLLM's engine client and engine core exchange (see shared/design/OMNI.md):

frontend (asyncio, like AsyncMPClient / the DP coordinator)
  zmq.Context(io_threads=2) shadowed by zmq.asyncio.Context; make_zmq_socket's options (HWM 0,
  SNDBUF/RCVBUF 0.5 GiB, ROUTER_HANDOVER); ROUTER input socket (bind tcp://127.0.0.1:0 and
  LAST_ENDPOINT read back, monitored: LISTENING, ACCEPTED, HANDSHAKE_SUCCEEDED, DISCONNECTED),
  PULL output socket (bind) drained by a thread that polls it with zmq.Poller together with an
  inproc PAIR used for shutdown, XPUB coordinator socket (bind, XPUB_VERBOSE) that waits for the
  b'\\x01' subscription before publishing. Requests are send_multipart((identity, request_type, msgpack
  main frame, *tensor frames), copy=False, track=True); a buffer is refilled only after its
  MessageTracker is done (awaited).
engine (sync threads, like EngineCoreProc)
  DEALER with IDENTITY rank.to_bytes(2, 'little') (rank 0: b'\\x00\\x00'), sends b'' first so the
  ROUTER learns it; PUSH output socket with LINGER 4000 sending send_multipart(buffers,
  copy=False, track=True), buffers reused after tracker.wait(); an XSUB reached through a
  zmq.proxy(XSUB -> frontend's XPUB, XPUB inproc) thread, subscribing with b'\\x01'; monitor on
  the DEALER (CONNECTED, HANDSHAKE_SUCCEEDED). The proxy thread ends with ContextTerminated when
  the engine terminates its context, which also waits for the PUSH linger.

Tensor frames are 256 B .. 24 MiB (the sizes of Qwen-Omni payloads: a 1280x720 frame's vision
embeddings, 1200 x 3584 bf16 = 8.6 MB; 60 s of audio, 24 MiB); every frame is checked by BLAKE2b
against the digests in the main frame, request ids and counts are checked on both sides, and any
mismatch makes the process (and the matrix) exit non-zero.
"""

import argparse
import asyncio
import hashlib
import json
import os
import queue
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rzmq_netns  # noqa: E402  (compat/rzmq_netns.py: the two-namespace setup, shared with the omni tests)

try:
    import msgpack
except ImportError:  # plain JSON bytes when msgpack is not installed
    msgpack = None

MIB = 1 << 20
VIT_FRAME = 1200 * 3584 * 2  # one 1280x720 frame's embeddings, bf16, hidden 3584
BIG = 24 * MIB
NREQ = 16
NPUB = 6
RANK = 0
DEADLINE_S = 90
ADD, UTILITY = b"\x00", b"\x03"  # vLLM EngineCoreRequestType values
BUF = 512 * MIB  # make_zmq_socket's SNDBUF/RCVBUF on big machines (the kernel caps it)


def vllm_options(sock, kind):
    """The options vLLM's make_zmq_socket sets for socket type `kind`."""
    import zmq

    if kind in (zmq.PULL, zmq.DEALER, zmq.ROUTER):
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.RCVBUF, BUF)
    if kind in (zmq.PUSH, zmq.DEALER, zmq.ROUTER):
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.SNDBUF, BUF)
    if kind == zmq.ROUTER:
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)


def pack(obj):
    return msgpack.packb(obj) if msgpack else json.dumps(obj).encode()


def unpack(data):
    return msgpack.unpackb(bytes(data)) if msgpack else json.loads(bytes(data))


def request_sizes(i):
    sizes = [256, 257, 4096, 65535, 65536 + i, 300_000]
    if i % 4 == 0:
        sizes += [MIB, VIT_FRAME]
    if i in (0, 7, NREQ - 1):
        sizes.append(BIG)
    return sizes


def pub_sizes(j):
    sizes = [256, 65536, MIB + j]
    if j == NPUB - 1:
        sizes += [VIT_FRAME, BIG]
    return sizes


def digest(buf):
    return hashlib.blake2b(buf, digest_size=16).hexdigest()


class Filler:
    """Fills buffers with content that differs per (tag, size): a slice of a random block at an
    offset that depends on the tag, stamped with the tag and the size."""

    def __init__(self, seed):
        self.block = random.Random(seed).randbytes(BIG + 65536)

    def fill(self, buf, size, tag):
        off = (tag * 2654435761) % 65536
        view = memoryview(buf)
        view[:size] = self.block[off:off + size]
        if size >= 16:
            struct.pack_into("<QQ", buf, 0, tag, size)
        return digest(view[:size])


class Pool:
    """Two reusable bytearrays per size; a buffer is handed out again only when the tracker of
    the message that carried it is done (libzmq released it)."""

    def __init__(self):
        self.slots = {}

    def take(self, size):
        slot = self.slots.setdefault(size, {"i": 0, "bufs": [[bytearray(size), None], [bytearray(size), None]]})
        entry = slot["bufs"][slot["i"] % 2]
        slot["i"] += 1
        return entry

    def pending(self, entry):
        return entry[1] is not None and not entry[1].done


def wait_tracker_sync(entry, timeout=30):
    if entry[1] is not None:
        entry[1].wait(timeout)  # raises NotDone on timeout
        entry[1] = None


async def wait_tracker_async(entry, timeout=30):
    if entry[1] is not None:
        end = time.monotonic() + timeout
        while not entry[1].done:
            if time.monotonic() > end:
                raise TimeoutError("MessageTracker not done within 30 s")
            await asyncio.sleep(0.001)
        entry[1] = None


def check_frames(kind, main, tensors, errors):
    """Verifies tensor frames against the main frame; returns the byte count."""
    sizes, digests = main["sizes"], main["digests"]
    if len(tensors) != len(sizes):
        errors.append(f"{kind} {main.get('id')}: {len(tensors)} tensor frames, expected {len(sizes)}")
        return 0
    total = 0
    for k, (frame, size, want) in enumerate(zip(tensors, sizes, digests)):
        buf = frame.buffer if hasattr(frame, "buffer") else memoryview(frame)
        total += len(buf)
        if len(buf) != size:
            errors.append(f"{kind} {main.get('id')} frame {k}: {len(buf)} bytes, expected {size}")
        elif digest(buf) != want:
            errors.append(f"{kind} {main.get('id')} frame {k} ({size} B): checksum mismatch")
    return total


HOST = os.environ.get("RZMQ_TRAFFIC_HOST", "127.0.0.1")
NETNS = ("rzmq-ns-a", "rzmq-ns-b")
NETNS_IP = ("10.77.0.1", "10.77.0.2")
NETNS_VETH = ("rzmq-veth-a", "rzmq-veth-b")
RDMA_ENV = {"RZMQ_RDMA": "require", "RZMQ_RDMA_PROVIDER": "soft", "RZMQ_RDMA_LOG": "1"}


def endpoint(transport, ipc_dir, name, port_spec):
    if transport == "tcp":
        return f"tcp://{HOST}:{port_spec}"
    return f"ipc://{ipc_dir}/{name}-{uuid.uuid4().hex[:8]}"


def lib_report(expect, ours):
    import pyzmq_libcheck

    info = pyzmq_libcheck.identify(ours)
    return {"summary": pyzmq_libcheck.summary(info), "problems": pyzmq_libcheck.check(info, expect),
            "kind": info["kind"]}


def monitor_names(events):
    import zmq

    names = {getattr(zmq, n): n for n in dir(zmq) if n.startswith("EVENT_") and isinstance(getattr(zmq, n), int)}
    return [names.get(e, str(e)) for e in events]


# --------------------------------------------------------------------------------------------
# frontend


def output_thread(sync_ctx, pull, shutdown_path, ready, state):
    """vLLM's SyncMPClient output loop: Poller over the output socket and an inproc PAIR."""
    import zmq

    shutdown = sync_ctx.socket(zmq.PAIR)
    shutdown.bind(shutdown_path)
    ready.set()
    poller = zmq.Poller()
    poller.register(shutdown, zmq.POLLIN)
    poller.register(pull, zmq.POLLIN)
    try:
        while True:
            socks = dict(poller.poll(timeout=DEADLINE_S * 1000))
            if not socks:
                state["errors"].append("output thread: no output and no shutdown within the deadline")
                break
            if shutdown in socks:
                shutdown.recv()
                break
            if pull in socks:
                frames = pull.recv_multipart(copy=False)
                main = unpack(frames[0].buffer)
                state["bytes"] += check_frames("output", main, frames[1:], state["errors"])
                if main.get("type") == "done":
                    state["engine"] = main
                    state["done"].set()
                else:
                    if main["id"] != state["next"]:
                        state["errors"].append(f"output {main['id']} arrived, expected {state['next']}")
                    state["next"] = main["id"] + 1
    except Exception as e:  # noqa: BLE001
        state["errors"].append(f"output thread: {e!r}")
        state["done"].set()
    finally:
        shutdown.close(linger=0)


async def frontend(args):
    import zmq
    import zmq.asyncio
    from zmq.utils.monitor import parse_monitor_message

    errors = []
    sync_ctx = zmq.Context(io_threads=2)
    ctx = zmq.asyncio.Context(sync_ctx)
    ipc_dir = args.ipc_dir

    router = ctx.socket(zmq.ROUTER)
    vllm_options(router, zmq.ROUTER)
    mon = router.get_monitor_socket()  # before bind: LISTENING is reported too
    router.bind(endpoint(args.transport, ipc_dir, "input", "0"))  # vLLM binds host:0 ...
    ep_in = router.getsockopt_string(zmq.LAST_ENDPOINT)  # ... and reads the port back

    pull = sync_ctx.socket(zmq.PULL)
    vllm_options(pull, zmq.PULL)
    pull.bind(endpoint(args.transport, ipc_dir, "output", "*"))
    ep_out = pull.getsockopt_string(zmq.LAST_ENDPOINT)

    xpub = ctx.socket(zmq.XPUB)
    xpub.setsockopt(zmq.XPUB_VERBOSE, 1)
    xpub.bind(endpoint(args.transport, ipc_dir, "coord", "*"))
    ep_pub = xpub.getsockopt_string(zmq.LAST_ENDPOINT)

    print(json.dumps({"input": ep_in, "output": ep_out, "pub": ep_pub}), flush=True)

    events = []

    async def watch_monitor():
        while True:
            msg = parse_monitor_message(await mon.recv_multipart())
            events.append(msg["event"])
            if msg["event"] == zmq.EVENT_MONITOR_STOPPED:
                return

    mon_task = asyncio.ensure_future(watch_monitor())

    state = {"errors": errors, "bytes": 0, "next": 0, "done": threading.Event(), "engine": None}
    shutdown_path = f"inproc://shutdown-{uuid.uuid4().hex}"
    ready = threading.Event()
    out = threading.Thread(target=output_thread, args=(sync_ctx, pull, shutdown_path, ready, state), daemon=True)
    out.start()
    ready.wait(10)

    identity = RANK.to_bytes(2, "little")
    hello = await asyncio.wait_for(router.recv_multipart(), DEADLINE_S)
    if hello != [identity, b""]:
        errors.append(f"hello on the ROUTER was {hello!r}, expected [{identity!r}, b'']")
    sub = await asyncio.wait_for(xpub.recv(), DEADLINE_S)
    if sub != b"\x01":
        errors.append(f"XPUB received subscription {sub!r}, expected b'\\x01'")

    filler, pool = Filler(1), Pool()
    sent = 0
    for i in range(NREQ):
        entries = [pool.take(s) for s in request_sizes(i)]
        for entry in entries:
            await wait_tracker_async(entry)  # never overwrite a buffer libzmq may still read
        sizes = request_sizes(i)
        digests = [filler.fill(e[0], s, 1000 + i * 64 + k) for k, (e, s) in enumerate(zip(entries, sizes))]
        main = {"id": i, "type": "add", "sizes": sizes, "digests": digests}
        tracker = await router.send_multipart([identity, ADD, pack(main), *[e[0] for e in entries]],
                                              copy=False, track=True)
        for e in entries:
            e[1] = tracker
        sent += sum(sizes)
    for j in range(NPUB):
        sizes = pub_sizes(j)
        entries = [pool.take(s) for s in sizes]
        for entry in entries:
            await wait_tracker_async(entry)
        digests = [filler.fill(e[0], s, 9000 + j * 64 + k) for k, (e, s) in enumerate(zip(entries, sizes))]
        main = {"id": j, "type": "wave", "sizes": sizes, "digests": digests}
        tracker = await xpub.send_multipart([pack(main), *[e[0] for e in entries]], copy=False, track=True)
        for e in entries:
            e[1] = tracker
        sent += sum(sizes)
    await router.send_multipart([identity, UTILITY, pack({"method": "shutdown", "nreq": NREQ, "npub": NPUB})])
    for slot in pool.slots.values():
        for entry in slot["bufs"]:
            await wait_tracker_async(entry)

    loop = asyncio.get_running_loop()
    if not await loop.run_in_executor(None, state["done"].wait, DEADLINE_S):
        errors.append(f"no 'done' from the engine within {DEADLINE_S} s ({state['next']} outputs received)")
    engine = state["engine"] or {}
    if state["next"] != NREQ:
        errors.append(f"{state['next']} outputs received, expected {NREQ}")
    if engine and (engine.get("requests") != NREQ or engine.get("pubs") != NPUB):
        errors.append(f"engine counted {engine.get('requests')} requests, {engine.get('pubs')} pubs")

    # stop the output thread the vLLM way: a PAIR connected to the thread's inproc endpoint
    stopper = sync_ctx.socket(zmq.PAIR)
    stopper.connect(shutdown_path)
    stopper.send(b"")
    out.join(10)
    if out.is_alive():
        errors.append("output thread did not stop after the inproc PAIR shutdown message")
    stopper.close(linger=0)

    # the engine process has exited: the ROUTER's monitor must report the disconnect
    end = time.monotonic() + 10
    while zmq.EVENT_DISCONNECTED not in events and time.monotonic() < end:
        await asyncio.sleep(0.05)
    router.disable_monitor()
    try:
        await asyncio.wait_for(mon_task, 5)
    except asyncio.TimeoutError:
        mon_task.cancel()
    want = [zmq.EVENT_LISTENING, zmq.EVENT_ACCEPTED, zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_DISCONNECTED]
    missing = [w for w in want if w not in events]
    if missing:
        errors.append(f"ROUTER monitor lacks {monitor_names(missing)}; saw {monitor_names(events)}")
    mon.close(linger=0)
    for s in (router, xpub):
        s.close(linger=0)
    if not out.is_alive():
        pull.close(linger=0)
    sync_ctx.term()
    return {"role": "frontend", "errors": errors + engine.get("errors", []), "sent": sent,
            "received": state["bytes"], "events": monitor_names(events)}


# --------------------------------------------------------------------------------------------
# engine


def proxy_thread(ctx, ep_pub, backend, ready, errors):
    import zmq

    front = ctx.socket(zmq.XSUB)
    front.connect(ep_pub)
    back = ctx.socket(zmq.XPUB)
    back.bind(backend)
    ready.set()
    try:
        zmq.proxy(front, back)
        errors.append("zmq.proxy returned without ContextTerminated")
    except zmq.ContextTerminated:
        pass
    except Exception as e:  # noqa: BLE001
        errors.append(f"proxy thread: {e!r}")
    finally:
        front.close(linger=0)
        back.close(linger=0)


def engine_output_thread(push, outputs, errors, stats):
    """EngineCoreProc's output thread: PUSH (LINGER 4000), zero-copy tracked sends, buffers
    reused after the tracker is done."""
    filler, pool = Filler(2), Pool()
    try:
        while True:
            item = outputs.get()
            final = item is None
            if final:
                sizes = [256, VIT_FRAME, BIG]
                tag_base, main = 50000, {"id": -1, "type": "done"}
            else:
                sizes = request_sizes(item)
                tag_base, main = 20000 + item * 64, {"id": item, "type": "output"}
            entries = [pool.take(s) for s in sizes]
            for entry in entries:
                wait_tracker_sync(entry)
            main["sizes"] = sizes
            main["digests"] = [filler.fill(e[0], s, tag_base + k) for k, (e, s) in enumerate(zip(entries, sizes))]
            if final:
                main.update(requests=stats["requests"], pubs=stats["pubs"], errors=errors[:20])
            tracker = push.send_multipart([pack(main), *[e[0] for e in entries]], copy=False, track=True)
            for e in entries:
                e[1] = tracker
            stats["sent"] += sum(sizes)
            if final:
                break
    except Exception as e:  # noqa: BLE001
        errors.append(f"engine output thread: {e!r}")
    finally:
        push.close()  # LINGER 4000: the last (24 MiB) output must still reach the frontend


def engine(args):
    import zmq
    from zmq.utils.monitor import recv_monitor_message

    errors = []
    stats = {"requests": 0, "pubs": 0, "sent": 0, "received": 0}
    ctx = zmq.Context(io_threads=2)

    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, RANK.to_bytes(2, "little"))
    vllm_options(dealer, zmq.DEALER)
    mon = dealer.get_monitor_socket()
    dealer.connect(args.input)
    dealer.send(b"")  # so the ROUTER learns the identity

    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 4000)
    vllm_options(push, zmq.PUSH)
    push.connect(args.output)

    backend = f"inproc://coord-{uuid.uuid4().hex}"
    ready = threading.Event()
    proxy = threading.Thread(target=proxy_thread, args=(ctx, args.pub, backend, ready, errors), daemon=True)
    proxy.start()
    ready.wait(10)
    xsub = ctx.socket(zmq.XSUB)
    xsub.connect(backend)
    xsub.send(b"\x01")  # subscribe to everything, as vLLM's DP clients do

    outputs = queue.Queue()
    out = threading.Thread(target=engine_output_thread, args=(push, outputs, errors, stats), daemon=True)
    out.start()

    poller = zmq.Poller()
    poller.register(dealer, zmq.POLLIN)
    poller.register(xsub, zmq.POLLIN)
    poller.register(mon, zmq.POLLIN)
    events, expect = [], None
    deadline = time.monotonic() + DEADLINE_S
    while expect is None or stats["pubs"] < expect["npub"]:
        if time.monotonic() > deadline:
            errors.append(f"engine: deadline with {stats['requests']} requests, {stats['pubs']} pubs")
            break
        socks = dict(poller.poll(1000))
        if mon in socks:
            events.append(recv_monitor_message(mon)["event"])
        if dealer in socks:
            frames = dealer.recv_multipart(copy=False)
            kind = frames[0].bytes
            main = unpack(frames[1].buffer)
            if kind == ADD:
                if main["id"] != stats["requests"]:
                    errors.append(f"request {main['id']} arrived, expected {stats['requests']}")
                stats["received"] += check_frames("request", main, frames[2:], errors)
                stats["requests"] += 1
                outputs.put(main["id"])
            elif kind == UTILITY and main.get("method") == "shutdown":
                expect = main
                if stats["requests"] != main["nreq"]:
                    errors.append(f"shutdown after {stats['requests']} requests, expected {main['nreq']}")
            else:
                errors.append(f"unexpected request type {kind!r}")
        if xsub in socks:
            frames = xsub.recv_multipart(copy=False)
            main = unpack(frames[0].buffer)
            if main["id"] != stats["pubs"]:
                errors.append(f"wave {main['id']} arrived, expected {stats['pubs']}")
            stats["received"] += check_frames("wave", main, frames[1:], errors)
            stats["pubs"] += 1
    while mon.poll(0):
        events.append(recv_monitor_message(mon)["event"])
    for want in (zmq.EVENT_CONNECTED, zmq.EVENT_HANDSHAKE_SUCCEEDED):
        if want not in events:
            errors.append(f"DEALER monitor lacks {monitor_names([want])}; saw {monitor_names(events)}")
    outputs.put(None)
    out.join(DEADLINE_S)
    if out.is_alive():
        errors.append("engine output thread did not finish")
    dealer.disable_monitor()
    mon.close(linger=0)
    dealer.close(linger=0)
    xsub.close(linger=0)
    t0 = time.monotonic()
    ctx.term()  # ends the proxy (ContextTerminated) and waits for the PUSH linger
    proxy.join(10)
    if proxy.is_alive():
        errors.append("proxy thread still running after ctx.term()")
    return {"role": "engine", "errors": errors, "sent": stats["sent"], "received": stats["received"],
            "term_s": round(time.monotonic() - t0, 3), "events": monitor_names(events)}


# --------------------------------------------------------------------------------------------
# one side, and the matrix


def child_main(args):
    lib = lib_report(args.expect, args.ours)
    if lib["problems"]:
        result = {"role": args.role, "errors": [f"wrong library: {p}" for p in lib["problems"]]}
    else:
        try:
            result = asyncio.run(frontend(args)) if args.role == "frontend" else engine(args)
        except Exception as e:  # noqa: BLE001
            result = {"role": args.role, "errors": [f"{type(e).__name__}: {e}"]}
    result["lib"] = lib["summary"]
    print("RESULT " + json.dumps(result), flush=True)
    return 1 if result["errors"] else 0


def spawn(role, lib, args, extra, env_extra=None, netns=None):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH") and not k.startswith("RZMQ_")}
    if lib == "rzmq":
        env["LD_PRELOAD"] = args.ours
    env.update(env_extra or {})
    cmd = [sys.executable, os.path.abspath(__file__), "--role", role, "--expect", lib, "--ours", args.ours, *extra]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result_of(proc, out, err):
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = " | ".join(err.strip().splitlines()[-3:])
    return {"errors": [f"no result (exit {proc.returncode}): {tail}"]}


def run_pair(args, transport, fe_lib, en_lib, rdma=False, netns=None):
    ipc_dir = tempfile.mkdtemp(prefix="rzmq-vllm-")
    t0 = time.monotonic()
    env = dict(RDMA_ENV) if rdma else {}
    fe_env, en_env = dict(env), dict(env)
    if netns:
        fe_env["RZMQ_TRAFFIC_HOST"] = NETNS_IP[0]
    fe = spawn("frontend", fe_lib, args, ["--transport", transport, "--ipc-dir", ipc_dir], fe_env,
               netns[0] if netns else None)
    errors, en = [], None
    logs = {}
    try:
        line = fe.stdout.readline()  # endpoints
        try:
            eps = json.loads(line)
        except json.JSONDecodeError:
            eps = None
            errors.append(f"frontend printed no endpoints: {line.strip()!r}")
        if eps:
            en = spawn("engine", en_lib, args, ["--input", eps["input"], "--output", eps["output"], "--pub", eps["pub"]],
                       en_env, netns[1] if netns else None)
        results = {}
        for name, proc in (("engine", en), ("frontend", fe)):
            if proc is None:
                continue
            try:
                out, err = proc.communicate(timeout=DEADLINE_S + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                errors.append(f"{name} killed after {DEADLINE_S + 30} s")
            results[name] = result_of(proc, out, err)
            logs[name] = err
            if proc.returncode != 0 and not results[name]["errors"]:
                errors.append(f"{name} exited {proc.returncode}")
            errors += [f"{name}: {e}" for e in results[name]["errors"]]
    finally:
        for proc in (fe, en):
            if proc is not None and proc.poll() is None:
                proc.kill()
        shutil.rmtree(ipc_dir, ignore_errors=True)
    seconds = time.monotonic() - t0
    rdma_note = ""
    if rdma:
        # Each side logs one line per connection: its transport, and at the end its counters.
        for side in ("frontend", "engine"):
            lines = [ln for ln in logs.get(side, "").splitlines() if ln.startswith("rzmq[")]
            up = sum(1 for ln in lines if ": transport rdma/soft" in ln)
            bad = [ln for ln in lines if "refused" in ln or ": transport tcp" in ln]
            if up < 3:
                errors.append(f"{side}: {up} connections on rdma/soft, expected 3 (ROUTER/DEALER, PUSH/PULL, XPUB/XSUB)")
            errors += [f"{side}: {ln}" for ln in bad]
            zc = sum(int(ln.split(" zero-copy reads")[0].rsplit("(", 1)[1]) for ln in lines if "zero-copy reads" in ln)
            rdma_note += f"; {side}: {up} connections on rdma/soft, {zc} zero-copy reads"
    fr, er = results.get("frontend", {}), results.get("engine", {})
    where = f" (namespaces {netns[0]} {NETNS_IP[0]} <-> {netns[1]} {NETNS_IP[1]}, veth)" if netns else ""
    name = f"{transport}{' RDMA required (soft)' if rdma else ''}{where}: frontend on {fe_lib} <-> engine on {en_lib}"
    if errors:
        detail = "; ".join(dict.fromkeys(errors))[:600]
    else:
        detail = (f"frontend->engine {fr.get('sent', 0) / MIB:.0f} MiB, engine->frontend {er.get('sent', 0) / MIB:.0f} MiB, "
                  f"verified {(fr.get('received', 0) + er.get('received', 0)) / MIB:.0f} MiB; engine ctx.term "
                  f"(linger) {er.get('term_s')} s; {seconds:.1f} s{rdma_note}")
    return {"name": name, "ok": not errors, "detail": detail, "frontend": fr, "engine": er}


def netns_up():
    """Two network namespaces joined by a veth pair; False when this machine cannot make them."""
    why = rzmq_netns.up(NETNS, NETNS_IP, NETNS_VETH)
    if why:
        print(f"netns setup failed: {why}", file=sys.stderr)
    return why is None


def netns_down():
    rzmq_netns.down(NETNS)


REFUSAL_CHILD = r"""
import sys, time, zmq
role, ep = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
if role == "pull":
    s = ctx.socket(zmq.PULL)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    got = s.poll(3000)
    print("DELIVERED" if got else "NOTHING", flush=True)
else:
    s = ctx.socket(zmq.PUSH)
    s.connect(ep)
    for _ in range(5):
        s.send(b"must not arrive")
    time.sleep(3.5)
s.close(linger=0)
ctx.term()
"""


def run_refusal(args):
    """RZMQ_RDMA=require on rzmq against a stock libzmq peer: nothing may be delivered."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",) and not k.startswith("RZMQ_")}
    pull = subprocess.Popen([sys.executable, "-c", REFUSAL_CHILD, "pull", ""], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**env, "LD_PRELOAD": args.ours, **RDMA_ENV})
    port = pull.stdout.readline().strip()
    push = subprocess.Popen([sys.executable, "-c", REFUSAL_CHILD, "push", f"tcp://127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = pull.communicate(timeout=30)
    finally:
        push.kill()
        push.communicate()
    refused = sum(1 for ln in err.splitlines() if "refused: RDMA required" in ln)
    ok = out.strip().endswith("NOTHING") and refused >= 1
    return {"name": "tcp RDMA required (soft): rzmq PULL <- stock libzmq PUSH", "ok": ok,
            "detail": f"pull saw {out.strip().splitlines()[-1] if out.strip() else 'no output'}; {refused} connection(s) refused and logged"}


def rdma_main(args):
    runs = [run_pair(args, "tcp", "rzmq", "rzmq", rdma=True)]
    print(f"{'ok  ' if runs[-1]['ok'] else 'FAIL'} {runs[-1]['name']}: {runs[-1]['detail']}", flush=True)
    if args.netns:
        if netns_up():
            try:
                runs.append(run_pair(args, "tcp", "rzmq", "rzmq", rdma=True, netns=NETNS))
            finally:
                netns_down()
        else:
            runs.append({"name": "tcp RDMA required (soft) across network namespaces", "ok": False,
                         "detail": "could not create the namespaces (needs root and iproute2)"})
        print(f"{'ok  ' if runs[-1]['ok'] else 'FAIL'} {runs[-1]['name']}: {runs[-1]['detail']}", flush=True)
    runs.append(run_refusal(args))
    print(f"{'ok  ' if runs[-1]['ok'] else 'FAIL'} {runs[-1]['name']}: {runs[-1]['detail']}", flush=True)
    return runs


def matrix_main(args):
    if not os.path.isfile(args.ours):
        print(f"{args.ours} does not exist", file=sys.stderr)
        return 2
    runs = []
    pairs = [("rzmq", "stock"), ("stock", "rzmq"), ("rzmq", "rzmq"), ("stock", "stock")]
    for transport in ([] if args.rdma else args.transports.split(",")):
        for fe_lib, en_lib in pairs:
            r = run_pair(args, transport, fe_lib, en_lib)
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['name']}: {r['detail']}", flush=True)
            runs.append(r)
    if args.rdma:
        runs += rdma_main(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs}, f, indent=1)
    failed = sum(1 for r in runs if not r["ok"])
    print(f"{len(runs) - failed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", required=True, help="absolute path of rzmq's libzmq.so")
    ap.add_argument("--json")
    ap.add_argument("--transports", default="tcp,ipc")
    ap.add_argument("--role", choices=["frontend", "engine"])
    ap.add_argument("--expect", choices=["rzmq", "stock"])
    ap.add_argument("--transport", choices=["tcp", "ipc"])
    ap.add_argument("--ipc-dir")
    ap.add_argument("--input")
    ap.add_argument("--output")
    ap.add_argument("--pub")
    ap.add_argument("--rdma", action="store_true", help="the RDMA runs instead of the libzmq matrix")
    ap.add_argument("--netns", action="store_true", help="with --rdma: also across two network namespaces")
    args = ap.parse_args()
    args.ours = os.path.abspath(args.ours)
    return child_main(args) if args.role else matrix_main(args)


if __name__ == "__main__":
    sys.exit(main())

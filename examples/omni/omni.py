#!/usr/bin/env python3
"""A pyzmq replica of the traffic of a disaggregated Qwen-Omni deployment (vLLM / vllm-omni).

usage: omni.py run [options]          the pipeline: this process is the front-end and launches
                                      the stage engines as child processes
       omni.py stage --spec JSON      one stage engine (started by `run`)
       omni.py report OUT.json...     summary of runs, outputs compared across them (exit 1 on a
                                      mismatch or a failed run)

Processes (see shared/design/OMNI.md for what vLLM / vllm-omni do and the payload shapes):
  front-end     zmq.Context(io_threads=2) shadowed by zmq.asyncio.Context; ROUTER input socket and
                PULL output socket (both bind tcp://HOST:0, port read back with LAST_ENDPOINT),
                make_zmq_socket's options. It is the orchestrator: it sends each request to the
                encoder with the raw media as tensor frames (copy=False, track=True, buffers reused
                only once the MessageTracker is done), receives every stage's outputs on the PULL
                socket and forwards the connector metadata of each stage-to-stage payload to the
                next stage, the way vllm-omni's orchestrator drives stage engines.
  stage engines encoder, thinker prefill (--prefill-replicas), thinker decode, talker, code2wav:
                each a separate process with a DEALER (IDENTITY = index.to_bytes(2, 'little'),
                sends b'' first so the ROUTER learns it) and a PUSH (LINGER 4000) to the front-end.
                Stage-to-stage payloads (embeddings, KV cache, hidden states, codec codes) move
                through rzmq's vllm-omni connector (RzmqConnector, via omni_link.Link), msgpack main
                frame plus one frame per tensor, put without copying; shared tensors on keys of their own.

Seeded synthetic tensors (omni_wire.synth) stand in for model compute; each stage derives its
outputs from digests of what it received, so the final tokens and audio depend on every byte
upstream. Every receiver checks digests and the seed-derived stamp it expects, and code2wav checks
the left-context continuity of codec chunks. The front-end writes per-request outputs (token ids,
audio chunk digests) which `report` compares across runs.
"""

import argparse
import asyncio
import ctypes
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import omni_wire as w  # noqa: E402

ADD, UTILITY = b"\x00", b"\x03"  # vLLM EngineCoreRequestType values
VOCAB = 151936
AUDIO_RATE = 16000  # input audio, float32 PCM
# thinker hidden size and KV bytes per token (layers x 2 x kv heads x head dim x 2 bytes, bf16)
PRESETS = {
    "7b": {"hidden": 3584, "kv_per_token": 28 * 2 * 4 * 128 * 2},  # Qwen2.5-Omni-7B
    "3b": {"hidden": 2048, "kv_per_token": 36 * 2 * 2 * 128 * 2},  # Qwen2.5-Omni-3B
}


# ============================================================================================
# the request plan (deterministic from the seed)


def media_tokens(item):
    """Encoder tokens of a media item: 14-pixel patches merged 2x2 (one token per 28x28 pixels),
    video frames merged in pairs, audio 25 tokens per second."""
    if item["kind"] == "image":
        return math.ceil(item["h"] / 28) * math.ceil(item["w"] / 28)
    if item["kind"] == "video":
        return math.ceil(item["frames"] / 2) * math.ceil(item["h"] / 28) * math.ceil(item["w"] / 28)
    return math.ceil(25 * item["seconds"])


def media_raw(item):
    """(shape, dtype) of the raw media the front-end sends to the encoder."""
    if item["kind"] == "image":
        return [item["h"], item["w"], 3], "u8"
    if item["kind"] == "video":
        return [item["frames"], item["h"], item["w"], 3], "u8"
    return [int(AUDIO_RATE * item["seconds"])], "f32"


def parse_res(text):
    a, b = text.lower().split("x")
    return int(a), int(b)


def make_plan(args):
    rng = random.Random(args.seed)
    weights = {}
    for part in args.mix.split(","):
        kind, _, wt = part.partition("=")
        if kind not in ("image", "video", "audio"):
            raise SystemExit(f"--mix: unknown media kind {kind!r}")
        weights[kind] = float(wt or 1)
    kinds = [k for k in weights if weights[k] > 0]
    iw, ih = parse_res(args.image)
    vf, vres = args.video.lower().split("x", 1)
    vw, vh = parse_res(vres)

    def item(kind, cid):
        if kind == "image":
            it = {"kind": kind, "w": iw, "h": ih}
        elif kind == "video":
            it = {"kind": kind, "frames": int(vf), "w": vw, "h": vh}
        else:
            it = {"kind": kind, "seconds": args.audio_seconds}
        it["key"] = "%016x" % w.tag_of("media", args.seed, cid, it)  # content key: hash of the media
        it["tokens"] = media_tokens(it)
        return it

    library = [item(rng.choices(kinds, [weights[k] for k in kinds])[0], f"lib{i}") for i in range(args.library)]
    requests = []
    for r in range(args.requests):
        items = []
        for j in range(rng.randint(1, args.media_per_request)):
            if library and rng.random() >= args.fresh:
                items.append(library[rng.randrange(len(library))])
            else:
                items.append(dict(item(rng.choices(kinds, [weights[k] for k in kinds])[0], f"req{r}-{j}"), fresh=True))
        requests.append({"rid": f"req-{r:05d}", "index": r, "media": items, "text_tokens": args.text_tokens,
                         "max_tokens": args.max_tokens, "replica": r % args.prefill_replicas})
    return requests


# ============================================================================================
# stage engines


def set_pdeathsig():
    """Child processes die with the launcher (PR_SET_PDEATHSIG = SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def lib_info(expect):
    """Which libzmq serves pyzmq here (compat/pyzmq_libcheck.py), and whether it is `expect`."""
    sys.path.insert(0, os.path.join(ROOT, "compat"))
    try:
        import pyzmq_libcheck

        info = pyzmq_libcheck.identify(os.path.join(ROOT, "target", "release", "libzmq.so"))
        problems = pyzmq_libcheck.check(info, expect) if expect else []
        return {"kind": info["kind"], "summary": pyzmq_libcheck.summary(info), "problems": problems}
    except Exception as e:  # noqa: BLE001
        return {"kind": "unknown", "summary": f"libcheck failed: {e!r}", "problems": [] if not expect else [repr(e)]}


class StageError(Exception):
    pass


class Engine:
    """Common part of a stage engine: vLLM's EngineCoreProc sockets plus a connector."""

    def __init__(self, spec):
        import zmq

        from omni_link import Link

        self.spec = spec
        self.name = spec["name"]
        self.args = spec["args"]
        self.hidden = PRESETS[self.args["preset"]]["hidden"]
        self.errors = []
        self.checked = 0  # tensors verified
        self.lat = {}  # edge -> seconds (non-connector edges measured here)
        self.ctx = zmq.Context(io_threads=2)
        self.dealer = self.ctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.IDENTITY, spec["index"].to_bytes(2, "little"))
        w.vllm_options(self.dealer, zmq.DEALER)
        self.dealer.connect(spec["input"])
        self.dealer.send(b"")  # so the ROUTER learns the identity
        self.push = self.ctx.socket(zmq.PUSH)
        self.push.setsockopt(zmq.LINGER, 4000)
        w.vllm_options(self.push, zmq.PUSH)
        self.push.connect(spec["output"])
        self.pool = w.TrackedPool(limit=self.args["pool_mb"] << 20)
        self.conn = Link(self.name, spec["host"], sharing=not self.args["no_sharing"],
                         cache_bytes=self.args["cache_mb"] << 20, budget_bytes=self.args["registry_mb"] << 20,
                         timeout=self.args["timeout"], cache_dir=spec["cache_dir"])
        self.lib = lib_info(spec.get("expect_lib"))
        self.output({"event": "ready", "inbox": self.conn.endpoint, "lib": self.lib, "pid": os.getpid()})

    def output(self, main, tensors=(), track=False):
        """An output to the front-end: send_multipart(buffers, copy=False, track=True)."""
        main.setdefault("stage", self.name)
        return self.push.send_multipart([w.pack(main), *tensors], copy=False, track=track)

    def fetch(self, main):
        """The payload a forwarded message points to (connector get, verified)."""
        meta = main["meta"]
        got = self.conn.get(meta["from"], meta["to"], meta["key"], meta)
        if got is None:
            raise StageError(f"{self.name}: payload {meta['key']} from {meta['from']} did not arrive")
        return got[0]

    def put(self, to, key, data, buffers=()):
        """Connector put; `buffers` are pool entries whose tracker becomes this message's."""
        ok, _size, meta, tracker = self.conn.put_tracked(self.name, to, key, data)
        if not ok:
            raise StageError(f"{self.name}: put {key} to {to} failed: {self.conn.health()['errors'][-1:]}")
        for entry in buffers:
            entry[1] = tracker
        return meta

    def buffer(self, shape, dtype, tag):
        entry = self.pool.take(shape, dtype)
        w.fill(entry[0], tag)
        return entry

    def check(self, arr, tag, what):
        w.check_stamp(arr, tag, f"{self.name}: {what}")
        self.checked += 1

    def handle(self, main, frames):  # overridden
        raise NotImplementedError

    def idle(self):  # overridden by batching stages; returns a poll timeout in ms
        return 1000

    def run(self):
        import zmq

        poller = zmq.Poller()
        poller.register(self.dealer, zmq.POLLIN)
        deadline = time.monotonic() + self.args["timeout"] + 60
        while True:
            if time.monotonic() > deadline:
                self.errors.append(f"{self.name}: no shutdown before the deadline")
                break
            timeout = self.idle()
            if not dict(poller.poll(timeout)):
                continue
            frames = self.dealer.recv_multipart(copy=False)
            kind = frames[0].bytes
            main = w.unpack(w.buffer_of(frames[1]))
            if kind == UTILITY:
                if main["method"] == "peers":
                    self.conn.add_peers(main["peers"])
                elif main["method"] == "shutdown":
                    break
                continue
            try:
                self.handle(main, [w.buffer_of(f) for f in frames[2:]])
            except Exception as e:  # noqa: BLE001
                msg = f"{self.name}: {type(e).__name__}: {e}"
                self.errors.append(msg)
                self.output({"event": "error", "rid": main.get("rid"), "error": msg})
        self.finish()

    def finish(self):
        health = self.conn.health()
        lat = {k: list(v) for k, v in self.conn.latencies.items()}
        for k, v in self.lat.items():
            lat.setdefault(k, []).extend(v)
        self.output({"event": "stats", "errors": self.errors + health["errors"], "checked": self.checked,
                     "latency": lat, "edge_bytes": dict(self.conn.edge_bytes), "connector": health,
                     "pool": {"waits": self.pool.waits, "allocs": self.pool.allocs}, "lib": self.lib})
        self.pool.drain()
        self.conn.close()
        self.dealer.close(linger=0)
        self.push.close()  # LINGER 4000: the stats still reach the front-end
        self.ctx.term()


class Encoder(Engine):
    """Vision/audio encoder: raw media in (tensor frames on the DEALER), embeddings [T, D] bf16 out,
    one Shared value per media item keyed by its content hash. Its encoder cache (LRU,
    --encoder-cache-mb) computes each content once; with sharing, each output tells the front-end
    which media it holds and which it evicted, so that the front-end sends a repeated media item as
    a reference; a reference to media evicted meanwhile is answered with need_media (the front-end
    then sends the bytes)."""

    def __init__(self, spec):
        super().__init__(spec)
        from collections import OrderedDict

        self.cache = OrderedDict()  # content key -> embedding
        self.cache_total = 0
        self.cache_limit = self.args["encoder_cache_mb"] << 20
        self.evicted = []

    def embedding(self, item):
        emb = self.cache.get(item["key"])
        if emb is not None:
            self.cache.move_to_end(item["key"])
            return emb
        emb = w.synth((item["tokens"], self.hidden), "bf16", w.tag_of("emb", item["key"], self.hidden))
        self.cache[item["key"]] = emb
        self.cache_total += emb.nbytes
        while self.cache_total > self.cache_limit and len(self.cache) > 1:
            key, old = self.cache.popitem(last=False)
            self.cache_total -= old.nbytes
            self.evicted.append(key)
        return emb

    def handle(self, main, frames):
        self.lat.setdefault("frontend->encoder", []).append(time.monotonic() - main["t0"])
        rid, media = main["rid"], main["media"]
        refs = main.get("refs") or [False] * len(media)
        if len(frames) != refs.count(False) or len(main["digests"]) != len(frames):
            raise StageError(f"{rid}: {len(frames)} media frames for {refs.count(False)} media sent by value")
        missing = [it["key"] for it, ref in zip(media, refs) if ref and it["key"] not in self.cache]
        if missing:
            self.output({"event": "need_media", "rid": rid, "keys": missing})
            return
        mm, sent = [], iter(zip(frames, main["digests"]))
        for item, ref in zip(media, refs):
            if not ref:
                buf, d = next(sent)
                shape, dtype = media_raw(item)
                raw = w.array_from(buf, dtype, shape)
                if w.digest(raw) != d:
                    raise StageError(f"{rid}: media {item['key']} digest mismatch")
                self.check(raw, w.tag_of("media-raw", item["key"]), f"{rid} media {item['key']}")
            mm.append(w.Shared(item["key"], w.Tensor(self.embedding(item), "bf16")))
        to = f"prefill.{main['replica']}"
        meta = self.put(to, f"{rid}/enc", {"rid": rid, "mm": mm})
        holds = [it["key"] for it in media if it["key"] in self.cache]
        evicted = [k for k in self.evicted if k not in self.cache]
        self.evicted = []
        self.output({"event": "encoded", "rid": rid, "to": to, "meta": meta, "holds": holds, "evicted": evicted})


class Prefill(Engine):
    """Thinker prefill: embeddings in; KV cache and the first token to decode, prompt embeddings
    (the media parts as Shared, by the same content keys) and hidden states to the talker."""

    def handle(self, main, frames):
        rid, media = main["rid"], main["media"]
        got = self.fetch(main)
        if got["rid"] != rid or len(got["mm"]) != len(media):
            raise StageError(f"{rid}: encoder payload for {got['rid']} with {len(got['mm'])} items")
        for item, emb in zip(media, got["mm"]):
            if tuple(emb.shape) != (item["tokens"], self.hidden):
                raise StageError(f"{rid}: embedding shape {emb.shape} for {item['key']}")
            self.check(emb, w.tag_of("emb", item["key"], self.hidden), f"{rid} embedding {item['key']}")
        text = self.buffer((main["text_tokens"], self.hidden), "bf16", w.tag_of("text", rid))
        h = w.tag_of("prefill", rid, [w.digest(e) for e in got["mm"]], w.digest(text[0]))
        tp = main["text_tokens"] + sum(item["tokens"] for item in media)
        kv = self.buffer((tp, PRESETS[self.args["preset"]]["kv_per_token"]), "u8", w.tag_of("kv", h))
        hid = self.buffer((tp, self.hidden), "bf16", w.tag_of("hid", h))
        first = h % VOCAB
        meta_kv = self.put("decode", f"{rid}/kv", {"rid": rid, "h": h, "first": first, "tp": tp,
                                                    "kv": w.Tensor(kv[0])}, [kv])
        prompt = {"rid": rid, "h": h, "text": w.Tensor(text[0], "bf16"), "hidden": w.Tensor(hid[0], "bf16"),
                  "mm": [w.Shared(item["key"], w.Tensor(emb, "bf16")) for item, emb in zip(media, got["mm"])]}
        meta_prompt = self.put("talker", f"{rid}/prompt", prompt, [text, hid])
        self.output({"event": "prefilled", "rid": rid, "first": first, "meta_kv": meta_kv,
                     "meta_prompt": meta_prompt})


class Decode(Engine):
    """Thinker decode: KV cache in; one token per step for every active request (continuous
    batching), streamed to the talker in chunks (token ids, embeddings, hidden states)."""

    def __init__(self, spec):
        super().__init__(spec)
        self.active = {}  # rid -> state
        self.next_step = time.monotonic()

    def handle(self, main, frames):
        rid = main["rid"]
        if self.args["fault"] == "crash" and rid.endswith("2"):
            os._exit(3)  # fault injection: the decode engine dies
        got = self.fetch(main)
        h = got["h"]
        if got["rid"] != rid or got["kv"].shape[0] != got["tp"]:
            raise StageError(f"{rid}: KV payload for {got['rid']} shape {got['kv'].shape}")
        self.check(got["kv"], w.tag_of("kv", h), f"{rid} kv")
        self.active[rid] = {"h": h, "tokens": [got["first"]], "sent": 0, "max": main["max_tokens"], "seq": 0}

    def idle(self):
        if not self.active:
            return 1000
        now = time.monotonic()
        if now < self.next_step:
            return max(1, int((self.next_step - now) * 1000))
        self.step()
        self.next_step = time.monotonic() + self.args["decode_step_ms"] / 1000.0
        return 0

    def step(self):
        chunk = self.args["stream_chunk"]
        for rid in list(self.active):
            st = self.active[rid]
            try:
                if len(st["tokens"]) < st["max"]:
                    st["tokens"].append(w.tag_of("tok", st["h"], len(st["tokens"])) % VOCAB)
                fin = len(st["tokens"]) >= st["max"]
                if len(st["tokens"]) - st["sent"] >= chunk or fin:
                    ids = st["tokens"][st["sent"]:]
                    i0, n = st["sent"], len(ids)
                    emb = self.buffer((n, self.hidden), "bf16", w.tag_of("temb", st["h"], i0))
                    hid = self.buffer((n, self.hidden), "bf16", w.tag_of("thid", st["h"], i0))
                    meta = self.put("talker", f"{rid}/tok{st['seq']}", {
                        "rid": rid, "i0": i0, "ids": w.Tensor(np.array(ids, dtype=np.int64)),
                        "emb": w.Tensor(emb[0], "bf16"), "hid": w.Tensor(hid[0], "bf16"), "fin": fin}, [emb, hid])
                    self.output({"event": "tokens", "rid": rid, "seq": st["seq"], "i0": i0, "ids": ids,
                                 "fin": fin, "meta": meta})
                    st["sent"] += n
                    st["seq"] += 1
                if fin:
                    del self.active[rid]
            except Exception as e:  # noqa: BLE001
                msg = f"{self.name}: {type(e).__name__}: {e}"
                self.errors.append(msg)
                self.output({"event": "error", "rid": rid, "error": msg})
                self.active.pop(rid, None)


class Talker(Engine):
    """Talker: prompt embeddings + hidden states, then streamed token chunks in; codec codes
    (codebook size 2048) out in chunks of --chunk-frames new frames with --context-frames frames
    of left context."""

    def __init__(self, spec):
        super().__init__(spec)
        self.state = {}

    def handle(self, main, frames):
        rid = main["rid"]
        got = self.fetch(main)
        if main["kind"] == "prompt":
            h = got["h"]
            self.check(got["text"], w.tag_of("text", rid), f"{rid} text embeddings")
            self.check(got["hidden"], w.tag_of("hid", h), f"{rid} prompt hidden states")
            for item, emb in zip(main["media"], got["mm"]):
                self.check(emb, w.tag_of("emb", item["key"], self.hidden), f"{rid} prompt embedding {item['key']}")
            th = w.tag_of("talker", h, w.digest(got["hidden"]), [w.digest(e) for e in got["mm"]])
            self.state[rid] = {"h": h, "th": th, "codes": np.zeros((0, self.args["codebooks"]), np.int16),
                               "emitted": 0, "seq": 0, "next_i0": 0}
            return
        st = self.state.get(rid)
        if st is None:
            raise StageError(f"{rid}: token chunk before the prompt")
        if got["i0"] != st["next_i0"]:
            raise StageError(f"{rid}: token chunk at {got['i0']}, expected {st['next_i0']}")
        self.check(got["emb"], w.tag_of("temb", st["h"], got["i0"]), f"{rid} token embeddings")
        self.check(got["hid"], w.tag_of("thid", st["h"], got["i0"]), f"{rid} token hidden states")
        ids = [int(x) for x in got["ids"]]
        if ids != [int(x) for x in main["ids"]]:
            raise StageError(f"{rid}: token ids differ between payload and control message")
        st["next_i0"] += len(ids)
        st["th"] = w.tag_of("talk", st["th"], w.digest(got["emb"]), w.digest(got["hid"]), ids)
        n_new = len(ids) * self.args["codec_per_token"]
        new = np.random.default_rng(st["th"]).integers(0, 2048, (n_new, self.args["codebooks"]), dtype=np.int16)
        st["codes"] = np.concatenate([st["codes"], new])
        fin = got["fin"]
        cf, ctxf = self.args["chunk_frames"], self.args["context_frames"]
        while len(st["codes"]) - st["emitted"] >= cf or (fin and len(st["codes"]) > st["emitted"]):
            start, end = st["emitted"], min(st["emitted"] + cf, len(st["codes"]))
            lo = max(0, start - ctxf)
            codes = np.ascontiguousarray(st["codes"][lo:end])
            last = fin and end == len(st["codes"])
            meta = self.put("code2wav", f"{rid}/codes{st['seq']}", {
                "rid": rid, "seq": st["seq"], "ctx": start - lo, "codes": w.Tensor(codes), "fin": last})
            self.output({"event": "codes", "rid": rid, "seq": st["seq"], "fin": last, "meta": meta})
            st["emitted"] = end
            st["seq"] += 1
        if fin:
            del self.state[rid]


class Code2Wav(Engine):
    """code2wav (token2wav): codec code chunks in; float32 audio out to the front-end as tensor
    frames (copy=False, track=True, pool buffers reused once the tracker is done)."""

    def __init__(self, spec):
        super().__init__(spec)
        self.tail = {}  # rid -> (next seq, last codes frames)

    def handle(self, main, frames):
        rid = main["rid"]
        got = self.fetch(main)
        seq, prev = self.tail.get(rid, (0, None))
        if got["seq"] != seq:
            raise StageError(f"{rid}: codec chunk {got['seq']}, expected {seq}")
        codes, ctxf = got["codes"], got["ctx"]
        if codes.size and int(codes.max()) >= 2048:
            raise StageError(f"{rid}: codec code out of the codebook")
        if ctxf:
            if prev is None or len(prev) < ctxf or not np.array_equal(prev[len(prev) - ctxf:], codes[:ctxf]):
                raise StageError(f"{rid}: codec chunk {seq}: left context differs from the previous chunk")
        self.checked += 1
        n_new = len(codes) - ctxf
        cd = w.digest(codes)
        entry = self.buffer((n_new * self.args["samples_per_frame"],), "f32", w.tag_of("wav", cd, seq))
        d = w.digest(entry[0])
        tracker = self.output({"event": "audio", "rid": rid, "seq": seq, "fin": got["fin"], "codes_d": cd, "d": d,
                               "t0": time.monotonic(), "n": int(entry[0].size)}, [entry[0]], track=True)
        entry[1] = tracker
        if got["fin"]:
            self.tail.pop(rid, None)
        else:
            self.tail[rid] = (seq + 1, np.array(codes))


STAGES = {"encoder": Encoder, "prefill": Prefill, "decode": Decode, "talker": Talker, "code2wav": Code2Wav}


def stage_main(spec_json):
    spec = json.loads(spec_json)
    set_pdeathsig()
    kind = spec["name"].split(".")[0]
    engine = STAGES[kind](spec)
    engine.run()
    return 1 if engine.errors else 0


# ============================================================================================
# network namespaces (optional): every stage on its own "host"


class Netns:
    """A bridge in this namespace (HOST .1) and one namespace per stage host, joined by veth
    pairs: stage-to-stage traffic crosses the bridge as between hosts."""

    def __init__(self, count):
        self.tag = f"om{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.names, self.addrs = [], []
        self.subnet = 64 + os.getpid() % 128
        self.host = f"10.231.{self.subnet}.1"
        self.count = count

    @staticmethod
    def available():
        if os.geteuid() != 0 or not shutil.which("ip"):
            return False
        return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0

    def _ip(self, *cmd, ns=None):
        full = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *cmd]
        subprocess.run(full, check=True, capture_output=True)

    def setup(self):
        self._ip("link", "add", self.bridge, "type", "bridge")
        self._ip("addr", "add", f"{self.host}/24", "dev", self.bridge)
        self._ip("link", "set", self.bridge, "up")
        for i in range(self.count):
            ns, a, b = f"{self.tag}h{i}", f"{self.tag}a{i}", f"{self.tag}b{i}"
            addr = f"10.231.{self.subnet}.{10 + i}"
            self._ip("netns", "add", ns)
            self.names.append(ns)
            self._ip("link", "add", a, "type", "veth", "peer", "name", b)
            self._ip("link", "set", b, "netns", ns)
            self._ip("link", "set", a, "master", self.bridge)
            self._ip("link", "set", a, "up")
            self._ip("addr", "add", f"{addr}/24", "dev", b, ns=ns)
            self._ip("link", "set", b, "up", ns=ns)
            self._ip("link", "set", "lo", "up", ns=ns)
            self.addrs.append(addr)

    def teardown(self):
        for i, ns in enumerate(self.names):
            subprocess.run(["ip", "link", "del", f"{self.tag}a{i}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        self.names = []


# ============================================================================================
# front-end (orchestrator) and launcher


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(math.ceil(q / 100.0 * len(v))) - 1 if q > 0 else 0)]


def summarize(values, scale=1000.0):
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": round(pct(values, 50) * scale, 3), "p99_ms": round(pct(values, 99) * scale, 3),
            "mean_ms": round(sum(values) / len(values) * scale, 3), "max_ms": round(max(values) * scale, 3)}


def edge_name(edge):
    """'prefill.1->talker' -> 'prefill->talker' (replicas grouped)."""
    return re.sub(r"\.\d+", "", edge)


class Frontend:
    def __init__(self, args, plan):
        self.args = args
        self.plan = plan
        self.procs = []
        self.cache_dirs = set()
        self.netns = None
        self.errors = []
        self.lat = {}
        self.outputs = {}
        self.req = {}  # rid -> state
        self.stats = {}
        self.ready = {}
        self.done = None
        self.media_bytes = 0
        self.audio_bytes = 0

    # ---------------------------------------------------------------- launching

    def stage_names(self):
        return (["encoder"] + [f"prefill.{i}" for i in range(self.args.prefill_replicas)]
                + ["decode", "talker", "code2wav"])

    def spawn(self, ep_in, ep_out, fe_host):
        args = self.args
        names = self.stage_names()
        os.makedirs(args.logdir, exist_ok=True)
        for i, name in enumerate(names):
            host = self.netns.addrs[i] if self.netns else args.host
            # The connector's host cache: one per host (per stage when each is a namespace of its own)
            cache_dir = f"/dev/shm/rzmq-omni-replica-{os.getpid()}" + (f"-{name}" if self.netns else "")
            self.cache_dirs.add(cache_dir)
            spec = {"name": name, "index": i + 1, "input": ep_in, "output": ep_out, "host": host,
                    "expect_lib": args.expect_lib, "args": vars(args), "cache_dir": cache_dir}
            cmd = [sys.executable, os.path.abspath(__file__), "stage", "--spec", json.dumps(spec)]
            if self.netns:
                cmd = ["ip", "netns", "exec", self.netns.names[i]] + cmd
            log = open(os.path.join(args.logdir, f"{name}.log"), "w")
            self.procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                      preexec_fn=set_pdeathsig, cwd=HERE)))
            log.close()
        return names

    def reap(self, grace=10.0):
        """Waits for the stages to exit; kills what is left after `grace` seconds (an error only
        when the run was otherwise fine: after a failure, stages are killed as a matter of course)."""
        end = time.monotonic() + grace
        failed = bool(self.errors)
        for d in self.cache_dirs:
            shutil.rmtree(d, ignore_errors=True)
        for name, p in self.procs:
            try:
                p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                if not failed:
                    self.errors.append(f"{name} did not exit within {grace} s of shutdown; killed")
                p.kill()
                p.wait()
            if p.returncode not in (0, None, -signal.SIGKILL) and not any(name in e for e in self.errors):
                self.errors.append(f"{name} exited with status {p.returncode} (log: {self.args.logdir}/{name}.log)")

    def kill_all(self):
        for _name, p in self.procs:
            if p.poll() is None:
                p.kill()
        for _name, p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass

    # ---------------------------------------------------------------- sending

    async def send(self, stage, main, tensors=(), track=False):
        ident = self.ident[stage]
        return await self.router.send_multipart([ident, ADD, w.pack(main), *tensors], copy=False, track=track)

    def media_array(self, item):
        arr = self.media_lib.get(item["key"])
        if arr is None:
            shape, dtype = media_raw(item)
            arr = w.synth(shape, dtype, w.tag_of("media-raw", item["key"]))
            self.media_lib[item["key"]] = arr  # immutable once made: never refilled
        return arr

    async def submit(self, rq):
        async with self.sem:
            st = {"t_submit": time.monotonic(), "tokens": [], "audio": [], "samples": 0, "done": asyncio.Event(),
                  "prefill": f"prefill.{rq['replica']}"}
            self.req[rq["rid"]] = st
            await self.send_add(rq)
            await st["done"].wait()

    async def send_add(self, rq, allow_refs=True):
        """The request to the encoder: raw media as tensor frames (copy=False, track=True); with
        sharing, media the encoder holds (it said so) as references, like vLLM's multimodal
        cache sends only the hash of media the engine already has."""
        arrays, entries, refs = [], [], []
        for item in rq["media"]:
            ref = allow_refs and not self.args.no_sharing and item["key"] in self.enc_known
            refs.append(ref)
            if ref:
                self.media_refs += 1
            elif item.get("fresh"):  # used once: a pool buffer, refilled only once its tracker is done
                shape, dtype = media_raw(item)
                entry = await self.pool.take_async(shape, dtype)
                w.fill(entry[0], w.tag_of("media-raw", item["key"]))
                entries.append(entry)
                arrays.append(entry[0])
            else:  # repeated media: made once, never refilled
                arrays.append(self.media_array(item))
        self.media_bytes += sum(a.nbytes for a in arrays)
        main = {"rid": rq["rid"], "media": rq["media"], "refs": refs, "digests": [w.digest(a) for a in arrays],
                "replica": rq["replica"], "t0": time.monotonic()}
        tracker = await self.send("encoder", main, arrays, track=True)
        for entry in entries:
            entry[1] = tracker

    # ---------------------------------------------------------------- outputs

    async def on_output(self, main, frames):
        ev = main["event"]
        if ev == "ready":
            self.ready[main["stage"]] = main
            if main["lib"]["problems"]:
                self.errors.append(f"{main['stage']}: wrong library: {main['lib']['problems']}")
            return
        if ev == "stats":
            self.stats[main["stage"]] = main
            self.errors.extend(main["errors"])
            return
        if ev == "error":
            self.errors.append(main["error"])
            self.done.set()
            return
        rid = main["rid"]
        st = self.req[rid]
        now = time.monotonic()
        if ev == "need_media":  # the encoder evicted media we referenced: send the bytes
            self.media_refetches += 1
            self.enc_known.difference_update(main["keys"])
            await self.send_add(self.by_rid[rid], allow_refs=False)
        elif ev == "encoded":
            rq = self.by_rid[rid]
            if not self.args.no_sharing:
                self.enc_known.update(main["holds"])
                self.enc_known.difference_update(main["evicted"])
            media = rq["media"]
            if self.args.fault == "stamp" and rq["index"] == len(self.plan) // 2:
                media = [dict(media[0], key="0" * 16)] + media[1:]  # points prefill at the wrong content
            await self.send(main["to"], {"rid": rid, "media": media, "text_tokens": rq["text_tokens"],
                                         "meta": main["meta"]})
        elif ev == "prefilled":
            rq = self.by_rid[rid]
            st["ttft"] = now - st["t_submit"]
            st["tokens"].append(main["first"])
            await self.send("decode", {"rid": rid, "max_tokens": rq["max_tokens"], "meta": main["meta_kv"]})
            await self.send("talker", {"rid": rid, "kind": "prompt", "media": rq["media"], "meta": main["meta_prompt"]})
        elif ev == "tokens":
            ids = main["ids"]
            if main["i0"] == 0:
                if not ids or ids[0] != st["tokens"][0]:
                    self.errors.append(f"{rid}: first token differs between prefill and decode")
                ids = ids[1:]
            st["tokens"].extend(ids)
            await self.send("talker", {"rid": rid, "kind": "tokens", "ids": main["ids"], "meta": main["meta"]})
        elif ev == "codes":
            await self.send("code2wav", {"rid": rid, "meta": main["meta"]})
        elif ev == "audio":
            self.lat.setdefault("code2wav->frontend", []).append(now - main["t0"])
            if main["seq"] != len(st["audio"]):
                self.errors.append(f"{rid}: audio chunk {main['seq']}, expected {len(st['audio'])}")
            buf = frames[0] if frames else b""
            arr = w.array_from(buf, "f32", [main["n"]])
            if w.digest(arr) != main["d"]:
                self.errors.append(f"{rid}: audio chunk {main['seq']}: digest mismatch")
            try:
                w.check_stamp(arr, w.tag_of("wav", main["codes_d"], main["seq"]), f"{rid} audio {main['seq']}")
            except ValueError as e:
                self.errors.append(str(e))
            self.audio_bytes += arr.nbytes
            if not st["audio"]:
                st["ttfa"] = now - st["t_submit"]
            st["audio"].append("%016x" % main["d"])
            st["samples"] += int(arr.size)
            if main["fin"]:
                st["e2e"] = now - st["t_submit"]
                st["done"].set()
                self.finished += 1
                if self.finished == len(self.plan):
                    self.done.set()
        else:
            self.errors.append(f"unknown event {ev!r} from {main.get('stage')}")

    async def output_loop(self):
        while True:
            frames = await self.pull.recv_multipart(copy=False)
            main = w.unpack(w.buffer_of(frames[0]))
            try:
                await self.on_output(main, [w.buffer_of(f) for f in frames[1:]])
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"front-end: {type(e).__name__}: {e} on {main.get('event')}")
                self.done.set()

    async def wait_for(self, what, cond, timeout):
        """Waits for cond(); fails on the deadline or when a stage has exited without sending its
        stats (after a grace period for messages still on their way)."""
        end = time.monotonic() + timeout
        dead_since = None
        while not cond():
            now = time.monotonic()
            if now > end:
                raise TimeoutError(f"no {what} within {timeout} s")
            dead = [f"{n} (status {p.returncode})" for n, p in self.procs if p.poll() is not None and n not in self.stats]
            if dead:
                dead_since = dead_since or now
                if now - dead_since > 2.0:
                    raise RuntimeError(f"stage exited early: {', '.join(dead)} (logs in {self.args.logdir})")
            await asyncio.sleep(0.02)

    # ---------------------------------------------------------------- the run

    async def run(self):
        import zmq
        import zmq.asyncio

        args = self.args
        self.lib = lib_info(args.expect_lib)
        if self.lib["problems"]:
            self.errors.append(f"front-end: wrong library: {self.lib['problems']}")
        fe_host = args.host
        if args.netns:
            if Netns.available():
                self.netns = Netns(len(self.stage_names()))
                try:
                    self.netns.setup()
                    fe_host = self.netns.host
                except subprocess.CalledProcessError as e:
                    self.netns.teardown()
                    self.netns = None
                    print(f"[omni] --netns: setup failed ({e.stderr.decode().strip()[:200]}); running on one host",
                          file=sys.stderr)
            else:
                print("[omni] --netns needs root and a working `ip netns`; running on one host", file=sys.stderr)
        self.by_rid = {rq["rid"]: rq for rq in self.plan}
        self.media_lib = {}
        self.enc_known = set()  # media keys the encoder holds (it said so)
        self.media_refs = 0
        self.media_refetches = 0
        self.pool = w.TrackedPool(limit=args.pool_mb << 20)
        self.finished = 0
        self.done = asyncio.Event()
        self.sem = asyncio.Semaphore(args.concurrency)
        sync_ctx = zmq.Context(io_threads=2)
        ctx = zmq.asyncio.Context(sync_ctx)
        self.router = ctx.socket(zmq.ROUTER)
        w.vllm_options(self.router, zmq.ROUTER)
        self.router.bind(f"tcp://{fe_host}:0")
        ep_in = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.pull = ctx.socket(zmq.PULL)
        w.vllm_options(self.pull, zmq.PULL)
        self.pull.bind(f"tcp://{fe_host}:0")
        ep_out = self.pull.getsockopt_string(zmq.LAST_ENDPOINT)
        out_task = None
        t_start = time.monotonic()
        try:
            names = self.spawn(ep_in, ep_out, fe_host)
            self.ident = {name: (i + 1).to_bytes(2, "little") for i, name in enumerate(names)}
            hellos = set()

            async def collect_hellos():
                while len(hellos) < len(names):
                    ident, empty = await self.router.recv_multipart()
                    if empty != b"":
                        self.errors.append(f"hello from {ident!r} was {empty!r}")
                    hellos.add(ident)

            hello_task = asyncio.ensure_future(collect_hellos())
            out_task = asyncio.ensure_future(self.output_loop())
            await self.wait_for("stage startup (ready + hello)", lambda: len(self.ready) == len(names) and hello_task.done(),
                                args.startup_timeout)
            if set(hellos) != set(self.ident.values()):
                self.errors.append(f"hellos from {sorted(hellos)}, expected {sorted(self.ident.values())}")
            peers = {name: self.ready[name]["inbox"] for name in names}
            for name in names:
                await self.router.send_multipart([self.ident[name], UTILITY, w.pack({"method": "peers", "peers": peers})])
            t_start = time.monotonic()
            submits = [asyncio.ensure_future(self.submit(rq)) for rq in self.plan]
            done_task = asyncio.ensure_future(self.done.wait())
            await self.wait_for("all requests", lambda: done_task.done(), args.timeout)
            if self.finished < len(self.plan):
                self.errors.append(f"{self.finished} of {len(self.plan)} requests finished")
            for s in submits:
                s.cancel()
            t_end = time.monotonic()
            for name in names:
                await self.router.send_multipart([self.ident[name], UTILITY, w.pack({"method": "shutdown"})])
            try:
                await self.wait_for("stage stats", lambda: len(self.stats) == len(names), 30)
            except (TimeoutError, RuntimeError) as e:
                self.errors.append(str(e))
        except (TimeoutError, RuntimeError) as e:
            self.errors.append(str(e))
            t_end = time.monotonic()
        finally:
            if out_task is not None:
                out_task.cancel()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.reap, 15.0 if not self.errors else 3.0)
            self.kill_all()
            self.router.close(linger=0)
            self.pull.close(linger=0)
            sync_ctx.term()
            if self.netns:
                self.netns.teardown()
        return self.result(t_start, t_end)

    def result(self, t_start, t_end):
        args = self.args
        wall = max(1e-9, t_end - t_start)
        lat = {k: list(v) for k, v in self.lat.items()}
        edge_bytes, conn = {}, {}
        checked = 0
        for name, st in self.stats.items():
            for k, v in st["latency"].items():
                lat.setdefault(edge_name(k), []).extend(v)
            for k, v in st["edge_bytes"].items():
                edge_bytes[edge_name(k)] = edge_bytes.get(edge_name(k), 0) + v
            c = st["connector"]
            for k, v in c.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    conn[k] = conn.get(k, 0) + v
            checked += st["checked"]
        edge_bytes["frontend->encoder"] = self.media_bytes
        edge_bytes["code2wav->frontend"] = self.audio_bytes
        reqs = [self.req.get(rq["rid"], {}) for rq in self.plan]
        tokens = sum(len(r.get("tokens", [])) for r in reqs)
        samples = sum(r.get("samples", 0) for r in reqs)
        outputs = {rq["rid"]: {"tokens": self.req.get(rq["rid"], {}).get("tokens", []),
                               "audio": self.req.get(rq["rid"], {}).get("audio", []),
                               "samples": self.req.get(rq["rid"], {}).get("samples", 0)} for rq in self.plan}
        return {
            "mode": args.mode, "sharing": not args.no_sharing, "netns": bool(self.netns),
            "lib": self.lib["summary"], "lib_kind": self.lib["kind"],
            "stage_libs": {n: s["lib"]["kind"] for n, s in self.ready.items()},
            "stage_inboxes": {n: s["inbox"] for n, s in self.ready.items()},
            "config": {k: v for k, v in vars(args).items() if k not in ("out", "logdir")},
            "errors": list(dict.fromkeys(self.errors)),
            "requests": len(self.plan), "finished": self.finished, "tensors_checked": checked,
            "wall_s": round(wall, 3),
            "edges": {k: summarize(v) for k, v in sorted(lat.items())},
            "edge_bytes": dict(sorted(edge_bytes.items())),
            "ttft": summarize([r["ttft"] for r in reqs if "ttft" in r]),
            "ttfa": summarize([r["ttfa"] for r in reqs if "ttfa" in r]),
            "e2e": summarize([r["e2e"] for r in reqs if "e2e" in r]),
            "throughput": {"requests_per_s": round(self.finished / wall, 3), "tokens_per_s": round(tokens / wall, 1),
                           "audio_s_per_s": round(samples / (24000.0) / wall, 3) if samples else 0.0,
                           "stage_bytes_per_s": round(sum(v for k, v in edge_bytes.items()) / wall, 1)},
            "connector": conn,
            "frontend": {"media_refs": self.media_refs, "media_refetches": self.media_refetches,
                         "media_bytes": self.media_bytes, "audio_bytes": self.audio_bytes},
            "outputs": outputs,
        }


def run_main(args):
    args.out = os.path.abspath(args.out) if args.out else None
    args.logdir = os.path.abspath(args.logdir)
    plan = make_plan(args)
    fe = Frontend(args, plan)

    def on_signal(signum, _frame):
        fe.kill_all()
        if fe.netns:
            fe.netns.teardown()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        result = asyncio.run(fe.run())
    finally:
        fe.kill_all()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print_result(result)
    return 1 if result["errors"] or result["finished"] != result["requests"] else 0


# ============================================================================================
# reports


def fmt_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def fmt_lat(s):
    if not s or not s.get("n"):
        return "-"
    return f"p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms (n={s['n']})"


def print_result(r):
    print(f"== {r['mode']}{'' if r['sharing'] else ' (no sharing)'}{' [netns]' if r['netns'] else ''}: "
          f"{r['finished']}/{r['requests']} requests in {r['wall_s']} s; {r['lib']}")
    libs = sorted(set(r.get("stage_libs", {}).values()))
    print(f"   stages on {', '.join(libs) or '?'}; connector inboxes: "
          + ", ".join(f"{n} {ep}" for n, ep in sorted(r.get("stage_inboxes", {}).items())))
    for edge, s in r["edges"].items():
        print(f"   edge {edge:26s} {fmt_lat(s):44s} {fmt_bytes(r['edge_bytes'].get(edge, 0))}")
    print(f"   time to first token  {fmt_lat(r['ttft'])}")
    print(f"   time to first audio  {fmt_lat(r['ttfa'])}")
    print(f"   end to end           {fmt_lat(r['e2e'])}")
    t = r["throughput"]
    print(f"   throughput           {t['requests_per_s']} req/s, {t['tokens_per_s']} tokens/s, "
          f"{t['audio_s_per_s']} s audio/s, {fmt_bytes(int(t['stage_bytes_per_s']))}/s over all edges")
    c = r["connector"]
    print(f"   connector            {fmt_bytes(c.get('bytes_put', 0))} put, {fmt_bytes(c.get('bytes_served', 0))} sent "
          f"({c.get('requests_served', 0)} gets); shared tensors {c.get('shared_puts', 0)} put "
          f"({fmt_bytes(c.get('shared_bytes_put', 0))}); host cache fills {c.get('host_cache_fills', 0)}, "
          f"hits {c.get('host_cache_hits', 0)}; held at the end {fmt_bytes(c.get('bytes_held', 0))}")
    f = r.get("frontend", {})
    print(f"   front-end media      {fmt_bytes(f.get('media_bytes', 0))} sent, {f.get('media_refs', 0)} items as "
          f"references, {f.get('media_refetches', 0)} re-sent after the encoder evicted them")
    print(f"   verified             {r['tensors_checked']} tensors/chunks checked; "
          f"{'no errors' if not r['errors'] else str(len(r['errors'])) + ' ERRORS'}")
    for e in r["errors"][:10]:
        print(f"   ERROR {e}")


def report_main(paths, logs):
    runs = []
    for p in paths:
        try:
            with open(p) as f:
                runs.append((p, json.load(f)))
        except (OSError, ValueError) as e:
            print(f"FAIL {p}: no result ({e})")
            runs.append((p, None))
    ok = True
    print()
    print(f"{'run':28s} {'reqs':>6s} {'wall s':>7s} {'TTFT p50/p99 ms':>18s} {'TTFA p50/p99 ms':>18s} "
          f"{'req/s':>7s} {'stage bytes':>12s}  result")
    for p, r in runs:
        if r is None:
            ok = False
            continue
        name = r["mode"] + ("" if r["sharing"] else " no-sharing")
        good = not r["errors"] and r["finished"] == r["requests"]
        ok &= good
        total = sum(r["edge_bytes"].values())

        def pp(s):
            return f"{s['p50_ms']:.1f}/{s['p99_ms']:.1f}" if s.get("n") else "-"

        print(f"{name:28s} {r['finished']:>3d}/{r['requests']:<3d}{r['wall_s']:>7.2f} {pp(r['ttft']):>18s} "
              f"{pp(r['ttfa']):>18s} {r['throughput']['requests_per_s']:>7.2f} {fmt_bytes(total):>12s}  "
              f"{'ok' if good else 'FAILED: ' + '; '.join(r['errors'][:3])}")
    edges = sorted({e for _p, r in runs if r for e in r["edges"]})
    if edges:
        print()
        print("per-edge transfer latency, p50 / p99 ms (put() to arrival at the receiver):")
        print(f"{'edge':26s}" + "".join(f" {(r['mode'] + ('' if r['sharing'] else '/nosh'))[:20]:>20s}" for _p, r in runs if r))
        for e in edges:
            cells = []
            for _p, r in runs:
                if not r:
                    continue
                s = r["edges"].get(e, {})
                cells.append(f"{s['p50_ms']:.2f}/{s['p99_ms']:.2f}" if s.get("n") else "-")
            print(f"{e:26s}" + "".join(f" {c:>20s}" for c in cells))
    sh = [r for _p, r in runs if r and r["sharing"]]
    nosh = [r for _p, r in runs if r and not r["sharing"]]
    if sh and nosh:
        b = nosh[0]
        a = next((r for r in sh if r["mode"] == b["mode"]), sh[0])  # the same mode, with sharing
        print()
        print(f"sharing compared on {a['mode']} (with) and {b['mode']} (without):")
        print("bytes moved per edge (payloads and fetches; front-end edges are the request/output messages), "
              "sharing vs --no-sharing:")
        for e in sorted(set(a["edge_bytes"]) | set(b["edge_bytes"])):
            x, y = a["edge_bytes"].get(e, 0), b["edge_bytes"].get(e, 0)
            print(f"   {e:26s} {fmt_bytes(x):>11s} vs {fmt_bytes(y):>11s}"
                  + (f"  ({100.0 * (1 - x / y):.0f}% less)" if y and x < y else ""))
        xa, yb = sum(a["edge_bytes"].values()), sum(b["edge_bytes"].values())
        print(f"   {'total':26s} {fmt_bytes(xa):>11s} vs {fmt_bytes(yb):>11s}"
              + (f"  ({100.0 * (1 - xa / yb):.0f}% less)" if yb and xa < yb else ""))
        print(f"   front-end -> encoder: {a.get('frontend', {}).get('media_refs', 0)} media items sent as references, "
              f"{a.get('frontend', {}).get('media_refetches', 0)} requests re-sent with bytes after encoder evictions")
        print(f"   connector: {a['connector'].get('host_cache_hits', 0)} shared tensors read from the host cache "
              f"instead of fetched, {a['connector'].get('host_cache_fills', 0)} fetched once per host")
    # transports reported by rzmq (RZMQ_RDMA_LOG=1: one line per connection, and one with its
    # counters when an RDMA connection ends) in each run's logs
    if logs:
        print()
        for mode, logdir in logs:
            up = tcp = refused = zc = 0
            for fn in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
                with open(os.path.join(logdir, fn), errors="replace") as f:
                    for line in f:
                        if not line.startswith("rzmq["):
                            continue
                        if ": transport rdma/" in line:
                            up += 1
                        elif ": transport tcp" in line:
                            tcp += 1
                        elif "refused:" in line:
                            refused += 1
                        m = re.search(r"\((\d+) zero-copy reads\)", line)
                        if m:
                            zc += int(m.group(1))
            if up or tcp or refused:
                print(f"transport reported by rzmq in {mode}: {up} connection ends on RDMA, {tcp} on TCP, "
                      f"{refused} refused; {zc} frames received zero-copy (RDMA READ)")
                if mode.startswith("rzmq-rdma") and (tcp or refused or not up):
                    ok = False
                    print(f"   {mode}: expected every connection on RDMA")
            else:
                print(f"transport reported by rzmq in {mode}: none logged (tcp)")
    # outputs across runs
    good = [(p, r) for p, r in runs if r]
    print()
    if len(good) >= 2:
        ref_p, ref = good[0]
        mismatched = []
        for p, r in good[1:]:
            if r["outputs"] != ref["outputs"]:
                diff = [rid for rid in ref["outputs"] if r["outputs"].get(rid) != ref["outputs"][rid]]
                mismatched.append(f"{r['mode']}{'' if r['sharing'] else ' no-sharing'} ({len(diff)} requests differ, "
                                  f"e.g. {diff[:3]})")
        empty = [r["mode"] for _p, r in good if not all(o["audio"] and o["tokens"] for o in r["outputs"].values())]
        if mismatched or empty:
            ok = False
            print(f"OUTPUTS DIFFER from {ref['mode']}: {'; '.join(mismatched)}"
                  + (f"; runs with empty outputs: {empty}" if empty else ""))
        else:
            n = len(ref["outputs"])
            print(f"outputs: identical across all {len(good)} runs ({n} requests, "
                  f"{sum(len(o['tokens']) for o in ref['outputs'].values())} tokens, "
                  f"{sum(len(o['audio']) for o in ref['outputs'].values())} audio chunks)")
    print("RESULT: " + ("PASS" if ok and len(good) == len(runs) else "FAIL"))
    return 0 if ok and len(good) == len(runs) else 1


# ============================================================================================


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the pipeline once")
    r.add_argument("--mode", default="run", help="label of this run in reports")
    r.add_argument("--expect-lib", choices=["rzmq", "stock"], help="fail unless this libzmq serves pyzmq")
    r.add_argument("--preset", choices=sorted(PRESETS), default="7b", help="thinker hidden size / KV size")
    r.add_argument("--requests", type=int, default=32)
    r.add_argument("--concurrency", type=int, default=8)
    r.add_argument("--mix", default="image=2,video=1,audio=1", help="media kinds and weights")
    r.add_argument("--media-per-request", type=int, default=2, help="1..N media items per request")
    r.add_argument("--library", type=int, default=8, help="distinct media items that requests repeat")
    r.add_argument("--fresh", type=float, default=0.25, help="probability a media item is new (not repeated)")
    r.add_argument("--image", default="1280x720", help="WxH")
    r.add_argument("--video", default="16x640x360", help="FRAMESxWxH")
    r.add_argument("--audio-seconds", type=float, default=30.0)
    r.add_argument("--text-tokens", type=int, default=64)
    r.add_argument("--max-tokens", type=int, default=64)
    r.add_argument("--stream-chunk", type=int, default=4, help="decode tokens per chunk to the talker")
    r.add_argument("--codec-per-token", type=int, default=2, help="codec frames per thinker token")
    r.add_argument("--codebooks", type=int, default=1)
    r.add_argument("--chunk-frames", type=int, default=25)
    r.add_argument("--context-frames", type=int, default=25)
    r.add_argument("--samples-per-frame", type=int, default=480, help="24 kHz audio per codec frame")
    r.add_argument("--prefill-replicas", type=int, default=2)
    r.add_argument("--decode-step-ms", type=float, default=0.0, help="stand-in for a decode step")
    r.add_argument("--no-sharing", action="store_true", help="always move the bytes (no embedding sharing)")
    r.add_argument("--cache-mb", type=int, default=256, help="receiver cache bound (embedding sharing)")
    r.add_argument("--registry-mb", type=int, default=1024, help="sender registry bound")
    r.add_argument("--evict-notify", action="store_true",
                   help="receivers tell senders what they evict (else a reference to an evicted key costs a fetch)")
    r.add_argument("--encoder-cache-mb", type=int, default=1024)
    r.add_argument("--pool-mb", type=int, default=512, help="send buffer pool bound per process")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--host", default="127.0.0.1")
    r.add_argument("--netns", action="store_true", help="each stage in its own network namespace (root only)")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds for all requests")
    r.add_argument("--startup-timeout", type=float, default=60.0)
    r.add_argument("--fault", choices=["stamp", "crash"],
                   help="fault injection for testing the checks: 'stamp' forwards one request with a wrong media "
                        "key (prefill's seed check must fail), 'crash' kills the decode engine")
    r.add_argument("--out", help="write the result as JSON")
    r.add_argument("--logdir", default=os.path.join(HERE, "build", "logs"))
    s = sub.add_parser("stage", help="one stage engine (internal)")
    s.add_argument("--spec", required=True)
    p = sub.add_parser("report", help="summarize runs and compare their outputs")
    p.add_argument("results", nargs="+")
    p.add_argument("--logs", action="append", default=[], help="MODE=LOGDIR to scan for rzmq transport lines")
    return ap


def main():
    args = build_parser().parse_args()
    if args.cmd == "stage":
        return stage_main(args.spec)
    if args.cmd == "report":
        return report_main(args.results, [tuple(x.split("=", 1)) for x in args.logs])
    return run_main(args)


if __name__ == "__main__":
    sys.exit(main())

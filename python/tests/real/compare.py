"""Compares real-pipeline runs (pipeline.py OUT dirs) with a reference run and summarises them.

    compare.py REF_DIR RUN_DIR [RUN_DIR...] [--json OUT.json] [--transports LOG...]

For each run: whether every request's thinker token ids and audio bytes equal the reference's
(audio: wherever code2wav's noise began where the reference's did; noise_calls below), and
whether every stage payload (each tensor's dtype, shape and sha256, by request and edge) equals
the reference's; which library served pyzmq in each vllm-omni process; per edge: the
payloads, bytes, latency from put() called to get() returned, put and get times; time to first
token and first audio; CPU seconds per request. Exit status 1 when any run differs.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys


def load_run(d: str) -> dict:
    try:
        with open(os.path.join(d, "results.json")) as f:
            res = json.load(f)
    except (OSError, ValueError):  # a run that was killed or failed before writing its results
        res = {}
    res.setdefault("requests", [])
    res.setdefault("config", {})
    res.setdefault("generate_s", float("nan"))
    res.setdefault("cpu_s_per_request", float("nan"))
    traces = []
    for p in glob.glob(os.path.join(d, "trace", "trace-*.jsonl")):
        with open(p) as f:
            traces += [json.loads(line) for line in f if line.strip()]
    res["traces"] = traces
    res["dir"] = d
    return res


def request_index(key: str) -> str:
    """vllm-omni keys start with the orchestrator's request id, `<index>_<uuid>`."""
    m = re.match(r"^(\d+)_", key)
    return m.group(1) if m else key


def chunk_of(key: str) -> str:
    m = re.search(r"_(\d+)$", key)
    return m.group(1) if m else ""


def payload_digests(run: dict) -> dict:
    """{(edge, request index, chunk): [tensor digests]} from the producers' puts."""
    out = {}
    for t in run["traces"]:
        if t.get("op") == "put" and t.get("ok"):
            out[(t["edge"], request_index(t["key"]), chunk_of(t["key"]))] = [tuple(x[1:]) for x in t["tensors"]]
    return out


def payload_mismatches(run: dict) -> list[str]:
    """Gets whose tensors differ from what the producer put (a buffer changed after put(), or a
    transfer that damaged it)."""
    puts = {(t["edge"], t["key"]): t["tensors"] for t in run["traces"] if t.get("op") == "put" and t.get("ok")}
    out = []
    for t in run["traces"]:
        if t.get("op") == "get" and t.get("ok") and (t["edge"], t["key"]) in puts:
            if [x[1:] for x in t["tensors"]] != [x[1:] for x in puts[(t["edge"], t["key"])]]:
                out.append(f"get {t['key']} on {t['edge']}: tensors differ from the put")
    return out


def edge_stats(run: dict) -> dict:
    puts = {}
    for t in run["traces"]:
        if t.get("op") == "put" and t.get("ok"):
            puts[(t["edge"], t["key"])] = t
    per_edge = collections.defaultdict(lambda: {"n": 0, "bytes": [], "latency_ms": [], "put_ms": [], "get_ms": [],
                                                "put_cpu_ms": [], "get_cpu_ms": [], "failed_gets": 0,
                                                "transport_ms": [], "wait_ms": [], "via": collections.Counter(),
                                                "send_ms": [], "wire_ms": [],
                                                "by_chunk": collections.defaultdict(list)})
    misses = {}
    for t in run["traces"]:
        if t.get("op") == "misses":  # running totals per process: the last one counts
            misses[(t["pid"], t["edge"])] = t["polls"]
        if t.get("op") != "get":
            continue
        e = per_edge[t["edge"]]
        if not t.get("ok"):
            e["failed_gets"] += 1
            continue
        p = puts.get((t["edge"], t["key"]))
        e["n"] += 1
        e["bytes"].append(t["bytes"])
        e["get_ms"].append((t["t1"] - t["t0"]) * 1e3)
        e["get_cpu_ms"].append(t["cpu"] * 1e3)
        e["via"][t.get("via") or "poll"] += 1
        if p is not None:
            e["latency_ms"].append((t["t1"] - p["t0"]) * 1e3)
            e["by_chunk"][chunk_of(t["key"])].append((t["t1"] - p["t0"]) * 1e3)
            e["put_ms"].append((p["t1"] - p["t0"]) * 1e3)
            e["put_cpu_ms"].append(p["cpu"] * 1e3)
            # Where the time between put() returning and get() being called went: moving the
            # payload (a push's arrival in the consumer's inbox; a pull moves it inside get(), and
            # a shared-memory put has written it before it returns), then waiting for vllm-omni's
            # receive loop to ask for it.
            ready = t["arrived"] if t.get("via") == "push" and t.get("arrived") else p["t1"]
            e["transport_ms"].append(max(0.0, ready - p["t1"]) * 1e3)
            if t.get("via") == "push" and t.get("sent") and t.get("arrived"):
                # a push's transport, split: the producer's service thread taking the key and
                # sending it, then the transfer and the consumer's receiving thread taking it
                e["send_ms"].append(max(0.0, t["sent"] - p["t1"]) * 1e3)
                e["wire_ms"].append(max(0.0, t["arrived"] - t["sent"]) * 1e3)
            e["wait_ms"].append(max(0.0, t["t0"] - ready) * 1e3)
    for (pid, edge), polls in misses.items():
        per_edge[edge]["failed_gets"] += polls
    return dict(per_edge)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summary(run: dict) -> dict:
    reqs = run["requests"]
    edges = {}
    for edge, e in sorted(edge_stats(run).items()):
        edges[edge] = {
            "payloads": e["n"], "failed_gets": e["failed_gets"],
            "bytes_median": med(e["bytes"]), "bytes_total": sum(e["bytes"]),
            "latency_ms_median": med(e["latency_ms"]), "latency_ms_max": max(e["latency_ms"], default=float("nan")),
            "put_ms_median": med(e["put_ms"]), "get_ms_median": med(e["get_ms"]),
            "put_cpu_ms_median": med(e["put_cpu_ms"]), "get_cpu_ms_median": med(e["get_cpu_ms"]),
            "transport_ms_median": med(e["transport_ms"]), "wait_ms_median": med(e["wait_ms"]),
            "send_ms_median": med(e["send_ms"]), "wire_ms_median": med(e["wire_ms"]),
            "via": dict(e["via"]),
            "latency_ms_by_chunk": {c: med(v) for c, v in sorted(e["by_chunk"].items(), key=lambda x: int(x[0] or 0))},
        }
    procs = [t for t in run["traces"] if t.get("op") == "process"]
    # the titles vLLM sets (VLLM::Worker, ...) come after the plugin's first line: take them from
    # the process list the driver read once the stages were up
    titles = {p["pid"]: p.get("title") for p in run.get("processes", [])}
    for p in procs:
        p["title"] = titles.get(p["pid"]) or p.get("title")
    conns = sorted({t["name"] for t in run["traces"] if t.get("op") == "connector"})
    return {
        "dir": run["dir"],
        "connector": conns,
        "config": run["config"],
        "finished": sum(1 for r in reqs if r.get("thinker_token_ids") and "t_first_audio" in r),
        "requests": len(reqs),
        "ttft_s_median": med([r["t_first_token"] for r in reqs if "t_first_token" in r]),
        "ttfa_s_median": med([r["t_first_audio"] for r in reqs if "t_first_audio" in r]),
        "generate_s": run["generate_s"],
        "cpu_s_per_request": run["cpu_s_per_request"],
        "edges": edges,
        "libraries": sorted({(p.get("library") or "?") for p in procs}),
        "processes": [{"pid": p["pid"], "title": p.get("title"), "library": p.get("library")} for p in procs],
    }


# Qwen3-Omni streaming (async_chunk) on vllm-omni 0.30, CPU: what stock itself does not repeat
# run to run, so no other run can be held to it. The talker's codec codes (the talker -> code2wav
# chunks) and code2wav's audio depend on timing in stock: the talker computes in bfloat16 (its
# embeddings are cast to bfloat16 in vllm-omni's qwen3_omni.py whatever the stage's dtype; float32
# stages fail there), its prompt grows with the thinker's chunks as they arrive (so how its prefill
# is split depends on when they came), and its code predictor samples 15 of every 16 codes from the
# process's global RNG (no per-request generator is passed). docs/BENCHMARKS.md has the runs.
# Held to stock exactly: every thinker token id and every thinker -> talker chunk, and the audio
# outputs' presence and kind; within the run: every talker -> code2wav chunk put was taken, and each
# chunk a consumer got is byte for byte the chunk its producer put (payload_mismatches).
STREAM_TIMING_DEPENDENT_EDGES = {"1->2"}


def streaming_qwen3(run: dict) -> bool:
    cfg = run["config"]
    return bool(cfg.get("async_chunk")) and cfg.get("model_type") == "qwen3_omni_moe"


# Qwen2.5-Omni's code2wav draws its starting noise from the process-global torch RNG, so a
# request's audio follows the order requests reached code2wav (timing), stock included. The
# tests' CPU worker records each code2wav call (rzmq_omni_cpu.trace.watch_noise): its codes, its
# audio and the RNG state it started from. A request's audio is held to stock's exactly unless
# its codes are stock's and that state is not, which the run reports with both orders.
def noise_calls(run: dict) -> dict:
    """{audio sha256: the code2wav call that made it}."""
    return {t["audio"]: t for t in run["traces"] if t.get("op") == "noise" and t.get("audio")}


def noise_explains(ref: dict, run: dict, v: dict, got: dict) -> bool:
    """Whether audio `got` differs from stock's `v` only as code2wav's noise did: the same codes,
    the same shape and dtype, a different state of the global RNG when the call began."""
    a, b = noise_calls(ref).get(v["sha256"]), noise_calls(run).get(got["sha256"])
    return (a is not None and b is not None and a["codes"] == b["codes"] and a["rng"] != b["rng"]
            and (got["shape"], got["dtype"]) == (v["shape"], v["dtype"]))


def noise_explained_outputs(ref: dict, run: dict) -> list[tuple]:
    """(request, output key) of each output that differs from stock's only as code2wav's noise
    did (noise_explains): reported by timing_dependent_differences, not failed by compare_outputs."""
    rr = {r["request"]: r for r in ref["requests"]}
    return [(r["request"], k)
            for r in run["requests"] for k, v in ((rr.get(r["request"]) or {}).get("outputs") or {}).items()
            if (got := (r.get("outputs") or {}).get(k)) is not None and got["sha256"] != v["sha256"]
            and noise_explains(ref, run, v, got)]


def code2wav_order(run: dict) -> list[str]:
    """The requests in the order code2wav made their audio (its warm-up call left out)."""
    by_sha = {o["sha256"]: str(r["request"]) for r in run["requests"] for o in (r.get("outputs") or {}).values()}
    calls = sorted((t for t in run["traces"] if t.get("op") == "noise"), key=lambda t: t["t0"])
    return [by_sha[t["audio"]] for t in calls if t.get("audio") in by_sha]


def compare_outputs(ref: dict, run: dict) -> list[str]:
    """Differences between two runs' outputs and stage payloads (empty: identical; for Qwen3-Omni
    streaming, in what stock repeats: STREAM_TIMING_DEPENDENT_EDGES)."""
    diffs = []
    streaming = streaming_qwen3(ref) and streaming_qwen3(run)
    noisy = set(noise_explained_outputs(ref, run))
    rr = {r["request"]: r for r in ref["requests"]}
    for r in run["requests"]:
        base = rr.get(r["request"])
        if base is None:
            diffs.append(f"request {r['request']}: not in the reference")
            continue
        if r.get("thinker_token_ids") != base.get("thinker_token_ids"):
            diffs.append(f"request {r['request']}: thinker token ids differ")
        for k, v in (base.get("outputs") or {}).items():
            got = (r.get("outputs") or {}).get(k)
            if got is None:
                diffs.append(f"request {r['request']}: output {k} missing")
            elif streaming:  # the audio follows the talker's codes (above): its kind, not its samples
                if got["dtype"] != v["dtype"]:
                    diffs.append(f"request {r['request']}: output {k} is {got['dtype']}, stock's {v['dtype']}")
            elif (got["sha256"], got["shape"], got["dtype"]) != (v["sha256"], v["shape"], v["dtype"]) \
                    and (r["request"], k) not in noisy:  # those: timing_dependent_differences
                diffs.append(f"request {r['request']}: output {k} differs")
    if len(run["requests"]) != len(ref["requests"]):
        diffs.append(f"{len(run['requests'])} requests answered, the reference {len(ref['requests'])}")
    diffs += payload_mismatches(run)
    if run["config"].get("async_chunk") and run["config"].get("connector") == "rzmq":
        # Streaming on rzmq: each chunk is pushed to the consumer that subscribed to its edge
        # (docs/OMNI_CONNECTOR.md, "Push"); a chunk fetched by a request instead is a difference.
        for edge, e in sorted(edge_stats(run).items()):
            asked = {via: n for via, n in e["via"].items() if via != "push"}
            if asked:
                diffs.append(f"edge {edge}: chunks not pushed ({asked})")
    a, b = payload_digests(ref), payload_digests(run)
    for k in sorted(set(a) | set(b)):
        if streaming and k[0] in STREAM_TIMING_DEPENDENT_EDGES:
            continue  # counted per request below
        if a.get(k) != b.get(k):
            diffs.append(f"stage payload {k}: {'missing' if k not in b else 'extra' if k not in a else 'differs'}")
    if streaming:  # every chunk put on those edges was taken by its consumer
        puts = {(t["edge"], t["key"]) for t in run["traces"] if t.get("op") == "put" and t.get("ok")}
        gets = {(t["edge"], t["key"]) for t in run["traces"] if t.get("op") == "get" and t.get("ok")}
        lost = sorted(k for k in puts - gets if k[0] in STREAM_TIMING_DEPENDENT_EDGES)
        if lost:
            diffs.append(f"{len(lost)} chunks put and never taken, e.g. {lost[:3]}")
    return diffs


def timing_dependent_differences(ref: dict, run: dict) -> list[str]:
    """What differs from stock where stock itself does not repeat (reported, not a failure)."""
    if not (streaming_qwen3(ref) and streaming_qwen3(run)):
        out = [f"request {req}: output {k} differs, as code2wav's noise did"
               for req, k in noise_explained_outputs(ref, run)]
        if out:
            out.append(f"code2wav took the requests in the order {', '.join(code2wav_order(run))}, "
                       f"stock {', '.join(code2wav_order(ref))}")
        return out
    a, b = payload_digests(ref), payload_digests(run)
    out = [f"stage payload {k} {'differs' if k in a and k in b else 'only in stock' if k in a else 'not in stock'}"
           for k in sorted(set(a) | set(b)) if k[0] in STREAM_TIMING_DEPENDENT_EDGES and a.get(k) != b.get(k)]
    rr = {r["request"]: r for r in ref["requests"]}
    for r in run["requests"]:
        for k, v in ((rr.get(r["request"]) or {}).get("outputs") or {}).items():
            got = (r.get("outputs") or {}).get(k)
            if got is not None and got["sha256"] != v["sha256"]:
                out.append(f"request {r['request']}: output {k} differs")
    return out


LOG_LINE = re.compile(r"rzmq\[(\d+)\]: (connect|accept) (\S+): (.*)$")
CLOSED = re.compile(r"closed \(.*\): tx (\d+) msgs (\d+) B \((\d+) zero-copy\), rx (\d+) msgs (\d+) B "
                    r"\((\d+) zero-copy reads\), (\d+) copies")


def transports(logs: list[str]) -> dict:
    """rzmq's per-connection lines (RZMQ_RDMA_LOG=1) in the logs: the transport each connection
    chose, by side and endpoint, and the RDMA counters of connections that ended."""
    chosen = collections.Counter()
    ended = {"connections": 0, "tx_msgs": 0, "tx_zero_copy": 0, "rx_msgs": 0, "rx_zero_copy_reads": 0, "copies": 0}
    for path in logs:
        with open(path, errors="replace") as f:
            for line in f:
                m = LOG_LINE.search(line.rstrip())
                if not m:
                    continue
                what = m.group(4)
                c = CLOSED.search(what)
                if c:
                    ended["connections"] += 1
                    ended["tx_msgs"] += int(c.group(1))
                    ended["tx_zero_copy"] += int(c.group(3))
                    ended["rx_msgs"] += int(c.group(4))
                    ended["rx_zero_copy_reads"] += int(c.group(6))
                    ended["copies"] += int(c.group(7))
                elif what.startswith("transport") or what.startswith("refused"):
                    chosen[f"{m.group(2)} {what.split(' (')[0]}"] += 1
    return {"chosen": dict(chosen), "rdma_ended": ended}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--logs", action="store_true", help="also read each run's OUT/*.log for rzmq's transport lines")
    args = ap.parse_args()
    ref = load_run(args.ref)
    out = {"reference": summary(ref), "runs": []}
    bad = False
    for d in args.runs:
        run = load_run(d)
        s = summary(run)
        s["differences"] = compare_outputs(ref, run)
        s["timing_dependent"] = timing_dependent_differences(ref, run)
        s["identical"] = not s["differences"] and s["finished"] == s["requests"]
        if args.logs:
            s["transports"] = transports(glob.glob(os.path.join(d, "*.log")))
        bad |= not s["identical"]
        out["runs"].append(s)
    for s in [out["reference"], *out["runs"]]:
        print(f"== {s['dir']}: {','.join(s['connector'])} {s['finished']}/{s['requests']} finished, "
              f"TTFT {s['ttft_s_median']:.2f} s, first audio {s['ttfa_s_median']:.2f} s, "
              f"CPU {s['cpu_s_per_request']:.1f} s/request")
        print("   libzmq serving pyzmq, per process:")
        for proc in s["processes"]:
            lib = proc.get("library") or "?"
            who = "rzmq" if "/rzmq/_lib/" in lib else "pyzmq's bundled libzmq" if "pyzmq.libs" in lib else lib
            print(f"     pid {proc['pid']} {str(proc.get('title')).strip()[:60]}: {who} ({lib.rsplit('/', 1)[-1]})")
        for edge, e in s["edges"].items():
            print(f"   edge {edge}: {e['payloads']} payloads, median {e['bytes_median']:.0f} B, "
                  f"latency median {e['latency_ms_median']:.2f} ms (max {e['latency_ms_max']:.2f}), "
                  f"put {e['put_ms_median']:.2f} ms, transport {e['transport_ms_median']:.2f} ms"
                  + (f" (sent after {e['send_ms_median']:.2f}, then {e['wire_ms_median']:.2f} to the inbox)"
                     if e["send_ms_median"] == e["send_ms_median"] else "") + ", waiting for "  # not NaN
                  f"vllm-omni {e['wait_ms_median']:.2f} ms, get {e['get_ms_median']:.2f} ms, empty polls "
                  f"{e['failed_gets']}, served by {e['via']}")
        if s.get("transports"):
            print(f"   connections: {s['transports']['chosen']}; RDMA counters at close: {s['transports']['rdma_ended']}")
        if "identical" in s:
            if not s["identical"]:
                print("   DIFFERS: " + "; ".join(s["differences"][:10]))
            elif streaming_qwen3(ref):
                print("   streaming: thinker tokens and thinker -> talker chunks identical to the reference, every "
                      "chunk taken as put; talker -> code2wav chunks and audio (stock itself varies there): "
                      + ("; ".join(s["timing_dependent"][:6]) or "identical too"))
            elif s["timing_dependent"]:
                print("   thinker tokens and stage payloads identical to the reference; audio where code2wav's "
                      "noise (the process-global RNG) began where stock's did; elsewhere "
                      + "; ".join(s["timing_dependent"][:6]))
            else:
                print("   outputs and stage payloads identical to the reference")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Checks and figures of a disagg.py run (tests/vllm): outputs against base, and the schedulers' proof.

    verify.py OUT CONFIG [CONFIG ...]

For every configuration after `base`:
- outputs: each request's greedy token ids and logprobs identical to base's;
- from vLLM's schedulers (the rzmq_vllm_trace plugin): the prefill instance (EC consumer) ran
  no encoder input itself, and every picture's embedding came through the EC connector; the
  decode instance (KV consumer) computed only the last prompt token of each request, every
  other one came through the KV connector, and ran no encoder input.
Where a PD instance ran (E -> PD: an EC consumer that decodes itself), its answers to the
pictures' requests must equal base's, it must run no encoder input, and each embedding must be
brought (fetched, or written as pushed) once per host: PD beside P (one host cache) and P bring
each once between them, PD on another host brings each once itself.
rzmq's configurations must meet all of that; vLLM's own connectors (epd-files) are reported.
`kill` must end each request whose producer died mid-transfer (the trace's fault record) with
an error, then serve the next request, the consumer holding no request and no KV block
(/metrics), and leave nothing in /dev/shm. Prints the figures table (TTFT, transfer latency,
bytes, copies, CPU time) and writes OUT/figures.json.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

RZMQ = {"epd", "epd-netns", "kill", "pd"}
KV_ONLY = {"pd", "pd-mooncake", "pd-nixl"}  # P encodes its pictures itself: only the KV hand-off is checked


def load(out: str, config: str) -> dict:
    with open(os.path.join(out, config, "result.json")) as f:
        rec = json.load(f)
    traces = {}
    for inst_dir in glob.glob(os.path.join(out, config, "trace", "*")):
        recs = []
        for path in glob.glob(os.path.join(inst_dir, "*.jsonl")):
            with open(path) as f:
                recs += [json.loads(line) for line in f if line.strip()]
        traces[os.path.basename(inst_dir)] = recs
    rec["traces"] = traces
    return rec


# How far a logprob may be from base's with the same greedy tokens. The decode instance computes
# the last prompt token alone, base computes it inside the whole prompt's pass: other matmul
# shapes. In float32 that measured 0.0 here (and vLLM's own prefix-cache resume differs in the
# 7th digit); bfloat16 keeps about 3 digits, so logprobs near -10 move in the 2nd decimal.
LOGPROB_TOLERANCE = {"float32": 1e-3, "bfloat16": 0.1}


def logprob_gap(a: dict, b: dict) -> float:
    return max((abs(x - y) for x, y in zip(a.get("logprobs", []), b.get("logprobs", []))), default=0.0)


def same_answer(a: dict, b: dict, dtype: str = "float32") -> bool:
    """Greedy token ids identical, logprobs within LOGPROB_TOLERANCE, no error."""
    return (not a.get("error") and not b.get("error") and a["token_ids"] == b["token_ids"] and len(a["token_ids"]) > 0
            and len(a["logprobs"]) == len(b["logprobs"]) and logprob_gap(a, b) <= LOGPROB_TOLERANCE[dtype])


def proof(rec: dict) -> dict:
    """What the schedulers and connectors of one EPD configuration did (up to `phase_end`)."""
    until = rec.get("phase_end") or float("inf")
    t = {k: [r for r in v if r.get("t", r.get("t0", 0)) <= until] for k, v in rec["traces"].items()}
    steps = {k: [r for r in v if r["op"] == "step"] for k, v in t.items()}
    ec = {k: [r for r in v if r["op"] == "ec"] for k, v in t.items()}
    kv = {k: [r for r in v if r["op"] == "kv"] for k, v in t.items()}
    images = [r for r in rec["results"] if r["name"].startswith("image")]
    saved = {r["item"] for r in ec.get("E", []) if r["call"] == "save_caches"}
    loaded = [i for r in ec.get("P", []) if r["call"] == "start_load_caches" for i in r["items"]]
    p_encoder = sum(len(v) for s in steps.get("P", []) for v in s["encoder"].values())
    d_encoder = sum(len(v) for s in steps.get("D", []) for v in s["encoder"].values())
    d_new = [n for s in steps.get("D", []) for n in s["new"]]
    d_self = [n["prompt"] - n["computed"] for n in d_new]
    return {
        "images": len(images),
        "embeddings_saved_by_E": len(saved),
        "embeddings_loaded_by_P": len(loaded),
        "distinct_loaded_by_P": len(set(loaded)),
        "P_encoder_inputs_computed": p_encoder,
        "D_encoder_inputs_computed": d_encoder,
        "D_requests": len(d_new),
        "D_prompt_tokens_computed_itself": d_self,
        "D_prompt_tokens": [n["prompt"] for n in d_new],
        "kv_layers_loaded": sum(1 for r in kv.get("D", []) if r["call"] == "wait_for_layer_load"),
    }


def fetched(recs: list[dict], until: float) -> int | None:
    """How many embeddings an EC consumer's scheduler brought into its host cache (its stats):
    fetched, or written as they were pushed with their announcements."""
    got = [r["stats"].get("fetched", 0) + r["stats"].get("pushed_in", 0) for r in recs if r["op"] == "ec"
           and r.get("stats") and r["call"] == "ensure_cache_available" and r["t0"] <= until]
    return max(got) if got else None


def check_e_pd(rec: dict, base: dict, name: str) -> tuple[dict, list[str]]:
    """The E -> PD route: answers as base, no encoder input at PD, one fetch per host."""
    until = rec.get("phase_end") or float("inf")
    traces = {k: [r for r in v if r.get("t", r.get("t0", 0)) <= until] for k, v in rec["traces"].items()}
    by_name = {r["name"]: r for r in base["results"]}
    res = rec.get("results_e_pd", [])
    dtype = rec.get("dtype", "float32")
    same = [same_answer(r["answer"], by_name[r["name"]]["answer"], dtype) for r in res]
    pd_encoder = sum(len(v) for s in traces.get("PD", []) if s["op"] == "step" for v in s["encoder"].values())
    loaded = [i for r in traces.get("PD", []) if r["op"] == "ec" and r["call"] == "start_load_caches" for i in r["items"]]
    other_host = name == "epd-netns"  # PD on host A, P on host B
    p = {"requests": len(res), "identical": sum(same), "PD_encoder_inputs_computed": pd_encoder,
         "PD_loaded": len(loaded), "PD_distinct_loaded": len(set(loaded)),
         "fetched_by_P": fetched(traces.get("P", []), until), "fetched_by_PD": fetched(traces.get("PD", []), until),
         "PD_host": "another host than P's" if other_host else "P's host"}
    bad = []
    if len(res) != 4 or not all(same):
        bad.append(f"E -> PD: {sum(same)} of {len(res)} answers as base (4 expected)")
    if pd_encoder or p["PD_distinct_loaded"] != 3:
        bad.append(f"E -> PD: PD ran {pd_encoder} encoder inputs and loaded {p['PD_distinct_loaded']} distinct "
                   "embeddings (0 and 3 expected)")
    # Once per host: pushed embeddings reach both processes of P's host, and whichever writes
    # one first counts it, so beside P the two together bring each once.
    by_p, by_pd = p["fetched_by_P"] or 0, p["fetched_by_PD"] or 0
    if (other_host and (by_p, by_pd) != (3, 3)) or (not other_host and by_p + by_pd != 3):
        bad.append(f"embeddings brought into the host cache (fetched or pushed): P {by_p}, PD {by_pd} "
                   f"({'3 and 3' if other_host else '3 between them'} expected)")
    return p, bad


def check_metrics(m: dict, f: dict, p: dict) -> tuple[dict, list[str]]:
    """rzmq's figures as vLLM's /metrics shows them (RzmqKVConnectorStats through vLLM's stats):
    D's KV transfers, one per layer of each loaded request, with the bytes its worker copied in,
    none failed; where vLLM has EC stats (0.32 on), P's embedding fetches."""
    d, pm = m.get("D", {}), m.get("P", {})
    shown = {"D": {k: v for k, v in d.items() if not k.endswith(("_bucket", "_created"))},
             "P": {k: v for k, v in pm.items() if not k.endswith(("_bucket", "_created"))}}
    bad = []
    transfers = d.get("vllm:rzmq_kv_transfers_total")
    if not transfers or d.get("vllm:rzmq_kv_bytes_transferred_total") != f.get("kv_bytes"):
        bad.append(f"/metrics: D's rzmq KV transfers {transfers}, bytes {d.get('vllm:rzmq_kv_bytes_transferred_total')} "
                   f"(the worker copied in {f.get('kv_bytes')})")
    if d.get("vllm:rzmq_kv_failed_transfers_total", 0) or d.get("vllm:rzmq_kv_xfer_time_seconds_count") != transfers:
        bad.append(f"/metrics: D's failed transfers {d.get('vllm:rzmq_kv_failed_transfers_total')}, timed "
                   f"{d.get('vllm:rzmq_kv_xfer_time_seconds_count')} of {transfers}")
    if "vllm:rzmq_ec_transfers_total" in pm and pm["vllm:rzmq_ec_transfers_total"] != p.get("distinct_loaded_by_P"):
        bad.append(f"/metrics: P's rzmq EC fetches {pm['vllm:rzmq_ec_transfers_total']} "
                   f"({p.get('distinct_loaded_by_P')} embeddings loaded)")
    return shown, bad


def check_rzmq(p: dict, ec: bool = True) -> list[str]:
    bad = []
    if ec and (p["embeddings_saved_by_E"] != 3 or p["distinct_loaded_by_P"] != 3 or p["embeddings_loaded_by_P"] != 3):
        bad.append(f"embeddings: E saved {p['embeddings_saved_by_E']}, P loaded {p['embeddings_loaded_by_P']} "
                   f"({p['distinct_loaded_by_P']} distinct); 3 distinct pictures, each once")
    if (ec and p["P_encoder_inputs_computed"]) or p["D_encoder_inputs_computed"]:
        bad.append(f"consumers ran their own encoder: P {p['P_encoder_inputs_computed']}, "
                   f"D {p['D_encoder_inputs_computed']} inputs")
    if p["D_requests"] != 6 or any(n != 1 for n in p["D_prompt_tokens_computed_itself"]):
        bad.append(f"decode computed prompt tokens itself: {p['D_prompt_tokens_computed_itself']} (1 each expected)")
    return bad


LINK = re.compile(r"rzmq\[\d+\]: (connect|accept) (\S+): (?:transport (\S+)|\S+ \S+ closed .*?rx \d+ msgs (\d+) B "
                  r"\((\d+) zero-copy reads\))")


def links(out: str, config: str) -> dict:
    """Each rzmq connection the instances logged (RZMQ_RDMA_LOG): transport, bytes received, and
    how much of it came by zero-copy RDMA READ."""
    transports, rx, zero_copy = {}, 0, 0
    for path in glob.glob(os.path.join(out, config, "*.log")):
        with open(path, errors="replace") as f:
            for line in f:
                m = LINK.search(line)
                if not m:
                    continue
                side, ep, transport, nbytes, zc = m.groups()
                if transport:
                    transports[f"{side} {ep}"] = transport
                elif side == "connect":
                    rx += int(nbytes)
                    zero_copy += int(zc)
    return {"connections": transports, "bytes_received": rx, "zero_copy_reads": zero_copy}


def figures(rec: dict) -> dict:
    """Per configuration, over its normal requests (up to `phase_end`, before any kill)."""
    res = [r for r in rec["results"] if r.get("t_first")]
    ttft = sorted(r["t_first"] - r["t_start"] for r in res)
    until = rec.get("phase_end") or float("inf")
    t = {k: [r for r in v if r.get("t", r.get("t0", 0)) <= until] for k, v in rec["traces"].items()}
    ec_p = [r for r in t.get("P", []) if r["op"] == "ec"]
    kv_d = [r for r in t.get("D", []) if r["op"] == "kv"]
    kv_p = [r for r in t.get("P", []) if r["op"] == "kv"]
    # EC: time P held a request back for its embeddings (first not-ready to ready; 0 for a
    # request admitted on its first call, its embeddings on the host already) plus the load
    waits = {}
    for r in ec_p:
        if r["call"] == "ensure_cache_available":
            w = waits.setdefault(r["req"], [None, None])
            if w[1] is not None:
                continue
            if not r["ready"] and w[0] is None:
                w[0] = r["t0"]
            if r["ready"]:
                w[1] = r["t1"]
                if w[0] is None:
                    w[0] = w[1]
    ec_wait = [b - a for a, b in waits.values() if a is not None and b is not None]
    ec_load = [r["t1"] - r["t0"] for r in ec_p if r["call"] == "start_load_caches" and r["items"]]
    ec_bytes = sum(r["bytes"] for r in ec_p if r["call"] == "start_load_caches")
    # KV: the decode steps that admitted requests with tokens already computed (loaded by the
    # connector), from the worker's start_load_kv to the end of the last layer's wait, and the
    # time the forward spent waiting
    loading = sorted(s["t"] for s in t.get("D", []) if s["op"] == "step" and any(n["computed"] for n in s["new"]))
    calls = sorted((r for r in kv_d if r["call"] in ("start_load_kv", "wait_for_layer_load")), key=lambda r: r["t0"])
    starts = [i for i, r in enumerate(calls) if r["call"] == "start_load_kv"]
    spans, exposed = [], []
    n_layers = len({r["layer"] for r in calls if r["call"] == "wait_for_layer_load"})
    for ts in loading:
        i = next((i for i in starts if calls[i]["t0"] >= ts), None)
        if i is None:
            continue
        window = calls[i:i + 1 + n_layers]  # the start, then one wait per layer of that forward
        spans.append(window[-1]["t1"] - window[0]["t0"])
        exposed.append(sum(r["t1"] - r["t0"] for r in window))
    reg = [r for r in kv_d if r["call"] == "register_kv_caches"]
    save_cpu = sum(r["cpu"] for r in kv_p if r["call"] in ("save_kv_layer", "wait_for_save"))
    stats_d = [r["stats"] for r in kv_d if r.get("stats")]
    stats_p = [r["stats"] for r in ec_p if r.get("stats") and r["call"] == "start_load_caches"]

    def med(x):
        return round(sorted(x)[len(x) // 2] * 1000, 1) if x else None

    return {
        "ttft_ms_median": med(ttft),
        "ec_wait_ms_median": med(ec_wait),
        "ec_load_ms_median": med(ec_load),
        "ec_bytes": ec_bytes,
        "kv_load_span_ms_median": med(spans),
        "kv_exposed_wait_ms_median": med(exposed),
        "kv_bytes": stats_d[-1].get("bytes_loaded") if stats_d else None,
        "kv_copies_consumer": stats_d[-1].get("copies") if stats_d else None,
        "kv_save_cpu_ms": round(save_cpu * 1000, 1),
        "ec_loaded": stats_p[-1].get("loaded") if stats_p else None,
        "cpu_s": rec.get("cpu"),
        "kv_cache_bytes": reg[0]["bytes"] if reg else None,
    }


def print_table(report: dict) -> None:
    """The figures, one row per configuration (markdown)."""
    cols = [("TTFT ms", "ttft_ms_median"), ("EC wait ms", "ec_wait_ms_median"), ("EC load ms", "ec_load_ms_median"),
            ("EC bytes", "ec_bytes"), ("KV load span ms", "kv_load_span_ms_median"),
            ("KV exposed wait ms", "kv_exposed_wait_ms_median"), ("KV bytes", "kv_bytes"),
            ("consumer copies", "kv_copies_consumer"), ("zero-copy reads", "zero_copy_reads")]
    print("| config | " + " | ".join(c for c, _ in cols) + " | CPU s (E/P/D) | identical | consumers computed |")
    print("|" + " --- |" * (len(cols) + 4))
    for name, r in report.items():
        f = r.get("figures", {})
        cpu = f.get("cpu_s") or {}
        cpu_txt = "/".join(str(cpu.get(k, "-")) for k in ("E", "P", "D")) if "base" not in cpu else str(cpu["base"])
        p = r.get("proof")
        computed = "-" if p is None else (f"P enc {p['P_encoder_inputs_computed']}, D tokens "
                                          f"{sum(p['D_prompt_tokens_computed_itself'])}/{sum(p['D_prompt_tokens'])}")
        print(f"| {name} | " + " | ".join("-" if f.get(k) is None else str(f.get(k)) for _, k in cols)
              + f" | {cpu_txt} | {r.get('identical', '-')} | {computed} |")


def main(argv: list[str]) -> int:
    out, configs = argv[0], argv[1:]
    recs = {c: load(out, c) for c in configs if os.path.exists(os.path.join(out, c, "result.json"))}
    base = recs.get("base")
    ok = True
    report = {}
    for name, rec in recs.items():
        lines = []
        if not rec.get("ok"):
            ok = False
            print(f"[vllm] {name}: FAILED to run: {rec.get('error')}")
            continue
        if name == "base":
            errs = [r["name"] for r in rec["results"] if r["answer"].get("error")]
            ok &= not errs
            report[name] = {"figures": figures(rec)}
            print(f"[vllm] base: {len(rec['results'])} requests, errors: {errs or 'none'}")
            continue
        if name == "kill":
            by = {r["name"]: r for r in rec["kill"]}
            failed_e = bool(by["kill-E"]["answer"].get("error")) and by["kill-E"].get("p_status") != 200
            failed_p = bool(by["kill-P"]["answer"].get("error")) and by["kill-P"].get("p_status") == 200
            served = all(by[f"after-{c}"].get("d_status") == 200 for c in ("P", "D"))
            held = {c: by[f"after-{c}"].get("metrics") for c in ("P", "D")}
            clean = all(m and not m.get("error") and len(m) == 3 and not any(m.values()) for m in held.values())
            faults = {c: [r for r in rec["traces"].get(c, []) if r["op"] == "fault"] for c in ("E", "P")}
            mid = (len(faults["E"]) == 1 and faults["E"][0]["served_after_arming"] == 0
                   and len(faults["P"]) == 1 and faults["P"][0]["served_after_arming"] == 1)
            slow = [r["name"] for r in rec["kill"] if r["t_end"] - r["t_start"] > 90]
            shm = rec["shm_left"]
            said = {}
            for inst, needle in (("P", "RzmqECConnector: embedding"), ("D", "KV load failure")):
                try:
                    with open(os.path.join(out, name, f"{inst}.log"), errors="replace") as lf:
                        said[inst] = next((ln.strip()[-300:] for ln in lf if needle in ln), None)
                except OSError:
                    said[inst] = None
                print(f"[vllm] kill: {inst} logged: {said[inst]}")
            good = bool(failed_e and failed_p and served and clean and mid and not slow and not shm
                        and all(said.values()))
            ok &= good
            print(f"[vllm] kill: producers died mid-transfer (E at P's fetch, P after layer 0 of 2 to D): {mid} "
                  f"{ {c: [(f['kind'], f['served_after_arming']) for f in v] for c, v in faults.items()} }; "
                  f"held afterwards (/metrics: running, waiting, KV cache in use): {held} -> clean: {clean}")
            print(f"[vllm] kill: encoder killed -> prefill failed the request with an error: {failed_e} "
                  f"({str(by['kill-E']['answer'].get('error'))[:160]!r}, after "
                  f"{by['kill-E']['t_end'] - by['kill-E']['t_start']:.1f} s); prefill killed -> decode failed it: "
                  f"{failed_p} ({str(by['kill-P']['answer'].get('error'))[:160]!r}, after "
                  f"{by['kill-P']['t_end'] - by['kill-P']['t_start']:.1f} s); next request served: {served}; "
                  f"slower than 90 s: {slow or 'none'}; /dev/shm left: {shm or 'nothing'} -> "
                  f"{'PASS' if good else 'FAIL'}")
        dtype = rec.get("dtype", "float32")
        same = [same_answer(r["answer"], b["answer"], dtype) for r, b in zip(rec["results"], base["results"])] if base else []
        p = proof(rec)
        bad = check_rzmq(p, ec=name not in KV_ONLY)
        f = figures(rec)
        ln = links(out, name)
        f["zero_copy_reads"] = ln["zero_copy_reads"]
        if name in RZMQ:
            not_rdma = sorted(k for k, v in ln["connections"].items() if not v.startswith("rdma"))
            if not ln["connections"] or not_rdma:
                bad.append(f"connections not over RDMA: {not_rdma or 'none logged'}")
            print(f"[vllm] {name}: {len(ln['connections'])} rzmq connection ends, transports "
                  f"{sorted(set(ln['connections'].values()))}; {ln['zero_copy_reads']} zero-copy RDMA reads")
        gap = max((logprob_gap(r["answer"], b["answer"]) for r, b in zip(rec["results"], base["results"])),
                  default=None) if base else None
        report[name] = {"identical": all(same) and len(same) == len(rec["results"]), "proof": p, "figures": f,
                        "proof_failures": bad, "max_logprob_gap": gap}
        if name in RZMQ and rec.get("rzmq_metrics") is not None:
            report[name]["rzmq_metrics"], bad_m = check_metrics(rec["rzmq_metrics"], f, p)
            bad += bad_m
            print(f"[vllm] {name}: rzmq's counters in vLLM's /metrics: {json.dumps(report[name]['rzmq_metrics'])}")
        if "results_e_pd" in rec and base:
            report[name]["e_pd"], bad_pd = check_e_pd(rec, base, name)
            bad += bad_pd
            print(f"[vllm] {name}: E -> PD: {json.dumps(report[name]['e_pd'])}")
        print(f"[vllm] {name}: outputs identical to base: {sum(same)}/{len(same)} (token ids equal, largest "
              f"logprob difference {gap}); proof: {json.dumps(p)}")
        if bad:
            print(f"[vllm] {name}: {'FAIL' if name in RZMQ else 'finding'}: " + "; ".join(bad))
        if name in RZMQ:
            ok &= report[name]["identical"] and not bad
        elif not report[name]["identical"]:
            print(f"[vllm] {name}: outputs differ from base (a finding about vLLM's connector)")
        print(f"[vllm] {name}: figures {json.dumps(f)}")
    with open(os.path.join(out, "figures.json"), "w") as fo:
        json.dump(report, fo, indent=1)
    print_table(report)
    print(f"[vllm] {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

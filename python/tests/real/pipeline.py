"""Runs real vllm-omni 0.30 (vLLM's CPU engines) on a local Qwen2.5-Omni, one configuration.

    pipeline.py --model DIR --connector shm|rzmq|mooncake-te|mooncake-store --out DIR
                [--rdma auto|require] [--async-chunk] [--requests N] [--max-num-seqs N]
                [--max-tokens N] [--stage-id 0 --master ADDRESS:PORT] [--kill-stage N]

The Omni orchestrator runs in this process; each stage is a process of its own, as in
production. The deploy YAML is vllm-omni's own qwen2_5_omni.yaml adjusted for CPU (eager, a
fixed KV cache size, no device pinning) with the connector named by `--connector` on both
edges. Outputs go to OUT/results.json: per request the thinker's token ids, the audio
(dtype, shape, sha256; the raw bytes in OUT/audio-<i>.bin) and timings; rzmq_omni_cpu's trace
plugin (RZMQ_REAL_TRACE_DIR=OUT/trace) records every connector call in every process.
compare.py compares two OUT directories and summarises the traces.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import time

import yaml

PROMPTS = [
    "Tell me a short story about a lighthouse keeper.",
    "What is the capital of France, and why is it famous?",
    "Explain how a bicycle stays upright.",
    "Give three tips for learning to play the piano.",
    "Describe the sound of rain on a tin roof.",
    "Why is the sky blue?",
    "Write a haiku about autumn leaves.",
    "What makes a good cup of coffee?",
]
SYSTEM = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
          "auditory and visual inputs, as well as generating text and speech.")


def prompt_text(question: str) -> str:
    """Qwen2.5-Omni's chat format for a text-only user turn."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
            "<|im_start|>assistant\n")


def connector_spec(args) -> dict:
    """The `connectors:` entry of the deploy YAML for --connector."""
    host = args.host
    if args.connector == "shm":
        return {"name": "SharedMemoryConnector", "extra": {}}
    if args.connector == "rzmq":
        extra = {"host": host, "zmq_port": args.base_port, "rdma": args.rdma, "require_rzmq": True,
                 "memory_pool_size": 1 << 30}
        return {"name": "RzmqConnector", "extra": extra}
    if args.connector == "mooncake-te":
        return {"name": "MooncakeTransferEngineConnector",
                "extra": {"host": host, "zmq_port": args.base_port, "protocol": "tcp", "device_name": "",
                          "memory_pool_size": 1 << 30}}
    if args.connector == "mooncake-store":
        return {"name": "MooncakeStoreConnector",
                "extra": {"host": host, "metadata_server": f"http://{host}:{args.mooncake_http_port}/metadata",
                          "master": f"{host}:{args.mooncake_master_port}", "proto": "tcp",
                          "segment": 1 << 29, "localbuf": 1 << 28}}
    raise SystemExit(f"unknown connector {args.connector}")


def model_type(model_dir: str) -> str:
    """config.json's model_type: qwen2_5_omni or qwen3_omni_moe."""
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)["model_type"]


def deploy_yaml_qwen3(args) -> dict:
    """vllm-omni's own qwen3_omni_moe.yaml (async_chunk: true unless --no-async-chunk), for CPU:
    eager, float32 where CPU kernels need it, a fixed KV cache, no device pinning, no triton
    MoE backend (vLLM's CPU experts serve the MoE layers), the thinker and the talker batching
    `--max-num-seqs` requests; the chosen connector on both edges, with vllm-omni's codec chunk
    settings (4 frames first, then 25 with 25 of left context)."""
    # moe_backend: vllm-omni sets "triton" for Qwen3-Omni stages unless the deploy names a backend
    # (stage_init_utils._maybe_set_qwen3_omni_moe_backend), and vLLM's triton MoE refuses the CPU;
    # "auto" lets vLLM choose its CPU experts. max_cudagraph_capture_size 0 (as vllm-omni's own
    # XPU profile): the talker sizes its code-predictor buffers by it, and eager CPU leaves it None.
    common = {"enforce_eager": True, "trust_remote_code": True, "enable_prefix_caching": False,
              "max_num_batched_tokens": 4096, "max_model_len": 4096, "moe_backend": "auto",
              "max_cudagraph_capture_size": 0}
    sampling = [
        {"temperature": 0.0, "max_tokens": args.max_tokens, "seed": 42},
        # the talker is the one stochastic stage; its seed makes it reproducible (as vllm-omni's yaml)
        {"seed": 42, "temperature": 0.9, "top_k": 50, "max_tokens": args.talker_tokens, "repetition_penalty": 1.05},
        {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "max_tokens": 65536, "repetition_penalty": 1.1},
    ]
    spec = connector_spec(args)
    spec["extra"] = {"initial_codec_chunk_frames": 4, "codec_chunk_frames": 25, "codec_left_context_frames": 25,
                     **spec["extra"]}
    stages = []
    for sid in range(3):
        # The talker takes `--talker-seqs` requests at a time (default 1). vllm-omni 0.30's
        # Qwen3-Omni code predictor samples codebooks 1..15 of every frame from the process's
        # global torch RNG (qwen3_omni_moe_talker.code_predictor_forward passes no per-request
        # generator; top-k 50 and top-p 0.8 are fixed in CodePredictorWrapper, no setting reaches
        # them), so when two requests share a talker step, which draws each one gets depends on
        # which steps they shared: timing. One request at a time, in order, gives every request the
        # same draws run to run. The thinker batches `--max-num-seqs`.
        seqs = args.talker_seqs if sid == 1 else args.max_num_seqs
        st = {"stage_id": sid, **common, "max_num_seqs": seqs, "dtype": args.dtype,
              "default_sampling_params": sampling[sid]}
        if sid == 0:
            st["mm_processor_cache_gb"] = 0
        if sid == 2:
            st.update(enable_chunked_prefill=False, async_scheduling=False, max_num_batched_tokens=65536,
                      max_model_len=65536, max_num_seqs=args.code2wav_seqs)
        if sid > 0:
            st["input_connectors"] = {f"from_stage_{sid - 1}": "edge"}
        if sid < 2:
            st["output_connectors"] = {f"to_stage_{sid + 1}": "edge"}
        stages.append(st)
    return {"async_chunk": bool(args.async_chunk), "connectors": {"edge": spec}, "stages": stages}


def deploy_yaml(args) -> dict:
    """vllm-omni's qwen2_5_omni.yaml, for CPU, with the chosen connector on both edges."""
    if args.model_type == "qwen3_omni_moe":
        return deploy_yaml_qwen3(args)
    common = {"enforce_eager": True, "trust_remote_code": True, "enable_prefix_caching": False,
              "max_num_seqs": args.max_num_seqs, "max_num_batched_tokens": 4096, "max_model_len": 4096,
              "dtype": "float32"}
    sampling = [
        {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "max_tokens": args.max_tokens, "seed": 42,
         "repetition_penalty": 1.1},
        {"temperature": 0.9, "top_p": 0.8, "top_k": 40, "max_tokens": args.talker_tokens, "seed": 42,
         "repetition_penalty": 1.05},
        {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "max_tokens": 2048, "seed": 42,
         "repetition_penalty": 1.1},
    ]
    stages = []
    for sid in range(3):
        st = {"stage_id": sid, **common, "default_sampling_params": sampling[sid]}
        if sid == 0:
            st["mm_processor_cache_gb"] = 0
        if sid == 2:
            st["async_scheduling"] = False
            # vllm-omni 0.30's code2wav, given two requests in one batch, hands each of them
            # the audio of both (found by these runs: stock and rzmq alike, whenever two
            # requests reach code2wav together), so outputs would depend on timing. vllm-omni's
            # own deploy YAML runs every stage one request at a time; here the thinker and the
            # talker stay concurrent and code2wav takes one request at a time.
            st["max_num_seqs"] = 1
        if sid < 2:
            st["output_connectors"] = {f"to_stage_{sid + 1}": "edge"}
        if sid > 0:
            st["input_connectors"] = {f"from_stage_{sid - 1}": "edge"}
        stages.append(st)
    return {"async_chunk": bool(args.async_chunk), "connectors": {"edge": connector_spec(args)},
            "stages": stages}


def tensor_record(t, path_prefix: str, out_dir: str, name: str) -> dict:
    import torch

    t = t.detach().contiguous().cpu()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""  # 0-d too
    with open(os.path.join(out_dir, f"{name}.bin"), "wb") as f:
        f.write(raw)
    return {"path": path_prefix, "dtype": str(t.dtype), "shape": list(t.shape),
            "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}


def record_output(o, results: dict, t_gen: float, out: str) -> None:
    """Adds one OmniRequestOutput to the per-request results (token ids, audio, arrival times)."""
    idx = int(str(o.request_id).split("_", 1)[0])
    r = results.setdefault(idx, {"request": idx, "arrivals": []})
    now = time.time()
    r["arrivals"].append({"stage": o.stage_id, "type": o.final_output_type, "t": now - t_gen})
    if o.final_output_type == "text" and o.outputs:
        # streamed: each output carries the tokens since the last one
        r.setdefault("thinker_token_ids", []).extend(o.outputs[0].token_ids)
        r["text"] = r.get("text", "") + (o.outputs[0].text or "")
        if o.outputs[0].token_ids:
            r.setdefault("t_first_token", now - t_gen)
    import torch

    mm = o.multimodal_output or {}
    items = mm.items() if hasattr(mm, "items") else vars(mm).items()
    audio = o.final_output_type == "audio"
    for k, v in items:
        if isinstance(v, list) and v and all(isinstance(x, torch.Tensor) for x in v):
            v = torch.cat([x.reshape(-1) for x in v])
        if not isinstance(v, torch.Tensor):
            continue
        name = k if audio else f"stage{o.stage_id}-{k}"
        if audio:
            r.setdefault("t_first_audio", now - t_gen)
            if k == "audio":  # each output of a streamed stage, in order (its own record)
                rec = tensor_record(v, name, out, f"{name}-{idx}-part{len(r.get('audio_chunks', []))}")
                r.setdefault("audio_chunks", []).append({k2: rec[k2] for k2 in ("shape", "sha256")})
        # a streamed stage sends several outputs: keep the last (the whole) one
        r.setdefault("outputs", {})[name] = tensor_record(v, name, out, f"{name}-{idx}")
    if o.error:
        r["error"] = o.error


def kill_stage_worker(trace_dir: str, stage: int) -> int | None:
    """SIGKILLs the worker process whose connector serves `stage` (from the trace); its pid."""
    import signal

    import psutil

    for path in glob.glob(os.path.join(trace_dir, "trace-*.jsonl")):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:  # a line another process is still writing
                    continue
                if r.get("op") == "connector" and r.get("extra", {}).get("stage_id") == stage \
                        and r["pid"] in {p.pid for p in psutil.Process().children(recursive=True)}:
                    os.kill(r["pid"], signal.SIGKILL)
                    return r["pid"]
    return None


def zmq_libraries() -> list[dict]:
    """For this process and every process under it: the libzmq files mapped into it (pyzmq's
    bundled libzmq, rzmq's, the system's), read from /proc/PID/maps."""
    import psutil

    me = psutil.Process()
    out = []
    for p in [me, *me.children(recursive=True)]:
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                libs = sorted({line.split()[-1] for line in f if "libzmq" in line and "/" in line})
            out.append({"pid": p.pid, "name": " ".join(p.cmdline()[:1]) if not p.name() else p.name(),
                        "title": " ".join(p.cmdline())[:120], "libzmq": libs})
        except (OSError, psutil.Error):
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--connector", default="shm", choices=["shm", "rzmq", "mooncake-te", "mooncake-store"])
    ap.add_argument("--rdma", default="auto", choices=["auto", "require"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--base-port", type=int, default=50051)
    ap.add_argument("--mooncake-master-port", type=int, default=50061)
    ap.add_argument("--mooncake-http-port", type=int, default=8080)
    ap.add_argument("--async-chunk", action="store_true", help="streaming (Qwen3-Omni streams by default)")
    ap.add_argument("--no-async-chunk", dest="async_chunk", action="store_false")
    ap.add_argument("--dtype", default="bfloat16", help="Qwen3-Omni stages' dtype")
    ap.add_argument("--code2wav-seqs", type=int, default=1)
    ap.add_argument("--talker-seqs", type=int, default=1,
                    help="Qwen3-Omni talker's max_num_seqs (above 1, stock outputs depend on timing)")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--max-num-seqs", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--talker-tokens", type=int, default=48)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--stage-id", type=int, help="run only this stage here (the others headless elsewhere)")
    ap.add_argument("--master", help="ADDRESS:PORT of the omni master, with --stage-id")
    ap.add_argument("--write-deploy-only", action="store_true", help="write OUT/deploy.yaml and exit")
    ap.add_argument("--kill-stage", type=int, help="SIGKILL this stage's worker once the first thinker "
                    "output arrives; exit 0 when the orchestrator then reports the failure")
    ap.set_defaults(async_chunk=None)
    args = ap.parse_args()
    args.model_type = model_type(args.model)
    if args.async_chunk is None:
        args.async_chunk = args.model_type == "qwen3_omni_moe"

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    os.environ.setdefault("RZMQ_REAL_TRACE_DIR", os.path.join(out, "trace"))
    cfg = deploy_yaml(args)
    cfg_path = os.path.join(out, "deploy.yaml")
    with open(cfg_path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    if args.write_deploy_only:
        return 0

    t_start = time.time()
    from vllm_omni.entrypoints.omni import Omni

    kw = {}
    if args.stage_id is not None:
        host, port = args.master.rsplit(":", 1)
        kw = {"stage_id": args.stage_id, "omni_master_address": host, "omni_master_port": int(port)}
    omni = Omni(model=args.model, deploy_config=cfg_path, stage_init_timeout=int(args.timeout),
                init_timeout=int(args.timeout), log_stats=False, **kw)
    t_ready = time.time()
    prompts = [{"prompt": prompt_text(PROMPTS[i % len(PROMPTS)])} for i in range(args.requests)]
    processes = zmq_libraries()

    import psutil

    me = psutil.Process()

    def cpu_tree() -> float:
        total = 0.0
        for p in [me, *me.children(recursive=True)]:
            try:
                c = p.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
        return total

    cpu0 = cpu_tree()
    t_gen = time.time()
    results: dict[int, dict] = {}
    killed = None
    failure = None
    try:
        # The thinker streams (DELTA) so the first token's arrival is the time to first token;
        # the other stages keep the orchestrator's defaults.
        import copy

        from vllm.sampling_params import RequestOutputKind

        params = [copy.deepcopy(p) for p in omni.default_sampling_params_list]
        params[0].output_kind = RequestOutputKind.DELTA
        if args.async_chunk and hasattr(params[2], "output_kind"):
            # streaming: code2wav's audio arrives chunk by chunk, so its first chunk is the
            # time to first audio
            params[2].output_kind = RequestOutputKind.DELTA
        for o in omni.generate(prompts, params, py_generator=True, use_tqdm=False):
            if args.kill_stage is not None and killed is None and o.stage_id == 0:
                killed = kill_stage_worker(os.environ["RZMQ_REAL_TRACE_DIR"], args.kill_stage)
                print(f"pipeline: killed stage {args.kill_stage}'s worker (pid {killed}) at "
                      f"{time.time() - t_gen:.2f} s", flush=True)
            record_output(o, results, t_gen, out)
    except Exception as e:  # noqa: BLE001  (what the orchestrator reports when a stage dies)
        failure = f"{type(e).__name__}: {e}"
        print(f"pipeline: generate() failed after {time.time() - t_gen:.2f} s: {failure}", flush=True)
    t_end = time.time()
    if args.kill_stage is not None:
        errors = [r.get("error") for r in results.values() if r.get("error")]
        reported = failure or (errors[0] if errors else None)
        print(f"pipeline: after the kill the orchestrator {'reported: ' + str(reported)[:300] if reported else 'reported nothing'}"
              f" ({t_end - t_gen:.1f} s)", flush=True)
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump({"killed_pid": killed, "reported": reported, "seconds": t_end - t_gen,
                       "requests": [results[i] for i in sorted(results)]}, f, indent=1)
        try:
            omni.close()
        except Exception as e:  # noqa: BLE001
            print(f"pipeline: close after the failure: {e}", flush=True)
        return 0 if killed and reported else 1
    if failure:
        with open(os.path.join(out, "results.json"), "w") as f:  # what finished, for the report
            json.dump({"config": vars(args), "processes": processes, "failure": failure,
                       "generate_s": t_end - t_gen, "cpu_s_per_request": float("nan"),
                       "requests": [results[i] for i in sorted(results)]}, f, indent=1)
        omni.close()
        return 1
    cpu1 = cpu_tree()
    omni.close()
    summary = {
        "config": {k: v for k, v in vars(args).items()},
        "processes": processes,
        "startup_s": t_ready - t_start,
        "generate_s": t_end - t_gen,
        "cpu_s": cpu1 - cpu0,
        "cpu_s_per_request": (cpu1 - cpu0) / max(1, args.requests),
        "requests": [results[i] for i in sorted(results)],
    }
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    done = [r for r in summary["requests"] if r.get("thinker_token_ids") and "t_first_audio" in r]
    print(f"pipeline: {len(done)}/{args.requests} requests finished in {t_end - t_gen:.1f} s "
          f"(startup {t_ready - t_start:.1f} s); results in {out}/results.json", flush=True)
    return 0 if len(done) == args.requests else 1


if __name__ == "__main__":
    sys.exit(main())

"""vLLM's own disaggregation (EPD) on real vLLM CPU engines (0.30 or 0.32), with rzmq's connectors and vLLM's.

    disagg.py --venv VENV --model DIR --out DIR [--configs base,epd,...] [--prompt-words N]

Each configuration starts real `vllm serve` instances (OpenAI API servers) and plays vLLM's
EPD proxy: every request goes to the encoder instance (max_tokens=1), then to the prefill
instance (max_tokens=1, `kv_transfer_params: {do_remote_decode: true}`), then, with the
prefill's returned kv_transfer_params, to the decode instance, which streams the answer.

Configurations:
    base        one instance, no connector: the reference outputs and TTFT
    epd         E -> P embeddings by RzmqECConnector, P -> D KV by RzmqKVConnector, every
                instance under `rzmq run` with RDMA (soft provider), on one host
    epd-netns   the same with E and D on host A, P on host B (network namespaces): embeddings
                go A -> B, KV B -> A; and a fourth instance PD on host A, an EC consumer that
                decodes itself (E -> PD): the pictures' requests go E -> PD too, so each
                embedding has two consumers, one per host, and each host gets it once (pushed
                with its announcement, as every embedding under push_bytes is)
    epd-files   vLLM's ECExampleConnector and ExampleConnector (through files), stock libzmq
    pd          P -> D only (P encodes pictures itself), RzmqKVConnector under `rzmq run` (RDMA)
    pd-mooncake P -> D only with vLLM's MooncakeConnector (Mooncake transfer engine over TCP)
    pd-nixl     P -> D only with vLLM's NixlConnector on its CPU path (kv_buffer_device cpu,
                NIXL's UCX backend over TCP/shared memory), stock libzmq; needs --nixl-path
    kill        epd with PD beside P on the same host (E -> PD: the pictures' requests again,
                which PD must take from the host cache, one fetch per picture between P and
                PD; E pushes nothing here, push_bytes 0, so every embedding is fetched); then
                each producer killed mid-transfer (the rzmq_vllm_trace fault): the encoder
                with the prefill's fetch of a new picture in flight, the prefill instance after
                delivering layer 0 of 2 of a new prompt to the decode. Each consumer must fail
                that request with an error (not hang), hold no request and no KV block
                afterwards (vLLM's /metrics), then serve the next request; nothing left in
                /dev/shm

The requests: pictures (one repeated, to show an embedding is fetched once) with text, and
text prompts of `--prompt-words` words (about 4 tokens a word with the tiny models' vocabulary). Each configuration's outputs (token ids and
logprobs, greedy) are compared with base, and each one's traces (the rzmq_vllm_trace plugin)
show what vLLM's schedulers did: whether the consumers computed any encoder input or any
prompt token the connectors should have brought.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "real"))
from run import NETNS, NETNS_IP, base_env, kill_session, netns_down, netns_up, shm_entries  # noqa: E402
import refcache  # noqa: E402

PORTS = {"base": 8200, "E": 8201, "P": 8202, "D": 8203, "PD": 8204}
WITH_PD = {"kill", "epd-netns"}  # configurations with the E -> PD route (a second EC consumer)
EC_PORT, KV_PORT = 14600, 14700
MAX_TOKENS = 8


def image_url(seed: int, side: int = 112) -> str:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8))
    b = io.BytesIO()
    img.save(b, "PNG")
    return "data:image/png;base64," + base64.b64encode(b.getvalue()).decode()


def requests_for(prompt_words: int, side: int) -> list[dict]:
    """Pictures (seed 2 twice: one embedding, fetched once) and long text prompts."""
    out = []
    for i, seed in enumerate((1, 2, 2, 3)):
        out.append({"name": f"image{i}", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": image_url(seed, side)}},
            {"type": "text", "text": f"Describe picture number {i}."}]}]})
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    for i in range(2):
        text = " ".join(words[(j * (i + 3)) % len(words)] for j in range(prompt_words))
        out.append({"name": f"text{i}", "messages": [{"role": "user", "content": text}]})
    return out


def post(port: int, body: dict, host: str = "127.0.0.1", timeout: float = 300.0):
    """(status, parsed answer or streamed chunks (body["stream"]), first token time)."""
    stream = bool(body.get("stream"))
    req = urllib.request.Request(f"http://{host}:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            if not stream:
                return r.status, json.load(r), None
            chunks, first = [], None
            for line in r:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                c = json.loads(line[6:])
                if first is None and any(ch.get("delta", {}).get("content") or ch.get("token_ids")
                                         for ch in c.get("choices", [])):
                    first = time.time()
                chunks.append(c)
            return r.status, chunks, first
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")[:2000]}, None
    except (urllib.error.URLError, OSError) as e:
        return 0, {"error": str(e)}, None


def answer_of(chunks) -> dict:
    """Token ids, texts and logprobs of a streamed answer; an error chunk if one came."""
    ids, toks, lps, finish, err = [], [], [], None, None
    if isinstance(chunks, dict):
        return {"error": chunks.get("error") or chunks}
    for c in chunks:
        if "error" in c:
            err = c["error"]
        for ch in c.get("choices", []):
            ids += ch.get("token_ids") or []
            for item in ((ch.get("logprobs") or {}).get("content") or []):
                toks.append(item["token"])
                lps.append(item["logprob"])
            finish = ch.get("finish_reason") or finish
    out = {"token_ids": ids, "tokens": toks, "logprobs": lps, "finish": finish}
    if err is not None or finish == "error":
        out["error"] = err or "finish_reason error"
    elif finish is None:  # vLLM ends the stream of a request it failed without a finish reason
        out["error"] = "the stream ended without a token or a finish reason"
    return out


class Instances:
    """vllm serve instances, each in its own process session (and network namespace)."""

    def __init__(self, args, out: str):
        self.args, self.out = args, out
        self.procs: dict[str, tuple[subprocess.Popen, str | None, str]] = {}

    def start(self, name: str, flags: list[str], env: dict, netns: str | None = None, rzmq: bool = False,
              host: str = "127.0.0.1") -> None:
        py = os.path.join(self.args.venv, "bin", "python")
        cmd = [py, "-m", "vllm.entrypoints.openai.api_server", "--model", self.args.model, "--port",
               str(PORTS[name]), "--host", "0.0.0.0", "--max-model-len", str(self.args.max_model_len),
               "--max-num-seqs", "4", "--max-num-batched-tokens", str(self.args.max_num_batched_tokens),
               "--dtype", self.args.dtype, "--enforce-eager", "--seed", "0",
               "--limit-mm-per-prompt", json.dumps({"image": 1, "audio": 0, "video": 0}), *flags]
        if self.args.max_pixels:
            cmd += ["--mm-processor-kwargs", json.dumps({"max_pixels": self.args.max_pixels})]
        if rzmq:
            cmd = [os.path.join(self.args.venv, "bin", "rzmq"), "run", "--", *cmd]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        env = {**env, "RZMQ_VLLM_TRACE_DIR": os.path.join(self.out, "trace", name)}
        log = open(os.path.join(self.out, f"{name}.log"), "w")
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = (p, netns, host)

    def wait_ready(self, timeout: float = 400.0) -> None:
        wait_ready({n: h for n, (_, _, h) in self.procs.items()}, timeout,
                   lambda n: self.procs[n][0].poll())

    def host(self, name: str) -> str:
        return self.procs[name][2]

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time so far of every process of each instance's session."""
        from run import session_pids

        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for name, (p, _, _) in self.procs.items():
            total = 0
            for pid in session_pids(p.pid):
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    total += int(fields[11]) + int(fields[12])
                except (OSError, IndexError, ValueError):
                    pass
            out[name] = total / tick
        return out

    def arm_fault(self, name: str, after: int) -> None:
        arm_fault(self.out, name, after)

    def kill(self, name: str) -> None:
        p = self.procs[name][0]
        from run import session_pids

        for pid in session_pids(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def stop(self) -> None:
        for p, _, _ in self.procs.values():
            kill_session(p.pid)


def wait_ready(hosts: dict[str, str], timeout: float = 400.0, exited=lambda name: None) -> None:
    """Until each instance answers /health (an instance that exits fails at once)."""
    end = time.time() + timeout
    for name, host in hosts.items():
        while True:
            rc = exited(name)
            if rc is not None:
                raise RuntimeError(f"instance {name} exited with {rc} (see {name}.log)")
            try:
                with urllib.request.urlopen(f"http://{host}:{PORTS[name]}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.time() > end:
                raise RuntimeError(f"instance {name} not ready in {timeout:.0f} s")
            time.sleep(1.0)


def host_cache_dir(machine: str) -> str:
    """The EC host cache of one (emulated) host: instances on one host share it."""
    return f"/dev/shm/rzmq-ec-test-{os.getpid()}-{machine}"


def ec_config(connector: str, role: str, host: str, out: str, files: bool, producers=None,
              machine: str = "A", push: bool = True) -> list[str]:
    """`push` False: the producer pushes nothing with its announcements (push_bytes 0), so every
    embedding is fetched, the path a larger one takes (kill kills the encoder in that fetch)."""
    if files:
        extra = {"shared_storage_path": os.path.join(out, "ec-files")}
    else:
        extra = {"rdma": "require", "host_cache_dir": host_cache_dir(machine), "fetch_timeout": 10}
        if producers:
            extra["producers"] = producers
        if not push:
            extra["push_bytes"] = 0
    cfg = {"ec_connector": connector, "ec_role": role, "ec_ip": host, "ec_port": EC_PORT,
           "ec_connector_extra_config": extra}
    return ["--ec-transfer-config", json.dumps(cfg)]


def kv_config(connector: str, role: str, host: str, out: str, files: bool) -> list[str]:
    # the producer's address goes in the extra config: vLLM 0.32 has no kv_ip
    extra = ({"shared_storage_path": os.path.join(out, "kv-files")} if files else
             {"rdma": "require", "load_timeout": 10, "host": host})
    cfg = {"kv_connector": connector, "kv_role": role, "kv_port": KV_PORT, "kv_connector_extra_config": extra}
    return ["--kv-transfer-config", json.dumps(cfg)]


def body(req: dict, model: str, max_tokens: int, stream: bool, kv: dict | None = None) -> dict:
    b = {"model": model, "messages": req["messages"], "max_tokens": max_tokens, "temperature": 0.0,
         "logprobs": True, "top_logprobs": 1, "return_token_ids": True, "stream": stream}
    if kv is not None:
        b["kv_transfer_params"] = kv
    return b


MOONCAKE_ENGINE = "rzmq-test-prefill"


def through_epd(inst, req: dict, model: str, kill_after: str | None = None, encoder: bool = True,
                mooncake: bool = False, nixl: bool = False) -> dict:
    """One request through E (pictures only), P and D, as vLLM's EPD proxy does; timings. With
    `kill_after` "E" or "P", that instance's producer is armed to die mid-transfer once it has
    answered (E: at P's fetch; P: after layer 0 of D's load), and what is left of it is killed
    at the end. Without `encoder`, P encodes pictures itself (P/D only). `mooncake`: the
    router-made kv_transfer_params vLLM's MooncakeConnector needs (a transfer id for both, P's
    bootstrap address for D). `nixl`: the prefill's kv_transfer_params as vLLM's P/D proxy sends
    them to a NixlConnector."""
    rec = {"name": req["name"], "t_start": time.time()}
    to_p = {"do_remote_decode": True}
    if mooncake:
        tid = f"t-{time.time_ns()}"
        to_p["transfer_id"] = tid
    if nixl:
        to_p.update({"do_remote_prefill": False, "remote_engine_id": None, "remote_block_ids": None,
                     "remote_host": None, "remote_port": None})
    if encoder and any(isinstance(c, dict) and c.get("type") == "image_url" for m in req["messages"]
           for c in (m["content"] if isinstance(m["content"], list) else [])):
        st, ans, _ = post(PORTS["E"], body(req, model, 1, False), inst.host("E"))
        rec["e_status"], rec["t_e"] = st, time.time()
        if kill_after == "E":  # E dies when P's fetch of this picture reaches it
            inst.arm_fault("E", 0)
            rec["armed"] = "E"
    st, ans, _ = post(PORTS["P"], body(req, model, 1, False, to_p), inst.host("P"))
    rec["p_status"], rec["t_p"] = st, time.time()
    if st == 200 and (ans.get("choices") or [{}])[0].get("finish_reason") == "error":
        st = rec["p_status"] = 500  # vLLM failed the request (a connector could not bring its data)
        ans = {"error": "finish_reason error"}
    if st != 200:
        rec["answer"] = {"error": ans.get("error") if isinstance(ans, dict) else ans, "stage": "P"}
        rec["t_end"] = time.time()
        if kill_after:  # whatever is left of the dead producer's instance
            inst.kill(kill_after)
        return rec
    kvp = ans.get("kv_transfer_params")
    if mooncake:
        kvp = {"do_remote_prefill": True, "remote_engine_id": MOONCAKE_ENGINE, "transfer_id": tid,
               "remote_bootstrap_addr": f"{inst.host('P')}:8998"}
    rec["kv_transfer_params"] = kvp
    if kill_after == "P":  # P dies after delivering layer 0 of this request's KV to D
        inst.arm_fault("P", 1)
        rec["armed"] = "P"
    st, chunks, first = post(PORTS["D"], body(req, model, MAX_TOKENS, True, kvp), inst.host("D"))
    rec["d_status"], rec["t_first"], rec["t_end"] = st, first, time.time()
    rec["answer"] = answer_of(chunks) if st == 200 else {"error": chunks.get("error"), "stage": "D"}
    if kill_after:  # whatever is left of the dead producer's instance
        inst.kill(kill_after)
    return rec


def run_epd(inst, reqs: list[dict], model: str, **kw) -> list[dict]:
    """Every request through E, P and D. `inst` gives each instance's host (`host(name)`) and
    kills one (`kill(name)`)."""
    return [through_epd(inst, req, model, **kw) for req in reqs]


def has_picture(req: dict) -> bool:
    return any(isinstance(c, dict) and c.get("type") == "image_url" for m in req["messages"]
               for c in (m["content"] if isinstance(m["content"], list) else []))


def run_e_pd(inst, reqs: list[dict], model: str) -> list[dict]:
    """The pictures' requests through E, then PD (an EC consumer that prefills and decodes):
    vLLM's E -> PD disaggregation."""
    out = []
    for req in filter(has_picture, reqs):
        rec = {"name": req["name"], "t_start": time.time()}
        st, _, _ = post(PORTS["E"], body(req, model, 1, False), inst.host("E"))
        rec["e_status"], rec["t_e"] = st, time.time()
        st, chunks, first = post(PORTS["PD"], body(req, model, MAX_TOKENS, True), inst.host("PD"))
        rec["d_status"], rec["t_first"], rec["t_end"] = st, first, time.time()
        rec["answer"] = answer_of(chunks) if st == 200 else {"error": chunks.get("error"), "stage": "PD"}
        out.append(rec)
    return out


METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")


def rzmq_metrics(host: str, port: int, path: str) -> dict[str, float]:
    """rzmq's connector metrics (vllm:rzmq_*) in an instance's /metrics, summed over labels; the
    lines themselves are kept in `path`."""
    got: dict[str, float] = {}
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            lines = [ln for ln in r.read().decode(errors="replace").splitlines() if ln.startswith("vllm:rzmq_")]
    except (urllib.error.URLError, OSError) as e:
        return {"error": str(e)}
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    for line in lines:
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            got[name] = got.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        except ValueError:
            pass
    return got


def metrics(host: str, port: int) -> dict[str, float]:
    """What an instance holds now, from its Prometheus /metrics: requests running and waiting,
    and the share of its KV cache in use (0.0 when no block is held)."""
    got: dict[str, float] = {}
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            for line in r.read().decode(errors="replace").splitlines():
                name = line.split("{", 1)[0].split(" ", 1)[0]
                if name in METRICS:
                    got[name] = got.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    except (urllib.error.URLError, OSError, ValueError) as e:
        return {"error": str(e)}
    return got


def arm_fault(out: str, name: str, after: int) -> None:
    """Makes instance `name`'s producer die when asked for data, after `after` more answers
    (the rzmq_vllm_trace fault; RZMQ_VLLM_TEST_FAULTS=1)."""
    with open(os.path.join(out, "trace", name, "die-after"), "w") as f:
        f.write(str(after))


def settled(host: str, port: int, timeout: float = 15.0) -> dict[str, float]:
    """The instance's /metrics once it holds nothing (or as they are after `timeout`)."""
    end = time.time() + timeout
    while True:
        m = metrics(host, port)
        if (not m.get("error") and all(m.get(k) == 0.0 for k in METRICS)) or time.time() > end:
            return m
        time.sleep(0.5)


def run_kill(inst, model: str, prompt_words: int, side: int) -> list[dict]:
    """After the normal requests, each producer killed mid-transfer: the encoder dies when the
    prefill instance's fetch of a new picture reaches it (the prefill instance must fail that
    request), then the prefill instance dies after delivering layer 0 of a new prompt's KV to
    the decode instance (which must fail it). After each failure a plain request is served and
    the consumer's /metrics show no request and no KV block held."""
    pic = {"name": "kill-E", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": image_url(99, side)}}, {"type": "text", "text": "And this one?"}]}]}
    text = {"name": "kill-P", "messages": [{"role": "user", "content": " ".join(["omega"] * prompt_words)}]}
    plain = {"name": "after", "messages": [{"role": "user", "content": "still there?"}]}

    def plain_to(name: str) -> dict:
        t0 = time.time()
        st, ans, _ = post(PORTS[name], body(plain, model, MAX_TOKENS, False), inst.host(name))
        return {"name": f"after-{name}", "t_start": t0, "t_end": time.time(), "d_status": st,
                "answer": {"error": None if st == 200 else ans},
                "metrics": settled(inst.host(name), PORTS[name])}

    out = [through_epd(inst, pic, model, kill_after="E"), plain_to("P"),
           through_epd(inst, text, model, kill_after="P"), plain_to("D")]
    return out


def scrape_rzmq(inst, out: str) -> dict[str, dict[str, float]]:
    """Every instance's vllm:rzmq_* metrics, once vLLM has recorded the last step's stats."""
    time.sleep(2.0)  # the stats of a request's last step travel with the next outputs or the idle tick
    return {n: rzmq_metrics(inst.host(n), PORTS[n], os.path.join(out, f"metrics-{n}.txt")) for n in inst.procs}


def run_base(reqs: list[dict], model: str) -> list[dict]:
    results = []
    for req in reqs:
        rec = {"name": req["name"], "t_start": time.time()}
        st, chunks, first = post(PORTS["base"], body(req, model, MAX_TOKENS, True))
        rec["d_status"], rec["t_first"], rec["t_end"] = st, first, time.time()
        rec["answer"] = answer_of(chunks) if st == 200 else {"error": chunks.get("error")}
        results.append(rec)
    return results


class Remote:
    """The instances as the client sees them from another network namespace (no killing there)."""

    def __init__(self, hosts: dict[str, str]):
        self.hosts = hosts

    def host(self, name: str) -> str:
        return self.hosts[name]

    def kill(self, name: str) -> None:
        raise RuntimeError("kill is not run across namespaces")

    def arm_fault(self, name: str, after: int) -> None:
        raise RuntimeError("faults are not run across namespaces")


def client_main(args) -> int:
    """`--client`: the proxy's part alone, run inside a network namespace; results to --out."""
    hosts = dict(kv.split("=", 1) for kv in args.client.split(","))
    wait_ready(hosts)
    reqs = requests_for(args.prompt_words, args.image_side)
    results = {"results": run_epd(Remote(hosts), reqs, args.model)}
    if "PD" in hosts:
        results["results_e_pd"] = run_e_pd(Remote(hosts), reqs, args.model)
    with open(os.path.join(args.out, "client.json"), "w") as f:
        json.dump(results, f)
    return 0


def base_key(args, reqs: list[dict]) -> str:
    """What the reference run's outputs depend on: the environment (its directory name carries
    the hash of its pins), the model's files, the requests, the instance's settings (this file
    builds its command line) and the test-support plugins loaded into it."""
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "configs", "client", "nixl_path")}
    settings.pop("venv")
    return refcache.key(
        [os.path.basename(os.path.normpath(args.venv)), json.dumps(reqs, sort_keys=True),
         json.dumps(settings, sort_keys=True), str(MAX_TOKENS)],
        [os.path.abspath(__file__), os.path.join(HERE, "..", "real", "run.py")],
        [args.model, os.path.join(HERE, "..", "real", "cpu_platform", "rzmq_omni_cpu")])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default="base,epd,epd-netns,kill")
    ap.add_argument("--prompt-words", type=int, default=300)
    ap.add_argument("--image-side", type=int, default=112)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--max-num-batched-tokens", type=int, default=4096)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-pixels", type=int, default=0,
                    help="cap on a picture's pixels (the encoder's memory profile); 0: the model's")
    ap.add_argument("--nixl-path", help="a directory holding the nixl packages (pd-nixl)")
    ap.add_argument("--client", help="E=host,P=host,D=host: run only the proxy's part (inside a namespace)")
    args = ap.parse_args()
    if args.client:
        return client_main(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(args.out, exist_ok=True)
    reqs = requests_for(args.prompt_words, args.image_side)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    status = {}
    for name in configs:
        out = os.path.join(args.out, name)
        subprocess.run(["rm", "-rf", out])
        if name == "base":
            # The stock reference involves no rzmq code: reused from the cache when nothing it
            # depends on changed (refcache.py; RZMQ_REF_CACHE=0 runs it, as figure runs must).
            ref_key = base_key(args, reqs)
            if refcache.restore(f"vllm-base-{os.path.basename(args.venv)}", ref_key, out):
                with open(os.path.join(out, "result.json")) as f:
                    status[name] = json.load(f)
                print(f"[vllm] {name}: reused (key {ref_key})", flush=True)
                continue
        os.makedirs(out)
        env = {**base_env(), "VLLM_PLUGINS": "rzmq,rzmq_vllm_trace", "RZMQ_VLLM_TEST_FAULTS": "1" if name == "kill" else "0"}
        env_rzmq = {**env, "RZMQ_RDMA_PROVIDER": "soft", "RZMQ_RDMA_LOG": "1"}
        shm_before = shm_entries()
        inst = Instances(args, out)
        t0 = time.time()
        rec = {"config": name, "dtype": args.dtype}
        try:
            if name == "base":
                inst.start("base", [], env)
                inst.wait_ready()
                cpu0 = inst.cpu_seconds()
                results = run_base(reqs, args.model)
            elif name in ("pd", "pd-mooncake", "pd-nixl"):
                envs = [env, env]
                if name == "pd":
                    flags = [kv_config("RzmqKVConnector", r, "127.0.0.1", out, False) for r in ("kv_producer", "kv_consumer")]
                elif name == "pd-nixl":  # vLLM's NixlConnector, CPU KV buffer, UCX
                    if not args.nixl_path:
                        raise RuntimeError("pd-nixl needs --nixl-path (the nixl packages, installed by run.sh)")
                    flags = [["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": r,
                                                                  "kv_buffer_device": "cpu"})]
                             for r in ("kv_producer", "kv_consumer")]
                    envs = [{**env, "PYTHONPATH": args.nixl_path, "VLLM_NIXL_SIDE_CHANNEL_PORT": str(port),
                             "UCX_TLS": "tcp,self,sm"} for port in (5600, 5601)]
                else:  # vLLM's MooncakeConnector over Mooncake's transfer engine (TCP: no RDMA here)
                    flags = [["--kv-transfer-config", json.dumps({
                        "kv_connector": "MooncakeConnector", "kv_role": r, "engine_id": MOONCAKE_ENGINE if r == "kv_producer"
                        else "rzmq-test-decode", "kv_connector_extra_config": {"mooncake_protocol": "tcp"}})]
                        for r in ("kv_producer", "kv_consumer")]
                if name == "pd":
                    envs = [env_rzmq, env_rzmq]
                inst.start("P", [*flags[0], "--no-enable-prefix-caching"], envs[0], None, name == "pd")
                inst.start("D", flags[1], envs[1], None, name == "pd")
                inst.wait_ready()
                cpu0 = inst.cpu_seconds()
                results = run_epd(inst, reqs, args.model, encoder=False, mooncake=name == "pd-mooncake",
                                  nixl=name == "pd-nixl")
                if name == "pd":
                    rec["rzmq_metrics"] = scrape_rzmq(inst, out)
            else:
                files = name == "epd-files"
                ec, kv = ("ECExampleConnector", "ExampleConnector") if files else ("RzmqECConnector", "RzmqKVConnector")
                e = env if files else env_rzmq
                hosts = {"E": "127.0.0.1", "P": "127.0.0.1", "D": "127.0.0.1", "PD": "127.0.0.1"}
                ns = {"E": None, "P": None, "D": None, "PD": None}
                machine = {"P": "A", "PD": "A"}
                if name == "epd-netns":
                    netns_up()
                    hosts = {"E": NETNS_IP[0], "P": NETNS_IP[1], "D": NETNS_IP[0], "PD": NETNS_IP[0]}
                    ns = {"E": NETNS[0], "P": NETNS[1], "D": NETNS[0], "PD": NETNS[0]}
                    machine = {"P": "B", "PD": "A"}
                producers = [f"{hosts['E']}:{EC_PORT}"]
                inst.start("E", ec_config(ec, "ec_producer", hosts["E"], out, files, push=name != "kill"), e, ns["E"], not files, hosts["E"])
                inst.start("P", [*ec_config(ec, "ec_consumer", hosts["P"], out, files, producers, machine["P"]),
                                 *kv_config(kv, "kv_producer", hosts["P"], out, files), "--no-enable-prefix-caching"],
                           e, ns["P"], not files, hosts["P"])
                inst.start("D", kv_config(kv, "kv_consumer", hosts["D"], out, files), e, ns["D"], not files, hosts["D"])
                if name in WITH_PD:
                    inst.start("PD", ec_config(ec, "ec_consumer", hosts["PD"], out, files, producers, machine["PD"]),
                               e, ns["PD"], not files, hosts["PD"])
                else:
                    hosts.pop("PD")
                if name == "epd-netns":  # the proxy runs on host A, as E and D do
                    cpu0 = None
                    client = ["ip", "netns", "exec", NETNS[0], sys.executable, os.path.abspath(__file__), "--venv",
                              args.venv, "--model", args.model, "--out", out, "--prompt-words",
                              str(args.prompt_words), "--image-side", str(args.image_side), "--dtype", args.dtype, "--client",
                              ",".join(f"{k}={v}" for k, v in hosts.items())]
                    subprocess.run(client, env=env, check=True, timeout=1200)
                    with open(os.path.join(out, "client.json")) as f:
                        got = json.load(f)
                    results = got["results"]
                    if "results_e_pd" in got:
                        rec["results_e_pd"] = got["results_e_pd"]
                else:
                    inst.wait_ready()
                    cpu0 = inst.cpu_seconds()
                    results = run_epd(inst, reqs, args.model)
                    if name in WITH_PD:
                        rec["results_e_pd"] = run_e_pd(inst, reqs, args.model)
                    if not files:
                        rec["rzmq_metrics"] = scrape_rzmq(inst, out)
                    if name == "kill":
                        rec["cpu"] = {k: round(v - cpu0.get(k, 0.0), 2) for k, v in inst.cpu_seconds().items()}
                        cpu0 = None
                        rec["phase_end"] = time.time()
                        rec["kill"] = run_kill(inst, args.model, args.prompt_words, args.image_side)
            if cpu0 is not None:
                rec["cpu"] = {k: round(v - cpu0.get(k, 0.0), 2) for k, v in inst.cpu_seconds().items()}
            rec["results"] = results
            rec["ok"] = True
        except Exception as ex:  # noqa: BLE001  (reported; the configuration fails)
            rec["ok"] = False
            rec["error"] = str(ex)
            import traceback

            traceback.print_exc()
            print(f"[vllm] {name}: {ex}", flush=True)
        finally:
            inst.stop()
            if name == "epd-netns":
                netns_down()
        for machine in ("A", "B"):
            subprocess.run(["rm", "-rf", host_cache_dir(machine)])
        rec["shm_left"] = sorted(x for x in shm_entries() - shm_before if not x.startswith(("psm_", "sem.loky")))
        rec["seconds"] = round(time.time() - t0, 1)
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(rec, f, indent=1)
        status[name] = rec
        print(f"[vllm] {name}: {'ran' if rec['ok'] else 'FAILED'} in {rec['seconds']:.0f} s", flush=True)
        if name == "base" and rec["ok"] and not rec["shm_left"]:
            refcache.store(f"vllm-base-{os.path.basename(args.venv)}", ref_key, out)
    import verify

    return verify.main([args.out, *configs])


if __name__ == "__main__":
    sys.exit(main())

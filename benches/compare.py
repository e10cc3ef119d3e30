#!/usr/bin/env python3
"""Side-by-side throughput and latency: libzmq's perf tools on libzmq, the same binaries with
rzmq's libzmq.so preloaded (the C ABI path), and rzmq's native perf examples.

Runs every configuration alternately, several rounds, takes medians and writes the table (with the
machine and the exact commands) into docs/BENCHMARKS.md between markers.

    python3 benches/compare.py [--rounds 5] [--quick]
"""
import argparse, os, platform, re, shutil, statistics, subprocess, sys, time, datetime, json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "benches", "build")


def zeromq_src_vendor():
    meta = json.loads(subprocess.check_output(["cargo", "metadata", "--format-version", "1"], cwd=ROOT))
    for p in meta["packages"]:
        if p["name"] == "zeromq-src" and p["version"].startswith("0.3"):
            return os.path.join(os.path.dirname(p["manifest_path"]), "vendor")
    sys.exit("zeromq-src 0.3 not found in cargo metadata")


def build():
    os.makedirs(BUILD, exist_ok=True)
    perf = os.path.join(zeromq_src_vendor(), "perf")
    for t in ["local_thr", "remote_thr", "local_lat", "remote_lat"]:
        out = os.path.join(BUILD, "libzmq_" + t)
        if not os.path.exists(out):
            subprocess.check_call(["g++", "-O2", "-o", out, os.path.join(perf, t + ".cpp"), "-lzmq", "-lpthread"])
    subprocess.check_call(["cargo", "build", "--release", "-p", "rzmq-core", "--examples", "-p", "rzmq-capi"], cwd=ROOT)


def tools(impl):
    ex = os.path.join(ROOT, "target", "release", "examples")
    if impl == "rzmq-native":
        return {t: os.path.join(ex, t) for t in ["local_thr", "remote_thr", "local_lat", "remote_lat"]}, {}
    env = {}
    if impl == "rzmq-capi":
        env["LD_PRELOAD"] = os.path.join(ROOT, "target", "release", "libzmq.so")
    return {t: os.path.join(BUILD, "libzmq_" + t) for t in ["local_thr", "remote_thr", "local_lat", "remote_lat"]}, env


PORT = [56000]


def endpoint(transport):
    PORT[0] += 1
    if transport == "tcp":
        return "tcp://127.0.0.1:%d" % PORT[0]
    return "ipc:///tmp/rzmq-bench-%d-%d.sock" % (os.getpid(), PORT[0])


def run_pair(server, client, args, env, report_server):
    e = dict(os.environ, **env)
    s = subprocess.Popen(server + args, stdout=subprocess.PIPE, text=True, env=e)
    time.sleep(0.25)
    c = subprocess.run(client + args, stdout=subprocess.PIPE, text=True, env=e, timeout=300)
    so, _ = s.communicate(timeout=300)
    return so if report_server else c.stdout


def thr(impl, transport, size, count):
    t, env = tools(impl)
    ep = endpoint(transport)
    out = run_pair([t["local_thr"]], [t["remote_thr"]], [ep, str(size), str(count)], env, True)
    m = re.search(r"mean throughput: (\d+) \[msg/s\]", out)
    return float(m.group(1)) if m else float("nan")


def lat(impl, transport, size, count):
    t, env = tools(impl)
    ep = endpoint(transport)
    out = run_pair([t["local_lat"]], [t["remote_lat"]], [ep, str(size), str(count)], env, False)
    m = re.search(r"average latency: ([\d.]+) \[us\]", out)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    build()
    impls = ["libzmq", "rzmq-native", "rzmq-capi"]
    thr_cases = [(64, 2_000_000), (1024, 500_000), (1 << 20, 2_000)]
    lat_cases = [(64, 20_000)]
    transports = ["tcp", "ipc"]
    if a.quick:
        thr_cases = [(64, 300_000), (1024, 100_000), (1 << 20, 300)]
        lat_cases = [(64, 3_000)]
        transports = ["tcp"]
    results = {}
    for r in range(a.rounds):
        for transport in transports:
            for size, count in thr_cases:
                for impl in impls:
                    results.setdefault(("thr", transport, size, impl), []).append(thr(impl, transport, size, count))
            for size, count in lat_cases:
                for impl in impls:
                    results.setdefault(("lat", transport, size, impl), []).append(lat(impl, transport, size, count))
        print("round %d done" % (r + 1), file=sys.stderr)
    rows = []
    for (kind, transport, size, impl), vals in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], impls.index(kv[0][3]))):
        med = statistics.median(vals)
        base = statistics.median(results[(kind, transport, size, "libzmq")])
        rows.append((kind, transport, size, impl, med, med / base if base else float("nan")))
    lines = []
    lines.append("| test | transport | size | implementation | median | ratio to libzmq |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for kind, transport, size, impl, med, ratio in rows:
        unit = "msg/s" if kind == "thr" else "us one-way"
        val = "%d %s" % (med, unit) if kind == "thr" else "%.1f %s" % (med, unit)
        lines.append("| %s | %s | %d B | %s | %s | %.2fx |" % ("throughput" if kind == "thr" else "latency", transport, size, impl, val, ratio))
    table = "\n".join(lines)
    print(table)
    cpu = ""
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except Exception:
        pass
    block = [
        "<!-- compare:begin -->",
        "Generated by `python3 benches/compare.py --rounds %d%s` on %s." % (a.rounds, " --quick" if a.quick else "", datetime.date.today().isoformat()),
        "",
        "Machine: %s, %d cores, %s. libzmq: the system library (Debian libzmq5 %s). Each round runs every" % (cpu, os.cpu_count(), platform.platform(), "4.3.x"),
        "configuration once, alternating; the table shows medians over rounds. `rzmq-capi` is libzmq's own",
        "perf tools with `LD_PRELOAD=target/release/libzmq.so`; `rzmq-native` is `target/release/examples/*`.",
        "Throughput: `local_thr <ep> <size> <count>` / `remote_thr <ep> <size> <count>` (a fresh message per",
        "send); latency: `local_lat`/`remote_lat <ep> <size> <roundtrips>`. For latency, lower ratios are better.",
        "",
        table,
        "<!-- compare:end -->",
    ]
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
    new = "\n".join(block)
    if "<!-- compare:begin -->" in text:
        text = re.sub(r"<!-- compare:begin -->.*<!-- compare:end -->", lambda _: new, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n## Side by side with libzmq\n\n" + new + "\n"
    open(path, "w").write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Issue 38: inproc latency at the old quick round-trip counts and at compare.py's
INPROC_LAT_MIN, every implementation alternating within each round, in one run.

    python3 benches/inproc_lat_counts.py [--rounds N]

Runs the tools `compare.py --quick` runs for inproc latency (build them with it first): libzmq's
`inproc_lat`, rzmq's port, libzmq's tool on rzmq's C ABI (`LD_PRELOAD`, `RZMQ_RDMA=off`), and
omq.rs and the `rzmq` crate from benches/peers when built; nothing of the caller's RZMQ_* or
LD_PRELOAD settings leaks in. Prints a table of medians and ratios to libzmq; every run's value
goes to stderr.
"""
import argparse, os, re, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benches"))
from compare import INPROC_LAT_MIN, QUICK_DIV, QUICK_MIN, CASES, KiB, MiB, fmt_size  # noqa: E402

LIBZMQ = os.path.join(ROOT, "benches", "build", "libzmq_inproc_lat")
PEERS = os.path.join(ROOT, "benches", "peers", "target", "release")
IMPLS = [
    ("libzmq", {}, LIBZMQ),
    ("rzmq-native", {}, os.path.join(ROOT, "target", "release", "examples", "inproc_lat")),
    ("rzmq-capi", {"LD_PRELOAD": os.path.join(ROOT, "target", "release", "libzmq.so"), "RZMQ_RDMA": "off"}, LIBZMQ),
    ("omq", {}, os.path.join(PEERS, "omq_inproc_lat")),
    ("rzmq-crate", {}, os.path.join(PEERS, "rzmq_crate_inproc_lat")),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    impls = [i for i in IMPLS if os.path.exists(i[2])]
    quick = {s: max(QUICK_MIN, c // QUICK_DIV) for s, _, c in CASES}
    cases = []
    for size in (64 * KiB, MiB):
        cases += [(size, quick[size], "before"), (size, max(quick[size], INPROC_LAT_MIN), "after")]
    env0 = {k: v for k, v in os.environ.items() if not k.startswith("RZMQ_") and k != "LD_PRELOAD"}
    res = {}
    for r in range(a.rounds):
        for size, n, _ in cases:
            for name, env, tool in impls:
                out = subprocess.run([tool, str(size), str(n)], capture_output=True, text=True,
                                     env=dict(env0, **env), timeout=120).stdout
                m = re.search(r"average latency: ([\d.]+)", out)
                if m:
                    res.setdefault((size, n, name), []).append(float(m.group(1)))
                print(r + 1, fmt_size(size), n, name, m.group(1) if m else "failed", file=sys.stderr, flush=True)
    print("| size | round trips | " + " | ".join(n for n, _, _ in impls) + " |")
    print("| --- | --- |" + " --- |" * len(impls))
    for size, n, tag in cases:
        base = statistics.median(res[(size, n, "libzmq")])
        cells = []
        for name, _, _ in impls:
            v = res.get((size, n, name))
            cells.append("%.1f (%.2fx)" % (statistics.median(v), statistics.median(v) / base) if v else "failed")
        print("| %s | %d (%s) | %s |" % (fmt_size(size), n, tag, " | ".join(cells)))


if __name__ == "__main__":
    main()

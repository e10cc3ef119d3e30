"""Markdown table of a run.py summary (OUT/summary.json): the phase-2 metrics per configuration.

    table.py OUT/summary.json [--title TEXT]
"""

from __future__ import annotations

import argparse
import json
import math

NAMES = {
    "a": "stock libzmq, SharedMemoryConnector",
    "b": "rzmq (TCP), RzmqConnector",
    "c": "rzmq (RDMA, soft), RzmqConnector",
    "d": "rzmq, 2 hosts (RDMA, soft), RzmqConnector",
    "d-te": "stock libzmq, 2 hosts, Mooncake TE (TCP)",
    "te": "stock libzmq, Mooncake TE (TCP)",
    "store": "stock libzmq, Mooncake Store (TCP)",
}


def fmt(x, spec=".1f"):
    return "-" if x is None or math.isnan(x) else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    args = ap.parse_args()
    with open(args.summary) as f:
        s = json.load(f)
    rows = [s["reference"], *s["runs"]]
    print("| configuration | finished | identical | TTFT ms | first audio ms | 0->1 bytes | 0->1 latency ms "
          "| 0->1 put ms | 0->1 get ms | 1->2 latency ms | CPU s / request |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        name = r["dir"].rstrip("/").rsplit("/", 1)[-1]
        e01 = r["edges"].get("0->1", {})
        e12 = r["edges"].get("1->2", {})
        same = "reference" if r is s["reference"] else ("yes" if r.get("identical") else "NO")
        print(f"| {name}: {NAMES.get(name, name)} | {r['finished']}/{r['requests']} | {same} "
              f"| {fmt(r['ttft_s_median'] * 1e3, '.0f')} | {fmt(r['ttfa_s_median'] * 1e3, '.0f')} "
              f"| {fmt(e01.get('bytes_median'), '.0f')} | {fmt(e01.get('latency_ms_median'))} "
              f"| {fmt(e01.get('put_ms_median'), '.2f')} | {fmt(e01.get('get_ms_median'), '.2f')} "
              f"| {fmt(e12.get('latency_ms_median'))} | {fmt(r['cpu_s_per_request'])} |")


if __name__ == "__main__":
    main()

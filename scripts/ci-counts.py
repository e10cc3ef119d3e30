#!/usr/bin/env python3
"""How many tests each suite ran, read from `.ci/run` logs (docs/TESTING.md): one column per log,
so a change to how CI runs can show that every test still runs.

    python3 scripts/ci-counts.py BEFORE.log AFTER.log

Each suite counts the tests that ran (passed or failed; skipped, ignored and not-applicable ones
are not counted), from the lines its runner prints: cargo's `test result:` lines, split by the
part that printed them (test.sh's `[test]` lines, loom's and Miri's closing lines); the
compatibility harnesses' and pytest's summaries, each taken for the part whose `[test]` line
follows it; the real runs' configurations; the fuzz targets. Exits 1 when a suite ran fewer
tests in a later log than in the first.
"""

from __future__ import annotations

import re
import sys

CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
# Lines that end a stretch of output, with the suite that the stretch's cargo results belong to.
ENDS = [
    (re.compile(r"^\[test\]\s+\d+ s wall .*cargo test --workspace"), "cargo test (workspace)"),
    (re.compile(r"^\[test\]\s+\d+ s wall .*--test patterns -- "), "pattern matrix, RDMA soft"),
    (re.compile(r"^\[test\]\s+\d+ s wall .*--test patterns --config"), "pattern matrix, RDMA ibverbs"),
    (re.compile(r"^loom: \d+ models passed"), "loom models"),
    (re.compile(r"^miri: done"), "Miri"),
    (re.compile(r"^\[test\]|^\[ci\]"), None),
]
# Suites whose runners print their own summary: (suite, pattern, groups summed, the part whose
# `[test]` line must follow for the count to be its, or None).
SUMMARIES = [
    ("libzmq suite (stable, then DRAFT)", re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$"), (1, 2),
     "run-libzmq-tests"),
    ("pyzmq DRAFT tests", re.compile(r"^(\d+) passed(?:, \d+ warnings?)? in"), (1,), "run-pyzmq-draft-tests"),
    ("pyzmq suite, preloaded", re.compile(r"^\[pyzmq-compat\] preload: (\d+) passed, (\d+) failed"), (1, 2), None),
    ("pyzmq suite, wheel (run and activate)",
     re.compile(r"\[pyzmq-compat\] wheel-\w+: (\d+) passed, (\d+) failed"), (1, 2), None),
    ("wheel's own tests", re.compile(r"^\[test-wheel\]\s+(\d+) passed(?:, \d+ deselected)? in"), (1,), None),
    ("vLLM-style traffic", re.compile(r"^(\d+) passed, (\d+) failed$"), (1, 2), "pyzmq_vllm_traffic"),
    ("vllm-omni connector tests", re.compile(r"^(\d+) passed(?:, \d+ skipped)?(?:, \d+ warnings)? in"), (1,),
     "tests/omni/run.sh"),
    ("real runs: compare.py's own tests", re.compile(r"^(\d+) passed in"), (1,), "tests/real/run.sh"),
    ("jupyter_client and ipykernel suites",
     re.compile(r"^\[jupyter-compat\] \w+ preload run \d+: (\d+) passed"), (1,), None),
    ("real runs: configurations finished", re.compile(r"^\[real\] \w[\w-]*: exit 0 in"), (), None),
    ("real runs: stock references reused", re.compile(r"^\[real\] a: the stock reference reused"), (), None),
    ("vLLM runs: configurations", re.compile(r"^\[vllm\] [\w-]+: (?:ran in|reused)"), (), None),
    ("fuzz targets", re.compile(r"^fuzz-smoke: \w+ ok \("), (), None),
]


def counts(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    pending = 0
    waiting: list[tuple[str, int, str]] = []  # summaries that wait for their part's [test] line
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            # the beside-lane log is printed with its lines as they were
            m = CARGO.match(line)
            if m:
                pending += int(m.group(1)) + int(m.group(2))
                continue
            for pat, suite in ENDS:
                if pat.search(line):
                    if suite and pending:
                        out[suite] = out.get(suite, 0) + pending
                    pending = 0
                    break
            if line.startswith(("[test]", "[ci]")):
                for suite, n, part in waiting:
                    if part in line:
                        out[suite] = out.get(suite, 0) + n
                waiting = []
            for suite, pat, groups, part in SUMMARIES:
                m = pat.search(line)
                if m:
                    n = sum(int(m.group(g) or 0) for g in groups) if groups else 1
                    if part:
                        waiting.append((suite, n, part))
                    else:
                        out[suite] = out.get(suite, 0) + n
    return out


def main() -> int:
    logs = sys.argv[1:]
    if not logs:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tables = [counts(p) for p in logs]
    suites = [s for _, s in ENDS if s] + [s for s, _, _, _ in SUMMARIES]
    print("| suite | " + " | ".join(logs) + " |")
    print("| --- |" + " --- |" * len(logs))
    fewer = []
    for s in suites:
        row = [t.get(s, 0) for t in tables]
        print(f"| {s} | " + " | ".join(str(n) for n in row) + " |")
        if any(n < row[0] for n in row[1:]):
            fewer.append(s)
    print("| all | " + " | ".join(str(sum(t.values())) for t in tables) + " |")
    if fewer:
        print(f"fewer tests than in {logs[0]}: {', '.join(fewer)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

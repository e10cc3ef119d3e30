#!/usr/bin/env bash
# CI's checks that only compute (packaging the published crates, the loom models, Miri, the fuzz
# smoke run), one after another. .ci/run hands this script to scripts/test.sh
# (RZMQ_TEST_BESIDE), which runs it at the lowest priority beside its parts after the rust one:
# those parts mostly wait (timeouts, kernels starting, vLLM stages between requests) and leave a
# core idle, so these checks fill it instead of adding their own minutes (docs/TESTING.md, "How
# the parts overlap"). Each check prints its wall and CPU time; the first that fails ends the
# script with its status.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cpu-time.sh
source scripts/cpu-time.sh
TIMES=()
for s in package.sh loom.sh miri.sh fuzz-smoke.sh; do
  t0=$SECONDS
  cpu_children
  c0=$CPU_CHILDREN
  bash "scripts/$s"
  cpu_children
  TIMES+=("$(printf '%-14s %5d s wall %6d s cpu' "$s" $((SECONDS - t0)) $((CPU_CHILDREN - c0)))")
done
printf '[beside] %s\n' "${TIMES[@]}"

#!/usr/bin/env bash
# loom over rzmq-core's output hand-off (docs/ARCHITECTURE.md, "Model checks"): the loom_* tests
# of src/loom_tests.rs explore every interleaving of small models of spsc, byteq, the mailbox,
# the pipe's wake-ups and direct/tx's grant and revoke, up to LOOM_MAX_PREEMPTIONS preemptions
# (default 3 here); then rzmq-tokio's models of its waiter slots (rzmq-tokio/src/loom_tests.rs).
# Built with `--cfg loom` in a target directory of its own (target/loom), so
# the normal build stays as it is. Fails when a model fails or when no test ran.
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
start=$(date +%s)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" nice cargo test -p rzmq-core --release --lib \
  --target-dir target/loom -- loom_ --test-threads=1 2>&1 | tee "$out"
# rzmq-tokio's waiter slots (src/loom_tests.rs there), in the same target directory.
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" nice cargo test -p rzmq-tokio --release --lib \
  --target-dir target/loom -- loom_ --test-threads=1 2>&1 | tee -a "$out"
ran=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
if [ -z "$ran" ] || [ "$ran" -eq 0 ]; then
  echo "loom: FAILED: no loom test ran" >&2
  exit 1
fi
echo "loom: $ran models passed (LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS) in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Fuzz smoke run (docs/FUZZ.md): builds every target in fuzz/ once with cargo-fuzz (release,
# debug assertions, AddressSanitizer) and runs each for FUZZ_SECONDS (default 10) from its seed
# corpus. Exits non-zero on any crash, leak, timeout or out-of-memory; the input that did it is
# in fuzz/artifacts/<target>/. New corpus entries go to a scratch directory, not to the seeds.
# Installs the nightly toolchain and cargo-fuzz when absent.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-10}"

# What cannot be installed (no network, no rustup) is reported and the run skipped, loudly: a
# machine without the tool says nothing about the code, so under CI=true it fails. A crash always fails.
skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "fuzz-smoke: FAILED: $1 (CI=true: a check that cannot run is a failure)" >&2
    exit 1
  fi
  echo "fuzz-smoke: SKIPPED: $1" >&2
  exit 0
}
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal || skip "could not install nightly"
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked ||
  skip "could not install cargo-fuzz"

cd fuzz
# Targets from the manifest's [[bin]] sections; FUZZ_TARGETS="a b" narrows the run.
targets="${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}"
start=$(date +%s)
nice cargo +nightly fuzz build
echo "fuzz-smoke: built in $(( $(date +%s) - start )) s"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail=0
for t in $targets; do
  mkdir -p "$scratch/$t" "corpus/$t"
  # -rss_limit_mb: a peer may make us allocate, but never gigabytes; -timeout: no input may
  # take a second.
  if ! nice cargo +nightly fuzz run "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -timeout=5 -print_final_stats=1 \
      >"$scratch/$t.log" 2>&1; then
    echo "fuzz-smoke: $t FAILED:" >&2
    tail -60 "$scratch/$t.log" >&2
    fail=1
  else
    runs=$(grep -o 'number_of_executed_units: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$')
    echo "fuzz-smoke: $t ok (${runs:-?} runs)"
  fi
done
echo "fuzz-smoke: done in $(( $(date +%s) - start )) s"
exit $fail

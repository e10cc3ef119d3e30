#!/usr/bin/env bash
# Miri over rzmq-core's lock-free queues, frame storage and messages (docs/FUZZ.md), the C ABI's
# handle table and rzmq-tokio's waiter slots: the unit tests of spsc, byteq, small, pool, msg,
# signal, rzmq-capi's handle and rzmq-tokio's waiters run in the interpreter, which fails on
# undefined behaviour (out-of-bounds or misaligned access, use after free, data races, Stacked
# Borrows violations, leaks). Tests that need what Miri cannot do (sockets, `poll`, huge
# mappings) or that take minutes interpreted carry `#[cfg_attr(miri, ignore)]`.
# Installs the nightly toolchain with miri and rust-src when absent.
set -euo pipefail
cd "$(dirname "$0")/.."

# What cannot be installed (no network, no rustup) is reported and the run skipped, loudly: a
# machine without the tool says nothing about the code, so under CI=true it fails. A failing test always fails.
skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "miri: FAILED: $1 (CI=true: a check that cannot run is a failure)" >&2
    exit 1
  fi
  echo "miri: SKIPPED: $1" >&2
  exit 0
}
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal --component miri,rust-src ||
    skip "could not install the nightly toolchain with miri"
elif ! rustup run nightly cargo miri --version >/dev/null 2>&1; then
  rustup component add --toolchain nightly miri rust-src ||
    skip "could not add miri to the nightly toolchain"
fi
rustup run nightly cargo miri setup >/dev/null || skip "cargo miri setup failed (sysroot build)"

# MIRIFLAGS: Miri's defaults (isolation on: a virtual monotonic clock and deterministic
# randomness are all these tests need; Stacked Borrows; leak check on), plus huge pages off for
# the frame pool: its huge-page path trims an over-sized mapping with partial munmaps, which
# Miri's mmap emulation cannot model (not UB; that path is covered by the native tests). A
# caller's MIRIFLAGS replace these.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-env-set=RZMQ_HUGE_PAGES=0}"
start=$(date +%s)
nice cargo +nightly miri test -p rzmq-core --lib -- \
  spsc:: byteq:: small:: pool:: msg:: signal:: testing::miri_queues:: "$@"
# The C ABI's handle table: a closed handle's tag stays readable through the application's
# pointer (Stacked Borrows) and eviction frees it once; rzmq-tokio's waiter slots.
nice cargo +nightly miri test -p rzmq-capi --lib -- handle::tests:: "$@"
nice cargo +nightly miri test -p rzmq-tokio --lib -- waiters::tests:: "$@"
echo "miri: done in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Packs, into .dev/ (ignored), what scripts/device_check.sh runs on a lent machine that has no
# Rust toolchain and no libzmq: stripped test binaries and perf examples built here, our
# libzmq.so and libibverbs_soft.so, and the reference libzmq.so.5 with its libraries.
# Run after `cargo build --release --workspace --examples` and
# `cargo test --release --workspace --no-run`, and after benches/compare.py built benches/build;
# then `cargo build --release -p rzmq-capi` once more, since the workspace builds relink
# target/release/libzmq.so with the features of every member unified.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .dev && mkdir -p .dev/bin .dev/lib .dev/ibv .dev/tests
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
newest() { ls -t target/release/deps/"$1"-* | grep -v '\.d$' | head -1; }
# Every test binary (scripts/device_check.sh runs some, and all in its concurrency sweep), except those that need cargo, a C compiler or
# paths of this checkout (emulated_ibverbs, c_programs, exports, perf_tools).
for f in target/release/deps/*-????????????????; do
  n="$(basename "$f")"; n="${n%-*}"
  case "$n" in emulated_ibverbs|c_programs|exports|perf_tools|codec|memory|msg|pipe|ring|routing) continue;; esac
  [ -x "$f" ] && [ "$f" = "$(newest "$n")" ] && file "$f" | grep -q ELF && strip -o ".dev/tests/$n" "$f"
done
for e in local_thr remote_thr local_lat remote_lat rdma_local_thr rdma_remote_thr; do
  strip -o ".dev/bin/$e" "target/release/examples/$e"
done
for e in local_thr remote_thr local_lat remote_lat; do
  strip -o ".dev/bin/libzmq_$e" "benches/build/libzmq_$e"
done
strip -o .dev/lib/librzmq.so target/release/libzmq.so
strip -o .dev/ibv/libibverbs.so.1 target/release/libibverbs_soft.so
# The reference libzmq and what it links, except the C runtime every machine has.
for l in $(ldd /usr/lib/x86_64-linux-gnu/libzmq.so.5 | awk '/=>/ {print $3}') \
         /usr/lib/x86_64-linux-gnu/libzmq.so.5; do
  case "$(basename "$l")" in libc.so*|libm.so*|libpthread.so*|libgcc_s.so*|libstdc++.so*|libresolv.so*) continue;; esac
  cp -L "$l" .dev/lib/
done
du -sh .dev

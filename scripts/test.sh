#!/usr/bin/env bash
# The project's test command:
#   1. unit, property and integration tests of every crate (interop against the reference
#      libzmq, perf tools on the wire, hostile peers, the C ABI, the soft RDMA provider);
#   2. libzmq 4.3.5's own test suite compiled against our zmq.h and libzmq.so (compat/);
#   3. pyzmq's test suite on the stock wheel with our libzmq.so preloaded, plus vLLM-style
#      traffic between a process on stock libzmq and one on rzmq (compat/).
# Set RZMQ_TEST_QUICK=1 to run only step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=1
cargo build --release --workspace            # libraries, including target/release/libzmq.so
cargo build --release --workspace --examples # the perf examples and the demo
cargo test --workspace --release -- --test-threads=2
if [ "${RZMQ_TEST_QUICK:-0}" = "1" ]; then
  exit 0
fi
compat/run-libzmq-tests.sh --lib target/release --no-report
RZMQ_SKIP_BUILD=1 compat/run-pyzmq-tests.sh --mode preload

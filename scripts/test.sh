#!/usr/bin/env bash
# The project's test command:
#   1. unit, property and integration tests of every crate (interop against the reference
#      libzmq, perf tools on the wire, hostile peers, the C ABI, the soft RDMA provider);
#   2. libzmq 4.3.5's own test suite compiled against our zmq.h and libzmq.so (compat/), then
#      its DRAFT tests against the `draft` build, and pyzmq's DRAFT tests on a DRAFT pyzmq;
#   3. pyzmq's test suite on the stock wheel with our libzmq.so preloaded, plus vLLM-style
#      traffic between a process on stock libzmq and one on rzmq (compat/);
#   4. the vllm-omni connector (python/tests/omni) between processes, over TCP, soft RDMA and
#      network namespaces, and the real vllm-omni pipeline on rzmq (python/tests/real);
#   5. RDMA on the soft provider: the socket-pattern matrix with RDMA required (on soft, and on
#      the ibverbs provider over the emulated libibverbs.so.1), and vLLM-style
#      traffic through the C ABI with RDMA required, on loopback and across network namespaces.
# Set RZMQ_TEST_QUICK=1 to run only step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=1
# Runs one part and prints its wall time (what CI's 60-minute budget is spent on).
part() {
  local t0=$SECONDS
  "$@"
  echo "[test] $((SECONDS - t0)) s: $*" | cut -c1-120
}
part cargo build --release --workspace       # libraries, including target/release/libzmq.so
# cargo test builds every example too (the perf tools and the demo that tests drive), with the
# dev-dependencies' features; a separate `cargo build --examples` resolves features differently
# and compiled the workspace a third time (about 3 min in CI).
part cargo test --workspace --release -- --test-threads=2
# The pattern matrix again, every tcp connection required to move to RDMA (soft provider).
RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft \
  cargo test --release -p rzmq-tests --test patterns -- --test-threads=2
# The same matrix through the unmodified ibverbs provider, over the soft NIC behind the
# libibverbs C ABI (rzmq-ibverbs-soft, loaded as libibverbs.so.1 from a private directory).
IBV_SOFT_DIR="$PWD/target/ibverbs-soft"
mkdir -p "$IBV_SOFT_DIR"
ln -sf "$PWD/target/release/libibverbs_soft.so" "$IBV_SOFT_DIR/libibverbs.so.1"
# LD_LIBRARY_PATH reaches only the test process (as a runner): set on cargo itself, it would make
# rdma-mummy-sys' build script (bindgen/clang-sys watches LD_LIBRARY_PATH) run again and
# rebuild everything above it. Equivalent to
#   RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs LD_LIBRARY_PATH=target/ibverbs-soft \
#     cargo test --release -p rzmq-tests --test patterns
RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs \
  cargo test --release -p rzmq-tests --test patterns \
  --config "target.'cfg(all())'.runner=['env','LD_LIBRARY_PATH=$IBV_SOFT_DIR']" \
  -- --test-threads=2
if [ "${RZMQ_TEST_QUICK:-0}" = "1" ]; then
  exit 0
fi
part compat/run-libzmq-tests.sh --lib target/release --no-report
# The DRAFT API: libzmq's tests with DRAFT code, built with -DZMQ_BUILD_DRAFT_API, against the
# `draft` build of libzmq.so (target/draft; about 2.5 min on 2 cores once built, most of it
# two tests at their 60 s limit), then pyzmq built from its sdist with ZMQ_DRAFT_API=1 against
# it, running pyzmq's test_draft.py (about 1 min). Expected failures: compat/*draft-test-notes.tsv.
part compat/run-libzmq-tests.sh --draft --no-report
part compat/run-pyzmq-draft-tests.sh --lib target/draft/release
RZMQ_SKIP_BUILD=1 part compat/run-pyzmq-tests.sh --mode preload
# The rzmq Python wheel (scripts/build-wheel.sh) in a fresh venv without build tools: activation
# (rzmq run, RZMQ_ACTIVATE=1), spawn/fork workers, rzmq doctor, and pyzmq's suite served by it.
part scripts/test-wheel.sh
# vLLM-style traffic through the C ABI with RDMA required (soft provider): loopback, then two
# network namespaces joined by veth (when root), then the refusal of a stock libzmq peer.
NETNS_FLAG=()
if [ "$(id -u)" = "0" ] && command -v ip >/dev/null; then NETNS_FLAG=(--netns); fi
part compat/build/venv-wheel/bin/python compat/pyzmq_vllm_traffic.py \
  --ours "$PWD/target/release/libzmq.so" --rdma "${NETNS_FLAG[@]}"
# The vllm-omni connector (python/rzmq/omni) in the real vllm-omni 0.30.0 environment (torch,
# vLLM, vllm-omni; python/tests/real/env.sh makes it once, about 7 GB, and reuses it): payloads
# of 1 KiB to 64 MiB between processes over TCP, soft RDMA (required) and two network namespaces;
# dicts of tensors without copies; several consumers of one key; hostile requests; a producer
# killed mid-transfer. The same run tests rzmq's vLLM EC and KV connectors (rzmq.vllm) in process.
part python/tests/omni/run.sh
# Real vllm-omni serving a tiny random Qwen2.5-Omni (thinker -> talker -> code2wav, a process
# each) on vLLM's CPU engines (python/tests/real): the same requests on the stock pyzmq wheel with
# SharedMemoryConnector (a), under `rzmq run` with RzmqConnector over TCP (b), over RDMA (soft
# provider) across two network namespaces (d), and with the talker killed mid-request (kill, over
# RDMA on loopback); every token id, audio sample and stage payload must equal the stock run's.
# Configuration c (RDMA on loopback, finishing) is d's path without the namespaces; it runs by
# default in run.sh, not here, to keep CI within its budget (each configuration is ~2 min).
part python/tests/real/run.sh --configs a,b,d,kill
# vLLM's own disaggregation on real vLLM CPU engines (python/tests/vllm): encoder -> prefill ->
# decode `vllm serve` instances under `rzmq run` (RDMA, soft provider) with RzmqECConnector and
# RzmqKVConnector, plus encoder -> prefill/decode (a fourth instance, a second EC consumer), on
# one host and across two network namespaces, then each producer killed mid-transfer; outputs
# must equal one instance without connectors, vLLM's schedulers must show that the consumers
# computed no encoder input and no prompt token the connectors brought, each embedding must be
# fetched once per host, and a consumer whose producer died must fail that request, hold
# nothing afterwards and serve the next.
part python/tests/vllm/run.sh --configs base,kill,epd-netns
# The Qwen-Omni disaggregated-pipeline replica (examples/omni): the same traffic on stock libzmq,
# on rzmq over tcp and on rzmq with RDMA required (soft); every output must match.
part examples/omni/run.sh --quick --no-tests  # the connector's tests ran above

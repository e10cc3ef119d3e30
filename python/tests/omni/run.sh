#!/usr/bin/env bash
# Runs the vllm-omni connector's tests (python/tests/omni/test_connector.py) against the real
# vllm-omni 0.30.0 wheel, with rzmq's libzmq.so preloaded into the test process and its peers.
#
# usage: python/tests/omni/run.sh [pytest args...]
# Environment: RZMQ_LIB (default <repo>/target/release/libzmq.so, built if missing), PYTHON
# (default python3), OMNI_TEST_VENV (default python/build/omni-venv).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
LIB=${RZMQ_LIB:-$ROOT/target/release/libzmq.so}
VENV=${OMNI_TEST_VENV:-$ROOT/python/build/omni-venv}
PYTHON=${PYTHON:-python3}
# vllm-omni without its dependencies (torch and vLLM cannot be installed here: vllm_omni_shim.py
# says what stands in for them); the connector layer's own imports are installed for real.
WANT="vllm-omni==0.30.0 pyzmq==27.3.0 numpy msgspec pillow omegaconf pyyaml pytest pytest-timeout"
if [ "$(cat "$VENV/.deps" 2>/dev/null)" != "$WANT" ]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
    "$VENV/bin/pip" install -q --only-binary :all: pyzmq==27.3.0 numpy msgspec pillow omegaconf pyyaml pytest pytest-timeout
    "$VENV/bin/pip" install -q --no-deps vllm-omni==0.30.0
    echo "$WANT" > "$VENV/.deps"
fi
[ -f "$LIB" ] || (cd "$ROOT" && cargo build --release -p rzmq-capi)
export RZMQ_LIB="$LIB"
cd "$ROOT"
LD_PRELOAD="$LIB" "$VENV/bin/python" -m pytest -q -p no:cacheprovider --timeout 300 python/tests/omni "$@"

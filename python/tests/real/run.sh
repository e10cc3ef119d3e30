#!/usr/bin/env bash
# Real vllm-omni 0.30 (vLLM's CPU engines) serving a local Qwen2.5-Omni, end to end, on rzmq:
# the same requests in each configuration, outputs compared with the stock run. Prints which
# libzmq served each process, each connection's transport, per-edge bytes and latency, and
# whether every token id, audio sample and stage payload is identical to the stock run.
#
# usage: python/tests/real/run.sh [--model qwen2_5|qwen3] [--configs a,b,c,d,...] [--size tiny|7b]
#                                 [--out DIR] [--requests N]
#   --model qwen3: a tiny Qwen3-Omni (MoE thinker and talker, code2wav) made locally
#   (make_tiny_qwen3_omni.py), served as vllm-omni's qwen3_omni_moe.yaml does: streaming
#   (async_chunk: true), thinker and talker batching; default qwen2_5 (Qwen2.5-Omni, no streaming);
#   configurations: run.py's docstring (default a,b,c,d,kill-a,kill,te,store);
#   --size 7b: the model whose thinker hidden size is Qwen2.5-Omni-7B's (3584): megabytes of
#   stage payload per request.
# First run: about 7 GB and 5 minutes for the environment (env.sh), then it is reused. Needs
# root for configuration d (network namespaces).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
CONFIGS="a,b,c,d,kill-a,kill,te"
FAMILY=qwen2_5
SIZE=tiny
OUT="$ROOT/python/build/real"
REQUESTS=4
while [ $# -gt 0 ]; do
    case "$1" in
        --configs) CONFIGS=$2; shift 2 ;;
        --model) FAMILY=$2; shift 2 ;;
        --size) SIZE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if ! { command -v ip >/dev/null && ip netns add rzr-probe 2>/dev/null && ip netns del rzr-probe; }; then
    CONFIGS=$(echo "$CONFIGS" | tr ',' '\n' | { grep -vx -e d -e d-te || true; } | paste -sd, -)
    echo "[real] network namespaces cannot be made here (root and iproute2 needed): d and d-te left out" >&2
fi
if ! ls "$ROOT"/dist/rzmq-*.whl >/dev/null 2>&1; then
    "$ROOT/scripts/build-wheel.sh" >&2
fi
VENV=$("$HERE/env.sh" | tail -1)
MODELS=${RZMQ_REAL_MODELS:-$HOME/.cache/rzmq/models}
case "$SIZE" in
    tiny) HIDDEN=64 ;;
    7b) HIDDEN=3584 ;;
    *) echo "--size tiny or 7b" >&2; exit 2 ;;
esac
mkdir -p "$MODELS"
case "$FAMILY" in
    qwen2_5) MODEL="$MODELS/qwen2_5_omni-h$HIDDEN"; MAKE="$HERE/make_tiny_model.py"; RUN_OUT="$OUT/$SIZE" ;;
    qwen3) MODEL="$MODELS/qwen3_omni-h$HIDDEN"; MAKE="$HERE/make_tiny_qwen3_omni.py"; RUN_OUT="$OUT/qwen3-$SIZE" ;;
    *) echo "--model qwen2_5 or qwen3" >&2; exit 2 ;;
esac
# compare.py's verdicts on made-up runs first (a second): it decides what the runs below prove.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$HERE/test_compare.py" >&2
"$VENV/bin/python" "$MAKE" "$MODEL" --thinker-hidden "$HIDDEN" >&2
exec "$VENV/bin/python" "$HERE/run.py" --venv "$VENV" --model "$MODEL" --out "$RUN_OUT" \
    --configs "$CONFIGS" --requests "$REQUESTS"

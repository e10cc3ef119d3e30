#!/usr/bin/env bash
# jupyter_client's and ipykernel's own test suites (from their sdists) on the stock pyzmq wheel,
# with rzmq's libzmq.so preloaded into pytest and every kernel it starts (they inherit
# LD_PRELOAD): real pyzmq clients that start, restart, interrupt and shut kernels down, which
# is how a zmq_ctx_term that never returned was found (issue 46). Stock runs the same tests
# without the preload, to tell this environment's failures from rzmq's.
#
# usage: compat/run-jupyter-tests.sh [--mode preload|reference|both] [--runs N] [--load]
#                                    [--suites jupyter_client,ipykernel] [-- PYTEST_ARGS...]
#   --runs N   run each suite N times in a row (each run must pass)
#   --load     keep both cores busy with a CPU burner during the runs (the conditions under
#              which the two timing-sensitive tests failed once)
# Tests that fail for reasons of their own under load (on stock too): compat/jupyter-test-notes.tsv
# (suite::test id <TAB> flaky <TAB> reason and evidence), rerun up to 3 times, in both modes
# alike. Everything lives in compat/build/ (gitignored).
# Environment: PYTHON (default python3), RZMQ_SKIP_BUILD=1 (use the existing
# target/release/libzmq.so).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COMPAT="$ROOT/compat"
BUILD="$COMPAT/build"
PYTHON=${PYTHON:-python3}
LIB="$ROOT/target/release/libzmq.so"
MODE=preload
RUNS=1
LOAD=0
SUITES=jupyter_client,ipykernel
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --mode) MODE=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --load) LOAD=1; shift ;;
        --suites) SUITES=$2; shift 2 ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$MODE" in preload) MODES=(preload) ;; reference) MODES=(reference) ;; both) MODES=(reference preload) ;;
    *) echo "--mode preload, reference or both" >&2; exit 2 ;; esac
say() { echo "[jupyter-compat] $*"; }

# The versions under test, and the test requirements each suite declares (pyproject.toml's
# `test` extra) that install from PyPI, pinned so every run tests the same thing.
PYZMQ=pyzmq==27.3.0
JC_VERSION=8.10.0
IK_VERSION=7.4.0
DEPS=("$PYZMQ" "jupyter_client==$JC_VERSION" "ipykernel==$IK_VERSION" pytest==9.2.0
      pytest-timeout==2.4.0 "pytest-jupyter[client]==0.11.0" pytest-asyncio==1.5.0
      pytest-cov==7.1.0 anyio==4.16.0 msgpack==1.2.4 flaky==3.8.1 psutil==7.2.2 ipyparallel==9.2.0)
VENV="$BUILD/venv-jupyter"
STAMP="${DEPS[*]}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
mkdir -p "$BUILD"
if [ "$(cat "$VENV/.rzmq-deps" 2>/dev/null)" != "$STAMP" ]; then
    say "creating $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    nice -n 10 "$VENV/bin/pip" install -q "${DEPS[@]}"
    echo "$STAMP" > "$VENV/.rzmq-deps"
fi
# The suites' tests come from their sdists (the wheels do not carry them).
tests_of() {
    local name=$1 version=$2 dir="$BUILD/$1-$2"
    if [ ! -f "$dir/pyproject.toml" ]; then
        "$VENV/bin/pip" download -q --no-binary "$name" --no-deps "$name==$version" -d "$BUILD" >&2
        tar -xzf "$BUILD/$name-$version.tar.gz" -C "$BUILD"
    fi
    echo "$dir"
}
if [ "${RZMQ_SKIP_BUILD:-0}" != 1 ]; then
    (cd "$ROOT" && nice -n 10 cargo build --release -p rzmq-capi -q)
fi
[ -f "$LIB" ] || { echo "$LIB is missing" >&2; exit 1; }

# The notes: tests that fail for reasons of their own under load, on stock too (the reason and
# the evidence are in the notes). They run apart from the rest, each up to 3 times, and pass if
# one attempt passes; everything else must pass at its first attempt.
NOTES="$COMPAT/jupyter-test-notes.tsv"
flaky_of() {
    [ -f "$NOTES" ] || return 0
    awk -F'\t' -v s="$1" '$1 !~ /^#/ && index($1, s"::") == 1 && $2 == "flaky" {
        sub(s"::", "", $1); print $1 }' "$NOTES"
}

# run_suite SUITE MODE RUN: the suite in the mode, its flaky tests apart; writes its log.
run_suite() {
    local suite=$1 mode=$2 run=$3 dir log t0 rc=0 envv=() deselect=() t attempt
    case "$suite" in
        jupyter_client) dir="$BUILD/jupyter_client-$JC_VERSION" ;;
        ipykernel) dir="$BUILD/ipykernel-$IK_VERSION" ;;
    esac
    [ "$mode" = preload ] && envv=(LD_PRELOAD="$LIB")
    log="$BUILD/jupyter-$suite-$mode-$run.log"
    mapfile -t flaky < <(flaky_of "$suite")
    for t in "${flaky[@]}"; do deselect+=(--deselect "$t"); done
    t0=$SECONDS
    # From the sdist's root (its conftest and test utilities), without its coverage and doctest
    # options; its per-test timeout and its warnings-as-errors stay.
    pytest_in() {
        (cd "$dir" && env "${envv[@]}" JUPYTER_PLATFORM_DIRS=1 timeout 1800 \
            "$VENV/bin/python" -m pytest -q -p no:cacheprovider -o addopts="" -o log_cli=false \
            -o asyncio_default_fixture_loop_scope=function "$@")
    }
    pytest_in tests --junitxml="$BUILD/jupyter-$suite-$mode-$run.xml" "${deselect[@]}" \
        "${EXTRA[@]}" > "$log" 2>&1 || rc=1
    for t in "${flaky[@]}"; do
        for attempt in 1 2 3; do
            if pytest_in "$t" >> "$log" 2>&1; then
                [ "$attempt" = 1 ] || echo "[flaky] $t passed at attempt $attempt" >> "$log"
                break
            fi
            echo "[flaky] $t failed at attempt $attempt" >> "$log"
            [ "$attempt" = 3 ] && rc=1
        done
    done
    local summary
    summary=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed)" "$log" | head -1 | sed 's/=//g')
    if [ "$rc" = 0 ]; then
        say "$suite $mode run $run: ${summary:-passed}$(grep -c '^\[flaky\].*failed' "$log" | sed 's/^0$//; s/.\+/, flaky reruns: &/') ($((SECONDS - t0)) s)"
    else
        say "$suite $mode run $run FAILED ($((SECONDS - t0)) s): $log"
        grep -E "^(FAILED|ERROR) |^\[flaky\]" "$log" | head -20 || tail -30 "$log"
    fi
    return $rc
}

BURNER=()
if [ "$LOAD" = 1 ]; then
    for _ in 1 2; do ( while :; do :; done ) & BURNER+=($!); done
    trap 'kill "${BURNER[@]}" 2>/dev/null || true' EXIT
    say "load: two CPU burners (pids ${BURNER[*]})"
fi

status=0
for mode in "${MODES[@]}"; do
    # Which libzmq serves pyzmq in this mode (all of pyzmq's calls must go to it).
    if [ "$mode" = preload ]; then
        LD_PRELOAD="$LIB" "$VENV/bin/python" "$COMPAT/pyzmq_preload_check.py" --expect rzmq \
            --lib "$LIB" >/dev/null || { say "preload: pyzmq is not served by $LIB"; exit 1; }
    else
        "$VENV/bin/python" "$COMPAT/pyzmq_preload_check.py" --expect stock --lib "$LIB" >/dev/null ||
            { say "reference: pyzmq is not served by its own libzmq"; exit 1; }
    fi
    for suite in ${SUITES//,/ }; do
        case "$suite" in
            jupyter_client) tests_of jupyter_client "$JC_VERSION" >/dev/null ;;
            ipykernel) tests_of ipykernel "$IK_VERSION" >/dev/null ;;
            *) echo "unknown suite $suite" >&2; exit 2 ;;
        esac
    done
    for run in $(seq 1 "$RUNS"); do
        # The suites at the same time: both mostly wait (kernels starting, replies, timeouts).
        pids=()
        for suite in ${SUITES//,/ }; do
            run_suite "$suite" "$mode" "$run" & pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || status=1; done
    done
done
exit $status

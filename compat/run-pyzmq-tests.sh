#!/usr/bin/env bash
# Runs pyzmq's own test suite against rzmq's libzmq and writes the pyzmq section of docs/COMPAT.md.
#
# usage: compat/run-pyzmq-tests.sh [--mode reference|preload|source|all]... [--timeout S]
#                                  [--no-traffic] [--prepare]
#   reference  the stock pyzmq manylinux wheel with its bundled libzmq: which tests fail for
#              reasons of this environment (no rzmq involved)
#   preload    the same wheel with LD_PRELOAD=<repo>/target/release/libzmq.so, proved to take over
#              (compat/pyzmq_preload_check.py); then the vLLM-style traffic check
#              compat/pyzmq_vllm_traffic.py between processes on rzmq and on the stock libzmq
#   source     pyzmq built from its sdist against `scripts/install.sh compat/build/prefix`
#              (ZMQ_PREFIX=..., --no-binary pyzmq), run with LD_LIBRARY_PATH=PREFIX/lib
#   all        the three (default)
#   --prepare  only make the stock wheel's venv and fetch the sdist's tests (what needs the
#              network), then exit: a later run in a network namespace of its own
#              (scripts/isolate.sh, as scripts/test.sh does) finds them made
# Tests are pyzmq's tests/ from the sdist of the same version as the wheel (PYZMQ_VERSION,
# default 27.3.0). Known differences are listed in compat/pyzmq-test-notes.tsv
# (test id <TAB> modes <TAB> xfail|deselect <TAB> reason). Everything lives in compat/build/
# (gitignored): venvs, sdist, prefix, logs, junit XML (pyzmq-<mode>.xml).
# Exits non-zero on any failure the notes do not list; the last line is
# 'N passed, M failed, K skipped' over the modes run.
#
# Environment: PYTHON (default python3), PYZMQ_VERSION, RZMQ_SKIP_BUILD=1 (use the existing
# target/release/libzmq.so), CARGO (default cargo).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COMPAT="$ROOT/compat"
BUILD="$COMPAT/build"
PYTHON=${PYTHON:-python3}
PYZMQ_VERSION=${PYZMQ_VERSION:-27.3.0}
CARGO=${CARGO:-cargo}
LIB="$ROOT/target/release/libzmq.so"
PREFIX="$BUILD/prefix"
TIMEOUT=60
TRAFFIC=1
PREPARE=0
MODES=()

while [ $# -gt 0 ]; do
    case "$1" in
        --mode) MODES+=("$2"); shift 2 ;;
        --mode=*) MODES+=("${1#--mode=}"); shift ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --no-traffic) TRAFFIC=0; shift ;;
        --prepare) PREPARE=1; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ ${#MODES[@]} -eq 0 ] && MODES=(all)
WANT=""
for m in "${MODES[@]}"; do
    case "$m" in
        all) WANT="reference,preload,source" ;;
        reference|preload|source) WANT="${WANT:+$WANT,}$m" ;;
        *) echo "unknown mode: $m" >&2; exit 2 ;;
    esac
done
want() { case ",$WANT," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

say() { echo "[pyzmq-compat] $*"; }
mkdir -p "$BUILD"
# pip resolves against PyPI only; its wheel cache would hide a rebuild of the source mode
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# shared with scripts/test-wheel.sh: PYZMQ_TEST_DEPS, pyzmq_sdist_tests
source "$COMPAT/pyzmq-tests.sh"
TEST_DEPS=("${PYZMQ_TEST_DEPS[@]}")

# make_venv DIR: a venv with pyzmq's test requirements (what installs cleanly from PyPI)
make_venv() {
    local dir=$1 stamp="$1/.rzmq-deps"
    local want_stamp="$PYZMQ_VERSION ${TEST_DEPS[*]}"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want_stamp" ]; then
        return 0
    fi
    say "creating $dir"
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    nice -n 10 "$dir/bin/pip" install -q "${TEST_DEPS[@]}"
    echo "$want_stamp" > "$stamp"
}

# --- stock wheel venv + the sdist's tests (needed by every mode) -------------------------------
WHEEL_VENV="$BUILD/venv-wheel"
make_venv "$WHEEL_VENV"
if ! "$WHEEL_VENV/bin/python" -c "import zmq, sys; sys.exit(zmq.pyzmq_version() != '$PYZMQ_VERSION')" 2>/dev/null; then
    nice -n 10 "$WHEEL_VENV/bin/pip" install -q --only-binary pyzmq "pyzmq==$PYZMQ_VERSION"
fi
WHEEL_LIBZMQ=$(ls "$WHEEL_VENV"/lib/python3*/site-packages/pyzmq.libs/libzmq*.so* 2>/dev/null | head -1 || true)
if [ -z "$WHEEL_LIBZMQ" ]; then
    echo "the pyzmq $PYZMQ_VERSION wheel installed without a bundled libzmq in pyzmq.libs/" >&2
    exit 1
fi
SDIST="$BUILD/pyzmq-$PYZMQ_VERSION.tar.gz"
TESTS=$(pyzmq_sdist_tests "$WHEEL_VENV/bin/pip" "$BUILD" "$PYZMQ_VERSION")
if [ "$PREPARE" = 1 ]; then
    say "prepared: $WHEEL_VENV, $TESTS"
    exit 0
fi

# --- our library -------------------------------------------------------------------------------
SETUP_FAILED=()
if want preload || want source; then
    if [ "${RZMQ_SKIP_BUILD:-0}" != 1 ]; then
        say "building rzmq-capi (release)"
        if ! (cd "$ROOT" && nice -n 10 "$CARGO" build --release -p rzmq-capi) > "$BUILD/pyzmq-capi-build.log" 2>&1; then
            tail -20 "$BUILD/pyzmq-capi-build.log" >&2
            want preload && SETUP_FAILED+=(--setup-failed "preload=cargo build --release -p rzmq-capi failed (compat/build/pyzmq-capi-build.log)")
            want source && SETUP_FAILED+=(--setup-failed "source=cargo build --release -p rzmq-capi failed (compat/build/pyzmq-capi-build.log)")
        fi
    fi
    if [ ! -f "$LIB" ] && [ ${#SETUP_FAILED[@]} -eq 0 ]; then
        want preload && SETUP_FAILED+=(--setup-failed "preload=$LIB is missing")
        want source && SETUP_FAILED+=(--setup-failed "source=$LIB is missing")
    fi
fi

# --- source build of pyzmq against scripts/install.sh PREFIX ------------------------------------
SOURCE_VENV="$BUILD/venv-source"
if want source && [ ${#SETUP_FAILED[@]} -eq 0 ]; then
    if ! RZMQ_SKIP_BUILD=1 "$ROOT/scripts/install.sh" "$PREFIX" > "$BUILD/pyzmq-install.log" 2>&1; then
        cat "$BUILD/pyzmq-install.log" >&2
        SETUP_FAILED+=(--setup-failed "source=scripts/install.sh $PREFIX failed (compat/build/pyzmq-install.log)")
    else
        make_venv "$SOURCE_VENV"
        # rebuild when the headers change (the library itself is linked dynamically)
        want_stamp="$PYZMQ_VERSION $(sha256sum "$PREFIX/include/zmq.h" | cut -c1-16)"
        if [ "$(cat "$SOURCE_VENV/.rzmq-pyzmq" 2>/dev/null)" != "$want_stamp" ]; then
            say "building pyzmq $PYZMQ_VERSION from source against $PREFIX (log: compat/build/pyzmq-source-build.log)"
            "$SOURCE_VENV/bin/pip" uninstall -q -y pyzmq >/dev/null 2>&1 || true
            if ZMQ_PREFIX="$PREFIX" nice -n 10 "$SOURCE_VENV/bin/pip" install -v --no-cache-dir \
                    --no-binary pyzmq "$SDIST" > "$BUILD/pyzmq-source-build.log" 2>&1; then
                echo "$want_stamp" > "$SOURCE_VENV/.rzmq-pyzmq"
            else
                tail -30 "$BUILD/pyzmq-source-build.log" >&2
                SETUP_FAILED+=(--setup-failed "source=pip install --no-binary pyzmq with ZMQ_PREFIX failed (compat/build/pyzmq-source-build.log)")
            fi
        fi
        if [ -f "$SOURCE_VENV/.rzmq-pyzmq" ] && ls "$SOURCE_VENV"/lib/python3*/site-packages/pyzmq.libs >/dev/null 2>&1; then
            SETUP_FAILED+=(--setup-failed "source=the source build bundled its own libzmq instead of linking $PREFIX")
        fi
    fi
fi

ARGS=(--modes "$WANT" --build "$BUILD" --tests "$TESTS" --wheel-python "$WHEEL_VENV/bin/python"
      --source-python "$SOURCE_VENV/bin/python" --lib "$LIB" --prefix "$PREFIX"
      --pyzmq-version "$PYZMQ_VERSION" --timeout "$TIMEOUT")
[ "$TRAFFIC" = 0 ] && ARGS+=(--no-traffic)
exec nice -n 10 "$WHEEL_VENV/bin/python" "$COMPAT/pyzmq_compat.py" "${ARGS[@]}" "${SETUP_FAILED[@]}"

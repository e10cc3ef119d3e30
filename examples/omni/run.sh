#!/usr/bin/env bash
# Runs the Qwen-Omni traffic replica (omni.py) on stock libzmq, on rzmq over tcp and on rzmq with
# RDMA required (soft provider), then prints per-edge latency, TTFT / time to first audio,
# throughput, bytes moved with and without embedding sharing, and whether every output matched.
#
# usage: examples/omni/run.sh [--quick] [--modes libzmq,rzmq-tcp,rzmq-rdma] [--sharing-both]
#                             [--netns] [--no-tests] [--timeout S] [--out DIR] [-- omni.py run options]
#   --quick         small scale (3B hidden size, small media, 48 requests): under a minute
#   --no-tests      skip the connector's tests (python/tests/omni/run.sh, run first)
#   --modes         which runs (default all three):
#                     libzmq     the pyzmq wheel's own libzmq (no preload)
#                     rzmq-tcp   LD_PRELOAD=<repo>/target/release/libzmq.so
#                     rzmq-rdma  the same plus RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft RZMQ_RDMA_LOG=1
#                                (until rzmq honours these, it runs over tcp; the report says which
#                                transport rzmq logged, if any)
#   --sharing-both  every mode also without embedding sharing (default: one extra --no-sharing run,
#                   on rzmq-tcp or else the first mode, for the bytes-moved comparison)
#   --netns         every stage in its own network namespace (root and `ip netns` only; else a warning)
#   --timeout S     per run (default 120 with --quick, else 900); a run past it is killed
#   --out DIR       results and logs (default examples/omni/build/<quick|full>)
#   --benchmarks    write the report into docs/BENCHMARKS.md (between the omni markers)
# Exits non-zero when a run fails, a stage reports a verification error, or the outputs differ
# across runs. Environment: PYTHON (default python3) to create examples/omni/.venv; OMNI_VENV to use
# another venv with pyzmq, msgpack and numpy.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LIB="$ROOT/target/release/libzmq.so"
PYTHON=${PYTHON:-python3}
VENV=${OMNI_VENV:-$HERE/.venv}
PYZMQ_VERSION=${PYZMQ_VERSION:-27.3.0}
QUICK=0
MODES="libzmq,rzmq-tcp,rzmq-rdma"
SHARING_BOTH=0
TESTS=1
NETNS=()
TIMEOUT=""
OUT=""
EXTRA=()
BENCH=0
ARGS_SEEN="$*"

while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; shift ;;
        --modes) MODES=$2; shift 2 ;;
        --modes=*) MODES=${1#--modes=}; shift ;;
        --sharing-both) SHARING_BOTH=1; shift ;;
        --netns) NETNS=(--netns); shift ;;
        --no-tests) TESTS=0; shift ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --benchmarks) BENCH=1; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
for m in ${MODES//,/ }; do
    case "$m" in libzmq|rzmq-tcp|rzmq-rdma) ;; *) echo "unknown mode: $m" >&2; exit 2 ;; esac
done

say() { echo "[omni] $*"; }
T0=$(date +%s)

# --- python environment: the stock pyzmq wheel (its bundled libzmq is the 'libzmq' mode) ---------
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# vllm-omni 0.30.0 without its dependencies: the stages build rzmq's connector through its real
# factory (python/tests/omni/vllm_omni_shim.py says what stands in for torch and vLLM)
WANT_STAMP="pyzmq==$PYZMQ_VERSION msgpack numpy msgspec pillow omegaconf pyyaml pytest pytest-timeout"
if [ -z "${OMNI_VENV:-}" ] && [ "$(cat "$VENV/.omni-deps" 2>/dev/null)" != "$WANT_STAMP" ]; then
    say "creating $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    # shellcheck disable=SC2086
    nice -n 10 "$VENV/bin/pip" install -q --only-binary pyzmq $WANT_STAMP
    nice -n 10 "$VENV/bin/pip" install -q --no-deps vllm-omni==0.30.0
    echo "$WANT_STAMP" > "$VENV/.omni-deps"
fi
PY="$VENV/bin/python"

# --- our library --------------------------------------------------------------------------------
case ",$MODES," in
    *,rzmq-*)
        if [ ! -f "$LIB" ]; then
            say "building rzmq-capi (release)"
            (cd "$ROOT" && nice -n 10 cargo build --release -p rzmq-capi)
        fi ;;
esac

# --- scale --------------------------------------------------------------------------------------
if [ "$QUICK" = 1 ]; then
    SCALE=(--preset 3b --requests 48 --concurrency 4 --image 640x360 --video 8x448x252 --audio-seconds 5
           --media-per-request 2 --library 6 --fresh 0.25 --text-tokens 32 --max-tokens 32 --cache-mb 6 --encoder-cache-mb 4
           --registry-mb 256 --pool-mb 256 --timeout 90)
    TIMEOUT=${TIMEOUT:-120}
    OUT=${OUT:-$HERE/build/quick}
else
    SCALE=(--timeout 800)
    TIMEOUT=${TIMEOUT:-900}
    OUT=${OUT:-$HERE/build/full}
fi
rm -rf "$OUT"
mkdir -p "$OUT"

# --- one run at a time, in its own process group; everything is killed on exit ------------------
CHILD=""
cleanup() {
    if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
        kill -TERM -- "-$CHILD" 2>/dev/null || true
        sleep 1
        kill -KILL -- "-$CHILD" 2>/dev/null || true
    fi
    if [ -n "$CHILD" ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
        # namespaces of a launcher that was killed before it could remove them (omni.py Netns)
        tag="om$((CHILD % 100000))"
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${tag}h" || true); do
            ip netns del "$ns" 2>/dev/null || true
        done
        ip link del "${tag}br" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

RESULTS=()
LOGS=()
FAILED=0
# run_mode MODE [--no-sharing]
run_mode() {
    local mode=$1 label=$1 env_args=(env -u LD_PRELOAD -u RZMQ_RDMA -u RZMQ_RDMA_PROVIDER -u RZMQ_RDMA_LOG) expect
    shift
    [ "${1:-}" = --no-sharing ] && label="$mode-nosharing"
    case "$mode" in
        libzmq) expect=stock ;;
        rzmq-tcp) expect=rzmq; env_args+=("LD_PRELOAD=$LIB") ;;
        rzmq-rdma) expect=rzmq; env_args+=("LD_PRELOAD=$LIB" RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft RZMQ_RDMA_LOG=1) ;;
    esac
    say "run $label ($(date -u +%H:%M:%S))"
    local t=$(date +%s) rc=0
    mkdir -p "$OUT/logs/$label"
    setsid "${env_args[@]}" timeout -k 10 "$TIMEOUT" nice -n 10 "$PY" "$HERE/omni.py" run --mode "$mode" \
        --expect-lib "$expect" "${SCALE[@]}" "${NETNS[@]}" "$@" "${EXTRA[@]}" \
        --out "$OUT/$label.json" --logdir "$OUT/logs/$label" > "$OUT/logs/$label/frontend.log" 2>&1 &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=""
    cat "$OUT/logs/$label/frontend.log"
    if [ "$rc" != 0 ]; then
        FAILED=1
        [ "$rc" = 124 ] && say "$label: killed after $TIMEOUT s"
        say "$label: exit status $rc (logs: $OUT/logs/$label)"
    fi
    say "$label: $(( $(date +%s) - t )) s"
    RESULTS+=("$OUT/$label.json")
    [ "$mode" != libzmq ] && LOGS+=(--logs "$label=$OUT/logs/$label")
    return 0
}

# --- the connector's tests (python/tests/omni: vllm-omni's connector layer, between processes) ---
if [ "$TESTS" = 1 ]; then
    say "connector tests (python/tests/omni/run.sh)"
    if ! RZMQ_LIB="$LIB" timeout -k 5 600 nice -n 10 "$ROOT/python/tests/omni/run.sh" > "$OUT/pytest-connector.txt" 2>&1; then
        FAILED=1
        cat "$OUT/pytest-connector.txt"
        say "connector tests FAILED"
    else
        say "connector tests: $(tail -1 "$OUT/pytest-connector.txt")"
    fi
fi

for m in ${MODES//,/ }; do
    run_mode "$m"
done
NOSH=""
if [ "$SHARING_BOTH" = 1 ]; then
    NOSH=${MODES//,/ }
else
    case ",$MODES," in *,rzmq-tcp,*) NOSH=rzmq-tcp ;; *) NOSH=${MODES%%,*} ;; esac
fi
for m in $NOSH; do
    run_mode "$m" --no-sharing
done

rc=0
"$PY" "$HERE/omni.py" report "${RESULTS[@]}" "${LOGS[@]}" > "$OUT/report.txt" || rc=$?
cat "$OUT/report.txt"
if [ "$BENCH" = 1 ] && [ "$rc" = 0 ] && [ "$FAILED" = 0 ]; then
    "$PY" - "$ROOT/docs/BENCHMARKS.md" "$OUT/report.txt" "examples/omni/run.sh $ARGS_SEEN" <<'PYEOF'
import datetime, os, re, sys
path, report, cmd = sys.argv[1:4]
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
block = "\n".join([
    "<!-- omni:begin -->",
    f"Generated by `{cmd}` on {datetime.date.today().isoformat()} ({cpu}, {os.cpu_count()} cores, shared and noisy:",
    "compare the runs with each other, not across days). Modes: `libzmq` is the pyzmq wheel's own libzmq;",
    "`rzmq-tcp` preloads our libzmq.so; `rzmq-rdma` adds `RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft`.",
    "",
    "```",
    open(report).read().rstrip(),
    "```",
    "<!-- omni:end -->",
])
if "<!-- omni:begin -->" in text:
    text = re.sub(r"<!-- omni:begin -->.*<!-- omni:end -->", lambda _: block, text, flags=re.S)
else:
    text = text.rstrip() + "\n\n## Qwen-Omni pipeline replica (examples/omni)\n\n" + block + "\n"
open(path, "w").write(text)
PYEOF
    say "report written to docs/BENCHMARKS.md"
fi
say "total $(( $(date +%s) - T0 )) s; results in $OUT"
if [ "$FAILED" != 0 ] || [ "$rc" != 0 ]; then
    say "FAILED"
    exit 1
fi
say "PASSED"

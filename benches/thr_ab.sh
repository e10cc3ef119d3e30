#!/bin/bash
# Alternating throughput rounds of one size on one transport, medians and ratios to libzmq from
# the same run (a narrower, hand-run form of compare.py's throughput rows).
#
#   benches/thr_ab.sh <rounds> <tcp|ipc> <size> <count> <impl>...
#
# impl: libzmq (benches/build/libzmq_{local,remote}_thr, built by compare.py), native
# (target/release/examples), capi (LD_PRELOAD=target/release/libzmq.so RZMQ_RDMA=off on
# libzmq's tools), raw (benches/build/raw_perf), native:<dir> (local_thr/remote_thr in <dir>,
# e.g. a copy of an earlier build), capi:<libzmq.so>. libzmq must be one of them.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/benches/build
rounds=$1 tr=$2 size=$3 count=$4
shift 4
out=$(mktemp)
n=0
for r in $(seq 1 "$rounds"); do
    for impl in "$@"; do
        n=$((n + 1))
        case $tr in
            ipc) ep=ipc:///tmp/rzmq-thr-ab-$$-$n.sock ;;
            *) ep=tcp://127.0.0.1:$((20000 + ($$ % 2000) * 10 + n % 10)) ;;
        esac
        pre=()
        case $impl in
            libzmq) L=("$B/libzmq_local_thr") R=("$B/libzmq_remote_thr") ;;
            raw) L=("$B/raw_perf" local_thr) R=("$B/raw_perf" remote_thr) ;;
            native) L=("$ROOT/target/release/examples/local_thr") R=("$ROOT/target/release/examples/remote_thr") ;;
            native:*) L=("${impl#native:}/local_thr") R=("${impl#native:}/remote_thr") ;;
            capi | capi:*)
                so=$ROOT/target/release/libzmq.so
                [ "$impl" != capi ] && so=${impl#capi:}
                pre=(env LD_PRELOAD="$so" RZMQ_RDMA=off)
                L=("$B/libzmq_local_thr") R=("$B/libzmq_remote_thr") ;;
            *) echo "unknown implementation $impl" >&2; exit 2 ;;
        esac
        res=$(
            timeout 120 "${pre[@]}" "${L[@]}" "$ep" "$size" "$count" 2>&1 &
            sleep 0.3
            timeout 120 "${pre[@]}" "${R[@]}" "$ep" "$size" "$count" >/dev/null 2>&1
            wait
        )
        thr=$(echo "$res" | awk '/mean throughput/ && /msg\/s/ {print $3}')
        echo "$impl $r ${thr:-failed}" | tee -a "$out"
    done
done
awk -v tr="$tr" -v size="$size" -v count="$count" -v rounds="$rounds" '
    $3 != "failed" { v[$1] = v[$1] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
    function median(s,   a, m, i, j, t) {
        m = split(s, a, " ")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
        base = median(v["libzmq"])
        printf "%s %s B x %s, %s rounds, medians (msg/s) and ratio to libzmq:\n", tr, size, count, rounds
        for (i = 1; i <= k; i++) { m = median(v[order[i]]); printf "  %-28s %10.0f  %.2fx  (%s )\n", order[i], m, m / base, v[order[i]] }
    }' "$out"
rm -f "$out"

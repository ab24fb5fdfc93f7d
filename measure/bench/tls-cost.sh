#!/usr/bin/env bash
# What TLS costs (docs/benchmarks.md, docs/security.md): the same build with TLS off and
# on, alternated round by round (off, on, off, on, ...) so that drift of a noisy machine
# hits both alike. One node: put and refresh (take+ack), 64 connections x 1 in flight;
# three nodes: put, 16 connections x 32 in flight. fsync always. Prints each figure and
# the on/off ratio of the medians, for throughput and for the servers' CPU time per op.
#
#   measure/bench/tls-cost.sh            ROUNDS (3) and SECS (8 per run) from the environment
#
# TLS on means every link: clients to nodes, and mutual TLS between the members
# (measure/bench/dueq.sh with DUEQ_TLS=1). Every server listens on 127.0.0.1 and is
# stopped by its PID.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-build}
rounds=${ROUNDS:-3} secs=${SECS:-8}
bench=$root/$build/measure/bench/dueq-bench
[ -x "$bench" ] || { echo "missing $bench: build first" >&2; exit 2; }
work=$(mktemp -d /tmp/dueq-tls-cost.XXXXXX)
pids=()
source "$(dirname "$0")/alternate-lib.sh"
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
measure() {  # ADDRS SCENARIO QUEUE CONNS DEPTH TLSDIR PIDS...: "OPS_PER_S CPU_US_PER_OP"
  local addrs=$1 scenario=$2 queue=$3 conns=$4 depth=$5 tls=$6 before ops
  shift 6
  local creds=()
  [ -z "$tls" ] || creds=(--cacert "$tls/ca.pem")
  before=$(cpu_ticks "$@")
  ops=$("$bench" "$scenario" -b dueq -a "$addrs" -c "$conns" -d "$depth" --warmup 1 -s "$secs" \
    --keys 20000 --queue "$queue" --json "${creds[@]}" |
    python3 -c 'import json,sys
r = json.load(sys.stdin)["results"][-1]  # a refresh run lists its preload first
print("  errors %s, empty takes %s" % (r["errors"], r["empty_takes"]), file=sys.stderr)
print(round(r["ops_per_s"]))')
  awk -v ops="$ops" -v t=$(($(cpu_ticks "$@") - before)) -v hz="$clk_tck" -v s="$secs" \
    'BEGIN { printf "%d %.2f\n", ops, t / hz * 1e6 / (ops * (s + 1)) }'
}
declare -A figures cpu
record() { read -r ops us <<<"$2"; figures[$1]+="$ops "; cpu[$1]+="$us "; }
for round in $(seq 1 "$rounds"); do
  for side in off on; do
    tls_env=0
    [ $side = on ] && tls_env=1
    dir=$work/$side-$round
    pids+=("$(DUEQ_TLS=$tls_env "$root/measure/bench/dueq.sh" node "$dir/single" 7795 always)")
    tlsdir=
    [ $side = on ] && tlsdir=$dir/single/tls
    for scenario in put refresh; do
      v=$(measure 127.0.0.1:7795 "$scenario" "q-$scenario-$round" 64 1 "$tlsdir" "${pids[@]}")
      record "$side-single-$scenario" "$v"
      echo "round $round TLS $side, one node, $scenario 64x1: $v (ops/s, CPU us/op)" >&2
    done
    stop_all
    read -ra ps <<<"$(DUEQ_TLS=$tls_env DUEQ_CLIENT_BASE=7775 DUEQ_PEER_BASE=7875 \
      "$root/measure/bench/dueq.sh" cluster "$dir/cluster")"
    pids+=("${ps[@]}")
    sleep 2  # an election
    [ $side = on ] && tlsdir=$dir/cluster/tls
    v=$(measure 127.0.0.1:7775,127.0.0.1:7776,127.0.0.1:7777 put "q-put-$round" 16 32 "$tlsdir" \
      "${pids[@]}")
    record "$side-cluster-put" "$v"
    echo "round $round TLS $side, three nodes, put 16x32: $v (ops/s, CPU us/op)" >&2
    stop_all
  done
done
printf '| %-22s | %-24s | %-24s | %s | %s |\n' "fsync always" "TLS off ops/s (rounds)" \
  "TLS on ops/s (rounds)" "on / off ops/s (medians)" "on / off CPU per op (medians)"
printf '|---|---|---|---|---|\n'
for k in single-put single-refresh cluster-put; do
  o=$(echo "${figures[off-$k]}" | median) n=$(echo "${figures[on-$k]}" | median)
  oc=$(echo "${cpu[off-$k]}" | median) nc=$(echo "${cpu[on-$k]}" | median)
  printf '| %-22s | %-24s | %-24s | %s | %s (%s vs %s us) |\n' "$k" "${figures[off-$k]}" \
    "${figures[on-$k]}" "$(ratio "$n" "$o")" "$(ratio "$nc" "$oc")" "$nc" "$oc"
done

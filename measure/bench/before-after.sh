#!/usr/bin/env bash
# Throughput of two builds of dueqd side by side, in one run: put and take+ack (refresh)
# on one node (fsync $FSYNC, default always) and on a 3-node loopback cluster (fsync
# always), measured by the NEW tree's dueq-bench. Runs alternate old, new, old, new...
# (ROUNDS times each) so that drift of a noisy machine hits both alike; prints each
# figure and the new/old ratio of medians, for throughput and for the servers' CPU time
# per operation (µs, all dueqd processes of the run, from /proc; steadier than
# throughput when the machine is shared).
#
#   measure/bench/before-after.sh OLD_ROOT NEW_ROOT
#
# Each ROOT is a checkout with dueqd built in ROOT/build (BUILD_DIR to change); each
# tree's own measure/bench/dueq.sh starts its dueqd, so configs match the binary. Make the
# old one with: git worktree add /tmp/dueq-old <commit> && (cd /tmp/dueq-old &&
# scripts/build.sh). Environment: ROUNDS (3), SECS (8 per run), CONNS (64), DEPTH (1),
# FSYNC (always or never, the one node's).
# Every server listens on 127.0.0.1 and is stopped by its PID.
set -euo pipefail
old=${1:?usage: before-after.sh OLD_ROOT NEW_ROOT}
new=${2:?usage: before-after.sh OLD_ROOT NEW_ROOT}
old=$(cd "$old" && pwd) new=$(cd "$new" && pwd)
build=${BUILD_DIR:-build}
rounds=${ROUNDS:-3} secs=${SECS:-8} conns=${CONNS:-64} depth=${DEPTH:-1} fsync=${FSYNC:-always}
bench=$new/$build/measure/bench/dueq-bench
for t in "$old/$build/cmd/dueqd/dueqd" "$new/$build/cmd/dueqd/dueqd" "$bench"; do
  [ -x "$t" ] || { echo "missing $t: build it first" >&2; exit 2; }
done
work=$(mktemp -d /tmp/dueq-before-after.XXXXXX)
pids=()
source "$(dirname "$0")/alternate-lib.sh"
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# "OPS_PER_S CPU_US_PER_OP" of one dueq-bench run; CPU counts the warm-up too, and so do
# the ops it is divided by (at the measured rate).
measure() {  # ADDRS SCENARIO QUEUE PIDS...
  local addrs=$1 scenario=$2 queue=$3 before ops
  shift 3
  before=$(cpu_ticks "$@")
  ops=$("$bench" "$scenario" -b dueq -a "$addrs" -c "$conns" -d "$depth" --warmup 1 -s "$secs" \
    --keys 20000 --queue "$queue" --json |
    python3 -c 'import json,sys
r = json.load(sys.stdin)["results"][-1]  # a refresh run lists its preload first
print("  errors %s, empty takes %s" % (r["errors"], r["empty_takes"]), file=sys.stderr)
print(round(r["ops_per_s"]))')
  awk -v ops="$ops" -v t=$(($(cpu_ticks "$@") - before)) -v hz="$clk_tck" -v s="$secs" \
    'BEGIN { printf "%d %.2f\n", ops, t / hz * 1e6 / (ops * (s + 1)) }'
}
declare -A figures cpu
record() {  # KEY "OPS CPU"
  read -r ops us <<<"$2"
  figures[$1]+="$ops "
  cpu[$1]+="$us "
}
for round in $(seq 1 "$rounds"); do
  for side in old new; do
    root=$old
    [ $side = new ] && root=$new
    dir=$work/$side-$round
    # One node.
    pids+=("$(BUILD_DIR=$build "$root/measure/bench/dueq.sh" node "$dir/single" 7795 "$fsync")")
    for scenario in put refresh; do
      v=$(measure 127.0.0.1:7795 "$scenario" "q-$scenario-$round" "${pids[@]}")
      record "$side-single-$scenario" "$v"
      echo "round $round $side single $scenario: $v (ops/s, CPU us/op)" >&2
    done
    stop_all
    # Three nodes.
    read -ra ps <<<"$(BUILD_DIR=$build DUEQ_CLIENT_BASE=7775 DUEQ_PEER_BASE=7875 \
      "$root/measure/bench/dueq.sh" cluster "$dir/cluster")"
    pids+=("${ps[@]}")
    sleep 2  # an election
    for scenario in put refresh; do
      v=$(measure 127.0.0.1:7775,127.0.0.1:7776,127.0.0.1:7777 "$scenario" "q-$scenario-$round" \
        "${pids[@]}")
      record "$side-cluster-$scenario" "$v"
      echo "round $round $side cluster $scenario: $v (ops/s, CPU us/op)" >&2
    done
    stop_all
  done
done
printf '| %-16s | %-28s | %-28s | %s | %s |\n' "one node fsync $fsync, $conns x $depth" "old ops/s (each round)" \
  "new ops/s (each round)" "new / old ops/s (medians)" "new / old CPU per op (medians)"
printf '|---|---|---|---|---|\n'
for k in single-put single-refresh cluster-put cluster-refresh; do
  o=$(echo "${figures[old-$k]}" | median) n=$(echo "${figures[new-$k]}" | median)
  oc=$(echo "${cpu[old-$k]}" | median) nc=$(echo "${cpu[new-$k]}" | median)
  printf '| %-16s | %-28s | %-28s | %s | %s (%s vs %s us) |\n' "$k" "${figures[old-$k]}" \
    "${figures[new-$k]}" "$(ratio "$n" "$o")" "$(ratio "$nc" "$oc")" "$nc" "$oc"
done
rm -rf "$work"

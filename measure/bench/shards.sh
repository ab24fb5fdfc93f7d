#!/usr/bin/env bash
# Figures of a sharded dueq (docs/sharding.md): the 2 x 3 deployment of config/two-shards
# (fsync always) with two dueq-proxy, data and results in OUT (default
# /tmp/dueq-shards-bench). One run measures, with dueq-bench:
#   - do 100,000 keys put through a node of each shard and both proxies land on their
#     shard (dueq-shard-check);
#   - put 64 x 1 and 16 x 32, and take+ack (refresh) 16 x 8, through a proxy, and straight
#     to shard a's leader with only shard a's keys (no hop), and for put 64 x 1 also to
#     shard a's leader with only shard b's keys (every put forwarded one hop);
#   - memory per shard with 1,000,000 tasks (16 B keys, 200 B payloads) spread over both shards.
# Prints a summary table; the JSON of every run is in OUT. Needs a build (scripts/build.sh).
#
#   measure/bench/shards.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh
out=${1:-/tmp/dueq-shards-bench}
bin=${BUILD_DIR:-build}
rm -rf "$out"
mkdir -p "$out"
nodes=(a1 a2 a3 b1 b2 b3)
A=127.0.0.1:7711,127.0.0.1:7712,127.0.0.1:7713
P1=127.0.0.1:7601
P2=127.0.0.1:7602
map=config/two-shards/shards.toml
declare -A pid_of
pids=()
cleanup() { for pid in "${pids[@]}"; do stop_pid "$pid"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "${nodes[@]}"; do
  start_dueqd "$bin/cmd/dueqd/dueqd" "$out/$n.out" "$out/$n.log" \
    --config "config/two-shards/$n.toml" --data-dir "$out/data/$n"
  pids+=("$dueqd_pid")
  pid_of[$n]=$dueqd_pid
done
for i in 1 2; do
  p=P$i
  start_dueqd "$bin/cmd/dueq-proxy/dueq-proxy" "$out/proxy$i.out" "$out/proxy$i.log" \
    --map "$map" --listen "${!p}" --name "proxy$i"
  pids+=("$dueqd_pid")
done
ctl() { "$bin/cmd/dueqctl/dueqctl" "$@"; }
ctl --addr "$P1" status --shards --wait-leader 30s >/dev/null

echo "== landing: 100,000 keys through a1, b2, proxy1 and proxy2" | tee "$out/summary.txt"
"$bin/testing/shard-check/dueq-shard-check" --entry 127.0.0.1:7711,127.0.0.1:7722,$P1,$P2 \
  --keys 100000 --queue landing | tee -a "$out/summary.txt"

bench() {  # bench NAME SCENARIO ARGS...: one dueq-bench run, JSON to OUT/NAME.json
  local name=$1
  shift
  "$bin/measure/bench/dueq-bench" "$@" --json -q --seconds 10 >"$out/$name.json"
}
bench put-64x1-proxy put -a "$P1" -c 64 -d 1 --queue p1
bench put-64x1-direct put -a "$A" -c 64 -d 1 --queue p2 --shard-map "$map" --only-shard a
bench put-64x1-forwarded put -a "$A" -c 64 -d 1 --queue p3 --shard-map "$map" --only-shard b
bench put-16x32-proxy put -a "$P1" -c 16 -d 32 --queue p4
bench put-16x32-direct put -a "$A" -c 16 -d 32 --queue p5 --shard-map "$map" --only-shard a
bench put-1x1-direct put -a "$A" -c 1 -d 1 --queue p6 --shard-map "$map" --only-shard a
bench put-1x1-forwarded put -a "$A" -c 1 -d 1 --queue p7 --shard-map "$map" --only-shard b
bench put-1x1-proxy put -a "$P1" -c 1 -d 1 --queue p8
bench refresh-16x8-proxy refresh -a "$P1" -c 16 -d 8 --keys 20000 --queue r1
bench refresh-16x8-direct refresh -a "$A" -c 16 -d 8 --keys 20000 --queue r2 \
  --shard-map "$map" --only-shard a

rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
tasks() {  # tasks NODE: how many tasks its store holds
  ctl --addr "$(grep -o '127.0.0.1:77[0-9]*' "config/two-shards/$1.toml" | head -1)" --json status |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"])'
}
declare -A rss_before tasks_before
for n in "${nodes[@]}"; do
  rss_before[$n]=$(rss "${pid_of[$n]}")
  tasks_before[$n]=$(tasks "$n")
done
"$bin/measure/bench/dueq-bench" preload -a "$P1" --keys 1000000 -c 16 -d 64 --queue mem \
  --spread-ms 3600000 --json -q >"$out/preload-1m.json"
sleep 2
{
  echo
  echo "== 1,000,000 more tasks (16 B keys, 200 B payloads) put through proxy1: each node's"
  echo "   RSS growth per task it gained (after the runs above)"
  printf "%-5s %10s %10s %12s %12s %9s\n" NODE TASKS GAINED RSS_BEFORE RSS_AFTER B/TASK
  for n in "${nodes[@]}"; do
    now=$(tasks "$n")
    after=$(rss "${pid_of[$n]}")
    gained=$((now - ${tasks_before[$n]}))
    printf "%-5s %10s %10s %12s %12s %9s\n" "$n" "$now" "$gained" "${rss_before[$n]}" "$after" \
      "$(( (after - ${rss_before[$n]}) / (gained > 0 ? gained : 1) ))"
  done
} | tee -a "$out/summary.txt"

python3 - "$out" <<'PY' | tee -a "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
print()
print("== throughput and latency (dueq-bench, 10 s each, fsync always)")
print(f"{'run':<22} {'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
for name in ["put-1x1-direct", "put-1x1-forwarded", "put-1x1-proxy", "put-64x1-direct",
             "put-64x1-forwarded", "put-64x1-proxy", "put-16x32-direct", "put-16x32-proxy",
             "refresh-16x8-direct", "refresh-16x8-proxy"]:
    runs = json.load(open(os.path.join(out, name + ".json")))["results"]
    r = runs[-1]
    op = "refresh" if name.startswith("refresh") else "put"
    o = r["per_op"][op]
    errors = sum(x["errors"] for x in r["per_op"].values())
    print(f"{name:<22} {r['ops_per_s']:>9.0f} {o['p50_us'] / 1000:>8.2f} "
          f"{o['p99_us'] / 1000:>8.2f} {errors:>7}")
PY

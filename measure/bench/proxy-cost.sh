#!/usr/bin/env bash
# What dueq-proxy costs (docs/benchmarks.md, "Through a proxy"): the 2 x 3 deployment of
# config/two-shards with one dueq-proxy, data and results in OUT (default
# /tmp/dueq-proxy-cost). Each row runs the same load twice, in turn, ROUNDS times
# (default 2):
#   - proxy: one dueq-bench through the proxy, keys of both shards;
#   - direct: two dueq-bench at once, each with half the connections, straight to one
#     shard's leader with only that shard's keys (what a client that knows the map does).
# Rows: put 64 x 1, put 16 x 32, take+ack (refresh) 16 x 8, put 1 x 1. Prints ops/s of
# each (the best round) and proxy / direct. Needs a build (scripts/build.sh).
#
#   SECONDS_PER_RUN=10 ROUNDS=2 measure/bench/proxy-cost.sh [OUT]   (the defaults)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh
out=${1:-/tmp/dueq-proxy-cost}
bin=${BUILD_DIR:-build}
seconds=${SECONDS_PER_RUN:-10}
rounds=${ROUNDS:-2}
rm -rf "$out"
mkdir -p "$out"
A=127.0.0.1:7711,127.0.0.1:7712,127.0.0.1:7713
B=127.0.0.1:7721,127.0.0.1:7722,127.0.0.1:7723
P=127.0.0.1:7601
map=config/two-shards/shards.toml
pids=()
cleanup() { for pid in "${pids[@]}"; do stop_pid "$pid"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in a1 a2 a3 b1 b2 b3; do
  start_dueqd "$bin/cmd/dueqd/dueqd" "$out/$n.out" "$out/$n.log" \
    --config "config/two-shards/$n.toml" --data-dir "$out/data/$n"
  pids+=("$dueqd_pid")
done
start_dueqd "$bin/cmd/dueq-proxy/dueq-proxy" "$out/proxy.out" "$out/proxy.log" \
  --map "$map" --listen "$P" --name proxy
pids+=("$dueqd_pid")
"$bin/cmd/dueqctl/dueqctl" --addr "$P" status --shards --wait-leader 30s >/dev/null

bench() {  # bench NAME ARGS...: one dueq-bench run, its JSON to OUT/NAME.json
  local name=$1
  shift
  "$bin/measure/bench/dueq-bench" "$@" --json -q --seconds "$seconds" >"$out/$name.json"
}
# row NAME SCENARIO CONNS DEPTH [ARGS...]
row() {
  local name=$1 scenario=$2 conns=$3 depth=$4
  shift 4
  local half=$(( conns / 2 > 0 ? conns / 2 : 1 ))
  for r in $(seq "$rounds"); do
    echo "  $name round $r: proxy" >&2
    bench "$name-proxy-$r" "$scenario" -a "$P" -c "$conns" -d "$depth" --queue "$name-p$r" "$@"
    echo "  $name round $r: direct" >&2
    if ((conns == 1)); then
      bench "$name-direct-a-$r" "$scenario" -a "$A" -c 1 -d "$depth" --queue "$name-d$r" "$@" \
        --shard-map "$map" --only-shard a
      echo '{"results": [{"ops_per_s": 0}]}' >"$out/$name-direct-b-$r.json"
    else
      bench "$name-direct-a-$r" "$scenario" -a "$A" -c "$half" -d "$depth" --queue "$name-d$r" \
        "$@" --shard-map "$map" --only-shard a &
      local first=$!
      bench "$name-direct-b-$r" "$scenario" -a "$B" -c "$half" -d "$depth" --queue "$name-d$r" \
        "$@" --shard-map "$map" --only-shard b
      wait "$first"
    fi
  done
}
echo "== proxy against direct: $rounds rounds of $seconds s per row" | tee "$out/summary.txt"
row put-64x1 put 64 1
row put-16x32 put 16 32
row refresh-16x8 refresh 16 8 --keys 20000
row put-1x1 put 1 1

python3 - "$out" "$rounds" <<'PY' | tee -a "$out/summary.txt"
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def ops(name):
    return json.load(open(os.path.join(out, name + ".json")))["results"][-1]["ops_per_s"]
def p50(name, op):
    r = json.load(open(os.path.join(out, name + ".json")))["results"][-1]
    return r["per_op"][op]["p50_us"] if op in r["per_op"] else float("nan")
print(f"{'row':<14} {'proxy ops/s':>12} {'direct ops/s':>13} {'proxy/direct':>13} "
      f"{'p50 proxy/direct us':>20}")
for row, op in [("put-64x1", "put"), ("put-16x32", "put"), ("refresh-16x8", "refresh"),
                ("put-1x1", "put")]:
    proxy = max(ops(f"{row}-proxy-{r}") for r in range(1, rounds + 1))
    direct = max(ops(f"{row}-direct-a-{r}") + ops(f"{row}-direct-b-{r}")
                 for r in range(1, rounds + 1))
    print(f"{row:<14} {proxy:>12.0f} {direct:>13.0f} {proxy / direct:>13.2f} "
          f"{p50(f'{row}-proxy-1', op):>9.0f} / {p50(f'{row}-direct-a-1', op):<9.0f}")
PY

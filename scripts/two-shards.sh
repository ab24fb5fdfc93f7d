#!/usr/bin/env bash
# A sharded dueq on loopback: two shards of three nodes (config/two-shards: shard a on
# 127.0.0.1:7711-7713, shard b on 7721-7723, data in ./data/two-shards, logs in
# ./data/two-shards/logs) and two dueq-proxy in front of them (127.0.0.1:7601, 7602).
# Then the refresh demo through the proxies: tokens are put through proxy 1 and refreshed
# by a worker on proxy 2, whatever shard each token lives on (docs/sharding.md).
#
#   scripts/two-shards.sh                 run until Ctrl-C
#   DEMO_SECONDS=30 scripts/two-shards.sh stop after 30 s (nodes and proxies too)
#   NO_BUILD=1 ...                        skip install and build (already done)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${NO_BUILD:-}" ]; then
  bash scripts/install-deps.sh
  bash scripts/build.sh
fi
. scripts/lib.sh

bin=${BUILD_DIR:-build}
nodes=(a1 a2 a3 b1 b2 b3)
proxies=(127.0.0.1:7601 127.0.0.1:7602)
tokens=${DEMO_TOKENS:-300}
seconds=${DEMO_SECONDS:-0}
logs=data/two-shards/logs
mkdir -p "$logs"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  [ ${#pids[@]} -eq 0 ] || echo "two-shards: stopped (pids ${pids[*]}); logs in $logs/"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "${nodes[@]}"; do
  start_dueqd "$bin/cmd/dueqd/dueqd" "$logs/$n.out" "$logs/$n.log" --config "config/two-shards/$n.toml"
  pids+=("$dueqd_pid")
  echo "two-shards: $n running as pid $dueqd_pid on 127.0.0.1:$dueqd_port"
done
i=0
for p in "${proxies[@]}"; do
  i=$((i + 1))
  start_dueqd "$bin/cmd/dueq-proxy/dueq-proxy" "$logs/proxy$i.out" "$logs/proxy$i.log" \
    --map config/two-shards/shards.toml --listen "$p" --name "proxy$i"
  pids+=("$dueqd_pid")
  echo "two-shards: proxy$i running as pid $dueqd_pid on $p"
done

ctl() { "$bin/cmd/dueqctl/dueqctl" "$@"; }
ctl --addr "${proxies[0]}" status --shards --wait-leader 30s >/dev/null || {
  echo "two-shards: a shard has no leader after 30 s; the ends of the logs:" >&2
  for n in "${nodes[@]}"; do tail -5 "$logs/$n.log" >&2; done
  exit 1
}
ctl --addr "${proxies[0]}" shards

echo "two-shards: putting $tokens tokens into queue 'tokens' through ${proxies[0]}"
for i in $(seq 1 "$tokens"); do
  if (( i % 10 == 0 )); then when="-60s"; else when="+$(( (i * 120) / tokens ))s"; fi
  ctl --addr "${proxies[0]}" put tokens "$(printf 'token-%04d' "$i")" \
    --payload "{\"token\":\"initial-$i\"}" --time "$when" >/dev/null
done
ctl --addr "${proxies[0]}" status --shards
echo "two-shards: tokens per shard (each shard's own count):"
for a in 127.0.0.1:7711 127.0.0.1:7721; do ctl --addr "$a" stats tokens; done
echo "two-shards: from another terminal: $bin/cmd/dueqctl/dueqctl --addr ${proxies[1]} stats tokens"

echo "two-shards: the refresher on ${proxies[1]} (builtin refresh: new token, expiry = now + 90s)"
worker_args=(worker tokens --builtin-refresh --next-in 90s --concurrency 4 --progress-every 20)
if [ "$seconds" != 0 ]; then worker_args+=(--duration "${seconds}s"); fi
ctl --addr "${proxies[1]}" "${worker_args[@]}"
ctl --addr "${proxies[1]}" stats tokens

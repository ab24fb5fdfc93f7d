#!/usr/bin/env bash
# The main job: installs what is missing, builds, starts a dueq node on loopback
# (config/one-node.toml, data in ./data/n1) and runs the refresh demo against it:
# a few hundred OAuth-like tokens, some already late, refreshed by a worker that takes
# each one shortly before it expires and acks it with a new token and a new expiry.
#
#   scripts/run.sh                 run until Ctrl-C
#   DEMO_SECONDS=30 scripts/run.sh stop after 30 s (the node is stopped too)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh

bin=${BUILD_DIR:-build}
addr=127.0.0.1:7700
tokens=${DEMO_TOKENS:-300}
seconds=${DEMO_SECONDS:-0}
mkdir -p data
: > data/dueqd.log

"$bin/src/node/dueqd" --config config/one-node.toml >data/dueqd.out 2>>data/dueqd.log &
node_pid=$!
cleanup() {
  kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  echo "demo: node stopped (pid $node_pid); its log is data/dueqd.log"
}
trap cleanup EXIT INT TERM

for _ in $(seq 50); do
  grep -q "listening on port" data/dueqd.out 2>/dev/null && break
  kill -0 "$node_pid" 2>/dev/null || { cat data/dueqd.log; exit 1; }
  sleep 0.1
done
echo "demo: dueqd running as pid $node_pid on $addr (log: data/dueqd.log)"

ctl() { "$bin/tools/dueqctl/dueqctl" --addr "$addr" "$@"; }

# Tokens expire over the next two minutes; one in ten expired a minute ago (an outage).
# The queue takes a token 30 s before it expires (lead_ms in the config) and serves
# tokens that can still be saved before late ones.
echo "demo: putting $tokens tokens into queue 'tokens'"
for i in $(seq 1 "$tokens"); do
  if (( i % 10 == 0 )); then when="-60s"; else when="+$(( (i * 120) / tokens ))s"; fi
  ctl put tokens "$(printf 'token-%04d' "$i")" --payload "{\"token\":\"initial-$i\"}" --time "$when" >/dev/null
done
ctl stats tokens

echo "demo: starting the refresher (builtin refresh: new token, expiry = now + 90s)"
worker_args=(worker tokens --builtin-refresh --next-in 90s --concurrency 4 --progress-every 20)
if [ "$seconds" != 0 ]; then worker_args+=(--duration "${seconds}s"); fi
ctl "${worker_args[@]}"
ctl stats tokens

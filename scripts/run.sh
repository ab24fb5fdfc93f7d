#!/usr/bin/env bash
# The main job: installs what is missing, builds, starts a three-node dueq cluster on
# loopback (config/cluster-loopback/n1..n3.toml: clients on 127.0.0.1:7701-7703, data in
# ./data/n1..n3, logs in ./data/logs; TLS on every link with a CA and certificates made in
# ./data/tls on the first run) and runs the refresh demo against it: a few hundred
# OAuth-like tokens, some already late, refreshed by a worker that takes each one shortly
# before it expires and acks it with a new token and a new expiry. The worker knows all
# three nodes; its takes and acks go to whichever is the leader.
#
#   scripts/run.sh                 run until Ctrl-C
#   DEMO_SECONDS=30 scripts/run.sh stop after 30 s (the nodes are stopped too)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
. scripts/lib.sh

bin=${BUILD_DIR:-build}
nodes=(n1 n2 n3)
addrs=127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703
tokens=${DEMO_TOKENS:-300}
seconds=${DEMO_SECONDS:-0}
logs=data/logs
mkdir -p "$logs"
# The demo's own CA and node certificates (docs/security.md); the tools find the CA here.
[ -f data/tls/n3.pem ] || bash scripts/make-certs.sh data/tls n1 n2 n3
export DUEQ_CACERT=data/tls/ca.pem

pids=()
cleanup() {
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  [ ${#pids[@]} -eq 0 ] || echo "demo: cluster stopped (pids ${pids[*]}); logs in $logs/"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "${nodes[@]}"; do
  start_dueqd "$bin/cmd/dueqd/dueqd" "$logs/$n.out" "$logs/$n.log" \
    --config "config/cluster-loopback/$n.toml"
  pids+=("$dueqd_pid")
  echo "demo: $n running as pid $dueqd_pid on 127.0.0.1:$dueqd_port (log: $logs/$n.log)"
done

ctl() { "$bin/cmd/dueqctl/dueqctl" --addr "$addrs" "$@"; }

ctl status --wait-leader 20s >/dev/null || {
  echo "demo: no leader after 20 s; the ends of the logs:" >&2
  for n in "${nodes[@]}"; do tail -5 "$logs/$n.log" >&2; done
  exit 1
}

# Tokens expire over the next two minutes; one in ten expired a minute ago (an outage).
# The queue takes a token 30 s before it expires (lead_ms in the config) and serves
# tokens that can still be saved before late ones.
echo "demo: putting $tokens tokens into queue 'tokens'"
for i in $(seq 1 "$tokens"); do
  if (( i % 10 == 0 )); then when="-60s"; else when="+$(( (i * 120) / tokens ))s"; fi
  ctl put tokens "$(printf 'token-%04d' "$i")" --payload "{\"token\":\"initial-$i\"}" --time "$when" >/dev/null
done
ctl status
ctl stats tokens
echo "demo: from another terminal: export DUEQ_ADDR=$addrs DUEQ_CACERT=$PWD/data/tls/ca.pem; $bin/cmd/dueqctl/dueqctl status"
echo "demo: the dashboard: http://127.0.0.1:7901/ (also 7902, 7903; /metrics, /health, /status; docs/admin.md)"

echo "demo: starting the refresher (builtin refresh: new token, expiry = now + 90s)"
worker_args=(worker tokens --builtin-refresh --next-in 90s --concurrency 4 --progress-every 20)
if [ "$seconds" != 0 ]; then worker_args+=(--duration "${seconds}s"); fi
ctl "${worker_args[@]}"
ctl stats tokens
ctl status

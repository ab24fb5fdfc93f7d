#!/usr/bin/env bash
# What the HTTP admin costs a node (docs/admin.md, docs/benchmarks.md): dueq-bench put and
# refresh (take + ack) against one dueqd with the admin listener off, and with it on and
# scraped once a second (/metrics and /status, as Prometheus and an open dashboard would).
# Off and on alternate, the order flipping every round, so drift on a noisy machine hits
# both; the figure is the ratio of the medians, on / off.
#
#   tools/bench/admin-cost.sh                   5 rounds of 10 s per scenario, fsync never
#   ROUNDS=3 SECONDS_EACH=5 FSYNC=always tools/bench/admin-cost.sh
#
# Prints one line per measurement and a summary; OUT=file also writes the summary as JSON.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/${BUILD_DIR:-build}
bench=$build/tools/bench/dueq-bench
rounds=${ROUNDS:-5}
seconds=${SECONDS_EACH:-10}
fsync=${FSYNC:-never}
port=${PORT:-7791}
admin_port=${ADMIN_PORT:-7991}
conns=${CONNECTIONS:-64}
[ -x "$bench" ] || { echo "admin-cost: $bench is missing: build first (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/dueq-admin-cost.XXXXXX)
node_pid="" scraper_pid=""

stop_all() {
  [ -z "$scraper_pid" ] || { kill "$scraper_pid" 2>/dev/null || true; wait "$scraper_pid" 2>/dev/null || true; }
  [ -z "$node_pid" ] || { kill "$node_pid" 2>/dev/null || true; while kill -0 "$node_pid" 2>/dev/null; do sleep 0.05; done; }
  scraper_pid="" node_pid=""
}
trap 'stop_all; rm -rf "$work"' EXIT

# scrape: once a second until killed, what a Prometheus server and a dashboard ask for.
scrape() {
  while true; do
    curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/metrics" || echo "admin-cost: a scrape failed" >&2
    curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/status" || true
    sleep 1
  done
}

# measure VARIANT SCENARIO: one fresh node, one dueq-bench run; prints ops/s.
measure() {
  local variant=$1 scenario=$2 dir
  dir=$work/$variant-$scenario-$RANDOM
  if [ "$variant" = on ]; then
    node_pid=$(DUEQ_ADMIN=127.0.0.1:$admin_port "$root/tools/bench/dueq.sh" node "$dir" "$port" "$fsync")
    scrape &
    scraper_pid=$!
  else
    node_pid=$(DUEQ_ADMIN= "$root/tools/bench/dueq.sh" node "$dir" "$port" "$fsync")
  fi
  local json
  json=$("$bench" "$scenario" --addr "127.0.0.1:$port" -c "$conns" -d 1 --keys 100000 \
           --warmup 1 --seconds "$seconds" --json -q)
  stop_all
  rm -rf "$dir"
  python3 -c 'import json,sys; print(json.load(sys.stdin)["throughput"])' <<<"$json"
}

declare -A results
for r in $(seq 1 "$rounds"); do
  order=(off on)
  [ $((r % 2)) -eq 0 ] && order=(on off)
  for scenario in put refresh; do
    for variant in "${order[@]}"; do
      ops=$(measure "$variant" "$scenario")
      results[$variant-$scenario]+="$ops "
      printf 'round %d  %-7s admin %-3s  %10.0f /s\n' "$r" "$scenario" "$variant" "$ops" >&2
    done
  done
done

python3 - "$fsync" "$rounds" "$seconds" "$conns" "${OUT:-}" \
  "${results[off-put]}" "${results[on-put]}" "${results[off-refresh]}" "${results[on-refresh]}" <<'PY'
import json, statistics, sys
fsync, rounds, seconds, conns, out = sys.argv[1:6]
runs = [list(map(float, a.split())) for a in sys.argv[6:10]]
summary = {"fsync": fsync, "rounds": int(rounds), "seconds": float(seconds),
           "connections": int(conns), "scenarios": {}}
print(f"\nadmin listener on and scraped every second vs off; one node, fsync {fsync}, "
      f"{conns} connections, depth 1, {rounds} rounds of {seconds} s")
print(f"{'scenario':<10}{'off (median)':>14}{'on (median)':>14}{'on / off':>10}")
for name, off, on in (("put", runs[0], runs[1]), ("refresh", runs[2], runs[3])):
    m_off, m_on = statistics.median(off), statistics.median(on)
    summary["scenarios"][name] = {"off": off, "on": on, "ratio": m_on / m_off}
    print(f"{name:<10}{m_off:>14,.0f}{m_on:>14,.0f}{m_on / m_off:>10.3f}")
if out:
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
PY

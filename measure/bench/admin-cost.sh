#!/usr/bin/env bash
# What the HTTP admin costs a node (docs/admin.md, docs/benchmarks.md): dueq-bench put and
# refresh (take + ack) against one dueqd with the admin listener off, and with it on and
# scraped once a second (/metrics and /status, as Prometheus and an open dashboard would).
# Three measurements:
#  1. fresh nodes, off and on alternating (the order flipping every round): the median
#     over rounds of on / off, for throughput and for the node's CPU time per operation
#     (from /proc, over all of dueq-bench's run). Single runs scatter by ±10% here.
#  2. one run per scenario, scraped and quiet windows alternating (admin-interleaved.py):
#     the median of each scraped window against the quiet ones around it, which cancels
#     the drift of a run. The steadiest of the three.
#  3. one scrape's CPU time on a node holding 100,000 tasks.
#
#   measure/bench/admin-cost.sh                   5 rounds of 10 s per scenario, fsync never
#   ROUNDS=3 SECONDS_EACH=5 FSYNC=always measure/bench/admin-cost.sh
#
# On a machine with two cores or more the node runs on core 0 and dueq-bench and the
# scraper on core 1 (PIN=0 to let the scheduler place them), so that the two do not take
# turns on one core, which scatters single figures by ±20% on a 2-core VM.
#
# Prints one line per measurement and a summary; OUT=file also writes the summary as JSON.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/${BUILD_DIR:-build}
bench=$build/measure/bench/dueq-bench
rounds=${ROUNDS:-6}
seconds=${SECONDS_EACH:-10}
fsync=${FSYNC:-never}
port=${PORT:-7791}
admin_port=${ADMIN_PORT:-7991}
conns=${CONNECTIONS:-64}
server_cpu=() client_cpu=()
if [ "${PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
  server_cpu=(taskset -c 0) client_cpu=(taskset -c 1)
fi
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
    curl -fs -o /dev/null "http://127.0.0.1:$admin_port/metrics" || true
    curl -fs -o /dev/null "http://127.0.0.1:$admin_port/status" || true
    sleep 1
  done
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure VARIANT SCENARIO: one fresh node, one dueq-bench run; prints "ops/s cpu-µs/op".
measure() {
  local variant=$1 scenario=$2 dir
  dir=$work/$variant-$scenario-$RANDOM
  if [ "$variant" = on ]; then
    node_pid=$(DUEQ_ADMIN=127.0.0.1:$admin_port "${server_cpu[@]}" "$root/measure/bench/dueq.sh" node "$dir" "$port" "$fsync")
    curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/health" ||
      { echo "admin-cost: the node does not serve admin on $admin_port" >&2; exit 1; }
    "${client_cpu[@]}" bash -c "$(declare -f scrape); admin_port=$admin_port; scrape" &
    scraper_pid=$!
  else
    node_pid=$(DUEQ_ADMIN= "${server_cpu[@]}" "$root/measure/bench/dueq.sh" node "$dir" "$port" "$fsync")
  fi
  local json before after
  before=$(cpu_ticks "$node_pid")
  # 10,000 keys: refresh preloads them, and that preload's CPU is in the per-op figure.
  json=$("${client_cpu[@]}" "$bench" "$scenario" --addr "127.0.0.1:$port" -c "$conns" -d 1 --keys 10000 \
           --warmup 1 --seconds "$seconds" --json -q)
  after=$(cpu_ticks "$node_pid")
  stop_all
  rm -rf "$dir"
  python3 -c '
import json, os, sys
r = json.load(sys.stdin)["results"][-1]  # refresh: its preload comes first
cpu_s = (int(sys.argv[2]) - int(sys.argv[1])) / os.sysconf("SC_CLK_TCK")
print(r["ops_per_s"], 1e6 * cpu_s / r["ops"])' "$before" "$after" <<<"$json"
}

declare -A results
for r in $(seq 1 "$rounds"); do
  order=(off on)
  [ $((r % 2)) -eq 0 ] && order=(on off)
  for scenario in put refresh; do
    for variant in "${order[@]}"; do
      read -r ops cpu < <(measure "$variant" "$scenario")
      results[$variant-$scenario]+="$ops:$cpu "
      printf 'round %d  %-7s admin %-3s  %10.0f /s  %6.2f µs CPU/op\n' "$r" "$scenario" "$variant" "$ops" "$cpu" >&2
    done
  done
done

# Scraped and quiet windows inside one run.
interleaved=()
for scenario in put refresh; do
  dir=$work/interleaved-$scenario
  node_pid=$(DUEQ_ADMIN=127.0.0.1:$admin_port "${server_cpu[@]}" "$root/measure/bench/dueq.sh" node "$dir" "$port" "$fsync")
  interleaved+=("$(python3 "$root/measure/bench/admin-interleaved.py" --bench "$bench" \
    --scenario "$scenario" --addr "127.0.0.1:$port" --admin "127.0.0.1:$admin_port" \
    --windows "${WINDOWS:-20}" --window "${WINDOW_SECONDS:-5}" --connections "$conns" \
    --client-cpu "${client_cpu[2]:-}")")
  echo "interleaved $scenario: ${interleaved[-1]}" >&2
  stop_all
  rm -rf "$dir"
done

# The cost of one scrape, directly: a node holding 100,000 tasks answers SCRAPES pairs of
# /metrics and /status over one kept-alive connection; its CPU time over them, per pair.
scrapes=${SCRAPES:-5000}
dir=$work/per-scrape
node_pid=$(DUEQ_ADMIN=127.0.0.1:$admin_port "${server_cpu[@]}" "$root/measure/bench/dueq.sh" node "$dir" "$port" "$fsync")
"${client_cpu[@]}" "$bench" preload --addr "127.0.0.1:$port" --keys 100000 --spread-ms 3600000 -q >/dev/null
urls=()
for _ in $(seq 1 "$scrapes"); do
  urls+=(-o /dev/null "http://127.0.0.1:$admin_port/metrics" -o /dev/null "http://127.0.0.1:$admin_port/status")
done
metrics_bytes=$(curl -fs "http://127.0.0.1:$admin_port/metrics" | wc -c)
before=$(cpu_ticks "$node_pid")
"${client_cpu[@]}" curl -fs "${urls[@]}"
after=$(cpu_ticks "$node_pid")
stop_all
per_scrape_us=$(python3 -c 'import os,sys; print(1e6 * (int(sys.argv[2]) - int(sys.argv[1])) / os.sysconf("SC_CLK_TCK") / int(sys.argv[3]))' "$before" "$after" "$scrapes")

python3 - "${interleaved[0]}" "${interleaved[1]}" "$per_scrape_us" "$metrics_bytes" "$fsync" "$rounds" "$seconds" "$conns" "${OUT:-}" \
  "${results[off-put]}" "${results[on-put]}" "${results[off-refresh]}" "${results[on-refresh]}" <<'PY'
import json, statistics, sys
interleaved = [json.loads(sys.argv[1]), json.loads(sys.argv[2])]
per_scrape_us, metrics_bytes = float(sys.argv[3]), int(sys.argv[4])
fsync, rounds, seconds, conns, out = sys.argv[5:10]
runs = [[tuple(map(float, x.split(":"))) for x in a.split()] for a in sys.argv[10:14]]
summary = {"fsync": fsync, "rounds": int(rounds), "seconds": float(seconds),
           "connections": int(conns), "scenarios": {}}
print(f"\nadmin listener on and scraped every second vs off; one node, fsync {fsync}, "
      f"{conns} connections, depth 1, {rounds} rounds of {seconds} s; "
      "medians of the per-round on/off ratios")
print(f"{'scenario':<10}{'off ops/s':>12}{'on ops/s':>12}{'ops on/off':>12}"
      f"{'off µs CPU/op':>15}{'on µs CPU/op':>14}{'CPU on/off':>12}")
for name, off, on in (("put", runs[0], runs[1]), ("refresh", runs[2], runs[3])):
    ops_ratio = statistics.median(b[0] / a[0] for a, b in zip(off, on))
    cpu_ratio = statistics.median(b[1] / a[1] for a, b in zip(off, on))
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    summary["scenarios"][name] = {"off": off, "on": on, "ops_ratio": ops_ratio,
                                  "cpu_per_op_ratio": cpu_ratio}
    print(f"{name:<10}{med(off, 0):>12,.0f}{med(on, 0):>12,.0f}{ops_ratio:>12.3f}"
          f"{med(off, 1):>15.2f}{med(on, 1):>14.2f}{cpu_ratio:>12.3f}")
summary["interleaved"] = interleaved
print("\none run each, scraped windows against the quiet ones around them "
      f"({interleaved[0]['window_s']:.0f} s windows):")
for r in interleaved:
    print(f"{r['scenario']:<10} scraped / quiet, median of {len(r['ratios'])}: "
          f"{r['median_ratio']:.3f}  (each: {' '.join(f'{x:.3f}' for x in r['ratios'])})")
summary["per_scrape_us"] = per_scrape_us
summary["metrics_bytes_100k_tasks"] = metrics_bytes
print(f"\none scrape (/metrics of {metrics_bytes} bytes, and /status) of a node holding "
      f"100,000 tasks: {per_scrape_us:.0f} µs of its CPU; once a second that is "
      f"{per_scrape_us / 1e4:.3f}% of one core")
if out:
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
PY

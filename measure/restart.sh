#!/usr/bin/env bash
# Restart time of one node holding N tasks: preloads N tasks (200-byte payloads) over
# TCP with dueq-load, stops the node (SIGTERM, then a second time SIGKILL), and times
# each restart until the node listens again. Also prints the node's RSS per task.
#
#   measure/restart.sh [N]      (default 1000000; needs a build in build/)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
bin=${BUILD_DIR:-build}
port=${PORT:-7791}
dir=$(mktemp -d /tmp/dueq-restart.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

. scripts/lib.sh
start() {  # starts dueqd, waits for its port line; sets pid and elapsed (seconds)
  local t0 t1
  t0=$(date +%s.%N)
  DUEQD_START_TIMEOUT=600 start_dueqd "$bin/cmd/dueqd/dueqd" "$dir/out" "$dir/log" \
    --listen "127.0.0.1:$port" --data-dir "$dir/data" --log-level warn || exit 1
  pid=$dueqd_pid
  t1=$(date +%s.%N)
  elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}
rss_kb() {
  awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || { echo "dueqd $pid died; its log:" >&2; tail -20 "$dir/log" >&2; exit 1; }
}

start
rss0=$(rss_kb)
echo "preloading $n tasks..." >&2
"$bin/measure/load/dueq-load" put --addr "127.0.0.1:$port" --keys "$n" --max-ops "$n" \
  -c 16 -d 32 --seconds 3600 --payload-bytes 200 >"$dir/load.json"
rss1=$(rss_kb)
kill "$pid"; wait "$pid" 2>/dev/null || true
start
clean=$elapsed
rss2=$(rss_kb)
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
start
crashed=$elapsed
kill "$pid"; wait "$pid" 2>/dev/null || true
pid=
printf '{"tasks":%d,"restart_after_sigterm_s":%.2f,"restart_after_sigkill_s":%.2f,' "$n" "$clean" "$crashed"
printf '"rss_growth_per_task_bytes":%.0f,"rss_after_restart_per_task_bytes":%.0f,"preload":%s}\n' \
  "$(awk -v a="$rss0" -v b="$rss1" -v n="$n" 'BEGIN { print (b - a) * 1024 / n }')" \
  "$(awk -v a="$rss0" -v b="$rss2" -v n="$n" 'BEGIN { print (b - a) * 1024 / n }')" \
  "$(cat "$dir/load.json")"

#!/usr/bin/env bash
# Where one operation's CPU goes, dueq beside Tarantool on one node: starts both as
# run-all.sh's "single" part does, runs one dueq-bench scenario against each in turn,
# and prints ops/s with the server's and the client's user and system time per
# operation (/proc/PID/stat, over MEASURE_S seconds in the middle of the run).
#
#   measure/bench/cpu-split.sh SCENARIO CONNS DEPTH [never|always]
#       e.g.  put 64 1 never     get 64 1     refresh 16 8 always
#   (never pairs dueq fsync=never with Tarantool wal_mode=write, always with fsync)
#
# Then, for dueq, two ceilings: the rate it would reach if its own code (the server's
# user time) cost nothing, first with the machine as busy as it was, then with every
# core busy; each also as a ratio to Tarantool's measured rate. The kernel's share of
# the server (system time: one recv and one sendmsg per request on loopback, which also
# runs the client's receive path) and the client both stay. A ceiling below a target
# ratio means no change to dueq's own code reaches it on this machine as measured.
#
# Environment: SECS (12), MEASURE_S (6), KEYS (100000), DUEQD, BUILD_DIR (build),
# DIR (a fresh temporary directory). Servers listen on 127.0.0.1:7791 and :3391 and
# are stopped by their PIDs. Tarantool comes from measure/bench/peers/install-peers.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 3 ] || [ $# -gt 4 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = -h ] || [ "${1:-}" = --help ] && exit 0 || exit 2
fi
scenario=$1 conns=$2 depth=$3 fsync=${4:-never}
case $fsync in never) wal="write" ;; always) wal="fsync" ;; *) echo "FSYNC must be never or always" >&2; exit 2 ;; esac
secs=${SECS:-12} measure=${MEASURE_S:-6} keys=${KEYS:-100000}
if [ "$measure" -ge "$secs" ]; then echo "MEASURE_S must be below SECS" >&2; exit 2; fi
bench=$root/${BUILD_DIR:-build}/measure/bench/dueq-bench
[ -x "$bench" ] || { echo "missing $bench: build it first (scripts/build.sh)" >&2; exit 2; }
command -v tarantool >/dev/null ||
  { echo "tarantool is not installed: run measure/bench/peers/install-peers.sh" >&2; exit 2; }
made_dir=
if [ -z "${DIR:-}" ]; then made_dir=$(mktemp -d /tmp/dueq-cpu-split.XXXXXX); fi
dir=${DIR:-$made_dir}
pids=() bp=
stop() {
  local p
  if [ -n "$bp" ]; then kill "$bp" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; done
  if [ -n "$made_dir" ]; then rm -rf "$made_dir"; fi
}
trap stop EXIT
pids+=("$(DUEQD=${DUEQD:-} "$root/measure/bench/dueq.sh" node "$dir/dueq" 7791 "$fsync")")
pids+=("$("$root/measure/bench/peers/tarantool.sh" "$dir/tarantool" 3391 "$wal" 2048)")
declare -A server_pid=([dueq]=${pids[0]} [tarantool]=${pids[1]}) addr=([dueq]=127.0.0.1:7791 [tarantool]=127.0.0.1:3391)
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }  # user and system clock ticks so far
hz=$(getconf CLK_TCK)
per_op() { echo "scale=3; ($2 - $1) * 1000000 / $hz / $measure / $3" | bc; }  # ticks, ticks, ops/s
declare -A rate su ss cu cs
for system in dueq tarantool; do
  "$bench" "$scenario" -b "$system" -a "${addr[$system]}" -c "$conns" -d "$depth" --warmup 2 \
    -s "$secs" --queue "q-$scenario-$conns-$depth" --keys "$keys" --json >"$dir/$system.json" 2>"$dir/$system.err" &
  bp=$!
  sleep $((2 + (secs - measure) / 2))
  read -r su0 ss0 < <(ticks "${server_pid[$system]}")
  read -r cu0 cs0 < <(ticks "$bp")
  sleep "$measure"
  read -r su1 ss1 < <(ticks "${server_pid[$system]}")
  read -r cu1 cs1 < <(ticks "$bp")
  wait "$bp" || { echo "dueq-bench against $system failed:" >&2; tail -5 "$dir/$system.err" >&2; exit 1; }
  bp=
  # The last result is the measured run (a preload may come before it); its ops are
  # the scenario's main ones: in `mixed`, gets, puts and refreshes together.
  rate[$system]=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["results"][-1]["ops_per_s"]))' "$dir/$system.json")
  if [ "${rate[$system]}" -le 0 ]; then
    echo "dueq-bench measured no operations against $system: see $dir/$system.json" >&2
    made_dir=  # keep it for the reader
    exit 1
  fi
  r=${rate[$system]}
  su[$system]=$(per_op "$su0" "$su1" "$r") ss[$system]=$(per_op "$ss0" "$ss1" "$r")
  cu[$system]=$(per_op "$cu0" "$cu1" "$r") cs[$system]=$(per_op "$cs0" "$cs1" "$r")
  printf '%-9s %s %sx%s %s: %8s ops/s   server user %6s sys %6s   client user %6s sys %6s  us/op\n' \
    "$system" "$scenario" "$conns" "$depth" "$fsync" "${rate[$system]}" "${su[$system]}" \
    "${ss[$system]}" "${cu[$system]}" "${cs[$system]}"
done
cores=$(nproc)
awk -v r="${rate[dueq]}" -v t="${rate[tarantool]}" -v su="${su[dueq]}" -v ss="${ss[dueq]}" \
  -v cu="${cu[dueq]}" -v cs="${cs[dueq]}" -v cores="$cores" 'BEGIN {
  busy = r * (su + ss + cu + cs) / 1e6            # cores in use while dueq ran
  rest = ss + cu + cs                             # what stays if dueq code cost nothing
  at_busy = busy * 1e6 / rest; at_full = cores * 1e6 / rest
  printf "dueq / tarantool: %.2fx; cores busy during dueq: %.2f of %d\n", r / t, busy, cores
  printf "ceiling with no dueq user time: %.0f ops/s (%.2fx) as busy, %.0f ops/s (%.2fx) all cores busy\n",
    at_busy, at_busy / t, at_full, at_full / t
}'

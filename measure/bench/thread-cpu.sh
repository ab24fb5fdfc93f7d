#!/usr/bin/env bash
# Where a 3-node run's CPU goes, by thread: starts a loopback cluster of DUEQD (default
# build/cmd/dueqd/dueqd) with measure/bench/dueq.sh, runs one dueq-bench scenario against
# it, and prints ops/s and, for each thread name summed over the three nodes, its CPU
# time (user + system, /proc/PID/task/*/stat) per operation: the event loop (named after
# the binary), dueq-storage, RocksDB's rocksdb:high (flushes) and rocksdb:low
# (compactions). Repeat it, alternating builds, to compare them: one run on this VM
# moves by 10-20%.
#
#   measure/bench/thread-cpu.sh SCENARIO CONNS DEPTH     e.g.  put 16 32 | refresh 16 8
#
# Environment: DUEQD, SECS (10, after 2 s of warm-up), KEYS (100000), DIR (a fresh
# temporary directory). Every server listens on 127.0.0.1 and is stopped by its PID.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -ne 3 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 3 ] && exit 0 || exit 2
fi
scenario=$1 conns=$2 depth=$3
bench=$root/${BUILD_DIR:-build}/measure/bench/dueq-bench
[ -x "$bench" ] || { echo "missing $bench: build it first (scripts/build.sh)" >&2; exit 2; }
made_dir=
if [ -z "${DIR:-}" ]; then made_dir=$(mktemp -d /tmp/dueq-thread-cpu.XXXXXX); fi
dir=${DIR:-$made_dir}
pids=$(DUEQD=${DUEQD:-$root/${BUILD_DIR:-build}/cmd/dueqd/dueqd} "$root/measure/bench/dueq.sh" cluster "$dir")
stop() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; done
  if [ -n "$made_dir" ]; then rm -rf "$made_dir"; fi
}
trap stop EXIT
ticks() {  # thread name, clock ticks so far, summed over the nodes' threads
  for p in $pids; do
    for t in /proc/"$p"/task/*; do
      printf '%s %s\n' "$(tr ' ' '_' <"$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
    done
  done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
sleep 1
before=$(ticks)
out=$("$bench" "$scenario" -b dueq -a 127.0.0.1:7771,127.0.0.1:7772,127.0.0.1:7773 \
  -c "$conns" -d "$depth" --warmup 2 -s "${SECS:-10}" --queue q-thread-cpu --keys "${KEYS:-100000}" 2>&1)
after=$(ticks)
ops=$(grep -o '[0-9]* ops,' <<<"$out" | tail -1 | awk '{print $1}')
rate=$(tail -1 <<<"$out" | awk '{print $7}')
[ -n "$ops" ] && [ "$ops" -gt 0 ] || { echo "dueq-bench reported no operations:" >&2; echo "$out" >&2; exit 1; }
echo "$scenario ${conns}x$depth: $rate ops/s; CPU per op, summed over the three nodes:"
join <(echo "$before") <(echo "$after") |
  awk -v hz="$(getconf CLK_TCK)" -v n="$ops" '$3 > $2 {printf "  %-16s %6.1f us\n", $1, ($3 - $2) / hz * 1e6 / n}'

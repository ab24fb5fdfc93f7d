#!/usr/bin/env bash
# Starts Tarantool running dueq's queue (tarantool/queue.lua) in the background, waits
# until it accepts requests, and prints its PID. Stop it with kill PID.
#
#   measure/bench/peers/tarantool.sh DATA_DIR [PORT] [WAL_MODE] [MEMTX_MB]
#     DATA_DIR  created if missing; an existing one is recovered (snapshot + xlogs)
#     PORT      default 3301, on 127.0.0.1
#     WAL_MODE  write (default: written to the OS, no fsync) | fsync
#     MEMTX_MB  memtx arena, default 1024 (10M tasks of 200 bytes need about 4096)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: tarantool.sh DATA_DIR [PORT] [WAL_MODE] [MEMTX_MB]}
port=${2:-3301}
wal=${3:-write}
mem=${4:-1024}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
: >"$dir/tarantool.log"
BENCH_LISTEN="127.0.0.1:$port" BENCH_WAL_MODE="$wal" BENCH_DIR="$dir" BENCH_MEMTX_MB="$mem" \
  tarantool "$here/tarantool/queue.lua" >>"$dir/stdout.log" 2>&1 </dev/null &
pid=$!
source "$here/../wait-for-line.sh"
rc=0
wait_for_line "$dir/tarantool.log" "ready to accept requests" "$pid" 600 || rc=$?
case $rc in
  0) echo "$pid" ;;
  1)
    echo "tarantool exited; its log:" >&2
    tail -20 "$dir/tarantool.log" "$dir/stdout.log" >&2
    exit 1
    ;;
  *)
    echo "tarantool did not get ready in 600 s" >&2
    kill "$pid"
    exit 1
    ;;
esac

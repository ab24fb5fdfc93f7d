#!/usr/bin/env bash
# First throughput figures of one node over TCP: put and take+ack (refresh) cycles at
# 1 and 64 connections, with fsync "always" and "never". One JSON line per run.
#
#   measure/throughput.sh [seconds-per-run]   (default 5; needs a build in build/)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
bin=${BUILD_DIR:-build}
port=${PORT:-7793}
dir=$(mktemp -d /tmp/dueq-throughput.XXXXXX)
. scripts/lib.sh
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

for fsync in always never; do
  rm -rf "$dir/data"
  sed -e "s|^fsync = .*|fsync = \"$fsync\"|" -e "s|^client_listen = .*|client_listen = \"127.0.0.1:$port\"|" \
      -e "s|^data_dir = .*|data_dir = \"$dir/data\"|" config/one-node.toml >"$dir/node.toml"
  start_dueqd "$bin/cmd/dueqd/dueqd" "$dir/out" "$dir/log" --config "$dir/node.toml" \
    --log-level warn || exit 1
  pid=$dueqd_pid
  for op in put refresh; do
    for conns in 1 64; do
      out=$("$bin/measure/load/dueq-load" "$op" --addr "127.0.0.1:$port" -c "$conns" -d 1 \
            --seconds "$secs" --keys 100000 --queue "q-$op-$conns" 2>/dev/null)
      echo "{\"fsync\":\"$fsync\",${out#\{}"
    done
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=
done

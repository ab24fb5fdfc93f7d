#!/usr/bin/env bash
# tools/chaos/run.sh SCENARIO [--seconds N] [--seed S] [--shards N] | --all | --list | --help
# Runs the chaos harness (chaos.py) against the binaries in build/ (or $BUILD_DIR),
# building them first if they are missing. See docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
if [ ! -x "$build/src/node/dueqd" ] || [ ! -x "$build/tools/faultproxy/faultproxy" ] ||
   [ ! -x "$build/tools/chaos/dueq-chaos-workload" ] || [ ! -x "$build/src/shard/dueq-proxy" ]; then
  BUILD_DIR=$build bash scripts/build.sh
fi
exec python3 tools/chaos/chaos.py --build "$build" "$@"

#!/usr/bin/env bash
# testing/chaos/run.sh SCENARIO [--seconds N] [--seed S] [--shards N] | --all | --list | --help
# Runs the chaos harness (chaos.py) against the binaries in build/ (or $BUILD_DIR),
# building them first if they are missing. See docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
if [ ! -x "$build/cmd/dueqd/dueqd" ] || [ ! -x "$build/testing/faultproxy/dueq-faultproxy" ] ||
   [ ! -x "$build/testing/chaos/dueq-chaos-workload" ] || [ ! -x "$build/cmd/dueq-proxy/dueq-proxy" ]; then
  BUILD_DIR=$build bash scripts/build.sh
fi
exec python3 testing/chaos/chaos.py --build "$build" "$@"

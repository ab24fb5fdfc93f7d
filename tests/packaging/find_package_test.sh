#!/usr/bin/env bash
# A C++ program outside the tree builds against the installed client: `cmake --install
# BUILD --component dev` into a fresh prefix, then tests/packaging/find_package configured
# with find_package(dueq), built, and run against a one-node dueqd it starts (and stops by
# its PID).
#   find_package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/find_package" && pwd)
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cmake --install "$build" --component dev --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/lib/cmake/dueq/dueqConfig.cmake" || { echo "FAIL: no dueqConfig.cmake"; exit 1; }
cmake -S "$src" -B "$work/out" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; echo "FAIL: find_package(dueq)"; exit 1; }
cmake --build "$work/out" -j2 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; echo "FAIL: build"; exit 1; }
"$build/cmd/dueqd/dueqd" --data-dir "$work/data" --listen 127.0.0.1:0 > "$work/dueqd.out" 2> "$work/dueqd.log" &
pid=$!
for _ in $(seq 100); do grep -q "listening on port" "$work/dueqd.out" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$work/dueqd.out")
[ -n "$port" ] || { cat "$work/dueqd.log"; echo "FAIL: dueqd did not start"; exit 1; }
"$work/out/refresher_outside" "127.0.0.1:$port"
echo "find_package(dueq): pass"

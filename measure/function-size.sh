#!/usr/bin/env bash
# Functions in src/ and cmd/ longer than a threshold (issue 39: none over 70 lines), measured by
# clang-tidy's readability-function-size (lines of the body, blank and comment lines
# included), over every .cpp of src/ and cmd/ with the compile commands of a build.
#
#   measure/function-size.sh [LINES]   (default 70; needs build/compile_commands.json)
#
# Prints one line per function over LINES, longest first, then a count; exits 0 either way
# (a measurement, not a gate). About ten minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-70}" in
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  *[!0-9]*|'') echo "function-size.sh: LINES must be a whole number, not '${1}'" >&2; exit 2 ;;
esac
limit=${1:-70}
build=${BUILD_DIR:-build}
[ -f "$build/compile_commands.json" ] || {
  echo "function-size.sh: no $build/compile_commands.json (build first: scripts/build.sh)" >&2
  exit 2
}
command -v clang-tidy >/dev/null || { echo "function-size.sh: clang-tidy is not installed" >&2; exit 2; }
config="{CheckOptions: [{key: readability-function-size.LineThreshold, value: $limit}]}"
find src cmd -name '*.cpp' | sort |
  xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet -checks='-*,readability-function-size' \
    -config="$config" 2>/dev/null |
  awk '/warning: function .* exceeds/ { match($0, /function \x27[^\x27]*\x27/); name = substr($0, RSTART + 10, RLENGTH - 11); where = $1 }
       /note: [0-9]+ lines including/ && where != "" { split($0, a, "note: "); split(a[2], b, " "); print b[1], name, where; where = "" }' |
  sort -rn -k1,1 | awk -v limit="$limit" '{ print; n++ } END { printf "%d functions in src/ and cmd/ over %d lines\n", n, limit }'

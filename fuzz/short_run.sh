#!/bin/sh
# ctest's short run of one fuzz target: RUNS executions, starting from the committed
# seeds. libFuzzer writes new inputs only into the first corpus directory, a scratch one
# here, so the repository's seeds are read, never changed. A crash leaves its input in
# the working directory (build-fuzz/fuzz/) as <target>-crash-<sha1>.
#   short_run.sh TARGET_EXE SEED_DIR RUNS
set -eu
exe=$1 seeds=$2 runs=$3
scratch=$(mktemp -d "${TMPDIR:-/tmp}/dueq-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then  # symbolized reports; any version will do
  for s in llvm-symbolizer-16 llvm-symbolizer; do
    if command -v "$s" >/dev/null; then ASAN_SYMBOLIZER_PATH=$(command -v "$s"); export ASAN_SYMBOLIZER_PATH; break; fi
  done
fi
"$exe" -runs="$runs" -timeout=30 -print_final_stats=1 \
  -artifact_prefix="$PWD/$(basename "$exe")-" "$scratch" "$seeds"

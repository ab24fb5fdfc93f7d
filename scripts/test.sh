#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test; then builds
# again with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, clang-16) and
# runs the unit and integration tests there (the long simulation, the chaos runs and
# dueq-bench's smoke test run once, in the plain build, and the sanitizer build leaves
# the simulator and the measuring tools out); then builds the libFuzzer targets with
# clang-16 (build-fuzz/, fuzz/) and runs each for a fixed number of executions from its
# seeds.
#   scripts/test.sh              everything
#   scripts/test.sh -L unit      only tests labelled unit (ctest arguments pass through)
#   DUEQ_SANITIZE_TESTS=0 scripts/test.sh   skip the sanitizer pass
#   DUEQ_FUZZ_TESTS=0 scripts/test.sh       skip the fuzz pass (long runs: fuzz/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh
# Two tests at a time: the machine has 2 cores, and every test that starts servers keeps
# them on free 127.0.0.1 ports the OS picks, so two runs never meet (serially the suite takes
# about 19 min here, two at a time about 10).
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 -j2 "$@")
if [ "${DUEQ_SANITIZE_TESTS:-1}" = 1 ]; then
  echo "== sanitizer pass (ASan + UBSan) =="
  # clang-16 compiles this unoptimised, instrumented build about a third faster than g++
  # does (two of the heaviest files: 16 s against 22 s, 4 s against 8 s).
  BUILD_DIR=build-asan BUILD_TYPE=Debug bash scripts/build.sh -DCMAKE_CXX_COMPILER=clang++-16 \
    -DDUEQ_SANITIZE=ON -DDUEQ_SIMULATOR=OFF -DDUEQ_BENCH_TOOLS=OFF
  . scripts/lib.sh
  export_symbolizer
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure --timeout 900 -j2 -LE "sim|chaos" "$@")
fi
if [ "${DUEQ_FUZZ_TESTS:-1}" = 1 ]; then
  echo "== fuzz pass (libFuzzer: every target of fuzz/, short runs) =="
  bash fuzz/run.sh --build-only
  (cd build-fuzz && ctest --output-on-failure --timeout 900 -L fuzz "$@")
fi

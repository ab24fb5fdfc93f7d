#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test; then builds
# again with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/) and runs the
# unit and integration tests there (the long simulation and the chaos runs, tools/chaos,
# run once, in the plain build, and that build leaves the simulator out); then builds the libFuzzer targets with clang-16
# (build-fuzz/, fuzz/) and runs each for a fixed number of executions from its seeds.
#   scripts/test.sh              everything
#   scripts/test.sh -L unit      only tests labelled unit (ctest arguments pass through)
#   DUEQ_SANITIZE_TESTS=0 scripts/test.sh   skip the sanitizer pass
#   DUEQ_FUZZ_TESTS=0 scripts/test.sh       skip the fuzz pass (long runs: tools/fuzz/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 "$@")
if [ "${DUEQ_SANITIZE_TESTS:-1}" = 1 ]; then
  echo "== sanitizer pass (ASan + UBSan) =="
  BUILD_DIR=build-asan BUILD_TYPE=Debug bash scripts/build.sh -DDUEQ_SANITIZE=ON -DDUEQ_SIMULATOR=OFF
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure --timeout 900 -LE "sim|chaos" "$@")
fi
if [ "${DUEQ_FUZZ_TESTS:-1}" = 1 ]; then
  echo "== fuzz pass (libFuzzer: every target of fuzz/, short runs) =="
  bash tools/fuzz/run.sh --build-only
  (cd build-fuzz && ctest --output-on-failure --timeout 900 -L fuzz "$@")
fi

#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   scripts/test.sh            everything (unit, simulation, protocol, crash)
#   scripts/test.sh -L unit    only tests labelled unit (ctest arguments pass through)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 "$@"

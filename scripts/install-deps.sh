#!/usr/bin/env bash
# Installs the Debian 12 packages dueq builds and runs with; with --test, also those only
# the tests use (scripts/test.sh). Safe to run again: it only calls apt-get when something
# is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  lld  # links the ~40 test and tool binaries several times faster than ld.bfd (CMakeLists.txt)
  libboost-dev libboost-system-dev
  libmsgpack-cxx-dev librocksdb-dev libspdlog-dev
  libssl-dev catch2 libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libsystemd-dev  # dueqd tells systemd it serves (sd_notify, packaging/dueqd@.service)
  openssl  # scripts/make-certs.sh: the CA and certificates of a TLS cluster
  python3  # CMake configures the Python tests along with the rest
)
test_packages=(
  faketime  # testing/chaos: the harness and checker, and clock jumps (libfaketime)
  clang-16 libclang-rt-16-dev  # the sanitizer and fuzz passes of scripts/test.sh, fuzz/run.sh
  llvm-16  # llvm-symbolizer-16: file and line in the sanitizer reports of clang builds
  prometheus chromium  # tests/admin: a real Prometheus scrapes /metrics, headless Chromium renders /
  tcpdump  # tests/cluster/tls_wire.py: what crosses the wire with TLS on and off
  python3-yaml  # tests/admin/alerts_test.py: plants defects in contrib/prometheus/alerts.yml
  python3-msgpack  # clients/python, and tests/cluster/backup_restore.py (a backup's records)
  golang-go golang-github-vmihailenco-msgpack.v5-dev  # clients/go: the Go client and its tests
)
[ "${1:-}" = "--test" ] && packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs the systems dueq-bench compares against, from Debian's archive: Tarantool 2.6
# (the single-node peer) and etcd 3.4 (the 3-member Raft peer). They are not build
# dependencies of dueq; only the comparison runs need them. Needs root (or sudo).
#
#   measure/bench/peers/install-peers.sh
set -euo pipefail
need=()
command -v tarantool >/dev/null || need+=(tarantool)
command -v etcd >/dev/null || need+=(etcd-server)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=
[ "$(id -u)" -ne 0 ] && sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# --no-install-recommends: no systemd units or example instances started for us.
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}"

#!/usr/bin/env bash
# Starts dueqd for dueq-bench: one node, or a 3-node cluster on loopback with the same
# Raft timings as the etcd peer (heartbeat 100 ms, election timeout 1000 ms) and fsync
# always. Each command prints the PID(s) once the node(s) listen, and writes each to
# DIR/<name>.pid (node.pid, n1.pid, ...); stop them with kill.
#
#   measure/bench/dueq.sh node DIR PORT [FSYNC]   one node (FSYNC: always | never); with
#                                               DUEQ_ADMIN=host:port it serves HTTP admin
#   measure/bench/dueq.sh cluster DIR             members 1-3, prints their PIDs
#   measure/bench/dueq.sh member DIR I            (re)starts member I of that cluster
#
# With DUEQ_TLS=1 every link runs TLS (docs/security.md): a CA and certificates are made
# in DIR/tls (scripts/make-certs.sh); point dueq-bench at DIR/tls/ca.pem with --cacert.
#
# Member I serves clients on 127.0.0.1:$((DUEQ_CLIENT_BASE + I - 1)) (default 7771) and
# peers on 127.0.0.1:$((DUEQ_PEER_BASE + I - 1)) (default 7871). DUEQD names the binary
# (default: $BUILD_DIR/cmd/dueqd/dueqd, BUILD_DIR defaulting to build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dueqd=${DUEQD:-$root/${BUILD_DIR:-build}/cmd/dueqd/dueqd}
cmd=${1:?usage: dueq.sh node DIR PORT [FSYNC] | cluster DIR | member DIR I}
dir=${2:?data directory}
cbase=${DUEQ_CLIENT_BASE:-7771}
pbase=${DUEQ_PEER_BASE:-7871}
source "$root/measure/bench/wait-for-line.sh"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# wait_gone PID: until that process is gone (or a zombie), at most 60 s. A killed dueqd
# holds RocksDB's LOCK until the kernel has torn down its memory; a restart before that
# fails to open the data directory.
wait_gone() {
  local pid=$1 state
  for _ in $(seq 1 6000); do
    [ -e "/proc/$pid" ] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q dueqd || return 0  # PID reused
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
    [ "$state" = Z ] && return 0
    sleep 0.01
  done
  echo "dueqd $pid still holds its files after 60 s" >&2
  return 1
}

launch() {  # launch NAME CONFIG: starts dueqd, prints its PID once it listens
  local name=$1 config=$2
  # A restart: the previous process of this name must be gone first.
  [ -f "$dir/$name.pid" ] && wait_gone "$(cat "$dir/$name.pid")"
  : >"$dir/$name.out"
  "$dueqd" --config "$config" >>"$dir/$name.out" 2>>"$dir/$name.log" </dev/null &
  local pid=$!
  local rc=0
  wait_for_line "$dir/$name.out" "listening on port" "$pid" 600 || rc=$?
  case $rc in
    0) echo "$pid" >"$dir/$name.pid"; echo "$pid" ;;
    1) echo "dueqd $name exited; its log:" >&2; tail -20 "$dir/$name.log" >&2; return 1 ;;
    *) echo "dueqd $name did not listen within 600 s" >&2; kill "$pid"; return 1 ;;
  esac
}

tls_section() {  # NAME CLUSTERED: [tls] with DUEQ_TLS=1; plaintext peers said explicitly
  if [ "${DUEQ_TLS:-0}" = 1 ]; then
    [ -f "$dir/tls/n3.pem" ] || bash "$root/scripts/make-certs.sh" "$dir/tls" n1 n2 n3 >/dev/null
    printf '[tls]\nca_file = "%s"\ncert_file = "%s"\nkey_file = "%s"\nclients = "on"\n\n' \
      "$dir/tls/ca.pem" "$dir/tls/$1.pem" "$dir/tls/$1.key"
  elif [ "$2" = 1 ]; then
    printf '[tls]\npeers = "off"\n\n'
  fi
}

common_sections() {  # fsync
  cat <<TOML
[storage]
fsync = "$1"

[log]
level = "info"
TOML
}

member_config() {  # I
  local i=$1
  cat <<TOML
[node]
id = "n$i"
client_listen = "127.0.0.1:$((cbase + i - 1))"
data_dir = "$dir/n$i"

[cluster]
id = "dueq-bench"
secret_file = "cluster-secret"
members = [
  { id = "n1", peer = "127.0.0.1:$pbase", client = "127.0.0.1:$cbase" },
  { id = "n2", peer = "127.0.0.1:$((pbase + 1))", client = "127.0.0.1:$((cbase + 1))" },
  { id = "n3", peer = "127.0.0.1:$((pbase + 2))", client = "127.0.0.1:$((cbase + 2))" },
]

$(tls_section "n$i" 1)
[raft]
heartbeat_ms = 100
election_timeout_ms = 1000

TOML
  common_sections always
}

case $cmd in
  node)
    port=${3:?port}
    {
      printf '[node]\nid = "n1"\nclient_listen = "127.0.0.1:%s"\ndata_dir = "%s/data"\n\n' "$port" "$dir"
      tls_section n1 0
      common_sections "${4:-always}"
      # DUEQ_ADMIN=host:port: the node also serves HTTP admin there (docs/admin.md).
      [ -z "${DUEQ_ADMIN:-}" ] || printf '\n[admin]\nlisten = "%s"\n' "$DUEQ_ADMIN"
    } >"$dir/node.toml"
    launch node "$dir/node.toml"
    ;;
  cluster)
    pids=()
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/cluster-secret"
    for i in 1 2 3; do
      member_config "$i" >"$dir/n$i.toml"
      pids+=("$(launch "n$i" "$dir/n$i.toml")")
    done
    echo "${pids[*]}"
    ;;
  member)
    i=${3:?member number}
    launch "n$i" "$dir/n$i.toml"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac

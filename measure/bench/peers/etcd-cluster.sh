#!/usr/bin/env bash
# A 3-member etcd 3.4 cluster on loopback, the Raft peer of dueq-bench. Timings are
# etcd's defaults, which dueq's loopback cluster uses too: a heartbeat every 100 ms, an
# election after 1000 ms without one. etcd always fsyncs its WAL.
#
#   measure/bench/peers/etcd-cluster.sh start DIR      starts members 1-3, prints their PIDs
#   measure/bench/peers/etcd-cluster.sh member DIR I   (re)starts member I, prints its PID
#
# Member I listens for clients on 127.0.0.1:$((ETCD_CLIENT_BASE + I - 1)) (default base
# 2479) and for peers on 127.0.0.1:$((ETCD_PEER_BASE + I - 1)) (default 2579). Data and
# logs go to DIR/nI, the PID to DIR/nI.pid. Stop the members with kill PID.
set -euo pipefail
cmd=${1:?usage: etcd-cluster.sh start DIR | member DIR I}
dir=${2:?usage: etcd-cluster.sh start DIR | member DIR I}
cbase=${ETCD_CLIENT_BASE:-2479}
pbase=${ETCD_PEER_BASE:-2579}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cluster=""
for i in 1 2 3; do
  cluster+="${cluster:+,}n$i=http://127.0.0.1:$((pbase + i - 1))"
done

start_member() {  # prints the PID once the client port accepts connections
  local i=$1 c=$((cbase + $1 - 1)) p=$((pbase + $1 - 1))
  etcd --name "n$i" --data-dir "$dir/n$i" \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "$cluster" --initial-cluster-token dueq-bench \
    --initial-cluster-state new --heartbeat-interval 100 --election-timeout 1000 \
    --logger zap --log-outputs "$dir/n$i.log" >/dev/null 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 1 3000); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$c") 2>/dev/null; then
      echo "$pid" >"$dir/n$i.pid"
      echo "$pid"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { echo "etcd n$i exited; its log:" >&2; tail -5 "$dir/n$i.log" >&2; return 1; }
    sleep 0.01
  done
  echo "etcd n$i did not listen within 30 s" >&2
  return 1
}

case $cmd in
  start)
    pids=()
    for i in 1 2 3; do pids+=("$(start_member "$i")"); done
    echo "${pids[*]}"
    ;;
  member)
    start_member "${3:?member number}"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Reproduces docs/benchmarks.md: dueq beside Tarantool 2.6 (one node) and etcd 3.4
# (3 members), measured by dueq-bench in one run on this machine. Installs the peers
# (measure/bench/peers/install-peers.sh), builds dueqd, dueq-bench and dueq-queue-mem, runs
# every part, and renders the page from the JSON results.
#
#   measure/bench/run-all.sh                 the full run (about 40 minutes; a quiet machine)
#   SCALE=small measure/bench/run-all.sh     the same steps at small scale (a few minutes)
#   PARTS="single drill" measure/bench/run-all.sh   only some parts:
#                                          floor single cluster drill memory raft (default: all)
#
# Environment: BUILD_DIR (build), OUT (results directory, default a new /tmp dir),
# PAGE (where the page goes: docs/benchmarks.md after a full run of every part, else
# "-", stdout; a page written to a file keeps the old page's hand-kept tail, see the end),
# QUIET_LOAD and QUIET_WAIT_S (before measuring, wait at most
# QUIET_WAIT_S seconds, default 300 at full scale and 0 at small, for the 1-minute load
# average to fall below QUIET_LOAD, default 0.5). Data directories live under OUT.
# Every server it starts listens on 127.0.0.1 and is stopped by its PID on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export BUILD_DIR=${BUILD_DIR:-build}
scale=${SCALE:-full}
parts=${PARTS:-floor single cluster drill memory raft}
out=${OUT:-$(mktemp -d /tmp/dueq-bench.XXXXXX)}
# Only a full run of every part replaces the page; anything less prints it.
default_page=-
[ -z "${PARTS:-}" ] && [ "$scale" = full ] && default_page=docs/benchmarks.md
page=${PAGE:-$default_page}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bench=$BUILD_DIR/measure/bench/dueq-bench
qmem=$BUILD_DIR/measure/queue-mem/dueq-queue-mem
peers=measure/bench/peers

case $scale in
  full)
    secs=20 warmup=3 keys=100000 mem_sizes=${MEM_SIZES:-"1000000 10000000"} drill_n=1000000
    drill_hour=600000 drill_window=60 kills=10 ;;
  small)
    secs=3 warmup=1 keys=20000 mem_sizes="100000 200000" drill_n=100000
    drill_hour=120000 drill_window=15 kills=3 ;;
  *) echo "SCALE must be full or small" >&2; exit 2 ;;
esac

pids=()
stop_all() {
  # A failover that fails leaves the members it restarted only in DIR/nI.pid; each one is
  # stopped while it still runs from that directory (a PID can be reused).
  local f p
  for f in "$out"/cluster-*/n[123].pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if grep -qaF "$(dirname "$f")" "/proc/$p/cmdline" 2>/dev/null; then pids+=("$p"); fi
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_all EXIT
# gone PID: waits until that process has exited, at most 60 s.
gone() {
  for _ in $(seq 1 6000); do kill -0 "$1" 2>/dev/null || break; sleep 0.01; done
}
# stop PID...: SIGTERM, wait until gone (at most 60 s), then forget them.
stop() {
  for p in "$@"; do
    kill "$p" 2>/dev/null || true
    gone "$p"
    kill -9 "$p" 2>/dev/null || true
    local keep=()
    for q in "${pids[@]}"; do [ "$q" != "$p" ] && keep+=("$q"); done
    pids=("${keep[@]}")
  done
}
log() { echo "== $*" >&2; }
now_s() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

# --- setup -------------------------------------------------------------------------------
log "peers"
"$peers/install-peers.sh"
log "build ($BUILD_DIR)"
[ -f "$BUILD_DIR/CMakeCache.txt" ] || cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
nice -n 10 cmake --build "$BUILD_DIR" --target dueqd dueq-bench dueq-queue-mem dueq-floor -j"${JOBS:-$(nproc)}" >/dev/null

# Every figure is a ratio measured on shared cores: a build or a run that just ended
# leaves the load average high for a minute or more, and the first rows would pay for it.
wait_quiet() {
  local max=${QUIET_WAIT_S:-$1} limit=${QUIET_LOAD:-0.5} waited=0 load
  while :; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load" -v m="$limit" 'BEGIN { exit !(l < m) }'; then
      log "quiet: load average $load"
      return 0
    fi
    if [ "$waited" -ge "$max" ]; then
      log "still busy after ${max} s (load average $load); measuring anyway"
      return 0
    fi
    [ $((waited % 30)) -eq 0 ] && log "waiting for a quiet machine: load average $load, want < $limit"
    sleep 5
    waited=$((waited + 5))
  done
}
if [ "$scale" = full ]; then wait_quiet 300; else wait_quiet 0; fi

{
  printf '{"command":"machine","scale":"%s","date":"%s","commit":"%s",' "$scale" \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$(git rev-parse --short HEAD)"
  printf '"cpu":"%s","cores":%d,' "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" "$(nproc)"
  printf '"ram_gib":%.0f,' "$(awk '/MemTotal/ {print $2 / 1048576}' /proc/meminfo)"
  printf '"os":"%s","kernel":"%s",' "$(. /etc/os-release; echo "$PRETTY_NAME")" "$(uname -r)"
  printf '"compiler":"%s",' "$(c++ --version | head -1)"
  printf '"tarantool":"%s","etcd":"%s",' "$(tarantool --version | head -1)" \
    "$(etcd --version | head -1)"
  printf '"load_before":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.json"

# run NAME ARGS...: one dueq-bench run, its JSON saved as NAME.json.
run() {
  local name=$1
  shift
  log "$name"
  "$bench" "$@" --json >"$out/$name.json"
}

# --- one node: dueq beside Tarantool -----------------------------------------------------
# dueq fsync=never (the OS decides when the log reaches disk) is compared with
# Tarantool's default wal_mode=write (the same), and fsync=always with wal_mode=fsync.
# What the machine allows a one-deep request (measure/floor): the page sets the 1 x 1 rows
# against it. A put's request and a log record are about 256 bytes with 200-byte payloads.
floor() {
  log "floor: loopback round trip and fdatasync"
  local n=20000 syncs=2000
  [ "$scale" = small ] && n=2000 syncs=200
  "$BUILD_DIR/measure/floor/dueq-floor" --dir "$out/floor-dir" --json --round-trips "$n" \
    --syncs "$syncs" --request-bytes 256 --answer-bytes 32 --record-bytes 256 >"$out/floor.json"
}

single() {
  local pair fsync wal
  for pair in never:write always:fsync; do
    fsync=${pair%%:*} wal=${pair##*:}
    rm -rf "$out/single-dueq" "$out/single-tarantool"
    local dp tp
    dp=$(measure/bench/dueq.sh node "$out/single-dueq" 7791 "$fsync"); pids+=("$dp")
    tp=$("$peers/tarantool.sh" "$out/single-tarantool" 3391 "$wal" 2048); pids+=("$tp")
    local spec scenario conns depth extra
    for spec in "put 1 1" "put 64 1" "refresh 1 1" "refresh 64 1" "get 64 1" "mixed 64 1" \
                "put 16 32" "refresh 16 8"; do
      read -r scenario conns depth <<<"$spec"
      extra=()
      case $scenario in
        get|refresh|mixed) extra=(--keys "$keys") ;;
        put) extra=(--keys "$keys") ;;
      esac
      for backend in dueq tarantool; do
        local addr=127.0.0.1:7791
        [ $backend = tarantool ] && addr=127.0.0.1:3391
        run "single-$fsync-$backend-$scenario-c$conns-d$depth" "$scenario" -b "$backend" \
          -a "$addr" -c "$conns" -d "$depth" --warmup "$warmup" -s "$secs" \
          --queue "q-$scenario-$conns-$depth" "${extra[@]}"
      done
    done
    stop "$dp" "$tp"
  done
}

# --- three nodes: dueq beside etcd, fsync on ---------------------------------------------
cluster() {
  local d=127.0.0.1:7771,127.0.0.1:7772,127.0.0.1:7773
  local e=127.0.0.1:2479,127.0.0.1:2480,127.0.0.1:2481
  local system addrs dir ps restart
  for system in dueq etcd; do
    dir="$out/cluster-$system"
    rm -rf "$dir"
    if [ $system = dueq ]; then
      addrs=$d
      ps=$(measure/bench/dueq.sh cluster "$dir")
      restart="measure/bench/dueq.sh member $dir {i}"
    else
      addrs=$e
      ps=$("$peers/etcd-cluster.sh" start "$dir")
      restart="$peers/etcd-cluster.sh member $dir {i}"
    fi
    read -ra members <<<"$ps"
    pids+=("${members[@]}")
    "$bench" leader -b "$system" -a "$addrs" >/dev/null
    # 512 requests in flight: dueq pipelines 32 on each of 16 connections; etcd's HTTP
    # gateway answers one request at a time per connection, so it gets 512 connections.
    local many="16 32"
    [ $system = etcd ] && many="512 1"
    for spec in "1 1" "64 1" "$many"; do
      read -r conns depth <<<"$spec"
      run "cluster-$system-put-c$conns-d$depth" put -b "$system" -a "$addrs" -c "$conns" \
        -d "$depth" --warmup "$warmup" -s "$secs" --keys "$keys" --queue "q-put-$conns-$depth"
    done
    # The product's main loop on the cluster (issue 4 compares it with one node).
    if [ $system = dueq ]; then
      for spec in "64 1" "16 8"; do
        read -r conns depth <<<"$spec"
        run "cluster-dueq-refresh-c$conns-d$depth" refresh -b dueq -a "$addrs" -c "$conns" \
          -d "$depth" --warmup "$warmup" -s "$secs" --keys "$keys" --queue "q-ref-$conns-$depth"
      done
    fi
    # The failover restarts members; the start scripts leave their new PIDs in DIR/nI.pid.
    local csv
    csv=$(IFS=,; echo "${members[*]}")
    for sig in kill stop; do
      run "cluster-$system-failover-$sig" failover -b "$system" -a "$addrs" --pid "$csv" \
        --kills "$kills" --signal "$sig" --restart-cmd "$restart" -q
      csv=$(member_pids "$system" "$dir")
      pids+=($(echo "$csv" | tr , ' '))
    done
    stop $(echo "$csv" | tr , ' ')
    stop_all
  done
}
member_pids() {  # the current PIDs of a cluster's members, comma-separated, in order
  local dir=$2
  echo "$(cat "$dir/n1.pid"),$(cat "$dir/n2.pid"),$(cat "$dir/n3.pid")"
}

# --- the Raft core alone, in the simulator (no network, no disk) --------------------------
raft() {
  local batch rate
  nice -n 10 cmake --build "$BUILD_DIR" --target dueq-sim -j"${JOBS:-$(nproc)}" >/dev/null
  for batch in 1 64; do
    log "dueq-sim bench --batch $batch"
    rate=$("$BUILD_DIR/sim/dueq-sim" bench --batch "$batch" |
           sed -n 's/.*= \([0-9]*\) entries\/s.*/\1/p')
    printf '{"command":"dueq-sim","results":[{"batch":%d,"entries_per_s":%s}]}\n' \
      "$batch" "${rate:-0}" >"$out/raft-batch-$batch.json"
  done
}

# --- the refresh drill -------------------------------------------------------------------
drill() {
  local dp tp
  rm -rf "$out/drill-dueq" "$out/drill-tarantool"
  dp=$(measure/bench/dueq.sh node "$out/drill-dueq" 7791 always); pids+=("$dp")
  run drill-dueq drill -a 127.0.0.1:7791 --tokens "$drill_n" --hour-ms "$drill_hour" \
    --seconds "$drill_window" --late-share 0.1 --refreshers 64 --service-ms 5
  stop "$dp"
  tp=$("$peers/tarantool.sh" "$out/drill-tarantool" 3391 fsync \
       $(( drill_n / 1000000 * 600 + 1024 ))); pids+=("$tp")
  run drill-tarantool drill -b tarantool -a 127.0.0.1:3391 --tokens "$drill_n" \
    --hour-ms "$drill_hour" --seconds "$drill_window" --late-share 0.1 --refreshers 64 \
    --service-ms 5
  stop "$tp"
}

# --- memory and restart ------------------------------------------------------------------
# restart_time NAME START_CMD...: runs the start command (which prints a PID once the
# server listens), then waits for the first get of key 0 to find its task.
# Prints the server's PID; the caller adds it to pids (this runs in a subshell).
restart_time() {
  local name=$1 backend=$2 addr=$3
  shift 3
  local t0 p ms
  t0=$(now_s)
  p=$("$@")
  "$bench" wait -b "$backend" -a "$addr" --queue mem --timeout 1200 -q >/dev/null ||
    { kill -9 "$p"; exit 1; }
  ms=$(since "$t0")
  printf '{"command":"restart","results":[{"backend":"%s","case":"%s","ms":%s,"rss_after":%s}]}\n' \
    "$backend" "$name" "$ms" "$(( $(awk '/VmRSS/ {print $2}' /proc/"$p"/status) * 1024 ))" \
    >"$out/restart-$backend-$name-$n.json"
  log "restart $backend $name ($n tasks): $ms ms"
  echo "$p"
}
# Tasks shaped like the tokens: expiries spread over an hour, payloads of random bytes.
# (All due at one instant with 'x' payloads, every index tie falls to a key compare and
# both stores' compression shrinks the data to a few percent: not what users hold.)
token_shape=(--spread-ms 3600000 --random-payloads)
memory() {
  local n dp tp mb
  for n in $mem_sizes; do
    "$qmem" --tasks "$n" --key-bytes 16 --payload-bytes 200 --json >"$out/queue-mem-$n.json"
    rm -rf "$out/mem-dueq"
    dp=$(measure/bench/dueq.sh node "$out/mem-dueq" 7791 never); pids+=("$dp")
    run "memory-dueq-$n" memory -a 127.0.0.1:7791 --pid "$dp" --keys "$n" --queue mem \
      -c 16 -d 64 "${token_shape[@]}"
    stop "$dp"
    dp=$(restart_time sigterm dueq 127.0.0.1:7791 measure/bench/dueq.sh node "$out/mem-dueq" 7791 never)
    pids+=("$dp")
    kill -9 "$dp"
    # The clock starts once the killed process is gone, as it does for every other restart
    # here (after stop): the kernel tearing down 3 GB of memory is not the new process's.
    gone "$dp"
    dp=$(restart_time sigkill dueq 127.0.0.1:7791 measure/bench/dueq.sh node "$out/mem-dueq" 7791 never)
    pids+=("$dp")
    stop "$dp"
    rm -rf "$out/mem-dueq"

    mb=$(( n / 1000000 * 450 + 512 ))
    rm -rf "$out/mem-tarantool"
    tp=$("$peers/tarantool.sh" "$out/mem-tarantool" 3391 write "$mb"); pids+=("$tp")
    run "memory-tarantool-$n" memory -b tarantool -a 127.0.0.1:3391 --pid "$tp" --keys "$n" \
      --queue mem -c 16 -d 64 "${token_shape[@]}"
    stop "$tp"
    tp=$(restart_time xlog tarantool 127.0.0.1:3391 "$peers/tarantool.sh" "$out/mem-tarantool" 3391 write "$mb")
    pids+=("$tp")
    run "checkpoint-tarantool-$n" checkpoint -b tarantool -a 127.0.0.1:3391
    stop "$tp"
    tp=$(restart_time snapshot tarantool 127.0.0.1:3391 "$peers/tarantool.sh" "$out/mem-tarantool" 3391 write "$mb")
    pids+=("$tp")
    stop "$tp"
    rm -rf "$out/mem-tarantool"
  done
}

for part in $parts; do
  case $part in
    floor|single|cluster|drill|memory|raft) "$part" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done

# The servers' data directories are large after a full run; KEEP_DATA=1 keeps them.
[ -n "${KEEP_DATA:-}" ] || find "$out" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
log "results in $out"
if [ "$page" = - ]; then
  "$bench" report "$out"
else
  # The report renders the page down to "What is compared"; whatever the old page holds
  # from the line $keep on (sections added by hand, each with its own run) is carried over.
  keep='<!-- run-all.sh keeps what follows: the sections below are not rendered by dueq-bench report -->'
  kept=
  if [ -f "$page" ]; then kept=$(awk -v m="$keep" '$0 == m { on = 1 } on' "$page"); fi
  "$bench" report "$out" >"$page.new"
  if [ -n "$kept" ]; then printf '\n%s\n' "$kept" >>"$page.new"; fi
  mv "$page.new" "$page"
  log "wrote $page"
fi

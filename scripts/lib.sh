# Shell helpers shared by scripts/, testing/ and measure/. Source it: . scripts/lib.sh

# start_dueqd BINARY OUT LOG [ARGS...]
# Starts BINARY (a dueqd) with ARGS in the background, its stdout to OUT and its stderr
# appended to LOG, and waits until it prints "listening on port N" (it serves clients
# then, as a follower too). Sets dueqd_pid and dueqd_port. If the process exits, or has
# not printed the line within ${DUEQD_START_TIMEOUT:-30} seconds, prints the end of LOG
# to stderr, stops the process and returns 1.
# The node runs in a session of its own: a Ctrl-C in the terminal reaches the script
# (and its foreground clients), not the nodes, which the script then stops by PID.
start_dueqd() {
  local binary=$1 out=$2 log=$3
  shift 3
  : >"$out"
  setsid "$binary" "$@" >"$out" 2>>"$log" &
  dueqd_pid=$!
  dueqd_port=
  local deadline=$((SECONDS + ${DUEQD_START_TIMEOUT:-30}))
  until grep -q "listening on port" "$out" 2>/dev/null; do
    if ! kill -0 "$dueqd_pid" 2>/dev/null || ((SECONDS >= deadline)); then
      echo "start_dueqd: $binary $* did not start; the end of $log:" >&2
      tail -20 "$log" >&2
      stop_pid "$dueqd_pid" KILL
      return 1
    fi
    sleep 0.02
  done
  dueqd_port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$out" | head -1)
}

# stop_pid PID [SIGNAL]: sends SIGNAL (default TERM) to PID and waits for it to exit;
# after 10 s it sends SIGKILL. Only for children of this shell; a PID that is already
# gone is not an error.
stop_pid() {
  local pid=$1 sig=${2:-TERM}
  [ -n "$pid" ] || return 0
  kill "-$sig" "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
  local i
  for i in $(seq 500); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# export_symbolizer: points ASAN_SYMBOLIZER_PATH (unless set) at an llvm-symbolizer, of any
# version: the sanitizer runtime of clang builds names files and lines only through it.
export_symbolizer() {
  [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] || return 0
  local s
  for s in llvm-symbolizer-16 llvm-symbolizer /usr/lib/llvm-16/bin/llvm-symbolizer; do
    if command -v "$s" >/dev/null; then
      export ASAN_SYMBOLIZER_PATH=$(command -v "$s")
      return 0
    fi
  done
}

# What measure/bench/before-after.sh and tls-cost.sh share: stopping the servers of a run
# by PID, the CPU time of processes, and the median and ratio of the figures. Sourced;
# the caller keeps its servers' PIDs in the array `pids`.

stop_all() {  # SIGTERM every server in pids, SIGKILL after 30 s; empties pids
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    for _ in $(seq 1 3000); do kill -0 "$p" 2>/dev/null || break; sleep 0.01; done
    kill -9 "$p" 2>/dev/null || true
  done
  pids=()
}

clk_tck=$(getconf CLK_TCK)
cpu_ticks() {  # PIDS: user + system clock ticks of those processes so far
  local t=0 f
  for p in "$@"; do
    read -r -a f <"/proc/$p/stat"
    t=$((t + f[13] + f[14]))
  done
  echo "$t"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

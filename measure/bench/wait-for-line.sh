# wait_for_line FILE TEXT PID SECONDS: returns 0 once a line of FILE contains TEXT, 1 if
# process PID exits first, 2 after SECONDS. Sourced by the start scripts.
#
# It polls every 10 ms without starting a process: a loop that forks grep and sleep each
# time costs about a sixth of a core on this VM, taken from the very server whose start is
# being timed.
wait_for_line() {
  local file=$1 text=$2 pid=$3 seconds=$4 tick line i
  exec {tick}<> <(:)  # a pipe no one writes to: read -t on it sleeps, in the shell itself
  for ((i = 0; i < seconds * 100; i++)); do
    if [ -f "$file" ]; then
      while IFS= read -r line || [ -n "$line" ]; do
        if [[ $line == *"$text"* ]]; then
          exec {tick}>&-
          return 0
        fi
      done <"$file"
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      exec {tick}>&-
      return 1
    fi
    read -r -t 0.01 -u "$tick" _ || true
  done
  exec {tick}>&-
  return 2
}

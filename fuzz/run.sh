#!/usr/bin/env bash
# fuzz/run.sh [TARGET...] [--seconds N | --runs N] [--fresh] [-- LIBFUZZER_ARGS]
# Builds the libFuzzer targets in build-fuzz/ (clang-16, -DDUEQ_FUZZ=ON) if needed and
# runs each target in turn, one process on one core. See --help and docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz_request fuzz_peer fuzz_command fuzz_records)
build=${FUZZ_BUILD_DIR:-build-fuzz}

usage() {
  cat <<'USAGE'
usage: fuzz/run.sh [TARGET...] [--seconds N | --runs N] [--fresh] [-- LIBFUZZER_ARGS]
       fuzz/run.sh --build-only | --make-corpus | --list | --help

Runs the libFuzzer targets of fuzz/ for long, one after the other (one core each), and
prints per target the executions, exec/s, coverage (cov: edges, ft: features) and the
corpus size reached. Without TARGET, every target. Default: --seconds 600 per target.

  TARGET          fuzz_request fuzz_peer fuzz_command fuzz_records (the "fuzz_" may be left out)
  --seconds N     stop each target after N seconds (-max_total_time)
  --runs N        stop each target after N executions (-runs)
  --fresh         start from the committed seeds only (forget the scratch corpus)
  --no-build      run the binaries already in build-fuzz/ as they are
  --build-only    configure and build build-fuzz/ (what scripts/test.sh does), then exit
  --make-corpus   rewrite the committed seeds, fuzz/corpus/, with build-fuzz/fuzz/make_corpus
  --list          print the targets
  -- ARGS         passed to every target (libFuzzer flags, e.g. -max_len=4096)

The scratch corpus of a target is build-fuzz/corpus/TARGET/: every run adds what it
found, and starts from it and from fuzz/corpus/TARGET/ (read, never written). Logs go
to build-fuzz/fuzz-logs/TARGET.log, a crash's input to build-fuzz/fuzz-logs/TARGET-crash-*
(replay it: build-fuzz/fuzz/TARGET FILE). The exit status is 0 only when no target
found anything. Short runs of every target are in ctest (label fuzz, scripts/test.sh).

Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_CC / FUZZ_CXX (default clang-16 /
clang++-16). Run it under `nice -n 10` on a shared machine.
USAGE
}

build_fuzz() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=${FUZZ_CC:-clang-16} CXX=${FUZZ_CXX:-clang++-16} \
      cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDUEQ_FUZZ=ON >/dev/null
  fi
  cmake --build "$build" --target fuzz_targets -j "${JOBS:-$(nproc)}"
}

targets=() limit=(-max_total_time=600) fresh=0 extra=() build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --list) printf '%s\n' "${all_targets[@]}"; exit 0 ;;
    --build-only) build_fuzz; exit 0 ;;
    --make-corpus)
      build_fuzz
      cmake --build "$build" --target make_corpus
      rm -rf fuzz/corpus
      "$build/fuzz/make_corpus" fuzz/corpus
      exit 0 ;;
    --seconds) limit=(-max_total_time="${2:?--seconds needs a number}"); shift ;;
    --runs) limit=(-runs="${2:?--runs needs a number}"); shift ;;
    --fresh) fresh=1 ;;
    --no-build) build_first=0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      t=$1; [[ $t == fuzz_* ]] || t=fuzz_$t
      if [[ " ${all_targets[*]} " != *" $t "* ]]; then
        echo "run.sh: no target $1 (--list)" >&2; exit 2
      fi
      targets+=("$t") ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

[ "$build_first" = 0 ] || build_fuzz
. scripts/lib.sh
export_symbolizer
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

logs=$build/fuzz-logs
mkdir -p "$logs"
summary=()
status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  corpus=$build/corpus/$t
  [ "$fresh" = 0 ] || rm -rf "$corpus"
  mkdir -p "$corpus"
  log=$logs/$t.log
  echo "== $t: ${limit[*]} (log: $log)"
  started=$(date +%s)
  rc=0
  "$build/fuzz/$t" "${limit[@]}" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$logs/$t-" "${extra[@]}" "$corpus" "fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  elapsed=$(( $(date +%s) - started ))
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
  files=$(find "$corpus" -type f | wc -l)
  verdict=ok
  if [ "$rc" != 0 ]; then
    verdict="FOUND SOMETHING (exit $rc): $(ls "$logs/$t-"* 2>/dev/null | tail -n 1)"
    status=1
    grep -E 'ERROR|SUMMARY|fuzz check failed|runtime error' "$log" | head -n 5 || true
  fi
  line=$(printf '%-13s execs %-11s exec/s %-7s cov %-5s ft %-6s corpus %s (%s files in %s) %ss  %s' \
    "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$files" "$corpus" \
    "$elapsed" "$verdict")
  echo "$line"
  summary+=("$line")
done
echo
echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), ${limit[*]})"
printf '%s\n' "${summary[@]}" | tee -a "$logs/summary.txt"
exit $status

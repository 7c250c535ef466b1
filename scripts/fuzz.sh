#!/usr/bin/env bash
# fuzz.sh — runs the libFuzzer targets of build-fuzz/ (docs/fuzzing.md), two at a time.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 600 s each, every target)
# New corpus entries go to build-fuzz/corpus/<name>/ (the seeds in test/fuzz/corpus/<name>/
# are read, never written); crashes to build-fuzz/artifacts/<name>/; logs to
# build-fuzz/logs/<name>.log. Prints each target's executions and result at the end.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(graph_json params npy function_table device_blob ptx relay dataflow_json elf host)
jobs_max=${FUZZ_JOBS:-2}
b=build-fuzz
mkdir -p "$b/logs"

run_one() {
  local t=$1
  mkdir -p "$b/corpus/$t" "$b/artifacts/$t"
  "$b/test/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    -dict="test/fuzz/$t.dict" -artifact_prefix="$b/artifacts/$t/" \
    "$b/corpus/$t" "test/fuzz/corpus/$t" >"$b/logs/$t.log" 2>&1
  echo "$t exit $?" >>"$b/logs/$t.log"
}

for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 5; done
  echo "fuzz: $t (${secs}s)"
  run_one "$t" &
done
wait

for t in "${targets[@]}"; do
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$b/logs/$t.log" | awk '{print $2}')
  crash=$(ls "$b/artifacts/$t" 2>/dev/null | wc -l)
  printf '%-16s executions %-10s artifacts %s  (%s)\n' "$t" "${execs:-?}" "$crash" "$(tail -n 1 "$b/logs/$t.log")"
done

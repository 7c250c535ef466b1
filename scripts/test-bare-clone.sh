#!/usr/bin/env bash
# test-bare-clone.sh LOG — runs again, as on a bare clone with nothing beside it, every C++ test
# that asked for ../shared during the run that wrote LOG (test_util.cpp: KDFLOW_TEST_SHARED_LOG
# names the file; each line "<test executable>\t<test name>"). With KDFLOW_TEST_NO_SHARED=1 each
# must pass or say it skipped (issue 49: three tests once failed on every bare clone because they
# fell back to ../shared/samples without checking it was there). Exits 1 naming the executable
# when one of its tests fails; 0 when LOG is absent or empty (no test read ../shared).
set -euo pipefail
log=${1:?usage: test-bare-clone.sh LOG}
if [ ! -s "$log" ]; then
  echo "test-bare-clone: no test asked for ../shared (no $log): nothing to run"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
total=0
while IFS= read -r exe; do
  # Catch2's --input-file: one name a line, quoted by Catch; a comma, a quote and a backslash
  # in a name are escaped with a backslash.
  names="$tmp/names"
  awk -F '\t' -v exe="$exe" '$1 == exe { print $2 }' "$log" | sort -u |
    sed -e 's/\\/\\\\/g' -e 's/,/\\,/g' -e 's/"/\\"/g' >"$names"
  n=$(wc -l <"$names")
  total=$((total + n))
  if KDFLOW_TEST_NO_SHARED=1 KDFLOW_TEST_SHARED_LOG= "$exe" -f "$names" -w NoTests >"$tmp/out" 2>&1; then
    skipped=$(grep -ci "skip" "$tmp/out" || true)
    echo "test-bare-clone: $(basename "$exe"): $n tests that read ../shared pass without it ($skipped lines say skipped)"
  else
    status=1
    echo "test-bare-clone: FAILED: $(basename "$exe"): a test that reads ../shared fails without it:" >&2
    tail -n 40 "$tmp/out" >&2
  fi
done < <(cut -f1 "$log" | sort -u)
echo "test-bare-clone: $total tests run with ../shared hidden (KDFLOW_TEST_NO_SHARED=1)"
exit "$status"

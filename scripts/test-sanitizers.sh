#!/usr/bin/env bash
# test-sanitizers.sh — builds kdflow and its tests with AddressSanitizer + UndefinedBehavior-
# Sanitizer (g++, -DKDFLOW_SANITIZE=ON) in build-asan/ and runs the ctest suite there (all of
# kdflow's own tests; see the exclusion below).
# LLVM's own globals are reported as leaks by LeakSanitizer: test/lsan.supp suppresses those
# (only those); UBSan stops at the first report (-fno-sanitize-recover). Exits non-zero if
# the build or any test fails. Prints the wall time of the build and of the tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

[ "${KDFLOW_TEST_SANITIZERS:-0}" = 1 ] || bash scripts/install-deps.sh

generator=(-G Ninja)
[ -f build-asan/CMakeCache.txt ] && generator=()
start=$(date +%s)
# -O0 and line tables: instrumented at -O1, the clang-heavy files take half again as long to
# compile (device_analyzer.cpp: 121 s against 80 s), more than the slower tests give back.
. scripts/build-config.sh  # for ccache (KDFLOW_CCACHE) alone: the flags here are the sanitizer build's
cmake -S . -B build-asan "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" -DKDFLOW_SANITIZE=ON -DKDFLOW_BUILD_TESTS=ON "${KDFLOW_CCACHE[@]}"
cmake --build build-asan -j2
built=$(date +%s)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0}"
export LSAN_OPTIONS="suppressions=$PWD/test/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
status=0
# The CPU replay back end's tests run here too: its fibers announce every stack switch to ASan
# (lib/replay/cpu/runtime.cpp), and the guard's SIGSEGV reporter chains to ASan's handler.
# Every test of kdflow's own code runs here. Left out, as they run kdflow the same way as the
# normal pass and mostly time other programs: the real TVMs' model builds (test/tvm, TVM's
# compiler in Python), the pages in headless chromium, Model Explorer, the exporter's Python
# unit tests and the layout check. KDFLOW_SANITIZE_ALL=1 runs those too.
exclude=(-E '^(tvm [0-9a-z]+:|view:|python:|layout:)')
[ "${KDFLOW_SANITIZE_ALL:-0}" = 1 ] && exclude=()
# Each test that asks for ../shared is written down, and run again afterwards with it hidden
# (scripts/test-bare-clone.sh): on a bare clone it must pass or say it skipped.
shared_log=$PWD/build-asan/shared-users.log
rm -f "$shared_log"
KDFLOW_TEST_SHARED_LOG="$shared_log" KDFLOW_CACHE_DIR="${KDFLOW_CACHE_DIR_ASAN:-$PWD/build-asan/kdflow-cache}" \
  ctest --test-dir build-asan --output-on-failure -j2 "${exclude[@]}" || status=$?
KDFLOW_CACHE_DIR="${KDFLOW_CACHE_DIR_ASAN:-$PWD/build-asan/kdflow-cache}" \
  bash scripts/test-bare-clone.sh "$shared_log" || status=$?
done_at=$(date +%s)
echo "test-sanitizers: build $((built - start)) s, tests $((done_at - built)) s"
if [ "$status" -ne 0 ]; then
  echo "test-sanitizers: FAILED: ctest exited with $status" >&2
  exit "$status"
fi
echo "test-sanitizers: all tests passed under ASan+UBSan"

#!/usr/bin/env bash
# bench.sh KDFLOW DUMP_HEADERS OUT_DIR [bench.py options] — the `bench` CMake target's
# command (not a test): extract vs clang -fsyntax-only on every sample, and a scaling
# series (bench/bench.py; figures in docs/benchmarks.md). Uses clang-15 when installed,
# trying `apt-get install -y clang-15` first when run as root (BENCH_NO_INSTALL=1 skips it),
# else clang-14.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v clang-15 >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && [ -z "${BENCH_NO_INSTALL:-}" ]; then
  timeout 300 apt-get install -y -qq clang-15 >/dev/null 2>&1 || echo "bench: clang-15 not installable; using clang-14" >&2
fi
exec python3 bench/bench.py "$@"

#!/usr/bin/env bash
# wheel.sh — kdflow's wheel (docs/python.md): `pip wheel` of the checkout through
# scikit-build-core (pyproject.toml), then `auditwheel repair`, which copies every shared library
# the kdflow executable loads beyond the manylinux set (LLVM, Clang, isl, protobuf, Graphviz, ...)
# into the wheel and tags it for the glibc it needs.
#
# Usage: scripts/wheel.sh [--reuse-build DIR] [--out DIR]
#   --reuse-build DIR  build in DIR, an existing build folder configured as scripts/test.sh
#                      configures build/ (RelWithDebInfo, -O2 -g1): its objects are reused, the
#                      executable installed stripped (CI: no second compile)
#   --out DIR          where the wheel goes (default dist/); the repaired wheel's path is printed
# Needs python3 with venv; the tools (pinned, scripts/requirements-wheel.txt) go in build/venv-wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=dist
REUSE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reuse-build) REUSE=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "wheel.sh: error: unknown option $1" >&2; exit 64 ;;
  esac
done
venv=build/venv-wheel
if ! cmp -s scripts/requirements-wheel.txt "$venv/.requirements" 2>/dev/null; then
  rm -rf "$venv"
  mkdir -p build
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-wheel.txt
  cp scripts/requirements-wheel.txt "$venv/.requirements"
fi
settings=()
if [ -n "$REUSE" ]; then
  settings=(-C "build-dir=$REUSE" -C cmake.build-type=RelWithDebInfo
            -C "cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -C cmake.define.KDFLOW_BUILD_TESTS=ON)
fi
rm -rf "$OUT/raw"
mkdir -p "$OUT/raw"
start=$(date +%s)
"$venv/bin/pip" wheel . --no-build-isolation --no-deps --disable-pip-version-check -q -w "$OUT/raw" "${settings[@]}"
raw=$(ls "$OUT"/raw/kdflow-*.whl)
echo "wheel: built $raw in $(( $(date +%s) - start )) s"
start=$(date +%s)
rm -f "$OUT"/kdflow-*.whl
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w "$OUT" "$raw" >"$OUT/repair.log" 2>&1 || { cat "$OUT/repair.log" >&2; exit 1; }
wheel=$(ls "$OUT"/kdflow-*manylinux*.whl)
echo "wheel: $wheel ($(du -m "$wheel" | cut -f1) MB) repaired in $(( $(date +%s) - start )) s"

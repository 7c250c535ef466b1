#!/usr/bin/env bash
# run.sh BUILD_DIR — ctest "python: the wheel ...": the wheel made from BUILD_DIR's objects
# (scripts/wheel.sh --reuse-build), then test/wheel/check_wheel.py on it (docs/python.md).
# Exits 77 (skipped, said) where the wheel's tools cannot be installed from PyPI.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
cd "$root"
if ! scripts/wheel.sh --reuse-build "$build" --out "$build/wheel" >"$build/wheel.log" 2>&1; then
  if grep -q "Could not find a version\|Failed to establish a new connection\|No matching distribution" "$build/wheel.log"; then
    echo "wheel: skipped: the wheel's tools (scripts/requirements-wheel.txt) could not be installed from PyPI"
    exit 77
  fi
  tail -30 "$build/wheel.log"
  echo "wheel: FAILED: scripts/wheel.sh (log: $build/wheel.log)"
  exit 1
fi
cat "$build/wheel.log" | grep "^wheel:"
wheel=$(ls "$build"/wheel/kdflow-*manylinux*.whl)
exec /usr/bin/python3 test/wheel/check_wheel.py "$wheel" --work "$build/wheel-check" \
  --auditwheel "$root/build/venv-wheel/bin/auditwheel" --tvm-requirements test/tvm/requirements-tvm027.txt

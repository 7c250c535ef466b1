#!/usr/bin/env bash
# Regenerates test/golden/<model>.json and .dot from samples/<model> with the built kdflow
# (and <model>.model-explorer.json, kdflow view's Model Explorer graph, for mlp and mlp_cublas).
# Review the result with `git diff test/golden` before committing.
# usage: scripts/update-goldens.sh [path/to/kdflow]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kdflow=${1:-$root/build/kdflow}
mkdir -p "$root/test/golden"
for dir in "$root"/samples/*/; do
  m=$(basename "$dir")
  [ -f "$dir/graph.json" ] || [ -f "$dir/vm_exec.bin" ] || continue
  "$kdflow" extract "$dir" -q -o "$root/test/golden/$m.json"
  "$kdflow" extract "$dir" -q -o "$root/test/golden/$m.dot"
  echo "updated test/golden/$m.json test/golden/$m.dot"
done
# kdflow view's Model Explorer graph (test/pipeline/view.cpp) for two samples.
for m in mlp mlp_cublas; do
  "$kdflow" view "$root/samples/$m" -q -o "$root/test/golden/$m.model-explorer.json"
  echo "updated test/golden/$m.model-explorer.json"
done

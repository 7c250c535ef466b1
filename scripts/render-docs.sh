#!/usr/bin/env bash
# render-docs.sh — regenerates docs/samples/<model>.dot and .svg for every samples/<model>
# with build/kdflow extract and Graphviz `dot -Tsvg`. Deterministic: running it again on
# the same machine gives no git diff (paths are relative to the repository root, and
# kdflow's and dot's output depend only on their input; dot's layout does depend on the
# fonts installed, so render on Debian 12 with install-deps.sh's packages).
# Builds kdflow first if build/kdflow is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x build/kdflow ]; then
  generator=(-G Ninja)
  [ -f build/CMakeCache.txt ] && generator=()
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j2 --target kdflow
fi

mkdir -p docs/samples
for dir in samples/*/; do
  model=$(basename "$dir")
  [ -f "samples/$model/graph.json" ] || continue
  dot_file="docs/samples/$model.dot"
  ./build/kdflow extract "samples/$model" -q -o "$dot_file"
  dot -Tsvg "$dot_file" -o "docs/samples/$model.svg"
  echo "render-docs: $dot_file, docs/samples/$model.svg"
done

#!/usr/bin/env bash
# demo.sh — installs what is missing, builds kdflow, and extracts the kernel-level
# dataflow of the bundled mlp sample as JSON, DOT, text and SVG under out/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh

# A fresh build/ uses Ninja; an existing one keeps the generator it was made with.
generator=(-G Ninja)
[ -f build/CMakeCache.txt ] && generator=()
echo "demo: configuring and building (build/)"
# The same configuration as scripts/test.sh (scripts/build-config.sh), so that running the
# tests after the demo compiles nothing of lib/ again.
. scripts/build-config.sh
cmake -S . -B build "${generator[@]}" "${KDFLOW_BUILD_CONFIG[@]}" >/dev/null
cmake --build build -j2 --target kdflow

mkdir -p out
for fmt in json dot txt; do
  ./build/kdflow extract samples/mlp -q -o "out/mlp.$fmt"
done
dot -Tsvg out/mlp.dot -o out/mlp.svg

echo
cat out/mlp.txt
echo
echo "demo: wrote"
for f in out/mlp.json out/mlp.dot out/mlp.txt out/mlp.svg; do
  echo "  $(pwd)/$f"
done

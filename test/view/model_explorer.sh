#!/usr/bin/env bash
# model_explorer.sh KDFLOW BUILD_DIR — `kdflow view --format model-explorer` on samples, each
# loaded by Google Model Explorer's own Python package (ai-edge-model-explorer, pinned, in
# BUILD_DIR/venv-model-explorer, made once). Exit 77 (ctest: skipped) where PyPI cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kdflow=$1
venv=$2/venv-model-explorer
pin="ai-edge-model-explorer==0.1.34"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import model_explorer' 2>/dev/null; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1 ||
     ! timeout 300 "$venv/bin/pip" install -q "$pin" >"$2/venv-model-explorer.log" 2>&1; then
    echo "model_explorer: SKIP: could not install $pin from PyPI (see $2/venv-model-explorer.log)"
    rm -rf "$venv"
    exit 77
  fi
fi
exec "$venv/bin/python" "$here/check_model_explorer.py" "$kdflow" "$here/../../samples"

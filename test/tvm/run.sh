#!/usr/bin/env bash
# run.sh WHICH KDFLOW BUILD_DIR — builds the real test models with one real TVM through the
# exporter (build_models.py, cached in BUILD_DIR/tvm-models/WHICH) and checks kdflow on them
# (check_models.py). WHICH: 027 (TVM 0.27 from PyPI, in BUILD_DIR/venv-tvm027, made by
# scripts/test.sh) or 026 (../shared/tvm, TVM 0.26 built from its tag, with onnx from
# BUILD_DIR/venv-tvm026). Exits 77 (ctest: skipped) with one line when that TVM is absent.
set -uo pipefail
which=$1 kdflow=$2 build=$3
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
shared="$root/../shared"
case "$which" in
  027)
    py="$build/venv-tvm027/bin/python"
    [ -x "$py" ] || { echo "tvm $which: skipped: no $build/venv-tvm027 (scripts/test.sh makes it where PyPI is reachable)"; exit 77; }
    ;;
  026)
    [ -f "$shared/tvm/env.sh" ] || { echo "tvm $which: skipped: no ../shared/tvm beside the checkout"; exit 77; }
    # shellcheck disable=SC1091
    . "$shared/tvm/env.sh" >/dev/null 2>&1 || { echo "tvm $which: skipped: ../shared/tvm/env.sh failed"; exit 77; }
    py="$build/venv-tvm026/bin/python"
    [ -x "$py" ] || { echo "tvm $which: skipped: no $build/venv-tvm026 (onnx for TVM 0.26; scripts/test.sh makes it)"; exit 77; }
    ;;
  *) echo "run.sh: WHICH is 027 or 026" >&2; exit 2 ;;
esac
models="$build/tvm-models/$which"
"$py" "$root/test/tvm/build_models.py" "$models"
rc=$?
[ $rc -eq 77 ] && { echo "tvm $which: skipped: build_models.py could not import TVM or onnx"; exit 77; }
[ $rc -ne 0 ] && { echo "tvm $which: build_models.py failed (exit $rc)"; exit 1; }
exec "$py" "$root/test/tvm/check_models.py" "$kdflow" "$models" "$shared"

#!/usr/bin/env bash
# run.sh WHICH KDFLOW BUILD_DIR — builds the real test models with one real TVM through the
# exporter (build_models.py, cached in BUILD_DIR/tvm-models/WHICH) and checks kdflow on them
# (check_models.py). WHICH: 027 (TVM 0.27 from PyPI, in BUILD_DIR/venv-tvm027, made by
# scripts/test.sh; 027s: its sharded models only; mlc: MLC-LLM's architectures, mlc_models.py) or 026 (../shared/tvm, TVM 0.26 built from its tag, with onnx from
# BUILD_DIR/venv-tvm026) or 025 (TVM 0.25 from PyPI, in BUILD_DIR/venv-tvm025) or 019
# (../shared/tvm019, TVM 0.19 built from its tag: Relay and the graph executor, with Debian's
# /usr/bin/python3 and python3-onnx). Exits 77 (ctest: skipped) with one line when that TVM is absent.
set -uo pipefail
which=$1 kdflow=$2 build=$3
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
shared="$root/../shared"
case "$which" in
  027|027s)
    py="$build/venv-tvm027/bin/python"
    [ -x "$py" ] || { echo "tvm $which: skipped: no $build/venv-tvm027 (scripts/test.sh makes it where PyPI is reachable)"; exit 77; }
    # 027s: the sharded (tensor-parallel) models of sharded_models.py, a test of their own so that
    # ctest runs them beside the other 0.27 models on the other core.
    sharded="tp_mlp tp_mlp_compiled tp_allgather tp_llm_2 tp_llm_4"
    if [ "$which" = 027s ]; then export KDFLOW_TVM_MODELS="$sharded"; else export KDFLOW_TVM_SKIP="$sharded"; fi
    ;;
  mlc)
    # MLC-LLM's architectures as MLC compiles them (mlc_models.py; mlc_models.CI unless
    # KDFLOW_MLC_MODELS names others, "all" for every one), with TVM 0.27 from PyPI and MLC-LLM's
    # Python source from ../shared/mlc_llm, checked by check_mlc.py.
    py="$build/venv-tvm027/bin/python"
    [ -x "$py" ] || { echo "tvm $which: skipped: no $build/venv-tvm027 (scripts/test.sh makes it where PyPI is reachable)"; exit 77; }
    [ -f "$shared/mlc_llm/mlc_shim.py" ] || { echo "tvm $which: skipped: no ../shared/mlc_llm beside the checkout"; exit 77; }
    "$py" -c "import tqdm" 2>/dev/null || { echo "tvm $which: skipped: $build/venv-tvm027 has no tqdm (MLC-LLM imports it; scripts/test.sh installs it)"; exit 77; }
    models="$build/tvm-models/mlc"
    export KDFLOW_CACHE_DIR="${KDFLOW_CACHE_DIR:-$build/kdflow-cache}"
    names=${KDFLOW_MLC_MODELS:-ci}
    [ "$names" = all ] && names=""
    # shellcheck disable=SC2086
    "$py" "$root/test/tvm/mlc_models.py" --stamp "$models" $names || { echo "tvm $which: mlc_models.py failed"; exit 1; }
    exec "$py" "$root/test/tvm/check_mlc.py" "$kdflow" "$models"
    ;;
  025)
    # TVM 0.25 from PyPI with apache-tvm-ffi 0.1.12 (the 0.21 - 0.25 row of the README), in
    # BUILD_DIR/venv-tvm025: the MLP in both modes, the swap test's model, the language model and
    # its sessions, and the builtins a 0.25 build differs in (call_tir_dyn, shape_of,
    # relax.run.shape_to_tensor).
    py="$build/venv-tvm025/bin/python"
    [ -x "$py" ] || { echo "tvm $which: skipped: no $build/venv-tvm025 (scripts/test.sh makes it where PyPI is reachable)"; exit 77; }
    # (0.27 builds every other model; CI's time is what this subset is chosen by.)
    export KDFLOW_TVM_MODELS="mlp mlp_compiled two_branch llm expand_shape_input embedding_symbolic gather_shape_of"
    ;;
  026)
    [ -f "$shared/tvm/env.sh" ] || { echo "tvm $which: skipped: no ../shared/tvm beside the checkout"; exit 77; }
    # TVM 0.26 built from its tag (the version MLC-LLM's users build with): the MLP in both modes,
    # the swap test's model, the language model and its sessions (the KV cache runtime kdflow
    # models is v0.26's) and a sharded MLP. 0.27 builds every model; CI's time is what this subset
    # is chosen by (all of them took 12 minutes here).
    export KDFLOW_TVM_MODELS="mlp mlp_compiled two_branch llm tp_mlp"
    # shellcheck disable=SC1091
    . "$shared/tvm/env.sh" >/dev/null 2>&1 || { echo "tvm $which: skipped: ../shared/tvm/env.sh failed"; exit 77; }
    py="$build/venv-tvm026/bin/python"
    [ -x "$py" ] || { echo "tvm $which: skipped: no $build/venv-tvm026 (onnx for TVM 0.26; scripts/test.sh makes it)"; exit 77; }
    ;;
  019)
    [ -f "$shared/tvm019/env.sh" ] || { echo "tvm $which: skipped: no ../shared/tvm019 beside the checkout"; exit 77; }
    # shellcheck disable=SC1091
    . "$shared/tvm019/env.sh" >/dev/null 2>&1 || { echo "tvm $which: skipped: ../shared/tvm019/env.sh failed"; exit 77; }
    py=/usr/bin/python3
    "$py" -c "import tvm.relay, onnx" >/dev/null 2>&1 ||
      { echo "tvm $which: skipped: /usr/bin/python3 cannot import TVM 0.19's Relay and onnx"; exit 77; }
    ;;
  *) echo "run.sh: WHICH is 027, 027s, mlc, 026, 025 or 019" >&2; exit 2 ;;
esac
models="$build/tvm-models/$which"
# One compile cache for this run's replays (each model is replayed several times): in the build
# folder, not the user's cache.
export KDFLOW_CACHE_DIR="${KDFLOW_CACHE_DIR:-$build/kdflow-cache}"
"$py" "$root/test/tvm/build_models.py" "$models"
rc=$?
[ $rc -eq 77 ] && { echo "tvm $which: skipped: build_models.py could not import TVM or onnx"; exit 77; }
[ $rc -ne 0 ] && { echo "tvm $which: build_models.py failed (exit $rc)"; exit 1; }
exec "$py" "$root/test/tvm/check_models.py" "$kdflow" "$models" "$shared"

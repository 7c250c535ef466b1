#!/usr/bin/env bash
# gpu-check.sh — one command for the first GPU (docs/gpu-check.md).
#
# Builds kdflow without clang (-DKDFLOW_WITH_CLANG=OFF: a GPU machine has CUDA, CMake and
# ninja but no LLVM dev packages and no internet), then replays every sample from its
# extracted flow (test/golden/<model>.json) in eager, graph and dag modes, comparing the
# outputs with the sample's output_<i>.npy (Relax samples too: their weights are vm_exec.bin's
# constant pool, every device_<i>.cubin is loaded; output_0.npy is float32 like the output,
# although ../shared/samples/README.md calls it float64); runs --guard once, writes a Chrome trace, and
# prints one table. With ncu on the PATH it also profiles one sample and joins the
# profile with `kdflow show --profile`.
#
# In CI it runs against the fake driver (KDFLOW_CUDA_LIBRARY) as a smoke test of the script:
# kernels do not run there, so outputs differ and --allow-mismatch is passed.
#
# Usage: scripts/gpu-check.sh [options]
#   --build-dir DIR   build folder (default: build-gpu)
#   --reuse-build     use DIR/kdflow as it is; configure and build nothing
#   --out DIR         where logs, timing JSON, trace and the table go (default: gpu-check-out)
#   --samples "A B"   models to replay (default: every samples/<m>/ with a test/golden/<m>.json)
#   --shared DIR      where params.bin files missing from samples/ are (default: ../shared/samples)
#   --deps DIR        a folder made by --pack-deps: fmt, nlohmann_json, CLI11 and isl for the build
#   --pack-deps DIR   (on a development machine) copy those three packages into DIR and exit
#   --allow-mismatch  outputs that differ are not a failure (the fake driver runs no kernels)
#   --session DIR=FLOW[=TOKENS[=TOL]]  (repeatable) also replay an LLM session (eager, graph,
#                     dag): FLOW extracted on a machine with clang (kdflow extract DIR --session ...
#                     -o FLOW), DIR the build with TVM's output_<step>.npy, TOKENS its token ids
#                     (default DIR/input_ids.npy; both written by kdflow_tvm.llm_session), TOL the
#                     rtol and atol of the logits (default replay's; 0.05 for float16)
#   --model DIR=FLOW  (repeatable) also replay a build made with kdflow_tvm (its input_*.npy,
#                     output_<i>.npy and reference/ of every node's result) in eager, graph and
#                     dag modes, from FLOW extracted on a machine with clang
#   --codegen         also write each sample's, model's and session's program with kdflow codegen,
#                     build it with CMake, run it (eager with --timing, and --graph) and compare
#                     its outputs with TVM's (docs/codegen.md)
#   --sharded DIR[=FLOW]  (repeatable) a tensor-parallel build: kdflow replay (eager; rank r on GPU
#                     r when there are as many GPUs as ranks, else every rank on one) and, with
#                     --codegen, its program; every rank's outputs against the unsharded model's
#                     (without FLOW, kdflow extracts DIR itself: this machine needs clang)
# It also runs `kdflow calibrate` first: the GPU's constants for the time model, OUT/profile.json.
# Exit status: 0 all runs passed; 1 a run failed or (without --allow-mismatch) an output
# differed; 64 usage; 69 the build tools are missing.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD

BUILD=build-gpu
REUSE=0
OUT=gpu-check-out
SAMPLES=""
SHARED=../shared/samples
DEPS=""
ALLOW_MISMATCH=0
SESSIONS=""
CODEGEN=0
SHARDED=""
MODELS=""

usage() { echo "gpu-check.sh: error: $1 (see the header of scripts/gpu-check.sh)" >&2; exit 64; }

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage "--build-dir needs a folder"; BUILD=$2; shift 2 ;;
    --reuse-build) REUSE=1; shift ;;
    --out) [ $# -ge 2 ] || usage "--out needs a folder"; OUT=$2; shift 2 ;;
    --samples) [ $# -ge 2 ] || usage "--samples needs a list"; SAMPLES=$2; shift 2 ;;
    --shared) [ $# -ge 2 ] || usage "--shared needs a folder"; SHARED=$2; shift 2 ;;
    --deps) [ $# -ge 2 ] || usage "--deps needs a folder"; DEPS=$(cd "$2" && pwd) || exit 66; shift 2 ;;
    --pack-deps)
      [ $# -ge 2 ] || usage "--pack-deps needs a folder"
      D=$2
      MULTI=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
      mkdir -p "$D/include" "$D/lib/$MULTI/cmake" "$D/share/cmake" || exit 73
      cp -a /usr/include/fmt /usr/include/nlohmann /usr/include/CLI "$D/include/" || exit 66
      cp -a "/usr/lib/$MULTI/cmake/fmt" "$D/lib/$MULTI/cmake/" || exit 66
      cp -a /usr/lib/"$MULTI"/libfmt.so* "$D/lib/$MULTI/" || exit 66
      cp -a /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$D/share/cmake/" || exit 66
      # isl (the footprint stage) and the gmp it needs: headers and shared libraries, found by
      # lib/CMakeLists.txt on the prefix path where the GPU machine has no pkg-config or isl.
      cp -a /usr/include/isl "$D/include/" || exit 66
      cp -a /usr/lib/"$MULTI"/libisl.so* /usr/lib/"$MULTI"/libgmp.so* "$D/lib/$MULTI/" || exit 66
      echo "gpu-check: packed fmt, nlohmann_json, CLI11 and isl into $D; on the GPU machine: scripts/gpu-check.sh --deps $D"
      exit 0 ;;
    --allow-mismatch) ALLOW_MISMATCH=1; shift ;;
    --session)
      [ $# -ge 2 ] && [ "${2#*=}" != "$2" ] || usage "--session needs DIR=FLOW[=TOKENS]"
      SESSIONS="$SESSIONS $2"; shift 2 ;;
    --model)
      [ $# -ge 2 ] && [ "${2#*=}" != "$2" ] || usage "--model needs DIR=FLOW"
      MODELS="$MODELS $2"; shift 2 ;;
    --codegen) CODEGEN=1; shift ;;
    --sharded)
      [ $# -ge 2 ] || usage "--sharded needs DIR[=FLOW]"
      SHARDED="$SHARDED $2"; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) usage "unknown option $1" ;;
  esac
done

mkdir -p "$OUT" || exit 73
OUT=$(cd "$OUT" && pwd)

# --- build -------------------------------------------------------------------------
if [ "$REUSE" = 0 ]; then
  for tool in cmake ninja c++; do
    command -v "$tool" >/dev/null || { echo "gpu-check.sh: error: $tool is not on the PATH" >&2; exit 69; }
  done
  CONFIG=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKDFLOW_WITH_CLANG=OFF -DKDFLOW_BUILD_TESTS=OFF)
  [ -n "$DEPS" ] && CONFIG+=("-DCMAKE_PREFIX_PATH=$DEPS")
  echo "gpu-check: configuring $BUILD (no clang)"
  if ! cmake "${CONFIG[@]}" >"$OUT/configure.log" 2>&1; then
    tail -20 "$OUT/configure.log" >&2
    echo "gpu-check.sh: error: cmake failed ($OUT/configure.log); missing fmt/nlohmann_json/CLI11? pack them on a development machine with --pack-deps DIR and pass --deps DIR" >&2
    exit 1
  fi
  echo "gpu-check: building"
  if ! cmake --build "$BUILD" --target kdflow >"$OUT/build.log" 2>&1; then
    tail -20 "$OUT/build.log" >&2
    echo "gpu-check.sh: error: build failed ($OUT/build.log)" >&2
    exit 1
  fi
fi
KDFLOW=$(cd "$BUILD" 2>/dev/null && pwd)/kdflow
[ -x "$KDFLOW" ] || { echo "gpu-check.sh: error: $BUILD/kdflow is missing (build it, or drop --reuse-build)" >&2; exit 1; }
[ -n "$DEPS" ] && export LD_LIBRARY_PATH="$DEPS/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- the samples ---------------------------------------------------------------------
if [ -z "$SAMPLES" ]; then
  for d in samples/*/; do
    m=$(basename "$d")
    [ -f "test/golden/$m.json" ] && SAMPLES="$SAMPLES $m"
  done
fi
[ -n "${SAMPLES// /}" ] || { echo "gpu-check.sh: error: no samples with a golden flow" >&2; exit 1; }

# Prints the params option for model $1: samples/<m>/params.bin (Relay) and
# samples/<m>/vm_exec.bin (Relax: the weights are its constant pool) are found by replay itself.
own_params() { [ -f "samples/$1/params.bin" ] || [ -f "samples/$1/vm_exec.bin" ]; }
params_for() {
  if own_params "$1"; then return 0; fi
  if [ -f "$SHARED/$1/params.bin" ]; then echo "--params $SHARED/$1/params.bin"; fi
}

# Whether the model has params (the golden JSON's top-level "params" list is not empty).
has_params() { ! grep -q '^ *"params": \[\]' "test/golden/$1.json"; }

TABLE="$OUT/table.md"
DEVICE=""
FAILED=0
MISMATCHED=0
RUNS=0
{
  echo "| model | mode | result | outputs (max abs / max rel) | Σ kernel µs | end to end µs | launches |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} >"$TABLE"

row() { echo "| $* |" >>"$TABLE"; }

# --- calibration (issue 50): this GPU's constants for the time predicted from code ----------
# `kdflow calibrate` writes OUT/profile.json; `kdflow costs DIR --device-profile OUT/profile.json`
# predicts with it (docs/costs.md, "Calibration").
if "$KDFLOW" calibrate -o "$OUT/profile.json" 2>"$OUT/calibrate.err"; then
  echo "gpu-check: $(grep '^calibrate: launch' "$OUT/calibrate.err") (profile: $OUT/profile.json)"
else
  echo "gpu-check: calibrate failed: $(tail -1 "$OUT/calibrate.err")" >&2
  FAILED=$((FAILED + 1))
fi

# One replay and its table row: replay_row LABEL MODE BASE ARGS... runs `kdflow replay ARGS`
# with the timing options, stdout in BASE.txt, stderr in BASE.err.
replay_row() {
  local label=$1 mode=$2 base=$3; shift 3
  RUNS=$((RUNS + 1))
  "$KDFLOW" replay "$@" --timing-json "$base.timing.json" >"$base.txt" 2>"$base.err"
  local rc=$?
  [ -z "$DEVICE" ] && DEVICE=$(sed -n 's/^replay: device [0-9]*: //p' "$base.err" | head -1)
  # Outputs: the check table's rows are "index file max_abs max_rel mismatches result".
  local outs ksum launches e2e result nodes
  outs=$(awk 'f && $1 !~ /^(r[0-9]+:)?[0-9]+$/ { f = 0 }
              f && NF >= 6 { n++; if ($6 != "ok") bad++; if ($3 + 0 > a) a = $3 + 0; if ($4 + 0 > r) r = $4 + 0 }
              $1 == "output" && $2 == "expected" { f = 1 }
              END { if (!n) print "none compared"; else printf "%s (%g / %g)\n", bad ? bad "/" n " MISMATCH" : n "/" n " ok", a, r }' "$base.txt")
  # Node references (builds made by kdflow_tvm): replay's "nodes: K of N ..." line.
  nodes=$(sed -n 's/^nodes: \([0-9]*\) nodes .*: \([^:]*\)$/\1 nodes: \2/p' "$base.txt" | head -1)
  [ -n "$nodes" ] && outs="$outs; $nodes"
  ksum=$(sed -n 's/^total: \([0-9.]*\) (min [0-9.]*) over \([0-9]*\) kernels$/\1/p' "$base.txt")
  launches=$(sed -n 's/^total: [0-9.]* (min [0-9.]*) over \([0-9]*\) kernels$/\1/p' "$base.txt")
  if [ "$mode" = eager ]; then
    e2e=$(sed -n 's/^eager end to end: \([0-9.]*\) us.*/\1/p' "$base.txt")
  else
    e2e=$(sed -n "s/^$mode: median \\([0-9.]*\\) us.*/\\1/p" "$base.txt")
  fi
  case $rc in
    0) result=ok ;;
    # 3: every comparison passed but none could have failed (a reference a constant matches:
    # squeezenet's, mobilenet's softmaxes): a row of its own, not a failure of the run.
    3) result="unverified (references a constant would pass)" ;;
    1) if grep -q "outputs differ\|differs\? from the\|differs from TVM" "$base.err"; then
         result="outputs differ"; MISMATCHED=$((MISMATCHED + 1))
         [ "$ALLOW_MISMATCH" = 1 ] || FAILED=$((FAILED + 1))
       else
         result="exit 1: $(tail -1 "$base.err" | cut -c1-120 | tr '|' '/')"; FAILED=$((FAILED + 1))
       fi ;;
    *) result="exit $rc: $(tail -1 "$base.err" | cut -c1-120 | tr '|' '/')"; FAILED=$((FAILED + 1)) ;;
  esac
  row "$label | $mode | $result | $outs | ${ksum:--} | ${e2e:--} | ${launches:--}"
}

# One program of kdflow codegen: generated, built with CMake, run eagerly with --timing and as a
# CUDA graph; its outputs compared with the references by the program itself (exit 0/1).
# codegen_row LABEL BASE ARGS... (ARGS: what kdflow codegen takes).
codegen_row() {
  local label=$1 base=$2; shift 2
  rm -rf "$base.prog"
  RUNS=$((RUNS + 1))
  if ! "$KDFLOW" codegen "$@" -o "$base.prog" -q >"$base.codegen.txt" 2>&1; then
    row "$label | codegen | exit: $(tail -1 "$base.codegen.txt" | cut -c1-120 | tr '|' '/') | - | - | - | -"
    FAILED=$((FAILED + 1)); return
  fi
  if ! { cmake -S "$base.prog" -B "$base.prog/build" -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$base.prog/build"; } >"$base.build.txt" 2>&1; then
    row "$label | codegen | the program did not build ($base.build.txt) | - | - | - | -"
    FAILED=$((FAILED + 1)); return
  fi
  local how hows="timing graph"
  [ "${NO_GRAPH:-0}" = 1 ] && hows=timing
  for how in $hows; do
    [ "$how" = graph ] && RUNS=$((RUNS + 1))
    local opt=(--repeat 20 --timing); [ "$how" = graph ] && opt=(--repeat 20 --graph)
    local rc outs ksum launches e2e result
    "$base.prog/build/run" "${opt[@]}" >"$base.run.$how.txt" 2>"$base.run.$how.err"
    rc=$?
    outs=$(awk '/^(rank [0-9]+ )?output [0-9]+ \(/ { n++; if ($0 !~ /: ok,/) bad++;
                  for (i = 1; i < NF; i++) { if ($i == "abs" && $(i + 1) + 0 > a) a = $(i + 1) + 0;
                                             if ($i == "rel" && $(i + 1) + 0 > r) r = $(i + 1) + 0 } }
                END { if (!n) print "none compared"; else printf "%s (%g / %g)\n", bad ? bad "/" n " MISMATCH" : n "/" n " ok", a, r }' \
           "$base.run.$how.txt")
    ksum=$(sed -n "s/^\(rank 0 \)\{0,1\}sum of the steps' medians: \([0-9.]*\) us.*/\2/p" "$base.run.$how.txt" | head -1)
    launches=$(grep -c "us  kernel " "$base.run.$how.txt")
    [ "$how" = graph ] && launches=""
    e2e=$(sed -n 's/^\(eager\|graph\): median \([0-9.]*\) us.*/\2/p' "$base.run.$how.txt" | head -1)
    case $rc in
      0) result=ok ;;
      1) result="outputs differ"; MISMATCHED=$((MISMATCHED + 1)); [ "$ALLOW_MISMATCH" = 1 ] || FAILED=$((FAILED + 1)) ;;
      *) result="exit $rc: $(tail -1 "$base.run.$how.err" | cut -c1-120 | tr '|' '/')"; FAILED=$((FAILED + 1)) ;;
    esac
    row "$label | codegen ($how) | $result | $outs | ${ksum:--} | ${e2e:--} | ${launches:--}"
  done
}

FIRST=""
for m in $SAMPLES; do
  [ -z "$FIRST" ] && FIRST=$m
  if [ ! -d "samples/$m" ]; then
    row "$m | - | skipped: no samples/$m in this copy | - | - | - | -"
    continue
  fi
  P=$(params_for "$m")
  if [ -z "$P" ] && ! own_params "$m" && has_params "$m"; then
    row "$m | - | skipped: no params.bin in samples/$m or $SHARED/$m | - | - | - | -"
    continue
  fi
  for mode in eager graph dag; do
    # shellcheck disable=SC2086
    replay_row "$m" "$mode" "$OUT/$m.$mode" "samples/$m" --flow "test/golden/$m.json" --mode "$mode" $P --warmup 5 --repeat 20
  done
  # shellcheck disable=SC2086
  [ "$CODEGEN" = 1 ] && codegen_row "$m" "$OUT/$m" "samples/$m" --flow "test/golden/$m.json" $P
done

# --- the measured dataset (issue 50): each sample kernel's median time (eager, gated) beside its
# code's features and the time predicted from code with this GPU's profile; the errors in
# OUT/time-errors.txt (scripts/time-errors.py; docs/costs.md, "Time from code").
DATASET="$OUT/dataset.jsonl"
: >"$DATASET"
PROFILE_ARGS=()
[ -s "$OUT/profile.json" ] && PROFILE_ARGS=(--device-profile "$OUT/profile.json")
DEVICE_ID=$(sed -n 's/^ *"id": "\(h100\|h200\|a100\|l4\)",$/\1/p' "$OUT/profile.json" 2>/dev/null | head -1)
for m in $SAMPLES; do
  t="$OUT/$m.eager.timing.json"
  [ -f "$t" ] || continue
  "$KDFLOW" costs "test/golden/$m.json" --device "${DEVICE_ID:-none}" "${PROFILE_ARGS[@]}" --timing "$t" --per-kernel \
    --format jsonl -q >>"$DATASET" 2>>"$OUT/dataset.err" || echo "gpu-check: costs of $m's timing failed ($OUT/dataset.err)" >&2
done
command -v python3 >/dev/null && python3 scripts/time-errors.py "$DATASET" >"$OUT/time-errors.txt" 2>&1 &&
  echo "gpu-check: the time model's errors: $OUT/time-errors.txt ($(sed -n 2p "$OUT/time-errors.txt"))"

# --- builds made with kdflow_tvm (a real TVM): outputs and every node's result -----------------
for pair in $MODELS; do
  dir=${pair%%=*}; flow=${pair#*=}
  m=$(basename "$dir")
  for mode in eager graph dag; do
    replay_row "$m (build)" "$mode" "$OUT/build.$m.$mode" "$dir" --flow "$flow" --mode "$mode" --warmup 5
  done
  [ "$CODEGEN" = 1 ] && codegen_row "$m (build)" "$OUT/build.$m" "$dir" --flow "$flow"
done

# --- tensor-parallel builds: replay (eager: every rank on its thread) and their programs ------
for pair in $SHARDED; do
  dir=${pair%%=*}; F=""; T=""
  if [ "$pair" != "$dir" ]; then
    F="--flow ${pair#*=}"
    grep -q '"dtype": "float16"' "${pair#*=}" && T="--rtol 0.05 --atol 0.05"
  fi
  # shellcheck disable=SC2086
  replay_row "$(basename "$dir") (sharded)" eager "$OUT/sharded.$(basename "$dir").eager" "$dir" $F --warmup 2 $T
  # shellcheck disable=SC2086
  [ "$CODEGEN" = 1 ] && NO_GRAPH=1 codegen_row "$(basename "$dir") (sharded)" "$OUT/sharded.$(basename "$dir")" "$dir" $F $T
done

# --- LLM sessions: eager, graph and dag (the KV cache's host copies as copy nodes) ------------
for pair in $SESSIONS; do
  dir=${pair%%=*}; flow=${pair#*=}; tokens=""; tol=""
  if [ "${flow#*=}" != "$flow" ]; then tokens=${flow#*=}; flow=${flow%%=*}; fi
  if [ "${tokens#*=}" != "$tokens" ]; then tol=${tokens#*=}; tokens=${tokens%%=*}; fi
  T=""; [ -n "$tokens" ] && T="--input input_ids=$tokens"
  # A float16 model's logits are compared within 0.05, as test/tvm does on the CPU back end:
  # TVM's reference ran on the CPU in float16 too, and the two orders of summation differ.
  label="$(basename "$dir") $(basename "$flow" .json)"
  if [ -n "$tol" ]; then T="$T --rtol $tol --atol $tol"; label="$label (within $tol)"
  elif grep -q '"dtype": "float16"' "$flow"; then T="$T --rtol 0.05 --atol 0.05"; label="$label (float16: within 0.05)"; fi
  for mode in eager graph dag; do
    # shellcheck disable=SC2086
    replay_row "$label" "$mode" "$OUT/$(basename "$dir").$(basename "$flow" .json).$mode" \
      "$dir" --flow "$flow" --mode "$mode" $T --warmup 2
  done
  # shellcheck disable=SC2086
  [ "$CODEGEN" = 1 ] && codegen_row "$label" "$OUT/$(basename "$dir").$(basename "$flow" .json)" "$dir" --flow "$flow" $T
done

# --- guard once, a Chrome trace --------------------------------------------------------
P=$(params_for "$FIRST")
# shellcheck disable=SC2086
"$KDFLOW" replay "samples/$FIRST" --flow "test/golden/$FIRST.json" $P --guard --no-expect -q >"$OUT/guard.txt" 2>"$OUT/guard.err"
rc=$?
if [ $rc = 0 ]; then GUARD="guard on $FIRST: no kernel wrote past its buffer"
else GUARD="guard on $FIRST: exit $rc: $(tail -1 "$OUT/guard.err")"; FAILED=$((FAILED + 1)); fi
# shellcheck disable=SC2086
"$KDFLOW" replay "samples/$FIRST" --flow "test/golden/$FIRST.json" $P --no-expect -q --trace "$OUT/$FIRST.trace.json" \
  >/dev/null 2>"$OUT/trace.err"
rc=$?
if [ $rc = 0 ] && grep -q '"traceEvents"' "$OUT/$FIRST.trace.json"; then TRACE="Chrome trace: $OUT/$FIRST.trace.json"
else TRACE="Chrome trace: exit $rc: $(tail -1 "$OUT/trace.err")"; FAILED=$((FAILED + 1)); fi

# --- ncu, when there is one ------------------------------------------------------------
if command -v ncu >/dev/null; then
  # Bounded: a profiler that hangs must not hang the check (timeout from coreutils, when there).
  TO=""; command -v timeout >/dev/null && TO="timeout 300"
  # shellcheck disable=SC2086
  if $TO ncu --csv --metrics gpu__time_duration.sum "$KDFLOW" replay "samples/$FIRST" --flow "test/golden/$FIRST.json" $P \
       --no-expect -q --warmup 0 --repeat 1 >"$OUT/$FIRST.ncu.csv" 2>"$OUT/ncu.err" &&
     "$KDFLOW" show "test/golden/$FIRST.json" --profile "$OUT/$FIRST.ncu.csv" --color never >"$OUT/$FIRST.profile.txt" 2>>"$OUT/ncu.err"; then
    NCU="ncu: $OUT/$FIRST.ncu.csv joined in $OUT/$FIRST.profile.txt"
  else
    NCU="ncu: failed ($OUT/ncu.err: $(tail -1 "$OUT/ncu.err"))"
  fi
else
  NCU="ncu: not on the PATH; skipped"
fi

{
  echo
  SMI=""
  command -v nvidia-smi >/dev/null && SMI="; nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); device: ${DEVICE:-unknown}$SMI"
  echo "$GUARD"
  echo "$TRACE"
  echo "$NCU"
  echo "gpu-check: $RUNS runs, $FAILED failed, $MISMATCHED with outputs that differ$([ "$ALLOW_MISMATCH" = 1 ] && echo ' (allowed: --allow-mismatch)')"
} >>"$TABLE"
cat "$TABLE"
[ "$FAILED" = 0 ] || exit 1
exit 0

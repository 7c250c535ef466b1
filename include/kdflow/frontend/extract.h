// extract.h — the `kdflow extract` pipeline: locate inputs, read graph.json, the function
// table and host.c, interpret every node's function, build the IR. Returns errors; never exits.
#pragma once

#include <string>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/frontend/host_analyzer.h"

namespace kdflow {

class StageTimes;

struct ExtractInputs {
  std::string dir;     ///< a folder holding graph.json, host.c, *.tvm_meta.json (optional when all three are given),
                       ///< or an exported model.so: graph, function table and params then come from its
                       ///< __tvm_dev_mblob, and --host is needed unless host.c sits beside it
  std::string library; ///< set by resolve_extract_inputs when `dir` names a model.so
  std::string graph;   ///< overrides dir/graph.json
  std::string host;    ///< overrides dir/host.c
  std::string meta;    ///< overrides dir/*.tvm_meta.json
  std::string params;  ///< overrides dir/params.bin (optional: used to tell params from inputs)
  std::string device;  ///< overrides dir/device.cu (optional: per-kernel access sets and dependencies)
  std::string relay;   ///< overrides dir/relay.txt (optional: exact Relay ops per function)
  std::string vm_exec; ///< Relax builds (TVM 0.20): dir/vm_exec.bin when the folder has no graph.json
  std::vector<std::string> metas;    ///< Relax builds: every device_<i>.tvm_meta.json (one CUDA module per kernel)
  std::vector<std::string> devices;  ///< Relax builds: every device_<i>.cu
  /// Relax builds with symbolic shapes: "NAME=8x100" per VM parameter (--input-shape); a
  /// parameter not named here takes its shape from dir/input_NAME.npy when there is one.
  std::vector<std::string> input_shapes;
  /// Relax builds: the VM function to run (--function; empty: main). A build without main
  /// (an nn.Module's forward, an LLM's prefill and decode) names one.
  std::string function;
  /// Relax LLM builds: a stated run of the host program (--session prefill:N,decode:M;
  /// relax_vm.h RelaxSession) instead of one VM function. Empty: none.
  std::string session;
  /// Relax builds: the ranks of a sharded (tensor-parallel) build (--shards N); 0: from the
  /// params_shard<r>.bin files beside it (none: one rank).
  int shards = 0;
  bool no_params = false;  ///< do not read a params file even if the folder has one
  /// Relax builds without a params file: the packed params' shapes come from the build
  /// (frontend/relax/packed_shapes.h); "NAME=N" per symbolic dimension of theirs (--param-dim).
  std::vector<std::string> param_dims;
  bool no_device = false;  ///< do not read device.cu (accesses stay unknown)
  bool no_relay = false;   ///< do not read relay.txt (Relay ops decoded from function names)
  bool no_footprints = false;  ///< do not compute static footprints (footprint.h) from device.cu
  /// Threads: > 1 parses host.c and device.cu concurrently and computes the footprints of
  /// distinct launches in parallel. The output is the same for every value.
  int jobs = 1;
  /// Any clang error in device.cu fails the extraction (exit 65). Without it, kernels whose
  /// body does not type-check are left unanalyzed (access unknown, DeviceFunction::access_error)
  /// and the others are analyzed.
  bool strict_device = false;
  /// Optional: the wall-clock span of each stage is recorded here (extract --stage-times).
  StageTimes* stage_times = nullptr;
  /// Whether any input option (a path, --no-*, --strict-device) is set besides `dir`.
  bool any_option() const {
    return !graph.empty() || !host.empty() || !meta.empty() || !params.empty() || !device.empty() ||
           !relay.empty() || !input_shapes.empty() || !function.empty() || shards > 0 || !param_dims.empty() || no_params || no_device || no_relay || strict_device;
  }
};

/// Fills in the paths of the inputs from `dir` where not given explicitly.
Expected<ExtractInputs> resolve_extract_inputs(const ExtractInputs& in);

/// Progress callback: (done, total, what). May be empty.
using ProgressFn = void (*)(void* ctx, size_t done, size_t total, const std::string& what);

Expected<Dataflow> extract(const ExtractInputs& inputs, const InterpreterLimits& limits = {},
                           ProgressFn progress = nullptr, void* progress_ctx = nullptr);

/// The IR for a command that reads a build: `in.dir` a folder (or an exported model.so) is
/// extracted with the other inputs of `in`; a `.json` file is read with parse_dataflow_json
/// (then no other input option may be given: Usage error), so this works without clang.
Expected<Dataflow> load_dataflow(const ExtractInputs& in, ProgressFn progress = nullptr, void* progress_ctx = nullptr);

/// Re-derives the static footprints (footprint.h) of every kernel launch of `df` from the
/// CUDA source at `device_path`, matching kernels by name, and checks them against the
/// footprints `df` carries (from a --flow JSON): one that differs is an error naming the
/// kernel, the argument and both footprints (`label`: the flow's file name). Afterwards
/// every kernel argument holds the re-derived footprint. A build without clang changes nothing.
Status rederive_footprints(Dataflow& df, const std::string& device_path, const std::string& label);

}  // namespace kdflow

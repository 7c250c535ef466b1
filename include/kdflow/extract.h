// extract.h — the `kdflow extract` pipeline: locate inputs, read graph.json, the function
// table and host.c, interpret every node's function, build the IR. Returns errors; never exits.
#pragma once

#include <string>

#include "kdflow/dataflow.h"
#include "kdflow/diag.h"
#include "kdflow/host_analyzer.h"

namespace kdflow {

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
  bool no_params = false;  ///< do not read a params file even if the folder has one
  bool no_device = false;  ///< do not read device.cu (accesses stay unknown)
  bool no_relay = false;   ///< do not read relay.txt (Relay ops decoded from function names)
  bool no_footprints = false;  ///< do not compute static footprints (footprint.h) from device.cu
};

/// Fills in the paths of the inputs from `dir` where not given explicitly.
Expected<ExtractInputs> resolve_extract_inputs(const ExtractInputs& in);

/// Progress callback: (done, total, what). May be empty.
using ProgressFn = void (*)(void* ctx, size_t done, size_t total, const std::string& what);

Expected<Dataflow> extract(const ExtractInputs& inputs, const InterpreterLimits& limits = {},
                           ProgressFn progress = nullptr, void* progress_ctx = nullptr);

/// Re-derives the static footprints (footprint.h) of every kernel launch of `df` from the
/// CUDA source at `device_path`, matching kernels by name, and checks them against the
/// footprints `df` carries (from a --flow JSON): one that differs is an error naming the
/// kernel, the argument and both footprints (`label`: the flow's file name). Afterwards
/// every kernel argument holds the re-derived footprint. A build without clang changes nothing.
Status rederive_footprints(Dataflow& df, const std::string& device_path, const std::string& label);

}  // namespace kdflow

// extract_internal.h — what the two front ends of `kdflow extract` (Relay: graph.json,
// extract.cpp; Relax: the VM executable, extract_relax.cpp) share. Private to kdflow_driver.
#pragma once

#include <future>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/frontend/device_analyzer.h"
#include "kdflow/support/diag.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/formats/graph_json.h"

namespace kdflow {

/// Fills the Relax inputs of folder `in.dir` (vm_exec.bin, host.c, device_<i>.tvm_meta.json
/// and device_<i>.cu) into `out`.
Status resolve_relax_inputs(const ExtractInputs& in, ExtractInputs& out);

/// `--input-shape NAME=8x100` → (NAME, [8, 100]); a malformed one is a usage error.
Expected<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(const std::string& spec);

#ifdef KDFLOW_HAVE_CLANG
/// Relay front end: a host C of TVM 0.21+ (the tvm-ffi ABI; no graph executor) is an error saying so.
Status check_host_abi(const std::string& host_text, const std::string& file);

/// The device sources of `in` (in.devices, else in.device) read and analyzed, one result per
/// source in order; errors are returned, never thrown.
struct DeviceAnalyses {
  std::vector<std::string> paths;
  std::vector<Expected<DeviceSource>> sources;  ///< one per path (a read error is the Error)
};
DeviceAnalyses analyze_devices(const ExtractInputs& in);

/// With in.jobs > 1: analyze_devices(in) on another thread, so that device.cu is parsed while
/// the front end parses and interprets host.c; otherwise nothing is started (invalid future).
std::future<DeviceAnalyses> start_device_analysis(const ExtractInputs& in);

/// After the front end: device sources' access sets, library calls' assumed access, the
/// Relay-op view, dependencies, and positions naming host.c by its base name. `early`: the
/// device analysis started by start_device_analysis (consumed here, so errors are reported
/// in the same order whatever in.jobs is).
Status finish_extract(Dataflow& df, const Graph& graph, const FunctionTable& table, const ExtractInputs& in,
                      std::future<DeviceAnalyses>* early = nullptr);

/// True if model.so's device blob holds a relax.VMExecutable (a TVM 0.20 Relax export).
Expected<bool> library_is_relax(const std::string& library);

/// The Relax front end (in.vm_exec set, or in.library a Relax export).
Expected<Dataflow> extract_relax(const ExtractInputs& in, const InterpreterLimits& limits, ProgressFn progress,
                                 void* progress_ctx);
#endif

}  // namespace kdflow

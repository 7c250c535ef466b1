// extract_internal.h — what the two front ends of `kdflow extract` (Relay: graph.json,
// extract.cpp; Relax: the VM executable, extract_relax.cpp) share. Private to kdflow_driver.
#pragma once

#include <string>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/formats/graph_json.h"

namespace kdflow {

/// Fills the Relax inputs of folder `in.dir` (vm_exec.bin, host.c, device_<i>.tvm_meta.json
/// and device_<i>.cu) into `out`.
Status resolve_relax_inputs(const ExtractInputs& in, ExtractInputs& out);

#ifdef KDFLOW_HAVE_CLANG
/// A host C of TVM 0.21+ (the tvm-ffi ABI) is an error saying so.
Status check_host_abi(const std::string& host_text, const std::string& file);

/// After the front end: device sources' access sets, library calls' assumed access, the
/// Relay-op view, dependencies, and positions naming host.c by its base name.
Status finish_extract(Dataflow& df, const Graph& graph, const FunctionTable& table, const ExtractInputs& in);

/// True if model.so's device blob holds a relax.VMExecutable (a TVM 0.20 Relax export).
Expected<bool> library_is_relax(const std::string& library);

/// The Relax front end (in.vm_exec set, or in.library a Relax export).
Expected<Dataflow> extract_relax(const ExtractInputs& in, const InterpreterLimits& limits, ProgressFn progress,
                                 void* progress_ctx);
#endif

}  // namespace kdflow

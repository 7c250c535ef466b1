// inspect.h — `kdflow inspect FILE`: what a model.so (its __tvm_dev_mblob), cubin, fatbin or
// PTX file holds, as plain text; and loading model.so's pieces for the extract pipeline.
// Reads only; never loads or runs device code or the library.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "kdflow/formats/device_module.h"
#include "kdflow/support/diag.h"
#include "kdflow/formats/function_table.h"

namespace kdflow {

/// `kdflow inspect FILE`: prints a deterministic description on `out`; errors as one line
/// on `err`. Returns the exit code (0; 65 bad input; 66 missing file; 69 when FILE is a
/// model.so and kdflow was built without LLVM).
int run_inspect_command(const std::string& path, std::ostream& out, std::ostream& err);

/// What an exported model.so carries, from its first `cuda` module and its first
/// `GraphExecutorFactory` entry.
struct LoadedLibrary {
  std::string file;                      ///< the path read (labels diagnostics)
  std::string graph_json;                ///< the factory's graph.json text
  std::string module_name;               ///< the factory's module name ("default")
  FunctionTable table;                   ///< the cuda module's function table (file = path)
  std::string device_label;              ///< TVM's format label ("cubin", "ptx", ...)
  std::string device_binary;             ///< the cuda module's bytes (fatbin, cubin or PTX)
  BinaryFormat device_format = BinaryFormat::Unknown;  ///< detected from device_binary's content
  std::vector<std::string> param_names;  ///< in blob order
  std::vector<std::string> param_blobs;  ///< each NDArray as serialized, same order as param_names
};

/// Reads model.so, finds `__tvm_dev_mblob`, parses it. Errors: missing file (66), no
/// blob / malformed blob / no cuda module / no graph executor factory (65), built
/// without LLVM (69).
Expected<LoadedLibrary> load_model_library(const std::string& path);

/// A params file (tvm.runtime.save_param_dict layout) holding `blobs` under `names`, so
/// that parse_params (params.h) reads the library's params like a params.bin. The two
/// vectors must have the same length.
std::string assemble_params_file(const std::vector<std::string>& names, const std::vector<std::string>& blobs);

}  // namespace kdflow

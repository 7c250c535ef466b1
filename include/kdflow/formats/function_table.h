// function_table.h — the CUDA module's function table (`*.tvm_meta.json`): kernel name →
// parameter dtypes and launch-parameter tags. Parsing only; no device code is read here.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"

namespace kdflow {

/// TVM's FunctionInfo (src/runtime/meta_data.h).
struct FunctionInfo {
  std::string name;                            ///< the table key (the kernel's symbol)
  std::vector<std::string> arg_types;          ///< dtype per kernel parameter: "handle", "int32", "float32", ...
  std::vector<std::string> launch_param_tags;  ///< "blockIdx.x", "threadIdx.y", "tir.use_dyn_shared_memory", ...
};

struct FunctionTable {
  std::string file;  ///< label used in diagnostics
  std::map<std::string, FunctionInfo> functions;
  const FunctionInfo* find(const std::string& name) const {
    auto it = functions.find(name);
    return it == functions.end() ? nullptr : &it->second;
  }
};

/// Parses `{"tvm_version": ..., "func_info": {"<kernel>": {"name", "arg_types", "launch_param_tags"}}}`.
/// Older files say `thread_axis_tags`. Every tag and arg type is validated.
Expected<FunctionTable> parse_function_table(std::string_view text, const std::string& file);

/// True for the launch tags TVM knows: blockIdx.{x,y,z}, threadIdx.{x,y,z}, tir.use_dyn_shared_memory.
bool is_known_launch_tag(const std::string& tag);

}  // namespace kdflow

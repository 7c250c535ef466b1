// function_table.h — the CUDA module's function table (`*.tvm_meta.json`): kernel name →
// parameter dtypes and launch-parameter tags. Parsing only; no device code is read here.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"

namespace kdflow {

/// TVM's FunctionInfo (src/runtime/meta_data.h).
struct FunctionInfo {
  std::string name;                            ///< the table key (the kernel's symbol)
  std::vector<std::string> arg_types;          ///< dtype per kernel parameter: "handle", "int32", "float32", ...
  /// The tags that take a launch value, in call order: "blockIdx.x", "threadIdx.y", ... and
  /// "tir.use_dyn_shared_memory" (TVM 0.24+ writes "tirx.use_dyn_shared_memory"; kept as
  /// "tir." here so every version reads alike).
  std::vector<std::string> launch_param_tags;
  /// TVM 0.23+: `tir(x).use_programtic_dependent_launch` / `tir(x).use_cooperative_launch` in
  /// the table take no launch value; TVM launches with cuLaunchKernelEx and that attribute.
  bool programmatic_dependent_launch = false;
  bool cooperative_launch = false;
  std::vector<int> arg_extra_tags;  ///< TVM 0.21+: per parameter, 0 none, 1 tensor map
};

/// What a launch tag of any TVM version (0.8 – 0.26) means.
enum class LaunchTag { Unknown, Thread, DynamicSharedMemory, ProgrammaticDependentLaunch, CooperativeLaunch };
LaunchTag classify_launch_tag(const std::string& tag);

struct FunctionTable {
  std::string file;  ///< label used in diagnostics
  std::map<std::string, FunctionInfo> functions;
  const FunctionInfo* find(const std::string& name) const {
    auto it = functions.find(name);
    return it == functions.end() ? nullptr : &it->second;
  }
};

/// Parses `{"tvm_version": ..., "func_info": {"<kernel>": {"name", "arg_types", "launch_param_tags"}}}`.
/// Older files say `thread_axis_tags`; 0.21+ adds `arg_extra_tags`. Every tag and arg type is
/// validated; tags are stored as FunctionInfo describes.
Expected<FunctionTable> parse_function_table(std::string_view text, const std::string& file);

/// True for the launch tags TVM knows: blockIdx.{x,y,z}, threadIdx.{x,y,z}, tir(x).use_dyn_shared_memory,
/// tir(x).use_programtic_dependent_launch, tir(x).use_cooperative_launch.
bool is_known_launch_tag(const std::string& tag);

/// Adds one launch tag, as TVM wrote it, to `fi` as FunctionInfo describes. Returns why the tag
/// is refused, or "". `last`: it is the function's last tag; `seen`: one set per function.
std::string add_launch_tag(const std::string& tag, bool last, std::set<std::string>* seen, FunctionInfo* fi);

}  // namespace kdflow

// function_table.cpp — reads the CUDA module's function table (`*.tvm_meta.json`).
#include "kdflow/formats/function_table.h"

#include <fmt/format.h>

#include <set>

#include "json_read.h"
#include "kdflow/support/dtype.h"

namespace kdflow {
namespace {

using detail::json;
using detail::kind_of;
using detail::member;
using detail::ptr_at;
using detail::quote_input;

class TableReader {
 public:
  explicit TableReader(const std::string& file) : file_(file) { table_.file = file; }

  Expected<FunctionTable> read(const json& root) {
    if (!root.is_object()) return err("", "expected a JSON object at the top level, got " + kind_of(root));
    if (const json* v = member(root, "tvm_version"); v && !v->is_string())
      return err("/tvm_version", "expected a string, got " + kind_of(*v));
    const json* info = member(root, "func_info");
    if (!info) return err("", "missing required member \"func_info\"");
    if (!info->is_object()) return err("/func_info", "expected an object, got " + kind_of(*info));
    for (auto it = info->begin(); it != info->end(); ++it) {
      FunctionInfo fi;
      if (Status s = read_function(it.key(), it.value(), &fi); !s) return s.error();
      table_.functions.emplace(it.key(), std::move(fi));
    }
    return std::move(table_);
  }

 private:
  Error err(const std::string& ptr, const std::string& msg) const { return json_error(file_, ptr, msg); }

  Status read_function(const std::string& key, const json& v, FunctionInfo* fi) {
    std::string ptr = ptr_at("/func_info", key);
    if (key.empty()) return err(ptr, "empty kernel name");
    if (!v.is_object()) return err(ptr, "expected an object, got " + kind_of(v));
    // The key is the kernel's symbol; the "name" field is often empty.
    fi->name = key;
    if (const json* n = member(v, "name"); n && !n->is_string())
      return err(ptr + "/name", "expected a string, got " + kind_of(*n));
    if (Status s = read_arg_types(v, ptr, fi); !s) return s;
    return read_tags(v, ptr, fi);
  }

  Status read_arg_types(const json& v, const std::string& ptr, FunctionInfo* fi) {
    const json* args = member(v, "arg_types");
    if (!args) return err(ptr, "missing required member \"arg_types\"");
    std::string list_ptr = ptr + "/arg_types";
    if (!args->is_array()) return err(list_ptr, "expected an array, got " + kind_of(*args));
    for (size_t i = 0; i < args->size(); ++i) {
      const json& a = (*args)[i];
      if (!a.is_string()) return err(ptr_at(list_ptr, i), "expected a dtype string, got " + kind_of(a));
      std::string t = a.get<std::string>();
      if (!parse_dtype(t)) return err(ptr_at(list_ptr, i), "unknown argument type " + quote_input(t));
      fi->arg_types.push_back(std::move(t));
    }
    return Status::ok();
  }

  /// launch_param_tags (or the older thread_axis_tags): known tags, no repeats, and
  /// the dynamic shared memory tag only last (TVM's LaunchParamConfig requires it).
  Status read_tags(const json& v, const std::string& ptr, FunctionInfo* fi) {
    const char* key = "launch_param_tags";
    const json* tags = member(v, key);
    if (!tags) {
      key = "thread_axis_tags";
      tags = member(v, key);
    }
    if (!tags) return err(ptr, "missing required member \"launch_param_tags\"");
    std::string list_ptr = ptr_at(ptr, key);
    if (!tags->is_array()) return err(list_ptr, "expected an array, got " + kind_of(*tags));
    std::set<std::string> seen;
    for (size_t i = 0; i < tags->size(); ++i) {
      const json& t = (*tags)[i];
      std::string tptr = ptr_at(list_ptr, i);
      if (!t.is_string()) return err(tptr, "expected a launch tag string, got " + kind_of(t));
      std::string tag = t.get<std::string>();
      if (!is_known_launch_tag(tag))
        return err(tptr, "unknown launch parameter tag " + quote_input(tag) +
                             " (expected blockIdx.x/y/z, threadIdx.x/y/z or tir.use_dyn_shared_memory)");
      // TVM repeats thread tags for virtual threads (resnet18's conv2d kernels list
      // threadIdx.z/y/x three times); its LaunchParamConfig lets the last value win.
      if (!seen.insert(tag).second && tag == "tir.use_dyn_shared_memory")
        return err(tptr, "launch parameter tag " + quote_input(tag) + " appears twice");
      if (tag == "tir.use_dyn_shared_memory" && i + 1 != tags->size())
        return err(tptr, "\"tir.use_dyn_shared_memory\" must be the last launch parameter tag");
      fi->launch_param_tags.push_back(std::move(tag));
    }
    return Status::ok();
  }

  const std::string& file_;
  FunctionTable table_;
};

}  // namespace

bool is_known_launch_tag(const std::string& tag) {
  static const std::set<std::string> kTags = {"blockIdx.x",
                                              "blockIdx.y",
                                              "blockIdx.z",
                                              "threadIdx.x",
                                              "threadIdx.y",
                                              "threadIdx.z",
                                              "tir.use_dyn_shared_memory"};
  return kTags.count(tag) != 0;
}

Expected<FunctionTable> parse_function_table(std::string_view text, const std::string& file) {
  auto root = detail::parse_json_text(text, file);
  if (!root) return root.error();
  try {
    return TableReader(file).read(*root);
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading the function table", ExitCode::Software);
  } catch (const std::exception& e) {
    return file_error(file, std::string("internal error: ") + e.what(), ExitCode::Software);
  }
}

}  // namespace kdflow

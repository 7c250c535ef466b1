// relax_truth.h — the checks of ../shared/tools/compare_relax_truth.py on the IR, shared by
// the Relax (TVM 0.20) and tvm-ffi (TVM 0.21+) sample tests.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kdflow/ir/dataflow.h"
#include "kdflow/emit/emit.h"
#include "test_util.h"

namespace kdflow::test {

/// The checks of ../shared/tools/compare_relax_truth.py, on the IR. The compiled-mode truth
/// names no fused function (TVM's __vmtir__main calls them directly, which the recorder does
/// not see): there `function` is compared with the bytecode mode's instead (`functions`).
inline std::vector<std::string> compare_relax_truth(const Dataflow& df, const std::string& dir,
                                             const std::vector<std::string>* functions = nullptr) {
  nlohmann::json truth = nlohmann::json::parse(slurp(dir + "/truth.json"));
  nlohmann::json meta = nlohmann::json::parse(slurp(dir + "/device.tvm_meta.json")).at("func_info");
  std::vector<std::string> bad;
  std::string func;
  size_t i = 0;
  std::map<int64_t, int> ws;
  for (const nlohmann::json& ev : truth.at("events")) {
    const std::string kind = ev.at("ev").get<std::string>();
    if (kind == "call" && ev.at("func").get<std::string>().rfind("vm.builtin.", 0) != 0) func = ev.at("func");
    if (kind != "launch") continue;
    const std::string where = "launch " + std::to_string(i) + ": ";
    if (i >= df.kernels.size()) {
      bad.push_back(where + "missing");
      ++i;
      continue;
    }
    const Kernel& k = df.kernels[i];
    const std::string name = ev.at("kernel");
    if (k.name != name) bad.push_back(where + "name " + k.name + " != " + name);
    // TVM 0.26's oracle names each launch's function itself (both modes).
    const std::string want_func = functions ? (*functions)[i] : ev.value("function", func);
    if (k.function != want_func) bad.push_back(where + "function " + k.function + " != " + want_func);
    const nlohmann::json& info = meta.at(name);
    const size_t n = info.at("arg_types").size();
    const nlohmann::json& args = ev.at("args");
    std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
    int64_t smem = 0;
    for (size_t t = 0; t < info.at("launch_param_tags").size(); ++t) {
      const std::string tag = info["launch_param_tags"][t];
      int64_t v = args.at(n + t).value("i", int64_t(0));
      if (tag.find("use_dyn_shared_memory") != std::string::npos) smem = v;
      for (int d = 0; d < 3; ++d) {
        if (tag == std::string("blockIdx.") + "xyz"[d]) grid[d] = std::max<int64_t>(1, v);
        if (tag == std::string("threadIdx.") + "xyz"[d]) block[d] = std::max<int64_t>(1, v);
      }
    }
    if (k.grid != grid) bad.push_back(where + "grid");
    if (k.block != block) bad.push_back(where + "block");
    if (k.dynamic_shared_memory != smem) bad.push_back(where + "smem");
    if (k.args.size() != n) {
      bad.push_back(where + "argument count");
    } else {
      for (size_t j = 0; j < n; ++j) {
        const nlohmann::json& t = args[j];
        const Arg& a = k.args[j];
        const std::string aw = where + "arg " + std::to_string(j) + ": ";
        if (t.contains("i") || t.contains("f")) {
          double want = t.contains("i") ? t["i"].get<double>() : t["f"].get<double>();
          double got = a.kind == Arg::Kind::Int ? double(a.int_value) : a.kind == Arg::Kind::Float ? a.float_value : -1e300;
          if (got != want) bad.push_back(aw + "value");
          continue;
        }
        if (a.kind != Arg::Kind::Buffer) {
          bad.push_back(aw + "not a buffer");
          continue;
        }
        const Buffer& b = df.buffers.at(a.buffer);
        if (a.offset != t.value("offset", int64_t(0))) bad.push_back(aw + "offset");
        if (t.contains("storage")) {
          if (b.kind == BufferKind::Input || b.kind == BufferKind::Param || b.kind == BufferKind::Workspace ||
              b.storage_id != t["storage"].get<int64_t>())
            bad.push_back(aw + "storage " + std::to_string(t["storage"].get<int64_t>()));
        } else if (t.contains("input")) {
          if (b.kind != BufferKind::Input || b.input_index != t["input"].get<int>()) bad.push_back(aw + "input");
        } else if (t.contains("const")) {
          if (b.kind != BufferKind::Param || b.constant_index != t["const"].get<int>()) bad.push_back(aw + "const");
        } else if (t.contains("workspace")) {
          auto [it, fresh] = ws.emplace(t["workspace"].get<int64_t>(), b.id);
          if (b.kind != BufferKind::Workspace || it->second != b.id) bad.push_back(aw + "workspace");
        } else {
          bad.push_back(aw + "unexpected truth argument");
        }
      }
    }
    ++i;
  }
  if (i != df.kernels.size()) bad.push_back("kernel count " + std::to_string(df.kernels.size()) + " != truth " + std::to_string(i));
  return bad;
}

/// The flow without source positions and file names, which differ between the two modes'
/// folders (host.c line numbers, device_<i> numbering).
inline std::string without_positions(Dataflow df) {
  df.sources = Sources{};
  for (auto& b : df.buffers) b.loc = {};
  for (auto& k : df.kernels) k.loc = {};
  for (auto& c : df.library_calls) c.loc = {};
  for (auto& n : df.nodes) n.loc = {};
  for (auto& f : df.device_functions) f.loc = {};
  return emit_json(df);
}

}  // namespace kdflow::test

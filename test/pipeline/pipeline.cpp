// The whole extract pipeline on every real sample: agreement with truth.json (the
// launches the host code really performs, recorded by running it against a recording
// TVM runtime), golden JSON/DOT files, determinism, and Graphviz rendering.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kdflow/analysis/dependencies.h"
#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/frontend/extract.h"
#include "test_util.h"

using namespace kdflow;
using namespace kdflow::test;
using json = nlohmann::json;

namespace {

Dataflow extract_sample(const std::string& dir, bool no_params = false) {
  ExtractInputs in;
  in.dir = dir;
  in.no_params = no_params;
  Expected<Dataflow> df = extract(in);
  INFO(dir);
  if (!df) FAIL(df.error().message);
  return df.take();
}

/// The same checks as ../shared/tools/compare_truth.py, on the IR. Returns mismatches.
std::vector<std::string> compare_with_truth(const Dataflow& df, const json& truth) {
  std::vector<std::string> bad;
  struct T {
    int node;
    json launch;
  };
  std::vector<T> launches;
  for (const auto& n : truth.at("nodes"))
    for (const auto& l : n.at("launches")) launches.push_back({n.at("node").get<int>(), l});
  if (df.kernels.size() != launches.size())
    bad.push_back("kernel count " + std::to_string(df.kernels.size()) + " != truth " + std::to_string(launches.size()));
  for (size_t i = 0; i < launches.size() && i < df.kernels.size(); ++i) {
    const Kernel& k = df.kernels[i];
    const json& t = launches[i].launch;
    std::string where = "launch " + std::to_string(i) + " (" + t.at("kernel").get<std::string>() + "): ";
    if (k.name != t.at("kernel").get<std::string>()) bad.push_back(where + "name " + k.name);
    if (k.node != launches[i].node) bad.push_back(where + "graph node " + std::to_string(k.node));
    const json& tags = t.at("launch");
    auto dim = [&](const std::string& tag) -> int64_t {
      if (!tags.contains(tag) || tags[tag].is_null()) return 1;
      return std::max<int64_t>(1, tags[tag].get<int64_t>());
    };
    const char* axes[] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d) {
      if (k.grid[d] != dim(std::string("blockIdx.") + axes[d])) bad.push_back(where + "grid." + axes[d]);
      if (k.block[d] != dim(std::string("threadIdx.") + axes[d])) bad.push_back(where + "block." + axes[d]);
    }
    int64_t smem = tags.contains("tir.use_dyn_shared_memory") ? tags["tir.use_dyn_shared_memory"].get<int64_t>() : 0;
    if (k.dynamic_shared_memory != smem) bad.push_back(where + "dynamic shared memory");
    const json& targs = t.at("args");
    if (k.args.size() != targs.size()) {
      bad.push_back(where + "argument count");
      continue;
    }
    std::map<std::string, int> ws_map;  // truth workspace name → our buffer id
    for (size_t j = 0; j < targs.size(); ++j) {
      const Arg& a = k.args[j];
      const json& ta = targs[j];
      std::string aw = where + "arg " + std::to_string(j) + ": ";
      if (ta.contains("storage_id") || ta.contains("workspace")) {
        if (a.kind != Arg::Kind::Buffer) {
          bad.push_back(aw + "not a buffer");
          continue;
        }
        const Buffer& b = df.buffers.at(static_cast<size_t>(a.buffer));
        if (a.offset != ta.at("offset").get<int64_t>()) bad.push_back(aw + "offset");
        if (ta.contains("storage_id")) {
          if (b.kind == BufferKind::Workspace || b.storage_id != ta["storage_id"].get<int64_t>())
            bad.push_back(aw + "storage id");
          // The buffer must be one the node really passes (its input or output entry).
          const Node& n = df.nodes.at(static_cast<size_t>(k.node));
          // Passed through a view (a __nop output sharing the storage): the node lists the view,
          // the argument names the viewed buffer.
          const int listed = a.view >= 0 ? a.view : a.buffer;
          if (a.view >= 0 && df.buffers.at(static_cast<size_t>(a.view)).view_of != a.buffer)
            bad.push_back(aw + "view of another buffer");
          bool of_node = std::count(n.inputs.begin(), n.inputs.end(), listed) +
                             std::count(n.outputs.begin(), n.outputs.end(), listed) > 0;
          if (!of_node) bad.push_back(aw + "buffer is not an input or output of its node");
        } else {
          if (b.kind != BufferKind::Workspace) bad.push_back(aw + "not a workspace");
          auto [it, fresh] = ws_map.emplace(ta["workspace"].get<std::string>(), a.buffer);
          if (!fresh && it->second != a.buffer) bad.push_back(aw + "workspace mapping inconsistent");
          if (b.node != k.node) bad.push_back(aw + "workspace of another node");
        }
      } else {
        double v = ta.at("value").get<double>();
        double got = a.kind == Arg::Kind::Int ? static_cast<double>(a.int_value)
                     : a.kind == Arg::Kind::Float ? a.float_value
                                                  : -1e300;
        if (got != v) bad.push_back(aw + "value");
      }
    }
  }
  return bad;
}

/// The same checks as ../shared/tools/compare_library_calls.py, on the IR: every library
/// call in call order (name, node, function, place in the launch order, each argument: a
/// DLTensor* as storage id or workspace + offset with its dtype and shape, the node's own
/// entry; a value; a string; NULL). Returns mismatches.
std::vector<std::string> compare_library_calls_with_truth(const Dataflow& df, const json& truth) {
  std::vector<std::string> bad;
  struct T {
    const json* node;
    const json* call;
    int after_kernel;
  };
  std::vector<T> calls;
  int launches_before = 0;
  for (const auto& n : truth.at("nodes")) {
    if (n.contains("library_calls"))
      for (const auto& c : n.at("library_calls"))
        calls.push_back({&n, &c, launches_before + c.at("after_launch").get<int>()});
    launches_before += static_cast<int>(n.at("launches").size());
  }
  if (df.library_calls.size() != calls.size())
    bad.push_back("library call count " + std::to_string(df.library_calls.size()) + " != truth " +
                  std::to_string(calls.size()));
  for (size_t i = 0; i < calls.size() && i < df.library_calls.size(); ++i) {
    const LibraryCall& c = df.library_calls[i];
    const json& tn = *calls[i].node;
    const json& tc = *calls[i].call;
    std::string where = "library call " + std::to_string(i) + ": ";
    if (c.name != tc.at("name").get<std::string>()) bad.push_back(where + "name " + c.name);
    if (c.node != tn.at("node").get<int>()) bad.push_back(where + "graph node");
    if (c.function != tn.at("func").get<std::string>()) bad.push_back(where + "function");
    if (c.after_kernel != calls[i].after_kernel) bad.push_back(where + "after_kernel " + std::to_string(c.after_kernel));
    const json& targs = tc.at("args");
    if (c.args.size() != targs.size()) {
      bad.push_back(where + "argument count");
      continue;
    }
    std::map<std::string, int> ws_map;
    const Node& n = df.nodes.at(static_cast<size_t>(c.node));
    for (size_t j = 0; j < targs.size(); ++j) {
      const Arg& a = c.args[j];
      const json& ta = targs[j];
      std::string aw = where + "arg " + std::to_string(j) + ": ";
      if (ta.contains("storage_id") || ta.contains("workspace")) {
        if (a.kind != Arg::Kind::Buffer) {
          bad.push_back(aw + "not a buffer");
          continue;
        }
        const Buffer& b = df.buffers.at(static_cast<size_t>(a.buffer));
        if (a.offset != ta.at("offset").get<int64_t>()) bad.push_back(aw + "offset");
        if (ta.contains("storage_id")) {
          if (b.kind == BufferKind::Workspace || b.storage_id != ta["storage_id"].get<int64_t>())
            bad.push_back(aw + "storage id");
          // Passed through a view (a __nop output sharing the storage): the node lists the view,
          // the argument names the viewed buffer.
          const int listed = a.view >= 0 ? a.view : a.buffer;
          if (a.view >= 0 && df.buffers.at(static_cast<size_t>(a.view)).view_of != a.buffer)
            bad.push_back(aw + "view of another buffer");
          bool of_node = std::count(n.inputs.begin(), n.inputs.end(), listed) +
                             std::count(n.outputs.begin(), n.outputs.end(), listed) > 0;
          if (!of_node) bad.push_back(aw + "buffer is not an input or output of its node");
        } else {
          if (b.kind != BufferKind::Workspace) bad.push_back(aw + "not a workspace");
          auto [it, fresh] = ws_map.emplace(ta["workspace"].get<std::string>(), a.buffer);
          if (!fresh && it->second != a.buffer) bad.push_back(aw + "workspace mapping inconsistent");
          if (b.node != c.node) bad.push_back(aw + "workspace of another node");
        }
        if (ta.contains("dtype")) {  // a DLTensor*: the view the callee sees
          if (a.dtype != "DLTensor*") bad.push_back(aw + "dtype " + a.dtype);
          if (a.tensor_dtype != ta["dtype"].get<std::string>()) bad.push_back(aw + "tensor dtype " + a.tensor_dtype);
          if (a.tensor_shape != ta["shape"].get<std::vector<int64_t>>()) bad.push_back(aw + "tensor shape");
        } else if (!a.tensor_dtype.empty()) {
          bad.push_back(aw + "tensor view on a raw pointer");
        }
      } else if (ta.contains("string")) {
        if (a.dtype != "str" || a.text != ta["string"].get<std::string>()) bad.push_back(aw + "string");
      } else if (ta.contains("null") && ta["null"].get<bool>()) {
        if (a.kind != Arg::Kind::Null || a.dtype == "str") bad.push_back(aw + "not NULL");
      } else {
        double v = ta.at("value").get<double>();
        double got = a.kind == Arg::Kind::Int ? static_cast<double>(a.int_value)
                     : a.kind == Arg::Kind::Float ? a.float_value
                                                  : -1e300;
        if (got != v) bad.push_back(aw + "value");
      }
    }
  }
  return bad;
}

std::map<std::string, std::vector<uint64_t>> truth_workspaces(const json& truth) {
  std::map<std::string, std::vector<uint64_t>> out;
  for (const auto& n : truth.at("nodes")) {
    auto& v = out[std::to_string(n.at("node").get<int>())];
    for (const auto& w : n.at("workspaces")) v.push_back(w.at("bytes").get<uint64_t>());
  }
  return out;
}

}  // namespace

TEST_CASE("every sample's extraction agrees with its truth.json", "[samples][truth]") {
  auto names = sample_names();
  REQUIRE(names.size() >= 10);
  for (const auto& m : names) {
    SECTION(m) {
      Dataflow df = extract_sample(sample_dir(m));
      json truth = json::parse(slurp(sample_dir(m) + "/truth.json"));
      auto bad = compare_with_truth(df, truth);
      INFO(m << ": first mismatch: " << (bad.empty() ? "" : bad.front()));
      CHECK(bad.empty());
      auto bad_calls = compare_library_calls_with_truth(df, truth);
      INFO(m << ": first library call mismatch: " << (bad_calls.empty() ? "" : bad_calls.front()));
      CHECK(bad_calls.empty());
      // Workspaces: the same allocations, in order, with the same sizes, per node.
      auto want = truth_workspaces(truth);
      for (const Node& n : df.nodes) {
        if (n.op != "tvm_op" || n.function == "__nop") continue;
        std::vector<uint64_t> got;
        for (int b : n.workspaces) got.push_back(df.buffers[b].bytes);
        CHECK(got == want[std::to_string(n.id)]);
      }
    }
  }
}

TEST_CASE("mlp answers the forum question: 5 function nodes, 6 kernels, log_softmax launches two", "[samples]") {
  Dataflow df = extract_sample(sample_dir("mlp"));
  int function_nodes = 0;
  for (const Node& n : df.nodes) function_nodes += n.op == "tvm_op";
  CHECK(function_nodes == 5);
  CHECK(df.kernels.size() == 6);
  const Node& ls = df.nodes.at(13);
  CHECK(ls.function == "tvmgen_default_fused_nn_log_softmax");
  REQUIRE(ls.kernels.size() == 2);
  REQUIRE(ls.workspaces.size() == 1);
  const Buffer& ws = df.buffers[ls.workspaces[0]];
  CHECK(ws.kind == BufferKind::Workspace);
  CHECK(ws.bytes == 4);
  CHECK_FALSE(ws.storage_id.has_value());
  // The workspace is the first argument of both kernels: written by one, read by the other.
  CHECK(df.kernels[ls.kernels[0]].args[0].buffer == ws.id);
  CHECK(df.kernels[ls.kernels[1]].args[0].buffer == ws.id);
  CHECK(df.kernels[ls.kernels[1]].name == "tvmgen_default_fused_nn_log_softmax_kernel_1");
  CHECK(df.kernels[ls.kernels[1]].loc.line > 0);
  // Graph roles: 1 input, 8 params, 1 output.
  CHECK(df.inputs.size() == 1);
  CHECK(df.params.size() == 8);
  REQUIRE(df.outputs.size() == 1);
  CHECK(df.buffers[df.outputs[0]].kind == BufferKind::Output);
}

TEST_CASE("kernels launched in host loops carry their iteration", "[samples]") {
  Dataflow df = extract_sample(sample_dir("sort_scan"));
  int in_loops = 0;
  for (const Kernel& k : df.kernels) in_loops += !k.loop_iterations.empty();
  CHECK(in_loops > 20);
  // cumsum: kernel_1 runs in a 10-trip loop; its second argument is the loop variable.
  std::vector<int64_t> iters;
  for (const Kernel& k : df.kernels)
    if (k.name == "tvmgen_default_fused_cumsum_kernel_1") {
      REQUIRE(k.loop_iterations.size() == 1);
      CHECK(k.args.at(1).int_value == k.loop_iterations[0]);
      iters.push_back(k.loop_iterations[0]);
    }
  CHECK(iters == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("the params file and the p<N> naming rule agree on every sample", "[samples][params]") {
  for (const auto& m : sample_names()) {
    std::string shared = shared_sample_dir(m);
    if (shared.empty()) {
      WARN("../shared/samples/" << m << " not present: skipped");
      continue;
    }
    if (!std::filesystem::exists(shared + "/params.bin")) {  // resnet18_tuned is built without params
      WARN("../shared/samples/" << m << " has no params.bin: skipped");
      continue;
    }
    Dataflow with_params = extract_sample(shared);
    Dataflow by_name = extract_sample(shared, /*no_params=*/true);
    INFO(m);
    CHECK(with_params.sources.params == "params.bin");
    CHECK(with_params.buffers == by_name.buffers);
    CHECK(with_params.params == by_name.params);
    CHECK(with_params.inputs == by_name.inputs);
  }
}

TEST_CASE("JSON and DOT output equal the reviewed golden files", "[samples][golden]") {
  for (const auto& m : sample_names()) {
    SECTION(m) {
      Dataflow df = extract_sample(sample_dir(m));
      std::string golden_json = source_dir() + "/test/golden/" + m + ".json";
      std::string golden_dot = source_dir() + "/test/golden/" + m + ".dot";
      INFO("regenerate with: cmake --build build --target update-goldens, then review git diff test/golden");
      CHECK(emit_json(df).find(source_dir()) == std::string::npos);  // no absolute paths in output
      CHECK(emit_json(df) == slurp(golden_json));
      CHECK(emit_dot(df) == slurp(golden_dot));
      // The JSON reads back into the same IR.
      Expected<Dataflow> back = parse_dataflow_json(emit_json(df), golden_json);
      REQUIRE(back);
      CHECK(back->kernels == df.kernels);
      CHECK(back->buffers == df.buffers);
      CHECK(back->nodes == df.nodes);
      CHECK(back->dependencies == df.dependencies);
      CHECK(back->device_functions == df.device_functions);
      CHECK(back->sources.device == df.sources.device);
    }
  }
}

TEST_CASE("kdflow extract is deterministic and its DOT renders with Graphviz", "[samples][cli]") {
  std::string dir = temp_dir();
  for (const std::string m : {"mlp", "sort_scan", "resnet18", "mlp_fp16", "mlp_cublas"}) {
    INFO(m);
    auto a = run_kdflow({"extract", sample_dir(m), "-o", dir + "/a.dot"});
    auto b = run_kdflow({"extract", sample_dir(m), "-o", dir + "/b.dot"});
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    CHECK(slurp(dir + "/a.dot") == slurp(dir + "/b.dot"));
    auto j1 = run_kdflow({"extract", sample_dir(m)});
    auto j2 = run_kdflow({"extract", sample_dir(m), "--format", "json"});
    CHECK(j1.out == j2.out);
    CHECK(j1.err.empty());  // no progress noise when stderr is not a terminal
    if (std::system("command -v dot >/dev/null 2>&1") != 0) {
      WARN("Graphviz dot not installed: rendering skipped");
      continue;
    }
    std::string cmd = "dot -Tsvg '" + dir + "/a.dot' -o '" + dir + "/a.svg' 2>'" + dir + "/dot.err'";
    CHECK(std::system(cmd.c_str()) == 0);
    CHECK(slurp(dir + "/dot.err").empty());
    CHECK(slurp(dir + "/a.svg").find("<svg") != std::string::npos);
  }
}

// The same checks as ../shared/tools/check_access.py, plus the device-side issue's
// conditions, on every sample: accesses agree with graph semantics.
TEST_CASE("kernel accesses agree with graph semantics on every sample", "[samples][access]") {
  for (const auto& m : sample_names()) {
    SECTION(m) {
      Dataflow df = extract_sample(sample_dir(m));
      REQUIRE(df.sources.device == "device.cu");
      std::set<int64_t> input_or_param;  // storage ids of graph inputs and params
      for (int b : df.inputs) input_or_param.insert(*df.buffers[b].storage_id);
      for (int b : df.params) input_or_param.insert(*df.buffers[b].storage_id);
      std::set<std::pair<int, int64_t>> written;  // (0, sid) or (1, workspace buffer)
      std::vector<std::string> problems;
      // Launch order: kernels, each library call right after the kernel launched before it.
      struct Step {
        std::string name;
        const std::vector<Arg>* args;
      };
      std::vector<Step> steps;
      auto calls_after = [&](int kernel) {
        for (const LibraryCall& c : df.library_calls)
          if (c.after_kernel == kernel) steps.push_back({"lib" + std::to_string(c.id) + " " + c.name, &c.args});
      };
      calls_after(-1);
      for (const Kernel& k : df.kernels) {
        steps.push_back({k.name, &k.args});
        calls_after(k.id);
      }
      for (const Step& k : steps) {
        for (size_t j = 0; j < k.args->size(); ++j) {
          const Arg& a = (*k.args)[j];
          if (a.kind != Arg::Kind::Buffer) continue;
          const Buffer& b = df.buffers[a.buffer];
          std::pair<int, int64_t> key = b.kind == BufferKind::Workspace ? std::make_pair(1, int64_t(b.id))
                                                                        : std::make_pair(0, *b.storage_id);
          std::string where = k.name + " arg " + std::to_string(j) + ": ";
          if (a.access == Access::Unknown) problems.push_back(where + "access unknown");
          if (a.access == Access::Read && !written.count(key) && !(key.first == 0 && input_or_param.count(key.second)))
            problems.push_back(where + "reads before any write");
          if (a.access == Access::Write || a.access == Access::ReadWrite) {
            if (key.first == 0 && input_or_param.count(key.second)) problems.push_back(where + "writes an input/param");
            written.insert(key);
          }
        }
      }
      for (const Node& n : df.nodes) {
        if (n.kernels.empty() && n.library_calls.empty()) continue;
        for (int out : n.outputs) {
          bool w = false;
          auto writes = [&](const std::vector<Arg>& args) {
            for (const Arg& a : args)
              w |= a.kind == Arg::Kind::Buffer && a.access != Access::Read &&
                   df.buffers[a.buffer].storage_id == df.buffers[out].storage_id;
          };
          for (int kid : n.kernels) writes(df.kernels[kid].args);
          for (int cid : n.library_calls) writes(df.library_calls[cid].args);
          if (!w) problems.push_back("node " + std::to_string(n.id) + " never writes its output " + std::to_string(out));
        }
      }
      INFO(m << ": " << (problems.empty() ? "" : problems.front()));
      CHECK(problems.empty());
      // Every dependency goes forward in launch order (a library call sits just after
      // the kernel launched before it).
      auto position = [&](int id, bool library_call) {
        return library_call ? df.library_calls[id].after_kernel + 0.5 + id * 1e-6 : double(id);
      };
      for (const Dependency& d : df.dependencies)
        CHECK(position(d.from, d.from_library_call) < position(d.to, d.to_library_call));
    }
  }
}

TEST_CASE("mlp's dependencies: the workspace between log_softmax's kernels, storage reuse", "[samples][access]") {
  Dataflow df = extract_sample(sample_dir("mlp"));
  auto has = [&](Dependency::Kind kind, int from, int to) {
    return std::any_of(df.dependencies.begin(), df.dependencies.end(),
                       [&](const Dependency& d) { return d.kind == kind && d.from == from && d.to == to; });
  };
  CHECK(has(Dependency::Kind::RAW, 0, 1));  // dense → dense
  CHECK(has(Dependency::Kind::RAW, 3, 4));  // dense_add → log_softmax kernel
  CHECK(has(Dependency::Kind::RAW, 4, 5));  // through the workspace
  CHECK(has(Dependency::Kind::WAR, 1, 2));  // node 9 overwrites storage 3, which kernel 1 read
  CHECK(has(Dependency::Kind::WAW, 0, 2));  // and which kernel 0 wrote
  const Kernel& k5 = df.kernels[5];
  CHECK(k5.args[0].access == Access::Read);   // the workspace
  CHECK(k5.args[1].access == Access::Write);  // the output
  CHECK(df.kernels[4].args[0].access == Access::Write);
  // The Relay view.
  const Node& n3 = df.nodes[3];
  CHECK(n3.relay_source == "relay.txt");
  REQUIRE(n3.relay_ops.size() == 3);
  CHECK(n3.relay_ops[0].name == "nn.dense");
  CHECK(n3.relay_ops[2].name == "nn.relu");
  CHECK(n3.relay_ops[2].type == "Tensor[(1, 400), float32]");
}

TEST_CASE("extract --jobs: one thread and four give byte-identical output on real samples", "[samples][jobs]") {
  // resnet18_tuned: 57 launches of 43 distinct tuned kernels (footprints on several threads);
  // sort_scan: launches in host loops (distinct scalar arguments); relax_mlp: five device
  // sources parsed while host.c is interpreted; mlp_fp16: half-precision device code;
  // resnet18_tuned, sort_scan_v08 and ffi_batch_mlp: device sources past 64 KB, parsed in two
  // halves with more than one thread.
  for (const std::string m : {"resnet18_tuned", "sort_scan", "relax_mlp", "mlp_fp16", "sort_scan_v08", "ffi_batch_mlp"}) {
    SECTION(m) {
      std::string out[2];
      for (int i = 0; i < 2; ++i) {
        ExtractInputs in;
        in.dir = sample_dir(m);
        in.jobs = i == 0 ? 1 : 4;
        Expected<Dataflow> df = extract(in);
        if (!df) FAIL(df.error().message);
        out[i] = emit_json(*df);
      }
      CHECK(out[0] == out[1]);
      CHECK(out[0] == slurp(source_dir() + "/test/golden/" + m + ".json"));
    }
  }
  // An error is the same error whatever the thread count (the device analysis started early
  // is consumed where the sequential one runs): a missing device.cu named in the inputs.
  for (int jobs : {1, 4}) {
    ExtractInputs in;
    in.dir = sample_dir("mlp");
    in.device = sample_dir("mlp") + "/no-such-device.cu";
    in.jobs = jobs;
    Expected<Dataflow> df = extract(in);
    REQUIRE_FALSE(df);
    CHECK(df.error().message.find("no-such-device.cu") != std::string::npos);
  }
}

TEST_CASE("extract --stage-times: every stage's span on stderr, the output unchanged", "[samples][stage_times]") {
  // resnet18_tuned: both parses, the device analysis, footprints and counts all run.
  const std::string dir = sample_dir("resnet18_tuned");
  const std::string out = temp_dir() + "/stage_times.json";
  RunResult r = run_kdflow({"extract", dir, "-q", "--stage-times", "-o", out});
  REQUIRE(r.exit_code == 0);
  CHECK(slurp(out) == slurp(source_dir() + "/test/golden/resnet18_tuned.json"));
  // device.cu (520 KB) is parsed in two halves on two threads (the default --jobs 2).
  for (const char* stage : {"host.c: clang parse", "host.c: interpretation", "device.cu [1/2]: clang parse",
                            "device.cu [2/2]: clang parse", "device.cu [1/2]: access sets, affine models, operations",
                            "footprints (isl", "operation counts", "emit and write the output", "total"})
    CHECK(r.err.find(stage) != std::string::npos);
  // Each line: a name, then start ≤ end and took = end − start (seconds, 3 decimals).
  std::istringstream lines(r.err);
  int spans = 0;
  for (std::string line; std::getline(lines, line);) {
    double start = 0, end = 0, took = 0;
    size_t at = line.find_last_not_of(" 0123456789.");
    if (line.rfind("  ", 0) != 0 || at == std::string::npos || line.find(" wall") != std::string::npos) continue;
    if (std::sscanf(line.c_str() + at + 1, "%lf %lf %lf", &start, &end, &took) != 3) continue;
    CHECK(start <= end);
    CHECK(took == Approx(end - start).margin(0.0015));
    ++spans;
  }
  CHECK(spans >= 9);
  // Without the flag: nothing on stderr (-q).
  RunResult quiet = run_kdflow({"extract", dir, "-q", "-o", out});
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
}

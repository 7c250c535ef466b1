// extract.cpp — the `kdflow extract` pipeline: the Relay front end, and the tail every front end shares.
#include "kdflow/frontend/extract.h"


#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>

#include <fmt/format.h>

#include "frontend/extract_internal.h"
#include "kdflow/support/stage_times.h"
#include "kdflow/analysis/bounds.h"
#include "kdflow/analysis/costs.h"
#include "kdflow/frontend/dataflow_builder.h"
#include "kdflow/analysis/dependencies.h"
#include "kdflow/frontend/device_analyzer.h"
#include "kdflow/analysis/footprint.h"
#include "kdflow/formats/relay.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/formats/graph_json.h"
#include "kdflow/formats/model_library.h"
#include "kdflow/support/io.h"
#include "kdflow/formats/params.h"

namespace kdflow {

namespace fs = std::filesystem;

Expected<ExtractInputs> resolve_extract_inputs(const ExtractInputs& in) {
  ExtractInputs out = in;
  if (!in.dir.empty() && !is_directory(in.dir)) {
    if (!file_exists(in.dir)) return file_error(in.dir, "no such file or directory", ExitCode::NoInput);
    // An exported library: graph.json, the function table and the params are inside it;
    // host.c, device.cu and relay.txt are looked for beside it.
    out.library = in.dir;
    fs::path dir = fs::path(in.dir).parent_path();
    if (dir.empty()) dir = ".";
    if (out.host.empty()) {
      if (!file_exists((dir / "host.c").string()))
        return file_error(in.dir, "a model.so carries no host C source: pass --host host.c (TVM's lib.get_source())",
                          ExitCode::Usage);
      out.host = (dir / "host.c").string();
    }
    if (out.device.empty() && !in.no_device && file_exists((dir / "device.cu").string()))
      out.device = (dir / "device.cu").string();
    if (out.relay.empty() && !in.no_relay && file_exists((dir / "relay.txt").string()))
      out.relay = (dir / "relay.txt").string();
  } else if (!in.dir.empty() && in.graph.empty() && !file_exists((fs::path(in.dir) / "graph.json").string()) &&
             file_exists((fs::path(in.dir) / "vm_exec.bin").string())) {
    // A Relax build (TVM 0.20): the VM executable replaces graph.json.
    if (Status s = resolve_relax_inputs(in, out); !s) return s.error();
  } else if (!in.dir.empty()) {
    fs::path dir(in.dir);
    if (out.graph.empty()) out.graph = (dir / "graph.json").string();
    if (out.host.empty()) out.host = (dir / "host.c").string();
    if (out.meta.empty()) {
      std::vector<std::string> metas;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n.size() > 14 && n.compare(n.size() - 14, 14, ".tvm_meta.json") == 0) metas.push_back(e.path().string());
      }
      std::sort(metas.begin(), metas.end());
      if (metas.empty())
        return file_error(in.dir, "no *.tvm_meta.json (the device module's function table) in this folder; pass --meta",
                          ExitCode::NoInput);
      if (metas.size() > 1)
        return file_error(in.dir, fmt::format("{} *.tvm_meta.json files in this folder; choose one with --meta",
                                              metas.size()),
                          ExitCode::Usage);
      out.meta = metas[0];
    }
    if (out.params.empty() && !in.no_params && file_exists((dir / "params.bin").string()))
      out.params = (dir / "params.bin").string();
    if (out.device.empty() && !in.no_device && file_exists((dir / "device.cu").string()))
      out.device = (dir / "device.cu").string();
    if (out.relay.empty() && !in.no_relay && file_exists((dir / "relay.txt").string()))
      out.relay = (dir / "relay.txt").string();
  } else {
    if (out.graph.empty() || out.host.empty() || out.meta.empty())
      return Error{"kdflow extract: error: give a folder, or all of --graph, --host and --meta", ExitCode::Usage};
  }
  if (in.no_params) out.params.clear();
  if (in.no_device) out.device.clear();
  if (in.no_relay) out.relay.clear();
  return out;
}

#ifdef KDFLOW_HAVE_CLANG
Status check_host_abi(const std::string& host_text, const std::string& file) {
  if (host_text.find("TVMFFIAny") != std::string::npos)
    return file_error(file, "this host C uses the tvm-ffi ABI (TVMFFIAny) of TVM 0.21 and later, which has no graph "
                            "executor: a graph.json cannot go with it (extract its Relax build: vm_exec.bin or model.so)",
                      ExitCode::DataError);
  return Status::ok();
}

DeviceAnalyses analyze_devices(const ExtractInputs& in) {
  DeviceAnalyses out;
  out.paths = in.devices;
  if (out.paths.empty() && !in.device.empty()) out.paths.push_back(in.device);
  for (const std::string& path : out.paths) {
    Expected<std::string> cu = read_file(path, 256ull << 20);
    if (!cu) {
      out.sources.push_back(cu.error());
      break;  // as the sequential reading stops at the first error
    }
    out.sources.push_back(analyze_device_source(*cu, path, in.strict_device, !in.no_footprints, in.stage_times, in.jobs));
    if (!out.sources.back()) break;
  }
  return out;
}

std::future<DeviceAnalyses> start_device_analysis(const ExtractInputs& in) {
  if (in.jobs <= 1 || (in.devices.empty() && in.device.empty())) return {};
  return std::async(std::launch::async, [in] { return analyze_devices(in); });
}

namespace {

/// Per device function: the specializer that can re-extract it for a launch, or none.
struct Specializable {
  std::string name;
  KernelSpecializer* spec = nullptr;
  size_t index = 0;  ///< the kernel's index in its DeviceSource
};

/// The launches whose kernel's models one launch's scalar values could complete
/// (DeviceSource::specializable): their own models, re-extracted once per distinct
/// (function, scalars). Indexed like df.kernels; null where the function's models hold.
constexpr int kMaxLaunchModels = 64;  // distinct launches of one kernel modelled with their scalars

struct LaunchModels {
  std::map<std::string, std::pair<KernelModel, KernelOpModel>> made;
  std::map<int, int> per_function;  ///< launches modelled so far, by device function
  std::vector<const KernelModel*> footprint;
  std::vector<const KernelOpModel*> ops;
};

void specialize_launches(const Dataflow& df, const std::vector<Specializable>& by_function, LaunchModels* out) {
  out->footprint.assign(df.kernels.size(), nullptr);
  out->ops.assign(df.kernels.size(), nullptr);
  for (size_t i = 0; i < df.kernels.size(); ++i) {
    const Kernel& k = df.kernels[i];
    if (k.device_function < 0 || static_cast<size_t>(k.device_function) >= by_function.size()) continue;
    const Specializable& s = by_function[static_cast<size_t>(k.device_function)];
    if (!s.spec) continue;
    // The model depends on the scalars alone, not on the grid and block.
    const LaunchShape launch = launch_shape(k);
    if (std::none_of(launch.scalars.begin(), launch.scalars.end(), [](const auto& v) { return v.has_value(); }))
      continue;
    const std::string key = std::to_string(k.device_function) + scalars_key(launch);
    auto found = out->made.find(key);
    if (found == out->made.end()) {
      // A bound on the work a host loop can ask for: past kMaxLaunchModels distinct launches
      // of one kernel (in launch order), later ones keep the kernel's own models.
      if (out->per_function[k.device_function]++ >= kMaxLaunchModels) continue;
      found = out->made.try_emplace(key).first;
      found->second.first = s.spec->specialize(s.index, launch.scalars, &found->second.second);
    }
    out->footprint[i] = &found->second.first;
    out->ops[i] = &found->second.second;
  }
}

}  // namespace

Status finish_extract(Dataflow& out, const Graph& graph, const FunctionTable& table, const ExtractInputs& in,
                      std::future<DeviceAnalyses>* early) {
  Dataflow* df = &out;
  DeviceAnalyses analyses = early && early->valid() ? early->get() : analyze_devices(in);
  const std::vector<std::string>& devices = analyses.paths;
  // Device side: what each kernel does through each buffer argument.
  // (Relax builds: one CUDA module per kernel, so several sources, their kernels in file order.)
  if (!devices.empty()) {
    std::vector<DeviceFunction> functions;
    std::vector<KernelModel> footprint_models;
    std::vector<KernelOpModel> op_models;
    std::vector<Specializable> specializable;
    std::string label, names;
    for (size_t i = 0; i < analyses.sources.size(); ++i) {
      const std::string& path = devices[i];
      Expected<DeviceSource>& device = analyses.sources[i];
      if (!device) return device.error();
      for (auto& model : device->footprint_models) footprint_models.push_back(std::move(model));
      for (auto& model : device->op_models) op_models.push_back(std::move(model));
      for (size_t j = 0; j < device->functions.size(); ++j) {
        const bool can = device->specializer && j < device->specializable.size() && device->specializable[j];
        specializable.push_back({device->functions[j].name, can ? device->specializer.get() : nullptr, j});
      }
      // Reasons name device.cu as sources.device does (no directory), like every position in the IR.
      auto scrub_device = [&](std::string& text) {
        for (size_t at = 0; (at = text.find(path + ":", at)) != std::string::npos;) {
          text.replace(at, path.size(), base_name(path));
          at += base_name(path).size();
        }
      };
      for (DeviceFunction& f : device->functions) scrub_device(f.access_error);
      for (std::string& e : device->other_errors) {
        scrub_device(e);
        df->device_errors.push_back(e);
      }
      for (DeviceFunction& f : device->functions) functions.push_back(std::move(f));
      label += (label.empty() ? "" : ", ") + path;
      names += (names.empty() ? "" : ",") + base_name(path);
    }
    // Several modules (Relax): ordered by name, so the numbering of the modules does not matter.
    // The footprint models are indexed like the functions (attach_footprints): same order.
    if (devices.size() > 1) {
      std::stable_sort(functions.begin(), functions.end(),
                       [](const DeviceFunction& a, const DeviceFunction& b) { return a.name < b.name; });
      std::stable_sort(footprint_models.begin(), footprint_models.end(),
                       [](const KernelModel& a, const KernelModel& b) { return a.name < b.name; });
      std::stable_sort(op_models.begin(), op_models.end(),
                       [](const KernelOpModel& a, const KernelOpModel& b) { return a.name < b.name; });
      std::stable_sort(specializable.begin(), specializable.end(),
                       [](const Specializable& a, const Specializable& b) { return a.name < b.name; });
    }
    if (Status s = apply_device_functions(*df, functions, table, label); !s) return s.error();
    if (!in.no_footprints) {
      LaunchModels own;
      {
        StageSpan span(in.stage_times, "models of launches with their scalar arguments");
        specialize_launches(*df, specializable, &own);
      }
      {
        StageSpan span(in.stage_times, "footprints (isl, every distinct launch)");
        attach_footprints(*df, footprint_models, in.jobs, &own.footprint);
      }
      StageSpan span(in.stage_times, "operation counts (every distinct launch)");
      attach_kernel_ops(*df, op_models, in.jobs, &own.ops);
    }
    df->sources.device = names;
    // Positions in the IR name the device sources by base name; error messages keep the path.
    for (auto& f : df->device_functions)
      for (const std::string& path : devices)
        if (f.loc.file == path) f.loc.file = base_name(path);
  }
  assume_library_access(*df);

  // The Relay view: exact from relay.txt where it has the function, else from the name.
  std::map<std::string, std::vector<RelayOp>> relay;
  if (!in.relay.empty()) {
    Expected<std::string> text = read_file(in.relay, 256ull << 20);
    if (!text) return text.error();
    auto parsed = parse_relay_text(*text, in.relay);
    if (!parsed) return parsed.error();
    relay = parsed.take();
    df->sources.relay = base_name(in.relay);
  }
  for (Node& n : df->nodes) {
    // __nop / __copy nodes run no function. (relay.txt has a section for the reshape a
    // __nop stands for, but graph.json names the node "reshape_nop": no exact link.)
    if (n.op != "tvm_op" || !node_calls_function(graph.nodes[n.id])) continue;
    auto it = relay.find(n.function);
    if (it != relay.end()) {
      // relay.txt must come from this build: a one-output function's result (the type of
      // its last call) is the node's output. Anything not a plain tensor type is not compared.
      if (n.outputs.size() == 1 && !it->second.empty()) {
        const Buffer& out = df->buffers[n.outputs[0]];
        if (auto t = parse_relay_tensor_type(it->second.back().type); t && (t->shape != out.shape || t->dtype != out.dtype))
          return Status(file_error(in.relay,
                            fmt::format("function '{}' returns {}, but graph.json's node {} gives {}{} (is relay.txt "
                                        "from another build?)",
                                        n.function, it->second.back().type, n.id, out.dtype,
                                        fmt::format("[{}]", fmt::join(out.shape, ", ")))));
      }
      n.relay_ops = it->second;
      n.relay_source = "relay.txt";
    } else {
      n.relay_ops = decode_fused_name(n.function);
      n.relay_source = "name";
    }
  }
  compute_dependencies(*df);
  // Positions in the IR name host.c as sources.host does (no directory), so output
  // does not depend on where the inputs live; error messages keep the path given.
  auto scrub = [&](SourceLoc& l) {
    if (l.file == in.host) l.file = df->sources.host;
  };
  for (auto& b : df->buffers) scrub(b.loc);
  for (auto& k : df->kernels) scrub(k.loc);
  for (auto& c : df->library_calls) scrub(c.loc);
  for (auto& n : df->nodes) scrub(n.loc);
  return Status::ok();
}
#endif

Expected<Dataflow> extract(const ExtractInputs& given, const InterpreterLimits& limits, ProgressFn progress,
                           void* progress_ctx) {
  Expected<ExtractInputs> resolved = resolve_extract_inputs(given);
  if (!resolved) return resolved.error();
  const ExtractInputs& in = *resolved;
#ifdef KDFLOW_HAVE_CLANG
  if (!in.vm_exec.empty()) return extract_relax(in, limits, progress, progress_ctx);
  if (!in.library.empty() && in.graph.empty()) {
    Expected<bool> relax = library_is_relax(in.library);
    if (!relax) return relax.error();
    if (*relax) return extract_relax(in, limits, progress, progress_ctx);
  }
#endif
  if (!in.session.empty())
    return Error{fmt::format("error: --session {}: sessions run a Relax LLM build's VM functions, but this is a "
                             "Relay build",
                             in.session),
                 ExitCode::Usage};
  if (!in.function.empty())
    return Error{fmt::format("error: --function {}: names a Relax VM function, but this is a Relay build (graph.json: "
                             "one graph, no VM functions)",
                             in.function),
                 ExitCode::Usage};

  BuildOptions options;
  options.sources.host = base_name(in.host);
  std::string graph_file = in.graph;  // labels diagnostics about the graph
  Expected<std::string> graph_text = std::string();
  Expected<FunctionTable> table = FunctionTable();
  if (!in.library.empty()) {
    Expected<LoadedLibrary> lib = load_model_library(in.library);
    if (!lib) return lib.error();
    const std::string blob = base_name(in.library) + ":__tvm_dev_mblob";
    options.sources.library = base_name(in.library);
    if (in.graph.empty()) {
      graph_file = in.library + ":graph.json";
      graph_text = lib->graph_json;
      options.sources.graph = blob;
    }
    if (in.meta.empty()) {
      table = lib->table;
      options.sources.meta = blob;
    }
    if (in.params.empty() && !in.no_params) {
      // The factory's params are the bound weights: their names tell params from inputs.
      options.params_known = true;
      options.param_names.insert(lib->param_names.begin(), lib->param_names.end());
      options.sources.params = blob;
    }
  }
  if (options.sources.graph.empty()) {
    graph_text = read_file(in.graph, 256ull << 20);
    if (!graph_text) return graph_text.error();
    options.sources.graph = base_name(in.graph);
  }
  Expected<Graph> graph = parse_graph_json(*graph_text, graph_file);
  if (!graph) return graph.error();
  if (options.sources.meta.empty()) {
    Expected<std::string> meta_text = read_file(in.meta, 64ull << 20);
    if (!meta_text) return meta_text.error();
    table = parse_function_table(*meta_text, in.meta);
    if (!table) return table.error();
    options.sources.meta = base_name(in.meta);
  }

  if (!in.params.empty()) {
    // Mapped: only the array headers are touched, however big the weights are.
    Expected<MappedFile> file = map_file(in.params, kMaxParamsFileBytes);
    if (!file) return file.error();
    Expected<ParamsFile> params = parse_params(file->bytes(), in.params);
    if (!params) return params.error();
    options.params_known = true;
    for (const auto& a : params->arrays) options.param_names.insert(a.name);
    options.sources.params = base_name(in.params);
  }

#ifndef KDFLOW_HAVE_CLANG
  return Error{"kdflow: error: this kdflow was built without clang (-DKDFLOW_WITH_CLANG=OFF): extract is unavailable",
               ExitCode::Unavailable};
#else
  Expected<std::string> host_text = read_file(in.host, 256ull << 20);
  if (!host_text) return host_text.error();
  if (Status s = check_host_abi(*host_text, in.host); !s) return s.error();
  std::future<DeviceAnalyses> device = start_device_analysis(in);  // in.jobs > 1: parsed meanwhile
  std::optional<StageSpan> host_parse(std::in_place, in.stage_times, "host.c: clang parse");
  Expected<std::unique_ptr<HostProgram>> program = HostProgram::parse(*host_text, in.host, limits);
  host_parse.reset();
  if (!program) return program.error();

  // Every function the graph calls must be defined in host.c.
  size_t total = 0;
  for (size_t nid = 0; nid < graph->nodes.size(); ++nid) {
    const GraphNode& n = graph->nodes[nid];
    if (!node_calls_function(n)) continue;
    ++total;
    if (!(*program)->has_function(n.func_name))
      return json_error(graph_file, fmt::format("/nodes/{}/attrs/func_name", nid),
                        fmt::format("function '{}' is not defined in {} (is host.c from another model?)", n.func_name,
                                    in.host));
  }

  size_t done = 0;
  auto trace = [&](int nid) -> Expected<HostTrace> {
    const GraphNode& n = graph->nodes[nid];
    if (progress) progress(progress_ctx, done, total, n.func_name);
    ++done;
    return (*program)->run(n.func_name, node_tensor_args(*graph, nid));
  };
  std::optional<StageSpan> host_run(std::in_place, in.stage_times, "host.c: interpretation (every graph node)");
  Expected<Dataflow> df = build_dataflow(*graph, *table, trace, options);
  host_run.reset();
  if (progress) progress(progress_ctx, total, total, "");
  if (!df) return df;

  if (Status s = finish_extract(*df, *graph, *table, in, &device); !s) return s.error();
  return df;
#endif
}

Status rederive_footprints(Dataflow& df, const std::string& device_path, const std::string& label) {
#ifndef KDFLOW_HAVE_CLANG
  (void)df, (void)device_path, (void)label;
  return Status::ok();
#else
  Expected<std::string> cu = read_file(device_path, 256ull << 20);
  if (!cu) return cu.error();
  Expected<DeviceSource> device = analyze_device_source(*cu, device_path, /*strict=*/false, /*footprints=*/true);
  if (!device) return device.error();
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < device->functions.size(); ++i) by_name.emplace(device->functions[i].name, i);
  std::vector<KernelModel> models(df.device_functions.size());
  std::vector<Specializable> specializable(df.device_functions.size());
  for (size_t i = 0; i < df.device_functions.size(); ++i) {
    auto it = by_name.find(df.device_functions[i].name);
    if (it == by_name.end()) continue;
    models[i] = device->footprint_models[it->second];
    if (device->specializer && it->second < device->specializable.size() && device->specializable[it->second])
      specializable[i] = {df.device_functions[i].name, device->specializer.get(), it->second};
  }
  Dataflow fresh = df;
  for (Kernel& k : fresh.kernels)
    for (Arg& a : k.args) a.footprint.reset();
  LaunchModels own;  // as extract made them: with each launch's scalars where that tells more
  specialize_launches(fresh, specializable, &own);
  attach_footprints(fresh, models, 1, &own.footprint);
  auto text = [](const std::optional<Footprint>& f) {
    if (!f) return std::string("none");
    if (!f->unknown.empty()) return "unknown (" + f->unknown + ")";
    auto r = [](const std::optional<std::array<int64_t, 2>>& x) {
      return x ? fmt::format("[{}, {})", (*x)[0], (*x)[1]) : std::string("-");
    };
    return fmt::format("read {} write {}", r(f->read), r(f->write));
  };
  for (size_t i = 0; i < df.kernels.size(); ++i) {
    Kernel& k = df.kernels[i];
    for (size_t j = 0; j < k.args.size(); ++j) {
      const std::optional<Footprint>& carried = k.args[j].footprint;
      const std::optional<Footprint>& derived = fresh.kernels[i].args[j].footprint;
      if (carried && derived && !(*carried == *derived))
        return json_error(label, fmt::format("/kernels/{}/args/{}/footprint", i, j),
                          fmt::format("kernel {} ({}) argument {}: the footprint carried ({}) is not the one {} gives "
                                      "for this launch ({})",
                                      k.id, k.name, j, text(carried), base_name(device_path), text(derived)));
      if (derived) k.args[j].footprint = derived;
    }
  }
  return Status::ok();
#endif
}

// --- the command --------------------------------------------------------------

Expected<Dataflow> load_dataflow(const ExtractInputs& in, ProgressFn progress, void* progress_ctx) {
  const std::string& path = in.dir;
  if (!file_exists(path) && !is_directory(path))
    return file_error(path, "no such file or folder (give a build folder, a model.so or a kdflow JSON file)",
                      ExitCode::NoInput);
  const bool json = !is_directory(path) && path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json) {
    if (in.any_option())
      return file_error(path,
                        "an extracted kdflow JSON is read as it is: --graph, --host, --meta, --params, --device, "
                        "--relay, --no-* and --strict-device apply to a build folder or a model.so",
                        ExitCode::Usage);
    Expected<std::string> text = read_file(path, 1ull << 30);
    if (!text) return text.error();
    return parse_dataflow_json(*text, path);
  }
  return extract(in, InterpreterLimits{}, progress, progress_ctx);
}

}  // namespace kdflow

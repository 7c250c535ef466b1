// command.cpp — `kdflow replay`: find the IR (extract a sample folder, or read --flow), fill in
// the default files from the folder, replay, print the plan or the tables, write outputs,
// and turn the result into an exit code. Results on `out`, diagnostics and progress on `err`.
#include <fmt/format.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>

#include "kdflow/driver/codegen_command.h"
#include "kdflow/driver/commands.h"
#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/formats/model_library.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/support/file_names.h"
#include "kdflow/support/io.h"
#include "kdflow/replay/replay.h"

namespace kdflow {
namespace {

Error usage(const std::string& msg) { return Error{"kdflow replay: error: " + msg, ExitCode::Usage}; }

std::string join(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

Expected<Dataflow> load_flow(const ReplayCommand& cmd, std::string* label, std::ostream& err) {
  if (!cmd.flow.empty()) {
    if (cmd.extract.any_option())
      return usage("--flow reads an extracted graph as it is: the build's input options apply to DIR");
    *label = cmd.flow;
    Expected<std::string> text = read_file(cmd.flow, 1ull << 30);
    if (!text) return text.error();
    return parse_dataflow_json(*text, cmd.flow);
  }
  *label = cmd.dir;
  ExtractInputs in = cmd.extract;
  in.dir = cmd.dir;
  if (!cmd.params.empty()) in.params = cmd.params;
  Expected<Dataflow> df = extract(in);
  if (df) report_warnings(*df, err);
  if (!df && df.error().code == ExitCode::Unavailable) {
    Error e = df.error();
    e.message += "; replay can read an extracted graph instead: --flow FLOW.json";
    return e;
  }
  return df;
}

/// A graph node named on the command line: "n12", "12", a node name or a function name.
Expected<int> find_node(const Dataflow& df, const std::string& what) {
  std::string digits = what.size() > 1 && what[0] == 'n' ? what.substr(1) : what;
  if (!digits.empty() && digits.size() < 9 && digits.find_first_not_of("0123456789") == std::string::npos) {
    size_t id = std::stoul(digits);
    if (id < df.nodes.size()) return static_cast<int>(id);
    return usage(fmt::format("--nodes: no node {} (the graph has {})", what, df.nodes.size()));
  }
  for (const Node& n : df.nodes)
    if (n.name == what || n.function == what) return n.id;
  return usage(fmt::format("--nodes: no node or function named '{}'", what));
}

/// --nodes FROM..TO (or one node) → the kernel ids it launches, first and last.
Status resolve_nodes(const Dataflow& df, const std::string& spec, int* first, int* last) {
  size_t dots = spec.find("..");
  std::string a = dots == std::string::npos ? spec : spec.substr(0, dots);
  std::string b = dots == std::string::npos ? spec : spec.substr(dots + 2);
  if (a.empty() || b.empty())
    return usage(fmt::format("--nodes {}: expected FROM..TO (node ids such as n12, or names)", spec));
  Expected<int> from = find_node(df, a);
  if (!from) return from.error();
  Expected<int> to = find_node(df, b);
  if (!to) return to.error();
  if (*from > *to) return usage(fmt::format("--nodes {}: node {} comes after node {}", spec, *from, *to));
  *first = *last = -1;
  for (int n = *from; n <= *to; ++n)
    for (int k : df.nodes[n].kernels) {
      if (*first < 0 || k < *first) *first = k;
      if (k > *last) *last = k;
    }
  if (*first < 0) return usage(fmt::format("--nodes {}: nodes {}..{} launch no kernel", spec, *from, *to));
  return Status::ok();
}

/// Why a run whose every comparison passed verified nothing ("" when something could have
/// failed): no informative output, node or dump comparison.
std::string unverified_reason(const ReplayReport& r) {
  int informative = 0, uninformative = 0;
  for (const OutputCheck& c : r.checks) (c.uninformative ? uninformative : informative) += 1;
  informative += r.node_tensors_compared - r.node_tensors_uninformative;
  uninformative += r.node_tensors_uninformative;
  informative += r.compared_kernels;
  if (informative > 0) return "";
  if (uninformative == 0) return "no reference was compared (no output_<i>.npy, reference/nodes.json or dumps)";
  return fmt::format("each of the {} comparisons would pass with a constant array in place of the result",
                     uninformative);
}

}  // namespace

ScratchFolder::~ScratchFolder() {
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove_all(path, ec);
}

namespace {

/// After a difference on the CPU back end: whether a kernel read memory nothing wrote (issue 52).
/// Under --poison, NaN where TVM's result is a number says so; without it, how to find out.
std::string unwritten_memory_hint(const ReplayCommand& cmd, const OutputCheck& c) {
  if (cmd.backend != "cpu" || !c.problem.empty()) return "";
  if (cmd.poison && c.nan_mismatches > 0)
    return fmt::format("kdflow replay: {} of the elements that differ are NaN under --poison: the kernel that wrote "
                       "them read memory nothing wrote (a per-thread local, shared memory or a fresh allocation); "
                       "on a GPU it reads whatever that memory held\n",
                       c.nan_mismatches);
  if (!cmd.poison)
    return "kdflow replay: to see whether a kernel reads memory nothing wrote, run again with --poison (fresh "
           "locals, shared memory and allocations as NaN)\n";
  return "";
}

/// An exported model.so's pieces replay reads as files, written into a scratch folder: each CUDA
/// module of its blob as device_<i>.<cubin|fatbin|ptx|cu> (when `modules`), and its params when
/// none were given: the Relax executable (vm_exec.bin, its constant pool) or a Relay library's
/// params (params.bin).
Expected<std::shared_ptr<ScratchFolder>> model_so_files(const std::string& so, bool modules, ReplayOptions* opt) {
  Expected<std::string> bytes = read_file(so, 1ull << 32);
  if (!bytes) return bytes.error();
  Expected<DeviceBlob> blob = read_device_blob(*bytes, so, nullptr);
  if (!blob) return blob.error();
  std::string tmpl = (std::filesystem::temp_directory_path() / "kdflow-model-so.XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    return file_error(tmpl, "cannot create a scratch folder for the model.so's pieces", ExitCode::CantCreate);
  auto scratch = std::make_shared<ScratchFolder>();
  scratch->path = tmpl;
  auto put = [&](const std::string& name, const std::string& data) -> Expected<std::string> {
    std::string f = join(tmpl, name);
    if (Status s = write_output(f, data); !s) return s.error();
    return f;
  };
  if (modules)
    for (size_t i = 0; i < blob->cuda.size(); ++i) {
      const std::string& data = blob->cuda[i].data;
      ModuleFormat f = detect_module_format(data);
      const char* ext = f == ModuleFormat::Cubin ? "cubin" : f == ModuleFormat::Fatbin ? "fatbin"
                        : f == ModuleFormat::Ptx ? "ptx" : "cu";
      Expected<std::string> path = put(fmt::format("device_{}.{}", i, ext), data);
      if (!path) return path.error();
      opt->modules.push_back(*path);
    }
  if (opt->inputs.params.empty()) {
    if (!blob->vm_executables.empty()) {
      Expected<std::string> path = put("vm_exec.bin", blob->vm_executables[0]);
      if (!path) return path.error();
      opt->inputs.params = *path;
    } else if (!blob->factories.empty() && !blob->factories[0].param_names.empty()) {
      Expected<std::string> path =
          put("params.bin", assemble_params_file(blob->factories[0].param_names, blob->factories[0].param_blobs));
      if (!path) return path.error();
      opt->inputs.params = *path;
    }
  }
  return scratch;
}

}  // namespace

Expected<ReplaySetup> setup_replay(const ReplayCommand& cmd, std::ostream& err) {
  if (cmd.dir.empty() && cmd.flow.empty())
    return usage("give a sample folder (DIR) or an extracted graph (--flow FLOW.json)");
  if (!cmd.dir.empty() && !is_directory(cmd.dir) && !file_exists(cmd.dir))
    return file_error(cmd.dir, "no such directory", ExitCode::NoInput);
  // DIR may name an exported model.so, as for extract: its device modules and params are written
  // into a scratch folder for the run (model_so_files), inputs and references looked for beside it.
  const bool library = !cmd.dir.empty() && !is_directory(cmd.dir);
  std::string dir = cmd.dir;
  if (library) {
    dir = std::filesystem::path(cmd.dir).parent_path().string();
    if (dir.empty()) dir = ".";
  }
  ReplayOptions opt;
  if (cmd.mode == "eager") opt.mode = ReplayMode::Eager;
  else if (cmd.mode == "graph") opt.mode = ReplayMode::Graph;
  else if (cmd.mode == "dag") opt.mode = ReplayMode::Dag;
  else return usage(fmt::format("--mode {}: expected eager, graph or dag", cmd.mode));
  if (cmd.backend == "cuda") opt.backend = ReplayBackend::Cuda;
  else if (cmd.backend == "cpu") opt.backend = ReplayBackend::Cpu;
  else return usage(fmt::format("--backend {}: expected cuda or cpu", cmd.backend));
  if (cmd.collectives == "auto") opt.collectives = CollectiveMode::Auto;
  else if (cmd.collectives == "host") opt.collectives = CollectiveMode::Host;
  else if (cmd.collectives == "nccl") opt.collectives = CollectiveMode::Nccl;
  else return usage(fmt::format("--collectives {}: expected auto, host or nccl", cmd.collectives));
  if (cmd.collectives != "auto" && opt.backend == ReplayBackend::Cpu)
    return usage("--collectives chooses who makes a sharded flow's collectives on CUDA; the CPU back end makes them "
                 "on the host (drop it)");
  if (cmd.poison && opt.backend != ReplayBackend::Cpu)
    return usage("--poison fills the CPU back end's memory; it needs --backend cpu (a GPU's locals and shared memory "
                 "cannot be filled from the host)");
  if (!cmd.trace.empty() && cmd.dry_run) return usage("--trace needs a run; drop --dry-run");
  if (!cmd.timing_json.empty() && cmd.dry_run) return usage("--timing-json needs a run; drop --dry-run");
  if (!(cmd.time_limit >= 0) && cmd.time_limit != -1) return usage("--time-limit must be 0 or more");
  if (!(cmd.rtol >= 0) || !(cmd.atol >= 0)) return usage("--rtol and --atol must be 0 or more");

  std::string session_tokens;
  for (const std::string& s : cmd.inputs) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      return usage(fmt::format("--input {}: expected NAME=FILE.npy", s));
  }

  std::string label;
  Expected<Dataflow> df = load_flow(cmd, &label, err);
  if (!df) return df.error();
  // --input NAME=FILE: NAME as the model names it or as its file name encodes it
  // (docs/schema.md, "Names in file names"); a name may itself hold '='.
  {
    std::vector<std::string> names{"input_ids"};
    for (int b : df->inputs) names.push_back(df->buffers[b].name);
    for (const std::string& s : cmd.inputs) {
      std::optional<std::pair<std::string, std::string>> nv = split_name_value(s, names);
      if (!nv || nv->first.empty() || nv->second.empty())
        return usage(fmt::format("--input {}: expected NAME=FILE.npy", s));
      opt.inputs.inputs.push_back(std::move(*nv));
    }
  }
  // A --flow's footprints are re-derived from device.cu (DIR's, or beside the flow) when there is one.
  if (!cmd.flow.empty() && !df->sources.device.empty()) {
    std::string cu = join(!cmd.dir.empty() ? dir : std::filesystem::path(cmd.flow).parent_path().string(),
                          df->sources.device);
    if (file_exists(cu))
      if (Status s = rederive_footprints(*df, cu, cmd.flow); !s) return s.error();
  }

  opt.inputs.label = label;
  opt.inputs.allow_oob = cmd.allow_oob;
  opt.inputs.params = cmd.params;
  std::shared_ptr<ScratchFolder> scratch;
  if (library) {
    Expected<std::shared_ptr<ScratchFolder>> s = model_so_files(cmd.dir, cmd.modules.empty(), &opt);
    if (!s) return s.error();
    scratch = s.take();
  }
  // Relax builds (TVM 0.20+): the weights are the executable's constant pool, whatever else the
  // folder holds (a params.bin beside it keeps the weights by the user's names, before binding).
  bool relax_pool = !df->sources.vm_exec.empty() &&
                    std::any_of(df->buffers.begin(), df->buffers.end(),
                                [](const Buffer& b) { return b.kind == BufferKind::Param && b.constant_index >= 0; });
  if (opt.inputs.params.empty() && !cmd.dir.empty() && relax_pool && file_exists(join(dir, "vm_exec.bin")))
    opt.inputs.params = join(dir, "vm_exec.bin");
  if (opt.inputs.params.empty() && !cmd.dir.empty() && file_exists(join(dir, "params.bin")))
    opt.inputs.params = join(dir, "params.bin");
  if (opt.inputs.params.empty() && !cmd.dir.empty() && file_exists(join(dir, "vm_exec.bin")))
    opt.inputs.params = join(dir, "vm_exec.bin");
  // Packed params (an LLM's functions) by name from params.bin, beside the pool's constants.
  if (!df->sources.vm_exec.empty() && !cmd.dir.empty() && file_exists(join(dir, "params.bin")) &&
      opt.inputs.params != join(dir, "params.bin"))
    opt.inputs.packed_params = join(dir, "params.bin");
  // A sharded flow: each rank's params, params_shard<r>.bin beside the build.
  if (df->ranks > 1) {
    if (cmd.dir.empty())
      return usage(fmt::format("a flow of {} ranks replays from its build folder (DIR), where "
                                      "params_shard<r>.bin are",
                                      df->ranks));
    for (int r = 0; r < df->ranks; ++r) {
      const std::string f = join(dir, fmt::format("params_shard{}.bin", r));
      if (!file_exists(f))
        return file_error(f, fmt::format("no such file: rank {} of {} needs its params", r, df->ranks),
                                 ExitCode::NoInput);
      opt.rank_params.push_back(f);
    }
  }
  // A session's token ids: --input input_ids=FILE, else input_ids.npy beside the build; the
  // flow's inputs are each forward's tokens (input_ids[<step>]), sliced from it in order.
  const bool session = df->sources.vm_function.rfind("session ", 0) == 0;
  if (session)
    for (auto it = opt.inputs.inputs.begin(); it != opt.inputs.inputs.end(); ++it)
      if (it->first == "input_ids") {
        session_tokens = it->second;
        opt.inputs.inputs.erase(it);
        break;
      }
  if (session && session_tokens.empty() && !cmd.dir.empty() && file_exists(join(dir, "input_ids.npy")))
    session_tokens = join(dir, "input_ids.npy");
  opt.inputs.session_tokens = session_tokens;
  opt.inputs.input_dir = dir;
  if (!cmd.modules.empty()) opt.modules = cmd.modules;
  // The CUDA back end loads binaries (PTX as the fallback); the CPU back end compiles the source.
  std::vector<const char*> exts = opt.backend == ReplayBackend::Cpu ? std::vector<const char*>{"cu"}
                                                                   : std::vector<const char*>{"cubin", "fatbin", "ptx"};
  if (opt.modules.empty() && !cmd.dir.empty())
    for (const char* ext : exts)
      if (std::string f = join(dir, fmt::format("device.{}", ext)); file_exists(f)) opt.modules.push_back(f);
  // Relax builds (TVM 0.20): one CUDA module per device function, device_<i>.cubin (or
  // .ptx), all loaded; each kernel is run from the one module that defines it.
  if (opt.modules.empty() && !cmd.dir.empty())
    for (int i = 0;; ++i) {
      size_t before = opt.modules.size();
      for (const char* ext : exts)
        if (std::string f = join(dir, fmt::format("device_{}.{}", i, ext)); file_exists(f))
          opt.modules.push_back(f);
      if (opt.modules.size() == before) break;
    }
  if (!cmd.nodes.empty()) {
    if (Status s = resolve_nodes(*df, cmd.nodes, &opt.slice_first, &opt.slice_last); !s) return s.error();
    opt.inputs_from = cmd.inputs_from;
    if (opt.inputs_from.empty())
      return usage("--nodes needs --inputs-from DUMP_DIR (the dumps of a full run with --dump-dir)");
    if (!is_directory(opt.inputs_from))
      return file_error(opt.inputs_from, "no such directory (--inputs-from)", ExitCode::NoInput);
    if (!cmd.expect.empty() || !cmd.output_dir.empty())
      return usage("--nodes compares the slice with the dumps: drop --expect and --output-dir");
  } else if (!cmd.inputs_from.empty()) {
    return usage("--inputs-from goes with --nodes");
  }
  if (!cmd.compare_dumps.empty()) {
    if (!is_directory(cmd.compare_dumps))
      return file_error(cmd.compare_dumps, "no such directory (--compare-dumps)", ExitCode::NoInput);
    if (!cmd.dump_dir.empty() && same_file(cmd.dump_dir, cmd.compare_dumps))
      return usage("--compare-dumps and --dump-dir name the same folder: the dumps would be overwritten as "
                          "they are compared");
    opt.compare_dir = cmd.compare_dumps;
  }
  if (!cmd.no_expect && cmd.nodes.empty()) {
    opt.expect = cmd.expect;
    if (opt.expect.empty() && !cmd.dir.empty() && cmd.kernel < 0) {
      for (size_t i = 0; i < df->outputs.size(); ++i) {
        // A session's outputs are each step's logits, TVM's named by the step: output_prefill.npy,
        // output_decode_0.npy, output_seq_1_prefill_chunk_0.npy.
        std::string name = fmt::format("output_{}.npy", i);
        const int b = df->outputs[i];
        if (session && b >= 0 && static_cast<size_t>(b) < df->buffers.size() && df->buffers[b].node >= 0) {
          std::string step = df->nodes[static_cast<size_t>(df->buffers[b].node)].session_step;
          std::replace(step.begin(), step.end(), ' ', '_');
          if (!step.empty()) name = "output_" + step + ".npy";
        }
        std::string f = join(dir, name);
        opt.expect.push_back(file_exists(f) ? f : std::string());
      }
    }
  }
  // TVM's result for every node, where the exporter wrote them: compared in every whole run.
  std::optional<NodeReferences> node_refs;
  // A sharded build's node references would be the unsharded model's: none are compared.
  if (!cmd.no_node_reference && cmd.kernel < 0 && cmd.nodes.empty() && df->ranks <= 1) {
    std::string f = cmd.node_reference;
    if (f.empty() && !cmd.dir.empty() && file_exists(join(dir, "reference/nodes.json")))
      f = join(dir, "reference/nodes.json");
    if (!f.empty()) {
      Expected<NodeReferences> r = read_node_references(f, *df);
      if (!r) return r.error();
      node_refs = std::move(*r);
      opt.node_checks = node_refs->checks;
    }
  } else if (!cmd.node_reference.empty()) {
    return usage("--node-reference compares a whole run: drop --kernel and --nodes (or --no-node-reference)");
  }
  opt.warmup = cmd.warmup;
  opt.repeat = cmd.repeat;
  opt.device = cmd.device;
  opt.dry_run = cmd.dry_run;
  opt.guard = cmd.guard;
  opt.cpu_threads = cmd.jobs;
  opt.cpu_cache = !cmd.no_cache;
  opt.poison = cmd.poison;
  opt.dump_dir = cmd.dump_dir;
  opt.kernel = cmd.kernel;
  opt.rtol = cmd.rtol;
  opt.atol = cmd.atol;
  opt.time_limit_s = cmd.time_limit >= 0                    ? cmd.time_limit
                     : opt.backend == ReplayBackend::Cpu ? kDefaultTimeLimitCpuS
                                                         : kDefaultTimeLimitCudaS;

  // No output may overwrite an input (as extract refuses): --trace and the output_<i>.npy
  // files of --output-dir, checked against every file the run reads (DIR/output_<i>.npy are
  // the references when --output-dir is DIR).
  std::vector<std::string> read_files = opt.modules;
  for (const std::string* f : {&cmd.flow, static_cast<const std::string*>(&opt.inputs.params)})
    if (!f->empty()) read_files.push_back(*f);
  for (const auto& kv : opt.inputs.inputs) read_files.push_back(kv.second);
  for (const std::string& f : opt.expect)
    if (!f.empty()) read_files.push_back(f);
  for (const std::string& f : read_files) {
    bool clash =
        (!cmd.trace.empty() && same_file(f, cmd.trace)) || (!cmd.timing_json.empty() && same_file(f, cmd.timing_json));
    if (!cmd.output_dir.empty() && cmd.kernel < 0)
      for (size_t i = 0; i < df->outputs.size() && !clash; ++i)
        clash = same_file(join(cmd.output_dir, fmt::format("output_{}.npy", i)), f);
    if (clash) return usage(fmt::format("{}: an output would overwrite this input file", f));
  }

  ReplaySetup out;
  out.flow = df.take();
  out.options = std::move(opt);
  out.node_refs = std::move(node_refs);
  out.label = label;
  out.scratch = std::move(scratch);
  return out;
}

int run_replay_command(const ReplayCommand& cmd, std::ostream& out, std::ostream& err) {
  Expected<ReplaySetup> setup = setup_replay(cmd, err);
  if (!setup) return report(setup.error(), err);
  const Dataflow* df = &setup->flow;
  const ReplayOptions& opt = setup->options;
  const std::optional<NodeReferences>& node_refs = setup->node_refs;
  std::ostream quiet(nullptr);
  Expected<ReplayReport> rep = replay(*df, opt, cmd.quiet ? quiet : err);
  if (!rep) return report(rep.error(), err);

  if (cmd.dry_run) {
    out << format_plan(rep->plan, *df);
    return 0;
  }
  if (rep->guard) {
    err << rep->guard->message << "\n";
    return 1;
  }
  if (!cmd.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cmd.output_dir, ec);
    if (ec || !is_directory(cmd.output_dir))
      return report(file_error(cmd.output_dir, "cannot create directory: " + ec.message(), ExitCode::CantCreate), err);
    for (size_t i = 0; i < rep->results.size(); ++i)
      if (Status s = write_npy(join(cmd.output_dir, rep->result_names[i]), rep->results[i]); !s)
        return report(s.error(), err);
  }
  out << format_times(*rep, *df);
  if (rep->ranks > 1)
    out << fmt::format("ranks: {} in this process, each with its own params (params_shard<r>.bin) and buffers; {} "
                       "collectives made between them; every rank's outputs compared (r<rank>:<output>)\n",
                       rep->ranks, rep->collectives);
  out << format_checks(*rep);
  if (!opt.compare_dir.empty()) out << format_first_difference(*rep, *df);
  if (node_refs) out << format_node_references(*rep, *node_refs);
  if (!cmd.trace.empty())
    if (Status s = write_file_atomic(cmd.trace, chrome_trace(*rep, *df)); !s) return report(s.error(), err);
  if (!cmd.timing_json.empty())
    if (Status s = write_file_atomic(cmd.timing_json, timing_json(*rep, *df)); !s) return report(s.error(), err);
  if (rep->first_difference) {
    const FirstDifference& d = *rep->first_difference;
    err << fmt::format("kdflow replay: error: kernel {} ({}) of node {} is the first whose output differs from the "
                       "dumps in {} (rtol {}, atol {}; integers exactly)\n",
                       d.kernel, df->kernels[d.kernel].name, d.node, opt.compare_dir, cmd.rtol, cmd.atol);
    err << unwritten_memory_hint(cmd, d.check);
    return 1;
  }
  if (rep->node_difference) {
    err << fmt::format("kdflow replay: error: {} is the first node whose result differs from TVM's (rtol {}, atol "
                       "{}; integers exactly)\n",
                       rep->node_difference->label, cmd.rtol, cmd.atol);
    err << unwritten_memory_hint(cmd, rep->node_difference->check);
    return 1;
  }
  if (!rep->passed()) {
    size_t bad = 0;
    for (const OutputCheck& c : rep->checks) bad += c.pass ? 0 : 1;
    err << fmt::format("kdflow replay: error: {} of {} compared {} differ{} (rtol {}, atol {}; integers exactly)\n",
                       bad, rep->checks.size(), cmd.kernel >= 0 || !cmd.nodes.empty() ? "buffers" : "outputs",
                       bad == 1 ? "s" : "", cmd.rtol, cmd.atol);
    return 1;
  }
  // Everything passed; but could anything have failed? A run with no reference, or whose every
  // comparison a constant array would pass (a softmax of near-zero logits), verified nothing:
  // exit 3 so that a script trusting the status is not told the build checked out.
  if (!cmd.no_expect && !cmd.allow_unverified) {
    const std::string why = unverified_reason(*rep);
    if (!why.empty()) {
      err << fmt::format("kdflow replay: nothing verified: {}; exit 3 (--allow-unverified: exit 0)\n", why);
      return 3;
    }
  }
  return 0;
}

}  // namespace kdflow

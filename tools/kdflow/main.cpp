// kdflow — the command line. Parses options with CLI11 and calls the library
// (include/kdflow/commands.h, inspect.h, replay.h, show.h); nothing else happens here.
#include <malloc.h>

#include <cstdlib>
#include <algorithm>
#include <iostream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "kdflow/driver/calibrate_command.h"
#include "kdflow/driver/commands.h"
#include "kdflow/driver/costs_command.h"
#include "kdflow/driver/inspect.h"
#include "kdflow/replay/replay.h"
#include "kdflow/driver/codegen_command.h"
#include "kdflow/driver/show.h"
#include "kdflow/driver/view.h"
#include "kdflow/driver/watchdog.h"

namespace {

/// The options every command that reads a build takes, as extract does: where each input is,
/// which optional ones to skip, and --strict-device. An option the command already has
/// (replay's --params) is left to it.
void add_build_inputs(CLI::App* cmd, kdflow::ExtractInputs& in) {
  auto path = [&](const char* name, std::string& field, const char* help) {
    if (!cmd->get_option_no_throw(name)) cmd->add_option(name, field, help);
  };
  path("--graph", in.graph, "graph.json (overrides DIR/graph.json)");
  path("--host", in.host, "Host C source (overrides DIR/host.c)");
  path("--meta", in.meta, "Function table *.tvm_meta.json (overrides the one in DIR)");
  path("--params", in.params, "Params file, to tell params from inputs (default: DIR/params.bin)");
  path("--device", in.device, "CUDA source, for per-kernel access sets (default: DIR/device.cu)");
  path("--relay", in.relay, "relay.txt, for the exact Relay ops per function (default: DIR/relay.txt)");
  cmd->add_option("--input-shape", in.input_shapes,
                  "Relax builds with symbolic shapes: NAME=8x100 gives input NAME's shape, or a shape parameter's "
                  "values (repeatable; default: from DIR/input_NAME.npy)");
  cmd->add_option("--function", in.function,
                  "Relax builds: the VM function to run (default main; a build without main lists its functions)");
  cmd->add_option("--session", in.session,
                  "Relax LLM builds (embed, prefill, decode, create_tir_paged_kv_cache): the flow of a run of the "
                  "host program with the KV cache runtime's kernels, prefill:N,decode:M[,prefill_chunk_size:C,...] "
                  "(one sequence: N tokens prefilled, then M decode steps), or a session file (JSON: several "
                  "sequences; docs/schema.md#sessions)");
  cmd->add_option("--shards", in.shards,
                  "Relax builds: the ranks of a tensor-parallel (disco) build, where no params_shard<r>.bin beside it "
                  "says so (default: one per params_shard<r>.bin)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--param-dim", in.param_dims,
                  "Relax builds without their weights: NAME=N gives a symbolic dimension of the packed params (e.g. "
                  "vocab_size=151936; repeatable); their shapes are read from the build")
      ->type_name("NAME=N");
  cmd->add_flag("--no-params", in.no_params, "Do not read a params file; params are the nodes named p<N>");
  cmd->add_flag("--no-device", in.no_device, "Do not read device.cu; accesses stay unknown");
  cmd->add_flag("--no-relay", in.no_relay, "Do not read relay.txt; Relay ops are decoded from names");
  cmd->add_flag("--strict-device", in.strict_device,
                "Any clang error in device.cu fails (exit 65); by default only the kernels it touches lose their "
                "access sets");
}

}  // namespace

int main(int argc, char** argv) {
  // clang's ASTs grow the heap in many small steps (~1,900 on resnet18_tuned, each a
  // syscall): grow it 32 MiB at a time instead (address space, not memory, until touched).
  mallopt(M_TOP_PAD, 32 << 20);
  CLI::App app{"kdflow: the kernel-level dataflow of a TVM-compiled model (graph.json + host C + CUDA)"};
  app.set_version_flag("--version", "kdflow 0.1.0");
  app.require_subcommand(1);

  kdflow::ExtractCommand ex;
  CLI::App* extract = app.add_subcommand("extract", "Write the kernel-level dataflow graph (JSON, DOT or text)");
  extract->add_option("DIR", ex.inputs.dir,
                      "Folder with graph.json, host.c and *.tvm_meta.json (and params.bin, device.cu, relay.txt), "
                      "or an exported model.so");
  extract->add_option("-o,--output", ex.output, "Output file, or - for stdout")->capture_default_str();
  extract->add_option("--format", ex.format,
                      "json | dot | text | chakra | html (default: from the output's extension, .et for chakra, .html for the page "
                      "of kdflow view; stdout: json)")
      ->check(CLI::IsMember({"json", "dot", "text", "chakra", "html"}));
  extract->add_option("--timing", ex.timing, "Chakra: kdflow replay --timing-json file, for measured durations");
  extract->add_option("--time-model", ex.time_model,
                      "Device of the time predicted from each kernel's code: Chakra's durations where not measured "
                      "(default h100), JSON's predicted_us per kernel (only when given); h100, h200, a100, l4, none");
  extract->add_option("--roofline", ex.roofline,
                      "Chakra: the roofline bound on this device instead of --time-model's prediction (h100, h200, "
                      "a100, l4, rtx4090, none)");
  add_build_inputs(extract, ex.inputs);
  extract->add_flag("-q,--quiet", ex.quiet, "No progress on stderr");
  extract->add_flag("--allow-oob", ex.allow_oob,
                    "A kernel argument proven out of bounds, or a launch CUDA refuses (its block, grid or dynamic "
                    "shared memory), is a warning instead of an error (exit 65)");
  extract->add_flag("--stage-times", ex.stage_times,
                    "Print each stage's wall time on stderr at the end (host.c and device.cu parses, footprints, "
                    "operation counts, ...): where the time goes");
  extract->add_flag("--no-footprints", ex.inputs.no_footprints,
                    "Do not compute static footprints (byte ranges each kernel touches) from device.cu");
  ex.inputs.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  extract->add_option("--jobs,-j", ex.inputs.jobs,
                      "Threads: host.c and device.cu parsed concurrently, footprints of distinct launches in "
                      "parallel (the output is the same for any value)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  kdflow::WatchdogLimits limits;
  const char* time_limit_help = "Give up (exit 65) after this many seconds; 0: no limit";
  const char* memory_limit_help = "Give up (exit 65) past this many MiB of memory; 0: no limit";
  extract->add_option("--time-limit", limits.seconds, time_limit_help)->capture_default_str();
  extract->add_option("--memory-limit", limits.memory_mib, memory_limit_help)->capture_default_str();
  std::string cluster = "node";
  extract->add_option("--cluster", cluster, "DOT: node (one cluster per graph node) or none")
      ->check(CLI::IsMember({"node", "none"}))
      ->capture_default_str();
  extract->add_flag("--collapse", ex.dot.collapse, "DOT: one box per graph node, graph buffers between nodes");
  extract->add_flag("--op-colors", ex.dot.op_colors, "DOT: fill by operator family (conv, dense, pooling, ...)");
  bool no_buffers = false;
  extract->add_flag("--no-buffers", no_buffers, "DOT: kernel -> kernel edges from RAW dependencies, no buffer nodes");

  kdflow::ShowCommand sh;
  CLI::App* show = app.add_subcommand("show", "Table of the graph's nodes and kernels, with a summary; or a profile joined to it");
  show->add_option("INPUT", sh.inputs.dir, "Build folder (extracted), model.so, or a kdflow JSON file")->required();
  add_build_inputs(show, sh.inputs);
  show->add_option("--profile", sh.profile, "Nsight Compute (ncu --csv) or Nsight Systems (nsys stats --format csv) export");
  show->add_option("--color", sh.color, "auto (on a terminal, unless NO_COLOR is set), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  show->add_flag("-q,--quiet", sh.quiet, "No progress on stderr");
  show->add_option("--time-limit", limits.seconds, time_limit_help)->capture_default_str();
  show->add_option("--memory-limit", limits.memory_mib, memory_limit_help)->capture_default_str();

  kdflow::ExplainCommand xp;
  CLI::App* explain = app.add_subcommand("explain", "Everything about one kernel or graph node");
  explain->add_option("INPUT", xp.inputs.dir, "Build folder (extracted), model.so, or a kdflow JSON file")->required();
  explain->add_option("WHAT", xp.selector, "k<ID> or a kernel name; n<ID>, a node name or a function name")->required();
  add_build_inputs(explain, xp.inputs);
  explain->add_option("--color", xp.color, "auto (on a terminal, unless NO_COLOR is set), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  explain->add_flag("-q,--quiet", xp.quiet, "No progress on stderr");
  explain->add_option("--time-limit", limits.seconds, time_limit_help)->capture_default_str();
  explain->add_option("--memory-limit", limits.memory_mib, memory_limit_help)->capture_default_str();

  kdflow::ViewCommand vw;
  CLI::App* view = app.add_subcommand("view", "The dataflow as one interactive HTML page (or Model Explorer's graph JSON)");
  view->add_option("INPUT", vw.inputs.dir, "Build folder (extracted), model.so, or a kdflow JSON file")->required();
  view->add_option("-o,--output", vw.output, "Output file (.html: the page; .json: Model Explorer's graph)")->required();
  view->add_option("--format", vw.format, "html | model-explorer (default: from the output's extension)")
      ->check(CLI::IsMember({"html", "model-explorer"}));
  view->add_option("--timing", vw.timing, "kdflow replay --timing-json file: colour by measured time and roofline");
  view->add_option("--profile", vw.profile, "Nsight Compute / Systems CSV export: colour by measured time and roofline");
  view->add_option("--roofline", vw.device, "Roofline device: h100, h200, a100, l4, rtx4090, or none")
      ->capture_default_str();
  add_build_inputs(view, vw.inputs);
  view->add_flag("-q,--quiet", vw.quiet, "No progress on stderr");
  view->add_option("--time-limit", limits.seconds, time_limit_help)->capture_default_str();
  view->add_option("--memory-limit", limits.memory_mib, memory_limit_help)->capture_default_str();

  kdflow::CostsCommand co;
  CLI::App* costs = app.add_subcommand("costs", "FLOPs, bytes, roofline bound and measured time per fused function or kernel");
  costs->add_option("INPUT", co.inputs, "Build folders, model.so files or kdflow JSON files (one or more)")->required();
  costs->add_option("--device", co.device,
                    "Device of the roofline bound and of the time predicted from code (predicted_us): h100, h200, "
                    "a100, l4, rtx4090 (bound only), or none")
      ->capture_default_str();
  costs->add_option("--device-profile", co.device_profile,
                    "A kdflow calibrate profile: the time predicted from code uses its measured constants");
  costs->add_option("--timing", co.timings, "kdflow replay --timing-json file, one per INPUT in order (repeatable)");
  costs->add_option("--profile", co.profiles, "Nsight Compute / Systems CSV, one per INPUT in order (repeatable)");
  costs->add_flag("--per-kernel", co.per_kernel, "One row per kernel instead of per fused function");
  costs->add_option("-o,--output", co.output, "Output file (.csv, .jsonl: the dataset), or - for stdout")->capture_default_str();
  costs->add_option("--format", co.format, "table | csv | jsonl (default: from the output's extension; stdout: table)")
      ->check(CLI::IsMember({"table", "csv", "jsonl"}));
  costs->add_flag("-q,--quiet", co.quiet, "No progress on stderr");
  costs->add_option("--function", co.function, "Relax builds: the VM function to run (default main)");
  costs->add_option("--session", co.session, "Relax LLM builds: the flow of a session, prefill:N,decode:M or a session file (see extract)");
  costs->add_option("--shards", co.shards, "Relax builds: the ranks of a tensor-parallel build (see extract)")
      ->check(CLI::Range(1, 65536));
  costs->add_option("--time-limit", limits.seconds, time_limit_help)->capture_default_str();
  costs->add_option("--memory-limit", limits.memory_mib, memory_limit_help)->capture_default_str();

  std::string inspect_path;
  CLI::App* inspect = app.add_subcommand("inspect", "Show what a model.so, cubin, fatbin or PTX file holds");
  inspect->add_option("FILE", inspect_path, "model.so (its __tvm_dev_mblob), cubin, fatbin or PTX")->required();

  kdflow::ReplayCommand rp;
  CLI::App* replay = app.add_subcommand("replay", "Run the graph kernel by kernel on the CUDA driver API");
  replay->add_option("DIR", rp.dir,
                    "Sample folder (extracted unless --flow; default files are read from it), or an exported model.so "
                    "(its device modules and params from its blob; host.c, inputs and references beside it)");
  replay->add_option("--flow", rp.flow, "Read the graph from a kdflow JSON instead of extracting");
  replay->add_option("--module", rp.modules,
                     "Device code: PTX, cubin or fatbin (repeatable; files named alike but for the extension are "
                     "one module's alternatives, others separate modules; default DIR/device.cubin, DIR/device.ptx, "
                     "else every DIR/device_<i>.cubin|.ptx)");
  replay->add_option("--params", rp.params,
                     "Params file (default: DIR/params.bin, else DIR/vm_exec.bin: a Relax build's constant pool)");
  replay->add_option("--input", rp.inputs, "NAME=FILE.npy (repeatable; default DIR/input_<name>.npy)");
  replay->add_option("--expect", rp.expect, "Reference output .npy, in output order (default DIR/output_<i>.npy)");
  replay->add_flag("--no-expect", rp.no_expect, "Compare nothing");
  replay->add_flag("--allow-unverified", rp.allow_unverified,
                   "Exit 0, not 3, when the run verified nothing (no reference, or only references a constant "
                   "array would match)");
  replay->add_option("--mode", rp.mode,
                     "eager (one launch at a time), graph (one captured CUDA graph) or dag (a CUDA graph with an "
                     "edge per dependency)")
      ->check(CLI::IsMember({"eager", "graph", "dag"}))
      ->capture_default_str();
  replay->add_option("--backend", rp.backend,
                     "cuda (the CUDA driver: cubin/fatbin/PTX) or cpu (the host CPU: compiles device.cu)")
      ->check(CLI::IsMember({"cuda", "cpu"}))
      ->capture_default_str();
  replay->add_option("--collectives", rp.collectives,
                     "A sharded flow on CUDA: auto (NCCL when there is a GPU per rank and NCCL loads, else kdflow "
                     "on the host), host, or nccl (NCCL or exit 69; $KDFLOW_NCCL_LIBRARY, else libnccl.so.2)")
      ->check(CLI::IsMember({"auto", "host", "nccl"}))
      ->capture_default_str();
  replay->add_option("--warmup", rp.warmup, "Warm-up runs")->capture_default_str();
  replay->add_option("--repeat", rp.repeat, "Timed runs")->capture_default_str();
  replay->add_option("--jobs,-j", rp.jobs,
                     "--backend cpu: threads that run a launch's blocks (the results are the same for any value) "
                     "[default: the cores]")
      ->check(CLI::Range(1, 1024));
  replay->add_flag("--no-cache", rp.no_cache,
                   "--backend cpu: neither read nor write the compile cache (compiled kernels kept across runs in "
                   "$KDFLOW_CACHE_DIR, else $XDG_CACHE_HOME/kdflow, else ~/.cache/kdflow; 1 GiB, least recently used "
                   "out first, KDFLOW_CACHE_MAX_MB)");
  replay->add_flag("--poison", rp.poison,
                   "--backend cpu: fresh allocations, every kernel's locals and each block's shared memory start as "
                   "0xFF bytes (NaN as float), so that a kernel reading memory nothing wrote differs from TVM's result");
  replay->add_option("--gpu", rp.device, "CUDA device ordinal")->capture_default_str();
  replay->add_flag("--dry-run", rp.dry_run, "Print and check the plan; do not touch the driver");
  replay->add_flag("--guard", rp.guard, "Redzones after each allocation; report the first kernel writing past its buffer");
  replay->add_flag("--allow-oob", rp.allow_oob,
                   "With --backend cpu --guard: run launches whose static footprint leaves a buffer, for the guard "
                   "to catch (otherwise they are refused, exit 65)");
  replay->add_option("--dump-dir", rp.dump_dir, "Write every buffer a kernel writes, after it runs, as .npy (a sharded flow: DIR/rank<r>)");
  replay->add_option("--kernel", rp.kernel, "Run one kernel alone on buffers restored from --dump-dir");
  replay->add_option("--nodes", rp.nodes,
                     "Run a slice: FROM..TO graph nodes (n12..n40, or names), live-ins from --inputs-from");
  replay->add_option("--inputs-from", rp.inputs_from, "With --nodes: the --dump-dir of a full run");
  replay->add_option("--compare-dumps", rp.compare_dumps,
                     "Eager: compare what each kernel writes with an earlier --dump-dir (either back end) and name "
                     "the first node that differs");
  replay->add_option("--node-reference", rp.node_reference,
                     "TVM's result for every node (default DIR/reference/nodes.json, written by kdflow_tvm): each "
                     "node is compared after it runs and the first that differs is named");
  replay->add_flag("--no-node-reference", rp.no_node_reference, "Compare the outputs only, not every node");
  replay->add_option("--trace", rp.trace, "Chrome trace (Perfetto) of the kernel timeline");
  replay->add_option("--timing-json", rp.timing_json, "Per-kernel and per-run times as JSON (docs/schema.md)");
  replay->add_option("--time-limit", rp.time_limit,
                     "Give up (exit 65, naming the kernel) when one wait for GPU work (--backend cpu: one kernel "
                     "launch) takes longer than this many seconds; 0: no limit [default: 600, cpu: 60]");
  replay->add_option("--output-dir", rp.output_dir, "Write the outputs as output_<i>.npy");
  replay->add_option("--rtol", rp.rtol, "Relative tolerance for float outputs")->capture_default_str();
  replay->add_option("--atol", rp.atol, "Absolute tolerance for float outputs")->capture_default_str();
  replay->add_flag("-q,--quiet", rp.quiet, "No progress on stderr");
  add_build_inputs(replay, rp.extract);

  kdflow::CodegenCommand cg;
  CLI::App* codegen = app.add_subcommand(
      "codegen", "Write the flow as a standalone C++17 program (CMake project; CUDA driver loaded at run time)");
  codegen->add_option("DIR", cg.build.dir,
                     "Build folder (extracted unless --flow; params, inputs, references from it), or an exported model.so");
  codegen->add_option("--flow", cg.build.flow, "Read the graph from a kdflow JSON instead of extracting");
  codegen->add_option("-o,--out", cg.out, "Folder to write: new, empty, or written by kdflow codegen before")->required();
  codegen->add_option("--module", cg.build.modules, "Device code (default DIR/device.cubin|.ptx or device_<i>.*)");
  codegen->add_option("--params", cg.build.params, "Params file (default DIR/params.bin, or the executable's constants)");
  codegen->add_option("--input", cg.build.inputs, "NAME=FILE.npy (repeatable; default DIR/input_<name>.npy)");
  codegen->add_option("--expect", cg.build.expect, "Reference output .npy, in output order (default DIR/output_<i>.npy)");
  codegen->add_flag("--no-expect", cg.build.no_expect, "Compare nothing");
  codegen->add_option("--rtol", cg.build.rtol, "Relative tolerance the program compares with")->capture_default_str();
  codegen->add_option("--atol", cg.build.atol, "Absolute tolerance the program compares with")->capture_default_str();
  codegen->add_flag("-q,--quiet", cg.build.quiet, "No progress on stderr");
  add_build_inputs(codegen, cg.build.extract);

  kdflow::CalibrateCommand cal;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Measure this GPU's constants for the time predicted from code (a device profile JSON)");
  calibrate->add_option("-o,--output", cal.output, "The profile: a file, or - for stdout")->capture_default_str();
  calibrate->add_option("--gpu", cal.options.device, "CUDA device ordinal")->capture_default_str();
  calibrate->add_option("--id", cal.options.id,
                        "The profile's name (default: h200, h100, a100 or l4 from the device's name, else the name)");
  calibrate->add_option("--repeat", cal.options.repeat, "Timed launches per microbenchmark (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  calibrate->add_flag("-q,--quiet", cal.quiet, "No progress on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kdflow: error: " << e.what() << " (see kdflow --help)\n";
    return static_cast<int>(kdflow::ExitCode::Usage);
  }

  ex.dot.cluster = cluster == "none" ? kdflow::DotOptions::Cluster::None : kdflow::DotOptions::Cluster::Node;
  ex.dot.buffers = !no_buffers;
  if (extract->parsed()) {
    kdflow::Watchdog watchdog(limits, "kdflow extract");
    return kdflow::run_extract_command(ex, std::cerr);
  }
  if (show->parsed()) {
    kdflow::Watchdog watchdog(limits, "kdflow show");
    return kdflow::run_show_command(sh, std::cout, std::cerr);
  }
  if (explain->parsed()) {
    kdflow::Watchdog watchdog(limits, "kdflow explain");
    return kdflow::run_explain_command(xp, std::cout, std::cerr);
  }
  if (view->parsed()) {
    kdflow::Watchdog watchdog(limits, "kdflow view");
    return kdflow::run_view_command(vw, std::cerr);
  }
  if (costs->parsed()) {
    kdflow::Watchdog watchdog(limits, "kdflow costs");
    return kdflow::run_costs_command(co, std::cout, std::cerr);
  }
  if (codegen->parsed()) {
    kdflow::Watchdog watchdog(limits, "kdflow codegen");
    return kdflow::run_codegen_command(cg, std::cout, std::cerr);
  }
  if (inspect->parsed()) return kdflow::run_inspect_command(inspect_path, std::cout, std::cerr);
  if (calibrate->parsed()) return kdflow::run_calibrate_command(cal, std::cout, std::cerr);
  if (replay->parsed()) {
    int rc = kdflow::run_replay_command(rp, std::cout, std::cerr);
    if (kdflow::replay_device_abandoned()) {
      // A hung or poisoned device: end without static destructors or atexit handlers (a
      // library's teardown, such as libcublas's static runtime, may wait on it forever).
      std::cout.flush();
      std::cerr.flush();
      std::_Exit(rc);
    }
    return rc;
  }
  return static_cast<int>(kdflow::ExitCode::Usage);
}

// engine.cpp — the shared replay engine: runs a replay plan on a back end (backend.h; the
// CUDA driver in cuda/, the CPU in cpu/). What every back end shares lives here: the order
// of work, uploads of params and inputs, the checked run and its dumps, --kernel, --nodes
// slices, guards, outputs, timing and the report. What is a back end's own (contexts,
// streams, events, modules, graphs, cuBLAS handles) lives behind the interface.
//
// Every mode first runs the sequence eagerly: one checked run (the back end synchronised
// after every kernel and every library call, so a fault names its kernel or call, redzones
// checked, written buffers dumped; never timed), `warmup` untimed runs, then `repeat` timed
// runs in which every step (kernel or library call) is queued back to back with a marker
// (a CUDA event) after each and one wait at the end: step s's time is marker s → s + 1.
// Where the back end has a gate (caps().gate), each timed run is queued whole behind it and
// then released, so a step's interval is device time rather than the host's enqueue rate;
// the end-to-end eager time comes from ungated runs (what a host loop achieves), so the
// difference between the two is the launch overhead. Graph mode then has the back end build
// the sequence as one graph (a chain, as TVM's CUDA graph executor runs it); dag mode one
// node per step with an edge per transitively reduced dependency (launch_graph.h), library
// calls kept in sequence (they share one workspace). Both time whole-graph launches.
//
// Waits poll markers against the time limit, which bounds each wait (not the whole replay),
// so a hung kernel is named instead of hanging replay. A fault outside a checked run is
// located by re-running synchronised in a child process forked before the back end was
// opened, so a sticky fault (cuda.h: "the process must be terminated and relaunched") never
// poisons the re-run; the original message survives if the re-run cannot name the kernel.
//
// This file: replay() (options, plan, back end, locate pass, report); the Engine's concerns
// are split over the files engine_internal.h lists.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include "backend.h"
#include "engine_internal.h"
#include "replay_ranks.h"
#include "locate.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/replay/replay.h"
#include "kdflow/support/io.h"

namespace kdflow {

namespace replay_backend {

Error kernel_fault_error(const std::string& label, const PlanLaunch& l, const Fault& f, const std::string& what) {
  return json_error(label, fmt::format("/kernels/{}", l.kernel),
                    fmt::format("{} of kernel {} ({}) failed: {}", what.empty() ? f.api : what, l.kernel, l.name,
                                f.text),
                    ExitCode::Software);
}

Error library_call_fault_error(const std::string& label, const PlanLibraryCall& p, const Fault& f) {
  return json_error(label, fmt::format("/library_calls/{}", p.call),
                    fmt::format("{} for library call {} ({} of node {}) failed: {}", f.api, p.call, p.name, p.node,
                                f.text),
                    ExitCode::Software);
}

Error fault_error(const std::string& library, const Fault& f, const std::string& detail, ExitCode code) {
  return file_error(library, fmt::format("{}{} failed: {}", f.api, detail, f.text), code);
}

}  // namespace replay_backend

namespace engine_detail {
std::atomic<bool> g_abandoned{false};
}  // namespace engine_detail

namespace {

using namespace replay_backend;
using namespace engine_detail;

Expected<std::unique_ptr<Backend>> make_backend(const ReplayOptions& opt, const ReplayPlan& plan, std::ostream& log,
                                                const RankSetup& rank = {}) {
  BackendOptions bo;
  bo.rank = rank.rank;
  bo.ranks = rank.ranks;
  bo.nccl = rank.nccl;
  bo.device = opt.device;
  bo.cuda_library = opt.cuda_library;
  bo.cublas_library = opt.cublas_library;
  bo.library_calls = !plan.library_calls.empty();
  bo.label = plan.label;
  bo.guard = opt.guard;
  bo.threads = opt.cpu_threads;
  bo.launch_time_limit_s = opt.time_limit_s;
  bo.compile_cache = opt.cpu_cache;
  bo.poison = opt.poison;
  if (opt.backend == ReplayBackend::Cpu) return make_cpu_backend(bo, log);
  return make_cuda_backend(bo, log);
}

/// Dump files are "<kernel id>_<kernel name>_arg<j>.npy": one that names a kernel id this
/// model does not have, or another name for it, comes from another model.
Status check_dump_dir(const Dataflow& df_, const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return file_error(dir, "cannot read the dump folder: " + ec.message(), ExitCode::NoInput);
  std::vector<std::string> names;
  for (; it != end; it.increment(ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    size_t us = n.find('_'), arg = n.rfind("_arg");
    if (n.size() < 4 || n.substr(n.size() - 4) != ".npy" || us == std::string::npos || arg == std::string::npos ||
        arg <= us)
      continue;
    std::string id = n.substr(0, us), name = n.substr(us + 1, arg - us - 1);
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id.size() > 9) continue;
    size_t k = std::stoul(id);
    if (k >= df_.kernels.size() || df_.kernels[k].name != name)
      return file_error(dir + "/" + n,
                        k >= df_.kernels.size()
                            ? fmt::format("a dump of another model: this model has {} kernels, no kernel {}",
                                          df_.kernels.size(), k)
                            : fmt::format("a dump of another model: kernel {} of this model is {}, not {}", k,
                                          df_.kernels[k].name, name));
  }
  return Status::ok();
}

Status check_options(const Dataflow& df, const ReplayOptions& opt) {
  auto usage = [](const std::string& msg) { return Error{"kdflow replay: error: " + msg, ExitCode::Usage}; };
  if (opt.warmup < 0) return usage("--warmup must be 0 or more");
  if (opt.repeat < 1) return usage("--repeat must be 1 or more");
  if (opt.guard && opt.guard_bytes == 0) return usage("the guard needs at least one redzone byte");
  if (opt.inputs.allow_oob && !(opt.backend == ReplayBackend::Cpu && opt.guard))
    return usage("--allow-oob runs launches proven out of bounds, which only the CPU back end under --guard stops "
                 "safely: add --backend cpu --guard");
  if (opt.mode != ReplayMode::Eager && !opt.dump_dir.empty() && opt.kernel < 0)
    return usage("--dump-dir dumps after each kernel, which needs --mode eager");
  if (!(opt.time_limit_s >= 0)) return usage("--time-limit must be 0 or more");
  if (!df.library_calls.empty() && (opt.kernel >= 0 || opt.slice_first >= 0))
    return file_error(opt.inputs.label.empty() ? std::string("flow") : opt.inputs.label,
                      fmt::format("{} restores buffers from kernel dumps, which do not cover what library calls "
                                  "write; this model makes {} library calls ('{}'): replay it whole",
                                  opt.kernel >= 0 ? "--kernel" : "--nodes", df.library_calls.size(),
                                  df.library_calls[0].name),
                      ExitCode::Unavailable);
  if (!df.host_copies.empty() && (opt.kernel >= 0 || opt.slice_first >= 0))
    return file_error(opt.inputs.label.empty() ? std::string("flow") : opt.inputs.label,
                      fmt::format("this flow copies data from the host between kernels ({} copies: the KV cache's "
                                  "auxiliary arrays of each step); replay runs it whole: drop {}",
                                  df.host_copies.size(), opt.kernel >= 0 ? "--kernel" : "--nodes"),
                      ExitCode::Unavailable);
  if (opt.kernel >= 0) {
    if (static_cast<size_t>(opt.kernel) >= df.kernels.size())
      return usage(fmt::format("--kernel {}: the model has {} kernels (0..{})", opt.kernel, df.kernels.size(),
                               df.kernels.empty() ? 0 : df.kernels.size() - 1));
    if (opt.dump_dir.empty()) return usage("--kernel needs --dump-dir (the dumps of a full eager run)");
    if (opt.mode != ReplayMode::Eager)
      return usage(fmt::format("--kernel runs one kernel eagerly; drop --mode {}", to_string(opt.mode)));
  }
  if (opt.slice_first >= 0) {
    if (opt.slice_last < opt.slice_first || static_cast<size_t>(opt.slice_last) >= df.kernels.size())
      return usage("--nodes: the range runs no kernel");
    if (opt.inputs_from.empty()) return usage("--nodes needs --inputs-from DUMP_DIR (the dumps of a full eager run)");
    if (opt.kernel >= 0 || !opt.dump_dir.empty() || opt.guard || opt.mode != ReplayMode::Eager)
      return usage("--nodes runs a slice eagerly: drop --kernel, --dump-dir, --guard and --mode graph/dag");
  }
  if (opt.slice_first >= 0 && !opt.dry_run)
    if (Status s = check_dump_dir(df, opt.inputs_from); !s) return s;
  if (!opt.compare_dir.empty()) {
    if (opt.kernel >= 0 || opt.slice_first >= 0)
      return usage("--compare-dumps checks a whole eager run: drop --kernel and --nodes (a slice compares with "
                   "--inputs-from already)");
    if (!df.library_calls.empty())
      return file_error(opt.inputs.label.empty() ? std::string("flow") : opt.inputs.label,
                        fmt::format("--compare-dumps compares kernel dumps, which do not cover what library calls "
                                    "write; this model makes {} library calls ('{}')",
                                    df.library_calls.size(), df.library_calls[0].name),
                        ExitCode::Unavailable);
    if (!opt.dry_run)
      if (Status s = check_dump_dir(df, opt.compare_dir); !s) return s;
  }
  if (opt.expect.size() > df.outputs.size())
    return usage(fmt::format("{} --expect files for {} outputs", opt.expect.size(), df.outputs.size()));
  return Status::ok();
}

}  // namespace

using engine_detail::Engine;
using engine_detail::LocateHelper;

bool replay_device_abandoned() { return engine_detail::g_abandoned.load(); }

Expected<ReplayReport> replay(const Dataflow& df, const ReplayOptions& opt, std::ostream& log) {
  if (Status s = check_options(df, opt); !s) return s.error();
  if (df.ranks > 1)
    return replay_ranks(df, opt, log, [](const ReplayOptions& o, const ReplayPlan& p, std::ostream& l,
                                         const RankSetup& r) { return make_backend(o, p, l, r); });
  Expected<ReplayPlan> plan = make_plan(df, opt.inputs);
  if (!plan) return plan.error();
  ReplayReport rep;
  rep.plan = plan.take();
  for (const std::string& why : rep.plan.oob)
    log << why.substr(0, why.find(": error: ")) << ": warning: "
        << why.substr(why.find(": error: ") == std::string::npos ? 0 : why.find(": error: ") + 9)
        << " (--allow-oob: left to the guard)\n";
  rep.mode = opt.mode;
  rep.warmup = opt.warmup;
  rep.repeat = opt.repeat;
  rep.kernel = opt.kernel;
  rep.backend = opt.backend;
  if (opt.dry_run) return rep;

  // Expected outputs are read before the device is touched: a typo fails fast.
  std::vector<std::optional<NpyArray>> expected;
  if (opt.kernel < 0) {
    Expected<std::vector<std::optional<NpyArray>>> e = read_expected(opt);
    if (!e) return e.error();
    expected = e.take();
  }

  int failed_run = -1;
  Error failure;
  LocateHelper helper;
  bool helper_started = false;
  {
    Expected<std::unique_ptr<Backend>> backend = make_backend(opt, rep.plan, log);
    if (!backend) return backend.error();
    // The locate pass's process is forked now, before this process opens the device.
    if ((*backend)->caps().asynchronous && !opt.locate && opt.kernel < 0 && opt.slice_first < 0)
      helper_started = helper.start([&](int run, std::ostream& child_log, LocateHelper::Found* out) {
        ReplayOptions again = opt;
        again.locate = true;
        again.mode = ReplayMode::Eager;
        again.dump_dir.clear();
        again.guard = false;
        again.warmup = 0;
        again.repeat = run;  // as many runs of the sequence as had started when it failed
        ReplayReport scratch;
        scratch.plan = rep.plan;
        Expected<std::unique_ptr<Backend>> b = make_backend(again, scratch.plan, child_log);
        if (!b) {
          out->error = b.error().message;
          out->error_code = static_cast<int>(b.error().code);
          return;
        }
        Engine engine(**b, df, again, scratch, child_log);
        Status s = engine.run();
        out->launch = engine.located_launch();
        out->call = engine.located_call();
        out->run = engine.located_run();
        out->fault = engine.located_fault().text;
        if (!s) {
          out->error = s.error().message;
          out->error_code = static_cast<int>(s.error().code);
        }
      });
    Engine engine(**backend, df, opt, rep, log);
    if (Status s = engine.run(); !s) {
      if (engine.failed_run() < 0 || opt.locate) return s.error();
      failed_run = engine.failed_run();
      failure = s.error();
    }
  }  // everything released (the context too, unless a sticky fault or a hang forbids it)
  if (failed_run >= 0) {
    // A run queued without a synchronise per step failed; the error surfaced at a later
    // call. Re-run in the child process, synchronised after every step, to name the kernel.
    log << fmt::format("replay: run {} failed ({}); re-running with a synchronise after each kernel to find which "
                       "kernel (in a separate process)\n",
                       failed_run, failure.message);
    if (!helper_started) {
      failure.message += "; the re-run to find the kernel could not be started (fork failed)";
      return failure;
    }
    LocateHelper::Found f = helper.locate(failed_run);
    log << f.log;
    if (f.launch >= 0 && static_cast<size_t>(f.launch) < rep.plan.launches.size()) {
      const PlanLaunch& l = rep.plan.launches[f.launch];
      return json_error(rep.plan.label, fmt::format("/kernels/{}", l.kernel),
                        fmt::format("kernel {} ({}) failed in run {}: {} (found by re-running with a synchronise "
                                    "after each kernel)",
                                    l.kernel, l.name, f.run, f.fault),
                        ExitCode::Software);
    }
    if (f.call >= 0 && static_cast<size_t>(f.call) < rep.plan.library_calls.size()) {
      const PlanLibraryCall& p = rep.plan.library_calls[f.call];
      return json_error(rep.plan.label, fmt::format("/library_calls/{}", p.call),
                        fmt::format("library call {} ({} of node {}) failed in run {}: {} (found by re-running with a "
                                    "synchronise after each step)",
                                    p.call, p.name, p.node, f.run, f.fault),
                        ExitCode::Software);
    }
    if (!f.answered) {
      failure.message += fmt::format("; the re-run to find the kernel ended without an answer ({})", f.how_it_ended);
      return failure;
    }
    if (!f.error.empty()) {
      failure.message += "; re-running with a synchronise after each kernel failed otherwise: " + f.error;
      return failure;
    }
    failure.message += "; re-running with a synchronise after each kernel did not fail, so the failing kernel is "
                       "unknown (timing-dependent?)";
    return failure;
  }
  rep.ran = true;

  if (rep.guard) return rep;
  if (opt.slice_first >= 0) return rep;  // the slice's checks were made as it ran
  if (opt.kernel >= 0) {
    for (size_t i = 0; i < rep.results.size(); ++i) {
      std::string file = opt.dump_dir + "/" + rep.result_names[i];
      if (!file_exists(file)) continue;
      Expected<NpyArray> want = read_npy(file);
      if (!want) return want.error();
      OutputCheck c = compare_arrays(rep.results[i], *want, opt.rtol, opt.atol);
      c.output = static_cast<int>(i);
      c.buffer = rep.result_buffers[i];
      c.name = rep.result_names[i];
      c.expect_file = file;
      rep.checks.push_back(std::move(c));
    }
    return rep;
  }
  compare_outputs(rep, expected, opt, -1, &rep);
  return rep;
}

Expected<std::vector<std::optional<NpyArray>>> read_expected(const ReplayOptions& opt) {
  std::vector<std::optional<NpyArray>> expected(opt.expect.size());
  for (size_t i = 0; i < opt.expect.size(); ++i) {
    if (opt.expect[i].empty()) continue;
    Expected<NpyArray> a = read_npy(opt.expect[i]);
    if (!a) return a.error();
    expected[i] = a.take();
  }
  return expected;
}

void compare_outputs(const ReplayReport& from, const std::vector<std::optional<NpyArray>>& expected,
                     const ReplayOptions& opt, int rank, ReplayReport* to) {
  std::vector<OutputCheck> checks;
  for (size_t i = 0; i < expected.size() && i < from.results.size(); ++i) {
    if (!expected[i]) continue;
    OutputCheck c = compare_arrays(from.results[i], *expected[i], opt.rtol, opt.atol);
    c.output = static_cast<int>(i);
    c.rank = rank;
    c.buffer = from.result_buffers[i];
    c.name = from.result_names[i];
    c.expect_file = opt.expect[i];
    checks.push_back(std::move(c));
  }
  for (OutputCheck& c : checks) to->checks.push_back(std::move(c));
}

}  // namespace kdflow

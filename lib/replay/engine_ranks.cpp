// engine_ranks.cpp — replay of a sharded flow (Dataflow::ranks > 1): every rank in this
// process, each with its own plan (its params_shard<r>.bin), back end, buffers and engine on a
// thread of its own; a collective is made when every rank has reached it (collectives.h), as
// disco's workers meet in NCCL. Every rank's outputs are compared with the same references:
// a sharded build's references are the unsharded model's outputs, which every rank must hold
// after its last collective. On CUDA, rank r opens GPU r when there are as many GPUs as ranks,
// else every rank shares one GPU (its primary context; each rank its own stream, modules and
// buffers); the collectives are made on the host either way.
#include <fmt/format.h>

#include <sstream>
#include <thread>

#include "cuda/nccl.h"
#include "engine_internal.h"
#include "replay_ranks.h"

namespace kdflow {

using engine_detail::Engine;
using namespace replay_backend;

namespace {

/// Where the ranks ran, for the report: " (rank r on GPU r)" or " (every rank on GPU 0: 1 GPU
/// for 2 ranks)"; "" for the CPU back end.
std::string placement(const std::vector<std::unique_ptr<Backend>>& backends, const ReplayOptions& opt) {
  if (opt.backend != ReplayBackend::Cuda || backends.empty()) return "";
  bool same = true;
  for (const auto& b : backends) same = same && b->info().ordinal == backends[0]->info().ordinal;
  if (same && backends.size() > 1)
    return fmt::format(" (every rank on GPU {}: {} GPU{} found for {} ranks)", backends[0]->info().ordinal,
                       backends[0]->info().device_count, backends[0]->info().device_count == 1 ? "" : "s",
                       backends.size());
  std::string gpus;
  for (const auto& b : backends) gpus += (gpus.empty() ? "" : ", ") + std::to_string(b->info().ordinal);
  return fmt::format(" (rank r on GPU {}: GPUs {})", opt.device == 0 ? "r" : fmt::format("{} + r", opt.device), gpus);
}

/// "2.23.4" for ncclGetVersion's 22304 (2.9+: major × 10000 + minor × 100 + patch).
std::string nccl_version(int v) {
  if (v <= 0) return "(version unknown)";
  if (v >= 10000) return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, v / 100 % 10, v % 100);
}

}  // namespace

Expected<ReplayReport> replay_ranks(const Dataflow& df, const ReplayOptions& opt, std::ostream& log,
                                    const BackendFactory& make_backend) {
  auto usage = [](const std::string& msg) {
    return Error{"kdflow replay: error: a sharded flow (several ranks): " + msg, ExitCode::Usage};
  };
  const int n = df.ranks;
  if (opt.mode != ReplayMode::Eager) return usage("--mode graph and dag capture one rank's run; replay it eager");
  if (opt.kernel >= 0 || opt.slice_first >= 0) return usage("--kernel and --nodes replay one rank's slice: not yet");
  // (--compare-dumps is refused before: the collectives are library calls, which dumps do not cover.)
  if (!opt.compare_dir.empty()) return usage("--compare-dumps: not yet");
  if (opt.guard) return usage("--guard: not yet (a rank the guard stops would leave the others waiting)");
  if (!opt.node_checks.empty())
    return usage("node references: a sharded build's intermediate buffers are slices, TVM's unsharded results are "
                 "not (use --no-node-reference)");
  if (opt.rank_params.size() != static_cast<size_t>(n))
    return usage(fmt::format("{} params files for {} ranks (params_shard0.bin ... params_shard{}.bin)",
                             opt.rank_params.size(), n, n - 1));

  // Every rank's plan: the same flow, its own params.
  std::vector<ReplayOptions> opts(static_cast<size_t>(n), opt);
  std::vector<ReplayReport> reps(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    opts[r].inputs.packed_params = opt.rank_params[static_cast<size_t>(r)];
    // Each rank's dumps in a folder of its own: DIR/rank<r> (its buffers are its slices).
    if (!opt.dump_dir.empty()) opts[r].dump_dir = fmt::format("{}/rank{}", opt.dump_dir, r);
    Expected<ReplayPlan> plan = make_plan(df, opts[r].inputs);
    if (!plan) return plan.error();
    reps[r].plan = plan.take();
    reps[r].mode = opt.mode, reps[r].warmup = opt.warmup, reps[r].repeat = opt.repeat, reps[r].backend = opt.backend;
  }
  if (opt.dry_run) {
    ReplayReport rep = std::move(reps[0]);
    rep.ranks = n;
    return rep;
  }
  Expected<std::vector<std::optional<NpyArray>>> expected = read_expected(opt);
  if (!expected) return expected.error();

  // Who makes the collectives on CUDA: NCCL when there is a GPU per rank (its communicators
  // made here, before any rank's thread, so none can wait for a rank that failed to start),
  // else kdflow on the host.
  RankSetup setup;
  setup.ranks = n;
  std::string why_host;  // the report's reason for host collectives on CUDA
  if (opt.backend == ReplayBackend::Cuda) {
    BackendOptions probe;
    probe.cuda_library = opt.cuda_library;
    Expected<int> count = cuda_device_count(probe);
    if (!count) return count.error();
    const bool enough = *count >= opt.device + n;
    const bool want = opt.collectives != CollectiveMode::Host;
    if (opt.collectives == CollectiveMode::Nccl && !enough)
      return Error{fmt::format("kdflow replay: error: --collectives nccl needs a GPU per rank: {} ranks from GPU {}, "
                               "and the machine has {} GPU{} (NCCL refuses two ranks on one GPU)",
                               n, opt.device, *count, *count == 1 ? "" : "s"),
                   ExitCode::Unavailable};
    if (want && enough) {
      using Comms = std::shared_ptr<nccl::Communicators>;
      Expected<nccl::Library> lib = nccl::load_nccl(opt.nccl_library);
      Expected<Comms> comms = lib ? nccl::Communicators::make(lib.take(), n, opt.device) : Expected<Comms>(lib.error());
      if (!comms && opt.collectives == CollectiveMode::Nccl) return comms.error();
      if (comms) setup.nccl = comms.take();
      else why_host = "NCCL is not available: " + comms.error().message;
    } else {
      why_host = !want ? "--collectives host"
                       : fmt::format("{} GPU{} for {} ranks: NCCL needs a GPU per rank", *count,
                                     *count == 1 ? "" : "s", n);
    }
  }

  // Each rank logs to its own stream (its back end too: they run on their threads at once),
  // printed afterwards with the rank's name.
  std::vector<std::ostringstream> logs(static_cast<size_t>(n));
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < n; ++r) {
    RankSetup mine = setup;
    mine.rank = r;
    Expected<std::unique_ptr<Backend>> b = make_backend(opts[r], reps[r].plan, logs[r], mine);
    if (!b) return b.error();
    backends.push_back(b.take());
  }
  CollectiveHub hub(n, opt.time_limit_s);
  std::vector<Status> status(static_cast<size_t>(n), Status::ok());
  std::vector<int> failed_run(static_cast<size_t>(n), -1);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        Engine engine(*backends[r], df, opts[r], reps[r], logs[r]);
        engine.set_rank(&hub, r);
        status[r] = engine.run();
        failed_run[r] = engine.failed_run();
        // The other ranks may wait in a collective on their GPUs: NCCL's abort stops them.
        if (!status[r] && setup.nccl) setup.nccl->abort();
        hub.abort(r, status[r] ? "it finished every run" : status[r].error().message);
      });
    for (std::thread& t : threads) t.join();
  }
  for (int r = 0; r < n; ++r) {
    std::string text = logs[r].str();
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) log << "rank " << r << ": " << line << "\n";
  }
  // The error to report: a rank's own, not one that only says another rank stopped.
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < n; ++r) {
      if (status[r]) continue;
      const std::string& m = status[r].error().message;
      if (pass == 0 && m.find("rank ") != std::string::npos && m.find(" stopped: ") != std::string::npos) continue;
      Error e = status[r].error();
      e.message = fmt::format("rank {}: {}", r, e.message);
      if (failed_run[r] >= 0) e.message += fmt::format(" (in run {})", failed_run[r]);
      return e;
    }

  ReplayReport rep = std::move(reps[0]);
  rep.ran = true;
  rep.ranks = n;
  rep.collectives = hub.completed();
  rep.collectives_by = setup.nccl ? "nccl" : "host";
  if (setup.nccl)
    rep.timing_method += fmt::format(
        "; {} ranks in this process, each on its own {} back end{}, the collectives made by NCCL {} ({}) on each "
        "rank's stream in order ({} in all runs, every rank having reached the same call first), timed as steps of "
        "rank 0's sequence",
        n, to_string(opt.backend), placement(backends, opt), nccl_version(setup.nccl->lib().version),
        setup.nccl->lib().library, rep.collectives);
  else
    rep.timing_method += fmt::format("; {} ranks in this process, each on its own {} back end{}, the collectives "
                                     "made by kdflow on the host between them ({} in all runs: every rank's send read "
                                     "back, combined, its receive written; no NCCL{}), timed as steps of rank 0's "
                                     "sequence",
                                     n, to_string(opt.backend), placement(backends, opt), rep.collectives,
                                     why_host.empty() ? "" : ": " + why_host);
  rep.checks.clear();
  for (int r = 0; r < n; ++r) compare_outputs(r == 0 ? rep : reps[r], *expected, opt, r, &rep);
  return rep;
}

}  // namespace kdflow

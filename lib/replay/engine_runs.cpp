// engine_runs.cpp — the runs of the sequence (engine_internal.h): the checked, warm-up and timed
// eager runs with their markers and gate, graph and dag mode, and locating a failed step.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "engine_internal.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/support/io.h"

namespace kdflow::engine_detail {

/// Records the failure of a run that was not synchronised step by step: replay() then
/// re-runs synchronised (in a child process) to name the kernel.
Error Engine::unlocated(int run, const Fault& f, const std::string& what) {
  failed_run_ = run;
  if (f.sticky) abandon();
  return file_error(label(), fmt::format("{} failed in run {} of the sequence: {}", what, run, f.text),
                    ExitCode::Software);
}

Status Engine::host_copies_before(int run, size_t s) {
  Fault done;
  if (s > 0) {
    if (Status w = wait(s, [&] { return hung_step(first_unfinished()); }, &done); !w) return w;
    if (!done.ok()) return unlocated(run, done, "a kernel");
  }
  for (size_t c : copies_before_[s]) {
    const PlanHostCopy& h = plan_.host_copies[c];
    if (Fault f = b_.upload_ordered(bases_[h.allocation] + h.offset, h.data.data(), h.data.size()); !f.ok())
      return fail(f, fmt::format(" of host copy {} (node {}, {} bytes)", h.copy, h.node, h.data.size()));
  }
  return Status::ok();
}

/// Which step of an eager run is still running: the first whose end marker is not done.
Step Engine::first_unfinished() {
  for (size_t s = 0; s < seq_.size(); ++s) {
    Fault f;
    if (b_.poll(s + 1, &f) == Poll::NotReady) return seq_[s];
  }
  return seq_.empty() ? Step{} : seq_.back();
}

/// Queues one run of the sequence with a marker before it and after every step. Checked:
/// waits after each step (dumps, guard). Returns the fault and the step it came from.
Status Engine::queue_run(int run, bool checked, bool gated) {
  if (gated)
    if (Fault f = b_.hold_queue(); !f.ok()) return checked ? fail(f) : unlocated(run, f, f.api);
  if (Fault f = b_.record(0); !f.ok()) {
    if (gated) b_.release_queue();
    if (checked) return fail(f);
    return unlocated(run, f, f.api + " before the first kernel");
  }
  int depth = b_.caps().queue_depth;
  int queued = 0;
  for (size_t s = 0; s < seq_.size(); ++s) {
    const Step& st = seq_[s];
    if (!copies_before_.empty() && !copies_before_[s].empty())
      if (Status c = host_copies_before(run, s); !c) return c;
    Fault f = queue(st);
    if (f.ok()) f = b_.record(s + 1);
    if (!f.ok()) {
      if (gated) b_.release_queue();
      // The entry point that refused it (cuLaunchKernelEx for TVM 0.23+'s attributed launches).
      if (checked)
        return locate_or_fail(run, st, f,
                              st.call || f.api.rfind("cuLaunchKernel", 0) == 0 ? f.api : std::string("cuLaunchKernel"));
      return unlocated(run, f,
                       st.call ? fmt::format("queueing library call {} ({})", plan_.library_calls[st.index].call,
                                             plan_.library_calls[st.index].name)
                               : fmt::format("queueing kernel {} ({})", plan_.launches[st.index].kernel,
                                             plan_.launches[st.index].name));
    }
    if (checked) {
      Fault done;
      if (Status w = wait(s + 1, [&] { return hung_step(st); }, &done); !w) return w;
      if (!done.ok()) return locate_or_fail(run, st, done, "running");
      if (!opt_.locate && !st.call) {
        Expected<bool> fired = guard_fired(static_cast<int>(st.index));
        if (!fired) return fired.error();
        if (*fired) return Status::ok();  // memory is corrupt: report and stop
        if (!opt_.dump_dir.empty())
          if (Status d = dump(st.index); !d) return d;
        if (!opt_.compare_dir.empty() && run == 0)
          if (Status d = compare_with_dumps(st.index); !d) return d;
      }
      if (!opt_.locate && run == 0 && !opt_.node_checks.empty() && !rep_.guard) {
        int node = step_node(st);
        if (s + 1 == seq_.size() || step_node(seq_[s + 1]) != node)
          if (Status d = compare_node(node); !d) return d;
      }
      continue;
    }
    // An unchecked run longer than the launch queue would block inside a launch, where no
    // wait (and no time limit) runs: wait for the first half before queueing more.
    if (depth > 0 && !gated && ++queued >= depth / 2) {
      queued = 0;
      Fault done;
      if (Status w = wait(s + 1, [&] { return hung_step(first_unfinished()); }, &done); !w) return w;
      if (!done.ok()) return unlocated(run, done, "a kernel");
    }
  }
  if (gated) b_.release_queue();
  Fault done;
  size_t last = seq_.size();
  if (Status w = wait(last, [&] { return hung_step(first_unfinished()); }, &done); !w) return w;
  if (!done.ok()) {
    if (checked) return fail(done);
    return unlocated(run, done, "a kernel");
  }
  // Host copies after the last step (of the last node): made too, as the program makes them.
  if (last < copies_before_.size() && !copies_before_[last].empty())
    if (Status c = host_copies_before(run, last); !c) return c;
  return Status::ok();
}

/// The eager runs: run 0 checked (synchronised after each step), then warmup, then timed
/// runs queued back to back. With opt_.locate every run is synchronised.
Status Engine::eager() {
  size_t n = seq_.size();
  if (Status s = b_.make_markers(n + 1); !s) return s;
  if (!opt_.dump_dir.empty())
    if (Status s = ensure_dir(opt_.dump_dir); !s) return s;
  Capabilities caps = b_.caps();
  // Gate the timed runs when the back end can and a whole run fits in its launch queue (a
  // launch and a marker per step): else the host, blocked in a launch, could never release it.
  bool fits = caps.queue_depth <= 0 || 2 * n + 2 <= static_cast<size_t>(caps.queue_depth);
  // Host copies wait for the steps before them: a held queue would never start them. So do
  // collectives made on the host, and every collective waits for the other ranks to reach it.
  bool collectives = std::any_of(plan_.library_calls.begin(), plan_.library_calls.end(),
                                 [](const PlanLibraryCall& c) { return c.collective.has_value(); });
  bool gate = caps.gate && caps.asynchronous && !opt_.locate && fits && plan_.host_copies.empty() && !collectives;
  std::vector<std::vector<double>> samples(n);
  std::vector<double> runs_us, gated_runs_us;
  int runs = 1 + opt_.warmup + opt_.repeat;
  int forced_run = 0;  // the timed run (1-based) whose gate the back end opened at its deadline
  for (int run = 0; run < runs; ++run) {
    bool checked = run == 0 || opt_.locate;
    bool timed = run >= 1 + opt_.warmup && !opt_.locate;
    if (Status s = queue_run(run, checked, gate && timed); !s || rep_.guard) return s;
    if (gate && timed && b_.gate_opened_by_deadline()) {
      // Nothing was gated after all: every timed run counts as ungated, this one and the rest.
      forced_run = run - opt_.warmup;
      gate = false;
      runs_us.clear();
      gated_runs_us.clear();
    }
    double us = 0;
    if (!timed) {
      // Gated: the warm-up runs (ungated) give the end-to-end time a host loop achieves.
      if (gate && !checked) {
        if (Status s = elapsed(0, n, &us); !s) return s;
        runs_us.push_back(us);
      }
      continue;
    }
    if (Status s = elapsed(0, n, &us); !s) return s;
    (gate ? gated_runs_us : runs_us).push_back(us);
    for (size_t s = 0; s < n; ++s) {
      if (Status st = elapsed(s, s + 1, &us); !st) return st;
      samples[s].push_back(us);
    }
  }
  if (opt_.locate) return Status::ok();
  Expected<bool> fired = guard_fired(-1);
  if (!fired) return fired.error();
  rep_.times.clear();
  rep_.library_call_times.clear();
  rep_.kernel_sum_median_us = rep_.kernel_sum_min_us = 0;
  for (size_t s = 0; s < n; ++s) {
    KernelTime t;
    t.kernel = seq_[s].call ? plan_.library_calls[seq_[s].index].call : plan_.launches[seq_[s].index].kernel;
    t.samples = static_cast<int>(samples[s].size());
    t.median_us = median(samples[s]);
    t.min_us = minimum(samples[s]);
    if (seq_[s].call) {
      rep_.library_call_times.push_back(t);
      continue;
    }
    rep_.kernel_sum_median_us += t.median_us;
    rep_.kernel_sum_min_us += t.min_us;
    rep_.times.push_back(t);
  }
  rep_.eager_run_median_us = median(runs_us);
  rep_.eager_run_min_us = minimum(runs_us);
  rep_.gated = gate;
  rep_.gated_run_median_us = median(gated_runs_us);
  rep_.gated_run_min_us = minimum(gated_runs_us);
  rep_.total_median_us = rep_.kernel_sum_median_us;
  rep_.total_min_us = rep_.kernel_sum_min_us;
  std::string how = caps.timing ? "CUDA events" : fmt::format("host clock stamps ({} back end)", b_.name());
  if (gate)
    rep_.timing_method = fmt::format(
        "{} between steps queued back to back on one stream; each of the {} timed runs queued whole behind a gate "
        "(cuStreamWaitValue32 on a host-pinned word, released once the run is queued), so a step's time is its "
        "device time from the end of the step before it, not the host's enqueue rate; the eager end-to-end time "
        "is from the {} warm-up runs, not gated (launch overhead included){}; after 1 checked (synchronised, "
        "untimed) run",
        how, opt_.repeat, opt_.warmup, opt_.warmup ? "" : ": none, so it is not measured");
  else
    rep_.timing_method = fmt::format(
        "{} between launches queued back to back on one stream, one wait per run; {} timed runs after 1 "
        "checked (synchronised, untimed) and {} warm-up runs; not gated ({}), so a kernel's time includes any gap "
        "before it starts: on a GPU, short kernels measure the host's enqueue rate",
        how, opt_.repeat, opt_.warmup,
        forced_run ? fmt::format("the gate of timed run {} was opened by its deadline before the run was queued "
                                 "whole: the driver ran each launch before returning, as under a profiler such "
                                 "as ncu, so no run was gated",
                                 forced_run)
        : !caps.gate ? fmt::format("the {} back end has no gate", b_.name())
        : !plan_.host_copies.empty()
            ? fmt::format("the run copies data from the host between kernels {} times, each after the kernels "
                          "before it finish",
                          plan_.host_copies.size())
        : collectives ? "the ranks meet at every collective"
                      : fmt::format("a run of {} steps does not fit in the launch queue", n));
  if (!caps.asynchronous)
    rep_.timing_method += fmt::format("; the {} back end runs each step when it is queued, so the times are of "
                                      "the host, not of a GPU",
                                      b_.name());
  if (!plan_.library_calls.empty())
    rep_.timing_method += fmt::format("; the {} library calls are timed between their own markers (kernel times "
                                      "exclude them; the run's total includes them)",
                                      plan_.library_calls.size());
  return Status::ok();
}

Status Engine::elapsed(size_t from, size_t to, double* us) {
  Expected<double> e = b_.elapsed_us(from, to);
  if (!e) return e.error();
  *us = *e;
  return Status::ok();
}

/// A failure in a synchronised run names its step; in a locate run it is recorded.
Status Engine::locate_or_fail(int run, const Step& s, const Fault& f, const std::string& what) {
  if (opt_.locate) {
    (s.call ? located_call_ : located_launch_) = static_cast<int>(s.index);
    located_run_ = run;
    located_fault_ = f;
  }
  return step_fail(s, f, what);
}

/// The steps of the graph: a chain for --mode graph, the reduced dependencies for dag
/// (library calls also ordered among themselves: they share the back end's workspace).
std::vector<GraphStep> Engine::graph_steps(bool chain) {
  std::vector<GraphStep> out;
  if (chain) {
    // Host copies where the eager runs make them: before the step they precede.
    auto push = [&](bool call, bool copy, size_t index) {
      GraphStep g;
      g.library_call = call;
      g.host_copy = copy;
      g.index = index;
      if (!out.empty()) g.preds.push_back(out.size() - 1);
      out.push_back(std::move(g));
    };
    for (size_t s = 0; s <= seq_.size(); ++s) {
      if (s < copies_before_.size())
        for (size_t c : copies_before_[s]) push(false, true, c);
      if (s < seq_.size()) push(seq_[s].call, false, seq_[s].index);
    }
    return out;
  }
  StepGraph sg = step_graph(df_);
  std::map<int, size_t> launch_of, call_of, copy_of;
  for (size_t i = 0; i < plan_.launches.size(); ++i) launch_of[plan_.launches[i].kernel] = i;
  for (size_t c = 0; c < plan_.library_calls.size(); ++c) call_of[plan_.library_calls[c].call] = c;
  for (size_t c = 0; c < plan_.host_copies.size(); ++c) copy_of[plan_.host_copies[c].copy] = c;
  // Reachability, to add only the call → call edges no path already gives.
  std::vector<std::set<size_t>> reach(sg.steps.size());
  int last_call = -1;
  extra_edges_ = 0;
  for (size_t s = 0; s < sg.steps.size(); ++s) {
    GraphStep g;
    g.library_call = sg.steps[s].library_call;
    g.host_copy = sg.steps[s].host_copy;
    g.index = g.host_copy      ? copy_of.at(sg.steps[s].id)
              : g.library_call ? call_of.at(sg.steps[s].id)
                               : launch_of.at(sg.steps[s].id);
    for (int u : sg.preds[s]) g.preds.push_back(static_cast<size_t>(u));
    if (g.library_call && last_call >= 0) {
      bool reached = false;
      for (size_t p : g.preds) reached |= p == static_cast<size_t>(last_call) || reach[p].count(last_call);
      if (!reached) {
        g.preds.push_back(static_cast<size_t>(last_call));
        ++extra_edges_;
      }
    }
    for (size_t p : g.preds) {
      reach[s].insert(p);
      reach[s].insert(reach[p].begin(), reach[p].end());
    }
    if (g.library_call) last_call = static_cast<int>(s);
    out.push_back(std::move(g));
  }
  return out;
}

/// dag statistics on the steps (kernels and library calls, each weighted by its median
/// eager time): the longest chain of steps and the critical path.
void Engine::dag_stats(const std::vector<GraphStep>& steps) {
  std::map<int, double> kernel_us, call_us;
  for (const KernelTime& t : rep_.times) kernel_us[t.kernel] = t.median_us;
  for (const KernelTime& t : rep_.library_call_times) call_us[t.kernel] = t.median_us;
  std::vector<double> dist(steps.size(), 0);
  std::vector<int> chain(steps.size(), 0);
  size_t edges = 0;
  double best = 0;
  int longest = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    // A host copy weighs nothing here: its time is not measured (eager runs make it from
    // the host between steps).
    double w = steps[s].host_copy      ? 0.0
               : steps[s].library_call ? call_us[plan_.library_calls[steps[s].index].call]
                                       : kernel_us[plan_.launches[steps[s].index].kernel];
    double d = 0;
    int c = 0;
    for (size_t p : steps[s].preds) {
      d = std::max(d, dist[p]);
      c = std::max(c, chain[p]);
    }
    edges += steps[s].preds.size();
    dist[s] = d + w;
    chain[s] = c + 1;
    best = std::max(best, dist[s]);
    longest = std::max(longest, chain[s]);
  }
  rep_.dag_edges = edges;
  rep_.dag_longest_chain = longest;
  rep_.dag_critical_path_us = best;
}

/// Graph and dag modes, after the eager runs: build the graph, then `warmup` untimed and
/// `repeat` timed launches of it (the first one checked by the guard).
Status Engine::graph_mode() {
  Capabilities caps = b_.caps();
  bool dag = opt_.mode == ReplayMode::Dag;
  if ((dag && !caps.dag) || (!dag && !caps.graphs)) {
    log_ << fmt::format("replay: the {} back end has no {}; the eager runs above are what ran\n", b_.name(),
                        dag ? "concurrent dag" : "graph capture");
    rep_.timing_method += fmt::format("; --mode {}: the {} back end cannot, so only the eager runs were made",
                                      to_string(opt_.mode), b_.name());
    if (dag) dag_stats(graph_steps(false));
    return Status::ok();
  }
  std::vector<GraphStep> steps = graph_steps(!dag);
  if (Status s = b_.build_graph(steps, !dag); !s) return s;
  if (dag) {
    dag_stats(steps);
    StepGraph sg = step_graph(df_);
    log_ << fmt::format("replay: dag: {} launches, {} library calls, {}{} edges ({} dependent pairs before "
                        "reduction{}), longest chain {} steps\n",
                        plan_.launches.size(), plan_.library_calls.size(),
                        plan_.host_copies.empty() ? std::string()
                                                  : fmt::format("{} host copies, ", plan_.host_copies.size()),
                        rep_.dag_edges, sg.dependency_pairs,
                        extra_edges_ ? fmt::format("; {} added to keep library calls in sequence", extra_edges_)
                                     : std::string(),
                        rep_.dag_longest_chain);
  }
  if (Status s = b_.make_markers(2); !s) return s;
  std::vector<double> samples;
  auto hung = [&] {
    return file_error(label(), fmt::format("a graph launch did not finish within {:g} s (--time-limit); a kernel "
                                           "may be hung (replay with --mode eager to name it); nothing was written",
                                           opt_.time_limit_s),
                      ExitCode::DataError);
  };
  for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
    Fault f = b_.record(0);
    if (f.ok()) f = b_.launch_graph();
    if (f.ok()) f = b_.record(1);
    Fault done;
    if (f.ok())
      if (Status s = wait(1, hung, &done); !s) return s;
    if (!f.ok() || !done.ok())
      return unlocated(1 + opt_.warmup + opt_.repeat + run, !f.ok() ? f : done,
                       fmt::format("{} launch", to_string(opt_.mode)));
    if (run == 0) {
      Expected<bool> fired = guard_fired(-1);
      if (!fired) return fired.error();
      if (*fired) return Status::ok();
      continue;
    }
    if (run < 1 + opt_.warmup) continue;
    double us = 0;
    if (Status s = elapsed(0, 1, &us); !s) return s;
    samples.push_back(us);
  }
  rep_.graph_run_median_us = median(samples);
  rep_.graph_run_min_us = minimum(samples);
  rep_.total_median_us = rep_.graph_run_median_us;
  rep_.total_min_us = rep_.graph_run_min_us;
  rep_.timing_method += fmt::format("; then the {} as one {} graph: {} timed launches after 1 checked and {} "
                                    "warm-up, each between two markers",
                                    dag ? "dependency DAG" : "captured sequence", b_.name(), opt_.repeat,
                                    opt_.warmup);
  return Status::ok();
}

}  // namespace kdflow::engine_detail

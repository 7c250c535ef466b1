// engine_slices.cpp — --kernel (one kernel, its inputs from dumps) and --nodes (a slice of the
// sequence, its live-ins from dumps) (engine_internal.h).
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

/// --kernel: restore the state of every allocation the kernel touches as it was just
/// before it ran in the full run that wrote `dump_dir`, run it alone, read back what it
/// writes and compare with what it wrote in that run.
Status Engine::single_kernel() {
  size_t k = 0;
  while (k < plan_.launches.size() && plan_.launches[k].kernel != opt_.kernel) ++k;
  const PlanLaunch& target = plan_.launches[k];
  std::set<int> touched;
  for (const PlanArg& a : target.args)
    if (a.kind == PlanArg::Kind::Pointer) touched.insert(a.allocation);
  for (int al : touched)
    if (Fault f = b_.memset(bases_[al], 0, plan_.allocations[al].bytes); !f.ok()) return fail(f);
  for (const PlanUpload& u : plan_.uploads)
    if (touched.count(u.allocation))
      if (Status s = upload(u); !s) return s;
  size_t restored = 0;
  for (size_t i = 0; i < k; ++i) {
    const PlanLaunch& l = plan_.launches[i];
    for (size_t j : written_args(i)) {
      const PlanArg& a = l.args[j];
      if (!touched.count(a.allocation)) continue;
      std::string file = opt_.dump_dir + "/" + dump_file_name(df_.kernels[l.kernel], j);
      Expected<NpyArray> arr = read_npy(file);
      if (!arr) {
        Error e = arr.error();
        if (e.code == ExitCode::NoInput)
          e.message += " (--kernel restores buffers from the dumps of a full run: replay with --dump-dir first)";
        return e;
      }
      NpyArray want = buffer_array(df_.buffers[a.buffer], "");
      if (arr->dtype != want.dtype || arr->shape != want.shape)
        return file_error(file, fmt::format("dump does not match buffer {} '{}' ({} {} expected)", a.buffer,
                                            df_.buffers[a.buffer].name, dtype_to_string(want.dtype),
                                            shape_text(want.shape)));
      if (Fault f = b_.upload(bases_[a.allocation], arr->data.data(), arr->data.size()); !f.ok())
        return fail(f, " of " + file);
      ++restored;
    }
  }
  log_ << fmt::format("replay: kernel {} ({}) alone: {} allocations restored from {} dumps and {} uploads\n",
                      target.kernel, target.name, touched.size(), restored,
                      std::count_if(plan_.uploads.begin(), plan_.uploads.end(),
                                    [&](const PlanUpload& u) { return touched.count(u.allocation) > 0; }));
  if (Status s = settle(); !s) return s;
  if (Status s = b_.make_markers(2); !s) return s;
  std::vector<double> samples;
  for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
    Fault f = b_.record(0);
    if (f.ok()) f = b_.launch(k);
    if (f.ok()) f = b_.record(1);
    if (!f.ok()) return kernel_fail(k, f, fmt::format("queueing (run {})", run));
    Fault done;
    if (Status s = wait(1, [&] { return hung_kernel(k); }, &done); !s) return s;
    if (!done.ok()) return kernel_fail(k, done, fmt::format("running (run {})", run));
    if (run == 0) {
      Expected<bool> fired = guard_fired(static_cast<int>(k));
      if (!fired) return fired.error();
      if (*fired) return Status::ok();
      for (size_t j : written_args(k)) {
        Expected<NpyArray> a = read_buffer(target.args[j].buffer);
        if (!a) return a.error();
        rep_.results.push_back(a.take());
        rep_.result_names.push_back(dump_file_name(df_.kernels[target.kernel], j));
        rep_.result_buffers.push_back(target.args[j].buffer);
      }
      continue;
    }
    if (run <= opt_.warmup) continue;
    double us = 0;
    if (Status s = elapsed(0, 1, &us); !s) return s;
    samples.push_back(us);
  }
  KernelTime t;
  t.kernel = target.kernel;
  t.samples = static_cast<int>(samples.size());
  t.median_us = median(samples);
  t.min_us = minimum(samples);
  rep_.times.push_back(t);
  rep_.total_median_us = rep_.kernel_sum_median_us = t.median_us;
  rep_.total_min_us = rep_.kernel_sum_min_us = t.min_us;
  rep_.timing_method = fmt::format("{} around the kernel alone; {} timed runs after 1 checked and {} warm-up",
                                   b_.caps().timing ? "CUDA events" : "host clock stamps", opt_.repeat,
                                   opt_.warmup);
  return Status::ok();
}

/// --nodes: load the slice's live-ins (params/inputs from their files, the rest from the
/// dumps of a full run), run its kernels, compare every buffer they write with the dump.
Status Engine::run_slice() {
  LaunchSlice sl = slice_launches(df_, opt_.slice_first, opt_.slice_last);
  rep_.slice_kernels = sl.kernels;
  rep_.slice_live_ins = sl.live_ins;
  std::vector<size_t> launches;
  for (size_t i = 0; i < plan_.launches.size(); ++i)
    if (plan_.launches[i].kernel >= opt_.slice_first && plan_.launches[i].kernel <= opt_.slice_last)
      launches.push_back(i);
  size_t from_files = 0, from_dumps = 0, undefined = 0;
  for (size_t li = 0; li < sl.live_ins.size(); ++li) {
    int b = sl.live_ins[li], w = sl.live_in_writer[li];
    int al = plan_.buffer_allocation[b];
    if (w < 0) {
      bool found = false;
      for (const PlanUpload& u : plan_.uploads)
        if (u.buffer == b) {
          if (Status s = upload(u); !s) return s;
          found = true;
        }
      if (found) ++from_files;
      else ++undefined;  // never written before the slice: its contents are undefined in TVM too
      continue;
    }
    const Kernel& wk = df_.kernels[w];
    size_t j = 0;
    while (j < wk.args.size() && !(wk.args[j].kind == Arg::Kind::Buffer && wk.args[j].buffer == b &&
                                   wk.args[j].access != Access::Read))
      ++j;
    std::string file = opt_.inputs_from + "/" + dump_file_name(wk, j);
    if (!file_exists(file))
      return file_error(file, fmt::format("missing live-in: buffer {} '{}' is read by the slice before it writes "
                                          "it, and kernel {} ({}) wrote it last; replay the whole model with "
                                          "--dump-dir {} first",
                                          b, df_.buffers[b].name, w, wk.name, opt_.inputs_from),
                        ExitCode::NoInput);
    Expected<NpyArray> arr = read_npy(file);
    if (!arr) return arr.error();
    NpyArray want = buffer_array(df_.buffers[b], "");
    if (arr->dtype != want.dtype || arr->shape != want.shape)
      return file_error(file, fmt::format("dump does not match buffer {} '{}' ({} {} expected): a dump of another "
                                          "model?",
                                          b, df_.buffers[b].name, dtype_to_string(want.dtype),
                                          shape_text(want.shape)));
    if (Fault f = b_.upload(bases_[al], arr->data.data(), arr->data.size()); !f.ok()) return fail(f, " of " + file);
    ++from_dumps;
  }
  log_ << fmt::format("replay: kernels {}..{} ({} launches): {} live-in buffers, {} from params/inputs, {} from "
                      "dumps, {} never written before the slice\n",
                      opt_.slice_first, opt_.slice_last, launches.size(), sl.live_ins.size(), from_files, from_dumps,
                      undefined);
  if (Status s = settle(); !s) return s;
  size_t n = launches.size();
  if (Status s = b_.make_markers(n + 1); !s) return s;
  std::vector<std::vector<double>> samples(n);
  for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
    bool checked = run == 0;
    if (Fault f = b_.record(0); !f.ok()) return fail(f);
    for (size_t x = 0; x < n; ++x) {
      size_t i = launches[x];
      Fault f = b_.launch(i);
      if (f.ok()) f = b_.record(x + 1);
      if (!f.ok()) return kernel_fail(i, f, fmt::format("queueing (run {})", run));
      if (!checked) continue;
      Fault done;
      if (Status s = wait(x + 1, [&] { return hung_kernel(i); }, &done); !s) return s;
      if (!done.ok()) return kernel_fail(i, done, "running");
      for (size_t j : written_args(i)) {
        Expected<OutputCheck> c = check_against_dump(i, j, opt_.inputs_from);
        if (!c) return c.error();
        c->output = static_cast<int>(rep_.checks.size());
        rep_.checks.push_back(std::move(*c));
      }
    }
    if (!checked) {
      Fault done;
      if (Status s = wait(n, [&] { return hung_kernel(launches[n - 1]); }, &done); !s) return s;
      if (!done.ok()) return fail(done, fmt::format(" (run {} of the slice)", run));
    }
    if (run < 1 + opt_.warmup) continue;
    for (size_t x = 0; x < n; ++x) {
      double us = 0;
      if (Status s = elapsed(x, x + 1, &us); !s) return s;
      samples[x].push_back(us);
    }
  }
  for (size_t x = 0; x < n; ++x) {
    KernelTime t;
    t.kernel = plan_.launches[launches[x]].kernel;
    t.samples = static_cast<int>(samples[x].size());
    t.median_us = median(samples[x]);
    t.min_us = minimum(samples[x]);
    rep_.kernel_sum_median_us += t.median_us;
    rep_.kernel_sum_min_us += t.min_us;
    rep_.times.push_back(t);
  }
  rep_.total_median_us = rep_.kernel_sum_median_us;
  rep_.total_min_us = rep_.kernel_sum_min_us;
  rep_.timing_method = fmt::format("the slice's launches queued back to back, {} between them; {} timed "
                                   "runs after 1 checked and {} warm-up",
                                   b_.caps().timing ? "CUDA events" : "host clock stamps", opt_.repeat, opt_.warmup);
  return Status::ok();
}

}  // namespace kdflow::engine_detail

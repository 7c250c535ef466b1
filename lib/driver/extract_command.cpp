// extract_command.cpp — `kdflow extract` as a command: options to the front end, the IR to
// the chosen emitter, the file written; progress and diagnostics on stderr. (Split out of the
// pipeline, frontend/extract.cpp, code unchanged: front ends never print.)
#include <unistd.h>

#include <ostream>

#include <fmt/format.h>

#include "kdflow/analysis/bounds.h"
#include "kdflow/analysis/launch_limits.h"
#include "kdflow/analysis/time_model.h"
#include "kdflow/analysis/costs.h"
#include "kdflow/analysis/dependencies.h"
#include "kdflow/driver/commands.h"
#include "kdflow/driver/view.h"
#include "kdflow/emit/emit.h"
#include "kdflow/emit/emit_chakra.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/support/io.h"
#include "kdflow/support/stage_times.h"

namespace kdflow {
void report_warnings(const Dataflow& df, std::ostream& err) {
  for (const std::string& w : access_warnings(df)) err << w << "\n";
  err.flush();
}

int report(const Error& e, std::ostream& err) {
  err << e.message << "\n";
  err.flush();
  return static_cast<int>(e.code);
}


int run_extract_command(const ExtractCommand& cmd, std::ostream& err) {
  Expected<Format> format = !cmd.format.empty() ? format_from_name(cmd.format)
                            : cmd.output == "-" ? Expected<Format>(Format::Json)
                                                : format_from_path(cmd.output);
  if (!format) return report(format.error(), err);
  const DotOptions plain_dot;
  if (*format != Format::Dot &&
      (cmd.dot.cluster != plain_dot.cluster || cmd.dot.collapse != plain_dot.collapse ||
       cmd.dot.op_colors != plain_dot.op_colors || cmd.dot.buffers != plain_dot.buffers))
    return report(Error{"kdflow extract: error: --cluster, --collapse, --op-colors and --no-buffers apply to DOT "
                        "output only (--format dot, or -o FILE.dot)",
                        ExitCode::Usage},
                  err);

  if (*format != Format::Chakra && (!cmd.timing.empty() || !cmd.roofline.empty()))
    return report(Error{"kdflow extract: error: --timing and --roofline apply to Chakra output only "
                        "(--format chakra, or -o FILE.et)",
                        ExitCode::Usage},
                  err);
  if (*format != Format::Chakra && *format != Format::Json && !cmd.time_model.empty())
    return report(Error{"kdflow extract: error: --time-model applies to JSON and Chakra output only", ExitCode::Usage},
                  err);
  const std::string time_model = cmd.time_model.empty() && *format == Format::Chakra ? "h100" : cmd.time_model;
  const GpuArch* predict_on = nullptr;
  if (!time_model.empty() && time_model != "none" && !(predict_on = find_gpu_arch(time_model)))
    return report(Error{"kdflow extract: error: unknown --time-model device " + time_model + " (h100, h200, a100, l4 or none)",
                        ExitCode::Usage},
                  err);
  // Chakra durations: measured, else predicted from code on --time-model's device (default), or
  // with --roofline the roofline bound on its device.
  const DeviceSpec* chakra_device = nullptr;
  const bool roofline_durations = !cmd.roofline.empty();
  if (*format == Format::Chakra) {
    if (!chakra_available()) return report(emit_chakra(Dataflow{}, CostReport{}, "").error(), err);
    if (roofline_durations) {
      if (cmd.roofline != "none" && !(chakra_device = find_device_spec(cmd.roofline)))
        return report(Error{"kdflow extract: error: unknown --roofline device " + cmd.roofline +
                                " (h100, h200, a100, l4, rtx4090 or none)",
                            ExitCode::Usage},
                      err);
    } else if (predict_on) {
      chakra_device = find_device_spec(predict_on->id);
    }
  }

  if (*format == Format::Html && !view_available()) return report(emit_view_html(Dataflow{}, ViewFacts{}).error(), err);

  Expected<ExtractInputs> in = resolve_extract_inputs(cmd.inputs);
  if (!in) return report(in.error(), err);
  if (cmd.output != "-") {
    if (!cmd.timing.empty() && same_file(cmd.timing, cmd.output))
      return report(Error{file_error(cmd.output, "the output would overwrite an input file").message, ExitCode::Usage},
                    err);
    for (const std::string* p :
         {&in->graph, &in->host, &in->meta, &in->params, &in->device, &in->relay, &in->library, &in->vm_exec}) {
      if (!p->empty() && same_file(*p, cmd.output))
        return report(Error{file_error(cmd.output, "the output would overwrite an input file").message, ExitCode::Usage},
                      err);
    }
  }

  TerminalProgress progress;
  progress.err = &err;
  progress.enabled = progress_wanted(cmd.quiet);
  StageTimes stage_times;
  if (cmd.stage_times) in->stage_times = &stage_times;
  Expected<Dataflow> df = extract(*in, InterpreterLimits{}, print_terminal_progress, &progress);
  if (!df) return report(df.error(), err);
  report_warnings(*df, err);

  // The bounds verdict: an argument proven out of bounds is an error unless --allow-oob; so is a
  // launch CUDA refuses (launch_limits.h: a block over 1024 threads or 64 in z, a grid over 65,535
  // in y or z, dynamic shared memory over 227 KiB), which replay would refuse later.
  BoundsSummary bounds = summarize_bounds(*df);
  std::vector<std::string> refused;
  for (const Kernel& k : df->kernels)
    if (std::optional<LaunchLimitViolation> v = launch_limit_violation(k)) refused.push_back(launch_limit_report(*df, k, *v));
  // A progress line: on a terminal only, and not with -q (scripts get the counts from show).
  if (progress.enabled && !df->sources.device.empty() && !in->no_footprints)
    err << "kdflow: footprints: " << bounds_summary_line(bounds) << "\n";
  if ((!bounds.violations.empty() || !refused.empty()) && !cmd.allow_oob) {
    const bool launch = !refused.empty();
    const std::vector<std::string>& all = launch ? refused : bounds.violations;
    const size_t more = refused.size() + bounds.violations.size() - 1;
    return report(Error{fmt::format("kdflow extract: error: {}{}{}", launch ? "" : "out of bounds: ", all.front(),
                                    more > 0 ? fmt::format(" (and {} more; --allow-oob to write the graph anyway)", more)
                                             : std::string(" (--allow-oob to write the graph anyway)")),
                        ExitCode::DataError},
                  err);
  }
  for (const std::string& v : refused) err << "kdflow extract: warning: " << v << "\n";
  for (const std::string& v : bounds.violations) err << "kdflow extract: warning: out of bounds: " << v << "\n";

  // JSON with --time-model: each kernel's predicted_us on that device (docs/costs.md, "Time from code").
  if (*format == Format::Json && predict_on) {
    df->predicted_on = predict_on->id;
    for (Kernel& k : df->kernels)
      if (std::optional<KernelPrediction> p = predict_kernel(*df, k, *predict_on)) k.predicted_us = p->us;
  }

  std::optional<StageSpan> emit_span(std::in_place, cmd.stage_times ? &stage_times : nullptr, "emit and write the output");
  std::string text;
  bool written = false;  // Chakra traces of several ranks write their own files
  switch (*format) {
    case Format::Json: text = emit_json(*df); break;
    case Format::Dot: text = emit_dot(*df, cmd.dot); break;
    case Format::Text: text = emit_text(*df); break;
    case Format::Html: {
      // The page `kdflow view` writes, with the H100 roofline and no measured times.
      const CostReport costs = compute_costs(*df, find_device_spec("h100"), nullptr);
      std::string s = cmd.inputs.dir.empty() ? in->graph : cmd.inputs.dir;
      while (s.size() > 1 && s.back() == '/') s.pop_back();
      Expected<std::string> page = emit_view_html(*df, view_facts(*df, &costs, base_name(s)));
      if (!page) return report(page.error(), err);
      text = page.take();
      break;
    }
    case Format::Chakra: {
      std::optional<KernelTimes> times;
      if (!cmd.timing.empty()) {
        Expected<std::string> t = read_file(cmd.timing, 256ull << 20);
        if (!t) return report(t.error(), err);
        Expected<KernelTimes> kt = read_replay_timing(*t, cmd.timing, *df);
        if (!kt) return report(kt.error(), err);
        times = kt.take();
      }
      std::string model = base_name(cmd.inputs.dir.empty() ? in->graph : cmd.inputs.dir);
      Expected<std::vector<std::string>> traces = emit_chakra(*df, compute_costs(*df, chakra_device, times ? &*times : nullptr), model,
                                                                 roofline_durations);
      if (!traces) return report(traces.error(), err);
      const int ranks = static_cast<int>(traces->size());
      if (ranks == 1) {
        text = std::move(traces->front());
        break;
      }
      // One trace per rank, named as ASTRA-sim's --workload-configuration=PREFIX reads them.
      if (cmd.output == "-")
        return report(Error{fmt::format("kdflow extract: error: a flow of {} ranks is one Chakra trace per rank: give "
                                        "-o PREFIX.et to write PREFIX.0.et ... PREFIX.{}.et",
                                        ranks, ranks - 1),
                            ExitCode::Usage},
                      err);
      for (int r = 0; r < ranks; ++r)
        if (Status s = write_file_atomic(chakra_rank_path(cmd.output, r, ranks), (*traces)[static_cast<size_t>(r)]); !s)
          return report(s.error(), err);
      written = true;
      break;
    }
  }
  if (!written)
    if (Status s = write_file_atomic(cmd.output, text); !s) return report(s.error(), err);
  emit_span.reset();
  if (cmd.stage_times) {
    err << format_stage_times(stage_times);
    err.flush();
  }
  return 0;
}

}  // namespace kdflow

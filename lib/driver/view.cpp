// view.cpp — `kdflow view`: the input loaded as `show` loads it, the summary `show` prints,
// the costs (with measured times from --timing or --profile), then the page or Model
// Explorer's JSON written like every output (write_output: never replaces anything but a
// regular file it was asked to write).
#include "kdflow/driver/view.h"

#include <ostream>

#include <fmt/format.h>

#include "kdflow/analysis/costs.h"
#include "kdflow/driver/commands.h"
#include "kdflow/driver/show.h"
#include "kdflow/formats/profile_csv.h"
#include "kdflow/support/io.h"

namespace kdflow {
namespace {

std::string bytes_text(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (1ull << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < (1ull << 30)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

std::string count_text(double v) {
  if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.2f} k", v / 1e3);
  return fmt::format("{}", v);
}

std::string model_title(const std::string& input) {
  std::string s = input;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  std::string name = base_name(s);
  if (name == "model.so" || (name.size() > 5 && name.substr(name.size() - 5) == ".json")) {
    const size_t slash = s.find_last_of('/');
    if (name == "model.so" && slash != std::string::npos && slash > 0) name = base_name(s.substr(0, slash));
    else if (name != "model.so") name = name.substr(0, name.size() - 5);
  }
  return name;
}

}  // namespace

ViewFacts view_facts(const Dataflow& df, const CostReport* costs, const std::string& title) {
  ViewFacts f;
  f.title = title;
  f.costs = costs;
  const FlowSummary s = summarize(df);
  f.summary.push_back({"launches", std::to_string(s.kernels)});
  if (s.library_calls) f.summary.push_back({"library calls", std::to_string(s.library_calls)});
  f.summary.push_back({"nodes", fmt::format("{} ({} functions)", s.nodes, s.function_nodes)});
  f.summary.push_back({"buffers", fmt::format("{} ({} workspaces)", s.buffers, s.workspaces)});
  f.summary.push_back({"peak memory", s.peak_kernel >= 0 ? fmt::format("{} at launch {}", bytes_text(s.peak_bytes),
                                                                       s.peak_kernel)
                                                         : bytes_text(s.peak_bytes)});
  if (s.peak_activation_kernel >= 0)
    f.summary.push_back({"peak activations", fmt::format("{} at launch {}", bytes_text(s.peak_activation_bytes),
                                                         s.peak_activation_kernel)});
  f.summary.push_back({"storage", fmt::format("{} in {} storage ids", bytes_text(s.storage_bytes), s.storage_ids)});
  f.summary.push_back({"params", bytes_text(s.param_bytes)});
  f.summary.push_back({"workspaces", bytes_text(s.workspace_bytes)});
  if (costs) {
    double flops = 0, bytes = 0, measured = 0;
    size_t with_flops = 0, timed = 0;
    for (const KernelCost& k : costs->kernels) {
      if (k.flops || (k.counted && k.counted->flops)) {
        flops += static_cast<double>(k.flops ? *k.flops : *k.counted->flops);
        ++with_flops;
      }
      bytes += static_cast<double>(k.bytes);
      if (k.measured) {
        measured += k.measured->us;
        ++timed;
      }
    }
    f.summary.push_back({"FLOPs", fmt::format("{} ({} of {} launches known)", count_text(flops), with_flops,
                                              costs->kernels.size())});
    f.summary.push_back({"bytes", bytes_text(static_cast<uint64_t>(bytes))});
    if (timed) f.summary.push_back({"measured", fmt::format("{:.1f} µs ({} launches)", measured, timed)});
  }
  return f;
}

int run_view_command(const ViewCommand& cmd, std::ostream& err) {
  std::string format = cmd.format;
  if (format.empty()) {
    Expected<Format> f = format_from_path(cmd.output);
    format = f && *f == Format::Json ? "model-explorer" : "html";
  }
  if (format != "html" && format != "model-explorer")
    return report(Error{"kdflow view: error: unknown --format " + format + " (html or model-explorer)", ExitCode::Usage},
                  err);
  if (!cmd.timing.empty() && !cmd.profile.empty())
    return report(Error{"kdflow view: error: --timing and --profile both give measured times: pass one",
                        ExitCode::Usage},
                  err);
  const DeviceSpec* device = nullptr;
  if (cmd.device != "none" && !(device = find_device_spec(cmd.device)))
    return report(Error{"kdflow view: error: unknown --roofline device " + cmd.device + " (h100, h200, a100, l4, rtx4090 or none)",
                        ExitCode::Usage},
                  err);
  if (format == "html" && !view_available()) return report(emit_view_html(Dataflow{}, ViewFacts{}).error(), err);
  if (cmd.output != "-")
    for (const std::string* p : {&cmd.inputs.dir, &cmd.timing, &cmd.profile})
      if (!p->empty() && same_file(*p, cmd.output))
        return report(Error{file_error(cmd.output, "the output would overwrite an input file").message, ExitCode::Usage},
                      err);

  TerminalProgress progress;
  progress.err = &err;
  progress.enabled = progress_wanted(cmd.quiet);
  Expected<Dataflow> df = load_dataflow(cmd.inputs, print_terminal_progress, &progress);
  if (!df) return report(df.error(), err);
  report_warnings(*df, err);

  std::optional<KernelTimes> times;
  std::string source;
  if (!cmd.timing.empty()) {
    Expected<std::string> text = read_file(cmd.timing, 256ull << 20);
    if (!text) return report(text.error(), err);
    Expected<KernelTimes> t = read_replay_timing(*text, cmd.timing, *df);
    if (!t) return report(t.error(), err);
    times = t.take();
  } else if (!cmd.profile.empty()) {
    Expected<std::string> text = read_file(cmd.profile, kMaxCsvBytes);
    if (!text) return report(text.error(), err);
    Expected<Profile> p = read_profile_csv(*text, cmd.profile);
    if (!p) return report(p.error(), err);
    ProfileJoin join = join_profile(*df, *p);
    report_profile_join(*p, join, "view", true, err);
    times = profile_times(*df, *p, join);
  }
  const CostReport costs = compute_costs(*df, device, times ? &*times : nullptr);
  ViewFacts facts = view_facts(*df, &costs, model_title(cmd.inputs.dir));
  if (times) facts.measured_source = times->source;

  std::string text;
  if (format == "model-explorer") {
    text = emit_model_explorer(*df, facts);
  } else {
    Expected<std::string> page = emit_view_html(*df, facts);
    if (!page) return report(page.error(), err);
    text = page.take();
  }
  if (Status s = write_output(cmd.output, text); !s) return report(s.error(), err);
  return 0;
}

}  // namespace kdflow

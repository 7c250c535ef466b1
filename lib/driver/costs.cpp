// costs.cpp — `kdflow costs` (costs_command.h): loads each model, joins its measured times,
// computes the costs (core, costs.h) and renders the table here or the dataset (emit_costs.h).
#include "kdflow/driver/costs_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <ostream>
#include <set>

#include "kdflow/driver/commands.h"
#include "kdflow/analysis/costs.h"
#include "kdflow/emit/emit_costs.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/support/io.h"
#include "kdflow/formats/profile_csv.h"
#include "kdflow/driver/show.h"

namespace kdflow {
namespace {

constexpr uint64_t kMaxSideFileBytes = 256ull << 20;

Error usage_error(const std::string& msg) { return Error{"kdflow costs: error: " + msg, ExitCode::Usage}; }

/// The model's name in the dataset: the input's last path component, without ".json"/".so".
std::string model_name(const std::string& path) {
  std::string b = base_name(path);
  for (const char* ext : {".json", ".so"}) {
    std::string e(ext);
    if (b.size() > e.size() && b.compare(b.size() - e.size(), e.size(), e) == 0) b.resize(b.size() - e.size());
  }
  return b;
}

/// Key attributes of an op for the table (everything is in the dataset).
std::string op_label(const RelayOp& op) {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"kernel_size", "k"}, {"pool_size", "k"}, {"strides", "s"}, {"padding", "p"}, {"dilation", "d"},
      {"groups", "g"}, {"channels", "c"}, {"units", "u"}, {"axis", "axis"},
      {"transpose_a", "ta"}, {"transpose_b", "tb"}};
  std::string name = op.name.rfind("nn.", 0) == 0 ? op.name.substr(3) : op.name;
  std::vector<std::string> parts;
  for (const auto& [key, short_name] : keys) {
    for (const RelayAttr& a : op.attrs) {
      if (a.key != key) continue;
      std::string v;
      if (a.kind == RelayAttr::Kind::Ints) {
        bool same = std::all_of(a.ints.begin(), a.ints.end(), [&](int64_t x) { return x == a.ints[0]; });
        if (same && !a.ints.empty() && key != "axis") v = std::to_string(a.ints[0]);
        else v = fmt::format("{}", fmt::join(a.ints, "x"));
      } else if (a.kind == RelayAttr::Kind::Int) {
        v = std::to_string(a.ints[0]);
      } else if (a.kind == RelayAttr::Kind::Bool) {
        if (a.ints[0]) v = "1";
        else continue;
      } else {
        continue;
      }
      parts.push_back(short_name + v);
    }
  }
  return parts.empty() ? name : name + "(" + fmt::format("{}", fmt::join(parts, " ")) + ")";
}

std::string short_function(const std::string& f) {
  std::string s = f;
  for (const char* prefix : {"tvmgen_default_fused_", "tvmgen_default_", "fused_"})
    if (s.rfind(prefix, 0) == 0) {
      s = s.substr(std::string(prefix).size());
      break;
    }
  return s.size() > 34 ? s.substr(0, 31) + "..." : s;
}

/// A number for the table: three significant digits, never an exponent below 10^9.
std::string num(std::optional<double> v) {
  if (!v) return "-";
  double x = *v;
  if (x == 0) return "0";
  if (x >= 1e9 || x < 1e-4) return fmt::format("{:.3g}", x);
  if (x >= 100) return fmt::format("{:.0f}", x);
  if (x >= 10) return fmt::format("{:.1f}", x);
  if (x >= 1) return fmt::format("{:.2f}", x);
  return fmt::format("{:.3g}", x);
}

/// Counted FLOPs for the table: MFLOP, "≤" before an upper bound, "?" when unknown, "-" when not analyzed.
std::string counted_text(const std::optional<CountedFlops>& c) {
  if (!c) return "-";
  if (!c->flops) return "?";
  return (c->status == "upper bound" ? "≤" : "") + num(static_cast<double>(*c->flops) / 1e6);
}

std::string render_table(const std::string& model, const Dataflow& df, const CostReport& r, const DeviceSpec* dev,
                         bool per_kernel) {
  std::string out;
  out += fmt::format("{}: {} function nodes, {} kernels", model, r.functions.size(), df.kernels.size());
  if (dev)
    out += fmt::format(" on {} (FP32 {:g} TFLOP/s, FP16/BF16 tensor {:g} TFLOP/s, DRAM {:g} GB/s)", dev->name,
                       dev->fp32_tflops, dev->fp16_tensor_tflops, dev->dram_gbps);
  out += "\n";
  std::vector<std::vector<std::string>> rows;
  if (!per_kernel) {
    rows.push_back({"node", "function", "relay ops", "output", "MFLOP", "code MFLOP", "code/formula", "KB", "FLOP/B",
                    "bound us", "predicted us", "measured us", "of bound"});
    for (const FunctionCost& f : r.functions) {
      const Node& n = df.nodes[static_cast<size_t>(f.node)];
      std::vector<std::string> ops;
      for (const RelayOp& op : n.relay_ops) ops.push_back(op_label(op));
      std::string outs;
      for (int b : n.outputs) {
        const Buffer& buf = df.buffers[static_cast<size_t>(b)];
        outs += (outs.empty() ? "" : " ") + buf.dtype + fmt::format("[{}]", fmt::join(buf.shape, ","));
      }
      std::optional<double> mflop = f.flops ? std::optional<double>(static_cast<double>(*f.flops) / 1e6) : std::nullopt;
      std::string flops = f.flops ? num(mflop) : (f.flops_known ? ">=" + num(static_cast<double>(f.flops_known) / 1e6) : "-");
      std::optional<double> frac;
      if (f.bound && f.measured && f.measured->us > 0) frac = f.bound->us() / f.measured->us;
      std::optional<uint64_t> used = f.flops ? f.flops : f.counted ? f.counted->flops : std::nullopt;
      std::optional<double> ratio = counted_ratio(f);
      rows.push_back({"n" + std::to_string(n.id), short_function(n.function),
                      ops.empty() ? "-" : fmt::format("{}", fmt::join(ops, " + ")), outs, flops, counted_text(f.counted),
                      ratio ? fmt::format("{:.3f}", *ratio) : "-",
                      num(static_cast<double>(f.bytes) / 1e3), num(intensity(used, f.bytes)),
                      f.bound ? num(f.bound->us()) : "-", f.predicted_us ? num(*f.predicted_us) : "-",
                      f.measured ? num(f.measured->us) : "-",
                      frac ? fmt::format("{:.1f}%", *frac * 100) : "-"});
    }
  } else {
    rows.push_back({"kernel", "node", "name", "grid", "block", "MFLOP", "code MFLOP", "KB", "FLOP/B", "bound us",
                    "predicted us", "limiter", "measured us", "of bound"});
    for (const KernelCost& c : r.kernels) {
      const Kernel& k = df.kernels[static_cast<size_t>(c.kernel)];
      std::optional<double> frac;
      if (c.bound && c.measured && c.measured->us > 0) frac = c.bound->us() / c.measured->us;
      std::string name = k.name.size() > 40 ? k.name.substr(0, 37) + "..." : k.name;
      rows.push_back({"k" + std::to_string(k.id), "n" + std::to_string(k.node), name,
                      fmt::format("{}", fmt::join(k.grid, ",")), fmt::format("{}", fmt::join(k.block, ",")),
                      c.flops ? num(static_cast<double>(*c.flops) / 1e6) : "-", counted_text(c.counted),
                      num(static_cast<double>(c.bytes) / 1e3),
                      num(intensity(c.flops ? c.flops : c.counted ? c.counted->flops : std::nullopt, c.bytes)), c.bound ? num(c.bound->us()) : "-",
                      c.predicted ? (c.predicted->source == "code" ? "" : "≥") + num(c.predicted->us) : "-",
                      c.predicted ? c.predicted->limiter : "-",
                      c.measured ? num(c.measured->us) : "-", frac ? fmt::format("{:.1f}%", *frac * 100) : "-"});
    }
  }
  // Column widths by code points (the table holds "≥").
  auto width = [](const std::string& s) {
    size_t w = 0;
    for (unsigned char c : s) w += (c & 0xC0) != 0x80;
    return w;
  };
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]));
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      bool right = i >= (per_kernel ? 5u : 4u);
      std::string pad(w[i] - width(row[i]), ' ');
      line += (i ? "  " : "") + (right ? pad + row[i] : row[i] + (i + 1 < row.size() ? pad : ""));
    }
    out += line + "\n";
  }

  // Summary: totals, where the time goes, what is furthest from its bound.
  uint64_t flops = 0, bytes = 0;
  double bound = 0, measured = 0, predicted = 0;
  size_t without = 0, timed = 0, bounded = 0, predicted_n = 0;
  for (const FunctionCost& f : r.functions) {
    flops += f.flops_known;
    bytes += f.bytes;
    if (!f.flops) ++without;
    if (f.bound) {
      bound += f.bound->us();
      ++bounded;
    }
    if (f.measured) {
      measured += f.measured->us;
      ++timed;
    }
    if (f.predicted_us) {
      predicted += *f.predicted_us;
      ++predicted_n;
    }
  }
  out += fmt::format("total: {} MFLOP{}, {} KB in and out of functions", num(static_cast<double>(flops) / 1e6),
                     without ? fmt::format(" in the functions with formulas ({} without: see no_formula in the dataset)", without)
                             : "",
                     num(static_cast<double>(bytes) / 1e3));
  if (dev && bounded)
    out += fmt::format(", sum of bounds {} us ({} of {} functions bounded)", num(bound), bounded, r.functions.size());
  if (predicted_n)
    out += fmt::format(", sum predicted from code {} us ({} of {} functions)", num(predicted), predicted_n,
                       r.functions.size());
  if (timed) out += fmt::format(", sum measured {} us ({} of {} functions timed)", num(measured), timed, r.functions.size());
  out += "\n";
  uint64_t counted = 0, reduction = 0;
  size_t counted_n = 0, exact_n = 0;
  for (const FunctionCost& f : r.functions)
    if (f.counted && f.counted->flops) {
      counted += *f.counted->flops;
      reduction += f.counted->reduction_flops;
      ++counted_n;
      exact_n += f.counted->status == "exact";
    }
  if (counted_n)
    out += fmt::format("counted from the kernels' code: {} MFLOP in {} of {} functions ({} exact, {} upper bounds){}\n",
                       num(static_cast<double>(counted) / 1e6), counted_n, r.functions.size(), exact_n,
                       counted_n - exact_n,
                       reduction ? fmt::format("; {} MFLOP of it in cross-thread reduction trees (every lane adds; "
                                               "code/formula leaves them out)",
                                               num(static_cast<double>(reduction) / 1e6))
                                 : std::string());
  // A session (--session): each step apart, in the order the steps ran (prefill, decode 0, ...).
  std::vector<std::string> steps;
  struct StepTotals {
    uint64_t flops = 0, attention_flops = 0, attention_bytes = 0, bytes = 0, functions = 0;
    double bound_us = 0, measured_us = 0;
    bool all_bound = true, all_measured = true;
  };
  std::map<std::string, StepTotals> per_step;
  for (const FunctionCost& f : r.functions) {
    if (f.node < 0 || static_cast<size_t>(f.node) >= df.nodes.size()) continue;
    const Node& node = df.nodes[static_cast<size_t>(f.node)];
    if (node.session_step.empty()) continue;
    if (!per_step.count(node.session_step)) steps.push_back(node.session_step);
    StepTotals& t = per_step[node.session_step];
    // The formula where there is one (the KV cache's attention), else what the code counts.
    const bool attention = !f.ops.empty() && f.ops[0].formula == "attention" && f.flops;
    if (f.flops) t.flops += *f.flops;
    else if (f.counted && f.counted->flops) t.flops += *f.counted->flops;
    if (attention) t.attention_flops += *f.flops, t.attention_bytes += f.bytes;
    t.bytes += f.bytes;
    ++t.functions;
    if (f.bound) t.bound_us += f.bound->us();
    else t.all_bound = false;
    if (f.measured) t.measured_us += f.measured->us;
    else t.all_measured = false;
  }
  // A sharded build's communication: what each rank sends in its collectives, per step and in all.
  std::map<std::string, std::pair<size_t, uint64_t>> comm;  // step ("" outside a session) -> (collectives, bytes)
  for (const LibraryCall& c : df.library_calls) {
    if (!c.collective) continue;
    const std::string step =
        c.node >= 0 && static_cast<size_t>(c.node) < df.nodes.size() ? df.nodes[static_cast<size_t>(c.node)].session_step : "";
    auto& e = comm[step];
    ++e.first, e.second += c.collective->bytes;
    if (!step.empty()) {
      auto& all = comm["*"];
      ++all.first, all.second += c.collective->bytes;
    }
  }
  if (df.ranks > 1 || !comm.empty()) {
    const auto all = comm.count("*") ? comm["*"] : comm[""];
    out += fmt::format("ranks: {} (tensor-parallel): every figure above is one rank's compute on its shard; "
                       "communication: {} collectives, {} KB sent per rank\n",
                       df.ranks, all.first, num(static_cast<double>(all.second) / 1e3));
  }
  for (const std::string& step : steps) {
    const StepTotals& t = per_step[step];
    const auto c = comm.count(step) ? comm[step] : std::pair<size_t, uint64_t>{0, 0};
    out += fmt::format("session step {}: {} MFLOP ({} in attention), {} KB in and out ({} KB attention's keys, "
                       "queries and outputs) of {} functions{}{}{}\n",
                       step, num(static_cast<double>(t.flops) / 1e6), num(static_cast<double>(t.attention_flops) / 1e6),
                       num(static_cast<double>(t.bytes) / 1e3), num(static_cast<double>(t.attention_bytes) / 1e3),
                       t.functions,
                       c.first ? fmt::format("; communication {} KB per rank in {} collectives",
                                             num(static_cast<double>(c.second) / 1e3), c.first)
                               : std::string(),
                       dev && t.all_bound ? fmt::format("; roofline bound {} us", num(t.bound_us)) : std::string(),
                       t.all_measured && t.measured_us > 0 ? fmt::format("; measured {} us", num(t.measured_us))
                                                           : std::string());
  }
  if (timed && measured > 0) {
    std::vector<const FunctionCost*> by_time;
    for (const FunctionCost& f : r.functions)
      if (f.measured) by_time.push_back(&f);
    std::stable_sort(by_time.begin(), by_time.end(),
                     [](const FunctionCost* a, const FunctionCost* b) { return a->measured->us > b->measured->us; });
    std::vector<std::string> top;
    for (size_t i = 0; i < by_time.size() && i < 5; ++i)
      top.push_back(fmt::format("n{} {:.1f}%", by_time[i]->node, by_time[i]->measured->us / measured * 100));
    out += "where time goes: " + fmt::format("{}", fmt::join(top, ", ")) + "\n";
    std::vector<const FunctionCost*> by_frac;
    for (const FunctionCost* f : by_time)
      if (f->bound && f->measured->us > 0) by_frac.push_back(f);
    std::stable_sort(by_frac.begin(), by_frac.end(), [](const FunctionCost* a, const FunctionCost* b) {
      return a->bound->us() / a->measured->us < b->bound->us() / b->measured->us;
    });
    std::vector<std::string> far;
    for (size_t i = 0; i < by_frac.size() && i < 5; ++i)
      far.push_back(fmt::format("n{} {:.1f}% of bound", by_frac[i]->node,
                                by_frac[i]->bound->us() / by_frac[i]->measured->us * 100));
    if (!far.empty()) out += "furthest from bound: " + fmt::format("{}", fmt::join(far, ", ")) + "\n";
  }
  return out;
}

}  // namespace

void report_profile_join(const Profile& p, const ProfileJoin& j, const char* command, bool always, std::ostream& err) {
  size_t matched = 0;
  for (const ProfileMatch& m : j.matches) matched += m.kernel >= 0;
  if (matched == 0)
    err << fmt::format("kdflow {}: warning: {}: none of its {} kernel launches is a kernel of this model (a profile of "
                       "another model or TVM version?): no times joined\n",
                       command, p.file, p.launches.size());
  else if (always)
    err << fmt::format("kdflow {}: {}: {} of {} kernel launches matched kernels of the model\n", command, p.file, matched,
                       p.launches.size());
}

int run_costs_command(const CostsCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.inputs.empty()) return report(usage_error("give at least one model (a build folder, model.so or kdflow JSON)"), err);
  const DeviceSpec* dev = nullptr;
  if (cmd.device != "none") {
    dev = find_device_spec(cmd.device);
    if (!dev) {
      std::vector<std::string> ids;
      for (const DeviceSpec& d : device_specs()) ids.push_back(d.id);
      return report(usage_error(fmt::format("unknown --device {} (known: {}, none)", cmd.device, fmt::join(ids, ", "))), err);
    }
  }
  std::optional<GpuArch> measured_arch;
  if (!cmd.device_profile.empty()) {
    Expected<std::string> text = read_file(cmd.device_profile, 1u << 20);
    if (!text) return report(text.error(), err);
    Expected<GpuArch> a = parse_gpu_profile(*text, cmd.device_profile);
    if (!a) return report(a.error(), err);
    measured_arch = a.take();
  }
  for (const auto* files : {&cmd.timings, &cmd.profiles})
    if (!files->empty() && files->size() != cmd.inputs.size())
      return report(usage_error(fmt::format("{} {} given for {} model{}: give one per model, in the same order",
                                            files->size(), files == &cmd.timings ? "--timing files" : "--profile files",
                                            cmd.inputs.size(), cmd.inputs.size() == 1 ? "" : "s")),
                    err);
  if (!cmd.timings.empty() && !cmd.profiles.empty())
    return report(usage_error("--timing and --profile both give measured times: use one"), err);
  std::string format = cmd.format;
  if (format.empty()) {
    auto ends = [&](const char* e) {
      std::string s(e);
      return cmd.output.size() > s.size() && cmd.output.compare(cmd.output.size() - s.size(), s.size(), s) == 0;
    };
    format = ends(".csv") ? "csv" : ends(".jsonl") ? "jsonl" : "table";
  }
  if (format != "table" && format != "csv" && format != "jsonl")
    return report(usage_error("--format must be table, csv or jsonl"), err);
  if (cmd.output != "-")
    for (const auto* files : {&cmd.inputs, &cmd.timings, &cmd.profiles})
      for (const std::string& f : *files)
        if (same_file(f, cmd.output))
          return report(Error{file_error(cmd.output, "the output would overwrite an input file").message, ExitCode::Usage}, err);

  std::vector<Dataflow> flows;
  flows.reserve(cmd.inputs.size());
  std::vector<ModelCosts> models;
  for (size_t i = 0; i < cmd.inputs.size(); ++i) {
    TerminalProgress progress;
    progress.err = &err;
    progress.enabled = progress_wanted(cmd.quiet);
    ExtractInputs in;
    in.dir = cmd.inputs[i];
    in.function = cmd.function;
    in.session = cmd.session;
    in.shards = cmd.shards;
    Expected<Dataflow> df = load_dataflow(in, print_terminal_progress, &progress);
    if (!df) return report(df.error(), err);
    flows.push_back(df.take());
    const Dataflow& flow = flows.back();
    std::optional<KernelTimes> times;
    if (!cmd.timings.empty()) {
      Expected<std::string> text = read_file(cmd.timings[i], kMaxSideFileBytes);
      if (!text) return report(text.error(), err);
      Expected<KernelTimes> t = read_replay_timing(*text, cmd.timings[i], flow);
      if (!t) return report(t.error(), err);
      times = t.take();
    } else if (!cmd.profiles.empty()) {
      Expected<std::string> text = read_file(cmd.profiles[i], kMaxSideFileBytes);
      if (!text) return report(text.error(), err);
      Expected<Profile> p = read_profile_csv(*text, cmd.profiles[i]);
      if (!p) return report(p.error(), err);
      ProfileJoin join = join_profile(flow, *p);
      report_profile_join(*p, join, "costs", true, err);
      times = profile_times(flow, *p, join);
    }
    models.push_back({model_name(cmd.inputs[i]), &flow, compute_costs(flow, dev, times ? &*times : nullptr,
                                                                              measured_arch ? &*measured_arch : nullptr)});
  }

  std::string text;
  if (format == "csv") {
    text = costs_csv(models, cmd.per_kernel);
  } else if (format == "jsonl") {
    text = costs_jsonl(models, cmd.per_kernel);
  } else {
    for (size_t i = 0; i < models.size(); ++i)
      text += (i ? "\n" : "") + render_table(models[i].model, *models[i].df, models[i].report, dev, cmd.per_kernel);
  }
  if (cmd.output == "-") {
    out << text;
    out.flush();
    if (!out) return report(file_error("<stdout>", "cannot write", ExitCode::IoError), err);
    return 0;
  }
  if (Status s = write_output(cmd.output, text); !s) return report(s.error(), err);
  return 0;
}

}  // namespace kdflow

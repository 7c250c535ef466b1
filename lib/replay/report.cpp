// report.cpp — what a replay produces, for people and tools: output comparisons, the
// per-kernel time table, the Chrome trace; and the buffer ↔ .npy mapping dumps use.
// Printing only: nothing here runs or fails.
#include <cctype>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "kdflow/replay/replay.h"
#include "kdflow/support/io.h"

namespace kdflow {
namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// The element type and shape an .npy of buffer `b` has.
void array_layout(const Buffer& b, DType* t, std::vector<int64_t>* shape) {
  auto parsed = parse_dtype(b.dtype);
  auto raw = [&] {
    *t = DType{kDLUInt, 8, 1};
    *shape = {static_cast<int64_t>(b.bytes)};
  };
  if (!parsed || parsed->code == kDLOpaqueHandle) return raw();
  DType d = *parsed;
  *shape = b.shape;
  if (d.lanes > 1) {
    shape->push_back(d.lanes);
    d.lanes = 1;
  }
  if (!npy_descr(d)) {
    if (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64) d = DType{kDLUInt, d.bits, 1};
    else return raw();
  }
  uint64_t n = dtype_element_bytes(d);
  for (int64_t x : *shape)
    if (x < 0 || !checked_mul(n, static_cast<uint64_t>(x), &n)) return raw();
  if (n > b.bytes) return raw();
  *t = d;
}

double element(const NpyArray& a, uint64_t i) {
  const char* p = a.data.data() + i * dtype_element_bytes(a.dtype);
  auto load = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  switch (a.dtype.code) {
    case kDLInt:
      switch (a.dtype.bits) {
        case 8: return load(int8_t{});
        case 16: return load(int16_t{});
        case 32: return load(int32_t{});
        default: return load(int64_t{});
      }
    case kDLUInt:
      switch (a.dtype.bits) {
        case 1:
        case 8: return load(uint8_t{});
        case 16: return load(uint16_t{});
        case 32: return load(uint32_t{});
        default: return load(uint64_t{});
      }
    case kDLFloat:
      if (a.dtype.bits == 16) {
        uint16_t h = 0;
        std::memcpy(&h, p, 2);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? std::nan("") : INFINITY) : std::ldexp(m + 1024, e - 25);
        return (h & 0x8000) ? -v : v;
      }
      if (a.dtype.bits == 32) return load(float{});
      return load(double{});
    default:
      return 0;
  }
}

bool is_integer(DType t) { return t.code == kDLInt || t.code == kDLUInt; }

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  return fmt::format("{:.3g}", v);
}

}  // namespace

const char* to_string(ModuleFormat f) {
  switch (f) {
    case ModuleFormat::Ptx: return "ptx";
    case ModuleFormat::Cubin: return "cubin";
    case ModuleFormat::Fatbin: return "fatbin";
    case ModuleFormat::CudaSource: return "cuda source";
    default: return "unknown";
  }
}

const char* to_string(ReplayBackend b) { return b == ReplayBackend::Cpu ? "cpu" : "cuda"; }

ModuleFormat detect_module_format(std::string_view bytes) {
  if (bytes.size() >= 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0) return ModuleFormat::Cubin;
  if (bytes.size() >= 4 && bytes.compare(0, 4, "\x50\xed\x55\xba") == 0) return ModuleFormat::Fatbin;
  std::string_view head = bytes.substr(0, 16384);
  if (head.find('\0') == std::string_view::npos && head.find(".version") != std::string_view::npos &&
      head.find(".target") != std::string_view::npos)
    return ModuleFormat::Ptx;
  if (head.find('\0') == std::string_view::npos && bytes.find("__global__") != std::string_view::npos)
    return ModuleFormat::CudaSource;
  return ModuleFormat::Unknown;
}

bool ReplayReport::passed() const {
  if (guard || first_difference || node_difference) return false;
  return std::all_of(checks.begin(), checks.end(), [](const OutputCheck& c) { return c.pass; });
}

uint64_t buffer_array_bytes(const Buffer& b) {
  DType t;
  std::vector<int64_t> shape;
  array_layout(b, &t, &shape);
  uint64_t n = dtype_element_bytes(t);
  for (int64_t x : shape) n *= static_cast<uint64_t>(x);
  return n;
}

NpyArray buffer_array(const Buffer& b, std::string data) {
  NpyArray a;
  array_layout(b, &a.dtype, &a.shape);
  a.data = std::move(data);
  return a;
}

std::string dump_file_name(const Kernel& k, size_t arg) {
  // The kernel name comes from input files: keep [A-Za-z0-9_.-] only and at most 160 of them,
  // so the name can neither leave --dump-dir nor exceed NAME_MAX; the leading id keeps it
  // from starting with '.'.
  std::string safe;
  for (char c : k.name.substr(0, 160))
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-') ? c : '_';
  return fmt::format("{}_{}_arg{}.npy", k.id, safe, arg);
}

OutputCheck compare_arrays(const NpyArray& actual, const NpyArray& expected, double rtol, double atol) {
  OutputCheck c;
  c.exact = is_integer(actual.dtype) && is_integer(expected.dtype);
  if (actual.shape != expected.shape) {
    c.problem = fmt::format("shape {} differs from the expected {}", shape_text(actual.shape),
                            shape_text(expected.shape));
    return c;
  }
  if (actual.data.size() != actual.count() * dtype_element_bytes(actual.dtype) ||
      expected.data.size() != expected.count() * dtype_element_bytes(expected.dtype)) {
    c.problem = "data size does not match dtype and shape";
    return c;
  }
  c.elements = actual.count();
  // float16 keeps 11 significant bits (one rounding: up to 4.9e-4 relative) and TVM's fp16
  // kernels round after every operation, so another summation order (another back end,
  // another GPU) moves results by a few units in the last place: at least rtol 1e-2 and
  // atol 1e-3 for float16 arrays (docs/how-kdflow-works.md, replay tolerance).
  if (expected.dtype.code == kDLFloat && expected.dtype.bits == 16) {
    rtol = std::max(rtol, 1e-2);
    atol = std::max(atol, 1e-3);
  }
  for (uint64_t i = 0; i < c.elements; ++i) {
    double a = element(actual, i), e = element(expected, i);
    bool ok;
    double diff, rel;
    if (std::isnan(a) || std::isnan(e)) {
      ok = std::isnan(a) && std::isnan(e);
      if (std::isnan(a) && !ok) ++c.nan_mismatches;
      diff = rel = ok ? 0 : std::numeric_limits<double>::infinity();
    } else if (a == e) {  // equal infinities too
      ok = true;
      diff = rel = 0;
    } else {
      diff = std::fabs(a - e);
      rel = e != 0 ? diff / std::fabs(e) : std::numeric_limits<double>::infinity();
      ok = !c.exact && diff <= atol + rtol * std::fabs(e);
    }
    c.max_abs = std::max(c.max_abs, diff);
    c.max_rel = std::max(c.max_rel, rel);
    if (!ok) ++c.mismatches;
  }
  c.pass = c.mismatches == 0;
  // Would a constant array (the expected values' mean) pass as well? Then this comparison
  // cannot tell a right result from a wrong one (a softmax of near-zero logits: 1000 × 0.001).
  if (c.elements >= 2) {
    double sum = 0;
    uint64_t finite = 0;
    for (uint64_t i = 0; i < c.elements; ++i)
      if (double e = element(expected, i); std::isfinite(e)) sum += e, ++finite;
    if (finite == c.elements) {
      double mean = sum / static_cast<double>(finite);
      if (c.exact) mean = std::nearbyint(mean);
      bool constant_passes = true;
      for (uint64_t i = 0; i < c.elements && constant_passes; ++i) {
        double e = element(expected, i);
        constant_passes = c.exact ? mean == e : std::fabs(mean - e) <= atol + rtol * std::fabs(e);
      }
      c.uninformative = constant_passes;
    }
  }
  return c;
}

std::string format_checks(const ReplayReport& r) {
  if (r.checks.empty()) return "";
  std::string out = fmt::format("{:<8} {:<40} {:<10} {:<10} {:<14} {}\n", "output", "expected", "max_abs", "max_rel",
                                "mismatches", "result");
  for (const OutputCheck& c : r.checks) {
    std::string result = c.pass ? (c.uninformative ? "UNINFORMATIVE" : "ok") : "MISMATCH";
    if (!c.problem.empty()) result += ": " + c.problem;
    else if (c.pass && c.uninformative)
      result += ": every expected value is within tolerance of their mean, so a constant would pass too; "
                "this says nothing about the dataflow";
    else if (c.exact) result += c.pass ? " (exact)" : " (integers, compared exactly)";
    const std::string which = c.rank >= 0 ? fmt::format("r{}:{}", c.rank, c.output) : std::to_string(c.output);
    out += fmt::format("{:<8} {:<40} {:<10} {:<10} {:<14} {}\n", which, c.expect_file, number(c.max_abs),
                       number(c.max_rel), fmt::format("{}/{}", c.mismatches, c.elements), result);
  }
  return out;
}

namespace {
/// "N of M elements differ, max abs .., max rel ..", and how many of them are NaN where the
/// expected value is not (what a read of memory nothing wrote gives under --poison).
std::string difference_text(const OutputCheck& c) {
  std::string nan = c.nan_mismatches == 0 ? ""
                    : c.nan_mismatches == c.mismatches
                        ? ", every one NaN where TVM's is a number"
                        : fmt::format(", {} of them NaN where TVM's is a number", c.nan_mismatches);
  return fmt::format("{} of {} elements differ, max abs {}, max rel {}{}{}", c.mismatches, c.elements,
                     number(c.max_abs), number(c.max_rel), c.exact ? " (integers, compared exactly)" : "", nan);
}
}  // namespace

std::string format_node_references(const ReplayReport& r, const NodeReferences& refs) {
  std::string out;
  if (!r.node_difference) {
    out += fmt::format("nodes: {} nodes ({} buffers) compared with TVM's own results ({}): all match", r.nodes_compared,
                       r.node_tensors_compared, refs.file);
    if (r.node_tensors_uninformative > 0)
      out += fmt::format(" ({} of the buffers uninformative: a constant would pass)", r.node_tensors_uninformative);
    out += "\n";
  } else {
    const NodeDifference& d = *r.node_difference;
    const OutputCheck& c = d.check;
    std::string how = !c.problem.empty() ? c.problem
                                         : difference_text(c);
    out += fmt::format("nodes: first node that differs from TVM's result: {}: {} (reference {}); {} of {} buffers "
                       "compared differ\n",
                       d.label, how, c.expect_file, r.node_tensors_differing, r.node_tensors_compared);
  }
  size_t shown = 0;
  for (const std::string& n : refs.not_compared) {
    if (++shown > 5) {
      out += fmt::format("nodes: ... and {} more not compared\n", refs.not_compared.size() - 5);
      break;
    }
    out += "nodes: not compared: " + n + "\n";
  }
  return out;
}

std::string format_first_difference(const ReplayReport& r, const Dataflow& df) {
  if (!r.first_difference)
    return fmt::format("compared with the dumps: all {} kernels agree\n", r.compared_kernels);
  const FirstDifference& d = *r.first_difference;
  const OutputCheck& c = d.check;
  std::string node = "no node";
  if (d.node >= 0 && static_cast<size_t>(d.node) < df.nodes.size())
    node = fmt::format("node {} ({})", d.node, df.nodes[d.node].name);
  std::string buffer = c.buffer >= 0 && static_cast<size_t>(c.buffer) < df.buffers.size()
                           ? fmt::format("buffer {} '{}'", c.buffer, df.buffers[c.buffer].name)
                           : std::string("a buffer");
  std::string how = !c.problem.empty() ? c.problem
                                       : difference_text(c);
  std::string later = r.differing_kernels > 1
                          ? fmt::format("; {} of the {} kernels compared differ in all", r.differing_kernels,
                                        r.compared_kernels)
                          : fmt::format("; the only one of {} kernels compared", r.compared_kernels);
  return fmt::format("first difference: {}, kernel {} ({}), argument {} ({}): {} (dump {}){}\n", node, d.kernel,
                     d.kernel >= 0 && static_cast<size_t>(d.kernel) < df.kernels.size() ? df.kernels[d.kernel].name
                                                                                        : std::string("?"),
                     d.arg, buffer, how, c.expect_file, later);
}

const char* to_string(ReplayMode m) {
  switch (m) {
    case ReplayMode::Eager:
      return "eager";
    case ReplayMode::Graph:
      return "graph";
    case ReplayMode::Dag:
      return "dag";
  }
  return "eager";
}

std::string format_times(const ReplayReport& r, const Dataflow& df) {
  std::string out;
  if (r.times.empty()) return out;
  out += fmt::format(
      "kernel times in us (median and min of {} runs after 1 checked and {} warm-up), grouped by graph "
      "node\n",
      r.repeat, r.warmup);
  std::map<int, std::vector<const KernelTime*>> by_node;
  std::vector<int> order;
  for (const KernelTime& t : r.times) {
    int node = t.kernel >= 0 && static_cast<size_t>(t.kernel) < df.kernels.size() ? df.kernels[t.kernel].node : -1;
    if (!by_node.count(node)) order.push_back(node);
    by_node[node].push_back(&t);
  }
  for (int node : order) {
    double med = 0, mn = 0;
    for (const KernelTime* t : by_node[node]) {
      med += t->median_us;
      mn += t->min_us;
    }
    std::string name = node >= 0 && static_cast<size_t>(node) < df.nodes.size() ? df.nodes[node].name : "?";
    out += fmt::format("node {} {}: {:.2f} (min {:.2f})\n", node, name, med, mn);
    for (const KernelTime* t : by_node[node]) {
      const Kernel& k = df.kernels[t->kernel];
      out += fmt::format("  kernel {:<4} {:<56} grid [{}, {}, {}] block [{}, {}, {}]: {:.2f} (min {:.2f})\n", k.id,
                         k.name, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2], t->median_us,
                         t->min_us);
    }
  }
  out += fmt::format("total: {:.2f} (min {:.2f}) over {} kernels\n", r.kernel_sum_median_us, r.kernel_sum_min_us,
                     r.times.size());
  if (r.kernel < 0 && r.slice_kernels.empty()) {
    // Kernel intervals tile a run (event i → i + 1), so only a gated run, whose kernels start
    // once it is queued whole, against the same run ungated measures launch overhead.
    if (r.gated && r.warmup == 0)
      out += fmt::format("gated run: {:.2f} us (min {:.2f}); no ungated run (--warmup 0), so no launch overhead "
                         "measured\n",
                         r.gated_run_median_us, r.gated_run_min_us);
    else if (r.gated) {
      // The ungated median is of the warm-up runs (often one), the gated of the timed runs: a
      // difference below zero is run-to-run variation, not a negative overhead (seen on an H200).
      double overhead = r.eager_run_median_us - r.gated_run_median_us;
      out += fmt::format(
          "eager end to end: {:.2f} us per run (min {:.2f}) ungated, {:.2f} us (min {:.2f}) gated; launch overhead "
          "(ungated − gated run): {}\n",
          r.eager_run_median_us, r.eager_run_min_us, r.gated_run_median_us, r.gated_run_min_us,
          overhead >= 0 ? fmt::format("{:.2f} us", overhead)
                        : fmt::format("none measurable (the ungated median is {:.2f} us below the gated one: "
                                      "run-to-run variation over {} warm-up run{})",
                                      -overhead, r.warmup, r.warmup == 1 ? "" : "s"));
    }
    else
      out += fmt::format(
          "eager end to end: {:.2f} us per run (min {:.2f}); no launch overhead measured (runs not gated: kernel "
          "times include the host's enqueue gaps)\n",
          r.eager_run_median_us, r.eager_run_min_us);
    // Only when the graph ran (a back end without graphs made only the eager runs).
    if (r.mode != ReplayMode::Eager && r.graph_run_median_us > 0)
      out += fmt::format("{}: median {:.2f} us, min {:.2f} us per launch of all {} kernels{}\n", to_string(r.mode),
                         r.graph_run_median_us, r.graph_run_min_us, r.plan.launches.size(),
                         r.plan.host_copies.empty()
                             ? std::string()
                             : fmt::format(" and {} host copies (graph copy nodes from pinned memory)",
                                           r.plan.host_copies.size()));
    if (r.mode == ReplayMode::Dag) {
      double steps_us = r.kernel_sum_median_us;
      for (const KernelTime& t : r.library_call_times) steps_us += t.median_us;
      double speedup = r.dag_critical_path_us > 0 ? steps_us / r.dag_critical_path_us : 1;
      out += fmt::format(
          "dag: {} edges, longest chain {} of {} steps; critical path {:.2f} us of {:.2f} us of step "
          "time (at most {:.2f}x from concurrency, over the eager runs' step times: those include the gap "
          "between dependent launches on a stream, which a graph launch mostly removes, so the {} time above can "
          "be lower still)\n",
          r.dag_edges, r.dag_longest_chain,
          r.plan.launches.size() + r.plan.library_calls.size() + r.plan.host_copies.size(),
          r.dag_critical_path_us, steps_us,
          speedup, to_string(r.mode));
    }
  }
  if (!r.timing_method.empty()) out += "timing: " + r.timing_method + "\n";
  return out;
}

std::string timing_json(const ReplayReport& r, const Dataflow& df) {
  using nlohmann::json;
  json kernels = json::array();
  for (const KernelTime& t : r.times) {
    if (t.kernel < 0 || static_cast<size_t>(t.kernel) >= df.kernels.size()) continue;
    const Kernel& k = df.kernels[t.kernel];
    std::string function =
        k.node >= 0 && static_cast<size_t>(k.node) < df.nodes.size() ? df.nodes[k.node].function : "";
    kernels.push_back({{"kernel", k.id},
                       {"name", k.name},
                       {"node", k.node},
                       {"function", function},
                       {"grid", k.grid},
                       {"block", k.block},
                       {"dynamic_shared_memory", k.dynamic_shared_memory},
                       {"samples", t.samples},
                       {"median_us", t.median_us},
                       {"min_us", t.min_us}});
  }
  json root = {{"schema", "kdflow-replay-timing/1"},
               {"model", r.plan.label},
               {"device", r.device},
               {"backend", to_string(r.backend)},
               {"mode", to_string(r.mode)},
               {"method", r.timing_method},
               {"warmup", r.warmup},
               {"repeat", r.repeat},
               {"kernels", std::move(kernels)},
               {"kernel_sum_median_us", r.kernel_sum_median_us},
               {"kernel_sum_min_us", r.kernel_sum_min_us}};
  if (r.kernel >= 0) {
    root["single_kernel"] = r.kernel;
  } else if (!r.slice_kernels.empty()) {
    root["slice_kernels"] = {r.slice_kernels.front(), r.slice_kernels.back()};
  } else {
    root["eager_run_median_us"] = r.eager_run_median_us;
    root["eager_run_min_us"] = r.eager_run_min_us;
    root["gated"] = r.gated;
    if (r.gated) {
      root["gated_run_median_us"] = r.gated_run_median_us;
      root["gated_run_min_us"] = r.gated_run_min_us;
    }
  }
  if (!r.library_call_times.empty()) {
    json calls = json::array();
    for (const KernelTime& t : r.library_call_times)
      calls.push_back({{"library_call", t.kernel}, {"samples", t.samples}, {"median_us", t.median_us},
                       {"min_us", t.min_us}});
    root["library_calls"] = std::move(calls);
  }
  root["backend"] = to_string(r.backend);
  if (r.mode != ReplayMode::Eager) {
    root["graph_run_median_us"] = r.graph_run_median_us;
    root["graph_run_min_us"] = r.graph_run_min_us;
  }
  if (r.mode == ReplayMode::Dag) {
    root["dag_edges"] = r.dag_edges;
    root["dag_longest_chain"] = r.dag_longest_chain;
    root["dag_critical_path_us"] = r.dag_critical_path_us;
  }
  // The comparisons the run made (what replay prints after the times), for scripts.
  json checks = json::array();
  auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  for (const OutputCheck& c : r.checks) {
    json o = {{"output", c.output},     {"name", c.name},           {"reference", base_name(c.expect_file)},
              {"passed", c.pass},       {"exact", c.exact},         {"uninformative", c.uninformative},
              {"elements", c.elements}, {"mismatches", c.mismatches}, {"max_abs", finite(c.max_abs)},
              {"max_rel", finite(c.max_rel)}};
    if (c.rank >= 0) o["rank"] = c.rank;
    if (!c.problem.empty()) o["problem"] = c.problem;
    checks.push_back(std::move(o));
  }
  root["checks"] = std::move(checks);
  if (r.ranks > 1) {
    root["ranks"] = r.ranks;
    root["collectives"] = r.collectives;
    root["collectives_by"] = r.collectives_by;
  }
  if (r.node_tensors_compared > 0 || r.node_difference) {
    root["nodes_compared"] = r.node_tensors_compared;
    root["nodes_uninformative"] = r.node_tensors_uninformative;
    root["first_node_difference"] = r.node_difference ? json(r.node_difference->label) : json(nullptr);
  }
  return root.dump(1) + "\n";
}

std::string chrome_trace(const ReplayReport& r, const Dataflow& df) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0},
                    {"args", {{"name", fmt::format("kdflow replay {} ({} back end: {})", r.plan.label,
                                                                  to_string(r.backend), r.device)}}}});
  std::map<int, double> start, dur;  // kernel id → µs
  std::vector<int> nodes;
  double ts = 0;
  for (const KernelTime& t : r.times) {
    if (t.kernel < 0 || static_cast<size_t>(t.kernel) >= df.kernels.size()) continue;
    start[t.kernel] = ts;
    dur[t.kernel] = t.median_us;
    ts += t.median_us;
    int node = df.kernels[t.kernel].node;
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  for (int node : nodes) {
    std::string name = node >= 0 && static_cast<size_t>(node) < df.nodes.size() ? df.nodes[node].name : "?";
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", node},
                      {"args", {{"name", fmt::format("node {}: {}", node, name)}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 1}, {"tid", node},
                      {"args", {{"sort_index", node}}}});
  }
  for (const KernelTime& t : r.times) {
    if (!start.count(t.kernel)) continue;
    const Kernel& k = df.kernels[t.kernel];
    events.push_back({{"name", k.name},
                      {"cat", "kernel"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", k.node},
                      {"ts", start[t.kernel]},
                      {"dur", t.median_us},
                      {"args",
                       {{"kernel", k.id},
                        {"grid", k.grid},
                        {"block", k.block},
                        {"dynamic_shared_memory", k.dynamic_shared_memory},
                        {"min_us", t.min_us},
                        {"samples", t.samples}}}});
  }
  int id = 0;
  for (const Dependency& d : df.dependencies) {
    // The trace shows kernels only: library calls are not timed apart.
    if (d.from_library_call || d.to_library_call) continue;
    if (!start.count(d.from) || !start.count(d.to)) continue;
    const char* kind = to_string(d.kind);
    json args = {{"from_buffer", d.from_buffer}, {"to_buffer", d.to_buffer}};
    events.push_back({{"name", kind}, {"cat", "dependency"}, {"ph", "s"}, {"id", id}, {"pid", 1},
                      {"tid", df.kernels[d.from].node}, {"ts", start[d.from] + dur[d.from] / 2}, {"args", args}});
    events.push_back({{"name", kind}, {"cat", "dependency"}, {"ph", "f"}, {"bp", "e"}, {"id", id}, {"pid", 1},
                      {"tid", df.kernels[d.to].node}, {"ts", start[d.to] + dur[d.to] / 2}, {"args", args}});
    ++id;
  }
  json root = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
  return root.dump(1) + "\n";
}

}  // namespace kdflow

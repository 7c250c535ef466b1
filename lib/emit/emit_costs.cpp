// emit_costs.cpp — see emit_costs.h. Each row is built once as an ordered JSON object keyed
// by cost_columns(); CSV and JSON Lines render the same rows.
#include "kdflow/emit/emit_costs.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "emit_common.h"

namespace kdflow {
namespace {

using ojson = nlohmann::ordered_json;

const std::vector<std::string> kFunctionColumns = {
    "model", "node", "function", "relay_ops", "ops", "input_shapes", "input_dtypes", "output_shapes",
    "output_dtypes", "flops", "flops_known", "no_formula", "counted_flops", "counted_reduction_flops", "counted_status", "counted_reasons",
    "counted_flop_ratio", "bytes", "flop_per_byte", "kernels", "launches", "library_calls", "device", "bound_us",
    "compute_bound_us", "memory_bound_us", "limiter", "bound_flops_source", "measured_us",
    "time_source", "fraction_of_bound", "predicted_us", "predicted_source", "predicted_over_measured"};
const std::vector<std::string> kKernelColumns = {
    "model", "kernel", "node", "function", "name", "grid", "block", "dynamic_shared_memory_bytes", "relay_ops",
    "ops", "flops", "flops_note", "counted_flops", "counted_reduction_flops", "counted_status", "counted_reasons", "counted_ops", "bytes",
    "bytes_source", "load_bytes", "store_bytes", "accessed_bytes_note", "flop_per_byte", "device", "bound_us", "compute_bound_us", "memory_bound_us", "limiter",
    "bound_flops_source", "measured_us", "time_source", "fraction_of_bound", "predicted_us", "predicted_source",
    "predicted_limiter", "predicted_note", "blocks_per_sm", "occupancy_limit", "waves", "threads_per_warp",
    "ops_per_thread", "loads_per_thread", "barriers_per_thread", "exposed_rounds", "latency_us", "issue_us", "dram_us", "l2_us", "predicted_over_measured"};

ojson opt(const std::optional<uint64_t>& v) { return v ? ojson(*v) : ojson(nullptr); }
ojson opt(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }

/// The Relay ops of a node with their attributes, types and work.
ojson ops_json(const Node& n, const std::vector<OpWork>& work) {
  ojson ops = ojson::array();
  for (size_t i = 0; i < n.relay_ops.size(); ++i) {
    const RelayOp& op = n.relay_ops[i];
    ojson o = ojson::object();
    o["name"] = op.name;
    ojson attrs = ojson::object();
    for (const RelayAttr& a : op.attrs) attrs[a.key] = detail::relay_attr_json(a);
    o["attrs"] = std::move(attrs);
    o["inputs"] = op.input_types;
    o["output"] = op.type;
    if (i < work.size()) {
      o["flops"] = opt(work[i].flops);
      o["bytes"] = opt(work[i].bytes);
      o["formula"] = work[i].formula.empty() ? ojson(nullptr) : ojson(work[i].formula);
      if (!work[i].reason.empty()) o["no_formula"] = work[i].reason;
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

/// The counted-FLOP columns of a row (null where nothing was counted).
void counted_fields(ojson& row, const std::optional<CountedFlops>& c) {
  row["counted_flops"] = c ? opt(c->flops) : ojson(nullptr);
  row["counted_reduction_flops"] = c ? ojson(c->reduction_flops) : ojson(nullptr);
  row["counted_status"] = c ? ojson(c->status) : ojson(nullptr);
  row["counted_reasons"] = c ? ojson(c->reasons) : ojson::array();
}

/// A kernel's counted operations by precision and kind ({"fp32": {"add_sub": n, ...}}), null when not analyzed.
ojson counted_ops_json(const Kernel& k) {
  if (!k.ops) return nullptr;
  ojson counts = ojson::object();
  for (int p = 0; p < KernelOps::kPrecisions; ++p) {
    ojson per = ojson::object();
    for (int kind = 0; kind < KernelOps::kKinds; ++kind)
      if (uint64_t n = k.ops->counts[static_cast<size_t>(kind)][static_cast<size_t>(p)]) per[kind_name(kind)] = n;
    if (!per.empty()) counts[precision_name(p)] = std::move(per);
  }
  return counts;
}

ojson names(const Node& n) {
  ojson a = ojson::array();
  for (const RelayOp& op : n.relay_ops) a.push_back(op.name);
  return a;
}

std::string launch_text(const Kernel& k) {
  return fmt::format("{}<<<({},{},{}),({},{},{}),{}>>>", k.name, k.grid[0], k.grid[1], k.grid[2], k.block[0],
                     k.block[1], k.block[2], k.dynamic_shared_memory);
}

void bound_fields(ojson& row, const CostReport& r, const std::optional<Bound>& b, const std::optional<Measured>& m) {
  row["device"] = r.device.empty() ? ojson(nullptr) : ojson(r.device);
  row["bound_us"] = b ? ojson(b->us()) : ojson(nullptr);
  row["compute_bound_us"] = b ? ojson(b->compute_us) : ojson(nullptr);
  row["memory_bound_us"] = b ? ojson(b->memory_us) : ojson(nullptr);
  row["limiter"] = b ? ojson(b->limiter()) : ojson(nullptr);
  row["measured_us"] = m ? ojson(m->us) : ojson(nullptr);
  row["time_source"] = m ? ojson(m->source) : ojson(nullptr);
  row["fraction_of_bound"] = b && m && m->us > 0 ? ojson(b->us() / m->us) : ojson(nullptr);
}

/// The time model's columns of a kernel row (time_model.h): the prediction and each of its terms.
void prediction_fields(ojson& row, const KernelCost& c) {
  const std::optional<KernelPrediction>& p = c.predicted;
  row["predicted_us"] = p ? ojson(p->us) : ojson(nullptr);
  row["predicted_source"] = p ? ojson(p->source) : ojson(nullptr);
  row["predicted_limiter"] = p ? ojson(p->limiter) : ojson(nullptr);
  row["predicted_note"] = c.predicted_note.empty() ? ojson(nullptr) : ojson(c.predicted_note);
  row["blocks_per_sm"] = p ? ojson(p->blocks_per_sm) : ojson(nullptr);
  row["occupancy_limit"] = p ? ojson(p->occupancy_limit) : ojson(nullptr);
  row["waves"] = p ? ojson(p->waves) : ojson(nullptr);
  row["threads_per_warp"] = p ? ojson(p->threads_per_warp) : ojson(nullptr);
  row["ops_per_thread"] = p ? ojson(p->ops_per_thread) : ojson(nullptr);
  row["loads_per_thread"] = p ? ojson(p->loads_per_thread) : ojson(nullptr);
  row["barriers_per_thread"] = p ? ojson(p->barriers_per_thread) : ojson(nullptr);
  row["exposed_rounds"] = p ? ojson(p->exposed_rounds) : ojson(nullptr);
  row["latency_us"] = p ? ojson(p->latency_us) : ojson(nullptr);
  row["issue_us"] = p ? ojson(p->issue_us) : ojson(nullptr);
  row["dram_us"] = p ? ojson(p->dram_us) : ojson(nullptr);
  row["l2_us"] = p ? ojson(p->l2_us) : ojson(nullptr);
  row["predicted_over_measured"] =
      p && c.measured && c.measured->us > 0 ? ojson(p->us / c.measured->us) : ojson(nullptr);
}

std::vector<ojson> rows(const std::vector<ModelCosts>& models, bool per_kernel) {
  std::vector<ojson> out;
  for (const ModelCosts& mc : models) {
    const Dataflow& df = *mc.df;
    std::vector<const FunctionCost*> fn_of_node(df.nodes.size(), nullptr);
    for (const FunctionCost& f : mc.report.functions) fn_of_node[static_cast<size_t>(f.node)] = &f;
    if (!per_kernel) {
      for (const FunctionCost& f : mc.report.functions) {
        const Node& n = df.nodes[static_cast<size_t>(f.node)];
        ojson row = ojson::object();
        row["model"] = mc.model;
        row["node"] = n.id;
        row["function"] = n.function;
        row["relay_ops"] = names(n);
        row["ops"] = ops_json(n, f.ops);
        ojson in_shapes = ojson::array(), in_types = ojson::array(), out_shapes = ojson::array(),
              out_types = ojson::array();
        for (int b : n.inputs) {
          in_shapes.push_back(df.buffers[static_cast<size_t>(b)].shape);
          in_types.push_back(df.buffers[static_cast<size_t>(b)].dtype);
        }
        for (int b : n.outputs) {
          out_shapes.push_back(df.buffers[static_cast<size_t>(b)].shape);
          out_types.push_back(df.buffers[static_cast<size_t>(b)].dtype);
        }
        row["input_shapes"] = std::move(in_shapes);
        row["input_dtypes"] = std::move(in_types);
        row["output_shapes"] = std::move(out_shapes);
        row["output_dtypes"] = std::move(out_types);
        row["flops"] = opt(f.flops);
        row["flops_known"] = f.flops_known;
        row["no_formula"] = f.no_formula;
        counted_fields(row, f.counted);
        row["counted_flop_ratio"] = opt(counted_ratio(f));
        row["bytes"] = f.bytes;
        row["flop_per_byte"] = opt(intensity(f.flops ? f.flops : f.counted ? f.counted->flops : std::nullopt, f.bytes));
        row["kernels"] = n.kernels.size();
        ojson launches = ojson::array();
        for (int k : n.kernels) launches.push_back(launch_text(df.kernels[static_cast<size_t>(k)]));
        row["launches"] = std::move(launches);
        ojson calls = ojson::array();
        for (int c : n.library_calls) calls.push_back(df.library_calls[static_cast<size_t>(c)].name);
        row["library_calls"] = std::move(calls);
        bound_fields(row, mc.report, f.bound, f.measured);
        row["bound_flops_source"] = f.bound_source.empty() ? ojson(nullptr) : ojson(f.bound_source);
        row["predicted_us"] = opt(f.predicted_us);
        row["predicted_source"] = f.predicted_us ? ojson(f.predicted_source) : ojson(nullptr);
        row["predicted_over_measured"] =
            f.predicted_us && f.measured && f.measured->us > 0 ? ojson(*f.predicted_us / f.measured->us) : ojson(nullptr);
        out.push_back(std::move(row));
      }
    } else {
      for (const KernelCost& c : mc.report.kernels) {
        const Kernel& k = df.kernels[static_cast<size_t>(c.kernel)];
        const Node* n = k.node >= 0 && static_cast<size_t>(k.node) < df.nodes.size() ? &df.nodes[static_cast<size_t>(k.node)] : nullptr;
        const FunctionCost* f = n ? fn_of_node[static_cast<size_t>(k.node)] : nullptr;
        ojson row = ojson::object();
        row["model"] = mc.model;
        row["kernel"] = k.id;
        row["node"] = k.node;
        row["function"] = k.function;
        row["name"] = k.name;
        row["grid"] = k.grid;
        row["block"] = k.block;
        row["dynamic_shared_memory_bytes"] = k.dynamic_shared_memory;
        row["relay_ops"] = n ? names(*n) : ojson::array();
        row["ops"] = n && f ? ops_json(*n, f->ops) : ojson::array();
        row["flops"] = opt(c.flops);
        row["flops_note"] = c.flops_note.empty() ? ojson(nullptr) : ojson(c.flops_note);
        counted_fields(row, c.counted);
        row["counted_ops"] = counted_ops_json(k);
        row["bytes"] = c.bytes;
        row["bytes_source"] = c.bytes_source;
        // Executed global loads and stores (counted from the code, not distinct bytes).
        row["load_bytes"] = k.ops ? opt(k.ops->load_bytes) : ojson(nullptr);
        row["store_bytes"] = k.ops ? opt(k.ops->store_bytes) : ojson(nullptr);
        row["accessed_bytes_note"] = !k.ops                       ? ojson("device.cu not analyzed")
                                     : !k.ops->bytes_reason.empty() ? ojson(k.ops->bytes_reason)
                                     : !k.ops->bytes_exact          ? ojson("upper bound: a data-dependent guard counted as taken")
                                                                    : ojson(nullptr);
        row["flop_per_byte"] = opt(intensity(c.flops ? c.flops : c.counted ? c.counted->flops : std::nullopt, c.bytes));
        bound_fields(row, mc.report, c.bound, c.measured);
        row["bound_flops_source"] = c.bound_source.empty() ? ojson(nullptr) : ojson(c.bound_source);
        prediction_fields(row, c);
        out.push_back(std::move(row));
      }
    }
  }
  return out;
}

std::string csv_cell(const ojson& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string()) s = v.get<std::string>();
  else s = v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

const std::vector<std::string>& cost_columns(bool per_kernel) { return per_kernel ? kKernelColumns : kFunctionColumns; }

std::string costs_csv(const std::vector<ModelCosts>& models, bool per_kernel) {
  const std::vector<std::string>& cols = cost_columns(per_kernel);
  std::string out;
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\r\n";
  for (const ojson& row : rows(models, per_kernel)) {
    for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + csv_cell(row.at(cols[i]));
    out += "\r\n";
  }
  return out;
}

std::string costs_jsonl(const std::vector<ModelCosts>& models, bool per_kernel) {
  std::string out;
  for (const ojson& row : rows(models, per_kernel)) out += row.dump() + "\n";
  return out;
}

}  // namespace kdflow

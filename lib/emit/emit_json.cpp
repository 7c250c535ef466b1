// emit_json.cpp — the IR as JSON, schema "kdflow/1" (docs/schema.md); its reader is lib/ir/dataflow_json.cpp.
// The writer builds an ordered_json (fixed key order) and prints it with a small pretty
// printer that keeps short flat values (grid, shape, args) on one line. Same IR → same bytes.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emit_common.h"
#include "kdflow/emit/emit.h"

namespace kdflow {
namespace {

using ojson = nlohmann::ordered_json;


// ---------------------------------------------------------------------------------------
// Writer

ojson loc_json(const SourceLoc& loc) { return detail::loc_string(loc); }

ojson footprint_json(const Footprint& f) {
  ojson j = ojson::object();
  if (!f.unknown.empty()) {
    j["unknown"] = f.unknown;
    return j;
  }
  auto range = [](const std::optional<std::array<int64_t, 2>>& r) {
    return r ? ojson::array({(*r)[0], (*r)[1]}) : ojson(nullptr);
  };
  j["read"] = range(f.read);
  j["write"] = range(f.write);
  if (f.elements) j["elements"] = *f.elements;
  if (f.read_bytes) j["read_bytes"] = *f.read_bytes;
  if (f.write_bytes) j["write_bytes"] = *f.write_bytes;
  j["exact"] = f.exact;
  return j;
}

ojson arg_json(const Arg& a) {
  ojson j = ojson::object();
  switch (a.kind) {
    case Arg::Kind::Buffer:
      j["buffer"] = a.buffer;
      j["offset"] = a.offset;
      if (a.view >= 0) j["view"] = a.view;
      j["access"] = to_string(a.access);
      if (!a.tensor_dtype.empty()) j["tensor"] = ojson{{"dtype", a.tensor_dtype}, {"shape", a.tensor_shape}};
      break;
    case Arg::Kind::Int:
      j["value"] = a.int_value;
      if (!a.expr.empty()) j["expr"] = a.expr;
      break;
    case Arg::Kind::Float:
      // JSON has no NaN or infinity: write them as strings the reader understands.
      if (std::isnan(a.float_value)) j["value"] = "nan";
      else if (std::isinf(a.float_value)) j["value"] = a.float_value > 0 ? "inf" : "-inf";
      else j["value"] = a.float_value;
      break;
    case Arg::Kind::Null:
      j["null"] = true;
      if (a.dtype == "str") j["string"] = a.text;
      break;
  }
  j["dtype"] = a.dtype;
  if (a.kind == Arg::Kind::Buffer && a.footprint) j["footprint"] = footprint_json(*a.footprint);
  return j;
}

ojson args_json(const std::vector<Arg>& args) {
  ojson j = ojson::array();
  for (const Arg& a : args) j.push_back(arg_json(a));
  return j;
}

template <class T>
ojson int_array(const T& v) {
  ojson j = ojson::array();
  for (auto x : v) j.push_back(x);
  return j;
}

ojson build(const Dataflow& df) {
  ojson root = ojson::object();
  root["schema"] = kSchemaVersion;
  root["generator"] = detail::kGenerator;
  if (df.ranks > 1) root["ranks"] = df.ranks;
  if (!df.predicted_on.empty()) root["predicted_on"] = df.predicted_on;

  ojson src = ojson::object();
  src["graph"] = df.sources.graph;
  src["host"] = df.sources.host;
  src["meta"] = df.sources.meta;
  src["params"] = df.sources.params.empty() ? ojson(nullptr) : ojson(df.sources.params);
  src["device"] = df.sources.device.empty() ? ojson(nullptr) : ojson(df.sources.device);
  src["relay"] = df.sources.relay.empty() ? ojson(nullptr) : ojson(df.sources.relay);
  src["library"] = df.sources.library.empty() ? ojson(nullptr) : ojson(df.sources.library);
  if (!df.sources.vm_exec.empty()) src["vm_exec"] = df.sources.vm_exec;
  if (!df.sources.vm_function.empty()) src["vm_function"] = df.sources.vm_function;
  if (!df.sources.tvm_version.empty()) {
    src["tvm_version"] = df.sources.tvm_version;
    src["tvm_version_evidence"] = df.sources.tvm_version_evidence;
  }
  root["sources"] = std::move(src);

  size_t function_nodes = 0, workspaces = 0;
  for (const Node& n : df.nodes) function_nodes += detail::is_function_node(n) ? 1 : 0;
  for (const Buffer& b : df.buffers) workspaces += b.kind == BufferKind::Workspace ? 1 : 0;
  ojson sum = ojson::object();
  sum["nodes"] = df.nodes.size();
  sum["function_nodes"] = function_nodes;
  sum["kernels"] = df.kernels.size();
  sum["library_calls"] = df.library_calls.size();
  size_t collectives = 0;
  for (const LibraryCall& c : df.library_calls) collectives += c.collective ? 1 : 0;
  if (collectives) sum["collectives"] = collectives;
  sum["buffers"] = df.buffers.size();
  sum["workspaces"] = workspaces;
  sum["dependencies"] = df.dependencies.size();
  root["summary"] = std::move(sum);

  ojson buffers = ojson::array();
  for (const Buffer& b : df.buffers) {
    ojson j = ojson::object();
    j["id"] = b.id;
    j["kind"] = to_string(b.kind);
    j["storage_id"] = b.storage_id ? ojson(*b.storage_id) : ojson(nullptr);
    j["name"] = b.name;
    j["dtype"] = b.dtype;
    j["shape"] = int_array(b.shape);
    j["bytes"] = b.bytes;
    j["entry_id"] = b.entry_id < 0 ? ojson(nullptr) : ojson(b.entry_id);
    j["node"] = b.node < 0 ? ojson(nullptr) : ojson(b.node);
    j["output_index"] = b.output_index;
    if (b.input_index >= 0) j["input_index"] = b.input_index;
    if (b.constant_index >= 0) j["constant_index"] = b.constant_index;
    if (!b.shape_expr.empty()) j["shape_expr"] = b.shape_expr;
    if (!b.values_used.empty()) j["values_used"] = b.values_used;
    if (b.per_rank) j["per_rank"] = true;
    if (b.view_of >= 0) {
      j["view_of"] = b.view_of;
      j["view_offset"] = b.view_offset;
    }
    if (b.loc.valid()) j["loc"] = loc_json(b.loc);
    buffers.push_back(std::move(j));
  }
  root["buffers"] = std::move(buffers);

  ojson kernels = ojson::array();
  for (const Kernel& k : df.kernels) {
    ojson j = ojson::object();
    j["id"] = k.id;
    j["name"] = k.name;
    j["graph_node"] = k.node;
    j["function"] = k.function;
    j["grid"] = int_array(k.grid);
    j["block"] = int_array(k.block);
    if (!k.grid_expr[0].empty()) j["grid_expr"] = ojson(std::vector<std::string>(k.grid_expr.begin(), k.grid_expr.end()));
    if (!k.block_expr[0].empty())
      j["block_expr"] = ojson(std::vector<std::string>(k.block_expr.begin(), k.block_expr.end()));
    j["dynamic_shared_memory"] = k.dynamic_shared_memory;
    j["args"] = args_json(k.args);
    if (k.loc.valid()) j["loc"] = loc_json(k.loc);
    if (!k.loop_iterations.empty()) j["loop_iterations"] = int_array(k.loop_iterations);
    if (k.programmatic_dependent_launch || k.cooperative_launch) {
      ojson attrs = ojson::array();
      if (k.programmatic_dependent_launch) attrs.push_back("programmatic_dependent_launch");
      if (k.cooperative_launch) attrs.push_back("cooperative");
      j["launch_attributes"] = std::move(attrs);
    }
    j["device_function"] = k.device_function < 0 ? ojson(nullptr) : ojson(k.device_function);
    if (k.ops) {
      ojson o = ojson::object();
      o["flops"] = k.ops->flops;
      if (k.ops->reduction_flops) o["reduction_flops"] = k.ops->reduction_flops;
      if (k.ops->barriers) o["barriers"] = k.ops->barriers;
      o["status"] = to_string(k.ops->status);
      if (!k.ops->reasons.empty()) o["reasons"] = k.ops->reasons;
      ojson counts = ojson::object();
      for (int p = 0; p < KernelOps::kPrecisions; ++p) {
        ojson per = ojson::object();
        for (int kind = 0; kind < KernelOps::kKinds; ++kind)
          if (uint64_t n = k.ops->counts[static_cast<size_t>(kind)][static_cast<size_t>(p)]) per[kind_name(kind)] = n;
        if (!per.empty()) counts[precision_name(p)] = std::move(per);
      }
      o["counts"] = std::move(counts);
      if (k.ops->load_bytes) o["load_bytes"] = *k.ops->load_bytes;
      if (k.ops->store_bytes) o["store_bytes"] = *k.ops->store_bytes;
      if (!k.ops->bytes_exact) o["bytes_exact"] = false;
      if (!k.ops->bytes_reason.empty()) o["bytes_reason"] = k.ops->bytes_reason;
      j["ops"] = std::move(o);
    }
    if (k.predicted_us) j["predicted_us"] = *k.predicted_us;
    kernels.push_back(std::move(j));
  }
  root["kernels"] = std::move(kernels);

  ojson calls = ojson::array();
  for (const LibraryCall& c : df.library_calls) {
    ojson j = ojson::object();
    j["id"] = c.id;
    j["name"] = c.name;
    j["graph_node"] = c.node;
    j["function"] = c.function;
    j["args"] = args_json(c.args);
    if (c.loc.valid()) j["loc"] = loc_json(c.loc);
    j["after_kernel"] = c.after_kernel;
    if (const Collective* k = c.collective ? &*c.collective : nullptr) {
      j["collective"] = k->kind;
      if (!k->reduce_op.empty()) j["reduce_op"] = k->reduce_op;
      j["in_group"] = k->in_group;
      j["dtype"] = k->dtype;
      j["elements"] = k->elements;
      j["bytes"] = k->bytes;
      j["send"] = k->send;
      j["recv"] = k->recv;
      j["in_place"] = k->in_place;
      if (k->peer >= 0) j["peer"] = k->peer;
    }
    calls.push_back(std::move(j));
  }
  root["library_calls"] = std::move(calls);

  if (!df.host_copies.empty()) {
    ojson copies = ojson::array();
    for (const HostCopy& c : df.host_copies) {
      ojson j = ojson::object();
      j["graph_node"] = c.node;
      j["buffer"] = c.buffer;
      j["offset"] = c.offset;
      j["dtype"] = c.dtype;
      ojson arrays = ojson::array();
      for (const HostCopy::Array& a : c.arrays) {
        ojson x = ojson::object();
        x["name"] = a.name;
        x["first"] = a.first;
        x["count"] = a.count;
        arrays.push_back(std::move(x));
      }
      j["arrays"] = std::move(arrays);
      j["values"] = c.values;
      copies.push_back(std::move(j));
    }
    root["host_copies"] = std::move(copies);
  }

  ojson nodes = ojson::array();
  for (const Node& n : df.nodes) {
    ojson j = ojson::object();
    j["id"] = n.id;
    j["op"] = n.op;
    j["name"] = n.name;
    if (!n.function.empty()) j["function"] = n.function;
    j["inputs"] = int_array(n.inputs);
    j["outputs"] = int_array(n.outputs);
    j["kernels"] = int_array(n.kernels);
    j["workspaces"] = int_array(n.workspaces);
    j["library_calls"] = int_array(n.library_calls);
    if (n.loc.valid()) j["loc"] = loc_json(n.loc);
    if (!n.cuda_graph.empty()) j["cuda_graph"] = n.cuda_graph;
    if (!n.session_step.empty()) j["session_step"] = n.session_step;
    if (!n.runtime_call.empty()) {
      j["runtime_call"] = n.runtime_call;
      j["runtime_role"] = n.runtime_role;
      j["layer"] = n.layer;
      if (!n.runtime_args.empty()) j["runtime_args"] = args_json(n.runtime_args);
    }
    if (!n.relay_source.empty()) {
      ojson ops = ojson::array();
      for (const RelayOp& op : n.relay_ops) {
        ojson o = ojson::object();
        o["name"] = op.name;
        if (!op.type.empty()) o["type"] = op.type;
        if (!op.input_types.empty()) o["inputs"] = op.input_types;
        if (!op.attrs.empty()) {
          ojson attrs = ojson::object();
          for (const RelayAttr& a : op.attrs) attrs[a.key] = detail::relay_attr_json(a);
          o["attrs"] = std::move(attrs);
        }
        ops.push_back(std::move(o));
      }
      j["relay_ops"] = std::move(ops);
      j["relay_source"] = n.relay_source;
    }
    nodes.push_back(std::move(j));
  }
  root["nodes"] = std::move(nodes);

  ojson edges = ojson::array();
  for (const Edge& e : df.edges) {
    ojson j = ojson::object();
    j["kind"] = e.kind == Edge::Kind::Read ? "read" : "write";
    j["buffer"] = e.buffer;
    j["node"] = e.node;
    edges.push_back(std::move(j));
  }
  root["edges"] = std::move(edges);

  ojson deps = ojson::array();
  for (const Dependency& d : df.dependencies) {
    ojson j = ojson::object();
    j["kind"] = to_string(d.kind);
    j["from"] = d.from;
    j["to"] = d.to;
    j["from_buffer"] = d.from_buffer;
    j["to_buffer"] = d.to_buffer;
    if (d.from_library_call) j["from_library_call"] = true;
    if (d.to_library_call) j["to_library_call"] = true;
    deps.push_back(std::move(j));
  }
  root["dependencies"] = std::move(deps);

  ojson dfuncs = ojson::array();
  for (const DeviceFunction& f : df.device_functions) {
    ojson j = ojson::object();
    j["name"] = f.name;
    j["launch_bounds"] = f.launch_bounds;
    ojson params = ojson::array();
    for (const DeviceParam& p : f.params) {
      ojson pj = ojson::object();
      pj["name"] = p.name;
      pj["type"] = p.type;
      pj["pointer"] = p.pointer;
      if (p.pointer) pj["access"] = to_string(p.access);
      params.push_back(std::move(pj));
    }
    j["params"] = std::move(params);
    if (f.loc.valid()) j["loc"] = loc_json(f.loc);
    if (!f.access_error.empty()) j["access_error"] = f.access_error;
    dfuncs.push_back(std::move(j));
  }
  root["device_functions"] = std::move(dfuncs);
  if (!df.device_errors.empty()) {
    ojson errs = ojson::array();
    for (const std::string& e : df.device_errors) errs.push_back(e);
    root["device_errors"] = std::move(errs);
  }

  root["inputs"] = int_array(df.inputs);
  root["params"] = int_array(df.params);
  root["outputs"] = int_array(df.outputs);
  return root;
}

// Pretty printer: 2-space indent; arrays of scalars and objects of at most 3 scalar
// members on one line ("grid": [400, 1, 1], {"buffer": 3, "offset": 0, "dtype": "handle"}).
std::string scalar_text(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

/// A kernel argument's footprint ({"read": [lo, hi], ..., "exact": true} or {"unknown": ...}):
/// printed on one line, and so is the argument holding it.
bool is_footprint(const ojson& j) {
  return j.is_object() && (j.contains("exact") || (j.size() == 1 && j.contains("unknown")));
}

bool is_flat(const ojson& j) {
  if (is_footprint(j))
    return std::all_of(j.begin(), j.end(), [](const ojson& e) {
      return !e.is_structured() || (e.is_array() && std::none_of(e.begin(), e.end(), [](const ojson& x) {
                                      return x.is_structured();
                                    }));
    });
  if (j.is_object() && j.size() > 5) return false;
  return std::all_of(j.begin(), j.end(), [](const ojson& e) { return !e.is_structured() || is_footprint(e); });
}

void write_value(std::string& out, const ojson& j, int depth) {
  if (!j.is_structured()) {
    out += scalar_text(j);
    return;
  }
  const char open = j.is_array() ? '[' : '{';
  const char close = j.is_array() ? ']' : '}';
  if (j.empty()) {
    out += open;
    out += close;
    return;
  }
  const bool flat = is_flat(j);
  const std::string inner(flat ? 0 : 2 * (depth + 1), ' ');
  out += open;
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += flat ? ", " : ",";
    first = false;
    if (!flat) {
      out += '\n';
      out += inner;
    }
    if (j.is_object()) {
      out += scalar_text(ojson(it.key()));
      out += ": ";
    }
    write_value(out, *it, depth + 1);
  }
  if (!flat) {
    out += '\n';
    out += std::string(2 * depth, ' ');
  }
  out += close;
}

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

}  // namespace

std::string emit_json(const Dataflow& df) {
  std::string out;
  write_value(out, build(df), 0);
  out += '\n';
  return out;
}

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

Expected<Format> format_from_name(const std::string& name) {
  const std::string n = lower(name);
  if (n == "json") return Format::Json;
  if (n == "dot") return Format::Dot;
  if (n == "text") return Format::Text;
  if (n == "chakra") return Format::Chakra;
  if (n == "html") return Format::Html;
  return Error{fmt::format("error: unknown output format '{}' (expected json, dot, text, chakra or html)", printable(name)),
               ExitCode::Usage};
}

Expected<Format> format_from_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : lower(base.substr(dot + 1));
  if (ext == "json") return Format::Json;
  if (ext == "dot" || ext == "gv") return Format::Dot;
  if (ext == "txt") return Format::Text;
  if (ext == "et") return Format::Chakra;
  if (ext == "html" || ext == "htm") return Format::Html;
  return Error{fmt::format("error: cannot tell the output format from '{}' (expected a .json, .dot, .gv, .txt, .et or .html "
                           "extension)",
                           printable(path)),
               ExitCode::Usage};
}

}  // namespace kdflow

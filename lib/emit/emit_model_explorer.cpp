// emit_model_explorer.cpp — the dataflow as Google Model Explorer's graph JSON (what its
// built-in JSON adapter reads: a list of collections, each {"label", "subgraphs": [Graph]}).
// One Model Explorer node per kernel launch and library call, plus the model's inputs and
// outputs; namespaces fold by session step / CUDA graph, then graph node (Relax: VM call);
// edges are the RAW dependencies, each into the argument that reads. Deterministic.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emit/emit_common.h"
#include "kdflow/emit/emit.h"
#include "kdflow/emit/emit_view.h"

namespace kdflow {
namespace {

using ojson = nlohmann::ordered_json;

ojson kv(const std::string& k, const std::string& v) { return ojson{{"key", k}, {"value", v}}; }

std::string dims(const std::array<int64_t, 3>& d) { return fmt::format("{}x{}x{}", d[0], d[1], d[2]); }

/// "a/b" with '/' in names replaced, so that a name never adds a namespace level.
std::string ns_part(std::string s) {
  std::replace(s.begin(), s.end(), '/', '_');
  return s;
}

std::string kernel_id(int k) { return fmt::format("k{}", k); }
std::string call_id(int c) { return fmt::format("c{}", c); }

}  // namespace

std::string emit_model_explorer(const Dataflow& df, const ViewFacts& facts) {
  std::vector<ojson> nodes;
  auto node_ns = [&](int node) {
    if (node < 0 || static_cast<size_t>(node) >= df.nodes.size()) return std::string();
    const Node& n = df.nodes[node];
    std::string ns;
    if (!n.session_step.empty()) ns += ns_part(n.session_step) + "/";
    if (!n.cuda_graph.empty()) ns += ns_part(n.cuda_graph) + "/";
    return ns + ns_part(n.name);
  };
  auto buffer_name = [&](int b) {
    return detail::valid_buffer(df, b) ? df.buffers[b].name : std::string("?");
  };

  // Model inputs.
  for (int b : df.inputs) {
    if (!detail::valid_buffer(df, b)) continue;
    const Buffer& buf = df.buffers[b];
    ojson n;
    n["id"] = fmt::format("input{}", b);
    n["label"] = "input " + buf.name;
    n["namespace"] = "";
    n["attrs"] = ojson::array({kv("dtype", buf.dtype), kv("shape", ojson(buf.shape).dump()),
                               kv("bytes", std::to_string(buf.bytes))});
    n["incomingEdges"] = ojson::array();
    nodes.push_back(std::move(n));
  }

  // Edges into each launch: RAW dependencies (the last writer of what it reads), and inputs.
  std::map<std::pair<bool, int>, std::vector<ojson>> incoming;
  auto target_arg = [&](const std::vector<Arg>& args, int buffer) {
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == Arg::Kind::Buffer && args[i].buffer == buffer) return std::to_string(i);
    return std::string("0");
  };
  for (const Dependency& d : df.dependencies) {
    if (d.kind != Dependency::Kind::RAW) continue;
    const std::vector<Arg>* args = nullptr;
    if (d.to_library_call ? static_cast<size_t>(d.to) < df.library_calls.size() : static_cast<size_t>(d.to) < df.kernels.size())
      args = d.to_library_call ? &df.library_calls[d.to].args : &df.kernels[d.to].args;
    if (!args) continue;
    incoming[{d.to_library_call, d.to}].push_back(
        ojson{{"sourceNodeId", d.from_library_call ? call_id(d.from) : kernel_id(d.from)},
              {"sourceNodeOutputId", "0"},
              {"targetNodeInputId", target_arg(*args, d.to_buffer)}});
  }
  auto input_edges = [&](bool lc, int id, const std::vector<Arg>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      if (a.kind != Arg::Kind::Buffer) continue;
      if (std::find(df.inputs.begin(), df.inputs.end(), a.buffer) == df.inputs.end()) continue;
      if (a.access == Access::Write) continue;
      incoming[{lc, id}].push_back(ojson{{"sourceNodeId", fmt::format("input{}", a.buffer)},
                                         {"sourceNodeOutputId", "0"},
                                         {"targetNodeInputId", std::to_string(i)}});
    }
  };

  auto arg_attrs = [&](ojson& attrs, const std::vector<Arg>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      std::string v;
      switch (a.kind) {
        case Arg::Kind::Buffer:
          v = fmt::format("{} ({}, {} B{})", buffer_name(a.buffer), to_string(a.access),
                          detail::valid_buffer(df, a.buffer) ? df.buffers[a.buffer].bytes : 0,
                          a.offset ? fmt::format(", offset {}", a.offset) : "");
          break;
        case Arg::Kind::Int: v = a.expr.empty() ? std::to_string(a.int_value) : a.expr; break;
        case Arg::Kind::Float: v = detail::float_text(a.float_value); break;
        case Arg::Kind::Null: v = a.text.empty() ? "null" : a.text; break;
      }
      attrs.push_back(kv(fmt::format("arg{}", i), v));
    }
  };
  auto cost_attrs = [&](ojson& attrs, const KernelCost* c) {
    if (!c) return;
    if (c->flops) attrs.push_back(kv("flops", std::to_string(*c->flops)));
    else if (c->counted && c->counted->flops) attrs.push_back(kv("flops", std::to_string(*c->counted->flops) + " (counted)"));
    attrs.push_back(kv("bytes", std::to_string(c->bytes)));
    if (c->bound) attrs.push_back(kv("bound_us", fmt::format("{:.3f}", c->bound->us())));
    if (c->measured) attrs.push_back(kv("time_us", fmt::format("{:.3f}", c->measured->us)));
  };

  // Launches in order: kernels, each followed by the library calls made after it.
  std::map<int, std::vector<int>> calls_after;
  for (const LibraryCall& c : df.library_calls) calls_after[c.after_kernel].push_back(c.id);
  auto emit_call = [&](int id) {
    const LibraryCall& c = df.library_calls[id];
    input_edges(true, id, c.args);
    ojson n;
    n["id"] = call_id(id);
    n["label"] = c.name;
    n["namespace"] = node_ns(c.node);
    ojson attrs = ojson::array({kv("library_call", std::to_string(id)), kv("function", c.function)});
    arg_attrs(attrs, c.args);
    n["attrs"] = attrs;
    n["incomingEdges"] = incoming[{true, id}];
    nodes.push_back(std::move(n));
  };
  for (int id : calls_after[-1]) emit_call(id);
  for (const Kernel& k : df.kernels) {
    input_edges(false, k.id, k.args);
    ojson n;
    n["id"] = kernel_id(k.id);
    n["label"] = k.name;
    n["namespace"] = node_ns(k.node);
    ojson attrs = ojson::array({kv("launch", std::to_string(k.id)), kv("function", k.function),
                                kv("grid", dims(k.grid)), kv("block", dims(k.block)),
                                kv("dynamic_shared_memory", std::to_string(k.dynamic_shared_memory))});
    if (k.node >= 0 && static_cast<size_t>(k.node) < df.nodes.size()) {
      std::string ops;
      for (const RelayOp& op : df.nodes[k.node].relay_ops) ops += (ops.empty() ? "" : ", ") + op.name;
      if (!ops.empty()) attrs.push_back(kv("ops", ops));
      attrs.push_back(kv("family", relay_family(df.nodes[k.node])));
    }
    cost_attrs(attrs, facts.costs && static_cast<size_t>(k.id) < facts.costs->kernels.size()
                          ? &facts.costs->kernels[k.id]
                          : nullptr);
    arg_attrs(attrs, k.args);
    n["attrs"] = attrs;
    n["incomingEdges"] = incoming[{false, k.id}];
    nodes.push_back(std::move(n));
    for (int id : calls_after[k.id]) emit_call(id);
  }
  for (const auto& [after, ids] : calls_after) {
    if (after == -1 || (after >= 0 && static_cast<size_t>(after) < df.kernels.size())) continue;
    for (int id : ids) emit_call(id);
  }

  // Model outputs, fed by the last launch that writes them.
  for (int b : df.outputs) {
    if (!detail::valid_buffer(df, b)) continue;
    std::string writer;
    for (const Kernel& k : df.kernels)
      for (const Arg& a : k.args)
        if (a.kind == Arg::Kind::Buffer && a.buffer == b && a.access != Access::Read) writer = kernel_id(k.id);
    for (const LibraryCall& c : df.library_calls)
      for (const Arg& a : c.args)
        if (a.kind == Arg::Kind::Buffer && a.buffer == b && writer.empty()) writer = call_id(c.id);
    const Buffer& buf = df.buffers[b];
    ojson n;
    n["id"] = fmt::format("output{}", b);
    n["label"] = "output " + buf.name;
    n["namespace"] = "";
    n["attrs"] = ojson::array({kv("dtype", buf.dtype), kv("shape", ojson(buf.shape).dump()),
                               kv("bytes", std::to_string(buf.bytes))});
    n["incomingEdges"] = writer.empty() ? ojson::array()
                                        : ojson::array({ojson{{"sourceNodeId", writer},
                                                              {"sourceNodeOutputId", "0"},
                                                              {"targetNodeInputId", "0"}}});
    nodes.push_back(std::move(n));
  }

  ojson graph;
  graph["id"] = facts.title.empty() ? "kdflow" : facts.title;
  graph["nodes"] = nodes;
  ojson collection;
  collection["label"] = facts.title.empty() ? "kdflow" : facts.title;
  collection["subgraphs"] = ojson::array({graph});
  return ojson::array({collection}).dump(1, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace kdflow

// node_reference.cpp — reference/nodes.json onto a flow's nodes (see node_reference.h).
#include "kdflow/formats/node_reference.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "json_read.h"
#include "kdflow/support/io.h"

namespace kdflow {

namespace {

using detail::json;

/// A relative path with no "..", no root: the arrays stay inside the references' folder.
bool contained(const std::string& p) {
  if (p.empty() || p.size() > 4096) return false;
  std::filesystem::path path(p);
  if (path.is_absolute() || path.has_root_name()) return false;
  for (const auto& part : path)
    if (part == "..") return false;
  return p.find('\0') == std::string::npos;
}

bool same_type(const Buffer& b, const std::string& dtype, const std::vector<int64_t>& shape) {
  return b.dtype == dtype && b.shape == shape;
}

}  // namespace

Expected<NodeReferences> read_node_references(const std::string& file, const Dataflow& df) {
  Expected<std::string> text = read_file(file, 64ull << 20);
  if (!text) return text.error();
  Expected<json> doc = detail::parse_json_text(*text, file);
  if (!doc) return doc.error();
  auto bad = [&](const std::string& ptr, const std::string& msg) {
    return file_error(file + ":" + ptr, msg, ExitCode::DataError);
  };
  if (!doc->is_object()) return bad("", "expected an object");
  const json* format = detail::member(*doc, "format");
  if (!format || !format->is_string() || format->get<std::string>() != "kdflow-node-reference/1")
    return bad("/format", "expected \"kdflow-node-reference/1\"");
  const json* frontend = detail::member(*doc, "frontend");
  if (!frontend || !frontend->is_string() ||
      (frontend->get<std::string>() != "relay" && frontend->get<std::string>() != "relax"))
    return bad("/frontend", "expected \"relay\" or \"relax\"");
  bool relay = frontend->get<std::string>() == "relay";
  const json* nodes = detail::member(*doc, "nodes");
  if (!nodes || !nodes->is_array()) return bad("/nodes", "expected an array");

  NodeReferences out;
  out.file = file;
  out.nodes_in_file = static_cast<int>(nodes->size());
  std::string dir = std::filesystem::path(file).parent_path().string();  // files are relative to it

  // Relax: the k-th flow node calling F, per F.
  std::map<std::string, std::vector<int>> by_function;
  for (const Node& n : df.nodes)
    if (n.op == "tvm_op") by_function[n.function].push_back(n.id);

  std::set<int> referenced;
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& e = (*nodes)[i];
    std::string at = detail::ptr_at("/nodes", i);
    if (!e.is_object()) return bad(at, "expected an object");
    const json* fn = detail::member(e, "function");
    if (!fn || !fn->is_string()) return bad(at + "/function", "expected a string");
    std::string function = fn->get<std::string>();
    int node = -1;
    if (relay) {
      int64_t g = 0;
      const json* gn = detail::member(e, "graph_node");
      if (!gn || !detail::int_in_range(*gn, 0, 1 << 30, &g)) return bad(at + "/graph_node", "expected a node index");
      if (static_cast<size_t>(g) < df.nodes.size() && df.nodes[g].op == "tvm_op" && df.nodes[g].function == function)
        node = static_cast<int>(g);
      else {
        out.not_compared.push_back(fmt::format("reference node {} ({}): the flow's node {} is not that function",
                                               g, function, g));
        continue;
      }
    } else {
      int64_t k = 0;
      const json* occ = detail::member(e, "occurrence");
      if (!occ || !detail::int_in_range(*occ, 0, 1 << 30, &k)) return bad(at + "/occurrence", "expected a count");
      auto it = by_function.find(function);
      if (it == by_function.end() || static_cast<size_t>(k) >= it->second.size()) {
        out.not_compared.push_back(fmt::format("reference call {} of {}: the flow has no such call", k, function));
        continue;
      }
      node = it->second[k];
    }
    ++out.nodes_mapped;
    referenced.insert(node);
    const json* outs = detail::member(e, "outputs");
    if (!outs || !outs->is_array()) return bad(at + "/outputs", "expected an array");
    std::set<int> used;
    const Node& n = df.nodes[node];
    for (size_t j = 0; j < outs->size(); ++j) {
      const json& o = (*outs)[j];
      std::string oat = detail::ptr_at(at + "/outputs", j);
      if (!o.is_object()) return bad(oat, "expected an object");
      const json* f = detail::member(o, "file");
      const json* dt = detail::member(o, "dtype");
      const json* sh = detail::member(o, "shape");
      if (!f || !f->is_string() || !contained(f->get<std::string>()))
        return bad(oat + "/file", "expected a path inside the folder");
      if (!dt || !dt->is_string()) return bad(oat + "/dtype", "expected a string");
      if (!sh || !sh->is_array() || sh->size() > 32) return bad(oat + "/shape", "expected an array of dimensions");
      std::vector<int64_t> shape;
      for (size_t d = 0; d < sh->size(); ++d) {
        int64_t v = 0;
        if (!detail::int_in_range((*sh)[d], 0, int64_t(1) << 48, &v))
          return bad(detail::ptr_at(oat + "/shape", d), "expected a dimension");
        shape.push_back(v);
      }
      std::string dtype = dt->get<std::string>();
      // Relay: output k is the node's k-th output. Relax: the first unused output of that type.
      int buffer = -1;
      if (relay) {
        int64_t k = static_cast<int64_t>(j);
        if (const json* ok = detail::member(o, "output"); ok && !detail::int_in_range(*ok, 0, 1 << 20, &k))
          return bad(oat + "/output", "expected an output index");
        if (static_cast<size_t>(k) < n.outputs.size() && same_type(df.buffers[n.outputs[k]], dtype, shape))
          buffer = n.outputs[k];
      } else {
        for (int b : n.outputs)
          if (!used.count(b) && same_type(df.buffers[b], dtype, shape)) {
            buffer = b;
            break;
          }
      }
      std::string label = fmt::format("node {} {}, output {}", node, n.name, j);
      if (buffer < 0) {
        out.not_compared.push_back(fmt::format("{}: the flow's node has no output {} {}", label, dtype,
                                               fmt::format("[{}]", fmt::join(shape, ", "))));
        continue;
      }
      used.insert(buffer);
      out.checks.push_back({node, buffer, (std::filesystem::path(dir) / f->get<std::string>()).string(), label});
    }
  }
  for (const Node& n : df.nodes)
    if (n.op == "tvm_op" && !n.kernels.empty() && !referenced.count(n.id))
      out.not_compared.push_back(fmt::format("node {} {}: no reference for it", n.id, n.name));
  return out;
}

}  // namespace kdflow

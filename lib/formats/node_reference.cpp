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

  // 1. Parse every entry (and refuse a malformed one before anything is mapped).
  struct Output {
    std::string file, dtype, at;
    std::vector<int64_t> shape;
    int64_t index = 0;  ///< Relay: the node's output index
  };
  struct Entry {
    std::string function;
    int64_t key = 0;     ///< Relay: graph node index; Relax: occurrence
    int node = -1;       ///< the flow node it stands for
    bool by_position = false;
    std::vector<Output> outputs;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& e = (*nodes)[i];
    std::string at = detail::ptr_at("/nodes", i);
    if (!e.is_object()) return bad(at, "expected an object");
    const json* fn = detail::member(e, "function");
    if (!fn || !fn->is_string()) return bad(at + "/function", "expected a string");
    Entry entry;
    entry.function = fn->get<std::string>();
    const char* key = relay ? "graph_node" : "occurrence";
    const json* k = detail::member(e, key);
    if (!k || !detail::int_in_range(*k, 0, 1 << 30, &entry.key))
      return bad(at + "/" + key, relay ? "expected a node index" : "expected a count");
    const json* outs = detail::member(e, "outputs");
    if (!outs || !outs->is_array()) return bad(at + "/outputs", "expected an array");
    for (size_t j = 0; j < outs->size(); ++j) {
      const json& o = (*outs)[j];
      Output out_;
      out_.at = detail::ptr_at(at + "/outputs", j);
      if (!o.is_object()) return bad(out_.at, "expected an object");
      const json* f = detail::member(o, "file");
      const json* dt = detail::member(o, "dtype");
      const json* sh = detail::member(o, "shape");
      if (!f || !f->is_string() || !contained(f->get<std::string>()))
        return bad(out_.at + "/file", "expected a path inside the folder");
      if (!dt || !dt->is_string()) return bad(out_.at + "/dtype", "expected a string");
      if (!sh || !sh->is_array() || sh->size() > 32) return bad(out_.at + "/shape", "expected an array of dimensions");
      for (size_t d = 0; d < sh->size(); ++d) {
        int64_t v = 0;
        if (!detail::int_in_range((*sh)[d], 0, int64_t(1) << 48, &v))
          return bad(detail::ptr_at(out_.at + "/shape", d), "expected a dimension");
        out_.shape.push_back(v);
      }
      out_.index = static_cast<int64_t>(j);
      if (const json* oi = detail::member(o, "output"); oi && !detail::int_in_range(*oi, 0, 1 << 20, &out_.index))
        return bad(out_.at + "/output", "expected an output index");
      out_.file = f->get<std::string>();
      out_.dtype = dt->get<std::string>();
      entry.outputs.push_back(std::move(out_));
    }
    entries.push_back(std::move(entry));
  }

  // 2. Map each entry onto a flow node. Relay: by graph node index (the function must agree).
  //    Relax: the k-th call of F is the k-th flow node calling F.
  std::map<std::string, std::vector<int>> by_function;
  for (const Node& n : df.nodes)
    if (n.op == "tvm_op") by_function[n.function].push_back(n.id);
  for (Entry& e : entries) {
    if (relay) {
      if (static_cast<size_t>(e.key) < df.nodes.size() && df.nodes[e.key].op == "tvm_op" &&
          df.nodes[e.key].function == e.function)
        e.node = static_cast<int>(e.key);
      continue;
    }
    auto it = by_function.find(e.function);
    if (it != by_function.end() && static_cast<size_t>(e.key) < it->second.size()) e.node = it->second[e.key];
  }
  // Relax: a call the CPU build names otherwise (a CUDA-only dispatch: TVM's CPU build calls
  // `cumsum` what the CUDA build calls `gpu_2d_continuous_cumsum`) is matched by position: a
  // run of unmapped entries between two mapped ones pairs with the flow's unreferenced nodes
  // with kernels between the same two nodes, when the runs are equally long (the outputs'
  // dtypes and shapes must still agree below).
  if (!relay) {
    std::set<int> mapped;
    for (const Entry& e : entries)
      if (e.node >= 0) mapped.insert(e.node);
    for (size_t i = 0; i < entries.size();) {
      if (entries[i].node >= 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < entries.size() && entries[j].node < 0) ++j;
      const int lo = i > 0 ? entries[i - 1].node : -1;
      const int hi = j < entries.size() ? entries[j].node : static_cast<int>(df.nodes.size());
      std::vector<int> free;
      for (int n = lo + 1; n < hi && n >= 0 && static_cast<size_t>(n) < df.nodes.size(); ++n)
        if (df.nodes[n].op == "tvm_op" && !df.nodes[n].kernels.empty() && !mapped.count(n)) free.push_back(n);
      if (lo < hi && free.size() == j - i)
        for (size_t k = i; k < j; ++k) {
          entries[k].node = free[k - i];
          entries[k].by_position = true;
        }
      i = j;
    }
  }

  // 3. Each output onto the node's output of the same dtype and shape.
  std::set<int> referenced;
  for (const Entry& e : entries) {
    if (e.node < 0) {
      out.not_compared.push_back(relay ? fmt::format("reference node {} ({}): the flow's node {} is not that function",
                                                     e.key, e.function, e.key)
                                       : fmt::format("reference call {} of {}: the flow has no such call", e.key,
                                                     e.function));
      continue;
    }
    ++out.nodes_mapped;
    referenced.insert(e.node);
    const Node& n = df.nodes[e.node];
    std::set<int> used;
    for (const Output& o : e.outputs) {
      // Relay: output k is the node's k-th output. Relax: the first unused output of that type.
      int buffer = -1;
      if (relay) {
        if (static_cast<size_t>(o.index) < n.outputs.size() && same_type(df.buffers[n.outputs[o.index]], o.dtype, o.shape))
          buffer = n.outputs[o.index];
      } else {
        for (int b : n.outputs)
          if (!used.count(b) && same_type(df.buffers[b], o.dtype, o.shape)) {
            buffer = b;
            break;
          }
      }
      std::string label = fmt::format("node {} {}, output {}", e.node, n.name, o.index);
      if (e.by_position) label += fmt::format(" (TVM's CPU build calls it {}; matched by position)", e.function);
      if (buffer < 0) {
        out.not_compared.push_back(fmt::format("{}: the flow's node has no output {} [{}]", label, o.dtype,
                                               fmt::join(o.shape, ", ")));
        continue;
      }
      used.insert(buffer);
      out.checks.push_back({e.node, buffer, (std::filesystem::path(dir) / o.file).string(), label});
    }
  }
  for (const Node& n : df.nodes)
    if (n.op == "tvm_op" && !n.kernels.empty() && !referenced.count(n.id))
      out.not_compared.push_back(fmt::format("node {} {}: no reference for it", n.id, n.name));
  return out;
}

}  // namespace kdflow

// emit_dot.cpp — the IR as a Graphviz digraph: one cluster per graph node holding its
// kernels, library calls and workspaces; buffers as nodes coloured by kind; one edge per
// (kernel, buffer) pair, directed by the buffer's graph-level role. Deterministic, plain
// quoted labels (no HTML, no record shapes), every ID quoted. DotOptions select other
// views of the same IR: no clusters, one box per graph node (--collapse), fills by
// operator family, kernel → kernel RAW edges instead of buffer nodes; the default
// options print exactly what emit_dot(df) always printed (test/golden/*.dot).
#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "emit_common.h"
#include "kdflow/emit/emit.h"

namespace kdflow {
namespace {

/// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_sequence(const std::string& s, size_t i) {
  auto byte = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned c = byte(i);
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

/// Text for inside a DOT double-quoted string: escapes `"` and `\`, writes newlines as
/// the `\n` line break, replaces other control bytes and invalid UTF-8 with '?'.
std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else if (c >= 0x80) {
      size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out += '?';
      } else {
        out.append(s, i, n);
        i += n;
        continue;
      }
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

/// A label from lines, each escaped, joined by DOT's `\n`; returned quoted.
std::string label(const std::vector<std::string>& lines) {
  std::string out = "\"";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\\n";
    out += esc(lines[i]);
  }
  return out + "\"";
}

// --- operator families ---------------------------------------------------------

struct Family {
  const char* name;
  const char* color;
};
// In priority order: a node's family is the first one any of its Relay ops belongs to.
constexpr Family kFamilies[] = {
    {"conv", "#f4cccc"},      {"dense", "#c9daf8"},         {"sort", "#d9d2e9"},
    {"reduction", "#f9cb9c"}, {"pooling", "#b4a7d6"},       {"data movement", "#d0e0e3"},
    {"elementwise", "#fff2cc"}, {"other", "#eeeeee"},
};
constexpr size_t kFamilyCount = sizeof(kFamilies) / sizeof(kFamilies[0]);

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

/// Index in kFamilies of one Relay op (a dialect prefix such as "qnn." or "dyn." ignored).
size_t op_family(std::string op) {
  for (const char* prefix : {"qnn.", "dyn."})
    if (op.compare(0, std::char_traits<char>::length(prefix), prefix) == 0) op = op.substr(std::char_traits<char>::length(prefix));
  auto has = [&](const char* part) { return op.find(part) != std::string::npos; };
  if (has("conv")) return 0;
  if (has("dense") || has("matmul")) return 1;
  if (one_of(op, {"sort", "argsort", "topk", "cumsum", "cumprod", "unique", "searchsorted",
                  "vision.non_max_suppression", "vision.get_valid_counts"}))
    return 2;
  if (one_of(op, {"sum", "mean", "max", "min", "prod", "argmax", "argmin", "variance", "std", "logsumexp", "all",
                  "any", "nn.softmax", "nn.log_softmax", "nn.fast_softmax", "nn.batch_norm", "nn.layer_norm",
                  "nn.group_norm", "nn.instance_norm", "nn.l2_normalize", "nn.lrn", "norm"}))
    return 3;
  if (has("pool")) return 4;
  if (one_of(op, {"reshape", "reshape_like", "transpose", "concatenate", "split", "squeeze", "expand_dims",
                  "layout_transform", "strided_slice", "slice_like", "take", "gather", "gather_nd", "scatter",
                  "scatter_nd", "scatter_elements", "stack", "tile", "repeat", "broadcast_to", "broadcast_to_like",
                  "nn.pad", "nn.batch_flatten", "copy", "reverse", "reverse_sequence", "nn.depth_to_space",
                  "nn.space_to_depth", "image.resize1d", "image.resize2d", "image.resize3d", "one_hot", "arange",
                  "meshgrid", "device_copy"}))
    return 5;
  if (one_of(op, {"add", "subtract", "multiply", "divide", "floor_divide", "floor_mod", "mod", "power", "maximum",
                  "minimum", "nn.relu", "nn.leaky_relu", "nn.prelu", "nn.bias_add", "nn.dropout", "exp", "log",
                  "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "fast_exp", "fast_tanh", "fast_erf",
                  "clip", "cast", "cast_like", "negative", "abs", "sign", "round", "floor", "ceil", "trunc", "where",
                  "sin", "cos", "tan", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                  "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
                  "bitwise_not", "left_shift", "right_shift", "isnan", "isinf", "isfinite", "zeros", "ones", "full",
                  "zeros_like", "ones_like", "full_like", "fixed_point_multiply", "requantize", "quantize",
                  "dequantize", "annotation.stop_fusion"}))
    return 6;
  return 7;
}

size_t node_family(const Node& n) {
  size_t best = kFamilyCount - 1;
  for (const RelayOp& op : n.relay_ops) best = std::min(best, op_family(op.name));
  return best;
}

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < 4) v /= 1024.0, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string dim3_text(const std::array<int64_t, 3>& d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); }

std::string buffer_id(int b) { return fmt::format("\"buf{}\"", b); }
std::string kernel_id(int k) { return fmt::format("\"k{}\"", k); }
std::string call_id(int c) { return fmt::format("\"lib{}\"", c); }
std::string from_id(const Dependency& d) { return d.from_library_call ? call_id(d.from) : kernel_id(d.from); }
std::string to_id(const Dependency& d) { return d.to_library_call ? call_id(d.to) : kernel_id(d.to); }
std::string node_box_id(int n) { return fmt::format("\"node{}\"", n); }

std::string scalar_text(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::Int: return std::to_string(a.int_value);
    case Arg::Kind::Float: return detail::float_text(a.float_value);
    case Arg::Kind::Null: return "null";
    case Arg::Kind::Buffer: break;
  }
  return "";
}

/// "args: 1, 0.5" for the scalar arguments, or "" when there are none.
std::string scalars_line(const std::vector<Arg>& args) {
  std::vector<std::string> v;
  for (const Arg& a : args)
    if (a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Float) v.push_back(scalar_text(a));
  return v.empty() ? "" : "scalars: " + fmt::format("{}", fmt::join(v, ", "));
}

std::string buffer_stmt(const Buffer& b) {
  std::vector<std::string> lines{b.name};
  std::string attrs;
  switch (b.kind) {
    case BufferKind::Input:
      attrs = "shape=ellipse, style=filled, fillcolor=\"#cfe2f3\"";
      break;
    case BufferKind::Param:
      attrs = "shape=note, style=filled, fillcolor=\"#eeeeee\", fontsize=8, height=0.2, margin=\"0.05,0.02\"";
      break;
    case BufferKind::Intermediate:
      attrs = "shape=ellipse, style=filled, fillcolor=\"#ffffff\"";
      break;
    case BufferKind::Output:
      attrs = "shape=ellipse, style=filled, fillcolor=\"#d9ead3\", peripheries=2";
      break;
    case BufferKind::Workspace:
      attrs = "shape=note, style=filled, fillcolor=\"#fff2cc\"";
      break;
  }
  if (b.kind == BufferKind::Workspace) {
    lines.push_back(fmt::format("workspace {}", human_bytes(b.bytes)));
  } else {
    lines.push_back(b.dtype + " " + shape_text(b.shape));
    std::string last = human_bytes(b.bytes);
    if (b.storage_id) last += fmt::format("  sid {}", *b.storage_id);
    lines.push_back(last);
  }
  return fmt::format("{} [label={}, {}];", buffer_id(b.id), label(lines), attrs);
}

struct Writer {
  const Dataflow& df;
  const DotOptions& opt;
  std::string out;
  std::vector<bool> families_used = std::vector<bool>(kFamilyCount);

  void line(int indent, const std::string& s) {
    out.append(static_cast<size_t>(indent) * 2, ' ');
    out += s;
    out += '\n';
  }

  const Node* node_of(int id) const {
    return id >= 0 && static_cast<size_t>(id) < df.nodes.size() ? &df.nodes[id] : nullptr;
  }

  /// The fill of a launch or node box: "#fce5cd", or its node's family colour.
  std::string fill_of(int node) {
    if (!opt.op_colors) return "#fce5cd";
    const Node* n = node_of(node);
    const size_t f = n ? node_family(*n) : kFamilyCount - 1;
    families_used[f] = true;
    return kFamilies[f].color;
  }

  std::string kernel_stmt(const Kernel& k) {
    std::vector<std::string> lines{k.name, fmt::format("<<<{}, {}, {}>>>", dim3_text(k.grid), dim3_text(k.block),
                                                      k.dynamic_shared_memory)};
    if (std::string s = scalars_line(k.args); !s.empty()) lines.push_back(s);
    if (opt.cluster == DotOptions::Cluster::None) lines.push_back(fmt::format("node {}", k.node));
    return fmt::format("{} [label={}, shape=box, style=filled, fillcolor=\"{}\"];", kernel_id(k.id), label(lines),
                       fill_of(k.node));
  }

  std::string call_stmt(const LibraryCall& c) const {
    std::vector<std::string> lines{c.name, "library call"};
    if (std::string s = scalars_line(c.args); !s.empty()) lines.push_back(s);
    if (opt.cluster == DotOptions::Cluster::None) lines.push_back(fmt::format("node {}", c.node));
    return fmt::format("{} [label={}, shape=hexagon, style=filled, fillcolor=\"#d9d2e9\"];", call_id(c.id),
                       label(lines));
  }

  /// Edges between one launch (kernel or library call) and the buffers among its
  /// arguments: one per distinct buffer. Directed by the argument's access when the device
  /// source told it (writer -> buffer -> reader; read-write: both ways), else by the
  /// node's graph-level roles.
  void arg_edges(const std::string& from, int node, const std::vector<Arg>& args) {
    const Node* n = node_of(node);
    std::vector<int> order;                       // buffers in first-use order
    std::vector<std::vector<int64_t>> offsets;    // their distinct offsets
    std::vector<unsigned> access;                 // bit 1 read, bit 2 write, bit 4 unknown
    for (const Arg& a : args) {
      if (a.kind != Arg::Kind::Buffer || !detail::valid_buffer(df, a.buffer)) continue;
      auto it = std::find(order.begin(), order.end(), a.buffer);
      size_t i = static_cast<size_t>(it - order.begin());
      if (it == order.end()) order.push_back(a.buffer), offsets.emplace_back(), access.push_back(0);
      if (std::find(offsets[i].begin(), offsets[i].end(), a.offset) == offsets[i].end())
        offsets[i].push_back(a.offset);
      access[i] |= a.access == Access::Read        ? 1u
                   : a.access == Access::Write     ? 2u
                   : a.access == Access::ReadWrite ? 3u
                                                   : 4u;
    }
    for (size_t i = 0; i < order.size(); ++i) {
      const int b = order[i];
      std::string lab;
      if (std::any_of(offsets[i].begin(), offsets[i].end(), [](int64_t o) { return o != 0; })) {
        std::vector<std::string> parts;
        for (int64_t o : offsets[i]) parts.push_back(fmt::format("+{}", o));
        lab = fmt::format("label=\"{}\"", fmt::join(parts, ", "));
      }
      auto attrs = [&](std::string a) {
        if (!lab.empty()) a = a.empty() ? lab : a + ", " + lab;
        return a.empty() ? std::string(";") : " [" + a + "];";
      };
      const bool workspace = df.buffers[b].kind == BufferKind::Workspace;
      const std::string ws_style = workspace ? "style=dashed, constraint=false" : "";
      auto with = [&](const std::string& a, const std::string& extra) {
        if (a.empty()) return extra;
        return extra.empty() ? a : a + ", " + extra;
      };
      if (!(access[i] & 4u)) {
        const bool reads = access[i] & 1u, writes = access[i] & 2u;
        if (reads && writes) line(1, from + " -> " + buffer_id(b) + attrs(with(ws_style, "dir=both")));
        else if (writes) line(1, from + " -> " + buffer_id(b) + attrs(ws_style));
        else line(1, buffer_id(b) + " -> " + from + attrs(ws_style));
        continue;
      }
      // A node lists the views it was given; the argument names the viewed buffer.
      auto lists = [&](const std::vector<int>& ids) {
        return std::any_of(ids.begin(), ids.end(), [&](int x) { return x == b || df.buffers[x].view_of == b; });
      };
      const bool is_in = n && lists(n->inputs);
      const bool is_out = n && lists(n->outputs);
      if (workspace) {
        line(1, from + " -> " + buffer_id(b) + attrs("style=dashed, dir=both, constraint=false"));
        continue;
      }
      if (is_in) line(1, buffer_id(b) + " -> " + from + attrs(""));
      if (is_out) line(1, from + " -> " + buffer_id(b) + attrs(""));
      if (!is_in && !is_out)  // not a graph-level input or output of the node: shown, marked
        line(1, from + " -> " + buffer_id(b) +
                    attrs("style=dotted, dir=both, color=\"#cc0000\", tooltip=\"neither input nor output of its node\""));
    }
  }

  void header() {
    line(0, "digraph kdflow {");
    line(1, "graph [rankdir=TB, fontname=\"Helvetica\", fontsize=10, nodesep=0.25, ranksep=0.4];");
    line(1, "node [fontname=\"Helvetica\", fontsize=10];");
    line(1, "edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];");
  }

  /// "sid 3" for graph memory, "ws0" for a node's first workspace.
  std::string memory_text(int b) const {
    if (!detail::valid_buffer(df, b)) return fmt::format("buffer {}", b);
    const Buffer& buf = df.buffers[b];
    if (buf.storage_id) return fmt::format("sid {}", *buf.storage_id);
    if (const Node* n = node_of(buf.node)) {
      auto it = std::find(n->workspaces.begin(), n->workspaces.end(), b);
      if (it != n->workspaces.end()) return fmt::format("ws{}", it - n->workspaces.begin());
    }
    return buf.name;
  }

  /// Kernel → kernel edges, one per (from, to) pair of RAW dependencies, labelled with
  /// the memory the value passes through.
  void raw_edges() {
    std::vector<std::pair<std::pair<std::string, std::string>, std::vector<std::string>>> pairs;
    for (const Dependency& d : df.dependencies) {
      if (d.kind != Dependency::Kind::RAW) continue;
      auto key = std::make_pair(from_id(d), to_id(d));
      auto it = std::find_if(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == key; });
      if (it == pairs.end()) it = pairs.insert(pairs.end(), {key, {}});
      const std::string m = memory_text(d.from_buffer);
      if (std::find(it->second.begin(), it->second.end(), m) == it->second.end()) it->second.push_back(m);
    }
    for (const auto& p : pairs)
      line(1, fmt::format("{} -> {} [label=\"{}\"];", p.first.first, p.first.second,
                          esc(fmt::format("{}", fmt::join(p.second, ", ")))));
  }

  void legend() {
    if (!opt.op_colors || std::none_of(families_used.begin(), families_used.end(), [](bool b) { return b; })) return;
    out += '\n';
    line(1, "// operator families (from each node's Relay ops)");
    line(1, "subgraph \"cluster_legend\" {");
    line(2, "label=\"operator family\"; style=rounded; color=\"#999999\"; fontsize=10;");
    int previous = -1;
    for (size_t f = 0; f < kFamilyCount; ++f) {
      if (!families_used[f]) continue;
      line(2, fmt::format("\"family{}\" [label=\"{}\", shape=box, style=filled, fillcolor=\"{}\"];", f,
                          kFamilies[f].name, kFamilies[f].color));
      if (previous >= 0) line(2, fmt::format("\"family{}\" -> \"family{}\" [style=invis];", previous, f));
      previous = static_cast<int>(f);
    }
    line(1, "}");
  }

  void run() {
    if (opt.collapse) return run_collapsed();
    header();
    const bool clusters = opt.cluster == DotOptions::Cluster::Node;
    const int in = clusters ? 2 : 1;  // indentation of what a cluster holds

    // Which launches and workspaces live in which cluster.
    std::vector<bool> kernel_placed(df.kernels.size()), call_placed(df.library_calls.size()),
        buffer_placed(df.buffers.size());
    std::vector<const Node*> clustered;  // nodes drawn as clusters
    for (const Node& n : df.nodes)
      if (!n.kernels.empty() || !n.library_calls.empty()) clustered.push_back(&n);

    out += '\n';
    line(1, clusters ? "// graph nodes: kernels, library calls and workspaces"
                     : "// graph nodes' kernels, library calls and workspaces (no clusters)");
    for (const Node* np : clustered) {
      const Node& n = *np;
      std::vector<std::string> title{fmt::format("node {}", n.id), n.name};
      if (!n.function.empty() && n.function != n.name) title.push_back(n.function);
      if (clusters) {
        line(1, fmt::format("subgraph \"cluster_node{}\" {{", n.id));
        line(2, fmt::format("label={}; style=rounded; color=\"#999999\"; fontsize=10;", label(title)));
      }
      int previous = -1;
      for (int k : n.kernels) {
        if (k < 0 || static_cast<size_t>(k) >= df.kernels.size() || kernel_placed[k]) continue;
        line(in, kernel_stmt(df.kernels[k]));
        kernel_placed[k] = true;
        // Invisible edges stack a node's kernels top-down in launch order.
        if (previous >= 0) line(in, kernel_id(previous) + " -> " + kernel_id(k) + " [style=invis];");
        previous = k;
      }
      for (int c : n.library_calls)
        if (c >= 0 && static_cast<size_t>(c) < df.library_calls.size() && !call_placed[c])
          line(in, call_stmt(df.library_calls[c])), call_placed[c] = true;
      for (int w : n.workspaces)
        if (detail::valid_buffer(df, w) && !buffer_placed[w]) {
          if (opt.buffers) line(in, buffer_stmt(df.buffers[w]));
          buffer_placed[w] = true;
        }
      if (clusters) line(1, "}");
    }

    // Nodes that launch nothing (__nop, __copy, functions without kernels): a dashed box
    // joined to the node's graph inputs and outputs, so the graph stays connected.
    // Without buffer nodes they would stand alone: not drawn.
    std::vector<const Node*> boxes;
    for (const Node& n : df.nodes)
      if (n.op != "null" && n.kernels.empty() && n.library_calls.empty() && opt.buffers) boxes.push_back(&n);
    if (!boxes.empty()) {
      out += '\n';
      line(1, "// graph nodes without launches");
      for (const Node* n : boxes) {
        std::vector<std::string> lines{fmt::format("node {}", n->id), n->name};
        if (!n->function.empty() && n->function != n->name) lines.push_back(n->function);
        line(1, fmt::format("{} [label={}, shape=box, style=\"dashed,rounded\"];", node_box_id(n->id), label(lines)));
      }
    }

    out += '\n';
    if (opt.buffers) {
      line(1, "// buffers");
      for (size_t i = 0; i < df.buffers.size(); ++i)
        if (!buffer_placed[i]) line(1, buffer_stmt(df.buffers[i]));
    }
    bool orphans = false;
    for (size_t i = 0; i < df.kernels.size(); ++i)
      if (!kernel_placed[i]) {
        if (!orphans) line(1, "// launches not listed by any graph node"), orphans = true;
        line(1, kernel_stmt(df.kernels[i]));
      }
    for (size_t i = 0; i < df.library_calls.size(); ++i)
      if (!call_placed[i]) {
        if (!orphans) line(1, "// launches not listed by any graph node"), orphans = true;
        line(1, call_stmt(df.library_calls[i]));
      }

    if (!opt.buffers) {
      line(1, "// read-after-write dependencies between kernels, through the memory named on each edge");
      raw_edges();
      legend();
      line(0, "}");
      return;
    }
    out += '\n';
    line(1, "// kernel and library-call arguments");
    for (const Kernel& k : df.kernels) arg_edges(kernel_id(k.id), k.node, k.args);
    for (const LibraryCall& c : df.library_calls) arg_edges(call_id(c.id), c.node, c.args);
    // Storage reuse is invisible through buffer nodes (two entries, one storage id): draw
    // the write-after-read / write-after-write orderings it creates between kernels.
    for (const Dependency& d : df.dependencies) {
      if (d.kind == Dependency::Kind::RAW || d.from_buffer == d.to_buffer) continue;
      if (!detail::valid_buffer(df, d.to_buffer) || !df.buffers[d.to_buffer].storage_id) continue;
      line(1, fmt::format("{} -> {} [style=dotted, color=\"#b45f06\", constraint=false, label=\"{} sid {}\"];",
                          from_id(d), to_id(d), to_string(d.kind), *df.buffers[d.to_buffer].storage_id));
    }
    if (!boxes.empty()) {
      line(1, "// graph-level reads and writes of nodes without launches");
      for (const Node* n : boxes) {
        for (int b : n->inputs)
          if (detail::valid_buffer(df, b)) line(1, buffer_id(b) + " -> " + node_box_id(n->id) + ";");
        for (int b : n->outputs)
          if (detail::valid_buffer(df, b)) line(1, node_box_id(n->id) + " -> " + buffer_id(b) + ";");
      }
    }
    legend();
    line(0, "}");
  }

  /// --collapse: one box per graph node that runs (op tvm_op), graph buffers between
  /// them, or node → node edges without buffers.
  void run_collapsed() {
    header();
    out += '\n';
    line(1, "// graph nodes (collapsed: kernels counted in each box)");
    std::vector<bool> drawn(df.nodes.size());
    for (const Node& n : df.nodes) {
      if (n.op == "null") continue;
      drawn[n.id] = true;
      std::vector<std::string> lines{fmt::format("node {}", n.id), n.name};
      if (!n.function.empty() && n.function != n.name) lines.push_back(n.function);
      // Relay ops, wrapped at about 40 characters a line.
      std::string ops;
      for (const RelayOp& op : n.relay_ops) {
        if (!ops.empty() && ops.size() + op.name.size() + 2 > 40) lines.push_back(ops + ","), ops.clear();
        ops += ops.empty() ? op.name : ", " + op.name;
      }
      if (!ops.empty()) lines.push_back(ops);
      std::vector<std::string> counts;
      if (!n.kernels.empty()) counts.push_back(fmt::format("{} kernel{}", n.kernels.size(), n.kernels.size() == 1 ? "" : "s"));
      if (!n.library_calls.empty())
        counts.push_back(fmt::format("{} library call{}", n.library_calls.size(), n.library_calls.size() == 1 ? "" : "s"));
      if (!n.workspaces.empty()) {
        uint64_t bytes = 0;
        for (int w : n.workspaces)
          if (detail::valid_buffer(df, w)) bytes += df.buffers[w].bytes;
        counts.push_back(fmt::format("{} workspace{} ({})", n.workspaces.size(), n.workspaces.size() == 1 ? "" : "s",
                                     human_bytes(bytes)));
      }
      const bool runs = !n.kernels.empty() || !n.library_calls.empty();
      lines.push_back(runs ? fmt::format("{}", fmt::join(counts, ", ")) : std::string("no launches"));
      if (runs)
        line(1, fmt::format("{} [label={}, shape=box, style=\"filled,rounded\", fillcolor=\"{}\"];", node_box_id(n.id),
                            label(lines), fill_of(n.id)));
      else
        line(1, fmt::format("{} [label={}, shape=box, style=\"dashed,rounded\"];", node_box_id(n.id), label(lines)));
    }

    out += '\n';
    if (opt.buffers) {
      line(1, "// graph buffers");
      for (const Buffer& b : df.buffers)
        if (b.kind != BufferKind::Workspace) line(1, buffer_stmt(b));
      out += '\n';
      line(1, "// graph-level reads and writes");
      for (const Node& n : df.nodes) {
        if (!drawn[n.id]) continue;
        std::vector<int> seen;
        for (int b : n.inputs)
          if (detail::valid_buffer(df, b) && std::find(seen.begin(), seen.end(), b) == seen.end()) {
            seen.push_back(b);
            line(1, buffer_id(b) + " -> " + node_box_id(n.id) + ";");
          }
        for (int b : n.outputs)
          if (detail::valid_buffer(df, b)) line(1, node_box_id(n.id) + " -> " + buffer_id(b) + ";");
      }
    } else {
      line(1, "// node -> node: the later node reads a buffer the earlier one writes");
      for (const Node& n : df.nodes) {
        if (!drawn[n.id]) continue;
        std::vector<int> seen;
        for (int b : n.inputs) {
          if (!detail::valid_buffer(df, b)) continue;
          const int p = df.buffers[b].node;
          if (p < 0 || static_cast<size_t>(p) >= df.nodes.size() || !drawn[p]) continue;
          if (std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
          seen.push_back(p);
          line(1, node_box_id(p) + " -> " + node_box_id(n.id) + ";");
        }
      }
    }
    legend();
    line(0, "}");
  }
};

}  // namespace

std::string emit_dot(const Dataflow& df) { return emit_dot(df, DotOptions{}); }

std::string emit_dot(const Dataflow& df, const DotOptions& options) {
  Writer w{df, options, {}};
  w.run();
  return std::move(w.out);
}

const char* relay_family(const Node& n) { return kFamilies[node_family(n)].name; }

}  // namespace kdflow

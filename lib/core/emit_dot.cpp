// emit_dot.cpp — the IR as a Graphviz digraph: one cluster per graph node holding its
// kernels, library calls and workspaces; buffers as nodes coloured by kind; one edge per
// (kernel, buffer) pair, directed by the buffer's graph-level role. Deterministic, plain
// quoted labels (no HTML, no record shapes), every ID quoted.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emit_common.h"
#include "kdflow/emit.h"

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
  std::string out;

  void line(int indent, const std::string& s) {
    out.append(static_cast<size_t>(indent) * 2, ' ');
    out += s;
    out += '\n';
  }

  const Node* node_of(int id) const {
    return id >= 0 && static_cast<size_t>(id) < df.nodes.size() ? &df.nodes[id] : nullptr;
  }

  std::string kernel_stmt(const Kernel& k) const {
    std::vector<std::string> lines{k.name, fmt::format("<<<{}, {}, {}>>>", dim3_text(k.grid), dim3_text(k.block),
                                                      k.dynamic_shared_memory)};
    if (std::string s = scalars_line(k.args); !s.empty()) lines.push_back(s);
    return fmt::format("{} [label={}, shape=box, style=filled, fillcolor=\"#fce5cd\"];", kernel_id(k.id), label(lines));
  }

  std::string call_stmt(const LibraryCall& c) const {
    std::vector<std::string> lines{c.name, "library call"};
    if (std::string s = scalars_line(c.args); !s.empty()) lines.push_back(s);
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
      const bool is_in = n && std::count(n->inputs.begin(), n->inputs.end(), b);
      const bool is_out = n && std::count(n->outputs.begin(), n->outputs.end(), b);
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

  void run() {
    line(0, "digraph kdflow {");
    line(1, "graph [rankdir=TB, fontname=\"Helvetica\", fontsize=10, nodesep=0.25, ranksep=0.4];");
    line(1, "node [fontname=\"Helvetica\", fontsize=10];");
    line(1, "edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];");

    // Which launches and workspaces live in which cluster.
    std::vector<bool> kernel_placed(df.kernels.size()), call_placed(df.library_calls.size()),
        buffer_placed(df.buffers.size());
    std::vector<const Node*> clustered;  // nodes drawn as clusters
    for (const Node& n : df.nodes)
      if (!n.kernels.empty() || !n.library_calls.empty()) clustered.push_back(&n);

    out += '\n';
    line(1, "// graph nodes: kernels, library calls and workspaces");
    for (const Node* np : clustered) {
      const Node& n = *np;
      std::vector<std::string> title{fmt::format("node {}", n.id), n.name};
      if (!n.function.empty() && n.function != n.name) title.push_back(n.function);
      line(1, fmt::format("subgraph \"cluster_node{}\" {{", n.id));
      line(2, fmt::format("label={}; style=rounded; color=\"#999999\"; fontsize=10;", label(title)));
      int previous = -1;
      for (int k : n.kernels) {
        if (k < 0 || static_cast<size_t>(k) >= df.kernels.size() || kernel_placed[k]) continue;
        line(2, kernel_stmt(df.kernels[k]));
        kernel_placed[k] = true;
        // Invisible edges stack a node's kernels top-down in launch order.
        if (previous >= 0) line(2, kernel_id(previous) + " -> " + kernel_id(k) + " [style=invis];");
        previous = k;
      }
      for (int c : n.library_calls)
        if (c >= 0 && static_cast<size_t>(c) < df.library_calls.size() && !call_placed[c])
          line(2, call_stmt(df.library_calls[c])), call_placed[c] = true;
      for (int w : n.workspaces)
        if (detail::valid_buffer(df, w) && !buffer_placed[w])
          line(2, buffer_stmt(df.buffers[w])), buffer_placed[w] = true;
      line(1, "}");
    }

    // Nodes that launch nothing (__nop, __copy, functions without kernels): a dashed box
    // joined to the node's graph inputs and outputs, so the graph stays connected.
    std::vector<const Node*> boxes;
    for (const Node& n : df.nodes)
      if (n.op != "null" && n.kernels.empty() && n.library_calls.empty()) boxes.push_back(&n);
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
    line(1, "// buffers");
    for (size_t i = 0; i < df.buffers.size(); ++i)
      if (!buffer_placed[i]) line(1, buffer_stmt(df.buffers[i]));
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
                          kernel_id(d.from), kernel_id(d.to), to_string(d.kind), *df.buffers[d.to_buffer].storage_id));
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
    line(0, "}");
  }
};

}  // namespace

std::string emit_dot(const Dataflow& df) {
  Writer w{df, {}};
  w.run();
  return std::move(w.out);
}

}  // namespace kdflow

// emit_text.cpp — a short plain-text summary of the IR for people: counts, then one
// block per function node with its workspaces, kernel launches and library calls.
// Deterministic; names are printed with control characters replaced.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emit_common.h"
#include "kdflow/emit/emit.h"

namespace kdflow {
namespace {

std::string clean(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

std::string plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string dim3(const std::array<int64_t, 3>& d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); }

class TextWriter {
 public:
  explicit TextWriter(const Dataflow& df) : df_(df) {}

  /// sid<N> for graph buffers, ws<k> for a workspace (k: its index in the allocating
  /// node), buf<id> otherwise.
  std::string buffer_ref(int b) const {
    if (!detail::valid_buffer(df_, b)) return fmt::format("buf{}?", b);
    const Buffer& buf = df_.buffers[b];
    if (buf.kind == BufferKind::Workspace && buf.node >= 0 && static_cast<size_t>(buf.node) < df_.nodes.size()) {
      const auto& ws = df_.nodes[buf.node].workspaces;
      auto it = std::find(ws.begin(), ws.end(), b);
      if (it != ws.end()) return fmt::format("ws{}", it - ws.begin());
    }
    if (buf.storage_id) return fmt::format("sid{}", *buf.storage_id);
    return fmt::format("buf{}", b);
  }

  std::string arg_text(const Arg& a) const {
    switch (a.kind) {
      case Arg::Kind::Buffer: {
        std::string t = a.offset ? fmt::format("{}+{}", buffer_ref(a.buffer), a.offset) : buffer_ref(a.buffer);
        // A library call's DLTensor: the view it passes, sid3:float32[4, 1000].
        if (!a.tensor_dtype.empty())
          t += fmt::format(":{}[{}]", clean(a.tensor_dtype), fmt::join(a.tensor_shape, ", "));
        // Access as a suffix when the device source told it: sid3(w), ws0(rw).
        switch (a.access) {
          case Access::Read: return t + "(r)";
          case Access::Write: return t + "(w)";
          case Access::ReadWrite: return t + "(rw)";
          case Access::Unknown: return t;
        }
        return t;
      }
      case Arg::Kind::Int:  // symbolic shapes: "8=n"
        return std::to_string(a.int_value) + (a.expr.empty() ? std::string() : "=" + clean(a.expr));
      case Arg::Kind::Float: return detail::float_text(a.float_value);
      case Arg::Kind::Null: return a.dtype == "str" ? "\"" + clean(a.text) + "\"" : "null";
    }
    return "?";
  }

  std::string args_text(const std::vector<Arg>& args) const {
    std::vector<std::string> v;
    for (const Arg& a : args) v.push_back(arg_text(a));
    return fmt::format("{}", fmt::join(v, ", "));
  }

  std::string refs(const std::vector<int>& ids) const {
    std::vector<std::string> v;
    for (int b : ids) v.push_back(buffer_ref(b));
    return v.empty() ? "-" : fmt::format("{}", fmt::join(v, ", "));
  }

  std::string names(const std::vector<int>& ids) const {
    std::vector<std::string> v;
    for (int b : ids) v.push_back(detail::valid_buffer(df_, b) ? clean(df_.buffers[b].name) : buffer_ref(b));
    return v.empty() ? "-" : fmt::format("{}", fmt::join(v, ", "));
  }

  void line(const std::string& s) {
    out_ += s;
    out_ += '\n';
  }

  void node(const Node& n) {
    std::vector<std::string> counts{plural(n.kernels.size(), "kernel", "kernels")};
    if (!n.workspaces.empty()) counts.push_back(plural(n.workspaces.size(), "workspace", "workspaces"));
    if (!n.library_calls.empty())
      counts.push_back(plural(n.library_calls.size(), "library call", "library calls"));
    std::string head = fmt::format("node {}  {}", n.id, clean(n.function.empty() ? n.name : n.function));
    if (!n.function.empty() && n.name != n.function) head += fmt::format(" [{}]", clean(n.name));
    line(fmt::format("{}  ({})", head, fmt::join(counts, ", ")));
    if (!n.cuda_graph.empty()) line(fmt::format("  in CUDA graph {}", clean(n.cuda_graph)));
    if (!n.session_step.empty()) line(fmt::format("  session step: {}", clean(n.session_step)));
    if (!n.runtime_call.empty())
      line(fmt::format("  called by TVM's runtime inside {} (layer {}): {}", clean(n.runtime_call), n.layer,
                       clean(n.runtime_role)));
    line(fmt::format("  reads {}  writes {}", refs(n.inputs), refs(n.outputs)));
    if (!n.relay_ops.empty()) {
      std::vector<std::string> ops;
      for (const RelayOp& op : n.relay_ops) ops.push_back(clean(op.name));
      line(fmt::format("  relay: {}{}", fmt::join(ops, ", "), n.relay_source == "name" ? "  (from the name)" : ""));
    }
    for (size_t i = 0; i < n.workspaces.size(); ++i) {
      const int w = n.workspaces[i];
      if (!detail::valid_buffer(df_, w)) continue;
      const Buffer& b = df_.buffers[w];
      std::string s = fmt::format("  ws{}  {} bytes", i, b.bytes);
      if (b.loc.valid()) s += "  at " + clean(detail::loc_string(b.loc));
      line(s);
    }
    for (int k : n.kernels) {
      if (k < 0 || static_cast<size_t>(k) >= df_.kernels.size()) continue;
      const Kernel& kn = df_.kernels[k];
      // Symbolic shapes: "grid (1,7,1)=((n + 31) >> 5, 7, 1)".
      auto symbolic = [](const std::array<std::string, 3>& e) {
        return e[0].empty() ? std::string() : clean(fmt::format("=({}, {}, {})", e[0], e[1], e[2]));
      };
      std::string s = fmt::format("  #{} {}  grid {}{} block {}{} smem {}  args: {}", kn.id, clean(kn.name),
                                  dim3(kn.grid), symbolic(kn.grid_expr), dim3(kn.block), symbolic(kn.block_expr),
                                  kn.dynamic_shared_memory, args_text(kn.args));
      if (!kn.loop_iterations.empty()) s += fmt::format("  loop [{}]", fmt::join(kn.loop_iterations, ", "));
      line(s);
    }
    for (int c : n.library_calls) {
      if (c < 0 || static_cast<size_t>(c) >= df_.library_calls.size()) continue;
      const LibraryCall& lc = df_.library_calls[c];
      std::string after = lc.after_kernel < 0 ? "before any kernel" : fmt::format("after kernel #{}", lc.after_kernel);
      if (const Collective* k = lc.collective ? &*lc.collective : nullptr)
        after += fmt::format("; {}{} of {} {}, {} bytes per rank", k->kind, k->reduce_op.empty() ? "" : " " + k->reduce_op,
                             k->elements, k->dtype, k->bytes);
      line(fmt::format("  library call {} {}  args: {}  ({})", lc.id, clean(lc.name), args_text(lc.args), after));
    }
  }

  std::string run() {
    size_t function_nodes = 0, workspaces = 0;
    for (const Node& n : df_.nodes) function_nodes += detail::is_function_node(n) ? 1 : 0;
    for (const Buffer& b : df_.buffers) workspaces += b.kind == BufferKind::Workspace ? 1 : 0;
    std::string head = fmt::format("{}, {}, {}, {}", plural(df_.nodes.size(), "node", "nodes"),
                                   plural(function_nodes, "function node", "function nodes"),
                                   plural(df_.kernels.size(), "kernel", "kernels"),
                                   plural(workspaces, "workspace", "workspaces"));
    if (!df_.library_calls.empty())
      head += ", " + plural(df_.library_calls.size(), "library call", "library calls");
    if (!df_.sources.graph.empty()) head = clean(df_.sources.graph) + ": " + head;
    line(head);
    if (df_.ranks > 1) line(fmt::format("ranks: {} (a sharded build: every rank runs this flow on its own params)", df_.ranks));
    line(fmt::format("inputs: {}", names(df_.inputs)));
    // Inputs whose values shaped the flow: it holds for these values only.
    for (int b : df_.inputs)
      if (detail::valid_buffer(df_, b) && !df_.buffers[b].values_used.empty())
        line(fmt::format("  {}: the flow depends on its values [{}]", clean(df_.buffers[b].name),
                         fmt::join(df_.buffers[b].values_used, ", ")));
    if (df_.kernels.empty() && df_.library_calls.empty())
      line("no kernel: every operation of this build is a VM builtin (nothing runs on the GPU)");
    line(fmt::format("params: {}", df_.params.size()));
    line(fmt::format("outputs: {}", names(df_.outputs)));
    for (const Node& n : df_.nodes)
      if (detail::is_function_node(n) || !n.kernels.empty() || !n.library_calls.empty()) node(n);
    return std::move(out_);
  }

 private:
  const Dataflow& df_;
  std::string out_;
};

}  // namespace

std::string emit_text(const Dataflow& df) { return TextWriter(df).run(); }

}  // namespace kdflow

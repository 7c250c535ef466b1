// show.cpp — `kdflow show` (node table and summary), `kdflow explain` (one kernel or node in
// full) and `kdflow show --profile` (a profiler CSV joined to the graph).
//
// Computation (traffic, live memory, the profile join in profile_csv.cpp) is separate from
// rendering. Rendering writes colour as marker bytes that one final pass turns into ANSI
// escapes or drops, after replacing every other control byte with '?': plain output can
// never hold an escape byte, whatever the names in the input are. Deterministic.
#include "kdflow/driver/show.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "kdflow/analysis/bounds.h"
#include "kdflow/analysis/time_model.h"
#include "kdflow/driver/commands.h"
#include "kdflow/analysis/dependencies.h"
#include "kdflow/emit/emit.h"
#include "kdflow/support/io.h"

namespace kdflow {
namespace {

// --- text helpers -----------------------------------------------------------------

enum class Color : char { Reset = '\x11', Bold = '\x12', Dim = '\x13', Cyan = '\x14', Green = '\x15', Yellow = '\x16',
                          Red = '\x17', Magenta = '\x18', None = 0 };

/// `s` wrapped in colour markers (none for Color::None).
std::string paint(const std::string& s, Color c) {
  if (c == Color::None || s.empty()) return s;
  return std::string(1, static_cast<char>(c)) + s + std::string(1, static_cast<char>(Color::Reset));
}

/// The final pass: markers → ANSI (or nothing), other control bytes (but '\n') → '?'.
std::string finish(const std::string& s, const ShowStyle& style) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x11 && c <= 0x18) {
      if (!style.color) continue;
      static const char* codes[] = {"\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[31m",
                                    "\x1b[35m"};
      out += codes[c - 0x11];
    } else if ((c < 0x20 && c != '\n') || c == 0x7f) {
      out += '?';
    } else {
      out += ch;
    }
  }
  return out;
}

/// Display width: UTF-8 code points, markers not counted.
size_t width(const std::string& s) {
  size_t w = 0;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c & 0xC0) != 0x80 && !(c >= 0x11 && c <= 0x18)) ++w;
  }
  return w;
}

/// Names from the input with the marker bytes (and every control byte) replaced.
std::string clean(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < 5) v /= 1024.0, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

/// 9323960 → "9,323,960".
std::string grouped(uint64_t v) {
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

/// "allreduce sum, 32 KiB per rank" (a collective's row).
std::string collective_text(const Collective& c) {
  std::string op = c.kind + (c.reduce_op.empty() ? std::string() : " " + c.reduce_op);
  if (c.peer >= 0) op += fmt::format(" (peer {})", c.peer);
  return fmt::format("{}, {} per rank", op, human_bytes(c.bytes));
}

std::string exact_bytes(uint64_t b) { return b < 1024 ? fmt::format("{} B", b) : fmt::format("{} ({} B)", human_bytes(b), grouped(b)); }

std::string dim3(const std::array<int64_t, 3>& d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); }

std::string plural(size_t n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); }

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return checked_add(a, b, &r) ? r : UINT64_MAX;
}

template <class T>
bool valid_index(const std::vector<T>& v, int i) {
  return i >= 0 && static_cast<size_t>(i) < v.size();
}

bool is_function_node(const Node& n) { return n.op == "tvm_op" && n.function != "__nop" && n.function != "__copy"; }

// --- a table ----------------------------------------------------------------------

struct Cell {
  std::string text;  ///< already cleaned; no markers
  Color color = Color::None;
  bool right = false;
};
using Row = std::vector<Cell>;

/// Columns padded to the widest cell; the header underlined by colour only (bold); no
/// trailing spaces.
std::string render_table(const Row& header, const std::vector<Row>& rows, const std::string& indent = "") {
  std::vector<size_t> w(header.size());
  auto grow = [&](const Row& r) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], width(r[i].text));
  };
  grow(header);
  for (const Row& r : rows) grow(r);
  std::string out;
  auto emit = [&](const Row& r, bool head) {
    size_t last = 0;  // last non-empty cell
    for (size_t i = 0; i < r.size() && i < w.size(); ++i)
      if (!r[i].text.empty()) last = i + 1;
    std::string line = indent;
    for (size_t i = 0; i < last; ++i) {
      const Cell& c = r[i];
      const size_t pad = w[i] - width(c.text);
      const std::string text = paint(c.text, head ? Color::Bold : c.color);
      if (i) line += "  ";
      if (c.right) line += std::string(pad, ' ') + text;
      else line += text + (i + 1 < last ? std::string(pad, ' ') : "");
    }
    out += line + "\n";
  };
  emit(header, true);
  for (const Row& r : rows) emit(r, false);
  return out;
}

// --- facts about the IR -----------------------------------------------------------

/// Read / write as the kernel does it; unknown access decided by the node's graph roles.
std::pair<bool, bool> reads_writes(const Dataflow& df, int node, const Arg& a) {
  switch (a.access) {
    case Access::Read: return {true, false};
    case Access::Write: return {false, true};
    case Access::ReadWrite: return {true, true};
    case Access::Unknown: break;
  }
  if (valid_index(df.nodes, node)) {
    const Node& n = df.nodes[node];
    // Passed through a view: the node lists the view.
    const int b = a.view >= 0 ? a.view : a.buffer;
    const bool in = std::count(n.inputs.begin(), n.inputs.end(), b) > 0;
    const bool out = std::count(n.outputs.begin(), n.outputs.end(), b) > 0;
    if (in || out) return {in, out};
  }
  return {true, true};
}

Traffic args_traffic(const Dataflow& df, int node, const std::vector<Arg>& args) {
  std::set<int> r, w;
  for (const Arg& a : args) {
    if (a.kind != Arg::Kind::Buffer || !valid_index(df.buffers, a.buffer)) continue;
    auto [reads, writes] = reads_writes(df, node, a);
    if (reads) r.insert(a.buffer);
    if (writes) w.insert(a.buffer);
  }
  Traffic t;
  auto count = [&](int b, bool write) {
    bool counted = false;
    std::optional<int64_t> n = launch_touched_bytes(args, b, write, &counted);
    ++(!n ? t.sized : counted ? t.counted : t.span);
    return n ? static_cast<uint64_t>(*n) : df.buffers[b].bytes;
  };
  for (int b : r) t.read = sat_add(t.read, count(b, false));
  for (int b : w) t.written = sat_add(t.written, count(b, true));
  return t;
}

/// A node's workspace index (ws<k>), or -1.
int workspace_index(const Dataflow& df, int b) {
  if (!valid_index(df.buffers, b)) return -1;
  const Buffer& buf = df.buffers[b];
  if (buf.kind != BufferKind::Workspace || !valid_index(df.nodes, buf.node)) return -1;
  const auto& ws = df.nodes[buf.node].workspaces;
  auto it = std::find(ws.begin(), ws.end(), b);
  return it == ws.end() ? -1 : static_cast<int>(it - ws.begin());
}

/// "sid 3" / "ws0 of n13" / "buffer 7".
std::string memory_name(const Dataflow& df, int b) {
  if (!valid_index(df.buffers, b)) return fmt::format("buffer {}", b);
  const Buffer& buf = df.buffers[b];
  if (buf.storage_id) return fmt::format("sid {}", *buf.storage_id);
  const int w = workspace_index(df, b);
  if (w >= 0) return fmt::format("ws{} of n{}", w, buf.node);
  return fmt::format("buffer {}", b);
}

std::string relay_ops_text(const Node& n) {
  std::vector<std::string> ops;
  for (const RelayOp& op : n.relay_ops) ops.push_back(clean(op.name));
  return fmt::format("{}", fmt::join(ops, ", "));
}

/// "..._kernel_1" when the kernel name extends the function name, else the name.
std::string short_kernel_name(const std::string& name, const std::string& function) {
  if (!function.empty() && name.size() > function.size() && name.compare(0, function.size(), function) == 0)
    return "..." + clean(name.substr(function.size()));
  return clean(name);
}

}  // namespace

// --- computation ------------------------------------------------------------------

std::string Traffic::measure() const {
  std::vector<std::string> m;
  if (counted) m.push_back("bytes touched");
  if (span) m.push_back("footprint spans");
  if (sized || m.empty()) m.push_back("buffer sizes");
  return fmt::format("{}", fmt::join(m, " + "));
}

Traffic kernel_traffic(const Dataflow& df, const Kernel& k) { return args_traffic(df, k.node, k.args); }
Traffic library_call_traffic(const Dataflow& df, const LibraryCall& c) { return args_traffic(df, c.node, c.args); }

Traffic node_traffic(const Dataflow& df, const Node& n) {
  Traffic t;
  auto add = [&](Traffic x) {
    t.read = sat_add(t.read, x.read);
    t.written = sat_add(t.written, x.written);
    t.counted += x.counted;
    t.span += x.span;
    t.sized += x.sized;
  };
  for (int k : n.kernels)
    if (valid_index(df.kernels, k)) add(kernel_traffic(df, df.kernels[k]));
  for (int c : n.library_calls)
    if (valid_index(df.library_calls, c)) add(library_call_traffic(df, df.library_calls[c]));
  return t;
}

FlowSummary summarize(const Dataflow& df) {
  FlowSummary s;
  s.nodes = df.nodes.size();
  for (const Node& n : df.nodes) {
    if (n.op == "null") ++s.null_nodes;
    else if (is_function_node(n)) ++s.function_nodes;
    else ++s.other_op_nodes;
    if (n.kernels.size() > 1) s.multi_kernel_nodes.push_back(n.id);
  }
  s.inputs = df.inputs.size();
  s.params = df.params.size();
  s.outputs = df.outputs.size();
  s.kernels_without_access = kernels_without_access(df);
  s.kernels = df.kernels.size();
  for (const Kernel& k : df.kernels) s.loop_kernels += k.loop_iterations.empty() ? 0 : 1;
  s.library_calls = df.library_calls.size();
  s.buffers = df.buffers.size();

  // Storage pools: each storage id at its largest entry.
  std::map<int64_t, uint64_t> pool;
  for (const Buffer& b : df.buffers) {
    if (b.kind == BufferKind::Workspace) {
      ++s.workspaces;
      s.workspace_bytes = sat_add(s.workspace_bytes, b.bytes);
      continue;
    }
    ++s.graph_buffers;
    if (b.storage_id) pool[*b.storage_id] = std::max(pool[*b.storage_id], b.bytes);
  }
  s.storage_ids = pool.size();
  for (const auto& [sid, bytes] : pool) s.storage_bytes = sat_add(s.storage_bytes, bytes);
  std::set<int64_t> param_sids;
  for (int p : df.params)
    if (valid_index(df.buffers, p) && df.buffers[p].storage_id) param_sids.insert(*df.buffers[p].storage_id);
  for (int64_t sid : param_sids) s.param_bytes = sat_add(s.param_bytes, pool[sid]);

  // Live intervals over kernel launches.
  const int K = static_cast<int>(df.kernels.size());
  if (K == 0) return s;
  struct Span {
    int first_write = -1, last_read = -1, first = -1, last = -1;
    bool starts = false, ends = false;  // holds an input/param; holds an output
  };
  std::map<int64_t, Span> spans;
  for (const Buffer& b : df.buffers) {
    if (!b.storage_id) continue;
    Span& sp = spans[*b.storage_id];
    if (b.kind == BufferKind::Input || b.kind == BufferKind::Param) sp.starts = true;
    if (b.kind == BufferKind::Output) sp.ends = true;
  }
  for (int o : df.outputs)
    if (valid_index(df.buffers, o) && df.buffers[o].storage_id) spans[*df.buffers[o].storage_id].ends = true;
  auto touch = [&](int step, int node, const std::vector<Arg>& args) {
    for (const Arg& a : args) {
      if (a.kind != Arg::Kind::Buffer || !valid_index(df.buffers, a.buffer) || !df.buffers[a.buffer].storage_id) continue;
      Span& sp = spans[*df.buffers[a.buffer].storage_id];
      auto [reads, writes] = reads_writes(df, node, a);
      if (writes && (sp.first_write < 0 || step < sp.first_write)) sp.first_write = step;
      if (reads) sp.last_read = std::max(sp.last_read, step);
      if (sp.first < 0 || step < sp.first) sp.first = step;
      sp.last = std::max(sp.last, step);
    }
  };
  for (const Kernel& k : df.kernels) touch(k.id, k.node, k.args);
  for (const LibraryCall& c : df.library_calls) touch(std::clamp(c.after_kernel, 0, K - 1), c.node, c.args);

  std::vector<uint64_t> live(static_cast<size_t>(K));
  std::vector<uint64_t> activations(static_cast<size_t>(K));
  std::vector<size_t> live_sids(static_cast<size_t>(K)), live_ws(static_cast<size_t>(K));
  for (const auto& [sid, sp] : spans) {
    int from = sp.starts ? 0 : sp.first_write >= 0 ? sp.first_write : sp.first;
    int to = sp.ends ? K - 1 : sp.last_read >= 0 ? sp.last_read : sp.last;
    if (sp.starts && to < 0) to = 0;
    if (from < 0 || to < 0) continue;  // never touched
    const bool param = param_sids.count(sid) > 0;
    for (int t = from; t <= to; ++t) {
      live[t] = sat_add(live[t], pool[sid]), ++live_sids[t];
      if (!param) activations[t] = sat_add(activations[t], pool[sid]);
    }
  }
  for (const Node& n : df.nodes) {
    int first = -1, last = -1;
    for (int k : n.kernels)
      if (valid_index(df.kernels, k)) first = first < 0 ? k : std::min(first, k), last = std::max(last, k);
    if (first < 0) continue;
    for (int w : n.workspaces) {
      if (!valid_index(df.buffers, w)) continue;
      for (int t = first; t <= last; ++t) {
        live[t] = sat_add(live[t], df.buffers[w].bytes), ++live_ws[t];
        activations[t] = sat_add(activations[t], df.buffers[w].bytes);
      }
    }
  }
  s.live_bytes = live;
  for (int t = 0; t < K; ++t)
    if (s.peak_kernel < 0 || live[t] > s.peak_bytes) {
      s.peak_bytes = live[t];
      s.peak_kernel = t;
      s.peak_storage_ids = live_sids[t];
      s.peak_workspaces = live_ws[t];
    }
  for (int t = 0; t < K; ++t)
    if (s.peak_activation_kernel < 0 || activations[t] > s.peak_activation_bytes) {
      s.peak_activation_bytes = activations[t];
      s.peak_activation_kernel = t;
    }
  return s;
}

// --- show -------------------------------------------------------------------------

std::string render_show(const Dataflow& df, const ShowStyle& style) {
  const FlowSummary s = summarize(df);
  std::string out;
  std::vector<std::string> srcs;
  for (const std::string* f : {&df.sources.host, &df.sources.meta, &df.sources.device, &df.sources.relay,
                               &df.sources.params, &df.sources.library})
    if (!f->empty()) srcs.push_back(clean(*f));
  out += paint(df.sources.graph.empty() ? std::string("graph") : clean(df.sources.graph), Color::Bold) +
         fmt::format(": {}, {}, {}", plural(s.nodes, "node", "nodes"),
                     plural(s.function_nodes, "function node", "function nodes"),
                     plural(s.kernels, "kernel", "kernels"));
  if (!srcs.empty()) out += fmt::format("  (with {})", fmt::join(srcs, ", "));
  out += "\n\n";

  const bool loops = s.loop_kernels > 0;
  Row header{{"node"}, {"function"}, {"relay ops"}, {"kernel"}, {"name"}, {"grid"}, {"block"}, {"smem", Color::None, true}};
  if (loops) header.push_back({"loop"});
  header.push_back({"workspaces"});
  header.push_back({"read", Color::None, true});
  header.push_back({"written", Color::None, true});
  const size_t ncol = header.size();
  const size_t c_ws = ncol - 3, c_read = ncol - 2, c_written = ncol - 1, c_loop = loops ? 8 : 0;

  bool decoded = false;
  std::vector<Row> rows;
  for (const Node& n : df.nodes) {
    if (n.op == "null") continue;
    Row first(ncol);
    first[0] = {fmt::format("n{}", n.id), Color::Magenta};
    std::string fn = clean(n.function.empty() ? n.name : n.function);
    if (!n.function.empty() && n.name != n.function) fn += fmt::format(" [{}]", clean(n.name));
    if (!n.cuda_graph.empty()) fn += fmt::format(" (graph {})", clean(n.cuda_graph));
    if (!n.session_step.empty()) fn = fmt::format("[{}] {}", clean(n.session_step), fn);
    if (!n.runtime_call.empty()) fn += fmt::format(" (KV cache, layer {})", n.layer);
    first[1] = {fn, Color::Bold};
    std::string ops = n.relay_ops.empty() ? "-" : relay_ops_text(n);
    if (n.relay_source == "name") ops += " *", decoded = true;
    first[2] = {ops, Color::Green};
    if (!n.workspaces.empty()) {
      uint64_t b = 0;
      for (int w : n.workspaces)
        if (valid_index(df.buffers, w)) b = sat_add(b, df.buffers[w].bytes);
      first[c_ws] = {fmt::format("{} ({})", n.workspaces.size(), human_bytes(b))};
    } else {
      first[c_ws] = {"-", Color::Dim};
    }
    const Traffic t = node_traffic(df, n);
    first[c_read] = {human_bytes(t.read), Color::None, true};
    first[c_written] = {human_bytes(t.written), Color::None, true};
    if (n.kernels.empty() && n.library_calls.empty()) {
      first[3] = {"-", Color::Dim};
      first[4] = {"no launches", Color::Dim};
      first[c_read] = first[c_written] = {"-", Color::Dim, true};
      rows.push_back(first);
      continue;
    }
    const bool several = n.kernels.size() + n.library_calls.size() > 1;
    // In run order: a library call runs after the kernel it follows (after_kernel), before the next.
    std::vector<std::pair<std::pair<int64_t, int>, Row>> ordered;  // (after kernel id, 0 kernel / 1 call), row
    for (int k : n.kernels) {
      if (!valid_index(df.kernels, k)) continue;
      const Kernel& kn = df.kernels[k];
      Row r(ncol);
      r[3] = {fmt::format("k{}", kn.id), Color::Cyan};
      r[4] = {short_kernel_name(kn.name, n.function)};
      r[5] = {dim3(kn.grid)};
      r[6] = {dim3(kn.block)};
      r[7] = {std::to_string(kn.dynamic_shared_memory), Color::None, true};
      if (loops) r[c_loop] = {kn.loop_iterations.empty() ? "-" : fmt::format("[{}]", fmt::join(kn.loop_iterations, ","))};
      if (several) {
        const Traffic kt = kernel_traffic(df, kn);
        r[c_read] = {human_bytes(kt.read), Color::Dim, true};
        r[c_written] = {human_bytes(kt.written), Color::Dim, true};
      }
      ordered.push_back({{kn.id, 0}, r});
    }
    for (int c : n.library_calls) {
      if (!valid_index(df.library_calls, c)) continue;
      const LibraryCall& lc = df.library_calls[c];
      Row r(ncol);
      r[3] = {fmt::format("lib{}", lc.id), Color::Cyan};
      r[4] = {lc.collective ? collective_text(*lc.collective) + " (collective)" : clean(lc.name) + " (library call)"};
      if (several) {
        const Traffic kt = library_call_traffic(df, lc);
        r[c_read] = {human_bytes(kt.read), Color::Dim, true};
        r[c_written] = {human_bytes(kt.written), Color::Dim, true};
      }
      ordered.push_back({{lc.after_kernel, 1}, r});
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Row> launches;
    for (auto& o : ordered) launches.push_back(std::move(o.second));
    // With several launches the node row carries the node's totals and each launch row
    // its own traffic; with one, the node row is the launch row.
    if (several || launches.empty()) {
      rows.push_back(first);
      for (Row& r : launches) rows.push_back(r);
    } else {
      for (size_t i = 3; i < ncol; ++i)
        if (i != c_ws && i != c_read && i != c_written) first[i] = launches[0][i];
      rows.push_back(first);
    }
  }
  out += render_table(header, rows);
  if (decoded) out += paint("* Relay ops decoded from the function name (no relay.txt entry)", Color::Dim) + "\n";

  // Summary.
  std::vector<std::pair<std::string, std::string>> kv;
  kv.push_back({"nodes", fmt::format("{}: {}, {} __nop/__copy, {} null ({}, {})", s.nodes,
                                     plural(s.function_nodes, "function node", "function nodes"), s.other_op_nodes,
                                     s.null_nodes, plural(s.inputs, "input", "inputs"),
                                     plural(s.params, "param", "params"))});
  kv.push_back({"function nodes", std::to_string(s.function_nodes)});
  kv.push_back({"kernels", s.kernels == 0 && s.library_calls == 0
                               ? std::string("0 (no kernel: every operation of this build is a VM builtin, nothing runs "
                                             "on the GPU)")
                               : std::to_string(s.kernels)});
  {
    std::vector<std::string> v;
    for (int id : s.multi_kernel_nodes) v.push_back(fmt::format("n{} ({} kernels)", id, df.nodes[id].kernels.size()));
    kv.push_back({"nodes with several kernels",
                  v.empty() ? "0" : fmt::format("{}: {}", v.size(), fmt::join(v, ", "))});
  }
  kv.push_back({"kernels in host loops", std::to_string(s.loop_kernels)});
  kv.push_back({"kernels without access", df.sources.device.empty() ? fmt::format("{} (no device source read)", s.kernels)
                                          : s.kernels_without_access.empty() ? std::string("0")
                                          : fmt::format("{}: k{}", s.kernels_without_access.size(),
                                                        fmt::join(s.kernels_without_access, ", k"))});
  if (s.library_calls) kv.push_back({"library calls", std::to_string(s.library_calls)});
  // A sharded build: its ranks, what differs between them, and its collectives.
  if (df.ranks > 1) {
    size_t per_rank = 0;
    for (const Buffer& b : df.buffers) per_rank += b.per_rank ? 1 : 0;
    kv.push_back({"ranks", fmt::format("{} (tensor-parallel: every rank runs this flow with its own params{}); {} per "
                                       "rank, the others the same on every rank",
                                       df.ranks, df.sources.params.empty() ? "" : ", " + clean(df.sources.params),
                                       plural(per_rank, "buffer differs", "buffers differ"))});
  }
  {
    std::map<std::string, std::pair<size_t, uint64_t>> by_kind;  // "allreduce sum" -> (calls, bytes)
    size_t calls = 0;
    uint64_t bytes = 0;
    for (const LibraryCall& c : df.library_calls) {
      if (!c.collective) continue;
      auto& e = by_kind[c.collective->kind + (c.collective->reduce_op.empty() ? "" : " " + c.collective->reduce_op)];
      ++e.first, e.second = sat_add(e.second, c.collective->bytes);
      ++calls, bytes = sat_add(bytes, c.collective->bytes);
    }
    if (calls) {
      std::vector<std::string> v;
      for (const auto& [k, e] : by_kind) v.push_back(fmt::format("{} {} ({})", e.first, k, human_bytes(e.second)));
      kv.push_back({"collectives", fmt::format("{}: {}; {} sent per rank", calls, fmt::join(v, ", "), exact_bytes(bytes))});
    }
  }
  kv.push_back({"buffers", fmt::format("{}: {} in {}, {}", s.buffers,
                                       plural(s.graph_buffers, "graph entry", "graph entries"),
                                       plural(s.storage_ids, "storage id", "storage ids"),
                                       plural(s.workspaces, "workspace", "workspaces"))});
  kv.push_back({"workspaces", s.workspaces ? fmt::format("{}: {} in all", s.workspaces, exact_bytes(s.workspace_bytes))
                                           : std::string("0")});
  kv.push_back({"storage", fmt::format("{} in {} (each at its largest entry), params {}", exact_bytes(s.storage_bytes),
                                       plural(s.storage_ids, "storage id", "storage ids"), human_bytes(s.param_bytes))});
  if (s.peak_kernel >= 0) {
    const Kernel& k = df.kernels[s.peak_kernel];
    kv.push_back({"peak live memory",
                  fmt::format("{} at k{} (n{}): {} live, {} live", exact_bytes(s.peak_bytes), k.id, k.node,
                              plural(s.peak_storage_ids, "storage id", "storage ids"),
                              plural(s.peak_workspaces, "workspace", "workspaces"))});
    const Kernel& a = df.kernels[s.peak_activation_kernel];
    kv.push_back({"  without params", fmt::format("{} at k{} (n{})", exact_bytes(s.peak_activation_bytes), a.id, a.node)});
  } else {
    kv.push_back({"peak live memory", "- (no kernels)"});
  }
  kv.push_back({"footprints", footprints_summary_text(df)});
  // Inputs whose values shaped the flow (Buffer::values_used): it holds for those values only.
  for (int b : df.inputs)
    if (valid_index(df.buffers, b) && !df.buffers[b].values_used.empty())
      kv.push_back({"values used", fmt::format("{}: the flow depends on its values [{}]", clean(df.buffers[b].name),
                                               fmt::join(df.buffers[b].values_used, ", "))});
  size_t kw = 0;
  for (const auto& p : kv) kw = std::max(kw, p.first.size());
  out += "\n" + paint("summary", Color::Bold) + "\n";
  for (const auto& p : kv) out += "  " + paint(p.first, Color::Dim) + std::string(kw - p.first.size() + 2, ' ') + p.second + "\n";
  return finish(out, style);
}

// --- explain ----------------------------------------------------------------------

namespace {

class Explainer {
 public:
  Explainer(const Dataflow& df) : df_(df) {}

  std::string out;

  void line(const std::string& indent, const std::string& key, const std::string& value) {
    const size_t kw = 14;
    out += indent + paint(key, Color::Dim) + std::string(key.size() < kw ? kw - key.size() : 1, ' ') + value + "\n";
  }

  std::string kernel_ref(int k) const {
    if (!valid_index(df_.kernels, k)) return fmt::format("k{}?", k);
    const Kernel& kn = df_.kernels[k];
    return paint(fmt::format("k{}", k), Color::Cyan) + fmt::format(" {} (n{})", clean(kn.name), kn.node);
  }

  std::string node_ref(int n) const {
    if (!valid_index(df_.nodes, n)) return fmt::format("n{}?", n);
    return paint(fmt::format("n{}", n), Color::Magenta) + " " + clean(df_.nodes[n].name);
  }

  /// "buffer 12 NAME  intermediate  sid 11  float32 [1, 10]  40 B".
  std::string buffer_text(int b) const {
    if (!valid_index(df_.buffers, b)) return fmt::format("buffer {}?", b);
    const Buffer& buf = df_.buffers[b];
    std::string kind = to_string(buf.kind);
    const int w = workspace_index(df_, b);
    std::string where = buf.storage_id ? fmt::format("sid {}", *buf.storage_id)
                        : w >= 0      ? fmt::format("ws{} of n{}", w, buf.node)
                                      : std::string("no storage id");
    // Symbolic shapes: "[8, 100] = [n, 100]".
    std::string symbolic = buf.shape_expr.empty() ? std::string()
                                                  : fmt::format(" = [{}]", clean(fmt::format("{}", fmt::join(buf.shape_expr, ", "))));
    std::string view = valid_index(df_.buffers, buf.view_of)
                           ? fmt::format("  a view of buffer {} {} at byte {}", buf.view_of,
                                         clean(df_.buffers[buf.view_of].name), buf.view_offset)
                           : std::string();
    // An input whose values shaped the flow (an ONNX Expand's target shape).
    if (!buf.values_used.empty())
      view += fmt::format("  values used: [{}]{}",
                          fmt::join(buf.values_used.begin(), buf.values_used.begin() + std::min<size_t>(buf.values_used.size(), 16), ", "),
                          buf.values_used.size() > 16 ? ", ..." : "");
    if (buf.per_rank) view += "  per rank (each rank holds its own)";
    return fmt::format("buffer {} {}  {}  {}  {} [{}]{}  {}{}", b, paint(clean(buf.name), Color::Bold), kind, where,
                       clean(buf.dtype), fmt::join(buf.shape, ", "), symbolic, human_bytes(buf.bytes), view);
  }

  void relay(const std::string& indent, const Node& n) {
    if (n.relay_ops.empty()) {
      line(indent, "relay ops", n.op == "null" ? "-" : "none known");
      return;
    }
    size_t w = 0;
    for (const RelayOp& op : n.relay_ops) w = std::max(w, width(clean(op.name)));
    for (size_t i = 0; i < n.relay_ops.size(); ++i) {
      const RelayOp& op = n.relay_ops[i];
      std::string v = paint(clean(op.name), Color::Green);
      if (!op.type.empty()) v += std::string(w - width(clean(op.name)) + 2, ' ') + clean(op.type);
      line(indent, i == 0 ? "relay ops" : "", v);
    }
    line(indent, "", n.relay_source == "relay.txt" ? "(exact: from relay.txt)"
                     : n.relay_source == "name"    ? "(decoded from the function name: no relay.txt entry, types unknown)"
                                                   : "(source unknown)");
  }

  /// A kernel ("k5 name (n13)") or a library call ("lib0 name (library call, n4)").
  std::string launch_ref(int id, bool library_call) const {
    if (!library_call) return kernel_ref(id);
    if (!valid_index(df_.library_calls, id)) return fmt::format("lib{}?", id);
    const LibraryCall& c = df_.library_calls[id];
    return paint(fmt::format("lib{}", id), Color::Cyan) + fmt::format(" {} (library call, n{})", clean(c.name), c.node);
  }

  /// RAW sources of buffer `b` into launch `k` (a library call's id when `call`).
  std::vector<std::string> producers(int k, bool call, int b) const {
    std::vector<std::string> v;
    for (const Dependency& d : df_.dependencies)
      if (d.kind == Dependency::Kind::RAW && d.to_library_call == call && d.to == k && d.to_buffer == b)
        v.push_back(launch_ref(d.from, d.from_library_call));
    return v;
  }
  std::vector<std::string> consumers(int k, bool call, int b) const {
    std::vector<std::string> v;
    for (const Dependency& d : df_.dependencies)
      if (d.kind == Dependency::Kind::RAW && d.from_library_call == call && d.from == k && d.from_buffer == b)
        v.push_back(launch_ref(d.to, d.to_library_call));
    return v;
  }

  std::string refs(const std::vector<int>& ks) const {
    std::vector<std::string> v;
    for (int k : ks) v.push_back(kernel_ref(k));
    return fmt::format("{}", fmt::join(v, ", "));
  }

  bool is_output(int b) const { return std::count(df_.outputs.begin(), df_.outputs.end(), b) > 0; }

  void kernel(const Kernel& k, const std::string& in) {
    out += in + paint(fmt::format("kernel k{}", k.id), Color::Cyan) + "  " + paint(clean(k.name), Color::Bold) + "\n";
    const std::string i2 = in + "  ";
    const Node* n = valid_index(df_.nodes, k.node) ? &df_.nodes[k.node] : nullptr;
    if (n) {
      auto pos = std::find(n->kernels.begin(), n->kernels.end(), k.id);
      std::vector<std::string> ids;
      for (int x : n->kernels) ids.push_back(fmt::format("k{}", x));
      line(i2, "graph node",
           node_ref(k.node) + fmt::format("  (kernel {} of {}: {})", pos - n->kernels.begin() + 1, n->kernels.size(),
                                          fmt::join(ids, ", ")));
      std::string fn = clean(k.function);
      if (n->loc.valid()) fn += "  defined at " + clean(fmt::format("{}:{}:{}", n->loc.file, n->loc.line, n->loc.col));
      line(i2, "function", fn);
      relay(i2, *n);
    } else {
      line(i2, "graph node", fmt::format("n{} (not in the graph)", k.node));
      line(i2, "function", clean(k.function));
    }
    line(i2, "launched at",
         k.loc.valid() ? clean(fmt::format("{}:{}:{}", k.loc.file, k.loc.line, k.loc.col)) : std::string("unknown"));
    line(i2, "host loops",
         k.loop_iterations.empty()
             ? std::string("none")
             : fmt::format("{} (iteration index of each enclosing loop, outermost first)",
                           paint(fmt::format("[{}]", fmt::join(k.loop_iterations, ", ")), Color::Yellow)));
    // Symbolic shapes: "grid (1,7,1) = ((n + 31) >> 5, 7, 1)".
    auto symbolic = [&](const std::array<std::string, 3>& e) {
      return e[0].empty() ? std::string() : clean(fmt::format(" = ({}, {}, {})", e[0], e[1], e[2]));
    };
    line(i2, "launch",
         fmt::format("grid {}{}  block {}{}  dynamic shared memory {}", dim3(k.grid), symbolic(k.grid_expr),
                     dim3(k.block), symbolic(k.block_expr),
                     human_bytes(static_cast<uint64_t>(std::max<int64_t>(0, k.dynamic_shared_memory)))));
    const DeviceFunction* dev = valid_index(df_.device_functions, k.device_function)
                                    ? &df_.device_functions[k.device_function]
                                    : nullptr;
    if (dev) {
      std::string d = dev->loc.valid() ? clean(fmt::format("{}:{}:{}", dev->loc.file, dev->loc.line, dev->loc.col))
                                       : std::string("in the device source");
      if (dev->launch_bounds) d += fmt::format("  __launch_bounds__({})", dev->launch_bounds);
      line(i2, "device code", d);
    } else {
      line(i2, "device code", "not read (accesses unknown)");
    }
    const Traffic t = kernel_traffic(df_, k);
    line(i2, "traffic", fmt::format("reads {}, writes {} ({})", human_bytes(t.read), human_bytes(t.written), t.measure()));
    // Time from code (analysis/time_model.h) on the H100, with each term, so a reader sees why.
    if (const GpuArch* arch = find_gpu_arch("h100")) {
      auto us = [](double v) {
        return v >= 100 ? fmt::format("{:.0f}", v)
               : v >= 10 ? fmt::format("{:.1f}", v)
               : v >= 0.01 ? fmt::format("{:.3g}", v)
                           : std::string("<0.01");
      };
      std::string why;
      if (std::optional<KernelPrediction> p = predict_kernel(df_, k, *arch, &why)) {
        if (p->source == "code")
          line(i2, "time (h100)",
               fmt::format("predicted {} us from its code, limited by {}: {} wave{} of {} block{} a SM ({}), "
                           "chain {} us, issue {} us, DRAM {} us, L2 {} us, launch {} us (docs/costs.md)",
                           us(p->us), p->limiter, p->waves, p->waves == 1 ? "" : "s", p->blocks_per_sm,
                           p->blocks_per_sm == 1 ? "" : "s", p->occupancy_limit, us(p->latency_us), us(p->issue_us),
                           us(p->dram_us), us(p->l2_us), us(arch->launch_us)));
        else
          line(i2, "time (h100)", fmt::format("at least {} us ({})", us(p->us), why));
      }
    }

    arguments(k.args, k.node, k.id, false, dev, i2);
    orderings(k.id, false, i2);
  }

  void library_call(const LibraryCall& c) {
    out += paint(fmt::format("library call lib{}", c.id), Color::Cyan) + "  " + paint(clean(c.name), Color::Bold) + "\n";
    const std::string i2 = "  ";
    if (valid_index(df_.nodes, c.node)) {
      const Node& n = df_.nodes[c.node];
      line(i2, "graph node", node_ref(c.node));
      std::string fn = clean(c.function);
      if (n.loc.valid()) fn += "  defined at " + clean(fmt::format("{}:{}:{}", n.loc.file, n.loc.line, n.loc.col));
      line(i2, "function", fn);
      relay(i2, n);
    } else {
      line(i2, "graph node", fmt::format("n{} (not in the graph)", c.node));
    }
    line(i2, "called at",
         c.loc.valid() ? clean(fmt::format("{}:{}:{}", c.loc.file, c.loc.line, c.loc.col)) : std::string("unknown"));
    line(i2, "in order", c.after_kernel < 0 ? std::string("before the first kernel")
                                            : "after " + kernel_ref(c.after_kernel));
    if (const Collective* k = c.collective ? &*c.collective : nullptr) {
      line(i2, "collective",
           fmt::format("{}: {} {} elements ({} per rank), among {}{}{}", clean(k->kind),
                       k->reduce_op.empty() ? std::string() : clean(k->reduce_op) + " of", k->elements,
                       exact_bytes(k->bytes), k->in_group ? "the ranks of its group" : "every rank",
                       df_.ranks > 1 ? fmt::format(" ({} ranks)", df_.ranks) : std::string(),
                       k->peer >= 0 ? fmt::format("; peer rank {}", k->peer) : std::string()));
      line(i2, "code", "a collective every rank makes here (TVM's disco runtime, NCCL): it reads what it sends and "
                       "writes what it receives");
    } else {
      line(i2, "code", "opaque (a library): a buffer only read by its node is read, others read and written");
    }
    const Traffic t = library_call_traffic(df_, c);
    line(i2, "traffic", fmt::format("reads {}, writes {} (buffer sizes)", human_bytes(t.read), human_bytes(t.written)));
    arguments(c.args, c.node, c.id, true, nullptr, i2);
    orderings(c.id, true, i2);
  }

  /// The arguments of kernel or library call `id`, with producers and consumers.
  void arguments(const std::vector<Arg>& args, int node, int id, bool call, const DeviceFunction* dev,
                 const std::string& i2) {
    out += i2 + paint("arguments", Color::Dim) + "\n";
    const std::string i3 = i2 + "  ", i4 = i3 + "     ";
    for (size_t a = 0; a < args.size(); ++a) {      const Arg& arg = args[a];
      std::string head = fmt::format("#{}", a);
      if (dev && a < dev->params.size())
        head += fmt::format(" {} ({})", paint(clean(dev->params[a].name), Color::Bold), clean(dev->params[a].type));
      head += "  " + clean(arg.dtype);
      switch (arg.kind) {
        case Arg::Kind::Int:
          out += i3 + head + fmt::format("  scalar {}", arg.int_value) +
                 (arg.expr.empty() ? std::string() : " = " + clean(arg.expr)) + "\n";
          continue;
        case Arg::Kind::Float: out += i3 + head + fmt::format("  scalar {}", arg.float_value) + "\n"; continue;
        case Arg::Kind::Null:
          out += i3 + head + (arg.dtype == "str" ? "  \"" + clean(arg.text) + "\"" : std::string("  NULL")) + "\n";
          continue;
        case Arg::Kind::Buffer: break;
      }
      auto [reads, writes] = reads_writes(df_, node, arg);
      const char* acc = arg.access == Access::Unknown ? (reads && writes ? "unknown (readwrite assumed)"
                                                         : reads          ? "unknown (read: a node input)"
                                                                          : "unknown (write: a node output)")
                                                      : to_string(arg.access);
      out += i3 + head + "  " + paint(acc, arg.access == Access::Write ? Color::Yellow : Color::Green) + "\n";
      std::string where = buffer_text(arg.buffer);
      where += fmt::format("  offset {}", arg.offset);
      if (valid_index(df_.buffers, arg.view)) {
        const Buffer& v = df_.buffers[arg.view];
        where += fmt::format("  through view {} {} {} [{}] (node {}: shares its memory, launches nothing)", v.id,
                             clean(v.name), clean(v.dtype), fmt::join(v.shape, ", "), v.node);
      }
      out += i4 + where + "\n";
      if (!call && valid_index(df_.kernels, id) && arg.footprint)
        out += i4 + paint("footprint", Color::Dim) + "  " + clean(footprint_text(df_, df_.kernels[id], a)) + "\n";
      if (!arg.tensor_dtype.empty())
        out += i4 + paint("tensor", Color::Dim) +
               fmt::format("  {} [{}] (the DLTensor the callee sees)", clean(arg.tensor_dtype),
                           fmt::join(arg.tensor_shape, ", ")) +
               "\n";
      if (reads) {
        std::vector<std::string> p = producers(id, call, arg.buffer);
        std::string v = fmt::format("{}", fmt::join(p, ", "));
        if (p.empty() && valid_index(df_.buffers, arg.buffer)) {
          const Buffer& b = df_.buffers[arg.buffer];
          v = b.kind == BufferKind::Input   ? "none: a model input"
              : b.kind == BufferKind::Param ? "none: a param (bound weight)"
                                            : "no kernel writes it before this launch";
        }
        out += i4 + paint("producers", Color::Dim) + "  " + v + "\n";
      }
      if (writes) {
        std::vector<std::string> c = consumers(id, call, arg.buffer);
        std::string v = fmt::format("{}", fmt::join(c, ", "));
        if (is_output(arg.buffer)) v += c.empty() ? "a model output" : ", and a model output";
        if (v.empty()) v = "no later kernel reads it";
        out += i4 + paint("consumers", Color::Dim) + "  " + v + "\n";
      }
    }
  }

  /// Orderings from storage reuse (write-after-read, write-after-write).
  void orderings(int id, bool call, const std::string& i2) {
    std::vector<std::string> before, after;
    for (const Dependency& d : df_.dependencies) {
      if (d.kind == Dependency::Kind::RAW) continue;
      if (d.to == id && d.to_library_call == call)
        after.push_back(fmt::format("{}{} ({}, {})", d.from_library_call ? "lib" : "k", d.from, to_string(d.kind),
                                    memory_name(df_, d.to_buffer)));
      if (d.from == id && d.from_library_call == call)
        before.push_back(fmt::format("{}{} ({}, {})", d.to_library_call ? "lib" : "k", d.to, to_string(d.kind),
                                     memory_name(df_, d.from_buffer)));
    }
    if (!after.empty()) line(i2, "runs after", fmt::format("{}", fmt::join(after, ", ")));
    if (!before.empty()) line(i2, "runs before", fmt::format("{}", fmt::join(before, ", ")));
  }

  void node(const Node& n) {
    out += paint(fmt::format("node n{}", n.id), Color::Magenta) + "  " + paint(clean(n.name), Color::Bold) + "\n";
    const std::string i2 = "  ";
    if (n.op == "null") {
      const bool param = !n.outputs.empty() && valid_index(df_.buffers, n.outputs[0]) &&
                         df_.buffers[n.outputs[0]].kind == BufferKind::Param;
      line(i2, "op", param ? "null (a param: a bound weight)" : "null (a model input)");
      for (int b : n.outputs) {
        line(i2, "provides", buffer_text(b));
        std::vector<int> readers;
        for (const Kernel& k : df_.kernels)
          for (const Arg& a : k.args)
            if (a.kind == Arg::Kind::Buffer && a.buffer == b && reads_writes(df_, k.node, a).first) {
              readers.push_back(k.id);
              break;
            }
        line(i2, "read by", readers.empty() ? std::string("no kernel") : refs(readers));
      }
      return;
    }
    line(i2, "op", clean(n.op));
    std::string fn = clean(n.function);
    if (n.loc.valid()) fn += "  defined at " + clean(fmt::format("{}:{}:{}", n.loc.file, n.loc.line, n.loc.col));
    line(i2, "function", fn);
    std::vector<std::string> same;
    for (const Node& o : df_.nodes)
      if (o.id != n.id && o.op == "tvm_op" && o.function == n.function) same.push_back(fmt::format("n{}", o.id));
    if (!same.empty()) line(i2, "also run by", fmt::format("{}", fmt::join(same, ", ")));
    if (!n.session_step.empty()) line(i2, "session step", clean(n.session_step));
    if (!n.cuda_graph.empty()) line(i2, "CUDA graph", clean(n.cuda_graph));
    if (!n.runtime_call.empty()) {
      line(i2, "called by", fmt::format("TVM's runtime inside {} (layer {}): {}", clean(n.runtime_call), n.layer,
                                        clean(n.runtime_role)));
      for (size_t i = 0; i < n.runtime_args.size(); ++i) {
        const Arg& a = n.runtime_args[i];
        std::string text = a.kind == Arg::Kind::Int     ? fmt::format("{}", a.int_value)
                           : a.kind == Arg::Kind::Float ? fmt::format("{}", a.float_value)
                                                        : fmt::format("{}[{}] {}{}", clean(a.tensor_dtype),
                                                                      fmt::join(a.tensor_shape, ", "), buffer_text(a.buffer),
                                                                      a.offset ? fmt::format(" at byte {}", a.offset) : "");
        line(i2, i == 0 ? "its arguments" : "", fmt::format("{}: {}", i, text));
      }
    }
    for (const HostCopy& c : df_.host_copies) {
      if (c.node != n.id) continue;
      line(i2, "copies", fmt::format("{} {} values from the host into {} at byte {}", c.values.size(), clean(c.dtype),
                                     buffer_text(c.buffer), c.offset));
      for (const HostCopy::Array& a : c.arrays) {
        std::vector<int64_t> v(c.values.begin() + a.first, c.values.begin() + a.first + std::min<int64_t>(a.count, 16));
        line(i2, "", fmt::format("{} @{} ({}): [{}{}]", clean(a.name), a.first, a.count, fmt::join(v, ", "),
                                 a.count > 16 ? ", ..." : ""));
      }
    }
    relay(i2, n);
    std::vector<int> seen;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int b = n.inputs[i];
      if (std::count(seen.begin(), seen.end(), b)) continue;
      seen.push_back(b);
      std::string from;
      if (valid_index(df_.buffers, b)) {
        const Buffer& buf = df_.buffers[b];
        from = buf.kind == BufferKind::Input   ? "a model input"
               : buf.kind == BufferKind::Param ? "a param"
                                               : "from " + node_ref(buf.node);
      }
      line(i2, i == 0 ? "reads" : "", buffer_text(b) + "  " + from);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const int b = n.outputs[i];
      std::vector<std::string> to;
      for (const Node& o : df_.nodes)
        if (o.op == "tvm_op" && std::count(o.inputs.begin(), o.inputs.end(), b)) to.push_back(node_ref(o.id));
      if (is_output(b)) to.push_back("a model output");
      line(i2, i == 0 ? "writes" : "",
           buffer_text(b) + "  " + (to.empty() ? std::string("read by no node") : "to " + fmt::format("{}", fmt::join(to, ", "))));
    }
    if (n.workspaces.empty()) line(i2, "workspaces", "none");
    for (size_t i = 0; i < n.workspaces.size(); ++i) {
      const int w = n.workspaces[i];
      std::vector<int> writers, readers;
      for (int k : n.kernels) {
        if (!valid_index(df_.kernels, k)) continue;
        bool r = false, wr = false;
        for (const Arg& a : df_.kernels[k].args)
          if (a.kind == Arg::Kind::Buffer && a.buffer == w) {
            auto [x, y] = reads_writes(df_, n.id, a);
            r |= x, wr |= y;
          }
        if (wr) writers.push_back(k);
        if (r) readers.push_back(k);
      }
      auto ids = [](const std::vector<int>& v) {
        std::vector<std::string> s;
        for (int k : v) s.push_back(fmt::format("k{}", k));
        return s.empty() ? std::string("none") : fmt::format("{}", fmt::join(s, ", "));
      };
      std::string v = paint(fmt::format("ws{}", i), Color::Yellow) + "  " + buffer_text(w);
      if (valid_index(df_.buffers, w) && df_.buffers[w].loc.valid()) {
        const SourceLoc& l = df_.buffers[w].loc;
        v += "  allocated at " + clean(fmt::format("{}:{}:{}", l.file, l.line, l.col));
      }
      line(i2, i == 0 ? "workspaces" : "", v);
      line(i2, "", fmt::format("written by {}; read by {}", ids(writers), ids(readers)));
    }
    {
      std::vector<std::string> ks;
      for (int k : n.kernels) ks.push_back(kernel_ref(k));
      line(i2, "kernels", ks.empty() ? std::string("none") : fmt::format("{}", fmt::join(ks, ", ")));
    }
    for (int c : n.library_calls)
      if (valid_index(df_.library_calls, c))
        line(i2, "library call", fmt::format("lib{} {}", c, clean(df_.library_calls[c].name)));
    const Traffic t = node_traffic(df_, n);
    line(i2, "traffic", fmt::format("reads {}, writes {} (sum over its kernels)", human_bytes(t.read), human_bytes(t.written)));
    for (int k : n.kernels)
      if (valid_index(df_.kernels, k)) {
        out += "\n";
        kernel(df_.kernels[k], "  ");
      }
  }

 private:
  const Dataflow& df_;
};

/// "k12" → 12, "n3" → 3; -1 otherwise.
int parse_id(const std::string& s, char prefix) {
  if (s.size() < 2 || s.size() > 10 || s[0] != prefix) return -1;
  int v = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

Expected<std::string> render_explain(const Dataflow& df, const std::string& selector, const ShowStyle& style) {
  Explainer e(df);
  std::vector<int> kernels, nodes;
  if (selector.rfind("lib", 0) == 0 && parse_id(selector.substr(2), 'b') >= 0) {
    int c = parse_id(selector.substr(2), 'b');
    if (valid_index(df.library_calls, c)) {
      e.library_call(df.library_calls[c]);
      return finish(e.out, style);
    }
  } else if (int k = parse_id(selector, 'k'); k >= 0) {
    if (valid_index(df.kernels, k)) kernels.push_back(k);
  } else if (int n = parse_id(selector, 'n'); n >= 0) {
    if (valid_index(df.nodes, n)) nodes.push_back(n);
  } else {
    for (const Kernel& k : df.kernels)
      if (k.name == selector) kernels.push_back(k.id);
    if (kernels.empty())
      for (const Node& n : df.nodes)
        if (n.name == selector || (!n.function.empty() && n.function == selector)) nodes.push_back(n.id);
  }
  if (kernels.empty() && nodes.empty()) {
    std::string kr = df.kernels.empty() ? std::string("none") : fmt::format("k0..k{}", df.kernels.size() - 1);
    std::string nr = df.nodes.empty() ? std::string("none") : fmt::format("n0..n{}", df.nodes.size() - 1);
    std::string lr = df.library_calls.empty() ? std::string()
                     : fmt::format(", a library call as lib<ID> (lib0..lib{})", df.library_calls.size() - 1);
    return Error{clean(fmt::format("kdflow explain: error: no kernel or node '{}': name a kernel as k<ID> ({}) or by "
                                   "its name, a node as n<ID> ({}), by its graph name or by its function{}",
                                   selector, kr, nr, lr)),
                 ExitCode::Usage};
  }
  if (kernels.size() > 1)
    e.out += paint(fmt::format("{} is launched {} times", clean(selector), kernels.size()), Color::Bold) + "\n\n";
  if (nodes.size() > 1)
    e.out += paint(fmt::format("{} names {} graph nodes", clean(selector), nodes.size()), Color::Bold) + "\n\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (i) e.out += "\n";
    e.kernel(df.kernels[kernels[i]], "");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i) e.out += "\n";
    e.node(df.nodes[nodes[i]]);
  }
  return finish(e.out, style);
}

// --- profile join -----------------------------------------------------------------

std::string render_profile_join(const Dataflow& df, const Profile& p, const ProfileJoin& j, const ShowStyle& style) {
  std::string out;
  size_t matched = 0, differing = 0;
  for (const ProfileMatch& m : j.matches) {
    matched += m.kernel >= 0 ? 1 : 0;
    differing += m.mismatches.empty() ? 0 : 1;
  }
  out += paint(clean(base_name(p.file)), Color::Bold) +
         fmt::format(": {} export, {}, {}", to_string(p.tool), plural(p.rows, "row", "rows"),
                     plural(p.launches.size(), "kernel launch", "kernel launches"));
  if (p.skipped_rows) out += fmt::format(" ({} not kernels)", plural(p.skipped_rows, "row", "rows"));
  out += "\n";
  out += fmt::format("joined to {}: {} of {} launches are graph kernels; {} of {} graph kernels profiled",
                     df.sources.graph.empty() ? std::string("the graph") : clean(df.sources.graph), matched,
                     p.launches.size(), df.kernels.size() - j.missing.size(), df.kernels.size());
  if (j.runs > 1) out += fmt::format(" ({} runs)", j.runs);
  out += "\n";
  out += "compared where the CSV has them: grid, block, dynamic shared memory\n";
  if (differing)
    out += paint(fmt::format("{} of {} profiled launches differ from the graph's launch configuration", differing,
                             matched),
                 Color::Yellow) +
           "\n";
  out += "\n";

  const bool ids = std::any_of(p.launches.begin(), p.launches.end(), [](const ProfiledLaunch& l) { return !l.id.empty(); });
  const bool times = std::any_of(p.launches.begin(), p.launches.end(), [](const ProfiledLaunch& l) { return l.duration_ns.has_value(); });
  Row header{{"line", Color::None, true}};
  if (ids) header.push_back({"ID", Color::None, true});
  header.push_back({"kernel (as profiled)"});
  if (j.runs > 1) header.push_back({"run", Color::None, true});
  for (const char* h : {"graph", "node", "function", "relay ops", "grid", "block"}) header.push_back({h});
  if (times) header.push_back({"time", Color::None, true});
  header.push_back({"check"});
  std::vector<Row> rows;
  for (const ProfileMatch& m : j.matches) {
    const ProfiledLaunch& l = p.launches[m.launch];
    Row r{{std::to_string(l.line), Color::Dim, true}};
    if (ids) r.push_back({clean(l.id), Color::None, true});
    r.push_back({clean(l.name)});
    if (j.runs > 1) r.push_back({m.kernel >= 0 ? std::to_string(m.run) : "", Color::None, true});
    if (m.kernel >= 0) {
      const Kernel& k = df.kernels[m.kernel];
      r.push_back({fmt::format("k{}", k.id), Color::Cyan});
      r.push_back({fmt::format("n{}", k.node), Color::Magenta});
      r.push_back({clean(k.function)});
      r.push_back({valid_index(df.nodes, k.node) ? relay_ops_text(df.nodes[k.node]) : "", Color::Green});
    } else {
      r.push_back({"-", Color::Red});
      r.push_back({"-", Color::Red});
      r.push_back({"-"});
      r.push_back({"-"});
    }
    r.push_back({l.grid ? dim3(*l.grid) : "-"});
    r.push_back({l.block ? dim3(*l.block) : "-"});
    if (times) r.push_back({l.duration_ns ? fmt::format("{:.2f} us", *l.duration_ns / 1000.0) : "-", Color::None, true});
    if (m.kernel < 0) {
      r.push_back({"not in the graph", Color::Red});
    } else if (m.mismatches.empty()) {
      r.push_back({"ok", Color::Green});
    } else {
      std::vector<std::string> v;
      for (const ProfileMismatch& mm : m.mismatches)
        v.push_back(fmt::format("{} {} here, {} in the graph", mm.what, mm.profiled, mm.graph));
      r.push_back({fmt::format("{}", fmt::join(v, "; ")), Color::Yellow});
    }
    rows.push_back(r);
  }
  out += render_table(header, rows);

  out += "\n" + paint("graph kernels missing from the CSV", Color::Bold) + ": " +
         (j.missing.empty() ? std::string("none") : std::to_string(j.missing.size())) + "\n";
  for (int k : j.missing) {
    const Kernel& kn = df.kernels[k];
    out += fmt::format("  {} {}  {} {}\n", paint(fmt::format("k{}", k), Color::Cyan), clean(kn.name),
                       paint(fmt::format("n{}", kn.node), Color::Magenta), clean(kn.function));
  }
  out += paint("CSV kernels the graph does not know", Color::Bold) + ": " +
         (j.unknown.empty() ? std::string("none") : std::to_string(j.unknown.size())) + "\n";
  bool other_scheme = false;
  for (const UnknownProfiledKernel& u : j.unknown) {
    out += fmt::format("  {}  ({}, first on line {})", paint(clean(u.name), Color::Red),
                       plural(u.launches, "launch", "launches"), u.first_line);
    if (u.other_scheme_kernel >= 0) {
      out += fmt::format(": the graph has k{} {}", u.other_scheme_kernel, clean(df.kernels[u.other_scheme_kernel].name));
      other_scheme = true;
    }
    out += "\n";
  }
  if (other_scheme)
    out += paint("TVM 0.8 names kernels ..._kernel0, ..._kernel1 and TVM 0.13+ ..._kernel, ..._kernel_1: the CSV was "
                 "probably profiled from a build of this model by another TVM version",
                 Color::Yellow) +
           "\n";
  return finish(out, style);
}

// --- commands ---------------------------------------------------------------------

namespace {

Expected<ShowStyle> style_for(const std::string& when) {
  ShowStyle s;
  if (when == "always") s.color = true;
  else if (when == "never") s.color = false;
  else if (when == "auto" || when.empty()) s.color = isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
  else return Error{fmt::format("kdflow: error: --color must be auto, always or never, not '{}'", clean(when)), ExitCode::Usage};
  return s;
}

int write_out(const std::string& text, std::ostream& out, std::ostream& err) {
  out << text;
  out.flush();
  if (!out) return report(Error{"kdflow: error: cannot write the output", ExitCode::IoError}, err);
  return 0;
}

}  // namespace

int run_show_command(const ShowCommand& cmd, std::ostream& out, std::ostream& err) {
  Expected<ShowStyle> style = style_for(cmd.color);
  if (!style) return report(style.error(), err);
  // The CSV first: a bad export is reported before a long extraction.
  std::optional<Profile> profile;
  if (!cmd.profile.empty()) {
    Expected<std::string> text = read_file(cmd.profile, kMaxCsvBytes);
    if (!text) return report(text.error(), err);
    Expected<Profile> p = read_profile_csv(*text, cmd.profile);
    if (!p) return report(p.error(), err);
    profile = p.take();
  }
  TerminalProgress progress;
  progress.err = &err;
  progress.enabled = progress_wanted(cmd.quiet);
  Expected<Dataflow> df = load_dataflow(cmd.inputs, print_terminal_progress, &progress);
  if (!df) return report(df.error(), err);
  report_warnings(*df, err);
  if (profile) {
    ProfileJoin join = join_profile(*df, *profile);
    report_profile_join(*profile, join, "show", false, err);
    return write_out(render_profile_join(*df, *profile, join, *style), out, err);
  }
  return write_out(render_show(*df, *style), out, err);
}

int run_explain_command(const ExplainCommand& cmd, std::ostream& out, std::ostream& err) {
  Expected<ShowStyle> style = style_for(cmd.color);
  if (!style) return report(style.error(), err);
  TerminalProgress progress;
  progress.err = &err;
  progress.enabled = progress_wanted(cmd.quiet);
  Expected<Dataflow> df = load_dataflow(cmd.inputs, print_terminal_progress, &progress);
  if (!df) return report(df.error(), err);
  report_warnings(*df, err);
  Expected<std::string> text = render_explain(*df, cmd.selector, *style);
  if (!text) return report(text.error(), err);
  return write_out(*text, out, err);
}

}  // namespace kdflow

// launch_graph.cpp — see launch_graph.h.
#include "kdflow/analysis/launch_graph.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>
#include <utility>

namespace kdflow {
namespace {

/// Longest path by weight (weights per kernel) in a DAG whose edges go from smaller ids to
/// larger ones; ties keep the smallest predecessor, so the result is deterministic.
std::pair<double, std::vector<int>> longest(const LaunchGraph& g, const std::vector<double>& w) {
  size_t n = g.kernels;
  if (n == 0) return {0, {}};
  std::vector<double> best(n, 0);
  std::vector<int> from(n, -1);
  for (size_t v = 0; v < n; ++v) {
    double base = 0;
    for (int u : g.preds[v])
      if (from[v] < 0 || best[u] > base) {
        base = best[u];
        from[v] = u;
      }
    best[v] = base + (v < w.size() ? w[v] : 0);
  }
  size_t end = 0;
  for (size_t v = 1; v < n; ++v)
    if (best[v] > best[end]) end = v;
  std::vector<int> path;
  for (int v = static_cast<int>(end); v >= 0; v = from[v]) path.push_back(v);
  std::reverse(path.begin(), path.end());
  return {best[end], path};
}

/// The transitive reduction of a DAG given by each vertex's direct predecessors (all
/// smaller than the vertex): ancestors as bitsets; a direct predecessor u of v is redundant
/// when a later direct predecessor of v (processed first, in descending order) already
/// reaches it. Fills `preds` (sorted) and returns the number of edges kept.
size_t reduce_transitively(const std::vector<std::set<int>>& direct, std::vector<std::vector<int>>* preds) {
  const size_t n = direct.size();
  size_t edges = 0;
  size_t words = (n + 63) / 64;
  std::vector<std::vector<uint64_t>> anc(n, std::vector<uint64_t>(words, 0));
  auto has = [&](const std::vector<uint64_t>& b, int i) { return (b[i / 64] >> (i % 64)) & 1u; };
  for (size_t v = 0; v < n; ++v) {
    std::vector<uint64_t> reach(words, 0);
    for (auto it = direct[v].rbegin(); it != direct[v].rend(); ++it) {
      int u = *it;
      if (!has(reach, u)) (*preds)[v].push_back(u);
      reach[u / 64] |= uint64_t{1} << (u % 64);
      for (size_t k = 0; k < words; ++k) reach[k] |= anc[u][k];
    }
    anc[v] = std::move(reach);
    std::sort((*preds)[v].begin(), (*preds)[v].end());
    edges += (*preds)[v].size();
  }
  return edges;
}

}  // namespace

LaunchGraph launch_graph(const Dataflow& df) {
  LaunchGraph g;
  size_t n = df.kernels.size();
  g.kernels = n;
  g.preds.assign(n, {});
  std::vector<std::set<int>> direct(n);
  for (const Dependency& d : df.dependencies) {
    if (d.from_library_call || d.to_library_call) continue;
    if (d.from < 0 || d.to < 0 || static_cast<size_t>(d.to) >= n || d.from >= d.to) continue;
    direct[d.to].insert(d.from);
  }
  for (const auto& s : direct) g.dependency_pairs += s.size();

  g.edges = reduce_transitively(direct, &g.preds);
  auto [len, path] = longest(g, std::vector<double>(n, 1.0));
  g.longest_chain = static_cast<int>(len);
  g.longest_path = std::move(path);
  return g;
}

namespace {

/// The memory a buffer lives in, for host copies' dependencies: its storage, or the buffer
/// itself where it has none (a workspace). Storage keys are >= 0, buffer keys < 0.
int64_t memory_key(const Dataflow& df, int buffer) {
  if (buffer < 0 || static_cast<size_t>(buffer) >= df.buffers.size()) return INT64_MIN;
  const Buffer& b = df.buffers[buffer];
  return b.storage_id ? *b.storage_id : -1 - static_cast<int64_t>(buffer);
}

}  // namespace

StepGraph step_graph(const Dataflow& df) {
  StepGraph g;
  const size_t nk = df.kernels.size(), nc = df.library_calls.size(), nh = df.host_copies.size();
  std::vector<int> kernel_step(nk, -1), call_step(nc, -1), copy_step(nh, -1);
  std::vector<std::vector<int>> calls_after(nk + 1);
  for (size_t c = 0; c < nc; ++c) {
    int a = df.library_calls[c].after_kernel;
    if (a < -1 || a >= static_cast<int>(nk)) a = static_cast<int>(nk) - 1;  // out of range: at the end
    calls_after[static_cast<size_t>(a + 1)].push_back(static_cast<int>(c));
  }
  // Host copies in node order (stable); each goes before the first step of a later node.
  std::vector<int> copies(nh);
  for (size_t c = 0; c < nh; ++c) copies[c] = static_cast<int>(c);
  std::stable_sort(copies.begin(), copies.end(),
                   [&](int a, int b) { return df.host_copies[a].node < df.host_copies[b].node; });
  size_t next_copy = 0;
  auto add_copy = [&] {
    const int c = copies[next_copy++];
    copy_step[c] = static_cast<int>(g.steps.size());
    g.steps.push_back({false, true, c});
  };
  auto add = [&](bool call, int id) {
    const int node = call ? df.library_calls[id].node : df.kernels[id].node;
    while (next_copy < nh && df.host_copies[copies[next_copy]].node < node) add_copy();
    (call ? call_step : kernel_step)[id] = static_cast<int>(g.steps.size());
    g.steps.push_back({call, false, id});
  };
  for (int c : calls_after[0]) add(true, c);
  for (size_t k = 0; k < nk; ++k) {
    add(false, static_cast<int>(k));
    for (int c : calls_after[k + 1]) add(true, c);
  }
  // Copies after the last step change nothing a step reads; they are steps all the same.
  while (next_copy < nh) add_copy();
  const size_t n = g.steps.size();
  g.preds.assign(n, {});
  std::vector<std::set<int>> direct(n);
  for (const Dependency& d : df.dependencies) {
    const std::vector<int>& fs = d.from_library_call ? call_step : kernel_step;
    const std::vector<int>& ts = d.to_library_call ? call_step : kernel_step;
    if (d.from < 0 || d.to < 0 || static_cast<size_t>(d.from) >= fs.size() || static_cast<size_t>(d.to) >= ts.size())
      continue;
    int u = fs[d.from], v = ts[d.to];
    if (u < v) direct[v].insert(u);  // an edge against run order cannot be honoured: dropped
  }
  if (nh > 0) {
    // The memory each step touches; a copy is ordered after every earlier step touching
    // what it writes and before every later one.
    std::vector<std::set<int64_t>> touches(n);
    for (size_t s = 0; s < n; ++s) {
      const StepGraph::Step& st = g.steps[s];
      if (st.host_copy) {
        touches[s].insert(memory_key(df, df.host_copies[st.id].buffer));
        continue;
      }
      const std::vector<Arg>& args = st.library_call ? df.library_calls[st.id].args : df.kernels[st.id].args;
      for (const Arg& a : args)
        if (a.kind == Arg::Kind::Buffer) touches[s].insert(memory_key(df, a.buffer));
    }
    for (size_t c = 0; c < nh; ++c) {
      const int cs = copy_step[c];
      const int64_t key = memory_key(df, df.host_copies[c].buffer);
      for (size_t s = 0; s < n; ++s) {
        if (static_cast<int>(s) == cs || !touches[s].count(key)) continue;
        if (static_cast<int>(s) < cs) direct[cs].insert(static_cast<int>(s));
        else direct[s].insert(cs);
      }
    }
  }
  for (const auto& s : direct) g.dependency_pairs += s.size();
  g.edges = reduce_transitively(direct, &g.preds);
  return g;
}

CriticalPath critical_path(const LaunchGraph& g, const std::vector<double>& kernel_us) {
  auto [t, path] = longest(g, kernel_us);
  return CriticalPath{t, std::move(path)};
}

}  // namespace kdflow

namespace kdflow {

LaunchSlice slice_launches(const Dataflow& df, int first_kernel, int last_kernel) {
  LaunchSlice s;
  auto reads = [](Access a) { return a != Access::Write; };
  auto writes = [](Access a) { return a != Access::Read; };
  std::set<int> written, live;
  for (int k = first_kernel; k <= last_kernel && k >= 0 && static_cast<size_t>(k) < df.kernels.size(); ++k) {
    s.kernels.push_back(k);
    const Kernel& kn = df.kernels[k];
    // A kernel reads its inputs before it writes its outputs.
    for (const Arg& a : kn.args)
      if (a.kind == Arg::Kind::Buffer && reads(a.access) && !written.count(a.buffer)) live.insert(a.buffer);
    for (const Arg& a : kn.args)
      if (a.kind == Arg::Kind::Buffer && writes(a.access)) written.insert(a.buffer);
  }
  s.live_ins.assign(live.begin(), live.end());
  s.writes.assign(written.begin(), written.end());
  for (int b : s.live_ins) {
    int writer = -1;
    for (int k = first_kernel - 1; k >= 0 && writer < 0; --k)
      for (const Arg& a : df.kernels[k].args)
        if (a.kind == Arg::Kind::Buffer && a.buffer == b && writes(a.access)) writer = k;
    s.live_in_writer.push_back(writer);
  }
  return s;
}

}  // namespace kdflow

// emit_view.cpp — the `kdflow view` page: Graphviz (libgvc's dot layout, components packed)
// lays out the graph of groups at write time; the page (assets/view/, inlined with d3 by
// CMake into view_assets.h) renders the positions and reacts. Emitters only print: costs and
// the summary come in ViewFacts. Deterministic: dot is, and every number is printed the same.
#include "kdflow/emit/emit_view.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emit/emit_common.h"
#include "kdflow/emit/emit.h"

#ifdef KDFLOW_HAVE_GRAPHVIZ
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>
#include "view_assets.h"
#ifdef KDFLOW_GRAPHVIZ_DOT_LAYOUT_BUILTIN
// dot's layout plugin linked in, so that no plugin is looked up on disk at run time (a wheel
// carries the library, not Graphviz's plugin folder and its config6a).
extern "C" gvplugin_library_t gvplugin_dot_layout_LTX_library;
#endif
#endif

namespace kdflow {
namespace {

using nlohmann::json;

// Geometry of a group box, in page pixels (= Graphviz points): a two-line header, then one
// row per kernel launch and library call (a table inside the box, not a layout).
constexpr double kGroupWidth = 340, kHeader = 38, kRow = 16, kPad = 6;
constexpr double kEmptyWidth = 220, kTerminalWidth = 170, kTerminalHeight = 26;

std::string num(double v) { return fmt::format("{:.1f}", v); }

json footprint_json(const Footprint& f) {
  json j = json::object();
  if (!f.unknown.empty()) {
    j["unknown"] = f.unknown;
    return j;
  }
  if (f.read) j["read"] = {(*f.read)[0], (*f.read)[1]};
  if (f.write) j["write"] = {(*f.write)[0], (*f.write)[1]};
  if (f.read_bytes) j["read_bytes"] = *f.read_bytes;
  if (f.write_bytes) j["write_bytes"] = *f.write_bytes;
  if (!f.exact) j["exact"] = false;
  return j;
}

json args_json(const std::vector<Arg>& args) {
  json out = json::array();
  for (const Arg& a : args) {
    json j = json::object();
    j["dtype"] = a.dtype;
    switch (a.kind) {
      case Arg::Kind::Buffer:
        j["buffer"] = a.buffer;
        if (a.offset) j["offset"] = a.offset;
        if (a.view >= 0) j["view"] = a.view;
        j["access"] = to_string(a.access);
        if (a.footprint) j["footprint"] = footprint_json(*a.footprint);
        if (!a.tensor_dtype.empty()) j["tensor"] = fmt::format("{}{}", a.tensor_dtype, json(a.tensor_shape).dump());
        break;
      case Arg::Kind::Int: j["value"] = a.expr.empty() ? std::to_string(a.int_value) : a.expr; break;
      case Arg::Kind::Float: j["value"] = detail::float_text(a.float_value); break;
      case Arg::Kind::Null: j["value"] = a.text.empty() ? "null" : a.text; break;
    }
    out.push_back(std::move(j));
  }
  return out;
}

/// The time predicted from code (analysis/time_model.h) of a kernel or function.
void predicted_json(json& j, const KernelCost& c) {
  if (!c.predicted) return;
  j["predicted_us"] = c.predicted->us;
  j["predicted_limiter"] = c.predicted->limiter;
  j["predicted_source"] = c.predicted->source;
}
void predicted_json(json& j, const FunctionCost& f) {
  if (!f.predicted_us) return;
  j["predicted_us"] = *f.predicted_us;
  j["predicted_source"] = f.predicted_source;
}

/// FLOPs, bytes, bound, predicted and measured time of a kernel or function, as the page shows them.
template <class Cost>
void cost_json(json& j, const Cost& c) {
  if (c.flops) {
    j["flops"] = *c.flops;
    j["flops_source"] = "formula";
  } else if (c.counted && c.counted->flops) {
    j["flops"] = *c.counted->flops;
    j["flops_source"] = "counted (" + c.counted->status + ")";
  }
  j["bytes"] = c.bytes;
  if (c.bound) {
    j["bound_us"] = c.bound->us();
    j["limiter"] = c.bound->limiter();
  }
  predicted_json(j, c);
  if (c.measured) {
    j["time_us"] = c.measured->us;
    if (c.bound && c.measured->us > 0) j["roofline"] = c.bound->us() / c.measured->us;
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

/// The graph the page draws: groups (tvm_op nodes), terminals (inputs, outputs), edges
/// (graph buffers from producer to consumer). Positions are filled by the layout.
struct Box {
  std::string key;  ///< Graphviz node name
  double w = 0, h = 0, x = 0, y = 0;
};
struct Link {
  int from = 0, to = 0;  ///< indices in boxes
  int buffer = -1;
  std::string path;      ///< SVG path data
  double lx = 0, ly = 0; ///< where the label (the buffer's size) goes: the spline's middle point
};

struct Scene {
  std::vector<Box> boxes;
  std::vector<int> group_node;     ///< per box: the node id (-1 for terminals)
  std::vector<int> terminal_buf;   ///< per box: the buffer id of a terminal (-1 for groups)
  std::vector<Link> links;
  double width = 0, height = 0;
};

Scene build_scene(const Dataflow& df) {
  Scene s;
  std::map<int, int> group_of_node, input_box;
  auto add = [&](Box b, int node, int buf) {
    s.boxes.push_back(std::move(b));
    s.group_node.push_back(node);
    s.terminal_buf.push_back(buf);
    return static_cast<int>(s.boxes.size()) - 1;
  };
  for (int b : df.inputs) {
    if (!detail::valid_buffer(df, b)) continue;
    input_box[b] = add(Box{fmt::format("i{}", b), kTerminalWidth, kTerminalHeight}, -1, b);
  }
  for (const Node& n : df.nodes) {
    if (n.op != "tvm_op") continue;
    const size_t rows = n.kernels.size() + n.library_calls.size();
    const double w = rows ? kGroupWidth : kEmptyWidth;
    group_of_node[n.id] = add(Box{fmt::format("g{}", n.id), w, kHeader + kRow * rows + (rows ? kPad : 0)}, n.id, -1);
  }
  std::set<std::tuple<int, int, int>> seen;
  auto link = [&](int from, int to, int buf) {
    if (seen.insert({from, to, buf}).second) s.links.push_back(Link{from, to, buf, ""});
  };
  auto source_of = [&](int b) -> int {
    if (!detail::valid_buffer(df, b)) return -1;
    const Buffer& buf = df.buffers[b];
    if (auto it = group_of_node.find(buf.node); it != group_of_node.end()) return it->second;
    if (auto it = input_box.find(b); it != input_box.end()) return it->second;
    return -1;  // a param: listed in the panel, not drawn
  };
  for (const Node& n : df.nodes) {
    auto g = group_of_node.find(n.id);
    if (g == group_of_node.end()) continue;
    for (int b : n.inputs)
      if (int from = source_of(b); from >= 0 && from != g->second) link(from, g->second, b);
  }
  for (int b : df.outputs) {
    const int from = source_of(b);
    if (from < 0) continue;
    const int out = add(Box{fmt::format("o{}", b), kTerminalWidth, kTerminalHeight}, -1, b);
    link(from, out, b);
  }
  return s;
}

#ifdef KDFLOW_HAVE_GRAPHVIZ
/// Lays the scene out with Graphviz's dot (top to bottom, disconnected parts packed in an
/// array): box centres and edge splines, y flipped to grow downwards.
Status layout(Scene& s) {
  agseterr(AGMAX);  // Graphviz's warnings are not ours to print
#ifdef KDFLOW_GRAPHVIZ_DOT_LAYOUT_BUILTIN
  static const lt_symlist_t builtins[] = {{"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
                                          {nullptr, nullptr}};
  GVC_t* gvc = gvContextPlugins(builtins, 0);
#else
  GVC_t* gvc = gvContext();
#endif
  if (!gvc) return Error{"kdflow view: error: Graphviz could not start", ExitCode::Software};
  Agraph_t* g = agopen(const_cast<char*>("kdflow"), Agdirected, nullptr);
  auto gset = [&](const char* k, const char* v) { agattr(g, AGRAPH, const_cast<char*>(k), const_cast<char*>(v)); };
  gset("rankdir", "TB");
  gset("nodesep", "0.35");
  gset("ranksep", "0.5");
  gset("pack", "true");
  gset("packmode", "array");
  agattr(g, AGNODE, const_cast<char*>("shape"), const_cast<char*>("box"));
  agattr(g, AGNODE, const_cast<char*>("fixedsize"), const_cast<char*>("true"));
  agattr(g, AGNODE, const_cast<char*>("label"), const_cast<char*>(""));
  Agsym_t* width = agattr(g, AGNODE, const_cast<char*>("width"), const_cast<char*>("1"));
  Agsym_t* height = agattr(g, AGNODE, const_cast<char*>("height"), const_cast<char*>("1"));
  std::vector<Agnode_t*> nodes;
  for (const Box& b : s.boxes) {
    Agnode_t* n = agnode(g, const_cast<char*>(b.key.c_str()), 1);
    agxset(n, width, const_cast<char*>(fmt::format("{:.4f}", b.w / 72).c_str()));
    agxset(n, height, const_cast<char*>(fmt::format("{:.4f}", b.h / 72).c_str()));
    nodes.push_back(n);
  }
  std::vector<Agedge_t*> edges;
  for (size_t i = 0; i < s.links.size(); ++i) {
    std::string name = fmt::format("e{}", i);
    edges.push_back(agedge(g, nodes[s.links[i].from], nodes[s.links[i].to], const_cast<char*>(name.c_str()), 1));
  }
  if (gvLayout(gvc, g, "dot") != 0) {
    agclose(g);
    gvFreeContext(gvc);
    return Error{"kdflow view: error: Graphviz could not lay the graph out", ExitCode::Software};
  }
  const boxf bb = GD_bb(g);
  const double pad = 20;
  s.width = bb.UR.x - bb.LL.x + 2 * pad;
  s.height = bb.UR.y - bb.LL.y + 2 * pad;
  auto X = [&](double x) { return x - bb.LL.x + pad; };
  auto Y = [&](double y) { return bb.UR.y - y + pad; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    s.boxes[i].x = X(ND_coord(nodes[i]).x);
    s.boxes[i].y = Y(ND_coord(nodes[i]).y);
  }
  for (size_t i = 0; i < edges.size(); ++i) {
    const splines* spl = edges[i] ? ED_spl(edges[i]) : nullptr;
    std::string d;
    for (int k = 0; spl && k < spl->size; ++k) {
      const bezier& bz = spl->list[k];
      if (bz.size <= 0) continue;
      d += fmt::format("M{} {}", num(X(bz.list[0].x)), num(Y(bz.list[0].y)));
      for (int p = 1; p + 2 < bz.size; p += 3)
        d += fmt::format("C{} {} {} {} {} {}", num(X(bz.list[p].x)), num(Y(bz.list[p].y)), num(X(bz.list[p + 1].x)),
                         num(Y(bz.list[p + 1].y)), num(X(bz.list[p + 2].x)), num(Y(bz.list[p + 2].y)));
      if (bz.eflag) d += fmt::format("L{} {}", num(X(bz.ep.x)), num(Y(bz.ep.y)));
    }
    s.links[i].path = d;
    if (spl && spl->size > 0 && spl->list[0].size > 0) {
      const bezier& bz = spl->list[0];
      s.links[i].lx = X(bz.list[bz.size / 2].x);
      s.links[i].ly = Y(bz.list[bz.size / 2].y);
    }
  }
  gvFreeLayout(gvc, g);
  agclose(g);
  gvFreeContext(gvc);
  return Status{};
}
#endif

/// The page's data: everything the page shows, as JSON (docs/view.md).
json page_data(const Dataflow& df, const ViewFacts& facts, const Scene& s) {
  json j = json::object();
  j["schema"] = "kdflow-view/1";
  j["title"] = facts.title;
  j["measured_source"] = facts.measured_source;
  j["device"] = facts.costs ? facts.costs->device : "";
  json summary = json::array();
  for (const auto& [k, v] : facts.summary) summary.push_back({k, v});
  j["summary"] = summary;
  j["size"] = {std::stod(num(s.width)), std::stod(num(s.height))};

  std::map<int, const FunctionCost*> fcost;
  if (facts.costs)
    for (const FunctionCost& f : facts.costs->functions) fcost[f.node] = &f;

  std::vector<int> box_of_node(df.nodes.size(), -1);
  json boxes = json::array();
  for (size_t i = 0; i < s.boxes.size(); ++i) {
    const Box& b = s.boxes[i];
    json o = json::object();
    o["x"] = std::stod(num(b.x - b.w / 2));
    o["y"] = std::stod(num(b.y - b.h / 2));
    o["w"] = b.w;
    o["h"] = b.h;
    if (s.group_node[i] >= 0) {
      const Node& n = df.nodes[s.group_node[i]];
      box_of_node[n.id] = static_cast<int>(i);
      o["node"] = n.id;
      o["name"] = n.name;
      o["function"] = n.function;
      o["family"] = relay_family(n);
      json ops = json::array();
      for (const RelayOp& op : n.relay_ops) ops.push_back(op.name);
      o["ops"] = ops;
      o["kernels"] = n.kernels;
      o["calls"] = n.library_calls;
      o["workspaces"] = n.workspaces;
      o["inputs"] = n.inputs;
      o["outputs"] = n.outputs;
      if (!n.cuda_graph.empty()) o["cuda_graph"] = n.cuda_graph;
      if (!n.session_step.empty()) o["session_step"] = n.session_step;
      if (auto it = fcost.find(n.id); it != fcost.end()) cost_json(o, *it->second);
    } else {
      o["terminal"] = std::find(df.outputs.begin(), df.outputs.end(), s.terminal_buf[i]) != df.outputs.end() &&
                              b.key[0] == 'o'
                          ? "output"
                          : "input";
      o["buffer"] = s.terminal_buf[i];
    }
    boxes.push_back(std::move(o));
  }
  j["boxes"] = boxes;

  json links = json::array();
  for (const Link& l : s.links)
    links.push_back({{"from", l.from}, {"to", l.to}, {"buffer", l.buffer}, {"d", l.path},
                     {"label", {std::stod(num(l.lx)), std::stod(num(l.ly))}}});
  j["links"] = links;

  json kernels = json::array();
  for (const Kernel& k : df.kernels) {
    json o = json::object();
    o["id"] = k.id;
    o["name"] = k.name;
    o["node"] = k.node;
    o["box"] = k.node >= 0 && static_cast<size_t>(k.node) < box_of_node.size() ? box_of_node[k.node] : -1;
    o["grid"] = k.grid;
    o["block"] = k.block;
    o["smem"] = k.dynamic_shared_memory;
    o["args"] = args_json(k.args);
    if (!k.loop_iterations.empty()) o["loop"] = k.loop_iterations;
    if (facts.costs && static_cast<size_t>(k.id) < facts.costs->kernels.size())
      cost_json(o, facts.costs->kernels[k.id]);
    kernels.push_back(std::move(o));
  }
  j["kernels"] = kernels;

  json calls = json::array();
  for (const LibraryCall& c : df.library_calls) {
    json o = json::object();
    o["id"] = c.id;
    o["name"] = c.name;
    o["node"] = c.node;
    o["box"] = c.node >= 0 && static_cast<size_t>(c.node) < box_of_node.size() ? box_of_node[c.node] : -1;
    o["after_kernel"] = c.after_kernel;
    o["args"] = args_json(c.args);
    if (c.collective) {  // a sharded build's collective: its kind and what each rank sends
      o["collective"] = c.collective->kind + (c.collective->reduce_op.empty() ? "" : " " + c.collective->reduce_op) +
                        (c.collective->in_group ? "" : " (every rank)");
      o["bytes"] = c.collective->bytes;
    }
    calls.push_back(std::move(o));
  }
  j["calls"] = calls;

  json buffers = json::array();
  for (const Buffer& b : df.buffers) {
    json o = json::object();
    o["name"] = b.name;
    o["kind"] = to_string(b.kind);
    o["dtype"] = b.dtype;
    o["shape"] = b.shape;
    o["bytes"] = b.bytes;
    if (b.storage_id) o["storage_id"] = *b.storage_id;
    o["node"] = b.node;
    if (b.view_of >= 0) o["view_of"] = b.view_of;
    buffers.push_back(std::move(o));
  }
  j["buffers"] = buffers;

  // Dependencies, flat: from, to, kind (0 raw, 1 war, 2 waw), from/to a library call (0/1).
  json deps = json::array();
  for (const Dependency& d : df.dependencies) {
    deps.push_back(d.from);
    deps.push_back(d.to);
    deps.push_back(static_cast<int>(d.kind));
    deps.push_back(d.from_library_call ? 1 : 0);
    deps.push_back(d.to_library_call ? 1 : 0);
  }
  j["deps"] = deps;
  return j;
}

}  // namespace

bool view_available() {
#ifdef KDFLOW_HAVE_GRAPHVIZ
  return true;
#else
  return false;
#endif
}

Expected<std::string> emit_view_html(const Dataflow& df, const ViewFacts& facts) {
#ifndef KDFLOW_HAVE_GRAPHVIZ
  (void)df;
  (void)facts;
  return Error{"kdflow view: error: this kdflow was built without Graphviz (install libgraphviz-dev and rebuild)",
               ExitCode::Unavailable};
#else
  Scene scene = build_scene(df);
  if (Status st = layout(scene); !st) return st.error();
  // '<' only occurs inside JSON strings: escaped, no "</script>" can end the block early.
  std::string data = page_data(df, facts, scene).dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(data.size() + 64);
  for (char c : data) {
    if (c == '<') safe += "\\u003c";
    else safe += c;
  }
  std::string page = view_assets::kHtml;
  auto put = [&](const std::string& marker, const std::string& text) {
    const size_t at = page.find(marker);
    if (at != std::string::npos) page.replace(at, marker.size(), text);
  };
  // The data last: the scripts and styles cannot hold a marker the data would then satisfy.
  put("<!--KDFLOW:title-->", html_escape(facts.title.empty() ? "kdflow view" : facts.title + " — kdflow view"));
  put("/*KDFLOW:css*/", view_assets::kCss);
  put("/*KDFLOW:d3*/", view_assets::kD3);
  put("/*KDFLOW:js*/", view_assets::kJs);
  put("<!--KDFLOW:data-->", safe);
  return page;
#endif
}

}  // namespace kdflow

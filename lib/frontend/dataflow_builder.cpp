// dataflow_builder.cpp — graph + function table + host traces → dataflow IR.
//
// A packed call is classified by its name alone, as TVM's runtime resolves it:
//   - "__tvm_set_device": the runtime's device switch, not a kernel (dropped);
//   - a key of the function table: a kernel launch; its first len(arg_types) values are
//     kernel arguments, the rest launch parameters in launch_param_tags order;
//   - anything else that passes DLTensors or has a dotted name (tvm.contrib.cublas.matmul):
//     an opaque library call, kept as such;
//   - anything else: a kernel missing from the function table, an error.
#include "kdflow/frontend/dataflow_builder.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "formats/json_read.h"  // detail::quote_input

namespace kdflow {

namespace {

bool is_relay_param_name(const std::string& name) {
  if (name.size() < 2 || name[0] != 'p') return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

/// A graph attr holding a small integer ("-1", "14"): at most 9 digits, no other characters.
bool small_integer(const std::string& text, int64_t* out) {
  const size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() <= start || text.size() - start > 9 ||
      !std::all_of(text.begin() + static_cast<std::ptrdiff_t>(start), text.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *out = std::stoll(text);
  return true;
}

Error at(const SourceLoc& loc, const std::string& msg) {
  if (loc.valid()) return source_error(loc.file, loc.line, loc.col, msg);
  return file_error(loc.file, msg);
}

std::string workspace_dtype(const WorkspaceAlloc& w) {
  DType t;
  t.code = static_cast<uint8_t>(w.dtype_code);
  t.bits = static_cast<uint8_t>(w.dtype_bits);
  t.lanes = 1;
  if (w.dtype_code < 0 || w.dtype_code > 4 || w.dtype_bits <= 0 || w.dtype_bits > 255) return "uint8";
  return dtype_to_string(t);
}

bool is_int_dtype(const std::string& t) {
  return t.rfind("int", 0) == 0 || t.rfind("uint", 0) == 0 || t == "bool";
}
bool is_float_dtype(const std::string& t) {
  return t.rfind("float", 0) == 0 || t.rfind("bfloat", 0) == 0;
}

const char* kind_name(PackedArg::Kind k) {
  switch (k) {
    case PackedArg::Kind::Int: return "an integer";
    case PackedArg::Kind::Float: return "a floating value";
    case PackedArg::Kind::Pointer: return "a pointer";
    case PackedArg::Kind::Tensor: return "a DLTensor";
    case PackedArg::Kind::String: return "a string";
  }
  return "?";
}

}  // namespace

std::vector<TensorArg> node_tensor_args(const Graph& g, int nid) {
  const GraphNode& n = g.nodes[nid];
  std::vector<TensorArg> out;
  auto add = [&](int eid) {
    const GraphEntry& e = g.entries[eid];
    TensorArg t;
    t.entry_id = eid;
    t.shape = e.shape;
    t.dtype_code = e.type.code;
    t.dtype_bits = e.type.bits;
    t.dtype_lanes = e.type.lanes;
    t.device_type = e.device_type;
    t.device_id = 0;
    out.push_back(std::move(t));
  };
  for (const auto& in : n.inputs) add(g.entry_id(in));
  for (int i = 0; i < n.num_outputs; ++i) add(g.entry_id(nid, i));
  return out;
}

bool node_calls_function(const GraphNode& n) {
  return n.op == "tvm_op" && n.func_name != "__nop" && n.func_name != "__copy";
}

Expected<Dataflow> build_dataflow(const Graph& g, const FunctionTable& table,
                                  const std::function<Expected<HostTrace>(int nid)>& trace_node,
                                  const BuildOptions& options) {
  Dataflow df;
  df.sources = options.sources;

  // Which arg nodes are params.
  std::vector<char> is_param(g.nodes.size(), 0), is_arg(g.nodes.size(), 0);
  for (int nid : g.arg_nodes) {
    is_arg[nid] = 1;
    const std::string& name = g.nodes[nid].name;
    is_param[nid] = options.params_known ? options.param_names.count(name) != 0 : is_relay_param_name(name);
  }
  std::vector<char> is_head(g.entries.size(), 0);
  for (const auto& h : g.heads) is_head[g.entry_id(h)] = 1;

  // One buffer per graph entry; buffer id == entry id.
  for (size_t eid = 0; eid < g.entries.size(); ++eid) {
    const GraphEntry& e = g.entries[eid];
    const GraphNode& n = g.nodes[e.node];
    Buffer b;
    b.id = static_cast<int>(eid);
    if (is_arg[e.node]) b.kind = is_param[e.node] ? BufferKind::Param : BufferKind::Input;
    else if (is_head[eid]) b.kind = BufferKind::Output;
    else b.kind = BufferKind::Intermediate;
    b.storage_id = e.storage_id;
    b.name = n.num_outputs > 1 ? fmt::format("{}:{}", n.name, e.index) : n.name;
    b.dtype = e.dtype;
    b.shape = e.shape;
    b.bytes = e.bytes;
    b.entry_id = static_cast<int>(eid);
    b.node = e.node;
    b.output_index = e.index;
    df.buffers.push_back(std::move(b));
  }

  for (size_t nid = 0; nid < g.nodes.size(); ++nid) {
    const GraphNode& gn = g.nodes[nid];
    Node node;
    node.id = static_cast<int>(nid);
    node.op = gn.op;
    node.name = gn.name;
    node.function = gn.op == "null" ? "" : gn.func_name;
    if (auto g = gn.attrs.find("cuda_graph"); g != gn.attrs.end()) node.cuda_graph = g->second;
    if (auto g = gn.attrs.find("session_step"); g != gn.attrs.end()) node.session_step = g->second;
    if (auto g = gn.attrs.find("runtime_call"); g != gn.attrs.end()) node.runtime_call = g->second;
    if (auto g = gn.attrs.find("kv_role"); g != gn.attrs.end()) node.runtime_role = g->second;
    if (auto kl = gn.attrs.find("kv_layer"); kl != gn.attrs.end() && !node.runtime_call.empty()) {
      int64_t layer = -1;
      if (!small_integer(kl->second, &layer))
        return file_error(g.file, fmt::format("node {} has kv_layer {}, not an integer", nid,
                                              detail::quote_input(kl->second)));
      node.layer = layer;
    }
    for (const auto& in : gn.inputs) node.inputs.push_back(g.entry_id(in));
    for (int i = 0; i < gn.num_outputs; ++i) node.outputs.push_back(g.entry_id(static_cast<int>(nid), i));
    if (gn.op == "tvm_op") {
      std::vector<int> seen;
      for (int b : node.inputs) {
        if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
        seen.push_back(b);
        df.edges.push_back(Edge{Edge::Kind::Read, b, node.id});
      }
      for (int b : node.outputs) df.edges.push_back(Edge{Edge::Kind::Write, b, node.id});
    }

    if (node_calls_function(gn)) {
      Expected<HostTrace> traced = trace_node(static_cast<int>(nid));
      if (!traced) return traced.error();
      const HostTrace& tr = *traced;
      node.loc = tr.function_loc;
      // A runtime's call (the KV cache's) states its own argument count: views and scalars.
      auto num_args = gn.attrs.find("num_args");
      int64_t stated = -1;
      if (num_args != gn.attrs.end() && (!small_integer(num_args->second, &stated) || stated < 0))
        return file_error(g.file, fmt::format("node {} has num_args {}, not a count", nid,
                                              detail::quote_input(num_args->second)));
      const size_t n_tensors = num_args != gn.attrs.end() ? static_cast<size_t>(stated)
                                                          : gn.inputs.size() + static_cast<size_t>(gn.num_outputs);
      if (tr.args_used != static_cast<int>(n_tensors))
        return at(tr.function_loc, fmt::format("function '{}' unpacks {} arguments, but graph node {} ('{}') passes {} "
                                               "(is host.c from another model?)",
                                               gn.func_name, tr.args_used, nid, gn.name, n_tensors));

      const int ws_base = static_cast<int>(df.buffers.size());
      for (size_t k = 0; k < tr.workspaces.size(); ++k) {
        const WorkspaceAlloc& w = tr.workspaces[k];
        Buffer b;
        b.id = static_cast<int>(df.buffers.size());
        b.kind = BufferKind::Workspace;
        b.name = fmt::format("{}.ws{}", gn.func_name, k);
        b.dtype = workspace_dtype(w);
        auto t = parse_dtype(b.dtype);
        uint64_t es = t ? dtype_element_bytes(*t) : 1;
        b.shape = {static_cast<int64_t>(es ? w.bytes / es : w.bytes)};
        b.bytes = w.bytes;
        b.node = static_cast<int>(nid);
        b.loc = w.loc;
        node.workspaces.push_back(b.id);
        df.buffers.push_back(std::move(b));
      }

      auto bind_pointer = [&](const PackedArg& a, Arg& out, const SourceLoc& loc, int index) -> Status {
        switch (a.pointer.kind) {
          case PointerTarget::Kind::Null:
            out.kind = Arg::Kind::Null;
            return Status::ok();
          case PointerTarget::Kind::Entry:
            out.kind = Arg::Kind::Buffer;
            out.buffer = a.pointer.index;
            break;
          case PointerTarget::Kind::Workspace:
            out.kind = Arg::Kind::Buffer;
            out.buffer = ws_base + a.pointer.index;
            break;
        }
        out.offset = a.pointer.offset;
        const Buffer& b = df.buffers[out.buffer];
        if (out.offset < 0 || static_cast<uint64_t>(out.offset) > b.bytes)
          return at(loc, fmt::format("argument {} points {} bytes into '{}', outside its {} bytes", index, out.offset,
                                     b.name, b.bytes));
        return Status::ok();
      };

      for (const PackedCall& call : tr.calls) {
        if (call.name == "__tvm_set_device") continue;
        if (const FunctionInfo* info = table.find(call.name)) {
          const size_t n_args = info->arg_types.size(), n_tags = info->launch_param_tags.size();
          if (call.args.size() != n_args + n_tags)
            return at(call.loc, fmt::format("kernel '{}' is called with {} values, but {} gives it {} parameters and {} "
                                            "launch parameters",
                                            call.name, call.args.size(), table.file, n_args, n_tags));
          Kernel k;
          k.id = static_cast<int>(df.kernels.size());
          k.name = call.name;
          k.node = static_cast<int>(nid);
          k.function = gn.func_name;
          k.loc = call.loc;
          k.loop_iterations = call.loop_iterations;
          k.programmatic_dependent_launch = info->programmatic_dependent_launch;
          k.cooperative_launch = info->cooperative_launch;
          for (size_t i = 0; i < n_args; ++i) {
            const PackedArg& a = call.args[i];
            const std::string& ty = info->arg_types[i];
            Arg out;
            out.dtype = ty;
            if (ty == "handle") {
              if (a.kind != PackedArg::Kind::Pointer)
                return at(call.loc, fmt::format("kernel '{}' parameter {} is a handle, but the host passes {}", call.name,
                                                i, kind_name(a.kind)));
              if (Status s = bind_pointer(a, out, call.loc, static_cast<int>(i)); !s) return s.error();
            } else if (is_int_dtype(ty)) {
              if (a.kind != PackedArg::Kind::Int)
                return at(call.loc, fmt::format("kernel '{}' parameter {} is {}, but the host passes {}", call.name, i,
                                                ty, kind_name(a.kind)));
              out.kind = Arg::Kind::Int;
              out.int_value = a.int_value;
              out.expr = a.int_expr;
            } else if (is_float_dtype(ty)) {
              if (a.kind != PackedArg::Kind::Float && a.kind != PackedArg::Kind::Int)
                return at(call.loc, fmt::format("kernel '{}' parameter {} is {}, but the host passes {}", call.name, i,
                                                ty, kind_name(a.kind)));
              out.kind = Arg::Kind::Float;
              out.float_value = a.kind == PackedArg::Kind::Float ? a.float_value : static_cast<double>(a.int_value);
            } else {
              return at(call.loc, fmt::format("kernel '{}' parameter {} has unsupported type '{}'", call.name, i, ty));
            }
            k.args.push_back(std::move(out));
          }
          for (size_t j = 0; j < n_tags; ++j) {
            const PackedArg& a = call.args[n_args + j];
            const std::string& tag = info->launch_param_tags[j];
            if (a.kind != PackedArg::Kind::Int)
              return at(call.loc, fmt::format("launch parameter '{}' of kernel '{}' is {}, not an integer", tag,
                                              call.name, kind_name(a.kind)));
            int64_t v = a.int_value;
            if (tag == "tir.use_dyn_shared_memory") {
              if (v < 0)
                return at(call.loc, fmt::format("kernel '{}' asks for {} bytes of dynamic shared memory", call.name, v));
              k.dynamic_shared_memory = v;
              continue;
            }
            // TVM's LaunchParamConfig: blockIdx.* → grid, threadIdx.* → block; a value ≤ 0 leaves 1.
            bool grid = tag.rfind("blockIdx.", 0) == 0, block = tag.rfind("threadIdx.", 0) == 0;
            char axis = tag.empty() ? '?' : tag.back();
            if ((!grid && !block) || tag.size() != (grid ? 10u : 11u) || axis < 'x' || axis > 'z')
              return file_error(table.file, fmt::format("kernel '{}' has unknown launch tag '{}'", call.name, tag));
            (grid ? k.grid : k.block)[axis - 'x'] = v > 0 ? v : 1;
            if (!a.int_expr.empty() && v > 0) (grid ? k.grid_expr : k.block_expr)[axis - 'x'] = a.int_expr;
          }
          // A dimension computed from a shape symbol makes the other two explicit as text.
          for (auto [dims, exprs] : {std::pair{&k.grid, &k.grid_expr}, std::pair{&k.block, &k.block_expr}}) {
            bool symbolic = false;
            for (const std::string& e : *exprs) symbolic |= !e.empty();
            if (symbolic)
              for (size_t d = 0; d < 3; ++d)
                if ((*exprs)[d].empty()) (*exprs)[d] = std::to_string((*dims)[d]);
          }
          node.kernels.push_back(k.id);
          df.kernels.push_back(std::move(k));
          continue;
        }
        bool library = call.name.find('.') != std::string::npos ||
                       std::any_of(call.args.begin(), call.args.end(),
                                   [](const PackedArg& a) { return a.kind == PackedArg::Kind::Tensor; });
        if (!library)
          return at(call.loc, fmt::format("packed call to '{}', which is not in the function table {} (a kernel "
                                          "missing from the device module?)",
                                          call.name, table.file));
        LibraryCall lc;
        lc.id = static_cast<int>(df.library_calls.size());
        lc.name = call.name;
        lc.node = static_cast<int>(nid);
        lc.function = gn.func_name;
        lc.loc = call.loc;
        lc.after_kernel = df.kernels.empty() ? -1 : static_cast<int>(df.kernels.size()) - 1;
        for (size_t i = 0; i < call.args.size(); ++i) {
          const PackedArg& a = call.args[i];
          Arg out;
          switch (a.kind) {
            case PackedArg::Kind::Int:
              out.kind = Arg::Kind::Int, out.int_value = a.int_value, out.dtype = "int64";
              break;
            case PackedArg::Kind::Float:
              out.kind = Arg::Kind::Float, out.float_value = a.float_value, out.dtype = "float64";
              break;
            case PackedArg::Kind::Pointer:
              out.dtype = "handle";
              if (Status s = bind_pointer(a, out, call.loc, static_cast<int>(i)); !s) return s.error();
              break;
            case PackedArg::Kind::Tensor: {
              // The function's own argument or a DLTensor the host code built on its stack:
              // either way the buffer its data (+ byte_offset) points into, and its view.
              out.dtype = "DLTensor*";
              if (Status s = bind_pointer(a, out, call.loc, static_cast<int>(i)); !s) return s.error();
              DType t;
              t.code = a.tensor_dtype_code, t.bits = a.tensor_dtype_bits, t.lanes = a.tensor_dtype_lanes;
              if (out.kind == Arg::Kind::Buffer) {
                out.tensor_dtype = dtype_to_string(t);
                out.tensor_shape = a.tensor_shape;
              }
              break;
            }
            case PackedArg::Kind::String:
              out.kind = Arg::Kind::Null, out.dtype = "str", out.text = a.string_value;
              break;
          }
          lc.args.push_back(std::move(out));
        }
        node.library_calls.push_back(lc.id);
        df.library_calls.push_back(std::move(lc));
      }
    }
    df.nodes.push_back(std::move(node));
  }

  for (int nid : g.arg_nodes) (is_param[nid] ? df.params : df.inputs).push_back(g.entry_id(nid, 0));
  for (const auto& h : g.heads) df.outputs.push_back(g.entry_id(h));
  resolve_views(df);
  return df;
}

void resolve_views(Dataflow& df) {
  // A __nop node launches nothing: its output is its input's memory under another shape (the
  // graph executor and Relax's vm.builtin.reshape give it the same storage). Chains of views
  // resolve to the first buffer that is not one.
  for (const Node& n : df.nodes) {
    if (n.function != "__nop" || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const Buffer& in = df.buffers[n.inputs[0]];
    Buffer& out = df.buffers[n.outputs[0]];
    if (in.storage_id != out.storage_id || !in.storage_id || out.bytes > in.bytes) continue;
    out.view_of = in.view_of >= 0 ? in.view_of : in.id;
    out.view_offset = in.view_of >= 0 ? in.view_offset : 0;
  }
  // An argument passed through a view is the viewed buffer, at the view's offset.
  auto through = [&](Arg& a) {
    if (a.kind != Arg::Kind::Buffer || a.buffer < 0 || df.buffers[a.buffer].view_of < 0) return;
    const Buffer& v = df.buffers[a.buffer];
    a.view = v.id;
    a.offset += v.view_offset;
    a.buffer = v.view_of;
  };
  for (Kernel& k : df.kernels)
    for (Arg& a : k.args) through(a);
  for (LibraryCall& c : df.library_calls)
    for (Arg& a : c.args) through(a);
}

}  // namespace kdflow

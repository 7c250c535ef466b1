// emit_chakra.cpp — see emit_chakra.h. Node ids: kernels keep their ids (0..K-1), library
// calls follow (K + call id), so ids are stable and dependencies map one to one.
#include "kdflow/emit/emit_chakra.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#ifdef KDFLOW_HAVE_PROTOBUF
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "et_def.pb.h"
#endif

namespace kdflow {

#ifndef KDFLOW_HAVE_PROTOBUF
bool chakra_available() { return false; }
Expected<std::string> emit_chakra(const Dataflow&, const CostReport&, const std::string&) {
  return Error{"kdflow: error: this kdflow was built without protobuf: --format chakra is unavailable "
               "(install libprotobuf-dev and protobuf-compiler, then rebuild)",
               ExitCode::Unavailable};
}
#else
namespace {

namespace pb = ChakraProtoMsg;

void attr(pb::Node& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_string_val(v);
}
void attr_u64(pb::Node& n, const std::string& name, uint64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_uint64_val(v);
}
void attr_i64(pb::Node& n, const std::string& name, int64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}
void attr_f64(pb::Node& n, const std::string& name, double v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_double_val(v);
}
void attr_bool(pb::Node& n, const std::string& name, bool v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_bool_val(v);
}
template <class Seq>
void attr_ints(pb::Node& n, const std::string& name, const Seq& vs) {
  auto* a = n.add_attr();
  a->set_name(name);
  for (auto v : vs) a->mutable_int64_list()->add_values(static_cast<int64_t>(v));
}

/// The shapes and dtypes of the buffers behind `args`, as Chakra's IOInfo strings
/// (JSON lists), restricted to reads (`inputs`) or writes.
void io(const Dataflow& df, const std::vector<Arg>& args, bool reads, pb::IOInfo* out) {
  std::string values = "[", shapes = "[", types = "[";
  std::set<int> seen;
  for (const Arg& a : args) {
    if (a.kind != Arg::Kind::Buffer || a.buffer < 0 || static_cast<size_t>(a.buffer) >= df.buffers.size()) continue;
    bool r = a.access == Access::Read || a.access == Access::ReadWrite || a.access == Access::Unknown;
    bool w = a.access == Access::Write || a.access == Access::ReadWrite || a.access == Access::Unknown;
    if ((reads ? !r : !w) || !seen.insert(a.buffer).second) continue;
    const Buffer& b = df.buffers[static_cast<size_t>(a.buffer)];
    if (seen.size() > 1) {
      values += ",";
      shapes += ",";
      types += ",";
    }
    values += fmt::format("\"{}\"", b.name);
    shapes += fmt::format("[{}]", fmt::join(b.shape, ","));
    types += fmt::format("\"{}\"", b.dtype);
  }
  out->set_values(values + "]");
  out->set_shapes(shapes + "]");
  out->set_types(types + "]");
}

void write_delimited(const google::protobuf::MessageLite& m, std::string* out) {
  google::protobuf::io::StringOutputStream raw(out);
  google::protobuf::io::CodedOutputStream coded(&raw);
  coded.WriteVarint32(static_cast<uint32_t>(m.ByteSizeLong()));
  m.SerializeWithCachedSizes(&coded);
}

}  // namespace

bool chakra_available() { return true; }

Expected<std::string> emit_chakra(const Dataflow& df, const CostReport& costs, const std::string& model) {
  std::string out;
  pb::GlobalMetadata meta;
  meta.set_version("0.0.4");
  auto meta_attr = [&](const std::string& name, const std::string& v) {
    auto* a = meta.add_attr();
    a->set_name(name);
    a->set_string_val(v);
  };
  meta_attr("generator", "kdflow");
  meta_attr("schema", kSchemaVersion);
  meta_attr("model", model);
  meta_attr("roofline_device", costs.device.empty() ? "none" : costs.device);
  write_delimited(meta, &out);

  const uint64_t nk = df.kernels.size();
  auto node_id = [&](int id, bool library) { return library ? nk + static_cast<uint64_t>(id) : static_cast<uint64_t>(id); };
  // Dependencies by their later end.
  std::vector<std::vector<const Dependency*>> deps_k(df.kernels.size()), deps_c(df.library_calls.size());
  for (const Dependency& d : df.dependencies) {
    if (d.to < 0) continue;
    auto& v = d.to_library_call ? deps_c : deps_k;
    if (static_cast<size_t>(d.to) < v.size()) v[static_cast<size_t>(d.to)].push_back(&d);
  }
  auto add_deps = [&](pb::Node& n, const std::vector<const Dependency*>& ds) {
    std::set<uint64_t> data, ctrl;
    for (const Dependency* d : ds) (d->kind == Dependency::Kind::RAW ? data : ctrl).insert(node_id(d->from, d->from_library_call));
    for (uint64_t id : data) n.add_data_deps(id);
    for (uint64_t id : ctrl)
      if (!data.count(id)) n.add_ctrl_deps(id);
  };

  auto emit_kernel = [&](const Kernel& k) {
    pb::Node n;
    n.set_id(node_id(k.id, false));
    n.set_name(k.name);
    n.set_type(pb::COMP_NODE);
    add_deps(n, deps_k[static_cast<size_t>(k.id)]);
    const KernelCost* c = static_cast<size_t>(k.id) < costs.kernels.size() ? &costs.kernels[static_cast<size_t>(k.id)] : nullptr;
    double us = 0;
    std::string source = "none";
    if (c && c->measured) {
      us = c->measured->us;
      source = "measured: " + c->measured->source;
    } else if (c && c->bound) {
      us = c->bound->us();
      source = "roofline bound on " + costs.device;
    }
    n.set_duration_micros(static_cast<uint64_t>(std::llround(us)));
    io(df, k.args, true, n.mutable_inputs());
    io(df, k.args, false, n.mutable_outputs());
    attr_bool(n, "is_cpu_op", false);
    // num_ops: the Relay formula's FLOPs, else those counted from the kernel's code.
    if (c && c->flops) attr_u64(n, "num_ops", *c->flops);
    else if (c && c->counted && c->counted->flops) attr_u64(n, "num_ops", *c->counted->flops);
    if (c && c->counted && c->counted->flops) attr_u64(n, "counted_flops", *c->counted->flops);
    if (c && c->counted) attr(n, "counted_status", c->counted->status);
    if (c) attr_u64(n, "tensor_size", c->bytes);
    attr_f64(n, "duration_us", us);
    attr(n, "duration_source", source);
    attr_i64(n, "kernel_id", k.id);
    attr_i64(n, "graph_node", k.node);
    attr(n, "function", k.function);
    attr_ints(n, "grid", k.grid);
    attr_ints(n, "block", k.block);
    attr_i64(n, "dynamic_shared_memory", k.dynamic_shared_memory);
    if (k.node >= 0 && static_cast<size_t>(k.node) < df.nodes.size()) {
      auto* a = n.add_attr();
      a->set_name("relay_ops");
      for (const RelayOp& op : df.nodes[static_cast<size_t>(k.node)].relay_ops) a->mutable_string_list()->add_values(op.name);
    }
    write_delimited(n, &out);
  };
  auto emit_call = [&](const LibraryCall& c) {
    pb::Node n;
    n.set_id(node_id(c.id, true));
    n.set_name(c.name);
    n.set_type(pb::COMP_NODE);
    add_deps(n, deps_c[static_cast<size_t>(c.id)]);
    n.set_duration_micros(0);
    io(df, c.args, true, n.mutable_inputs());
    io(df, c.args, false, n.mutable_outputs());
    attr_bool(n, "is_cpu_op", false);
    attr_f64(n, "duration_us", 0);
    attr(n, "duration_source", "none (a library call: kdflow does not model its work)");
    attr_i64(n, "library_call_id", c.id);
    attr_i64(n, "graph_node", c.node);
    attr(n, "function", c.function);
    write_delimited(n, &out);
  };
  // Launch order: library calls right after the kernel launched before them.
  for (const LibraryCall& c : df.library_calls)
    if (c.after_kernel < 0) emit_call(c);
  for (const Kernel& k : df.kernels) {
    emit_kernel(k);
    for (const LibraryCall& c : df.library_calls)
      if (c.after_kernel == k.id) emit_call(c);
  }
  return out;
}
#endif

}  // namespace kdflow

// emit_chakra.cpp — see emit_chakra.h; docs/chakra.md is the spec of what is written.
//
// Node ids are the same on every rank: kernels keep their ids (0..K-1), library calls follow
// (K + call id), so dependencies map one to one. A communication that takes more than one node
// on a rank (the root of a broadcast sends to each rank) writes its extra nodes first, with ids
// from K + C up, chained, and its last node keeps K + call id, so whatever depends on the call
// waits for all of it.
#include "kdflow/emit/emit_chakra.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#ifdef KDFLOW_HAVE_PROTOBUF
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "et_def.pb.h"
#endif

namespace kdflow {

uint64_t chakra_local_mem_bw_gbps(const CostReport& costs) {
  const DeviceSpec* d = find_device_spec(costs.device.empty() ? "h100" : costs.device);
  if (!d) d = find_device_spec("h100");
  const double gbps = d ? d->dram_gbps : 3350;
  return gbps >= 1 ? static_cast<uint64_t>(std::llround(gbps)) : 1;
}

std::string chakra_rank_path(const std::string& output, int rank, int ranks) {
  if (ranks <= 1) return output;
  std::string prefix = output;
  if (prefix.size() > 3 && prefix.compare(prefix.size() - 3, 3, ".et") == 0) prefix.resize(prefix.size() - 3);
  return fmt::format("{}.{}.et", prefix, rank);
}

#ifndef KDFLOW_HAVE_PROTOBUF
bool chakra_available() { return false; }
Expected<std::vector<std::string>> emit_chakra(const Dataflow&, const CostReport&, const std::string&, bool) {
  return Error{"kdflow: error: this kdflow was built without protobuf: --format chakra is unavailable "
               "(install libprotobuf-dev and protobuf-compiler, then rebuild)",
               ExitCode::Unavailable};
}
#else
namespace {

namespace pb = ChakraProtoMsg;

// Chakra's CollectiveCommType values (et_def.proto) that ASTRA-sim simulates.
constexpr int64_t kAllReduce = 0;
constexpr int64_t kAllGather = 2;

template <class M>
pb::AttributeProto* add_attr(M& m, const std::string& name) {
  auto* a = m.add_attr();
  a->set_name(name);
  return a;
}
void attr(pb::Node& n, const std::string& name, const std::string& v) { add_attr(n, name)->set_string_val(v); }
void attr_u64(pb::Node& n, const std::string& name, uint64_t v) { add_attr(n, name)->set_uint64_val(v); }
void attr_i64(pb::Node& n, const std::string& name, int64_t v) { add_attr(n, name)->set_int64_val(v); }
void attr_f64(pb::Node& n, const std::string& name, double v) { add_attr(n, name)->set_double_val(v); }
void attr_bool(pb::Node& n, const std::string& name, bool v) { add_attr(n, name)->set_bool_val(v); }
template <class Seq>
void attr_ints(pb::Node& n, const std::string& name, const Seq& vs) {
  auto* a = add_attr(n, name);
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

/// The time of one compute node and where it comes from.
struct Timing {
  double us = 0;           ///< exact, as kdflow has it
  std::string source = "none";
  uint64_t ns = 1;         ///< what ASTRA-sim's roofline makes of num_ops / tensor_size: round(us·1000), at least 1
  uint64_t micros = 0;     ///< duration_micros (error-diffused whole µs)
};

/// The node time `us` encoded for ASTRA-sim's roofline (Workload::issue_comp): with local-mem-bw B
/// GB/s and num_ops = tensor_size = x (intensity 1, memory-bound under any peak-perf above B
/// GFLOP/s), the node takes floor(x / B) ns; x = ns·B + floor(B/2) puts that half a nanosecond
/// above `ns`, clear of rounding in ASTRA-sim's double arithmetic.
uint64_t roofline_size(uint64_t ns, uint64_t bw) {
  const uint64_t cap = (std::numeric_limits<uint64_t>::max() - bw) / bw;
  return (ns < cap ? ns : cap) * bw + bw / 2;
}

uint64_t to_ns(double us) {
  if (!(us > 0)) return 1;
  const double ns = std::nearbyint(us * 1000.0);
  if (ns >= 9e18) return static_cast<uint64_t>(9e18);
  return ns < 1 ? 1 : static_cast<uint64_t>(ns);
}

/// One node a communication call takes on one rank.
struct Part {
  enum class Kind { Coll, Send, Recv, Nop };
  Kind kind = Kind::Nop;
  int64_t comm_type = kAllReduce;  ///< Coll
  int peer = -1;                   ///< Send: the receiver; Recv: the sender
  uint64_t bytes = 0;
  int64_t tag = 0;                 ///< Send / Recv: the message's index among those between the two ranks
  bool unmatched = false;          ///< Send: no rank receives it (it completes on its own)
  std::string why;                 ///< Nop: why nothing is communicated
};

uint64_t buffer_bytes(const Dataflow& df, int b) {
  return b >= 0 && static_cast<size_t>(b) < df.buffers.size() ? df.buffers[static_cast<size_t>(b)].bytes : 0;
}

/// What collective `c` does on rank `r` of `n` (one group: disco's group count is not in the IR,
/// so in_group spans every rank; rank 0 is the root).
std::vector<Part> parts_of(const Dataflow& df, const Collective& c, int r, int n) {
  auto nop = [](std::string why) {
    Part p;
    p.why = std::move(why);
    return std::vector<Part>{p};
  };
  auto part = [](Part::Kind k, int peer, uint64_t bytes) {
    Part p;
    p.kind = k;
    p.peer = peer;
    p.bytes = bytes;
    return p;
  };
  if (n <= 1) return nop("one rank: nothing to communicate");
  const std::string& k = c.kind;
  std::vector<Part> out;
  if (k == "allreduce" || k == "allgather") {
    Part p = part(Part::Kind::Coll, -1, c.bytes);
    p.comm_type = k == "allreduce" ? kAllReduce : kAllGather;
    out.push_back(p);
  } else if (k == "broadcast_from_worker0" || k == "recv_from_worker0" || k == "scatter_from_worker0") {
    // Worker 0 sends each rank its part (scatter: one shard, what each rank receives).
    uint64_t bytes = c.bytes;
    if (k == "scatter_from_worker0")
      bytes = c.recv >= 0 && buffer_bytes(df, c.recv) > 0 ? buffer_bytes(df, c.recv) : c.bytes / static_cast<uint64_t>(n);
    if (r == 0)
      for (int d = 1; d < n; ++d) out.push_back(part(Part::Kind::Send, d, bytes));
    else
      out.push_back(part(Part::Kind::Recv, 0, bytes));
  } else if (k == "gather_to_worker0") {
    if (r == 0)
      for (int s = 1; s < n; ++s) out.push_back(part(Part::Kind::Recv, s, c.bytes));
    else
      out.push_back(part(Part::Kind::Send, 0, c.bytes));
  } else if (k == "send_to_next_group" || k == "recv_from_prev_group") {
    // One group: there is no next or previous group (TVM refuses the call).
    return nop(fmt::format("{}: one group of {} ranks, no other group", k, n));
  } else if (k == "send_to_worker" || k == "recv_from_worker") {
    const bool send = k == "send_to_worker";
    if (c.peer < 0 || c.peer >= n) return nop(fmt::format("{}: no rank {}", k, c.peer));
    if (c.peer == r) return nop(fmt::format("{}: rank {} is the {}", k, r, send ? "receiver" : "sender"));
    out.push_back(part(send ? Part::Kind::Send : Part::Kind::Recv, c.peer, c.bytes));
  } else {
    return nop("unknown collective " + k);
  }
  return out;
}

}  // namespace

bool chakra_available() { return true; }

Expected<std::vector<std::string>> emit_chakra(const Dataflow& df, const CostReport& costs, const std::string& model,
                                               bool roofline_durations) {
  const int ranks = df.ranks > 1 ? df.ranks : 1;
  const uint64_t bw = chakra_local_mem_bw_gbps(costs);
  const uint64_t nk = df.kernels.size(), nc = df.library_calls.size();
  auto node_id = [&](int id, bool library) { return library ? nk + static_cast<uint64_t>(id) : static_cast<uint64_t>(id); };
  auto is_comm = [&](const LibraryCall& c) { return c.collective.has_value(); };

  // Launch order: library calls right after the kernel launched before them.
  struct Item {
    bool library = false;
    int id = 0;
  };
  std::vector<Item> order;
  order.reserve(nk + nc);
  for (const LibraryCall& c : df.library_calls)
    if (c.after_kernel < 0) order.push_back({true, c.id});
  {
    std::vector<std::vector<int>> after(nk);
    for (const LibraryCall& c : df.library_calls)
      if (c.after_kernel >= 0 && static_cast<uint64_t>(c.after_kernel) < nk) after[static_cast<size_t>(c.after_kernel)].push_back(c.id);
    for (const Kernel& k : df.kernels) {
      order.push_back({false, k.id});
      for (int c : after[static_cast<size_t>(k.id)]) order.push_back({true, c});
    }
  }

  // Compute nodes' times (the same on every rank). A library call that is not a collective has
  // the bound (or time) of its function when the function launches no kernel, shared among its
  // calls; kdflow does not model a call's work otherwise.
  std::vector<Timing> kt(nk), ct(nc);
  for (const Kernel& k : df.kernels) {
    const KernelCost* c = static_cast<size_t>(k.id) < costs.kernels.size() ? &costs.kernels[static_cast<size_t>(k.id)] : nullptr;
    Timing& t = kt[static_cast<size_t>(k.id)];
    if (c && c->measured) {
      t.us = c->measured->us;
      t.source = "measured: " + c->measured->source;
    } else if (c && c->predicted && !roofline_durations) {
      t.us = c->predicted->us;
      t.source = "predicted on " + costs.device +
                 (c->predicted->source == "code" ? " from its code" : " (launch floor: its operations were not counted)");
    } else if (c && c->bound) {
      t.us = c->bound->us();
      t.source = "roofline bound on " + costs.device;
    }
  }
  for (const LibraryCall& c : df.library_calls) {
    if (is_comm(c) || c.node < 0 || static_cast<size_t>(c.node) >= df.nodes.size()) continue;
    const Node& node = df.nodes[static_cast<size_t>(c.node)];
    size_t calls = 0;
    for (int id : node.library_calls)
      if (id >= 0 && static_cast<size_t>(id) < nc && !is_comm(df.library_calls[static_cast<size_t>(id)])) ++calls;
    // What a node's kernels account for (their predictions or bounds, where they have one): the
    // function's figure less it is the library call's.
    auto kernels_us = [&](auto time) {
      double sum = 0;
      for (int k : node.kernels)
        if (k >= 0 && static_cast<size_t>(k) < costs.kernels.size())
          sum += time(costs.kernels[static_cast<size_t>(k)]);
      return sum;
    };
    for (const FunctionCost& f : costs.functions) {
      if (f.node != c.node || calls == 0) continue;
      Timing& t = ct[static_cast<size_t>(c.id)];
      const std::string shared = calls > 1 ? fmt::format(", shared by its {} library calls", calls) : "";
      if (node.kernels.empty() && f.measured) {
        t.us = f.measured->us / static_cast<double>(calls);
        t.source = "measured: " + f.measured->source + " (the function's" + shared + ")";
      } else if (f.predicted_us && !roofline_durations) {
        // The function's prediction less its kernels' (a cuBLAS dense: the GEMM from its shape).
        const double rest =
            *f.predicted_us - kernels_us([](const KernelCost& k) { return k.predicted ? k.predicted->us : 0.0; });
        if (rest <= 0) continue;
        t.us = rest / static_cast<double>(calls);
        t.source = "predicted on " + costs.device + " from the call's shape (the function's" + shared + ")";
      } else if (f.bound) {
        // The function's bound less what its kernels' bounds account for (a cuBLAS dense with
        // a bias-and-ReLU kernel: the call does the dense).
        const double rest = f.bound->us() - kernels_us([](const KernelCost& k) { return k.bound ? k.bound->us() : 0.0; });
        if (rest <= 0) continue;
        t.us = rest / static_cast<double>(calls);
        t.source = "roofline bound on " + costs.device + " (the function's" +
                   (node.kernels.empty() ? "" : ", less its kernels'") + shared + ")";
      }
    }
  }
  // Nanoseconds, and whole microseconds by error diffusion along the launch order: each node
  // gets round(sum through it) - round(sum before it), so every prefix is within 0.5 µs.
  {
    double sum = 0;
    int64_t rounded = 0;
    for (const Item& it : order) {
      if (it.library && is_comm(df.library_calls[static_cast<size_t>(it.id)])) continue;
      Timing& t = it.library ? ct[static_cast<size_t>(it.id)] : kt[static_cast<size_t>(it.id)];
      if (!(t.us >= 0) || !std::isfinite(t.us)) t.us = 0;
      t.ns = to_ns(t.us);
      sum += t.us;
      const int64_t r = static_cast<int64_t>(std::llround(std::min(sum, 9e15)));
      t.micros = static_cast<uint64_t>(r > rounded ? r - rounded : 0);
      rounded = std::max(rounded, r);
    }
  }

  // Each rank's communication parts, then the messages matched: the k-th send from s to d is
  // the k-th receive at d from s (NCCL's order between two ranks), tag k.
  std::vector<std::vector<std::vector<Part>>> parts(static_cast<size_t>(ranks),
                                                    std::vector<std::vector<Part>>(nc));
  for (int r = 0; r < ranks; ++r)
    for (const LibraryCall& c : df.library_calls)
      if (is_comm(c)) parts[static_cast<size_t>(r)][static_cast<size_t>(c.id)] = parts_of(df, *c.collective, r, ranks);
  {
    std::map<std::pair<int, int>, std::vector<Part*>> sends, recvs;  // by (src, dst), in program order
    for (int r = 0; r < ranks; ++r)
      for (const Item& it : order) {
        if (!it.library) continue;
        for (Part& p : parts[static_cast<size_t>(r)][static_cast<size_t>(it.id)]) {
          if (p.kind == Part::Kind::Send) sends[{r, p.peer}].push_back(&p);
          if (p.kind == Part::Kind::Recv) recvs[{p.peer, r}].push_back(&p);
        }
      }
    for (auto& [pair, ss] : sends) {
      std::vector<Part*>& rs = recvs[pair];
      for (size_t i = 0; i < ss.size(); ++i) {
        ss[i]->tag = static_cast<int64_t>(i);
        if (i < rs.size()) {
          rs[i]->tag = static_cast<int64_t>(i);
          rs[i]->bytes = ss[i]->bytes;  // ASTRA-sim matches a message by (tag, src, dst, size)
        } else {
          ss[i]->unmatched = true;
        }
      }
    }
    for (auto& [pair, rs] : recvs) {
      const size_t matched = sends.count(pair) ? sends[pair].size() : 0;
      for (size_t i = matched; i < rs.size(); ++i) {
        *rs[i] = Part{};
        rs[i]->why = fmt::format("no rank {} sends the receive of rank {} from rank {}", pair.first, pair.second, pair.first);
      }
    }
  }

  // Dependencies by their later end.
  std::vector<std::vector<const Dependency*>> deps_k(nk), deps_c(nc);
  for (const Dependency& d : df.dependencies) {
    if (d.to < 0) continue;
    auto& v = d.to_library_call ? deps_c : deps_k;
    if (static_cast<size_t>(d.to) < v.size()) v[static_cast<size_t>(d.to)].push_back(&d);
  }
  auto add_deps = [&](pb::Node& n, const std::vector<const Dependency*>& ds, std::set<uint64_t> ctrl) {
    std::set<uint64_t> data;
    for (const Dependency* d : ds) (d->kind == Dependency::Kind::RAW ? data : ctrl).insert(node_id(d->from, d->from_library_call));
    for (uint64_t id : data) n.add_data_deps(id);
    for (uint64_t id : ctrl)
      if (!data.count(id)) n.add_ctrl_deps(id);
  };
  // The time of a compute node, both ways (see emit_chakra.h).
  auto set_time = [&](pb::Node& n, const Timing& t) {
    n.set_duration_micros(t.micros);
    attr_bool(n, "is_cpu_op", false);
    const uint64_t x = roofline_size(t.ns, bw);
    attr_u64(n, "num_ops", x);
    attr_u64(n, "tensor_size", x);
    attr_u64(n, "duration_ns", t.ns);
    attr_f64(n, "duration_us", t.us);
    attr(n, "duration_source", t.source);
  };

  std::vector<std::string> traces;
  traces.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    std::string out;
    uint64_t compute_ns = 0;
    std::vector<pb::Node> nodes;
    nodes.reserve(order.size());
    uint64_t next_extra = nk + nc;
    std::optional<uint64_t> last_comm;  // program order of this rank's communications

    auto emit_kernel = [&](const Kernel& k) {
      pb::Node n;
      n.set_id(node_id(k.id, false));
      n.set_name(k.name);
      n.set_type(pb::COMP_NODE);
      add_deps(n, deps_k[static_cast<size_t>(k.id)], {});
      const KernelCost* c = static_cast<size_t>(k.id) < costs.kernels.size() ? &costs.kernels[static_cast<size_t>(k.id)] : nullptr;
      const Timing& t = kt[static_cast<size_t>(k.id)];
      compute_ns += t.ns;
      io(df, k.args, true, n.mutable_inputs());
      io(df, k.args, false, n.mutable_outputs());
      set_time(n, t);
      // The work itself: the Relay formula's FLOPs, else those counted from the kernel's code.
      if (c && c->flops) attr_u64(n, "flops", *c->flops);
      else if (c && c->counted && c->counted->flops) attr_u64(n, "flops", *c->counted->flops);
      if (c && c->counted && c->counted->flops) attr_u64(n, "counted_flops", *c->counted->flops);
      if (c && c->counted) attr(n, "counted_status", c->counted->status);
      if (c) attr_u64(n, "bytes", c->bytes);
      attr_i64(n, "kernel_id", k.id);
      attr_i64(n, "graph_node", k.node);
      attr(n, "function", k.function);
      attr_ints(n, "grid", k.grid);
      attr_ints(n, "block", k.block);
      attr_i64(n, "dynamic_shared_memory", k.dynamic_shared_memory);
      if (k.node >= 0 && static_cast<size_t>(k.node) < df.nodes.size()) {
        auto* a = add_attr(n, "relay_ops");
        for (const RelayOp& op : df.nodes[static_cast<size_t>(k.node)].relay_ops) a->mutable_string_list()->add_values(op.name);
      }
      nodes.push_back(std::move(n));
    };
    auto call_attrs = [&](pb::Node& n, const LibraryCall& c) {
      attr_i64(n, "library_call_id", c.id);
      attr_i64(n, "graph_node", c.node);
      attr(n, "function", c.function);
    };
    auto emit_call = [&](const LibraryCall& c) {
      pb::Node n;
      n.set_id(node_id(c.id, true));
      n.set_name(c.name);
      n.set_type(pb::COMP_NODE);
      add_deps(n, deps_c[static_cast<size_t>(c.id)], {});
      const Timing& t = ct[static_cast<size_t>(c.id)];
      compute_ns += t.ns;
      io(df, c.args, true, n.mutable_inputs());
      io(df, c.args, false, n.mutable_outputs());
      set_time(n, t);
      call_attrs(n, c);
      nodes.push_back(std::move(n));
    };
    auto emit_comm = [&](const LibraryCall& c) {
      const Collective& k = *c.collective;
      const std::vector<Part>& ps = parts[static_cast<size_t>(r)][static_cast<size_t>(c.id)];
      std::optional<uint64_t> prev;
      for (size_t i = 0; i < ps.size(); ++i) {
        const Part& p = ps[i];
        pb::Node n;
        const bool last = i + 1 == ps.size();
        n.set_id(last ? node_id(c.id, true) : next_extra++);
        n.set_name(c.name);
        std::set<uint64_t> ctrl;
        if (prev) ctrl.insert(*prev);
        else if (last_comm) ctrl.insert(*last_comm);
        add_deps(n, i == 0 ? deps_c[static_cast<size_t>(c.id)] : std::vector<const Dependency*>{}, ctrl);
        switch (p.kind) {
          case Part::Kind::Coll:
            n.set_type(pb::COMM_COLL_NODE);
            attr_bool(n, "is_cpu_op", false);
            attr_i64(n, "comm_type", p.comm_type);
            attr_u64(n, "comm_size", p.bytes);
            break;
          case Part::Kind::Send:
            n.set_type(pb::COMM_SEND_NODE);
            attr_bool(n, "is_cpu_op", false);
            attr_i64(n, "comm_src", r);
            attr_i64(n, "comm_dst", p.peer);
            attr_u64(n, "comm_size", p.bytes);
            attr_i64(n, "comm_tag", p.tag);
            if (p.unmatched) attr_bool(n, "unmatched", true);
            break;
          case Part::Kind::Recv:
            n.set_type(pb::COMM_RECV_NODE);
            attr_bool(n, "is_cpu_op", false);
            attr_i64(n, "comm_src", p.peer);
            attr_i64(n, "comm_dst", r);
            attr_u64(n, "comm_size", p.bytes);
            attr_i64(n, "comm_tag", p.tag);
            break;
          case Part::Kind::Nop: {
            n.set_type(pb::COMP_NODE);
            Timing none;
            none.source = "none (" + p.why + ")";
            compute_ns += none.ns;
            set_time(n, none);
            break;
          }
        }
        if (i == 0) {
          io(df, c.args, true, n.mutable_inputs());
          io(df, c.args, false, n.mutable_outputs());
        }
        attr(n, "collective", k.kind);
        if (!k.reduce_op.empty()) attr(n, "reduce_op", k.reduce_op);
        attr_bool(n, "in_group", k.in_group);
        attr(n, "dtype", k.dtype);
        attr_i64(n, "elements", k.elements);
        attr_u64(n, "bytes", k.bytes);
        if (k.peer >= 0) attr_i64(n, "peer", k.peer);
        if (ps.size() > 1) attr_i64(n, "part", static_cast<int64_t>(i));
        call_attrs(n, c);
        prev = n.id();
        nodes.push_back(std::move(n));
      }
      last_comm = prev;
    };
    for (const Item& it : order) {
      if (!it.library) emit_kernel(df.kernels[static_cast<size_t>(it.id)]);
      else if (is_comm(df.library_calls[static_cast<size_t>(it.id)])) emit_comm(df.library_calls[static_cast<size_t>(it.id)]);
      else emit_call(df.library_calls[static_cast<size_t>(it.id)]);
    }

    pb::GlobalMetadata meta;
    meta.set_version("0.0.4");
    auto meta_str = [&](const std::string& name, const std::string& v) { add_attr(meta, name)->set_string_val(v); };
    auto meta_u64 = [&](const std::string& name, uint64_t v) { add_attr(meta, name)->set_uint64_val(v); };
    meta_str("generator", "kdflow");
    meta_str("schema", kSchemaVersion);
    meta_str("model", model);
    meta_str("roofline_device", costs.device.empty() ? "none" : costs.device);
    meta_u64("ranks", static_cast<uint64_t>(ranks));
    meta_u64("rank", static_cast<uint64_t>(r));
    meta_u64("astra_sim_local_mem_bw_gbps", bw);
    // The system file's keys the roofline times need, as ASTRA-sim's JSON spells them
    // (scripts/astra-sim.sh reads them from here).
    meta_str("astra_sim_system", fmt::format("\"roofline-enabled\": 1, \"local-mem-bw\": {}", bw));
    meta_str("time_encoding",
             fmt::format("kdflow-chakra-time/1: COMP_NODE num_ops = tensor_size = duration_ns * {0} + {1} "
                         "(roofline-enabled 1, local-mem-bw {0}: duration_ns); duration_micros: whole us, "
                         "error-diffused along the launch order (roofline off)",
                         bw, bw / 2));
    meta_u64("compute_ns", compute_ns);
    write_delimited(meta, &out);
    for (const pb::Node& n : nodes) write_delimited(n, &out);
    traces.push_back(std::move(out));
  }
  return traces;
}
#endif

}  // namespace kdflow

// emit_chakra.cpp — the Chakra emitter on hand-built flows, its traces decoded here from the
// protobuf wire format (Chakra's field numbers; no protobuf library): every compute node's
// num_ops / tensor_size encode its time for ASTRA-sim's roofline (never num_ops 0 with a
// tensor_size), sub-microsecond times kept, per-rank file names, and collectives as
// communication nodes with the attributes ASTRA-sim's workload layer reads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "kdflow/emit/emit_chakra.h"

using namespace kdflow;

namespace {

// ---- a protobuf wire-format reader for GlobalMetadata and Node

struct Reader {
  const std::string& s;
  size_t pos = 0, end = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; pos < end; shift += 7) {
      const auto b = static_cast<uint8_t>(s[pos++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("truncated varint");
  }
};

/// One field: its number, and the value as a varint, a fixed64 or bytes.
struct Field {
  uint32_t num = 0;
  uint64_t v = 0;
  std::string bytes;
};

std::vector<Field> fields(const std::string& msg) {
  std::vector<Field> out;
  Reader r{msg, 0, msg.size()};
  while (r.pos < r.end) {
    const uint64_t key = r.varint();
    Field f;
    f.num = static_cast<uint32_t>(key >> 3);
    switch (key & 7) {
      case 0: f.v = r.varint(); break;
      case 1:
        std::memcpy(&f.v, msg.data() + r.pos, 8);
        r.pos += 8;
        break;
      case 2: {
        const uint64_t n = r.varint();
        f.bytes = msg.substr(r.pos, n);
        r.pos += n;
        break;
      }
      default: throw std::runtime_error("unexpected wire type");
    }
    out.push_back(std::move(f));
  }
  return out;
}

/// An attribute's value: the oneof field it was written in and what it holds.
struct Val {
  uint32_t field = 0;  ///< 3 double, 9 int64, 13 uint64, 27 bool, 29 string, 10 int64 list, 30 string list
  uint64_t u = 0;
  double d = 0;
  std::string s;
  int64_t i() const { return static_cast<int64_t>(u); }
};

std::map<std::string, Val> attrs(const std::vector<Field>& fs, uint32_t attr_field) {
  std::map<std::string, Val> out;
  for (const Field& f : fs) {
    if (f.num != attr_field) continue;
    std::string name;
    Val v;
    for (const Field& a : fields(f.bytes)) {
      if (a.num == 1) name = a.bytes;
      else {
        v.field = a.num;
        v.u = a.v;
        v.s = a.bytes;
        if (a.num == 3) std::memcpy(&v.d, &a.v, 8);
      }
    }
    out[name] = v;
  }
  return out;
}

struct PbNode {
  uint64_t id = 0;
  std::string name;
  uint64_t type = 0;  ///< 4 COMP, 5 SEND, 6 RECV, 7 COLL
  std::vector<uint64_t> ctrl, data;
  uint64_t micros = 0;
  std::map<std::string, Val> attr;
  uint64_t u(const std::string& k) const {
    auto it = attr.find(k);
    if (it == attr.end()) FAIL("node " << id << " has no attribute " << k);
    return it->second.u;
  }
  bool has(const std::string& k) const { return attr.count(k) > 0; }
};

struct PbTrace {
  std::string version;
  std::map<std::string, Val> meta;
  std::vector<PbNode> nodes;
  const PbNode& node(uint64_t id) const {
    for (const PbNode& n : nodes)
      if (n.id == id) return n;
    FAIL("no node " << id);
    return nodes.front();
  }
};

std::vector<uint64_t> ids(const Field& f) {
  if (f.bytes.empty()) return {f.v};
  std::vector<uint64_t> out;
  Reader r{f.bytes, 0, f.bytes.size()};
  while (r.pos < r.end) out.push_back(r.varint());
  return out;
}

PbTrace decode(const std::string& data) {
  PbTrace t;
  Reader r{data, 0, data.size()};
  bool first = true;
  while (r.pos < r.end) {
    const uint64_t n = r.varint();
    const std::string msg = data.substr(r.pos, n);
    r.pos += n;
    const std::vector<Field> fs = fields(msg);
    if (first) {
      for (const Field& f : fs)
        if (f.num == 1) t.version = f.bytes;
      t.meta = attrs(fs, 2);
      first = false;
      continue;
    }
    PbNode node;
    for (const Field& f : fs) {
      switch (f.num) {
        case 1: node.id = f.v; break;
        case 2: node.name = f.bytes; break;
        case 3: node.type = f.v; break;
        case 4: for (uint64_t x : ids(f)) node.ctrl.push_back(x); break;
        case 5: for (uint64_t x : ids(f)) node.data.push_back(x); break;
        case 7: node.micros = f.v; break;
        default: break;
      }
    }
    node.attr = attrs(fs, 10);
    t.nodes.push_back(std::move(node));
  }
  return t;
}

constexpr uint64_t kComp = 4, kSend = 5, kRecv = 6, kColl = 7;

// ---- flows

Arg buf_arg(int b, Access access) {
  Arg a;
  a.kind = Arg::Kind::Buffer;
  a.buffer = b;
  a.dtype = "handle";
  a.access = access;
  return a;
}

/// Kernels k0 -> k1 -> ... on buffers b0, b1, ... (kernel i reads b_i and writes b_{i+1}).
Dataflow chain(int kernels) {
  Dataflow df;
  for (int i = 0; i <= kernels; ++i) {
    Buffer b;
    b.id = i;
    b.name = "b" + std::to_string(i);
    b.dtype = "float32";
    b.shape = {1024};
    b.bytes = 4096;
    df.buffers.push_back(b);
  }
  for (int i = 0; i < kernels; ++i) {
    Kernel k;
    k.id = i;
    k.name = "k" + std::to_string(i);
    k.args = {buf_arg(i + 1, Access::Write), buf_arg(i, Access::Read)};
    df.kernels.push_back(k);
    if (i > 0) df.dependencies.push_back({Dependency::Kind::RAW, i - 1, i, i, i, false, false});
  }
  return df;
}

/// A collective call after kernel `after` on buffer `b`, with the RAW edges around it: the
/// kernel before writes what it sends; `next` (if any) reads what it writes.
void add_collective(Dataflow& df, const std::string& kind, int after, uint64_t bytes, int next = -1, int peer = -1) {
  LibraryCall c;
  c.id = static_cast<int>(df.library_calls.size());
  c.name = "runtime.disco." + kind;
  c.after_kernel = after;
  const int b = after + 1;
  c.args = {buf_arg(b, Access::Read), buf_arg(b, Access::Write)};
  Collective k;
  k.kind = kind;
  k.reduce_op = kind == "allreduce" ? "sum" : "";
  k.dtype = "float32";
  k.elements = static_cast<int64_t>(bytes / 4);
  k.bytes = bytes;
  k.send = b;
  k.recv = b;
  k.in_place = true;
  k.peer = peer;
  c.collective = k;
  df.library_calls.push_back(c);
  df.dependencies.push_back({Dependency::Kind::RAW, after, c.id, b, b, false, true});
  if (next >= 0) df.dependencies.push_back({Dependency::Kind::RAW, c.id, next, b, b, true, false});
}

CostReport costs_with(const Dataflow& df, const std::vector<std::optional<double>>& us, const char* device = "h100") {
  KernelTimes t;
  t.us = us;
  t.source = "test";
  return compute_costs(df, device ? find_device_spec(device) : nullptr, &t);
}

std::vector<PbTrace> emit(const Dataflow& df, const CostReport& costs, bool roofline_durations = false) {
  Expected<std::vector<std::string>> traces = emit_chakra(df, costs, "test", roofline_durations);
  REQUIRE(traces);
  REQUIRE(traces->size() == static_cast<size_t>(std::max(df.ranks, 1)));
  std::vector<PbTrace> out;
  for (const std::string& t : *traces) out.push_back(decode(t));
  return out;
}

}  // namespace

TEST_CASE("chakra: an unmeasured kernel takes the time predicted from its code, or with --roofline its bound",
          "[chakra][time-model]") {
  if (!chakra_available()) {
    WARN("SKIPPED: built without protobuf");
    return;
  }
  Dataflow df = chain(3);
  // k0 measured; k1 and k2 not: predicted on h100. These hand-made kernels have no counted
  // operations, so the prediction is the launch floor and their bytes from DRAM, said so.
  const CostReport costs = costs_with(df, {0.35, std::nullopt, std::nullopt});
  REQUIRE(costs.kernels[1].predicted);
  const std::vector<PbTrace> t = emit(df, costs);
  CHECK(t[0].node(0).attr.at("duration_source").s == "measured: test");
  CHECK(t[0].node(1).attr.at("duration_source").s == "predicted on h100 (launch floor: its operations were not counted)");
  CHECK(t[0].node(1).attr.at("duration_us").d == Approx(costs.kernels[1].predicted->us));
  CHECK(t[0].node(1).attr.at("duration_us").d >= 3.0);  // the H100's launch floor
  // With roofline durations: no bound for them (no FLOPs), so none.
  const std::vector<PbTrace> r = emit(df, costs, true);
  CHECK(r[0].node(1).attr.at("duration_source").s == "none");
  CHECK(r[0].node(1).u("duration_ns") == 1);
}

TEST_CASE("chakra: file names per rank follow ASTRA-sim's PREFIX.<rank>.et", "[chakra]") {
  CHECK(chakra_rank_path("out/mlp.et", 0, 1) == "out/mlp.et");
  CHECK(chakra_rank_path("mlp", 0, 1) == "mlp");
  CHECK(chakra_rank_path("out/llm.et", 0, 2) == "out/llm.0.et");
  CHECK(chakra_rank_path("out/llm.et", 7, 8) == "out/llm.7.et");
  CHECK(chakra_rank_path("llm", 1, 2) == "llm.1.et");
  CHECK(chakra_rank_path("a.b.et", 3, 4) == "a.b.3.et");
}

TEST_CASE("chakra: every compute node encodes its time in num_ops and tensor_size", "[chakra]") {
  if (!chakra_available()) {
    WARN("SKIPPED: built without protobuf");
    return;
  }
  Dataflow df = chain(3);
  LibraryCall cublas;  // a library call kdflow has no time for
  cublas.id = 0;
  cublas.name = "tvm.contrib.cublas.matmul";
  cublas.after_kernel = 1;
  df.library_calls.push_back(cublas);
  // 0.35 µs, 2.7 µs and unknown (no device: no bound and no prediction; H100's bandwidth encodes).
  const std::vector<PbTrace> t = emit(df, costs_with(df, {0.35, 2.7, std::nullopt}, nullptr));
  REQUIRE(t.size() == 1);
  CHECK(t[0].version == "0.0.4");
  CHECK(t[0].meta.at("astra_sim_local_mem_bw_gbps").u == 3350);
  CHECK(t[0].meta.at("astra_sim_system").s == "\"roofline-enabled\": 1, \"local-mem-bw\": 3350");
  CHECK(t[0].meta.at("ranks").u == 1);
  REQUIRE(t[0].nodes.size() == 4);
  // Launch order: k0, k1, the call, k2.
  CHECK(t[0].nodes[2].id == 3);
  CHECK(t[0].nodes[3].id == 2);
  for (const PbNode& n : t[0].nodes) {
    INFO("node " << n.id);
    CHECK(n.type == kComp);
    CHECK(n.attr.at("is_cpu_op").field == 27);
    CHECK(n.attr.at("is_cpu_op").u == 0);
    // Never num_ops = 0 with a tensor_size (0/0 in ASTRA-sim's roofline), never tensor_size 0.
    CHECK(n.u("num_ops") > 0);
    CHECK(n.u("tensor_size") > 0);
    CHECK(n.u("num_ops") == n.u("tensor_size"));
    CHECK(n.u("tensor_size") == n.u("duration_ns") * 3350 + 1675);
  }
  // Sub-microsecond times are kept to the nanosecond; an unknown time is 1 ns.
  CHECK(t[0].node(0).u("duration_ns") == 350);
  CHECK(t[0].node(0).attr.at("duration_us").d == Approx(0.35));
  CHECK(t[0].node(1).u("duration_ns") == 2700);
  CHECK(t[0].node(3).u("duration_ns") == 1);
  CHECK(t[0].node(2).u("duration_ns") == 1);
  CHECK(t[0].node(2).attr.at("duration_source").s == "none");
  CHECK(t[0].node(0).attr.at("duration_source").s == "measured: test");
  // duration_micros by error diffusion: prefix sums 0.35, 3.05, 3.05, 3.05 -> 0, 3, 0, 0.
  CHECK(t[0].node(0).micros == 0);
  CHECK(t[0].node(1).micros == 3);
  CHECK(t[0].node(3).micros == 0);
  CHECK(t[0].meta.at("compute_ns").u == 350 + 2700 + 1 + 1);
  // Data dependencies are the RAW edges.
  CHECK(t[0].node(1).data == std::vector<uint64_t>{0});
  CHECK(t[0].node(2).data == std::vector<uint64_t>{1});
}

TEST_CASE("chakra: whole microseconds keep every prefix of the launch order within half a microsecond", "[chakra]") {
  if (!chakra_available()) return;
  Dataflow df = chain(1000);
  std::vector<std::optional<double>> us;
  for (int i = 0; i < 1000; ++i) us.push_back(i % 7 == 0 ? 1.9 : 0.3);
  const PbTrace t = emit(df, costs_with(df, us)).front();
  double exact = 0;
  uint64_t micros = 0;
  for (const PbNode& n : t.nodes) {
    exact += n.attr.at("duration_us").d;
    micros += n.micros;
    REQUIRE(std::abs(static_cast<double>(micros) - exact) <= 0.5 + 1e-9);
  }
  CHECK(micros == static_cast<uint64_t>(std::llround(exact)));
}

TEST_CASE("chakra: the roofline device's bandwidth encodes the times", "[chakra]") {
  if (!chakra_available()) return;
  Dataflow df = chain(1);
  const CostReport a100 = costs_with(df, {0.5}, "a100");
  CHECK(chakra_local_mem_bw_gbps(a100) == 2039);
  const PbNode n = emit(df, a100).front().node(0);
  CHECK(n.u("tensor_size") == 500 * 2039 + 1019);
  CHECK(chakra_local_mem_bw_gbps(costs_with(df, {0.5}, nullptr)) == 3350);  // --roofline none: H100's
}

TEST_CASE("chakra: a flow of two ranks has a trace per rank with COMM_COLL_NODEs", "[chakra]") {
  if (!chakra_available()) return;
  Dataflow df = chain(3);
  df.ranks = 2;
  add_collective(df, "allreduce", 0, 1 << 20, 1);
  add_collective(df, "allgather", 1, 65536, 2);
  const std::vector<PbTrace> t = emit(df, costs_with(df, {1.0, 2.0, 3.0}));
  REQUIRE(t.size() == 2);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(t[r].meta.at("rank").u == static_cast<uint64_t>(r));
    CHECK(t[r].meta.at("ranks").u == 2);
    REQUIRE(t[r].nodes.size() == 5);
    const PbNode& ar = t[r].node(3);  // K + call 0
    CHECK(ar.type == kColl);
    CHECK(ar.attr.at("comm_type").i() == 0);  // ALL_REDUCE
    CHECK(ar.u("comm_size") == 1 << 20);
    CHECK(ar.attr.at("is_cpu_op").field == 27);
    CHECK(ar.attr.at("is_cpu_op").u == 0);
    CHECK(!ar.has("pg_name"));       // the default group: every rank
    CHECK(!ar.has("involved_dim"));  // every dimension of the network
    CHECK(!ar.has("num_ops"));
    CHECK(ar.attr.at("collective").s == "allreduce");
    CHECK(ar.attr.at("reduce_op").s == "sum");
    CHECK(ar.data == std::vector<uint64_t>{0});
    const PbNode& ag = t[r].node(4);
    CHECK(ag.type == kColl);
    CHECK(ag.attr.at("comm_type").i() == 2);  // ALL_GATHER
    CHECK(ag.u("comm_size") == 65536);
    CHECK(ag.data == std::vector<uint64_t>{1});
    CHECK(ag.ctrl == std::vector<uint64_t>{3});  // communications keep their program order
    // Kernels after a collective depend on it.
    CHECK(t[r].node(1).data == std::vector<uint64_t>{0, 3});
    CHECK(t[r].node(2).data == std::vector<uint64_t>{1, 4});
  }
}

TEST_CASE("chakra: rooted collectives are sends from rank 0 and receives, tags matched", "[chakra]") {
  if (!chakra_available()) return;
  Dataflow df = chain(2);
  df.ranks = 3;
  add_collective(df, "broadcast_from_worker0", 0, 4096, 1);
  add_collective(df, "gather_to_worker0", 1, 1024);
  add_collective(df, "scatter_from_worker0", 1, 3000);  // recv buffer b2: 4096 bytes each
  const std::vector<PbTrace> t = emit(df, costs_with(df, {1.0, 1.0}));
  REQUIRE(t.size() == 3);
  // Rank 0: the broadcast is a send to rank 1 (an extra node, id K + C) then one to rank 2
  // (id K + call), chained; the gather two receives; the scatter two sends of one shard.
  const uint64_t K = 2, C = 3;
  const PbNode& b_first = t[0].node(K + C);
  const PbNode& b_last = t[0].node(K + 0);
  CHECK(b_first.type == kSend);
  CHECK(b_first.u("comm_dst") == 1);
  CHECK(b_first.u("comm_src") == 0);
  CHECK(b_first.data == std::vector<uint64_t>{0});
  CHECK(b_last.type == kSend);
  CHECK(b_last.u("comm_dst") == 2);
  CHECK(b_last.ctrl == std::vector<uint64_t>{K + C});
  CHECK(b_first.u("comm_size") == 4096);
  CHECK(t[0].node(1).data == std::vector<uint64_t>{0, K + 0});  // k1 waits for all of it
  const PbNode& g = t[0].node(K + 1);
  CHECK(g.type == kRecv);
  CHECK(t[0].node(K + C + 1).type == kRecv);
  CHECK(t[0].node(K + C + 1).u("comm_src") == 1);
  CHECK(g.u("comm_src") == 2);
  CHECK(g.u("comm_size") == 1024);
  const PbNode& s = t[0].node(K + 2);
  CHECK(s.type == kSend);
  CHECK(s.u("comm_size") == 4096);
  for (int r = 1; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(t[r].nodes.size() == 5);  // no extra nodes
    const PbNode& b = t[r].node(K + 0);
    CHECK(b.type == kRecv);
    CHECK(b.u("comm_src") == 0);
    CHECK(b.u("comm_dst") == static_cast<uint64_t>(r));
    CHECK(b.u("comm_size") == 4096);
    // The k-th message from rank 0 to rank r has tag k on both sides.
    CHECK(b.u("comm_tag") == 0);
    CHECK(t[r].node(K + 2).u("comm_tag") == 1);
    CHECK(t[r].node(K + 1).type == kSend);
    CHECK(t[r].node(K + 1).u("comm_dst") == 0);
    CHECK(t[r].node(K + 1).u("comm_tag") == 0);
  }
  CHECK(t[0].node(K + C).u("comm_tag") == 0);  // to rank 1
  CHECK(t[0].node(K + 0).u("comm_tag") == 0);  // to rank 2
}

TEST_CASE("chakra: point-to-point calls pair up, and what cannot is a 1 ns placeholder", "[chakra]") {
  if (!chakra_available()) return;
  Dataflow df = chain(2);
  df.ranks = 2;
  add_collective(df, "send_to_worker", 0, 512, -1, 1);
  add_collective(df, "recv_from_worker", 0, 512, 1, 0);
  add_collective(df, "send_to_next_group", 1, 512);
  const std::vector<PbTrace> t = emit(df, costs_with(df, {1.0, 1.0}));
  const uint64_t K = 2;
  CHECK(t[0].node(K + 0).type == kSend);
  CHECK(t[0].node(K + 0).u("comm_dst") == 1);
  CHECK(t[1].node(K + 1).type == kRecv);
  CHECK(t[1].node(K + 1).u("comm_src") == 0);
  CHECK(t[0].node(K + 0).u("comm_tag") == t[1].node(K + 1).u("comm_tag"));
  for (const auto& [r, id] : std::vector<std::pair<int, uint64_t>>{{0, K + 1}, {1, K + 0}, {0, K + 2}, {1, K + 2}}) {
    INFO("rank " << r << " node " << id);
    const PbNode& n = t[r].node(id);
    CHECK(n.type == kComp);
    CHECK(n.u("duration_ns") == 1);
    CHECK(n.u("tensor_size") == 3350 + 1675);
  }
  // One rank: nothing to communicate, every collective a placeholder.
  Dataflow one = chain(1);
  add_collective(one, "allreduce", 0, 1024);
  const PbTrace t1 = emit(one, costs_with(one, {1.0})).front();
  CHECK(t1.node(1).type == kComp);
  CHECK(t1.node(1).attr.at("duration_source").s == "none (one rank: nothing to communicate)");
}

// dataflow_json.cpp — reads the JSON form of the IR (schema "kdflow/1", docs/schema.md) back
// into the IR. Validates every type and reference, naming a JSON pointer on failure; the only
// exceptions (nlohmann's, and our own Fail) are caught in parse_dataflow_json.
// (Split out of emit/emit_json.cpp, whose writer it mirrors: emitters only render.)
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kdflow/ir/dataflow_json.h"

namespace kdflow {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 64;

// ---------------------------------------------------------------------------------------
// Reader

struct Fail {
  Error error;
};

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  /// Throws the one-line diagnostic; caught only in parse_dataflow_json. An empty
  /// pointer (the whole document) names just the file.
  [[noreturn]] void fail(const std::string& ptr, const std::string& msg) const {
    throw Fail{ptr.empty() ? file_error(file_, msg) : json_error(file_, ptr, msg)};
  }

  static std::string at(const std::string& ptr, const char* key) {
    return ptr + "/" + json_pointer_token(key);
  }
  static std::string at(const std::string& ptr, size_t i) { return ptr + "/" + std::to_string(i); }

  const json& object(const json& j, const std::string& ptr) const {
    if (!j.is_object()) fail(ptr, "expected an object");
    return j;
  }
  const json& array(const json& j, const std::string& ptr) const {
    if (!j.is_array()) fail(ptr, "expected an array");
    return j;
  }
  const json& member(const json& obj, const std::string& ptr, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(ptr, fmt::format("missing member \"{}\"", key));
    return *it;
  }
  const json* optional(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  /// A library call's "collective" (its kind) with the members beside it: reduce_op, in_group,
  /// dtype, elements, bytes, send, recv, in_place, peer (docs/schema.md "Collectives").
  Collective collective(const json& call, const json& kind, const std::string& p, size_t nb, int ranks) const {
    Collective c;
    c.kind = string(kind, at(p, "collective"));
    static const char* const kinds[] = {"allreduce", "allgather", "broadcast_from_worker0", "scatter_from_worker0",
                                        "gather_to_worker0", "recv_from_worker0", "send_to_worker",
                                        "recv_from_worker", "send_to_next_group", "recv_from_prev_group"};
    if (std::find(std::begin(kinds), std::end(kinds), c.kind) == std::end(kinds))
      fail(at(p, "collective"), fmt::format("unknown collective \"{}\"", printable(c.kind)));
    if (const json* v = optional(call, "reduce_op")) {
      c.reduce_op = string(*v, at(p, "reduce_op"));
      if (c.reduce_op != "sum" && c.reduce_op != "prod" && c.reduce_op != "min" && c.reduce_op != "max" &&
          c.reduce_op != "avg")
        fail(at(p, "reduce_op"), fmt::format("unknown reduce op \"{}\"", printable(c.reduce_op)));
    }
    if (c.kind == "allreduce" && c.reduce_op.empty()) fail(p, "an allreduce without \"reduce_op\"");
    if (const json* v = optional(call, "in_group")) {
      if (!v->is_boolean()) fail(at(p, "in_group"), "expected true or false");
      c.in_group = v->get<bool>();
    }
    if (const json* v = optional(call, "in_place")) {
      if (!v->is_boolean()) fail(at(p, "in_place"), "expected true or false");
      c.in_place = v->get<bool>();
    }
    c.dtype = string(member(call, p, "dtype"), at(p, "dtype"));
    c.elements = integer(member(call, p, "elements"), at(p, "elements"), 0);
    c.bytes = static_cast<uint64_t>(integer(member(call, p, "bytes"), at(p, "bytes"), 0));
    if (const json* v = optional(call, "send")) c.send = ref(*v, at(p, "send"), nb, "buffer", true);
    if (const json* v = optional(call, "recv")) c.recv = ref(*v, at(p, "recv"), nb, "buffer", true);
    if (const json* v = optional(call, "peer")) c.peer = static_cast<int>(integer(*v, at(p, "peer"), -1, ranks - 1));
    return c;
  }

  int64_t integer(const json& j, const std::string& ptr, int64_t lo = INT64_MIN,
                  int64_t hi = INT64_MAX) const {
    int64_t v = 0;
    if (j.is_number_unsigned()) {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) fail(ptr, fmt::format("integer {} out of range [{}, {}]", u, lo, hi));
      v = static_cast<int64_t>(u);
    } else if (j.is_number_integer()) {
      v = j.get<int64_t>();
    } else {
      fail(ptr, "expected an integer");
    }
    if (v < lo || v > hi) fail(ptr, fmt::format("integer {} out of range [{}, {}]", v, lo, hi));
    return v;
  }
  int int32(const json& j, const std::string& ptr, int lo = INT_MIN, int hi = INT_MAX) const {
    return static_cast<int>(integer(j, ptr, lo, hi));
  }
  uint64_t uinteger(const json& j, const std::string& ptr) const {
    if (j.is_number_unsigned()) return j.get<uint64_t>();
    if (j.is_number_integer()) fail(ptr, "expected a non-negative integer");
    fail(ptr, "expected an integer");
  }
  std::string string(const json& j, const std::string& ptr) const {
    if (!j.is_string()) fail(ptr, "expected a string");
    return j.get<std::string>();
  }

  /// An id that must lie in [0, count) (or be -1 when allowed).
  int ref(const json& j, const std::string& ptr, size_t count, const char* what,
          bool allow_none = false) const {
    int64_t v = integer(j, ptr);
    if ((allow_none && v == -1) || (v >= 0 && static_cast<uint64_t>(v) < count)) return static_cast<int>(v);
    fail(ptr, fmt::format("{} {} does not exist ({} {}s)", what, v, count, what));
  }
  std::vector<int> refs(const json& j, const std::string& ptr, size_t count, const char* what) const {
    array(j, ptr);
    std::vector<int> out;
    out.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) out.push_back(ref(j[i], at(ptr, i), count, what));
    return out;
  }
  std::vector<int64_t> int64s(const json& j, const std::string& ptr) const {
    array(j, ptr);
    std::vector<int64_t> out;
    out.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) out.push_back(integer(j[i], at(ptr, i)));
    return out;
  }
  std::array<int64_t, 3> dim3(const json& j, const std::string& ptr) const {
    if (!j.is_array() || j.size() != 3 ||
        !std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_number_integer(); }))
      fail(ptr, "expected an array of 3 integers");
    std::array<int64_t, 3> out{};
    for (size_t i = 0; i < 3; ++i) out[i] = integer(j[i], at(ptr, i));
    return out;
  }
  /// "file:line:col", split at the last two colons (the file may hold colons).
  SourceLoc loc(const json& j, const std::string& ptr) const {
    std::string s = string(j, ptr);
    auto bad = [&]() { fail(ptr, "expected \"file:line:col\" with line >= 1"); };
    size_t c2 = s.rfind(':');
    if (c2 == std::string::npos || c2 == 0) bad();
    size_t c1 = s.rfind(':', c2 - 1);
    if (c1 == std::string::npos) bad();
    auto number = [&](const std::string& t) -> unsigned {
      if (t.empty() || t.size() > 9 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
        bad();
      return static_cast<unsigned>(std::stoul(t));
    };
    SourceLoc out;
    out.file = s.substr(0, c1);
    out.line = number(s.substr(c1 + 1, c2 - c1 - 1));
    out.col = number(s.substr(c2 + 1));
    if (out.line == 0) bad();
    return out;
  }
  SourceLoc optional_loc(const json& obj, const std::string& ptr) const {
    const json* l = optional(obj, "loc");
    return l ? loc(*l, at(ptr, "loc")) : SourceLoc{};
  }

  Footprint footprint(const json& j, const std::string& ptr) const {
    object(j, ptr);
    Footprint f;
    if (const json* u = optional(j, "unknown")) {
      f.unknown = string(*u, at(ptr, "unknown"));
      if (f.unknown.empty()) fail(at(ptr, "unknown"), "expected a reason");
      return f;
    }
    auto range = [&](const char* key) -> std::optional<std::array<int64_t, 2>> {
      const std::string rp = at(ptr, key);
      const json& r = member(j, ptr, key);
      if (r.is_null()) return std::nullopt;
      array(r, rp);
      if (r.size() != 2) fail(rp, "expected [lo, hi]");
      std::array<int64_t, 2> v{integer(r[0], at(rp, size_t{0})), integer(r[1], at(rp, size_t{1}))};
      if (v[0] >= v[1]) fail(rp, "expected lo < hi");
      return v;
    };
    f.read = range("read");
    f.write = range("write");
    if (const json* e = optional(j, "elements")) f.elements = integer(*e, at(ptr, "elements"), 0);
    if (const json* e = optional(j, "read_bytes")) f.read_bytes = integer(*e, at(ptr, "read_bytes"), 0);
    if (const json* e = optional(j, "write_bytes")) f.write_bytes = integer(*e, at(ptr, "write_bytes"), 0);
    const json& ex = member(j, ptr, "exact");
    if (!ex.is_boolean()) fail(at(ptr, "exact"), "expected true or false");
    f.exact = ex.get<bool>();
    return f;
  }

  /// A kernel's counted operations ({"flops", "status", "reasons", "counts": {"fp32": {"mul": n}}}).
  KernelOps kernel_ops(const json& j, const std::string& ptr) const {
    object(j, ptr);
    KernelOps k;
    k.flops = uinteger(member(j, ptr, "flops"), at(ptr, "flops"));
    if (const json* b = optional(j, "barriers")) k.barriers = uinteger(*b, at(ptr, "barriers"));
    if (const json* r = optional(j, "reduction_flops")) {
      k.reduction_flops = uinteger(*r, at(ptr, "reduction_flops"));
      if (k.reduction_flops > k.flops) fail(at(ptr, "reduction_flops"), "more than the kernel's flops");
    }
    std::string st = string(member(j, ptr, "status"), at(ptr, "status"));
    if (st == "exact") k.status = KernelOps::Status::Exact;
    else if (st == "upper bound") k.status = KernelOps::Status::UpperBound;
    else if (st == "unknown") k.status = KernelOps::Status::Unknown;
    else fail(at(ptr, "status"), "expected \"exact\", \"upper bound\" or \"unknown\"");
    if (const json* r = optional(j, "reasons")) {
      const std::string rp = at(ptr, "reasons");
      array(*r, rp);
      for (size_t i = 0; i < r->size(); ++i) k.reasons.push_back(string((*r)[i], at(rp, i)));
    }
    const std::string cp = at(ptr, "counts");
    const json& counts = object(member(j, ptr, "counts"), cp);
    for (const auto& [prec, per] : counts.items()) {
      int p = 0;
      while (p < KernelOps::kPrecisions && prec != precision_name(p)) ++p;
      if (p == KernelOps::kPrecisions) fail(at(cp, prec.c_str()), "expected fp16, bf16, fp32 or fp64");
      object(per, at(cp, prec.c_str()));
      for (const auto& [kind, n] : per.items()) {
        int kd = 0;
        while (kd < KernelOps::kKinds && kind != kind_name(kd)) ++kd;
        if (kd == KernelOps::kKinds) fail(at(at(cp, prec.c_str()), kind.c_str()), "expected add_sub, mul, fma, div, special or min_max_cmp");
        k.counts[static_cast<size_t>(kd)][static_cast<size_t>(p)] = uinteger(n, at(at(cp, prec.c_str()), kind.c_str()));
      }
    }
    if (const json* b = optional(j, "load_bytes")) k.load_bytes = uinteger(*b, at(ptr, "load_bytes"));
    if (const json* b = optional(j, "store_bytes")) k.store_bytes = uinteger(*b, at(ptr, "store_bytes"));
    if (const json* b = optional(j, "bytes_exact")) {
      if (!b->is_boolean()) fail(at(ptr, "bytes_exact"), "expected true or false");
      k.bytes_exact = b->get<bool>();
    }
    if (const json* b = optional(j, "bytes_reason")) k.bytes_reason = string(*b, at(ptr, "bytes_reason"));
    return k;
  }

  Arg arg(const json& j, const std::string& ptr, size_t buffers) const {
    object(j, ptr);
    Arg a;
    a.dtype = string(member(j, ptr, "dtype"), at(ptr, "dtype"));
    if (const json* b = optional(j, "buffer")) {
      a.kind = Arg::Kind::Buffer;
      a.buffer = ref(*b, at(ptr, "buffer"), buffers, "buffer");
      a.offset = integer(member(j, ptr, "offset"), at(ptr, "offset"));
      if (const json* v = optional(j, "view")) a.view = ref(*v, at(ptr, "view"), buffers, "buffer");
      if (const json* acc = optional(j, "access")) a.access = access(*acc, at(ptr, "access"));
      if (const json* t = optional(j, "tensor")) {
        const std::string tp = at(ptr, "tensor");
        object(*t, tp);
        a.tensor_dtype = string(member(*t, tp, "dtype"), at(tp, "dtype"));
        if (a.tensor_dtype.empty()) fail(at(tp, "dtype"), "expected a dtype");
        const json& shape = array(member(*t, tp, "shape"), at(tp, "shape"));
        if (shape.size() > 32) fail(at(tp, "shape"), "more than 32 dimensions");
        for (size_t d = 0; d < shape.size(); ++d) a.tensor_shape.push_back(integer(shape[d], at(at(tp, "shape"), d)));
      }
      if (const json* f = optional(j, "footprint")) a.footprint = footprint(*f, at(ptr, "footprint"));
    } else if (const json* n = optional(j, "null")) {
      if (!(n->is_boolean() && n->get<bool>())) fail(at(ptr, "null"), "expected true");
      a.kind = Arg::Kind::Null;
      if (const json* s = optional(j, "string")) a.text = string(*s, at(ptr, "string"));
    } else if (const json* v = optional(j, "value")) {
      const std::string vp = at(ptr, "value");
      if (v->is_number_integer()) {
        a.kind = Arg::Kind::Int;
        a.int_value = integer(*v, vp);
        if (const json* e = optional(j, "expr")) {
          a.expr = string(*e, at(ptr, "expr"));
          if (a.expr.empty()) fail(at(ptr, "expr"), "expected an expression");
        }
      } else if (v->is_number_float()) {
        a.kind = Arg::Kind::Float;
        a.float_value = v->get<double>();
      } else if (v->is_string() && (*v == "nan" || *v == "inf" || *v == "-inf")) {
        a.kind = Arg::Kind::Float;
        a.float_value = *v == "nan"   ? std::numeric_limits<double>::quiet_NaN()
                        : *v == "inf" ? std::numeric_limits<double>::infinity()
                                      : -std::numeric_limits<double>::infinity();
      } else {
        fail(vp, "expected a number, \"nan\", \"inf\" or \"-inf\"");
      }
    } else {
      fail(ptr, "expected an argument with \"buffer\", \"value\" or \"null\"");
    }
    return a;
  }
  std::vector<Arg> args(const json& j, const std::string& ptr, size_t buffers) const {
    array(j, ptr);
    std::vector<Arg> out;
    out.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) out.push_back(arg(j[i], at(ptr, i), buffers));
    return out;
  }

  /// Each element's "id" must equal its position: ids are indices.
  void check_id(const json& obj, const std::string& ptr, size_t index) const {
    const std::string p = at(ptr, "id");
    int64_t id = integer(member(obj, ptr, "id"), p);
    if (id < 0 || static_cast<uint64_t>(id) != index)
      fail(p, fmt::format("expected id {} (ids are array positions), got {}", index, id));
  }

  /// The inverse of relay_attr_json.
  RelayAttr relay_attr(const std::string& key, const json& v, const std::string& ptr) const {
    RelayAttr a;
    a.key = key;
    if (v.is_null()) {
      a.kind = RelayAttr::Kind::None;
    } else if (v.is_boolean()) {
      a.kind = RelayAttr::Kind::Bool;
      a.ints = {v.get<bool>() ? 1 : 0};
    } else if (v.is_number_integer()) {
      a.kind = RelayAttr::Kind::Int;
      a.ints = {integer(v, ptr)};
    } else if (v.is_number_float()) {
      a.kind = RelayAttr::Kind::Float;
      a.floats = {v.get<double>()};
    } else if (v.is_string()) {
      a.kind = RelayAttr::Kind::String;
      a.text = v.get<std::string>();
    } else if (v.is_array()) {
      bool all_int = std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_integer(); });
      if (!all_int && !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number(); }))
        fail(ptr, "expected an array of numbers");
      a.kind = all_int ? RelayAttr::Kind::Ints : RelayAttr::Kind::Floats;
      for (size_t i = 0; i < v.size(); ++i) {
        if (all_int) a.ints.push_back(integer(v[i], at(ptr, i)));
        else a.floats.push_back(v[i].get<double>());
      }
    } else if (v.is_object() && v.size() == 1 && v.contains("text")) {
      a.kind = RelayAttr::Kind::Text;
      a.text = string(v["text"], at(ptr, "text"));
    } else {
      fail(ptr, "expected a number, boolean, string, array of numbers, null or {\"text\": ...}");
    }
    return a;
  }

  Access access(const json& j, const std::string& ptr) const {
    const std::string s = string(j, ptr);
    for (Access a : {Access::Unknown, Access::Read, Access::Write, Access::ReadWrite})
      if (s == to_string(a)) return a;
    fail(ptr, fmt::format("unknown access \"{}\" (expected read, write, readwrite or unknown)", printable(s)));
  }

  Dataflow document(const json& root) const;

 private:
  std::string file_;
};

BufferKind buffer_kind(const Reader& r, const std::string& s, const std::string& ptr) {
  for (BufferKind k : {BufferKind::Input, BufferKind::Param, BufferKind::Intermediate,
                       BufferKind::Output, BufferKind::Workspace})
    if (s == to_string(k)) return k;
  r.fail(ptr, fmt::format("unknown buffer kind \"{}\" (expected input, param, intermediate, output or workspace)",
                          printable(s)));
}

Dataflow Reader::document(const json& root) const {
  Dataflow df;
  const std::string schema = string(member(root, "", "schema"), "/schema");
  if (schema != kSchemaVersion)
    fail("/schema", fmt::format("unsupported schema \"{}\" (this kdflow reads {})", printable(schema), kSchemaVersion));
  df.schema = kSchemaVersion;

  if (const json* r = optional(root, "ranks")) df.ranks = static_cast<int>(integer(*r, "/ranks", 1, 1 << 16));
  if (const json* d = optional(root, "predicted_on")) df.predicted_on = string(*d, "/predicted_on");
  const json& src = object(member(root, "", "sources"), "/sources");
  df.sources.graph = string(member(src, "/sources", "graph"), "/sources/graph");
  df.sources.host = string(member(src, "/sources", "host"), "/sources/host");
  df.sources.meta = string(member(src, "/sources", "meta"), "/sources/meta");
  const json& params_src = member(src, "/sources", "params");
  if (!params_src.is_null()) df.sources.params = string(params_src, "/sources/params");
  for (auto [key, field] : {std::pair<const char*, std::string*>{"device", &df.sources.device},
                            {"relay", &df.sources.relay}, {"library", &df.sources.library},
                            {"vm_exec", &df.sources.vm_exec}, {"vm_function", &df.sources.vm_function},
                            {"tvm_version", &df.sources.tvm_version}}) {
    const json* v = optional(src, key);
    if (v && !v->is_null()) *field = string(*v, at("/sources", key));
  }
  if (const json* ev = optional(src, "tvm_version_evidence")) {
    const json& list = array(*ev, "/sources/tvm_version_evidence");
    for (size_t i = 0; i < list.size(); ++i)
      df.sources.tvm_version_evidence.push_back(string(list[i], at("/sources/tvm_version_evidence", i)));
  }
  if (const json* g = optional(root, "generator")) string(*g, "/generator");
  if (const json* s = optional(root, "summary")) object(*s, "/summary");  // derived; recomputed on output

  // Sizes first: every reference is checked against them.
  const json& jbuffers = array(member(root, "", "buffers"), "/buffers");
  const json& jkernels = array(member(root, "", "kernels"), "/kernels");
  const json& jcalls = array(member(root, "", "library_calls"), "/library_calls");
  const json& jnodes = array(member(root, "", "nodes"), "/nodes");
  const json& jedges = array(member(root, "", "edges"), "/edges");
  const size_t nb = jbuffers.size(), nk = jkernels.size(), nc = jcalls.size(), nn = jnodes.size();
  static const json kEmpty = json::array();
  const json* jdfuncs_p = optional(root, "device_functions");
  const json& jdfuncs = jdfuncs_p ? array(*jdfuncs_p, "/device_functions") : kEmpty;
  const size_t ndf = jdfuncs.size();
  for (size_t i = 0; i < ndf; ++i) {
    const std::string p = at("/device_functions", i);
    const json& j = object(jdfuncs[i], p);
    DeviceFunction f;
    f.name = string(member(j, p, "name"), at(p, "name"));
    f.launch_bounds = integer(member(j, p, "launch_bounds"), at(p, "launch_bounds"), 0);
    const std::string pp = at(p, "params");
    const json& params = array(member(j, p, "params"), pp);
    for (size_t k = 0; k < params.size(); ++k) {
      const std::string q = at(pp, k);
      const json& pj = object(params[k], q);
      DeviceParam dp;
      dp.name = string(member(pj, q, "name"), at(q, "name"));
      dp.type = string(member(pj, q, "type"), at(q, "type"));
      const json& ptr_flag = member(pj, q, "pointer");
      if (!ptr_flag.is_boolean()) fail(at(q, "pointer"), "expected true or false");
      dp.pointer = ptr_flag.get<bool>();
      if (const json* acc = optional(pj, "access")) dp.access = access(*acc, at(q, "access"));
      f.params.push_back(std::move(dp));
    }
    f.loc = optional_loc(j, p);
    if (const json* e = optional(j, "access_error")) f.access_error = string(*e, at(p, "access_error"));
    df.device_functions.push_back(std::move(f));
  }
  if (const json* errs = optional(root, "device_errors")) {
    const json& a = array(*errs, "/device_errors");
    for (size_t i = 0; i < a.size(); ++i) df.device_errors.push_back(string(a[i], at("/device_errors", i)));
  }

  for (size_t i = 0; i < nb; ++i) {
    const std::string p = at("/buffers", i);
    const json& j = object(jbuffers[i], p);
    check_id(j, p, i);
    Buffer b;
    b.id = static_cast<int>(i);
    b.kind = buffer_kind(*this, string(member(j, p, "kind"), at(p, "kind")), at(p, "kind"));
    const json& sid = member(j, p, "storage_id");
    if (!sid.is_null()) b.storage_id = integer(sid, at(p, "storage_id"));
    b.name = string(member(j, p, "name"), at(p, "name"));
    b.dtype = string(member(j, p, "dtype"), at(p, "dtype"));
    b.shape = int64s(member(j, p, "shape"), at(p, "shape"));
    b.bytes = uinteger(member(j, p, "bytes"), at(p, "bytes"));
    const json& eid = member(j, p, "entry_id");
    if (!eid.is_null()) b.entry_id = int32(eid, at(p, "entry_id"), 0);
    const json& node = member(j, p, "node");
    if (!node.is_null()) b.node = ref(node, at(p, "node"), nn, "node");
    b.output_index = int32(member(j, p, "output_index"), at(p, "output_index"), 0);
    if (const json* v = optional(j, "input_index")) b.input_index = int32(*v, at(p, "input_index"), 0);
    if (const json* v = optional(j, "constant_index")) b.constant_index = int32(*v, at(p, "constant_index"), 0);
    if (const json* v = optional(j, "view_of")) {
      b.view_of = ref(*v, at(p, "view_of"), jbuffers.size(), "buffer");
      if (b.view_of == b.id) fail(at(p, "view_of"), "a buffer cannot view itself");
      b.view_offset = integer(member(j, p, "view_offset"), at(p, "view_offset"));
      if (b.view_offset < 0) fail(at(p, "view_offset"), "expected 0 or more");
    }
    if (const json* v = optional(j, "shape_expr")) {
      const std::string q = at(p, "shape_expr");
      if (!v->is_array()) fail(q, "expected an array");
      for (size_t d = 0; d < v->size(); ++d) b.shape_expr.push_back(string((*v)[d], at(q, d)));
      if (b.shape_expr.size() != b.shape.size())
        fail(q, fmt::format("{} dimensions, but the shape has {}", b.shape_expr.size(), b.shape.size()));
    }
    if (const json* v = optional(j, "values_used")) {
      b.values_used = int64s(*v, at(p, "values_used"));
      if (b.values_used.size() > (1u << 20)) fail(at(p, "values_used"), "more than 2^20 values");
    }
    if (const json* v = optional(j, "per_rank")) {
      if (!v->is_boolean()) fail(at(p, "per_rank"), "expected true or false");
      b.per_rank = v->get<bool>();
    }
    b.loc = optional_loc(j, p);
    df.buffers.push_back(std::move(b));
  }

  for (size_t i = 0; i < nk; ++i) {
    const std::string p = at("/kernels", i);
    const json& j = object(jkernels[i], p);
    check_id(j, p, i);
    Kernel k;
    k.id = static_cast<int>(i);
    k.name = string(member(j, p, "name"), at(p, "name"));
    k.node = ref(member(j, p, "graph_node"), at(p, "graph_node"), nn, "node", true);
    k.function = string(member(j, p, "function"), at(p, "function"));
    k.grid = dim3(member(j, p, "grid"), at(p, "grid"));
    k.block = dim3(member(j, p, "block"), at(p, "block"));
    for (auto [key, out] : {std::pair<const char*, std::array<std::string, 3>*>{"grid_expr", &k.grid_expr},
                            {"block_expr", &k.block_expr}}) {
      const json* e = optional(j, key);
      if (!e) continue;
      const std::string q = at(p, key);
      if (!e->is_array() || e->size() != 3) fail(q, "expected an array of 3 expressions");
      for (size_t d = 0; d < 3; ++d) {
        (*out)[d] = string((*e)[d], at(q, d));
        if ((*out)[d].empty()) fail(at(q, d), "expected an expression");
      }
    }
    k.dynamic_shared_memory = integer(member(j, p, "dynamic_shared_memory"), at(p, "dynamic_shared_memory"), 0);
    k.args = args(member(j, p, "args"), at(p, "args"), nb);
    k.loc = optional_loc(j, p);
    if (const json* li = optional(j, "loop_iterations")) k.loop_iterations = int64s(*li, at(p, "loop_iterations"));
    if (const json* la = optional(j, "launch_attributes")) {
      const std::string lp = at(p, "launch_attributes");
      array(*la, lp);
      for (size_t i = 0; i < la->size(); ++i) {
        std::string a = string((*la)[i], at(lp, i));
        bool& flag = a == "programmatic_dependent_launch" ? k.programmatic_dependent_launch : k.cooperative_launch;
        if (a != "programmatic_dependent_launch" && a != "cooperative")
          fail(at(lp, i), "expected \"programmatic_dependent_launch\" or \"cooperative\"");
        if (flag) fail(at(lp, i), "\"" + a + "\" is given twice");
        flag = true;
      }
    }
    if (const json* d = optional(j, "device_function"); d && !d->is_null())
      k.device_function = ref(*d, at(p, "device_function"), ndf, "device function");
    if (const json* o = optional(j, "ops")) k.ops = kernel_ops(*o, at(p, "ops"));
    if (const json* t = optional(j, "predicted_us")) {
      if (!t->is_number() || !(t->get<double>() >= 0)) fail(at(p, "predicted_us"), "expected a number of microseconds, 0 or more");
      k.predicted_us = t->get<double>();
    }
    df.kernels.push_back(std::move(k));
  }

  for (size_t i = 0; i < nc; ++i) {
    const std::string p = at("/library_calls", i);
    const json& j = object(jcalls[i], p);
    check_id(j, p, i);
    LibraryCall c;
    c.id = static_cast<int>(i);
    c.name = string(member(j, p, "name"), at(p, "name"));
    c.node = ref(member(j, p, "graph_node"), at(p, "graph_node"), nn, "node", true);
    c.function = string(member(j, p, "function"), at(p, "function"));
    c.args = args(member(j, p, "args"), at(p, "args"), nb);
    c.loc = optional_loc(j, p);
    c.after_kernel = ref(member(j, p, "after_kernel"), at(p, "after_kernel"), nk, "kernel", true);
    if (const json* k = optional(j, "collective")) c.collective = collective(j, *k, p, nb, df.ranks);
    df.library_calls.push_back(std::move(c));
  }

  for (size_t i = 0; i < nn; ++i) {
    const std::string p = at("/nodes", i);
    const json& j = object(jnodes[i], p);
    check_id(j, p, i);
    Node n;
    n.id = static_cast<int>(i);
    n.op = string(member(j, p, "op"), at(p, "op"));
    n.name = string(member(j, p, "name"), at(p, "name"));
    if (const json* f = optional(j, "function")) n.function = string(*f, at(p, "function"));
    n.inputs = refs(member(j, p, "inputs"), at(p, "inputs"), nb, "buffer");
    n.outputs = refs(member(j, p, "outputs"), at(p, "outputs"), nb, "buffer");
    n.kernels = refs(member(j, p, "kernels"), at(p, "kernels"), nk, "kernel");
    n.workspaces = refs(member(j, p, "workspaces"), at(p, "workspaces"), nb, "buffer");
    n.library_calls = refs(member(j, p, "library_calls"), at(p, "library_calls"), nc, "library call");
    n.loc = optional_loc(j, p);
    if (const json* ops = optional(j, "relay_ops")) {
      const std::string op_ptr = at(p, "relay_ops");
      array(*ops, op_ptr);
      for (size_t k = 0; k < ops->size(); ++k) {
        const std::string q = at(op_ptr, k);
        const json& oj = object((*ops)[k], q);
        RelayOp op;
        op.name = string(member(oj, q, "name"), at(q, "name"));
        if (const json* t = optional(oj, "type")) op.type = string(*t, at(q, "type"));
        if (const json* in = optional(oj, "inputs")) {
          const std::string ip = at(q, "inputs");
          array(*in, ip);
          for (size_t m = 0; m < in->size(); ++m) op.input_types.push_back(string((*in)[m], at(ip, m)));
        }
        if (const json* attrs = optional(oj, "attrs")) {
          const std::string ap = at(q, "attrs");
          object(*attrs, ap);
          for (const auto& [key, value] : attrs->items()) op.attrs.push_back(relay_attr(key, value, at(ap, key.c_str())));
        }
        n.relay_ops.push_back(std::move(op));
      }
      n.relay_source = string(member(j, p, "relay_source"), at(p, "relay_source"));
    }
    if (const json* g = optional(j, "cuda_graph")) n.cuda_graph = string(*g, at(p, "cuda_graph"));
    if (const json* g = optional(j, "session_step")) n.session_step = string(*g, at(p, "session_step"));
    if (const json* g = optional(j, "runtime_call")) {
      n.runtime_call = string(*g, at(p, "runtime_call"));
      n.runtime_role = string(member(j, p, "runtime_role"), at(p, "runtime_role"));
      n.layer = integer(member(j, p, "layer"), at(p, "layer"), -1);
      if (const json* ra = optional(j, "runtime_args")) n.runtime_args = args(*ra, at(p, "runtime_args"), nb);
    }
    df.nodes.push_back(std::move(n));
  }

  if (const json* jcopies = optional(root, "host_copies")) {
    array(*jcopies, "/host_copies");
    for (size_t i = 0; i < jcopies->size(); ++i) {
      const std::string p = at("/host_copies", i);
      const json& j = object((*jcopies)[i], p);
      HostCopy c;
      c.node = ref(member(j, p, "graph_node"), at(p, "graph_node"), nn, "node");
      c.buffer = ref(member(j, p, "buffer"), at(p, "buffer"), nb, "buffer");
      c.offset = integer(member(j, p, "offset"), at(p, "offset"), 0);
      c.dtype = string(member(j, p, "dtype"), at(p, "dtype"));
      if (c.dtype != "int32" && c.dtype != "int64")
        fail(at(p, "dtype"), fmt::format("a copy of {}: only int32 and int64 copies are read", printable(c.dtype)));
      const json& vals = array(member(j, p, "values"), at(p, "values"));
      const std::string vp = at(p, "values");
      for (size_t k = 0; k < vals.size(); ++k) c.values.push_back(integer(vals[k], at(vp, k), INT32_MIN, INT32_MAX));
      const json& arrs = array(member(j, p, "arrays"), at(p, "arrays"));
      for (size_t k = 0; k < arrs.size(); ++k) {
        const std::string q = at(at(p, "arrays"), k);
        const json& a = object(arrs[k], q);
        HostCopy::Array x;
        x.name = string(member(a, q, "name"), at(q, "name"));
        x.first = integer(member(a, q, "first"), at(q, "first"), 0, static_cast<int64_t>(c.values.size()));
        x.count = integer(member(a, q, "count"), at(q, "count"), 0, static_cast<int64_t>(c.values.size()) - x.first);
        c.arrays.push_back(std::move(x));
      }
      df.host_copies.push_back(std::move(c));
    }
  }

  for (size_t i = 0; i < jedges.size(); ++i) {
    const std::string p = at("/edges", i);
    const json& j = object(jedges[i], p);
    Edge e;
    const std::string kind = string(member(j, p, "kind"), at(p, "kind"));
    if (kind == "read") e.kind = Edge::Kind::Read;
    else if (kind == "write") e.kind = Edge::Kind::Write;
    else fail(at(p, "kind"), fmt::format("unknown edge kind \"{}\" (expected read or write)", printable(kind)));
    e.buffer = ref(member(j, p, "buffer"), at(p, "buffer"), nb, "buffer");
    e.node = ref(member(j, p, "node"), at(p, "node"), nn, "node");
    df.edges.push_back(e);
  }

  if (const json* jdeps = optional(root, "dependencies")) {
    array(*jdeps, "/dependencies");
    for (size_t i = 0; i < jdeps->size(); ++i) {
      const std::string p = at("/dependencies", i);
      const json& j = object((*jdeps)[i], p);
      Dependency d;
      const std::string kind = string(member(j, p, "kind"), at(p, "kind"));
      if (kind == "raw") d.kind = Dependency::Kind::RAW;
      else if (kind == "war") d.kind = Dependency::Kind::WAR;
      else if (kind == "waw") d.kind = Dependency::Kind::WAW;
      else fail(at(p, "kind"), fmt::format("unknown dependency kind \"{}\" (expected raw, war or waw)", printable(kind)));
      auto flag = [&](const char* key) {
        const json* v = optional(j, key);
        if (v && !v->is_boolean()) fail(at(p, key), "expected true or false");
        return v && v->get<bool>();
      };
      d.from_library_call = flag("from_library_call");
      d.to_library_call = flag("to_library_call");
      d.from = d.from_library_call ? ref(member(j, p, "from"), at(p, "from"), nc, "library call")
                                   : ref(member(j, p, "from"), at(p, "from"), nk, "kernel");
      d.to = d.to_library_call ? ref(member(j, p, "to"), at(p, "to"), nc, "library call")
                               : ref(member(j, p, "to"), at(p, "to"), nk, "kernel");
      d.from_buffer = ref(member(j, p, "from_buffer"), at(p, "from_buffer"), nb, "buffer");
      d.to_buffer = ref(member(j, p, "to_buffer"), at(p, "to_buffer"), nb, "buffer");
      df.dependencies.push_back(d);
    }
  }

  df.inputs = refs(member(root, "", "inputs"), "/inputs", nb, "buffer");
  df.params = refs(member(root, "", "params"), "/params", nb, "buffer");
  df.outputs = refs(member(root, "", "outputs"), "/outputs", nb, "buffer");
  return df;
}

/// nlohmann's parse_error text without its "[json.exception...] parse error at line L, column C: " prefix.
std::string parse_error_text(const std::string& what) {
  std::string s = what;
  size_t col = s.find("column ");
  size_t colon = col == std::string::npos ? std::string::npos : s.find(": ", col);
  if (colon != std::string::npos) s = s.substr(colon + 2);
  else if (size_t br = s.find("] "); br != std::string::npos) s = s.substr(br + 2);
  return printable(s);
}

}  // namespace

Expected<Dataflow> parse_dataflow_json(const std::string& text, const std::string& file) {
  try {
    bool too_deep = false;
    json::parser_callback_t cap = [&too_deep](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth) {
        too_deep = true;
        return false;  // drop the value: nothing deeper is ever built
      }
      return true;
    };
    json root;
    try {
      root = json::parse(text, cap, /*allow_exceptions=*/true);
    } catch (const json::parse_error& e) {
      // e.byte is the 1-based offset of the character that stopped the parser.
      size_t upto = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
      unsigned line = 1, col = 1;
      for (size_t i = 0; i < upto; ++i) {
        if (text[i] == '\n') ++line, col = 1;
        else ++col;
      }
      return source_error(file, line, col, "invalid JSON: " + parse_error_text(e.what()));
    }
    if (too_deep) return file_error(file, fmt::format("JSON nested deeper than {} levels", kMaxDepth));
    if (!root.is_object()) return file_error(file, "expected a JSON object (a kdflow/1 dataflow)");
    Reader reader(file);
    return reader.document(root);
  } catch (const Fail& f) {
    return f.error;
  } catch (const std::exception& e) {
    return file_error(file, std::string("internal error while reading JSON: ") + printable(e.what()),
                      ExitCode::Software);
  }
}


}  // namespace kdflow

// disco.cpp — see disco.h. The argument conventions, per builtin (builtin.cc's registrations):
//   allreduce(send, Shape[reduce kind], in_group, recv)        kinds 0 sum, 1 prod, 2 min, 3 max, 4 avg
//   allgather(send, in_group, recv)                             recv: the ranks' sends, concatenated
//   broadcast_from_worker0(send?, in_group, recv)               send: worker 0's (None elsewhere)
//   scatter_from_worker0(send?, in_group, recv)                 recv: worker 0's send, split evenly
//   gather_to_worker0(send, in_group, recv?)                    recv: worker 0's (None elsewhere)
//   recv_from_worker0(buffer)                                   from worker 0 into buffer
//   send_to_next_group(buffer), recv_from_prev_group(buffer)    pipeline groups
//   send_to_worker(buffer, receiver), recv_from_worker(buffer, sender)
#include "frontend/relax/disco.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

namespace kdflow {
namespace {

int64_t elements_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* operand_kind(DiscoOperand::Kind k) {
  switch (k) {
    case DiscoOperand::Kind::Tensor: return "a tensor";
    case DiscoOperand::Kind::Int: return "an integer";
    case DiscoOperand::Kind::Shape: return "a shape";
    case DiscoOperand::Kind::None: return "None";
    case DiscoOperand::Kind::Other: return "another value";
  }
  return "?";
}

class Describer {
 public:
  Describer(std::string_view name, const std::vector<DiscoOperand>& a) : a_(a) {
    c_.collective.kind = std::string(name.substr(name.rfind('.') + 1));
  }

  Expected<DiscoCall> run() {
    const std::string& k = c_.collective.kind;
    if (k == "allreduce") return allreduce();
    if (k == "allgather" || k == "broadcast_from_worker0" || k == "scatter_from_worker0" || k == "gather_to_worker0")
      return send_group_recv();
    if (k == "recv_from_worker0" || k == "recv_from_prev_group") return one_buffer(false);
    if (k == "send_to_next_group") return one_buffer(true);
    if (k == "send_to_worker" || k == "recv_from_worker") return with_peer(k == "send_to_worker");
    return Error{fmt::format("runtime.disco.{} is not one of disco's collectives", k)};
  }

 private:
  bool count(size_t n) {
    if (a_.size() == n) return true;
    error_ = fmt::format("{} arguments, expected {}", a_.size(), n);
    return false;
  }
  bool is(size_t i, DiscoOperand::Kind k, const char* what) {
    if (a_[i].kind == k) return true;
    error_ = fmt::format("argument {} ({}) is {}, not {}", i, what, operand_kind(a_[i].kind), operand_kind(k));
    return false;
  }
  bool flag(size_t i) {
    if (!is(i, DiscoOperand::Kind::Int, "in_group")) return false;
    if (a_[i].value != 0 && a_[i].value != 1) {
      error_ = fmt::format("argument {} (in_group) is {}, not a bool", i, a_[i].value);
      return false;
    }
    c_.collective.in_group = a_[i].value != 0;
    return true;
  }
  /// Tensor or None (an Optional<Tensor> a rank other than worker 0 leaves out).
  bool optional_tensor(size_t i, const char* what) {
    if (a_[i].kind == DiscoOperand::Kind::Tensor || a_[i].kind == DiscoOperand::Kind::None) return true;
    error_ = fmt::format("argument {} ({}) is {}, not a tensor or None", i, what, operand_kind(a_[i].kind));
    return false;
  }
  bool tensor(int i) const { return i >= 0 && a_[static_cast<size_t>(i)].kind == DiscoOperand::Kind::Tensor; }
  void sizes(int from) {
    const DiscoOperand& t = a_[static_cast<size_t>(from)];
    c_.collective.dtype = dtype_to_string(t.dtype);
    c_.collective.elements = elements_of(t.shape);
    c_.collective.bytes = disco_bytes(t.dtype, c_.collective.elements);
  }
  Expected<DiscoCall> done() {
    if (!error_.empty()) return Error{error_};
    return c_;
  }

  Expected<DiscoCall> allreduce() {
    if (!count(4) || !is(0, DiscoOperand::Kind::Tensor, "send") || !is(1, DiscoOperand::Kind::Shape, "the reduce kind") ||
        !flag(2) || !is(3, DiscoOperand::Kind::Tensor, "recv"))
      return done();
    static const std::array<const char*, 5> ops = {"sum", "prod", "min", "max", "avg"};
    if (a_[1].shape.size() != 1 || a_[1].shape[0] < 0 || a_[1].shape[0] >= static_cast<int64_t>(ops.size()))
      return Error{fmt::format("argument 1 (the reduce kind) is ({}), not one of (0) sum ... (4) avg",
                               fmt::join(a_[1].shape, ", "))};
    c_.collective.reduce_op = ops[static_cast<size_t>(a_[1].shape[0])];
    if (a_[0].dtype != a_[3].dtype || elements_of(a_[0].shape) != elements_of(a_[3].shape))
      return Error{fmt::format("send is {} [{}] but recv is {} [{}]: an allreduce keeps both", dtype_to_string(a_[0].dtype),
                               fmt::join(a_[0].shape, ", "), dtype_to_string(a_[3].dtype), fmt::join(a_[3].shape, ", "))};
    c_.collective.send = 0;
    c_.collective.recv = 3;
    sizes(0);
    return done();
  }

  /// allgather / broadcast / scatter / gather: (send, in_group, recv), one side optional.
  Expected<DiscoCall> send_group_recv() {
    const std::string& k = c_.collective.kind;
    const bool send_optional = k == "broadcast_from_worker0" || k == "scatter_from_worker0";
    const bool recv_optional = k == "gather_to_worker0";
    if (!count(3)) return done();
    if (!(send_optional ? optional_tensor(0, "send") : is(0, DiscoOperand::Kind::Tensor, "send")) || !flag(1) ||
        !(recv_optional ? optional_tensor(2, "recv") : is(2, DiscoOperand::Kind::Tensor, "recv")))
      return done();
    c_.collective.send = tensor(0) ? 0 : -1;
    c_.collective.recv = tensor(2) ? 2 : -1;
    if (c_.collective.send < 0 && c_.collective.recv < 0) return Error{"neither send nor recv is a tensor"};
    if (tensor(0) && tensor(2)) {
      const int64_t s = elements_of(a_[0].shape), r = elements_of(a_[2].shape);
      // The ratio is the number of ranks the build was made for (allgather / gather: recv holds
      // every rank's send; scatter: send holds every rank's recv; broadcast: equal).
      const bool ok = k == "broadcast_from_worker0" ? s == r
                      : k == "scatter_from_worker0"  ? r > 0 && s % r == 0
                                                     : s > 0 && r % s == 0;
      if (!ok || a_[0].dtype != a_[2].dtype)
        return Error{fmt::format("send is {} [{}] and recv {} [{}], which a {} cannot pair",
                                 dtype_to_string(a_[0].dtype), fmt::join(a_[0].shape, ", "),
                                 dtype_to_string(a_[2].dtype), fmt::join(a_[2].shape, ", "), k)};
    }
    // What each rank sends: its send tensor (allgather, gather), worker 0's (broadcast, scatter:
    // the whole tensor, which scatter splits); recv's size where send is left out.
    sizes(tensor(0) ? 0 : 2);
    return done();
  }

  Expected<DiscoCall> one_buffer(bool sends) {
    if (!count(1) || !is(0, DiscoOperand::Kind::Tensor, "the buffer")) return done();
    (sends ? c_.collective.send : c_.collective.recv) = 0;
    sizes(0);
    return done();
  }

  Expected<DiscoCall> with_peer(bool sends) {
    if (!count(2) || !is(0, DiscoOperand::Kind::Tensor, "the buffer") ||
        !is(1, DiscoOperand::Kind::Int, sends ? "the receiver" : "the sender"))
      return done();
    if (a_[1].value < 0) return Error{fmt::format("argument 1 (the peer) is {}, not a worker id", a_[1].value)};
    (sends ? c_.collective.send : c_.collective.recv) = 0;
    c_.collective.peer = static_cast<int>(a_[1].value);
    sizes(0);
    return done();
  }

  const std::vector<DiscoOperand>& a_;
  DiscoCall c_;
  std::string error_;
};

}  // namespace

bool is_disco_builtin(std::string_view name) { return name.rfind("runtime.disco.", 0) == 0; }

uint64_t disco_bytes(const DType& dtype, int64_t elements) {
  const uint64_t per = (static_cast<uint64_t>(dtype.bits) * dtype.lanes + 7) / 8;
  return elements > 0 ? per * static_cast<uint64_t>(elements) : 0;
}

Status annotate_collectives(Dataflow& df, const std::vector<std::map<std::string, std::string>>& attrs, int ranks) {
  int collectives = 0;
  std::string first;
  for (LibraryCall& c : df.library_calls) {
    if (!is_disco_builtin(c.name) || c.node < 0 || static_cast<size_t>(c.node) >= attrs.size()) continue;
    const std::map<std::string, std::string>& at = attrs[static_cast<size_t>(c.node)];
    auto get = [&](const char* key) {
      auto it = at.find(key);
      return it == at.end() ? std::string() : it->second;
    };
    Collective k;
    k.kind = get("collective");
    if (k.kind.empty()) continue;
    k.reduce_op = get("reduce_op");
    k.in_group = get("in_group") != "0";
    if (std::string peer = get("peer"); !peer.empty()) k.peer = std::stoi(peer);
    // The node's buffers: what it sends is its input, what it receives its output (relax_vm.cpp).
    const Node& n = df.nodes[static_cast<size_t>(c.node)];
    k.send = n.inputs.empty() ? -1 : n.inputs.front();
    k.recv = n.outputs.empty() ? -1 : n.outputs.front();
    k.in_place = k.send >= 0 && k.send == k.recv;
    const int sized = k.send >= 0 ? k.send : k.recv;
    if (sized >= 0) {
      const Buffer& b = df.buffers[static_cast<size_t>(sized)];
      k.dtype = b.dtype;
      int64_t e = 1;
      for (int64_t d : b.shape) e *= d;
      k.elements = e;
      std::optional<DType> t = parse_dtype(b.dtype);
      k.bytes = t ? disco_bytes(*t, e) : b.bytes;
    }
    // Arguments: the send buffer is read, the recv buffer written whole.
    for (Arg& a : c.args)
      if (a.kind == Arg::Kind::Buffer) a.access = a.buffer == k.recv ? Access::Write : Access::Read;
    if (collectives++ == 0) first = c.name;
    c.collective = std::move(k);
  }
  if (collectives > 0 && ranks <= 0)
    return Error{fmt::format("the build calls {} (a sharded, tensor-parallel build) but its ranks are unknown: put "
                             "params_shard<r>.bin beside it or give --shards N",
                             first),
                 ExitCode::Usage};
  df.ranks = std::max(ranks, 1);
  if (df.ranks == 1) return Status::ok();

  // Which buffers differ per rank, node by node (nodes are in program order).
  auto mark = [&](int b) {
    if (b < 0) return;
    df.buffers[static_cast<size_t>(b)].per_rank = true;
  };
  for (Buffer& b : df.buffers)
    if (b.kind == BufferKind::Param && b.constant_index < 0) b.per_rank = true;
  auto is_per_rank = [&](int b) {
    if (b < 0) return false;
    const Buffer& x = df.buffers[static_cast<size_t>(b)];
    return x.per_rank || (x.view_of >= 0 && df.buffers[static_cast<size_t>(x.view_of)].per_rank);
  };
  std::vector<const LibraryCall*> coll_of(df.nodes.size(), nullptr);
  for (const LibraryCall& c : df.library_calls)
    if (c.collective && c.node >= 0) coll_of[static_cast<size_t>(c.node)] = &c;
  for (const Node& n : df.nodes) {
    if (n.op == "null") continue;
    bool any = false;
    for (int b : n.inputs) any = any || is_per_rank(b);
    if (const LibraryCall* c = coll_of[static_cast<size_t>(n.id)]) {
      const std::string& k = c->collective->kind;
      // allreduce / allgather / broadcast leave the same bytes on every rank; scatter, gather and
      // point-to-point leave each rank its own.
      any = !(k == "allreduce" || k == "allgather" || k == "broadcast_from_worker0");
    }
    if (!any) continue;
    for (int b : n.outputs) mark(b);
    for (int b : n.workspaces) mark(b);
  }
  // A view of a per-rank buffer is per rank too.
  for (Buffer& b : df.buffers)
    if (b.view_of >= 0 && df.buffers[static_cast<size_t>(b.view_of)].per_rank) b.per_rank = true;
  return Status::ok();
}

Expected<DiscoCall> describe_disco_call(std::string_view name, const std::vector<DiscoOperand>& operands) {
  if (!is_disco_builtin(name)) return Error{fmt::format("{} is not a disco builtin", name)};
  return Describer(name, operands).run();
}

}  // namespace kdflow

// TVM's disco collectives as the VM calls them (lib/frontend/relax/disco.h): each builtin's
// operands as builtin.cc registers them, the refusals, and the annotation of a flow's
// collectives and per-rank buffers, with its kdflow/1 JSON round trip. Real sharded builds are
// checked end to end in test/tvm (sharded_models.py).
#include <catch2/catch.hpp>

#include "frontend/relax/disco.h"
#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"

using namespace kdflow;

namespace {

DiscoOperand tensor(std::vector<int64_t> shape, DType t = DType{kDLFloat, 32, 1}) {
  DiscoOperand o;
  o.kind = DiscoOperand::Kind::Tensor;
  o.shape = std::move(shape);
  o.dtype = t;
  return o;
}
DiscoOperand integer(int64_t v) {
  DiscoOperand o;
  o.kind = DiscoOperand::Kind::Int;
  o.value = v;
  return o;
}
DiscoOperand shape(std::vector<int64_t> v) {
  DiscoOperand o;
  o.kind = DiscoOperand::Kind::Shape;
  o.shape = std::move(v);
  return o;
}
DiscoOperand none() {
  DiscoOperand o;
  o.kind = DiscoOperand::Kind::None;
  return o;
}

}  // namespace

TEST_CASE("disco: allreduce(send, Shape[kind], in_group, recv) for every reduce kind", "[disco]") {
  const char* kinds[] = {"sum", "prod", "min", "max", "avg"};
  for (int k = 0; k < 5; ++k) {
    Expected<DiscoCall> c = describe_disco_call(
        "runtime.disco.allreduce", {tensor({4, 64}), shape({k}), integer(k % 2), tensor({4, 64})});
    REQUIRE(c);
    CHECK(c->collective.kind == "allreduce");
    CHECK(c->collective.reduce_op == kinds[k]);
    CHECK(c->collective.in_group == (k % 2 == 1));
    CHECK(c->collective.send == 0);
    CHECK(c->collective.recv == 3);
    CHECK(c->collective.elements == 256);
    CHECK(c->collective.bytes == 1024);
    CHECK(c->collective.dtype == "float32");
  }
  // float16: 2 bytes an element.
  Expected<DiscoCall> h = describe_disco_call(
      "runtime.disco.allreduce",
      {tensor({3, 5}, DType{kDLFloat, 16, 1}), shape({0}), integer(1), tensor({3, 5}, DType{kDLFloat, 16, 1})});
  REQUIRE(h);
  CHECK(h->collective.bytes == 30);
}

TEST_CASE("disco: a wrong allreduce is one line naming what is wrong", "[disco]") {
  auto err = [](std::vector<DiscoOperand> a) {
    Expected<DiscoCall> c = describe_disco_call("runtime.disco.allreduce", a);
    REQUIRE_FALSE(c);
    CHECK(c.error().message.find('\n') == std::string::npos);
    return c.error().message;
  };
  CHECK(err({tensor({4}), shape({0}), tensor({4})}) == "3 arguments, expected 4");
  CHECK(err({tensor({4}), shape({7}), integer(1), tensor({4})}).find("reduce kind") != std::string::npos);
  CHECK(err({tensor({4}), integer(0), integer(1), tensor({4})}) ==
        "argument 1 (the reduce kind) is an integer, not a shape");
  CHECK(err({tensor({4}), shape({0}), integer(2), tensor({4})}) == "argument 2 (in_group) is 2, not a bool");
  CHECK(err({tensor({4}), shape({0}), integer(1), tensor({8})}).find("keeps both") != std::string::npos);
}

TEST_CASE("disco: allgather, broadcast, scatter and gather pair send and recv by the ranks' ratio", "[disco]") {
  Expected<DiscoCall> g = describe_disco_call("runtime.disco.allgather", {tensor({2, 8}), integer(1), tensor({4, 8})});
  REQUIRE(g);
  CHECK(g->collective.kind == "allgather");
  CHECK(g->collective.reduce_op.empty());
  CHECK(g->collective.send == 0);
  CHECK(g->collective.recv == 2);
  CHECK(g->collective.elements == 16);
  CHECK(g->collective.bytes == 64);
  // A recv that is not a whole multiple of send cannot be an allgather's.
  CHECK_FALSE(describe_disco_call("runtime.disco.allgather", {tensor({3}), integer(1), tensor({4})}));

  Expected<DiscoCall> b =
      describe_disco_call("runtime.disco.broadcast_from_worker0", {tensor({16}), integer(0), tensor({16})});
  REQUIRE(b);
  CHECK_FALSE(b->collective.in_group);
  CHECK(b->collective.bytes == 64);
  // Worker 0 only passes send; the others pass None.
  Expected<DiscoCall> b2 = describe_disco_call("runtime.disco.broadcast_from_worker0", {none(), integer(1), tensor({16})});
  REQUIRE(b2);
  CHECK(b2->collective.send == -1);
  CHECK(b2->collective.recv == 2);

  Expected<DiscoCall> s =
      describe_disco_call("runtime.disco.scatter_from_worker0", {tensor({8, 4}), integer(1), tensor({2, 4})});
  REQUIRE(s);
  CHECK(s->collective.elements == 32);  // worker 0's whole send
  CHECK_FALSE(describe_disco_call("runtime.disco.scatter_from_worker0", {tensor({8}), integer(1), tensor({3})}));

  Expected<DiscoCall> t = describe_disco_call("runtime.disco.gather_to_worker0", {tensor({2}), integer(1), none()});
  REQUIRE(t);
  CHECK(t->collective.recv == -1);
  CHECK(t->collective.bytes == 8);
}

TEST_CASE("disco: point-to-point builtins name their peer", "[disco]") {
  Expected<DiscoCall> s = describe_disco_call("runtime.disco.send_to_worker", {tensor({5}), integer(3)});
  REQUIRE(s);
  CHECK(s->collective.send == 0);
  CHECK(s->collective.recv == -1);
  CHECK(s->collective.peer == 3);
  Expected<DiscoCall> r = describe_disco_call("runtime.disco.recv_from_worker", {tensor({5}), integer(1)});
  REQUIRE(r);
  CHECK(r->collective.recv == 0);
  CHECK(r->collective.peer == 1);
  Expected<DiscoCall> n = describe_disco_call("runtime.disco.send_to_next_group", {tensor({5})});
  REQUIRE(n);
  CHECK(n->collective.send == 0);
  CHECK_FALSE(describe_disco_call("runtime.disco.send_to_worker", {tensor({5}), integer(-1)}));
  CHECK_FALSE(describe_disco_call("runtime.disco.worker_id", {}));
  CHECK_FALSE(describe_disco_call("vm.builtin.copy", {tensor({5})}));
}

namespace {

/// A column-parallel then row-parallel MLP as the VM front end leaves it: x (input), w1 and w2
/// (packed params: each rank's shard), n2 = matmul(x, w1), n3 = matmul(h, w2), n4 = allreduce.
Dataflow sharded_mlp() {
  Dataflow df;
  auto buffer = [&](BufferKind k, const std::string& name, int node, std::vector<int64_t> shape) {
    Buffer b;
    b.id = static_cast<int>(df.buffers.size());
    b.kind = k;
    b.name = name;
    b.node = node;
    b.storage_id = b.id;
    b.dtype = "float32";
    b.shape = shape;
    b.bytes = 4;
    for (int64_t d : shape) b.bytes *= static_cast<uint64_t>(d);
    df.buffers.push_back(b);
    return b.id;
  };
  auto node = [&](const std::string& op, const std::string& fn, std::vector<int> in, std::vector<int> out) {
    Node n;
    n.id = static_cast<int>(df.nodes.size());
    n.op = op;
    n.name = fn.empty() ? "arg" + std::to_string(n.id) : fn;
    n.function = fn;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    df.nodes.push_back(n);
    return n.id;
  };
  const int x = buffer(BufferKind::Input, "x", 0, {4, 8});
  const int w1 = buffer(BufferKind::Param, "w1", 1, {8, 16});
  const int w2 = buffer(BufferKind::Param, "w2", 2, {16, 8});
  node("null", "", {}, {x});
  node("null", "", {}, {w1});
  node("null", "", {}, {w2});
  const int h = buffer(BufferKind::Intermediate, "h", 3, {4, 16});
  node("tvm_op", "matmul", {x, w1}, {h});
  const int p = buffer(BufferKind::Intermediate, "partial", 4, {4, 8});
  node("tvm_op", "matmul1", {h, w2}, {p});
  const int y = buffer(BufferKind::Output, "y", 5, {4, 8});
  const int n5 = node("tvm_op", "runtime.disco.allreduce", {p}, {y});
  df.nodes[static_cast<size_t>(n5)].library_calls = {0};
  LibraryCall c;
  c.id = 0;
  c.name = "runtime.disco.allreduce";
  c.node = n5;
  c.function = "runtime.disco.allreduce";
  for (int b : {p, y}) {
    Arg a;
    a.kind = Arg::Kind::Buffer;
    a.buffer = b;
    a.dtype = "DLTensor*";
    a.access = Access::ReadWrite;
    c.args.push_back(a);
  }
  df.library_calls.push_back(c);
  df.inputs = {x};
  df.params = {w1, w2};
  df.outputs = {y};
  return df;
}

std::vector<std::map<std::string, std::string>> attrs_of(const Dataflow& df, const std::string& reduce = "sum") {
  std::vector<std::map<std::string, std::string>> a(df.nodes.size());
  a.back() = {{"collective", "allreduce"}, {"reduce_op", reduce}, {"in_group", "1"}};
  return a;
}

}  // namespace

TEST_CASE("disco: a flow's collectives get their buffers and sizes, and per-rank buffers follow the shards",
          "[disco]") {
  Dataflow df = sharded_mlp();
  REQUIRE(annotate_collectives(df, attrs_of(df), 2));
  CHECK(df.ranks == 2);
  const LibraryCall& c = df.library_calls[0];
  REQUIRE(c.collective);
  CHECK(c.collective->send == 4);
  CHECK(c.collective->recv == 5);
  CHECK(c.collective->elements == 32);
  CHECK(c.collective->bytes == 128);
  CHECK_FALSE(c.collective->in_place);
  CHECK(c.args[0].access == Access::Read);
  CHECK(c.args[1].access == Access::Write);
  // The input is the same on every rank; the shards, what is computed from them and the
  // partial sum differ; the allreduce's result is the same on every rank again.
  std::vector<bool> per_rank;
  for (const Buffer& b : df.buffers) per_rank.push_back(b.per_rank);
  CHECK(per_rank == std::vector<bool>{false, true, true, true, true, false});

  // Round trip through kdflow/1 JSON: ranks, per_rank and every field of the collective.
  const std::string text = emit_json(df);
  CHECK(text.find("\"ranks\": 2") != std::string::npos);
  CHECK(text.find("\"collective\": \"allreduce\"") != std::string::npos);
  Expected<Dataflow> back = parse_dataflow_json(text, "flow.json");
  REQUIRE(back);
  CHECK(back->ranks == 2);
  CHECK(back->library_calls[0].collective == c.collective);
  CHECK(back->buffers == df.buffers);
}

TEST_CASE("disco: a collective without ranks is refused, one rank and no collective changes nothing", "[disco]") {
  Dataflow df = sharded_mlp();
  Status st = annotate_collectives(df, attrs_of(df), 0);
  REQUIRE_FALSE(st);
  CHECK(st.error().message.find("params_shard<r>.bin") != std::string::npos);
  CHECK(st.error().code == ExitCode::Usage);

  Dataflow one = sharded_mlp();
  one.library_calls.clear();
  one.nodes.back().library_calls.clear();
  REQUIRE(annotate_collectives(one, std::vector<std::map<std::string, std::string>>(one.nodes.size()), 0));
  CHECK(one.ranks == 1);
  for (const Buffer& b : one.buffers) CHECK_FALSE(b.per_rank);
  CHECK(emit_json(one).find("\"ranks\"") == std::string::npos);
}

TEST_CASE("disco: a bad collective in kdflow/1 JSON is one line with its JSON pointer", "[disco]") {
  Dataflow df = sharded_mlp();
  REQUIRE(annotate_collectives(df, attrs_of(df), 2));
  std::string text = emit_json(df);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return t;
  };
  Expected<Dataflow> a = parse_dataflow_json(replace("\"collective\": \"allreduce\"", "\"collective\": \"allscatter\""), "f.json");
  REQUIRE_FALSE(a);
  CHECK(a.error().message.find("/library_calls/0/collective") != std::string::npos);
  Expected<Dataflow> b = parse_dataflow_json(replace("\"reduce_op\": \"sum\"", "\"reduce_op\": \"mean\""), "f.json");
  REQUIRE_FALSE(b);
  CHECK(b.error().message.find("reduce op") != std::string::npos);
  Expected<Dataflow> c = parse_dataflow_json(replace("\"send\": 4", "\"send\": 99"), "f.json");
  REQUIRE_FALSE(c);
  CHECK(c.error().message.find("/library_calls/0/send") != std::string::npos);
}

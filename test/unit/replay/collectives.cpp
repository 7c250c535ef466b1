// collectives.cpp — the hub a sharded replay makes its collectives through
// (lib/replay/collectives.h): the reductions, each collective's delivery to every rank, and
// the strictness a fake NCCL owes its users — ranks that disagree on the call, its kind or its
// size stop with one line naming both, a rank that stops releases the others, and a rank that
// never arrives is a time-out, never a hang. Sharded replays of real builds are in test/tvm.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "replay/collectives.h"

using namespace kdflow;

namespace {

std::string floats(std::vector<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}
std::vector<float> as_floats(const std::string& s) {
  std::vector<float> v(s.size() / 4);
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

Collective coll(const std::string& kind, int64_t elements, const std::string& op = "") {
  Collective c;
  c.kind = kind;
  c.reduce_op = op;
  c.dtype = "float32";
  c.elements = elements;
  c.bytes = static_cast<uint64_t>(elements) * 4;
  return c;
}

/// Every rank's turn on its own thread; returns each rank's status and what it received.
std::vector<std::pair<Status, std::string>> run(CollectiveHub& hub, std::vector<CollectiveTurn> turns) {
  std::vector<std::pair<Status, std::string>> out(turns.size(), {Status::ok(), std::string()});
  std::vector<std::thread> t;
  for (size_t r = 0; r < turns.size(); ++r)
    t.emplace_back([&, r] { out[r].first = hub.exchange(static_cast<int>(r), turns[r], &out[r].second); });
  for (std::thread& x : t) x.join();
  return out;
}

CollectiveTurn turn(int call, const Collective* c, std::string send, uint64_t recv) {
  CollectiveTurn t;
  t.call = call;
  t.what = c;
  t.send = std::move(send);
  t.recv_bytes = recv;
  return t;
}

}  // namespace

TEST_CASE("collectives: reductions of every op, in float for float16", "[collectives]") {
  const std::string a = floats({1, -2, 3}), b = floats({4, 5, -6}), c = floats({0.5f, 1, 2});
  std::string out;
  REQUIRE(reduce_arrays("float32", "sum", {&a, &b, &c}, &out));
  CHECK(as_floats(out) == std::vector<float>{5.5f, 4, -1});
  REQUIRE(reduce_arrays("float32", "prod", {&a, &b, &c}, &out));
  CHECK(as_floats(out) == std::vector<float>{2, -10, -36});
  REQUIRE(reduce_arrays("float32", "min", {&a, &b, &c}, &out));
  CHECK(as_floats(out) == std::vector<float>{0.5f, -2, -6});
  REQUIRE(reduce_arrays("float32", "max", {&a, &b, &c}, &out));
  CHECK(as_floats(out) == std::vector<float>{4, 5, 3});
  REQUIRE(reduce_arrays("float32", "avg", {&a, &b}, &out));
  CHECK(as_floats(out) == std::vector<float>{2.5f, 1.5f, -1.5f});
  // float16: 1.5 (0x3E00) + 2.25 (0x4080) = 3.75 (0x4380); 65504 + 65504 overflows to inf.
  const uint16_t h1[] = {0x3E00, 0x7BFF}, h2[] = {0x4080, 0x7BFF};
  std::string x(reinterpret_cast<const char*>(h1), 4), y(reinterpret_cast<const char*>(h2), 4);
  REQUIRE(reduce_arrays("float16", "sum", {&x, &y}, &out));
  uint16_t got[2];
  std::memcpy(got, out.data(), 4);
  CHECK(got[0] == 0x4380);
  CHECK(got[1] == 0x7C00);
  int32_t i1[] = {7, -3}, i2[] = {-2, 10};
  std::string p(reinterpret_cast<const char*>(i1), 8), q(reinterpret_cast<const char*>(i2), 8);
  REQUIRE(reduce_arrays("int32", "max", {&p, &q}, &out));
  int32_t gi[2];
  std::memcpy(gi, out.data(), 8);
  CHECK(gi[0] == 7);
  CHECK(gi[1] == 10);
  CHECK_FALSE(reduce_arrays("float8_e4m3fn", "sum", {&p, &q}, &out));
}

TEST_CASE("collectives: allreduce, allgather, broadcast, scatter and gather deliver what NCCL would", "[collectives]") {
  CollectiveHub hub(3, 10);
  const Collective ar = coll("allreduce", 2, "sum");
  auto r = run(hub, {turn(0, &ar, floats({1, 2}), 8), turn(0, &ar, floats({10, 20}), 8),
                     turn(0, &ar, floats({100, 200}), 8)});
  for (auto& [st, got] : r) {
    REQUIRE(st);
    CHECK(as_floats(got) == std::vector<float>{111, 222});
  }
  const Collective ag = coll("allgather", 1);
  r = run(hub, {turn(1, &ag, floats({1}), 12), turn(1, &ag, floats({2}), 12), turn(1, &ag, floats({3}), 12)});
  for (auto& [st, got] : r) {
    REQUIRE(st);
    CHECK(as_floats(got) == std::vector<float>{1, 2, 3});
  }
  const Collective bc = coll("broadcast_from_worker0", 2);
  r = run(hub, {turn(2, &bc, floats({7, 8}), 8), turn(2, &bc, floats({0, 0}), 8), turn(2, &bc, floats({9, 9}), 8)});
  for (auto& [st, got] : r) {
    REQUIRE(st);
    CHECK(as_floats(got) == std::vector<float>{7, 8});
  }
  const Collective sc = coll("scatter_from_worker0", 3);
  r = run(hub, {turn(3, &sc, floats({1, 2, 3}), 4), turn(3, &sc, floats({0, 0, 0}), 4), turn(3, &sc, floats({0, 0, 0}), 4)});
  for (size_t k = 0; k < 3; ++k) {
    REQUIRE(r[k].first);
    CHECK(as_floats(r[k].second) == std::vector<float>{static_cast<float>(k + 1)});
  }
  const Collective ga = coll("gather_to_worker0", 1);
  r = run(hub, {turn(4, &ga, floats({4}), 12), turn(4, &ga, floats({5}), 0), turn(4, &ga, floats({6}), 0)});
  for (auto& x : r) REQUIRE(x.first);
  CHECK(as_floats(r[0].second) == std::vector<float>{4, 5, 6});
  CHECK(r[1].second.empty());
  CHECK(hub.completed() == 5);
}

TEST_CASE("collectives: ranks that disagree stop together with one line naming both", "[collectives]") {
  {
    CollectiveHub hub(2, 10);
    const Collective a = coll("allreduce", 2, "sum"), b = coll("allreduce", 2, "sum");
    auto r = run(hub, {turn(0, &a, floats({1, 2}), 8), turn(1, &b, floats({1, 2}), 8)});
    for (auto& x : r) {
      REQUIRE_FALSE(x.first);
      CHECK(x.first.error().message.find("rank 0 reached library call 0") != std::string::npos);
      CHECK(x.first.error().message.find("rank 1 reached library call 1") != std::string::npos);
    }
  }
  {
    // The same call, another size: a skipped slice or a wrong shard.
    CollectiveHub hub(2, 10);
    const Collective a = coll("allreduce", 2, "sum"), b = coll("allreduce", 3, "sum");
    auto r = run(hub, {turn(0, &a, floats({1, 2}), 8), turn(0, &b, floats({1, 2, 3}), 12)});
    for (auto& x : r) REQUIRE_FALSE(x.first);
  }
  {
    // A recv that does not hold what is delivered.
    CollectiveHub hub(2, 10);
    const Collective g = coll("allgather", 1);
    auto r = run(hub, {turn(0, &g, floats({1}), 8), turn(0, &g, floats({2}), 4)});
    for (auto& x : r) {
      REQUIRE_FALSE(x.first);
      CHECK(x.first.error().message.find("rank 1 receives into 4 bytes") != std::string::npos);
    }
  }
}

TEST_CASE("collectives: a rank that stops releases the others, one that never comes is a time-out", "[collectives]") {
  {
    CollectiveHub hub(2, 30);
    const Collective a = coll("allreduce", 1, "sum");
    std::string got;
    std::thread t([&] { hub.abort(1, "kernel 3 failed"); });
    Status st = hub.exchange(0, turn(0, &a, floats({1}), 4), &got);
    t.join();
    REQUIRE_FALSE(st);
    CHECK(st.error().message == "rank 1 stopped: kernel 3 failed");
  }
  {
    CollectiveHub hub(2, 0.2);
    const Collective a = coll("allreduce", 1, "sum");
    std::string got;
    Status st = hub.exchange(0, turn(5, &a, floats({1}), 4), &got);
    REQUIRE_FALSE(st);
    CHECK(st.error().message.find("rank 0 waited 0.2 s (--time-limit) at library call 5") != std::string::npos);
  }
}

// The exact search of the footprint stage (lib/footprint/footprint_search.cpp): its minimum
// and maximum equal a brute-force enumeration on random quasi-affine systems of the shape
// TVM's tuned kernels produce (floor quotients and remainders by constants of launch
// variables, guards, equalities); a system it cannot decide within its budget is GiveUp,
// never a wrong answer; the DNF limit. The systems are generated here (not TVM output);
// the real kernels are covered by the golden files (resnet18_tuned), whose footprints are
// unchanged from the isl-only computation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <random>

#include "analysis/footprint/footprint_search.h"
#include "unit/analysis/affine_test_util.h"

using namespace kdflow;
using test::floor_div;
using test::lin;
using namespace kdflow::detail;

namespace {



}  // namespace

TEST_CASE("footprint search: min and max equal brute force on random quotient systems", "[footprint][search]") {
  std::mt19937_64 rng(20261125);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int found = 0, empty = 0;
  for (int round = 0; round < 300; ++round) {
    // Free variables 0..nf-1 in [0, r_i]; then quotients q = floor((Σ a·x + b) / c) and
    // remainders, each a new variable defined by constraints only (as footprint_affine does).
    const int nf = static_cast<int>(pick(1, 4));
    std::vector<int64_t> range(nf);
    std::vector<VarBounds> bounds;
    for (int i = 0; i < nf; ++i) {
      range[i] = pick(0, 20);
      bounds.push_back({0, range[i]});
    }
    struct Quot {
      LinExpr arg;
      int64_t c;
    };
    std::vector<Quot> quots;
    std::vector<LinConstraint> cons;
    const int nq = static_cast<int>(pick(0, 3));
    for (int j = 0; j < nq; ++j) {
      const int q = nf + j;
      std::vector<std::pair<int, int64_t>> t;
      for (int i = 0; i < nf + j; ++i)
        if (pick(0, 1)) t.push_back({i, pick(-3, 5)});
      LinExpr a = lin(pick(0, 7), t);
      const int64_t c = pick(2, 9);
      quots.push_back({a, c});
      LinExpr lo = a, hi = a;  // a − c·q ≥ 0, c·q + c − 1 − a ≥ 0
      lo.terms.push_back({q, -c});
      for (auto& x : hi.terms) x.second = -x.second;
      hi.c = c - 1 - a.c;
      hi.terms.push_back({q, c});
      cons.push_back({false, lin(lo.c, lo.terms)});
      cons.push_back({false, lin(hi.c, hi.terms)});
      bounds.push_back({});  // unbounded until propagated
    }
    const int nv = nf + nq;
    // Guards over all variables, sometimes an equality.
    const int ng = static_cast<int>(pick(0, 2));
    for (int g = 0; g < ng; ++g) {
      std::vector<std::pair<int, int64_t>> t;
      for (int i = 0; i < nv; ++i)
        if (pick(0, 2) == 0) t.push_back({i, pick(-4, 4)});
      cons.push_back({pick(0, 5) == 0, lin(pick(-10, 30), t)});
    }
    std::vector<std::pair<int, int64_t>> ot;
    for (int i = 0; i < nv; ++i) ot.push_back({i, pick(-200, 3000)});
    LinExpr objective = lin(pick(-100, 100), ot);

    // Brute force over the free variables; quotients computed.
    std::optional<int64_t> lo, hi;
    std::vector<int64_t> x(nv, 0);
    for (;;) {
      for (int j = 0; j < nq; ++j) {
        int64_t s = quots[j].arg.c;
        for (const auto& [v, k] : quots[j].arg.terms) s += k * x[v];
        x[nf + j] = floor_div(s, quots[j].c);
      }
      bool ok = true;
      for (const LinConstraint& k : cons) {
        int64_t s = k.e.c;
        for (const auto& [v, a] : k.e.terms) s += a * x[v];
        ok = ok && (k.eq ? s == 0 : s >= 0);
      }
      if (ok) {
        int64_t s = objective.c;
        for (const auto& [v, a] : objective.terms) s += a * x[v];
        lo = lo ? std::min(*lo, s) : s;
        hi = hi ? std::max(*hi, s) : s;
      }
      int i = 0;
      for (; i < nf; ++i) {
        if (x[i] < range[i]) {
          ++x[i];
          break;
        }
        x[i] = 0;
      }
      if (i == nf) break;
    }
    SearchRange r = search_range(cons, bounds, objective, 20000);
    INFO("round " << round);
    REQUIRE(r.kind != SearchRange::Kind::GiveUp);
    if (!lo) {
      CHECK(r.kind == SearchRange::Kind::Empty);
      ++empty;
    } else {
      REQUIRE(r.kind == SearchRange::Kind::Found);
      CHECK(r.lo == *lo);
      CHECK(r.hi == *hi);
      ++found;
    }
  }
  CHECK(found > 100);  // the generator makes both kinds
  CHECK(empty > 5);
}

TEST_CASE("footprint search: a system it cannot refute within its budget is GiveUp, not an answer",
          "[footprint][search]") {
  // 2x − 2y − 1 = 0 has no integer point; interval propagation cannot see parity, so the
  // search runs out of nodes on a wide box rather than claim a range.
  std::vector<LinConstraint> cons{{true, lin(-1, {{0, 2}, {1, -2}})}};
  std::vector<VarBounds> bounds{{0, int64_t(1) << 40}, {0, int64_t(1) << 40}};
  SearchRange r = search_range(cons, bounds, lin(0, {{0, 4}}), 2000);
  CHECK(r.kind != SearchRange::Kind::Found);
  // An unbounded variable: GiveUp (isl decides, and says unbounded).
  SearchRange u = search_range({{false, lin(0, {{0, 1}})}}, {{}}, lin(0, {{0, 1}}), 2000);
  CHECK(u.kind == SearchRange::Kind::GiveUp);
  // A box: the corners, at once.
  SearchRange b = search_range({}, {{0, 9}, {0, 4}}, lin(3, {{0, 4}, {1, -100}}), 2000);
  REQUIRE(b.kind == SearchRange::Kind::Found);
  CHECK(b.lo == 3 - 400);
  CHECK(b.hi == 3 + 36);
}

TEST_CASE("footprint search: disjunctive normal form and its limit", "[footprint][search]") {
  auto ge = [](int v, int64_t c) {
    AffCond k;
    k.op = AffCond::Op::Ge0;
    k.e = lin(c, {{v, 1}});
    return k;
  };
  auto node = [](AffCond::Op op, std::vector<AffCond> kids) {
    AffCond k;
    k.op = op;
    k.kids = std::move(kids);
    return k;
  };
  // (a ∨ b) ∧ (c ∨ d) ∧ e: four conjunctions of three constraints.
  AffCond c = node(AffCond::Op::And, {node(AffCond::Op::Or, {ge(0, 1), ge(1, 2)}),
                                      node(AffCond::Op::Or, {ge(2, 3), ge(3, 4)}), ge(4, 5)});
  std::vector<std::vector<LinConstraint>> dnf;
  REQUIRE(to_dnf(c, 64, &dnf));
  REQUIRE(dnf.size() == 4);
  for (const auto& conj : dnf) CHECK(conj.size() == 3);
  CHECK_FALSE(to_dnf(c, 3, &dnf));
  AffCond f;
  f.op = AffCond::Op::False;
  REQUIRE(to_dnf(node(AffCond::Op::And, {c, f}), 64, &dnf));
  CHECK(dnf.empty());
}

TEST_CASE("footprint search: a remainder through a two-valued quotient takes a few nodes, exactly",
          "[footprint][search]") {
  // TVM 0.19's untuned Relay kernels index through a grid-stride remainder: r = (262144·i +
  // 1024·b + t) mod 301056, its quotient q in {0, 1}, under a concatenation's guards on r and on
  // m = (256·i + b) mod 294 (this system is one of Relay DenseNet-121's, as extract built it). Bisecting r never let propagation prove a half
  // empty: the search spent 50,000 nodes and gave up. With q split first it finds the exact
  // range in a few dozen nodes; the brute force over (i, b, t) says which.
  // Variables: 0 i (loop), 1 b (blockIdx.x), 2 b/2, 3 t (threadIdx.x), 4 q, 5 r, 6 and 7 the
  // quotient and remainder by 294.
  std::vector<LinConstraint> cons{
      {false, lin(0, {{0, 1}})},           {false, lin(1, {{0, -1}})},
      {false, lin(146, {{0, -128}, {2, -1}})},
      {false, lin(275967, {{5, -1}})},     {false, lin(-125440, {{5, 1}})},
      {false, lin(146, {{7, -1}})},
      {false, lin(0, {{1, 1}, {2, -2}})},  {false, lin(1, {{1, -1}, {2, 2}})},
      {true, lin(0, {{0, -262144}, {1, -1024}, {3, -1}, {4, 301056}, {5, 1}})},
      {false, lin(0, {{0, 262144}, {1, 1024}, {3, 1}, {4, -301056}})},
      {false, lin(301055, {{0, -262144}, {1, -1024}, {3, -1}, {4, 301056}})},
      {true, lin(0, {{0, -256}, {1, -1}, {6, 294}, {7, 1}})},
      {false, lin(0, {{0, 256}, {1, 1}, {6, -294}})},
      {false, lin(293, {{0, -256}, {1, -1}, {6, 294}})},
      {false, lin(0, {{1, 1}})},           {false, lin(255, {{1, -1}})},
      {false, lin(0, {{3, 1}})},           {false, lin(1023, {{3, -1}})},
  };
  const LinExpr objective = lin(-501760, {{5, 4}});
  SearchRange r = search_range(cons, {}, objective, 2000);
  REQUIRE(r.kind == SearchRange::Kind::Found);
  CHECK(r.nodes < 20000);  // constraint evaluations (nodes are fewer)
  std::optional<int64_t> lo, hi;
  for (int64_t i = 0; i <= 1; ++i)
    for (int64_t b = 0; b <= 255; ++b) {
      if (128 * i + b / 2 > 146 || (256 * i + b) % 294 > 146) continue;
      for (int64_t t = 0; t <= 1023; ++t) {
        const int64_t rem = (262144 * i + 1024 * b + t) % 301056;
        if (rem > 275967 || rem < 125440) continue;
        const int64_t v = 4 * rem - 501760;
        lo = lo ? std::min(*lo, v) : v;
        hi = hi ? std::max(*hi, v) : v;
      }
    }
  REQUIRE(lo);
  CHECK(r.lo == *lo);
  CHECK(r.hi == *hi);
}

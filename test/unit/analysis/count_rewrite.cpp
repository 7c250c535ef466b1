// The counting stage's rewrites (lib/analysis/footprint/count_rewrite.cpp) keep the number
// of points: count_domain_points equals a brute-force enumeration on random domains of the
// shape TVM's element-wise, pooling and padded kernels produce (a vectorised thread index,
// mixed-radix digits of the flat index written with TVM's reduced coefficients — (B·b + t)
// mod d as ((B mod d)·b + t) mod d —, padding guards over loop counters, a bound on the flat
// index). The domains are generated here (not TVM output); the real kernels are covered by
// the golden files, whose counts did not change when the rewrites came in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <random>

#include "kdflow/analysis/kernel_ops.h"
#include "unit/analysis/affine_test_util.h"

using namespace kdflow;
using test::floor_div;
using test::lin;

namespace {

AffCond cond(AffCond::Op op, LinExpr e) {
  AffCond a;
  a.op = op;
  a.e = std::move(e);
  return a;
}
int64_t eval(const LinExpr& e, const std::vector<int64_t>& x) {
  int64_t v = e.c;
  for (const auto& [i, k] : e.terms) v += k * x[static_cast<size_t>(i)];
  return v;
}
bool holds(const AffCond& c, const std::vector<int64_t>& x) {
  switch (c.op) {
    case AffCond::Op::True: return true;
    case AffCond::Op::False: return false;
    case AffCond::Op::Ge0: return eval(c.e, x) >= 0;
    case AffCond::Op::Eq0: return eval(c.e, x) == 0;
    case AffCond::Op::And:
      return std::all_of(c.kids.begin(), c.kids.end(), [&](const AffCond& k) { return holds(k, x); });
    case AffCond::Op::Or:
      return std::any_of(c.kids.begin(), c.kids.end(), [&](const AffCond& k) { return holds(k, x); });
  }
  return false;
}

/// A random domain as the affine model writes it, with the definitions of its pinned
/// variables (in creation order) to enumerate it by brute force.
struct Case {
  std::vector<AffVar> vars;
  AffCond domain;
  struct Def {
    int var;
    LinExpr num;
    int64_t d;  ///< 0: var = num (an equality); −1: var = min(num, num2); else var = ⌊num / d⌋
    LinExpr num2;
  };
  std::vector<Def> defs;
  std::vector<std::pair<int, int64_t>> loops;  ///< loop counter, trip count
  LaunchShape launch;
};

Case make_case(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Case c;
  c.domain.op = AffCond::Op::And;
  const int64_t B = std::vector<int64_t>{16, 32, 64, 128}[static_cast<size_t>(pick(0, 3))];
  const int64_t G = pick(1, 40);
  c.launch.grid = {G, 1, 1};
  c.launch.block = {B, 1, 1};
  c.vars = {{AffVar::Kind::BlockIdx, 0}, {AffVar::Kind::ThreadIdx, 0}};
  auto var = [&] {
    c.vars.push_back({AffVar::Kind::Local, 0});
    return static_cast<int>(c.vars.size() - 1);
  };
  auto add = [&](AffCond a) { c.domain.kids.push_back(std::move(a)); };
  auto pair = [&](int q, const LinExpr& num, int64_t d) {  // 0 ≤ num − d·q ≤ d − 1
    LinExpr lo = num;
    lo.terms.push_back({q, -d});
    std::sort(lo.terms.begin(), lo.terms.end());
    LinExpr hi = lin(d - 1 - num.c, {{q, d}});
    for (const auto& [v, k] : num.terms) hi.terms.push_back({v, -k});
    std::sort(hi.terms.begin(), hi.terms.end());
    add(cond(AffCond::Op::Ge0, lo));
    add(cond(AffCond::Op::Ge0, hi));
  };
  auto quotient = [&](const LinExpr& num, int64_t d) {
    int q = var();
    pair(q, num, d);
    c.defs.push_back({q, num, d, {}});
    return q;
  };
  auto remainder = [&](const LinExpr& num, int q, int64_t d) {  // r = num − d·q, an equality
    int r = var();
    LinExpr e = num;
    e.terms.push_back({q, -d});
    e.terms.push_back({r, -1});
    std::sort(e.terms.begin(), e.terms.end());
    add(cond(AffCond::Op::Eq0, e));
    LinExpr def = num;
    def.terms.push_back({q, -d});
    std::sort(def.terms.begin(), def.terms.end());
    c.defs.push_back({r, def, 0, {}});
    return r;
  };
  // Loop counters (a pooling window).
  for (int l = 0; l < 2; ++l) {
    int v = var();
    int64_t n = pick(1, 3);
    add(cond(AffCond::Op::Ge0, lin(0, {{v, 1}})));
    add(cond(AffCond::Op::Ge0, lin(n - 1, {{v, -1}})));
    c.loops.push_back({v, n});
  }
  // The element index: c·b + t, t = tx or tx / w (vectorised).
  const int64_t w = std::vector<int64_t>{1, 1, 2, 4}[static_cast<size_t>(pick(0, 3))];
  int t = 1;
  if (w > 1) t = quotient(lin(0, {{1, 1}}), w);
  const int64_t cb = B / w;
  auto flat = [&](int64_t mod) {  // TVM's coefficient of b: reduced modulo `mod` half the time
    int64_t a = mod > 0 && pick(0, 1) ? cb % mod : cb;
    return lin(0, {{0, a}, {t, 1}});
  };
  // Mixed-radix digits: d0 = e mod W, d1 = (e mod W·H) / W, d2 = e / (W·H).
  const int64_t W = pick(2, 9), H = pick(2, 9);
  int q0 = quotient(flat(W), W);
  int d0 = remainder(c.defs.back().num, q0, W);
  LinExpr n1 = flat(W * H);
  int q1 = quotient(n1, W * H);
  int s1 = remainder(n1, q1, W * H);
  int d1 = quotient(lin(0, {{s1, 1}}), W);
  int d2 = quotient(flat(0), W * H);
  // Padding guards: 1 ≤ 2·d0 + l0 (≤ 2W − 1), 2·d1 + l1 ≤ 2H − 1.
  add(cond(AffCond::Op::Ge0, lin(-1, {{d0, 2}, {c.loops[0].first, 1}})));
  if (pick(0, 1)) add(cond(AffCond::Op::Ge0, lin(2 * W - 1, {{d0, -2}, {c.loops[0].first, -1}})));
  add(cond(AffCond::Op::Ge0, lin(2 * H - 1, {{d1, -2}, {c.loops[1].first, -1}})));
  // A bound on the flat index (some threads idle), on d2 or on the element index itself.
  if (pick(0, 1)) add(cond(AffCond::Op::Ge0, lin(pick(0, G * cb / (W * H) + 1), {{d2, -1}})));
  else add(cond(AffCond::Op::Ge0, lin(pick(0, G * cb), {{0, -cb}, {t, -1}})));
  // Sometimes a loop up to a min (TVM's min(a, b): two disjoint branches, each pinning m):
  // 0 ≤ j < m = min(W, 1 + d1 + l1).
  if (pick(0, 1)) {
    int m = var(), j = var();
    LinExpr a = lin(W, {}), b = lin(1, {{d1, 1}, {c.loops[1].first, 1}});
    AffCond o;
    o.op = AffCond::Op::Or;
    AffCond first, second;
    first.op = second.op = AffCond::Op::And;
    first.kids = {cond(AffCond::Op::Ge0, lin(1 - W, {{d1, 1}, {c.loops[1].first, 1}})),  // b − a ≥ 0
                  cond(AffCond::Op::Eq0, lin(-W, {{m, 1}}))};                            // m = a
    second.kids = {cond(AffCond::Op::Ge0, lin(W - 2, {{d1, -1}, {c.loops[1].first, -1}})),  // a − b − 1 ≥ 0
                   cond(AffCond::Op::Eq0, lin(-1, {{m, 1}, {d1, -1}, {c.loops[1].first, -1}}))};  // m = b
    o.kids = {first, second};
    add(std::move(o));
    c.defs.push_back({m, a, -1, b});
    add(cond(AffCond::Op::Ge0, lin(0, {{j, 1}})));
    add(cond(AffCond::Op::Ge0, lin(-1, {{m, 1}, {j, -1}})));
    c.loops.push_back({j, W + H + 2});  // enumerated past any m: the domain bounds it
  }
  // Sometimes an "or" (a select's condition) over two digits.
  if (pick(0, 3) == 0) {
    AffCond o;
    o.op = AffCond::Op::Or;
    o.kids.push_back(cond(AffCond::Op::Ge0, lin(-1, {{d0, 1}})));
    o.kids.push_back(cond(AffCond::Op::Ge0, lin(-1, {{d1, 1}})));
    add(std::move(o));
  }
  return c;
}

uint64_t brute_force(const Case& c) {
  uint64_t n = 0;
  std::vector<int64_t> x(c.vars.size(), 0);
  std::function<void(size_t)> loop = [&](size_t i) {
    if (i < c.loops.size()) {
      for (int64_t v = 0; v < c.loops[i].second + 1; ++v) {  // one past the trip count: the domain must reject it
        x[static_cast<size_t>(c.loops[i].first)] = v;
        loop(i + 1);
      }
      return;
    }
    for (const Case::Def& d : c.defs) {
      int64_t v = eval(d.num, x);
      x[static_cast<size_t>(d.var)] = d.d == 0 ? v : d.d < 0 ? std::min(v, eval(d.num2, x)) : floor_div(v, d.d);
    }
    if (holds(c.domain, x)) ++n;
  };
  for (int64_t b = 0; b < c.launch.grid[0]; ++b)
    for (int64_t t = 0; t < c.launch.block[0]; ++t) {
      x[0] = b, x[1] = t;
      loop(0);
    }
  return n;
}

}  // namespace

TEST_CASE("kernel ops: counting with rewrites equals brute force on TVM-shaped index domains", "[kernel_ops]") {
  std::mt19937 rng(20261125);
  int counted = 0;
  for (int i = 0; i < 300; ++i) {
    Case c = make_case(rng);
    INFO("case " << i);
    std::string why;
    std::optional<uint64_t> n = count_domain_points(c.domain, c.vars, c.launch, 4'000'000, &why);
    INFO(why);
    REQUIRE(n);
    CHECK(*n == brute_force(c));
    counted += *n > 0;
  }
  CHECK(counted > 200);  // the generator makes mostly non-empty domains
}

TEST_CASE("kernel ops: the rewrites make a pooling domain cheap to count", "[kernel_ops]") {
  // resnet18's max pool's padded window (the shape of the real kernel; written here):
  // 196 × 1024 threads, 8 per element, 3 × 3 window; threads index (128·b + t/8) mod 392
  // and (16·b + t) mod 56. Counted point by point this is past 4M steps; rewritten, it
  // fits a budget of 10,000.
  std::vector<AffVar> vars = {{AffVar::Kind::Local, 0},    {AffVar::Kind::Local, 0},    {AffVar::Kind::BlockIdx, 0},
                              {AffVar::Kind::ThreadIdx, 0}, {AffVar::Kind::Local, 0},    {AffVar::Kind::Local, 0},
                              {AffVar::Kind::Local, 0},    {AffVar::Kind::Local, 0},    {AffVar::Kind::Local, 0},
                              {AffVar::Kind::Local, 0}};
  auto ge = [](int64_t c, std::vector<std::pair<int, int64_t>> t) { return cond(AffCond::Op::Ge0, lin(c, std::move(t))); };
  auto eq = [](int64_t c, std::vector<std::pair<int, int64_t>> t) { return cond(AffCond::Op::Eq0, lin(c, std::move(t))); };
  AffCond d;
  d.op = AffCond::Op::And;
  d.kids = {ge(0, {{0, 1}}), ge(2, {{0, -1}}), ge(0, {{1, 1}}), ge(2, {{1, -1}}),
            ge(-1, {{0, 1}, {7, 2}}), ge(-1, {{1, 1}, {9, 2}}),                          // padding guards
            ge(0, {{6, 1}, {7, -7}}), ge(6, {{6, -1}, {7, 7}}),                           // v7 = v6 / 7
            eq(0, {{2, -128}, {4, -1}, {5, 392}, {6, 1}}),                                // v6 = (128b + v4) mod 392
            ge(0, {{3, 1}, {4, -8}}), ge(7, {{3, -1}, {4, 8}}),                           // v4 = t / 8
            ge(0, {{2, 128}, {4, 1}, {5, -392}}), ge(391, {{2, -128}, {4, -1}, {5, 392}}),  // v5
            eq(0, {{2, -16}, {3, -1}, {8, 56}, {9, 1}}),                                  // v9 = (16b + t) mod 56
            ge(0, {{2, 16}, {3, 1}, {8, -56}}), ge(55, {{2, -16}, {3, -1}, {8, 56}})};    // v8
  LaunchShape l;
  l.grid = {196, 1, 1};
  l.block = {1024, 1, 1};
  std::string why;
  std::optional<uint64_t> n = count_domain_points(d, vars, l, 10'000, &why);
  INFO(why);
  REQUIRE(n);
  // 64 channels × 56 × 56 outputs, a thread each; per output the window's rows and columns
  // that pass the guards: 2 at the first row (column), 3 elsewhere → (2 + 55·3)² = 167².
  CHECK(*n == 64u * 167u * 167u);
}

TEST_CASE("kernel ops: a padded im2col load's domain is counted in few steps", "[kernel_ops]") {
  // The shape of a TVM 0.27 Inception block's shared-memory load (fused_conv2d3_add3_relu2,
  // 35 × 35 × 288, padded; written here from the counting problem the rewrites left): a
  // lane digit under the thread index (x7 ∈ [0, 1] read as 2·x1 + x7), a vector digit
  // (x6 ∈ [0, 3] read as 4·x2 + x6), and quotients by 35, 3 and 9 of sums of them. Counted
  // narrowest box first this took 618,203 steps; with the digits merged and the pinned
  // quotients placed right after what pins them, it fits 10,000.
  // x0 block, x1 thread, x2 loop, x3 = ⌊R/35⌋, x4 = ⌊(16x2 + 4x6)/3⌋, x5 = ⌊(16x2 + 4x6)/9⌋.
  std::vector<AffVar> vars(8, {AffVar::Kind::Local, 0});
  auto ge = [](int64_t c, std::vector<std::pair<int, int64_t>> t) { return cond(AffCond::Op::Ge0, lin(c, std::move(t))); };
  AffCond d;
  d.op = AffCond::Op::And;
  const int64_t hi[8] = {38, 229, 26, 35, 142, 47, 3, 1};
  for (int v = 0; v < 8; ++v) {
    d.kids.push_back(ge(0, {{v, 1}}));
    d.kids.push_back(ge(hi[v], {{v, -1}}));
  }
  const std::vector<std::pair<int, int64_t>> R = {{0, 32}, {1, 2}, {2, -16}, {6, -4}, {7, 1}};
  auto with = [](std::vector<std::pair<int, int64_t>> t, int64_t s, std::vector<std::pair<int, int64_t>> more) {
    for (auto& p : t) p.second *= s;
    t.insert(t.end(), more.begin(), more.end());
    return t;
  };
  d.kids.push_back(ge(1224, with(R, -1, {})));
  d.kids.push_back(ge(-1, {{3, 1}, {4, 1}, {5, -3}}));
  d.kids.push_back(ge(35, {{3, -1}, {4, -1}, {5, 3}}));
  d.kids.push_back(ge(0, with(R, 1, {{3, -35}})));
  d.kids.push_back(ge(34, with(R, -1, {{3, 35}})));
  d.kids.push_back(ge(0, {{2, 16}, {4, -3}, {6, 4}}));
  d.kids.push_back(ge(2, {{2, -16}, {4, 3}, {6, -4}}));
  d.kids.push_back(ge(0, {{2, 16}, {5, -9}, {6, 4}}));
  d.kids.push_back(ge(8, {{2, -16}, {5, 9}, {6, -4}}));
  d.kids.push_back(ge(0, {{1, 1}, {2, -8}, {6, -2}}));
  d.kids.push_back(ge(15, {{1, -1}, {2, 8}, {6, 2}}));
  d.kids.push_back(ge(-1, {{0, 32}, {1, 2}, {3, -35}, {4, -3}, {7, 1}}));
  d.kids.push_back(ge(35, {{0, -32}, {1, -2}, {3, 35}, {4, 3}, {7, -1}}));
  for (AffCond& k : d.kids) std::sort(k.e.terms.begin(), k.e.terms.end());
  // Brute force over the free variables; the quotients follow from them.
  uint64_t expect = 0;
  std::vector<int64_t> x(8);
  for (x[0] = 0; x[0] <= hi[0]; ++x[0])
    for (x[1] = 0; x[1] <= hi[1]; ++x[1])
      for (x[2] = 0; x[2] <= hi[2]; ++x[2])
        for (x[6] = 0; x[6] <= hi[6]; ++x[6])
          for (x[7] = 0; x[7] <= hi[7]; ++x[7]) {
            x[3] = floor_div(32 * x[0] + 2 * x[1] - 16 * x[2] - 4 * x[6] + x[7], 35);
            x[4] = floor_div(16 * x[2] + 4 * x[6], 3);
            x[5] = floor_div(16 * x[2] + 4 * x[6], 9);
            expect += holds(d, x);
          }
  REQUIRE(expect > 0);
  LaunchShape l;
  l.grid = l.block = {1, 1, 1};
  std::string why;
  std::optional<uint64_t> n = count_domain_points(d, vars, l, 10'000, &why);
  INFO(why);
  REQUIRE(n);
  CHECK(*n == expect);
}

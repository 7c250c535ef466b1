// kernel_ops_count.cpp — the counting stage of the operation count (kernel_ops.h): for one
// launch, the number of points of each operation group's domain (threads × loop trips that
// run it), times the group's operations per point.
//
// Counting: the launch's fixed values (blockDim, gridDim, scalar arguments) are substituted;
// a launch dimension no constraint mentions multiplies by its extent. The conjunction is
// then rewritten into one with the same number of points (count_rewrite.h: substitutions
// that invert the quotients and remainders of the thread index, drop pinned quotients and
// constraints their variables' boxes imply), split into independent components (variables
// that share no constraint), and each component is counted exactly by nested enumeration,
// narrowest box first: each level's values form a union of intervals computed from the
// constraints that end there, the innermost level is counted as interval lengths, not point
// by point. A level whose variable no deeper constraint reads multiplies the count below by
// its number of values (one step, not one per value); plain inequalities narrow one interval
// without allocating. Where the rewrites cannot finish (a coefficient past 2^50, a variable
// left without bounds) the original conjunction is enumerated in the model's variable order
// (the model creates a variable after those its bounds and definitions use, so every
// constraint is decided at its last variable). Bounded by a step budget: past it, the count
// is unknown ("too costly to count"), never a guess. isl's own counting (isl_set_count_val)
// enumerates every point, which is what the rewrites and interval levels avoid; without
// barvinok in Debian's isl there is no symbolic count to call.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "kdflow/analysis/kernel_ops.h"
#include "count_rewrite.h"
#include "footprint_search.h"

namespace kdflow {

namespace {

constexpr int64_t kInf = int64_t(1) << 62;

using Intervals = std::vector<std::pair<int64_t, int64_t>>;  ///< sorted, disjoint, closed

Intervals intersect(const Intervals& a, const Intervals& b) {
  Intervals out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) out.push_back({lo, hi});
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return out;
}
Intervals unite(const Intervals& a, const Intervals& b) {
  Intervals all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  Intervals out;
  for (const auto& r : all) {
    if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
    else out.push_back(r);
  }
  return out;
}

int64_t clamp(__int128 v) { return v > kInf ? kInf : v < -kInf ? -kInf : static_cast<int64_t>(v); }
__int128 floor_div(__int128 a, __int128 b) {  // b > 0
  __int128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// The domain with the launch's fixed values substituted, as a counting problem.
class Counter {
 public:
  Counter(const std::vector<AffVar>& vars, const LaunchShape& launch, uint64_t* steps)
      : vars_(vars), launch_(launch), steps_(steps) {}

  std::optional<uint64_t> count(const AffCond& domain, std::string* why) {
    std::set<int> used;
    collect(domain, used);
    for (int v : used)
      if (v < 0 || static_cast<size_t>(v) >= vars_.size()) return fail(why, reject::kUnsupported);
    // Fixed values.
    for (int v : used) {
      const AffVar& av = vars_[static_cast<size_t>(v)];
      int d = av.index;
      if (av.kind != AffVar::Kind::Param && (d < 0 || d > 2)) return fail(why, reject::kUnsupported);
      switch (av.kind) {
        case AffVar::Kind::BlockDim: fixed_[v] = launch_.block[d]; break;
        case AffVar::Kind::GridDim: fixed_[v] = launch_.grid[d]; break;
        case AffVar::Kind::Param:
          if (d < 0 || static_cast<size_t>(d) >= launch_.scalars.size() || !launch_.scalars[d])
            return fail(why, reject::kScalarArgument);
          fixed_[v] = *launch_.scalars[d];
          break;
        default: break;
      }
    }
    AffCond dom = substitute(domain);
    // Launch dimensions the domain does not mention: every value runs.
    uint64_t total = 1;
    for (int d = 0; d < 3; ++d) {
      bool bx = false, tx = false;
      for (int v : used) {
        const AffVar& av = vars_[static_cast<size_t>(v)];
        bx |= av.kind == AffVar::Kind::BlockIdx && av.index == d;
        tx |= av.kind == AffVar::Kind::ThreadIdx && av.index == d;
      }
      if (!bx) total = mul(total, static_cast<uint64_t>(std::max<int64_t>(launch_.grid[d], 0)));
      if (!tx) total = mul(total, static_cast<uint64_t>(std::max<int64_t>(launch_.block[d], 0)));
    }
    // Conjuncts, and components of the variables they link.
    std::vector<const AffCond*> conj;
    std::function<void(const AffCond&)> flatten = [&](const AffCond& c) {
      if (c.op == AffCond::Op::And)
        for (const AffCond& k : c.kids) flatten(k);
      else conj.push_back(&c);
    };
    flatten(dom);
    std::set<int> free;
    for (int v : used)
      if (!fixed_.count(v)) free.insert(v);
    // The conjunction as a counting problem; its rewrites (count_rewrite.h) keep the number
    // of points. When they cannot finish (a coefficient past 2^50, a variable left without
    // bounds), the original problem is counted in the model's variable order.
    detail::CountSystem sys;
    sys.box.assign(vars_.size(), {-kInf, kInf});
    sys.live.assign(vars_.size(), 0);
    for (int v : free) {
      sys.live[static_cast<size_t>(v)] = 1;
      sys.box[static_cast<size_t>(v)] = range_of(v).front();
    }
    for (int d = 0; d < 3; ++d) {
      int b = -1, t = -1;
      for (int v : free) {
        const AffVar& av = vars_[static_cast<size_t>(v)];
        if (av.kind == AffVar::Kind::BlockIdx && av.index == d) b = v;
        if (av.kind == AffVar::Kind::ThreadIdx && av.index == d) t = v;
      }
      if (b >= 0 && t >= 0) sys.flat.push_back({b, t, launch_.block[d]});
    }
    for (const AffCond* c : conj) {
      if (c->op == AffCond::Op::False) return 0;
      if (c->op != AffCond::Op::True) sys.atoms.push_back(*c);
    }
    std::optional<uint64_t> n = count_split(sys, why);
    return n ? std::optional<uint64_t>(mul(total, *n)) : std::nullopt;
  }

 private:
  /// The leaves of a branch of an "or" (e ≥ 0, e = 0), or false when it nests another or.
  static bool leaves(const AffCond& c, std::vector<const AffCond*>& out) {
    if (c.op == AffCond::Op::Ge0 || c.op == AffCond::Op::Eq0 || c.op == AffCond::Op::True ||
        c.op == AffCond::Op::False) {
      out.push_back(&c);
      return true;
    }
    if (c.op != AffCond::Op::And) return false;
    for (const AffCond& k : c.kids)
      if (!leaves(k, out)) return false;
    return true;
  }
  /// Whether no point satisfies two branches of `c` (an or): each pair holds e ≥ 0 and
  /// e' ≥ 0 with e + e' a negative constant, as TVM's min, max and select produce.
  static bool disjoint_branches(const AffCond& c) {
    std::vector<std::vector<const AffCond*>> br(c.kids.size());
    for (size_t i = 0; i < c.kids.size(); ++i)
      if (!leaves(c.kids[i], br[i])) return false;
    for (size_t i = 0; i < br.size(); ++i)
      for (size_t j = i + 1; j < br.size(); ++j) {
        bool apart = false;
        for (const AffCond* a : br[i])
          for (const AffCond* b : br[j]) {
            if (apart || a->op != AffCond::Op::Ge0 || b->op != AffCond::Op::Ge0 || a->e.terms.size() != b->e.terms.size())
              continue;
            bool neg = static_cast<__int128>(a->e.c) + b->e.c < 0;
            for (size_t t = 0; t < a->e.terms.size() && neg; ++t)
              neg = a->e.terms[t].first == b->e.terms[t].first && a->e.terms[t].second == -b->e.terms[t].second;
            apart = neg;
          }
        if (!apart) return false;
      }
    return true;
  }

  /// Disjoint ors (TVM's min, max and select: branches whose guards exclude each other)
  /// split the problem: its count is the sum over the choices of one branch per or, each
  /// counted whole (its equalities then pin what the or only bounded). At most 16 choices.
  std::optional<uint64_t> count_split(const detail::CountSystem& sys, std::string* why) {
    std::vector<size_t> ors;
    size_t choices = 1;
    for (size_t i = 0; i < sys.atoms.size() && choices <= 16; ++i)
      if (sys.atoms[i].op == AffCond::Op::Or && disjoint_branches(sys.atoms[i])) {
        ors.push_back(i);
        choices *= sys.atoms[i].kids.size();
      }
    if (ors.empty() || choices > 16) return count_whole(sys, why);
    std::vector<size_t> pick(ors.size(), 0);
    uint64_t sum = 0;
    for (;;) {
      detail::CountSystem sub = sys;
      sub.atoms.clear();
      for (size_t i = 0, o = 0; i < sys.atoms.size(); ++i) {
        if (o < ors.size() && ors[o] == i) {
          std::vector<const AffCond*> ls;
          leaves(sys.atoms[i].kids[pick[o++]], ls);
          for (const AffCond* l : ls) sub.atoms.push_back(*l);
        } else {
          sub.atoms.push_back(sys.atoms[i]);
        }
      }
      std::optional<uint64_t> n = count_whole(sub, why);
      if (!n) return std::nullopt;
      sum = add(sum, *n);
      size_t k = 0;
      for (; k < ors.size(); ++k) {
        if (++pick[k] < sys.atoms[ors[k]].kids.size()) break;
        pick[k] = 0;
      }
      if (k == ors.size()) break;
    }
    return sum;
  }

  /// The points of `sys`: rewritten (count_rewrite.h) and counted narrowest box first, or,
  /// where the rewrites cannot finish, enumerated as it is in the model's variable order.
  std::optional<uint64_t> count_whole(const detail::CountSystem& sys, std::string* why) {
    detail::CountSystem simple = sys;
    if (detail::simplify_for_counting(simple, static_cast<int>(vars_.size()))) {
      if (simple.empty) return 0;
      bool boxed = true;
      for (size_t v = 0; v < simple.box.size(); ++v)
        if (simple.live[v] && (simple.box[v].first <= -kInf || simple.box[v].second >= kInf)) boxed = false;
      if (boxed) return count_system(simple, true, why);
    }
    return count_system(sys, false, why);
  }

  /// The points of `s`: its independent components (variables that share no atom) counted
  /// apart and multiplied; each component enumerated in index order, or narrowest box first.
  std::optional<uint64_t> count_system(const detail::CountSystem& s, bool by_width, std::string* why) {
    box_ = &s.box;
    std::vector<std::set<int>> atom_vars(s.atoms.size());
    std::map<int, int> parent;
    for (size_t v = 0; v < s.live.size(); ++v)
      if (s.live[v]) parent[static_cast<int>(v)] = static_cast<int>(v);
    std::function<int(int)> root = [&](int v) { return parent[v] == v ? v : parent[v] = root(parent[v]); };
    for (size_t i = 0; i < s.atoms.size(); ++i) {
      collect(s.atoms[i], atom_vars[i]);
      for (int v : atom_vars[i]) {
        if (!parent.count(v)) return fail(why, reject::kUnsupported);
        parent[root(v)] = root(*atom_vars[i].begin());
      }
    }
    std::map<int, std::vector<int>> comps;  // root → variables in index order
    for (const auto& [v, p] : parent) comps[root(v)].push_back(v);
    uint64_t total = 1;
    for (auto& [r, order] : comps) {
      (void)r;
      auto width = [&](int v) {
        const auto& b = s.box[static_cast<size_t>(v)];
        return static_cast<__int128>(b.second) - b.first;
      };
      if (by_width) {
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return width(a) < width(b); });
        cheapest_order(s, order);
      }
      std::vector<size_t> pos(s.box.size(), 0);
      for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = i;
      std::vector<std::vector<const AffCond*>> at(order.size());
      for (size_t i = 0; i < s.atoms.size(); ++i) {
        if (atom_vars[i].empty() || root(*atom_vars[i].begin()) != root(order[0])) continue;
        size_t last = 0;
        for (int v : atom_vars[i]) last = std::max(last, pos[static_cast<size_t>(v)]);
        at[last].push_back(&s.atoms[i]);
      }
      // read_below[i]: whether an atom of a level after i reads level i's variable; when
      // none does, every value of it sees the same count below, which is counted once.
      std::vector<char> read_below(order.size(), 0);
      std::set<int> below;
      for (size_t i = order.size(); i-- > 0;) {
        read_below[i] = below.count(order[i]) ? 1 : 0;
        for (const AffCond* c : at[i]) collect(*c, below);
      }
      std::vector<int64_t> assign(s.box.size(), 0);
      std::optional<uint64_t> n = level(order, at, read_below, 0, assign, why);
      if (!n) return std::nullopt;
      total = mul(total, *n);
      if (total == 0) return 0;
    }
    return total;
  }

  /// Reorders `order` (one component, narrowest box first) to the order of least estimated
  /// enumeration: a level's values are its box, or fewer where a pair of atoms
  /// lo ≤ k·x + S ≤ hi whose other variables are all outer bands x to (hi − lo)/|k| + 1
  /// values; a level is entered once per combination of the outer levels' values, and the
  /// innermost is one interval whatever its width. The estimate, the levels' entries summed,
  /// is minimised over subsets (2^n·n steps, n ≤ 14): a quotient pinned by the digits above
  /// it goes right after them, not before them.
  void cheapest_order(const detail::CountSystem& s, std::vector<int>& order) const {
    const size_t n = order.size();
    if (n < 3 || n > 14) return;
    std::map<int, size_t> at;
    for (size_t i = 0; i < n; ++i) at[order[i]] = i;
    struct Band {
      size_t x;
      uint32_t others;  // bit mask of the other variables
      double values;
    };
    std::vector<Band> bands;
    for (size_t i = 0; i < s.atoms.size(); ++i) {
      const AffCond& a = s.atoms[i];
      if (a.op != AffCond::Op::Ge0 && a.op != AffCond::Op::Eq0) continue;
      if (a.e.terms.empty() || !at.count(a.e.terms.front().first)) continue;
      uint32_t mask = 0;
      for (const auto& t : a.e.terms) mask |= uint32_t(1) << at[t.first];
      double w = -1;
      if (a.op == AffCond::Op::Eq0) {
        w = 0;
      } else {
        for (size_t j = i + 1; j < s.atoms.size() && w < 0; ++j) {
          const AffCond& b = s.atoms[j];
          if (b.op != AffCond::Op::Ge0 || b.e.terms.size() != a.e.terms.size()) continue;
          bool neg = true;
          for (size_t t = 0; t < a.e.terms.size() && neg; ++t)
            neg = a.e.terms[t].first == b.e.terms[t].first && a.e.terms[t].second == -b.e.terms[t].second;
          if (neg) w = static_cast<double>(a.e.c) + static_cast<double>(b.e.c);
        }
      }
      if (w < 0) continue;
      for (const auto& [v, k] : a.e.terms)
        bands.push_back({at[v], mask & ~(uint32_t(1) << at[v]), std::floor(w / std::fabs(static_cast<double>(k))) + 1});
    }
    if (bands.empty()) return;
    std::vector<double> box(n);
    for (size_t i = 0; i < n; ++i) {
      const auto& b = s.box[static_cast<size_t>(order[i])];
      box[i] = static_cast<double>(b.second) - static_cast<double>(b.first) + 1;
    }
    auto values = [&](size_t x, uint32_t placed) {
      double v = box[x];
      for (const Band& b : bands)
        if (b.x == x && (b.others & ~placed) == 0) v = std::min(v, b.values);
      return std::max(v, 1.0);
    };
    const uint32_t full = (uint32_t(1) << n) - 1;
    std::vector<double> prod(size_t(full) + 1, 0), cost(size_t(full) + 1, std::numeric_limits<double>::infinity());
    std::vector<int8_t> last(size_t(full) + 1, -1);
    prod[0] = 1, cost[0] = 0;
    for (uint32_t m = 0; m < full; ++m) {
      if (!std::isfinite(cost[m])) continue;
      for (size_t x = 0; x < n; ++x) {
        if (m & (uint32_t(1) << x)) continue;
        uint32_t to = m | (uint32_t(1) << x);
        double p = to == full ? 0 : prod[m] * values(x, m), c = cost[m] + prod[m];
        if (c + p < cost[to] + prod[to]) cost[to] = c, prod[to] = p, last[to] = static_cast<int8_t>(x);
      }
    }
    std::vector<int> out(n);
    uint32_t m = full;
    for (size_t i = n; i-- > 0;) {
      size_t x = static_cast<size_t>(last[m]);
      out[i] = order[x];
      m &= ~(uint32_t(1) << x);
    }
    order = std::move(out);
  }

  static uint64_t mul(uint64_t a, uint64_t b) { return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
  static uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
  static std::optional<uint64_t> fail(std::string* why, const char* reason) {
    *why = reason;
    return std::nullopt;
  }
  static void collect(const AffCond& c, std::set<int>& out) {
    for (const auto& t : c.e.terms) out.insert(t.first);
    for (const AffCond& k : c.kids) collect(k, out);
  }

  AffCond substitute(const AffCond& c) const {
    AffCond out;
    out.op = c.op;
    if (c.op == AffCond::Op::Ge0 || c.op == AffCond::Op::Eq0) {
      __int128 k0 = c.e.c;
      for (const auto& [v, k] : c.e.terms) {
        auto it = fixed_.find(v);
        if (it != fixed_.end()) k0 += static_cast<__int128>(k) * it->second;
        else out.e.terms.push_back({v, k});
      }
      out.e.c = clamp(k0);
      if (out.e.terms.empty()) {
        bool holds = c.op == AffCond::Op::Ge0 ? k0 >= 0 : k0 == 0;
        out.op = holds ? AffCond::Op::True : AffCond::Op::False;
      }
      return out;
    }
    for (const AffCond& k : c.kids) out.kids.push_back(substitute(k));
    return out;
  }

  Intervals range_of(int v) const {
    const AffVar& av = vars_[static_cast<size_t>(v)];
    if (av.kind == AffVar::Kind::BlockIdx) return {{0, launch_.grid[av.index] - 1}};
    if (av.kind == AffVar::Kind::ThreadIdx) return {{0, launch_.block[av.index] - 1}};
    return {{-kInf, kInf}};
  }

  /// Values of `x` (all variables before it assigned) satisfying `c`.
  Intervals eval(const AffCond& c, int x, const std::vector<int64_t>& assign) const {
    static const Intervals all = {{-kInf, kInf}};
    switch (c.op) {
      case AffCond::Op::True: return all;
      case AffCond::Op::False: return {};
      case AffCond::Op::And: {
        Intervals r = all;
        for (const AffCond& k : c.kids) {
          r = intersect(r, eval(k, x, assign));
          if (r.empty()) break;
        }
        return r;
      }
      case AffCond::Op::Or: {
        Intervals r;
        for (const AffCond& k : c.kids) r = unite(r, eval(k, x, assign));
        return r;
      }
      case AffCond::Op::Ge0:
      case AffCond::Op::Eq0: {
        __int128 rest = c.e.c, k = 0;
        for (const auto& [v, coef] : c.e.terms) {
          if (v == x) k = coef;
          else rest += static_cast<__int128>(coef) * assign[static_cast<size_t>(v)];
        }
        if (c.op == AffCond::Op::Eq0) {
          if (k == 0) return rest == 0 ? all : Intervals{};
          if (rest % k != 0) return {};
          int64_t p = clamp(-rest / k);
          return {{p, p}};
        }
        if (k == 0) return rest >= 0 ? all : Intervals{};
        if (k > 0) return {{clamp(-floor_div(rest, k)), kInf}};  // x ≥ ⌈−rest/k⌉
        return {{-kInf, clamp(floor_div(rest, -k))}};           // x ≤ ⌊rest/−k⌋
      }
    }
    return {};
  }

  /// The one interval of x ≥ ⌈−rest/k⌉ or x ≤ ⌊rest/−k⌋ (Ge0), or x = −rest/k (Eq0), into
  /// [*lo, *hi]; false when the constraint needs the general path (an or, or a term past int64).
  bool narrow(const AffCond& c, int x, const std::vector<int64_t>& assign, int64_t* lo, int64_t* hi) const {
    if (c.op == AffCond::Op::True) return true;
    if (c.op == AffCond::Op::False) {
      *lo = 1, *hi = 0;
      return true;
    }
    if (c.op != AffCond::Op::Ge0 && c.op != AffCond::Op::Eq0) return false;
    int64_t rest = c.e.c, k = 0;
    for (const auto& [v, coef] : c.e.terms) {
      if (v == x) {
        k = coef;
        continue;
      }
      int64_t t = 0;
      if (__builtin_mul_overflow(coef, assign[static_cast<size_t>(v)], &t) || __builtin_add_overflow(rest, t, &rest))
        return false;
    }
    if (rest > kInf || rest < -kInf) return false;
    if (c.op == AffCond::Op::Eq0) {
      if (k == 0) {
        if (rest != 0) *lo = 1, *hi = 0;
        return true;
      }
      if (rest % k != 0) {
        *lo = 1, *hi = 0;
        return true;
      }
      int64_t p = -rest / k;
      *lo = std::max(*lo, p), *hi = std::min(*hi, p);
      return true;
    }
    if (k == 0) {
      if (rest < 0) *lo = 1, *hi = 0;
      return true;
    }
    if (k > 0) *lo = std::max(*lo, static_cast<int64_t>(-floor_div(rest, k)));  // x ≥ ⌈−rest/k⌉
    else *hi = std::min(*hi, static_cast<int64_t>(floor_div(rest, -k)));          // x ≤ ⌊rest/−k⌋
    return true;
  }

  std::optional<uint64_t> level(const std::vector<int>& order, const std::vector<std::vector<const AffCond*>>& at,
                                const std::vector<char>& read_below, size_t i, std::vector<int64_t>& assign,
                                std::string* why) {
    int x = order[i];
    // Plain inequalities and equalities narrow the box's interval in place; the rest (or)
    // go the general way, over intervals.
    int64_t lo = (*box_)[static_cast<size_t>(x)].first, hi = (*box_)[static_cast<size_t>(x)].second;
    Intervals s;
    bool general = false;
    for (const AffCond* c : at[i]) {
      if (narrow(*c, x, assign, &lo, &hi)) {
        if (lo > hi) return 0;
        continue;
      }
      s = general ? intersect(s, eval(*c, x, assign)) : eval(*c, x, assign);
      general = true;
      if (s.empty()) return 0;
    }
    s = general ? intersect(s, Intervals{{lo, hi}}) : Intervals{{lo, hi}};
    if (s.empty()) return 0;
    if (s.front().first <= -kInf || s.back().second >= kInf) return fail(why, ops_reason::kUnbounded);
    if (++*steps_ == 0 || *steps_ > budget_) return fail(why, ops_reason::kTooCostly);
    uint64_t values = 0;
    for (const auto& [a, b] : s) values = add(values, static_cast<uint64_t>(b - a) + 1);
    if (i + 1 == order.size()) return values;
    if (!read_below[i]) {
      // Nothing below reads x: every value of it sees the same count.
      assign[static_cast<size_t>(x)] = s.front().first;
      std::optional<uint64_t> m = level(order, at, read_below, i + 1, assign, why);
      if (!m) return std::nullopt;
      return mul(values, *m);
    }
    uint64_t n = 0;
    for (const auto& [a, b] : s) {
      for (int64_t p = a; p <= b; ++p) {
        assign[static_cast<size_t>(x)] = p;
        std::optional<uint64_t> m = level(order, at, read_below, i + 1, assign, why);
        if (!m) return std::nullopt;
        n = add(n, *m);
      }
    }
    return n;
  }

 public:
  uint64_t budget_ = kMaxCountSteps;

 private:
  const std::vector<AffVar>& vars_;
  const LaunchShape& launch_;
  uint64_t* steps_;
  std::map<int, int64_t> fixed_;
  const std::vector<std::pair<int64_t, int64_t>>* box_ = nullptr;  ///< the problem being counted
};

void add_reason(KernelOps& k, const std::string& r) {
  if (std::find(k.reasons.begin(), k.reasons.end(), r) == k.reasons.end()) k.reasons.push_back(r);
}

/// The points of `domain`, charging `*steps` against `max_steps`.
std::optional<uint64_t> count_points(const AffCond& domain, const std::vector<AffVar>& vars, const LaunchShape& launch,
                                     uint64_t max_steps, uint64_t* steps, std::string* why) {
  for (int d = 0; d < 3; ++d)
    if (launch.grid[d] < 1 || launch.block[d] < 1 || launch.grid[d] > kInf / 4 || launch.block[d] > kInf / 4) {
      *why = reject::kUnsupported;
      return std::nullopt;
    }
  Counter c(vars, launch, steps);
  c.budget_ = max_steps;
  return c.count(domain, why);
}

/// count_points for one launch, each distinct domain counted once (a kernel's accesses and
/// operation groups often share their loop nest's domain).
class LaunchCounter {
 public:
  LaunchCounter(const std::vector<AffVar>& vars, const LaunchShape& launch, uint64_t max_steps)
      : vars_(vars), launch_(launch), max_steps_(max_steps) {}
  std::optional<uint64_t> count(const AffCond& domain, std::string* why) {
    std::string key;
    detail::append_cond_key(domain, &key);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      Result r;
      r.n = count_points(domain, vars_, launch_, max_steps_, &steps_, &r.why);
      it = cache_.emplace(std::move(key), std::move(r)).first;
    }
    *why = it->second.why;
    return it->second.n;
  }

 private:
  struct Result {
    std::optional<uint64_t> n;
    std::string why;
  };
  const std::vector<AffVar>& vars_;
  const LaunchShape& launch_;
  uint64_t max_steps_;
  uint64_t steps_ = 0;  // one budget for the whole launch
  std::map<std::string, Result> cache_;
};

}  // namespace

std::optional<uint64_t> count_domain_points(const AffCond& domain, const std::vector<AffVar>& vars,
                                            const LaunchShape& launch, uint64_t max_steps, std::string* why) {
  uint64_t steps = 0;
  return count_points(domain, vars, launch, max_steps, &steps, why);
}

KernelOps count_kernel_ops(const KernelOpModel& model, const LaunchShape& launch, uint64_t max_steps) {
  KernelOps k;
  auto worse = [&](KernelOps::Status s) {
    if (static_cast<int>(s) > static_cast<int>(k.status)) k.status = s;
  };
  LaunchCounter counter(model.vars, launch, max_steps);  // one budget for the whole launch
  for (const OpGroup& g : model.groups) {
    if (!g.unknown.empty()) {
      worse(KernelOps::Status::Unknown);
      add_reason(k, g.unknown);
      continue;
    }
    std::string why;
    std::optional<uint64_t> n = counter.count(g.domain, &why);
    if (!n) {
      worse(KernelOps::Status::Unknown);
      add_reason(k, why);
      continue;
    }
    if (!g.exact) {
      worse(KernelOps::Status::UpperBound);
      add_reason(k, ops_reason::kGuardDropped);
    }
    for (size_t kind = 0; kind < KernelOps::kKinds; ++kind)
      for (size_t p = 0; p < KernelOps::kPrecisions; ++p) {
        uint64_t per = g.per_point[kind][p];
        if (per == 0) continue;
        uint64_t t = per != 0 && *n > UINT64_MAX / per ? UINT64_MAX : per * *n;
        uint64_t& slot = k.counts[kind][p];
        slot = slot > UINT64_MAX - t ? UINT64_MAX : slot + t;
      }
    if (g.reduction_per_point) {
      uint64_t t = *n > UINT64_MAX / g.reduction_per_point ? UINT64_MAX : g.reduction_per_point * *n;
      k.reduction_flops = k.reduction_flops > UINT64_MAX - t ? UINT64_MAX : k.reduction_flops + t;
    }
  }
  for (const std::string& u : model.unknown) {
    worse(KernelOps::Status::Unknown);
    add_reason(k, u);
  }
  // Global memory accessed: each access's points × its size (the same counts, one budget).
  if (!model.access_unknown.empty()) {
    k.bytes_reason = model.access_unknown;
  } else {
    uint64_t load = 0, store = 0;
    for (const AccessGroup& a : model.accesses) {
      std::string why;
      std::optional<uint64_t> n = counter.count(a.domain, &why);
      if (!n) {
        k.bytes_reason = why;
        break;
      }
      uint64_t b = a.size > 0 && *n > UINT64_MAX / static_cast<uint64_t>(a.size) ? UINT64_MAX
                                                                              : *n * static_cast<uint64_t>(a.size);
      if (a.read) load = load > UINT64_MAX - b ? UINT64_MAX : load + b;
      if (a.write) store = store > UINT64_MAX - b ? UINT64_MAX : store + b;
      k.bytes_exact = k.bytes_exact && a.exact;
    }
    if (k.bytes_reason.empty()) {
      k.load_bytes = load;
      k.store_bytes = store;
    }
  }
  // Barriers: each call's points (one execution per thread and trip); one not countable adds none.
  for (const BarrierSite& b : model.barriers) {
    if (!b.unknown.empty()) continue;
    std::string why;
    if (std::optional<uint64_t> n = counter.count(b.domain, &why))
      k.barriers = k.barriers > UINT64_MAX - *n ? UINT64_MAX : k.barriers + *n;
  }
  static constexpr uint64_t kWeight[KernelOps::kKinds] = {1, 1, 2, 1, 1, 0};
  for (size_t kind = 0; kind < KernelOps::kKinds; ++kind)
    for (size_t p = 0; p < KernelOps::kPrecisions; ++p) {
      uint64_t c = k.counts[kind][p];
      uint64_t t = c > UINT64_MAX / 2 ? UINT64_MAX : c * kWeight[kind];
      k.flops = k.flops > UINT64_MAX - t ? UINT64_MAX : k.flops + t;
    }
  std::sort(k.reasons.begin(), k.reasons.end());
  return k;
}

void attach_kernel_ops(Dataflow& df, const std::vector<KernelOpModel>& models, int jobs,
                       const std::vector<const KernelOpModel*>* launch_models) {
  // 1. The distinct launches (kernel, grid, block, scalars), in launch order.
  struct Work {
    const KernelOpModel* model = nullptr;
    LaunchShape launch;
    KernelOps out;
  };
  std::vector<Work> work;
  std::map<std::string, size_t> index;  // launch key → work item
  std::vector<std::pair<Kernel*, size_t>> uses;
  for (size_t ki = 0; ki < df.kernels.size(); ++ki) {
    Kernel& k = df.kernels[ki];
    if (k.device_function < 0 || static_cast<size_t>(k.device_function) >= models.size()) continue;
    const KernelOpModel* own = launch_models && ki < launch_models->size() ? (*launch_models)[ki] : nullptr;
    const KernelOpModel& m = own ? *own : models[static_cast<size_t>(k.device_function)];
    if (m.name.empty()) continue;
    LaunchShape launch = launch_shape(k);
    std::string key = fmt::format("{}{}|{}|{}{}", own ? "*" : "", m.name, fmt::join(k.grid, ","),
                                  fmt::join(k.block, ","), scalars_key(launch));
    auto [it, inserted] = index.emplace(key, work.size());
    if (inserted) work.push_back(Work{&m, std::move(launch), {}});
    uses.push_back({&k, it->second});
  }
  // 2. Each distinct launch counted once, on `jobs` threads taking the next item in turn
  //    (count_kernel_ops reads only its arguments); results land in their item.
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < work.size();) work[i].out = count_kernel_ops(*work[i].model, work[i].launch);
  };
  const size_t threads = std::min<size_t>(jobs > 1 ? static_cast<size_t>(jobs) : 1, work.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  // 3. Every launch gets its item's count.
  for (auto& [k, i] : uses) k->ops = work[i].out;
}

}  // namespace kdflow

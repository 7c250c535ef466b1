// count_rewrite.cpp — the point-preserving rewrites of a counting problem (count_rewrite.h).

#include "count_rewrite.h"

#include <algorithm>
#include <numeric>

namespace kdflow::detail {

namespace {

constexpr __int128 kCoefLimit = __int128(1) << 50;
using Op = AffCond::Op;

__int128 floor_div(__int128 a, __int128 b) {  // b > 0
  __int128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
__int128 ceil_div(__int128 a, __int128 b) { return -floor_div(-a, b); }  // b > 0
int64_t clamp(__int128 v) { return v > kCountInf ? kCountInf : v < -kCountInf ? -kCountInf : static_cast<int64_t>(v); }

int64_t coef_of(const LinExpr& e, int v) {
  for (const auto& [x, k] : e.terms)
    if (x == v) return k;
  return 0;
}

bool mentions(const AffCond& c, int v) {
  if (c.op == Op::Ge0 || c.op == Op::Eq0) return coef_of(c.e, v) != 0;
  for (const AffCond& k : c.kids)
    if (mentions(k, v)) return true;
  return false;
}

LinExpr lin(int64_t c, std::vector<std::pair<int, int64_t>> terms) {
  LinExpr e;
  e.c = c;
  e.terms = std::move(terms);
  std::sort(e.terms.begin(), e.terms.end());
  return e;
}

AffCond atom(Op op, LinExpr e) {
  AffCond a;
  a.op = op;
  a.e = std::move(e);
  return a;
}

class Rewriter {
 public:
  Rewriter(CountSystem& s, int inverted_limit)
      : s_(s), limit_(inverted_limit), inverted_(s.box.size(), 0), absorbed_(s.box.size(), 0) {}

  bool run() {
    for (int it = 0; it < 200 && ok_ && !s_.empty; ++it) {
      normalize();
      if (!ok_ || s_.empty) break;
      if (fix_points() || unit_equality()) continue;
      if (!ok_ || s_.empty) break;
      find_pairs();
      if (pair_equality() || same_quotient() || strip_remainder() || relinearize() || absorb() || drop_pinned()) continue;
      if (!ok_ || s_.empty) break;
      if (merge_digits()) continue;
      if (!ok_ || s_.empty) break;
      if (propagate() || invert()) continue;
      break;
    }
    return ok_;
  }

 private:
  struct Pair {
    size_t lo_atom, hi_atom;  ///< atoms e ≥ 0 and w − e ≥ 0
    int64_t w;
  };

  // --- linear algebra with overflow checks -------------------------------------------

  /// e += a · by.
  bool add_scaled(LinExpr& e, const LinExpr& by, int64_t a) {
    __int128 c = static_cast<__int128>(e.c) + static_cast<__int128>(a) * by.c;
    if (c > kCoefLimit || c < -kCoefLimit) return ok_ = false;
    std::vector<std::pair<int, int64_t>> out;
    size_t i = 0, j = 0;
    while (i < e.terms.size() || j < by.terms.size()) {
      int v;
      __int128 k = 0;
      if (j == by.terms.size() || (i < e.terms.size() && e.terms[i].first < by.terms[j].first)) {
        v = e.terms[i].first, k = e.terms[i++].second;
      } else if (i == e.terms.size() || by.terms[j].first < e.terms[i].first) {
        v = by.terms[j].first, k = static_cast<__int128>(a) * by.terms[j++].second;
      } else {
        v = e.terms[i].first;
        k = e.terms[i++].second + static_cast<__int128>(a) * by.terms[j++].second;
      }
      if (k > kCoefLimit || k < -kCoefLimit) return ok_ = false;
      if (k != 0) out.push_back({v, static_cast<int64_t>(k)});
    }
    e.c = static_cast<int64_t>(c);
    e.terms = std::move(out);
    return true;
  }
  /// e with v := by.
  bool subst(LinExpr& e, int v, const LinExpr& by) {
    int64_t a = coef_of(e, v);
    if (a == 0) return true;
    e.terms.erase(std::find_if(e.terms.begin(), e.terms.end(), [&](const auto& t) { return t.first == v; }));
    return add_scaled(e, by, a);
  }
  bool subst(AffCond& c, int v, const LinExpr& by) {
    if (c.op == Op::Ge0 || c.op == Op::Eq0) return subst(c.e, v, by);
    for (AffCond& k : c.kids)
      if (!subst(k, v, by)) return false;
    return true;
  }
  /// v := by in every atom (false: a coefficient overflowed, the rewrite stops).
  bool subst_all(int v, const LinExpr& by) {
    for (AffCond& a : s_.atoms)
      if (!subst(a, v, by)) return false;
    return true;
  }
  /// v := by in every atom; v's box becomes constraints on `by`; v leaves the problem.
  void eliminate(int v, const LinExpr& by) {
    if (!subst_all(v, by)) return;
    box_to_atoms(v, by);
    s_.live[static_cast<size_t>(v)] = 0;
  }
  /// lo ≤ by ≤ hi as atoms, for v's box.
  void box_to_atoms(int v, const LinExpr& by) {
    auto [lo, hi] = s_.box[static_cast<size_t>(v)];
    if (lo > -kCountInf) {
      LinExpr e = by;
      if (!add_scaled(e, lin(1, {}), -lo)) return;
      s_.atoms.push_back(atom(Op::Ge0, std::move(e)));
    }
    if (hi < kCountInf) {
      LinExpr e = lin(hi, {});
      if (!add_scaled(e, by, -1)) return;
      s_.atoms.push_back(atom(Op::Ge0, std::move(e)));
    }
    s_.box[static_cast<size_t>(v)] = {-kCountInf, kCountInf};
  }
  /// Removes a pair's two atoms (indices into s_.atoms; pairs_ is stale afterwards).
  void erase_pair(const Pair& p) {
    size_t first = std::min(p.lo_atom, p.hi_atom), second = std::max(p.lo_atom, p.hi_atom);
    s_.atoms.erase(s_.atoms.begin() + static_cast<long>(second));
    s_.atoms.erase(s_.atoms.begin() + static_cast<long>(first));
  }
  int new_var(int64_t lo, int64_t hi) {
    s_.box.push_back({lo, hi});
    s_.live.push_back(1);
    inverted_.push_back(0);
    absorbed_.push_back(0);
    return static_cast<int>(s_.box.size() - 1);
  }
  bool tighten(int v, __int128 lo, __int128 hi) {
    auto& b = s_.box[static_cast<size_t>(v)];
    bool changed = false;
    if (lo > b.first) b.first = clamp(lo), changed = true;
    if (hi < b.second) b.second = clamp(hi), changed = true;
    if (b.first > b.second) s_.empty = true;
    return changed;
  }
  /// Minimum and maximum of e over the boxes (±kCountInf past them).
  std::pair<__int128, __int128> range(const LinExpr& e, int skip = -1) const {
    __int128 lo = e.c, hi = e.c;
    bool lo_inf = false, hi_inf = false;
    for (const auto& [v, k] : e.terms) {
      if (v == skip) continue;
      auto [a, b] = s_.box[static_cast<size_t>(v)];
      __int128 at_lo = k > 0 ? a : b, at_hi = k > 0 ? b : a;
      if (at_lo <= -kCountInf || at_lo >= kCountInf) lo_inf = true;
      else lo += static_cast<__int128>(k) * at_lo;
      if (at_hi <= -kCountInf || at_hi >= kCountInf) hi_inf = true;
      else hi += static_cast<__int128>(k) * at_hi;
    }
    return {lo_inf ? -__int128(kCountInf) * 4 : lo, hi_inf ? __int128(kCountInf) * 4 : hi};
  }

  // --- the rewrites --------------------------------------------------------------------

  /// Constant atoms decided, coefficients divided by their gcd (Ge0: the constant rounded
  /// down, exact on integers), one-variable atoms moved into the box.
  void normalize() {
    std::vector<AffCond> kept;
    for (AffCond& a : s_.atoms) {
      if (a.op == Op::True) continue;
      if (a.op == Op::False) {
        s_.empty = true;
        return;
      }
      if (a.op != Op::Ge0 && a.op != Op::Eq0) {
        kept.push_back(std::move(a));
        continue;
      }
      if (a.e.terms.empty()) {
        if (a.op == Op::Ge0 ? a.e.c < 0 : a.e.c != 0) {
          s_.empty = true;
          return;
        }
        continue;
      }
      int64_t g = 0;
      for (const auto& t : a.e.terms) g = std::gcd(g, t.second < 0 ? -t.second : t.second);
      if (g > 1) {
        if (a.op == Op::Eq0 && a.e.c % g != 0) {
          s_.empty = true;
          return;
        }
        for (auto& t : a.e.terms) t.second /= g;
        a.e.c = static_cast<int64_t>(floor_div(a.e.c, g));
      }
      if (a.e.terms.size() == 1) {
        auto [v, k] = a.e.terms[0];  // k = ±1 after the gcd
        __int128 p = -static_cast<__int128>(a.e.c) * k;  // k·v + c ≥ 0 ⇔ v ≥ −c (k = 1), v ≤ c (k = −1)
        if (a.op == Op::Eq0) tighten(v, p, p);
        else if (k > 0) tighten(v, p, kCountInf);
        else tighten(v, -kCountInf, p);
        if (s_.empty) return;
        continue;
      }
      kept.push_back(std::move(a));
    }
    s_.atoms = std::move(kept);
  }

  /// A variable with one value is that constant.
  bool fix_points() {
    for (size_t v = 0; v < s_.box.size(); ++v) {
      if (!s_.live[v] || s_.box[v].first != s_.box[v].second) continue;
      LinExpr by = lin(s_.box[v].first, {});
      s_.box[v] = {-kCountInf, kCountInf};
      eliminate(static_cast<int>(v), by);
      return true;
    }
    return false;
  }

  /// An equality with a ±1 coefficient gives its variable's value.
  bool unit_equality() {
    for (size_t i = 0; i < s_.atoms.size(); ++i) {
      const AffCond& a = s_.atoms[i];
      if (a.op != Op::Eq0) continue;
      // The newest ±1 variable: a definition v = e names the variable it defines last.
      for (auto it = a.e.terms.rbegin(); it != a.e.terms.rend(); ++it) {
        auto [v, k] = *it;
        if (k != 1 && k != -1) continue;
        LinExpr by = a.e;  // k·v + rest = 0 ⇒ v = −k·rest
        int var = v;
        int64_t kk = k;
        by.terms.erase(std::find_if(by.terms.begin(), by.terms.end(), [&](const auto& t) { return t.first == var; }));
        LinExpr neg;
        if (!add_scaled(neg, by, -kk)) return true;
        s_.atoms.erase(s_.atoms.begin() + static_cast<long>(i));
        eliminate(var, neg);
        return true;
      }
    }
    return false;
  }

  void find_pairs() {
    pairs_.clear();
    for (size_t i = 0; i < s_.atoms.size(); ++i) {
      const AffCond& a = s_.atoms[i];
      if (a.op != Op::Ge0) continue;
      for (size_t j = i + 1; j < s_.atoms.size(); ++j) {
        const AffCond& b = s_.atoms[j];
        if (b.op != Op::Ge0 || b.e.terms.size() != a.e.terms.size()) continue;
        bool neg = true;
        for (size_t t = 0; t < a.e.terms.size() && neg; ++t)
          neg = a.e.terms[t].first == b.e.terms[t].first && a.e.terms[t].second == -b.e.terms[t].second;
        if (neg) pairs_.push_back({i, j, a.e.c + b.e.c});
      }
    }
  }

  /// 0 ≤ e ≤ 0 is e = 0; 0 ≤ e ≤ w < 0 is empty.
  bool pair_equality() {
    for (const Pair& p : pairs_) {
      if (p.w < 0) {
        s_.empty = true;
        return true;
      }
      if (p.w == 0) {
        s_.atoms[p.lo_atom].op = Op::Eq0;
        s_.atoms.erase(s_.atoms.begin() + static_cast<long>(p.hi_atom));
        return true;
      }
    }
    return false;
  }

  /// The pair's definition of a quotient: the atom R − d·q ≥ 0 of the pair (d = w + 1 ≥ 2),
  /// or -1. `q` receives the quotient (the first variable with coefficient −d).
  long definition(const Pair& p, int* q) const {
    int64_t d = p.w + 1;
    for (size_t side : {p.lo_atom, p.hi_atom})
      for (const auto& [v, k] : s_.atoms[side].e.terms)
        if (k == -d) {
          *q = v;
          return static_cast<long>(side);
        }
    return -1;
  }

  bool is_flat_block(int v) const {
    for (const auto& f : s_.flat)
      if (f[0] == v) return true;
    return false;
  }

  /// How many pairs define q.
  int definitions_of(int q) const {
    int n = 0;
    for (const Pair& p : pairs_) {
      int x;
      if (definition(p, &x) >= 0 && x == q) ++n;
    }
    return n;
  }

  /// Two quotients of the same R by the same d are one variable.
  bool same_quotient() {
    for (size_t i = 0; i < pairs_.size(); ++i) {
      int q1 = -1;
      long a = definition(pairs_[i], &q1);
      if (a < 0) continue;
      for (size_t j = i + 1; j < pairs_.size(); ++j) {
        int q2 = -1;
        long b = definition(pairs_[j], &q2);
        if (b < 0 || q2 == q1 || pairs_[j].w != pairs_[i].w) continue;
        const LinExpr &ea = s_.atoms[static_cast<size_t>(a)].e, &eb = s_.atoms[static_cast<size_t>(b)].e;
        if (ea.c != eb.c || ea.terms.size() != eb.terms.size()) continue;
        bool same = true;
        for (size_t t = 0, u = 0; same && (t < ea.terms.size() || u < eb.terms.size());) {
          if (t < ea.terms.size() && ea.terms[t].first == q1) {
            ++t;
            continue;
          }
          if (u < eb.terms.size() && eb.terms[u].first == q2) {
            ++u;
            continue;
          }
          same = t < ea.terms.size() && u < eb.terms.size() && ea.terms[t] == eb.terms[u];
          ++t, ++u;
        }
        if (!same) continue;
        erase_pair(pairs_[j]);
        eliminate(q2, lin(0, {{q1, 1}}));
        return true;
      }
    }
    return false;
  }

  /// TVM simplifies (B·b + t) mod d to ((B mod d)·b + t) mod d: the same quotient up to a
  /// multiple of b. Where a quotient's R holds b with coefficient a and t with ±1, q is
  /// shifted by a multiple of b so that b's coefficient is ±B again (when d divides
  /// B − a·(±1)... and B is no multiple of d, which absorb would undo). Every R then reads
  /// the flat index whole, and later inversions cancel b out of it.
  bool relinearize() {
    for (const auto& [b, t, B] : s_.flat) {
      if (!s_.live[static_cast<size_t>(b)] || !s_.live[static_cast<size_t>(t)]) continue;
      for (const Pair& p : pairs_) {
        int q = -1;
        long side = definition(p, &q);
        if (side < 0 || q == b || q == t) continue;
        int64_t d = p.w + 1;
        const LinExpr& e = s_.atoms[static_cast<size_t>(side)].e;
        int64_t a = coef_of(e, static_cast<int>(b)), k = coef_of(e, static_cast<int>(t));
        if (a == 0 || (k != 1 && k != -1)) continue;
        __int128 target = static_cast<__int128>(k) * B;
        if (target == a || (target - a) % d != 0 || target % d == 0) continue;
        // R + m·d·b − d·(q + m·b): q_old = q_new − m·b.
        int64_t m = static_cast<int64_t>((target - a) / d);
        LinExpr by = lin(0, {{q, 1}, {static_cast<int>(b), -m}});
        for (AffCond& at : s_.atoms)
          if (!subst(at, q, by)) return true;
        box_to_atoms(q, by);
        return true;
      }
    }
    return false;
  }

  /// 0 ≤ g·A + r ≤ g·m − 1 with r's box exactly [0, g−1] (after a shift) is 0 ≤ A ≤ m − 1:
  /// the remainder digit of a mixed-radix index drops out of the coarser digits' pairs.
  bool strip_remainder() {
    for (const Pair& p : pairs_) {
      for (size_t side : {p.lo_atom, p.hi_atom}) {
        const LinExpr& e = s_.atoms[side].e;
        for (const auto& [r, k] : e.terms) {
          if (k != 1) continue;
          auto [lo, hi] = s_.box[static_cast<size_t>(r)];
          if (lo <= -kCountInf || hi >= kCountInf) continue;
          __int128 g = __int128(hi) - lo + 1;
          if (g < 2 || (static_cast<__int128>(p.w) + 1) % g != 0 || (static_cast<__int128>(e.c) + lo) % g != 0) continue;
          bool multiple = true;
          for (const auto& [v, kv] : e.terms)
            if (v != r && kv % g != 0) multiple = false;
          if (!multiple) continue;
          // (M + lo) + (r − lo) with M + lo = g·A: 0 ≤ A ≤ (w + 1)/g − 1.
          LinExpr a;
          a.c = static_cast<int64_t>((static_cast<__int128>(e.c) + lo) / g);
          for (const auto& [v, kv] : e.terms)
            if (v != r) a.terms.push_back({v, static_cast<int64_t>(kv / g)});
          LinExpr top = lin(static_cast<int64_t>((static_cast<__int128>(p.w) + 1) / g - 1), {});
          if (!add_scaled(top, a, -1)) return true;
          s_.atoms[p.lo_atom] = atom(Op::Ge0, std::move(a));
          s_.atoms[p.hi_atom] = atom(Op::Ge0, std::move(top));
          return true;
        }
      }
    }
    return false;
  }

  /// q = ⌊R/d⌋: terms of R that are multiples of d, and R's constant past [0, d), move into q.
  bool absorb() {
    for (const Pair& p : pairs_) {
      int q = -1;
      long side = definition(p, &q);
      if (side < 0 || definitions_of(q) != 1 || absorbed_[static_cast<size_t>(q)] >= 16) continue;
      ++absorbed_[static_cast<size_t>(q)];
      int64_t d = p.w + 1;
      const LinExpr& e = s_.atoms[static_cast<size_t>(side)].e;
      for (const auto& [v, k] : e.terms) {
        if (v == q || k % d != 0 || is_flat_block(v)) continue;
        // R − d·q = (R − k·v) − d·(q − (k/d)·v): q_old = q_new + (k/d)·v.
        int var = v;
        int64_t m = k / d;
        LinExpr by = lin(0, {{q, 1}, {var, m}});
        if (!subst_all(q, by)) return true;
        box_to_atoms(q, by);  // lo ≤ q_old = q_new + m·v ≤ hi
        return true;
      }
      if (e.c < 0 || e.c >= d) {
        int64_t m = static_cast<int64_t>(floor_div(e.c, d));  // q_old = q_new + m
        auto& b = s_.box[static_cast<size_t>(q)];
        if (b.first > -kCountInf) b.first -= m;
        if (b.second < kCountInf) b.second -= m;
        LinExpr by = lin(m, {{q, 1}});
        if (!subst_all(q, by)) return true;
        return true;
      }
    }
    return false;
  }

  /// A quotient that nothing but its definition reads: q = ⌊R/d⌋ ∈ [lo, hi] is
  /// d·lo ≤ R ≤ d·hi + d − 1, and q goes.
  bool drop_pinned() {
    for (const Pair& p : pairs_) {
      int q = -1;
      long side = definition(p, &q);
      if (side < 0) continue;
      bool alone = true;
      for (size_t i = 0; i < s_.atoms.size() && alone; ++i)
        if (i != p.lo_atom && i != p.hi_atom && mentions(s_.atoms[i], q)) alone = false;
      if (!alone) continue;
      int64_t d = p.w + 1;
      LinExpr r = s_.atoms[static_cast<size_t>(side)].e;  // R − d·q
      r.terms.erase(std::find_if(r.terms.begin(), r.terms.end(), [&](const auto& t) { return t.first == q; }));
      auto [lo, hi] = s_.box[static_cast<size_t>(q)];
      std::vector<AffCond> add;
      __int128 bottom = static_cast<__int128>(d) * lo, top = static_cast<__int128>(d) * hi + d - 1;
      if (lo > -kCountInf) {  // R − d·lo ≥ 0
        if (bottom > kCoefLimit || bottom < -kCoefLimit) return ok_ = false, true;
        LinExpr e = r;
        if (!add_scaled(e, lin(1, {}), -static_cast<int64_t>(bottom))) return true;
        add.push_back(atom(Op::Ge0, std::move(e)));
      }
      if (hi < kCountInf) {  // d·hi + d − 1 − R ≥ 0
        if (top > kCoefLimit || top < -kCoefLimit) return ok_ = false, true;
        LinExpr e = lin(static_cast<int64_t>(top), {});
        if (!add_scaled(e, r, -1)) return true;
        add.push_back(atom(Op::Ge0, std::move(e)));
      }
      erase_pair(p);
      for (AffCond& a : add) s_.atoms.push_back(std::move(a));
      s_.live[static_cast<size_t>(q)] = 0;
      s_.box[static_cast<size_t>(q)] = {-kCountInf, kCountInf};
      return true;
    }
    return false;
  }

  /// Bounds implied by each atom tighten the boxes; atoms the boxes imply go.
  bool propagate() {
    bool changed = false;
    for (int round = 0; round < 3; ++round) {
      bool again = false;
      for (const AffCond& a : s_.atoms) {
        if (a.op != Op::Ge0 && a.op != Op::Eq0) continue;
        for (const auto& [v, k] : a.e.terms) {
          auto [lo, hi] = range(a.e, v);  // of the rest: k·v + rest ≥ 0 (= 0)
          // k·v ≥ −rest ≥ −hi;  Eq0 also k·v ≤ −lo.
          __int128 nlo = -kCountInf, nhi = kCountInf;
          if (hi < kCountInf) {
            if (k > 0) nlo = ceil_div(-hi, k);
            else nhi = floor_div(hi, -k);
          }
          if (a.op == Op::Eq0 && lo > -kCountInf) {
            if (k > 0) nhi = floor_div(-lo, k);
            else nlo = ceil_div(lo, -k);
          }
          if (tighten(v, nlo, nhi)) again = changed = true;
          if (s_.empty) return true;
        }
      }
      if (!again) break;
    }
    std::vector<AffCond> kept;
    for (AffCond& a : s_.atoms) {
      if (a.op == Op::Ge0) {
        auto [lo, hi] = range(a.e);
        if (hi < 0) {
          s_.empty = true;
          return true;
        }
        if (lo >= 0) {
          changed = true;
          continue;
        }
      }
      kept.push_back(std::move(a));
    }
    s_.atoms = std::move(kept);
    return changed;
  }

  /// A digit and the digits above it as one number: where r's box is [lo, lo + g − 1] and
  /// every atom that reads r reads A with g times r's coefficient (c·(g·A + r)), and every
  /// other atom that reads A reads it with ±1, (A, r) ↦ w = g·A + (r − lo) is a bijection
  /// onto [g·A_lo, g·A_hi + g − 1]: c·(g·A + r) is c·(w + lo); A + S ≥ 0 is w + g·S ≥ 0
  /// (⌊w/g⌋ ≥ −S); −A + S ≥ 0 is g·S + g − 1 − w ≥ 0 (⌊w/g⌋ ≤ S). The inversions leave
  /// such digits (a vector lane under a thread index); merged, one level counts g·|A|
  /// values as one interval instead of |A| steps of g.
  bool merge_digits() {
    for (size_t r = 0; r < s_.box.size(); ++r) {
      if (!s_.live[r]) continue;
      auto [lo, hi] = s_.box[r];
      if (lo <= -kCountInf || hi >= kCountInf || hi <= lo) continue;
      __int128 g = __int128(hi) - lo + 1;
      if (g > (__int128(1) << 20)) continue;
      int a = -1;
      bool ok = true, any = false;
      for (const AffCond& at : s_.atoms) {
        if (!mentions(at, static_cast<int>(r))) continue;
        if (at.op != Op::Ge0 && at.op != Op::Eq0) {
          ok = false;
          break;
        }
        any = true;
        __int128 c = coef_of(at.e, static_cast<int>(r));
        int found = -1;
        for (const auto& [v, k] : at.e.terms)
          if (v != static_cast<int>(r) && k == g * c && (a < 0 || v == a)) found = v;
        if (found < 0 || (a >= 0 && found != a)) {
          ok = false;
          break;
        }
        a = found;
      }
      if (!ok || !any || a < 0) continue;
      auto [alo, ahi] = s_.box[static_cast<size_t>(a)];
      if (alo <= -kCountInf || ahi >= kCountInf) continue;
      for (const AffCond& at : s_.atoms) {
        if (!mentions(at, a) || mentions(at, static_cast<int>(r))) continue;
        int64_t k = at.op == Op::Ge0 ? coef_of(at.e, a) : 0;
        if (k != 1 && k != -1) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      __int128 wlo = g * alo, whi = g * ahi + g - 1;
      if (wlo < -kCoefLimit || whi > kCoefLimit) continue;
      int w = new_var(static_cast<int64_t>(wlo), static_cast<int64_t>(whi));
      for (AffCond& at : s_.atoms) {
        LinExpr& e = at.e;
        int64_t c = coef_of(e, static_cast<int>(r));
        int64_t k = coef_of(e, a);
        if (c == 0 && k == 0) continue;
        LinExpr out;
        __int128 cst = e.c;
        __int128 scale = 1;
        if (c != 0) {
          // c·g·A + c·r + S  →  c·w + c·lo + S
          cst += static_cast<__int128>(c) * lo;
          out.terms.push_back({w, c});
        } else {
          // k·A + S with k = ±1: w + g·S ≥ 0 (k = 1) or g·S + g − 1 − w ≥ 0 (k = −1).
          scale = g;
          cst = static_cast<__int128>(e.c) * g + (k < 0 ? g - 1 : 0);
          out.terms.push_back({w, k});
        }
        for (const auto& [v, kv] : e.terms) {
          if (v == a || v == static_cast<int>(r)) continue;
          __int128 nk = static_cast<__int128>(kv) * scale;
          if (nk > kCoefLimit || nk < -kCoefLimit) return ok_ = false, true;
          out.terms.push_back({v, static_cast<int64_t>(nk)});
        }
        if (cst > kCoefLimit || cst < -kCoefLimit) return ok_ = false, true;
        out.c = static_cast<int64_t>(cst);
        std::sort(out.terms.begin(), out.terms.end());
        e = std::move(out);
      }
      s_.live[r] = 0;
      s_.live[static_cast<size_t>(a)] = 0;
      s_.box[r] = s_.box[static_cast<size_t>(a)] = {-kCountInf, kCountInf};
      return true;
    }
    return false;
  }

  /// A quotient of the model whose R has a ±1 variable x: r = R − d·q ∈ [0, d−1] replaces x.
  bool invert() {
    // Of all candidates, the one whose x has the widest box (the thread index before a loop
    // counter), then the oldest quotient: the model creates a quotient after those its
    // numerator uses, so this follows the index computation from the thread index outwards.
    long best = -1;
    int best_q = 0, x = -1;
    int64_t kx = 0;
    __int128 best_w = -1;
    for (size_t i = 0; i < pairs_.size(); ++i) {
      int q = -1;
      if (definition(pairs_[i], &q) < 0 || q >= limit_ || inverted_[static_cast<size_t>(q)]) continue;
      const LinExpr& e = s_.atoms[static_cast<size_t>(definition(pairs_[i], &q))].e;
      for (const auto& [v, k] : e.terms) {
        if (v == q || (k != 1 && k != -1)) continue;
        auto [lo, hi] = s_.box[static_cast<size_t>(v)];
        __int128 w = lo <= -kCountInf || hi >= kCountInf ? __int128(kCountInf) * 4 : __int128(hi) - lo;
        if (w > best_w || (w == best_w && q < best_q)) best = static_cast<long>(i), best_q = q, x = v, kx = k, best_w = w;
      }
    }
    if (best < 0) return false;
    {
      const Pair& p = pairs_[static_cast<size_t>(best)];
      int q = -1;
      long side = definition(p, &q);
      const LinExpr e = s_.atoms[static_cast<size_t>(side)].e;
      int64_t d = p.w + 1;
      erase_pair(p);
      inverted_[static_cast<size_t>(q)] = 1;
      int r = new_var(0, d - 1);
      // r = kx·x + rest ⇒ x = kx·(r − rest).
      LinExpr rest = e;
      rest.terms.erase(std::find_if(rest.terms.begin(), rest.terms.end(), [&](const auto& t) { return t.first == x; }));
      LinExpr by = lin(0, {{r, kx}});
      if (!add_scaled(by, rest, -kx)) return true;
      eliminate(x, by);
      return true;
    }
    return false;
  }

  CountSystem& s_;
  int limit_;
  std::vector<char> inverted_;
  std::vector<int> absorbed_;  ///< absorb steps per variable (a bound against cycles)
  std::vector<Pair> pairs_;
  bool ok_ = true;
};

}  // namespace

bool simplify_for_counting(CountSystem& s, int inverted_limit) {
  Rewriter r(s, inverted_limit);
  return r.run();
}

}  // namespace kdflow::detail

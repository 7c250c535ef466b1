// footprint_search.cpp — exact min/max of an access's byte offset by interval propagation
// and branch and bound (footprint_search.h). TVM's tuned kernels index through many floor
// quotients and remainders by constants (`x / 15`, `x % 15`) over small launch ranges; isl
// solves each such integer program with GMP tableaux and cuts (tens of milliseconds each on
// resnet18_tuned), while bounds propagation fixes a quotient as soon as its argument is
// fixed, so a bisection search over the few free variables finds and proves the optimum
// in a few hundred nodes. Every bound derived is implied by the constraints (sound), a
// leaf is accepted only when every constraint holds at its point, and a subtree is pruned
// only when its objective bound cannot beat the best point found: the result is the exact
// optimum, or GiveUp.

#include "footprint_search.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace kdflow::detail {

namespace {

using I128 = __int128;

constexpr int64_t kMaxCoef = int64_t(1) << 40;  // |coefficient| · |bound| · terms stays far inside I128
constexpr int kMaxRounds = 64;                  // propagation rounds per node (sound when cut short)
constexpr int kMaxDepth = 4000;

struct Con {
  int64_t c = 0;
  std::vector<std::pair<int, int64_t>> t;  // (local variable, coefficient)
};

I128 floor_div(I128 a, I128 b) {  // b > 0
  if (a >= INT64_MIN && a <= INT64_MAX && b <= INT64_MAX) {  // a 64-bit division (most are)
    const int64_t x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
    const int64_t q = x / y;
    return (x % y != 0 && x < 0) ? q - 1 : q;
  }
  I128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
I128 ceil_div(I128 a, I128 b) { return -floor_div(-a, b); }

bool is_inf_lo(int64_t v) { return v <= -kSearchInf; }
bool is_inf_hi(int64_t v) { return v >= kSearchInf; }

class Search {
 public:
  Search(std::vector<Con> cons, std::vector<int64_t> lo, std::vector<int64_t> hi, long budget)
      : cons_(std::move(cons)), lo0_(std::move(lo)), hi0_(std::move(hi)), budget_(budget) {
    of_var_.resize(lo0_.size());
    for (size_t k = 0; k < cons_.size(); ++k)
      for (const auto& [v, a] : cons_[k].t) of_var_[v].push_back(static_cast<int>(k));
    queued_.assign(cons_.size(), 0);
  }

  /// Propagates the starting bounds; false: empty. Sets gave_up_ when a variable stays unbounded.
  bool prepare() {
    if (!propagate(lo0_, hi0_, -1)) return false;
    for (size_t i = 0; i < lo0_.size(); ++i)
      if (is_inf_lo(lo0_[i]) || is_inf_hi(hi0_[i])) gave_up_ = true;
    return true;
  }

  /// The maximum of `f` (local variables); false when no point exists or the search gave up.
  bool maximize(const Con& f, I128* best) {
    f_ = &f;
    found_ = false;
    std::vector<int64_t> lo = lo0_, hi = hi0_;
    split_ = -1;  // the root: lo0_/hi0_ were propagated by prepare(), but start from every constraint
    dfs(lo, hi, 0);
    if (gave_up_ || !found_) return false;
    *best = best_;
    return true;
  }

  bool gave_up() const { return gave_up_; }
  long spent() const { return spent_; }

 private:
  /// Tightens [lo, hi] to a fixpoint (or kMaxRounds evaluations of every constraint); false
  /// when a constraint cannot hold. Only the constraints of a variable whose bound moved are
  /// looked at again; `changed_var` is the one variable a search node split (its parent at a
  /// fixpoint), -1 to start from every constraint.
  bool propagate(std::vector<int64_t>& lo, std::vector<int64_t>& hi, int changed_var) {
    queue_.clear();
    auto enqueue = [&](int k) {
      if (!queued_[k]) queued_[k] = 1, queue_.push_back(k);
    };
    if (changed_var < 0 || !complete_) {
      for (size_t k = 0; k < cons_.size(); ++k) enqueue(static_cast<int>(k));
    } else {
      for (int k : of_var_[changed_var]) enqueue(k);
    }
    const size_t limit = static_cast<size_t>(kMaxRounds) * std::max<size_t>(cons_.size(), 1);
    size_t evaluated = 0;
    bool ok = true;
    complete_ = true;
    for (size_t head = 0; head < queue_.size() && ok; ++head) {
      const Con& k = cons_[queue_[head]];
      queued_[queue_[head]] = 0;
      if (++evaluated > limit) {
        complete_ = false;  // sound when cut short; the next node starts from every constraint
        break;
      }
      spent_ += static_cast<long>(k.t.size()) + 1;
      // Σ a·x + c ≥ 0: the largest value each term can take.
      int ninf = 0;
      I128 fin = 0;
      for (const auto& [v, a] : k.t) {
        if (a > 0 ? is_inf_hi(hi[v]) : is_inf_lo(lo[v])) ++ninf;
        else fin += static_cast<I128>(a) * (a > 0 ? hi[v] : lo[v]);
      }
      if (ninf == 0 && fin + k.c < 0) ok = false;
      if (!ok || ninf > 1) continue;
      for (const auto& [v, a] : k.t) {
        const bool inf = a > 0 ? is_inf_hi(hi[v]) : is_inf_lo(lo[v]);
        if (ninf == 1 && !inf) continue;
        I128 rest = inf ? fin : fin - static_cast<I128>(a) * (a > 0 ? hi[v] : lo[v]);
        I128 need = -static_cast<I128>(k.c) - rest;  // a·x ≥ need
        bool moved = false;
        if (a > 0) {
          I128 n = ceil_div(need, a);
          if (n > lo[v]) lo[v] = n >= kSearchInf ? kSearchInf - 1 : static_cast<int64_t>(n), moved = true;
        } else {
          I128 n = floor_div(-need, -static_cast<I128>(a));
          if (n < hi[v]) hi[v] = n <= -kSearchInf ? -kSearchInf + 1 : static_cast<int64_t>(n), moved = true;
        }
        if (lo[v] > hi[v]) {
          ok = false;
          break;
        }
        if (moved)
          for (int other : of_var_[v]) enqueue(other);
      }
    }
    for (int k : queue_) queued_[k] = 0;  // what was left unexamined
    if (!ok) complete_ = true;             // an empty box: nothing pending matters
    return ok;
  }

  void dfs(std::vector<int64_t>& lo, std::vector<int64_t>& hi, int depth) {
    if (gave_up_) return;
    if (++nodes_ > budget_ || spent_ > budget_ * 64 || depth > kMaxDepth) {
      gave_up_ = true;
      return;
    }
    if (!propagate(lo, hi, split_)) return;
    I128 ub = f_->c;
    for (const auto& [v, a] : f_->t) ub += static_cast<I128>(a) * (a > 0 ? hi[v] : lo[v]);
    if (found_ && ub <= best_) return;
    // A variable with two values left first (the first such): each half fixes it. These are
    // quotients and loop counters, which the other variables are defined through: with
    // `r = 262144·i + 1024·b + t − 802816·q` (TVM 0.19's grid-stride remainders, q in {0, 1}),
    // bisecting the objective r itself never let propagation prove a half empty, and the
    // search spent its whole budget before isl was asked (Relay DenseNet-121: 11 searches of
    // 50,000 nodes); with q fixed, r is linear and the same searches take a few dozen nodes.
    // Else the objective's variable with the widest weighted range, else the widest one.
    int pick = -1;
    I128 key = 0;
    for (size_t v = 0; v < lo.size() && pick < 0; ++v)
      if (static_cast<I128>(hi[v]) - lo[v] == 1) pick = static_cast<int>(v);
    if (pick < 0)
      for (const auto& [v, a] : f_->t) {
        I128 w = static_cast<I128>(hi[v]) - lo[v];
        if (w > 0 && w * (a < 0 ? -a : a) > key) key = w * (a < 0 ? -a : a), pick = v;
      }
    int64_t coef = 0;
    if (pick >= 0) {
      for (const auto& [v, a] : f_->t)
        if (v == pick) coef = a;
    } else {
      for (size_t v = 0; v < lo.size(); ++v) {
        I128 w = static_cast<I128>(hi[v]) - lo[v];
        if (w > key) key = w, pick = static_cast<int>(v);
      }
    }
    if (pick < 0) {  // every variable fixed: a point, if every constraint holds there
      for (const Con& k : cons_) {
        I128 s = k.c;
        for (const auto& [v, a] : k.t) s += static_cast<I128>(a) * lo[v];
        if (s < 0) return;
      }
      if (!found_ || ub > best_) best_ = ub;
      found_ = true;
      return;
    }
    const int64_t l = lo[pick], h = hi[pick];
    const int64_t mid = static_cast<int64_t>(floor_div(static_cast<I128>(l) + h, 2));
    for (int half = 0; half < 2 && !gave_up_; ++half) {
      const bool upper = (half == 0) == (coef >= 0);  // the half where the objective is larger first
      std::vector<int64_t> lo2 = lo, hi2 = hi;
      if (upper) lo2[pick] = mid + 1;
      else hi2[pick] = mid;
      split_ = pick;
      const bool parent_complete = complete_;
      dfs(lo2, hi2, depth + 1);
      complete_ = parent_complete;  // the second child starts from this node's state
    }
    (void)l;
    (void)h;
  }

  std::vector<Con> cons_;
  std::vector<std::vector<int>> of_var_;  ///< per variable, the constraints naming it
  std::vector<int> queue_;                ///< propagate()'s work list (scratch)
  std::vector<char> queued_;              ///< per constraint, whether it is in queue_
  int split_ = -1;                        ///< the variable the node being entered split; -1: none
  bool complete_ = true;                  ///< the last propagation reached its fixpoint
  std::vector<int64_t> lo0_, hi0_;
  long budget_;
  long nodes_ = 0;
  long spent_ = 0;
  bool gave_up_ = false;
  const Con* f_ = nullptr;
  bool found_ = false;
  I128 best_ = 0;
};

}  // namespace

SearchRange search_range(const std::vector<LinConstraint>& cons, std::vector<VarBounds> bounds,
                         const LinExpr& objective, long budget) {
  SearchRange out;
  // Local numbering of the variables used; equalities as two inequalities.
  std::map<int, int> local;
  std::vector<int64_t> lo, hi;
  auto use = [&](int v) -> int {
    auto [it, inserted] = local.emplace(v, static_cast<int>(lo.size()));
    if (inserted) {
      VarBounds b = v >= 0 && static_cast<size_t>(v) < bounds.size() ? bounds[v] : VarBounds{};
      lo.push_back(b.lo);
      hi.push_back(b.hi);
    }
    return it->second;
  };
  auto convert = [&](const LinExpr& e, int64_t sign, Con* c) {
    if (std::abs(e.c) > kSearchInf) return false;
    c->c = sign * e.c;
    for (const auto& [v, a] : e.terms) {
      if (a > kMaxCoef || a < -kMaxCoef) return false;
      c->t.push_back({use(v), sign * a});
    }
    return true;
  };
  std::vector<Con> cs;
  for (const LinConstraint& k : cons) {
    Con c;
    if (!convert(k.e, 1, &c)) return out;
    cs.push_back(c);
    if (k.eq) {
      Con n;
      if (!convert(k.e, -1, &n)) return out;
      cs.push_back(std::move(n));
    }
  }
  Con fmax, fmin;
  if (!convert(objective, 1, &fmax) || !convert(objective, -1, &fmin)) return out;
  for (size_t i = 0; i < lo.size(); ++i)
    if (lo[i] > hi[i]) {
      out.kind = SearchRange::Kind::Empty;
      return out;
    }
  Search s(std::move(cs), std::move(lo), std::move(hi), budget);
  if (!s.prepare()) {
    out.kind = SearchRange::Kind::Empty;
    out.nodes = s.spent();
    return out;
  }
  if (s.gave_up()) return out;
  I128 mx = 0, mn = 0;
  bool has_max = s.maximize(fmax, &mx);
  if (s.gave_up()) return out;
  if (!has_max) {  // the search ran to completion and found no point: empty
    out.kind = SearchRange::Kind::Empty;
    out.nodes = s.spent();
    return out;
  }
  if (!s.maximize(fmin, &mn) || s.gave_up()) return out;
  if (mx > kSearchInf || -mn < -kSearchInf) return out;
  out.kind = SearchRange::Kind::Found;
  out.lo = static_cast<int64_t>(-mn);
  out.hi = static_cast<int64_t>(mx);
  out.nodes = s.spent();
  return out;
}

bool to_dnf(const AffCond& c, size_t limit, std::vector<std::vector<LinConstraint>>* out) {
  out->clear();
  switch (c.op) {
    case AffCond::Op::True: out->emplace_back(); return true;
    case AffCond::Op::False: return true;
    case AffCond::Op::Ge0:
    case AffCond::Op::Eq0: out->push_back({LinConstraint{c.op == AffCond::Op::Eq0, c.e}}); return true;
    case AffCond::Op::Or:
      for (const AffCond& k : c.kids) {
        std::vector<std::vector<LinConstraint>> sub;
        if (!to_dnf(k, limit, &sub)) return false;
        for (auto& s : sub) out->push_back(std::move(s));
        if (out->size() > limit) return false;
      }
      return true;
    case AffCond::Op::And: {
      out->emplace_back();
      for (const AffCond& k : c.kids) {
        std::vector<std::vector<LinConstraint>> sub;
        if (!to_dnf(k, limit, &sub)) return false;
        if (out->size() * sub.size() > limit) return false;
        std::vector<std::vector<LinConstraint>> next;
        for (const auto& a : *out)
          for (const auto& b : sub) {
            std::vector<LinConstraint> both = a;
            both.insert(both.end(), b.begin(), b.end());
            next.push_back(std::move(both));
          }
        *out = std::move(next);
        if (out->empty()) return true;
      }
      return true;
    }
  }
  return false;
}

void append_cond_key(const AffCond& c, std::string* out) {
  *out += static_cast<char>('0' + static_cast<int>(c.op));
  *out += std::to_string(c.e.c);
  for (const auto& [v, k] : c.e.terms) *out += "," + std::to_string(v) + ":" + std::to_string(k);
  *out += "(";
  for (const AffCond& kid : c.kids) append_cond_key(kid, out);
  *out += ")";
}

}  // namespace kdflow::detail

// footprint_isl.cpp — the second stage of the footprint analysis (footprint.h): for one
// launch, build each access's set of touched bytes with isl (iteration domain: launch
// bounds, loop bounds, guards, quotient definitions; access: [offset, offset + size)),
// project it onto the byte offset and read off the exact minimum and maximum; count the
// distinct bytes where that is cheap. One isl_ctx per analysis (IslCtx), bounded by
// isl_ctx_set_max_operations: a blow-up is the reason "isl: too costly", never a hang.
// No isl type leaves this file.

#include <isl/aff.h>
#include <isl/constraint.h>
#include <isl/local_space.h>
#include <isl/space.h>
#include <isl/ctx.h>
#include <isl/ilp.h>
#include <isl/options.h>
#include <isl/set.h>
#include <isl/val.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "footprint_search.h"
#include "kdflow/analysis/footprint.h"

namespace kdflow {

namespace {

constexpr unsigned long kMaxOperations = 2'000'000;  // per footprint; TVM's kernels need < 10^4
constexpr int64_t kMaxLaunchDim = int64_t(1) << 31;

/// The one isl context of an analysis.
class IslCtx {
 public:
  IslCtx() : ctx_(isl_ctx_alloc()) {
    if (ctx_) {
      isl_options_set_on_error(ctx_, ISL_ON_ERROR_CONTINUE);  // errors are results, not stderr
      isl_ctx_set_max_operations(ctx_, kMaxOperations);
    }
  }
  ~IslCtx() {
    if (ctx_) isl_ctx_free(ctx_);
  }
  IslCtx(const IslCtx&) = delete;
  IslCtx& operator=(const IslCtx&) = delete;
  isl_ctx* get() const { return ctx_; }
  /// Starts a new bounded computation.
  void reset() {
    isl_ctx_reset_operations(ctx_);
    isl_ctx_reset_error(ctx_);
  }
  /// The reason of the last failure.
  const char* failure() const {
    return isl_ctx_last_error(ctx_) == isl_error_quota ? reject::kTooCostly : "isl: error";
  }

 private:
  isl_ctx* ctx_;
};

/// Owning isl_set / isl_val handles.
struct SetFree {
  void operator()(isl_set* s) const { isl_set_free(s); }
};
struct ValFree {
  void operator()(isl_val* v) const { isl_val_free(v); }
};
using SetPtr = std::unique_ptr<isl_set, SetFree>;
using ValPtr = std::unique_ptr<isl_val, ValFree>;
struct AffFree {
  void operator()(isl_aff* a) const { isl_aff_free(a); }
};
using AffPtr = std::unique_ptr<isl_aff, AffFree>;

void collect(const LinExpr& e, std::set<int>& out) {
  for (const auto& t : e.terms) out.insert(t.first);
}
void collect(const AffCond& c, std::set<int>& out) {
  collect(c.e, out);
  for (const AffCond& k : c.kids) collect(k, out);
}

struct Range {
  bool empty = true;
  int64_t lo = 0, hi = 0;  // [lo, hi)
};

class Computer {
 public:
  Computer(IslCtx& ctx, int count_variables) : ctx_(ctx), max_count_locals_(count_variables) {}

  Footprint run(const KernelModel& m, size_t param, const LaunchShape& launch) {
    if (param >= m.params.size() || !m.params[param].pointer) return unknown(reject::kUnsupported);
    const ParamModel& pm = m.params[param];
    if (!pm.unknown.empty()) return unknown(pm.unknown);
    for (int d = 0; d < 3; ++d)
      if (launch.grid[d] < 1 || launch.grid[d] > kMaxLaunchDim || launch.block[d] < 1 || launch.block[d] > kMaxLaunchDim)
        return unknown(reject::kUnsupported);
    ctx_.reset();
    // 1. The exact range of each access: min and max of its offset over its domain (an
    //    integer linear program on the domain itself, no projection), plus its size.
    Range reads, writes;
    bool exact = true;
    std::vector<const AffAccess*> live;
    // Unrolled code repeats one access at constant offsets: its range is computed once per
    // (domain, offset without its constant) and shifted.
    struct Known {
      bool empty = false;
      int64_t lo = 0, hi = 0;  ///< of the offset without its constant
      std::optional<std::array<std::array<int64_t, 6>, 2>> corners;  ///< box domains: the launch point at each end
    };
    std::array<Footprint::End, 2> read_ends{}, write_ends{};
    std::map<std::string, Known> known;
    for (const AffAccess& a : pm.accesses) {
      std::string why;
      int64_t l = 0, h = 0;
      std::string key;
      shape_key(a, &key);
      // The access runs, its offset within [l, h]: it joins the ranges.
      std::array<std::array<int64_t, 6>, 2> corners{};
      auto take = [&](int64_t l, int64_t h, const std::optional<std::array<std::array<int64_t, 6>, 2>>& at) {
        exact = exact && a.exact;
        for (Range* r : {a.read ? &reads : nullptr, a.write ? &writes : nullptr}) {
          if (!r) continue;
          std::array<Footprint::End, 2>& ends = r == &reads ? read_ends : write_ends;
          if (r->empty || l < r->lo) ends[0] = Footprint::End{a.line, at ? std::optional((*at)[0]) : std::nullopt};
          if (r->empty || h + a.size > r->hi) ends[1] = Footprint::End{a.line, at ? std::optional((*at)[1]) : std::nullopt};
          r->lo = r->empty ? l : std::min<int64_t>(r->lo, l);
          r->hi = r->empty ? h + a.size : std::max<int64_t>(r->hi, h + a.size);
          r->empty = false;
        }
        live.push_back(&a);
      };
      if (auto it = known.find(key); it != known.end()) {
        if (!it->second.empty) take(it->second.lo + a.offset.c, it->second.hi + a.offset.c, it->second.corners);
        continue;
      }
      Box box = box_range(m, a, launch, &l, &h, &why, &corners);
      const bool boxed = box == Box::Yes;
      if (box == Box::Empty) {  // never runs in this launch
        known[key].empty = true;
        continue;
      }
      if (!why.empty()) return unknown(why);
      if (box == Box::No) {
        // 2. The exact search (footprint_search.h): cheap on TVM's quotient-heavy indexing.
        const Searched found = search(m, a, launch, &l, &h, &why);
        if (found == Searched::Empty) {
          known[key].empty = true;
          continue;
        }
        if (!why.empty()) return unknown(why);
        if (found == Searched::Yes) box = Box::Yes;
      }
      if (box == Box::No) {
        // 3. isl decides what the search gave up on.
        Access acc;
        if (!build(m, a, launch, &acc, &why)) return unknown(why.empty() ? ctx_.failure() : why);
        ValPtr lo(isl_set_min_val(acc.domain.get(), acc.offset.get()));
        if (!lo) return unknown(ctx_.failure());
        if (isl_val_is_nan(lo.get())) {  // an empty domain: never runs in this launch
          known[key].empty = true;
          continue;
        }
        ValPtr hi(isl_set_max_val(acc.domain.get(), acc.offset.get()));
        if (!hi) return unknown(ctx_.failure());
        if (!isl_val_is_int(lo.get()) || !isl_val_is_int(hi.get())) return unknown(reject::kUnbounded);
        l = isl_val_get_num_si(lo.get());
        h = isl_val_get_num_si(hi.get());
      }
      if (l < -kMaxByte || h > kMaxByte) return unknown(reject::kUnbounded);
      std::optional<std::array<std::array<int64_t, 6>, 2>> at;
      if (boxed) at = corners;
      known[key] = Known{false, l - a.offset.c, h - a.offset.c, at};
      take(l, h, at);
    }
    Footprint f;
    f.exact = exact;
    if (!reads.empty) f.read = std::array<int64_t, 2>{reads.lo, reads.hi};
    if (!writes.empty) f.write = std::array<int64_t, 2>{writes.lo, writes.hi};
    f.read_ends = read_ends;
    f.write_ends = write_ends;
    // 2. Distinct bytes, where cheap: project each access onto the bytes it touches and
    //    count, under a smaller operation budget; too costly → no count (never a guess).
    if (exact && !live.empty()) count_all(m, live, launch, reads, writes, pm.elem_size, &f);
    return f;
  }

 private:
  /// An access's domain and offset without the offset's constant, as text: equal texts have
  /// ranges that differ by the constants.
  static void shape_key(const AffAccess& a, std::string* out) {
    detail::append_cond_key(a.domain, out);
    *out += "|";
    for (const auto& [v, k] : a.offset.terms) *out += std::to_string(v) + ":" + std::to_string(k) + ",";
  }
  static constexpr int64_t kMaxByte = int64_t(1) << 60;
  static constexpr unsigned long kCountOperations = 200'000;
  static constexpr size_t kMaxCountAccesses = 64;  // accesses isl unites to count distinct bytes
  static constexpr int64_t kMaxCountSpan = int64_t(1) << 18;
  static constexpr int kMaxCountPieces = 16;
  static constexpr int64_t kMaxCountPoints = int64_t(1) << 21;  // points visited per count
  static constexpr int64_t kMaxCountBitmap = int64_t(1) << 26;  // bytes of range per count    // pieces of a union compared with its range
  static constexpr size_t kMaxDisjuncts = 64;  // conjunctions searched per access before isl decides
  static constexpr long kSearchNodes = 50'000;   // branch-and-bound nodes per conjunction

  struct Access {
    SetPtr domain;  ///< { [vars] : domain and launch bounds }
    AffPtr offset;  ///< { [vars] -> [offset] }
    std::map<int, int> pos;                          ///< model variable → set dimension
    std::vector<std::pair<LinExpr, bool>> bounds;  ///< the launch's constraints (bool: equality)
  };

  enum class Box { No, Yes, Empty };

  /// The fast path: when the domain is a box (every constraint bounds one variable, every
  /// variable bounded on both sides) the offset's min and max are at its corners — exact,
  /// no isl. Box::No when it is not a box (isl decides); `why` on a non-launchable scalar.
  static Box box_range(const KernelModel& m, const AffAccess& a, const LaunchShape& launch, int64_t* lo, int64_t* hi,
                       std::string* why, std::array<std::array<int64_t, 6>, 2>* corners = nullptr) {
    std::map<int, std::pair<int64_t, int64_t>> b;  // var → [min, max]
    auto bound = [&](int v, int64_t l, int64_t h) {
      auto it = b.find(v);
      if (it == b.end()) b.emplace(v, std::make_pair(l, h));
      else it->second = {std::max(it->second.first, l), std::min(it->second.second, h)};
    };
    constexpr int64_t kInf = int64_t(1) << 62;
    bool empty = false;
    // Flatten the domain's conjunction; any `or`, or a constraint on two variables: no box.
    std::vector<const AffCond*> todo{&a.domain};
    while (!todo.empty()) {
      const AffCond* c = todo.back();
      todo.pop_back();
      switch (c->op) {
        case AffCond::Op::True: break;
        case AffCond::Op::False: empty = true; break;
        case AffCond::Op::And:
          for (const AffCond& k : c->kids) todo.push_back(&k);
          break;
        case AffCond::Op::Or: return Box::No;
        case AffCond::Op::Ge0:
        case AffCond::Op::Eq0: {
          if (c->e.terms.size() != 1) return Box::No;
          const auto [v, k] = c->e.terms[0];
          const int64_t c0 = c->e.c;  // k·v + c0 ≥ 0 (= 0)
          auto fdiv = [](int64_t x, int64_t y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); };
          auto cdiv = [&](int64_t x, int64_t y) { return -fdiv(-x, y); };
          if (c->op == AffCond::Op::Eq0) {
            if (c0 % k != 0) empty = true;
            else bound(v, -c0 / k, -c0 / k);
          } else if (k > 0) {
            bound(v, cdiv(-c0, k), kInf);  // v ≥ ⌈−c0/k⌉
          } else {
            bound(v, -kInf, fdiv(c0, -k));  // v ≤ ⌊c0/−k⌋
          }
          break;
        }
      }
    }
    std::set<int> vars;
    collect(a.offset, vars);
    collect(a.domain, vars);
    for (int v : vars) {
      if (v < 0 || static_cast<size_t>(v) >= m.vars.size()) return Box::No;
      const AffVar& av = m.vars[v];
      const int d = av.index;
      switch (av.kind) {
        case AffVar::Kind::BlockIdx: bound(v, 0, launch.grid[d] - 1); break;
        case AffVar::Kind::ThreadIdx: bound(v, 0, launch.block[d] - 1); break;
        case AffVar::Kind::BlockDim: bound(v, launch.block[d], launch.block[d]); break;
        case AffVar::Kind::GridDim: bound(v, launch.grid[d], launch.grid[d]); break;
        case AffVar::Kind::Param:
          if (d < 0 || static_cast<size_t>(d) >= launch.scalars.size() || !launch.scalars[d]) {
            *why = reject::kScalarArgument;
            return Box::No;
          }
          bound(v, *launch.scalars[d], *launch.scalars[d]);
          break;
        case AffVar::Kind::Local: break;
      }
    }
    for (int v : vars)
      if (!b.count(v)) return Box::No;  // a variable with no bound of its own
    for (const auto& [v, r] : b) {
      if (r.first > r.second) empty = true;
      if (r.first <= -kInf || r.second >= kInf) return empty ? Box::Empty : Box::No;  // unbounded: isl decides
    }
    if (empty) return Box::Empty;
    __int128 mn = a.offset.c, mx = a.offset.c;
    for (const auto& [v, k] : a.offset.terms) {
      const auto& r = b.at(v);
      mn += static_cast<__int128>(k) * (k > 0 ? r.first : r.second);
      mx += static_cast<__int128>(k) * (k > 0 ? r.second : r.first);
    }
    if (mn < -kMaxByte || mx > kMaxByte) {
      *why = reject::kUnbounded;
      return Box::No;
    }
    *lo = static_cast<int64_t>(mn);
    *hi = static_cast<int64_t>(mx);
    if (corners) {  // the thread and block at each end: a variable of the offset at its bound, others lowest
      *corners = {};
      for (const auto& [v, r] : b) {
        const AffVar& av = m.vars[static_cast<size_t>(v)];
        if (av.kind != AffVar::Kind::ThreadIdx && av.kind != AffVar::Kind::BlockIdx) continue;
        const size_t slot = static_cast<size_t>(av.index) + (av.kind == AffVar::Kind::BlockIdx ? 3 : 0);
        int64_t k = 0;
        for (const auto& [tv, tk] : a.offset.terms)
          if (tv == v) k = tk;
        (*corners)[0][slot] = k < 0 ? r.second : r.first;
        (*corners)[1][slot] = k > 0 ? r.second : r.first;
      }
    }
    return Box::Yes;
  }

  enum class Searched { Yes, Empty, GiveUp };

  /// The exact min and max of the access's offset by bounds propagation and branch and
  /// bound, without isl; GiveUp when its budget runs out or the domain has too many
  /// disjuncts. `why` on a scalar not known at this launch (as build() would say).
  static Searched search(const KernelModel& m, const AffAccess& a, const LaunchShape& launch, int64_t* lo,
                         int64_t* hi, std::string* why) {
    std::map<int, int> pos;
    std::vector<std::pair<LinExpr, bool>> bounds;
    if (!dims_of(m, a, &pos, why) || !launch_conds(m, pos, launch, &bounds, why)) return Searched::GiveUp;
    std::vector<std::vector<detail::LinConstraint>> dnf;
    if (!detail::to_dnf(a.domain, kMaxDisjuncts, &dnf)) return Searched::GiveUp;
    bool any = false;
    int64_t mn = 0, mx = 0;
    for (auto& conj : dnf) {
      for (const auto& [e, eq] : bounds) conj.push_back({eq, e});
      detail::SearchRange r = detail::search_range(conj, {}, a.offset, kSearchNodes);
      if (r.kind == detail::SearchRange::Kind::GiveUp) return Searched::GiveUp;
      if (r.kind == detail::SearchRange::Kind::Empty) continue;
      mn = any ? std::min(mn, r.lo) : r.lo;
      mx = any ? std::max(mx, r.hi) : r.hi;
      any = true;
    }
    if (!any) return Searched::Empty;
    *lo = mn;
    *hi = mx;
    return Searched::Yes;
  }

  static Footprint unknown(const std::string& why) {
    Footprint f;
    f.unknown = why;
    return f;
  }
  static SetPtr unite(SetPtr a, SetPtr b) {
    if (!a) return b;
    if (!b) return nullptr;
    return SetPtr(isl_set_union(a.release(), b.release()));
  }

  /// The isl dimension of each model variable the access uses (sorted), and the launch's
  /// constraints on them; `why` when a variable is not known at this launch.
  static bool dims_of(const KernelModel& m, const AffAccess& a, std::map<int, int>* pos, std::string* why) {
    std::set<int> vars;
    collect(a.offset, vars);
    collect(a.domain, vars);
    for (int v : vars) {
      if (v < 0 || static_cast<size_t>(v) >= m.vars.size()) {
        *why = reject::kUnsupported;
        return false;
      }
      pos->emplace(v, static_cast<int>(pos->size()));
    }
    return true;
  }

  /// { [dims] : e >= 0 } (or e = 0) in `space` (consumed), built through isl's API.
  static isl_set* constraint_set(isl_space* space, const LinExpr& e, bool eq, const std::map<int, int>& pos) {
    isl_ctx* ctx = isl_space_get_ctx(space);
    isl_local_space* ls = isl_local_space_from_space(isl_space_copy(space));
    isl_constraint* c = eq ? isl_constraint_alloc_equality(ls) : isl_constraint_alloc_inequality(ls);
    c = isl_constraint_set_constant_val(c, isl_val_int_from_si(ctx, e.c));
    for (const auto& [v, k] : e.terms)
      c = isl_constraint_set_coefficient_val(c, isl_dim_set, pos.at(v), isl_val_int_from_si(ctx, k));
    isl_basic_set* b = isl_basic_set_universe(space);
    return isl_set_from_basic_set(isl_basic_set_add_constraint(b, c));
  }

  /// The set of `c` in `space` (consumed): And → intersection, Or → union.
  static isl_set* cond_set(isl_space* space, const AffCond& c, const std::map<int, int>& pos) {
    switch (c.op) {
      case AffCond::Op::True: return isl_set_universe(space);
      case AffCond::Op::False: return isl_set_empty(space);
      case AffCond::Op::Ge0: return constraint_set(space, c.e, false, pos);
      case AffCond::Op::Eq0: return constraint_set(space, c.e, true, pos);
      case AffCond::Op::And:
      case AffCond::Op::Or: {
        const bool conj = c.op == AffCond::Op::And;
        isl_set* s = conj ? isl_set_universe(isl_space_copy(space)) : isl_set_empty(isl_space_copy(space));
        for (const AffCond& k : c.kids) {
          isl_set* ks = cond_set(isl_space_copy(space), k, pos);
          s = conj ? isl_set_intersect(s, ks) : isl_set_union(s, ks);
        }
        isl_space_free(space);
        return s;
      }
    }
    isl_space_free(space);
    return nullptr;
  }

  /// The launch bounds of each variable as constraints (BlockIdx < grid, ThreadIdx < block,
  /// BlockDim/GridDim/Param fixed); `why` when a scalar is not known at this launch.
  static bool launch_conds(const KernelModel& m, const std::map<int, int>& pos, const LaunchShape& launch,
                           std::vector<std::pair<LinExpr, bool>>* out, std::string* why) {
    auto lin = [](int v, int64_t k, int64_t c) {
      LinExpr e;
      e.c = c;
      e.terms.push_back({v, k});
      return e;
    };
    for (const auto& [v, p] : pos) {
      (void)p;
      const AffVar& av = m.vars[v];
      const int d = av.index;
      switch (av.kind) {
        case AffVar::Kind::BlockIdx:
          out->push_back({lin(v, 1, 0), false});
          out->push_back({lin(v, -1, launch.grid[d] - 1), false});
          break;
        case AffVar::Kind::ThreadIdx:
          out->push_back({lin(v, 1, 0), false});
          out->push_back({lin(v, -1, launch.block[d] - 1), false});
          break;
        case AffVar::Kind::BlockDim: out->push_back({lin(v, 1, -launch.block[d]), true}); break;
        case AffVar::Kind::GridDim: out->push_back({lin(v, 1, -launch.grid[d]), true}); break;
        case AffVar::Kind::Param:
          if (d < 0 || static_cast<size_t>(d) >= launch.scalars.size() || !launch.scalars[d]) {
            *why = reject::kScalarArgument;
            return false;
          }
          out->push_back({lin(v, 1, -*launch.scalars[d]), true});
          break;
        case AffVar::Kind::Local: break;
      }
    }
    return true;
  }

  /// The access's domain with `extra` set dimensions after the variables (for the touched
  /// byte), intersected with the launch bounds.
  isl_set* domain_set(const AffAccess& a, const std::map<int, int>& pos,
                      const std::vector<std::pair<LinExpr, bool>>& bounds, unsigned extra) {
    isl_space* space = isl_space_set_alloc(ctx_.get(), 0, static_cast<unsigned>(pos.size()) + extra);
    isl_set* s = cond_set(isl_space_copy(space), a.domain, pos);
    for (const auto& [e, eq] : bounds) s = isl_set_intersect(s, constraint_set(isl_space_copy(space), e, eq, pos));
    isl_space_free(space);
    return s;
  }

  bool build(const KernelModel& m, const AffAccess& a, const LaunchShape& launch, Access* out, std::string* why) {
    std::map<int, int> pos;
    std::vector<std::pair<LinExpr, bool>> bounds;
    if (!dims_of(m, a, &pos, why) || !launch_conds(m, pos, launch, &bounds, why)) return false;
    out->domain.reset(domain_set(a, pos, bounds, 0));
    isl_space* space = isl_space_set_alloc(ctx_.get(), 0, static_cast<unsigned>(pos.size()));
    isl_aff* off = isl_aff_zero_on_domain(isl_local_space_from_space(space));
    off = isl_aff_set_constant_val(off, isl_val_int_from_si(ctx_.get(), a.offset.c));
    for (const auto& [v, k] : a.offset.terms)
      off = isl_aff_set_coefficient_val(off, isl_dim_in, pos.at(v), isl_val_int_from_si(ctx_.get(), k));
    out->offset.reset(off);
    out->pos = std::move(pos);
    out->bounds = std::move(bounds);
    return out->domain && out->offset;
  }

  /// { [b] : some point of the access's domain touches byte b }
  SetPtr touched(const AffAccess& a, const Access& acc) {
    const int n = static_cast<int>(acc.pos.size());
    std::map<int, int> pos = acc.pos;
    const int b = -1;  // the byte: dimension n
    pos.emplace(b, n);
    isl_space* space = isl_space_set_alloc(ctx_.get(), 0, static_cast<unsigned>(n) + 1);
    isl_set* s = domain_set(a, acc.pos, acc.bounds, 1);
    LinExpr lo = a.offset, hi = a.offset;  // b − offset ≥ 0, offset + size − 1 − b ≥ 0
    for (auto& t : lo.terms) t.second = -t.second;
    lo.c = -lo.c;
    lo.terms.push_back({b, 1});
    std::sort(lo.terms.begin(), lo.terms.end());
    hi.c += a.size - 1;
    hi.terms.push_back({b, -1});
    std::sort(hi.terms.begin(), hi.terms.end());
    s = isl_set_intersect(s, constraint_set(isl_space_copy(space), lo, false, pos));
    s = isl_set_intersect(s, constraint_set(isl_space_copy(space), hi, false, pos));
    isl_space_free(space);
    if (!s) return nullptr;
    return SetPtr(isl_set_project_out(s, isl_dim_set, 0, static_cast<unsigned>(n)));
  }

  static bool holds(const AffCond& c, const std::vector<int64_t>& val) {
    switch (c.op) {
      case AffCond::Op::True: return true;
      case AffCond::Op::False: return false;
      case AffCond::Op::Ge0: return eval(c.e, val) >= 0;
      case AffCond::Op::Eq0: return eval(c.e, val) == 0;
      case AffCond::Op::And:
        for (const AffCond& k : c.kids)
          if (!holds(k, val)) return false;
        return true;
      case AffCond::Op::Or:
        for (const AffCond& k : c.kids)
          if (holds(k, val)) return true;
        return false;
    }
    return false;
  }
  static __int128 eval(const LinExpr& e, const std::vector<int64_t>& val) {
    __int128 s = e.c;
    for (const auto& [v, k] : e.terms) s += static_cast<__int128>(k) * val[v];
    return s;
  }

  /// Distinct bytes by visiting every point: accesses over launch variables only (no loop or
  /// quotient variable) have a finite box of points, and marking each point's bytes in a
  /// bitmap of the range is exact and, up to kMaxCountPoints points, far cheaper than isl's
  /// projection and set comparison. False (isl decides) past that budget.
  static bool count_by_visit(const KernelModel& m, const std::vector<const AffAccess*>& live,
                             const LaunchShape& launch, const Range& reads, const Range& writes, int64_t elem_size,
                             Footprint* f) {
    const int64_t lo_bytes = reads.empty ? writes.lo : writes.empty ? reads.lo : std::min(reads.lo, writes.lo);
    const int64_t hi_bytes = reads.empty ? writes.hi : writes.empty ? reads.hi : std::max(reads.hi, writes.hi);
    if (hi_bytes - lo_bytes > kMaxCountBitmap) return false;
    // Whole elements: when every access touches one element at an element-aligned offset,
    // one mark per element (a quarter of the marking and summing for float32).
    int64_t unit = elem_size > 1 && lo_bytes % elem_size == 0 && hi_bytes % elem_size == 0 ? elem_size : 1;
    for (const AffAccess* a : live) {
      if (unit == 1) break;
      bool aligned = a->size == unit && a->offset.c % unit == 0;
      for (const auto& [v, k] : a->offset.terms) aligned = aligned && k % unit == 0;
      if (!aligned) unit = 1;
    }
    std::vector<AffAccess> scaled;  // the accesses in elements: offsets / unit, size 1
    if (unit > 1)
      for (const AffAccess* a : live) {
        AffAccess e = *a;
        e.offset.c /= unit;
        for (auto& t : e.offset.terms) t.second /= unit;
        e.size = 1;
        scaled.push_back(std::move(e));
      }
    const int64_t lo = lo_bytes / unit, hi = hi_bytes / unit;
    int64_t points = 0;
    struct Dim {
      int var;
      int64_t lo, hi;
    };
    std::vector<std::vector<Dim>> dims(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
      std::set<int> vars;
      collect(live[i]->offset, vars);
      collect(live[i]->domain, vars);
      int64_t n = 1;
      for (int v : vars) {
        const AffVar& av = m.vars[v];
        const int d = av.index;
        Dim dim{v, 0, 0};
        switch (av.kind) {
          case AffVar::Kind::BlockIdx: dim.hi = launch.grid[d] - 1; break;
          case AffVar::Kind::ThreadIdx: dim.hi = launch.block[d] - 1; break;
          case AffVar::Kind::BlockDim: dim.lo = dim.hi = launch.block[d]; break;
          case AffVar::Kind::GridDim: dim.lo = dim.hi = launch.grid[d]; break;
          case AffVar::Kind::Param:
            if (d < 0 || static_cast<size_t>(d) >= launch.scalars.size() || !launch.scalars[d]) return false;
            dim.lo = dim.hi = *launch.scalars[d];
            break;
          case AffVar::Kind::Local: return false;
        }
        n *= dim.hi - dim.lo + 1;
        if (n > kMaxCountPoints) return false;
        dims[i].push_back(dim);
      }
      points += n;
      if (points > kMaxCountPoints) return false;
    }
    // bit 0: read, bit 1: written. One buffer per thread, reused: a fresh one per count costs
    // more in page faults than the marking itself on multi-megabyte weights.
    thread_local std::vector<uint8_t> mark_buffer;
    if (mark_buffer.size() < static_cast<size_t>(hi - lo)) mark_buffer.resize(static_cast<size_t>(hi - lo));
    std::memset(mark_buffer.data(), 0, static_cast<size_t>(hi - lo));
    struct Marks {
      uint8_t* p;
      size_t n;
      uint8_t* data() { return p; }
      size_t size() const { return n; }
      uint8_t& operator[](size_t i) { return p[i]; }
    } mark{mark_buffer.data(), static_cast<size_t>(hi - lo)};
    std::vector<int64_t> val(m.vars.size(), 0);
    for (size_t i = 0; i < live.size(); ++i) {
      const AffAccess& a = unit > 1 ? scaled[i] : *live[i];
      std::vector<Dim>& ds = dims[i];
      const uint8_t m = static_cast<uint8_t>((a.read ? 1 : 0) | (a.write ? 2 : 0));
      auto mark_at = [&](__int128 at) {
        if (at < lo || at + a.size > hi) return false;  // outside the proven range: never expected
        uint8_t* p = mark.data() + static_cast<size_t>(at - lo);
        for (int64_t b = 0; b < a.size; ++b) p[b] |= m;
        return true;
      };
      // A conjunctive domain: along the first variable every constraint is one interval, so
      // each row of points is marked without testing the domain point by point.
      std::vector<std::vector<detail::LinConstraint>> dnf;
      const bool rows = !ds.empty() && detail::to_dnf(a.domain, 1, &dnf);
      if (rows && dnf.empty()) continue;  // never runs
      const int x0 = ds.empty() ? -1 : ds[0].var;
      auto coef = [x0](const LinExpr& e) {
        for (const auto& [v, k] : e.terms)
          if (v == x0) return k;
        return int64_t(0);
      };
      for (const Dim& d : ds) val[d.var] = d.lo;
      for (;;) {
        if (rows) {
          val[x0] = 0;
          __int128 from = ds[0].lo, to = ds[0].hi;
          for (const detail::LinConstraint& k : dnf[0]) {
            const __int128 base = eval(k.e, val);
            const int64_t c = coef(k.e);
            auto fdiv = [](__int128 x, __int128 y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); };
            if (k.eq) {
              if (c == 0) {
                if (base != 0) from = to + 1;
              } else if (base % c != 0) {
                from = to + 1;
              } else {
                from = std::max(from, -base / c);
                to = std::min(to, -base / c);
              }
            } else if (c > 0) {
              from = std::max(from, -fdiv(base, c));  // x ≥ ⌈−base/c⌉
            } else if (c < 0) {
              to = std::min(to, fdiv(base, -c));      // x ≤ ⌊base/−c⌋
            } else if (base < 0) {
              from = to + 1;
            }
          }
          const __int128 ob = eval(a.offset, val);
          const int64_t c0 = coef(a.offset);
          if (from <= to && c0 != 0 && (c0 < 0 ? -c0 : c0) <= a.size) {
            // Consecutive points overlap or touch: one contiguous range of bytes.
            const __int128 first = ob + c0 * (c0 > 0 ? from : to), last = ob + c0 * (c0 > 0 ? to : from) + a.size;
            if (first < lo || last > hi) return false;
            uint8_t* p = mark.data() + static_cast<size_t>(first - lo);
            const size_t n = static_cast<size_t>(last - first);
            for (size_t b = 0; b < n; ++b) p[b] |= m;
          } else if (from <= to && c0 == 0) {
            if (!mark_at(ob)) return false;
          } else if (from <= to) {
            // Strided: the row's extremes are in range, so every point between is.
            const __int128 a0 = ob + c0 * from, a1 = ob + c0 * to;
            if (std::min(a0, a1) < lo || std::max(a0, a1) + a.size > hi) return false;
            uint8_t* p = mark.data() + static_cast<size_t>(a0 - lo);
            for (__int128 x = from; x <= to; ++x, p += c0)
              for (int64_t b = 0; b < a.size; ++b) p[b] |= m;
          }
          val[x0] = ds[0].lo;
        } else if (holds(a.domain, val) && !mark_at(eval(a.offset, val))) {
          return false;
        }
        size_t j = rows ? 1 : 0;  // the next point or row (odometer)
        for (; j < ds.size(); ++j) {
          if (val[ds[j].var] < ds[j].hi) {
            ++val[ds[j].var];
            break;
          }
          val[ds[j].var] = ds[j].lo;
        }
        if (j == ds.size()) break;
      }
    }
    int64_t nr = 0, nw = 0, nu = 0;
    // Eight marks a word: bit 0 of each byte read, bit 1 written. Each byte of `x & kLow` is
    // 0 or 1; multiplying by kLow sums the eight into the top byte (no popcount instruction
    // is assumed of the target).
    constexpr uint64_t kLow = 0x0101010101010101ull;
    auto sum8 = [](uint64_t x) { return static_cast<int64_t>(((x & kLow) * kLow) >> 56); };
    size_t k = 0;
    for (; k + 8 <= mark.size(); k += 8) {
      uint64_t w;
      std::memcpy(&w, mark.data() + k, 8);
      if (w == 0) continue;
      nr += sum8(w);
      nw += sum8(w >> 1);
      nu += sum8(w | (w >> 1));
    }
    for (; k < mark.size(); ++k) {
      nr += mark[k] & 1;
      nw += mark[k] >> 1;
      nu += mark[k] != 0;
    }
    nr *= unit, nw *= unit, nu *= unit;
    if (!reads.empty) f->read_bytes = nr;
    if (!writes.empty) f->write_bytes = nw;
    if (elem_size > 0 && nu % elem_size == 0) f->elements = nu / elem_size;
    return true;
  }

  void count_all(const KernelModel& m, const std::vector<const AffAccess*>& live, const LaunchShape& launch,
                 const Range& reads, const Range& writes, int64_t elem_size, Footprint* f) {
    if (max_count_locals_ == 0 && count_by_visit(m, live, launch, reads, writes, elem_size, f)) return;
    // A union of hundreds of accesses (an unrolled tile: resnet18_tuned's winograd output
    // transform reads bgemm 324 times) exhausts isl's operation budget every time, after
    // ~10 ms each: not attempted (the span stays exact, the count unknown, as before).
    if (live.size() > kMaxCountAccesses) return;
    isl_ctx_set_max_operations(ctx_.get(), kCountOperations);
    ctx_.reset();
    SetPtr r, w;
    bool ok = true;
    // Projections through loop and quotient variables (`/`, `%`, `>>`, `&`) cost isl far
    // more than the operation budget shows: past the limit, only the span, no count.
    for (const AffAccess* a : live) {
      std::set<int> vars;
      collect(a->offset, vars);
      collect(a->domain, vars);
      int locals = 0;
      for (int v : vars) locals += m.vars[v].kind == AffVar::Kind::Local;
      if (locals > max_count_locals_) ok = false;
    }
    for (const AffAccess* a : live) {
      if (!ok) break;
      Access acc;
      std::string why;
      if (!build(m, *a, launch, &acc, &why)) {
        ok = false;
        break;
      }
      SetPtr bytes = touched(*a, acc);
      if (!bytes) {
        ok = false;
        break;
      }
      if (a->read) r = unite(std::move(r), SetPtr(isl_set_copy(bytes.get())));
      if (a->write) w = unite(std::move(w), std::move(bytes));
      if ((a->read && !r) || (a->write && !w)) {
        ok = false;
        break;
      }
    }
    if (ok) {
      if (r) f->read_bytes = count(r, reads);
      if (w) f->write_bytes = count(w, writes);
      if (r && w) {
        Range all{false, std::min(reads.lo, writes.lo), std::max(reads.hi, writes.hi)};
        SetPtr u(isl_set_union(r.release(), w.release()));
        if (u) {
          auto n = count(u, all);
          if (n && elem_size > 0 && *n % elem_size == 0) f->elements = *n / elem_size;
        }
      } else {
        auto n = r ? f->read_bytes : f->write_bytes;
        if (n && elem_size > 0 && *n % elem_size == 0) f->elements = *n / elem_size;
      }
    }
    isl_ctx_set_max_operations(ctx_.get(), kMaxOperations);
    ctx_.reset();
  }

  /// The number of distinct bytes, when cheap: the whole range, or isl's count.
  std::optional<int64_t> count(const SetPtr& s, const Range& r) {
    if (!s) return std::nullopt;
    LinExpr lo, hi;  // b − lo ≥ 0, hi − 1 − b ≥ 0
    lo.c = -r.lo;
    lo.terms.push_back({0, 1});
    hi.c = r.hi - 1;
    hi.terms.push_back({0, -1});
    const std::map<int, int> pos{{0, 0}};
    isl_space* space = isl_space_set_alloc(ctx_.get(), 0, 1);
    SetPtr whole(isl_set_intersect(constraint_set(isl_space_copy(space), lo, false, pos),
                                   constraint_set(isl_space_copy(space), hi, false, pos)));
    isl_space_free(space);
    if (!whole) return std::nullopt;
    if (isl_set_n_basic_set(s.get()) > kMaxCountPieces) return std::nullopt;
    isl_bool eq = isl_set_is_equal(s.get(), whole.get());
    if (eq == isl_bool_true) return r.hi - r.lo;
    if (eq == isl_bool_error) return std::nullopt;
    ValPtr n(isl_set_count_val(s.get()));
    if (!n || !isl_val_is_int(n.get())) return std::nullopt;
    return isl_val_get_num_si(n.get());
  }

  IslCtx& ctx_;
  int max_count_locals_;
};

}  // namespace

Footprint compute_footprint(const KernelModel& model, size_t param, const LaunchShape& launch, int count_variables) {
  IslCtx ctx;
  if (!ctx.get()) {
    Footprint f;
    f.unknown = "isl: no context";
    return f;
  }
  return Computer(ctx, count_variables).run(model, param, launch);
}

LaunchShape launch_shape(const Kernel& k) {
  LaunchShape launch;
  launch.grid = k.grid;
  launch.block = k.block;
  for (const Arg& a : k.args)
    launch.scalars.push_back(a.kind == Arg::Kind::Int ? std::optional<int64_t>(a.int_value) : std::nullopt);
  return launch;
}

std::string scalars_key(const LaunchShape& launch) {
  std::string key;
  for (const std::optional<int64_t>& s : launch.scalars) key += s ? "|" + std::to_string(*s) : std::string("|-");
  return key;
}

void attach_footprints(Dataflow& df, const std::vector<KernelModel>& models, int jobs,
                       const std::vector<const KernelModel*>* launch_models) {
  // 1. The distinct launches, in first-launch order: (model, shape, which arguments).
  struct Work {
    const KernelModel* model = nullptr;
    LaunchShape launch;
    std::vector<bool> pointer;                 ///< per argument: a buffer with a modelled pointer parameter
    std::vector<std::optional<Footprint>> out;  ///< per argument
  };
  std::vector<Work> work;
  std::map<std::string, size_t> index;  // launch key → work item
  std::vector<std::pair<Kernel*, size_t>> uses;
  for (size_t ki = 0; ki < df.kernels.size(); ++ki) {
    Kernel& k = df.kernels[ki];
    if (k.device_function < 0 || static_cast<size_t>(k.device_function) >= models.size()) continue;
    const KernelModel* own = launch_models && ki < launch_models->size() ? (*launch_models)[ki] : nullptr;
    const KernelModel& m = own ? *own : models[k.device_function];
    if (m.name.empty()) continue;
    LaunchShape launch = launch_shape(k);
    // A launch's own model is keyed apart from its function's (the scalars are in both keys).
    std::string key = fmt::format("{}{}|{}|{}{}", own ? "*" : "", m.name, fmt::join(k.grid, ","),
                                  fmt::join(k.block, ","), scalars_key(launch));
    auto [it, inserted] = index.emplace(key, work.size());
    if (inserted) {
      Work w;
      w.model = &m;
      w.launch = std::move(launch);
      for (size_t j = 0; j < k.args.size(); ++j)
        w.pointer.push_back(j < m.params.size() && m.params[j].pointer && k.args[j].kind == Arg::Kind::Buffer);
      w.out.resize(k.args.size());
      work.push_back(std::move(w));
    }
    uses.push_back({&k, it->second});
  }
  // 2. Each distinct launch once, on `jobs` threads taking the next item in turn; each
  //    thread has its own isl context. Results land in their item: order-independent.
  auto worker = [&](std::atomic<size_t>* next) {
    IslCtx ctx;
    Computer computer(ctx, kCountVariables);
    for (size_t i; (i = next->fetch_add(1)) < work.size();) {
      Work& w = work[i];
      for (size_t j = 0; j < w.pointer.size(); ++j) {
        if (!w.pointer[j]) continue;
        if (!ctx.get()) {
          w.out[j] = Footprint{};
          w.out[j]->unknown = "isl: no context";
        } else {
          w.out[j] = computer.run(*w.model, j, w.launch);
        }
      }
    }
  };
  std::atomic<size_t> next{0};
  const size_t threads = std::min<size_t>(jobs > 1 ? static_cast<size_t>(jobs) : 1, work.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker, &next);
  worker(&next);
  for (std::thread& t : pool) t.join();
  // 3. Every launch gets its item's footprints.
  for (auto& [k, i] : uses)
    for (size_t j = 0; j < k->args.size() && j < work[i].out.size(); ++j)
      if (k->args[j].kind == Arg::Kind::Buffer) k->args[j].footprint = work[i].out[j];
}

}  // namespace kdflow

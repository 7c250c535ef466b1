// footprint_isl.cpp — the second stage of the footprint analysis (footprint.h): for one
// launch, build each access's set of touched bytes with isl (iteration domain: launch
// bounds, loop bounds, guards, quotient definitions; access: [offset, offset + size)),
// project it onto the byte offset and read off the exact minimum and maximum; count the
// distinct bytes where that is cheap. One isl_ctx per analysis (IslCtx), bounded by
// isl_ctx_set_max_operations: a blow-up is the reason "isl: too costly", never a hang.
// No isl type leaves this file.

#include <isl/aff.h>
#include <isl/ctx.h>
#include <isl/ilp.h>
#include <isl/options.h>
#include <isl/set.h>
#include <isl/val.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>

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

void text(std::ostringstream& o, const LinExpr& e) {
  o << e.c;
  for (const auto& t : e.terms) o << (t.second < 0 ? " - " : " + ") << (t.second < 0 ? -t.second : t.second) << "*v" << t.first;
}
void text(std::ostringstream& o, const AffCond& c) {
  switch (c.op) {
    case AffCond::Op::True: o << "0 = 0"; return;
    case AffCond::Op::False: o << "1 = 0"; return;
    case AffCond::Op::Ge0: text(o, c.e); o << " >= 0"; return;
    case AffCond::Op::Eq0: text(o, c.e); o << " = 0"; return;
    case AffCond::Op::And:
    case AffCond::Op::Or:
      o << "(";
      for (size_t i = 0; i < c.kids.size(); ++i) {
        if (i) o << (c.op == AffCond::Op::And ? " and " : " or ");
        o << "(";
        text(o, c.kids[i]);
        o << ")";
      }
      o << ")";
      return;
  }
}
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
    for (const AffAccess& a : pm.accesses) {
      std::string why;
      int64_t l = 0, h = 0;
      Box box = box_range(m, a, launch, &l, &h, &why);
      if (box == Box::Empty) continue;  // never runs in this launch
      if (!why.empty()) return unknown(why);
      if (box == Box::No) {
        Access acc;
        if (!build(m, a, launch, &acc, &why)) return unknown(why.empty() ? ctx_.failure() : why);
        ValPtr lo(isl_set_min_val(acc.domain.get(), acc.offset.get()));
        if (!lo) return unknown(ctx_.failure());
        if (isl_val_is_nan(lo.get())) continue;  // an empty domain: never runs in this launch
        ValPtr hi(isl_set_max_val(acc.domain.get(), acc.offset.get()));
        if (!hi) return unknown(ctx_.failure());
        if (!isl_val_is_int(lo.get()) || !isl_val_is_int(hi.get())) return unknown(reject::kUnbounded);
        l = isl_val_get_num_si(lo.get());
        h = isl_val_get_num_si(hi.get());
      }
      if (l < -kMaxByte || h > kMaxByte) return unknown(reject::kUnbounded);
      exact = exact && a.exact;
      for (Range* r : {a.read ? &reads : nullptr, a.write ? &writes : nullptr}) {
        if (!r) continue;
        r->lo = r->empty ? l : std::min<int64_t>(r->lo, l);
        r->hi = r->empty ? h + a.size : std::max<int64_t>(r->hi, h + a.size);
        r->empty = false;
      }
      live.push_back(&a);
    }
    Footprint f;
    f.exact = exact;
    if (!reads.empty) f.read = std::array<int64_t, 2>{reads.lo, reads.hi};
    if (!writes.empty) f.write = std::array<int64_t, 2>{writes.lo, writes.hi};
    // 2. Distinct bytes, where cheap: project each access onto the bytes it touches and
    //    count, under a smaller operation budget; too costly → no count (never a guess).
    if (exact && !live.empty()) count_all(m, live, launch, reads, writes, pm.elem_size, &f);
    return f;
  }

 private:
  static constexpr int64_t kMaxByte = int64_t(1) << 60;
  static constexpr unsigned long kCountOperations = 200'000;
  static constexpr int64_t kMaxCountSpan = int64_t(1) << 18;

  struct Access {
    SetPtr domain;  ///< { [vars] : domain and launch bounds }
    AffPtr offset;  ///< { [vars] -> [offset] }
    std::string vars, constraints, offset_text;
  };

  enum class Box { No, Yes, Empty };

  /// The fast path: when the domain is a box (every constraint bounds one variable, every
  /// variable bounded on both sides) the offset's min and max are at its corners — exact,
  /// no isl. Box::No when it is not a box (isl decides); `why` on a non-launchable scalar.
  static Box box_range(const KernelModel& m, const AffAccess& a, const LaunchShape& launch, int64_t* lo, int64_t* hi,
                       std::string* why) {
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
    return Box::Yes;
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

  bool build(const KernelModel& m, const AffAccess& a, const LaunchShape& launch, Access* out, std::string* why) {
    std::set<int> vars;
    collect(a.offset, vars);
    collect(a.domain, vars);
    std::ostringstream names, o;
    bool first = true;
    for (int v : vars) {
      names << (first ? "" : ", ") << "v" << v;
      first = false;
    }
    text(o, a.domain);
    for (int v : vars) {
      if (v < 0 || static_cast<size_t>(v) >= m.vars.size()) {
        *why = reject::kUnsupported;
        return false;
      }
      const AffVar& av = m.vars[v];
      int d = av.index;
      switch (av.kind) {
        case AffVar::Kind::BlockIdx: o << " and 0 <= v" << v << " < " << launch.grid[d]; break;
        case AffVar::Kind::ThreadIdx: o << " and 0 <= v" << v << " < " << launch.block[d]; break;
        case AffVar::Kind::BlockDim: o << " and v" << v << " = " << launch.block[d]; break;
        case AffVar::Kind::GridDim: o << " and v" << v << " = " << launch.grid[d]; break;
        case AffVar::Kind::Param:
          if (d < 0 || static_cast<size_t>(d) >= launch.scalars.size() || !launch.scalars[d]) {
            *why = reject::kScalarArgument;
            return false;
          }
          o << " and v" << v << " = " << *launch.scalars[d];
          break;
        case AffVar::Kind::Local: break;
      }
    }
    std::ostringstream off;
    text(off, a.offset);
    out->vars = names.str();
    out->constraints = o.str();
    out->offset_text = off.str();
    std::string set = "{ [" + out->vars + "] : " + out->constraints + " }";
    std::string aff = "{ [" + out->vars + "] -> [(" + out->offset_text + ")] }";
    out->domain.reset(isl_set_read_from_str(ctx_.get(), set.c_str()));
    out->offset.reset(isl_aff_read_from_str(ctx_.get(), aff.c_str()));
    return out->domain && out->offset;
  }

  /// { [b] : some point of the access's domain touches byte b }
  SetPtr touched(const AffAccess& a, const Access& acc) {
    std::string sep = acc.vars.empty() ? "" : ", ";
    std::string text = "{ [" + acc.vars + sep + "b] : " + acc.constraints + " and " + acc.offset_text + " <= b <= " +
                       acc.offset_text + " + " + std::to_string(a.size - 1) + " }";
    SetPtr s(isl_set_read_from_str(ctx_.get(), text.c_str()));
    if (!s) return nullptr;
    size_t n = std::count(acc.vars.begin(), acc.vars.end(), 'v');
    return SetPtr(isl_set_project_out(s.release(), isl_dim_set, 0, static_cast<unsigned>(n)));
  }

  void count_all(const KernelModel& m, const std::vector<const AffAccess*>& live, const LaunchShape& launch,
                 const Range& reads, const Range& writes, int64_t elem_size, Footprint* f) {
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
    std::string text = fmt::format("{{ [b] : {} <= b < {} }}", r.lo, r.hi);
    SetPtr whole(isl_set_read_from_str(ctx_.get(), text.c_str()));
    if (!whole) return std::nullopt;
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

void attach_footprints(Dataflow& df, const std::vector<KernelModel>& models) {
  IslCtx ctx;
  Computer computer(ctx, kCountVariables);
  std::map<std::string, std::vector<std::optional<Footprint>>> cache;  // launch key → per argument
  for (Kernel& k : df.kernels) {
    if (k.device_function < 0 || static_cast<size_t>(k.device_function) >= models.size()) continue;
    const KernelModel& m = models[k.device_function];
    if (m.name.empty()) continue;
    LaunchShape launch;
    launch.grid = k.grid;
    launch.block = k.block;
    std::string key = fmt::format("{}|{}|{}", m.name, fmt::join(k.grid, ","), fmt::join(k.block, ","));
    for (const Arg& a : k.args) {
      if (a.kind == Arg::Kind::Int) {
        launch.scalars.push_back(a.int_value);
        key += fmt::format("|{}", a.int_value);
      } else {
        launch.scalars.push_back(std::nullopt);
        key += "|-";
      }
    }
    auto [it, inserted] = cache.emplace(key, std::vector<std::optional<Footprint>>());
    if (inserted) {
      for (size_t j = 0; j < k.args.size(); ++j) {
        std::optional<Footprint> f;
        if (j < m.params.size() && m.params[j].pointer && k.args[j].kind == Arg::Kind::Buffer) {
          if (!ctx.get()) {
            f = Footprint{};
            f->unknown = "isl: no context";
          } else {
            f = computer.run(m, j, launch);
          }
        }
        it->second.push_back(std::move(f));
      }
    }
    for (size_t j = 0; j < k.args.size() && j < it->second.size(); ++j)
      if (k.args[j].kind == Arg::Kind::Buffer) k.args[j].footprint = it->second[j];
  }
}

}  // namespace kdflow

// footprint_isl.cpp — the second stage of the footprint analysis (footprint.h): for one
// launch, build each access's set of touched bytes with isl (iteration domain: launch
// bounds, loop bounds, guards, quotient definitions; access: [offset, offset + size)),
// project it onto the byte offset and read off the exact minimum and maximum; count the
// distinct bytes where that is cheap. One isl_ctx per analysis (IslCtx), bounded by
// isl_ctx_set_max_operations: a blow-up is the reason "isl: too costly", never a hang.
// No isl type leaves this file.

#include <isl/ctx.h>
#include <isl/ilp.h>
#include <isl/options.h>
#include <isl/set.h>
#include <isl/val.h>

#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "kdflow/footprint.h"

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
SetPtr copy(const SetPtr& s) { return SetPtr(isl_set_copy(s.get())); }

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
  explicit Computer(IslCtx& ctx) : ctx_(ctx) {}

  Footprint run(const KernelModel& m, size_t param, const LaunchShape& launch) {
    Footprint f;
    if (param >= m.params.size() || !m.params[param].pointer) {
      f.unknown = reject::kUnsupported;
      return f;
    }
    const ParamModel& pm = m.params[param];
    if (!pm.unknown.empty()) {
      f.unknown = pm.unknown;
      return f;
    }
    for (int d = 0; d < 3; ++d)
      if (launch.grid[d] < 1 || launch.grid[d] > kMaxLaunchDim || launch.block[d] < 1 || launch.block[d] > kMaxLaunchDim) {
        f.unknown = reject::kUnsupported;
        return f;
      }
    ctx_.reset();
    SetPtr reads, writes;
    bool exact = true;
    for (const AffAccess& a : pm.accesses) {
      std::string why;
      SetPtr bytes = touched(m, a, launch, &why);
      if (!bytes) {
        f.unknown = why.empty() ? ctx_.failure() : why;
        return f;
      }
      isl_bool empty = isl_set_is_empty(bytes.get());
      if (empty == isl_bool_error) {
        f.unknown = ctx_.failure();
        return f;
      }
      if (empty == isl_bool_true) continue;
      exact = exact && a.exact;
      if (a.read) reads = unite(std::move(reads), copy(bytes));
      if (a.write) writes = unite(std::move(writes), copy(bytes));
      if ((a.read && !reads) || (a.write && !writes)) {
        f.unknown = ctx_.failure();
        return f;
      }
    }
    f.exact = exact;
    std::string why;
    if (reads) {
      Range r = range(reads, &why);
      if (!why.empty()) return unknown(why);
      f.read = std::array<int64_t, 2>{r.lo, r.hi};
      f.read_bytes = count(reads, r);
    }
    if (writes) {
      Range r = range(writes, &why);
      if (!why.empty()) return unknown(why);
      f.write = std::array<int64_t, 2>{r.lo, r.hi};
      f.write_bytes = count(writes, r);
    }
    if (exact && (reads || writes)) {
      SetPtr all = reads && writes ? SetPtr(isl_set_union(isl_set_copy(reads.get()), isl_set_copy(writes.get())))
                   : reads        ? copy(reads)
                                  : copy(writes);
      Range r = all ? range(all, &why) : Range{};
      if (all && why.empty()) {
        auto n = count(all, r);
        if (n && pm.elem_size > 0 && *n % pm.elem_size == 0) f.elements = *n / pm.elem_size;
      }
    }
    if (!exact) {  // a superset: its counts are not the bytes touched
      f.read_bytes.reset();
      f.write_bytes.reset();
    }
    return f;
  }

 private:
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

  /// { [b] : some point of the domain accesses byte b }
  SetPtr touched(const KernelModel& m, const AffAccess& a, const LaunchShape& launch, std::string* why) {
    std::set<int> vars;
    collect(a.offset, vars);
    collect(a.domain, vars);
    std::ostringstream o;
    o << "{ [";
    for (int v : vars) o << "v" << v << ", ";
    o << "b] : ";
    text(o, a.domain);
    for (int v : vars) {
      if (v < 0 || static_cast<size_t>(v) >= m.vars.size()) {
        *why = reject::kUnsupported;
        return nullptr;
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
            return nullptr;
          }
          o << " and v" << v << " = " << *launch.scalars[d];
          break;
        case AffVar::Kind::Local: break;
      }
    }
    o << " and ";
    text(o, a.offset);
    o << " <= b <= ";
    text(o, a.offset);
    o << " + " << (a.size - 1) << " }";
    SetPtr s(isl_set_read_from_str(ctx_.get(), o.str().c_str()));
    if (!s) return nullptr;
    return SetPtr(isl_set_project_out(s.release(), isl_dim_set, 0, static_cast<unsigned>(vars.size())));
  }

  Range range(const SetPtr& s, std::string* why) {
    Range r;
    ValPtr lo(isl_set_dim_min_val(isl_set_copy(s.get()), 0));
    ValPtr hi(isl_set_dim_max_val(isl_set_copy(s.get()), 0));
    if (!lo || !hi) {
      *why = ctx_.failure();
      return r;
    }
    if (!isl_val_is_int(lo.get()) || !isl_val_is_int(hi.get())) {
      *why = reject::kUnbounded;
      return r;
    }
    long l = isl_val_get_num_si(lo.get()), h = isl_val_get_num_si(hi.get());
    if (l < -(int64_t(1) << 62) || h > (int64_t(1) << 62)) {
      *why = reject::kUnbounded;
      return r;
    }
    r.empty = false;
    r.lo = l;
    r.hi = h + 1;
    return r;
  }

  /// The number of distinct bytes, when cheap: the whole range, or isl's count.
  std::optional<int64_t> count(const SetPtr& s, const Range& r) {
    std::string text = fmt::format("{{ [b] : {} <= b < {} }}", r.lo, r.hi);
    SetPtr whole(isl_set_read_from_str(ctx_.get(), text.c_str()));
    if (!whole) return std::nullopt;
    isl_bool eq = isl_set_is_equal(s.get(), whole.get());
    if (eq == isl_bool_true) return r.hi - r.lo;
    if (eq == isl_bool_error) return std::nullopt;
    ValPtr n(isl_set_count_val(s.get()));
    if (!n || !isl_val_is_int(n.get())) {
      isl_ctx_reset_error(ctx_.get());
      return std::nullopt;
    }
    return isl_val_get_num_si(n.get());
  }

  IslCtx& ctx_;
};

}  // namespace

Footprint compute_footprint(const KernelModel& model, size_t param, const LaunchShape& launch) {
  IslCtx ctx;
  if (!ctx.get()) {
    Footprint f;
    f.unknown = "isl: no context";
    return f;
  }
  return Computer(ctx).run(model, param, launch);
}

void attach_footprints(Dataflow& df, const std::vector<KernelModel>& models) {
  IslCtx ctx;
  Computer computer(ctx);
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

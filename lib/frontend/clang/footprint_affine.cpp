// footprint_affine.cpp — the first stage of the footprint analysis (footprint.h): walk a
// __global__ kernel's body on the clang AST and turn every access through a pointer
// parameter into {byte offset, size, domain} over the kernel's variables — blockIdx,
// threadIdx, blockDim, gridDim, scalar parameters, loop variables with affine bounds, and
// existential variables standing for `/`, `%`, `>>`, `&` by constants, `?:`, min and max —
// or a typed reject reason for that parameter (Polly's ScopDetection does the same for
// SCoPs). Guards (if, ?:, && and || short-circuits) become the domain; a guard that is not
// affine (it reads data) is dropped and the access marked inexact: its footprint is then a
// superset, which still proves bounds but never proves an access out of bounds.
//
// Locals: an integer or pointer local assigned only by its initializer is substituted by
// its value; one assigned again holds "data" (any index using it is rejected), and a
// pointer parameter assigned to it is rejected (the walk does not follow it). Local arrays
// and __shared__ buffers are not footprints of arguments. A pointer parameter that goes
// anywhere else (a call other than the atomics, an asm operand, memory, a conversion to
// an integer) is rejected. Never guesses: what is not modelled is a reason.

#include "footprint_affine.h"

#include <clang/AST/Attr.h>
#include <clang/Basic/SourceManager.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/RecordLayout.h>
#include <clang/AST/Stmt.h>
#include <clang/AST/StmtCXX.h>

#include <cstring>
#include <functional>
#include <optional>
#include <map>
#include <set>

namespace kdflow::detail {

namespace {

using namespace clang;

constexpr size_t kMaxAccessesPerParam = 4096;
constexpr size_t kMaxVars = 20000;
constexpr int kMaxDepth = 400;

// --- linear expressions

LinExpr constant(int64_t c) {
  LinExpr e;
  e.c = c;
  return e;
}
LinExpr variable(int v) {
  LinExpr e;
  e.terms.push_back({v, 1});
  return e;
}
bool is_const(const LinExpr& e) { return e.terms.empty(); }

/// a + k·b; false on overflow.
bool add_scaled(LinExpr& a, const LinExpr& b, int64_t k) {
  int64_t t = 0;
  if (__builtin_mul_overflow(b.c, k, &t) || __builtin_add_overflow(a.c, t, &a.c)) return false;
  std::vector<std::pair<int, int64_t>> out;
  size_t i = 0, j = 0;
  while (i < a.terms.size() || j < b.terms.size()) {
    if (j == b.terms.size() || (i < a.terms.size() && a.terms[i].first < b.terms[j].first)) {
      out.push_back(a.terms[i++]);
      continue;
    }
    int64_t bk = 0;
    if (__builtin_mul_overflow(b.terms[j].second, k, &bk)) return false;
    if (i < a.terms.size() && a.terms[i].first == b.terms[j].first) {
      int64_t s = 0;
      if (__builtin_add_overflow(a.terms[i].second, bk, &s)) return false;
      if (s != 0) out.push_back({a.terms[i].first, s});
      ++i;
    } else if (bk != 0) {
      out.push_back({b.terms[j].first, bk});
    }
    ++j;
  }
  a.terms = std::move(out);
  return true;
}

AffCond ge0(LinExpr e) {
  AffCond c;
  c.op = AffCond::Op::Ge0;
  c.e = std::move(e);
  if (is_const(c.e)) c.op = c.e.c >= 0 ? AffCond::Op::True : AffCond::Op::False;
  return c;
}
AffCond eq0(LinExpr e) {
  AffCond c;
  c.op = AffCond::Op::Eq0;
  c.e = std::move(e);
  if (is_const(c.e)) c.op = c.e.c == 0 ? AffCond::Op::True : AffCond::Op::False;
  return c;
}
AffCond truth() { return AffCond{}; }
AffCond both(AffCond a, AffCond b) {
  if (a.op == AffCond::Op::True || b.op == AffCond::Op::False) return b;
  if (b.op == AffCond::Op::True || a.op == AffCond::Op::False) return a;
  AffCond c;
  c.op = AffCond::Op::And;
  c.kids.push_back(std::move(a));
  c.kids.push_back(std::move(b));
  return c;
}
AffCond either(AffCond a, AffCond b) {
  if (a.op == AffCond::Op::True || b.op == AffCond::Op::False) return a;
  if (b.op == AffCond::Op::True || a.op == AffCond::Op::False) return b;
  AffCond c;
  c.op = AffCond::Op::Or;
  c.kids.push_back(std::move(a));
  c.kids.push_back(std::move(b));
  return c;
}

void vars_of(const LinExpr& e, std::set<int>& out) {
  for (const auto& t : e.terms) out.insert(t.first);
}
void vars_of(const AffCond& c, std::set<int>& out) {
  vars_of(c.e, out);
  for (const AffCond& k : c.kids) vars_of(k, out);
}

// --- values

struct Val {
  enum class K { Int, Ptr, Data };
  K k = K::Data;
  LinExpr e;           ///< Int: the value; Ptr: byte offset from the parameter
  int param = -1;      ///< Ptr: parameter index; -1: local or shared memory, or a pointer not followed
  int64_t pointee = 0; ///< Ptr: sizeof the pointee (0: unknown)
  const char* why = reject::kNonAffine;  ///< Data: why it is not an affine integer
  static Val data(const char* why) {
    Val v;
    v.why = why;
    return v;
  }
  static Val integer(LinExpr e) {
    Val v;
    v.k = K::Int;
    v.e = std::move(e);
    return v;
  }
};

/// A place in memory an lvalue designates.
struct Place {
  int param = -1;      ///< -1: not an argument's memory
  bool valid = false;  ///< offset known
  const char* why = reject::kNonAffine;
  LinExpr offset;
  int64_t size = 0;
  const clang::Expr* expr = nullptr;  ///< the access, for its line (looked up only when recorded)
};

/// The two polarities of a condition, each an over-approximation with an exactness flag.
struct Cond {
  AffCond pos, neg;
  bool exact = true;
};

struct Guard {
  AffCond cond;
  bool exact = true;
};

class Extractor {
 public:
  Extractor(ASTContext& ctx, const FunctionDecl* fd) : ctx_(ctx), fd_(fd) {}
  /// Also record the domain of every expression `want` accepts (extract_affine_model's overload).
  void want_sites(const std::function<bool(const Expr*)>* want, std::vector<SiteDomain>* sites) {
    want_ = want;
    sites_ = sites;
  }
  /// Integer parameters with a value here are that constant (one launch's model).
  void launch_scalars(const std::vector<std::optional<int64_t>>* scalars) { scalars_ = scalars; }

  KernelModel run() {
    m_.name = fd_->getNameAsString();
    m_.params.resize(fd_->getNumParams());
    for (unsigned i = 0; i < fd_->getNumParams(); ++i) {
      const ParmVarDecl* p = fd_->getParamDecl(i);
      params_[p] = static_cast<int>(i);
      m_.params[i].pointer = p->getType()->isPointerType();
      if (m_.params[i].pointer) m_.params[i].elem_size = size_of(p->getType()->getPointeeType());
    }
    for (auto& row : builtin_) row.fill(-1);
    if (const Stmt* body = fd_->getBody()) {
      count_mods(body);
      stmt(body);
    }
    for (ParamModel& p : m_.params)
      if (!p.unknown.empty()) p.accesses.clear();
    return std::move(m_);
  }

 private:
  // --- bookkeeping
  int new_var(AffVar::Kind k, int index) {
    if (m_.vars.size() >= kMaxVars) {
      overflow_ = true;
      return 0;
    }
    m_.vars.push_back(AffVar{k, index});
    defs_.push_back(truth());
    // blockIdx, threadIdx, blockDim, gridDim are never negative; others until shown
    nonneg_.push_back(k != AffVar::Kind::Param && k != AffVar::Kind::Local);
    return static_cast<int>(m_.vars.size() - 1);
  }
  void reject_param(int p, const char* why) {
    if (p < 0 || static_cast<size_t>(p) >= m_.params.size()) return;
    if (m_.params[p].unknown.empty()) m_.params[p].unknown = why;
  }
  /// A value that goes where the walk does not follow it.
  void sink(const Val& v, const char* why) {
    if (v.k == Val::K::Ptr) reject_param(v.param, why);
  }
  int64_t size_of(QualType t) const {
    if (t->isIncompleteType() || t->isDependentType() || t->isVoidType() || t->isFunctionType()) return 0;
    return ctx_.getTypeSizeInChars(t).getQuantity();
  }

  void record(const Place& p, bool read, bool write) {
    if (p.param < 0) return;
    if (!poison_.empty()) return reject_param(p.param, poison_.c_str());
    if (!p.valid) return reject_param(p.param, p.why);
    if (p.size <= 0) return reject_param(p.param, reject::kUnsupported);
    ParamModel& pm = m_.params[p.param];
    if (!pm.unknown.empty()) return;
    if (pm.accesses.size() >= kMaxAccessesPerParam || overflow_) return reject_param(p.param, reject::kTooCostly);
    AffAccess a;
    a.read = read;
    a.write = write;
    a.line = p.expr ? line_of(p.expr) : 0;
    a.offset = p.offset;
    a.size = p.size;
    a.exact = !early_exit_;
    AffCond dom = truth();
    for (const Guard& g : guards_) {
      dom = both(std::move(dom), g.cond);
      a.exact = a.exact && g.exact;
    }
    // Definitions of the existential variables it uses, transitively.
    std::set<int> todo;
    vars_of(a.offset, todo);
    vars_of(dom, todo);
    std::set<int> seen;
    while (!todo.empty()) {
      int v = *todo.begin();
      todo.erase(todo.begin());
      if (!seen.insert(v).second) continue;
      if (defs_[v].op != AffCond::Op::True) {
        dom = both(std::move(dom), defs_[v]);
        std::set<int> more;
        vars_of(defs_[v], more);
        for (int w : more)
          if (!seen.count(w)) todo.insert(w);
      }
    }
    a.domain = std::move(dom);
    pm.accesses.push_back(std::move(a));
  }

  /// The domain of an expression `want_` accepts, built as record() builds an access's.
  void site(const Expr* e) {
    e = e->IgnoreParens();
    if (!(*want_)(e) || !site_seen_.insert(e).second) return;
    SiteDomain s;
    s.expr = e;
    s.unknown = poison_;
    if (overflow_) s.unknown = reject::kTooCostly;
    s.exact = !early_exit_;
    AffCond dom = truth();
    for (const Guard& g : guards_) {
      dom = both(std::move(dom), g.cond);
      s.exact = s.exact && g.exact;
    }
    std::set<int> todo, seen;
    vars_of(dom, todo);
    while (!todo.empty()) {
      int v = *todo.begin();
      todo.erase(todo.begin());
      if (!seen.insert(v).second || static_cast<size_t>(v) >= defs_.size()) continue;
      if (defs_[v].op != AffCond::Op::True) {
        dom = both(std::move(dom), defs_[v]);
        std::set<int> more;
        vars_of(defs_[v], more);
        for (int w : more)
          if (!seen.count(w)) todo.insert(w);
      }
    }
    s.domain = std::move(dom);
    sites_->push_back(std::move(s));
  }

  // --- pre-pass: how often each local is modified after its declaration
  void count_mods(const Stmt* s) {
    if (!s) return;
    auto target = [&](const Expr* e) {
      e = e->IgnoreParenImpCasts();
      // A field of a local (`v.x = ...`, `&v.y`) modifies the local.
      while (const auto* me = dyn_cast<MemberExpr>(e)) {
        if (me->isArrow()) break;
        e = me->getBase()->IgnoreParenImpCasts();
      }
      if (const auto* dr = dyn_cast<DeclRefExpr>(e))
        if (const auto* v = dyn_cast<VarDecl>(dr->getDecl())) ++mods_[v];
    };
    if (const auto* bo = dyn_cast<BinaryOperator>(s)) {
      if (bo->isAssignmentOp()) target(bo->getLHS());
    } else if (const auto* uo = dyn_cast<UnaryOperator>(s)) {
      if (uo->isIncrementDecrementOp() || uo->getOpcode() == UO_AddrOf) target(uo->getSubExpr());
    } else if (const auto* ds = dyn_cast<DeclStmt>(s)) {
      for (const Decl* d : ds->decls())
        if (const auto* v = dyn_cast<VarDecl>(d))
          if (v->getType()->isReferenceType() && v->getInit()) target(v->getInit());
    } else if (const auto* ce = dyn_cast<CallExpr>(s)) {
      // An lvalue bound to a reference parameter may be changed by the callee.
      const FunctionDecl* callee = ce->getDirectCallee();
      for (unsigned i = 0; i < ce->getNumArgs(); ++i) {
        bool by_ref = !callee || i >= callee->getNumParams() || callee->getParamDecl(i)->getType()->isReferenceType();
        if (by_ref && ce->getArg(i)->isGLValue()) target(ce->getArg(i));
      }
    } else if (isa<LambdaExpr, AsmStmt>(s)) {
      escape_all(s);
    }
    for (const Stmt* c : s->children()) count_mods(c);
  }
  void escape_all(const Stmt* s) {
    if (!s) return;
    if (const auto* dr = dyn_cast<DeclRefExpr>(s))
      if (const auto* v = dyn_cast<VarDecl>(dr->getDecl())) mods_[v] += 2;
    for (const Stmt* c : s->children()) escape_all(c);
  }
  bool modified(const VarDecl* v) const {
    auto it = mods_.find(v);
    return it != mods_.end() && it->second > 0;
  }

  // --- statements
  void stmt(const Stmt* s) {
    if (!s) return;
    if (const auto* e = dyn_cast<Expr>(s)) {
      value(e);
      return;
    }
    if (const auto* cs = dyn_cast<CompoundStmt>(s)) {
      for (const Stmt* c : cs->body()) stmt(c);
      return;
    }
    if (const auto* ds = dyn_cast<DeclStmt>(s)) {
      for (const Decl* d : ds->decls())
        if (const auto* v = dyn_cast<VarDecl>(d)) var_decl(v);
      return;
    }
    if (const auto* is = dyn_cast<IfStmt>(s)) {
      if (is->getInit() || is->getConditionVariable()) return poisoned(s, reject::kUnsupported);
      Cond c = cond(is->getCond());
      guards_.push_back({c.pos, c.exact});
      stmt(is->getThen());
      guards_.back() = {c.neg, c.exact};
      stmt(is->getElse());
      guards_.pop_back();
      return;
    }
    if (const auto* fs = dyn_cast<ForStmt>(s)) return for_stmt(fs);
    if (isa<WhileStmt, DoStmt, CXXForRangeStmt>(s)) return poisoned(s, reject::kUnboundedLoop);
    if (const auto* as = dyn_cast<AttributedStmt>(s)) return stmt(as->getSubStmt());
    if (isa<NullStmt>(s)) return;
    if (isa<BreakStmt, ContinueStmt>(s)) {
      early_exit_ = true;  // what follows may not run: later accesses are supersets
      return;
    }
    if (const auto* rs = dyn_cast<ReturnStmt>(s)) {
      if (rs->getRetValue()) value(rs->getRetValue());
      early_exit_ = true;  // what follows may not run: later accesses are supersets
      return;
    }
    if (const auto* gs = dyn_cast<GCCAsmStmt>(s)) {
      for (unsigned i = 0; i < gs->getNumOutputs(); ++i) sink(lvalue_or_value(gs->getOutputExpr(i), true, true), reject::kPointerPassed);
      for (unsigned i = 0; i < gs->getNumInputs(); ++i) sink(lvalue_or_value(gs->getInputExpr(i), true, true), reject::kPointerPassed);
      return;
    }
    poisoned(s, reject::kUnsupported);
  }

  void poisoned(const Stmt* s, const char* why) {
    std::string saved = poison_;
    if (poison_.empty()) poison_ = why;
    for (const Stmt* c : s->children()) {
      if (const auto* e = dyn_cast_or_null<Expr>(c)) sink(value(e), why);
      else stmt(c);
    }
    poison_ = saved;
  }

  void var_decl(const VarDecl* v) {
    if (v->getType()->isReferenceType()) {
      if (const Expr* init = v->getInit()) sink(lvalue_or_value(init, true, true), reject::kPointerArithmetic);
      env_[v] = Val::data(reject::kNonAffine);
      return;
    }
    const Expr* init = v->getInit();
    if (!init) {
      env_[v] = Val::data(reject::kNonAffine);
      return;
    }
    if (v->hasLocalStorage() && !modified(v)) {
      if (std::optional<std::vector<Val>> lanes = integer_vector(init)) {
        vec_env_[v] = std::move(*lanes);
        env_[v] = Val::data(reject::kNonAffine);
        return;
      }
    }
    Val x = init->isGLValue() ? lvalue_or_value(init, true, false) : value(init);
    if (!v->hasLocalStorage() || modified(v)) {
      sink(x, reject::kPointerArithmetic);
      Val d = Val::data(reject::kNonAffine);
      if (v->getType()->isPointerType()) {
        d.k = Val::K::Ptr;  // a pointer the walk does not follow: its parameters were rejected
        d.param = -1;
      }
      env_[v] = d;
      return;
    }
    if (x.k == Val::K::Int && !v->getType()->isIntegralOrEnumerationType()) x = Val::data(reject::kNonAffine);
    if (x.k == Val::K::Ptr && !v->getType()->isPointerType()) {
      sink(x, reject::kPointerArithmetic);
      x = Val::data(reject::kNonAffine);
    }
    if (x.k == Val::K::Ptr) x.pointee = size_of(v->getType()->getPointeeType());
    env_[v] = x;
  }

  /// `make_int2(a, b)`, `make_longlong4(a, b, c, d)`, ... (TVM 0.26 builds a vector of
  /// indices and subscripts with its lanes, `p[v.x]`): the lanes' values, or nullopt.
  std::optional<std::vector<Val>> integer_vector(const Expr* init) {
    const Expr* e = init->IgnoreImplicit();
    if (const auto* cc = dyn_cast<CXXConstructExpr>(e); cc && cc->getNumArgs() == 1) e = cc->getArg(0)->IgnoreImplicit();
    const auto* ce = dyn_cast<CallExpr>(e);
    const FunctionDecl* fd = ce ? ce->getDirectCallee() : nullptr;
    if (!fd || !fd->getIdentifier()) return std::nullopt;
    llvm::StringRef n = fd->getName();
    static constexpr const char* kIntegerVectors[] = {"make_char",  "make_uchar",    "make_short", "make_ushort",
                                                      "make_int",   "make_uint",     "make_long",  "make_ulong",
                                                      "make_longlong", "make_ulonglong"};
    bool known = false;
    for (const char* prefix : kIntegerVectors)
      if (n.size() == std::strlen(prefix) + 1 && n.startswith(prefix) && n.back() >= '2' && n.back() <= '4' &&
          static_cast<unsigned>(n.back() - '0') == ce->getNumArgs())
        known = true;
    if (!known) return std::nullopt;
    std::vector<Val> lanes;
    for (const Expr* a : ce->arguments()) {
      if (!a->getType()->isIntegralOrEnumerationType()) return std::nullopt;
      lanes.push_back(value(a));
    }
    return lanes;
  }
  /// `v.x` .. `v.w` of a local built by integer_vector: that lane's value, or nullopt.
  std::optional<Val> vector_lane(const MemberExpr* me) {
    if (me->isArrow()) return std::nullopt;
    const auto* dr = dyn_cast<DeclRefExpr>(me->getBase()->IgnoreParenImpCasts());
    const auto* v = dr ? dyn_cast<VarDecl>(dr->getDecl()) : nullptr;
    auto it = v ? vec_env_.find(v) : vec_env_.end();
    if (it == vec_env_.end() || !me->getMemberDecl()->getIdentifier()) return std::nullopt;
    llvm::StringRef f = me->getMemberDecl()->getName();
    size_t lane = f == "x" ? 0 : f == "y" ? 1 : f == "z" ? 2 : f == "w" ? 3 : 4;
    if (lane >= it->second.size()) return std::nullopt;
    return it->second[lane];
  }

  /// for (int i = a; i < b; ++i | i++ | i += c) with a, b affine and i not changed in the body.
  void for_stmt(const ForStmt* fs) {
    const VarDecl* iv = nullptr;
    Val lo;
    if (const auto* ds = dyn_cast_or_null<DeclStmt>(fs->getInit()); ds && ds->isSingleDecl()) {
      iv = dyn_cast<VarDecl>(ds->getSingleDecl());
      if (iv && iv->getInit() && iv->getType()->isIntegerType()) lo = value(iv->getInit());
      else iv = nullptr;
    }
    int64_t step = 0;
    if (iv) {
      const Expr* inc = fs->getInc() ? fs->getInc()->IgnoreParenImpCasts() : nullptr;
      auto is_iv = [&](const Expr* e) {
        const auto* dr = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts());
        return dr && dr->getDecl() == iv;
      };
      if (const auto* uo = dyn_cast_or_null<UnaryOperator>(inc); uo && uo->isIncrementOp() && is_iv(uo->getSubExpr()))
        step = 1;
      else if (const auto* ca = dyn_cast_or_null<CompoundAssignOperator>(inc);
               ca && ca->getOpcode() == BO_AddAssign && is_iv(ca->getLHS())) {
        if (auto k = ca->getRHS()->getIntegerConstantExpr(ctx_)) step = k->getExtValue();
      }
      if (mods_[iv] != 1) step = 0;  // changed in the body too
    }
    Val hi;
    bool inclusive = false;
    if (step > 0) {
      const auto* bo = dyn_cast_or_null<BinaryOperator>(fs->getCond() ? fs->getCond()->IgnoreParenImpCasts() : nullptr);
      auto is_iv = [&](const Expr* e) {
        const auto* dr = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts());
        return dr && dr->getDecl() == iv;
      };
      if (bo && (bo->getOpcode() == BO_LT || bo->getOpcode() == BO_LE) && is_iv(bo->getLHS())) {
        hi = value(bo->getRHS());
        inclusive = bo->getOpcode() == BO_LE;
      } else if (bo && (bo->getOpcode() == BO_GT || bo->getOpcode() == BO_GE) && is_iv(bo->getRHS())) {
        hi = value(bo->getLHS());
        inclusive = bo->getOpcode() == BO_GE;
      }
    }
    if (step <= 0 || lo.k != Val::K::Int || hi.k != Val::K::Int) return poisoned(fs, reject::kUnboundedLoop);
    int v = new_var(AffVar::Kind::Local, 0);
    if (!overflow_) nonneg_[v] = nonneg(lo.e);
    env_[iv] = Val::integer(variable(v));
    // lo <= i, i < hi (i <= hi), and i = lo + step·k for some k >= 0.
    LinExpr a = variable(v);
    bool ok = add_scaled(a, lo.e, -1);
    LinExpr b = hi.e;
    ok = ok && add_scaled(b, variable(v), -1) && (inclusive || add_scaled(b, constant(1), -1));
    if (!ok) return poisoned(fs, reject::kNonAffine);
    AffCond bounds = both(ge0(a), ge0(b));
    if (step > 1) {
      int k = new_var(AffVar::Kind::Local, 0);
      LinExpr d = a;
      if (!add_scaled(d, variable(k), -step)) return poisoned(fs, reject::kNonAffine);
      bounds = both(std::move(bounds), both(eq0(d), ge0(variable(k))));
    }
    guards_.push_back({bounds, true});
    stmt(fs->getBody());
    guards_.pop_back();
  }

  // --- conditions
  Cond cond(const Expr* e) {
    if (sites_) site(e);
    if (++depth_ > kMaxDepth) {  // a deep && / || chain: never guess, never overflow the stack
      --depth_;
      poison_ = reject::kUnsupported;
      return inexact();
    }
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    for (;;) {  // bool / int conversions around a condition
      e = e->IgnoreParens();
      const auto* ice = dyn_cast<ImplicitCastExpr>(e);
      if (!ice || !(ice->getCastKind() == CK_IntegralToBoolean || ice->getCastKind() == CK_NoOp ||
                    ice->getCastKind() == CK_IntegralCast))
        break;
      e = ice->getSubExpr();
    }
    if (const auto* uo = dyn_cast<UnaryOperator>(e); uo && uo->getOpcode() == UO_LNot) {
      Cond c = cond(uo->getSubExpr());
      std::swap(c.pos, c.neg);
      return c;
    }
    if (const auto* bo = dyn_cast<BinaryOperator>(e)) {
      BinaryOperatorKind op = bo->getOpcode();
      if (op == BO_LAnd || op == BO_LOr) {
        Cond l = cond(bo->getLHS());
        guards_.push_back({op == BO_LAnd ? l.pos : l.neg, l.exact});
        Cond r = cond(bo->getRHS());
        guards_.pop_back();
        Cond out;
        out.exact = l.exact && r.exact;
        if (op == BO_LAnd) {
          out.pos = both(l.pos, r.pos);
          out.neg = either(l.neg, r.neg);
        } else {
          out.pos = either(l.pos, r.pos);
          out.neg = both(l.neg, r.neg);
        }
        return out;
      }
      if (bo->isComparisonOp() && op != BO_Cmp) {
        Val a = value(bo->getLHS());
        Val b = value(bo->getRHS());
        sink(a, reject::kPointerArithmetic);
        sink(b, reject::kPointerArithmetic);
        if (a.k != Val::K::Int || b.k != Val::K::Int) return inexact();
        LinExpr d = a.e;  // d = a - b
        if (!add_scaled(d, b.e, -1)) return inexact();
        LinExpr nd = constant(0);
        if (!add_scaled(nd, d, -1)) return inexact();
        LinExpr dm1 = d, ndm1 = nd;  // d - 1, -d - 1
        if (!add_scaled(dm1, constant(1), -1) || !add_scaled(ndm1, constant(1), -1)) return inexact();
        Cond c;
        switch (op) {
          case BO_LT: c.pos = ge0(ndm1); c.neg = ge0(d); break;     // a < b ⇔ -d-1 ≥ 0
          case BO_LE: c.pos = ge0(nd); c.neg = ge0(dm1); break;
          case BO_GT: c.pos = ge0(dm1); c.neg = ge0(nd); break;
          case BO_GE: c.pos = ge0(d); c.neg = ge0(ndm1); break;
          case BO_EQ: c.pos = eq0(d); c.neg = either(ge0(dm1), ge0(ndm1)); break;
          case BO_NE: c.neg = eq0(d); c.pos = either(ge0(dm1), ge0(ndm1)); break;
          default: return inexact();
        }
        return c;
      }
    }
    Val v = value(e);
    sink(v, reject::kPointerArithmetic);
    if (v.k == Val::K::Int && e->getType()->isIntegralOrEnumerationType()) {  // v != 0
      LinExpr dm1 = v.e, ndm1 = constant(0);
      if (add_scaled(dm1, constant(1), -1) && add_scaled(ndm1, v.e, -1) && add_scaled(ndm1, constant(1), -1)) {
        Cond c;
        c.pos = either(ge0(dm1), ge0(ndm1));
        c.neg = eq0(v.e);
        return c;
      }
    }
    return inexact();
  }
  static Cond inexact() {
    Cond c;
    c.exact = false;
    return c;
  }

  // --- expressions
  /// An lvalue's place: the access it makes as (read, write) is recorded. Returns the
  /// value it holds when that is known (a tracked local), else data / pointer-not-followed.
  Val lvalue_or_value(const Expr* e, bool read, bool write) {
    if (!e->isGLValue()) return value(e);
    e = e->IgnoreParens();
    if (isa<DeclRefExpr>(e)) {
      if (read && !write) return value(e);
      return Val::data(reject::kNonAffine);
    }
    if (const auto* me = dyn_cast<MemberExpr>(e)) {
      int b = builtin_member(me);
      if (b >= 0) return Val::integer(variable(b));
      if (read && !write)
        if (std::optional<Val> lane = vector_lane(me)) return *lane;
    }
    Place p = place(e);
    record(p, read, write);
    if (e->getType()->isPointerType()) {
      Val v;
      v.k = Val::K::Ptr;  // a pointer loaded from memory: not an argument the walk follows
      return v;
    }
    return Val::data(reject::kDataDependentIndex);
  }

  Place place(const Expr* e) {
    e = e->IgnoreParens();
    Place p = place_at(e);
    if (!p.expr) p.expr = e;
    return p;
  }

  unsigned line_of(const Expr* e) const {
    const SourceManager& sm = ctx_.getSourceManager();
    const PresumedLoc pl = sm.getPresumedLoc(sm.getExpansionLoc(e->getExprLoc()));
    return pl.isValid() ? pl.getLine() : 0;
  }

  Place place_at(const Expr* e) {
    Place p;
    if (++depth_ > kMaxDepth) {
      --depth_;
      return p;
    }
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    p.size = size_of(e->getType());
    if (const auto* as = dyn_cast<ArraySubscriptExpr>(e)) {
      Val base = value(as->getBase());
      Val idx = value(as->getIdx());
      sink(idx, reject::kPointerArithmetic);
      if (base.k != Val::K::Ptr) return p;
      p.param = base.param;
      if (idx.k != Val::K::Int) {
        p.why = idx.why;
        return p;
      }
      p.offset = base.e;
      p.valid = add_scaled(p.offset, idx.e, p.size);
      return p;
    }
    if (const auto* uo = dyn_cast<UnaryOperator>(e); uo && uo->getOpcode() == UO_Deref) {
      Val base = value(uo->getSubExpr());
      if (base.k != Val::K::Ptr) return p;
      p.param = base.param;
      p.offset = base.e;
      p.valid = true;
      return p;
    }
    if (const auto* me = dyn_cast<MemberExpr>(e)) {
      const auto* fd = dyn_cast<FieldDecl>(me->getMemberDecl());
      Place b;
      if (me->isArrow()) {
        Val base = value(me->getBase());
        if (base.k != Val::K::Ptr) return p;
        b.param = base.param;
        b.offset = base.e;
        b.valid = true;
      } else if (me->getBase()->isGLValue()) {
        b = place(me->getBase());
      } else {
        sink(value(me->getBase()), reject::kPointerArithmetic);
        return p;
      }
      p.param = b.param;
      p.why = b.why;
      if (!b.valid || !fd || fd->isBitField()) {
        p.valid = false;
        if (b.valid) p.why = reject::kUnsupported;
        return p;
      }
      p.offset = b.offset;
      p.valid = add_scaled(p.offset, constant(static_cast<int64_t>(ctx_.getFieldOffset(fd) / 8)), 1);
      return p;
    }
    if (const auto* ce = dyn_cast<CastExpr>(e)) {  // lvalue casts (NoOp, LValueBitCast, ...)
      Place b = place(ce->getSubExpr());
      b.size = p.size;
      return b;
    }
    if (const auto* dr = dyn_cast<DeclRefExpr>(e)) {
      (void)dr;
      return p;  // a variable: not an argument's memory
    }
    if (const auto* co = dyn_cast<ConditionalOperator>(e)) {
      Val v = value(co);  // records both branches' places as unknown: conservative
      (void)v;
      return p;
    }
    // Anything else designating memory: walk it; pointers in it are rejected.
    for (const Stmt* c : e->children())
      if (const auto* ce = dyn_cast_or_null<Expr>(c)) sink(lvalue_or_value(ce, true, true), reject::kUnsupported);
    return p;
  }

  int builtin_var(AffVar::Kind k, int dim) {
    int& slot = builtin_[static_cast<int>(k)][dim];
    if (slot < 0) slot = new_var(k, dim);
    return slot;
  }

  /// An existential variable q with definition `def` (a function of the other variables).
  int defined_var(const std::function<AffCond(int)>& def) {
    int q = new_var(AffVar::Kind::Local, 0);
    if (!overflow_) defs_[q] = def(q);
    return q;
  }

  /// trunc(a / c) (C division, c > 0) as a new variable.
  Val trunc_div(const LinExpr& a, int64_t c) {
    if (c == 1) return Val::integer(a);
    if (nonneg(a)) return floor_div(a, c);  // the same for a ≥ 0, and one conjunct instead of two
    int q = defined_var([&](int q) {
      // a ≥ 0: c·q ≤ a ≤ c·q + c − 1;  a < 0: c·q − c + 1 ≤ a ≤ c·q
      LinExpr lo = a, hi = a, na = constant(-1);
      add_scaled(lo, variable(q), -c);           // a − c·q ≥ 0
      hi = variable(q);
      add_scaled(hi, constant(c - 1), 1);
      LinExpr hi2 = constant(0);
      add_scaled(hi2, variable(q), c);
      add_scaled(hi2, constant(c - 1), 1);
      add_scaled(hi2, a, -1);                    // c·q + c − 1 − a ≥ 0
      add_scaled(na, a, -1);                     // −a − 1 ≥ 0
      LinExpr l2 = a;
      add_scaled(l2, variable(q), -c);
      add_scaled(l2, constant(c - 1), 1);        // a − c·q + c − 1 ≥ 0
      LinExpr h2 = constant(0);
      add_scaled(h2, variable(q), c);
      add_scaled(h2, a, -1);                     // c·q − a ≥ 0
      AffCond pos = both(ge0(a), both(ge0(lo), ge0(hi2)));
      AffCond neg = both(ge0(na), both(ge0(l2), ge0(h2)));
      return either(std::move(pos), std::move(neg));
    });
    return Val::integer(variable(q));
  }
  /// floor(a / c), c > 0 (arithmetic shift right, `&` masks).
  Val floor_div(const LinExpr& a, int64_t c) {
    if (c == 1) return Val::integer(a);
    // The same quotient written again (TVM repeats `x / 3` in guard and index): one variable.
    std::string key = memo_key('f', a, c);
    if (auto it = memo_.find(key); it != memo_.end()) return Val::integer(variable(it->second));
    int q = defined_var([&](int q) {
      LinExpr lo = a;
      add_scaled(lo, variable(q), -c);  // a − c·q ≥ 0
      LinExpr hi = constant(c - 1);
      add_scaled(hi, variable(q), c);
      add_scaled(hi, a, -1);            // c·q + c − 1 − a ≥ 0
      return both(ge0(lo), ge0(hi));
    });
    if (!overflow_) {
      nonneg_[q] = nonneg(a);
      memo_[key] = q;
    }
    return Val::integer(variable(q));
  }
  /// a − c·q; a new variable (known non-negative) when a ≥ 0 and q = floor(a / c).
  Val remainder(const LinExpr& a, const Val& q, int64_t c) {
    LinExpr r = a;
    if (!add_scaled(r, q.e, -c)) return Val::data(reject::kNonAffine);
    if (nonneg(a)) {
      std::string key = memo_key('r', a, c);
      if (auto it = memo_.find(key); it != memo_.end()) return Val::integer(variable(it->second));
      int v = defined_var([&](int v) {
        LinExpr d = variable(v);
        add_scaled(d, r, -1);
        return eq0(d);
      });
      if (!overflow_) {
        nonneg_[v] = true;
        memo_[key] = v;
      }
      return Val::integer(variable(v));
    }
    return Val::integer(r);
  }
  static std::string memo_key(char kind, const LinExpr& a, int64_t c) {
    std::string k(1, kind);
    k += std::to_string(c) + ":" + std::to_string(a.c);
    for (const auto& t : a.terms) k += "," + std::to_string(t.first) + "*" + std::to_string(t.second);
    return k;
  }
  /// Whether e ≥ 0 for every value of its variables: non-negative coefficients on
  /// variables known non-negative, and a non-negative constant.
  bool nonneg(const LinExpr& e) const {
    if (e.c < 0) return false;
    for (const auto& t : e.terms)
      if (t.second < 0 || static_cast<size_t>(t.first) >= nonneg_.size() || !nonneg_[t.first]) return false;
    return true;
  }
  /// v = cond ? t : f as a new variable (cond exact).
  Val select(const Cond& c, const LinExpr& t, const LinExpr& f) {
    int v = defined_var([&](int v) {
      LinExpr dt = variable(v), df = variable(v);
      add_scaled(dt, t, -1);
      add_scaled(df, f, -1);
      return either(both(c.pos, eq0(dt)), both(c.neg, eq0(df)));
    });
    if (!overflow_) nonneg_[v] = nonneg(t) && nonneg(f);
    return Val::integer(variable(v));
  }

  std::optional<int64_t> const_of(const Val& v) const {
    if (v.k == Val::K::Int && is_const(v.e)) return v.e.c;
    return std::nullopt;
  }

  Val value(const Expr* e) {
    if (sites_) site(e);
    if (++depth_ > kMaxDepth) {
      --depth_;
      poison_ = reject::kUnsupported;  // stays for the rest of the kernel: never guess
      return Val::data(reject::kUnsupported);
    }
    Val v = value_(e);
    --depth_;
    return v;
  }

  Val value_(const Expr* e) {
    e = e->IgnoreParens();
    if (const auto* fe = dyn_cast<FullExpr>(e)) return value(fe->getSubExpr());
    if (const auto* mt = dyn_cast<MaterializeTemporaryExpr>(e)) return value(mt->getSubExpr());
    if (e->isGLValue() && !isa<DeclRefExpr>(e)) {
      // Used as an lvalue without a load around it (discarded, bound to a reference, ...):
      // conservative read+write of whatever it designates.
      if (const auto* uo = dyn_cast<UnaryOperator>(e); uo && (uo->isIncrementDecrementOp())) {}
      else if (const auto* bo = dyn_cast<BinaryOperator>(e); bo && bo->isAssignmentOp()) {}
      else if (isa<ArraySubscriptExpr, MemberExpr, UnaryOperator, CastExpr>(e)) {
        if (const auto* me = dyn_cast<MemberExpr>(e); me && builtin_member(me) >= 0) return Val::integer(variable(builtin_member(me)));
        return lvalue_or_value(e, true, true);
      }
    }
    if (const auto* il = dyn_cast<IntegerLiteral>(e)) {
      if (il->getValue().getActiveBits() > 62) return Val::data(reject::kNonAffine);
      return Val::integer(constant(static_cast<int64_t>(il->getValue().getZExtValue())));
    }
    if (const auto* cl = dyn_cast<CharacterLiteral>(e)) return Val::integer(constant(cl->getValue()));
    if (const auto* bl = dyn_cast<CXXBoolLiteralExpr>(e)) return Val::integer(constant(bl->getValue() ? 1 : 0));
    if (isa<FloatingLiteral, StringLiteral>(e)) return Val::data(reject::kDataDependentIndex);
    if (const auto* dr = dyn_cast<DeclRefExpr>(e)) return decl_ref(dr);
    if (const auto* me = dyn_cast<MemberExpr>(e)) {
      int b = builtin_member(me);
      if (b >= 0) return Val::integer(variable(b));
      if (std::optional<Val> lane = vector_lane(me)) return *lane;
      if (me->isGLValue()) return lvalue_or_value(me, true, true);
      sink(value(me->getBase()), reject::kPointerArithmetic);
      return Val::data(reject::kDataDependentIndex);
    }
    if (const auto* ce = dyn_cast<CastExpr>(e)) return cast(ce);
    if (const auto* uo = dyn_cast<UnaryOperator>(e)) return unary(uo);
    if (const auto* bo = dyn_cast<BinaryOperator>(e)) return binary(bo);
    if (const auto* co = dyn_cast<ConditionalOperator>(e)) {
      Cond c = cond(co->getCond());
      guards_.push_back({c.pos, c.exact});
      Val t = value(co->getTrueExpr());
      guards_.back() = {c.neg, c.exact};
      Val f = value(co->getFalseExpr());
      guards_.pop_back();
      if (t.k == Val::K::Int && f.k == Val::K::Int && c.exact) return select(c, t.e, f.e);
      if (t.k == Val::K::Ptr && f.k == Val::K::Ptr && t.param == f.param && c.exact && t.pointee == f.pointee) {
        Val r = select(c, t.e, f.e);
        r.k = Val::K::Ptr;
        r.param = t.param;
        r.pointee = t.pointee;
        return r;
      }
      sink(t, reject::kPointerArithmetic);
      sink(f, reject::kPointerArithmetic);
      return Val::data(t.k == Val::K::Data ? t.why : f.k == Val::K::Data ? f.why : reject::kNonAffine);
    }
    if (const auto* ce = dyn_cast<CallExpr>(e)) return call(ce);
    if (const auto* cc = dyn_cast<CXXConstructExpr>(e)) return construct(cc);
    if (const auto* ue = dyn_cast<UnaryExprOrTypeTraitExpr>(e)) {
      Expr::EvalResult r;
      if (!ue->isValueDependent() && ue->EvaluateAsInt(r, ctx_)) return Val::integer(constant(r.Val.getInt().getExtValue()));
      return Val::data(reject::kNonAffine);
    }
    // Constructors, init lists, anything else: walk the children; pointers in them escape.
    for (const Stmt* c : e->children())
      if (const auto* ce = dyn_cast_or_null<Expr>(c)) sink(value(ce), reject::kPointerPassed);
    return Val::data(reject::kUnsupported);
  }

  /// threadIdx.x and friends: the variable, or -1.
  int builtin_member(const MemberExpr* me) {
    const auto* dr = dyn_cast<DeclRefExpr>(me->getBase()->IgnoreParenImpCasts());
    if (!dr) return -1;
    const auto* v = dyn_cast<VarDecl>(dr->getDecl());
    if (!v || v->hasLocalStorage() || !v->getDeclContext()->isFileContext()) return -1;
    llvm::StringRef n = v->getName();
    AffVar::Kind k;
    if (n == "blockIdx") k = AffVar::Kind::BlockIdx;
    else if (n == "threadIdx") k = AffVar::Kind::ThreadIdx;
    else if (n == "blockDim") k = AffVar::Kind::BlockDim;
    else if (n == "gridDim") k = AffVar::Kind::GridDim;
    else return -1;
    llvm::StringRef f = me->getMemberDecl()->getName();
    int dim = f == "x" ? 0 : f == "y" ? 1 : f == "z" ? 2 : -1;
    if (dim < 0) return -1;
    return builtin_var(k, dim);
  }

  Val decl_ref(const DeclRefExpr* dr) {
    const ValueDecl* d = dr->getDecl();
    if (const auto* ec = dyn_cast<EnumConstantDecl>(d)) return Val::integer(constant(ec->getInitVal().getExtValue()));
    const auto* v = dyn_cast<VarDecl>(d);
    if (!v) return Val::data(reject::kUnsupported);
    if (const auto* p = dyn_cast<ParmVarDecl>(v)) {
      auto it = params_.find(p);
      if (it != params_.end()) {
        if (modified(v)) {
          reject_param(it->second, reject::kPointerArithmetic);
          return Val::data(reject::kNonAffine);
        }
        QualType t = p->getType();
        if (t->isPointerType()) {
          Val r;
          r.k = Val::K::Ptr;
          r.param = it->second;
          r.pointee = size_of(t->getPointeeType());
          return r;
        }
        if (t->isIntegralOrEnumerationType()) {
          // A launch's value, when the model is made for one launch (extract's specialisation).
          if (scalars_ && static_cast<size_t>(it->second) < scalars_->size() && (*scalars_)[it->second])
            return Val::integer(constant(*(*scalars_)[it->second]));
          int& slot = param_var_[it->second];
          if (slot == 0) slot = new_var(AffVar::Kind::Param, it->second) + 1;
          return Val::integer(variable(slot - 1));
        }
        return Val::data(reject::kDataDependentIndex);
      }
    }
    if (v->getType()->isArrayType()) {  // a local or __shared__ array: not an argument
      Val r;
      r.k = Val::K::Ptr;
      r.pointee = size_of(QualType(v->getType()->getPointeeOrArrayElementType(), 0));
      return r;
    }
    auto it = env_.find(v);
    if (it != env_.end()) return it->second;
    if (!v->hasLocalStorage() && v->getType().isConstQualified() && v->getType()->isIntegralOrEnumerationType()) {
      if (const APValue* val = v->evaluateValue(); val && val->isInt())
        return Val::integer(constant(val->getInt().getExtValue()));
    }
    if (v->getType()->isPointerType()) {
      Val r;
      r.k = Val::K::Ptr;
      return r;
    }
    return Val::data(v->hasLocalStorage() ? reject::kNonAffine : reject::kDataDependentIndex);
  }

  Val cast(const CastExpr* ce) {
    const Expr* sub = ce->getSubExpr();
    switch (ce->getCastKind()) {
      case CK_LValueToRValue: return lvalue_or_value(sub, true, false);
      case CK_NoOp:
      case CK_IntegralCast:
      case CK_BooleanToSignedIntegral: {
        Val v = value(sub);
        if (ce->getCastKind() == CK_IntegralCast && v.k == Val::K::Int) {
          // A narrowing or sign-changing cast keeps the value only where it fits; TVM's
          // `(int)threadIdx.x` and friends are in range. Anything wider than 64 bits: no.
          if (ctx_.getTypeSize(ce->getType()) > 64) return Val::data(reject::kNonAffine);
        }
        return v;
      }
      case CK_ArrayToPointerDecay: {
        if (sub->isGLValue() && !isa<DeclRefExpr>(sub->IgnoreParens())) {
          Place p = place(sub);
          Val r;
          r.k = Val::K::Ptr;
          r.param = p.param;
          if (p.param >= 0 && !p.valid) reject_param(p.param, p.why);
          r.e = p.offset;
          r.pointee = size_of(ce->getType()->getPointeeType());
          return r;
        }
        Val r = value(sub);
        if (r.k == Val::K::Ptr) r.pointee = size_of(ce->getType()->getPointeeType());
        return r;
      }
      case CK_BitCast:
      case CK_AddressSpaceConversion: {
        Val v = value(sub);
        if (v.k == Val::K::Ptr && ce->getType()->isPointerType()) {
          v.pointee = size_of(ce->getType()->getPointeeType());
          return v;
        }
        sink(v, reject::kPointerArithmetic);
        return Val::data(reject::kUnsupported);
      }
      case CK_FunctionToPointerDecay:
      case CK_BuiltinFnToFnPtr: return Val::data(reject::kUnsupported);
      case CK_ToVoid: sink(value(sub), reject::kPointerArithmetic); return Val::data(reject::kUnsupported);
      case CK_FloatingToIntegral:
      case CK_IntegralToFloating:
      case CK_FloatingCast:
      case CK_FloatingToBoolean:
      case CK_IntegralToBoolean: {
        Val v = value(sub);
        sink(v, reject::kPointerArithmetic);
        return Val::data(v.k == Val::K::Data ? v.why : reject::kNonAffine);
      }
      default: {
        Val v = sub->isGLValue() ? lvalue_or_value(sub, true, false) : value(sub);
        sink(v, reject::kPointerArithmetic);
        return Val::data(reject::kUnsupported);
      }
    }
  }

  Val unary(const UnaryOperator* uo) {
    const Expr* sub = uo->getSubExpr();
    switch (uo->getOpcode()) {
      case UO_AddrOf: {
        if (!sub->isGLValue()) return Val::data(reject::kUnsupported);
        if (isa<DeclRefExpr>(sub->IgnoreParens())) {
          Val v = value(sub);
          sink(v, reject::kPointerArithmetic);
          Val r;
          r.k = Val::K::Ptr;  // a local's address
          return r;
        }
        Place p = place(sub);
        Val r;
        r.k = Val::K::Ptr;
        r.param = p.param;
        r.pointee = size_of(sub->getType());
        if (p.param >= 0 && !p.valid) reject_param(p.param, p.why);
        r.e = p.offset;
        return r;
      }
      case UO_Deref: return lvalue_or_value(uo, true, true);
      case UO_PreInc:
      case UO_PreDec:
      case UO_PostInc:
      case UO_PostDec: {
        if (!isa<DeclRefExpr>(sub->IgnoreParens())) record(place(sub), true, true);
        else sink(value(sub), reject::kPointerArithmetic);
        return Val::data(reject::kNonAffine);
      }
      case UO_Minus: {
        Val v = value(sub);
        if (v.k != Val::K::Int) {
          sink(v, reject::kPointerArithmetic);
          return v.k == Val::K::Data ? v : Val::data(reject::kNonAffine);
        }
        LinExpr r = constant(0);
        if (!add_scaled(r, v.e, -1)) return Val::data(reject::kNonAffine);
        return Val::integer(r);
      }
      case UO_Plus: return value(sub);
      case UO_Not: {
        Val v = value(sub);
        if (v.k != Val::K::Int || !sub->getType()->isSignedIntegerType()) {
          sink(v, reject::kPointerArithmetic);
          return Val::data(v.k == Val::K::Data ? v.why : reject::kNonAffine);
        }
        LinExpr r = constant(-1);
        if (!add_scaled(r, v.e, -1)) return Val::data(reject::kNonAffine);
        return Val::integer(r);  // ~x = −x − 1
      }
      case UO_LNot: {
        Cond c = cond(sub);
        (void)c;
        return Val::data(reject::kNonAffine);
      }
      default: sink(value(sub), reject::kPointerArithmetic); return Val::data(reject::kUnsupported);
    }
  }

  Val binary(const BinaryOperator* bo) {
    BinaryOperatorKind op = bo->getOpcode();
    if (op == BO_Assign) {
      Val r = bo->getRHS()->isGLValue() ? lvalue_or_value(bo->getRHS(), true, false) : value(bo->getRHS());
      const Expr* lhs = bo->getLHS()->IgnoreParens();
      if (isa<DeclRefExpr>(lhs)) sink(r, reject::kPointerArithmetic);  // a local assigned again: not followed
      else {
        sink(r, reject::kPointerArithmetic);  // stored to memory
        record(place(lhs), false, true);
      }
      return Val::data(reject::kNonAffine);
    }
    if (bo->isCompoundAssignmentOp()) {
      Val r = value(bo->getRHS());
      sink(r, reject::kPointerArithmetic);
      const Expr* lhs = bo->getLHS()->IgnoreParens();
      if (isa<DeclRefExpr>(lhs)) sink(value(lhs), reject::kPointerArithmetic);
      else record(place(lhs), true, true);
      return Val::data(reject::kNonAffine);
    }
    if (op == BO_Comma) {
      sink(value(bo->getLHS()), reject::kPointerArithmetic);
      return value(bo->getRHS());
    }
    if (bo->isComparisonOp() || bo->isLogicalOp()) {
      cond(bo);
      return Val::data(reject::kNonAffine);
    }
    Val a = value(bo->getLHS());
    Val b = value(bo->getRHS());
    auto fail = [&](const char* why) {
      sink(a, reject::kPointerArithmetic);
      sink(b, reject::kPointerArithmetic);
      if (a.k == Val::K::Data && a.why == reject::kDataDependentIndex) return Val::data(a.why);
      if (b.k == Val::K::Data && b.why == reject::kDataDependentIndex) return Val::data(b.why);
      return Val::data(why);
    };
    if (op == BO_Add || op == BO_Sub) {
      if (a.k == Val::K::Int && b.k == Val::K::Int) {
        LinExpr r = a.e;
        if (!add_scaled(r, b.e, op == BO_Add ? 1 : -1)) return fail(reject::kNonAffine);
        return Val::integer(r);
      }
      if (a.k == Val::K::Ptr && b.k == Val::K::Int) {
        if (a.pointee <= 0) return fail(reject::kPointerArithmetic);
        Val r = a;
        if (!add_scaled(r.e, b.e, op == BO_Add ? a.pointee : -a.pointee)) return fail(reject::kNonAffine);
        return r;
      }
      if (op == BO_Add && a.k == Val::K::Int && b.k == Val::K::Ptr) {
        if (b.pointee <= 0) return fail(reject::kPointerArithmetic);
        Val r = b;
        if (!add_scaled(r.e, a.e, b.pointee)) return fail(reject::kNonAffine);
        return r;
      }
      return fail(reject::kNonAffine);
    }
    if (a.k != Val::K::Int || b.k != Val::K::Int) return fail(reject::kNonAffine);
    auto ca = const_of(a), cb = const_of(b);
    switch (op) {
      case BO_Mul: {
        if (!ca && !cb) return fail(reject::kNonAffine);
        LinExpr r = constant(0);
        if (!add_scaled(r, cb ? a.e : b.e, cb ? *cb : *ca)) return fail(reject::kNonAffine);
        return Val::integer(r);
      }
      case BO_Div:
      case BO_Rem: {
        if (!cb || *cb <= 0) return fail(reject::kNonAffine);
        if (ca && b.e.c != 0) return Val::integer(constant(op == BO_Div ? *ca / *cb : *ca % *cb));
        bool is_unsigned = bo->getType()->isUnsignedIntegerType();
        Val q = is_unsigned ? floor_div(a.e, *cb) : trunc_div(a.e, *cb);
        if (is_unsigned) {  // only while the value is non-negative is it the C result
          if (a.e.terms.size() > 0 && !nonneg(a.e)) return fail(reject::kNonAffine);
        }
        return op == BO_Div ? q : remainder(a.e, q, *cb);
      }
      case BO_Shl: {
        if (!cb || *cb < 0 || *cb > 30) return fail(reject::kNonAffine);
        LinExpr r = constant(0);
        if (!add_scaled(r, a.e, int64_t(1) << *cb)) return fail(reject::kNonAffine);
        return Val::integer(r);
      }
      case BO_Shr: {
        if (!cb || *cb < 0 || *cb > 30) return fail(reject::kNonAffine);
        if (bo->getType()->isUnsignedIntegerType() && !nonneg(a.e)) return fail(reject::kNonAffine);
        return floor_div(a.e, int64_t(1) << *cb);  // arithmetic shift: floor
      }
      case BO_And: {
        auto mask = cb ? cb : ca;
        const LinExpr& x = cb ? a.e : b.e;
        if (!mask || *mask < 0 || ((*mask + 1) & *mask) != 0 || *mask > (int64_t(1) << 30)) return fail(reject::kNonAffine);
        if (bo->getType()->isUnsignedIntegerType() && !nonneg(x)) return fail(reject::kNonAffine);
        Val q = floor_div(x, *mask + 1);  // x & (2^k − 1) = x − 2^k·floor(x / 2^k)
        return remainder(x, q, *mask + 1);
      }
      default: return fail(reject::kNonAffine);
    }
  }


  /// An argument bound to parameter `pd` (null: through `...` or unknown).
  Val argument(const Expr* a, const ParmVarDecl* pd) {
    if (pd && pd->getType()->isReferenceType()) {
      bool is_const = pd->getType()->getPointeeType().isConstQualified();
      return lvalue_or_value(a, true, !is_const);
    }
    if (!pd && a->isGLValue()) return lvalue_or_value(a, true, true);
    return value(a);
  }

  Val construct(const CXXConstructExpr* cc) {
    const CXXConstructorDecl* ctor = cc->getConstructor();
    bool trivial_copy = ctor->isTrivial() && ctor->isCopyOrMoveConstructor();
    for (unsigned i = 0; i < cc->getNumArgs(); ++i) {
      const Expr* a = cc->getArg(i);
      Val v = trivial_copy ? lvalue_or_value(a, true, false)
                           : argument(a, i < ctor->getNumParams() ? ctor->getParamDecl(i) : nullptr);
      sink(v, reject::kPointerPassed);
    }
    return Val::data(reject::kDataDependentIndex);
  }

  Val call(const CallExpr* ce) {
    const FunctionDecl* fd = ce->getDirectCallee();
    std::string name = fd && fd->getIdentifier() ? fd->getName().str() : std::string();
    const auto* md = dyn_cast_or_null<CXXMethodDecl>(fd);
    unsigned first = 0;
    if (md && md->isInstance()) {
      const Expr* object = nullptr;
      bool arrow = false;
      if (const auto* mc = dyn_cast<CXXMemberCallExpr>(ce)) {
        object = mc->getImplicitObjectArgument();
        if (const auto* me = dyn_cast<MemberExpr>(mc->getCallee()->IgnoreParens())) arrow = me->isArrow();
      } else if (isa<CXXOperatorCallExpr>(ce) && ce->getNumArgs() > 0) {
        object = ce->getArg(0);
        first = 1;
      }
      if (object) {
        bool assign = md->isTrivial() && (md->isCopyAssignmentOperator() || md->isMoveAssignmentOperator());
        if (arrow) sink(value(object), reject::kPointerPassed);
        else sink(lvalue_or_value(object, !assign, !md->isConst()), reject::kPointerPassed);
        if (assign && ce->getNumArgs() == first + 1) {
          sink(lvalue_or_value(ce->getArg(first), true, false), reject::kPointerArithmetic);
          return Val::data(reject::kDataDependentIndex);
        }
      }
    }
    std::vector<Val> args;
    for (unsigned i = first; i < ce->getNumArgs(); ++i) {
      unsigned j = i - first;
      args.push_back(argument(ce->getArg(i), fd && j < fd->getNumParams() ? fd->getParamDecl(j) : nullptr));
    }
    // Integer min / max: a new variable equal to one of the two.
    if ((name == "min" || name == "max") && args.size() == 2 && args[0].k == Val::K::Int &&
        args[1].k == Val::K::Int && ce->getType()->isIntegralOrEnumerationType()) {
      LinExpr d = args[0].e;  // a − b
      LinExpr nd = constant(0), dm1, ndm1;
      if (add_scaled(d, args[1].e, -1) && add_scaled(nd, d, -1)) {
        dm1 = d;
        ndm1 = nd;
        if (add_scaled(dm1, constant(1), -1) && add_scaled(ndm1, constant(1), -1)) {
          Cond c;  // pos picks a, neg picks b
          c.pos = name == "min" ? ge0(nd) : ge0(d);
          c.neg = name == "min" ? ge0(dm1) : ge0(ndm1);
          return select(c, args[0].e, args[1].e);
        }
      }
    }
    // Atomics through a pointer argument: read+write of the pointee.
    if (name.rfind("atomic", 0) == 0 && !args.empty() && args[0].k == Val::K::Ptr) {
      const Val& p = args[0];
      if (p.param >= 0) {
        Place pl;
        pl.param = p.param;
        pl.valid = true;
        pl.offset = p.e;
        pl.size = p.pointee;
        record(pl, true, true);
      }
      for (size_t i = 1; i < args.size(); ++i) sink(args[i], reject::kPointerPassed);
      return Val::data(reject::kDataDependentIndex);
    }
    for (const Val& a : args) sink(a, reject::kPointerPassed);
    if (!fd) sink(value(ce->getCallee()), reject::kPointerPassed);
    return Val::data(reject::kDataDependentIndex);
  }

  ASTContext& ctx_;
  const FunctionDecl* fd_;
  KernelModel m_;
  std::vector<AffCond> defs_;
  std::vector<bool> nonneg_;  ///< per variable: known never negative
  std::map<std::string, int> memo_;  ///< floor quotients and remainders already made: one variable each
  std::map<const ParmVarDecl*, int> params_;
  std::map<int, int> param_var_;  ///< parameter → its variable + 1
  std::map<const VarDecl*, Val> env_;
  std::map<const VarDecl*, std::vector<Val>> vec_env_;  ///< locals built by integer_vector: their lanes
  std::map<const VarDecl*, int> mods_;
  std::vector<Guard> guards_;
  std::array<std::array<int, 3>, 6> builtin_{};
  std::string poison_;
  bool early_exit_ = false;
  bool overflow_ = false;
  int depth_ = 0;
  const std::function<bool(const Expr*)>* want_ = nullptr;  ///< sites to record (nullptr: none)
  std::vector<SiteDomain>* sites_ = nullptr;
  std::set<const Expr*> site_seen_;
  const std::vector<std::optional<int64_t>>* scalars_ = nullptr;  ///< a launch's scalar arguments, or none
};

}  // namespace

KernelModel extract_affine_model(clang::ASTContext& ctx, const clang::FunctionDecl* fd) {
  return Extractor(ctx, fd).run();
}

KernelModel extract_affine_model(clang::ASTContext& ctx, const clang::FunctionDecl* fd,
                                 const std::function<bool(const clang::Expr*)>& want, std::vector<SiteDomain>* sites,
                                 const std::vector<std::optional<int64_t>>* scalars) {
  Extractor x(ctx, fd);
  x.want_sites(&want, sites);
  x.launch_scalars(scalars);
  return x.run();
}

}  // namespace kdflow::detail

// device_analyzer.cpp — parse TVM's CUDA source (device.cu) with clang in CUDA device mode
// (in-memory files only) and work out, per __global__ kernel, what the body does through
// each pointer parameter.
//
// The access analysis is a hand walk of each function body on the AST (no matchers, no
// text): every expression yields the set of parameters ("slots") its pointer VALUE may
// derive from and, for lvalues, the slots whose MEMORY it designates; the context an
// lvalue is used in (load, store, compound assignment, ++/--, reference argument, ...)
// turns the designated slots into read/write effects. Local variables (pointers, or
// integers holding a pointer) are aliases: their slot sets are the union over every
// initialization and assignment, iterated to a fixpoint (flow-insensitive, so loops and
// branches need nothing special). Calls to functions defined in the file are followed
// through per-function summaries; calls to the stand-in declarations of device_headers.cpp
// use what those declarations say; anything else is read+write. A derived pointer that
// goes somewhere the walk cannot follow (stored to memory, put in an aggregate, an asm
// operand, a lambda, an expression kind not modelled) "escapes": read+write. So the
// result is sound (no missed write) and, on TVM's code, exact.

#include "kdflow/frontend/device_analyzer.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/Attr.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/Stmt.h>
#include <clang/AST/StmtCXX.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <cstdint>
#include <future>
#include <optional>
#include <map>
#include <set>
#include <unordered_map>

#include "device_headers.h"
#include "tvm_source_fixups.h"
#include "footprint_affine.h"
#include "kernel_ops.h"
#include "in_memory_parse.h"
#include "device_split.h"
#include "kdflow/support/io.h"
#include "kdflow/support/stage_times.h"

namespace kdflow {

namespace {

using namespace clang;

// ---------------------------------------------------------------------------
// Effects and slot sets

enum : uint8_t { kNone = 0, kRead = 1, kWrite = 2, kReadWrite = 3 };

/// A set of slots (parameter indices; a method's `this` is the slot after its parameters).
class Slots {
 public:
  void add(unsigned i) {
    if (i / 64 >= w_.size()) w_.resize(i / 64 + 1, 0);
    w_[i / 64] |= uint64_t(1) << (i % 64);
  }
  /// Adds `o`; true when that added something.
  bool merge(const Slots& o) {
    if (o.w_.size() > w_.size()) w_.resize(o.w_.size(), 0);
    bool changed = false;
    for (size_t k = 0; k < o.w_.size(); ++k) {
      uint64_t n = w_[k] | o.w_[k];
      changed |= n != w_[k];
      w_[k] = n;
    }
    return changed;
  }
  bool empty() const {
    for (uint64_t x : w_)
      if (x) return false;
    return true;
  }
  template <class F>
  void each(F f) const {
    for (size_t k = 0; k < w_.size(); ++k)
      for (unsigned b = 0; b < 64; ++b)
        if ((w_[k] >> b) & 1) f(static_cast<unsigned>(k * 64 + b));
  }
  static Slots all(unsigned n) {
    Slots s;
    for (unsigned i = 0; i < n; ++i) s.add(i);
    return s;
  }

 private:
  std::vector<uint64_t> w_;
};

Slots operator|(Slots a, const Slots& b) {
  a.merge(b);
  return a;
}

/// What a function does through each slot, and which slots its return value may derive from.
struct Summary {
  std::vector<uint8_t> effects;  ///< per slot: kNone..kReadWrite
  Slots ret;
};

unsigned slot_count(const FunctionDecl* fd) {
  const auto* md = dyn_cast<CXXMethodDecl>(fd);
  return fd->getNumParams() + (md && md->isInstance() ? 1 : 0);
}

Summary conservative_summary(const FunctionDecl* fd) {
  Summary s;
  unsigned n = slot_count(fd);
  s.effects.assign(n, kReadWrite);
  s.ret = Slots::all(n);
  return s;
}

/// Whether a value of type `t` can hold (something derived from) a pointer. Floating
/// point, bool, integers narrower than a pointer and records made only of those cannot:
/// values of those types are never followed as addresses.
bool carries_pointer(const ASTContext& ctx, QualType t, int depth = 0) {
  t = t.getCanonicalType();
  if (t->isDependentType() || depth > 16) return true;
  if (t->isVoidType() || t->isRealFloatingType() || t->isBooleanType()) return false;
  if (t->isIntegralOrEnumerationType()) {
    if (t->isIncompleteType()) return true;
    return ctx.getTypeSize(t) >= ctx.getTypeSize(ctx.VoidPtrTy);
  }
  if (const auto* at = dyn_cast<ArrayType>(t.getTypePtr())) return carries_pointer(ctx, at->getElementType(), depth + 1);
  if (const auto* vt = t->getAs<VectorType>()) return carries_pointer(ctx, vt->getElementType(), depth + 1);
  if (const auto* rt = t->getAs<RecordType>()) {
    const RecordDecl* rd = rt->getDecl()->getDefinition();
    if (!rd) return true;
    if (const auto* cxx = dyn_cast<CXXRecordDecl>(rd)) {
      if (cxx->isDynamicClass() || cxx->getNumBases() > 0) return true;  // not needed for TVM's types
    }
    for (const FieldDecl* f : rd->fields())
      if (carries_pointer(ctx, f->getType(), depth + 1)) return true;
    return false;
  }
  return true;  // pointers, references, member pointers, anything else
}

uint8_t annotated_effect(const Decl* d, llvm::StringRef prefix) {
  for (const auto* a : d->specific_attrs<AnnotateAttr>()) {
    llvm::StringRef s = a->getAnnotation();
    if (!s.consume_front(prefix)) continue;
    if (s == "read") return kRead;
    if (s == "write") return kWrite;
    if (s == "readwrite") return kReadWrite;
    if (s == "none") return kNone;
  }
  return 0xff;
}

class Analysis;

// ---------------------------------------------------------------------------
// How a call affects what is passed to it

/// The effect model of one callee.
struct Callee {
  enum class Kind { Defined, Stub, TrivialAssign, TrivialCopy, Trivial, Unknown };
  Kind kind = Kind::Unknown;
  const FunctionDecl* fd = nullptr;     // the callee (may be null: call through a pointer)
  const FunctionDecl* attrs = nullptr;  // where a stub's annotations are (template pattern)
  const Summary* summary = nullptr;     // Defined

  /// Effect through the pointer value / reference passed as argument i.
  uint8_t param(unsigned i) const {
    switch (kind) {
      case Kind::Defined:
        return i < fd->getNumParams() ? summary->effects[i] : uint8_t{kReadWrite};
      case Kind::TrivialAssign:
      case Kind::TrivialCopy: return kRead;
      case Kind::Trivial: return kNone;
      case Kind::Stub: {
        if (i >= attrs->getNumParams()) return kReadWrite;  // through `...`
        const ParmVarDecl* p = attrs->getParamDecl(i);
        uint8_t a = annotated_effect(p, "kdflow:");
        if (a != 0xff) return a;
        QualType t = p->getType();
        QualType pointee;
        if (t->isPointerType()) pointee = t->getPointeeType();
        else if (t->isReferenceType()) pointee = t->getPointeeType();
        else return kNone;  // by value: the stand-ins never turn an integer into a pointer
        return pointee.isConstQualified() ? kRead : kReadWrite;
      }
      case Kind::Unknown: return kReadWrite;
    }
    return kReadWrite;
  }
  /// Effect on the object a member function is called on.
  uint8_t this_effect() const {
    switch (kind) {
      case Kind::Defined: return summary->effects.back();
      case Kind::TrivialAssign: return kWrite;
      case Kind::TrivialCopy:
      case Kind::Trivial: return kNone;
      case Kind::Stub: {
        uint8_t a = annotated_effect(attrs, "kdflow:this:");
        if (a != 0xff) return a;
        const auto* md = dyn_cast<CXXMethodDecl>(fd);
        return md && md->isConst() ? kRead : kReadWrite;
      }
      case Kind::Unknown: return kReadWrite;
    }
    return kReadWrite;
  }
  /// Whether the return value may derive from argument i (this: i == number of params).
  bool returns(unsigned i) const {
    if (kind == Kind::Defined) {
      bool r = false;
      summary->ret.each([&](unsigned s) { r |= s == i; });
      return r || i >= slot_count(fd);  // arguments through `...`
    }
    if (kind == Kind::TrivialAssign) return fd && i == fd->getNumParams();  // returns *this
    if (kind == Kind::TrivialCopy || kind == Kind::Trivial) return false;
    return true;
  }
};

// ---------------------------------------------------------------------------
// The per-function walk

class Analysis {
 public:
  Analysis(ASTContext& ctx, const SourceManager& sm) : ctx_(ctx), sm_(sm) {}
  const Summary& summary(const FunctionDecl* fd, int depth);
  Callee callee(const FunctionDecl* fd, int depth);
  ASTContext& ctx() { return ctx_; }

 private:
  bool is_stub(const Decl* d) const {
    SourceLocation l = sm_.getExpansionLoc(d->getLocation());
    return l.isValid() && sm_.getFilename(l).startswith(detail::kStubIncludeDir);
  }

  ASTContext& ctx_;
  const SourceManager& sm_;
  std::map<const FunctionDecl*, Summary> done_;
  std::set<const FunctionDecl*> active_;
  std::map<const FunctionDecl*, Summary> conservative_;
};

constexpr int kMaxCallDepth = 24;
constexpr size_t kSplitBytes = 64 * 1024;  // device.cu parsed in two halves from this size (jobs > 1)
constexpr int kErrorLimit = 50;  // clang errors a recovering parse of device.cu may report before it gives up
constexpr int kMaxIterations = 128;
constexpr int kMaxNesting = 400;  // statements and expressions within each other (TVM's stay under 60)  // fixpoint rounds; each adds at least one (variable, slot) pair

class Walker {
 public:
  Walker(Analysis& an, const FunctionDecl* fd, int depth)
      : an_(an), ctx_(an.ctx()), fd_(fd), depth_(depth) {}

  Summary run() {
    unsigned n = slot_count(fd_);
    sum_.effects.assign(n, kNone);
    for (unsigned i = 0; i < fd_->getNumParams(); ++i) {
      const ParmVarDecl* p = fd_->getParamDecl(i);
      Slots s;
      s.add(i);
      (p->getType()->isReferenceType() ? refs_ : alias_)[p] = s;
    }
    if (n > fd_->getNumParams()) this_slot_ = static_cast<int>(fd_->getNumParams());
    const Stmt* body = fd_->getBody();
    for (int it = 0; it < kMaxIterations; ++it) {
      changed_ = false;
      stmt(body);
      if (too_deep_) return conservative_summary(fd_);
      if (!changed_) return sum_;
    }
    return conservative_summary(fd_);  // no fixpoint within the limit (not seen in practice)
  }

 private:
  enum class Use { Value, Load, Store, Update, Addr, Discard, Unknown };
  struct Res {
    Slots val;  ///< slots the value (or, for an lvalue, the value it holds) may derive from
    Slots loc;  ///< lvalues: slots whose memory it designates
  };

  static Use use_for(uint8_t eff) {
    switch (eff) {
      case kNone: return Use::Addr;
      case kRead: return Use::Load;
      case kWrite: return Use::Store;
      default: return Use::Update;
    }
  }

  void effect(const Slots& s, uint8_t eff) {
    if (!eff) return;
    s.each([&](unsigned i) {
      if (i < sum_.effects.size()) sum_.effects[i] |= eff;
    });
  }
  void escape(const Slots& s) { effect(s, kReadWrite); }

  /// An access to the memory `loc` used as `use`.
  void apply(Use use, const Slots& loc) {
    switch (use) {
      case Use::Load: effect(loc, kRead); break;
      case Use::Store: effect(loc, kWrite); break;
      case Use::Update:
      case Use::Unknown:
      case Use::Value: effect(loc, kReadWrite); break;
      case Use::Addr:     // address taken: followed through the resulting pointer value
      case Use::Discard:  // a discarded lvalue is not accessed
        break;
    }
  }

  bool merge_var(std::unordered_map<const VarDecl*, Slots>& m, const VarDecl* v, const Slots& s) {
    if (s.empty()) return false;
    bool c = m[v].merge(s);
    changed_ |= c;
    return c;
  }

  const VarDecl* local_var(const Expr* e) const {
    e = e->IgnoreParens();
    if (const auto* dr = dyn_cast<DeclRefExpr>(e))
      if (const auto* v = dyn_cast<VarDecl>(dr->getDecl()))
        if (v->hasLocalStorage() && !v->getType()->isReferenceType()) return v;
    return nullptr;
  }

  /// The value `val` is stored into the object `target` designates.
  void assign_to(const Expr* target, const Slots& val) {
    if (val.empty()) return;
    if (const VarDecl* v = local_var(target)) merge_var(alias_, v, val);
    else escape(val);  // stored to memory: not followed
  }

  // --- statements
  /// Counts nesting while the walk recurses; past kMaxNesting the walk stops and the
  /// function gets the conservative summary (a hostile `a && a && ...` chain or `else if`
  /// ladder thousands deep must not overflow the stack).
  struct Nest {
    Walker& w;
    explicit Nest(Walker& walker) : w(walker) {
      if (++w.nesting_ > kMaxNesting) w.too_deep_ = true;
    }
    ~Nest() { --w.nesting_; }
  };

  void stmt(const Stmt* s) {
    if (!s || too_deep_) return;
    Nest nest(*this);
    if (too_deep_) return;
    if (const auto* e = dyn_cast<Expr>(s)) {
      walk(e, Use::Discard);
      return;
    }
    if (const auto* ds = dyn_cast<DeclStmt>(s)) {
      for (const Decl* d : ds->decls())
        if (const auto* v = dyn_cast<VarDecl>(d)) var_decl(v);
      return;
    }
    if (const auto* rs = dyn_cast<ReturnStmt>(s)) {
      if (const Expr* r = rs->getRetValue()) {
        bool by_ref = fd_->getReturnType()->isReferenceType();
        Res x = walk(r, by_ref ? Use::Addr : Use::Value);
        changed_ |= sum_.ret.merge(by_ref ? x.val | x.loc : x.val);
      }
      return;
    }
    if (const auto* as = dyn_cast<GCCAsmStmt>(s)) {
      for (unsigned i = 0; i < as->getNumOutputs(); ++i) {
        bool rw = as->getOutputConstraint(i).startswith("+");
        Res x = walk(as->getOutputExpr(i), rw ? Use::Update : Use::Store);
        escape(x.val);
      }
      for (unsigned i = 0; i < as->getNumInputs(); ++i) {
        // An input may be an address the asm reads or writes through: read+write.
        Res x = walk(as->getInputExpr(i), Use::Unknown);
        escape(x.val | x.loc);
      }
      return;
    }
    if (isa<AsmStmt>(s)) {  // MS asm: anything it names may be touched
      escape_referenced(s);
      return;
    }
    for (const Stmt* c : s->children()) stmt(c);
  }

  void var_decl(const VarDecl* v) {
    const Expr* init = v->getInit();
    if (!init) return;
    if (v->getType()->isReferenceType()) {
      Res x = walk(init, Use::Addr);
      if (v->hasLocalStorage()) merge_var(refs_, v, x.loc);
      else escape(x.loc);  // a static or global reference
      escape(x.val);
      return;
    }
    Res x = walk(init, init->isGLValue() ? Use::Load : Use::Value);
    if (v->hasLocalStorage()) merge_var(alias_, v, x.val);
    else escape(x.val);  // a static or global now holds it
  }

  /// Conservative fallback: every local variable, parameter and `this` named anywhere in
  /// `s` escapes, and every access in it counts as read+write.
  void escape_referenced(const Stmt* s) {
    if (!s) return;
    if (const auto* dr = dyn_cast<DeclRefExpr>(s)) {
      if (const auto* v = dyn_cast<VarDecl>(dr->getDecl())) {
        auto a = alias_.find(v);
        if (a != alias_.end()) escape(a->second);
        auto r = refs_.find(v);
        if (r != refs_.end()) escape(r->second);
      }
    } else if (isa<CXXThisExpr>(s) && this_slot_ >= 0) {
      Slots t;
      t.add(static_cast<unsigned>(this_slot_));
      escape(t);
    }
    // children() covers initializers in DeclStmts and a lambda's captures and body.
    for (const Stmt* c : s->children()) escape_referenced(c);
  }

  Res generic(const Expr* e) {
    escape_referenced(e);
    Res out;
    for (const Stmt* c : e->children())
      if (const auto* ce = dyn_cast_or_null<Expr>(c)) {
        Res x = walk(ce, Use::Unknown);
        escape(x.val | x.loc);
        out.val.merge(x.val | x.loc);
      }
    return out;
  }

  // --- expressions
  Res walk(const Expr* e, Use use) {
    if (!e || too_deep_) return {};
    Nest nest(*this);
    if (too_deep_) return {};
    Res r = walk_expr(e, e->isPRValue() ? Use::Value : use);
    if (!r.val.empty() && !carries(e->getType())) r.val = Slots{};
    return r;
  }

  bool carries(QualType t) {
    const Type* key = t.getCanonicalType().getTypePtr();
    auto it = carries_.find(key);
    if (it != carries_.end()) return it->second;
    bool c = carries_pointer(ctx_, t);
    carries_.emplace(key, c);
    return c;
  }

  Res walk_expr(const Expr* e, Use use) {

    if (const auto* pe = dyn_cast<ParenExpr>(e)) return walk(pe->getSubExpr(), use);
    if (const auto* fe = dyn_cast<FullExpr>(e)) return walk(fe->getSubExpr(), use);  // ConstantExpr, ExprWithCleanups
    if (const auto* mt = dyn_cast<MaterializeTemporaryExpr>(e)) {
      Res x = walk(mt->getSubExpr(), Use::Value);
      return {x.val, {}};  // a temporary, not memory of a slot
    }
    if (const auto* bt = dyn_cast<CXXBindTemporaryExpr>(e)) return walk(bt->getSubExpr(), use);
    if (const auto* st = dyn_cast<SubstNonTypeTemplateParmExpr>(e)) return walk(st->getReplacement(), use);
    if (const auto* da = dyn_cast<CXXDefaultArgExpr>(e)) return walk(da->getExpr(), use);
    if (const auto* di = dyn_cast<CXXDefaultInitExpr>(e)) return walk(di->getExpr(), use);
    if (const auto* ov = dyn_cast<OpaqueValueExpr>(e)) return ov->getSourceExpr() ? walk(ov->getSourceExpr(), use) : Res{};
    if (const auto* gs = dyn_cast<GenericSelectionExpr>(e))
      return gs->isResultDependent() ? generic(e) : walk(gs->getResultExpr(), use);
    if (const auto* ch = dyn_cast<ChooseExpr>(e))
      return ch->isConditionDependent() ? generic(e) : walk(ch->getChosenSubExpr(), use);

    if (isa<IntegerLiteral, FloatingLiteral, CharacterLiteral, StringLiteral, CXXBoolLiteralExpr,
            CXXNullPtrLiteralExpr, ImaginaryLiteral, FixedPointLiteral, GNUNullExpr, PredefinedExpr,
            SourceLocExpr, CXXScalarValueInitExpr, ImplicitValueInitExpr, SizeOfPackExpr, TypeTraitExpr,
            ArrayTypeTraitExpr, ExpressionTraitExpr, AddrLabelExpr, NoInitExpr>(e))
      return {};
    // Unevaluated operands.
    if (isa<UnaryExprOrTypeTraitExpr, CXXNoexceptExpr>(e)) return {};
    if (const auto* ti = dyn_cast<CXXTypeidExpr>(e)) return ti->isPotentiallyEvaluated() ? generic(e) : Res{};

    if (const auto* th = dyn_cast<CXXThisExpr>(e)) {
      (void)th;
      Res r;
      if (this_slot_ >= 0) r.val.add(static_cast<unsigned>(this_slot_));
      return r;
    }
    if (const auto* dr = dyn_cast<DeclRefExpr>(e)) return decl_ref(dr, use);
    if (const auto* ce = dyn_cast<CastExpr>(e)) return cast(ce, use);
    if (const auto* uo = dyn_cast<UnaryOperator>(e)) return unary(uo, use);
    if (const auto* as = dyn_cast<ArraySubscriptExpr>(e)) {
      if (as->getLHS()->getType()->isVectorType() || as->getLHS()->getType()->isExtVectorType()) {
        walk(as->getIdx(), Use::Value);
        return walk(as->getLHS(), use);  // an element of a vector object
      }
      Res b = walk(as->getBase(), Use::Value);
      Res i = walk(as->getIdx(), Use::Value);
      Slots loc = b.val | i.val;
      apply(use, loc);
      return {{}, loc};
    }
    if (const auto* me = dyn_cast<MemberExpr>(e)) return member(me, use);
    if (const auto* ev = dyn_cast<ExtVectorElementExpr>(e)) {
      if (ev->getBase()->isGLValue()) return walk(ev->getBase(), use);
      return {walk(ev->getBase(), Use::Value).val, {}};
    }
    if (const auto* co = dyn_cast<CompoundAssignOperator>(e)) {
      Res r = walk(co->getRHS(), Use::Value);
      Res l = walk(co->getLHS(), Use::Update);
      assign_to(co->getLHS(), r.val);
      return {l.val | r.val, l.loc};
    }
    if (const auto* bo = dyn_cast<BinaryOperator>(e)) return binary(bo, use);
    if (const auto* cond = dyn_cast<ConditionalOperator>(e)) {
      walk(cond->getCond(), Use::Value);
      Res t = walk(cond->getTrueExpr(), use);
      Res f = walk(cond->getFalseExpr(), use);
      return {t.val | f.val, t.loc | f.loc};
    }
    if (const auto* bc = dyn_cast<BinaryConditionalOperator>(e)) {
      Res c = walk(bc->getCommon(), bc->getCommon()->isGLValue() ? use : Use::Value);
      Res f = walk(bc->getFalseExpr(), use);
      return {c.val | f.val, c.loc | f.loc};
    }
    if (const auto* ce = dyn_cast<CallExpr>(e)) return call(ce, use);
    if (const auto* cc = dyn_cast<CXXConstructExpr>(e)) return construct(cc);
    if (const auto* il = dyn_cast<InitListExpr>(e)) return init_list(il);
    if (const auto* se = dyn_cast<StmtExpr>(e)) {
      const CompoundStmt* cs = se->getSubStmt();
      const Stmt* last = cs->body_empty() ? nullptr : cs->body_back();
      for (const Stmt* c : cs->body())
        if (c != last) stmt(c);
      if (const auto* le = dyn_cast_or_null<Expr>(last)) return walk(le, use);
      stmt(last);
      return {};
    }
    if (const auto* cl = dyn_cast<CompoundLiteralExpr>(e)) {
      Res x = walk(cl->getInitializer(), Use::Value);
      escape(x.val | x.loc);
      return {};
    }
    // Anything else (lambdas, new/delete, throw, atomic builtins, va_arg, ...): conservative.
    return generic(e);
  }

  Res decl_ref(const DeclRefExpr* dr, Use use) {
    const ValueDecl* d = dr->getDecl();
    if (const auto* b = dyn_cast<BindingDecl>(d)) return b->getBinding() ? walk(b->getBinding(), use) : Res{};
    const auto* v = dyn_cast<VarDecl>(d);
    if (!v) return {};
    if (v->getType()->isReferenceType()) {
      Res r;
      auto it = refs_.find(v);
      if (it != refs_.end()) r.loc = it->second;
      apply(use, r.loc);
      return r;
    }
    Res r;
    auto it = alias_.find(v);
    if (it != alias_.end()) r.val = it->second;
    // The variable's address or a reference to it is taken: whatever it holds may be read
    // and changed out of sight.
    if (use == Use::Addr || use == Use::Unknown) escape(r.val);
    return r;
  }

  Res cast(const CastExpr* ce, Use use) {
    const Expr* sub = ce->getSubExpr();
    if (ce->isGLValue()) return walk(sub, use);  // NoOp, LValueBitCast, DerivedToBase, ...
    switch (ce->getCastKind()) {
      case CK_LValueToRValue: {
        Res x = walk(sub, Use::Load);
        return {x.val, {}};
      }
      case CK_ArrayToPointerDecay: {
        Res x = walk(sub, Use::Addr);
        return {x.loc | x.val, {}};
      }
      case CK_FunctionToPointerDecay:
      case CK_BuiltinFnToFnPtr: return {};
      case CK_ToVoid: {
        walk(sub, Use::Discard);
        return {};
      }
      default: break;
    }
    if (sub->isGLValue()) {
      Res x = walk(sub, Use::Load);
      return {x.val | x.loc, {}};
    }
    return {walk(sub, Use::Value).val, {}};
  }

  Res unary(const UnaryOperator* uo, Use use) {
    const Expr* sub = uo->getSubExpr();
    switch (uo->getOpcode()) {
      case UO_Deref: {
        Res b = walk(sub, Use::Value);
        apply(use, b.val);
        return {{}, b.val};
      }
      case UO_AddrOf: {
        Res x = walk(sub, Use::Addr);
        return {x.loc, {}};
      }
      case UO_PreInc:
      case UO_PreDec:
      case UO_PostInc:
      case UO_PostDec: {
        Res x = walk(sub, Use::Update);
        return {x.val, uo->isPrefix() ? x.loc : Slots{}};
      }
      case UO_LNot: walk(sub, Use::Value); return {};
      case UO_Real:
      case UO_Imag:
      case UO_Extension:
        if (uo->isGLValue()) return walk(sub, use);
        return {walk(sub, sub->isGLValue() ? Use::Load : Use::Value).val, {}};
      case UO_Coawait: return generic(uo);
      default: return {walk(sub, Use::Value).val, {}};  // + - ~
    }
  }

  Res member(const MemberExpr* me, Use use) {
    const Expr* base = me->getBase();
    if (!isa<FieldDecl, IndirectFieldDecl>(me->getMemberDecl())) {
      // A static data member (or an enumerator) named through an object: the object is
      // evaluated but not accessed.
      walk(base, me->isArrow() ? Use::Value : Use::Discard);
      return {};
    }
    if (me->isArrow()) {
      Res b = walk(base, Use::Value);
      apply(use, b.val);
      return {{}, b.val};
    }
    if (base->isGLValue()) return walk(base, use);  // part of the base object
    return {walk(base, Use::Value).val, {}};
  }

  Res binary(const BinaryOperator* bo, Use use) {
    switch (bo->getOpcode()) {
      case BO_Assign: {
        Res r = walk(bo->getRHS(), bo->getRHS()->isGLValue() ? Use::Load : Use::Value);
        Res l = walk(bo->getLHS(), Use::Store);
        assign_to(bo->getLHS(), r.val);
        return {r.val, l.loc};
      }
      case BO_Comma:
        walk(bo->getLHS(), Use::Discard);
        return walk(bo->getRHS(), use);
      case BO_LAnd:
      case BO_LOr:
      case BO_EQ:
      case BO_NE:
      case BO_LT:
      case BO_GT:
      case BO_LE:
      case BO_GE:
      case BO_Cmp:
        walk(bo->getLHS(), Use::Value);
        walk(bo->getRHS(), Use::Value);
        return {};
      case BO_PtrMemD:
      case BO_PtrMemI: return generic(bo);
      default: {  // arithmetic: pointer + offset, integers holding addresses, ...
        Res a = walk(bo->getLHS(), Use::Value);
        Res b = walk(bo->getRHS(), Use::Value);
        return {a.val | b.val, {}};
      }
    }
  }

  /// One argument passed to parameter `i` of `c`; returns what the callee may return of it.
  Slots argument(const Callee& c, unsigned i, const Expr* arg) {
    const FunctionDecl* fd = c.fd;
    QualType pt;
    if (fd && i < fd->getNumParams()) pt = fd->getParamDecl(i)->getType();
    uint8_t eff = c.param(i);
    Res x;
    if (!pt.isNull() && pt->isReferenceType()) {
      x = walk(arg, arg->isGLValue() ? use_for(eff) : Use::Value);
      // A referenced pointer variable's value can be read or replaced out of sight.
      escape(x.val);
    } else {
      x = walk(arg, arg->isGLValue() ? Use::Load : Use::Value);
      effect(x.val, eff);
    }
    return c.returns(i) ? x.val | x.loc : Slots{};
  }

  Res finish_call(const Expr* e, const Slots& returned, Use use) {
    if (!carries_pointer(ctx_, e->getType()) && !e->isGLValue()) return {};
    if (e->isGLValue()) {  // a returned reference: designates memory of what it derives from
      apply(use, returned);
      return {{}, returned};
    }
    return {returned, {}};
  }

  Res call(const CallExpr* ce, Use use) {
    const FunctionDecl* fd = ce->getDirectCallee();
    if (isa<CXXPseudoDestructorExpr>(ce->getCallee()->IgnoreParens())) return generic(ce);
    if (!fd) {
      // Through a function pointer or a pointer to member: everything passed escapes.
      Res x = generic(ce);
      return finish_call(ce, x.val, use);
    }
    Callee c = an_.callee(fd, depth_ + 1);
    Slots returned;
    const auto* md = dyn_cast<CXXMethodDecl>(fd);
    bool instance = md && md->isInstance();
    unsigned first_arg = 0;
    const Expr* object = nullptr;
    bool object_is_pointer = false;
    if (const auto* mc = dyn_cast<CXXMemberCallExpr>(ce)) {
      object = mc->getImplicitObjectArgument();
      if (const auto* me = dyn_cast<MemberExpr>(mc->getCallee()->IgnoreParens())) object_is_pointer = me->isArrow();
      else return finish_call(ce, generic(ce).val, use);
    } else if (isa<CXXOperatorCallExpr>(ce) && instance) {
      object = ce->getArg(0);
      first_arg = 1;
    }
    if (instance && object) {
      unsigned this_slot = fd->getNumParams();
      uint8_t eff = c.this_effect();
      Res o;
      if (object_is_pointer) {
        o = walk(object, Use::Value);
        effect(o.val, eff);
      } else {
        o = walk(object, object->isGLValue() ? use_for(eff) : Use::Value);
      }
      if (c.returns(this_slot)) returned.merge(object_is_pointer ? o.val : o.val | o.loc);
    } else if (!instance && !isa<CXXOperatorCallExpr>(ce)) {
      walk(ce->getCallee(), Use::Value);  // the callee expression itself (a function name)
    }
    for (unsigned k = first_arg; k < ce->getNumArgs(); ++k)
      returned.merge(argument(c, k - first_arg, ce->getArg(k)));
    return finish_call(ce, returned, use);
  }

  Res construct(const CXXConstructExpr* cc) {
    Callee c = an_.callee(cc->getConstructor(), depth_ + 1);
    Slots returned;
    for (unsigned k = 0; k < cc->getNumArgs(); ++k) returned.merge(argument(c, k, cc->getArg(k)));
    return {carries_pointer(ctx_, cc->getType()) ? returned : Slots{}, {}};
  }

  Res init_list(const InitListExpr* il) {
    QualType t = il->getType();
    if (!t->isRecordType() && !t->isArrayType() && !t->isVectorType() && il->getNumInits() == 1) {
      const Expr* i0 = il->getInit(0);
      return {walk(i0, i0->isGLValue() ? Use::Load : Use::Value).val, {}};  // scalar `T x{v}`
    }
    // Put into an aggregate: the walk does not follow values through aggregates.
    for (const Expr* i : il->inits()) {
      Res x = walk(i, i->isGLValue() ? Use::Load : Use::Value);
      escape(x.val);
    }
    if (const Expr* f = il->getArrayFiller()) escape(walk(f, Use::Value).val);
    return {};
  }

  Analysis& an_;
  ASTContext& ctx_;
  const FunctionDecl* fd_;
  int depth_;
  int this_slot_ = -1;
  bool changed_ = false;
  int nesting_ = 0;
  bool too_deep_ = false;
  Summary sum_;
  std::unordered_map<const VarDecl*, Slots> alias_;  ///< non-reference variables: value slots
  std::unordered_map<const VarDecl*, Slots> refs_;   ///< reference variables: designated memory
  std::unordered_map<const Type*, bool> carries_;    ///< carries_pointer, memoized
};

Callee Analysis::callee(const FunctionDecl* fd, int depth) {
  Callee c;
  c.fd = fd;
  const FunctionDecl* pattern = fd->getTemplateInstantiationPattern();
  c.attrs = (pattern ? pattern : fd)->getFirstDecl();  // stand-ins annotate their first declaration
  if (const auto* md = dyn_cast<CXXMethodDecl>(fd); md && md->isTrivial()) {
    if (md->isCopyAssignmentOperator() || md->isMoveAssignmentOperator()) c.kind = Callee::Kind::TrivialAssign;
    else if (const auto* ctor = dyn_cast<CXXConstructorDecl>(md); ctor && ctor->isCopyOrMoveConstructor())
      c.kind = Callee::Kind::TrivialCopy;
    else c.kind = Callee::Kind::Trivial;
    return c;
  }
  const FunctionDecl* def = nullptr;
  if (fd->hasBody(def) && def && !is_stub(def)) {  // defined in device.cu: follow the body
    c.kind = Callee::Kind::Defined;
    c.fd = def;
    c.summary = &summary(def, depth);
    return c;
  }
  c.kind = is_stub(c.attrs) ? Callee::Kind::Stub : Callee::Kind::Unknown;
  return c;
}

const Summary& Analysis::summary(const FunctionDecl* fd, int depth) {
  auto it = done_.find(fd);
  if (it != done_.end()) return it->second;
  if (active_.count(fd) || depth > kMaxCallDepth) {
    // Recursion or a call chain past the limit: assume everything.
    auto [c, inserted] = conservative_.emplace(fd, conservative_summary(fd));
    (void)inserted;
    return c->second;
  }
  active_.insert(fd);
  Summary s = Walker(*this, fd, depth).run();
  active_.erase(fd);
  return done_.emplace(fd, std::move(s)).first->second;
}

Access to_access(uint8_t eff) {
  switch (eff) {
    case kRead: return Access::Read;
    case kWrite: return Access::Write;
    case kReadWrite: return Access::ReadWrite;
    default: return Access::Unknown;  // never dereferenced, passed on or let escape
  }
}

/// Where clang's errors are, function by function, after a recovering parse: a kernel whose
/// body, or the body of any function of the file it calls, holds an error (one clang
/// reported inside it, an expression clang had to rebuild, an invalid declaration) is not
/// analyzed; every other kernel is.
class ErrorMap : public RecursiveASTVisitor<ErrorMap> {
 public:
  ErrorMap(const SourceManager& sm, const std::vector<detail::ParseError>& errors, const std::string& virtual_main,
           const std::string& label)
      : sm_(sm), errors_(errors), main_(virtual_main), label_(label) {}

  bool shouldVisitTemplateInstantiations() const { return true; }

  bool VisitFunctionDecl(FunctionDecl* fd) {
    if (!fd->doesThisDeclarationHaveABody()) return true;
    SourceLoc b = detail::presumed_loc(sm_, fd->getSourceRange().getBegin(), main_, label_);
    SourceLoc e = detail::presumed_loc(sm_, fd->getSourceRange().getEnd(), main_, label_);
    if (b.file != label_ || !b.valid() || !e.valid()) return true;  // a stand-in header
    Info& info = fns_[fd];
    for (const auto& err : errors_)
      if (err.loc.file == label_ && !before(err.loc, b) && !before(e, err.loc)) {
        info.error = err.line;
        break;
      }
    if (info.error.empty() && (fd->isInvalidDecl() || body_has_errors(fd->getBody())))
      info.error = errors_.empty() ? std::string() : errors_.front().line;  // tainted by an error outside it
    info.callees = callees(fd->getBody());
    return true;
  }

  /// Why `fd` cannot be analyzed ("" when it can): its own first error, or a callee's.
  std::string reason(const FunctionDecl* fd) {
    std::set<const FunctionDecl*> seen;
    return reason(fd, seen, 0);
  }

 private:
  struct Info {
    std::string error;
    std::vector<const FunctionDecl*> callees;
  };
  static bool before(const SourceLoc& a, const SourceLoc& b) {
    return a.line != b.line ? a.line < b.line : a.col < b.col;
  }

  std::string reason(const FunctionDecl* fd, std::set<const FunctionDecl*>& seen, int depth) {
    auto it = fns_.find(fd);
    if (it == fns_.end() || !seen.insert(fd).second) return {};
    if (!it->second.error.empty()) return it->second.error;
    if (depth > kMaxCallDepth) return {};
    for (const FunctionDecl* c : it->second.callees) {
      const FunctionDecl* def = nullptr;
      if (!c->hasBody(def) || !def) continue;
      std::string r = reason(def, seen, depth + 1);
      if (!r.empty()) return "calls '" + def->getNameAsString() + "', which does not type-check: " + r;
    }
    return {};
  }

  /// Any expression clang had to rebuild after an error, or an invalid declaration.
  static bool body_has_errors(const Stmt* body) {
    struct Finder : RecursiveASTVisitor<Finder> {
      bool found = false;
      bool VisitExpr(Expr* e) {
        found |= e->containsErrors();
        return !found;
      }
      bool VisitDecl(Decl* d) {
        found |= d->isInvalidDecl();
        return !found;
      }
      bool VisitDeclRefExpr(DeclRefExpr* e) {  // a use of something declared with an error
        found |= e->getDecl()->isInvalidDecl();
        return !found;
      }
    } f;
    f.TraverseStmt(const_cast<Stmt*>(body));
    return f.found;
  }

  /// The functions `body` calls or names (constructors included), in order, each once.
  static std::vector<const FunctionDecl*> callees(const Stmt* body) {
    struct Finder : RecursiveASTVisitor<Finder> {
      std::vector<const FunctionDecl*> out;
      std::set<const FunctionDecl*> seen;
      void add(const FunctionDecl* f) {
        if (f && seen.insert(f).second) out.push_back(f);
      }
      bool VisitDeclRefExpr(DeclRefExpr* e) {
        add(dyn_cast<FunctionDecl>(e->getDecl()));
        return true;
      }
      bool VisitMemberExpr(MemberExpr* e) {
        add(dyn_cast<FunctionDecl>(e->getMemberDecl()));
        return true;
      }
      bool VisitCXXConstructExpr(CXXConstructExpr* e) {
        add(e->getConstructor());
        return true;
      }
      bool VisitCallExpr(CallExpr* e) {
        add(e->getDirectCallee());
        return true;
      }
    } f;
    f.TraverseStmt(const_cast<Stmt*>(body));
    return f.out;
  }

  const SourceManager& sm_;
  const std::vector<detail::ParseError>& errors_;
  std::string main_, label_;
  std::map<const FunctionDecl*, Info> fns_;
};

}  // namespace

namespace {

/// Whether one launch's scalar values could tell more about kernel `fd` than its models do:
/// it takes integer scalars and some index of it is not affine.
bool needs_launch_scalars(const FunctionDecl* fd, const KernelModel& m, const KernelOpModel& ops) {
  bool scalar = false;
  for (unsigned i = 0; i < fd->getNumParams(); ++i) scalar |= fd->getParamDecl(i)->getType()->isIntegralOrEnumerationType();
  if (!scalar) return false;
  // Only an index that is not affine can become so (`x / dim`, `x % dim`, `x << i`); a
  // data-dependent index or a while loop stays what it is, and re-modelling a large kernel
  // for every launch of a host loop is not free.
  bool non_affine = ops.access_unknown == reject::kNonAffine;
  for (const ParamModel& p : m.params) non_affine |= p.pointer && p.unknown == reject::kNonAffine;
  for (const OpGroup& g : ops.groups) non_affine |= g.unknown == reject::kNonAffine;
  return non_affine;
}

/// The parse kept alive to re-extract kernels for a launch (KernelSpecializer).
class ClangSpecializer : public KernelSpecializer {
 public:
  ClangSpecializer(std::unique_ptr<ASTUnit> unit, std::vector<const FunctionDecl*> kernels)
      : unit_(std::move(unit)), kernels_(std::move(kernels)) {}
  KernelModel specialize(size_t index, const std::vector<std::optional<int64_t>>& scalars, KernelOpModel* ops) override {
    return detail::extract_affine_model_and_ops(unit_->getASTContext(), kernels_.at(index), ops, &scalars);
  }

 private:
  std::unique_ptr<ASTUnit> unit_;
  std::vector<const FunctionDecl*> kernels_;
};

/// The two halves' specializers as one, by the merged kernel index.
class JoinedSpecializer : public KernelSpecializer {
 public:
  JoinedSpecializer(std::shared_ptr<KernelSpecializer> a, size_t a_kernels, std::shared_ptr<KernelSpecializer> b)
      : a_(std::move(a)), b_(std::move(b)), a_kernels_(a_kernels) {}
  KernelModel specialize(size_t index, const std::vector<std::optional<int64_t>>& scalars, KernelOpModel* ops) override {
    return index < a_kernels_ ? a_->specialize(index, scalars, ops) : b_->specialize(index - a_kernels_, scalars, ops);
  }

 private:
  std::shared_ptr<KernelSpecializer> a_, b_;
  size_t a_kernels_;
};

Expected<DeviceSource> analyze_device_part(const std::string& source, const std::string& file, bool strict,
                                           bool footprints, StageTimes* times, const std::string& part) {
  const std::string virtual_main = std::string(detail::kVirtualInputDir) + "/device.cu";

  // clang 15 refuses sm_90; sm_80 is the target, and the prelude preprocesses the source
  // as for sm_90 (__CUDA_ARCH__ 900, see device_headers.cpp). Nothing depends on it beyond
  // TVM's `__CUDA_ARCH__ >= N` feature blocks.
  std::vector<std::string> args = {"clang",
                                   "-fsyntax-only",
                                   "-x",
                                   "cuda",
                                   "--cuda-device-only",
                                   "-nocudainc",
                                   "-nocudalib",
                                   "--cuda-gpu-arch=sm_80",
                                   "--cuda-path=/__kdflow__/cuda",  // no search of the real PATH / file system
                                   "-std=c++17",
                                   "-target",
                                   "x86_64-unknown-linux-gnu",
                                   "-nostdinc",
                                   "-w",
                                   "-ferror-limit=1",
                                   std::string("-I") + detail::kStubIncludeDir,
                                   "-include",
                                   std::string(detail::kStubIncludeDir) + "/" + detail::kDevicePrelude};
  detail::InMemorySource src{detail::tvm_source_fixups(source), file, virtual_main, &detail::device_stub_headers()};
  std::unique_ptr<ASTUnit> unit;
  std::vector<detail::ParseError> errors;
  std::optional<StageSpan> parse_span(std::in_place, times, base_name(file) + part + ": clang parse");
  if (strict) {
    auto parsed = detail::parse_in_memory(src, args);
    if (!parsed) return parsed.error();
    unit = parsed.take();
  } else {
    // clang's own error recovery, bounded: past kErrorLimit errors clang stops with a fatal
    // error, which (like any fatal error) fails the whole file.
    for (std::string& a : args)
      if (a == "-ferror-limit=1") a = "-ferror-limit=" + std::to_string(kErrorLimit);
    auto parsed = detail::parse_in_memory_recovering(src, args);
    if (!parsed) return parsed.error();
    unit = std::move(parsed->unit);
    errors = std::move(parsed->errors);
  }

  parse_span.reset();
  StageSpan analysis_span(times, base_name(file) + part +
                                     (footprints ? ": access sets, affine models, operations" : ": access sets"));
  ASTContext& ctx = unit->getASTContext();
  const SourceManager& sm = unit->getSourceManager();
  auto to_loc = [&](SourceLocation l) { return detail::presumed_loc(sm, l, virtual_main, file); };


  std::vector<const FunctionDecl*> kernels;
  detail::collect_cuda_kernels(ctx.getTranslationUnitDecl(), kernels);

  ErrorMap error_map(sm, errors, virtual_main, file);
  if (!errors.empty()) error_map.TraverseDecl(ctx.getTranslationUnitDecl());

  DeviceSource out;
  out.file = file;
  Analysis analysis(ctx, sm);
  PrintingPolicy policy = ctx.getPrintingPolicy();
  for (const FunctionDecl* fd : kernels) {
    DeviceFunction f;
    f.name = fd->getNameAsString();
    f.loc = to_loc(fd->getLocation());
    if (const auto* lb = fd->getAttr<CUDALaunchBoundsAttr>()) {
      if (const Expr* mt = lb->getMaxThreads())
        if (auto v = mt->getIntegerConstantExpr(ctx)) f.launch_bounds = v->getExtValue();
    }
    if (!errors.empty()) {
      f.access_error = error_map.reason(fd);
      if (f.access_error.empty() && fd->isInvalidDecl()) f.access_error = errors.front().line;
    }
    Summary unanalyzed;
    if (!f.access_error.empty()) unanalyzed.effects.assign(slot_count(fd), kNone);
    const Summary& s = f.access_error.empty() ? analysis.summary(fd, 0) : unanalyzed;
    for (unsigned i = 0; i < fd->getNumParams(); ++i) {
      const ParmVarDecl* p = fd->getParamDecl(i);
      DeviceParam dp;
      dp.name = p->getNameAsString();
      dp.type = p->getType().getAsString(policy);
      dp.pointer = p->getType()->isPointerType();
      if (dp.pointer) dp.access = to_access(s.effects[i]);
      f.params.push_back(std::move(dp));
    }
    out.functions.push_back(std::move(f));
    if (footprints) {
      KernelOpModel ops;
      out.footprint_models.push_back(detail::extract_affine_model_and_ops(ctx, fd, &ops));
      const bool analyzed = out.functions.back().access_error.empty();
      out.specializable.push_back(analyzed && needs_launch_scalars(fd, out.footprint_models.back(), ops) ? 1 : 0);
      out.op_models.push_back(std::move(ops));
    }
  }
  // The parse stays alive only when a launch's scalars could tell more about some kernel.
  if (std::find(out.specializable.begin(), out.specializable.end(), 1) != out.specializable.end())
    out.specializer = std::make_shared<ClangSpecializer>(std::move(unit), kernels);
  // Errors no unanalyzed kernel accounts for (outside every kernel and every function a
  // kernel calls): they change no access set, but are reported, never dropped.
  for (const auto& e : errors) {
    bool used = false;
    for (const DeviceFunction& f : out.functions) used |= f.access_error.find(e.line) != std::string::npos;
    if (!used) out.other_errors.push_back(e.line);
  }
  return out;
}

}  // namespace

Expected<DeviceSource> analyze_device_source(const std::string& source, const std::string& file, bool strict,
                                             bool footprints, StageTimes* times, int jobs) {
  // Two threads parse two halves of a large file (each half: its kernels and every other
  // top-level line, positions kept by #line): the same kernels, in the same order, with the
  // same facts. Any error in either half, and the whole file is analyzed as one, so errors
  // and their positions are exactly the single parse's.
  if (jobs > 1 && source.size() >= kSplitBytes) {
    if (std::optional<detail::DeviceHalves> halves = detail::split_device_source(source)) {
      auto second = std::async(std::launch::async, [&] {
        return analyze_device_part(halves->second, file, strict, footprints, times, " [2/2]");
      });
      Expected<DeviceSource> a = analyze_device_part(halves->first, file, strict, footprints, times, " [1/2]");
      Expected<DeviceSource> b = second.get();
      auto clean = [](const Expected<DeviceSource>& d, size_t kernels) {
        if (!d || !d->other_errors.empty() || d->functions.size() != kernels) return false;
        for (const DeviceFunction& f : d->functions)
          if (!f.access_error.empty()) return false;
        return true;
      };
      if (clean(a, halves->first_kernels) && clean(b, halves->second_kernels)) {
        DeviceSource out = a.take();
        DeviceSource rest = b.take();
        for (auto& f : rest.functions) out.functions.push_back(std::move(f));
        for (auto& m : rest.footprint_models) out.footprint_models.push_back(std::move(m));
        for (auto& m : rest.op_models) out.op_models.push_back(std::move(m));
        out.specializable.insert(out.specializable.end(), rest.specializable.begin(), rest.specializable.end());
        if (out.specializer || rest.specializer)
          out.specializer = std::make_shared<JoinedSpecializer>(out.specializer, halves->first_kernels, rest.specializer);
        return out;
      }
    }
  }
  return analyze_device_part(source, file, strict, footprints, times, "");
}

}  // namespace kdflow

// fission_ast.h — small helpers on the clang AST that region fission (region_fission.cpp) and
// its uniformity analysis (uniformity.cpp) share. Internal to lib/replay/cpu.
#pragma once

#include <functional>
#include <utility>

#include <clang/AST/Attr.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/Stmt.h>

namespace kdflow::cpu::fission {

/// Orders AST nodes by where they are written — the raw encoding of their source locations,
/// which is the same for the same input on every run — not by address (where clang happened to
/// allocate them, which changes from run to run): a set or map keyed by nodes then iterates in
/// the same order every run, and the text written from it is the same. The keys of such a
/// container are distinct declarations, or distinct statements of compounds, which never share
/// a location; the address only breaks a tie no such key has (a node and an implicit cast of it).
/// Null first.
struct BySource {
  bool operator()(const clang::Decl* a, const clang::Decl* b) const {
    if (!a || !b) return !a && b;
    const auto ka = std::make_pair(a->getLocation().getRawEncoding(), a->getBeginLoc().getRawEncoding());
    const auto kb = std::make_pair(b->getLocation().getRawEncoding(), b->getBeginLoc().getRawEncoding());
    return ka != kb ? ka < kb : std::less<const clang::Decl*>()(a, b);
  }
  bool operator()(const clang::Stmt* a, const clang::Stmt* b) const {
    if (!a || !b) return !a && b;
    const auto ka = std::make_pair(a->getBeginLoc().getRawEncoding(), a->getEndLoc().getRawEncoding());
    const auto kb = std::make_pair(b->getBeginLoc().getRawEncoding(), b->getEndLoc().getRawEncoding());
    return ka != kb ? ka < kb : std::less<const clang::Stmt*>()(a, b);
  }
};

/// Whether a declaration is a __shared__ variable (the CPU prelude's annotation).
inline bool is_shared_var(const clang::Decl* d) {
  for (const auto* a : d->specific_attrs<clang::AnnotateAttr>())
    if (a->getAnnotation() == "kdflow.shared") return true;
  return false;
}

/// Every statement under `s` (itself included), pre-order.
inline void walk(const clang::Stmt* s, const std::function<void(const clang::Stmt*)>& f) {
  if (!s) return;
  f(s);
  for (const clang::Stmt* c : s->children()) walk(c, f);
}

/// The name of a call's direct callee, "" for an indirect call.
inline std::string callee(const clang::CallExpr* c) {
  if (const clang::FunctionDecl* d = c->getDirectCallee()) return d->getNameAsString();
  return "";
}

/// The variable statement `x` assigns, increments or takes the address of, if any.
inline const clang::ValueDecl* written_var(const clang::Stmt* x) {
  using namespace clang;
  const Expr* t = nullptr;
  if (const auto* b = dyn_cast<BinaryOperator>(x); b && b->isAssignmentOp()) t = b->getLHS();
  if (const auto* b = dyn_cast<CompoundAssignOperator>(x)) t = b->getLHS();
  if (const auto* u = dyn_cast<UnaryOperator>(x); u && (u->isIncrementDecrementOp() || u->getOpcode() == UO_AddrOf))
    t = u->getSubExpr();
  const auto* r = t ? dyn_cast<DeclRefExpr>(t->IgnoreParenImpCasts()) : nullptr;
  return r ? r->getDecl() : nullptr;
}

/// A variable's initialiser, none for a default construction (`float2 a[8];`).
inline const clang::Expr* initialiser(const clang::VarDecl* v) {
  using namespace clang;
  const Expr* e = v->getInit();
  if (!e) return nullptr;
  if (const auto* c = dyn_cast<CXXConstructExpr>(e->IgnoreImplicit()); c && c->getNumArgs() == 0) return nullptr;
  return e;
}

}  // namespace kdflow::cpu::fission

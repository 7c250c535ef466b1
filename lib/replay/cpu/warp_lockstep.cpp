// warp_lockstep.cpp — see warp_lockstep.h.
#include "warp_lockstep.h"

#include <algorithm>
#include <set>

#include <clang/AST/ASTContext.h>
#include <clang/AST/Expr.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>

namespace kdflow::cpu {
namespace {

using namespace clang;

/// The pointer parameter an lvalue is an element of (P[i], *(T*)(P + i)), and its index
/// expression (i; null for *P).
const ParmVarDecl* element_of(const Expr* e, const Expr** index) {
  e = e->IgnoreParenCasts();
  *index = nullptr;
  if (const auto* a = dyn_cast<ArraySubscriptExpr>(e)) {
    *index = a->getIdx();
    if (const auto* d = dyn_cast<DeclRefExpr>(a->getBase()->IgnoreParenCasts()))
      return dyn_cast<ParmVarDecl>(d->getDecl());
    return nullptr;
  }
  if (const auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Deref) {
    const Expr* p = u->getSubExpr()->IgnoreParenCasts();
    if (const auto* b = dyn_cast<BinaryOperator>(p); b && b->getOpcode() == BO_Add) {
      *index = b->getRHS();
      p = b->getLHS()->IgnoreParenCasts();
    }
    if (const auto* d = dyn_cast<DeclRefExpr>(p)) return dyn_cast<ParmVarDecl>(d->getDecl());
  }
  return nullptr;
}

/// Every element access through a pointer parameter, and which of them are stores.
struct Accesses : RecursiveASTVisitor<Accesses> {
  std::set<const Expr*> stored;                    ///< assignment targets
  std::set<const ParmVarDecl*> read;               ///< parameters some non-store access reads
  bool VisitBinaryOperator(BinaryOperator* b) {
    if (b->isAssignmentOp()) {
      stored.insert(b->getLHS()->IgnoreParenCasts());
      if (b->isCompoundAssignmentOp()) note_read(b->getLHS());
    }
    return true;
  }
  bool VisitArraySubscriptExpr(ArraySubscriptExpr* a) {
    if (!stored.count(a)) note_read(a);
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator* u) {
    if (u->getOpcode() == UO_Deref && !stored.count(u)) note_read(u);
    return true;
  }
  void note_read(const Expr* e) {
    const Expr* idx = nullptr;
    if (const ParmVarDecl* p = element_of(e, &idx)) read.insert(p);
  }
};

bool names_thread_x(const Expr* e, const SourceManager& sm, const LangOptions& lo) {
  if (!e) return false;
  CharSourceRange r = CharSourceRange::getTokenRange(sm.getExpansionRange(e->getSourceRange()).getAsRange());
  std::string text = Lexer::getSourceText(r, sm, lo).str();
  text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n'; }),
             text.end());
  return text.find("threadIdx.x") != std::string::npos;
}

}  // namespace

std::vector<size_t> warp_lockstep_points(ASTContext& ctx, const std::vector<const FunctionDecl*>& kernels) {
  const SourceManager& sm = ctx.getSourceManager();
  std::set<size_t> out;
  for (const FunctionDecl* k : kernels) {
    const auto* body = dyn_cast_or_null<CompoundStmt>(k->getBody());
    if (!body) continue;
    // Stores first (so that an assignment's target is not counted as a read), then reads.
    Accesses acc;
    for (const Stmt* s : body->body())
      if (const auto* b = dyn_cast<BinaryOperator>(s); b && b->isAssignmentOp())
        acc.stored.insert(b->getLHS()->IgnoreParenCasts());
    acc.TraverseStmt(const_cast<CompoundStmt*>(body));
    for (const Stmt* s : body->body()) {
      const auto* b = dyn_cast<BinaryOperator>(s);
      if (!b || !b->isAssignmentOp()) continue;
      const Expr* idx = nullptr;
      const ParmVarDecl* p = element_of(b->getLHS(), &idx);
      if (!p || !p->getType()->isPointerType() || !acc.read.count(p)) continue;
      if (names_thread_x(idx, sm, ctx.getLangOpts())) continue;
      const SourceLocation at = sm.getExpansionLoc(s->getBeginLoc());
      if (!sm.isWrittenInMainFile(at)) continue;
      out.insert(sm.getFileOffset(at));
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace kdflow::cpu

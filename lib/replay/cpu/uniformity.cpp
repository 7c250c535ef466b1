// uniformity.cpp — see uniformity.h.
#include "uniformity.h"

#include <functional>
#include <string>

#include "fission_ast.h"

namespace kdflow::cpu {

using namespace clang;
using fission::callee;
using fission::initialiser;
using fission::is_shared_var;
using fission::walk;
using fission::written_var;

Uniformity::Uniformity(const Stmt* body, const ParentMap& pm, Varying varying)
    : body_(body), pm_(pm), varying_(varying) {
  walk(body_, [&](const Stmt* s) {
    if (const ValueDecl* d = written_var(s)) written_.insert(d);
  });
}

/// Whether `e` is the same for every thread of the block.
bool Uniformity::uniform(const Expr* e) const {
  bool ok = true;
  walk(e, [&](const Stmt* s) {
    if (!ok) return;
    if (const auto* m = dyn_cast<MemberExpr>(s)) {
      const std::string n = m->getMemberDecl()->getNameAsString();
      if (n == "thread_idx" || n == "lane" || n == "live_mask" || varying_block(m)) ok = false;
    }
    if (const auto* r = dyn_cast<DeclRefExpr>(s)) {
      const ValueDecl* d = r->getDecl();
      if (isa<EnumConstantDecl>(d) || isa<FunctionDecl>(d)) return;
      if (const auto* p = dyn_cast<ParmVarDecl>(d)) {
        if (written_.count(p)) ok = false;
        return;
      }
      if (const auto* v = dyn_cast<VarDecl>(d); v && vars_.count(v)) return;
      ok = false;
    }
    if (isa<CallExpr>(s)) {
      const auto* c = cast<CallExpr>(s);
      const std::string n = callee(c);
      if (n != "__kdflow_ctx" && n != "min" && n != "max" && n.rfind("__", 0) == 0) ok = false;
    }
  });
  return ok;
}

/// Whether `m` is blockIdx (whole, or a component a batch varies in) where blocks vary.
bool Uniformity::varying_block(const MemberExpr* m) const {
  if ((!varying_.block_x && !varying_.block_y) || m->getMemberDecl()->getNameAsString() != "block_idx") return false;
  const Stmt* p = pm_.getParent(m);
  while (p && (isa<ImplicitCastExpr>(p) || isa<ParenExpr>(p))) p = pm_.getParent(p);
  const auto* c = dyn_cast_or_null<MemberExpr>(p);
  if (!c) return true;  // blockIdx as a whole
  const std::string n = c->getMemberDecl()->getNameAsString();
  return (n == "x" && varying_.block_x) || (n == "y" && varying_.block_y);
}

/// The local an lvalue belongs to (x, x[i], x.f, *(T*)(x + i)), with the expressions that pick
/// the element (indices, offsets) added to `picks`; null when it is not a local's.
const VarDecl* Uniformity::root_local(const Expr* e, std::vector<const Expr*>* picks) const {
  for (;;) {
    e = e->IgnoreParenImpCasts();
    if (const auto* c = dyn_cast<CStyleCastExpr>(e)) {
      e = c->getSubExpr();
      continue;
    }
    if (const auto* a = dyn_cast<ArraySubscriptExpr>(e)) {
      picks->push_back(a->getIdx());
      e = a->getBase();
      continue;
    }
    if (const auto* m = dyn_cast<MemberExpr>(e); m && !m->isArrow()) {
      e = m->getBase();
      continue;
    }
    if (const auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Deref) {
      e = u->getSubExpr();
      continue;
    }
    if (const auto* b = dyn_cast<BinaryOperator>(e);
        b && (b->getOpcode() == BO_Add || b->getOpcode() == BO_Sub) && b->getType()->isPointerType()) {
      const bool left = b->getLHS()->getType()->isPointerType();
      picks->push_back(left ? b->getRHS() : b->getLHS());
      e = left ? b->getLHS() : b->getRHS();
      continue;
    }
    break;
  }
  const auto* r = dyn_cast<DeclRefExpr>(e);
  const auto* v = r ? dyn_cast<VarDecl>(r->getDecl()) : nullptr;
  return v && !isa<ParmVarDecl>(v) && v->isLocalVarDecl() && !is_shared_var(v) ? v : nullptr;
}

/// The conditions that decide whether a thread reaches `s` (if, loop, ?:, && and ||), or
/// false where that is not only conditions (a switch, a loop a break or continue leaves).
bool Uniformity::control_conditions(const Stmt* s, std::vector<const Expr*>* conds) {
  for (const Stmt* c = s, *p = pm_.getParent(s); p && c != body_; c = p, p = pm_.getParent(p)) {
    if (const auto* i = dyn_cast<IfStmt>(p); i && c != i->getCond()) conds->push_back(i->getCond());
    if (isa<ForStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p)) {
      const Expr* cond = isa<ForStmt>(p)     ? cast<ForStmt>(p)->getCond()
                         : isa<WhileStmt>(p) ? cast<WhileStmt>(p)->getCond()
                                             : cast<DoStmt>(p)->getCond();
      const bool in_init = isa<ForStmt>(p) && c == cast<ForStmt>(p)->getInit();
      if (!in_init && cond) conds->push_back(cond);
      if (!in_init && leaves_early(p) && !exit_conditions(p, conds)) return false;
    }
    if (isa<SwitchStmt>(p)) return false;
    if (const auto* q = dyn_cast<ConditionalOperator>(p); q && c != q->getCond()) conds->push_back(q->getCond());
    if (const auto* b = dyn_cast<BinaryOperator>(p); b && b->isLogicalOp() && c == b->getRHS())
      conds->push_back(b->getLHS());
  }
  return true;
}

/// The conditions that guard each break or continue of loop `l` (a thread leaves early where
/// one holds): false where one is not only conditions.
bool Uniformity::exit_conditions(const Stmt* l, std::vector<const Expr*>* conds) const {
  bool ok = true;
  std::function<void(const Stmt*, bool)> look = [&](const Stmt* x, bool top) {
    if (!x || !ok) return;
    if (isa<BreakStmt>(x) || isa<ContinueStmt>(x)) {
      for (const Stmt* c = x, *p = pm_.getParent(x); p && c != l; c = p, p = pm_.getParent(p)) {
        if (const auto* i = dyn_cast<IfStmt>(p); i && c != i->getCond()) conds->push_back(i->getCond());
        if (isa<SwitchStmt>(p) || isa<ConditionalOperator>(p)) ok = false;
      }
      return;
    }
    if (!top && (isa<ForStmt>(x) || isa<WhileStmt>(x) || isa<DoStmt>(x) || isa<SwitchStmt>(x))) return;
    for (const Stmt* c : x->children()) look(c, false);
  };
  look(l, true);
  return ok;
}

/// Whether a break or continue of loop `l` (not of a loop or switch inside it) is in its body.
bool Uniformity::leaves_early(const Stmt* l) {
  if (auto it = leaves_early_.find(l); it != leaves_early_.end()) return it->second;
  bool found = false;
  std::function<void(const Stmt*, bool)> look = [&](const Stmt* x, bool top) {
    if (!x || found) return;
    if (isa<BreakStmt>(x) || isa<ContinueStmt>(x)) found = true;
    if (!top && (isa<ForStmt>(x) || isa<WhileStmt>(x) || isa<DoStmt>(x) || isa<SwitchStmt>(x))) return;
    for (const Stmt* c : x->children()) look(c, false);
  };
  look(l, true);
  return leaves_early_[l] = found;
}

/// Locals every thread of the block holds the same value in (vars_): each assignment
/// of one (its declaration's initialiser, `x = e`, `x[i] op= e`, ++x) is reached in uniform
/// control and assigns a uniform value at a uniform element; none has its address taken or is
/// bound to a non-const reference. TVM keeps such values in one-element arrays (a decode's
/// kv_chunk_len[0], read in the bound of the loop that holds its barriers). Found by removing
/// candidates until none is left to remove (uniform() reads the set).
void Uniformity::find_locals() {
  struct Write {
    const VarDecl* var;
    const Stmt* site;
    std::vector<const Expr*> values;
  };
  std::vector<Write> writes;
  // In the order written (fission_ast.h's BySource): the result does not depend on the order
  // candidates are removed in, but nothing here iterates by address either.
  std::set<const VarDecl*, fission::BySource> cand, escaped;
  walk(body_, [&](const Stmt* s) {
    if (const auto* d = dyn_cast<DeclStmt>(s)) {
      for (const Decl* dd : d->decls())
        if (const auto* v = dyn_cast<VarDecl>(dd); v && v->isLocalVarDecl() && !is_shared_var(v) && !v->isStaticLocal()) {
          cand.insert(v);
          if (const Expr* init = initialiser(v)) writes.push_back({v, d, {init}});
        }
      return;
    }
    const Expr* target = nullptr;
    std::vector<const Expr*> values;
    if (const auto* b = dyn_cast<BinaryOperator>(s); b && b->isAssignmentOp()) {
      target = b->getLHS();
      values = {b->getRHS()};
      if (b->isCompoundAssignmentOp()) values.push_back(b->getLHS());
    } else if (const auto* op = dyn_cast<CXXOperatorCallExpr>(s); op && op->isAssignmentOp() && op->getNumArgs() == 2) {
      target = op->getArg(0);
      values = {op->getArg(1), op->getArg(0)};
    } else if (const auto* u = dyn_cast<UnaryOperator>(s); u && u->isIncrementDecrementOp()) {
      target = u->getSubExpr();
      values = {u->getSubExpr()};
    } else if (const auto* u = dyn_cast<UnaryOperator>(s); u && u->getOpcode() == UO_AddrOf) {
      std::vector<const Expr*> ignored;
      if (const VarDecl* v = root_local(u->getSubExpr(), &ignored)) escaped.insert(v);
      return;
    } else if (const auto* m = dyn_cast<CXXMemberCallExpr>(s)) {
      std::vector<const Expr*> ignored;
      const auto* md = m->getMethodDecl();
      if (md && !md->isConst())
        if (const VarDecl* v = root_local(m->getImplicitObjectArgument(), &ignored)) escaped.insert(v);
      return;
    } else if (const auto* c = dyn_cast<CallExpr>(s)) {
      const FunctionDecl* f = c->getDirectCallee();
      for (unsigned i = 0; i < c->getNumArgs(); ++i) {
        const bool by_ref = !f || i >= f->getNumParams() ||
                            (f->getParamDecl(i)->getType()->isReferenceType() &&
                             !f->getParamDecl(i)->getType()->getPointeeType().isConstQualified());
        std::vector<const Expr*> ignored;
        if (const VarDecl* v = root_local(c->getArg(i), &ignored);
            v && (by_ref || c->getArg(i)->getType()->isPointerType()))
          escaped.insert(v);
      }
      return;
    } else {
      return;
    }
    std::vector<const Expr*> picks;
    if (const VarDecl* v = root_local(target, &picks)) {
      values.insert(values.end(), picks.begin(), picks.end());
      writes.push_back({v, s, values});
    }
  });
  // With every candidate taken as uniform, a write whose value or control is still not
  // (threadIdx, a parameter assigned, a switch) makes its local non-uniform; and so, in
  // turn, does every write whose value or control reads a local that is not.
  const std::set<const VarDecl*> before = vars_;
  vars_.insert(cand.begin(), cand.end());
  std::map<const VarDecl*, std::vector<const VarDecl*>, fission::BySource> readers;  // local → locals written from it
  std::vector<const VarDecl*> out(escaped.begin(), escaped.end());
  for (const Write& w : writes) {
    std::vector<const Expr*> exprs = w.values;
    bool ok = control_conditions(w.site, &exprs);
    for (const Expr* e : exprs) {
      ok = ok && uniform(e);
      walk(e, [&](const Stmt* x) {
        if (const auto* r = dyn_cast<DeclRefExpr>(x))
          if (const auto* v = dyn_cast<VarDecl>(r->getDecl()); v && cand.count(v)) readers[v].push_back(w.var);
      });
    }
    if (!ok) out.push_back(w.var);
  }
  while (!out.empty()) {
    const VarDecl* v = out.back();
    out.pop_back();
    if (!cand.erase(v)) continue;
    for (const VarDecl* r : readers[v]) out.push_back(r);
  }
  vars_ = before;
  vars_.insert(cand.begin(), cand.end());
}

}  // namespace kdflow::cpu

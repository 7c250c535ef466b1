// region_fission.cpp — see region_fission.h.
#include "region_fission.h"

#include "fission_kernel.h"

#include <algorithm>
#include <array>
#include <functional>
#include <set>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/ParentMap.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Lex/Lexer.h>
#include <clang/Rewrite/Core/Rewriter.h>

#include <fmt/format.h>

namespace kdflow::cpu {
namespace fission {
namespace {

const char* const kCollectives[] = {"__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp",
                                    "__activemask", "__ballot_sync", "__any_sync", "__all_sync", "__uni_sync",
                                    "__match_any_sync", "__match_all_sync", "__kdflow_syncwarp",
                                    "__kdflow_warp_shuffle", "__kdflow_warp_vote", "__kdflow_warp_step",
                                    "__lanemask_lt"};

}  // namespace

std::string Kernel::run(bool one_thread) {
  body_ = f_->getBody();
  pm_ = std::make_unique<ParentMap>(body_);
  if (one_thread) {
    // Only where it synchronises: a kernel without collectives runs each block as a loop already.
    walk(body_, [&](const Stmt* s) {
      if (const auto* c = dyn_cast<CallExpr>(s)) {
        const std::string n = callee(c);
        for (const char* k : kCollectives) saw_collective_ = saw_collective_ || n == k;
        saw_collective_ = saw_collective_ || n == "__syncthreads" || shuffle_mode(n) >= 0;
      }
    });
    if (!saw_collective_) return "";
    std::string text = one_thread_body();
    if (!text.empty() || !why_.empty()) return text;
  }
  if (!find_splits() || !check_calls() || !check_control() || !check_structure(body_)) return "";
  if (!plan_privates(body_) || !check_shared_regions(body_) || !replace_tokens()) return "";
  return emit_body();
}

std::string Kernel::emit_body() {
  // A local named in one region only (TVM's many temporaries) stays a local of that region.
  number_regions(body_);
  std::set<const VarDecl*, BySource> in_headers;
  for (const DeclRefExpr* r : header_refs_) in_headers.insert(cast<VarDecl>(r->getDecl()));
  for (auto it = privates_.begin(); it != privates_.end();) {
    auto r = regions_of_.find(it->first);
    if ((r == regions_of_.end() || r->second.size() <= 1) && !in_headers.count(it->first)) {
      locals_.insert(it->first);
      it = privates_.erase(it);
    } else {
      ++it;
    }
  }
  // A header between thread loops reads thread 0's copy of a private local (uniform: all equal).
  for (const DeclRefExpr* r : header_refs_) {
    const auto* v = cast<VarDecl>(r->getDecl());
    if (uni_->has(v) && !privates_.count(v)) continue;  // a loop's own counter
    if (!privates_.count(v) || r->getLocation().isMacroID()) return fail("a header reads a local it cannot reach"), "";
    replace_token(r->getLocation(), privates_.at(v) + "[0]");
  }
  // A batch: a private array used element by element only is one array per element, its
  // lanes side by side (`a[i]` → `__kd_pN[i][lane]`: a vector's lanes load contiguously).
  if (batch_w_)
    for (const auto& [v, name] : privates_)
      if (!in_headers.count(v) && transpose(v, name)) transposed_.insert(v);
  std::string text = emit_compound(cast<CompoundStmt>(body_), true);
  if (!why_.empty()) return "";
  return text;
}

bool Kernel::fail(std::string w) {
  if (why_.empty()) why_ = std::move(w);
  return false;
}

int Kernel::shuffle_mode(const std::string& n) {
  if (n == "__shfl_sync" || n == "__shfl") return 0;
  if (n == "__shfl_up_sync" || n == "__shfl_up") return 1;
  if (n == "__shfl_down_sync" || n == "__shfl_down") return 2;
  if (n == "__shfl_xor_sync" || n == "__shfl_xor") return 3;
  return -1;
}

bool Kernel::find_splits() {
  bool ok = true;
  walk(body_, [&](const Stmt* s) {
    const auto* c = dyn_cast<CallExpr>(s);
    if (!c || !ok) return;
    const std::string n = callee(c);
    // A warp barrier (the back end's own, where a warp's lanes must stay in step: warp_lockstep.h)
    // as a block barrier: under the same uniform control every thread reaches it, and the
    // stronger order changes no value.
    if (n == "__syncthreads" || n == "__syncwarp") {
      barriers_.insert(c);
      return;
    }
    if (n == "__activemask") {
      masks_.push_back(c);
      saw_collective_ = true;
      return;
    }
    const int mode = shuffle_mode(n);
    if (mode < 0) return;
    saw_collective_ = true;
    // x = __shfl_*(...), the call the whole right-hand side, the assignment a statement (for a
    // class type such as half, operator= with the call's value, as a temporary).
    const Stmt* p = pm_->getParent(c);
    while (p && (isa<ImplicitCastExpr>(p) || isa<ParenExpr>(p) || isa<MaterializeTemporaryExpr>(p) ||
                 isa<CXXBindTemporaryExpr>(p) ||
                 (isa<CXXConstructExpr>(p) && cast<CXXConstructExpr>(p)->getNumArgs() == 1)))
      p = pm_->getParent(p);
    const Expr* lhs = nullptr;
    if (const auto* b = dyn_cast_or_null<BinaryOperator>(p); b && b->getOpcode() == BO_Assign) lhs = b->getLHS();
    if (const auto* op = dyn_cast_or_null<CXXOperatorCallExpr>(p);
        op && op->getOperator() == OO_Equal && op->getNumArgs() == 2 && op->getArg(1)->IgnoreImplicit() != c)
      lhs = nullptr;
    else if (op && op->getOperator() == OO_Equal && op->getNumArgs() == 2)
      lhs = op->getArg(0);
    const Stmt* a = p;
    if (a && isa_and_nonnull<ExprWithCleanups>(pm_->getParent(a))) a = pm_->getParent(a);
    if (!lhs || !isa_and_nonnull<CompoundStmt>(pm_->getParent(a))) {
      ok = fail("a warp shuffle that is not a statement `x = " + n + "(...)`");
      return;
    }
    const bool sync = n.size() > 5 && n.compare(n.size() - 5, 5, "_sync") == 0;
    const unsigned first = sync ? 1 : 0;
    if (c->getNumArgs() < first + 2) {
      ok = fail("a warp shuffle with too few arguments");
      return;
    }
    if (sync && c->getArg(0)->HasSideEffects(ctx_)) {
      ok = fail("a warp shuffle whose mask has side effects");
      return;
    }
    const Expr* width = c->getNumArgs() > first + 2 ? c->getArg(first + 2) : nullptr;
    if (width && isa<CXXDefaultArgExpr>(width)) width = nullptr;
    shuffles_[a] = Shuffle{lhs, c, mode, c->getArg(first), c->getArg(first + 1), width,
                           static_cast<int>(shuffles_.size())};
  });
  if (!ok) return false;
  // No split point: the whole body one region, one loop over the block's threads (instead of a
  // call of the kernel per thread), where the rest of the checks allow. The body counts as
  // holding a split point, so that its declarations are planned as a barrier kernel's are
  // (__shared__ ones outside the loop, the others inside it).
  if (barriers_.empty() && shuffles_.empty()) {
    if (!masks_.empty()) return fail("an __activemask() with no shuffle");
    marked_.insert(body_);
    return true;
  }
  for (const CallExpr* b : barriers_) {
    if (!isa_and_nonnull<CompoundStmt>(pm_->getParent(b)))
      return fail("a __syncthreads() that is not a statement of its own");
    for (const Stmt* s = b; s; s = pm_->getParent(s)) marked_.insert(s);
  }
  for (const auto& [st, sh] : shuffles_)
    for (const Stmt* s = st; s; s = pm_->getParent(s)) marked_.insert(s);
  // An __activemask() in a statement of a compound that holds a barrier or shuffle (so in
  // control every thread takes), not under a condition within that statement: all the warp's
  // lanes that exist.
  for (const CallExpr* m : masks_) {
    const Stmt* s = m;
    for (const Stmt* p = pm_->getParent(s); p && !isa<CompoundStmt>(p); p = pm_->getParent(p)) {
      if (isa<IfStmt>(p) || isa<ForStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p) || isa<SwitchStmt>(p) ||
          isa<ConditionalOperator>(p) || isa<BinaryConditionalOperator>(p) ||
          (isa<BinaryOperator>(p) && cast<BinaryOperator>(p)->isLogicalOp()))
        return fail("an __activemask() under a condition");
      s = p;
    }
    if (!marked(pm_->getParent(s))) return fail("an __activemask() away from the warp's shuffles");
    if (m->getBeginLoc().isMacroID()) return fail("an __activemask() inside a macro");
    replace_token(m->getBeginLoc(), "__kd_amask");
  }
  return true;
}

bool Kernel::check_each_call(const std::function<bool(const CallExpr*, const std::string&)>& take) {
  bool ok = true;
  walk(body_, [&](const Stmt* s) {
    const auto* c = dyn_cast<CallExpr>(s);
    if (!c || !ok) return;
    const FunctionDecl* d = c->getDirectCallee();
    if (!d) {
      ok = fail("an indirect call");
      return;
    }
    const std::string n = d->getNameAsString();
    if (take(c, n)) return;
    for (const char* k : kCollectives)
      if (n == k || n.rfind("__shfl", 0) == 0) {
        ok = fail("a warp collective (" + n + ")");
        return;
      }
    const FunctionDecl* def = d->getDefinition();
    std::set<const FunctionDecl*> seen;
    if (def && sm_.isInMainFile(sm_.getExpansionLoc(def->getLocation())) && synchronises(def, seen))
      ok = fail("a call of " + n + ", a function of the source that synchronises");
  });
  return ok && why_.empty();
}

bool Kernel::check_calls() {
  // find_splits() took the shuffles and __activemask().
  if (!check_each_call([&](const CallExpr*, const std::string& n) {
        return n == "__activemask" || n == "__syncwarp" || shuffle_mode(n) >= 0;
      }))
    return false;
  const std::string text = Lexer::getSourceText(CharSourceRange::getTokenRange(body_->getSourceRange()), sm_,
                                                ctx_.getLangOpts())
                               .str();
  // volatile only as `(volatile T*)shared_array` (TVM's reductions): check_shared_regions makes
  // sure no thread sees another's store to it within a region, so no lane need wait on another
  // there. Any other volatile (a spin on global memory, warp-synchronous code) keeps fibers.
  size_t words = 0;
  for (size_t at = text.find("volatile"); at != std::string::npos; at = text.find("volatile", at + 8)) ++words;
  size_t casts = 0;
  walk(body_, [&](const Stmt* s) {
    const auto* c = dyn_cast<CStyleCastExpr>(s);
    if (!c || !c->getType()->isPointerType() || !c->getType()->getPointeeType().isVolatileQualified()) return;
    const auto* r = dyn_cast<DeclRefExpr>(c->getSubExpr()->IgnoreParenImpCasts());
    if (r && is_shared_var(r->getDecl()) && !c->getBeginLoc().isMacroID()) ++casts;
  });
  if (words != casts) return fail("a volatile access other than a cast of a __shared__ array");
  if (text.find("__kd_") != std::string::npos) return fail("a name that begins __kd_");
  return true;
}

bool Kernel::synchronises(const FunctionDecl* f, std::set<const FunctionDecl*>& seen) {
  if (!seen.insert(f).second) return false;
  bool found = false;
  walk(f->getBody(), [&](const Stmt* s) {
    const auto* c = dyn_cast<CallExpr>(s);
    if (!c || found) return;
    const FunctionDecl* d = c->getDirectCallee();
    if (!d) {
      found = true;
      return;
    }
    const std::string n = d->getNameAsString();
    if (n == "__syncthreads" || n == "__activemask" || shuffle_mode(n) >= 0) found = true;
    for (const char* k : kCollectives) found = found || n == k;
    const FunctionDecl* def = d->getDefinition();
    if (!found && def && sm_.isInMainFile(sm_.getExpansionLoc(def->getLocation())))
      found = synchronises(def, seen);
  });
  return found;
}

bool Kernel::check_control() {
  bool ok = true;
  walk(body_, [&](const Stmt* s) {
    if (!ok) return;
    if (isa<ReturnStmt>(s) || isa<GotoStmt>(s) || isa<IndirectGotoStmt>(s) || isa<LabelStmt>(s) ||
        isa<CXXTryStmt>(s)) {
      ok = fail("a return, goto or label");
      return;
    }
    if (isa<BreakStmt>(s) || isa<ContinueStmt>(s)) {
      // Its loop (or switch) must lie inside one region.
      for (const Stmt* p = pm_->getParent(s); p; p = pm_->getParent(p))
        if (isa<ForStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p) || (isa<BreakStmt>(s) && isa<SwitchStmt>(p))) {
          const auto* w = dyn_cast<WhileStmt>(p);
          const IfStmt* lead = w ? leading_break(w) : nullptr;
          const bool is_lead = lead && (lead->getThen() == s || (isa<CompoundStmt>(lead->getThen()) &&
                                                                 cast<CompoundStmt>(lead->getThen())->body_front() == s));
          if (marked(p) && !is_lead) ok = fail("a break or continue of a loop that holds a barrier");
          return;
        }
    }
  });
  return ok;
}

bool Kernel::check_structure(const Stmt* s) {
  uni_ = std::make_unique<Uniformity>(body_, *pm_);
  uni_->find_locals();
  return structure(s);
}

const IfStmt* Kernel::leading_break(const WhileStmt* w) {
  const auto* body = dyn_cast<CompoundStmt>(w->getBody());
  if (!body || body->body_empty()) return nullptr;
  const auto* i = dyn_cast<IfStmt>(body->body_front());
  if (!i || i->getElse() || i->getInit() || i->getConditionVariable()) return nullptr;
  const Stmt* t = i->getThen();
  if (const auto* c = dyn_cast<CompoundStmt>(t); c && c->size() == 1) t = c->body_front();
  return isa<BreakStmt>(t) ? i : nullptr;
}

void Kernel::note_header(const Expr* e) {
  walk(e, [&](const Stmt* x) {
    if (const auto* r = dyn_cast<DeclRefExpr>(x))
      if (const auto* v = dyn_cast<VarDecl>(r->getDecl()); v && v->isLocalVarDecl()) header_refs_.push_back(r);
  });
}

bool Kernel::structure(const Stmt* s) {
  if (!marked(s)) return true;
  if (barriers_.count(dyn_cast<CallExpr>(s)) || shuffles_.count(s)) return true;
  if (const auto* c = dyn_cast<CompoundStmt>(s)) {
    for (const Stmt* x : c->body())
      if (!structure(x)) return false;
    return true;
  }
  if (const auto* f = dyn_cast<ForStmt>(s)) {
    const auto* init = dyn_cast_or_null<DeclStmt>(f->getInit());
    const VarDecl* v = init && init->isSingleDecl() ? dyn_cast<VarDecl>(init->getSingleDecl()) : nullptr;
    if (!v || !v->getInit() || !f->getCond() || !f->getInc())
      return fail("a loop holding a barrier whose header is not `for (T i = ...; cond; step)`");
    if (!uni_->uniform(v->getInit())) return fail("a loop holding a barrier that starts differently per thread");
    // The counter: written only by the loop's step.
    bool w = false;
    walk(f->getBody(), [&](const Stmt* x) { w = w || written_var(x) == v; });
    if (w) return fail("a loop holding a barrier whose counter its body changes");
    uni_->add(v);
    if (!uni_->uniform(f->getCond()) || !uni_->uniform(f->getInc()))
      return fail("a loop holding a barrier whose bound or step differs per thread");
    note_header(v->getInit());
    note_header(f->getCond());
    note_header(f->getInc());
    return structure(f->getBody()) && (isa<CompoundStmt>(f->getBody()) || fail("a loop body that is a barrier"));
  }
  if (const auto* i = dyn_cast<IfStmt>(s)) {
    if (i->getInit() || i->getConditionVariable() || i->isConstexpr()) return fail("an if with a declaration");
    if (!uni_->uniform(i->getCond())) return fail("a barrier under a condition that differs per thread");
    note_header(i->getCond());
    return structure(i->getThen()) && structure(i->getElse());
  }
  if (const auto* a = dyn_cast<AttributedStmt>(s)) return structure(a->getSubStmt());
  if (const auto* w = dyn_cast<WhileStmt>(s)) {
    const IfStmt* lead = leading_break(w);
    if (!lead || w->getConditionVariable()) return fail("a barrier inside a while other than `while (c) { if (d) break; ... }`");
    if (!uni_->uniform(w->getCond()) || !uni_->uniform(lead->getCond()))
      return fail("a while holding a barrier whose condition differs per thread");
    note_header(w->getCond());
    note_header(lead->getCond());
    skip_.insert(lead);
    return structure(w->getBody());
  }
  return fail("a barrier inside a do or switch");
}

bool Kernel::plan_privates(const Stmt* s) {
  if (!marked(s)) return true;
  if (const auto* c = dyn_cast<CompoundStmt>(s)) {
    for (const Stmt* x : c->body()) {
      if (const auto* d = dyn_cast<DeclStmt>(x)) {
        for (const Decl* dd : d->decls()) {
          const auto* v = dyn_cast<VarDecl>(dd);
          if (!v) return fail("a declaration that is not a variable where a barrier is in scope");
          if (is_shared_var(v)) continue;
          if (v->isStaticLocal() || v->hasExternalStorage()) return fail("a static or extern local");
          if (initialiser(v) && (isa<InitListExpr>(initialiser(v)->IgnoreImplicit()) || v->getType()->isArrayType()))
            return fail("an initialised array alive across a barrier");
          if (v->getType()->isReferenceType()) return fail("a reference alive across a barrier");
          privates_[v] = "__kd_p" + std::to_string(privates_.size());
        }
        continue;
      }
      if (!plan_privates(x)) return false;
    }
    return true;
  }
  if (const auto* f = dyn_cast<ForStmt>(s)) return plan_privates(f->getBody());
  if (const auto* w = dyn_cast<WhileStmt>(s)) return plan_privates(w->getBody());
  if (const auto* a = dyn_cast<AttributedStmt>(s)) return plan_privates(a->getSubStmt());
  if (const auto* i = dyn_cast<IfStmt>(s)) return plan_privates(i->getThen()) && plan_privates(i->getElse());
  return true;
}

void Kernel::number_regions(const Stmt* s) {
  int current = -1;
  number(s, &current);
}

void Kernel::note_refs(const Stmt* x, int region) {
  walk(x, [&](const Stmt* y) {
    if (const auto* d = dyn_cast<DeclRefExpr>(y))
      if (const auto* v = dyn_cast<VarDecl>(d->getDecl()); v && privates_.count(v)) regions_of_[v].insert(region);
  });
  if (const auto* d = dyn_cast<DeclStmt>(x))
    for (const Decl* dd : d->decls())
      if (const auto* v = dyn_cast<VarDecl>(dd); v && privates_.count(v)) regions_of_[v].insert(region);
}

void Kernel::number(const Stmt* s, int* current) {
  if (!marked(s)) {
    note_refs(s, ++region_count_);
    return;
  }
  if (const auto* c = dyn_cast<CompoundStmt>(s)) {
    int run = -1;
    for (const Stmt* x : c->body()) {
      if (skip_.count(x)) continue;
      if (barriers_.count(dyn_cast<CallExpr>(x))) {
        run = -1;
        continue;
      }
      if (auto sh = shuffles_.find(x); sh != shuffles_.end()) {
        // Its value, lane and width belong to the loop before the exchange, its target to the one after.
        if (run < 0) run = ++region_count_;
        for (const Expr* e : shuffle_inputs(sh->second)) note_refs(e, run);
        run = ++region_count_;
        note_refs(sh->second.lhs, run);
        continue;
      }
      if (const auto* d = dyn_cast<DeclStmt>(x)) {
        bool shared = false;
        for (const Decl* dd : d->decls()) shared = shared || is_shared_var(dd);
        if (shared) {
          run = -1;
          continue;
        }
      }
      if (marked(x)) {
        run = -1;
        number(x, current);
        continue;
      }
      if (run < 0) run = ++region_count_;
      note_refs(x, run);
    }
    return;
  }
  if (const auto* f = dyn_cast<ForStmt>(s)) return number(f->getBody(), current);
  if (const auto* w = dyn_cast<WhileStmt>(s)) return number(w->getBody(), current);
  if (const auto* a = dyn_cast<AttributedStmt>(s)) return number(a->getSubStmt(), current);
  if (const auto* i = dyn_cast<IfStmt>(s)) {
    number(i->getThen(), current);
    if (i->getElse()) number(i->getElse(), current);
  }
}

std::vector<const Expr*> Kernel::shuffle_inputs(const Shuffle& q) {
  std::vector<const Expr*> out = {q.value, q.arg};
  if (q.width) out.push_back(q.width);
  return out;
}

bool Kernel::check_shared_regions(const Stmt* s) {
  if (!marked(s)) return region_shared_ok({s});
  if (const auto* c = dyn_cast<CompoundStmt>(s)) {
    std::vector<const Stmt*> run;
    for (const Stmt* x : c->body()) {
      if (auto sh = shuffles_.find(x); sh != shuffles_.end()) {
        for (const Expr* e : shuffle_inputs(sh->second)) run.push_back(e);
        if (!region_shared_ok(run)) return false;
        run = {sh->second.lhs};
        continue;
      }
      if (marked(x)) {
        if (!region_shared_ok(run)) return false;
        run.clear();
        if (!barriers_.count(dyn_cast<CallExpr>(x)) && !check_shared_regions(x)) return false;
        continue;
      }
      run.push_back(x);
    }
    return region_shared_ok(run);
  }
  if (const auto* f = dyn_cast<ForStmt>(s)) return check_shared_regions(f->getBody());
  if (const auto* w = dyn_cast<WhileStmt>(s)) return check_shared_regions(w->getBody());
  if (const auto* a = dyn_cast<AttributedStmt>(s)) return check_shared_regions(a->getSubStmt());
  if (const auto* i = dyn_cast<IfStmt>(s))
    return check_shared_regions(i->getThen()) && (!i->getElse() || check_shared_regions(i->getElse()));
  return true;
}

bool Kernel::region_shared_ok(const std::vector<const Stmt*>& run) {
  // In the order written: reads_before_writes() numbers the snapshots it takes as it goes.
  std::map<const Decl*, int, BySource> use;  // bit 1 read, bit 2 written
  std::map<const Decl*, std::vector<SharedAccess>, BySource> accesses;
  bool other = false;
  for (const Stmt* top : run)
    walk(top, [&](const Stmt* s) {
      const auto* r = dyn_cast<DeclRefExpr>(s);
      if (!r || !is_shared_var(r->getDecl())) return;
      const auto* var = dyn_cast<VarDecl>(r->getDecl());
      const Decl* key = var && var->hasExternalStorage() ? nullptr : r->getDecl();
      bool reads = false, writes = false;
      // The access: up through casts and pointer arithmetic to an element (a[i], *(T*)(a + i));
      // then read, written, or anything else (a pointer kept or passed on).
      const Stmt* cur = r;
      const Stmt* p = pm_->getParent(r);
      for (;;) {
        if (!p) break;
        if (isa<ImplicitCastExpr>(p) || isa<ParenExpr>(p) || isa<CStyleCastExpr>(p) || isa<CXXReinterpretCastExpr>(p) ||
            isa<CXXStaticCastExpr>(p)) {
          cur = p;
          p = pm_->getParent(p);
          continue;
        }
        if (const auto* b = dyn_cast<BinaryOperator>(p);
            b && (b->getOpcode() == BO_Add || b->getOpcode() == BO_Sub) && b->getType()->isPointerType()) {
          cur = p;
          p = pm_->getParent(p);
          continue;
        }
        break;
      }
      const Expr* access = nullptr;
      if (const auto* sub = dyn_cast_or_null<ArraySubscriptExpr>(p); sub && sub->getBase()->IgnoreParenImpCasts() ==
                                                                             cast<Expr>(cur)->IgnoreParenImpCasts())
        access = sub;
      if (const auto* u = dyn_cast_or_null<UnaryOperator>(p); u && u->getOpcode() == UO_Deref) access = u;
      if (!access) {
        other = true;
        return;
      }
      const Stmt* q = pm_->getParent(access);
      while (q && (isa<ParenExpr>(q) || isa<ImplicitCastExpr>(q))) q = pm_->getParent(q);
      const auto* b = dyn_cast_or_null<BinaryOperator>(q);
      // A class type's assignment (float4 = ...) is an operator call on the element.
      if (const auto* op = dyn_cast_or_null<CXXOperatorCallExpr>(q); op && op->isAssignmentOp()) {
        if (op->getNumArgs() > 0 && op->getArg(0)->IgnoreParenImpCasts() == access) {
          writes = true;
          if (op->getOperator() != OO_Equal) reads = true;
        } else {
          reads = true;
        }
      } else if (b && b->isAssignmentOp() && b->getLHS()->IgnoreParens() == access) {
        writes = true;
        if (isa<CompoundAssignOperator>(b)) reads = true;
      } else if (const auto* u = dyn_cast_or_null<UnaryOperator>(q); u && u->isIncrementDecrementOp()) {
        reads = writes = true;
      } else if (isa_and_nonnull<MemberExpr>(q)) {
        other = true;  // a vector element's field: read or written, not told apart here
      } else {
        reads = true;
      }
      use[key] |= (reads ? 1 : 0) | (writes ? 2 : 0);
      accesses[key].push_back({r, access, reads, writes});
    });
  if (other) return fail("shared memory used other than element by element");
  for (const auto& [d, u] : use)
    if (u == 3 && !reads_before_writes(d, accesses[d], run))
      return fail("a region between barriers that both reads and writes a shared variable");
  return true;
}

const Stmt* Kernel::statement_of(const Stmt* x, const std::vector<const Stmt*>& run, bool* in_loop) {
  *in_loop = false;
  const Stmt* s = x;
  for (;;) {
    if (isa<ForStmt>(s) || isa<WhileStmt>(s) || isa<DoStmt>(s)) *in_loop = true;
    if (std::find(run.begin(), run.end(), s) != run.end()) return s;
    const Stmt* p = pm_->getParent(s);
    if (!p) return s;
    if (isa<CompoundStmt>(p)) {
      // Keep climbing for loops above; the statement is this one.
      const Stmt* stmt = s;
      for (const Stmt* q = p; q; q = pm_->getParent(q)) {
        if (isa<ForStmt>(q) || isa<WhileStmt>(q) || isa<DoStmt>(q)) *in_loop = true;
        if (std::find(run.begin(), run.end(), q) != run.end()) break;
      }
      return stmt;
    }
    s = p;
  }
}

bool Kernel::reads_before_writes(const Decl* key, const std::vector<SharedAccess>& acc, const std::vector<const Stmt*>& run) {
  const auto* var = dyn_cast_or_null<VarDecl>(key);
  if (!var || var->hasExternalStorage() || !isa<ConstantArrayType>(var->getType().getTypePtr())) return false;
  unsigned last_read = 0, first_write = ~0u;
  std::map<const Stmt*, int, BySource> writes_in;  // statement → writes of the variable in it
  std::vector<std::pair<const SharedAccess*, const Stmt*>> at;
  for (const SharedAccess& a : acc) {
    bool in_loop = false;
    const Stmt* st = statement_of(a.access, run, &in_loop);
    if (in_loop || a.ref->getLocation().isMacroID()) return false;
    const unsigned pos = sm_.getFileOffset(sm_.getExpansionLoc(st->getBeginLoc()));
    if (a.reads) last_read = std::max(last_read, pos);
    if (a.writes) {
      first_write = std::min(first_write, pos);
      ++writes_in[st];
    }
    at.emplace_back(&a, st);
  }
  if (last_read > first_write) return false;
  if (last_read == first_write) {
    // One statement reads and writes: an assignment whose left side is its only write.
    for (const auto& [st, n] : writes_in) {
      if (n != 1) return false;
      const Expr* lhs = nullptr;
      if (const auto* b = dyn_cast<BinaryOperator>(st); b && b->isAssignmentOp()) lhs = b->getLHS();
      if (const auto* op = dyn_cast<CXXOperatorCallExpr>(st); op && op->isAssignmentOp() && op->getNumArgs() == 2)
        lhs = op->getArg(0);
      if (!lhs) return false;
      for (const auto& [a, s2] : at)
        if (s2 == st && a->writes && a->access != lhs->IgnoreParenImpCasts()) return false;
    }
  }
  // The reads (not the read of a compound assignment's own element) from the copy.
  auto [it, fresh] = snapshot_of_.emplace(var, static_cast<int>(snapshot_of_.size()));
  for (const auto& [a, st] : at)
    if (a->reads && !a->writes) replace_token(a->ref->getLocation(), fmt::format("__kd_snap{}_", it->second));
  return true;
}

bool Kernel::replace_tokens() {
  bool ok = true;
  std::set<unsigned> done;
  walk(body_, [&](const Stmt* s) {
    if (!ok) return;
    // threadIdx → the region's thread; in a batch of blocks, blockIdx → the lane's block.
    const auto* m = dyn_cast<MemberExpr>(s);
    const std::string member = m ? m->getMemberDecl()->getNameAsString() : "";
    if (member == "thread_idx" || (batch_w_ && member == "block_idx")) {
      const std::string macro = member == "thread_idx" ? "threadIdx" : "blockIdx";
      SourceLocation at = m->getBeginLoc();
      if (!at.isMacroID()) {
        ok = fail(member + " named outside the " + macro + " macro");
        return;
      }
      CharSourceRange r = sm_.getExpansionRange(at);
      if (!sm_.isInMainFile(r.getBegin())) {
        ok = fail(macro + " inside another macro");
        return;
      }
      if (done.insert(r.getBegin().getRawEncoding()).second)
        replace_token(r.getBegin(), member == "thread_idx" ? "__kd_tidx" : "__kd_bidx");
      return;
    }
    if (const auto* r = dyn_cast<DeclRefExpr>(s)) {
      const auto* v = dyn_cast<VarDecl>(r->getDecl());
      if (v && privates_.count(v) && r->getLocation().isMacroID()) ok = fail("a local alive across a barrier named inside a macro");
    }
  });
  return ok;
}

std::string Kernel::text(const Stmt* s) {
  const SourceLocation b = sm_.getExpansionLoc(s->getBeginLoc());
  const SourceLocation e = sm_.getExpansionRange(s->getEndLoc()).getEnd();
  if (!sm_.isInMainFile(b) || !sm_.isInMainFile(e)) {
    why_ = "a statement that begins or ends outside the source's own text";
    return "";
  }
  const unsigned from = sm_.getFileOffset(b);
  const unsigned to = sm_.getFileOffset(e) + Lexer::MeasureTokenLength(e, sm_, ctx_.getLangOpts());
  const llvm::StringRef file = sm_.getBufferData(sm_.getFileID(b));
  if (to < from || to > file.size()) {
    why_ = "a statement whose text could not be read";
    return "";
  }
  std::string out;
  unsigned at = from;
  for (auto it = edits_.lower_bound(from); it != edits_.end() && it->first < to; ++it) {
    if (it->first < at) continue;
    out += file.substr(at, it->first - at).str() + it->second.second;
    at = it->first + it->second.first;
  }
  if (at < to) out += file.substr(at, to - at).str();
  return out;
}

void Kernel::replace_token(SourceLocation loc, const std::string& with) {
  edits_[sm_.getFileOffset(loc)] = {Lexer::MeasureTokenLength(loc, sm_, ctx_.getLangOpts()), with};
}

void Kernel::region_vars(const Stmt* x, Region* r) {
  walk(x, [&](const Stmt* s) {
    if (const auto* d = dyn_cast<DeclRefExpr>(s))
      if (const auto* v = dyn_cast<VarDecl>(d->getDecl()); v && privates_.count(v)) r->vars.insert(v);
  });
}

void Kernel::region_stmt(const Stmt* x, Region* r) {
  region_vars(x, r);
  if (isa<NullStmt>(x)) return;
  if (const auto* d = dyn_cast<DeclStmt>(x)) {
    bool local = true;
    for (const Decl* dd : d->decls()) local = local && locals_.count(cast<VarDecl>(dd));
    if (local) {  // named in this region only: declared here, as written
      r->text += text(x) + "\n";
      return;
    }
    for (const Decl* dd : d->decls()) {
      const auto* v = cast<VarDecl>(dd);
      if (!privates_.count(v)) continue;  // a __shared__ one: declared outside the thread loops
      r->vars.insert(v);
      if (const Expr* init = initialiser(v)) r->text += v->getNameAsString() + " = " + text(init) + ";\n";
    }
    return;
  }
  // The statement's semicolon is not in its range (an expression, `if (c) f();`, do-while).
  std::string t = text(x);
  if (!isa<CompoundStmt>(x)) t += ";";
  r->text += t + "\n";
}

std::string Kernel::loop(const Region& r) {
  if (r.text.find_first_not_of(" \n") == std::string::npos) return "";
  std::string in, out;
  std::set<std::string> names;
  for (const VarDecl* v : r.vars) {
    if (transposed_.count(v)) continue;  // used in place
    const std::string name = v->getNameAsString(), p = privates_.at(v);
    if (!names.insert(name).second) {
      why_ = "two locals alive across a barrier named " + name + " in one region";
      return "";
    }
    in += fmt::format("{}_t {}; __builtin_memcpy(&{}, &{}[__kd_t], sizeof({}));\n", p, name, name, p, name);
    out += fmt::format("__builtin_memcpy(&{}[__kd_t], &{}, sizeof({}));\n", p, name, name);
  }
  std::string copies;
  for (const auto& [v, id] : snapshot_of_) {
    const std::string name = fmt::format("__kd_snap{}_", id);
    if (r.text.find(name) != std::string::npos)
      copies += fmt::format("__builtin_memcpy(&{}, &{}, sizeof({}));\n", name, v->getNameAsString(), name);
  }
  if (batch_w_)  // a batch of blocks: lanes the compiler may run as a vector's
    return std::string(masked_tail_ ? "_Pragma(\"clang loop vectorize(enable) vectorize_predicate(enable)\")\n"
                                    : "_Pragma(\"clang loop vectorize(enable)\")\n") +
           "for (unsigned __kd_t = 0; __kd_t < __kd_nt; ++__kd_t) {\n" +
           // One row: x affine in the lane (contiguous loads); several (a short row): by division.
           (batch_h_ == 1 ? std::string("const uint3 __kd_bidx = {__kd_b0.x + __kd_t, __kd_b0.y, __kd_b0.z};\n")
                          : fmt::format("const uint3 __kd_bidx = {{__kd_b0.x + __kd_t % {}u, __kd_b0.y + __kd_t / {}u, "
                                        "__kd_b0.z}};\n",
                                        batch_w_, batch_w_)) +
           in + "{\n" + r.text + "}\n" + out + "}\n";
  std::string mask;
  if (!masks_.empty()) mask = "auto __kd_amask = [__kd_t, __kd_nt] { return __kdflow_lanes_live(__kd_t, __kd_nt); };\n";
  // One loop per dimension: what depends on threadIdx.y only is computed once per row.
  return copies +
         "for (unsigned __kd_tz = 0; __kd_tz < __kd_bz; ++__kd_tz)\n"
         "for (unsigned __kd_ty = 0; __kd_ty < __kd_by; ++__kd_ty)\n"
         "for (unsigned __kd_tx = 0; __kd_tx < __kd_bx; ++__kd_tx) {\n"
         "const unsigned __kd_t = (__kd_tz * __kd_by + __kd_ty) * __kd_bx + __kd_tx;\n"
         "const uint3 __kd_tidx = {__kd_tx, __kd_ty, __kd_tz};\n" +
         mask + in + "{\n" + r.text + "}\n" + out + "}\n";
}

std::string Kernel::emit(const Stmt* s) {
  if (!marked(s)) {
    Region r;
    region_stmt(s, &r);
    return loop(r);
  }
  if (const auto* c = dyn_cast<CompoundStmt>(s)) return emit_compound(c, false);
  if (const auto* f = dyn_cast<ForStmt>(s)) {
    std::string init = text(f->getInit());
    while (!init.empty() && (init.back() == ';' || init.back() == ' ' || init.back() == '\n')) init.pop_back();
    return "for (" + init + "; " + text(f->getCond()) + "; " + text(f->getInc()) + ") " + emit(f->getBody());
  }
  if (const auto* a = dyn_cast<AttributedStmt>(s)) return emit(a->getSubStmt());  // a loop hint: dropped
  if (const auto* w = dyn_cast<WhileStmt>(s)) {
    const IfStmt* lead = leading_break(w);
    return "while (" + text(w->getCond()) + ") {\nif (" + text(lead->getCond()) + ") break;\n" + emit(w->getBody()) +
           "}\n";
  }
  const auto* i = cast<IfStmt>(s);
  std::string out = "if (" + text(i->getCond()) + ") {\n" + emit(i->getThen()) + "}\n";
  if (i->getElse()) out += "else {\n" + emit(i->getElse()) + "}\n";
  return out;
}

std::string Kernel::emit_compound(const CompoundStmt* c, bool top) {
  std::string out = "{\n";
  Region pending;
  if (top && batch_w_) {
    // A batch of one-thread blocks from blockIdx on (runtime.h's LaunchShape::tile_w).
    const unsigned lanes = batch_w_ * batch_h_;
    out += fmt::format("if (blockDim.x * blockDim.y * blockDim.z != 1 || __kdflow_ctx()->batch != {}u) "
                       "__kdflow_unplanned_block();\n"
                       "constexpr unsigned __kd_nt = {};\n"
                       "const uint3 __kd_b0 = blockIdx;\n"
                       "const uint3 __kd_bidx = __kd_b0;\n"
                       "const uint3 __kd_tidx = {{0, 0, 0}};\n",
                       lanes, lanes);
    out += kOneThreadHelpers;
    // An array transposed (transpose()): one array per element, the lanes side by side.
    auto side_by_side = [&](const VarDecl* v, const std::string& name) {
      const auto* arr = cast<ConstantArrayType>(ctx_.getAsArrayType(v->getType()));
      return fmt::format("{} {}[{}][{}];\n", arr->getElementType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy()),
                         name, arr->getSize().getZExtValue(), lanes);
    };
    for (const auto& [v, name] : privates_)
      out += transposed_.count(v)
                 ? side_by_side(v, name)
                 : fmt::format("using {}_t = {};\n{}_t {}[{}];\n", name,
                               v->getType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy()), name, name,
                               lanes);
    for (size_t i = 0; i < batch_shared_.size(); ++i) {
      const VarDecl* v = batch_shared_[i];
      if (transposed_.count(v)) {
        out += side_by_side(v, v->getNameAsString());
        continue;
      }
      std::string decl;
      llvm::raw_string_ostream os(decl);
      v->getType().getUnqualifiedType().print(os, ctx_.getPrintingPolicy(), "v");
      os.flush();
      out += fmt::format("struct __kd_sh{}_t {{ alignas({}) {}; }};\n__kd_sh{}_t {}[{}];\n", i,
                         std::max<int64_t>(ctx_.getDeclAlign(v).getQuantity(), 1), decl, i, v->getNameAsString(),
                         lanes);
    }
    return out + emit_compound(c, false) + "}\n";
  }
  if (top) {
    // The block's shape: the plan's one shape as constants (the thread loops' trip counts, and
    // every threadIdx a constant's range, for the optimiser), else the launch's.
    if (block_[0])
      out += fmt::format("if (blockDim.x != {0}u || blockDim.y != {1}u || blockDim.z != {2}u) "
                         "__kdflow_unplanned_shape();\n"
                         "constexpr unsigned __kd_bx = {0}, __kd_by = {1}, __kd_bz = {2}, __kd_nt = {3};\n",
                         block_[0], block_[1], block_[2], uint64_t{block_[0]} * block_[1] * block_[2]);
    else
      out += "const unsigned __kd_bx = blockDim.x, __kd_by = blockDim.y, __kd_bz = blockDim.z, "
             "__kd_nt = __kd_bx * __kd_by * __kd_bz;\n";
    auto array = [&](const std::string& name, const std::string& type) {
      out += fmt::format("using {}_t = {};\n{}_t* {} = ({}_t*)__kdflow_private(sizeof({}_t) * __kd_nt, alignof({}_t));\n",
                         name, type, name, name, name, name, name);
    };
    for (const auto& [v, name] : privates_)
      array(name, v->getType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy()));
    for (const auto& [v, id] : snapshot_of_) {
      // A copy of a shared array, aligned as TVM's (vector loads through casts of it).
      const std::string name = fmt::format("__kd_snap{}_", id);
      out += fmt::format("using {}t = {};\n{}t& {} = *({}t*)__kdflow_private(sizeof({}t), 64);\n", name,
                         v->getType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy()), name, name, name,
                         name);
    }
    for (const auto& [st, q] : shuffles_) {
      array(fmt::format("__kd_sv{}", q.id), q.call->getType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy()));
      if (!constant(q.arg)) array(fmt::format("__kd_sa{}", q.id), "int");
      if (q.width && !constant(q.width)) array(fmt::format("__kd_sw{}", q.id), "int");
    }
    return out + emit_compound(c, false) + "}\n";
  }
  auto flush = [&] {
    out += loop(pending);
    pending = Region{};
  };
  for (const Stmt* x : c->body()) {
    if (skip_.count(x)) continue;  // a while's leading `if (d) break;`, emitted with its header
    if (barriers_.count(dyn_cast<CallExpr>(x))) {
      flush();
      continue;
    }
    if (auto sh = shuffles_.find(x); sh != shuffles_.end()) {
      // The block's values (and lanes, widths where they vary) in one thread loop, each
      // thread's read of its source lane in the next.
      const Shuffle& q = sh->second;
      for (const Expr* e : shuffle_inputs(q)) region_vars(e, &pending);
      pending.text += fmt::format("__kd_sv{}[__kd_t] = {};\n", q.id, text(q.value));
      auto operand = [&](const Expr* e, const char* stash) -> std::string {
        if (!e) return "32";
        if (constant(e)) return "(int)(" + text(e) + ")";
        pending.text += fmt::format("__kd_s{}{}[__kd_t] = (int)({});\n", stash, q.id, text(e));
        return fmt::format("__kd_s{}{}[__kd_t]", stash, q.id);
      };
      const std::string arg = operand(q.arg, "a"), width = operand(q.width, "w");
      flush();
      region_vars(q.lhs, &pending);
      pending.text += fmt::format("{} = __kd_sv{}[__kdflow_shfl_src(__kd_t, __kd_nt, {}, {}, {})];\n", text(q.lhs), q.id,
                                  q.mode, arg, width);
      continue;
    }
    if (const auto* d = dyn_cast<DeclStmt>(x); d && marked(c)) {
      // __shared__ declarations stay outside the thread loops, where every region sees them.
      bool shared = false;
      for (const Decl* dd : d->decls()) shared = shared || is_shared_var(dd);
      if (shared) {
        for (const Decl* dd : d->decls())
          if (!is_shared_var(dd)) {
            why_ = "a declaration mixing __shared__ and other variables";
            return "";
          }
        flush();
        out += text(d) + "\n";
        continue;
      }
      region_stmt(x, &pending);
      continue;
    }
    if (marked(x)) {
      flush();
      out += emit(x);
      continue;
    }
    region_stmt(x, &pending);
  }
  flush();
  return out + "}\n";
}

}  // namespace fission

namespace {

using namespace clang;
using fission::Kernel;

class FissionConsumer : public ASTConsumer {
 public:
  FissionConsumer(CompilerInstance& ci, const std::set<std::string>& one_thread,
                  const std::map<std::string, BlockTile>& tiles, const std::map<std::string, BlockShape>& blocks,
                  unsigned vector_lanes, FissionOutcome* out)
      : ci_(ci), one_thread_(one_thread), tiles_(tiles), blocks_(blocks), vector_lanes_(vector_lanes), out_(out) {}

  void HandleTranslationUnit(ASTContext& ctx) override {
    if (ci_.getDiagnostics().hasErrorOccurred()) return;
    SourceManager& sm = ctx.getSourceManager();
    std::vector<std::pair<FunctionDecl*, std::string>> bodies;
    for (Decl* d : ctx.getTranslationUnitDecl()->decls()) {
      // Kernels: as the JIT finds them, defined void functions with C linkage in the source.
      Decl* inner = d;
      if (auto* l = dyn_cast<LinkageSpecDecl>(d)) {
        for (Decl* x : l->decls()) consider(ctx, sm, x, &bodies);
        continue;
      }
      consider(ctx, sm, inner, &bodies);
    }
    if (bodies.empty()) return;
    Rewriter out(sm, ctx.getLangOpts());
    for (auto& [f, body] : bodies) out.ReplaceText(f->getBody()->getSourceRange(), body);
    const clang::RewriteBuffer* buf = out.getRewriteBufferFor(sm.getMainFileID());
    if (buf) out_->source = std::string(buf->begin(), buf->end());
    else out_->kernels.clear();
  }

 private:
  void consider(ASTContext& ctx, SourceManager& sm, Decl* d, std::vector<std::pair<FunctionDecl*, std::string>>* bodies) {
    auto* f = dyn_cast<FunctionDecl>(d);
    if (!f || !f->doesThisDeclarationHaveABody() || !f->isExternC() || !f->getReturnType()->isVoidType() ||
        !sm.isInMainFile(sm.getExpansionLoc(f->getLocation())))
      return;
    // Each kernel keeps its own edits: a kernel that does not qualify leaves none behind.
    Kernel k(ctx, f);
    const std::string name = f->getNameAsString();
    const bool one = one_thread_.count(name) > 0;
    if (auto tile = tiles_.find(name); one && tile != tiles_.end() && tile->second.w > 0) {
      Kernel b(ctx, f);
      // A masked vector for the last lanes where masks are cheap (AVX-512's; AVX's masked loads
      // and stores made a 14-lane batch slower than one block per call): a scalar tail otherwise.
      std::string body = b.run_batched(tile->second.w, std::max(tile->second.h, 1u), vector_lanes_ >= 16);
      if (!body.empty()) {
        bodies->emplace_back(f, std::move(body));
        out_->kernels.push_back(name);
        out_->one_thread.push_back(name);
        out_->batched[name] = BlockTile{tile->second.w, std::max(tile->second.h, 1u)};
        return;
      }
      out_->unbatched[name] = b.why();
    }
    if (auto b = blocks_.find(name); !one && b != blocks_.end()) k.fix_block(b->second);
    std::string body = k.run(one);
    if (!body.empty()) {
      bodies->emplace_back(f, std::move(body));
      out_->kernels.push_back(name);
      if (one) out_->one_thread.push_back(name);
      if (!k.has_barrier()) out_->plain.push_back(name);
    } else if (k.has_barrier()) {
      out_->kept[name] = k.why();
    }
  }

  CompilerInstance& ci_;
  const std::set<std::string>& one_thread_;
  const std::map<std::string, BlockTile>& tiles_;
  const std::map<std::string, BlockShape>& blocks_;
  unsigned vector_lanes_;
  FissionOutcome* out_;
};

}  // namespace

std::unique_ptr<clang::ASTConsumer> make_fission_consumer(clang::CompilerInstance& ci,
                                                          const std::set<std::string>& one_thread,
                                                          const std::map<std::string, BlockTile>& tiles,
                                                          const std::map<std::string, BlockShape>& blocks,
                                                          unsigned vector_lanes, FissionOutcome* out) {
  return std::make_unique<FissionConsumer>(ci, one_thread, tiles, blocks, vector_lanes, out);
}


}  // namespace kdflow::cpu

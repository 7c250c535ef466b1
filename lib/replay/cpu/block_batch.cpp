// block_batch.cpp — batches of one-thread blocks (region_fission.h, fission_kernel.h): a kernel
// the plan launches only with one-thread blocks compiled as one thread, or as batches of blocks
// each a lane of the thread loops; and the tile a batch covers (choose_block_tile).
#include <algorithm>
#include <array>

#include <clang/AST/Attr.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include "fission_kernel.h"
#include "region_fission.h"

namespace kdflow::cpu {
namespace fission {

std::string Kernel::run_batched(unsigned w, unsigned h, bool masked_tail) {
  body_ = f_->getBody();
  pm_ = std::make_unique<ParentMap>(body_);
  batch_w_ = w;
  batch_h_ = h;
  masked_tail_ = masked_tail;
  if (!one_thread_calls()) return "";
  bool ok = true;
  walk(body_, [&](const Stmt* s) {
    if (!ok) return;
    if (isa<ReturnStmt>(s) || isa<GotoStmt>(s) || isa<IndirectGotoStmt>(s) || isa<LabelStmt>(s) ||
        isa<CXXTryStmt>(s))
      ok = fail("a return, goto or label");
    // A block's parameters are its own: the batch's blocks share one copy of them.
    else if (const ValueDecl* d = written_var(s); d && isa<ParmVarDecl>(d))
      ok = fail("a parameter the kernel assigns");
    else if (const auto* d = dyn_cast<DeclStmt>(s))
      for (const Decl* dd : d->decls())
        if (const auto* v = dyn_cast<VarDecl>(dd); v && (v->isStaticLocal() || v->hasExternalStorage()))
          ok = fail(is_shared_var(v) ? "dynamic shared memory" : "a static or extern local");
  });
  if (!ok) return "";
  Uniformity::Varying varying;
  varying.block_x = w > 1;
  varying.block_y = h > 1;
  uni_ = std::make_unique<Uniformity>(body_, *pm_, varying);
  uni_->find_locals();
  hoist(body_);
  if (!plan_privates(body_) || !batch_shared() || !replace_tokens()) return "";
  return emit_body();
}

std::string Kernel::one_thread_body() {
  if (!one_thread_calls() || !replace_tokens()) return "";
  const std::string body = text(body_);
  if (!why_.empty()) return "";
  return "{\n"
         "if (blockDim.x * blockDim.y * blockDim.z != 1) __kdflow_unplanned_block();\n"
         "const uint3 __kd_tidx = {0, 0, 0};\n" +
         std::string(kOneThreadHelpers) + body + "\n}\n";
}

bool Kernel::one_thread_calls() {
  return check_each_call([&](const CallExpr* c, const std::string& n) {
    const SourceLocation at = c->getCallee()->getBeginLoc();
    const bool ours = n == "__syncthreads" || n == "__syncwarp" || n == "__activemask" || shuffle_mode(n) >= 0;
    if (ours && at.isMacroID()) return !fail(n + " inside a macro");
    if (n == "__syncthreads" || n == "__syncwarp") replace_token(at, "__kd_nobarrier");
    else if (n == "__activemask") replace_token(at, "__kd_amask");
    else if (ours) {
      const bool sync = n.size() > 5 && n.compare(n.size() - 5, 5, "_sync") == 0;
      replace_token(at, sync ? "__kd_shfl_self_sync" : "__kd_shfl_self");
    }
    return ours;
  });
}

void Kernel::hoist(const Stmt* s) {
  if (const auto* c = dyn_cast<CompoundStmt>(s)) {
    for (const Stmt* x : c->body()) hoist(x);
    return;
  }
  if (const auto* a = dyn_cast<AttributedStmt>(s)) return hoist(a->getSubStmt());
  const auto* f = dyn_cast<ForStmt>(s);
  if (!f || !isa<CompoundStmt>(f->getBody())) return;
  const auto* init = dyn_cast_or_null<DeclStmt>(f->getInit());
  const VarDecl* v = init && init->isSingleDecl() ? dyn_cast<VarDecl>(init->getSingleDecl()) : nullptr;
  if (!v || !v->getInit() || !f->getCond() || !f->getInc() || !uni_->uniform(v->getInit())) return;
  bool written = false, leaves = false;
  walk(f->getBody(), [&](const Stmt* x) {
    written = written || written_var(x) == v;
    if (isa<BreakStmt>(x) || isa<ContinueStmt>(x))
      for (const Stmt* p = pm_->getParent(x); p; p = pm_->getParent(p)) {
        if (isa<ForStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p) || (isa<BreakStmt>(x) && isa<SwitchStmt>(p))) {
          leaves = leaves || p == f;
          break;
        }
      }
  });
  if (written || leaves) return;
  uni_->add(v);
  if (!uni_->uniform(f->getCond()) || !uni_->uniform(f->getInc())) {
    uni_->remove(v);
    return;
  }
  for (const Stmt* p = f; p; p = pm_->getParent(p)) marked_.insert(p);
  note_header(v->getInit());
  note_header(f->getCond());
  note_header(f->getInc());
  hoist(f->getBody());
}

bool Kernel::batch_shared() {
  const unsigned lanes = batch_w_ * batch_h_;
  uint64_t bytes = 0;
  for (const auto& [v, name] : privates_) {
    if (v->getType()->isIncompleteType() || v->getType()->isDependentType()) return fail("a local of incomplete type");
    bytes += ctx_.getTypeSizeInChars(v->getType()).getQuantity();
  }
  bool ok = true;
  walk(body_, [&](const Stmt* s) {
    if (!ok) return;
    if (const auto* d = dyn_cast<DeclStmt>(s)) {
      bool shared = false, other = false;
      for (const Decl* dd : d->decls()) (is_shared_var(dd) ? shared : other) = true;
      if (!shared) return;
      if (other) {
        ok = fail("a declaration mixing __shared__ and other variables");
        return;
      }
      for (const Decl* dd : d->decls()) {
        const auto* v = cast<VarDecl>(dd);
        if (v->getType()->isIncompleteType() || initialiser(v)) {
          ok = fail("a __shared__ variable of incomplete type or with an initialiser");
          return;
        }
        const uint64_t align = std::max<uint64_t>(ctx_.getDeclAlign(v).getQuantity(), 1);
        bytes += (ctx_.getTypeSizeInChars(v->getType()).getQuantity() + align - 1) / align * align;
        batch_shared_.push_back(v);
        if (transpose(v, "")) transposed_.insert(v);
      }
      if (!replace_range(d, "")) ok = fail("a __shared__ declaration whose text could not be read");
      return;
    }
    if (const auto* r = dyn_cast<DeclRefExpr>(s); r && is_shared_var(r->getDecl())) {
      if (transposed_.count(cast<VarDecl>(r->getDecl()))) return;  // its elements rewritten above
      if (r->getLocation().isMacroID()) {
        ok = fail("a __shared__ variable named inside a macro");
        return;
      }
      replace_token(r->getLocation(), r->getDecl()->getNameAsString() + "[__kd_t].v");
    }
  });
  if (ok && bytes * lanes > kMaxBatchBytes)
    return fail(fmt::format("a batch's locals and shared memory over {} KiB", kMaxBatchBytes >> 10));
  return ok;
}

bool Kernel::transpose(const VarDecl* v, const std::string& rename) {
  const auto* arr = dyn_cast<ConstantArrayType>(ctx_.getAsArrayType(v->getType()));
  if (!arr || !arr->getElementType()->isScalarType() || arr->getElementType()->isArrayType()) return false;
  std::vector<const ArraySubscriptExpr*> uses;
  bool ok = true;
  walk(body_, [&](const Stmt* s) {
    const auto* r = dyn_cast<DeclRefExpr>(s);
    if (!ok || !r || r->getDecl() != v) return;
    const Stmt* p = pm_->getParent(r);
    while (p && (isa<ImplicitCastExpr>(p) || isa<ParenExpr>(p))) p = pm_->getParent(p);
    const auto* a = dyn_cast_or_null<ArraySubscriptExpr>(p);
    ok = a && a->getBase()->IgnoreParenImpCasts() == r && !r->getLocation().isMacroID() &&
         !a->getRBracketLoc().isMacroID();
    if (ok) uses.push_back(a);
  });
  if (!ok) return false;
  for (const ArraySubscriptExpr* a : uses) {
    if (!rename.empty()) replace_token(cast<DeclRefExpr>(a->getBase()->IgnoreParenImpCasts())->getLocation(), rename);
    replace_token(a->getRBracketLoc(), "][__kd_t]");
  }
  return true;
}

bool Kernel::replace_range(const Stmt* s, const std::string& with) {
  const SourceLocation b = sm_.getExpansionLoc(s->getBeginLoc());
  const SourceLocation e = sm_.getExpansionRange(s->getEndLoc()).getEnd();
  if (!sm_.isInMainFile(b) || !sm_.isInMainFile(e)) return false;
  const unsigned from = sm_.getFileOffset(b);
  const unsigned to = sm_.getFileOffset(e) + Lexer::MeasureTokenLength(e, sm_, ctx_.getLangOpts());
  if (to < from) return false;
  edits_[from] = {to - from, with};
  return true;
}

}  // namespace fission

BlockTile choose_block_tile(const std::set<std::array<uint32_t, 3>>& grids, unsigned vector_lanes) {
  // A row of the grid as long as a vector or longer: lanes along x only (x affine in the lane,
  // so loads of neighbouring elements stay contiguous); a shorter one: whole rows, to fill one.
  // Of those, the tile that fills the most vectors, a partly filled one counted by its share.
  constexpr unsigned kMaxLanes = 64;
  const unsigned vector = std::max(vector_lanes, 1u);
  if (grids.size() != 1) return {};
  const uint32_t gx = (*grids.begin())[0], gy = (*grids.begin())[1];
  const bool rows = gx < vector;
  BlockTile best;
  double best_score = 0;
  for (unsigned w = rows ? gx : 1; w <= std::min<uint32_t>(gx, kMaxLanes); ++w) {
    if (gx % w) continue;
    for (unsigned h = 1; h <= (rows ? std::min<uint32_t>(gy, kMaxLanes) : 1u); ++h) {
      const unsigned lanes = w * h;
      if (gy % h || lanes < 2 || lanes > kMaxLanes) continue;
      const unsigned vectors = (lanes + vector - 1) / vector;
      const double score = double(lanes) * lanes / (vectors * vector);
      if (score > best_score) best = BlockTile{w, h}, best_score = score;
    }
  }
  return best;
}

}  // namespace kdflow::cpu

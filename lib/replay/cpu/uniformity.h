// uniformity.h — which expressions of a kernel are the same for every thread of its block: what
// region fission (region_fission.h) needs of the headers of the loops and ifs that hold barriers.
//
// Uniform: constants, blockIdx (but the components a batch of blocks varies in)/blockDim/gridDim, parameters the kernel never assigns, calls other
// than the runtime's own on uniform arguments, memory read at a uniform place, the counters of
// loops the caller adds, and the locals every thread assigns alike: a local is uniform unless an
// assignment of it (initialiser, `x = e`, `x[i] op= e`, ++x) has a value, element or controlling
// condition (if, loop, ?:, && and ||, the guard of a break that leaves its loop) that is not, or
// its address escapes (&x, a non-const reference, a pointer argument). The non-uniform ones are
// propagated from the writes that read threadIdx, in time linear in the writes and their reads.
#pragma once

#include <map>
#include <set>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/ParentMap.h>

namespace kdflow::cpu {

class Uniformity {
 public:
  /// What differs between the threads asked about: a block's threads (threadIdx), or, for a
  /// batch of one-thread blocks run together (region_fission.h), also blockIdx.x and/or .y.
  struct Varying {
    bool block_x = false, block_y = false;
  };
  /// `body`: the kernel's; `pm`: its parent map (kept by reference).
  Uniformity(const clang::Stmt* body, const clang::ParentMap& pm) : Uniformity(body, pm, Varying()) {}
  Uniformity(const clang::Stmt* body, const clang::ParentMap& pm, Varying varying);

  /// Finds the uniform locals (call once, before uniform() is asked about locals).
  void find_locals();
  /// Whether `e` is the same for every thread of the block.
  bool uniform(const clang::Expr* e) const;
  /// Adds a variable known to be uniform (a loop counter whose header is).
  void add(const clang::VarDecl* v) { vars_.insert(v); }
  void remove(const clang::VarDecl* v) { vars_.erase(v); }
  bool has(const clang::VarDecl* v) const { return vars_.count(v) > 0; }

 private:
  const clang::VarDecl* root_local(const clang::Expr* e, std::vector<const clang::Expr*>* picks) const;
  bool control_conditions(const clang::Stmt* s, std::vector<const clang::Expr*>* conds);
  bool exit_conditions(const clang::Stmt* l, std::vector<const clang::Expr*>* conds) const;
  bool leaves_early(const clang::Stmt* l);

  bool varying_block(const clang::MemberExpr* m) const;

  const clang::Stmt* body_;
  const clang::ParentMap& pm_;
  Varying varying_;
  std::set<const clang::ValueDecl*> written_;  ///< variables (parameters too) the body assigns
  std::set<const clang::VarDecl*> vars_;       ///< uniform variables
  std::map<const clang::Stmt*, bool> leaves_early_;
};

}  // namespace kdflow::cpu

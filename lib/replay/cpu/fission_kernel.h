// fission_kernel.h — one kernel's analysis and rewrite (region_fission.h): the class that
// region_fission.cpp (a block's threads as loops between barriers) and block_batch.cpp (a batch
// of one-thread blocks as loops over them) define between them. Internal to lib/replay/cpu.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/ParentMap.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/SourceManager.h>

#include "fission_ast.h"
#include "kdflow/replay/cpu_kernels.h"
#include "uniformity.h"

namespace kdflow::cpu::fission {

using namespace clang;

/// One kernel's analysis and rewrite. `why` set: the kernel stays on fibers.
class Kernel {
 public:
  Kernel(ASTContext& ctx, FunctionDecl* f) : ctx_(ctx), sm_(ctx.getSourceManager()), f_(f) {}

  /// The new body text, or "" with why() set.
  std::string run(bool one_thread);

  /// A one-thread kernel as batches of `w` x `h` blocks, each block of the batch a lane of the
  /// thread loops (blockIdx.x and .y vary with the lane; shared variables one per lane): the
  /// loops whose headers every block of the batch runs alike hold thread loops instead of
  /// being inside one, so that the compiler vectorises the innermost work across blocks.
  /// "" with why() set where the kernel does not qualify (it is then compiled as one thread).
  std::string run_batched(unsigned w, unsigned h, bool masked_tail);

  /// Compile for blocks of this shape only (the plan launches no other).
  void fix_block(const BlockShape& shape) { block_ = shape; }

  const std::string& why() const { return why_; }
  bool has_barrier() const { return !barriers_.empty() || !shuffles_.empty() || saw_collective_; }

 private:
  /// The rewritten body, once the split points, privates and token replacements are known.
  std::string emit_body();
  bool fail(std::string w);
  bool marked(const Stmt* s) const { return marked_.count(s) > 0; }

  /// A warp shuffle written as a statement `x = __shfl_*(...)`: where the block's values of
  /// the shuffled expression are all known (one thread loop stores them) before any thread
  /// reads its source lane's (the next loop).
  struct Shuffle {
    const Expr* lhs;
    const CallExpr* call;
    int mode;           ///< 0 idx, 1 up, 2 down, 3 xor (the prelude's numbering)
    const Expr* value;  ///< the shuffled expression
    const Expr* arg;    ///< lane, delta or lane mask
    const Expr* width;  ///< null: 32
    int id;
  };

  static int shuffle_mode(const std::string& n);

  /// The statements that split a kernel into thread loops: barriers and warp shuffles (a warp's
  /// exchange run as a block-wide one: every thread of the block reaches it, as the uniform
  /// control checked below makes sure, so the stronger order changes no value). And the
  /// __activemask() calls, which must sit in the same uniform control.
  bool find_splits();

  /// Each direct call of the body: `take` handles those it knows (true); any other warp
  /// collective, an indirect call, or a call of a function of the source that synchronises fails.
  bool check_each_call(const std::function<bool(const CallExpr*, const std::string&)>& take);

  bool check_calls();

  /// Whether a function of the source reaches a barrier, a warp collective or an indirect call
  /// (TVM's half helpers, max and operator=, do not).
  bool synchronises(const FunctionDecl* f, std::set<const FunctionDecl*>& seen);

  bool check_control();

  bool check_structure(const Stmt* s);

  /// `while (c) { if (d) { break; } ... }` (TVM's tile loops): the if, or null.
  static const IfStmt* leading_break(const WhileStmt* w);

  /// The locals a header evaluated between thread loops reads (a uniform local: thread 0's copy).
  void note_header(const Expr* e);

  bool structure(const Stmt* s);

  /// The locals declared directly in compound statements that hold a barrier: alive across
  /// barriers, so one per thread.
  bool plan_privates(const Stmt* s);

  /// Which regions (runs of statements between barriers, numbered as emit() forms them) name
  /// each candidate private local, its declaration included.
  void number_regions(const Stmt* s);
  void note_refs(const Stmt* x, int region);
  void number(const Stmt* s, int* current);

  static std::vector<const Expr*> shuffle_inputs(const Shuffle& q);

  /// A region (a statement holding no barrier, or a run of them) may read or write shared
  /// memory, not both: threads run one after another there, so an exchange between them
  /// without a barrier (warp-synchronous code) would see the wrong order.
  bool check_shared_regions(const Stmt* s);

  /// Per shared variable (the dynamic ones, which alias, as one): no thread may see another's
  /// store to a variable in the region that reads it. A variable both read and written in a
  /// region qualifies when, in each thread, every read comes before every write (by statement,
  /// none in a loop of the region; in one statement, an assignment reading on its right and
  /// writing on its left): run together, as a warp's lanes run, every lane would read before
  /// any lane writes (TVM's cumsum step, each lane reading its neighbour's element and writing
  /// its own; a tree reduction's step). The region's reads then come from a copy of the
  /// variable taken as the region starts (snapshot_of_).
  struct SharedAccess {
    const DeclRefExpr* ref;
    const Expr* access;
    bool reads, writes;
  };
  bool region_shared_ok(const std::vector<const Stmt*>& run);

  /// The statement an access belongs to (the nearest ancestor that is a statement of a compound,
  /// or the region's top), and whether a loop of the region holds it.
  const Stmt* statement_of(const Stmt* x, const std::vector<const Stmt*>& run, bool* in_loop);

  bool reads_before_writes(const Decl* key, const std::vector<SharedAccess>& acc, const std::vector<const Stmt*>& run);

  /// threadIdx → the region's thread (a private local keeps its name: each region declares
  /// it, loaded from and stored back to the thread's element of the per-thread array).
  bool replace_tokens();

  /// A statement's text from the file, with this kernel's token replacements applied. From
  /// the expansion: a statement may begin or end in a macro (__shared__, threadIdx).
  std::string text(const Stmt* s);

  /// Replaces the token at `loc` (a file location) in every text() that covers it.
  void replace_token(SourceLocation loc, const std::string& with);

  /// A run of statements between barriers: its text and the private locals it names.
  struct Region {
    std::string text;
    std::set<const VarDecl*, BySource> vars;
  };

  /// Adds one statement to a region, with the semicolon an expression statement needs; a
  /// private local's declaration becomes the assignment of its initialiser.
  void region_vars(const Stmt* x, Region* r);

  void region_stmt(const Stmt* x, Region* r);

  /// The thread loop of a region: each private local it names is a local of the iteration,
  /// copied from the thread's element before and back after (so it lives in registers).
  std::string loop(const Region& r);

  std::string emit(const Stmt* s);

  std::string emit_compound(const CompoundStmt* c, bool top);

  bool constant(const Expr* e) const { return e->isEvaluatable(ctx_); }

  /// The body for blocks of one thread (one_thread_): as written, a barrier doing nothing, a
  /// shuffle its own value (every other lane is missing: runtime.cpp's rule), __activemask()
  /// lane 0; a launch with more threads stops in one line.
  std::string one_thread_body();

  /// A block's one thread: barriers do nothing, __activemask() is lane 0, a shuffle its own
  /// value (the helpers kOneThreadHelpers defines).
  static constexpr const char* kOneThreadHelpers =
      "auto __kd_nobarrier = [](auto...) {};\n"
      "auto __kd_amask = [] { return 1u; };\n"
      "auto __kd_shfl_self_sync = [](unsigned, auto v, auto...) { return v; };\n"
      "auto __kd_shfl_self = [](auto v, auto...) { return v; };\n";

  bool one_thread_calls();

  /// Batches: the loops every block of a batch runs alike — `for (T i = a; c; step)` with a, c
  /// and step uniform across the batch, its counter changed only by the step, no break or
  /// continue of its own — reached through compound statements and such loops only. Each
  /// holds thread loops instead of lying inside one (marked, as a barrier's ancestors are).
  void hoist(const Stmt* s);

  /// Batches: each __shared__ variable one per lane (a block's own, declared before the thread
  /// loops: `NAME[lane].v`), its declaration dropped where it stood; every lane's private
  /// copies and shared variables on the stack, at most kMaxBatchBytes in all.
  static constexpr uint64_t kMaxBatchBytes = 512 << 10;
  bool batch_shared();

  /// Batches: whether every use of `v` (a one-dimensional array of scalars) is an element
  /// `v[i]` outside macros; if so, each becomes `rename[i][__kd_t]` (rename "": v's own name).
  bool transpose(const VarDecl* v, const std::string& rename);

  /// Replaces a statement's whole text (as text() reads it) in every text() that covers it.
  bool replace_range(const Stmt* s, const std::string& with);

  ASTContext& ctx_;
  SourceManager& sm_;
  FunctionDecl* f_;
  Stmt* body_ = nullptr;
  std::unique_ptr<ParentMap> pm_;
  // Every set or map keyed by AST nodes and iterated is ordered BySource (fission_ast.h): what
  // the rewrite writes from them (declarations, copies) comes out in the same order every run.
  // marked_ and skip_ are only asked whether they hold a statement.
  std::set<const CallExpr*, BySource> barriers_;
  std::map<const Stmt*, Shuffle, BySource> shuffles_;
  std::vector<const CallExpr*> masks_;
  std::map<const VarDecl*, int, BySource> snapshot_of_;  ///< shared arrays read from a copy in some region
  bool saw_collective_ = false;
  std::set<const Stmt*> marked_;
  std::unique_ptr<Uniformity> uni_;
  std::vector<const DeclRefExpr*> header_refs_;
  std::set<const Stmt*> skip_;  ///< leading `if (d) break;` of whiles that hold barriers  ///< locals read in headers between thread loops
  std::map<const VarDecl*, std::string, BySource> privates_;
  std::map<unsigned, std::pair<unsigned, std::string>> edits_;  ///< file offset → (token length, text)
  std::set<const VarDecl*, BySource> locals_;                           ///< candidates named in one region only
  std::map<const VarDecl*, std::set<int>, BySource> regions_of_;
  int region_count_ = 0;
  BlockShape block_{0, 0, 0};                  ///< the one shape it is launched with; 0s: any
  unsigned batch_w_ = 0, batch_h_ = 0;          ///< a batch of blocks (run_batched); 0: a block's threads
  bool masked_tail_ = false;                  ///< the lanes past the last full vector as one masked vector
  std::vector<const VarDecl*> batch_shared_;  ///< its __shared__ variables, one per lane
  std::set<const VarDecl*, BySource> transposed_;       ///< of those and its privates, the arrays side by side
  std::string why_;
};

}  // namespace kdflow::cpu::fission

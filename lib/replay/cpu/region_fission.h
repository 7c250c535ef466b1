// region_fission.h — kernels with barriers as loops over the block's threads (issue 31), the
// region/loop-fission method of MCUDA, CuPBoP and POCL, done on the clang AST of the device
// source before it is compiled for the CPU.
//
// A kernel qualifies when every __syncthreads() is a statement of its own, reached only
// through compound statements, `for` loops and `if`s whose headers are the same for every
// thread of the block (built from the kernel's parameters, constants, blockIdx/blockDim/
// gridDim and such loops' own counters), and the kernel has no return, goto, volatile, warp
// collective or call of a function of the source (which might synchronise). Its body is then
// rewritten: the code between barriers becomes `for (each thread of the block) { ... }` with
// threadIdx computed from the loop counter; the locals declared where a barrier is in scope
// (so alive across it) become per-thread arrays in block-private memory (__kdflow_private),
// and a barrier ends one thread loop and starts the next. Code in one such region must not
// let threads exchange data through shared memory without a barrier: a region that both
// reads and writes __shared__ memory (warp-synchronous code, TVM's cumsum) keeps its kernel
// on fibers. Every other kernel is left as it is, with the reason.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace clang {
class ASTConsumer;
class CompilerInstance;
}  // namespace clang

namespace kdflow::cpu {

struct FissionOutcome {
  std::string source;                       ///< the rewritten module ("" when no kernel changed)
  std::vector<std::string> kernels;         ///< kernels now run as thread loops between barriers
  std::vector<std::string> one_thread;      ///< of them, those compiled for one-thread blocks only
  std::map<std::string, std::string> kept;  ///< kernels with barriers left to fibers, and why
};

/// The consumer that analyses and rewrites a parsed module (run it on the same command line
/// and files the module is compiled with; it emits nothing else).
/// `one_thread`: kernels the plan launches only with one-thread blocks; each is compiled for
/// that alone (the body as written, barriers doing nothing), whatever its structure.
std::unique_ptr<clang::ASTConsumer> make_fission_consumer(clang::CompilerInstance& ci,
                                                          const std::set<std::string>& one_thread, FissionOutcome* out);

}  // namespace kdflow::cpu

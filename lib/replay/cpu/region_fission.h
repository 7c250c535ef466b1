// region_fission.h — kernels with barriers as loops over the block's threads (issue 31), the
// region/loop-fission method of MCUDA, CuPBoP and POCL, done on the clang AST of the device
// source before it is compiled for the CPU.
//
// A kernel qualifies when every split point — a __syncthreads() or __syncwarp() statement, or
// a warp shuffle written as a statement `x = __shfl_*(...)` — is reached only through compound
// statements, `for` loops, `while (c) { if (d) { break; } ... }` loops and `if`s whose headers
// are the same for every thread of the block (built from the kernel's parameters, constants,
// blockIdx/blockDim/gridDim, such loops' own counters and locals every thread assigns alike),
// and the kernel has no return, goto, vote, volatile other than a cast of a __shared__ array,
// or call of a function of the source that synchronises. Its body is then
// rewritten: the code between split points becomes `for (each thread of the block) { ... }`
// with threadIdx computed from the loop counter; the locals declared where a split point is in
// scope and named in more than one region become per-thread arrays in block-private memory
// (__kdflow_private); a barrier ends one thread loop and starts the next; a shuffle ends one
// loop with every thread's value stored and the next reads the source lane's; __activemask()
// is the warp's existing lanes. The thread loops are one loop per dimension (z, y, x), so that
// what depends on threadIdx.y alone is computed once per row; for a kernel the plan launches
// with one block shape, that shape is compiled in as constants (a launch with another stops in
// one line). A kernel with no split point at all, where the same checks pass, becomes one such
// loop over the block's threads instead of a call of the kernel per thread.
// A region may not let a thread see another's store to shared
// memory: a shared variable both read and written in one region qualifies only when every
// thread reads it before it writes it (the reads then come from a copy taken as the region
// starts, what a warp's lanes in step read: TVM's cumsum, tree reductions); otherwise the
// kernel keeps fibers. Every other kernel is left as it is, with the reason.
//
// A kernel the plan launches only with one-thread blocks is compiled for that alone, whatever
// its structure: the body as written, barriers doing nothing, a shuffle its own value. Given a
// tile (choose_block_tile in cpu_kernels.h), such a kernel runs a batch of tile.w x tile.h
// blocks per call instead, each block a lane of the thread loops: the `for` loops every block
// of the batch runs alike are hoisted out of the thread loops, so that the compiler vectorises
// the innermost work across blocks; blockIdx is the lane's block, each __shared__ variable one
// per lane. Not batched (with the reason): a return or goto, a parameter the kernel assigns,
// dynamic shared memory, a static local, a batch over 512 KiB of locals and shared memory.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kdflow/replay/cpu_kernels.h"

namespace clang {
class ASTConsumer;
class CompilerInstance;
}  // namespace clang

namespace kdflow::cpu {

struct FissionOutcome {
  std::string source;                       ///< the rewritten module ("" when no kernel changed)
  std::vector<std::string> kernels;         ///< kernels now run as thread loops between barriers
  std::vector<std::string> plain;           ///< of them, those with no barrier: one loop over the block's threads
  std::vector<std::string> one_thread;      ///< of them, those compiled for one-thread blocks only
  std::map<std::string, BlockTile> batched; ///< of those, the ones compiled for batches of blocks
  std::map<std::string, std::string> unbatched;  ///< one-thread kernels given a tile but not batched, and why
  std::map<std::string, std::string> kept;  ///< kernels with barriers left to fibers, and why
};

/// The consumer that analyses and rewrites a parsed module (run it on the same command line
/// and files the module is compiled with; it emits nothing else).
/// `one_thread`: kernels the plan launches only with one-thread blocks; each is compiled for
/// that alone (the body as written, barriers doing nothing), whatever its structure.
/// `tiles`: of those, the ones to compile for batches of blocks where their code allows;
/// `blocks`: kernels launched with one block shape only, whose thread loops are compiled for
/// it (constant trip counts; a launch with another shape stops in one line);
/// `vector_lanes`: floats in the host's widest vector (16: masked vectors are cheap).
std::unique_ptr<clang::ASTConsumer> make_fission_consumer(clang::CompilerInstance& ci,
                                                          const std::set<std::string>& one_thread,
                                                          const std::map<std::string, BlockTile>& tiles,
                                                          const std::map<std::string, BlockShape>& blocks,
                                                          unsigned vector_lanes, FissionOutcome* out);

}  // namespace kdflow::cpu

// cpu_kernels.h — compiles a TVM device module (device.cu) for the host in-process (clang
// CodeGen → LLVM IR → ORC JIT at -O2) and runs its kernels on the CPU: blocks on OS
// threads, a block's threads as a loop or as fibers. It compiles and runs the code it is
// given: only `kdflow replay --backend cpu` may call it, after the safety check.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"

namespace kdflow::cpu {

/// A batch of one-thread blocks run by one call of a kernel compiled for it: w x h blocks of
/// one grid row band (x from a multiple of w, y from a multiple of h, one z), the compiler
/// free to vectorise across them (region_fission.h). w == 0: no batching.
struct BlockTile {
  unsigned w = 0, h = 0;
};

/// A block's threads in x, y, z.
using BlockShape = std::array<uint32_t, 3>;

/// The batch for a one-thread kernel launched with `grids`: the w x h tile (w dividing grid.x;
/// h > 1 only where w is all of grid.x, dividing grid.y) of at most 64 blocks that fills the
/// most vectors of `vector_lanes` floats (a partly filled one counted by its share); none
/// where the kernel has several grids or no tile of 2 or more.
BlockTile choose_block_tile(const std::set<std::array<uint32_t, 3>>& grids, unsigned vector_lanes);

/// One kernel of a compiled module, ready to launch.
struct CpuKernel {
  std::string name;
  int module = 0;
  void (*entry)(void**) = nullptr;  ///< the JIT's wrapper: unpacks kernelParams-style args
  unsigned params = 0;              ///< parameters of the kernel function
  bool fibers = false;              ///< it synchronises (barrier or warp collective): fibers
  bool block_loop = false;          ///< region fission: barriers split it into loops over the threads
  bool plain_loop = false;          ///< of those, one with no barrier: the block is one loop over its threads
  bool one_thread = false;          ///< of those, compiled for one-thread blocks only (barriers do nothing)
  BlockTile tile;                   ///< of those, compiled for batches of blocks (tile.w x tile.h per call)
  std::string unbatched_why;        ///< given a tile but compiled one block per call: why
  std::string fibers_why;           ///< a kernel with barriers left on fibers: why (region_fission.h)
  uint64_t static_shared = 0;       ///< bytes of the module's static __shared__ variables
};

struct CpuDeviceOptions {
  CpuDeviceOptions(unsigned threads = 0) : threads(threads) {}  // NOLINT: `{threads}` reads as before
  unsigned threads = 0;  ///< OS threads running blocks (0: the hardware's concurrency)
  /// The compile cache's folder (lib/replay/cpu/compile_cache.h): each module's machine code
  /// kept across runs under a key of everything that determines it. "": no cache.
  std::string cache_dir;
  uint64_t cache_max_bytes = uint64_t{1} << 30;  ///< the folder's size cap, least recently used out first
  /// replay --poison: every kernel's locals, each block's shared memory and thread-private
  /// storage start as 0xFF bytes (NaN as float), so that reading memory nothing wrote shows.
  bool poison = false;
};

/// How compile_module got a module's machine code.
struct CpuModuleOrigin {
  bool from_cache = false;  ///< loaded from the compile cache: nothing parsed, optimised or compiled
  bool stored = false;      ///< compiled and stored in the cache
  std::string key;          ///< the cache key's SHA-256 (hex); "" without a cache
  std::string note;         ///< what went wrong with the cache (an entry ignored and why, a failed store); "" if nothing
};

/// One JIT (one LLVM ORC LLJIT) and one worker pool: a replay's CPU "device".
class CpuDevice {
 public:
  static Expected<std::unique_ptr<CpuDevice>> create(const CpuDeviceOptions& options = {});
  ~CpuDevice();
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  /// Compiles `source` (named `label` in diagnostics) and adds it to the JIT as a new
  /// module; returns its id. With a cache (CpuDeviceOptions::cache_dir), a verified entry for
  /// the same source, options, host CPU, LLVM and kdflow build is loaded instead of compiling,
  /// and what is compiled is stored; a bad entry is ignored and replaced (origin() says so). A clang error → `label:line:col: error: ...` (DataError);
  /// a symbol outside the prelude's runtime → Unavailable.
  /// `one_thread`: kernels launched only with one-thread blocks, compiled for that alone (their
  /// barriers do nothing); a launch of one with more threads stops in one line. `tiles`: of
  /// them, those to compile for batches of blocks, where their code allows (CpuKernel::tile).
  /// `blocks`: kernels launched with one block shape only (of more than one thread), each
  /// compiled for that shape where it runs as thread loops (a launch with another shape stops
  /// in one line).
  Expected<int> compile_module(const std::string& source, const std::string& label,
                               const std::set<std::string>& one_thread = {},
                               const std::map<std::string, BlockTile>& tiles = {},
                               const std::map<std::string, BlockShape>& blocks = {});
  /// The source compile_module() compiles first for `source`: region fission's rewrite
  /// (region_fission.h), "" when no kernel changed. Nothing is compiled or added to the JIT;
  /// a clang error leaves the source unchanged (""), as compile_module then reports it.
  Expected<std::string> rewritten_source(const std::string& source, const std::string& label,
                                         const std::set<std::string>& one_thread = {},
                                         const std::map<std::string, BlockTile>& tiles = {},
                                         const std::map<std::string, BlockShape>& blocks = {}) const;
  /// Whether module `module` came from the compile cache, and what happened to the cache.
  CpuModuleOrigin origin(int module) const;
  /// Every kernel of module `module` (not yet linked: entry is null), by name.
  std::vector<CpuKernel> kernels(int module) const;
  /// Whether module `module` defines a kernel `name`.
  bool has_kernel(int module, const std::string& name) const;
  /// The kernel `name` of module `module` (its wrapper is looked up in the JIT).
  Expected<CpuKernel> kernel(int module, const std::string& name);
  /// Runs one launch to completion. `args` as cuLaunchKernel's kernelParams: one pointer
  /// per parameter to its value. A trap or threads stuck at different barriers → Error.
  Status launch(const CpuKernel& k, const std::array<uint32_t, 3>& grid, const std::array<uint32_t, 3>& block,
                uint64_t dynamic_shared, void** args);
  unsigned threads() const;
  /// Floats in the widest vector of the host's features the JIT compiles for (16 with AVX-512).
  unsigned vector_lanes() const;
  /// The blocks of the launch running now, "block (x,y,z), ..." (safe from any thread while
  /// launch() runs: the time limit's watchdog names them).
  std::string running_blocks() const;

 private:
  CpuDevice();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kdflow::cpu

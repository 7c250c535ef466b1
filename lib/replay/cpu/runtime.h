// runtime.h — what JIT-compiled kernels call at run time (the prelude's __kdflow_* functions
// and the C library's math), and the block scheduler behind them: one block's CUDA threads
// as a plain loop, or as one Boost.Context fiber each switching at barriers and warp
// collectives. Knows nothing about plans or files.
#pragma once

#include <atomic>
#include <condition_variable>
#include <csetjmp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kdflow::cpu {

struct Uint3 {
  unsigned x = 1, y = 1, z = 1;
};

/// One CUDA thread's view. Layout-identical to __kdflow_thread_ctx in the prelude text.
struct ThreadContext {
  Uint3 thread_idx{0, 0, 0}, block_idx{0, 0, 0}, block_dim, grid_dim;
  char* shared = nullptr;
  unsigned lane = 0;
  unsigned live_mask = 0;
  unsigned batch = 0;  ///< blocks this call runs: a kernel compiled for batches of blocks, else 0
};

/// (name, address) of every symbol JIT-compiled code may reference: nothing else resolves.
const std::vector<std::pair<const char*, void*>>& runtime_symbols();

/// The most a block of a kernel run as thread loops keeps in per-thread locals across barriers.
inline constexpr uint64_t kMaxPrivateBytes = 256ull << 20;

/// Names of the runtime functions that need the block's threads to run as fibers.
bool is_collective_function(const std::string& name);

/// A kernel entry: the JIT's wrapper, which unpacks `args` (one pointer per parameter, as
/// cuLaunchKernel's kernelParams) and calls the kernel for the current thread.
using KernelEntry = void (*)(void** args);

struct LaunchShape {
  Uint3 grid, block;
  uint64_t shared_bytes = 0;  ///< static + dynamic shared memory per block
  bool fibers = false;        ///< the kernel synchronises: one fiber per thread
  bool block_loop = false;    ///< region fission: one call runs the block, looping over its threads
  /// A one-thread kernel compiled for batches of blocks (region_fission.h): one call runs the
  /// tile_w x tile_h blocks from blockIdx on (grid.x, grid.y multiples of them); 0: one block.
  unsigned tile_w = 0, tile_h = 0;
};

/// The blocks of work item `item` of a launch (a block, or a batch of them), "(x,y,z)" or
/// "(x..x2,y..y2,z)".
std::string blocks_name(const LaunchShape& shape, uint64_t item);

/// Runs blocks on one OS thread; owns that thread's shared memory and fiber stacks.
class BlockRunner {
 public:
  BlockRunner();
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;
  /// Runs work item `linear` of the launch: a block, or a batch of blocks (tile_w). Empty
  /// string: done; otherwise what stopped it (a trap, threads waiting at different barriers).
  std::string run_block(KernelEntry entry, void** args, const LaunchShape& shape, uint64_t linear);
  /// Poisoning (replay --poison): each block's shared memory and thread-private storage start
  /// as 0xFF bytes (NaN as float, -1 as an integer) instead of what the last block left, resp.
  /// zeros, so that a kernel reading memory no thread of the block wrote shows it.
  void set_poison(bool on);

  struct Impl;  // runtime.cpp's; public so that the prelude's functions reach it

 private:
  Impl* impl_;
};

/// A fixed set of OS threads that run a launch's blocks; block b goes to whichever worker
/// takes it first (results do not depend on it: blocks share no state but global memory,
/// which CUDA already leaves unordered between blocks). A launch wakes only the workers its
/// blocks can use (none for one block), and between launches queued back to back the workers
/// and the caller poll for a short while (yielding the core after the first 20 us) before they
/// sleep: waking a sleeping thread took about 20 us a launch, more than many kernels run.
class WorkerPool {
 public:
  explicit WorkerPool(unsigned threads, bool poison = false);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  unsigned size() const { return static_cast<unsigned>(runners_.size()); }
  /// Runs every block; the first failure (lowest block index) comes back as text.
  /// The number of work items of a launch: its blocks, or its batches of blocks.
  static uint64_t items(const LaunchShape& shape);
  std::string run(KernelEntry entry, void** args, const LaunchShape& shape);
  /// The blocks the workers run now, "(x,y,z)" each (any thread may ask: atomics only).
  std::string running() const;

 private:
  void work(unsigned index);
  std::vector<std::unique_ptr<BlockRunner>> runners_;
  std::unique_ptr<std::atomic<uint64_t>[]> current_;  ///< per worker: its block, or kIdle
  std::atomic<uint32_t> grid_x_{1}, grid_y_{1}, tile_w_{0}, tile_h_{0};
  static constexpr uint64_t kIdle = ~uint64_t(0);
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  /// The current launch: its generation (upper bits) and how many workers take part (1..n,
  /// the low kJobWorkerBits), in one word, so that a worker reads both of one launch.
  std::atomic<uint64_t> job_{0};
  static constexpr unsigned kJobWorkerBits = 20;
  uint64_t generation_ = 0;  ///< launches that woke workers (the caller's only)
  std::atomic<unsigned> busy_{0};  ///< of the workers taking part, those not finished
  std::atomic<bool> stop_{false};
  // The job of the current generation.
  KernelEntry entry_ = nullptr;
  void** args_ = nullptr;
  LaunchShape shape_;
  uint64_t blocks_ = 0;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> failed_{false};
  uint64_t fail_block_ = 0;
  std::string fail_text_;
  void run_blocks(unsigned worker);
};

}  // namespace kdflow::cpu

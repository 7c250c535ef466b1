// runtime.cpp — the block scheduler and the functions JIT-compiled kernels call (runtime.h).
//
// How a block runs (compare HIP-CPU and alpaka's fiber back end, docs/how-kdflow-works.md):
// a kernel with no barrier and no warp collective runs its threads one after the other on
// the worker's OS thread. Otherwise every CUDA thread is a Boost.Context fiber; the worker
// resumes them round-robin, and a fiber gives control back only when it waits: at a block
// barrier (__syncthreads) until every live thread of the block arrived, at a warp barrier
// (__syncwarp, and twice in each shuffle or vote: values in, values out) until every live
// lane of its warp arrived. A thread that returned no longer counts (as on the GPU, where
// exited threads do not hold barriers back). When a whole round resumes every waiting fiber
// and none moves on, the threads wait at different barriers: that is reported, not hung on.
// All fibers of a block run on one OS thread, so the current thread's context and the
// block's shared memory are reached through thread_local pointers.
#include "runtime.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <fmt/format.h>

#include "guarded_memory.h"
#include "kernel_safety.h"

// Under AddressSanitizer every switch between the scheduler's stack and a fiber's is announced
// (__sanitizer_start_switch_fiber before, __sanitizer_finish_switch_fiber after), as Boost's
// ucontext fibers do with BOOST_USE_ASAN; Debian's Boost.Context is the fcontext build, which
// has no such hooks, and ASan would otherwise take a fiber's frames for the thread's stack.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define KDFLOW_FIBER_SWITCH_START(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define KDFLOW_FIBER_SWITCH_FINISH(save, bottom_old, size_old) \
  __sanitizer_finish_switch_fiber(save, bottom_old, size_old)
#else
#define KDFLOW_FIBER_SWITCH_START(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define KDFLOW_FIBER_SWITCH_FINISH(save, bottom_old, size_old) \
  ((void)(save), (void)(bottom_old), (void)(size_old))
#endif

namespace kdflow::cpu {

namespace {

constexpr size_t kStackBytes = kCpuThreadStackBytes;  // per CUDA thread (kernel_safety.h bounds the locals)
constexpr int kMaxSlot = 32;                // bytes one lane may shuffle at once

/// Fiber stacks from mmap with a PROT_NONE guard page below, reused across blocks.
class StackPool {
 public:
  ~StackPool() {
    for (void* p : free_) munmap(p, total());
  }
  /// The usable range of the stack allocate() returned last.
  const void* last_bottom = nullptr;
  boost::context::stack_context allocate() {
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, total(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      mprotect(base, page(), PROT_NONE);
    }
    boost::context::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + total();
    last_bottom = static_cast<char*>(base) + page();
    return sc;
  }
  void deallocate(boost::context::stack_context& sc) noexcept {
    free_.push_back(static_cast<char*>(sc.sp) - total());
  }

 private:
  static size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
  static size_t total() { return kStackBytes + page(); }
  std::vector<void*> free_;
};

/// Boost.Context's StackAllocator concept over a StackPool.
struct PoolAllocator {
  StackPool* pool;
  boost::context::stack_context allocate() { return pool->allocate(); }
  void deallocate(boost::context::stack_context& sc) noexcept { pool->deallocate(sc); }
};

struct Barrier {
  unsigned live = 0, arrived = 0;
  unsigned blocked = 0;  // warps: lanes waiting at the block barrier (diverged from the warp)
  uint64_t generation = 0;
};

struct Fiber {
  boost::context::fiber self;    // resumed by the scheduler
  boost::context::fiber caller;  // the scheduler, resumed to yield
  std::jmp_buf exit;             // a trap or an abandoned block leaves the kernel through here
  bool done = false;
  const void* stack_bottom = nullptr;  // its stack (for the sanitizer's switch hooks)
  size_t stack_size = 0;
  void* fake_stack = nullptr;          // the sanitizer's, while the fiber is switched out
};

}  // namespace

struct BlockRunner::Impl {
  StackPool stacks;
  std::vector<char> shared;
  std::vector<ThreadContext> contexts;
  std::vector<Fiber> fibers;
  std::vector<Barrier> warps;
  std::vector<std::array<unsigned char, kMaxSlot>> slots[2];
  std::vector<uint64_t> slot_generation[2];
  Barrier block;
  unsigned current = 0;
  uint64_t events = 0;    // arrivals, releases and exits: progress for the deadlock check
  bool abandon = false;   // the block is being torn down: waiting fibers leave at once
  bool in_fibers = false;
  std::string trap;       // why the block stopped
  std::jmp_buf loop_exit; // a trap in plain-loop mode
  // Thread-private storage of a kernel run as thread loops (region_fission.h): one buffer per
  // __kdflow_private call of the block, reused by the next block.
  std::vector<std::pair<std::unique_ptr<char[]>, size_t>> privates;
  size_t private_next = 0;
  uint64_t private_bytes = 0;
  bool poison = false;  // replay --poison: shared and private storage start as 0xFF bytes
  const void* scheduler_bottom = nullptr;  // the worker's own stack (sanitizer builds)
  size_t scheduler_size = 0;
  void* scheduler_fake_stack = nullptr;

  void yield() {
    Fiber& f = fibers[current];
    KDFLOW_FIBER_SWITCH_START(&f.fake_stack, scheduler_bottom, scheduler_size);
    f.caller = std::move(f.caller).resume();
    KDFLOW_FIBER_SWITCH_FINISH(f.fake_stack, nullptr, nullptr);
    if (abandon) std::longjmp(f.exit, 1);
  }
  void release(Barrier& b) {
    b.arrived = 0;
    ++b.generation;
  }
  // A warp barrier holds until every live lane of the warp arrived, lanes waiting at the
  // block barrier excepted (they diverged: on the GPU they are not in the warp's active mask).
  void check_warp(Barrier& w) {
    if (w.arrived > 0 && w.arrived + w.blocked >= w.live) release(w);
  }
  void release_block() {
    release(block);
    for (Barrier& w : warps) w.blocked = 0;
  }
  void wait_block() {
    ++events;
    uint64_t gen = block.generation;
    Barrier& w = warps[current / 32];
    ++w.blocked;
    check_warp(w);
    if (++block.arrived >= block.live) {
      release_block();
      return;
    }
    while (block.generation == gen) yield();
  }
  void wait_warp() {
    ++events;
    Barrier& w = warps[current / 32];
    uint64_t gen = w.generation;
    ++w.arrived;
    check_warp(w);
    while (w.generation == gen) yield();
  }
  void leave(unsigned t) {
    ++events;
    if (--block.live > 0 && block.arrived >= block.live) release_block();
    Barrier& w = warps[t / 32];
    --w.live;
    check_warp(w);
  }
};

namespace {

thread_local BlockRunner::Impl* t_runner = nullptr;
thread_local ThreadContext* t_ctx = nullptr;

/// The lowest usable byte of the calling OS thread's own stack (pthread_getattr_np; for the
/// main thread, as far as its stack may grow), or nullptr where it cannot be told.
const void* own_stack_low() {
  thread_local const void* low = [] {
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) != 0) return static_cast<const void*>(nullptr);
    void* addr = nullptr;
    size_t size = 0;
    int rc = pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_destroy(&a);
    return rc == 0 ? static_cast<const void*>(addr) : nullptr;
  }();
  return low;
}

/// Stops the running kernel: records why and jumps out of it. `why` is a literal: nothing may
/// own memory in the frames the jump leaves (their destructors never run; ASan found a
/// std::string built here leaking).
[[noreturn]] void fail_here(const char* why) {
  BlockRunner::Impl* r = t_runner;
  if (r->trap.empty()) r->trap = why;
  if (r->in_fibers) std::longjmp(r->fibers[r->current].exit, 1);
  std::longjmp(r->loop_exit, 1);
}

}  // namespace

}  // namespace kdflow::cpu

// --- the functions the prelude declares --------------------------------------------------
using kdflow::cpu::t_ctx;
using kdflow::cpu::t_runner;

extern "C" {

static const kdflow::cpu::ThreadContext* kdflow_ctx() { return t_ctx; }

static void kdflow_syncthreads() {
  if (!t_runner->in_fibers) kdflow::cpu::fail_here("__syncthreads outside a fiber block (a kdflow bug)");
  t_runner->wait_block();
}

static void kdflow_syncwarp() {
  if (!t_runner->in_fibers) kdflow::cpu::fail_here("__syncwarp outside a fiber block (a kdflow bug)");
  t_runner->wait_warp();
}

// Before each volatile access (jit.cpp inserts the call): the lanes of a warp take their
// volatile accesses in step, as pre-Volta warp-synchronous code expects of a warp.
// Outside fibers it does nothing: only a kernel rewritten into thread loops (region_fission.h),
// whose volatile accesses need no lanes in step, runs one there (inlined from a helper such as
// half's volatile operator=; jit.cpp decides fibers counting every other kernel's steps).
static void kdflow_warp_step() {
  if (!t_runner->in_fibers) return;
  t_runner->wait_warp();
}

// Shuffles and votes exchange through per-lane slots in two banks, chosen by the warp
// barrier's generation: a lane writes its bank, waits for the warp, reads. One barrier is
// enough: a lane can write the same bank again only two exchanges later, after passing the
// next exchange's barrier, which every other lane reaches only after its read here.
static void kdflow_warp_shuffle(void* out, const void* in, unsigned long size, int mode, int arg, int width) {
  auto* r = t_runner;
  if (!r->in_fibers) kdflow::cpu::fail_here("warp shuffle outside a fiber block (a kdflow bug)");
  if (size > static_cast<unsigned long>(kdflow::cpu::kMaxSlot)) kdflow::cpu::fail_here("shuffled value over 32 bytes");
  unsigned me = r->current;
  unsigned lane = me % 32, warp = me / 32;
  const uint64_t gen = r->warps[warp].generation;
  const unsigned bank = static_cast<unsigned>(gen & 1);
  std::memcpy(r->slots[bank][me].data(), in, size);
  r->slot_generation[bank][me] = gen;  // which exchange the slot's value belongs to
  r->wait_warp();
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) width = 32;
  unsigned w = static_cast<unsigned>(width);
  unsigned base = lane & ~(w - 1);
  long src = lane;
  switch (mode) {
    case 0: src = base + (static_cast<unsigned>(arg) & (w - 1)); break;
    case 1: src = static_cast<long>(lane) - arg; if (src < static_cast<long>(base)) src = lane; break;
    case 2: src = static_cast<long>(lane) + arg; if (src >= static_cast<long>(base + w)) src = lane; break;
    default: src = lane ^ static_cast<unsigned>(arg); if (src >= static_cast<long>(base + w)) src = lane; break;
  }
  unsigned src_thread = warp * 32 + static_cast<unsigned>(src);
  // A lane not in this exchange (returned, or diverged to the block barrier): own value.
  if (src_thread >= r->fibers.size() || r->slot_generation[bank][src_thread] != gen) src_thread = me;
  std::memcpy(out, r->slots[bank][src_thread].data(), size);
}

static unsigned kdflow_warp_vote(int mode, int pred) {
  auto* r = t_runner;
  if (!r->in_fibers) kdflow::cpu::fail_here("warp vote outside a fiber block (a kdflow bug)");
  unsigned me = r->current, warp = me / 32;
  const uint64_t gen = r->warps[warp].generation;
  const unsigned bank = static_cast<unsigned>(gen & 1);
  r->slots[bank][me][0] = pred ? 1 : 0;
  r->slot_generation[bank][me] = gen;
  r->wait_warp();
  unsigned mask = 0, live = 0;
  for (unsigned l = 0; l < 32; ++l) {
    unsigned t = warp * 32 + l;
    if (t >= r->fibers.size() || r->slot_generation[bank][t] != gen) continue;
    live |= 1u << l;
    if (r->slots[bank][t][0]) mask |= 1u << l;
  }
  if (mode == 0) return mask;
  if (mode == 1) return mask != 0;
  return (mask & live) == live;
}

static void kdflow_trap() { kdflow::cpu::fail_here("the kernel called __trap()"); }

static void kdflow_unplanned_block() {
  kdflow::cpu::fail_here("compiled for one-thread blocks (as the plan launches it), launched with more (a kdflow bug)");
}

static void kdflow_unplanned_shape() {
  kdflow::cpu::fail_here("compiled for the one block shape the plan launches it with, launched with another (a kdflow "
                         "bug)");
}

// A kernel run as thread loops: the block's per-thread copies of a local alive across a
// barrier (region_fission.h), at most kMaxPrivateBytes per block in all.
static void* kdflow_private(unsigned long bytes, unsigned long align) {
  kdflow::cpu::BlockRunner::Impl* r = t_runner;
  if (!r) kdflow::cpu::fail_here("thread-private storage outside a block (a kdflow bug)");
  if (align == 0 || (align & (align - 1)) != 0 || align > 4096) kdflow::cpu::fail_here("bad alignment of a local");
  if (bytes > kdflow::cpu::kMaxPrivateBytes || r->private_bytes + bytes > kdflow::cpu::kMaxPrivateBytes)
    kdflow::cpu::fail_here("the block's threads hold more than 256 MiB of locals alive across barriers");
  r->private_bytes += bytes;
  const size_t need = bytes + align;
  if (r->private_next == r->privates.size()) r->privates.emplace_back(nullptr, 0);
  auto& slot = r->privates[r->private_next++];
  if (slot.second < need) {
    slot.first.reset(new char[need]);
    slot.second = need;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(slot.first.get());
  void* out = reinterpret_cast<void*>((p + align - 1) / align * align);
  // Fresh for every block: zeros (the same bytes whatever block ran on this worker before, so
  // even a kernel that reads a copy its thread never wrote gives the same result every run), or
  // under --poison 0xFF bytes, NaN as float, so that such a read shows (issue 52).
  std::memset(out, r->poison ? 0xFF : 0, bytes);
  return out;
}

// LLVM's optimiser merges sinf(x) and cosf(x) of one x into one sincosf call (the rotary
// embedding of TVM's KV cache does both): the same two results.
static void kdflow_sincosf(float x, float* s, float* c) {
  *s = sinf(x);
  *c = cosf(x);
}
static void kdflow_sincos(double x, double* s, double* c) {
  *s = sin(x);
  *c = cos(x);
}

}  // extern "C"

namespace kdflow::cpu {

bool is_collective_function(const std::string& name) {
  return name == "__kdflow_syncthreads" || name == "__kdflow_syncwarp" || name == "__kdflow_warp_shuffle" ||
         name == "__kdflow_warp_vote" || name == "__kdflow_warp_step";
}

const std::vector<std::pair<const char*, void*>>& runtime_symbols() {
  using F1 = float (*)(float);
  using D1 = double (*)(double);
  using F2 = float (*)(float, float);
  using D2 = double (*)(double, double);
#define KDFLOW_M1(n) {#n "f", reinterpret_cast<void*>(static_cast<F1>(&::n##f))}, \
                     {#n, reinterpret_cast<void*>(static_cast<D1>(&::n))}
#define KDFLOW_M2(n) {#n "f", reinterpret_cast<void*>(static_cast<F2>(&::n##f))}, \
                     {#n, reinterpret_cast<void*>(static_cast<D2>(&::n))}
  static const std::vector<std::pair<const char*, void*>> table = {
      {"__kdflow_ctx", reinterpret_cast<void*>(&kdflow_ctx)},
      {"__kdflow_syncthreads", reinterpret_cast<void*>(&kdflow_syncthreads)},
      {"__kdflow_syncwarp", reinterpret_cast<void*>(&kdflow_syncwarp)},
      {"__kdflow_warp_step", reinterpret_cast<void*>(&kdflow_warp_step)},
      {"__kdflow_warp_shuffle", reinterpret_cast<void*>(&kdflow_warp_shuffle)},
      {"__kdflow_warp_vote", reinterpret_cast<void*>(&kdflow_warp_vote)},
      {"__kdflow_trap", reinterpret_cast<void*>(&kdflow_trap)},
      {"__kdflow_unplanned_block", reinterpret_cast<void*>(&kdflow_unplanned_block)},
      {"__kdflow_unplanned_shape", reinterpret_cast<void*>(&kdflow_unplanned_shape)},
      {"__kdflow_private", reinterpret_cast<void*>(&kdflow_private)},
      {"memcpy", reinterpret_cast<void*>(&::memcpy)},
      {"memset", reinterpret_cast<void*>(&::memset)},
      {"memmove", reinterpret_cast<void*>(&::memmove)},
      KDFLOW_M1(exp), KDFLOW_M1(exp2), KDFLOW_M1(exp10), KDFLOW_M1(expm1), KDFLOW_M1(log), KDFLOW_M1(log2),
      KDFLOW_M1(log10), KDFLOW_M1(log1p), KDFLOW_M1(sqrt), KDFLOW_M1(cbrt), KDFLOW_M1(sin), KDFLOW_M1(cos),
      KDFLOW_M1(tan), KDFLOW_M1(asin), KDFLOW_M1(acos), KDFLOW_M1(atan), KDFLOW_M1(sinh), KDFLOW_M1(cosh),
      KDFLOW_M1(tanh), KDFLOW_M1(asinh), KDFLOW_M1(acosh), KDFLOW_M1(atanh), KDFLOW_M1(erf), KDFLOW_M1(erfc),
      KDFLOW_M1(tgamma), KDFLOW_M1(lgamma), KDFLOW_M1(fabs), KDFLOW_M1(floor), KDFLOW_M1(ceil),
      KDFLOW_M1(round), KDFLOW_M1(trunc), KDFLOW_M1(rint), KDFLOW_M1(nearbyint),
      KDFLOW_M2(pow), KDFLOW_M2(atan2), KDFLOW_M2(fmod), KDFLOW_M2(fmax), KDFLOW_M2(fmin), KDFLOW_M2(hypot),
      KDFLOW_M2(copysign), KDFLOW_M2(remainder), KDFLOW_M2(fdim),
      {"sincosf", reinterpret_cast<void*>(&kdflow_sincosf)},
      {"sincos", reinterpret_cast<void*>(&kdflow_sincos)},
      {"fmaf", reinterpret_cast<void*>(static_cast<float (*)(float, float, float)>(&::fmaf))},
      {"fma", reinterpret_cast<void*>(static_cast<double (*)(double, double, double)>(&::fma))},
      {"abs", reinterpret_cast<void*>(static_cast<int (*)(int)>(&::abs))},
      {"labs", reinterpret_cast<void*>(static_cast<long (*)(long)>(&::labs))},
      {"llabs", reinterpret_cast<void*>(static_cast<long long (*)(long long)>(&::llabs))},
  };
#undef KDFLOW_M1
#undef KDFLOW_M2
  return table;
}

// --- BlockRunner ----------------------------------------------------------------------------

BlockRunner::BlockRunner() : impl_(new Impl) {}
BlockRunner::~BlockRunner() { delete impl_; }
void BlockRunner::set_poison(bool on) { impl_->poison = on; }

std::string BlockRunner::run_block(KernelEntry entry, void** args, const LaunchShape& shape, uint64_t linear) {
  Impl& r = *impl_;
  const unsigned threads = shape.block.x * shape.block.y * shape.block.z;
  if (r.shared.size() < shape.shared_bytes) r.shared.resize(shape.shared_bytes);
  if (r.poison && shape.shared_bytes) std::memset(r.shared.data(), 0xFF, shape.shared_bytes);
  ThreadContext base;
  base.block_dim = shape.block;
  base.grid_dim = shape.grid;
  base.block_idx.x = static_cast<unsigned>(linear % shape.grid.x);
  base.block_idx.y = static_cast<unsigned>((linear / shape.grid.x) % shape.grid.y);
  base.block_idx.z = static_cast<unsigned>(linear / (static_cast<uint64_t>(shape.grid.x) * shape.grid.y));
  base.shared = r.shared.data();
  auto set_thread = [&](ThreadContext& c, unsigned t) {
    c = base;
    c.thread_idx.x = t % shape.block.x;
    c.thread_idx.y = (t / shape.block.x) % shape.block.y;
    c.thread_idx.z = t / (shape.block.x * shape.block.y);
    c.lane = t % 32;
    unsigned warp_threads = std::min(32u, threads - (t / 32) * 32);
    c.live_mask = warp_threads == 32 ? 0xffffffffu : ((1u << warp_threads) - 1u);
  };
  if (shape.tile_w) {
    // A batch of tile_w x tile_h one-thread blocks: one call; blockIdx names the first.
    const uint64_t nx = shape.grid.x / shape.tile_w, ny = shape.grid.y / shape.tile_h;
    base.block_idx.x = static_cast<unsigned>(linear % nx) * shape.tile_w;
    base.block_idx.y = static_cast<unsigned>((linear / nx) % ny) * shape.tile_h;
    base.block_idx.z = static_cast<unsigned>(linear / (nx * ny));
    base.batch = shape.tile_w * shape.tile_h;
  }
  r.trap.clear();
  t_runner = &r;
  set_thread_block(base.block_idx.x, base.block_idx.y, base.block_idx.z, shape.tile_w, shape.tile_h);
  set_thread_stack(own_stack_low());
  if (!shape.fibers) {
    r.in_fibers = false;
    r.contexts.resize(1);
    ThreadContext& c = r.contexts[0];
    t_ctx = &c;
    if (setjmp(r.loop_exit) == 0) {
      if (shape.tile_w) {
        set_thread(c, 0);
        entry(args);
      } else if (shape.block_loop) {
        // Region fission: the kernel loops over the block's threads itself.
        set_thread(c, 0);
        r.private_next = 0;
        r.private_bytes = 0;
        entry(args);
      } else {
        for (unsigned t = 0; t < threads; ++t) {
          set_thread(c, t);
          entry(args);
        }
      }
    }
    t_ctx = nullptr;
    t_runner = nullptr;
    clear_thread_block();
    return r.trap;
  }

  r.in_fibers = true;
  r.abandon = false;
  r.contexts.resize(threads);
  for (int bank = 0; bank < 2; ++bank) {
    r.slots[bank].resize(threads);
    r.slot_generation[bank].assign(threads, ~0ull);
  }
  r.fibers.clear();
  r.fibers.resize(threads);
  r.block = Barrier{threads, 0, 0, 0};
  r.warps.assign((threads + 31) / 32, Barrier{});
  for (unsigned w = 0; w < r.warps.size(); ++w) r.warps[w].live = std::min(32u, threads - w * 32);
  for (unsigned t = 0; t < threads; ++t) {
    set_thread(r.contexts[t], t);
    Fiber& f = r.fibers[t];
    f.self = boost::context::fiber(std::allocator_arg, PoolAllocator{&r.stacks},
                                   [&r, t, entry, args](boost::context::fiber&& caller) {
                                     KDFLOW_FIBER_SWITCH_FINISH(nullptr, &r.scheduler_bottom, &r.scheduler_size);
                                     Fiber& me = r.fibers[t];
                                     me.caller = std::move(caller);
                                     if (setjmp(me.exit) == 0) entry(args);
                                     me.done = true;
                                     r.leave(t);
                                     // This stack ends here: nothing of it to keep.
                                     KDFLOW_FIBER_SWITCH_START(nullptr, r.scheduler_bottom, r.scheduler_size);
                                     return std::move(me.caller);
                                   });
    f.stack_bottom = r.stacks.last_bottom;
    f.stack_size = kStackBytes;
  }
  unsigned live = threads;
  while (live > 0) {
    uint64_t before = r.events;
    unsigned resumed = 0;
    for (unsigned t = 0; t < threads; ++t) {
      Fiber& f = r.fibers[t];
      if (f.done) continue;
      r.current = t;
      t_ctx = &r.contexts[t];
      KDFLOW_FIBER_SWITCH_START(&r.scheduler_fake_stack, f.stack_bottom, f.stack_size);
      set_thread_stack(f.stack_bottom);
      f.self = std::move(f.self).resume();
      set_thread_stack(own_stack_low());
      KDFLOW_FIBER_SWITCH_FINISH(r.scheduler_fake_stack, nullptr, nullptr);
      ++resumed;
      if (f.done) --live;
    }
    if (live > 0 && r.events == before && !r.abandon) {
      // Every live thread is waiting and none could go on: different barriers.
      if (r.trap.empty())
        r.trap = fmt::format("threads of the block wait at different barriers ({} of {} threads at __syncthreads)",
                             r.block.arrived, r.block.live);
      r.abandon = true;
    } else if (!r.trap.empty()) {
      r.abandon = true;  // a trap: the other threads leave at their next wait
    }
  }
  r.fibers.clear();
  t_ctx = nullptr;
  t_runner = nullptr;
  r.in_fibers = false;
  clear_thread_block();
  return r.trap;
}

// --- WorkerPool -------------------------------------------------------------------------------

namespace {

/// Polls `ready` for up to about 200 us (a launch queued right after the last one comes in
/// far less); whether it became true. The caller then sleeps on its condition variable. After
/// the first 20 us each poll yields the core, so that on a busy machine the spinning takes no
/// time from the thread that queues the next launch, or from other processes.
template <typename Ready>
bool spin_until(Ready ready) {
  const auto start = std::chrono::steady_clock::now();
  const auto yield_from = start + std::chrono::microseconds(20), until = start + std::chrono::microseconds(200);
  bool yielding = false;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    if (yielding) {
      sched_yield();
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (yielding || i % 64 == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) return false;
      yielding = now >= yield_from;
    }
  }
}

}  // namespace

WorkerPool::WorkerPool(unsigned threads, bool poison) {
  if (threads == 0) threads = 1;
  current_ = std::make_unique<std::atomic<uint64_t>[]>(threads);
  for (unsigned i = 0; i < threads; ++i) current_[i].store(kIdle);
  for (unsigned i = 0; i < threads; ++i) {
    runners_.push_back(std::make_unique<BlockRunner>());
    runners_.back()->set_poison(poison);
  }
  for (unsigned i = 1; i < threads; ++i) threads_.emplace_back([this, i] { work(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::run_blocks(unsigned worker) {
  BlockRunner& runner = *runners_[worker];
  for (;;) {
    uint64_t b = next_.fetch_add(1);
    if (b >= blocks_ || failed_.load()) return;
    current_[worker].store(b);
    std::string why = runner.run_block(entry_, args_, shape_, b);
    current_[worker].store(kIdle);
    if (!why.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.load() || b < fail_block_) {
        fail_block_ = b;
        fail_text_ = std::move(why);
      }
      failed_.store(true);
    }
  }
}

void WorkerPool::work(unsigned index) {
  // An alternate signal stack, so that guarded_memory.h's reporter runs even on a fault in a
  // fiber's small stack. Without one a fault still kills the process, only without its line.
  (void)prepare_thread_for_faults();
  uint64_t seen = 0, job = 0;
  // A launch this worker takes part in; `job` keeps the word that said so (the launch cannot
  // move on before this worker, counted in its busy_, has finished).
  auto called = [&] {
    job = job_.load();
    return (job >> kJobWorkerBits) != seen && index <= (job & ((uint64_t{1} << kJobWorkerBits) - 1));
  };
  for (;;) {
    if (!spin_until([&] { return stop_.load() || called(); })) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_.load() || called(); });
    }
    if (stop_.load()) return;
    seen = job >> kJobWorkerBits;
    run_blocks(index);
    if (busy_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_all();
    }
  }
}

std::string WorkerPool::run(KernelEntry entry, void** args, const LaunchShape& shape) {
  const uint64_t blocks = items(shape);
  const unsigned helpers = static_cast<unsigned>(std::min<uint64_t>(
      {threads_.size(), blocks ? blocks - 1 : 0, (uint64_t{1} << kJobWorkerBits) - 1}));
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry_ = entry;
    args_ = args;
    shape_ = shape;
    blocks_ = blocks;
    grid_x_.store(shape.grid.x);
    grid_y_.store(shape.grid.y);
    tile_w_.store(shape.tile_w);
    tile_h_.store(shape.tile_h);
    next_.store(0);
    failed_.store(false);
    fail_text_.clear();
    busy_.store(helpers);
    if (helpers) {
      ++generation_;
      job_.store(generation_ << kJobWorkerBits | helpers);
    }
  }
  if (helpers) wake_.notify_all();
  run_blocks(0);
  if (helpers && !spin_until([&] { return busy_.load() == 0; })) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_.load() == 0; });
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load()) return {};
  return fmt::format("{}: {}", blocks_name(shape, fail_block_), fail_text_);
}

uint64_t WorkerPool::items(const LaunchShape& shape) {
  if (shape.tile_w)
    return uint64_t{shape.grid.x / shape.tile_w} * (shape.grid.y / shape.tile_h) * shape.grid.z;
  return static_cast<uint64_t>(shape.grid.x) * shape.grid.y * shape.grid.z;
}

std::string blocks_name(const LaunchShape& shape, uint64_t item) {
  const uint64_t gx = std::max<uint32_t>(shape.grid.x, 1), gy = std::max<uint32_t>(shape.grid.y, 1);
  if (!shape.tile_w) return fmt::format("block ({},{},{})", item % gx, (item / gx) % gy, item / (gx * gy));
  const uint64_t w = shape.tile_w, h = shape.tile_h, nx = std::max<uint64_t>(gx / w, 1), ny = std::max<uint64_t>(gy / h, 1);
  const uint64_t x = item % nx * w, y = (item / nx) % ny * h, z = item / (nx * ny);
  auto range = [](uint64_t a, uint64_t n) { return n > 1 ? fmt::format("{}..{}", a, a + n - 1) : fmt::format("{}", a); };
  return fmt::format("blocks ({},{},{})", range(x, w), range(y, h), z);
}

std::string WorkerPool::running() const {
  LaunchShape shape;  // what blocks_name() needs, from the atomics (any thread may ask)
  shape.grid.x = grid_x_.load(), shape.grid.y = grid_y_.load();
  shape.tile_w = tile_w_.load(), shape.tile_h = tile_h_.load();
  std::string out;
  for (size_t i = 0; i < runners_.size(); ++i) {
    uint64_t b = current_[i].load();
    if (b == kIdle) continue;
    out += (out.empty() ? "" : ", ") + blocks_name(shape, b);
  }
  return out;
}

}  // namespace kdflow::cpu

// guarded_memory.h — replay buffers for the CPU back end, each against PROT_NONE guard pages,
// and the SIGSEGV/SIGBUS reporter that turns a fault in a guard page into one line naming
// the kernel, the launch, the argument, the buffer and the byte offset (Electric Fence and
// compute-sanitizer's memcheck, for kernels compiled to host code). Needs neither clang nor
// CUDA; POSIX (mmap, mprotect, sigaction, sigaltstack) only.
//
// Layout of one buffer (GuardSide::End, the default):
//
//   [guard page][head slack | data ......... | tail slack][guard page]
//                            ^ start, aligned  ^ start + bytes
//
// The start must stay aligned (`align`, 64 by default as TVM's allocator, kAllocAlignment:
// TVM's kernels load float4/half2 vectors through the buffer pointer, which the host code
// compiled from them may do with aligned instructions). So the data ends at the guard page
// only when `bytes` is a multiple of `align`; otherwise tail slack = round_up(bytes, align)
// - bytes (< align) lies between them. Every slack byte is poisoned (kPoisonByte) and
// check_poison() finds a changed one after a launch: writes there are caught late (after the
// kernel), reads not at all. GuardSide::Start (Electric Fence's EF_PROTECT_BELOW) puts the
// start at the front guard instead, so that the first byte before the buffer faults. An
// access farther than one page from the buffer may land in another mapping and is not
// caught (the guard is a near-miss check, not a bounds check on every access).
//
// The fault handler is async-signal-safe: it reads only a fixed registry and launch
// descriptions formatted before the launch, formats integers by hand, write(2)s one line to
// stderr and _exit()s. It runs on an alternate signal stack (sigaltstack), so a fault on a
// small fiber stack, or a stack overflow, still gets its line: each thread that runs kernel
// code calls prepare_thread_for_faults() once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"  // Arg, Footprint
#include "kdflow/support/diag.h"

namespace kdflow::cpu {

/// Exit codes of a process the fault reporter stops (docs/errors.md).
inline constexpr int kGuardKernelDefectExit = 1;  ///< out of its buffer, static footprint unknown: the kernel's defect
inline constexpr int kGuardKdflowBugExit = 70;    ///< out of a buffer kdflow proved in bounds: kdflow's bug
inline constexpr int kWildFaultExit = 70;         ///< a fault during a launch outside every guard page
inline constexpr int kStackOverflowExit = 65;     ///< a launch overflowed a thread's stack (the kernel is too deep)

/// Byte written into every slack byte between a buffer and its guard page.
inline constexpr unsigned char kPoisonByte = 0xA5;

/// Which end of the buffer touches a guard page (the other gets the slack).
enum class GuardSide { End, Start };

/// One buffer of the registry.
struct GuardedBuffer {
  uint32_t id = 0;                ///< the caller's buffer id (the flow's buffer id)
  std::string name;               ///< for messages ("T_dense", "workspace 2")
  unsigned char* data = nullptr;  ///< the buffer's start (aligned to `align`)
  uint64_t bytes = 0;             ///< the size asked for
  uint64_t align = 0;
  GuardSide side = GuardSide::End;
  unsigned char* map = nullptr;  ///< the whole mapping: front guard, pages, back guard
  uint64_t map_bytes = 0;
  uint64_t head_slack = 0;  ///< poisoned bytes between the front guard and `data`
  uint64_t tail_slack = 0;  ///< poisoned bytes between `data + bytes` and the back guard
  std::string label;        ///< preformatted "buffer 5 'T_dense' (1600 bytes)" for the handler
};

/// Where an address falls.
struct GuardedLocation {
  uint32_t slot = 0;  ///< index into GuardedMemory's registry
  uint32_t buffer_id = 0;
  int64_t offset = 0;     ///< byte offset from the buffer's start (negative: before it)
  bool in_guard = false;  ///< in a PROT_NONE guard page
  bool in_slack = false;  ///< in the poisoned slack
};

/// A slack byte found changed by check_poison().
struct PoisonHit {
  uint32_t slot = 0;
  uint32_t buffer_id = 0;
  int64_t offset = 0;  ///< from the buffer's start: negative (head slack) or >= bytes (tail slack)
};

/// The allocator and registry. Allocate every buffer before arming the reporter; the
/// registry has a fixed capacity so that the handler reads it without locks.
class GuardedMemory {
 public:
  explicit GuardedMemory(size_t max_buffers);
  ~GuardedMemory();  ///< unmaps everything; disarms the reporter first if it watches this one
  GuardedMemory(const GuardedMemory&) = delete;
  GuardedMemory& operator=(const GuardedMemory&) = delete;

  /// A new zeroed buffer of `bytes` (0 allowed: a pointer right at the guard) aligned to
  /// `align` (a power of two, at most the page size). Errors (ExitCode::Software): the
  /// registry is full, mmap/mprotect fail (ENOMEM, vm.max_map_count), a bad alignment,
  /// a size that overflows. Not async-signal-safe; not while a fault could be reported.
  Expected<void*> allocate(uint32_t buffer_id, const std::string& name, uint64_t bytes, uint64_t align = 64,
                           GuardSide side = GuardSide::End);

  /// Which buffer (and where in or around it) `addr` falls, if any. Async-signal-safe.
  std::optional<GuardedLocation> locate(const void* addr) const;
  /// The first poisoned slack byte that changed (buffers in allocation order), if any.
  std::optional<PoisonHit> check_poison() const;
  /// Re-poisons every slack (after a hit was reported, to go on).
  void repoison();

  size_t size() const { return count_.load(std::memory_order_acquire); }
  const GuardedBuffer& buffer(size_t slot) const { return slots_[slot]; }
  /// The slot of buffer `id`, or -1.
  long slot_of(uint32_t buffer_id) const;
  static uint64_t page_size();

 private:
  std::vector<GuardedBuffer> slots_;  // reserved up front, never reallocated
  std::atomic<size_t> count_{0};
};

/// What is known of one kernel argument, for the fault line.
struct LaunchArgument {
  unsigned index = 0;                 ///< position in the kernel's parameter list
  std::string name;                   ///< the parameter's name ("" if unknown)
  std::optional<uint32_t> buffer_id;  ///< the buffer it points into; nullopt for a scalar
  uint64_t offset = 0;                ///< byte offset of the pointer within its buffer
  /// The static footprint (relative to the pointer) proves every access in bounds: an
  /// access outside the buffer is then kdflow's bug. Exact, or a superset (which also
  /// proves bounds); unknown for data-dependent indices (gather, sort: the dynamic check).
  enum class Footprint { Unknown, Superset, Exact } footprint = Footprint::Unknown;
  uint64_t footprint_lo = 0, footprint_hi = 0;  ///< [lo, hi) bytes from the pointer, when known
};

/// The LaunchArgument for the IR's argument `arg` (position `index`, parameter `name`) of
/// a launch: a Buffer argument gets its buffer and offset, and its footprint counts as
/// proven only when it is known (no `unknown` reason) and [offset + lo, offset + hi) lies
/// inside the buffer's `buffer_bytes` (an out-of-bounds footprint let through with
/// --allow-oob proves nothing). Other kinds: a scalar (no buffer).
LaunchArgument launch_argument(unsigned index, const std::string& name, const Arg& arg, uint64_t buffer_bytes);

/// The launch a kernel is running: set before the kernel runs, read by the handler.
struct LaunchContext {
  std::string where;          ///< diagnostic prefix, e.g. "flow.json:/launches/12" ("kdflow replay" if empty)
  std::string kernel;         ///< the kernel's name
  uint64_t kernel_id = 0;     ///< the flow's kernel id
  uint64_t launch_index = 0;  ///< the launch's index in the run
  std::vector<LaunchArgument> args;
};

/// A LaunchContext formatted for the handler (everything the line needs, as text).
class PreparedLaunch {
 public:
  explicit PreparedLaunch(LaunchContext ctx);
  const LaunchContext& context() const { return ctx_; }
  const std::string& prefix() const { return prefix_; }  ///< "WHERE: error: "
  const std::string& kernel() const { return kernel_; }  ///< "kernel K 'NAME' (launch L)"
  /// The line the fault handler writes for an access at `loc` (the same code builds it;
  /// this copy is for a poison hit found after the launch, and for tests). `write` is 1
  /// for a write, 0 a read, -1 unknown. No trailing newline.
  std::string describe(const GuardedMemory& mem, const GuardedLocation& loc, int write) const;
  /// The exit code for that access: kGuardKdflowBugExit when every argument pointing into
  /// the buffer has a static footprint that proves it in bounds, else kGuardKernelDefectExit.
  int exit_code_for(const GuardedLocation& loc) const;

 private:
  friend class FaultLine;  // guarded_memory.cpp: builds the line from these, async-signal-safe
  struct Arg {
    std::string text;  ///< "argument J 'p'"
    uint32_t buffer = 0;
    uint64_t offset = 0;
    LaunchArgument::Footprint footprint = LaunchArgument::Footprint::Unknown;
    std::string footprint_text;  ///< "[lo, hi), exact"
  };
  std::string prefix_;  ///< "WHERE: error: "
  std::string kernel_;  ///< "kernel K 'NAME' (launch L)"
  std::vector<Arg> pointer_args_;
  LaunchContext ctx_;
};

/// Arms the process-wide SIGSEGV/SIGBUS reporter for `mem` (one at a time; the previous
/// handlers are kept and called for faults that are not the reporter's: no launch running
/// and no guard page hit). Also gives the calling thread an alternate signal stack.
/// Errors: ExitCode::Software (sigaction/sigaltstack failed).
Status arm_fault_reporter(const GuardedMemory* mem);
/// Restores the previous handlers. The alternate stacks stay until their threads end.
void disarm_fault_reporter();
/// Gives the calling thread an alternate signal stack (once per thread; freed at thread
/// exit). Every thread that runs kernel code must call it (fibers run on their threads).
Status prepare_thread_for_faults();

/// The launch being run by every thread (nullptr: none). The PreparedLaunch must outlive
/// the launch. Concurrent launches (dag mode) set a per-thread one instead.
void set_current_launch(const PreparedLaunch* launch);
/// The launch the calling thread runs; overrides set_current_launch for this thread.
void set_thread_launch(const PreparedLaunch* launch);

/// The lowest usable byte of the stack the calling thread runs kernel code on (a fiber's, or
/// the thread's own), so that a fault just below it is reported as a stack overflow.
void set_thread_stack(const void* lowest);
/// The block the calling thread runs (named in a fault's line), until clear_thread_block();
/// `w` x `h` blocks from (x,y,z) where it runs a batch of blocks at once (region_fission.h).
void set_thread_block(uint32_t x, uint32_t y, uint32_t z, uint32_t w = 1, uint32_t h = 1);
void clear_thread_block();

/// RAII: set_current_launch(p) for a scope, nullptr after.
class CurrentLaunchScope {
 public:
  explicit CurrentLaunchScope(const PreparedLaunch* p) { set_current_launch(p); }
  ~CurrentLaunchScope() { set_current_launch(nullptr); }
  CurrentLaunchScope(const CurrentLaunchScope&) = delete;
  CurrentLaunchScope& operator=(const CurrentLaunchScope&) = delete;
};

}  // namespace kdflow::cpu

// guarded_memory.cpp — guard-page allocator, registry and fault reporter (see guarded_memory.h).
#include "guarded_memory.h"

#include "kernel_safety.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kdflow::cpu {

namespace {

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

bool round_up(uint64_t v, uint64_t to, uint64_t* out) {
  uint64_t s;
  if (!checked_add(v, to - 1, &s)) return false;
  *out = s / to * to;
  return true;
}

/// A fixed buffer the handler formats into: no allocation, truncates at capacity.
class LineBuf {
 public:
  void put(const char* s, size_t n) {
    for (size_t i = 0; i < n && len_ < sizeof(d_) - 1; ++i) d_[len_++] = s[i];
  }
  void put(const char* s) { put(s, strlen(s)); }
  void put(const std::string& s) { put(s.data(), s.size()); }
  void num(uint64_t v) {
    char t[24];
    int n = 0;
    do {
      t[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    while (n) put(&t[--n], 1);
  }
  void snum(int64_t v) {
    if (v < 0) {
      put("-");
      num(static_cast<uint64_t>(0) - static_cast<uint64_t>(v));
    } else {
      num(static_cast<uint64_t>(v));
    }
  }
  void hex(uint64_t v) {
    put("0x");
    char t[16];
    int n = 0;
    do {
      t[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v);
    while (n) put(&t[--n], 1);
  }
  const char* data() const { return d_; }
  size_t size() const { return len_; }

 private:
  char d_[2048];
  size_t len_ = 0;
};

std::atomic<const GuardedMemory*> g_mem{nullptr};
std::atomic<const PreparedLaunch*> g_launch{nullptr};
// initial-exec: reading it in the handler never allocates (no lazy TLS block).
__attribute__((tls_model("initial-exec"))) thread_local const PreparedLaunch* t_launch = nullptr;
// Where the calling thread runs kernel code: its stack's lowest usable byte and the block.
struct Position {
  uintptr_t stack_low = 0;  // 0: unknown
  uint32_t block[3] = {0, 0, 0};
  uint32_t last[3] = {0, 0, 0};  // a batch of blocks (block_batch.h): its last; else = block
  bool in_block = false;
};
__attribute__((tls_model("initial-exec"))) thread_local Position t_position;
constexpr uintptr_t kOverflowWindow = uintptr_t(1) << 20;  // below a stack: its guard (and Linux's gap)

struct sigaction g_old_segv, g_old_bus;
std::atomic<bool> g_reporting{false};  // one line per process: the first faulting thread writes it
bool g_armed = false;

/// One alternate signal stack per thread, unmapped when the thread ends.
struct AltStack {
  void* mem = nullptr;
  size_t bytes = 0;
  ~AltStack() {
    if (!mem) return;
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
    munmap(mem, bytes);
  }
};
thread_local AltStack t_altstack;

void write_all(const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(2, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

// ---------------------------------------------------------------------------- GuardedMemory

uint64_t GuardedMemory::page_size() {
  static const uint64_t p = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return p;
}

GuardedMemory::GuardedMemory(size_t max_buffers) { slots_.resize(max_buffers); }

GuardedMemory::~GuardedMemory() {
  if (g_mem.load() == this) disarm_fault_reporter();
  for (size_t i = 0; i < size(); ++i)
    if (slots_[i].map) munmap(slots_[i].map, slots_[i].map_bytes);
}

Expected<void*> GuardedMemory::allocate(uint32_t buffer_id, const std::string& name, uint64_t bytes, uint64_t align,
                                        GuardSide side) {
  const uint64_t page = page_size();
  auto fail = [&](const std::string& why) {
    return Error{"kdflow replay: error: guarded allocation of buffer " + std::to_string(buffer_id) + " '" + name +
                     "' (" + std::to_string(bytes) + " bytes): " + why,
                 ExitCode::Software};
  };
  size_t n = size();
  if (n >= slots_.size()) return fail("the registry is full (" + std::to_string(slots_.size()) + " buffers)");
  if (!is_pow2(align) || align > page)
    return fail("alignment " + std::to_string(align) + " is not a power of two up to the page size");
  uint64_t rounded = 0, span = 0, map_bytes = 0;
  if (!round_up(bytes, align, &rounded) || !round_up(rounded, page, &span) ||
      !checked_add(span, 2 * page, &map_bytes) || map_bytes > static_cast<uint64_t>(SIZE_MAX))
    return fail("the size overflows");
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return fail(std::string("mmap: ") + strerror(errno));
  auto* map = static_cast<unsigned char*>(m);
  if (mprotect(map, page, PROT_NONE) != 0 || mprotect(map + page + span, page, PROT_NONE) != 0) {
    int e = errno;
    munmap(map, map_bytes);
    return fail(std::string("mprotect: ") + strerror(e) + " (vm.max_map_count?)");
  }
  GuardedBuffer& b = slots_[n];
  b.id = buffer_id;
  b.name = name;
  b.bytes = bytes;
  b.align = align;
  b.side = side;
  b.map = map;
  b.map_bytes = map_bytes;
  if (side == GuardSide::End) {
    b.data = map + page + (span - rounded);
    b.head_slack = span - rounded;
    b.tail_slack = rounded - bytes;
  } else {
    b.data = map + page;
    b.head_slack = 0;
    b.tail_slack = span - bytes;
  }
  b.label = "buffer " + std::to_string(buffer_id) + " '" + name + "' (" + std::to_string(bytes) + " bytes)";
  memset(map + page, kPoisonByte, b.head_slack);
  memset(b.data + bytes, kPoisonByte, b.tail_slack);
  count_.store(n + 1, std::memory_order_release);
  return static_cast<void*>(b.data);
}

std::optional<GuardedLocation> GuardedMemory::locate(const void* addr) const {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uint64_t page = page_size();
  size_t n = count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    const GuardedBuffer& b = slots_[i];
    const auto lo = reinterpret_cast<uintptr_t>(b.map);
    if (a < lo || a - lo >= b.map_bytes) continue;
    GuardedLocation l;
    l.slot = static_cast<uint32_t>(i);
    l.buffer_id = b.id;
    l.offset = static_cast<int64_t>(a - reinterpret_cast<uintptr_t>(b.data));
    l.in_guard = a - lo < page || a - lo >= b.map_bytes - page;
    l.in_slack = !l.in_guard && (l.offset < 0 || static_cast<uint64_t>(l.offset) >= b.bytes);
    return l;
  }
  return std::nullopt;
}

std::optional<PoisonHit> GuardedMemory::check_poison() const {
  const uint64_t page = page_size();
  size_t n = size();
  for (size_t i = 0; i < n; ++i) {
    const GuardedBuffer& b = slots_[i];
    const unsigned char* head = b.map + page;
    for (uint64_t k = 0; k < b.head_slack; ++k)
      if (head[k] != kPoisonByte)
        return PoisonHit{static_cast<uint32_t>(i), b.id, static_cast<int64_t>(k) - static_cast<int64_t>(b.head_slack)};
    const unsigned char* tail = b.data + b.bytes;
    for (uint64_t k = 0; k < b.tail_slack; ++k)
      if (tail[k] != kPoisonByte) return PoisonHit{static_cast<uint32_t>(i), b.id, static_cast<int64_t>(b.bytes + k)};
  }
  return std::nullopt;
}

void GuardedMemory::repoison() {
  const uint64_t page = page_size();
  for (size_t i = 0; i < size(); ++i) {
    GuardedBuffer& b = slots_[i];
    memset(b.map + page, kPoisonByte, b.head_slack);
    memset(b.data + b.bytes, kPoisonByte, b.tail_slack);
  }
}

long GuardedMemory::slot_of(uint32_t buffer_id) const {
  for (size_t i = 0; i < size(); ++i)
    if (slots_[i].id == buffer_id) return static_cast<long>(i);
  return -1;
}

// ---------------------------------------------------------------------------- the line

/// Builds the one line for an access (async-signal-safe: reads prepared strings, formats
/// integers by hand). Shared by the handler and PreparedLaunch::describe.
class FaultLine {
 public:
  /// The argument the line names: the first pointing into the buffer whose footprint is not
  /// proven (the likely culprit), else the first pointing into it; -1 if none does.
  static long culprit(const PreparedLaunch& p, uint32_t buffer_id, bool* all_proven) {
    long first = -1, unproven = -1;
    for (size_t i = 0; i < p.pointer_args_.size(); ++i) {
      const PreparedLaunch::Arg& a = p.pointer_args_[i];
      if (a.buffer != buffer_id) continue;
      if (first < 0) first = static_cast<long>(i);
      if (unproven < 0 && a.footprint == LaunchArgument::Footprint::Unknown) unproven = static_cast<long>(i);
    }
    *all_proven = first >= 0 && unproven < 0;
    return unproven >= 0 ? unproven : first;
  }

  static int exit_code(const PreparedLaunch& p, const GuardedLocation& loc) {
    bool proven = false;
    culprit(p, loc.buffer_id, &proven);
    return proven ? kGuardKdflowBugExit : kGuardKernelDefectExit;
  }

  static void block(LineBuf& out) {
    if (!t_position.in_block) return;
    const bool batch = t_position.last[0] != t_position.block[0] || t_position.last[1] != t_position.block[1] ||
                       t_position.last[2] != t_position.block[2];
    out.put(batch ? " in one of blocks (" : " in block (");
    for (int d = 0; d < 3; ++d) {
      if (d) out.put(",");
      out.num(t_position.block[d]);
      if (t_position.last[d] != t_position.block[d]) {
        out.put("..");
        out.num(t_position.last[d]);
      }
    }
    out.put(")");
  }

  /// Whether `addr` lies just below the calling thread's stack (its guard page; the JIT
  /// compiles with stack-clash protection, so a deep frame probes every page on the way).
  static bool stack_overflow(const void* addr) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr), low = t_position.stack_low;
    return low != 0 && a < low && a >= (low > kOverflowWindow ? low - kOverflowWindow : 0);
  }

  /// A fault during the launch outside every guard page.
  static void wild(LineBuf& out, const PreparedLaunch& p, int sig, const void* addr) {
    out.put(p.prefix_);
    out.put(p.kernel_);
    if (stack_overflow(addr)) {
      out.put(" overflowed its stack");
      block(out);
      out.put(" (");
      out.num(kCpuThreadStackBytes / 1024);
      out.put(
          " KiB per CUDA thread on the CPU back end): its local variables or calls go deeper than the static check "
          "bounded");
      return;
    }
    out.put(sig == SIGBUS ? " faulted (SIGBUS) at address " : " faulted (SIGSEGV) at address ");
    out.hex(reinterpret_cast<uintptr_t>(addr));
    block(out);
    out.put(
        ", outside every replay buffer and its guard pages (a wild pointer in the kernel, "
        "or a kdflow bug)");
  }

  static void build(LineBuf& out, const PreparedLaunch& p, const GuardedMemory& mem, const GuardedLocation& loc,
                    int write) {
    const GuardedBuffer& b = mem.buffer(loc.slot);
    out.put(p.prefix_);
    out.put("guard: ");
    out.put(p.kernel_);
    out.put(write == 1 ? " wrote byte " : write == 0 ? " read byte " : " touched byte ");
    out.snum(loc.offset);
    out.put(" of ");
    out.put(b.label);
    out.put(", ");
    if (loc.offset < 0) {
      out.num(static_cast<uint64_t>(-loc.offset));
      out.put(" bytes before its start");
    } else {
      out.num(static_cast<uint64_t>(loc.offset) - b.bytes);
      out.put(" bytes past its end");
    }
    if (loc.in_slack) out.put(" (in the poisoned slack, found after the launch)");
    bool proven = false;
    long j = culprit(p, loc.buffer_id, &proven);
    if (j < 0) {
      out.put(", through no argument of this launch (a pointer that left its own buffer): a defect of the kernel");
      return;
    }
    const PreparedLaunch::Arg& a = p.pointer_args_[static_cast<size_t>(j)];
    out.put(", through ");
    out.put(a.text);
    out.put(" (byte ");
    out.snum(loc.offset - static_cast<int64_t>(a.offset));
    out.put(" from its pointer)");
    if (proven) {
      out.put(": this is a kdflow bug, not the kernel's: the static footprint ");
      out.put(a.footprint_text);
      out.put(" proved this argument in bounds (please report it)");
    } else {
      out.put(": a defect of the kernel (its static footprint is unknown; this is the dynamic check)");
    }
  }
};

PreparedLaunch::PreparedLaunch(LaunchContext ctx) : ctx_(std::move(ctx)) {
  prefix_ = (ctx_.where.empty() ? std::string("kdflow replay") : ctx_.where) + ": error: ";
  kernel_ = "kernel " + std::to_string(ctx_.kernel_id) + " '" + ctx_.kernel + "' (launch " +
            std::to_string(ctx_.launch_index) + ")";
  for (const LaunchArgument& la : ctx_.args) {
    if (!la.buffer_id) continue;
    Arg a;
    a.text = "argument " + std::to_string(la.index) + (la.name.empty() ? "" : " '" + la.name + "'");
    a.buffer = *la.buffer_id;
    a.offset = la.offset;
    a.footprint = la.footprint;
    if (la.footprint != LaunchArgument::Footprint::Unknown)
      a.footprint_text = "[" + std::to_string(la.footprint_lo) + ", " + std::to_string(la.footprint_hi) + ") (" +
                         (la.footprint == LaunchArgument::Footprint::Exact ? "exact" : "a superset") + ")";
    pointer_args_.push_back(std::move(a));
  }
}

LaunchArgument launch_argument(unsigned index, const std::string& name, const Arg& arg, uint64_t buffer_bytes) {
  LaunchArgument a;
  a.index = index;
  a.name = name;
  if (arg.kind != Arg::Kind::Buffer || arg.buffer < 0) return a;
  a.buffer_id = static_cast<uint32_t>(arg.buffer);
  a.offset = arg.offset > 0 ? static_cast<uint64_t>(arg.offset) : 0;
  if (!arg.footprint || !arg.footprint->unknown.empty() || arg.offset < 0) return a;
  const Footprint& f = *arg.footprint;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& r : {f.read, f.write})
    if (r) {
      lo = std::min(lo, (*r)[0]);
      hi = std::max(hi, (*r)[1]);
    }
  if (lo > hi) lo = hi = 0;  // touches nothing through it
  // Proven only if [offset + lo, offset + hi) lies inside the buffer.
  if (lo < 0 || hi < lo) return a;
  uint64_t end = 0;
  if (!checked_add(a.offset, static_cast<uint64_t>(hi), &end) || end > buffer_bytes) return a;
  a.footprint = f.exact ? LaunchArgument::Footprint::Exact : LaunchArgument::Footprint::Superset;
  a.footprint_lo = static_cast<uint64_t>(lo);
  a.footprint_hi = static_cast<uint64_t>(hi);
  return a;
}

std::string PreparedLaunch::describe(const GuardedMemory& mem, const GuardedLocation& loc, int write) const {
  LineBuf b;
  FaultLine::build(b, *this, mem, loc, write);
  return std::string(b.data(), b.size());
}

int PreparedLaunch::exit_code_for(const GuardedLocation& loc) const { return FaultLine::exit_code(*this, loc); }

// ---------------------------------------------------------------------------- the handler

namespace {

/// 1 write, 0 read, -1 unknown (x86-64: the page-fault error code's W bit).
int access_kind(void* uctx) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(uctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
  (void)uctx;
  return -1;
#endif
}

void chain(int sig, siginfo_t* info, void* uctx) {
  const struct sigaction& old = sig == SIGBUS ? g_old_bus : g_old_segv;
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction) {
    old.sa_sigaction(sig, info, uctx);
    return;
  }
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler) {
    old.sa_handler(sig);
    return;
  }
  // Default action: reinstall it and return; the faulting instruction runs again and the
  // process dies of the signal as it would have without kdflow.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
  int saved_errno = errno;
  const GuardedMemory* mem = g_mem.load(std::memory_order_acquire);
  const PreparedLaunch* launch = t_launch ? t_launch : g_launch.load(std::memory_order_acquire);
  std::optional<GuardedLocation> loc;
  if (mem) loc = mem->locate(info->si_addr);
  bool ours = (loc && loc->in_guard) || launch;
  if (ours && g_reporting.exchange(true)) {
    // Another thread faulted first and is writing the one line: wait for its _exit.
    for (;;) pause();
  }
  LineBuf line;
  int code = 0;
  if (loc && loc->in_guard && launch) {
    FaultLine::build(line, *launch, *mem, *loc, access_kind(uctx));
    code = FaultLine::exit_code(*launch, *loc);
  } else if (loc && loc->in_guard) {
    line.put("kdflow replay: error: guard: a fault outside any kernel launch at byte ");
    line.snum(loc->offset);
    line.put(" of ");
    line.put(mem->buffer(loc->slot).label);
    line.put(": this is a kdflow bug (please report it)");
    code = kGuardKdflowBugExit;
  } else if (launch) {
    FaultLine::wild(line, *launch, sig, info->si_addr);
    code = FaultLine::stack_overflow(info->si_addr) ? kStackOverflowExit : kWildFaultExit;
  } else {
    errno = saved_errno;
    chain(sig, info, uctx);
    return;
  }
  line.put("\n");
  write_all(line.data(), line.size());
  _exit(code);
}

}  // namespace

Status prepare_thread_for_faults() {
  if (t_altstack.mem) return Status::ok();
  size_t bytes = 64 * 1024;
  if (static_cast<size_t>(SIGSTKSZ) > bytes) bytes = static_cast<size_t>(SIGSTKSZ);
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return Error{std::string("kdflow replay: error: alternate signal stack: mmap: ") + strerror(errno),
                 ExitCode::Software};
  stack_t ss{};
  ss.ss_sp = m;
  ss.ss_size = bytes;
  if (sigaltstack(&ss, nullptr) != 0) {
    int e = errno;
    munmap(m, bytes);
    return Error{std::string("kdflow replay: error: sigaltstack: ") + strerror(e), ExitCode::Software};
  }
  t_altstack.mem = m;
  t_altstack.bytes = bytes;
  return Status::ok();
}

Status arm_fault_reporter(const GuardedMemory* mem) {
  if (Status s = prepare_thread_for_faults(); !s) return s;
  g_mem.store(mem, std::memory_order_release);
  if (g_armed) return Status::ok();
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;  // a fault inside the handler kills the process (blocked)
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_old_segv) != 0 || sigaction(SIGBUS, &sa, &g_old_bus) != 0)
    return Error{std::string("kdflow replay: error: sigaction: ") + strerror(errno), ExitCode::Software};
  g_armed = true;
  return Status::ok();
}

void disarm_fault_reporter() {
  g_mem.store(nullptr, std::memory_order_release);
  if (!g_armed) return;
  sigaction(SIGSEGV, &g_old_segv, nullptr);
  sigaction(SIGBUS, &g_old_bus, nullptr);
  g_armed = false;
}

void set_current_launch(const PreparedLaunch* launch) { g_launch.store(launch, std::memory_order_release); }

void set_thread_launch(const PreparedLaunch* launch) { t_launch = launch; }

void set_thread_stack(const void* lowest) { t_position.stack_low = reinterpret_cast<uintptr_t>(lowest); }

void set_thread_block(uint32_t x, uint32_t y, uint32_t z, uint32_t w, uint32_t h) {
  t_position.block[0] = x, t_position.block[1] = y, t_position.block[2] = z;
  t_position.last[0] = x + (w ? w - 1 : 0), t_position.last[1] = y + (h ? h - 1 : 0), t_position.last[2] = z;
  t_position.in_block = true;
}

void clear_thread_block() { t_position.in_block = false; }

}  // namespace kdflow::cpu

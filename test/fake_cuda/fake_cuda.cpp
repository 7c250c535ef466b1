// fake_cuda.cpp — a stand-in for libcuda.so.1 for the replay tests: the driver entry points
// kdflow's replay engine uses, on host memory. Loaded through KDFLOW_CUDA_LIBRARY.
//
// Memory is real (malloc'd, zero-filled) behind fake device addresses, so copies and memsets
// work and out-of-range accesses fail. Kernels do not run: each launch is recorded. Every
// call appends one line to the file named by $KDFLOW_FAKE_CUDA_LOG:
//
//   <call> key=value ... -> <CUresult> [key=value ...]
//
// cuModuleGetFunction finds a kernel as the driver does: in a PTX image by its .entry, in a
// cubin or a fatbin's ELF images by its function symbol (ELF .symtab); any
// other name is CUDA_ERROR_NOT_FOUND. Its log line names the module; cuMemcpyHtoD's carries
// the FNV-1a hash of the bytes copied.
//
// Launch lines carry the kernel name, grid, block, shared memory and the packed parameter
// bytes in hex; when the module was loaded from PTX, the fake also knows each kernel's
// parameter list (".entry name(.param .u64 ..., .param .u32 ...)"), rejects a parameter
// buffer of the wrong size as the real driver does, and decodes it: pointers as
// a<allocation index>+<offset>, others as u32:/u64:/f32:... values.
//
// Other knobs (environment, read at each call):
//   KDFLOW_FAKE_CUDA_REJECT_BINARY=1   cubin/fatbin images fail with CUDA_ERROR_NO_BINARY_FOR_GPU
//   KDFLOW_FAKE_CUDA_NO_DEVICE=1       cuInit fails with CUDA_ERROR_NO_DEVICE
//   KDFLOW_FAKE_CUDA_NO_PROC_ADDRESS=1 cuGetProcAddress finds nothing (tests the dlsym fallback)
//   KDFLOW_FAKE_CUDA_SCRIBBLE=name@N   launching kernel `name` writes 4 zero bytes at N bytes
//                                      past its first pointer parameter (a buffer overrun)
//   KDFLOW_FAKE_CUDA_REJECT_PTX=218|222 PTX images fail with that error (INVALID_PTX /
//                                      UNSUPPORTED_PTX_VERSION)
//   KDFLOW_FAKE_CUDA_STATIC_SMEM=name=B[,name=B]  kernel `name` has B bytes of static shared
//                                      memory (cuFuncGetAttribute(SHARED_SIZE_BYTES) says so)
//   KDFLOW_FAKE_CUDA_HANG=name         kernel `name` never finishes: its stream never drains
//   KDFLOW_FAKE_CUDA_HANG_S=S          how long a blocking wait on hung work blocks before the
//                                      fake gives up with CUDA_ERROR_LAUNCH_TIMEOUT (default 20;
//                                      a real driver never returns)
//   KDFLOW_FAKE_CUDA_FAULT=name@N      the Nth execution of `name` in a context faults: a sticky
//                                      CUDA_ERROR_ILLEGAL_ADDRESS that every later call returns
//                                      until the process ends (cuda.h: "the process must be
//                                      terminated and relaunched"): releasing or creating a
//                                      context does not clear it; only kdflow_fake_cuda_reset does
//                                      (the tests' stand-in for a new process)
//   KDFLOW_FAKE_CUDA_DURATION=name=US[,name=US]  kernel `name` (`*`: every kernel) takes US µs
//                                      of device time (default 10)
//   KDFLOW_FAKE_CUDA_LAUNCH_US=US      each cuLaunchKernel costs the host US µs (default 0)
//   KDFLOW_FAKE_CUDA_SERIALISE=1       cuLaunchKernel returns only once the kernel has run, as
//                                      under ncu: a launch behind a closed gate waits (real
//                                      time) for the word to be written; after 20 s it fails
//                                      with CUDA_ERROR_LAUNCH_TIMEOUT (ncu itself hangs)
//   KDFLOW_FAKE_CUDA_TEARDOWN_BLOCKS=1 at process exit (static destructors), with a hung kernel,
//                                      block for KDFLOW_FAKE_CUDA_HANG_S as libcublas's static
//                                      runtime does when its teardown synchronises a hung device
//
// The clocks honour stream order: a host clock (advanced by launches) and one per stream;
// work starts at max(its stream's clock, the host clock when it was queued) — an idle stream
// starts a kernel when the host gets to it — and an event's time is when the stream reaches
// it. cuStreamWaitValue32_v2 (GEQ) on a host-pinned word (cuMemHostAlloc with DEVICEMAP,
// cuMemHostGetDevicePointer_v2) holds the stream's later work until the word is written:
// the fake looks at the word at each driver call and then runs what was held, in order.
//   KDFLOW_FAKE_CUDA_SLOW_MS=name=MS   kernel `name` also takes MS ms of real time: events
//                                      recorded after it are not ready until then
//   KDFLOW_FAKE_CUDA_JIT_MS=MS         cuModuleLoadDataEx takes MS ms of real time (a slow JIT)
//   KDFLOW_FAKE_CUDA_NO_CLOCK=1        cuDeviceGetAttribute(CLOCK_RATE) reports 0
//   KDFLOW_FAKE_CUDA_TOTAL_MEM=BYTES   the device's memory (default 80 GiB): cuMemAlloc beyond
//                                      what is free returns CUDA_ERROR_OUT_OF_MEMORY, never throws
//   KDFLOW_FAKE_CUDA_SEED=N            the seed of the random topological order in which an
//                                      explicit graph's nodes run (default: random; logged)
//
// Explicit graphs (cuGraphCreate) run their nodes in a random valid topological order, not
// the order they were added in. Host work that names a workspace ("ws=0x...+BYTES", the fake
// cuBLAS) in two child-graph nodes that no path orders, with overlapping ranges, fails the
// launch (cublas_api.h: a workspace must not be used by concurrently running work).
//
// During stream capture (global mode) the calls the real driver refuses fail with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture (cuStreamEndCapture then
// returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED): cuMemAlloc, synchronous copies and
// memsets, cuCtxSynchronize, cuEventQuery and cuEventSynchronize.
//
// Stream ordering is modelled as CUDA 13 defines it, as strictly as a real driver may behave:
// cuMemcpyHtoD from pageable memory and cuMemsetD8 go on the legacy NULL stream and may
// complete after they return; the fake defers them until something orders them: a
// cuCtxSynchronize, a synchronous cuMemcpyDtoH, or work on the NULL stream or on a blocking
// stream (created without CU_STREAM_NON_BLOCKING). A kernel launched on a non-blocking stream
// runs *before* pending NULL-stream work lands (the launch line says racing=N: the pending
// operations that write an allocation its parameters point into), so it sees
// stale memory and deferred writes land on top of what it wrote.
//
// Host work for the fake cuBLAS (test/fake_cublas): two exported functions that are not
// driver entry points. kdflow_fake_cuda_host_pointer(p, n) gives the host bytes behind the
// device range [p, p + n) when it lies inside one allocation (else null);
// kdflow_fake_cuda_enqueue(stream, what, fn, arg) queues fn(arg) on a stream as the driver
// would queue a kernel: run now (in stream order) or, while the stream is being captured,
// recorded into the graph and run at each launch of it. cuGraphAddChildGraphNode embeds a
// captured graph (with its host work) in a cuGraphCreate'd one.
//
// Threads and devices: every entry point is thread-safe (one lock). Each thread has its own
// current context (cuCtxSetCurrent, cuCtxCreate), and the calls that work in it (allocation,
// copies, memset, module load, streams, events, launches, cuCtxSynchronize) fail with
// CUDA_ERROR_INVALID_CONTEXT on a thread without a live one, as the driver's do. Log lines of
// every thread but the first to log end with " thread=N" (N in order of first line).
//   KDFLOW_FAKE_CUDA_DEVICES=N         N devices (default 1), each with its own primary context
//                                      (0xc0 + 0x100 d); memory belongs to the device of the
//                                      context that allocated it, and a launch whose pointer
//                                      parameter (PTX-decoded) lies in another device's memory
//                                      fails with CUDA_ERROR_ILLEGAL_ADDRESS (no peer access).
//                                      Other state (clocks, faults, hangs) is shared by them.
//
// Dynamic shared memory follows the driver's rules: a kernel may use at most
// 48 KiB − static of dynamic shared memory unless CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
// was raised; raising it beyond the device's opt-in maximum − static fails.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <algorithm>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <chrono>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;

constexpr CUresult kSuccess = 0, kInvalidValue = 1, kInvalidDevice = 101, kNoDevice = 100, kInvalidHandle = 400,
                   kNotFound = 500, kNoBinary = 209, kInvalidImage = 200, kNotReady = 600, kIllegalAddress = 700,
                   kLaunchTimeout = 702, kOutOfMemory = 2, kCaptureUnsupported = 900,
                   kCaptureInvalidated = 901, kInvalidContext = 201;
constexpr unsigned long long kDefaultTotalMem = 80ull << 30;
constexpr int kDefaultSmem = 48 * 1024, kOptinSmem = 232448;

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

/// Every entry point holds this while it runs: the driver is thread-safe, and so is the fake
/// (a sharded replay drives one rank per thread). Recursive: entry points call each other,
/// and host work queued by the fake cuBLAS runs inside a driver call.
std::recursive_mutex& api_mutex() {
  static std::recursive_mutex m;
  return m;
}
#define FAKE_ENTRY std::lock_guard<std::recursive_mutex> fake_entry_lock_(api_mutex())

/// The threads that called the fake, numbered in the order of their first log line: lines of
/// any thread but the first end with " thread=N", so a test can split a log by thread.
thread_local int t_thread = -1;
int g_threads = 0;

void vlog_line(const char* fmt, va_list ap) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  const char* path = std::getenv("KDFLOW_FAKE_CUDA_LOG");
  if (!path || !*path) return;
  FILE* f = std::fopen(path, "a");
  if (!f) return;
  if (t_thread < 0) t_thread = g_threads++;
  std::vfprintf(f, fmt, ap);
  if (t_thread > 0) std::fprintf(f, " thread=%d", t_thread);
  std::fputc('\n', f);
  std::fclose(f);
}

void log_line(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog_line(fmt, ap);
  va_end(ap);
}

/// The devices (KDFLOW_FAKE_CUDA_DEVICES, default 1; none with KDFLOW_FAKE_CUDA_NO_DEVICE).
int device_count() {
  if (env_on("KDFLOW_FAKE_CUDA_NO_DEVICE")) return 0;
  const char* v = std::getenv("KDFLOW_FAKE_CUDA_DEVICES");
  int n = v && *v ? std::atoi(v) : 1;
  return n < 1 ? 1 : n > 16 ? 16 : n;
}

/// Contexts: device d's primary context is 0xc0 + 0x100 d, a created one 0xc1 + 0x100 d. Each
/// thread has its own current context (cuCtxSetCurrent), as the driver keeps it: the calls
/// that work in the current context fail with CUDA_ERROR_INVALID_CONTEXT on a thread with
/// none, or with one that was destroyed.
uintptr_t primary_context(int dev) { return 0xc0u + 0x100u * static_cast<unsigned>(dev); }
uintptr_t created_context(int dev) { return 0xc1u + 0x100u * static_cast<unsigned>(dev); }
int context_device(uintptr_t ctx) { return static_cast<int>(ctx >> 8); }
thread_local uintptr_t t_current = 0;

struct Alloc {
  int index;
  std::vector<unsigned char> mem;
  int device = 0;  // the device of the context it was allocated in
};

struct Param {
  unsigned size;
  unsigned align;
  std::string type;  // "u64", "u32", "f32", ... or "b8[N]"
};

struct Module {
  bool ptx = false;
  std::string kind;
  std::string blob;                                    // binaries: the image bytes
  bool elf_symbols = false;                            // cubin: `functions` read from its symbol table
  std::set<std::string> functions;                     // cubin: its STT_FUNC symbols
  std::map<std::string, std::vector<Param>> entries;   // PTX: parameter lists
  std::map<std::string, long> maxntid;                 // PTX: .maxntid products
};

struct Function {
  std::string name;
  uintptr_t module;
  int max_dynamic_smem = -1;  // -1: the default, 48 KiB - static
};

struct Launch {
  uintptr_t function;
  unsigned grid[3], block[3], smem;
  std::string params;
  std::function<void()> host;  // host work queued by the fake cuBLAS (function is 0)
  std::string what;            // names the host work
};

/// A copy or memset on the NULL stream that has not landed yet.
struct Pending {
  CUdeviceptr dst;
  std::string bytes;
};

struct GraphNode {
  uintptr_t id;
  Launch launch;
  std::vector<uintptr_t> deps;
  bool child = false;             // a child-graph node: runs `children` instead of `launch`
  std::vector<Launch> children;
};

struct State {
  std::map<CUdeviceptr, Alloc> allocs;  // base address → memory
  CUdeviceptr next_addr = 0x7f0000000000ull;
  int next_index = 0;
  uintptr_t next_handle = 0x1000;
  std::map<uintptr_t, Module> modules;
  std::map<uintptr_t, Function> functions;
  std::map<uintptr_t, uintptr_t> capturing;  // stream → graph
  std::map<uintptr_t, std::vector<Launch>> graphs, execs;
  std::map<uintptr_t, double> events;        // event → recorded clock (µs)
  std::set<uintptr_t> pending_events;        // recorded after work that never finishes
  double clock_us = 0;
  std::map<uintptr_t, unsigned> stream_flags;
  std::map<uintptr_t, int> stream_device;    // stream → device of the context it was created in
  std::set<uintptr_t> hung_streams;          // a hung kernel is on it
  std::vector<Pending> pending;              // NULL-stream copies and memsets not yet landed
  std::map<int, int> primary_refs;           // device → cuDevicePrimaryCtxRetain count
  std::set<uintptr_t> live_contexts;         // retained primary and created contexts
  CUresult sticky = 0;                       // a fault poisons the context until it is destroyed
  std::map<std::string, int> executions;     // per kernel name, in this context
  std::map<uintptr_t, std::vector<GraphNode>> explicit_graphs;  // cuGraphCreate'd: nodes with edges
  std::map<uintptr_t, std::string> exec_conflict;  // exec → why its launch fails (shared workspace)
  bool capture_invalidated = false;
  unsigned long long allocated = 0;
  std::map<uintptr_t, double> stream_clock;         // stream → device time its queued work ends (µs)
  double host_us = 0;                               // host time (µs): launches advance it
  struct Gate {
    const volatile uint32_t* word;
    uint32_t value;
  };
  std::map<uintptr_t, Gate> gates;                  // stream → the wait holding it
  struct Held {
    bool event = false;
    uintptr_t ev = 0;
    Launch launch;
  };
  std::map<uintptr_t, std::vector<Held>> held;      // stream → work queued behind its gate
  std::set<void*> host_allocs;                      // cuMemHostAlloc'd
  std::map<void*, size_t> host_bytes;               // their sizes
  std::map<uintptr_t, std::chrono::steady_clock::time_point> slow_until;  // stream → real time it drains
  std::map<uintptr_t, std::chrono::steady_clock::time_point> event_ready;  // event → real time it is ready
  State() = default;
  State(const State&) = delete;
  State& operator=(State&&) = default;
  /// The process's end frees pinned host memory never freed (an engine that abandoned a
  /// faulted context leaves it to that end), as the real driver's teardown does.
  ~State() {
    for (void* p : host_allocs) std::free(p);
  }
};

State& st() {
  static State s;
  return s;
}

uintptr_t new_handle() { return st().next_handle++; }

/// True (and the call logged as failed) when this thread has no live current context.
bool no_context(const char* call) {
  if (t_current != 0 && st().live_contexts.count(t_current)) return false;
  log_line("%s -> %d error=no_current_context_on_this_thread", call, kInvalidContext);
  return true;
}

/// The device of this thread's current context.
int current_device() { return context_device(t_current); }

/// A fresh context: no fault, no hung work, no counts.
void reset_context() {
  State& s = st();
  // The sticky fault stays: it lasts until the process ends.
  s.executions.clear();
  s.hung_streams.clear();
  s.pending_events.clear();
  s.pending.clear();
}

/// Lands every deferred NULL-stream copy and memset, in issue order.
void flush_null_stream();

/// A kernel hung in this process (for the teardown below); cleared by kdflow_fake_cuda_reset.
bool g_hung = false;

/// Static teardown of a library that synchronises the device at exit (KDFLOW_FAKE_CUDA_TEARDOWN_BLOCKS).
struct Teardown {
  ~Teardown() {
    if (!g_hung || !env_on("KDFLOW_FAKE_CUDA_TEARDOWN_BLOCKS")) return;
    const char* v = std::getenv("KDFLOW_FAKE_CUDA_HANG_S");
    std::this_thread::sleep_for(std::chrono::seconds(v && *v ? std::atoi(v) : 20));
  }
} g_teardown;

/// What a blocking wait on work that never finishes does: block, then give up.
CUresult block_forever(const char* call) {
  const char* v = std::getenv("KDFLOW_FAKE_CUDA_HANG_S");
  int seconds = v && *v ? std::atoi(v) : 20;
  log_line("%s blocks on a hung kernel (a real driver would never return; giving up after %d s)", call, seconds);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  return kLaunchTimeout;
}

/// A call the driver refuses while a stream is being captured (global mode): it fails and
/// invalidates every capture in progress.
bool refused_in_capture(const char* call) {
  State& s = st();
  if (s.capturing.empty()) return false;
  s.capture_invalidated = true;
  log_line("%s refused during stream capture -> %d", call, kCaptureUnsupported);
  return true;
}

/// An event reached by its stream: its time, and whether it waits on slow or hung work.
void record_now(uintptr_t e, uintptr_t sh) {
  State& s = st();
  s.events[e] = std::max(s.stream_clock[sh], s.host_us);
  if (auto sl = s.slow_until.find(sh); sl != s.slow_until.end()) s.event_ready[e] = sl->second;
  else s.event_ready.erase(e);
  if (s.hung_streams.count(sh)) s.pending_events.insert(e);
  else s.pending_events.erase(e);
}

void execute(const Launch& l, uintptr_t stream);

/// Releases every stream whose gate word has been written, running what it held in order.
void drain_gates() {
  State& s = st();
  for (auto it = s.gates.begin(); it != s.gates.end();) {
    if (*it->second.word < it->second.value) {
      ++it;
      continue;
    }
    uintptr_t sh = it->first;
    it = s.gates.erase(it);
    std::vector<State::Held> held = std::move(s.held[sh]);
    s.held.erase(sh);
    log_line("gate released stream=0x%lx held=%zu host_us=%g", static_cast<unsigned long>(sh), held.size(), s.host_us);
    for (const State::Held& h : held) {
      if (h.event) record_now(h.ev, sh);
      else execute(h.launch, sh);
    }
  }
}

bool gated(uintptr_t sh) { return st().gates.count(sh) > 0; }

bool blocking_stream(uintptr_t stream) {
  if (stream == 0) return true;
  auto it = st().stream_flags.find(stream);
  return it == st().stream_flags.end() || (it->second & 1u) == 0;
}

int static_smem(const std::string& name) {
  const char* v = std::getenv("KDFLOW_FAKE_CUDA_STATIC_SMEM");
  if (!v || !*v) return 0;
  std::string spec = v;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = item.find('=');
    if (eq != std::string::npos && item.substr(0, eq) == name) return std::atoi(item.c_str() + eq + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return 0;
}

/// The allocation holding [addr, addr + n), or null.
Alloc* find(CUdeviceptr addr, size_t n, CUdeviceptr* base = nullptr) {
  auto& m = st().allocs;
  auto it = m.upper_bound(addr);
  if (it == m.begin()) return nullptr;
  --it;
  if (addr < it->first || addr - it->first + n > it->second.mem.size()) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out.empty() ? "-" : out;
}

/// Parses ".entry name( .param .u64 x, .param .align 8 .b8 y[16] )" lists and ".maxntid".
void parse_ptx(const std::string& text, Module* m) {
  size_t pos = 0;
  while ((pos = text.find(".entry ", pos)) != std::string::npos) {
    pos += 7;
    size_t open = text.find('(', pos);
    size_t close = text.find(')', open);
    if (open == std::string::npos || close == std::string::npos) return;
    std::string name = text.substr(pos, open - pos);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    std::vector<Param>& params = m->entries[name];
    std::string list = text.substr(open + 1, close - open - 1);
    size_t p = 0;
    while ((p = list.find(".param", p)) != std::string::npos) {
      p += 6;
      size_t end = list.find(',', p);
      std::string decl = list.substr(p, end == std::string::npos ? std::string::npos : end - p);
      Param prm{0, 0, ""};
      unsigned align = 0;
      if (size_t a = decl.find(".align"); a != std::string::npos) align = static_cast<unsigned>(std::atoi(decl.c_str() + a + 6));
      const char* types[] = {"u64", "s64", "b64", "f64", "u32", "s32", "b32", "f32", "u16", "s16", "b16", "f16", "u8", "s8", "b8"};
      for (const char* t : types) {
        std::string tag = std::string(".") + t + " ";
        size_t at = decl.find(tag);
        if (at == std::string::npos) continue;
        unsigned bits = static_cast<unsigned>(std::atoi(t + 1));
        prm.size = bits / 8;
        prm.align = prm.size;
        prm.type = t;
        size_t br = decl.find('[', at);
        if (br != std::string::npos) {
          unsigned count = static_cast<unsigned>(std::atoi(decl.c_str() + br + 1));
          prm.size *= count;
          prm.type = std::string(t) + "[" + std::to_string(count) + "]";
        }
        break;
      }
      if (align) prm.align = align;
      params.push_back(prm);
      if (end == std::string::npos) break;
      p = end;
    }
    size_t next_entry = text.find(".entry ", close);
    size_t mx = text.find(".maxntid", close);
    if (mx != std::string::npos && (next_entry == std::string::npos || mx < next_entry)) {
      long x = 1, y = 1, z = 1;
      std::sscanf(text.c_str() + mx + 8, " %ld , %ld , %ld", &x, &y, &z);
      m->maxntid[name] = x * y * z;
    }
    pos = close;
  }
}

/// Size of a binary image: fatbin header or ELF section table end.
size_t image_size(const unsigned char* p) {
  if (std::memcmp(p, "\x50\xed\x55\xba", 4) == 0) {
    uint16_t header = 0;
    uint64_t rest = 0;
    std::memcpy(&header, p + 6, 2);
    std::memcpy(&rest, p + 8, 8);
    return header + rest;
  }
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  std::memcpy(&shoff, p + 0x28, 8);
  std::memcpy(&shentsize, p + 0x3a, 2);
  std::memcpy(&shnum, p + 0x3c, 2);
  return shoff + static_cast<uint64_t>(shentsize) * shnum;
}

/// A cubin's function symbols (ELF64 .symtab, STT_FUNC), as the driver finds kernels by
/// name; false when the image has no readable symbol table.
bool elf_functions(const std::string& img, std::set<std::string>* out) {
  auto rd = [&](uint64_t off, size_t n, uint64_t* v) {
    if (off > img.size() || n > img.size() - off) return false;
    *v = 0;
    std::memcpy(v, img.data() + off, n);
    return true;
  };
  uint64_t shoff = 0, shentsize = 0, shnum = 0;
  if (img.size() < 64 || img[4] != 2 || !rd(0x28, 8, &shoff) || !rd(0x3a, 2, &shentsize) || !rd(0x3c, 2, &shnum) ||
      shentsize < 64)
    return false;
  bool found = false;
  for (uint64_t i = 0; i < shnum; ++i) {
    uint64_t sh = shoff + i * shentsize, type = 0, off = 0, size = 0, link = 0, entsize = 0;
    if (!rd(sh + 4, 4, &type) || !rd(sh + 0x18, 8, &off) || !rd(sh + 0x20, 8, &size) || !rd(sh + 0x28, 4, &link) ||
        !rd(sh + 0x38, 8, &entsize))
      return false;
    if (type != 2 /* SHT_SYMTAB */) continue;
    uint64_t str_sh = shoff + link * shentsize, str_off = 0, str_size = 0;
    if (entsize < 24 || link >= shnum || !rd(str_sh + 0x18, 8, &str_off) || !rd(str_sh + 0x20, 8, &str_size))
      return false;
    found = true;
    for (uint64_t e = 0; e + entsize <= size; e += entsize) {
      uint64_t name = 0, info = 0;
      if (!rd(off + e, 4, &name) || !rd(off + e + 4, 1, &info)) return false;
      if ((info & 0xf) != 2 /* STT_FUNC */ || name >= str_size || str_off + name >= img.size()) continue;
      const char* p = img.data() + str_off + name;
      out->insert(std::string(p, strnlen(p, img.size() - str_off - name)));
    }
  }
  return found;
}

void fill_log(unsigned n, int* options, void** values, int buffer_option, const char* text) {
  char* buf = nullptr;
  size_t size = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (options[i] == buffer_option) buf = static_cast<char*>(values[i]);
    if (options[i] == buffer_option + 1) size = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
  }
  if (buf && size) std::snprintf(buf, size, "%s", text);
}

/// Decodes packed parameters against a PTX parameter list; "" when the sizes disagree.
/// `foreign`: a pointer lies in memory of another device than the current context's.
std::string decode(const std::vector<Param>& params, const std::string& bytes, bool* ok, bool* foreign) {
  std::string out;
  size_t pos = 0;
  *ok = true;
  *foreign = false;
  for (const Param& p : params) {
    size_t align = p.align ? p.align : 1;
    pos = (pos + align - 1) / align * align;
    if (pos + p.size > bytes.size()) {
      *ok = false;
      return "";
    }
    uint64_t v = 0;
    if (p.size <= 8) std::memcpy(&v, bytes.data() + pos, p.size);
    std::string item;
    if (p.size == 8 && p.type[0] != 'f') {
      CUdeviceptr base = 0;
      if (Alloc* a = find(v, 0, &base)) {
        item = "a" + std::to_string(a->index) + "+" + std::to_string(v - base);
        if (a->device != current_device()) *foreign = true;  // no peer access: the kernel would fault
      }
      else item = p.type + ":" + std::to_string(v);
    } else if (p.type == "f32") {
      float f;
      std::memcpy(&f, &v, 4);
      char b[64];
      std::snprintf(b, sizeof(b), "f32:%g", f);
      item = b;
    } else if (p.type == "f64") {
      double f;
      std::memcpy(&f, &v, 8);
      char b[64];
      std::snprintf(b, sizeof(b), "f64:%g", f);
      item = b;
    } else if (p.size <= 8) {
      item = p.type + ":" + std::to_string(v);
    } else {
      item = p.type;
    }
    out += (out.empty() ? "" : ",") + item;
    pos += p.size;
  }
  if (pos != bytes.size()) *ok = false;
  return out;
}

void flush_null_stream() {
  State& s = st();
  for (const Pending& p : s.pending) {
    CUdeviceptr base = 0;
    if (Alloc* a = find(p.dst, p.bytes.size(), &base))
      std::memcpy(a->mem.data() + (p.dst - base), p.bytes.data(), p.bytes.size());
  }
  if (!s.pending.empty()) log_line("null-stream work landed: %zu operations", s.pending.size());
  s.pending.clear();
}

/// The NULL-stream copies and memsets not yet landed that write an allocation a launch's
/// parameters point into (every 8-byte-aligned word inside an allocation counts as a pointer):
/// the kernel may read those bytes before they land. Work pending on other allocations (another
/// rank's, in a sharded replay) cannot reach it.
size_t racing_with(const std::string& params) {
  std::set<CUdeviceptr> bases;
  for (size_t at = 0; at + 8 <= params.size(); at += 8) {
    CUdeviceptr v = 0, base = 0;
    std::memcpy(&v, params.data() + at, 8);
    if (find(v, 0, &base)) bases.insert(base);
  }
  size_t n = 0;
  for (const Pending& p : st().pending) {
    CUdeviceptr base = 0;
    if (find(p.dst, 0, &base) && bases.count(base)) ++n;
  }
  return n;
}

/// What a launch does when it "runs" on `stream`: advance the clock, maybe overrun a
/// buffer, hang or fault.
void execute(const Launch& l, uintptr_t stream) {
  State& st_ = st();
  if (st_.hung_streams.count(stream)) return;  // queued behind a kernel that never ends
  double duration = 10;
  if (!l.host)
    if (const char* d = std::getenv("KDFLOW_FAKE_CUDA_DURATION"); d && *d) {
      const std::string& name = st_.functions[l.function].name;
      std::string spec = std::string(",") + d + ",";
      size_t at = spec.find("," + name + "=");
      if (at != std::string::npos) duration = std::atof(spec.c_str() + at + name.size() + 2);
      else if ((at = spec.find(",*=")) != std::string::npos) duration = std::atof(spec.c_str() + at + 3);
    }
  double& clock = st_.stream_clock[stream];
  clock = std::max(clock, st_.host_us) + duration;
  st_.clock_us = clock;
  if (!l.host)
    if (const char* sl = std::getenv("KDFLOW_FAKE_CUDA_SLOW_MS"); sl && *sl) {
      const std::string& name = st_.functions[l.function].name;
      std::string spec = sl;
      size_t eq = spec.rfind('=');
      if (eq != std::string::npos && spec.substr(0, eq) == name)
        st_.slow_until[stream] = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atoi(spec.c_str() + eq + 1));
    }
  if (l.host) {
    if (st_.sticky == 0) l.host();
    return;
  }
  const std::string& fname = st_.functions[l.function].name;
  int n = ++st_.executions[fname];
  if (const char* h = std::getenv("KDFLOW_FAKE_CUDA_HANG"); h && fname == h) {
    st_.hung_streams.insert(stream);
    g_hung = true;
    log_line("hang kernel=%s stream=0x%lx", fname.c_str(), static_cast<unsigned long>(stream));
    return;
  }
  if (const char* fl = std::getenv("KDFLOW_FAKE_CUDA_FAULT"); fl && *fl) {
    std::string spec = fl;
    size_t at = spec.rfind('@');
    if (at != std::string::npos && spec.substr(0, at) == fname && std::atoi(spec.c_str() + at + 1) == n &&
        st_.sticky == 0) {
      st_.sticky = kIllegalAddress;
      log_line("fault kernel=%s execution=%d", fname.c_str(), n);
    }
  }
  const char* s = std::getenv("KDFLOW_FAKE_CUDA_SCRIBBLE");
  if (!s || !*s) return;
  std::string spec = s;
  size_t at = spec.rfind('@');
  if (at == std::string::npos) return;
  const Function& f = st().functions[l.function];
  if (spec.substr(0, at) != f.name || l.params.size() < 8) return;
  CUdeviceptr p = 0;
  std::memcpy(&p, l.params.data(), 8);
  CUdeviceptr target = p + std::strtoull(spec.c_str() + at + 1, nullptr, 10);
  CUdeviceptr base = 0;
  if (Alloc* a = find(target, 4, &base)) {
    std::memset(a->mem.data() + (target - base), 0, 4);
    log_line("scribble kernel=%s at=0x%llx", f.name.c_str(), target);
  } else {
    log_line("scribble kernel=%s at=0x%llx outside every allocation", f.name.c_str(), target);
  }
}

const char* error_name(CUresult r) {
  switch (r) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 600: return "CUDA_ERROR_NOT_READY";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    default: return nullptr;
  }
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned flags) {
  FAKE_ENTRY;
  CUresult r = env_on("KDFLOW_FAKE_CUDA_NO_DEVICE") ? kNoDevice : kSuccess;
  log_line("cuInit flags=%u -> %d", flags, r);
  return r;
}

CUresult cuDeviceGet(int* dev, int ordinal) {
  FAKE_ENTRY;
  CUresult r = ordinal >= 0 && ordinal < device_count() ? kSuccess : kInvalidDevice;
  if (r == kSuccess) *dev = ordinal;
  log_line("cuDeviceGet ordinal=%d -> %d", ordinal, r);
  return r;
}

/// KDFLOW_FAKE_CUDA_DEVICES devices (default one), as cuDeviceGet has them.
CUresult cuDeviceGetCount(int* count) {
  FAKE_ENTRY;
  if (!count) {
    log_line("cuDeviceGetCount -> %d", kInvalidValue);
    return kInvalidValue;
  }
  *count = device_count();
  log_line("cuDeviceGetCount -> 0 count=%d", *count);
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attrib, int dev) {
  FAKE_ENTRY;
  switch (attrib) {
    case 1: *value = 1024; break;     // max threads per block
    case 16: *value = 132; break;     // SMs
    case 75: *value = 9; break;       // compute capability
    case 76: *value = 0; break;
    case 97: *value = 232448; break;  // opt-in shared memory per block
    // What an H100 SXM reports (kdflow calibrate reads them; KDFLOW_FAKE_CUDA_NO_CLOCK=1: no clock,
    // as a driver that has dropped the deprecated attribute).
    case 13: *value = std::getenv("KDFLOW_FAKE_CUDA_NO_CLOCK") ? 0 : 1980000; break;  // clock rate, kHz
    case 38: *value = 50 << 20; break;   // L2 bytes
    case 39: *value = 2048; break;       // max threads per SM
    case 81: *value = 233472; break;     // shared memory per SM
    case 106: *value = 32; break;        // max blocks per SM
    default: *value = 0; break;
  }
  log_line("cuDeviceGetAttribute attrib=%d device=%d -> 0 value=%d", attrib, dev, *value);
  return kSuccess;
}

CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
  FAKE_ENTRY;
  if (no_context("cuMemHostAlloc")) return kInvalidContext;
  *p = std::calloc(1, bytes ? bytes : 1);
  st().host_allocs.insert(*p);
  st().host_bytes[*p] = bytes;
  log_line("cuMemHostAlloc bytes=%zu flags=%u -> 0", bytes, flags);
  return kSuccess;
}

CUresult cuMemFreeHost(void* p) {
  FAKE_ENTRY;
  CUresult r = st().host_allocs.erase(p) ? kSuccess : kInvalidValue;
  st().host_bytes.erase(p);
  if (r == kSuccess) std::free(p);
  log_line("cuMemFreeHost -> %d", r);
  return r;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
  FAKE_ENTRY;
  CUresult r = st().host_allocs.count(p) && flags == 0 ? kSuccess : kInvalidValue;
  if (r == kSuccess) *d = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  log_line("cuMemHostGetDevicePointer flags=%u -> %d", flags, r);
  return r;
}

CUresult cuStreamWaitValue32_v2(Handle stream, CUdeviceptr addr, uint32_t value, unsigned flags) {
  FAKE_ENTRY;
  uintptr_t sh = reinterpret_cast<uintptr_t>(stream);
  void* host = reinterpret_cast<void*>(addr);
  CUresult r = st().sticky ? st().sticky
               : !st().host_allocs.count(host) || flags != 0 ? kInvalidValue  // the fake knows GEQ on pinned words
               : sh != 0 && !st().stream_flags.count(sh)    ? kInvalidHandle
                                                            : kSuccess;
  if (r == kSuccess) {
    drain_gates();
    if (gated(sh)) r = kInvalidValue;  // one gate at a time is all the fake models
    else st().gates[sh] = State::Gate{static_cast<const volatile uint32_t*>(host), value};
  }
  log_line("cuStreamWaitValue32 stream=%p value=%u flags=%u -> %d", stream, value, flags, r);
  return r;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  FAKE_ENTRY;
  unsigned long long total = kDefaultTotalMem;
  if (const char* t = std::getenv("KDFLOW_FAKE_CUDA_TOTAL_MEM"); t && *t) total = std::strtoull(t, nullptr, 10);
  *bytes = static_cast<size_t>(total);
  log_line("cuDeviceTotalMem device=%d -> 0 bytes=%llu", dev, total);
  return kSuccess;
}

CUresult cuDeviceGetName(char* name, int len, int dev) {
  FAKE_ENTRY;
  std::snprintf(name, static_cast<size_t>(len), "%s", "kdflow fake CUDA device");
  log_line("cuDeviceGetName device=%d -> 0", dev);
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(Handle* ctx, int dev) {
  FAKE_ENTRY;
  if (st().sticky) {
    log_line("cuDevicePrimaryCtxRetain device=%d -> %d", dev, st().sticky);
    return st().sticky;
  }
  if (dev < 0 || dev >= device_count()) {
    log_line("cuDevicePrimaryCtxRetain device=%d -> %d", dev, kInvalidDevice);
    return kInvalidDevice;
  }
  State& s = st();
  if (s.live_contexts.empty()) reset_context();
  if (s.primary_refs[dev]++ == 0) s.live_contexts.insert(primary_context(dev));
  *ctx = reinterpret_cast<Handle>(primary_context(dev));
  log_line("cuDevicePrimaryCtxRetain device=%d -> 0 ctx=0x%lx", dev, static_cast<unsigned long>(primary_context(dev)));
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  FAKE_ENTRY;
  State& s = st();
  CUresult r = s.primary_refs[dev] > 0 ? kSuccess : kInvalidContext;
  if (r == kSuccess && --s.primary_refs[dev] == 0) {  // the primary context is destroyed
    s.live_contexts.erase(primary_context(dev));
    if (s.live_contexts.empty()) reset_context();
  }
  log_line("cuDevicePrimaryCtxRelease device=%d -> %d", dev, r);
  return r;
}

CUresult cuCtxCreate_v2(Handle* ctx, unsigned flags, int dev) {
  FAKE_ENTRY;
  if (st().sticky) {
    log_line("cuCtxCreate flags=%u device=%d -> %d", flags, dev, st().sticky);
    return st().sticky;
  }
  if (dev < 0 || dev >= device_count()) {
    log_line("cuCtxCreate flags=%u device=%d -> %d", flags, dev, kInvalidDevice);
    return kInvalidDevice;
  }
  reset_context();
  st().live_contexts.insert(created_context(dev));
  *ctx = reinterpret_cast<Handle>(created_context(dev));
  t_current = created_context(dev);  // cuCtxCreate makes it current on this thread
  log_line("cuCtxCreate flags=%u device=%d -> 0 ctx=0x%lx", flags, dev, static_cast<unsigned long>(created_context(dev)));
  return kSuccess;
}

CUresult cuCtxDestroy_v2(Handle ctx) {
  FAKE_ENTRY;
  CUresult r = st().live_contexts.erase(reinterpret_cast<uintptr_t>(ctx)) ? kSuccess : kInvalidContext;
  if (r == kSuccess) reset_context();
  if (t_current == reinterpret_cast<uintptr_t>(ctx)) t_current = 0;
  log_line("cuCtxDestroy ctx=%p -> %d", ctx, r);
  return r;
}

CUresult cuCtxSetCurrent(Handle ctx) {
  FAKE_ENTRY;
  uintptr_t c = reinterpret_cast<uintptr_t>(ctx);
  CUresult r = c == 0 || st().live_contexts.count(c) ? kSuccess : kInvalidContext;
  if (r == kSuccess) t_current = c;
  log_line("cuCtxSetCurrent ctx=%p -> %d", ctx, r);
  return r;
}

CUresult cuCtxSynchronize() {
  FAKE_ENTRY;
  if (no_context("cuCtxSynchronize")) return kInvalidContext;
  if (refused_in_capture("cuCtxSynchronize")) return kCaptureUnsupported;
  flush_null_stream();
  drain_gates();
  if (!st().hung_streams.empty() || !st().gates.empty()) {
    CUresult r = block_forever("cuCtxSynchronize");
    log_line("cuCtxSynchronize -> %d", r);
    return r;
  }
  CUresult r = st().sticky;
  log_line("cuCtxSynchronize -> %d", r);
  return r;
}

CUresult cuDriverGetVersion(int* version) {
  FAKE_ENTRY;
  *version = 13000;
  log_line("cuDriverGetVersion -> 0 version=13000");
  return kSuccess;
}

CUresult cuEventQuery(Handle ev) {
  FAKE_ENTRY;
  if (refused_in_capture("cuEventQuery")) return kCaptureUnsupported;
  drain_gates();
  uintptr_t e = reinterpret_cast<uintptr_t>(ev);
  bool slow = st().event_ready.count(e) && std::chrono::steady_clock::now() < st().event_ready[e];
  CUresult r = st().sticky ? st().sticky
               : !st().events.count(e) ? kInvalidHandle
               : st().pending_events.count(e) || slow ? kNotReady
                                                      : kSuccess;
  log_line("cuEventQuery event=%p -> %d", ev, r);
  return r;
}

CUresult cuModuleLoadDataEx(Handle* module, const void* image, unsigned n, int* options, void** values) {
  FAKE_ENTRY;
  if (no_context("cuModuleLoadDataEx")) return kInvalidContext;
  if (const char* j = std::getenv("KDFLOW_FAKE_CUDA_JIT_MS"); j && *j)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(j)));
  const unsigned char* p = static_cast<const unsigned char*>(image);
  Module m;
  if (std::memcmp(p, "\x7f" "ELF", 4) == 0 || std::memcmp(p, "\x50\xed\x55\xba", 4) == 0) {
    m.kind = p[0] == 0x7f ? "cubin" : "fatbin";
    m.blob.assign(reinterpret_cast<const char*>(p), image_size(p));
    // A cubin's symbol table; a fatbin's, of every (uncompressed) ELF image it holds.
    for (size_t at = 0; (at = m.blob.find("\x7f" "ELF", at)) != std::string::npos; at += 4) {
      if (elf_functions(m.blob.substr(at), &m.functions)) m.elf_symbols = true;
      if (m.kind == "cubin") break;
    }
    if (env_on("KDFLOW_FAKE_CUDA_REJECT_BINARY")) {
      fill_log(n, options, values, 5, "fake: no kernel image is available for this device (sm_00)\nsecond line");
      log_line("cuModuleLoadDataEx kind=%s bytes=%zu options=%u -> %d", m.kind.c_str(), m.blob.size(), n, kNoBinary);
      return kNoBinary;
    }
  } else {
    std::string text(reinterpret_cast<const char*>(p));
    if (text.find(".version") == std::string::npos) {
      fill_log(n, options, values, 5, "fake: not PTX");
      log_line("cuModuleLoadDataEx kind=unknown options=%u -> %d", n, kInvalidImage);
      return kInvalidImage;
    }
    if (const char* rj = std::getenv("KDFLOW_FAKE_CUDA_REJECT_PTX"); rj && *rj) {
      CUresult r = std::atoi(rj);
      fill_log(n, options, values, 5, "ptxas fatal   : this PTX cannot be compiled for the device (fake)");
      log_line("cuModuleLoadDataEx kind=ptx options=%u -> %d", n, r);
      return r;
    }
    m.ptx = true;
    m.kind = "ptx";
    parse_ptx(text, &m);
    m.blob = text;
    fill_log(n, options, values, 3, "fake: ptx compiled");
  }
  uintptr_t h = new_handle();
  // entries: PTX .entry count; symbols: function symbols of the ELF images (-1: none readable).
  log_line("cuModuleLoadDataEx kind=%s bytes=%zu options=%u -> 0 module=0x%lx entries=%zu symbols=%ld", m.kind.c_str(),
           m.blob.size(), n, static_cast<unsigned long>(h), m.entries.size(),
           m.elf_symbols ? static_cast<long>(m.functions.size()) : -1L);
  st().modules[h] = std::move(m);
  *module = reinterpret_cast<Handle>(h);
  return kSuccess;
}

CUresult cuModuleGetFunction(Handle* f, Handle module, const char* name) {
  FAKE_ENTRY;
  auto it = st().modules.find(reinterpret_cast<uintptr_t>(module));
  CUresult r = kSuccess;
  if (it == st().modules.end()) {
    r = kInvalidHandle;
  } else if (it->second.ptx) {
    if (!it->second.entries.count(name)) r = kNotFound;
  } else if (it->second.elf_symbols) {
    if (!it->second.functions.count(name)) r = kNotFound;
  } else {
    // No readable symbol table (a compressed fatbin): the name as a string of the image.
    std::string needle = std::string(name) + '\0';
    if (it->second.blob.find(needle) == std::string::npos) r = kNotFound;
  }
  if (r == kSuccess) {
    uintptr_t h = new_handle();
    st().functions[h] = Function{name, reinterpret_cast<uintptr_t>(module)};
    *f = reinterpret_cast<Handle>(h);
    log_line("cuModuleGetFunction name=%s module=%p -> 0 function=0x%lx", name, module, static_cast<unsigned long>(h));
  } else {
    log_line("cuModuleGetFunction name=%s module=%p -> %d", name, module, r);
  }
  return r;
}

CUresult cuModuleUnload(Handle module) {
  FAKE_ENTRY;
  CUresult r = st().modules.erase(reinterpret_cast<uintptr_t>(module)) ? kSuccess : kInvalidHandle;
  log_line("cuModuleUnload module=%p -> %d", module, r);
  return r;
}

CUresult cuFuncSetAttribute(Handle f, int attrib, int value) {
  FAKE_ENTRY;
  auto it = st().functions.find(reinterpret_cast<uintptr_t>(f));
  if (it == st().functions.end()) {
    log_line("cuFuncSetAttribute function=%p -> %d", f, kInvalidHandle);
    return kInvalidHandle;
  }
  CUresult r = kSuccess;
  if (attrib == 8) {  // MAX_DYNAMIC_SHARED_SIZE_BYTES: at most the opt-in maximum minus static
    if (value < 0 || static_smem(it->second.name) + value > kOptinSmem) r = kInvalidValue;
    else it->second.max_dynamic_smem = value;
  }
  log_line("cuFuncSetAttribute name=%s attrib=%d value=%d -> %d", it->second.name.c_str(), attrib, value, r);
  return r;
}

CUresult cuFuncGetAttribute(int* value, int attrib, Handle f) {
  FAKE_ENTRY;
  const Function& fn = st().functions[reinterpret_cast<uintptr_t>(f)];
  *value = 0;
  if (attrib == 0) {
    *value = 1024;
    const Module& m = st().modules[fn.module];
    if (auto it = m.maxntid.find(fn.name); it != m.maxntid.end()) *value = static_cast<int>(it->second);
  } else if (attrib == 1) {  // SHARED_SIZE_BYTES: static shared memory
    *value = static_smem(fn.name);
  } else if (attrib == 8) {  // MAX_DYNAMIC_SHARED_SIZE_BYTES
    *value = fn.max_dynamic_smem >= 0 ? fn.max_dynamic_smem : kDefaultSmem - static_smem(fn.name);
  }
  log_line("cuFuncGetAttribute name=%s attrib=%d -> 0 value=%d", fn.name.c_str(), attrib, *value);
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  FAKE_ENTRY;
  if (no_context("cuMemAlloc")) return kInvalidContext;
  if (bytes == 0) {
    log_line("cuMemAlloc bytes=0 -> %d", kInvalidValue);
    return kInvalidValue;
  }
  if (refused_in_capture("cuMemAlloc")) return kCaptureUnsupported;
  State& s = st();
  if (s.sticky) {
    log_line("cuMemAlloc bytes=%zu -> %d", bytes, s.sticky);
    return s.sticky;
  }
  unsigned long long total = kDefaultTotalMem;
  if (const char* t = std::getenv("KDFLOW_FAKE_CUDA_TOTAL_MEM"); t && *t) total = std::strtoull(t, nullptr, 10);
  if (bytes > total || s.allocated > total - bytes) {
    log_line("cuMemAlloc bytes=%zu -> %d error=more_than_the_free_device_memory", bytes, kOutOfMemory);
    return kOutOfMemory;
  }
  if (s.allocs.empty()) {  // each replay in a process sees the same addresses and indices
    s.next_addr = 0x7f0000000000ull;
    s.next_index = 0;
  }
  CUdeviceptr a = s.next_addr;
  s.next_addr += (bytes + 255) / 256 * 256 + 0x10000;  // a gap: overruns land nowhere valid
  Alloc al;
  try {
    al.mem.assign(bytes, 0);
  } catch (const std::bad_alloc&) {  // the host cannot back it: what the device would say
    log_line("cuMemAlloc bytes=%zu -> %d error=host_cannot_back_the_fake_allocation", bytes, kOutOfMemory);
    return kOutOfMemory;
  }
  al.index = s.next_index++;
  al.device = current_device();
  s.allocated += bytes;
  s.allocs[a] = std::move(al);
  *ptr = a;
  log_line("cuMemAlloc bytes=%zu -> 0 ptr=0x%llx index=%d", bytes, a, s.allocs[a].index);
  return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  FAKE_ENTRY;
  if (no_context("cuMemFree")) return kInvalidContext;
  auto& m = st().allocs;
  auto it = m.find(ptr);
  CUresult r = kInvalidValue;
  int index = -1;
  if (it != m.end()) {
    index = it->second.index;
    st().allocated -= it->second.mem.size();
    m.erase(it);
    r = kSuccess;
  }
  log_line("cuMemFree ptr=0x%llx -> %d index=%d", ptr, r, index);
  return r;
}

/// Queues host work on a stream as the driver queues a kernel: recorded into the graph while
/// the stream is captured, else run in stream order (behind a gate, or now).
static void queue_host_work(Launch l, uintptr_t sh) {
  State& s = st();
  if (s.capturing.count(sh)) {
    s.graphs[s.capturing[sh]].push_back(std::move(l));
    return;
  }
  if (blocking_stream(sh)) flush_null_stream();
  drain_gates();
  if (gated(sh)) s.held[sh].push_back({false, 0, std::move(l)});
  else execute(l, sh);
}

/// FNV-1a of n bytes (the log lines of copies carry it, for the tests).
static uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  FAKE_ENTRY;
  if (no_context("cuMemcpyHtoD")) return kInvalidContext;
  if (refused_in_capture("cuMemcpyHtoD")) return kCaptureUnsupported;
  CUdeviceptr base = 0;
  Alloc* a = find(dst, bytes, &base);
  CUresult r = st().sticky ? st().sticky : a ? kSuccess : kInvalidValue;
  // Pageable source: staged now, lands when the NULL stream gets to it.
  if (r == kSuccess) st().pending.push_back(Pending{dst, std::string(static_cast<const char*>(src), bytes)});
  uint64_t fnv = fnv1a(src, bytes);  // of the bytes copied, for the tests
  log_line("cuMemcpyHtoD dst=0x%llx bytes=%zu -> %d index=%d offset=%llu deferred=%d fnv=0x%016llx", dst, bytes, r,
           a ? a->index : -1, a ? dst - base : 0ull, r == kSuccess ? 1 : 0, static_cast<unsigned long long>(fnv));
  return r;
}

/// Whether [p, p + n) lies in one cuMemHostAlloc'd block.
static bool pinned(const void* p, size_t n) {
  const auto& m = st().host_bytes;
  auto it = m.upper_bound(const_cast<void*>(p));
  if (it == m.begin()) return false;
  --it;
  const char* base = static_cast<const char*>(it->first);
  const char* q = static_cast<const char*>(p);
  return q >= base && static_cast<size_t>(q - base) <= it->second && n <= it->second - static_cast<size_t>(q - base);
}

/// A stream-ordered copy: while the stream is captured it becomes graph work that reads the
/// source at each launch of the graph, and then the source must be pinned (the driver refuses
/// a captured copy from pageable memory and invalidates the capture); otherwise it runs in
/// stream order (a pageable source is staged now, as the driver does before returning).
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, Handle stream) {
  FAKE_ENTRY;
  if (no_context("cuMemcpyHtoDAsync")) return kInvalidContext;
  State& s = st();
  uintptr_t sh = reinterpret_cast<uintptr_t>(stream);
  bool captured = s.capturing.count(sh) > 0;
  bool is_pinned = pinned(src, bytes);
  CUdeviceptr base = 0;
  Alloc* a = find(dst, bytes, &base);
  CUresult r = s.sticky;
  if (r == kSuccess && sh != 0 && !s.stream_flags.count(sh)) r = kInvalidHandle;
  if (r == kSuccess && !a) r = kInvalidValue;
  if (r == kSuccess && captured && !is_pinned) {
    s.capture_invalidated = true;
    r = kCaptureUnsupported;
  }
  if (r == kSuccess) {
    // The bytes are read when the work runs (pinned) or now (pageable, staged); the log line
    // of each landing carries their FNV-1a, for the tests.
    auto land = [dst](const void* from, size_t n) {
      CUdeviceptr b = 0;
      Alloc* to = find(dst, n, &b);
      if (to) std::memcpy(to->mem.data() + (dst - b), from, n);
      log_line("memcpy-lands dst=0x%llx bytes=%zu index=%d fnv=0x%016llx", dst, n, to ? to->index : -1,
               static_cast<unsigned long long>(fnv1a(from, n)));
    };
    std::function<void()> work;
    if (is_pinned)
      work = [land, src, bytes] { land(src, bytes); };
    else
      work = [land, staged = std::string(static_cast<const char*>(src), bytes)] { land(staged.data(), staged.size()); };
    queue_host_work(Launch{0, {1, 1, 1}, {1, 1, 1}, 0, "", std::move(work), "cuMemcpyHtoDAsync"}, sh);
  }
  log_line("cuMemcpyHtoDAsync dst=0x%llx bytes=%zu stream=0x%lx captured=%d pinned=%d -> %d index=%d offset=%llu", dst,
           bytes, static_cast<unsigned long>(sh), captured ? 1 : 0, is_pinned ? 1 : 0, r, a ? a->index : -1,
           a ? dst - base : 0ull);
  return r;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  FAKE_ENTRY;
  if (no_context("cuMemcpyDtoH")) return kInvalidContext;
  if (refused_in_capture("cuMemcpyDtoH")) return kCaptureUnsupported;
  flush_null_stream();  // synchronous, on the NULL stream: after everything queued there
  CUdeviceptr base = 0;
  Alloc* a = find(src, bytes, &base);
  CUresult r = st().sticky ? st().sticky : a ? kSuccess : kInvalidValue;
  if (a) std::memcpy(dst, a->mem.data() + (src - base), bytes);
  log_line("cuMemcpyDtoH src=0x%llx bytes=%zu -> %d index=%d offset=%llu", src, bytes, r, a ? a->index : -1,
           a ? src - base : 0ull);
  return r;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  FAKE_ENTRY;
  if (no_context("cuMemsetD8")) return kInvalidContext;
  if (refused_in_capture("cuMemsetD8")) return kCaptureUnsupported;
  CUdeviceptr base = 0;
  Alloc* a = find(dst, count, &base);
  CUresult r = st().sticky ? st().sticky : a ? kSuccess : kInvalidValue;
  if (r == kSuccess) st().pending.push_back(Pending{dst, std::string(count, static_cast<char>(value))});
  log_line("cuMemsetD8 dst=0x%llx value=%u count=%zu -> %d index=%d offset=%llu deferred=%d", dst, value, count, r,
           a ? a->index : -1, a ? dst - base : 0ull, r == kSuccess ? 1 : 0);
  return r;
}

/// cuLaunchKernel and cuLaunchKernelEx: `api` names the entry point in the log, `attrs` the
/// launch attributes ("pdl", "cooperative", comma-separated; "-" for none), `refused` a
/// problem cuLaunchKernelEx found in its configuration (the launch then fails with it).
CUresult launch_kernel(const char* api, Handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned smem, Handle stream, void** kernel_params, void** extra,
                       const std::string& attrs, CUresult refused, const std::string& refused_why) {
  FAKE_ENTRY;
  if (no_context(api)) return kInvalidContext;
  State& s = st();
  auto fit = s.functions.find(reinterpret_cast<uintptr_t>(f));
  if (fit == s.functions.end()) {
    log_line("%s function=%p -> %d", api, f, kInvalidHandle);
    return kInvalidHandle;
  }
  const Function& fn = fit->second;
  Launch l{reinterpret_cast<uintptr_t>(f), {gx, gy, gz}, {bx, by, bz}, smem, "", {}, ""};
  CUresult r = kSuccess;
  std::string why;
  if (refused) {
    r = refused;
    why = refused_why;
  } else if (kernel_params) {
    r = kInvalidValue;
    why = " error=kernelParams_unsupported_by_the_fake";
  } else if (extra) {
    void* buf = nullptr;
    size_t size = 0;
    for (void** e = extra; *e; e += 2) {
      uintptr_t key = reinterpret_cast<uintptr_t>(e[0]);
      if (key == 1) buf = e[1];
      else if (key == 2) size = *static_cast<size_t*>(e[1]);
      else {
        r = kInvalidValue;
        why = " error=unknown_extra_key";
        break;
      }
    }
    if (buf && size) l.params.assign(static_cast<const char*>(buf), size);
  }
  std::string args;
  const Module& m = s.modules[fn.module];
  {
    int limit = fn.max_dynamic_smem >= 0 ? fn.max_dynamic_smem : kDefaultSmem - static_smem(fn.name);
    if (r == kSuccess && static_cast<int>(smem) > limit) {
      r = kInvalidValue;
      why = " error=dynamic_shared_memory_above_the_kernel_limit";
    }
  }
  if (r == kSuccess && st().sticky) r = st().sticky;
  if (r == kSuccess && m.ptx) {
    bool ok = true, foreign = false;
    auto it = m.entries.find(fn.name);
    if (it != m.entries.end()) args = decode(it->second, l.params, &ok, &foreign);
    if (!ok) {
      r = kInvalidValue;
      why = " error=parameter_buffer_does_not_match_the_ptx_signature";
    } else if (foreign) {
      r = kIllegalAddress;
      why = " error=pointer_into_memory_of_another_device";
    }
    if (auto mx = m.maxntid.find(fn.name); mx != m.maxntid.end() && long(bx) * by * bz > mx->second) {
      r = kInvalidValue;
      why = " error=block_exceeds_maxntid";
    }
  }
  uintptr_t sh = reinterpret_cast<uintptr_t>(stream);
  bool captured = s.capturing.count(sh) > 0;
  if (r == kSuccess && !captured && blocking_stream(sh)) flush_null_stream();
  size_t racing = captured ? 0 : racing_with(l.params);
  log_line("%s name=%s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=0x%lx captured=%d param_bytes=%zu "
           "params=%s args=%s racing=%zu attrs=%s -> %d%s",
           api, fn.name.c_str(), gx, gy, gz, bx, by, bz, smem, static_cast<unsigned long>(sh), captured ? 1 : 0,
           l.params.size(), hex(l.params).c_str(), args.empty() ? "-" : args.c_str(), racing, attrs.c_str(), r,
           why.c_str());
  if (r != kSuccess) return r;
  if (const char* c = std::getenv("KDFLOW_FAKE_CUDA_LAUNCH_US"); c && *c && !captured) s.host_us += std::atof(c);
  drain_gates();
  if (const char* c = std::getenv("KDFLOW_FAKE_CUDA_SERIALISE"); c && *c == '1' && !captured && gated(sh)) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (gated(sh)) {
      if (std::chrono::steady_clock::now() > until) {
        log_line("%s name=%s: serialised launch behind a gate never released -> %d", api, fn.name.c_str(),
                 kLaunchTimeout);
        return kLaunchTimeout;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      drain_gates();
    }
    log_line("%s name=%s: serialised launch waited for the gate", api, fn.name.c_str());
  }
  if (captured) s.graphs[s.capturing[sh]].push_back(l);
  else if (gated(sh)) s.held[sh].push_back({false, 0, l});
  else execute(l, sh);
  return kSuccess;
}

CUresult cuLaunchKernel(Handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, Handle stream, void** kernel_params, void** extra) {
  FAKE_ENTRY;
  return launch_kernel("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, smem, stream, kernel_params, extra, "-", kSuccess,
                       "");
}

/// CUlaunchAttribute / CUlaunchConfig as cuda.h (CUDA 12) lays them out.
struct LaunchAttr {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int value;
  } v;
};
struct LaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, smem;
  Handle stream;
  LaunchAttr* attrs;
  unsigned num_attrs;
};
constexpr CUresult kCooperativeTooLarge = 720;  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE

CUresult cuLaunchKernelEx(const LaunchConfig* c, Handle f, void** kernel_params, void** extra) {
  FAKE_ENTRY;
  if (!c || (c->num_attrs && !c->attrs)) {
    log_line("cuLaunchKernelEx config=%p -> %d error=null_config_or_attributes", static_cast<const void*>(c),
             kInvalidValue);
    return kInvalidValue;
  }
  // The attributes replay may pass, as the real driver checks them: known ids, each once,
  // values 0 or 1. A cooperative grid must fit on the device at once (132 SMs, at most 2048
  // threads and 32 blocks per SM): else CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
  std::string attrs;
  CUresult refused = kSuccess;
  std::string why;
  bool seen[8] = {};
  for (unsigned i = 0; i < c->num_attrs && !refused; ++i) {
    const LaunchAttr& a = c->attrs[i];
    bool known = a.id == 2 || a.id == 6;
    if (!known || seen[a.id] || (a.v.value != 0 && a.v.value != 1)) {
      refused = kInvalidValue;
      why = !known ? " error=launch_attribute_the_fake_does_not_know" : seen[a.id] ? " error=attribute_given_twice"
                                                                                  : " error=attribute_value_not_0_or_1";
      break;
    }
    seen[a.id] = true;
    if (!a.v.value) continue;
    if (!attrs.empty()) attrs += ",";
    attrs += a.id == 6 ? "pdl" : "cooperative";
    if (a.id == 2) {
      unsigned long long blocks = 1ull * c->gx * c->gy * c->gz, threads = 1ull * c->bx * c->by * c->bz;
      unsigned long long per_sm = threads ? std::min<unsigned long long>(32, 2048 / threads) : 0;
      if (blocks > 132 * per_sm) {
        refused = kCooperativeTooLarge;
        why = " error=cooperative_grid_larger_than_the_device_holds_at_once";
      }
    }
  }
  return launch_kernel("cuLaunchKernelEx", f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream,
                       kernel_params, extra, attrs.empty() ? "-" : attrs, refused, why);
}

CUresult cuEventCreate(Handle* ev, unsigned flags) {
  FAKE_ENTRY;
  if (no_context("cuEventCreate")) return kInvalidContext;
  uintptr_t h = new_handle();
  st().events[h] = 0;
  *ev = reinterpret_cast<Handle>(h);
  log_line("cuEventCreate flags=%u -> 0 event=0x%lx", flags, static_cast<unsigned long>(h));
  return kSuccess;
}

CUresult cuEventRecord(Handle ev, Handle stream) {
  FAKE_ENTRY;
  uintptr_t e = reinterpret_cast<uintptr_t>(ev), sh = reinterpret_cast<uintptr_t>(stream);
  CUresult r = st().sticky ? st().sticky : st().events.count(e) ? kSuccess : kInvalidHandle;
  if (r == kSuccess) {
    if (blocking_stream(sh)) flush_null_stream();
    drain_gates();
    if (gated(sh)) {
      st().held[sh].push_back({true, e, {}});
      st().pending_events.insert(e);  // not reached until the gate opens
    } else {
      record_now(e, sh);
    }
  }
  log_line("cuEventRecord event=%p stream=%p -> %d", ev, stream, r);
  return r;
}

CUresult cuEventSynchronize(Handle ev) {
  FAKE_ENTRY;
  if (refused_in_capture("cuEventSynchronize")) return kCaptureUnsupported;
  drain_gates();
  uintptr_t e = reinterpret_cast<uintptr_t>(ev);
  CUresult r = st().sticky;
  if (r == kSuccess && st().pending_events.count(e)) r = block_forever("cuEventSynchronize");
  log_line("cuEventSynchronize event=%p -> %d", ev, r);
  return r;
}

CUresult cuEventElapsedTime(float* ms, Handle a, Handle b) {
  FAKE_ENTRY;
  drain_gates();
  if (st().sticky || st().pending_events.count(reinterpret_cast<uintptr_t>(a)) ||
      st().pending_events.count(reinterpret_cast<uintptr_t>(b))) {
    CUresult r = st().sticky ? st().sticky : kNotReady;
    log_line("cuEventElapsedTime start=%p end=%p -> %d", a, b, r);
    return r;
  }
  *ms = static_cast<float>((st().events[reinterpret_cast<uintptr_t>(b)] - st().events[reinterpret_cast<uintptr_t>(a)]) /
                           1000.0);
  log_line("cuEventElapsedTime start=%p end=%p -> 0 ms=%g", a, b, *ms);
  return kSuccess;
}

CUresult cuEventDestroy_v2(Handle ev) {
  FAKE_ENTRY;
  CUresult r = st().events.erase(reinterpret_cast<uintptr_t>(ev)) ? kSuccess : kInvalidHandle;
  log_line("cuEventDestroy event=%p -> %d", ev, r);
  return r;
}

CUresult cuStreamCreate(Handle* stream, unsigned flags) {
  FAKE_ENTRY;
  if (no_context("cuStreamCreate")) return kInvalidContext;
  uintptr_t h = new_handle();
  st().stream_flags[h] = flags;
  st().stream_device[h] = current_device();
  *stream = reinterpret_cast<Handle>(h);
  log_line("cuStreamCreate flags=%u -> 0 stream=0x%lx", flags, static_cast<unsigned long>(h));
  return kSuccess;
}

CUresult cuStreamDestroy_v2(Handle stream) {
  FAKE_ENTRY;
  log_line("cuStreamDestroy stream=%p -> 0", stream);
  return kSuccess;
}

CUresult cuStreamBeginCapture_v2(Handle stream, int mode) {
  FAKE_ENTRY;
  uintptr_t g = new_handle();
  st().capturing[reinterpret_cast<uintptr_t>(stream)] = g;
  st().graphs[g];
  log_line("cuStreamBeginCapture stream=%p mode=%d -> 0", stream, mode);
  return kSuccess;
}

CUresult cuStreamEndCapture(Handle stream, Handle* graph) {
  FAKE_ENTRY;
  auto& c = st().capturing;
  auto it = c.find(reinterpret_cast<uintptr_t>(stream));
  if (it == c.end()) {
    log_line("cuStreamEndCapture stream=%p -> %d", stream, kInvalidValue);
    return kInvalidValue;
  }
  if (st().capture_invalidated) {
    st().graphs.erase(it->second);
    c.erase(it);
    if (c.empty()) st().capture_invalidated = false;
    *graph = nullptr;
    log_line("cuStreamEndCapture stream=%p -> %d error=capture_invalidated", stream, kCaptureInvalidated);
    return kCaptureInvalidated;
  }
  *graph = reinterpret_cast<Handle>(it->second);
  log_line("cuStreamEndCapture stream=%p -> 0 graph=0x%lx kernels=%zu", stream, static_cast<unsigned long>(it->second),
           st().graphs[it->second].size());
  c.erase(it);
  return kSuccess;
}

CUresult cuGraphInstantiateWithFlags(Handle* exec, Handle graph, unsigned long long flags) {
  FAKE_ENTRY;
  auto it = st().graphs.find(reinterpret_cast<uintptr_t>(graph));
  if (it == st().graphs.end()) {
    log_line("cuGraphInstantiate graph=%p -> %d", graph, kInvalidHandle);
    return kInvalidHandle;
  }
  uintptr_t h = new_handle();
  st().execs[h] = it->second;
  unsigned seed = 0;
  if (auto eg = st().explicit_graphs.find(reinterpret_cast<uintptr_t>(graph)); eg != st().explicit_graphs.end()) {
    // Nodes run in a random order that respects the edges (seeded, logged), as the device may.
    const std::vector<GraphNode>& nodes = eg->second;
    const char* sv = std::getenv("KDFLOW_FAKE_CUDA_SEED");
    seed = sv && *sv ? static_cast<unsigned>(std::strtoul(sv, nullptr, 10)) : std::random_device{}();
    std::mt19937 rng(seed);
    size_t n = nodes.size();
    std::map<uintptr_t, size_t> index;
    for (size_t i = 0; i < n; ++i) index[nodes[i].id] = i;
    std::vector<std::set<size_t>> ancestors(n);
    for (size_t i = 0; i < n; ++i)
      for (uintptr_t d : nodes[i].deps) {
        size_t j = index[d];
        ancestors[i].insert(j);
        ancestors[i].insert(ancestors[j].begin(), ancestors[j].end());
      }
    std::vector<size_t> waiting(n, 0);
    for (size_t i = 0; i < n; ++i) waiting[i] = nodes[i].deps.size();
    std::vector<size_t> ready;
    for (size_t i = 0; i < n; ++i)
      if (!waiting[i]) ready.push_back(i);
    while (!ready.empty()) {
      size_t pick = std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng);
      size_t i = ready[pick];
      ready.erase(ready.begin() + static_cast<long>(pick));
      if (!nodes[i].child) st().execs[h].push_back(nodes[i].launch);
      else st().execs[h].insert(st().execs[h].end(), nodes[i].children.begin(), nodes[i].children.end());
      for (size_t k = 0; k < n; ++k)
        for (uintptr_t d : nodes[k].deps)
          if (d == nodes[i].id && --waiting[k] == 0) ready.push_back(k);
    }
    // Host work naming a workspace in two nodes no path orders: they may run concurrently.
    auto workspace = [](const GraphNode& g, unsigned long long* lo, unsigned long long* hi) {
      for (const Launch& l : g.children) {
        size_t at = l.what.find("ws=");
        if (at == std::string::npos) continue;
        char* end = nullptr;
        *lo = std::strtoull(l.what.c_str() + at + 3, &end, 0);
        *hi = *lo + (end && *end == '+' ? std::strtoull(end + 1, nullptr, 10) : 0);
        return *hi > *lo;
      }
      return false;
    };
    for (size_t i = 0; i < n; ++i)
      for (size_t k = i + 1; k < n; ++k) {
        unsigned long long a0, a1, b0, b1;
        if (!nodes[i].child || !nodes[k].child || ancestors[k].count(i) || ancestors[i].count(k)) continue;
        if (workspace(nodes[i], &a0, &a1) && workspace(nodes[k], &b0, &b1) && a0 < b1 && b0 < a1)
          st().exec_conflict[h] = "nodes " + std::to_string(i) + " and " + std::to_string(k) +
                                  " may run concurrently and share a library workspace";
      }
  }
  *exec = reinterpret_cast<Handle>(h);
  log_line("cuGraphInstantiate graph=%p flags=%llu -> 0 exec=0x%lx kernels=%zu seed=%u", graph, flags,
           static_cast<unsigned long>(h), it->second.size(), seed);
  return kSuccess;
}

CUresult cuGraphLaunch(Handle exec, Handle stream) {
  FAKE_ENTRY;
  auto it = st().execs.find(reinterpret_cast<uintptr_t>(exec));
  if (it == st().execs.end()) {
    log_line("cuGraphLaunch exec=%p -> %d", exec, kInvalidHandle);
    return kInvalidHandle;
  }
  uintptr_t sh = reinterpret_cast<uintptr_t>(stream);
  if (st().sticky) {
    log_line("cuGraphLaunch exec=%p -> %d", exec, st().sticky);
    return st().sticky;
  }
  if (auto c = st().exec_conflict.find(reinterpret_cast<uintptr_t>(exec)); c != st().exec_conflict.end()) {
    st().sticky = kIllegalAddress;  // what a shared split-K workspace does to a real run, made loud
    log_line("cuGraphLaunch exec=%p -> %d error=%s", exec, kIllegalAddress, c->second.c_str());
    return kIllegalAddress;
  }
  if (blocking_stream(sh)) flush_null_stream();
  size_t racing = st().pending.size();
  for (const Launch& l : it->second) execute(l, sh);
  log_line("cuGraphLaunch exec=%p stream=%p kernels=%zu racing=%zu -> 0", exec, stream, it->second.size(), racing);
  return kSuccess;
}

CUresult cuGraphCreate(Handle* graph, unsigned flags) {
  FAKE_ENTRY;
  if (no_context("cuGraphCreate")) return kInvalidContext;
  uintptr_t g = new_handle();
  st().graphs[g];
  st().explicit_graphs[g];
  *graph = reinterpret_cast<Handle>(g);
  CUresult r = flags == 0 ? kSuccess : kInvalidValue;
  log_line("cuGraphCreate flags=%u -> %d graph=0x%lx", flags, r, static_cast<unsigned long>(g));
  return r;
}

/// CUDA_KERNEL_NODE_PARAMS_v2.
struct KernelNodeParams {
  Handle func;
  unsigned gx, gy, gz, bx, by, bz, smem;
  void** kernel_params;
  void** extra;
  Handle kern;
  Handle ctx;
};

CUresult cuGraphAddKernelNode_v2(Handle* node, Handle graph, const Handle* deps, size_t ndeps,
                                 const KernelNodeParams* p) {
  FAKE_ENTRY;
  State& s = st();
  auto g = s.explicit_graphs.find(reinterpret_cast<uintptr_t>(graph));
  auto fit = p ? s.functions.find(reinterpret_cast<uintptr_t>(p->func)) : s.functions.end();
  CUresult r = kSuccess;
  std::string why;
  if (g == s.explicit_graphs.end()) r = kInvalidHandle, why = " error=unknown_graph";
  else if (!p || fit == s.functions.end()) r = kInvalidValue, why = " error=no_function";
  else if (p->kernel_params || !p->extra) r = kInvalidValue, why = " error=fake_takes_extra_only";
  else if (ndeps && !deps) r = kInvalidValue, why = " error=null_dependencies";
  GraphNode n{};
  std::string dep_text;
  if (r == kSuccess) {
    for (size_t i = 0; i < ndeps; ++i) {
      uintptr_t d = reinterpret_cast<uintptr_t>(deps[i]);
      bool known = false;
      for (const GraphNode& o : g->second) known |= o.id == d;
      if (!known) {
        r = kInvalidValue;
        why = " error=dependency_not_in_graph";
        break;
      }
      for (uintptr_t e : n.deps)
        if (e == d) r = kInvalidValue, why = " error=duplicate_dependency";
      n.deps.push_back(d);
    }
  }
  if (r == kSuccess) {
    const Function& fn = fit->second;
    n.launch = Launch{reinterpret_cast<uintptr_t>(p->func), {p->gx, p->gy, p->gz}, {p->bx, p->by, p->bz}, p->smem, "",
                      {}, ""};
    void* buf = nullptr;
    size_t size = 0;
    for (void** e = p->extra; *e; e += 2) {
      uintptr_t key = reinterpret_cast<uintptr_t>(e[0]);
      if (key == 1) buf = e[1];
      else if (key == 2) size = *static_cast<size_t*>(e[1]);
    }
    if (buf && size) n.launch.params.assign(static_cast<const char*>(buf), size);  // copied now, as the driver does
    int limit = fn.max_dynamic_smem >= 0 ? fn.max_dynamic_smem : kDefaultSmem - static_smem(fn.name);
    if (static_cast<int>(p->smem) > limit)
      r = kInvalidValue, why = " error=dynamic_shared_memory_above_the_kernel_limit";
    const Module& m = s.modules[fn.module];
    if (r == kSuccess && m.ptx) {
      bool ok = true, foreign = false;
      auto it = m.entries.find(fn.name);
      if (it != m.entries.end()) decode(it->second, n.launch.params, &ok, &foreign);
      if (!ok) r = kInvalidValue, why = " error=parameter_buffer_does_not_match_the_ptx_signature";
      else if (foreign) r = kIllegalAddress, why = " error=pointer_into_memory_of_another_device";
    }
  }
  if (r == kSuccess) {
    n.id = new_handle();
    *node = reinterpret_cast<Handle>(n.id);
    for (uintptr_t d : n.deps) {
      // Edges as indices of the nodes in the order they were added.
      for (size_t k = 0; k < g->second.size(); ++k)
        if (g->second[k].id == d) dep_text += (dep_text.empty() ? "" : ",") + std::to_string(k);
    }
    g->second.push_back(n);
  }
  log_line("cuGraphAddKernelNode name=%s node_index=%zu deps=%s param_bytes=%zu params=%s -> %d%s",
           fit != s.functions.end() ? fit->second.name.c_str() : "?",
           g != s.explicit_graphs.end() ? g->second.size() - (r == kSuccess ? 1 : 0) : 0,
           dep_text.empty() ? "-" : dep_text.c_str(), n.launch.params.size(), hex(n.launch.params).c_str(), r,
           why.c_str());
  return r;
}

/// A kernel node's attribute: the fake knows COOPERATIVE (2) on a kernel node of a graph not
/// yet instantiated; the grid must fit on the device at once, as for cuLaunchKernelEx.
CUresult cuGraphKernelNodeSetAttribute(Handle node, int attr, const void* value) {
  FAKE_ENTRY;
  State& s = st();
  uintptr_t id = reinterpret_cast<uintptr_t>(node);
  GraphNode* n = nullptr;
  for (auto& [g, nodes] : s.explicit_graphs)
    for (GraphNode& x : nodes)
      if (x.id == id) n = &x;
  CUresult r = kSuccess;
  std::string why;
  int v = value ? *static_cast<const int*>(value) : -1;
  if (!n || n->child) r = kInvalidValue, why = " error=not_a_kernel_node";
  else if (attr != 2) r = kInvalidValue, why = " error=attribute_the_fake_does_not_know";
  else if (v != 0 && v != 1) r = kInvalidValue, why = " error=value_not_0_or_1";
  if (r == kSuccess && v == 1) {
    const Launch& l = n->launch;
    unsigned long long blocks = 1ull * l.grid[0] * l.grid[1] * l.grid[2];
    unsigned long long threads = 1ull * l.block[0] * l.block[1] * l.block[2];
    unsigned long long per_sm = threads ? std::min<unsigned long long>(32, 2048 / threads) : 0;
    if (blocks > 132 * per_sm) r = kCooperativeTooLarge, why = " error=cooperative_grid_larger_than_the_device_holds_at_once";
  }
  log_line("cuGraphKernelNodeSetAttribute node=0x%lx attr=%d value=%d -> %d%s", static_cast<unsigned long>(id), attr, v,
           r, why.c_str());
  return r;
}

/// cuGraphAddChildGraphNode: embeds a copy of `child` (as the driver clones it).
CUresult cuGraphAddChildGraphNode(Handle* node, Handle graph, const Handle* deps, size_t ndeps, Handle child) {
  FAKE_ENTRY;
  State& s = st();
  auto g = s.explicit_graphs.find(reinterpret_cast<uintptr_t>(graph));
  auto c = s.graphs.find(reinterpret_cast<uintptr_t>(child));
  CUresult r = kSuccess;
  std::string why, dep_text;
  if (g == s.explicit_graphs.end()) r = kInvalidHandle, why = " error=unknown_graph";
  else if (c == s.graphs.end() || reinterpret_cast<uintptr_t>(child) == reinterpret_cast<uintptr_t>(graph))
    r = kInvalidValue, why = " error=unknown_child_graph";
  else if (s.explicit_graphs.count(c->first)) r = kInvalidValue, why = " error=fake_embeds_captured_graphs_only";
  else if (ndeps && !deps) r = kInvalidValue, why = " error=null_dependencies";
  GraphNode n{};
  n.child = true;
  if (r == kSuccess) {
    for (size_t i = 0; i < ndeps && r == kSuccess; ++i) {
      uintptr_t d = reinterpret_cast<uintptr_t>(deps[i]);
      size_t index = g->second.size();
      for (size_t k = 0; k < g->second.size(); ++k)
        if (g->second[k].id == d) index = k;
      if (index == g->second.size()) r = kInvalidValue, why = " error=dependency_not_in_graph";
      for (uintptr_t e : n.deps)
        if (e == d) r = kInvalidValue, why = " error=duplicate_dependency";
      n.deps.push_back(d);
      dep_text += (dep_text.empty() ? "" : ",") + std::to_string(index);
    }
  }
  if (r == kSuccess) {
    n.children = c->second;
    n.id = new_handle();
    *node = reinterpret_cast<Handle>(n.id);
    g->second.push_back(n);
  }
  log_line("cuGraphAddChildGraphNode child=%p node_index=%zu deps=%s work=%zu -> %d%s", child,
           g != s.explicit_graphs.end() ? g->second.size() - (r == kSuccess ? 1 : 0) : 0,
           dep_text.empty() ? "-" : dep_text.c_str(), c != s.graphs.end() ? c->second.size() : 0, r, why.c_str());
  return r;
}

CUresult cuGraphDestroy(Handle graph) {
  FAKE_ENTRY;
  st().explicit_graphs.erase(reinterpret_cast<uintptr_t>(graph));
  CUresult r = st().graphs.erase(reinterpret_cast<uintptr_t>(graph)) ? kSuccess : kInvalidHandle;
  log_line("cuGraphDestroy graph=%p -> %d", graph, r);
  return r;
}

CUresult cuGraphExecDestroy(Handle exec) {
  FAKE_ENTRY;
  CUresult r = st().execs.erase(reinterpret_cast<uintptr_t>(exec)) ? kSuccess : kInvalidHandle;
  log_line("cuGraphExecDestroy exec=%p -> %d", exec, r);
  return r;
}

CUresult cuGetErrorName(CUresult err, const char** str) {
  FAKE_ENTRY;
  *str = error_name(err);
  return *str ? kSuccess : kInvalidValue;
}

CUresult cuGetErrorString(CUresult err, const char** str) {
  FAKE_ENTRY;
  *str = err == kNoBinary ? "no kernel image is available for execution on the device (fake)"
         : err == kNoDevice ? "no CUDA-capable device is detected (fake)"
                            : "fake driver error";
  return kSuccess;
}

/// cuGetProcAddress's table: per base name, the CUDA version from which each ABI is what
/// the name resolves to (as cuda.h's versioned symbols: "cuMemAlloc" at 2000 is the 32-bit
/// cuMemAlloc, at 3020 cuMemAlloc_v2; "cuCtxCreate" at 11040 is _v3, at 12050 _v4). The fake
/// implements one ABI per name; a request that resolves to another one gets wrong_abi, which
/// fails loudly when called, and a version older than the name's first one gets nothing
/// (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT).
struct ProcEntry {
  const char* name;
  int since;
  void* fn;  // null: an ABI the fake does not implement
};

CUresult wrong_abi() {
  log_line("called an entry point with an ABI the fake does not implement (cuGetProcAddress asked for another "
           "version) -> %d",
           kInvalidValue);
  return kInvalidValue;
}

static const ProcEntry kProcs[] = {
    {"cuInit", 2000, reinterpret_cast<void*>(&cuInit)},
    {"cuDeviceGet", 2000, reinterpret_cast<void*>(&cuDeviceGet)},
    {"cuDeviceGetAttribute", 2000, reinterpret_cast<void*>(&cuDeviceGetAttribute)},
    {"cuDeviceGetName", 2000, reinterpret_cast<void*>(&cuDeviceGetName)},
    {"cuDeviceTotalMem", 2000, nullptr},  // an older ABI
    {"cuDeviceTotalMem", 3020, reinterpret_cast<void*>(&cuDeviceTotalMem_v2)},
    {"cuMemHostAlloc", 2020, reinterpret_cast<void*>(&cuMemHostAlloc)},
    {"cuMemFreeHost", 2000, reinterpret_cast<void*>(&cuMemFreeHost)},
    {"cuMemHostGetDevicePointer", 2020, nullptr},  // an older ABI
    {"cuMemHostGetDevicePointer", 3020, reinterpret_cast<void*>(&cuMemHostGetDevicePointer_v2)},
    {"cuStreamWaitValue32", 8000, nullptr},  // an older ABI
    {"cuStreamWaitValue32", 11070, reinterpret_cast<void*>(&cuStreamWaitValue32_v2)},
    {"cuDevicePrimaryCtxRetain", 7000, reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", 7000, nullptr},  // an older ABI
    {"cuDevicePrimaryCtxRelease", 11000, reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2)},
    {"cuCtxCreate", 2000, nullptr},  // an older ABI
    {"cuCtxCreate", 3020, reinterpret_cast<void*>(&cuCtxCreate_v2)},
    {"cuCtxCreate", 11040, nullptr},  // a newer ABI
    {"cuCtxCreate", 12050, nullptr},  // a newer ABI
    {"cuCtxDestroy", 2000, nullptr},  // an older ABI
    {"cuCtxDestroy", 4000, reinterpret_cast<void*>(&cuCtxDestroy_v2)},
    {"cuCtxSetCurrent", 4000, reinterpret_cast<void*>(&cuCtxSetCurrent)},
    {"cuCtxSynchronize", 2000, reinterpret_cast<void*>(&cuCtxSynchronize)},
    {"cuModuleLoadDataEx", 2010, reinterpret_cast<void*>(&cuModuleLoadDataEx)},
    {"cuModuleGetFunction", 2000, reinterpret_cast<void*>(&cuModuleGetFunction)},
    {"cuModuleUnload", 2000, reinterpret_cast<void*>(&cuModuleUnload)},
    {"cuFuncSetAttribute", 9000, reinterpret_cast<void*>(&cuFuncSetAttribute)},
    {"cuFuncGetAttribute", 2020, reinterpret_cast<void*>(&cuFuncGetAttribute)},
    {"cuMemAlloc", 2000, nullptr},  // an older ABI
    {"cuMemAlloc", 3020, reinterpret_cast<void*>(&cuMemAlloc_v2)},
    {"cuMemFree", 2000, nullptr},  // an older ABI
    {"cuMemFree", 3020, reinterpret_cast<void*>(&cuMemFree_v2)},
    {"cuMemcpyHtoD", 2000, nullptr},  // an older ABI
    {"cuMemcpyHtoD", 3020, reinterpret_cast<void*>(&cuMemcpyHtoD_v2)},
    {"cuMemcpyHtoDAsync", 2000, nullptr},  // an older ABI
    {"cuMemcpyHtoDAsync", 3020, reinterpret_cast<void*>(&cuMemcpyHtoDAsync_v2)},
    {"cuMemcpyDtoH", 2000, nullptr},  // an older ABI
    {"cuMemcpyDtoH", 3020, reinterpret_cast<void*>(&cuMemcpyDtoH_v2)},
    {"cuMemsetD8", 2000, nullptr},  // an older ABI
    {"cuMemsetD8", 3020, reinterpret_cast<void*>(&cuMemsetD8_v2)},
    {"cuLaunchKernel", 4000, reinterpret_cast<void*>(&cuLaunchKernel)},
    {"cuDeviceGetCount", 2000, reinterpret_cast<void*>(&cuDeviceGetCount)},
    {"cuLaunchKernelEx", 11080, reinterpret_cast<void*>(&cuLaunchKernelEx)},
    {"cuGraphKernelNodeSetAttribute", 11000, reinterpret_cast<void*>(&cuGraphKernelNodeSetAttribute)},
    {"cuEventCreate", 2000, reinterpret_cast<void*>(&cuEventCreate)},
    {"cuEventRecord", 2000, reinterpret_cast<void*>(&cuEventRecord)},
    {"cuEventSynchronize", 2000, reinterpret_cast<void*>(&cuEventSynchronize)},
    {"cuEventElapsedTime", 2000, reinterpret_cast<void*>(&cuEventElapsedTime)},
    {"cuEventDestroy", 2000, nullptr},  // an older ABI
    {"cuEventDestroy", 4000, reinterpret_cast<void*>(&cuEventDestroy_v2)},
    {"cuStreamCreate", 2000, reinterpret_cast<void*>(&cuStreamCreate)},
    {"cuStreamDestroy", 2000, nullptr},  // an older ABI
    {"cuStreamDestroy", 4000, reinterpret_cast<void*>(&cuStreamDestroy_v2)},
    {"cuStreamBeginCapture", 10000, nullptr},  // an older ABI
    {"cuStreamBeginCapture", 10010, reinterpret_cast<void*>(&cuStreamBeginCapture_v2)},
    {"cuStreamEndCapture", 10000, reinterpret_cast<void*>(&cuStreamEndCapture)},
    {"cuGraphInstantiateWithFlags", 11040, reinterpret_cast<void*>(&cuGraphInstantiateWithFlags)},
    {"cuGraphInstantiate", 12000, reinterpret_cast<void*>(&cuGraphInstantiateWithFlags)},
    {"cuGraphLaunch", 10000, reinterpret_cast<void*>(&cuGraphLaunch)},
    {"cuGraphCreate", 10000, reinterpret_cast<void*>(&cuGraphCreate)},
    {"cuGraphAddKernelNode", 10000, nullptr},  // an older ABI
    {"cuGraphAddKernelNode", 12000, reinterpret_cast<void*>(&cuGraphAddKernelNode_v2)},
    {"cuGraphAddChildGraphNode", 10000, reinterpret_cast<void*>(&cuGraphAddChildGraphNode)},
    {"cuEventQuery", 2000, reinterpret_cast<void*>(&cuEventQuery)},
    {"cuDriverGetVersion", 2020, reinterpret_cast<void*>(&cuDriverGetVersion)},
    {"cuGraphDestroy", 10000, reinterpret_cast<void*>(&cuGraphDestroy)},
    {"cuGraphExecDestroy", 10000, reinterpret_cast<void*>(&cuGraphExecDestroy)},
    {"cuGetErrorName", 6000, reinterpret_cast<void*>(&cuGetErrorName)},
    {"cuGetErrorString", 6000, reinterpret_cast<void*>(&cuGetErrorString)},
};

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags, int* status) {
  FAKE_ENTRY;
  *pfn = nullptr;
  CUresult r = kNotFound;
  int why = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  const ProcEntry* best = nullptr;
  if (!env_on("KDFLOW_FAKE_CUDA_NO_PROC_ADDRESS"))
    for (const ProcEntry& e : kProcs)
      if (std::strcmp(e.name, symbol) == 0) {
        why = 2;  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, unless a row fits
        if (e.since <= version && (!best || e.since > best->since)) best = &e;
      }
  if (best) {
    *pfn = best->fn ? best->fn : reinterpret_cast<void*>(&wrong_abi);
    r = kSuccess;
    why = 0;
  }
  if (status) *status = why;
  log_line("cuGetProcAddress symbol=%s version=%d flags=%llu -> %d%s", symbol, version, flags, r,
           best && !best->fn ? " abi=not_the_fakes" : "");
  return r;
}

/// Not a driver entry point: tests call it (dlsym) to drop all state, as if the process
/// that held a hung context had exited.
void kdflow_fake_cuda_reset() {
  FAKE_ENTRY;
  // As if the process ended: what it held goes, pinned host memory included.
  for (void* p : st().host_allocs) std::free(p);
  st().host_allocs.clear();
  st() = State{};
  g_hung = false;
  t_current = 0;
  log_line("kdflow_fake_cuda_reset");
}

/// Not a driver entry point: the device of this thread's current context (-1: none), for the
/// fake NCCL.
int kdflow_fake_cuda_current_device() {
  FAKE_ENTRY;
  return t_current != 0 && st().live_contexts.count(t_current) ? current_device() : -1;
}

/// Not a driver entry point: the device whose memory holds [p, p + n) in one allocation, or -1.
int kdflow_fake_cuda_pointer_device(CUdeviceptr p, size_t n) {
  FAKE_ENTRY;
  Alloc* a = find(p, n);
  return a ? a->device : -1;
}

/// Not a driver entry point: the device of a stream's context (-1: not a stream; the NULL
/// stream: the current context's device).
int kdflow_fake_cuda_stream_device(Handle stream) {
  FAKE_ENTRY;
  uintptr_t sh = reinterpret_cast<uintptr_t>(stream);
  if (sh == 0) return t_current != 0 ? current_device() : -1;
  auto it = st().stream_device.find(sh);
  return it == st().stream_device.end() ? -1 : it->second;
}

/// Not a driver entry point: the fake cuBLAS writes its lines through this, so they carry
/// the same thread numbers and never interleave with the driver's.
void kdflow_fake_cuda_log(const char* line) {
  FAKE_ENTRY;
  log_line("%s", line);
}

/// Not a driver entry point: the fake cuBLAS plants a fault in its queued work (a sticky
/// error, as a faulting kernel of the library would leave).
void kdflow_fake_cuda_fault(CUresult r) {
  FAKE_ENTRY;
  if (st().sticky == 0) st().sticky = r;
  log_line("fault host-work result=%d", r);
}

/// Not a driver entry point (see the header): host bytes behind [p, p + n), or null.
unsigned char* kdflow_fake_cuda_host_pointer(CUdeviceptr p, size_t n) {
  FAKE_ENTRY;
  CUdeviceptr base = 0;
  Alloc* a = find(p, n, &base);
  return a ? a->mem.data() + (p - base) : nullptr;
}

/// Not a driver entry point (see the header): queues fn(arg) on `stream`. Fails as a launch
/// would: an unknown stream (not the NULL stream, not created), a sticky fault.
CUresult kdflow_fake_cuda_enqueue(Handle stream, const char* what, void (*fn)(void*), void* arg) {
  FAKE_ENTRY;
  State& s = st();
  uintptr_t sh = reinterpret_cast<uintptr_t>(stream);
  CUresult r = s.sticky;
  if (r == kSuccess && sh != 0 && !s.stream_flags.count(sh)) r = kInvalidHandle;
  bool captured = s.capturing.count(sh) > 0;
  if (r == kSuccess) {
    queue_host_work(Launch{0, {1, 1, 1}, {1, 1, 1}, 0, "", [fn, arg] { fn(arg); }, what ? what : "host work"}, sh);
  }
  log_line("enqueue what=%s stream=0x%lx captured=%d racing=%zu -> %d", what ? what : "?",
           static_cast<unsigned long>(sh), captured ? 1 : 0, captured ? size_t(0) : s.pending.size(), r);
  return r;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
  FAKE_ENTRY;
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

}  // extern "C"

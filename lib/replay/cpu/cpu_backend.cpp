// cpu_backend.cpp — the CPU back end of replay (backend.h's make_cpu_backend): device memory
// is host memory, kernels are the device modules' CUDA source compiled by cpu_kernels.h,
// library calls are a reference GEMM. Everything runs synchronously on launch(), so the
// work queue is trivially in order; markers are host time stamps.
//
// --mode graph and --mode dag: the CPU has no graphs (caps().graphs/dag false); the engine
// runs the same launches eagerly. Each launch already spreads its blocks over every worker
// thread, so running independent launches concurrently would gain little on the CPU.
#include <sys/sysinfo.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <ostream>

#include <fmt/format.h>

#include "../backend.h"
#include "compile_cache.h"
#include "frontend/clang/tvm_source_fixups.h"
#include "kdflow/support/progress.h"
#include "guarded_memory.h"
#include "kernel_safety.h"
#include "kernel_watchdog.h"
#include "kdflow/replay/cpu_kernels.h"

namespace kdflow::replay_backend {

namespace {

using Clock = std::chrono::steady_clock;

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Column-major C = op(A)·op(B) (alpha 1, beta 0), as cublasSgemm_v2 computes it.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;  // the sum in double: a reference, not a speed record
      for (int64_t p = 0; p < k; ++p) {
        float av = ta ? a[p + i * lda] : a[i + p * lda];
        float bv = tb ? b[j + p * ldb] : b[p + j * ldb];
        s += static_cast<double>(av) * bv;
      }
      c[i + j * ldc] = static_cast<float>(s);
    }
  }
}

class CpuBackend : public Backend {
 public:
  CpuBackend(const BackendOptions& opt, std::ostream& log)
      : opt_(opt), log_(log), watchdog_(opt.launch_time_limit_s) {
    // Progress per launch on a terminal (kernels of a large model take seconds on the CPU):
    // the same one-line display as extract's, only when stderr is a terminal and the log
    // is not silenced (-q gives the engine a null stream).
    progress_.enabled = log_.rdbuf() != nullptr && progress_wanted(false);
    progress_.err = &log_;
  }
  ~CpuBackend() override {
    if (armed_) cpu::disarm_fault_reporter();
    for (auto& [p, bytes] : allocations_) std::free(reinterpret_cast<void*>(p));
  }

  const char* name() const override { return "cpu"; }
  Capabilities caps() const override {
    Capabilities c;
    c.asynchronous = false;
    c.timing = false;  // no device clock: the engine takes host clock stamps around each step
    c.gate = false;
    c.graphs = false;
    c.dag = false;
    c.library_calls = true;
    c.guard_pages = true;
    c.queue_depth = 0;
    return c;
  }

  Status open() override {
    cpu::CpuDeviceOptions o;
    o.threads = opt_.threads > 0 ? static_cast<unsigned>(opt_.threads) : 0;
    o.poison = opt_.poison;
    if (opt_.compile_cache) {
      // The compile cache (compile_cache.h): none where no folder can be named (no HOME).
      o.cache_dir = cpu::default_cache_dir();
      o.cache_max_bytes = cpu::default_cache_max_bytes();
    }
    auto dev = cpu::CpuDevice::create(o);
    if (!dev) return dev.error();
    device_ = dev.take();
    struct sysinfo si {};
    uint64_t avail = 0;
    if (sysinfo(&si) == 0) avail = static_cast<uint64_t>(si.freeram + si.bufferram) * si.mem_unit;
    info_.name = fmt::format("host CPU ({} threads)", device_->threads());
    info_.library = "";
    info_.driver = "";
    info_.library_calls = "reference GEMM";
    info_.memory_bytes = avail;
    info_.max_shared_memory = 227 * 1024;  // as sm_90, so a plan that fits a GPU fits here
    info_.max_threads_per_block = 1024;
    return Status::ok();
  }
  const DeviceInfo& info() const override { return info_; }
  std::vector<ModuleFormat> module_formats() const override { return {ModuleFormat::CudaSource}; }

  Status load_modules(std::vector<ModuleAlternatives>& modules, std::string* report_module,
                      ModuleFormat* report_format) override {
    std::string names;
    for (ModuleAlternatives& alt : modules) {
      const ModuleFile* src = nullptr;
      for (const ModuleFile& f : alt.files)
        if (f.format == ModuleFormat::CudaSource) src = &f;
      if (!src) {
        std::string path = alt.files.empty() ? std::string("device module") : alt.files.front().path;
        return file_error(path, "the CPU back end needs the module's CUDA source (device.cu) beside it",
                          ExitCode::NoInput);
      }
      // The safety check on the AST comes first: nothing of a refused module is compiled.
      // Where clang and nvcc read TVM's text differently, nvcc's meaning (tvm_source_fixups.h).
      std::string text = detail::tvm_source_fixups(src->bytes);
      auto safety = cpu::check_kernel_safety(text, src->path);
      if (!safety) return safety.error();
      if (Status s = safety->status(); !s) return s;
      // Warp barriers where the lanes of a warp must stay in step (warp_lockstep.h), last first.
      for (auto it = safety->warp_sync_points.rbegin(); it != safety->warp_sync_points.rend(); ++it)
        if (*it <= text.size()) text.insert(*it, "__syncwarp(); ");
      if (progress_.enabled) print_terminal_progress(&progress_, 0, 1, "cpu: compiling " + base_name(src->path));
      const Clock::time_point compile_start = Clock::now();
      // Kernels every launch of which has one thread per block: compiled as one thread.
      // Of those, the ones whose blocks can run in batches (cpu_kernels.h's BlockTile).
      // KDFLOW_CPU_BATCH=off (a benchmark knob, docs/benchmarks.md): one block per call.
      const char* batch = std::getenv("KDFLOW_CPU_BATCH");
      const bool batches = !(batch && std::string(batch) == "off");
      std::set<std::string> one_thread;
      std::map<std::string, cpu::BlockTile> tiles;
      for (const auto& [name, sizes] : alt.block_threads) {
        if (sizes.size() != 1 || *sizes.begin() != 1) continue;
        one_thread.insert(name);
        if (!batches) continue;
        if (auto g = alt.grids.find(name); g != alt.grids.end())
          if (cpu::BlockTile t = cpu::choose_block_tile(g->second, device_->vector_lanes()); t.w) tiles[name] = t;
      }
      // Kernels launched with one block shape of several threads: compiled for that shape.
      std::map<std::string, cpu::BlockShape> blocks;
      for (const auto& [name, shapes] : alt.blocks)
        if (shapes.size() == 1 && !one_thread.count(name)) blocks[name] = *shapes.begin();
      auto id = device_->compile_module(text, src->path, one_thread, tiles, blocks);
      if (progress_.enabled) print_terminal_progress(&progress_, 1, 1, "");
      if (!id) return id.error();
      module_ids_.push_back(*id);
      const cpu::CpuModuleOrigin origin = device_->origin(*id);
      if (!origin.note.empty()) log_ << "replay: cpu: " << base_name(src->path) << ": " << origin.note << "\n";
      std::vector<cpu::CpuKernel> ks = device_->kernels(*id);
      size_t fibers = 0, fissioned = 0, one = 0, batched = 0;
      for (const cpu::CpuKernel& k : ks)
        fibers += k.fibers, fissioned += k.block_loop && !k.one_thread && !k.plain_loop, one += k.one_thread && !k.tile.w,
            batched += k.tile.w > 0;
      // "loaded from the compile cache" (a hit, key named) or "compiled for the host" (bench/ reads both).
      log_ << fmt::format("replay: cpu: {} {} in {:.2f} s: {} kernels: {} synchronise and run "
                          "each block as loops over its threads between barriers, {} launched with one-thread "
                          "blocks run batches of blocks as loops over them, {} synchronise in one-thread blocks "
                          "only (compiled as one thread), {} synchronise otherwise (one fiber per thread), "
                          "{} run each block as a loop{}\n",
                          base_name(src->path),
                          origin.from_cache ? "loaded from the compile cache (key " + origin.key.substr(0, 16) + ")"
                                            : std::string("compiled for the host"),
                          std::chrono::duration<double>(Clock::now() - compile_start).count(), ks.size(), fissioned,
                          batched, one, fibers, ks.size() - fibers - fissioned - one - batched,
                          safety->warp_sync_points.empty()
                              ? std::string()
                              : fmt::format("; {} warp barrier{} added where a warp's lanes must stay in step",
                                            safety->warp_sync_points.size(),
                                            safety->warp_sync_points.size() == 1 ? "" : "s"));
      if (!names.empty()) names += ", ";
      names += base_name(src->path);
    }
    if (report_module) *report_module = names;
    if (report_format) *report_format = ModuleFormat::CudaSource;
    return Status::ok();
  }

  Fault alloc(uint64_t bytes, DevicePtr* out) override {
    if (opt_.guard) {
      // --guard: each allocation against a PROT_NONE page (guarded_memory.h); a kernel that
      // reaches past it (and past the engine's redzone, which comes first) faults at once and
      // the reporter names the kernel, the launch, the argument and the byte offset.
      if (!guarded_) guarded_ = std::make_unique<cpu::GuardedMemory>(kMaxGuardedAllocations);
      uint32_t id = static_cast<uint32_t>(guarded_->size());
      auto p = guarded_->allocate(id, fmt::format("allocation {}", id), bytes);
      if (!p) return fault("cpu alloc", p.error().message);
      if (opt_.poison && bytes) std::memset(*p, 0xFF, bytes);
      *out = reinterpret_cast<DevicePtr>(*p);
      guarded_ids_[*out] = id;
      return Fault::none();
    }
    uint64_t rounded = (std::max<uint64_t>(bytes, 1) + 63) / 64 * 64;
    if (rounded < bytes) return fault("cpu alloc", "allocation size overflows");
    void* p = std::aligned_alloc(64, rounded);
    if (!p) return fault("cpu alloc", fmt::format("the host could not allocate {} bytes", bytes));
    // Deterministic contents (CUDA leaves them undefined): zeros, or under --poison 0xFF bytes.
    std::memset(p, opt_.poison ? 0xFF : 0, rounded);
    *out = reinterpret_cast<DevicePtr>(p);
    allocations_[*out] = rounded;
    return Fault::none();
  }
  void free(DevicePtr p) override {
    if (guarded_ids_.count(p)) return;  // the guarded mappings go with the back end
    auto it = allocations_.find(p);
    if (it == allocations_.end()) return;
    std::free(reinterpret_cast<void*>(p));
    allocations_.erase(it);
  }
  Fault upload(DevicePtr dst, const void* src, uint64_t bytes) override {
    if (bytes) std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return Fault::none();
  }
  Fault download(void* dst, DevicePtr src, uint64_t bytes) override {
    if (bytes) std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return Fault::none();
  }
  Fault memset(DevicePtr dst, unsigned char value, uint64_t bytes) override {
    if (bytes) std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return Fault::none();
  }

  Status prepare(const std::vector<KernelLaunch>& launches, const std::vector<LibraryCallArgs>& calls) override {
    launches_.clear();
    for (const KernelLaunch& kl : launches) {
      const PlanLaunch& pl = *kl.launch;
      Prepared p;
      int found = 0;
      for (int id : module_ids_) {
        if (!device_->has_kernel(id, pl.name)) continue;
        ++found;
        auto k = device_->kernel(id, pl.name);
        if (!k) return k.error();
        p.kernel = *k;
      }
      if (found != 1)
        return Error{fmt::format("{}: error: kernel {} ({}): {} of the device modules define it{}", opt_.label,
                                 kl.index, pl.name, found, found == 0 ? "" : " (it must be exactly one)"),
                     ExitCode::DataError};
      if (p.kernel.params != pl.args.size())
        return Error{fmt::format("{}: error: kernel {} ({}): the plan passes {} arguments, the compiled kernel "
                                 "takes {}",
                                 opt_.label, kl.index, pl.name, pl.args.size(), p.kernel.params),
                     ExitCode::DataError};
      // KDFLOW_CPU_FIBERS (a benchmark knob, docs/benchmarks.md): "all" runs every kernel's
      // blocks as fibers, also those that never synchronise; set at all, each kernel's way is logged.
      if (const char* how = std::getenv("KDFLOW_CPU_FIBERS"); how && *how) {
        if (std::string(how) == "all") p.kernel.fibers = true;
        if (logged_.insert(pl.name).second)
          log_ << fmt::format("replay: cpu: kernel {} runs each block {}\n", pl.name,
                              p.kernel.fibers       ? "as fibers" + (p.kernel.fibers_why.empty()
                                                                         ? std::string()
                                                                         : " (" + p.kernel.fibers_why + ")")
                              : p.kernel.tile.w     ? fmt::format("as batches of {}x{} blocks", p.kernel.tile.w,
                                                                      p.kernel.tile.h)
                              : p.kernel.one_thread ? std::string("as one thread (its barriers do nothing)") +
                                                          (p.kernel.unbatched_why.empty()
                                                               ? std::string()
                                                               : " (not batched: " + p.kernel.unbatched_why + ")")
                              : p.kernel.block_loop && !p.kernel.plain_loop
                                  ? std::string("as thread loops between barriers")
                                                    : std::string("as a loop"));
      }
      p.launch = &pl;
      launches_[kl.index] = std::move(p);
    }
    calls_.clear();
    for (const LibraryCallArgs& c : calls) {
      const PlanLibraryCall& pc = *c.call;
      if (pc.name != "tvm.contrib.cublas.matmul" && pc.name != "tvm.contrib.cublas.batch_matmul")
        return Error{fmt::format("{}: error: library call {} ({}) has no CPU equivalent in kdflow", opt_.label,
                                 c.index, pc.name),
                     ExitCode::Unavailable};
      calls_[c.index] = c;
    }
    return Status::ok();
  }

  Status bind(const std::vector<KernelLaunch>& launches, const std::vector<LibraryCallArgs>& calls) override {
    for (const KernelLaunch& kl : launches) {
      auto it = launches_.find(kl.index);
      if (it == launches_.end())
        return Error{fmt::format("{}: error: launch {} was not prepared (a kdflow bug)", opt_.label, kl.index),
                     ExitCode::Software};
      Prepared& p = it->second;
      p.launch = kl.launch;
      p.packed = kl.packed;
      p.args.assign(p.launch->args.size(), nullptr);
      for (size_t i = 0; i < p.launch->args.size(); ++i) {
        const PlanArg& a = p.launch->args[i];
        if (static_cast<uint64_t>(a.position) + a.size > p.packed.size())
          return Error{fmt::format("{}: error: kernel {} ({}): argument {} lies outside the packed parameters "
                                   "(a kdflow bug)",
                                   opt_.label, kl.index, p.launch->name, i),
                       ExitCode::Software};
        p.args[i] = p.packed.data() + a.position;
      }
      {
        // Every launch gets its fault line (a stack overflow or a wild pointer is reported
        // with or without --guard); the buffers are named only with --guard.
        cpu::LaunchContext ctx;
        ctx.where = opt_.label;
        ctx.kernel = p.launch->name;
        ctx.kernel_id = static_cast<uint64_t>(p.launch->kernel);
        ctx.launch_index = kl.index;
        for (size_t i = 0; i < p.launch->args.size(); ++i) {
          const PlanArg& a = p.launch->args[i];
          cpu::LaunchArgument la;
          la.index = static_cast<unsigned>(i);
          if (a.kind == PlanArg::Kind::Pointer && i < kl.pointers.size()) {
            if (guarded_) {
              auto g = guarded_ids_.find(kl.pointers[i] - a.offset);
              if (g != guarded_ids_.end()) la.buffer_id = g->second;
            }
            la.offset = a.offset;
          }
          ctx.args.push_back(la);
        }
        p.fault_line = std::make_unique<cpu::PreparedLaunch>(std::move(ctx));
      }
    }
    if (!armed_) {
      if (Status s = cpu::arm_fault_reporter(guarded_.get()); !s) return s;
      armed_ = true;
    }
    for (const LibraryCallArgs& c : calls) calls_[c.index] = c;
    return Status::ok();
  }

  Fault launch(size_t launch_index) override {
    auto it = launches_.find(launch_index);
    if (it == launches_.end()) return fault("cpu kernel", "launch was not prepared (a kdflow bug)");
    Prepared& p = it->second;
    if (progress_.enabled) {
      print_terminal_progress(&progress_, launch_index, launches_.size(),
                              fmt::format("cpu: node {} {}", p.launch->node, p.launch->name));
      if (launch_index + 1 == launches_.size()) print_terminal_progress(&progress_, 1, 1, "");
    }
    cpu::CurrentLaunchScope scope(p.fault_line.get());
    if (watchdog_.limit() > 0) {
      const cpu::CpuDevice* dev = device_.get();
      watchdog_.start(p.fault_line ? p.fault_line->prefix() + p.fault_line->kernel() : p.launch->name,
                      [dev] { return dev->running_blocks(); });
    }
    Status s = device_->launch(p.kernel, p.launch->grid, p.launch->block, p.launch->shared_memory, p.args.data());
    watchdog_.stop();
    if (!s) return fault("cpu kernel", s.error().message);
    return Fault::none();
  }

  Fault library_call(size_t call_index) override {
    auto it = calls_.find(call_index);
    if (it == calls_.end()) return fault("cpu gemm", "library call was not prepared (a kdflow bug)");
    const LibraryCallArgs& c = it->second;
    const PlanLibraryCall& p = *c.call;
    const auto* a = reinterpret_cast<const float*>(c.a);
    const auto* b = reinterpret_cast<const float*>(c.b);
    auto* out = reinterpret_cast<float*>(c.c);
    // As cuBLAS is called: first operand TVM's B (op transb, ldb), second TVM's A.
    for (int64_t i = 0; i < (p.batched ? p.batch : 1); ++i)
      sgemm(p.transb, p.transa, p.m, p.n, p.k, b + i * p.stride_b, p.ldb, a + i * p.stride_a, p.lda,
            out + i * p.stride_c, p.ldc);
    return Fault::none();
  }

  Fault synchronize() override { return Fault::none(); }

  Status make_markers(size_t n) override {
    markers_.assign(n, Clock::time_point{});
    return Status::ok();
  }
  Fault record(size_t marker) override {
    if (marker >= markers_.size()) return fault("cpu marker", "no such marker (a kdflow bug)");
    markers_[marker] = Clock::now();
    return Fault::none();
  }
  Poll poll(size_t, Fault*) override { return Poll::Done; }
  Expected<double> elapsed_us(size_t from, size_t to) override {
    if (from >= markers_.size() || to >= markers_.size())
      return Error{"error: no such marker (a kdflow bug)", ExitCode::Software};
    return std::chrono::duration<double, std::micro>(markers_[to] - markers_[from]).count();
  }

  Status build_graph(const std::vector<GraphStep>&, bool) override {
    return Error{"error: the CPU back end has no graphs; it runs --mode graph and dag eagerly (a kdflow bug if "
                 "asked)",
                 ExitCode::Software};
  }
  Fault launch_graph() override { return fault("cpu graph", "no graphs on the CPU (a kdflow bug if asked)"); }
  void abandon() override {}

 private:
  struct Prepared {
    cpu::CpuKernel kernel;
    const PlanLaunch* launch = nullptr;
    std::string packed;
    std::vector<void*> args;
    std::unique_ptr<cpu::PreparedLaunch> fault_line;  ///< --guard: what the fault reporter prints
  };
  static constexpr size_t kMaxGuardedAllocations = 16384;
  static Fault fault(const char* api, std::string text) {
    Fault f;
    f.code = 1;
    f.api = api;
    f.text = std::move(text);
    return f;
  }

  BackendOptions opt_;
  std::ostream& log_;
  DeviceInfo info_;
  std::unique_ptr<cpu::CpuDevice> device_;
  cpu::KernelWatchdog watchdog_;  ///< after device_: stopped before the device goes
  std::vector<int> module_ids_;
  std::map<DevicePtr, uint64_t> allocations_;
  std::set<std::string> logged_;  ///< kernels whose way of running was logged (KDFLOW_CPU_FIBERS)
  std::unique_ptr<cpu::GuardedMemory> guarded_;  ///< --guard
  std::map<DevicePtr, uint32_t> guarded_ids_;
  bool armed_ = false;
  std::map<size_t, Prepared> launches_;
  std::map<size_t, LibraryCallArgs> calls_;
  std::vector<Clock::time_point> markers_;
  TerminalProgress progress_;
};

}  // namespace

Expected<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& opt, std::ostream& log) {
  return std::unique_ptr<Backend>(new CpuBackend(opt, log));
}

}  // namespace kdflow::replay_backend

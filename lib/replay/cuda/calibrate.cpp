// calibrate.cpp — `kdflow calibrate` (include/kdflow/replay/calibrate.h): the microbenchmarks of
// calibrate_kernels.cu on the CUDA driver API, each launch timed alone between two events on a
// stream of its own (as replay times a kernel), the median of `repeat` runs after one warm-up.
#include "kdflow/replay/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <numeric>
#include <random>

#include "calibrate_ptx.h"
#include "cuda_driver.h"

namespace kdflow {
namespace {

using namespace cuda;

// cuDeviceGetAttribute values (cuda.h, CUDA 13) this file reads besides cuda_driver.h's.
constexpr int kClockRateKHz = 13;
constexpr int kL2Bytes = 38;
constexpr int kMaxThreadsPerSm = 39;
constexpr int kSharedPerSm = 81;
constexpr int kMaxBlocksPerSm = 106;

/// The profile's id from the device's name: the GPUs the time model knows, else the name itself.
std::string id_from_name(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const char* known : {"H200", "H100", "A100"})
    if (upper.find(known) != std::string::npos) {
      std::string id = known;
      std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
      return id;
    }
  if (upper.find(" L4") != std::string::npos || upper.rfind("L4", 0) == 0) return "l4";
  std::string id;
  for (unsigned char c : name) id += std::isalnum(c) ? static_cast<char>(std::tolower(c)) : '_';
  return id.empty() ? "gpu" : id;
}

/// A kernel's parameters packed as cuLaunchKernel's `extra` buffer takes them (replay's way too):
/// each at its natural alignment, no padding after the last.
struct Params {
  std::vector<char> bytes;
  template <class T>
  Params& add(T v) {
    size_t at = (bytes.size() + sizeof(T) - 1) / sizeof(T) * sizeof(T);
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
};

class Session {
 public:
  Session(Driver d, std::ostream* log) : d_(std::move(d)), log_(log) {}
  ~Session() {
    for (CUdeviceptr p : allocations_) d_.cuMemFree(p);
    if (ev0_) d_.cuEventDestroy(ev0_);
    if (ev1_) d_.cuEventDestroy(ev1_);
    if (module_ && d_.cuModuleUnload) d_.cuModuleUnload(module_);
    if (stream_ && d_.cuStreamDestroy) d_.cuStreamDestroy(stream_);
    if (primary_ && d_.cuDevicePrimaryCtxRelease) d_.cuDevicePrimaryCtxRelease(device_);
    else if (ctx_ && d_.cuCtxDestroy) d_.cuCtxDestroy(ctx_);
  }

  Expected<Calibration> run(const CalibrateOptions& opt) {
    if (Status s = check(d_.cuInit(0), "cuInit", ExitCode::Unavailable); !s) return s.error();
    if (Status s = check(d_.cuDeviceGet(&device_, opt.device), fmt::format("cuDeviceGet({})", opt.device),
                         ExitCode::Unavailable);
        !s)
      return s.error();
    char name[256] = {0};
    if (d_.cuDeviceGetName(name, sizeof(name) - 1, device_) != CUDA_SUCCESS) std::strcpy(name, "unknown device");
    Calibration c;
    c.device_name = name;
    GpuArch& a = c.arch;
    a.id = opt.id.empty() ? id_from_name(name) : opt.id;
    int sms = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), khz = attribute(kClockRateKHz),
        threads = attribute(kMaxThreadsPerSm), blocks = attribute(kMaxBlocksPerSm), shared = attribute(kSharedPerSm),
        l2 = attribute(kL2Bytes), major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    if (sms <= 0 || threads <= 0 || blocks <= 0)
      return Error{fmt::format("kdflow calibrate: error: {} reports no SM count or per-SM limits (SMs {}, threads {}, "
                               "blocks {})",
                               d_.library, sms, threads, blocks),
                   ExitCode::Unavailable};
    a.sms = sms;
    a.max_threads_per_sm = threads;
    a.max_blocks_per_sm = blocks;
    a.shared_per_sm = shared;
    a.schedulers_per_sm = 4;  // every SM since Volta: 4 partitions, one warp instruction a cycle each
    int version = 0;
    if (d_.cuDriverGetVersion) d_.cuDriverGetVersion(&version);
    a.source = fmt::format("kdflow calibrate on {} (sm_{}{}), driver {}.{}", name, major, minor, version / 1000,
                           version % 1000 / 10);
    say(fmt::format("calibrate: {} (sm_{}{}): {} SMs, {} threads and {} blocks a SM, {} KiB shared a SM, L2 {} MiB",
                    name, major, minor, sms, threads, blocks, shared / 1024, l2 >> 20));

    if (Status s = open_context(); !s) return s.error();
    if (Status s = check(d_.cuModuleLoadDataEx(&module_, calibration_ptx(), 0, nullptr, nullptr),
                         "cuModuleLoadDataEx (the microbenchmarks' PTX)");
        !s)
      return s.error();
    CUfunction empty = nullptr, chase = nullptr, fma = nullptr, copy = nullptr;
    for (auto [f, n] : {std::pair{&empty, "kd_empty"}, {&chase, "kd_chase"}, {&fma, "kd_fma"}, {&copy, "kd_copy"}})
      if (Status s = check(d_.cuModuleGetFunction(f, module_, n), std::string("cuModuleGetFunction ") + n); !s)
        return s.error();
    if (Status s = check(d_.cuEventCreate(&ev0_, CU_EVENT_DEFAULT), "cuEventCreate"); !s) return s.error();
    if (Status s = check(d_.cuEventCreate(&ev1_, CU_EVENT_DEFAULT), "cuEventCreate"); !s) return s.error();

    // 1. The launch floor.
    Expected<double> floor = timed(empty, 1, 1, Params(), opt.repeat);
    if (!floor) return floor.error();
    a.launch_us = *floor;
    c.measurements.push_back({"empty_kernel_us", *floor});

    // 2. L2's hit latency: a pointer chase over a quarter of L2 (1 to 8 MiB), 128-byte slots in a
    //    fixed random order, so no prefetcher helps; L1 is bypassed (ld.global.cg).
    const uint64_t chase_bytes = std::clamp<uint64_t>(l2 > 0 ? static_cast<uint64_t>(l2) / 4 : 4u << 20, 1u << 20, 8u << 20);
    Expected<CUdeviceptr> buf = alloc(chase_bytes), out = alloc(64);
    if (!buf) return buf.error();
    if (!out) return out.error();
    {
      const uint64_t slots = chase_bytes / 128;
      std::vector<uint64_t> order(slots);
      std::iota(order.begin(), order.end(), 0);
      std::mt19937_64 rng(52);
      std::shuffle(order.begin() + 1, order.end(), rng);
      std::vector<uint64_t> host(chase_bytes / 8, 0);
      for (uint64_t i = 0; i < slots; ++i) host[order[i] * 16] = *buf + order[(i + 1) % slots] * 128;
      if (Status s = check(d_.cuMemcpyHtoD(*buf, host.data(), chase_bytes), "cuMemcpyHtoD"); !s) return s.error();
    }
    unsigned steps = 1u << 14;
    CUdeviceptr start = *buf, out_ptr = *out;
    Expected<double> chase_us = timed(chase, 1, 1, Params().add(start).add(steps).add(out_ptr), opt.repeat);
    if (!chase_us) return chase_us.error();
    Expected<uint64_t> chase_cycles = first_word(*out);
    if (!chase_cycles) return chase_cycles.error();
    c.measurements.push_back({"chase_us", *chase_us});
    c.measurements.push_back({"chase_steps", steps});
    c.measurements.push_back({"chase_cycles", static_cast<double>(*chase_cycles)});
    // The clock: the driver's figure, else the SM's cycles over the chase's time.
    const double body_us = std::max(*chase_us - a.launch_us, 1e-3);
    a.clock_ghz = khz > 0 ? khz / 1e6 : *chase_cycles > 0 ? static_cast<double>(*chase_cycles) / body_us / 1e3 : 0;
    if (!(a.clock_ghz > 0))
      return Error{"kdflow calibrate: error: no clock rate: the driver reports none and the pointer chase counted no "
                   "cycles",
                   ExitCode::Unavailable};
    a.l2_latency_cycles = *chase_cycles > 0 ? static_cast<double>(*chase_cycles) / steps : body_us * a.clock_ghz * 1e3 / steps;

    // 3. The ALU's latency: a chain of dependent FP32 FMAs.
    steps = 1u << 16;
    float fa = 0.9999999f, fb = 1e-3f;
    Expected<double> fma_us = timed(fma, 1, 1, Params().add(out_ptr).add(steps).add(fa).add(fb), opt.repeat);
    if (!fma_us) return fma_us.error();
    Expected<uint64_t> fma_cycles = first_word(*out);
    if (!fma_cycles) return fma_cycles.error();
    c.measurements.push_back({"fma_us", *fma_us});
    c.measurements.push_back({"fma_steps", steps});
    c.measurements.push_back({"fma_cycles", static_cast<double>(*fma_cycles)});
    a.alu_latency_cycles = *fma_cycles > 0 ? static_cast<double>(*fma_cycles) / steps
                                           : std::max(*fma_us - a.launch_us, 1e-3) * a.clock_ghz * 1e3 / steps;

    // 4. Bandwidth: copies of 16-byte words by 4 blocks of 256 threads a SM, from DRAM (two buffers
    //    of four times L2, at least 256 MiB) and from L2 (two of a quarter of L2, 64 passes).
    auto bandwidth = [&](uint64_t bytes, unsigned passes, const char* what) -> Expected<double> {
      Expected<CUdeviceptr> src = alloc(bytes), dst = alloc(bytes);
      if (!src) return src.error();
      if (!dst) return dst.error();
      CUdeviceptr s = *src, t = *dst;
      unsigned long long n = bytes / 16;
      Expected<double> us =
          timed(copy, static_cast<unsigned>(a.sms) * 4, 256, Params().add(t).add(s).add(n).add(passes), opt.repeat);
      if (!us) return us.error();
      c.measurements.push_back({std::string(what) + "_copy_us", *us});
      c.measurements.push_back({std::string(what) + "_copy_bytes", static_cast<double>(2 * bytes * passes)});
      return 2.0 * static_cast<double>(bytes) * passes / std::max(*us - a.launch_us, 1e-3) / 1e3;
    };
    const uint64_t dram_bytes = std::max<uint64_t>(256u << 20, l2 > 0 ? 4 * static_cast<uint64_t>(l2) : 0);
    Expected<double> dram = bandwidth(dram_bytes, 1, "dram");
    if (!dram) return dram.error();
    a.dram_gbps = *dram;
    Expected<double> l2bw = bandwidth(chase_bytes, 64, "l2");
    if (!l2bw) return l2bw.error();
    a.l2_gbps = *l2bw;
    say(fmt::format("calibrate: launch {:.2f} us, L2 latency {:.0f} cycles, FMA latency {:.1f} cycles, DRAM {:.0f} GB/s, "
                    "L2 {:.0f} GB/s, clock {:.2f} GHz",
                    a.launch_us, a.l2_latency_cycles, a.alu_latency_cycles, a.dram_gbps, a.l2_gbps, a.clock_ghz));
    // A microbenchmark that took no longer than an empty kernel measured nothing: say which.
    std::string implausible;
    if (!(a.l2_latency_cycles >= 1)) implausible = "the pointer chase took no longer than an empty kernel";
    else if (!(a.alu_latency_cycles >= 0.1)) implausible = "the FMA chain took no longer than an empty kernel";
    else if (!(a.dram_gbps > 0 && a.dram_gbps < 1e6) || !(a.l2_gbps > 0 && a.l2_gbps < 1e7))
      implausible = "a copy took no longer than an empty kernel";
    if (!implausible.empty())
      return Error{"kdflow calibrate: error: " + implausible + ": no profile written (the device's timer, or a driver "
                   "that runs no kernels)",
                   ExitCode::Software};
    return c;
  }

 private:
  Status check(CUresult r, const std::string& call, ExitCode code = ExitCode::Software) {
    if (r == CUDA_SUCCESS) return Status::ok();
    return Error{fmt::format("kdflow calibrate: error: {} failed: {}", call, d_.describe(r)), code};
  }
  int attribute(int which) {
    int v = 0;
    return d_.cuDeviceGetAttribute(&v, which, device_) == CUDA_SUCCESS ? v : 0;
  }
  void say(const std::string& line) {
    if (log_) *log_ << line << "\n";
  }
  Status open_context() {
    if (d_.cuDevicePrimaryCtxRetain) {
      if (Status s = check(d_.cuDevicePrimaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain", ExitCode::Unavailable);
          !s)
        return s;
      primary_ = true;
    } else if (Status s = check(d_.cuCtxCreate(&ctx_, 0, device_), "cuCtxCreate", ExitCode::Unavailable); !s) {
      return s;
    }
    if (Status s = check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); !s) return s;
    return check(d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  Expected<CUdeviceptr> alloc(uint64_t bytes) {
    CUdeviceptr p = 0;
    if (Status s = check(d_.cuMemAlloc(&p, bytes), fmt::format("cuMemAlloc({} bytes)", bytes)); !s) return s.error();
    allocations_.push_back(p);
    if (Status s = check(d_.cuMemsetD8(p, 0, bytes), "cuMemsetD8"); !s) return s.error();
    return p;
  }
  Expected<uint64_t> first_word(CUdeviceptr p) {
    uint64_t v = 0;
    if (Status s = check(d_.cuMemcpyDtoH(&v, p, sizeof v), "cuMemcpyDtoH"); !s) return s.error();
    return v;
  }
  /// The median µs of `repeat` launches each alone between two events, after one untimed.
  Expected<double> timed(CUfunction f, unsigned grid, unsigned block, Params params, int repeat) {
    size_t size = params.bytes.size();
    void* extra[] = {reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_POINTER), params.bytes.data(),
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_SIZE), &size,
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_END)};
    std::vector<double> us;
    for (int i = 0; i <= repeat; ++i) {
      float ms = 0;
      if (Status s = check(d_.cuEventRecord(ev0_, stream_), "cuEventRecord"); !s) return s.error();
      if (Status s = check(d_.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream_, nullptr, size ? extra : nullptr), "cuLaunchKernel");
          !s)
        return s.error();
      if (Status s = check(d_.cuEventRecord(ev1_, stream_), "cuEventRecord"); !s) return s.error();
      if (Status s = check(d_.cuEventSynchronize(ev1_), "cuEventSynchronize (a microbenchmark)"); !s) return s.error();
      if (Status s = check(d_.cuEventElapsedTime(&ms, ev0_, ev1_), "cuEventElapsedTime"); !s) return s.error();
      if (i > 0) us.push_back(static_cast<double>(ms) * 1e3);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }

  Driver d_;
  std::ostream* log_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool primary_ = false;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
  CUevent ev0_ = nullptr, ev1_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

}  // namespace

Expected<Calibration> calibrate_gpu(const CalibrateOptions& options, std::ostream* log) {
  if (options.repeat < 1) return Error{"kdflow calibrate: error: --repeat must be 1 or more", ExitCode::Usage};
  Expected<cuda::Driver> d = cuda::load_driver(options.cuda_library);
  if (!d) return d.error();
  Session s(d.take(), log);
  return s.run(options);
}

}  // namespace kdflow

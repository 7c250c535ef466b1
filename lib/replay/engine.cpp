// engine.cpp — runs a replay plan through the CUDA driver API.
//
// Every upload and memset (params, inputs, redzones, --kernel restores) goes on the NULL
// stream and is ordered before the first launch by a context synchronise: the work stream
// is CU_STREAM_NON_BLOCKING, which does not wait for the NULL stream.
//
// Every mode first runs the sequence eagerly on one stream: one checked run (synchronised
// after every kernel, so a fault names its kernel, redzones checked, written buffers
// dumped; never timed), `warmup` untimed runs, then `repeat` timed runs in which every
// launch is queued back to back with an event between launches and one wait at the end
// (kernel i's time is event i → event i+1). Graph mode then captures the sequence with
// stream capture (a chain, as TVM's CUDA graph executor runs it); dag mode builds the graph
// node by node with cuGraphAddKernelNode and one edge per transitively reduced dependency
// (launch_graph.h). Both time whole-graph launches. Waits poll events against the time
// limit, so a hung kernel is named instead of hanging replay. Parameters are passed packed,
// through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE), in the layout plan.cpp computed.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <thread>

#include "cublas.h"
#include "cuda_driver.h"
#include "kdflow/formats/device_module.h"
#include "kdflow/support/io.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/replay/replay.h"

namespace kdflow {
namespace {

using namespace cuda;

constexpr unsigned char kGuardByte = 0xCB;
constexpr int64_t kDefaultSharedMemory = 48 * 1024;  // static + dynamic above this needs the opt-in
constexpr size_t kJitLogBytes = 16384;
constexpr size_t kCublasWorkspaceBytes = 32u << 20;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool writes(Access a) { return a == Access::Write || a == Access::ReadWrite || a == Access::Unknown; }

/// A JIT log as one line: lines joined with "; ", at most 300 characters.
std::string one_line_log(const char* log) {
  std::string s;
  for (const char* p = log; *p; ++p) {
    if (*p == '\n' || *p == '\r') {
      if (!s.empty() && s.back() != ' ') s += "; ";
    } else {
      s += *p;
    }
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == ';')) s.pop_back();
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

class Engine {
 public:
  Engine(const Driver& d, const cublas::Library* blas, const Dataflow& df, const ReplayOptions& opt,
         ReplayReport& rep, std::ostream& log)
      : d_(d), blas_(blas), df_(df), opt_(opt), rep_(rep), plan_(rep.plan), log_(log) {}

  ~Engine() {
    // A kernel that never finishes makes every call that waits for the device block: leave
    // everything to process exit, which tears the context down.
    if (hung_) return;
    // Best effort, in reverse order of creation; errors here change nothing for the user.
    if (exec_) d_.cuGraphExecDestroy(exec_);
    if (graph_) d_.cuGraphDestroy(graph_);
    for (CUevent e : events_)
      if (e) d_.cuEventDestroy(e);
    if (blas_handle_) blas_->cublasDestroy(blas_handle_);
    if (blas_workspace_) d_.cuMemFree(blas_workspace_);
    if (stream_ && d_.cuStreamDestroy) d_.cuStreamDestroy(stream_);
    for (CUdeviceptr p : bases_)
      if (p) d_.cuMemFree(p);
    for (auto it = modules_.rbegin(); it != modules_.rend(); ++it)
      if (it->handle) d_.cuModuleUnload(it->handle);
    if (ctx_) {
      if (primary_ && d_.cuDevicePrimaryCtxRelease) d_.cuDevicePrimaryCtxRelease(device_);
      else if (!primary_ && d_.cuCtxDestroy) d_.cuCtxDestroy(ctx_);
    }
  }

  Status run() {
    if (Status s = init_device(); !s) return s;
    if (Status s = load_modules(); !s) return s;
    if (Status s = functions(); !s) return s;
    if (Status s = allocate(); !s) return s;
    if (Status s = init_cublas(); !s) return s;
    if (opt_.kernel >= 0) return single_kernel();
    if (opt_.slice_first >= 0) return run_slice();
    for (const PlanUpload& u : plan_.uploads)
      if (Status s = upload(u); !s) return s;
    if (Status s = settle(); !s) return s;
    if (Status s = eager(); !s) return s;
    if (rep_.guard || opt_.locate) return outputs();
    if (opt_.mode != ReplayMode::Eager)
      if (Status s = graph_mode(); !s) return s;
    return outputs();
  }

  /// The run in which a kernel failed outside a synchronised (checked) run; -1 when none.
  int failed_run() const { return failed_run_; }
  /// Set by a locate run: the launch that failed and in which run.
  int located_launch() const { return located_launch_; }
  int located_run() const { return located_run_; }
  CUresult located_result() const { return located_result_; }

 private:
  std::string label() const { return plan_.label; }
  std::string kptr(size_t i) const { return fmt::format("/kernels/{}", plan_.launches[i].kernel); }

  Error fail(CUresult r, const std::string& what, ExitCode code = ExitCode::Software) const {
    return file_error(d_.library, fmt::format("{} failed: {}", what, d_.describe(r)), code);
  }
  Error kernel_fail(size_t i, CUresult r, const std::string& what) const {
    const PlanLaunch& l = plan_.launches[i];
    return json_error(label(), kptr(i), fmt::format("{} of kernel {} ({}) failed: {}", what, l.kernel, l.name,
                                                    d_.describe(r)),
                      ExitCode::Software);
  }

  /// Waits for `ev` by polling, within the time limit. On a timeout, `hung_what` names what
  /// is being waited on; the engine is then left alone (see ~Engine).
  Status wait(CUevent ev, const std::function<Error()>& hung_what, CUresult* result) {
    *result = CUDA_SUCCESS;
    for (int spins = 0;; ++spins) {
      CUresult r = d_.cuEventQuery(ev);
      if (r == CUDA_SUCCESS) return Status::ok();
      if (r != CUDA_ERROR_NOT_READY) {
        *result = r;
        return Status::ok();
      }
      if (opt_.time_limit_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() > opt_.time_limit_s) {
        hung_ = true;
        return hung_what();
      }
      if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Error hung_kernel(size_t i) const {
    const PlanLaunch& l = plan_.launches[i];
    return json_error(label(), kptr(i),
                      fmt::format("kernel {} ({}) did not finish within {:g} s (--time-limit); it may be hung "
                                  "(wrong scalars?); nothing was written",
                                  l.kernel, l.name, opt_.time_limit_s),
                      ExitCode::DataError);
  }

  /// Uploads and memsets are on the NULL stream, which the non-blocking work stream does
  /// not wait for: let them land before anything is launched.
  Status settle() {
    if (CUresult r = d_.cuCtxSynchronize(); r != CUDA_SUCCESS) return fail(r, "cuCtxSynchronize (after the uploads)");
    return Status::ok();
  }

  /// A cuBLAS handle bound to the replay stream, when the model makes library calls. cuBLAS
  /// works in the context current on this thread (the primary one, as the CUDA runtime uses).
  Status init_cublas() {
    if (plan_.library_calls.empty() || !blas_) return Status::ok();
    rep_.cublas = blas_->library;
    if (cublas::cublasStatus_t r = blas_->cublasCreate(&blas_handle_); r != cublas::CUBLAS_STATUS_SUCCESS) {
      blas_handle_ = nullptr;
      return file_error(blas_->library, fmt::format("cublasCreate_v2 failed: {}", blas_->describe(r)),
                        ExitCode::Unavailable);
    }
    if (cublas::cublasStatus_t r = blas_->cublasSetStream(blas_handle_, stream_); r != cublas::CUBLAS_STATUS_SUCCESS)
      return file_error(blas_->library, fmt::format("cublasSetStream_v2 failed: {}", blas_->describe(r)),
                        ExitCode::Software);
    // An explicit workspace: otherwise cuBLAS 12.2+ allocates one with cudaMallocAsync during
    // stream capture, which puts memory nodes into the captured graph, and a graph with
    // memory nodes cannot be a child graph (--mode dag). 32 MiB: NVIDIA's recommendation for
    // Hopper (4 MiB for older GPUs).
    if (blas_->cublasSetWorkspace) {
      if (CUresult r = d_.cuMemAlloc(&blas_workspace_, kCublasWorkspaceBytes); r != CUDA_SUCCESS) {
        blas_workspace_ = 0;
        return fail(r, fmt::format("cuMemAlloc of the {}-byte cuBLAS workspace", kCublasWorkspaceBytes));
      }
      if (cublas::cublasStatus_t r = blas_->cublasSetWorkspace(
              blas_handle_, reinterpret_cast<void*>(static_cast<uintptr_t>(blas_workspace_)), kCublasWorkspaceBytes);
          r != cublas::CUBLAS_STATUS_SUCCESS)
        return file_error(blas_->library, fmt::format("cublasSetWorkspace_v2 failed: {}", blas_->describe(r)),
                          ExitCode::Software);
    }
    log_ << fmt::format("replay: cuBLAS {} for {} library calls\n", blas_->library, plan_.library_calls.size());
    calls_after_.assign(df_.kernels.size() + 1, {});
    for (size_t c = 0; c < plan_.library_calls.size(); ++c)
      calls_after_[plan_.library_calls[c].after_kernel + 1].push_back(c);
    return Status::ok();
  }

  /// Queues library call `c` on the replay stream (or the stream being captured).
  Status library_call(size_t c) {
    const PlanLibraryCall& p = plan_.library_calls[c];
    auto dev = [&](const PlanOperand& o) {
      return reinterpret_cast<float*>(static_cast<uintptr_t>(bases_[o.allocation] + o.offset));
    };
    const float alpha = 1.0f, beta = 0.0f;
    const auto ob = p.transb ? cublas::CUBLAS_OP_T : cublas::CUBLAS_OP_N;
    const auto oa = p.transa ? cublas::CUBLAS_OP_T : cublas::CUBLAS_OP_N;
    // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B goes first (TVM's CallGemm).
    cublas::cublasStatus_t r =
        p.batched ? blas_->cublasSgemmStridedBatched(blas_handle_, ob, oa, int(p.m), int(p.n), int(p.k), &alpha,
                                                     dev(p.b), int(p.ldb), p.stride_b, dev(p.a), int(p.lda),
                                                     p.stride_a, &beta, dev(p.c), int(p.ldc), p.stride_c,
                                                     int(p.batch))
                  : blas_->cublasSgemm(blas_handle_, ob, oa, int(p.m), int(p.n), int(p.k), &alpha, dev(p.b),
                                       int(p.ldb), dev(p.a), int(p.lda), &beta, dev(p.c), int(p.ldc));
    if (r == cublas::CUBLAS_STATUS_SUCCESS) return Status::ok();
    return json_error(label(), fmt::format("/library_calls/{}", p.call),
                      fmt::format("{} for library call {} ({} of node {}) failed: {}",
                                  p.batched ? "cublasSgemmStridedBatched" : "cublasSgemm_v2", p.call, p.name, p.node,
                                  blas_->describe(r)),
                      ExitCode::Software);
  }

  /// Queues the library calls that follow kernel `kernel` (-1: those before the first).
  Status calls_after(int kernel) {
    if (calls_after_.empty()) return Status::ok();
    for (size_t c : calls_after_[static_cast<size_t>(kernel + 1)])
      if (Status s = library_call(c); !s) return s;
    return Status::ok();
  }

  Status init_device() {
    if (CUresult r = d_.cuInit(0); r != CUDA_SUCCESS) return fail(r, "cuInit", ExitCode::Unavailable);
    if (d_.cuDriverGetVersion) d_.cuDriverGetVersion(&driver_version_);
    if (CUresult r = d_.cuDeviceGet(&device_, opt_.device); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuDeviceGet({})", opt_.device), ExitCode::Unavailable);
    char name[256] = {0};
    if (d_.cuDeviceGetName(name, sizeof(name) - 1, device_) != CUDA_SUCCESS) std::strcpy(name, "unknown device");
    int major = 0, minor = 0;
    d_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
    d_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
    if (d_.cuDeviceGetAttribute(&optin_smem_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_) !=
        CUDA_SUCCESS)
      optin_smem_ = 0;
    rep_.device = fmt::format("{} (sm_{}{})", name, major, minor);
    rep_.driver = d_.library;
    if (d_.cuDevicePrimaryCtxRetain) {
      if (CUresult r = d_.cuDevicePrimaryCtxRetain(&ctx_, device_); r != CUDA_SUCCESS)
        return fail(r, "cuDevicePrimaryCtxRetain", ExitCode::Unavailable);
      primary_ = true;
    } else if (CUresult r = d_.cuCtxCreate(&ctx_, 0, device_); r != CUDA_SUCCESS) {
      return fail(r, "cuCtxCreate", ExitCode::Unavailable);
    }
    if (CUresult r = d_.cuCtxSetCurrent(ctx_); r != CUDA_SUCCESS) return fail(r, "cuCtxSetCurrent");
    if (CUresult r = d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
      return fail(r, "cuStreamCreate");
    log_ << fmt::format("replay: device {}: {}, driver {}\n", opt_.device, rep_.device, d_.library);
    return Status::ok();
  }

  struct Candidate {
    std::string path, bytes;
    ModuleFormat format;
  };

  /// The module files, grouped into device modules: files named alike but for the extension
  /// (device.cubin, device.ptx) are one module's alternatives; files named otherwise
  /// (device_0.cubin, device_1.cubin: a Relax build) are separate modules, all loaded.
  Status load_modules() {
    std::vector<std::string> stems;
    std::vector<std::vector<Candidate>> groups;
    for (const std::string& path : opt_.modules) {
      Expected<std::string> bytes = read_file(path);
      if (!bytes) return bytes.error();
      ModuleFormat f = detect_module_format(*bytes);
      if (f == ModuleFormat::Unknown)
        return file_error(path, "not a cubin (ELF), fatbin or PTX file");
      std::string stem = std::filesystem::path(path).replace_extension().string();
      size_t g = std::find(stems.begin(), stems.end(), stem) - stems.begin();
      if (g == stems.size()) {
        stems.push_back(stem);
        groups.emplace_back();
      }
      groups[g].push_back({path, bytes.take(), f});
    }
    if (groups.empty())
      return file_error(label(), "no device module: pass --module FILE (a cubin, fatbin or PTX)", ExitCode::NoInput);
    for (std::vector<Candidate>& cands : groups) {
      modules_.push_back({});
      if (Status s = load_module(cands, &modules_.back()); !s) return s;
    }
    rep_.module = modules_[0].path;
    rep_.module_format = modules_[0].format;
    for (size_t i = 1; i < modules_.size(); ++i) rep_.module += ", " + modules_[i].path;
    return Status::ok();
  }

  struct LoadedModule {
    std::string path;
    ModuleFormat format = ModuleFormat::Unknown;
    CUmodule handle = nullptr;
  };

  /// Loads one device module from its alternatives (binaries first, PTX last).
  Status load_module(std::vector<Candidate>& cands, LoadedModule* out) {
    CUmodule module_ = nullptr;
    // Binaries first (they need no JIT), PTX as the portable fallback.
    std::stable_partition(cands.begin(), cands.end(), [](const Candidate& c) { return c.format != ModuleFormat::Ptx; });
    for (size_t i = 0; i < cands.size(); ++i) {
      const Candidate& c = cands[i];
      std::vector<char> info(kJitLogBytes, '\0'), error(kJitLogBytes, '\0');
      int options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {info.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes - 1)), error.data(),
                        reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes - 1))};
      // std::string's buffer is NUL-terminated, as PTX text must be.
      CUresult r = d_.cuModuleLoadDataEx(&module_, c.bytes.c_str(), 4, options, values);
      if (r == CUDA_SUCCESS) {
        out->path = c.path;
        out->format = c.format;
        out->handle = module_;
        log_ << fmt::format("replay: module {} ({})\n", c.path, to_string(c.format));
        return Status::ok();
      }
      module_ = nullptr;
      error.back() = info.back() = '\0';
      for (const char* text : {error.data(), info.data()}) {
        std::string s(text);
        size_t start = 0;
        while (start < s.size()) {
          size_t end = s.find('\n', start);
          if (end == std::string::npos) end = s.size();
          if (end > start) log_ << "replay: jit: " << s.substr(start, end - start) << "\n";
          start = end + 1;
        }
      }
      std::string why = d_.describe(r);
      if (error[0]) why += "; JIT log: " + one_line_log(error.data());
      if (i + 1 < cands.size()) {
        log_ << fmt::format("replay: note: {} ({}) did not load: {}; falling back to {} ({})\n", c.path,
                            to_string(c.format), why, cands[i + 1].path, to_string(cands[i + 1].format));
        continue;
      }
      bool cannot_run = r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
                        r == CUDA_ERROR_INVALID_PTX;
      if (cannot_run) {
        // Say what the modules hold and what the device is, so the fix (rebuild for this
        // architecture, or a newer driver for this PTX) is obvious.
        std::string held;
        for (const Candidate& k : cands) held += (held.empty() ? "" : "; ") + describe_module(k.path, k.bytes);
        return file_error(c.path,
                          fmt::format("cuModuleLoadDataEx failed: {}; this GPU cannot run the device code: {}; the "
                                      "device is {} with driver {}",
                                      why, held, rep_.device, driver_text()),
                          ExitCode::Unavailable);
      }
      ExitCode code = r == CUDA_ERROR_INVALID_IMAGE ? ExitCode::DataError : ExitCode::Software;
      return file_error(c.path, "cuModuleLoadDataEx failed: " + why, code);
    }
    return Status::ok();
  }

  Status functions() {
    std::map<std::string, uint32_t> max_smem;
    for (const PlanLaunch& l : plan_.launches) max_smem[l.name] = std::max(max_smem[l.name], l.shared_memory);
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      const PlanLaunch& l = plan_.launches[i];
      if (opt_.kernel >= 0 && l.kernel != opt_.kernel) continue;
      if (!funcs_.count(l.name)) {
        CUfunction f = nullptr;
        if (Status s = find_function(i, &f); !s) return s;
        funcs_[l.name] = f;
        // The default dynamic limit is 48 KiB minus the kernel's static shared memory; above
        // that it must be raised, and no further than the device's opt-in maximum allows.
        int static_smem = 0;
        if (d_.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) != CUDA_SUCCESS)
          static_smem = 0;
        int64_t need = int64_t{static_smem} + max_smem[l.name];
        if (optin_smem_ > 0 && need > optin_smem_) {
          size_t worst = i;
          for (size_t j = i; j < plan_.launches.size(); ++j)
            if (plan_.launches[j].name == l.name && plan_.launches[j].shared_memory == max_smem[l.name]) {
              worst = j;
              break;
            }
          const PlanLaunch& w = plan_.launches[worst];
          return json_error(label(), kptr(worst) + "/dynamic_shared_memory",
                            fmt::format("kernel {} ({}) needs {} bytes of static and {} of dynamic shared memory; the "
                                        "device allows {} per block",
                                        w.kernel, w.name, static_smem, w.shared_memory, optin_smem_));
        }
        if (need > kDefaultSharedMemory && max_smem[l.name] > 0) {
          if (CUresult r = d_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 static_cast<int>(max_smem[l.name]));
              r != CUDA_SUCCESS)
            return kernel_fail(i, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        }
      }
      CUfunction f = funcs_[l.name];
      int max_threads = 0;
      if (d_.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS &&
          max_threads > 0) {
        int64_t threads = int64_t{l.block[0]} * l.block[1] * l.block[2];
        if (threads > max_threads)
          return json_error(label(), kptr(i) + "/block",
                            fmt::format("kernel {} ({}) can run at most {} threads per block on this device, the "
                                        "launch asks for {}",
                                        l.kernel, l.name, max_threads, threads));
      }
    }
    return Status::ok();
  }

  /// The kernel of launch i in the one loaded module that defines it. With several modules
  /// (a Relax build) each is asked; none or more than one defining it is an error.
  Status find_function(size_t i, CUfunction* f) {
    const PlanLaunch& l = plan_.launches[i];
    if (modules_.size() == 1) {
      if (CUresult r = d_.cuModuleGetFunction(f, modules_[0].handle, l.name.c_str()); r != CUDA_SUCCESS)
        return json_error(label(), kptr(i), fmt::format("kernel {} is not in {}: {}", l.name, modules_[0].path,
                                                        d_.describe(r)));
      return Status::ok();
    }
    std::vector<size_t> in;
    for (size_t m = 0; m < modules_.size(); ++m) {
      CUfunction g = nullptr;
      CUresult r = d_.cuModuleGetFunction(&g, modules_[m].handle, l.name.c_str());
      if (r == CUDA_SUCCESS) {
        if (in.empty()) *f = g;
        in.push_back(m);
      } else if (r != CUDA_ERROR_NOT_FOUND) {
        return json_error(label(), kptr(i),
                          fmt::format("kernel {}: cuModuleGetFunction in {} failed: {}", l.name, modules_[m].path,
                                      d_.describe(r)),
                          ExitCode::Software);
      }
    }
    if (in.empty())
      return json_error(label(), kptr(i), fmt::format("kernel {} is in none of the {} device modules ({})", l.name,
                                                      modules_.size(), rep_.module));
    if (in.size() > 1)
      return json_error(label(), kptr(i), fmt::format("kernel {} is defined by {} device modules ({} and {}); "
                                                      "replay cannot tell which to run",
                                                      l.name, in.size(), modules_[in[0]].path, modules_[in[1]].path));
    log_ << fmt::format("replay: kernel {} from {}\n", l.name, modules_[in[0]].path);
    return Status::ok();
  }

  Status allocate() {
    bases_.assign(plan_.allocations.size(), 0);
    uint64_t guard = opt_.guard ? opt_.guard_bytes : 0;
    std::set<int> touched;  // --nodes allocates only what the slice touches
    if (opt_.slice_first >= 0)
      for (const PlanLaunch& l : plan_.launches)
        if (l.kernel >= opt_.slice_first && l.kernel <= opt_.slice_last)
          for (const PlanArg& a : l.args)
            if (a.kind == PlanArg::Kind::Pointer) touched.insert(a.allocation);
    for (const PlanAllocation& a : plan_.allocations) {
      if (opt_.slice_first >= 0 && !touched.count(a.id)) continue;
      uint64_t bytes = a.bytes ? a.bytes : 4;
      CUdeviceptr p = 0;
      if (CUresult r = d_.cuMemAlloc(&p, bytes + guard); r != CUDA_SUCCESS)
        return json_error(label(), fmt::format("/buffers/{}", a.buffers.empty() ? 0 : a.buffers[0]),
                          fmt::format("cuMemAlloc of {} bytes for allocation {} failed: {}", bytes + guard, a.id,
                                      d_.describe(r)),
                          ExitCode::Software);
      bases_[a.id] = p;
      if (guard) {
        if (CUresult r = d_.cuMemsetD8(p + a.bytes, kGuardByte, guard); r != CUDA_SUCCESS)
          return fail(r, "cuMemsetD8 (redzone)");
      }
    }
    std::vector<uint64_t> bases(bases_.begin(), bases_.end());
    for (const PlanLaunch& l : plan_.launches) params_.push_back(pack_arguments(l, bases));
    return Status::ok();
  }

  Status upload(const PlanUpload& u) {
    if (CUresult r = d_.cuMemcpyHtoD(bases_[u.allocation], u.data.data(), u.data.size()); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuMemcpyHtoD of {} ({} bytes)", u.source, u.data.size()));
    return Status::ok();
  }

  Status download(CUdeviceptr src, uint64_t bytes, std::string* out) {
    out->assign(bytes, '\0');
    if (bytes == 0) return Status::ok();
    if (CUresult r = d_.cuMemcpyDtoH(out->data(), src, bytes); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuMemcpyDtoH ({} bytes)", bytes));
    return Status::ok();
  }

  CUresult launch(size_t i) {
    const PlanLaunch& l = plan_.launches[i];
    std::string& p = params_[i];
    size_t size = p.size();
    void* extra[] = {reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_POINTER), p.data(),
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_SIZE), &size,
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_END)};
    return d_.cuLaunchKernel(funcs_.at(l.name), l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                             l.shared_memory, stream_, nullptr, size ? extra : nullptr);
  }

  Status make_events(size_t n) {
    events_.assign(n, nullptr);
    for (CUevent& e : events_)
      if (CUresult r = d_.cuEventCreate(&e, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) return fail(r, "cuEventCreate");
    return Status::ok();
  }

  Status elapsed_us(CUevent a, CUevent b, double* us) {
    float ms = 0;
    if (CUresult r = d_.cuEventElapsedTime(&ms, a, b); r != CUDA_SUCCESS) return fail(r, "cuEventElapsedTime");
    *us = static_cast<double>(ms) * 1000.0;
    return Status::ok();
  }

  /// Checks every redzone; on the first changed byte records the violation (kernel i, or
  /// -1 when unknown) and returns true.
  Expected<bool> guard_fired(int launch_index) {
    if (!opt_.guard) return false;
    std::string zone;
    for (const PlanAllocation& a : plan_.allocations) {
      if (!bases_[a.id]) continue;
      if (Status s = download(bases_[a.id] + a.bytes, opt_.guard_bytes, &zone); !s) return s.error();
      size_t k = 0;
      while (k < zone.size() && static_cast<unsigned char>(zone[k]) == kGuardByte) ++k;
      if (k == zone.size()) continue;
      GuardViolation v;
      v.allocation = a.id;
      v.first_byte = k;
      std::string what = a.storage_id >= 0 ? fmt::format("storage {}", a.storage_id)
                                           : fmt::format("workspace '{}'", df_.buffers[a.workspace].name);
      if (launch_index >= 0) {
        const PlanLaunch& l = plan_.launches[launch_index];
        v.kernel = l.kernel;
        std::string arg;
        for (size_t j = 0; j < l.args.size(); ++j)
          if (l.args[j].kind == PlanArg::Kind::Pointer && l.args[j].allocation == a.id) {
            arg = fmt::format(" (its argument {}, buffer {} '{}')", j, l.args[j].buffer,
                              df_.buffers[l.args[j].buffer].name);
            break;
          }
        v.message = json_error(label(), kptr(launch_index),
                               fmt::format("guard: kernel {} ({}) wrote past the end of allocation {}, {} of {} bytes{}: "
                                           "byte {} after its end changed",
                                           l.kernel, l.name, a.id, what, a.bytes, arg, k))
                        .message;
      } else {
        v.message = file_error(label(), fmt::format("guard: a kernel of the graph wrote past the end of allocation {}, "
                                                    "{} of {} bytes: byte {} after its end changed (replay with "
                                                    "--mode eager --guard to find which)",
                                                    a.id, what, a.bytes, k))
                        .message;
      }
      rep_.guard = v;
      return true;
    }
    return false;
  }

  Status ensure_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !is_directory(dir)) return file_error(dir, "cannot create directory: " + ec.message(), ExitCode::CantCreate);
    return Status::ok();
  }

  /// The buffers launch i may write, as (arg index, PlanArg).
  std::vector<size_t> written_args(size_t i) const {
    std::vector<size_t> out;
    const PlanLaunch& l = plan_.launches[i];
    for (size_t j = 0; j < l.args.size(); ++j)
      if (l.args[j].kind == PlanArg::Kind::Pointer && writes(l.args[j].access)) out.push_back(j);
    return out;
  }

  Expected<NpyArray> read_buffer(int buffer) {
    const Buffer& b = df_.buffers[buffer];
    std::string data;
    if (Status s = download(bases_[plan_.buffer_allocation[buffer]], buffer_array_bytes(b), &data); !s)
      return s.error();
    return buffer_array(b, std::move(data));
  }

  Status dump(size_t i) {
    const PlanLaunch& l = plan_.launches[i];
    for (size_t j : written_args(i)) {
      Expected<NpyArray> a = read_buffer(l.args[j].buffer);
      if (!a) return a.error();
      std::string name = dump_file_name(df_.kernels[l.kernel], j);
      if (Status s = write_npy(opt_.dump_dir + "/" + name, *a); !s) return s;
      rep_.dumped.push_back(name);
    }
    return Status::ok();
  }

  /// Records the failure of a run that was not synchronised kernel by kernel: replay()
  /// then re-runs synchronised to name the kernel.
  Error unlocated(int run, CUresult r, const std::string& what) {
    failed_run_ = run;
    return file_error(label(), fmt::format("{} failed in run {} of the sequence: {}", what, run, d_.describe(r)),
                      ExitCode::Software);
  }

  /// Which launch of an eager run is still running: the first whose end event is not done.
  size_t first_unfinished() const {
    for (size_t i = 0; i < plan_.launches.size(); ++i)
      if (d_.cuEventQuery(events_[i + 1]) == CUDA_ERROR_NOT_READY) return i;
    return plan_.launches.empty() ? 0 : plan_.launches.size() - 1;
  }

  /// The eager runs: run 0 checked (synchronised after each kernel), then warmup, then
  /// timed runs queued back to back. With opt_.locate every run is synchronised.
  Status eager() {
    size_t n = plan_.launches.size();
    // events_[n + 1] closes a run after the library calls that follow the last kernel.
    if (Status s = make_events(n + 2); !s) return s;
    if (!opt_.dump_dir.empty())
      if (Status s = ensure_dir(opt_.dump_dir); !s) return s;
    std::vector<std::vector<double>> samples(n);
    std::vector<double> runs_us;
    int runs = 1 + opt_.warmup + opt_.repeat;
    for (int run = 0; run < runs; ++run) {
      bool checked = run == 0 || opt_.locate;
      if (CUresult r = d_.cuEventRecord(events_[0], stream_); r != CUDA_SUCCESS) {
        if (checked) return fail(r, "cuEventRecord");
        return unlocated(run, r, "cuEventRecord before the first kernel");
      }
      if (Status s = calls_after(-1); !s) return s;
      for (size_t i = 0; i < n; ++i) {
        CUresult r = launch(i);
        if (r == CUDA_SUCCESS) r = d_.cuEventRecord(events_[i + 1], stream_);
        if (r != CUDA_SUCCESS) {
          if (checked) return locate_or_fail(run, i, r, "cuLaunchKernel");
          return unlocated(run, r, fmt::format("queueing kernel {} ({})", plan_.launches[i].kernel,
                                               plan_.launches[i].name));
        }
        if (checked) {
          CUresult done = CUDA_SUCCESS;
          if (Status s = wait(events_[i + 1], [&] { return hung_kernel(i); }, &done); !s) return s;
          if (done != CUDA_SUCCESS) return locate_or_fail(run, i, done, "running");
          if (!opt_.locate) {
            Expected<bool> fired = guard_fired(static_cast<int>(i));
            if (!fired) return fired.error();
            if (*fired) return Status::ok();  // memory is corrupt: report and stop
            if (!opt_.dump_dir.empty())
              if (Status s = dump(i); !s) return s;
          }
        }
        // Library calls go after the event that ends the kernel before them (and after its
        // dump): their time falls into the next kernel's interval.
        if (Status s = calls_after(plan_.launches[i].kernel); !s) return s;
      }
      if (CUresult r = d_.cuEventRecord(events_[n + 1], stream_); r != CUDA_SUCCESS) {
        if (checked) return fail(r, "cuEventRecord");
        return unlocated(run, r, "cuEventRecord after the last kernel");
      }
      {
        CUresult done = CUDA_SUCCESS;
        if (Status s = wait(events_[n + 1], [&] { return hung_kernel(first_unfinished()); }, &done); !s) return s;
        if (done != CUDA_SUCCESS) {
          if (checked) return fail(done, "the library calls after the last kernel");
          return unlocated(run, done, "a kernel");
        }
      }
      if (run < 1 + opt_.warmup || opt_.locate) continue;
      for (size_t i = 0; i < n; ++i) {
        double us = 0;
        if (Status s = elapsed_us(events_[i], events_[i + 1], &us); !s) return s;
        samples[i].push_back(us);
      }
      double us = 0;
      if (Status s = elapsed_us(events_[0], events_[n + 1], &us); !s) return s;
      runs_us.push_back(us);
    }
    if (opt_.locate) return Status::ok();
    Expected<bool> fired = guard_fired(-1);
    if (!fired) return fired.error();
    rep_.times.clear();
    rep_.kernel_sum_median_us = rep_.kernel_sum_min_us = 0;
    for (size_t i = 0; i < n; ++i) {
      KernelTime t;
      t.kernel = plan_.launches[i].kernel;
      t.samples = static_cast<int>(samples[i].size());
      t.median_us = median(samples[i]);
      t.min_us = samples[i].empty() ? 0 : *std::min_element(samples[i].begin(), samples[i].end());
      rep_.kernel_sum_median_us += t.median_us;
      rep_.kernel_sum_min_us += t.min_us;
      rep_.times.push_back(t);
    }
    rep_.eager_run_median_us = median(runs_us);
    rep_.eager_run_min_us = runs_us.empty() ? 0 : *std::min_element(runs_us.begin(), runs_us.end());
    rep_.total_median_us = rep_.kernel_sum_median_us;
    rep_.total_min_us = rep_.kernel_sum_min_us;
    rep_.timing_method = fmt::format(
        "CUDA events between launches queued back to back on one stream, one wait per run; {} timed runs after 1 "
        "checked (synchronised, untimed) and {} warm-up runs; a kernel's time includes any gap before it starts",
        opt_.repeat, opt_.warmup);
    if (!plan_.library_calls.empty())
      rep_.timing_method += fmt::format("; the {} library calls (cuBLAS) are queued between a kernel's end event and "
                                        "the next kernel, so a kernel's time includes the calls just before it (the "
                                        "run's total includes every call)",
                                        plan_.library_calls.size());
    return Status::ok();
  }

  /// A failure in a synchronised run names its kernel; in a locate run it is recorded.
  Status locate_or_fail(int run, size_t i, CUresult r, const std::string& what) {
    if (opt_.locate) {
      located_launch_ = static_cast<int>(i);
      located_run_ = run;
      located_result_ = r;
    }
    return kernel_fail(i, r, what);
  }

  Status build_captured_graph() {
    size_t n = plan_.launches.size();
    if (CUresult r = d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL); r != CUDA_SUCCESS)
      return fail(r, "cuStreamBeginCapture");
    auto abandon = [&](Status s) {
      d_.cuStreamEndCapture(stream_, &graph_);
      return s;
    };
    // Library calls are captured with the kernels: cuBLAS queues its work on the capturing stream.
    if (Status s = calls_after(-1); !s) return abandon(s);
    for (size_t i = 0; i < n; ++i) {
      if (CUresult r = launch(i); r != CUDA_SUCCESS)
        return abandon(kernel_fail(i, r, "cuLaunchKernel (stream capture)"));
      if (Status s = calls_after(plan_.launches[i].kernel); !s) return abandon(s);
    }
    if (CUresult r = d_.cuStreamEndCapture(stream_, &graph_); r != CUDA_SUCCESS) return fail(r, "cuStreamEndCapture");
    return Status::ok();
  }

  /// --mode dag: one kernel node per launch, its dependencies the reduced RAW/WAR/WAW
  /// predecessors, so the driver may run independent launches concurrently.
  Status build_dag() {
    if (!d_.cuGraphCreate || !d_.cuGraphAddKernelNode)
      return file_error(d_.library,
                        "the CUDA driver has no cuGraphAddKernelNode_v2 (--mode dag needs CUDA 12 or later)",
                        ExitCode::Unavailable);
    if (!plan_.library_calls.empty() && !d_.cuGraphAddChildGraphNode)
      return file_error(d_.library, "the CUDA driver has no cuGraphAddChildGraphNode (--mode dag with library calls)",
                        ExitCode::Unavailable);
    LaunchGraph g = launch_graph(df_);
    if (CUresult r = d_.cuGraphCreate(&graph_, 0); r != CUDA_SUCCESS) return fail(r, "cuGraphCreate");
    // Nodes in run order (step_graph): kernels as kernel nodes, each library call as a child
    // graph captured from the replay stream; edges are the IR's dependencies, library-call
    // endpoints included, transitively reduced over all steps.
    StepGraph sg = step_graph(df_);
    std::vector<CUgraphNode> step_node(sg.steps.size(), nullptr);
    std::map<int, size_t> launch_of;  // kernel id → plan launch index
    for (size_t i = 0; i < plan_.launches.size(); ++i) launch_of[plan_.launches[i].kernel] = i;
    std::map<int, size_t> plan_call_of;  // library call id → plan library call index
    for (size_t c = 0; c < plan_.library_calls.size(); ++c) plan_call_of[plan_.library_calls[c].call] = c;
    std::vector<std::array<void*, 5>> extras(plan_.launches.size());
    std::vector<size_t> sizes(plan_.launches.size());
    for (size_t s = 0; s < sg.steps.size(); ++s) {
      std::vector<CUgraphNode> deps;
      for (int u : sg.preds[s])
        if (step_node[u]) deps.push_back(step_node[u]);
      CUgraphNode node = nullptr;
      if (sg.steps[s].library_call) {
        const PlanLibraryCall& p = plan_.library_calls.at(plan_call_of.at(sg.steps[s].id));
        // The call as a child graph captured from the replay stream: what cuBLAS queues is
        // opaque (its own kernels), and capture is how the driver lets a library build a graph.
        CUgraph child = nullptr;
        if (CUresult r = d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL); r != CUDA_SUCCESS)
          return fail(r, "cuStreamBeginCapture (library call)");
        Status st = library_call(plan_call_of.at(sg.steps[s].id));
        CUresult e = d_.cuStreamEndCapture(stream_, &child);
        if (!st) {
          if (child) d_.cuGraphDestroy(child);
          return st;
        }
        if (e != CUDA_SUCCESS) return fail(e, "cuStreamEndCapture (library call)");
        CUresult r =
            d_.cuGraphAddChildGraphNode(&node, graph_, deps.empty() ? nullptr : deps.data(), deps.size(), child);
        d_.cuGraphDestroy(child);  // the node holds a clone
        if (r != CUDA_SUCCESS)
          return json_error(label(), fmt::format("/library_calls/{}", p.call),
                            fmt::format("cuGraphAddChildGraphNode for library call {} ({}) failed: {}", p.call, p.name,
                                        d_.describe(r)),
                            ExitCode::Software);
      } else {
        size_t i = launch_of.at(sg.steps[s].id);
        const PlanLaunch& l = plan_.launches[i];
        KernelNodeParams p;
        p.func = funcs_.at(l.name);
        p.gridDimX = l.grid[0], p.gridDimY = l.grid[1], p.gridDimZ = l.grid[2];
        p.blockDimX = l.block[0], p.blockDimY = l.block[1], p.blockDimZ = l.block[2];
        p.sharedMemBytes = l.shared_memory;
        sizes[i] = params_[i].size();
        extras[i] = {reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_POINTER), params_[i].data(),
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_SIZE), &sizes[i],
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_END)};
        p.extra = extras[i].data();
        if (CUresult r =
                d_.cuGraphAddKernelNode(&node, graph_, deps.empty() ? nullptr : deps.data(), deps.size(), &p);
            r != CUDA_SUCCESS)
          return kernel_fail(i, r, "cuGraphAddKernelNode");
      }
      step_node[s] = node;
    }
    rep_.dag_edges = sg.edges;
    rep_.dag_longest_chain = g.longest_chain;
    std::vector<double> us(df_.kernels.size(), 0);
    for (const KernelTime& t : rep_.times)
      if (t.kernel >= 0 && static_cast<size_t>(t.kernel) < us.size()) us[t.kernel] = t.median_us;
    rep_.dag_critical_path_us = critical_path(g, us).time_us;
    log_ << fmt::format("replay: dag: {} launches, {} library calls, {} edges ({} dependent pairs before reduction), "
                        "longest kernel chain {} launches\n",
                        plan_.launches.size(), plan_.library_calls.size(), sg.edges, sg.dependency_pairs,
                        g.longest_chain);
    return Status::ok();
  }

  /// Graph and dag modes, after the eager runs: build the graph, then `warmup` untimed and
  /// `repeat` timed launches of it (the first one checked by the guard).
  Status graph_mode() {
    if (Status s = opt_.mode == ReplayMode::Dag ? build_dag() : build_captured_graph(); !s) return s;
    if (CUresult r = d_.cuGraphInstantiate(&exec_, graph_, 0); r != CUDA_SUCCESS) return fail(r, "cuGraphInstantiate");
    std::vector<double> samples;
    auto hung = [&] {
      return file_error(label(), fmt::format("a graph launch did not finish within {:g} s (--time-limit); a kernel "
                                             "may be hung (replay with --mode eager to name it); nothing was written",
                                             opt_.time_limit_s),
                        ExitCode::DataError);
    };
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      CUresult r = d_.cuEventRecord(events_[0], stream_);
      if (r == CUDA_SUCCESS) r = d_.cuGraphLaunch(exec_, stream_);
      if (r == CUDA_SUCCESS) r = d_.cuEventRecord(events_[1], stream_);
      CUresult done = CUDA_SUCCESS;
      if (r == CUDA_SUCCESS)
        if (Status s = wait(events_[1], hung, &done); !s) return s;
      if (r != CUDA_SUCCESS || done != CUDA_SUCCESS)
        return unlocated(1 + opt_.warmup + opt_.repeat + run, r != CUDA_SUCCESS ? r : done,
                         fmt::format("{} launch", to_string(opt_.mode)));
      if (run == 0) {
        Expected<bool> fired = guard_fired(-1);
        if (!fired) return fired.error();
        if (*fired) return Status::ok();
        continue;
      }
      if (run < 1 + opt_.warmup) continue;
      double us = 0;
      if (Status s = elapsed_us(events_[0], events_[1], &us); !s) return s;
      samples.push_back(us);
    }
    rep_.graph_run_median_us = median(samples);
    rep_.graph_run_min_us = samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end());
    rep_.total_median_us = rep_.graph_run_median_us;
    rep_.total_min_us = rep_.graph_run_min_us;
    rep_.timing_method += fmt::format("; then the {} as one CUDA graph: {} timed launches after 1 checked and {} "
                                      "warm-up, each between two events",
                                      opt_.mode == ReplayMode::Dag ? "dependency DAG" : "captured sequence",
                                      opt_.repeat, opt_.warmup);
    return Status::ok();
  }

  Status outputs() {
    if (rep_.guard) return Status::ok();
    for (size_t i = 0; i < plan_.outputs.size(); ++i) {
      Expected<NpyArray> a = read_buffer(plan_.outputs[i]);
      if (!a) return a.error();
      rep_.results.push_back(a.take());
      rep_.result_names.push_back(fmt::format("output_{}.npy", i));
      rep_.result_buffers.push_back(plan_.outputs[i]);
    }
    return Status::ok();
  }

  /// --kernel: restore the state of every allocation the kernel touches as it was just
  /// before it ran in the full run that wrote `dump_dir`, run it alone, read back what it
  /// writes and compare with what it wrote in that run.
  Status single_kernel() {
    size_t k = 0;
    while (k < plan_.launches.size() && plan_.launches[k].kernel != opt_.kernel) ++k;
    const PlanLaunch& target = plan_.launches[k];
    std::set<int> touched;
    for (const PlanArg& a : target.args)
      if (a.kind == PlanArg::Kind::Pointer) touched.insert(a.allocation);
    for (int al : touched)
      if (CUresult r = d_.cuMemsetD8(bases_[al], 0, plan_.allocations[al].bytes); r != CUDA_SUCCESS)
        return fail(r, "cuMemsetD8");
    for (const PlanUpload& u : plan_.uploads)
      if (touched.count(u.allocation))
        if (Status s = upload(u); !s) return s;
    size_t restored = 0;
    for (size_t i = 0; i < k; ++i) {
      const PlanLaunch& l = plan_.launches[i];
      for (size_t j : written_args(i)) {
        const PlanArg& a = l.args[j];
        if (!touched.count(a.allocation)) continue;
        std::string file = opt_.dump_dir + "/" + dump_file_name(df_.kernels[l.kernel], j);
        Expected<NpyArray> arr = read_npy(file);
        if (!arr) {
          Error e = arr.error();
          if (e.code == ExitCode::NoInput)
            e.message += " (--kernel restores buffers from the dumps of a full run: replay with --dump-dir first)";
          return e;
        }
        NpyArray want = buffer_array(df_.buffers[a.buffer], "");
        if (arr->dtype != want.dtype || arr->shape != want.shape)
          return file_error(file, fmt::format("dump does not match buffer {} '{}' ({} {} expected)", a.buffer,
                                              df_.buffers[a.buffer].name, dtype_to_string(want.dtype),
                                              shape_text(want.shape)));
        if (CUresult r = d_.cuMemcpyHtoD(bases_[a.allocation], arr->data.data(), arr->data.size()); r != CUDA_SUCCESS)
          return fail(r, "cuMemcpyHtoD of " + file);
        ++restored;
      }
    }
    log_ << fmt::format("replay: kernel {} ({}) alone: {} allocations restored from {} dumps and {} uploads\n",
                        target.kernel, target.name, touched.size(), restored,
                        std::count_if(plan_.uploads.begin(), plan_.uploads.end(),
                                      [&](const PlanUpload& u) { return touched.count(u.allocation) > 0; }));
    if (Status s = settle(); !s) return s;
    if (Status s = make_events(2); !s) return s;
    std::vector<double> samples;
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      CUresult r = d_.cuEventRecord(events_[0], stream_);
      if (r == CUDA_SUCCESS) r = launch(k);
      if (r == CUDA_SUCCESS) r = d_.cuEventRecord(events_[1], stream_);
      if (r != CUDA_SUCCESS) return kernel_fail(k, r, fmt::format("queueing (run {})", run));
      CUresult done = CUDA_SUCCESS;
      if (Status s = wait(events_[1], [&] { return hung_kernel(k); }, &done); !s) return s;
      if (done != CUDA_SUCCESS) return kernel_fail(k, done, fmt::format("running (run {})", run));
      if (run == 0) {
        Expected<bool> fired = guard_fired(static_cast<int>(k));
        if (!fired) return fired.error();
        if (*fired) return Status::ok();
        for (size_t j : written_args(k)) {
          Expected<NpyArray> a = read_buffer(target.args[j].buffer);
          if (!a) return a.error();
          rep_.results.push_back(a.take());
          rep_.result_names.push_back(dump_file_name(df_.kernels[target.kernel], j));
          rep_.result_buffers.push_back(target.args[j].buffer);
        }
        continue;
      }
      if (run <= opt_.warmup) continue;
      double us = 0;
      if (Status s = elapsed_us(events_[0], events_[1], &us); !s) return s;
      samples.push_back(us);
    }
    KernelTime t;
    t.kernel = target.kernel;
    t.samples = static_cast<int>(samples.size());
    t.median_us = median(samples);
    t.min_us = samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end());
    rep_.times.push_back(t);
    rep_.total_median_us = rep_.kernel_sum_median_us = t.median_us;
    rep_.total_min_us = rep_.kernel_sum_min_us = t.min_us;
    rep_.timing_method = fmt::format(
        "CUDA events around the kernel alone; {} timed runs after 1 checked and {} warm-up", opt_.repeat, opt_.warmup);
    return Status::ok();
  }

  /// --nodes: load the slice's live-ins (params/inputs from their files, the rest from the
  /// dumps of a full run), run its kernels, compare every buffer they write with the dump.
  Status run_slice() {
    LaunchSlice sl = slice_launches(df_, opt_.slice_first, opt_.slice_last);
    rep_.slice_kernels = sl.kernels;
    rep_.slice_live_ins = sl.live_ins;
    std::vector<size_t> launches;
    for (size_t i = 0; i < plan_.launches.size(); ++i)
      if (plan_.launches[i].kernel >= opt_.slice_first && plan_.launches[i].kernel <= opt_.slice_last)
        launches.push_back(i);
    size_t from_files = 0, from_dumps = 0, undefined = 0;
    for (size_t li = 0; li < sl.live_ins.size(); ++li) {
      int b = sl.live_ins[li], w = sl.live_in_writer[li];
      int al = plan_.buffer_allocation[b];
      if (w < 0) {
        bool found = false;
        for (const PlanUpload& u : plan_.uploads)
          if (u.buffer == b) {
            if (Status s = upload(u); !s) return s;
            found = true;
          }
        if (found) ++from_files;
        else ++undefined;  // never written before the slice: its contents are undefined in TVM too
        continue;
      }
      const Kernel& wk = df_.kernels[w];
      size_t j = 0;
      while (j < wk.args.size() && !(wk.args[j].kind == Arg::Kind::Buffer && wk.args[j].buffer == b &&
                                     wk.args[j].access != Access::Read))
        ++j;
      std::string file = opt_.inputs_from + "/" + dump_file_name(wk, j);
      if (!file_exists(file))
        return file_error(file, fmt::format("missing live-in: buffer {} '{}' is read by the slice before it writes "
                                            "it, and kernel {} ({}) wrote it last; replay the whole model with "
                                            "--dump-dir {} first",
                                            b, df_.buffers[b].name, w, wk.name, opt_.inputs_from),
                          ExitCode::NoInput);
      Expected<NpyArray> arr = read_npy(file);
      if (!arr) return arr.error();
      NpyArray want = buffer_array(df_.buffers[b], "");
      if (arr->dtype != want.dtype || arr->shape != want.shape)
        return file_error(file, fmt::format("dump does not match buffer {} '{}' ({} {} expected): a dump of another "
                                            "model?",
                                            b, df_.buffers[b].name, dtype_to_string(want.dtype),
                                            shape_text(want.shape)));
      if (CUresult r = d_.cuMemcpyHtoD(bases_[al], arr->data.data(), arr->data.size()); r != CUDA_SUCCESS)
        return fail(r, "cuMemcpyHtoD of " + file);
      ++from_dumps;
    }
    log_ << fmt::format("replay: kernels {}..{} ({} launches): {} live-in buffers, {} from params/inputs, {} from "
                        "dumps, {} never written before the slice\n",
                        opt_.slice_first, opt_.slice_last, launches.size(), sl.live_ins.size(), from_files, from_dumps,
                        undefined);
    if (Status s = settle(); !s) return s;
    size_t n = launches.size();
    if (Status s = make_events(n + 1); !s) return s;
    std::vector<std::vector<double>> samples(n);
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      bool checked = run == 0;
      if (CUresult r = d_.cuEventRecord(events_[0], stream_); r != CUDA_SUCCESS) return fail(r, "cuEventRecord");
      for (size_t x = 0; x < n; ++x) {
        size_t i = launches[x];
        CUresult r = launch(i);
        if (r == CUDA_SUCCESS) r = d_.cuEventRecord(events_[x + 1], stream_);
        if (r != CUDA_SUCCESS) return kernel_fail(i, r, fmt::format("queueing (run {})", run));
        if (!checked) continue;
        CUresult done = CUDA_SUCCESS;
        if (Status s = wait(events_[x + 1], [&] { return hung_kernel(i); }, &done); !s) return s;
        if (done != CUDA_SUCCESS) return kernel_fail(i, done, "running");
        const PlanLaunch& l = plan_.launches[i];
        for (size_t j : written_args(i)) {
          Expected<NpyArray> a = read_buffer(l.args[j].buffer);
          if (!a) return a.error();
          std::string name = dump_file_name(df_.kernels[l.kernel], j);
          std::string file = opt_.inputs_from + "/" + name;
          OutputCheck c;
          if (file_exists(file)) {
            Expected<NpyArray> want = read_npy(file);
            if (!want) return want.error();
            c = compare_arrays(*a, *want, opt_.rtol, opt_.atol);
          } else {
            c.problem = "no dump of it in " + opt_.inputs_from;
          }
          c.output = static_cast<int>(rep_.checks.size());
          c.buffer = l.args[j].buffer;
          c.name = name;
          c.expect_file = file;
          rep_.checks.push_back(std::move(c));
        }
      }
      if (!checked) {
        CUresult done = CUDA_SUCCESS;
        if (Status s = wait(events_[n], [&] { return hung_kernel(launches[n - 1]); }, &done); !s) return s;
        if (done != CUDA_SUCCESS) return fail(done, fmt::format("run {} of the slice", run));
      }
      if (run < 1 + opt_.warmup) continue;
      for (size_t x = 0; x < n; ++x) {
        double us = 0;
        if (Status s = elapsed_us(events_[x], events_[x + 1], &us); !s) return s;
        samples[x].push_back(us);
      }
    }
    for (size_t x = 0; x < n; ++x) {
      KernelTime t;
      t.kernel = plan_.launches[launches[x]].kernel;
      t.samples = static_cast<int>(samples[x].size());
      t.median_us = median(samples[x]);
      t.min_us = samples[x].empty() ? 0 : *std::min_element(samples[x].begin(), samples[x].end());
      rep_.kernel_sum_median_us += t.median_us;
      rep_.kernel_sum_min_us += t.min_us;
      rep_.times.push_back(t);
    }
    rep_.total_median_us = rep_.kernel_sum_median_us;
    rep_.total_min_us = rep_.kernel_sum_min_us;
    rep_.timing_method = fmt::format("the slice's launches queued back to back, CUDA events between them; {} timed "
                                     "runs after 1 checked and {} warm-up",
                                     opt_.repeat, opt_.warmup);
    return Status::ok();
  }

  /// "sm_75 cubin, compute_75 ptx (PTX ISA 7.4)" for a module file.
  static std::string describe_module(const std::string& path, const std::string& bytes) {
    std::string out = std::filesystem::path(path).filename().string() + " holds ";
    Expected<std::vector<DeviceImage>> images = list_device_images(bytes, path);
    std::string list;
    if (images)
      for (const DeviceImage& im : *images) list += (list.empty() ? "" : ", ") + im.arch + " " + im.kind;
    if (list.empty()) list = "no architecture kdflow can read";
    out += list;
    if (detect_module_format(bytes) == ModuleFormat::Ptx) {
      size_t v = bytes.find(".version");
      if (v != std::string::npos) {
        size_t b = v + 8;
        while (b < bytes.size() && (bytes[b] == ' ' || bytes[b] == '\t')) ++b;
        size_t e = b;
        while (e < bytes.size() && (std::isdigit(static_cast<unsigned char>(bytes[e])) || bytes[e] == '.')) ++e;
        if (e > b) out += " (PTX ISA " + bytes.substr(b, e - b) + ")";
      }
    }
    return out;
  }

  std::string driver_text() const {
    if (driver_version_ <= 0) return "of unknown version";
    return fmt::format("{}.{} (CUDA driver API {})", driver_version_ / 1000, driver_version_ % 1000 / 10,
                       driver_version_);
  }

  const Driver& d_;
  const cublas::Library* blas_ = nullptr;        ///< null when the model makes no library call
  cublas::cublasHandle_t blas_handle_ = nullptr;
  CUdeviceptr blas_workspace_ = 0;
  std::vector<std::vector<size_t>> calls_after_;  ///< kernel id + 1 → plan library calls after it
  const Dataflow& df_;
  const ReplayOptions& opt_;
  ReplayReport& rep_;
  const ReplayPlan& plan_;
  std::ostream& log_;

  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool hung_ = false;
  int failed_run_ = -1;
  int located_launch_ = -1, located_run_ = -1;
  CUresult located_result_ = CUDA_SUCCESS;
  int driver_version_ = 0;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool primary_ = false;
  int optin_smem_ = 0;
  std::vector<LoadedModule> modules_;
  std::map<std::string, CUfunction> funcs_;
  std::vector<CUdeviceptr> bases_;
  std::vector<std::string> params_;
  CUstream stream_ = nullptr;
  std::vector<CUevent> events_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

/// Dump files are "<kernel id>_<kernel name>_arg<j>.npy": one that names a kernel id this
/// model does not have, or another name for it, comes from another model.
Status check_dump_dir(const Dataflow& df_, const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return file_error(dir, "cannot read the dump folder: " + ec.message(), ExitCode::NoInput);
  std::vector<std::string> names;
  for (; it != end; it.increment(ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    size_t us = n.find('_'), arg = n.rfind("_arg");
    if (n.size() < 4 || n.substr(n.size() - 4) != ".npy" || us == std::string::npos || arg == std::string::npos ||
        arg <= us)
      continue;
    std::string id = n.substr(0, us), name = n.substr(us + 1, arg - us - 1);
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id.size() > 9) continue;
    size_t k = std::stoul(id);
    if (k >= df_.kernels.size() || df_.kernels[k].name != name)
      return file_error(dir + "/" + n,
                        k >= df_.kernels.size()
                            ? fmt::format("a dump of another model: this model has {} kernels, no kernel {}",
                                          df_.kernels.size(), k)
                            : fmt::format("a dump of another model: kernel {} of this model is {}, not {}", k,
                                          df_.kernels[k].name, name));
  }
  return Status::ok();
}

Status check_options(const Dataflow& df, const ReplayOptions& opt) {
  auto usage = [](const std::string& msg) { return Error{"kdflow replay: error: " + msg, ExitCode::Usage}; };
  if (opt.warmup < 0) return usage("--warmup must be 0 or more");
  if (opt.repeat < 1) return usage("--repeat must be 1 or more");
  if (opt.guard && opt.guard_bytes == 0) return usage("the guard needs at least one redzone byte");
  if (opt.mode != ReplayMode::Eager && !opt.dump_dir.empty() && opt.kernel < 0)
    return usage("--dump-dir dumps after each kernel, which needs --mode eager");
  if (!(opt.time_limit_s >= 0)) return usage("--time-limit must be 0 or more");
  if (!df.library_calls.empty() && (opt.kernel >= 0 || opt.slice_first >= 0))
    return file_error(opt.inputs.label.empty() ? std::string("flow") : opt.inputs.label,
                      fmt::format("{} restores buffers from kernel dumps, which do not cover what library calls "
                                  "write; this model makes {} library calls ('{}'): replay it whole",
                                  opt.kernel >= 0 ? "--kernel" : "--nodes", df.library_calls.size(),
                                  df.library_calls[0].name),
                      ExitCode::Unavailable);
  if (opt.kernel >= 0) {
    if (static_cast<size_t>(opt.kernel) >= df.kernels.size())
      return usage(fmt::format("--kernel {}: the model has {} kernels (0..{})", opt.kernel, df.kernels.size(),
                               df.kernels.empty() ? 0 : df.kernels.size() - 1));
    if (opt.dump_dir.empty()) return usage("--kernel needs --dump-dir (the dumps of a full eager run)");
    if (opt.mode != ReplayMode::Eager)
      return usage(fmt::format("--kernel runs one kernel eagerly; drop --mode {}", to_string(opt.mode)));
  }
  if (opt.slice_first >= 0) {
    if (opt.slice_last < opt.slice_first || static_cast<size_t>(opt.slice_last) >= df.kernels.size())
      return usage("--nodes: the range runs no kernel");
    if (opt.inputs_from.empty()) return usage("--nodes needs --inputs-from DUMP_DIR (the dumps of a full eager run)");
    if (opt.kernel >= 0 || !opt.dump_dir.empty() || opt.guard || opt.mode != ReplayMode::Eager)
      return usage("--nodes runs a slice eagerly: drop --kernel, --dump-dir, --guard and --mode graph/dag");
  }
  if (opt.slice_first >= 0 && !opt.dry_run)
    if (Status s = check_dump_dir(df, opt.inputs_from); !s) return s;
  if (opt.expect.size() > df.outputs.size())
    return usage(fmt::format("{} --expect files for {} outputs", opt.expect.size(), df.outputs.size()));
  return Status::ok();
}

}  // namespace

Expected<ReplayReport> replay(const Dataflow& df, const ReplayOptions& opt, std::ostream& log) {
  if (Status s = check_options(df, opt); !s) return s.error();
  Expected<ReplayPlan> plan = make_plan(df, opt.inputs);
  if (!plan) return plan.error();
  ReplayReport rep;
  rep.plan = plan.take();
  rep.mode = opt.mode;
  rep.warmup = opt.warmup;
  rep.repeat = opt.repeat;
  rep.kernel = opt.kernel;
  if (opt.dry_run) return rep;

  // Expected outputs are read before the GPU is touched: a typo fails fast.
  std::vector<std::optional<NpyArray>> expected(opt.expect.size());
  if (opt.kernel < 0)
    for (size_t i = 0; i < opt.expect.size(); ++i) {
      if (opt.expect[i].empty()) continue;
      Expected<NpyArray> a = read_npy(opt.expect[i]);
      if (!a) return a.error();
      expected[i] = a.take();
    }

  Expected<cuda::Driver> driver = cuda::load_driver(opt.cuda_library);
  if (!driver) return driver.error();
  std::optional<cublas::Library> blas;
  if (!rep.plan.library_calls.empty()) {
    Expected<cublas::Library> l = cublas::load_cublas(opt.cublas_library);
    if (!l) return l.error();
    blas = l.take();
  }
  const cublas::Library* blas_ptr = blas ? &*blas : nullptr;
  int failed_run = -1;
  Error failure;
  {
    Engine engine(*driver, blas_ptr, df, opt, rep, log);
    if (Status s = engine.run(); !s) {
      if (engine.failed_run() < 0 || opt.locate) return s.error();
      failed_run = engine.failed_run();
      failure = s.error();
    }
  }  // everything released (the context too) before the report is returned
  if (failed_run >= 0) {
    // A run queued without a synchronise per kernel failed; the error surfaced at a later
    // call. Re-run in a fresh context, synchronised after every kernel, to name the kernel.
    log << fmt::format("replay: run {} failed ({}); re-running with a synchronise after each kernel to find which "
                       "kernel\n",
                       failed_run, failure.message);
    ReplayOptions again = opt;
    again.locate = true;
    again.mode = ReplayMode::Eager;
    again.dump_dir.clear();
    again.guard = false;
    again.warmup = 0;
    again.repeat = failed_run;  // as many runs of the sequence as had started when it failed
    ReplayReport scratch;
    scratch.plan = rep.plan;
    Engine engine(*driver, blas_ptr, df, again, scratch, log);
    Status s = engine.run();
    if (!s && engine.located_launch() >= 0) {
      const PlanLaunch& l = rep.plan.launches[engine.located_launch()];
      return json_error(rep.plan.label, fmt::format("/kernels/{}", l.kernel),
                        fmt::format("kernel {} ({}) failed in run {}: {} (found by re-running with a synchronise "
                                    "after each kernel)",
                                    l.kernel, l.name, engine.located_run(), driver->describe(engine.located_result())),
                        ExitCode::Software);
    }
    if (!s) return s.error();
    failure.message += "; re-running with a synchronise after each kernel did not fail, so the failing kernel is "
                       "unknown (timing-dependent?)";
    return failure;
  }
  rep.ran = true;

  if (rep.guard) return rep;
  if (opt.slice_first >= 0) return rep;  // the slice's checks were made as it ran
  if (opt.kernel >= 0) {
    for (size_t i = 0; i < rep.results.size(); ++i) {
      std::string file = opt.dump_dir + "/" + rep.result_names[i];
      if (!file_exists(file)) continue;
      Expected<NpyArray> want = read_npy(file);
      if (!want) return want.error();
      OutputCheck c = compare_arrays(rep.results[i], *want, opt.rtol, opt.atol);
      c.output = static_cast<int>(i);
      c.buffer = rep.result_buffers[i];
      c.name = rep.result_names[i];
      c.expect_file = file;
      rep.checks.push_back(std::move(c));
    }
    return rep;
  }
  for (size_t i = 0; i < expected.size() && i < rep.results.size(); ++i) {
    if (!expected[i]) continue;
    OutputCheck c = compare_arrays(rep.results[i], *expected[i], opt.rtol, opt.atol);
    c.output = static_cast<int>(i);
    c.buffer = rep.result_buffers[i];
    c.name = rep.result_names[i];
    c.expect_file = opt.expect[i];
    rep.checks.push_back(std::move(c));
  }
  return rep;
}

}  // namespace kdflow

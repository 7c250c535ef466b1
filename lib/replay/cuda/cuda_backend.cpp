// cuda_backend.cpp — the replay back end on the CUDA driver API (libcuda loaded at run time,
// cuBLAS for library calls). What is CUDA's lives here: the context and its one work stream,
// modules and their JIT fallback, functions and their shared-memory limits, events, stream
// capture and explicit graphs, the cuBLAS handle. The order of work, uploads, dumps, checks
// and reports are the shared engine's (engine.cpp).
//
// Every upload and memset goes on the NULL stream (cuMemcpyHtoD from pageable memory,
// cuMemsetD8); the work stream is CU_STREAM_NON_BLOCKING, which does not wait for the NULL
// stream: the engine calls synchronize() between them. Parameters are passed packed,
// through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE), in the layout plan.cpp computed.
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <thread>
#include <vector>

#include "../backend.h"
#include "cublas.h"
#include "cuda_driver.h"
#include "nccl.h"
#include "kdflow/formats/device_module.h"

namespace kdflow::replay_backend {
namespace {

using namespace cuda;

constexpr int64_t kDefaultSharedMemory = 48 * 1024;  // static + dynamic above this needs the opt-in
constexpr size_t kJitLogBytes = 16384;
constexpr size_t kCublasWorkspaceBytes = 32u << 20;

/// Errors after which cuda.h says the context (and the process) cannot be used again:
/// ILLEGAL_ADDRESS, LAUNCH_TIMEOUT, HARDWARE_STACK_ERROR, ILLEGAL_INSTRUCTION,
/// MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE, INVALID_PC, LAUNCH_FAILED.
bool sticky(CUresult r) {
  return r == 700 || r == 702 || (r >= 714 && r <= 719);
}

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

/// "sm_75 cubin, compute_75 ptx (PTX ISA 7.4)" for a module file.
std::string describe_module(const std::string& path, const std::string& bytes) {
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

/// Every loaded library named libcuda.so* (full paths, resolved).
std::vector<std::string> loaded_drivers() {
  std::vector<std::string> out;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        if (!info->dlpi_name || !*info->dlpi_name) return 0;
        std::string path = info->dlpi_name;
        if (std::filesystem::path(path).filename().string().rfind("libcuda.so", 0) == 0) {
          std::error_code ec;
          std::string real = std::filesystem::canonical(path, ec).string();
          static_cast<std::vector<std::string>*>(data)->push_back(ec ? path : real);
        }
        return 0;
      },
      &out);
  return out;
}

/// The file `handle` was loaded from (resolved), or "".
std::string loaded_path(void* handle) {
  struct link_map* lm = nullptr;
  if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return "";
  std::error_code ec;
  std::string real = std::filesystem::canonical(lm->l_name, ec).string();
  return ec ? std::string(lm->l_name) : real;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(Driver d, std::optional<cublas::Library> blas, const BackendOptions& opt, std::ostream& log)
      : d_(std::move(d)), blas_(std::move(blas)), opt_(opt), log_(log) {}

  ~CudaBackend() override {
    stop_gate_timer();  // it touches only the host word, which outlives it either way
    // After a sticky fault or a hang every call may fail or block: leave everything to
    // process exit, which tears the context down.
    if (abandoned_) return;
    // The context may not be current on this thread (a sharded replay opens each rank on a
    // thread of its own and destroys it on the main one).
    if (ctx_) d_.cuCtxSetCurrent(ctx_);
    // Best effort, in reverse order of creation; errors here change nothing for the user.
    if (word_ && d_.cuMemFreeHost) d_.cuMemFreeHost(word_);
    if (exec_) d_.cuGraphExecDestroy(exec_);
    if (graph_) d_.cuGraphDestroy(graph_);
    for (const Staged& c : staged_)
      if (c.host) d_.cuMemFreeHost(c.host);
    for (CUevent e : events_)
      if (e) d_.cuEventDestroy(e);
    if (blas_handle_) blas_->cublasDestroy(blas_handle_);
    if (blas_workspace_) d_.cuMemFree(blas_workspace_);
    if (stream_ && d_.cuStreamDestroy) d_.cuStreamDestroy(stream_);
    for (CUdeviceptr p : allocations_)
      if (p) d_.cuMemFree(p);
    for (auto it = modules_.rbegin(); it != modules_.rend(); ++it)
      if (it->handle) d_.cuModuleUnload(it->handle);
    if (ctx_) {
      if (primary_ && d_.cuDevicePrimaryCtxRelease) d_.cuDevicePrimaryCtxRelease(device_);
      else if (!primary_ && d_.cuCtxDestroy) d_.cuCtxDestroy(ctx_);
    }
  }

  const char* name() const override { return "cuda"; }

  Capabilities caps() const override {
    Capabilities c;
    c.asynchronous = true;
    c.timing = true;
    c.gate = word_ != nullptr;
    // The launch queue: past about this many pending launches cuLaunchKernel blocks (so a
    // gated run must fit in it, and an ungated one is waited on in between).
    c.queue_depth = 1000;
    c.graphs = true;
    c.dag = d_.cuGraphCreate && d_.cuGraphAddKernelNode;
    c.library_calls = blas_.has_value();
    c.device_collectives = opt_.nccl != nullptr;
    return c;
  }

  Status open() override {
    if (CUresult r = d_.cuInit(0); r != CUDA_SUCCESS) return fail(r, "cuInit", ExitCode::Unavailable);
    if (d_.cuDriverGetVersion) d_.cuDriverGetVersion(&driver_version_);
    // A sharded replay: rank r on device + r when there are enough devices, else every rank
    // on `device` (each with its own stream, buffers and modules in the primary context).
    int ordinal = opt_.device;
    if (opt_.rank >= 0 && d_.cuDeviceGetCount) {
      int count = 0;
      if (d_.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
        info_.device_count = count;
        if (count >= opt_.device + opt_.ranks) ordinal = opt_.device + opt_.rank;
      }
    }
    info_.ordinal = ordinal;
    if (CUresult r = d_.cuDeviceGet(&device_, ordinal); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuDeviceGet({})", ordinal), ExitCode::Unavailable);
    char name[256] = {0};
    if (d_.cuDeviceGetName(name, sizeof(name) - 1, device_) != CUDA_SUCCESS) std::strcpy(name, "unknown device");
    int major = 0, minor = 0, optin = 0;
    d_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
    d_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
    if (d_.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_) !=
        CUDA_SUCCESS)
      optin = 0;
    info_.max_shared_memory = optin;
    size_t total = 0;
    if (d_.cuDeviceTotalMem && d_.cuDeviceTotalMem(&total, device_) == CUDA_SUCCESS) info_.memory_bytes = total;
    info_.name = fmt::format("{} (sm_{}{})", name, major, minor);
    info_.library = d_.library;
    info_.driver = driver_text();
    if (blas_) info_.library_calls = blas_->library;
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
    log_ << fmt::format("replay: device {}: {}, driver {}\n", ordinal, info_.name, d_.library);
    // The gate of timed runs: a host-pinned word, mapped for the device, that the stream waits
    // on (cuStreamWaitValue32_v2, GEQ) until the host writes it once a run is queued.
    if (d_.cuMemHostAlloc && d_.cuMemHostGetDevicePointer && d_.cuStreamWaitValue32 && d_.cuMemFreeHost) {
      void* p = nullptr;
      if (d_.cuMemHostAlloc(&p, sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS) {
        word_ = static_cast<uint32_t*>(p);
        *word_ = 0;
        if (d_.cuMemHostGetDevicePointer(&word_dev_, p, 0) != CUDA_SUCCESS) {
          d_.cuMemFreeHost(p);
          word_ = nullptr;
        }
      }
      if (!word_) log_ << "replay: note: no host-pinned word for the gate; timed runs are not gated\n";
    }
    return Status::ok();
  }

  const DeviceInfo& info() const override { return info_; }

  std::vector<ModuleFormat> module_formats() const override {
    return {ModuleFormat::Cubin, ModuleFormat::Fatbin, ModuleFormat::Ptx};
  }

  Status load_modules(std::vector<ModuleAlternatives>& modules, std::string* report_module,
                      ModuleFormat* report_format) override {
    for (ModuleAlternatives& m : modules) {
      modules_.push_back({});
      if (Status s = load_module(m.files, &modules_.back()); !s) return s;
    }
    if (modules_.empty()) return Status::ok();
    *report_module = modules_[0].path;
    *report_format = modules_[0].format;
    for (size_t i = 1; i < modules_.size(); ++i) *report_module += ", " + modules_[i].path;
    return Status::ok();
  }

  Fault alloc(uint64_t bytes, DevicePtr* out) override {
    CUdeviceptr p = 0;
    if (CUresult r = d_.cuMemAlloc(&p, bytes); r != CUDA_SUCCESS) return fault(r, "cuMemAlloc");
    allocations_.push_back(p);
    *out = p;
    return Fault::none();
  }

  void free(DevicePtr p) override {
    auto it = std::find(allocations_.begin(), allocations_.end(), p);
    if (it == allocations_.end()) return;
    allocations_.erase(it);
    if (!abandoned_) d_.cuMemFree(p);
  }

  Fault upload(DevicePtr dst, const void* src, uint64_t bytes) override {
    if (CUresult r = d_.cuMemcpyHtoD(dst, src, bytes); r != CUDA_SUCCESS) return fault(r, "cuMemcpyHtoD");
    return Fault::none();
  }

  /// cuMemcpyHtoD runs on the legacy NULL stream, which the work stream (non-blocking) does not
  /// wait for: a kernel queued after it could read the buffer before the copy lands. So an
  /// upload between steps goes on the work stream itself (pageable source: the driver stages
  /// it before returning), or, on a driver without the async copy, is waited for.
  Fault upload_ordered(DevicePtr dst, const void* src, uint64_t bytes) override {
    if (bytes == 0) return Fault::none();
    if (d_.cuMemcpyHtoDAsync) {
      if (CUresult r = d_.cuMemcpyHtoDAsync(dst, src, bytes, stream_); r != CUDA_SUCCESS)
        return fault(r, "cuMemcpyHtoDAsync");
      return Fault::none();
    }
    if (CUresult r = d_.cuMemcpyHtoD(dst, src, bytes); r != CUDA_SUCCESS) return fault(r, "cuMemcpyHtoD");
    if (CUresult r = d_.cuCtxSynchronize(); r != CUDA_SUCCESS) return fault(r, "cuCtxSynchronize");
    return Fault::none();
  }

  Fault download(void* dst, DevicePtr src, uint64_t bytes) override {
    if (bytes == 0) return Fault::none();
    if (CUresult r = d_.cuMemcpyDtoH(dst, src, bytes); r != CUDA_SUCCESS) return fault(r, "cuMemcpyDtoH");
    return Fault::none();
  }

  Fault memset(DevicePtr dst, unsigned char value, uint64_t bytes) override {
    if (CUresult r = d_.cuMemsetD8(dst, value, bytes); r != CUDA_SUCCESS) return fault(r, "cuMemsetD8");
    return Fault::none();
  }

  Status prepare(const std::vector<KernelLaunch>& launches, const std::vector<LibraryCallArgs>&) override {
    std::map<std::string, uint32_t> max_smem;
    for (const KernelLaunch& k : launches)
      max_smem[k.launch->name] = std::max(max_smem[k.launch->name], k.launch->shared_memory);
    for (size_t x = 0; x < launches.size(); ++x) {
      const PlanLaunch& l = *launches[x].launch;
      if ((l.programmatic_dependent_launch || l.cooperative_launch) && !d_.cuLaunchKernelEx)
        return json_error(opt_.label, fmt::format("/kernels/{}/launch_attributes", l.kernel),
                          fmt::format("kernel {} ({}) is launched with the {} attribute, which needs "
                                      "cuLaunchKernelEx (CUDA 11.8 or later); {} has none",
                                      l.kernel, l.name, l.cooperative_launch ? "cooperative" : "programmatic dependent launch",
                                      d_.library),
                          ExitCode::Unavailable);
      if (!funcs_.count(l.name)) {
        CUfunction f = nullptr;
        if (Status s = find_function(l, &f); !s) return s;
        funcs_[l.name] = f;
        // The default dynamic limit is 48 KiB minus the kernel's static shared memory; above
        // that it must be raised, and no further than the device's opt-in maximum allows.
        int static_smem = 0;
        if (d_.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) != CUDA_SUCCESS)
          static_smem = 0;
        int64_t need = int64_t{static_smem} + max_smem[l.name];
        int64_t optin = info_.max_shared_memory;
        if (optin > 0 && need > optin) {
          const PlanLaunch* w = &l;
          for (size_t y = x; y < launches.size(); ++y)
            if (launches[y].launch->name == l.name && launches[y].launch->shared_memory == max_smem[l.name]) {
              w = launches[y].launch;
              break;
            }
          return json_error(opt_.label, fmt::format("/kernels/{}/dynamic_shared_memory", w->kernel),
                            fmt::format("kernel {} ({}) needs {} bytes of static and {} of dynamic shared memory; the "
                                        "device allows {} per block",
                                        w->kernel, w->name, static_smem, w->shared_memory, optin));
        }
        if (need > kDefaultSharedMemory && max_smem[l.name] > 0) {
          if (CUresult r = d_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 static_cast<int>(max_smem[l.name]));
              r != CUDA_SUCCESS)
            return kernel_fault_error(opt_.label, l, fault(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
        }
      }
      CUfunction f = funcs_[l.name];
      int max_threads = 0;
      if (d_.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS &&
          max_threads > 0) {
        int64_t threads = int64_t{l.block[0]} * l.block[1] * l.block[2];
        if (threads > max_threads)
          return json_error(opt_.label, fmt::format("/kernels/{}/block", l.kernel),
                            fmt::format("kernel {} ({}) can run at most {} threads per block on this device, the "
                                        "launch asks for {}",
                                        l.kernel, l.name, max_threads, threads));
      }
    }
    return Status::ok();
  }

  Status bind(const std::vector<KernelLaunch>& launches, const std::vector<LibraryCallArgs>& calls) override {
    for (const KernelLaunch& k : launches) launches_[k.index] = k;
    for (const LibraryCallArgs& c : calls) calls_[c.index] = c;
    if (!calls.empty()) return init_cublas(calls.size());
    return Status::ok();
  }

  Fault launch(size_t i) override {
    KernelLaunch& k = launches_.at(i);
    const PlanLaunch& l = *k.launch;
    size_t size = k.packed.size();
    void* extra[] = {reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_POINTER), k.packed.data(),
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_SIZE), &size,
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_END)};
    if (l.programmatic_dependent_launch || l.cooperative_launch) {
      // As TVM 0.23+ launches these kernels: cuLaunchKernelEx with the table's attributes.
      LaunchAttribute attrs[2];
      unsigned n = 0;
      if (l.programmatic_dependent_launch) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attrs[n++].value.programmaticStreamSerializationAllowed = 1;
      }
      if (l.cooperative_launch) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n++].value.cooperative = 1;
      }
      LaunchConfig c;
      c.gridDimX = l.grid[0], c.gridDimY = l.grid[1], c.gridDimZ = l.grid[2];
      c.blockDimX = l.block[0], c.blockDimY = l.block[1], c.blockDimZ = l.block[2];
      c.sharedMemBytes = l.shared_memory;
      c.hStream = stream_;
      c.attrs = attrs;
      c.numAttrs = n;
      CUresult r = d_.cuLaunchKernelEx(&c, funcs_.at(l.name), nullptr, size ? extra : nullptr);
      if (r != CUDA_SUCCESS) return fault(r, "cuLaunchKernelEx");
      return Fault::none();
    }
    CUresult r = d_.cuLaunchKernel(funcs_.at(l.name), l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                                   l.block[2], l.shared_memory, stream_, nullptr, size ? extra : nullptr);
    if (r != CUDA_SUCCESS) return fault(r, "cuLaunchKernel");
    return Fault::none();
  }

  Fault library_call(size_t c) override {
    const LibraryCallArgs& a = calls_.at(c);
    const PlanLibraryCall& p = *a.call;
    auto dev = [](DevicePtr x) { return reinterpret_cast<float*>(static_cast<uintptr_t>(x)); };
    const float alpha = 1.0f, beta = 0.0f;
    const auto ob = p.transb ? cublas::CUBLAS_OP_T : cublas::CUBLAS_OP_N;
    const auto oa = p.transa ? cublas::CUBLAS_OP_T : cublas::CUBLAS_OP_N;
    // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B goes first (TVM's CallGemm).
    cublas::cublasStatus_t r =
        p.batched ? blas_->cublasSgemmStridedBatched(blas_handle_, ob, oa, int(p.m), int(p.n), int(p.k), &alpha,
                                                     dev(a.b), int(p.ldb), p.stride_b, dev(a.a), int(p.lda),
                                                     p.stride_a, &beta, dev(a.c), int(p.ldc), p.stride_c,
                                                     int(p.batch))
                  : blas_->cublasSgemm(blas_handle_, ob, oa, int(p.m), int(p.n), int(p.k), &alpha, dev(a.b),
                                       int(p.ldb), dev(a.a), int(p.lda), &beta, dev(a.c), int(p.ldc));
    if (r == cublas::CUBLAS_STATUS_SUCCESS) return Fault::none();
    Fault f;
    f.code = r;
    f.api = p.batched ? "cublasSgemmStridedBatched" : "cublasSgemm_v2";
    f.text = blas_->describe(r);
    return f;
  }

  /// A sharded flow's collective through NCCL on this rank's stream, as TVM's disco makes it
  /// (src/runtime/extra/disco/nccl/nccl.cc): allreduce, allgather and broadcast as NCCL's
  /// collectives; scatter and gather as a group of sends and receives with rank 0.
  Fault collective(const PlanLibraryCall& p, DevicePtr send, DevicePtr recv) override {
    const nccl::Library& n = opt_.nccl->lib();
    nccl::ncclComm_t comm = opt_.nccl->comm(opt_.rank);
    const Collective& c = *p.collective;
    auto ptr = [](DevicePtr x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); };
    auto failed = [&](nccl::ncclResult_t r, const std::string& api) {
      Fault f;
      f.code = r == 0 ? -1 : r;
      f.api = api;
      f.text = r == 0 ? "not a collective NCCL makes" : n.describe(r, comm);
      return f;
    };
    const int dtype = nccl::nccl_dtype(c.dtype);
    if (dtype < 0) return failed(0, fmt::format("{} of {} values (NCCL has no such type)", c.kind, c.dtype));
    const uint64_t size = c.elements > 0 ? c.bytes / static_cast<uint64_t>(c.elements) : 0;
    if (size == 0) return failed(0, fmt::format("{} of {} elements", c.kind, c.elements));
    const int ranks = opt_.ranks, rank = opt_.rank;
    const size_t count = static_cast<size_t>(c.elements);
    CUstream s = stream_;
    nccl::ncclResult_t r = nccl::ncclSuccess;
    if (c.kind == "allreduce") {
      int op = nccl::nccl_op(c.reduce_op);
      if (op < 0) return failed(0, "allreduce " + c.reduce_op);
      r = n.ncclAllReduce(ptr(send), ptr(recv), count, dtype, op, comm, s);
      return r ? failed(r, "ncclAllReduce") : Fault::none();
    }
    if (c.kind == "allgather") {
      r = n.ncclAllGather(ptr(send), ptr(recv), count, dtype, comm, s);
      return r ? failed(r, "ncclAllGather") : Fault::none();
    }
    if (c.kind == "broadcast_from_worker0") {
      r = n.ncclBroadcast(rank == 0 ? ptr(send) : nullptr, ptr(recv), count, dtype, 0, comm, s);
      return r ? failed(r, "ncclBroadcast") : Fault::none();
    }
    if (c.kind == "scatter_from_worker0" || c.kind == "gather_to_worker0") {
      // scatter: rank 0's send split in `ranks` pieces, piece i to rank i; gather: the reverse.
      const bool scatter = c.kind == "scatter_from_worker0";
      const size_t piece = scatter ? count / static_cast<size_t>(ranks) : count;
      const uint64_t piece_bytes = piece * size;
      if ((r = n.ncclGroupStart())) return failed(r, "ncclGroupStart");
      if (rank == 0)
        for (int i = 0; i < ranks && !r; ++i)
          r = scatter ? n.ncclSend(ptr(send + piece_bytes * static_cast<uint64_t>(i)), piece, dtype, i, comm, s)
                      : n.ncclRecv(ptr(recv + piece_bytes * static_cast<uint64_t>(i)), piece, dtype, i, comm, s);
      if (!r)
        r = scatter ? n.ncclRecv(ptr(recv), piece, dtype, 0, comm, s) : n.ncclSend(ptr(send), piece, dtype, 0, comm, s);
      nccl::ncclResult_t end = n.ncclGroupEnd();
      if (r) return failed(r, scatter ? "ncclSend/ncclRecv of a scatter" : "ncclSend/ncclRecv of a gather");
      return end ? failed(end, "ncclGroupEnd") : Fault::none();
    }
    return failed(0, "runtime.disco." + c.kind);
  }

  Fault synchronize() override {
    if (CUresult r = d_.cuCtxSynchronize(); r != CUDA_SUCCESS) return fault(r, "cuCtxSynchronize");
    return Fault::none();
  }

  Status make_markers(size_t n) override {
    for (CUevent e : events_)
      if (e) d_.cuEventDestroy(e);
    events_.assign(n, nullptr);
    for (CUevent& e : events_)
      if (CUresult r = d_.cuEventCreate(&e, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
        e = nullptr;
        return fail(r, "cuEventCreate");
      }
    return Status::ok();
  }

  Fault record(size_t m) override {
    if (CUresult r = d_.cuEventRecord(events_.at(m), stream_); r != CUDA_SUCCESS) return fault(r, "cuEventRecord");
    return Fault::none();
  }

  Poll poll(size_t m, Fault* f) override {
    CUresult r = d_.cuEventQuery(events_.at(m));
    if (r == CUDA_SUCCESS) return Poll::Done;
    if (r == CUDA_ERROR_NOT_READY) return Poll::NotReady;
    *f = fault(r, "cuEventQuery");
    return Poll::Failed;
  }

  Expected<double> elapsed_us(size_t from, size_t to) override {
    float ms = 0;
    if (CUresult r = d_.cuEventElapsedTime(&ms, events_.at(from), events_.at(to)); r != CUDA_SUCCESS)
      return fail(r, "cuEventElapsedTime");
    return static_cast<double>(ms) * 1000.0;
  }

  /// Graphs copy the host arrays from pinned memory kept here (a captured copy from pageable
  /// memory is not allowed; the graph reads the pinned bytes at each launch).
  Status bind_host_copies(const std::vector<HostCopyArgs>& copies) override {
    if (copies.empty()) return Status::ok();
    if (!d_.cuMemHostAlloc || !d_.cuMemFreeHost || !d_.cuMemcpyHtoDAsync)
      return file_error(d_.library,
                        "the CUDA driver lacks cuMemHostAlloc, cuMemFreeHost or cuMemcpyHtoDAsync_v2, which a graph "
                        "of this flow's host copies needs: replay it with --mode eager",
                        ExitCode::Unavailable);
    for (const HostCopyArgs& c : copies) {
      Staged st;
      st.dst = c.dst;
      st.bytes = c.bytes->size();
      if (st.bytes > 0) {
        if (CUresult r = d_.cuMemHostAlloc(&st.host, st.bytes, 0); r != CUDA_SUCCESS)
          return fail(r, fmt::format("cuMemHostAlloc ({} bytes for host copy {})", st.bytes, c.index));
        std::memcpy(st.host, c.bytes->data(), st.bytes);
      }
      if (staged_.size() <= c.index) staged_.resize(c.index + 1);
      staged_[c.index] = st;
    }
    return Status::ok();
  }

  Status build_graph(const std::vector<GraphStep>& steps, bool chain) override {
    if (Status s = chain ? capture(steps) : build_dag(steps); !s) return s;
    if (CUresult r = d_.cuGraphInstantiate(&exec_, graph_, 0); r != CUDA_SUCCESS) return fail(r, "cuGraphInstantiate");
    return Status::ok();
  }

  Fault launch_graph() override {
    if (CUresult r = d_.cuGraphLaunch(exec_, stream_); r != CUDA_SUCCESS) return fault(r, "cuGraphLaunch");
    return Fault::none();
  }

  Fault hold_queue() override {
    if (!word_) return Fault::none();
    ++target_;
    if (CUresult r = d_.cuStreamWaitValue32(stream_, word_dev_, target_, CU_STREAM_WAIT_VALUE_GEQ); r != CUDA_SUCCESS)
      return fault(r, "cuStreamWaitValue32");
    std::lock_guard<std::mutex> lock(gate_mu_);
    if (!gate_timer_.joinable()) gate_timer_ = std::thread([this] { gate_deadline_loop(); });
    gate_armed_ = true;
    gate_target_ = target_;
    ++gate_generation_;
    gate_cv_.notify_all();
    return Fault::none();
  }

  void release_queue() override {
    if (!word_) return;
    __atomic_store_n(word_, target_, __ATOMIC_RELEASE);
    std::lock_guard<std::mutex> lock(gate_mu_);
    gate_armed_ = false;
    gate_cv_.notify_all();
  }

  bool gate_opened_by_deadline() override {
    std::lock_guard<std::mutex> lock(gate_mu_);
    bool forced = gate_forced_;
    gate_forced_ = false;
    return forced;
  }

  void abandon() override { abandoned_ = true; }

 private:
  struct LoadedModule {
    std::string path;
    ModuleFormat format = ModuleFormat::Unknown;
    CUmodule handle = nullptr;
  };

  /// The gate timer's thread: opens an armed gate that stays closed for kGateDeadline. It
  /// only writes the host-pinned word, never calls the driver.
  void gate_deadline_loop() {
    std::unique_lock<std::mutex> lock(gate_mu_);
    while (!gate_stop_) {
      gate_cv_.wait(lock, [this] { return gate_stop_ || gate_armed_; });
      if (gate_stop_) break;
      uint64_t generation = gate_generation_;
      bool settled = gate_cv_.wait_for(lock, kGateDeadline, [&] {
        return gate_stop_ || !gate_armed_ || gate_generation_ != generation;
      });
      if (!settled) {
        __atomic_store_n(word_, gate_target_, __ATOMIC_RELEASE);
        gate_armed_ = false;
        gate_forced_ = true;
      }
    }
  }

  void stop_gate_timer() {
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      gate_stop_ = true;
      gate_cv_.notify_all();
    }
    if (gate_timer_.joinable()) gate_timer_.join();
  }

  /// Host copy `i` queued on the work stream from its pinned bytes (bind_host_copies).
  Fault host_copy(size_t i) {
    if (i >= staged_.size() || (staged_[i].bytes > 0 && !staged_[i].host)) {
      Fault f;
      f.code = -1;
      f.api = "cuMemcpyHtoDAsync";
      f.text = fmt::format("host copy {} was not staged in pinned memory", i);
      return f;
    }
    const Staged& c = staged_[i];
    if (c.bytes == 0) return Fault::none();
    if (CUresult r = d_.cuMemcpyHtoDAsync(c.dst, c.host, c.bytes, stream_); r != CUDA_SUCCESS)
      return fault(r, "cuMemcpyHtoDAsync");
    return Fault::none();
  }

  Error host_copy_error(size_t i, const Fault& f) const {
    return file_error(opt_.label,
                      fmt::format("host copy {} ({} bytes) could not be put in the graph: {} failed: {}", i,
                                  i < staged_.size() ? staged_[i].bytes : 0, f.api, f.text),
                      ExitCode::Software);
  }

  Fault fault(CUresult r, const std::string& api) const {
    Fault f;
    f.code = r;
    f.api = api;
    f.text = d_.describe(r);
    f.sticky = sticky(r);
    return f;
  }
  Error fail(CUresult r, const std::string& what, ExitCode code = ExitCode::Software) const {
    return file_error(d_.library, fmt::format("{} failed: {}", what, d_.describe(r)), code);
  }

  std::string driver_text() const {
    if (driver_version_ <= 0) return "of unknown version";
    return fmt::format("{}.{} (CUDA driver API {})", driver_version_ / 1000, driver_version_ % 1000 / 10,
                       driver_version_);
  }

  /// Loads one device module from its alternatives (binaries first, PTX last).
  Status load_module(std::vector<ModuleFile>& cands, LoadedModule* out) {
    CUmodule module = nullptr;
    // Binaries first (they need no JIT), PTX as the portable fallback.
    std::stable_partition(cands.begin(), cands.end(), [](const ModuleFile& c) { return c.format != ModuleFormat::Ptx; });
    for (size_t i = 0; i < cands.size(); ++i) {
      const ModuleFile& c = cands[i];
      std::vector<char> info(kJitLogBytes, '\0'), error(kJitLogBytes, '\0');
      int options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {info.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes - 1)), error.data(),
                        reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes - 1))};
      // std::string's buffer is NUL-terminated, as PTX text must be.
      CUresult r = d_.cuModuleLoadDataEx(&module, c.bytes.c_str(), 4, options, values);
      if (r == CUDA_SUCCESS) {
        out->path = c.path;
        out->format = c.format;
        out->handle = module;
        log_ << fmt::format("replay: module {} ({})\n", c.path, to_string(c.format));
        return Status::ok();
      }
      module = nullptr;
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
        for (const ModuleFile& k : cands) held += (held.empty() ? "" : "; ") + describe_module(k.path, k.bytes);
        return file_error(c.path,
                          fmt::format("cuModuleLoadDataEx failed: {}; this GPU cannot run the device code: {}; the "
                                      "device is {} with driver {}",
                                      why, held, info_.name, driver_text()),
                          ExitCode::Unavailable);
      }
      ExitCode code = r == CUDA_ERROR_INVALID_IMAGE ? ExitCode::DataError : ExitCode::Software;
      return file_error(c.path, "cuModuleLoadDataEx failed: " + why, code);
    }
    return Status::ok();
  }

  /// The kernel in the one loaded module that defines it. With several modules (a Relax
  /// build) each is asked; none or more than one defining it is an error.
  Status find_function(const PlanLaunch& l, CUfunction* f) {
    std::string kptr = fmt::format("/kernels/{}", l.kernel);
    if (modules_.size() == 1) {
      if (CUresult r = d_.cuModuleGetFunction(f, modules_[0].handle, l.name.c_str()); r != CUDA_SUCCESS)
        return json_error(opt_.label, kptr,
                          fmt::format("kernel {} is not in {}: {}", l.name, modules_[0].path, d_.describe(r)));
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
        return json_error(opt_.label, kptr,
                          fmt::format("kernel {}: cuModuleGetFunction in {} failed: {}", l.name, modules_[m].path,
                                      d_.describe(r)),
                          ExitCode::Software);
      }
    }
    std::string all = modules_.empty() ? "" : modules_[0].path;
    for (size_t i = 1; i < modules_.size(); ++i) all += ", " + modules_[i].path;
    if (in.empty())
      return json_error(opt_.label, kptr,
                        fmt::format("kernel {} is in none of the {} device modules ({})", l.name, modules_.size(), all));
    if (in.size() > 1)
      return json_error(opt_.label, kptr,
                        fmt::format("kernel {} is defined by {} device modules ({} and {}); replay cannot tell which "
                                    "to run",
                                    l.name, in.size(), modules_[in[0]].path, modules_[in[1]].path));
    log_ << fmt::format("replay: kernel {} from {}\n", l.name, modules_[in[0]].path);
    return Status::ok();
  }

  /// A cuBLAS handle bound to the work stream. cuBLAS works in the context current on this
  /// thread (the primary one, as the CUDA runtime uses).
  Status init_cublas(size_t n_calls) {
    if (!blas_) return Status::ok();
    if (cublas::cublasStatus_t r = blas_->cublasCreate(&blas_handle_); r != cublas::CUBLAS_STATUS_SUCCESS) {
      blas_handle_ = nullptr;
      return file_error(blas_->library, fmt::format("cublasCreate_v2 failed: {}", blas_->describe(r)),
                        ExitCode::Unavailable);
    }
    // cuBLAS's runtime opens the driver by its soname (libcuda.so.1); with another driver
    // (KDFLOW_CUDA_LIBRARY) two drivers would share the process, each with its own contexts.
    std::string ours = loaded_path(d_.handle);
    for (const std::string& other : loaded_drivers())
      if (!ours.empty() && other != ours)
        return file_error(blas_->library,
                          fmt::format("cuBLAS loaded a second CUDA driver ({}) beside the one replay uses ({}): the "
                                      "two would not share contexts; set KDFLOW_CUDA_LIBRARY to the driver cuBLAS "
                                      "loads, or unset it",
                                      other, ours),
                          ExitCode::Unavailable);
    if (cublas::cublasStatus_t r = blas_->cublasSetStream(blas_handle_, stream_); r != cublas::CUBLAS_STATUS_SUCCESS)
      return file_error(blas_->library, fmt::format("cublasSetStream_v2 failed: {}", blas_->describe(r)),
                        ExitCode::Software);
    // An explicit workspace: otherwise cuBLAS 12.2+ allocates one with cudaMallocAsync during
    // stream capture, which puts memory nodes into the captured graph, and a graph with
    // memory nodes cannot be a child graph (--mode dag). 32 MiB: NVIDIA's recommendation for
    // Hopper (4 MiB for older GPUs). One handle, one workspace: the engine never lets two
    // library calls run concurrently (cublas_api.h: a workspace must not be shared by work
    // that may run at the same time).
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
    log_ << fmt::format("replay: cuBLAS {} for {} library calls\n", blas_->library, n_calls);
    return Status::ok();
  }

  /// --mode graph: the steps captured from the work stream, as TVM's CUDA graph executor does.
  Status capture(const std::vector<GraphStep>& steps) {
    if (CUresult r = d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL); r != CUDA_SUCCESS)
      return fail(r, "cuStreamBeginCapture");
    auto abandon_capture = [&](Error e) {
      d_.cuStreamEndCapture(stream_, &graph_);
      return e;
    };
    // Library calls are captured with the kernels: cuBLAS queues its work on the capturing stream.
    for (const GraphStep& s : steps) {
      if (s.host_copy) {
        if (Fault f = host_copy(s.index); !f.ok()) return abandon_capture(host_copy_error(s.index, f));
      } else if (s.library_call) {
        if (Fault f = library_call(s.index); !f.ok())
          return abandon_capture(library_call_fault_error(opt_.label, *calls_.at(s.index).call, f));
      } else if (Fault f = launch(s.index); !f.ok()) {
        return abandon_capture(kernel_fault_error(opt_.label, *launches_.at(s.index).launch, f,
                                                  f.api + " (stream capture)"));
      }
    }
    if (CUresult r = d_.cuStreamEndCapture(stream_, &graph_); r != CUDA_SUCCESS) return fail(r, "cuStreamEndCapture");
    return Status::ok();
  }

  /// --mode dag: one kernel node per launch, each library call as a child graph captured
  /// from the work stream (what cuBLAS queues is opaque: capture is how the driver lets a
  /// library build a graph), one edge per pred.
  Status build_dag(const std::vector<GraphStep>& steps) {
    if (!d_.cuGraphCreate || !d_.cuGraphAddKernelNode)
      return file_error(d_.library,
                        "the CUDA driver has no cuGraphAddKernelNode_v2 (--mode dag needs CUDA 12 or later)",
                        ExitCode::Unavailable);
    bool calls = std::any_of(steps.begin(), steps.end(),
                             [](const GraphStep& s) { return s.library_call || s.host_copy; });
    if (calls && !d_.cuGraphAddChildGraphNode)
      return file_error(d_.library,
                        "the CUDA driver has no cuGraphAddChildGraphNode (--mode dag with library calls or host copies)",
                        ExitCode::Unavailable);
    if (CUresult r = d_.cuGraphCreate(&graph_, 0); r != CUDA_SUCCESS) return fail(r, "cuGraphCreate");
    std::vector<CUgraphNode> node_of(steps.size(), nullptr);
    std::vector<std::array<void*, 5>> extras(steps.size());
    std::vector<size_t> sizes(steps.size());
    for (size_t s = 0; s < steps.size(); ++s) {
      std::vector<CUgraphNode> deps;
      for (size_t u : steps[s].preds)
        if (u < s && node_of[u]) deps.push_back(node_of[u]);
      CUgraphNode node = nullptr;
      if (steps[s].host_copy || steps[s].library_call) {
        // A child graph captured from the work stream: what cuBLAS queues is opaque, and a
        // host copy is captured the same way.
        const bool copy = steps[s].host_copy;
        const char* what = copy ? "host copy" : "library call";
        CUgraph child = nullptr;
        if (CUresult r = d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL); r != CUDA_SUCCESS)
          return fail(r, fmt::format("cuStreamBeginCapture ({})", what));
        Fault f = copy ? host_copy(steps[s].index) : library_call(steps[s].index);
        CUresult e = d_.cuStreamEndCapture(stream_, &child);
        if (!f.ok()) {
          if (child) d_.cuGraphDestroy(child);
          if (copy) return host_copy_error(steps[s].index, f);
          return library_call_fault_error(opt_.label, *calls_.at(steps[s].index).call, f);
        }
        if (e != CUDA_SUCCESS) return fail(e, fmt::format("cuStreamEndCapture ({})", what));
        CUresult r =
            d_.cuGraphAddChildGraphNode(&node, graph_, deps.empty() ? nullptr : deps.data(), deps.size(), child);
        d_.cuGraphDestroy(child);  // the node holds a clone
        if (r != CUDA_SUCCESS && copy)
          return fail(r, fmt::format("cuGraphAddChildGraphNode (host copy {})", steps[s].index));
        if (r != CUDA_SUCCESS) {
          const PlanLibraryCall& p = *calls_.at(steps[s].index).call;
          return json_error(opt_.label, fmt::format("/library_calls/{}", p.call),
                            fmt::format("cuGraphAddChildGraphNode for library call {} ({}) failed: {}", p.call, p.name,
                                        d_.describe(r)),
                            ExitCode::Software);
        }
      } else {
        KernelLaunch& k = launches_.at(steps[s].index);
        const PlanLaunch& l = *k.launch;
        KernelNodeParams p;
        p.func = funcs_.at(l.name);
        p.gridDimX = l.grid[0], p.gridDimY = l.grid[1], p.gridDimZ = l.grid[2];
        p.blockDimX = l.block[0], p.blockDimY = l.block[1], p.blockDimZ = l.block[2];
        p.sharedMemBytes = l.shared_memory;
        sizes[s] = k.packed.size();
        extras[s] = {reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_POINTER), k.packed.data(),
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_SIZE), &sizes[s],
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_END)};
        p.extra = extras[s].data();
        if (CUresult r =
                d_.cuGraphAddKernelNode(&node, graph_, deps.empty() ? nullptr : deps.data(), deps.size(), &p);
            r != CUDA_SUCCESS)
          return kernel_fault_error(opt_.label, l, fault(r, "cuGraphAddKernelNode"));
        if (l.cooperative_launch) {
          if (!d_.cuGraphKernelNodeSetAttribute)
            return json_error(opt_.label, fmt::format("/kernels/{}/launch_attributes", l.kernel),
                              fmt::format("kernel {} ({}) is a cooperative launch; --mode dag needs "
                                          "cuGraphKernelNodeSetAttribute for it, which {} lacks",
                                          l.kernel, l.name, d_.library),
                              ExitCode::Unavailable);
          LaunchAttributeValue v{};
          v.cooperative = 1;
          if (CUresult r = d_.cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v);
              r != CUDA_SUCCESS)
            return kernel_fault_error(opt_.label, l, fault(r, "cuGraphKernelNodeSetAttribute(COOPERATIVE)"));
        }
        // Programmatic dependent launch only lets a kernel start before the one it follows
        // ends; a dag node waits for every predecessor, which is what the dependency needs.
        if (l.programmatic_dependent_launch && !pdl_noted_) {
          pdl_noted_ = true;
          log_ << fmt::format("replay: note: --mode dag runs kernel {} ({}) and the other programmatic dependent "
                              "launches after their predecessors end (no overlap)\n",
                              l.kernel, l.name);
        }
      }
      node_of[s] = node;
    }
    return Status::ok();
  }

  Driver d_;
  std::optional<cublas::Library> blas_;  ///< loaded when the model makes library calls
  BackendOptions opt_;
  std::ostream& log_;
  DeviceInfo info_;
  bool abandoned_ = false;
  bool pdl_noted_ = false;
  int driver_version_ = 0;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool primary_ = false;
  CUstream stream_ = nullptr;
  std::vector<LoadedModule> modules_;
  std::map<std::string, CUfunction> funcs_;
  std::map<size_t, KernelLaunch> launches_;
  std::map<size_t, LibraryCallArgs> calls_;
  std::vector<CUdeviceptr> allocations_;
  std::vector<CUevent> events_;
  cublas::cublasHandle_t blas_handle_ = nullptr;
  CUdeviceptr blas_workspace_ = 0;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  /// A host copy staged in pinned memory for graphs (index: plan host copy).
  struct Staged {
    void* host = nullptr;
    size_t bytes = 0;
    CUdeviceptr dst = 0;
  };
  std::vector<Staged> staged_;
  uint32_t* word_ = nullptr;   ///< the gate's host-pinned word
  // The gate's deadline: a thread that opens the gate itself when the host has not released
  // it kGateDeadline after hold_queue(). Under a profiler that runs each launch before
  // returning (ncu; seen on an H200, where the first gated launch then never returned), the
  // host never reaches release_queue() while a kernel waits behind the closed gate.
  static constexpr std::chrono::seconds kGateDeadline{2};
  std::thread gate_timer_;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool gate_armed_ = false;     ///< held, not yet released (under gate_mu_)
  bool gate_stop_ = false;      ///< the timer thread ends (under gate_mu_)
  bool gate_forced_ = false;    ///< the timer opened the gate (under gate_mu_)
  uint32_t gate_target_ = 0;    ///< the value that opens the armed gate (under gate_mu_)
  uint64_t gate_generation_ = 0;  ///< one per hold_queue() (under gate_mu_)
  CUdeviceptr word_dev_ = 0;   ///< its device address
  uint32_t target_ = 0;        ///< the value the last hold waits for
};

}  // namespace

Expected<int> cuda_device_count(const BackendOptions& opt) {
  Expected<Driver> driver = load_driver(opt.cuda_library);
  if (!driver) return driver.error();
  const Driver& d = *driver;
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS)
    return file_error(d.library, fmt::format("cuInit failed: {}", d.describe(r)), ExitCode::Unavailable);
  int count = 1;  // a driver without cuDeviceGetCount: one device is all replay may assume
  if (d.cuDeviceGetCount)
    if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS)
      return file_error(d.library, fmt::format("cuDeviceGetCount failed: {}", d.describe(r)), ExitCode::Unavailable);
  return count;
}

Expected<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& opt, std::ostream& log) {
  Expected<Driver> driver = load_driver(opt.cuda_library);
  if (!driver) return driver.error();
  std::optional<cublas::Library> blas;
  if (opt.library_calls) {
    Expected<cublas::Library> l = cublas::load_cublas(opt.cublas_library);
    if (!l) return l.error();
    blas = l.take();
  }
  return std::unique_ptr<Backend>(new CudaBackend(driver.take(), std::move(blas), opt, log));
}

}  // namespace kdflow::replay_backend

// kdflow_support.h — the part of this program that is not the model: the CUDA driver API
// loaded at run time (no CUDA toolkit needed to build), the data file, kernel parameters,
// cuBLAS, collectives between ranks, comparing outputs, options. Written by `kdflow codegen`
// beside run.cpp, the same for every model; run.cpp is the model.
//
// Exit codes of `run`: 0 every compared output matches (or nothing was compared), 1 an output
// differs, 64 a bad option, 65 a data file is not the one this program was generated with,
// 66 a data file is missing, 69 no CUDA driver or GPU (or cuBLAS where the model needs it),
// 70 a driver or cuBLAS call failed. Each failure is one line on stderr.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace kd {

enum Exit : int {
  kMatch = 0,
  kDiffer = 1,
  kUsage = 64,
  kBadData = 65,
  kMissingFile = 66,
  kNoGpu = 69,
  kDriverError = 70,
};

[[noreturn]] inline void fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline void fail(int code, const char* fmt, ...) {
  std::fflush(stdout);
  std::fputs("run: error: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(code);
}

// ---------------------------------------------------------------------------------------
// The CUDA driver API: the few declarations this program uses, as cuda.h (CUDA 12 and 13)
// declares them. The driver is loaded with dlopen; every entry point is looked up by the
// name that has this ABI (cuMemAlloc_v2 is cuda.h's cuMemAlloc).

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
constexpr int CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2;
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

/// cuLaunchKernel's `extra`: the packed parameter buffer and its size.
inline void* const CU_LAUNCH_PARAM_END = reinterpret_cast<void*>(0);
inline void* const CU_LAUNCH_PARAM_BUFFER_POINTER = reinterpret_cast<void*>(1);
inline void* const CU_LAUNCH_PARAM_BUFFER_SIZE = reinterpret_cast<void*>(2);

/// CUlaunchAttribute and CUlaunchConfig (cuLaunchKernelEx, CUDA 11.8+).
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int value;
  } value;
};
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  LaunchAttribute* attrs;
  unsigned numAttrs;
};

struct Driver {
  void* lib = nullptr;
  std::string path;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**) = nullptr;
  CUresult (*cuLaunchKernelEx)(const LaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;

  /// $KDFLOW_CUDA_LIBRARY, else libcuda.so.1 (as `kdflow replay` loads it).
  void load() {
    const char* env = std::getenv("KDFLOW_CUDA_LIBRARY");
    path = env && *env ? env : "libcuda.so.1";
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      fail(kNoGpu, "%s: cannot load the CUDA driver (%s); this program needs an NVIDIA GPU", path.c_str(), dlerror());
    find(cuInit, "cuInit");
    find(cuDeviceGetCount, "cuDeviceGetCount");
    find(cuDeviceGet, "cuDeviceGet");
    find(cuDeviceGetName, "cuDeviceGetName");
    find(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    find(cuCtxSetCurrent, "cuCtxSetCurrent");
    find(cuCtxSynchronize, "cuCtxSynchronize");
    find(cuStreamCreate, "cuStreamCreate");
    find(cuModuleLoadDataEx, "cuModuleLoadDataEx");
    find(cuModuleGetFunction, "cuModuleGetFunction");
    find(cuFuncSetAttribute, "cuFuncSetAttribute");
    find(cuMemAlloc, "cuMemAlloc_v2");
    find(cuMemFree, "cuMemFree_v2");
    find(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    find(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    find(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    find(cuMemHostAlloc, "cuMemHostAlloc");
    find(cuLaunchKernel, "cuLaunchKernel");
    find(cuEventCreate, "cuEventCreate");
    find(cuEventRecord, "cuEventRecord");
    find(cuEventSynchronize, "cuEventSynchronize");
    find(cuEventElapsedTime, "cuEventElapsedTime");
    find(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    find(cuStreamEndCapture, "cuStreamEndCapture");
    find(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    find(cuGraphLaunch, "cuGraphLaunch");
    cuLaunchKernelEx = reinterpret_cast<decltype(cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
    cuGetErrorName = reinterpret_cast<decltype(cuGetErrorName)>(dlsym(lib, "cuGetErrorName"));
  }

  /// Fails (exit 70) naming the call when `r` is an error.
  void check(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    if (!cuGetErrorName || cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "unknown error";
    fail(kDriverError, "%s failed: %s (%d)", what, name, r);
  }

 private:
  template <class F>
  void find(F& f, const char* symbol) {
    f = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!f) fail(kNoGpu, "%s: the CUDA driver has no %s (too old for this program)", path.c_str(), symbol);
  }
};

// ---------------------------------------------------------------------------------------
// Data: data.bin holds every byte the run uploads (params, inputs, a session's host copies)
// and the reference outputs; run.cpp names each piece by offset and size. The device code is
// beside it as the build wrote it (device.cubin, device_0.cubin, ...).

inline std::string read_whole(const std::string& path, int missing_code) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(missing_code, "%s: cannot open: %s", path.c_str(), std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) fail(missing_code, "%s: read error", path.c_str());
  return out;
}

/// FNV-1a (64 bits): data.bin is checked against the hash it was generated with.
inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Where the data folder is: --data DIR, else the folder named when the program was built
/// (KDFLOW_DATA_DIR), else `data` beside the executable.
inline std::string data_dir(const std::string& option) {
  if (!option.empty()) return option;
#ifdef KDFLOW_DATA_DIR
  if (access(KDFLOW_DATA_DIR "/data.bin", R_OK) == 0) return KDFLOW_DATA_DIR;
#endif
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string p(exe, static_cast<size_t>(n));
    p = p.substr(0, p.rfind('/'));
    for (const char* rel : {"/data", "/../data"})
      if (access((p + rel + "/data.bin").c_str(), R_OK) == 0) return p + rel;
  }
  return "data";
}

struct Data {
  std::string dir;
  std::string bytes;
  void load(const std::string& folder, uint64_t size, uint64_t hash) {
    dir = folder;
    bytes = read_whole(dir + "/data.bin", kMissingFile);
    if (bytes.size() != size || fnv1a(bytes) != hash)
      fail(kBadData, "%s/data.bin: %zu bytes that are not the ones this program was generated with (%llu bytes)",
           dir.c_str(), bytes.size(), static_cast<unsigned long long>(size));
  }
  const char* at(uint64_t offset) const { return bytes.data() + offset; }
};

// ---------------------------------------------------------------------------------------
// Kernel parameters, packed as TVM packs them (each at its natural alignment) and passed to
// cuLaunchKernel through `extra`.

class Params {
 public:
  explicit Params(size_t bytes) : bytes_(bytes, 0) {}
  Params& ptr(size_t at, CUdeviceptr v) { return put(at, &v, 8); }
  Params& i32(size_t at, int32_t v) { return put(at, &v, 4); }
  Params& u32(size_t at, uint32_t v) { return put(at, &v, 4); }
  Params& i64(size_t at, int64_t v) { return put(at, &v, 8); }
  Params& f16(size_t at, uint16_t bits) { return put(at, &bits, 2); }
  Params& f32(size_t at, float v) { return put(at, &v, 4); }
  Params& f64(size_t at, double v) { return put(at, &v, 8); }
  void* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  Params& put(size_t at, const void* v, size_t n) {
    std::memcpy(bytes_.data() + at, v, n);
    return *this;
  }
  std::vector<unsigned char> bytes_;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// Launch attributes TVM 0.23+ sets on some kernels (cuLaunchKernelEx).
enum Attributes : unsigned { kNoAttributes = 0, kProgrammaticDependentLaunch = 1, kCooperative = 2 };

/// A kernel of the device modules, found by name when the modules are loaded.
struct Kernel {
  const char* name;
  unsigned max_dynamic_shared_memory;  ///< the most any launch of it asks for (raised above 48 KiB)
  CUfunction f = nullptr;
};

// ---------------------------------------------------------------------------------------
// cuBLAS, loaded as `kdflow replay` loads it ($KDFLOW_CUBLAS_LIBRARY, else libcublas.so.13,
// .12, .11, libcublas.so), for the tvm.contrib.cublas calls of a model.

struct Cublas {
  using Handle = struct cublasContext*;
  void* lib = nullptr;
  std::string path;
  Handle handle = nullptr;
  int (*create)(Handle*) = nullptr;
  int (*set_stream)(Handle, CUstream) = nullptr;
  int (*set_workspace)(Handle, void*, size_t) = nullptr;
  int (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*,
               float*, int) = nullptr;
  int (*sgemm_strided_batched)(Handle, int, int, int, int, int, const float*, const float*, int, long long,
                               const float*, int, long long, const float*, float*, int, long long, int) = nullptr;

  void load() {
    const char* env = std::getenv("KDFLOW_CUBLAS_LIBRARY");
    std::vector<std::string> names;
    if (env && *env)
      names.push_back(env);
    else
      names = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
    for (const std::string& n : names)
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
        path = n;
        break;
      }
    if (!lib)
      fail(kNoGpu, "%s: cannot load cuBLAS, which this model calls (set KDFLOW_CUBLAS_LIBRARY)", names[0].c_str());
    find(create, "cublasCreate_v2");
    find(set_stream, "cublasSetStream_v2");
    find(sgemm, "cublasSgemm_v2");
    find(sgemm_strided_batched, "cublasSgemmStridedBatched");
    set_workspace = reinterpret_cast<decltype(set_workspace)>(dlsym(lib, "cublasSetWorkspace_v2"));
  }
  void check(int status, const char* what) const {
    if (status != 0) fail(kDriverError, "%s failed: cuBLAS status %d", what, status);
  }

 private:
  template <class F>
  void find(F& f, const char* symbol) {
    f = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!f) fail(kNoGpu, "%s: cuBLAS has no %s", path.c_str(), symbol);
  }
};

// ---------------------------------------------------------------------------------------
// One GPU context with one stream: what a rank runs on. Uploads and downloads are
// synchronous (the NULL stream); the work stream does not wait for them, so run() calls
// sync() before a host copy and after the uploads.

struct Module {
  std::vector<std::string> files;  ///< the module's alternative files, tried in order (binaries before PTX)
};

struct Gpu {
  Driver* d = nullptr;
  int ordinal = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  std::vector<CUmodule> modules;
  std::vector<std::string> module_files;  ///< the file each module was loaded from
  bool capturing = false;                 ///< --graph: the run is being captured
  const char* pinned_base = nullptr;      ///< --graph: the host copies' bytes in page-locked memory
  uint64_t pinned_from = 0;               ///< their offset in data.bin
  Cublas* blas = nullptr;
  bool timing = false;  ///< --timing: an event after every step
  std::vector<CUevent> events;
  size_t step = 0;

  void open(Driver& driver, int gpu) {
    d = &driver;
    ordinal = gpu;
    d->check(d->cuDeviceGet(&device, gpu), "cuDeviceGet");
    d->check(d->cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    current();
    d->check(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  void current() const { d->check(d->cuCtxSetCurrent(context), "cuCtxSetCurrent"); }

  void load_modules(const std::string& dir, const std::vector<Module>& wanted) {
    current();
    for (const Module& m : wanted) {
      CUresult last = CUDA_SUCCESS;
      CUmodule handle = nullptr;
      std::string loaded;
      for (const std::string& f : m.files) {
        std::string image = read_whole(dir + "/" + f, kMissingFile);  // NUL-terminated, as PTX must be
        last = d->cuModuleLoadDataEx(&handle, image.c_str(), 0, nullptr, nullptr);
        if (last == CUDA_SUCCESS) {
          loaded = f;
          break;
        }
        std::fprintf(stderr, "run: %s did not load (CUresult %d)%s\n", f.c_str(), last,
                     &f != &m.files.back() ? "; trying the next file" : "");
      }
      if (loaded.empty()) d->check(last, ("cuModuleLoadDataEx of " + m.files.front()).c_str());
      modules.push_back(handle);
      module_files.push_back(loaded);
    }
  }

  /// The kernel from the one module that defines it; its dynamic shared memory limit raised
  /// where a launch needs more than the default 48 KiB.
  void find(Kernel& k) {
    current();
    for (size_t m = 0; m < modules.size(); ++m) {
      CUfunction f = nullptr;
      CUresult r = d->cuModuleGetFunction(&f, modules[m], k.name);
      if (r == CUDA_ERROR_NOT_FOUND) continue;
      d->check(r, (std::string("cuModuleGetFunction(") + k.name + ") in " + module_files[m]).c_str());
      k.f = f;
      if (k.max_dynamic_shared_memory > 48 * 1024)
        d->check(d->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(k.max_dynamic_shared_memory)),
                 (std::string("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) of ") + k.name).c_str());
      return;
    }
    fail(kBadData, "kernel %s is in none of the device modules", k.name);
  }

  CUdeviceptr alloc(uint64_t bytes, const char* what) {
    CUdeviceptr p = 0;
    d->check(d->cuMemAlloc(&p, bytes ? bytes : 4), (std::string("cuMemAlloc of ") + what).c_str());
    return p;
  }
  /// On the work stream, after what is queued there: cuMemcpyHtoD would run on the legacy NULL
  /// stream, which the work stream (non-blocking) does not wait for. The driver stages the
  /// pageable source before returning, so `src` may go at once.
  void upload(CUdeviceptr dst, const void* src, uint64_t bytes, const char* what) {
    if (!bytes) return;
    d->check(d->cuMemcpyHtoDAsync(dst, src, bytes, stream), (std::string("cuMemcpyHtoDAsync of ") + what).c_str());
  }
  std::string download(CUdeviceptr src, uint64_t bytes, const char* what) {
    std::string out(bytes, '\0');
    if (bytes) d->check(d->cuMemcpyDtoH(&out[0], src, bytes), (std::string("cuMemcpyDtoH of ") + what).c_str());
    return out;
  }
  void sync() { d->check(d->cuCtxSynchronize(), "cuCtxSynchronize"); }

  void launch(Kernel& k, Dim3 grid, Dim3 block, unsigned shared_memory, Params& p,
              unsigned attributes = kNoAttributes) {
    size_t size = p.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, p.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    void** ex = size ? extra : nullptr;
    if (attributes) {
      if (!d->cuLaunchKernelEx) fail(kNoGpu, "kernel %s needs cuLaunchKernelEx (CUDA 11.8 or later)", k.name);
      LaunchAttribute attrs[2];
      std::memset(attrs, 0, sizeof attrs);
      unsigned n = 0;
      if (attributes & kProgrammaticDependentLaunch) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attrs[n++].value.value = 1;
      }
      if (attributes & kCooperative) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n++].value.value = 1;
      }
      LaunchConfig c{grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_memory, stream, attrs, n};
      d->check(d->cuLaunchKernelEx(&c, k.f, nullptr, ex), (std::string("cuLaunchKernelEx of ") + k.name).c_str());
    } else {
      d->check(
          d->cuLaunchKernel(k.f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_memory, stream, nullptr, ex),
          (std::string("cuLaunchKernel of ") + k.name).c_str());
    }
    mark();
  }

  /// A host-to-device copy between kernels (an LLM session's KV-cache auxiliary arrays):
  /// after the work before it (eager), or as a copy node of the captured graph (--graph).
  void host_copy(CUdeviceptr dst, const Data& data, uint64_t offset, uint64_t bytes, const char* what) {
    if (capturing) {
      d->check(d->cuMemcpyHtoDAsync(dst, pinned_base + (offset - pinned_from), bytes, stream),
               (std::string("cuMemcpyHtoDAsync of ") + what).c_str());
      return;
    }
    sync();
    upload(dst, data.at(offset), bytes, what);
  }

  /// TVM's row-major C = op(A)·op(B) as cuBLAS's column-major Cᵀ = op(B)ᵀ·op(A)ᵀ (TVM's CallGemm).
  void sgemm(bool transa, bool transb, int m, int n, int k, CUdeviceptr a, int lda, CUdeviceptr b, int ldb,
             CUdeviceptr c, int ldc, const char* what) {
    const float one = 1.0f, zero = 0.0f;
    blas->check(blas->sgemm(blas->handle, transb ? 1 : 0, transa ? 1 : 0, m, n, k, &one, as_float(b), ldb, as_float(a),
                            lda, &zero, as_float(c), ldc),
                what);
    mark();
  }
  void sgemm_batched(bool transa, bool transb, int m, int n, int k, CUdeviceptr a, int lda, long long stride_a,
                     CUdeviceptr b, int ldb, long long stride_b, CUdeviceptr c, int ldc, long long stride_c, int batch,
                     const char* what) {
    const float one = 1.0f, zero = 0.0f;
    blas->check(
        blas->sgemm_strided_batched(blas->handle, transb ? 1 : 0, transa ? 1 : 0, m, n, k, &one, as_float(b), ldb,
                                    stride_b, as_float(a), lda, stride_a, &zero, as_float(c), ldc, stride_c, batch),
        what);
    mark();
  }

  /// --timing: events around every step (events[0] before the first).
  void start_timing(size_t steps) {
    timing = true;
    while (events.size() < steps + 1) {
      CUevent e = nullptr;
      d->check(d->cuEventCreate(&e, 0), "cuEventCreate");
      events.push_back(e);
    }
    step = 0;
    mark();
  }
  void mark() {
    if (!timing || capturing) return;
    if (step < events.size()) d->check(d->cuEventRecord(events[step], stream), "cuEventRecord");
    ++step;
  }
  /// Microseconds of step s (after start_timing and a sync).
  double step_us(size_t s) const {
    float ms = 0;
    d->check(d->cuEventElapsedTime(&ms, events[s], events[s + 1]), "cuEventElapsedTime");
    return 1000.0 * ms;
  }

 private:
  static float* as_float(CUdeviceptr p) { return reinterpret_cast<float*>(static_cast<uintptr_t>(p)); }
};

// ---------------------------------------------------------------------------------------
// Collectives between ranks (a tensor-parallel build), made on the host: each rank's bytes
// downloaded, combined as the disco runtime's NCCL calls would, the result uploaded.

enum class DType {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64
};
enum class Reduce { Sum, Prod, Min, Max, Avg };

inline size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8:
      return 1;
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::Int32:
    case DType::UInt32:
    case DType::Float32:
      return 4;
    default:
      return 8;
  }
}

inline double half_to_double(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, frac = h & 1023;
  double v = exp == 0 ? std::ldexp(frac, -24) : exp == 31 ? (frac ? NAN : INFINITY) : std::ldexp(frac + 1024, exp - 25);
  return sign ? -v : v;
}
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = static_cast<int>((x >> 23) & 0xff);
  if (exp == 255) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13), rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
inline double bf16_to_double(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

/// Element i of `bytes` as a double.
inline double element(const char* bytes, DType t, size_t i) {
  auto get = [&](auto v) {
    std::memcpy(&v, bytes + i * sizeof v, sizeof v);
    return v;
  };
  switch (t) {
    case DType::Bool:
      return get(uint8_t{}) != 0 ? 1.0 : 0.0;
    case DType::Int8:
      return get(int8_t{});
    case DType::Int16:
      return get(int16_t{});
    case DType::Int32:
      return get(int32_t{});
    case DType::Int64:
      return static_cast<double>(get(int64_t{}));
    case DType::UInt8:
      return get(uint8_t{});
    case DType::UInt16:
      return get(uint16_t{});
    case DType::UInt32:
      return get(uint32_t{});
    case DType::UInt64:
      return static_cast<double>(get(uint64_t{}));
    case DType::Float16:
      return half_to_double(get(uint16_t{}));
    case DType::BFloat16:
      return bf16_to_double(get(uint16_t{}));
    case DType::Float32:
      return get(float{});
    case DType::Float64:
      return get(double{});
  }
  return 0;
}

/// The element-wise reduction of every rank's bytes (float16 and bfloat16 in float, as NCCL does).
inline std::string reduce(const std::vector<std::string>& sent, DType t, Reduce op) {
  std::string out = sent.at(0);
  const size_t n = out.size() / dtype_bytes(t);
  for (size_t i = 0; i < n; ++i) {
    auto fold = [&](auto zero) {
      using T = decltype(zero);
      (void)zero;
      auto at = [&](const std::string& s) {
        T v;
        std::memcpy(&v, s.data() + i * sizeof(T), sizeof(T));
        return v;
      };
      T acc = at(sent[0]);
      for (size_t r = 1; r < sent.size(); ++r) {
        T v = at(sent[r]);
        acc = op == Reduce::Prod  ? T(acc * v)
              : op == Reduce::Min ? std::min(acc, v)
              : op == Reduce::Max ? std::max(acc, v)
                                  : T(acc + v);
      }
      if (op == Reduce::Avg) acc = T(acc / static_cast<T>(sent.size()));
      std::memcpy(&out[i * sizeof(T)], &acc, sizeof(T));
    };
    auto fold16 = [&](bool bf) {
      auto at = [&](const std::string& s) {
        uint16_t v;
        std::memcpy(&v, s.data() + 2 * i, 2);
        return static_cast<float>(bf ? bf16_to_double(v) : half_to_double(v));
      };
      float acc = at(sent[0]);
      for (size_t r = 1; r < sent.size(); ++r) {
        float v = at(sent[r]);
        acc = op == Reduce::Prod  ? acc * v
              : op == Reduce::Min ? std::min(acc, v)
              : op == Reduce::Max ? std::max(acc, v)
                                  : acc + v;
      }
      if (op == Reduce::Avg) acc /= static_cast<float>(sent.size());
      uint16_t bits = bf ? float_to_bf16(acc) : float_to_half(acc);
      std::memcpy(&out[2 * i], &bits, 2);
    };
    switch (t) {
      case DType::Float32:
        fold(float{});
        break;
      case DType::Float64:
        fold(double{});
        break;
      case DType::Int32:
        fold(int32_t{});
        break;
      case DType::Int64:
        fold(int64_t{});
        break;
      case DType::Int8:
        fold(int8_t{});
        break;
      case DType::UInt8:
        fold(uint8_t{});
        break;
      case DType::Float16:
        fold16(false);
        break;
      case DType::BFloat16:
        fold16(true);
        break;
      default:
        fail(kBadData, "a reduction of this element type is not modelled");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Comparing an output with TVM's reference, as `kdflow replay` does: |a - e| <= atol + rtol·|e|
// for floats (float16 at least rtol 1e-2, atol 1e-3), integers exactly; and whether a
// constant array (the reference's mean) would pass as well, in which case the comparison
// verifies nothing.

struct Check {
  bool pass = true;
  bool uninformative = false;
  bool exact = false;
  uint64_t elements = 0, mismatches = 0;
  double max_abs = 0, max_rel = 0;
};

inline bool is_integer(DType t) {
  return t != DType::Float16 && t != DType::BFloat16 && t != DType::Float32 && t != DType::Float64;
}

inline Check compare(const std::string& actual, DType at, const char* expected, DType et, uint64_t count, double rtol,
                     double atol) {
  Check c;
  c.exact = is_integer(at) && is_integer(et);
  c.elements = count;
  if (et == DType::Float16) {
    rtol = std::max(rtol, 1e-2);
    atol = std::max(atol, 1e-3);
  }
  for (uint64_t i = 0; i < count; ++i) {
    double a = element(actual.data(), at, i), e = element(expected, et, i), diff = 0, rel = 0;
    bool ok;
    if (std::isnan(a) || std::isnan(e)) {
      ok = std::isnan(a) && std::isnan(e);
      diff = rel = ok ? 0 : INFINITY;
    } else if (a == e) {
      ok = true;
    } else {
      diff = std::fabs(a - e);
      rel = e != 0 ? diff / std::fabs(e) : INFINITY;
      ok = !c.exact && diff <= atol + rtol * std::fabs(e);
    }
    c.max_abs = std::max(c.max_abs, diff);
    c.max_rel = std::max(c.max_rel, rel);
    if (!ok) ++c.mismatches;
  }
  c.pass = c.mismatches == 0;
  if (count >= 2) {
    double sum = 0;
    bool finite = true;
    for (uint64_t i = 0; i < count && finite; ++i) {
      double e = element(expected, et, i);
      finite = std::isfinite(e);
      sum += e;
    }
    if (finite) {
      double mean = sum / static_cast<double>(count);
      if (c.exact) mean = std::nearbyint(mean);
      bool constant_passes = true;
      for (uint64_t i = 0; i < count && constant_passes; ++i) {
        double e = element(expected, et, i);
        constant_passes = c.exact ? mean == e : std::fabs(mean - e) <= atol + rtol * std::fabs(e);
      }
      c.uninformative = constant_passes;
    }
  }
  return c;
}

// ---------------------------------------------------------------------------------------
// Options.

struct Options {
  int repeat = 1;       ///< --repeat N: run the model N times (the outputs of the last run are compared)
  bool timing = false;  ///< --timing: each kernel's time (median over the runs) with CUDA events
  bool graph = false;   ///< --graph: capture one run as a CUDA graph and launch that
  int gpu = -1;         ///< --gpu N: the device (default 0; a sharded model: rank r on GPU r mod count)
  std::string data;     ///< --data DIR: where data.bin and the device code are
  double rtol = 1e-3, atol = 1e-5;
  bool quiet = false;
};

inline Options parse_options(int argc, char** argv, const char* usage, double rtol, double atol) {
  Options o;
  o.rtol = rtol;
  o.atol = atol;
  auto number = [&](int& i, const char* name) -> const char* {
    if (i + 1 >= argc) fail(kUsage, "%s needs a value (%s)", name, usage);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    char* end = nullptr;
    if (a == "--repeat") {
      const char* v = number(i, "--repeat");
      long n = std::strtol(v, &end, 10);
      if (*end || n < 1 || n > 1000000) fail(kUsage, "--repeat %s: expected a count from 1", v);
      o.repeat = static_cast<int>(n);
    } else if (a == "--gpu") {
      const char* v = number(i, "--gpu");
      long n = std::strtol(v, &end, 10);
      if (*end || n < 0 || n > 4096) fail(kUsage, "--gpu %s: expected a device ordinal", v);
      o.gpu = static_cast<int>(n);
    } else if (a == "--rtol" || a == "--atol") {
      const char* v = number(i, a.c_str());
      double x = std::strtod(v, &end);
      if (*end || !(x >= 0)) fail(kUsage, "%s %s: expected a tolerance of 0 or more", a.c_str(), v);
      (a == "--rtol" ? o.rtol : o.atol) = x;
    } else if (a == "--data") {
      o.data = number(i, "--data");
    } else if (a == "--timing") {
      o.timing = true;
    } else if (a == "--graph") {
      o.graph = true;
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("%s\n", usage);
      std::exit(0);
    } else {
      fail(kUsage, "unknown option %s (%s)", a.c_str(), usage);
    }
  }
  if (o.graph && o.timing) fail(kUsage, "--timing times the kernels of eager runs; drop --graph");
  return o;
}

/// Microseconds on the host's monotonic clock.
inline double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace kd

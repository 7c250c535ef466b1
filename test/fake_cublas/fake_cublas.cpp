// fake_cublas.cpp — a stand-in for libcublas.so for the replay tests: the cuBLAS entry points
// kdflow's replay engine uses, computing on the fake CUDA driver's host memory. Loaded
// through KDFLOW_CUBLAS_LIBRARY; finds the fake driver as the engine loaded it (dlopen of
// $KDFLOW_CUDA_LIBRARY with RTLD_NOLOAD) and uses its two exported helpers
// (kdflow_fake_cuda_host_pointer, kdflow_fake_cuda_enqueue; see fake_cuda.cpp).
//
// As strict as the real library (cublas_api.h, the cuBLAS documentation of cublas<t>gemm):
// calls on a handle that was not created (or was destroyed) fail with
// CUBLAS_STATUS_NOT_INITIALIZED; m, n, k < 0, an op other than N/T/C, lda < max(1, rows of
// op(A) as stored: m for N, k for T), ldb < max(1, k for N, n for T), ldc < max(1, m), null
// alpha/beta, or a negative batch count fail with CUBLAS_STATUS_INVALID_VALUE. Stricter than
// the real one: a gemm before cublasSetStream (the real one would use the NULL stream) and
// a matrix that does not lie inside one allocation of the fake driver (the real one would
// fault later) fail with CUBLAS_STATUS_EXECUTION_FAILED. The product is computed in double
// and stored as float when the work runs in stream order (at once, or at each launch of a
// graph that captured it).
//
// Every call appends one line to $KDFLOW_FAKE_CUDA_LOG (the fake driver's log):
//   cublasSgemm handle=0x.. stream=0x.. transa=N transb=T m=400 n=1 k=100 lda=.. ldb=.. ldc=..
//       A=0x.. B=0x.. C=0x.. alpha=1 beta=0 -> 0
// and the work, when it runs, one more with the sum of C and its first element (so tests
// can check the product without reading device memory):
//   gemm-work m=400 n=1 k=100 C=0x.. batch=1 sum=.. c0=.. -> 0
//
// The work is queued under a name that carries the handle's workspace ("cublasSgemm_v2
// ws=0x...+BYTES"), so the fake driver fails a graph in which two calls that no edge orders
// share it. KDFLOW_FAKE_CUBLAS_FAULT=N: the Nth gemm on a handle faults when its work
// runs (a sticky CUDA_ERROR_ILLEGAL_ADDRESS in the fake driver, as a faulting cuBLAS kernel
// would leave).
#include <dlfcn.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace {

using Status = int;
using CUdeviceptr = unsigned long long;
constexpr Status kSuccess = 0, kNotInitialized = 1, kInvalidValue = 7, kExecutionFailed = 13;

/// Every exported function holds this (a sharded replay calls from one thread per rank).
std::recursive_mutex& api_mutex() {
  static std::recursive_mutex m;
  return m;
}

/// Lines go through the fake driver when it is loaded (kdflow_fake_cuda_log: the same
/// thread numbers, never interleaved with its lines), else straight to the log file.
void log_line(const char* fmt, ...) {
  const char* path = std::getenv("KDFLOW_FAKE_CUDA_LOG");
  if (!path || !*path) return;
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  using LogFn = void (*)(const char*);
  LogFn through = nullptr;
  if (const char* drv = std::getenv("KDFLOW_CUDA_LIBRARY"); drv && *drv)
    if (void* h = ::dlopen(drv, RTLD_NOW | RTLD_NOLOAD)) {
      through = reinterpret_cast<LogFn>(::dlsym(h, "kdflow_fake_cuda_log"));
      ::dlclose(h);
    }
  if (through) return through(buf);
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  FILE* f = std::fopen(path, "a");
  if (!f) return;
  std::fputs(buf, f);
  std::fputc('\n', f);
  std::fclose(f);
}

using HostPointerFn = unsigned char* (*)(CUdeviceptr, size_t);
using EnqueueFn = int (*)(void*, const char*, void (*)(void*), void*);
using FaultFn = void (*)(int);

struct Driver {
  HostPointerFn host_pointer = nullptr;
  EnqueueFn enqueue = nullptr;
  FaultFn fault = nullptr;
};

/// The fake driver the engine loaded (never loads one itself).
bool driver(Driver* d) {
  const char* path = std::getenv("KDFLOW_CUDA_LIBRARY");
  if (!path || !*path) return false;
  void* h = ::dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  d->host_pointer = reinterpret_cast<HostPointerFn>(::dlsym(h, "kdflow_fake_cuda_host_pointer"));
  d->enqueue = reinterpret_cast<EnqueueFn>(::dlsym(h, "kdflow_fake_cuda_enqueue"));
  d->fault = reinterpret_cast<FaultFn>(::dlsym(h, "kdflow_fake_cuda_fault"));
  ::dlclose(h);  // balances the NOLOAD reference; the engine still holds it
  return d->host_pointer && d->enqueue;
}

struct Handle {
  Driver drv;
  void* stream = nullptr;
  bool stream_set = false;
  CUdeviceptr workspace = 0;
  size_t workspace_bytes = 0;
  int calls = 0;  // gemms queued on this handle (KDFLOW_FAKE_CUBLAS_FAULT)
};

struct Gemm {
  Driver drv;
  int ta, tb, m, n, k, lda, ldb, ldc, batch;
  long long sa, sb, sc;
  float alpha, beta;
  CUdeviceptr A, B, C;
  bool fault = false;
};

/// The live handles. A handle never destroyed (an engine that abandoned a faulted device
/// leaves it) goes with the process, as the real library's does.
struct Handles : std::set<Handle*> {
  ~Handles() {
    for (Handle* h : *this) delete h;
  }
};
std::set<Handle*>& handles() {
  static Handles h;
  return h;
}
std::vector<std::unique_ptr<Gemm>>& gemms() {  // queued work lives as long as the process
  static std::vector<std::unique_ptr<Gemm>> g;
  return g;
}

const char* op_name(int op) { return op == 0 ? "N" : op == 1 ? "T" : op == 2 ? "C" : "?"; }

/// Elements a column-major rows × cols matrix with leading dimension ld spans.
uint64_t span(int rows, int cols, int ld) {
  if (rows == 0 || cols == 0) return 0;
  return static_cast<uint64_t>(ld) * static_cast<uint64_t>(cols - 1) + static_cast<uint64_t>(rows);
}

void run_gemm(void* p) {
  const Gemm& g = *static_cast<const Gemm*>(p);
  if (g.fault && g.drv.fault) {
    g.drv.fault(700);
    log_line("gemm-work m=%d n=%d k=%d C=0x%llx -> fault (KDFLOW_FAKE_CUBLAS_FAULT)", g.m, g.n, g.k, g.C);
    return;
  }
  double sum = 0, c0 = 0;
  int arows = g.ta == 0 ? g.m : g.k, acols = g.ta == 0 ? g.k : g.m;
  int brows = g.tb == 0 ? g.k : g.n, bcols = g.tb == 0 ? g.n : g.k;
  for (int b = 0; b < g.batch; ++b) {
    const float* A = reinterpret_cast<const float*>(
        g.drv.host_pointer(g.A + 4ull * g.sa * b, 4 * span(arows, acols, g.lda)));
    const float* B = reinterpret_cast<const float*>(
        g.drv.host_pointer(g.B + 4ull * g.sb * b, 4 * span(brows, bcols, g.ldb)));
    float* C = reinterpret_cast<float*>(g.drv.host_pointer(g.C + 4ull * g.sc * b, 4 * span(g.m, g.n, g.ldc)));
    if (!A || !B || !C) {  // freed since it was queued
      log_line("cublas gemm work: a matrix is no longer inside an allocation (batch %d)", b);
      return;
    }
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        double acc = 0;
        for (int l = 0; l < g.k; ++l) {
          float a = g.ta == 0 ? A[i + static_cast<int64_t>(l) * g.lda] : A[l + static_cast<int64_t>(i) * g.lda];
          float bv = g.tb == 0 ? B[l + static_cast<int64_t>(j) * g.ldb] : B[j + static_cast<int64_t>(l) * g.ldb];
          acc += static_cast<double>(a) * bv;
        }
        float& c = C[i + static_cast<int64_t>(j) * g.ldc];
        c = static_cast<float>(g.alpha * acc + (g.beta == 0 ? 0.0 : g.beta * static_cast<double>(c)));
        sum += c;
        if (b == 0 && i == 0 && j == 0) c0 = c;
      }
  }
  log_line("gemm-work m=%d n=%d k=%d C=0x%llx batch=%d sum=%.9g c0=%.9g -> 0", g.m, g.n, g.k, g.C, g.batch, sum, c0);
}

Status gemm(const char* call, Handle* h, int ta, int tb, int m, int n, int k, const float* alpha, CUdeviceptr A,
            int lda, long long sa, CUdeviceptr B, int ldb, long long sb, const float* beta, CUdeviceptr C, int ldc,
            long long sc, int batch) {
  Status r = kSuccess;
  const char* why = "";
  if (!handles().count(h)) r = kNotInitialized, why = " error=handle_not_created";
  else if ((ta != 0 && ta != 1 && ta != 2) || (tb != 0 && tb != 1 && tb != 2)) r = kInvalidValue, why = " error=bad_op";
  else if (m < 0 || n < 0 || k < 0 || batch < 0) r = kInvalidValue, why = " error=negative_dimension";
  else if (lda < std::max(1, ta == 0 ? m : k)) r = kInvalidValue, why = " error=lda_too_small";
  else if (ldb < std::max(1, tb == 0 ? k : n)) r = kInvalidValue, why = " error=ldb_too_small";
  else if (ldc < std::max(1, m)) r = kInvalidValue, why = " error=ldc_too_small";
  else if (!alpha || !beta) r = kInvalidValue, why = " error=null_alpha_or_beta";
  else if (!h->stream_set) r = kExecutionFailed, why = " error=no_cublasSetStream_before_the_call";
  int arows = ta == 0 ? m : k, acols = ta == 0 ? k : m, brows = tb == 0 ? k : n, bcols = tb == 0 ? n : k;
  if (r == kSuccess && m && n && batch)
    for (int b = 0; b < batch && r == kSuccess; ++b) {
      if ((k && !h->drv.host_pointer(A + 4ull * sa * b, 4 * span(arows, acols, lda))) ||
          (k && !h->drv.host_pointer(B + 4ull * sb * b, 4 * span(brows, bcols, ldb))))
        r = kExecutionFailed, why = " error=A_or_B_outside_every_allocation";
      else if (!h->drv.host_pointer(C + 4ull * sc * b, 4 * span(m, n, ldc)))
        r = kExecutionFailed, why = " error=C_outside_every_allocation";
    }
  int q = 0;
  if (r == kSuccess && m && n && batch) {
    const char* planted = std::getenv("KDFLOW_FAKE_CUBLAS_FAULT");
    bool fault = planted && *planted && std::atoi(planted) == ++h->calls;
    gemms().push_back(std::unique_ptr<Gemm>(new Gemm{h->drv, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc,
                                                     *alpha, *beta, A, B, C, fault}));
    char what[160];
    std::snprintf(what, sizeof what, "%s ws=0x%llx+%zu", call, h->workspace, h->workspace_bytes);
    q = h->drv.enqueue(h->stream, what, &run_gemm, gemms().back().get());
    if (q != 0) r = kExecutionFailed, why = " error=enqueue_failed";
  }
  log_line("%s handle=%p stream=%p workspace=0x%llx transa=%s transb=%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d "
           "A=0x%llx B=0x%llx "
           "C=0x%llx stride_a=%lld stride_b=%lld stride_c=%lld batch=%d alpha=%g beta=%g -> %d%s",
           call, static_cast<void*>(h), h && handles().count(h) ? h->stream : nullptr,
           h && handles().count(h) ? h->workspace : 0ull, op_name(ta), op_name(tb), m, n,
           k, lda, ldb, ldc, A, B, C, sa, sb, sc, batch, alpha ? *alpha : 0.0, beta ? *beta : 0.0, r, why);
  return r;
}

}  // namespace

extern "C" {

Status cublasCreate_v2(Handle** out) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Driver d;
  if (!out) {
    log_line("cublasCreate -> %d error=null_handle_pointer", kInvalidValue);
    return kInvalidValue;
  }
  if (!driver(&d)) {
    log_line("cublasCreate -> %d error=fake_driver_not_loaded", kNotInitialized);
    return kNotInitialized;
  }
  // As cuBLAS's static runtime opens the driver by its soname at the first call:
  // KDFLOW_FAKE_CUBLAS_LOADS_DRIVER=PATH opens PATH (a driver other than the engine's).
  if (const char* drv = std::getenv("KDFLOW_FAKE_CUBLAS_LOADS_DRIVER"); drv && *drv) {
    void* other = ::dlopen(drv, RTLD_NOW | RTLD_LOCAL);
    log_line("cublasCreate loads driver=%s -> %s", drv, other ? "loaded" : "failed");
  }
  Handle* h = new Handle{d};
  handles().insert(h);
  *out = h;
  log_line("cublasCreate -> 0 handle=%p", static_cast<void*>(h));
  return kSuccess;
}

Status cublasDestroy_v2(Handle* h) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Status r = handles().erase(h) ? kSuccess : kNotInitialized;
  if (r == kSuccess) delete h;
  log_line("cublasDestroy handle=%p -> %d", static_cast<void*>(h), r);
  return r;
}

Status cublasSetStream_v2(Handle* h, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Status r = handles().count(h) ? kSuccess : kNotInitialized;
  if (r == kSuccess) h->stream = stream, h->stream_set = true;
  log_line("cublasSetStream handle=%p stream=%p -> %d", static_cast<void*>(h), stream, r);
  return r;
}

/// The workspace must lie inside one allocation of the fake driver; 256-byte aligned as
/// cuBLAS requires.
Status cublasSetWorkspace_v2(Handle* h, void* ws, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Status r = handles().count(h) ? kSuccess : kNotInitialized;
  CUdeviceptr p = reinterpret_cast<CUdeviceptr>(ws);
  const char* why = "";
  if (r == kSuccess && bytes && (!ws || p % 256 || !h->drv.host_pointer(p, bytes)))
    r = kInvalidValue, why = " error=workspace_not_an_aligned_allocation";
  if (r == kSuccess) h->workspace = p, h->workspace_bytes = bytes;
  log_line("cublasSetWorkspace handle=%p workspace=0x%llx bytes=%zu -> %d%s", static_cast<void*>(h), p, bytes, r, why);
  return r;
}

Status cublasSgemm_v2(Handle* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda,
                      const float* B, int ldb, const float* beta, float* C, int ldc) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  return gemm("cublasSgemm", h, ta, tb, m, n, k, alpha, reinterpret_cast<CUdeviceptr>(A), lda, 0,
              reinterpret_cast<CUdeviceptr>(B), ldb, 0, beta, reinterpret_cast<CUdeviceptr>(C), ldc, 0, 1);
}

Status cublasSgemmStridedBatched(Handle* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A,
                                 int lda, long long sa, const float* B, int ldb, long long sb, const float* beta,
                                 float* C, int ldc, long long sc, int batch) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  return gemm("cublasSgemmStridedBatched", h, ta, tb, m, n, k, alpha, reinterpret_cast<CUdeviceptr>(A), lda, sa,
              reinterpret_cast<CUdeviceptr>(B), ldb, sb, beta, reinterpret_cast<CUdeviceptr>(C), ldc, sc, batch);
}

const char* cublasGetStatusName(Status s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

}  // extern "C"

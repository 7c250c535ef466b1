// cublas.h — the few cuBLAS entry points replay needs, loaded at run time (dlopen; never
// linked, no cuBLAS headers at build time). Types are declared here as cublas_api.h does.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"

namespace kdflow::cublas {

struct cublasContext;
using cublasHandle_t = cublasContext*;
using cublasStatus_t = int;
using cudaStream_t = void*;  // a CUstream: the runtime and driver stream types are interchangeable
enum cublasOperation_t : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;

struct Library {
  std::string library;  ///< what was dlopen()ed
  void* handle = nullptr;
  cublasStatus_t (*cublasCreate)(cublasHandle_t* handle) = nullptr;                 // cublasCreate_v2
  cublasStatus_t (*cublasDestroy)(cublasHandle_t handle) = nullptr;                 // cublasDestroy_v2
  cublasStatus_t (*cublasSetStream)(cublasHandle_t handle, cudaStream_t s) = nullptr;  // cublasSetStream_v2
  cublasStatus_t (*cublasSgemm)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                const float* beta, float* C, int ldc) = nullptr;  // cublasSgemm_v2
  cublasStatus_t (*cublasSgemmStridedBatched)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                                              int m, int n, int k, const float* alpha, const float* A, int lda,
                                              long long stride_a, const float* B, int ldb, long long stride_b,
                                              const float* beta, float* C, int ldc, long long stride_c,
                                              int batch) = nullptr;
  cublasStatus_t (*cublasSetWorkspace)(cublasHandle_t handle, void* workspace,
                                       size_t bytes) = nullptr;  // cublasSetWorkspace_v2, optional (CUDA 11.4+)
  const char* (*cublasGetStatusName)(cublasStatus_t s) = nullptr;  // optional (CUDA 11.4.2+)

  /// "CUBLAS_STATUS_INVALID_VALUE (7)" for `s`.
  std::string describe(cublasStatus_t s) const;
};

/// The names tried, in order: `override_path`, else $KDFLOW_CUBLAS_LIBRARY, else
/// libcublas.so.13, .12, .11, libcublas.so.
std::vector<std::string> cublas_library_candidates(const std::string& override_path);

/// Loads the first candidate that opens. None → ExitCode::Unavailable, one line naming
/// every name tried.
Expected<Library> load_cublas(const std::string& override_path);

}  // namespace kdflow::cublas

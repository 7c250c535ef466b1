// cublas.cpp — loads libcublas at run time. See cublas.h.
#include "cublas.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

namespace kdflow::cublas {

std::string Library::describe(cublasStatus_t s) const {
  const char* name = cublasGetStatusName ? cublasGetStatusName(s) : nullptr;
  if (name && *name) return fmt::format("{} ({})", name, s);
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS (0)";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED (1)";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED (3)";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE (7)";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH (8)";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR (11)";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED (13)";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR (14)";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED (15)";
    default: return fmt::format("cuBLAS status {}", s);
  }
}

std::vector<std::string> cublas_library_candidates(const std::string& override_path) {
  if (!override_path.empty()) return {override_path};
  const char* env = std::getenv("KDFLOW_CUBLAS_LIBRARY");
  if (env && *env) return {env};
  std::vector<std::string> names = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
  // A CUDA toolkit that is not on the loader path (no ldconfig entry, no LD_LIBRARY_PATH):
  // $CUDA_HOME, $CUDA_PATH, then the toolkit's default folder.
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) roots.push_back(v);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots)
    for (const char* dir : {"/lib64/", "/targets/x86_64-linux/lib/", "/targets/sbsa-linux/lib/"})
      for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}) names.push_back(root + dir + n);
  return names;
}

Expected<Library> load_cublas(const std::string& override_path) {
  Library l;
  std::vector<std::string> names = cublas_library_candidates(override_path);
  std::string tried, last_error;
  for (const std::string& n : names) {
    // RTLD_LOCAL: cuBLAS's symbols must not satisfy anyone else's references.
    l.handle = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (l.handle) {
      l.library = n;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + n;
    if (const char* e = ::dlerror()) last_error = e;
  }
  if (!l.handle)
    return file_error(names.back(),
                      fmt::format("cannot load cuBLAS (tried {}; last: {}); the model calls cuBLAS, so replay needs "
                                  "the CUDA toolkit's libcublas (set KDFLOW_CUBLAS_LIBRARY to name one)",
                                  tried, last_error.empty() ? "dlopen failed" : last_error),
                      ExitCode::Unavailable);
  struct Entry {
    const char* symbol;
    bool required;
    void** slot;
  } entries[] = {
      {"cublasCreate_v2", true, reinterpret_cast<void**>(&l.cublasCreate)},
      {"cublasDestroy_v2", true, reinterpret_cast<void**>(&l.cublasDestroy)},
      {"cublasSetStream_v2", true, reinterpret_cast<void**>(&l.cublasSetStream)},
      {"cublasSgemm_v2", true, reinterpret_cast<void**>(&l.cublasSgemm)},
      {"cublasSgemmStridedBatched", true, reinterpret_cast<void**>(&l.cublasSgemmStridedBatched)},
      {"cublasSetWorkspace_v2", false, reinterpret_cast<void**>(&l.cublasSetWorkspace)},
      {"cublasGetStatusName", false, reinterpret_cast<void**>(&l.cublasGetStatusName)},
  };
  for (Entry& e : entries) {
    *e.slot = ::dlsym(l.handle, e.symbol);
    if (!*e.slot && e.required)
      return file_error(l.library, fmt::format("cuBLAS has no {} (library too old for replay)", e.symbol),
                        ExitCode::Unavailable);
  }
  return l;
}

}  // namespace kdflow::cublas

namespace kdflow {
std::vector<std::string> replay_cublas_candidates(const std::string& override_path) {
  return cublas::cublas_library_candidates(override_path);
}
}  // namespace kdflow

// cuda_driver.cpp — loads the CUDA driver at run time. Nothing here links libcuda: a build
// machine without a GPU builds and runs kdflow, and only `replay` needs the driver.
//
// Entry points are looked up by their base name with cuGetProcAddress and the CUDA version
// whose ABI the declarations in cuda_driver.h have (e.g. "cuMemAlloc" at 3020 is
// cuMemAlloc_v2; asking at 13000 for "cuCtxCreate" would return cuCtxCreate_v4, another
// signature). Without cuGetProcAddress (drivers before 11.3), dlsym of the versioned symbol.
#include "cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

namespace kdflow::cuda {
namespace {

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, uint64_t, int*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, uint64_t);

struct Entry {
  const char* base;     ///< name for cuGetProcAddress
  int version;          ///< CUDA version (1000 * major + 10 * minor) of the ABI we declare
  const char* symbol;   ///< exported name with that ABI, for dlsym
  bool required;
  void** slot;
};

/// Names for the errors we mention when the driver cannot describe them.
const char* fallback_name(CUresult r) {
  switch (r) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return nullptr;
  }
}

}  // namespace

std::string Driver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName && cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString && cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (!name) name = fallback_name(r);
  std::string out = name ? std::string(name) : fmt::format("CUDA error {}", r);
  if (text && *text) out += fmt::format(" ({})", text);
  return out;
}

std::string driver_library_path(const std::string& override_path) {
  if (!override_path.empty()) return override_path;
  const char* env = std::getenv("KDFLOW_CUDA_LIBRARY");
  if (env && *env) return env;
  return "libcuda.so.1";
}

Expected<Driver> load_driver(const std::string& override_path) {
  Driver d;
  d.library = driver_library_path(override_path);
  auto unavailable = [&](const std::string& msg) { return file_error(d.library, msg, ExitCode::Unavailable); };

  // RTLD_LOCAL: the driver's symbols must not satisfy anyone else's references.
  d.handle = ::dlopen(d.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d.handle) {
    const char* why = ::dlerror();
    return unavailable(fmt::format("cannot load the CUDA driver ({}); replay needs an NVIDIA GPU and its driver "
                                   "(set KDFLOW_CUDA_LIBRARY to use another libcuda)",
                                   why ? why : "dlopen failed"));
  }

  Entry entries[] = {
      {"cuInit", 2000, "cuInit", true, reinterpret_cast<void**>(&d.cuInit)},
      {"cuDeviceGet", 2000, "cuDeviceGet", true, reinterpret_cast<void**>(&d.cuDeviceGet)},
      {"cuDeviceGetCount", 2000, "cuDeviceGetCount", false, reinterpret_cast<void**>(&d.cuDeviceGetCount)},
      {"cuDeviceGetAttribute", 2000, "cuDeviceGetAttribute", true, reinterpret_cast<void**>(&d.cuDeviceGetAttribute)},
      {"cuDeviceGetName", 2000, "cuDeviceGetName", true, reinterpret_cast<void**>(&d.cuDeviceGetName)},
      {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2", false, reinterpret_cast<void**>(&d.cuDeviceTotalMem)},
      {"cuCtxCreate", 3020, "cuCtxCreate_v2", false, reinterpret_cast<void**>(&d.cuCtxCreate)},
      {"cuCtxDestroy", 4000, "cuCtxDestroy_v2", false, reinterpret_cast<void**>(&d.cuCtxDestroy)},
      {"cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain", false,
       reinterpret_cast<void**>(&d.cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2", false,
       reinterpret_cast<void**>(&d.cuDevicePrimaryCtxRelease)},
      {"cuCtxSetCurrent", 4000, "cuCtxSetCurrent", true, reinterpret_cast<void**>(&d.cuCtxSetCurrent)},
      {"cuCtxSynchronize", 2000, "cuCtxSynchronize", true, reinterpret_cast<void**>(&d.cuCtxSynchronize)},
      {"cuModuleLoadDataEx", 2010, "cuModuleLoadDataEx", true, reinterpret_cast<void**>(&d.cuModuleLoadDataEx)},
      {"cuModuleGetFunction", 2000, "cuModuleGetFunction", true, reinterpret_cast<void**>(&d.cuModuleGetFunction)},
      {"cuModuleUnload", 2000, "cuModuleUnload", true, reinterpret_cast<void**>(&d.cuModuleUnload)},
      {"cuFuncSetAttribute", 9000, "cuFuncSetAttribute", true, reinterpret_cast<void**>(&d.cuFuncSetAttribute)},
      {"cuFuncGetAttribute", 2020, "cuFuncGetAttribute", true, reinterpret_cast<void**>(&d.cuFuncGetAttribute)},
      {"cuMemAlloc", 3020, "cuMemAlloc_v2", true, reinterpret_cast<void**>(&d.cuMemAlloc)},
      {"cuMemFree", 3020, "cuMemFree_v2", true, reinterpret_cast<void**>(&d.cuMemFree)},
      {"cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2", true, reinterpret_cast<void**>(&d.cuMemcpyHtoD)},
      {"cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2", true, reinterpret_cast<void**>(&d.cuMemcpyDtoH)},
      {"cuMemsetD8", 3020, "cuMemsetD8_v2", true, reinterpret_cast<void**>(&d.cuMemsetD8)},
      {"cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2", false, reinterpret_cast<void**>(&d.cuMemcpyHtoDAsync)},
      {"cuLaunchKernel", 4000, "cuLaunchKernel", true, reinterpret_cast<void**>(&d.cuLaunchKernel)},
      {"cuLaunchKernelEx", 11080, "cuLaunchKernelEx", false, reinterpret_cast<void**>(&d.cuLaunchKernelEx)},
      {"cuGraphKernelNodeSetAttribute", 11000, "cuGraphKernelNodeSetAttribute", false,
       reinterpret_cast<void**>(&d.cuGraphKernelNodeSetAttribute)},
      {"cuEventCreate", 2000, "cuEventCreate", true, reinterpret_cast<void**>(&d.cuEventCreate)},
      {"cuEventRecord", 2000, "cuEventRecord", true, reinterpret_cast<void**>(&d.cuEventRecord)},
      {"cuEventSynchronize", 2000, "cuEventSynchronize", true, reinterpret_cast<void**>(&d.cuEventSynchronize)},
      {"cuEventQuery", 2000, "cuEventQuery", true, reinterpret_cast<void**>(&d.cuEventQuery)},
      {"cuEventElapsedTime", 2000, "cuEventElapsedTime", true, reinterpret_cast<void**>(&d.cuEventElapsedTime)},
      {"cuEventDestroy", 4000, "cuEventDestroy_v2", true, reinterpret_cast<void**>(&d.cuEventDestroy)},
      {"cuStreamCreate", 2000, "cuStreamCreate", true, reinterpret_cast<void**>(&d.cuStreamCreate)},
      {"cuStreamDestroy", 4000, "cuStreamDestroy_v2", false, reinterpret_cast<void**>(&d.cuStreamDestroy)},
      {"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2", true,
       reinterpret_cast<void**>(&d.cuStreamBeginCapture)},
      {"cuStreamEndCapture", 10000, "cuStreamEndCapture", true, reinterpret_cast<void**>(&d.cuStreamEndCapture)},
      {"cuGraphInstantiateWithFlags", 11040, "cuGraphInstantiateWithFlags", true,
       reinterpret_cast<void**>(&d.cuGraphInstantiate)},
      {"cuGraphCreate", 10000, "cuGraphCreate", false, reinterpret_cast<void**>(&d.cuGraphCreate)},
      {"cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2", false,
       reinterpret_cast<void**>(&d.cuGraphAddKernelNode)},
      {"cuGraphAddChildGraphNode", 10000, "cuGraphAddChildGraphNode", false,
       reinterpret_cast<void**>(&d.cuGraphAddChildGraphNode)},
      {"cuDriverGetVersion", 2020, "cuDriverGetVersion", false, reinterpret_cast<void**>(&d.cuDriverGetVersion)},
      {"cuGraphLaunch", 10000, "cuGraphLaunch", true, reinterpret_cast<void**>(&d.cuGraphLaunch)},
      {"cuGraphDestroy", 10000, "cuGraphDestroy", true, reinterpret_cast<void**>(&d.cuGraphDestroy)},
      {"cuGraphExecDestroy", 10000, "cuGraphExecDestroy", true, reinterpret_cast<void**>(&d.cuGraphExecDestroy)},
      {"cuMemHostAlloc", 2020, "cuMemHostAlloc", false, reinterpret_cast<void**>(&d.cuMemHostAlloc)},
      {"cuMemFreeHost", 2000, "cuMemFreeHost", false, reinterpret_cast<void**>(&d.cuMemFreeHost)},
      {"cuMemHostGetDevicePointer", 3020, "cuMemHostGetDevicePointer_v2", false,
       reinterpret_cast<void**>(&d.cuMemHostGetDevicePointer)},
      {"cuStreamWaitValue32", 12000, "cuStreamWaitValue32_v2", false, reinterpret_cast<void**>(&d.cuStreamWaitValue32)},
      {"cuGetErrorString", 6000, "cuGetErrorString", false, reinterpret_cast<void**>(&d.cuGetErrorString)},
      {"cuGetErrorName", 6000, "cuGetErrorName", false, reinterpret_cast<void**>(&d.cuGetErrorName)},
  };

  auto v2 = reinterpret_cast<GetProcAddressV2>(::dlsym(d.handle, "cuGetProcAddress_v2"));
  auto v1 = v2 ? nullptr : reinterpret_cast<GetProcAddressV1>(::dlsym(d.handle, "cuGetProcAddress"));
  for (Entry& e : entries) {
    void* fn = nullptr;
    if (v2) {
      int status = 0;
      if (v2(e.base, &fn, e.version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) fn = nullptr;
    } else if (v1) {
      if (v1(e.base, &fn, e.version, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) fn = nullptr;
    }
    if (!fn) fn = ::dlsym(d.handle, e.symbol);
    if (!fn && e.required)
      return unavailable(fmt::format("the CUDA driver has no {} (driver too old for replay)", e.symbol));
    *e.slot = fn;
  }
  if (!d.cuDevicePrimaryCtxRetain && !d.cuCtxCreate)
    return unavailable("the CUDA driver has neither cuDevicePrimaryCtxRetain nor cuCtxCreate_v2");
  return d;
}

}  // namespace kdflow::cuda

// cuda_driver.h — the few CUDA driver API types and entry points the replay engine uses,
// declared here (kdflow builds without cuda.h) and resolved at run time from libcuda.so.1.
// Private to kdflow_replay. Values are the ABI values of cuda.h (CUDA 13.0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kdflow/support/diag.h"

namespace kdflow::cuda {

// Opaque handles: only ever passed back to the driver.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUgraph = CUgraph_st*;
using CUgraphExec = CUgraphExec_st*;
using CUgraphNode = CUgraphNode_st*;
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2

// CUresult
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

// CUdevice_attribute
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// CUjit_option
inline constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
inline constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// CUstreamCaptureMode, stream and event flags
inline constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
inline constexpr unsigned CU_STREAM_WAIT_VALUE_GEQ = 0x0;

// cuLaunchKernel `extra` markers (CU_LAUNCH_PARAM_*), as pointer values.
inline constexpr uintptr_t CU_LAUNCH_PARAM_END = 0x00;
inline constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_POINTER = 0x01;
inline constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_SIZE = 0x02;

/// CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h since 12.0; what cuGraphAddKernelNode_v2 takes).
struct KernelNodeParams {
  CUfunction func = nullptr;
  unsigned gridDimX = 1, gridDimY = 1, gridDimZ = 1;
  unsigned blockDimX = 1, blockDimY = 1, blockDimZ = 1;
  unsigned sharedMemBytes = 0;
  void** kernelParams = nullptr;
  void** extra = nullptr;
  void* kern = nullptr;     // CUkernel: unused (func is set)
  CUcontext ctx = nullptr;  // null: the current context
};

/// CUlaunchAttributeID values replay uses (cuda.h, CUDA 12: also CUkernelNodeAttrID).
inline constexpr int CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2;
inline constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

/// CUlaunchAttributeValue: a 64-byte union; `cooperative` and
/// `programmaticStreamSerializationAllowed` are both an int at its start.
union LaunchAttributeValue {
  char pad[64];
  int cooperative;
  int programmaticStreamSerializationAllowed;
};

/// CUlaunchAttribute (cuda.h, CUDA 12): the id, padding to 8 bytes, the value.
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  LaunchAttributeValue value{};
};
static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");

/// CUlaunchConfig (cuda.h, CUDA 12): what cuLaunchKernelEx takes.
struct LaunchConfig {
  unsigned gridDimX = 1, gridDimY = 1, gridDimZ = 1;
  unsigned blockDimX = 1, blockDimY = 1, blockDimZ = 1;
  unsigned sharedMemBytes = 0;
  CUstream hStream = nullptr;
  LaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};

// cuGetProcAddress flags and status
inline constexpr uint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;

/// The entry points, each with the ABI of the versioned symbol named in the comment.
/// Required ones are non-null after load_driver(); optional ones may be null (one of
/// cuDevicePrimaryCtxRetain and cuCtxCreate is always there).
struct Driver {
  std::string library;  ///< what was dlopen()ed
  void* handle = nullptr;

  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* dev, int ordinal) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;  ///< optional: a sharded replay places ranks with it
  CUresult (*cuDeviceGetAttribute)(int* value, int attrib, CUdevice dev) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice dev) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice dev) = nullptr;                          // _v2, optional
  CUresult (*cuCtxCreate)(CUcontext* ctx, unsigned flags, CUdevice dev) = nullptr;          // _v2, optional
  CUresult (*cuCtxDestroy)(CUcontext ctx) = nullptr;                                          // cuCtxDestroy_v2 (optional)
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice dev) = nullptr;               // optional
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev) = nullptr;                              // _v2, optional
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule* mod, const void* image, unsigned n, int* options, void** values) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* f, CUmodule mod, const char* name) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule mod) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction f, int attrib, int value) = nullptr;
  CUresult (*cuFuncGetAttribute)(int* value, int attrib, CUfunction f) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;                           // cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr ptr) = nullptr;                                           // cuMemFree_v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;         // cuMemcpyHtoD_v2
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;               // cuMemcpyDtoH_v2
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t count) = nullptr;       // cuMemsetD8_v2
  /// Optional: a host copy in a graph (an LLM session's KV-cache arrays, --mode graph/dag).
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes,
                                CUstream stream) = nullptr;                                   // _v2
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem, CUstream stream, void** params, void** extra) = nullptr;
  /// Optional (CUDA 11.8+): launches with attributes (TVM 0.23+'s PDL and cooperative kernels).
  CUresult (*cuLaunchKernelEx)(const LaunchConfig* config, CUfunction f, void** params, void** extra) = nullptr;
  /// Optional: a dag node's attributes (a cooperative kernel's).
  CUresult (*cuGraphKernelNodeSetAttribute)(CUgraphNode node, int attr, const LaunchAttributeValue* value) = nullptr;
  CUresult (*cuEventCreate)(CUevent* ev, unsigned flags) = nullptr;
  CUresult (*cuEventRecord)(CUevent ev, CUstream stream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent ev) = nullptr;
  CUresult (*cuEventQuery)(CUevent ev) = nullptr;
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;
  CUresult (*cuEventDestroy)(CUevent ev) = nullptr;                                           // cuEventDestroy_v2
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;                                     // _v2, optional
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode) = nullptr;                      // cuStreamBeginCapture_v2
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph) = nullptr;
  CUresult (*cuGraphInstantiate)(CUgraphExec* exec, CUgraph graph, unsigned long long flags) = nullptr;  // ...WithFlags
  CUresult (*cuGraphCreate)(CUgraph* graph, unsigned flags) = nullptr;  // optional (--mode dag)
  CUresult (*cuGraphAddKernelNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t ndeps,
                                   const KernelNodeParams* params) = nullptr;  // _v2, optional (--mode dag)
  CUresult (*cuGraphAddChildGraphNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t ndeps,
                                       CUgraph child) = nullptr;  // optional (--mode dag with library calls)
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;                      // optional
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph graph) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec) = nullptr;
  // The gate of timed runs (optional: without them runs are not gated).
  CUresult (*cuMemHostAlloc)(void** p, size_t bytes, unsigned flags) = nullptr;               // optional
  CUresult (*cuMemFreeHost)(void* p) = nullptr;                                               // optional
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr* d, void* p, unsigned flags) = nullptr;   // _v2, optional
  CUresult (*cuStreamWaitValue32)(CUstream s, CUdeviceptr addr, uint32_t value,
                                  unsigned flags) = nullptr;                                  // _v2, optional
  CUresult (*cuGetErrorString)(CUresult err, const char** str) = nullptr;                    // optional
  CUresult (*cuGetErrorName)(CUresult err, const char** str) = nullptr;                      // optional

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for `r`, from the driver when it can say.
  std::string describe(CUresult r) const;
};

/// The library to load: `override_path` if set, else $KDFLOW_CUDA_LIBRARY, else libcuda.so.1.
std::string driver_library_path(const std::string& override_path);

/// dlopen()s the driver (never dlclose()d: drivers do not unload cleanly) and resolves
/// every entry point with cuGetProcAddress, falling back to dlsym of the versioned name.
/// No library, or a required entry point missing → ExitCode::Unavailable, one line.
Expected<Driver> load_driver(const std::string& override_path);

}  // namespace kdflow::cuda

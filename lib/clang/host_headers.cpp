// The stand-ins declare exactly what TVM's host C uses from its runtime API (DLPack
// structs, TVMValue, the packed-call and workspace entry points) and from the C library.
// Layouts follow dlpack.h and c_runtime_api.h (TVM v0.8-v0.19); DLTensor carries both
// `device` and the pre-0.8 name `ctx` as one anonymous union.
#include "host_headers.h"

namespace kdflow::detail {

namespace {

const char* kStdint = R"(#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
#define INT8_MIN (-128)
#define INT16_MIN (-32767-1)
#define INT32_MIN (-2147483647-1)
#define INT64_MIN (-9223372036854775807L-1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615UL
)";

const char* kStddef = R"(#pragma once
typedef unsigned long size_t;
typedef long ptrdiff_t;
#ifndef NULL
#define NULL ((void*)0)
#endif
)";

const char* kStdbool = R"(#pragma once
#define bool _Bool
#define true 1
#define false 0
)";

const char* kMath = R"(#pragma once
double ceil(double); double floor(double); double round(double); double trunc(double);
double log(double); double log2(double); double log10(double); double exp(double); double exp2(double);
double sqrt(double); double pow(double, double); double fabs(double); double fmin(double, double);
double fmax(double, double); double fmod(double, double);
float ceilf(float); float floorf(float); float roundf(float); float truncf(float); float logf(float);
float log2f(float); float expf(float); float sqrtf(float); float powf(float, float); float fabsf(float);
float fminf(float, float); float fmaxf(float, float);
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
)";

const char* kDlpack = R"(#pragma once
#include <stdint.h>
#include <stddef.h>
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLOpenCL = 4, kDLVulkan = 7, kDLMetal = 8,
               kDLVPI = 9, kDLROCM = 10, kDLROCMHost = 11, kDLExtDev = 12, kDLCUDAManaged = 13,
               kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16 } DLDeviceType;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef DLDevice DLContext;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U, kDLBfloat = 4U,
               kDLComplex = 5U } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data;
  union { DLDevice device; DLDevice ctx; };
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
)";

const char* kCRuntimeApi = R"(#pragma once
#include <stdint.h>
#include <stddef.h>
#include <dlpack/dlpack.h>
#define TVM_DLL
#define TVM_WEAK
#define TVM_ATTRIBUTE_UNUSED
typedef enum { kTVMArgInt = 0, kTVMArgFloat = 2, kTVMOpaqueHandle = 3, kTVMNullptr = 4,
               kTVMDataType = 5, kDLDevice = 6, kTVMDLTensorHandle = 7, kTVMObjectHandle = 8,
               kTVMModuleHandle = 9, kTVMPackedFuncHandle = 10, kTVMStr = 11, kTVMBytes = 12,
               kTVMNDArrayHandle = 13, kTVMObjectRValueRefArg = 14 } TVMArgTypeCode;
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;
typedef struct { const char* data; size_t size; } TVMByteArray;
typedef void* TVMModuleHandle;
typedef void* TVMFunctionHandle;
typedef void* TVMRetValueHandle;
typedef void* TVMStreamHandle;
typedef void* TVMObjectHandle;
typedef DLTensor* TVMArrayHandle;
TVM_DLL void TVMAPISetLastError(const char* msg);
TVM_DLL const char* TVMGetLastError(void);
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);
TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);
TVM_DLL int TVMFuncFree(TVMFunctionHandle func);
TVM_DLL int TVMSetStream(int device_type, int device_id, TVMStreamHandle handle);
TVM_DLL int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream);
)";

const char* kCBackendApi = R"(#pragma once
#include <tvm/runtime/c_runtime_api.h>
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle);
TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out);
TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr);
TVM_DLL int TVMBackendRegisterEnvCAPI(const char* name, void* ptr);
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);
typedef struct { void* sync_handle; int32_t num_task; } TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);
TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);
TVM_DLL int TVMBackendRunOnce(void** handle, int (*f)(void*), void* cdata, int nbytes);
/* TVM 0.14 references the module context without defining it; declare it here. */
extern void* __tvm_module_ctx;
)";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& host_stub_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"stdint.h", kStdint},
      {"stddef.h", kStddef},
      {"stdbool.h", kStdbool},
      {"math.h", kMath},
      {"dlpack/dlpack.h", kDlpack},
      {"tvm/runtime/c_runtime_api.h", kCRuntimeApi},
      {"tvm/runtime/c_backend_api.h", kCBackendApi},
  };
  return headers;
}

}  // namespace kdflow::detail

// The stand-ins declare exactly what TVM's host C uses from its runtime API (DLPack
// structs, TVMValue, the packed-call and workspace entry points; TVM 0.21+: TVMFFIAny, the
// tvm-ffi call, lookup and error entry points) and from the C library. Layouts follow
// dlpack.h, c_runtime_api.h (TVM v0.8-v0.20) and tvm-ffi's c_api.h; DLTensor carries both
// `device` and the pre-0.8 name `ctx` as one anonymous union.
#include "host_headers.h"

#include "c_stdint_text.h"
#include "host_math.h"

namespace kdflow::detail {

namespace {

const char* kStdint = "#pragma once\n" KDFLOW_STDINT_TYPES_TEXT KDFLOW_STDINT_LIMITS_TEXT;

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

// <math.h>: the declarations come from the interpreter's math table (host_math.cpp), so
// every function the file may call is one the interpreter evaluates.
std::string math_header() {
  return "#pragma once\n" + math_declarations() +
         "#define INFINITY (__builtin_inff())\n#define NAN (__builtin_nanf(\"\"))\n"
         "#define HUGE_VALF (__builtin_huge_valf())\n#define HUGE_VAL (__builtin_huge_val())\n";
}

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

// TVM 0.21+ (tvm-ffi): the host C includes tvm/runtime/base.h, tvm/runtime/c_backend_api.h,
// tvm/ffi/c_api.h and (0.26) tvm/ffi/extra/c_env_api.h. TVMFFIAny is 16 bytes: type_index,
// a 4-byte padding / small-string length, an 8-byte value union (tvm-ffi include/tvm/ffi/c_api.h).
const char* kFfiCApi = R"(#pragma once
#include <stdint.h>
#include <stddef.h>
#include <dlpack/dlpack.h>
#ifndef TVM_FFI_DLL
#define TVM_FFI_DLL
#endif
typedef enum { kTVMFFIAny = -1, kTVMFFINone = 0, kTVMFFIInt = 1, kTVMFFIBool = 2, kTVMFFIFloat = 3,
               kTVMFFIOpaquePtr = 4, kTVMFFIDataType = 5, kTVMFFIDevice = 6, kTVMFFIDLTensorPtr = 7,
               kTVMFFIRawStr = 8, kTVMFFIByteArrayPtr = 9, kTVMFFIObjectRValueRef = 10,
               kTVMFFISmallStr = 11, kTVMFFISmallBytes = 12, kTVMFFIStaticObjectBegin = 64,
               kTVMFFIObject = 64, kTVMFFIStr = 65, kTVMFFIBytes = 66 } TVMFFITypeIndex;
typedef void* TVMFFIObjectHandle;
typedef struct {
  int32_t type_index;
  union { uint32_t zero_padding; uint32_t small_str_len; };
  union { int64_t v_int64; double v_float64; void* v_ptr; const char* v_c_str; TVMFFIObjectHandle v_obj;
          DLDataType v_dtype; DLDevice v_device; char v_bytes[8]; uint64_t v_uint64; };
} TVMFFIAny;
typedef struct { const char* data; size_t size; } TVMFFIByteArray;
TVM_FFI_DLL int TVMFFIFunctionCall(TVMFFIObjectHandle func, TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** parts, int32_t num_parts);
)";

const char* kFfiEnvApi = R"(#pragma once
#include <tvm/ffi/c_api.h>
TVM_FFI_DLL int TVMFFIEnvModLookupFromImports(TVMFFIObjectHandle library_ctx, const char* func_name,
                                              TVMFFIObjectHandle* out);
)";

const char* kRuntimeBase = R"(#pragma once
#ifndef TVM_DLL
#define TVM_DLL
#endif
)";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& host_stub_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"stdint.h", kStdint},
      {"stddef.h", kStddef},
      {"stdbool.h", kStdbool},
      {"math.h", math_header()},
      {"dlpack/dlpack.h", kDlpack},
      {"tvm/runtime/c_runtime_api.h", kCRuntimeApi},
      {"tvm/runtime/c_backend_api.h", kCBackendApi},
      {"tvm/runtime/base.h", kRuntimeBase},
      {"tvm/ffi/c_api.h", kFfiCApi},
      {"tvm/ffi/extra/c_env_api.h", kFfiEnvApi},
      // TVM 0.26's C host of a float16 model casts to half* without declaring half (its own
      // export_library fails on the file): forced in where host.c needs it (host_needs_half).
      {"kdflow_host_half.h", "typedef unsigned short half;\n"},
  };
  return headers;
}

}  // namespace kdflow::detail

// kdflow-fuzz: tvmgen_default_fused_argsort float32[4,1000] int32[4,1000]
// tvm target: c -keys=cpu 
#define TVM_EXPORTS
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdbool.h>
static void* __tvm_set_device_packed = NULL;
static void* tvmgen_default_fused_argsort_kernel_packed = NULL;
static void* tvmgen_default_fused_argsort_kernel_1_packed = NULL;
static void* tvmgen_default_fused_argsort_kernel_2_packed = NULL;
static void* tvmgen_default_fused_argsort_kernel_3_packed = NULL;
static void* tvmgen_default_fused_cast_kernel_packed = NULL;
static void* tvmgen_default_fused_cast_add_kernel_packed = NULL;
static void* tvmgen_default_fused_cumsum_kernel_packed = NULL;
static void* tvmgen_default_fused_cumsum_kernel_1_packed = NULL;
static void* tvmgen_default_fused_cumsum_kernel_2_packed = NULL;
static void* tvmgen_default_fused_cumsum_kernel_3_packed = NULL;
static void* tvmgen_default_fused_cumsum_kernel_4_packed = NULL;
static void* tvmgen_default_fused_sum_kernel_packed = NULL;
static void* tvmgen_default_fused_topk_kernel_packed = NULL;
static void* tvmgen_default_fused_topk_kernel_1_packed = NULL;
static void* tvmgen_default_fused_topk_kernel_2_packed = NULL;
static void* tvmgen_default_fused_topk_kernel_3_packed = NULL;
static void* tvmgen_default_fused_topk_kernel_4_packed = NULL;
static void* tvmgen_default_fused_topk_kernel_5_packed = NULL;
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_default_fused_argsort(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[6];
  void* stack_tcode = stack;
  TVMValue stack_1[11];
  void* stack_value = stack_1;
  int32_t p0_code = arg_type_ids[0];
  int32_t argsort_gpu_code = arg_type_ids[1];
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* argsort_gpu = (((TVMValue*)args)[1].v_handle);
  void* p0_1 = (((DLTensor*)p0)[0].data);
  void* tvmgen_default_fused_argsort_p0_shape = (((DLTensor*)p0)[0].shape);
  void* tvmgen_default_fused_argsort_p0_strides = (((DLTensor*)p0)[0].strides);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* argsort_gpu_1 = (((DLTensor*)argsort_gpu)[0].data);
  void* tvmgen_default_fused_argsort_argsort_gpu_shape = (((DLTensor*)argsort_gpu)[0].shape);
  void* tvmgen_default_fused_argsort_argsort_gpu_strides = (((DLTensor*)argsort_gpu)[0].strides);
  if (!(tvmgen_default_fused_argsort_p0_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_argsort_argsort_gpu_strides == NULL)) {
  }
  (((TVMValue*)stack_value)[0].v_int64) = ((int64_t)2);
  ((int32_t*)stack_tcode)[0] = 0;
  (((TVMValue*)stack_value)[1].v_int64) = ((int64_t)dev_id);
  ((int32_t*)stack_tcode)[1] = 0;
  if (__tvm_set_device_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "__tvm_set_device", &__tvm_set_device_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val;
  int ret_type_code;
  if (TVMFuncCall(__tvm_set_device_packed, (TVMValue*) stack_value, (int*) stack_tcode, 2, &ret_val, &ret_type_code) != 0) {
    return -1;
  }
  void* argsort_gpu_v0 = TVMBackendAllocWorkspace(2, dev_id, (uint64_t)16000, 2, 32);
  if (argsort_gpu_v0 == NULL) {
    return -1;
  }
  void* argsort_gpu_v2 = TVMBackendAllocWorkspace(2, dev_id, (uint64_t)16000, 2, 32);
  if (argsort_gpu_v2 == NULL) {
    return -1;
  }
  void* argsort_gpu_v3 = TVMBackendAllocWorkspace(2, dev_id, (uint64_t)16000, 0, 32);
  if (argsort_gpu_v3 == NULL) {
    return -1;
  }
  (((TVMValue*)stack_value)[0].v_handle) = argsort_gpu_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = argsort_gpu_v0;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_handle) = p0_1;
  ((int32_t*)stack_tcode)[2] = 3;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)1024);
  ((int32_t*)stack_tcode)[3] = 0;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[4] = 0;
  (((TVMValue*)stack_value)[5].v_int64) = ((int64_t)4);
  ((int32_t*)stack_tcode)[5] = 0;
  (((TVMValue*)stack_value)[6].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[6] = 0;
  if (tvmgen_default_fused_argsort_kernel_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_argsort_kernel", &tvmgen_default_fused_argsort_kernel_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (TVMFuncCall(tvmgen_default_fused_argsort_kernel_packed, (TVMValue*) stack_value, (int*) stack_tcode, 7, &ret_val_1, &ret_type_code_1) != 0) {
    return -1;
  }
  (((TVMValue*)stack_value)[0].v_handle) = argsort_gpu_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = argsort_gpu_v0;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_handle) = argsort_gpu_v2;
  ((int32_t*)stack_tcode)[2] = 3;
  (((TVMValue*)stack_value)[3].v_handle) = argsort_gpu_v3;
  ((int32_t*)stack_tcode)[3] = 3;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)64);
  ((int32_t*)stack_tcode)[4] = 0;
  (((TVMValue*)stack_value)[5].v_int64) = ((int64_t)8);
  ((int32_t*)stack_tcode)[5] = 0;
  (((TVMValue*)stack_value)[6].v_int64) = ((int64_t)4);
  ((int32_t*)stack_tcode)[6] = 0;
  (((TVMValue*)stack_value)[7].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[7] = 0;
  if (tvmgen_default_fused_argsort_kernel_1_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_argsort_kernel_1", &tvmgen_default_fused_argsort_kernel_1_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_2;
  int ret_type_code_2;
  if (TVMFuncCall(tvmgen_default_fused_argsort_kernel_1_packed, (TVMValue*) stack_value, (int*) stack_tcode, 8, &ret_val_2, &ret_type_code_2) != 0) {
    return -1;
  }
  for (int64_t i_0 = 0; i_0 < (int64_t)3; ++i_0) {
    int64_t cse_var_2 = (i_0 + (int64_t)7);
    (((TVMValue*)stack_value)[0].v_handle) = argsort_gpu_1;
    ((int32_t*)stack_tcode)[0] = 3;
    (((TVMValue*)stack_value)[1].v_handle) = argsort_gpu_v0;
    ((int32_t*)stack_tcode)[1] = 3;
    (((TVMValue*)stack_value)[2].v_handle) = argsort_gpu_v2;
    ((int32_t*)stack_tcode)[2] = 3;
    (((TVMValue*)stack_value)[3].v_handle) = argsort_gpu_v3;
    ((int32_t*)stack_tcode)[3] = 3;
    (((TVMValue*)stack_value)[4].v_int64) = cse_var_2;
    ((int32_t*)stack_tcode)[4] = 0;
    (((TVMValue*)stack_value)[5].v_int64) = i_0;
    ((int32_t*)stack_tcode)[5] = 0;
    (((TVMValue*)stack_value)[6].v_int64) = ((int64_t)((int32_t)((int64_t)2 << cse_var_2)));
    ((int32_t*)stack_tcode)[6] = 0;
    (((TVMValue*)stack_value)[7].v_int64) = ((int64_t)1);
    ((int32_t*)stack_tcode)[7] = 0;
    (((TVMValue*)stack_value)[8].v_int64) = ((int64_t)4);
    ((int32_t*)stack_tcode)[8] = 0;
    (((TVMValue*)stack_value)[9].v_int64) = ((int64_t)(((int32_t)((int64_t)999 / ((int64_t)2 << cse_var_2))) + 1));
    ((int32_t*)stack_tcode)[9] = 0;
    if (tvmgen_default_fused_argsort_kernel_2_packed == NULL) {
      if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_argsort_kernel_2", &tvmgen_default_fused_argsort_kernel_2_packed) != 0) {
        return -1;
      }
    }
    TVMValue ret_val_3;
    int ret_type_code_3;
    if (TVMFuncCall(tvmgen_default_fused_argsort_kernel_2_packed, (TVMValue*) stack_value, (int*) stack_tcode, 10, &ret_val_3, &ret_type_code_3) != 0) {
      return -1;
    }
  }
  (((TVMValue*)stack_value)[0].v_handle) = argsort_gpu_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = argsort_gpu_v0;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_handle) = argsort_gpu_v2;
  ((int32_t*)stack_tcode)[2] = 3;
  (((TVMValue*)stack_value)[3].v_handle) = argsort_gpu_v3;
  ((int32_t*)stack_tcode)[3] = 3;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)1024);
  ((int32_t*)stack_tcode)[4] = 0;
  (((TVMValue*)stack_value)[5].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[5] = 0;
  (((TVMValue*)stack_value)[6].v_int64) = ((int64_t)4);
  ((int32_t*)stack_tcode)[6] = 0;
  (((TVMValue*)stack_value)[7].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[7] = 0;
  if (tvmgen_default_fused_argsort_kernel_3_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_argsort_kernel_3", &tvmgen_default_fused_argsort_kernel_3_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_4;
  int ret_type_code_4;
  if (TVMFuncCall(tvmgen_default_fused_argsort_kernel_3_packed, (TVMValue*) stack_value, (int*) stack_tcode, 8, &ret_val_4, &ret_type_code_4) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(2, dev_id, argsort_gpu_v3) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(2, dev_id, argsort_gpu_v2) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(2, dev_id, argsort_gpu_v0) != 0) {
    return -1;
  }
  return 0;
}

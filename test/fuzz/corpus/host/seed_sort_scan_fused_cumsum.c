// kdflow-fuzz: tvmgen_default_fused_cumsum float32[4,1000] float32[4,1000]
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
TVM_DLL int32_t tvmgen_default_fused_cumsum(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[3];
  void* stack_tcode = stack;
  TVMValue stack_1[6];
  void* stack_value = stack_1;
  int32_t p0_code = arg_type_ids[0];
  int32_t T_add_code = arg_type_ids[1];
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* T_add = (((TVMValue*)args)[1].v_handle);
  void* p0_1 = (((DLTensor*)p0)[0].data);
  void* tvmgen_default_fused_cumsum_p0_shape = (((DLTensor*)p0)[0].shape);
  void* tvmgen_default_fused_cumsum_p0_strides = (((DLTensor*)p0)[0].strides);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* T_add_1 = (((DLTensor*)T_add)[0].data);
  void* tvmgen_default_fused_cumsum_T_add_shape = (((DLTensor*)T_add)[0].shape);
  void* tvmgen_default_fused_cumsum_T_add_strides = (((DLTensor*)T_add)[0].strides);
  if (!(tvmgen_default_fused_cumsum_p0_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_cumsum_T_add_strides == NULL)) {
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
  void* exclusive_scan = TVMBackendAllocWorkspace(2, dev_id, (uint64_t)16000, 2, 32);
  if (exclusive_scan == NULL) {
    return -1;
  }
  (((TVMValue*)stack_value)[0].v_handle) = exclusive_scan;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = p0_1;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_int64) = ((int64_t)1024);
  ((int32_t*)stack_tcode)[2] = 0;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[3] = 0;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)4);
  ((int32_t*)stack_tcode)[4] = 0;
  if (tvmgen_default_fused_cumsum_kernel_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_cumsum_kernel", &tvmgen_default_fused_cumsum_kernel_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (TVMFuncCall(tvmgen_default_fused_cumsum_kernel_packed, (TVMValue*) stack_value, (int*) stack_tcode, 5, &ret_val_1, &ret_type_code_1) != 0) {
    return -1;
  }
  for (int64_t i = 0; i < (int64_t)10; ++i) {
    (((TVMValue*)stack_value)[0].v_handle) = exclusive_scan;
    ((int32_t*)stack_tcode)[0] = 3;
    (((TVMValue*)stack_value)[1].v_int64) = i;
    ((int32_t*)stack_tcode)[1] = 0;
    (((TVMValue*)stack_value)[2].v_int64) = ((int64_t)1024);
    ((int32_t*)stack_tcode)[2] = 0;
    (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)1);
    ((int32_t*)stack_tcode)[3] = 0;
    (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)4);
    ((int32_t*)stack_tcode)[4] = 0;
    if (tvmgen_default_fused_cumsum_kernel_1_packed == NULL) {
      if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_cumsum_kernel_1", &tvmgen_default_fused_cumsum_kernel_1_packed) != 0) {
        return -1;
      }
    }
    TVMValue ret_val_2;
    int ret_type_code_2;
    if (TVMFuncCall(tvmgen_default_fused_cumsum_kernel_1_packed, (TVMValue*) stack_value, (int*) stack_tcode, 5, &ret_val_2, &ret_type_code_2) != 0) {
      return -1;
    }
  }
  (((TVMValue*)stack_value)[0].v_handle) = exclusive_scan;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_int64) = ((int64_t)4);
  ((int32_t*)stack_tcode)[1] = 0;
  if (tvmgen_default_fused_cumsum_kernel_2_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_cumsum_kernel_2", &tvmgen_default_fused_cumsum_kernel_2_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_3;
  int ret_type_code_3;
  if (TVMFuncCall(tvmgen_default_fused_cumsum_kernel_2_packed, (TVMValue*) stack_value, (int*) stack_tcode, 2, &ret_val_3, &ret_type_code_3) != 0) {
    return -1;
  }
  for (int64_t j = 0; j < (int64_t)10; ++j) {
    (((TVMValue*)stack_value)[0].v_handle) = exclusive_scan;
    ((int32_t*)stack_tcode)[0] = 3;
    (((TVMValue*)stack_value)[1].v_int64) = j;
    ((int32_t*)stack_tcode)[1] = 0;
    (((TVMValue*)stack_value)[2].v_int64) = ((int64_t)1024);
    ((int32_t*)stack_tcode)[2] = 0;
    (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)1);
    ((int32_t*)stack_tcode)[3] = 0;
    (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)4);
    ((int32_t*)stack_tcode)[4] = 0;
    if (tvmgen_default_fused_cumsum_kernel_3_packed == NULL) {
      if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_cumsum_kernel_3", &tvmgen_default_fused_cumsum_kernel_3_packed) != 0) {
        return -1;
      }
    }
    TVMValue ret_val_4;
    int ret_type_code_4;
    if (TVMFuncCall(tvmgen_default_fused_cumsum_kernel_3_packed, (TVMValue*) stack_value, (int*) stack_tcode, 5, &ret_val_4, &ret_type_code_4) != 0) {
      return -1;
    }
  }
  (((TVMValue*)stack_value)[0].v_handle) = T_add_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = exclusive_scan;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_handle) = p0_1;
  ((int32_t*)stack_tcode)[2] = 3;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)4);
  ((int32_t*)stack_tcode)[3] = 0;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)1024);
  ((int32_t*)stack_tcode)[4] = 0;
  if (tvmgen_default_fused_cumsum_kernel_4_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_cumsum_kernel_4", &tvmgen_default_fused_cumsum_kernel_4_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_5;
  int ret_type_code_5;
  if (TVMFuncCall(tvmgen_default_fused_cumsum_kernel_4_packed, (TVMValue*) stack_value, (int*) stack_tcode, 5, &ret_val_5, &ret_type_code_5) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(2, dev_id, exclusive_scan) != 0) {
    return -1;
  }
  return 0;
}

// kdflow-fuzz: tvmgen_default_fused_cast float32[4,5] int32[4,5] float32[4,5]
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
TVM_DLL int32_t tvmgen_default_fused_cast(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[3];
  void* stack_tcode = stack;
  TVMValue stack_1[5];
  void* stack_value = stack_1;
  int32_t p0_code = arg_type_ids[0];
  int32_t p0_code_1 = arg_type_ids[1];
  int32_t T_cast_code = arg_type_ids[2];
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* p0_1 = (((TVMValue*)args)[1].v_handle);
  void* T_cast = (((TVMValue*)args)[2].v_handle);
  void* p0_2 = (((DLTensor*)p0)[0].data);
  void* tvmgen_default_fused_cast_p0_shape = (((DLTensor*)p0)[0].shape);
  void* tvmgen_default_fused_cast_p0_strides = (((DLTensor*)p0)[0].strides);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* p0_3 = (((DLTensor*)p0_1)[0].data);
  void* tvmgen_default_fused_cast_p0_shape_1 = (((DLTensor*)p0_1)[0].shape);
  void* tvmgen_default_fused_cast_p0_strides_1 = (((DLTensor*)p0_1)[0].strides);
  void* T_cast_1 = (((DLTensor*)T_cast)[0].data);
  void* tvmgen_default_fused_cast_T_cast_shape = (((DLTensor*)T_cast)[0].shape);
  void* tvmgen_default_fused_cast_T_cast_strides = (((DLTensor*)T_cast)[0].strides);
  if (!(tvmgen_default_fused_cast_p0_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_cast_p0_strides_1 == NULL)) {
  }
  if (!(tvmgen_default_fused_cast_T_cast_strides == NULL)) {
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
  (((TVMValue*)stack_value)[0].v_handle) = T_cast_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = p0_3;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[2] = 0;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)20);
  ((int32_t*)stack_tcode)[3] = 0;
  if (tvmgen_default_fused_cast_kernel_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_cast_kernel", &tvmgen_default_fused_cast_kernel_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (TVMFuncCall(tvmgen_default_fused_cast_kernel_packed, (TVMValue*) stack_value, (int*) stack_tcode, 4, &ret_val_1, &ret_type_code_1) != 0) {
    return -1;
  }
  return 0;
}

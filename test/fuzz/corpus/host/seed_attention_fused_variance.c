// kdflow-fuzz: tvmgen_default_fused_variance float32[64,128] float32[64,1] float32[64,1]
// tvm target: c -keys=cpu 
#define TVM_EXPORTS
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdbool.h>
static void* __tvm_set_device_packed = NULL;
static void* tvmgen_default_fused_mean_kernel_packed = NULL;
static void* tvmgen_default_fused_mean_kernel_1_packed = NULL;
static void* tvmgen_default_fused_mean_1_kernel_packed = NULL;
static void* tvmgen_default_fused_mean_1_kernel_1_packed = NULL;
static void* tvmgen_default_fused_nn_batch_matmul_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_batch_matmul_multiply_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_1_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_2_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_multiply_multiply_erf_add_multiply_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_softmax_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_softmax_kernel_1_packed = NULL;
static void* tvmgen_default_fused_nn_softmax_kernel_2_packed = NULL;
static void* tvmgen_default_fused_nn_softmax_kernel_3_packed = NULL;
static void* tvmgen_default_fused_reshape_transpose_split_kernel_packed = NULL;
static void* tvmgen_default_fused_reshape_transpose_split_kernel_1_packed = NULL;
static void* tvmgen_default_fused_reshape_transpose_split_kernel_2_packed = NULL;
static void* tvmgen_default_fused_squeeze_kernel_packed = NULL;
static void* tvmgen_default_fused_squeeze_1_kernel_packed = NULL;
static void* tvmgen_default_fused_squeeze_transpose_kernel_packed = NULL;
static void* tvmgen_default_fused_subtract_add_rsqrt_multiply_add_kernel_packed = NULL;
static void* tvmgen_default_fused_subtract_add_rsqrt_multiply_add_1_kernel_packed = NULL;
static void* tvmgen_default_fused_transpose_reshape_kernel_packed = NULL;
static void* tvmgen_default_fused_variance_kernel_packed = NULL;
static void* tvmgen_default_fused_variance_kernel_1_packed = NULL;
static void* tvmgen_default_fused_variance_1_kernel_packed = NULL;
static void* tvmgen_default_fused_variance_1_kernel_1_packed = NULL;
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_default_fused_variance(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[4];
  void* stack_tcode = stack;
  TVMValue stack_1[7];
  void* stack_value = stack_1;
  int32_t p0_code = arg_type_ids[0];
  int32_t p1_code = arg_type_ids[1];
  int32_t T_divide_code = arg_type_ids[2];
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* p1 = (((TVMValue*)args)[1].v_handle);
  void* T_divide = (((TVMValue*)args)[2].v_handle);
  void* p0_1 = (((DLTensor*)p0)[0].data);
  void* tvmgen_default_fused_variance_p0_shape = (((DLTensor*)p0)[0].shape);
  void* tvmgen_default_fused_variance_p0_strides = (((DLTensor*)p0)[0].strides);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* p1_1 = (((DLTensor*)p1)[0].data);
  void* tvmgen_default_fused_variance_p1_shape = (((DLTensor*)p1)[0].shape);
  void* tvmgen_default_fused_variance_p1_strides = (((DLTensor*)p1)[0].strides);
  void* T_divide_1 = (((DLTensor*)T_divide)[0].data);
  void* tvmgen_default_fused_variance_T_divide_shape = (((DLTensor*)T_divide)[0].shape);
  void* tvmgen_default_fused_variance_T_divide_strides = (((DLTensor*)T_divide)[0].strides);
  if (!(tvmgen_default_fused_variance_p0_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_variance_p1_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_variance_T_divide_strides == NULL)) {
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
  void* T_multiply_red = TVMBackendAllocWorkspace(2, dev_id, (uint64_t)256, 2, 32);
  if (T_multiply_red == NULL) {
    return -1;
  }
  (((TVMValue*)stack_value)[0].v_handle) = T_multiply_red;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = p0_1;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_handle) = p1_1;
  ((int32_t*)stack_tcode)[2] = 3;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)2);
  ((int32_t*)stack_tcode)[3] = 0;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)32);
  ((int32_t*)stack_tcode)[4] = 0;
  (((TVMValue*)stack_value)[5].v_int64) = ((int64_t)32);
  ((int32_t*)stack_tcode)[5] = 0;
  if (tvmgen_default_fused_variance_kernel_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_variance_kernel", &tvmgen_default_fused_variance_kernel_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (TVMFuncCall(tvmgen_default_fused_variance_kernel_packed, (TVMValue*) stack_value, (int*) stack_tcode, 6, &ret_val_1, &ret_type_code_1) != 0) {
    return -1;
  }
  (((TVMValue*)stack_value)[0].v_handle) = T_divide_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = T_multiply_red;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[2] = 0;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)64);
  ((int32_t*)stack_tcode)[3] = 0;
  if (tvmgen_default_fused_variance_kernel_1_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_variance_kernel_1", &tvmgen_default_fused_variance_kernel_1_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_2;
  int ret_type_code_2;
  if (TVMFuncCall(tvmgen_default_fused_variance_kernel_1_packed, (TVMValue*) stack_value, (int*) stack_tcode, 4, &ret_val_2, &ret_type_code_2) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(2, dev_id, T_multiply_red) != 0) {
    return -1;
  }
  return 0;
}

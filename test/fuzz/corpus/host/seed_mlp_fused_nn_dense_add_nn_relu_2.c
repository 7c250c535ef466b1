// kdflow-fuzz: tvmgen_default_fused_nn_dense_add_nn_relu_2 float32[1,1000] float32[2000,1000] float32[1,2000] float32[1,2000]
// tvm target: c -keys=cpu 
#define TVM_EXPORTS
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdbool.h>
static void* __tvm_set_device_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_nn_relu_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_nn_relu_1_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_log_softmax_kernel_packed = NULL;
static void* tvmgen_default_fused_nn_log_softmax_kernel_1_packed = NULL;
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_default_fused_nn_dense_add_nn_relu_2(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[4];
  void* stack_tcode = stack;
  TVMValue stack_1[8];
  void* stack_value = stack_1;
  int32_t p0_code = arg_type_ids[0];
  int32_t p1_code = arg_type_ids[1];
  int32_t p2_code = arg_type_ids[2];
  int32_t T_relu_code = arg_type_ids[3];
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* p1 = (((TVMValue*)args)[1].v_handle);
  void* p2 = (((TVMValue*)args)[2].v_handle);
  void* T_relu = (((TVMValue*)args)[3].v_handle);
  void* p0_1 = (((DLTensor*)p0)[0].data);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_p0_shape = (((DLTensor*)p0)[0].shape);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_p0_strides = (((DLTensor*)p0)[0].strides);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* p1_1 = (((DLTensor*)p1)[0].data);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_p1_shape = (((DLTensor*)p1)[0].shape);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_p1_strides = (((DLTensor*)p1)[0].strides);
  void* p2_1 = (((DLTensor*)p2)[0].data);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_p2_shape = (((DLTensor*)p2)[0].shape);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_p2_strides = (((DLTensor*)p2)[0].strides);
  void* T_relu_1 = (((DLTensor*)T_relu)[0].data);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_T_relu_shape = (((DLTensor*)T_relu)[0].shape);
  void* tvmgen_default_fused_nn_dense_add_nn_relu_2_T_relu_strides = (((DLTensor*)T_relu)[0].strides);
  if (!(tvmgen_default_fused_nn_dense_add_nn_relu_2_p0_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_nn_dense_add_nn_relu_2_p1_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_nn_dense_add_nn_relu_2_p2_strides == NULL)) {
  }
  if (!(tvmgen_default_fused_nn_dense_add_nn_relu_2_T_relu_strides == NULL)) {
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
  (((TVMValue*)stack_value)[0].v_handle) = T_relu_1;
  ((int32_t*)stack_tcode)[0] = 3;
  (((TVMValue*)stack_value)[1].v_handle) = p0_1;
  ((int32_t*)stack_tcode)[1] = 3;
  (((TVMValue*)stack_value)[2].v_handle) = p1_1;
  ((int32_t*)stack_tcode)[2] = 3;
  (((TVMValue*)stack_value)[3].v_handle) = p2_1;
  ((int32_t*)stack_tcode)[3] = 3;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)1);
  ((int32_t*)stack_tcode)[4] = 0;
  (((TVMValue*)stack_value)[5].v_int64) = ((int64_t)2000);
  ((int32_t*)stack_tcode)[5] = 0;
  (((TVMValue*)stack_value)[6].v_int64) = ((int64_t)64);
  ((int32_t*)stack_tcode)[6] = 0;
  if (tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel", &tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (TVMFuncCall(tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel_packed, (TVMValue*) stack_value, (int*) stack_tcode, 7, &ret_val_1, &ret_type_code_1) != 0) {
    return -1;
  }
  return 0;
}

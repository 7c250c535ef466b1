// kdflow-fuzz: tvmgen_default_fused_nn_dense float32[4,250] float32[1000,250] float32[4,1000]
// tvm target: c -keys=cpu 
// Hand-written in the shape of TVM 0.14's host C for `-libs=cublas`: nn.dense as a packed
// call to tvm.contrib.cublas.matmul with DLTensors built on the host stack
// (tvm_stack_make_array), then a relu kernel. A unit test of that construct, not TVM output.
#define TVM_EXPORTS
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdbool.h>
static void* __tvm_set_device_packed = NULL;
static void* tvm_contrib_cublas_matmul_packed = NULL;
static void* tvmgen_default_fused_nn_relu_kernel_packed = NULL;
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_default_fused_nn_dense(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[5];
  void* stack_tcode = stack;
  TVMValue stack_1[5];
  void* stack_value = stack_1;
  TVMValue stack_2[18];
  void* stack_array = stack_2;
  TVMValue stack_3[6];
  void* stack_shape = stack_3;
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* p1 = (((TVMValue*)args)[1].v_handle);
  void* T_matmul_NT = (((TVMValue*)args)[2].v_handle);
  void* p0_1 = (((DLTensor*)p0)[0].data);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* p1_1 = (((DLTensor*)p1)[0].data);
  void* T_matmul_NT_1 = (((DLTensor*)T_matmul_NT)[0].data);
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
  ((int64_t*)stack_shape)[0] = (int64_t)4;
  ((int64_t*)stack_shape)[1] = (int64_t)250;
  (((DLTensor*)stack_array)[0].data) = p0_1;
  (((DLTensor*)stack_array)[0].shape) = (&(((int64_t*)stack_shape)[0]));
  uint64_t _1 = (uint64_t)0;
  (((DLTensor*)stack_array)[0].strides) = (int64_t*)(*(void* *)(&(_1)));
  (((DLTensor*)stack_array)[0].ndim) = (uint32_t)2;
  (((DLTensor*)stack_array)[0].dtype.code) = (uint8_t)2;
  (((DLTensor*)stack_array)[0].dtype.bits) = (uint8_t)32;
  (((DLTensor*)stack_array)[0].dtype.lanes) = (uint16_t)1;
  (((DLTensor*)stack_array)[0].byte_offset) = (uint64_t)0;
  (((DLTensor*)stack_array)[0].device.device_id) = dev_id;
  (((DLTensor*)stack_array)[0].device.device_type) = (DLDeviceType)2;
  ((int64_t*)stack_shape)[2] = (int64_t)1000;
  ((int64_t*)stack_shape)[3] = (int64_t)250;
  (((DLTensor*)stack_array)[1].data) = p1_1;
  (((DLTensor*)stack_array)[1].shape) = (&(((int64_t*)stack_shape)[2]));
  uint64_t _2 = (uint64_t)0;
  (((DLTensor*)stack_array)[1].strides) = (int64_t*)(*(void* *)(&(_2)));
  (((DLTensor*)stack_array)[1].ndim) = (uint32_t)2;
  (((DLTensor*)stack_array)[1].dtype.code) = (uint8_t)2;
  (((DLTensor*)stack_array)[1].dtype.bits) = (uint8_t)32;
  (((DLTensor*)stack_array)[1].dtype.lanes) = (uint16_t)1;
  (((DLTensor*)stack_array)[1].byte_offset) = (uint64_t)0;
  (((DLTensor*)stack_array)[1].device.device_id) = dev_id;
  (((DLTensor*)stack_array)[1].device.device_type) = (DLDeviceType)2;
  ((int64_t*)stack_shape)[4] = (int64_t)4;
  ((int64_t*)stack_shape)[5] = (int64_t)1000;
  (((DLTensor*)stack_array)[2].data) = T_matmul_NT_1;
  (((DLTensor*)stack_array)[2].shape) = (&(((int64_t*)stack_shape)[4]));
  uint64_t _3 = (uint64_t)0;
  (((DLTensor*)stack_array)[2].strides) = (int64_t*)(*(void* *)(&(_3)));
  (((DLTensor*)stack_array)[2].ndim) = (uint32_t)2;
  (((DLTensor*)stack_array)[2].dtype.code) = (uint8_t)2;
  (((DLTensor*)stack_array)[2].dtype.bits) = (uint8_t)32;
  (((DLTensor*)stack_array)[2].dtype.lanes) = (uint16_t)1;
  (((DLTensor*)stack_array)[2].byte_offset) = (uint64_t)0;
  (((DLTensor*)stack_array)[2].device.device_id) = dev_id;
  (((DLTensor*)stack_array)[2].device.device_type) = (DLDeviceType)2;
  (((TVMValue*)stack_value)[0].v_handle) = (((DLTensor*)stack_array) + 0);
  ((int32_t*)stack_tcode)[0] = 7;
  (((TVMValue*)stack_value)[1].v_handle) = (((DLTensor*)stack_array) + 1);
  ((int32_t*)stack_tcode)[1] = 7;
  (((TVMValue*)stack_value)[2].v_handle) = (((DLTensor*)stack_array) + 2);
  ((int32_t*)stack_tcode)[2] = 7;
  (((TVMValue*)stack_value)[3].v_int64) = ((int64_t)(bool)0);
  ((int32_t*)stack_tcode)[3] = 0;
  (((TVMValue*)stack_value)[4].v_int64) = ((int64_t)(bool)1);
  ((int32_t*)stack_tcode)[4] = 0;
  if (tvm_contrib_cublas_matmul_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvm.contrib.cublas.matmul", &tvm_contrib_cublas_matmul_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (TVMFuncCall(tvm_contrib_cublas_matmul_packed, (TVMValue*) stack_value, (int*) stack_tcode, 5, &ret_val_1, &ret_type_code_1) != 0) {
    return -1;
  }
  return 0;
}


/* Copied unchanged from ../shared/tools/oracle/ffi_shim.c (the recording stand-in of the tvm-ffi
 * runtime that the executing oracle links host.c with); only this comment was added. */
/* Stand-in for the tvm-ffi C runtime symbols that TVM v0.26 Relax-built host C (Target cuda,
 * host "c") uses, so that host.c can be compiled with gcc and run on a CPU with fake device
 * pointers.  Every packed call (VM builtins looked up by name, kernel launches) is forwarded to
 * one handler installed by the driver (ffi_oracle.py, through ctypes), which emulates the
 * vm.builtin.* functions and records launches.
 *
 * Symbols the v0.26 host C needs (checked with `nm -u` on the compiled host.c):
 *   TVMFFIEnvModLookupFromImports  (kernel / builtin lookup; replaces TVMBackendGetFuncFromEnv)
 *   TVMFFIFunctionCall             (packed call with TVMFFIAny args and a TVMFFIAny result)
 *   TVMFFIErrorSetRaisedFromCStrParts / TVMFFIErrorSetRaisedFromCStr (asserts)
 *   TVMBackendAllocWorkspace, TVMBackendFreeWorkspace (only if a kernel needs workspace)
 *   TVMBackendAnyListSetPackedArg, TVMBackendAnyListMoveFromPackedReturn,
 *   TVMBackendAnyListResetItem     (exec_mode="compiled" only; anylists are TVMFFIAny arrays)
 *   TVMFFIObjectIncRef / TVMFFIObjectDecRef (defined here as no-ops in case the code uses them)
 * __tvm_ffi__library_ctx is defined by host.c itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tvm/ffi/c_api.h"

typedef int (*oracle_handler_t)(const char* name, TVMFFIAny* args, int n, TVMFFIAny* result);
typedef void* (*oracle_ws_t)(int alloc, int dev_type, int dev_id, uint64_t nbytes, void* ptr);

static oracle_handler_t handler;
static oracle_ws_t ws_handler;
static char last_error[4096];
static int n_lookups;
/* 1: also store a packed call's result in stack slot num_args, the slot that
 * TVMBackendAnyListMoveFromPackedReturn(list, idx, stack, num_args) reads in exec_mode="compiled"
 * (the C host codegen keeps the result in a local `result_N` and never writes that slot: with the
 * real runtime the register would get None).  0: the real v0.26 C-host behaviour. */
static int mirror_return = 1;
void oracle_set_mirror_return(int on) { mirror_return = on; }

void oracle_set_handler(oracle_handler_t h, oracle_ws_t w) {
  handler = h;
  ws_handler = w;
}
const char* oracle_last_error(void) { return last_error; }
int oracle_num_lookups(void) { return n_lookups; }

/* A "function handle" is the strdup'ed name: host.c only passes it back to TVMFFIFunctionCall. */
int TVMFFIEnvModLookupFromImports(TVMFFIObjectHandle library_ctx, const char* func_name,
                                  TVMFFIObjectHandle* out) {
  (void)library_ctx;
  ++n_lookups;
  *out = strdup(func_name);
  return 0;
}

int TVMFFIFunctionCall(TVMFFIObjectHandle func, TVMFFIAny* args, int32_t num_args,
                       TVMFFIAny* result) {
  result->type_index = kTVMFFINone;
  result->zero_padding = 0;
  result->v_int64 = 0;
  int rc = handler ? handler((const char*)func, args, num_args, result) : 0;
  if (mirror_return) args[num_args] = *result;
  return rc;
}

void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message) {
  snprintf(last_error, sizeof last_error, "%s: %s", kind, message);
}

void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts,
                                       int32_t num_parts) {
  size_t o = (size_t)snprintf(last_error, sizeof last_error, "%s: ", kind);
  for (int32_t i = 0; i < num_parts && o < sizeof last_error; ++i) {
    o += (size_t)snprintf(last_error + o, sizeof last_error - o, "%s", message_parts[i]);
  }
}

void TVMFFIErrorSetRaised(TVMFFIObjectHandle error) {
  (void)error;
  snprintf(last_error, sizeof last_error, "TVMFFIErrorSetRaised(<error object>)");
}

int TVMFFIObjectIncRef(TVMFFIObjectHandle obj) {
  (void)obj;
  return 0;
}
int TVMFFIObjectDecRef(TVMFFIObjectHandle obj) {
  (void)obj;
  return 0;
}

void* TVMBackendAllocWorkspace(int dev_type, int dev_id, uint64_t nbytes, int code, int bits) {
  (void)code;
  (void)bits;
  return ws_handler ? ws_handler(1, dev_type, dev_id, nbytes, NULL) : malloc(nbytes);
}
int TVMBackendFreeWorkspace(int dev_type, int dev_id, void* ptr) {
  if (ws_handler) ws_handler(0, dev_type, dev_id, 0, ptr);
  return 0;
}

/* The anylists are ffi::Any arrays: 16-byte TVMFFIAny each (src/runtime/vm/builtin.cc v0.26). */
int TVMBackendAnyListSetPackedArg(void* anylist, int index, TVMFFIAny* args, int arg_offset) {
  args[arg_offset] = ((TVMFFIAny*)anylist)[index];
  return 0;
}
int TVMBackendAnyListResetItem(void* anylist, int index) {
  TVMFFIAny* l = (TVMFFIAny*)anylist;
  l[index].type_index = kTVMFFINone;
  l[index].zero_padding = 0;
  l[index].v_int64 = 0;
  return 0;
}
int TVMBackendAnyListMoveFromPackedReturn(void* anylist, int index, TVMFFIAny* args,
                                          int ret_offset) {
  TVMFFIAny* l = (TVMFFIAny*)anylist;
  l[index] = args[ret_offset];
  args[ret_offset].type_index = kTVMFFINone;
  args[ret_offset].v_int64 = 0;
  return 0;
}

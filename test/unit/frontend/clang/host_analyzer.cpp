// The host-C interpreter, one construct at a time, on small hand-written functions in
// TVM's packed-function shape. (Real TVM output is covered by the sample tests.)
#include <catch2/catch.hpp>

#include "kdflow/frontend/host_analyzer.h"

using namespace kdflow;

namespace {

const char* kPrelude = R"(#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdbool.h>
static void* k_packed = NULL;
)";

/// Wraps a body into `int32_t f(args...)`, with `t0` = args[0]'s DLTensor, `d0` its data.
std::string fn(const std::string& body) {
  return std::string(kPrelude) +
         "int32_t f(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, "
         "int32_t* out_ret_tcode, void* resource_handle) {\n"
         "  TVMValue stack[8]; void* stack_tcode = stack; TVMValue stack_1[8]; void* stack_value = stack_1;\n"
         "  void* t0 = (((TVMValue*)args)[0].v_handle);\n"
         "  void* d0 = (((DLTensor*)t0)[0].data);\n" +
         body + "\n  return 0;\n}\n";
}

/// A packed call of "k" with int64 values v...
std::string launch(const std::vector<std::string>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    s += "  (((TVMValue*)stack_value)[" + std::to_string(i) + "].v_int64) = ((int64_t)(" + values[i] + "));\n";
    s += "  ((int32_t*)stack_tcode)[" + std::to_string(i) + "] = 0;\n";
  }
  s += "  if (k_packed == NULL) { if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, \"k\", &k_packed) != 0) return -1; }\n";
  s += "  { TVMValue rv; int rc; if (TVMFuncCall(k_packed, (TVMValue*)stack_value, (int*)stack_tcode, " +
       std::to_string(values.size()) + ", &rv, &rc) != 0) return -1; }\n";
  return s;
}

std::vector<TensorArg> one_tensor(std::vector<int64_t> shape = {4, 1000}) {
  TensorArg t;
  t.entry_id = 5;
  t.shape = std::move(shape);
  return {t};
}

Expected<HostTrace> run(const std::string& source, std::vector<TensorArg> tensors = one_tensor(),
                        InterpreterLimits limits = {}) {
  auto prog = HostProgram::parse(source, "t.c", limits);
  if (!prog) return prog.error();
  return (*prog)->run("f", tensors);
}

std::vector<int64_t> ints(const PackedCall& c) {
  std::vector<int64_t> out;
  for (const auto& a : c.args) out.push_back(a.int_value);
  return out;
}

std::string error_of(const Expected<HostTrace>& t) {
  REQUIRE_FALSE(t);
  CHECK(t.error().message.find('\n') == std::string::npos);
  return t.error().message;
}

}  // namespace

TEST_CASE("straight-line launch with integer expressions", "[host]") {
  auto t = run(fn(launch({"1", "(int64_t)999 / ((int64_t)2 << 3)", "-7 % 3", "(int32_t)4294967297", "7 >> 1"})));
  REQUIRE(t);
  REQUIRE(t->calls.size() == 1);
  CHECK(t->calls[0].name == "k");
  CHECK(ints(t->calls[0]) == std::vector<int64_t>{1, 999 / 16, -1, 1, 3});
  CHECK(t->calls[0].loc.file == "t.c");
  CHECK(t->calls[0].loc.line > 5);
  CHECK(t->args_used == 1);
}

TEST_CASE("unsigned and narrow integer semantics follow C", "[host]") {
  auto t = run(fn(launch({"(uint32_t)-1", "(int8_t)200", "(uint64_t)-1 > 0", "(int32_t)-1 < (uint32_t)1",
                          "(uint16_t)70000"})));
  REQUIRE(t);
  CHECK(ints(t->calls[0]) == std::vector<int64_t>{4294967295, -56, 1, 0, 70000 - 65536});
}

TEST_CASE("shapes, dtype and device come from the graph's DLTensor", "[host]") {
  auto t = run(fn("  void* sh = (((DLTensor*)t0)[0].shape);\n"
                  "  int32_t dim = ((int32_t)((int64_t*)sh)[1]);\n"
                  "  int32_t dev = (((DLTensor*)t0)[0].device.device_id);\n" +
                  launch({"dim", "(((DLTensor*)t0)[0].ndim)", "(((DLTensor*)t0)[0].dtype.bits)", "dev",
                          "((DLTensor*)t0)->ctx.device_type"})));
  REQUIRE(t);
  CHECK(ints(t->calls[0]) == std::vector<int64_t>{1000, 2, 32, 0, 2});
}

TEST_CASE("loops record iterations, break, continue and nested loops work", "[host]") {
  auto t = run(fn("  for (int64_t i = 0; i < (int64_t)4; ++i) {\n"
                  "    if (i == 1) continue;\n"
                  "    int32_t j = 0;\n"
                  "    while (1) { if (j >= 2) break;\n" +
                  launch({"i", "j"}) + "      j += 1; }\n  }\n"));
  REQUIRE(t);
  REQUIRE(t->calls.size() == 6);
  CHECK(ints(t->calls[0]) == std::vector<int64_t>{0, 0});
  CHECK(ints(t->calls[2]) == std::vector<int64_t>{2, 0});
  CHECK(t->calls[2].loop_iterations == std::vector<int64_t>{2, 0});
  CHECK(t->calls[5].loop_iterations == std::vector<int64_t>{3, 1});
}

TEST_CASE("TVM 0.8 loop bounds: ceil(log2(x)) and min/max ternaries", "[host]") {
  auto t = run(fn("  for (int32_t i = 0; i < ((int32_t)ceil(log2(1.000000e+03))); ++i) {\n"
                  "    int32_t _1 = (int32_t)(((int64_t)2 << ((int64_t)i)) * (int64_t)1024);\n" +
                  launch({"((1) > (_1) ? (1) : (_1))"}) + "  }\n"));
  REQUIRE(t);
  CHECK(t->calls.size() == 10);
  CHECK(t->calls[9].args[0].int_value == (int64_t(2) << 9) * 1024);
}

TEST_CASE("workspaces, data pointers with offsets, and the DLTensor handle", "[host]") {
  auto t = run(fn("  void* ws = TVMBackendAllocWorkspace(2, 0, (uint64_t)(4 * 250), 2, 32);\n"
                  "  if (ws == NULL) return -1;\n"
                  "  (((TVMValue*)stack_value)[0].v_handle) = ws; ((int32_t*)stack_tcode)[0] = 3;\n"
                  "  (((TVMValue*)stack_value)[1].v_handle) = (void*)((float*)d0 + 16); ((int32_t*)stack_tcode)[1] = 3;\n"
                  "  (((TVMValue*)stack_value)[2].v_handle) = t0; ((int32_t*)stack_tcode)[2] = 7;\n"
                  "  (((TVMValue*)stack_value)[3].v_float64) = 0.5; ((int32_t*)stack_tcode)[3] = 2;\n"
                  "  (((TVMValue*)stack_value)[4].v_handle) = NULL; ((int32_t*)stack_tcode)[4] = 4;\n"
                  "  if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, \"k\", &k_packed) != 0) return -1;\n"
                  "  { TVMValue rv; int rc; TVMFuncCall(k_packed, (TVMValue*)stack_value, (int*)stack_tcode, 5, &rv, &rc); }\n"
                  "  if (TVMBackendFreeWorkspace(2, 0, ws) != 0) return -1;\n"));
  REQUIRE(t);
  REQUIRE(t->workspaces.size() == 1);
  CHECK(t->workspaces[0].bytes == 1000);
  CHECK(t->workspaces[0].freed);
  const auto& a = t->calls.at(0).args;
  CHECK(a[0].pointer == PointerTarget{PointerTarget::Kind::Workspace, 0, 0});
  CHECK(a[1].pointer == PointerTarget{PointerTarget::Kind::Entry, 5, 64});
  CHECK(a[2].kind == PackedArg::Kind::Tensor);
  CHECK(a[2].tensor_arg == 0);
  CHECK(a[2].pointer == PointerTarget{PointerTarget::Kind::Entry, 5, 0});
  CHECK(a[2].tensor_shape == std::vector<int64_t>{4, 1000});
  CHECK((a[2].tensor_dtype_code == 2 && a[2].tensor_dtype_bits == 32 && a[2].tensor_dtype_lanes == 1));
  CHECK(a[3].float_value == 0.5);
  CHECK(a[4].pointer.kind == PointerTarget::Kind::Null);
}

// What TVM's tvm_stack_make_array prints for a call_packed to an external library
// (cuBLAS, cuDNN, Thrust: `-libs=cublas`): DLTensors filled in field by field on the host
// stack, passed with type code 7, plus integer and string arguments.
std::string library_call(const std::string& data0, const std::string& byte_offset0) {
  return "  TVMValue stack_2[12]; void* stack_array = stack_2; TVMValue stack_3[4]; void* stack_shape = stack_3;\n"
         "  ((int64_t*)stack_shape)[0] = (int64_t)4; ((int64_t*)stack_shape)[1] = (int64_t)250;\n"
         "  ((int64_t*)stack_shape)[2] = (int64_t)1000;\n"
         "  (((DLTensor*)stack_array)[0].data) = " + data0 + ";\n"
         "  (((DLTensor*)stack_array)[0].shape) = (&(((int64_t*)stack_shape)[0]));\n"
         "  uint64_t _1 = (uint64_t)0;\n"
         "  (((DLTensor*)stack_array)[0].strides) = (int64_t*)(*(void* *)(&(_1)));\n"
         "  (((DLTensor*)stack_array)[0].ndim) = (uint32_t)2;\n"
         "  (((DLTensor*)stack_array)[0].dtype.code) = (uint8_t)2;\n"
         "  (((DLTensor*)stack_array)[0].dtype.bits) = (uint8_t)16;\n"
         "  (((DLTensor*)stack_array)[0].dtype.lanes) = (uint16_t)1;\n"
         "  (((DLTensor*)stack_array)[0].byte_offset) = (uint64_t)" + byte_offset0 + ";\n"
         "  (((DLTensor*)stack_array)[0].device.device_id) = 0;\n"
         "  (((DLTensor*)stack_array)[0].device.device_type) = (DLDeviceType)2;\n"
         "  (((DLTensor*)stack_array)[1].data) = d0;\n"
         "  (((DLTensor*)stack_array)[1].shape) = (&(((int64_t*)stack_shape)[1]));\n"
         "  (((DLTensor*)stack_array)[1].strides) = (int64_t*)(*(void* *)(&(_1)));\n"
         "  (((DLTensor*)stack_array)[1].ndim) = (uint32_t)2;\n"
         "  (((DLTensor*)stack_array)[1].dtype.code) = (uint8_t)2;\n"
         "  (((DLTensor*)stack_array)[1].dtype.bits) = (uint8_t)32;\n"
         "  (((DLTensor*)stack_array)[1].dtype.lanes) = (uint16_t)1;\n"
         "  (((DLTensor*)stack_array)[1].byte_offset) = (uint64_t)0;\n"
         "  (((DLTensor*)stack_array)[1].device.device_id) = 0;\n"
         "  (((DLTensor*)stack_array)[1].device.device_type) = (DLDeviceType)2;\n"
         "  (((TVMValue*)stack_value)[0].v_handle) = (((DLTensor*)stack_array) + 0); ((int32_t*)stack_tcode)[0] = 7;\n"
         "  (((TVMValue*)stack_value)[1].v_handle) = (((DLTensor*)stack_array) + 1); ((int32_t*)stack_tcode)[1] = 7;\n"
         "  (((TVMValue*)stack_value)[2].v_int64) = ((int64_t)(bool)0); ((int32_t*)stack_tcode)[2] = 0;\n"
         "  (((TVMValue*)stack_value)[3].v_handle) = \"float32\"; ((int32_t*)stack_tcode)[3] = 11;\n"
         "  if (k_packed == NULL) { if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, \"tvm.contrib.cublas.matmul\", "
         "&k_packed) != 0) return -1; }\n"
         "  { TVMValue rv; int rc; if (TVMFuncCall(k_packed, (TVMValue*)stack_value, (int*)stack_tcode, 4, &rv, &rc) != 0) "
         "return -1; }\n";
}

TEST_CASE("a library call's DLTensors built on the host stack are read back", "[host][library]") {
  // Into the graph's buffer with a byte_offset, and the function's own data pointer.
  auto t = run(fn(library_call("(void*)((char*)d0 + 64)", "32")));
  REQUIRE(t);
  REQUIRE(t->calls.size() == 1);
  const PackedCall& c = t->calls[0];
  CHECK(c.name == "tvm.contrib.cublas.matmul");
  REQUIRE(c.args.size() == 4);
  CHECK(c.args[0].kind == PackedArg::Kind::Tensor);
  CHECK(c.args[0].tensor_arg == -1);  // not one of the function's arguments
  CHECK(c.args[0].pointer == PointerTarget{PointerTarget::Kind::Entry, 5, 96});  // data + 64, byte_offset 32
  CHECK(c.args[0].tensor_shape == std::vector<int64_t>{4, 250});
  CHECK((c.args[0].tensor_dtype_code == 2 && c.args[0].tensor_dtype_bits == 16 && c.args[0].tensor_dtype_lanes == 1));
  CHECK(c.args[1].pointer == PointerTarget{PointerTarget::Kind::Entry, 5, 0});
  CHECK(c.args[1].tensor_shape == std::vector<int64_t>{250, 1000});
  CHECK(c.args[1].tensor_dtype_bits == 32);
  CHECK(c.args[2].kind == PackedArg::Kind::Int);
  CHECK(c.args[3].kind == PackedArg::Kind::String);
  CHECK(c.args[3].string_value == "float32");

  // Into a workspace.
  t = run(fn("  void* ws = TVMBackendAllocWorkspace(2, 0, (uint64_t)4096, 2, 32);\n" + library_call("ws", "0")));
  REQUIRE(t);
  CHECK(t->calls.at(0).args.at(0).pointer == PointerTarget{PointerTarget::Kind::Workspace, 0, 0});
}

TEST_CASE("a library call's DLTensor that is not filled in, or points at host memory, is an error", "[host][library][errors]") {
  // The data field never written.
  std::string body = library_call("d0", "0");
  body.erase(body.find("  (((DLTensor*)stack_array)[0].data) = d0;\n"), std::string("  (((DLTensor*)stack_array)[0].data) = d0;\n").size());
  std::string e = error_of(run(fn(body)));
  CHECK(e.find("uninitialized") != std::string::npos);
  CHECK(e.rfind("t.c:", 0) == 0);
  // Data pointing at the host stack.
  e = error_of(run(fn(library_call("stack_shape", "0"))));
  CHECK(e.find("the DLTensor's data points to") != std::string::npos);
  CHECK(e.find("not to device memory") != std::string::npos);
}

TEST_CASE("C math functions, NAN and INFINITY in host expressions", "[host]") {
  auto t = run(fn(launch({"(int64_t)fmodf(7.0f, 4.0f)", "(int64_t)(NAN != NAN)", "(int64_t)(INFINITY > 1e300)",
                          "(int64_t)nearbyint(2.5)", "(int64_t)(tanhf(100.0f) * 10)", "(int64_t)(erf(10.0) * 10)"}) +
                  launch({"(int64_t)log10f(1000.0f)", "(int64_t)exp2f(10.0f)", "(int64_t)copysign(3.0, -1.0)",
                          "(int64_t)__builtin_ceilf(0.5f)"})));
  if (!t) FAIL(t.error().message);
  REQUIRE(t->calls.size() == 2);
  CHECK(ints(t->calls[0]) == std::vector<int64_t>{3, 1, 1, 2, 10, 10});
  CHECK(ints(t->calls[1]) == std::vector<int64_t>{3, 1024, -3, 1});
  CHECK(error_of(run(fn(launch({"(int64_t)fmod(1.0)"})))).find("too few arguments") != std::string::npos);
}

TEST_CASE("calls to helper functions defined in the file are interpreted", "[host]") {
  std::string src = std::string(kPrelude) +
                    "static int64_t twice(int64_t x) { return x * 2; }\n" +
                    fn(launch({"twice(21)"})).substr(std::string(kPrelude).size());
  auto t = run(src);
  REQUIRE(t);
  CHECK(t->calls.at(0).args[0].int_value == 42);
}

TEST_CASE("a failing runtime check is reported where it returns, with TVM's message", "[host][errors]") {
  auto t = run(fn("  if (!((((DLTensor*)t0)[0].ndim) == 3)) {\n"
                  "    TVMAPISetLastError(\"arg0.ndim is expected to equal 3\");\n"
                  "    return -1;\n  }\n"));
  std::string e = error_of(t);
  CHECK(e.rfind("t.c:", 0) == 0);
  CHECK(e.find("returns -1") != std::string::npos);
  CHECK(e.find("arg0.ndim is expected to equal 3") != std::string::npos);
}

TEST_CASE("reading an argument the graph does not pass is an error", "[host][errors]") {
  auto t = run(fn("  void* t1 = (((TVMValue*)args)[1].v_handle);\n"));
  CHECK(error_of(t).find("reads args[1] but the graph node passes 1 arguments") != std::string::npos);
  t = run(fn("  int64_t x = ((int64_t*)(((DLTensor*)t0)[0].shape))[2];\n"));
  CHECK(error_of(t).find("reads shape[2] of argument 0, which has 2 dimensions") != std::string::npos);
}

TEST_CASE("what the interpreter cannot evaluate is an error at its position, never a guess", "[host][errors]") {
  // An unknown external function.
  auto t = run(std::string(kPrelude) + "int64_t mystery(int64_t);\n" + fn(launch({"mystery(3)"})).substr(std::string(kPrelude).size()));
  std::string e = error_of(t);
  CHECK(e.find("call to 'mystery'") != std::string::npos);
  CHECK(e.find(":", 4) != std::string::npos);
  // Division by zero, out-of-range shift, uninitialized read.
  CHECK(error_of(run(fn(launch({"10 / (num_args - 1)"})))).find("division by zero") != std::string::npos);
  CHECK(error_of(run(fn(launch({"(int64_t)1 << (num_args + 70)"})))).find("out of range") != std::string::npos);
  CHECK(error_of(run(fn("  int64_t u;\n" + launch({"u"})))).find("uninitialized") != std::string::npos);
  // A handle obtained elsewhere than TVMBackendGetFuncFromEnv.
  CHECK(error_of(run(fn("  { TVMValue rv; int rc; TVMFuncCall(d0, (TVMValue*)stack_value, (int*)stack_tcode, 0, &rv, &rc); }")))
            .find("not obtained from TVMBackendGetFuncFromEnv") != std::string::npos);
}

TEST_CASE("hostile input cannot hang the interpreter", "[host][limits]") {
  InterpreterLimits limits;
  limits.max_steps = 100000;
  auto t = run(fn("  for (;;) { }\n"), one_tensor(), limits);
  CHECK(error_of(t).find("limit") != std::string::npos);
  limits = {};
  limits.max_loop_trips = 1000;
  t = run(fn("  int64_t n = 0; while (n >= 0) { n = n + 1; }\n"), one_tensor(), limits);
  CHECK(error_of(t).find("loop trip limit") != std::string::npos);
  t = run(std::string(kPrelude) + "static int64_t r(int64_t x) { return r(x + 1); }\n" +
          fn(launch({"r(0)"})).substr(std::string(kPrelude).size()));
  CHECK(error_of(t).find("call depth") != std::string::npos);
}

TEST_CASE("the memory limit counts live cells, not stores", "[host][limits]") {
  InterpreterLimits limits;
  limits.max_memory_cells = 1000;
  // 5000 rewrites of the same two cells: within the limit.
  auto t = run(fn("  for (int32_t i = 0; i < 5000; ++i) {\n"
                  "    (((TVMValue*)stack_value)[0].v_int64) = ((int64_t)i); ((int32_t*)stack_tcode)[0] = 0;\n  }\n"),
               one_tensor(), limits);
  CHECK(t);
  // 5000 distinct cells: over it.
  t = run(fn("  int64_t big[8000];\n  for (int32_t i = 0; i < 5000; ++i) { big[i] = i; }\n"), one_tensor(), limits);
  CHECK(error_of(t).find("interpreter memory limit reached") != std::string::npos);
}

TEST_CASE("parse errors are file:line:col and the real file system is out of reach", "[host][errors]") {
  auto p = HostProgram::parse("int f( {\n", "bad.c");
  REQUIRE_FALSE(p);
  CHECK(p.error().message.rfind("bad.c:1:", 0) == 0);
  p = HostProgram::parse("#include \"/etc/passwd\"\n", "inc.c");
  REQUIRE_FALSE(p);
  CHECK(p.error().message.rfind("inc.c:1:", 0) == 0);
  CHECK(p.error().message.find("not found") != std::string::npos);
  p = HostProgram::parse("#include <stdio.h>\n", "inc.c");
  REQUIRE_FALSE(p);
  // A function without the packed signature.
  auto prog = HostProgram::parse("int f(int x) { return x; }\n", "sig.c");
  REQUIRE(prog);
  auto t = (*prog)->run("f", {});
  CHECK(error_of(t).find("packed-function signature") != std::string::npos);
  CHECK(error_of((*prog)->run("g", {})).find("no function 'g'") != std::string::npos);
}

// Hand-written: a hostile host.c nests an `&&` chain 20,000 deep (clang builds it as a
// 20,000-level tree); the interpreter stops with an error instead of overflowing its stack.
TEST_CASE("an expression nested thousands deep is an error, not a crash", "[host][limits]") {
  std::string chain = "(num_args == 4)";
  for (int i = 0; i < 20000; ++i) chain += " && (num_args == 4)";
  auto t = run(fn("  if (!(" + chain + ")) { return -1; }\n"));
  CHECK(error_of(t).find("nested more than 512 deep") != std::string::npos);
}

// Hand-written (one construct): integers computed from a dimension the caller names
// (TensorArg::shape_names, from a tvm-ffi signature) carry their expression, through locals,
// casts and arithmetic; comparisons, constants and unnamed dimensions carry none.
TEST_CASE("integers computed from a named dimension carry their expression", "[host][symbolic]") {
  std::vector<TensorArg> tensors = one_tensor({8, 1000});
  tensors[0].shape_names = {"n", ""};
  auto t = run(fn("  void* sh = (((DLTensor*)t0)[0].shape);\n"
                  "  int64_t n = ((int64_t*)sh)[0];\n"
                  "  int32_t m = (int32_t)n;\n" +
                  launch({"n", "(n + (int64_t)31) >> (int64_t)5", "-m * 2", "((int64_t*)sh)[1]", "n < 9", "7",
                          "n * ((int64_t*)sh)[1]"})),
               tensors);
  REQUIRE(t);
  const PackedCall& c = t->calls[0];
  CHECK(ints(c) == std::vector<int64_t>{8, 1, -16, 1000, 1, 7, 8000});
  std::vector<std::string> exprs;
  for (const PackedArg& a : c.args) exprs.push_back(a.int_expr);
  CHECK(exprs == std::vector<std::string>{"n", "(n + 31) >> 5", "-n * 2", "", "", "", "n * 1000"});
  // Without names (Relay builds, static shapes) nothing is recorded.
  auto plain = run(fn("  int64_t n = ((int64_t*)(((DLTensor*)t0)[0].shape))[0];\n" + launch({"n + 1"})));
  REQUIRE(plain);
  CHECK(plain->calls[0].args[0].int_expr.empty());
  // A signature may name a dimension by an expression: parenthesised under an operator.
  tensors[0].shape_names = {"n * 2", ""};
  auto compound = run(fn("  int64_t d = ((int64_t*)(((DLTensor*)t0)[0].shape))[0];\n" + launch({"d", "d + 1"})), tensors);
  REQUIRE(compound);
  CHECK(compound->calls[0].args[0].int_expr == "n * 2");
  CHECK(compound->calls[0].args[1].int_expr == "(n * 2) + 1");
  // Bounded: an expression deeper than the limit is dropped, the value kept.
  tensors[0].shape_names = {"n", ""};
  auto deep = run(fn("  int64_t n = ((int64_t*)(((DLTensor*)t0)[0].shape))[0];\n"
                     "  for (int64_t i = 0; i < (int64_t)40; ++i) { n = n + (int64_t)1; }\n" +
                     launch({"n"})),
                  tensors);
  REQUIRE(deep);
  CHECK(deep->calls[0].args[0].int_value == 48);
  CHECK(deep->calls[0].args[0].int_expr.empty());
}

// A Relax shape function (hand-written, in TVM 0.27's tvm-ffi form) on the VM's shape heap:
// the slots it writes come back known, one it never writes stays unset (phi3_v's heap of 40
// has such holes), and reading an unset slot is an error naming it.
TEST_CASE("shape function: written slots become known, unwritten ones stay unset", "[host]") {
  const std::string src = std::string(R"(#define TVM_EXPORTS
#include "tvm/ffi/extra/c_env_api.h"
#include "tvm/runtime/base.h"
#include "tvm/runtime/c_backend_api.h"
#include "tvm/ffi/c_api.h"
TVM_DLL int32_t __tvm_ffi_shape_func(void* self_handle, void* args, int32_t num_args, void* result) {
  void* H_handle = ((((TVMFFIAny*)args)[0].type_index) == 70) ? ((void*)((char*)(((TVMFFIAny*)args)[0].v_ptr) + 24))
                                                                 : (((TVMFFIAny*)args)[0].v_ptr);
  int64_t* H = ((int64_t*)(((DLTensor*)H_handle)[0].data));
  H[3] = (H[0] * (int64_t)2);
  return 0;
}
TVM_DLL int32_t __tvm_ffi_reads_hole(void* self_handle, void* args, int32_t num_args, void* result) {
  void* H_handle = ((((TVMFFIAny*)args)[0].type_index) == 70) ? ((void*)((char*)(((TVMFFIAny*)args)[0].v_ptr) + 24))
                                                                 : (((TVMFFIAny*)args)[0].v_ptr);
  int64_t* H = ((int64_t*)(((DLTensor*)H_handle)[0].data));
  H[3] = H[1];
  return 0;
}
)");
  auto prog = HostProgram::parse(src, "shape.c");
  INFO((prog ? std::string() : prog.error().message));
  REQUIRE(prog);
  std::vector<bool> known{true, false, false, false};
  Expected<std::vector<int64_t>> heap = (*prog)->run_shape_function("shape_func", {21, 0, 0, 0}, &known);
  INFO((heap ? std::string() : heap.error().message));
  REQUIRE(heap);
  CHECK((*heap)[0] == 21);
  CHECK((*heap)[3] == 42);
  CHECK(known == std::vector<bool>{true, false, false, true});
  known = {true, false, false, false};
  Expected<std::vector<int64_t>> bad = (*prog)->run_shape_function("reads_hole", {21, 0, 0, 0}, &known);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("uninitialized") != std::string::npos);
}

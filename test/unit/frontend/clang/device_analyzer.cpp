// The device-source analyzer: one construct per case on small hand-written kernels, then
// every real samples/*/device.cu against its function table (device.tvm_meta.json).
#include <catch2/catch.hpp>

#include <string>

#include "kdflow/frontend/device_analyzer.h"
#include "kdflow/formats/function_table.h"
#include "test_util.h"

using namespace kdflow;

namespace {

DeviceSource parse(const std::string& src) {
  auto r = analyze_device_source(src, "t.cu", /*strict=*/true);  // a construct that does not parse fails here
  if (!r) FAIL(r.error().message);
  return r.take();
}

/// The access of parameter `param` of kernel `kernel` in `src`.
Access access(const std::string& src, const std::string& param, const std::string& kernel = "k") {
  DeviceSource ds = parse(src);
  const DeviceFunction* f = ds.find(kernel);
  REQUIRE(f != nullptr);
  for (const auto& p : f->params)
    if (p.name == param) return p.access;
  FAIL("no parameter " << param);
  return Access::Unknown;
}

/// `extern "C" __global__ void k(float* __restrict__ out, float* __restrict__ in, int n) { body }`
std::string kernel(const std::string& body, const std::string& before = "") {
  return before + "extern \"C\" __global__ void k(float* __restrict__ out, float* __restrict__ in, int n) {\n" + body +
         "\n}\n";
}

}  // namespace

TEST_CASE("device: a kernel's name, parameters, location and launch bounds", "[device]") {
  DeviceSource ds = parse(
      "typedef float real;\n"
      "extern \"C\" __global__ void __launch_bounds__(256) a(float* __restrict__ x, int n) { x[n] = 0.f; }\n"
      "extern \"C\" __global__ void b(real* y) {}\n"
      "__device__ void not_a_kernel(float* p) { p[0] = 1.f; }\n"
      "extern \"C\" __global__ void __launch_bounds__(128, 2) c(const float* y) {}\n");
  REQUIRE(ds.functions.size() == 3);
  const DeviceFunction& a = ds.functions[0];
  CHECK(a.name == "a");
  CHECK(a.launch_bounds == 256);
  CHECK(a.loc.file == "t.cu");
  CHECK(a.loc.line == 2);
  CHECK(a.loc.col == 51);
  REQUIRE(a.params.size() == 2);
  CHECK(a.params[0].name == "x");
  CHECK(a.params[0].type == "float *__restrict");
  CHECK(a.params[0].pointer);
  CHECK(a.params[0].access == Access::Write);
  CHECK(a.params[1].name == "n");
  CHECK(a.params[1].type == "int");
  CHECK_FALSE(a.params[1].pointer);
  CHECK(a.params[1].access == Access::Unknown);
  CHECK(ds.functions[1].name == "b");
  CHECK(ds.functions[1].launch_bounds == 0);
  CHECK(ds.functions[1].params[0].access == Access::Unknown);  // never used
  CHECK(ds.functions[2].name == "c");
  CHECK(ds.functions[2].launch_bounds == 128);
}

TEST_CASE("device: plain store, load, compound assignment, ++", "[device]") {
  CHECK(access(kernel("out[threadIdx.x] = 1.0f;"), "out") == Access::Write);
  CHECK(access(kernel("out[threadIdx.x] = 1.0f;"), "in") == Access::Unknown);
  CHECK(access(kernel("out[0] = in[n];"), "in") == Access::Read);
  CHECK(access(kernel("out[0] = max(in[n], 0.f) + __expf(in[1]);"), "in") == Access::Read);
  CHECK(access(kernel("out[n] += in[n];"), "out") == Access::ReadWrite);
  CHECK(access(kernel("out[n] += in[n];"), "in") == Access::Read);
  CHECK(access(kernel("out[n]++;"), "out") == Access::ReadWrite);
  CHECK(access(kernel("--*out;"), "out") == Access::ReadWrite);
  CHECK(access(kernel("float x = *in; out[0] = x;"), "in") == Access::Read);
  CHECK(access(kernel("if (in[0] > 0.f) { out[0] = 1.f; }"), "in") == Access::Read);
  CHECK(access(kernel("out[0] = (out + 1)[n];"), "out") == Access::ReadWrite);
  CHECK(access(kernel("out[(int)in[0]] = 0.f;"), "in") == Access::Read);  // a loaded index is data
}

TEST_CASE("device: atomics read and write", "[device]") {
  CHECK(access(kernel("atomicAdd(&out[n], in[n]);"), "out") == Access::ReadWrite);
  CHECK(access(kernel("atomicAdd(&out[n], in[n]);"), "in") == Access::Read);
  CHECK(access(kernel("atomicMax((int*)(out + 2), 3);"), "out") == Access::ReadWrite);
}

TEST_CASE("device: aliases through casts, pointer arithmetic and local pointers", "[device]") {
  CHECK(access(kernel("float4* o = (float4*)(out + 4); o[0] = make_float4(1.f, 2.f, 3.f, 4.f);"), "out") ==
        Access::Write);
  CHECK(access(kernel("float* q; q = in + 2; q += n; out[0] = *q;"), "in") == Access::Read);
  CHECK(access(kernel("float* q = &out[4]; float* r = q; r[n] = 0.f;"), "out") == Access::Write);
  CHECK(access(kernel("long a = (long)out; *(float*)(a + 8) = 0.f;"), "out") == Access::Write);
  CHECK(access(kernel("float* q = n ? out : in; q[0] = 1.f;"), "in") == Access::Write);
  CHECK(access(kernel("float* q = in; for (int i = 0; i < n; ++i) { q[i] = 0.f; q = out; }"), "out") ==
        Access::Write);
  CHECK(access(kernel("float& r = out[n]; r = 2.f;"), "out") == Access::Write);
  CHECK(access(kernel("((volatile float*)out)[0] = in[0];"), "out") == Access::Write);
  CHECK(access(kernel("float* q = out; q++; *q = 1.f;"), "out") == Access::Write);
  // Aliases are a fixpoint over all assignments: b may hold `out` after the first iteration.
  std::string chain = "float* a = in; float* b = in; for (int i = 0; i < n; ++i) { b[0] = 1.f; b = a; a = out; }";
  CHECK(access(kernel(chain), "out") == Access::Write);
  CHECK(access(kernel(chain), "in") == Access::Write);
}

TEST_CASE("device: float4 vector loads and stores", "[device]") {
  std::string src = kernel(
      "float4 v = *(float4*)(in + (threadIdx.x * 4));\n"
      "float4 w; w.x = v.x * 2.f; w.y = v.y; w.z = v.z; w.w = v.w;\n"
      "*(float4*)(out + (threadIdx.x * 4)) = w;");
  CHECK(access(src, "out") == Access::Write);
  CHECK(access(src, "in") == Access::Read);
  CHECK(access(kernel("((float4*)out)[1].x = 2.f;"), "out") == Access::Write);
  CHECK(access(kernel("((float4*)out)[1].x += 2.f;"), "out") == Access::ReadWrite);
  CHECK(access(kernel("uint4 u = __ldg((const uint4*)in); out[0] = (float)u.x;"), "in") == Access::Read);
}

TEST_CASE("device: pointers passed to functions the file defines are followed", "[device]") {
  std::string helpers =
      "__device__ void put(float* p, int i, float v) { p[i] = v; }\n"
      "__device__ float get(const float* p, int i) { return p[i]; }\n"
      "__device__ void put2(float* p, float v) { put(p + 1, 0, v); }\n"
      "__device__ float* skip(float* p) { return p + 4; }\n"
      "__device__ void bump(float& x) { x += 1.f; }\n"
      "__device__ void nothing(float* p) {}\n";
  CHECK(access(kernel("put(out, n, get(in, n));", helpers), "out") == Access::Write);
  CHECK(access(kernel("put(out, n, get(in, n));", helpers), "in") == Access::Read);
  CHECK(access(kernel("put2(out, 1.f);", helpers), "out") == Access::Write);
  CHECK(access(kernel("skip(out)[0] = in[0];", helpers), "out") == Access::Write);
  CHECK(access(kernel("bump(out[n]);", helpers), "out") == Access::ReadWrite);
  CHECK(access(kernel("nothing(out);", helpers), "out") == Access::Unknown);
  // A member function is followed through `this`.
  std::string method = "struct S { float v; __device__ void set(float x) { v = x; } __device__ float get() const { return v; } };\n";
  CHECK(access(kernel("((S*)out)->set(in[0]);", method), "out") == Access::Write);
  CHECK(access(kernel("out[0] = ((S*)in)[2].get();", method), "in") == Access::Read);
  // Recursion is cut off conservatively.
  CHECK(access(kernel("rec(in, n);", "__device__ void rec(float* p, int n) { if (n) rec(p, n - 1); }\n"), "in") ==
        Access::ReadWrite);
}

TEST_CASE("device: pointers passed to unknown functions or escaping are read and written", "[device]") {
  CHECK(access(kernel("ext(in);", "__device__ void ext(const float* p);\n"), "in") == Access::ReadWrite);
  CHECK(access(kernel("float* a[1]; a[0] = in; out[0] = a[0][0];"), "in") == Access::ReadWrite);
  CHECK(access(kernel("auto pp = &out; (*pp)[0] = 0.f;"), "out") == Access::ReadWrite);
  CHECK(access(kernel("asm volatile(\"st.global.f32 [%0], %1;\" :: \"l\"(out), \"f\"(1.f));"), "out") ==
        Access::ReadWrite);
  CHECK(access(kernel("auto f = [&]() { in[0] = 1.f; }; f();"), "in") == Access::ReadWrite);
  // A pointer only compared is not accessed.
  CHECK(access(kernel("if (in != 0) out[0] = 0.f;"), "in") == Access::Unknown);
}

TEST_CASE("device: half, bf16 and wmma stand-ins", "[device]") {
  std::string src =
      "#include <cuda_fp16.h>\n#include <mma.h>\n"
      "extern \"C\" __global__ void k(half* __restrict__ a, half* __restrict__ b, half* __restrict__ c,\n"
      "                               half* __restrict__ d, float* __restrict__ e, half* __restrict__ f) {\n"
      "  a[0] = b[0] + b[1];\n"
      "  a[1] = (half)1.0f;\n"
      "  a[2] = 2.0f;\n"
      "  c[0] += b[0];\n"
      "  float x = (float)d[0] + __half2float(d[1]);\n"
      "  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> fa[1];\n"
      "  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[1];\n"
      "  nvcuda::wmma::fill_fragment(acc[0], x);\n"
      "  nvcuda::wmma::load_matrix_sync(fa[0], f + 16, 16);\n"
      "  nvcuda::wmma::store_matrix_sync(e + 16, acc[0], 16, nvcuda::wmma::mem_row_major);\n"
      "}\n";
  CHECK(access(src, "a") == Access::Write);
  CHECK(access(src, "b") == Access::Read);
  CHECK(access(src, "c") == Access::ReadWrite);
  CHECK(access(src, "d") == Access::Read);
  CHECK(access(src, "e") == Access::Write);
  CHECK(access(src, "f") == Access::Read);
}

namespace {

// What TVM 0.14's CUDA code generator puts before the kernels when a module uses fp16,
// bf16, fp8, warp shuffles, int8, math constants, tensor cores and cp.async
// (src/target/source/codegen_cuda.cc, literal/cuda_half_t.h), abridged.
const char* kTvmPreamble = R"(
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 530)
#include <cuda_fp16.h>
__device__ half max(half a, half b)
{
  return __hgt(__half(a), __half(b)) ? a : b;
}
__device__ half min(half a, half b)
{
  return __hlt(__half(a), __half(b)) ? a : b;
}
#else
#error "software half is not expected: the prelude preprocesses for sm_90"
#endif

// Pack two half values.
static inline __device__ __host__ unsigned
__pack_half2(const half x, const half y) {
  unsigned v0 = *((unsigned short *)&x);
  unsigned v1 = *((unsigned short *)&y);
  return (v1 << 16) | v0;
}

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 530)
#define CUDA_UNSUPPORTED_HALF_MATH_BINARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x, half y) {   \
  float tmp_x = __half2float(x);                                          \
  float tmp_y = __half2float(y);                                          \
  float result = FP32_MATH_NAME(tmp_x, tmp_y);                            \
  return __float2half(result);                                            \
}

#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x) {          \
  float tmp_x = __half2float(x);                                         \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2half(result);                                           \
}

CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hatan, atanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(herf, erf)

#undef CUDA_UNSUPPORTED_HALF_MATH_BINARY
#undef CUDA_UNSUPPORTED_HALF_MATH_UNARY
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
#include <cuda_bf16.h>
__device__ nv_bfloat16 max(nv_bfloat16 a, nv_bfloat16 b)
{
  return __hgt(a, b) ? a : b;
}
__device__ nv_bfloat16 min(nv_bfloat16 a, nv_bfloat16 b)
{
  return __hlt(a, b) ? a : b;
}
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890)
#include <cuda_fp8.h>
#endif
struct __align__(8) half4 {
  __half x, y, z, w;
  __host__ __device__ half4() : x(__half(0)), y(__half(0)), z(__half(0)), w(__half(0)) {}
  __host__ __device__ half4(__half x, __half y, __half z, __half w) : x(x), y(y), z(z), w(w) {}
  __host__ __device__ explicit half4(const __nv_fp8x4_e4m3& fp8x4) {
    __nv_fp8x2_e4m3 lo_part, hi_part;
    lo_part.__x = static_cast<__nv_fp8x2_storage_t>(fp8x4.__x & 0xFFFF);
    hi_part.__x = static_cast<__nv_fp8x2_storage_t>((fp8x4.__x >> 16) & 0xFFFF);
    __half2 lo_half2 = static_cast<__half2>(lo_part);
    __half2 hi_half2 = static_cast<__half2>(hi_part);
    x = reinterpret_cast<__half*>(&lo_half2)[0];
    y = reinterpret_cast<__half*>(&lo_half2)[1];
    z = reinterpret_cast<__half*>(&hi_half2)[0];
    w = reinterpret_cast<__half*>(&hi_half2)[1];
  }
  __host__ __device__ explicit operator __nv_fp8x4_e4m3() const {
    __nv_fp8x4_e4m3 result;
    __half2 lo_half2 = *reinterpret_cast<const __half2*>(&x);
    __half2 hi_half2 = *reinterpret_cast<const __half2*>(&z);
    __nv_fp8x2_e4m3 lo_part(lo_half2), hi_part(hi_half2);
    result.__x =
        (static_cast<__uint32_t>(lo_part.__x) | (static_cast<__uint32_t>(hi_part.__x) << 16));
    return result;
  }
};
__host__ __device__ half4 make_half4(__half x, __half y, __half z, __half w) {
    return half4(x, y, z, w);
}
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)
#define __shfl_sync(mask, var, lane, width) \
        __shfl((var), (lane), (width))
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 610)
#include <sm_61_intrinsics.h>
#endif
#include <math_constants.h>
#include <mma.h>
__forceinline__ __device__ unsigned int
cast_smem_ptr_to_int(const void* const smem_ptr)
{
  unsigned int smem_int;
  asm volatile ("{ .reg .u64 smem_int; cvta.to.shared.u64 smem_int, %1; cvt.u32.u64 %0, smem_int; }"
    : "=r"(smem_int) : "l"(smem_ptr));
  return smem_int;
}

#if (((__CUDACC_VER_MAJOR__ == 11) && (__CUDACC_VER_MINOR__ >= 4)) || \
     (__CUDACC_VER_MAJOR__ > 11))
#define TVM_ENABLE_L2_PREFETCH 1
#else
#define TVM_ENABLE_L2_PREFETCH 0
#endif

#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
  #define int64_t long long
  #define uint64_t unsigned long long
#endif
)";

}  // namespace

TEST_CASE("device: TVM 0.14's fp16/bf16/fp8/int8/wmma/cp.async preamble and kernels", "[device]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void __launch_bounds__(128) mma(half* __restrict__ A, half* __restrict__ B, float* __restrict__ C) {
  extern __shared__ uchar buf_dyn_shmem[];
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> C_wmma_accumulator[1];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> A_shared_wmma_matrix_a[1];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> B_wmma_matrix_b[1];
  nvcuda::wmma::fill_fragment(C_wmma_accumulator[0], 0.000000e+00f);
  {
    unsigned int addr = cast_smem_ptr_to_int(buf_dyn_shmem + (((int)threadIdx.x) * 16));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(A + (((int)blockIdx.x) * 512))), "n"(16)
    );
  }
  __asm__ __volatile__("cp.async.commit_group;");
  __asm__ __volatile__("cp.async.wait_group 0;");
  __syncthreads();
  nvcuda::wmma::load_matrix_sync(A_shared_wmma_matrix_a[0], (&(((half*)buf_dyn_shmem)[0])), 40);
  nvcuda::wmma::load_matrix_sync(B_wmma_matrix_b[0], (&(B[(((int)blockIdx.y) * 256)])), 16);
  nvcuda::wmma::mma_sync(C_wmma_accumulator[0], A_shared_wmma_matrix_a[0], B_wmma_matrix_b[0], C_wmma_accumulator[0]);
  nvcuda::wmma::store_matrix_sync((&(C[(((int)blockIdx.x) * 256)])), C_wmma_accumulator[0], 64, nvcuda::wmma::mem_row_major);
}

extern "C" __global__ void __launch_bounds__(256) elementwise(half* __restrict__ T_out, half* __restrict__ p0, nv_bfloat16* __restrict__ p1,
    signed char* __restrict__ p2, float* __restrict__ T_f, __nv_fp8_e4m3* __restrict__ p3, int64_t n) {
  uint2 v = *(uint2*)(p0 + (((int)threadIdx.x) * 4));
  uint2 r;
  ((half2*)(&(r.x)))->x = (((half2*)(&(v.x)))->x * (half)2.000000e+00f);
  ((half2*)(&(r.x)))->y = max(((half2*)(&(v.x)))->y, (half)0.000000e+00f);
  ((half2*)(&(r.y)))->x = hexp(((half2*)(&(v.y)))->x);
  ((half2*)(&(r.y)))->y = herf(((half2*)(&(v.y)))->y);
  *(uint2*)(T_out + (((int)threadIdx.x) * 4)) = r;
  T_out[1024] = __pack_half2(p0[0], p0[1]) ? __float2half_rn(__bfloat162float(max(p1[0], p1[1]))) : hpow(p0[2], p0[3]);
  int acc = __dp4a(*(int*)(p2 + 4), *(int*)(p2 + 8), 0);
  half4 h4 = (half4)((__nv_fp8x4_e4m3*)p3)[(int)threadIdx.x];
  T_f[((int)threadIdx.x)] = (((float)acc) + (isinf((float)h4.x) ? CUDART_INF_F : __shfl_down_sync(__activemask(), (float)h4.y, 1, 32)))
      + (float)(n * (int64_t)blockDim.x);
}
)";
  DeviceSource ds = parse(src);
  REQUIRE(ds.functions.size() == 2);
  const DeviceFunction* m = ds.find("mma");
  REQUIRE(m != nullptr);
  CHECK(m->launch_bounds == 128);
  CHECK(m->params[0].access == Access::ReadWrite);  // an asm operand (cp.async): conservatively read+write
  CHECK(m->params[1].access == Access::Read);       // load_matrix_sync
  CHECK(m->params[2].access == Access::Write);      // store_matrix_sync
  const DeviceFunction* e = ds.find("elementwise");
  REQUIRE(e != nullptr);
  REQUIRE(e->params.size() == 7);
  CHECK(e->params[0].access == Access::Write);
  CHECK(e->params[1].access == Access::Read);
  CHECK(e->params[2].access == Access::Read);
  CHECK(e->params[3].access == Access::Read);
  CHECK(e->params[4].access == Access::Write);
  CHECK(e->params[5].access == Access::Read);
  CHECK(e->params[6].type == "long long");
  CHECK_FALSE(e->params[6].pointer);
}

TEST_CASE("device: a clang error is reported as file:line:col (strict)", "[device]") {
  auto r = analyze_device_source("extern \"C\" __global__ void k(float* p) {\n  p[0] = undeclared_thing;\n}\n",
                                 "bad/device.cu", /*strict=*/true);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.rfind("bad/device.cu:2:10: error: use of undeclared identifier 'undeclared_thing'", 0) ==
        0);
  CHECK(r.error().code == ExitCode::DataError);
}

// ---------------------------------------------------------------------------
// The real samples

TEST_CASE("device: every sample's device.cu parses and matches its function table", "[device][samples]") {
  for (const std::string& name : test::sample_names()) {
    std::string dir = test::sample_dir(name);
    INFO("sample " << name);
    auto ds = analyze_device_source(test::slurp(dir + "/device.cu"), "device.cu");
    REQUIRE(ds);
    auto table = parse_function_table(test::slurp(dir + "/device.tvm_meta.json"), "device.tvm_meta.json");
    REQUIRE(table);
    CHECK(ds->functions.size() == table->functions.size());
    for (const auto& [kname, info] : table->functions) {
      INFO("kernel " << kname);
      const DeviceFunction* f = ds->find(kname);
      REQUIRE(f != nullptr);
      REQUIRE(f->params.size() == info.arg_types.size());
      bool writes = false;
      for (size_t i = 0; i < f->params.size(); ++i) {
        INFO("param " << i << " " << f->params[i].name);
        CHECK(f->params[i].pointer == (info.arg_types[i] == "handle"));
        if (f->params[i].pointer) CHECK(f->params[i].access != Access::Unknown);
        writes |= f->params[i].access == Access::Write || f->params[i].access == Access::ReadWrite;
      }
      CHECK(writes);
      // A dense kernel's output (T_matmul_NT, T_add, T_relu, ...) is written. TVM >= 0.9
      // passes it first; TVM 0.8 passes it after the inputs (placeholder, placeholder1, T_add, ...).
      if (kname.find("dense") != std::string::npos) {
        const DeviceParam* out = nullptr;
        for (const auto& p : f->params)
          if (p.name.rfind("T_", 0) == 0) out = &p;
        REQUIRE(out != nullptr);
        CHECK(out->access == Access::Write);
        if (name.find("_v08") == std::string::npos) CHECK(&f->params[0] == out);
      }
      CHECK(f->loc.file == "device.cu");
      CHECK(f->loc.line > 0);
      CHECK(f->access_error == "");  // every kernel of every sample is analyzed
    }
    // The same file in strict mode: no clang error anywhere.
    CHECK(analyze_device_source(test::slurp(dir + "/device.cu"), "device.cu", /*strict=*/true));
  }
}

TEST_CASE("device: mlp's log_softmax kernels", "[device][samples]") {
  auto ds = analyze_device_source(test::slurp(test::sample_dir("mlp") + "/device.cu"), "device.cu");
  REQUIRE(ds);
  const DeviceFunction* a = ds->find("tvmgen_default_fused_nn_log_softmax_kernel");
  REQUIRE(a != nullptr);
  REQUIRE(a->params.size() == 2);
  CHECK(a->params[0].name == "T_softmax_maxelem");
  CHECK(a->params[0].access == Access::Write);
  CHECK(a->params[1].access == Access::Read);
  CHECK(a->launch_bounds == 32);
  const DeviceFunction* b = ds->find("tvmgen_default_fused_nn_log_softmax_kernel_1");
  REQUIRE(b != nullptr);
  REQUIRE(b->params.size() == 3);
  CHECK(b->params[0].access == Access::Read);
  CHECK(b->params[1].access == Access::Write);
  CHECK(b->params[2].access == Access::Read);
  CHECK(b->params[0].type == "float *__restrict");
}

// ---------------------------------------------------------------------------
// One kernel that does not type-check does not sink the others (hand-written).

TEST_CASE("device: a kernel with a type error loses its access set, the others keep theirs", "[device][recovery]") {
  const std::string src =
      "extern \"C\" __global__ void good(float* __restrict__ out, float* __restrict__ in) { out[0] = in[0]; }\n"
      "struct S { int x; };\n"
      "extern \"C\" __global__ void bad(float* __restrict__ out, float* __restrict__ in) {\n"
      "  S s;\n"
      "  out[0] = s + in[0];\n"
      "}\n"
      "__device__ float helper(float* p) { return p[0] * undeclared_thing; }\n"
      "extern \"C\" __global__ void calls_bad(float* __restrict__ out, float* __restrict__ in) { out[0] = helper(in); }\n"
      "extern \"C\" __global__ void after(float* __restrict__ out, float* __restrict__ in) { out[0] += in[1]; }\n"
      "__device__ float unused(float* p) { return p[0] + nope; }\n"
      "int tail_bad = also_nope;\n";
  auto r = analyze_device_source(src, "dir/device.cu");
  REQUIRE(r);
  REQUIRE(r->functions.size() == 4);
  const DeviceFunction* good = r->find("good");
  const DeviceFunction* bad = r->find("bad");
  const DeviceFunction* calls_bad = r->find("calls_bad");
  const DeviceFunction* after = r->find("after");
  CHECK(good->access_error == "");
  CHECK(good->params[0].access == Access::Write);
  CHECK(good->params[1].access == Access::Read);
  CHECK(bad->access_error == "dir/device.cu:5:14: error: invalid operands to binary expression ('S' and 'float')");
  CHECK(bad->params[0].access == Access::Unknown);
  CHECK(bad->params[1].access == Access::Unknown);
  CHECK(calls_bad->access_error ==
        "calls 'helper', which does not type-check: dir/device.cu:7:51: error: use of undeclared identifier "
        "'undeclared_thing'");
  CHECK(calls_bad->params[1].access == Access::Unknown);
  CHECK(after->access_error == "");
  CHECK(after->params[0].access == Access::ReadWrite);
  CHECK(after->params[1].access == Access::Read);
  // Errors no kernel depends on are kept, to be reported.
  REQUIRE(r->other_errors.size() == 2);
  CHECK(r->other_errors[0] == "dir/device.cu:10:51: error: use of undeclared identifier 'nope'");
  CHECK(r->other_errors[1] == "dir/device.cu:11:16: error: use of undeclared identifier 'also_nope'");
  // --strict-device: the first error fails the whole file.
  auto strict = analyze_device_source(src, "dir/device.cu", true);
  REQUIRE_FALSE(strict);
  CHECK(strict.error().message == "dir/device.cu:5:14: error: invalid operands to binary expression ('S' and 'float')");
}

TEST_CASE("device: error recovery is bounded: too many errors, or a fatal one, fail the file", "[device][recovery]") {
  std::string many = "extern \"C\" __global__ void k(float* p) {\n";
  for (int i = 0; i < 200; ++i) many += "  p[0] = undeclared_" + std::to_string(i) + ";\n";
  many += "}\n";
  auto r = analyze_device_source(many, "device.cu");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::DataError);
  CHECK(r.error().message.rfind("device.cu:2:10: error: use of undeclared identifier 'undeclared_0'", 0) == 0);
  auto fatal = analyze_device_source("#include <no_such_header.h>\nextern \"C\" __global__ void k(float* p) { p[0] = 1; }\n",
                                     "device.cu");
  REQUIRE_FALSE(fatal);
  CHECK(fatal.error().message.rfind("device.cu:1:10: error: 'no_such_header.h' file not found", 0) == 0);
}

// ---------------------------------------------------------------------------
// The types and intrinsics TVM's CUDA code generator emits (src/target/source/codegen_cuda.cc,
// literal/cuda_half_t.h, cuda_int8_t.h at v0.14.0 and v0.19.0), one hand-written kernel each,
// with the access the analyzer must compute.

TEST_CASE("device types: volatile half stores and loads (TVM's reduction epilogue)", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(half* __restrict__ out, half* __restrict__ in, half* __restrict__ vin, half* __restrict__ vout) {
  __shared__ half red_result[1];
  half red_buf0[1];
  red_buf0[0] = in[threadIdx.x];
  ((volatile half*)red_result)[0] = red_buf0[0];
  __syncthreads();
  out[0] = (half)(((volatile half*)red_result)[0]);
  red_buf0[0] = ((volatile half*)vin)[1];
  ((volatile half*)vout)[0] = red_buf0[0];
}
)";
  CHECK(access(src, "out") == Access::Write);
  CHECK(access(src, "in") == Access::Read);
  CHECK(access(src, "vin") == Access::Read);
  CHECK(access(src, "vout") == Access::Write);
}

TEST_CASE("device types: half conversions, operators and math (hexp, hlog, htanh, hsqrt, __hmax, __hmin)",
          "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(half* __restrict__ out, half* __restrict__ a, half* __restrict__ b, float* __restrict__ f,
                             half* __restrict__ acc) {
  int i = threadIdx.x;
  half x = __float2half_rn(f[i]);
  float y = __half2float(a[i]);
  half m = __hmax(a[i], b[i]);
  half n = __hmin(a[i], x);
  bool gt = a[i] > b[i];
  bool le = a[i] <= b[i];
  out[i] = gt && le ? hexp(m) + hlog(n) * hsqrt(x) - htanh(a[i]) / hrint(__habs(b[i])) : max(m, n);
  out[i + 1] = (half)y;
  acc[i] = acc[i] + a[i];
  acc[i + 1] += b[i];
}
)";
  CHECK(access(src, "out") == Access::Write);
  CHECK(access(src, "a") == Access::Read);
  CHECK(access(src, "b") == Access::Read);
  CHECK(access(src, "f") == Access::Read);
  CHECK(access(src, "acc") == Access::ReadWrite);
}

TEST_CASE("device types: half2 loads, stores and intrinsics, __pack_half2", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(half* __restrict__ out, half* __restrict__ a, half* __restrict__ b, unsigned* __restrict__ packed) {
  int i = threadIdx.x;
  ((half2*)(out + i * 2))[0] = __hadd2(((half2*)(a + i * 2))[0], ((half2*)(b + i * 2))[0]);
  half2 v = *(half2*)(a + 2);
  packed[i] = __pack_half2(v.x, v.y);
}
)";
  CHECK(access(src, "out") == Access::Write);
  CHECK(access(src, "a") == Access::Read);
  CHECK(access(src, "b") == Access::Read);
  CHECK(access(src, "packed") == Access::Write);
}

TEST_CASE("device types: nv_bfloat16 and __nv_bfloat162, volatile included", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(nv_bfloat16* __restrict__ out, nv_bfloat16* __restrict__ a, __nv_bfloat162* __restrict__ p2,
                             nv_bfloat16* __restrict__ vout) {
  int i = threadIdx.x;
  out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) * 2.0f);
  out[i + 1] = max(a[i], a[i + 1]);
  __nv_bfloat162 v = p2[i];
  out[i + 2] = __low2bfloat16(v);
  ((volatile nv_bfloat16*)vout)[0] = a[0];
}
)";
  CHECK(access(src, "out") == Access::Write);
  CHECK(access(src, "a") == Access::Read);
  CHECK(access(src, "p2") == Access::Read);
  CHECK(access(src, "vout") == Access::Write);
}

namespace {
// TVM's int8 preamble (cuda_int8_t.h, v0.14.0 = v0.19.0), verbatim.
const char* kTvmInt8Preamble = R"(
#if defined(__CUDACC_RTC__)
#define __SM_61_INTRINSICS_DECL__ __device__
#else /* !__CUDACC_RTC__ */
#define __SM_61_INTRINSICS_DECL__ static __device__ __inline__
#endif /* __CUDACC_RTC__ */

#ifndef __CUDA_ARCH__
#define __DEF_IF_HOST { }
#else  /* !__CUDA_ARCH__ */
#define __DEF_IF_HOST ;
#endif /* __CUDA_ARCH__ */

__SM_61_INTRINSICS_DECL__ int __dp4a(unsigned int srcA, int srcB, int c) __DEF_IF_HOST
__SM_61_INTRINSICS_DECL__ int __dp4a(int srcA, unsigned int srcB, int c) __DEF_IF_HOST

#undef __DEF_IF_HOST

#if !defined(__CUDACC_RTC__) && defined(__CUDA_ARCH__)
__SM_61_INTRINSICS_DECL__ int __dp4a(unsigned int srcA, int srcB, int c) {
    int ret;
    asm volatile ("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(ret) : "r"(srcA), "r"(srcB), "r"(c));
    return ret;
}

__SM_61_INTRINSICS_DECL__ int __dp4a(int srcA, unsigned int srcB, int c) {
    int ret;
    asm volatile ("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(ret) : "r"(srcA), "r"(srcB), "r"(c));
    return ret;
}
#endif /* !__CUDACC_RTC__ && defined(__CUDA_ARCH__) */

#undef __SM_61_INTRINSICS_DECL__
)";
}  // namespace

TEST_CASE("device types: char4, uchar4 and __dp4a (TVM's int8 preamble)", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + kTvmInt8Preamble + R"(
extern "C" __global__ void k(int* __restrict__ acc, signed char* __restrict__ a, unsigned char* __restrict__ b,
                             char* __restrict__ c4out, int* __restrict__ mixed) {
  int i = threadIdx.x;
  acc[i] = __dp4a(*(int*)(a + i * 4), *(int*)(a + i * 4 + 4), acc[i]);
  mixed[i] = __dp4a(*(unsigned int*)(b + i * 4), *(int*)(a + i * 4), 0);
  uchar4 u = *(uchar4*)(b + i * 4);
  *(char4*)(c4out + i * 4) = make_char4((signed char)u.x, (signed char)u.y, (signed char)u.z, (signed char)u.w);
}
)";
  CHECK(access(src, "acc") == Access::ReadWrite);
  CHECK(access(src, "a") == Access::Read);
  CHECK(access(src, "b") == Access::Read);
  CHECK(access(src, "c4out") == Access::Write);
  CHECK(access(src, "mixed") == Access::Write);
}

TEST_CASE("device types: reinterpreting vector loads and stores (float2/4, uint1/2/4, int4, ulonglong4)", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(half* __restrict__ T_cast, float* __restrict__ p0, float* __restrict__ o4,
                             float* __restrict__ i4, int* __restrict__ oi, int* __restrict__ ii, half* __restrict__ h) {
  int i = threadIdx.x;
  uint1 __1;
  float2 v_ = *(float2*)(p0 + (i * 2));
  ((half2*)(&(__1.x)))->x = (half)(v_.x);
  ((half2*)(&(__1.x)))->y = (half)(v_.y);
  *(uint1*)(T_cast + (i * 2)) = __1;
  ((float4*)(o4 + i * 4))[0] = ((float4*)(i4 + i * 4))[0];
  ((int4*)(oi + i * 4))[0] = make_int4(ii[0], ii[1], ii[2], ii[3]);
  ((uint2*)(h + i * 4))[0] = ((uint2*)(h + i * 4 + 1024))[0];
  ((uint4*)(oi + 64))[0] = ((uint4*)(ii + 64))[0];
  // TVM 0.19 stores float32x8 as ulonglong4 and reads its lanes as *(float2*)(&(ul4.x)).
  ulonglong4 f8 = *(ulonglong4*)(i4 + 256);
  o4[512] = ((float2*)(&(f8.x)))->x + ((float2*)(&(f8.w)))->y;
}
)";
  CHECK(access(src, "T_cast") == Access::Write);
  CHECK(access(src, "p0") == Access::Read);
  CHECK(access(src, "o4") == Access::Write);
  CHECK(access(src, "i4") == Access::Read);
  CHECK(access(src, "oi") == Access::Write);
  CHECK(access(src, "ii") == Access::Read);
  CHECK(access(src, "h") == Access::ReadWrite);
}

TEST_CASE("device types: __ldg on scalars, vectors and half", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(float* __restrict__ out, float* __restrict__ a, float* __restrict__ b, half* __restrict__ h) {
  int i = threadIdx.x;
  float4 v = __ldg((const float4*)(b + i * 4));
  out[i] = __ldg(a + i) + v.x + __half2float(__ldg(h + i));
}
)";
  CHECK(access(src, "out") == Access::Write);
  CHECK(access(src, "a") == Access::Read);
  CHECK(access(src, "b") == Access::Read);
  CHECK(access(src, "h") == Access::Read);
}

TEST_CASE("device types: warp shuffles on every type, __activemask", "[device][types]") {
  std::string src = std::string(kTvmPreamble) + R"(
extern "C" __global__ void k(float* __restrict__ f, int* __restrict__ i, half* __restrict__ h, nv_bfloat16* __restrict__ bf,
                             double* __restrict__ d, long long* __restrict__ ll, unsigned* __restrict__ u,
                             half2* __restrict__ h2, float* __restrict__ out) {
  unsigned mask = __activemask();
  float a = __shfl_sync(mask, f[0], 0, 32) + __shfl_down_sync(mask, f[1], 16, 32) + __shfl_up_sync(mask, f[2], 1, 32)
            + __shfl_xor_sync(mask, f[3], 1, 32);
  int b = __shfl_down_sync(mask, i[0], 8, 32);
  half c = __shfl_down_sync(mask, h[0], 4, 32);
  nv_bfloat16 e = __shfl_sync(mask, bf[0], 0, 32);
  double g = __shfl_xor_sync(mask, d[0], 2, 32);
  long long l = __shfl_sync(mask, ll[0], 0, 32);
  unsigned v = __shfl_up_sync(mask, u[0], 1, 32);
  half2 w = __shfl_down_sync(mask, h2[0], 1, 32);
  out[0] = a + b + __half2float(c) + __bfloat162float(e) + (float)g + (float)l + (float)v + __low2float(w);
}
)";
  for (const char* p : {"f", "i", "h", "bf", "d", "ll", "u", "h2"}) {
    INFO(p);
    CHECK(access(src, p) == Access::Read);
  }
  CHECK(access(src, "out") == Access::Write);
}

namespace {
// TVM 0.19's fp16 and bf16 preambles (codegen_cuda.cc Finish(), literal/cuda_half_t.h:
// _cuda_half_util, _cuda_bfloat16_util, _cuda_warp_intrinsic_util), verbatim but for the
// software-half #else branch: they define hpow/htanh/htan/hatan/herf for half AND for
// nv_bfloat16, which the stand-in headers must not declare.
const char* kTvm019Preamble = R"tvm(#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 530)
#include <cuda_fp16.h>
__device__ half max(half a, half b)
{
  return __hgt(__half(a), __half(b)) ? a : b;
}
__device__ half min(half a, half b)
{
  return __hlt(__half(a), __half(b)) ? a : b;
}
#else
#error "software half is not expected: the prelude preprocesses for sm_90"
#endif


// Pack two half values.
static inline __device__ __host__ unsigned
__pack_half2(const half x, const half y) {
  unsigned v0 = *((unsigned short *)&x);
  unsigned v1 = *((unsigned short *)&y);
  return (v1 << 16) | v0;
}

#define CUDA_UNSUPPORTED_HALF_MATH_BINARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x, half y) {   \
  float tmp_x = __half2float(x);                                          \
  float tmp_y = __half2float(y);                                          \
  float result = FP32_MATH_NAME(tmp_x, tmp_y);                            \
  return __float2half(result);                                            \
}

#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x) {          \
  float tmp_x = __half2float(x);                                         \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2half(result);                                           \
}

// Some fp16 math functions are not supported in cuda_fp16.h,
// so we define them here to make sure the generated CUDA code
// is valid.
#if defined(__CUDA_ARCH__)
#if (__CUDA_ARCH__ >= 530)
CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hatan, atanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(herf, erf)
#else
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hexp, exp)
#endif
#endif

#undef CUDA_UNSUPPORTED_HALF_MATH_BINARY
#undef CUDA_UNSUPPORTED_HALF_MATH_UNARY

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
#include <cuda_bf16.h>
__device__ nv_bfloat16 max(nv_bfloat16 a, nv_bfloat16 b)
{
  return __hgt(a, b) ? a : b;
}
__device__ nv_bfloat16 min(nv_bfloat16 a, nv_bfloat16 b)
{
  return __hlt(a, b) ? a : b;
}
#endif


// Pack two bfloat16 values.
static inline __device__ __host__ unsigned
__pack_nv_bfloat162(const nv_bfloat16 x, const nv_bfloat16 y) {
  unsigned v0 = *((unsigned short *)&x);
  unsigned v1 = *((unsigned short *)&y);
  return (v1 << 16) | v0;
}

// Some bfp16 math functions are not supported in cuda_bfp16.h,
// so we define them here to make sure the generated CUDA code
// is valid.
#define CUDA_UNSUPPORTED_HALF_MATH_BINARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ nv_bfloat16 HALF_MATH_NAME(nv_bfloat16 x, nv_bfloat16 y) {   \
  float tmp_x = __bfloat162float(x);                                      \
  float tmp_y = __bfloat162float(y);                                      \
  float result = FP32_MATH_NAME(tmp_x, tmp_y);                            \
  return __float2bfloat16(result);                                        \
}

#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ nv_bfloat16 HALF_MATH_NAME(nv_bfloat16 x) {          \
  float tmp_x = __bfloat162float(x);                                     \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2bfloat16(result);                                       \
}

CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hatan, atanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(herf, erf)

#undef CUDA_UNSUPPORTED_HALF_MATH_BINARY
#undef CUDA_UNSUPPORTED_HALF_MATH_UNARY

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)
#define __shfl_sync(mask, var, lane, width) \
        __shfl((var), (lane), (width))

#define __shfl_down_sync(mask, var, offset, width) \
        __shfl_down((var), (offset), (width))

#define __shfl_up_sync(mask, var, offset, width) \
        __shfl_up((var), (offset), (width))
#endif

)tvm";
}  // namespace

TEST_CASE("device types: TVM 0.19's fp16/bf16 preamble, and the math it defines itself (htanh, hpow, herf)",
          "[device][types]") {
  std::string src = std::string(kTvm019Preamble) + R"(
extern "C" __global__ void k(half* __restrict__ h, nv_bfloat16* __restrict__ b, half* __restrict__ ho,
                             nv_bfloat16* __restrict__ bo, unsigned* __restrict__ packed) {
  int i = threadIdx.x;
  ho[i] = htanh(h[i]) + hpow(h[i], h[i + 1]) + herf(hexp(h[i]));
  bo[i] = htanh(b[i]) + hpow(b[i], b[i + 1]) + hatan(max(b[i], b[i + 2]));
  packed[i] = __pack_nv_bfloat162(b[i], b[i + 1]) ^ __pack_half2(h[i], h[i + 1]);
  ((volatile half*)ho)[i + 1] = h[0];
}
)";
  CHECK(access(src, "h") == Access::Read);
  CHECK(access(src, "b") == Access::Read);
  CHECK(access(src, "ho") == Access::Write);
  CHECK(access(src, "bo") == Access::Write);
  CHECK(access(src, "packed") == Access::Write);
}

// Hand-written: an `&&` chain 5,000 deep in a kernel; the access walk stops at its nesting
// limit and the kernel gets the conservative summary (read and write) instead of a crash.
TEST_CASE("device: a condition nested thousands deep is analyzed conservatively, not a crash", "[device][limits]") {
  std::string c = "((int)threadIdx.x) < 1";
  for (int i = 0; i < 5000; ++i) c += " && ((int)threadIdx.x) < 1";
  auto r = analyze_device_source("extern \"C\" __global__ void k(float* __restrict__ out, float* __restrict__ in) {\n"
                                 "  if (" + c + ") out[threadIdx.x] = in[threadIdx.x];\n}\n",
                                 "t.cu", /*strict=*/true);
  REQUIRE(r);
  REQUIRE(r->functions.size() == 1);
  CHECK(r->functions[0].params[0].access == Access::ReadWrite);
  CHECK(r->functions[0].params[1].access == Access::ReadWrite);
}

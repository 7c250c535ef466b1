// device_headers.cpp — the in-memory headers behind device.cu parsing (see device_headers.h).
//
// kdflow_cuda_prelude.h is force-included: it does what nvcc's implicit cuda_runtime.h
// and clang's __clang_cuda_runtime_wrapper.h do (execution-space keywords as clang's
// CUDA attributes, threadIdx/blockIdx/blockDim/gridDim, vector types, the device
// functions and intrinsics TVM's CUDA code generator emits). The other files stand in
// for the headers TVM's generated source includes (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h,
// mma.h, sm_61_intrinsics.h, math_constants.h) and a few C headers. Declarations only:
// nothing is compiled, so no body is needed.
//
// What a stand-in function does through a pointer (or reference) parameter is part of
// its declaration, for device_analyzer.cpp: KDFLOW_WRITES / KDFLOW_READS /
// KDFLOW_READWRITES annotate a parameter, KDFLOW_THIS_WRITES a member function's object;
// an unannotated pointer or reference to const is only read, any other one is read and
// written (atomics, for instance).
#include "device_headers.h"

#include "c_stdint_text.h"

namespace kdflow::detail {

namespace {
const char* k_prelude_h = R"kdflow_stub(// kdflow_cuda_prelude.h: force-included before every device.cu. Stands in for what nvcc
// (and clang's CUDA runtime wrapper) make visible without an #include: the execution
// space keywords, the built-in variables, the vector types and the device functions and
// intrinsics TVM's CUDA code generator emits. Declarations only.
// Accesses annotated for kdflow: a pointer parameter marked KDFLOW_WRITES / KDFLOW_READS
// says what the function does through it; unmarked pointers to const are read, other
// unmarked pointers read and written (see device_analyzer.cpp).
#pragma once

// clang 15 parses for sm_80 at most among the archs TVM targets today (it refuses
// sm_89/sm_90). The source is preprocessed as for sm_90 so that every `__CUDA_ARCH__ >= N`
// feature block TVM emits (fp16 530, int8 610, bf16 800, fp8 890) is seen and the pre-Volta
// shuffle fallbacks (`< 700`) are not; the declarations below do not depend on the arch.
#undef __CUDA_ARCH__
#define __CUDA_ARCH__ 900
#define __CUDACC__ 1
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 0

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __device_builtin__
#define __grid_constant__ __attribute__((grid_constant))
#define __cudart_builtin__
#define CUDART_CB

#define KDFLOW_READS __attribute__((annotate("kdflow:read")))
#define KDFLOW_WRITES __attribute__((annotate("kdflow:write")))
#define KDFLOW_READWRITES __attribute__((annotate("kdflow:readwrite")))
#define KDFLOW_THIS_WRITES __attribute__((annotate("kdflow:this:write")))
#define KDFLOW_THIS_READWRITES __attribute__((annotate("kdflow:this:readwrite")))

// --- C library types (LP64, as glibc's stdint.h/stddef.h on x86_64 and aarch64)
typedef decltype(sizeof(0)) size_t;
typedef decltype((int*)0 - (int*)0) ptrdiff_t;
)kdflow_stub" KDFLOW_STDINT_TYPES_TEXT R"kdflow_stub(typedef signed char __int8_t;
typedef unsigned char __uint8_t;
typedef short __int16_t;
typedef unsigned short __uint16_t;
typedef int __int32_t;
typedef unsigned int __uint32_t;
typedef long __int64_t;
typedef unsigned long __uint64_t;
#ifndef NULL
#define NULL __null
#endif
)kdflow_stub" KDFLOW_STDINT_LIMITS_TEXT R"kdflow_stub(#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
#define HUGE_VALF (__builtin_huge_valf())
#define HUGE_VAL (__builtin_huge_val())
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308

// --- vector_types.h
#define KDFLOW_VEC1(T, E) struct __device_builtin__ T##1 { E x; }
#define KDFLOW_VEC2(T, E, A) struct __device_builtin__ __align__(A) T##2 { E x, y; }
#define KDFLOW_VEC3(T, E) struct __device_builtin__ T##3 { E x, y, z; }
#define KDFLOW_VEC4(T, E, A) struct __device_builtin__ __align__(A) T##4 { E x, y, z, w; }
#define KDFLOW_VECS(T, E, A2, A4) \
  KDFLOW_VEC1(T, E); KDFLOW_VEC2(T, E, A2); KDFLOW_VEC3(T, E); KDFLOW_VEC4(T, E, A4); \
  typedef struct T##1 T##1; typedef struct T##2 T##2; typedef struct T##3 T##3; typedef struct T##4 T##4; \
  __host__ __device__ T##1 make_##T##1(E x); \
  __host__ __device__ T##2 make_##T##2(E x, E y); \
  __host__ __device__ T##3 make_##T##3(E x, E y, E z); \
  __host__ __device__ T##4 make_##T##4(E x, E y, E z, E w)
KDFLOW_VECS(char, signed char, 2, 4);
KDFLOW_VECS(uchar, unsigned char, 2, 4);
KDFLOW_VECS(short, short, 4, 8);
KDFLOW_VECS(ushort, unsigned short, 4, 8);
KDFLOW_VECS(int, int, 8, 16);
KDFLOW_VECS(uint, unsigned int, 8, 16);
KDFLOW_VECS(long, long, 16, 16);
KDFLOW_VECS(ulong, unsigned long, 16, 16);
KDFLOW_VECS(longlong, long long, 16, 16);
KDFLOW_VECS(ulonglong, unsigned long long, 16, 16);
KDFLOW_VECS(float, float, 8, 16);
KDFLOW_VECS(double, double, 16, 16);
#undef KDFLOW_VEC1
#undef KDFLOW_VEC2
#undef KDFLOW_VEC3
#undef KDFLOW_VEC4
#undef KDFLOW_VECS

struct __device_builtin__ dim3 {
  unsigned int x, y, z;
  __host__ __device__ constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  __host__ __device__ constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  __host__ __device__ constexpr operator uint3() const { return uint3{x, y, z}; }
};
typedef struct dim3 dim3;

// --- the built-in variables (clang: __clang_cuda_builtin_vars.h; nvcc: uint3/dim3 objects)
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
extern const __device__ int warpSize;

// --- synchronization, warp and special registers
extern "C" {
__device__ void __syncthreads(void);
__device__ int __syncthreads_count(int predicate);
__device__ int __syncthreads_and(int predicate);
__device__ int __syncthreads_or(int predicate);
__device__ void __syncwarp(unsigned int mask = 0xffffffffu);
__device__ void __threadfence(void);
__device__ void __threadfence_block(void);
__device__ void __threadfence_system(void);
__device__ unsigned int __activemask(void);
__device__ int __all_sync(unsigned int mask, int predicate);
__device__ int __any_sync(unsigned int mask, int predicate);
__device__ int __uni_sync(unsigned int mask, int predicate);
__device__ unsigned int __ballot_sync(unsigned int mask, int predicate);
__device__ int __all(int predicate);
__device__ int __any(int predicate);
__device__ unsigned int __ballot(int predicate);
__device__ unsigned int __lanemask_lt(void);
__device__ unsigned int __lanemask_le(void);
__device__ unsigned int __lanemask_eq(void);
__device__ unsigned int __lanemask_gt(void);
__device__ unsigned int __lanemask_ge(void);
__device__ long long clock64(void);
__device__ long clock(void);
__device__ unsigned long long __globaltimer(void);
__device__ void __nanosleep(unsigned int ns);
__device__ void __trap(void);
__device__ void __brkpt(void);
__device__ void __prof_trigger(int counter);
__device__ int printf(const char* format, ...);
__device__ void* malloc(size_t size);
__device__ void free(void* ptr);
__device__ void* memcpy(void* KDFLOW_WRITES dst, const void* src, size_t n);
__device__ void* memset(void* KDFLOW_WRITES dst, int value, size_t n);
__device__ void __assertfail(const char* message, const char* file, unsigned int line, const char* function,
                             size_t char_size);
__device__ void __assert_fail(const char* assertion, const char* file, unsigned int line, const char* function);
__device__ size_t __cvta_generic_to_shared(const void* ptr);
__device__ size_t __cvta_generic_to_global(const void* ptr);
__device__ void* __cvta_shared_to_generic(size_t address);
__device__ void* __cvta_global_to_generic(size_t address);
__device__ unsigned int __isShared(const void* ptr);
__device__ unsigned int __isGlobal(const void* ptr);
}

#define KDFLOW_SHFL(T)                                                                          \
  __device__ T __shfl_sync(unsigned int mask, T var, int src_lane, int width = 32);            \
  __device__ T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = 32);   \
  __device__ T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32); \
  __device__ T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = 32);       \
  __device__ T __shfl(T var, int src_lane, int width = 32);                                    \
  __device__ T __shfl_up(T var, unsigned int delta, int width = 32);                           \
  __device__ T __shfl_down(T var, unsigned int delta, int width = 32);                         \
  __device__ T __shfl_xor(T var, int lane_mask, int width = 32)
KDFLOW_SHFL(int);
KDFLOW_SHFL(unsigned int);
KDFLOW_SHFL(long);
KDFLOW_SHFL(unsigned long);
KDFLOW_SHFL(long long);
KDFLOW_SHFL(unsigned long long);
KDFLOW_SHFL(float);
KDFLOW_SHFL(double);
#undef KDFLOW_SHFL

#define KDFLOW_REDUX(T)                                      \
  __device__ T __reduce_add_sync(unsigned int mask, T value); \
  __device__ T __reduce_min_sync(unsigned int mask, T value); \
  __device__ T __reduce_max_sync(unsigned int mask, T value)
KDFLOW_REDUX(int);
KDFLOW_REDUX(unsigned int);
#undef KDFLOW_REDUX
__device__ unsigned int __reduce_and_sync(unsigned int mask, unsigned int value);
__device__ unsigned int __reduce_or_sync(unsigned int mask, unsigned int value);
__device__ unsigned int __reduce_xor_sync(unsigned int mask, unsigned int value);
#define KDFLOW_MATCH(T)                                        \
  __device__ unsigned int __match_any_sync(unsigned int mask, T value); \
  __device__ unsigned int __match_all_sync(unsigned int mask, T value, int* KDFLOW_WRITES pred)
KDFLOW_MATCH(int);
KDFLOW_MATCH(unsigned int);
KDFLOW_MATCH(long);
KDFLOW_MATCH(unsigned long);
KDFLOW_MATCH(long long);
KDFLOW_MATCH(unsigned long long);
KDFLOW_MATCH(float);
KDFLOW_MATCH(double);
#undef KDFLOW_MATCH

// --- atomics (read and write the addressed word: unannotated non-const pointers)
#define KDFLOW_ATOMIC_ARITH(T)                      \
  __device__ T atomicAdd(T* address, T val);        \
  __device__ T atomicAdd_block(T* address, T val);  \
  __device__ T atomicAdd_system(T* address, T val); \
  __device__ T atomicExch(T* address, T val);       \
  __device__ T atomicExch_block(T* address, T val); \
  __device__ T atomicExch_system(T* address, T val)
#define KDFLOW_ATOMIC_INT(T)                                    \
  KDFLOW_ATOMIC_ARITH(T);                                       \
  __device__ T atomicSub(T* address, T val);                    \
  __device__ T atomicMin(T* address, T val);                    \
  __device__ T atomicMax(T* address, T val);                    \
  __device__ T atomicAnd(T* address, T val);                    \
  __device__ T atomicOr(T* address, T val);                     \
  __device__ T atomicXor(T* address, T val);                    \
  __device__ T atomicCAS(T* address, T compare, T val);         \
  __device__ T atomicMin_block(T* address, T val);              \
  __device__ T atomicMax_block(T* address, T val);              \
  __device__ T atomicCAS_block(T* address, T compare, T val);   \
  __device__ T atomicCAS_system(T* address, T compare, T val)
KDFLOW_ATOMIC_INT(int);
KDFLOW_ATOMIC_INT(unsigned int);
KDFLOW_ATOMIC_INT(unsigned long long);
KDFLOW_ATOMIC_INT(long long);
KDFLOW_ATOMIC_ARITH(float);
KDFLOW_ATOMIC_ARITH(double);
__device__ unsigned int atomicInc(unsigned int* address, unsigned int val);
__device__ unsigned int atomicDec(unsigned int* address, unsigned int val);
__device__ float2 atomicAdd(float2* address, float2 val);
__device__ float4 atomicAdd(float4* address, float4 val);
#undef KDFLOW_ATOMIC_ARITH
#undef KDFLOW_ATOMIC_INT

// --- cache-hinted loads (read) and stores (write)
#define KDFLOW_LDST(T)                                        \
  __device__ T __ldg(const T* ptr);                           \
  __device__ T __ldcg(const T* ptr);                          \
  __device__ T __ldca(const T* ptr);                          \
  __device__ T __ldcs(const T* ptr);                          \
  __device__ T __ldlu(const T* ptr);                          \
  __device__ T __ldcv(const T* ptr);                          \
  __device__ void __stwb(T* KDFLOW_WRITES ptr, T value);      \
  __device__ void __stcg(T* KDFLOW_WRITES ptr, T value);      \
  __device__ void __stcs(T* KDFLOW_WRITES ptr, T value);      \
  __device__ void __stwt(T* KDFLOW_WRITES ptr, T value)
KDFLOW_LDST(char);
KDFLOW_LDST(signed char);
KDFLOW_LDST(unsigned char);
KDFLOW_LDST(short);
KDFLOW_LDST(unsigned short);
KDFLOW_LDST(int);
KDFLOW_LDST(unsigned int);
KDFLOW_LDST(long);
KDFLOW_LDST(unsigned long);
KDFLOW_LDST(long long);
KDFLOW_LDST(unsigned long long);
KDFLOW_LDST(float);
KDFLOW_LDST(double);
KDFLOW_LDST(char2);
KDFLOW_LDST(char4);
KDFLOW_LDST(uchar2);
KDFLOW_LDST(uchar4);
KDFLOW_LDST(short2);
KDFLOW_LDST(short4);
KDFLOW_LDST(ushort2);
KDFLOW_LDST(ushort4);
KDFLOW_LDST(int2);
KDFLOW_LDST(int4);
KDFLOW_LDST(uint2);
KDFLOW_LDST(uint4);
KDFLOW_LDST(longlong2);
KDFLOW_LDST(ulonglong2);
KDFLOW_LDST(float2);
KDFLOW_LDST(float4);
KDFLOW_LDST(double2);
#undef KDFLOW_LDST

// --- integer intrinsics
extern "C" {
__device__ int __popc(unsigned int x);
__device__ int __popcll(unsigned long long x);
__device__ int __clz(int x);
__device__ int __clzll(long long x);
__device__ int __ffs(int x);
__device__ int __ffsll(long long x);
__device__ unsigned int __brev(unsigned int x);
__device__ unsigned long long __brevll(unsigned long long x);
__device__ unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s);
__device__ unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift);
__device__ unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift);
__device__ unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift);
__device__ unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift);
__device__ int __mul24(int x, int y);
__device__ unsigned int __umul24(unsigned int x, unsigned int y);
__device__ int __mulhi(int x, int y);
__device__ unsigned int __umulhi(unsigned int x, unsigned int y);
__device__ long long __mul64hi(long long x, long long y);
__device__ unsigned long long __umul64hi(unsigned long long x, unsigned long long y);
__device__ unsigned int __sad(int x, int y, unsigned int z);
__device__ unsigned int __usad(unsigned int x, unsigned int y, unsigned int z);
__device__ int __hadd(int x, int y);
__device__ int __rhadd(int x, int y);
__device__ unsigned int __uhadd(unsigned int x, unsigned int y);
__device__ unsigned int __urhadd(unsigned int x, unsigned int y);
__device__ int __dp4a(int srcA, int srcB, int c);
__device__ unsigned int __dp4a(unsigned int srcA, unsigned int srcB, unsigned int c);
__device__ int __dp2a_lo(int srcA, int srcB, int c);
__device__ int __dp2a_hi(int srcA, int srcB, int c);
__device__ unsigned int __vabsdiffu4(unsigned int a, unsigned int b);
__device__ unsigned int __vadd4(unsigned int a, unsigned int b);
__device__ unsigned int __vmaxs4(unsigned int a, unsigned int b);
__device__ unsigned int __vmins4(unsigned int a, unsigned int b);
}

// --- type conversions and reinterpretations
extern "C" {
__device__ int __float_as_int(float x);
__device__ float __int_as_float(int x);
__device__ unsigned int __float_as_uint(float x);
__device__ float __uint_as_float(unsigned int x);
__device__ long long __double_as_longlong(double x);
__device__ double __longlong_as_double(long long x);
__device__ int __double2hiint(double x);
__device__ int __double2loint(double x);
__device__ double __hiloint2double(int hi, int lo);
#define KDFLOW_CVT_ROUNDINGS(NAME, TO, FROM) \
  __device__ TO NAME##_rn(FROM x);           \
  __device__ TO NAME##_rz(FROM x);           \
  __device__ TO NAME##_ru(FROM x);           \
  __device__ TO NAME##_rd(FROM x)
KDFLOW_CVT_ROUNDINGS(__float2int, int, float);
KDFLOW_CVT_ROUNDINGS(__float2uint, unsigned int, float);
KDFLOW_CVT_ROUNDINGS(__float2ll, long long, float);
KDFLOW_CVT_ROUNDINGS(__float2ull, unsigned long long, float);
KDFLOW_CVT_ROUNDINGS(__double2int, int, double);
KDFLOW_CVT_ROUNDINGS(__double2uint, unsigned int, double);
KDFLOW_CVT_ROUNDINGS(__double2ll, long long, double);
KDFLOW_CVT_ROUNDINGS(__double2ull, unsigned long long, double);
KDFLOW_CVT_ROUNDINGS(__double2float, float, double);
KDFLOW_CVT_ROUNDINGS(__int2float, float, int);
KDFLOW_CVT_ROUNDINGS(__uint2float, float, unsigned int);
KDFLOW_CVT_ROUNDINGS(__ll2float, float, long long);
KDFLOW_CVT_ROUNDINGS(__ull2float, float, unsigned long long);
KDFLOW_CVT_ROUNDINGS(__ll2double, double, long long);
KDFLOW_CVT_ROUNDINGS(__ull2double, double, unsigned long long);
#undef KDFLOW_CVT_ROUNDINGS
__device__ double __int2double_rn(int x);
__device__ double __uint2double_rn(unsigned int x);
__device__ int __float2int(float x);
}

// --- single-precision intrinsics
extern "C" {
__device__ float __expf(float x);
__device__ float __exp10f(float x);
__device__ float __logf(float x);
__device__ float __log2f(float x);
__device__ float __log10f(float x);
__device__ float __sinf(float x);
__device__ float __cosf(float x);
__device__ float __tanf(float x);
__device__ void __sincosf(float x, float* KDFLOW_WRITES sptr, float* KDFLOW_WRITES cptr);
__device__ float __powf(float x, float y);
__device__ float __fdividef(float x, float y);
__device__ float __saturatef(float x);
__device__ float __frcp_rn(float x);
__device__ float __frcp_rz(float x);
__device__ float __frcp_ru(float x);
__device__ float __frcp_rd(float x);
__device__ float __fsqrt_rn(float x);
__device__ float __fsqrt_rz(float x);
__device__ float __fsqrt_ru(float x);
__device__ float __fsqrt_rd(float x);
__device__ float __frsqrt_rn(float x);
__device__ double __drcp_rn(double x);
__device__ double __dsqrt_rn(double x);
#define KDFLOW_F2_ROUNDINGS(NAME, T) \
  __device__ T NAME##_rn(T x, T y);  \
  __device__ T NAME##_rz(T x, T y);  \
  __device__ T NAME##_ru(T x, T y);  \
  __device__ T NAME##_rd(T x, T y)
KDFLOW_F2_ROUNDINGS(__fadd, float);
KDFLOW_F2_ROUNDINGS(__fsub, float);
KDFLOW_F2_ROUNDINGS(__fmul, float);
KDFLOW_F2_ROUNDINGS(__fdiv, float);
KDFLOW_F2_ROUNDINGS(__dadd, double);
KDFLOW_F2_ROUNDINGS(__dsub, double);
KDFLOW_F2_ROUNDINGS(__dmul, double);
KDFLOW_F2_ROUNDINGS(__ddiv, double);
#undef KDFLOW_F2_ROUNDINGS
__device__ float __fmaf_rn(float x, float y, float z);
__device__ float __fmaf_rz(float x, float y, float z);
__device__ float __fmaf_ru(float x, float y, float z);
__device__ float __fmaf_rd(float x, float y, float z);
__device__ double __fma_rn(double x, double y, double z);
}

// --- math library: C names (double and `f` float versions) plus C++ overloads, as
// nvcc's math_functions.h and <cmath> provide them.
template <bool B, class T> struct __kdflow_enable_if {};
template <class T> struct __kdflow_enable_if<true, T> { typedef T type; };
#define KDFLOW_INTEGRAL(T, R) typename __kdflow_enable_if<__is_integral(T), R>::type
#define KDFLOW_ARITH2(A, B, R) \
  typename __kdflow_enable_if<__is_arithmetic(A) && __is_arithmetic(B), R>::type
#define KDFLOW_MATH1(NAME)                    \
  extern "C" __device__ double NAME(double x); \
  extern "C" __device__ float NAME##f(float x); \
  __device__ float NAME(float x);               \
  template <class T> __device__ KDFLOW_INTEGRAL(T, double) NAME(T x)
#define KDFLOW_MATH2(NAME)                              \
  extern "C" __device__ double NAME(double x, double y); \
  extern "C" __device__ float NAME##f(float x, float y); \
  __device__ float NAME(float x, float y);               \
  template <class A, class B> __device__ KDFLOW_ARITH2(A, B, double) NAME(A x, B y)
#define KDFLOW_MATH3(NAME)                                        \
  extern "C" __device__ double NAME(double x, double y, double z); \
  extern "C" __device__ float NAME##f(float x, float y, float z);  \
  __device__ float NAME(float x, float y, float z)
KDFLOW_MATH1(acos); KDFLOW_MATH1(acosh); KDFLOW_MATH1(asin); KDFLOW_MATH1(asinh);
KDFLOW_MATH1(atan); KDFLOW_MATH1(atanh); KDFLOW_MATH1(cbrt); KDFLOW_MATH1(ceil);
KDFLOW_MATH1(cos); KDFLOW_MATH1(cosh); KDFLOW_MATH1(cospi); KDFLOW_MATH1(erf);
KDFLOW_MATH1(erfc); KDFLOW_MATH1(erfcinv); KDFLOW_MATH1(erfcx); KDFLOW_MATH1(erfinv);
KDFLOW_MATH1(exp); KDFLOW_MATH1(exp10); KDFLOW_MATH1(exp2); KDFLOW_MATH1(expm1);
KDFLOW_MATH1(fabs); KDFLOW_MATH1(floor); KDFLOW_MATH1(j0); KDFLOW_MATH1(j1);
KDFLOW_MATH1(lgamma); KDFLOW_MATH1(log); KDFLOW_MATH1(log10); KDFLOW_MATH1(log1p);
KDFLOW_MATH1(log2); KDFLOW_MATH1(logb); KDFLOW_MATH1(nearbyint); KDFLOW_MATH1(normcdf);
KDFLOW_MATH1(normcdfinv); KDFLOW_MATH1(rcbrt); KDFLOW_MATH1(rint); KDFLOW_MATH1(round);
KDFLOW_MATH1(rsqrt); KDFLOW_MATH1(sin); KDFLOW_MATH1(sinh); KDFLOW_MATH1(sinpi);
KDFLOW_MATH1(sqrt); KDFLOW_MATH1(tan); KDFLOW_MATH1(tanh); KDFLOW_MATH1(tgamma);
KDFLOW_MATH1(trunc); KDFLOW_MATH1(y0); KDFLOW_MATH1(y1); KDFLOW_MATH1(cyl_bessel_i0);
KDFLOW_MATH1(cyl_bessel_i1);
KDFLOW_MATH2(atan2); KDFLOW_MATH2(copysign); KDFLOW_MATH2(fdim); KDFLOW_MATH2(fmax);
KDFLOW_MATH2(fmin); KDFLOW_MATH2(fmod); KDFLOW_MATH2(hypot); KDFLOW_MATH2(nextafter);
KDFLOW_MATH2(pow); KDFLOW_MATH2(remainder); KDFLOW_MATH2(rhypot);
KDFLOW_MATH3(fma); KDFLOW_MATH3(norm3d); KDFLOW_MATH3(rnorm3d);
#undef KDFLOW_MATH1
#undef KDFLOW_MATH2
#undef KDFLOW_MATH3
extern "C" __device__ float fdividef(float x, float y);
extern "C" __device__ double ldexp(double x, int e);
extern "C" __device__ float ldexpf(float x, int e);
__device__ float ldexp(float x, int e);
extern "C" __device__ double scalbn(double x, int n);
extern "C" __device__ float scalbnf(float x, int n);
extern "C" __device__ double frexp(double x, int* KDFLOW_WRITES e);
extern "C" __device__ float frexpf(float x, int* KDFLOW_WRITES e);
extern "C" __device__ double modf(double x, double* KDFLOW_WRITES i);
extern "C" __device__ float modff(float x, float* KDFLOW_WRITES i);
extern "C" __device__ double remquo(double x, double y, int* KDFLOW_WRITES q);
extern "C" __device__ float remquof(float x, float y, int* KDFLOW_WRITES q);
extern "C" __device__ void sincos(double x, double* KDFLOW_WRITES s, double* KDFLOW_WRITES c);
extern "C" __device__ void sincosf(float x, float* KDFLOW_WRITES s, float* KDFLOW_WRITES c);
extern "C" __device__ void sincospi(double x, double* KDFLOW_WRITES s, double* KDFLOW_WRITES c);
extern "C" __device__ void sincospif(float x, float* KDFLOW_WRITES s, float* KDFLOW_WRITES c);
extern "C" __device__ double jn(int n, double x);
extern "C" __device__ float jnf(int n, float x);
extern "C" __device__ double yn(int n, double x);
extern "C" __device__ float ynf(int n, float x);
extern "C" __device__ double nan(const char* tag);
extern "C" __device__ float nanf(const char* tag);
extern "C" __device__ int ilogb(double x);
extern "C" __device__ int ilogbf(float x);
extern "C" __device__ long lrint(double x);
extern "C" __device__ long lrintf(float x);
extern "C" __device__ long lround(double x);
extern "C" __device__ long lroundf(float x);
extern "C" __device__ long long llrint(double x);
extern "C" __device__ long long llrintf(float x);
extern "C" __device__ long long llround(double x);
extern "C" __device__ long long llroundf(float x);
__device__ bool isnan(float x);
__device__ bool isnan(double x);
__device__ bool isinf(float x);
__device__ bool isinf(double x);
__device__ bool isfinite(float x);
__device__ bool isfinite(double x);
__device__ bool signbit(float x);
__device__ bool signbit(double x);
template <class T> __device__ KDFLOW_INTEGRAL(T, bool) isnan(T x);
template <class T> __device__ KDFLOW_INTEGRAL(T, bool) isinf(T x);
template <class T> __device__ KDFLOW_INTEGRAL(T, bool) isfinite(T x);
extern "C" __device__ int __isnanf(float x);
extern "C" __device__ int __isinff(float x);
extern "C" __device__ int __finitef(float x);
extern "C" __device__ int __isnan(double x);
extern "C" __device__ int __isinf(double x);
extern "C" __device__ int __finite(double x);
extern "C" __device__ int abs(int x);
extern "C" __device__ long labs(long x);
extern "C" __device__ long long llabs(long long x);
__device__ long abs(long x);
__device__ long long abs(long long x);
__device__ float abs(float x);
__device__ double abs(double x);
#undef KDFLOW_INTEGRAL
#undef KDFLOW_ARITH2

// min/max as CUDA's math_functions.hpp overloads them.
#define KDFLOW_MINMAX(R, A, B) __device__ R min(A a, B b); __device__ R max(A a, B b)
KDFLOW_MINMAX(int, int, int);
KDFLOW_MINMAX(unsigned int, unsigned int, unsigned int);
KDFLOW_MINMAX(unsigned int, int, unsigned int);
KDFLOW_MINMAX(unsigned int, unsigned int, int);
KDFLOW_MINMAX(long, long, long);
KDFLOW_MINMAX(unsigned long, unsigned long, unsigned long);
KDFLOW_MINMAX(unsigned long, long, unsigned long);
KDFLOW_MINMAX(unsigned long, unsigned long, long);
KDFLOW_MINMAX(long long, long long, long long);
KDFLOW_MINMAX(unsigned long long, unsigned long long, unsigned long long);
KDFLOW_MINMAX(unsigned long long, long long, unsigned long long);
KDFLOW_MINMAX(unsigned long long, unsigned long long, long long);
KDFLOW_MINMAX(float, float, float);
KDFLOW_MINMAX(double, double, double);
KDFLOW_MINMAX(double, float, double);
KDFLOW_MINMAX(double, double, float);
#undef KDFLOW_MINMAX
extern "C" {
__device__ unsigned int umin(unsigned int a, unsigned int b);
__device__ unsigned int umax(unsigned int a, unsigned int b);
__device__ long long llmin(long long a, long long b);
__device__ long long llmax(long long a, long long b);
__device__ unsigned long long ullmin(unsigned long long a, unsigned long long b);
__device__ unsigned long long ullmax(unsigned long long a, unsigned long long b);
}
)kdflow_stub";
const char* k_cuda_fp16_h = R"kdflow_stub(// cuda_fp16.h stand-in: __half/__half2 with the constructors, conversions and operators
// cuda_fp16.hpp gives nvcc code (CUDA 11-12), and the half intrinsics. Declarations only.
#pragma once

#define KDFLOW_HALF_LIKE(H, RAW)                                                     \
  struct RAW { unsigned short x; };                                                  \
  struct __align__(2) H {                                                            \
   protected:                                                                        \
    unsigned short __x;                                                              \
   public:                                                                           \
    H() = default;                                                                   \
    __host__ __device__ H(const RAW& hr);                                            \
    __host__ __device__ H& operator=(const RAW& hr) KDFLOW_THIS_WRITES;              \
    __host__ __device__ operator RAW() const;                                        \
    __host__ __device__ volatile H& operator=(const RAW& hr) volatile KDFLOW_THIS_WRITES;          \
    __host__ __device__ volatile H& operator=(const volatile RAW& hr) volatile KDFLOW_THIS_WRITES; \
    __host__ __device__ operator RAW() const volatile;                               \
    __host__ __device__ H(float f);                                                  \
    __host__ __device__ H(double f);                                                 \
    __host__ __device__ operator float() const;                                      \
    __host__ __device__ H& operator=(float f) KDFLOW_THIS_WRITES;                    \
    __host__ __device__ H& operator=(double f) KDFLOW_THIS_WRITES;                   \
    __host__ __device__ H(short val);                                                \
    __host__ __device__ H(unsigned short val);                                       \
    __host__ __device__ H(int val);                                                  \
    __host__ __device__ H(unsigned int val);                                         \
    __host__ __device__ H(long long val);                                            \
    __host__ __device__ H(unsigned long long val);                                   \
    __host__ __device__ operator short() const;                                      \
    __host__ __device__ operator unsigned short() const;                             \
    __host__ __device__ operator int() const;                                        \
    __host__ __device__ operator unsigned int() const;                               \
    __host__ __device__ operator long long() const;                                  \
    __host__ __device__ operator unsigned long long() const;                         \
    __host__ __device__ H& operator=(short val) KDFLOW_THIS_WRITES;                  \
    __host__ __device__ H& operator=(unsigned short val) KDFLOW_THIS_WRITES;         \
    __host__ __device__ H& operator=(int val) KDFLOW_THIS_WRITES;                    \
    __host__ __device__ H& operator=(unsigned int val) KDFLOW_THIS_WRITES;           \
    __host__ __device__ H& operator=(long long val) KDFLOW_THIS_WRITES;              \
    __host__ __device__ H& operator=(unsigned long long val) KDFLOW_THIS_WRITES;     \
    __host__ __device__ operator bool() const;                                       \
  };                                                                                 \
  __device__ H operator+(const H& lh, const H& rh);                                  \
  __device__ H operator-(const H& lh, const H& rh);                                  \
  __device__ H operator*(const H& lh, const H& rh);                                  \
  __device__ H operator/(const H& lh, const H& rh);                                  \
  __device__ H& operator+=(H& lh KDFLOW_READWRITES, const H& rh);                    \
  __device__ H& operator-=(H& lh KDFLOW_READWRITES, const H& rh);                    \
  __device__ H& operator*=(H& lh KDFLOW_READWRITES, const H& rh);                    \
  __device__ H& operator/=(H& lh KDFLOW_READWRITES, const H& rh);                    \
  __device__ H& operator++(H& h);                                                    \
  __device__ H& operator--(H& h);                                                    \
  __device__ H operator++(H& h, int);                                                \
  __device__ H operator--(H& h, int);                                                \
  __device__ H operator+(const H& h);                                                \
  __device__ H operator-(const H& h);                                                \
  __device__ bool operator==(const H& lh, const H& rh);                              \
  __device__ bool operator!=(const H& lh, const H& rh);                              \
  __device__ bool operator>(const H& lh, const H& rh);                               \
  __device__ bool operator<(const H& lh, const H& rh);                               \
  __device__ bool operator>=(const H& lh, const H& rh);                              \
  __device__ bool operator<=(const H& lh, const H& rh)

#define KDFLOW_HALF2_LIKE(H2, H, RAW2)                                               \
  struct RAW2 { unsigned short x; unsigned short y; };                               \
  struct __align__(4) H2 {                                                           \
    H x;                                                                             \
    H y;                                                                             \
    H2() = default;                                                                  \
    __host__ __device__ H2(const H& a, const H& b);                                  \
    __host__ __device__ H2(const RAW2& h2r);                                         \
    __host__ __device__ H2& operator=(const RAW2& h2r) KDFLOW_THIS_WRITES;           \
    __host__ __device__ operator RAW2() const;                                       \
  };                                                                                 \
  __device__ H2 operator+(const H2& lh, const H2& rh);                               \
  __device__ H2 operator-(const H2& lh, const H2& rh);                               \
  __device__ H2 operator*(const H2& lh, const H2& rh);                               \
  __device__ H2 operator/(const H2& lh, const H2& rh);                               \
  __device__ H2& operator+=(H2& lh KDFLOW_READWRITES, const H2& rh);                 \
  __device__ H2& operator-=(H2& lh KDFLOW_READWRITES, const H2& rh);                 \
  __device__ H2& operator*=(H2& lh KDFLOW_READWRITES, const H2& rh);                 \
  __device__ H2& operator/=(H2& lh KDFLOW_READWRITES, const H2& rh);                 \
  __device__ H2 operator+(const H2& h);                                              \
  __device__ H2 operator-(const H2& h);                                              \
  __device__ bool operator==(const H2& lh, const H2& rh);                            \
  __device__ bool operator!=(const H2& lh, const H2& rh)

// Arithmetic, comparison and math intrinsics shared by __half and __nv_bfloat16.
#define KDFLOW_HALF_INTRINSICS(H, H2)                                                \
  __device__ H __hadd(H a, H b);                                                     \
  __device__ H __hsub(H a, H b);                                                     \
  __device__ H __hmul(H a, H b);                                                     \
  __device__ H __hdiv(H a, H b);                                                     \
  __device__ H __hadd_sat(H a, H b);                                                 \
  __device__ H __hsub_sat(H a, H b);                                                 \
  __device__ H __hmul_sat(H a, H b);                                                 \
  __device__ H __hfma(H a, H b, H c);                                                \
  __device__ H __hfma_sat(H a, H b, H c);                                            \
  __device__ H __hfma_relu(H a, H b, H c);                                           \
  __device__ H __hneg(H a);                                                          \
  __device__ H __habs(H a);                                                          \
  __device__ H __hmax(H a, H b);                                                     \
  __device__ H __hmin(H a, H b);                                                     \
  __device__ H __hmax_nan(H a, H b);                                                 \
  __device__ H __hmin_nan(H a, H b);                                                 \
  __device__ bool __heq(H a, H b);                                                   \
  __device__ bool __hne(H a, H b);                                                   \
  __device__ bool __hle(H a, H b);                                                   \
  __device__ bool __hge(H a, H b);                                                   \
  __device__ bool __hlt(H a, H b);                                                   \
  __device__ bool __hgt(H a, H b);                                                   \
  __device__ bool __hequ(H a, H b);                                                  \
  __device__ bool __hneu(H a, H b);                                                  \
  __device__ bool __hleu(H a, H b);                                                  \
  __device__ bool __hgeu(H a, H b);                                                  \
  __device__ bool __hltu(H a, H b);                                                  \
  __device__ bool __hgtu(H a, H b);                                                  \
  __device__ bool __hisnan(H a);                                                     \
  __device__ int __hisinf(H a);                                                      \
  __device__ H hsqrt(H a);                                                           \
  __device__ H hrsqrt(H a);                                                          \
  __device__ H hrcp(H a);                                                            \
  __device__ H hexp(H a);                                                            \
  __device__ H hexp2(H a);                                                           \
  __device__ H hexp10(H a);                                                          \
  __device__ H hlog(H a);                                                            \
  __device__ H hlog2(H a);                                                           \
  __device__ H hlog10(H a);                                                          \
  __device__ H hsin(H a);                                                            \
  __device__ H hcos(H a);                                                            \
  __device__ H hceil(H a);                                                           \
  __device__ H hfloor(H a);                                                          \
  __device__ H htrunc(H a);                                                          \
  __device__ H hrint(H a);                                                           \
  __device__ H2 __hadd2(H2 a, H2 b);                                                 \
  __device__ H2 __hsub2(H2 a, H2 b);                                                 \
  __device__ H2 __hmul2(H2 a, H2 b);                                                 \
  __device__ H2 __h2div(H2 a, H2 b);                                                 \
  __device__ H2 __hfma2(H2 a, H2 b, H2 c);                                           \
  __device__ H2 __hfma2_relu(H2 a, H2 b, H2 c);                                      \
  __device__ H2 __hneg2(H2 a);                                                       \
  __device__ H2 __habs2(H2 a);                                                       \
  __device__ H2 __hmax2(H2 a, H2 b);                                                 \
  __device__ H2 __hmin2(H2 a, H2 b);                                                 \
  __device__ H2 __heq2(H2 a, H2 b);                                                  \
  __device__ H2 __hne2(H2 a, H2 b);                                                  \
  __device__ H2 __hle2(H2 a, H2 b);                                                  \
  __device__ H2 __hge2(H2 a, H2 b);                                                  \
  __device__ H2 __hlt2(H2 a, H2 b);                                                  \
  __device__ H2 __hgt2(H2 a, H2 b);                                                  \
  __device__ bool __hbeq2(H2 a, H2 b);                                               \
  __device__ bool __hbne2(H2 a, H2 b);                                               \
  __device__ bool __hble2(H2 a, H2 b);                                               \
  __device__ bool __hbge2(H2 a, H2 b);                                               \
  __device__ bool __hblt2(H2 a, H2 b);                                               \
  __device__ bool __hbgt2(H2 a, H2 b);                                               \
  __device__ H2 h2sqrt(H2 a);                                                        \
  __device__ H2 h2rsqrt(H2 a);                                                       \
  __device__ H2 h2exp(H2 a);                                                         \
  __device__ H2 h2log(H2 a);                                                         \
  __device__ H2 h2sin(H2 a);                                                         \
  __device__ H2 h2cos(H2 a);                                                         \
  __device__ H2 h2ceil(H2 a);                                                        \
  __device__ H2 h2floor(H2 a);                                                       \
  __device__ H2 h2trunc(H2 a);                                                       \
  __device__ H2 h2rint(H2 a);                                                        \
  __device__ H __shfl_sync(unsigned int mask, H var, int src_lane, int width = 32);  \
  __device__ H __shfl_up_sync(unsigned int mask, H var, unsigned int delta, int width = 32);   \
  __device__ H __shfl_down_sync(unsigned int mask, H var, unsigned int delta, int width = 32); \
  __device__ H __shfl_xor_sync(unsigned int mask, H var, int lane_mask, int width = 32);       \
  __device__ H2 __shfl_sync(unsigned int mask, H2 var, int src_lane, int width = 32);          \
  __device__ H2 __shfl_up_sync(unsigned int mask, H2 var, unsigned int delta, int width = 32); \
  __device__ H2 __shfl_down_sync(unsigned int mask, H2 var, unsigned int delta, int width = 32); \
  __device__ H2 __shfl_xor_sync(unsigned int mask, H2 var, int lane_mask, int width = 32);     \
  __device__ H __shfl(H var, int src_lane, int width = 32);                          \
  __device__ H __shfl_up(H var, unsigned int delta, int width = 32);                 \
  __device__ H __shfl_down(H var, unsigned int delta, int width = 32);               \
  __device__ H __shfl_xor(H var, int lane_mask, int width = 32);                     \
  __device__ H __ldg(const H* ptr);                                                  \
  __device__ H2 __ldg(const H2* ptr);                                                \
  __device__ H __ldcg(const H* ptr);                                                 \
  __device__ H __ldca(const H* ptr);                                                 \
  __device__ H __ldcs(const H* ptr);                                                 \
  __device__ H __ldlu(const H* ptr);                                                 \
  __device__ H __ldcv(const H* ptr);                                                 \
  __device__ void __stwb(H* KDFLOW_WRITES ptr, H value);                             \
  __device__ void __stcg(H* KDFLOW_WRITES ptr, H value);                             \
  __device__ void __stcs(H* KDFLOW_WRITES ptr, H value);                             \
  __device__ void __stwt(H* KDFLOW_WRITES ptr, H value);                             \
  __device__ H atomicAdd(H* address, H val);                                         \
  __device__ H2 atomicAdd(H2* address, H2 val)

KDFLOW_HALF_LIKE(__half, __half_raw);
KDFLOW_HALF2_LIKE(__half2, __half, __half2_raw);
typedef __half half;
typedef __half2 half2;
KDFLOW_HALF_INTRINSICS(__half, __half2);

__host__ __device__ __half __float2half(float a);
__host__ __device__ __half __float2half_rn(float a);
__host__ __device__ __half __float2half_rz(float a);
__host__ __device__ __half __float2half_ru(float a);
__host__ __device__ __half __float2half_rd(float a);
__host__ __device__ __half __double2half(double a);
__host__ __device__ float __half2float(__half a);
__host__ __device__ __half2 __float2half2_rn(float a);
__host__ __device__ __half2 __floats2half2_rn(float a, float b);
__host__ __device__ __half2 __float22half2_rn(float2 a);
__host__ __device__ float2 __half22float2(__half2 a);
__host__ __device__ float __low2float(__half2 a);
__host__ __device__ float __high2float(__half2 a);
__host__ __device__ __half2 make_half2(__half x, __half y);
__device__ __half2 __half2half2(__half a);
__device__ __half2 __halves2half2(__half a, __half b);
__device__ __half2 __lows2half2(__half2 a, __half2 b);
__device__ __half2 __highs2half2(__half2 a, __half2 b);
__device__ __half __low2half(__half2 a);
__device__ __half __high2half(__half2 a);
__device__ __half2 __low2half2(__half2 a);
__device__ __half2 __high2half2(__half2 a);
__device__ __half2 __lowhigh2highlow(__half2 a);
__device__ short __half_as_short(__half h);
__device__ unsigned short __half_as_ushort(__half h);
__device__ __half __short_as_half(short i);
__device__ __half __ushort_as_half(unsigned short i);
#define KDFLOW_H_CVT(NAME, TO, FROM) \
  __device__ TO NAME##_rn(FROM x);   \
  __device__ TO NAME##_rz(FROM x);   \
  __device__ TO NAME##_ru(FROM x);   \
  __device__ TO NAME##_rd(FROM x)
KDFLOW_H_CVT(__half2int, int, __half);
KDFLOW_H_CVT(__half2uint, unsigned int, __half);
KDFLOW_H_CVT(__half2short, short, __half);
KDFLOW_H_CVT(__half2ushort, unsigned short, __half);
KDFLOW_H_CVT(__half2ll, long long, __half);
KDFLOW_H_CVT(__half2ull, unsigned long long, __half);
KDFLOW_H_CVT(__int2half, __half, int);
KDFLOW_H_CVT(__uint2half, __half, unsigned int);
KDFLOW_H_CVT(__short2half, __half, short);
KDFLOW_H_CVT(__ushort2half, __half, unsigned short);
KDFLOW_H_CVT(__ll2half, __half, long long);
KDFLOW_H_CVT(__ull2half, __half, unsigned long long);
#undef KDFLOW_H_CVT
__device__ signed char __half2char_rz(__half h);
__device__ unsigned char __half2uchar_rz(__half h);
)kdflow_stub";
const char* k_cuda_bf16_h = R"kdflow_stub(// cuda_bf16.h stand-in: __nv_bfloat16/__nv_bfloat162 like cuda_bf16.hpp (CUDA 11-12), with
// the bfloat16 intrinsics. Includes cuda_fp16.h as the real header does. Declarations only.
#pragma once
#include <cuda_fp16.h>

KDFLOW_HALF_LIKE(__nv_bfloat16, __nv_bfloat16_raw);
KDFLOW_HALF2_LIKE(__nv_bfloat162, __nv_bfloat16, __nv_bfloat162_raw);
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
KDFLOW_HALF_INTRINSICS(__nv_bfloat16, __nv_bfloat162);

__host__ __device__ __nv_bfloat16 __float2bfloat16(float a);
__host__ __device__ __nv_bfloat16 __float2bfloat16_rn(float a);
__host__ __device__ __nv_bfloat16 __float2bfloat16_rz(float a);
__host__ __device__ __nv_bfloat16 __double2bfloat16(double a);
__host__ __device__ float __bfloat162float(__nv_bfloat16 a);
__host__ __device__ __nv_bfloat162 __float2bfloat162_rn(float a);
__host__ __device__ __nv_bfloat162 __floats2bfloat162_rn(float a, float b);
__host__ __device__ __nv_bfloat162 __float22bfloat162_rn(float2 a);
__host__ __device__ float2 __bfloat1622float2(__nv_bfloat162 a);
__host__ __device__ __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y);
__device__ __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a);
__device__ __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b);
__device__ __nv_bfloat16 __low2bfloat16(__nv_bfloat162 a);
__device__ __nv_bfloat16 __high2bfloat16(__nv_bfloat162 a);
__device__ short __bfloat16_as_short(__nv_bfloat16 h);
__device__ unsigned short __bfloat16_as_ushort(__nv_bfloat16 h);
__device__ __nv_bfloat16 __short_as_bfloat16(short i);
__device__ __nv_bfloat16 __ushort_as_bfloat16(unsigned short i);
__device__ int __bfloat162int_rn(__nv_bfloat16 h);
__device__ int __bfloat162int_rz(__nv_bfloat16 h);
__device__ __nv_bfloat16 __int2bfloat16_rn(int i);
)kdflow_stub";
const char* k_cuda_fp8_h = R"kdflow_stub(// cuda_fp8.h stand-in: the fp8 storage types of cuda_fp8.hpp (CUDA 11.8+). Declarations only.
#pragma once
#include <cuda_bf16.h>

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };

#define KDFLOW_FP8(NAME, NAME2, NAME4)                                   \
  struct __align__(1) NAME {                                             \
    __nv_fp8_storage_t __x;                                              \
    NAME() = default;                                                    \
    __host__ __device__ explicit NAME(const __half f);                   \
    __host__ __device__ explicit NAME(const __nv_bfloat16 f);            \
    __host__ __device__ explicit NAME(const float f);                    \
    __host__ __device__ explicit NAME(const double f);                   \
    __host__ __device__ explicit NAME(const unsigned short val);         \
    __host__ __device__ explicit NAME(const unsigned int val);           \
    __host__ __device__ explicit NAME(const unsigned long long val);     \
    __host__ __device__ explicit NAME(const short val);                  \
    __host__ __device__ explicit NAME(const int val);                    \
    __host__ __device__ explicit NAME(const long long val);              \
    __host__ __device__ explicit operator __half() const;                \
    __host__ __device__ explicit operator float() const;                 \
    __host__ __device__ explicit operator __nv_bfloat16() const;         \
    __host__ __device__ explicit operator double() const;                \
    __host__ __device__ explicit operator char() const;                  \
    __host__ __device__ explicit operator signed char() const;           \
    __host__ __device__ explicit operator unsigned char() const;         \
    __host__ __device__ explicit operator short() const;                 \
    __host__ __device__ explicit operator unsigned short() const;        \
    __host__ __device__ explicit operator int() const;                   \
    __host__ __device__ explicit operator unsigned int() const;          \
    __host__ __device__ explicit operator long long() const;             \
    __host__ __device__ explicit operator unsigned long long() const;    \
    __host__ __device__ explicit operator bool() const;                  \
  };                                                                     \
  struct __align__(2) NAME2 {                                            \
    __nv_fp8x2_storage_t __x;                                            \
    NAME2() = default;                                                   \
    __host__ __device__ explicit NAME2(const __half2 f);                 \
    __host__ __device__ explicit NAME2(const __nv_bfloat162 f);          \
    __host__ __device__ explicit NAME2(const float2 f);                  \
    __host__ __device__ explicit NAME2(const double2 f);                 \
    __host__ __device__ explicit operator __half2() const;               \
    __host__ __device__ explicit operator float2() const;                \
  };                                                                     \
  struct __align__(4) NAME4 {                                            \
    __nv_fp8x4_storage_t __x;                                            \
    NAME4() = default;                                                   \
    __host__ __device__ explicit NAME4(const __half2 flo, const __half2 fhi);                   \
    __host__ __device__ explicit NAME4(const __nv_bfloat162 flo, const __nv_bfloat162 fhi);     \
    __host__ __device__ explicit NAME4(const float4 f);                  \
    __host__ __device__ explicit NAME4(const double4 f);                 \
    __host__ __device__ explicit operator float4() const;                \
  }
KDFLOW_FP8(__nv_fp8_e4m3, __nv_fp8x2_e4m3, __nv_fp8x4_e4m3);
KDFLOW_FP8(__nv_fp8_e5m2, __nv_fp8x2_e5m2, __nv_fp8x4_e5m2);
#undef KDFLOW_FP8
__host__ __device__ __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                                              __nv_fp8_interpretation_t fp8_interpretation);
__host__ __device__ __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t saturate,
                                                                   __nv_fp8_interpretation_t fp8_interpretation);
__host__ __device__ __nv_fp8x2_storage_t __nv_cvt_halfraw2_to_fp8x2(__half2_raw x, __nv_saturation_t saturate,
                                                                     __nv_fp8_interpretation_t fp8_interpretation);
__host__ __device__ __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x,
                                                        __nv_fp8_interpretation_t fp8_interpretation);
__host__ __device__ __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x,
                                                            __nv_fp8_interpretation_t fp8_interpretation);
)kdflow_stub";
const char* k_mma_h = R"kdflow_stub(// mma.h stand-in: the nvcuda::wmma fragment template and the *_sync functions TVM's
// tensor-core code calls (CUDA 10-12). load_matrix_sync reads through its pointer,
// store_matrix_sync writes through it. Declarations only.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace nvcuda {
namespace wmma {
struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32;
}
namespace experimental {
namespace precision {
struct u4;
struct s4;
struct b1;
}  // namespace precision
enum bmmaBitOp { bmmaBitOpXOR = 1, bmmaBitOpAND = 2 };
enum bmmaAccumulateOp { bmmaAccumulateOpPOPC = 1 };
}  // namespace experimental

template <class T> struct __kdflow_storage { typedef T type; };
template <> struct __kdflow_storage<precision::tf32> { typedef float type; };
template <> struct __kdflow_storage<experimental::precision::u4> { typedef unsigned int type; };
template <> struct __kdflow_storage<experimental::precision::s4> { typedef int type; };
template <> struct __kdflow_storage<experimental::precision::b1> { typedef unsigned int type; };

template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment {
 public:
  typedef typename __kdflow_storage<T>::type element_type;
  typedef element_type storage_element_type;
  enum { num_elements = 8, num_storage_elements = 8 };
  element_type x[8];
};

template <class Use, int m, int n, int k, class T, class Layout>
__device__ void fill_fragment(fragment<Use, m, n, k, T, Layout>& a KDFLOW_WRITES,
                              const typename fragment<Use, m, n, k, T, Layout>::element_type& v);
template <class Use, int m, int n, int k, class T, class Layout>
__device__ void load_matrix_sync(fragment<Use, m, n, k, T, Layout>& a KDFLOW_WRITES, const void* p,
                                 unsigned int ldm);
template <class Use, int m, int n, int k, class T, class Layout>
__device__ void load_matrix_sync(fragment<Use, m, n, k, T, Layout>& a KDFLOW_WRITES, const void* p,
                                 unsigned int ldm, layout_t layout);
template <int m, int n, int k, class T>
__device__ void store_matrix_sync(void* p KDFLOW_WRITES, const fragment<accumulator, m, n, k, T, void>& a,
                                  unsigned int ldm, layout_t layout);
template <int m, int n, int k, class TD, class TA, class LA, class TB, class LB, class TC>
__device__ void mma_sync(fragment<accumulator, m, n, k, TD, void>& d KDFLOW_WRITES,
                         const fragment<matrix_a, m, n, k, TA, LA>& a,
                         const fragment<matrix_b, m, n, k, TB, LB>& b,
                         const fragment<accumulator, m, n, k, TC, void>& c, bool satf = false);
template <int m, int n, int k, class TD, class TA, class LA, class TB, class LB, class TC>
__device__ void bmma_sync(fragment<accumulator, m, n, k, TD, void>& d KDFLOW_WRITES,
                          const fragment<matrix_a, m, n, k, TA, LA>& a,
                          const fragment<matrix_b, m, n, k, TB, LB>& b,
                          const fragment<accumulator, m, n, k, TC, void>& c,
                          experimental::bmmaBitOp op = experimental::bmmaBitOpXOR,
                          experimental::bmmaAccumulateOp acc = experimental::bmmaAccumulateOpPOPC);
__device__ float __float_to_tf32(float in);
}  // namespace wmma
}  // namespace nvcuda
)kdflow_stub";
const char* k_sm_61_intrinsics_h = R"kdflow_stub(// sm_61_intrinsics.h stand-in: __dp4a/__dp2a are declared by the forced prelude.
#pragma once
)kdflow_stub";
const char* k_math_constants_h = R"kdflow_stub(// math_constants.h stand-in: the CUDART_* constants TVM prints for inf/nan and pi.
#pragma once
#define CUDART_INF_F __int_as_float(0x7f800000)
#define CUDART_NAN_F __int_as_float(0x7fffffff)
#define CUDART_MIN_DENORM_F __int_as_float(0x00000001)
#define CUDART_MAX_NORMAL_F __int_as_float(0x7f7fffff)
#define CUDART_NEG_ZERO_F __int_as_float(0x80000000)
#define CUDART_ZERO_F 0.0f
#define CUDART_ONE_F 1.0f
#define CUDART_PI_F 3.141592654f
#define CUDART_PIO2_F 1.570796327f
#define CUDART_SQRT_HALF_F 0.707106781f
#define CUDART_L2E_F 1.442695041f
#define CUDART_LN2_F 0.693147181f
#define CUDART_INF __longlong_as_double(0x7ff0000000000000ULL)
#define CUDART_NAN __longlong_as_double(0xfff8000000000000ULL)
#define CUDART_NEG_ZERO __longlong_as_double(0x8000000000000000ULL)
#define CUDART_MIN_DENORM __longlong_as_double(0x0000000000000001ULL)
#define CUDART_ZERO 0.0
#define CUDART_ONE 1.0
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_PIO2 1.5707963267948966e+0
#define CUDART_SQRT_HALF 7.0710678118654757e-1
#define CUDART_L2E 1.4426950408889634e+0
#define CUDART_LN2 6.9314718055994529e-1
)kdflow_stub";
const char* k_limits_h = R"kdflow_stub(// limits.h stand-in (LP64).
#pragma once
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define SHRT_MIN (-32767-1)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647-1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L-1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL-1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
)kdflow_stub";
const char* k_forward = R"kdflow_stub(// Everything this header declares comes from the forced prelude, kdflow_cuda_prelude.h.
#pragma once
)kdflow_stub";

const char* k_climits = R"kdflow_stub(#pragma once
#include <limits.h>
)kdflow_stub";

const char* k_assert = R"kdflow_stub(// assert.h stand-in: device-side assert as CUDA's crt/common_functions.h declares it.
#pragma once
#define assert(e) ((e) ? (void)0 : __assert_fail(#e, __FILE__, __LINE__, __func__))
)kdflow_stub";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& device_stub_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"kdflow_cuda_prelude.h", k_prelude_h},
      {"cuda_fp16.h", k_cuda_fp16_h},
      {"cuda_bf16.h", k_cuda_bf16_h},
      {"cuda_fp8.h", k_cuda_fp8_h},
      {"mma.h", k_mma_h},
      {"sm_61_intrinsics.h", k_sm_61_intrinsics_h},
      {"math_constants.h", k_math_constants_h},
      {"limits.h", k_limits_h},
      {"cuda_runtime.h", k_forward},
      {"cuda_runtime_api.h", k_forward},
      {"device_launch_parameters.h", k_forward},
      {"stdint.h", k_forward},
      {"cstdint", k_forward},
      {"stddef.h", k_forward},
      {"cstddef", k_forward},
      {"math.h", k_forward},
      {"cmath", k_forward},
      {"float.h", k_forward},
      {"stdio.h", k_forward},
      {"cstdio", k_forward},
      {"stdlib.h", k_forward},
      {"cstdlib", k_forward},
      {"string.h", k_forward},
      {"cstring", k_forward},
      {"cfloat", k_forward},
      {"assert.h", k_assert},
      {"cassert", k_assert},
      {"climits", k_climits},
  };
  return headers;
}

}  // namespace kdflow::detail

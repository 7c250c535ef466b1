// prelude_text.cpp — the in-memory headers a device module is compiled with for the CPU
// (see prelude.h). The text is C++17 for the host: it defines what nvcc makes visible to a
// kernel without an #include, in terms of the runtime functions of runtime.cpp, which are the
// only symbols the JIT resolves.
#include "prelude.h"

namespace kdflow::cpu {

namespace {

// The context struct below must stay layout-identical to ThreadContext in runtime.h.
const char* k_prelude = R"kdflow_cpu(// kdflow_cpu_prelude.h: force-included before every device module compiled for the CPU.
#pragma once
// The arch TVM's feature blocks are written for: fp16 (>= 530) and bf16 (>= 800) go through
// cuda_fp16.h / cuda_bf16.h (defined here for the host), the pre-Volta shuffle fallbacks
// (< 700) stay off. CUDA 11.0 keeps TVM_ENABLE_L2_PREFETCH (inline PTX) off.
#define __CUDA_ARCH__ 800
#define __CUDACC__ 1
#define __CUDACC_VER_MAJOR__ 11
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 0
#define __KDFLOW_CPU__ 1

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __device_builtin__
#define __grid_constant__
#define __cudart_builtin__
#define __constant__
#define __managed__
// __shared__ variables become per-block storage: the compiler turns every variable carrying
// this annotation into an offset from the block's shared memory (jit.cpp).
#define __shared__ __attribute__((annotate("kdflow.shared")))

typedef decltype(sizeof(0)) size_t;
typedef decltype((int*)0 - (int*)0) ptrdiff_t;
#ifndef NULL
#define NULL __null
#endif
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))

struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// --- the runtime (runtime.cpp): the only functions a kernel can reach -----------------
struct __kdflow_thread_ctx {
  uint3 thread_idx, block_idx, block_dim, grid_dim;
  char* shared;            // this block's shared memory: static variables, then dynamic
  unsigned int lane;       // threadIdx linearised % 32
  unsigned int live_mask;  // the lanes of this warp that exist (a partial last warp)
  unsigned int batch;      // blocks this call runs (a one-thread kernel batched: region_fission.h), else 0
};
extern "C" {
// Constant within one thread's run of a kernel (each fiber keeps its own context).
const __kdflow_thread_ctx* __kdflow_ctx(void) __attribute__((const, nothrow));
void __kdflow_syncthreads(void) __attribute__((nothrow));
// Region fission (region_fission.h): block-private storage for per-thread copies of locals.
void* __kdflow_private(unsigned long bytes, unsigned long align) __attribute__((nothrow));
void __kdflow_syncwarp(void) __attribute__((nothrow));
// Exchange `size` bytes with the lanes of the warp; out gets lane `src`'s value.
void __kdflow_warp_shuffle(void* out, const void* in, unsigned long size, int mode, int arg, int width)
    __attribute__((nothrow));
unsigned int __kdflow_warp_vote(int mode, int pred) __attribute__((nothrow));
void __kdflow_trap(void) __attribute__((nothrow, noreturn));
// A kernel compiled for one-thread blocks (region_fission.h) launched with more.
void __kdflow_unplanned_block(void) __attribute__((nothrow, noreturn));
// A kernel compiled for the plan's one block shape (region_fission.h) launched with another.
void __kdflow_unplanned_shape(void) __attribute__((nothrow, noreturn));
void* memcpy(void*, const void*, size_t);
void* memset(void*, int, size_t);
void* memmove(void*, const void*, size_t);
}

#define threadIdx (__kdflow_ctx()->thread_idx)
#define blockIdx (__kdflow_ctx()->block_idx)
#define blockDim (__kdflow_ctx()->block_dim)
#define gridDim (__kdflow_ctx()->grid_dim)
#define warpSize 32

static inline __attribute__((always_inline)) void __syncthreads() { __kdflow_syncthreads(); }
static inline __attribute__((always_inline)) void __syncwarp(unsigned int = 0xffffffffu) { __kdflow_syncwarp(); }
static inline __attribute__((always_inline)) int __syncthreads_count(int p) {
  // Not used by TVM; a block-wide count needs a block reduction the runtime does not offer.
  __kdflow_trap();
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __trap() { __kdflow_trap(); }
static inline unsigned int __activemask() { return __kdflow_ctx()->live_mask; }
static inline unsigned int __ballot_sync(unsigned int, int p) { return __kdflow_warp_vote(0, p != 0); }
static inline int __any_sync(unsigned int, int p) { return __kdflow_warp_vote(1, p != 0) != 0; }
static inline int __all_sync(unsigned int, int p) { return __kdflow_warp_vote(2, p != 0) != 0; }
static inline unsigned int __lanemask_lt() { return (1u << __kdflow_ctx()->lane) - 1u; }

// Shuffles: mode 0 idx, 1 up, 2 down, 3 xor (runtime.cpp computes the source lane as CUDA does).
template <class T> static inline T __kdflow_shfl(T v, int mode, int arg, int width) {
  static_assert(sizeof(T) <= 32, "shuffled value too large");
  T out;
  __kdflow_warp_shuffle(&out, &v, sizeof(T), mode, arg, width);
  return out;
}
template <class T> static inline T __shfl_sync(unsigned int, T v, int lane, int width = 32) { return __kdflow_shfl(v, 0, lane, width); }
template <class T> static inline T __shfl_up_sync(unsigned int, T v, unsigned int d, int width = 32) { return __kdflow_shfl(v, 1, (int)d, width); }
template <class T> static inline T __shfl_down_sync(unsigned int, T v, unsigned int d, int width = 32) { return __kdflow_shfl(v, 2, (int)d, width); }
template <class T> static inline T __shfl_xor_sync(unsigned int, T v, int m, int width = 32) { return __kdflow_shfl(v, 3, m, width); }
template <class T> static inline T __shfl(T v, int lane, int width = 32) { return __kdflow_shfl(v, 0, lane, width); }
template <class T> static inline T __shfl_up(T v, unsigned int d, int width = 32) { return __kdflow_shfl(v, 1, (int)d, width); }
template <class T> static inline T __shfl_down(T v, unsigned int d, int width = 32) { return __kdflow_shfl(v, 2, (int)d, width); }
template <class T> static inline T __shfl_xor(T v, int m, int width = 32) { return __kdflow_shfl(v, 3, m, width); }

// Region fission (region_fission.h) runs a warp's collectives as loops over its lanes: the
// lanes of thread t's warp that exist, and the thread a shuffle reads (as runtime.cpp's
// kdflow_warp_shuffle: a source lane outside the width's segment or the block, its own value).
static inline unsigned int __kdflow_lanes_live(unsigned int t, unsigned int nt) {
  unsigned int n = nt - (t & ~31u);
  return n >= 32u ? 0xffffffffu : ((1u << n) - 1u);
}
static inline unsigned int __kdflow_shfl_src(unsigned int t, unsigned int nt, int mode, int arg, int width) {
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) width = 32;
  unsigned int w = (unsigned int)width, lane = t % 32u, base = lane & ~(w - 1u);
  long src = lane;
  switch (mode) {
    case 0: src = base + ((unsigned int)arg & (w - 1u)); break;
    case 1: src = (long)lane - arg; if (src < (long)base) src = lane; break;
    case 2: src = (long)lane + arg; if (src >= (long)(base + w)) src = lane; break;
    default: src = lane ^ (unsigned int)arg; if (src >= (long)(base + w)) src = lane; break;
  }
  unsigned int s = t - lane + (unsigned int)src;
  return s < nt ? s : t;
}

template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }

// --- atomics (several OS threads run blocks at once: real atomics) --------------------
template <class T> static inline T __kdflow_atomic_int(T* p, T v, int op) {
  switch (op) {
    case 0: return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    case 1: return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);
    case 2: return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);
    case 3: return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);
    case 4: return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);
    default: return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
  }
}
template <class T, class F> static inline T __kdflow_atomic_cas_loop(T* p, F f) {
  T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, f(old), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
template <class T, class U> static inline T __kdflow_atomic_float(T* p, T v, int op) {
  U* q = (U*)p;
  U old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  for (;;) {
    T cur;
    __builtin_memcpy(&cur, &old, sizeof(T));
    T nv = op == 0 ? cur + v : (op == 1 ? (v > cur ? v : cur) : (v < cur ? v : cur));
    U want;
    __builtin_memcpy(&want, &nv, sizeof(T));
    if (__atomic_compare_exchange_n(q, &old, want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return cur;
  }
}
#define KDFLOW_ATOMIC_INT(T)                                                                         \
  static inline T atomicAdd(T* p, T v) { return __kdflow_atomic_int(p, v, 0); }                     \
  static inline T atomicSub(T* p, T v) { return __kdflow_atomic_int(p, v, 1); }                     \
  static inline T atomicAnd(T* p, T v) { return __kdflow_atomic_int(p, v, 2); }                     \
  static inline T atomicOr(T* p, T v) { return __kdflow_atomic_int(p, v, 3); }                      \
  static inline T atomicXor(T* p, T v) { return __kdflow_atomic_int(p, v, 4); }                     \
  static inline T atomicExch(T* p, T v) { return __kdflow_atomic_int(p, v, 5); }                    \
  static inline T atomicMax(T* p, T v) { return __kdflow_atomic_cas_loop(p, [v](T o) { return o < v ? v : o; }); } \
  static inline T atomicMin(T* p, T v) { return __kdflow_atomic_cas_loop(p, [v](T o) { return v < o ? v : o; }); } \
  static inline T atomicCAS(T* p, T cmp, T v) {                                                     \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
    return cmp;                                                                                     \
  }
KDFLOW_ATOMIC_INT(int)
KDFLOW_ATOMIC_INT(unsigned int)
KDFLOW_ATOMIC_INT(unsigned long long)
KDFLOW_ATOMIC_INT(long long)
#undef KDFLOW_ATOMIC_INT
static inline unsigned int atomicInc(unsigned int* p, unsigned int m) {
  return __kdflow_atomic_cas_loop(p, [m](unsigned int o) { return o >= m ? 0u : o + 1u; });
}
static inline unsigned int atomicDec(unsigned int* p, unsigned int m) {
  return __kdflow_atomic_cas_loop(p, [m](unsigned int o) { return (o == 0u || o > m) ? m : o - 1u; });
}
static inline float atomicAdd(float* p, float v) { return __kdflow_atomic_float<float, unsigned int>(p, v, 0); }
static inline double atomicAdd(double* p, double v) { return __kdflow_atomic_float<double, unsigned long long>(p, v, 0); }
static inline float atomicMax(float* p, float v) { return __kdflow_atomic_float<float, unsigned int>(p, v, 1); }
static inline float atomicMin(float* p, float v) { return __kdflow_atomic_float<float, unsigned int>(p, v, 2); }
static inline float atomicExch(float* p, float v) {
  unsigned int b, o;
  __builtin_memcpy(&b, &v, 4);
  o = __atomic_exchange_n((unsigned int*)p, b, __ATOMIC_SEQ_CST);
  float r;
  __builtin_memcpy(&r, &o, 4);
  return r;
}

// --- math: declared with C linkage; clang maps most to LLVM intrinsics, the rest are
// resolved by the JIT against the C library's functions in runtime.cpp's table ----------
extern "C" {
#define KDFLOW_MATH1(n) float n##f(float); double n(double);
#define KDFLOW_MATH2(n) float n##f(float, float); double n(double, double);
KDFLOW_MATH1(exp) KDFLOW_MATH1(exp2) KDFLOW_MATH1(exp10) KDFLOW_MATH1(expm1) KDFLOW_MATH1(log)
KDFLOW_MATH1(log2) KDFLOW_MATH1(log10) KDFLOW_MATH1(log1p) KDFLOW_MATH1(sqrt) KDFLOW_MATH1(cbrt)
KDFLOW_MATH1(sin) KDFLOW_MATH1(cos) KDFLOW_MATH1(tan) KDFLOW_MATH1(asin) KDFLOW_MATH1(acos)
KDFLOW_MATH1(atan) KDFLOW_MATH1(sinh) KDFLOW_MATH1(cosh) KDFLOW_MATH1(tanh) KDFLOW_MATH1(asinh)
KDFLOW_MATH1(acosh) KDFLOW_MATH1(atanh) KDFLOW_MATH1(erf) KDFLOW_MATH1(erfc) KDFLOW_MATH1(tgamma)
KDFLOW_MATH1(lgamma) KDFLOW_MATH1(fabs) KDFLOW_MATH1(floor) KDFLOW_MATH1(ceil) KDFLOW_MATH1(round)
KDFLOW_MATH1(trunc) KDFLOW_MATH1(rint) KDFLOW_MATH1(nearbyint)
KDFLOW_MATH2(pow) KDFLOW_MATH2(atan2) KDFLOW_MATH2(fmod) KDFLOW_MATH2(fmax) KDFLOW_MATH2(fmin)
KDFLOW_MATH2(hypot) KDFLOW_MATH2(copysign) KDFLOW_MATH2(remainder) KDFLOW_MATH2(fdim)
float fmaf(float, float, float); double fma(double, double, double);
int abs(int); long labs(long); long long llabs(long long);
#undef KDFLOW_MATH1
#undef KDFLOW_MATH2
}
// C++ overloads CUDA's math headers provide (float arguments stay float).
#define KDFLOW_MATH1(n) static inline float n(float x) { return n##f(x); }
#define KDFLOW_MATH2(n) static inline float n(float x, float y) { return n##f(x, y); }
KDFLOW_MATH1(exp) KDFLOW_MATH1(exp2) KDFLOW_MATH1(expm1) KDFLOW_MATH1(log) KDFLOW_MATH1(log2)
KDFLOW_MATH1(log10) KDFLOW_MATH1(log1p) KDFLOW_MATH1(sqrt) KDFLOW_MATH1(cbrt) KDFLOW_MATH1(sin)
KDFLOW_MATH1(cos) KDFLOW_MATH1(tan) KDFLOW_MATH1(asin) KDFLOW_MATH1(acos) KDFLOW_MATH1(atan)
KDFLOW_MATH1(sinh) KDFLOW_MATH1(cosh) KDFLOW_MATH1(tanh) KDFLOW_MATH1(erf) KDFLOW_MATH1(erfc)
KDFLOW_MATH1(fabs) KDFLOW_MATH1(floor) KDFLOW_MATH1(ceil) KDFLOW_MATH1(round) KDFLOW_MATH1(trunc)
KDFLOW_MATH1(rint)
KDFLOW_MATH2(pow) KDFLOW_MATH2(atan2) KDFLOW_MATH2(fmod) KDFLOW_MATH2(fmax) KDFLOW_MATH2(fmin)
#undef KDFLOW_MATH1
#undef KDFLOW_MATH2
static inline float abs(float x) { return fabsf(x); }
static inline double abs(double x) { return fabs(x); }
static inline long long abs(long long x) { return llabs(x); }
// CUDA's fast and intrinsic variants: the accurate function on the CPU.
static inline float __expf(float x) { return expf(x); }
static inline float __exp10f(float x) { return exp10f(x); }
static inline float __logf(float x) { return logf(x); }
static inline float __log2f(float x) { return log2f(x); }
static inline float __log10f(float x) { return log10f(x); }
static inline float __sinf(float x) { return sinf(x); }
static inline float __cosf(float x) { return cosf(x); }
static inline float __tanf(float x) { return tanf(x); }
static inline float __powf(float x, float y) { return powf(x, y); }
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float exp10(float x) { return exp10f(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
template <class T> static inline bool isnan(T x) { return __builtin_isnan(x); }
template <class T> static inline bool isinf(T x) { return __builtin_isinf(x); }
template <class T> static inline bool isfinite(T x) { return __builtin_isfinite(x); }
template <class T> static inline bool signbit(T x) { return __builtin_signbit(x); }
static inline int __float_as_int(float x) { int r; __builtin_memcpy(&r, &x, 4); return r; }
static inline unsigned int __float_as_uint(float x) { unsigned int r; __builtin_memcpy(&r, &x, 4); return r; }
static inline float __int_as_float(int x) { float r; __builtin_memcpy(&r, &x, 4); return r; }
static inline float __uint_as_float(unsigned int x) { float r; __builtin_memcpy(&r, &x, 4); return r; }
static inline long long __double_as_longlong(double x) { long long r; __builtin_memcpy(&r, &x, 8); return r; }
static inline double __longlong_as_double(long long x) { double r; __builtin_memcpy(&r, &x, 8); return r; }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) { return __builtin_bitreverse32(x); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
static inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
static inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 255u) * ((b >> (8 * i)) & 255u);
  return c;
}

// max/min over any two arithmetic operands, in their common type (CUDA's overload set for
// int, unsigned, long long, float, double and the mixed pairs).
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) {
  typedef decltype(a + b) R;
  return (R)a < (R)b ? (R)b : (R)a;
}
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) {
  typedef decltype(a + b) R;
  return (R)b < (R)a ? (R)b : (R)a;
}
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }

// --- vector types (CUDA's vector_types.h: alignment = size for 2 and 4 components up to 16)
#define KDFLOW_VEC(T, N, A2, A4)                                                                       \
  struct N##1 { T x; };                                                                              \
  struct __attribute__((aligned(A2))) N##2 { T x, y; };                                              \
  struct N##3 { T x, y, z; };                                                                        \
  struct __attribute__((aligned(A4))) N##4 { T x, y, z, w; };                                        \
  static inline N##1 make_##N##1(T x) { N##1 r; r.x = x; return r; }                                 \
  static inline N##2 make_##N##2(T x, T y) { N##2 r; r.x = x; r.y = y; return r; }                    \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 r; r.x = x; r.y = y; r.z = z; return r; }       \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r; }
KDFLOW_VEC(signed char, char, 2, 4)
KDFLOW_VEC(unsigned char, uchar, 2, 4)
KDFLOW_VEC(short, short, 4, 8)
KDFLOW_VEC(unsigned short, ushort, 4, 8)
KDFLOW_VEC(int, int, 8, 16)
KDFLOW_VEC(long, long, 16, 16)
KDFLOW_VEC(unsigned long, ulong, 16, 16)
KDFLOW_VEC(long long, longlong, 16, 16)
KDFLOW_VEC(unsigned long long, ulonglong, 16, 16)
KDFLOW_VEC(float, float, 8, 16)
KDFLOW_VEC(double, double, 16, 16)
#undef KDFLOW_VEC
// uint3 is the built-in variables' type above; the other unsigned int vectors:
struct uint1 { unsigned int x; };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
static inline uint1 make_uint1(unsigned int x) { uint1 r; r.x = x; return r; }
static inline uint2 make_uint2(unsigned int x, unsigned int y) { uint2 r; r.x = x; r.y = y; return r; }
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 r; r.x = x; r.y = y; r.z = z; return r; }
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) {
  uint4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r;
}
static inline dim3 make_dim3(unsigned int x, unsigned int y, unsigned int z) { return dim3(x, y, z); }

// --- half precision (cuda_fp16.h): storage in 16 bits, arithmetic in float rounded back
// to half after every operation (for one +, -, *, / the result equals fp16 hardware's).
static inline unsigned short __kdflow_f2h(float f) {
  unsigned int x;
  __builtin_memcpy(&x, &f, 4);
  unsigned int sign = (x >> 16) & 0x8000u;
  unsigned int ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (unsigned short)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {  // subnormal half (or zero)
    if (ax < 0x33000000u) return (unsigned short)sign;
    unsigned int e = ax >> 23;
    unsigned int m = (ax & 0x7fffffu) | 0x800000u;
    unsigned int shift = 126u - e;  // 14 + (113 - e) ... result = m >> (shift)
    unsigned int r = m >> shift;
    unsigned int rem = m & ((1u << shift) - 1u);
    unsigned int half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (r & 1u))) ++r;
    return (unsigned short)(sign | r);
  }
  unsigned int r = ((ax - 0x38000000u) >> 13);
  unsigned int rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return (unsigned short)(sign | r);
}
static inline float __kdflow_h2f(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
  unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) {
      x = sign;
    } else {
      e = 113;
      while (!(m & 0x400u)) { m <<= 1; --e; }
      x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  __builtin_memcpy(&f, &x, 4);
  return f;
}
struct __attribute__((aligned(2))) __half {
  unsigned short __x;
  __half() = default;
  __half(float f) : __x(__kdflow_f2h(f)) {}
  __half(double d) : __x(__kdflow_f2h((float)d)) {}
  __half(int i) : __x(__kdflow_f2h((float)i)) {}
  __half(unsigned int i) : __x(__kdflow_f2h((float)i)) {}
  __half(long long i) : __x(__kdflow_f2h((float)i)) {}
  __half(unsigned long long i) : __x(__kdflow_f2h((float)i)) {}
  __half(short i) : __x(__kdflow_f2h((float)i)) {}
  __half(unsigned short i) : __x(__kdflow_f2h((float)i)) {}
  operator float() const { return __kdflow_h2f(__x); }
  operator float() const volatile { return __kdflow_h2f(__x); }
  __half& operator=(float f) { __x = __kdflow_f2h(f); return *this; }
  volatile __half& operator=(const __half& h) volatile { __x = h.__x; return *this; }
  __half& operator=(const __half& h) = default;
  __half(const __half&) = default;
  __half(const volatile __half& h) : __x(h.__x) {}
};
typedef __half half;
struct __attribute__((aligned(4))) __half2 {
  __half x, y;
  __half2() = default;
  __half2(__half a, __half b) : x(a), y(b) {}
};
typedef __half2 half2;
struct __half_raw { unsigned short x; };
static inline float __half2float(__half h) { return __kdflow_h2f(h.__x); }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double d) { return __half((float)d); }
static inline __half __int2half_rn(int i) { return __half((float)i); }
static inline int __half2int_rz(__half h) { return (int)(float)h; }
static inline __half __ushort_as_half(unsigned short x) { __half h; h.__x = x; return h; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short x) { __half h; h.__x = (unsigned short)x; return h; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
#define KDFLOW_HOP(op, fn)                                                                           \
  static inline __half operator op(__half a, __half b) { return __half((float)a op (float)b); }      \
  static inline __half& operator op##=(__half& a, __half b) { a = __half((float)a op (float)b); return a; } \
  static inline __half fn(__half a, __half b) { return __half((float)a op (float)b); }
KDFLOW_HOP(+, __hadd) KDFLOW_HOP(-, __hsub) KDFLOW_HOP(*, __hmul) KDFLOW_HOP(/, __hdiv)
#undef KDFLOW_HOP
#define KDFLOW_HCMP(op, fn)                                                                          \
  static inline bool operator op(__half a, __half b) { return (float)a op (float)b; }                \
  static inline bool fn(__half a, __half b) { return (float)a op (float)b; }
KDFLOW_HCMP(>, __hgt) KDFLOW_HCMP(<, __hlt) KDFLOW_HCMP(>=, __hge) KDFLOW_HCMP(<=, __hle)
KDFLOW_HCMP(==, __heq) KDFLOW_HCMP(!=, __hne)
#undef KDFLOW_HCMP
static inline __half operator-(__half a) { __half r; r.__x = a.__x ^ 0x8000u; return r; }
static inline __half operator+(__half a) { return a; }
static inline __half __hneg(__half a) { return -a; }
static inline __half __habs(__half a) { __half r; r.__x = a.__x & 0x7fffu; return r; }
static inline __half __hmax(__half a, __half b) { return (float)a < (float)b ? b : a; }
static inline __half __hmin(__half a, __half b) { return (float)b < (float)a ? b : a; }
static inline __half __hfma(__half a, __half b, __half c) { return __half(fmaf((float)a, (float)b, (float)c)); }
static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline bool __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u; }
#define KDFLOW_HUN(fn, f) static inline __half fn(__half a) { return __half(f((float)a)); }
KDFLOW_HUN(hexp, expf) KDFLOW_HUN(hexp2, exp2f) KDFLOW_HUN(hexp10, exp10f) KDFLOW_HUN(hlog, logf)
KDFLOW_HUN(hlog2, log2f) KDFLOW_HUN(hlog10, log10f) KDFLOW_HUN(hsqrt, sqrtf) KDFLOW_HUN(hrsqrt, rsqrtf)
KDFLOW_HUN(hsin, sinf) KDFLOW_HUN(hcos, cosf) KDFLOW_HUN(hfloor, floorf) KDFLOW_HUN(hceil, ceilf)
KDFLOW_HUN(htrunc, truncf) KDFLOW_HUN(hrint, rintf) KDFLOW_HUN(habs, fabsf)
#undef KDFLOW_HUN
static inline __half hrcp(__half a) { return __half(1.0f / (float)a); }
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 make_half2(__half x, __half y) { return __half2(x, y); }  // TVM 0.26+'s fp16 code
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
static inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
static inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
static inline __half2 __half2half2(__half a) { return __half2(a, a); }
static inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static inline __half2 __float22half2_rn(float2 v) { return __half2(__half(v.x), __half(v.y)); }
static inline float2 __half22float2(__half2 v) { return make_float2((float)v.x, (float)v.y); }
static inline __half __low2half(__half2 v) { return v.x; }
static inline __half __high2half(__half2 v) { return v.y; }
static inline float __low2float(__half2 v) { return (float)v.x; }
static inline float __high2float(__half2 v) { return (float)v.y; }
#define KDFLOW_H2OP(op, fn)                                                                          \
  static inline __half2 operator op(__half2 a, __half2 b) { return __half2(a.x op b.x, a.y op b.y); } \
  static inline __half2 fn(__half2 a, __half2 b) { return __half2(a.x op b.x, a.y op b.y); }
KDFLOW_H2OP(+, __hadd2) KDFLOW_H2OP(-, __hsub2) KDFLOW_H2OP(*, __hmul2) KDFLOW_H2OP(/, __h2div)
#undef KDFLOW_H2OP
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
static inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }

// --- bfloat16 (cuda_bf16.h): the high 16 bits of a float, round to nearest even.
static inline unsigned short __kdflow_f2bf(float f) {
  unsigned int x;
  __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}
static inline float __kdflow_bf2f(unsigned short h) {
  unsigned int x = (unsigned int)h << 16;
  float f;
  __builtin_memcpy(&f, &x, 4);
  return f;
}
struct __attribute__((aligned(2))) __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(__kdflow_f2bf(f)) {}
  __nv_bfloat16(double d) : __x(__kdflow_f2bf((float)d)) {}
  __nv_bfloat16(int i) : __x(__kdflow_f2bf((float)i)) {}
  operator float() const { return __kdflow_bf2f(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __nv_bfloat162 nv_bfloat162;
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
#define KDFLOW_BOP(op)                                                                               \
  static inline __nv_bfloat16 operator op(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a op (float)b); }
KDFLOW_BOP(+) KDFLOW_BOP(-) KDFLOW_BOP(*) KDFLOW_BOP(/)
#undef KDFLOW_BOP
#define KDFLOW_BCMP(op) static inline bool operator op(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a op (float)b; }
KDFLOW_BCMP(>) KDFLOW_BCMP(<) KDFLOW_BCMP(>=) KDFLOW_BCMP(<=) KDFLOW_BCMP(==) KDFLOW_BCMP(!=)
#undef KDFLOW_BCMP

// TVM 0.26 writes `__shared__ alignas(64) float buf[160];`: C++ allows no alignas after the GNU
// attribute __shared__ becomes here, so from this point (the device source) alignas is the GNU
// aligned attribute, which may follow it. TVM only ever gives alignas a number.
#define alignas(n) __attribute__((aligned(n)))
)kdflow_cpu";

const char* k_math_constants = R"kdflow_cpu(// math_constants.h for the CPU prelude.
#pragma once
#define CUDART_INF_F __builtin_inff()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_inf()
#define CUDART_NAN __builtin_nan("")
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_MAX_NORMAL_F 3.40282347e+38f
#define CUDART_MIN_DENORM_F 1.40129846e-45f
#define CUDART_ZERO_F 0.0f
#define CUDART_ONE_F 1.0f
)kdflow_cpu";

const char* k_stdint = R"kdflow_cpu(// stdint.h for the CPU prelude (LP64).
#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
)kdflow_cpu";

const char* k_cstdint = R"kdflow_cpu(#pragma once
#include <stdint.h>
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t; using ::size_t;
}
)kdflow_cpu";

const char* k_type_traits = R"kdflow_cpu(// type_traits for the CPU prelude: what TVM's newer preamble names.
#pragma once
namespace std {
template <class T, T v> struct integral_constant { static constexpr T value = v; };
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool B, class T, class F> struct conditional { typedef T type; };
template <class T, class F> struct conditional<false, T, F> { typedef F type; };
template <class T> struct is_integral : integral_constant<bool, __is_integral(T)> {};
template <class T> struct is_floating_point : integral_constant<bool, __is_floating_point(T)> {};
template <class T> struct is_signed : integral_constant<bool, __is_signed(T)> {};
template <class T> struct is_unsigned : integral_constant<bool, __is_unsigned(T)> {};
}
)kdflow_cpu";

const char* k_empty = "#pragma once\n";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& prelude_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {kPreludeName, k_prelude},
      {"cuda_fp16.h", k_empty},
      {"cuda_bf16.h", k_empty},
      {"cuda.h", k_empty},
      {"cuda_runtime.h", k_empty},
      {"math_constants.h", k_math_constants},
      {"stdint.h", k_stdint},
      {"cstdint", k_cstdint},
      {"type_traits", k_type_traits},
      {"math.h", k_empty},
      {"cmath", k_empty},
  };
  return headers;
}

}  // namespace kdflow::cpu

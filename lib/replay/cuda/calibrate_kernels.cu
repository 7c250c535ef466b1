// The microbenchmarks of `kdflow calibrate` (lib/replay/cuda/calibrate.cpp). Compiled to PTX once
// with `nvcc -arch=compute_75 -ptx -O3` (CUDA 13.0) and embedded as text in calibrate_ptx.cpp, so
// that kdflow needs no CUDA toolkit: the driver JIT-compiles the PTX for the GPU it runs on.
#include <cstdint>

// A launch that does nothing: the launch floor.
extern "C" __global__ void kd_empty() {}

// One thread follows a chain of pointers through a buffer with the L1 bypassed (ld.global.cg):
// each load waits for the last, so steps x L2 latency. out[0]: the SM's cycles, out[1]: the end.
extern "C" __global__ void kd_chase(const uint64_t* __restrict__ start, unsigned steps, uint64_t* out) {
  const uint64_t* p = start;
  long long t0 = clock64();
  for (unsigned i = 0; i < steps; ++i) p = reinterpret_cast<const uint64_t*>(__ldcg(p));
  long long t1 = clock64();
  out[0] = static_cast<uint64_t>(t1 - t0);
  out[1] = reinterpret_cast<uint64_t>(p);
}

// One thread, a chain of dependent FP32 FMAs: steps x the ALU's latency. out[0]: cycles.
extern "C" __global__ void kd_fma(uint64_t* out, unsigned steps, float a, float b) {
  float x = 1.0f;
  long long t0 = clock64();
  for (unsigned i = 0; i < steps; ++i) x = fmaf(x, a, b);
  long long t1 = clock64();
  out[0] = static_cast<uint64_t>(t1 - t0);
  reinterpret_cast<float*>(out)[2] = x;
}

// Every thread of the grid copies 16-byte words, grid-stride, `passes` times over: the bytes
// moved (read and written) over the time, from DRAM (a buffer larger than L2) or from L2 (smaller).
extern "C" __global__ void kd_copy(uint4* __restrict__ dst, const uint4* __restrict__ src, unsigned long long n,
                                   unsigned passes) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned p = 0; p < passes; ++p)
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
      dst[i] = __ldcg(src + i);
}

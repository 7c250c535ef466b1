// Region fission (lib/replay/cpu/region_fission.h): hand-written CUDA kernels, each labelled,
// for one construct each — a tiled kernel rewritten into thread loops (and its result), the
// kernels left on fibers with their reason, and the bound on per-thread locals. Real TVM
// kernels are checked node by node against TVM in test/tvm and on every sample.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "frontend/clang/tvm_source_fixups.h"
#include "kdflow/replay/cpu_kernels.h"
#include "test_util.h"
#include "unit/replay/cpu/cpu_test_util.h"

using kdflow::cpu::CpuDevice;
using kdflow::cpu::CpuKernel;

namespace {

using kdflow::cpu::test::compile_one;
using kdflow::cpu::test::device;

}  // namespace

TEST_CASE("region fission: a tiled kernel runs as thread loops between its barriers", "[cpu][fission]") {
  auto d = device();
  // Hand-written: each block sums tiles of 64 through shared memory; `acc` (an array) and `t`
  // live across the barriers, `v` only inside one region; the loop holding the barriers is
  // the same for every thread.
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void tiles(float* __restrict__ out, const float* __restrict__ in, int tiles) {
  __shared__ float tile[64];
  float acc[2];
  acc[0] = 0.0f;
  acc[1] = 0.0f;
  int t = threadIdx.x;
  for (int k = 0; k < tiles; ++k) {
    __syncthreads();
    float v = in[(blockIdx.x * tiles + k) * 64 + t];
    tile[t] = v * 2.0f;
    __syncthreads();
    acc[0] += tile[63 - t];
    acc[1] += tile[t];
  }
  out[blockIdx.x * 64 + t] = acc[0] - acc[1] / 2.0f;
})", "tiles");
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
  const int blocks = 3, tiles = 5;
  std::vector<float> in(blocks * tiles * 64), out(blocks * 64, -1.0f);
  std::iota(in.begin(), in.end(), 0.0f);
  float* po = out.data();
  const float* pi = in.data();
  int nt = tiles;
  void* args[] = {&po, &pi, &nt};
  REQUIRE(d->launch(k, {blocks, 1, 1}, {64, 1, 1}, 0, args));
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < 64; ++t) {
      float a0 = 0, a1 = 0;
      for (int j = 0; j < tiles; ++j) {
        a0 += 2.0f * in[(b * tiles + j) * 64 + 63 - t];
        a1 += 2.0f * in[(b * tiles + j) * 64 + t];
      }
      INFO("block " << b << " thread " << t);
      CHECK(out[b * 64 + t] == a0 - a1 / 2.0f);
    }
}

TEST_CASE("region fission: kernels that need their threads in step stay on fibers, with the reason",
          "[cpu][fission]") {
  auto d = device();
  struct Case {
    const char* source;
    const char* why;
  };
  // Hand-written, one construct each.
  for (const Case& c : {
           // Warp-synchronous: each thread writes its element, then reads its neighbour's with no
           // barrier between (a read after a write in one region).
           Case{R"(extern "C" __global__ void k(float* x) {
  __shared__ float s[64];
  s[threadIdx.x] = x[threadIdx.x];
  float v = s[threadIdx.x ^ 1];
  __syncthreads();
  x[threadIdx.x] = v;
})",
                "both reads and writes a shared variable"},
           // A barrier under a condition that differs per thread.
           Case{R"(extern "C" __global__ void k(float* x) {
  if (threadIdx.x < 32) { __syncthreads(); }
  x[threadIdx.x] = 1.0f;
})",
                "differs per thread"},
           // A loop holding a barrier whose bound depends on the thread.
           Case{R"(extern "C" __global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += 64) { x[i] = 0.0f; __syncthreads(); }
})",
                "starts differently per thread"},
           // A shuffle inside an expression (not a statement `x = __shfl...`).
           Case{R"(extern "C" __global__ void k(float* x) {
  float v = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = v + __shfl_down_sync(0xffffffffu, v, 1, 32);
})",
                "not a statement"},
           // __activemask() where only some lanes are active.
           Case{R"(extern "C" __global__ void k(float* x, unsigned* m) {
  float v = x[threadIdx.x];
  if (threadIdx.x < 5) { m[threadIdx.x] = __activemask(); }
  v = __shfl_xor_sync(0xffffffffu, v, 1, 32);
  x[threadIdx.x] = v;
})",
                "an __activemask() away from the warp's shuffles"},
           // A volatile global pointer (a spin on memory another block writes).
           Case{R"(extern "C" __global__ void k(float* x) {
  __syncthreads();
  ((volatile float*)x)[threadIdx.x] = 1.0f;
})",
                "volatile access other than a cast of a __shared__ array"},
           // A helper of the source that synchronises (a helper that does not, such as TVM's half
           // max, is fine: mlp_fp16's kernels).
           Case{R"(__device__ void helper() { __syncthreads(); }
extern "C" __global__ void k(float* x) {
  __syncthreads();
  helper();
  x[threadIdx.x] = 1.0f;
})",
                "a function of the source that synchronises"},
           // A loop bound in a local that one thread assigns differently (under threadIdx.x < 8).
           Case{R"(extern "C" __global__ void k(float* x, int* n) {
  int len[1];
  len[0] = n[blockIdx.x];
  if (threadIdx.x < 8) { len[0] = len[0] + 1; }
  for (int i = 0; i < len[0]; ++i) { __syncthreads(); x[threadIdx.x] += 1.0f; }
})",
                "bound or step differs per thread"},
           // A while holding a barrier left by a break other than its leading one.
           Case{R"(extern "C" __global__ void k(float* x, int n) {
  int i = 0;
  while (1) {
    if (!(i < n)) { break; }
    __syncthreads();
    if (x[0] > 1.0f) { break; }
    i = i + 1;
  }
})",
                "a break or continue of a loop that holds a barrier"},
           // An early return.
           Case{R"(extern "C" __global__ void k(float* x) {
  if (x[0] > 0.0f) return;
  __syncthreads();
  x[threadIdx.x] = 1.0f;
})",
                "return"},
       }) {
    INFO(c.source);
    CpuKernel k = compile_one(*d, c.source, "k");
    CHECK(k.fibers);
    CHECK_FALSE(k.block_loop);
    CHECK(k.fibers_why.find(c.why) != std::string::npos);
  }
}

TEST_CASE("region fission: a prefix sum with a read-modify-write of shared memory runs as thread loops and is right",
          "[cpu][fission]") {
  auto d = device();
  // Hand-written: the Hillis-Steele steps of a 32-element prefix sum in one warp, each step
  // reading a neighbour and writing its own element between barriers.
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void scan(float* x) {
  __shared__ float s[32];
  s[threadIdx.x] = x[threadIdx.x];
  for (int d = 1; d < 32; d *= 2) {
    __syncthreads();
    float v = threadIdx.x >= d ? s[threadIdx.x - d] : 0.0f;
    __syncthreads();
    s[threadIdx.x] += v;
  }
  __syncthreads();
  x[threadIdx.x] = s[threadIdx.x];
})", "scan");
  // `s[t] += v` reads and writes shared memory in one region, its own element only.
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
  std::vector<float> x(32, 1.0f);
  float* p = x.data();
  void* args[] = {&p};
  REQUIRE(d->launch(k, {1, 1, 1}, {32, 1, 1}, 0, args));
  for (int i = 0; i < 32; ++i) CHECK(x[i] == float(i + 1));
}

TEST_CASE("region fission: per-thread locals beyond the bound stop the launch in one line", "[cpu][fission]") {
  auto d = device();
  // Hand-written: 1024 threads each keeping 1 MiB alive across a barrier (1 GiB > 256 MiB).
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void big(float* x) {
  float a[262144];
  a[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = a[threadIdx.x];
})", "big");
  REQUIRE(k.block_loop);
  std::vector<float> x(1024, 1.0f);
  float* p = x.data();
  void* args[] = {&p};
  kdflow::Status s = d->launch(k, {1, 1, 1}, {1024, 1, 1}, 0, args);
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "error: kernel 'big' stopped on the CPU: block (0,0,0): the block's threads hold more than 256 MiB of locals "
        "alive across barriers");
}

TEST_CASE("region fission: a rewrite that does not compile falls back to the kernel as written", "[cpu][fission]") {
  auto d = device();
  // Hand-written: a local of a type from an anonymous namespace alive across the barrier; its
  // per-thread copy is declared with the type's printed name, "(anonymous namespace)::S",
  // which does not compile.
  CpuKernel k = compile_one(*d, R"(
namespace { struct S { float a; }; }
extern "C" __global__ void anon(float* x) {
  S s;
  s.a = x[threadIdx.x] * 2.0f;
  __syncthreads();
  x[threadIdx.x] = s.a;
})", "anon");
  CHECK(k.fibers);
  CHECK_FALSE(k.block_loop);
  CHECK(k.fibers_why.find("did not compile") != std::string::npos);
  std::vector<float> x(64, 3.0f);
  float* p = x.data();
  void* args[] = {&p};
  REQUIRE(d->launch(k, {1, 1, 1}, {64, 1, 1}, 0, args));
  for (float v : x) CHECK(v == 6.0f);
}

namespace {

/// Compiles `src` twice, rewritten and with every kernel on fibers (KDFLOW_CPU_FIBERS=all, the
/// benchmark's knob), runs kernel `name` on both with the same input and returns whether the
/// outputs are equal bit for bit; `k_out` gets the rewritten kernel.
/// Runs kernel `name` of `src` rewritten (into `*x`, `*u`) and with every kernel on fibers (on
/// copies) with the same (float*, unsigned*) arguments; whether both left the same bytes.
bool rewritten_as_fibers(const std::string& src, const std::string& name, std::array<uint32_t, 3> grid,
                         std::array<uint32_t, 3> block, std::vector<float>* x, std::vector<unsigned>* u,
                         CpuKernel* k_out, const std::set<std::string>& one_thread = {},
                         const std::map<std::string, kdflow::cpu::BlockShape>& blocks = {}) {
  auto d = device();
  {
    auto m = d->compile_module(src, "hand.cu", one_thread, {}, blocks);
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    auto k = d->kernel(*m, name);
    REQUIRE(k);
    *k_out = *k;
  }
  setenv("KDFLOW_CPU_FIBERS", "all", 1);
  auto d2 = device();
  CpuKernel f = compile_one(*d2, src, name);
  unsetenv("KDFLOW_CPU_FIBERS");
  CHECK(f.fibers);
  std::vector<float> b = *x;
  std::vector<unsigned> ub = *u;
  float* pa = x->data();
  float* pb = b.data();
  unsigned* qa = u->data();
  unsigned* qb = ub.data();
  void* args_a[] = {&pa, &qa};
  void* args_b[] = {&pb, &qb};
  REQUIRE(d->launch(*k_out, grid, block, 0, args_a));
  REQUIRE(d2->launch(f, grid, block, 0, args_b));
  return std::memcmp(x->data(), b.data(), x->size() * sizeof(float)) == 0 && *u == ub;
}

/// rewritten_as_fibers() on n floats of a fixed pattern and n words of 7.
bool same_as_fibers(const std::string& src, const std::string& name, std::array<uint32_t, 3> grid,
                    std::array<uint32_t, 3> block, size_t n, CpuKernel* k_out,
                    const std::set<std::string>& one_thread = {},
                    const std::map<std::string, kdflow::cpu::BlockShape>& blocks = {}) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 10.0f - 50.0f;
  std::vector<unsigned> u(n, 7);
  return rewritten_as_fibers(src, name, grid, block, &x, &u, k_out, one_thread, blocks);
}

}  // namespace

TEST_CASE("region fission: warp shuffles run as loops over the block's threads, as fibers run them",
          "[cpu][fission]") {
  // Hand-written: TVM's warp reduction (down by 16..1 under __activemask()), then shuffles of
  // every kind with narrower widths and a lane that differs per thread, on blocks whose last warp
  // is partial (48 and 6x5x2 threads). Each thread's values must equal the fiber run's bit for bit.
  const std::string src = R"(
extern "C" __global__ void shuffles(float* __restrict__ x, unsigned* __restrict__ masks) {
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  unsigned base = blockIdx.x * n;
  float red[1];
  float t0[1];
  unsigned mask[1];
  red[0] = x[base + t];
  mask[0] = __activemask();
  t0[0] = __shfl_down_sync(mask[0], red[0], 16, 32);
  red[0] = red[0] + t0[0];
  t0[0] = __shfl_down_sync(mask[0], red[0], 8, 32);
  red[0] = red[0] + t0[0];
  t0[0] = __shfl_down_sync(mask[0], red[0], 1, 32);
  red[0] = red[0] + t0[0];
  float up = 0.0f;
  up = __shfl_up_sync(mask[0], red[0], 3, 16);
  float xo;
  xo = __shfl_xor_sync(mask[0], up, 5, 8);
  red[0] = __shfl_sync(mask[0], red[0] + xo, (int)(t * 7) % 32, 32);
  for (int i = 0; i < 2; ++i) {
    t0[0] = __shfl_down_sync(mask[0], red[0], 2 + i, 4);
    red[0] = red[0] * 0.5f + t0[0];
  }
  masks[base + t] = mask[0];
  x[base + t] = red[0];
}
)";
  CpuKernel k;
  CHECK(same_as_fibers(src, "shuffles", {3, 1, 1}, {48, 1, 1}, 3 * 48, &k));
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
  CHECK(same_as_fibers(src, "shuffles", {2, 1, 1}, {6, 5, 2}, 2 * 60, &k));
  CHECK(same_as_fibers(src, "shuffles", {4, 1, 1}, {1, 1, 1}, 4, &k));
  // Compiled for the one block shape the plan launches it with: the same values.
  CHECK(same_as_fibers(src, "shuffles", {2, 1, 1}, {6, 5, 2}, 2 * 60, &k, {}, {{"shuffles", {6, 5, 2}}}));
  CHECK(k.block_loop);
  CHECK_FALSE(k.plain_loop);
}

TEST_CASE("region fission: a kernel with no barrier runs each block as one loop over its threads",
          "[cpu][fission]") {
  // Hand-written: every thread writes one element from all three threadIdx components; the
  // second kernel leaves early (a return), which a loop over the threads cannot hold.
  const std::string src = R"(
extern "C" __global__ void each(float* __restrict__ out, const float* __restrict__ in) {
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  unsigned i = blockIdx.x * n + t;
  out[i] = in[i] * 2.0f + (float)threadIdx.x - 3.0f * (float)threadIdx.y + 5.0f * (float)threadIdx.z;
}
extern "C" __global__ void early(float* __restrict__ out, const float* __restrict__ in) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x % 3 == 0) return;
  out[i] = in[i] + 1.0f;
}
)";
  auto expect_each = [](const std::vector<float>& in, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> b) {
    std::vector<float> out(in.size(), -1.0f);
    for (uint32_t bx = 0; bx < grid[0]; ++bx)
      for (uint32_t z = 0; z < b[2]; ++z)
        for (uint32_t y = 0; y < b[1]; ++y)
          for (uint32_t x = 0; x < b[0]; ++x) {
            size_t i = bx * b[0] * b[1] * b[2] + (z * b[1] + y) * b[0] + x;
            out[i] = in[i] * 2.0f + (float)x - 3.0f * (float)y + 5.0f * (float)z;
          }
    return out;
  };
  std::vector<float> in(5 * 24);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7919) % 1000) / 10.0f;
  auto run = [&](CpuDevice& d, const CpuKernel& k, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> b,
                 std::vector<float>* out) {
    *out = std::vector<float>(in.size(), -1.0f);
    float* po = out->data();
    const float* pi = in.data();
    void* args[] = {&po, &pi};
    return d.launch(k, grid, b, 0, args);
  };
  std::vector<float> out;
  for (bool fixed : {false, true}) {
    INFO((fixed ? "compiled for blocks of 4x3x2" : "compiled for any block"));
    auto d = device();
    std::map<std::string, kdflow::cpu::BlockShape> blocks;
    if (fixed) blocks["each"] = {4, 3, 2};
    auto m = d->compile_module(src, "hand.cu", {}, {}, blocks);
    REQUIRE(m);
    auto each = d->kernel(*m, "each");
    auto early = d->kernel(*m, "early");
    REQUIRE(each);
    REQUIRE(early);
    CHECK(each->block_loop);
    CHECK(each->plain_loop);
    CHECK_FALSE(each->fibers);
    CHECK_FALSE(early->block_loop);  // a call per thread, as before
    CHECK_FALSE(early->plain_loop);
    REQUIRE(run(*d, *each, {5, 1, 1}, {4, 3, 2}, &out));
    CHECK(out == expect_each(in, {5, 1, 1}, {4, 3, 2}));
    if (fixed) {
      // Another shape than the one it was compiled for stops in one line, naming the kernel.
      auto r = run(*d, *each, {5, 1, 1}, {2, 3, 4}, &out);
      REQUIRE_FALSE(r);
      CHECK(r.error().message.find("compiled for the one block shape the plan launches it with") != std::string::npos);
      CHECK(r.error().message.find("each") != std::string::npos);
    } else {
      REQUIRE(run(*d, *each, {5, 1, 1}, {2, 3, 4}, &out));
      CHECK(out == expect_each(in, {5, 1, 1}, {2, 3, 4}));
    }
    REQUIRE(run(*d, *early, {5, 1, 1}, {24, 1, 1}, &out));
    for (size_t i = 0; i < in.size(); ++i) CHECK(out[i] == (i % 24 % 3 == 0 ? -1.0f : in[i] + 1.0f));
  }
}

TEST_CASE("region fission: a kernel the plan launches with one-thread blocks only is compiled as one thread",
          "[cpu][fission]") {
  // Hand-written, TVM's untuned convolutions' shape: one thread per block, a barrier pair around
  // shared staging in every step of the reduction, a volatile cast of a shared array.
  const std::string src = R"(
extern "C" __global__ void one(float* __restrict__ x, unsigned* __restrict__ unused) {
  float acc[1];
  __shared__ float stage[1];
  __shared__ float result[1];
  acc[0] = 0.0f;
  for (int k = 0; k < 9; ++k) {
    __syncthreads();
    stage[0] = x[blockIdx.x * 9 + k] * (float)(k + 1);
    __syncthreads();
    acc[0] = acc[0] + stage[0];
  }
  if (threadIdx.x == 0) ((volatile float*)result)[0] = acc[0];
  __syncthreads();
  x[blockIdx.x * 9] = ((volatile float*)result)[0] + (float)threadIdx.x;
}
)";
  CpuKernel k;
  CHECK(same_as_fibers(src, "one", {5, 1, 1}, {1, 1, 1}, 5 * 9, &k, {"one"}));
  CHECK(k.block_loop);
  CHECK(k.one_thread);
  CHECK_FALSE(k.fibers);
  // Without the hint: thread loops, the same values.
  CHECK(same_as_fibers(src, "one", {5, 1, 1}, {1, 1, 1}, 5 * 9, &k));
  CHECK(k.block_loop);
  CHECK_FALSE(k.one_thread);
  // A launch with more threads than it was compiled for stops, naming the kernel.
  auto d = device();
  auto m = d->compile_module(src, "hand.cu", {"one"});
  REQUIRE(m);
  auto k1 = d->kernel(*m, "one");
  REQUIRE(k1);
  std::vector<float> x(9 * 2, 1.0f);
  std::vector<unsigned> u(18);
  float* px = x.data();
  unsigned* pu = u.data();
  void* args[] = {&px, &pu};
  auto r = d->launch(*k1, {2, 1, 1}, {2, 1, 1}, 0, args);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("compiled for one-thread blocks") != std::string::npos);
  CHECK(r.error().message.find("one") != std::string::npos);
}

TEST_CASE("region fission: a warp-synchronous scan step reads what every lane had before any lane wrote",
          "[cpu][fission]") {
  // Hand-written, TVM's gpu_2d_continuous_cumsum's step: with no barrier inside a step, each lane
  // reads its neighbour's element and then writes its own; on a GPU the lanes of a warp do this in
  // step. As thread loops the reads come from a copy taken as the region starts: the fiber run's
  // values (lanes in step) bit for bit.
  const std::string src = R"(
extern "C" __global__ void scan(float* __restrict__ x, unsigned* __restrict__ unused) {
  __shared__ float s[32];
  s[threadIdx.x] = x[blockIdx.x * 32 + threadIdx.x];
  __syncthreads();
  if (1 <= threadIdx.x) {
    float v = s[threadIdx.x] + s[threadIdx.x - 1];
    s[threadIdx.x] = v;
  }
  __syncthreads();
  if (2 <= threadIdx.x) {
    float v = s[threadIdx.x];
    float w = s[threadIdx.x - 2];
    s[threadIdx.x] = v + w;
  }
  __syncthreads();
  x[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}
)";
  CpuKernel k;
  CHECK(same_as_fibers(src, "scan", {3, 1, 1}, {32, 1, 1}, 3 * 32, &k));
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
}

TEST_CASE("region fission: a loop bound kept in a local every thread assigns alike is uniform", "[cpu][fission]") {
  // Hand-written, TVM's paged decode's shape: the chunk length read from memory at the block's
  // index into a one-element local array, under a condition on values every thread shares; the
  // loop that holds the barriers runs to it. Its header reads thread 0's copy between the loops.
  const std::string src = R"(
extern "C" __global__ void chunks(float* __restrict__ x, unsigned* __restrict__ lens) {
  int len[1];
  int begin = (int)lens[blockIdx.x];
  int end = (int)lens[blockIdx.x + 1];
  int condval;
  if (begin != end) {
    condval = end - begin;
  } else {
    condval = 0;
  }
  len[0] = condval;
  __shared__ float acc[32];
  acc[threadIdx.x] = 0.0f;
  for (int i = 0; i < ((len[0] + 3) >> 2); ++i) {
    __syncthreads();
    float v = x[(8 + (blockIdx.x * 8 + i) % 56) * 32 + threadIdx.x];  // rows 8.., none written
    acc[threadIdx.x] = acc[threadIdx.x] + v * (float)(i + 1);
    __syncthreads();
  }
  __syncthreads();
  x[blockIdx.x * 32 + threadIdx.x] = acc[(threadIdx.x + 1) % 32];
}
)";
  std::vector<float> a(64 * 32);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.25f;
  // lens ascending, so each block runs a different count; against the fiber run, bit for bit.
  std::vector<unsigned> lens = {0, 3, 3, 9, 20, 21, 40, 41, 41};
  CpuKernel k;
  CHECK(rewritten_as_fibers(src, "chunks", {8, 1, 1}, {32, 1, 1}, &a, &lens, &k));
  INFO(k.fibers_why);
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
}

TEST_CASE("region fission: a tile loop `while (1) { if (!c) { break, } ... }` holding barriers runs as thread loops",
          "[cpu][fission]") {
  // Hand-written, TVM's ragged prefill's shape: a persistent loop over tiles under `#pragma unroll
  // 1`, its exit test first, an inner loop (no barrier) that skips whole batches by a break, and
  // the tile counter in one-element local arrays every thread updates alike.
  const std::string src = R"(
extern "C" __global__ void tiles(float* __restrict__ x, unsigned* __restrict__ sizes) {
  int tile[1];
  int batch[1];
  tile[0] = (int)blockIdx.x;
  batch[0] = 0;
  __shared__ float s[32];
  #pragma unroll 1
  while (1) {
    if (!((batch[0] < 4))) { break; }
    #pragma unroll 1
    while (1) {
      if (!(((int)sizes[batch[0]] <= tile[0]) && (batch[0] < 4))) { break; }
      tile[0] = tile[0] - (int)sizes[batch[0]];
      batch[0] = batch[0] + 1;
    }
    if (batch[0] < 4) {
      __syncthreads();
      s[threadIdx.x] = x[(batch[0] * 8 + tile[0]) * 32 + threadIdx.x] * 2.0f;
      __syncthreads();
      x[(batch[0] * 8 + tile[0]) * 32 + threadIdx.x] = s[31 - threadIdx.x] + (float)tile[0];
    }
    tile[0] = tile[0] + (int)gridDim.x;
  }
}
)";
  std::vector<float> orig(4 * 8 * 32);
  for (size_t i = 0; i < orig.size(); ++i) orig[i] = static_cast<float>(i % 89) * 0.5f;
  std::vector<float> a = orig;
  std::vector<unsigned> sizes = {3, 0, 5, 2};  // tiles per batch: 10 in all, over 3 blocks
  CpuKernel k;
  CHECK(rewritten_as_fibers(src, "tiles", {3, 1, 1}, {32, 1, 1}, &a, &sizes, &k));
  INFO(k.fibers_why);
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
  CHECK(a != orig);  // the tiles were written
}

TEST_CASE("region fission: a warp barrier (where lanes must stay in step) splits thread loops as a block barrier",
          "[cpu][fission]") {
  // Hand-written, TVM's attention merge-state's shape as the back end prepares it: every lane of
  // a row reads the row's value in global memory, and all of them then write it back updated
  // (warp_lockstep.h puts a __syncwarp() before the store). Each lane must read the old value.
  const std::string src = R"(
extern "C" __global__ void merge(float* __restrict__ x, unsigned* __restrict__ unused) {
  float s[1];
  s[0] = x[blockIdx.x * 4 + threadIdx.y];
  float v = x[64 + (blockIdx.x * 4 + threadIdx.y) * 8 + threadIdx.x] * s[0];
  x[64 + (blockIdx.x * 4 + threadIdx.y) * 8 + threadIdx.x] = v;
  __syncwarp();
  x[blockIdx.x * 4 + threadIdx.y] = s[0] * 2.0f + 1.0f;
}
)";
  CpuKernel k;
  CHECK(same_as_fibers(src, "merge", {4, 1, 1}, {8, 4, 1}, 64 + 4 * 4 * 8, &k));
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
}

TEST_CASE("region fission: the rewritten source of a real sample is the same text on every run",
          "[cpu][fission]") {
  // The rewrite orders what it declares (per-thread arrays, snapshots, shuffle slots, a region's
  // copies in and out) as the kernel is written, never by where clang allocated a node: the
  // text, and the machine code the compile cache stores for it, must not change between runs.
  // Each sample rewritten several times in one process, with the heap shifted between runs (so
  // that nodes land at other addresses), as block loops and as batches of one-thread blocks.
  auto d = device();
  size_t rewritten = 0;
  for (const std::string name : {"mlp", "attention", "resnet18", "sort_scan", "relax_mlp"}) {
    const std::string path = kdflow::test::sample_dir(name) + "/device.cu";
    if (!std::filesystem::exists(path)) continue;
    const std::string source = kdflow::detail::tvm_source_fixups(kdflow::test::slurp(path));
    std::set<std::string> kernels;
    const std::regex kernel(R"(extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\()");
    for (auto it = std::sregex_iterator(source.begin(), source.end(), kernel); it != std::sregex_iterator(); ++it)
      kernels.insert((*it)[1].str());
    std::map<std::string, kdflow::cpu::BlockTile> tiles;
    for (const std::string& k : kernels) tiles[k] = kdflow::cpu::BlockTile{8, 1};
    for (int batched = 0; batched < 2; ++batched) {
      const std::set<std::string> one_thread = batched ? kernels : std::set<std::string>{};
      const std::map<std::string, kdflow::cpu::BlockTile> with_tiles =
          batched ? tiles : std::map<std::string, kdflow::cpu::BlockTile>{};
      std::string first;
      std::vector<std::unique_ptr<char[]>> shift;
      for (int run = 0; run < 5; ++run) {
        INFO(name << (batched ? " as batches of blocks" : " as block loops") << ", run " << run);
        for (int i = 0; i < 64 * (run + 1); ++i) shift.emplace_back(new char[(i * 7919 + run * 104729) % 4096 + 1]);
        auto text = d->rewritten_source(source, path, one_thread, with_tiles);
        INFO((text ? std::string() : text.error().message));
        REQUIRE(text);
        if (run == 0) {
          first = *text;
          rewritten += !first.empty();
          continue;
        }
        CHECK(*text == first);
      }
    }
  }
  CHECK(rewritten > 0);
}

TEST_CASE("region fission: every sample's module compiles rewritten for its plan's block shapes",
          "[cpu][fission]") {
  // Real samples: each module rewritten for the block shapes its golden flow launches with; a
  // rewrite that does not compile would send every kernel of the module back to a call per
  // thread or fibers (still correct, so only this test sees it). Kernels without a barrier
  // run each block as one loop over its threads.
  auto d = device();
  size_t samples = 0, all_plain = 0;
  for (const std::string name : {"mlp", "attention", "resnet18", "resnet18_tuned", "mobilenet", "sort_scan", "mlp_fp16",
                                 "relax_mlp"}) {
    const std::string path = kdflow::test::sample_dir(name) + "/device.cu";
    const std::string golden = std::string(KDFLOW_SOURCE_DIR) + "/test/golden/" + name + ".json";
    if (!std::filesystem::exists(path)) continue;
    INFO(name);
    const std::string source = kdflow::detail::tvm_source_fixups(kdflow::test::slurp(path));
    std::map<std::string, std::set<kdflow::cpu::BlockShape>> shapes;
    const std::regex launch(R"re("name": "(\w+)",[^{}]*?"block": \[(\d+), (\d+), (\d+)\])re");
    const std::string flow = kdflow::test::slurp(golden);
    for (auto it = std::sregex_iterator(flow.begin(), flow.end(), launch); it != std::sregex_iterator(); ++it)
      shapes[(*it)[1].str()].insert({static_cast<uint32_t>(std::stoul((*it)[2].str())),
                                     static_cast<uint32_t>(std::stoul((*it)[3].str())),
                                     static_cast<uint32_t>(std::stoul((*it)[4].str()))});
    REQUIRE(!shapes.empty());
    std::set<std::string> one_thread;
    std::map<std::string, kdflow::cpu::BlockShape> blocks;
    for (const auto& [k, s] : shapes) {
      const auto& b = *s.begin();
      if (s.size() == 1 && b[0] * b[1] * b[2] == 1) one_thread.insert(k);
      else if (s.size() == 1) blocks[k] = b;
    }
    auto m = d->compile_module(source, path, one_thread, {}, blocks);
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    size_t plain = 0, loops = 0;
    for (const CpuKernel& k : d->kernels(*m)) {
      INFO(k.name);
      CHECK(k.fibers_why.find("did not compile") == std::string::npos);
      plain += k.plain_loop;
      loops += k.block_loop;
    }
    UNSCOPED_INFO(name << ": " << plain << " of " << d->kernels(*m).size() << " kernels one loop, " << loops
                       << " thread loops in all");
    all_plain += plain;
    ++samples;
  }
  CHECK(samples >= 6);
  CHECK(all_plain >= 50);  // 74 of 173 kernels
}

// Issue 52: TVM 0.27's grouped convolution in the ONNX suite's ShuffleNet keeps a block's tile in
// a *per-thread* local array, each thread writing its column (`loc[k * 4 + tx]`) and then reading
// a row (`loc[tx * 3 + j]`) that other threads wrote: a read of memory its own thread never wrote.
// Hand-written, the construct alone: the local lives across barriers, so region fission keeps a
// copy per thread in the block's private storage, which used to come back with whatever the last
// block on that worker had left (other values every run). Now it is fresh zeros per block, and
// under --poison (CpuDeviceOptions::poison) 0xFF bytes, NaN as float, so that the read shows.
namespace {

const char* kUnwrittenLocal = R"(
extern "C" __global__ void tile_rows(float* __restrict__ out, const float* __restrict__ in) {
  float loc[12];
  __shared__ float red[8];
  __shared__ float sum[4];
  for (int k = 0; k < 3; ++k) {
    __syncthreads();
    red[threadIdx.x * 2 + threadIdx.y] = in[(blockIdx.x * 3 + k) * 8 + threadIdx.x * 2 + threadIdx.y];
    __syncthreads();
    if (threadIdx.y == 0) sum[threadIdx.x] = red[threadIdx.x * 2] + red[threadIdx.x * 2 + 1];
    __syncthreads();
    loc[k * 4 + threadIdx.x] = sum[threadIdx.x];
  }
  for (int j = 0; j < 3; ++j)
    if (threadIdx.y == 0) out[blockIdx.x * 12 + threadIdx.x * 3 + j] = loc[threadIdx.x * 3 + j] + 1.0f;
})";

/// What the kernel computes when every element its thread never wrote reads `unwritten`.
std::vector<float> tile_rows_expected(const std::vector<float>& in, int blocks, float unwritten) {
  std::vector<float> out(blocks * 12);
  for (int b = 0; b < blocks; ++b)
    for (int tx = 0; tx < 4; ++tx)
      for (int j = 0; j < 3; ++j) {
        const int i = tx * 3 + j;  // written by this thread when i = k * 4 + tx
        float v = unwritten;
        if (i >= tx && (i - tx) % 4 == 0) {
          const int k = (i - tx) / 4;
          v = in[(b * 3 + k) * 8 + tx * 2] + in[(b * 3 + k) * 8 + tx * 2 + 1];
        }
        out[b * 12 + i] = v + 1.0f;
      }
  return out;
}

}  // namespace

TEST_CASE("region fission: a per-thread local read where its thread never wrote reads fresh zeros, or NaN under "
          "--poison",
          "[cpu][fission][poison]") {
  const int blocks = 64;
  std::vector<float> in(blocks * 3 * 8);
  std::iota(in.begin(), in.end(), 1.0f);
  for (bool poison : {false, true}) {
    kdflow::cpu::CpuDeviceOptions o(2);
    o.poison = poison;
    auto dev = CpuDevice::create(o);
    REQUIRE(dev);
    CpuKernel k = compile_one(**dev, kUnwrittenLocal, "tile_rows");
    INFO(k.fibers_why);
    REQUIRE(k.block_loop);  // the construct: a local alive across barriers, one copy per thread
    // Another kernel first, whose per-thread copies are written whole: what a block on the same
    // worker used to find in its private storage.
    CpuKernel fill = compile_one(**dev, R"(
extern "C" __global__ void fill(float* __restrict__ out) {
  float loc[12];
  for (int k = 0; k < 12; ++k) loc[k] = 5.0f;
  __syncthreads();
  out[blockIdx.x * 8 + threadIdx.y * 4 + threadIdx.x] = loc[threadIdx.x];
})", "fill");
    REQUIRE(fill.block_loop);
    std::vector<float> scratch(blocks * 8);
    float* ps = scratch.data();
    void* fill_args[] = {&ps};
    REQUIRE((*dev)->launch(fill, {blocks, 1, 1}, {4, 2, 1}, 0, fill_args));
    const std::vector<float> want = tile_rows_expected(in, blocks, poison ? NAN : 0.0f);
    for (int run = 0; run < 3; ++run) {
      std::vector<float> out(blocks * 12, -7.0f);
      float* po = out.data();
      const float* pi = in.data();
      void* args[] = {&po, &pi};
      REQUIRE((*dev)->launch(k, {blocks, 1, 1}, {4, 2, 1}, 0, args));
      size_t nan = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        INFO("poison " << poison << ", run " << run << ", element " << i);
        if (std::isnan(want[i])) {
          CHECK(std::isnan(out[i]));
          ++nan;
        } else {
          CHECK(out[i] == want[i]);
        }
      }
      // 4 of the 12 elements a block writes come from the thread's own stores (i = 0, 5, 10, and 3k + tx = 4k' + tx).
      CHECK(nan == (poison ? blocks * 8u : 0u));
    }
  }
}

TEST_CASE("poison: a local, a shared element and a thread's array nobody wrote read as NaN on every path",
          "[cpu][fission][poison]") {
  kdflow::cpu::CpuDeviceOptions o(2);
  o.poison = true;
  auto dev = CpuDevice::create(o);
  REQUIRE(dev);
  // No barrier (one loop over the block's threads): a local array written in part.
  CpuKernel plain = compile_one(**dev, R"(
extern "C" __global__ void part(float* __restrict__ out) {
  float x[4];
  x[threadIdx.x % 2] = 1.0f;
  out[blockIdx.x * 4 + threadIdx.x] = x[threadIdx.x % 4];
})", "part");
  // Shared memory read at an element no thread stored (threads store 0..2 of 4).
  CpuKernel shared = compile_one(**dev, R"(
extern "C" __global__ void sh(float* __restrict__ out) {
  __shared__ float s[4];
  if (threadIdx.x < 3) s[threadIdx.x] = 2.0f;
  __syncthreads();
  out[blockIdx.x * 4 + threadIdx.x] = s[3 - threadIdx.x];
})", "sh");
  std::vector<float> out(8, -7.0f);
  float* po = out.data();
  void* args[] = {&po};
  REQUIRE((*dev)->launch(plain, {2, 1, 1}, {4, 1, 1}, 0, args));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 4; ++t) {
      INFO("part: block " << b << " thread " << t);
      if (t % 4 < 2) CHECK(out[b * 4 + t] == 1.0f);
      else CHECK(std::isnan(out[b * 4 + t]));
    }
  std::fill(out.begin(), out.end(), -7.0f);
  REQUIRE((*dev)->launch(shared, {2, 1, 1}, {4, 1, 1}, 0, args));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 4; ++t) {
      INFO("sh: block " << b << " thread " << t);
      if (t == 0) CHECK(std::isnan(out[b * 4 + t]));
      else CHECK(out[b * 4 + t] == 2.0f);
    }
}

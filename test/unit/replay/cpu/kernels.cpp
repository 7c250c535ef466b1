// Unit tests of the CPU back end's compiler and runner (lib/replay/cpu): hand-written CUDA
// kernels (labelled as such) for one construct each, and kernels of the samples' device.cu
// against a plain C++ reference.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "kdflow/replay/cpu_kernels.h"
#include "unit/replay/cpu/cpu_test_util.h"
#include "replay/cpu/guarded_memory.h"
#include "test_util.h"

using kdflow::cpu::CpuDevice;
using kdflow::cpu::CpuKernel;

namespace {

using kdflow::cpu::test::compile_one;
using kdflow::cpu::test::device;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("hand-written element-wise kernel runs as a plain loop over its threads", "[cpu]") {
  auto d = device();
  // Hand-written.
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void add(float* __restrict__ c, const float* __restrict__ a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + 2.0f * b[i];
})", "add");
  CHECK_FALSE(k.fibers);
  CHECK(k.params == 4);
  std::vector<float> a(1000), b(1000), c(1000, -1.0f);
  for (int i = 0; i < 1000; ++i) a[i] = i, b[i] = 0.5f * i;
  float *pc = c.data(), *pa = a.data(), *pb = b.data();
  int n = 1000;
  void* args[] = {&pc, &pa, &pb, &n};
  REQUIRE(d->launch(k, {8, 1, 1}, {128, 1, 1}, 0, args));
  for (int i = 0; i < 1000; ++i) REQUIRE(c[i] == a[i] + 2.0f * b[i]);
}

TEST_CASE("hand-written block reduction with __shared__, __syncthreads and shuffles uses fibers", "[cpu]") {
  auto d = device();
  // Hand-written: each block sums 256 values (warp shuffles, then a shared staging array).
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void __launch_bounds__(256) block_sum(float* __restrict__ out, const float* __restrict__ in) {
  __shared__ float staging[8];
  float v = in[blockIdx.x * 256 + threadIdx.x];
  unsigned mask = __activemask();
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(mask, v, o, 32);
  if (threadIdx.x % 32 == 0) staging[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 8) {
    float w = staging[threadIdx.x];
    w += __shfl_xor_sync(0xffu, w, 4, 8);
    w += __shfl_xor_sync(0xffu, w, 2, 8);
    w += __shfl_xor_sync(0xffu, w, 1, 8);
    if (threadIdx.x == 0) out[blockIdx.x] = w;
  }
})", "block_sum");
  CHECK(k.fibers);
  CHECK(k.static_shared == 32);
  const int blocks = 37;
  std::vector<float> in(blocks * 256), out(blocks, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 97);
  float *po = out.data(), *pi = in.data();
  void* args[] = {&po, &pi};
  REQUIRE(d->launch(k, {blocks, 1, 1}, {256, 1, 1}, 0, args));
  for (int b = 0; b < blocks; ++b) {
    double want = 0;
    for (int t = 0; t < 256; ++t) want += in[b * 256 + t];
    REQUIRE(out[b] == Approx(want));
  }
}

TEST_CASE("hand-written kernel with dynamic shared memory reverses each block", "[cpu]") {
  auto d = device();
  // Hand-written.
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void rev(int* data) {
  extern __shared__ int buf[];
  __shared__ int first;
  if (threadIdx.x == 0) first = data[blockIdx.x * blockDim.x];
  buf[threadIdx.x] = data[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  data[blockIdx.x * blockDim.x + threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x] + 0 * first;
})", "rev");
  CHECK(k.fibers);
  std::vector<int> v(3 * 100);
  for (int i = 0; i < 300; ++i) v[i] = i;
  int* p = v.data();
  void* args[] = {&p};
  REQUIRE(d->launch(k, {3, 1, 1}, {100, 1, 1}, 100 * sizeof(int), args));
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 100; ++t) REQUIRE(v[b * 100 + t] == b * 100 + 99 - t);
}

TEST_CASE("lanes that diverge to the block barrier leave the warp's shuffles to the others", "[cpu]") {
  auto d = device();
  // Hand-written: lane 0 waits at the block barrier while lanes 1-31 shuffle among themselves
  // (on the GPU lane 0 is not in their active mask); lane 31 reads past the warp: own value.
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void split(float* x) {
  if (threadIdx.x == 0) { __syncthreads(); x[0] = -1.0f; }
  else { x[threadIdx.x] = __shfl_down_sync(0xfffffffeu, (float)threadIdx.x, 1, 32); }
})", "split");
  std::vector<float> v(32, 0.0f);
  float* p = v.data();
  void* args[] = {&p};
  REQUIRE(d->launch(k, {1, 1, 1}, {32, 1, 1}, 0, args));
  CHECK(v[0] == -1.0f);
  for (int t = 1; t < 31; ++t) CHECK(v[t] == t + 1);
  CHECK(v[31] == 31.0f);
}

TEST_CASE("a trap stops the launch with one line naming the block", "[cpu]") {
  auto d = device();
  // Hand-written.
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void trapper(float* x) {
  if (blockIdx.x == 2 && threadIdx.x == 5) __trap();
  __syncthreads();
  x[blockIdx.x] = 1.0f;
})", "trapper");
  std::vector<float> v(4, 0.0f);
  float* p = v.data();
  void* args[] = {&p};
  kdflow::Status s = d->launch(k, {4, 1, 1}, {64, 1, 1}, 0, args);
  REQUIRE_FALSE(s);
  CHECK(s.error().message == "error: kernel 'trapper' stopped on the CPU: block (2,0,0): the kernel called __trap()");
}

TEST_CASE("a kernel calling a function outside the prelude does not link", "[cpu]") {
  auto d = device();
  // Hand-written: system() is no CUDA built-in.
  auto m = d->compile_module(R"(
extern "C" int system(const char*);
extern "C" __global__ void evil(int* x) { x[0] = system("true"); })", "evil.cu");
  REQUIRE_FALSE(m);
  CHECK(m.error().message == "evil.cu: error: the module calls 'system', which the CPU back end does not provide");
  CHECK(m.error().code == kdflow::ExitCode::Unavailable);
}

TEST_CASE("kernels compiled in parallel partitions keep their helpers, a mutable global stays one", "[cpu]") {
  // Hand-written (parallel_codegen.h): five kernels over four threads, three of them calling one
  // helper with external linkage (each partition keeps a private copy), and a module whose
  // __device__ counter two kernels share (not split: one instance).
  auto d = device(4);
  auto m = d->compile_module(R"(
__device__ float scale(float v, int k) { return v * (float)(k + 1); }
extern "C" __global__ void k0(float* x) { x[threadIdx.x] = scale(x[threadIdx.x], 0); }
extern "C" __global__ void k1(float* x) { x[threadIdx.x] = scale(x[threadIdx.x], 1); }
extern "C" __global__ void k2(float* x) { x[threadIdx.x] = scale(x[threadIdx.x], 2); }
extern "C" __global__ void k3(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" __global__ void k4(float* x) { x[threadIdx.x] -= 1.0f; }
)", "parts.cu");
  REQUIRE(m);
  std::vector<float> v(32, 2.0f);
  float* p = v.data();
  void* args[] = {&p};
  for (const char* name : {"k0", "k1", "k2", "k3", "k4"}) {
    auto k = d->kernel(*m, name);
    REQUIRE(k);
    REQUIRE(d->launch(*k, {1, 1, 1}, {32, 1, 1}, 0, args));
  }
  for (float x : v) CHECK(x == 12.0f);  // 2 * 1 * 2 * 3, + 1, - 1
  auto g = d->compile_module(R"(
__device__ int counter;
extern "C" __global__ void bump(int* out) { if (threadIdx.x == 0) counter += 5; }
extern "C" __global__ void read(int* out) { out[0] = counter; }
)", "global.cu");
  REQUIRE(g);
  int got = 0;
  int* q = &got;
  void* qa[] = {&q};
  REQUIRE(d->launch(*d->kernel(*g, "bump"), {1, 1, 1}, {1, 1, 1}, 0, qa));
  REQUIRE(d->launch(*d->kernel(*g, "bump"), {1, 1, 1}, {1, 1, 1}, 0, qa));
  REQUIRE(d->launch(*d->kernel(*g, "read"), {1, 1, 1}, {1, 1, 1}, 0, qa));
  CHECK(got == 10);
}

TEST_CASE("a clang error names the file, line and column", "[cpu]") {
  auto d = device();
  auto m = d->compile_module("extern \"C\" __global__ void k(float* x) {\n  x[0] = undeclared;\n}\n", "bad.cu");
  REQUIRE_FALSE(m);
  CHECK(m.error().message == "bad.cu:2:10: error: use of undeclared identifier 'undeclared'");
}

TEST_CASE("mlp's dense kernel from the sample matches a C++ reference", "[cpu]") {
  auto d = device();
  std::string src = read(std::string(KDFLOW_SOURCE_DIR) + "/samples/mlp/device.cu");
  auto m = d->compile_module(src, "device.cu");
  INFO((m ? std::string() : m.error().message));
  REQUIRE(m);
  // T_relu[j] = max(sum_k p0[k] * p1[j*1000+k] + p2[j], 0), k < 1000, one block per j, 64 threads.
  auto k = d->kernel(*m, "tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel");
  REQUIRE(k);
  // Its warp shuffles and barriers run as loops over the block's threads (region fission).
  CHECK(k->block_loop);
  CHECK_FALSE(k->fibers);
  const int out_n = 16;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(1000), w(out_n * 1000), bias(out_n), y(out_n, -7);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : bias) v = u(rng);
  float *py = y.data(), *px = x.data(), *pw = w.data(), *pb = bias.data();
  void* args[] = {&py, &px, &pw, &pb};
  REQUIRE(d->launch(*k, {out_n, 1, 1}, {64, 1, 1}, 0, args));
  for (int j = 0; j < out_n; ++j) {
    double s = bias[j];
    for (int i = 0; i < 1000; ++i) s += static_cast<double>(x[i]) * w[j * 1000 + i];
    REQUIRE(y[j] == Approx(std::max(s, 0.0)).margin(1e-4));
  }
}

TEST_CASE("every sample's device modules compile for the CPU", "[cpu]") {
  for (const char* f : {"mlp/device.cu", "attention/device.cu", "sort_scan/device.cu", "resnet18/device.cu",
                        "squeezenet/device.cu", "mobilenet/device.cu", "mlp_fp16/device.cu", "mlp_cublas/device.cu",
                        "mlp_v08/device.cu", "sort_scan_v08/device.cu", "relax_mlp/device_0.cu",
                        "relax_mlp/device_1.cu", "relax_mlp/device_2.cu", "relax_mlp/device_3.cu",
                        "relax_mlp/device_4.cu"}) {
    auto d = device(1);
    std::string src = read(std::string(KDFLOW_SOURCE_DIR) + "/samples/" + f);
    REQUIRE_FALSE(src.empty());
    auto m = d->compile_module(src, f);
    INFO(f << ": " << (m ? std::string() : m.error().message));
    CHECK(m);
  }
}

TEST_CASE("hand-written gather: an index read from memory and planted out of range is caught by the guard", "[cpu]") {
  // Hand-written (labelled: not TVM output): out[i] = in[idx[i]], the data-dependent access
  // a static footprint cannot bound (gather, take). The kernel runs in a forked child on
  // guarded buffers (the reporter armed as `replay --backend cpu --guard` arms it): in range
  // it runs without a report; idx[5] planted at 1000 (in holds 256 floats) stops it with one
  // line naming the kernel, the launch, the argument, the buffer and the byte.
  const char* src = R"(
extern "C" __global__ void gather(float* __restrict__ out, const float* __restrict__ in, const int* __restrict__ idx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[idx[i]];
})";
  auto run = [&](int planted) {
    kdflow::test::Child c = kdflow::test::run_child([&] {
      auto d = CpuDevice::create({1});
      if (!d) _exit(98);
      auto m = (*d)->compile_module(src, "hand.cu");
      if (!m) _exit(97);
      auto k = (*d)->kernel(*m, "gather");
      if (!k) _exit(96);
      kdflow::cpu::GuardedMemory mem(8);
      auto out = mem.allocate(0, "out", 64 * 4);
      auto in = mem.allocate(1, "in", 256 * 4);
      auto idx = mem.allocate(2, "idx", 64 * 4);
      if (!out || !in || !idx) _exit(95);
      int* ix = static_cast<int*>(*idx);
      for (int i = 0; i < 64; ++i) ix[i] = (i * 7) % 256;
      if (planted >= 0) ix[5] = planted;
      kdflow::cpu::LaunchContext ctx;
      ctx.where = "hand.json:/kernels/0";
      ctx.kernel = "gather";
      ctx.kernel_id = 0;
      ctx.launch_index = 0;
      const char* names[] = {"out", "in", "idx"};
      for (unsigned a = 0; a < 3; ++a) {
        kdflow::cpu::LaunchArgument la;
        la.index = a;
        la.name = names[a];
        la.buffer_id = a;  // footprints unknown: the dynamic check
        ctx.args.push_back(la);
      }
      kdflow::cpu::PreparedLaunch launch(std::move(ctx));
      if (!kdflow::cpu::arm_fault_reporter(&mem)) _exit(94);
      kdflow::cpu::set_current_launch(&launch);
      void *po = *out, *pi = *in, *px = *idx;
      void* args[] = {&po, &pi, &px};
      if (!(*d)->launch(*k, {2, 1, 1}, {32, 1, 1}, 0, args)) _exit(93);
      kdflow::cpu::set_current_launch(nullptr);
    });
    return std::make_pair(c.signal ? -c.signal : c.exit_code, c.err);
  };
  auto [ok, ok_err] = run(-1);
  INFO(ok_err);
  CHECK(ok == 0);
  CHECK(ok_err.empty());
  auto [bad, bad_err] = run(1000);
  INFO(bad_err);
  CHECK(bad == 1);
  CHECK(bad_err.find("hand.json:/kernels/0: error: guard: kernel 0 'gather' (launch 0) read byte 4000 of buffer 1 "
                     "'in' (1024 bytes), 2976 bytes past its end, through argument 1 'in'") == 0);
  CHECK(bad_err.find("a defect of the kernel") != std::string::npos);
  CHECK(std::count(bad_err.begin(), bad_err.end(), '\n') == 1);
}

namespace {

/// Runs `src`'s kernel `name` (grid 4 × block 64, one float* argument) in a forked child
/// with the fault reporter armed and no guarded buffers (as `replay --backend cpu` without
/// --guard); returns (exit status or −signal, stderr).
std::pair<int, std::string> run_unchecked(const char* src, const char* name, unsigned workers) {
  kdflow::test::Child c = kdflow::test::run_child([&] {
    auto d = CpuDevice::create({workers});
    if (!d) _exit(98);
    // compile_module alone skips the safety check (kernel_safety.h) that refuses these
    // kernels before a replay runs them: this is the runtime's own line of defence.
    auto m = (*d)->compile_module(src, "hand.cu");
    if (!m) _exit(97);
    auto k = (*d)->kernel(*m, name);
    if (!k) _exit(96);
    std::vector<float> out(4 * 64, 0.0f);
    kdflow::cpu::LaunchContext ctx;
    ctx.where = "hand.json";
    ctx.kernel = name;
    kdflow::cpu::PreparedLaunch launch(std::move(ctx));
    if (!kdflow::cpu::arm_fault_reporter(nullptr)) _exit(94);
    kdflow::cpu::set_current_launch(&launch);
    float* p = out.data();
    void* args[] = {&p};
    if (!(*d)->launch(*k, {4, 1, 1}, {64, 1, 1}, 0, args)) _exit(93);
    _exit(0);
  });
  return {c.signal ? -c.signal : c.exit_code, c.err};
}

}  // namespace

TEST_CASE("a recursion past a fiber's stack is one line naming the kernel and the block, exit 65", "[cpu]") {
  // Hand-written: unbounded recursion in a kernel that synchronises (one fiber per thread,
  // 256 KiB stacks with a guard page below each).
  const char* src = R"(
__device__ float deeper(float x, int n) { volatile float pad[64]; pad[n & 63] = x; return deeper(pad[(n + 1) & 63] + x, n + 1) * 0.5f; }
extern "C" __global__ void recurse(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = blockIdx.x == 1 && threadIdx.x == 7 ? deeper(s[0], 0) : s[threadIdx.x];
})";
  auto [code, err] = run_unchecked(src, "recurse", 1);
  INFO(err);
  CHECK(code == 65);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(err.find("hand.json: error: kernel 0 'recurse' (launch 0) overflowed its stack in block (1,0,0) (256 KiB per "
                 "CUDA thread on the CPU back end)") == 0);
}

TEST_CASE("a local array past a worker's own stack is one line naming the kernel and the block, exit 65", "[cpu]") {
  // Hand-written: 64 MiB of locals in a kernel without barriers (its blocks run as loops on
  // the workers' own stacks; the JIT probes every page, so the guard is hit, not skipped).
  const char* src = R"(
extern "C" __global__ void huge(float* out) {
  volatile float big[1 << 24];
  big[threadIdx.x * 4096] = 1.0f;
  out[blockIdx.x * 64 + threadIdx.x] = big[threadIdx.x * 4096];
})";
  for (unsigned workers : {1u, 2u}) {
    auto [code, err] = run_unchecked(src, "huge", workers);
    INFO(workers << " workers: " << err);
    CHECK(code == 65);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.find("hand.json: error: kernel 0 'huge' (launch 0) overflowed its stack in block (") == 0);
  }
}

TEST_CASE("back-to-back launches of 1, 2, 3 and 64 blocks each run every block once, on more workers than cores",
          "[cpu]") {
  // Hand-written. The worker pool wakes only the workers a launch can use and spins between
  // launches: a worker must take part in exactly the launches it was called for, and a launch
  // must not return before every block has run (its counts are read right after).
  auto d = device(4);
  CpuKernel k = compile_one(*d, R"(
extern "C" __global__ void count(unsigned* __restrict__ c, unsigned* __restrict__ last, unsigned stamp) {
  atomicAdd(&c[blockIdx.x], 1u);
  if (threadIdx.x == 0) last[blockIdx.x] = stamp;
})", "count");
  std::vector<unsigned> c(64, 0), last(64, 0);
  unsigned* pc = c.data();
  unsigned* pl = last.data();
  std::vector<unsigned> want(64, 0);
  const uint32_t grids[] = {1, 2, 3, 64, 2, 1, 64, 3};
  for (unsigned stamp = 1; stamp <= 2000; ++stamp) {
    const uint32_t g = grids[stamp % 8];
    void* args[] = {&pc, &pl, &stamp};
    REQUIRE(d->launch(k, {g, 1, 1}, {4, 1, 1}, 0, args));
    for (uint32_t b = 0; b < g; ++b) {
      want[b] += 4;
      REQUIRE(last[b] == stamp);  // every block of this launch ran before it returned
    }
  }
  CHECK(c == want);
}

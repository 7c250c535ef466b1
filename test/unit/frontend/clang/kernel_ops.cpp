// The operation count (issue 21): floating-point operations of small hand-written kernels
// (labelled: test snippets, not TVM output), one construct per case, counted by hand; and
// real kernels from the samples (samples/mlp, samples/relax_mlp) with their hand counts.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "kdflow/frontend/device_analyzer.h"
#include "kdflow/analysis/kernel_ops.h"
#include "test_util.h"

using namespace kdflow;

namespace {

/// The operations of kernel `name` (default: the first) of `src` for one launch.
KernelOps ops(const std::string& src, std::array<int64_t, 3> grid, std::array<int64_t, 3> block,
              std::vector<std::optional<int64_t>> scalars = {}, const std::string& name = "") {
  auto r = analyze_device_source(src, "t.cu", /*strict=*/true, /*footprints=*/true);
  if (!r) FAIL(r.error().message);
  REQUIRE(r->op_models.size() == r->functions.size());
  REQUIRE(!r->op_models.empty());
  size_t i = 0;
  while (!name.empty() && i < r->op_models.size() && r->op_models[i].name != name) ++i;
  REQUIRE(i < r->op_models.size());
  LaunchShape l;
  l.grid = grid;
  l.block = block;
  l.scalars = std::move(scalars);
  l.scalars.resize(r->functions[i].params.size());
  return count_kernel_ops(r->op_models[i], l);
}

uint64_t n(const KernelOps& k, KernelOps::Kind kind, KernelOps::Precision p = KernelOps::F32) {
  return k.counts[kind][p];
}

/// `extern "C" __global__ void k(float* __restrict__ out, float* __restrict__ in, int n) { body }`
std::string kernel(const std::string& body, const std::string& before = "") {
  return before + "extern \"C\" __global__ void k(float* __restrict__ out, float* __restrict__ in, int n) {\n" + body +
         "\n}\n";
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("kernel ops: elementwise under an `if (i < n)` guard counts the threads that pass it", "[kernel_ops]") {
  std::string src = kernel(
      "  if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < n)\n"
      "    out[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] = in[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] * 2.f + "
      "1.f;");
  KernelOps k = ops(src, {4, 1, 1}, {256, 1, 1}, {std::nullopt, std::nullopt, 1000});
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::Mul) == 1000);
  CHECK(n(k, KernelOps::AddSub) == 1000);
  CHECK(k.flops == 2000);
  CHECK(k.reasons.empty());
  // Executed global accesses: 1000 loads and 1000 stores of 4 bytes.
  CHECK(k.load_bytes == 4000u);
  CHECK(k.store_bytes == 4000u);
  CHECK(k.bytes_exact);
  // Integer index arithmetic is not counted; the scalar is needed (never a guess).
  KernelOps u = ops(src, {4, 1, 1}, {256, 1, 1});
  CHECK(u.status == KernelOps::Status::Unknown);
  CHECK(u.reasons == std::vector<std::string>{reject::kScalarArgument});
}

TEST_CASE("kernel ops: a loop with a guard on its variable and a quotient (TVM's reduction)", "[kernel_ops]") {
  // k_outer 0..14: all 64 threads; k_outer 15: 120 + (tx >> 3) < 125, tx < 40: 15·64 + 40 = 1000 per block.
  std::string src = kernel(
      "  float acc[1];\n  acc[0] = 0.f;\n"
      "  for (int k_outer = 0; k_outer < 16; ++k_outer) {\n"
      "    if (((k_outer * 8) + (((int)threadIdx.x) >> 3)) < 125)\n"
      "      acc[0] = acc[0] + in[(k_outer * 64) + ((int)threadIdx.x)];\n"
      "  }\n"
      "  out[((int)blockIdx.x)] = acc[0];");
  KernelOps k = ops(src, {10, 1, 1}, {64, 1, 1});
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::AddSub) == 10000);
  CHECK(k.flops == 10000);
}

TEST_CASE("kernel ops: a loop with a step and compound assignments", "[kernel_ops]") {
  // k = 0, 3, 6, 9: four trips; `*=` and `-=` count as mul and add/sub.
  std::string src = kernel(
      "  float a = in[0];\n"
      "  for (int k = 0; k < 10; k += 3) { a *= 1.5f; a -= 0.5f; }\n"
      "  out[((int)threadIdx.x)] = a;");
  KernelOps k = ops(src, {1, 1, 1}, {32, 1, 1});
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::Mul) == 4 * 32);
  CHECK(n(k, KernelOps::AddSub) == 4 * 32);
}

TEST_CASE("kernel ops: kinds and precisions (fma 2, special, compare, fp16, half2, fp64)", "[kernel_ops]") {
  std::string src =
      "#include <cuda_fp16.h>\n"
      "extern \"C\" __global__ void k(float* __restrict__ out, half* __restrict__ h, half2* __restrict__ h2, "
      "double* __restrict__ d) {\n"
      "  int i = ((int)threadIdx.x);\n"
      "  out[i] = fmaxf(__expf(out[i]), fmaf(out[i], 2.f, 1.f));\n"
      "  h[i] = h[i] * h[i] + h[i];\n"
      "  h2[i] = __hfma2(h2[i], h2[i], h2[i]);\n"
      "  d[i] = d[i] / 3.0;\n"
      "  out[i] = (float)h[i];\n"
      "}\n";
  KernelOps k = ops(src, {2, 1, 1}, {64, 1, 1});
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::Special) == 128);
  CHECK(n(k, KernelOps::Fma) == 128);
  CHECK(n(k, KernelOps::MinMaxCmp) == 128);
  CHECK(n(k, KernelOps::Mul, KernelOps::F16) == 128);
  CHECK(n(k, KernelOps::AddSub, KernelOps::F16) == 128);
  CHECK(n(k, KernelOps::Fma, KernelOps::F16) == 256);  // half2: two lanes
  CHECK(n(k, KernelOps::Div, KernelOps::F64) == 128);
  // special 128 + fma 2·128 + fp16 mul 128 + add 128 + half2 fma 2·256 + fp64 div 128; compares 0.
  CHECK(k.flops == 128 + 256 + 128 + 128 + 512 + 128);
}

TEST_CASE("kernel ops: a data-dependent guard gives an upper bound, a while loop or an unknown call unknown",
          "[kernel_ops]") {
  KernelOps g = ops(kernel("  int i = ((int)threadIdx.x);\n  if (in[i] > 0.f) out[i] = in[i] * 3.f;"), {1, 1, 1},
                    {100, 1, 1});
  CHECK(g.status == KernelOps::Status::UpperBound);
  CHECK(g.reasons == std::vector<std::string>{ops_reason::kGuardDropped});
  CHECK(n(g, KernelOps::Mul) == 100);        // at most: every thread passes the guard
  CHECK(n(g, KernelOps::MinMaxCmp) == 100);  // the comparison itself runs in every thread: exact
  KernelOps w = ops(kernel("  float a = in[0];\n  while (a < 10.f) a = a * 2.f;\n  out[0] = a;"), {1, 1, 1}, {1, 1, 1});
  CHECK(w.status == KernelOps::Status::Unknown);
  CHECK(w.reasons == std::vector<std::string>{reject::kUnboundedLoop});
  KernelOps c = ops(kernel("  out[0] = f(in[0]) + 1.f;", "__device__ float f(float x) { return x * x; }\n"), {1, 1, 1},
                    {1, 1, 1});
  CHECK(c.status == KernelOps::Status::Unknown);
  CHECK(c.reasons == std::vector<std::string>{"call to f (not counted)"});
  CHECK(n(c, KernelOps::AddSub) == 1);  // what could be counted still is
}

TEST_CASE("kernel ops: samples/mlp's first dense kernel, counted by hand", "[kernel_ops][samples]") {
  // tvmgen_default_fused_nn_dense_add_nn_relu_kernel<<<400, 64>>>: the k loop (2 trips, the second
  // for tx < 36) does 100 multiply-adds per output = 40,000 mul + 40,000 add; every one of the 64
  // threads runs the 5-step warp shuffle tree and the 1-step cross-warp add: 6·64·400 = 153,600
  // adds; the bias add 400 (thread 0); relu's max 400. 2·M·N·K = 80,000 of the 234,000.
  std::string src = read(test::sample_dir("mlp") + "/device.cu");
  KernelOps k = ops(src, {400, 1, 1}, {64, 1, 1}, {}, "tvmgen_default_fused_nn_dense_add_nn_relu_kernel");
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::Mul) == 40000);
  CHECK(n(k, KernelOps::AddSub) == 40000 + 153600 + 400);
  CHECK(n(k, KernelOps::MinMaxCmp) == 400);
  CHECK(k.flops == 234000);
  // The tree's adds are the reduction: what is left is the formula's 2·M·N·K + the bias.
  CHECK(k.reduction_flops == 153600);
  CHECK(k.flops - k.reduction_flops == 80000 + 400);
  // Loads: p0 and p1 once per multiply-add (2 · 40,000 · 4 B) and the bias (400 · 4 B);
  // stores: T_relu (400 · 4 B). (p0 is re-read by every block: 32,000 B loaded per 400 B distinct.)
  CHECK(k.load_bytes == 2u * 40000 * 4 + 400 * 4);
  CHECK(k.store_bytes == 400u * 4);
}

TEST_CASE("kernel ops: samples/relax_mlp's matmul kernels give 2·M·N·K in their loops", "[kernel_ops][samples]") {
  // fused_matmul1_add1_relu1_kernel<<<100, (10, 16)>>>: 25 trips × 16,000 threads = 400,000
  // multiply-adds (M·N·K = 1·1000·400); the shared-memory tree 8+4+2+1 adds for 10 columns per
  // block = 15,000; the bias 1,000; relu's max 1,000.
  std::string src = read(test::sample_dir("relax_mlp") + "/device_0.cu");
  KernelOps k = ops(src, {100, 1, 1}, {10, 16, 1}, {}, "fused_matmul1_add1_relu1_kernel");
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::Mul) == 400000);
  CHECK(n(k, KernelOps::AddSub) == 400000 + 15000 + 1000);
  CHECK(n(k, KernelOps::MinMaxCmp) == 1000);
  // Two slots of the same __shared__ array added: the tree, counted as the reduction.
  CHECK(k.reduction_flops == 15000);
}

TEST_CASE("kernel ops: cross-thread reduction trees are told apart (shuffle results, shared slots)", "[kernel_ops]") {
  // Hand-written (a test snippet, not TVM output), TVM's shapes of a reduction: a value from a
  // warp shuffle added in (assigned, and initialised), a += of one, and two slots of one
  // __shared__ array added; a shared value added to a register, and a plain add, are not.
  std::string src = kernel(
      "  float r[1];\n  float t[1];\n  __shared__ float buf[64];\n"
      "  r[0] = in[((int)threadIdx.x)];\n"
      "  t[0] = __shfl_down_sync(0xffffffffu, r[0], 16, 32);\n"
      "  r[0] = (r[0] + t[0]);\n"
      "  float u = __shfl_down_sync(0xffffffffu, r[0], 8, 32);\n"
      "  r[0] += u;\n"
      "  buf[((int)threadIdx.x)] = r[0];\n"
      "  __syncthreads();\n"
      "  if (((int)threadIdx.x) < 32) {\n"
      "    ((volatile float*)buf)[((int)threadIdx.x)] = (((volatile float*)buf)[((int)threadIdx.x)] + "
      "((volatile float*)buf)[(((int)threadIdx.x) + 32)]);\n"
      "  }\n"
      "  __syncthreads();\n"
      "  out[((int)threadIdx.x)] = (buf[0] + r[0]) + 1.f;");
  KernelOps k = ops(src, {1, 1, 1}, {64, 1, 1});
  CHECK(k.status == KernelOps::Status::Exact);
  CHECK(n(k, KernelOps::AddSub) == 64 * 2 + 32 + 64 * 2);
  CHECK(k.reduction_flops == 64 * 2 + 32);
}

TEST_CASE("kernel ops: domain counting (box, quotient, empty, unbounded, budget)", "[kernel_ops]") {
  // Variables: 0 threadIdx.x, 1 a loop variable, 2 q = floor(v0 / 3).
  std::vector<AffVar> vars = {{AffVar::Kind::ThreadIdx, 0}, {AffVar::Kind::Local, 0}, {AffVar::Kind::Local, 0}};
  auto ge = [](int64_t c, std::vector<std::pair<int, int64_t>> t) {
    AffCond a;
    a.op = AffCond::Op::Ge0;
    a.e.c = c;
    a.e.terms = std::move(t);
    return a;
  };
  auto all = [](std::vector<AffCond> kids) {
    AffCond a;
    a.op = AffCond::Op::And;
    a.kids = std::move(kids);
    return a;
  };
  LaunchShape l;
  l.grid = {3, 1, 1};
  l.block = {9, 1, 1};
  std::string why;
  // 0 <= v1 <= 4 (a loop of 5) for every thread of 3 blocks × 9 threads: 135.
  CHECK(count_domain_points(all({ge(0, {{1, 1}}), ge(4, {{1, -1}})}), vars, l, 1000, &why) == 135u);
  // q = floor(tx / 3) (0 <= tx - 3q <= 2) and q < 2: tx < 6, 6 threads × 3 blocks = 18.
  AffCond q = all({ge(0, {{0, 1}, {2, -3}}), ge(2, {{0, -1}, {2, 3}}), ge(1, {{2, -1}})});
  CHECK(count_domain_points(q, vars, l, 1000, &why) == 18u);
  // Empty: v1 >= 5 and v1 <= 4.
  CHECK(count_domain_points(all({ge(-5, {{1, 1}}), ge(4, {{1, -1}})}), vars, l, 1000, &why) == 0u);
  // A loop variable with no upper bound: unknown.
  CHECK(!count_domain_points(ge(0, {{1, 1}}), vars, l, 1000, &why));
  CHECK(why == ops_reason::kUnbounded);
  // A triangle (0 <= v1 <= tx): 3 × (1 + 2 + ... + 9) = 135, one step per thread; past
  // the step budget it is unknown, never a guess.
  AffCond tri = all({ge(0, {{1, 1}}), ge(0, {{0, 1}, {1, -1}})});
  CHECK(count_domain_points(tri, vars, l, 1000, &why) == 135u);
  CHECK(!count_domain_points(tri, vars, l, 3, &why));
  CHECK(why == ops_reason::kTooCostly);
}

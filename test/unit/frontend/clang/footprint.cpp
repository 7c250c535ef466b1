// Static footprints (issue 12): the affine extraction (lib/frontend/clang/footprint_affine.cpp) and
// the isl bounds (lib/analysis/footprint/footprint_isl.cpp) on small hand-written kernels, one
// construct per case (labelled: these are test snippets, not TVM output), and squeezenet's
// padded-conv guard copied from the real sample.
#include <catch2/catch.hpp>

#include <array>
#include <optional>
#include <string>

#include "kdflow/frontend/device_analyzer.h"
#include "kdflow/analysis/footprint.h"

using namespace kdflow;

namespace {

using R = std::optional<std::array<int64_t, 2>>;
R range(int64_t lo, int64_t hi) { return std::array<int64_t, 2>{lo, hi}; }

/// The footprint of parameter `param` of the first kernel in `src` for one launch.
Footprint fp(const std::string& src, size_t param, std::array<int64_t, 3> grid, std::array<int64_t, 3> block,
             std::vector<std::optional<int64_t>> scalars = {}, int count_variables = 4) {
  auto r = analyze_device_source(src, "t.cu", /*strict=*/true, /*footprints=*/true);
  if (!r) FAIL(r.error().message);
  REQUIRE(r->footprint_models.size() == r->functions.size());
  REQUIRE(!r->footprint_models.empty());
  LaunchShape l;
  l.grid = grid;
  l.block = block;
  l.scalars = std::move(scalars);
  l.scalars.resize(r->footprint_models[0].params.size());
  return compute_footprint(r->footprint_models[0], param, l, count_variables);
}

/// `extern "C" __global__ void k(float* __restrict__ out, float* __restrict__ in, int n) { body }`
std::string kernel(const std::string& body, const std::string& before = "") {
  return before + "extern \"C\" __global__ void k(float* __restrict__ out, float* __restrict__ in, int n) {\n" + body +
         "\n}\n";
}

}  // namespace

TEST_CASE("footprint: elementwise under an `if (i < n)` guard with a scalar argument", "[footprint]") {
  std::string src = kernel(
      "  if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < n)\n"
      "    out[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] = in[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] * 2.f;");
  Footprint o = fp(src, 0, {4, 1, 1}, {256, 1, 1}, {std::nullopt, std::nullopt, 1000});
  CHECK(o.unknown == "");
  CHECK(o.read == R());
  CHECK(o.write == range(0, 4000));
  CHECK(o.write_bytes == 4000);
  CHECK(o.elements == 1000);
  CHECK(o.exact);
  Footprint i = fp(src, 1, {4, 1, 1}, {256, 1, 1}, {std::nullopt, std::nullopt, 1000});
  CHECK(i.read == range(0, 4000));
  CHECK(i.write == R());
  // The scalar is needed: without it the footprint is unknown, never a guess.
  CHECK(fp(src, 0, {4, 1, 1}, {256, 1, 1}).unknown == reject::kScalarArgument);
}

TEST_CASE("footprint: a loop with constant bounds and a reduction into a local array", "[footprint]") {
  std::string src = kernel(
      "  float acc[1];\n  acc[0] = 0.f;\n"
      "  for (int k_outer = 0; k_outer < 16; ++k_outer) {\n"
      "    if (((k_outer * 8) + (((int)threadIdx.x) >> 3)) < 125)\n"
      "      acc[0] = acc[0] + in[(k_outer * 64) + ((int)threadIdx.x)];\n"
      "  }\n"
      "  out[((int)blockIdx.x)] = acc[0];");
  Footprint i = fp(src, 1, {10, 1, 1}, {64, 1, 1});
  CHECK(i.read == range(0, 4000));  // the guard stops at element 999
  CHECK(i.read_bytes == 4000);
  Footprint o = fp(src, 0, {10, 1, 1}, {64, 1, 1});
  CHECK(o.write == range(0, 40));
  CHECK(o.read == R());
}

TEST_CASE("footprint: `/` and `%` by constants (quasi-affine)", "[footprint]") {
  std::string src = kernel("  out[(((int)threadIdx.x) / 3) * 10 + (((int)threadIdx.x) % 3)] = 0.f;");
  Footprint o = fp(src, 0, {1, 1, 1}, {9, 1, 1});
  CHECK(o.write == range(0, 92));  // element 22 is the last
  CHECK(o.write_bytes == 36);      // 9 distinct elements
  CHECK(o.elements == 9);
}

TEST_CASE("footprint: `>>` and `&` by constants", "[footprint]") {
  std::string src = kernel("  out[(((int)threadIdx.x) >> 2) + ((((int)threadIdx.x) & 3) * 8)] = in[0];");
  Footprint o = fp(src, 0, {1, 1, 1}, {16, 1, 1});
  CHECK(o.write == range(0, 4 * (3 + 3 * 8 + 1)));
  CHECK(o.elements == 16);
}

TEST_CASE("footprint: squeezenet's padded conv reads p0 only under its guard", "[footprint]") {
  // Copied from samples/squeezenet/device.cu (tvmgen_default_fused_nn_conv2d_add_nn_relu_kernel).
  std::string src =
      "extern \"C\" __global__ void k(float* __restrict__ T_relu, float* __restrict__ p0, float* __restrict__ p1, "
      "float* __restrict__ p2) {\n"
      "  float conv2d_nchw[1];\n  __shared__ float pad_temp_shared[1];\n  __shared__ float p1_shared[1];\n"
      "  conv2d_nchw[0] = 0.000000e+00f;\n"
      "  for (int rc_outer = 0; rc_outer < 3; ++rc_outer) {\n"
      "    for (int ry_outer = 0; ry_outer < 7; ++ry_outer) {\n"
      "      for (int rx_outer = 0; rx_outer < 7; ++rx_outer) {\n"
      "        __syncthreads();\n"
      "        pad_temp_shared[0] = (((((3 <= ((((int)blockIdx.y) * 2) + ry_outer)) && (((((int)blockIdx.y) * 2) + "
      "ry_outer) < 227)) && (3 <= ((((int)blockIdx.x) * 2) + rx_outer))) && (((((int)blockIdx.x) * 2) + rx_outer) < "
      "227)) ? p0[((((((rc_outer * 50176) + (((int)blockIdx.y) * 448)) + (ry_outer * 224)) + (((int)blockIdx.x) * 2)) "
      "+ rx_outer) - 675)] : 0.000000e+00f);\n"
      "        p1_shared[0] = p1[((((((int)blockIdx.z) * 147) + (rc_outer * 49)) + (ry_outer * 7)) + rx_outer)];\n"
      "        __syncthreads();\n"
      "        conv2d_nchw[0] = (conv2d_nchw[0] + (pad_temp_shared[0] * p1_shared[0]));\n"
      "      }\n    }\n  }\n"
      "  T_relu[(((((int)blockIdx.z) * 12544) + (((int)blockIdx.y) * 112)) + ((int)blockIdx.x))] = "
      "max((conv2d_nchw[0] + p2[((int)blockIdx.z)]), 0.000000e+00f);\n}\n";
  const std::array<int64_t, 3> grid{112, 112, 64}, block{1, 1, 1};
  Footprint p0 = fp(src, 1, grid, block);
  CHECK(p0.unknown == "");
  CHECK(p0.read == range(0, 3 * 224 * 224 * 4));  // without the guard it would start at -675 elements
  CHECK(p0.read_bytes == 3 * 224 * 224 * 4);  // counted (three loop variables allowed here)
  // extract's default counts no access with a loop or quotient variable: span only, never a guess
  Footprint p0_default = fp(src, 1, grid, block, {}, kCountVariables);
  CHECK(p0_default.read == p0.read);
  CHECK_FALSE(p0_default.read_bytes.has_value());
  CHECK_FALSE(p0_default.elements.has_value());
  CHECK(p0.exact);
  CHECK(fp(src, 2, grid, block).read == range(0, 64 * 147 * 4));
  CHECK(fp(src, 3, grid, block).read == range(0, 64 * 4));
  Footprint out = fp(src, 0, grid, block);
  CHECK(out.write == range(0, 64 * 112 * 112 * 4));
  CHECK(out.read == R());
}

TEST_CASE("footprint: reject reasons (data-dependent, non-affine, unbounded loop, pointer passed)", "[footprint]") {
  CHECK(fp(kernel("  out[(int)in[threadIdx.x]] = 1.f;"), 0, {1, 1, 1}, {32, 1, 1}).unknown ==
        reject::kDataDependentIndex);
  // the index array itself is proven
  CHECK(fp(kernel("  out[(int)in[threadIdx.x]] = 1.f;"), 1, {1, 1, 1}, {32, 1, 1}).read == range(0, 128));
  CHECK(fp(kernel("  out[((int)threadIdx.x) * ((int)threadIdx.x)] = 1.f;"), 0, {1, 1, 1}, {32, 1, 1}).unknown ==
        reject::kNonAffine);
  CHECK(fp(kernel("  int i = 0;\n  while (in[i] > 0.f) { out[i] = 0.f; ++i; }"), 0, {1, 1, 1}, {1, 1, 1}).unknown ==
        reject::kUnboundedLoop);
  CHECK(fp(kernel("  f(out);", "__device__ void f(float* p) { p[0] = 1.f; }\n"), 0, {1, 1, 1}, {1, 1, 1}).unknown ==
        reject::kPointerPassed);
  // a local reassigned in a loop is not followed
  CHECK(fp(kernel("  float* p = out;\n  for (int i = 0; i < 4; ++i) { p[0] = 1.f; p = p + 1; }"), 0, {1, 1, 1},
           {1, 1, 1})
            .unknown == reject::kPointerArithmetic);
}

TEST_CASE("footprint: local aliases, vector casts and ?: in an index", "[footprint]") {
  CHECK(fp(kernel("  float* p = in + 4;\n  out[0] = p[threadIdx.x];"), 1, {1, 1, 1}, {8, 1, 1}).read == range(16, 48));
  Footprint v = fp(kernel("  ((float4*)(out + ((int)threadIdx.x) * 4))[0] = ((float4*)(in + ((int)threadIdx.x) * 4))[0];"),
                   0, {1, 1, 1}, {8, 1, 1});
  CHECK(v.write == range(0, 128));
  CHECK(v.read == R());
  CHECK(v.write_bytes == 128);
  CHECK(fp(kernel("  out[0] = in[((int)threadIdx.x) < 4 ? ((int)threadIdx.x) : 0];"), 1, {1, 1, 1}, {32, 1, 1}).read ==
        range(0, 16));
  // __shared__ and local arrays are not the arguments' footprints
  Footprint s = fp(kernel("  __shared__ float s[64];\n  s[threadIdx.x] = in[threadIdx.x];\n  __syncthreads();\n"
                          "  out[threadIdx.x] = s[63 - threadIdx.x];"),
                   1, {1, 1, 1}, {64, 1, 1});
  CHECK(s.read == range(0, 256));
  CHECK(s.write == R());
}

TEST_CASE("footprint: a data-dependent guard gives a superset (exact: false)", "[footprint]") {
  Footprint f = fp(kernel("  if (in[0] > 0.f) out[threadIdx.x] = 1.f;"), 0, {1, 1, 1}, {32, 1, 1});
  CHECK(f.unknown == "");
  CHECK(f.write == range(0, 128));
  CHECK_FALSE(f.exact);
  CHECK_FALSE(f.write_bytes.has_value());  // a superset's count is not the bytes touched
}

TEST_CASE("footprint: a very deep condition is a reject reason, not a crash", "[footprint]") {
  std::string c = "((int)threadIdx.x) < 1";
  for (int i = 0; i < 3000; ++i) c += " && ((int)threadIdx.x) < 1";
  Footprint f = fp(kernel("  if (" + c + ") out[threadIdx.x] = 1.f;"), 0, {1, 1, 1}, {32, 1, 1});
  CHECK(f.unknown == reject::kUnsupported);
}

TEST_CASE("footprint: lanes of an integer vector built by make_longlong2 index a gather (TVM 0.26)", "[footprint]") {
  // TVM 0.26 writes a two-element gather as `longlong2 v = make_longlong2(a, b);
  // make_float2(p[v.x], p[v.y])` (ffi_batch_mlp's matmuls); hand-written here with the same shape.
  std::string src = kernel(
      "  longlong2 v_ = make_longlong2(((long long)threadIdx.x) * 2, ((long long)threadIdx.x) * 2 + 1);\n"
      "  float2 f = make_float2(in[v_.x], in[v_.y]);\n"
      "  out[threadIdx.x] = f.x + f.y;");
  Footprint i = fp(src, 1, {1, 1, 1}, {8, 1, 1});
  CHECK(i.unknown == "");
  CHECK(i.read == range(0, 64));  // elements 0 .. 15
  CHECK(i.exact);
  // A lane changed after the vector is built is data: the index is not followed.
  std::string changed = kernel(
      "  longlong2 v_ = make_longlong2(((long long)threadIdx.x) * 2, 0);\n"
      "  v_.y = (long long)in[0];\n"
      "  out[threadIdx.x] = in[v_.x] + in[v_.y];");
  CHECK(fp(changed, 1, {1, 1, 1}, {8, 1, 1}).unknown == reject::kDataDependentIndex);
  // A float vector's lanes are values, never indices.
  std::string floats = kernel(
      "  float2 g = make_float2(1.f, 2.f);\n"
      "  out[threadIdx.x] = in[(int)g.x];");
  CHECK(fp(floats, 1, {1, 1, 1}, {8, 1, 1}).unknown != "");
}

TEST_CASE("footprint: a kernel indexing by `/ dim` and `% dim` is modelled again with a launch's scalars", "[footprint]") {
  // sort_scan's topk_kernel_4 divides by its scalar argument `dim` (hand-written here with
  // the same shape): non-affine for the kernel, quasi-affine for a launch that passes dim = 5.
  std::string src = kernel(
      "  int i = ((int)blockIdx.x) * 512 + ((int)threadIdx.x);\n"
      "  if (i < n * 4) out[i] = in[(i / n) * 1000 + (i % n)];");
  auto r = analyze_device_source(src, "t.cu", /*strict=*/true, /*footprints=*/true);
  REQUIRE(r);
  REQUIRE(r->specializable.size() == 1);
  CHECK(r->specializable[0] == 1);
  REQUIRE(r->specializer);
  LaunchShape l;
  l.grid = {1, 1, 1};
  l.block = {512, 1, 1};
  l.scalars = {std::nullopt, std::nullopt, 5};
  CHECK(compute_footprint(r->footprint_models[0], 1, l).unknown == reject::kNonAffine);
  KernelOpModel ops;
  KernelModel own = r->specializer->specialize(0, l.scalars, &ops);
  Footprint in = compute_footprint(own, 1, l);
  CHECK(in.unknown == "");
  CHECK(in.read == range(0, (3 * 1000 + 4) * 4 + 4));  // elements 0..4, 1000..1004, ..., 3000..3004
  CHECK(in.read_bytes == std::nullopt);                  // quotients: the span only
  CHECK(compute_footprint(own, 0, l).write == range(0, 80));
  // A kernel whose models are complete keeps no parse for this.
  auto plain = analyze_device_source(kernel("  if (threadIdx.x < n) out[threadIdx.x] = in[threadIdx.x];"), "t.cu", true, true);
  REQUIRE(plain);
  CHECK(plain->specializable == std::vector<char>{0});
  CHECK_FALSE(plain->specializer);
}

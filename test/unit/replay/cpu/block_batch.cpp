// Batches of one-thread blocks (lib/replay/cpu/region_fission.h, CpuKernel::tile): the tile the
// back end chooses from a kernel's grid, hand-written kernels (each labelled, one construct
// each) batched and run one block per call with the same bytes out, the kernels that are not
// batched and why, a launch the tile does not fit, a trap inside a batch; and a real sample's
// every kernel output the same bytes batched and not.
#include <catch2/catch.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kdflow/replay/cpu_kernels.h"
#include "test_util.h"
#include "unit/replay/cpu/cpu_test_util.h"

namespace fs = std::filesystem;
using kdflow::cpu::BlockTile;
using kdflow::cpu::choose_block_tile;
using kdflow::cpu::CpuKernel;
using kdflow::cpu::test::device;

namespace {

BlockTile tile_for(uint32_t gx, uint32_t gy, uint32_t gz, unsigned lanes) {
  return choose_block_tile({{gx, gy, gz}}, lanes);
}

/// Kernel `name` of `src` compiled with `tile` (as the plan's only one-thread kernel) and
/// without, each run on a (float*, const float*) pair of n floats; whether the outputs agree
/// bit for bit. `batched` gets the tiled compile's kernel.
bool batched_as_one_block(const std::string& src, const std::string& name, std::array<uint32_t, 3> grid, size_t n,
                          BlockTile tile, CpuKernel* batched) {
  std::vector<float> in(4096);  // every kernel below reads within it
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7919) % 1000) / 10.0f - 50.0f;
  std::vector<float> out_a(n, -1.0f), out_b(n, -1.0f);
  auto run = [&](const std::map<std::string, BlockTile>& tiles, std::vector<float>* out, CpuKernel* k_out) {
    auto d = device();
    auto m = d->compile_module(src, "hand.cu", {name}, tiles);
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    auto k = d->kernel(*m, name);
    REQUIRE(k);
    *k_out = *k;
    float* o = out->data();
    const float* i = in.data();
    void* args[] = {&o, &i};
    auto s = d->launch(*k, grid, {1, 1, 1}, 64, args);  // 64 bytes of dynamic shared memory
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s);
  };
  CpuKernel plain;
  run({{name, tile}}, &out_a, batched);
  run({}, &out_b, &plain);
  CHECK(plain.tile.w == 0);
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&out_a[i], &out_b[i], sizeof(float)) != 0) {
      UNSCOPED_INFO("element " << i << ": batched " << out_a[i] << ", one block per call " << out_b[i]);
      return false;
    }
  return true;
}

// Hand-written, TVM's untuned convolution's shape with what a batch must keep apart: shared
// staging and a private accumulator per block (arrays used element by element, laid out lane
// by lane; `two` and `pair`, reached through a pointer, one copy per lane), reduction loops every block runs alike (one
// bounded by a local computed from blockIdx.z, which a batch does not vary), a loop bounded by
// blockIdx.x (differs per block: stays inside the thread loop), a condition on blockIdx.y, a
// shuffle and __activemask() of the block's one thread.
const char* const kConv = R"(
extern "C" __global__ void conv(float* __restrict__ out, const float* __restrict__ in) {
  float acc[1];
  float two[2];
  __shared__ float stage[2];
  __shared__ alignas(16) float wide[4];
  __shared__ float pair[2];
  acc[0] = 0.0f;
  (two + 1)[0] = (float)blockIdx.x;
  int depth = 3 + (int)blockIdx.z;
  for (int c = 0; c < depth; ++c) {
    for (int k = 0; k < 3; ++k) {
      __syncthreads();
      stage[0] = in[(c * 3 + k + blockIdx.x * 2 + blockIdx.y * 5) % 4096];
      stage[1] = (blockIdx.y > 1) ? in[(c + k + blockIdx.x) % 4096] : 0.5f;
      __syncthreads();
      acc[0] = acc[0] + stage[0] * stage[1];
    }
  }
  for (int e = 0; e < (int)blockIdx.x % 4; ++e) acc[0] = acc[0] * 0.75f + (float)e;
  wide[blockIdx.x % 4] = acc[0];
  unsigned mask = __activemask();
  float other = __shfl_down_sync(mask, acc[0], 1, 32);
  ((float*)pair)[blockIdx.y % 2] = two[1];
  out[(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x] =
      wide[blockIdx.x % 4] + other * 0.125f + pair[blockIdx.y % 2];
}
)";

}  // namespace

TEST_CASE("block batches: the tile follows the grid and the host's vectors", "[cpu][batch]") {
  // A row as long as a vector or longer: lanes along x only, the divisor of the row that fills
  // the most 16-float vectors (at most 64 lanes).
  CHECK(tile_for(56, 56, 64, 16).w == 56);
  CHECK(tile_for(56, 56, 64, 16).h == 1);
  CHECK(tile_for(112, 112, 64, 16).w == 56);
  CHECK(tile_for(28, 28, 128, 16).w == 28);
  CHECK(tile_for(13, 13, 1000, 16).w == 13);  // shorter than a vector, 13 rows too many
  CHECK(tile_for(13, 13, 1000, 16).h == 1);
  CHECK(tile_for(1000, 1, 1, 16).w == 50);
  // Shorter rows: whole rows, as many as fill vectors best.
  CHECK(tile_for(7, 7, 512, 16).w == 7);
  CHECK(tile_for(7, 7, 512, 16).h == 7);
  CHECK(tile_for(14, 14, 256, 16).w == 14);
  CHECK(tile_for(14, 14, 256, 16).h == 2);
  // Vectors of 8 (AVX2): 12 is a row of its own.
  CHECK(tile_for(12, 10, 1, 8).w == 12);
  CHECK(tile_for(12, 10, 1, 8).h == 1);
  // None: one block in x and y, or several grids for one kernel.
  CHECK(tile_for(1, 1, 512, 16).w == 0);
  CHECK(choose_block_tile({{56, 56, 64}, {28, 28, 64}}, 16).w == 0);
}

TEST_CASE("block batches: a one-thread kernel batched leaves the bytes it leaves one block per call",
          "[cpu][batch]") {
  CpuKernel k;
  // One row of 8 blocks per call (x affine in the lane), 4 x 3 x 2 blocks per call (rows), and
  // a tile as wide as the grid.
  CHECK(batched_as_one_block(kConv, "conv", {16, 3, 2}, 16 * 3 * 2, BlockTile{8, 1}, &k));
  CHECK(k.tile.w == 8);
  CHECK(k.tile.h == 1);
  CHECK(k.one_thread);
  CHECK(k.block_loop);
  CHECK_FALSE(k.fibers);
  CHECK(k.unbatched_why.empty());
  CHECK(batched_as_one_block(kConv, "conv", {4, 6, 2}, 4 * 6 * 2, BlockTile{4, 3}, &k));
  CHECK(k.tile.h == 3);
  CHECK(batched_as_one_block(kConv, "conv", {5, 1, 3}, 5 * 3, BlockTile{5, 1}, &k));
  CHECK(k.tile.w == 5);
}

TEST_CASE("block batches: kernels a batch would change run one block per call, with the reason", "[cpu][batch]") {
  // Hand-written, one construct each.
  const std::map<std::string, std::string> cases = {
      {"a parameter the kernel assigns",
       "extern \"C\" __global__ void k(float* __restrict__ out, const float* __restrict__ in) {\n"
       "  out += blockIdx.x;\n  out[0] = in[blockIdx.x];\n}\n"},
      {"a return, goto or label",
       "extern \"C\" __global__ void k(float* __restrict__ out, const float* __restrict__ in) {\n"
       "  if (blockIdx.x > 5) return;\n  out[blockIdx.x] = in[blockIdx.x];\n}\n"},
      {"dynamic shared memory",
       "extern \"C\" __global__ void k(float* __restrict__ out, const float* __restrict__ in) {\n"
       "  extern __shared__ float buf[];\n  buf[0] = in[blockIdx.x];\n  __syncthreads();\n"
       "  out[blockIdx.x] = buf[0];\n}\n"},
  };
  for (const auto& [why, src] : cases) {
    INFO(why);
    CpuKernel k;
    CHECK(batched_as_one_block(src, "k", {8, 1, 1}, 8, BlockTile{4, 1}, &k));
    CHECK(k.tile.w == 0);
    CHECK(k.unbatched_why == why);
  }
}

TEST_CASE("block batches: a launch the tile does not fit stops, a trap names the batch's blocks", "[cpu][batch]") {
  auto d = device();
  auto m = d->compile_module(R"(
extern "C" __global__ void k(float* __restrict__ out, const float* __restrict__ in) {
  for (int i = 0; i < 4; ++i) out[blockIdx.y * gridDim.x + blockIdx.x] += in[i];
  if (blockIdx.x == 6 && in[5] > 0.0f) __trap();
}
)",
                             "hand.cu", {"k"}, {{"k", BlockTile{4, 1}}});
  REQUIRE(m);
  auto k = d->kernel(*m, "k");
  REQUIRE(k);
  REQUIRE(k->tile.w == 4);
  std::vector<float> out(16, 0.0f), in(8, 1.0f);
  float* o = out.data();
  const float* i = in.data();
  void* args[] = {&o, &i};
  auto bad = d->launch(*k, {6, 1, 1}, {1, 1, 1}, 0, args);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("compiled for batches of 4x1 one-thread blocks, launched with grid (6,1,1)") !=
        std::string::npos);
  auto trapped = d->launch(*k, {8, 2, 1}, {1, 1, 1}, 0, args);
  REQUIRE_FALSE(trapped);
  INFO(trapped.error().message);
  CHECK(trapped.error().message.find("blocks (4..7,0,0): the kernel called __trap()") != std::string::npos);
}

TEST_CASE("block batches: every kernel of a real CNN leaves the same bytes batched and one block per call",
          "[cpu][batch][cpu-replay]") {
  // mobilenet's 19 untuned convolutions (one thread per block), in tiles of 56x1, 28x1, 14x2, 7x7.
  std::string dir = kdflow::test::shared_sample_dir("mobilenet");
  if (dir.empty() || !fs::exists(fs::path(dir) / "params.bin")) {
    WARN("skipped: mobilenet's params.bin is only in ../shared/samples");
    return;
  }
  const std::string tmp = kdflow::test::temp_dir();
  auto replay = [&](const std::string& dumps) {
    // mobilenet's reference a constant passes (exit 3 says so): the dumps are what is compared.
    return kdflow::test::run_kdflow({"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1",
                                     "--allow-unverified", "--dump-dir", tmp + "/" + dumps});
  };
  setenv("KDFLOW_CPU_BATCH", "off", 1);
  auto plain = replay("plain");
  unsetenv("KDFLOW_CPU_BATCH");
  auto batched = replay("batched");
  INFO(plain.err << batched.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(batched.exit_code == 0);
  CHECK(plain.err.find(" 0 launched with one-thread blocks run batches") != std::string::npos);
  CHECK(batched.err.find(" 19 launched with one-thread blocks run batches") != std::string::npos);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp + "/plain")) {
    std::ifstream a(e.path(), std::ios::binary), b(tmp + "/batched/" + e.path().filename().string(), std::ios::binary);
    REQUIRE(b);
    std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
    INFO(e.path().filename().string());
    CHECK(sa == sb);
    ++files;
  }
  CHECK(files == 31);
}

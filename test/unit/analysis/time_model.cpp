// The time model (lib/analysis/time_model.cpp, issue 50), one ingredient at a time on hand-made
// launches whose answer is known: occupancy and its limits, waves, the dependent chain (unrolled
// loads, loads held between barriers), sector traffic of warps with few threads, the launch floor
// where the code was not counted, and a GEMM from its shape. The whole model is checked against
// the H200's measured sums in test/pipeline/costs.cpp.
#include <catch2/catch.hpp>

#include "kdflow/analysis/time_model.h"

using kdflow::Dataflow;
using kdflow::GpuArch;
using kdflow::Kernel;
using kdflow::KernelOps;

namespace {

const GpuArch& h200() {
  const GpuArch* a = kdflow::find_gpu_arch("H200");
  REQUIRE(a);
  return *a;
}

/// A launch whose whole grid executes `fma` FMAs, `loads` 4-byte loads and `barriers` barriers per thread.
Kernel launch(std::array<int64_t, 3> grid, std::array<int64_t, 3> block, double fma, double loads, double barriers = 0,
              int64_t shared = 0) {
  Kernel k;
  k.name = "k";
  k.grid = grid;
  k.block = block;
  k.dynamic_shared_memory = shared;
  const double threads = static_cast<double>(grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]);
  KernelOps ops;
  ops.counts[KernelOps::Fma][KernelOps::F32] = static_cast<uint64_t>(fma * threads);
  ops.flops = 2 * ops.counts[KernelOps::Fma][KernelOps::F32];
  ops.load_bytes = static_cast<uint64_t>(4 * loads * threads);
  ops.store_bytes = static_cast<uint64_t>(4 * threads);
  ops.barriers = static_cast<uint64_t>(barriers * threads);
  k.ops = ops;
  return k;
}

}  // namespace

TEST_CASE("time model: occupancy is the least of the threads, block slots and shared memory an SM has",
          "[time-model]") {
  Dataflow df;
  auto p = kdflow::predict_kernel(df, launch({1000, 1, 1}, {1024, 1, 1}, 1, 1), h200());
  REQUIRE(p);
  CHECK(p->blocks_per_sm == 2);
  CHECK(p->occupancy_limit == "threads");
  p = kdflow::predict_kernel(df, launch({1000, 1, 1}, {1, 1, 1}, 1, 1), h200());
  CHECK(p->blocks_per_sm == 32);
  CHECK(p->occupancy_limit == "blocks");
  p = kdflow::predict_kernel(df, launch({1000, 1, 1}, {128, 1, 1}, 1, 1, 0, 100 * 1024), h200());
  CHECK(p->blocks_per_sm == 2);  // 228 KiB per SM
  CHECK(p->occupancy_limit == "shared memory");
  // A 48-thread block takes two warps; its threads per warp are 24.
  p = kdflow::predict_kernel(df, launch({1, 1, 1}, {48, 1, 1}, 1, 1), h200());
  CHECK(p->threads_per_warp == Approx(24));
}

TEST_CASE("time model: waves of the grid over the SMs, each one dependent chain long", "[time-model]") {
  Dataflow df;
  // resnet18's untuned convolution: 56x56x64 one-thread blocks, 32 a SM on 132 SMs: 48 waves.
  auto p = kdflow::predict_kernel(df, launch({56, 56, 64}, {1, 1, 1}, 576, 1152, 1152), h200());
  REQUIRE(p);
  CHECK(p->waves == 48);
  // 576 rounds of loads (one per FMA, each held between two barriers) at 260 cycles, 576 FMAs at
  // 4, 1152 barriers at 20: 176,256 cycles a wave at 1.98 GHz.
  CHECK(p->exposed_rounds == Approx(576));
  CHECK(p->latency_us == Approx(48 * (576 * 260.0 + 576 * 4.0 + 1152 * 20.0) / 1980.0));
  CHECK(p->limiter == "latency");
  CHECK(p->us == Approx(3.0 + p->latency_us));
  // The same loop without barriers: nvcc's unrolling keeps 4 rounds in flight.
  auto q = kdflow::predict_kernel(df, launch({56, 56, 64}, {1, 1, 1}, 576, 1152), h200());
  CHECK(q->exposed_rounds == Approx(576 / 4.0));
  CHECK(q->us < p->us / 3);
}

TEST_CASE("time model: a warp of one thread moves a 32-byte sector per 4-byte load", "[time-model]") {
  Dataflow df;
  auto one = kdflow::predict_kernel(df, launch({4096, 1, 1}, {1, 1, 1}, 1, 64), h200());
  auto full = kdflow::predict_kernel(df, launch({128, 1, 1}, {32, 1, 1}, 1, 64), h200());
  REQUIRE(one);
  REQUIRE(full);
  CHECK(one->l2_us == Approx(full->l2_us * 8));  // the same bytes, 8 times the sectors
}

TEST_CASE("time model: many warps of little latency are bounded by issue", "[time-model]") {
  Dataflow df;
  // 1,000 FMAs a thread, no loads: a chain of 4,000 cycles, but 64 resident warps a SM issue
  // 64 x ~1,005 instructions over 4 schedulers: ~16,000 cycles a wave.
  auto p = kdflow::predict_kernel(df, launch({132 * 2 * 10, 1, 1}, {1024, 1, 1}, 1000, 0), h200());
  REQUIRE(p);
  CHECK(p->limiter == "issue");
  CHECK(p->issue_us > p->latency_us);
}

TEST_CASE("time model: a kernel whose code was not counted gets the launch floor and its DRAM bytes, said",
          "[time-model]") {
  Dataflow df;
  Kernel k = launch({10, 1, 1}, {64, 1, 1}, 1, 1);
  k.ops.reset();
  std::string why;
  auto p = kdflow::predict_kernel(df, k, h200(), &why);
  REQUIRE(p);
  CHECK(p->source == "floor");
  CHECK(p->us == Approx(h200().launch_us));
  CHECK(why.find("not counted") != std::string::npos);
  k = launch({0, 1, 1}, {64, 1, 1}, 1, 1);
  CHECK_FALSE(kdflow::predict_kernel(df, k, h200(), &why));
}

TEST_CASE("time model: the GPUs it knows, and a cuBLAS GEMM from its shape", "[time-model]") {
  for (const char* id : {"h100", "h200", "a100", "l4"}) {
    const GpuArch* a = kdflow::find_gpu_arch(id);
    REQUIRE(a);
    CHECK(a->sms > 0);
    CHECK(a->l2_latency_cycles > 0);
    CHECK_FALSE(a->source.empty());
  }
  CHECK_FALSE(kdflow::find_gpu_arch("rtx4090"));
  // 2·1024³ FLOPs at 70% of 67 TFLOP/s: 45.8 us, plus the floor.
  CHECK(kdflow::predict_gemm_us(2.0 * 1024 * 1024 * 1024, 12 << 20, 67.0, h200()) ==
        Approx(3.0 + 2.0 * 1024 * 1024 * 1024 / (67.0 * 0.7 * 1e6)));
}

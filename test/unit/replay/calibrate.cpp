// `kdflow calibrate` (lib/replay/cuda/calibrate.cpp, issue 50) against the fake CUDA driver,
// whose kernels take the device time KDFLOW_FAKE_CUDA_DURATION gives them: every constant of the
// profile is then known, and checked; the profile feeds `kdflow costs --device-profile`. The
// microbenchmarks' PTX is checked by ptxas where a CUDA toolkit is installed. No GPU has run it
// yet (docs/gpu-check.md says what the next session with one runs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kdflow/analysis/time_model.h"
#include "replay/cuda/calibrate_ptx.h"
#include "test_util.h"

using kdflow::test::Env;
using kdflow::test::run_kdflow;

namespace {
constexpr const char* kDurations = "kd_empty=2.5,kd_chase=2000,kd_fma=500,kd_copy=40000";
}

TEST_CASE("calibrate: every constant of the profile from the fake driver's kernel times", "[calibrate]") {
  Env lib("KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA);
  Env durations("KDFLOW_FAKE_CUDA_DURATION", kDurations);
  const std::string out = kdflow::test::temp_dir() + "/fake.json";
  auto r = run_kdflow({"calibrate", "-o", out, "--repeat", "5"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("calibrate: launch 2.50 us") != std::string::npos);
  auto a = kdflow::parse_gpu_profile(kdflow::test::slurp(out), out);
  INFO((a ? std::string() : a.error().message));
  REQUIRE(a);
  CHECK(a->sms == 132);  // what the fake reports, as an H100 SXM does
  CHECK(a->max_threads_per_sm == 2048);
  CHECK(a->max_blocks_per_sm == 32);
  CHECK(a->shared_per_sm == 233472);
  CHECK(a->clock_ghz == Approx(1.98));
  CHECK(a->launch_us == Approx(2.5).epsilon(1e-6));
  // 16,384 dependent loads in 2,000 - 2.5 us at 1.98 GHz; 65,536 FMAs in 497.5 us.
  CHECK(a->l2_latency_cycles == Approx((2000 - 2.5) / 16384 * 1980));
  CHECK(a->alu_latency_cycles == Approx((500 - 2.5) / 65536 * 1980));
  // Copies: 2 x 256 MiB (4 x the fake's 50 MiB L2 is less) once, and 2 x 8 MiB 64 times.
  CHECK(a->dram_gbps == Approx(2.0 * (256 << 20) / (40000 - 2.5) / 1e3));
  CHECK(a->l2_gbps == Approx(2.0 * (8 << 20) * 64 / (40000 - 2.5) / 1e3));
  CHECK(a->source.find("kdflow calibrate on kdflow fake CUDA device") != std::string::npos);

  // The profile drives costs' predictions: the same kernels, slower constants, a larger sum.
  auto with = run_kdflow({"costs", kdflow::test::sample_dir("mlp"), "--device", "h100", "--device-profile", out,
                          "--per-kernel", "--format", "jsonl"});
  auto without = run_kdflow({"costs", kdflow::test::sample_dir("mlp"), "--device", "h100", "--per-kernel", "--format",
                             "jsonl"});
  REQUIRE(with.exit_code == 0);
  REQUIRE(without.exit_code == 0);
  auto sum = [](const std::string& text) {
    double s = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) s += nlohmann::json::parse(line)["predicted_us"].get<double>();
    return s;
  };
  CHECK(sum(with.out) > 10 * sum(without.out));  // 13 GB/s of DRAM against 3,350
}

TEST_CASE("calibrate: no clock, no driver, a bad profile: one line each", "[calibrate]") {
  Env lib("KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA);
  {
    // No clock from the driver, and the fake's kernels count no cycles: nothing to turn time into cycles.
    Env noclock("KDFLOW_FAKE_CUDA_NO_CLOCK", "1");
    auto r = run_kdflow({"calibrate", "-q", "--repeat", "1"});
    CHECK(r.exit_code == 69);
    CHECK(r.err.find("no clock rate") != std::string::npos);
  }
  {
    Env none("KDFLOW_CUDA_LIBRARY", "/nonexistent/libcuda.so.1");
    auto r = run_kdflow({"calibrate", "-q"});
    CHECK(r.exit_code == 69);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  {
    // Every kernel 10 us, the empty one too: the chase measured nothing, and no profile is written.
    auto r = run_kdflow({"calibrate", "-q", "--repeat", "1"});
    CHECK(r.exit_code == 70);
    CHECK(r.err.find("the pointer chase took no longer than an empty kernel") != std::string::npos);
  }
  const std::string bad = kdflow::test::temp_dir() + "/bad.json";
  std::ofstream(bad) << R"({"schema": "kdflow-gpu-profile/1", "id": "x", "sms": 132, "clock_ghz": 0})";
  auto r = run_kdflow({"costs", kdflow::test::sample_dir("mlp"), "--device-profile", bad});
  CHECK(r.exit_code == 65);
  CHECK(r.err == bad + ":/clock_ghz: error: expected a number in [0.1, 10]\n");
}

TEST_CASE("calibrate: the microbenchmarks' PTX is what ptxas accepts for sm_90", "[calibrate]") {
  const char* ptxas = "/usr/local/cuda/bin/ptxas";
  if (!std::filesystem::exists(ptxas)) {
    WARN("skipped: no CUDA toolkit (" << ptxas << ") to assemble the PTX with");
    return;
  }
  const std::string dir = kdflow::test::temp_dir();
  std::ofstream(dir + "/k.ptx") << kdflow::cuda::calibration_ptx();
  const std::string cmd = std::string(ptxas) + " -arch=sm_90 " + dir + "/k.ptx -o " + dir + "/k.cubin 2>" + dir + "/err";
  const int rc = std::system(cmd.c_str());
  INFO(kdflow::test::slurp(dir + "/err"));
  CHECK(rc == 0);
}

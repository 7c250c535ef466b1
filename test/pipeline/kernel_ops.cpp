// `kdflow costs` with FLOPs counted from the kernels' code (issue 21), end to end on real
// samples: Relax builds get FLOPs, intensity and a bound for every function with their op
// names whole; direct convolutions count exactly the Relay formula; library calls are said;
// a profile that matches nothing is warned about; `show` lists a library call before the
// kernel that follows it. Numbers are counted by hand from device.cu (see the comments).
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

using kdflow::test::run_kdflow;
using kdflow::test::slurp;

namespace {

/// The dataset rows of `kdflow costs SAMPLE -o rows.jsonl` (per kernel with `per_kernel`).
std::vector<nlohmann::json> rows(const std::string& sample, bool per_kernel = false) {
  std::string out = kdflow::test::temp_dir() + "/rows.jsonl";
  std::vector<std::string> args = {"costs", kdflow::test::sample_dir(sample), "-q", "-o", out};
  if (per_kernel) args.push_back("--per-kernel");
  auto r = run_kdflow(args);
  REQUIRE(r.exit_code == 0);
  std::vector<nlohmann::json> v;
  std::istringstream in(slurp(out));
  for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

}  // namespace

TEST_CASE("costs: Relax builds get counted FLOPs, intensity and an H100 bound for every function", "[costs][kernel_ops]") {
  // By hand from device_*.cu: each matmul kernel's k loop does M·N·K multiply-adds
  // (2·M·N·K = 80,000 + 800,000 + 4,000,000 + 40,000 = 4,920,000 FLOPs in all); on top, the
  // shared-memory reduction trees (6,000 / 15,000 / 30,000 / 150 adds), the bias adds
  // (400 / 1,000 / 2,000 / 10); relu's max counts 0.
  for (const char* sample : {"relax_mlp", "relax_mlp_compiled"}) {
    INFO(sample);
    auto v = rows(sample);
    REQUIRE(v.size() == 5);
    std::map<std::string, uint64_t> want = {{"fused_matmul_add_relu", 80000 + 6000 + 400},
                                            {"fused_matmul1_add1_relu1", 800000 + 15000 + 1000},
                                            {"fused_matmul2_add2_relu2", 4000000 + 30000 + 2000},
                                            {"fused_matmul3_add3", 40000 + 150 + 10},
                                            {"log_softmax", 2108}};
    uint64_t mul_add = 0;
    for (const auto& r : v) {
      INFO(r["function"]);
      CHECK(r["flops"].is_null());  // no Relay formula without types
      CHECK(r["counted_status"] == "exact");
      CHECK(r["counted_flops"] == want.at(r["function"].get<std::string>()));
      CHECK(r["flop_per_byte"].is_number());
      CHECK(r["bound_us"].is_number());
      CHECK(r["bound_flops_source"] == "counted");
      CHECK(r["device"] == "h100");
      if (r["function"] != "log_softmax") {
        std::vector<std::string> ops = {"matmul", "add"};
        if (r["function"] != "fused_matmul3_add3") ops.push_back("nn.relu");
        CHECK(r["relay_ops"] == ops);
      } else {
        CHECK(r["relay_ops"] == std::vector<std::string>{"nn.log_softmax"});  // not log + softmax
      }
    }
    for (const auto& k : rows(sample, true))
      if (k["name"].get<std::string>().find("matmul") != std::string::npos)
        mul_add += k["counted_ops"]["fp32"]["mul"].get<uint64_t>();
    CHECK(2 * mul_add == 4920000);  // one multiply per multiply-add: Σ M·N·K
  }
}

TEST_CASE("costs: convolutions, dense and batch_matmul count exactly the Relay formula, reduction trees apart",
          "[costs][kernel_ops]") {
  // squeezenet: every conv2d + add + relu function counts what the formula says (the padding
  // taps multiply the zero the guard selects, and the formula counts them as well).
  size_t convs = 0;
  for (const auto& r : rows("squeezenet")) {
    if (r["relay_ops"][0] != "nn.conv2d") continue;
    ++convs;
    INFO(r["function"]);
    CHECK(r["counted_status"] == "exact");
    CHECK(r["counted_flops"] == r["flops"]);
    CHECK(r["counted_flop_ratio"] == 1.0);
  }
  CHECK(convs == 26);
  // mlp n3 (dense 1×100 · 100×400 + bias + relu): formula 2·100·400 + 400 = 80,400; the
  // kernel adds every lane's warp-shuffle tree (6 adds × 64 threads × 400 blocks = 153,600),
  // counted and shown apart: without it the code computes exactly the formula.
  for (const auto& r : rows("mlp"))
    if (r["node"] == 3) {
      CHECK(r["flops"] == 80400);
      CHECK(r["counted_flops"] == 234000);
      CHECK(r["counted_reduction_flops"] == 153600);
      CHECK(r["counted_flop_ratio"].get<double>() == 1.0);
    }
  // Every dense, batch_matmul and conv2d function of the float32 and float16 samples: the
  // code's own arithmetic (reduction trees apart) is the formula's, exactly.
  size_t compared = 0;
  for (const std::string model : {"mlp", "mlp_fp16", "attention", "squeezenet", "resnet18", "mobilenet"})
    for (const auto& r : rows(model)) {
      const std::string op = r["relay_ops"][0];
      if (op != "nn.dense" && op != "nn.batch_matmul" && op != "nn.conv2d") continue;
      INFO(model << " " << r["function"]);
      REQUIRE(r["counted_flop_ratio"].is_number());
      CHECK(r["counted_flop_ratio"].get<double>() == 1.0);
      ++compared;
    }
  CHECK(compared == 4 + 4 + 6 + 26 + 22 + 28);
  // A function with cuBLAS calls: its kernels are counted, the call is not, so unknown.
  for (const auto& r : rows("mlp_cublas"))
    if (!r["library_calls"].empty()) {
      CHECK(r["counted_flops"].is_null());
      CHECK(r["counted_status"] == "unknown");
      CHECK(r["counted_reasons"] == std::vector<std::string>{"library calls are not counted"});
    }
}

TEST_CASE("costs --profile / show --profile: rows matched, a warning when none did", "[costs][profile]") {
  std::string csv = kdflow::test::source_dir() + "/test/fixtures/ncu_forum_export.csv";
  auto ok = run_kdflow({"costs", kdflow::test::sample_dir("mlp_v08"), "-q", "--profile", csv});
  CHECK(ok.exit_code == 0);
  CHECK(ok.err.find("6 of 6 kernel launches matched kernels of the model") != std::string::npos);
  // The forum MLP's profile against sort_scan: nothing joins, and kdflow says so.
  auto none = run_kdflow({"costs", kdflow::test::sample_dir("sort_scan"), "-q", "--profile", csv});
  CHECK(none.exit_code == 0);
  CHECK(none.err.find("warning: " + csv + ": none of its 6 kernel launches is a kernel of this model") !=
        std::string::npos);
  auto show = run_kdflow({"show", kdflow::test::sample_dir("sort_scan"), "-q", "--profile", csv});
  CHECK(show.exit_code == 0);
  CHECK(show.err.find("kdflow show: warning: ") != std::string::npos);
}

TEST_CASE("show lists a library call before the kernel that runs after it", "[show][library]") {
  auto r = run_kdflow({"show", kdflow::test::sample_dir("mlp_cublas"), "-q"});
  REQUIRE(r.exit_code == 0);
  size_t lib0 = r.out.find("lib0 "), k0 = r.out.find("k0 ");
  REQUIRE(lib0 != std::string::npos);
  REQUIRE(k0 != std::string::npos);
  CHECK(lib0 < k0);
}

// `kdflow replay DIR --backend cpu` on every sample with an input and a reference output:
// the whole model runs on the CPU (kernels compiled from device.cu, the reference GEMM for
// cuBLAS calls) and every output matches output_<i>.npy within replay's tolerance (float32
// rtol 1e-3 / atol 1e-5, float16 at least rtol 1e-2 / atol 1e-3). Samples whose params.bin
// is left out of samples/ run from ../shared/samples when it exists.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;
using kdflow::test::run_kdflow;

namespace {

std::string folder(const std::string& name) {
  std::string d = kdflow::test::sample_dir(name);
  if (fs::exists(fs::path(d) / "params.bin") || fs::exists(fs::path(d) / "vm_exec.bin")) return d;
  return kdflow::test::shared_sample_dir(name);
}

/// Replays `name` on the CPU once (no warm-up) and checks every output row says ok; the
/// rows (max_abs, max_rel) go to stderr for the record.
void replay_matches(const std::string& name, size_t outputs, const std::vector<std::string>& extra = {}) {
  std::string dir = folder(name);
  if (dir.empty()) {
    WARN("skipped: " << name << "'s params.bin is only in ../shared/samples");
    return;
  }
  std::vector<std::string> args = {"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_kdflow(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::regex row(R"(^(\d+)\s+\S+output_\d+\.npy\s+(\S+)\s+(\S+)\s+(\d+)/(\d+)\s+(\S+)$)");
  std::istringstream lines(r.out);
  std::string line;
  size_t ok = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::cerr << "cpu replay " << name << " output " << m[1] << ": max_abs " << m[2] << " max_rel " << m[3] << "\n";
    CHECK(m[4] == "0");
    CHECK(m[6] == "ok");
    ok += m[6] == "ok";
  }
  CHECK(ok == outputs);
  CHECK(r.out.find("host clock stamps (cpu back end)") != std::string::npos);
}

}  // namespace

TEST_CASE("replay --backend cpu: mlp matches", "[cpu-replay]") { replay_matches("mlp", 1); }
TEST_CASE("replay --backend cpu: mlp_v08 matches (warp-synchronous volatile reduction)", "[cpu-replay]") {
  replay_matches("mlp_v08", 1);
}
TEST_CASE("replay --backend cpu: mlp_cublas matches (reference GEMM)", "[cpu-replay]") {
  replay_matches("mlp_cublas", 1);
}
TEST_CASE("replay --backend cpu: mlp_fp16 matches", "[cpu-replay]") { replay_matches("mlp_fp16", 1); }
TEST_CASE("replay --backend cpu: attention matches", "[cpu-replay]") { replay_matches("attention", 1); }
TEST_CASE("replay --backend cpu: sort_scan matches", "[cpu-replay]") { replay_matches("sort_scan", 3); }
TEST_CASE("replay --backend cpu --guard: sort_scan's data-dependent accesses stay inside their guard pages",
          "[cpu-replay]") {
  replay_matches("sort_scan", 3, {"--guard"});
}
TEST_CASE("replay --backend cpu: sort_scan_v08 matches", "[cpu-replay]") { replay_matches("sort_scan_v08", 3); }
TEST_CASE("replay --backend cpu: relax_mlp matches (five device modules)", "[cpu-replay]") {
  replay_matches("relax_mlp", 1);
}
TEST_CASE("replay --backend cpu: relax_mlp_compiled matches", "[cpu-replay]") {
  replay_matches("relax_mlp_compiled", 1);
}
TEST_CASE("replay --backend cpu: squeezenet matches", "[cpu-replay]") { replay_matches("squeezenet", 1); }
TEST_CASE("replay --backend cpu: mobilenet matches", "[cpu-replay]") { replay_matches("mobilenet", 1); }
TEST_CASE("replay --backend cpu: resnet18 matches", "[cpu-replay]") { replay_matches("resnet18", 1); }

TEST_CASE("replay --backend cpu refuses a kernel that calls system() before anything runs", "[cpu-replay]") {
  std::string dir = kdflow::test::temp_dir();
  std::string src = kdflow::test::sample_dir("sort_scan");
  for (const auto& e : fs::directory_iterator(src)) fs::copy(e.path(), fs::path(dir) / e.path().filename());
  // Hand-written: the first kernel of device.cu gets a call to system().
  std::string text = kdflow::test::slurp(dir + "/device.cu");
  size_t brace = text.find('{', text.find("__global__"));
  REQUIRE(brace != std::string::npos);
  text.insert(brace + 1, " system(\"true\");");
  text.insert(0, "extern \"C\" int system(const char*);\n");
  {
    std::ofstream out(dir + "/device.cu", std::ios::binary | std::ios::trunc);
    out << text;
  }
  auto r = run_kdflow({"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"});
  CHECK(r.exit_code == 69);
  CHECK(r.err.find("system") != std::string::npos);
  CHECK(r.out.find("output_0.npy") == std::string::npos);
}

TEST_CASE("replay --backend cpu labels its times as the CPU's in --timing-json and --trace", "[cpu-replay]") {
  std::string dir = kdflow::test::temp_dir();
  auto r = run_kdflow({"replay", kdflow::test::sample_dir("relax_mlp"), "--backend", "cpu", "--warmup", "0", "--repeat",
                       "1", "-q", "--timing-json", dir + "/t.json", "--trace", dir + "/trace.json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::string timing = kdflow::test::slurp(dir + "/t.json"), trace = kdflow::test::slurp(dir + "/trace.json");
  CHECK(timing.find("\"backend\": \"cpu\"") != std::string::npos);
  CHECK(timing.find("\"device\": \"host CPU (") != std::string::npos);
  CHECK(trace.find("(cpu back end: host CPU (") != std::string::npos);
}

TEST_CASE("replay --backend cpu: two same-size read-only arguments swapped in a flow fail --expect", "[cpu-replay]") {
  // The planted defect of issue 19: every static check still passes (same dtype, same bytes,
  // both read-only), only the numbers can tell. Attention's kernel 4 reads the mean and the
  // variance of layer norm as its arguments 2 and 3.
  std::string dir = kdflow::test::temp_dir();
  auto ex = run_kdflow({"extract", kdflow::test::sample_dir("attention"), "-o", dir + "/flow.json"});
  REQUIRE(ex.exit_code == 0);
  nlohmann::json flow = nlohmann::json::parse(kdflow::test::slurp(dir + "/flow.json"));
  nlohmann::json& k = flow["kernels"][4];
  REQUIRE(k["name"] == "tvmgen_default_fused_subtract_add_rsqrt_multiply_add_kernel");
  nlohmann::json& a = k["args"][2];
  nlohmann::json& b = k["args"][3];
  REQUIRE(a["access"] == "read");
  REQUIRE(b["access"] == "read");
  std::swap(a["buffer"], b["buffer"]);
  std::swap(a["offset"], b["offset"]);
  {
    std::ofstream out(dir + "/swapped.json");
    out << flow.dump();
  }
  auto r = run_kdflow({"replay", kdflow::test::sample_dir("attention"), "--flow", dir + "/swapped.json", "--backend",
                       "cpu", "--warmup", "0", "--repeat", "1", "-q"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("MISMATCH") != std::string::npos);
  CHECK(r.err.find("1 of 1 compared outputs differs") != std::string::npos);
}

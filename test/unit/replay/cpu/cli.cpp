// `kdflow replay DIR --backend cpu` on every sample with an input and a reference output:
// the whole model runs on the CPU (kernels compiled from device.cu, the reference GEMM for
// cuBLAS calls) and every output matches output_<i>.npy within replay's tolerance (float32
// rtol 1e-3 / atol 1e-5, float16 at least rtol 1e-2 / atol 1e-3). Samples whose params.bin
// is left out of samples/ run from ../shared/samples when it exists.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kdflow/formats/params.h"
#include "test_util.h"

namespace fs = std::filesystem;
using kdflow::test::run_kdflow;

namespace {

std::string folder(const std::string& name) {
  std::string d = kdflow::test::sample_dir(name);
  if (fs::exists(fs::path(d) / "params.bin") || fs::exists(fs::path(d) / "vm_exec.bin")) return d;
  return kdflow::test::shared_sample_dir(name);
}

/// Replays `name` on the CPU once (no warm-up) and checks every output row says `result` (ok;
/// UNINFORMATIVE where a constant array would pass the reference too); the rows (max_abs,
/// max_rel) go to stderr for the record.
void replay_matches(const std::string& name, size_t outputs, const std::vector<std::string>& extra = {},
                    const std::string& result = "ok") {
  std::string dir = folder(name);
  if (dir.empty()) {
    WARN("skipped: " << name << "'s params.bin is only in ../shared/samples");
    return;
  }
  std::vector<std::string> args = {"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_kdflow(args);
  INFO(r.out << r.err);
  // A run whose every comparison a constant would pass verified nothing: exit 3, said last.
  if (result == "UNINFORMATIVE") {
    REQUIRE(r.exit_code == 3);
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    CHECK(err.substr(err.rfind('\n') + 1).rfind("kdflow replay: nothing verified: each of the", 0) == 0);
  } else {
    REQUIRE(r.exit_code == 0);
  }
  std::regex row(R"(^(\d+)\s+\S+output_\d+\.npy\s+(\S+)\s+(\S+)\s+(\d+)/(\d+)\s+([A-Za-z]+)(:.*)?$)");
  std::istringstream lines(r.out);
  std::string line;
  size_t ok = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::cerr << "cpu replay " << name << " output " << m[1] << ": max_abs " << m[2] << " max_rel " << m[3] << "\n";
    CHECK(m[4] == "0");
    CHECK(m[6] == result);
    ok += m[6] == result;
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
TEST_CASE("replay --backend cpu: ffi_mlp matches (TVM 0.26, `__shared__ alignas(64)`)", "[cpu-replay]") {
  replay_matches("ffi_mlp", 1);
}
TEST_CASE("replay --backend cpu: ffi_mlp_compiled matches", "[cpu-replay]") { replay_matches("ffi_mlp_compiled", 1); }
TEST_CASE("replay --backend cpu: ffi_batch_mlp matches (symbolic batch n = 8)", "[cpu-replay]") {
  replay_matches("ffi_batch_mlp", 1);
}
// squeezenet's and mobilenet's references are softmaxes of near-zero logits (within 2e-7 of
// 0.001, and exactly 0.001): a constant passes them, so replay must not call them ok.
TEST_CASE("replay --backend cpu: squeezenet matches, and its reference is reported uninformative", "[cpu-replay]") {
  replay_matches("squeezenet", 1, {}, "UNINFORMATIVE");
}
TEST_CASE("replay --backend cpu: mobilenet matches, and its reference is reported uninformative", "[cpu-replay]") {
  replay_matches("mobilenet", 1, {}, "UNINFORMATIVE");
}
TEST_CASE("replay --backend cpu: resnet18 matches", "[cpu-replay]") { replay_matches("resnet18", 1); }

TEST_CASE("replay: a run with no reference verified nothing: exit 3, said last, --no-expect exits 0",
          "[cpu-replay]") {
  // mlp without its output_0.npy (and no reference/nodes.json): nothing a run could fail on.
  // (Its params.bin is only in ../shared/samples.)
  const std::string mlp = folder("mlp");
  if (mlp.empty()) {
    WARN("skipped: mlp's params.bin is only in ../shared/samples");
    return;
  }
  std::string dir = kdflow::test::temp_dir();
  for (const auto& e : fs::directory_iterator(mlp))
    if (e.path().filename() != "output_0.npy") fs::copy(e.path(), fs::path(dir) / e.path().filename());
  auto r = run_kdflow({"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("kdflow replay: nothing verified: no reference was compared") == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  auto quiet = run_kdflow({"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q", "--no-expect"});
  CHECK(quiet.exit_code == 0);
  auto allowed =
      run_kdflow({"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q", "--allow-unverified"});
  CHECK(allowed.exit_code == 0);
  CHECK(allowed.err.empty());
}

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

  // The node-by-node mode: dumps of the good flow, then the swapped flow compared with them
  // kernel by kernel names kernel 4 and its node as the first that differs.
  auto good = run_kdflow({"replay", kdflow::test::sample_dir("attention"), "--flow", dir + "/flow.json", "--backend",
                          "cpu", "--warmup", "0", "--repeat", "1", "-q", "--dump-dir", dir + "/ref"});
  INFO(good.out << good.err);
  REQUIRE(good.exit_code == 0);
  auto same = run_kdflow({"replay", kdflow::test::sample_dir("attention"), "--flow", dir + "/flow.json", "--backend",
                          "cpu", "--warmup", "0", "--repeat", "1", "-q", "--compare-dumps", dir + "/ref"});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 0);
  CHECK(same.out.find("compared with the dumps: all 27 kernels agree") != std::string::npos);
  auto bad = run_kdflow({"replay", kdflow::test::sample_dir("attention"), "--flow", dir + "/swapped.json", "--backend",
                         "cpu", "--warmup", "0", "--repeat", "1", "-q", "--compare-dumps", dir + "/ref"});
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 1);
  const int node = flow["kernels"][4]["graph_node"].get<int>();
  std::string node_name;
  for (const auto& n : flow["nodes"])
    if (n["id"] == node) node_name = n["name"].get<std::string>();
  REQUIRE(!node_name.empty());
  CHECK(bad.out.find(fmt::format("first difference: node {} ({}), kernel 4 "
                                 "(tvmgen_default_fused_subtract_add_rsqrt_multiply_add_kernel), argument ",
                                 node, node_name)) != std::string::npos);
  CHECK(bad.err.find("kdflow replay: error: kernel 4 (tvmgen_default_fused_subtract_add_rsqrt_multiply_add_kernel) "
                     "of node " + std::to_string(node) + " is the first whose output differs") != std::string::npos);
}

TEST_CASE("replay --backend cpu --guard --allow-oob: a workspace one element too small is caught, naming kernel and "
          "argument", "[cpu-replay]") {
  // Attention's layer-norm mean writes 64 floats into workspace 28 (kernel 0) and reads them
  // back (kernel 1). One element less: the static check refuses the flow (exit 65); let
  // through with --allow-oob, the guard stops kernel 0 at the element it writes past the end.
  std::string dir = kdflow::test::temp_dir();
  auto ex = run_kdflow({"extract", kdflow::test::sample_dir("attention"), "-o", dir + "/flow.json"});
  REQUIRE(ex.exit_code == 0);
  nlohmann::json flow = nlohmann::json::parse(kdflow::test::slurp(dir + "/flow.json"));
  nlohmann::json& ws = flow["buffers"][28];
  REQUIRE(ws["kind"] == "workspace");
  REQUIRE(ws["bytes"] == 256);
  ws["bytes"] = 252;
  ws["shape"] = nlohmann::json::array({63});
  {
    std::ofstream out(dir + "/short.json");
    out << flow.dump();
  }
  const std::vector<std::string> base = {"replay", kdflow::test::sample_dir("attention"), "--flow",
                                         dir + "/short.json", "--backend", "cpu", "--warmup", "0", "--repeat", "1",
                                         "-q"};
  auto refused = run_kdflow(base);
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 65);
  CHECK(refused.err.find("/kernels/0: error: ") != std::string::npos);

  std::vector<std::string> unguarded = base;
  unguarded.push_back("--allow-oob");
  auto usage = run_kdflow(unguarded);
  CHECK(usage.exit_code == 64);
  CHECK(usage.err.find("--allow-oob") != std::string::npos);

  std::vector<std::string> guarded = unguarded;
  guarded.push_back("--guard");
  auto r = run_kdflow(guarded);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("guard: kernel 0 (tvmgen_default_fused_mean_kernel)") != std::string::npos);
  CHECK(r.err.find("(its argument 1, buffer 28 'tvmgen_default_fused_mean.ws0')") != std::string::npos);
  CHECK(r.out.find("output_0.npy") == std::string::npos);
}

TEST_CASE("replay --compare-dumps: another model's dumps, a missing folder, the dump folder itself, library calls",
          "[cpu-replay]") {
  // Dumps of ffi_mlp (5 kernels) against attention (27): refused before anything runs.
  std::string dir = kdflow::test::temp_dir();
  auto dump = run_kdflow({"replay", kdflow::test::sample_dir("ffi_mlp"), "--backend", "cpu", "--warmup", "0",
                          "--repeat", "1", "-q", "--dump-dir", dir + "/ffi"});
  REQUIRE(dump.exit_code == 0);
  auto other = run_kdflow({"replay", kdflow::test::sample_dir("attention"), "--backend", "cpu", "-q",
                           "--compare-dumps", dir + "/ffi"});
  CHECK(other.exit_code == 65);
  CHECK(other.err.find("error: a dump of another model: kernel 0 of this model is "
                       "tvmgen_default_fused_mean_kernel, not fused_matmul_add_relu_kernel") != std::string::npos);
  CHECK(std::count(other.err.begin(), other.err.end(), '\n') == 1);
  CHECK(other.out.empty());
  auto missing = run_kdflow({"replay", kdflow::test::sample_dir("ffi_mlp"), "--backend", "cpu", "-q",
                             "--compare-dumps", dir + "/none"});
  CHECK(missing.exit_code == 66);
  CHECK(missing.err == dir + "/none: error: no such directory (--compare-dumps)\n");
  auto same = run_kdflow({"replay", kdflow::test::sample_dir("ffi_mlp"), "--backend", "cpu", "-q", "--compare-dumps",
                          dir + "/ffi", "--dump-dir", dir + "/ffi"});
  CHECK(same.exit_code == 64);
  CHECK(same.err.find("--compare-dumps and --dump-dir name the same folder") != std::string::npos);
  auto calls = run_kdflow({"replay", kdflow::test::sample_dir("mlp_cublas"), "--backend", "cpu", "-q", "--dry-run",
                           "--compare-dumps", dir + "/ffi"});
  CHECK(calls.exit_code == 69);
  CHECK(calls.err.find("--compare-dumps compares kernel dumps, which do not cover what library calls write") !=
        std::string::npos);
}

// resnet18_tuned (AutoTVM TopHub schedules: winograd, 43 kernels with __shared__ arrays, 27
// workspaces) ships no params, input or reference: it is the same relay.testing ResNet-18 as
// resnet18, whose params the tuned build takes as they are except its 13 winograd layers,
// which TVM pre-transforms to (α, α, CI, CO) = G·W·Gᵀ (Cook–Toom, TVM's interpolation points:
// 0, -1, 1, 1/2, -2 for F(4,3), α = 6; 0, -1, 1 for F(2,3), α = 4). With those params and
// resnet18's input, the tuned build must compute resnet18's reference output; the other
// layout, (α, α, CO, CI), must not (so the check can fail). The H200 run of gpu-check.sh did the
// same on the GPU (docs/gpu-check.md).
namespace {

/// Cook–Toom G (α × 3) for the interpolation points and the point at infinity.
std::vector<std::array<double, 3>> winograd_g(const std::vector<double>& points) {
  std::vector<std::array<double, 3>> g(points.size() + 1, {0, 0, 0});
  for (size_t i = 0; i < points.size(); ++i) {
    double f = 1;
    for (size_t k = 0; k < points.size(); ++k)
      if (k != i) f *= points[i] - points[k];
    if (i == 0 && f < 0) f = -f;
    for (int j = 0; j < 3; ++j) g[i][j] = std::pow(points[i], j) / f;
  }
  g.back()[2] = 1;
  return g;
}

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

/// A params file (TVM's save_param_dict layout) of float32 arrays.
std::string params_bytes(const std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>>& arrays) {
  std::string out;
  put_u64(out, 0xF7E58D4F05049CB7ull);
  put_u64(out, 0);
  put_u64(out, arrays.size());
  for (const auto& [name, a] : arrays) {
    put_u64(out, name.size());
    out += name;
  }
  put_u64(out, arrays.size());
  for (const auto& [name, a] : arrays) {
    put_u64(out, 0xDD5E40F096B4A13Full);
    put_u64(out, 0);
    const int32_t header[3] = {1, 0, static_cast<int32_t>(a.first.size())};
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    const uint8_t dtype[4] = {2, 32, 1, 0};  // float32, one lane
    out.append(reinterpret_cast<const char*>(dtype), 4);
    for (int64_t d : a.first) put_u64(out, static_cast<uint64_t>(d));
    put_u64(out, a.second.size() * 4);
    out.append(reinterpret_cast<const char*>(a.second.data()), a.second.size() * 4);
  }
  return out;
}

/// resnet18_tuned's params from resnet18's; `ci_co`: the winograd weights as (α, α, CI, CO).
std::string tuned_params(const std::string& resnet18_params, bool ci_co) {
  std::string bytes = kdflow::test::slurp(resnet18_params);
  auto parsed = kdflow::parse_params(bytes, resnet18_params);
  REQUIRE(parsed);
  auto graph = nlohmann::json::parse(kdflow::test::slurp(kdflow::test::sample_dir("resnet18_tuned") + "/graph.json"));
  std::map<std::string, std::vector<int64_t>> wanted;
  for (const auto& nid : graph["arg_nodes"]) {
    int i = nid.get<int>();
    wanted[graph["nodes"][i]["name"].get<std::string>()] =
        graph["attrs"]["shape"][1][graph["node_row_ptr"][i].get<int>()].get<std::vector<int64_t>>();
  }
  std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>> out;
  int transformed = 0;
  for (const kdflow::ParamArray& a : parsed->arrays) {
    auto it = wanted.find(a.name);
    if (it == wanted.end()) continue;
    REQUIRE(a.nbytes % 4 == 0);
    std::vector<float> w(a.nbytes / 4);
    std::memcpy(w.data(), bytes.data() + a.data_offset, a.nbytes);
    if (it->second == a.shape) {
      out.push_back({a.name, {a.shape, std::move(w)}});
      continue;
    }
    // (CO, CI, 3, 3) → (α, α, ·, ·)
    REQUIRE(a.shape.size() == 4);
    REQUIRE(it->second.size() == 4);
    const int64_t co = a.shape[0], ci = a.shape[1], alpha = it->second[0];
    REQUIRE((alpha == 6 || alpha == 4));
    auto g = winograd_g(alpha == 6 ? std::vector<double>{0, -1, 1, 0.5, -2} : std::vector<double>{0, -1, 1});
    std::vector<float> u(static_cast<size_t>(alpha * alpha * co * ci));
    for (int64_t e = 0; e < alpha; ++e)
      for (int64_t n = 0; n < alpha; ++n)
        for (int64_t o = 0; o < co; ++o)
          for (int64_t c = 0; c < ci; ++c) {
            double s = 0;
            for (int k = 0; k < 3; ++k)
              for (int l = 0; l < 3; ++l) s += g[e][k] * w[((o * ci + c) * 3 + k) * 3 + l] * g[n][l];
            size_t at = ci_co ? static_cast<size_t>(((e * alpha + n) * ci + c) * co + o)
                              : static_cast<size_t>(((e * alpha + n) * co + o) * ci + c);
            u[at] = static_cast<float>(s);
          }
    out.push_back({a.name, {it->second, std::move(u)}});
    ++transformed;
  }
  CHECK(transformed == 13);  // the 3×3 convolutions of stages 1–4 but the strided ones
  CHECK(out.size() == wanted.size() - 1);  // every param; the input is not one
  return params_bytes(out);
}

}  // namespace

TEST_CASE("replay --backend cpu: resnet18_tuned computes resnet18's reference from resnet18's weights",
          "[cpu-replay]") {
  std::string shared = kdflow::test::shared_sample_dir("resnet18");
  if (shared.empty() || !fs::exists(fs::path(shared) / "params.bin")) {
    WARN("skipped: resnet18's params.bin is only in ../shared/samples");
    return;
  }
  const std::string r18 = kdflow::test::sample_dir("resnet18");
  for (bool ci_co : {true, false}) {
    std::string params = kdflow::test::temp_dir() + "/tuned_params.bin";
    {
      std::ofstream f(params, std::ios::binary);
      f << tuned_params(shared + "/params.bin", ci_co);
    }
    auto r = run_kdflow({"replay", kdflow::test::sample_dir("resnet18_tuned"), "--backend", "cpu", "--params", params,
                         "--input", "data=" + r18 + "/input_data.npy", "--expect", r18 + "/output_0.npy",
                         "--warmup", "0", "--repeat", "1", "-q"});
    INFO(r.out << r.err);
    if (ci_co) {
      CHECK(r.exit_code == 0);
      CHECK(r.out.find("0/1000         ok") != std::string::npos);
    } else {
      CHECK(r.exit_code == 1);  // the transposed layout computes something else
      CHECK(r.out.find("MISMATCH") != std::string::npos);
    }
  }
}

namespace {

/// A copy of mlp (with its params) whose device.cu has `edit` applied (a hand-written
/// one-line change: a labelled unit test of one construct, not TVM output); "" when the
/// params are only in ../shared/samples and it is absent.
std::string hostile_mlp(const std::function<std::string(std::string)>& edit) {
  std::string src = folder("mlp");
  if (src.empty()) return "";
  std::string dir = kdflow::test::temp_dir() + "/mlp";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) fs::copy(e.path(), fs::path(dir) / e.path().filename());
  std::string text = edit(kdflow::test::slurp(dir + "/device.cu"));
  fs::permissions(dir + "/device.cu", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(dir + "/device.cu", std::ios::binary | std::ios::trunc) << text;
  return dir;
}

/// Replays `dir` on the CPU from an empty working folder; the folder must stay empty.
kdflow::test::RunResult replay_hostile(const std::string& dir, const std::vector<std::string>& extra = {}) {
  std::string cwd = kdflow::test::temp_dir() + "/cwd";
  fs::create_directories(cwd);
  std::vector<std::string> args = {"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = kdflow::test::run_kdflow_in(cwd, args);
  CHECK(fs::is_empty(cwd));
  return r;
}

/// Replays a hostile copy of mlp (hostile_mlp) that the CPU back end must refuse before
/// anything runs: exit 65 and one line holding `line_part`. nullopt when skipped (said).
std::optional<kdflow::test::RunResult> expect_refused(const std::function<std::string(std::string)>& edit,
                                                      const std::string& line_part) {
  std::string dir = hostile_mlp(edit);
  if (dir.empty()) {
    WARN("skipped: mlp's params.bin is only in ../shared/samples");
    return std::nullopt;
  }
  auto r = replay_hostile(dir);
  INFO(r.err);
  CHECK(r.exit_code == 65);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(line_part) != std::string::npos);
  return r;
}

const char* kFirstKernel = "extern \"C\" __global__ void __launch_bounds__(64) tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel";

}  // namespace

TEST_CASE("replay --backend cpu refuses a kernel whose locals pass the stack, before anything runs", "[cpu-replay]") {
  auto r = expect_refused(
      [](std::string s) {
        size_t at = s.find("  float T_matmul_NT_rf[1];\n");
        REQUIRE(at != std::string::npos);
        return s.replace(at, 27, "  float T_matmul_NT_rf[1 << 26];\n");
      },
      "device.cu:35:9: error: kernel 'tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel' cannot run on the CPU: it "
      "needs 268435484 bytes of local variables per CUDA thread");
  if (r) CHECK(r->out.find("output_0.npy") == std::string::npos);
}

TEST_CASE("replay --backend cpu refuses a recursive device function, before anything runs", "[cpu-replay]") {
  expect_refused(
      [](std::string s) {
        size_t at = s.find(kFirstKernel);
        REQUIRE(at != std::string::npos);
        s.insert(at, "__device__ float kd_rec(float x) { return kd_rec(x + 1.0f) * 0.5f; }\n");
        at = s.find("  T_matmul_NT_rf[0] = 0.000000e+00f;\n");
        return s.replace(at, 37, "  T_matmul_NT_rf[0] = kd_rec(0.0f);\n");
      },
      "(in 'kd_rec', which it calls) cannot run on the CPU: it recurses (kd_rec → kd_rec)");
}

TEST_CASE("replay --backend cpu stops a kernel that spins at --time-limit, naming it and its block", "[cpu-replay]") {
  std::string dir = hostile_mlp([](std::string s) {
    size_t at = s.find("  T_matmul_NT_rf[0] = 0.000000e+00f;\n");
    REQUIRE(at != std::string::npos);
    return s.insert(at, "  volatile int spin = (blockIdx.x == 3); while (spin) {}\n");
  });
  if (dir.empty()) {
    WARN("skipped: mlp's params.bin is only in ../shared/samples");
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto r = replay_hostile(dir, {"--time-limit", "2"});
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.err);
  CHECK(r.exit_code == 65);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(": error: kernel 2 'tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel' (launch 2) did not finish "
                   "within 2 s (--time-limit); still running: block (") != std::string::npos);
  // The spinning block is named; on a slow machine (ASan, a loaded CI) blocks that were merely
  // still running at the limit are named beside it.
  const size_t running = r.err.find("still running: ");
  CHECK(r.err.find("block (3,0,0)", running) != std::string::npos);
  CHECK(took < 60);  // stopped at the limit, not at the default
}

TEST_CASE("replay --backend cpu --jobs: one thread and three give the same bytes", "[cpu-replay]") {
  std::string dir = folder("sort_scan");
  if (dir.empty()) {
    WARN("skipped: sort_scan's params are only in ../shared/samples");
    return;
  }
  std::map<std::string, std::string> first;
  for (const char* jobs : {"1", "3"}) {
    std::string out = kdflow::test::temp_dir() + "/out" + jobs;
    auto r = run_kdflow({"replay", dir, "--backend", "cpu", "--jobs", jobs, "--warmup", "0", "--repeat", "1", "-q",
                         "--output-dir", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    for (int i = 0; i < 3; ++i) {
      std::string name = fmt::format("output_{}.npy", i);
      std::string bytes = kdflow::test::slurp(out + "/" + name);
      REQUIRE(!bytes.empty());
      if (first.count(name)) CHECK(first[name] == bytes);
      else first[name] = bytes;
    }
  }
  auto bad = run_kdflow({"replay", dir, "--backend", "cpu", "--jobs", "0"});
  CHECK(bad.exit_code == 64);
}

TEST_CASE("replay --backend cpu refuses a kernel with more static shared memory than CUDA allows", "[cpu-replay]") {
  expect_refused(
      [](std::string s) {
        size_t at = s.find("  __shared__ float red_result[1];\n");
        REQUIRE(at != std::string::npos);
        return s.replace(at, 34, "  __shared__ float red_result[1 << 28];\n");
      },
      "device.cu:36:20: error: kernel 'tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel' cannot run on the CPU: it "
      "declares 1073741836 bytes of static __shared__ memory (with 'red_result'), more than the 48 KiB CUDA allows a "
      "block");
}

// A sharded build (test/fixtures/tp_mlp, TVM 0.27, two ranks and an allreduce): every rank in
// one process on its own CPU back end, the allreduce made between them; each rank's output is
// the unsharded model's. Given rank 0's shard on both ranks, or the collective's reduce op
// changed, every rank's output differs.
TEST_CASE("replay --backend cpu: a sharded build runs every rank and each holds the unsharded output",
          "[cpu-replay][sharded]") {
  const std::string dir = kdflow::test::source_dir() + "/test/fixtures/tp_mlp";
  auto r = run_kdflow({"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("ranks: 2 in this process") != std::string::npos);
  std::regex row(R"(^r(\d):0\s+\S+output_0\.npy\s+\S+\s+\S+\s+0/256\s+ok$)");
  std::istringstream lines(r.out);
  std::string line;
  std::set<std::string> ranks;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) ranks.insert(m[1]);
  }
  CHECK(ranks == std::set<std::string>{"0", "1"});

  // Every rank given rank 0's shard: the allreduce sums two equal halves.
  const std::string same = kdflow::test::temp_dir() + "/same";
  std::filesystem::copy(dir, same);
  std::filesystem::copy_file(same + "/params_shard0.bin", same + "/params_shard1.bin",
                             std::filesystem::copy_options::overwrite_existing);
  auto s = run_kdflow({"replay", same, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"});
  CHECK(s.exit_code == 1);
  CHECK(s.out.find("MISMATCH") != std::string::npos);

  // The collective's reduce op changed in the flow: max instead of sum.
  const std::string flow = kdflow::test::temp_dir() + "/tp.json";
  REQUIRE(run_kdflow({"extract", dir, "-q", "-o", flow}).exit_code == 0);
  std::string text = kdflow::test::slurp(flow);
  const size_t at = text.find("\"reduce_op\": \"sum\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, 18, "\"reduce_op\": \"max\"");
  { std::ofstream(flow) << text; }
  auto m = run_kdflow({"replay", dir, "--flow", flow, "--backend", "cpu", "--warmup", "0", "--repeat", "1", "-q"});
  CHECK(m.exit_code == 1);
  // A sharded flow replays eagerly only, and needs every rank's params.
  auto g = run_kdflow({"replay", dir, "--backend", "cpu", "--mode", "graph", "-q"});
  CHECK(g.exit_code == 64);
  const std::string lone = kdflow::test::temp_dir() + "/lone";
  std::filesystem::copy(dir, lone);
  std::filesystem::remove(lone + "/params_shard1.bin");
  auto l = run_kdflow({"replay", lone, "--flow", flow, "--backend", "cpu", "-q"});
  CHECK(l.exit_code == 66);
}

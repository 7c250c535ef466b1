// Bad inputs through the real binary: each gives one line naming the file and position,
// a documented non-zero exit code, and never a partial or clobbered output file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace kdflow::test;
namespace fs = std::filesystem;

namespace {

/// A writable copy of samples/<m> (graph.json, host.c, device.tvm_meta.json).
std::string copy_sample(const std::string& m) {
  std::string dir = temp_dir() + "/" + m;
  fs::create_directories(dir);
  for (const char* f : {"graph.json", "host.c", "device.tvm_meta.json"})
    fs::copy_file(sample_dir(m) + "/" + f, dir + "/" + f);
  return dir;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

/// Runs extract expecting failure; checks the one-line shape and that `out` is untouched.
std::string expect_failure(const std::vector<std::string>& args, int code) {
  std::string out = temp_dir() + "/out.json";
  write(out, "previous contents\n");
  std::vector<std::string> full = {"extract"};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back("-o");
  full.push_back(out);
  RunResult r = run_kdflow(full);
  INFO(r.err);
  CHECK(r.exit_code == code);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);  // exactly one line
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(slurp(out) == "previous contents\n");  // never half-written or clobbered
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    CHECK(e.path().filename() == "out.json");  // no temp file left behind
  return r.err;
}

}  // namespace

TEST_CASE("truncated graph.json: file:line:col", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  std::string g = slurp(dir + "/graph.json");
  write(dir + "/graph.json", g.substr(0, g.size() / 2));
  std::string err = expect_failure({dir}, 65);
  CHECK(err.rfind(dir + "/graph.json:", 0) == 0);
  CHECK(err.find("graph.json:0:") == std::string::npos);
}

TEST_CASE("inconsistent graph.json: JSON pointer", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  auto g = nlohmann::json::parse(slurp(dir + "/graph.json"));
  g["nodes"][3]["inputs"][0][0] = 9;  // a later node
  write(dir + "/graph.json", g.dump());
  std::string err = expect_failure({dir}, 65);
  CHECK(err.find("graph.json:/nodes/3/inputs/0") != std::string::npos);
}

TEST_CASE("host.c of another model is refused", "[errors][cli]") {
  std::string err = expect_failure({sample_dir("mlp"), "--host", sample_dir("squeezenet") + "/host.c"}, 65);
  CHECK(err.find("graph.json:/nodes/3/attrs/func_name: error: function 'tvmgen_default_fused_nn_dense_add_nn_relu'") !=
        std::string::npos);
  // Same functions, other TVM version: the kernels it launches are not in this module's table.
  err = expect_failure({sample_dir("mlp"), "--host", sample_dir("mlp_v08") + "/host.c"}, 65);
  CHECK(err.find("host.c:") != std::string::npos);
  CHECK(err.find("_kernel0', which is not in the function table") != std::string::npos);
  // Same function names, other arity: squeezenet's graph with a host.c whose function takes other arguments.
  std::string dir = copy_sample("sort_scan");
  auto g = nlohmann::json::parse(slurp(dir + "/graph.json"));
  for (auto& n : g["nodes"])  // point the first function node at a function of another arity
    if (n["op"] == "tvm_op") {
      n["attrs"]["func_name"] = "tvmgen_default_fused_cumsum";  // unpacks 2 arguments; topk passes 3
      break;
    }
  write(dir + "/graph.json", g.dump());
  err = expect_failure({dir}, 65);
  CHECK(err.find("host.c:") != std::string::npos);
}

TEST_CASE("a kernel missing from the function table: host.c position", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  auto meta = nlohmann::json::parse(slurp(dir + "/device.tvm_meta.json"));
  meta["func_info"].erase("tvmgen_default_fused_nn_log_softmax_kernel_1");
  write(dir + "/device.tvm_meta.json", meta.dump());
  std::string err = expect_failure({dir}, 65);
  CHECK(err.rfind(dir + "/host.c:", 0) == 0);
  CHECK(err.find("'tvmgen_default_fused_nn_log_softmax_kernel_1', which is not in the function table") !=
        std::string::npos);
}

TEST_CASE("a function table that disagrees with the launch: host.c position", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  auto meta = nlohmann::json::parse(slurp(dir + "/device.tvm_meta.json"));
  meta["func_info"]["tvmgen_default_fused_nn_dense_add_kernel"]["arg_types"].push_back("handle");
  write(dir + "/device.tvm_meta.json", meta.dump());
  std::string err = expect_failure({dir}, 65);
  CHECK(err.find("host.c:") != std::string::npos);
  CHECK(err.find("is called with 7 values") != std::string::npos);
}

TEST_CASE("a host.c clang cannot parse: file:line:col", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  std::string h = slurp(dir + "/host.c");
  write(dir + "/host.c", h.substr(0, h.size() / 3));
  std::string err = expect_failure({dir}, 65);
  CHECK(err.rfind(dir + "/host.c:", 0) == 0);
}

TEST_CASE("missing inputs, wrong params magic, bad options", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  fs::remove(dir + "/host.c");
  std::string err = expect_failure({dir}, 66);
  CHECK(err.find("host.c") != std::string::npos);

  dir = copy_sample("mlp");
  write(dir + "/params.bin", std::string(64, '\x42'));
  err = expect_failure({dir}, 65);
  CHECK(err.rfind(dir + "/params.bin:", 0) == 0);

  err = expect_failure({dir, "--no-such-option"}, 64);
  err = expect_failure({temp_dir() + "/does-not-exist"}, 66);

  // The output may not overwrite an input.
  RunResult r = run_kdflow({"extract", sample_dir("mlp"), "-o", sample_dir("mlp") + "/graph.json"});
  CHECK(r.exit_code == 64);
  CHECK(r.err.find("would overwrite an input") != std::string::npos);
}

TEST_CASE("device.cu of another model or version: device.cu position", "[errors][cli]") {
  // TVM 0.8's kernels are named _kernel0: none of this model's launches is defined there.
  std::string err = expect_failure({sample_dir("mlp"), "--device", sample_dir("mlp_v08") + "/device.cu"}, 65);
  CHECK(err.find("host.c:") != std::string::npos);
  CHECK(err.find("defines no __global__ function of that name") != std::string::npos);
  // Same kernel names, but a __launch_bounds__ that disagrees with the launch.
  std::string dir = copy_sample("mlp");
  std::string cu = slurp(sample_dir("mlp") + "/device.cu");
  std::string from = "__launch_bounds__(64) tvmgen_default_fused_nn_dense_add_kernel(";
  auto at = cu.find(from);
  REQUIRE(at != std::string::npos);
  cu.replace(at, from.size(), "__launch_bounds__(128) tvmgen_default_fused_nn_dense_add_kernel(");
  write(dir + "/device.cu", cu);
  err = expect_failure({dir}, 65);
  CHECK(err.rfind(dir + "/device.cu:", 0) == 0);
  CHECK(err.find("declares __launch_bounds__(128) but " + dir + "/host.c:") != std::string::npos);
}

TEST_CASE("a model.so extracts like its folder, a corrupt one is one line", "[errors][cli][model_so]") {
  for (const std::string m : {"attention", "sort_scan", "sort_scan_v08"}) {
    INFO(m);
    auto from_so = run_kdflow({"extract", sample_dir(m) + "/model.so"});
    auto from_dir = run_kdflow({"extract", sample_dir(m)});
    REQUIRE(from_so.exit_code == 0);
    auto a = nlohmann::json::parse(from_so.out), b = nlohmann::json::parse(from_dir.out);
    for (const char* k : {"kernels", "buffers", "edges", "dependencies", "nodes", "inputs", "params", "outputs"})
      CHECK(a[k] == b[k]);
    CHECK(a["sources"]["library"] == "model.so");
  }
  std::string dir = temp_dir();
  std::string so = slurp(sample_dir("sort_scan") + "/model.so");
  write(dir + "/model.so", so.substr(0, so.size() / 2));
  fs::copy_file(sample_dir("sort_scan") + "/host.c", dir + "/host.c");
  std::string err = expect_failure({dir + "/model.so"}, 65);
  CHECK(err.rfind(dir + "/model.so", 0) == 0);
  fs::remove(dir + "/host.c");
  write(dir + "/model.so", so);
  err = expect_failure({dir + "/model.so"}, 64);  // no host C beside it and no --host
  CHECK(err.find("--host") != std::string::npos);
}

TEST_CASE("macro bombs: a token budget, then the time and memory watchdog", "[errors][cli][limits]") {
  // `a40` expands lazily to 2^40 tokens: refused by the preprocessing token budget, at the
  // expansion, in well under a second of work.
  std::string dir = copy_sample("mlp");
  std::string host = slurp(dir + "/host.c");
  std::string lazy = "#define a0 1+\n";
  for (int i = 1; i <= 40; ++i) lazy += "#define a" + std::to_string(i) + " a" + std::to_string(i - 1) + " a" + std::to_string(i - 1) + "\n";
  lazy += "static int bomb = a40 1;\n";
  write(dir + "/host.c", lazy + host);
  std::string err = expect_failure({dir}, 65);
  CHECK(err.rfind(dir + "/host.c:42:19: error: macro expansion makes more than ", 0) == 0);
  CHECK(err.find("(a hostile or broken file?)") != std::string::npos);

  // Nested macro arguments are expanded eagerly, inside one token: clang cannot be
  // stopped there, so the watchdog ends the process on time or on memory.
  std::string eager = "#define d(x) x x\nstatic int bomb = ";
  for (int i = 0; i < 34; ++i) eager += "d(";
  eager += "1+";
  for (int i = 0; i < 34; ++i) eager += ")";
  eager += " 1;\n";
  write(dir + "/host.c", eager + host);
  err = expect_failure({dir, "--time-limit", "1", "--memory-limit", "0"}, 65);
  CHECK(err == "kdflow extract: error: gave up after 1 s (--time-limit): the input costs more than any TVM build "
               "should (a hostile or broken file?); raise the limit for a model that needs more\n");
  err = expect_failure({dir, "--time-limit", "0", "--memory-limit", "600"}, 65);
  CHECK(err.rfind("kdflow extract: error: gave up at 600 MiB of memory (--memory-limit)", 0) == 0);
  // The same limits hold for show and explain, which extract first.
  RunResult r = run_kdflow({"show", dir, "--time-limit", "1", "--memory-limit", "0"});
  CHECK(r.exit_code == 65);
  CHECK(r.err.rfind("kdflow show: error: gave up after 1 s", 0) == 0);
}

TEST_CASE("relay.txt from another build of the model (batch 4): the result type disagrees", "[errors][cli]") {
  std::string dir = copy_sample("mlp");
  std::string relay = slurp(sample_dir("mlp") + "/relay.txt");
  // What relay.txt says after relay.build at batch 4 instead of 1.
  for (size_t at = relay.find("Tensor[(1, "); at != std::string::npos; at = relay.find("Tensor[(1, ", at))
    relay.replace(at, 11, "Tensor[(4, ");
  write(dir + "/relay.txt", relay);
  std::string err = expect_failure({dir}, 65);
  CHECK(err == dir + "/relay.txt: error: function 'tvmgen_default_fused_nn_dense_add_nn_relu' returns "
                     "Tensor[(4, 400), float32], but graph.json's node 3 gives float32[1, 400] (is relay.txt from "
                     "another build?)\n");
  // Without it (--no-relay), the names still tell the operators.
  RunResult ok = run_kdflow({"extract", dir, "--no-relay", "-q", "-o", temp_dir() + "/flow.json"});
  CHECK(ok.exit_code == 0);
}

TEST_CASE("a kernel that does not type-check loses its access set, the model still extracts", "[errors][cli][device]") {
  // Hand-written: mlp's device.cu with one statement added to one kernel (a struct plus a float).
  std::string dir = copy_sample("mlp");
  std::string cu = slurp(sample_dir("mlp") + "/device.cu");
  const std::string head = "tvmgen_default_fused_nn_dense_add_kernel(";
  auto at = cu.find(head);
  REQUIRE(at != std::string::npos);
  at = cu.find('{', at);
  cu.insert(at + 1, "\n  struct S { int x; } s_; float bad_ = s_ + 1.0f;");
  write(dir + "/device.cu", cu);
  const std::string out = dir + "/flow.json";
  auto r = run_kdflow({"extract", dir, "-q", "-o", out});
  CHECK(r.exit_code == 0);
  auto lines = lines_of(r.err);
  REQUIRE(lines.size() == 1);  // one warning line per unanalyzed kernel
  CHECK(lines[0].find("device.cu:") == 0);
  CHECK(lines[0].find(": warning: kernel 'tvmgen_default_fused_nn_dense_add_kernel' not analyzed, its arguments' "
                      "access is unknown: device.cu:") != std::string::npos);
  CHECK(lines[0].find("error: invalid operands to binary expression ('struct S' and 'float')") != std::string::npos);
  auto j = nlohmann::json::parse(slurp(out));
  int unanalyzed = 0;
  for (const auto& f : j["device_functions"]) {
    bool bad = f["name"] == "tvmgen_default_fused_nn_dense_add_kernel";
    CHECK(f.contains("access_error") == bad);
    unanalyzed += bad;
    for (const auto& p : f["params"])
      if (p["pointer"] == true) CHECK((p["access"] == "unknown") == bad);
  }
  CHECK(unanalyzed == 1);
  for (const auto& k : j["kernels"]) {
    if (k["name"] != "tvmgen_default_fused_nn_dense_add_kernel") continue;
    for (const auto& a : k["args"])
      if (a.contains("buffer")) CHECK(a["access"] == "unknown");
  }
  // show counts it (and says the same warning); the JSON reads back.
  auto show = run_kdflow({"show", dir, "-q"});
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("\n  kernels without access      1: k3\n") != std::string::npos);
  CHECK(lines_of(show.err).size() == 1);
  CHECK(run_kdflow({"show", out}).out.find("kernels without access      1: k3") != std::string::npos);
  // --strict-device: all or nothing, as before.
  std::string err = expect_failure({dir, "--strict-device"}, 65);
  CHECK(err.rfind(dir + "/device.cu:", 0) == 0);
  CHECK(err.find("error: invalid operands to binary expression") != std::string::npos);
}

TEST_CASE("show, explain and replay take extract's input options", "[errors][cli]") {
  auto show = run_kdflow({"show", sample_dir("mlp"), "--no-device", "--no-relay", "--no-params"});
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("kernels without access      6 (no device source read)") != std::string::npos);
  CHECK(show.out.substr(0, show.out.find('\n')) == "graph.json: 14 nodes, 5 function nodes, 6 kernels  (with host.c, device.tvm_meta.json)");
  auto strict = run_kdflow({"show", sample_dir("mlp"), "--strict-device", "--device", sample_dir("mlp") + "/device.cu"});
  CHECK(strict.exit_code == 0);
  CHECK(strict.out.find("kernels without access      0") != std::string::npos);
  auto explain = run_kdflow({"explain", sample_dir("mlp"), "k0", "--no-device"});
  CHECK(explain.exit_code == 0);
  CHECK(explain.out.find("unknown") != std::string::npos);
  auto other = run_kdflow({"explain", sample_dir("mlp"), "k0", "--host", sample_dir("mlp_v08") + "/host.c"});
  CHECK(other.exit_code == 65);  // the option is used: host.c of another model
  auto replay = run_kdflow({"replay", sample_dir("mlp_fp16"), "--dry-run", "--no-device", "--no-relay"});
  CHECK(replay.exit_code == 0);
  auto replay_strict = run_kdflow({"replay", sample_dir("mlp_fp16"), "--dry-run", "--strict-device", "--gpu", "0"});
  CHECK(replay_strict.exit_code == 0);
  // An extracted JSON is read as it is: input options are a usage error.
  const std::string json = temp_dir() + "/mlp.json";
  REQUIRE(run_kdflow({"extract", sample_dir("mlp"), "-q", "-o", json}).exit_code == 0);
  auto from_json = run_kdflow({"show", json, "--no-device"});
  CHECK(from_json.exit_code == 64);
  CHECK(lines_of(from_json.err).size() == 1);
  auto flow = run_kdflow({"replay", "--flow", json, "--dry-run", "--no-relay"});
  CHECK(flow.exit_code == 64);
}

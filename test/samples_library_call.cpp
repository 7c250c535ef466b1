// samples_library_call.cpp — a library call (cuBLAS) end to end, through the binary, on the
// hand-written model test/fixtures/cublas_dense (TVM's `-libs=cublas` shape: DLTensors built
// on the host stack; see its README). The real samples make no library calls.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace kdflow::test;

namespace {

std::string fixture() { return source_dir() + "/test/fixtures/cublas_dense"; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a cuBLAS call with stack-built DLTensors: buffers, tensor views, access, dependencies",
          "[library]") {
  const std::string out = temp_dir() + "/flow.json";
  auto r = run_kdflow({"extract", fixture(), "-q", "-o", out});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  auto j = nlohmann::json::parse(slurp(out));
  REQUIRE(j["library_calls"].size() == 1);
  const auto& c = j["library_calls"][0];
  CHECK(c["name"] == "tvm.contrib.cublas.matmul");
  CHECK(c["graph_node"] == 2);
  CHECK(c["after_kernel"] == -1);
  CHECK(c["loc"] == "host.c:102:7");
  REQUIRE(c["args"].size() == 5);
  // A = input0 (sid 0), B = p0 (sid 1): only read by the node; C = its output: read and written.
  const int sids[3] = {0, 1, 2};
  const char* shapes[3] = {"[4,250]", "[1000,250]", "[4,1000]"};
  const char* access[3] = {"read", "read", "readwrite"};
  for (int i = 0; i < 3; ++i) {
    const auto& a = c["args"][i];
    CHECK(a["dtype"] == "DLTensor*");
    CHECK(j["buffers"][a["buffer"].get<int>()]["storage_id"] == sids[i]);
    CHECK(a["offset"] == 0);
    CHECK(a["access"] == access[i]);
    CHECK(a["tensor"]["dtype"] == "float32");
    CHECK(a["tensor"]["shape"].dump() == shapes[i]);
  }
  CHECK(c["args"][3] == nlohmann::json::parse(R"({"value":0,"dtype":"int64"})"));
  CHECK(c["args"][4] == nlohmann::json::parse(R"({"value":1,"dtype":"int64"})"));
  // The relu kernel reads what cuBLAS wrote: one RAW from the library call.
  REQUIRE(j["dependencies"].size() == 1);
  CHECK(j["dependencies"][0] == nlohmann::json::parse(
                                    R"({"kind":"raw","from":0,"to":0,"from_buffer":2,"to_buffer":2,"from_library_call":true})"));
  CHECK(j["summary"]["library_calls"] == 1);
  CHECK(j["summary"]["kernels"] == 1);

  // The JSON reads back (replay --flow, show FLOW.json) and shows the same.
  auto from_dir = run_kdflow({"show", fixture()});
  auto from_json = run_kdflow({"show", out});
  REQUIRE(from_dir.exit_code == 0);
  REQUIRE(from_json.exit_code == 0);
  CHECK(contains(from_dir.out, "lib0    tvm.contrib.cublas.matmul (library call)"));
  CHECK(contains(from_dir.out, "library calls               1"));
}

TEST_CASE("explain lib0 and the kernel reading its result; text and DOT name the call", "[library]") {
  auto e = run_kdflow({"explain", fixture(), "lib0"});
  REQUIRE(e.exit_code == 0);
  CHECK(contains(e.out, "library call lib0  tvm.contrib.cublas.matmul"));
  CHECK(contains(e.out, "in order      before the first kernel"));
  CHECK(contains(e.out, "tensor  float32 [1000, 250] (the DLTensor the callee sees)"));
  CHECK(contains(e.out, "consumers  k0 tvmgen_default_fused_nn_relu_kernel (n3)"));
  auto k = run_kdflow({"explain", fixture(), "k0"});
  REQUIRE(k.exit_code == 0);
  CHECK(contains(k.out, "producers  lib0 tvm.contrib.cublas.matmul (library call, n2)"));
  auto bad = run_kdflow({"explain", fixture(), "lib1"});
  CHECK(bad.exit_code == 64);
  CHECK(contains(bad.err, "a library call as lib<ID> (lib0..lib0)"));

  const std::string dir = temp_dir();
  REQUIRE(run_kdflow({"extract", fixture(), "-q", "-o", dir + "/flow.txt"}).exit_code == 0);
  CHECK(contains(slurp(dir + "/flow.txt"),
                 "library call 0 tvm.contrib.cublas.matmul  args: sid0:float32[4, 250](r), sid1:float32[1000, 250](r), "
                 "sid2:float32[4, 1000](rw), 0, 1  (before any kernel)"));
  REQUIRE(run_kdflow({"extract", fixture(), "-q", "-o", dir + "/flow.dot"}).exit_code == 0);
  const std::string dot = slurp(dir + "/flow.dot");
  CHECK(contains(dot, "\"lib0\""));
  CHECK(contains(dot, "\"lib0\" -> "));
  if (std::system("command -v dot >/dev/null 2>&1") == 0)
    CHECK(std::system(("dot -Tsvg " + dir + "/flow.dot -o " + dir + "/flow.svg").c_str()) == 0);
  else
    WARN("SKIPPED: Graphviz dot is not installed; the DOT was not rendered");
}

TEST_CASE("replay refuses a model with a library call in one line", "[library]") {
  auto r = run_kdflow({"replay", fixture(), "--dry-run"});
  CHECK(r.exit_code == 69);
  CHECK(contains(r.err, "/library_calls/0: error: replay cannot run library call 'tvm.contrib.cublas.matmul'"));
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

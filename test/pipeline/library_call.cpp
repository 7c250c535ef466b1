// library_call.cpp — library calls (cuBLAS) end to end, through the binary, on the
// real sample samples/mlp_cublas (the forum MLP built with `-libs=cublas`: each nn.dense is
// a packed call to tvm.contrib.cublas.matmul with three DLTensors the host code builds on
// its stack, writing a workspace that the node's fused add/relu kernel then reads).
// samples_pipeline.cpp checks every call against truth.json; this file checks what the
// commands make of them.
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace kdflow::test;

namespace {

std::string sample() { return sample_dir("mlp_cublas"); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("mlp_cublas: four cuBLAS calls with stack-built DLTensors: buffers, tensor views, access, dependencies",
          "[library]") {
  const std::string out = temp_dir() + "/flow.json";
  auto r = run_kdflow({"extract", sample(), "-q", "-o", out});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  auto j = nlohmann::json::parse(slurp(out));
  REQUIRE(j["library_calls"].size() == 4);
  const int nodes[4] = {3, 6, 9, 12};
  const char* a_shapes[4] = {"[1,100]", "[1,400]", "[1,1000]", "[1,2000]"};
  const char* b_shapes[4] = {"[400,100]", "[1000,400]", "[2000,1000]", "[10,2000]"};
  const char* c_shapes[4] = {"[1,400]", "[1,1000]", "[1,2000]", "[1,10]"};
  for (int i = 0; i < 4; ++i) {
    INFO("lib" << i);
    const auto& c = j["library_calls"][i];
    CHECK(c["name"] == "tvm.contrib.cublas.matmul");
    CHECK(c["graph_node"] == nodes[i]);
    CHECK(c["after_kernel"] == i - 1);  // each node calls cuBLAS before its own kernel
    REQUIRE(c["args"].size() == 5);
    // A = the node's input, B = its weight: only read; C = the node's workspace: read and written.
    const char* shapes[3] = {a_shapes[i], b_shapes[i], c_shapes[i]};
    const char* access[3] = {"read", "read", "readwrite"};
    for (int a = 0; a < 3; ++a) {
      const auto& arg = c["args"][a];
      CHECK(arg["dtype"] == "DLTensor*");
      CHECK(arg["offset"] == 0);
      CHECK(arg["access"] == access[a]);
      CHECK(arg["tensor"]["dtype"] == "float32");
      CHECK(arg["tensor"]["shape"].dump() == shapes[a]);
    }
    const auto& ws = j["buffers"][c["args"][2]["buffer"].get<int>()];
    CHECK(ws["kind"] == "workspace");
    CHECK(ws["node"] == nodes[i]);
    CHECK(c["args"][3] == nlohmann::json::parse(R"({"value":0,"dtype":"int64"})"));  // transa
    CHECK(c["args"][4] == nlohmann::json::parse(R"({"value":1,"dtype":"int64"})"));  // transb
    // The node's kernel reads what cuBLAS wrote into the workspace: one RAW from the call.
    bool raw = false;
    for (const auto& d : j["dependencies"])
      raw |= d["kind"] == "raw" && d.value("from_library_call", false) && d["from"] == i && d["to"] == i &&
             d["from_buffer"] == c["args"][2]["buffer"];
    CHECK(raw);
  }
  CHECK(j["library_calls"][0]["loc"] == "host.c:274:7");
  CHECK(j["summary"]["library_calls"] == 4);
  CHECK(j["summary"]["kernels"] == 6);

  // The JSON reads back (replay --flow, show FLOW.json) and shows the same.
  auto from_dir = run_kdflow({"show", sample()});
  auto from_json = run_kdflow({"show", out});
  REQUIRE(from_dir.exit_code == 0);
  REQUIRE(from_json.exit_code == 0);
  CHECK(from_dir.out.substr(from_dir.out.find('\n')) == from_json.out.substr(from_json.out.find('\n')));
  CHECK(contains(from_dir.out, "lib0    tvm.contrib.cublas.matmul (library call)"));
  CHECK(contains(from_dir.out, "library calls               4"));
}

TEST_CASE("mlp_cublas: explain lib0 and the kernel reading its result, text and DOT name the call", "[library]") {
  auto e = run_kdflow({"explain", sample(), "lib0"});
  REQUIRE(e.exit_code == 0);
  CHECK(contains(e.out, "library call lib0  tvm.contrib.cublas.matmul"));
  CHECK(contains(e.out, "in order      before the first kernel"));
  CHECK(contains(e.out, "tensor  float32 [400, 100] (the DLTensor the callee sees)"));
  CHECK(contains(e.out, "consumers  k0 tvmgen_default_fused_nn_dense_add_nn_relu_kernel (n3)"));
  auto k = run_kdflow({"explain", sample(), "k0"});
  REQUIRE(k.exit_code == 0);
  CHECK(contains(k.out, "producers  lib0 tvm.contrib.cublas.matmul (library call, n3)"));
  CHECK(contains(k.out, "consumers  lib1 tvm.contrib.cublas.matmul (library call, n6)"));
  auto bad = run_kdflow({"explain", sample(), "lib4"});
  CHECK(bad.exit_code == 64);
  CHECK(contains(bad.err, "a library call as lib<ID> (lib0..lib3)"));

  const std::string dir = temp_dir();
  REQUIRE(run_kdflow({"extract", sample(), "-q", "-o", dir + "/flow.txt"}).exit_code == 0);
  CHECK(contains(slurp(dir + "/flow.txt"),
                 "library call 0 tvm.contrib.cublas.matmul  args: sid0:float32[1, 100](r), sid1:float32[400, 100](r), "
                 "ws0:float32[1, 400](rw), 0, 1  (before any kernel)"));
  CHECK(contains(slurp(dir + "/flow.txt"),
                 "library call 1 tvm.contrib.cublas.matmul  args: sid3:float32[1, 400](r), sid4:float32[1000, 400](r), "
                 "ws0:float32[1, 1000](rw), 0, 1  (after kernel #0)"));
  REQUIRE(run_kdflow({"extract", sample(), "-q", "-o", dir + "/flow.dot"}).exit_code == 0);
  const std::string dot = slurp(dir + "/flow.dot");
  CHECK(contains(dot, "\"lib0\""));
  CHECK(contains(dot, "\"lib0\" -> "));
  if (std::system("command -v dot >/dev/null 2>&1") == 0)
    CHECK(std::system(("dot -Tsvg " + dir + "/flow.dot -o " + dir + "/flow.svg").c_str()) == 0);
  else
    WARN("SKIPPED: Graphviz dot is not installed; the DOT was not rendered");
}

TEST_CASE("replay plans the cuBLAS calls of mlp_cublas (dry run), its params.bin is in ../shared", "[library]") {
  std::string shared = shared_sample_dir("mlp_cublas");
  if (shared.empty() || !std::filesystem::exists(shared + "/params.bin")) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  auto r = run_kdflow({"replay", sample(), "--params", shared + "/params.bin", "--dry-run"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "call 0: tvm.contrib.cublas.matmul node 3 after kernel -1: cublasSgemm_v2(T, N, m 400, n 1, "
                        "k 100, B alloc1+0 (buffer 1) ldb 100, A alloc0+0 (buffer 0) lda 100, C alloc13+0 (buffer 14) "
                        "ldc 400)"));
  CHECK(contains(r.out, "call 3: tvm.contrib.cublas.matmul node 12 after kernel 2: "));
}

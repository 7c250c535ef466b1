// Node references (reference/nodes.json, docs/schema.md): the reader's mapping onto a real flow
// (samples/ffi_mlp's golden) and its refusals, on hand-written nodes.json files (unit tests of
// the format; the real files come from kdflow_tvm and are checked by test/tvm on real builds),
// and compare_arrays' verdict on references a constant array would pass.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "kdflow/formats/node_reference.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/replay/replay.h"
#include "test_util.h"

using namespace kdflow;

namespace {

Dataflow ffi_mlp() {
  auto df = parse_dataflow_json(test::slurp(test::source_dir() + "/test/golden/ffi_mlp.json"), "ffi_mlp.json");
  if (!df) FAIL(df.error().message);
  return df.take();
}

std::string write_refs(const std::string& text) {
  std::string dir = test::temp_dir();
  std::ofstream(dir + "/nodes.json") << text;
  return dir + "/nodes.json";
}

const char* kHead = R"({"format": "kdflow-node-reference/1", "frontend": "relax", "function": "main", "nodes": [)";

}  // namespace

TEST_CASE("node references: Relax calls map onto the flow's nodes by function, occurrence and type",
          "[replay][node-reference]") {
  Dataflow df = ffi_mlp();  // nodes 9..13: fused_matmul_add_relu ... log_softmax, float32 outputs
  std::string f = write_refs(std::string(kHead) + R"(
    {"function": "fused_matmul_add_relu", "occurrence": 0,
     "outputs": [{"arg": 3, "file": "a.npy", "dtype": "float32", "shape": [1, 400]}]},
    {"function": "log_softmax", "occurrence": 0,
     "outputs": [{"arg": 1, "file": "b.npy", "dtype": "float32", "shape": [1, 10]}]},
    {"function": "log_softmax", "occurrence": 1, "outputs": []},
    {"function": "fused_matmul1_add1_relu1", "occurrence": 0,
     "outputs": [{"arg": 3, "file": "c.npy", "dtype": "float32", "shape": [1, 7]}]}]})");
  auto r = read_node_references(f, df);
  REQUIRE(r);
  CHECK(r->nodes_in_file == 4);
  CHECK(r->nodes_mapped == 2 + 1);
  REQUIRE(r->checks.size() == 2);
  CHECK(r->checks[0].node == 9);
  CHECK(r->checks[0].buffer == df.nodes[9].outputs[0]);
  CHECK(r->checks[1].node == 13);
  CHECK(r->checks[0].file.size() > 5);
  CHECK(r->checks[0].file.substr(r->checks[0].file.size() - 5) == "a.npy");
  std::string said;
  for (const std::string& s : r->not_compared) said += s + "\n";
  INFO(said);
  CHECK(said.find("call 1 of log_softmax: the flow has no such call") != std::string::npos);
  CHECK(said.find("has no output float32 [1, 7]") != std::string::npos);
  CHECK(said.find("node 11 fused_matmul2_add2_relu2: no reference for it") != std::string::npos);
}

TEST_CASE("node references: malformed files and paths leaving the folder are refused", "[replay][node-reference]") {
  Dataflow df = ffi_mlp();
  auto err = [&](const std::string& text) {
    auto r = read_node_references(write_refs(text), df);
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(err("{").find("nodes.json") != std::string::npos);
  CHECK(err(R"({"format": "other", "frontend": "relax", "nodes": []})").find("/format") != std::string::npos);
  CHECK(err(R"({"format": "kdflow-node-reference/1", "frontend": "onnx", "nodes": []})").find("/frontend") !=
        std::string::npos);
  CHECK(err(std::string(kHead) + R"({"function": "log_softmax", "occurrence": 0, "outputs": [
        {"file": "../../etc/passwd", "dtype": "float32", "shape": [1, 10]}]}]})")
            .find("/nodes/0/outputs/0/file") != std::string::npos);
  CHECK(err(std::string(kHead) + R"({"function": "log_softmax", "occurrence": 0, "outputs": [
        {"file": "/etc/passwd", "dtype": "float32", "shape": [1, 10]}]}]})")
            .find("inside the folder") != std::string::npos);
  CHECK(err(std::string(kHead) + R"({"function": "log_softmax", "occurrence": -1, "outputs": []}]})")
            .find("/nodes/0/occurrence") != std::string::npos);
}

TEST_CASE("compare_arrays: a reference a constant array would pass is uninformative", "[replay][node-reference]") {
  auto f32 = [](std::vector<float> v) {
    NpyArray a;
    a.dtype = DType{kDLFloat, 32, 1};
    a.shape = {static_cast<int64_t>(v.size())};
    a.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return a;
  };
  // squeezenet's softmax: every value within 2e-7 of 0.001 (atol 1e-5 covers the spread).
  auto c = compare_arrays(f32({0.0010001f, 0.0009999f, 0.001f}), f32({0.001f, 0.0010002f, 0.0009998f}), 1e-3, 1e-5);
  CHECK(c.pass);
  CHECK(c.uninformative);
  // The swapped order of a real spread is caught, and a real spread is informative.
  c = compare_arrays(f32({0.2f, 0.7f, 0.1f}), f32({0.7f, 0.2f, 0.1f}), 1e-3, 1e-5);
  CHECK_FALSE(c.pass);
  c = compare_arrays(f32({0.7f, 0.2f, 0.1f}), f32({0.7f, 0.2f, 0.1f}), 1e-3, 1e-5);
  CHECK(c.pass);
  CHECK_FALSE(c.uninformative);
  // One element says nothing about spread: it is not called uninformative.
  c = compare_arrays(f32({0.5f}), f32({0.5f}), 1e-3, 1e-5);
  CHECK_FALSE(c.uninformative);
}

TEST_CASE("node references: a call the CPU build names otherwise is matched by position between matched ones",
          "[replay][node-reference]") {
  Dataflow df = ffi_mlp();  // nodes 9, 10, 11: fused_matmul_add_relu, ..._1 [1, 1000], ..._2 [1, 2000]
  // As TVM's CPU build names a CUDA-only dispatch (gpu_2d_continuous_cumsum there, cumsum here).
  std::string f = write_refs(std::string(kHead) + R"(
    {"function": "fused_matmul_add_relu", "occurrence": 0, "outputs": []},
    {"function": "cpu_name", "occurrence": 0,
     "outputs": [{"arg": 3, "file": "m.npy", "dtype": "float32", "shape": [1, 1000]}]},
    {"function": "fused_matmul2_add2_relu2", "occurrence": 0, "outputs": []}]})");
  auto r = read_node_references(f, df);
  REQUIRE(r);
  REQUIRE(r->checks.size() == 1);
  CHECK(r->checks[0].node == 10);
  CHECK(r->checks[0].buffer == df.nodes[10].outputs[0]);
  CHECK(r->checks[0].label.find("TVM's CPU build calls it cpu_name; matched by position") != std::string::npos);
  // Two unknown calls where one node is free: nothing is guessed.
  f = write_refs(std::string(kHead) + R"(
    {"function": "fused_matmul_add_relu", "occurrence": 0, "outputs": []},
    {"function": "a", "occurrence": 0, "outputs": [{"file": "a.npy", "dtype": "float32", "shape": [1, 1000]}]},
    {"function": "b", "occurrence": 0, "outputs": [{"file": "b.npy", "dtype": "float32", "shape": [1, 1000]}]},
    {"function": "fused_matmul2_add2_relu2", "occurrence": 0, "outputs": []}]})");
  r = read_node_references(f, df);
  REQUIRE(r);
  CHECK(r->checks.empty());
  std::string said;
  for (const std::string& s : r->not_compared) said += s + "\n";
  CHECK(said.find("reference call 0 of a: the flow has no such call") != std::string::npos);
  CHECK(said.find("node 10 fused_matmul1_add1_relu1: no reference for it") != std::string::npos);
}

// emit.cpp — the emitters (JSON, DOT, text) and the JSON reader on a hand-built IR
// shaped like the mlp sample's tail: a dense node with scalar arguments and a library
// call, then log_softmax's two kernels sharing a workspace.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"

using namespace kdflow;
namespace fs = std::filesystem;

namespace {

const char* kWeird = "weird\"name\\path";

Arg buf_arg(int b, int64_t off = 0) {
  Arg a;
  a.kind = Arg::Kind::Buffer;
  a.buffer = b;
  a.offset = off;
  a.dtype = "handle";
  return a;
}
Arg int_arg(int64_t v) {
  Arg a;
  a.kind = Arg::Kind::Int;
  a.int_value = v;
  a.dtype = "int32";
  return a;
}
Arg float_arg(double v) {
  Arg a;
  a.kind = Arg::Kind::Float;
  a.float_value = v;
  a.dtype = "float32";
  return a;
}
Arg null_arg() {
  Arg a;
  a.kind = Arg::Kind::Null;
  a.dtype = "handle";
  return a;
}
/// A library call's DLTensor* argument: the buffer and the view the callee sees.
Arg tensor_arg(int b, std::string dtype, std::vector<int64_t> shape) {
  Arg a = buf_arg(b);
  a.dtype = "DLTensor*";
  a.access = Access::ReadWrite;
  a.tensor_dtype = std::move(dtype);
  a.tensor_shape = std::move(shape);
  return a;
}
Arg str_arg(std::string text) {
  Arg a;
  a.kind = Arg::Kind::Null;
  a.dtype = "str";
  a.text = std::move(text);
  return a;
}

Buffer graph_buffer(int id, BufferKind kind, int64_t sid, std::string name, std::vector<int64_t> shape, int node) {
  Buffer b;
  b.id = id;
  b.kind = kind;
  b.storage_id = sid;
  b.name = std::move(name);
  b.dtype = "float32";
  b.shape = std::move(shape);
  b.bytes = 4;
  for (int64_t d : b.shape) b.bytes *= static_cast<uint64_t>(d);
  b.entry_id = id;
  b.node = node;
  return b;
}

SourceLoc loc(unsigned line, unsigned col) { return SourceLoc{"host.c", line, col}; }

Dataflow sample_ir() {
  Dataflow df;
  df.sources.graph = "graph.json";
  df.sources.host = "host.c";
  df.sources.meta = "device.tvm_meta.json";

  df.buffers.push_back(graph_buffer(0, BufferKind::Input, 0, "input0", {1, 10}, 0));
  df.buffers.push_back(graph_buffer(1, BufferKind::Param, 1, kWeird, {10, 10}, 1));
  df.buffers.push_back(graph_buffer(2, BufferKind::Intermediate, 2, "tvmgen_default_fused_nn_dense_add", {1, 10}, 2));
  df.buffers.push_back(graph_buffer(3, BufferKind::Output, 3, "tvmgen_default_fused_nn_log_softmax", {1, 10}, 3));
  Buffer ws;
  ws.id = 4;
  ws.kind = BufferKind::Workspace;
  ws.name = "tvmgen_default_fused_nn_log_softmax.ws0";
  ws.dtype = "float32";
  ws.shape = {1};
  ws.bytes = 4;
  ws.node = 3;
  ws.loc = loc(361, 3);
  df.buffers.push_back(ws);

  Node n0;
  n0.id = 0, n0.op = "null", n0.name = "input0", n0.outputs = {0};
  Node n1;
  n1.id = 1, n1.op = "null", n1.name = kWeird, n1.outputs = {1};
  Node n2;
  n2.id = 2, n2.op = "tvm_op", n2.name = n2.function = "tvmgen_default_fused_nn_dense_add";
  n2.inputs = {0, 1}, n2.outputs = {2}, n2.kernels = {0}, n2.library_calls = {0}, n2.loc = loc(200, 1);
  Node n3;
  n3.id = 3, n3.op = "tvm_op", n3.name = n3.function = "tvmgen_default_fused_nn_log_softmax";
  n3.inputs = {2}, n3.outputs = {3}, n3.kernels = {1, 2}, n3.workspaces = {4}, n3.loc = loc(329, 1);
  df.nodes = {n0, n1, n2, n3};

  Kernel k0;
  k0.id = 0, k0.name = "tvmgen_default_fused_nn_dense_add_kernel", k0.node = 2, k0.function = n2.function;
  k0.grid = {10, 1, 1}, k0.block = {64, 1, 1}, k0.dynamic_shared_memory = 256;
  k0.args = {buf_arg(2), buf_arg(0), buf_arg(1, 128), int_arg(10), float_arg(0.5)};
  k0.loc = loc(230, 7);
  k0.loop_iterations = {0, 3};
  Kernel k1;
  k1.id = 1, k1.name = "tvmgen_default_fused_nn_log_softmax_kernel", k1.node = 3, k1.function = n3.function;
  k1.block = {32, 1, 1}, k1.args = {buf_arg(4), buf_arg(2)}, k1.loc = loc(382, 7);
  Kernel k2 = k1;
  k2.id = 2, k2.name = "tvmgen_default_fused_nn_log_softmax_kernel_1", k2.args = {buf_arg(4), buf_arg(3), buf_arg(2)};
  k2.loc = loc(402, 7);
  df.kernels = {k0, k1, k2};

  LibraryCall lc;
  lc.id = 0, lc.name = "tvm.contrib.cublas.matmul", lc.node = 2, lc.function = n2.function;
  lc.args = {buf_arg(0), buf_arg(1), buf_arg(2), int_arg(0), null_arg(), tensor_arg(2, "float32", {1, 10}),
             str_arg("float32")};
  lc.loc = loc(240, 7), lc.after_kernel = 0;
  df.library_calls = {lc};

  df.edges = {{Edge::Kind::Read, 0, 2}, {Edge::Kind::Read, 1, 2}, {Edge::Kind::Write, 2, 2},
              {Edge::Kind::Read, 2, 3}, {Edge::Kind::Write, 3, 3}};
  df.inputs = {0};
  df.params = {1};
  df.outputs = {3};
  return df;
}

void check_same(const Dataflow& a, const Dataflow& b) {
  CHECK(a.schema == b.schema);
  CHECK(a.sources.graph == b.sources.graph);
  CHECK(a.sources.host == b.sources.host);
  CHECK(a.sources.meta == b.sources.meta);
  CHECK(a.sources.params == b.sources.params);
  CHECK(a.buffers == b.buffers);
  CHECK(a.nodes == b.nodes);
  CHECK(a.kernels == b.kernels);
  CHECK(a.library_calls == b.library_calls);
  CHECK(a.edges == b.edges);
  CHECK(a.inputs == b.inputs);
  CHECK(a.params == b.params);
  CHECK(a.outputs == b.outputs);
  CHECK(a.dependencies == b.dependencies);
}

std::string parse_error(const std::string& text) {
  auto r = parse_dataflow_json(text, "flow.json");
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find('\n') == std::string::npos);
  CHECK(r.error().code == ExitCode::DataError);
  return r.error().message;
}

/// The emitted JSON with one value replaced (by JSON pointer).
std::string patched(const std::string& pointer, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(emit_json(sample_ir()));
  j[nlohmann::json::json_pointer(pointer)] = value;
  return j.dump();
}

}  // namespace

TEST_CASE("buffer kinds have stable names", "[emit]") {
  CHECK(std::string(to_string(BufferKind::Input)) == "input");
  CHECK(std::string(to_string(BufferKind::Param)) == "param");
  CHECK(std::string(to_string(BufferKind::Intermediate)) == "intermediate");
  CHECK(std::string(to_string(BufferKind::Output)) == "output");
  CHECK(std::string(to_string(BufferKind::Workspace)) == "workspace");
}

TEST_CASE("IR equality compares the fields that matter", "[emit]") {
  Dataflow a = sample_ir(), b = sample_ir();
  CHECK(a.kernels == b.kernels);
  b.kernels[1].grid[0] = 2;
  CHECK_FALSE(a.kernels == b.kernels);
  b = sample_ir();
  b.buffers[4].loc.col = 4;
  CHECK_FALSE(a.buffers == b.buffers);
  // An Int argument's unused buffer field is not part of its value; NaN equals NaN.
  Arg x = int_arg(3), y = int_arg(3);
  y.buffer = 7;
  CHECK(x == y);
  CHECK(float_arg(std::nan("")) == float_arg(std::nan("")));
  CHECK_FALSE(float_arg(0.0) == float_arg(-0.0));
  CHECK_FALSE(int_arg(1) == float_arg(1.0));
}

TEST_CASE("JSON has the kdflow/1 shape and exact values", "[emit]") {
  const std::string text = emit_json(sample_ir());
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  const auto j = nlohmann::ordered_json::parse(text);

  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  CHECK(keys == std::vector<std::string>{"schema", "generator", "sources", "summary", "buffers", "kernels",
                                         "library_calls", "nodes", "edges", "dependencies", "device_functions",
                                         "inputs", "params", "outputs"});
  CHECK(j["schema"] == "kdflow/1");
  CHECK(j["generator"] == "kdflow 0.1.0");
  CHECK(j["sources"]["graph"] == "graph.json");
  CHECK(j["sources"]["params"].is_null());
  CHECK(j["summary"] == nlohmann::ordered_json::parse(
                            R"({"nodes":4,"function_nodes":2,"kernels":3,"library_calls":1,"buffers":5,"workspaces":1,"dependencies":0})"));

  const auto& ws = j["buffers"][4];
  CHECK(ws["kind"] == "workspace");
  CHECK(ws["storage_id"].is_null());
  CHECK(ws["entry_id"].is_null());
  CHECK(ws["node"] == 3);
  CHECK(ws["bytes"] == 4);
  CHECK(ws["loc"] == "host.c:361:3");
  CHECK(j["buffers"][0]["node"] == 0);
  CHECK(j["buffers"][0]["shape"] == nlohmann::ordered_json::array({1, 10}));
  CHECK_FALSE(j["buffers"][0].contains("loc"));

  const auto& k0 = j["kernels"][0];
  CHECK(k0["graph_node"] == 2);
  CHECK(k0["grid"] == nlohmann::ordered_json::array({10, 1, 1}));
  CHECK(k0["dynamic_shared_memory"] == 256);
  CHECK(k0["loc"] == "host.c:230:7");
  CHECK(k0["loop_iterations"] == nlohmann::ordered_json::array({0, 3}));
  CHECK(k0["args"][2] == nlohmann::ordered_json::parse(R"({"buffer":1,"offset":128,"access":"unknown","dtype":"handle"})"));
  CHECK(k0["device_function"].is_null());
  CHECK(k0["args"][3]["value"].is_number_integer());
  CHECK(k0["args"][3] == nlohmann::ordered_json::parse(R"({"value":10,"dtype":"int32"})"));
  CHECK(k0["args"][4]["value"].is_number_float());
  CHECK(k0["args"][4]["value"] == 0.5);
  CHECK_FALSE(j["kernels"][1].contains("loop_iterations"));
  CHECK(j["kernels"][2]["block"] == nlohmann::ordered_json::array({32, 1, 1}));

  const auto& lc = j["library_calls"][0];
  CHECK(lc["after_kernel"] == 0);
  CHECK(lc["args"][4] == nlohmann::ordered_json::parse(R"({"null":true,"dtype":"handle"})"));
  CHECK(lc["args"][5] == nlohmann::ordered_json::parse(
                             R"({"buffer":2,"offset":0,"access":"readwrite","tensor":{"dtype":"float32","shape":[1,10]},"dtype":"DLTensor*"})"));
  CHECK(lc["args"][6] == nlohmann::ordered_json::parse(R"({"null":true,"string":"float32","dtype":"str"})"));
  CHECK(j["sources"]["device"].is_null());
  CHECK(j["dependencies"].empty());
  CHECK(j["device_functions"].empty());

  CHECK_FALSE(j["nodes"][0].contains("function"));
  CHECK_FALSE(j["nodes"][0].contains("loc"));
  CHECK(j["nodes"][3]["function"] == "tvmgen_default_fused_nn_log_softmax");
  CHECK(j["nodes"][3]["kernels"] == nlohmann::ordered_json::array({1, 2}));
  CHECK(j["nodes"][3]["workspaces"] == nlohmann::ordered_json::array({4}));
  CHECK(j["nodes"][3]["loc"] == "host.c:329:1");
  CHECK(j["edges"][2] == nlohmann::ordered_json::parse(R"({"kind":"write","buffer":2,"node":2})"));
  CHECK(j["outputs"] == nlohmann::ordered_json::array({3}));

  // Short flat values stay on one line.
  CHECK(text.find("\"grid\": [10, 1, 1]") != std::string::npos);
  CHECK(text.find("{\"buffer\": 4, \"offset\": 0, \"access\": \"unknown\", \"dtype\": \"handle\"}") !=
        std::string::npos);
}

TEST_CASE("JSON is deterministic and round-trips to an equal IR", "[emit]") {
  const Dataflow df = sample_ir();
  const std::string a = emit_json(df), b = emit_json(df);
  CHECK(a == b);
  auto back = parse_dataflow_json(a, "flow.json");
  REQUIRE(back);
  check_same(*back, df);
  CHECK(emit_json(*back) == a);

  Dataflow with_params = df;
  with_params.sources.params = "params.bin";
  auto j = nlohmann::json::parse(emit_json(with_params));
  CHECK(j["sources"]["params"] == "params.bin");
  auto back2 = parse_dataflow_json(emit_json(with_params), "flow.json");
  REQUIRE(back2);
  CHECK(back2->sources.params == "params.bin");

  // Dependencies, with library calls at either end.
  Dataflow with_deps = df;
  with_deps.dependencies = {Dependency{Dependency::Kind::RAW, 0, 0, 2, 2, false, true},
                            Dependency{Dependency::Kind::RAW, 0, 1, 2, 2, true, false},
                            Dependency{Dependency::Kind::WAR, 1, 2, 4, 4, false, false}};
  const std::string dj = emit_json(with_deps);
  auto jd = nlohmann::json::parse(dj);
  CHECK(jd["dependencies"][0]["to_library_call"] == true);
  CHECK_FALSE(jd["dependencies"][0].contains("from_library_call"));
  CHECK_FALSE(jd["dependencies"][2].contains("to_library_call"));
  auto back3 = parse_dataflow_json(dj, "flow.json");
  REQUIRE(back3);
  check_same(*back3, with_deps);
  CHECK(emit_json(*back3) == dj);
}

TEST_CASE("non-finite and whole floats stay valid, typed JSON", "[emit]") {
  Dataflow df = sample_ir();
  df.kernels[0].args = {float_arg(std::numeric_limits<double>::quiet_NaN()),
                        float_arg(std::numeric_limits<double>::infinity()),
                        float_arg(-std::numeric_limits<double>::infinity()), float_arg(2.0), float_arg(1e-7),
                        int_arg(INT64_MIN)};
  const std::string text = emit_json(df);
  auto j = nlohmann::json::parse(text);  // throws if invalid
  const auto& args = j["kernels"][0]["args"];
  CHECK(args[0]["value"] == "nan");
  CHECK(args[1]["value"] == "inf");
  CHECK(args[2]["value"] == "-inf");
  CHECK(args[3]["value"].is_number_float());
  CHECK(args[5]["value"] == INT64_MIN);
  auto back = parse_dataflow_json(text, "flow.json");
  REQUIRE(back);
  CHECK(back->kernels == df.kernels);
}

TEST_CASE("parse_dataflow_json names a JSON pointer in one-line errors", "[emit]") {
  SECTION("syntax error") {
    std::string m = parse_error("{\n  \"schema\": kdflow }");
    CHECK(m.rfind("flow.json:2:", 0) == 0);
    CHECK(m.find("error: invalid JSON") != std::string::npos);
  }
  SECTION("not an object") { CHECK(parse_error("[1, 2]") == "flow.json: error: expected a JSON object (a kdflow/1 dataflow)"); }
  SECTION("bad grid") {
    CHECK(parse_error(patched("/kernels/1/grid", {1, 2})) ==
          "flow.json:/kernels/1/grid: error: expected an array of 3 integers");
    CHECK(parse_error(patched("/kernels/1/grid", {1, 2, 1.5})) ==
          "flow.json:/kernels/1/grid: error: expected an array of 3 integers");
  }
  SECTION("wrong types") {
    CHECK(parse_error(patched("/buffers/2/bytes", -4)) ==
          "flow.json:/buffers/2/bytes: error: expected a non-negative integer");
    CHECK(parse_error(patched("/buffers/2/name", 7)) == "flow.json:/buffers/2/name: error: expected a string");
    CHECK(parse_error(patched("/nodes/3/id", 3.0)) == "flow.json:/nodes/3/id: error: expected an integer");
    CHECK(parse_error(patched("/buffers/0/kind", "weights")).find("/buffers/0/kind: error: unknown buffer kind") !=
          std::string::npos);
    CHECK(parse_error(patched("/kernels/0/args/3", {{"dtype", "int32"}})) ==
          "flow.json:/kernels/0/args/3: error: expected an argument with \"buffer\", \"value\" or \"null\"");
  }
  SECTION("dangling references and misplaced ids") {
    CHECK(parse_error(patched("/kernels/2/args/1/buffer", 5)) ==
          "flow.json:/kernels/2/args/1/buffer: error: buffer 5 does not exist (5 buffers)");
    CHECK(parse_error(patched("/nodes/3/kernels/0", 9)) ==
          "flow.json:/nodes/3/kernels/0: error: kernel 9 does not exist (3 kernels)");
    CHECK(parse_error(patched("/kernels/1/id", 0)) ==
          "flow.json:/kernels/1/id: error: expected id 1 (ids are array positions), got 0");
    CHECK(parse_error(patched("/buffers/0/entry_id", 4294967296LL)) ==
          "flow.json:/buffers/0/entry_id: error: integer 4294967296 out of range [0, 2147483647]");
  }
  SECTION("missing member, bad loc, other schema") {
    auto j = nlohmann::json::parse(emit_json(sample_ir()));
    j["kernels"][0].erase("block");
    CHECK(parse_error(j.dump()) == "flow.json:/kernels/0: error: missing member \"block\"");
    CHECK(parse_error(patched("/kernels/0/loc", "host.c:12")) ==
          "flow.json:/kernels/0/loc: error: expected \"file:line:col\" with line >= 1");
    CHECK(parse_error(patched("/schema", "kdflow/2")) ==
          "flow.json:/schema: error: unsupported schema \"kdflow/2\" (this kdflow reads kdflow/1)");
    CHECK(parse_error(patched("/library_calls/0/args/5/tensor/shape", {1, "x"})) ==
          "flow.json:/library_calls/0/args/5/tensor/shape/1: error: expected an integer");
    CHECK(parse_error(patched("/library_calls/0/args/5/tensor/dtype", "")) ==
          "flow.json:/library_calls/0/args/5/tensor/dtype: error: expected a dtype");
    CHECK(parse_error(patched("/library_calls/0/args/6/string", 3)) ==
          "flow.json:/library_calls/0/args/6/string: error: expected a string");
    CHECK(parse_error(patched("/dependencies", {{{"kind", "raw"}, {"from", 0}, {"to", 1}, {"from_buffer", 2},
                                                 {"to_buffer", 2}, {"to_library_call", true}}})) ==
          "flow.json:/dependencies/0/to: error: library call 1 does not exist (1 library calls)");
  }
  SECTION("nesting is capped") {
    std::string deep(100000, '[');
    deep += std::string(100000, ']');
    CHECK(parse_error(deep).find("nested deeper than") != std::string::npos);
    std::string deep_member = patched("/kernels/0/extra", 1);
    deep_member.replace(deep_member.find("\"extra\":1"), 9, "\"extra\":" + std::string(200, '[') + std::string(200, ']'));
    CHECK(parse_error(deep_member).find("nested deeper than") != std::string::npos);
  }
  SECTION("unknown members are ignored (additive changes keep kdflow/1)") {
    auto r = parse_dataflow_json(patched("/kernels/0/registers", 32), "flow.json");
    REQUIRE(r);
    CHECK(r->kernels == sample_ir().kernels);
  }
}

TEST_CASE("output formats from names and paths", "[emit]") {
  CHECK(*format_from_name("json") == Format::Json);
  CHECK(*format_from_name("dot") == Format::Dot);
  CHECK(*format_from_name("text") == Format::Text);
  CHECK(*format_from_path("out/flow.json") == Format::Json);
  CHECK(*format_from_path("g.dot") == Format::Dot);
  CHECK(*format_from_path("g.GV") == Format::Dot);
  CHECK(*format_from_path("summary.txt") == Format::Text);
  auto bad = format_from_name("xml");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ExitCode::Usage);
  CHECK(bad.error().message.find("xml") != std::string::npos);
  CHECK(bad.error().message.find('\n') == std::string::npos);
  auto bad_path = format_from_path("dir.json/flow");
  REQUIRE_FALSE(bad_path);
  CHECK(bad_path.error().code == ExitCode::Usage);
}

TEST_CASE("DOT has a cluster per launching node, escaped labels, role-directed edges", "[emit]") {
  const std::string dot = emit_dot(sample_ir());
  CHECK(dot == emit_dot(sample_ir()));
  CHECK(dot.rfind("digraph kdflow {\n", 0) == 0);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
  CHECK(dot.find("subgraph \"cluster_node3\" {") != std::string::npos);
  CHECK(dot.find("subgraph \"cluster_node2\" {") != std::string::npos);
  CHECK(dot.find("cluster_node0") == std::string::npos);
  CHECK(dot.find("\"k1\" [label=\"tvmgen_default_fused_nn_log_softmax_kernel\\n<<<(1,1,1), (32,1,1), 0>>>\"") !=
        std::string::npos);
  CHECK(dot.find("<<<(10,1,1), (64,1,1), 256>>>\\nscalars: 10, 0.5") != std::string::npos);
  CHECK(dot.find("weird\\\"name\\\\path") != std::string::npos);  // weird\"name\\path
  CHECK(dot.find(kWeird) == std::string::npos);
  CHECK(dot.find("\"buf2\" -> \"k1\";") != std::string::npos);          // input of log_softmax
  CHECK(dot.find("\"k2\" -> \"buf3\";") != std::string::npos);          // its output
  CHECK(dot.find("\"k1\" -> \"buf4\" [style=dashed, dir=both, constraint=false];") != std::string::npos);  // workspace
  CHECK(dot.find("\"buf1\" -> \"k0\" [label=\"+128\"];") != std::string::npos);
  CHECK(dot.find("\"lib0\" [label=\"tvm.contrib.cublas.matmul") != std::string::npos);
  CHECK(dot.find("shape=hexagon") != std::string::npos);
  CHECK(dot.find("record") == std::string::npos);
  // The workspace is drawn inside its node's cluster.
  const size_t cluster = dot.find("subgraph \"cluster_node3\"");
  const size_t ws = dot.find("\"buf4\" [label=");
  CHECK(ws > cluster);
  CHECK(ws < dot.find("\n  }\n", cluster));
}

TEST_CASE("DOT renders with Graphviz", "[emit]") {
  if (!fs::exists("/usr/bin/dot")) {
    WARN("dot not installed: skipped");
    SUCCEED();
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("kdflow_emit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "flow.dot", out = dir / "flow.svg";
  {
    std::ofstream f(in);
    f << emit_dot(sample_ir());
  }
  const std::string cmd = "/usr/bin/dot -Tsvg '" + in.string() + "' -o '" + out.string() + "' 2>'" +
                          (dir / "err.txt").string() + "'";
  const int rc = std::system(cmd.c_str());
  std::ifstream err(dir / "err.txt");
  std::string err_text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  INFO("dot stderr: " << err_text);
  CHECK(rc == 0);
  CHECK(err_text.empty());
  CHECK(fs::file_size(out) > 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_CASE("text summary lists function nodes and their launches", "[emit]") {
  const std::string text = emit_text(sample_ir());
  CHECK(text == emit_text(sample_ir()));
  CHECK(text.rfind("graph.json: 4 nodes, 2 function nodes, 3 kernels, 1 workspace, 1 library call\n", 0) == 0);
  CHECK(text.find("node 3  tvmgen_default_fused_nn_log_softmax  (2 kernels, 1 workspace)\n") != std::string::npos);
  CHECK(text.find("  reads sid2  writes sid3\n") != std::string::npos);
  CHECK(text.find("  ws0  4 bytes  at host.c:361:3\n") != std::string::npos);
  CHECK(text.find("  #1 tvmgen_default_fused_nn_log_softmax_kernel  grid (1,1,1) block (32,1,1) smem 0  args: ws0, "
                  "sid2\n") != std::string::npos);
  CHECK(text.find("  #0 tvmgen_default_fused_nn_dense_add_kernel  grid (10,1,1) block (64,1,1) smem 256  args: sid2, "
                  "sid0, sid1+128, 10, 0.5  loop [0, 3]\n") != std::string::npos);
  CHECK(text.find("node 2  tvmgen_default_fused_nn_dense_add  (1 kernel, 1 library call)\n") != std::string::npos);
  CHECK(text.find("  library call 0 tvm.contrib.cublas.matmul  args: sid0, sid1, sid2, 0, null, sid2:float32[1, 10](rw), \"float32\"  (after kernel #0)\n") !=
        std::string::npos);
  CHECK(text.find("node 0") == std::string::npos);  // null nodes are not function nodes
}

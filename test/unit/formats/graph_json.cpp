// Unit tests: graph.json reading and validation, on the real samples and on broken input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "kdflow/formats/graph_json.h"
#include "test_util.h"

using namespace kdflow;
using nlohmann::json;

namespace {

Graph parse_sample(const std::string& name) {
  std::string text = test::slurp(test::sample_dir(name) + "/graph.json");
  auto g = parse_graph_json(text, "graph.json");
  INFO(name << ": " << (g ? std::string() : g.error().message));
  REQUIRE(g);
  return g.take();
}

/// A small valid graph: input x → f (two outputs) → g.
json small_graph() {
  return json::parse(R"({
    "nodes": [
      {"op": "null", "name": "x", "inputs": []},
      {"op": "tvm_op", "name": "f", "inputs": [[0, 0, 0]],
       "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "2", "flatten_data": "0"}},
      {"op": "tvm_op", "name": "g", "inputs": [[1, 1, 0], [1, 0]],
       "attrs": {"func_name": "g", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}}
    ],
    "arg_nodes": [0],
    "heads": [[2, 0, 0]],
    "node_row_ptr": [0, 1, 3, 4],
    "attrs": {
      "shape": ["list_shape", [[2, 3], [2, 3], [3], [2, 3]]],
      "dltype": ["list_str", ["float32", "float32", "int8", "float32"]],
      "storage_id": ["list_int", [0, 1, 2, 1]],
      "device_index": ["list_int", [2, 2, 2, 2]]
    }
  })");
}

/// Parses `j` and returns the error message (failing the test if it parsed).
std::string error_of(const std::string& text, const GraphLimits& limits = {}) {
  auto g = parse_graph_json(text, "g.json", limits);
  REQUIRE_FALSE(g);
  const std::string& m = g.error().message;
  CHECK(m.find('\n') == std::string::npos);
  CHECK(g.error().code == ExitCode::DataError);
  return m;
}
std::string error_of(const json& j, const GraphLimits& limits = {}) { return error_of(j.dump(), limits); }

/// True for `<file>:<line>:<col>: error: <one line>`; stores line and col.
bool is_line_col_diag(const std::string& m, const std::string& file, unsigned long* line = nullptr,
                      unsigned long* col = nullptr) {
  if (m.rfind(file + ":", 0) != 0 || m.find('\n') != std::string::npos) return false;
  size_t pos = file.size() + 1;
  unsigned long nums[2] = {0, 0};
  for (unsigned long& n : nums) {
    size_t start = pos;
    while (pos < m.size() && m[pos] >= '0' && m[pos] <= '9') n = n * 10 + static_cast<unsigned long>(m[pos++] - '0');
    if (pos == start || pos >= m.size() || m[pos] != ':') return false;
    ++pos;
  }
  if (line) *line = nums[0];
  if (col) *col = nums[1];
  return m.compare(pos, 8, " error: ") == 0 && m.size() > pos + 8;
}

/// True for `<file>:/json/pointer: error: <one line>` or `<file>: error: <one line>`.
bool is_pointer_diag(const std::string& m, const std::string& file) {
  if (m.rfind(file + ":", 0) != 0 || m.find('\n') != std::string::npos) return false;
  size_t pos = file.size() + 1;
  if (m.compare(pos, 1, "/") == 0) {
    pos = m.find(": error: ", pos);
    if (pos == std::string::npos) return false;
    return m.size() > pos + 9;
  }
  return m.compare(pos, 8, " error: ") == 0 && m.size() > pos + 8;
}

json with(json j, const char* pointer, json value) {
  j[json::json_pointer(pointer)] = std::move(value);
  return j;
}

}  // namespace

TEST_CASE("every sample graph.json parses", "[graph]") {
  auto names = test::sample_names();
  REQUIRE(names.size() >= 8);
  for (const auto& name : names) {
    Graph g = parse_sample(name);
    INFO(name);
    CHECK(g.file == "graph.json");
    CHECK(g.node_row_ptr.size() == g.nodes.size() + 1);
    CHECK(g.entries.size() == static_cast<size_t>(g.node_row_ptr.back()));
    for (const auto& n : g.nodes) {
      if (n.op == "tvm_op") CHECK_FALSE(n.func_name.empty());
      if (n.op == "null") CHECK(n.func_name.empty());
      CHECK(n.num_inputs == static_cast<int>(n.inputs.size()));
    }
    for (const auto& e : g.entries) CHECK(e.device_type == 2);
    CHECK_FALSE(g.heads.empty());
  }
}

TEST_CASE("mlp graph: nodes, entries and storage as in the file", "[graph]") {
  Graph g = parse_sample("mlp");
  json j = json::parse(test::slurp(test::sample_dir("mlp") + "/graph.json"));
  REQUIRE(g.nodes.size() == 14);
  CHECK(g.nodes[0].op == "null");
  CHECK(g.nodes[0].name == "input0");
  CHECK(g.nodes[0].num_outputs == 1);

  const GraphNode& n3 = g.nodes[3];
  CHECK(n3.op == "tvm_op");
  CHECK(n3.func_name == "tvmgen_default_fused_nn_dense_add_nn_relu");
  CHECK(n3.num_inputs == 3);
  CHECK(n3.num_outputs == 1);
  CHECK(n3.attrs.at("hash") == "73947a455a44883d");
  CHECK(n3.attrs.at("flatten_data") == "0");
  CHECK(n3.attrs.at("num_inputs") == "3");
  REQUIRE(n3.inputs.size() == 3);
  CHECK(n3.inputs[0] == NodeEntryRef{0, 0, 0});
  CHECK(n3.inputs[1] == NodeEntryRef{1, 0, 0});
  CHECK(n3.inputs[2] == NodeEntryRef{2, 0, 0});

  CHECK(g.arg_nodes == j["arg_nodes"].get<std::vector<int>>());
  REQUIRE(g.heads.size() == 1);
  CHECK(g.heads[0] == NodeEntryRef{13, 0, 0});
  CHECK(g.node_row_ptr == j["node_row_ptr"].get<std::vector<int>>());

  REQUIRE(g.entries.size() == 14);
  auto sids = j["attrs"]["storage_id"][1].get<std::vector<int64_t>>();
  auto shapes = j["attrs"]["shape"][1].get<std::vector<std::vector<int64_t>>>();
  for (size_t eid = 0; eid < g.entries.size(); ++eid) {
    const GraphEntry& e = g.entries[eid];
    INFO("entry " << eid);
    CHECK(e.node == static_cast<int>(eid));  // one output per node
    CHECK(e.index == 0);
    CHECK(e.storage_id == sids[eid]);
    CHECK(e.shape == shapes[eid]);
    CHECK(e.dtype == "float32");
    CHECK(e.type == DType{kDLFloat, 32, 1});
    uint64_t elems = 1;
    for (auto d : e.shape) elems *= static_cast<uint64_t>(d);
    CHECK(e.bytes == 4 * elems);
  }
  CHECK(g.entries[0].shape == std::vector<int64_t>{1, 100});
  CHECK(g.entries[1].shape == std::vector<int64_t>{400, 100});

  // Each storage pool is the largest entry sharing its id, rounded up to 4 bytes.
  for (int64_t sid : sids) {
    uint64_t expect = 0;
    for (size_t eid = 0; eid < sids.size(); ++eid)
      if (sids[eid] == sid) expect = std::max(expect, g.entries[eid].bytes);
    CHECK(g.storage_bytes(sid) == (expect + 3) / 4 * 4);
  }
  CHECK(g.storage_bytes(12345) == 0);
}

TEST_CASE("attention graph: a node with three outputs", "[graph]") {
  Graph g = parse_sample("attention");
  CHECK(g.nodes.size() == 26);
  CHECK(g.entries.size() == 28);
  int multi = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].num_outputs == 3) multi = static_cast<int>(i);
  REQUIRE(multi >= 0);
  for (int k = 0; k < 3; ++k) {
    const GraphEntry& e = g.entries[static_cast<size_t>(g.entry_id(multi, k))];
    CHECK(e.node == multi);
    CHECK(e.index == k);
  }
}

TEST_CASE("resnet18 graph has __nop nodes", "[graph]") {
  Graph g = parse_sample("resnet18");
  CHECK(g.nodes.size() == 75);
  int nops = 0;
  for (const auto& n : g.nodes)
    if (n.func_name == "__nop") ++nops;
  CHECK(nops > 0);
  CHECK(g.nodes[1].attrs.empty());
}

TEST_CASE("sort_scan graph: int32 entries and three heads", "[graph]") {
  Graph g = parse_sample("sort_scan");
  CHECK(g.heads.size() == 3);
  bool has_int32 = false;
  for (const auto& e : g.entries)
    if (e.dtype == "int32") {
      has_int32 = true;
      CHECK(e.type == DType{kDLInt, 32, 1});
    }
  CHECK(has_int32);
}

TEST_CASE("small graph parses with multi-output entries and storage sizes", "[graph]") {
  auto g = parse_graph_json(small_graph().dump(), "g.json");
  REQUIRE(g);
  CHECK(g->nodes[2].inputs[0] == NodeEntryRef{1, 1, 0});
  CHECK(g->nodes[2].inputs[1] == NodeEntryRef{1, 0, 0});  // version defaults to 0
  CHECK(g->entry_id(1, 1) == 2);
  CHECK(g->entries[2].bytes == 3);   // int8[3]
  CHECK(g->storage_bytes(2) == 4);   // rounded up to 4
  CHECK(g->storage_bytes(1) == 24);  // float32[2,3] twice
  CHECK(g->entries[1].storage_scope.empty());
}

TEST_CASE("optional storage_scope, non-string attrs, empty shapes", "[graph]") {
  json j = small_graph();
  j["attrs"]["storage_scope"] = json::array({"list_str", {"global", "global", "shared", "global"}});
  j["attrs"]["shape"][1][0] = json::array();
  j["nodes"][1]["attrs"]["extra"] = json{{"k", 1}};
  j["nodes"][1]["attrs"]["num_outputs"] = 2;  // a number instead of "2"
  auto g = parse_graph_json(j.dump(), "g.json");
  REQUIRE(g);
  CHECK(g->entries[2].storage_scope == "shared");
  CHECK(g->entries[0].shape.empty());
  CHECK(g->entries[0].bytes == 4);  // a scalar
  CHECK(g->nodes[1].attrs.at("extra") == R"({"k":1})");
  CHECK(g->nodes[1].num_outputs == 2);
  // The device_index attribute is optional.
  j["attrs"].erase("device_index");
  auto g2 = parse_graph_json(j.dump(), "g.json");
  REQUIRE(g2);
  CHECK(g2->entries[0].device_type == 2);
}

TEST_CASE("JSON syntax errors carry line and column", "[graph][errors]") {
  CHECK(error_of(std::string("{\n  \"nodes\": [1,,2]\n}")).rfind("g.json:2:15: error: syntax error", 0) == 0);

  // A real file truncated after a line: the error points at the end of the text.
  std::string text = test::slurp(test::sample_dir("mlp") + "/graph.json");
  std::string cut = text.substr(0, text.find('\n', text.size() / 2) + 1);
  std::string m = error_of(cut);
  unsigned long line = 0, col = 0;
  REQUIRE(is_line_col_diag(m, "g.json", &line, &col));
  CHECK(line == static_cast<unsigned long>(std::count(cut.begin(), cut.end(), '\n')) + 1);
  CHECK(col == 1);
  INFO(m);
  CHECK(m.find("unexpected end of input") != std::string::npos);

  CHECK(error_of(std::string("")).rfind("g.json:1:1: error: ", 0) == 0);
  CHECK(error_of(std::string("{\"nodes\": tru}")).rfind("g.json:1:", 0) == 0);
  CHECK(error_of(std::string("{} extra")).rfind("g.json:1:4: error: ", 0) == 0);
}

TEST_CASE("deeply nested JSON is rejected without exhausting the stack", "[graph][errors]") {
  std::string deep(100000, '[');
  CHECK(error_of(deep) == "g.json:1:65: error: JSON nested more than 64 levels deep");
  // Nesting hidden inside an attribute value, balanced and otherwise valid.
  json j = small_graph();
  std::string text = j.dump();
  std::string nest = std::string(70, '[') + std::string(70, ']');
  text.replace(text.find("\"f\","), 4, "\"f\", \"deep\": " + nest + ",");
  CHECK(error_of(text).find("g.json:1:") == 0);
  CHECK(error_of(text).find("nested more than 64 levels") != std::string::npos);
  // 64 levels in all are fine (the value sits inside 4: the top level, nodes, the node, attrs).
  std::string ok = std::string(60, '[') + std::string(60, ']');
  text = j.dump();
  text.replace(text.find("\"f\","), 4, "\"f\", \"deep\": " + ok + ",");
  CHECK(parse_graph_json(text, "g.json"));
}

TEST_CASE("top-level structure errors", "[graph][errors]") {
  CHECK(error_of(std::string("[]")) == "g.json: error: expected a JSON object at the top level, got an array");
  json j = small_graph();
  j.erase("nodes");
  CHECK(error_of(j) == "g.json: error: missing required member \"nodes\"");
  CHECK(error_of(with(small_graph(), "/nodes", 3)) == "g.json:/nodes: error: expected an array, got an integer");
  j = small_graph();
  j.erase("attrs");
  CHECK(error_of(j) == "g.json: error: missing required member \"attrs\"");
  j = small_graph();
  j["attrs"].erase("dltype");
  CHECK(error_of(j) == "g.json:/attrs: error: missing required member \"dltype\"");
}

TEST_CASE("inputs must refer to earlier nodes and existing outputs", "[graph][errors]") {
  json j = small_graph();
  j["nodes"][1]["inputs"][0] = {2, 0, 0};
  CHECK(error_of(j) == "g.json:/nodes/1/inputs/0: error: input refers to node 2, which is not earlier than node 1");
  j["nodes"][1]["inputs"][0] = {1, 0, 0};
  CHECK(error_of(j) == "g.json:/nodes/1/inputs/0: error: input refers to node 1, which is not earlier than node 1");
  j["nodes"][1]["inputs"][0] = {0, 1, 0};
  CHECK(error_of(j) == "g.json:/nodes/1/inputs/0: error: input refers to output 1 of node 0, which has 1 output(s)");
  CHECK(error_of(with(small_graph(), "/nodes/2/inputs/0/1", 2)) ==
        "g.json:/nodes/2/inputs/0: error: input refers to output 2 of node 1, which has 2 output(s)");
  CHECK(error_of(with(small_graph(), "/nodes/1/inputs/0/0", -1)) ==
        "g.json:/nodes/1/inputs/0/0: error: expected a non-negative integer, got -1");
  CHECK(error_of(with(small_graph(), "/nodes/1/inputs/0/0", 0.5)) ==
        "g.json:/nodes/1/inputs/0/0: error: expected a non-negative integer, got a number with a fraction or "
        "exponent");
  CHECK(error_of(with(small_graph(), "/nodes/1/inputs/0", json::array({0})))
            .rfind("g.json:/nodes/1/inputs/0: error: expected [node, index] or [node, index, version]", 0) == 0);
  CHECK(error_of(with(small_graph(), "/nodes/1/inputs/0/0", 4294967296ull)) ==
        "g.json:/nodes/1/inputs/0/0: error: expected a non-negative integer, got 4294967296");
}

TEST_CASE("node attribute checks", "[graph][errors]") {
  CHECK(error_of(with(small_graph(), "/nodes/1/attrs/num_inputs", "2")) ==
        "g.json:/nodes/1/attrs/num_inputs: error: num_inputs is 2 but the node has 1 inputs");
  CHECK(error_of(with(small_graph(), "/nodes/1/attrs/num_inputs", "-1")) ==
        "g.json:/nodes/1/attrs/num_inputs: error: expected a count in decimal digits, got \"-1\"");
  CHECK(error_of(with(small_graph(), "/nodes/1/attrs/num_outputs", "two")) ==
        "g.json:/nodes/1/attrs/num_outputs: error: expected a count in decimal digits, got \"two\"");
  json j = small_graph();
  j["nodes"][1]["attrs"].erase("func_name");
  CHECK(error_of(j) == "g.json:/nodes/1/attrs: error: a \"tvm_op\" node needs attrs.func_name");
  CHECK(error_of(with(small_graph(), "/nodes/1/op", "conv2d")) ==
        "g.json:/nodes/1/op: error: unknown op \"conv2d\" (expected \"null\" or \"tvm_op\")");
  CHECK(error_of(with(small_graph(), "/nodes/1/op", "bad\nop")) ==
        "g.json:/nodes/1/op: error: unknown op \"bad\\u000aop\" (expected \"null\" or \"tvm_op\")");
  CHECK(error_of(with(small_graph(), "/nodes/1/name", 7)) ==
        "g.json:/nodes/1/name: error: expected a string, got an integer");
  CHECK(error_of(with(small_graph(), "/nodes/0/inputs", json::array({{0, 0, 0}}))) ==
        "g.json:/nodes/0/inputs: error: a \"null\" node must have no inputs");
  j = small_graph();
  j["nodes"][1].erase("inputs");
  CHECK(error_of(j) == "g.json:/nodes/1: error: missing required member \"inputs\"");
}

TEST_CASE("node_row_ptr must match the nodes' outputs", "[graph][errors]") {
  CHECK(error_of(with(small_graph(), "/node_row_ptr", {0, 1, 3})) ==
        "g.json:/node_row_ptr: error: has 3 entries, expected 4 (one per node, plus one)");
  CHECK(error_of(with(small_graph(), "/node_row_ptr", {1, 2, 4, 5})) ==
        "g.json:/node_row_ptr/0: error: is 1, expected 0");
  CHECK(error_of(with(small_graph(), "/node_row_ptr", {0, 1, 2, 3})) ==
        "g.json:/node_row_ptr/2: error: is 2, expected 3 (node 1 has 2 output(s))");
  CHECK(error_of(with(small_graph(), "/node_row_ptr", {0, 1, 0, 1})) ==
        "g.json:/node_row_ptr/2: error: is 0, less than the previous entry 1");
}

TEST_CASE("attribute lists must have one value per entry", "[graph][errors]") {
  CHECK(error_of(with(small_graph(), "/attrs/dltype/1", {"float32"})) ==
        "g.json:/attrs/dltype/1: error: has 1 entries, expected 4 (node_row_ptr's last entry)");
  CHECK(error_of(with(small_graph(), "/attrs/storage_id/1", {0, 1, 2, 3, 4})) ==
        "g.json:/attrs/storage_id/1: error: has 5 entries, expected 4 (node_row_ptr's last entry)");
  CHECK(error_of(with(small_graph(), "/attrs/shape/0", "list_int")) ==
        "g.json:/attrs/shape/0: error: expected the type tag \"list_shape\", got \"list_int\"");
  CHECK(error_of(with(small_graph(), "/attrs/device_index", {"list_int"})) ==
        "g.json:/attrs/device_index: error: expected [\"list_int\", [...]], got an array of 1 elements");
}

TEST_CASE("shapes, dtypes and storage ids are validated", "[graph][errors]") {
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/1/1", -3)) ==
        "g.json:/attrs/shape/1/1/1: error: dimension -3 is negative");
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/1", 6)) ==
        "g.json:/attrs/shape/1/1: error: expected a shape (an array of dimensions), got an integer");
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/3", {4294967296ull, 4294967296ull})) ==
        "g.json:/attrs/shape/1/3: error: entry's byte size (element bytes times all dimensions) overflows 64 bits");
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/3", {9223372036854775807ll, 2})) ==
        "g.json:/attrs/shape/1/3: error: entry's byte size (element bytes times all dimensions) overflows 64 bits");
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/3", {1 << 20, 1 << 20, 1 << 10})) ==
        "g.json:/attrs/shape/1/3: error: entry is 4503599627370496 bytes, more than the limit of 1099511627776 "
        "bytes");
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/3/0", 18446744073709551615ull)) ==
        "g.json:/attrs/shape/1/3/0: error: expected a non-negative integer dimension, got 18446744073709551615");
  CHECK(error_of(with(small_graph(), "/attrs/shape/1/3/0", 1e30)) ==
        "g.json:/attrs/shape/1/3/0: error: expected a non-negative integer dimension, got a number with a fraction "
        "or exponent");
  // A zero dimension makes the entry empty, whatever the others.
  auto z =
      parse_graph_json(with(small_graph(), "/attrs/shape/1/3", {0, 4294967296ull, 4294967296ull}).dump(), "g.json");
  REQUIRE(z);
  CHECK(z->entries[3].bytes == 0);

  GraphLimits limits;
  limits.max_ndim = 1;
  CHECK(error_of(small_graph(), limits) ==
        "g.json:/attrs/shape/1/0: error: shape has 2 dimensions, more than the limit of 1");

  CHECK(error_of(with(small_graph(), "/attrs/dltype/1/1", "floaty32")) ==
        "g.json:/attrs/dltype/1/1: error: unknown dtype \"floaty32\"");
  CHECK(error_of(with(small_graph(), "/attrs/dltype/1/1", 32)) ==
        "g.json:/attrs/dltype/1/1: error: expected a dtype string, got an integer");
  CHECK(error_of(with(small_graph(), "/attrs/storage_id/1/2", -1)) ==
        "g.json:/attrs/storage_id/1/2: error: expected a non-negative storage id, got -1");
  CHECK(error_of(with(small_graph(), "/attrs/storage_id/1/2", 1.5)) ==
        "g.json:/attrs/storage_id/1/2: error: expected a non-negative storage id, got a number with a fraction or "
        "exponent");
  CHECK(error_of(with(small_graph(), "/attrs/device_index/1/0", "cuda")) ==
        "g.json:/attrs/device_index/1/0: error: expected a non-negative device type, got a string");
}

TEST_CASE("arg_nodes and heads are validated", "[graph][errors]") {
  CHECK(error_of(with(small_graph(), "/arg_nodes", {1})) ==
        "g.json:/arg_nodes/0: error: refers to node 1 (\"f\"), which is a \"tvm_op\" node, not \"null\"");
  CHECK(error_of(with(small_graph(), "/arg_nodes", {7})) ==
        "g.json:/arg_nodes/0: error: refers to node 7, but the graph has 3 nodes");
  CHECK(error_of(with(small_graph(), "/arg_nodes", {0, 0})) == "g.json:/arg_nodes/1: error: node 0 is listed twice");
  CHECK(error_of(with(small_graph(), "/heads/0", {3, 0, 0})) ==
        "g.json:/heads/0: error: head refers to node 3, but the graph has 3 nodes");
  CHECK(error_of(with(small_graph(), "/heads/0", {2, 1, 0})) ==
        "g.json:/heads/0: error: head refers to output 1 of node 2, which has 1 output(s)");
  CHECK(error_of(with(small_graph(), "/heads/0", {2, 0, 0, 0}))
            .rfind("g.json:/heads/0: error: expected [node, index] or [node, index, version]", 0) == 0);
}

TEST_CASE("node count is capped", "[graph][errors]") {
  GraphLimits limits;
  limits.max_nodes = 2;
  CHECK(error_of(small_graph(), limits) == "g.json:/nodes: error: graph has 3 nodes, more than the limit of 2");
}

TEST_CASE("unknown top-level keys are ignored, errors still found", "[graph][errors]") {
  json j = small_graph();
  j["metadata"] = nullptr;
  REQUIRE(parse_graph_json(j.dump(), "g.json"));
  j["nodes"][1]["attrs"].erase("num_inputs");
  j["nodes"][1]["attrs"].erase("func_name");
  auto m = error_of(j);
  CHECK(m == "g.json:/nodes/1/attrs: error: a \"tvm_op\" node needs attrs.func_name");
}

TEST_CASE("hostile inputs never crash the reader", "[graph][errors]") {
  // Every prefix of a small valid graph fails cleanly with a line:col diagnostic.
  std::string text = small_graph().dump(1);
  for (size_t n = 0; n < text.size(); n += 7) {
    auto g = parse_graph_json(text.substr(0, n), "g.json");
    REQUIRE_FALSE(g);
    CHECK(is_line_col_diag(g.error().message, "g.json"));
  }
  // Every value replaced by a wrong type fails with a pointer diagnostic (or parses).
  json base = small_graph();
  json flat = base.flatten();
  for (auto it = flat.begin(); it != flat.end(); ++it) {
    for (const json& bad : {json("x"), json(-5), json(nullptr), json::object(), json(1e300)}) {
      json j = base;
      j[json::json_pointer(it.key())] = bad;
      auto g = parse_graph_json(j.dump(), "g.json");
      if (!g) {
        INFO(it.key() << " = " << bad.dump() << ": " << g.error().message);
        CHECK(is_pointer_diag(g.error().message, "g.json"));
      }
    }
  }
}

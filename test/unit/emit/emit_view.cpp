// emit_view.cpp — the view page and the Model Explorer graph on a hand-built IR: two nodes,
// an input, a kernel each, a RAW dependency between them, names that try to end the page's
// data script early.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kdflow/emit/emit_view.h"

using namespace kdflow;

namespace {

Dataflow two_nodes() {
  Dataflow df;
  auto buffer = [&](std::string name, BufferKind kind, int node) {
    Buffer b;
    b.id = static_cast<int>(df.buffers.size());
    b.name = std::move(name);
    b.kind = kind;
    b.dtype = "float32";
    b.shape = {4};
    b.bytes = 16;
    b.storage_id = b.id;
    b.node = node;
    df.buffers.push_back(b);
    return b.id;
  };
  Node in;
  in.id = 0;
  in.op = "null";
  in.name = "x";
  df.nodes.push_back(in);
  const int x = buffer("x", BufferKind::Input, 0);
  df.inputs = {x};
  for (int i = 1; i <= 2; ++i) {
    Node n;
    n.id = i;
    n.op = "tvm_op";
    n.name = i == 1 ? "a/</script><b>" : "b";
    n.function = "fused_" + n.name;
    n.inputs = {i == 1 ? x : 1};
    const int out = buffer(i == 1 ? "t</script>" : "y", i == 1 ? BufferKind::Intermediate : BufferKind::Output, i);
    n.outputs = {out};
    Kernel k;
    k.id = i - 1;
    k.name = "kernel" + std::to_string(i);
    k.node = i;
    k.function = n.function;
    k.grid = {2, 1, 1};
    k.block = {64, 1, 1};
    Arg r, w;
    r.kind = w.kind = Arg::Kind::Buffer;
    r.dtype = w.dtype = "handle";
    r.buffer = n.inputs[0];
    r.access = Access::Read;
    w.buffer = out;
    w.access = Access::Write;
    k.args = {w, r};
    n.kernels = {k.id};
    df.kernels.push_back(k);
    df.nodes.push_back(n);
  }
  df.outputs = {2};
  Dependency d;
  d.from = 0;
  d.to = 1;
  d.from_buffer = d.to_buffer = 1;
  df.dependencies.push_back(d);
  return df;
}

}  // namespace

TEST_CASE("emit_model_explorer: one node per launch, input and output, namespaces by graph node, RAW edges") {
  const Dataflow df = two_nodes();
  ViewFacts facts;
  facts.title = "two";
  const std::string text = emit_model_explorer(df, facts);
  CHECK(text == emit_model_explorer(df, facts));
  const nlohmann::json j = nlohmann::json::parse(text);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["label"] == "two");
  const auto& nodes = j[0]["subgraphs"][0]["nodes"];
  REQUIRE(nodes.size() == 4);  // input, k0, k1, output
  CHECK(nodes[0]["id"] == "input0");
  CHECK(nodes[1]["id"] == "k0");
  CHECK(nodes[1]["namespace"] == "a_<_script><b>");  // every '/' of the name: it would add a namespace level
  CHECK(nodes[1]["incomingEdges"][0]["sourceNodeId"] == "input0");
  CHECK(nodes[1]["incomingEdges"][0]["targetNodeInputId"] == "1");
  CHECK(nodes[2]["incomingEdges"][0]["sourceNodeId"] == "k0");
  CHECK(nodes[3]["id"] == "output2");
  CHECK(nodes[3]["incomingEdges"][0]["sourceNodeId"] == "k1");
  bool grid = false;
  for (const auto& a : nodes[1]["attrs"]) grid |= a["key"] == "grid" && a["value"] == "2x1x1";
  CHECK(grid);
}

TEST_CASE("emit_view_html: one self-contained page, deterministic, data that cannot end its script") {
  const Dataflow df = two_nodes();
  ViewFacts facts;
  facts.title = "two<three>";
  facts.summary = {{"launches", "2"}};
  Expected<std::string> page = emit_view_html(df, facts);
  if (!view_available()) {
    REQUIRE_FALSE(page);
    CHECK(page.error().code == ExitCode::Unavailable);
    return;
  }
  REQUIRE(page);
  CHECK(*page == *emit_view_html(df, facts));
  CHECK(page->find("<title>two&lt;three&gt; — kdflow view</title>") != std::string::npos);
  CHECK(page->find("default-src 'none'") != std::string::npos);
  const std::string open = "<script id=\"kdflow-data\" type=\"application/json\">";
  const size_t at = page->find(open);
  REQUIRE(at != std::string::npos);
  const size_t end = page->find("</script>", at);
  const nlohmann::json data = nlohmann::json::parse(page->substr(at + open.size(), end - at - open.size()));
  CHECK(data["schema"] == "kdflow-view/1");
  CHECK(data["kernels"].size() == 2);
  CHECK(data["buffers"][1]["name"] == "t</script>");
  CHECK(data["boxes"].size() == 4);  // input, two nodes, output
  CHECK(data["links"].size() == 3);
  for (const auto& l : data["links"]) CHECK(l["d"].get<std::string>().rfind("M", 0) == 0);
  CHECK(data["deps"] == nlohmann::json({0, 1, 0, 0, 0}));
}

TEST_CASE("emit_view_html and emit_model_explorer: an empty flow is a page, not a crash") {
  const Dataflow empty;
  const ViewFacts facts;
  CHECK(nlohmann::json::parse(emit_model_explorer(empty, facts))[0]["subgraphs"][0]["nodes"].empty());
  Expected<std::string> page = emit_view_html(empty, facts);
  CHECK(bool(page) == view_available());
  if (page) CHECK(page->find("\"kernels\":[]") != std::string::npos);
}

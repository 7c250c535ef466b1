// emit_dot_options.cpp — the DOT emitter's options on the samples' golden IR (read
// back from test/golden/*.json, so no clang is needed): the defaults reproduce the golden
// DOT byte for byte, each variant draws what it promises and renders with Graphviz.
#include <cstdlib>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "test_util.h"

using namespace kdflow;
using kdflow::test::slurp;
using kdflow::test::source_dir;
using kdflow::test::temp_dir;

namespace {

Dataflow golden(const std::string& model) {
  const std::string path = source_dir() + "/test/golden/" + model + ".json";
  auto df = parse_dataflow_json(slurp(path), path);
  REQUIRE(df);
  return *df;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Renders with `dot -Tsvg`; false when Graphviz complains. Skips (true) without dot.
bool renders(const std::string& text) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    WARN("Graphviz dot not installed: rendering skipped");
    return true;
  }
  const std::string dir = temp_dir();
  std::ofstream(dir + "/g.dot") << text;
  const std::string cmd = "dot -Tsvg '" + dir + "/g.dot' -o '" + dir + "/g.svg' 2>'" + dir + "/err'";
  const int rc = std::system(cmd.c_str());
  INFO(slurp(dir + "/err"));
  return rc == 0 && slurp(dir + "/err").empty() && contains(slurp(dir + "/g.svg"), "<svg");
}

}  // namespace

TEST_CASE("DOT: default options print the golden files byte for byte", "[dot]") {
  for (const char* m : {"mlp", "mlp_v08", "attention", "sort_scan", "resnet18"}) {
    INFO(m);
    const Dataflow df = golden(m);
    const std::string expected = slurp(source_dir() + "/test/golden/" + m + ".dot");
    CHECK(emit_dot(df) == expected);
    CHECK(emit_dot(df, DotOptions{}) == expected);
  }
}

TEST_CASE("DOT: operator families from Relay ops", "[dot]") {
  auto family = [](std::vector<std::string> ops) {
    Node n;
    for (auto& o : ops) n.relay_ops.push_back({o, ""});
    return std::string(relay_family(n));
  };
  CHECK(family({"nn.conv2d", "add", "nn.relu"}) == "conv");
  CHECK(family({"nn.dense", "add"}) == "dense");
  CHECK(family({"nn.batch_matmul"}) == "dense");
  CHECK(family({"nn.max_pool2d", "add", "nn.relu"}) == "pooling");
  CHECK(family({"nn.global_avg_pool2d"}) == "pooling");
  CHECK(family({"nn.log_softmax"}) == "reduction");
  CHECK(family({"mean", "subtract"}) == "reduction");
  CHECK(family({"topk"}) == "sort");
  CHECK(family({"cumsum"}) == "sort");
  CHECK(family({"reshape", "transpose"}) == "data movement");
  CHECK(family({"concatenate"}) == "data movement");
  CHECK(family({"cast", "add"}) == "elementwise");
  CHECK(family({"qnn.conv2d"}) == "conv");
  CHECK(family({"my.custom_op"}) == "other");
  CHECK(family({}) == "other");
}

TEST_CASE("DOT: --cluster none, --op-colors, --no-buffers, --collapse on mlp", "[dot]") {
  const Dataflow df = golden("mlp");

  DotOptions flat;
  flat.cluster = DotOptions::Cluster::None;
  const std::string f = emit_dot(df, flat);
  CHECK_FALSE(contains(f, "subgraph"));
  CHECK(contains(f, "\"k5\" [label=\"tvmgen_default_fused_nn_log_softmax_kernel_1\\n<<<(1,1,1), (32,1,1), 0>>>\\nnode 13\""));
  CHECK(contains(f, "\"buf14\""));  // the workspace is still drawn
  CHECK(renders(f));

  DotOptions colors;
  colors.op_colors = true;
  const std::string c = emit_dot(df, colors);
  CHECK(contains(c, "\"k0\" [label=\"tvmgen_default_fused_nn_dense_add_nn_relu_kernel\\n<<<(400,1,1), (64,1,1), 0>>>\", "
                    "shape=box, style=filled, fillcolor=\"#c9daf8\"];"));
  CHECK(contains(c, "fillcolor=\"#f9cb9c\""));  // log_softmax: reduction
  CHECK(contains(c, "subgraph \"cluster_legend\""));
  CHECK(contains(c, "\"family1\" [label=\"dense\""));
  CHECK(contains(c, "\"family3\" [label=\"reduction\""));
  CHECK_FALSE(contains(c, "label=\"conv\""));  // only the families drawn
  CHECK(renders(c));

  DotOptions raw;
  raw.buffers = false;
  const std::string r = emit_dot(df, raw);
  CHECK_FALSE(contains(r, "\"buf"));
  CHECK(contains(r, "\"k4\" -> \"k5\" [label=\"sid 11\"]") == false);  // k4 and k5 both read sid 11: no RAW
  CHECK(contains(r, "\"k4\" -> \"k5\" [label=\"ws0\"];"));
  CHECK(contains(r, "\"k3\" -> \"k5\" [label=\"sid 11\"];"));
  CHECK(contains(r, "\"k0\" -> \"k1\" [label=\"sid 3\"];"));
  CHECK(contains(r, "subgraph \"cluster_node13\""));
  CHECK(renders(r));

  DotOptions col;
  col.collapse = true;
  const std::string k = emit_dot(df, col);
  CHECK_FALSE(contains(k, "\"k0\""));
  CHECK_FALSE(contains(k, "\"buf14\""));  // workspaces are counted in the box, not drawn
  CHECK(contains(k, "\"node13\" [label=\"node 13\\ntvmgen_default_fused_nn_log_softmax\\nnn.log_softmax\\n2 kernels, "
                    "1 workspace (4 B)\", shape=box, style=\"filled,rounded\", fillcolor=\"#fce5cd\"];"));
  CHECK(contains(k, "\"buf12\" -> \"node13\";"));
  CHECK(contains(k, "\"node13\" -> \"buf13\";"));
  CHECK(renders(k));

  col.buffers = false;
  col.op_colors = true;
  const std::string kn = emit_dot(df, col);
  CHECK_FALSE(contains(kn, "\"buf"));
  CHECK(contains(kn, "\"node12\" -> \"node13\";"));
  CHECK(contains(kn, "\"node3\" -> \"node6\";"));
  CHECK(renders(kn));
}

TEST_CASE("DOT: every option combination renders on the bigger samples", "[dot]") {
  for (const char* m : {"resnet18", "sort_scan", "attention"}) {
    const Dataflow df = golden(m);
    for (int bits = 1; bits < 16; ++bits) {
      DotOptions o;
      o.cluster = bits & 1 ? DotOptions::Cluster::None : DotOptions::Cluster::Node;
      o.collapse = bits & 2;
      o.op_colors = bits & 4;
      o.buffers = !(bits & 8);
      INFO(m << " options " << bits);
      const std::string text = emit_dot(df, o);
      CHECK(text == emit_dot(df, o));  // deterministic
      if (bits == 2 || bits == 8 || bits == 14) CHECK(renders(text));  // dot is slow: a few of them
    }
  }
}

// Unit tests: Relay operators from fused function names and from relay.txt (the real
// samples and small inline cases), and the diagnostics for broken relay.txt.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kdflow/formats/relay.h"
#include "test_util.h"

using namespace kdflow;

namespace {

std::vector<std::string> names_of(const std::vector<RelayOp>& ops) {
  std::vector<std::string> out;
  for (const RelayOp& op : ops) out.push_back(op.name);
  return out;
}

std::vector<std::string> decoded(const std::string& function) {
  std::vector<RelayOp> ops = decode_fused_name(function);
  for (const RelayOp& op : ops) CHECK(op.type.empty());
  return names_of(ops);
}

using Sections = std::map<std::string, std::vector<RelayOp>>;

/// The (name, result type) of each op: what the tests below check (attributes and
/// argument types have tests of their own).
std::vector<std::pair<std::string, std::string>> name_types(const std::vector<RelayOp>& ops) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RelayOp& op : ops) out.emplace_back(op.name, op.type);
  return out;
}

Sections parse_ok(const std::string& text) {
  auto r = parse_relay_text(text, "relay.txt");
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  return r.take();
}

std::string error_of(const std::string& text) {
  auto r = parse_relay_text(text, "relay.txt");
  REQUIRE_FALSE(r);
  const std::string& m = r.error().message;
  CHECK(m.find('\n') == std::string::npos);
  CHECK(r.error().code == ExitCode::DataError);
  return m;
}

/// A section as TVM prints it, around `body` (the lines inside the braces).
std::string section(const std::string& name, const std::string& body) {
  return "// " + name + " (cuda -keys=cuda,gpu -arch=sm_90)\n"
         "fn (%p0: Tensor[(4), float32] /* ty=Tensor[(4), float32] */, Primitive=1, hash=\"1\") -> "
         "Tensor[(4), float32] {\n" +
         body + "\n} /* ty=fn (Tensor[(4), float32]) -> Tensor[(4), float32] */\n\n\n";
}

/// The distinct func_name of the sample's tvm_op nodes.
std::set<std::string> graph_functions(const std::string& sample) {
  auto g = nlohmann::json::parse(test::slurp(test::sample_dir(sample) + "/graph.json"));
  std::set<std::string> out;
  for (const auto& n : g.at("nodes"))
    if (n.at("op") == "tvm_op") out.insert(n.at("attrs").at("func_name").get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("decode_fused_name splits fused names into Relay operators", "[relay]") {
  using V = std::vector<std::string>;
  CHECK(decoded("fused_nn_conv2d_add_nn_relu_3") == V{"nn.conv2d", "add", "nn.relu"});
  CHECK(decoded("fused_nn_conv2d_add_nn_relu") == V{"nn.conv2d", "add", "nn.relu"});
  CHECK(decoded("tvmgen_default_fused_nn_conv2d_add_nn_relu_12") == V{"nn.conv2d", "add", "nn.relu"});
  CHECK(decoded("tvmgen_default_fused_nn_batch_matmul") == V{"nn.batch_matmul"});
  CHECK(decoded("tvmgen_default_fused_nn_batch_matmul_multiply") == V{"nn.batch_matmul", "multiply"});
  CHECK(decoded("tvmgen_default_fused_image_resize2d") == V{"image.resize2d"});
  CHECK(decoded("tvmgen_default_fused_nn_log_softmax") == V{"nn.log_softmax"});
  CHECK(decoded("tvmgen_default_fused_nn_softmax") == V{"nn.softmax"});
  CHECK(decoded("tvmgen_default_fused_mean") == V{"mean"});
  CHECK(decoded("tvmgen_default_fused_mean_1") == V{"mean"});
  CHECK(decoded("tvmgen_default_fused_variance") == V{"variance"});
  CHECK(decoded("tvmgen_default_fused_cast_add") == V{"cast", "add"});
  CHECK(decoded("tvmgen_default_fused_topk") == V{"topk"});
  CHECK(decoded("tvmgen_default_fused_argsort") == V{"argsort"});
  CHECK(decoded("tvmgen_default_fused_cumsum") == V{"cumsum"});
  CHECK(decoded("tvmgen_default_fused_nn_max_pool2d_add_nn_relu") == V{"nn.max_pool2d", "add", "nn.relu"});
  CHECK(decoded("tvmgen_default_fused_nn_global_avg_pool2d") == V{"nn.global_avg_pool2d"});
  CHECK(decoded("tvmgen_default_fused_reshape_transpose_split") == V{"reshape", "transpose", "split"});
  CHECK(decoded("tvmgen_default_fused_nn_dense_multiply_multiply_erf_add_multiply") ==
        V{"nn.dense", "multiply", "multiply", "erf", "add", "multiply"});
  CHECK(decoded("tvmgen_default_fused_nn_contrib_conv2d_winograd_without_weight_transform_add_nn_relu_2") ==
        V{"nn.contrib_conv2d_winograd_without_weight_transform", "add", "nn.relu"});
  CHECK(decoded("tvmgen_default_fused_nn_contrib_conv2d_NCHWc_add") == V{"nn.contrib_conv2d_NCHWc", "add"});
  CHECK(decoded("tvmgen_default_fused_dyn_strided_slice") == V{"dyn.strided_slice"});
  CHECK(decoded("tvmgen_default_fused_strided_slice") == V{"strided_slice"});
  CHECK(decoded("tvmgen_default_fused_layout_transform_reshape") == V{"layout_transform", "reshape"});
  CHECK(decoded("tvmgen_default_fused_zeros_like_full_like") == V{"zeros_like", "full_like"});
  CHECK(decoded("tvmgen_default_fused_vision_non_max_suppression") == V{"vision.non_max_suppression"});
  CHECK(decoded("tvmgen_default_fused_qnn_requantize_clip_cast") == V{"qnn.requantize", "clip", "cast"});
  // Longest match wins where a name is also two names.
  CHECK(decoded("tvmgen_default_fused_less_equal") == V{"less_equal"});
  CHECK(decoded("tvmgen_default_fused_floor_divide_floor") == V{"floor_divide", "floor"});
  // Another module name, with and without '_' in it.
  CHECK(decoded("tvmgen_mymod_fused_nn_relu_7") == V{"nn.relu"});
  CHECK(decoded("tvmgen_my_mod_fused_sigmoid_multiply") == V{"sigmoid", "multiply"});
  // No "fused": a lone operator.
  CHECK(decoded("tvmgen_default_reshape") == V{"reshape"});
}

TEST_CASE("decode_fused_name keeps pieces it does not know", "[relay]") {
  using V = std::vector<std::string>;
  CHECK(decoded("tvmgen_default_fused_frobnicate") == V{"frobnicate"});
  CHECK(decoded("tvmgen_default_fused_my_custom_op_add_2") == V{"my_custom_op", "add"});
  CHECK(decoded("tvmgen_default_fused_nn_relu_mystery_nn_relu") == V{"nn.relu", "mystery", "nn.relu"});
  // The graph executor's built-ins are no Relay function.
  CHECK(decoded("__nop").empty());
  CHECK(decoded("__copy").empty());
  CHECK(decoded("tvmgen_default_fused_").empty());
}

TEST_CASE("decode_fused_name drops the hash of a truncated name", "[relay]") {
  // TVM cuts "fused_..." at 80 characters and appends "_<hex hash>_".
  std::string readable = "fused_nn_conv2d_add_nn_relu_nn_max_pool2d_add_multiply_subtract_divide_add_nn_relu_add";
  REQUIRE(readable.size() > 80);
  std::string truncated = readable.substr(0, 80);  // ends in "..._divide_add_nn_re"
  REQUIRE(truncated.substr(truncated.size() - 5) == "nn_re");
  std::string name = "tvmgen_default_" + truncated + "_3fa9c1d2e4b5a6c7_";
  std::vector<std::string> want{"nn.conv2d", "add",      "nn.relu", "nn.max_pool2d", "add",
                                "multiply",  "subtract", "divide",  "add",           "nn_re"};
  CHECK(decoded(name) == want);
  CHECK(decoded(name + "1") == want);
}

TEST_CASE("relay.txt of the mlp: operators with their types", "[relay]") {
  for (const char* sample : {"mlp", "mlp_v08"}) {
    INFO(sample);
    Sections s = parse_ok(test::slurp(test::sample_dir(sample) + "/relay.txt"));
    CHECK(s.size() == 5);
    CHECK(s.count("__tvm_main__") == 0);
    const std::string t400 = "Tensor[(1, 400), float32]";
    CHECK(name_types(s.at("tvmgen_default_fused_nn_dense_add_nn_relu")) ==
          name_types(std::vector<RelayOp>{{"nn.dense", t400}, {"add", t400}, {"nn.relu", t400}}));
    CHECK(name_types(s.at("tvmgen_default_fused_nn_dense_add")) ==
          name_types(std::vector<RelayOp>{{"nn.dense", "Tensor[(1, 10), float32]"}, {"add", "Tensor[(1, 10), float32]"}}));
    CHECK(name_types(s.at("tvmgen_default_fused_nn_log_softmax")) ==
          name_types(std::vector<RelayOp>{{"nn.log_softmax", "Tensor[(1, 10), float32]"}}));
  }
}

TEST_CASE("relay.txt: tuples, projections and tuple types", "[relay]") {
  Sections att = parse_ok(test::slurp(test::sample_dir("attention") + "/relay.txt"));
  // `%0 = %p0.2` (TupleGetItem) is no operator.
  CHECK(name_types(att.at("tvmgen_default_fused_squeeze_transpose")) ==
        name_types(std::vector<RelayOp>{{"squeeze", "Tensor[(4, 64, 32), float32]"}, {"transpose", "Tensor[(4, 32, 64), float32]"}}));
  const std::string part = "Tensor[(1, 4, 64, 32), float32]";
  CHECK(name_types(att.at("tvmgen_default_fused_reshape_transpose_split")) ==
        name_types(std::vector<RelayOp>{{"reshape", "Tensor[(64, 3, 4, 32), float32]"},
                             {"transpose", "Tensor[(3, 4, 64, 32), float32]"},
                             {"split", "(" + part + ", " + part + ", " + part + ")"}}));
  // `%0 = (%p0, %p1)` (Tuple) is no operator.
  Sections sq = parse_ok(test::slurp(test::sample_dir("squeezenet") + "/relay.txt"));
  CHECK(name_types(sq.at("tvmgen_default_fused_concatenate")) ==
        name_types(std::vector<RelayOp>{{"concatenate", "Tensor[(1, 128, 55, 55), float32]"}}));
  Sections ss = parse_ok(test::slurp(test::sample_dir("sort_scan") + "/relay.txt"));
  CHECK(name_types(ss.at("tvmgen_default_fused_topk")) ==
        name_types(std::vector<RelayOp>{{"topk", "(Tensor[(4, 5), float32], Tensor[(4, 5), int32])"}}));
}

TEST_CASE("relay.txt of every sample covers its graph's functions", "[relay]") {
  // Where the name and relay.txt disagree on real samples: the name lists operators in
  // TVM's visiting order, relay.txt in evaluation order (the same operators).
  const std::set<std::string> order_differs = {
      "attention/tvmgen_default_fused_nn_dense_multiply_multiply_erf_add_multiply",
      "attention/tvmgen_default_fused_subtract_add_rsqrt_multiply_add",
      "attention/tvmgen_default_fused_subtract_add_rsqrt_multiply_add_1",
  };
  const std::vector<std::string> samples = test::sample_names();
  REQUIRE(samples.size() >= 8);
  std::set<std::string> seen_differs;
  for (const std::string& sample : samples) {
    INFO(sample);
    Sections s = parse_ok(test::slurp(test::sample_dir(sample) + "/relay.txt"));
    std::set<std::string> functions = graph_functions(sample);
    CHECK(s.size() == functions.size());
    for (const std::string& f : functions) {
      if (f == "__nop" || f == "__copy") continue;
      INFO(f);
      REQUIRE(s.count(f) == 1);
    }
    for (const auto& [f, ops] : s) {
      INFO(f);
      REQUIRE_FALSE(ops.empty());
      for (const RelayOp& op : ops) {
        INFO(op.name << ": " << op.type);
        CHECK((op.type.rfind("Tensor[", 0) == 0 || op.type.rfind("(Tensor[", 0) == 0));
      }
      // Functions that became __nop in graph.json (reshape only) have a section all the same.
      if (!functions.count(f)) {
        CHECK(functions.count("__nop") == 1);
        CHECK(names_of(ops) == std::vector<std::string>{"nn.batch_flatten"});
      }
      std::vector<std::string> from_name = decoded(f), from_text = names_of(ops);
      if (order_differs.count(sample + "/" + f)) {
        seen_differs.insert(sample + "/" + f);
        CHECK(from_name != from_text);
        std::sort(from_name.begin(), from_name.end());
        std::sort(from_text.begin(), from_text.end());
      }
      // TVM truncates long names ("fused_" + 74 characters, then "_<hash>_"; resnet18_tuned's
      // winograd functions): the name then ends inside an operator, which decoding keeps as the
      // unknown piece it reads ("nn_re"), never completed by a guess. The rest must agree.
      if (f.size() > 80 && from_name.size() <= from_text.size() && !from_name.empty() &&
          from_name.back() != from_text[from_name.size() - 1]) {
        std::string cut = from_name.back(), whole = from_text[from_name.size() - 1];
        std::replace(whole.begin(), whole.end(), '.', '_');
        CHECK(whole.rfind(cut, 0) == 0);
        from_name.pop_back();
        from_text.resize(from_name.size());
      }
      CHECK(from_name == from_text);
    }
  }
  CHECK(seen_differs == order_differs);
}

TEST_CASE("relay.txt: calls in evaluation order, attributes and strings are no calls", "[relay]") {
  std::string text = "// __tvm_main__ (cuda)\nfn (%x) { %0 = tvmgen_default_fused_f(%x); %0 }\n\n" +
                     section("f", "  %0 = nn.conv2d(%p0, meta[relay.Constant][0] /* ty=Tensor[(8), float32] */, "
                                  "padding=[1, 1], data_layout=\"NCHW(\") /* ty=Tensor[(1), float32] */;\n"
                                  "  %1 = on_device(%0, virtual_device=VirtualDevice(device_type=2, "
                                  "target=Target(kind='cuda'))) /* ty=Tensor[(1), float32] */;\n"
                                  "  %2 = %p0.1;\n"
                                  "  %3 = fn (%q: Tensor[(1), float32], Primitive=1) { %q };\n"
                                  "  %4 = %3(%2);\n"
                                  "  add(nn.relu(%1) /* ty=Tensor[(2), float32] */, -1.5e-05f /* ty=float32 */)") +
                     section("g", "  sum(%p0, axis=[-1])");
  Sections s = parse_ok(text);
  REQUIRE(s.size() == 2);
  CHECK(name_types(s.at("f")) == name_types(std::vector<RelayOp>{{"nn.conv2d", "Tensor[(1), float32]"},
                                          {"on_device", "Tensor[(1), float32]"},
                                          {"nn.relu", "Tensor[(2), float32]"},
                                          {"add", ""}}));
  CHECK(name_types(s.at("g")) == name_types(std::vector<RelayOp>{{"sum", ""}}));
}

TEST_CASE("relay.txt: CRLF line ends and a file without __tvm_main__", "[relay]") {
  std::string text = "// f (cuda)\r\nfn (%p0) -> Tensor[(4), float32] {\r\n  exp(%p0) /* ty=Tensor[(4), float32] */\r\n}\r\n";
  Sections s = parse_ok(text);
  CHECK(name_types(s.at("f")) == name_types(std::vector<RelayOp>{{"exp", "Tensor[(4), float32]"}}));
}

TEST_CASE("relay.txt: errors name the file, line and column", "[relay]") {
  // Positions are 1-based: line of the file, column in bytes.
  CHECK(error_of("// f (cuda)\nfn (%p0) {\n  exp(%p0 /* ty=Tensor[(4), float32]\n}\n") ==
        "relay.txt:3:11: error: unterminated comment: no closing '*/'");
  CHECK(error_of(section("f", "  foo(%p0, name=\"abc)")) == "relay.txt:3:17: error: unterminated string: no closing \"");
  CHECK(error_of("// f (cuda)\nfn (%p0) {\n  exp(%p0\n}\n") ==
        "relay.txt:4:1: error: '}' does not close the '(' at 3:6");
  CHECK(error_of("// f (cuda)\nfn (%p0) {\n  exp(%p0)\n") ==
        "relay.txt:2:10: error: unterminated '{': no matching '}'");
  CHECK(error_of("// f (cuda)\nfn (%p0) { exp(%p0) } )\n") == "relay.txt:2:23: error: unmatched ')'");
  CHECK(error_of("// f (cuda)\nfn (%p0) {\n  exp(%p0, axis=[1)\n}\n") ==
        "relay.txt:3:19: error: ')' does not close the '[' at 3:17");
  CHECK(error_of("// f (cuda)\n  exp(%p0)\n") ==
        "relay.txt:2:3: error: expected 'fn (' to begin the function of 'f', got 'exp'");
  CHECK(error_of("// f (cuda)\nfn (%p0) -> Tensor[(4), float32]\n") ==
        "relay.txt:2:32: error: expected '{' to begin the body of 'f'");
  CHECK(error_of("// f (cuda)\nfn (%p0) { exp(%p0) } junk\n") ==
        "relay.txt:2:23: error: unexpected 'junk' after the function of 'f'");
  CHECK(error_of("// f (cuda)\n\n// g (cuda)\n") == "relay.txt:1:1: error: section 'f' holds no function");
  CHECK(error_of(section("f", "  exp(%p0)") + section("f", "  exp(%p0)")) ==
        "relay.txt:7:4: error: duplicate section 'f' (first at line 1)");
  CHECK(error_of("fn (%p0) { exp(%p0) }\n") ==
        "relay.txt:1:1: error: expected a section header '// <function> (<target>)'");
  CHECK(error_of("// \nfn (%p0) { exp(%p0) }\n") ==
        "relay.txt:1:4: error: expected a function name in the section header '// <function> (<target>)'");
  CHECK(error_of("") == "relay.txt:1:1: error: no section '// <function> (<target>)' found");
  CHECK(error_of("\n\n  \n") == "relay.txt:1:1: error: no section '// <function> (<target>)' found");
}

TEST_CASE("parse_relay_tensor_type reads relay.txt's tensor types, nothing else", "[relay]") {
  auto t = parse_relay_tensor_type("Tensor[(1, 400), float32]");
  REQUIRE(t);
  CHECK(t->shape == std::vector<int64_t>{1, 400});
  CHECK(t->dtype == "float32");
  t = parse_relay_tensor_type("Tensor[(4), int64]");
  REQUIRE(t);
  CHECK(t->shape == std::vector<int64_t>{4});
  t = parse_relay_tensor_type("Tensor[(), float16]");
  REQUIRE(t);
  CHECK(t->shape.empty());
  CHECK(t->dtype == "float16");
  t = parse_relay_tensor_type("Tensor[(1i64, 3i64), float32]");
  REQUIRE(t);
  CHECK(t->shape == std::vector<int64_t>{1, 3});
  for (const char* bad : {"", "(Tensor[(1), float32], Tensor[(2), float32])", "Tensor[(?, 4), float32]",
                          "Tensor[(1, 4), float32", "Tensor[(1 4), float32]", "Tensor[(1, 4)]", "Tensor[(1, 4), ]",
                          "Tensor[(99999999999999999999), float32]", "Tensor[(1, 4), float32] x"})
    CHECK_FALSE(parse_relay_tensor_type(bad));
}

TEST_CASE("every sample's relay.txt result types agree with its graph.json", "[relay][samples]") {
  for (const std::string& m : test::sample_names()) {
    const std::string path = test::sample_dir(m) + "/relay.txt";
    std::ifstream probe(path);
    if (!probe) continue;
    auto sections = parse_ok(test::slurp(path));
    auto g = nlohmann::json::parse(test::slurp(test::sample_dir(m) + "/graph.json"));
    const auto& nodes = g.at("nodes");
    const auto& row = g.at("node_row_ptr");
    const auto& shapes = g.at("attrs").at("shape").at(1);
    const auto& dtypes = g.at("attrs").at("dltype").at(1);
    int compared = 0;
    for (size_t nid = 0; nid < nodes.size(); ++nid) {
      const auto& n = nodes[nid];
      if (n.at("op") != "tvm_op") continue;
      auto it = sections.find(n.at("attrs").at("func_name").get<std::string>());
      if (it == sections.end() || it->second.empty()) continue;
      const int first = row[nid].get<int>(), count = row[nid + 1].get<int>() - first;
      if (count != 1) continue;
      auto t = parse_relay_tensor_type(it->second.back().type);
      if (!t) continue;
      INFO(m << " node " << nid);
      CHECK(t->shape == shapes[first].get<std::vector<int64_t>>());
      CHECK(t->dtype == dtypes[first].get<std::string>());
      ++compared;
    }
    INFO(m);
    CHECK(compared > 0);
  }
}

// Hand-written relay.txt in TVM's printing style, one construct per attribute kind.
TEST_CASE("relay.txt: every attribute typed, kept as text when not a plain value", "[relay][attrs]") {
  Sections s = parse_ok(
      "// f (cuda)\n"
      "fn (%p0: Tensor[(1, 8, 4, 4), float16] /* ty=Tensor[(1, 8, 4, 4), float16] */, "
      "%p1: Tensor[(8, 1, 3, 3), float16] /* ty=Tensor[(8, 1, 3, 3), float16] */) -> Tensor[(1, 8, 4, 4), float16] {\n"
      "  %0 = nn.conv2d(%p0, %p1, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1i64, 1i64], groups=8, "
      "channels=8, kernel_size=[3, 3], data_layout=\"NCHW\", out_dtype=\"float16\", scale=0.5f, "
      "alphas=[0.5f, -2f], flag=True, none=None, neg=-3, "
      "target=VirtualDevice(device_type=2, virtual_device_id=0)) /* ty=Tensor[(1, 8, 4, 4), float16] */;\n"
      "  add(%0, 1f16 /* ty=float16 */) /* ty=Tensor[(1, 8, 4, 4), float16] */\n"
      "}\n");
  const std::vector<RelayOp>& ops = s.at("f");
  REQUIRE(ops.size() == 2);
  const RelayOp& conv = ops[0];
  CHECK(conv.input_types == std::vector<std::string>{"Tensor[(1, 8, 4, 4), float16]", "Tensor[(8, 1, 3, 3), float16]"});
  std::map<std::string, RelayAttr> by_key;
  std::vector<std::string> keys;
  for (const RelayAttr& a : conv.attrs) {
    by_key[a.key] = a;
    keys.push_back(a.key);
  }
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  REQUIRE(by_key.size() == 14);
  CHECK(by_key["strides"].kind == RelayAttr::Kind::Ints);
  CHECK(by_key["strides"].ints == std::vector<int64_t>{1, 1});
  CHECK(by_key["dilation"].ints == std::vector<int64_t>{1, 1});
  CHECK(by_key["groups"].kind == RelayAttr::Kind::Int);
  CHECK(by_key["groups"].ints == std::vector<int64_t>{8});
  CHECK(by_key["data_layout"].kind == RelayAttr::Kind::String);
  CHECK(by_key["data_layout"].text == "NCHW");
  CHECK(by_key["scale"].kind == RelayAttr::Kind::Float);
  CHECK(by_key["scale"].floats == std::vector<double>{0.5});
  CHECK(by_key["alphas"].kind == RelayAttr::Kind::Floats);
  CHECK(by_key["alphas"].floats == std::vector<double>{0.5, -2.0});
  CHECK(by_key["flag"].kind == RelayAttr::Kind::Bool);
  CHECK(by_key["flag"].ints == std::vector<int64_t>{1});
  CHECK(by_key["none"].kind == RelayAttr::Kind::None);
  CHECK(by_key["neg"].ints == std::vector<int64_t>{-3});
  CHECK(by_key["target"].kind == RelayAttr::Kind::Text);
  CHECK(by_key["target"].text == "VirtualDevice(device_type=2, virtual_device_id=0)");
  // The second call reads the binding %0 and a constant with its own annotation.
  CHECK(ops[1].input_types == std::vector<std::string>{"Tensor[(1, 8, 4, 4), float16]", "float16"});
  CHECK(ops[1].attrs.empty());

  std::string dup = error_of("// f (cuda)\nfn (%p0: Tensor[(1), float32]) {\n  nn.relu(%p0, a=1, a=2)\n}\n");
  CHECK(dup == "relay.txt:3:21: error: duplicate attribute 'a' of nn.relu");
}

TEST_CASE("relay.txt of squeezenet: a conv2d's attributes and input types", "[relay][attrs][samples]") {
  Sections s = parse_ok(test::slurp(test::sample_dir("squeezenet") + "/relay.txt"));
  const std::vector<RelayOp>& ops = s.at("tvmgen_default_fused_nn_conv2d_add_nn_relu");
  REQUIRE(ops.size() == 3);
  CHECK(ops[0].name == "nn.conv2d");
  CHECK(ops[0].input_types ==
        std::vector<std::string>{"Tensor[(1, 3, 224, 224), float32]", "Tensor[(96, 3, 7, 7), float32]"});
  std::map<std::string, std::vector<int64_t>> ints;
  for (const RelayAttr& a : ops[0].attrs) ints[a.key] = a.ints;
  CHECK(ints["strides"] == std::vector<int64_t>{2, 2});
  CHECK(ints["padding"] == std::vector<int64_t>{3, 3, 3, 3});
  CHECK(ints["channels"] == std::vector<int64_t>{96});
  CHECK(ints["kernel_size"] == std::vector<int64_t>{7, 7});
  CHECK(ops[1].input_types ==
        std::vector<std::string>{"Tensor[(1, 96, 112, 112), float32]", "Tensor[(1, 96, 1, 1), float32]"});
}

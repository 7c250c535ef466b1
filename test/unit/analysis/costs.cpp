// Unit tests: the cost model (costs.h) on the real samples' flows (the golden JSON of each,
// so these run without clang), with FLOP counts checked by hand, the roofline arithmetic,
// the timing-file reader, and the dataset emitters (emit_costs.h).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "kdflow/analysis/costs.h"
#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/emit/emit_costs.h"
#include "kdflow/formats/profile_csv.h"
#include "test_util.h"

using namespace kdflow;

namespace {

Dataflow golden(const std::string& model) {
  std::string path = test::source_dir() + "/test/golden/" + model + ".json";
  auto df = parse_dataflow_json(test::slurp(path), path);
  REQUIRE(df);
  return df.take();
}

const Node& node_of(const Dataflow& df, const std::string& function) {
  for (const Node& n : df.nodes)
    if (n.function == function) return n;
  FAIL("no node runs " << function);
  return df.nodes[0];
}

}  // namespace

TEST_CASE("FLOPs of a conv2d, a dense and a batch_matmul of the samples, by hand", "[costs]") {
  // squeezenet's first conv2d: data (1, 3, 224, 224), weight (96, 3, 7, 7), strides 2,
  // padding 3 → output (1, 96, 112, 112). Each output element is a dot product of
  // 3 · 7 · 7 = 147 multiply-adds, 2 FLOPs each.
  {
    Dataflow df = golden("squeezenet");
    const Node& n = node_of(df, "tvmgen_default_fused_nn_conv2d_add_nn_relu");
    REQUIRE(n.relay_ops.size() == 3);
    OpWork conv = op_work(n.relay_ops[0]);
    CHECK(conv.formula == "convolution");
    CHECK(conv.flops == uint64_t{2} * (1 * 96 * 112 * 112) * (3 * 7 * 7));
    CHECK(*conv.flops == 354041856u);
    CHECK_FALSE(conv.tensor_core);
    // add: one FLOP per output element; relu: none (a max, which Nsight does not count).
    CHECK(op_work(n.relay_ops[1]).flops == uint64_t{96 * 112 * 112});
    CHECK(op_work(n.relay_ops[2]).flops == uint64_t{0});
    CostReport r = compute_costs(df, nullptr, nullptr);
    const FunctionCost* f = nullptr;
    for (const FunctionCost& c : r.functions)
      if (c.node == n.id) f = &c;
    REQUIRE(f);
    CHECK(f->flops == uint64_t{354041856} + 1204224);
  }
  // mlp's first dense: data (1, 100), weight (400, 100) → (1, 400): 400 dot products of 100.
  {
    Dataflow df = golden("mlp");
    const Node& n = node_of(df, "tvmgen_default_fused_nn_dense_add_nn_relu");
    OpWork dense = op_work(n.relay_ops[0]);
    CHECK(dense.formula == "matrix product");
    CHECK(dense.flops == uint64_t{2 * 400 * 100});
  }
  // attention's scores: batch_matmul(q (4, 64, 32), k (4, 64, 32), transpose_b) → (4, 64, 64):
  // 4 · 64 · 64 dot products of 32; then the second one (4, 64, 64) x (4, 32, 64)^T → (4, 64, 32)
  // reduces over 64.
  {
    Dataflow df = golden("attention");
    const Node& scores = node_of(df, "tvmgen_default_fused_nn_batch_matmul_multiply");
    CHECK(op_work(scores.relay_ops[0]).flops == uint64_t{2} * (4 * 64 * 64) * 32);
    const Node& ctx = node_of(df, "tvmgen_default_fused_nn_batch_matmul");
    CHECK(op_work(ctx.relay_ops[0]).flops == uint64_t{2} * (4 * 64 * 32) * 64);
    CHECK(*op_work(ctx.relay_ops[0]).flops == 1048576u);
  }
}

TEST_CASE("the roofline bound of mlp's first function on an H100, by hand", "[costs]") {
  Dataflow df = golden("mlp");
  const DeviceSpec* h100 = find_device_spec("H100");
  REQUIRE(h100);
  CostReport r = compute_costs(df, h100, nullptr);
  const FunctionCost& f = r.functions.at(0);
  // Bytes: input0 (1·100) + p0 (400·100) + p1 (1·400) read, (1·400) written, float32.
  CHECK(f.bytes == (100 + 40000 + 400 + 400) * 4u);
  REQUIRE(f.bound);
  CHECK(f.bound->memory_us == Approx(163600 / 3350e9 * 1e6));
  CHECK(f.bound->compute_us == Approx(80400 / 67e12 * 1e6));
  CHECK(std::string(f.bound->limiter()) == "memory");
  // One kernel: the kernel carries the function's FLOPs and its arguments' buffers.
  const KernelCost& k = r.kernels.at(0);
  CHECK(k.flops == uint64_t{80400});
  CHECK(k.bytes == f.bytes);
  // log_softmax launches two kernels: FLOPs per function only, said so.
  const KernelCost& k4 = r.kernels.at(4);
  CHECK_FALSE(k4.flops);
  CHECK(k4.flops_note == "the function launches 2 kernels; FLOPs are known per function only");
}

TEST_CASE("ops without a formula are listed, never given a number", "[costs]") {
  Dataflow df = golden("sort_scan");
  CostReport r = compute_costs(df, find_device_spec("a100"), nullptr);
  std::set<std::string> missing;
  for (const FunctionCost& f : r.functions) {
    if (!f.no_formula.empty()) {
      CHECK_FALSE(f.flops);
      CHECK_FALSE(f.bound);
    }
    for (const std::string& m : f.no_formula) missing.insert(m.substr(0, m.find(' ')));
  }
  CHECK(missing.count("topk"));
  CHECK(missing.count("argsort"));
  CHECK_FALSE(missing.count("cumsum"));  // cumsum has one: an add per element
}

TEST_CASE("every sample: every function's ops have types, FLOPs only from formulas", "[costs][samples]") {
  for (const std::string& m : test::sample_names()) {
    INFO(m);
    Dataflow df = golden(m);
    CostReport r = compute_costs(df, find_device_spec("h100"), nullptr);
    for (const FunctionCost& f : r.functions) {
      uint64_t sum = 0;
      bool all = true;
      for (const OpWork& w : f.ops) {
        if (w.flops) sum += *w.flops;
        else all = false;
        CHECK((w.flops.has_value() != !w.reason.empty()));
      }
      CHECK(f.flops_known == sum);
      CHECK(f.flops.has_value() == (all && !f.ops.empty()));
      CHECK(f.bytes > 0);
    }
  }
}

TEST_CASE("replay timing files: read, and refused when from another model", "[costs][timing]") {
  Dataflow df = golden("mlp");
  // Hand-written in the shape `kdflow replay --timing-json` writes (schema kdflow-replay-timing/1).
  nlohmann::json t = {{"schema", "kdflow-replay-timing/1"}, {"kernels", nlohmann::json::array()}};
  for (const Kernel& k : df.kernels)
    t["kernels"].push_back({{"kernel", k.id}, {"name", k.name}, {"median_us", 2.0 + k.id}, {"min_us", 1.0}});
  auto times = read_replay_timing(t.dump(), "timing.json", df);
  REQUIRE(times);
  CostReport r = compute_costs(df, find_device_spec("h100"), &*times);
  REQUIRE(r.functions.back().measured);  // log_softmax: kernels 4 and 5
  CHECK(r.functions.back().measured->us == Approx(6.0 + 7.0));
  CHECK(r.kernels.at(0).measured->us == Approx(2.0));

  nlohmann::json bad = t;
  bad["kernels"][1]["name"] = "other_kernel";
  auto e = read_replay_timing(bad.dump(), "timing.json", df);
  REQUIRE_FALSE(e);
  CHECK(e.error().message ==
        "timing.json:/kernels/1/name: error: kernel 1 is tvmgen_default_fused_nn_dense_add_nn_relu_1_kernel in the "
        "flow, not other_kernel: a timing file of another model?");
  bad = t;
  bad["kernels"][0]["kernel"] = 6;
  CHECK_FALSE(read_replay_timing(bad.dump(), "timing.json", df));
  bad = t;
  bad["schema"] = "kdflow/1";
  CHECK_FALSE(read_replay_timing(bad.dump(), "timing.json", df));
  CHECK_FALSE(read_replay_timing("{", "timing.json", df));
}

TEST_CASE("the dataset: RFC 4180 CSV and JSON Lines with the documented columns", "[costs][dataset]") {
  Dataflow mlp = golden("mlp"), sq = golden("squeezenet");
  std::vector<ModelCosts> models = {{"mlp", &mlp, compute_costs(mlp, find_device_spec("l4"), nullptr)},
                                    {"squeezenet", &sq, compute_costs(sq, find_device_spec("l4"), nullptr)}};
  for (bool per_kernel : {false, true}) {
    std::string csv = costs_csv(models, per_kernel);
    auto table = parse_csv(csv, "rows.csv");
    REQUIRE(table);
    const std::vector<std::string>& cols = cost_columns(per_kernel);
    REQUIRE(table->header.size() == cols.size());
    for (size_t i = 0; i < cols.size(); ++i) CHECK(table->header[i].text == cols[i]);
    size_t expect = per_kernel ? mlp.kernels.size() + sq.kernels.size()
                               : models[0].report.functions.size() + models[1].report.functions.size();
    CHECK(table->rows.size() == expect);
    std::string jsonl = costs_jsonl(models, per_kernel);
    std::istringstream lines(jsonl);
    size_t n = 0;
    for (std::string line; std::getline(lines, line); ++n) {
      auto j = nlohmann::json::parse(line);
      CHECK(j.size() == cols.size());
      if (!per_kernel && n == 0) {
        CHECK(j["model"] == "mlp");
        CHECK(j["function"] == "tvmgen_default_fused_nn_dense_add_nn_relu");
        CHECK(j["flops"] == 80400);
        CHECK(j["ops"][0]["attrs"].contains("units"));
        CHECK(j["input_shapes"] == nlohmann::json::parse("[[1,100],[400,100],[1,400]]"));
        CHECK(j["device"] == "l4");
        CHECK(j["measured_us"].is_null());
      }
    }
    CHECK(n == expect);
  }
}

TEST_CASE("a winograd convolution is counted as the direct one, its kernels show what the transform saves", "[costs]") {
  // resnet18_tuned's first winograd conv: data (1, 64, 56, 56), kernel_size [3, 3], channels
  // 64 → (1, 64, 56, 56): as a direct convolution 2 · (64 · 56 · 56) · (64 · 3 · 3) FLOPs.
  Dataflow df = golden("resnet18_tuned");
  const Node& n = node_of(df, "tvmgen_default_fused_nn_contrib_conv2d_winograd_without_weight_transform_add_nn_relu");
  REQUIRE_FALSE(n.relay_ops.empty());
  OpWork w = op_work(n.relay_ops[0]);
  CHECK(w.formula == "convolution (winograd counted as direct)");
  CHECK(w.flops == uint64_t{2} * (64 * 56 * 56) * (64 * 3 * 3));
  // The kernels (input transform, batched product, output transform) compute far less.
  CostReport r = compute_costs(df, nullptr, nullptr);
  const FunctionCost* f = nullptr;
  for (const FunctionCost& c : r.functions)
    if (c.node == n.id) f = &c;
  REQUIRE(f);
  REQUIRE(f->counted);
  REQUIRE(f->counted->flops);
  REQUIRE(f->flops);
  const double ratio = static_cast<double>(*f->counted->flops) / static_cast<double>(*f->flops);
  CHECK(ratio > 0.3);
  CHECK(ratio < 0.45);  // 85.2 of 231.2 MFLOP (0.368 in `kdflow costs`)
}

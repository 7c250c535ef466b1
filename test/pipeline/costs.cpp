// costs.cpp — `kdflow costs` and `kdflow extract --format chakra` end to end on every
// sample: the table, the dataset for all samples in one call, every Chakra trace decoded with
// protoc against lib/emit/chakra/et_def.proto (Chakra's field numbers), and the usage errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

using kdflow::test::run_kdflow;
using kdflow::test::slurp;

namespace {

std::vector<std::string> all_samples() {
  std::vector<std::string> out;
  for (const std::string& m : kdflow::test::sample_names()) out.push_back(kdflow::test::sample_dir(m));
  return out;
}

/// Splits a length-delimited protobuf stream into messages; fails on a truncated one.
std::vector<std::string> split_delimited(const std::string& data) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    uint64_t n = 0;
    int shift = 0;
    while (true) {
      REQUIRE(pos < data.size());
      unsigned char b = static_cast<unsigned char>(data[pos++]);
      n |= uint64_t(b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) break;
      REQUIRE(shift < 64);
    }
    REQUIRE(pos + n <= data.size());
    out.push_back(data.substr(pos, n));
    pos += n;
  }
  return out;
}

/// `protoc --decode TYPE` of one message; "" when protoc is not installed.
std::string protoc_decode(const std::string& type, const std::string& message, const std::string& dir) {
  std::string in = dir + "/msg.bin", out = dir + "/msg.txt";
  {
    FILE* f = std::fopen(in.c_str(), "wb");
    REQUIRE(f);
    std::fwrite(message.data(), 1, message.size(), f);
    std::fclose(f);
  }
  std::string proto_dir = kdflow::test::source_dir() + "/lib/emit/chakra";
  std::string cmd = "protoc --decode " + type + " -I '" + proto_dir + "' '" + proto_dir + "/et_def.proto' <'" + in +
                    "' >'" + out + "' 2>&1";
  int rc = std::system(cmd.c_str());
  REQUIRE(rc == 0);
  return slurp(out);
}

bool have_protoc() { return std::system("command -v protoc >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("kdflow costs prints a table per model", "[costs]") {
  auto r = run_kdflow({"costs", kdflow::test::sample_dir("mlp"), kdflow::test::sample_dir("squeezenet"), "-q"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("mlp: 5 function nodes, 6 kernels on NVIDIA H100 SXM5 80GB") != std::string::npos);
  CHECK(r.out.find("squeezenet: ") != std::string::npos);
  CHECK(r.out.find("conv2d(k7 s2 p3 c96) + add + relu") != std::string::npos);
  CHECK(r.err.empty());
}

TEST_CASE("the dataset of every sample in one call: CSV and JSON Lines, deterministic", "[costs][dataset]") {
  std::string dir = kdflow::test::temp_dir();
  std::vector<std::string> args = {"costs"};
  for (const std::string& s : all_samples()) args.push_back(s);
  std::vector<std::string> csv_args = args, jsonl_args = args;
  for (const char* a : {"-q", "--device", "h100", "-o"}) {
    csv_args.push_back(a);
    jsonl_args.push_back(a);
  }
  csv_args.push_back(dir + "/rows.csv");
  jsonl_args.push_back(dir + "/rows.jsonl");
  REQUIRE(run_kdflow(csv_args).exit_code == 0);
  auto r = run_kdflow(jsonl_args);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(slurp(dir + "/rows.jsonl"));
  std::map<std::string, size_t> rows_of;
  for (std::string line; std::getline(lines, line);) rows_of[nlohmann::json::parse(line)["model"]]++;
  CHECK(rows_of.size() == all_samples().size());
  // One row per function node that launches work, per model (from the golden flows).
  for (const std::string& m : kdflow::test::sample_names()) {
    auto flow = nlohmann::json::parse(slurp(kdflow::test::source_dir() + "/test/golden/" + m + ".json"));
    size_t functions = 0;
    for (const auto& n : flow["nodes"])
      if (n["op"] == "tvm_op" && (!n["kernels"].empty() || !n["library_calls"].empty())) ++functions;
    CHECK(rows_of[m] == functions);
  }
  std::string csv = slurp(dir + "/rows.csv");
  CHECK(csv.rfind("model,node,function,relay_ops,ops,", 0) == 0);
  csv_args.back() = dir + "/again.csv";
  REQUIRE(run_kdflow(csv_args).exit_code == 0);
  CHECK(slurp(dir + "/again.csv") == csv);
}

TEST_CASE("every sample's Chakra trace decodes with protoc, edges are the dependencies", "[chakra]") {
  if (!have_protoc()) {
    WARN("SKIPPED: protoc is not installed (scripts/install-deps.sh installs protobuf-compiler)");
    return;
  }
  std::string dir = kdflow::test::temp_dir();
  for (const std::string& m : kdflow::test::sample_names()) {
    INFO(m);
    auto r = run_kdflow({"extract", kdflow::test::sample_dir(m), "-q", "-o", dir + "/" + m + ".et"});
    REQUIRE(r.exit_code == 0);
    auto flow = nlohmann::json::parse(slurp(kdflow::test::source_dir() + "/test/golden/" + m + ".json"));
    std::vector<std::string> msgs = split_delimited(slurp(dir + "/" + m + ".et"));
    const size_t nk = flow["kernels"].size(), nc = flow["library_calls"].size();
    REQUIRE(msgs.size() == 1 + nk + nc);
    std::string meta = protoc_decode("ChakraProtoMsg.GlobalMetadata", msgs[0], dir);
    CHECK(meta.find("version: \"0.0.4\"") != std::string::npos);
    CHECK(meta.find("string_val: \"" + m + "\"") != std::string::npos);
    // RAW dependencies by the later kernel.
    std::map<size_t, std::set<size_t>> raw;
    for (const auto& d : flow["dependencies"]) {
      if (d["kind"] != "raw") continue;
      size_t to = d["to"].get<size_t>() + (d.value("to_library_call", false) ? nk : 0);
      size_t from = d["from"].get<size_t>() + (d.value("from_library_call", false) ? nk : 0);
      raw[to].insert(from);
    }
    size_t kernels_seen = 0;
    for (size_t i = 1; i < msgs.size(); ++i) {
      std::string node = protoc_decode("ChakraProtoMsg.Node", msgs[i], dir);
      CHECK(node.find("type: COMP_NODE") != std::string::npos);
      size_t id = 0;
      if (node.rfind("id: ", 0) == 0) id = std::stoul(node.substr(4));  // id 0 is not printed
      std::set<size_t> deps;
      for (size_t p = node.find("data_deps: "); p != std::string::npos; p = node.find("data_deps: ", p + 1))
        deps.insert(std::stoul(node.substr(p + 11)));
      CHECK(deps == raw[id]);
      if (id < nk) {
        ++kernels_seen;
        CHECK(node.find("name: \"" + flow["kernels"][id]["name"].get<std::string>() + "\"") != std::string::npos);
        CHECK(node.find("name: \"duration_source\"") != std::string::npos);
      }
    }
    CHECK(kernels_seen == nk);
  }
}

TEST_CASE("kdflow costs: usage errors and a timing file of another model", "[costs]") {
  std::string mlp = kdflow::test::sample_dir("mlp");
  auto r = run_kdflow({"costs", mlp, "--device", "v100", "-q"});
  CHECK(r.exit_code == 64);
  CHECK(r.err == "kdflow costs: error: unknown --device v100 (known: h100, h200, a100, l4, rtx4090, none)\n");
  std::string dir = kdflow::test::temp_dir();
  {
    FILE* f = std::fopen((dir + "/t.json").c_str(), "w");
    REQUIRE(f);
    std::fputs(R"({"schema": "kdflow-replay-timing/1", "kernels": [{"kernel": 0, "name": "x", "median_us": 1}]})", f);
    std::fclose(f);
  }
  r = run_kdflow({"costs", mlp, kdflow::test::sample_dir("attention"), "--timing", dir + "/t.json", "-q"});
  CHECK(r.exit_code == 64);
  r = run_kdflow({"costs", mlp, "--timing", dir + "/t.json", "-q"});
  CHECK(r.exit_code == 65);
  CHECK(r.err.find(dir + "/t.json:/kernels/0/name: error: kernel 0 is ") == 0);
  r = run_kdflow({"extract", mlp, "--timing", dir + "/t.json", "-q"});
  CHECK(r.exit_code == 64);  // --timing applies to Chakra output only
}

// Issue 50: the time predicted from each kernel's code, summed per sample, against what an H200
// measured (docs/gpu-check.md, "The first real run": Σ kernel of eager replay, the median of 10
// gated runs, 2026-11-25). Checking data, not training data: no constant of the time model was
// fitted to these (docs/costs.md "Time from code"). Every sample within 2x; the 1.5x count is
// printed and held at the figure the closing note states.
TEST_CASE("costs: the time predicted from code is within 2x of the H200's measured sum on every sample",
          "[costs][time-model]") {
  const std::map<std::string, double> measured = {
      {"attention", 172.93},   {"ffi_batch_mlp", 162.19},    {"ffi_mlp", 27.68},        {"ffi_mlp_compiled", 28.16},
      {"mlp", 23.87},          {"mlp_cublas", 18.62},        {"mlp_fp16", 28.00},       {"mlp_v08", 24.99},
      {"mobilenet", 23471.98}, {"relax_mlp", 27.38},         {"relax_mlp_compiled", 28.26},
      {"resnet18", 74221.14},  {"resnet18_tuned", 749.73},   {"sort_scan", 183.12},     {"sort_scan_v08", 184.88},
      {"squeezenet", 34101.10}};
  int within_15 = 0;
  for (const auto& [m, us] : measured) {
    auto r = run_kdflow({"costs", kdflow::test::sample_dir(m), "--device", "h200", "--per-kernel", "--format", "jsonl"});
    INFO(m << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    double sum = 0;
    size_t rows = 0, from_code = 0;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line);
      REQUIRE(j["predicted_us"].is_number());  // every kernel has a prediction
      sum += j["predicted_us"].get<double>();
      ++rows;
      from_code += j["predicted_source"] == "code";
    }
    const double ratio = sum / us;
    WARN(m << ": predicted " << sum << " us, measured " << us << " us, ratio " << ratio << " (" << from_code << " of "
           << rows << " kernels from code)");
    CHECK(ratio >= 0.5);
    CHECK(ratio <= 2.0);
    within_15 += ratio >= 1 / 1.5 && ratio <= 1.5;
  }
  CHECK(within_15 >= 15);  // of 16 (ffi_batch_mlp: 1.79x)
}

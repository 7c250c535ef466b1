// Static footprints and the bounds verdict (issue 12) on the real samples: zero
// out-of-bounds verdicts on every sample (they are correct builds), every argument of the
// dense/conv/pool/elementwise/softmax/layer-norm/batch_matmul models proven, and the three
// edited flows of the issue (an offset at the end of its buffer, a 10x grid, an argument
// moved to a smaller buffer) each refused by the check on a flow read back and by
// `kdflow replay --flow` before any driver call.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>

#include <nlohmann/json.hpp>

#include "kdflow/analysis/bounds.h"
#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/frontend/extract.h"
#include "test_util.h"

using namespace kdflow;
using namespace kdflow::test;
using nlohmann::ordered_json;

namespace {

Dataflow extract_sample(const std::string& name) {
  ExtractInputs in;
  in.dir = sample_dir(name);
  auto df = extract(in);
  if (!df) FAIL(df.error().message);
  return df.take();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

/// mlp's JSON with kernel 0's first argument (T_relu, writes all 1600 bytes of buffer 3) edited.
struct Edited {
  std::string name;
  std::function<void(ordered_json&)> edit;
};
std::vector<Edited> edits() {
  return {
      {"offset at the end of its buffer", [](ordered_json& j) { j["kernels"][0]["args"][0]["offset"] = 1600; }},
      {"a 10x grid", [](ordered_json& j) { j["kernels"][0]["grid"][0] = 4000; }},
      {"moved to a smaller buffer", [](ordered_json& j) { j["kernels"][0]["args"][0]["buffer"] = 0; }},  // input0, 400 B
  };
}

}  // namespace

TEST_CASE("footprints: no sample has an argument out of bounds, dense/conv/pool/softmax models fully proven",
          "[samples][footprint]") {
  for (const std::string& name : sample_names()) {
    INFO(name);
    Dataflow df = extract_sample(name);
    BoundsSummary s = summarize_bounds(df);
    CHECK(s.out_of_bounds == 0);
    CHECK(s.violations.empty());
    CHECK(s.proven > 0);
    CHECK(check_launch_bounds(df));
    if (name.rfind("sort_scan", 0) == 0) {
      // sort, scan and top-k index with data (and loop until data says stop)
      CHECK(s.unknown > 0);
      for (const auto& [why, n] : s.unknown_reasons) {
        INFO(why);
        CHECK((why == "data-dependent index" || why == "loop without affine bounds" || why == "non-affine index"));
      }
    } else {
      CHECK(s.unknown == 0);
    }
    // Every kernel pointer argument has a footprint; exact ones lie inside the buffer.
    for (const Kernel& k : df.kernels)
      for (const Arg& a : k.args)
        if (a.kind == Arg::Kind::Buffer) CHECK(a.footprint.has_value());
  }
}

TEST_CASE("footprints: JSON round trip keeps them", "[samples][footprint]") {
  Dataflow df = extract_sample("squeezenet");
  auto back = parse_dataflow_json(emit_json(df), "flow.json");
  REQUIRE(back);
  CHECK(back->kernels == df.kernels);
  bool some = false;
  for (const Kernel& k : back->kernels)
    for (const Arg& a : k.args) some = some || (a.footprint && a.footprint->read);
  CHECK(some);
}

TEST_CASE("footprints: the three edited flows are refused on a flow read back", "[samples][footprint]") {
  const std::string text = emit_json(extract_sample("mlp"));
  for (const Edited& e : edits()) {
    INFO(e.name);
    ordered_json j = ordered_json::parse(text);
    e.edit(j);
    auto df = parse_dataflow_json(j.dump(), "edited.json");
    REQUIRE(df);
    // The grid is not in the carried footprint: re-deriving from device.cu catches it.
    Status r = rederive_footprints(*df, sample_dir("mlp") + "/device.cu", "edited.json");
    Status c = check_launch_bounds(*df);
    CHECK((!r || !c));
    if (e.name == "a 10x grid") {
      REQUIRE(!r);
      CHECK(r.error().message.find("edited.json:/kernels/0/args/0/footprint") != std::string::npos);
      CHECK(r.error().message.find("write [0, 16000)") != std::string::npos);
      // Without a carried footprint, the re-derived one is out of bounds.
      auto bare = parse_dataflow_json(j.dump(), "edited.json");
      for (Kernel& k : bare->kernels)
        for (Arg& a : k.args) a.footprint.reset();
      REQUIRE(rederive_footprints(*bare, sample_dir("mlp") + "/device.cu", "edited.json"));
      Status b = check_launch_bounds(*bare);
      REQUIRE(!b);
      CHECK(b.error().message.find("writes bytes [0, 16000) of buffer 3") != std::string::npos);
    } else {
      REQUIRE(!c);
      CHECK(c.error().code == ExitCode::DataError);
      CHECK(c.error().message.find("kernel 0 (tvmgen_default_fused_nn_dense_add_nn_relu_kernel) argument 0 writes") !=
            std::string::npos);
      CHECK(c.error().message.find(e.name == "moved to a smaller buffer" ? "[0, 1600) of buffer 0 ('input0', 400 bytes)"
                                                                        : "[1600, 3200) of buffer 3") !=
            std::string::npos);
    }
  }
}

TEST_CASE("footprints: replay --flow refuses the three edited flows before touching the driver", "[samples][footprint][cli]") {
  const std::string dir = temp_dir();
  const std::string text = emit_json(extract_sample("mlp"));
  // The plan reads the params before the launches: mlp's params.bin lives in ../shared.
  const std::string shared = shared_sample_dir("mlp");
  if (shared.empty() || !std::filesystem::exists(shared + "/params.bin")) {
    WARN("no ../shared/samples/mlp/params.bin: replay --flow of the edited flows skipped");
    return;
  }
  const std::string params = shared + "/params.bin";
  for (const Edited& e : edits()) {
    INFO(e.name);
    ordered_json j = ordered_json::parse(text);
    e.edit(j);
    const std::string flow = dir + "/edited.json";
    write(flow, j.dump());
    // With the sample folder (device.cu to re-derive from) and a dry run: no driver at all.
    auto r = run_kdflow({"replay", sample_dir("mlp"), "--flow", flow, "--params", params, "--dry-run"});
    CHECK(r.exit_code == 65);
    CHECK(r.out.empty());
    CHECK(r.err.find(e.name == "a 10x grid" ? "is not the one device.cu gives" : "out of bounds: kernel 0") !=
          std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // The unedited flow plans fine.
  write(dir + "/ok.json", text);
  auto ok = run_kdflow({"replay", sample_dir("mlp"), "--flow", dir + "/ok.json", "--params", params, "--dry-run"});
  CHECK(ok.exit_code == 0);
}

TEST_CASE("footprints: extract refuses a build whose kernel writes past its buffer, --allow-oob warns",
          "[samples][footprint][cli]") {
  // A copy of samples/mlp whose first kernel (hand-edited, labelled test input) writes one
  // element past T_relu: `T_relu[((int)blockIdx.x)]` becomes `T_relu[((int)blockIdx.x) + 1]`.
  namespace fs = std::filesystem;
  const std::string dir = temp_dir() + "/mlp_oob";
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(sample_dir("mlp"))) fs::copy(f.path(), dir + "/" + f.path().filename().string());
  std::string cu = slurp(dir + "/device.cu");
  const std::string from = "    T_relu[((int)blockIdx.x)] = max((T_matmul_NT[0] + p2[((int)blockIdx.x)]), 0.000000e+00f);";
  size_t at = cu.find(from);
  REQUIRE(at != std::string::npos);
  cu.replace(at, from.size(),
             "    T_relu[((int)blockIdx.x) + 1] = max((T_matmul_NT[0] + p2[((int)blockIdx.x)]), 0.000000e+00f);");
  fs::permissions(dir + "/device.cu", fs::perms::owner_write, fs::perm_options::add);
  write(dir + "/device.cu", cu);
  auto r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
  CHECK(r.exit_code == 65);
  CHECK(!fs::exists(dir + "/out.json"));
  CHECK(r.err.find("out of bounds: kernel") != std::string::npos);
  CHECK(r.err.find("writes bytes [4, ") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // Where, for a report upstream: the edited line, and the last block writing its last byte.
  const long line = 1 + std::count(cu.begin(), cu.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  INFO(r.err);
  CHECK(r.err.find(fmt::format("is written at device.cu:{} by thread (0, 0, 0) of block (", line)) != std::string::npos);
  auto w = run_kdflow({"extract", dir, "--allow-oob", "-o", dir + "/out.json"});
  CHECK(w.exit_code == 0);
  CHECK(w.err.find("warning: out of bounds") != std::string::npos);
  CHECK(fs::exists(dir + "/out.json"));
}

// Sharded (tensor-parallel, TVM disco) builds through the whole pipeline, on a real build that
// needs no TVM to test: test/fixtures/tp_mlp (TVM 0.27, two ranks, one allreduce; its README
// says how it was made). The same model and four more are built by TVM in test/tvm (027s) and
// checked against TVM's own calls and the unsharded model's outputs there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace kdflow::test;
namespace fs = std::filesystem;

namespace {

std::string fixture() { return source_dir() + "/test/fixtures/tp_mlp"; }

/// A copy of the fixture without `drop`, in a fresh folder.
std::string copy_without(const std::vector<std::string>& drop) {
  const std::string dir = temp_dir() + "/tp_mlp";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(fixture())) {
    const std::string name = e.path().filename().string();
    if (std::find(drop.begin(), drop.end(), name) == drop.end()) fs::copy_file(e.path(), dir + "/" + name);
  }
  return dir;
}

}  // namespace

TEST_CASE("sharded: extract states the ranks, the allreduce with its bytes, and what differs per rank", "[sharded]") {
  const std::string out = temp_dir() + "/tp.json";
  RunResult r = run_kdflow({"extract", fixture(), "-q", "-o", out});
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  CHECK(j["ranks"] == 2);
  CHECK(j["sources"]["params"] == "params_shard<r>.bin");
  CHECK(j["summary"]["collectives"] == 1);
  int collectives = 0;
  for (const auto& c : j["library_calls"]) {
    if (!c.contains("collective")) continue;
    ++collectives;
    CHECK(c["name"] == "runtime.disco.allreduce");
    CHECK(c["collective"] == "allreduce");
    CHECK(c["reduce_op"] == "sum");
    CHECK(c["in_group"] == true);
    CHECK(c["dtype"] == "float32");
    CHECK(c["elements"] == 256);  // the (4, 64) partial product
    CHECK(c["bytes"] == 1024);
    CHECK(c["in_place"] == false);
    const auto& send = j["buffers"][c["send"].get<int>()];
    const auto& recv = j["buffers"][c["recv"].get<int>()];
    CHECK(send.value("per_rank", false));   // each rank's partial sum
    CHECK_FALSE(recv.value("per_rank", false));  // the same on every rank after it
    CHECK(c["args"][0]["access"] == "read");
    CHECK(c["args"][1]["access"] == "write");
  }
  CHECK(collectives == 1);
  // The input is every rank's; each rank's shards are its own.
  for (int b : j["inputs"]) CHECK_FALSE(j["buffers"][b].value("per_rank", false));
  for (int b : j["params"]) CHECK(j["buffers"][b].value("per_rank", false));
  // The allreduce takes part in the dependencies: the residual add reads what it wrote.
  bool raw_from_call = false;
  for (const auto& d : j["dependencies"]) raw_from_call = raw_from_call || (d.value("from_library_call", false) && d["kind"] == "raw");
  CHECK(raw_from_call);

  RunResult show = run_kdflow({"show", fixture(), "--color", "never"});
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.find("allreduce sum, 1.0 KiB per rank (collective)") != std::string::npos);
  CHECK(show.out.find("ranks                       2 (tensor-parallel") != std::string::npos);
  CHECK(show.out.find("1 allreduce sum (1.0 KiB)") != std::string::npos);
  RunResult explain = run_kdflow({"explain", fixture(), "lib0", "--color", "never"});
  REQUIRE(explain.exit_code == 0);
  CHECK(explain.out.find("allreduce: sum of 256 elements (1.0 KiB (1,024 B) per rank), among the ranks of its group (2 ranks)") !=
        std::string::npos);
  RunResult costs = run_kdflow({"costs", fixture()});
  REQUIRE(costs.exit_code == 0);
  CHECK(costs.out.find("ranks: 2 (tensor-parallel)") != std::string::npos);
  CHECK(costs.out.find("communication: 1 collectives, 1.0") != std::string::npos);
}

TEST_CASE("sharded: ranks that the files and --shards do not agree on are one line", "[sharded]") {
  RunResult r = run_kdflow({"extract", fixture(), "-q", "--shards", "3", "-o", temp_dir() + "/x.json"});
  CHECK(r.exit_code == 64);
  CHECK(r.err.find("--shards 3 but the build has 2 params_shard<r>.bin files") != std::string::npos);
  // Without the shard files the build's collective says it is sharded, and nothing says how far.
  const std::string bare = copy_without({"params_shard0.bin", "params_shard1.bin"});
  r = run_kdflow({"extract", bare, "-q", "--no-params", "-o", temp_dir() + "/y.json"});
  CHECK(r.exit_code != 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // One rank's file missing: rank 1 is then not a rank at all, so --shards 2 disagrees.
  const std::string one = copy_without({"params_shard1.bin"});
  r = run_kdflow({"extract", one, "-q", "--shards", "2", "-o", temp_dir() + "/z.json"});
  CHECK(r.exit_code == 64);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("sharded: a Chakra trace per rank, each collective a communication node", "[sharded][chakra]") {
  const std::string prefix = temp_dir() + "/tp";
  RunResult r = run_kdflow({"extract", fixture(), "-q", "--format", "chakra", "-o", prefix + ".et"});
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(prefix + ".0.et"));
  CHECK(fs::exists(prefix + ".1.et"));
  CHECK_FALSE(fs::exists(prefix + ".2.et"));
  CHECK_FALSE(fs::exists(prefix + ".et"));
  CHECK(slurp(prefix + ".0.et").find("ALL_REDUCE") == std::string::npos);  // an enum value, not text
  RunResult dash = run_kdflow({"extract", fixture(), "-q", "--format", "chakra", "-o", "-"});
  CHECK(dash.exit_code == 64);
}

TEST_CASE("sharded: --dump-dir writes each rank's buffers in its own folder", "[sharded]") {
  const std::string dump = temp_dir() + "/tp_dump";
  RunResult r = run_kdflow({"replay", fixture(), "--backend", "cpu", "--repeat", "1", "--warmup", "0", "-q",
                            "--dump-dir", dump});
  if (r.exit_code == 69) {
    WARN("skipped: no CPU replay back end in this build: " << r.err);
    return;
  }
  REQUIRE(r.exit_code == 0);
  // The first kernel's output (a slice of the weight, transposed) differs between the ranks:
  // each rank's shard; the last kernel's (after the allreduce) is the same on both.
  const std::string first = "/0_transpose_kernel_arg0.npy";
  REQUIRE(fs::exists(dump + "/rank0" + first));
  REQUIRE(fs::exists(dump + "/rank1" + first));
  CHECK(slurp(dump + "/rank0" + first) != slurp(dump + "/rank1" + first));
  CHECK(slurp(dump + "/rank0/4_add_kernel_arg0.npy") == slurp(dump + "/rank1/4_add_kernel_arg0.npy"));
  // Comparing with them is refused: the allreduce is a library call, which dumps do not cover.
  r = run_kdflow({"replay", fixture(), "--backend", "cpu", "--repeat", "1", "--warmup", "0", "--compare-dumps", dump});
  CHECK(r.exit_code == 69);
  CHECK(r.err.find("library calls") != std::string::npos);
}

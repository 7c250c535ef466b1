// Every input kind `kdflow extract` and `kdflow inspect` read, made bad four ways —
// truncated, swapped for another input kind, empty, garbage — through the real binary:
// exit 65 (bad input data; docs/errors.md), no signal, one line on stderr naming the bad
// file, nothing on stdout, and no output file (nor temp file) left behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_util.h"

using namespace kdflow::test;
namespace fs = std::filesystem;

namespace {

// sort_scan has every input kind: graph.json, host.c, the function table, params.bin,
// device.cu, relay.txt, model.so, cubin and PTX.
const char* kModel = "sort_scan";

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::string garbage(size_t n) {
  std::mt19937 rng(12345);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

enum class Bad { Truncated, Swapped, Empty, Garbage };
const char* name(Bad b) {
  switch (b) {
    case Bad::Truncated: return "truncated";
    case Bad::Swapped: return "swapped";
    case Bad::Empty: return "empty";
    case Bad::Garbage: return "garbage";
  }
  return "?";
}

/// The bad content for an input whose good content is `good`; `swap` is another input's.
std::string make_bad(Bad b, const std::string& good, const std::string& swap) {
  switch (b) {
    case Bad::Truncated: return good.substr(0, good.size() / 2 + 7);
    case Bad::Swapped: return swap;
    case Bad::Empty: return "";
    case Bad::Garbage: return garbage(4096);
  }
  return "";
}

/// Runs kdflow with `args` (+ `-o OUT` for extract) and checks the failure's shape.
void expect_bad(const std::vector<std::string>& args, const std::string& bad_file, bool with_output) {
  std::string out_dir = temp_dir();
  std::string out = out_dir + "/out.json";
  std::vector<std::string> full = args;
  if (with_output) {
    full.push_back("-o");
    full.push_back(out);
  }
  RunResult r = run_kdflow(full);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 65);         // bad input data; a signal would read 128+N
  CHECK(r.out.empty());             // no partial output on stdout
  REQUIRE(!r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);  // exactly one line
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(r.err.find(bad_file) != std::string::npos);  // names the bad file
  CHECK(fs::is_empty(out_dir));     // no output file, no temp file
}

struct Kind {
  const char* option;  ///< extract option ("" for the positional model.so)
  const char* file;    ///< the sample file it reads
  const char* swap;    ///< another input's file passed in its place
};

}  // namespace

TEST_CASE("extract: every input kind truncated, swapped, empty or garbage", "[errors][cli][bad_inputs]") {
  const std::string dir = sample_dir(kModel);
  const Kind kinds[] = {
      {"--graph", "graph.json", "params.bin"},
      {"--host", "host.c", "device.cu"},
      {"--meta", "device.tvm_meta.json", "graph.json"},
      {"--params", "params.bin", "graph.json"},
      {"--device", "device.cu", "graph.json"},
      {"--relay", "relay.txt", "graph.json"},
  };
  for (const Kind& k : kinds) {
    for (Bad b : {Bad::Truncated, Bad::Swapped, Bad::Empty, Bad::Garbage}) {
      INFO(k.option << " " << k.file << " " << name(b));
      std::string bad = temp_dir() + "/bad_" + k.file;
      write(bad, make_bad(b, slurp(dir + "/" + k.file), slurp(dir + "/" + k.swap)));
      // device.cu under --strict-device: any clang error fails. (Without it, a truncated
      // device.cu can leave only its last kernel unanalyzed: samples_errors.cpp tests that.)
      std::vector<std::string> args = {"extract", dir, k.option, bad, "-q"};
      if (std::string(k.option) == "--device") args.push_back("--strict-device");
      expect_bad(args, bad, true);
    }
  }
}

TEST_CASE("extract: a model.so truncated, swapped, empty or garbage", "[errors][cli][bad_inputs][model_so]") {
  const std::string dir = sample_dir(kModel);
  for (Bad b : {Bad::Truncated, Bad::Swapped, Bad::Empty, Bad::Garbage}) {
    INFO(name(b));
    std::string in = temp_dir();
    // An ELF without __tvm_dev_mblob stands for the swapped case: the cubin.
    write(in + "/model.so", make_bad(b, slurp(dir + "/model.so"), slurp(dir + "/device.cubin")));
    fs::copy_file(dir + "/host.c", in + "/host.c");
    expect_bad({"extract", in + "/model.so", "-q"}, in + "/model.so", true);
  }
}

TEST_CASE("inspect: model.so, cubin and PTX truncated, swapped, empty or garbage", "[errors][cli][bad_inputs]") {
  const std::string dir = sample_dir(kModel);
  const Kind kinds[] = {
      {"", "model.so", "graph.json"},
      {"", "device.cubin", "graph.json"},
      {"", "device.ptx", "graph.json"},
  };
  for (const Kind& k : kinds) {
    for (Bad b : {Bad::Truncated, Bad::Swapped, Bad::Empty, Bad::Garbage}) {
      INFO(k.file << " " << name(b));
      std::string bad = temp_dir() + "/" + k.file;
      write(bad, make_bad(b, slurp(dir + "/" + k.file), slurp(dir + "/" + k.swap)));
      expect_bad({"inspect", bad}, bad, false);
    }
  }
}

TEST_CASE("replay: an output that would overwrite an input is refused before the run", "[errors][cli]") {
  // The refusal comes before the driver is needed, so this runs without CUDA.
  std::string dir = temp_dir() + "/mlp";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(sample_dir("mlp"))) fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
  std::string reference = slurp(dir + "/output_0.npy");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--output-dir", dir}, std::vector<std::string>{"--trace", dir + "/output_0.npy"}}) {
    std::vector<std::string> args = {"replay", dir, "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = run_kdflow(args);
    INFO(r.err);
    CHECK(r.exit_code == 64);
    CHECK(r.err.find(dir + "/output_0.npy: an output would overwrite this input file") != std::string::npos);
    CHECK(slurp(dir + "/output_0.npy") == reference);
  }
}

TEST_CASE("inspect: a build folder is its model.so, a folder without one or a device binary is one line",
          "[errors][cli]") {
  std::string dir = shared_sample_dir("mlp");
  if (dir.empty() || !fs::exists(fs::path(dir) / "model.so")) {
    WARN("skipped: no ../shared/samples/mlp/model.so");
    return;
  }
  auto folder = run_kdflow({"inspect", dir});
  auto file = run_kdflow({"inspect", dir + "/model.so"});
  REQUIRE(file.exit_code == 0);
  CHECK(folder.exit_code == 0);
  CHECK(folder.out == file.out);
  std::string empty = temp_dir();
  auto none = run_kdflow({"inspect", empty});
  CHECK(none.exit_code == 66);
  CHECK(none.err == empty + ": error: a folder without model.so or a device binary (.cubin, .fatbin, .ptx): inspect "
                            "reads those\n");
}

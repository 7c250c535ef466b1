// codegen.cpp — `kdflow codegen` through the CLI: the program for a real build against its golden
// file, deterministic output, the folder rules (never writing over what it did not write), and
// one-line errors before anything is written. That each program builds warning-free and
// launches exactly as replay does is test/codegen/codegen_check.py's (ctest "codegen: ...").
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "test_util.h"

using namespace kdflow::test;
namespace fs = std::filesystem;

namespace {

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

std::string read(const fs::path& p) { return slurp(p.string()); }

}  // namespace

TEST_CASE("codegen: relax_mlp's program is its golden file, and the support header is lib/codegen's") {
  const std::string out = temp_dir() + "/prog";
  RunResult r = run_kdflow({"codegen", sample_dir("relax_mlp"), "-o", out, "-q"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("run.cpp (") != std::string::npos);
  const std::string golden = source_dir() + "/test/golden/codegen/relax_mlp.run.cpp";
  if (std::getenv("KDFLOW_UPDATE_GOLDEN")) {
    fs::create_directories(fs::path(golden).parent_path());
    fs::copy_file(fs::path(out) / "run.cpp", golden, fs::copy_options::overwrite_existing);
  }
  CHECK(read(fs::path(out) / "run.cpp") == slurp(golden));
  CHECK(read(fs::path(out) / "kdflow_support.h") == slurp(source_dir() + "/lib/codegen/kdflow_support.h"));
  // Every file the program needs, and the list of what codegen wrote.
  for (const char* f : {"CMakeLists.txt", "README.md", "data/data.bin", "data/device_0.cubin", "data/device_4.cubin",
                        ".kdflow-codegen"})
    CHECK(fs::exists(fs::path(out) / f));
  // The weights and input are in data.bin once each: the five layers' constants and input0.
  CHECK(fs::file_size(fs::path(out) / "data/data.bin") > 9800000);
}

TEST_CASE("codegen: the same build gives the same bytes, wherever it is written") {
  const std::string a = temp_dir() + "/a", b = temp_dir() + "/elsewhere/b";
  for (const std::string& out : {a, b}) {
    RunResult r = run_kdflow({"codegen", sample_dir("attention"), "-o", out, "-q"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  for (const char* f : {"run.cpp", "CMakeLists.txt", "data/data.bin", "kdflow_support.h"})
    CHECK(read(fs::path(a) / f) == read(fs::path(b) / f));
  // README.md names the output folder in its command line; that is all that differs.
  std::string ra = read(fs::path(a) / "README.md"), rb = read(fs::path(b) / "README.md");
  CHECK(ra.find("-o a`") != std::string::npos);
  CHECK(rb.find("-o b`") != std::string::npos);
}

TEST_CASE("codegen: OUT is new, empty, or its own, and anything else is left as it was") {
  const std::string dir = temp_dir();
  SECTION("a regular file") {
    const std::string f = dir + "/file";
    std::ofstream(f) << "mine";
    RunResult r = run_kdflow({"codegen", sample_dir("relax_mlp"), "-o", f, "-q"});
    CHECK(r.exit_code == 73);
    CHECK(one_line(r.err));
    CHECK(r.err.rfind(f + ": error: exists and is not a folder", 0) == 0);
    CHECK(slurp(f) == "mine");
  }
  SECTION("a folder with someone else's files") {
    const std::string d = dir + "/theirs";
    fs::create_directories(d);
    std::ofstream(d + "/notes.txt") << "keep";
    RunResult r = run_kdflow({"codegen", sample_dir("relax_mlp"), "-o", d, "-q"});
    CHECK(r.exit_code == 73);
    CHECK(one_line(r.err));
    CHECK(r.err.find("kdflow codegen did not write") != std::string::npos);
    CHECK(slurp(d + "/notes.txt") == "keep");
    CHECK(!fs::exists(d + "/run.cpp"));
  }
  SECTION("its own folder: regenerated, a user's build folder kept, the previous program's extra files removed") {
    const std::string d = dir + "/prog";
    REQUIRE(run_kdflow({"codegen", sample_dir("relax_mlp"), "-o", d, "-q"}).exit_code == 0);
    fs::create_directories(d + "/build");
    std::ofstream(d + "/build/run") << "a build";
    REQUIRE(fs::exists(d + "/data/device_4.cubin"));
    // attention has one device module (device.cubin, device.ptx), relax_mlp five.
    RunResult r = run_kdflow({"codegen", sample_dir("attention"), "-o", d, "-q"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(slurp(d + "/build/run") == "a build");
    CHECK(!fs::exists(d + "/data/device_4.cubin"));
    CHECK(fs::exists(d + "/data/device.cubin"));
    CHECK(slurp(d + "/run.cpp").find("tvmgen_default_fused") != std::string::npos);
  }
}

TEST_CASE("codegen: a reference of another shape is one line, and nothing is written") {
  const std::string out = temp_dir() + "/prog";
  RunResult r = run_kdflow({"codegen", sample_dir("relax_mlp"), "--expect", sample_dir("attention") + "/output_0.npy",
                            "-o", out, "-q"});
  CHECK(r.exit_code == 65);
  CHECK(one_line(r.err));
  CHECK(r.err.find("output_0.npy: error: shape") != std::string::npos);
  CHECK(!fs::exists(out));
}

TEST_CASE("codegen: -o is required") {
  RunResult r = run_kdflow({"codegen", sample_dir("relax_mlp")});
  CHECK(r.exit_code == 64);
  CHECK(one_line(r.err));
}

TEST_CASE("codegen: a sharded build (tp_mlp, TVM 0.27, 2 ranks) is one program running both ranks") {
  const std::string out = temp_dir() + "/prog";
  RunResult r = run_kdflow({"codegen", source_dir() + "/test/fixtures/tp_mlp", "-o", out, "-q"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("2 ranks") != std::string::npos);
  const std::string src = read(fs::path(out) / "run.cpp");
  CHECK(src.find("constexpr int kRanks = 2;") != std::string::npos);
  // Each rank's shard of the weights from its own place in data.bin; the allreduce between them.
  CHECK(src.find("_at[kRanks] = {") != std::string::npos);
  CHECK(src.find("kd::reduce(sent, kd::DType::Float32, kd::Reduce::Sum)") != std::string::npos);
  CHECK(src.find("collective_0(ranks);") != std::string::npos);
}

TEST_CASE("codegen: an exported model.so (../shared's ffi_mlp of TVM 0.26 and mlp of TVM 0.14) is read as extract reads it") {
  for (const char* m : {"ffi_mlp", "mlp"}) {
    const std::string shared = shared_sample_dir(m);
    if (shared.empty() || !fs::exists(shared + "/model.so")) {
      WARN("no ../shared/samples/" << m << "/model.so: skipped");
      continue;
    }
    // Only the library, its host C and the input and reference: the modules and the params come
    // from the library's blob.
    const std::string dir = temp_dir() + "/" + m;
    fs::create_directories(dir);
    for (const char* f : {"model.so", "host.c", "output_0.npy"}) fs::copy_file(shared + "/" + f, dir + "/" + f);
    for (const auto& e : fs::directory_iterator(shared))
      if (e.path().filename().string().rfind("input_", 0) == 0) fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
    RunResult plan = run_kdflow({"replay", dir + "/model.so", "--dry-run", "-q"});
    INFO(m << ": " << plan.err);
    REQUIRE(plan.exit_code == 0);
    RunResult folder = run_kdflow({"replay", shared, "--dry-run", "-q"});
    if (std::string(m) == "mlp") folder = run_kdflow({"replay", sample_dir(m), "--params", shared + "/params.bin", "--dry-run", "-q"});
    REQUIRE(folder.exit_code == 0);
    // The same allocations and launches as from the build folder (the first line names the input;
    // without device.cu beside the library, each argument's access is unknown).
    auto body = [](const std::string& s) {
      return std::regex_replace(s.substr(s.find('\n') + 1), std::regex(R"(\(buffer (\d+), \w+\))"), "(buffer $1)");
    };
    CHECK(body(plan.out) == body(folder.out));
    RunResult r = run_kdflow({"codegen", dir + "/model.so", "-o", dir + "/program", "-q"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    bool module = false;
    for (const auto& e : fs::directory_iterator(dir + "/program/data"))
      module = module || e.path().filename().string().rfind("device_0.", 0) == 0;
    CHECK(module);  // the blob's CUDA module, written out of the library
  }
}

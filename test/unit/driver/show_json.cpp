// show_json.cpp — `kdflow show` / `explain` / `show --profile` on an extracted JSON
// file: these need no clang, so they run in a -DKDFLOW_WITH_CLANG=OFF build too.
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "test_util.h"

using namespace kdflow::test;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string golden(const std::string& m) { return source_dir() + "/test/golden/" + m + ".json"; }
}  // namespace

TEST_CASE("show, explain and the profile join read a kdflow JSON file", "[show][cli]") {
  auto s = run_kdflow({"show", golden("mlp")});
  REQUIRE(s.exit_code == 0);
  CHECK(s.out.find('\x1b') == std::string::npos);
  CHECK(contains(s.out, "\n  function nodes              5\n"));
  CHECK(contains(s.out, "\n  kernels                     6\n"));
  CHECK(contains(s.out, "\n  nodes with several kernels  1: n13 (2 kernels)\n"));

  auto e = run_kdflow({"explain", golden("mlp"), "k5"});
  REQUIRE(e.exit_code == 0);
  CHECK(contains(e.out, "#0 T_softmax_maxelem (float *__restrict)  handle  read\n"));
  CHECK(contains(e.out, "producers  k4 tvmgen_default_fused_nn_log_softmax_kernel (n13)\n"));

  auto p = run_kdflow({"show", golden("mlp_v08"), "--profile", source_dir() + "/test/fixtures/ncu_forum_export.csv"});
  REQUIRE(p.exit_code == 0);
  CHECK(contains(p.out, "joined to graph.json: 6 of 6 launches are graph kernels; 6 of 6 graph kernels profiled\n"));

  auto bad = run_kdflow({"show", source_dir() + "/test/fixtures/ncu_forum_export.csv"});  // not a flow
  CHECK(bad.exit_code != 0);
}

TEST_CASE("names holding escape sequences are printed with '?', colour or not", "[show][cli]") {
  std::string text = slurp(golden("mlp"));
  const std::string from = "\"input0\"", to = "\"in\\u001b[31mput0\\u0007\"";
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  const std::string path = temp_dir() + "/evil.json";
  std::ofstream(path) << text;
  for (const char* color : {"never", "always"}) {
    INFO(color);
    auto s = run_kdflow({"show", path, "--color", color});
    REQUIRE(s.exit_code == 0);
    auto e = run_kdflow({"explain", path, "n0", "--color", color});
    REQUIRE(e.exit_code == 0);
    CHECK(contains(e.out, "in?[31mput0?"));
    CHECK(e.out.find("\x1b[31mput") == std::string::npos);
    CHECK(e.out.find('\a') == std::string::npos);
    if (std::string(color) == "never") {
      CHECK(s.out.find('\x1b') == std::string::npos);
      CHECK(e.out.find('\x1b') == std::string::npos);
    }
  }
  auto by_name = run_kdflow({"explain", path, "in\x1b[31mput0\a"});
  CHECK(by_name.exit_code == 0);
  auto unknown = run_kdflow({"explain", path, "x\x1b[2Jy"});
  CHECK(unknown.exit_code == 64);
  CHECK(unknown.err.find('\x1b') == std::string::npos);
}

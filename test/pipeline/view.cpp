// view.cpp — `kdflow view` end to end on the samples: the Model Explorer JSON equals its
// reviewed golden file, the page is deterministic and self-contained, extract -o FILE.html
// writes the same page, and bad command lines and outputs are one line with their exit code.
// (The page in a real browser: test/view/check_view.py.)
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "kdflow/emit/emit_view.h"
#include "test_util.h"

using namespace kdflow::test;

TEST_CASE("view: the Model Explorer graph equals the reviewed golden files", "[samples][golden][view]") {
  const std::string dir = temp_dir();
  for (const std::string m : {"mlp", "mlp_cublas"}) {
    INFO(m << ": regenerate with scripts/update-goldens.sh, then review git diff test/golden");
    RunResult r = run_kdflow({"view", sample_dir(m), "-q", "-o", dir + "/" + m + ".json"});
    REQUIRE(r.exit_code == 0);
    CHECK(slurp(dir + "/" + m + ".json") == slurp(source_dir() + "/test/golden/" + m + ".model-explorer.json"));
  }
}

TEST_CASE("view: the page is deterministic, self-contained, and what extract -o FILE.html writes", "[samples][view]") {
  if (!kdflow::view_available()) {
    RunResult r = run_kdflow({"view", sample_dir("mlp"), "-o", temp_dir() + "/x.html"});
    CHECK(r.exit_code == 69);
    CHECK(r.err.find("without Graphviz") != std::string::npos);
    return;
  }
  const std::string dir = temp_dir();
  for (const std::string m : {"mlp", "sort_scan", "relax_mlp"}) {
    INFO(m);
    REQUIRE(run_kdflow({"view", sample_dir(m), "-q", "-o", dir + "/a.html"}).exit_code == 0);
    REQUIRE(run_kdflow({"view", sample_dir(m), "-q", "-o", dir + "/b.html"}).exit_code == 0);
    REQUIRE(run_kdflow({"extract", sample_dir(m), "-q", "-o", dir + "/c.html"}).exit_code == 0);
    const std::string a = slurp(dir + "/a.html");
    CHECK(a == slurp(dir + "/b.html"));
    CHECK(a == slurp(dir + "/c.html"));
    CHECK(a.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(a.find("default-src 'none'") != std::string::npos);
    CHECK(a.find("<script src") == std::string::npos);
    CHECK(a.find("<link") == std::string::npos);
    CHECK(a.find(source_dir()) == std::string::npos);  // no absolute paths
    CHECK(a.find("KDFLOW:") == std::string::npos);      // every marker replaced
  }
  // From the extracted JSON, as show reads it (the title is the JSON's name less .json): the same page.
  REQUIRE(run_kdflow({"extract", sample_dir("mlp"), "-q", "-o", dir + "/mlp.json"}).exit_code == 0);
  REQUIRE(run_kdflow({"view", dir + "/mlp.json", "-q", "-o", dir + "/d.html"}).exit_code == 0);
  REQUIRE(run_kdflow({"view", sample_dir("mlp"), "-q", "-o", dir + "/e.html"}).exit_code == 0);
  CHECK(slurp(dir + "/d.html") == slurp(dir + "/e.html"));
}

TEST_CASE("view: bad command lines and outputs", "[view][cli]") {
  const std::string dir = temp_dir();
  RunResult r = run_kdflow({"view", sample_dir("mlp"), "-o", dir});
  CHECK(r.exit_code == 73);
  r = run_kdflow({"view", dir + "/missing", "-o", dir + "/x.html"});
  CHECK(r.exit_code == 66);
  r = run_kdflow({"view", sample_dir("mlp"), "-o", dir + "/x.html", "--timing", "a.json", "--profile", "b.csv"});
  CHECK(r.exit_code == 64);
  CHECK(r.err == "kdflow view: error: --timing and --profile both give measured times: pass one\n");
  r = run_kdflow({"view", sample_dir("mlp"), "-o", dir + "/x.html", "--roofline", "tpu"});
  CHECK(r.exit_code == 64);
  REQUIRE(run_kdflow({"extract", sample_dir("mlp"), "-q", "-o", dir + "/mlp.json"}).exit_code == 0);
  r = run_kdflow({"view", dir + "/mlp.json", "-o", dir + "/mlp.json"});
  CHECK(r.exit_code == 64);
  CHECK(r.err.find("would overwrite an input") != std::string::npos);
  r = run_kdflow({"view", sample_dir("mlp"), "-o", dir + "/x.html", "--timing", sample_dir("mlp") + "/graph.json"});
  CHECK(r.exit_code == 65);
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

TEST_CASE("view --timing: replay's measured times reach the page and the Model Explorer graph", "[samples][view]") {
  const std::string dir = temp_dir();
  // Times from the CPU back end (relax_mlp: 5 kernels, under a second); the page only needs a
  // timing file of this model.
  RunResult r = run_kdflow({"replay", sample_dir("relax_mlp"), "--backend", "cpu", "--repeat", "2", "--warmup", "0",
                            "--timing-json", dir + "/timing.json", "-q"});
  if (r.exit_code == 69) {
    WARN("skipped: no CPU replay back end in this build: " << r.err);
    return;
  }
  REQUIRE(r.exit_code == 0);
  REQUIRE(run_kdflow({"view", sample_dir("relax_mlp"), "-q", "--timing", dir + "/timing.json", "-o", dir + "/me.json"})
              .exit_code == 0);
  const nlohmann::json me = nlohmann::json::parse(slurp(dir + "/me.json"));
  int timed = 0;
  for (const auto& n : me[0]["subgraphs"][0]["nodes"])
    for (const auto& a : n["attrs"]) timed += a["key"] == "time_us";
  CHECK(timed == 5);
  if (!kdflow::view_available()) return;
  REQUIRE(run_kdflow({"view", sample_dir("relax_mlp"), "-q", "--timing", dir + "/timing.json", "-o", dir + "/p.html"})
              .exit_code == 0);
  const std::string page = slurp(dir + "/p.html");
  const std::string open = "<script id=\"kdflow-data\" type=\"application/json\">";
  const size_t at = page.find(open);
  REQUIRE(at != std::string::npos);
  const nlohmann::json data =
      nlohmann::json::parse(page.substr(at + open.size(), page.find("</script>", at) - at - open.size()));
  CHECK(data["measured_source"].get<std::string>().rfind("replay timing", 0) == 0);
  for (const auto& k : data["kernels"]) {
    CHECK(k.contains("time_us"));
    CHECK(k.contains("roofline"));
  }
}

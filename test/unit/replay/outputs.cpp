// outputs.cpp — `kdflow replay --trace` and `--output-dir` write through what they are
// pointed at (issue 10): a symlink stays a link, a FIFO's reader gets the whole trace.
// Runs the kdflow binary on the fake driver (test/fake_cuda).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace fs = std::filesystem;
using kdflow::test::run_kdflow;
using kdflow::test::slurp;

namespace {

mode_t type_of(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

std::vector<std::string> replay_args(const std::string& trace) {
  return {"replay", kdflow::test::sample_dir("sort_scan"), "--flow",
          kdflow::test::source_dir() + "/test/golden/sort_scan.json", "--no-expect", "-q", "--trace", trace};
}

}  // namespace

TEST_CASE("replay --trace writes through a symlink and into a FIFO", "[replay][outputs]") {
  ::setenv("KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA, 1);
  std::string dir = kdflow::test::temp_dir();
  fs::create_directory(dir + "/traces");
  REQUIRE(::symlink("traces/t.json", (dir + "/link.json").c_str()) == 0);
  auto r = run_kdflow(replay_args(dir + "/link.json"));
  REQUIRE(r.exit_code == 0);
  CHECK(type_of(dir + "/link.json") == S_IFLNK);
  auto trace = nlohmann::json::parse(slurp(dir + "/traces/t.json"));
  CHECK(trace["traceEvents"].size() > 0);

  std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  r = run_kdflow(replay_args(fifo));
  reader.join();
  CHECK(r.exit_code == 0);
  CHECK(type_of(fifo) == S_IFIFO);
  CHECK(nlohmann::json::parse(got)["traceEvents"].size() == trace["traceEvents"].size());
  ::unsetenv("KDFLOW_CUDA_LIBRARY");
}

TEST_CASE("replay --timing-json feeds kdflow costs: measured time and fraction of bound per function", "[replay][costs]") {
  ::setenv("KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA, 1);
  std::string dir = kdflow::test::temp_dir();
  std::string flow = kdflow::test::source_dir() + "/test/golden/squeezenet.json";
  auto r = run_kdflow({"replay", kdflow::test::sample_dir("squeezenet"), "--flow", flow, "--no-expect", "-q",
                       "--timing-json", dir + "/timing.json"});
  REQUIRE(r.exit_code == 0);
  r = run_kdflow({"costs", flow, "--timing", dir + "/timing.json", "--device", "h100", "-q", "-o", dir + "/rows.jsonl"});
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(slurp(dir + "/rows.jsonl"));
  size_t rows = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    auto j = nlohmann::json::parse(line);
    CHECK(j["model"] == "squeezenet");
    REQUIRE(j["measured_us"].is_number());
    CHECK(j["measured_us"].get<double>() > 0);
    CHECK(j["time_source"].get<std::string>().find("replay timing") == 0);
    if (j["bound_us"].is_number()) CHECK(j["fraction_of_bound"].is_number());
  }
  CHECK(rows == 39);  // squeezenet's function nodes that launch kernels
  ::unsetenv("KDFLOW_CUDA_LIBRARY");
}

// outputs.cpp — `kdflow extract -o` on what users point it at (issue 10): a FIFO with
// a reader, a symlink, /dev/stdout, a device, a link to an input. Run on a copy of the mlp
// sample so that a regression could never damage the repository's files; as root, device
// nodes are private ones made with mknod, never the system's.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
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

/// A copy of samples/mlp in a fresh temp folder, and its JSON written to a regular file.
struct MlpCopy {
  std::string dir = kdflow::test::temp_dir();
  std::string model = dir + "/mlp";
  std::string json;
  MlpCopy() {
    fs::copy(kdflow::test::sample_dir("mlp"), model, fs::copy_options::recursive);
    auto r = run_kdflow({"extract", model, "-q", "-o", dir + "/regular.json"});
    REQUIRE(r.exit_code == 0);
    json = slurp(dir + "/regular.json");
    REQUIRE(json.size() > 1000);
  }
};

}  // namespace

TEST_CASE("extract -o a FIFO streams the JSON to its reader and leaves the FIFO", "[outputs]") {
  MlpCopy m;
  std::string fifo = m.dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  auto r = run_kdflow({"extract", m.model, "-q", "--format", "json", "-o", fifo});
  reader.join();
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(got == m.json);
  CHECK(type_of(fifo) == S_IFIFO);
}

TEST_CASE("extract -o a symlink writes its target and the link stays", "[outputs]") {
  MlpCopy m;
  fs::create_directory(m.dir + "/results");
  REQUIRE(::symlink("results/flow.json", (m.dir + "/link.json").c_str()) == 0);
  auto r = run_kdflow({"extract", m.model, "-q", "-o", m.dir + "/link.json"});
  CHECK(r.exit_code == 0);
  CHECK(type_of(m.dir + "/link.json") == S_IFLNK);
  CHECK(slurp(m.dir + "/results/flow.json") == m.json);
}

TEST_CASE("extract -o /dev/stdout writes the JSON to standard output", "[outputs]") {
  MlpCopy m;
  auto r = run_kdflow({"extract", m.model, "-q", "--format", "json", "-o", "/dev/stdout"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == m.json);
}

TEST_CASE("extract -o through a symlink to an input is refused", "[outputs]") {
  MlpCopy m;
  std::string graph = m.model + "/graph.json";
  std::string before = slurp(graph);
  REQUIRE(::symlink(graph.c_str(), (m.dir + "/g.json").c_str()) == 0);
  auto r = run_kdflow({"extract", m.model, "-q", "--format", "json", "-o", m.dir + "/g.json"});
  CHECK(r.exit_code == 64);
  CHECK(r.err.find("would overwrite") != std::string::npos);
  CHECK(slurp(graph) == before);
  CHECK(type_of(m.dir + "/g.json") == S_IFLNK);
}

TEST_CASE("extract -o a device writes through it, a full one is exit 74", "[outputs]") {
  MlpCopy m;
  std::string null_dev = "/dev/null", full_dev = "/dev/full";
  if (::geteuid() == 0) {
    null_dev = m.dir + "/null";
    full_dev = m.dir + "/full";
    bool made = ::mknod(null_dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0 &&
                ::mknod(full_dev.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0;
    int fd = made ? ::open(full_dev.c_str(), O_WRONLY | O_CLOEXEC) : -1;
    if (fd < 0) {
      WARN("SKIPPED: cannot make and open a private device node here (" << std::strerror(errno) << ")");
      return;
    }
    ::close(fd);
  }
  auto r = run_kdflow({"extract", m.model, "-q", "--format", "json", "-o", null_dev});
  CHECK(r.exit_code == 0);
  CHECK(type_of(null_dev) == S_IFCHR);
  r = run_kdflow({"extract", m.model, "-q", "--format", "json", "-o", full_dev});
  CHECK(r.exit_code == 74);
  CHECK(r.err == full_dev + ": error: cannot write: " + std::strerror(ENOSPC) + "\n");
  CHECK(type_of(full_dev) == S_IFCHR);
}

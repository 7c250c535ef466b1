// output.cpp — write_output (include/kdflow/io.h) on every kind of path it can be
// pointed at: regular files keep their permissions, symlinks stay links, FIFOs and devices
// are written in place, write errors are exit 74, and an interrupted write leaves nothing.
// These tests never point the code at the system's own /dev nodes while running as root:
// as root they make private device nodes with mknod in a temporary folder.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "kdflow/support/io.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace kdflow;

namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

bool is_link(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

mode_t type_of(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

/// A private character device like /dev/null (1,3) or /dev/full (1,7) in `dir`, usable for
/// writing; "" (with the reason in *why) when this machine does not allow one.
std::string private_device(const std::string& dir, unsigned minor, std::string* why) {
  std::string p = dir + (minor == 7 ? "/full" : "/null");
  if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, minor)) != 0) {
    *why = std::string("mknod: ") + std::strerror(errno);
    return "";
  }
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {  // a nodev mount
    *why = std::string("open of a private device node: ") + std::strerror(errno);
    return "";
  }
  ::close(fd);
  return p;
}

/// Runs `body` in a child process; returns its wait status.
template <class F>
int in_child(F body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

void raise_sigterm() { ::raise(SIGTERM); }
void raise_sigint() { ::raise(SIGINT); }
void watchdog_like_exit() {
  discard_pending_output();
  ::_exit(65);
}

}  // namespace

TEST_CASE("write_output keeps an existing file's permission bits", "[io][output]") {
  std::string dir = test::temp_dir();
  std::string path = dir + "/out.json";
  REQUIRE(write_output(path, "first"));
  REQUIRE(::chmod(path.c_str(), 0640) == 0);
  REQUIRE(write_output(path, "second"));
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(test::slurp(path) == "second");
  CHECK(names_in(dir) == std::set<std::string>{"out.json"});
}

TEST_CASE("write_output writes through a symlink, which stays a link", "[io][output]") {
  std::string dir = test::temp_dir();
  fs::create_directory(dir + "/real");
  REQUIRE(write_output(dir + "/real/target.json", "old"));
  REQUIRE(::chmod((dir + "/real/target.json").c_str(), 0600) == 0);
  // A relative link, and a link to that link.
  REQUIRE(::symlink("real/target.json", (dir + "/link.json").c_str()) == 0);
  REQUIRE(::symlink("link.json", (dir + "/link2.json").c_str()) == 0);
  REQUIRE(write_output(dir + "/link2.json", "new contents"));
  CHECK(is_link(dir + "/link.json"));
  CHECK(is_link(dir + "/link2.json"));
  CHECK(test::slurp(dir + "/real/target.json") == "new contents");
  struct stat st;
  REQUIRE(::stat((dir + "/real/target.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  // The temporary file lived beside the target, and is gone.
  CHECK(names_in(dir + "/real") == std::set<std::string>{"target.json"});
  CHECK(names_in(dir) == std::set<std::string>{"real", "link.json", "link2.json"});

  // A dangling link: its target is created, the link kept.
  REQUIRE(::symlink((dir + "/real/new.json").c_str(), (dir + "/dangling.json").c_str()) == 0);
  REQUIRE(write_output(dir + "/dangling.json", "made"));
  CHECK(is_link(dir + "/dangling.json"));
  CHECK(test::slurp(dir + "/real/new.json") == "made");

  // A loop is an error that creates nothing.
  REQUIRE(::symlink("loop_b", (dir + "/loop_a").c_str()) == 0);
  REQUIRE(::symlink("loop_a", (dir + "/loop_b").c_str()) == 0);
  auto s = write_output(dir + "/loop_a", "x");
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::CantCreate);
  CHECK(is_link(dir + "/loop_a"));
}

TEST_CASE("write_output writes a FIFO in place: its reader gets everything", "[io][output]") {
  std::string dir = test::temp_dir();
  std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // More than a pipe holds, so the writer must stream into the reader.
  std::string content(1 << 20, 'x');
  for (size_t i = 0; i < content.size(); i += 997) content[i] = static_cast<char>('a' + i % 26);
  std::string got;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
  });
  Status s = write_output(fifo, content);
  reader.join();
  REQUIRE(s);
  CHECK(got == content);
  CHECK(type_of(fifo) == S_IFIFO);
  CHECK(names_in(dir) == std::set<std::string>{"pipe"});
}

TEST_CASE("write_output writes devices in place and reports a full device as exit 74", "[io][output]") {
  std::string dir = test::temp_dir();
  std::string null_dev, full_dev, why;
  if (::geteuid() == 0) {
    // Root could replace the system's nodes if the code regressed: use private ones.
    null_dev = private_device(dir, 3, &why);
    if (!null_dev.empty()) full_dev = private_device(dir, 7, &why);
  } else {
    null_dev = "/dev/null";  // an ordinary user cannot replace these
    full_dev = "/dev/full";
  }
  if (null_dev.empty() || full_dev.empty()) {
    WARN("SKIPPED: no usable device node for this test (" << why << ")");
    return;
  }
  REQUIRE(write_output(null_dev, "discarded"));
  CHECK(type_of(null_dev) == S_IFCHR);
  auto s = write_output(full_dev, std::string(100000, 'x'));
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::IoError);
  CHECK(s.error().message == full_dev + ": error: cannot write: " + std::strerror(ENOSPC));
  CHECK(type_of(full_dev) == S_IFCHR);
  if (::geteuid() == 0) CHECK(names_in(dir) == std::set<std::string>{"null", "full"});
}

TEST_CASE("write_output refuses a directory and a socket, creating nothing", "[io][output]") {
  std::string dir = test::temp_dir();
  fs::create_directory(dir + "/d");
  auto s = write_output(dir + "/d", "x");
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::CantCreate);
  CHECK(s.error().message == dir + "/d: error: cannot write: is a directory");

  std::string sock_path = dir + "/s";
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (sock_path.size() < sizeof addr.sun_path) {
    std::strcpy(addr.sun_path, sock_path.c_str());
    REQUIRE(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    s = write_output(sock_path, "x");
    REQUIRE_FALSE(s);
    CHECK(s.error().message == sock_path + ": error: cannot write: is a socket");
    CHECK(type_of(sock_path) == S_IFSOCK);
  }
  ::close(sock);
  CHECK(names_in(dir).size() == (sock_path.size() < sizeof addr.sun_path ? 2u : 1u));
}

TEST_CASE("a write that fails midway is exit 74 and leaves no temporary file", "[io][output]") {
  std::string dir = test::temp_dir();
  std::string path = dir + "/out.json";
  REQUIRE(write_output(path, "original"));
  // A file-size limit makes write() fail with EFBIG part way through (SIGXFSZ ignored).
  int status = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    Status s = write_output(path, std::string(1 << 20, 'y'));
    ::_exit(s ? 0 : static_cast<int>(s.error().code));
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == static_cast<int>(ExitCode::IoError));
  CHECK(names_in(dir) == std::set<std::string>{"out.json"});
  CHECK(test::slurp(path) == "original");
}

TEST_CASE("SIGTERM, SIGINT or the watchdog during a write leave no temporary file", "[io][output]") {
  std::string dir = test::temp_dir();
  std::string path = dir + "/out.json";
  REQUIRE(write_output(path, "original"));
  struct sigaction before {};
  REQUIRE(::sigaction(SIGTERM, nullptr, &before) == 0);
  struct Case {
    void (*hook)();
    int signal;  // 0: exits 65
  };
  for (Case c : {Case{raise_sigterm, SIGTERM}, Case{raise_sigint, SIGINT}, Case{watchdog_like_exit, 0}}) {
    int status = in_child([&] {
      set_output_test_hook(c.hook);
      (void)write_output(path, std::string(1 << 16, 'z'));
      ::_exit(0);  // not reached: the hook ends the process
    });
    if (c.signal) {
      REQUIRE(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == c.signal);
    } else {
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 65);
    }
    CHECK(names_in(dir) == std::set<std::string>{"out.json"});
    CHECK(test::slurp(path) == "original");
  }
  // The handlers are only in place during a write: afterwards the old ones are back.
  REQUIRE(write_output(path, "again"));
  struct sigaction now {};
  REQUIRE(::sigaction(SIGTERM, nullptr, &now) == 0);
  CHECK(now.sa_handler == before.sa_handler);
}

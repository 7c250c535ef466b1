// locate.h — the locate pass's child process (engine.cpp's replay()): a fault outside a
// checked run is located by re-running synchronised in a process forked before the back end
// was opened. Internal to lib/replay.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>

namespace kdflow::engine_detail {

/// The locate pass's process: forked before the parent's back end is opened (so it never
/// inherits a device context, which a forked child may not use), it waits for the parent's
/// word. -1 or a closed pipe: nothing to locate, exit. Otherwise it re-runs the model in its
/// own back end, synchronised after every step, and writes what it found back.
class LocateHelper {
 public:
  /// What the child found (read by the parent).
  struct Found {
    bool answered = false;       ///< the child wrote an answer
    int launch = -1, call = -1, run = -1;
    std::string fault;           ///< the located fault's text
    std::string error;           ///< the re-run failed otherwise: its message
    int error_code = 0;
    std::string log;             ///< the child's progress lines
    std::string how_it_ended;    ///< "exit 0", "signal 11"
  };

  using Body = std::function<void(int failed_run, std::ostream& log, Found* out)>;

  bool start(const Body& body) {
    int down[2], up[2];
    if (::pipe(down) != 0) return false;
    if (::pipe(up) != 0) {
      ::close(down[0]), ::close(down[1]);
      return false;
    }
    pid_ = ::fork();
    if (pid_ < 0) {
      for (int fd : {down[0], down[1], up[0], up[1]}) ::close(fd);
      return false;
    }
    if (pid_ == 0) {
      ::close(down[1]);
      ::close(up[0]);
      int failed_run = -1;
      if (!read_all(down[0], &failed_run, sizeof failed_run) || failed_run < 0) ::_exit(0);
      std::ostringstream log;
      Found f;
      body(failed_run, log, &f);
      f.log = log.str();
      std::string msg = encode(f);
      write_all(up[1], msg.data(), msg.size());
      // No destructors, no atexit handlers: this process may hold a poisoned context.
      ::_exit(0);
    }
    ::close(down[0]);
    ::close(up[1]);
    down_ = down[1];
    up_ = up[0];
    return true;
  }

  /// Asks the child to locate a failure of run `failed_run` and waits for its answer.
  Found locate(int failed_run) {
    Found f;
    if (pid_ <= 0) return f;
    write_all(down_, &failed_run, sizeof failed_run);
    ::close(down_);
    down_ = -1;
    std::string data;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(up_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    ::close(up_);
    up_ = -1;
    f.how_it_ended = reap();
    if (!data.empty()) decode(data, &f);
    return f;
  }

  ~LocateHelper() {
    if (pid_ <= 0) return;
    int none = -1;
    if (down_ >= 0) {
      write_all(down_, &none, sizeof none);
      ::close(down_);
    }
    if (up_ >= 0) ::close(up_);
    reap();
  }

 private:
  static bool read_all(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = ::read(fd, c, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      c += r, n -= static_cast<size_t>(r);
    }
    return true;
  }
  static void write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t r = ::write(fd, c, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return;
      c += r, n -= static_cast<size_t>(r);
    }
  }
  std::string reap() {
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, 0);
    while (r < 0 && errno == EINTR);
    pid_ = -1;
    if (r < 0) return "unknown";
    if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
    return fmt::format("exit {}", WEXITSTATUS(status));
  }
  static void put(std::string& out, const std::string& s) {
    uint64_t n = s.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += s;
  }
  static bool get(const std::string& in, size_t* pos, std::string* s) {
    uint64_t n = 0;
    if (*pos + sizeof n > in.size()) return false;
    std::memcpy(&n, in.data() + *pos, sizeof n);
    *pos += sizeof n;
    if (n > in.size() - *pos) return false;
    *s = in.substr(*pos, n);
    *pos += n;
    return true;
  }
  static std::string encode(const Found& f) {
    std::string out;
    for (const std::string& s : {std::to_string(f.launch), std::to_string(f.call), std::to_string(f.run), f.fault,
                                 f.error, std::to_string(f.error_code), f.log})
      put(out, s);
    return out;
  }
  static void decode(const std::string& in, Found* f) {
    std::string v[7];
    size_t pos = 0;
    for (std::string& s : v)
      if (!get(in, &pos, &s)) return;
    f->launch = std::stoi(v[0]);
    f->call = std::stoi(v[1]);
    f->run = std::stoi(v[2]);
    f->fault = v[3];
    f->error = v[4];
    f->error_code = std::stoi(v[5]);
    f->log = v[6];
    f->answered = true;
  }

  pid_t pid_ = -1;
  int down_ = -1, up_ = -1;
};

}  // namespace kdflow::engine_detail

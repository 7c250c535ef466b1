// watchdog.cpp — see watchdog.h.
#include "kdflow/driver/watchdog.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "kdflow/support/diag.h"
#include "kdflow/support/io.h"

namespace kdflow {

uint64_t resident_bytes() {
  // /proc/self/statm: size resident shared text lib data dt, in pages. Read with plain
  // syscalls: this runs on the watchdog thread while the main one may be deep in clang.
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  long page = ::sysconf(_SC_PAGESIZE);
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(page > 0 ? page : 4096);
}

Watchdog::Watchdog(const WatchdogLimits& limits, std::string what) {
  const bool timed = limits.seconds > 0 && std::isfinite(limits.seconds);
  const bool sized = limits.memory_mib > 0;
  if (!timed && !sized) return;
  thread_ = std::thread([this, limits, timed, sized, what = std::move(what)] {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const uint64_t cap = limits.memory_mib * (uint64_t(1) << 20);
    std::string msg;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return done_; })) return;
      if (timed && std::chrono::duration<double>(Clock::now() - start).count() > limits.seconds) {
        msg = fmt::format("gave up after {:g} s (--time-limit)", limits.seconds);
        break;
      }
      if (sized && resident_bytes() > cap) {
        msg = fmt::format("gave up at {} MiB of memory (--memory-limit)", limits.memory_mib);
        break;
      }
    }
    // The analysis may be inside clang, which cannot be stopped: end the process.
    msg = fmt::format("{}: error: {}: the input costs more than any TVM build should (a hostile or broken file?); "
                      "raise the limit for a model that needs more\n",
                      what, msg);
    ssize_t ignored = ::write(STDERR_FILENO, msg.data(), msg.size());
    (void)ignored;
    discard_pending_output();  // an output being written when the limit fell leaves nothing behind
    ::_exit(static_cast<int>(ExitCode::DataError));
  });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace kdflow

// kernel_watchdog.cpp — see kernel_watchdog.h.
#include "kernel_watchdog.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

#include "kdflow/support/io.h"

namespace kdflow::cpu {

KernelWatchdog::KernelWatchdog(double limit_s) : limit_s_(limit_s > 0 && std::isfinite(limit_s) ? limit_s : 0) {
  if (limit_s_ > 0) thread_ = std::thread([this] { watch(); });
}

KernelWatchdog::~KernelWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void KernelWatchdog::start(std::string what, std::function<std::string()> running) {
  if (limit_s_ <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = std::move(what);
    running_ = std::move(running);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit_s_));
    armed_ = true;
    ++generation_;
  }
  cv_.notify_all();
}

void KernelWatchdog::stop() {
  if (limit_s_ <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
  ++generation_;
}

void KernelWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (quit_) return;
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    const uint64_t gen = generation_;
    const auto deadline = deadline_;
    if (cv_.wait_until(lock, deadline, [&] { return quit_ || generation_ != gen; })) continue;
    // The launch is still the one that started before the deadline: end the process.
    std::string still = running_ ? running_() : std::string();
    std::string line = fmt::format(
        "{} did not finish within {:g} s (--time-limit){}: a kernel that spins, or waits for what no thread will do; "
        "stopped\n",
        what_, limit_s_, still.empty() ? "" : "; still running: " + still);
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    discard_pending_output();
    ::_exit(kTimeLimitExit);
  }
}

}  // namespace kdflow::cpu

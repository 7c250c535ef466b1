// kernel_watchdog.h — the time limit on the CPU back end's launches. A kernel compiled for
// the host runs on the back end's worker threads until it returns; one that never does (a
// spin on a flag no thread sets, a loop whose bound is garbage) cannot be interrupted from
// outside without leaving those threads, their fibers and locks in an unknown state. So the
// watchdog, a thread waiting on a condition variable with the launch's deadline, ends the
// process when the deadline passes: one line on stderr naming the launch, the blocks still
// running and the limit, any output being written discarded (support/io.h), _exit(65).
// Every thread and fiber ends with the process; nothing is left in the working folder.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace kdflow::cpu {

/// Exit status when a launch passes its limit (docs/errors.md: 65, the input's defect).
inline constexpr int kTimeLimitExit = 65;

class KernelWatchdog {
 public:
  /// `limit_s` ≤ 0: no limit (start/stop do nothing, no thread).
  explicit KernelWatchdog(double limit_s);
  ~KernelWatchdog();
  KernelWatchdog(const KernelWatchdog&) = delete;
  KernelWatchdog& operator=(const KernelWatchdog&) = delete;

  /// A launch starts. `what`: the start of the line ("LABEL: error: kernel K 'NAME' (launch L)");
  /// `running`: called on the watchdog's thread when the limit passes, says what still runs
  /// (it may read only atomics).
  void start(std::string what, std::function<std::string()> running);
  /// The launch returned.
  void stop();
  double limit() const { return limit_s_; }

 private:
  void watch();
  double limit_s_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  bool armed_ = false;
  uint64_t generation_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  std::function<std::string()> running_;
};

}  // namespace kdflow::cpu

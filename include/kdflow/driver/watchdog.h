// watchdog.h — last-resort limits on a whole command's wall time and memory. The host-C
// interpreter bounds its own work, and parsing is preceded by a token budget; but clang
// itself has no limit on what a hostile file can make it do (templates in device.cu,
// nested macro arguments), and it cannot be interrupted. The watchdog, a thread polling
// the clock and the resident set, ends the process instead: one line on stderr, exit 65.
// Outputs are renamed into place only when complete, so no half file is left behind (at
// worst an unrenamed `.NAME.tmp.XXXXXX` if a limit is hit during the final write).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace kdflow {

struct WatchdogLimits {
  double seconds = 600;        ///< wall time; 0: none
  uint64_t memory_mib = 8192;  ///< resident set (Linux /proc/self/statm); 0: none
};

class Watchdog {
 public:
  /// Starts watching. `what` names the command in the message ("kdflow extract").
  Watchdog(const WatchdogLimits& limits, std::string what);
  /// Disarms it.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// Resident set size of this process in bytes (0 when unknown).
uint64_t resident_bytes();

}  // namespace kdflow

// launch_limits.h — the launches CUDA would refuse (issue 51): grid and block dimensions, threads
// per block and dynamic shared memory against the limits every current NVIDIA GPU shares. A pure
// function of one kernel launch of the IR; extract refuses such a flow (exit 65, as a launch proven
// out of bounds), and replay's plan refuses it before any driver call.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "kdflow/ir/dataflow.h"

namespace kdflow {

/// CUDA's launch limits (compute capability 7.0 to 10.x alike).
struct LaunchLimits {
  std::array<int64_t, 3> max_grid{2147483647, 65535, 65535};
  std::array<int64_t, 3> max_block{1024, 1024, 64};
  int64_t max_threads = 1024;
  int64_t max_shared_memory = 227 * 1024;  ///< opt-in maximum per block on sm_80/sm_90
  uint32_t max_param_bytes = 4096;         ///< cuLaunchKernel's classic parameter limit
};

/// What makes a launch one CUDA refuses: the field of the kernel ("grid", "block",
/// "dynamic_shared_memory") and one line ("block (4, 1, 128) of K: dimension z must be 1..64").
struct LaunchLimitViolation {
  std::string field;
  std::string message;
};

/// The first limit kernel launch `k` breaks, or nullopt when CUDA would launch it.
std::optional<LaunchLimitViolation> launch_limit_violation(const Kernel& k, const LaunchLimits& limits = {});

/// One line naming the launch for a user to act on (or file upstream): "kernel 12 (NAME) of node 3
/// (FUNC), launched from host.c:120: block (4, 1, 128) of NAME: dimension z must be 1..64: CUDA
/// refuses this launch".
std::string launch_limit_report(const Dataflow& df, const Kernel& k, const LaunchLimitViolation& v);

}  // namespace kdflow

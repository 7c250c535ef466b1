// launch_limits.cpp — the launches CUDA would refuse (launch_limits.h).
#include "kdflow/analysis/launch_limits.h"

#include <fmt/format.h>

namespace kdflow {
namespace {

std::string dims(const std::array<int64_t, 3>& d) { return fmt::format("({}, {}, {})", d[0], d[1], d[2]); }

}  // namespace

std::optional<LaunchLimitViolation> launch_limit_violation(const Kernel& k, const LaunchLimits& lim) {
  int64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (k.grid[d] < 1 || k.grid[d] > lim.max_grid[d])
      return LaunchLimitViolation{"grid", fmt::format("grid {} of {}: dimension {} must be 1..{}", dims(k.grid), k.name,
                                                      "xyz"[d], lim.max_grid[d])};
    if (k.block[d] < 1 || k.block[d] > lim.max_block[d])
      return LaunchLimitViolation{"block", fmt::format("block {} of {}: dimension {} must be 1..{}", dims(k.block),
                                                       k.name, "xyz"[d], lim.max_block[d])};
    threads *= k.block[d];
  }
  if (threads > lim.max_threads)
    return LaunchLimitViolation{"block", fmt::format("block {} of {} has {} threads, more than {}", dims(k.block),
                                                     k.name, threads, lim.max_threads)};
  if (k.dynamic_shared_memory < 0 || k.dynamic_shared_memory > lim.max_shared_memory)
    return LaunchLimitViolation{"dynamic_shared_memory",
                                fmt::format("{} bytes of dynamic shared memory for {}: must be 0..{}",
                                            k.dynamic_shared_memory, k.name, lim.max_shared_memory)};
  return std::nullopt;
}

std::string launch_limit_report(const Dataflow& df, const Kernel& k, const LaunchLimitViolation& v) {
  std::string node;
  if (k.node >= 0) node = fmt::format(" of node {}", k.node);
  if (!k.function.empty()) node += fmt::format(" ({})", k.function);
  std::string where;
  if (!k.loc.file.empty()) where = fmt::format(", launched from {}:{}", k.loc.file, k.loc.line);
  return fmt::format("kernel {} ({}){}{}: {}: CUDA refuses this launch", k.id, k.name, node, where, v.message);
}

}  // namespace kdflow

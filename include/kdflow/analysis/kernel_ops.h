// kernel_ops.h — the floating-point operations a kernel executes, counted from its own code
// (issue 21), in the two stages of the footprint analysis (footprint.h): the clang stage
// (lib/frontend/clang/kernel_ops.cpp) finds every floating-point operation of a __global__ kernel and
// the domain it runs under (loop bounds, guards) in the footprints' affine model; this stage
// counts the points of each domain for one launch (grid, block, scalar arguments). Exact
// where the domain is affine and countable, an upper bound where a guard was dropped, else
// unknown with a typed reason: never a guess. Only plain integers cross this header.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/analysis/footprint.h"

namespace kdflow {

/// Operations of one kind and precision per execution of a domain (counts[kind][precision]).
using OpTable = std::array<std::array<uint64_t, KernelOps::kPrecisions>, KernelOps::kKinds>;

/// The operations that run under one domain (per point of it: once per thread and loop trip).
struct OpGroup {
  AffCond domain;        ///< over KernelOpModel::vars; launch bounds are added when counting
  bool exact = true;     ///< false: a guard was dropped or an early exit precedes: the domain is a superset
  std::string unknown;   ///< non-empty: not countable (a loop without affine bounds, ...), why
  OpTable per_point{};   ///< operations per point of the domain
  uint64_t reduction_per_point = 0;  ///< of per_point's add/sub, those of a cross-thread reduction tree
};

/// Global memory accessed under one domain: `size` bytes loaded (read) and/or stored (write) per point.
struct AccessGroup {
  AffCond domain;
  bool exact = true;
  int64_t size = 0;
  bool read = false, write = false;
};

/// A block barrier (__syncthreads()) and the domain it runs under: one execution per point.
struct BarrierSite {
  AffCond domain;
  std::string unknown;  ///< non-empty: its domain is not countable (the barrier is not counted)
};

/// What the clang stage found for one kernel.
struct KernelOpModel {
  std::string name;
  std::vector<AffVar> vars;          ///< the affine model's variables (the footprint model's)
  std::vector<OpGroup> groups;       ///< one per distinct domain, in source order of first use
  std::vector<std::string> unknown;  ///< operations that cannot be counted at all (a call not followed, ...)
  std::vector<AccessGroup> accesses; ///< every access through a pointer parameter (footprint model)
  std::vector<BarrierSite> barriers; ///< each __syncthreads() call, with its domain
  std::string access_unknown;        ///< non-empty: some parameter's accesses are not modelled (its reject reason)
};

/// Reasons a count is not exact (KernelOps::reasons), besides the footprint rejects.
namespace ops_reason {
inline constexpr const char* kGuardDropped = "data-dependent guard (counted as taken)";
inline constexpr const char* kTooCostly = "too costly to count";
inline constexpr const char* kUnbounded = "domain not bounded";
}  // namespace ops_reason

/// The operations of one launch. Budget: `max_steps` enumeration steps per launch.
inline constexpr uint64_t kMaxCountSteps = 4'000'000;
KernelOps count_kernel_ops(const KernelOpModel& model, const LaunchShape& launch, uint64_t max_steps = kMaxCountSteps);

/// The points of `domain` (over `vars`) within the launch, or nullopt with `why`.
std::optional<uint64_t> count_domain_points(const AffCond& domain, const std::vector<AffVar>& vars,
                                            const LaunchShape& launch, uint64_t max_steps, std::string* why);

/// Sets Kernel::ops of every launch whose device function has a model (`models` indexed
/// like df.device_functions; an empty name: none). Each distinct launch (kernel, grid,
/// block, scalars) is counted once, on up to `jobs` threads; the result does not depend on
/// `jobs`. `launch_models` (optional, indexed like df.kernels): a launch's own model (made
/// with its scalar arguments) where not null, instead of its function's.
void attach_kernel_ops(Dataflow& df, const std::vector<KernelOpModel>& models, int jobs = 1,
                       const std::vector<const KernelOpModel*>* launch_models = nullptr);

}  // namespace kdflow

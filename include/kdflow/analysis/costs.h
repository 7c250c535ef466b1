// costs.h — the work each Relay op, fused function and kernel does (FLOPs, minimum bytes),
// the roofline bound on a device from a table of public peak figures, and measured times
// joined to them. Computed over the IR alone (the relay_ops with their types and attributes,
// the buffers, the kernels); never reads files, never prints. docs/costs.md has the formulas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/analysis/time_model.h"
#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// A device's public peak figures (docs/costs.md names the source of each).
struct DeviceSpec {
  std::string id;                  ///< "h100" (what --device takes)
  std::string name;                ///< "NVIDIA H100 SXM5 80GB"
  double fp32_tflops = 0;          ///< peak FP32 (non-tensor), dense
  double fp16_tensor_tflops = 0;   ///< peak FP16/BF16 tensor core with FP32 accumulate, dense (no sparsity)
  double dram_gbps = 0;            ///< DRAM bandwidth, GB/s (10^9 bytes)
  std::string source;              ///< where the figures come from
};
/// Every device kdflow knows, in a fixed order.
const std::vector<DeviceSpec>& device_specs();
/// The device with this id (case-insensitive), or nullptr.
const DeviceSpec* find_device_spec(const std::string& id);

/// The work of one Relay operator, from its types and attributes.
struct OpWork {
  std::string op;                  ///< Relay operator name
  std::optional<uint64_t> flops;   ///< nullopt: no formula (see `reason`)
  std::optional<uint64_t> bytes;   ///< minimum bytes: every input read once, the output written once
  bool tensor_core = false;        ///< a matrix op in fp16/bf16: bounded by the tensor-core peak
  std::string formula;             ///< the formula's name ("conv2d", "elementwise", ...) as in docs/costs.md
  std::string reason;              ///< why flops is nullopt ("no formula for topk", "shape not static")
};
OpWork op_work(const RelayOp& op);

/// A roofline bound: the least time the work can take on a device.
struct Bound {
  double compute_us = 0;  ///< FLOPs / peak (each op at the peak that applies to it)
  double memory_us = 0;   ///< bytes / DRAM bandwidth
  double us() const { return compute_us > memory_us ? compute_us : memory_us; }
  const char* limiter() const { return compute_us > memory_us ? "compute" : "memory"; }
};

/// A measured time for a function or kernel: median over runs, in microseconds.
struct Measured {
  double us = 0;
  std::string source;  ///< "replay timing (file)", "Nsight Compute (file)", ...
};

/// FLOPs counted from the kernels' code (kernel_ops.h) for a kernel or a function.
struct CountedFlops {
  std::optional<uint64_t> flops;     ///< nullopt: not countable (see reasons)
  uint64_t low_precision_flops = 0;  ///< of those, fp16/bf16 (bounded by the FP16 tensor peak: nothing is faster)
  uint64_t reduction_flops = 0;      ///< of those, adds of cross-thread reduction trees (KernelOps::reduction_flops)
  std::string status;                ///< "exact", "upper bound", "unknown"
  std::vector<std::string> reasons;  ///< why not exact
};

/// One fused function (a graph node) with its work.
struct FunctionCost {
  int node = -1;
  std::vector<OpWork> ops;               ///< per Relay op, in order
  std::optional<uint64_t> flops;         ///< sum over ops; nullopt when any op has no formula or there are no ops
  uint64_t flops_known = 0;              ///< sum over the ops that have a formula
  std::vector<std::string> no_formula;   ///< ops without a formula (with the reason)
  uint64_t bytes = 0;                    ///< the node's distinct input and output buffers, read/written once
  std::optional<Bound> bound;            ///< with a device; from `flops`, else from the counted FLOPs; nullopt without either
  std::string bound_source;              ///< "formula" or "counted" (the FLOPs the bound uses)
  std::optional<CountedFlops> counted;   ///< Σ over its kernels' counted FLOPs; nullopt when no kernel was analyzed
  std::optional<Measured> measured;      ///< Σ of its kernels' measured times, when all were measured
  /// With a device the time model knows: Σ of its kernels' predictions and its cuBLAS GEMMs' (time_model.h);
  /// nullopt when one of them has none.
  std::optional<double> predicted_us;
  std::string predicted_source;          ///< "code" (kernels only), "code and GEMM shape", "GEMM shape"
};

/// One kernel launch with its work.
struct KernelCost {
  int kernel = -1;
  std::optional<uint64_t> flops;   ///< the function's FLOPs when it launches this kernel alone; else nullopt
  std::string flops_note;          ///< why flops is nullopt
  uint64_t bytes = 0;              ///< bytes its arguments touch, read and written (a buffer both read and written counts twice)
  std::string bytes_source;        ///< "footprints" (static footprints, bounds.h), "buffers" (whole buffers), or "footprints and buffers"
  std::optional<CountedFlops> counted;  ///< counted from its code (Kernel::ops), when device.cu was analyzed
  std::optional<Bound> bound;      ///< from `flops`, else from the counted FLOPs
  std::string bound_source;        ///< "formula" or "counted"
  std::optional<Measured> measured;
  std::optional<KernelPrediction> predicted;  ///< time from code on the device (time_model.h)
  std::string predicted_note;                 ///< why predicted is nullopt
};

struct CostReport {
  std::string device;                    ///< DeviceSpec::id, "" for none
  std::vector<FunctionCost> functions;   ///< one per tvm_op node that launches work, in node order
  std::vector<KernelCost> kernels;       ///< one per kernel, in launch order
};

/// Measured kernel times by kernel id (median µs; nullopt where not measured).
struct KernelTimes {
  std::vector<std::optional<double>> us;  ///< indexed by kernel id
  std::string source;
};

/// Reads `kdflow replay --timing-json` output (schema "kdflow-replay-timing/1"): each
/// kernel's median time. Every kernel it names must be the flow's kernel of that id and
/// name (a timing file of another model is an error). `file` labels diagnostics.
Expected<KernelTimes> read_replay_timing(const std::string& text, const std::string& file, const Dataflow& df);

/// Median profiled duration per graph kernel from a profile joined to the flow
/// (profile_csv.h); kernels without a duration stay unmeasured.
struct Profile;
struct ProfileJoin;
KernelTimes profile_times(const Dataflow& df, const Profile& profile, const ProfileJoin& join);

/// Computes the work of every function and kernel; with a device, the bounds; with
/// times, the measured column.
/// With `arch` (a measured device profile), the predictions use it instead of `device`'s built-in
/// constants (time_model.h).
CostReport compute_costs(const Dataflow& df, const DeviceSpec* device, const KernelTimes* times,
                         const GpuArch* arch = nullptr);

/// The ratio counted / formula FLOPs of a function, the counted FLOPs taken without the adds of
/// cross-thread reduction trees (which only the schedule adds: each lane executes the tree);
/// nullopt unless both are known and the formula's is not 0.
std::optional<double> counted_ratio(const FunctionCost& f);

/// Arithmetic intensity (FLOPs per byte); nullopt without FLOPs or bytes.
std::optional<double> intensity(std::optional<uint64_t> flops, uint64_t bytes);

}  // namespace kdflow

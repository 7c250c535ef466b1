// time_model.h — a kernel's GPU time predicted from its code and launch, without a GPU (issue 50).
// A stage of its own over the IR: its inputs are the launch (grid, block, dynamic shared memory),
// the operations and global-memory accesses counted from the kernel's code (Kernel::ops,
// kernel_ops.h) and its static footprints (bounds.h), and a GPU's constants (GpuArch: datasheet
// figures and published microbenchmark latencies; a measured profile replaces them). Pure
// functions: never reads files, never prints. docs/costs.md "Time from code" has the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// A GPU's constants for the time model. Datasheet figures (SMs, clock, bandwidth, per-SM limits)
/// and latencies from published microbenchmarks; never fitted to the models kdflow checks against.
struct GpuArch {
  std::string id;                 ///< "h200" (what --device takes)
  int sms = 0;                    ///< streaming multiprocessors
  double clock_ghz = 0;           ///< boost clock
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int64_t shared_per_sm = 0;      ///< bytes of shared memory an SM can give its blocks
  int schedulers_per_sm = 4;      ///< warp instructions issued per cycle per SM
  double dram_gbps = 0;           ///< DRAM bandwidth, 10^9 bytes/s
  double l2_gbps = 0;             ///< L2 bandwidth, 10^9 bytes/s
  double l2_latency_cycles = 0;   ///< a global load that hits L2
  double alu_latency_cycles = 4;  ///< a dependent FP32 add, multiply or FMA
  double launch_us = 0;           ///< a launch's floor: an empty kernel, timed as replay times one
  std::string source;             ///< where the figures come from
};
/// A device profile (schema "kdflow-gpu-profile/1", what `kdflow calibrate` writes): the GpuArch
/// fields by name, `measurements` (what was measured, by name; kept as text) beside them.
std::string gpu_profile_json(const GpuArch& arch, const std::vector<std::pair<std::string, double>>& measurements);
/// Reads one; `file` names it in the one-line error (a missing or out-of-range field, JSON pointer).
Expected<GpuArch> parse_gpu_profile(const std::string& text, const std::string& file);

/// Every GPU the model knows (h100, h200, a100, l4), in a fixed order.
const std::vector<GpuArch>& gpu_archs();
/// The GPU with this id (case-insensitive), or nullptr.
const GpuArch* find_gpu_arch(const std::string& id);

/// What the model found for one launch, and why (each term, so a reader can see the limiter).
struct KernelPrediction {
  double us = 0;                 ///< the prediction: launch floor + the largest of the terms below
  /// "code": from the operations and accesses counted from its code; "floor": they could not be
  /// counted, so the launch floor and its bytes from DRAM only (a lower bound; `why` says why).
  std::string source;
  std::string limiter;           ///< "latency", "issue", "dram", "l2" or "launch"
  int blocks_per_sm = 0;         ///< resident blocks per SM (threads, blocks and shared memory limits)
  std::string occupancy_limit;   ///< "threads", "blocks" or "shared memory"
  int64_t waves = 0;             ///< the grid's blocks over (SMs x blocks_per_sm), rounded up
  double threads_per_warp = 0;   ///< the block's threads per warp it occupies (32: full warps)
  double ops_per_thread = 0;     ///< arithmetic operations one thread executes, on average
  double loads_per_thread = 0;   ///< global loads (4-byte words) one thread executes, on average
  double barriers_per_thread = 0;  ///< __syncthreads() one thread executes, on average
  double exposed_rounds = 0;     ///< rounds of loads a thread waits for at L2's latency (unrolled, barriers)
  double latency_us = 0;         ///< waves x one thread's dependent chain (loads at L2 latency, ops at ALU latency)
  double issue_us = 0;           ///< waves x the warp instructions a wave issues on one SM / its schedulers
  double dram_us = 0;            ///< distinct bytes (footprints) / DRAM bandwidth
  double l2_us = 0;              ///< accessed bytes, in 32-byte sectors per warp access / L2 bandwidth
};

/// The predicted time of kernel launch `k` on `arch`. Where its operations were not counted from the
/// code (no device.cu, or what the counter does not model) a lower bound, source "floor", and `why`
/// says so; nullopt only for an empty launch.
std::optional<KernelPrediction> predict_kernel(const Dataflow& df, const Kernel& k, const GpuArch& arch,
                                               std::string* why = nullptr);

/// A cuBLAS GEMM from its shape: the launch floor + 2·m·n·k / (the FP32 peak at the efficiency a
/// tuned GEMM reaches) or its bytes / DRAM bandwidth, whichever is larger. `fp32_tflops` from
/// DeviceSpec (costs.h).
double predict_gemm_us(double flops, double bytes, double fp32_tflops, const GpuArch& arch);

}  // namespace kdflow

// calibrate.h — `kdflow calibrate`: measures a GPU's constants for the time model
// (analysis/time_model.h) with microbenchmarks on the CUDA driver API, loaded at run time as
// replay loads it: the launch floor (an empty kernel), L2's hit latency (a pointer chase with L1
// bypassed), the ALU's latency (a chain of FMAs), DRAM and L2 bandwidth (copies larger and
// smaller than L2), and the per-SM limits the driver reports. docs/costs.md "Calibration".
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kdflow/analysis/time_model.h"
#include "kdflow/support/diag.h"

namespace kdflow {

struct CalibrateOptions {
  std::string cuda_library;  ///< empty: $KDFLOW_CUDA_LIBRARY, else libcuda.so.1
  int device = 0;            ///< CUDA device ordinal
  int repeat = 21;           ///< timed launches per microbenchmark (the median is kept)
  std::string id;            ///< the profile's id; empty: from the device's name (h200, h100, a100, l4, else the name)
};

struct Calibration {
  GpuArch arch;
  std::string device_name;  ///< what the driver calls it
  /// Each figure as measured (median µs of each microbenchmark, cycles from the SM's clock), by name.
  std::vector<std::pair<std::string, double>> measurements;
};

/// Runs the microbenchmarks. No driver or device: ExitCode::Unavailable; a failing call: one line
/// naming it. Progress lines go to `log` (may be null).
Expected<Calibration> calibrate_gpu(const CalibrateOptions& options, std::ostream* log);

}  // namespace kdflow

// calibrate_ptx.h — the microbenchmarks of `kdflow calibrate` as PTX text (calibrate_kernels.cu
// compiled once; the driver JIT-compiles it for the GPU). Private to kdflow_replay.
#pragma once

namespace kdflow::cuda {

/// kd_empty(), kd_chase(start, steps, out), kd_fma(out, steps, a, b), kd_copy(dst, src, n, passes).
const char* calibration_ptx();

}  // namespace kdflow::cuda

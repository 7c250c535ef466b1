// device_headers.h — in-memory stand-ins for what TVM's CUDA source needs from nvcc and
// the CUDA toolkit headers, so that clang parses device.cu in CUDA device mode with no
// CUDA install and never reads the real file system. Declarations only, never compiled.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "host_headers.h"  // kStubIncludeDir, kVirtualInputDir

namespace kdflow::detail {

/// The header force-included (-include) before device.cu, relative to kStubIncludeDir.
inline constexpr const char* kDevicePrelude = "kdflow_cuda_prelude.h";

/// (path relative to kStubIncludeDir, contents) for every device stand-in header:
/// the prelude, cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, mma.h, math_constants.h, ...
const std::vector<std::pair<std::string, std::string>>& device_stub_headers();

}  // namespace kdflow::detail

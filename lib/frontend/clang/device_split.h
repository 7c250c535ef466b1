// device_split.h — cuts TVM's device.cu into two sources clang can parse on two threads:
// the kernels are independent top-level definitions, so each half keeps its own kernels
// and every other top-level line (the preamble, macros, helper functions, whatever sits
// between kernels), with `#line` directives so every position is the original file's.
// Internal to the device analyzer; text only, never compiles anything.
#pragma once

#include <optional>
#include <string>

namespace kdflow::detail {

struct DeviceHalves {
  std::string first;   ///< the file up to the first kernel of the second half
  std::string second;  ///< every non-kernel line before that (under #line), then the rest
  size_t first_kernels = 0, second_kernels = 0;
};

/// The two halves, balanced by kernel bytes, or nullopt when the file is not cut safely:
/// fewer than two kernels, a kernel inside a preprocessor conditional, a directive other
/// than #pragma inside a kernel, a raw string literal, unbalanced braces, text after a
/// kernel's closing brace on its line.
std::optional<DeviceHalves> split_device_source(const std::string& source);

}  // namespace kdflow::detail

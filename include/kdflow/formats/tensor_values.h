// tensor_values.h — the integer values of a small tensor the host reads (a Relax VM builtin
// that turns data into shapes or branches: vm.builtin.tensor_to_shape, read_if_cond), from the
// raw little-endian bytes of a pool constant or an input file.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

/// At most this many values are read (a shape or a condition is a few).
inline constexpr uint64_t kMaxHostValues = 4096;

/// The elements of `bytes` as integers: signed or unsigned integers of 8 to 64 bits and bool;
/// `what` names the tensor in errors. Fails for floats, a size that is not a whole number of
/// elements, or more than kMaxHostValues elements.
Expected<std::vector<int64_t>> integer_values(const DType& dtype, std::string_view bytes, const std::string& what);

}  // namespace kdflow

// tensor_values.cpp — see kdflow/formats/tensor_values.h.
#include "kdflow/formats/tensor_values.h"

#include <fmt/format.h>

namespace kdflow {

Expected<std::vector<int64_t>> integer_values(const DType& dtype, std::string_view bytes, const std::string& what) {
  const bool is_bool = dtype.code == kDLUInt && dtype.bits == 1;
  const bool is_int = (dtype.code == kDLInt || dtype.code == kDLUInt) &&
                      (dtype.bits == 8 || dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64);
  if ((!is_bool && !is_int) || dtype.lanes != 1)
    return Error{fmt::format("{} is {}, not an integer tensor", what, dtype_to_string(dtype)), ExitCode::DataError};
  const size_t size = is_bool ? 1 : dtype.bits / 8;
  if (bytes.size() % size != 0)
    return Error{fmt::format("{}: {} bytes are not a whole number of {}", what, bytes.size(), dtype_to_string(dtype)),
                 ExitCode::DataError};
  if (bytes.size() / size > kMaxHostValues)
    return Error{fmt::format("{} has {} elements; kdflow reads at most {} values on the host", what,
                             bytes.size() / size, kMaxHostValues),
                 ExitCode::DataError};
  std::vector<int64_t> out;
  for (size_t i = 0; i < bytes.size(); i += size) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data() + i);
    uint64_t u = 0;
    for (size_t k = 0; k < size; ++k) u |= static_cast<uint64_t>(p[k]) << (8 * k);  // little-endian
    int64_t v = 0;
    if (dtype.code == kDLUInt || is_bool) {
      v = static_cast<int64_t>(u);
    } else {
      const unsigned shift = 64 - 8 * static_cast<unsigned>(size);
      v = static_cast<int64_t>(u << shift) >> shift;  // sign-extend
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace kdflow

// tvm_source_fixups.h — where clang and nvcc disagree on text TVM prints into every CUDA
// source of a kind, the in-memory copy clang parses is changed to nvcc's meaning (never the
// file). Columns after a change may move; lines do not, so diagnostics keep their lines.
#pragma once

#include <string>

namespace kdflow::detail {

/// TVM's half4 / nv_bfloat164 (src/backend/cuda/codegen/literal/cuda_half_t.h, every build
/// that vectorises half or bfloat16 by 4) has a default constructor that zeroes x, y, z, w.
/// nvcc accepts such a type in a `__shared__` array and runs no constructor for it (shared
/// memory has no dynamic initialisation); clang refuses the declaration ("initialization is
/// not supported for __shared__ variables"), and a constructor run per thread on the CPU
/// would zero what other threads wrote. A defaulted constructor is nvcc's meaning.
inline std::string tvm_source_fixups(std::string text) {
  static const std::string from = "half4_bfloat164() : x(T(0)), y(T(0)), z(T(0)), w(T(0)) {}";
  static const std::string to = "half4_bfloat164() = default;";
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace kdflow::detail

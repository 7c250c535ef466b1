// dtype.h — TVM/DLPack data types ("float32", "int64", "float16x4", "bool").
// Parses and prints type strings; knows nothing about graphs or kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kdflow {

/// DLPack type codes.
enum DLTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3, kDLBfloat = 4 };

struct DType {
  uint8_t code = kDLFloat;
  uint8_t bits = 32;
  uint16_t lanes = 1;
  bool operator==(const DType& o) const { return code == o.code && bits == o.bits && lanes == o.lanes; }
  bool operator!=(const DType& o) const { return !(*this == o); }
};

/// "float32" → {2,32,1}; "bool" → {1,1,1}; "int8x4" → {0,8,4}; "handle" → {3,64,1}.
/// nullopt for anything else (including bits 0 or > 1024, lanes 0).
std::optional<DType> parse_dtype(const std::string& s);

/// Inverse of parse_dtype ("float32", "uint1" is printed as "bool").
std::string dtype_to_string(DType t);

/// Bytes of one element, as TVM's graph executor counts them: ceil(bits*lanes/8).
uint64_t dtype_element_bytes(DType t);

}  // namespace kdflow

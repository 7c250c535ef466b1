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

/// A DLDataType as TVM wrote it, in kdflow's terms: DLPack 1.0's kDLBool (code 6, 8 bits: TVM
/// 0.26+ writes bool tensors and dtypes so) is bool, {kDLUInt, 1, lanes}, as older TVMs and
/// NumPy's "|b1" have it; anything else unchanged.
inline DType from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes) {
  if (code == 6 && bits == 8) return DType{kDLUInt, 1, lanes};
  return DType{code, bits, lanes};
}

/// "float32" → {2,32,1}; "bool" → {1,1,1}; "int8x4" → {0,8,4}; "handle" → {3,64,1}.
/// nullopt for anything else (including bits 0 or > 1024, lanes 0).
std::optional<DType> parse_dtype(const std::string& s);

/// Inverse of parse_dtype ("float32", "uint1" is printed as "bool").
std::string dtype_to_string(DType t);

/// Bytes of one element, as TVM's graph executor counts them: ceil(bits*lanes/8).
uint64_t dtype_element_bytes(DType t);

}  // namespace kdflow

// dtype.cpp — parsing and printing TVM/DLPack type strings.
#include "kdflow/support/dtype.h"

#include <cstring>

namespace kdflow {
namespace {

/// Parses a run of decimal digits (no sign, no leading zero unless "0") of at most
/// `max` from s[pos...]; advances pos. False when there are no digits or the value
/// exceeds `max`.
bool parse_decimal(const std::string& s, size_t* pos, uint64_t max, uint64_t* out) {
  size_t i = *pos;
  if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
  if (s[i] == '0' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') return false;
  uint64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    if (v > max) return false;
  }
  *pos = i;
  *out = v;
  return true;
}

struct Prefix {
  const char* text;
  uint8_t code;
};

// Longest prefixes first: "uint" before "int", "bfloat" before "float".
constexpr Prefix kPrefixes[] = {{"bfloat", kDLBfloat}, {"float", kDLFloat}, {"uint", kDLUInt}, {"int", kDLInt}};

}  // namespace

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "bool") return DType{kDLUInt, 1, 1};
  if (s == "handle") return DType{kDLOpaqueHandle, 64, 1};
  for (const Prefix& p : kPrefixes) {
    size_t n = std::strlen(p.text);
    if (s.compare(0, n, p.text) != 0) continue;
    size_t pos = n;
    uint64_t bits = 0, lanes = 1;
    // Bits are required ("float" alone is ambiguous); they must fit DLDataType's u8.
    if (!parse_decimal(s, &pos, 255, &bits) || bits == 0) return std::nullopt;
    if (p.code == kDLBfloat && bits != 16) return std::nullopt;
    if (pos < s.size()) {
      if (s[pos] != 'x') return std::nullopt;
      ++pos;
      if (!parse_decimal(s, &pos, 65535, &lanes) || lanes == 0) return std::nullopt;
    }
    if (pos != s.size()) return std::nullopt;
    return DType{p.code, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
  }
  return std::nullopt;
}

std::string dtype_to_string(DType t) {
  if (t.code == kDLUInt && t.bits == 1 && t.lanes == 1) return "bool";
  if (t.code == kDLOpaqueHandle && t.bits == 64 && t.lanes == 1) return "handle";
  std::string s;
  switch (t.code) {
    case kDLInt:
      s = "int";
      break;
    case kDLUInt:
      s = "uint";
      break;
    case kDLFloat:
      s = "float";
      break;
    case kDLBfloat:
      s = "bfloat";
      break;
    case kDLOpaqueHandle:
      s = "handle";
      break;
    default:
      s = "custom" + std::to_string(t.code) + "_";
      break;
  }
  s += std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

uint64_t dtype_element_bytes(DType t) {
  // At most 255 * 65535 bits: no overflow in 64 bits.
  return (static_cast<uint64_t>(t.bits) * t.lanes + 7) / 8;
}

}  // namespace kdflow

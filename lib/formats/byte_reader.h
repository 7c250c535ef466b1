// byte_reader.h — a bounds-checked little-endian cursor over bytes read from a file,
// shared by the params reader, the device-blob reader and the VM-executable reader, with
// the one NDArray record reader all three need. Every read is checked against
// the bytes left; errors are one line `file: byte N: error: ...`. Private to kdflow_core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow::detail {

/// `file: byte N: error: msg`, on one line whatever `msg` holds.
inline Error byte_error(const std::string& file, uint64_t offset, const std::string& msg) {
  std::string text = fmt::format("{}: byte {}: error: {}", file, offset, msg);
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return Error{std::move(text), ExitCode::DataError};
}

inline constexpr uint64_t kNDArrayMagic = 0xDD5E40F096B4A13Full;  // kTVMNDArrayMagic
inline constexpr int32_t kMaxNdim = 32;

/// One NDArray record as TVM serializes it (save_param_dict, the graph executor factory's
/// params, the VM executable's constant pool): where its bytes lie, never a copy of them.
struct NDArrayRecord {
  DType dtype;
  std::vector<int64_t> shape;
  int32_t device_type = 1;
  int32_t device_id = 0;
  uint64_t data_offset = 0;  ///< offset of the array's bytes within the reader's input
  uint64_t nbytes = 0;
};

class ByteReader {
 protected:
  /// `noun` names the container in truncation messages ("file ends inside ...").
  ByteReader(std::string_view bytes, const std::string& file, const char* noun)
      : bytes_(bytes), file_(file), end_(bytes.size()), noun_(noun) {}

  /// Bytes left before `end_` (the whole input unless the reader narrows it).
  uint64_t left() const { return end_ - pos_; }

  Error err(uint64_t offset, const std::string& msg) const { return byte_error(file_, offset, msg); }

  bool fail(uint64_t offset, const std::string& msg) {
    error_ = err(offset, msg);
    return false;
  }

  /// Records a truncation error for a field of `size` bytes called `what`.
  bool truncated(uint64_t size, const std::string& what) {
    return fail(pos_, fmt::format("{} ends inside {} ({} bytes needed, {} left)", noun_, what, size, left()));
  }

  /// Little-endian unsigned integer of `size` bytes (≤ 8).
  bool read_le(uint64_t size, const std::string& what, uint64_t* out) {
    if (left() < size) return truncated(size, what);
    uint64_t v = 0;
    for (uint64_t k = 0; k < size; ++k)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[pos_ + k])) << (8 * k);
    pos_ += size;
    *out = v;
    return true;
  }
  bool read_u64(uint64_t* out, const std::string& what) { return read_le(8, what, out); }
  bool read_i64(int64_t* out, const std::string& what) {
    uint64_t v = 0;
    if (!read_le(8, what, &v)) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  bool read_i32(int32_t* out, const std::string& what) {
    uint64_t v = 0;
    if (!read_le(4, what, &v)) return false;
    *out = static_cast<int32_t>(static_cast<uint32_t>(v));
    return true;
  }

  /// A u64 length, then that many bytes.
  bool read_string(std::string* out, const std::string& what) {
    uint64_t at = pos_, len = 0;
    if (!read_u64(&len, "the length of " + what)) return false;
    if (len > left()) return fail(at, fmt::format("{} is {} bytes long, but only {} bytes are left", what, len, left()));
    out->assign(bytes_.data() + pos_, len);
    pos_ += len;
    return true;
  }

  /// One NDArray record, `what` naming it in errors: magic, reserved word, device, ndim
  /// (0..kMaxNdim), a dtype that round-trips, non-negative dimensions, and a byte size equal
  /// to element bytes × all dimensions (a zero dimension makes it 0, whatever the others)
  /// that fits in what is left. Moves past the data.
  bool read_ndarray(const std::string& what, NDArrayRecord* r) {
    uint64_t start = pos_, magic = 0, reserved = 0, dt = 0;
    if (!read_u64(&magic, "the header of " + what)) return false;
    if (magic != kNDArrayMagic)
      return fail(start, fmt::format("{}: bad NDArray magic {:#018x}, expected {:#018x}", what, magic, kNDArrayMagic));
    int32_t ndim = 0;
    if (!read_u64(&reserved, "the header of " + what) || !read_i32(&r->device_type, "the header of " + what) ||
        !read_i32(&r->device_id, "the header of " + what))
      return false;
    uint64_t at = pos_;
    if (!read_i32(&ndim, "the header of " + what)) return false;
    if (ndim < 0 || ndim > kMaxNdim) return fail(at, fmt::format("{}: ndim {} is outside 0..{}", what, ndim, kMaxNdim));
    at = pos_;
    if (!read_le(4, "the dtype of " + what, &dt)) return false;
    r->dtype = from_dlpack(static_cast<uint8_t>(dt & 0xff), static_cast<uint8_t>((dt >> 8) & 0xff),
                     static_cast<uint16_t>(dt >> 16));
    auto round_trip = parse_dtype(dtype_to_string(r->dtype));
    if (!round_trip || *round_trip != r->dtype)
      return fail(at, fmt::format("{}: invalid dtype (code {}, bits {}, lanes {})", what, r->dtype.code, r->dtype.bits,
                                  r->dtype.lanes));
    if (static_cast<uint64_t>(ndim) * 8 > left())
      return truncated(static_cast<uint64_t>(ndim) * 8, "the shape of " + what);
    r->shape.clear();
    r->shape.reserve(static_cast<size_t>(ndim));
    uint64_t expected = dtype_element_bytes(r->dtype);
    bool zero = false, overflow = false;
    for (int32_t d = 0; d < ndim; ++d) {
      at = pos_;
      int64_t dim = 0;
      if (!read_i64(&dim, "the shape of " + what)) return false;
      if (dim < 0) return fail(at, fmt::format("{}: dimension {} is negative ({})", what, d, dim));
      r->shape.push_back(dim);
      if (dim == 0) zero = true;
      if (!overflow && !checked_mul(expected, static_cast<uint64_t>(dim), &expected)) overflow = true;
    }
    if (zero) expected = 0;
    at = pos_;
    int64_t nbytes = 0;
    if (!read_i64(&nbytes, "the byte size of " + what)) return false;
    if (overflow && !zero) return fail(at, fmt::format("{}: size of shape overflows 64 bits", what));
    if (nbytes < 0 || static_cast<uint64_t>(nbytes) != expected)
      return fail(at, fmt::format("{}: byte size {} does not match its dtype and shape ({} bytes)", what, nbytes,
                                  expected));
    if (expected > left())
      return fail(at, fmt::format("{}: {} data bytes needed, but only {} bytes are left", what, expected, left()));
    r->nbytes = expected;
    r->data_offset = pos_;
    pos_ += expected;
    return true;
  }

  std::string_view bytes_;
  const std::string& file_;
  uint64_t pos_ = 0;
  uint64_t end_ = 0;
  Error error_;

 private:
  const char* noun_;
};

}  // namespace kdflow::detail

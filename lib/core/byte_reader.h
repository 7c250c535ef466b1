// byte_reader.h — a bounds-checked little-endian cursor over bytes read from a file,
// shared by the params reader and the device-blob reader. Every read is checked against
// the bytes left; errors are one line `file: byte N: error: ...`. Private to kdflow_core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "kdflow/diag.h"

namespace kdflow::detail {

/// `file: byte N: error: msg`, on one line whatever `msg` holds.
inline Error byte_error(const std::string& file, uint64_t offset, const std::string& msg) {
  std::string text = fmt::format("{}: byte {}: error: {}", file, offset, msg);
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return Error{std::move(text), ExitCode::DataError};
}

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

  std::string_view bytes_;
  const std::string& file_;
  uint64_t pos_ = 0;
  uint64_t end_ = 0;
  Error error_;

 private:
  const char* noun_;
};

}  // namespace kdflow::detail

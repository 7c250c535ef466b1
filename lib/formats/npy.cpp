// npy.cpp — NumPy .npy files (format 1.0, 2.0, 3.0), as numpy/lib/format.py writes them:
//
//   "\x93NUMPY", u8 major, u8 minor, header length (u16 for 1.x, u32 for 2.x and 3.x),
//   a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (1, 100), }
//   padded with spaces and a newline, then the elements.
//
// The header is parsed by a small recursive-descent reader of exactly that literal
// (strings, True/False, tuples of non-negative integers), never evaluated. The element
// count is overflow-checked and the data must be exactly as long as dtype and shape say.
#include "kdflow/formats/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "kdflow/support/io.h"

namespace kdflow {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kMaxNdim = 64;  // NumPy's NPY_MAXDIMS (32 before NumPy 2.0)

/// Bytes of one element for the .npy reader and writer: whole bytes only.
uint64_t element_bytes(DType t) { return dtype_element_bytes(t); }

/// Quotes header text inside a diagnostic (printable ASCII, at most 48 characters).
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 48; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > 48) out += "...";
  return out + "'";
}

/// The header dict literal.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  /// Fills descr, fortran_order and shape; false with `error()` set on failure.
  bool parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    if (!eat('{')) return fail("the header is not a Python dict literal");
    skip_ws();
    while (!peek('}')) {
      std::string key;
      if (!string_literal(&key)) return fail("expected a quoted key in the header dict");
      skip_ws();
      if (!eat(':')) return fail("expected ':' after " + quoted(key) + " in the header");
      skip_ws();
      if (key == "descr") {
        if (have_descr) return fail("'descr' appears twice in the header");
        if (peek('[')) return fail("structured dtypes (a list 'descr') are not supported");
        if (!string_literal(descr)) return fail("'descr' is not a string");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) return fail("'fortran_order' appears twice in the header");
        if (!boolean(fortran)) return fail("'fortran_order' is not True or False");
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) return fail("'shape' appears twice in the header");
        if (!tuple(shape)) return false;
        have_shape = true;
      } else {
        return fail("unexpected key " + quoted(key) + " in the header (expected descr, fortran_order, shape)");
      }
      skip_ws();
      if (eat(',')) {
        skip_ws();
        continue;
      }
      if (!peek('}')) return fail("expected ',' or '}' in the header dict");
    }
    eat('}');
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict");
    if (!have_descr) return fail("the header has no 'descr'");
    if (!have_fortran) return fail("the header has no 'fortran_order'");
    if (!have_shape) return fail("the header has no 'shape'");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool fail(const std::string& msg) {
    if (error_.empty()) error_ = msg;
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool string_literal(std::string* out) {
    if (!peek('\'') && !peek('"')) return false;
    char q = s_[pos_++];
    out->clear();
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') return false;  // NumPy's descr and keys never need escapes
      *out += s_[pos_++];
    }
    return eat(q);
  }
  bool word(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  bool boolean(bool* out) {
    if (word("True")) *out = true;
    else if (word("False")) *out = false;
    else return false;
    return true;
  }
  /// (d0, d1, ...) with an optional trailing comma; Python 2's "10L" accepted.
  bool tuple(std::vector<int64_t>* shape) {
    shape->clear();
    if (!eat('(')) return fail("'shape' is not a tuple");
    skip_ws();
    while (!peek(')')) {
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
        return fail("'shape' holds something other than non-negative integers");
      uint64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        uint64_t d = static_cast<uint64_t>(s_[pos_++] - '0');
        if (v > (static_cast<uint64_t>(INT64_MAX) - d) / 10) return fail("a 'shape' dimension is too large");
        v = v * 10 + d;
      }
      eat('L');
      if (shape->size() == kMaxNdim) return fail(fmt::format("'shape' has more than {} dimensions", kMaxNdim));
      shape->push_back(static_cast<int64_t>(v));
      skip_ws();
      if (eat(',')) {
        skip_ws();
        continue;
      }
      if (!peek(')')) return fail("expected ',' or ')' in 'shape'");
    }
    eat(')');
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string error_;
};

void byteswap_elements(std::string* data, uint64_t size) {
  if (size < 2) return;
  for (size_t i = 0; i + size <= data->size(); i += size) std::reverse(data->begin() + i, data->begin() + i + size);
}

}  // namespace

uint64_t NpyArray::count() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::optional<std::string> npy_descr(DType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLUInt && t.bits == 1) return std::string("|b1");
  if (t.bits % 8 != 0) return std::nullopt;
  unsigned bytes = t.bits / 8;
  char kind = 0;
  switch (t.code) {
    case kDLInt:
      if (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) kind = 'i';
      break;
    case kDLUInt:
      if (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) kind = 'u';
      break;
    case kDLFloat:
      if (bytes == 2 || bytes == 4 || bytes == 8) kind = 'f';
      break;
    default:
      break;
  }
  if (!kind) return std::nullopt;
  return fmt::format("{}{}{}", bytes == 1 ? '|' : '<', kind, bytes);
}

std::optional<DType> dtype_from_npy_descr(const std::string& descr, bool* big_endian) {
  if (descr.size() < 2) return std::nullopt;
  char order = descr[0];
  size_t at = 1;
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    order = '=';
    at = 0;  // NumPy also accepts "f4"
  }
  if (at >= descr.size()) return std::nullopt;
  char kind = descr[at];
  std::string digits = descr.substr(at + 1);
  if (digits.empty() || digits.size() > 2 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  unsigned bytes = static_cast<unsigned>(std::stoul(digits));
  std::optional<DType> t;
  if (kind == 'b' && bytes == 1) t = DType{kDLUInt, 1, 1};
  else if (kind == 'i' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8))
    t = DType{kDLInt, static_cast<uint8_t>(bytes * 8), 1};
  else if (kind == 'u' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8))
    t = DType{kDLUInt, static_cast<uint8_t>(bytes * 8), 1};
  else if (kind == 'f' && (bytes == 2 || bytes == 4 || bytes == 8))
    t = DType{kDLFloat, static_cast<uint8_t>(bytes * 8), 1};
  if (!t) return std::nullopt;
  // '=' is native order: little-endian on every host kdflow runs on (x86-64, aarch64).
  if (bytes > 1 && order == '|') return std::nullopt;
  if (big_endian) *big_endian = order == '>' && bytes > 1;
  return t;
}

Expected<NpyArray> parse_npy(std::string_view bytes, const std::string& file) {
  auto bad = [&](const std::string& msg) { return file_error(file, msg, ExitCode::DataError); };
  if (bytes.size() < kMagicLen || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    return bad("not a .npy file (it does not start with \\x93NUMPY)");
  if (bytes.size() < kMagicLen + 2) return bad("file ends inside the .npy version");
  unsigned major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return bad(fmt::format(".npy format version {}.{} is not supported (1.0, 2.0 and 3.0 are)", major, minor));
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t prefix = kMagicLen + 2 + len_bytes;
  if (bytes.size() < prefix) return bad("file ends inside the header length");
  uint64_t header_len = 0;
  for (size_t k = 0; k < len_bytes; ++k)
    header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
  if (header_len > bytes.size() - prefix)
    return bad(fmt::format("header length {} is more than the {} bytes left", header_len, bytes.size() - prefix));
  std::string_view header = bytes.substr(prefix, header_len);
  if (major < 3 && std::any_of(header.begin(), header.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
    return bad(fmt::format("the header of a version {}.0 file must be ASCII", major));

  std::string descr;
  bool fortran = false;
  NpyArray a;
  HeaderParser hp(header);
  if (!hp.parse(&descr, &fortran, &a.shape)) return bad("bad .npy header: " + hp.error());
  bool big_endian = false;
  auto t = dtype_from_npy_descr(descr, &big_endian);
  if (!t) return bad("dtype " + quoted(descr) + " is not supported (bool, int8..int64, uint8..uint64, float16/32/64)");
  a.dtype = *t;
  if (fortran) return bad("fortran_order True is not supported (write the array in C order: np.ascontiguousarray)");

  uint64_t count = 1, nbytes = 0;
  for (int64_t d : a.shape)
    if (!checked_mul(count, static_cast<uint64_t>(d), &count))
      return bad("the element count of the shape overflows 64 bits");
  uint64_t elem = element_bytes(a.dtype);
  if (!checked_mul(count, elem, &nbytes)) return bad("the data size of the shape overflows 64 bits");
  uint64_t left = bytes.size() - prefix - header_len;
  if (left < nbytes)
    return bad(fmt::format("data is {} bytes, but shape and dtype {} need {}", left, quoted(descr), nbytes));
  if (left > nbytes) return bad(fmt::format("{} unexpected bytes after the data", left - nbytes));
  a.data.assign(bytes.data() + prefix + header_len, nbytes);
  if (big_endian) byteswap_elements(&a.data, elem);
  return a;
}

Expected<NpyArray> read_npy(const std::string& path, uint64_t max_bytes) {
  Expected<std::string> bytes = read_file(path, max_bytes);
  if (!bytes) return bytes.error();
  return parse_npy(*bytes, path);
}

Expected<std::string> encode_npy(const NpyArray& a) {
  auto descr = npy_descr(a.dtype);
  if (!descr)
    return Error{fmt::format("npy: error: dtype {} has no NumPy equivalent", dtype_to_string(a.dtype)),
                 ExitCode::Software};
  uint64_t count = 1, nbytes = 0;
  for (int64_t d : a.shape)
    if (d < 0 || !checked_mul(count, static_cast<uint64_t>(d), &count))
      return Error{"npy: error: invalid shape", ExitCode::Software};
  if (!checked_mul(count, element_bytes(a.dtype), &nbytes) || nbytes != a.data.size())
    return Error{fmt::format("npy: error: {} data bytes do not match shape and dtype ({} bytes)", a.data.size(), nbytes),
                 ExitCode::Software};
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape[i]);
  if (a.shape.size() == 1) shape += ",";
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", *descr, shape);
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  unsigned major = 1;
  size_t prefix = kMagicLen + 2 + 2;
  if (header.size() + 1 + 64 > 65535) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
  }
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  uint64_t hl = header.size();
  for (size_t k = 0; k < prefix - kMagicLen - 2; ++k) out += static_cast<char>((hl >> (8 * k)) & 0xff);
  out += header;
  out += a.data;
  return out;
}

Status write_npy(const std::string& path, const NpyArray& a) {
  Expected<std::string> bytes = encode_npy(a);
  if (!bytes) return Error{path + ": error: " + bytes.error().message.substr(bytes.error().message.find("error: ") + 7),
                           bytes.error().code};
  return write_file_atomic(path, *bytes);
}

}  // namespace kdflow

// params.cpp — reads TVM's params file (tvm.runtime.save_param_dict).
//
// Layout (little-endian, packed): u64 list magic, u64 reserved, u64 n, n names
// (u64 length + bytes), u64 n, n NDArrays: u64 array magic, u64 reserved, i32 device
// type, i32 device id, i32 ndim, u8 code, u8 bits, u16 lanes, i64 shape[ndim],
// i64 nbytes, bytes. Every count and length is checked against the bytes left before
// anything is sized from it; array bytes are located, never copied.
#include "kdflow/params.h"

#include <fmt/format.h>

#include <set>

#include "byte_reader.h"
#include "json_read.h"  // detail::quote_input

namespace kdflow {
namespace {

constexpr uint64_t kParamsMagic = 0xF7E58D4F05049CB7ull;   // kTVMNDArrayListMagic
constexpr uint64_t kNDArrayMagic = 0xDD5E40F096B4A13Full;  // kTVMNDArrayMagic
/// Bytes of an NDArray record before its shape: two u64, three i32, the dtype.
constexpr uint64_t kArrayHeaderBytes = 8 + 8 + 4 + 4 + 4 + 4;
/// Smallest possible NDArray record: header, no dimensions, i64 nbytes, no data.
constexpr uint64_t kMinArrayBytes = kArrayHeaderBytes + 8;
/// DLPack tensors in TVM have at most this many dimensions (and 32 covers any model).
constexpr int32_t kMaxNdim = 32;

class ParamsReader : private detail::ByteReader {
 public:
  ParamsReader(std::string_view bytes, const std::string& file) : ByteReader(bytes, file, "file") { out_.file = file; }

  Expected<ParamsFile> read() {
    uint64_t magic = 0, reserved = 0, n_names = 0, n_arrays = 0;
    if (!read_u64(&magic, "the file magic")) return error_;
    if (magic != kParamsMagic)
      return err(0, fmt::format("not a TVM params file (magic {:#018x}, expected {:#018x})", magic, kParamsMagic));
    if (!read_u64(&reserved, "the reserved field")) return error_;
    uint64_t at = pos_;
    if (!read_u64(&n_names, "the name count")) return error_;
    if (n_names > left() / 8)
      return err(at, fmt::format("name count {} is more than the {} bytes left can hold", n_names, left()));
    std::vector<std::string> names;
    names.reserve(n_names);
    std::set<std::string> seen;
    for (uint64_t i = 0; i < n_names; ++i) {
      at = pos_;
      std::string name;
      if (!read_string(&name, fmt::format("name {}", i))) return error_;
      if (!seen.insert(name).second) return err(at, "parameter name " + detail::quote_input(name) + " appears twice");
      names.push_back(std::move(name));
    }
    at = pos_;
    if (!read_u64(&n_arrays, "the array count")) return error_;
    if (n_arrays != n_names)
      return err(at, fmt::format("array count {} differs from the name count {}", n_arrays, n_names));
    if (n_arrays > left() / kMinArrayBytes)
      return err(at, fmt::format("array count {} is more than the {} bytes left can hold", n_arrays, left()));
    out_.arrays.reserve(n_arrays);
    for (uint64_t i = 0; i < n_arrays; ++i) {
      ParamArray a;
      a.name = std::move(names[i]);
      if (!read_array(&a)) return error_;
      out_.arrays.push_back(std::move(a));
    }
    if (left() != 0) return err(pos_, fmt::format("{} unexpected bytes after the last array", left()));
    return std::move(out_);
  }

 private:
  bool read_array(ParamArray* a) {
    std::string what = "array " + detail::quote_input(a->name);
    uint64_t start = pos_, magic = 0, reserved = 0, dt = 0;
    if (!read_u64(&magic, "the header of " + what)) return false;
    if (magic != kNDArrayMagic)
      return fail(start, fmt::format("{}: bad NDArray magic {:#018x}, expected {:#018x}", what, magic, kNDArrayMagic));
    int32_t ndim = 0;
    if (!read_u64(&reserved, "the header of " + what) || !read_i32(&a->device_type, "the header of " + what) ||
        !read_i32(&a->device_id, "the header of " + what))
      return false;
    uint64_t at = pos_;
    if (!read_i32(&ndim, "the header of " + what)) return false;
    if (ndim < 0 || ndim > kMaxNdim) return fail(at, fmt::format("{}: ndim {} is outside 0..{}", what, ndim, kMaxNdim));
    at = pos_;
    if (!read_le(4, "the dtype of " + what, &dt)) return false;
    a->dtype =
        DType{static_cast<uint8_t>(dt & 0xff), static_cast<uint8_t>((dt >> 8) & 0xff), static_cast<uint16_t>(dt >> 16)};
    auto round_trip = parse_dtype(dtype_to_string(a->dtype));
    if (!round_trip || *round_trip != a->dtype)
      return fail(at, fmt::format("{}: invalid dtype (code {}, bits {}, lanes {})", what, a->dtype.code, a->dtype.bits,
                                  a->dtype.lanes));
    if (!read_shape(a, ndim, what)) return false;
    return read_data(a, what);
  }

  bool read_shape(ParamArray* a, int32_t ndim, const std::string& what) {
    if (static_cast<uint64_t>(ndim) * 8 > left())
      return truncated(static_cast<uint64_t>(ndim) * 8, "the shape of " + what);
    a->shape.reserve(static_cast<size_t>(ndim));
    for (int32_t d = 0; d < ndim; ++d) {
      uint64_t at = pos_;
      int64_t dim = 0;
      if (!read_i64(&dim, "the shape of " + what)) return false;
      if (dim < 0) return fail(at, fmt::format("{}: dimension {} is negative ({})", what, d, dim));
      a->shape.push_back(dim);
    }
    return true;
  }

  /// nbytes must equal element bytes × all dimensions and fit in what is left.
  bool read_data(ParamArray* a, const std::string& what) {
    uint64_t at = pos_;
    int64_t nbytes = 0;
    if (!read_i64(&nbytes, "the byte size of " + what)) return false;
    uint64_t expected = dtype_element_bytes(a->dtype);
    for (int64_t dim : a->shape)
      if (dim == 0) expected = 0;
    for (int64_t dim : a->shape) {
      if (expected == 0) break;
      if (!checked_mul(expected, static_cast<uint64_t>(dim), &expected))
        return fail(at, fmt::format("{}: size of shape overflows 64 bits", what));
    }
    if (nbytes < 0 || static_cast<uint64_t>(nbytes) != expected)
      return fail(
          at, fmt::format("{}: byte size {} does not match its dtype and shape ({} bytes)", what, nbytes, expected));
    if (expected > left())
      return fail(at, fmt::format("{}: {} data bytes needed, but only {} bytes are left", what, expected, left()));
    a->nbytes = expected;
    a->data_offset = pos_;
    pos_ += expected;
    return true;
  }

  ParamsFile out_;
};

}  // namespace

Expected<ParamsFile> parse_params(std::string_view bytes, const std::string& file) {
  try {
    return ParamsReader(bytes, file).read();
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading params", ExitCode::Software);
  }
}

}  // namespace kdflow

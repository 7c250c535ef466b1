// params.cpp — reads TVM's params file (tvm.runtime.save_param_dict).
//
// Layout (little-endian, packed): u64 list magic, u64 reserved, u64 n, n names
// (u64 length + bytes), u64 n, n NDArrays: u64 array magic, u64 reserved, i32 device
// type, i32 device id, i32 ndim, u8 code, u8 bits, u16 lanes, i64 shape[ndim],
// i64 nbytes, bytes. Every count and length is checked against the bytes left before
// anything is sized from it; array bytes are located, never copied.
#include "kdflow/formats/params.h"

#include <fmt/format.h>

#include <set>

#include "byte_reader.h"
#include "json_read.h"  // detail::quote_input

namespace kdflow {
namespace {

constexpr uint64_t kParamsMagic = 0xF7E58D4F05049CB7ull;   // kTVMNDArrayListMagic
/// Bytes of an NDArray record before its shape: two u64, three i32, the dtype.
constexpr uint64_t kArrayHeaderBytes = 8 + 8 + 4 + 4 + 4 + 4;
/// Smallest possible NDArray record: header, no dimensions, i64 nbytes, no data.
constexpr uint64_t kMinArrayBytes = kArrayHeaderBytes + 8;
/// DLPack tensors in TVM have at most this many dimensions (and 32 covers any model).

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
    detail::NDArrayRecord r;
    if (!read_ndarray("array " + detail::quote_input(a->name), &r)) return false;
    a->dtype = r.dtype;
    a->shape = std::move(r.shape);
    a->device_type = r.device_type;
    a->device_id = r.device_id;
    a->data_offset = r.data_offset;
    a->nbytes = r.nbytes;
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

// npy.h — reads and writes NumPy .npy files (format 1.0, 2.0 and 3.0), C order only.
// Every size in a header is checked against the bytes present; nothing is sized from it unchecked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

/// One array. `data` holds the elements little-endian, in C order; its size is
/// element_bytes(dtype) * product(shape) (a big-endian file is byte-swapped on reading).
struct NpyArray {
  DType dtype;                  ///< "<f4" → float32, "|b1" → bool ({kDLUInt, 1, 1}), ...
  std::vector<int64_t> shape;   ///< [] for a 0-d array
  std::string data;
  /// Number of elements: the product of `shape` (1 for a 0-d array). Callers that
  /// build arrays keep it small enough; readers have checked it.
  uint64_t count() const;
  bool operator==(const NpyArray& o) const { return dtype == o.dtype && shape == o.shape && data == o.data; }
};

/// The little-endian descr NumPy writes for `t` ("<f4", "<i8", "|b1", "|u1", "<f2").
/// nullopt for types NumPy has no descr for (bfloat16, vectors, odd bit widths).
std::optional<std::string> npy_descr(DType t);

/// The inverse: "<f4", "=i8", ">u2", "|b1", "|i1", "<f2", ... → DType. `*big_endian`
/// tells whether the data must be byte-swapped. nullopt for structured, string, object,
/// complex and datetime types.
std::optional<DType> dtype_from_npy_descr(const std::string& descr, bool* big_endian = nullptr);

/// Parses a whole .npy file held in memory. Errors: `file: error: ...` (one line),
/// ExitCode::DataError. fortran_order True is an error (only C order is supported).
Expected<NpyArray> parse_npy(std::string_view bytes, const std::string& file);

/// Reads and parses a .npy file (missing → ExitCode::NoInput).
Expected<NpyArray> read_npy(const std::string& path, uint64_t max_bytes = 1ull << 32);

/// The bytes of a .npy file for `a` (version 1.0, or 2.0 when the header needs it).
/// Errors when the dtype has no NumPy descr or `data` does not match dtype and shape.
Expected<std::string> encode_npy(const NpyArray& a);

/// encode_npy, written atomically (io.h). Failing writes → ExitCode::CantCreate.
Status write_npy(const std::string& path, const NpyArray& a);

}  // namespace kdflow

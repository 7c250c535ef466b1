// params.h — reads TVM's params file (tvm.runtime.save_param_dict): names, dtypes, shapes
// and where each array's bytes sit. Never trusts a count: each is checked against the bytes left.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

struct ParamArray {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  int32_t device_type = 1;
  int32_t device_id = 0;
  uint64_t data_offset = 0;  ///< offset of the array's bytes within the file
  uint64_t nbytes = 0;
};

struct ParamsFile {
  std::string file;
  std::vector<ParamArray> arrays;
};

/// Parses a params blob held in memory (`bytes` is the whole file). Diagnostics name
/// `file` and the byte offset (`file: byte 1234: error: ...`).
/// Largest params file kdflow opens (64 GiB). Files are mapped (map_file), not read, so a
/// reader that needs only the names touches just the array headers.
inline constexpr uint64_t kMaxParamsFileBytes = 1ull << 36;

Expected<ParamsFile> parse_params(std::string_view bytes, const std::string& file);

}  // namespace kdflow

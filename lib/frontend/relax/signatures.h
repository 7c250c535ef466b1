// signatures.h — the symbolic shapes TVM states for each function of a tvm-ffi build: its
// host C checks every argument and names the function's signature in the message
// (`"fused_matmul1_add1_relu1(lv3: Tensor([n, T.int64(400)], float32), ...)"`, TVM 0.21+).
// Internal to the Relax front end; text only.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kdflow::detail {

struct SignatureParam {
  std::string name;
  bool tensor = false;            ///< Tensor([...], dtype); other parameters carry no shape
  std::vector<std::string> dims;  ///< as TVM prints them, `T.int64(400)` written `400`
  std::string dtype;
};

/// The parameters of `function` as a string literal of `host_c` states them, or nullopt when
/// there is none or it does not parse.
std::optional<std::vector<SignatureParam>> find_signature(const std::string& host_c, const std::string& function);

/// Whether `dim` (as find_signature gives it) is an integer literal.
bool is_literal_dim(const std::string& dim);

}  // namespace kdflow::detail

// signatures.h — the symbolic shapes TVM states for each function of a tvm-ffi build: its
// host C checks every argument and names the function's signature in the message
// (`"fused_matmul1_add1_relu1(lv3: Tensor([n, T.int64(400)], float32), ...)"`, TVM 0.21+).
// Internal to the Relax front end; text only.
#pragma once

#include <cstdint>
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

/// The names a call's tensors get from `sig`: `shapes` holds the call's arguments' shapes in
/// parameter order. Where they agree — as many parameters, each a tensor with as many
/// dimensions, every literal dimension equal to the value, every symbol one value across the
/// call — per parameter, per dimension, the symbol ("n"), or "" for a literal; else nullopt.
std::optional<std::vector<std::vector<std::string>>> call_dimension_names(
    const std::vector<SignatureParam>& sig, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace kdflow::detail

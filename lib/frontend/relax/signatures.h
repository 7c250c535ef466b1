// signatures.h — the symbolic shapes TVM states for each function of a tvm-ffi build: its
// host C checks every argument and names the function's signature in the message
// (`"fused_matmul1_add1_relu1(lv3: Tensor([n, T.int64(400)], float32), ...)"`, TVM 0.21+).
// Internal to the Relax front end; text only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kdflow::detail {

struct SignatureParam {
  std::string name;
  bool tensor = false;            ///< Tensor([...], dtype); other parameters carry no shape
  std::vector<std::string> dims;  ///< as TVM prints them, `T.int64(400)` written `400`
  std::string dtype;
};

/// Where `"NAME(` first occurs in a host.c, for every NAME at once: one pass over the file,
/// so that finding each of a large build's hundreds of functions is not one scan of a
/// 30 MB host.c each (issue 40). The same position as host_c.find("\"" + NAME + "(").
class SignatureIndex {
 public:
  explicit SignatureIndex(const std::string& host_c);
  /// The position of the quote, or std::string::npos.
  size_t find(const std::string& function) const;

 private:
  static constexpr size_t kMaxName = 512;  ///< longer names (or names with '(') are searched for
  const std::string& host_c_;
  std::unordered_map<std::string_view, size_t> first_;
};

/// The parameters of `function` as a string literal of `host_c` states them, or nullopt when
/// there is none or it does not parse. `index` (optional, built on `host_c`) finds the literal.
std::optional<std::vector<SignatureParam>> find_signature(const std::string& host_c, const std::string& function,
                                                          const SignatureIndex* index = nullptr);

/// Whether `dim` (as find_signature gives it) is an integer literal.
bool is_literal_dim(const std::string& dim);

/// The names a call's tensors get from `sig`: `shapes` holds the call's arguments' shapes in
/// parameter order. Where they agree — as many parameters, each a tensor with as many
/// dimensions, every literal dimension equal to the value, every symbol one value across the
/// call — per parameter, per dimension, the symbol ("n"), or "" for a literal; else nullopt.
std::optional<std::vector<std::vector<std::string>>> call_dimension_names(
    const std::vector<SignatureParam>& sig, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace kdflow::detail

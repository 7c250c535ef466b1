// relay.h — the Relay operators behind each fused function: decoded from the function's
// name (tvmgen_default_fused_nn_conv2d_add_nn_relu_3 → nn.conv2d, add, nn.relu), or read
// exactly from relay.txt (TVM's function_metadata printout). Text processing only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// Decodes a fused function name into Relay operator names, matching the longest known
/// operator at each step (names TVM registers, with '.' printed as '_'). Unknown pieces
/// are kept as they are (e.g. a custom op), never dropped.
std::vector<RelayOp> decode_fused_name(const std::string& function_name);

/// Parses relay.txt: sections headed `// <function name> (<target>)`, each holding the
/// fused Relay function; returns function name → its operators in evaluation order with
/// their result types. `__tvm_main__` is skipped. Errors: `file:line:col: error: ...`.
Expected<std::map<std::string, std::vector<RelayOp>>> parse_relay_text(std::string_view text, const std::string& file);

/// A Relay tensor type as relay.txt prints it: "Tensor[(1, 400), float32]" → dtype
/// "float32", shape {1, 400} (dimensions may carry an `i64`/`i32` suffix). nullopt for
/// anything else (a tuple, a dynamic `?` dimension, ...).
struct RelayTensorType {
  std::vector<int64_t> shape;
  std::string dtype;
};
std::optional<RelayTensorType> parse_relay_tensor_type(std::string_view type);

}  // namespace kdflow

// relax_ops.cpp — see relax_ops.h.
#include "kdflow/formats/relax_ops.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace kdflow {
namespace {

// Relax operators as TVM registers them (python/tvm/relax/op/**, names without "relax.").
constexpr const char* kRelaxOps[] = {
    "abs", "acos", "acosh", "add", "argmax", "argmin", "argsort", "asin", "asinh", "astype", "atan", "atanh",
    "bitwise_and", "bitwise_or", "bitwise_xor", "broadcast_to", "ceil", "clip", "collapse_sum_like", "concat",
    "cos", "cosh", "cumprod", "cumsum", "divide", "einsum", "equal", "erf", "exp", "expand_dims", "flatten",
    "flip", "floor", "floor_divide", "floor_mod", "full", "full_like", "gather_elements", "gather_nd", "greater",
    "greater_equal", "isfinite", "isinf", "isnan", "layout_transform", "less", "less_equal", "log",
    "logical_and", "logical_not", "logical_or", "matmul", "max", "maximum", "mean", "min", "minimum", "multiply",
    "negative", "not_equal", "ones", "ones_like", "permute_dims", "power", "prod", "repeat", "reshape", "round",
    "rsqrt", "scatter_elements", "scatter_nd", "sigmoid", "sign", "sin", "sinh", "sort", "split", "sqrt",
    "square", "squeeze", "std", "strided_slice", "subtract", "sum", "take", "tan", "tanh", "tile", "topk",
    "tril", "triu", "unique", "variance", "where", "zeros", "zeros_like", "dynamic_strided_slice", "one_hot",
    "nn.adaptive_avg_pool1d", "nn.adaptive_avg_pool2d", "nn.adaptive_avg_pool3d", "nn.attention",
    "nn.attention_var_len", "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d", "nn.batch_norm", "nn.conv1d",
    "nn.conv1d_transpose", "nn.conv2d", "nn.conv2d_transpose", "nn.conv3d", "nn.cross_entropy_with_logits",
    "nn.dropout", "nn.gelu", "nn.gelu_tanh", "nn.group_norm", "nn.instance_norm", "nn.layer_norm",
    "nn.leaky_relu", "nn.log_softmax", "nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d", "nn.nll_loss",
    "nn.pad", "nn.pixel_shuffle", "nn.prelu", "nn.relu", "nn.rms_norm", "nn.selu", "nn.silu", "nn.softmax",
    "nn.softplus", "image.resize2d", "image.resize3d", "image.grid_sample", "vision.all_class_non_maximum_suppression",
    "vision.roi_align", "linear_algebra.matmul", "ccl.allreduce", "ccl.allgather", "ccl.broadcast_from_worker0",
};

/// Calls that are not operators: struct info, control, the VM and memory built-ins.
bool not_an_op(const std::string& n) {
  static const std::set<std::string> names = {
      "function", "dataflow", "output", "call_tir", "call_tir_inplace", "call_tir_with_grad", "call_packed",
      "call_dps_packed", "call_pure_packed", "call_inplace_packed", "const", "prim_value", "shape", "str", "dtype",
      "emit", "emit_match_cast", "match_cast", "null_value", "func_attr", "print", "assert_op", "ensure_zero_offset",
      "hint_on_device", "to_vdevice", "invoke_closure", "invoke_pure_closure", "make_closure", "tuple",
      "stop_lift_params", "ExternFunc"};
  if (n.empty() || std::isupper(static_cast<unsigned char>(n[0]))) return true;  // R.Tensor, R.Shape, R.Object, ...
  for (const char* prefix : {"memory.", "vm.", "builtin.", "distributed.", "kill_"})
    if (n.rfind(prefix, 0) == 0) return true;
  return names.count(n) > 0;
}

std::string last_component(const std::string& full) {
  size_t dot = full.rfind('.');
  return dot == std::string::npos ? full : full.substr(dot + 1);
}

}  // namespace

std::vector<std::string> relax_ops_in_text(const std::string& text) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t at = text.find("R."); at != std::string::npos; at = text.find("R.", at + 2)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_' || text[at - 1] == '.'))
      continue;
    size_t end = at + 2;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_' || text[end] == '.'))
      ++end;
    if (end >= text.size() || text[end] != '(') continue;
    std::string name = text.substr(at + 2, end - at - 2);
    if (name.empty() || name.back() == '.' || not_an_op(name)) continue;
    if (seen.insert(name).second) out.push_back(name);
  }
  return out;
}

std::vector<RelayOp> decode_relax_name(const std::string& function, const std::vector<std::string>& known) {
  // Short spelling → full name; the module's own ops take precedence.
  std::map<std::string, std::string> by_short;
  for (const std::string& k : known) by_short.emplace(last_component(k), k);
  for (const char* k : kRelaxOps) by_short.emplace(last_component(k), k);
  size_t max_pieces = 1;
  for (const auto& [s, full] : by_short) {
    (void)full;
    max_pieces = std::max<size_t>(max_pieces, static_cast<size_t>(std::count(s.begin(), s.end(), '_')) + 1);
  }
  std::string name = function;
  if (name.rfind("fused_", 0) == 0) name = name.substr(6);
  // Pieces with Relax's uniquifying numbers dropped ("matmul1" → "matmul"; "conv2d" stays).
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('_', start);
    if (end == std::string::npos) end = name.size();
    std::string tok = name.substr(start, end - start);
    if (!tok.empty() && !std::isdigit(static_cast<unsigned char>(tok[0])) && !by_short.count(tok))
      while (tok.size() > 1 && std::isdigit(static_cast<unsigned char>(tok.back()))) tok.pop_back();
    if (!tok.empty()) pieces.push_back(tok);
    start = end + 1;
  }
  std::vector<RelayOp> ops;
  std::string unknown;
  auto flush = [&] {
    if (!unknown.empty()) ops.emplace_back(unknown);
    unknown.clear();
  };
  for (size_t i = 0; i < pieces.size();) {
    size_t matched = 0;
    for (size_t n = std::min(max_pieces, pieces.size() - i); n >= 1 && matched == 0; --n) {
      std::string candidate = pieces[i];
      for (size_t k = 1; k < n; ++k) candidate += "_" + pieces[i + k];
      auto it = by_short.find(candidate);
      if (it != by_short.end()) {
        flush();
        ops.emplace_back(it->second);
        matched = n;
      }
    }
    if (matched == 0) {
      unknown += (unknown.empty() ? "" : "_") + pieces[i];
      matched = 1;
    }
    i += matched;
  }
  flush();
  return ops;
}

}  // namespace kdflow

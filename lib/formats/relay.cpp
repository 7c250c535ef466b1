// relay.cpp — the Relay operators behind each fused function, two ways:
//
//  * decode_fused_name: from the lowered function's name alone. TVM names a fused function
//    "fused" + "_<op name>" for each operator it visits (te_compiler_cache.cc), truncates
//    that readable name at 80 characters (appending "_<hex hash>_"), mangles it to
//    tvmgen_<module>_fused_... and makes it unique with "_<n>". Operator names keep their
//    '.' printed as '_', so the name is split by '_' and the longest known operator is
//    matched at each step. The name is lossy: a truncated name loses operators, and its
//    order is TVM's visiting order, not always the evaluation order.
//  * parse_relay_text: exactly, from relay.txt (`lib.function_metadata` printed per
//    function). A small scanner turns each section into tokens, checks that brackets,
//    strings and comments are closed, and walks the function body collecting operator
//    calls (an identifier, optionally dotted, directly followed by '(') in evaluation
//    order, each with the `/* ty=... */` annotation that follows its closing ')'.
#include "kdflow/formats/relay.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <utility>

namespace kdflow {
namespace {

// ---------------------------------------------------------------------------------------
// Operator names as TVM registers them (RELAY_REGISTER_OP and the helper macros in
// src/relay/op/**, plus qnn/, dyn/ and the annotation/memory/vm dialects). Only used to
// split fused names; a name missing here is still kept (as an unknown piece).
// ---------------------------------------------------------------------------------------
constexpr const char* kRelayOps[] = {
    // nn: convolutions
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose", "nn.conv2d_transpose", "nn.conv3d_transpose",
    "nn.conv2d_backward_weight", "nn.deformable_conv2d", "nn.correlation", "nn.bitserial_conv2d",
    "nn.contrib_conv2d_winograd_without_weight_transform", "nn.contrib_conv2d_winograd_weight_transform",
    "nn.contrib_conv2d_winograd_nnpack_weight_transform", "nn.contrib_conv3d_winograd_without_weight_transform",
    "nn.contrib_conv3d_winograd_weight_transform", "nn.contrib_conv2d_gemm_without_weight_transform",
    "nn.contrib_conv2d_gemm_weight_transform", "nn.contrib_conv2d_NCHWc", "nn.contrib_depthwise_conv2d_NCHWc",
    "nn.contrib_conv2d_NCHWc_int8", "nn.contrib_dense_pack", "nn.sparse_conv2d",
    // nn: dense / matmul
    "nn.dense", "nn.matmul", "nn.batch_matmul", "nn.bitserial_dense", "nn.sparse_dense", "nn.sparse_transpose",
    "nn.sparse_add", "nn.internal.sparse_dense_padded", "nn.bitpack",
    // nn: activations and normalization
    "nn.bias_add", "nn.relu", "nn.leaky_relu", "nn.prelu", "nn.softmax", "nn.fast_softmax", "nn.log_softmax",
    "nn.batch_norm", "nn.layer_norm", "nn.group_norm", "nn.instance_norm", "nn.dropout", "nn.lrn",
    "nn.l2_normalize",
    // nn: pooling
    "nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d", "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d",
    "nn.max_pool2d_grad", "nn.avg_pool2d_grad", "nn.global_max_pool2d", "nn.global_avg_pool2d",
    "nn.adaptive_max_pool1d", "nn.adaptive_avg_pool1d", "nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d",
    "nn.adaptive_max_pool3d", "nn.adaptive_avg_pool3d",
    // nn: layout and shape
    "nn.pad", "nn.mirror_pad", "nn.batch_flatten", "nn.depth_to_space", "nn.space_to_depth", "nn.upsampling",
    "nn.upsampling3d", "nn.batch_to_space_nd", "nn.space_to_batch_nd", "nn.dilate", "nn.fifo_buffer",
    // nn: losses
    "nn.cross_entropy", "nn.cross_entropy_with_logits", "nn.nll_loss",
    // image
    "image.resize", "image.resize1d", "image.resize2d", "image.resize3d", "image.crop_and_resize",
    "image.dilation2d", "image.affine_grid", "image.grid_sample",
    // vision
    "vision.multibox_prior", "vision.multibox_transform_loc", "vision.get_valid_counts",
    "vision.non_max_suppression", "vision.all_class_non_max_suppression",
    "vision.regular_non_max_suppression", "vision.roi_align", "vision.roi_pool", "vision.proposal",
    "vision.yolo_reorg",
    // elementwise unary
    "log", "log2", "log10", "exp", "fast_exp", "erf", "fast_erf", "sqrt", "rsqrt", "sigmoid", "tanh", "fast_tanh",
    "sin", "sinh", "cos", "cosh", "tan", "asin", "asinh", "acos", "acosh", "atan", "atanh", "floor", "ceil",
    "trunc", "round", "sign", "abs", "negative", "logical_not", "bitwise_not", "isnan", "isfinite", "isinf",
    "copy", "clip", "fixed_point_multiply", "fixed_point_multiply_per_axis", "cast", "cast_like",
    "reinterpret", "zeros_like", "ones_like", "shape_of", "ndarray_size",
    // elementwise binary
    "add", "subtract", "multiply", "divide", "floor_divide", "trunc_divide", "power", "mod", "floor_mod",
    "trunc_mod", "maximum", "minimum", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "left_shift", "right_shift", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "where",
    // reductions
    "sum", "mean", "max", "min", "prod", "variance", "std", "mean_variance", "mean_std", "argmax", "argmin",
    "all", "any",
    // transforms
    "reshape", "reshape_like", "reverse_reshape", "contrib_reverse_reshape", "transpose", "squeeze",
    "expand_dims", "concatenate", "stack", "split", "strided_slice", "strided_set", "slice_like", "take",
    "gather", "gather_nd", "scatter", "scatter_add", "scatter_nd", "scatter_elements", "tile", "repeat",
    "reverse", "reverse_sequence", "layout_transform", "auto_scheduler_layout_transform",
    "meta_schedule_layout_transform", "one_hot", "full", "zeros", "ones", "full_like", "arange", "meshgrid",
    "broadcast_to", "broadcast_to_like", "collapse_sum_like", "collapse_sum_to", "argwhere", "unravel_index",
    "sparse_to_dense", "sparse_fill_empty_rows", "sparse_reshape", "matrix_set_diag", "adv_index",
    "sliding_window", "invert_permutation", "cumsum", "cumprod", "unique", "einsum", "trilu", "stft", "dft",
    "searchsorted", "embedding",
    // algorithms
    "argsort", "sort", "topk",
    // dynamic-shape variants
    "dyn.reshape", "dyn.broadcast_to", "dyn.zeros", "dyn.ones", "dyn.full", "dyn.tile", "dyn.one_hot",
    "dyn.strided_slice", "dyn.expand_dims", "dyn.squeeze", "dyn.sparse_to_dense", "dyn.topk",
    "dyn.image.resize2d", "dyn.nn.pad", "dyn.nn.upsampling", "dyn.nn.upsampling3d",
    // quantized
    "qnn.quantize", "qnn.dequantize", "qnn.requantize", "qnn.simulated_quantize", "qnn.simulated_dequantize",
    "qnn.add", "qnn.subtract", "qnn.mul", "qnn.conv2d", "qnn.conv2d_transpose", "qnn.dense", "qnn.batch_matmul",
    "qnn.concatenate", "qnn.rsqrt", "qnn.sqrt", "qnn.exp", "qnn.log", "qnn.erf", "qnn.abs", "qnn.sigmoid",
    "qnn.tanh", "qnn.hardswish", "qnn.leaky_relu", "qnn.softmax", "qnn.avg_pool2d",
    // annotations, devices, memory, random
    "on_device", "device_copy", "stop_fusion", "annotation.on_device", "annotation.stop_fusion",
    "annotation.checkpoint", "annotation.cast_hint", "annotation.bitpack_start", "annotation.bitpack_end",
    "annotation.compiler_begin", "annotation.compiler_end", "memory.alloc_storage", "memory.alloc_tensor",
    "memory.kill", "vm.shape_of", "vm.invoke_tvm_op", "vm.shape_func", "vm.reshape_tensor",
    "random.threefry_generate", "random.threefry_split", "random.uniform", "random.normal", "debug",
};

/// Fused-name spelling ('.' → '_') → registered name, and the most '_' pieces of any.
struct OpTable {
  std::unordered_map<std::string, std::string> by_spelling;
  size_t max_pieces = 1;
};

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    for (const char* name : kRelayOps) {
      std::string spelling = name;
      std::replace(spelling.begin(), spelling.end(), '.', '_');
      t.max_pieces = std::max<size_t>(t.max_pieces, 1 + std::count(spelling.begin(), spelling.end(), '_'));
      t.by_spelling.emplace(std::move(spelling), name);
    }
    return t;
  }();
  return table;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool all_hex(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

std::vector<std::string> split_underscores(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find('_', start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

/// TVM's readable-name limit (kMaxFuncNameLength in te_compiler_cache.cc): a longer
/// "fused_..." name is cut to this many characters and "_<hex hash>_" appended.
constexpr size_t kMaxFuncNameLength = 80;

/// The operator part of a function name: after `tvmgen_<module>_fused_` or `fused_`,
/// without the "_<n>" uniquifier or a truncation hash.
std::string_view operator_part(std::string_view name) {
  size_t fused = std::string_view::npos;  // index of "fused_"
  std::string_view rest = name;
  if (name.rfind("fused_", 0) == 0) {
    fused = 0;
  } else if (name.rfind("tvmgen_", 0) == 0) {
    size_t p = name.find("_fused_", 7);
    if (p != std::string_view::npos) {
      fused = p + 1;
    } else {
      // Not fused: tvmgen_<module>_<rest>, taking the module to be one piece ("default").
      size_t mod_end = name.find('_', 7);
      rest = mod_end == std::string_view::npos ? std::string_view() : name.substr(mod_end + 1);
    }
  }
  if (fused != std::string_view::npos) {
    rest = name.substr(fused + 6);
    // Truncated: "fused_" + 74 more characters, then "_<hex hash>_" (and maybe "<n>").
    std::string_view readable = name.substr(fused);
    if (readable.size() > kMaxFuncNameLength + 1 && readable[kMaxFuncNameLength] == '_') {
      std::string_view tail = readable.substr(kMaxFuncNameLength + 1);
      std::string_view hash = tail.substr(0, tail.find('_'));
      if (hash.size() <= 16 && all_hex(hash) && hash.size() < tail.size())
        return readable.substr(6, kMaxFuncNameLength - 6);
    }
  }
  // The uniquifier GetUniqueName appends: "_<digits>".
  size_t last = rest.rfind('_');
  if (last != std::string_view::npos && all_digits(rest.substr(last + 1))) rest = rest.substr(0, last);
  return rest;
}

// ---------------------------------------------------------------------------------------
// relay.txt scanner
// ---------------------------------------------------------------------------------------

enum class Tok { Ident, Var, Number, String, Comment, Punct };

struct Token {
  Tok kind;
  std::string text;  ///< Comment: the text between "/*" and "*/", trimmed
  unsigned line;
  unsigned col;
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// Renders a token for a diagnostic.
std::string show(const Token& t) {
  std::string s = t.kind == Tok::Comment ? "/* " + t.text + " */" : t.text;
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return "'" + s + "'";
}

class Scanner {
 public:
  Scanner(std::string_view text, unsigned first_line, const std::string& file)
      : text_(text), line_(first_line), file_(file) {}

  Expected<std::vector<Token>> run() {
    std::vector<Token> out;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') {
        advance();
        continue;
      }
      if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
        continue;
      }
      unsigned line = line_, col = col_;
      size_t start = pos_;
      if (c == '/' && peek(1) == '*') {
        size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) return error(line, col, "unterminated comment: no closing '*/'");
        std::string body = trim(text_.substr(pos_ + 2, end - pos_ - 2));
        while (pos_ < end + 2) advance();
        out.push_back({Tok::Comment, std::move(body), line, col});
      } else if (c == '"' || c == '\'') {
        advance();
        while (true) {
          if (pos_ >= text_.size() || text_[pos_] == '\n')
            return error(line, col, fmt::format("unterminated string: no closing {}", c));
          char d = text_[pos_];
          advance();
          if (d == '\\' && pos_ < text_.size() && text_[pos_] != '\n') advance();
          else if (d == c) break;
        }
        out.push_back({Tok::String, std::string(text_.substr(start, pos_ - start)), line, col});
      } else if ((c == '%' || c == '@') && (ident_char(peek(1)))) {
        // %x, %12, %p0.1 (tuple projection), @global
        advance();
        while (pos_ < text_.size() && ident_char(text_[pos_])) advance();
        while (c == '%' && peek(0) == '.' && std::isdigit(static_cast<unsigned char>(peek(1)))) {
          advance();
          while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) advance();
        }
        out.push_back({Tok::Var, std::string(text_.substr(start, pos_ - start)), line, col});
      } else if (ident_start(c)) {
        // nn.conv2d, relay.Constant: dotted identifiers
        advance();
        while (true) {
          while (pos_ < text_.size() && ident_char(text_[pos_])) advance();
          if (peek(0) == '.' && ident_start(peek(1))) advance();
          else break;
        }
        out.push_back({Tok::Ident, std::string(text_.substr(start, pos_ - start)), line, col});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        // 1, 1e-05f, 0.176777f, 3i64
        advance();
        while (pos_ < text_.size()) {
          char d = text_[pos_];
          if (ident_char(d) || d == '.') advance();
          else if ((d == '-' || d == '+') && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E')) advance();
          else break;
        }
        out.push_back({Tok::Number, std::string(text_.substr(start, pos_ - start)), line, col});
      } else if (c == '-' && peek(1) == '>') {
        advance();
        advance();
        out.push_back({Tok::Punct, "->", line, col});
      } else {
        advance();
        out.push_back({Tok::Punct, std::string(1, c), line, col});
      }
    }
    return out;
  }

 private:
  char peek(size_t k) const { return pos_ + k < text_.size() ? text_[pos_ + k] : '\0'; }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  Error error(unsigned line, unsigned col, const std::string& msg) const {
    return source_error(file_, line, col, msg);
  }

  std::string_view text_;
  size_t pos_ = 0;
  unsigned line_;
  unsigned col_ = 1;
  const std::string& file_;
};

bool is_open(const Token& t) {
  return t.kind == Tok::Punct && (t.text == "(" || t.text == "[" || t.text == "{");
}
bool is_close(const Token& t) {
  return t.kind == Tok::Punct && (t.text == ")" || t.text == "]" || t.text == "}");
}
bool is_punct(const Token& t, const char* p) { return t.kind == Tok::Punct && t.text == p; }
char closer_of(const std::string& open) { return open == "(" ? ')' : open == "[" ? ']' : '}'; }

/// match[i] = index of the bracket matching token i (for brackets), else -1.
Expected<std::vector<long>> match_brackets(const std::vector<Token>& toks, const std::string& file) {
  std::vector<long> match(toks.size(), -1);
  std::vector<size_t> stack;
  for (size_t i = 0; i < toks.size(); ++i) {
    const Token& t = toks[i];
    if (is_open(t)) {
      stack.push_back(i);
    } else if (is_close(t)) {
      if (stack.empty()) return source_error(file, t.line, t.col, fmt::format("unmatched '{}'", t.text));
      const Token& o = toks[stack.back()];
      if (t.text[0] != closer_of(o.text))
        return source_error(file, t.line, t.col,
                            fmt::format("'{}' does not close the '{}' at {}:{}", t.text, o.text, o.line, o.col));
      match[i] = static_cast<long>(stack.back());
      match[stack.back()] = static_cast<long>(i);
      stack.pop_back();
    }
  }
  if (!stack.empty()) {
    const Token& o = toks[stack.back()];
    return source_error(file, o.line, o.col, fmt::format("unterminated '{}': no matching '{}'", o.text, closer_of(o.text)));
  }
  return match;
}

/// Words that are followed by '(' without being calls.
bool is_keyword(const std::string& s) {
  return s == "fn" || s == "let" || s == "if" || s == "else" || s == "match" || s == "ref" || s == "free_var";
}

/// An integer as relay.txt prints it ("3", "-1", "3i64"); nullopt for anything else.
std::optional<int64_t> int_literal(std::string_view s) {
  bool neg = !s.empty() && s.front() == '-';
  if (neg) s.remove_prefix(1);
  if (s.size() > 3 && (s.substr(s.size() - 3) == "i64" || s.substr(s.size() - 3) == "i32")) s.remove_suffix(3);
  if (!all_digits(s) || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return neg ? -v : v;
}

/// A floating-point number as relay.txt prints it ("1e-05f", "0.5f", "2.0", "inf").
std::optional<double> float_literal(std::string_view s) {
  std::string t(s);
  if (!t.empty() && (t.back() == 'f' || t.back() == 'h')) t.pop_back();
  if (t.size() > 4 && (t.compare(t.size() - 3, 3, "f32") == 0 || t.compare(t.size() - 3, 3, "f64") == 0 ||
                       t.compare(t.size() - 3, 3, "f16") == 0))
    t.resize(t.size() - 3);
  if (t.empty() || t.size() > 64) return std::nullopt;
  for (char c : t)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
      return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

/// The tokens [a, b) as text (comments left out): joined as TVM prints them, with a
/// space after each comma and nowhere else.
std::string tokens_text(const std::vector<Token>& toks, size_t a, size_t b) {
  std::string out;
  for (size_t i = a; i < b; ++i) {
    if (toks[i].kind == Tok::Comment) continue;
    out += toks[i].text;
    if (is_punct(toks[i], ",")) out += ' ';
  }
  return out;
}

/// One attribute's value, tokens [a, b): typed where relay.txt's printing is unambiguous,
/// kept as text otherwise (never dropped).
RelayAttr make_attr(const std::vector<Token>& toks, size_t a, size_t b, const std::string& key) {
  RelayAttr attr;
  attr.key = key;
  // A value may be followed by its own annotation (`1f /* ty=float32 */`): not part of it.
  while (b > a && toks[b - 1].kind == Tok::Comment) --b;
  auto number = [&](size_t i, size_t* used) -> std::optional<std::string> {
    if (i < b && toks[i].kind == Tok::Number) {
      *used = 1;
      return toks[i].text;
    }
    if (i + 1 < b && is_punct(toks[i], "-") && toks[i + 1].kind == Tok::Number) {
      *used = 2;
      return "-" + toks[i + 1].text;
    }
    return std::nullopt;
  };
  size_t used = 0;
  if (b == a + 1 && toks[a].kind == Tok::Ident && (toks[a].text == "True" || toks[a].text == "False")) {
    attr.kind = RelayAttr::Kind::Bool;
    attr.ints = {toks[a].text == "True" ? 1 : 0};
    return attr;
  }
  if (b == a + 1 && toks[a].kind == Tok::Ident && toks[a].text == "None") {
    attr.kind = RelayAttr::Kind::None;
    return attr;
  }
  if (b == a + 1 && toks[a].kind == Tok::String && toks[a].text.size() >= 2) {
    attr.kind = RelayAttr::Kind::String;
    attr.text = toks[a].text.substr(1, toks[a].text.size() - 2);
    return attr;
  }
  if (auto n = number(a, &used); n && a + used == b) {
    if (auto i = int_literal(*n)) {
      attr.kind = RelayAttr::Kind::Int;
      attr.ints = {*i};
      return attr;
    }
    if (auto f = float_literal(*n)) {
      attr.kind = RelayAttr::Kind::Float;
      attr.floats = {*f};
      return attr;
    }
  }
  if (b > a + 1 && is_punct(toks[a], "[") && is_punct(toks[b - 1], "]")) {
    // A list of numbers: all integers → Ints, else Floats (an empty list is Ints).
    std::vector<std::string> items;
    bool ok = true;
    for (size_t i = a + 1; i < b - 1 && ok;) {
      auto n = number(i, &used);
      if (!n) {
        ok = false;
        break;
      }
      items.push_back(*n);
      i += used;
      if (i < b - 1) {
        if (!is_punct(toks[i], ",")) ok = false;
        ++i;
      }
    }
    if (ok) {
      std::vector<int64_t> ints;
      std::vector<double> floats;
      bool all_int = true;
      for (const std::string& it : items) {
        auto i = int_literal(it);
        auto f = i ? std::optional<double>(static_cast<double>(*i)) : float_literal(it);
        if (!f) {
          ok = false;
          break;
        }
        if (!i) all_int = false;
        if (i) ints.push_back(*i);
        floats.push_back(*f);
      }
      if (ok) {
        attr.kind = all_int ? RelayAttr::Kind::Ints : RelayAttr::Kind::Floats;
        if (all_int) attr.ints = std::move(ints);
        else attr.floats = std::move(floats);
        return attr;
      }
    }
  }
  attr.kind = RelayAttr::Kind::Text;
  attr.text = tokens_text(toks, a, b);
  return attr;
}

/// The type of a positional argument, tokens [a, b): a variable's (a parameter or a
/// binding), or the annotation that follows it (a nested call, a constant, a literal).
std::string argument_type(const std::vector<Token>& toks, size_t a, size_t b,
                          const std::unordered_map<std::string, std::string>& type_of,
                          const std::unordered_map<size_t, std::string>& call_type) {
  size_t last = b;
  while (last > a && toks[last - 1].kind == Tok::Comment) --last;
  if (last == a + 1 && toks[a].kind == Tok::Var) {
    auto it = type_of.find(toks[a].text);
    if (it != type_of.end()) return it->second;
  }
  if (last < b && toks[last].text.rfind("ty=", 0) == 0) return trim(std::string_view(toks[last].text).substr(3));
  if (last > a) {
    auto it = call_type.find(last - 1);
    if (it != call_type.end()) return it->second;
  }
  return "";
}

/// The operator calls of one section: `fn (<params>) [-> <type>] { <body> } [/* ty=... */]`.
Expected<std::vector<RelayOp>> parse_section(const std::vector<Token>& toks, const std::string& name,
                                             unsigned header_line, const std::string& file) {
  auto match = match_brackets(toks, file);
  if (!match) return match.error();
  if (toks.empty()) return source_error(file, header_line, 1, fmt::format("section '{}' holds no function", name));
  if (toks[0].kind != Tok::Ident || toks[0].text != "fn" || toks.size() < 2 || !is_punct(toks[1], "("))
    return source_error(file, toks[0].line, toks[0].col,
                        fmt::format("expected 'fn (' to begin the function of '{}', got {}", name, show(toks[0])));
  // Skip the parameters and the result type to the body's '{'.
  size_t i = static_cast<size_t>((*match)[1]) + 1;
  while (i < toks.size() && !is_punct(toks[i], "{")) {
    if (is_open(toks[i])) i = static_cast<size_t>((*match)[i]);
    ++i;
  }
  if (i >= toks.size()) {
    const Token& last = toks.back();
    return source_error(file, last.line, last.col, fmt::format("expected '{{' to begin the body of '{}'", name));
  }
  const size_t body_begin = i + 1;
  const size_t body_end = static_cast<size_t>((*match)[i]);
  for (size_t k = body_end + 1; k < toks.size(); ++k)
    if (toks[k].kind != Tok::Comment)
      return source_error(file, toks[k].line, toks[k].col,
                          fmt::format("unexpected {} after the function of '{}'", show(toks[k]), name));

  // Types of the parameters: `%p0: Tensor[...] /* ty=Tensor[...] */` (the annotation that
  // follows a parameter's type, else the type tokens as printed).
  std::unordered_map<std::string, std::string> type_of;
  {
    const size_t params_end = static_cast<size_t>((*match)[1]);
    for (size_t k = 2; k < params_end; ++k) {
      if (toks[k].kind != Tok::Var || k + 1 >= params_end || !is_punct(toks[k + 1], ":")) continue;
      size_t j = k + 2;
      std::string printed;
      while (j < params_end && !is_punct(toks[j], ",")) {
        if (toks[j].kind == Tok::Comment) {
          if (toks[j].text.rfind("ty=", 0) == 0) printed = trim(std::string_view(toks[j].text).substr(3));
          ++j;
          continue;
        }
        if (is_open(toks[j])) j = static_cast<size_t>((*match)[j]);
        ++j;
      }
      type_of[toks[k].text] = printed;
      k = j;
    }
  }

  // Walk the body. A call is recorded at its closing ')', so arguments come before the
  // call that consumes them (evaluation order; for TVM's one-binding-per-line text
  // this is also the order of appearance).
  std::vector<RelayOp> ops;
  std::unordered_map<size_t, size_t> pending;  // index of a call's ')' → index of its name
  std::unordered_map<size_t, std::string> call_type;  // index of a call's ')' → its ty= annotation
  auto annotation_after = [&](size_t k) -> std::string {
    if (k + 1 < toks.size() && toks[k + 1].kind == Tok::Comment && toks[k + 1].text.rfind("ty=", 0) == 0)
      return trim(std::string_view(toks[k + 1].text).substr(3));
    return "";
  };
  for (size_t k = body_begin; k < body_end; ++k) {
    const Token& t = toks[k];
    if (t.kind == Tok::Var && k + 1 < body_end && is_punct(toks[k + 1], "=")) {
      // `%12 = op(...) /* ty=... */;`: the binding's type, for the calls that read %12.
      size_t j = k + 2;
      while (j < body_end && !is_punct(toks[j], ";")) {
        if (is_open(toks[j])) j = static_cast<size_t>((*match)[j]);
        ++j;
      }
      // The annotation right before the ';' is the bound expression's type.
      if (j > k + 2 && toks[j - 1].kind == Tok::Comment && toks[j - 1].text.rfind("ty=", 0) == 0)
        type_of[t.text] = trim(std::string_view(toks[j - 1].text).substr(3));
      continue;
    }
    if (t.kind == Tok::Ident && k + 1 < body_end && is_punct(toks[k + 1], "=")) {
      // An attribute `name=value` (`%x = ...` bindings start with a Var): its value
      // (`VirtualDevice(...)`, `[1, 1]`, ...) holds no operator calls.
      size_t j = k + 2;
      while (j < body_end && !is_punct(toks[j], ",") && !is_close(toks[j])) {
        if (is_open(toks[j])) j = static_cast<size_t>((*match)[j]);
        ++j;
      }
      k = j - 1;
      continue;
    }
    if (t.kind == Tok::Ident && k + 1 < body_end && is_punct(toks[k + 1], "(") && !is_keyword(t.text)) {
      pending.emplace(static_cast<size_t>((*match)[k + 1]), k);
      continue;
    }
    if (is_punct(t, ")")) {
      auto it = pending.find(k);
      if (it == pending.end()) continue;
      const size_t name_at = it->second;
      pending.erase(it);
      RelayOp op(toks[name_at].text, annotation_after(k));
      call_type[k] = op.type;
      // The call's arguments, split at top-level commas: `key=value` attributes, the
      // rest positional (a variable, a nested call, a constant with its annotation).
      size_t a = name_at + 2;
      while (a < k) {
        size_t b = a;
        while (b < k && !is_punct(toks[b], ",")) {
          if (is_open(toks[b])) b = static_cast<size_t>((*match)[b]);
          ++b;
        }
        if (b > a) {
          if (toks[a].kind == Tok::Ident && b > a + 1 && is_punct(toks[a + 1], "=")) {
            for (const RelayAttr& seen : op.attrs)
              if (seen.key == toks[a].text)
                return source_error(file, toks[a].line, toks[a].col,
                                    fmt::format("duplicate attribute '{}' of {}", toks[a].text, op.name));
            op.attrs.push_back(make_attr(toks, a + 2, b, toks[a].text));
          } else {
            op.input_types.push_back(argument_type(toks, a, b, type_of, call_type));
          }
        }
        a = b + 1;
      }
      // Attributes in key order: the JSON form is an object, read back in key order.
      std::sort(op.attrs.begin(), op.attrs.end(),
                [](const RelayAttr& x, const RelayAttr& y) { return x.key < y.key; });
      ops.push_back(std::move(op));
    }
  }
  return ops;
}

}  // namespace

std::vector<RelayOp> decode_fused_name(const std::string& function_name) {
  // The graph executor's built-ins (__nop, __copy) are no Relay function.
  if (function_name.rfind("__", 0) == 0) return {};
  std::string_view part = operator_part(function_name);
  if (part.empty()) return {};
  std::vector<std::string> pieces = split_underscores(part);
  pieces.erase(std::remove(pieces.begin(), pieces.end(), std::string()), pieces.end());

  const OpTable& table = op_table();
  std::vector<RelayOp> ops;
  std::string unknown;  // consecutive unmatched pieces, kept together ("my_custom_op")
  auto flush_unknown = [&] {
    if (!unknown.empty()) ops.push_back({std::move(unknown), ""});
    unknown.clear();
  };
  for (size_t i = 0; i < pieces.size();) {
    size_t matched = 0;
    for (size_t n = std::min(table.max_pieces, pieces.size() - i); n >= 1 && matched == 0; --n) {
      std::string candidate = pieces[i];
      for (size_t k = 1; k < n; ++k) candidate += "_" + pieces[i + k];
      auto it = table.by_spelling.find(candidate);
      if (it != table.by_spelling.end()) {
        flush_unknown();
        ops.push_back({it->second, ""});
        matched = n;
      }
    }
    if (matched == 0) {
      if (!unknown.empty()) unknown += '_';
      unknown += pieces[i];
      matched = 1;
    }
    i += matched;
  }
  flush_unknown();
  return ops;
}

std::optional<RelayTensorType> parse_relay_tensor_type(std::string_view t) {
  auto eat = [&](std::string_view p) {
    if (t.substr(0, p.size()) != p) return false;
    t.remove_prefix(p.size());
    return true;
  };
  auto spaces = [&] {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  };
  RelayTensorType out;
  if (!eat("Tensor[(")) return std::nullopt;
  spaces();
  while (!eat(")")) {
    if (t.empty() || !std::isdigit(static_cast<unsigned char>(t.front()))) return std::nullopt;
    int64_t d = 0;
    while (!t.empty() && std::isdigit(static_cast<unsigned char>(t.front()))) {
      if (d > (int64_t(1) << 50)) return std::nullopt;
      d = d * 10 + (t.front() - '0');
      t.remove_prefix(1);
    }
    if (!eat("i64")) eat("i32");
    out.shape.push_back(d);
    if (out.shape.size() > 64) return std::nullopt;
    spaces();
    if (eat(",")) spaces();
    else if (t.empty() || t.front() != ')') return std::nullopt;
  }
  if (!eat(",")) return std::nullopt;
  spaces();
  size_t end = t.find(']');
  if (end == std::string_view::npos || end == 0 || end + 1 != t.size()) return std::nullopt;
  out.dtype = std::string(t.substr(0, end));
  return out;
}

Expected<std::map<std::string, std::vector<RelayOp>>> parse_relay_text(std::string_view text,
                                                                        const std::string& file) {
  struct Section {
    std::string name;
    unsigned header_line;
    size_t begin;  ///< offset of the line after the header
    size_t end;    ///< offset of the next header (or the end)
  };
  std::vector<Section> sections;
  std::map<std::string, unsigned> seen;

  size_t pos = 0;
  unsigned line = 1;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view l = text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    if (l.rfind("// ", 0) == 0) {
      size_t name_begin = 3;
      while (name_begin < l.size() && (l[name_begin] == ' ' || l[name_begin] == '\t')) ++name_begin;
      size_t name_end = name_begin;
      while (name_end < l.size() && !std::isspace(static_cast<unsigned char>(l[name_end]))) ++name_end;
      if (name_end == name_begin)
        return source_error(file, line, static_cast<unsigned>(name_begin + 1),
                            "expected a function name in the section header '// <function> (<target>)'");
      std::string name(l.substr(name_begin, name_end - name_begin));
      if (!sections.empty()) sections.back().end = pos;
      auto [it, fresh] = seen.emplace(name, line);
      if (!fresh)
        return source_error(file, line, static_cast<unsigned>(name_begin + 1),
                            fmt::format("duplicate section '{}' (first at line {})", name, it->second));
      sections.push_back({std::move(name), line, next, text.size()});
    } else if (sections.empty()) {
      size_t nonblank = 0;
      while (nonblank < l.size() && std::isspace(static_cast<unsigned char>(l[nonblank]))) ++nonblank;
      if (nonblank < l.size())
        return source_error(file, line, static_cast<unsigned>(nonblank + 1),
                            "expected a section header '// <function> (<target>)'");
    }
    pos = next;
    ++line;
  }
  if (sections.empty()) return source_error(file, 1, 1, "no section '// <function> (<target>)' found");

  std::map<std::string, std::vector<RelayOp>> out;
  for (const Section& s : sections) {
    if (s.name == "__tvm_main__") continue;  // the whole model, not one fused function
    auto toks = Scanner(text.substr(s.begin, s.end - s.begin), s.header_line + 1, file).run();
    if (!toks) return toks.error();
    auto ops = parse_section(*toks, s.name, s.header_line, file);
    if (!ops) return ops.error();
    out.emplace(s.name, ops.take());
  }
  return out;
}

}  // namespace kdflow

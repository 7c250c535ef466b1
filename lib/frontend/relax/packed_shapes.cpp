// packed_shapes.cpp — the packed params' shapes from check_tuple_info's annotation
// (packed_shapes.h). A small recursive-descent reader of the one form TVM prints for a tuple
// of tensors; anything else is refused by position.
#include "frontend/relax/packed_shapes.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kdflow/support/dtype.h"

namespace kdflow {

namespace {

class AnnotationReader {
 public:
  AnnotationReader(std::string_view s, const std::map<std::string, int64_t>& dims, const std::string& where)
      : s_(s), dims_(dims), where_(where) {}

  Expected<ParamsFile> read() {
    ParamsFile pf;
    pf.file = where_;
    // TVM 0.26 and 0.27 print the tuple as T.Tuple(...), 0.25 as R.Tuple(...).
    if (!(word("T.Tuple") || word("R.Tuple")) || !take('(')) return fail("expected T.Tuple( or R.Tuple(");
    skip();
    if (peek() == ')') return ++pos_, pf;
    for (;;) {
      ParamArray a;
      a.name = fmt::format("packed_params[{}]", pf.arrays.size());
      if (Status st = tensor(&a); !st) return st.error();
      pf.arrays.push_back(std::move(a));
      if (pf.arrays.size() > 1'000'000) return fail("more than a million params");
      skip();
      if (take(',')) continue;
      if (take(')')) return pf;
      return fail("expected , or ) after a tensor");
    }
  }

 private:
  Error fail(const std::string& why) const {
    return file_error(where_, fmt::format("character {} of the packed params' annotation: {}", pos_, why));
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool take(char c) {
    skip();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool word(std::string_view w) {
    skip();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  std::string_view identifier() {
    skip();
    const size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    return s_.substr(b, pos_ - b);
  }
  bool integer(int64_t* v) {
    skip();
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), *v);
    if (ec != std::errc() || *v < 0) return false;
    pos_ = static_cast<size_t>(p - s_.data());
    return true;
  }

  /// A dimension: 64, T.int64(64), or a symbolic name bound by --param-dim.
  Status dim(int64_t* v) {
    skip();
    if (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (!integer(v)) return fail("a dimension out of range");
      return Status::ok();
    }
    if (word("T.int64(") || word("T.int32(")) {
      if (!integer(v) || !take(')')) return fail("expected T.int64(N)");
      return Status::ok();
    }
    const std::string_view name = identifier();
    if (name.empty()) return fail("expected a dimension (a number or a name)");
    skip();
    if (peek() != ',' && peek() != ')') return fail(fmt::format("dimension {}... is an expression, not a name", name));
    auto it = dims_.find(std::string(name));
    if (it == dims_.end())
      return file_error(where_,
                        fmt::format("the packed params have a symbolic dimension {}, which only the weights state: "
                                    "give its value with --param-dim {}=N",
                                    name, name),
                        ExitCode::Usage);
    *v = it->second;
    return Status::ok();
  }

  /// R.Tensor((d0, d1, ...), dtype="float32")
  Status tensor(ParamArray* a) {
    if (!word("R.Tensor") || !take('(') || !take('('))
      return fail("expected R.Tensor((...), dtype=...): only a tuple of tensors is read");
    skip();
    if (peek() != ')')
      for (;;) {
        int64_t v = 0;
        if (Status st = dim(&v); !st) return st;
        a->shape.push_back(v);
        if (a->shape.size() > 32) return fail("more than 32 dimensions");
        if (take(',')) {
          skip();
          if (peek() == ')') break;  // (64,)
          continue;
        }
        break;
      }
    if (!take(')') || !take(',') || !word("dtype=") || !take('"')) return fail("expected ), dtype=\"...\"");
    const size_t b = pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') ++pos_;
    const std::string dtype(s_.substr(b, pos_ - b));
    if (!take('"') || !take(')')) return fail("expected the dtype's closing quote and )");
    std::optional<DType> dt = parse_dtype(dtype);
    if (!dt) return fail(fmt::format("dtype {} is not one kdflow reads", dtype));
    a->dtype = *dt;
    uint64_t bytes = dtype_element_bytes(*dt);
    for (int64_t d : a->shape)
      if (!checked_mul(bytes, static_cast<uint64_t>(d), &bytes) || bytes > kMaxParamsFileBytes)
        return fail("a param above 64 GiB");
    a->nbytes = bytes;
    return Status::ok();
  }

  std::string_view s_;
  const std::map<std::string, int64_t>& dims_;
  std::string where_;
  size_t pos_ = 0;
};

}  // namespace

Expected<ParamsFile> parse_packed_annotation(std::string_view text, const std::map<std::string, int64_t>& dims,
                                             const std::string& where) {
  return AnnotationReader(text, dims, where).read();
}

Expected<ParamsFile> packed_params_from_build(const VmExecutable& ex, const std::map<std::string, int64_t>& dims,
                                              const std::string& file) {
  std::string found, found_in;
  for (const VmFunction& f : ex.functions) {
    if (f.kind != VmFunction::Kind::Bytecode) continue;
    for (int64_t pc = f.start_instr; pc >= 0 && pc < f.end_instr && static_cast<size_t>(pc) < ex.code.size(); ++pc) {
      const VmInstruction& ins = ex.code[static_cast<size_t>(pc)];
      if (ins.op != VmInstruction::Op::Call || ins.func < 0 || static_cast<size_t>(ins.func) >= ex.functions.size() ||
          ex.functions[static_cast<size_t>(ins.func)].name != "vm.builtin.check_tuple_info" || ins.args.size() != 3 ||
          ins.args[2].kind != VmOperand::Kind::Constant || ins.args[2].value < 0 ||
          static_cast<size_t>(ins.args[2].value) >= ex.constants.size())
        continue;
      const VmConstant& c = ex.constants[static_cast<size_t>(ins.args[2].value)];
      if (c.kind != VmConstant::Kind::String) continue;
      const size_t at = c.text.find("annotation=");
      if (at == std::string::npos) continue;
      std::string text = c.text.substr(at + 11);
      if (found.empty()) {
        found = std::move(text);
        found_in = f.name;
      } else if (text != found) {
        return file_error(file, fmt::format("functions {} and {} check packed params of other shapes; give the "
                                            "params file (--params)",
                                            found_in, f.name));
      }
    }
  }
  if (found.empty())
    return file_error(file, "no params file, and no function checks its packed params' shapes "
                            "(vm.builtin.check_tuple_info with an annotation): give the params file (--params)");
  Expected<ParamsFile> pf = parse_packed_annotation(
      found, dims, fmt::format("{} (function {}: the packed params' shapes, no weights)", file, found_in));
  if (!pf) return pf;
  // MLC-LLM's builds carry their params' names in _metadata's JSON ({"params": [{"name": ...}]}).
  for (const VmConstant& c : ex.constants) {
    if (c.kind != VmConstant::Kind::String || c.text.empty() || c.text[0] != '{' ||
        c.text.find("\"params\"") == std::string::npos)
      continue;
    const nlohmann::json j = nlohmann::json::parse(c.text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("params") || !j["params"].is_array() || j["params"].size() != pf->arrays.size())
      continue;
    std::vector<std::string> names;
    for (const nlohmann::json& p : j["params"])
      if (p.is_object() && p.contains("name") && p["name"].is_string()) names.push_back(p["name"].get<std::string>());
    if (names.size() != pf->arrays.size()) continue;
    for (size_t k = 0; k < names.size(); ++k) pf->arrays[k].name = names[k];
    break;
  }
  return pf;
}

Status parse_param_dim(const std::string& spec, std::map<std::string, int64_t>* dims) {
  const size_t eq = spec.find('=');
  int64_t v = 0;
  const char* b = spec.data() + (eq == std::string::npos ? 0 : eq + 1);
  auto [p, ec] = std::from_chars(b, spec.data() + spec.size(), v);
  if (eq == std::string::npos || eq == 0 || ec != std::errc() || p != spec.data() + spec.size() || v < 0)
    return Error{fmt::format("error: --param-dim {}: expected NAME=N (a symbolic dimension of the packed params)",
                             spec),
                 ExitCode::Usage};
  (*dims)[spec.substr(0, eq)] = v;
  return Status::ok();
}

}  // namespace kdflow

// signatures.cpp — TVM's function signatures in tvm-ffi host C (signatures.h).
#include "frontend/relax/signatures.h"

#include <cctype>
#include <map>

namespace kdflow::detail {

namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

/// Splits at top-level commas (outside (), [] ).
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

/// `T.int64(400)` → `400` wherever it appears.
std::string plain(std::string d) {
  for (const char* cast : {"T.int64(", "T.int32(", "T.int16(", "T.int8("}) {
    const std::string c = cast;
    for (size_t at; (at = d.find(c)) != std::string::npos;) {
      size_t close = d.find(')', at + c.size());
      if (close == std::string::npos) return d;
      d = d.substr(0, at) + d.substr(at + c.size(), close - at - c.size()) + d.substr(close + 1);
    }
  }
  return trim(d);
}

}  // namespace

std::optional<std::vector<std::vector<std::string>>> call_dimension_names(
    const std::vector<SignatureParam>& sig, const std::vector<std::vector<int64_t>>& shapes) {
  if (sig.size() != shapes.size()) return std::nullopt;
  std::map<std::string, int64_t> value;  // symbol → its value in this call
  std::vector<std::vector<std::string>> names(sig.size());
  for (size_t i = 0; i < sig.size(); ++i) {
    if (!sig[i].tensor || sig[i].dims.size() != shapes[i].size()) return std::nullopt;
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const std::string& e = sig[i].dims[d];
      if (is_literal_dim(e)) {
        if (std::to_string(shapes[i][d]) != e) return std::nullopt;
        names[i].emplace_back();
      } else {
        if (auto [v, fresh] = value.try_emplace(e, shapes[i][d]); !fresh && v->second != shapes[i][d])
          return std::nullopt;
        names[i].push_back(e);
      }
    }
  }
  return names;
}

bool is_literal_dim(const std::string& dim) {
  if (dim.empty()) return false;
  size_t i = dim[0] == '-' ? 1 : 0;
  if (i == dim.size()) return false;
  for (; i < dim.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(dim[i]))) return false;
  return true;
}

SignatureIndex::SignatureIndex(const std::string& host_c) : host_c_(host_c) {
  // Every quote with a '(' within kMaxName bytes after it: the text between is the only NAME
  // without '(' that `"NAME(` can match there. The first quote for each text is kept.
  const std::string_view text(host_c);
  for (size_t q = text.find('"'); q != std::string_view::npos; q = text.find('"', q + 1)) {
    const std::string_view after = text.substr(q + 1, kMaxName + 1);
    const size_t paren = after.find('(');
    if (paren != std::string_view::npos) first_.try_emplace(after.substr(0, paren), q);
  }
}

size_t SignatureIndex::find(const std::string& function) const {
  if (function.size() > kMaxName || function.find('(') != std::string::npos)
    return host_c_.find("\"" + function + "(");
  auto it = first_.find(std::string_view(function));
  return it == first_.end() ? std::string::npos : it->second;
}

std::optional<std::vector<SignatureParam>> find_signature(const std::string& host_c, const std::string& function,
                                                          const SignatureIndex* index) {
  const std::string open = "\"" + function + "(";
  size_t at = index ? index->find(function) : host_c.find(open);
  if (at == std::string::npos) return std::nullopt;
  size_t begin = at + open.size();
  size_t end = host_c.find("\"", begin);  // the literal's end: TVM's signature holds no quote or escape
  if (end == std::string::npos || end == begin || host_c[end - 1] != ')') return std::nullopt;
  const std::string body = host_c.substr(begin, end - 1 - begin);
  if (body.find('\\') != std::string::npos || body.find('\n') != std::string::npos) return std::nullopt;
  int depth = 0;  // balanced brackets, or it is not a signature
  for (char c : body) {
    depth += c == '(' || c == '[' ? 1 : c == ')' || c == ']' ? -1 : 0;
    if (depth < 0) return std::nullopt;
  }
  if (depth != 0) return std::nullopt;
  std::vector<SignatureParam> params;
  for (const std::string& p : split_top(body)) {
    size_t colon = p.find(':');
    if (colon == std::string::npos) return std::nullopt;
    SignatureParam sp;
    sp.name = trim(p.substr(0, colon));
    const std::string type = trim(p.substr(colon + 1));
    if (type.rfind("Tensor([", 0) == 0 && type.back() == ')') {
      size_t close = type.find(']');
      if (close == std::string::npos) return std::nullopt;
      sp.tensor = true;
      for (const std::string& d : split_top(type.substr(8, close - 8))) sp.dims.push_back(plain(d));
      size_t comma = type.find(',', close);
      sp.dtype = comma == std::string::npos ? std::string() : trim(type.substr(comma + 1, type.size() - 2 - comma));
    }
    params.push_back(std::move(sp));
  }
  return params;
}

}  // namespace kdflow::detail

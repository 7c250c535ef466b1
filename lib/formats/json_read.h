// json_read.h — private helpers shared by the JSON readers of kdflow_core (graph.json,
// *.tvm_meta.json): parsing with a depth cap and line:col syntax errors, checked integer
// access, and quoting of input text inside diagnostics. Not installed, not public API.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kdflow/support/diag.h"

namespace kdflow::detail {

using json = nlohmann::json;

/// Deepest nesting of arrays and objects accepted in a JSON input. TVM's files nest
/// at most 5 levels; the cap keeps hostile input from exhausting the stack in the
/// recursive parts of nlohmann/json (dump, copies, comparisons).
inline constexpr int kMaxJsonDepth = 64;

/// 1-based line and byte column of `offset` in `text` (offset == size is the end).
inline void line_col(std::string_view text, size_t offset, unsigned* line, unsigned* col) {
  if (offset > text.size()) offset = text.size();
  unsigned l = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++l;
      line_start = i + 1;
    }
  }
  *line = l;
  *col = static_cast<unsigned>(offset - line_start + 1);
}

/// Offset of the first '[' or '{' (outside strings) that opens level max_depth + 1;
/// text.size() when there is none.
inline size_t find_too_deep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return text.size();
}

/// nlohmann's parse_error text without its "[json.exception...] parse error at line
/// L, column C: " prefix (we print our own position).
inline std::string parse_error_text(const std::string& what) {
  size_t p = what.find("parse error");
  if (p != std::string::npos) {
    size_t colon = what.find(": ", p);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  return what;
}

/// Parses JSON text. Syntax errors → `file:line:col: error: ...`; nesting deeper than
/// kMaxJsonDepth → the same shape at the opening bracket. Never throws.
inline Expected<json> parse_json_text(std::string_view text, const std::string& file) {
  struct TooDeep {};
  auto guard = [](int depth, json::parse_event_t event, json&) {
    // `depth` counts the containers already open around this one.
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  unsigned line = 0, col = 0;
  try {
    return json::parse(text.begin(), text.end(), guard, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const TooDeep&) {
    line_col(text, find_too_deep(text, kMaxJsonDepth), &line, &col);
    return source_error(file, line, col, "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  } catch (const json::parse_error& e) {
    // e.byte counts the characters read, the offending one included.
    line_col(text, e.byte == 0 ? 0 : e.byte - 1, &line, &col);
    return source_error(file, line, col, parse_error_text(e.what()));
  } catch (const json::exception& e) {
    return file_error(file, e.what());
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while parsing JSON", ExitCode::Software);
  }
}

/// Input text for a diagnostic: JSON-quoted (escapes control characters), cut at 64 bytes.
inline std::string quote_input(const std::string& s) {
  std::string cut = s.size() > 64 ? s.substr(0, 64) : s;
  std::string out = "\"";
  for (unsigned char c : cut) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (s.size() > 64) out += "...";
  return out;
}

/// What a JSON value is, for "expected X, got Y" messages.
inline std::string kind_of(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number with a fraction or exponent";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_boolean()) return "a boolean";
  return "null";
}

/// The integer value of `v` if it is a JSON integer within [lo, hi].
inline bool int_in_range(const json& v, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return false;
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    x = static_cast<int64_t>(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

/// Decimal digits only (no sign, no spaces) with a value of at most `max`.
inline bool parse_digits(const std::string& s, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

/// `obj[key]` or nullptr (obj must be an object).
inline const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

/// JSON pointer helpers: "/a" + "/3", "/a" + "/key" (escaped).
inline std::string ptr_at(const std::string& base, size_t index) { return base + "/" + std::to_string(index); }
inline std::string ptr_at(const std::string& base, const std::string& key) {
  return base + "/" + json_pointer_token(key);
}

}  // namespace kdflow::detail

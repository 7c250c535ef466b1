// file_names.cpp — see kdflow/support/file_names.h.
#include "kdflow/support/file_names.h"

#include "kdflow/support/io.h"

namespace kdflow {
namespace {

bool kept(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_name(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (kept(c)) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> decode_name(std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (size_t i = 0; i < part.size(); ++i) {
    if (part[i] != '%') {
      out += part[i];
      continue;
    }
    if (i + 2 >= part.size()) return std::nullopt;
    const int hi = hex_value(part[i + 1]), lo = hex_value(part[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string input_file_name(std::string_view name) { return "input_" + encode_name(name) + ".npy"; }

std::vector<std::string> input_file_candidates(std::string_view name) {
  std::vector<std::string> out{input_file_name(name)};
  const std::string raw = "input_" + std::string(name) + ".npy";
  if (raw != out.front() && name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos)
    out.push_back(raw);
  return out;
}

std::string find_input_file(const std::string& dir, std::string_view name) {
  for (const std::string& f : input_file_candidates(name)) {
    std::string path = dir.empty() ? f : dir + "/" + f;
    if (file_exists(path)) return path;
  }
  return "";
}

bool names_match(std::string_view typed, std::string_view name) {
  if (typed == name) return true;
  if (typed == encode_name(name)) return true;
  std::optional<std::string> d = decode_name(typed);
  return d && *d == name;
}

std::optional<std::pair<std::string, std::string>> split_name_value(std::string_view spec,
                                                                    const std::vector<std::string>& names) {
  const size_t first = spec.find('=');
  if (first == std::string_view::npos) return std::nullopt;
  // The longest NAME first: a name holding `=` wins over its own prefix.
  for (size_t eq = spec.size(); eq > first;) {
    if (spec[--eq] != '=') continue;
    const std::string_view typed = spec.substr(0, eq);
    for (const std::string& n : names)
      if (names_match(typed, n)) return std::make_pair(n, std::string(spec.substr(eq + 1)));
  }
  return std::make_pair(std::string(spec.substr(0, first)), std::string(spec.substr(first + 1)));
}

}  // namespace kdflow

// diag.cpp — builders for one-line diagnostics, and overflow-checked size arithmetic.
#include "kdflow/support/diag.h"

#include <fmt/format.h>

namespace kdflow {
namespace {

// A diagnostic is one line: control characters that slipped into a message (for
// instance from a name read out of an input file) are replaced by spaces.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f') c = ' ';
  return s;
}

}  // namespace

Error source_error(const std::string& file, unsigned line, unsigned col, const std::string& msg, ExitCode code) {
  return Error{one_line(fmt::format("{}:{}:{}: error: {}", file, line, col, msg)), code};
}

Error json_error(const std::string& file, const std::string& pointer, const std::string& msg, ExitCode code) {
  if (pointer.empty()) return file_error(file, msg, code);
  return Error{one_line(fmt::format("{}:{}: error: {}", file, pointer, msg)), code};
}

Error file_error(const std::string& file, const std::string& msg, ExitCode code) {
  return Error{one_line(fmt::format("{}: error: {}", file, msg)), code};
}

std::string json_pointer_token(const std::string& token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

}  // namespace kdflow

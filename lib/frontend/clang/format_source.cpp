// format_source.cpp — format_cpp_source() with clang's libFormat (see format_source.h).
#include "kdflow/frontend/format_source.h"

#include <clang/Format/Format.h>
#include <clang/Tooling/Core/Replacement.h>

namespace kdflow {

namespace {

clang::format::FormatStyle style() {
  clang::format::FormatStyle s = clang::format::getGoogleStyle(clang::format::FormatStyle::LK_Cpp);
  s.ColumnLimit = 120;
  return s;
}

}  // namespace

const char* source_format_style() { return "BasedOnStyle: Google\nColumnLimit: 120\n"; }

bool can_format_cpp_source() { return true; }

std::string format_cpp_source(const std::string& code) {
  clang::tooling::Replacements r =
      clang::format::reformat(style(), code, {clang::tooling::Range(0, static_cast<unsigned>(code.size()))}, "run.cpp");
  llvm::Expected<std::string> out = clang::tooling::applyAllReplacements(code, r);
  if (!out) {
    llvm::consumeError(out.takeError());
    return code;
  }
  return *out;
}

}  // namespace kdflow

// format_source.h — C++ source text in clang-format's style (clang's libFormat, Google's style
// with 120 columns: the style kdflow codegen writes into OUT/.clang-format). Used by kdflow
// codegen on the programs it writes. A build without clang returns the text unchanged.
#pragma once

#include <string>

namespace kdflow {

/// The .clang-format file of that style.
const char* source_format_style();

/// `code` formatted; `code` as it is when kdflow is built without clang or libFormat fails.
std::string format_cpp_source(const std::string& code);

/// Whether format_cpp_source formats (a build with clang).
bool can_format_cpp_source();

}  // namespace kdflow

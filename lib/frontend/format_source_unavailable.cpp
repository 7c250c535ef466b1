// format_source_unavailable.cpp — format_cpp_source() in a build without clang: the text as it is.
#include "kdflow/frontend/format_source.h"

namespace kdflow {

const char* source_format_style() { return "BasedOnStyle: Google\nColumnLimit: 120\n"; }
bool can_format_cpp_source() { return false; }
std::string format_cpp_source(const std::string& code) { return code; }

}  // namespace kdflow

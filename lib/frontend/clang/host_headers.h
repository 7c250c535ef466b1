// host_headers.h — in-memory stand-ins for the headers TVM's host C includes, so that
// parsing needs no TVM or C library install and never reads the real file system.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kdflow::detail {

/// Directory under which the stand-ins are mapped (passed as -I).
inline constexpr const char* kStubIncludeDir = "/__kdflow__/include";
/// Directory holding the analyzed source in the in-memory file system.
inline constexpr const char* kVirtualInputDir = "/__kdflow__/input";

/// (path relative to kStubIncludeDir, contents) for every stand-in header.
const std::vector<std::pair<std::string, std::string>>& host_stub_headers();

}  // namespace kdflow::detail

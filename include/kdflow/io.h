// io.h — reading input files with a size cap, and writing outputs atomically.
// Never leaves a half-written output: content goes to a temp file that is renamed.
#pragma once

#include <cstdint>
#include <string>

#include "kdflow/diag.h"

namespace kdflow {

/// Default cap on any single input file read whole (1 GiB).
inline constexpr uint64_t kMaxInputFileBytes = 1ull << 30;

/// Reads a whole file. Missing → ExitCode::NoInput; larger than max_bytes → DataError.
Expected<std::string> read_file(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

/// Writes `content` to `path` through a temp file in the same directory and rename().
/// `path == "-"` writes to stdout.
Status write_file_atomic(const std::string& path, const std::string& content);

bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
/// The last path component ("a/b/graph.json" → "graph.json").
std::string base_name(const std::string& path);
/// Two paths name the same existing file (device and inode).
bool same_file(const std::string& a, const std::string& b);

}  // namespace kdflow

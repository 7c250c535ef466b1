// io.h — reading input files with a size cap, and writing outputs atomically.
// Never leaves a half-written output: content goes to a temp file that is renamed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kdflow/diag.h"

namespace kdflow {

/// Default cap on any single input file read whole (1 GiB).
inline constexpr uint64_t kMaxInputFileBytes = 1ull << 30;

/// Reads a whole file. Missing → ExitCode::NoInput; larger than max_bytes → DataError.
Expected<std::string> read_file(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

/// A read-only view of a whole input file. A regular file is mapped (mmap), so reading a
/// few headers of a multi-GiB params file touches only their pages; anything else (a pipe,
/// an empty file) is read into memory. Moves, never copies; unmaps when destroyed.
/// The mapping is private and read-only: if another process truncates the file while it is
/// mapped, reading the lost pages raises SIGBUS (as with LLVM's MemoryBuffer).
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view bytes() const { return map_ ? std::string_view(static_cast<const char*>(map_), size_) : owned_; }

 private:
  friend Expected<MappedFile> map_file(const std::string& path, uint64_t max_bytes);
  void* map_ = nullptr;
  size_t size_ = 0;
  std::string owned_;
};

/// Maps a whole file (see MappedFile). Errors as read_file.
Expected<MappedFile> map_file(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

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

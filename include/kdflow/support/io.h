// io.h — reading input files with a size cap, and writing outputs without harm.
// Never leaves a half-written file, and never replaces or unlinks anything but a regular
// file it was asked to write: devices, FIFOs and sockets are written in place, symlinks
// through to their target.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kdflow/support/diag.h"

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

/// Writes one output file, by what `path` names (docs/errors.md, "Outputs"):
/// - `-`: standard output;
/// - a regular file or a new path: atomically, through a temporary file in the same
///   directory that is fsync'ed and renamed onto it (an existing file keeps its permission
///   bits; a new one gets 0666 & ~umask);
/// - a symlink: resolved (at most 40 links), and its final target written as above in the
///   target's directory; the link stays a link. A link through /proc (`/dev/stdout`,
///   `/dev/fd/N`, `/proc/self/fd/N`) names an open file, not a path: it is written in
///   place (appending, when it is a regular file);
/// - anything else that exists (a character or block device, a FIFO): opened and written in
///   place, never renamed onto or unlinked. A directory or socket is an error.
/// Every write, fsync and close is checked: a failed or short write (ENOSPC, EIO) is
/// ExitCode::IoError (74) and no temporary file is left; a path that cannot be created is
/// CantCreate (73). While the temporary file exists, SIGINT, SIGTERM and SIGHUP remove it
/// before the process dies of the signal, and discard_pending_output() removes it too.
Status write_output(const std::string& path, const std::string& content);

/// The former name of write_output (same behaviour).
inline Status write_file_atomic(const std::string& path, const std::string& content) {
  return write_output(path, content);
}

/// Removes the temporary file of a write_output in progress, if any. Async-signal-safe:
/// for the watchdog and signal handlers that end the process while an output is written.
void discard_pending_output() noexcept;

/// Test seam: called by write_output right after its temporary file is created (nullptr:
/// none). Lets a test interrupt a write at its most delicate point.
void set_output_test_hook(void (*hook)());

bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
/// The last path component ("a/b/graph.json" → "graph.json").
std::string base_name(const std::string& path);
/// Two paths name the same existing file (device and inode), symlinks followed.
bool same_file(const std::string& a, const std::string& b);

}  // namespace kdflow

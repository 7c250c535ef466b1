// io.cpp — reading whole input files with a size cap, atomic writes of outputs.
#include "kdflow/io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace kdflow {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

Error read_error(const std::string& path, int err, ExitCode code) {
  return file_error(path, "cannot read: " + errno_text(err), code);
}

/// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  /// Closes now and reports close()'s result (a write error may surface only here).
  bool close_now() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }
  /// Hands the descriptor over: it is no longer closed here.
  void release() { fd_ = -1; }

 private:
  int fd_;
};

/// Writes all of `data` to `fd`, retrying short writes and EINTR. 0 or an errno.
int write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

/// The directory part of a path, for placing the temp file beside the target.
std::string dir_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// Permission bits for a new output: those of the file it replaces, else 0666 & ~umask.
mode_t output_mode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

/// Opens an input for reading: missing → NoInput, a directory → NoInput, a regular file
/// over `max_bytes` → DataError. `*st` gets its status.
Expected<int> open_input(const std::string& path, uint64_t max_bytes, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return read_error(path, errno, ExitCode::NoInput);
  FdCloser closer(fd);
  if (::fstat(fd, st) != 0) return read_error(path, errno, ExitCode::NoInput);
  if (S_ISDIR(st->st_mode)) return read_error(path, EISDIR, ExitCode::NoInput);
  if (S_ISREG(st->st_mode) && static_cast<uint64_t>(st->st_size) > max_bytes)
    return file_error(path, fmt::format("file is {} bytes, more than the limit of {} bytes",
                                        static_cast<uint64_t>(st->st_size), max_bytes));
  closer.release();
  return fd;
}

}  // namespace

Expected<std::string> read_file(const std::string& path, uint64_t max_bytes) {
  struct stat st;
  Expected<int> opened = open_input(path, max_bytes, &st);
  if (!opened) return opened.error();
  const int fd = *opened;
  FdCloser closer(fd);
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  // Read until EOF (the size may change, and pipes have none), never past the cap.
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return read_error(path, errno, ExitCode::IoError);
    }
    if (n == 0) break;
    if (out.size() + static_cast<uint64_t>(n) > max_bytes)
      return file_error(path, fmt::format("file is more than the limit of {} bytes", max_bytes));
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)), size_(std::exchange(o.size_, 0)), owned_(std::move(o.owned_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, size_);
    map_ = std::exchange(o.map_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owned_ = std::move(o.owned_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_) ::munmap(map_, size_);
}

Expected<MappedFile> map_file(const std::string& path, uint64_t max_bytes) {
  MappedFile out;
  {
    struct stat st;
    Expected<int> opened = open_input(path, max_bytes, &st);
    if (!opened) return opened.error();
    const int fd = *opened;
    FdCloser closer(fd);
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
      uint64_t size = static_cast<uint64_t>(st.st_size);
      if (size > std::numeric_limits<size_t>::max())
        return file_error(path, fmt::format("file is {} bytes, too large to map", size));
      void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        out.map_ = p;
        out.size_ = static_cast<size_t>(size);
        return std::move(out);  // NOLINT: Expected takes it by value
      }
      // A file system without mmap: fall back to reading it.
    }
  }
  Expected<std::string> text = read_file(path, max_bytes);
  if (!text) return text.error();
  out.owned_ = text.take();
  return std::move(out);  // NOLINT: Expected takes it by value
}

Status write_file_atomic(const std::string& path, const std::string& content) {
  if (path == "-") {
    if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() || std::fflush(stdout) != 0)
      return file_error("<stdout>", "cannot write: " + errno_text(errno), ExitCode::IoError);
    return Status::ok();
  }
  auto fail = [&](int err) { return file_error(path, "cannot write: " + errno_text(err), ExitCode::CantCreate); };
  std::string tmpl = dir_name(path) + "/." + base_name(path) + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) return fail(errno);
  FdCloser closer(fd);
  int err = write_all(fd, content.data(), content.size());
  if (err == 0 && ::fchmod(fd, output_mode(path)) != 0) err = errno;
  if (err == 0 && !closer.close_now()) err = errno;
  if (err == 0 && ::rename(name.data(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(name.data());
    return fail(err);
  }
  return Status::ok();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string base_name(const std::string& path) {
  size_t end = path.find_last_not_of('/');
  if (end == std::string::npos) return path.empty() ? std::string() : std::string("/");
  size_t slash = path.find_last_of('/', end);
  size_t start = slash == std::string::npos ? 0 : slash + 1;
  return path.substr(start, end + 1 - start);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace kdflow

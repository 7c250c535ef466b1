// io.cpp — reading whole input files with a size cap; writing outputs (see io.h).
#include "kdflow/support/io.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <iterator>
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
        return out;
      }
      // A file system without mmap: fall back to reading it.
    }
  }
  Expected<std::string> text = read_file(path, max_bytes);
  if (!text) return text.error();
  out.owned_ = text.take();
  return out;
}

namespace {

// The temporary file of the write_output in progress, for the signal handlers and the
// watchdog (discard_pending_output). Written before the flag is set, read only after.
char g_pending[4096];
std::atomic<bool> g_pending_set{false};
void (*g_test_hook)() = nullptr;

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void on_cleanup_signal(int sig) {
  discard_pending_output();
  // Die of the signal as if nothing had caught it (the exit status says which).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Installs the cleanup handlers for as long as it lives (a signal the process ignores,
/// as under nohup, stays ignored) and blocks them while the temporary file is being
/// created and registered, so no signal can fall between the two.
class CleanupSignals {
 public:
  CleanupSignals() {
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
      struct sigaction sa {};
      sa.sa_handler = on_cleanup_signal;
      sigemptyset(&sa.sa_mask);
      installed_[i] = ::sigaction(kCleanupSignals[i], nullptr, &old_[i]) == 0 &&
                      old_[i].sa_handler != SIG_IGN && ::sigaction(kCleanupSignals[i], &sa, nullptr) == 0;
    }
  }
  ~CleanupSignals() {
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i)
      if (installed_[i]) ::sigaction(kCleanupSignals[i], &old_[i], nullptr);
  }
  CleanupSignals(const CleanupSignals&) = delete;
  CleanupSignals& operator=(const CleanupSignals&) = delete;

  void block() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kCleanupSignals) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &saved_mask_);
  }
  void unblock() { ::pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr); }

 private:
  struct sigaction old_[std::size(kCleanupSignals)];
  bool installed_[std::size(kCleanupSignals)] = {};
  sigset_t saved_mask_;
};

/// Registers `name` as the pending temporary file; false if the name is too long to keep.
bool set_pending(const char* name) {
  size_t n = std::strlen(name);
  if (n >= sizeof g_pending) return false;
  std::memcpy(g_pending, name, n + 1);
  g_pending_set.store(true);
  return true;
}
void clear_pending() { g_pending_set.store(false); }

/// How write_output writes what a path names.
struct OutputTarget {
  enum class How { Atomic, InPlace } how = How::Atomic;
  std::string path;        ///< Atomic: the regular file (or new path) to replace; InPlace: what to open
  bool exists = false;     ///< Atomic: a regular file is there now
  struct stat st {};       ///< its status, when it exists
};

Error cant_create(const std::string& path, const std::string& why) {
  return file_error(path, "cannot write: " + why, ExitCode::CantCreate);
}

/// A symlink that lives in /proc names an open file (`/proc/self/fd/1`), not a path.
bool link_in_proc(const std::string& link) {
  char* dir = ::realpath(dir_name(link).c_str(), nullptr);
  if (!dir) return false;
  bool in_proc = std::strncmp(dir, "/proc/", 6) == 0;
  std::free(dir);
  return in_proc;
}

/// Follows `path` through its symlinks to what write_output must write.
Expected<OutputTarget> resolve_target(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops <= 40; ++hops) {
    OutputTarget t;
    t.path = p;
    if (::lstat(p.c_str(), &t.st) != 0) {
      if (errno == ENOENT) return t;  // a new file
      return cant_create(path, errno_text(errno));
    }
    if (S_ISLNK(t.st.st_mode)) {
      if (link_in_proc(p)) {
        t.how = OutputTarget::How::InPlace;
        return t;
      }
      std::vector<char> buf(static_cast<size_t>(PATH_MAX) + 1);
      ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
      if (n < 0) return cant_create(path, errno_text(errno));
      std::string to(buf.data(), static_cast<size_t>(n));
      p = (!to.empty() && to[0] == '/') ? to : dir_name(p) + "/" + to;
      continue;
    }
    if (S_ISREG(t.st.st_mode)) {
      t.exists = true;
      return t;
    }
    if (S_ISDIR(t.st.st_mode)) return cant_create(path, "is a directory");
    if (S_ISSOCK(t.st.st_mode)) return cant_create(path, "is a socket");
    t.how = OutputTarget::How::InPlace;  // a character or block device, a FIFO
    return t;
  }
  return cant_create(path, errno_text(ELOOP));
}

/// Writes into what `t.path` opens, without creating, truncating, renaming or unlinking.
Status write_in_place(const std::string& path, const OutputTarget& t, const std::string& content) {
  int fd = ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return cant_create(path, errno_text(errno));
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return cant_create(path, errno_text(errno));
  // A regular file reached through /proc (stdout redirected to a file) is the shell's open
  // file: append to it rather than overwrite what is there.
  const bool regular = S_ISREG(st.st_mode);
  if (regular && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_APPEND) != 0)
    return cant_create(path, errno_text(errno));
  auto io_fail = [&](int err) { return file_error(path, "cannot write: " + errno_text(err), ExitCode::IoError); };
  if (int err = write_all(fd, content.data(), content.size())) return io_fail(err);
  if (regular && ::fsync(fd) != 0) return io_fail(errno);
  if (!closer.close_now()) return io_fail(errno);
  return Status::ok();
}

/// Replaces the regular file (or creates the path) `t.path` through a temporary file.
Status write_replacing(const std::string& path, const OutputTarget& t, const std::string& content) {
  std::string tmpl = dir_name(t.path) + "/." + base_name(t.path) + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');

  CleanupSignals signals;
  signals.block();
  int fd = ::mkstemp(name.data());
  const int mkstemp_errno = errno;
  bool registered = fd >= 0 && set_pending(name.data());
  signals.unblock();
  if (fd < 0) return cant_create(path, errno_text(mkstemp_errno));
  FdCloser closer(fd);
  auto discard = [&] {
    ::unlink(name.data());
    clear_pending();
  };
  if (!registered) {
    discard();
    return cant_create(path, "the path is too long");
  }
  if (g_test_hook) g_test_hook();

  ExitCode code = ExitCode::IoError;
  int err = write_all(fd, content.data(), content.size());
  if (err == 0) {
    mode_t mode;
    if (t.exists) {
      mode = t.st.st_mode & 07777;
      // Root rewriting someone else's file keeps it theirs (best effort).
      if (::geteuid() == 0 && (t.st.st_uid != ::geteuid() || t.st.st_gid != ::getegid()))
        (void)!::fchown(fd, t.st.st_uid, t.st.st_gid);
    } else {
      mode_t mask = ::umask(0);
      ::umask(mask);
      mode = 0666 & ~mask;
    }
    if (::fchmod(fd, mode) != 0) err = errno;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (err == 0 && !closer.close_now()) err = errno;
  if (err == 0 && ::rename(name.data(), t.path.c_str()) != 0) {
    err = errno;
    code = ExitCode::CantCreate;
  }
  if (err != 0) {
    discard();
    return file_error(path, "cannot write: " + errno_text(err), code);
  }
  clear_pending();
  // Make the rename itself durable (best effort: not every file system syncs directories).
  int dir = ::open(dir_name(t.path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return Status::ok();
}

}  // namespace

Status write_output(const std::string& path, const std::string& content) {
  if (path == "-") {
    if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() || std::fflush(stdout) != 0)
      return file_error("<stdout>", "cannot write: " + errno_text(errno), ExitCode::IoError);
    return Status::ok();
  }
  if (path.empty()) return cant_create("<output>", "empty path");
  Expected<OutputTarget> t = resolve_target(path);
  if (!t) return t.error();
  if (t->how == OutputTarget::How::InPlace) return write_in_place(path, *t, content);
  return write_replacing(path, *t, content);
}

void discard_pending_output() noexcept {
  if (g_pending_set.load()) ::unlink(g_pending);
}

void set_output_test_hook(void (*hook)()) { g_test_hook = hook; }

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

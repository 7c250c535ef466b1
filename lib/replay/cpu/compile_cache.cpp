// compile_cache.cpp — see compile_cache.h.
#include "compile_cache.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <tuple>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>

#include <fmt/format.h>

#ifndef KDFLOW_VERSION
#define KDFLOW_VERSION "unknown"
#endif

namespace kdflow::cpu {

namespace {

constexpr char kMagic[8] = {'K', 'D', 'F', 'L', 'O', 'W', 'C', 'C'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 32 + 8 + 32;
constexpr const char* kSuffix = ".kdfc";
constexpr const char* kTempPrefix = ".tmp-";
constexpr time_t kStaleTempSeconds = 3600;

std::string hex(const std::array<uint8_t, 32>& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::array<uint8_t, 32> sha256(std::string_view s) {
  return llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

std::string errno_text() { return std::strerror(errno); }

/// Reads the whole file, or nullopt (errno set) when it cannot.
std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      errno = e;
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// mkdir -p with mode 0700 for every folder it creates.
bool make_dirs(const std::string& dir) {
  if (dir.empty()) return false;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_dirs(dir.substr(0, slash))) return false;
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

/// "" when `dir` (if it exists) is a folder the user owns and no one else may write.
std::string check_owner(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "";  // created by put(), mode 0700
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (st.st_uid != ::geteuid()) return dir + " belongs to another user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return dir + " may be written by other users";
  return "";
}

struct BuildIdSearch {
  std::string id;
};

int find_build_id(struct dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<BuildIdSearch*>(data);
  // The first object is the executable itself (its name is empty).
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    size_t left = ph.p_memsz;
    while (left >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof nh);
      size_t name = (nh.n_namesz + 3) & ~size_t{3}, desc = (nh.n_descsz + 3) & ~size_t{3};
      size_t total = sizeof nh + name + desc;
      if (total > left) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(p + sizeof nh, "GNU", 4) == 0) {
        const auto* d = reinterpret_cast<const uint8_t*>(p + sizeof nh + name);
        static const char* digits = "0123456789abcdef";
        for (size_t j = 0; j < nh.n_descsz; ++j) {
          out->id += digits[d[j] >> 4];
          out->id += digits[d[j] & 15];
        }
        return 1;
      }
      p += total;
      left -= total;
    }
  }
  return 1;  // only the executable
}

}  // namespace

CacheKey::CacheKey() = default;

CacheKey& CacheKey::add(std::string_view name, std::string_view value) {
  text_.append(name);
  text_ += '=';
  text_ += std::to_string(value.size());
  text_ += ':';
  text_.append(value);
  text_ += ';';
  return *this;
}

std::array<uint8_t, 32> CacheKey::digest() const { return sha256(text_); }
std::string CacheKey::hex() const { return cpu::hex(digest()); }

std::string default_cache_dir() {
  if (const char* d = std::getenv("KDFLOW_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/kdflow";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kdflow";
  return "";
}

uint64_t default_cache_max_bytes() {
  if (const char* m = std::getenv("KDFLOW_CACHE_MAX_MB"); m && *m) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(m, &end, 10);
    if (errno == 0 && end && *end == '\0' && v < (uint64_t{1} << 43)) return v << 20;
  }
  return kDefaultCacheMaxBytes;
}

std::string kdflow_build_id() {
  static const std::string id = [] {
    BuildIdSearch s;
    dl_iterate_phdr(find_build_id, &s);
    std::string out = std::string("kdflow ") + KDFLOW_VERSION;
    if (!s.id.empty()) return out + " build-id " + s.id;
    // No build id: the executable's size and time stamp stand in (a relink changes them).
    struct stat st {};
    if (::stat("/proc/self/exe", &st) == 0)
      return out + fmt::format(" exe {} bytes, mtime {}.{:09}", static_cast<uint64_t>(st.st_size),
                               static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec));
    return out + " build unknown";
  }();
  return id;
}

CompileCache::CompileCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (dir_.empty()) why_ = "no cache folder (set XDG_CACHE_HOME, HOME or KDFLOW_CACHE_DIR)";
  else why_ = check_owner(dir_);
}

std::string CompileCache::path(const CacheKey& key) const { return dir_ + "/" + key.hex() + kSuffix; }

std::optional<std::string> CompileCache::get(const CacheKey& key, std::string* why) const {
  why->clear();
  if (!usable()) {
    *why = why_;
    return std::nullopt;
  }
  const std::string file = path(key);
  std::optional<std::string> bytes = read_file(file);
  if (!bytes) {
    if (errno != ENOENT) *why = fmt::format("cannot read {}: {}", file, errno_text());
    return std::nullopt;
  }
  const std::string& b = *bytes;
  if (b.size() < kHeaderBytes) {
    *why = fmt::format("{} is truncated ({} bytes, shorter than its header)", file, b.size());
    return std::nullopt;
  }
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) {
    *why = file + " is not a kdflow cache entry";
    return std::nullopt;
  }
  if (get_le(b.data() + 8, 4) != kFormat || get_le(b.data() + 12, 4) != kHeaderBytes) {
    *why = file + " is of another cache format";
    return std::nullopt;
  }
  const std::array<uint8_t, 32> d = key.digest();
  if (std::memcmp(b.data() + 16, d.data(), d.size()) != 0) {
    *why = file + " holds another key";
    return std::nullopt;
  }
  const uint64_t size = get_le(b.data() + 48, 8);
  if (size != b.size() - kHeaderBytes) {
    *why = fmt::format("{} is truncated or padded ({} payload bytes, its header says {})", file,
                       b.size() - kHeaderBytes, size);
    return std::nullopt;
  }
  std::string_view payload(b.data() + kHeaderBytes, b.size() - kHeaderBytes);
  const std::array<uint8_t, 32> sum = sha256(payload);
  if (std::memcmp(b.data() + 56, sum.data(), sum.size()) != 0) {
    *why = file + " is corrupt (its checksum does not match)";
    return std::nullopt;
  }
  ::utimensat(AT_FDCWD, file.c_str(), nullptr, 0);  // recently used; a failure only ages it
  return std::string(payload);
}

std::string CompileCache::put(const CacheKey& key, std::string_view payload) const {
  if (!usable()) return why_;
  if (payload.size() + kHeaderBytes > max_bytes_)
    return fmt::format("the entry ({} bytes) is larger than the cache's cap ({} bytes)", payload.size() + kHeaderBytes,
                       max_bytes_);
  if (!make_dirs(dir_)) return fmt::format("cannot create {}: {}", dir_, errno_text());
  if (std::string owner = check_owner(dir_); !owner.empty()) return owner;
  std::string header(kMagic, sizeof kMagic);
  put_u32(header, kFormat);
  put_u32(header, kHeaderBytes);
  const std::array<uint8_t, 32> d = key.digest();
  header.append(reinterpret_cast<const char*>(d.data()), d.size());
  put_u64(header, payload.size());
  const std::array<uint8_t, 32> sum = sha256(payload);
  header.append(reinterpret_cast<const char*>(sum.data()), sum.size());

  std::string temp = dir_ + "/" + kTempPrefix + key.hex().substr(0, 16) + "-XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return fmt::format("cannot create a file in {}: {}", dir_, errno_text());
  bool ok = write_all(fd, header.data(), header.size()) && write_all(fd, payload.data(), payload.size());
  int e = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    return fmt::format("cannot write {}: {}", temp, std::strerror(e));
  }
  const std::string file = path(key);
  if (::rename(temp.c_str(), file.c_str()) != 0) {
    e = errno;
    ::unlink(temp.c_str());
    return fmt::format("cannot rename {} to {}: {}", temp, file, std::strerror(e));
  }
  trim();
  return "";
}

void CompileCache::remove(const CacheKey& key) const {
  if (usable()) ::unlink(path(key).c_str());
}

void CompileCache::trim() const {
  if (!usable()) return;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return;
  struct Entry {
    int64_t sec, nsec;
    std::string name;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  const time_t now = std::time(nullptr);
  while (struct dirent* de = ::readdir(d)) {
    std::string name = de->d_name;
    const bool temp = name.rfind(kTempPrefix, 0) == 0;
    const bool entry = name.size() > std::strlen(kSuffix) &&
                       name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) == 0;
    if (!temp && !entry) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (temp) {
      if (now - st.st_mtim.tv_sec > kStaleTempSeconds) ::unlinkat(::dirfd(d), name.c_str(), 0);
      continue;
    }
    entries.push_back({st.st_mtim.tv_sec, st.st_mtim.tv_nsec, name, static_cast<uint64_t>(st.st_size)});
    total += static_cast<uint64_t>(st.st_size);
  }
  if (total > max_bytes_) {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.sec, a.nsec, a.name) < std::tie(b.sec, b.nsec, b.name); });
    for (const Entry& en : entries) {
      if (total <= max_bytes_) break;
      if (::unlinkat(::dirfd(d), en.name.c_str(), 0) == 0 || errno == ENOENT) total -= en.bytes;
    }
  }
  ::closedir(d);
}

void PayloadWriter::u64(uint64_t v) { put_u64(out_, v); }

void PayloadWriter::bytes(std::string_view s) {
  put_u64(out_, s.size());
  out_.append(s);
}

bool PayloadReader::u64(uint64_t* v) {
  if (!ok_ || in_.size() - pos_ < 8) return ok_ = false;
  *v = get_le(in_.data() + pos_, 8);
  pos_ += 8;
  return true;
}

bool PayloadReader::bytes(std::string_view* s) {
  uint64_t n = 0;
  if (!u64(&n)) return false;
  if (n > in_.size() - pos_) return ok_ = false;
  *s = in_.substr(pos_, n);
  pos_ += n;
  return true;
}

bool PayloadReader::bytes(std::string* s) {
  std::string_view v;
  if (!bytes(&v)) return false;
  s->assign(v);
  return true;
}

}  // namespace kdflow::cpu

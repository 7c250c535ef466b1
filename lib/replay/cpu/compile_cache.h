// compile_cache.h — the CPU back end's compile cache: a folder of entries, each the machine code
// (and what the back end knows of its kernels) for one key, kept across runs. Knows nothing of
// clang, the JIT or kernels: it stores and verifies bytes; jit.cpp decides what a key holds.
//
// An entry is one file, `<SHA-256 of the key, hex>.kdfc`: a header (magic, format version, the
// key's SHA-256, the payload's size and SHA-256), then the payload. get() returns a payload only
// when all of it checks out; anything else (missing, short, another key, a changed byte) is a
// miss with its reason, never a crash. put() writes a temporary file in the same folder and
// renames it over the entry (atomic on POSIX), so a concurrent reader sees the old entry, the
// new one or none, never a torn one. After each put() the folder is trimmed to its size cap,
// least recently used first (a hit touches its entry's modification time).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kdflow::cpu {

/// Default size cap of the cache folder: 1 GiB (KDFLOW_CACHE_MAX_MB overrides, in MiB).
constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{1} << 30;

/// The key's fields, each written as `name=<length>:<bytes>;` into one SHA-256, so that no two
/// different lists of fields give the same bytes.
class CacheKey {
 public:
  CacheKey();
  CacheKey& add(std::string_view name, std::string_view value);
  /// The SHA-256 of every field added so far.
  std::array<uint8_t, 32> digest() const;
  /// digest() in lower-case hex (64 characters): the entry's file name, without `.kdfc`.
  std::string hex() const;

 private:
  std::string text_;
};

/// Where the cache lives: $KDFLOW_CACHE_DIR, else $XDG_CACHE_HOME/kdflow, else
/// $HOME/.cache/kdflow; "" when none of them is set.
std::string default_cache_dir();

/// The size cap: $KDFLOW_CACHE_MAX_MB (MiB) when set to a number, else kDefaultCacheMaxBytes.
uint64_t default_cache_max_bytes();

/// What identifies the running kdflow's code: its version and the GNU build id of the
/// executable (any change to any code linked into it changes it), else the executable's
/// size and modification time.
std::string kdflow_build_id();

class CompileCache {
 public:
  /// A cache in `dir` (created on the first put(), mode 0700). A folder that is not the
  /// user's own, or that others may write, is not used (usable() false, why() says so).
  CompileCache(std::string dir, uint64_t max_bytes);

  bool usable() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }

  /// The payload stored for `key`, verified, or nullopt with the reason in *why (empty when
  /// there simply is no entry). A verified hit touches the entry (least recently used last).
  std::optional<std::string> get(const CacheKey& key, std::string* why) const;
  /// Stores `payload` for `key` atomically and trims the folder to the cap. "" or the reason
  /// it could not (never fatal: the caller goes on without the cache).
  std::string put(const CacheKey& key, std::string_view payload) const;
  /// Removes the entry for `key` (a bad entry the caller could not use).
  void remove(const CacheKey& key) const;
  /// Removes least recently used entries until the folder holds at most the cap, and
  /// temporary files older than an hour (left by a run that died while writing).
  void trim() const;

  /// The entry's file for `key` (for tests).
  std::string path(const CacheKey& key) const;

 private:
  std::string dir_;
  uint64_t max_bytes_;
  std::string why_;
};

/// Bytes in, fields out: the little-endian writer and bounds-checked reader of a payload.
class PayloadWriter {
 public:
  void u64(uint64_t v);
  void bytes(std::string_view s);  ///< length, then the bytes
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class PayloadReader {
 public:
  explicit PayloadReader(std::string_view in) : in_(in) {}
  /// False once any read ran past the end; every later read fails too.
  bool u64(uint64_t* v);
  bool bytes(std::string* s);
  bool bytes(std::string_view* s);
  bool at_end() const { return ok_ && pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace kdflow::cpu

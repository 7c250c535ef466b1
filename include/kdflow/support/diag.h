// diag.h — errors returned across the library boundary, and exit codes.
// Library code returns Expected<T>; it never prints, exits or lets an exception escape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kdflow {

/// Process exit codes (sysexits.h style). README.md documents the table.
enum class ExitCode : int {
  Ok = 0,
  Usage = 64,        ///< bad command line
  DataError = 65,    ///< an input file is malformed or inconsistent with another
  NoInput = 66,      ///< an input file is missing or unreadable
  Unavailable = 69,  ///< a feature is not available (no CUDA driver, built without clang)
  Software = 70,     ///< internal error (a bug in kdflow)
  CantCreate = 73,   ///< an output file cannot be written
  IoError = 74,      ///< I/O error while reading or writing
};

/// One error. `message` is a complete one-line diagnostic, already carrying its
/// position: `file:line:col: error: ...` for source files, or
/// `file:/json/pointer: error: ...` for JSON inputs.
struct Error {
  std::string message;
  ExitCode code = ExitCode::DataError;
};

/// Builders for the two diagnostic shapes.
Error source_error(const std::string& file, unsigned line, unsigned col, const std::string& msg,
                   ExitCode code = ExitCode::DataError);
Error json_error(const std::string& file, const std::string& pointer, const std::string& msg,
                 ExitCode code = ExitCode::DataError);
Error file_error(const std::string& file, const std::string& msg, ExitCode code = ExitCode::DataError);

/// Escapes a JSON-pointer reference token (RFC 6901: ~ → ~0, / → ~1).
std::string json_pointer_token(const std::string& token);

/// A value or an Error. Deliberately small: `if (!x) return x.error(); use(*x);`
template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}             // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}         // NOLINT: implicit by design
  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }
  T take() { return std::move(std::get<0>(v_)); }

 private:
  std::variant<T, Error> v_;
};

/// Expected<void>.
class Status {
 public:
  Status() = default;
  Status(Error error) : err_(std::move(error)) {}  // NOLINT: implicit by design
  static Status ok() { return Status(); }
  explicit operator bool() const { return !err_.has_value(); }
  const Error& error() const { return *err_; }

 private:
  std::optional<Error> err_;
};

/// Overflow-checked arithmetic on sizes read from input files.
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out);
bool checked_add(uint64_t a, uint64_t b, uint64_t* out);

}  // namespace kdflow
